//! The planner: the pure decision function of the operator, `(workflow, observed Jobs, now) ->
//! actions + status + lifecycle events`. No client, no clock, no I/O.
//!
//! Every pass of the operator's workflow controller (a create, a Job's change, a spec update, a
//! resume, a timer) plans here or in [`crate::incremental`], which follows the same rules: state
//! is derived from the Jobs that exist, never from the status lists, so a lost, duplicate or late
//! event cannot lose a completion or start a step twice. In the controller
//! (`src/controllers/workflow/` of the root crate, where `handlers.rs` runs a pass stage by
//! stage), `memory.rs` prepares the spec once per generation ([`prepare_spec`], a cached
//! [`Compiled`]); `decide.rs` turns the mirror's Jobs into [`ObservedJob`]s (`jobs::observe_job`)
//! and plans incrementally while the kept run state holds, else in full ([`plan_compiled`];
//! [`plan_gated`] behind a [`Gate`], for steps the step queue or a lock holds back or the cache
//! answers); `apply.rs` carries out the [`Action`]s; `record.rs` writes the status when there is
//! one, posts one Event per [`LifecycleEvent`], and keeps [`Plan::next_timeout_at`] in
//! `memory.rs` as the workflow's next wake: the `timeouts` timer (ticking every second) plans
//! a running workflow again only once that deadline, a deferred status write or the 10 s
//! full-reconcile safety net has come.
//!
//! # Cost
//! One call is O(steps + dependencies + jobs): it rebuilds the step states from the Jobs and
//! renders the status lists. [`Compiled`] (the validated DAG and run id, cacheable per
//! `metadata.generation`) removes the DAG build and the run-id hash from that; what is left is a
//! scan of the Jobs and the status. `benches/dag.rs` measures both at 10,000 steps: about
//! 0.5-1.3 ms per completion with a cached [`Compiled`], 6-11 ms without (most of it the run-id
//! hash), on the 2-core build machine. The O(degree) part, which steps a completion releases, is
//! [`crate::dag::Progress`] (tens of nanoseconds).

//!
//! # Stages
//! A plan is made in stages, each a module: `run_control` first (other runs, `spec.retry`,
//! a terminal or invalid workflow), then `observe` (what each Job says of its step),
//! `rules_pass` (the rules on the run's metrics, `spec.rules`: what fires, the parallelism and
//! runs in force), `schedule` (which ready steps start, then the exit steps), `deadlines` (the Jobs'
//! deadlines and the next timer), and `render` (the status and the finished [`Plan`]). The
//! `planner` module holds the state they share; `failure` how a failed step reads, `attempts`
//! what becomes of a failed attempt (`retryStrategy`), and `data` what a step reads of the
//! steps before it (`observe` decides with it which steps may start). Each imports by name what
//! it uses, so that an import circle between stages is one `scripts/module-cycles.py` refuses.

mod attempts;
mod data;
mod deadlines;
mod failure;
mod observe;
mod planner;
mod render;
mod rules_metrics;
mod rules_pass;
mod run_control;
mod schedule;
mod suspend;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::crd::{
    Kinds, Step, StepKind, StepPhase, StepStatus, WorkFlow, WorkFlowSpec, WorkFlowStatus,
};
use crate::dag::{Dag, DagError};
use crate::data_flow::{self, DataFlow};
use crate::fan_out::Instance;
use crate::lifecycle::{Phase, Transition};
use crate::names;
use crate::outputs::{Inputs, Outputs};
use crate::rules::Rules;
use crate::template;

use deadlines::deadline;
use planner::Planner;

