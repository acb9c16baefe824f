//! A `dag` or `steps` template's own outputs read by its callers, global outputs
//! (`globalName`), a dag's `target` and a called template's `parallelism`, as the expansion
//! resolves them.

use super::tests::{expanded, names_and_deps, problems, workflow};
use crate::crd::{Step, WorkFlowSpec};

fn step<'s>(spec: &'s WorkFlowSpec, name: &str) -> &'s Step {
    (spec.containers.iter().chain(&spec.on_exit))
        .find(|s| s.step_name == name)
        .unwrap_or_else(|| panic!("no step {name}: {:?}", names_and_deps(spec)))
}

/// A steps template whose outputs are a parameter of its second step (Argo's `tasks.` form),
/// an artifact of it, and a parameter of a nested dag call's step; the caller reads them.
const NESTED: &str = r#"
templates:
  - name: gen
    image: alpine
    command: [sh, -c, "echo hi > /tmp/p; echo art > /tmp/a"]
    outputs:
      parameters: [{name: p, valueFrom: {path: /tmp/p}}]
      artifacts: [{name: a, path: /tmp/a}]
  - name: inner
    dag:
      - {stepName: deep, template: gen}
    outputs:
      parameters: [{name: deep-p, valueFrom: {parameter: "{{steps.deep.outputs.parameters.p}}"}}]
  - name: pair
    steps:
      - - {name: first, image: alpine, command: [echo, one]}
      - - {name: second, template: gen}
        - {name: nested, template: inner}
    outputs:
      parameters:
        - {name: out, valueFrom: {parameter: "{{tasks.second.outputs.parameters.p}}"}}
        - {name: via, valueFrom: {parameter: "{{steps.nested.outputs.parameters.deep-p}}"}}
      artifacts:
        - {name: art, from: "{{steps.second.outputs.artifacts.a}}"}
containers:
  - {stepName: call, template: pair}
  - stepName: use
    image: alpine
    command: [echo, "{{steps.call.outputs.parameters.out}} {{steps.call.outputs.via}}"]
    dependsOn: [call]
    inputs: {artifacts: [{name: x, path: /x, from: "{{steps.call.outputs.artifacts.art}}"}]}
onExit:
  - {stepName: bye, image: alpine, command: [echo, "{{steps.call.outputs.parameters.out}}"]}
"#;

#[test]
fn a_callers_reference_to_a_dag_templates_output_reads_the_inner_steps() {
    let spec = expanded(&workflow(NESTED));
    let used = step(&spec, "use");
    assert_eq!(
        used.command.as_deref().unwrap(),
        [
            "echo",
            "{{steps.call/second.outputs.p}} {{steps.call/nested/deep.outputs.p}}"
        ]
    );
    let input = &used.inputs.as_deref().unwrap().artifacts[0];
    assert_eq!(input.from, "{{steps.call/second.outputs.artifacts.a}}");
    assert_eq!(
        step(&spec, "bye").command.as_deref().unwrap(),
        ["echo", "{{steps.call/second.outputs.p}}"]
    );
    // It runs after the call's leaves, the inner writers among them.
    let mut deps = used.depends_on.clone();
    deps.sort();
    assert_eq!(deps, ["call/nested/deep", "call/second"]);
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
}

