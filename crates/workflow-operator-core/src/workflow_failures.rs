//! Argo's `{{workflow.failures}}`: the steps that failed, as the JSON list an exit handler reads.
//! The planner makes it once per pass from what it saw of the failed steps, and hands the same
//! text to the exit steps' `when`s (`workflow.failures`) and their Jobs (`plan::ExitEnv`).

use crate::crd::StepStatus;
use crate::names;
use crate::outputs;

/// The failed steps, each as its `status.steps` entry (`name` its display name), as Argo's
/// `{{workflow.failures}}`: `{"displayName", "message", "templateName", "phase", "podName",
/// "finishedAt"}` each, written as Go writes JSON; `null` when none failed, as Go writes an
/// empty list. `template` names the template a step called (none: the step's own name).
pub fn json(failed: &[StepStatus], template: impl Fn(&str) -> Option<String>) -> String {
    if failed.is_empty() {
        return "null".into();
    }
    let list: Vec<FailedNode> = failed
        .iter()
        .map(|entry| {
            let name = entry.name.as_str();
            let own_name = name.rsplit('/').next().unwrap_or(name);
            FailedNode {
                display_name: name,
                message: message(own_name, entry),
                template_name: template(name).unwrap_or_else(|| own_name.to_string()),
                phase: "Failed",
                pod_name: entry.job.clone().unwrap_or_default(),
                finished_at: entry.finished_at.as_ref().map(|t| t.0.to_string()),
            }
        })
        .collect();
    outputs::go_json(&list)
}

/// A failed step's message as Argo writes a failed node's: for a container that exited
/// non-zero, `CONTAINER: REASON (exit code N)` and what it said after a `: `
/// (argoproj/argo-workflows workflow/controller/operator.go, `inferFailedReason`), its container
/// named as its Job names it; otherwise what the status says.
fn message(step: &str, entry: &StepStatus) -> String {
    let said = entry.message.as_deref().unwrap_or_default();
    let Some(code) = entry.exit_code.filter(|&c| c != 0) else {
        return said.to_string();
    };
    let reason = entry.reason.as_deref().unwrap_or("Error");
    let mut text = format!("{}: {reason} (exit code {code})", names::dns_label(step));
    if !said.is_empty() {
        text.push_str(": ");
        text.push_str(said);
    }
    text
}

/// An entry of `{{workflow.failures}}`, its fields in the order of Argo's `failedNodeStatus`
/// (`finishedAt` null when unknown, as Go writes a zero time).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FailedNode<'a> {
    display_name: &'a str,
    message: String,
    template_name: String,
    phase: &'static str,
    pod_name: String,
    finished_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::StepPhase;

    fn failed(name: &str, exit_code: Option<i32>, message: Option<&str>) -> StepStatus {
        StepStatus {
            phase: StepPhase::Failed,
            exit_code,
            reason: Some("Error".into()),
            message: message.map(Into::into),
            ..crate::plan::running_step_status(name, format!("w-{name}-0"), false)
        }
    }

    #[test]
    fn nothing_failed_is_null_as_go_writes_an_empty_list() {
        assert_eq!(json(&[], |_| None), "null");
    }

    #[test]
    fn a_failed_container_says_its_exit_code_as_argo_does_and_its_template() {
        let steps = [
            failed("build", Some(2), None),
            failed("check", Some(1), Some("a < b")),
            failed("fetch", None, Some("its pod did not start")),
        ];
        let text = json(&steps, |name| {
            (name == "build").then(|| "compile".to_string())
        });
        let list: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(list[0]["message"], "build: Error (exit code 2)");
        assert_eq!(list[0]["templateName"], "compile");
        assert_eq!(list[0]["podName"], "w-build-0");
        assert_eq!(list[1]["message"], "check: Error (exit code 1): a < b");
        assert!(text.contains(r"a \u003c b"), "Go's escaping: {text}");
        assert_eq!(list[1]["templateName"], "check");
        assert_eq!(list[2]["message"], "its pod did not start");
        assert_eq!(list[2]["phase"], "Failed");
        let keys: Vec<&str> = text.split("\",\"").take(1).collect();
        assert!(keys[0].starts_with(r#"[{"displayName":"build"#), "{text}");
    }
}
