//! The custom metrics a workflow declares (`metrics`, [`workflow_operator_core::custom_metrics`]),
//! recorded when a status write reports that a step or the workflow ended.
//!
//! What ended is read between the status the write replaces (the newest on its way, else the
//! stored one) and the new one, as the step counts are ([`super::step_events::step_changes`]):
//! a step is recorded once, by the write whose status first shows it finished. A restarted
//! operator reads the stored status, where finished steps are finished already, and records
//! them no more; what this process recorded is lost with it (Argo's are also in memory).
//! Skipped steps record nothing.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use workflow_operator_core::crd::{StepPhase, StepStatus, WorkFlow, WorkFlowStatus};
use workflow_operator_core::custom_metrics;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::lifecycle::Phase;

use super::metrics::{Recorder, job_duration};

/// What ended between two statuses, besides the steps that succeeded (`StepChanges::finished`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Ended {
    /// Steps now failed or timed out that were not before.
    pub(super) failed: Vec<String>,
    /// The workflow ended.
    pub(super) workflow: bool,
}

/// What ended between `old` and `new`.
pub(super) fn ended(old: Option<&WorkFlowStatus>, new: &WorkFlowStatus) -> Ended {
    let failed = |s: &StepStatus| matches!(s.phase, StepPhase::Failed | StepPhase::TimedOut);
    let before: HashSet<&str> = (old.iter().flat_map(|s| &s.steps))
        .filter(|s| failed(s))
        .map(|s| s.name.as_str())
        .collect();
    let terminal = |s: Option<&WorkFlowStatus>| {
        s.and_then(|s| s.workflow_status)
            .is_some_and(Phase::is_terminal)
    };
    Ended {
        failed: (new.steps.iter())
            .filter(|s| failed(s) && !before.contains(s.name.as_str()))
            .map(|s| s.name.clone())
            .collect(),
        workflow: terminal(Some(new)) && !terminal(old),
    }
}

/// Whether `workflow` (expanded) declares metrics, on itself or on a step.
pub(super) fn declared(workflow: &WorkFlow) -> bool {
    let spec = &workflow.spec;
    spec.metrics.is_some()
        || (spec.containers.iter().chain(&spec.on_exit)).any(|s| s.metrics.is_some())
}

/// Records the metrics of the steps of `workflow` (expanded) that `new` reports ended (those
/// in `succeeded` and `ended`), then the workflow's if it ended.
pub(super) fn record(
    recorder: &Recorder,
    workflow: &WorkFlow,
    new: &WorkFlowStatus,
    (succeeded, ended): (&[String], &Ended),
    jobs: &[Arc<JobSummary>],
) {
    let spec = &workflow.spec;
    if !recorder.enabled() {
        return;
    }
    let key = format!(
        "{}/{}",
        workflow.metadata.namespace.as_deref().unwrap_or_default(),
        workflow.metadata.name.as_deref().unwrap_or_default()
    );
    for name in succeeded.iter().chain(&ended.failed) {
        let Some(metrics) = (spec.containers.iter().chain(&spec.on_exit))
            .find(|s| s.step_name == *name)
            .and_then(|s| s.metrics.as_deref())
        else {
            continue;
        };
        let vars = step_vars(name, new, jobs);
        recorder.custom(&key, custom_metrics::recordings(metrics, &vars));
    }
    if ended.workflow
        && let Some(metrics) = &spec.metrics
    {
        let vars = workflow_vars(workflow, new);
        recorder.custom(&key, custom_metrics::recordings(metrics, &vars));
    }
}

/// A step's variables: Argo's `status`, `duration` (seconds), `exitCode` and output parameters.
fn step_vars(
    name: &str,
    status: &WorkFlowStatus,
    jobs: &[Arc<JobSummary>],
) -> BTreeMap<String, String> {
    let entry = status.steps.iter().find(|s| s.name == name);
    let mut vars = BTreeMap::new();
    let (phase, duration, exit_code) = match entry {
        Some(entry) if matches!(entry.phase, StepPhase::Failed | StepPhase::TimedOut) => {
            let duration = (entry.started_at.as_ref().zip(entry.finished_at.as_ref()))
                .map(|(start, end)| end.0.duration_since(start.0).as_secs_f64())
                .unwrap_or_default();
            ("Failed", duration, entry.exit_code.unwrap_or(1))
        }
        _ => {
            let job = jobs.iter().find(|j| j.step.as_deref() == Some(name));
            let duration = job.map(job_duration).unwrap_or_default();
            ("Succeeded", duration.as_secs_f64(), 0)
        }
    };
    vars.insert("status".into(), phase.into());
    vars.insert("duration".into(), duration.max(0.0).to_string());
    vars.insert("exitCode".into(), exit_code.to_string());
    for (key, value) in entry.iter().flat_map(|e| &e.outputs) {
        vars.insert(format!("outputs.parameters.{key}"), value.clone());
    }
    vars
}

/// The workflow's variables: Argo's `workflow.status` and `workflow.duration` (seconds), and
/// its parameters (`workflow.parameters.NAME`).
fn workflow_vars(workflow: &WorkFlow, status: &WorkFlowStatus) -> BTreeMap<String, String> {
    let phase = match status.workflow_status {
        Some(Phase::Completed) => "Succeeded",
        _ => "Failed",
    };
    let duration = (status.started_at.as_ref())
        .map(|start| Timestamp::now().duration_since(start.0).as_secs_f64())
        .unwrap_or_default();
    let parameters = (workflow.spec.arguments.iter())
        .flat_map(|a| &a.parameters)
        .filter_map(|p| Some((format!("workflow.parameters.{}", p.name), p.value.clone()?)));
    let mut vars: BTreeMap<String, String> = parameters.collect();
    vars.insert("workflow.status".into(), phase.into());
    vars.insert("workflow.duration".into(), duration.max(0.0).to_string());
    vars
}
