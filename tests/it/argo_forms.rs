//! Argo's forms end to end on the embedded control plane, written in Argo's YAML and submitted
//! as it is: a `steps` template (groups, a `when` on a sibling's result, `withItems` in a group,
//! `continueOn` on a container step), numbers written as text and filled from the workflow's
//! parameters (a sequence's `count`, a retry `limit`, retried until a step succeeds),
//! `{{steps.X.status}}` in a `when`, and the variables an exit handler reads
//! (`{{workflow.failures}}`, `{{pod.name}}`).

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::ListParams;

use crate::argo_dag_outputs::{log_of, phases};
use crate::argo_fanout::item_logs;
use crate::support;

use rstest::rstest;
use support::{Operator, operator, step_of};

/// Submits `argo` (an Argo Workflow's YAML) as it is, through the CLI.
pub(crate) async fn submit(ns: &support::Namespace, argo: &str) {
    let file = support::yaml_file(argo);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
}

/// Asserts the phase `workflow-operator get` shows for each step named.
pub(crate) async fn expect_phases(
    ns: &support::Namespace,
    workflow: &str,
    expected: &[(&str, &str)],
) {
    let shown = phases(ns, workflow).await;
    for (step, phase) in expected {
        assert!(
            shown.iter().any(|(s, p)| s == step && p == phase),
            "{step} {phase}: {shown:?}"
        );
    }
}

/// The Jobs of `step` of `workflow`: one per attempt.
async fn attempts(ns: &support::Namespace, workflow: &str, step: &str) -> Vec<Job> {
    (ns.jobs_of(workflow).await.into_iter())
        .filter(|j| step_of(j) == Some(step))
        .collect()
}

/// Argo's coin flip as a `steps` template: `flip` prints heads; the next group runs `heads`
/// (its `when` reads the result) and skips `tails`; the third fans `each` out over two items
/// beside `lint`, a container step failing under `continueOn`; the last group runs once all of
/// them are done.
const COINFLIP: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: coinflip
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: flip
            template: flip-coin
        - - name: heads
            template: say
            when: "{{steps.flip.outputs.result}} == heads"
            arguments: {parameters: [{name: message, value: "it was {{steps.flip.outputs.result}}"}]}
          - name: tails
            template: say
            when: "{{steps.flip.outputs.result}} == tails"
            arguments: {parameters: [{name: message, value: "it was tails"}]}
        - - name: each
            template: say
            withItems: [red, blue]
            arguments: {parameters: [{name: message, value: "colour {{item}}"}]}
          - name: lint
            template: lint
            continueOn: {failed: true}
        - - name: done
            template: say
            arguments: {parameters: [{name: message, value: all done}]}
    - name: flip-coin
      script:
        image: alpine:3.20
        command: [sh]
        source: echo heads
    - name: say
      inputs: {parameters: [{name: message}]}
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.message}}"]
    - name: lint
      container:
        image: alpine:3.20
        command: [sh, -c, "exit 3"]
"#;

#[rstest]
#[tokio::test]
async fn a_steps_template_runs_its_groups_in_order_with_whens_items_and_continue_on(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, COINFLIP).await;
    ns.expect_completed("coinflip").await;
    let expected = [
        ("flip", "Succeeded"),
        ("heads", "Succeeded"),
        ("tails", "Skipped"),
        ("each", "Succeeded"),
        ("lint", "Failed"),
        ("done", "Succeeded"),
    ];
    expect_phases(ns, "coinflip", &expected).await;
    assert_eq!(log_of(ns, "coinflip", "heads").await.trim(), "it was heads");
    assert_eq!(
        item_logs(ns, "coinflip", "each").await,
        ["colour red", "colour blue"]
    );
    assert_eq!(log_of(ns, "coinflip", "done").await.trim(), "all done");
}

