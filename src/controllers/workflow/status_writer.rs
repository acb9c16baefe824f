//! Writes of workflow statuses, in order, some of them without the handler waiting: this module
//! writes; `status_policy` chooses, for each pass, which way.
//!
//! A status write costs the API server the whole object: for a 10,000-step workflow 765 KB,
//! 90 to 200 ms on the build machine. A pass that waited for each one would hold up its next Job
//! creates (about a hundred dispatches) by 100 ms or more. So while a workflow runs, a status
//! that only adds progress is written *behind*: handed to a task that writes it while the next
//! passes go on. Everything else (a phase change, a plan in full, a terminal outcome) is written
//! at once, and the handler waits.
//!
//! Writes of one workflow never overlap and never go back: each holds the workflow's write
//! lock, the task always writes the newest status handed to it (older ones it skips), and a
//! write at once first waits for the write in flight and drops what is pending, since it was
//! rendered from a newer state. A status written behind that fails is tried again, with a
//! growing delay, until it is written or a newer one replaces it; a workflow that is gone (404)
//! is given up.
//!
//! Step counts and Events are taken against [`StatusWriter::with_newest`], the newest status handed
//! over, not the one stored: a status on its way would otherwise be counted twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use workflow_operator_core::crd::{WorkFlow, WorkFlowStatus};

/// First and longest delay before a status written behind is tried again.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Called for every status write behind that the API refuses (it is tried again): the
/// operator counts these as API errors.
pub type OnRefused = Arc<dyn Fn() + Send + Sync>;

/// The status writes of every workflow, and the newest copy of each workflow they returned.
#[derive(Default)]
pub struct StatusWriter {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// What our last status write returned, per workflow uid: newer than the watch's copy
    /// until the watch catches up, so a quick next event does not plan from a stale status.
    written: Arc<Mutex<HashMap<String, Arc<Written>>>>,
    on_refused: Option<OnRefused>,
}

/// One workflow's writes.
#[derive(Default)]
struct Slot {
    /// Held for each write of the workflow's status, behind or at once.
    writing: tokio::sync::Mutex<()>,
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    /// The newest status handed over, written or not.
    newest: Option<WorkFlowStatus>,
    /// The status waiting to be written behind.
    pending: Option<Pending>,
    /// Whether a task is writing this workflow's statuses behind.
    draining: bool,
}

/// The part of a status write's answer kept until the watch catches up with it: the status
/// and the resourceVersion it was stored at. Not the spec: a status write does not change it,
/// and a copy per workflow in flight was a fifth of the operator's heap in a burst.
struct Written {
    resource_version: u64,
    status: Option<WorkFlowStatus>,
}

struct Pending {
    api: Api<WorkFlow>,
    name: String,
    status: WorkFlowStatus,
}

impl StatusWriter {
    /// A writer that calls `on_refused` for every refused write behind.
    pub fn counting_refusals(on_refused: OnRefused) -> Self {
        Self {
            on_refused: Some(on_refused),
            ..Self::default()
        }
    }

    /// The newest copy of the workflow we know of: the mirror's, or, while our last write is
    /// newer, the mirror's spec and metadata with that write's status and resourceVersion. The
    /// spec and generation stay the mirror's together, so a pass never pairs a generation with
    /// a spec it did not see; the status it reads is never older than one it wrote. Our copy is
    /// dropped once the mirror has caught up with it, so that one is held only while the watch
    /// lags, not for every workflow ever written.
    pub fn latest(&self, mirrored: &Arc<WorkFlow>) -> Arc<WorkFlow> {
        let uid = mirrored.uid().unwrap_or_default();
        let mut written = self.written.lock().expect("written cache lock");
        match written.get(&uid) {
            Some(ours) if ours.resource_version > resource_version(mirrored) => {
                let mut newest = WorkFlow {
                    metadata: mirrored.metadata.clone(),
                    spec: mirrored.spec.clone(),
                    status: ours.status.clone(),
                };
                newest.metadata.resource_version = Some(ours.resource_version.to_string());
                Arc::new(newest)
            }
            Some(_) => {
                written.remove(&uid);
                mirrored.clone()
            }
            None => mirrored.clone(),
        }
    }

    /// Calls `f` with the newest status handed over for workflow `uid`, if this process handed
    /// over any since it last forgot the workflow, and whether it may not be stored yet (it is
    /// waiting or being written behind).
    pub fn with_newest<R>(
        &self,
        uid: &str,
        f: impl FnOnce(Option<&WorkFlowStatus>, bool) -> R,
    ) -> R {
        let slot = self
            .slots
            .lock()
            .expect("status slots lock")
            .get(uid)
            .cloned();
        match slot {
            Some(slot) => {
                let state = slot.state.lock().expect("status slot lock");
                f(state.newest.as_ref(), state.draining)
            }
            None => f(None, false),
        }
    }

