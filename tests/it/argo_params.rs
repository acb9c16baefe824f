//! Argo's YAML as it is, submitted unconverted, for where parameters come from: a workflow's
//! parameter, a template's input and a call's argument from a ConfigMap
//! (`valueFrom.configMapKeyRef`, Argo's `examples/global-parameters-from-configmap` and
//! `arguments-parameters-from-configmap`, written anew here), read once when the workflow
//! starts: a ConfigMap changed after that does not change the run, and one that is not there
//! fails the workflow naming it; and the outputs of a step that fans out, read by a later step
//! as a JSON list of every item's in item order and fanned out over again (Argo's
//! `parameter-aggregation` and `loops-param-result`, written anew here); and an output parameter
//! named `result` read beside the same step's standard output (`result`), as Argo keeps them.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::argo_dag_outputs::log_of;
use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// A parameter of each kind from the ConfigMap `cm-settings`; the first step waits at
/// `HOLD` (a gate's script) so the test can change the ConfigMap before the second runs.
const FROM_CONFIG_MAP: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: cm-params
spec:
  entrypoint: main
  arguments:
    parameters:
      - name: greeting
        valueFrom:
          configMapKeyRef: {name: cm-settings, key: greeting}
  templates:
    - name: main
      steps:
        - - name: hold
            template: hold
        - - name: greet
            template: greet
            arguments:
              parameters:
                - name: colour
                  valueFrom:
                    configMapKeyRef: {name: cm-settings, key: colour}
    - name: hold
      container:
        image: alpine:3.20
        command: [sh, -c, "HOLD"]
    - name: greet
      inputs:
        parameters:
          - name: colour
          - name: size
            valueFrom:
              configMapKeyRef: {name: cm-settings, key: size}
      container:
        image: alpine:3.20
        command: [sh, -c, "echo {{workflow.parameters.greeting}} {{inputs.parameters.colour}} {{inputs.parameters.size}}"]
"#;

/// The ConfigMap `cm-settings` with `data`.
fn settings(data: &[(&str, &str)]) -> ConfigMap {
    let data: std::collections::BTreeMap<&str, &str> = data.iter().copied().collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cm-settings", "labels": {"workflows.argoproj.io/configmap-type": "Parameter"}},
        "data": data,
    }))
    .unwrap()
}

#[rstest]
#[tokio::test]
async fn parameters_from_a_configmap_keep_the_values_read_when_the_workflow_started(
    #[future(awt)] operator: Operator,
) {
    crate::skip_on_real_cluster!("a gate file holds the first step");
    let ns = &operator.ns;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let first = settings(&[("greeting", "hello"), ("colour", "red"), ("size", "small")]);
    maps.create(&PostParams::default(), &first).await.unwrap();
    let gate = support::Gate::new();
    let file = support::yaml_file(&FROM_CONFIG_MAP.replace("HOLD", &gate.wait_script()));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.wait_step_job("cm-params", "hold", "created", |_| true)
        .await;
    let changed = settings(&[("greeting", "bye"), ("colour", "blue"), ("size", "large")]);
    let patch = Patch::Merge(serde_json::json!({"data": changed.data}));
    maps.patch("cm-settings", &PatchParams::default(), &patch)
        .await
        .unwrap();
    gate.open();
    let workflow = ns.expect_completed("cm-params").await;
    let greet = log_of(ns, "cm-params", "greet").await;
    assert_eq!(greet.trim(), "hello red small", "{greet}");
    let recorded = &workflow.status.unwrap().resolved_config_map_keys;
    let values: Vec<(&str, Option<&str>)> = (recorded.iter())
        .map(|r| (r.key.as_str(), r.value.as_deref()))
        .collect();
    assert_eq!(
        values,
        [
            ("colour", Some("red")),
            ("greeting", Some("hello")),
            ("size", Some("small"))
        ]
    );
}

#[rstest]
#[tokio::test]
async fn a_parameter_from_a_configmap_that_is_not_there_fails_the_workflow_naming_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let text = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: cm-absent
spec:
  entrypoint: show
  arguments:
    parameters:
      - name: message
        valueFrom:
          configMapKeyRef: {name: nowhere, key: msg}
  templates:
    - name: show
      container:
        image: alpine:3.20
        command: [echo, "{{workflow.parameters.message}}"]
