//! Argo's exit handler as a `steps` template whose steps read each other, end to end on the
//! embedded control plane, in Argo's YAML submitted as it is: its groups run after the
//! workflow's steps, a `when` reads an earlier exit step's `status`, an argument its result
//! (two groups on), a false `when` skips its step, and the workflow's phase follows Argo's rule
//! (a failed exit handler fails a workflow whose steps succeeded; a failed one stays failed),
//! across an operator SIGKILL too.

use crate::argo_dag_outputs::log_of;
use crate::argo_forms::{expect_phases, submit};
use crate::support;

use rstest::rstest;
use support::{Operator, operator, operator_process, step_of};

/// `main` exits with the workflow's `code`; then the exit handler: `probe` prints the
/// workflow's status beside `check`, which fails (tolerated) unless the workflow succeeded;
/// `notify` (reading `probe`'s result) runs on `check`'s failure, `celebrate` on its success;
/// `finish` reads `probe`'s result again and fails when it is `Succeeded`.
const EXIT_STEPS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: NAME
spec:
  entrypoint: main
  onExit: exit-handler
  arguments:
    parameters: [{name: code, value: "CODE"}]
  templates:
    - name: main
      container:
        image: alpine:3.20
        command: [sh, -c, "exit {{workflow.parameters.code}}"]
    - name: exit-handler
      steps:
        - - name: probe
            template: probe
          - name: check
            template: check
            continueOn: {failed: true}
        - - name: notify
            template: say
            when: "{{steps.check.status}} == Failed"
            arguments:
              parameters: [{name: text, value: "probe said {{steps.probe.outputs.result}}"}]
          - name: celebrate
            template: say
            when: "{{steps.check.status}} == Succeeded"
            arguments:
              parameters: [{name: text, value: hooray}]
        - - name: finish
            template: finish
            arguments:
              parameters: [{name: seen, value: "{{steps.probe.outputs.result}}"}]
    - name: probe
      container:
        image: alpine:3.20
        command: [sh, -c, "echo {{workflow.status}}"]
    - name: check
      container:
        image: alpine:3.20
        command: [sh, -c, 'WAIT; test "{{workflow.status}}" = Succeeded']
    - name: say
      inputs: {parameters: [{name: text}]}
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
    - name: finish
      inputs: {parameters: [{name: seen}]}
      container:
        image: alpine:3.20
        command: [sh, -c, 'echo "finish saw {{inputs.parameters.seen}}"; test "{{inputs.parameters.seen}}" != Succeeded']
"#;

/// The exit handler above for workflow `name` whose `main` exits `code`; `check` first runs
/// `wait` (a shell command line).
fn exit_steps(name: &str, code: u8, wait: &str) -> String {
    EXIT_STEPS
        .replace("NAME", name)
        .replace("CODE", &code.to_string())
        .replace("WAIT", wait)
}

#[rstest]
#[tokio::test]
async fn after_a_failed_step_the_exit_handlers_steps_read_each_other_and_the_workflow_stays_failed(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, &exit_steps("exit-steps-failed", 1, "true")).await;
    ns.expect_failed("exit-steps-failed", &["main"]).await;
    let expected = [
        ("main", "Failed"),
        ("probe", "Succeeded"),
        ("check", "Failed"),
        ("notify", "Succeeded"),
        ("celebrate", "Skipped"),
        ("finish", "Succeeded"),
    ];
    expect_phases(ns, "exit-steps-failed", &expected).await;
    let notify = log_of(ns, "exit-steps-failed", "notify").await;
    assert!(notify.contains("probe said Failed"), "{notify}");
    let finish = log_of(ns, "exit-steps-failed", "finish").await;
    assert!(finish.contains("finish saw Failed"), "{finish}");
}

