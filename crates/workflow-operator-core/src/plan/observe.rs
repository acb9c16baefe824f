//! Observing: which Job speaks for each step (and each item of a step that fans out), and
//! what it says: succeeded, running, failed, past its timeout or start deadline.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use k8s_openapi::jiff::SignedDuration;

use crate::cache::REASON_CACHED;
use crate::crd::{Step, StepPhase, StepStatus, UNLIMITED, WorkFlowStatus};
use crate::dag::{Dag, Progress};
use crate::data_flow::DataFlow;
use crate::failure_cause::DEADLINE_EXCEEDED;
use crate::fan_out::{self, FanOut, ItemList};
use crate::outputs::{Inputs, Outputs};
use crate::retry::Strategy;
use crate::when::{Ended, Upstream, When};

use super::attempts::{AfterFailure, BackingOff, after_failure};
use super::data::{self, Facts, StepsRead, item_unresolved, items_of, step_inputs};
use super::failure::Failure;
use super::planner::{Fan, Known, Planner, Scope, Unit, View};
use super::{
    Gate, JobState, ObservedJob, QUEUE_TIMEOUT_WHY, REASON_BAD_ITEM, REASON_BAD_OUTPUTS,
    REASON_BAD_PARAM, REASON_JOB_REFUSED, REASON_MISSING_OUTPUT, REASON_NO_ARTIFACT_REPOSITORY,
    REASON_WHEN_FAILED,
};

impl<'a> Planner<'a> {
    /// Sees the Jobs of the steps of `scope`: which Job speaks for each step (each item of a
    /// step that fans out), which steps succeeded, failed or run, and which running ones are
    /// past their timeout or start deadline (stopping those). Failed Jobs of an earlier retry
    /// (`spec.retry`) are left out, so their steps run again; so is every Job of an earlier
    /// retry for the exit steps (they run again in full on a retry). A step that fans out is
    /// done once its every item succeeded, and failed once one failed. Then decides which of
    /// the steps whose dependencies are done may start (`when`, named outputs, items). `main`
    /// is the steps' DAG and what they told, when `scope` is the exit steps.
    pub(super) fn assess(
        &mut self,
        scope: Scope<'a>,
        jobs: &[&'a ObservedJob],
        main: Option<(&'a Dag, &Known<'a>)>,
    ) -> View<'a> {
        let flow: &'a DataFlow = self.flow;
        // Exit steps do not fan out.
        let fan_outs = if main.is_none() {
            &flow.fan_out
        } else {
            &NO_FANS
        };
        let (job_of, item_jobs) = speaking_jobs(&scope, jobs, fan_outs, self.workflow.spec.retry);
        let strategies = if main.is_none() {
            &flow.retry
        } else {
            &flow.exit_retry
        };
        let mut seen = Assessment::new(scope, job_of, strategies);
        if main.is_none() {
            seen.hooks_after = &flow.hooks_after;
        }
        let reads = match main {
            None => (&flow.read, &flow.ended_read),
            Some(_) => (&flow.exit_read, &flow.exit_ended_read),
        };
        self.see_steps(&mut seen, reads, jobs);
        self.see_cached(&mut seen);
        self.see_fans(&mut seen, fan_outs, item_jobs, jobs);
        self.see_refused(&mut seen);
        // A step that fans out starts no more items once one failed.
        for (unit, _) in &seen.failures {
            if seen.fans.contains_key(&unit.node) {
                seen.blocked[unit.node] = true;
            }
            seen.is_refused.insert(*unit);
        }
        let whens = if main.is_none() {
            &flow.when
        } else {
            &flow.exit_when
        };
        let reads = !flow.read.is_empty()
            || !flow.ended_read.is_empty()
            || !flow.exit_read.is_empty()
            || !flow.exit_ended_read.is_empty();
        if !whens.is_empty() || reads || !seen.fans.is_empty() {
            seen.decide_data((whens, fan_outs), main);
        }
        let ready = seen.ready();
        seen.into_view(ready)
    }

    /// One view per run from `from` on (of `spec.runs` and those the rules added), each of
    /// its own Jobs (the run index is in the run id's Job names and labels).
    pub(super) fn assess_runs(
        &mut self,
        dag: &'a Dag,
        main_jobs: &[&'a ObservedJob],
        from: u32,
    ) -> Vec<View<'a>> {
        let spec = &self.workflow.spec;
        let runs = self.runs;
        let count = runs.saturating_sub(from) as usize;
        let mut by_run: Vec<Vec<&ObservedJob>> = vec![Vec::new(); count];
        for &job in main_jobs {
            let slot = job.run_index.checked_sub(from).map(|r| r as usize);
            if let Some(jobs) = slot.and_then(|r| by_run.get_mut(r)) {
                jobs.push(job);
            }
        }
        by_run
            .iter()
            .zip(from..)
            .map(|(jobs, r)| {
                let scope = Scope::run(dag, (&spec.containers, &self.kinds.steps), r, runs)
                    .at(self.run_seconds());
                self.assess(scope, jobs, None)
            })
            .collect()
    }

