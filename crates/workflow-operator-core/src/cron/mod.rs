//! Schedules of CronWorkFlows, and what a tick of the controller does with one: pure, from
//! the CronWorkFlow and the time, never from memory.
//!
//! Calendar arithmetic (time zones, DST) is croner's, on jiff: a fixed time that does not exist
//! (clocks forward) runs once, at the first instant after the gap; one that occurs twice (clocks
//! back) runs once, at its first occurrence. A pattern with a wildcard or a step in its hours
//! or minutes runs at each matching instant of real time (an hourly run runs twice in the hour
//! that repeats, none in the hour that is skipped). `@every DURATION` counts from an anchor (the
//! CronWorkFlow's creation) in real time, whatever the zone.

mod lint;
pub mod plan;
mod run;
pub mod run_summary;
#[cfg(test)]
mod tests;

use std::str::FromStr;

use croner::Cron;
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::crd::{CatchUp, CronWorkFlowSpec};
use crate::names;

pub use run::{run_metadata, run_of, run_problems, run_spec, spec_field};

/// The most missed runs `catchUp: All` starts at once.
pub const MAX_CATCH_UP: usize = 100;

/// How late a run may start and still be on time rather than missed (`catchUp: None` starts
/// only those).
pub const ON_TIME: SignedDuration = SignedDuration::from_secs(10);

/// A parsed `spec.schedules` in `spec.timezone`.
#[derive(Debug, Clone)]
pub struct Schedule {
    entries: Vec<Entry>,
    zone: TimeZone,
}

#[derive(Debug, Clone)]
enum Entry {
    Cron(Box<Cron>),
    /// `@every`: `anchor + k * period`.
    Every {
        period: SignedDuration,
        anchor: Timestamp,
    },
}

impl Schedule {
    /// Parses `spec`'s schedules and time zone; `anchor` is when `@every` counts from.
    ///
    /// # Errors
    /// Each schedule that does not parse and a time zone that is not known, named.
    pub fn parse(spec: &CronWorkFlowSpec, anchor: Timestamp) -> Result<Schedule, Vec<String>> {
        let mut problems = Vec::new();
        let zone = match spec.timezone.as_deref() {
            None | Some("") => TimeZone::UTC,
            Some(name) => TimeZone::get(name).unwrap_or_else(|e| {
                problems.push(format!("timezone {name:?}: {e}"));
                TimeZone::UTC
            }),
        };
        let mut entries = Vec::new();
        for (i, text) in spec.schedules.iter().enumerate() {
            match entry(text.trim(), anchor) {
                Ok(entry) => entries.push(entry),
                Err(e) => problems.push(format!("schedules[{i}] {text:?}: {e}")),
            }
        }
        if entries.is_empty() && problems.is_empty() {
            problems.push("schedules: at least one".into());
        }
        if problems.is_empty() {
            Ok(Schedule { entries, zone })
        } else {
            Err(problems)
        }
    }