#[rstest]
#[tokio::test]
async fn after_the_steps_succeeded_a_failing_exit_step_fails_the_workflow_and_the_others_skip_as_their_whens_say(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, &exit_steps("exit-steps-ok", 0, "true")).await;
    ns.expect_failed("exit-steps-ok", &["finish"]).await;
    let expected = [
        ("probe", "Succeeded"),
        ("check", "Succeeded"),
        ("notify", "Skipped"),
        ("celebrate", "Succeeded"),
        ("finish", "Failed"),
    ];
    expect_phases(ns, "exit-steps-ok", &expected).await;
    let celebrate = log_of(ns, "exit-steps-ok", "celebrate").await;
    assert!(celebrate.contains("hooray"), "{celebrate}");
    let finish = log_of(ns, "exit-steps-ok", "finish").await;
    assert!(finish.contains("finish saw Succeeded"), "{finish}");
}

#[rstest]
#[tokio::test]
async fn exit_steps_reading_each_other_run_once_across_an_operator_sigkill(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let gate = support::Gate::new();
    submit(
        &operator.ns,
        &exit_steps("exit-steps-killed", 1, &gate.wait_script()),
    )
    .await;
    let succeeded = |job: &k8s_openapi::api::batch::v1::Job| {
        (job.status.as_ref()).is_some_and(|s| s.succeeded.unwrap_or(0) > 0)
    };
    (operator.ns)
        .wait_step_job("exit-steps-killed", "probe", "succeeded", succeeded)
        .await;
    // Down once probe told its result and while check runs: the operator that comes back has
    // only the cluster's state, and check ends while it is down.
    operator.kill().await;
    gate.open();
    operator.start();
    let ns = &operator.ns;
    ns.expect_failed("exit-steps-killed", &["main"]).await;
    let expected = [
        ("check", "Failed"),
        ("notify", "Succeeded"),
        ("celebrate", "Skipped"),
        ("finish", "Succeeded"),
    ];
    expect_phases(ns, "exit-steps-killed", &expected).await;
    let notify = log_of(ns, "exit-steps-killed", "notify").await;
    assert!(notify.contains("probe said Failed"), "{notify}");
    let jobs = ns.jobs_of("exit-steps-killed").await;
    for step in ["main", "probe", "check", "notify", "finish"] {
        let ran = jobs.iter().filter(|j| step_of(j) == Some(step)).count();
        assert_eq!(ran, 1, "{step}");
    }
}

/// `build` (template `compile`) exits with the workflow's `code`; the exit handler's steps are
/// decided by `{{workflow.failures}}` in their `when`s, as Argo fills it in: the failed step's
/// template, its message (`exit code 2`), or `null` when nothing failed.
const ON_FAILURES: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: NAME
spec:
  entrypoint: main
  onExit: exit-handler
  arguments:
    parameters: [{name: code, value: "CODE"}]
  templates:
    - name: main
      steps:
        - - name: build
            template: compile
    - name: compile
      container:
        image: alpine:3.20
        command: [sh, -c, "exit {{workflow.parameters.code}}"]
    - name: exit-handler
      steps:
        - - name: on-compile
            template: say
            when: "'{{workflow.failures}}' =~ 'compile'"
          - name: on-exit-code
            template: say
            when: "'{{workflow.failures}}' =~ 'exit code 2'"
          - name: on-none
            template: say
            when: "'{{workflow.failures}}' == 'null'"
    - name: say
      container:
        image: alpine:3.20
        env: [{name: FAILURES, value: "{{workflow.failures}}"}]
        command: [sh, -c, 'printf "failures=%s\\n" "$FAILURES"']
"#;

