//! One pass of the workflow controller: every reconcile ([`super::handlers`]) is one. It reads
//! as its stages, each a function from the value the stage before handed on to its own:
//!
//! | stage | hands on | talks to the API server |
//! |---|---|---|
//! | `resolve`, `repository` | (records in the status) | until what they read is recorded |
//! | `observe` | [`Observed`] | no: the framework's mirror and memory |
//! | `decide` | [`Decided`] | for a plan in full: the status in flight, pods, Events |
//! | `gates` | [`Decided`], planned again behind a [`plan::Gate`] | cache entries, the run's Kueue Workload, lock Leases |
//! | `cache::write` | | cache entries |
//! | `record::prepare` | [`Record`] | no |
//! | `record::before_actions` | [`Record`] | a status to write before the Jobs |
//! | `apply` | the Jobs refused | Jobs |
//! | (refused) | [`Record`], planned again with their steps failed | status, Jobs |
//! | `record::after_actions` | | status, Events; then memory |
//! | `artifact_gc` | | artifacts, status |
//!
//! A stage imports only stages before it; an error names its stage ([`PassError`]).

use std::sync::Arc;

use kube_kopf::Context;
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::plan;

use super::decide::{self, Decided, Decision, Refusal};
use super::error::PassError;
use super::observe::{self, Observed};
use super::record::{self, Record};
use super::shared::ControllerState;
use super::{apply, artifact_gc, cache, gate, locks, repository, resolve};

