//! What the workflow controller's handlers share across calls ([`ControllerState`]: the status writer,
//! the memory of each workflow, the queue, metrics) and the names it writes as. Below every
//! stage of a pass: it imports none of them.

use std::sync::Arc;

use kube::ResourceExt;
use workflow_operator_core::crd::WorkFlow;

use super::memory::Memory;
use super::status_writer::StatusWriter;

/// The name the operator reports Events as, and the prefix of its finalizer and annotation.
pub const OPERATOR_NAME: &str = "workflow.crd.com";

pub use crate::controllers::FIELD_MANAGER;
pub(super) use crate::controllers::{RequestFailed, exists_already};

/// What the handlers share across calls. Nothing here is a source of truth: losing it costs only
/// recomputation.
#[derive(Default)]
pub struct ControllerState {
    /// Post an Event per step started and succeeded (each one an API write).
    pub step_events: bool,
    /// Prometheus metric updates.
    pub metrics: super::metrics::Recorder,
    /// Status writes, some behind the passes, and the newest copy of each workflow they returned.
    pub(super) status: StatusWriter,
    /// What is remembered of each workflow between passes.
    pub(super) memory: Memory,
    /// The built-in queue (`--max-running-steps`), when the operator has one.
    pub step_queue: Option<Arc<super::step_queue::StepQueue>>,
    /// The cache entries this process wrote (`cache`).
    pub(super) cache_written: super::memory::CacheWrites,
    /// The locks between workflows (`synchronization`).
    pub locks: Option<Arc<super::lock_book::LockBook>>,
    /// Where the step agent is copied from, for the steps that run under it.
    pub agent: Option<workflow_operator_core::agent::AgentSource>,
    /// The artifact repository of workflows that name none and whose namespace has none
    /// (`--artifact-repository`).
    pub artifact_repository: Option<workflow_operator_core::crd::ArtifactRepository>,
}

impl ControllerState {
    pub fn new(step_events: bool, metrics: Option<crate::telemetry::metrics::Metrics>) -> Self {
        // A status written behind that the API refuses counts as an API error, as one written
        // at once does.
        let status = match &metrics {
            Some(metrics) => {
                let metrics = metrics.clone();
                StatusWriter::counting_refusals(Arc::new(move || metrics.api_error("patch")))
            }
            None => StatusWriter::default(),
        };
        Self {
            step_events,
            metrics: super::metrics::Recorder::new(metrics),
            status,
            ..Default::default()
        }
    }

    /// Drops what is cached to plan a workflow that has finished.
    pub(super) fn finished(&self, uid: &str) {
        self.memory.finished(uid);
        self.status.forget(uid);
        if let Some(queue) = &self.step_queue {
            queue.forget(uid);
        }
    }

    /// Drops what is cached for a deleted workflow.
    pub(super) fn forget(&self, workflow: &WorkFlow) {
        let uid = workflow.uid().unwrap_or_default();
        self.metrics.workflow_phase(&uid, None);
        self.memory.forget(&uid);
        self.status.forget(&uid);
        self.status.forget_written(&uid);
        if let Some(queue) = &self.step_queue {
            queue.forget(&uid);
        }
        if let Some(locks) = &self.locks {
            locks.forget(&uid);
        }
        self.cache_written.forget(&uid);
    }
}

/// Posts an Event about `ctx`'s workflow; one that cannot be posted is logged, not an error
/// (the work it tells of is done).
pub(super) async fn note(
    ctx: &kube_kopf::Context<WorkFlow>,
    type_: kube::runtime::events::EventType,
    reason: &str,
    note: &str,
) {
    if let Err(error) = ctx.publish(type_, reason, note).await {
        tracing::warn!(%error, reason, "posting an event");
    }
}
