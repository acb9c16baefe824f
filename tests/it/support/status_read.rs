//! Readers of a workflow's status and its Jobs, for assertions and failure messages.

use super::*;

/// The steps of `jobs`, sorted (a step with two Jobs appears twice).
pub fn jobs_named(jobs: &[Job]) -> Vec<String> {
    let mut steps: Vec<String> = jobs.iter().filter_map(step_of).map(String::from).collect();
    steps.sort();
    steps
}

/// Whether step `step` of `workflow` waits, suspended.
pub fn waits_suspended(workflow: &WorkFlow, step: &str) -> bool {
    (workflow.status.iter().flat_map(|s| &s.steps)).any(|s| {
        s.name == step
            && s.phase == workflow_operator_core::crd::StepPhase::Running
            && s.reason.as_deref() == Some("Suspended")
    })
}

/// The workflow's phase, if it has a status.
pub fn phase(workflow: &WorkFlow) -> Option<Phase> {
    workflow.status.as_ref().and_then(|s| s.workflow_status)
}

/// The workflow's status message, or "".
pub fn message(workflow: &WorkFlow) -> String {
    workflow
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

/// The steps the status lists as executed.
pub fn executed(workflow: &WorkFlow) -> BTreeSet<String> {
    workflow
        .status
        .as_ref()
        .map(|s| s.executed.iter().cloned().collect())
        .unwrap_or_default()
}

/// The steps the status lists as started.
pub fn started(workflow: &WorkFlow) -> BTreeSet<String> {
    workflow
        .status
        .as_ref()
        .map(|s| s.started.iter().cloned().collect())
        .unwrap_or_default()
}

/// Completed or Failed, for the current generation.
pub fn is_terminal(workflow: &WorkFlow) -> bool {
    let current = workflow.status.as_ref().and_then(|s| s.observed_generation)
        == workflow.metadata.generation;
    current && phase(workflow).is_some_and(|p| p.is_terminal())
}

/// Whether the workflow's status is for its current generation.
pub fn is_current(workflow: &WorkFlow) -> bool {
    workflow.status.as_ref().and_then(|s| s.observed_generation) == workflow.metadata.generation
}

/// The status (and generation) of a workflow, as YAML, for failure messages.
pub fn describe_status(workflow: &WorkFlow) -> String {
    let view = serde_json::json!({
        "generation": workflow.metadata.generation,
        "status": workflow.status,
    });
    truncate(serde_yaml::to_string(&view).unwrap_or_default(), 3000)
}

/// The exact step name of a Job the operator made.
pub fn step_of(job: &Job) -> Option<&str> {
    job.annotations().get(ANNOTATION_STEP).map(String::as_str)
}

/// A Job's finished condition: `Some(true)` Complete, `Some(false)` Failed, `None` running.
pub fn job_outcome(job: &Job) -> Option<bool> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let holds = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if holds("Complete") {
        Some(true)
    } else if holds("Failed") {
        Some(false)
    } else {
        None
    }
}

pub(crate) fn truncate(mut text: String, at: usize) -> String {
    if text.len() > at {
        let mut cut = at;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n... (truncated)");
    }
    text
}

/// An object as YAML for failure messages: name, generation and status first, then the rest,
/// without `managedFields`, truncated.
pub(crate) fn describe<K: Serialize>(object: Option<&K>) -> String {
    let Some(object) = object else {
        return "nothing (the object does not exist)".into();
    };
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    let head = serde_json::json!({
        "name": value.pointer("/metadata/name"),
        "generation": value.pointer("/metadata/generation"),
        "deletionTimestamp": value.pointer("/metadata/deletionTimestamp"),
        "status": value.get("status"),
    });
    let text = format!(
        "{}---\n{}",
        serde_yaml::to_string(&head).unwrap_or_default(),
        serde_yaml::to_string(&value).unwrap_or_default()
    );
    truncate(text, 4000)
}
