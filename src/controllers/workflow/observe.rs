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
use kube_kopf::Context;
use workflow_operator_core::crd::{WorkFlow, WorkFlowStatus};
use workflow_operator_core::incremental::RunState;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs;
use workflow_operator_core::plan::{Compiled, ObservedJob};

use super::daemons;
use super::failure_cause;
use super::memory::{CachedRun, Prepared};
use super::shared::{ControllerState, RequestFailed};
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
    /// The Jobs that changed or were deleted since the last pass (none for other causes).
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
    shared: &ControllerState,
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
            still_follows(
                &run.state,
                workflow.status.as_ref(),
                newest.filter(|_| in_flight),
            )
        })
    });
    let children = ctx.children::<JobSummary>();
    let unmirrored = shared.memory.unmirrored(&uid, &children, &changed);
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
/// has landed (the full planner reads the stored status; the workflow `seen` holds is read
/// again). A failure about to decide the outcome is explained from its pods, and so is a step
/// whose pod has not started by its deadline; the outputs its dependents read are read from its
/// pods. A finished workflow's message is written already: it reads nothing more.
pub(super) async fn jobs_in_full(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut seen: Observed,
) -> Result<(Observed, Vec<ObservedJob>), RequestFailed> {
    shared.status.settle(&seen.workflow).await.map_err(|e| {
        shared.metrics.api_error("patch");
        RequestFailed::new("writing the status", e)
    })?;
    seen.workflow = seen.prepared.view(shared.status.latest(&ctx.object));
    let mut observed = jobs_known(shared, &seen);
    let terminal = (seen.workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    if !terminal {
        explain(ctx, &seen, &mut observed).await;
    }
    Ok((seen, observed))
}

/// The Jobs `seen` knows without a request: the mirror's, and those we created that it does not
/// show yet.
pub(super) fn jobs_known(shared: &ControllerState, seen: &Observed) -> Vec<ObservedJob> {
    let mut observed = observed_jobs(&seen.children, &seen.workflow, seen.now);
    observed.extend(shared.memory.unmirrored(&seen.uid, &seen.children, &[]));
    observed
}

/// Reads what the Jobs alone do not tell from the steps' pods and Events: why a step failed or
/// has not started, the outputs its dependents read, and a ready daemon's IP.
async fn explain(ctx: &Context<WorkFlow>, seen: &Observed, observed: &mut [ObservedJob]) {
    let namespace = seen.namespace();
    let workflow = &seen.workflow;
    let pods = Api::namespaced(ctx.client.clone(), &namespace);
    failure_cause::explain(&pods, observed).await;
    let jobs = Api::namespaced(ctx.client.clone(), &namespace);
    step_outputs::read(&pods, &jobs, workflow, &seen.compiled, observed).await;
    daemons::record(&pods, &jobs, workflow, &seen.compiled, observed).await;
    let events = Api::namespaced(ctx.client.clone(), &namespace);
    let dag = seen.compiled.dag.as_ref().ok();
    failure_cause::explain_start(&pods, &events, &workflow.spec, dag, observed, seen.now).await;
}

/// Whether a cached state still plans for the workflow: it follows the stored status, or the
/// status this process handed over that may not be stored yet (`in_flight`).
pub(super) fn still_follows(
    state: &RunState,
    stored: Option<&WorkFlowStatus>,
    in_flight: Option<&WorkFlowStatus>,
) -> bool {
    stored
        .into_iter()
        .chain(in_flight)
        .any(|status| state.follows(status))
}

/// The workflow's Jobs, from the mirror, as the planner sees them. Only Jobs owned by this very
/// object (by uid) count: a workflow deleted and recreated under the same name must not inherit
/// the old one's Jobs.
pub(super) fn observed_jobs(
    children: &[Arc<JobSummary>],
    workflow: &WorkFlow,
    now: Timestamp,
) -> Vec<ObservedJob> {
    let uid = workflow.uid().unwrap_or_default();
    children
        .iter()
        .filter(|job| job.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(|job| jobs::observe_job(job, now))
        .collect()
}
