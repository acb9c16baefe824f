//! Scheduling: which ready steps start now (dependencies succeeded, `when` true, outputs and
//! items known, within `parallelism`; a failed step's hooks, which run whatever its result),
//! and how the run moves on to its exit steps and its end.

use std::sync::Arc;

use crate::crd::{Shutdown, StepStatus};
use crate::dag::Dag;
use crate::fan_out::{self, Instance};
use crate::lifecycle::{Phase, Trigger};
use crate::workflow_failures;

use super::failure::Failure;
use super::planner::{Exits, Planner, Scope, Unit, View};
use super::render::{Tally, list_names, with_tolerated};
use super::{Action, ExitEnv, ObservedJob, StopReason};

impl<'a> Planner<'a> {
    /// Moves a running workflow on: sees each run's Jobs, decides how its steps ended (if
    /// they did), runs the exit steps then, starts the ready steps otherwise, and renders the
    /// outcome.
    pub(super) fn advance(
        &mut self,
        dag: &'a Dag,
        exit_dag: Option<&'a Dag>,
        current: &[&'a ObservedJob],
    ) {
        let spec = &self.workflow.spec;
        let (main_jobs, exit_jobs): (Vec<&ObservedJob>, Vec<&ObservedJob>) = current
            .iter()
            .partition(|j| exit_dag.is_none() || dag.index_of(&j.step).is_some());
        let mut mains = self.assess_runs(dag, &main_jobs, 0);
        self.apply_rules(dag, &main_jobs, &mut mains);
        if spec.fail_fast && mains.iter().any(|v| !v.failures.is_empty()) {
            // Failed fast: only the hooks of the failed steps start, then the run ends.
            for view in &mut mains {
                let released = &view.released;
                view.ready.retain(|u| released.contains(&u.node));
            }
        }
        if spec.shutdown.is_some() || self.finishing().is_some() {
            // Stopping or terminating: nothing new starts.
            for view in &mut mains {
                view.ready.clear();
            }
        }
        let mut main_end = self.main_end(&mains);
        let halt = (self
            .past_deadline()
            .map(|why| (Trigger::DeadlineExceeded, why)))
        .or_else(|| self.failed_by_rule().map(|why| (Trigger::RuleFailed, why)));
        if main_end.is_none()
            && let Some(halt) = halt
        {
            for view in &mut mains {
                view.ready.clear();
            }
            main_end = Some(halt);
        }
        if let Some((trigger, _)) = &main_end
            && *trigger != Trigger::AllStepsSucceeded
        {
            let reason = if spec.shutdown == Some(Shutdown::Terminate) {
                StopReason::Terminated
            } else {
                StopReason::WorkflowFailed
            };
            self.halted_by = Some(*trigger);
            self.stop_running(&main_jobs, reason);
            // The steps ended: none starts (again) while the exit steps run, not even one whose
            // Job the workflow stopped and is gone.
            for view in &mut mains {
                view.ready.clear();
            }
        }
        // Resumed, or admitted, before anything starts (exit steps included) or ends.
        if !spec.suspend && self.phase == Phase::Suspended {
            self.go(
                Trigger::Resumed,
                "spec.suspend is false: steps start again".into(),
            );
        }
        if !spec.suspend && self.phase == Phase::Queued && self.gate.run_queued.is_none() {
            self.go(
                Trigger::Admitted,
                "Kueue admitted the run's workload: its steps start".into(),
            );
        }
        let exits = match (main_end, exit_dag) {
            (Some(main_end), Some(exit_dag)) if spec.shutdown != Some(Shutdown::Terminate) => {
                self.run_exit_steps(exit_dag, &exit_jobs, (dag, &mains), main_end)
            }
            (main_end, _) => Exits::none(main_end),
        };
        let mut created: Vec<Vec<Unit>> = vec![Vec::new(); mains.len()];
        let mut held: Vec<Vec<Unit>> = vec![Vec::new(); mains.len()];
        let mut failed_by = None;
        let message = if let Some((trigger, message)) = exits.end.clone() {
            self.go(trigger, message.clone());
            self.stop_daemons(current);
            failed_by = (trigger != Trigger::AllStepsSucceeded).then_some(trigger);
            Some(message)
        } else {
            self.start_ready(dag, &mut mains, (&mut created, &mut held));
            for view in &mains {
                self.plan_deadlines(view, &spec.containers);
            }
            if let Some(at) = self.workflow_deadline() {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
            if let Some(view) = &exits.view {
                self.plan_deadlines(view, &spec.on_exit);
            }
            self.waiting_message(&mains, exits.message.clone())
        };
        let total = dag.len() * mains.len() + exit_dag.map_or(0, Dag::len);
        self.render_outcome(
            (&mains, &created, &held),
            &exits,
            (message, failed_by),
            total,
        );
    }

    /// How the steps (not the exit steps) ended, once they did: all succeeded, terminated,
    /// failed (at once with `failFast`, else once nothing runs or may start), or stopped.
    fn main_end(&self, mains: &[View<'a>]) -> Option<(Trigger, String)> {
        let spec = &self.workflow.spec;
        let runs = self.runs;
        let stopping = spec.shutdown == Some(Shutdown::Stop) || self.finishing().is_some();
        let n = mains.first().map_or(0, |v| v.dag.len());
        let running: usize = mains.iter().map(|v| v.running).sum();
        let no_ready = mains.iter().all(|v| v.ready.is_empty());
        let first_failure = first_failure(mains);
        let failed_steps: usize = mains.iter().map(View::failed_steps).sum();
        if mains.iter().all(|v| v.progress.all_done()) {
            let tally = Tally {
                steps: n,
                runs,
                skipped: mains
                    .iter()
                    .map(|v| v.skipped.iter().filter(|s| **s).count())
                    .sum(),
                failed: mains.iter().map(View::tolerated_steps).sum(),
                ..Tally::default()
            };
            let message = with_tolerated(tally.message(), mains.iter());
            Some((Trigger::AllStepsSucceeded, message))
        } else if spec.shutdown == Some(Shutdown::Terminate) {
            let mut message = "terminated (spec.shutdown: Terminate)".to_string();
            if let Some((name, failure)) = &first_failure {
                message.push_str(&format!("; {}", failure.describe(name)));
            }
            Some((Trigger::Terminated, message))
        } else if let Some((name, failure)) = first_failure.as_ref().filter(|_| {
            let hooks_pending = mains.iter().any(View::hooks_pending);
            spec.fail_fast && !hooks_pending || running == 0 && no_ready
        }) {
            let mut message = failure.describe(name);
            if failed_steps > 1 {
                message.push_str(&format!(" (and {} more failed steps)", failed_steps - 1));
            }
            Some((failure.trigger(), message))
        } else if stopping && running == 0 {
            let never_ran = (n * runs as usize)
                - mains.iter().map(|v| v.progress.done_count()).sum::<usize>()
                - failed_steps;
            let why = match self.finishing() {
                Some(fired) => format!("finished by rule {fired}"),
                None => "stopped (spec.shutdown: Stop)".to_string(),
            };
            Some((
                Trigger::Stopped,
                format!("{why}: {never_ran} steps never ran"),
            ))
        } else {
            None
        }
    }

    /// The exit steps (of `exit_dag`), once the steps of `main` ended with `main_end`: those
    /// ready start (unless suspended), and the workflow ends once they all ended too.
    fn run_exit_steps(
        &mut self,
        exit_dag: &'a Dag,
        exit_jobs: &[&'a ObservedJob],
        main: (&'a Dag, &[View<'a>]),
        main_end: (Trigger, String),
    ) -> Exits<'a> {
        let spec = &self.workflow.spec;
        let (dag, mains) = main;
        // With several runs an exit step names no step's outputs (`data_flow`): the last
        // run's are as good as any.
        let known = &mains.last().expect("at least one run").known;
        let status = if main_end.0 == Trigger::AllStepsSucceeded {
            Phase::Completed
        } else {
            Phase::Failed
        };
        let failed: Vec<StepStatus> = mains.iter().flat_map(View::failed_entries).collect();
        let failures = workflow_failures::json(&failed, |n| self.compiled.failure_template(n));
        let exit_env = ExitEnv {
            status,
            failed_steps: failed.into_iter().map(|entry| entry.name).collect(),
            failures: Arc::from(failures),
        };
        let scope = Scope::exit(exit_dag, (&spec.on_exit, &self.kinds.exit), status)
            .at(self.run_seconds())
            .failures(Some(exit_env.failures.clone()));
        let view = self.assess(scope, exit_jobs, Some((dag, known)));
        let none_yet = view.job_of.iter().all(Option::is_none);
        // Suspended: the exit steps wait too (and the workflow has not ended).
        let mut wanted: Vec<Unit> = Vec::new();
        if !spec.suspend {
            wanted = (view.ready.iter().take(self.slots(view.running)).copied()).collect();
        }
        let (mut created, mut held) = (Vec::new(), Vec::new());
        for &unit in &wanted {
            let step = exit_dag.name(unit.node);
            let attempt = view.next_attempt.get(&unit).copied().unwrap_or(0);
            let job_name = self.attempt_job_name(step, attempt);
            if !self.gate.admits(&job_name) {
                held.push(unit);
                continue;
            }
            created.push(unit);
            self.actions.push(Action::CreateJob {
                step: step.to_string(),
                job_name,
                retry: spec.retry,
                exit: Some(exit_env.clone()),
                inputs: view.inputs.get(&unit.node).cloned().unwrap_or_default(),
                instance: Instance::default(),
                attempt,
            });
        }
        if view.running == 0 && view.ready.is_empty() {
            let end = exit_end(main_end, &view);
            return Exits {
                end: Some(end),
                view: Some(view),
                created,
                held,
                message: None,
            };
        }
        // A run that waits for its admission has not started its exit steps: they wait too.
        if none_yet && !wanted.is_empty() && self.phase != Phase::Queued {
            let names: Vec<&str> = wanted.iter().map(|u| exit_dag.name(u.node)).collect();
            let detail = format!(
                "running exit steps {} after: {}",
                list_names(&names),
                main_end.1
            );
            self.go(Trigger::ExitStepsStarted, detail);
        }
        Exits {
            end: None,
            view: Some(view),
            created,
            held,
            message: Some(format!("running exit steps: {}", main_end.1)),
        }
    }

    /// Starts the ready instances of `mains` (into `created`, by run): at most `parallelism`
    /// at once across all runs, the earlier runs first; none while suspended. Those the gate
    /// does not admit are `held` (by run) instead; they count as started for the lifecycle,
    /// but for a gate that holds the whole run: the workflow is then `Queued`.
    fn start_ready(
        &mut self,
        dag: &'a Dag,
        mains: &mut [View<'a>],
        (created, held): (&mut [Vec<Unit>], &mut [Vec<Unit>]),
    ) {
        let spec = &self.workflow.spec;
        if spec.suspend && matches!(self.phase, Phase::Created | Phase::Queued | Phase::Started) {
            self.go(
                Trigger::Suspended,
                "spec.suspend is true: no new step starts".into(),
            );
        }
        let running: usize = mains.iter().map(|v| v.running).sum();
        let mut started_names: Vec<String> = Vec::new();
        if !spec.suspend {
            let mut slots = self.slots(running);
            for ((view, created), held) in mains.iter_mut().zip(created.iter_mut()).zip(held) {
                let take = view.ready.len().min(slots);
                slots -= take;
                // Copied out: creating a Job takes the view's inputs.
                let units: Vec<Unit> = view.ready.iter().take(take).copied().collect();
                for unit in units {
                    let name = view.display(unit);
                    let attempt = view.next_attempt.get(&unit).copied().unwrap_or(0);
                    let job_name = self.attempt_job_name(&name, attempt);
                    if self.gate.admits(&job_name) {
                        created.push(unit);
                        self.create(dag, view, unit, (job_name, attempt));
                    } else {
                        held.push(unit);
                    }
                    started_names.push(name);
                }
            }
        }
        let queued = self.gate.run_queued.clone();
        if let Some(why) = queued.filter(|_| matches!(self.phase, Phase::Created | Phase::Started))
        {
            self.go(Trigger::Queued, why);
        } else if self.phase == Phase::Created && (running > 0 || !started_names.is_empty()) {
            let names: Vec<&str> = started_names.iter().map(String::as_str).collect();
            self.go(
                Trigger::StepsStarted,
                format!("starting {}", list_names(&names)),
            );
        }
    }

    /// Creates the Job named `job_name` of attempt `attempt` of `unit` of `view`.
    fn create(
        &mut self,
        dag: &Dag,
        view: &mut View<'a>,
        unit: Unit,
        (job_name, attempt): (String, u32),
    ) {
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
            job_name,
            retry: self.workflow.spec.retry,
            exit: None,
            inputs: inputs.unwrap_or_default(),
            instance: Instance {
                run_index: view.run_index,
                item,
            },
            attempt,
        });
    }

    /// The message of a workflow that has not ended: its exit steps running, a failure known
    /// (`failFast: false`: it fails once nothing runs), stopping, or suspended.
    fn waiting_message(&self, mains: &[View<'a>], exit_message: Option<String>) -> Option<String> {
        let spec = &self.workflow.spec;
        // A run that waits for its admission says so first: nothing else moves until then.
        let queued = (self.phase == Phase::Queued)
            .then(|| self.gate.run_queued.clone())
            .flatten();
        let failure = first_failure(mains).map(|(name, failure)| {
            format!(
                "{}; waiting for running steps to finish",
                failure.describe(&name)
            )
        });
        queued
            .or(exit_message)
            .or(failure)
            .or_else(|| {
                self.finishing().map(|fired| {
                    format!("finishing (rule {fired}): waiting for running steps to finish")
                })
            })
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
    }

    /// How many more steps may start with `running` running: `parallelism` (the rules', else
    /// the spec's) minus those.
    pub(super) fn slots(&self, running: usize) -> usize {
        free_slots(self.parallelism, running)
    }
}

/// How many more steps may start under `parallelism` with `running` running: the one rule of
/// parallelism, which the incremental planner applies too.
pub fn free_slots(parallelism: Option<i32>, running: usize) -> usize {
    match parallelism {
        Some(p) => usize::try_from(p.max(1))
            .unwrap_or(1)
            .saturating_sub(running),
        None => usize::MAX,
    }
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

/// The first failed instance of the steps, in run order, with its name in the status.
fn first_failure(mains: &[View<'_>]) -> Option<(String, Failure)> {
    mains.iter().find_map(|v| {
        v.failures
            .first()
            .map(|(unit, f)| (v.display(*unit), f.clone()))
    })
}
