//! The planner: the pure decision function of the operator, `(workflow, observed Jobs, now) ->
//! actions + status + lifecycle events`. No client, no clock, no I/O.
//!
//! Every handler (create, job status, spec update, resume, timer) ends in [`plan`]: state is
//! derived from the Jobs that exist, never from the status lists, so a lost, duplicate or late
//! event cannot lose a completion or start a step twice (DESIGN sections 3 and 6). The handlers
//! in `handlers.rs` turn the observed Jobs into [`ObservedJob`]s (`jobs::observe_job`), call
//! [`plan`] (or [`plan_compiled`] with a cached [`Compiled`]), then execute the [`Action`]s, write
//! the status when there is one, post one Event per [`LifecycleEvent`], and schedule a timer at
//! [`Plan::next_timeout_at`].
//!
//! # Cost
//! One call is O(steps + dependencies + jobs): it rebuilds the step states from the Jobs and
//! renders the status lists. [`Compiled`] (the validated DAG and run id, cacheable per
//! `metadata.generation`) removes the DAG build and the run-id hash from that; what is left is a
//! scan of the Jobs and the status. `benches/dag.rs` measures both at 10,000 steps. The
//! O(degree) part, which steps a completion releases, is [`crate::workflow::dag::Progress`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::crd::{
    CONDITION_COMPLETED, CONDITION_FAILED, UNLIMITED, WorkFlow, WorkFlowSpec, WorkFlowStatus,
};
use super::dag::{Dag, DagError, Progress};
use super::lifecycle::{Phase, Transition, Trigger};
use super::names;

/// The Job reason Kubernetes gives when `activeDeadlineSeconds` was exceeded.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// What a step's Job is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Not finished. `since` is the Job's `status.startTime`, or its creation time before the
    /// Job controller set one; the step's timeout counts from it.
    Active {
        /// When the Job started.
        since: Timestamp,
    },
    /// The Job has condition `Complete=True`.
    Succeeded,
    /// The Job has condition `Failed=True`, with that condition's reason and message.
    Failed {
        /// E.g. `BackoffLimitExceeded`, `DeadlineExceeded`.
        reason: String,
        /// Kubernetes' explanation.
        message: String,
    },
}

/// A Job of the workflow as the handlers observed it: plain data, no Kubernetes types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedJob {
    /// The Job's name.
    pub name: String,
    /// The exact step name (annotation `workflow.crd.com/step`).
    pub step: String,
    /// The run id (label `workflow.crd.com/run`).
    pub run: String,
    /// What the Job is doing.
    pub state: JobState,
    /// The Job has a `deletionTimestamp`.
    pub deleting: bool,
    /// The Job's `spec.activeDeadlineSeconds`.
    pub active_deadline_seconds: Option<i64>,
}

/// Why a Job is to be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// The Job belongs to an earlier run (what runs changed).
    OldRun,
    /// The step ran past its timeout; its Job is still running.
    TimedOut,
    /// The workflow failed (failFast) and this Job is still running.
    WorkflowFailed,
}

/// Something the handler must do, in order. Every action is idempotent: creating an existing
/// Job (deterministic name) or deleting a missing one is success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the Job of `step` (build it with `jobs::build_job(workflow, step, run)`).
    CreateJob {
        /// The step's exact name.
        step: String,
        /// The Job's name (`names::job_name`).
        job_name: String,
    },
    /// Delete a Job together with its pods (propagation policy `Background` or `Foreground`,
    /// never `Orphan`).
    DeleteJob {
        /// The Job's name.
        job_name: String,
        /// Why.
        reason: DeleteReason,
    },
    /// Patch a running Job's `spec.activeDeadlineSeconds` (`None`: remove it) because the step's
    /// effective timeout changed; otherwise the Job would still be killed at the old deadline.
    SetJobDeadline {
        /// The Job's name.
        job_name: String,
        /// The new deadline in seconds, or `None` for unlimited.
        active_deadline_seconds: Option<i64>,
    },
}

/// A lifecycle transition made by this plan, to be posted as a Kubernetes Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleEvent {
    /// The transition; its `reason()` is the Event reason.
    pub transition: Transition,
    /// The Event message, e.g. `Started -> Failed: step b failed: ...`.
    pub message: String,
}

