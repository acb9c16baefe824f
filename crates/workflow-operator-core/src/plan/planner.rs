//! The state of one plan being made ([`Planner`]) and what one pass sees of a set of steps
//! ([`View`]): the types the planner's stages share, and its moves along the lifecycle table.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::crd::OptionNum;
use crate::crd::{Kinds, Step, StepKind, StepStatus, WorkFlow, WorkFlowStatus};
use crate::dag::{Dag, Progress};
use crate::data_flow::DataFlow;
use crate::fan_out::{self, ItemList};
use crate::lifecycle::{Phase, Transition, Trigger};
use crate::names;
use crate::outputs::{Inputs, Outputs};
use crate::rules::{self as rule_stage, Rules};
use crate::when::{Ended, Run};

use super::attempts::BackingOff;
use super::failure::Failure;
use super::{Action, Compiled, Gate, LifecycleEvent, NO_STATUS, ObservedJob};

/// The state of one plan being made.
pub(super) struct Planner<'a> {
    pub(super) workflow: &'a WorkFlow,
    pub(super) previous: &'a WorkFlowStatus,
    pub(super) run: &'a str,
    /// What the spec compiled to: the templates the failed steps called.
    pub(super) compiled: &'a Compiled,
    /// Whose outputs are read, and the `when`s.
    pub(super) flow: &'a DataFlow,
    pub(super) now: Timestamp,
    pub(super) phase: Phase,
    /// The recomputed message, lists and the trigger of a failure; `None` keeps the previous
    /// status's (a terminal workflow).
    pub(super) outcome: Option<Outcome>,
    pub(super) actions: Vec<Action>,
    /// Jobs this plan already deletes or stops, so none is acted on twice.
    pub(super) settled: HashSet<&'a str>,
    /// Running Jobs this plan stops because the workflow stops its steps (kept, see
    /// [`Action::StopJob`]): their steps read as stopped from now on.
    pub(super) stopping: HashSet<&'a str>,
    /// What ended the steps when the workflow stops the running ones, for how a stopped step
    /// reads while the exit steps run (the outcome's trigger once the workflow ended).
    pub(super) halted_by: Option<Trigger>,
    pub(super) events: Vec<LifecycleEvent>,
    pub(super) next_timeout_at: Option<Timestamp>,
    /// Which Jobs may be created now.
    pub(super) gate: &'a Gate,
    /// When the steps (of the latest retry) started, for `activeDeadlineSeconds`.
    pub(super) started_at: Option<Timestamp>,
    /// Which run this is, and when the change that started it was seen (`status.runNumber`,
    /// `status.runChangedAt`).
    pub(super) run_number: Option<i32>,
    pub(super) run_changed_at: Option<Timestamp>,
    /// The compiled `spec.rules`.
    pub(super) rules: &'a Rules,
    /// The kind of each step and exit step.
    pub(super) kinds: &'a Kinds,
    /// The most steps running at once: the rules' (`status.parallelism`), else the spec's.
    pub(super) parallelism: Option<i32>,
    /// The runs of the DAG: `spec.runs` and those the rules added.
    pub(super) runs: u32,
    /// What the rules decided on this pass, with the metrics they read; `None` when they did
    /// not run (no rules, or a terminal or invalid workflow), which keeps the stored record.
    pub(super) ruled: Option<(rule_stage::Decision, crate::crd::Metrics)>,
}

/// One instance of a step of a [`View`]: the step (its index in the view's DAG) and, for a
/// step that fans out, the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Unit {
    pub(super) node: usize,
    pub(super) item: Option<u32>,
}

impl Unit {
    pub(super) fn step(node: usize) -> Unit {
        Unit { node, item: None }
    }
}

/// The set of steps one [`Planner::assess`] looks at: the steps of one run (`spec.runs`), or
/// the exit steps.
#[derive(Clone)]
pub(super) struct Scope<'a> {
    pub(super) dag: &'a Dag,
    pub(super) steps: &'a [Step],
    /// The kind of each of `steps`.
    pub(super) kinds: &'a [StepKind],
    /// The run it is (0 for the exit steps).
    pub(super) run_index: u32,
    /// The runs its names tell apart (`spec.runs` for the steps, 1 for the exit steps).
    pub(super) runs: u32,
    /// Every Job of an earlier retry is left out, not only the failed ones: exit steps run
    /// again in full on a retry.
    pub(super) whole_retry: bool,
    /// How the workflow ended, for the exit steps' `workflow.status`.
    pub(super) workflow_status: Option<&'static str>,
    /// Seconds since the run started, for `workflow.duration` in a `when`.
    pub(super) duration: f64,
    /// The failed steps as Argo's `{{workflow.failures}}` (`workflow_failures::json`), for
    /// the exit steps' `workflow.failures` when a `when` reads it.
    pub(super) failures: Option<Arc<str>>,
}

