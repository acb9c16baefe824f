//! Recursion under a `when`: unrolled to the depth limit, the call past it a step that fails
//! naming the limit; without a `when`, still a template cycle.

use super::recursion::DEPTH_LIMIT;
use super::tests::{expanded, problems, workflow};

/// Argo's coinflip-recursive: flip, then heads ends it, tails calls the template again.
const RECURSIVE: &str = r#"
templates:
  - name: coinflip
    steps:
      - - {name: flip, image: alpine, source: "echo tails"}
      - - {name: heads, image: alpine, command: [echo, heads], when: 'steps.flip.outputs.result == "heads"'}
        - {name: tails, template: coinflip, when: 'steps.flip.outputs.result == "tails"'}
containers:
  - {stepName: coin, template: coinflip}
"#;

#[test]
fn a_template_calling_itself_under_a_when_is_unrolled_to_the_depth_limit() {
    let spec = expanded(&workflow(RECURSIVE));
    // Each level: flip, heads and the call; the last call is the step that fails.
    assert_eq!(spec.containers.len(), 2 * DEPTH_LIMIT + 1);
    let deepest = "coin/".to_string() + &"tails/".repeat(DEPTH_LIMIT - 1);
    let last = spec.containers.last().unwrap();
    assert_eq!(last.step_name, format!("{deepest}tails"));
    assert!(
        last.when
            .as_deref()
            .unwrap()
            .contains(&format!("{deepest}flip")),
        "{last:?}"
    );
    assert_eq!(last.depends_on, [format!("{deepest}flip")]);
    let why = last.fail.as_deref().unwrap();
    assert!(
        why.contains("recursion depth limit reached: template coinflip is already 10 calls deep"),
        "{why}"
    );
    // The level above calls it under its own `when`, and is a plain step no more.
    let flips = spec
        .containers
        .iter()
        .filter(|s| s.step_name.ends_with("flip"))
        .count();
    assert_eq!(flips, DEPTH_LIMIT);
}

#[test]
fn a_template_calling_itself_without_a_when_is_a_cycle() {
    let text = RECURSIVE.replace(", when: 'steps.flip.outputs.result == \"tails\"'", "");
    let found = problems(&workflow(&text));
    assert!(
        found.iter().any(|p| p.contains(
            "template cycle: coinflip -> coinflip: a template may call itself only under a `when`"
        )),
        "{found:#?}"
    );
}

/// Argo's recursive-for-loop: each level passes its counter's result to the next, whose own
/// counter has the same name; the reference stays the caller's.
const LOOP: &str = r#"
templates:
  - name: loop
    inputs: {parameters: [{name: counter}]}
    steps:
      - - {name: count, image: alpine, command: [echo, "{{inputs.parameters.counter}}"]}
      - - name: again
          template: loop
          when: '{{steps.count.outputs.result}} < 3'
          arguments: {parameters: [{name: counter, value: "{{steps.count.outputs.result}}"}]}
containers:
  - {stepName: run, template: loop, arguments: {parameters: [{name: counter, value: "0"}]}}
"#;

#[test]
fn a_reference_a_recursive_call_passes_names_the_caller_s_step_not_the_callee_s() {
    let spec = expanded(&workflow(LOOP));
    let second = (spec.containers.iter())
        .find(|s| s.step_name == "run/again/count")
        .unwrap();
    assert_eq!(
        second.command.as_deref().unwrap(),
        ["echo", "{{steps.run/count.outputs.result}}"]
    );
}
