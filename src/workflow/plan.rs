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
//! scan of the Jobs and the status. `benches/dag.rs` measures both at 10,000 steps: about
//! 0.5-1.3 ms per completion with a cached [`Compiled`], 6-11 ms without (most of it the run-id
//! hash), on the 2-core build machine. The O(degree) part, which steps a completion releases, is
//! [`crate::workflow::dag::Progress`] (tens of nanoseconds).

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::crd::{
    CONDITION_COMPLETED, CONDITION_FAILED, CONDITION_FINISHED, ItemCounts, Shutdown, Step,
    StepPhase, StepStatus, UNLIMITED, WorkFlow, WorkFlowSpec, WorkFlowStatus,
};
use super::dag::{Dag, DagError, Progress};
use super::data_flow::{self, DataFlow};
use super::fan_out::{self, FanOut, Instance, ItemList};
use super::lifecycle::{Phase, Transition, Trigger};
use super::names;
use super::outputs::{self, Inputs, Outputs, Source};
use super::when::Upstream;

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
    /// The Job has condition `Failed=True`, with that condition's reason and message, or, once
    /// `failure_cause::explain` read the Job's pods, its last failed container's exit code,
    /// reason and message.
    Failed {
        /// E.g. `BackoffLimitExceeded`, `DeadlineExceeded`; or the container's (`Error`,
        /// `StartError`) with `exit_code`.
        reason: String,
        /// Kubernetes' or the container's explanation.
        message: String,
        /// The container's exit code, when read from its pod.
        exit_code: Option<i32>,
    },
    /// The operator stopped the Job because its step ran past its timeout
    /// ([`Action::TimeOutJob`]), whatever the Job's conditions say since: still stopping,
    /// failed by the deadline the operator set, or even complete in the same instant. The Job is
    /// the step's record of the timeout, so the step is never started again in this run.
    TimedOut {
        /// Why, as the operator recorded it, e.g. `running for 6s, longer than its timeout of
        /// 5s`.
        why: String,
    },
    /// The operator failed the step because its pod did not start within `startTimeout`
    /// ([`Action::FailStart`]), whatever the Job's conditions say since: the Job is the record.
    CannotStart {
        /// The cause, e.g. `CreateContainerConfigError: secret "creds" not found`.
        why: String,
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
    /// The retry of the run it was created for (label `workflow.crd.com/retry`, 0 if absent).
    pub retry: i32,
    /// Its run of `spec.runs` (label `workflow.crd.com/run-index`, 0 if absent).
    pub run_index: u32,
    /// The item it runs of a step that fans out (label `workflow.crd.com/item`).
    pub item: Option<u32>,
    /// What the Job is doing.
    pub state: JobState,
    /// The Job has a `deletionTimestamp`.
    pub deleting: bool,
    /// The Job's `spec.activeDeadlineSeconds`.
    pub active_deadline_seconds: Option<i64>,
    /// The Job's `creationTimestamp`: its step's `startTimeout` counts from it.
    pub created: Timestamp,
    /// The Job's `status.startTime`, for the step's status.
    pub start_time: Option<Timestamp>,
    /// When the Job ended (its `Failed` condition's time, or `completionTime`).
    pub finished_at: Option<Timestamp>,
    /// Pods the Job ran or runs (`active + succeeded + failed`).
    pub attempts: i32,
    /// A pod of the Job got as far as running its container (one is ready or finished), as
    /// the Job's status says, or as its pods said when they were read at the start deadline.
    pub pod_started: bool,
    /// The Job is suspended (`spec.suspend`).
    pub suspended: bool,
    /// When it was last suspended (its `Suspended=True` condition's time), if it is.
    pub suspended_at: Option<Timestamp>,
    /// Why its pod has not started, when the handler read its pods at the start deadline
    /// (`failure_cause::explain_start`); `None` otherwise.
    pub start_failure: Option<String>,
    /// The outputs its pod wrote (or why they cannot be read), when the handler read them:
    /// only for a succeeded Job of a step whose outputs another step names, and whose status
    /// entry does not hold them yet (`outputs::read`).
    pub outputs: Option<Result<Outputs, String>>,
}

impl ObservedJob {
    /// When this Job's pod must have started by (its step's `startTimeout` after its creation),
    /// if it has not started yet and may still fail to.
    pub fn start_deadline(&self, start_timeout: i64) -> Option<Timestamp> {
        if !self.may_fail_to_start() {
            return None;
        }
        deadline(self.created, start_timeout)
    }

    /// Since when a suspended Job waits in its queue: since it was last suspended (preempted),
    /// else since its creation.
    pub fn queued_since(&self) -> Timestamp {
        self.suspended_at.unwrap_or(self.created)
    }

    /// Whether the Job's pod has yet to start, and may fail to: not started, not being deleted
    /// (on its way out already), not suspended (queued: it has no pod to start).
    pub fn may_fail_to_start(&self) -> bool {
        !self.pod_started && !self.deleting && !self.suspended
    }
}

/// Why a Job is to be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// The Job belongs to an earlier run (what runs changed).
    OldRun,
    /// The workflow failed (failFast) and this Job is still running.
    WorkflowFailed,
    /// `spec.shutdown: Terminate`: running steps are stopped at once.
    Terminated,
}

/// What an exit step's Job is told of how the workflow ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitEnv {
    /// `Completed` or `Failed` (`WORKFLOW_STATUS`).
    pub status: Phase,
    /// The steps that failed or timed out, in spec order (`WORKFLOW_FAILED_STEPS`).
    pub failed_steps: Vec<String>,
}

/// Something the handler must do, in order. Every action is idempotent: creating an existing
/// Job (deterministic name), deleting a missing one or patching a Job to what it already is is
/// success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the Job of `step` (build it with `jobs::build_job_for(workflow, step, run,
    /// retry, exit, inputs, instance)`); `step` is an exit step when `exit` is set.
    CreateJob {
        /// The step's exact name.
        step: String,
        /// The Job's name (`names::retry_job_name`).
        job_name: String,
        /// The retry it is created for (`spec.retry`).
        retry: i32,
        /// For an exit step: how the workflow ended.
        exit: Option<ExitEnv>,
        /// The values of the outputs the step names (`{{steps.NAME.outputs.KEY}}`), to
        /// substitute in its command, args and env.
        inputs: Inputs,
        /// Which run (`spec.runs`) and which item (a step that fans out) the Job runs.
        instance: Instance,
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
    /// Stop the running Job of a step that ran past its timeout, and keep it as the record that
    /// the step timed out (`jobs::time_out_patch`: an annotation saying `why`, and a deadline
    /// already exceeded, so Kubernetes kills the pods and fails the Job). Not a delete: the state
    /// comes from the Jobs that exist, so a deleted Job would leave the step without a Job and
    /// the next plan (with failFast false) would start it again. Observed afterwards as
    /// [`JobState::TimedOut`].
    TimeOutJob {
        /// The Job's name.
        job_name: String,
        /// Why, e.g. `running for 6s, longer than its timeout of 5s`.
        why: String,
    },
    /// Stop the Job of a step whose pod did not start within `startTimeout`, and keep it as the
    /// record of why (`jobs::cannot_start_patch`), as [`Action::TimeOutJob`] does for a timeout.
    /// Observed afterwards as [`JobState::CannotStart`].
    FailStart {
        /// The Job's name.
        job_name: String,
        /// Why, e.g. `CreateContainerConfigError: secret "creds" not found`.
        why: String,
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

/// The parts of a plan that depend only on the spec: the run id and the validated DAGs. Cache
/// it per workflow and `metadata.generation` to skip an O(steps) hash and DAG build per event.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// `names::run_id(spec)`.
    pub run: String,
    /// `Dag::build(&spec.containers)`, or the exit steps' error when only they are invalid.
    pub dag: Result<Dag, DagError>,
    /// `Dag::build_exit(&spec.on_exit, ..)` when there are exit steps and all is valid.
    pub exit: Option<Dag>,
    /// Whose outputs are read and the compiled `when`s (empty unless all is valid).
    pub flow: DataFlow,
}

impl Compiled {
    /// Hashes and validates `spec`.
    pub fn new(spec: &WorkFlowSpec) -> Compiled {
        let exit = (!spec.on_exit.is_empty())
            .then(|| Dag::build_exit(&spec.on_exit, &spec.containers))
            .transpose();
        let (dag, exit) = match (Dag::build(&spec.containers), exit) {
            (Ok(dag), Ok(exit)) => (Ok(dag), exit),
            (Err(error), _) | (Ok(_), Err(error)) => (Err(error), None),
        };
        let flow = dag
            .as_ref()
            .ok()
            .map(|dag| data_flow::check(spec, dag, exit.as_ref()));
        let (dag, flow) = match flow {
            Some(Err(error)) => (Err(error), DataFlow::default()),
            Some(Ok(flow)) => (dag, flow),
            None => (dag, DataFlow::default()),
        };
        Compiled {
            run: names::run_id(spec),
            dag,
            exit,
            flow,
        }
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
/// - A running step past its timeout has its Job stopped, never deleted ([`Action::TimeOutJob`]):
///   the Job stays as the record of the timeout, so the step is not started again in the run,
///   by this operator or by one restarted with nothing but the API's state.
/// - Every transition made is a row of `lifecycle::TRANSITIONS`; a new workflow, or one whose
///   status write was lost, goes `Created -> Started` before reaching an outcome.
/// - `status` is `Some` only when it differs from `workflow.status`.
///
/// # Caveats
/// A succeeded Job that is deleted (by someone else) makes its step run again: steps are
/// assumed idempotent, as in the seed, and the planner trusts only the Jobs that exist.
pub fn plan_compiled(
    workflow: &WorkFlow,
    compiled: &Compiled,
    jobs: &[ObservedJob],
    now: Timestamp,
) -> Plan {
    let mut planner = Planner::new(workflow, &compiled.run, &compiled.flow, now);
    planner.delete_other_runs(jobs);
    let current: Vec<&ObservedJob> = jobs.iter().filter(|j| j.run == compiled.run).collect();
    planner.retry_if_asked();
    if planner.phase.is_terminal() {
        planner.keep_terminal(&current);
    } else {
        match &compiled.dag {
            Err(error) => planner.fail_invalid(error, &current),
            Ok(dag) => planner.advance(dag, compiled.exit.as_ref(), &current),
        }
    }
    planner.finish()
}

/// When the next running step of `workflow` times out, for a timer; `None` when nothing can
/// time out (no running step with a limit, or a terminal workflow of the current run). The
/// same as [`Plan::next_timeout_at`] when nothing else changes.
pub fn next_timeout_at(workflow: &WorkFlow, jobs: &[ObservedJob]) -> Option<Timestamp> {
    let run = names::run_id(&workflow.spec);
    let status = workflow.status.as_ref();
    let terminal = status
        .and_then(|s| s.workflow_status)
        .is_some_and(Phase::is_terminal);
    let same_run = status
        .and_then(|s| s.run.as_deref())
        .is_none_or(|r| r == run);
    if terminal && same_run {
        return None;
    }
    let timeouts: HashMap<&str, i64> = workflow
        .spec
        .containers
        .iter()
        .chain(&workflow.spec.on_exit)
        .map(|s| (s.step_name.as_str(), workflow.spec.effective_timeout(s)))
        .collect();
    let start_timeout = workflow.spec.start_timeout;
    jobs.iter()
        .filter(|j| j.run == run && !j.deleting)
        .filter_map(|j| match j.state {
            JobState::Active { since } => {
                let run_deadline = deadline(since, *timeouts.get(j.step.as_str())?);
                run_deadline
                    .into_iter()
                    .chain(j.start_deadline(start_timeout))
                    .min()
            }
            _ => None,
        })
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

/// The step status `reason` of a step that ran past its timeout.
pub const REASON_TIMED_OUT: &str = "TimedOut";
/// The step status `reason` of a step whose Job waited in its Kueue queue longer than
/// `spec.queueTimeout`. Recorded like a timeout (the Job is kept with the timed-out
/// annotation), with a `why` that begins [`QUEUE_TIMEOUT_WHY`].
pub const REASON_QUEUE_TIMEOUT: &str = "QueueTimeout";
/// How the record of a queue timeout begins, which tells it from a run timeout.
pub const QUEUE_TIMEOUT_WHY: &str = "waited in queue";
/// The step status `reason` of a step whose pod did not start within `startTimeout`.
pub const REASON_CANNOT_START: &str = "CannotStart";
/// The step status `reason` of a running step stopped because the workflow failed.
pub const REASON_STOPPED: &str = "Stopped";
/// The step status `reason` of a running step stopped by `spec.shutdown: Terminate`.
pub const REASON_TERMINATED: &str = "Terminated";
/// The step status `reason` of a step whose Job the API server refused (422): its entry in the
/// status is the only record, as there is no Job.
pub const REASON_JOB_REFUSED: &str = "JobRefused";
/// The `status.steps` reason of a step whose outputs are malformed or too large.
pub const REASON_BAD_OUTPUTS: &str = "BadOutputs";
/// The `status.steps` reason of a step that names an output its step did not write.
pub const REASON_MISSING_OUTPUT: &str = "MissingOutput";
/// The `status.steps` reason of a step whose `when` failed to evaluate.
pub const REASON_WHEN_FAILED: &str = "WhenFailed";
/// The `status.steps` reason of a step its `when` skipped.
pub const REASON_WHEN_FALSE: &str = "WhenFalse";
/// The `status.steps` reason of a step whose `withParam` is not a JSON list.
pub const REASON_BAD_PARAM: &str = "BadParam";
/// The `status.steps` reason of an item that lacks a field its step names (`{{item.FIELD}}`).
pub const REASON_BAD_ITEM: &str = "BadItem";

/// The `status.steps` entry recording that the API server refused `step`'s Job named `job`,
/// saying `message`: the planner reads it back as the step's failure (see [`plan_compiled`]).
pub fn refused_step_status(step: &str, job: &str, message: &str) -> StepStatus {
    StepStatus {
        phase: StepPhase::Failed,
        reason: Some(REASON_JOB_REFUSED.into()),
        message: Some(message.to_string()),
        attempts: Some(0),
        ..running_step_status(step, job.to_string(), false)
    }
}

/// Why a step failed.
#[derive(Clone)]
enum Failure {
    Failed {
        reason: String,
        message: String,
        exit_code: Option<i32>,
    },
    /// Ran past its timeout; `why` says by how much, or that Kubernetes' deadline caught it.
    TimedOut { why: String },
    /// Its pod did not start within `startTimeout`; `why` is the cause.
    CannotStart { why: String },
    /// The API server refused its Job (422), as the status records it. Boxed: rare, and a
    /// status entry is many times the other variants.
    Refused { entry: Box<StepStatus> },
    /// What it reads or writes between steps is wrong: its outputs are malformed (reason
    /// [`REASON_BAD_OUTPUTS`], its Job succeeded), an output it names is missing
    /// ([`REASON_MISSING_OUTPUT`]) or its `when` fails to evaluate ([`REASON_WHEN_FAILED`]);
    /// those two have no Job. Decided again from the same outputs at every pass.
    Data { reason: &'static str, why: String },
}

impl Failure {
    fn trigger(&self) -> Trigger {
        match self {
            Failure::Failed { .. }
            | Failure::CannotStart { .. }
            | Failure::Refused { .. }
            | Failure::Data { .. } => Trigger::StepFailed,
            Failure::TimedOut { .. } => Trigger::StepTimedOut,
        }
    }

    /// `step b failed: exit code 2`, `step b failed: exit code 128: StartError: ...`,
    /// `step b failed: BackoffLimitExceeded: ...`, `step b timed out: ...`, `step b cannot
    /// start: ...`.
    fn describe(&self, step: &str) -> String {
        let joined = |parts: &[&str]| {
            parts
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(": ")
        };
        match self {
            Failure::Failed {
                reason,
                message,
                exit_code: Some(code),
            } => {
                // A plain non-zero exit's `Error` says nothing the exit code does not.
                let reason = if reason == "Error" { "" } else { reason };
                let code = format!("exit code {code}");
                format!("step {step} failed: {}", joined(&[&code, reason, message]))
            }
            Failure::Failed {
                reason, message, ..
            } => format!("step {step} failed: {}", joined(&[reason, message])),
            Failure::TimedOut { why } => format!("step {step} timed out: {why}"),
            Failure::CannotStart { why } => format!("step {step} cannot start: {why}"),
            Failure::Refused { entry } => format!(
                "step {step} failed: the API server refused its Job: {}",
                entry.message.as_deref().unwrap_or_default()
            ),
            Failure::Data { why, .. } => format!("step {step} failed: {why}"),
        }
    }

    /// The entry of a step that failed without a Job (a missing output, a failed `when`).
    fn entry_without_job(&self, step: &str) -> Option<StepStatus> {
        let Failure::Data { reason, why } = self else {
            return None;
        };
        Some(StepStatus {
            name: step.to_string(),
            phase: StepPhase::Failed,
            started_at: None,
            finished_at: None,
            attempts: None,
            exit_code: None,
            reason: Some((*reason).to_string()),
            message: Some(why.clone()),
            job: None,
            outputs: BTreeMap::new(),
            items: None,
        })
    }

    /// The step's entry in `status.steps`, from the Job that failed it.
    fn step_status(&self, step: &str, job: &ObservedJob) -> StepStatus {
        let (phase, reason, message, exit_code) = match self {
            Failure::Failed {
                reason,
                message,
                exit_code,
            } => (
                StepPhase::Failed,
                reason.as_str(),
                message.as_str(),
                *exit_code,
            ),
            Failure::TimedOut { why } if why.starts_with(QUEUE_TIMEOUT_WHY) => {
                (StepPhase::Failed, REASON_QUEUE_TIMEOUT, why.as_str(), None)
            }
            Failure::TimedOut { why } => {
                (StepPhase::TimedOut, REASON_TIMED_OUT, why.as_str(), None)
            }
            Failure::CannotStart { why } => {
                (StepPhase::Failed, REASON_CANNOT_START, why.as_str(), None)
            }
            Failure::Refused { entry } => return (**entry).clone(),
            Failure::Data { reason, why } => (StepPhase::Failed, *reason, why.as_str(), None),
        };
        let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
        StepStatus {
            name: step.to_string(),
            phase,
            started_at: job.start_time.map(Time),
            finished_at: job.finished_at.map(Time),
            attempts: Some(job.attempts),
            exit_code,
            reason: text(reason),
            message: text(message),
            job: Some(job.name.clone()),
            outputs: BTreeMap::new(),
            items: None,
        }
    }
}

/// The `status.steps` entry of a step whose Job runs or is being created (`job` its name).
/// Only what is known when its Job is created, so that the Job starting changes nothing in the
/// status (no write): its times are its Job's.
pub fn running_step_status(step: &str, job: String, suspended: bool) -> StepStatus {
    StepStatus {
        name: step.to_string(),
        phase: if suspended {
            StepPhase::Queued
        } else {
            StepPhase::Running
        },
        started_at: None,
        finished_at: None,
        attempts: None,
        exit_code: None,
        reason: None,
        message: None,
        job: Some(job),
        outputs: BTreeMap::new(),
        items: None,
    }
}

/// Used when a workflow has no status yet.
static NO_STATUS: WorkFlowStatus = WorkFlowStatus {
    workflow_status: None,
    status_changed: None,
    message: None,
    executed: Vec::new(),
    started: Vec::new(),
    progress: None,
    observed_generation: None,
    run: None,
    conditions: Vec::new(),
    retry: None,
    steps: Vec::new(),
};

/// What one Job says of its step (or item), as [`Planner::assess`] sees it.
enum Seen {
    Succeeded,
    Running,
    Failed(Failure),
}

/// The state of one plan being made.
struct Planner<'a> {
    workflow: &'a WorkFlow,
    previous: &'a WorkFlowStatus,
    run: &'a str,
    /// Whose outputs are read, and the `when`s.
    flow: &'a DataFlow,
    now: Timestamp,
    phase: Phase,
    /// The recomputed message, lists and the trigger of a failure; `None` keeps the previous
    /// status's (a terminal workflow).
    outcome: Option<Outcome>,
    actions: Vec<Action>,
    /// Jobs this plan already deletes or stops, so none is acted on twice.
    settled: HashSet<&'a str>,
    events: Vec<LifecycleEvent>,
    next_timeout_at: Option<Timestamp>,
}

/// One instance of a step of a [`View`]: the step (its index in the view's DAG) and, for a
/// step that fans out, the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Unit {
    node: usize,
    item: Option<u32>,
}

impl Unit {
    fn step(node: usize) -> Unit {
        Unit { node, item: None }
    }
}

/// What [`Planner::assess`] saw of one set of steps: the steps of one run (`spec.runs`), or
/// the exit steps.
struct View<'a> {
    dag: &'a Dag,
    steps: &'a [Step],
    /// The run it is (0 for the exit steps).
    run_index: u32,
    /// The runs its names tell apart (`spec.runs` for the steps, 1 for the exit steps).
    runs: u32,
    /// The Job that speaks for each step that does not fan out.
    job_of: Vec<Option<&'a ObservedJob>>,
    /// The steps that fan out, by index.
    fans: HashMap<usize, Fan<'a>>,
    progress: Progress<'a>,
    /// Failed instances, in spec order (items in order).
    failures: Vec<(Unit, Failure)>,
    /// Jobs that run (not stopped by this plan).
    running: usize,
    /// Instances that may start: dependencies succeeded, no Job, not refused, `when` true,
    /// the outputs they name known, their items known; in spec order (items in order).
    ready: Vec<Unit>,
    /// What each step tells the steps after it (the steps' views only; empty for exit steps).
    known: Known<'a>,
    /// Steps their `when` skipped.
    skipped: Vec<bool>,
    /// The values of the outputs each ready step names, for its Jobs.
    inputs: HashMap<usize, Inputs>,
}

impl View<'_> {
    /// The name of `unit` in the status: its step's, with its run and item (`fan_out`).
    fn display(&self, unit: Unit) -> String {
        fan_out::display_name(
            self.dag.name(unit.node),
            self.run_index,
            self.runs,
            unit.item,
        )
    }

    /// The steps with a failed instance.
    fn failed_steps(&self) -> usize {
        let mut steps: Vec<usize> = self.failures.iter().map(|(u, _)| u.node).collect();
        steps.dedup();
        steps.len()
    }
}

/// A step that fans out, as one pass sees it.
struct Fan<'a> {
    /// Its items, once known (a `withParam`'s once its step's outputs are).
    items: Option<ItemList<'a>>,
    /// The Job that speaks for each item that has one.
    jobs: BTreeMap<u32, &'a ObservedJob>,
    succeeded: u32,
    running: u32,
}