pub use crate::failure_cause::DEADLINE_EXCEEDED;
pub use deadlines::{
    POD_DEADLINE_SLACK_SECONDS, backstop_deadline_seconds, job_deadline_seconds, next_timeout_at,
};
pub use schedule::free_slots;

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
    /// Its step's attempt (`retryStrategy`; label `workflow.crd.com/attempt`, 0 if absent).
    pub attempt: u32,
    /// A cached step's key (annotation `workflow.crd.com/cache-key`).
    pub cache_key: Option<String>,
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
    /// The operator stopped the Job because its workflow stopped its running steps (a failure
    /// with failFast, `spec.shutdown: Terminate`, its deadline, a rule): annotation
    /// `workflow.crd.com/stopped`. Whatever its conditions say since (still stopping, or failed by
    /// the stop), its step is as the status recorded it when it was stopped, and a retry runs it
    /// again.
    pub stopped: bool,
    /// The IP of a daemon step's pod, recorded on the Job by the handler once the pod was
    /// ready (annotation `workflow.crd.com/daemoned`): the step is done while the Job runs.
    pub daemoned: Option<IpAddr>,
    /// A pod of the Job is ready (`status.ready` above 0): a daemon step's pod may be read.
    pub ready: bool,
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

/// Why the workflow stops a step's running Job ([`Action::StopJob`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The workflow failed (failFast, its deadline, a rule, an invalid spec) while it ran.
    WorkflowFailed,
    /// `spec.shutdown: Terminate`: running steps are stopped at once.
    Terminated,
    /// The workflow ended while a daemon step ran on: a daemon lives as long as its workflow.
    DaemonEnded,
}

impl StopReason {
    /// What the stop annotation of the kept Job says (`jobs::stop_mark`).
    pub fn why(self) -> &'static str {
        match self {
            StopReason::WorkflowFailed => "the workflow failed while it ran",
            StopReason::Terminated => "spec.shutdown: Terminate",
            StopReason::DaemonEnded => "a daemon step stops when its workflow ends",
        }
    }
}

/// What an exit step's Job is told of how the workflow ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitEnv {
    /// `Completed` or `Failed` (`WORKFLOW_STATUS`).
    pub status: Phase,
    /// The steps that failed or timed out, in spec order (`WORKFLOW_FAILED_STEPS`).
    pub failed_steps: Vec<String>,
    /// The same as Argo's `{{workflow.failures}}` (`workflow_failures::json`): the text the
    /// exit steps' `when`s read too.
    pub failures: Arc<str>,
}