"#;
    let file = support::yaml_file(text);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns
        .expect_failed(
            "cm-absent",
            &["\"message\"", "configmap \"nowhere\"", "not found"],
        )
        .await;
    assert!(ns.jobs_of("cm-absent").await.is_empty(), "no step runs");
    let recorded = &workflow.status.unwrap().resolved_config_map_keys;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].value, None);
}

/// `square` over three numbers (a parameter from a file, the result its standard output);
/// `total` reads both as lists; `double` fans out over every item's parameters (a list of
/// objects); `after` reads its results.
const AGGREGATED: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: agg-outputs
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: square
            template: square
            arguments:
              parameters: [{name: n, value: "{{item}}"}]
            withItems: [3, 1, 2]
        - - name: total
            template: show
            arguments:
              parameters:
                - {name: squares, value: "{{steps.square.outputs.parameters.sq}}"}
                - {name: printed, value: "{{steps.square.outputs.result}}"}
        - - name: double
            template: double
            arguments:
              parameters: [{name: v, value: "{{item.sq}}"}]
            withParam: "{{steps.square.outputs.parameters}}"
        - - name: after
            template: show
            arguments:
              parameters:
                - {name: squares, value: "{{steps.double.outputs.result}}"}
                - {name: printed, value: done}
    - name: square
      inputs:
        parameters: [{name: n}]
      script:
        image: alpine:3.20
        command: [sh]
        source: |
          echo $(({{inputs.parameters.n}} * {{inputs.parameters.n}})) > /tmp/sq
          echo {{inputs.parameters.n}}
      outputs:
        parameters:
          - name: sq
            valueFrom: {path: /tmp/sq}
    - name: double
      inputs:
        parameters: [{name: v}]
      script:
        image: alpine:3.20
        command: [sh]
        source: echo $(({{inputs.parameters.v}} * 2))
    - name: show
      inputs:
        parameters: [{name: squares}, {name: printed}]
      container:
        image: alpine:3.20
        command: [echo, "squares={{inputs.parameters.squares}}", "printed={{inputs.parameters.printed}}"]
"#;

#[rstest]
#[tokio::test]
async fn the_outputs_of_a_step_that_fans_out_are_read_as_a_list_in_item_order(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(AGGREGATED);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("agg-outputs").await;
    let total = log_of(ns, "agg-outputs", "total").await;
    assert_eq!(
        total.trim(),
        r#"squares=["9","1","4"] printed=[3,1,2]"#,
        "{total}"
    );
    let after = log_of(ns, "agg-outputs", "after").await;
    assert_eq!(after.trim(), "squares=[18,2,8] printed=done", "{after}");
}

/// `make` prints `said` and writes `kept` to its output parameter named `result`; `show` reads
/// both, and the exit hook reads the parameter (Argo's `exit-handler-with-param` shape).
const RESULT_PARAMETER: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: result-parameter
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: make
            template: make
            hooks:
              exit:
                template: show-one
                arguments:
                  parameters: [{name: text, value: "{{steps.make.outputs.parameters.result}}"}]
        - - name: show
            template: show
            arguments:
              parameters:
                - {name: file, value: "{{steps.make.outputs.parameters.result}}"}
                - {name: said, value: "{{steps.make.outputs.result}}"}
    - name: make
      script:
        image: alpine:3.20
        command: [sh]
        source: "echo said; echo -n kept > /tmp/r"
      outputs:
        parameters:
          - name: result
            valueFrom: {path: /tmp/r, default: Foobar}
    - name: show
      inputs: {parameters: [{name: file}, {name: said}]}
      container:
        image: alpine:3.20
        command: [echo, "parameter {{inputs.parameters.file}}, output {{inputs.parameters.said}}"]
    - name: show-one
      inputs: {parameters: [{name: text}]}
      container:
        image: alpine:3.20
        command: [echo, "hook got {{inputs.parameters.text}}"]
"#;

#[rstest]
#[tokio::test]
async fn an_output_parameter_named_result_is_read_apart_from_the_standard_output(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(RESULT_PARAMETER);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("result-parameter").await;
    let show = log_of(ns, "result-parameter", "show").await;
    assert_eq!(show.trim(), "parameter kept, output said", "{show}");
    let hook = log_of(ns, "result-parameter", "make.hooks.exit").await;
    assert_eq!(hook.trim(), "hook got kept", "{hook}");
}
