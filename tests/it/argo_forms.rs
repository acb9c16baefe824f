//! Argo's forms end to end on the embedded control plane, written in this API with Argo's
//! shapes: a `steps` template (groups, a `when` on a sibling's result, `withItems` in a group,
//! `continueOn`), numbers written as text and filled from parameters, and the variables an
//! exit step reads (`{{workflow.failures}}`, `{{steps.X.status}}`, ...).

use crate::support;

use support::session::{Session, row};

/// Asserts the phase `workflow-operator get` shows for each step.
async fn expect_steps(session: &Session, workflow: &str, phases: &[(&str, &str)]) {
    let get = session.cli(&["get", workflow]).await;
    for (step, phase) in phases {
        assert_eq!(row(&get, step)[1], *phase, "{step}: {get}");
    }
}

/// The log of `step` of `workflow`, through the CLI.
async fn log_of(session: &Session, workflow: &str, step: &str) -> String {
    session.cli(&["logs", workflow, "--step", step]).await
}

/// Argo's coin flip as a `steps` template: `flip` prints heads; the next group runs `heads`
/// (its `when` reads `steps.flip`) and skips `tails` (its `when` reads Argo's `tasks.flip`);
/// the third group fans `each` out over two items beside `lint`, which fails under
/// `continueOn`; the last group runs once all of them are done.
#[tokio::test]
async fn a_steps_template_runs_its_groups_in_order_with_whens_items_and_continue_on() {
    let Some(session) = Session::start("argo_steps").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: coinflip}
spec:
  templates:
    - name: flip-coin
      image: alpine:3.20
      source: |
        echo heads
    - name: say
      inputs: {parameters: [{name: message}]}
      image: alpine:3.20
      command: [echo, "{{inputs.parameters.message}}"]
    - name: main
      steps:
        - - {name: flip, template: flip-coin}
        - - name: heads
            template: say
            when: 'steps.flip.outputs.result == "heads"'
            arguments: {parameters: [{name: message, value: "it was {{steps.flip.outputs.result}}"}]}
          - name: tails
            template: say
            when: 'tasks.flip.outputs.result == "tails"'
            arguments: {parameters: [{name: message, value: "it was tails"}]}
        - - name: each
            template: say
            withItems: [red, blue]
            arguments: {parameters: [{name: message, value: "colour {{item}}"}]}
          - {name: lint, image: alpine:3.20, command: [sh, -c, "exit 3"], continueOn: {failed: true}}
        - - {name: done, template: say, arguments: {parameters: [{name: message, value: "all done"}]}}
  containers:
    - {stepName: coin, template: main}
"#;
    session.create(manifest).await;
    session.finished_as("coinflip", "Completed").await;
    let phases = [
        ("coin/flip", "Succeeded"),
        ("coin/heads", "Succeeded"),
        ("coin/tails", "Skipped"),
        ("coin/each", "Succeeded"),
        ("coin/lint", "Failed"),
        ("coin/done", "Succeeded"),
    ];
    expect_steps(&session, "coinflip", &phases).await;
    let heads = log_of(&session, "coinflip", "coin/heads").await;
    assert!(heads.contains("it was heads"), "{heads}");
    let each = log_of(&session, "coinflip", "coin/each").await;
    for colour in ["colour red", "colour blue"] {
        assert!(each.contains(colour), "{each}");
    }
    let done = log_of(&session, "coinflip", "coin/done").await;
    assert!(done.contains("all done"), "{done}");
    session.stop().await;
}

/// The `pod=NAME` line of `log` names one of `workflow`'s pods, as kubectl lists them.
async fn assert_names_its_pod(session: &Session, workflow: &str, log: &str) {
    let pod = log
        .lines()
        .find_map(|l| l.split("pod=").nth(1))
        .unwrap_or_else(|| panic!("{log}"));
    let selector = format!("workflow.crd.com/workflow={workflow}");
    let pods = session
        .k(&["get", "pods", "-l", &selector, "-o", "name"])
        .await;
    assert!(
        pods.lines().any(|p| p == format!("pod/{pod}")),
        "{pod} among {pods}"
    );
}

/// The steps of `workflow`'s Jobs, one per Job (each attempt of a step is a Job).
async fn job_steps(session: &Session, workflow: &str) -> Vec<String> {
    let jobs = session
        .k(&[
            "get",
            "jobs",
            "-l",
            &format!("workflow.crd.com/workflow={workflow}"),
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.annotations.workflow\.crd\.com/step}{"\n"}{end}"#,
        ])
        .await;
    jobs.lines().map(str::to_string).collect()
}

/// Numbers as Argo writes them, as text and from parameters: `withSequence.count` and `start`,
/// and a template's `retryStrategy.limit` from its input, filled before they are checked.
#[tokio::test]
async fn numbers_written_as_text_and_from_parameters_are_counts_and_limits() {
    let Some(session) = Session::start("argo_numbers").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: numbers}
