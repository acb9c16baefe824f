//! Argo's `steps` templates: groups compiled to `dependsOn`, names under the call, sibling
//! references (`steps.X`, `tasks.X`) renamed, and entries that are not steps refused.

use super::tests::{expanded, names_and_deps, pairs, problems, workflow};

/// A coin flip as Argo writes it: a group of one, a group of two under `when`s (one in
/// Argo's `tasks.` form), a group of one reading a sibling's output.
const COIN: &str = r#"
templates:
  - name: echo
    inputs: {parameters: [{name: m}]}
    image: alpine
    command: [echo, "{{inputs.parameters.m}}"]
  - name: main
    steps:
      - - {name: flip, image: alpine, command: [sh, -c, "echo heads"]}
      - - name: heads
          template: echo
          arguments: {parameters: [{name: m, value: "it was {{steps.flip.outputs.result}}"}]}
          when: 'steps.flip.outputs.result == "heads"'
        - {name: tails, template: echo, arguments: {parameters: [{name: m, value: tails}]}, when: 'tasks.flip.outputs.result == "tails"'}
      - - {name: done, image: alpine, command: [echo, "{{tasks.heads.outputs.result}}"]}
containers:
  - {stepName: start, image: x}
  - {stepName: run, template: main, dependsOn: [start]}
  - {stepName: after, image: x, dependsOn: [run]}
"#;

#[test]
fn each_group_of_a_steps_template_runs_after_every_step_of_the_group_before() {
    let spec = expanded(&workflow(COIN));
    assert_eq!(
        names_and_deps(&spec),
        pairs(&[
            ("start", &[]),
            ("run/flip", &["start"]),
            ("run/heads", &["run/flip"]),
            ("run/tails", &["run/flip"]),
            ("run/done", &["run/heads", "run/tails"]),
            ("after", &["run/done"]),
        ])
    );
    let step = |name: &str| {
        spec.containers
            .iter()
            .find(|s| s.step_name == name)
            .unwrap()
    };
    assert_eq!(
        step("run/heads").command.as_deref().unwrap(),
        ["echo", "it was {{steps.run/flip.outputs.result}}"]
    );
    assert_eq!(
        step("run/heads").when.as_deref(),
        Some(r#"steps["run/flip"].outputs.result == "heads""#)
    );
    assert_eq!(
        step("run/tails").when.as_deref(),
        Some(r#"steps["run/flip"].outputs.result == "tails""#)
    );
    assert_eq!(
        step("run/done").command.as_deref().unwrap(),
        ["echo", "{{steps.run/heads.outputs.result}}"]
    );
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
}

#[test]
fn steps_templates_nest_and_fan_out_per_item() {
    let wf = workflow(
        r#"
templates:
  - name: inner
    inputs: {parameters: [{name: os}]}
    steps:
      - - {name: build, image: "b:{{inputs.parameters.os}}"}
      - - {name: test, image: t}
  - name: outer
    steps:
      - - {name: prepare, image: p}
      - - {name: each, template: inner, withItems: [linux, mac], arguments: {parameters: [{name: os, value: "{{item}}"}]}}
        - {name: lint, image: l}
      - - {name: publish, image: x}
containers:
  - {stepName: a, template: outer}
"#,
    );
    let spec = expanded(&wf);
    assert_eq!(
        names_and_deps(&spec),
        pairs(&[
            ("a/prepare", &[]),
            ("a/each[0]/build", &["a/prepare"]),
            ("a/each[0]/test", &["a/each[0]/build"]),
            ("a/each[1]/build", &["a/prepare"]),
            ("a/each[1]/test", &["a/each[1]/build"]),
            ("a/lint", &["a/prepare"]),
            ("a/publish", &["a/each[0]/test", "a/each[1]/test", "a/lint"]),
        ])
    );
    assert_eq!(spec.containers[3].image, "b:mac");
}

#[test]
fn a_steps_entry_that_is_not_a_step_is_refused_naming_its_place() {
    let refused = |steps: &str| {
        let wf = workflow(&format!(
            "templates:\n  - name: t\n    steps: {steps}\ncontainers:\n  - {{stepName: s, template: t}}\n"
        ));
        problems(&wf).join("; ")
    };
    let cases = [
        (
            "[[{name: a, image: x}], [{image: x}]]",
            r#"step "s": template "t": steps[1][0]: name: required"#,
        ),
        (
            "[[{name: a, image: x, dependsOn: [b]}]]",
            r#"step "s": template "t": steps[0][0]: "a": dependsOn is not a field of a steps entry"#,
        ),
        (
            "[[{name: a, image: x}], [{name: a, image: x}]]",
            r#"step "s": template "t": steps[1][0]: name "a" is used twice"#,
        ),
        (
            "[[{name: a, image: x, onExit: t}]]",
            r#"step "s": template "t": steps[0][0]: "a": unknown field onExit: a step has "#,
        ),
    ];
    for (steps, expected) in cases {
        let found = refused(steps);
        assert!(found.starts_with(expected), "{steps}: {found}");
    }
    let both = workflow(
        "templates:\n  - {name: t, dag: [{stepName: a, image: x}], steps: [[{name: a, image: x}]]}\ncontainers:\n  - {stepName: s, template: t}\n",
    );
    assert_eq!(
        problems(&both),
        [r#"step "s": template "t": has both dag and steps: it is one or the other"#]
    );
}

/// An exit step calling a steps template whose steps read each other (Argo's exit handler
/// written in our API): its steps are exit steps under the call's name, their references
/// renamed, and the spec compiles (each reads the exit steps before it).
#[test]
fn an_exit_step_calling_a_steps_template_expands_to_exit_steps_that_read_each_other() {
    let spec = expanded(&workflow(
        r#"
templates:
  - name: handler
    steps:
      - - {name: probe, image: alpine, command: [sh, -c, "echo down"]}
      - - name: notify
          image: alpine
          command: [echo, "{{steps.probe.outputs.result}}"]
          when: 'steps.probe.status == "Succeeded"'
containers:
  - {stepName: build, image: x}
onExit:
  - {stepName: exit, template: handler}
"#,
    ));
    let exits: Vec<(&str, &[String])> = (spec.on_exit.iter())
        .map(|s| (s.step_name.as_str(), s.depends_on.as_slice()))
        .collect();
    assert_eq!(
        exits,
        [
            ("exit/probe", &[][..]),
            ("exit/notify", &["exit/probe".to_string()][..])
        ]
    );
    assert_eq!(
        spec.on_exit[1].command.as_deref().unwrap(),
        ["echo", "{{steps.exit/probe.outputs.result}}"]
    );
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
    assert_eq!(compiled.flow.exit_read, [0].into());
    assert_eq!(compiled.flow.exit_result_read, [0].into());
}
