//! One tick of a CronWorkFlow as plain data: its spec and status, its runs as they exist, and
//! the time in; the runs to create, terminate and delete, the Events and the new status out.
//! Deciding from the runs that exist (never from memory) is what makes a restarted operator, or
//! a second replica, do nothing twice: a run for a scheduled time that exists counts as started.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::{Due, Schedule, due, run_problems, schedule_hash};
use crate::crd::{ConcurrencyPolicy, CronWorkFlow, CronWorkFlowStatus, RunRef};
use crate::lifecycle::Phase;

/// A run of the CronWorkFlow as it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The WorkFlow's name.
    pub name: String,
    pub uid: Option<String>,
    /// The scheduled time it was started for (its label), unix seconds.
    pub scheduled: i64,
    /// Its phase (`None` before the operator wrote one).
    pub phase: Option<Phase>,
    /// When its phase last changed, for a finished run.
    pub finished_at: Option<Timestamp>,
    /// It was already asked to terminate (`spec.shutdown: Terminate`).
    pub terminating: bool,
}

impl Run {
    /// Not finished (not `Completed` or `Failed`).
    pub fn is_active(&self) -> bool {
        !self.phase.is_some_and(Phase::is_terminal)
    }
}

/// What a tick does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tick {
    /// Scheduled times (unix seconds) to create a run for, oldest first.
    pub create: Vec<i64>,
    /// Active runs to terminate first (`Replace`).
    pub terminate: Vec<String>,
    /// Finished runs beyond the history limits, oldest first.
    pub delete: Vec<String>,
    /// Events: `(reason, message)`.
    pub events: Vec<(&'static str, String)>,
    /// The new status, when it differs.
    pub status: Option<CronWorkFlowStatus>,
}

/// The condition type saying whether the schedule parses and runs start.
pub const CONDITION_READY: &str = "Ready";

/// The `Ready` reason (and the Event's) of a `workflowSpec` every run would fail for.
pub const INVALID_WORKFLOW_SPEC: &str = "InvalidWorkflowSpec";

/// Plans one tick of `cron` at `now` with its `runs`.
///
/// A schedule that does not parse stops everything (`Ready` False, `InvalidSchedule`). A
/// `workflowSpec` every run would fail for ([`run_problems`]) starts no run: its times pass as
/// missed, so fixing it fires nothing by itself (`Ready` False, `InvalidWorkflowSpec`, and an
/// Event when the problem is new).
pub fn tick(cron: &CronWorkFlow, runs: &[Run], now: Timestamp) -> Tick {
    let old = cron.status.clone().unwrap_or_default();
    let created = cron
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut tick = Tick::default();
    let mut status = old.clone();
    let schedule = match Schedule::parse(&cron.spec, created) {
        Ok(schedule) => schedule,
        Err(problems) => {
            let message = problems.join("; ");
            status.conditions = vec![ready(
                false,
                "InvalidSchedule",
                &message,
                now,
                &old.conditions,
            )];
            status.next_schedule_time = None;
            tick.status = (status != old).then_some(status);
            return tick;
        }
    };
    let problems = run_problems(cron);
    let since = since_edit(cron, &mut status, now, created);
    if cron.spec.suspend {
        status.suspended_at = old.suspended_at.clone().or(Some(Time(now)));
    } else {
        let due = due_now(cron, &schedule, since, now, &mut status);
        // Times pass as missed while no run can run: fixing the spec fires nothing by itself.
        if problems.is_empty() {
            let replaced = start(cron, runs, &due.start, &mut tick);
            let mut missed = due.missed;
            missed.extend(replaced);
            missed.sort();
            if !missed.is_empty() {
                tick.events.push(("RunsMissed", missed_message(&missed)));
            }
        }
    }
    tick.delete = beyond_history(cron, runs);
    let after = status
        .last_schedule_time
        .as_ref()
        .map_or(now, |t| t.0.max(now));
    status.next_schedule_time = (!cron.spec.suspend)
        .then(|| schedule.next_after(after).map(Time))
        .flatten();
    status.active = active_after(cron, runs, &tick);
    status.active_count = i32::try_from(status.active.len()).unwrap_or(i32::MAX);
    status.last_run_time = last_run_time(runs, &tick, &old);
    status.last_successful_time = runs
        .iter()
        .filter(|r| r.phase == Some(Phase::Completed))
        .filter_map(|r| r.finished_at)
        .max()
        .map(Time)
        .or(old.last_successful_time.clone());
    status.conditions = vec![readiness(&problems, now, &old)];
    if !problems.is_empty() && status.conditions != old.conditions {
        tick.events
            .push((INVALID_WORKFLOW_SPEC, status.conditions[0].message.clone()));
    }
    tick.status = (status != old).then_some(status);
    tick
}