/// Numbers as Argo writes them, as text and from parameters: `withSequence.count` from the
/// workflow's parameter and `start` as text; a `retryStrategy.limit` from an input (itself the
/// workflow's parameter) on a step that always fails, and one written as text on a step that
/// fails once, then succeeds.
const NUMBERS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: numbers
spec:
  entrypoint: main
  arguments:
    parameters: [{name: count, value: "3"}, {name: tries, value: "2"}]
  templates:
    - name: main
      steps:
        - - name: each
            template: number
            withSequence: {count: "{{workflow.parameters.count}}", start: "5"}
            arguments: {parameters: [{name: n, value: "{{item}}"}]}
        - - name: retried
            template: flaky
            continueOn: {failed: true}
            arguments: {parameters: [{name: tries, value: "{{workflow.parameters.tries}}"}]}
          - name: second-try
            template: fails-once
    - name: number
      inputs: {parameters: [{name: n}]}
      container:
        image: alpine:3.20
        command: [echo, "number {{inputs.parameters.n}}"]
    - name: flaky
      inputs: {parameters: [{name: tries}]}
      retryStrategy: {limit: "{{inputs.parameters.tries}}"}
      container:
        image: alpine:3.20
        command: [sh, -c, "echo attempt {{retries}}; exit 1"]
    - name: fails-once
      retryStrategy: {limit: "3"}
      script:
        image: alpine:3.20
        command: [sh]
        source: |
          echo "attempt {{retries}}"
          [ {{retries}} -ge 1 ]
"#;

#[rstest]
#[tokio::test]
async fn numbers_written_as_text_and_from_parameters_are_counts_and_limits(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, NUMBERS).await;
    ns.expect_completed("numbers").await;
    let expected = [
        ("each", "Succeeded"),
        ("retried", "Failed"),
        ("second-try", "Succeeded"),
    ];
    expect_phases(ns, "numbers", &expected).await;
    assert_eq!(
        item_logs(ns, "numbers", "each").await,
        ["number 5", "number 6", "number 7"]
    );
    let retried = attempts(ns, "numbers", "retried").await;
    assert_eq!(retried.len(), 3, "the first try and a limit of 2");
    let mut tries = Vec::new();
    for job in &attempts(ns, "numbers", "second-try").await {
        tries.push(ns.job_log(job).await.trim().to_string());
    }
    tries.sort();
    assert_eq!(
        tries,
        ["attempt 0", "attempt 1"],
        "failed once, then succeeded"
    );
}

/// Asserts the `pod=NAME` line of `log` names a pod of `job`.
async fn assert_names_its_pod(ns: &support::Namespace, job: &Job, log: &str) {
    let pod = log
        .lines()
        .find_map(|l| l.strip_prefix("pod="))
        .unwrap_or_else(|| panic!("no pod= line: {log}"));
    let selector = format!("job-name={}", job.name_any());
    let pods = ns
        .pods()
        .list(&ListParams::default().labels(&selector))
        .await;
    let names: Vec<String> = pods.unwrap().iter().map(ResourceExt::name_any).collect();
    assert!(names.iter().any(|n| n == pod), "{pod} among {names:?}");
}

/// `{{pod.name}}` in a script (which the step agent writes as a file, not through Kubernetes'
/// expansion) is the step's pod's name, as in a command.
const SCRIPT_POD: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: script-pod
spec:
  entrypoint: whoami
  templates:
    - name: whoami
      script:
        image: alpine:3.20
        command: [sh]
        source: echo "pod={{pod.name}}"
"#;

#[rstest]
#[tokio::test]
async fn a_scripts_pod_name_is_its_pods_name(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    submit(ns, SCRIPT_POD).await;
    ns.expect_completed("script-pod").await;
    let jobs = attempts(ns, "script-pod", "whoami").await;
    assert_eq!(jobs.len(), 1);
    let log = ns.job_log(&jobs[0]).await;
    assert_names_its_pod(ns, &jobs[0], &log).await;
}

