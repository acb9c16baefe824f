//! The WorkFlow handlers: what the operator does for each event of DESIGN section 3, on top of
//! the [`kube_kopf`] framework. [`crate::workflow::operator`] registers them.
//!
//! Creation, spec updates, Job changes, resumes and timer ticks all end in [`reconcile`], which
//! reads the workflow's Jobs from the framework's in-memory mirror of the API (never from the
//! status lists), asks the pure planner what to do, and does it: create, stop and delete Jobs,
//! write the status once, post one Event per lifecycle transition. Every write is idempotent (Job
//! names are deterministic, deletes of missing Jobs succeed, patches set fixed values), so a
//! retry, a duplicate event or a restart never starts a step twice.
//!
//! Job events come in batches ([`reconcile_jobs`]: every Job that changed since the workflow's
//! last pass, so a burst of completions costs one pass of creates and one status write). They
//! are planned by the cached [`RunState`] of the workflow in O(degree of their steps) when the
//! cache is still the workflow's (same generation, run and status resource version) and the
//! mirror still holds every Job the state knows. While steps finish quickly the status is
//! written at most every `STATUS_MIN_INTERVAL`; the timer's pass writes what was deferred,
//! from the cached state too, and rebuilds the state in full every `FULL_RECONCILE_EVERY`.
//! Every other cause, and every doubt, plans in full and rebuilds the state.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim};
use k8s_openapi::api::events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::crd::{WorkFlow, WorkFlowStatus};
use super::failure_cause;
use super::fan_out;
use super::incremental::{JobChange, RunState};
use super::job_summary::JobSummary;
use super::jobs;
use super::names;
use super::outputs::StepData;
use super::plan::{Action, Compiled, ObservedJob, Plan};
use super::status_writer::StatusWriter;
use super::step_outputs;
use kube_kopf::{Context, HandlerError, HandlerResult};

/// The field manager the operator writes with.
pub const FIELD_MANAGER: &str = "workflow-operator";

/// What the handlers share across calls: caches of what the API already told us. Nothing here is
/// a source of truth; losing it costs only recomputation.
#[derive(Default)]
pub struct Shared {
    /// Post an Event per step started and succeeded (each one an API write).
    pub step_events: bool,
    /// Prometheus metric updates.
    pub metrics: super::metrics::Recorder,
    /// The validated DAG and run id per workflow uid and generation: saves an O(steps) build per
    /// Job event.
    compiled: Mutex<HashMap<String, (i64, Arc<Compiled>)>>,
    /// Status writes, some behind the passes, and the newest copy of each workflow they returned.
    pub(super) status: StatusWriter,
    /// The incremental planner's state per workflow uid, as of the last plan carried out.
    runs: Mutex<HashMap<String, CachedRun>>,
    /// The built-in queue (`--max-running-steps`), when the operator has one.
    pub admission: Option<Arc<super::admission::Admission>>,
    /// Jobs we created that the mirror may not show yet, per workflow uid, with when: planned as
    /// existing until the mirror has them (for at most [`UNMIRRORED_TTL`]), so a reconcile that
    /// runs before the Job watch catches up does not create them again. Each such create is a
    /// wasted write answered 409: 9,669 of 19,669 Job creates in `make bench` before this.
    unmirrored: Mutex<HashMap<String, Vec<(ObservedJob, Instant)>>>,
}

/// Actions (Job creates, patches, deletes) of one plan carried out at once. They touch
/// different Jobs and each is idempotent, so their order does not matter; one at a time, the
/// last Job of a wide layer of the DAG would wait for every request before it (a layer of 100
/// steps took 150 ms to start).
const ACTIONS_IN_FLIGHT: usize = 16;

/// How long a Job we created counts as existing without the mirror showing it: longer than the
/// Job watch lags under load, short enough that a Job deleted before the watch saw it is soon
/// created again.
const UNMIRRORED_TTL: Duration = Duration::from_secs(30);

/// A [`RunState`] and what it is valid for: the workflow's generation (the run id is the
/// state's own), and a stored status the state follows ([`RunState::follows`]).
struct CachedRun {
    generation: i64,
    state: RunState,
    /// When this process last wrote the workflow's status.
    status_written_at: Option<Instant>,
    /// When the full planner last built the state from the mirror.
    built_at: Instant,
}

/// How long the timer's passes may plan from the cached run state (checking deadlines and
/// writing a deferred status) before a pass rebuilds it from the mirror with the full planner.
/// The state follows every Job change and the mirror's Job count, so the rebuild is a safety
/// net; a full pass of a 10,000-step workflow takes about 120 ms, during which its completions
/// wait, and every second that was an eighth of the workflow's time.
const FULL_RECONCILE_EVERY: Duration = Duration::from_secs(10);

/// While a workflow runs, a status that only lists more steps started or executed is written at
/// most this often when Job events come quickly; the timer's full reconcile (every
/// [`super::operator::TIMEOUT_CHECK`]) writes whatever is left. A status write costs the API
/// server the whole object (700 KB for 10,000 steps), and the workflow's next pass waits for
/// it; a phase change is always written at once.
const STATUS_MIN_INTERVAL: Duration = Duration::from_millis(500);

impl Shared {
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

    pub(crate) fn compiled(&self, workflow: &WorkFlow) -> Arc<Compiled> {
        let uid = workflow.uid().unwrap_or_default();
        let generation = workflow.metadata.generation.unwrap_or_default();
        let mut cache = self.compiled.lock().expect("compiled cache lock");
        match cache.get(&uid) {
            Some((g, compiled)) if *g == generation => compiled.clone(),
            _ => {
                let compiled = Arc::new(Compiled::new(&workflow.spec));
                cache.insert(uid, (generation, compiled.clone()));
                compiled
            }
        }
    }

    /// Takes the cached run state out: a reconcile that fails half-way leaves none behind.
    fn take_run(&self, uid: &str) -> Option<CachedRun> {
        self.runs.lock().expect("run cache lock").remove(uid)
    }