    /// Sees the Jobs of the steps that do not fan out; `reads` are those of them whose outputs
    /// are read, and those whose end only is.
    fn see_steps(
        &mut self,
        seen: &mut Assessment<'a>,
        (read, ended_read): (&HashSet<usize>, &HashSet<usize>),
        jobs: &[&'a ObservedJob],
    ) {
        // The outputs of the steps whose outputs are named: recorded in the status, or read
        // by the handler from the pod of a Job that succeeded since.
        let recorded = self.recorded_outputs(!read.is_empty());
        let mut released = Vec::new();
        for i in 0..seen.job_of.len() {
            let Some(job) = seen.job_of[i] else { continue };
            match self.see(job, &seen.scope.steps[i]) {
                Seen::Succeeded if read.contains(&i) => {
                    let outputs = recorded
                        .get(job.name.as_str())
                        .map(|o| Ok(*o))
                        .or_else(|| job.outputs.as_ref().map(|o| o.as_ref()));
                    match outputs {
                        Some(Ok(outputs)) => {
                            seen.known_outputs.insert(i, outputs);
                            seen.ended.insert(i, succeeded(job));
                            seen.progress.complete(i, &mut released);
                        }
                        Some(Err(why)) => {
                            if seen.fail(Unit::step(i), REASON_BAD_OUTPUTS, why.clone()) {
                                seen.progress.complete(i, &mut released);
                            }
                        }
                        // Not read yet (its pods could not be listed): the next pass reads
                        // them; until then it holds its dependents as if it still ran.
                        None => seen.running += 1,
                    }
                }
                Seen::Succeeded => {
                    if ended_read.contains(&i) {
                        // Its end is named, not its outputs: its entry records the end.
                        seen.known_outputs.insert(i, &NO_OUTPUTS);
                        seen.ended.insert(i, succeeded(job));
                    }
                    seen.progress.complete(i, &mut released);
                }
                Seen::Running => seen.running += 1,
                Seen::Stopped => {}
                Seen::Failed(failure) => {
                    let unit = Unit::step(i);
                    match self.attempt_failed(seen, unit, job, failure, jobs) {
                        Some(failure) => {
                            seen.ended.insert(i, ended_by(&failure, Some(job)));
                            if seen.failed(unit, failure) {
                                seen.progress.complete(i, &mut released);
                            }
                        }
                        None => seen.running += 1,
                    }
                }
            }
        }
    }

    /// Sees the steps that fan out, each after those it depends on: their items (a
    /// `withParam`'s from the outputs just known, or the aggregate of a step that fans out) and
    /// their items' Jobs (`item_jobs`). One whose every item succeeded is done; when its outputs
    /// are read, once every succeeded item's outputs are known too.
    fn see_fans(
        &mut self,
        seen: &mut Assessment<'a>,
        fan_outs: &'a HashMap<usize, FanOut>,
        mut item_jobs: HashMap<usize, BTreeMap<u32, &'a ObservedJob>>,
        scope_jobs: &[&'a ObservedJob],
    ) {
        let (dag, steps) = (seen.scope.dag, seen.scope.steps);
        let mut released = Vec::new();
        let recorded = self.recorded_outputs(!fan_outs.is_empty() && !self.flow.read.is_empty());
        let order: Vec<usize> = (dag.topological_order())
            .filter(|i| fan_outs.contains_key(i))
            .collect();
        for i in order {
            let fan_out = &fan_outs[&i];
            let known = (&seen.known_outputs, &seen.fans);
            let items = match items_of(&steps[i], fan_out, dag, known) {
                Ok(items) => items,
                Err(why) => {
                    seen.bad_params.insert(i, why);
                    None
                }
            };
            let jobs = item_jobs.remove(&i).unwrap_or_default();
            let mut fan = Fan {
                items,
                jobs,
                outputs: BTreeMap::new(),
                succeeded: 0,
                running: 0,
                stopped: 0,
                tolerated: 0,
                skipped: BTreeSet::new(),
            };
            let read = self.flow.aggregated.contains(&i);
            for (&item, &job) in &fan.jobs {
                let unit = Unit {
                    node: i,
                    item: Some(item),
                };
                match self.see(job, &steps[i]) {
                    Seen::Succeeded if read => {
                        let outputs = (recorded.get(job.name.as_str()).map(|o| Ok(*o)))
                            .or_else(|| job.outputs.as_ref().map(|o| o.as_ref()));
                        match outputs {
                            Some(Ok(outputs)) => {
                                fan.outputs.insert(item, outputs);
                                fan.succeeded += 1;
                            }
                            Some(Err(why)) => {
                                if seen.fail(unit, REASON_BAD_OUTPUTS, why.clone()) {
                                    fan.tolerated += 1;
                                }
                            }
                            // Not read yet: the next pass reads them; until then the step
                            // holds its dependents as if the item still ran.
                            None => fan.running += 1,
                        }
                    }
                    Seen::Succeeded => fan.succeeded += 1,
                    Seen::Running => fan.running += 1,
                    Seen::Stopped => fan.stopped += 1,
                    Seen::Failed(failure) => {
                        match self.attempt_failed(seen, unit, job, failure, scope_jobs) {
                            Some(failure) => {
                                if seen.failed(unit, failure) {
                                    fan.tolerated += 1;
                                }
                            }
                            None => fan.running += 1,
                        }
                    }
                }
            }
            seen.running += fan.running as usize;
            let all = fan.items.as_ref().map(ItemList::len);
            let ended = (fan.succeeded + fan.tolerated) as usize;
            if all.is_some_and(|all| all > 0 && ended >= all) {
                seen.progress.complete(i, &mut released);
            }
            seen.fans.insert(i, fan);
        }
    }

    /// The outputs the status records of succeeded steps and items, by Job name (only when
    /// `wanted`: some step's outputs may be read from them).
    fn recorded_outputs(&self, wanted: bool) -> HashMap<&'a str, &'a Outputs> {
        if !wanted {
            return HashMap::new();
        }
        let previous: &'a WorkFlowStatus = self.previous;
        (previous.steps.iter())
            .filter(|s| s.phase == StepPhase::Succeeded)
            .filter_map(|s| Some((s.job.as_deref()?, &s.outputs)))
            .collect()
    }

    /// A step without a Job whose result came from the cache (`cache`): done, with the
    /// entry's outputs, as the hit this pass found (the gate's) or the status recorded says.
    fn see_cached(&self, seen: &mut Assessment<'a>) {
        let gate: &'a Gate = self.gate;
        let previous: &'a WorkFlowStatus = self.previous;
        let cached_entries = || {
            (gate.cached.iter())
                .chain(&previous.steps)
                .filter(|s| s.reason.as_deref() == Some(REASON_CACHED))
        };
        if cached_entries().next().is_none() {
            return;
        }
        let mut released = Vec::new();
        for i in 0..seen.job_of.len() {
            if seen.job_of[i].is_some() || seen.scope.steps[i].cache.is_none() {
                continue;
            }
            let job = self.job_name(&seen.display(Unit::step(i)));
            if let Some(entry) = cached_entries().find(|s| s.job.as_deref() == Some(job.as_str())) {
                seen.known_outputs.insert(i, &entry.outputs);
                seen.cached.insert(i, entry);
                seen.progress.complete(i, &mut released);
            }
        }
    }

    /// A step (or item) whose Job the API server refused has no Job: its status entry is the
    /// record (of this run and retry: the Job's name has both in it), and its failure.
    fn see_refused(&self, seen: &mut Assessment<'a>) {
        let refused: HashMap<&str, &StepStatus> = self
            .previous
            .steps
            .iter()
            .filter(|s| {
                let reason = s.reason.as_deref();
                reason == Some(REASON_JOB_REFUSED) || reason == Some(REASON_NO_ARTIFACT_REPOSITORY)
            })
            .filter_map(|s| Some((s.job.as_deref()?, s)))
            .collect();
        if refused.is_empty() {
            return;
        }
        let (dag, run_index, runs) = (seen.scope.dag, seen.scope.run_index, seen.scope.runs);
        let name_of =
            |unit: Unit| fan_out::display_name(dag.name(unit.node), run_index, runs, unit.item);
        let mut released = Vec::new();
        for unit in seen.without_jobs() {
            let name = self.job_name(&name_of(unit));
            if let Some(entry) = refused.get(name.as_str()) {
                let entry = Box::new((*entry).clone());
                if seen.failed(unit, Failure::Refused { entry }) && unit.item.is_none() {
                    seen.progress.complete(unit.node, &mut released);
                }
            }
        }
    }

    /// What `job` (of `step`) says of its step: succeeded, still running, or failed (stopping
    /// it when it ran past its timeout, or its pod did not start by its deadline).
    fn see(&mut self, job: &'a ObservedJob, step: &Step) -> Seen {
        let spec = &self.workflow.spec;
        // A daemon that was ready is done, running or stopped at the end; one that failed by
        // itself since fails its step, as Argo fails a daemon whose pod failed.
        if job.daemoned.is_some() {
            match &job.state {
                JobState::Active { .. } | JobState::Succeeded => return Seen::Succeeded,
                _ if job.stopped => return Seen::Succeeded,
                _ => {}
            }
        }
        if job.stopped {
            return Seen::Stopped;
        }
        if let Some(suspend) = step.suspend.as_deref()
            && let JobState::Active { .. } = job.state
        {
            return match self.see_suspended(job, suspend) {
                true => Seen::Succeeded,
                false => Seen::Running,
            };
        }
        let timeout = spec.effective_timeout(step);
        match &job.state {
            JobState::Succeeded => Seen::Succeeded,
            JobState::TimedOut { why } => Seen::Failed(Failure::TimedOut { why: why.clone() }),
            JobState::CannotStart { why } => {
                Seen::Failed(Failure::CannotStart { why: why.clone() })
            }
            // Its pod ran past a deadline (the kubelet stopped it, and the pod, read by
            // `failure_cause::explain`, says so), or the Job ran past its own (the backstop, or a
            // Job an older operator gave the step's timeout).
            JobState::Failed {
                reason, exit_code, ..
            } if reason == DEADLINE_EXCEEDED => {
                let why = match exit_code {
                    Some(_) => format!("its pod ran past its timeout of {timeout}s"),
                    None => format!(
                        "its Job exceeded its deadline of {}s",
                        job.active_deadline_seconds.unwrap_or(timeout)
                    ),
                };
                Seen::Failed(Failure::TimedOut { why })
            }
            JobState::Failed {
                reason,
                message,
                exit_code,
            } => Seen::Failed(Failure::Failed {
                reason: reason.clone(),
                message: message.clone(),
                exit_code: *exit_code,
            }),
            // Queued for Kueue: a suspended Job has no pod and runs no clock but its queue's
            // (`queueTimeout`); once admitted, the step's timeout counts from the Job's
            // `startTime`, which the Job controller sets anew at each resume. A preempted Job
            // is suspended again and waits again, no attempt counted: Kueue evicts it by
            // suspending it (<https://kueue.sigs.k8s.io/docs/concepts/preemption/>), and the
            // Job controller removes its pods without counting them failed.
            JobState::Active { .. } if self.queued_for_kueue(job) => {
                let limit = spec
                    .queue_timeout
                    .filter(|_| job.suspended && !job.deleting);
                let waited = self.now.duration_since(job.queued_since());
                match limit {
                    Some(limit) if waited >= SignedDuration::from_secs(limit) => {
                        let queue = spec.queue_name.as_deref().unwrap_or_default();
                        let why = format!(
                            "{QUEUE_TIMEOUT_WHY} {queue} for {}s, longer than its queueTimeout of {limit}s",
                            waited.as_secs()
                        );
                        self.time_out(job, why.clone());
                        Seen::Failed(Failure::TimedOut { why })
                    }
                    _ => Seen::Running,
                }
            }
            JobState::Active { since } => {
                let elapsed = self.now.duration_since(*since);
                let over = timeout != UNLIMITED && elapsed >= SignedDuration::from_secs(timeout);
                let start_over = job
                    .start_deadline(spec.start_timeout)
                    .is_some_and(|at| self.now >= at);
                // A pod that never started fails for its cause when the start deadline or
                // the step's timeout comes, whichever first, once the handler read why
                // (until then it waits, as running). A Job being deleted is on its way out
                // already: not timed out again.
                let cannot_start = job
                    .start_failure
                    .as_ref()
                    .filter(|_| (over || start_over) && job.may_fail_to_start());
                if let Some(why) = cannot_start {
                    self.fail_start(job, why.clone());
                    Seen::Failed(Failure::CannotStart { why: why.clone() })
                } else if over && !job.deleting {
                    let why = format!(
                        "running for {}s, longer than its timeout of {timeout}s",
                        elapsed.as_secs()
                    );
                    self.time_out(job, why.clone());
                    Seen::Failed(Failure::TimedOut { why })
                } else {
                    Seen::Running
                }
            }
        }
    }

    /// A failed attempt (`job`) of `unit`: `None` when its step's `retryStrategy` tries it
    /// again (now: among the ready; later: backing off), else the failure to record.
    fn attempt_failed(
        &self,
        seen: &mut Assessment<'a>,
        unit: Unit,
        job: &'a ObservedJob,
        failure: Failure,
        jobs: &[&'a ObservedJob],
    ) -> Option<Failure> {
        let Some(strategy) = seen.strategies.get(&unit.node) else {
            return Some(failure);
        };
        let name = seen.display(unit);
        match after_failure(strategy, (&name, job), failure, jobs, self.now) {
            AfterFailure::Fail(failure) => Some(failure),
            AfterFailure::Retry(attempt) => {
                seen.next_attempt.insert(unit, attempt);
                None
            }
            AfterFailure::BackOff(waiting) => {
                seen.backing_off.insert(unit, waiting);
                None
            }
        }
    }

    /// Whether `job` waits for Kueue (a workflow with `queueName`): suspended, or admitted but
    /// without a `startTime` yet. Its run timeout has not begun (its creation time is its
    /// queue's, not its run's). A suspended Job of a workflow without a queue is not waiting
    /// for anyone: its step times out as any other. Under `queueScope: Workflow` only a
    /// suspended Job waits: the operator suspended it when the run's Workload was evicted.
    pub(super) fn queued_for_kueue(&self, job: &ObservedJob) -> bool {
        let spec = &self.workflow.spec;
        match (
            spec.queue_name.is_some(),
            crate::kueue::workflow_scoped(spec),
        ) {
            (false, _) => false,
            (true, true) => job.suspended,
            (true, false) => job.suspended || job.start_time.is_none(),
        }
    }
}

/// What one Job says of its step (or item), as [`Planner::assess`] sees it.
enum Seen {
    Succeeded,
    Running,
    Failed(Failure),
    /// Stopped by the workflow ([`ObservedJob::stopped`]): neither running nor done, and no
    /// failure of its own; the status shows it as it was when it was stopped.
    Stopped,
}

/// How a step whose `job` succeeded ended: exit code 0, its Job's start and end; a daemon's
/// IP, and no exit code or end while it runs.
fn succeeded(job: &ObservedJob) -> Ended {
    let running = matches!(job.state, JobState::Active { .. });
    Ended {
        status: StepPhase::Succeeded.as_str(),
        exit_code: (!running).then_some(0),
        started_at: job.start_time,
        finished_at: job.finished_at,
        ip: job.daemoned,
    }
}

/// How a step that failed with `failure` ended (its `job`'s times, when it had one): Argo's
/// `Failed` for a non-zero exit or a timeout, `Error` for the rest.
fn ended_by(failure: &Failure, job: Option<&ObservedJob>) -> Ended {
    let exit_code = match failure {
        Failure::Failed { exit_code, .. } => *exit_code,
        Failure::Refused { entry } => entry.exit_code,
        _ => None,
    };
    let timed_out = failure.phase() == StepPhase::TimedOut;
    Ended {
        status: if exit_code.is_some() || timed_out {
            "Failed"
        } else {
            "Error"
        },
        exit_code,
        started_at: job.and_then(|j| j.start_time),
        finished_at: job.and_then(|j| j.finished_at),
        ip: None,
    }
}

/// The outputs of a step whose outputs nobody reads.
static NO_OUTPUTS: Outputs = Outputs::new();

/// The fan-outs of a scope without any.
static NO_FANS: LazyLock<HashMap<usize, FanOut>> = LazyLock::new(HashMap::new);

/// The hooks of the exit steps, which have none.
static NO_HOOKS: LazyLock<HashMap<usize, Vec<usize>>> = LazyLock::new(HashMap::new);

/// The Job that speaks for each step of `scope` (and each item of a step that fans out, by
/// step): its latest attempt (`retryStrategy`); of two Jobs of one attempt, success wins, then
/// a running one (it may still succeed).
/// Jobs of an earlier retry (`retry` is the current one) are left out when failed, or all of
/// them for a scope that reruns in full. A Job of an item of a step that does not fan out, or
/// the other way round, is of no instance this spec has (the run id covers fan-outs, so it is
/// not ours).
#[allow(clippy::type_complexity)]
fn speaking_jobs<'a>(
    scope: &Scope<'a>,
    jobs: &[&'a ObservedJob],
    fan_outs: &HashMap<usize, FanOut>,
    retry: i32,
) -> (
    Vec<Option<&'a ObservedJob>>,
    HashMap<usize, BTreeMap<u32, &'a ObservedJob>>,
) {
    let superseded = |j: &ObservedJob| j.retry < retry && (scope.whole_retry || rank(j) == 2);
    let mut job_of: Vec<Option<&'a ObservedJob>> = vec![None; scope.dag.len()];
    let mut item_jobs: HashMap<usize, BTreeMap<u32, &'a ObservedJob>> = HashMap::new();
    for &job in jobs {
        if superseded(job) {
            continue;
        }
        let Some(i) = scope.dag.index_of(&job.step) else {
            continue;
        };
        match (fan_outs.contains_key(&i), job.item) {
            (false, None) if job_of[i].is_none_or(|old| speaks_over(job, old)) => {
                job_of[i] = Some(job);
            }
            (true, Some(item)) => {
                let slot = item_jobs.entry(i).or_default().entry(item).or_insert(job);
                if speaks_over(job, slot) {
                    *slot = job;
                }
            }
            _ => {}
        }
    }
    (job_of, item_jobs)
}

/// How a Job ranks among its step's: success, then running, then failed (or stopped by the
/// workflow, even while it stops: a retry runs its step again at once).
fn rank(job: &ObservedJob) -> u8 {
    if job.stopped {
        return 2;
    }
    match job.state {
        JobState::Succeeded => 0,
        JobState::Active { .. } => 1,
        JobState::Failed { .. } | JobState::TimedOut { .. } | JobState::CannotStart { .. } => 2,
    }
}

/// Whether `job` speaks for its step over `other`: a later attempt, else a better rank.
fn speaks_over(job: &ObservedJob, other: &ObservedJob) -> bool {
    (job.attempt, std::cmp::Reverse(rank(job))) > (other.attempt, std::cmp::Reverse(rank(other)))
}

/// What [`Planner::assess`] builds up, stage by stage, before it is a [`View`].
struct Assessment<'a> {
    scope: Scope<'a>,
    job_of: Vec<Option<&'a ObservedJob>>,
    fans: HashMap<usize, Fan<'a>>,
    progress: Progress<'a>,
    /// Failed instances (sorted into spec order at the end).
    failures: Vec<(Unit, Failure)>,
    /// Failed instances whose failure is tolerated (`continueOn.failed`).
    tolerated: Vec<(Unit, Failure)>,
    /// Steps done by a cache hit, with their entry.
    cached: HashMap<usize, &'a StepStatus>,
    /// The compiled `retryStrategy` of each step that has one.
    strategies: &'a HashMap<usize, Arc<Strategy>>,
    /// Failed instances tried again now, with their next attempt.
    next_attempt: HashMap<Unit, u32>,
    /// Failed instances waiting their back-off.
    backing_off: BTreeMap<Unit, BackingOff>,
    /// The phase of each step that failed, for the `when`s.
    phases: HashMap<usize, &'static str>,
    running: usize,
    known_outputs: HashMap<usize, &'a Outputs>,
    /// How the steps that ran ended: those whose outputs are read when they succeed, every one
    /// that failed.
    ended: HashMap<usize, Ended>,
    /// Why a `withParam`'s value is not its items: the step fails once it may start (its
    /// `when` may skip it first).
    bad_params: HashMap<usize, String>,
    /// Steps that start nothing more: a step that fans out once an item failed, a step whose
    /// data failed it.
    blocked: Vec<bool>,
    /// Failed instances, as a set.
    is_refused: HashSet<Unit>,
    skipped: Vec<bool>,
    inputs: HashMap<usize, Inputs>,
    /// The hooks of each hooked step that run once it ended, whatever its result.
    hooks_after: &'a HashMap<usize, Vec<usize>>,
    /// Hooks whose step failed (not tolerated): they may start though their step is not done.
    released: BTreeSet<usize>,
}

impl<'a> Assessment<'a> {
    fn new(
        scope: Scope<'a>,
        job_of: Vec<Option<&'a ObservedJob>>,
        strategies: &'a HashMap<usize, Arc<Strategy>>,
    ) -> Self {
        let n = scope.dag.len();
        Assessment {
            progress: scope.dag.progress(),
            scope,
            job_of,
            fans: HashMap::new(),
            failures: Vec::new(),
            tolerated: Vec::new(),
            cached: HashMap::new(),
            strategies,
            next_attempt: HashMap::new(),
            backing_off: BTreeMap::new(),
            phases: HashMap::new(),
            running: 0,
            known_outputs: HashMap::new(),
            ended: HashMap::new(),
            bad_params: HashMap::new(),
            blocked: vec![false; n],
            is_refused: HashSet::new(),
            skipped: vec![false; n],
            inputs: HashMap::new(),
            hooks_after: &NO_HOOKS,
            released: BTreeSet::new(),
        }
    }

    /// The name of `unit` in the status.
    fn display(&self, unit: Unit) -> String {
        let scope = &self.scope;
        fan_out::display_name(
            scope.dag.name(unit.node),
            scope.run_index,
            scope.runs,
            unit.item,
        )
    }

    /// Records that `unit` failed. True when its step survives it (`continueOn.failed`): the
    /// caller then counts it done.
    fn failed(&mut self, unit: Unit, failure: Failure) -> bool {
        self.phases.insert(unit.node, failure.phase().as_str());
        (self.ended.entry(unit.node)).or_insert_with(|| ended_by(&failure, None));
        let tolerated = (self.scope.steps[unit.node].continue_on).is_some_and(|c| c.failed);
        if tolerated {
            self.tolerated.push((unit, failure));
        } else {
            self.failures.push((unit, failure));
            let hooks = self
                .hooks_after
                .get(&unit.node)
                .filter(|_| unit.item.is_none());
            self.released.extend(hooks.into_iter().flatten());
        }
        tolerated
    }

    /// Fails `unit` for a reason of the data between steps; true when tolerated, as
    /// [`Assessment::failed`].
    fn fail(&mut self, unit: Unit, reason: &'static str, why: String) -> bool {
        self.failed(unit, Failure::Data { reason, why })
    }

    /// The instances without a Job: steps, and the items (known) of steps that fan out.
    fn without_jobs(&self) -> Vec<Unit> {
        let mut missing: Vec<Unit> = (self.job_of.iter().enumerate())
            .filter(|(i, job)| job.is_none() && !self.fans.contains_key(i))
            .map(|(i, _)| Unit::step(i))
            .collect();
        for (&i, fan) in &self.fans {
            let count = fan.items.as_ref().map_or(0, ItemList::len);
            missing.extend(
                (0..count as u32)
                    .filter(|item| !fan.jobs.contains_key(item))
                    .map(|item| Unit {
                        node: i,
                        item: Some(item),
                    }),
            );
        }
        missing
    }

    /// Whether step `i` may start something: not blocked, and for a step that fans out its
    /// items (or why they are not) known, else no Job and not refused.
    fn starts(&self, i: usize) -> bool {
        !self.blocked[i]
            && match self.fans.get(&i) {
                Some(fan) => fan.items.is_some() || self.bad_params.contains_key(&i),
                None => self.job_of[i].is_none() && !self.is_refused.contains(&Unit::step(i)),
            }
    }

    /// The steps whose dependencies are done, and the hooks of failed steps, that may start
    /// something ([`Assessment::starts`]), in spec order.
    fn may_start(&self) -> Vec<usize> {
        let mut may: Vec<usize> = (self.progress.ready())
            .chain((self.released.iter().copied()).filter(|&h| !self.progress.is_done(h)))
            .filter(|&i| self.starts(i))
            .collect();
        may.sort_unstable();
        may.dedup();
        may
    }

    /// `when`s, named outputs and items decide among the steps that may start: a false `when`
    /// skips its step (done for its dependents, which may then be decided in turn), a failing
    /// one or a missing output fails it, and so does a `withParam` that is not a JSON list; a
    /// step with no items is done at once, and so is one whose every item ended or its `when`
    /// skipped. The same outputs decide the same way at every pass, so nothing of it needs a
    /// record but the status. `main` is the steps' DAG and what they told, for the exit steps;
    /// `fan_outs` the fan-outs of these steps, for the items of one whose list a step done
    /// here tells.
    fn decide_data(
        &mut self,
        (whens, fan_outs): (&HashMap<usize, Arc<When>>, &'a HashMap<usize, FanOut>),
        main: Option<(&'a Dag, &Known<'a>)>,
    ) {
        let mut queue: Vec<usize> = self.may_start();
        while let Some(i) = queue.pop() {
            let done = match self.decide_step(i, whens, main) {
                Some(done) => done,
                None => continue,
            };
            if done {
                let mut newly = Vec::new();
                self.progress.complete(i, &mut newly);
                for &d in &newly {
                    self.late_items(d, fan_outs);
                }
                queue.extend(newly.into_iter().filter(|&d| self.starts(d)));
            }
        }
    }

    /// The items of step `d` (of `fan_outs`) when they were not known as the steps that fan
    /// out were seen, because a step they come from was done only since (its items skipped by
    /// their `when`, or none).
    fn late_items(&mut self, d: usize, fan_outs: &'a HashMap<usize, FanOut>) {
        let (Some(fan_out), Some(fan)) = (fan_outs.get(&d), self.fans.get(&d)) else {
            return;
        };
        if fan.items.is_some() || self.bad_params.contains_key(&d) {
            return;
        }
        let (dag, steps) = (self.scope.dag, self.scope.steps);
        match items_of(&steps[d], fan_out, dag, (&self.known_outputs, &self.fans)) {
            Ok(items) => self.fans.get_mut(&d).expect("seen above").items = items,
            Err(why) => {
                self.bad_params.insert(d, why);
            }
        }
    }

    /// Decides step `i`: `Some(true)` when done without running (skipped, no items, or its
    /// data failed it and it survives that), `Some(false)` when it may start, `None` when its
    /// data failed it.
    fn decide_step(
        &mut self,
        i: usize,
        whens: &HashMap<usize, Arc<When>>,
        main: Option<(&'a Dag, &Known<'a>)>,
    ) -> Option<bool> {
        let step = &self.scope.steps[i];
        // These steps' own, then for the exit steps the workflow's steps (which cannot give
        // an exit step the artifacts of one that fans out).
        let no_fans = HashMap::new();
        let own = StepsRead {
            dag: self.scope.dag,
            facts: Facts {
                outputs: &self.known_outputs,
                skipped: self.skipped.as_slice(),
                phases: &self.phases,
                ended: &self.ended,
                exit: false,
            },
            fans: if main.is_some() { &no_fans } else { &self.fans },
        };
        let both;
        let sources: &[StepsRead<'_, 'a>] = match main {
            Some((dag, known)) => {
                let facts = known.facts(true);
                both = [
                    own,
                    StepsRead {
                        dag,
                        facts,
                        fans: &no_fans,
                    },
                ];
                &both
            }
            None => std::slice::from_ref(&own),
        };
        let when = whens.get(&i).map(|when| {
            let upstream = if when.every_step() {
                // Every one of the workflow's steps (for the exit steps, not their own).
                let all: &'a Dag = main.map_or(self.scope.dag, |(dag, _)| dag);
                let names = (0..all.len()).map(|j| all.name(j));
                data::upstream(&sources[sources.len() - 1..], names)
            } else {
                data::upstream(sources, when.steps().iter().map(String::as_str))
            };
            (when, upstream)
        });
        // A `when` naming the item is decided for each item, once the step may start.
        let (once, per_item) = match when {
            Some((when, upstream)) if when.item_reads().is_empty() => {
                (Some((when, upstream)), None)
            }
            other => (None, other),
        };
        let verdict =
            once.map(|(when, upstream)| when.evaluate_in(&upstream, self.scope.when_run(), None));
        match verdict {
            None | Some(Ok(true)) => {}
            Some(Ok(false)) => {
                self.skipped[i] = true;
                return Some(true);
            }
            Some(Err(error)) => {
                let expression = step.when.as_deref().unwrap_or("");
                self.blocked[i] = true;
                let why = format!("when {expression:?}: {error}");
                return self
                    .fail(Unit::step(i), REASON_WHEN_FAILED, why)
                    .then_some(true);
            }
        }
        match step_inputs(step, sources) {
            Ok(Some(values)) => {
                self.inputs.insert(i, values);
            }
            Ok(None) => {}
            Err(mut missing) => {
                missing.skipped = data::is_skipped(sources, &missing.step);
                self.blocked[i] = true;
                let why = missing.to_string();
                return self
                    .fail(Unit::step(i), REASON_MISSING_OUTPUT, why)
                    .then_some(true);
            }
        }
        if let Some(why) = self.bad_params.get(&i).cloned() {
            self.blocked[i] = true;
            return self
                .fail(Unit::step(i), REASON_BAD_PARAM, why)
                .then_some(true);
        }
        if let Some((when, upstream)) = per_item {
            self.decide_items(i, when, &upstream);
        }
        // Done once every item ended: none, or each skipped, succeeded or failed tolerated.
        Some(self.fans.get(&i).is_some_and(Fan::ended))
    }

    /// Decides the `when` (naming the item) of each item of step `i` that has no Job yet: a
    /// false one skips the item, one that fails fails it (`WhenFailed`). An item that cannot
    /// fill what its step names is left for [`Assessment::ready`] to fail (`BadItem`).
    fn decide_items(&mut self, i: usize, when: &When, upstream: &HashMap<&str, Upstream<'_>>) {
        let step = &self.scope.steps[i];
        let Some(fan) = self.fans.get(&i) else {
            return;
        };
        let Some(items) = &fan.items else { return };
        // The spec's own items were checked when it was compiled.
        let param = matches!(items, ItemList::Param(_));
        let mut skipped = BTreeSet::new();
        let mut failed = Vec::new();
        for item in 0..items.len() as u32 {
            let unit = Unit {
                node: i,
                item: Some(item),
            };
            if fan.jobs.contains_key(&item) || self.is_refused.contains(&unit) {
                continue;
            }
            let value = items.get(item as usize);
            if param && item_unresolved(step, &value).is_some() {
                continue;
            }
            match when.evaluate_in(upstream, self.scope.when_run(), Some(&value)) {
                Ok(true) => {}
                Ok(false) => {
                    skipped.insert(item);
                }
                Err(error) => {
                    let expression = step.when.as_deref().unwrap_or("");
                    failed.push((unit, format!("when {expression:?}: {error}")));
                }
            }
        }
        let mut tolerated = 0;
        for (unit, why) in failed {
            self.is_refused.insert(unit);
            match self.fail(unit, REASON_WHEN_FAILED, why) {
                true => tolerated += 1,
                false => self.blocked[i] = true,
            }
        }
        let fan = self.fans.get_mut(&i).expect("seen above");
        fan.skipped = skipped;
        fan.tolerated += tolerated;
    }

    /// The instances that may start, in spec order (items in order). The items of a
    /// `withParam` are checked as they come: one without a field the step names fails its
    /// step (the spec's own items were checked at create).
    fn ready(&mut self) -> Vec<Unit> {
        let mut ready = Vec::new();
        let may_start = self.may_start();
        for i in may_start {
            let Some(fan) = self.fans.get(&i) else {
                ready.push(Unit::step(i));
                continue;
            };
            let Some(items) = &fan.items else { continue };
            let param = matches!(items, ItemList::Param(_));
            let mut bad_item = None;
            for item in 0..items.len() as u32 {
                let unit = Unit {
                    node: i,
                    item: Some(item),
                };
                if fan.jobs.contains_key(&item)
                    || self.is_refused.contains(&unit)
                    || fan.skipped.contains(&item)
                {
                    continue;
                }
                let step = &self.scope.steps[i];
                if param && let Some(why) = item_unresolved(step, &items.get(item as usize)) {
                    bad_item = Some((unit, why));
                    break;
                }
                ready.push(unit);
            }
            if let Some((unit, why)) = bad_item {
                // Not tolerated even with `continueOn`: the item has no Job to count it by.
                let failure = Failure::Data {
                    reason: REASON_BAD_ITEM,
                    why,
                };
                self.failures.push((unit, failure));
                self.blocked[i] = true;
                ready.retain(|u| u.node != i);
            }
        }
        // Failed instances tried again now (their step's Jobs exist, so they are not above).
        if !self.next_attempt.is_empty() {
            ready.extend(self.next_attempt.keys().copied());
            ready.sort_unstable();
        }
        ready
    }

    fn into_view(mut self, ready: Vec<Unit>) -> View<'a> {
        self.failures.sort_by_key(|(unit, _)| *unit);
        self.tolerated.sort_by_key(|(unit, _)| *unit);
        let mut phases = self.phases;
        for (&i, _) in self.fans.iter().filter(|(i, _)| self.progress.is_done(**i)) {
            phases.entry(i).or_insert(StepPhase::Succeeded.as_str());
        }
        let known = Known {
            outputs: self.known_outputs,
            skipped: self.skipped.clone(),
            phases,
            ended: self.ended,
        };
        View {
            dag: self.scope.dag,
            steps: self.scope.steps,
            kinds: self.scope.kinds,
            run_index: self.scope.run_index,
            runs: self.scope.runs,
            job_of: self.job_of,
            fans: self.fans,
            progress: self.progress,
            failures: self.failures,
            tolerated: self.tolerated,
            next_attempt: self.next_attempt,
            cached: self.cached,
            backing_off: self.backing_off,
            running: self.running,
            ready,
            known,
            skipped: self.skipped,
            inputs: self.inputs,
            released: self.released,
        }
    }
}
