//! Argo's suspend templates end to end on the embedded control plane, written in Argo's YAML
//! and submitted as it is: a step that waits until `workflow-operator resume` (as `argo
//! resume`), and one with a `duration` that resumes itself, even across an operator restart.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use rstest::rstest;

use crate::support;

use support::{Namespace, Operator, operator, operator_process, step_of};
use workflow_operator_core::crd::suspend::ANNOTATION_RESUMED;

/// Argo's approval gate: `build`, then `approve` (a suspend template, `{}` or with `duration`),
/// then `release`.
fn approval(name: &str, suspend: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: build
            template: say
            arguments: {{parameters: [{{name: text, value: built}}]}}
        - - name: approve
            template: approve
        - - name: release
            template: say
            arguments: {{parameters: [{{name: text, value: released}}]}}
    - name: approve
      suspend: {suspend}
    - name: say
      inputs:
        parameters: [{{name: text}}]
      container:
        image: alpine:3.20
        command: [echo, "{{{{inputs.parameters.text}}}}"]
"#
    )
}

/// The phases `workflow-operator get -o json` shows for the steps of `workflow`, in order.
async fn phases(ns: &Namespace, workflow: &str) -> Vec<(String, String)> {
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", workflow, "-o", "json"]).await).unwrap();
    (get["steps"].as_array().into_iter().flatten())
        .map(|s| {
            (
                s["name"].as_str().unwrap().into(),
                s["phase"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn all_succeeded() -> Vec<(String, String)> {
    ["build", "approve", "release"]
        .map(|s| (s.to_string(), "Succeeded".to_string()))
        .to_vec()
}

#[rstest]
#[tokio::test]
async fn a_suspend_template_waits_until_resume_then_the_next_group_runs(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(&approval("gate", "{}"));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let waiting = ns
        .wait_workflow("gate", "approve suspended", |wf| {
            support::waits_suspended(wf, "approve")
        })
        .await;
    // It waits: the workflow runs, `release` has not started, and no pod ran for `approve`.
    let steps: Vec<String> = (ns.jobs_of("gate").await.iter())
        .filter_map(|j| step_of(j).map(str::to_string))
        .collect();
    assert!(!steps.contains(&"release".to_string()), "{steps:?}");
    let job = ns
        .wait_step_job("gate", "approve", "created", |_| true)
        .await;
    let selector = format!("job-name={}", job.metadata.name.as_deref().unwrap());
    let pods = ns
        .pods()
        .list(&ListParams::default().labels(&selector))
        .await;
    assert_eq!(pods.unwrap().items.len(), 0, "{waiting:?}");
    let shown = ns.cli(&["get", "gate"]).await;
    assert!(shown.contains("workflow-operator resume"), "{shown}");

    let resumed = ns.cli(&["resume", "gate"]).await;
    assert_eq!(resumed.trim(), "workflow gate: resumed step approve");
    ns.expect_completed("gate").await;
    assert_eq!(phases(ns, "gate").await, all_succeeded());
    // Once it finished, there is nothing left to resume, and `resume` says so.
    let again = (ns
        .cli_command(&["resume", "gate", "-n", &ns.name])
        .output()
        .await)
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "{said}");
    assert!(
        said.contains("has finished (Completed); there is nothing to resume"),
        "{said}"
    );
}

#[rstest]
#[tokio::test]
async fn a_suspend_duration_resumes_itself_even_after_an_operator_restart(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let file = support::yaml_file(&approval("timed", "{duration: 3s}"));
    operator
        .ns
        .cli(&["submit", file.path().to_str().unwrap()])
        .await;
    let ns = &operator.ns;
    ns.wait_workflow("timed", "approve suspended", |wf| {
        support::waits_suspended(wf, "approve")
    })
    .await;
    let job = ns
        .wait_step_job("timed", "approve", "created", |_| true)
        .await;
    let created = job.metadata.creation_timestamp.as_ref().unwrap().0;
    // Down through the deadline: the operator that comes back has only what was recorded.
    operator.kill().await;
    let deadline = created + SignedDuration::from_secs(3);
    let left = deadline.duration_since(Timestamp::now());
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs() + Duration::from_millis(200)).await;
    }
    let still = operator.ns.get("timed").await;
    assert!(
        support::waits_suspended(&still, "approve"),
        "nothing resumed it while down"
    );
    operator.start();
    operator.ns.expect_completed("timed").await;
    assert_eq!(phases(&operator.ns, "timed").await, all_succeeded());
    // It ended at its deadline, as recorded, not when the operator came back.
    let job = operator
        .ns
        .wait_step_job("timed", "approve", "resumed", |_| true)
        .await;
    let resumed = job.metadata.annotations.as_ref().unwrap()[ANNOTATION_RESUMED].clone();
    assert_eq!(resumed.parse::<Timestamp>().unwrap(), deadline, "{resumed}");
}