impl<'a> Scope<'a> {
    /// The steps (of `kinds`) of run `run_index` of `runs`.
    pub(super) fn run(
        dag: &'a Dag,
        (steps, kinds): (&'a [Step], &'a [StepKind]),
        run_index: u32,
        runs: u32,
    ) -> Self {
        Scope {
            dag,
            steps,
            kinds,
            run_index,
            runs,
            whole_retry: false,
            workflow_status: None,
            duration: 0.0,
            failures: None,
        }
    }

    /// The exit steps of a workflow that ended `status` (`Completed` or `Failed`).
    pub(super) fn exit(
        dag: &'a Dag,
        (steps, kinds): (&'a [Step], &'a [StepKind]),
        status: Phase,
    ) -> Self {
        Scope {
            dag,
            steps,
            kinds,
            run_index: 0,
            runs: 1,
            whole_retry: true,
            workflow_status: Some(status.as_str()),
            duration: 0.0,
            failures: None,
        }
    }

    /// The scope, `duration` seconds after the run started.
    pub(super) fn at(self, duration: f64) -> Self {
        Scope { duration, ..self }
    }

    /// The scope whose `when`s read the failed steps as `failures`.
    pub(super) fn failures(self, failures: Option<Arc<str>>) -> Self {
        Scope { failures, ..self }
    }

    /// What a `when` reads of the workflow in this scope.
    pub(super) fn when_run(&self) -> Run<'_> {
        Run {
            status: self.workflow_status,
            duration: self.duration,
            failures: self.failures.as_deref(),
        }
    }
}

/// Where the exit steps stand once the steps ended (see [`Planner::advance`]).
pub(super) struct Exits<'a> {
    /// How the workflow ended, once the exit steps (if any) did too.
    pub(super) end: Option<(Trigger, String)>,
    /// What was seen of the exit steps, once they may run.
    pub(super) view: Option<View<'a>>,
    /// The exit steps created by this plan.
    pub(super) created: Vec<Unit>,
    /// The exit steps ready to start that the gate holds back.
    pub(super) held: Vec<Unit>,
    /// The message while they run.
    pub(super) message: Option<String>,
}

impl Exits<'_> {
    /// No exit step runs: the workflow ends as its steps did (`end`).
    pub(super) fn none(end: Option<(Trigger, String)>) -> Self {
        Exits {
            end,
            view: None,
            created: Vec::new(),
            held: Vec::new(),
            message: None,
        }
    }
}

/// What [`Planner::assess`] saw of one set of steps: the steps of one run (`spec.runs`), or
/// the exit steps.
pub(super) struct View<'a> {
    pub(super) dag: &'a Dag,
    pub(super) steps: &'a [Step],
    /// The kind of each of `steps`.
    pub(super) kinds: &'a [StepKind],
    /// The run it is (0 for the exit steps).
    pub(super) run_index: u32,
    /// The runs its names tell apart (`spec.runs` for the steps, 1 for the exit steps).
    pub(super) runs: u32,
    /// The Job that speaks for each step that does not fan out.
    pub(super) job_of: Vec<Option<&'a ObservedJob>>,
    /// The steps that fan out, by index.
    pub(super) fans: HashMap<usize, Fan<'a>>,
    pub(super) progress: Progress<'a>,
    /// Failed instances, in spec order (items in order), but those of `tolerated`.
    pub(super) failures: Vec<(Unit, Failure)>,
    /// Failed instances of steps with `continueOn.failed`, in spec order: done for their
    /// dependents, and no failure of the workflow's.
    pub(super) tolerated: Vec<(Unit, Failure)>,
    /// Failed instances tried again now (`retryStrategy`), with their next attempt; they are
    /// among `ready`.
    pub(super) next_attempt: HashMap<Unit, u32>,
    /// Steps done by a cache hit (`cache`), with their status entry.
    pub(super) cached: HashMap<usize, &'a StepStatus>,
    /// Failed instances waiting their back-off before their next attempt; counted running.
    pub(super) backing_off: BTreeMap<Unit, BackingOff>,
    /// Jobs that run (not stopped by this plan, nor by an earlier one).
    pub(super) running: usize,
    /// Instances that may start: dependencies succeeded, no Job, not refused, `when` true,
    /// the outputs they name known, their items known; in spec order (items in order).
    pub(super) ready: Vec<Unit>,
    /// What each step tells the steps after it (the steps' views only; empty for exit steps).
    pub(super) known: Known<'a>,
    /// Steps their `when` skipped.
    pub(super) skipped: Vec<bool>,
    /// The values of the outputs each ready step names, for its Jobs.
    pub(super) inputs: HashMap<usize, Inputs>,
    /// The hooks of failed steps that run once their step ended, whatever its result.
    pub(super) released: BTreeSet<usize>,
}