/// What the steps (not the exit steps) tell the steps after them: the outputs read of each
/// step whose outputs are named, and which steps a `when` skipped.
#[derive(Default)]
struct Known<'a> {
    outputs: HashMap<usize, &'a Outputs>,
    skipped: Vec<bool>,
}

/// What a `when` naming `names` (steps of `dag`) sees of them, given the known `outputs` and
/// `skipped` steps: the steps among them that are done, skipped or succeeded with outputs.
fn upstream<'a>(
    dag: &Dag,
    (outputs, skipped): (&HashMap<usize, &'a Outputs>, &[bool]),
    names: &'a [String],
) -> HashMap<&'a str, Upstream<'a>> {
    names
        .iter()
        .filter_map(|name| {
            let i = dag.index_of(name)?;
            let facts = if skipped.get(i).copied().unwrap_or(false) {
                Upstream {
                    phase: StepPhase::Skipped.as_str(),
                    outputs: None,
                }
            } else {
                Upstream {
                    phase: StepPhase::Succeeded.as_str(),
                    outputs: Some(outputs.get(&i)?),
                }
            };
            Some((name.as_str(), facts))
        })
        .collect()
}

/// The values of the outputs `step` names, from the known `outputs` of the steps of `dag`;
/// `None` when it names none.
///
/// # Errors
/// The first output named that is not there (its step was skipped, or did not write it; the
/// caller, which knows the skipped steps, says which).
fn step_inputs(
    step: &Step,
    dag: &Dag,
    outputs: &HashMap<usize, &Outputs>,
) -> Result<Option<Inputs>, outputs::MissingOutput> {
    let mut inputs = Inputs::new();
    for text in data_flow::texts(step) {
        let Ok(found) = outputs::references(text) else {
            continue;
        };
        for reference in found {
            let Source::Output { step, key } = reference.source else {
                continue;
            };
            let value = dag
                .index_of(step)
                .and_then(|i| outputs.get(&i))
                .and_then(|o| o.get(key));
            let Some(value) = value else {
                return Err(outputs::MissingOutput {
                    text: reference.text.to_string(),
                    step: step.to_string(),
                    key: key.to_string(),
                    skipped: false,
                });
            };
            inputs.insert((step.to_string(), key.to_string()), value.clone());
        }
    }
    Ok((!inputs.is_empty()).then_some(inputs))
}

/// The items of the step fanning out as `fan_out` (`step` of `dag`), given the known
/// `outputs`: `None` while a `withParam`'s step has not told them.
///
/// # Errors
/// Why a `withParam`'s value is not its items, for the step's failure.
fn items_of<'a>(
    step: &'a Step,
    fan_out: &FanOut,
    dag: &Dag,
    outputs: &HashMap<usize, &Outputs>,
) -> Result<Option<ItemList<'a>>, String> {
    if let Some(items) = ItemList::of_spec(step, fan_out) {
        return Ok(Some(items));
    }
    let FanOut::Param { step: source, key } = fan_out else {
        return Ok(None);
    };
    let param = step.with_param.as_deref().map_or("", |p| p.0.trim());
    let Some(outputs) = outputs.get(source) else {
        return Ok(None);
    };
    let Some(text) = outputs.get(key) else {
        return Err(format!(
            "withParam {param}: step {:?} wrote no output {key:?}",
            dag.name(*source)
        ));
    };
    fan_out::parse_param(text)
        .map(|items| Some(ItemList::Param(items)))
        .map_err(|why| format!("withParam {param} {why}"))
}

/// The first `{{item.FIELD}}` of `step` that `item` cannot fill, as the item's failure.
fn item_unresolved(step: &Step, item: &serde_json::Value) -> Option<String> {
    data_flow::texts(step).find_map(|text| {
        outputs::substitute(text, |_, _| Some(""), Some(item))
            .err()
            .map(|e| e.to_string())
    })
}

/// The status lists being rendered.
#[derive(Default)]
struct Lists {
    executed: Vec<String>,
    started: Vec<String>,
    steps: Vec<StepStatus>,
}

/// How a workflow whose steps ended with `main_end` ends once its exit steps (`exits`) ended:
/// as the steps did, with a failed exit step added to the message; a failed exit step fails a
/// workflow whose steps all succeeded, but no exit step makes a failed one succeed.
fn exit_end(main_end: (Trigger, String), exits: &View<'_>) -> (Trigger, String) {
    let (trigger, message) = main_end;
    let Some((unit, failure)) = exits.failures.first() else {
        return (trigger, message);
    };
    let exit_failure = format!("exit {}", failure.describe(&exits.display(*unit)));
    if trigger == Trigger::AllStepsSucceeded {
        (failure.trigger(), exit_failure)
    } else {
        (trigger, format!("{message}; {exit_failure}"))
    }
}

/// The entry of a step its `when` (`expression`) skipped.
fn skipped_entry(name: &str, expression: Option<&str>) -> StepStatus {
    let expression = expression.unwrap_or("");
    StepStatus {
        phase: StepPhase::Skipped,
        reason: Some(REASON_WHEN_FALSE.into()),
        message: Some(format!("when {expression:?} is false")),
        job: None,
        ..running_step_status(name, String::new(), false)
    }
}

struct Outcome {
    message: Option<String>,
    executed: Vec<String>,
    started: Vec<String>,
    steps: Vec<StepStatus>,
    total: usize,
    /// What made the workflow fail, for the `Failed` condition's reason.
    failed_by: Option<Trigger>,
}