/// The scheduled time of the newest run, of those that exist, those the tick creates and the
/// one the status recorded (its run may be deleted since): `None` while no run was started.
fn last_run_time(runs: &[Run], tick: &Tick, old: &CronWorkFlowStatus) -> Option<Time> {
    let newest = (runs.iter().map(|r| r.scheduled))
        .chain(tick.create.iter().copied())
        .max()
        .and_then(|second| Timestamp::from_second(second).ok());
    let recorded = old.last_run_time.as_ref().map(|t| t.0);
    newest.max(recorded).map(Time)
}

/// Whether a change of `run` is one `cron`'s status must follow at once rather than at the next
/// scheduled time: an active run the status does not list (started by hand, or restarted), one
/// that ended while listed, one that succeeded after `lastSuccessfulTime`, or one that ended
/// with `runs` (all of them) beyond the history limits. A running run's progress is none of
/// these, and costs a look at `status.active`; `runs` is read for an ended run only.
pub fn follows_run(cron: &CronWorkFlow, run: &Run, runs: impl FnOnce() -> Vec<Run>) -> bool {
    let status = cron.status.as_ref();
    let listed = status.is_some_and(|s| s.active.iter().any(|r| r.name == run.name));
    if run.is_active() {
        // One asked to terminate is on its way out; the tick that asked left it unlisted.
        return !listed && !run.terminating;
    }
    let last_success = status.and_then(|s| s.last_successful_time.as_ref());
    let succeeded_since = run.phase == Some(Phase::Completed)
        && run
            .finished_at
            .is_some_and(|at| last_success.is_none_or(|last| at > last.0));
    listed || succeeded_since || !beyond_history(cron, &runs()).is_empty()
}

/// Where the times due count from: `status.lastScheduleTime`, or the creation; `now` after an
/// edit of the schedule (seen by its hash changing, recorded in `status`), which so fires
/// nothing by itself.
fn since_edit(
    cron: &CronWorkFlow,
    status: &mut CronWorkFlowStatus,
    now: Timestamp,
    created: Timestamp,
) -> Timestamp {
    let hash = schedule_hash(&cron.spec);
    let since = match (&status.schedule_hash, &status.last_schedule_time) {
        (Some(before), _) if *before != hash => {
            status.last_schedule_time = Some(Time(now));
            now
        }
        (_, Some(last)) => last.0,
        (_, None) => created,
    };
    status.schedule_hash = Some(hash);
    since
}

/// The times due in `(since, now]` of an unsuspended `cron`, each to start or missed once;
/// `status.lastScheduleTime` moves to the latest, and a resume is seen by `suspendedAt`.
fn due_now(
    cron: &CronWorkFlow,
    schedule: &Schedule,
    since: Timestamp,
    now: Timestamp,
    status: &mut CronWorkFlowStatus,
) -> Due {
    let resumed = status.suspended_at.take().is_some();
    let due = due(
        schedule,
        since,
        now,
        cron.spec.starting_deadline_seconds,
        cron.spec.catch_up,
        resumed,
    );
    if let Some(last) = due.last {
        status.last_schedule_time = Some(Time(last));
    }
    due
}

/// The `Ready` condition: true, or false naming what every run would fail for.
fn readiness(problems: &[String], now: Timestamp, old: &CronWorkFlowStatus) -> Condition {
    if problems.is_empty() {
        let message = "the schedule parses; runs start on time";
        ready(true, "Scheduled", message, now, &old.conditions)
    } else {
        ready(
            false,
            INVALID_WORKFLOW_SPEC,
            &problems.join("; "),
            now,
            &old.conditions,
        )
    }
}