    /// The time zone the cron expressions are read in (`spec.timezone`, else UTC).
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The first scheduled time strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        self.entries
            .iter()
            .filter_map(|e| self.entry_next(e, after))
            .min()
    }

    fn entry_next(&self, entry: &Entry, after: Timestamp) -> Option<Timestamp> {
        match entry {
            Entry::Cron(cron) => cron
                .find_next_occurrence(&after.to_zoned(self.zone.clone()), false)
                .ok()
                .map(|z| z.timestamp()),
            Entry::Every { period, anchor } => {
                let since = after.duration_since(*anchor);
                let periods = if since.is_negative() {
                    0
                } else {
                    since.as_nanos() / period.as_nanos() + 1
                };
                let offset = SignedDuration::from_nanos_i128(periods * period.as_nanos());
                anchor.checked_add(offset).ok()
            }
        }
    }

    /// The newest `limit` scheduled times in `(after, until]`, oldest first: found backwards
    /// from `until`, so a long gap costs `limit` steps, not one per time passed.
    pub fn newest_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        let mut times = Vec::new();
        let (mut at, mut inclusive) = (until, true);
        while times.len() < limit {
            match self.previous(at, inclusive) {
                Some(time) if time > after => {
                    times.push(time);
                    (at, inclusive) = (time, false);
                }
                _ => break,
            }
        }
        times.reverse();
        times
    }

    /// The latest scheduled time before `before` (or at it, when `inclusive`).
    fn previous(&self, before: Timestamp, inclusive: bool) -> Option<Timestamp> {
        self.entries
            .iter()
            .filter_map(|e| self.entry_previous(e, before, inclusive))
            .max()
    }

    fn entry_previous(
        &self,
        entry: &Entry,
        before: Timestamp,
        inclusive: bool,
    ) -> Option<Timestamp> {
        match entry {
            Entry::Cron(cron) => cron
                .find_previous_occurrence(&before.to_zoned(self.zone.clone()), inclusive)
                .ok()
                .map(|z| z.timestamp()),
            Entry::Every { period, anchor } => {
                // Its times are `anchor + k * period` for k >= 1.
                let since = before.duration_since(*anchor);
                let mut periods = since.as_nanos().div_euclid(period.as_nanos());
                let at = |k: i128| {
                    anchor
                        .checked_add(SignedDuration::from_nanos_i128(k * period.as_nanos()))
                        .ok()
                };
                if !inclusive && at(periods) == Some(before) {
                    periods -= 1;
                }
                (periods >= 1).then(|| at(periods)).flatten()
            }
        }
    }

    /// The scheduled times in `(after, until]`, oldest first, at most `limit`.
    pub fn times_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        let mut times = Vec::new();
        let mut at = after;
        while times.len() < limit {
            match self.next_after(at) {
                Some(next) if next <= until => {
                    times.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        times
    }
}

/// One schedule entry.
fn entry(text: &str, anchor: Timestamp) -> Result<Entry, String> {
    lint::check(text)?;
    if let Some(every) = text.strip_prefix("@every") {
        let period = SignedDuration::from_str(every.trim())
            .map_err(|e| format!("not a duration ({e}): write e.g. @every 90s or @every 1h30m"))?;
        if period < SignedDuration::from_secs(1) {
            return Err("@every needs at least 1s".into());
        }
        return Ok(Entry::Every { period, anchor });
    }
    if text.split_whitespace().count() != 5 && !text.starts_with('@') {
        return Err(
            "a cron expression has five fields: minute hour day-of-month month day-of-week".into(),
        );
    }
    Cron::from_str(text)
        .map(|cron| Entry::Cron(Box::new(cron)))
        .map_err(|e| e.to_string())
}

/// What identifies a schedule: its entries and zone. A new value is an edit.
pub fn schedule_hash(spec: &CronWorkFlowSpec) -> String {
    let mut parts: Vec<&str> = spec.schedules.iter().map(String::as_str).collect();
    parts.push(spec.timezone.as_deref().unwrap_or("UTC"));
    names::hash_of(&parts)
}

/// What one tick decides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Due {
    /// The scheduled times to start a run for now, oldest first.
    pub start: Vec<Timestamp>,
    /// The scheduled times passed that no run starts for (late past the deadline, or not
    /// caught up), for an Event.
    pub missed: Vec<Timestamp>,
    /// The new `status.lastScheduleTime`: the latest scheduled time passed.
    pub last: Option<Timestamp>,
}

/// How many whole seconds past `scheduled` `now` is: 0 within the scheduled second.
fn seconds_late(scheduled: Timestamp, now: Timestamp) -> i64 {
    now.duration_since(scheduled).as_secs()
}

/// What is due at `now` for `schedule`, whose last handled time is `since` (the
/// `lastScheduleTime`, or when the schedule took effect): the times in `(since, now]` are each
/// started or missed, once. `resumed` (the first tick after a suspend) starts at most the
/// latest, whatever `catchUp` says but `None`.
pub fn due(
    schedule: &Schedule,
    since: Timestamp,
    now: Timestamp,
    deadline: Option<i64>,
    catch_up: CatchUp,
    resumed: bool,
) -> Due {
    // More than this are all missed but the latest ones: a year of minutes is not listed, and
    // when more passed, the newest are (the latest is the one `Latest` starts).
    let limit = 10 * MAX_CATCH_UP;
    let mut passed = schedule.times_between(since, now, limit);
    if passed.len() == limit {
        passed = schedule.newest_between(since, now, limit);
    }
    let Some(&latest) = passed.last() else {
        return Due::default();
    };
    // The deadline limits late runs only, as the CronJob controller's `syncCronJob` does
    // (kubernetes pkg/controller/cronjob/cronjob_controllerv2.go: `tooLate` is
    // `scheduledTime + startingDeadlineSeconds` before now) and Argo's
    // (argo-workflows workflow/cron/operator.go: `shouldOutstandingWorkflowsBeRun` checks it
    // for missed executions only; on-time ones fire from its scheduler unchecked). On time is
    // the scheduled second itself, where the aligned timer ticks milliseconds after the time:
    // lateness counts in whole seconds past it, so `0` starts on-time runs and no late one.
    let in_time = |t: &Timestamp| deadline.is_none_or(|d| seconds_late(*t, now) <= d);
    let start: Vec<Timestamp> = match (catch_up, resumed) {
        (CatchUp::None, _) => passed
            .iter()
            .copied()
            .filter(|t| *t == latest && now.duration_since(*t) <= ON_TIME && in_time(t))
            .collect(),
        (CatchUp::Latest, _) | (CatchUp::All, true) => passed
            .iter()
            .copied()
            .filter(|t| *t == latest && in_time(t))
            .collect(),
        (CatchUp::All, false) => {
            let eligible: Vec<Timestamp> = passed.iter().copied().filter(in_time).collect();
            let skip = eligible.len().saturating_sub(MAX_CATCH_UP);
            eligible[skip..].to_vec()
        }
    };
    let missed = passed
        .iter()
        .copied()
        .filter(|t| !start.contains(t))
        .collect();
    Due {
        start,
        missed,
        last: Some(latest),
    }
}