/// The decisions for one workflow at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The current run id.
    pub run: String,
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// The new status, only when it differs from the workflow's current status.
    pub status: Option<WorkFlowStatus>,
    /// The lifecycle transitions, in order (e.g. `Started -> Created`, `Created -> Started`).
    pub events: Vec<LifecycleEvent>,
    /// When the next running step times out, if one can; `None` for a terminal workflow.
    pub next_timeout_at: Option<Timestamp>,
}

/// The parts of a plan that depend only on the spec: the run id and the validated DAG. Cache it
/// per workflow and `metadata.generation` to skip an O(steps) hash and DAG build per event.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// `names::run_id(spec)`.
    pub run: String,
    /// `Dag::build(&spec.containers)`.
    pub dag: Result<Dag, DagError>,
}

impl Compiled {
    /// Hashes and validates `spec`.
    pub fn new(spec: &WorkFlowSpec) -> Compiled {
        Compiled { run: names::run_id(spec), dag: Dag::build(&spec.containers) }
    }
}

/// Plans `workflow` given its Jobs (of every run) at time `now`. See [`plan_compiled`].
pub fn plan(workflow: &WorkFlow, jobs: &[ObservedJob], now: Timestamp) -> Plan {
    plan_compiled(workflow, &Compiled::new(&workflow.spec), jobs, now)
}

/// Plans `workflow` with `compiled`, which must have been made from `workflow.spec`.
///
/// # Guarantees
/// - Jobs of another run are deleted and otherwise ignored.
/// - A terminal workflow of the current run is never timed out, never restarted and its phase,
///   message and lists never change; only `observedGeneration` follows the object, and Jobs it
///   left running are deleted.
/// - A step is started only if no Job of the current run exists for it and all its dependencies
///   succeeded; at most `parallelism` steps run at once.
/// - `status` is `Some` only when it differs from `workflow.status`.
pub fn plan_compiled(
    workflow: &WorkFlow,
    compiled: &Compiled,
    jobs: &[ObservedJob],
    now: Timestamp,
) -> Plan {
    let mut planner = Planner::new(workflow, &compiled.run, now);
    planner.delete_other_runs(jobs);
    let current: Vec<&ObservedJob> = jobs.iter().filter(|j| j.run == compiled.run).collect();
    if planner.phase.is_terminal() {
        planner.keep_terminal(&current);
    } else {
        match &compiled.dag {
            Err(error) => planner.fail_invalid(error, &current),
            Ok(dag) => planner.advance(dag, &current),
        }
    }
    planner.finish()
}

/// When the next running step of `workflow` times out, for a timer; `None` when nothing can
/// time out (no running step with a limit, or a terminal workflow). The same as
/// [`Plan::next_timeout_at`] when nothing else changes.
pub fn next_timeout_at(workflow: &WorkFlow, jobs: &[ObservedJob]) -> Option<Timestamp> {
    let phase = workflow.status.as_ref().and_then(|s| s.workflow_status);
    if phase.is_some_and(Phase::is_terminal) {
        return None;
    }
    let run = names::run_id(&workflow.spec);
    let timeouts: std::collections::HashMap<&str, i64> = workflow
        .spec
        .containers
        .iter()
        .map(|s| (s.step_name.as_str(), workflow.spec.effective_timeout(s)))
        .collect();
    jobs.iter()
        .filter(|j| j.run == run && !j.deleting)
        .filter_map(|j| match j.state {
            JobState::Active { since } => Some((since, *timeouts.get(j.step.as_str())?)),
            _ => None,
        })
        .filter_map(|(since, timeout)| deadline(since, timeout))
        .min()
}

/// `since + timeout`, or `None` for an unlimited timeout.
fn deadline(since: Timestamp, timeout: i64) -> Option<Timestamp> {
    if timeout == UNLIMITED {
        return None;
    }
    since.checked_add(SignedDuration::from_secs(timeout)).ok()
}

/// The Job's `activeDeadlineSeconds` for a timeout: none for unlimited, at least 1 (Kubernetes
/// rejects 0).
pub fn job_deadline_seconds(timeout: i64) -> Option<i64> {
    (timeout != UNLIMITED).then_some(timeout.max(1))
}

/// Why a step failed.
enum Failure {
    Failed { reason: String, message: String },
    /// Ran past its timeout; `elapsed` is `None` when Kubernetes' deadline caught it first.
    TimedOut { timeout: i64, elapsed: Option<SignedDuration> },
}