/// `probe` fails under `continueOn`; the next group decides two steps by `{{steps.X.status}}`,
/// and `bad-when` fails under `continueOn` (its `when` reads text as a number, and its message
/// holds the `<`); then `broken` fails the run. The exit handler reports `{{workflow.status}}`,
/// `{{workflow.duration}}`, `{{workflow.failures}}` and `{{pod.name}}`.
const EXIT_VARS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: exit-vars
spec:
  entrypoint: main
  onExit: report
  templates:
    - name: main
      steps:
        - - name: ok
            template: exit
            arguments: {parameters: [{name: code, value: "0"}]}
          - name: probe
            template: exit
            continueOn: {failed: true}
            arguments: {parameters: [{name: code, value: "1"}]}
        - - name: on-probe-failed
            template: exit
            when: "{{steps.probe.status}} == Failed"
            arguments: {parameters: [{name: code, value: "0"}]}
          - name: on-ok-failed
            template: exit
            when: "{{steps.ok.status}} == Failed"
            arguments: {parameters: [{name: code, value: "0"}]}
          - name: bad-when
            template: exit
            continueOn: {failed: true}
            when: "{{steps.ok.outputs.result}} < 5"
            arguments: {parameters: [{name: code, value: "0"}]}
        - - name: broken
            template: exit
            arguments: {parameters: [{name: code, value: "2"}]}
    - name: exit
      inputs: {parameters: [{name: code}]}
      container:
        image: alpine:3.20
        command: [sh, -c, "echo exit {{inputs.parameters.code}}; exit {{inputs.parameters.code}}"]
    - name: report
      container:
        image: alpine:3.20
        env: [{name: FAILURES, value: "{{workflow.failures}}"}]
        command: [sh, -c, 'echo "status={{workflow.status}} duration={{workflow.duration}}"; printf "failures=%s\\n" "$FAILURES"; echo "pod={{pod.name}}"']
"#;

#[rstest]
#[tokio::test]
async fn an_exit_handler_reads_the_runs_status_duration_and_failures_and_whens_a_steps_status(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(ns, EXIT_VARS).await;
    ns.expect_failed("exit-vars", &[]).await;
    let expected = [
        ("probe", "Failed"),
        ("on-probe-failed", "Succeeded"),
        ("on-ok-failed", "Skipped"),
        ("bad-when", "Failed"),
        ("broken", "Failed"),
        ("report", "Succeeded"),
    ];
    expect_phases(ns, "exit-vars", &expected).await;
    let jobs = attempts(ns, "exit-vars", "report").await;
    assert_eq!(jobs.len(), 1);
    let report = ns.job_log(&jobs[0]).await;
    assert!(report.contains("status=Failed duration="), "{report}");
    let duration = (report.split("duration=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|d| d.parse::<f64>().ok());
    assert!(duration.is_some_and(|d| d > 0.0), "{report}");
    let failures = (report.lines())
        .find_map(|l| l.strip_prefix("failures="))
        .unwrap_or_else(|| panic!("{report}"));
    // As Go writes JSON: `<`, `>` and `&` escaped.
    assert!(
        failures.contains(r"\u003c") && !failures.contains('<'),
        "{failures}"
    );
    let failures: serde_json::Value = serde_json::from_str(failures).unwrap();
    let mut failed: Vec<&str> = (failures.as_array().into_iter().flatten())
        .filter_map(|f| f["displayName"].as_str())
        .collect();
    failed.sort();
    assert_eq!(failed, ["bad-when", "broken", "probe"], "{failures}");
    for failure in failures.as_array().into_iter().flatten() {
        assert_eq!(failure["phase"], "Failed", "{failures}");
        // The template the step called, as Argo names it, not the step.
        assert_eq!(failure["templateName"], "exit", "{failures}");
        for key in ["message", "podName"] {
            assert!(failure[key].is_string(), "{key}: {failures}");
        }
        // Go writes a time it does not know as null.
        let finished = &failure["finishedAt"];
        assert!(finished.is_string() || finished.is_null(), "{failures}");
    }
    assert_names_its_pod(ns, &jobs[0], &report).await;
}