impl View<'_> {
    /// Whether a hook of a failed step has yet to end: the run waits for it, even with
    /// `failFast`.
    pub(super) fn hooks_pending(&self) -> bool {
        (self.released.iter()).any(|&h| !self.progress.is_done(h) && !self.is_refused_step(h))
    }

    fn is_refused_step(&self, i: usize) -> bool {
        self.failures.iter().any(|(u, _)| u.node == i)
    }

    /// The name of `unit` in the status: its step's, with its run and item (`fan_out`).
    pub(super) fn display(&self, unit: Unit) -> String {
        fan_out::display_name(
            self.dag.name(unit.node),
            self.run_index,
            self.runs,
            unit.item,
        )
    }

    /// Each failed instance (tolerated ones too), in spec order, as its `status.steps` entry
    /// says it: from the Job that failed it, when it has one.
    pub(super) fn failed_entries(&self) -> Vec<StepStatus> {
        let mut failed: Vec<&(Unit, Failure)> =
            self.failures.iter().chain(&self.tolerated).collect();
        failed.sort_by_key(|(unit, _)| *unit);
        failed
            .into_iter()
            .map(|(unit, failure)| {
                let name = self.display(*unit);
                let job = match unit.item {
                    Some(item) => self
                        .fans
                        .get(&unit.node)
                        .and_then(|f| f.jobs.get(&item).copied()),
                    None => self.job_of[unit.node],
                };
                match job {
                    Some(job) => failure.step_status(&name, job),
                    None => failure
                        .entry_without_job(&name)
                        .unwrap_or_else(|| StepStatus {
                            phase: failure.phase(),
                            job: None,
                            ..super::running_step_status(&name, String::new(), false)
                        }),
                }
            })
            .collect()
    }

    /// The steps with a failed instance.
    pub(super) fn failed_steps(&self) -> usize {
        distinct_steps(&self.failures)
    }

    /// The steps with a failed instance whose failure is tolerated (`continueOn.failed`).
    pub(super) fn tolerated_steps(&self) -> usize {
        distinct_steps(&self.tolerated)
    }
}

/// How many steps `failures` (in spec order) are of.
fn distinct_steps(failures: &[(Unit, Failure)]) -> usize {
    let mut steps: Vec<usize> = failures.iter().map(|(u, _)| u.node).collect();
    steps.dedup();
    steps.len()
}

/// A step that fans out, as one pass sees it.
pub(super) struct Fan<'a> {
    /// Its items, once known (a `withParam`'s once its step's outputs are).
    pub(super) items: Option<ItemList<'a>>,
    /// The Job that speaks for each item that has one.
    pub(super) jobs: BTreeMap<u32, &'a ObservedJob>,
    /// The outputs of each succeeded item, when another step reads the step's (as a JSON
    /// list of every item's, [`fan_out::aggregate`]).
    pub(super) outputs: BTreeMap<u32, &'a Outputs>,
    pub(super) succeeded: u32,
    pub(super) running: u32,
    /// Items whose Jobs the workflow stopped ([`ObservedJob::stopped`]).
    pub(super) stopped: u32,
    /// Items that failed, and whose failure is tolerated (`continueOn.failed`).
    pub(super) tolerated: u32,
    /// Items their `when` (naming the item) skipped.
    pub(super) skipped: BTreeSet<u32>,
}

impl Fan<'_> {
    /// Whether its items are known and every one ended as its dependents may go on from:
    /// succeeded, skipped, or failed under `continueOn`.
    pub(super) fn ended(&self) -> bool {
        let all = self.items.as_ref().map(ItemList::len);
        let ended = (self.succeeded + self.tolerated) as usize + self.skipped.len();
        all == Some(ended)
    }
}

