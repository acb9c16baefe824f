//! The WorkFlow handlers: what the operator does for each event (docs/architecture.md, "The
//! handlers"), on top of the [`kube_kopf`] framework. [`super::operator`] registers them.
//!
//! Creation, spec updates, Job changes, resumes and timer ticks all end in one pass of
//! [`reconcile`], a pipeline of stages, each a module:
//!
//! | stage | module | client |
//! |---|---|---|
//! | resolve | `resolve`: the shared templates named, read once and recorded | only until recorded |
//! | observe | `observe`: the workflow and its Jobs from the mirror | the mirror; pods and Events for a plan in full |
//! | decide | `decide`: the plan, incrementally or in full | none |
//! | cache | `cache`: cached steps' entries looked up before their Jobs, written after | ConfigMaps |
//! | locks | `locks`: the locks (`synchronization`) taken and given back; what waits is held back | Leases |
//! | gate | `gate`: `--max-running-steps` holds back Job creates | none (waits for the queue's watch) |
//! | apply | `apply`: create, stop and delete Jobs | yes |
//! | record | `record`: the status write (`status_policy` chooses how), Events, metrics, memory | yes |
//!
//! State is read from the Jobs that exist, never from the status lists or memory alone
//! (`memory` is a cache, checked before use). Job events come in batches
//! ([`reconcile_jobs`]: every Job that changed since the workflow's last pass, so a burst of
//! completions costs one pass of creates and one status write), planned in O(degree of their
//! steps) while the remembered run state still holds; every other cause, and every doubt, plans
//! in full and rebuilds the state.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use kube_kopf::{Context, HandlerError, HandlerResult};
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs;
use workflow_operator_core::plan::{self, ObservedJob};

use super::apply::{self, delete_job, patch_job};
use super::decide::{self, Decision};
use super::observe;
use super::shared::{Shared, temporary};
use super::{artifact_gc, cache, gate, locks, record, repository, resolve};

/// Brings the workflow's Jobs and status in line with its spec: the planner decides, this does.
pub async fn reconcile(shared: Arc<Shared>, ctx: Context<WorkFlow>) -> HandlerResult {
    timed(shared, ctx, Vec::new()).await
}

/// [`reconcile`] for changes of the workflow's Jobs (every Job that changed since the last
/// call, from the framework's batch): planned incrementally when the remembered run state
/// allows it, in full otherwise; either way one pass of creates and at most one status write
/// for all of them.
pub async fn reconcile_jobs(
    shared: Arc<Shared>,
    ctx: Context<WorkFlow>,
    jobs: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    timed(shared, ctx, jobs).await
}

