//! What the handlers tell the operator's Prometheus metrics ([`crate::telemetry::metrics`]):
//! workflows by status, steps started and finished (with their durations), handler latency and
//! outcomes, API errors, and the custom metrics workflows declare (`custom_metrics`).
//! The handlers call [`Recorder`]; this module turns their plain facts (old status, new status,
//! plan, Jobs) into metric updates.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::telemetry::metrics::{HandlerOutcome, Metrics, StepOutcome};
use kube_kopf::HandlerResult;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::lifecycle::{Phase, Trigger};
use workflow_operator_core::plan::Plan;

/// Metric updates from the handlers; a no-op without metrics.
#[derive(Default)]
pub struct Recorder {
    metrics: Option<Metrics>,
    /// The last phase seen per workflow uid, to keep the by-status gauge exact across updates,
    /// deletions and restarts (after a restart, resume handlers fill it again).
    phases: Mutex<HashMap<String, Phase>>,
}

impl Recorder {
    pub fn new(metrics: Option<Metrics>) -> Self {
        if let Some(metrics) = &metrics {
            for phase in [
                Phase::Created,
                Phase::Queued,
                Phase::Started,
                Phase::Completed,
                Phase::Failed,
            ] {
                metrics.set_workflows(phase.as_str(), 0);
            }
        }
        Self {
            metrics,
            phases: Mutex::default(),
        }
    }

    /// A workflow's current phase (`None`: deleted).
    pub fn workflow_phase(&self, uid: &str, phase: Option<Phase>) {
        let Some(metrics) = &self.metrics else { return };
        let mut phases = self.phases.lock().expect("phases lock");
        let before = match phase {
            Some(phase) => phases.insert(uid.to_string(), phase),
            None => phases.remove(uid),
        };
        if before == phase {
            return;
        }
        for changed in [before, phase].into_iter().flatten() {
            let count = phases.values().filter(|p| **p == changed).count();
            metrics.set_workflows(changed.as_str(), count as i64);
        }
    }

    /// The steps a status write started and finished, and the failures the plan made.
    pub fn steps(
        &self,
        started: &[String],
        finished: &[String],
        plan: &Plan,
        jobs: &[Arc<JobSummary>],
    ) {
        let Some(metrics) = &self.metrics else { return };
        for _ in started {
            metrics.step_started();
        }
        if !finished.is_empty() {
            // One pass over the Jobs, not one per step: a batch of 100 completions of a
            // 10,000-step workflow would otherwise compare a million step names.
            let mut durations: HashMap<&str, Duration> = finished
                .iter()
                .map(|s| (s.as_str(), Duration::ZERO))
                .collect();
            let mut found = HashSet::new();
            for job in jobs {
                if let Some(step) = job.step.as_deref()
                    && let Some(duration) = durations.get_mut(step)
                    && found.insert(step)
                {
                    *duration = job_duration(job);
                }
            }
            for step in finished {
                metrics.step_finished(StepOutcome::Completed, durations[step.as_str()]);
            }
        }
        for event in &plan.events {
            let outcome = match event.transition.trigger() {
                Trigger::StepFailed => StepOutcome::Failed,
                Trigger::StepTimedOut => StepOutcome::TimedOut,
                _ => continue,
            };
            let duration = jobs.iter().map(job_duration).max().unwrap_or_default();
            metrics.step_finished(outcome, duration);
        }
    }

    /// One handler call's outcome and latency.
    pub fn handler(&self, name: &str, result: &HandlerResult, elapsed: Duration) {
        let Some(metrics) = &self.metrics else { return };
        let outcome = match result {
            Ok(()) => HandlerOutcome::Success,
            Err(kube_kopf::HandlerError::Temporary { .. }) => HandlerOutcome::Temporary,
            Err(kube_kopf::HandlerError::Permanent(_)) => HandlerOutcome::Permanent,
        };
        metrics.handler_done(name, outcome, elapsed);
    }

    /// Whether metrics are recorded at all.
    pub fn enabled(&self) -> bool {
        self.metrics.is_some()
    }

    /// The custom metrics of the workflow `key` (`namespace/name`) that ended: recorded, or
    /// logged when one cannot be.
    pub fn custom(
        &self,
        key: &str,
        recordings: Vec<Result<workflow_operator_core::custom_metrics::Recording, String>>,
    ) {
        let Some(metrics) = &self.metrics else { return };
        for recording in recordings {
            if let Err(problem) = recording.and_then(|r| metrics.record_custom(&r)) {
                tracing::warn!(workflow = %key, %problem, "a custom metric was not recorded");
            }
        }
    }

    /// An API call that failed.
    pub fn api_error(&self, verb: &str) {
        if let Some(metrics) = &self.metrics {
            metrics.api_error(verb);
        }
    }
}

/// How long a Job ran: from `status.startTime` to `completionTime` (or to now while running).
pub(super) fn job_duration(job: &Arc<JobSummary>) -> Duration {
    let Some(status) = &job.status else {
        return Duration::ZERO;
    };
    let Some(start) = &status.start_time else {
        return Duration::ZERO;
    };
    let end = status
        .completion_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_else(k8s_openapi::jiff::Timestamp::now);
    end.duration_since(start.0).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_gauges_follow_phase_changes_and_deletions() {
        let metrics = Metrics::new();
        let recorder = Recorder::new(Some(metrics.clone()));
        recorder.workflow_phase("a", Some(Phase::Started));
        recorder.workflow_phase("b", Some(Phase::Started));
        recorder.workflow_phase("a", Some(Phase::Completed));
        recorder.workflow_phase("b", None);
        let text = metrics.encode();
        assert!(
            text.contains(r#"workflow_operator_workflows{status="Started"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workflow_operator_workflows{status="Completed"} 1"#),
            "{text}"
        );
    }
}
