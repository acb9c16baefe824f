//! Rendering: the status lists, the step entries, the message, the conditions and the
//! finished [`Plan`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::crd::{
    CONDITION_COMPLETED, CONDITION_FAILED, CONDITION_FINISHED, DEFAULT_MAX_STEP_TIMEOUT,
    GlobalArtifact, GlobalParameter, ItemCounts, Step, StepKind, StepPhase, StepStatus,
    WorkFlowStatus, WorkflowOutputs, suspend,
};
use crate::failure_cause::DEADLINE_EXCEEDED;
use crate::fan_out::ItemList;
use crate::lifecycle::{Phase, Trigger};
use crate::outputs::Outputs;

use super::failure::Failure;
use super::planner::{Exits, Fan, Outcome, Planner, Unit, View};
use super::{
    JobState, ObservedJob, Plan, QUEUE_TIMEOUT_WHY, REASON_DAEMONED, REASON_STOPPED,
    REASON_TERMINATED, REASON_WHEN_FALSE, running_step_status,
};

/// The entry of a step its `when` (`expression`) skipped.
pub(super) fn skipped_entry(name: &str, expression: Option<&str>) -> StepStatus {
    let expression = expression.unwrap_or("");
    StepStatus {
        phase: StepPhase::Skipped,
        reason: Some(REASON_WHEN_FALSE.into()),
        message: Some(format!("when {expression:?} is false")),
        job: None,
        ..running_step_status(name, String::new(), false)
    }
}

/// `a, b, c` or `a, b, c and 7 more`.
pub(super) fn list_names(names: &[&str]) -> String {
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

/// What a run that succeeded did, as its message says it and `progress` counts it: the steps
/// that succeeded (in all runs) and were skipped, and the exit steps that succeeded and were
/// skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// The steps of one run.
    pub(super) steps: usize,
    /// `spec.runs`.
    pub(super) runs: u32,
    /// Steps, of every run, that were skipped (their `when` was false).
    pub(super) skipped: usize,
    /// Exit steps that succeeded.
    pub(super) exit_succeeded: usize,
    /// Exit steps that were skipped.
    pub(super) exit_skipped: usize,
    /// Steps, of every run, that failed and whose failure the workflow survived
    /// (`continueOn.failed`).
    pub(super) failed: usize,
}

