//! Argo's YAML as it is, submitted unconverted, for templates shared by an Argo
//! `WorkflowTemplate` and called by `templateRef` from a steps entry and from a dag task (Argo's
//! `examples/workflow-template/templates.yaml` and `templateref` callers, written anew here):
//! the shared template and the workflow in one file, the shared template applied first.

use crate::argo_dag_outputs::log_of;
use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// A WorkflowTemplate `greetings` with a container template and a steps template, and a
/// workflow calling the first from a steps entry and from a dag task (with its own argument,
/// the second reading the first's output), and the steps template from a dag task.
const TEMPLATE_REF: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata:
  name: greetings
spec:
  templates:
    - name: greet
      inputs:
        parameters:
          - {name: who, value: world}
      container:
        image: alpine:3.20
        command: [sh, -c, "echo hello {{inputs.parameters.who}} | tee /tmp/said"]
      outputs:
        parameters:
          - name: said
            valueFrom: {path: /tmp/said}
    - name: greet-twice
      steps:
        - - name: first
            template: greet
            arguments:
              parameters: [{name: who, value: once}]
        - - name: second
            template: greet
            arguments:
              parameters: [{name: who, value: twice}]
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: ref-caller
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: by-step
            templateRef: {name: greetings, template: greet}
        - - name: by-dag
            template: tasks
    - name: tasks
      dag:
        tasks:
          - name: greet-team
            templateRef: {name: greetings, template: greet}
            arguments:
              parameters: [{name: who, value: team}]
          - name: echo-back
            depends: greet-team
            templateRef: {name: greetings, template: greet}
            arguments:
              parameters:
                - {name: who, value: "again, {{tasks.greet-team.outputs.parameters.said}}"}
          - name: both
            templateRef: {name: greetings, template: greet-twice}
"#;

#[rstest]
#[tokio::test]
async fn a_steps_entry_and_a_dag_task_call_a_workflow_templates_templates_by_template_ref(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(TEMPLATE_REF);
    let submitted = ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    assert!(
        submitted.contains("workflowtemplate.workflow.crd.com/greetings created"),
        "{submitted}"
    );
    ns.expect_completed("ref-caller").await;
    let said = [
        ("by-step", "hello world"),
        ("by-dag/greet-team", "hello team"),
        ("by-dag/echo-back", "hello again, hello team"),
        ("by-dag/both/first", "hello once"),
        ("by-dag/both/second", "hello twice"),
    ];
    for (step, expected) in said {
        assert_eq!(
            log_of(ns, "ref-caller", step).await.trim(),
            expected,
            "{step}"
        );
    }
    let shown = crate::argo_dag_outputs::phases(ns, "ref-caller").await;
    assert_eq!(
        shown.iter().filter(|(_, p)| p == "Succeeded").count(),
        5,
        "{shown:?}"
    );
}
