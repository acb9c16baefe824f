//! Helpers of the queueing tests (`tests/queueing.rs`): a watch of a namespace's Jobs that
//! records the most running at once and the order in which workflows got their first Job
//! ([`RunningJobs`]), and a stand-in for Kueue ([`Kueue`]) that admits Jobs by unsuspending
//! them up to a quota and preempts them by suspending them again, as Kueue documents.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;
use workflow_operator_core::jobs::{ANNOTATION_WORKFLOW, LABEL_QUEUE_NAME};

use super::{DEADLINE, Namespace, job_outcome};

/// Whether a Job occupies a slot: not finished, not suspended.
pub fn is_running(job: &Job) -> bool {
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    job_outcome(job).is_none() && !suspended
}

#[derive(Default)]
struct Seen {
    running: BTreeSet<String>,
    peak: usize,
    /// The running Jobs when the peak was reached.
    at_peak: Vec<String>,
    /// Workflow -> order of the event in which its first Job appeared.
    first_job: BTreeMap<String, u64>,
    events: u64,
}

/// Every change of the namespace's Jobs, from a watch (each change seen, not samples): the
/// most Jobs running at once and when each workflow got its first Job.
pub struct RunningJobs {
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl Drop for RunningJobs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunningJobs {
    /// Starts watching, once the first listing is in.
    pub async fn start(ns: &Namespace) -> RunningJobs {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            let api = ns.jobs();
            tokio::spawn(async move {
                let mut listed_tx = Some(listed_tx);
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    let mut seen = seen.lock().expect("running jobs lock");
                    seen.events += 1;
                    let order = seen.events;
                    match event {
                        watcher::Event::InitApply(job) | watcher::Event::Apply(job) => {
                            if let Some(workflow) = job.annotations().get(ANNOTATION_WORKFLOW) {
                                seen.first_job.entry(workflow.clone()).or_insert(order);
                            }
                            if is_running(&job) {
                                seen.running.insert(job.name_any());
                            } else {
                                seen.running.remove(&job.name_any());
                            }
                        }
                        watcher::Event::Delete(job) => {
                            seen.running.remove(&job.name_any());
                        }
                        watcher::Event::InitDone => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        watcher::Event::Init => {}
                    }
                    if seen.running.len() > seen.peak {
                        seen.peak = seen.running.len();
                        seen.at_peak = seen.running.iter().cloned().collect();
                    }
                }
            })
        };
        tokio::time::timeout(DEADLINE, listed)
            .await
            .expect("the job watch starts")
            .expect("the job watch lists");
        RunningJobs { seen, task }
    }

    /// The most Jobs seen running at once, and which they were.
    pub fn peak(&self) -> (usize, Vec<String>) {
        let seen = self.seen.lock().expect("running jobs lock");
        (seen.peak, seen.at_peak.clone())
    }

    /// Jobs running now, as last seen.
    pub fn running(&self) -> usize {
        self.seen.lock().expect("running jobs lock").running.len()
    }

    /// The order of the event in which `workflow` got its first Job, if it has one.
    pub fn first_job(&self, workflow: &str) -> Option<u64> {
        let seen = self.seen.lock().expect("running jobs lock");
        seen.first_job.get(workflow).copied()
    }
}

/// Kueue as its documentation describes it, for one LocalQueue of a namespace: a Job labelled
/// `kueue.x-k8s.io/queue-name: <queue>` waits suspended until admitted; Kueue admits it by
/// setting `spec.suspend: false` when the queue's quota has room (here: `quota` Jobs at once),
/// oldest first ("Run a Kubernetes Job", <https://kueue.sigs.k8s.io/docs/tasks/run/jobs/>); a
/// preempted Job is evicted by suspending it again, its `status.startTime` cleared, and requeued
/// (<https://kueue.sigs.k8s.io/docs/concepts/preemption/>; kubernetes-sigs/kueue
/// pkg/controller/jobs/job: "Reset start time so we can update the scheduling directives later
/// when unsuspending"). [`Kueue::hold`] stops admitting (a full cluster queue), so a test
/// can see a Job wait.
pub struct Kueue {
    api: Api<Job>,
    queue: String,
    quota: usize,
    held: Arc<Mutex<bool>>,
    task: Option<JoinHandle<()>>,
}

