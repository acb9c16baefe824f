//! Observing: what one pass plans from. The workflow (the newest copy: the mirror's, or the one
//! our last status write returned), its Jobs from the framework's mirror, the Jobs we created
//! that the mirror does not show yet, and the remembered run state when it still follows the
//! status. Reads no API but the mirror, except for a plan in full ([`jobs_in_full`]), which
//! also reads the pods and Events of failed and unstarted steps (client).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kube_kopf::{Context, HandlerError};
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::plan::{Compiled, ObservedJob};

use super::decide;
use super::failure_cause;
use super::memory::{CachedRun, Prepared};
use super::shared::{Shared, temporary};
use super::step_outputs;

/// What one pass observed.
pub(super) struct Observed {
    /// The newest copy of the workflow, its templates expanded: what the pass plans.
    pub(super) workflow: Arc<WorkFlow>,
    pub(super) uid: String,
    pub(super) now: Timestamp,
    pub(super) compiled: Arc<Compiled>,
    /// The expanded spec `workflow` holds, for a copy read again.
    prepared: Prepared,
    /// Its Jobs in the mirror.
    pub(super) children: Vec<Arc<JobSummary>>,
    /// The Jobs we created that the mirror does not show yet.
    pub(super) unmirrored: Vec<ObservedJob>,
    /// The Jobs that changed since the last pass (none for other causes).
    pub(super) changed: Vec<Arc<JobSummary>>,
    /// A pass without changed Jobs (the timer's) writes whatever status was deferred.
    pub(super) flush: bool,
    /// The remembered run state, when it still follows the stored status or the one on its
    /// way.
    pub(super) cached: Option<CachedRun>,
    /// When this process last wrote the workflow's status.
    pub(super) status_written_at: Option<Instant>,
}

impl Observed {
    pub(super) fn namespace(&self) -> String {
        self.workflow.namespace().unwrap_or_default()
    }
}

/// What the pass for `ctx` (with the `changed` Jobs) plans from; `None` for a workflow being
/// deleted, which the delete handler cleans up.
pub(super) fn observe(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> Option<Observed> {
    let stored = shared.status.latest(&ctx.object);
    if stored.meta().deletion_timestamp.is_some() {
        return None;
    }
    let uid = stored.uid().unwrap_or_default();
    let prepared = shared.memory.compiled(&stored);
    let workflow = prepared.view(stored);
    let cached = shared.memory.take_run(&uid).filter(|run| {
        shared.status.with_newest(&uid, |newest, in_flight| {
            decide::still_follows(
                &run.state,
                workflow.status.as_ref(),
                newest.filter(|_| in_flight),
            )
        })
    });
    let children = ctx.children::<JobSummary>();
    let unmirrored = shared.memory.unmirrored(&uid, &children);
    Some(Observed {
        now: Timestamp::now(),
        compiled: prepared.compiled.clone(),
        prepared,
        status_written_at: cached.as_ref().and_then(|c| c.status_written_at),
        cached,
        flush: changed.is_empty(),
        changed,
        children,
        unmirrored,
        workflow,
        uid,
    })
}

/// The workflow's Jobs as the full planner sees them, once the status handed over to be written
/// has landed (the full planner reads the stored status; `seen.workflow` is refreshed). A
/// failure about to decide the outcome is explained from its pods, and so is a step whose pod
/// has not started by its deadline; the outputs its dependents read are read from its pods. A
/// finished workflow's message is written already: it reads nothing more.
pub(super) async fn jobs_in_full(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    seen: &mut Observed,
) -> Result<Vec<ObservedJob>, HandlerError> {
    shared.status.settle(&seen.workflow).await.map_err(|e| {
        shared.metrics.api_error("patch");
        temporary("writing the status", e)
    })?;
    seen.workflow = seen.prepared.view(shared.status.latest(&ctx.object));
    let workflow = &seen.workflow;
    let mut observed = decide::observed_jobs(&seen.children, workflow, seen.now);
    observed.extend(seen.unmirrored.iter().cloned());
    let terminal = workflow
        .status
        .as_ref()
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    if !terminal {
        let namespace = seen.namespace();
        let pods = Api::namespaced(ctx.client.clone(), &namespace);
        failure_cause::explain(&pods, &mut observed).await;
        step_outputs::read(&pods, workflow, &seen.compiled, &mut observed).await;
        let events = Api::namespaced(ctx.client.clone(), &namespace);
        let dag = seen.compiled.dag.as_ref().ok();
        failure_cause::explain_start(&pods, &events, &workflow.spec, dag, &mut observed, seen.now)
            .await;
    }
    Ok(observed)
}