impl Failure {
    fn trigger(&self) -> Trigger {
        match self {
            Failure::Failed { .. } => Trigger::StepFailed,
            Failure::TimedOut { .. } => Trigger::StepTimedOut,
        }
    }

    fn describe(&self, step: &str) -> String {
        match self {
            Failure::Failed { reason, message } if message.is_empty() => {
                format!("step {step} failed: {reason}")
            }
            Failure::Failed { reason, message } => format!("step {step} failed: {reason}: {message}"),
            Failure::TimedOut { timeout, elapsed: Some(elapsed) } => format!(
                "step {step} timed out: running for {}s, longer than its timeout of {timeout}s",
                elapsed.as_secs()
            ),
            Failure::TimedOut { timeout, elapsed: None } => {
                format!("step {step} timed out: its Job exceeded its deadline of {timeout}s")
            }
        }
    }
}

/// The state of one plan being made.
struct Planner<'a> {
    workflow: &'a WorkFlow,
    run: &'a str,
    now: Timestamp,
    previous: WorkFlowStatus,
    phase: Phase,
    message: Option<String>,
    /// Set when the lists are recomputed; a terminal workflow keeps the previous ones.
    lists: Option<Lists>,
    /// The trigger that made the workflow fail, for the `Failed` condition's reason.
    failed_by: Option<Trigger>,
    actions: Vec<Action>,
    events: Vec<LifecycleEvent>,
    next_timeout_at: Option<Timestamp>,
}

struct Lists {
    executed: Vec<String>,
    started: Vec<String>,
    total: usize,
}