/// Something the handler must do, in order. Every action is idempotent: creating an existing
/// Job (deterministic name), deleting a missing one or patching a Job to what it already is is
/// success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the Job of `step` (build it with `jobs::StepJob`, from `retry`, `exit`, `inputs`
    /// and `instance`); `step` is an exit step when `exit` is set.
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
        /// The step's attempt (`retryStrategy`): 0 for the first.
        attempt: u32,
    },
    /// Delete a Job of an earlier run (what runs changed) together with its pods (propagation
    /// policy `Background` or `Foreground`, never `Orphan`): its run is gone.
    DeleteJob {
        /// The Job's name.
        job_name: String,
    },
    /// Stop a running Job of this run and keep it, as [`Action::TimeOutJob`] stops one, because
    /// the workflow stops its steps: marked stopped (`jobs::stop_mark`, read back as
    /// [`ObservedJob::stopped`]), its running pod given a deadline already past, which the
    /// kubelet enforces by stopping it and keeping it with its log (or, with retries left or no
    /// pod running, a Job deadline already past, the Job controller deleting its pods); a
    /// suspended Job, which has no pod, is deleted. `logs` shows what it did, and
    /// `spec.podCleanup` decides when its pod goes, as for any step that ended.
    StopJob {
        /// The Job's name.
        job_name: String,
        /// Why.
        reason: StopReason,
    },
    /// Patch a running Job's `spec.activeDeadlineSeconds` (`None`: remove it) to the backstop
    /// for its step's effective timeout (`backstop_deadline_seconds`), because the timeout
    /// changed (or an older operator gave the Job the timeout itself); otherwise the Job would
    /// still be killed at the old deadline.
    SetJobDeadline {
        /// The Job's name.
        job_name: String,
        /// The new deadline in seconds, or `None` for unlimited.
        active_deadline_seconds: Option<i64>,
    },
    /// Stop the running Job of a step that ran past its timeout, and keep it as the record that
    /// the step timed out: an annotation saying `why` (`jobs::time_out_mark`), and its running
    /// pod given a deadline already past (`jobs::stop_pod_patch`: the kubelet stops the pod and
    /// keeps it, with its log, and the pod's failure fails the Job), or, for a Job with retries
    /// left or no running pod, a Job deadline already past (`jobs::time_out_patch`: the Job
    /// controller deletes its pods and fails it). Not a delete: the state
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
    /// End the wait of a suspend step whose `duration` has passed: annotate its Job resumed
    /// (`jobs::resume_patch`), the record that the step succeeded (read back as
    /// [`JobState::Succeeded`]). The Job stays suspended: it never runs a pod.
    ResumeJob {
        /// The Job's name.
        job_name: String,
        /// When the step's duration ended, recorded as when it finished.
        at: Timestamp,
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
    /// When the plan must next be made again for time alone: the first of a running step's
    /// timeout or start deadline, a queued Job's queue timeout, a retry's back-off and the
    /// workflow's `activeDeadlineSeconds`; `None` when none can come (a terminal workflow). The
    /// operator's timer wakes the workflow then.
    pub next_timeout_at: Option<Timestamp>,
    /// The rules that fired (`spec.rules`), one message each, for an Event `RuleFired`; the
    /// status records them, and must be written before the actions they change.
    pub fired: Vec<String>,
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
    /// Which policies needing the operator's I/O the spec uses.
    pub policies: Policies,
    /// The first field the spec sets that the incremental planner does not follow
    /// (`fields::unfollowed`): such a workflow is planned in full at every pass.
    pub unfollowed: Option<&'static str>,
    /// The compiled `spec.rules` (empty unless all is valid).
    pub rules: Arc<Rules>,
    /// The kind of each step and exit step ([`StepKind::of`]), by index in its DAG.
    pub kinds: Kinds,
    /// The template each step calls (`template::called_template`), by the step's name without
    /// its items' indices (`outer/inner` for `outer[1]/inner`), for a spec with exit steps and
    /// templates: `{{workflow.failures}}` names them, and only the spec as written says
    /// ([`Compiled::with_failure_templates`]).
    pub failure_templates: Option<Arc<BTreeMap<String, String>>>,
}

/// Which run policies that need the operator's I/O a spec uses, found once per spec so that a
/// pass of a workflow without them does not scan its steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policies {
    /// `synchronization`, on the workflow or any step.
    pub locks: bool,
    /// `cache` on any step.
    pub cache: bool,
    /// Input or output artifacts on any step: the workflow needs an artifact repository.
    pub artifacts: bool,
    /// An interactive step (its own `interactive`, or the workflow's).
    pub interactive: bool,
}

impl Policies {
    /// The policies `spec`, whose steps are of `kinds`, uses.
    pub fn of(spec: &WorkFlowSpec, kinds: &Kinds) -> Policies {
        let steps = || spec.containers.iter().chain(&spec.on_exit);
        Policies {
            locks: spec.synchronization.is_some() || steps().any(|s| s.synchronization.is_some()),
            cache: steps().any(|s| s.cache.is_some()),
            artifacts: steps().any(crate::agent::has_artifacts),
            interactive: kinds.any_interactive(),
        }
    }
}

impl Compiled {
    /// Hashes and validates `spec`.
    pub fn new(spec: &WorkFlowSpec) -> Compiled {
        let kinds = Kinds::of(spec);
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
            .map(|dag| data_flow::check(spec, &kinds, dag, exit.as_ref()));
        let (dag, flow) = match flow {
            Some(Err(error)) => (Err(error), DataFlow::default()),
            Some(Ok(flow)) => (
                dag,
                DataFlow {
                    hooks_after: template::hooks::after(&spec.containers),
                    ..flow
                },
            ),
            None => (dag, DataFlow::default()),
        };
        let (dag, rules) = match dag {
            Ok(dag) if !spec.rules.is_empty() => {
                let steps: Vec<&str> = (0..dag.len()).map(|i| dag.name(i)).collect();
                match Rules::compile(spec, &steps) {
                    Ok(rules) => (Ok(dag), rules),
                    Err(problems) => (Err(DagError::Rules(problems)), Rules::default()),
                }
            }
            dag => (dag, Rules::default()),
        };
        let dag = match dag {
            Ok(dag) => crate::custom_metrics::check_spec(spec)
                .map(|()| dag)
                .map_err(DagError::Metrics),
            error => error,
        };
        Compiled {
            run: names::run_id(spec),
            dag,
            exit,
            flow,
            policies: Policies::of(spec, &kinds),
            unfollowed: crate::fields::unfollowed(spec),
            rules: Arc::new(rules),
            kinds,
            failure_templates: None,
        }
    }

