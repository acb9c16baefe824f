//! Runs one pod to its end: its volumes, then its init containers in order (sidecars among them
//! left running, [`super::sidecars`]), then its main container, then the sidecars stopped; and
//! the pod's status written at each change ([`super::status`]). The kubelet
//! ([`crate::kubelet::Kubelet`]) starts a [`Runner`] per pod it claims.
//!
//! What a container needs before it runs is made in [`prepare`]; its runs, restarted as its kind
//! and the pod's `restartPolicy` say ([`super::init_containers::restarts`]), in [`container`].
//!
//! Each container's state is recorded in the runner's [`Records`] as it changes; every write of
//! the pod's status is made from all of them while they are locked, so writes from the runner
//! and its sidecars' tasks never undo one another. A pod without init containers is written as
//! often as before they ran: once its container runs, once when it ends (and at each restart).
//!
//! A pod with `activeDeadlineSeconds` is stopped once past it ([`super::active_deadline`]): its
//! containers are stopped as a deleted pod's are, and its final status says `DeadlineExceeded`;
//! the pod is kept.

mod container;
mod prepare;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::active_deadline;
use super::init_containers::{Kind, Slot, init_containers};
use super::sidecars::{Handle, Sidecars, Start};
use super::status::{self, Record, Records, State};
use super::{
    Claim, Deadline, KillAt, Kubelet, PodEvents, PodMode, Shared, StoreSources, write_pod_status,
};
use crate::api::resources::ResourceInfo;
use crate::storage::store::{Store, StoredObject, now_rfc3339};
use container::{ContainerRun, Ended};

/// How running a pod's containers ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The kubelet runs nothing more for the pod: its final status is to be written.
    Finished,
    /// The pod is gone, or the kubelet stopped: nothing is written.
    Gone,
}

/// Runs one pod to its end.
pub(super) struct Runner {
    store: Store,
    info: Arc<ResourceInfo>,
    sources: Arc<StoreSources>,
    shared: Arc<Shared>,
    events: Arc<PodEvents>,
    pub pod: Arc<StoredObject>,
    cancel: CancellationToken,
    /// When to kill the running container, once the pod is deleted.
    pub terminating: watch::Receiver<KillAt>,
    /// What is known of each container, written as the pod's status.
    records: Mutex<Records>,
    /// The pod's `status.startTime`: kept if it has one, else when the runner started it.
    start_time: String,
    /// The same on the monotonic clock: its `activeDeadlineSeconds` counts from it.
    started: tokio::time::Instant,
    /// Its `activeDeadlineSeconds` as it changes.
    deadline: watch::Receiver<Deadline>,
    /// The pod ran past its `activeDeadlineSeconds` and is being (or was) stopped for it.
    past_deadline: AtomicBool,
}

impl Runner {
    pub fn new(kubelet: &Kubelet, pod: Arc<StoredObject>, claim: Claim) -> Self {
        let (cancel, terminating, deadline) = claim;
        let records = Mutex::new(Records::new(init_containers(&pod.value).len()));
        let stored = pod
            .value
            .pointer("/status/startTime")
            .and_then(Value::as_str);
        let start_time = stored.map_or_else(now_rfc3339, str::to_string);
        let ago = stored.map_or(Duration::ZERO, |at| {
            active_deadline::since(at, chrono::Utc::now())
        });
        let now = tokio::time::Instant::now();
        Self {
            start_time,
            started: now.checked_sub(ago).unwrap_or(now),
            past_deadline: AtomicBool::new(false),
            store: kubelet.store.clone(),
            info: kubelet.pods_info.clone(),
            sources: kubelet.sources.clone(),
            shared: kubelet.shared.clone(),
            events: kubelet.events.clone(),
            pod,
            cancel,
            terminating,
            deadline,
            records,
        }
    }

    pub async fn run(self: &Arc<Self>) {
        if let PodMode::Simulated(after) = self.shared.mode {
            self.simulate(after).await;
            return;
        }
        let main = self.main_container();
        let main_name = main.get("name").and_then(Value::as_str).unwrap_or_default();
        let pod = &self.pod;
        (self.shared).new_pod_log(pod.namespace(), pod.name(), pod.uid(), main_name);
        let mut sidecars = Sidecars::default();
        let ending = self.run_until_deadline(&main, &mut sidecars).await;
        if !sidecars.is_empty() {
            if ending == Ending::Finished {
                // How the main container ended, while its sidecars stop.
                self.publish(false);
            }
            sidecars
                .stop(self.sidecar_deadline(), self.terminating.clone())
                .await;
        }
        if ending == Ending::Finished {
            self.publish(true);
        }
    }

