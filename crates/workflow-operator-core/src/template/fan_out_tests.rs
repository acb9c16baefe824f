//! Fan-outs over what a parameter holds: a `withParam` a parameter fills with a JSON list
//! (Argo's `withParam: "{{inputs.parameters.list}}"`, in a call and in the steps of a called
//! template) is that list; one it fills with a step's output is read once that step ran.

use serde_json::json;

use super::tests::{expanded, workflow};
use crate::crd::Step;

fn step<'s>(spec: &'s crate::crd::WorkFlowSpec, name: &str) -> &'s Step {
    (spec.containers.iter())
        .find(|s| s.step_name == name)
        .unwrap_or_else(|| panic!("no step {name}"))
}

fn items(step: &Step) -> Vec<serde_json::Value> {
    assert_eq!(step.with_param, None, "{}", step.step_name);
    step.with_items.as_deref().expect("withItems").0.clone()
}

/// Argo's nested loops: a workflow parameter fans out a call of a `steps` template, whose step
/// fans out over its input parameter, a list too.
const NESTED: &str = r#"
arguments:
  parameters:
    - {name: outer, value: "[1, 2]\n"}
    - {name: inner, value: '["a", "b", "c"]'}
templates:
  - name: one
    inputs: {parameters: [{name: o}, {name: i}]}
    image: alpine
    command: [echo, "{{inputs.parameters.o}} {{inputs.parameters.i}}"]
  - name: worker
    inputs: {parameters: [{name: list}, {name: id}]}
    steps:
      - - name: each
          template: one
          arguments:
            parameters: [{name: o, value: "{{inputs.parameters.id}}"}, {name: i, value: "{{item}}"}]
          withParam: "{{inputs.parameters.list}}"
containers:
  - stepName: all
    template: worker
    arguments:
      parameters: [{name: list, value: "{{workflow.parameters.inner}}"}, {name: id, value: "{{item}}"}]
    withParam: "{{workflow.parameters.outer}}"
  - {stepName: plain, image: alpine, withParam: '[{"x": 1}]', command: [echo, "{{item.x}}"]}
"#;

#[test]
fn a_with_param_a_parameter_fills_with_a_list_is_that_list_in_a_call_and_inside_it() {
    let spec = expanded(&workflow(NESTED));
    let names: Vec<&str> = spec
        .containers
        .iter()
        .map(|s| s.step_name.as_str())
        .collect();
    assert_eq!(names, ["all[0]/each", "all[1]/each", "plain"]);
    assert_eq!(
        items(step(&spec, "all[1]/each")),
        [json!("a"), json!("b"), json!("c")]
    );
    assert_eq!(
        step(&spec, "all[1]/each").command.as_deref().unwrap(),
        ["echo", "2 {{item}}"]
    );
    assert_eq!(items(step(&spec, "plain")), [json!({"x": 1})]);
}

#[test]
fn a_with_param_a_parameter_fills_with_a_steps_output_reads_that_step() {
    let wf = workflow(
        r#"
templates:
  - name: show
    inputs: {parameters: [{name: v}]}
    image: alpine
    command: [echo, "{{inputs.parameters.v}}"]
  - name: each-of
    inputs: {parameters: [{name: list}]}
    steps:
      - - name: show
          template: show
          arguments: {parameters: [{name: v, value: "{{item}}"}]}
          withParam: "{{inputs.parameters.list}}"
containers:
  - {stepName: gen, image: alpine, command: [sh, -c, "echo '[1, 2]'"]}
  - stepName: call
    template: each-of
    dependsOn: [gen]
    arguments: {parameters: [{name: list, value: "{{steps.gen.outputs.result}}"}]}
"#,
    );
    let spec = expanded(&wf);
    let show = step(&spec, "call/show");
    assert_eq!(show.with_items, None);
    assert_eq!(
        show.with_param.as_ref().map(|p| p.0.as_str()),
        Some("{{steps.gen.outputs.result}}")
    );
    assert_eq!(show.depends_on, ["gen"]);
}

#[test]
fn a_dag_calls_when_naming_the_item_is_filled_for_each_of_its_runs() {
    let wf = workflow(
        r#"
templates:
  - name: pair
    inputs: {parameters: [{name: os}]}
    steps:
      - - {name: build, image: alpine, command: [echo, "{{inputs.parameters.os}}"]}
containers:
  - stepName: each
    template: pair
    arguments: {parameters: [{name: os, value: "{{item.os}}"}]}
    withItems: [{os: linux, on: true}, {os: "darwin \"x\"", on: false}]
    when: '{{item.on}} && "{{item.os}}" != "windows"'
"#,
    );
    let spec = expanded(&wf);
    let whens: Vec<(&str, Option<&str>)> = (spec.containers.iter())
        .map(|s| (s.step_name.as_str(), s.when.as_deref()))
        .collect();
    assert_eq!(
        whens,
        [
            ("each[0]/build", Some(r#"true && "linux" != "windows""#)),
            (
                "each[1]/build",
                Some(r#"false && "darwin \"x\"" != "windows""#)
            ),
        ]
    );
}