    /// With [`Compiled::failure_templates`] from `written` (the workflow `spec` was expanded
    /// from) when `spec` has exit steps.
    pub fn with_failure_templates(self, written: &WorkFlow, spec: &WorkFlowSpec) -> Compiled {
        if spec.on_exit.is_empty() {
            return self;
        }
        let called = (spec.containers.iter()).filter_map(|step| {
            let template = template::called_template(written, &step.step_name)?;
            Some((without_indices(&step.step_name), template))
        });
        Compiled {
            failure_templates: Some(Arc::new(called.collect())),
            ..self
        }
    }

    /// The template the failed step `name` (a display name: `build[3]`) called, as
    /// [`Compiled::failure_templates`] records it.
    pub fn failure_template(&self, name: &str) -> Option<String> {
        let templates = self.failure_templates.as_deref()?;
        templates.get(&without_indices(name)).cloned()
    }

    /// The step of `spec` (which this was made from) named `name`, an exit step when `exit`,
    /// with its index in its DAG: found by the DAG's index, as a planned
    /// [`Action::CreateJob`] names it.
    pub fn step<'s>(
        &self,
        spec: &'s WorkFlowSpec,
        name: &str,
        exit: bool,
    ) -> Option<(usize, &'s Step)> {
        let (dag, steps) = if exit {
            (self.exit.as_ref(), &spec.on_exit)
        } else {
            (self.dag.as_ref().ok(), &spec.containers)
        };
        let index = dag?.index_of(name)?;
        Some((index, steps.get(index)?))
    }

    /// The kind of the step at `index` (of the exit steps when `exit`), as [`Compiled::step`]
    /// found it.
    ///
    /// # Panics
    /// When there is no such step: `index` must come from [`Compiled::step`].
    pub fn kind(&self, index: usize, exit: bool) -> StepKind {
        self.kinds.of_steps(exit)[index]
    }

    /// A spec refused before its DAG was built (its templates do not expand): `problem` fails
    /// the workflow.
    pub fn refused(spec: &WorkFlowSpec, problem: String) -> Compiled {
        let kinds = Kinds::of(spec);
        Compiled {
            run: names::run_id(spec),
            dag: Err(DagError::Template(problem)),
            exit: None,
            flow: DataFlow::default(),
            policies: Policies::of(spec, &kinds),
            unfollowed: crate::fields::unfollowed(spec),
            rules: Arc::default(),
            kinds,
            failure_templates: None,
        }
    }
}

/// `workflow` as the planner sees it, and its [`Compiled`]: templates and parameters expanded
/// into plain steps (a copy, made only when the spec uses them; `None` otherwise). A spec that
/// does not expand compiles to its problems, which fail the workflow.
pub fn prepare(workflow: &WorkFlow) -> (Option<WorkFlow>, Compiled) {
    let (spec, compiled) = prepare_spec(workflow);
    let expanded = spec.map(|spec| WorkFlow {
        metadata: workflow.metadata.clone(),
        spec,
        status: workflow.status.clone(),
    });
    (expanded, compiled)
}

/// `name` without the items' indices of its segments: `outer/inner` for `outer[1]/inner`.
fn without_indices(name: &str) -> String {
    let segments = name.split('/').map(|s| s.split('[').next().unwrap_or(s));
    segments.collect::<Vec<_>>().join("/")
}