    /// [`Runner::run_containers`], the pod stopped once past its `activeDeadlineSeconds`.
    async fn run_until_deadline(self: &Arc<Self>, main: &Value, sidecars: &mut Sidecars) -> Ending {
        let containers = self.run_containers(main, sidecars);
        tokio::pin!(containers);
        let ending = tokio::select! {
            ending = &mut containers => ending,
            () = self.active_deadline() => {
                self.exceed_deadline();
                containers.await
            }
        };
        match ending {
            // Stopped at its deadline before its containers ran (waiting for its volumes): it
            // ends all the same, unless the kubelet stopped.
            Ending::Gone if self.is_past_deadline() && !self.cancel.is_cancelled() => {
                Ending::Finished
            }
            ending => ending,
        }
    }

    /// Resolves once the pod is past its `activeDeadlineSeconds` (as it is now: it may be set
    /// or lowered while the pod runs); never without one.
    async fn active_deadline(&self) {
        let mut deadline = self.deadline.clone();
        loop {
            let limit = *deadline.borrow_and_update();
            let past = async {
                match limit {
                    Some(limit) => tokio::time::sleep_until(self.started + limit).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = past => return,
                changed = deadline.changed() => {
                    if changed.is_err() {
                        // The pod is no longer the kubelet's to run: nothing changes it now.
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }

    /// The pod is past its deadline: its containers are stopped (SIGTERM now, SIGKILL after
    /// its grace period), as a deleted pod's are, and its final status will say so.
    fn exceed_deadline(&self) {
        self.past_deadline.store(true, Ordering::Relaxed);
        let pod = &self.pod;
        (self.events.kubelet).normal(pod, active_deadline::REASON, active_deadline::MESSAGE);
        let kill_at = tokio::time::Instant::now() + active_deadline::grace_period(&pod.value);
        self.shared.terminate(pod.uid(), kill_at);
    }

    fn is_past_deadline(&self) -> bool {
        self.past_deadline.load(Ordering::Relaxed)
    }

    fn main_container(&self) -> Value {
        (self.pod.value.pointer("/spec/containers/0").cloned()).unwrap_or(json!({}))
    }

    /// The pod's volumes, its init containers in order and its main container, until the
    /// kubelet runs nothing more for it; the sidecars started are in `sidecars`, running.
    async fn run_containers(self: &Arc<Self>, main: &Value, sidecars: &mut Sidecars) -> Ending {
        let mut volumes = match self.wait_for_volumes().await {
            Ok(volumes) => volumes.map(Arc::new),
            Err(None) => return Ending::Gone,
            Err(Some(why)) => {
                let first = match init_containers(&self.pod.value) {
                    [] => Slot::Main,
                    _ => Slot::Init(0),
                };
                self.note(first, |r| r.state = status::cannot_start(why));
                return Ending::Finished;
            }
        };
        for (i, container) in init_containers(&self.pod.value).iter().enumerate() {
            let slot = Slot::Init(i);
            let prepared = match self.prepare(slot, container, &mut volumes).await {
                Ok(prepared) => prepared,
                Err(ending) => return ending,
            };
            let stopped = match Kind::of_init(container) {
                Kind::Sidecar => self.start_sidecar(slot, prepared, sidecars).await,
                _ => self.run_to_completion(slot, &prepared).await,
            };
            if let Some(ending) = stopped {
                return ending;
            }
        }
        let prepared = match self.prepare(Slot::Main, main, &mut volumes).await {
            Ok(prepared) => prepared,
            Err(ending) => return ending,
        };
        let run = ContainerRun::new(Slot::Main, Kind::Main, &prepared, self.terminating.clone());
        match self.run_container(run).await {
            Ended::Gone => Ending::Gone,
            Ended::Terminated(_) | Ended::Stopped => Ending::Finished,
        }
    }

    /// Runs a regular init container until it has succeeded (`None`: the next one may start)
    /// or the pod ends.
    async fn run_to_completion(&self, slot: Slot, prepared: &prepare::Prepared) -> Option<Ending> {
        let run = ContainerRun::new(slot, Kind::Init, prepared, self.terminating.clone());
        match self.run_container(run).await {
            Ended::Terminated(State::Terminated { exit_code: 0, .. }) => None,
            Ended::Gone => Some(Ending::Gone),
            // Failed under `restartPolicy: Never`, or stopped: the pod ends.
            Ended::Terminated(_) | Ended::Stopped => Some(Ending::Finished),
        }
    }

    /// Starts a sidecar's task, which runs it and starts it again whenever it exits until it
    /// is stopped, and waits until it runs (`None`: the next container may start).
    async fn start_sidecar(
        self: &Arc<Self>,
        slot: Slot,
        prepared: prepare::Prepared,
        sidecars: &mut Sidecars,
    ) -> Option<Ending> {
        let runner = Arc::clone(self);
        let task = move |handle: Handle| async move {
            let mut run = ContainerRun::new(slot, Kind::Sidecar, &prepared, handle.stop);
            run.started = Some(handle.started);
            runner.run_container(run).await;
        };
        let mut terminating = self.terminating.clone();
        let interrupted = async move {
            tokio::select! {
                () = self.cancel.cancelled() => {}
                _ = terminating.wait_for(Option::is_some) => {}
            }
        };
        match sidecars.start(task, interrupted).await {
            Start::Started => None,
            Start::Interrupted if self.cancel.is_cancelled() => Some(Ending::Gone),
            // Deleted meanwhile, or it can never start (as its status says).
            Start::Interrupted | Start::Ended => Some(Ending::Finished),
        }
    }

    /// When the sidecars are killed once the main container is done: after the pod's
    /// `terminationGracePeriodSeconds` (default 30), or when its deletion says if sooner.
    fn sidecar_deadline(&self) -> tokio::time::Instant {
        let grace = (self.pod.value)
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        let at =
            tokio::time::Instant::now() + Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        match *self.terminating.borrow() {
            Some(deleted) => at.min(deleted),
            None => at,
        }
    }

    /// The pod's `restartPolicy`.
    fn policy(&self) -> &str {
        (self.pod.value)
            .pointer("/spec/restartPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Always")
    }

    /// Changes a container's record, without writing it.
    fn note(&self, slot: Slot, change: impl FnOnce(&mut Record)) {
        self.records
            .lock()
            .expect("records lock poisoned")
            .update(slot, change);
    }

    /// Writes the pod's status from the records; `terminal`: the kubelet runs nothing more for
    /// it. False when the pod is gone (or replaced by another of the same name).
    fn publish(&self, terminal: bool) -> bool {
        // Locked while written, so the last write has the latest of every container.
        let records = self.records.lock().expect("records lock poisoned");
        let past_deadline = terminal && self.is_past_deadline();
        write_pod_status(&self.store, &self.info, &self.pod, |old| {
            let mut status = status::pod_status(old, old.get("status"), &records, terminal);
            if old.pointer("/status/startTime").is_none() {
                status["startTime"] = json!(self.start_time);
            }
            if past_deadline {
                active_deadline::mark(&mut status);
            }
            status
        })
    }

    /// [`Runner::note`], then [`Runner::publish`] (not terminal).
    fn set(&self, slot: Slot, change: impl FnOnce(&mut Record)) -> bool {
        self.note(slot, change);
        self.publish(false)
    }

    /// No process: the init containers are done at once and the main container succeeds after
    /// `after`.
    async fn simulate(&self, after: Duration) {
        let started_at = now_rfc3339();
        self.records
            .lock()
            .expect("records lock poisoned")
            .complete_init(&started_at);
        let running = State::Running {
            started_at: started_at.clone(),
        };
        if !self.set(Slot::Main, |r| r.state = running) {
            return;
        }
        let mut terminating = self.terminating.clone();
        tokio::select! {
            _ = tokio::time::sleep(after) => {}
            _ = self.cancel.cancelled() => return,
            // No process to stop: a deleted simulated pod goes at once.
            _ = terminating.wait_for(Option::is_some) => return,
        }
        self.note(Slot::Main, |r| {
            r.state = status::completed(started_at, now_rfc3339())
        });
        self.publish(true);
    }
}