    fn keep_run(&self, uid: String, run: CachedRun) {
        self.runs.lock().expect("run cache lock").insert(uid, run);
    }

    /// Drops what is cached to plan a workflow that has finished (the cached run state is
    /// already taken out): a DAG and a run state for each of thousands of finished workflows
    /// would be most of the operator's memory, to save work that is rarely needed again.
    fn finished(&self, uid: &str) {
        self.compiled
            .lock()
            .expect("compiled cache lock")
            .remove(uid);
        self.status.forget(uid);
        if let Some(admission) = &self.admission {
            admission.forget(uid);
        }
    }

    /// Drops what is cached for a deleted workflow.
    fn forget(&self, workflow: &WorkFlow) {
        let uid = workflow.uid().unwrap_or_default();
        self.metrics.workflow_phase(&uid, None);
        self.compiled
            .lock()
            .expect("compiled cache lock")
            .remove(&uid);
        self.status.forget(&uid);
        self.status.forget_written(&uid);
        self.runs.lock().expect("run cache lock").remove(&uid);
        self.unmirrored
            .lock()
            .expect("unmirrored jobs lock")
            .remove(&uid);
        if let Some(admission) = &self.admission {
            admission.forget(&uid);
        }
    }

    fn created(&self, uid: &str, job: ObservedJob) {
        self.unmirrored
            .lock()
            .expect("unmirrored jobs lock")
            .entry(uid.to_string())
            .or_default()
            .push((job, Instant::now()));
    }

    fn deleted(&self, uid: &str, name: &str) {
        if let Some(jobs) = self
            .unmirrored
            .lock()
            .expect("unmirrored jobs lock")
            .get_mut(uid)
        {
            jobs.retain(|(job, _)| job.name != name);
        }
    }

    /// The Jobs we created for workflow `uid` that `mirrored` (its Jobs in the mirror) does not
    /// show yet; forgets the ones it shows and the expired ones. O(1) when there are none.
    fn unmirrored(&self, uid: &str, mirrored: &[Arc<JobSummary>]) -> Vec<ObservedJob> {
        let mut all = self.unmirrored.lock().expect("unmirrored jobs lock");
        let Some(jobs) = all.get_mut(uid) else {
            return Vec::new();
        };
        let shown: HashSet<&str> = mirrored
            .iter()
            .filter_map(|job| job.metadata.name.as_deref())
            .collect();
        jobs.retain(|(job, at)| {
            at.elapsed() < UNMIRRORED_TTL && !shown.contains(job.name.as_str())
        });
        let pending = jobs.iter().map(|(job, _)| job.clone()).collect::<Vec<_>>();
        if pending.is_empty() {
            all.remove(uid);
        }
        pending
    }
}

/// Brings the workflow's Jobs and status in line with its spec: the planner decides, this does.
pub async fn reconcile(shared: Arc<Shared>, ctx: Context<WorkFlow>) -> HandlerResult {
    timed(shared, ctx, Vec::new()).await
}

/// [`reconcile`] for changes of the workflow's Jobs (every Job that changed since the last
/// call, from the framework's batch): planned incrementally when the cached run state allows
/// it, in full otherwise; either way one pass of creates and at most one status write for all
/// of them.
pub async fn reconcile_jobs(
    shared: Arc<Shared>,
    ctx: Context<WorkFlow>,
    jobs: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    timed(shared, ctx, jobs).await
}

/// Runs one reconcile and records its latency and outcome.
async fn timed(
    shared: Arc<Shared>,
    ctx: Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    let started = std::time::Instant::now();
    let handler = ctx.handler.clone();
    // `spec.podCleanup` deletes pods after the pass, by what the pass left stored.
    let pod_cleanup = super::cleanup::PodCleanup::after(&ctx, &changed);
    let mut result = reconcile_with(&shared, ctx, changed).await;
    if let (Ok(()), Some(pod_cleanup)) = (&result, pod_cleanup) {
        result = pod_cleanup.run(&shared).await;
    }
    shared.metrics.handler(&handler, &result, started.elapsed());
    result
}