/// [`prepare`] giving only the expanded spec.
pub fn prepare_spec(workflow: &WorkFlow) -> (Option<WorkFlowSpec>, Compiled) {
    match template::expand(workflow) {
        Ok(Cow::Borrowed(spec)) => (None, Compiled::new(spec)),
        Ok(Cow::Owned(spec)) => {
            let compiled = Compiled::new(&spec).with_failure_templates(workflow, &spec);
            (Some(spec), compiled)
        }
        Err(problems) => (
            None,
            Compiled::refused(&workflow.spec, problems.to_string()),
        ),
    }
}

/// What the operator would fail `workflow` for at once, every problem: its templates and
/// parameters (with the shared templates its status records), then its DAG, exit steps and
/// data flow. The expanded spec when there is none; `None` when a shared template of `absent`
/// (not at hand: `validate` without its file, a CronWorkFlow before its run reads it) or a
/// ConfigMap key not read yet (the operator reads them when the workflow starts) keeps it from
/// expanding, whose own "not found" is no problem here.
///
/// # Errors
/// Every problem found, each naming its place.
pub fn spec_problems(
    workflow: &WorkFlow,
    absent: &[template::Source],
) -> Result<Option<WorkFlowSpec>, Vec<String>> {
    let spec = match template::expand(workflow) {
        Ok(spec) => spec.into_owned(),
        Err(template::Problems(problems)) => {
            let unread: Vec<String> = absent
                .iter()
                .map(|s| format!("{} not found", s.describe()))
                .collect();
            let problems: Vec<String> = problems
                .into_iter()
                .filter(|p| !unread.iter().any(|u| p.contains(u)))
                .filter(|p| !p.contains(template::config_maps::NOT_READ))
                .collect();
            return if problems.is_empty() {
                Ok(None)
            } else {
                Err(problems)
            };
        }
    };
    match Compiled::new(&spec).dag {
        Ok(_) => Ok(Some(spec)),
        Err(error) => Err(vec![error.to_string()]),
    }
}

/// A gate on starting steps, given to the planner: which of the Jobs it would create may be
/// created now. The operator's built-in queue (`--max-running-steps`) is one; the default
/// admits every Job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gate {
    /// The Jobs, by name, that may be created; `None` admits every one.
    pub admitted: Option<HashSet<String>>,
    /// Why the others wait, shown on their steps.
    pub message: String,
    /// Cache hits (`cache`) the operator found for steps about to start: each is done as its
    /// entry says (`Succeeded`, reason `Cached`), and no Job is created for it.
    pub cached: Vec<StepStatus>,
    /// Where the Jobs created go (`queueScope: Workflow`: the admission's node selectors and
    /// tolerations). The planner leaves it to whoever builds the Jobs.
    pub placement: Option<crate::kueue::workload::Placement>,
    /// The whole run waits (Kueue has not admitted its Workload), saying this: the workflow is
    /// `Queued`, not `Started`, and says so in its message.
    pub run_queued: Option<String>,
}

impl Gate {
    /// A gate that admits only the Jobs named `admitted`; the others wait, saying `message`.
    pub fn admitting(admitted: impl IntoIterator<Item = String>, message: String) -> Self {
        Gate {
            admitted: Some(admitted.into_iter().collect()),
            message,
            cached: Vec::new(),
            placement: None,
            run_queued: None,
        }
    }

    /// A gate that holds back every Job because the whole run waits, saying `message` on the
    /// workflow (phase `Queued`) and on its ready steps.
    pub fn queueing(message: String) -> Self {
        Gate {
            run_queued: Some(message.clone()),
            ..Gate::admitting(std::iter::empty(), message)
        }
    }