impl<'a> Planner<'a> {
    fn new(workflow: &'a WorkFlow, run: &'a str, now: Timestamp) -> Planner<'a> {
        let previous = workflow.status.clone().unwrap_or_default();
        let mut planner = Planner {
            workflow,
            run,
            now,
            phase: previous.workflow_status.unwrap_or(Phase::Created),
            message: previous.message.clone(),
            previous,
            lists: None,
            failed_by: None,
            actions: Vec::new(),
            events: Vec::new(),
            next_timeout_at: None,
        };
        // A status without a run id is adopted as is (a new workflow, or one another operator
        // ran); a different run id means what runs changed.
        let changed = planner.previous.run.as_deref().is_some_and(|r| r != run);
        if changed {
            if planner.phase != Phase::Created {
                let from = planner.previous.run.clone().unwrap_or_default();
                planner.go(Trigger::SpecChanged, format!("what runs changed (run {from} -> {run})"));
            }
            planner.message = None;
        }
        planner
    }

    /// Moves along the lifecycle table. The planner only asks for transitions the table has;
    /// a refusal is a bug in this module, caught by its tests.
    fn go(&mut self, trigger: Trigger, detail: String) {
        if self.phase == Phase::Created && trigger != Trigger::StepsStarted && trigger != Trigger::InvalidSpec {
            // Reaching an outcome from Created (e.g. the status write after the first Jobs was
            // lost) passes through Started, so the recorded path stays a legal one.
            self.go(Trigger::StepsStarted, "steps were already running".into());
        }
        let transition = Transition::new(self.phase, trigger)
            .unwrap_or_else(|e| panic!("planner bug: {e}"));
        self.events.push(LifecycleEvent {
            message: format!("{} -> {}: {detail}", transition.from(), transition.to()),
            transition,
        });
        self.phase = transition.to();
    }

    fn delete_other_runs(&mut self, jobs: &[ObservedJob]) {
        for job in jobs.iter().filter(|j| j.run != self.run && !j.deleting) {
            self.actions.push(Action::DeleteJob {
                job_name: job.name.clone(),
                reason: DeleteReason::OldRun,
            });
        }
    }

    /// Deletes the current run's Jobs that still run (a failed workflow stops its steps).
    fn delete_running(&mut self, current: &[&ObservedJob], reason: DeleteReason) {
        for job in current {
            if matches!(job.state, JobState::Active { .. }) && !job.deleting {
                let already = self.actions.iter().any(|a| matches!(a, Action::DeleteJob { job_name, .. } if *job_name == job.name));
                if !already {
                    self.actions.push(Action::DeleteJob { job_name: job.name.clone(), reason });
                }
            }
        }
    }

    fn keep_terminal(&mut self, current: &[&ObservedJob]) {
        if self.phase == Phase::Failed {
            self.delete_running(current, DeleteReason::WorkflowFailed);
        }
    }

    fn fail_invalid(&mut self, error: &DagError, current: &[&ObservedJob]) {
        let message = format!("invalid workflow: {error}");
        self.go(Trigger::InvalidSpec, message.clone());
        self.message = Some(message);
        self.failed_by = Some(Trigger::InvalidSpec);
        self.delete_running(current, DeleteReason::WorkflowFailed);
        self.lists = Some(Lists {
            executed: Vec::new(),
            started: Vec::new(),
            total: self.workflow.spec.containers.len(),
        });
    }

    fn advance(&mut self, dag: &Dag, current: &[&ObservedJob]) {
        let spec = &self.workflow.spec;
        let n = dag.len();
        // The Job that speaks for each step; if a step somehow has two, success wins, then a
        // running one (it may still succeed).
        let mut job_of: Vec<Option<&ObservedJob>> = vec![None; n];
        for &job in current {
            let Some(i) = dag.index_of(&job.step) else { continue };
            let rank = |j: &ObservedJob| match j.state {
                JobState::Succeeded => 0,
                JobState::Active { .. } => 1,
                JobState::Failed { .. } => 2,
            };
            if job_of[i].is_none_or(|old| rank(job) < rank(old)) {
                job_of[i] = Some(job);
            }
        }

        let mut progress = dag.progress();
        let mut scratch = Vec::new();
        let mut failures: Vec<(usize, Failure)> = Vec::new();
        let mut running = 0usize;
        // Timed-out steps whose Jobs are deleted now: no longer running.
        let mut stopped = vec![false; n];
        for (i, job) in job_of.iter().enumerate() {
            let Some(job) = job else { continue };
            let timeout = spec.effective_timeout(&spec.containers[i]);
            match &job.state {
                JobState::Succeeded => progress.complete(i, &mut scratch),
                JobState::Failed { reason, .. } if reason == DEADLINE_EXCEEDED => {
                    failures.push((i, Failure::TimedOut { timeout, elapsed: None }));
                }
                JobState::Failed { reason, message } => failures.push((
                    i,
                    Failure::Failed { reason: reason.clone(), message: message.clone() },
                )),
                JobState::Active { since } => {
                    let elapsed = self.now.duration_since(*since);
                    if !job.deleting && timeout != UNLIMITED && elapsed >= SignedDuration::from_secs(timeout) {
                        failures.push((i, Failure::TimedOut { timeout, elapsed: Some(elapsed) }));
                        stopped[i] = true;
                        self.actions.push(Action::DeleteJob {
                            job_name: job.name.clone(),
                            reason: DeleteReason::TimedOut,
                        });
                    } else {
                        running += 1;
                    }
                }
            }
        }
        failures.sort_by_key(|(i, _)| *i);

        let fail_now = !failures.is_empty()
            && (spec.fail_fast || running == 0 && startable(&progress, &job_of).is_empty());
        let mut created: Vec<usize> = Vec::new();
        if fail_now {
            let (i, failure) = &failures[0];
            let mut message = failure.describe(dag.name(*i));
            if failures.len() > 1 {
                message.push_str(&format!(" (and {} more failed steps)", failures.len() - 1));
            }
            let trigger = failure.trigger();
            self.go(trigger, message.clone());
            self.failed_by = Some(trigger);
            self.message = Some(message);
            self.delete_running(current, DeleteReason::WorkflowFailed);
        } else if progress.all_done() {
            self.go(Trigger::AllStepsSucceeded, format!("all {n} steps succeeded"));
            self.message = Some(format!("all {n} steps succeeded"));
        } else {
            let slots = match spec.parallelism {
                Some(p) => (p.max(1) as usize).saturating_sub(running),
                None => usize::MAX,
            };
            created = startable(&progress, &job_of).into_iter().take(slots).collect();
            for &i in &created {
                let step = dag.name(i);
                self.actions.push(Action::CreateJob {
                    step: step.to_string(),
                    job_name: names::job_name(self.workflow_name(), step, self.run),
                });
            }
            if self.phase == Phase::Created && (running > 0 || !created.is_empty()) {
                let names: Vec<&str> = created.iter().map(|&i| dag.name(i)).collect();
                self.go(Trigger::StepsStarted, format!("starting {}", list_names(&names)));
            }
            self.message = failures.first().map(|(i, failure)| {
                format!("{}; waiting for running steps to finish", failure.describe(dag.name(*i)))
            });
            self.plan_deadlines(&job_of, &stopped);
        }

        let mut executed = Vec::with_capacity(progress.done_count());
        let mut started = Vec::new();
        let mut created_iter = created.iter().peekable();
        for (i, job) in job_of.iter().enumerate() {
            match job.map(|j| &j.state) {
                Some(JobState::Succeeded) => executed.push(dag.name(i).to_string()),
                Some(JobState::Active { .. }) if !self.phase.is_terminal() && !stopped[i] => {
                    started.push(dag.name(i).to_string())
                }
                _ => {}
            }
            // Steps being created count as started, so their Jobs appearing changes nothing.
            if created_iter.next_if_eq(&&i).is_some() {
                started.push(dag.name(i).to_string());
            }
        }
        self.lists = Some(Lists { executed, started, total: n });
    }

    /// Keeps running Jobs' deadlines equal to their steps' current timeouts, and finds the
    /// next timeout for the timer.
    fn plan_deadlines(&mut self, job_of: &[Option<&ObservedJob>], stopped: &[bool]) {
        let spec = &self.workflow.spec;
        for (i, job) in job_of.iter().enumerate() {
            let Some(job) = job else { continue };
            let JobState::Active { since } = job.state else { continue };
            if job.deleting || stopped[i] {
                continue;
            }
            let timeout = spec.effective_timeout(&spec.containers[i]);
            let want = job_deadline_seconds(timeout);
            if job.active_deadline_seconds != want {
                self.actions.push(Action::SetJobDeadline {
                    job_name: job.name.clone(),
                    active_deadline_seconds: want,
                });
            }
            if let Some(at) = deadline(since, timeout) {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
        }
    }

    fn workflow_name(&self) -> &str {
        self.workflow.metadata.name.as_deref().unwrap_or_default()
    }

    fn finish(self) -> Plan {
        let generation = self.workflow.metadata.generation;
        let mut status = self.previous.clone();
        status.observed_generation = generation.or(status.observed_generation);
        status.run = Some(self.run.to_string());
        if self.previous.workflow_status != Some(self.phase) || status.status_changed.is_none() {
            status.status_changed = Some(format!("{:.0}", self.now));
        }
        status.workflow_status = Some(self.phase);
        if let Some(lists) = self.lists {
            status.progress = Some(format!("{}/{}", lists.executed.len(), lists.total));
            status.executed = lists.executed;
            status.started = lists.started;
            status.message = self.message;
            status.conditions =
                conditions(&self.previous.conditions, self.phase, self.failed_by, status.message.as_deref(), generation, self.now);
        } else if status.progress.is_none() {
            status.progress = Some(format!("{}/{}", status.executed.len(), self.workflow.spec.containers.len()));
        }
        let status = (self.workflow.status.as_ref() != Some(&status)).then_some(status);
        Plan {
            run: self.run.to_string(),
            actions: self.actions,
            status,
            events: self.events,
            next_timeout_at: self.next_timeout_at,
        }
    }
}

