//! Scheduling: which ready steps start now (dependencies succeeded, `when` true, outputs and
//! items known, within `parallelism`), and how the run moves on to its exit steps and its end.

use super::*;

/// What the `when`s of one set of steps may read of the steps before them.
pub(super) struct Facts<'k, 'a> {
    /// The outputs read of the steps that succeeded, by index.
    pub(super) outputs: &'k HashMap<usize, &'a Outputs>,
    /// The steps a `when` skipped.
    pub(super) skipped: &'k [bool],
    /// The phase of the steps that failed, and of those that fan out and are done.
    pub(super) phases: &'k HashMap<usize, &'static str>,
    /// The `when`s are the exit steps': every step has ended, and one that did not finish
    /// reads `Omitted`.
    pub(super) exit: bool,
}

/// How a step that did not finish reads in an exit step's `when`.
const OMITTED: &str = "Omitted";

impl<'a> Facts<'_, 'a> {
    /// What a `when` naming `names` (steps of `dag`) sees of them: each that is skipped,
    /// failed, done, or succeeded with outputs (and, in an exit step, every one).
    pub(super) fn upstream<'n>(
        &self,
        dag: &Dag,
        names: impl Iterator<Item = &'n str>,
    ) -> HashMap<&'n str, Upstream<'a>> {
        names
            .filter_map(|name| {
                let i = dag.index_of(name)?;
                let (phase, outputs) = if self.skipped.get(i).copied().unwrap_or(false) {
                    (StepPhase::Skipped.as_str(), None)
                } else if let Some(phase) = self.phases.get(&i) {
                    (*phase, None)
                } else if let Some(outputs) = self.outputs.get(&i) {
                    (StepPhase::Succeeded.as_str(), Some(*outputs))
                } else if self.exit {
                    (OMITTED, None)
                } else {
                    return None;
                };
                Some((name, Upstream { phase, outputs }))
            })
            .collect()
    }
}

/// The values of the outputs `step` names, from the known `outputs` of the steps of `dag`;
/// `None` when it names none. An output artifact of a step that fans out (`fans`, done; the
/// only output of one a step may name) is its items' Jobs, see [`fan_in_jobs`], unless the
/// step was `skipped`.
///
/// # Errors
/// The first output named that is not there (its step was skipped, or did not write it; the
/// caller, which knows the skipped steps, says which).
pub(super) fn step_inputs(
    step: &Step,
    dag: &Dag,
    outputs: &HashMap<usize, &Outputs>,
    (fans, skipped): (&HashMap<usize, Fan<'_>>, &[bool]),
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
            let index = dag.index_of(step);
            let fan_in = (index.filter(|&i| !skipped.get(i).copied().unwrap_or(false)))
                .and_then(|i| fans.get(&i))
                .and_then(fan_in_jobs);
            let value = fan_in.or_else(|| index.and_then(|i| outputs.get(&i))?.get(key).cloned());
            let Some(value) = value else {
                return Err(outputs::MissingOutput {
                    text: reference.text.to_string(),
                    step: step.to_string(),
                    key: key.to_string(),
                    skipped: false,
                });
            };
            inputs.insert((step.to_string(), key.to_string()), value);
        }
    }
    Ok((!inputs.is_empty()).then_some(inputs))
}

/// What a step taking an output artifact of `fan` (a step that fans out, done) is given: the
/// name of each item's succeeded Job (the attempt that succeeded), in item order, empty for
/// an item that has none (failed, its failure tolerated), as a JSON list. The Job builder
/// makes each the artifact's key in the store ([`crate::agent::artifact_key`]), as the item's
/// agent did: the keys follow from the Jobs alone, so every pass finds the same.
/// `None` when its items are not known.
pub(super) fn fan_in_jobs(fan: &Fan<'_>) -> Option<String> {
    let items = fan.items.as_ref()?;
    let jobs: Vec<&str> = (0..items.len() as u32)
        .map(|item| {
            (fan.jobs.get(&item))
                .filter(|job| job.state == JobState::Succeeded)
                .map_or("", |job| job.name.as_str())
        })
        .collect();
    Some(serde_json::to_string(&jobs).expect("names serialize"))
}

/// The items of the step fanning out as `fan_out` (`step` of `dag`), given the known
/// `outputs`: `None` while a `withParam`'s step has not told them.
///
/// # Errors
/// Why a `withParam`'s value is not its items, for the step's failure.
pub(super) fn items_of<'a>(
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
pub(super) fn item_unresolved(step: &Step, item: &serde_json::Value) -> Option<String> {
    data_flow::texts(step).find_map(|text| {
        outputs::substitute(text, |_, _| Some(""), Some(item))
            .err()
            .map(|e| e.to_string())
    })
}

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
        // Resumed before anything starts (exit steps included) or ends.
        if !spec.suspend && self.phase == Phase::Suspended {
            self.go(
                Trigger::Resumed,
                "spec.suspend is false: steps start again".into(),
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
                let scope = Scope::run(dag, &spec.containers, r, runs);
                self.assess(scope, jobs, None)
            })
            .collect()
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
        } else if let Some((name, failure)) = first_failure
            .as_ref()
            .filter(|_| spec.fail_fast || running == 0 && no_ready)
        {
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
        let view = self.assess(
            Scope::exit(exit_dag, &spec.on_exit, status),
            exit_jobs,
            Some((dag, known)),
        );
        let exit_env = ExitEnv {
            status,
            failed_steps: mains
                .iter()
                .flat_map(|v| {
                    let mut failed: Vec<&Unit> = (v.failures.iter().chain(&v.tolerated))
                        .map(|(unit, _)| unit)
                        .collect();
                    failed.sort();
                    failed.into_iter().map(|unit| v.display(*unit))
                })
                .collect(),
        };
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
        if none_yet && !wanted.is_empty() {
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
    /// does not admit are `held` (by run) instead; they count as started for the lifecycle.
    fn start_ready(
        &mut self,
        dag: &'a Dag,
        mains: &mut [View<'a>],
        (created, held): (&mut [Vec<Unit>], &mut [Vec<Unit>]),
    ) {
        let spec = &self.workflow.spec;
        if spec.suspend && matches!(self.phase, Phase::Created | Phase::Started) {
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
        if self.phase == Phase::Created && (running > 0 || !started_names.is_empty()) {
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
        let failure = first_failure(mains).map(|(name, failure)| {
            format!(
                "{}; waiting for running steps to finish",
                failure.describe(&name)
            )
        });
        exit_message
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

/// `message` of a workflow whose steps all ended, naming the first failure it survived
/// (`continueOn.failed`) among `views`, and how many more there were.
pub(super) fn with_tolerated<'v, 'a: 'v>(
    message: String,
    views: impl Iterator<Item = &'v View<'a>>,
) -> String {
    let mut tolerated = views.flat_map(|v| v.tolerated.iter().map(move |(unit, f)| (v, unit, f)));
    let Some((view, unit, failure)) = tolerated.next() else {
        return message;
    };
    let more = tolerated.count();
    let mut said = format!(
        "{message}; {} (continueOn.failed: the workflow went on)",
        failure.describe(&view.display(*unit))
    );
    if more > 0 {
        said.push_str(&format!(" and {more} more tolerated failures"));
    }
    said
}

/// The first failed instance of the steps, in run order, with its name in the status.
fn first_failure(mains: &[View<'_>]) -> Option<(String, Failure)> {
    mains.iter().find_map(|v| {
        v.failures
            .first()
            .map(|(unit, f)| (v.display(*unit), f.clone()))
    })
}
