//! The WorkFlow handlers: what the operator does for each event (docs/architecture.md, "The
//! handlers"), on top of the [`kube_kopf`] framework. [`super::operator`] registers them.
//!
//! Creation, spec updates, Job changes, resumes and timer ticks all end in one pass of the
//! stages (the module `pass` lists them, with what each asks of the API server).
//!
//! State is read from the Jobs that exist, never from the status lists or memory alone
//! (`memory` is a cache, checked before use). Job events come in batches
//! ([`reconcile_jobs`]: every Job that changed or was deleted since the workflow's last pass, so
//! a burst of completions costs one pass of creates and one status write), planned in O(degree
//! of their steps) while the remembered run state still holds; every other cause, and every
//! doubt (a deleted Job among them: the state knows a Job the mirror no longer shows), plans in
//! full and rebuilds the state.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use kube_kopf::{Context, HandlerError, HandlerResult};
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs;

use super::apply::{delete_job, patch_job};
use super::shared::{ControllerState, RequestFailed};
use super::{artifact_gc, pass};

/// Brings the workflow's Jobs and status in line with its spec: the planner decides, this does.
pub async fn reconcile(shared: Arc<ControllerState>, ctx: Context<WorkFlow>) -> HandlerResult {
    timed(shared, ctx, Vec::new()).await
}

/// [`reconcile`] for changes of the workflow's Jobs (every Job that changed or was deleted
/// since the last call, from the framework's batch; a deleted one as last seen): planned incrementally when the remembered run state
/// allows it, in full otherwise; either way one pass of creates and at most one status write
/// for all of them.
pub async fn reconcile_jobs(
    shared: Arc<ControllerState>,
    ctx: Context<WorkFlow>,
    jobs: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    timed(shared, ctx, jobs).await
}

/// Runs one pass and records its latency and outcome.
async fn timed(
    shared: Arc<ControllerState>,
    ctx: Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    let started = std::time::Instant::now();
    let handler = ctx.handler.clone();
    // `spec.podCleanup` deletes pods after the pass, by what the pass left stored.
    let pod_cleanup = super::cleanup::PodCleanup::after(&ctx, &changed);
    let mut result = pass::pass(&shared, &ctx, changed)
        .await
        .map_err(HandlerError::from);
    if result.is_err() {
        // What the failed pass planned may not have been carried out: look at every tick
        // until a pass succeeds.
        shared
            .memory
            .wake_now(&ctx.object.uid().unwrap_or_default());
    }
    if let (Ok(()), Some(pod_cleanup)) = (&result, pod_cleanup) {
        result = pod_cleanup.run(&shared).await;
    }
    shared.metrics.handler(&handler, &result, started.elapsed());
    result
}

/// Copies the workflow's labels onto its Jobs (never over the operator's own labels). The Jobs
/// are read from the API: the mirror keeps no labels ([`JobSummary`]), and relabelling is rare.
pub async fn relabel(ctx: Context<WorkFlow>) -> HandlerResult {
    let workflow = &ctx.object;
    let api: Api<Job> = Api::namespaced(
        ctx.client.clone(),
        &workflow.namespace().unwrap_or_default(),
    );
    for job in owned_jobs(&api, workflow).await? {
        if let Some(patch) = jobs::relabel_patch(workflow, job.labels()) {
            patch_job(&api, &job.name_any(), patch, "relabelling").await?;
        }
    }
    Ok(())
}

/// The workflow's Jobs, listed from the API: those with its label and owned by this very object
/// (by uid), so that a workflow recreated under the same name never touches the old one's.
async fn owned_jobs(api: &Api<Job>, workflow: &WorkFlow) -> Result<Vec<Job>, HandlerError> {
    let uid = workflow.uid().unwrap_or_default();
    let listed = api
        .list(&ListParams::default().labels(&jobs::selector(&workflow.name_any())))
        .await
        .map_err(|e| RequestFailed::new("listing jobs", e))?;
    Ok(listed
        .items
        .into_iter()
        .filter(|j| j.owner_references().iter().any(|o| o.uid == uid))
        .collect())
}

/// Deletes the workflow's Jobs and their pods. Owner references would let the garbage collector
/// do it too; doing it here means it happens even where GC is slow or the references were
/// stripped, and the Jobs are listed from the API, not the mirror, so none is missed.
pub async fn cleanup(shared: Arc<ControllerState>, ctx: Context<WorkFlow>) -> HandlerResult {
    let started = std::time::Instant::now();
    let handler = ctx.handler.clone();
    let result = cleanup_once(&shared, ctx).await;
    shared.metrics.handler(&handler, &result, started.elapsed());
    result
}

async fn cleanup_once(shared: &ControllerState, ctx: Context<WorkFlow>) -> HandlerResult {
    let workflow = &ctx.object;
    let api: Api<Job> = Api::namespaced(
        ctx.client.clone(),
        &workflow.namespace().unwrap_or_default(),
    );
    for job in owned_jobs(&api, workflow).await? {
        delete_job(&api, &job.name_any()).await?;
    }
    artifact_gc::on_deletion(&ctx).await?;
    shared.forget(workflow);
    Ok(())
}

/// Whether the `timeouts` timer's pass is due for a workflow: one that may time out whose wake,
/// set by its last pass, has come (`Memory::is_due`). Cheap on purpose: it runs for every
/// mirrored workflow at every tick.
pub fn timer_due(shared: &ControllerState, workflow: &WorkFlow) -> bool {
    may_time_out(workflow) && shared.memory.is_due(&workflow.uid().unwrap_or_default())
}

/// Whether a workflow may time out at all: only a non-terminal one. A terminal status written
/// for an older generation does not count (the spec changed since).
fn may_time_out(workflow: &WorkFlow) -> bool {
    let Some(status) = &workflow.status else {
        return true;
    };
    let terminal = status.workflow_status.is_some_and(|p| p.is_terminal());
    let current = status.observed_generation == workflow.metadata.generation;
    !(terminal && current) && workflow.meta().deletion_timestamp.is_none()
}
