//! Argo's lifecycle hooks end to end on the embedded control plane, written in Argo's YAML and
//! submitted as it is: the workflow's `running` hook (and a step's) started with the run, once,
//! its `exit` hook at the end and a `Failed` one skipped; a step's `exit` hook run after the
//! step failed, reading its status, beside an expression hook on its failure, while the steps
//! after it never run and the workflow fails as the step did; and that hook once across an
//! operator SIGKILL.

use rstest::rstest;

use crate::argo_dag_outputs::{log_of, phases};
use crate::support;

use support::{Operator, operator, operator_process, step_of};

/// A workflow whose hooks say when they ran: `running` while it runs, `exit` at its end,
/// `failed` only if it failed; `first` also has a hook while it runs.
const WORKFLOW_HOOKS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: wf-hooks
spec:
  entrypoint: main
  hooks:
    exit:
      template: note
      arguments: {parameters: [{name: text, value: "exit hook"}]}
    running:
      expression: workflow.status == "Running"
      template: note
      arguments: {parameters: [{name: text, value: "workflow running"}]}
    failed:
      expression: workflow.status == "Failed"
      template: note
      arguments: {parameters: [{name: text, value: "workflow failed"}]}
  templates:
    - name: main
      steps:
        - - name: first
            template: work
            hooks:
              running:
                expression: steps["first"].status == "Running"
                template: note
                arguments: {parameters: [{name: text, value: "first running"}]}
        - - name: second
            template: work
    - name: work
      container:
        image: alpine:3.20
        command: [sh, -c, "echo working; sleep 2"]
    - name: note
      inputs:
        parameters: [{name: text}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
"#;

/// A step that fails, with an exit hook reading its status, a hook on its failure and one on
/// its success; a step after it.
const STEP_EXIT_HOOK: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: step-hooks
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: build
            template: broken
            hooks:
              exit:
                template: report
                arguments:
                  parameters: [{name: text, value: "build ended {{steps.build.status}}"}]
              failed:
                expression: steps["build"].status == "Failed"
                template: report
                arguments: {parameters: [{name: text, value: "build failed"}]}
              succeeded:
                expression: steps.build.status == "Succeeded"
                template: report
                arguments: {parameters: [{name: text, value: "build succeeded"}]}
        - - name: deploy
            template: report
            arguments: {parameters: [{name: text, value: "deployed"}]}
    - name: broken
      container:
        image: alpine:3.20
        command: [sh, -c, "echo building; exit 3"]
    - name: report
      inputs:
        parameters: [{name: text}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
"#;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    (list.iter())
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[rstest]
#[tokio::test]
async fn a_workflows_running_hook_runs_once_with_the_run_and_its_exit_hook_at_the_end(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(WORKFLOW_HOOKS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns.expect_completed("wf-hooks").await;
    let mut shown = phases(ns, "wf-hooks").await;
    shown.sort();
    assert_eq!(
        shown,
        pairs(&[
            ("first", "Succeeded"),
            ("first.hooks.running", "Succeeded"),
            ("hooks.exit", "Succeeded"),
            ("hooks.failed", "Skipped"),
            ("hooks.running", "Succeeded"),
            ("second", "Succeeded"),
        ]),
        "{:?}",
        workflow.status
    );
    let jobs = ns.jobs_of("wf-hooks").await;
    let ran = |step: &str| jobs.iter().filter(|j| step_of(j) == Some(step)).count();
    assert_eq!(ran("hooks.running"), 1);
    assert_eq!(ran("first.hooks.running"), 1);
    assert_eq!(ran("hooks.failed"), 0);
    assert_eq!(
        log_of(ns, "wf-hooks", "hooks.running").await.trim(),
        "workflow running"
    );
    assert_eq!(
        log_of(ns, "wf-hooks", "first.hooks.running").await.trim(),
        "first running"
    );
    assert_eq!(
        log_of(ns, "wf-hooks", "hooks.exit").await.trim(),
        "exit hook"
    );
}

#[rstest]
#[tokio::test]
async fn a_steps_exit_hook_runs_after_it_failed_and_reads_its_status(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(STEP_EXIT_HOOK);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns
        .expect_failed("step-hooks", &["step build failed", "exit code 3"])
        .await;
    let mut shown = phases(ns, "step-hooks").await;
    shown.sort();
    assert_eq!(
        shown,
        pairs(&[
            ("build", "Failed"),
            ("build.hooks.exit", "Succeeded"),
            ("build.hooks.failed", "Succeeded"),
            ("build.hooks.succeeded", "Skipped"),
            ("deploy", "Skipped"),
        ]),
        "{:?}",
        workflow.status
    );
    assert_eq!(
        log_of(ns, "step-hooks", "build.hooks.exit").await.trim(),
        "build ended Failed"
    );
    assert_eq!(
        log_of(ns, "step-hooks", "build.hooks.failed").await.trim(),
        "build failed"
    );
    let jobs = ns.jobs_of("step-hooks").await;
    assert!(jobs.iter().all(|j| step_of(j) != Some("deploy")));
    assert!(
        jobs.iter()
            .all(|j| step_of(j) != Some("build.hooks.succeeded"))
    );
}

#[rstest]
#[tokio::test]
async fn a_steps_exit_hook_runs_once_across_an_operator_sigkill(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let manifest = STEP_EXIT_HOOK.replace("name: step-hooks", "name: killed-hooks");
    let file = support::yaml_file(&manifest);
    (operator.ns)
        .cli(&["submit", file.path().to_str().unwrap()])
        .await;
    (operator.ns)
        .wait_step_job("killed-hooks", "build.hooks.exit", "created", |_| true)
        .await;
    // Down once the hook started: the operator that comes back has only the cluster's state.
    operator.kill().await;
    operator.start();
    let ns = &operator.ns;
    ns.expect_failed("killed-hooks", &["step build failed", "exit code 3"])
        .await;
    let jobs = ns.jobs_of("killed-hooks").await;
    let ran = |step: &str| jobs.iter().filter(|j| step_of(j) == Some(step)).count();
    assert_eq!(ran("build.hooks.exit"), 1);
    assert_eq!(ran("build.hooks.failed"), 1);
    assert_eq!(ran("build.hooks.succeeded"), 0);
    assert_eq!(ran("deploy"), 0);
    assert_eq!(
        log_of(ns, "killed-hooks", "build.hooks.exit").await.trim(),
        "build ended Failed"
    );
}
