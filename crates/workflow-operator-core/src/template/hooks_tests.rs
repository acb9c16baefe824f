//! Lifecycle hooks made steps: a step's `exit` hook and its hooks by expression (with the step
//! or after it), the steps after it waiting for them, the workflow's hooks as steps and exit
//! steps, and hooks that cannot be made steps refused naming them.

use super::hooks::after;
use super::tests::{expanded, names_and_deps, pairs, problems, workflow};

/// A steps template whose `build` has an exit hook, a hook while it runs and one on its
/// failure; `deploy` after it; the template called as `run`.
const HOOKED: &str = r#"
templates:
  - name: say
    inputs: {parameters: [{name: m}]}
    image: alpine
    command: [echo, "{{inputs.parameters.m}}"]
  - name: main
    steps:
      - - {name: lint, image: alpine}
      - - name: build
          image: alpine
          when: 'steps.lint.phase == "Succeeded"'
          hooks:
            exit: {template: say, arguments: {parameters: [{name: m, value: "{{steps.build.status}}"}]}}
            started: {template: say, expression: 'steps["build"].status == "Running"', arguments: {parameters: [{name: m, value: up}]}}
            broke: {template: say, expression: 'steps.build.status == "Failed"', arguments: {parameters: [{name: m, value: down}]}}
      - - {name: deploy, image: alpine}
containers:
  - {stepName: run, template: main}
"#;

#[test]
fn a_steps_hooks_are_steps_with_it_or_after_it_and_its_dependents_wait_for_them() {
    let spec = expanded(&workflow(HOOKED));
    assert_eq!(
        names_and_deps(&spec),
        pairs(&[
            ("run/lint", &[]),
            ("run/build", &["run/lint"]),
            (
                "run/deploy",
                &[
                    "run/build",
                    "run/build.hooks.broke",
                    "run/build.hooks.exit",
                    "run/build.hooks.started",
                ]
            ),
            ("run/build.hooks.broke", &["run/build"]),
            ("run/build.hooks.exit", &["run/build"]),
            ("run/build.hooks.started", &["run/lint"]),
        ])
    );
    let step = |name: &str| {
        (spec.containers.iter())
            .find(|s| s.step_name == name)
            .unwrap()
    };
    assert_eq!(
        step("run/build.hooks.exit").command.as_deref().unwrap(),
        ["echo", "{{steps.run/build.status}}"]
    );
    assert_eq!(step("run/build.hooks.exit").when, None);
    assert_eq!(
        step("run/build.hooks.broke").when.as_deref(),
        Some(r#"steps["run/build"].status == "Failed""#)
    );
    // Started with its step: under the same `when`.
    assert_eq!(
        step("run/build.hooks.started").when.as_deref(),
        Some(r#"steps["run/lint"].phase == "Succeeded""#)
    );
    for hook in ["broke", "exit", "started"] {
        let hook = step(&format!("run/build.hooks.{hook}"));
        assert!(hook.continue_on.is_some_and(|c| c.failed), "{hook:?}");
    }
    let names: Vec<&String> = step("run/build").hooks.as_ref().unwrap().keys().collect();
    assert_eq!(names, ["broke", "exit", "started"]);
    // The planner starts the hooks after the step after its failure too, not the one with it.
    let index = |name: &str| (spec.containers.iter()).position(|s| s.step_name == name);
    let after = after(&spec.containers);
    assert_eq!(
        after.get(&index("run/build").unwrap()),
        Some(&vec![
            index("run/build.hooks.broke").unwrap(),
            index("run/build.hooks.exit").unwrap()
        ])
    );
    assert_eq!(after.len(), 1);
}

#[test]
fn the_workflows_hooks_are_a_step_started_with_the_run_and_exit_steps() {
    let spec = expanded(&workflow(
        r#"
templates:
  - {name: say, image: alpine, command: [echo, hi]}
hooks:
  exit: {template: say}
  running: {template: say, expression: 'workflow.status == "Running"'}
  failed: {template: say, expression: 'workflow.status == "Failed"'}
containers:
  - {stepName: main, image: alpine}
"#,
    ));
    assert!(spec.hooks.is_empty());
    assert_eq!(
        names_and_deps(&spec),
        pairs(&[("main", &[]), ("hooks.running", &[])])
    );
    let exits: Vec<(&str, Option<&str>, bool)> = (spec.on_exit.iter())
        .map(|s| {
            let tolerated = s.continue_on.is_some_and(|c| c.failed);
            (s.step_name.as_str(), s.when.as_deref(), tolerated)
        })
        .collect();
    assert_eq!(
        exits,
        [
            ("hooks.exit", None, false),
            ("hooks.failed", Some(r#"workflow.status == "Failed""#), true)
        ]
    );
}

#[test]
fn hooks_that_cannot_be_steps_are_refused_naming_them() {
    let found = problems(&workflow(
        r#"
templates:
  - {name: say, image: alpine}
  - {name: fan, image: alpine, hooks: {exit: {template: say}}}
hooks:
  later: {template: say}
containers:
  - stepName: a
    image: alpine
    hooks:
      exit: {}
      late: {template: say}
  - {stepName: b, image: alpine, withItems: [x], hooks: {exit: {template: say}}}
  - {stepName: c, template: fan}
"#,
    ));
    let expected = [
        r#"spec.hooks.later: expression: required (only the "exit" hook runs without one)"#,
        r#"step "a": hooks.exit: template: required (the template the hook calls)"#,
        r#"step "a": hooks.late: expression: required (only the "exit" hook runs without one)"#,
        r#"step "b": hooks.exit: the hooks of a step that fans out are not supported yet"#,
    ];
    for problem in expected {
        assert!(found.iter().any(|p| p == problem), "{problem}: {found:#?}");
    }
}
