//! Attempts: what becomes of a failed attempt of a step with a `retryStrategy`. It is tried
//! again, at once or after its back-off (the step still counts as running), or the step fails,
//! its failure saying why it was not tried again.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::crd::StepStatus;
use crate::failure_cause::{DEADLINE_EXCEEDED, REASON_EVICTED};

use super::failure::Failure;
use super::{
    ObservedJob, REASON_BACKING_OFF, REASON_CANNOT_START, REASON_JOB_REFUSED, running_step_status,
};
use crate::retry::{Cause, LastRetry, Strategy, Verdict};

/// A failed instance waiting for its next attempt.
#[derive(Debug, Clone)]
pub(super) struct BackingOff {
    /// The Job of the attempt that failed.
    pub(super) job: String,
    /// The attempt to start (1 for the first retry).
    pub(super) attempt: u32,
    /// When; `None` while the failed attempt's Job is still being stopped.
    pub(super) at: Option<Timestamp>,
    /// The back-off.
    pub(super) wait: SignedDuration,
    /// How the attempt failed, as the step's failure would say it.
    pub(super) failure: String,
}

impl BackingOff {
    /// The status entry of instance `name` while it waits: `Running`, reason `BackingOff`,
    /// saying how its attempt failed and when the next starts.
    pub(super) fn entry(&self, name: &str) -> StepStatus {
        let next = match self.at {
            Some(at) => format!("at {at:.0} (back-off {:#})", self.wait),
            None => "once its Job has stopped".to_string(),
        };
        StepStatus {
            reason: Some(REASON_BACKING_OFF.into()),
            message: Some(format!("{}; attempt {} {next}", self.failure, self.attempt)),
            ..running_step_status(name, self.job.clone(), false)
        }
    }
}

/// What becomes of a failed attempt.
pub(super) enum AfterFailure {
    /// Start attempt `n` now.
    Retry(u32),
    /// Start the next attempt later.
    BackOff(BackingOff),
    /// The step (or item) fails.
    Fail(Failure),
}

/// The reasons of a container or pod that could not run the program to its end, although an
/// exit code may come with them.
const POD_REASONS: [&str; 5] = [
    "OOMKilled",
    REASON_EVICTED,
    "StartError",
    "ContainerCannotRun",
    DEADLINE_EXCEEDED,
];

/// How `failure` failed, as `retryPolicy` tells failures apart.
fn cause(failure: &Failure) -> Cause {
    match failure {
        Failure::Failed {
            reason,
            exit_code: Some(_),
            ..
        } if !POD_REASONS.contains(&reason.as_str()) => Cause::Program,
        Failure::Failed { .. } | Failure::TimedOut { .. } | Failure::CannotStart { .. } => {
            Cause::Pod
        }
        Failure::Refused { .. } | Failure::Data { .. } => Cause::Final,
    }
}

/// What the strategy's expression reads of `failure` of `job`.
fn last_retry<'f>(failure: &'f Failure, job: &ObservedJob, ended: Timestamp) -> LastRetry<'f> {
    let (exit_code, reason, message) = match failure {
        Failure::Failed {
            reason,
            message,
            exit_code,
        } => (*exit_code, reason.as_str(), message.as_str()),
        Failure::TimedOut { why } => (None, DEADLINE_EXCEEDED, why.as_str()),
        Failure::CannotStart { why } => (None, REASON_CANNOT_START, why.as_str()),
        Failure::Refused { .. } => (None, REASON_JOB_REFUSED, ""),
        Failure::Data { reason, why } => (None, *reason, why.as_str()),
    };
    let started = job.start_time.unwrap_or(job.created);
    LastRetry {
        exit_code,
        reason,
        message,
        duration: ended.duration_since(started).as_secs(),
    }
}

/// Decides what becomes of `failure` of `job`, the latest attempt of `unit` (named `name` in
/// the status) under `strategy`, at `now`; `jobs` are the scope's Jobs, where its first
/// attempt is.
pub(super) fn after_failure(
    strategy: &Strategy,
    (unit_name, job): (&str, &ObservedJob),
    failure: Failure,
    jobs: &[&ObservedJob],
    now: Timestamp,
) -> AfterFailure {
    let Some(ended) = job.finished_at else {
        // Still being stopped (past its timeout, or not started in time): decided once it
        // ended, by the pass its end brings.
        return match cause(&failure) {
            Cause::Final => AfterFailure::Fail(failure),
            _ => AfterFailure::BackOff(BackingOff {
                job: job.name.clone(),
                attempt: job.attempt + 1,
                at: None,
                wait: SignedDuration::ZERO,
                failure: failure.describe(unit_name),
            }),
        };
    };
    let first_started = jobs
        .iter()
        .filter(|j| j.step == job.step && j.item == job.item && j.retry == job.retry)
        .map(|j| j.created)
        .min()
        .unwrap_or(job.created);
    let last = last_retry(&failure, job, ended);
    match strategy.decide(job.attempt, cause(&failure), &last, (ended, first_started)) {
        Verdict::Retry { attempt, at, .. } if at <= now => AfterFailure::Retry(attempt),
        Verdict::Retry { attempt, at, wait } => AfterFailure::BackOff(BackingOff {
            job: job.name.clone(),
            attempt,
            at: Some(at),
            wait,
            failure: failure.describe(unit_name),
        }),
        Verdict::GiveUp(why) => AfterFailure::Fail(failure.noted(&why)),
    }
}