spec:
  arguments:
    parameters: [{name: count, value: "3"}, {name: tries, value: "2"}]
  templates:
    - name: flaky
      inputs: {parameters: [{name: tries}]}
      image: alpine:3.20
      command: [sh, -c, 'echo attempt {{retries}}; exit 1']
      retryStrategy: {limit: "{{inputs.parameters.tries}}"}
    - name: main
      steps:
        - - name: each
            image: alpine:3.20
            command: [sh, -c, 'echo number {{item}}']
            withSequence: {count: "{{workflow.parameters.count}}", start: "5"}
        - - name: retried
            template: flaky
            continueOn: {failed: true}
            arguments: {parameters: [{name: tries, value: "{{workflow.parameters.tries}}"}]}
  containers:
    - {stepName: run, template: main}
"#;
    session.create(manifest).await;
    session.finished_as("numbers", "Completed").await;
    expect_steps(
        &session,
        "numbers",
        &[("run/each", "Succeeded"), ("run/retried", "Failed")],
    )
    .await;
    let each = log_of(&session, "numbers", "run/each").await;
    for n in ["number 5", "number 6", "number 7"] {
        assert!(each.contains(n), "{each}");
    }
    assert!(!each.contains("number 8"), "{each}");
    let jobs = job_steps(&session, "numbers").await;
    let attempts = jobs.iter().filter(|s| *s == "run/retried").count();
    assert_eq!(attempts, 3, "the first try and a limit of 2: {jobs:?}");
    session.stop().await;
}

/// `{{pod.name}}` in a script (which the step agent writes as a file, not through Kubernetes'
/// expansion) is the step's pod's name, as in a command.
#[tokio::test]
async fn a_scripts_pod_name_is_its_pods_name() {
    let Some(session) = Session::start("argo_script_pod_name").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: script-pod}
spec:
  containers:
    - {stepName: whoami, image: alpine:3.20, source: 'echo "pod={{pod.name}}"'}
"#;
    session.create(manifest).await;
    session.finished_as("script-pod", "Completed").await;
    let log = log_of(&session, "script-pod", "whoami").await;
    assert_names_its_pod(&session, "script-pod", &log).await;
    session.stop().await;
}

/// An exit step reads how the run went as Argo's exit handlers do: `{{workflow.status}}`,
/// `{{workflow.duration}}` and `{{workflow.failures}}` (Argo's JSON list), and its `when`
/// reads `steps.X.status`; `{{pod.name}}` is its pod's name.
#[tokio::test]
async fn an_exit_step_reads_the_runs_status_duration_failures_and_a_steps_status() {
    let Some(session) = Session::start("argo_exit_variables").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: exit-vars}
spec:
  templates:
    - name: main
      steps:
        - - {name: ok, image: alpine:3.20, command: [sh, -c, "echo fine"]}
          - {name: broken, image: alpine:3.20, command: [sh, -c, "echo oh no; exit 2"]}
  containers:
    - {stepName: run, template: main}
  onExit:
    - stepName: report
      image: alpine:3.20
      env: [{name: FAILURES, value: "{{workflow.failures}}"}]
      command: [sh, -c, 'echo "status={{workflow.status}} duration={{workflow.duration}}"; echo "failures=$FAILURES"; echo "pod={{pod.name}}"']
    - {stepName: on-broken, image: alpine:3.20, when: 'steps["run/broken"].status == "Failed"', command: [echo, broken failed]}
    - {stepName: on-ok, image: alpine:3.20, when: 'steps["run/ok"].status == "Failed"', command: [echo, never]}
"#;
    session.create(manifest).await;
    session.finished_as("exit-vars", "Failed").await;
    expect_steps(
        &session,
        "exit-vars",
        &[
            ("run/broken", "Failed"),
            ("report", "Succeeded"),
            ("on-broken", "Succeeded"),
            ("on-ok", "Skipped"),
        ],
    )
    .await;
    let report = log_of(&session, "exit-vars", "report").await;
    assert!(report.contains("status=Failed duration="), "{report}");
    let duration = report
        .split("duration=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|d| d.parse::<f64>().ok());
    assert!(duration.is_some_and(|d| d > 0.0), "{report}");
    let failures = report
        .lines()
        .find_map(|l| l.split("failures=").nth(1))
        .unwrap_or_else(|| panic!("{report}"));
    let failures: serde_json::Value = serde_json::from_str(failures).unwrap();
    assert_eq!(failures.as_array().map(Vec::len), Some(1), "{failures}");
    assert_eq!(failures[0]["displayName"], "run/broken", "{failures}");
    assert_eq!(failures[0]["phase"], "Failed", "{failures}");
    for key in ["message", "templateName", "podName", "finishedAt"] {
        assert!(failures[0][key].is_string(), "{key}: {failures}");
    }
    assert_names_its_pod(&session, "exit-vars", &report).await;
    session.stop().await;
}