/// What the steps (not the exit steps) tell the steps after them: the outputs read of each
/// step whose outputs are named, and which steps a `when` skipped.
#[derive(Default)]
pub(super) struct Known<'a> {
    pub(super) outputs: HashMap<usize, &'a Outputs>,
    pub(super) skipped: Vec<bool>,
    /// The phase of each step that failed (`Failed`, `TimedOut`), or of a step that fans
    /// out and is done (`Succeeded`): what a `when` reads of a step without outputs.
    pub(super) phases: HashMap<usize, &'static str>,
    /// How the steps that ran ended, of those named (Argo's `{{steps.NAME.status}}`, ...).
    pub(super) ended: HashMap<usize, Ended>,
}

pub(super) struct Outcome {
    pub(super) message: Option<String>,
    pub(super) executed: Vec<String>,
    pub(super) started: Vec<String>,
    pub(super) steps: Vec<StepStatus>,
    pub(super) total: usize,
    /// What made the workflow fail, for the `Failed` condition's reason.
    pub(super) failed_by: Option<Trigger>,
}

impl<'a> Planner<'a> {
    /// Seconds from the run's start to now (0 before it started), `workflow.duration`.
    pub(super) fn run_seconds(&self) -> f64 {
        (self.started_at).map_or(0.0, |t| self.now.duration_since(t).as_secs_f64().max(0.0))
    }

    pub(super) fn new(
        workflow: &'a WorkFlow,
        compiled: &'a Compiled,
        now: Timestamp,
        gate: &'a Gate,
    ) -> Planner<'a> {
        let previous = workflow.status.as_ref().unwrap_or(&NO_STATUS);
        let run = compiled.run.as_str();
        // What the rules did belongs to the run they did it in: a new run (or a spec without
        // rules) starts from the spec.
        let same_run = previous.run.as_deref() == Some(run);
        let stored_rules: &[crate::crd::RuleStatus] = if same_run { &previous.rules } else { &[] };
        let added_runs = crate::crd::rules::added_runs(&workflow.spec.rules, stored_rules);
        let mut planner = Planner {
            workflow,
            previous,
            run,
            compiled,
            flow: &compiled.flow,
            rules: &compiled.rules,
            kinds: &compiled.kinds,
            parallelism: previous
                .parallelism
                .filter(|_| same_run && !compiled.rules.is_empty())
                .or(workflow.spec.parallelism.num()),
            runs: workflow.spec.run_count() + added_runs,
            ruled: None,
            now,
            phase: previous.workflow_status.unwrap_or(Phase::Created),
            outcome: None,
            actions: Vec::new(),
            settled: HashSet::new(),
            stopping: HashSet::new(),
            halted_by: None,
            events: Vec::new(),
            next_timeout_at: None,
            gate,
            started_at: previous.started_at.as_ref().map(|t| t.0),
            run_number: previous.run_number,
            run_changed_at: previous.run_changed_at.as_ref().map(|t| t.0),
        };
        // A status without a run id is adopted as is (a new workflow, or one another operator
        // ran); a different run id means what runs changed. In Created nothing ran yet, so
        // there is no move to make.
        if let Some(old) = previous.run.as_deref().filter(|old| *old != run)
            && planner.phase != Phase::Created
        {
            let number = previous.run_number.unwrap_or(1) + 1;
            planner.run_number = Some(number);
            planner.run_changed_at = Some(now);
            planner.go(
                Trigger::SpecChanged,
                format!("new run {number} at {now:.0}: what runs changed (run {old} -> {run})"),
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
    pub(super) fn go(&mut self, trigger: Trigger, detail: String) {
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
        // Queued from Created, the run is under way (waiting its turn), as a step held by any
        // gate counts as started: its deadline counts from then, and admission keeps it.
        if transition.from() == Phase::Created
            && matches!(transition.to(), Phase::Started | Phase::Queued)
        {
            self.started_at = Some(self.now);
        }
        self.phase = transition.to();
    }

    /// The name of `step`'s Job in this run and retry.
    pub(super) fn job_name(&self, step: &str) -> String {
        self.attempt_job_name(step, 0)
    }

    /// The name of the Job of attempt `attempt` of `step` in this run and retry.
    pub(super) fn attempt_job_name(&self, step: &str, attempt: u32) -> String {
        names::attempt_job_name(
            self.workflow_name(),
            step,
            self.run,
            self.workflow.spec.retry,
            attempt,
        )
    }

    pub(super) fn workflow_name(&self) -> &str {
        self.workflow.metadata.name.as_deref().unwrap_or_default()
    }
}