    /// Waits until what was handed over for `workflow` is stored: the write in flight ends,
    /// and a status still waiting is written now. For the full planner, which reads the stored
    /// status.
    ///
    /// # Errors
    /// When the API refuses the waiting status (it stays waiting).
    pub async fn settle(&self, workflow: &WorkFlow) -> Result<(), kube::Error> {
        let uid = workflow.uid().unwrap_or_default();
        let slot = self
            .slots
            .lock()
            .expect("status slots lock")
            .get(&uid)
            .cloned();
        match slot {
            Some(slot) => self.settle_slot(&slot).await,
            None => Ok(()),
        }
    }

    /// [`StatusWriter::settle`] for every workflow: at shutdown, so that the statuses handed
    /// over are stored before the process exits. One that the API refuses is logged and left
    /// (a restarted operator writes the status again from the Jobs).
    pub async fn settle_all(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .expect("status slots lock")
            .values()
            .cloned()
            .collect();
        for slot in slots {
            if let Err(error) = self.settle_slot(&slot).await {
                tracing::warn!(%error, "writing a status at shutdown");
            }
        }
    }

    async fn settle_slot(&self, slot: &Slot) -> Result<(), kube::Error> {
        let _writing = slot.writing.lock().await;
        let Some(pending) = slot.state.lock().expect("status slot lock").pending.take() else {
            return Ok(());
        };
        match patch_status(&pending.api, &pending.name, &pending.status).await {
            Ok(object) => {
                remember(&self.written, object);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => {
                slot.state
                    .lock()
                    .expect("status slot lock")
                    .pending
                    .get_or_insert(pending);
                Err(error)
            }
        }
    }

    /// Writes `status` now (after the write in flight, dropping what is pending).
    ///
    /// # Errors
    /// When the API refuses the write.
    pub async fn write(
        &self,
        client: &Client,
        workflow: &WorkFlow,
        status: &WorkFlowStatus,
    ) -> Result<(), kube::Error> {
        let slot = self.slot(workflow);
        let _writing = slot.writing.lock().await;
        slot.state.lock().expect("status slot lock").pending = None;
        let written = patch_status(&api(client, workflow), &workflow.name_any(), status).await?;
        slot.state.lock().expect("status slot lock").newest = Some(status.clone());
        remember(&self.written, written);
        Ok(())
    }

    /// Hands `status` over to be written behind, replacing any status still waiting.
    pub fn write_behind(&self, client: &Client, workflow: &WorkFlow, status: WorkFlowStatus) {
        let slot = self.slot(workflow);
        let mut state = slot.state.lock().expect("status slot lock");
        state.newest = Some(status.clone());
        state.pending = Some(Pending {
            api: api(client, workflow),
            name: workflow.name_any(),
            status,
        });
        if !state.draining {
            state.draining = true;
            tokio::spawn(drain(
                slot.clone(),
                self.written.clone(),
                self.on_refused.clone(),
            ));
        }
    }

    /// Forgets workflow `uid` (finished or deleted): what was handed over before is still
    /// written.
    pub fn forget(&self, uid: &str) {
        self.slots.lock().expect("status slots lock").remove(uid);
    }

    /// Forgets our copy of a deleted workflow too.
    pub fn forget_written(&self, uid: &str) {
        self.written.lock().expect("written cache lock").remove(uid);
    }

    /// Whether nothing of workflow `uid` is waiting to be written behind or being written.
    #[cfg(test)]
    fn idle(&self, uid: &str) -> bool {
        self.slots
            .lock()
            .expect("status slots lock")
            .get(uid)
            .is_none_or(|slot| !slot.state.lock().expect("status slot lock").draining)
    }

    fn slot(&self, workflow: &WorkFlow) -> Arc<Slot> {
        self.slots
            .lock()
            .expect("status slots lock")
            .entry(workflow.uid().unwrap_or_default())
            .or_default()
            .clone()
    }
}

/// Writes the slot's pending statuses, newest first, until none is left.
async fn drain(
    slot: Arc<Slot>,
    written: Arc<Mutex<HashMap<String, Arc<Written>>>>,
    on_refused: Option<OnRefused>,
) {
    let mut delay = RETRY_FIRST;
    loop {
        let writing = slot.writing.lock().await;
        let pending = {
            let mut state = slot.state.lock().expect("status slot lock");
            let pending = state.pending.take();
            // Under the same lock as the take, so a status handed over now starts a new task.
            state.draining = pending.is_some();
            pending
        };
        let Some(pending) = pending else { return };
        match patch_status(&pending.api, &pending.name, &pending.status).await {
            Ok(object) => {
                remember(&written, object);
                delay = RETRY_FIRST;
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                tracing::warn!(%error, workflow = %pending.name, "writing the status behind; trying again");
                if let Some(on_refused) = &on_refused {
                    on_refused();
                }
                slot.state
                    .lock()
                    .expect("status slot lock")
                    .pending
                    .get_or_insert(pending);
                drop(writing);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}

/// JSON patch `add /status` replaces the whole status in one write: the lists are recomputed
/// from the Jobs, never appended to, so concurrent completions cannot erase each other.
async fn patch_status(
    api: &Api<WorkFlow>,
    name: &str,
    status: &WorkFlowStatus,
) -> Result<WorkFlow, kube::Error> {
    let patch = json!([{"op": "add", "path": "/status", "value": status}]);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(patch).expect("a valid JSON patch")),
    )
    .await
}

fn api(client: &Client, workflow: &WorkFlow) -> Api<WorkFlow> {
    Api::namespaced(client.clone(), &workflow.namespace().unwrap_or_default())
}

/// Keeps the status of `workflow`, as a status write returned it, as the newest one.
fn remember(written: &Mutex<HashMap<String, Arc<Written>>>, workflow: WorkFlow) {
    let uid = workflow.uid().unwrap_or_default();
    let kept = Written {
        resource_version: resource_version(&workflow),
        status: workflow.status,
    };
    written
        .lock()
        .expect("written cache lock")
        .insert(uid, Arc::new(kept));
}

fn resource_version(workflow: &WorkFlow) -> u64 {
    workflow
        .meta()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use kube::api::PostParams;

    use crate::controllers::workflow::operator::control_plane_with_crds;
    use kube_devcluster::DevCluster;
    use kube_devcluster::faults::{InjectedError, Verb};

    fn status(done: usize) -> WorkFlowStatus {
        WorkFlowStatus {
            progress: Some(format!("{done}/100")),
            ..Default::default()
        }
    }

    async fn started() -> (DevCluster, Client, WorkFlow) {
        let (cluster, client) = control_plane_with_crds().await;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), "default");
        let workflow = api
            .create(
                &PostParams::default(),
                &WorkFlow::test("w").step("a", &[]).build(),
            )
            .await
            .expect("workflow created");
        (cluster, client, workflow)
    }