async fn reconcile_with(
    shared: &Shared,
    ctx: Context<WorkFlow>,
    changed: Vec<Arc<JobSummary>>,
) -> HandlerResult {
    let mut workflow = shared.status.latest(&ctx.object);
    if workflow.meta().deletion_timestamp.is_some() {
        return Ok(());
    }
    let now = Timestamp::now();
    let uid = workflow.uid().unwrap_or_default();
    let compiled = shared.compiled(&workflow);
    let cached = shared.take_run(&uid).filter(|run| {
        shared.status.with_newest(&uid, |newest, in_flight| {
            still_follows(
                &run.state,
                workflow.status.as_ref(),
                newest.filter(|_| in_flight),
            )
        })
    });
    let status_written_at = cached.as_ref().and_then(|c| c.status_written_at);
    // A pass without changed Jobs (the timer's) writes whatever status was deferred.
    let flush = changed.is_empty();
    let children = ctx.children::<JobSummary>();
    let unmirrored = shared.unmirrored(&uid, &children);
    let incremental = plan_incrementally(
        &children,
        &unmirrored,
        &workflow,
        &compiled,
        cached,
        changed,
        now,
    );
    let planned_incrementally = incremental.is_some();
    let (mut plan, mut state, built_at) = match incremental {
        Some((plan, run)) => (plan, Some(run.state), run.built_at),
        None => {
            // The full planner reads the stored status: what was handed over lands first.
            shared.status.settle(&workflow).await.map_err(|e| {
                shared.metrics.api_error("patch");
                temporary("writing the status", e)
            })?;
            workflow = shared.status.latest(&ctx.object);
            let mut observed = observed_jobs(&children, &workflow, now);
            observed.extend(unmirrored);
            // A failure about to decide the outcome is explained from its pods, and so is a
            // step whose pod has not started by its deadline; a finished workflow's message is
            // written already.
            let terminal = workflow
                .status
                .as_ref()
                .and_then(|s| s.workflow_status)
                .is_some_and(|p| p.is_terminal());
            if !terminal {
                let namespace = workflow.namespace().unwrap_or_default();
                let pods = Api::namespaced(ctx.client.clone(), &namespace);
                failure_cause::explain(&pods, &mut observed).await;
                step_outputs::read(&pods, &workflow, &compiled, &mut observed).await;
                let events = Api::namespaced(ctx.client.clone(), &namespace);
                let dag = compiled.dag.as_ref().ok();
                failure_cause::explain_start(
                    &pods,
                    &events,
                    &workflow.spec,
                    dag,
                    &mut observed,
                    now,
                )
                .await;
            }
            let (plan, state) = RunState::build(&workflow, compiled.clone(), &observed, now);
            (plan, state.ok(), Instant::now())
        }
    };
    // Under `--max-running-steps`, the creates the gate does not admit wait: their steps are
    // `Queued` in the status, and the cached state, which counts them started, is dropped.
    if let Some(admission) = shared.admission.as_ref()
        && super::admission::Admission::governs(&workflow)
    {
        let namespace = workflow.namespace().unwrap_or_default();
        let wanted = super::admission::creates(&plan, &namespace);
        let admitted = admission.admit(&workflow, &uid, &wanted).await;
        if admitted.held > 0 {
            let message = admission.message(admitted.running);
            super::admission::hold_back(&mut plan, &workflow, &admitted.jobs, &message);
            if plan.status.as_ref() == workflow.status.as_ref() {
                plan.status = None;
            }
            state = None;
        }
    }
    // What this process last handed over to be written, else what is stored: a status still on
    // its way must be neither written again nor counted again.
    let (mut counted, phase_before) = shared.status.with_newest(&uid, |newest, _| {
        let before = newest.or(workflow.status.as_ref());
        if flush && planned_incrementally && plan.status.is_none() {
            plan.status = state.as_ref().and_then(|s| deferred_status(s, before));
        }
        let counted = plan.status.as_ref().map(|new| step_changes(before, new));
        (counted, before.and_then(|s| s.workflow_status))
    });
    let namespace = workflow.namespace().unwrap_or_default();
    let job_api: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    // A terminal outcome is recorded before its actions (which then only stop or delete Jobs):
    // once the status is terminal, whatever becomes of those writes, a restarted operator only
    // deletes what is left running. Otherwise Jobs come first, so the status never lists a step
    // as started before its Job exists, and a timed-out step's Job carries the record of its
    // timeout before the status reports it.
    let terminal = plan
        .status
        .as_ref()
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    // Only progress within the same phase is deferred (see [`STATUS_MIN_INTERVAL`]); the
    // cached state stays valid, and the next write renders everything. A status is written
    // behind (see [`StatusWriter`]) when the state is kept to plan the next pass: it does not
    // read the stored status, and a pass in full waits for it to land.
    let phase_changed = plan.status.as_ref().map(|s| s.workflow_status) != Some(phase_before);
    let defer_status = planned_incrementally
        && !flush
        && !terminal
        && !phase_changed
        && status_written_at.is_some_and(|at| at.elapsed() < STATUS_MIN_INTERVAL);
    let behind = !terminal && state.is_some();
    let mut status_written_at = status_written_at;
    if terminal && write_status(shared, &ctx, &workflow, plan.status.as_ref()).await? {
        status_written_at = Some(Instant::now());
    }
    let mut refusals = carry_out(shared, &job_api, &workflow, &compiled, &plan).await?;
    let replanned = !refusals.is_empty();
    while !refusals.is_empty() {
        // Retrying a Job the API server refused cannot help: its steps fail with the server's
        // message, recorded in the status (the only record: no Job exists) and written at once,
        // before anything else, so that a restarted operator reads the same verdict.
        plan = replan_refused(
            shared, &workflow, &compiled, &children, &plan, &refusals, now,
        );
        write_status(shared, &ctx, &workflow, plan.status.as_ref()).await?;
        status_written_at = Some(Instant::now());
        counted = Some(StepChanges::default());
        state = None;
        refusals = carry_out(shared, &job_api, &workflow, &compiled, &plan).await?;
    }
    if !terminal && !defer_status && !replanned {
        if let Some(status) = plan.status.as_ref().filter(|_| behind) {
            shared
                .status
                .write_behind(&ctx.client, &workflow, status.clone());
            status_written_at = Some(Instant::now());
        } else if write_status(shared, &ctx, &workflow, plan.status.as_ref()).await? {
            status_written_at = Some(Instant::now());
        }
    }
    // Steps are counted and announced when a status that lists them is written or handed over
    // to be written: a deferred status is counted by the write that stores it.
    if let Some((new, changes)) = plan.status.as_ref().zip(counted).filter(|_| !defer_status) {
        // Steps first: a scrape that sees the workflow Completed must see its last step too.
        shared
            .metrics
            .steps(&changes.started, &changes.finished, &plan, &children);
        shared.metrics.workflow_phase(&uid, new.workflow_status);
        if shared.step_events {
            publish_step_events(&ctx, &workflow, &plan.run, &changes).await;
        }
    }
    for event in &plan.events {
        let failed = event.transition.to() == super::lifecycle::Phase::Failed;
        // The operator's log tells the same story as the Events, for `kubectl logs`.
        let workflow_key = format!(
            "{}/{}",
            workflow.namespace().unwrap_or_default(),
            workflow.name_any()
        );
        if failed {
            tracing::warn!(workflow = %workflow_key, reason = event.transition.reason(), "{}", event.message);
        } else {
            tracing::info!(workflow = %workflow_key, reason = event.transition.reason(), "{}", event.message);
        }
        let type_ = if failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        if let Err(error) = ctx
            .publish(type_, event.transition.reason(), &event.message)
            .await
        {
            // An Event that cannot be posted is not worth redoing the whole reconcile for.
            tracing::warn!(%error, workflow = %workflow.name_any(), "posting a lifecycle event");
        }
    }
    // A finished workflow has no more Jobs to start: its run state would only hold memory (the
    // operator may keep thousands of finished workflows). A late event plans in full.
    let finished = plan
        .status
        .as_ref()
        .or(workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(super::lifecycle::Phase::is_terminal);
    if finished {
        shared.finished(&uid);
    } else if let Some(state) = state {
        shared.keep_run(
            uid,
            CachedRun {
                generation: workflow.metadata.generation.unwrap_or_default(),
                state,
                status_written_at,
                built_at,
            },
        );
    }
    Ok(())
}

/// The plan for the changed Jobs from the cached run state, in O(degree) of their steps, or
/// `None` when the full planner must decide: no cache, a cache made for another generation, run
/// or status, a pass without changed Jobs when the state was built [`FULL_RECONCILE_EVERY`]
/// ago or more, a change the state does not follow, or a state that knows a Job neither the
/// mirror nor our `unmirrored` creates show (a Job deleted).
///
/// Besides the changed Jobs, the state is given the Jobs the full planner would count that it
/// has not seen: the `unmirrored` Jobs we created (otherwise their steps look waiting and are
/// created again, a 409 each), and Jobs the mirror received after the batch was taken (they
/// come again in the next batch). While Jobs are created faster than the watch shows them (a
/// 10,000-step workflow), nearly every other pass fell back to the full planner for want of
/// these, and wrote the status.
fn plan_incrementally(
    children: &[Arc<JobSummary>],
    unmirrored: &[ObservedJob],
    workflow: &WorkFlow,
    compiled: &Compiled,
    cached: Option<CachedRun>,
    changed: Vec<Arc<JobSummary>>,
    now: Timestamp,
) -> Option<(Plan, CachedRun)> {
    let mut cached = cached?;
    if changed.is_empty() && cached.built_at.elapsed() >= FULL_RECONCILE_EVERY {
        return None;
    }
    let uid = workflow.uid()?;
    let current = cached.generation == workflow.metadata.generation.unwrap_or_default()
        && cached.state.run() == compiled.run;
    let owned = |job: &JobSummary| job.owner_references().iter().any(|o| o.uid == uid);
    if !current || !changed.iter().all(|job| owned(job)) {
        return None;
    }
    // O(jobs) in pointer copies and lookups, but no parsing: the mirror and the state agree.
    let in_batch: HashSet<&str> = changed
        .iter()
        .filter_map(|j| j.meta().name.as_deref())
        .collect();
    let mut mirrored = 0;
    let mut arrived_since = Vec::new();
    for job in children.iter().filter(|j| owned(j)) {
        mirrored += 1;
        let name = job.meta().name.as_deref().unwrap_or_default();
        if !in_batch.contains(name) && !cached.state.knows(name) {
            arrived_since.push(job);
        }
    }
    let changes = unmirrored
        .iter()
        .cloned()
        .map(Some)
        .chain(changed.iter().map(|job| jobs::observe_job(job, now)))
        .chain(
            arrived_since
                .into_iter()
                .map(|job| jobs::observe_job(job, now)),
        )
        .map(|job| job.map(JobChange::Applied))
        .collect::<Option<Vec<_>>>()?;
    let plan = match cached.state.observe_all(&changes, now) {
        Ok(plan) => plan,
        Err(why) => {
            tracing::debug!(%why, workflow = %workflow.name_any(), "planning in full");
            return None;
        }
    };
    if mirrored + unmirrored.len() != cached.state.job_count() {
        return None;
    }
    Some((plan, cached))
}

/// Whether a cached state still plans for the workflow: it follows the stored status, or the
/// status this process handed over that may not be stored yet (`in_flight`).
fn still_follows(
    state: &RunState,
    stored: Option<&WorkFlowStatus>,
    in_flight: Option<&WorkFlowStatus>,
) -> bool {
    stored
        .into_iter()
        .chain(in_flight)
        .any(|status| state.follows(status))
}

/// The status a pass without changed Jobs (the timer's) writes from the cached state: what
/// passes with changes deferred, if it differs from `before` (the newest status handed over to
/// be written, else the stored one).
fn deferred_status(state: &RunState, before: Option<&WorkFlowStatus>) -> Option<WorkFlowStatus> {
    let rendered = state.render();
    (before != Some(&rendered)).then_some(rendered)
}

/// Event reasons of the steps a status write reports: started, succeeded, or both. Failed and
/// timed-out steps are named by the lifecycle Event of the failure (`StepFailed`,
/// `StepTimedOut`).
pub const STEP_STARTED: &str = "StepStarted";
pub const STEP_SUCCEEDED: &str = "StepSucceeded";
pub const STEPS_PROGRESSED: &str = "StepsProgressed";

/// The most an Event's note may hold (`events.k8s.io/v1` validation: 1 KiB).
const NOTE_MAX_BYTES: usize = 1024;

/// The steps that finished and that started between two statuses, in status order.
#[derive(Debug, Default, PartialEq)]
struct StepChanges {
    finished: Vec<String>,
    started: Vec<String>,
}

/// A step that started and finished between the two (its start was in a status never
/// written) counts as both, started first.
fn step_changes(old: Option<&WorkFlowStatus>, new: &WorkFlowStatus) -> StepChanges {
    fn set(list: Option<&Vec<String>>) -> HashSet<&String> {
        list.into_iter().flatten().collect()
    }
    let (old_executed, old_started) = (set(old.map(|s| &s.executed)), set(old.map(|s| &s.started)));
    let finished: Vec<String> = new
        .executed
        .iter()
        .filter(|s| !old_executed.contains(s))
        .cloned()
        .collect();
    let started = finished
        .iter()
        .filter(|s| !old_started.contains(s))
        .chain(new.started.iter().filter(|s| !old_started.contains(s)))
        .cloned()
        .collect();
    StepChanges { finished, started }
}

/// The one Event a status write posts about its step changes: its reason, its note (`step a
/// succeeded; started b, c`) and, when it is about a single step, that step (whose Job becomes
/// the related object); `None` without changes.
fn step_event(changes: &StepChanges) -> Option<(&'static str, String, Option<&str>)> {
    let reason = match (changes.started.is_empty(), changes.finished.is_empty()) {
        (true, true) => return None,
        (false, true) => STEP_STARTED,
        (true, false) => STEP_SUCCEEDED,
        (false, false) => STEPS_PROGRESSED,
    };
    let half = NOTE_MAX_BYTES / 2 - 32;
    let mut parts = Vec::new();
    if !changes.finished.is_empty() {
        let noun = if changes.finished.len() == 1 {
            "step"
        } else {
            "steps"
        };
        parts.push(format!(
            "{noun} {} succeeded",
            names_within(&changes.finished, half)
        ));
    }
    if !changes.started.is_empty() {
        let lead = if parts.is_empty() {
            if changes.started.len() == 1 {
                "step"
            } else {
                "steps"
            }
        } else {
            "started"
        };
        let list = names_within(&changes.started, half);
        parts.push(if parts.is_empty() {
            format!("{lead} {list} started")
        } else {
            format!("{lead} {list}")
        });
    }
    let single = match (changes.started.as_slice(), changes.finished.as_slice()) {
        ([one], []) | ([], [one]) => Some(one.as_str()),
        ([a], [b]) if a == b => Some(a.as_str()),
        _ => None,
    };
    Some((reason, parts.join("; "), single))
}

/// `a, b, c`, or as many as fit in `budget` bytes and `and 7 more`.
fn names_within(names: &[String], budget: usize) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let rest = names.len() - i;
        let more = format!(" and {rest} more");
        if out.len() + name.len() + 2 + more.len() > budget && rest > 0 && i > 0 {
            out.push_str(&more);
            return out;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
    }
    out
}