/// Decides, per due time, whether a run starts (`Allow`), is skipped (`Forbid`, a run active) or
/// replaces the active ones (`Replace`); a time whose run exists already counts as started.
/// Returns the times `Replace` does not start because a later one due in the same tick would
/// replace their runs at once.
fn start(
    cron: &CronWorkFlow,
    runs: &[Run],
    times: &[Timestamp],
    tick: &mut Tick,
) -> Vec<Timestamp> {
    let new: Vec<Timestamp> = times
        .iter()
        .copied()
        .filter(|time| runs.iter().all(|r| r.scheduled != time.as_second()))
        .collect();
    let active: Vec<&str> = runs
        .iter()
        .filter(|r| r.is_active())
        .map(|r| r.name.as_str())
        .collect();
    match cron.spec.concurrency_policy {
        ConcurrencyPolicy::Replace => return replace(runs, &new, tick),
        ConcurrencyPolicy::Forbid => {
            for time in &new {
                if active.is_empty() && tick.create.is_empty() {
                    tick.create.push(time.as_second());
                    continue;
                }
                let by = if active.is_empty() {
                    "a run started in this same tick".to_string()
                } else {
                    active.join(", ")
                };
                tick.events.push((
                    "RunSkipped",
                    format!("{time}: skipped, {by} still running (concurrencyPolicy Forbid)"),
                ));
            }
        }
        ConcurrencyPolicy::Allow => tick.create.extend(new.iter().map(|t| t.as_second())),
    }
    Vec::new()
}

/// `Replace`: the active runs are asked to terminate and the latest of the `new` times starts.
/// Each earlier one is returned, not started: its run would be replaced at once.
fn replace(runs: &[Run], new: &[Timestamp], tick: &mut Tick) -> Vec<Timestamp> {
    let Some((&latest, earlier)) = new.split_last() else {
        return Vec::new();
    };
    for run in runs.iter().filter(|r| r.is_active() && !r.terminating) {
        tick.terminate.push(run.name.clone());
        tick.events.push((
            "RunReplaced",
            format!(
                "{}: terminated, replaced by the run of {latest} (concurrencyPolicy Replace)",
                run.name
            ),
        ));
    }
    tick.create.push(latest.as_second());
    earlier.to_vec()
}

/// The Event message of times passed that no run started for.
fn missed_message(missed: &[Timestamp]) -> String {
    let shown: Vec<String> = missed.iter().take(5).map(ToString::to_string).collect();
    let more = missed.len().saturating_sub(shown.len());
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "{} scheduled time(s) passed without a run (late past startingDeadlineSeconds, not caught up per catchUp, suspended, or due with a later time that would replace its run at once under concurrencyPolicy Replace): {}{tail}",
        missed.len(),
        shown.join(", ")
    )
}

/// Finished runs beyond `successfulRunsHistoryLimit` (default 3) and
/// `failedRunsHistoryLimit` (default 1), the oldest first.
fn beyond_history(cron: &CronWorkFlow, runs: &[Run]) -> Vec<String> {
    let spec = &cron.spec;
    beyond_limits(
        runs,
        spec.successful_runs_history_limit,
        spec.failed_runs_history_limit,
    )
}

/// Finished `runs` beyond `successful` (default 3) succeeded and `failed` (default 1) failed
/// ones kept, the oldest (by `Run::scheduled`) first: the history limits of a CronWorkFlow and
/// of a WorkFlowTrigger.
pub fn beyond_limits(runs: &[Run], successful: Option<i32>, failed: Option<i32>) -> Vec<String> {
    let mut delete = Vec::new();
    for (phase, limit) in [
        (Phase::Completed, successful.unwrap_or(3)),
        (Phase::Failed, failed.unwrap_or(1)),
    ] {
        let mut finished: Vec<&Run> = runs.iter().filter(|r| r.phase == Some(phase)).collect();
        finished.sort_by_key(|r| r.scheduled);
        let extra = finished
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        delete.extend(finished[..extra].iter().map(|r| r.name.clone()));
    }
    delete
}

/// The active runs once the tick is carried out.
fn active_after(cron: &CronWorkFlow, runs: &[Run], tick: &Tick) -> Vec<RunRef> {
    let name = cron.metadata.name.as_deref().unwrap_or_default();
    let mut active: Vec<(i64, RunRef)> = runs
        .iter()
        .filter(|r| r.is_active() && !tick.terminate.contains(&r.name))
        .map(|r| {
            (
                r.scheduled,
                RunRef {
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                },
            )
        })
        .collect();
    active.extend(tick.create.iter().map(|&t| {
        (
            t,
            RunRef {
                name: crate::names::cron_run_name(name, t),
                uid: None,
            },
        )
    }));
    active.sort_by_key(|(t, _)| *t);
    active.into_iter().map(|(_, r)| r).collect()
}

/// The `Ready` condition of a CronWorkFlow or a WorkFlowTrigger whose conditions were `old`,
/// keeping its transition time while its status stays.
pub(crate) fn ready(
    ok: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
    old: &[Condition],
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = old
        .iter()
        .find(|c| c.type_ == CONDITION_READY && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: CONDITION_READY.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: since,
        observed_generation: None,
    }
}