impl<'a> Planner<'a> {
    fn new(
        workflow: &'a WorkFlow,
        run: &'a str,
        flow: &'a DataFlow,
        now: Timestamp,
    ) -> Planner<'a> {
        let previous = workflow.status.as_ref().unwrap_or(&NO_STATUS);
        let mut planner = Planner {
            workflow,
            previous,
            run,
            flow,
            now,
            phase: previous.workflow_status.unwrap_or(Phase::Created),
            outcome: None,
            actions: Vec::new(),
            settled: HashSet::new(),
            events: Vec::new(),
            next_timeout_at: None,
        };
        // A status without a run id is adopted as is (a new workflow, or one another operator
        // ran); a different run id means what runs changed. In Created nothing ran yet, so
        // there is no move to make.
        if let Some(old) = previous.run.as_deref().filter(|old| *old != run)
            && planner.phase != Phase::Created
        {
            planner.go(
                Trigger::SpecChanged,
                format!("what runs changed (run {old} -> {run})"),
            );
        }
        planner
    }

    /// Moves along the lifecycle table.
    ///
    /// # Panics
    /// Never in practice: the planner is only in Created or Started when it calls this with
    /// anything but `SpecChanged`, and the table has a row for each trigger it uses there (the
    /// lifecycle and planner tests cover every call).
    fn go(&mut self, trigger: Trigger, detail: String) {
        if self.phase == Phase::Created && Transition::new(self.phase, trigger).is_err() {
            // Reaching an outcome from Created (the status write after the first Jobs was
            // lost) passes through Started, so the recorded path stays a legal one.
            self.go(Trigger::StepsStarted, "steps were already running".into());
        }
        let transition =
            Transition::new(self.phase, trigger).unwrap_or_else(|e| panic!("planner bug: {e}"));
        self.events.push(LifecycleEvent {
            message: format!("{} -> {}: {detail}", transition.from(), transition.to()),
            transition,
        });
        self.phase = transition.to();
    }

    fn delete(&mut self, job: &'a ObservedJob, reason: DeleteReason) {
        if !job.deleting && self.settled.insert(&job.name) {
            self.actions.push(Action::DeleteJob {
                job_name: job.name.clone(),
                reason,
            });
        }
    }

    /// Stops the Job of a step past its timeout and keeps it (see [`Action::TimeOutJob`]); a
    /// failed workflow then does not delete it with its running Jobs.
    fn time_out(&mut self, job: &'a ObservedJob, why: String) {
        if self.settled.insert(&job.name) {
            self.actions.push(Action::TimeOutJob {
                job_name: job.name.clone(),
                why,
            });
        }
    }

    /// Stops the Job of a step whose pod did not start and keeps it (see
    /// [`Action::FailStart`]).
    fn fail_start(&mut self, job: &'a ObservedJob, why: String) {
        if self.settled.insert(&job.name) {
            self.actions.push(Action::FailStart {
                job_name: job.name.clone(),
                why,
            });
        }
    }

    fn delete_other_runs(&mut self, jobs: &'a [ObservedJob]) {
        let run = self.run;
        for job in jobs.iter().filter(|j| j.run != run) {
            self.delete(job, DeleteReason::OldRun);
        }
    }

    /// Deletes the current run's Jobs that still run (a failed workflow stops its steps). A
    /// timed-out step's Job is not one of them: it is stopping already, and it is the record.
    fn delete_running(&mut self, current: &[&'a ObservedJob], reason: DeleteReason) {
        for &job in current {
            if matches!(job.state, JobState::Active { .. }) {
                self.delete(job, reason);
            }
        }
    }

    fn keep_terminal(&mut self, current: &[&'a ObservedJob]) {
        if self.phase == Phase::Failed {
            self.delete_running(current, DeleteReason::WorkflowFailed);
        }
    }

    /// A failed workflow whose `spec.retry` is above the retry its status describes is retried:
    /// `Failed -> Created`, and the steps that did not succeed run again (see
    /// [`Planner::assess`]). Only a failed workflow of the current run: a completed one has
    /// nothing to retry, and a new run starts from scratch anyway.
    fn retry_if_asked(&mut self) {
        let retry = self.workflow.spec.retry;
        let previous = self.previous.retry.unwrap_or(0);
        let same_run = self.previous.run.as_deref() == Some(self.run);
        if self.phase == Phase::Failed && same_run && retry > previous {
            self.go(
                Trigger::Retried,
                format!("retry {retry}: running again the steps that did not succeed"),
            );
        }
    }

    fn fail_invalid(&mut self, error: &DagError, current: &[&'a ObservedJob]) {
        let message = format!("invalid workflow: {error}");
        self.go(Trigger::InvalidSpec, message.clone());
        self.delete_running(current, DeleteReason::WorkflowFailed);
        self.outcome = Some(Outcome {
            message: Some(message),
            executed: Vec::new(),
            started: Vec::new(),
            steps: Vec::new(),
            total: self.workflow.spec.containers.len(),
            failed_by: Some(Trigger::InvalidSpec),
        });
    }

    /// Sees the Jobs of `steps` (the steps of `dag` in run `run_index` of `runs`, or the exit
    /// steps): which Job speaks for each step (each item of a step that fans out), which
    /// steps succeeded, failed or run, and which running ones are past their timeout or start
    /// deadline (stopping those). Failed Jobs of an earlier retry (`spec.retry`) are left out,
    /// so their steps run again; so is every Job of an earlier retry when `whole_retry` (exit
    /// steps run again in full on a retry). A step that fans out is done once its every item
    /// succeeded, and failed once one failed.
    #[allow(clippy::too_many_arguments)]
    fn assess(
        &mut self,
        dag: &'a Dag,
        steps: &'a [Step],
        jobs: &[&'a ObservedJob],
        whole_retry: bool,
        main: Option<(&'a Dag, &Known<'a>)>,
        run_index: u32,
        runs: u32,
    ) -> View<'a> {
        let spec = &self.workflow.spec;
        let retry = spec.retry;
        let n = dag.len();
        let flow: &'a DataFlow = self.flow;
        let no_fans = HashMap::new();
        let fan_outs = if main.is_none() {
            &flow.fan_out
        } else {
            &no_fans
        };
        // The Job that speaks for each step (or item); if one somehow has two, success wins,
        // then a running one (it may still succeed).
        let rank = |j: &ObservedJob| match j.state {
            JobState::Succeeded => 0,
            JobState::Active { .. } => 1,
            JobState::Failed { .. } | JobState::TimedOut { .. } | JobState::CannotStart { .. } => 2,
        };
        let superseded = |j: &ObservedJob| j.retry < retry && (whole_retry || rank(j) == 2);
        let mut job_of: Vec<Option<&'a ObservedJob>> = vec![None; n];
        let mut item_jobs: HashMap<usize, BTreeMap<u32, &'a ObservedJob>> = HashMap::new();
        for &job in jobs {
            if superseded(job) {
                continue;
            }
            let Some(i) = dag.index_of(&job.step) else {
                continue;
            };
            // A Job of an item of a step that does not fan out, or the other way round, is of
            // no instance this spec has (the run id covers fan-outs, so it is not ours).
            match (fan_outs.contains_key(&i), job.item) {
                (false, None) if job_of[i].is_none_or(|old| rank(job) < rank(old)) => {
                    job_of[i] = Some(job);
                }
                (true, Some(item)) => {
                    let slot = item_jobs.entry(i).or_default().entry(item).or_insert(job);
                    if rank(job) < rank(slot) {
                        *slot = job;
                    }
                }
                _ => {}
            }
        }

        let mut progress = dag.progress();
        let mut released = Vec::new();
        let mut failures: Vec<(Unit, Failure)> = Vec::new();
        let mut running = 0usize;
        // The outputs of the steps whose outputs are named: recorded in the status, or read
        // by the handler from the pod of a Job that succeeded since.
        let no_steps = HashSet::new();
        let read = if main.is_none() {
            &flow.read
        } else {
            &no_steps
        };
        let recorded: HashMap<&str, &'a Outputs> = if read.is_empty() {
            HashMap::new()
        } else {
            self.previous
                .steps
                .iter()
                .filter(|s| s.phase == StepPhase::Succeeded)
                .filter_map(|s| Some((s.job.as_deref()?, &s.outputs)))
                .collect()
        };
        let mut known_outputs: HashMap<usize, &'a Outputs> = HashMap::new();
        for (i, job) in job_of.iter().enumerate() {
            let Some(job) = *job else { continue };
            let unit = Unit::step(i);
            let timeout = spec.effective_timeout(&steps[i]);
            match self.see(job, timeout) {
                Seen::Succeeded if read.contains(&i) => {
                    let outputs = recorded
                        .get(job.name.as_str())
                        .map(|o| Ok(*o))
                        .or_else(|| job.outputs.as_ref().map(|o| o.as_ref()));
                    match outputs {
                        Some(Ok(outputs)) => {
                            known_outputs.insert(i, outputs);
                            progress.complete(i, &mut released);
                        }
                        Some(Err(why)) => failures.push((
                            unit,
                            Failure::Data {
                                reason: REASON_BAD_OUTPUTS,
                                why: why.clone(),
                            },
                        )),
                        // Not read yet (its pods could not be listed): the next pass reads
                        // them; until then it holds its dependents as if it still ran.
                        None => running += 1,
                    }
                }
                Seen::Succeeded => progress.complete(i, &mut released),
                Seen::Running => running += 1,
                Seen::Failed(failure) => failures.push((unit, failure)),
            }
        }
        // The steps that fan out: their items (a `withParam`'s from the outputs just known)
        // and their items' Jobs. One whose every item succeeded is done.
        let mut fans: HashMap<usize, Fan<'a>> = HashMap::with_capacity(fan_outs.len());
        // Why a `withParam`'s value is not its items: the step fails once it may start (its
        // `when` may skip it first).
        let mut bad_params: HashMap<usize, String> = HashMap::new();
        for (&i, fan_out) in fan_outs {
            let items = match items_of(&steps[i], fan_out, dag, &known_outputs) {
                Ok(items) => items,
                Err(why) => {
                    bad_params.insert(i, why);
                    None
                }
            };
            let jobs = item_jobs.remove(&i).unwrap_or_default();
            let mut fan = Fan {
                items,
                jobs,
                succeeded: 0,
                running: 0,
            };
            let timeout = spec.effective_timeout(&steps[i]);
            for (&item, &job) in &fan.jobs {
                match self.see(job, timeout) {
                    Seen::Succeeded => fan.succeeded += 1,
                    Seen::Running => fan.running += 1,
                    Seen::Failed(failure) => failures.push((
                        Unit {
                            node: i,
                            item: Some(item),
                        },
                        failure,
                    )),
                }
            }
            running += fan.running as usize;
            let all = fan.items.as_ref().map(ItemList::len);
            if all.is_some_and(|all| all > 0 && fan.succeeded as usize >= all) {
                progress.complete(i, &mut released);
            }
            fans.insert(i, fan);
        }
        // A step whose Job the API server refused has no Job: its status entry is the record
        // (of this run and retry: the Job's name has both in it).
        let refused: HashMap<&str, &StepStatus> = self
            .previous
            .steps
            .iter()
            .filter(|s| s.reason.as_deref() == Some(REASON_JOB_REFUSED))
            .filter_map(|s| Some((s.job.as_deref()?, s)))
            .collect();
        let name_of =
            |unit: Unit| fan_out::display_name(dag.name(unit.node), run_index, runs, unit.item);
        if !refused.is_empty() {
            let mut missing: Vec<Unit> = Vec::new();
            for (i, job) in job_of.iter().enumerate() {
                if job.is_none() && !fans.contains_key(&i) {
                    missing.push(Unit::step(i));
                }
            }
            for (&i, fan) in &fans {
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
            for unit in missing {
                let name = self.job_name(&name_of(unit));
                if let Some(entry) = refused.get(name.as_str()) {
                    let entry = Box::new((*entry).clone());
                    failures.push((unit, Failure::Refused { entry }));
                }
            }
        }
        // A step that fans out starts no more items once one failed.
        let mut blocked = vec![false; n];
        let mut is_refused = HashSet::new();
        for (unit, _) in &failures {
            if fans.contains_key(&unit.node) {
                blocked[unit.node] = true;
            }
            is_refused.insert(*unit);
        }
        // `when`s, named outputs and items decide among the steps that may start: a false
        // `when` skips its step (done for its dependents, which may then be decided in turn),
        // a failing one or a missing output fails it, and so does a `withParam` that is not a
        // JSON list; a step with no items is done at once. The same outputs decide the same
        // way at every pass, so nothing of it needs a record but the status.
        let whens = if main.is_none() {
            &flow.when
        } else {
            &flow.exit_when
        };
        let mut skipped = vec![false; n];
        let mut inputs: HashMap<usize, Inputs> = HashMap::new();
        let starts = |i: usize, blocked: &[bool], fans: &HashMap<usize, Fan<'a>>| {
            !blocked[i]
                && match fans.get(&i) {
                    Some(fan) => fan.items.is_some() || bad_params.contains_key(&i),
                    None => job_of[i].is_none() && !is_refused.contains(&Unit::step(i)),
                }
        };
        if !whens.is_empty() || !flow.read.is_empty() || !fans.is_empty() {
            let mut queue: Vec<usize> = progress
                .ready()
                .filter(|&i| starts(i, &blocked, &fans))
                .collect();
            while let Some(i) = queue.pop() {
                let (source_dag, source_outputs) = match main {
                    Some((dag, known)) => (dag, &known.outputs),
                    None => (dag, &known_outputs),
                };
                let verdict = whens.get(&i).map(|when| {
                    let seen = match main {
                        Some((_, known)) => known.skipped.as_slice(),
                        None => skipped.as_slice(),
                    };
                    when.evaluate(&upstream(source_dag, (source_outputs, seen), when.steps()))
                });
                let mut done = false;
                match verdict {
                    None | Some(Ok(true)) => {}
                    Some(Ok(false)) => {
                        skipped[i] = true;
                        done = true;
                    }
                    Some(Err(error)) => {
                        let expression = steps[i].when.as_deref().unwrap_or("");
                        blocked[i] = true;
                        failures.push((
                            Unit::step(i),
                            Failure::Data {
                                reason: REASON_WHEN_FAILED,
                                why: format!("when {expression:?}: {error}"),
                            },
                        ));
                        continue;
                    }
                }
                if !done {
                    match step_inputs(&steps[i], source_dag, source_outputs) {
                        Ok(Some(values)) => {
                            inputs.insert(i, values);
                        }
                        Ok(None) => {}
                        Err(mut missing) => {
                            let seen = match main {
                                Some((_, known)) => known.skipped.as_slice(),
                                None => skipped.as_slice(),
                            };
                            missing.skipped = source_dag
                                .index_of(&missing.step)
                                .is_some_and(|j| seen.get(j).copied().unwrap_or(false));
                            blocked[i] = true;
                            failures.push((
                                Unit::step(i),
                                Failure::Data {
                                    reason: REASON_MISSING_OUTPUT,
                                    why: missing.to_string(),
                                },
                            ));
                            continue;
                        }
                    }
                    if let Some(why) = bad_params.get(&i) {
                        blocked[i] = true;
                        failures.push((
                            Unit::step(i),
                            Failure::Data {
                                reason: REASON_BAD_PARAM,
                                why: why.clone(),
                            },
                        ));
                        continue;
                    }
                    done = fans
                        .get(&i)
                        .and_then(|fan| fan.items.as_ref())
                        .is_some_and(ItemList::is_empty);
                }
                if done {
                    let mut newly = Vec::new();
                    progress.complete(i, &mut newly);
                    queue.extend(newly.into_iter().filter(|&d| starts(d, &blocked, &fans)));
                }
            }
        }
        // The items of a `withParam` are checked as they come: one without a field the step
        // names fails (the spec's own items were checked at create).
        let mut ready = Vec::new();
        let may_start: Vec<usize> = progress
            .ready()
            .filter(|&i| starts(i, &blocked, &fans))
            .collect();
        for i in may_start {
            let Some(fan) = fans.get(&i) else {
                ready.push(Unit::step(i));
                continue;
            };
            let Some(items) = &fan.items else { continue };
            let param = matches!(items, ItemList::Param(_));
            for item in 0..items.len() as u32 {
                let unit = Unit {
                    node: i,
                    item: Some(item),
                };
                if fan.jobs.contains_key(&item) || is_refused.contains(&unit) {
                    continue;
                }
                if param && let Some(why) = item_unresolved(&steps[i], &items.get(item as usize)) {
                    failures.push((
                        unit,
                        Failure::Data {
                            reason: REASON_BAD_ITEM,
                            why,
                        },
                    ));
                    blocked[i] = true;
                    break;
                }
                ready.push(unit);
            }
            if blocked[i] {
                ready.retain(|u| u.node != i);
            }
        }
        failures.sort_by_key(|(unit, _)| *unit);
        let known = Known {
            outputs: known_outputs,
            skipped: skipped.clone(),
        };
        View {
            dag,
            steps,
            run_index,
            runs,
            job_of,
            fans,
            progress,
            failures,
            running,
            ready,
            known,
            skipped,
            inputs,
        }
    }

    /// What `job` (of a step whose timeout is `timeout`) says of its step: succeeded, still
    /// running, or failed (stopping it when it ran past its timeout, or its pod did not start
    /// by its deadline).
    fn see(&mut self, job: &'a ObservedJob, timeout: i64) -> Seen {
        let spec = &self.workflow.spec;
        match &job.state {
            JobState::Succeeded => Seen::Succeeded,
            JobState::TimedOut { why } => Seen::Failed(Failure::TimedOut { why: why.clone() }),
            JobState::CannotStart { why } => {
                Seen::Failed(Failure::CannotStart { why: why.clone() })
            }
            JobState::Failed { reason, .. } if reason == DEADLINE_EXCEEDED => {
                let timeout = job.active_deadline_seconds.unwrap_or(timeout);
                let why = format!("its Job exceeded its deadline of {timeout}s");
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

    /// Whether `job` waits for Kueue (a workflow with `queueName`): suspended, or admitted but
    /// without a `startTime` yet. Its run timeout has not begun (its creation time is its
    /// queue's, not its run's). A suspended Job of a workflow without a queue is not waiting
    /// for anyone: its step times out as any other.
    fn queued_for_kueue(&self, job: &ObservedJob) -> bool {
        self.workflow.spec.queue_name.is_some() && (job.suspended || job.start_time.is_none())
    }

    /// The name of `step`'s Job in this run and retry.
    fn job_name(&self, step: &str) -> String {
        names::retry_job_name(
            self.workflow_name(),
            step,
            self.run,
            self.workflow.spec.retry,
        )
    }

    fn advance(&mut self, dag: &'a Dag, exit_dag: Option<&'a Dag>, current: &[&'a ObservedJob]) {
        let spec = &self.workflow.spec;
        let n = dag.len();
        let runs = spec.run_count();
        let (main_jobs, exit_jobs): (Vec<&ObservedJob>, Vec<&ObservedJob>) = current
            .iter()
            .partition(|j| exit_dag.is_none() || dag.index_of(&j.step).is_some());
        // One view per run of `spec.runs`, each of its own Jobs (the run index is in the run
        // id's Job names and labels).
        let mut by_run: Vec<Vec<&ObservedJob>> = vec![Vec::new(); runs as usize];
        for &job in &main_jobs {
            if let Some(jobs) = by_run.get_mut(job.run_index as usize) {
                jobs.push(job);
            }
        }
        let mut mains: Vec<View<'a>> = Vec::with_capacity(by_run.len());
        for (r, jobs) in by_run.iter().enumerate() {
            let view = self.assess(dag, &spec.containers, jobs, false, None, r as u32, runs);
            mains.push(view);
        }
        let terminate = spec.shutdown == Some(Shutdown::Terminate);
        if spec.shutdown.is_some() {
            // Stopping or terminating: nothing new starts.
            for view in &mut mains {
                view.ready.clear();
            }
        }
        let running: usize = mains.iter().map(|v| v.running).sum();
        let no_ready = mains.iter().all(|v| v.ready.is_empty());
        let first_failure = mains.iter().find_map(|v| {
            v.failures
                .first()
                .map(|(unit, f)| (v.display(*unit), f.clone()))
        });
        let failed_steps: usize = mains.iter().map(View::failed_steps).sum();
        // How the steps (not the exit steps) ended, once they did.
        let main_end = if mains.iter().all(|v| v.progress.all_done()) {
            let message = if runs > 1 {
                format!("all {n} steps succeeded in each of {runs} runs")
            } else {
                format!("all {n} steps succeeded")
            };
            Some((Trigger::AllStepsSucceeded, message))
        } else if terminate {
            let mut message = "terminated (spec.shutdown: Terminate)".to_string();
            if let Some((name, failure)) = &first_failure {
                message.push_str(&format!("; {}", failure.describe(name)));
            }
            Some((Trigger::Terminated, message))
        } else if let Some((name, failure)) = first_failure
            .as_ref()
            .filter(|_| spec.fail_fast || running == 0 && no_ready)
        {
            let mut message = failure.describe(name);
            if failed_steps > 1 {
                message.push_str(&format!(" (and {} more failed steps)", failed_steps - 1));
            }
            Some((failure.trigger(), message))
        } else if spec.shutdown == Some(Shutdown::Stop) && running == 0 {
            let never_ran = (n * runs as usize)
                - mains.iter().map(|v| v.progress.done_count()).sum::<usize>()
                - failed_steps;
            Some((
                Trigger::Stopped,
                format!("stopped (spec.shutdown: Stop): {never_ran} steps never ran"),
            ))
        } else {
            None
        };
        if let Some((trigger, _)) = &main_end
            && *trigger != Trigger::AllStepsSucceeded
        {
            let reason = if terminate {
                DeleteReason::Terminated
            } else {
                DeleteReason::WorkflowFailed
            };
            self.delete_running(&main_jobs, reason);
        }

        // Resumed before anything starts (exit steps included) or ends.
        if !spec.suspend && self.phase == Phase::Suspended {
            self.go(
                Trigger::Resumed,
                "spec.suspend is false: steps start again".into(),
            );
        }
        // The exit steps run once the steps ended, unless terminated; the workflow ends once
        // they did too.
        let mut exits = None;
        let mut created_exits: Vec<Unit> = Vec::new();
        let mut exit_message = None;
        let end = match (main_end, exit_dag) {
            (Some(main_end), Some(exit_dag)) if !terminate => {
                // With several runs an exit step names no step's outputs (`data_flow`): the
                // last run's are as good as any.
                let known = &mains.last().expect("at least one run").known;
                let view = self.assess(
                    exit_dag,
                    &spec.on_exit,
                    &exit_jobs,
                    true,
                    Some((dag, known)),
                    0,
                    1,
                );
                let exit_env = ExitEnv {
                    status: if main_end.0 == Trigger::AllStepsSucceeded {
                        Phase::Completed
                    } else {
                        Phase::Failed
                    },
                    failed_steps: mains
                        .iter()
                        .flat_map(|v| v.failures.iter().map(|(unit, _)| v.display(*unit)))
                        .collect(),
                };
                let none_yet = view.job_of.iter().all(Option::is_none);
                // Suspended: the exit steps wait too (and the workflow has not ended).
                if !spec.suspend {
                    created_exits = view
                        .ready
                        .iter()
                        .take(self.slots(view.running))
                        .copied()
                        .collect();
                }
                for &unit in &created_exits {
                    let step = exit_dag.name(unit.node);
                    self.actions.push(Action::CreateJob {
                        step: step.to_string(),
                        job_name: self.job_name(step),
                        retry: spec.retry,
                        exit: Some(exit_env.clone()),
                        inputs: view.inputs.get(&unit.node).cloned().unwrap_or_default(),
                        instance: Instance::default(),
                    });
                }
                let end = if view.running == 0 && view.ready.is_empty() {
                    Some(exit_end(main_end, &view))
                } else {
                    if none_yet && !created_exits.is_empty() {
                        let names: Vec<&str> = created_exits
                            .iter()
                            .map(|u| exit_dag.name(u.node))
                            .collect();
                        self.go(
                            Trigger::ExitStepsStarted,
                            format!(
                                "running exit steps {} after: {}",
                                list_names(&names),
                                main_end.1
                            ),
                        );
                    }
                    exit_message = Some(format!("running exit steps: {}", main_end.1));
                    None
                };
                exits = Some(view);
                end
            }
            (main_end, _) => main_end,
        };

        // The instances created, by run.
        let mut created: Vec<Vec<Unit>> = vec![Vec::new(); mains.len()];
        let mut failed_by = None;
        let message = if let Some((trigger, message)) = end {
            self.go(trigger, message.clone());
            failed_by = (trigger != Trigger::AllStepsSucceeded).then_some(trigger);
            Some(message)
        } else {
            if spec.suspend && matches!(self.phase, Phase::Created | Phase::Started) {
                self.go(
                    Trigger::Suspended,
                    "spec.suspend is true: no new step starts".into(),
                );
            }
            let mut started_names: Vec<String> = Vec::new();
            if !spec.suspend {
                // At most `parallelism` at once across all runs, the earlier runs first.
                let mut slots = self.slots(running);
                for (view, created) in mains.iter_mut().zip(&mut created) {
                    let take = view.ready.len().min(slots);
                    created.extend_from_slice(&view.ready[..take]);
                    slots -= take;
                    for &unit in created.iter() {
                        let name = view.display(unit);
                        let item = unit.item.and_then(|item| {
                            let items = view.fans.get(&unit.node)?.items.as_ref()?;
                            Some(fan_out::Item {
                                index: item,
                                value: items.get(item as usize),
                            })
                        });
                        let inputs = if unit.item.is_none() {
                            view.inputs.remove(&unit.node)
                        } else {
                            view.inputs.get(&unit.node).cloned()
                        };
                        self.actions.push(Action::CreateJob {
                            step: dag.name(unit.node).to_string(),
                            job_name: self.job_name(&name),
                            retry: spec.retry,
                            exit: None,
                            inputs: inputs.unwrap_or_default(),
                            instance: Instance {
                                run_index: view.run_index,
                                item,
                            },
                        });
                        started_names.push(name);
                    }
                }
            }
            if self.phase == Phase::Created && (running > 0 || !started_names.is_empty()) {
                let names: Vec<&str> = started_names.iter().map(String::as_str).collect();
                self.go(
                    Trigger::StepsStarted,
                    format!("starting {}", list_names(&names)),
                );
            }
            for view in &mains {
                self.plan_deadlines(view, &spec.containers);
            }
            if let Some(view) = &exits {
                self.plan_deadlines(view, &spec.on_exit);
            }
            // failFast false: the failure is known, the workflow fails once nothing runs.
            let failure = first_failure.map(|(name, failure)| {
                format!(
                    "{}; waiting for running steps to finish",
                    failure.describe(&name)
                )
            });
            exit_message
                .or(failure)
                .or_else(|| {
                    (spec.shutdown == Some(Shutdown::Stop)).then(|| {
                        "stopping (spec.shutdown: Stop): waiting for running steps to finish"
                            .to_string()
                    })
                })
                .or_else(|| {
                    spec.suspend
                        .then(|| "suspended (spec.suspend): no new step starts".to_string())
                })
        };

        let terminal = self.phase.is_terminal();
        let halted = if failed_by == Some(Trigger::Terminated) {
            (REASON_TERMINATED, "terminated: spec.shutdown is Terminate")
        } else {
            (REASON_STOPPED, "stopped: the workflow failed")
        };
        let mut lists = Lists::default();
        for (view, created) in mains.iter().zip(&created) {
            self.render(view, created, terminal, halted, "", &mut lists);
        }
        let mut total = n * runs as usize;
        if let Some(view) = &exits {
            self.render(view, &created_exits, terminal, halted, "exit ", &mut lists);
        }
        if let Some(exit_dag) = exit_dag {
            total += exit_dag.len();
        }
        self.outcome = Some(Outcome {
            message,
            executed: lists.executed,
            started: lists.started,
            steps: lists.steps,
            total,
            failed_by,
        });
    }

    /// How many more steps may start with `running` running: `parallelism` minus those.
    fn slots(&self, running: usize) -> usize {
        match self.workflow.spec.parallelism {
            Some(p) => usize::try_from(p.max(1))
                .unwrap_or(1)
                .saturating_sub(running),
            None => usize::MAX,
        }
    }

    /// Adds the steps of `view` to the status lists: succeeded ones to `executed`; running ones
    /// and those being created (`created`) to `started` and `steps`; failed ones to `steps`;
    /// in a terminal workflow, steps still running are `halted` (reason and message). A step
    /// that fans out is one name in `executed` and `started` and one entry in `steps` (its
    /// items counted), plus an entry per failed item.
    fn render(
        &self,
        view: &View<'a>,
        created: &[Unit],
        terminal: bool,
        halted: (&str, &str),
        prefix: &str,
        lists: &mut Lists,
    ) {
        let mut created_iter = created.iter().peekable();
        let mut failures_iter = view.failures.iter().peekable();
        for (i, job) in view.job_of.iter().enumerate() {
            let name = view.display(Unit::step(i));
            let mut failures = Vec::new();
            while let Some((unit, failure)) = failures_iter.next_if(|(u, _)| u.node == i) {
                failures.push((*unit, failure));
            }
            let mut created_here = 0;
            while created_iter.next_if(|u| u.node == i).is_some() {
                created_here += 1;
            }
            if let Some(fan) = view.fans.get(&i) {
                self.render_fan(
                    view,
                    i,
                    fan,
                    &failures,
                    created_here,
                    terminal,
                    halted,
                    lists,
                );
                continue;
            }
            let failure = failures.first().map(|(_, f)| *f);
            match (job, failure) {
                (_, Some(Failure::Refused { entry })) => lists.steps.push((**entry).clone()),
                (None, Some(failure)) => lists.steps.extend(failure.entry_without_job(&name)),
                (Some(job), Some(failure)) => {
                    let mut entry = failure.step_status(&name, job);
                    if !prefix.is_empty() {
                        entry.message = entry.message.map(|m| format!("{prefix}step: {m}"));
                    }
                    lists.steps.push(entry);
                }
                (Some(job), None) => match &job.state {
                    JobState::Succeeded => {
                        // Outputs another step names are recorded, so they are read once.
                        if let Some(outputs) = view.known.outputs.get(&i) {
                            lists.steps.push(StepStatus {
                                phase: StepPhase::Succeeded,
                                started_at: job.start_time.map(Time),
                                finished_at: job.finished_at.map(Time),
                                outputs: (*outputs).clone(),
                                ..running_step_status(&name, job.name.clone(), false)
                            });
                        }
                        lists.executed.push(name.clone());
                    }
                    JobState::Active { .. } if !terminal => {
                        let mut entry = running_step_status(&name, job.name.clone(), job.suspended);
                        if let Some(queue) = self.workflow.spec.queue_name.as_deref()
                            && job.suspended
                        {
                            entry.message = Some(format!(
                                "waiting for Kueue to admit its Job (queue {queue})"
                            ));
                        }
                        lists.steps.push(entry);
                        lists.started.push(name.clone());
                    }
                    // Stopped with the workflow (failFast, Terminate).
                    JobState::Active { .. } => lists.steps.push(StepStatus {
                        phase: StepPhase::Failed,
                        started_at: job.start_time.map(Time),
                        attempts: Some(job.attempts),
                        reason: Some(halted.0.into()),
                        message: Some(halted.1.into()),
                        ..running_step_status(&name, job.name.clone(), false)
                    }),
                    _ => {}
                },
                (None, None) if view.skipped[i] => lists
                    .steps
                    .push(skipped_entry(&name, view.steps[i].when.as_deref())),
                (None, None) => {}
            }
            // Steps being created count as started, so their Jobs appearing changes nothing.
            if created_here > 0 {
                let job = self.job_name(&name);
                lists.steps.push(running_step_status(&name, job, false));
                lists.started.push(name);
            }
        }
    }

    /// [`Planner::render`] for step `i` of `view`, which fans out over `fan`'s items:
    /// `created` of them being created, `failures` its failed items (or its own failure, for a
    /// `withParam` that is not a list or a `when` that fails). Its entry counts its items;
    /// each failed item has its own (`NAME[i]`); succeeded and running items have none, so a
    /// step of 10,000 items costs the status a few entries.
    #[allow(clippy::too_many_arguments)]
    fn render_fan(
        &self,
        view: &View<'a>,
        i: usize,
        fan: &Fan<'a>,
        failures: &[(Unit, &Failure)],
        created: usize,
        terminal: bool,
        halted: (&str, &str),
        lists: &mut Lists,
    ) {
        let name = view.display(Unit::step(i));
        if view.skipped[i] {
            lists
                .steps
                .push(skipped_entry(&name, view.steps[i].when.as_deref()));
            return;
        }
        if view.progress.is_done(i) {
            lists.executed.push(name);
            return;
        }
        let running = fan.running as usize + created;
        let item_failures = failures.iter().filter(|(u, _)| u.item.is_some()).count();
        if running == 0 && item_failures == 0 {
            // Not started, or failed as a whole (its `withParam`, its `when`).
            for (_, failure) in failures {
                lists.steps.extend(failure.entry_without_job(&name));
            }
            return;
        }
        let counts = ItemCounts {
            total: fan.items.as_ref().map_or(0, ItemList::len) as u32,
            succeeded: fan.succeeded,
            running: if terminal { 0 } else { running as u32 },
            failed: item_failures as u32,
        };
        let (phase, reason, message) = if item_failures > 0 {
            let message = format!("{item_failures} of {} items failed", counts.total);
            (StepPhase::Failed, None, Some(message))
        } else if terminal {
            (
                StepPhase::Failed,
                Some(halted.0.to_string()),
                Some(halted.1.to_string()),
            )
        } else {
            (StepPhase::Running, None, None)
        };
        lists.steps.push(StepStatus {
            phase,
            reason,
            message,
            job: None,
            items: Some(counts),
            ..running_step_status(&name, String::new(), false)
        });
        if running > 0 && !terminal {
            lists.started.push(name);
        }
        for (unit, failure) in failures {
            let item_name = view.display(*unit);
            let entry = match (failure, unit.item.and_then(|item| fan.jobs.get(&item))) {
                (Failure::Refused { entry }, _) => Some((**entry).clone()),
                (failure, Some(job)) => Some(failure.step_status(&item_name, job)),
                (failure, None) => failure.entry_without_job(&item_name),
            };
            lists.steps.extend(entry);
        }
    }

    /// Keeps running Jobs' deadlines equal to their steps' current timeouts, and finds the
    /// next timeout for the timer.
    fn plan_deadlines(&mut self, view: &View<'_>, steps: &[Step]) {
        let spec = &self.workflow.spec;
        let items = view
            .fans
            .iter()
            .flat_map(|(&i, fan)| fan.jobs.values().map(move |job| (i, *job)));
        let plain = view
            .job_of
            .iter()
            .enumerate()
            .filter_map(|(i, job)| Some((i, (*job)?)));
        let mut changes = Vec::new();
        for (i, job) in plain.chain(items) {
            let JobState::Active { since } = job.state else {
                continue;
            };
            if job.deleting || self.settled.contains(job.name.as_str()) {
                continue;
            }
            if self.queued_for_kueue(job) {
                // Queued: only its queue's clock runs.
                let queue_deadline = spec
                    .queue_timeout
                    .filter(|_| job.suspended)
                    .and_then(|limit| deadline(job.queued_since(), limit));
                if let Some(at) = queue_deadline {
                    self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
                }
                continue;
            }
            if let Some(at) = job.start_deadline(spec.start_timeout) {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
            let timeout = spec.effective_timeout(&steps[i]);
            let want = job_deadline_seconds(timeout);
            if job.active_deadline_seconds != want {
                changes.push(Action::SetJobDeadline {
                    job_name: job.name.clone(),
                    active_deadline_seconds: want,
                });
            }
            if let Some(at) = deadline(since, timeout) {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
        }
        self.actions.extend(changes);
    }

    fn workflow_name(&self) -> &str {
        self.workflow.metadata.name.as_deref().unwrap_or_default()
    }

    fn finish(self) -> Plan {
        let previous = self.previous;
        let generation = self.workflow.metadata.generation;
        let phase_changed = previous.workflow_status != Some(self.phase);
        let status_changed = match &previous.status_changed {
            Some(at) if !phase_changed => at.clone(),
            _ => format!("{:.0}", self.now),
        };
        let status = match self.outcome {
            Some(outcome) => WorkFlowStatus {
                progress: Some(format!("{}/{}", outcome.executed.len(), outcome.total)),
                conditions: conditions(
                    &previous.conditions,
                    self.phase,
                    outcome.failed_by,
                    outcome.message.as_deref(),
                    generation,
                    self.now,
                ),
                message: outcome.message,
                executed: outcome.executed,
                started: outcome.started,
                steps: outcome.steps,
                workflow_status: Some(self.phase),
                status_changed: Some(status_changed),
                observed_generation: generation,
                run: Some(self.run.to_string()),
                retry: (self.workflow.spec.retry != 0).then_some(self.workflow.spec.retry),
            },
            // Terminal: keep everything but the bookkeeping.
            None => WorkFlowStatus {
                workflow_status: Some(self.phase),
                status_changed: Some(status_changed),
                progress: previous.progress.clone().or_else(|| {
                    Some(format!(
                        "{}/{}",
                        previous.executed.len(),
                        self.workflow.spec.containers.len()
                    ))
                }),
                observed_generation: generation.or(previous.observed_generation),
                run: Some(self.run.to_string()),
                ..previous.clone()
            },
        };
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

/// `a, b, c` or `a, b, c and 7 more`.
fn list_names(names: &[&str]) -> String {
    const SHOWN: usize = 5;
    let mut out = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    if out.is_empty() {
        "nothing new".into()
    } else {
        out
    }
}

/// The `Completed`, `Failed` and `Finished` conditions for `phase`; a condition keeps its
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
            if completed {
                Trigger::AllStepsSucceeded.reason()
            } else {
                phase.as_str()
            },
        ),
        make(
            CONDITION_FAILED,
            failed,
            match failed_by {
                Some(trigger) if failed => trigger.reason(),
                _ => phase.as_str(),
            },
        ),
        make(
            CONDITION_FINISHED,
            completed || failed,
            match failed_by {
                Some(trigger) if failed => trigger.reason(),
                _ if completed => Trigger::AllStepsSucceeded.reason(),
                _ => phase.as_str(),
            },
        ),
    ]
}

#[cfg(test)]
#[path = "plan_data_tests.rs"]
mod data_tests;

#[cfg(test)]
#[path = "plan_fan_out_tests.rs"]
mod fan_out_tests;

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    use crate::workflow::testing::{Jobs, creates};

    fn at(seconds: i64) -> Timestamp {
        "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
    }

    /// `workflow` after the handler wrote `plan`'s status.
    fn written(mut workflow: WorkFlow, plan: &Plan) -> WorkFlow {
        if let Some(status) = &plan.status {
            workflow.status = Some(status.clone());
        }
        workflow
    }

    /// A workflow whose first plan (at time 0, no Jobs) was carried out and written.
    fn running(workflow: WorkFlow) -> WorkFlow {
        let first = plan(&workflow, &[], at(0));
        written(workflow, &first)
    }

    fn diamond() -> crate::workflow::testing::WorkFlowBuilder {
        WorkFlow::test("diamond")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["a"])
            .step("d", &["b", "c"])
    }

    fn deletes(plan: &Plan) -> Vec<(&str, DeleteReason)> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::DeleteJob { job_name, reason } => Some((job_name.as_str(), *reason)),
                _ => None,
            })
            .collect()
    }

    /// The Jobs the plan stops at their timeout, with why.
    fn stops(plan: &Plan) -> Vec<(&str, &str)> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::TimeOutJob { job_name, why } => Some((job_name.as_str(), why.as_str())),
                _ => None,
            })
            .collect()
    }

    fn reasons(plan: &Plan) -> Vec<&'static str> {
        plan.events.iter().map(|e| e.transition.reason()).collect()
    }

    fn status(plan: &Plan) -> &WorkFlowStatus {
        plan.status.as_ref().expect("the plan changes the status")
    }

    fn phase(plan: &Plan) -> Option<Phase> {
        status(plan).workflow_status
    }

    fn job_name(workflow: &WorkFlow, step: &str) -> String {
        names::job_name(
            workflow.metadata.name.as_deref().unwrap(),
            step,
            &names::run_id(&workflow.spec),
        )
    }

    /// `jobs` once the operator stopped the Job of `step` at its timeout, saying `why`.
    fn timed_out(mut jobs: Vec<ObservedJob>, step: &str, why: &str) -> Vec<ObservedJob> {
        let job = jobs.iter_mut().find(|j| j.step == step).expect("a job");
        job.state = JobState::TimedOut { why: why.into() };
        jobs
    }

    /// One scenario of the planner's rules and what it must decide.
    struct Case {
        name: &'static str,
        workflow: WorkFlow,
        jobs: fn(&WorkFlow) -> Vec<ObservedJob>,
        now: i64,
        phase: Phase,
        creates: &'static [&'static str],
        deletes: &'static [DeleteReason],
        /// Steps whose Jobs are stopped at their timeout (and kept).
        stops: &'static [&'static str],
        executed: &'static [&'static str],
        started: &'static [&'static str],
        progress: &'static str,
        message: Option<&'static str>,
        reasons: &'static [&'static str],
    }

    #[test]
    fn planner_rules() {
        use DeleteReason::*;
        let cases = [
            Case {
                name: "a new workflow starts its roots",
                workflow: diamond().build(),
                jobs: |_| vec![],
                now: 0,
                phase: Phase::Started,
                creates: &["a"],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &["a"],
                progress: "0/4",
                message: None,
                reasons: &["StepsStarted"],
            },
            Case {
                name: "every root starts at once",
                workflow: WorkFlow::test("w")
                    .step("x", &[])
                    .step("y", &[])
                    .step("z", &["x"])
                    .build(),
                jobs: |_| vec![],
                now: 0,
                phase: Phase::Started,
                creates: &["x", "y"],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &["x", "y"],
                progress: "0/3",
                message: None,
                reasons: &["StepsStarted"],
            },
            Case {
                name: "an unknown dependency fails the workflow naming both steps",
                workflow: WorkFlow::test("w").step("a", &["nope"]).build(),
                jobs: |_| vec![],
                now: 0,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &[],
                progress: "0/1",
                message: Some("invalid workflow: step \"a\" depends on unknown step \"nope\""),
                reasons: &["InvalidSpec"],
            },
            Case {
                name: "a cycle fails the workflow naming its path",
                workflow: WorkFlow::test("w")
                    .step("a", &["c"])
                    .step("b", &["a"])
                    .step("c", &["b"])
                    .build(),
                jobs: |_| vec![],
                now: 0,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &[],
                progress: "0/3",
                message: Some("invalid workflow: dependency cycle: a -> b -> c -> a"),
                reasons: &["InvalidSpec"],
            },
            Case {
                name: "a duplicate step name fails the workflow",
                workflow: WorkFlow::test("w").step("a", &[]).step("a", &[]).build(),
                jobs: |_| vec![],
                now: 0,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &[],
                progress: "0/2",
                message: Some("invalid workflow: step name \"a\" is used more than once"),
                reasons: &["InvalidSpec"],
            },
            Case {
                name: "a succeeded job is executed and releases its dependents",
                workflow: running(diamond().build()),
                jobs: |w| Jobs::of(w).succeeded("a").build(),
                now: 1,
                phase: Phase::Started,
                creates: &["b", "c"],
                deletes: &[],
                stops: &[],
                executed: &["a"],
                started: &["b", "c"],
                progress: "1/4",
                message: None,
                reasons: &[],
            },
            Case {
                name: "a step waits for all its dependencies",
                workflow: running(diamond().build()),
                jobs: |w| {
                    Jobs::of(w)
                        .succeeded("a")
                        .succeeded("b")
                        .active("c", at(1))
                        .build()
                },
                now: 2,
                phase: Phase::Started,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &["a", "b"],
                started: &["c"],
                progress: "2/4",
                message: None,
                reasons: &[],
            },
            Case {
                name: "all steps executed completes the workflow",
                workflow: running(diamond().build()),
                jobs: |w| {
                    Jobs::of(w)
                        .succeeded("a")
                        .succeeded("b")
                        .succeeded("c")
                        .succeeded("d")
                        .build()
                },
                now: 3,
                phase: Phase::Completed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &["a", "b", "c", "d"],
                started: &[],
                progress: "4/4",
                message: Some("all 4 steps succeeded"),
                reasons: &["AllStepsSucceeded"],
            },
            Case {
                name: "a failed job fails the workflow and stops running steps (failFast)",
                workflow: running(diamond().build()),
                jobs: |w| {
                    Jobs::of(w)
                        .succeeded("a")
                        .failed(
                            "b",
                            "BackoffLimitExceeded",
                            "Job has reached the specified backoff limit",
                        )
                        .active("c", at(1))
                        .build()
                },
                now: 2,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[WorkflowFailed],
                stops: &[],
                executed: &["a"],
                started: &[],
                progress: "1/4",
                message: Some(
                    "step b failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
                ),
                reasons: &["StepFailed"],
            },
            Case {
                name: "without failFast independent steps keep running and starting",
                workflow: running(
                    WorkFlow::test("w")
                        .fail_fast(false)
                        .step("a", &[])
                        .step("b", &["a"])
                        .step("x", &[])
                        .step("y", &["x"])
                        .build(),
                ),
                jobs: |w| {
                    Jobs::of(w)
                        .failed("a", "BackoffLimitExceeded", "")
                        .succeeded("x")
                        .build()
                },
                now: 2,
                phase: Phase::Started,
                creates: &["y"],
                deletes: &[],
                stops: &[],
                executed: &["x"],
                started: &["y"],
                progress: "1/4",
                message: Some(
                    "step a failed: BackoffLimitExceeded; waiting for running steps to finish",
                ),
                reasons: &[],
            },
            Case {
                name: "without failFast the workflow fails once nothing can run",
                workflow: running(
                    WorkFlow::test("w")
                        .fail_fast(false)
                        .step("a", &[])
                        .step("b", &["a"])
                        .step("x", &[])
                        .build(),
                ),
                jobs: |w| {
                    Jobs::of(w)
                        .failed("a", "BackoffLimitExceeded", "")
                        .succeeded("x")
                        .build()
                },
                now: 2,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &["x"],
                started: &[],
                progress: "1/3",
                message: Some("step a failed: BackoffLimitExceeded"),
                reasons: &["StepFailed"],
            },
            Case {
                name: "a step running past maxStepTimeout fails the workflow",
                workflow: running(
                    WorkFlow::test("w")
                        .max_step_timeout(5)
                        .step("a", &[])
                        .step("b", &[])
                        .build(),
                ),
                jobs: |w| Jobs::of(w).active("a", at(0)).active("b", at(3)).build(),
                now: 6,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[WorkflowFailed],
                stops: &["a"],
                executed: &[],
                started: &[],
                progress: "0/2",
                message: Some("step a timed out: running for 6s, longer than its timeout of 5s"),
                reasons: &["StepTimedOut"],
            },
            Case {
                name: "without failFast a step past its timeout has its job stopped, not deleted",
                workflow: running(
                    WorkFlow::test("w")
                        .fail_fast(false)
                        .max_step_timeout(5)
                        .step("a", &[])
                        .step("b", &[])
                        .step("c", &["a"])
                        .build(),
                ),
                jobs: |w| Jobs::of(w).active("a", at(0)).active("b", at(3)).build(),
                now: 6,
                phase: Phase::Started,
                creates: &[],
                deletes: &[],
                stops: &["a"],
                executed: &[],
                started: &["b"],
                progress: "0/3",
                message: Some(
                    "step a timed out: running for 6s, longer than its timeout of 5s; waiting for running steps to finish",
                ),
                reasons: &[],
            },
            Case {
                name: "a job stopped at its timeout is reported as recorded then, however late",
                workflow: running(
                    WorkFlow::test("w")
                        .max_step_timeout(5)
                        .step("a", &[])
                        .build(),
                ),
                jobs: |w| {
                    timed_out(
                        Jobs::of(w).active("a", at(0)).build(),
                        "a",
                        "running for 6s, longer than its timeout of 5s",
                    )
                },
                now: 600,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &[],
                progress: "0/1",
                message: Some("step a timed out: running for 6s, longer than its timeout of 5s"),
                reasons: &["StepTimedOut"],
            },
            Case {
                name: "a step's own timeout overrides maxStepTimeout",
                workflow: running(
                    WorkFlow::test("w")
                        .max_step_timeout(5)
                        .step("a", &[])
                        .timeout(100)
                        .build(),
                ),
                jobs: |w| Jobs::of(w).active("a", at(0)).build(),
                now: 99,
                phase: Phase::Started,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &["a"],
                progress: "0/1",
                message: None,
                reasons: &[],
            },
            Case {
                name: "a job killed by its deadline is reported as a timeout",
                workflow: running(
                    WorkFlow::test("w")
                        .max_step_timeout(2)
                        .step("a", &[])
                        .build(),
                ),
                jobs: |w| {
                    Jobs::of(w)
                        .failed(
                            "a",
                            DEADLINE_EXCEEDED,
                            "Job was active longer than specified deadline",
                        )
                        .build()
                },
                now: 3,
                phase: Phase::Failed,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &[],
                progress: "0/1",
                message: Some("step a timed out: its Job exceeded its deadline of 2s"),
                reasons: &["StepTimedOut"],
            },
            Case {
                name: "parallelism caps the running steps",
                workflow: running(
                    WorkFlow::test("w")
                        .parallelism(2)
                        .step("a", &[])
                        .step("b", &[])
                        .step("c", &[])
                        .step("d", &[])
                        .build(),
                ),
                jobs: |w| Jobs::of(w).succeeded("a").active("b", at(0)).build(),
                now: 1,
                phase: Phase::Started,
                creates: &["c"],
                deletes: &[],
                stops: &[],
                executed: &["a"],
                started: &["b", "c"],
                progress: "1/4",
                message: None,
                reasons: &[],
            },
            Case {
                name: "jobs of another run are deleted and ignored",
                workflow: running(diamond().build()),
                jobs: |w| {
                    Jobs::of(w)
                        .run("0ld")
                        .succeeded("a")
                        .active("b", at(0))
                        .build()
                },
                now: 1,
                phase: Phase::Started,
                creates: &["a"],
                deletes: &[OldRun, OldRun],
                stops: &[],
                executed: &[],
                started: &["a"],
                progress: "0/4",
                message: None,
                reasons: &[],
            },
            Case {
                name: "a running job that is being deleted is neither timed out nor deleted again",
                workflow: running(
                    WorkFlow::test("w")
                        .max_step_timeout(1)
                        .step("a", &[])
                        .build(),
                ),
                jobs: |w| Jobs::of(w).active("a", at(0)).deleting().build(),
                now: 10,
                phase: Phase::Started,
                creates: &[],
                deletes: &[],
                stops: &[],
                executed: &[],
                started: &["a"],
                progress: "0/1",
                message: None,
                reasons: &[],
            },
        ];
        for case in cases {
            let jobs = (case.jobs)(&case.workflow);
            let plan = plan(&case.workflow, &jobs, at(case.now));
            let name = case.name;
            let new = plan
                .status
                .clone()
                .or(case.workflow.status.clone())
                .unwrap();
            assert_eq!(new.workflow_status, Some(case.phase), "{name}");
            assert_eq!(creates(&plan), case.creates, "{name}");
            let deleted: Vec<_> = deletes(&plan).into_iter().map(|(_, r)| r).collect();
            assert_eq!(deleted, case.deletes, "{name}");
            let stopped: Vec<&str> = stops(&plan).into_iter().map(|(j, _)| j).collect();
            let want: Vec<String> = case
                .stops
                .iter()
                .map(|step| job_name(&case.workflow, step))
                .collect();
            assert_eq!(stopped, want, "{name}");
            assert_eq!(new.executed, case.executed, "{name}");
            assert_eq!(new.started, case.started, "{name}");
            assert_eq!(new.progress.as_deref(), Some(case.progress), "{name}");
            assert_eq!(new.message.as_deref(), case.message, "{name}");
            assert_eq!(reasons(&plan), case.reasons, "{name}");
            assert_eq!(new.run.as_deref(), Some(plan.run.as_str()), "{name}");
            assert_eq!(new.observed_generation, Some(1), "{name}");
        }
    }

    #[test]
    fn created_jobs_are_named_deterministically() {
        let wf = diamond().build();
        let plan = plan(&wf, &[], at(0));
        assert_eq!(
            plan.actions,
            [Action::CreateJob {
                step: "a".into(),
                job_name: job_name(&wf, "a"),
                retry: 0,
                exit: None,
                inputs: Default::default(),
                instance: Default::default(),
            }]
        );
    }

    #[test]
    fn events_say_from_to_and_why() {
        let wf = running(WorkFlow::test("w").step("a", &[]).build());
        let plan = plan(
            &wf,
            &Jobs::of(&wf)
                .failed("a", "BackoffLimitExceeded", "")
                .build(),
            at(1),
        );
        assert_eq!(plan.events.len(), 1);
        assert_eq!(
            plan.events[0].message,
            "Started -> Failed: step a failed: BackoffLimitExceeded"
        );
        assert_eq!(plan.events[0].transition.reason(), "StepFailed");
        let first = super::plan(
            &WorkFlow::test("w").step("a", &[]).step("b", &[]).build(),
            &[],
            at(0),
        );
        assert_eq!(first.events[0].message, "Created -> Started: starting a, b");
    }

    #[test]
    fn bug1_completed_workflow_is_never_timed_out() {
        let wf = running(
            WorkFlow::test("w")
                .max_step_timeout(1)
                .step("a", &[])
                .build(),
        );
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let done = plan(&wf, &jobs, at(0));
        let completed = written(wf, &done);
        assert_eq!(
            completed.status.as_ref().unwrap().workflow_status,
            Some(Phase::Completed)
        );
        // Even a stray running Job of the same run, far past any timeout, changes nothing.
        let stray = Jobs::of(&completed).active("a", at(0)).build();
        for jobs in [jobs, stray] {
            let later = plan(&completed, &jobs, at(10_000));
            assert_eq!(later.status, None);
            assert!(
                later.events.is_empty() && later.actions.is_empty(),
                "{later:?}"
            );
            assert_eq!(later.next_timeout_at, None);
            assert_eq!(next_timeout_at(&completed, &jobs), None);
        }
    }

    #[test]
    fn bug2_max_step_timeout_minus_one_never_times_out() {
        let before = running(
            WorkFlow::test("w")
                .max_step_timeout(5)
                .step("a", &[])
                .build(),
        );
        let jobs = Jobs::of(&before).active("a", at(0)).build();
        assert_eq!(jobs[0].active_deadline_seconds, Some(5));
        // The user sets maxStepTimeout to -1 while `a` runs: same run, new generation.
        let mut after = before.clone();
        after.spec.max_step_timeout = UNLIMITED;
        after.metadata.generation = Some(2);
        let plan = plan(&after, &jobs, at(86_400));
        let status = status(&plan);
        assert_eq!(status.workflow_status, Some(Phase::Started));
        assert_eq!(status.observed_generation, Some(2));
        assert!(plan.events.is_empty());
        // The Job's own deadline is lifted too, or Kubernetes would still kill it at 5s.
        assert_eq!(
            plan.actions,
            [Action::SetJobDeadline {
                job_name: jobs[0].name.clone(),
                active_deadline_seconds: None
            }]
        );
        assert_eq!(plan.next_timeout_at, None);
        assert_eq!(next_timeout_at(&after, &jobs), None);
    }

    #[test]
    fn raising_max_step_timeout_applies_to_running_steps() {
        let before = running(
            WorkFlow::test("w")
                .max_step_timeout(5)
                .step("a", &[])
                .build(),
        );
        let jobs = Jobs::of(&before).active("a", at(0)).build();
        let mut after = before.clone();
        after.spec.max_step_timeout = 50;
        let plan = plan(&after, &jobs, at(10));
        assert!(plan.events.is_empty(), "{plan:?}");
        assert_eq!(
            plan.actions,
            [Action::SetJobDeadline {
                job_name: jobs[0].name.clone(),
                active_deadline_seconds: Some(50)
            }]
        );
        assert_eq!(plan.next_timeout_at, Some(at(50)));
    }

    #[test]
    fn next_timeout_is_the_earliest_running_deadline() {
        let wf = running(
            WorkFlow::test("w")
                .max_step_timeout(30)
                .step("a", &[])
                .step("b", &[])
                .timeout(10)
                .step("c", &[])
                .timeout(-1)
                .build(),
        );
        let jobs = Jobs::of(&wf)
            .active("a", at(0))
            .active("b", at(5))
            .active("c", at(0))
            .build();
        let plan = plan(&wf, &jobs, at(6));
        assert_eq!(plan.next_timeout_at, Some(at(15)));
        assert_eq!(next_timeout_at(&wf, &jobs), Some(at(15)));
        // At the deadline exactly the step has timed out: the timer never fires too early.
        let due = super::plan(&wf, &jobs, at(15));
        assert_eq!(status(&due).workflow_status, Some(Phase::Failed));
    }

    /// The bug: the Job of a step the timer found past its timeout was deleted, and it was the
    /// only record of the timeout; the next plan found the step without a Job and started it
    /// again.
    #[test]
    fn with_fail_fast_false_a_timed_out_step_is_not_started_again_on_the_next_plan() {
        let wf = running(
            WorkFlow::test("w")
                .fail_fast(false)
                .step("a", &[])
                .timeout(5)
                .step("b", &[])
                .step("c", &["a"])
                .build(),
        );
        let mut jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
        let first = plan(&wf, &jobs, at(6));
        let why = "running for 6s, longer than its timeout of 5s";
        assert_eq!(
            first.actions,
            [Action::TimeOutJob {
                job_name: jobs[0].name.clone(),
                why: why.into()
            }]
        );
        let waiting = format!("step a timed out: {why}; waiting for running steps to finish");
        assert_eq!(status(&first).message.as_deref(), Some(waiting.as_str()));
        apply(&mut jobs, &wf, &first, at(6));
        let recorded = written(wf.clone(), &first);

        // The timer's next ticks; an operator restarted after the status write, or before it
        // (only the stopped Job records the timeout then): the step is neither started again
        // nor stopped twice, nothing else changes, and the timer waits for b's deadline.
        for (workflow, now) in [(&recorded, 7), (&recorded, 59), (&wf, 7)] {
            let next = plan(workflow, &jobs, at(now));
            assert!(next.actions.is_empty(), "at {now}: {next:?}");
            let status = next.status.as_ref().or(workflow.status.as_ref()).unwrap();
            assert_eq!(status.workflow_status, Some(Phase::Started), "at {now}");
            assert_eq!(
                status.message.as_deref(),
                Some(waiting.as_str()),
                "at {now}"
            );
            assert_eq!(status.started, ["b"], "at {now}");
            assert_eq!(next.next_timeout_at, Some(at(60)), "at {now}");
            assert_eq!(next_timeout_at(workflow, &jobs), Some(at(60)), "at {now}");
        }
        assert_eq!(plan(&recorded, &jobs, at(7)).status, None);

        // Once b finishes the workflow fails with the timeout; a's dependent never started.
        jobs[1].state = JobState::Succeeded;
        let last = plan(&recorded, &jobs, at(20));
        assert!(last.actions.is_empty(), "{last:?}");
        assert_eq!(reasons(&last), ["StepTimedOut"]);
        let failed = status(&last);
        assert_eq!(
            failed.message.as_deref(),
            Some(format!("step a timed out: {why}").as_str())
        );
        assert_eq!(failed.executed, ["b"]);
        let condition = failed
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_FAILED);
        assert_eq!(condition.map(|c| c.reason.as_str()), Some("StepTimedOut"));
    }

    #[test]
    fn with_fail_fast_a_timed_out_job_is_stopped_and_kept_and_the_others_deleted() {
        let wf = running(
            WorkFlow::test("w")
                .step("a", &[])
                .timeout(5)
                .step("b", &[])
                .build(),
        );
        let mut jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
        let first = plan(&wf, &jobs, at(6));
        assert_eq!(
            stops(&first),
            [(
                jobs[0].name.as_str(),
                "running for 6s, longer than its timeout of 5s"
            )]
        );
        assert_eq!(
            deletes(&first),
            [(jobs[1].name.as_str(), DeleteReason::WorkflowFailed)]
        );
        assert_eq!(phase(&first), Some(Phase::Failed));
        apply(&mut jobs, &wf, &first, at(6));
        // The failed workflow leaves its stopped Job alone: it is no longer running.
        let failed = written(wf, &first);
        let later = plan(&failed, &jobs, at(7));
        assert!(
            later.actions.is_empty() && later.status.is_none(),
            "{later:?}"
        );
    }

    #[test]
    fn bug3_two_jobs_finishing_together_both_count() {
        let wf = running(diamond().build());
        let a_done = written(
            wf.clone(),
            &plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1)),
        );
        // b and c complete in the same instant; each handler may see both. Neither is lost.
        let jobs = Jobs::of(&a_done)
            .succeeded("a")
            .succeeded("b")
            .succeeded("c")
            .build();
        let plan = plan(&a_done, &jobs, at(2));
        assert_eq!(status(&plan).executed, ["a", "b", "c"]);
        assert_eq!(creates(&plan), ["d"]);
    }

    #[test]
    fn state_comes_from_jobs_not_from_status_lists() {
        let mut wf = running(diamond().build());
        let stale = wf.status.as_mut().unwrap();
        stale.executed = vec!["a".into(), "b".into(), "c".into(), "d".into()];
        stale.started = vec![];
        let plan = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1));
        assert_eq!(status(&plan).executed, ["a"]);
        assert_eq!(status(&plan).workflow_status, Some(Phase::Started));
        assert_eq!(creates(&plan), ["b", "c"]);
    }

    #[test]
    fn bug4_completions_while_the_operator_was_down_are_recorded() {
        // The status still says only `a` started; meanwhile a, b and c finished.
        let wf = running(diamond().build());
        assert_eq!(wf.status.as_ref().unwrap().started, ["a"]);
        let jobs = Jobs::of(&wf)
            .succeeded("a")
            .succeeded("b")
            .succeeded("c")
            .build();
        let plan = plan(&wf, &jobs, at(100));
        assert_eq!(status(&plan).executed, ["a", "b", "c"]);
        assert_eq!(creates(&plan), ["d"]);
    }

    #[test]
    fn bug5_spec_update_before_any_step_finished_restarts() {
        let old = running(diamond().build());
        let old_jobs = Jobs::of(&old).active("a", at(0)).build();
        let mut new = old.clone();
        new.spec.containers[0].image = "busybox:1.37".into();
        new.metadata.generation = Some(2);
        let plan = plan(&new, &old_jobs, at(5));
        assert_eq!(reasons(&plan), ["SpecChanged", "StepsStarted"]);
        assert_eq!(
            deletes(&plan),
            [(old_jobs[0].name.as_str(), DeleteReason::OldRun)]
        );
        assert_eq!(creates(&plan), ["a"]);
        let new_name = job_name(&new, "a");
        assert_ne!(new_name, old_jobs[0].name);
        let status = status(&plan);
        assert_eq!(status.run, Some(names::run_id(&new.spec)));
        assert_eq!(
            (status.executed.len(), status.started.as_slice()),
            (0, &["a".to_string()][..])
        );
        assert_eq!(status.message, None);
    }

    #[test]
    fn bug5_late_completion_of_an_old_job_is_ignored() {
        let old = running(diamond().build());
        let mut new = old.clone();
        new.spec.containers[0].command = Some(vec!["true".into()]);
        let new = written(new.clone(), &plan(&new, &[], at(1)));
        // The old run's `a` completes late, next to the new run's running `a`.
        let mut jobs = Jobs::of(&old).succeeded("a").build();
        jobs[0].deleting = true;
        jobs.extend(Jobs::of(&new).active("a", at(1)).build());
        let plan = plan(&new, &jobs, at(2));
        assert_eq!(plan.status, None, "nothing changed: {plan:?}");
        assert!(plan.actions.is_empty(), "{plan:?}");
    }

    #[test]
    fn spec_change_restarts_a_terminal_workflow() {
        for outcome in ["succeeded", "failed"] {
            let wf = running(WorkFlow::test("w").step("a", &[]).build());
            let jobs = match outcome {
                "succeeded" => Jobs::of(&wf).succeeded("a").build(),
                _ => Jobs::of(&wf)
                    .failed("a", "BackoffLimitExceeded", "")
                    .build(),
            };
            let done = written(wf.clone(), &plan(&wf, &jobs, at(1)));
            let mut changed = done.clone();
            changed
                .spec
                .containers
                .push(crate::workflow::testing::step("b", &["a"]));
            let plan = plan(&changed, &jobs, at(2));
            assert_eq!(reasons(&plan), ["SpecChanged", "StepsStarted"], "{outcome}");
            assert_eq!(creates(&plan), ["a"], "{outcome}");
            assert_eq!(
                status(&plan).workflow_status,
                Some(Phase::Started),
                "{outcome}"
            );
            assert!(
                status(&plan).conditions.iter().all(|c| c.status == "False"),
                "{outcome}"
            );
        }
    }

    #[test]
    fn limits_change_of_a_terminal_workflow_changes_only_observed_generation() {
        let wf = running(WorkFlow::test("w").step("a", &[]).build());
        let jobs = Jobs::of(&wf)
            .failed("a", "BackoffLimitExceeded", "")
            .build();
        let failed = written(wf.clone(), &plan(&wf, &jobs, at(1)));
        let mut changed = failed.clone();
        changed.spec.max_step_timeout = 600;
        changed.spec.containers[0].retries = Some(3);
        changed.metadata.generation = Some(2);
        let plan = plan(&changed, &jobs, at(2));
        let mut want = failed.status.clone().unwrap();
        want.observed_generation = Some(2);
        assert_eq!(plan.status, Some(want));
        assert!(
            plan.events.is_empty() && plan.actions.is_empty(),
            "{plan:?}"
        );
    }

    #[test]
    fn bug6_missing_message_is_absent_not_type_text() {
        let wf = running(diamond().build());
        let status = wf.status.as_ref().unwrap();
        assert_eq!(status.message, None);
        let json = serde_json::to_value(status).unwrap();
        assert!(json.get("message").is_none(), "{json}");
        assert!(!json.to_string().contains("Optional"), "{json}");
    }

    #[test]
    fn bug9_failed_workflow_deletes_its_running_jobs() {
        let wf = running(WorkFlow::test("w").step("a", &[]).step("b", &[]).build());
        let jobs = Jobs::of(&wf)
            .failed("a", "BackoffLimitExceeded", "")
            .active("b", at(0))
            .build();
        let first = plan(&wf, &jobs, at(1));
        assert_eq!(
            deletes(&first),
            [(jobs[1].name.as_str(), DeleteReason::WorkflowFailed)]
        );
        // If that delete was lost, the failed workflow deletes the Job again, once.
        let failed = written(wf, &first);
        let again = plan(&failed, &jobs, at(2));
        assert_eq!(
            deletes(&again),
            [(jobs[1].name.as_str(), DeleteReason::WorkflowFailed)]
        );
        assert_eq!(again.status, None);
        let mut gone = jobs.clone();
        gone[1].deleting = true;
        assert!(plan(&failed, &gone, at(3)).actions.is_empty());
    }

    #[test]
    fn bug10_retried_plan_creates_each_job_once() {
        let wf = diamond().build();
        let first = plan(&wf, &[], at(0));
        // The Job was created but the status write failed; the retry sees the Job.
        let jobs = Jobs::of(&wf).active("a", at(0)).build();
        let retry = plan(&wf, &jobs, at(1));
        assert!(creates(&retry).is_empty(), "{retry:?}");
        assert_eq!(reasons(&retry), ["StepsStarted"]);
        assert_eq!(retry.status.as_ref().unwrap().started, ["a"]);
        // The create itself failed: the retry asks for the very same Job name again.
        let again = plan(&wf, &[], at(1));
        assert_eq!(again.actions, first.actions);
    }

    #[test]
    fn plan_is_idempotent_once_carried_out() {
        let wf = running(diamond().build());
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let first = plan(&wf, &jobs, at(1));
        let wf = written(wf, &first);
        let jobs = Jobs::of(&wf)
            .succeeded("a")
            .active("b", at(1))
            .active("c", at(1))
            .build();
        let second = plan(&wf, &jobs, at(2));
        assert_eq!(second.status, None, "{second:?}");
        assert!(
            second.actions.is_empty() && second.events.is_empty(),
            "{second:?}"
        );
    }

    #[test]
    fn finished_is_true_once_the_workflow_ended_either_way() {
        let finished = |s: &WorkFlowStatus| {
            let c = s.conditions.iter().find(|c| c.type_ == CONDITION_FINISHED);
            c.map(|c| (c.status.clone(), c.reason.clone()))
        };
        let wf = running(WorkFlow::test("w").step("a", &[]).build());
        assert_eq!(
            finished(wf.status.as_ref().unwrap()),
            Some(("False".into(), "Started".into()))
        );
        let done = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(5));
        assert_eq!(
            finished(status(&done)),
            Some(("True".into(), "AllStepsSucceeded".into()))
        );
        let failed = plan(
            &wf,
            &Jobs::of(&wf)
                .failed("a", "BackoffLimitExceeded", "")
                .build(),
            at(5),
        );
        assert_eq!(
            finished(status(&failed)),
            Some(("True".into(), "StepFailed".into()))
        );
    }

    #[test]
    fn conditions_follow_the_phase_and_keep_their_transition_time() {
        let wf = running(WorkFlow::test("w").step("a", &[]).step("b", &["a"]).build());
        let started = wf.status.as_ref().unwrap();
        let condition = |s: &WorkFlowStatus, t: &str| {
            s.conditions.iter().find(|c| c.type_ == t).cloned().unwrap()
        };
        assert_eq!(condition(started, CONDITION_COMPLETED).status, "False");
        assert_eq!(condition(started, CONDITION_COMPLETED).reason, "Started");
        assert_eq!(
            condition(started, CONDITION_FAILED).last_transition_time,
            Time(at(0))
        );

        let step = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(5));
        assert_eq!(
            condition(status(&step), CONDITION_FAILED).last_transition_time,
            Time(at(0))
        );
        assert_eq!(
            status(&step).status_changed,
            started.status_changed,
            "phase unchanged"
        );

        let done = plan(
            &wf,
            &Jobs::of(&wf).succeeded("a").succeeded("b").build(),
            at(9),
        );
        let completed = condition(status(&done), CONDITION_COMPLETED);
        assert_eq!(
            (completed.status.as_str(), completed.reason.as_str()),
            ("True", "AllStepsSucceeded")
        );
        assert_eq!(completed.last_transition_time, Time(at(9)));
        assert_eq!(
            status(&done).status_changed.as_deref(),
            Some("2026-01-01T00:00:09Z")
        );

        let failed = plan(
            &wf,
            &Jobs::of(&wf)
                .failed("a", "BackoffLimitExceeded", "")
                .build(),
            at(9),
        );
        let failed = condition(status(&failed), CONDITION_FAILED);
        assert_eq!(
            (failed.status.as_str(), failed.reason.as_str()),
            ("True", "StepFailed")
        );
        assert_eq!(failed.message, "step a failed: BackoffLimitExceeded");
    }

    #[test]
    fn lost_status_write_after_first_jobs_still_records_a_legal_path() {
        // No status at all, yet the step already finished: Created -> Started -> Completed.
        let wf = WorkFlow::test("w").step("a", &[]).build();
        let plan = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1));
        assert_eq!(reasons(&plan), ["StepsStarted", "AllStepsSucceeded"]);
        assert_eq!(phase(&plan), Some(Phase::Completed));
    }

    /// `(name, phase, reason, message, exit code)` of a `status.steps` entry.
    type Entry<'a> = (
        &'a str,
        StepPhase,
        Option<&'a str>,
        Option<&'a str>,
        Option<i32>,
    );

    /// Each `status.steps` entry of the plan's status.
    fn step_entries(plan: &Plan) -> Vec<Entry<'_>> {
        status(plan)
            .steps
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.phase,
                    s.reason.as_deref(),
                    s.message.as_deref(),
                    s.exit_code,
                )
            })
            .collect()
    }

    #[test]
    fn status_steps_list_running_and_created_steps_with_their_jobs_and_nothing_else() {
        let wf = running(diamond().build());
        let plan = plan(
            &wf,
            &Jobs::of(&wf).succeeded("a").active("b", at(1)).build(),
            at(2),
        );
        assert_eq!(
            step_entries(&plan),
            [
                ("b", StepPhase::Running, None, None, None),
                ("c", StepPhase::Running, None, None, None)
            ]
        );
        let jobs: Vec<_> = status(&plan).steps.iter().map(|s| s.job.clone()).collect();
        assert_eq!(
            jobs,
            [Some(job_name(&wf, "b")), Some(job_name(&wf, "c"))],
            "the Job of a step being created is named too"
        );
        // A running step's entry holds nothing its Job's start changes: no time, no attempts.
        assert!(
            status(&plan)
                .steps
                .iter()
                .all(|s| s.started_at.is_none() && s.attempts.is_none())
        );
        let done = plan_done(&wf);
        assert!(status(&done).steps.is_empty(), "{:?}", status(&done).steps);
    }

    fn plan_done(wf: &WorkFlow) -> Plan {
        let jobs = Jobs::of(wf)
            .succeeded("a")
            .succeeded("b")
            .succeeded("c")
            .succeeded("d")
            .build();
        plan(wf, &jobs, at(3))
    }

    #[test]
    fn a_failed_step_is_recorded_with_its_exit_code_and_the_running_ones_as_stopped() {
        let wf = running(diamond().build());
        let mut jobs = Jobs::of(&wf)
            .succeeded("a")
            .exited("b", 2, "Error", "disk full")
            .active("c", at(1))
            .build();
        jobs[1].attempts = 3;
        jobs[1].start_time = Some(at(1));
        jobs[1].finished_at = Some(at(4));
        let plan = plan(&wf, &jobs, at(5));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some("step b failed: exit code 2: disk full")
        );
        assert_eq!(
            step_entries(&plan),
            [
                (
                    "b",
                    StepPhase::Failed,
                    Some("Error"),
                    Some("disk full"),
                    Some(2)
                ),
                (
                    "c",
                    StepPhase::Failed,
                    Some(REASON_STOPPED),
                    Some("stopped: the workflow failed"),
                    None
                )
            ]
        );
        let b = &status(&plan).steps[0];
        assert_eq!(
            (b.started_at.clone(), b.finished_at.clone(), b.attempts),
            (Some(Time(at(1))), Some(Time(at(4))), Some(3))
        );
        assert_eq!(b.job.as_deref(), Some(job_name(&wf, "b").as_str()));
    }

    #[test]
    fn failure_messages_name_the_exit_code_and_the_containers_own_reason() {
        let wf = running(WorkFlow::test("w").step("x", &[]).build());
        let cases = [
            (
                Jobs::of(&wf).exited("x", 2, "Error", "").build(),
                "step x failed: exit code 2",
            ),
            (
                Jobs::of(&wf)
                    .exited("x", 128, "StartError", "exec: \"nosuch\": not found")
                    .build(),
                "step x failed: exit code 128: StartError: exec: \"nosuch\": not found",
            ),
            (
                Jobs::of(&wf).exited("x", 137, "OOMKilled", "").build(),
                "step x failed: exit code 137: OOMKilled",
            ),
            (
                Jobs::of(&wf)
                    .failed(
                        "x",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )
                    .build(),
                "step x failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
            ),
        ];
        for (jobs, want) in cases {
            assert_eq!(
                status(&plan(&wf, &jobs, at(1))).message.as_deref(),
                Some(want)
            );
        }
    }

    #[test]
    fn a_timed_out_step_is_recorded_as_timed_out() {
        let wf = running(
            WorkFlow::test("w")
                .fail_fast(false)
                .step("a", &[])
                .timeout(5)
                .step("b", &[])
                .build(),
        );
        let jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
        let plan = plan(&wf, &jobs, at(6));
        assert_eq!(
            step_entries(&plan),
            [
                (
                    "a",
                    StepPhase::TimedOut,
                    Some(REASON_TIMED_OUT),
                    Some("running for 6s, longer than its timeout of 5s"),
                    None
                ),
                ("b", StepPhase::Running, None, None, None)
            ]
        );
    }

    /// A workflow whose step `db` (timeout 60s, startTimeout 10s) has a Job created at 0 whose
    /// pod has not started.
    fn not_started() -> (WorkFlow, Vec<ObservedJob>) {
        let wf = running(
            WorkFlow::test("w")
                .start_timeout(10)
                .step("db", &[])
                .timeout(60)
                .step("after", &["db"])
                .build(),
        );
        let jobs = Jobs::of(&wf).pending("db", at(0)).build();
        (wf, jobs)
    }

    #[test]
    fn a_pod_not_started_waits_until_its_start_deadline_which_the_timer_is_set_for() {
        let (wf, jobs) = not_started();
        let plan = plan(&wf, &jobs, at(9));
        assert_eq!(plan.status, None, "nothing changed");
        assert_eq!(plan.next_timeout_at, Some(at(10)));
        assert_eq!(next_timeout_at(&wf, &jobs), Some(at(10)));
        // Once the pod started, only the step's own timeout is left.
        let mut started = jobs.clone();
        started[0].pod_started = true;
        assert_eq!(
            super::plan(&wf, &started, at(9)).next_timeout_at,
            Some(at(60))
        );
        assert_eq!(
            super::plan(&wf, &started, at(30)).status,
            None,
            "no failure"
        );
    }

    #[test]
    fn a_pod_not_started_by_its_start_deadline_fails_the_step_with_its_cause() {
        let (wf, jobs) = not_started();
        let why = "CreateContainerConfigError: secret \"creds\" not found";
        // Past the deadline, until the handler read the pods, the step waits.
        let unread = plan(&wf, &jobs, at(10));
        assert_eq!(unread.status, None, "nothing changed");
        assert!(unread.actions.is_empty(), "{:?}", unread.actions);
        let read = Jobs::of(&wf)
            .pending("db", at(0))
            .start_failure(why)
            .build();
        let plan = plan(&wf, &read, at(10));
        assert_eq!(phase(&plan), Some(Phase::Failed));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some("step db cannot start: CreateContainerConfigError: secret \"creds\" not found")
        );
        assert_eq!(reasons(&plan), ["StepFailed"]);
        assert_eq!(
            plan.actions,
            [Action::FailStart {
                job_name: job_name(&wf, "db"),
                why: why.into()
            }]
        );
        assert_eq!(
            step_entries(&plan),
            [(
                "db",
                StepPhase::Failed,
                Some(REASON_CANNOT_START),
                Some(why),
                None
            )]
        );
        // Before the deadline, a cause read early (a lagging status) decides nothing.
        assert_eq!(super::plan(&wf, &read, at(9)).status, None);
    }

    #[test]
    fn a_pod_not_started_by_the_steps_own_timeout_fails_for_its_cause_not_as_timed_out() {
        let wf = running(
            WorkFlow::test("w")
                .start_timeout(300)
                .step("x", &[])
                .timeout(5)
                .build(),
        );
        let why = "FailedCreate: Error creating: serviceaccount \"runner\" not found";
        let jobs = Jobs::of(&wf).pending("x", at(0)).start_failure(why).build();
        let plan = plan(&wf, &jobs, at(5));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some(format!("step x cannot start: {why}").as_str())
        );
        // A suspended Job has no pod to start: it times out, whatever was read...
        let mut queued = jobs.clone();
        queued[0].suspended = true;
        let plan = super::plan(&wf, &queued, at(5));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some("step x timed out: running for 5s, longer than its timeout of 5s")
        );
        // ...unless it waits for Kueue to admit it: no run timeout before (issue 17).
        let mut kueue = wf.clone();
        kueue.spec.queue_name = Some("q".into());
        let plan = super::plan(&kueue, &queued, at(5));
        assert_eq!(status(&plan).message, None);
        assert_eq!(status(&plan).steps[0].phase, StepPhase::Queued);
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        // Without a cause (the pods could not be read) it times out as before.
        let plan = super::plan(&wf, &Jobs::of(&wf).pending("x", at(0)).build(), at(5));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some("step x timed out: running for 5s, longer than its timeout of 5s")
        );
    }

    #[test]
    fn a_job_recorded_as_not_started_keeps_the_step_failed_after_a_restart() {
        let (wf, mut jobs) = not_started();
        let why = "ErrImagePull: pull access denied";
        jobs[0].state = JobState::CannotStart { why: why.into() };
        let plan = plan(&wf, &jobs, at(11));
        assert_eq!(
            status(&plan).message.as_deref(),
            Some("step db cannot start: ErrImagePull: pull access denied")
        );
        assert!(plan.actions.is_empty(), "the Job is stopped already");
    }

    #[test]
    fn a_job_the_api_server_refused_fails_its_step_as_the_status_records_it() {
        let wf = running(diamond().fail_fast(false).step("x", &[]).build());
        let message = r#"Job.batch "diamond-a" is invalid: spec.template.spec.volumes[0].name: Invalid value: "Bad_Name""#;
        let mut recorded = wf.clone();
        let stored = recorded.status.as_mut().unwrap();
        stored.steps.retain(|s| s.name != "a");
        stored
            .steps
            .push(refused_step_status("a", &job_name(&wf, "a"), message));
        let jobs = Jobs::of(&wf).active("x", at(0)).build();
        let plan = plan(&recorded, &jobs, at(1));
        assert!(
            creates(&plan).is_empty(),
            "a is never created again: {:?}",
            plan.actions
        );
        let want = format!("step a failed: the API server refused its Job: {message}");
        assert_eq!(
            status(&plan).message,
            Some(format!("{want}; waiting for running steps to finish"))
        );
        assert_eq!(
            step_entries(&plan)[0],
            (
                "a",
                StepPhase::Failed,
                Some(REASON_JOB_REFUSED),
                Some(message),
                None
            )
        );
        // Once nothing runs, the workflow fails with it.
        let done = Jobs::of(&wf).succeeded("x").build();
        let failed = super::plan(&written(recorded, &plan), &done, at(2));
        assert_eq!(phase(&failed), Some(Phase::Failed));
        assert_eq!(status(&failed).message.as_deref(), Some(want.as_str()));
        // A refusal recorded for another run (another Job name) is forgotten.
        let mut other_run = wf.clone();
        other_run.status.as_mut().unwrap().steps =
            vec![refused_step_status("a", "diamond-a-old", message)];
        assert!(
            super::plan(&other_run, &[], at(1))
                .status
                .is_none_or(|s| s.message.is_none())
        );
    }

    #[test]
    fn status_from_another_operator_is_adopted_without_a_restart() {
        let wf = WorkFlow::test("w")
            .step("a", &[])
            .status(WorkFlowStatus {
                workflow_status: Some(Phase::Completed),
                ..Default::default()
            })
            .build();
        let plan = plan(&wf, &[], at(1));
        assert!(
            plan.events.is_empty() && plan.actions.is_empty(),
            "{plan:?}"
        );
        assert_eq!(phase(&plan), Some(Phase::Completed));
        assert_eq!(status(&plan).run, Some(names::run_id(&wf.spec)));
    }

    /// What a simulated cluster does with a plan's actions: creates Jobs, deletes them, stops
    /// timed-out ones (as `jobs::observe_job` then reads them).
    fn apply(jobs: &mut Vec<ObservedJob>, wf: &WorkFlow, plan: &Plan, now: Timestamp) {
        for action in &plan.actions {
            match action {
                Action::CreateJob {
                    step,
                    job_name,
                    retry,
                    ..
                } => {
                    assert!(
                        !jobs.iter().any(|j| j.name == *job_name),
                        "duplicate create {job_name}"
                    );
                    let mut new = Jobs::of(wf).retry(*retry).active(step, now).build();
                    assert_eq!(new[0].name, *job_name);
                    jobs.append(&mut new);
                }
                Action::DeleteJob { job_name, .. } => jobs.retain(|j| j.name != *job_name),
                Action::TimeOutJob { job_name, why } => {
                    let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                    job.state = JobState::TimedOut { why: why.clone() };
                }
                Action::FailStart { job_name, why } => {
                    let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                    job.state = JobState::CannotStart { why: why.clone() };
                }
                Action::SetJobDeadline { .. } => {}
            }
        }
    }

    /// The exit steps' Jobs the plan creates, with what they are told.
    fn exit_creates(plan: &Plan) -> Vec<(&str, &ExitEnv)> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::CreateJob {
                    step,
                    exit: Some(exit),
                    ..
                } => Some((step.as_str(), exit)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn suspend_holds_new_steps_while_the_running_one_finishes_and_resume_starts_them() {
        let wf = running(diamond().build());
        let wf = WorkFlow {
            spec: diamond().suspend(true).build().spec,
            ..wf
        };
        let jobs = Jobs::of(&wf).active("a", at(0)).build();
        let plan1 = plan(&wf, &jobs, at(1));
        assert!(creates(&plan1).is_empty());
        assert_eq!(phase(&plan1), Some(Phase::Suspended));
        assert_eq!(reasons(&plan1), ["Suspended"]);
        assert_eq!(
            status(&plan1).message.as_deref(),
            Some("suspended (spec.suspend): no new step starts")
        );
        let wf = written(wf, &plan1);
        // `a` finishes while suspended: `b` and `c` are ready, and wait.
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let plan2 = plan(&wf, &jobs, at(2));
        assert!(creates(&plan2).is_empty());
        assert!(plan2.events.is_empty());
        let wf = written(wf, &plan2);
        assert_eq!(wf.status.as_ref().unwrap().executed, ["a"]);
        let wf = WorkFlow {
            spec: diamond().build().spec,
            ..wf
        };
        let plan3 = plan(&wf, &jobs, at(3));
        assert_eq!(creates(&plan3), ["b", "c"]);
        assert_eq!(reasons(&plan3), ["Resumed"]);
        assert_eq!(phase(&plan3), Some(Phase::Started));
        assert_eq!(status(&plan3).message, None);
    }

    #[test]
    fn a_workflow_created_suspended_starts_nothing_until_resumed() {
        let wf = diamond().suspend(true).build();
        let plan1 = plan(&wf, &[], at(0));
        assert!(creates(&plan1).is_empty());
        assert_eq!(reasons(&plan1), ["Suspended"]);
        assert_eq!(
            plan1.events[0].message,
            "Created -> Suspended: spec.suspend is true: no new step starts"
        );
        let wf = written(wf, &plan1);
        let wf = WorkFlow {
            spec: diamond().build().spec,
            ..wf
        };
        let plan2 = plan(&wf, &[], at(1));
        assert_eq!(creates(&plan2), ["a"]);
        assert_eq!(reasons(&plan2), ["Resumed"]);
    }

    #[test]
    fn stop_lets_the_running_step_finish_starts_nothing_new_and_ends_failed() {
        let wf = running(diamond().build());
        let wf = WorkFlow {
            spec: diamond().shutdown(Shutdown::Stop).build().spec,
            ..wf
        };
        let plan1 = plan(&wf, &Jobs::of(&wf).active("a", at(0)).build(), at(1));
        assert!(creates(&plan1).is_empty() && deletes(&plan1).is_empty());
        assert_eq!(phase(&plan1), Some(Phase::Started));
        assert_eq!(
            status(&plan1).message.as_deref(),
            Some("stopping (spec.shutdown: Stop): waiting for running steps to finish")
        );
        let wf = written(wf, &plan1);
        let plan2 = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(2));
        assert!(creates(&plan2).is_empty());
        assert_eq!(reasons(&plan2), ["Stopped"]);
        assert_eq!(phase(&plan2), Some(Phase::Failed));
        let st = status(&plan2);
        assert_eq!(
            st.message.as_deref(),
            Some("stopped (spec.shutdown: Stop): 3 steps never ran")
        );
        let failed = st
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_FAILED)
            .unwrap();
        assert_eq!(
            (failed.status.as_str(), failed.reason.as_str()),
            ("True", "Stopped")
        );
        assert_eq!(st.executed, ["a"]);
    }

    #[test]
    fn stop_runs_the_exit_steps_once_nothing_runs_then_ends() {
        let spec = |b: crate::workflow::testing::WorkFlowBuilder| b.exit_step("notify", &[]);
        let wf = running(spec(diamond()).build());
        let wf = WorkFlow {
            spec: spec(diamond()).shutdown(Shutdown::Stop).build().spec,
            ..wf
        };
        let plan1 = plan(&wf, &Jobs::of(&wf).active("a", at(0)).build(), at(1));
        assert!(exit_creates(&plan1).is_empty(), "not while a step runs");
        let wf = written(wf, &plan1);
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let plan2 = plan(&wf, &jobs, at(2));
        let want = ExitEnv {
            status: Phase::Failed,
            failed_steps: vec![],
        };
        assert_eq!(exit_creates(&plan2), [("notify", &want)]);
        assert_eq!(reasons(&plan2), ["ExitStepsStarted"]);
        assert_eq!(phase(&plan2), Some(Phase::Started));
        assert_eq!(
            status(&plan2).message.as_deref(),
            Some("running exit steps: stopped (spec.shutdown: Stop): 3 steps never ran")
        );
        let wf = written(wf, &plan2);
        let jobs = Jobs::of(&wf).succeeded("a").succeeded("notify").build();
        let plan3 = plan(&wf, &jobs, at(3));
        assert!(creates(&plan3).is_empty());
        assert_eq!(reasons(&plan3), ["Stopped"]);
        assert_eq!(phase(&plan3), Some(Phase::Failed));
        assert_eq!(status(&plan3).executed, ["a", "notify"]);
        assert_eq!(status(&plan3).progress.as_deref(), Some("2/5"));
    }

    #[test]
    fn terminate_deletes_the_running_jobs_at_once_and_runs_no_exit_step() {
        let spec = |b: crate::workflow::testing::WorkFlowBuilder| b.exit_step("notify", &[]);
        let wf = running(spec(diamond()).build());
        let wf = WorkFlow {
            spec: spec(diamond()).shutdown(Shutdown::Terminate).build().spec,
            ..wf
        };
        let jobs = Jobs::of(&wf)
            .succeeded("a")
            .active("b", at(1))
            .active("c", at(1))
            .build();
        let plan1 = plan(&wf, &jobs, at(2));
        assert_eq!(
            deletes(&plan1),
            [
                (job_name(&wf, "b").as_str(), DeleteReason::Terminated),
                (job_name(&wf, "c").as_str(), DeleteReason::Terminated)
            ]
        );
        assert!(creates(&plan1).is_empty());
        assert_eq!(reasons(&plan1), ["Terminated"]);
        let st = status(&plan1);
        assert_eq!(st.workflow_status, Some(Phase::Failed));
        assert_eq!(
            st.message.as_deref(),
            Some("terminated (spec.shutdown: Terminate)")
        );
        let halted: Vec<(&str, Option<&str>)> = st
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.reason.as_deref()))
            .collect();
        assert_eq!(
            halted,
            [
                ("b", Some(REASON_TERMINATED)),
                ("c", Some(REASON_TERMINATED))
            ]
        );
        // Nothing more happens once the Jobs are gone.
        let wf = written(wf, &plan1);
        let plan2 = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(3));
        assert!(plan2.actions.is_empty() && plan2.events.is_empty());
    }

    #[test]
    fn retry_reruns_only_the_steps_that_did_not_succeed_in_jobs_of_new_names() {
        let wf = running(diamond().fail_fast(false).build());
        let jobs = Jobs::of(&wf)
            .succeeded("a")
            .exited("b", 2, "Error", "")
            .succeeded("c")
            .build();
        let failed = plan(&wf, &jobs, at(5));
        assert_eq!(phase(&failed), Some(Phase::Failed));
        let wf = written(wf, &failed);
        let wf = WorkFlow {
            spec: diamond().fail_fast(false).retry(1).build().spec,
            ..wf
        };
        let retried = plan(&wf, &jobs, at(6));
        assert_eq!(reasons(&retried), ["Retried", "StepsStarted"]);
        assert_eq!(creates(&retried), ["b"]);
        assert!(
            deletes(&retried).is_empty(),
            "the succeeded steps' Jobs stay"
        );
        let Action::CreateJob {
            job_name: new_name,
            retry,
            ..
        } = &retried.actions[0]
        else {
            panic!("{:?}", retried.actions)
        };
        assert_eq!(*retry, 1);
        assert_ne!(*new_name, job_name(&wf, "b"), "a Job name is never reused");
        let st = status(&retried);
        assert_eq!(
            (st.workflow_status, st.retry),
            (Some(Phase::Started), Some(1))
        );
        assert_eq!(st.executed, ["a", "c"]);
        assert_eq!(st.message, None);
        // The retried step succeeds; `d` follows, in retry 1 too.
        let wf = written(wf, &retried);
        let mut jobs = jobs;
        jobs.extend(Jobs::of(&wf).retry(1).succeeded("b").build());
        let next = plan(&wf, &jobs, at(7));
        assert_eq!(creates(&next), ["d"]);
        let wf = written(wf, &next);
        jobs.extend(Jobs::of(&wf).retry(1).succeeded("d").build());
        let done = plan(&wf, &jobs, at(8));
        assert_eq!(phase(&done), Some(Phase::Completed));
        // Planning again changes nothing: the retry is not started twice.
        let wf = written(wf, &done);
        assert_eq!(plan(&wf, &jobs, at(9)).status, None);
    }

    #[test]
    fn a_retry_of_a_completed_workflow_runs_nothing() {
        let wf = running(WorkFlow::test("w").step("a", &[]).build());
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let wf = written(wf.clone(), &plan(&wf, &jobs, at(1)));
        let wf = WorkFlow {
            spec: WorkFlow::test("w").step("a", &[]).retry(1).build().spec,
            ..wf
        };
        let again = plan(&wf, &jobs, at(2));
        assert!(again.actions.is_empty() && again.events.is_empty());
    }

    #[test]
    fn exit_steps_run_after_success_and_after_failure_told_how_it_ended() {
        let wf = |b: crate::workflow::testing::WorkFlowBuilder| {
            running(
                b.step("a", &[])
                    .step("b", &[])
                    .exit_step("notify", &[])
                    .exit_step("last", &["notify"])
                    .build(),
            )
        };
        // After success.
        let ok = wf(WorkFlow::test("ok"));
        let jobs = Jobs::of(&ok).succeeded("a").succeeded("b").build();
        let plan1 = plan(&ok, &jobs, at(1));
        let completed = ExitEnv {
            status: Phase::Completed,
            failed_steps: vec![],
        };
        assert_eq!(exit_creates(&plan1), [("notify", &completed)]);
        assert_eq!(phase(&plan1), Some(Phase::Started));
        let ok = written(ok, &plan1);
        let jobs2 = Jobs::of(&ok)
            .succeeded("a")
            .succeeded("b")
            .succeeded("notify")
            .build();
        let plan2 = plan(&ok, &jobs2, at(2));
        assert_eq!(exit_creates(&plan2), [("last", &completed)]);
        assert!(plan2.events.is_empty(), "ExitStepsStarted only once");
        let ok = written(ok, &plan2);
        let jobs3 = Jobs::of(&ok)
            .succeeded("a")
            .succeeded("b")
            .succeeded("notify")
            .succeeded("last")
            .build();
        let plan3 = plan(&ok, &jobs3, at(3));
        assert_eq!(reasons(&plan3), ["AllStepsSucceeded"]);
        assert_eq!(
            status(&plan3).message.as_deref(),
            Some("all 2 steps succeeded")
        );

        // After failure: the exit steps learn which step failed; the workflow stays failed
        // even though they succeed.
        let bad = wf(WorkFlow::test("bad"));
        let jobs = Jobs::of(&bad)
            .exited("a", 3, "Error", "")
            .active("b", at(0))
            .build();
        let plan1 = plan(&bad, &jobs, at(1));
        let failed = ExitEnv {
            status: Phase::Failed,
            failed_steps: vec!["a".into()],
        };
        assert_eq!(exit_creates(&plan1), [("notify", &failed)]);
        assert_eq!(
            deletes(&plan1),
            [(job_name(&bad, "b").as_str(), DeleteReason::WorkflowFailed)]
        );
        let bad = written(bad, &plan1);
        let jobs = Jobs::of(&bad)
            .exited("a", 3, "Error", "")
            .succeeded("notify")
            .succeeded("last")
            .build();
        let end = plan(&bad, &jobs, at(2));
        assert_eq!(reasons(&end), ["StepFailed"]);
        assert_eq!(
            status(&end).message.as_deref(),
            Some("step a failed: exit code 3")
        );
    }

    #[test]
    fn a_suspended_workflow_whose_steps_ended_waits_to_run_its_exit_steps() {
        let build = |suspend| {
            WorkFlow::test("w")
                .step("a", &[])
                .exit_step("notify", &[])
                .suspend(suspend)
                .build()
        };
        let wf = running(build(false));
        let wf = WorkFlow {
            spec: build(true).spec,
            ..wf
        };
        let jobs = Jobs::of(&wf).succeeded("a").build();
        let held = plan(&wf, &jobs, at(1));
        assert!(creates(&held).is_empty());
        assert_eq!(
            phase(&held),
            Some(Phase::Suspended),
            "not ended: the exit step has not run"
        );
        let wf = written(wf, &held);
        let wf = WorkFlow {
            spec: build(false).spec,
            ..wf
        };
        let resumed = plan(&wf, &jobs, at(2));
        assert_eq!(creates(&resumed), ["notify"]);
        assert_eq!(reasons(&resumed), ["Resumed", "ExitStepsStarted"]);
    }

    #[test]
    fn a_failing_exit_step_fails_a_workflow_whose_steps_succeeded() {
        let wf = running(
            WorkFlow::test("w")
                .step("a", &[])
                .exit_step("notify", &[])
                .exit_step("after", &["notify"])
                .build(),
        );
        let jobs = Jobs::of(&wf)
            .succeeded("a")
            .exited("notify", 1, "Error", "")
            .build();
        let end = plan(&wf, &jobs, at(1));
        assert!(
            creates(&end).is_empty(),
            "an exit step after a failed one does not run"
        );
        assert_eq!(phase(&end), Some(Phase::Failed));
        assert_eq!(
            status(&end).message.as_deref(),
            Some("exit step notify failed: exit code 1")
        );
    }

    #[test]
    fn a_retry_runs_the_exit_steps_again() {
        let build = |retry| {
            WorkFlow::test("w")
                .step("a", &[])
                .exit_step("notify", &[])
                .retry(retry)
                .build()
        };
        let wf = running(build(0));
        let jobs = Jobs::of(&wf)
            .exited("a", 1, "Error", "")
            .succeeded("notify")
            .build();
        let wf = written(wf.clone(), &plan(&wf, &jobs, at(1)));
        assert_eq!(
            wf.status.as_ref().unwrap().workflow_status,
            Some(Phase::Failed)
        );
        let wf = WorkFlow {
            spec: build(1).spec,
            ..wf
        };
        let retried = plan(&wf, &jobs, at(2));
        assert_eq!(creates(&retried), ["a"]);
        let wf = written(wf, &retried);
        let mut jobs = jobs;
        jobs.extend(Jobs::of(&wf).retry(1).succeeded("a").build());
        let exit = plan(&wf, &jobs, at(3));
        let completed = ExitEnv {
            status: Phase::Completed,
            failed_steps: vec![],
        };
        assert_eq!(exit_creates(&exit), [("notify", &completed)]);
    }

    #[rstest::rstest]
    #[case::depends_on_a_step(&["a"], "exit step \"notify\" depends on step \"a\": exit steps run after every step, and may depend only on other exit steps")]
    #[case::unknown(&["nope"], "onExit: step \"notify\" depends on unknown step \"nope\"")]
    fn an_exit_step_that_names_a_step_is_refused_naming_both(
        #[case] deps: &[&str],
        #[case] why: &str,
    ) {
        let wf = WorkFlow::test("w")
            .step("a", &[])
            .exit_step("notify", deps)
            .build();
        let first = plan(&wf, &[], at(0));
        assert!(first.actions.is_empty());
        assert_eq!(phase(&first), Some(Phase::Failed));
        assert_eq!(
            status(&first).message.as_deref(),
            Some(format!("invalid workflow: {why}").as_str())
        );
    }

    proptest! {

        /// Any sequence of run-control edits (suspend, resume, stop, terminate, retry) and Job
        /// outcomes makes only legal transitions (the planner would panic otherwise), never
        /// creates a Job that exists, and ends every workflow: nothing waits forever.
        #[test]
        fn run_control_in_any_order_is_legal_and_always_ends(
            deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 1..8),
            exits in 0usize..3,
            ops in proptest::collection::vec((0u8..8, any::<prop::sample::Index>()), 1..60),
        ) {
            let mut builder = WorkFlow::test("rc").fail_fast(false);
            for (i, ds) in deps.iter().enumerate() {
                let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                builder = builder.step(&format!("s{i}"), &refs);
            }
            for e in 0..exits {
                builder = builder.exit_step(&format!("e{e}"), &[]);
            }
            let mut wf = builder.build();
            let mut jobs: Vec<ObservedJob> = Vec::new();
            let mut tick = 0;
            let mut step = |wf: &mut WorkFlow, jobs: &mut Vec<ObservedJob>| {
                tick += 1;
                let plan = plan(wf, jobs, at(tick));
                apply(jobs, wf, &plan, at(tick));
                *wf = written(wf.clone(), &plan);
            };
            for (op, pick) in ops {
                step(&mut wf, &mut jobs);
                let running: Vec<usize> = jobs.iter().enumerate()
                    .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                    .map(|(i, _)| i)
                    .collect();
                let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
                match op {
                    0 => wf.spec.suspend = true,
                    1 => wf.spec.suspend = false,
                    2 => wf.spec.shutdown = Some(Shutdown::Stop),
                    3 => wf.spec.shutdown = Some(Shutdown::Terminate),
                    4 if phase == Some(Phase::Failed) => {
                        wf.spec.retry += 1;
                        wf.spec.shutdown = None;
                    }
                    5 | 6 if !running.is_empty() => {
                        let r = running[pick.index(running.len())];
                        jobs[r].state = if op == 5 {
                            JobState::Succeeded
                        } else {
                            JobState::Failed { reason: "Error".into(), message: String::new(), exit_code: Some(1) }
                        };
                    }
                    _ => {}
                }
            }
            // Let it end: resume, and finish whatever runs, successfully.
            wf.spec.suspend = false;
            for _ in 0..100 {
                step(&mut wf, &mut jobs);
                let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
                if phase.is_some_and(Phase::is_terminal) {
                    break;
                }
                for job in jobs.iter_mut().filter(|j| matches!(j.state, JobState::Active { .. })) {
                    job.state = JobState::Succeeded;
                }
            }
            let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
            prop_assert!(phase.is_some_and(Phase::is_terminal), "never ended: {:?}", wf.status);
        }
        #[test]
        fn random_workflows_run_each_step_once_after_its_dependencies_to_completion(
            deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 1..25),
            parallelism in proptest::option::of(1i32..4),
            finish_order in proptest::collection::vec(any::<prop::sample::Index>(), 200),
        ) {
            let mut builder = WorkFlow::test("p");
            for (i, ds) in deps.iter().enumerate() {
                let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                builder = builder.step(&format!("s{i}"), &refs);
            }
            if let Some(p) = parallelism {
                builder = builder.parallelism(p);
            }
            let mut wf = builder.build();
            let mut jobs: Vec<ObservedJob> = Vec::new();
            let mut finished: Vec<String> = Vec::new();
            let mut picks = finish_order.iter().cycle();
            for tick in 0..500 {
                let now = at(tick);
                let plan = plan(&wf, &jobs, now);
                apply(&mut jobs, &wf, &plan, now);
                wf = written(wf, &plan);
                let status = wf.status.as_ref().unwrap();
                if status.workflow_status == Some(Phase::Completed) {
                    break;
                }
                prop_assert_eq!(status.workflow_status, Some(Phase::Started));
                let running: Vec<usize> = jobs.iter().enumerate()
                    .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                    .map(|(i, _)| i)
                    .collect();
                if let Some(p) = parallelism {
                    prop_assert!(running.len() <= p as usize, "{} running > {}", running.len(), p);
                }
                prop_assert!(!running.is_empty(), "stalled at {:?}", status);
                // Every running step's dependencies finished before it started.
                for &r in &running {
                    let step = wf.spec.containers.iter().find(|s| s.step_name == jobs[r].step).unwrap();
                    for d in &step.depends_on {
                        prop_assert!(finished.contains(d), "{} started before {}", step.step_name, d);
                    }
                }
                let r = running[picks.next().unwrap().index(running.len())];
                jobs[r].state = JobState::Succeeded;
                finished.push(jobs[r].step.clone());
            }
            let status = wf.status.as_ref().unwrap();
            prop_assert_eq!(status.workflow_status, Some(Phase::Completed));
            prop_assert_eq!(jobs.len(), deps.len(), "one Job per step");
            prop_assert_eq!(status.progress.clone(), Some(format!("{0}/{0}", deps.len())));
        }

        #[test]
        fn random_failures_end_failed_without_running_dependents_of_the_failed_step(
            deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 2..20),
            fail_fast in any::<bool>(),
            outcomes in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4), 200),
        ) {
            let mut builder = WorkFlow::test("f").fail_fast(fail_fast);
            for (i, ds) in deps.iter().enumerate() {
                let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                builder = builder.step(&format!("s{i}"), &refs);
            }
            let mut wf = builder.build();
            let mut jobs: Vec<ObservedJob> = Vec::new();
            let mut failed: Vec<String> = Vec::new();
            let mut outcomes = outcomes.iter().cycle();
            for tick in 0..500 {
                let now = at(tick);
                let plan = plan(&wf, &jobs, now);
                // No step whose dependency failed is ever started.
                for action in &plan.actions {
                    if let Action::CreateJob { step, .. } = action {
                        let spec = wf.spec.containers.iter().find(|s| s.step_name == *step).unwrap();
                        prop_assert!(spec.depends_on.iter().all(|d| !failed.contains(d)), "{} started after a failed dependency", step);
                        prop_assert!(!fail_fast || failed.is_empty(), "{} started after a failure with failFast", step);
                    }
                }
                apply(&mut jobs, &wf, &plan, now);
                wf = written(wf, &plan);
                let phase = wf.status.as_ref().unwrap().workflow_status.unwrap();
                if phase.is_terminal() {
                    break;
                }
                let running: Vec<usize> = jobs.iter().enumerate()
                    .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                    .map(|(i, _)| i)
                    .collect();
                prop_assert!(!running.is_empty(), "stalled in {}", phase);
                let (pick, outcome) = outcomes.next().unwrap();
                let r = running[pick.index(running.len())];
                if *outcome == 0 {
                    jobs[r].state = JobState::Failed { reason: "BackoffLimitExceeded".into(), message: String::new(), exit_code: None };
                    failed.push(jobs[r].step.clone());
                } else {
                    jobs[r].state = JobState::Succeeded;
                }
            }
            let status = wf.status.as_ref().unwrap();
            let want = if failed.is_empty() { Phase::Completed } else { Phase::Failed };
            prop_assert_eq!(status.workflow_status, Some(want));
            // A failed workflow leaves nothing running.
            prop_assert!(jobs.iter().all(|j| !matches!(j.state, JobState::Active { .. })), "{:?}", jobs);
            if let Some(first) = failed.first().filter(|_| fail_fast) {
                let prefix = format!("step {first} failed");
                prop_assert!(status.message.as_deref().unwrap().starts_with(&prefix));
            }
        }
    }
}