    /// The `done` of each status the store committed for the workflow, in order, until one with
    /// `last` done and then the label `sentinel`, which the test writes after it.
    async fn stored_progress(
        changes: &mut tokio::sync::broadcast::Receiver<Arc<kube_devcluster::store::WatchEvent>>,
        last: usize,
    ) -> Vec<usize> {
        let mut seen = Vec::new();
        let collect = async {
            loop {
                let event = changes.recv().await.expect("the store's change stream");
                let object = &event.object.value;
                if object.pointer("/metadata/name").and_then(|v| v.as_str()) != Some("w") {
                    continue;
                }
                if object.pointer("/metadata/labels/sentinel").is_some() {
                    return;
                }
                if let Some(progress) = object.pointer("/status/progress").and_then(|v| v.as_str())
                {
                    let done: usize = progress.split('/').next().unwrap().parse().unwrap();
                    if seen.last() != Some(&done) {
                        seen.push(done);
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), collect)
            .await
            .unwrap_or_else(|_| panic!("no sentinel after {seen:?} (waiting for {last})"));
        seen
    }

    /// A writer whose status 1, written behind, the API refused `tries` times; it is accepted
    /// again from now on.
    async fn refused_behind(
        cluster: &DevCluster,
        client: &Client,
        workflow: &WorkFlow,
        tries: u64,
    ) -> StatusWriter {
        let patches = cluster.requests().by_verb(Verb::Patch);
        cluster
            .faults()
            .set_error_rate(Verb::Patch, 1.0, InjectedError::Internal);
        let writer = StatusWriter::default();
        writer.write_behind(client, workflow, status(1));
        let refused = async {
            while cluster.requests().by_verb(Verb::Patch) < patches + tries {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), refused)
            .await
            .expect("the write behind is tried");
        cluster.faults().clear();
        writer
    }

    async fn sentinel(client: &Client) {
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), "default");
        let patch = json!({"metadata": {"labels": {"sentinel": "yes"}}});
        api.patch("w", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label patch");
    }

    #[tokio::test]
    async fn statuses_written_behind_land_in_order_and_never_after_a_write_at_once() {
        let (cluster, client, workflow) = started().await;
        let mut changes = cluster.store().subscribe();
        let writer = StatusWriter::default();
        for done in 1..=30 {
            writer.write_behind(&client, &workflow, status(done));
        }
        writer
            .write(&client, &workflow, &status(31))
            .await
            .expect("written at once");
        assert_eq!(
            writer.with_newest(&workflow.uid().unwrap(), |s, _| s.cloned()),
            Some(status(31))
        );
        // Whatever was in flight landed before it, and nothing pending lands after it.
        sentinel(&client).await;
        let seen = stored_progress(&mut changes, 31).await;
        assert_eq!(seen.last(), Some(&31), "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert!(
            seen.len() < 31,
            "older pending statuses are skipped: {seen:?}"
        );
        let latest = writer.latest(&Arc::new(workflow));
        assert_eq!(latest.status, Some(status(31)));
    }

    #[tokio::test]
    async fn a_newer_write_gives_its_status_and_version_to_the_mirrors_spec_and_metadata() {
        let (_cluster, client, workflow) = started().await;
        let writer = StatusWriter::default();
        writer
            .write(&client, &workflow, &status(1))
            .await
            .expect("written at once");
        // The mirror still holds the workflow as created: the writer's status is the newer one.
        let mirrored = Arc::new(workflow);
        let latest = writer.latest(&mirrored);
        assert_eq!(latest.status, Some(status(1)), "the written status");
        assert!(resource_version(&latest) > resource_version(&mirrored));
        assert_eq!(latest.spec, mirrored.spec);
        assert_eq!(latest.metadata.generation, mirrored.metadata.generation);
        assert_eq!(
            latest.metadata.managed_fields,
            mirrored.metadata.managed_fields
        );
        // Once the mirror has caught up, its copy is the one, and ours is dropped.
        let caught_up = writer.latest(&latest);
        assert!(Arc::ptr_eq(&caught_up, &latest));
        assert!(writer.written.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_write_at_once_drops_an_older_status_waiting_to_be_tried_again() {
        let (cluster, client, workflow) = started().await;
        let mut changes = cluster.store().subscribe();
        let writer = refused_behind(&cluster, &client, &workflow, 1).await;
        // Status 1 now waits for its next try; status 2 is newer.
        writer
            .write(&client, &workflow, &status(2))
            .await
            .expect("written at once");
        let uid = workflow.uid().unwrap();
        let idle = async {
            while !writer.idle(&uid) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), idle)
            .await
            .expect("the writer goes idle");
        sentinel(&client).await;
        // Status 1 may have landed before status 2 (when the test is slow), never after it.
        let seen = stored_progress(&mut changes, 2).await;
        assert_eq!(seen.last(), Some(&2), "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }

    #[tokio::test]
    async fn at_shutdown_a_status_waiting_to_be_tried_again_is_written_at_once() {
        let (cluster, client, workflow) = started().await;
        let writer = refused_behind(&cluster, &client, &workflow, 1).await;
        // The task waits 100 ms before its next try; settling does not wait for it.
        writer.settle_all().await;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), "default");
        let stored = api.get("w").await.expect("the workflow");
        assert_eq!(stored.status, Some(status(1)));
    }

    #[tokio::test]
    async fn every_refused_write_behind_is_reported_and_a_landed_one_is_not() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (cluster, client, workflow) = started().await;
        let refused = Arc::new(AtomicUsize::new(0));
        let count = refused.clone();
        let writer = StatusWriter::counting_refusals(Arc::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        cluster
            .faults()
            .set_error_rate(Verb::Patch, 1.0, InjectedError::Internal);
        writer.write_behind(&client, &workflow, status(1));
        let twice = async {
            while refused.load(Ordering::SeqCst) < 2 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), twice)
            .await
            .expect("both refusals are reported");
        cluster.faults().clear();
        writer.settle(&workflow).await.expect("the status lands");
        let before = refused.load(Ordering::SeqCst);
        writer.write_behind(&client, &workflow, status(2));
        let landed = async {
            while !writer.idle(&workflow.uid().unwrap_or_default()) {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), landed)
            .await
            .expect("the second status is written");
        assert_eq!(refused.load(Ordering::SeqCst), before);
    }

    #[tokio::test]
    async fn a_status_written_behind_that_fails_is_tried_again_until_it_lands() {
        let (cluster, client, workflow) = started().await;
        let mut changes = cluster.store().subscribe();
        let _writer = refused_behind(&cluster, &client, &workflow, 2).await;
        let landed = async {
            loop {
                let event = changes.recv().await.expect("the store's change stream");
                if event.object.value.pointer("/status/progress")
                    == Some(&serde_json::Value::from("1/100"))
                {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), landed)
            .await
            .expect("the status lands once the API takes it");
    }
}
