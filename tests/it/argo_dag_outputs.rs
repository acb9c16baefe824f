//! Argo's YAML as it is, submitted unconverted, for what a `dag` or `steps` template says of
//! its call: its own outputs read by the caller (a parameter, and a list fanned out over by
//! `withParam`, as a task's result is), global outputs (`globalName`) read by later
//! steps and an exit handler and shown in the status, a dag's `target` and a called template's
//! `parallelism`. Each runs to the outcome Argo documents (its `examples/` `nested-workflow`,
//! `global-outputs`, `dag-targets` and `parallelism-template-limit`, written anew here).

use crate::argo_fanout::item_logs;
use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// The log of the Job of `step` of `workflow`.
pub(crate) async fn log_of(ns: &support::Namespace, workflow: &str, step: &str) -> String {
    let jobs = ns.jobs_of(workflow).await;
    let job = (jobs.iter())
        .find(|j| support::step_of(j) == Some(step))
        .unwrap_or_else(|| panic!("no Job ran {step}"));
    ns.job_log(job).await
}

/// The names of the steps `get -o json` shows, each with its phase.
pub(crate) async fn phases(ns: &support::Namespace, workflow: &str) -> Vec<(String, String)> {
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", workflow, "-o", "json"]).await).unwrap();
    let steps = get["steps"].as_array().cloned().unwrap_or_default();
    (steps.iter())
        .map(|s| {
            (
                s["name"].as_str().unwrap().into(),
                s["phase"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// A steps template whose own outputs (a parameter by `valueFrom.parameter`, an artifact by
/// `from`) are its step's; a dag task calling it, and the next task reading both.
const DAG_OUTPUTS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: dag-outputs
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: build
            template: build-steps
          - name: report
            depends: build
            template: show
            arguments:
              parameters:
                - {name: version, value: "{{tasks.build.outputs.parameters.version}}"}
              artifacts:
                - {name: notes, from: "{{tasks.build.outputs.artifacts.notes}}"}
    - name: build-steps
      steps:
        - - name: compile
            template: compile
      outputs:
        parameters:
          - name: version
            valueFrom:
              parameter: "{{steps.compile.outputs.parameters.v}}"
        artifacts:
          - name: notes
            from: "{{steps.compile.outputs.artifacts.n}}"
    - name: compile
      container:
        image: alpine:3.20
        command: [sh, -c, "echo 1.4.2 > /tmp/v; echo release notes > /tmp/n"]
      outputs:
        parameters:
          - name: v
            valueFrom: {path: /tmp/v}
        artifacts:
          - {name: n, path: /tmp/n}
    - name: show
      inputs:
        parameters: [{name: version}]
        artifacts: [{name: notes, path: /tmp/in/notes}]
      container:
        image: alpine:3.20
        command: [sh, -c, "echo version {{inputs.parameters.version}}; cat /tmp/in/notes"]
"#;

#[rstest]
#[tokio::test]
async fn a_steps_templates_own_outputs_are_read_by_the_task_after_its_call(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let store = crate::artifacts::store_of(ns).await;
    let file = support::yaml_file(DAG_OUTPUTS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("dag-outputs").await;
    let report = log_of(ns, "dag-outputs", "report").await;
    assert_eq!(report.trim(), "version 1.4.2\nrelease notes", "{report}");
    let expected = [("build/compile", "Succeeded")];
    let shown = phases(ns, "dag-outputs").await;
    for (step, phase) in expected {
        assert!(
            shown.iter().any(|(s, p)| s == step && p == phase),
            "{step}: {shown:?}"
        );
    }
    store.shutdown().await;
}

/// A dag template `inner` whose own outputs are its task's: `version` (a parameter by
/// `valueFrom.parameter`) and `list` (the task's result, a JSON list); `report` reads the
/// version, `each-of-inner` fans out over the list, and `each-of-gen` over the result of a
/// task of the entrypoint's own dag.
const DAG_TEMPLATE_OUTPUTS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: dag-own-outputs
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: inner
            template: inner
          - name: report
            depends: inner
            template: show
            arguments:
              parameters: [{name: v, value: "version {{tasks.inner.outputs.parameters.version}}"}]
          - name: each-of-inner
            depends: inner
            template: show
            arguments:
              parameters: [{name: v, value: "{{item}}"}]
            withParam: "{{tasks.inner.outputs.parameters.list}}"
          - name: gen
            template: gen
            arguments:
              parameters: [{name: list, value: '[1, 2, 3]'}]
          - name: each-of-gen
            depends: gen
            template: show
            arguments:
              parameters: [{name: v, value: "n{{item}}"}]
            withParam: "{{tasks.gen.outputs.result}}"
    - name: inner
      dag:
        tasks:
          - name: make
            template: gen
            arguments:
              parameters: [{name: list, value: '["a", "b"]'}]
          - name: stamp
            template: stamp
      outputs:
        parameters:
          - name: version
            valueFrom:
              parameter: "{{tasks.stamp.outputs.parameters.v}}"
          - name: list
            valueFrom:
              parameter: "{{tasks.make.outputs.result}}"
    - name: gen
      inputs:
        parameters: [{name: list}]
      script:
        image: alpine:3.20
        command: [sh]
        source: echo '{{inputs.parameters.list}}'
    - name: stamp
      container:
        image: alpine:3.20
        command: [sh, -c, "echo 2.0.1 > /tmp/v"]
      outputs:
        parameters:
          - name: v
            valueFrom: {path: /tmp/v}
    - name: show
      inputs:
        parameters: [{name: v}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.v}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_dag_templates_own_outputs_are_read_and_fanned_out_over_by_its_caller(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(DAG_TEMPLATE_OUTPUTS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("dag-own-outputs").await;
    let report = log_of(ns, "dag-own-outputs", "report").await;
    assert_eq!(report.trim(), "version 2.0.1");
    let of_inner = item_logs(ns, "dag-own-outputs", "each-of-inner").await;
    assert_eq!(of_inner, ["a", "b"]);
    let of_gen = item_logs(ns, "dag-own-outputs", "each-of-gen").await;
    assert_eq!(of_gen, ["n1", "n2", "n3"]);
}

/// A step's output parameter and artifact with a `globalName`, read by the next group as
/// `{{workflow.outputs...}}` (the parameter as an input's default, the artifact as a call's
/// argument) and by the exit handler.
const GLOBAL_OUTPUTS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: global-outputs
spec:
  entrypoint: main
  onExit: goodbye
  templates:
    - name: main
      steps:
        - - name: generate
            template: generate
        - - name: read-param
            template: read-param
          - name: read-art
            template: read-art
            arguments:
              artifacts:
                - {name: art, from: "{{workflow.outputs.artifacts.greeting-file}}"}
    - name: generate
      container:
        image: alpine:3.20
        command: [sh, -c, "printf 'hello world' > /tmp/greeting"]
      outputs:
        parameters:
          - name: greeting
            valueFrom: {path: /tmp/greeting}
            globalName: greeting
        artifacts:
          - {name: file, path: /tmp/greeting, globalName: greeting-file}
    - name: read-param
      inputs:
        parameters:
          - name: said
            value: "{{workflow.outputs.parameters.greeting}}"
      container:
        image: alpine:3.20
        command: [sh, -c, "echo param said {{inputs.parameters.said}}"]
    - name: read-art
      inputs:
        artifacts: [{name: art, path: /tmp/art}]
      container:
        image: alpine:3.20
        command: [sh, -c, "printf 'artifact said '; cat /tmp/art"]
    - name: goodbye
      container:
        image: alpine:3.20
        command: [sh, -c, "echo exit said {{workflow.outputs.parameters.greeting}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_global_output_is_the_workflows_read_by_later_steps_and_the_exit_handler(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let store = crate::artifacts::store_of(ns).await;
    let file = support::yaml_file(GLOBAL_OUTPUTS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("global-outputs").await;
    let param = log_of(ns, "global-outputs", "read-param").await;
    assert_eq!(param.trim(), "param said hello world");
    let art = log_of(ns, "global-outputs", "read-art").await;
    assert_eq!(art.trim(), "artifact said hello world");
    let exit = log_of(ns, "global-outputs", "goodbye").await;
    assert_eq!(exit.trim(), "exit said hello world");
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "global-outputs", "-o", "json"]).await).unwrap();
    assert_eq!(
        get["outputs"],
        serde_json::json!({
            "parameters": [{"name": "greeting", "value": "hello world"}],
            "artifacts": [{"name": "greeting-file", "step": "generate", "artifact": "file"}],
        }),
        "{get}"
    );
    let shown = ns.cli(&["get", "global-outputs"]).await;
    assert!(shown.contains("greeting          hello world"), "{shown}");
    store.shutdown().await;
}

/// Argo's dag-targets shape: A; B and C after A; D after B and C; E after C; the target a
/// parameter, `E` by default.
const DAG_TARGET: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: dag-target
spec:
  entrypoint: diamond
  arguments:
    parameters: [{name: target, value: E}]
  templates:
    - name: diamond
      dag:
        target: "{{workflow.parameters.target}}"
        tasks:
          - {name: A, template: say, arguments: {parameters: [{name: m, value: A}]}}
          - {name: B, depends: A, template: say, arguments: {parameters: [{name: m, value: B}]}}
          - {name: C, depends: A, template: say, arguments: {parameters: [{name: m, value: C}]}}
          - {name: D, depends: B && C, template: say, arguments: {parameters: [{name: m, value: D}]}}
          - {name: E, depends: C, template: say, arguments: {parameters: [{name: m, value: E}]}}
    - name: say
      inputs: {parameters: [{name: m}]}
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.m}}"]
"#;

/// A steps template with `parallelism: 2` called from the entrypoint, its one step fanning out
/// over four items.
const TEMPLATE_PARALLELISM: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: template-parallelism
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: limited
            template: two-at-once
    - name: two-at-once
      parallelism: 2
      steps:
        - - name: nap
            template: nap
            withItems: [1, 2, 3, 4]
    - name: nap
      container:
        image: alpine:3.20
        command: [sh, -c, "sleep 2"]
"#;

#[rstest]
#[tokio::test]
async fn a_dag_target_runs_only_the_targets_and_what_they_depend_on(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(DAG_TARGET);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("dag-target").await;
    let ran: Vec<String> = (ns.jobs_of("dag-target").await.iter())
        .filter_map(|j| support::step_of(j).map(str::to_string))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(ran, ["diamond/A", "diamond/C", "diamond/E"]);
    assert_eq!(log_of(ns, "dag-target", "diamond/E").await.trim(), "E");
}

#[rstest]
#[tokio::test]
async fn a_called_templates_parallelism_limits_its_steps_at_once(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let running = support::queueing::RunningJobs::start(ns).await;
    let file = support::yaml_file(TEMPLATE_PARALLELISM);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("template-parallelism").await;
    let (peak, at_peak) = running.peak();
    assert!(peak <= 2, "{peak} Jobs ran at once: {at_peak:?}");
    assert_eq!(ns.jobs_of("template-parallelism").await.len(), 4);
}