    /// A gate admitting only what both `self` and `other` admit, saying both messages.
    pub fn and(self, other: Gate) -> Gate {
        let admitted = match (self.admitted, other.admitted) {
            (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
            (a, b) => a.or(b),
        };
        let message = [self.message, other.message]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let mut cached = self.cached;
        cached.extend(other.cached);
        Gate {
            admitted,
            message,
            cached,
            placement: self.placement.or(other.placement),
            run_queued: self.run_queued.or(other.run_queued),
        }
    }

    /// Whether the Job named `job` may be created now.
    pub fn admits(&self, job: &str) -> bool {
        self.admitted
            .as_ref()
            .is_none_or(|admitted| admitted.contains(job))
    }
}

/// Plans `workflow` given its Jobs (of every run) at time `now`, its templates expanded
/// first ([`prepare`]). See [`plan_compiled`].
pub fn plan(workflow: &WorkFlow, jobs: &[ObservedJob], now: Timestamp) -> Plan {
    let (expanded, compiled) = prepare(workflow);
    plan_compiled(expanded.as_ref().unwrap_or(workflow), &compiled, jobs, now)
}

/// Plans `workflow` with `compiled`, which must have been made from `workflow.spec`.
///
/// # Guarantees
/// - Jobs of another run are deleted and otherwise ignored.
/// - A terminal workflow of the current run is never timed out, never restarted and its phase,
///   message and lists never change; only `observedGeneration` follows the object, and Jobs it
///   left running are stopped (and kept).
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
    plan_gated(workflow, compiled, jobs, now, &Gate::default())
}

/// [`plan_compiled`] behind `gate`: a Job the gate does not admit is not created; its step is
/// `Queued`, with the gate's message, and counts as started for the lifecycle (the workflow is
/// under way, waiting its turn). A gate that holds the whole run ([`Gate::run_queued`]) makes
/// the workflow `Queued` until a later gate lets it through (`Admitted`).
pub fn plan_gated(
    workflow: &WorkFlow,
    compiled: &Compiled,
    jobs: &[ObservedJob],
    now: Timestamp,
    gate: &Gate,
) -> Plan {
    let mut planner = Planner::new(workflow, compiled, now, gate);
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

/// The step status `reason` of a failed attempt waiting for the next (`retryStrategy`).
pub const REASON_BACKING_OFF: &str = "BackingOff";

/// The step status `reason` of a running step stopped because the workflow failed.
pub const REASON_STOPPED: &str = "Stopped";

/// The step status `reason` of a daemon step whose pod was ready: `Succeeded`, running on.
pub const REASON_DAEMONED: &str = "Daemoned";

/// The step status `reason` of a running step stopped by `spec.shutdown: Terminate`.
pub const REASON_TERMINATED: &str = "Terminated";

/// The step status `reason` of a step whose Job the API server refused (422): its entry in the
/// status is the only record, as there is no Job.
pub const REASON_JOB_REFUSED: &str = "JobRefused";

/// The reason of a step with artifacts whose workflow found no artifact repository: its Job
/// is not created.
pub const REASON_NO_ARTIFACT_REPOSITORY: &str = "NoArtifactRepository";

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
pub fn refused_step_status(step: &str, job: &str, reason: &str, message: &str) -> StepStatus {
    StepStatus {
        phase: StepPhase::Failed,
        reason: Some(reason.into()),
        message: Some(message.to_string()),
        attempts: Some(0),
        ..running_step_status(step, job.to_string(), false)
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
        ip: None,
        outputs: BTreeMap::new(),
        items: None,
    }
}

/// Used when a workflow has no status yet.
static NO_STATUS: WorkFlowStatus = WorkFlowStatus {
    workflow_status: None,
    status_changed: None,
    message: None,
    summary: None,
    executed: Vec::new(),
    started: Vec::new(),
    progress: None,
    observed_generation: None,
    run: None,
    conditions: Vec::new(),
    retry: None,
    steps: Vec::new(),
    resolved_templates: Vec::new(),
    resolved_config_map_keys: Vec::new(),
    started_at: None,
    run_number: None,
    run_changed_at: None,
    artifact_repository: None,
    artifacts_deleted_at: None,
    rules: Vec::new(),
    parallelism: None,
    metrics: BTreeMap::new(),
    outputs: None,
};

#[cfg(test)]
mod daemon_tests;

#[cfg(test)]
mod data_tests;

#[cfg(test)]
mod fan_out_tests;

#[cfg(test)]
mod late_fan_out_tests;

#[cfg(test)]
mod policy_tests;

#[cfg(test)]
mod queued_tests;

#[cfg(test)]
mod rules_tests;

#[cfg(test)]
mod suspend_tests;

#[cfg(test)]
mod tests;