impl Drop for Kueue {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Kueue {
    /// Starts admitting the Jobs of `queue` in `ns`, at most `quota` running at once.
    pub fn start(ns: &Namespace, queue: &str, quota: usize) -> Kueue {
        let mut kueue = Kueue {
            api: ns.jobs(),
            queue: queue.to_string(),
            quota,
            held: Arc::new(Mutex::new(false)),
            task: None,
        };
        kueue.task = Some(tokio::spawn(kueue.admit_loop()));
        kueue
    }

    /// Stops admitting until [`Kueue::release`].
    pub fn hold(&self) {
        *self.held.lock().expect("kueue lock") = true;
    }

    /// Admits again.
    pub fn release(&self) {
        *self.held.lock().expect("kueue lock") = false;
    }

    /// Preempts the Job `name`: suspends it again and clears its start time, as Kueue evicts a
    /// Workload.
    pub async fn preempt(&self, name: &str) {
        let suspend = Patch::Merge(serde_json::json!({"spec": {"suspend": true}}));
        self.api
            .patch(name, &PatchParams::default(), &suspend)
            .await
            .expect("suspending the job");
        let reset = Patch::Merge(serde_json::json!({"status": {"startTime": null}}));
        self.api
            .patch_status(name, &PatchParams::default(), &reset)
            .await
            .expect("clearing the job's start time");
    }

    /// The loop: at every change of the queue's Jobs (and every 100 ms while some wait), admits
    /// the oldest suspended ones while fewer than the quota run.
    fn admit_loop(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let api = self.api.clone();
        let held = self.held.clone();
        let quota = self.quota;
        let selector = format!("{LABEL_QUEUE_NAME}={}", self.queue);
        async move {
            let config = watcher::Config::default().labels(&selector);
            let store = kube::runtime::reflector::store::Writer::<Job>::default();
            let reader = store.as_reader();
            let events = kube::runtime::reflector(store, watcher(api.clone(), config))
                .default_backoff()
                .boxed();
            let mut events = events.fuse();
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
            // Jobs admitted that the store does not show unsuspended yet: they count as running.
            let mut admitted: BTreeSet<String> = BTreeSet::new();
            loop {
                tokio::select! {
                    event = events.next() => if event.is_none() { return },
                    _ = tick.tick() => {}
                }
                if *held.lock().expect("kueue lock") {
                    continue;
                }
                let jobs = reader.state();
                admitted.retain(|name| {
                    jobs.iter().any(|j| {
                        &j.name_any() == name
                            && j.spec.as_ref().and_then(|s| s.suspend) == Some(true)
                    })
                });
                let running = jobs.iter().filter(|j| is_running(j)).count() + admitted.len();
                let mut waiting: Vec<_> = jobs
                    .iter()
                    .filter(|j| {
                        j.spec.as_ref().and_then(|s| s.suspend) == Some(true)
                            && job_outcome(j).is_none()
                            && j.metadata.deletion_timestamp.is_none()
                    })
                    .collect();
                waiting.sort_by_key(|j| (j.creation_timestamp().map(|t| t.0), j.name_any()));
                for job in waiting.into_iter().take(quota.saturating_sub(running)) {
                    let admit = Patch::Merge(serde_json::json!({"spec": {"suspend": false}}));
                    // A Job gone or changed meanwhile is seen again at the next change.
                    if api
                        .patch(&job.name_any(), &PatchParams::default(), &admit)
                        .await
                        .is_ok()
                    {
                        admitted.insert(job.name_any());
                    }
                }
            }
        }
    }
}