#[rstest]
#[case::a_step_failed(2, &[("build", "Failed"), ("on-compile", "Succeeded"), ("on-exit-code", "Succeeded"), ("on-none", "Skipped")])]
#[case::none_failed(0, &[("build", "Succeeded"), ("on-compile", "Skipped"), ("on-exit-code", "Skipped"), ("on-none", "Succeeded")])]
#[tokio::test]
async fn exit_steps_whens_read_the_failures_as_argo_writes_them(
    #[future(awt)] operator: Operator,
    #[case] code: u8,
    #[case] expected: &[(&str, &str)],
) {
    let ns = &operator.ns;
    let name = format!("on-failures-{code}");
    let yaml = (ON_FAILURES.replace("NAME", &name)).replace("CODE", &code.to_string());
    submit(ns, &yaml).await;
    match code {
        0 => ns.expect_completed(&name).await,
        _ => ns.expect_failed(&name, &["build"]).await,
    };
    expect_phases(ns, &name, expected).await;
    let ran = expected
        .iter()
        .find(|(s, p)| s.starts_with("on-") && *p == "Succeeded");
    let log = log_of(ns, &name, ran.expect("an exit step ran").0).await;
    if code == 0 {
        assert!(log.contains("failures=null"), "{log}");
    } else {
        assert!(log.contains(r#""templateName":"compile""#), "{log}");
        assert!(
            log.contains(r#""message":"build: Error (exit code 2)""#),
            "{log}"
        );
    }
}

/// The workflow's step and an exit step are both named `notify` (Argo keeps the exit
/// handler's names apart): the workflow's fails, the exit handler's succeeds, and `after` reads
/// the exit handler's, as in Argo.
const TWINS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: twins
spec:
  entrypoint: main
  onExit: handler
  templates:
    - name: main
      steps:
        - - {name: notify, template: run, arguments: {parameters: [{name: code, value: "1"}]}}
    - name: handler
      steps:
        - - {name: notify, template: run, arguments: {parameters: [{name: code, value: "0"}]}}
        - - name: after
            template: run
            when: "{{steps.notify.status}} == Succeeded"
            arguments: {parameters: [{name: code, value: "{{steps.notify.exitCode}}"}]}
    - name: run
      inputs: {parameters: [{name: code}]}
      container:
        image: alpine:3.20
        command: [sh, -c, "echo code {{inputs.parameters.code}}; exit {{inputs.parameters.code}}"]
"#;

#[rstest]
#[tokio::test]
async fn an_exit_step_named_as_a_workflow_step_reads_as_argos_exit_handler_does(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, TWINS).await;
    ns.expect_failed("twins", &["notify"]).await;
    let expected = [
        ("notify", "Failed"),
        ("notify-on-exit", "Succeeded"),
        ("after", "Succeeded"),
    ];
    expect_phases(ns, "twins", &expected).await;
    let after = log_of(ns, "twins", "after").await;
    assert!(after.contains("code 0"), "{after}");
}

/// The exit handler's `make` writes an artifact, which `use` (the group after) takes.
const EXIT_ARTIFACT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: exit-artifact
spec:
  entrypoint: main
  onExit: handler
  templates:
    - name: main
      container:
        image: alpine:3.20
        command: [sh, -c, "echo main"]
    - name: handler
      steps:
        - - name: make
            template: make
        - - name: use
            template: use
            arguments:
              artifacts:
                - {name: notes, from: "{{steps.make.outputs.artifacts.notes}}"}
    - name: make
      container:
        image: alpine:3.20
        command: [sh, -c, "echo made by the exit handler > /tmp/notes"]
      outputs:
        artifacts:
          - {name: notes, path: /tmp/notes}
    - name: use
      inputs:
        artifacts: [{name: notes, path: /tmp/in/notes}]
      container:
        image: alpine:3.20
        command: [sh, -c, "cat /tmp/in/notes"]
"#;

#[rstest]
#[tokio::test]
async fn an_exit_step_takes_the_artifact_an_exit_step_before_it_made(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let store = crate::artifacts::store_of(ns).await;
    submit(ns, EXIT_ARTIFACT).await;
    ns.expect_completed("exit-artifact").await;
    let used = log_of(ns, "exit-artifact", "use").await;
    assert_eq!(used.trim(), "made by the exit handler", "{used}");
    store.shutdown().await;
}