/// One Event for the steps a status write reports as started or succeeded (see
/// [`step_event`]), about the workflow; when it names one step, its Job is the related object.
/// It is an API write, so it is posted once per status write, not once per step (at most one
/// Event for every status write: the status is written at most every 500 ms while steps finish
/// quickly); `--no-step-events` turns them off.
///
/// Created directly, not through the framework's [`kube_kopf::events::Publisher`]: it folds an
/// Event with the reason of one published within 6 minutes into the first one's series, keeping
/// the first note, and each step Event has a note of its own (the steps it names). (kube's
/// `Recorder`, which the publisher replaced, also scanned every Event of those 6 minutes on each
/// post: 44% of the operator's CPU at 22,000 step Events in `make bench`.)
async fn publish_step_events(
    ctx: &Context<WorkFlow>,
    workflow: &WorkFlow,
    run: &str,
    changes: &StepChanges,
) {
    let Some((reason, note, single)) = step_event(changes) else {
        return;
    };
    let name = workflow.name_any();
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<events::v1::Event> = Api::namespaced(ctx.client.clone(), &namespace);
    let instance =
        std::env::var("POD_NAME").unwrap_or_else(|_| super::operator::OPERATOR_NAME.to_string());
    let now = Timestamp::now();
    let related = single.map(|step| ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: Some(names::job_name(&name, step, run)),
        namespace: Some(namespace.clone()),
        ..Default::default()
    });
    // Named as kube's recorder names Events (`<object>.<nanoseconds in hex>`): unique without
    // `generateName`, whose 5 random characters (27^5 names) are more likely than not to collide
    // within 4,500 Events of one prefix.
    let event_name = format!("{}.{:x}", names::dns_label(&name), now.as_nanosecond());
    let event = events::v1::Event {
        metadata: ObjectMeta {
            name: Some(event_name),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(ctx.reason.to_string()),
        reason: Some(reason.into()),
        note: Some(note),
        regarding: Some(ctx.object_ref()),
        related,
        reporting_controller: Some(super::operator::OPERATOR_NAME.into()),
        reporting_instance: Some(instance),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    if let Err(error) = api.create(&PostParams::default(), &event).await {
        tracing::warn!(%error, workflow = %name, "posting a step event");
    }
}

/// Replaces the workflow's status with `status` (if any) in one write, after any write of it in
/// flight ([`StatusWriter::write`]); whether a write was made.
async fn write_status(
    shared: &Shared,
    ctx: &Context<WorkFlow>,
    workflow: &WorkFlow,
    status: Option<&super::crd::WorkFlowStatus>,
) -> Result<bool, HandlerError> {
    let Some(status) = status else {
        return Ok(false);
    };
    shared
        .status
        .write(&ctx.client, workflow, status)
        .await
        .map_err(|e| {
            shared.metrics.api_error("patch");
            temporary("writing the status", e)
        })?;
    Ok(true)
}

/// The workflow's Jobs, from the mirror, as the planner sees them. Only Jobs owned by this very
/// object (by uid) count: a workflow deleted and recreated under the same name must not inherit
/// the old one's Jobs.
fn observed_jobs(
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

/// A Job the API server refused: its step, its name and the server's message.
type Refusal = (String, String, String);

/// Carries out the plan's actions, [`ACTIONS_IN_FLIGHT`] at a time; the Jobs the API server
/// refused with 422 (a bad value inside the parts of the spec the CRD keeps whole, such as a
/// malformed volume), which no retry can create.
async fn carry_out(
    shared: &Shared,
    api: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
    plan: &Plan,
) -> Result<Vec<Refusal>, HandlerError> {
    let refusals = Mutex::new(Vec::new());
    if plan
        .actions
        .iter()
        .any(|a| matches!(a, Action::CreateJob { .. }))
    {
        ensure_workspace(shared, api, workflow, compiled).await?;
    }
    futures::stream::iter(plan.actions.iter().map(Ok))
        .try_for_each_concurrent(ACTIONS_IN_FLIGHT, |action| {
            execute(shared, api, workflow, compiled, action, &refusals)
        })
        .await?;
    Ok(refusals.into_inner().expect("refusals lock"))
}

/// Creates the workspace claim of the current run (`spec.workspace`) before the Jobs that
/// mount it: at each pass that creates Jobs, as 409 says it exists already (one request, no
/// memory to trust after a restart), and only for workflows with a workspace.
async fn ensure_workspace(
    shared: &Shared,
    jobs_api: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
) -> HandlerResult {
    let claim = jobs::build_workspace_claim(workflow, &compiled.run)
        .map_err(|e| HandlerError::permanent(e.to_string()))?;
    let Some(claim) = claim else {
        return Ok(());
    };
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(jobs_api.clone().into_client(), &namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&params, &claim).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => Err(HandlerError::permanent(
            format!("the API server refused the workspace claim: {}", e.message),
        )),
        Err(e) => {
            shared.metrics.api_error("create");
            Err(temporary("creating the workspace claim", e))
        }
    }
}

/// The full plan once the `refusals` are recorded in the status `plan` made (or the stored
/// one): the planner reads each as its step's failure ([`plan::refused_step_status`]). Its
/// status is always set, to be written.
fn replan_refused(
    shared: &Shared,
    workflow: &WorkFlow,
    compiled: &Compiled,
    children: &[Arc<JobSummary>],
    plan: &Plan,
    refusals: &[Refusal],
    now: Timestamp,
) -> Plan {
    let mut recorded = workflow.clone();
    let status = recorded.status.get_or_insert_with(Default::default);
    if let Some(planned) = &plan.status {
        *status = planned.clone();
    }
    for (step, job, message) in refusals {
        status.steps.retain(|s| &s.name != step);
        status
            .steps
            .push(super::plan::refused_step_status(step, job, message));
    }
    let mut observed = observed_jobs(children, workflow, now);
    observed.extend(shared.unmirrored(&workflow.uid().unwrap_or_default(), children));
    let mut replanned = super::plan::plan_compiled(&recorded, compiled, &observed, now);
    replanned.status = replanned.status.or(recorded.status);
    // The moves the first plan made happened too (e.g. `Created -> Started`).
    replanned.events.splice(0..0, plan.events.iter().cloned());
    replanned
}

/// Carries out one action. `compiled` is `workflow.spec`'s: its run id and step index keep a
/// create O(1) in the number of steps (no re-hash of the spec, no scan of the steps). A Job
/// create the API server refuses with 422 goes to `refusals`.
async fn execute(
    shared: &Shared,
    api: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
    action: &Action,
    refusals: &Mutex<Vec<Refusal>>,
) -> HandlerResult {
    let uid = workflow.uid().unwrap_or_default();
    match action {
        Action::CreateJob {
            step,
            job_name,
            retry,
            exit,
            inputs,
            instance,
        } => {
            let (dag, steps) = match exit {
                None => (compiled.dag.as_ref().ok(), &workflow.spec.containers),
                Some(_) => (compiled.exit.as_ref(), &workflow.spec.on_exit),
            };
            let index = dag.and_then(|dag| dag.index_of(step));
            let step = index.and_then(|i| steps.get(i)).ok_or_else(|| {
                HandlerError::permanent(format!("planned step {step} is not in the spec"))
            })?;
            let data = StepData {
                inputs: Some(inputs),
                // Exit steps' outputs are never read.
                outputs_read: exit.is_none()
                    && index.is_some_and(|i| compiled.flow.read.contains(&i)),
            };
            let job = jobs::build_job_for(
                workflow,
                step,
                &compiled.run,
                *retry,
                exit.as_ref(),
                data,
                instance,
            )
            .map_err(|e| HandlerError::permanent(e.to_string()))?;
            match api
                .create(
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..Default::default()
                    },
                    &job,
                )
                .await
            {
                Ok(created) => {
                    if let Some(observed) = jobs::observe_job(&created.into(), Timestamp::now()) {
                        shared.created(&uid, observed);
                    }
                    Ok(())
                }
                // The name is deterministic: an existing Job is this step's Job of this run.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => {
                    // A slot of `--max-running-steps` taken for a Job not created is free again.
                    if let Some(admission) = &shared.admission {
                        let namespace = workflow.namespace().unwrap_or_default();
                        admission.release(&(namespace, job_name.clone()));
                    }
                    match e {
                        kube::Error::Api(e) if e.code == 422 => {
                            tracing::warn!(job = %job_name, message = %e.message, "the API server refused a step's job");
                            // Recorded under the instance's name (`build[3]`, `run1/build`).
                            let shown = fan_out::display_name(
                                &step.step_name,
                                instance.run_index,
                                workflow.spec.run_count(),
                                instance.item.as_ref().map(|item| item.index),
                            );
                            refusals.lock().expect("refusals lock").push((
                                shown,
                                job_name.clone(),
                                e.message,
                            ));
                            Ok(())
                        }
                        e => Err(temporary(&format!("creating job {job_name}"), e)),
                    }
                }
            }
        }
        Action::DeleteJob { job_name, .. } => {
            delete_job(api, job_name).await?;
            shared.deleted(&uid, job_name);
            Ok(())
        }
        Action::SetJobDeadline {
            job_name,
            active_deadline_seconds,
        } => {
            let patch = json!({"spec": {"activeDeadlineSeconds": active_deadline_seconds}});
            patch_job(api, job_name, patch, "updating the deadline of").await
        }
        Action::TimeOutJob { job_name, why } => {
            let patch = jobs::time_out_patch(why);
            patch_job(api, job_name, patch, "stopping the timed-out").await
        }
        Action::FailStart { job_name, why } => {
            let patch = jobs::cannot_start_patch(why);
            patch_job(api, job_name, patch, "stopping the not started").await
        }
    }
}