impl Tally {
    /// `4 steps succeeded, 2 skipped`, `1 step succeeded`, `2 steps and 1 exit step succeeded`,
    /// `all 2 steps succeeded in each of 3 runs`: the succeeded ones are what `progress` counts
    /// done, the skipped ones the rest of its total.
    pub(super) fn message(self) -> String {
        let count = |n: usize, what: &str| {
            if n == 1 {
                format!("1 {what}")
            } else {
                format!("{n} {what}s")
            }
        };
        let succeeded =
            (self.steps * self.runs as usize).saturating_sub(self.skipped + self.failed);
        let exits = if self.exit_succeeded > 0 {
            count(self.exit_succeeded, "exit step")
        } else {
            String::new()
        };
        let mut message = if self.runs <= 1 {
            match exits.as_str() {
                "" => format!("{} succeeded", count(succeeded, "step")),
                exits => format!("{} and {exits} succeeded", count(succeeded, "step")),
            }
        } else {
            let mut message = if self.skipped == 0 {
                let each = match self.steps {
                    1 => "1 step".to_string(),
                    n => format!("all {n} steps"),
                };
                format!("{each} succeeded in each of {} runs", self.runs)
            } else {
                format!(
                    "{} succeeded in {} runs",
                    count(succeeded, "step"),
                    self.runs
                )
            };
            if !exits.is_empty() {
                message.push_str(&format!(", and {exits}"));
            }
            message
        };
        let skipped = self.skipped + self.exit_skipped;
        if skipped > 0 {
            message.push_str(&format!(", {skipped} skipped"));
        }
        message
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

/// `waiting for you at step sim`: the message of a running workflow whose interactive steps
/// wait for a person (`exec`, then `continue`), naming them; `None` when none waits.
fn waiting_for_you(steps: &[StepStatus]) -> Option<String> {
    let waiting: Vec<&str> = (steps.iter())
        .filter(|s| s.phase == StepPhase::Interactive)
        .map(|s| s.name.as_str())
        .collect();
    match waiting.as_slice() {
        [] => None,
        [one] => Some(format!("waiting for you at step {one}")),
        many => Some(format!("waiting for you at steps {}", list_names(many))),
    }
}

/// The status lists being rendered.
#[derive(Default)]
struct Lists {
    executed: Vec<String>,
    started: Vec<String>,
    steps: Vec<StepStatus>,
}

/// The most a summary (`status.summary`, the MESSAGE column) holds, in characters.
pub(super) const SUMMARY_CHARS: usize = 120;

/// `message`'s first line, cut to [`SUMMARY_CHARS`] characters (ending `...` when cut).
pub(super) fn summary(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim_end();
    if line.chars().count() <= SUMMARY_CHARS {
        return line.to_string();
    }
    let kept: String = line.chars().take(SUMMARY_CHARS - 3).collect();
    format!("{}...", kept.trim_end())
}

/// When the first failed step of `mains` (the one the message names) ran past its timeout: how
/// the message says so, and the same naming where its limit came from (its own `timeout`, else
/// `spec.maxStepTimeout`). `None` for any other failure, a queue's timeout included.
fn timeout_source(mains: &[View<'_>]) -> Option<(String, String)> {
    let (view, unit, failure) = mains
        .iter()
        .find_map(|v| v.failures.first().map(|(unit, f)| (v, *unit, f)))?;
    match failure {
        Failure::TimedOut { why } if !why.starts_with(QUEUE_TIMEOUT_WHY) => {
            let said = failure.describe(&view.display(unit));
            let source = if view.steps[unit.node].timeout.is_some() {
                "the step's timeout; -1 for none".to_string()
            } else {
                format!("spec.maxStepTimeout, default {DEFAULT_MAX_STEP_TIMEOUT}; -1 for none")
            };
            let with_source = format!("{said} ({source})");
            Some((said, with_source))
        }
        _ => None,
    }
}

/// The `Completed`, `Failed` and `Finished` conditions for `phase`; a condition keeps its
/// `lastTransitionTime` while its status stays the same.
pub(super) fn conditions(
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

impl<'a> Planner<'a> {
    /// Renders the status lists of the runs `mains` (with the instances `created` in each)
    /// and of the exit steps into the plan's outcome; `total` counts every step of every run
    /// and the exit steps.
    pub(super) fn render_outcome(
        &mut self,
        (mains, created, held): (&[View<'a>], &[Vec<Unit>], &[Vec<Unit>]),
        exits: &Exits<'a>,
        (message, failed_by): (Option<String>, Option<Trigger>),
        total: usize,
    ) {
        let terminal = self.phase.is_terminal();
        let halted = match failed_by.or(self.halted_by) {
            Some(Trigger::Terminated) => (
                REASON_TERMINATED,
                "its pod was killed (spec.shutdown: Terminate)",
            ),
            Some(Trigger::DeadlineExceeded) => (
                DEADLINE_EXCEEDED,
                "stopped: the workflow ran past its activeDeadlineSeconds",
            ),
            _ => (REASON_STOPPED, "the workflow failed while it ran"),
        };
        let mut lists = Lists::default();
        for ((view, created), held) in mains.iter().zip(created).zip(held) {
            self.render(view, (created, held), terminal, halted, "", &mut lists);
        }
        let main_succeeded = lists.executed.len();
        if let Some(view) = &exits.view {
            let starts = (exits.created.as_slice(), exits.held.as_slice());
            self.render(view, starts, terminal, halted, "exit ", &mut lists);
        }
        let message = if self.phase == Phase::Completed && failed_by.is_none() {
            // Said as `progress` counts: exit steps too, skipped steps apart.
            let skipped = |view: &View<'_>| view.skipped.iter().filter(|s| **s).count();
            let tally = Tally {
                steps: mains.first().map_or(0, |v| v.dag.len()),
                runs: self.runs,
                skipped: mains.iter().map(skipped).sum(),
                exit_succeeded: lists.executed.len() - main_succeeded,
                exit_skipped: exits.view.as_ref().map_or(0, skipped),
                failed: mains.iter().map(View::tolerated_steps).sum(),
            };
            let said = with_tolerated(tally.message(), mains.iter().chain(&exits.view));
            // The transition's Event says the same.
            if let Some(event) = self
                .events
                .iter_mut()
                .rfind(|e| e.transition.trigger() == Trigger::AllStepsSucceeded)
            {
                let transition = event.transition;
                event.message = format!("{} -> {}: {said}", transition.from(), transition.to());
            }
            Some(said)
        } else if let Some((said, with_source)) = timeout_source(mains) {
            // Where the limit of the step that timed out came from, in the message and Event.
            for event in &mut self.events {
                event.message = event.message.replacen(&said, &with_source, 1);
            }
            message.map(|m| m.replacen(&said, &with_source, 1))
        } else if terminal {
            message
        } else {
            message.or_else(|| waiting_for_you(&lists.steps))
        };
        self.outcome = Some(Outcome {
            message,
            executed: lists.executed,
            started: lists.started,
            steps: lists.steps,
            total,
            failed_by,
        });
    }

    /// Adds the steps of `view` to the status lists: succeeded ones to `executed`; running ones
    /// and those being created (`created`) to `started` and `steps`; those the gate holds back
    /// (`held`) to `steps` as `Queued`; failed ones to `steps`; in a terminal workflow, steps
    /// still running are `halted` (reason and message). A step that fans out is one name in
    /// `executed` and `started` and one entry in `steps` (its items counted), plus an entry per
    /// failed item.
    fn render(
        &self,
        view: &View<'a>,
        (created, held): (&[Unit], &[Unit]),
        terminal: bool,
        halted: (&str, &str),
        prefix: &str,
        lists: &mut Lists,
    ) {
        let mut created_iter = created.iter().peekable();
        let mut held_iter = held.iter().peekable();
        // The failures the workflow survives read as any other in the status.
        let mut failed: Vec<&(Unit, Failure)> = view.failures.iter().collect();
        if !view.tolerated.is_empty() {
            failed.extend(&view.tolerated);
            failed.sort_by_key(|(unit, _)| *unit);
        }
        let mut failures_iter = failed.into_iter().peekable();
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
            let mut held_here = 0;
            while held_iter.next_if(|u| u.node == i).is_some() {
                held_here += 1;
            }
            if let Some(fan) = view.fans.get(&i) {
                let starts = (created_here, held_here);
                self.render_fan(view, i, fan, &failures, starts, terminal, halted, lists);
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
                // A daemon that was ready: done, running on or stopped at the workflow's end.
                (Some(job), None) if job.daemoned.is_some() => {
                    lists.steps.push(daemoned(&name, job));
                    lists.executed.push(name.clone());
                }
                // Stopped with the workflow (failFast, Terminate, its deadline, a rule).
                (Some(job), None) if self.halts(job, terminal) => {
                    lists.steps.push(self.halted_entry(&name, job, halted));
                }
                (Some(_), None) if view.backing_off.contains_key(&Unit::step(i)) => {
                    let waiting = &view.backing_off[&Unit::step(i)];
                    lists.steps.push(waiting.entry(&name));
                    lists.started.push(name.clone());
                }
                (Some(job), None) => match &job.state {
                    JobState::Succeeded => {
                        // Outputs another step names are recorded, so they are read once.
                        if let Some(outputs) = view.known.outputs.get(&i) {
                            lists.steps.push(succeeded_with(&name, job, outputs));
                        }
                        lists.executed.push(name.clone());
                    }
                    JobState::Active { .. } if !terminal => {
                        let entry = running_step_status(&name, job.name.clone(), job.suspended);
                        let mut entry = self.interactive(entry, view.kinds[i]);
                        if let Some(queue) = self.workflow.spec.queue_name.as_deref()
                            && job.suspended
                        {
                            entry.message = Some(
                                if crate::kueue::workflow_scoped(&self.workflow.spec) {
                                    format!(
                                        "stopped by Kueue's eviction of the workflow's Workload; waiting to be admitted again (queue {queue})"
                                    )
                                } else {
                                    format!("waiting for Kueue to admit its Job (queue {queue})")
                                },
                            );
                        }
                        lists.steps.push(entry);
                        lists.started.push(name.clone());
                    }
                    _ => {}
                },
                (None, None) if view.cached.contains_key(&i) => {
                    lists.steps.push(view.cached[&i].clone());
                    lists.executed.push(name.clone());
                }
                (None, None) if view.skipped[i] => lists
                    .steps
                    .push(skipped_entry(&name, view.steps[i].when.as_deref())),
                (None, None) => {}
            }
            // Steps being created count as started, so their Jobs appearing changes nothing.
            if created_here > 0 {
                let attempt = view.next_attempt.get(&Unit::step(i)).copied();
                let job = self.attempt_job_name(&name, attempt.unwrap_or(0));
                let entry = running_step_status(&name, job, false);
                lists.steps.push(self.interactive(entry, view.kinds[i]));
                lists.started.push(name);
            } else if held_here > 0 {
                lists.steps.push(self.queued_entry(&name));
            }
        }
    }

    /// Whether `job` is of a step the workflow stopped: marked stopped, being stopped by this
    /// plan, or still running in a `terminal` workflow.
    fn halts(&self, job: &ObservedJob, terminal: bool) -> bool {
        let running = matches!(job.state, JobState::Active { .. });
        self.is_stopped(job) || terminal && running
    }

    /// The entry of step `name` whose Job the workflow stopped, saying `halted` (reason and
    /// message): `Failed`, ended when it was stopped, so that its duration stops there. That
    /// is now for a Job this plan stops, else when the status recorded it stopped (the entry is
    /// rendered again while the exit steps run).
    fn halted_entry(&self, name: &str, job: &ObservedJob, halted: (&str, &str)) -> StepStatus {
        let recorded = || {
            (self.previous.steps.iter())
                .filter(|s| s.phase == StepPhase::Failed && s.job.as_ref() == Some(&job.name))
                .find_map(|s| s.finished_at.clone())
        };
        let stopped_at = job.stopped.then(recorded).flatten();
        StepStatus {
            phase: StepPhase::Failed,
            started_at: job.start_time.map(Time),
            finished_at: Some(stopped_at.unwrap_or(Time(self.now))),
            attempts: Some(job.attempts),
            reason: Some(halted.0.into()),
            message: Some(halted.1.into()),
            ..running_step_status(name, job.name.clone(), false)
        }
    }

    /// `entry`, a running step's, as an interactive step's when `kind` is one: phase
    /// `Interactive`, and a message saying what to do. Known when its Job is created, so its
    /// Job starting changes nothing in the status.
    fn interactive(&self, entry: StepStatus, kind: StepKind) -> StepStatus {
        match kind {
            StepKind::Interactive | StepKind::InteractiveScript => {}
            StepKind::Container
            | StepKind::Script
            | StepKind::Http
            | StepKind::Resource
            | StepKind::Fail => {
                return entry;
            }
            StepKind::Suspend => return self.suspended(entry),
        }
        if entry.phase != StepPhase::Running {
            return entry;
        }
        let workflow = self.workflow.name_any();
        let namespace = self.workflow.namespace().unwrap_or_default();
        let name = &entry.name;
        let message = format!(
            "waiting for you: `workflow-operator exec -n {namespace} {workflow} {name}` opens a \
             shell in its pod ({} runs the step's command), \
             `workflow-operator continue -n {namespace} {workflow} {name}` ends it",
            crate::agent::COMMAND_SCRIPT
        );
        StepStatus {
            phase: StepPhase::Interactive,
            message: Some(message),
            ..entry
        }
    }

    /// `entry`, a running suspend step's: `Running` (its Job is suspended, but the step is not
    /// queued: it waits by design), with a message saying how to resume it.
    fn suspended(&self, entry: StepStatus) -> StepStatus {
        if !matches!(entry.phase, StepPhase::Running | StepPhase::Queued) {
            return entry;
        }
        let workflow = self.workflow.name_any();
        let namespace = self.workflow.namespace().unwrap_or_default();
        let spec = &self.workflow.spec;
        let step =
            (spec.containers.iter().chain(&spec.on_exit)).find(|s| s.step_name == entry.name);
        let flags = step.map(suspend::resume_flags).unwrap_or_default();
        StepStatus {
            phase: StepPhase::Running,
            reason: Some("Suspended".to_string()),
            message: Some(format!(
                "suspended: `workflow-operator resume -n {namespace} {workflow}{flags}` resumes it"
            )),
            ..entry
        }
    }

    /// [`Planner::render`] for step `i` of `view`, which fans out over `fan`'s items:
    /// `created` of them being created and `held` held back by the gate, `failures` its failed
    /// items (or its own failure, for a `withParam` that is not a list or a `when` that
    /// fails). Its entry counts its items; each failed item has its own (`NAME[i]`); succeeded
    /// and running items have none, so a step of 10,000 items costs the status a few entries.
    /// It is `Queued` while the gate holds back its items and none runs.
    #[allow(clippy::too_many_arguments)]
    fn render_fan(
        &self,
        view: &View<'a>,
        i: usize,
        fan: &Fan<'a>,
        failures: &[(Unit, &Failure)],
        (created, held): (usize, usize),
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
        let total = fan.items.as_ref().map_or(0, ItemList::len) as u32;
        let skipped = fan.skipped.len() as u32;
        if view.progress.is_done(i) && failures.is_empty() {
            if skipped > 0 {
                // Its entry counts the items skipped, which its step's row shows.
                lists.steps.push(StepStatus {
                    phase: StepPhase::Succeeded,
                    job: None,
                    items: Some(ItemCounts {
                        total,
                        succeeded: fan.succeeded,
                        skipped,
                        ..ItemCounts::default()
                    }),
                    ..running_step_status(&name, String::new(), false)
                });
            }
            lists.executed.push(name);
            succeeded_items(view, i, fan, lists);
            skipped_items(view, i, fan, lists);
            return;
        }
        let running = fan.running as usize + created;
        let item_failures = failures.iter().filter(|(u, _)| u.item.is_some()).count();
        let stopped = fan.stopped > 0
            || !self.stopping.is_empty() && fan.jobs.values().any(|j| self.is_stopped(j));
        if running == 0 && item_failures == 0 && held == 0 && !stopped {
            // Not started, or failed as a whole (its `withParam`, its `when`).
            for (_, failure) in failures {
                lists.steps.extend(failure.entry_without_job(&name));
            }
            return;
        }
        let counts = ItemCounts {
            total,
            succeeded: fan.succeeded,
            running: if terminal || stopped {
                0
            } else {
                running as u32
            },
            failed: item_failures as u32,
            skipped,
        };
        let halting = (terminal || stopped) && item_failures == 0;
        let (phase, reason, message) = if item_failures > 0 {
            let message = format!("{item_failures} of {} items failed", counts.total);
            (StepPhase::Failed, None, Some(message))
        } else if halting {
            (
                StepPhase::Failed,
                Some(halted.0.to_string()),
                Some(halted.1.to_string()),
            )
        } else if running == 0 {
            (StepPhase::Queued, None, Some(self.gate.message.clone()))
        } else {
            (StepPhase::Running, None, None)
        };
        lists.steps.push(StepStatus {
            phase,
            reason,
            message,
            job: None,
            items: Some(counts),
            finished_at: halting.then(|| self.fan_stopped_at(&name)),
            ..running_step_status(&name, String::new(), false)
        });
        if running > 0 && !terminal && !stopped {
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
        succeeded_items(view, i, fan, lists);
        skipped_items(view, i, fan, lists);
    }

    /// When the workflow stopped the items of step `name` that fans out: when its status entry
    /// says so, else now.
    fn fan_stopped_at(&self, name: &str) -> Time {
        (self.previous.steps.iter())
            .filter(|s| s.name == name && s.phase == StepPhase::Failed && s.items.is_some())
            .find_map(|s| s.finished_at.clone())
            .unwrap_or(Time(self.now))
    }

    /// The entry of step (or item) `name` whose Job the gate holds back: `Queued`, no Job,
    /// saying why.
    fn queued_entry(&self, name: &str) -> StepStatus {
        StepStatus {
            phase: StepPhase::Queued,
            message: Some(self.gate.message.clone()),
            job: None,
            ..running_step_status(name, String::new(), false)
        }
    }

    pub(super) fn finish(self) -> Plan {
        let previous = self.previous;
        let generation = self.workflow.metadata.generation;
        let phase_changed = previous.workflow_status != Some(self.phase);
        let status_changed = match &previous.status_changed {
            Some(at) if !phase_changed => at.clone(),
            _ => format!("{:.0}", self.now),
        };
        let (rules, parallelism, metrics) = self.rules_status();
        let fired = self.ruled.map(|(d, _)| d.fired).unwrap_or_default();
        let status = match self.outcome {
            Some(outcome) => WorkFlowStatus {
                outputs: global_outputs(&self.workflow.spec.containers, &outcome.steps),
                progress: Some(format!("{}/{}", outcome.executed.len(), outcome.total)),
                conditions: conditions(
                    &previous.conditions,
                    self.phase,
                    outcome.failed_by,
                    outcome.message.as_deref(),
                    generation,
                    self.now,
                ),
                summary: outcome.message.as_deref().map(summary),
                message: outcome.message,
                executed: outcome.executed,
                started: outcome.started,
                steps: outcome.steps,
                workflow_status: Some(self.phase),
                status_changed: Some(status_changed),
                observed_generation: generation,
                run: Some(self.run.to_string()),
                retry: (self.workflow.spec.retry != 0).then_some(self.workflow.spec.retry),
                resolved_templates: previous.resolved_templates.clone(),
                resolved_config_map_keys: previous.resolved_config_map_keys.clone(),
                started_at: self.started_at.map(Time),
                run_number: self.run_number,
                run_changed_at: self.run_changed_at.map(Time),
                artifact_repository: previous.artifact_repository.clone(),
                artifacts_deleted_at: previous.artifacts_deleted_at.clone(),
                rules,
                parallelism,
                metrics,
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
            fired,
        }
    }
}

/// The entry `name` of a step (or an item) whose `job` succeeded, holding its `outputs`.
fn succeeded_with(name: &str, job: &ObservedJob, outputs: &Outputs) -> StepStatus {
    StepStatus {
        phase: StepPhase::Succeeded,
        started_at: job.start_time.map(Time),
        finished_at: job.finished_at.map(Time),
        outputs: outputs.clone(),
        ..running_step_status(name, job.name.clone(), false)
    }
}

/// The entry of daemon step `name`, whose `job`'s pod was ready: `Succeeded`, reason
/// `Daemoned`, with its pod's IP (Argo's node `daemoned: true`), while it runs and once the
/// workflow's end stopped it.
fn daemoned(name: &str, job: &ObservedJob) -> StepStatus {
    let ip = job.daemoned.map(|ip| ip.to_string());
    let message = match (job.stopped, &ip) {
        (true, _) => "a daemon: stopped at the workflow's end".to_string(),
        (false, Some(ip)) => format!("a daemon: ready, running at {ip}"),
        (false, None) => "a daemon: ready".to_string(),
    };
    StepStatus {
        phase: StepPhase::Succeeded,
        started_at: job.start_time.map(Time),
        reason: Some(REASON_DAEMONED.to_string()),
        message: Some(message),
        ip,
        ..running_step_status(name, job.name.clone(), false)
    }
}

/// The entries of the succeeded items of `fan` (step `i` of `view`) whose outputs another step
/// reads, `NAME[i]` with their outputs: recorded, so each item's are read once (and are still
/// there once its pod is gone).
fn succeeded_items(view: &View<'_>, i: usize, fan: &Fan<'_>, lists: &mut Lists) {
    for (&item, outputs) in &fan.outputs {
        let Some(job) = fan.jobs.get(&item) else {
            continue;
        };
        let name = view.display(Unit {
            node: i,
            item: Some(item),
        });
        lists.steps.push(succeeded_with(&name, job, outputs));
    }
}

/// The entries of the items of `fan` (step `i` of `view`) its `when` skipped, `NAME[i]`
/// `Skipped`, as a step its `when` skipped reads.
fn skipped_items(view: &View<'_>, i: usize, fan: &Fan<'_>, lists: &mut Lists) {
    let when = view.steps[i].when.as_deref();
    for &item in &fan.skipped {
        let name = view.display(Unit {
            node: i,
            item: Some(item),
        });
        lists.steps.push(skipped_entry(&name, when));
    }
}

/// The workflow's outputs: each global output (`globalName`) of `steps` whose step succeeded
/// with it recorded in its entry of `entries`; `None` without any.
fn global_outputs(steps: &[Step], entries: &[StepStatus]) -> Option<Box<WorkflowOutputs>> {
    let declared = crate::template::global_outputs(steps);
    if declared.is_empty() {
        return None;
    }
    let mut outputs = WorkflowOutputs::default();
    for (kind, name, step, key) in declared {
        let entry = entries
            .iter()
            .find(|e| e.name == step && e.phase == StepPhase::Succeeded);
        let Some(value) = entry.and_then(|e| e.outputs.get(&key)) else {
            continue;
        };
        match key.strip_prefix(crate::outputs::ARTIFACT_PREFIX) {
            Some(artifact) if kind == "artifacts" => outputs.artifacts.push(GlobalArtifact {
                name,
                step,
                artifact: artifact.to_string(),
            }),
            _ => outputs.parameters.push(GlobalParameter {
                name,
                value: value.clone(),
            }),
        }
    }
    (outputs != WorkflowOutputs::default()).then(|| Box::new(outputs))
}