/// Steps whose dependencies all succeeded and that have no Job yet, in declaration order.
fn startable(progress: &Progress<'_>, job_of: &[Option<&ObservedJob>]) -> Vec<usize> {
    progress.ready().filter(|&i| job_of[i].is_none()).collect()
}

/// `a, b, c` or `a, b, c and 7 more`.
fn list_names(names: &[&str]) -> String {
    const SHOWN: usize = 5;
    let mut out = names.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    if out.is_empty() { "nothing new".into() } else { out }
}

/// The `Completed` and `Failed` conditions for `phase`; a condition keeps its
/// `lastTransitionTime` while its status stays the same.
fn conditions(
    previous: &[Condition],
    phase: Phase,
    failed_by: Option<Trigger>,
    message: Option<&str>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let make = |type_: &str, holds: bool, reason: &str| {
        let status = if holds { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or(Time(now), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.unwrap_or_default().to_string(),
            observed_generation: generation,
            last_transition_time: since,
        }
    };
    let completed = phase == Phase::Completed;
    let failed = phase == Phase::Failed;
    vec![
        make(
            CONDITION_COMPLETED,
            completed,
            if completed { Trigger::AllStepsSucceeded.reason() } else { phase.as_str() },
        ),
        make(
            CONDITION_FAILED,
            failed,
            match failed_by {
                Some(trigger) if failed => trigger.reason(),
                _ => phase.as_str(),
            },
        ),
    ]
}