#[test]
fn an_output_naming_no_step_of_the_template_or_an_undeclared_one_is_refused_naming_it() {
    let wrong_step = NESTED.replace("tasks.second.outputs", "tasks.secnd.outputs");
    let found = problems(&workflow(&wrong_step));
    assert!(
        found.iter().any(|p| p.contains(r#"step "call": template "pair": output parameter "out": valueFrom.parameter "{{tasks.secnd.outputs.parameters.p}}" names step "secnd", which is not a step of template "pair" (its steps: first, second, nested)"#)),
        "{found:#?}"
    );
    let undeclared = NESTED.replace(
        "call.outputs.parameters.out}} {{",
        "call.outputs.parameters.nope}} {{",
    );
    let found = problems(&workflow(&undeclared));
    assert!(
        found.iter().any(|p| p.contains(r#"step "use": {{steps.call.outputs.parameters.nope}}: step "call" calls a dag or steps template that declares no output "nope" (outputs: "#)),
        "{found:#?}"
    );
    let no_source = NESTED.replace(
        r#"{name: art, from: "{{steps.second.outputs.artifacts.a}}"}"#,
        "{name: art}",
    );
    let found = problems(&workflow(&no_source));
    assert!(
        found
            .iter()
            .any(|p| p
                .contains(r#"output artifact "art": from: required in a dag or steps template"#)),
        "{found:#?}"
    );
}

/// A step's output with a `globalName`, and a dag template's output given one, read by a
/// later step and an exit step as `{{workflow.outputs...}}`.
const GLOBALS: &str = r#"
templates:
  - name: gen
    image: alpine
    command: [sh, -c, "echo hi > /tmp/p"]
    outputs:
      parameters: [{name: p, valueFrom: {path: /tmp/p}}]
      artifacts: [{name: a, path: /tmp/p, globalName: g-art}]
  - name: wrap
    dag:
      - {stepName: inner, template: gen}
    outputs:
      parameters: [{name: w, globalName: g-wrapped, valueFrom: {parameter: "{{tasks.inner.outputs.parameters.p}}"}}]
containers:
  - stepName: own
    image: alpine
    command: [sh, -c, "echo x > /tmp/o"]
    outputs: {parameters: [{name: o, globalName: g-own, valueFrom: {path: /tmp/o}}]}
  - {stepName: call, template: wrap}
  - stepName: reader
    image: alpine
    command: [echo, "{{workflow.outputs.parameters.g-own}} {{ workflow.outputs.parameters.g-wrapped }}"]
    inputs: {artifacts: [{name: x, path: /x, from: "{{workflow.outputs.artifacts.g-art}}"}]}
onExit:
  - {stepName: bye, image: alpine, command: [echo, "{{workflow.outputs.parameters.g-wrapped}}"]}
"#;

#[test]
fn a_global_output_is_read_from_its_writer_which_the_reader_runs_after() {
    let spec = expanded(&workflow(GLOBALS));
    let reader = step(&spec, "reader");
    assert_eq!(
        reader.command.as_deref().unwrap(),
        [
            "echo",
            "{{steps.own.outputs.parameters.o}} {{steps.call/inner.outputs.parameters.p}}"
        ]
    );
    assert_eq!(
        reader.inputs.as_deref().unwrap().artifacts[0].from,
        "{{steps.call/inner.outputs.artifacts.a}}"
    );
    assert_eq!(reader.depends_on, ["own", "call/inner"]);
    assert_eq!(
        step(&spec, "bye").command.as_deref().unwrap(),
        ["echo", "{{steps.call/inner.outputs.parameters.p}}"]
    );
    assert!(step(&spec, "bye").depends_on.is_empty());
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
}

#[test]
fn an_unknown_or_doubly_written_global_output_is_refused_naming_it() {
    let unknown = GLOBALS.replace("parameters.g-own}}", "parameters.g-typo}}");
    let found = problems(&workflow(&unknown));
    assert!(
        found.iter().any(|p| p.contains(r#"step "reader": {{workflow.outputs.parameters.g-typo}}: no step's output parameters has globalName "g-typo" (global output names: g-own, g-wrapped)"#)),
        "{found:#?}"
    );
    let twice = GLOBALS.replace("globalName: g-wrapped", "globalName: g-own");
    let found = problems(&workflow(&twice));
    assert!(
        found
            .iter()
            .any(|p| p.contains(r#"globalName "g-own" is given by steps "own" and "call/inner""#)),
        "{found:#?}"
    );
}

/// Argo's dag-targets shape: A; B and C after A; D after B and C; E after C.
const TARGETS: &str = r#"
arguments: {parameters: [{name: target, value: E}]}
templates:
  - name: diamond
    target: "{{workflow.parameters.target}}"
    dag:
      - {stepName: A, image: alpine}
      - {stepName: B, image: alpine, dependsOn: [A]}
      - {stepName: C, image: alpine, dependsOn: [A]}
      - {stepName: D, image: alpine, dependsOn: [B, C]}
      - {stepName: E, image: alpine, dependsOn: [C]}
containers:
  - {stepName: run, template: diamond}
"#;

#[test]
fn a_dag_target_runs_the_targets_and_what_they_depend_on() {
    let names = |spec: &WorkFlowSpec| -> Vec<String> {
        spec.containers
            .iter()
            .map(|s| s.step_name.clone())
            .collect()
    };
    assert_eq!(
        names(&expanded(&workflow(TARGETS))),
        ["run/A", "run/C", "run/E"]
    );
    let two = TARGETS.replace("value: E", r#"value: "B E""#);
    assert_eq!(
        names(&expanded(&workflow(&two))),
        ["run/A", "run/B", "run/C", "run/E"]
    );
    let all = TARGETS.replace("value: E", r#"value: """#);
    assert_eq!(names(&expanded(&workflow(&all))).len(), 5);
    let wrong = TARGETS.replace("value: E", "value: F");
    let found = problems(&workflow(&wrong));
    assert_eq!(
        found,
        [
            r#"step "run": template "diamond": target "F" is not a step of it (its steps: A, B, C, D, E)"#
        ]
    );
}

#[test]
fn a_called_templates_parallelism_is_a_semaphore_on_each_of_its_steps() {
    let spec = expanded(&workflow(
        r#"
templates:
  - name: fan
    parallelism: 2
    steps:
      - - {name: each, image: alpine, withItems: [1, 2, 3, 4]}
      - - {name: wait, suspend: {}}
containers:
  - {stepName: a, template: fan}
  - {stepName: b, template: fan}
"#,
    ));
    let semaphores = |name: &str| -> Vec<(String, Option<i32>)> {
        let sync = step(&spec, name).synchronization.as_deref();
        (sync.into_iter().flat_map(|s| &s.semaphores))
            .map(|s| (s.name.clone(), s.limit.as_ref().and_then(|l| l.num())))
            .collect()
    };
    assert_eq!(
        semaphores("a/each"),
        [("release-x/a parallelism u-1".to_string(), Some(2))]
    );
    assert_eq!(
        semaphores("b/each"),
        [("release-x/b parallelism u-1".to_string(), Some(2))]
    );
    assert!(
        semaphores("a/wait").is_empty(),
        "a suspend step runs no pod"
    );
}