/// One pass: the stages in order, each line marked with what it asks of the API server.
pub(super) async fn pass(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> Result<(), PassError> {
    let resolved = resolve::what_it_reads(shared, ctx).await; // templates, ConfigMap keys, until recorded
    resolved.map_err(PassError::Resolve)?;
    let found = repository::artifact_repository(shared, ctx).await; // artifact repository, until recorded
    let unusable = found.map_err(PassError::Repository)?;
    let observed = observe::observe(shared, ctx, changed); // no request: the mirror
    let Some(seen) = observed else {
        return Ok(()); // being deleted: the delete handler's
    };
    let decided = make_plan(shared, ctx, seen).await?; // a plan in full: pods, Events
    let decided = gates(shared, ctx, decided).await?; // cache entries, Workload, Leases
    let written = cache::write(&shared.cache_written, &ctx.client, &decided).await; // cache entries
    written.map_err(PassError::Cache)?;
    let record = record::prepare(shared, decided); // no request
    let record = record::before_actions(shared, ctx, record).await; // a terminal status
    let mut record = record.map_err(PassError::Record)?;
    let unusable = unusable.as_deref();
    let mut refused = apply_plan(shared, ctx, &record, unusable).await?; // Jobs
    while !refused.is_empty() {
        record = fail_refused(shared, ctx, record, &refused).await?; // status, at once
        refused = apply_plan(shared, ctx, &record, unusable).await?; // Jobs
    }
    let recorded = record::after_actions(shared, ctx, record).await; // status, Events
    recorded.map_err(PassError::Record)?;
    Ok(artifact_gc::on_completion(shared, ctx).await?) // artifacts, status
}

/// The pass's plan: from the remembered run state when it holds, else in full, from the Jobs
/// observed in full for it.
async fn make_plan(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut seen: Observed,
) -> Result<Box<Decided>, PassError> {
    let cached = seen.cached.take();
    let changed = std::mem::take(&mut seen.changed);
    let (children, unmirrored) = (&seen.children, &seen.unmirrored);
    let (workflow, compiled) = (&seen.workflow, &seen.compiled);
    let incremental = decide::plan_incrementally(
        children, unmirrored, workflow, compiled, cached, changed, seen.now,
    );
    if let Some((plan, run)) = incremental {
        return Ok(Box::new(Decided {
            decision: Decision::incremental(plan, run),
            seen,
            jobs: None,
            gate: None,
        }));
    }
    let observed = observe::jobs_in_full(shared, ctx, seen).await;
    let (seen, jobs) = observed.map_err(PassError::Observe)?;
    let decision = decide::plan_in_full(&seen.workflow, seen.compiled.clone(), &jobs, seen.now);
    Ok(Box::new(Decided {
        seen,
        decision,
        jobs: Some(jobs),
        gate: None,
    }))
}

/// How many times a pass looks up cache hits: each round's hits may let the next cached steps
/// start, which are looked up in the next.
const CACHE_ROUNDS: usize = 10;

/// What the planner takes from outside the Jobs, each planning again when it changes the plan:
/// cache hits, then Kueue's admission of the whole run, then locks, then the built-in queue. The queue's slots the final plan does not
/// use are given back.
async fn gates(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut decided: Box<Decided>,
) -> Result<Box<Decided>, PassError> {
    for _ in 0..CACHE_ROUNDS {
        let hits = cache::look_up(ctx, &decided).await;
        let hits = hits.map_err(PassError::Cache)?;
        if hits.is_empty() {
            break;
        }
        let mut with_hits = decided.gate.take().unwrap_or_default();
        with_hits.cached.extend(hits);
        decided = replan(shared, ctx, decided, with_hits).await?;
    }
    // Kueue first: a run waiting for its admission takes no lock.
    let admitted = gate::admit_workload(&ctx.client, &decided).await;
    if let Some(kueue) = admitted.map_err(PassError::Kueue)? {
        let with_kueue = decided.gate.take().map_or(kueue.clone(), |g| g.and(kueue));
        decided = replan(shared, ctx, decided, with_kueue).await?;
    }
    let held = locks::hold(shared.locks.as_deref(), &ctx.client, &decided).await;
    if let Some(locks) = held.map_err(PassError::Locks)? {
        let with_locks = decided.gate.take().map_or(locks.clone(), |g| g.and(locks));
        decided = replan(shared, ctx, decided, with_locks).await?;
    }
    if let Some(queue) = gate::admit(shared, &decided).await {
        let with_queue = decided.gate.take().map_or(queue.clone(), |g| g.and(queue));
        decided = replan(shared, ctx, decided, with_queue).await?;
    }
    gate::release_unplanned(shared, &decided);
    Ok(decided)
}

/// Plans `decided` again in full behind `gate`, observing its Jobs in full first if the pass
/// has not yet. The work is boxed: only a gate that changes the plan needs it, and a future
/// holds the futures it awaits (every pass would carry this one's size).
async fn replan(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    decided: Box<Decided>,
    gate: plan::Gate,
) -> Result<Box<Decided>, PassError> {
    Box::pin(replan_in_full(shared, ctx, decided, gate)).await
}

/// [`replan`]'s work.
async fn replan_in_full(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    decided: Box<Decided>,
    gate: plan::Gate,
) -> Result<Box<Decided>, PassError> {
    let Decided { seen, jobs, .. } = *decided;
    let (seen, jobs) = match jobs {
        Some(jobs) => (seen, jobs),
        None => (observe::jobs_in_full(shared, ctx, seen).await).map_err(PassError::Observe)?,
    };
    let decision = decide::plan_gated(&seen.workflow, &seen.compiled, &jobs, seen.now, &gate);
    Ok(Box::new(Decided {
        seen,
        decision,
        jobs: Some(jobs),
        gate: Some(gate),
    }))
}

/// Carries out the recorded plan; the Jobs the API server refused. `unusable` says why the
/// namespace's repository ConfigMap is not one, for the steps with artifacts it fails.
async fn apply_plan(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    record: &Record,
    unusable: Option<&str>,
) -> Result<Vec<Refusal>, PassError> {
    let Decided {
        seen,
        decision,
        gate,
        ..
    } = &*record.decided;
    let planned = apply::Planned {
        workflow: &seen.workflow,
        compiled: &seen.compiled,
        placement: gate.as_ref().and_then(|g| g.placement.as_ref()),
        unusable,
    };
    apply::apply(shared, ctx, planned, &decision.plan).await
}

/// Jobs the API server refused (422) fail their steps: the plan made again with those
/// failures is written at once (the status is their only record: no Job exists, and a
/// restarted operator must read the same verdict), and handed on to be carried out.
async fn fail_refused(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    record: Box<Record>,
    refused: &[Refusal],
) -> Result<Box<Record>, PassError> {
    let seen = &record.decided.seen;
    let plan = decide::replan_refused(
        &seen.workflow,
        &seen.compiled,
        &observe::jobs_known(shared, seen),
        (record.status.as_ref(), &record.decided.decision.plan.events),
        refused,
        seen.now,
    );
    let decision = Decision::without_state(plan);
    let written = record::refused(shared, ctx, record, decision).await;
    written.map_err(PassError::Record)
}
