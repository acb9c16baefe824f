//! Why a step failed, and how that reads in the status: its message, its `status.steps`
//! entry and the lifecycle trigger it fails the workflow with.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::{StepPhase, StepStatus};
use crate::lifecycle::Trigger;

use super::{
    ObservedJob, QUEUE_TIMEOUT_WHY, REASON_CANNOT_START, REASON_JOB_REFUSED, REASON_QUEUE_TIMEOUT,
    REASON_TIMED_OUT,
};

/// Why a step failed.
#[derive(Clone)]
pub(super) enum Failure {
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
    /// The failure with `note` added to what it says, e.g. why it was not tried again.
    pub(super) fn noted(self, note: &str) -> Failure {
        let add = |text: String| {
            if text.is_empty() {
                note.to_string()
            } else {
                format!("{text}; {note}")
            }
        };
        match self {
            Failure::Failed {
                reason,
                message,
                exit_code,
            } => Failure::Failed {
                reason,
                message: add(message),
                exit_code,
            },
            Failure::TimedOut { why } => Failure::TimedOut { why: add(why) },
            Failure::CannotStart { why } => Failure::CannotStart { why: add(why) },
            other => other,
        }
    }

    /// The step's phase, as a `when` reads it: `TimedOut` for a step that ran past its
    /// timeout, else `Failed`.
    pub(super) fn phase(&self) -> StepPhase {
        match self {
            Failure::TimedOut { why } if !why.starts_with(QUEUE_TIMEOUT_WHY) => StepPhase::TimedOut,
            Failure::Refused { entry } => entry.phase,
            _ => StepPhase::Failed,
        }
    }

    pub(super) fn trigger(&self) -> Trigger {
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
    pub(super) fn describe(&self, step: &str) -> String {
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
            Failure::Refused { entry } if entry.reason.as_deref() == Some(REASON_JOB_REFUSED) => {
                format!(
                    "step {step} failed: the API server refused its Job: {}",
                    entry.message.as_deref().unwrap_or_default()
                )
            }
            Failure::Refused { entry } => format!(
                "step {step} failed: {}",
                entry.message.as_deref().unwrap_or_default()
            ),
            Failure::Data { why, .. } => format!("step {step} failed: {why}"),
        }
    }

    /// The entry of a step that failed without a Job (a missing output, a failed `when`).
    pub(super) fn entry_without_job(&self, step: &str) -> Option<StepStatus> {
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
            ip: None,
            outputs: BTreeMap::new(),
            items: None,
        })
    }

    /// The step's entry in `status.steps`, from the Job that failed it.
    pub(super) fn step_status(&self, step: &str, job: &ObservedJob) -> StepStatus {
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
            ip: None,
            outputs: BTreeMap::new(),
            items: None,
        }
    }
}