/// Merge-patches a Job. A Job already gone is success: the next plan goes by the Jobs that
/// exist.
async fn patch_job(
    api: &Api<Job>,
    name: &str,
    patch: serde_json::Value,
    what: &str,
) -> HandlerResult {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(temporary(&format!("{what} job {name}"), e)),
    }
}

/// Deletes a Job with its pods (background propagation: the API's default for Jobs orphans the
/// pods, the seed operator's bug 9). A Job already gone is success.
async fn delete_job(api: &Api<Job>, name: &str) -> HandlerResult {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(temporary(&format!("deleting job {name}"), e)),
    }
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
    shared.forget(workflow);
    Ok(())
}

/// Whether the timer needs to look at a workflow: only a non-terminal one can time out. A
/// terminal status written for an older generation does not count (the spec changed since).
/// Cheap on purpose: it runs for every mirrored workflow at every tick.
pub fn may_time_out(workflow: &WorkFlow) -> bool {
    let Some(status) = &workflow.status else {
        return true;
    };
    let terminal = status.workflow_status.is_some_and(|p| p.is_terminal());
    let current = status.observed_generation == workflow.metadata.generation;
    !(terminal && current) && workflow.meta().deletion_timestamp.is_none()
}

fn temporary(what: &str, error: kube::Error) -> HandlerError {
    HandlerError::temporary(format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(executed: &[&str], started: &[&str]) -> WorkFlowStatus {
        WorkFlowStatus {
            executed: executed.iter().map(|s| s.to_string()).collect(),
            started: started.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn changes(finished: &[&str], started: &[&str]) -> StepChanges {
        StepChanges {
            finished: finished.iter().map(|s| s.to_string()).collect(),
            started: started.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn one_event_names_every_step_a_status_write_reports() {
        assert_eq!(step_event(&changes(&[], &[])), None);
        assert_eq!(
            step_event(&changes(&[], &["a"])),
            Some((STEP_STARTED, "step a started".to_string(), Some("a")))
        );
        assert_eq!(
            step_event(&changes(&["a", "b"], &[])),
            Some((STEP_SUCCEEDED, "steps a, b succeeded".to_string(), None))
        );
        assert_eq!(
            step_event(&changes(&["a"], &["b", "c"])),
            Some((
                STEPS_PROGRESSED,
                "step a succeeded; started b, c".to_string(),
                None
            ))
        );
        // Started and finished between two writes: one step, its Job related.
        assert_eq!(step_event(&changes(&["a"], &["a"])).unwrap().2, Some("a"));
    }

    #[test]
    fn a_step_events_note_fits_the_api_limit() {
        let many: Vec<String> = (0..5000).map(|i| format!("step-number-{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let (_, note, _) = step_event(&changes(&names, &names)).unwrap();
        assert!(note.len() <= NOTE_MAX_BYTES, "{} bytes", note.len());
        assert!(note.contains("step-number-0, step-number-1"), "{note}");
        assert!(note.contains(" more"), "{note}");
    }

    #[test]
    fn step_changes_name_the_steps_that_finished_and_started() {
        let cases = [
            (None, status(&[], &["a"]), changes(&[], &["a"])),
            (
                Some(status(&[], &["a"])),
                status(&["a"], &["b", "c"]),
                changes(&["a"], &["b", "c"]),
            ),
            (
                Some(status(&["a"], &["b", "c"])),
                status(&["a", "b"], &["c"]),
                changes(&["b"], &[]),
            ),
            (
                Some(status(&["a"], &["b"])),
                status(&["a"], &["b"]),
                changes(&[], &[]),
            ),
            // b started and finished between two written statuses.
            (
                Some(status(&["a"], &[])),
                status(&["a", "b"], &["c"]),
                changes(&["b"], &["b", "c"]),
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(step_changes(old.as_ref(), &new), want, "{old:?} -> {new:?}");
        }
    }

    mod incremental_passes {
        use super::super::*;
        use crate::workflow::job_summary::{JobEnd, JobSummaryStatus};
        use crate::workflow::testing::{Jobs, creates};

        /// A started workflow (a and b ready, c after both, d after c), the state its first plan
        /// left in the cache, and its compiled form.
        fn started() -> (WorkFlow, Arc<Compiled>, CachedRun) {
            let mut wf = WorkFlow::test("w")
                .step("a", &[])
                .step("b", &[])
                .step("c", &["a", "b"])
                .step("d", &["c"])
                .build();
            let compiled = Arc::new(Compiled::new(&wf.spec));
            let (first, state) = RunState::build(&wf, compiled.clone(), &[], Timestamp::now());
            wf.status = first.status;
            let cached = CachedRun {
                generation: 1,
                state: state.expect("a started workflow is followed"),
                status_written_at: None,
                built_at: Instant::now(),
            };
            (wf, compiled, cached)
        }

        /// Step `step`'s Job as the mirror holds it, running or complete.
        fn mirrored(
            wf: &WorkFlow,
            compiled: &Compiled,
            step: &str,
            complete: bool,
        ) -> Arc<JobSummary> {
            let spec = wf
                .spec
                .containers
                .iter()
                .find(|s| s.step_name == step)
                .unwrap();
            let mut job: JobSummary = jobs::build_job(wf, spec, &compiled.run).unwrap().into();
            job.status = Some(JobSummaryStatus {
                ended: complete.then_some(JobEnd::Complete),
                ..Default::default()
            });
            Arc::new(job)
        }

        #[test]
        fn jobs_the_mirror_shows_beyond_the_batch_are_followed_not_created_again() {
            let (wf, compiled, cached) = started();
            // b's Job reached the mirror after the batch with a's was taken.
            let a = mirrored(&wf, &compiled, "a", false);
            let b = mirrored(&wf, &compiled, "b", false);
            let now = Timestamp::now();
            let (plan, run) = plan_incrementally(
                &[a.clone(), b],
                &[],
                &wf,
                &compiled,
                Some(cached),
                vec![a],
                now,
            )
            .expect("planned incrementally");
            assert_eq!(creates(&plan), Vec::<&str>::new());
            assert_eq!(run.state.job_count(), 2);
        }

        #[test]
        fn jobs_we_created_that_the_mirror_does_not_show_yet_are_not_created_again() {
            let (wf, compiled, cached) = started();
            let a = mirrored(&wf, &compiled, "a", false);
            let b_created = Jobs::of(&wf).active("b", Timestamp::now()).build();
            let now = Timestamp::now();
            let (plan, run) = plan_incrementally(
                std::slice::from_ref(&a),
                &b_created,
                &wf,
                &compiled,
                Some(cached),
                vec![a.clone()],
                now,
            )
            .expect("planned incrementally");
            assert_eq!(creates(&plan), Vec::<&str>::new());
            assert_eq!(run.state.job_count(), 2);
        }

        #[test]
        fn a_job_the_state_knows_but_the_mirror_lost_is_left_to_the_full_planner() {
            let (wf, compiled, cached) = started();
            let (a, b) = (
                mirrored(&wf, &compiled, "a", false),
                mirrored(&wf, &compiled, "b", false),
            );
            let now = Timestamp::now();
            let (_, cached) = plan_incrementally(
                &[a.clone(), b.clone()],
                &[],
                &wf,
                &compiled,
                Some(cached),
                vec![a.clone(), b],
                now,
            )
            .expect("planned incrementally");
            // b's Job was deleted: only a is left in the mirror.
            let planned = plan_incrementally(
                std::slice::from_ref(&a),
                &[],
                &wf,
                &compiled,
                Some(cached),
                vec![a.clone()],
                now,
            );
            assert!(planned.is_none());
        }

        #[test]
        fn a_pass_without_changes_writes_what_passes_with_changes_deferred() {
            let (wf, compiled, cached) = started();
            let (a, b) = (
                mirrored(&wf, &compiled, "a", true),
                mirrored(&wf, &compiled, "b", false),
            );
            let now = Timestamp::now();
            let (with_changes, cached) = plan_incrementally(
                &[a.clone(), b.clone()],
                &[],
                &wf,
                &compiled,
                Some(cached),
                vec![a, b],
                now,
            )
            .expect("planned incrementally");
            let rendered = with_changes.status.expect("a finished: the status changed");
            assert_eq!(rendered.executed, vec!["a".to_string()]);
            // That status was deferred: the stored one still lists nothing executed.
            assert_eq!(
                deferred_status(&cached.state, wf.status.as_ref()),
                Some(rendered.clone())
            );
            // Once it is written or handed over to be, there is nothing left to write.
            assert_eq!(deferred_status(&cached.state, Some(&rendered)), None);
        }

        #[test]
        fn a_cached_state_follows_its_own_statuses_not_one_changed_by_another() {
            let (wf, _, cached) = started();
            let stored = wf.status.clone().expect("the first plan's status");
            // Our own status written behind landed: more progress, the same phase.
            let mut ours = stored.clone();
            ours.progress = Some("1/4".into());
            ours.executed = vec!["a".into()];
            assert!(still_follows(&cached.state, Some(&ours), None));
            // Someone else wrote a message the state never rendered...
            let mut edited = stored.clone();
            edited.message = Some("edited by hand".into());
            assert!(!still_follows(&cached.state, Some(&edited), None));
            // ...unless a status of ours, which will replace it, is on its way.
            assert!(still_follows(&cached.state, Some(&edited), Some(&ours)));
            // Our first status is on its way; nothing is stored yet.
            assert!(still_follows(&cached.state, None, Some(&stored)));
            assert!(!still_follows(&cached.state, None, None));
        }

        #[test]
        fn a_refused_job_fails_its_step_in_the_status_written_at_once() {
            let (wf, compiled, _) = started();
            // The first plan created a and b; the API server refused a's Job.
            let plan = Plan {
                status: wf.status.clone(),
                ..RunState::build(&wf, compiled.clone(), &[], Timestamp::now()).0
            };
            let job = names::job_name("w", "a", &compiled.run);
            let message = "spec.template.spec.volumes[0].name: Invalid value: \"Bad_Name\"";
            let refusals = vec![("a".to_string(), job.clone(), message.to_string())];
            let replanned = replan_refused(
                &Shared::default(),
                &wf,
                &compiled,
                &[],
                &plan,
                &refusals,
                Timestamp::now(),
            );
            let status = replanned.status.clone().expect("a status to write");
            assert_eq!(
                status.workflow_status,
                Some(crate::workflow::lifecycle::Phase::Failed)
            );
            assert_eq!(
                status.message.as_deref(),
                Some(format!("step a failed: the API server refused its Job: {message}").as_str())
            );
            let entry = status.steps.iter().find(|s| s.name == "a").unwrap();
            assert_eq!(
                entry.reason.as_deref(),
                Some(crate::workflow::plan::REASON_JOB_REFUSED)
            );
            assert_eq!(entry.job.as_deref(), Some(job.as_str()));
            assert!(creates(&replanned).is_empty(), "{:?}", replanned.actions);
        }

        #[test]
        fn a_pass_without_changes_rebuilds_a_state_built_long_ago() {
            let (wf, compiled, mut cached) = started();
            cached.built_at = Instant::now()
                .checked_sub(FULL_RECONCILE_EVERY)
                .expect("the clock is past the interval");
            let planned = plan_incrementally(
                &[],
                &[],
                &wf,
                &compiled,
                Some(cached),
                vec![],
                Timestamp::now(),
            );
            assert!(planned.is_none());
        }
    }
}