/// Runs one pass and records its latency and outcome.
async fn timed(
    shared: Arc<Shared>,
    ctx: Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    let started = std::time::Instant::now();
    let handler = ctx.handler.clone();
    // `spec.podCleanup` deletes pods after the pass, by what the pass left stored.
    let pod_cleanup = super::cleanup::PodCleanup::after(&ctx, &changed);
    let mut result = pass(&shared, &ctx, changed).await;
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

/// One pass: resolve (templates, artifact repository) -> observe -> decide -> cache, locks, gate -> apply -> record.
async fn pass(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    resolve::resolve(shared, ctx).await?;
    repository::resolve(shared, ctx).await?;
    let Some(mut seen) = observe::observe(shared, ctx, changed) else {
        return Ok(());
    };
    let (mut decision, mut observed) = decide(shared, ctx, &mut seen).await?;
    let gated = gates(shared, ctx, &mut seen, &mut decision, &mut observed).await?;
    if let Some(gate) = &gated {
        gate::release_unplanned(shared, &seen.workflow, gate, &decision.plan);
    }
    if let Some(jobs) = &observed {
        let planned = (&decision.plan, jobs.as_slice());
        cache::write(&shared.cache_written, &ctx.client, &seen.workflow, planned).await?;
    }
    let mut record = record::prepare(shared, &seen, &mut decision);
    record::before_actions(shared, ctx, &seen, &mut record).await?;
    apply::apply(shared, ctx, &seen, &mut decision, &mut record).await?;
    record::after_actions(shared, ctx, &seen, &mut record, &decision.plan).await?;
    let held = gated.as_ref().is_some_and(|gate| gate.admitted.is_some());
    record::remember(shared, &seen, &record, decision, held);
    artifact_gc::on_completion(shared, ctx).await
}

/// How many times a pass looks up cache hits: each round's hits may let the next cached steps
/// start, which are looked up in the next.
const CACHE_ROUNDS: usize = 10;

/// What the planner takes from outside the Jobs, each planning again when it changes the plan:
/// cache hits, then locks, then the built-in queue. The gate planned with last, if any.
async fn gates(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    seen: &mut observe::Observed,
    decision: &mut Decision,
    observed: &mut Option<Vec<ObservedJob>>,
) -> Result<Option<plan::Gate>, HandlerError> {
    let mut gate: Option<plan::Gate> = None;
    for _ in 0..CACHE_ROUNDS {
        let spec = (seen.workflow.as_ref(), seen.compiled.as_ref());
        let hits = cache::look_up(ctx, spec, &decision.plan).await?;
        if hits.is_empty() {
            break;
        }
        let mut with_hits = gate.take().unwrap_or_default();
        with_hits.cached.extend(hits);
        replan(shared, ctx, seen, (decision, observed), &with_hits).await?;
        gate = Some(with_hits);
    }
    let planned = (&decision.plan, observed.as_deref());
    let spec = (seen.workflow.as_ref(), seen.compiled.as_ref());
    if let Some(locks) = locks::hold(shared.locks.as_deref(), &ctx.client, spec, planned).await? {
        let with_locks = gate.take().map_or(locks.clone(), |g| g.and(locks));
        replan(shared, ctx, seen, (decision, observed), &with_locks).await?;
        gate = Some(with_locks);
    }
    if let Some(queue) = gate::admit(shared, &seen.workflow, &seen.uid, &decision.plan).await {
        let with_queue = gate.take().map_or(queue.clone(), |g| g.and(queue));
        replan(shared, ctx, seen, (decision, observed), &with_queue).await?;
        gate = Some(with_queue);
    }
    Ok(gate)
}

/// Plans `seen` again in full behind `gate`, observing its Jobs in full first if the pass has
/// not yet.
async fn replan(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    seen: &mut observe::Observed,
    (decision, observed): (&mut Decision, &mut Option<Vec<ObservedJob>>),
    gate: &plan::Gate,
) -> Result<(), HandlerError> {
    if observed.is_none() {
        *observed = Some(observe::jobs_in_full(shared, ctx, seen).await?);
    }
    let jobs = observed.as_deref().unwrap_or_default();
    *decision = decide::plan_gated(&seen.workflow, &seen.compiled, jobs, seen.now, gate);
    Ok(())
}

/// The pass's plan: from the remembered run state when it holds, else in full (with the Jobs
/// observed for it, which a gate that holds Jobs back plans from again).
async fn decide(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    seen: &mut observe::Observed,
) -> Result<(Decision, Option<Vec<ObservedJob>>), HandlerError> {
    let incremental = decide::plan_incrementally(
        &seen.children,
        &seen.unmirrored,
        &seen.workflow,
        &seen.compiled,
        seen.cached.take(),
        std::mem::take(&mut seen.changed),
        seen.now,
    );
    if let Some((plan, run)) = incremental {
        let decision = Decision {
            plan,
            state: Some(run.state),
            built_at: run.built_at,
            incremental: true,
        };
        return Ok((decision, None));
    }
    let observed = observe::jobs_in_full(shared, ctx, seen).await?;
    let decision = decide::plan_in_full(&seen.workflow, seen.compiled.clone(), &observed, seen.now);
    Ok((decision, Some(observed)))
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
        .map_err(|e| temporary("listing jobs", e))?;
    Ok(listed
        .items
        .into_iter()
        .filter(|j| j.owner_references().iter().any(|o| o.uid == uid))
        .collect())
}

/// Deletes the workflow's Jobs and their pods. Owner references would let the garbage collector
/// do it too; doing it here means it happens even where GC is slow or the references were
/// stripped, and the Jobs are listed from the API, not the mirror, so none is missed.
pub async fn cleanup(shared: Arc<Shared>, ctx: Context<WorkFlow>) -> HandlerResult {
    let started = std::time::Instant::now();
    let handler = ctx.handler.clone();
    let result = cleanup_once(&shared, ctx).await;
    shared.metrics.handler(&handler, &result, started.elapsed());
    result
}

async fn cleanup_once(shared: &Shared, ctx: Context<WorkFlow>) -> HandlerResult {
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
pub fn timer_due(shared: &Shared, workflow: &WorkFlow) -> bool {
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
