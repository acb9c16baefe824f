//! Numbers written as text (Argo's `limit: "3"`, `count: "{{workflow.parameters.n}}"`): a
//! step's are filled with the rest of its text (it is read back from JSON, where text holding
//! a number becomes the number); the workflow's own (`parallelism`, `activeDeadlineSeconds`, a
//! semaphore's `limit`) here. Text still not a number once filled is refused naming the field,
//! but for a `withSequence` bound that is one `{{steps.NAME.outputs.KEY}}` (`fan_out` reads it
//! once that step told it); a `resources` quantity (which may be a parameter) still not a
//! quantity once filled is refused alike.

use std::str::FromStr;

use super::fill::{Unfilled, Vars, fill};
use kube_schema_check::quantity;

use crate::crd::{IntOrExpr, Step, Synchronization, WorkFlowSpec};
use crate::fan_out;

/// The numbers of `step` written as text, each `(path, text)`.
pub(super) fn step_texts(step: &Step) -> impl Iterator<Item = (String, &str)> {
    let strategy = step.retry_strategy.as_deref();
    let sequence = step.with_sequence.as_deref();
    let fixed = [
        ("timeout", text(step.timeout.as_ref())),
        ("retries", text(step.retries.as_ref())),
        ("retryStrategy.limit", text(strategy.map(|s| &s.limit))),
        (
            "retryStrategy.backoff.factor",
            text(strategy.and_then(|s| s.backoff.as_ref()?.factor.as_ref())),
        ),
        (
            "withSequence.count",
            text(sequence.and_then(|s| s.count.as_ref())),
        ),
        (
            "withSequence.start",
            text(sequence.and_then(|s| s.start.as_ref())),
        ),
        (
            "withSequence.end",
            text(sequence.and_then(|s| s.end.as_ref())),
        ),
        (
            "http.timeoutSeconds",
            text(step.http.as_ref().and_then(|h| h.timeout_seconds.as_ref())),
        ),
    ];
    fixed
        .into_iter()
        .filter_map(|(path, text)| Some((path.to_string(), text?)))
        .chain(semaphore_texts(step.synchronization.as_deref(), ""))
}

/// The workflow's own numbers written as text, each `(path, text)`.
pub(super) fn spec_texts(spec: &WorkFlowSpec) -> impl Iterator<Item = (String, &str)> {
    [
        ("spec.parallelism", text(spec.parallelism.as_ref())),
        (
            "spec.activeDeadlineSeconds",
            text(spec.active_deadline_seconds.as_ref()),
        ),
    ]
    .into_iter()
    .filter_map(|(path, text)| Some((path.to_string(), text?)))
    .chain(semaphore_texts(spec.synchronization.as_deref(), "spec."))
}

fn semaphore_texts<'s>(
    locks: Option<&'s Synchronization>,
    at: &'s str,
) -> impl Iterator<Item = (String, &'s str)> {
    let semaphores = locks.map_or(&[][..], |l| &l.semaphores[..]);
    semaphores.iter().enumerate().filter_map(move |(i, s)| {
        Some((
            format!("{at}synchronization.semaphores[{i}].limit"),
            text(s.limit.as_ref())?,
        ))
    })
}

fn text<T>(value: Option<&IntOrExpr<T>>) -> Option<&str> {
    match value? {
        IntOrExpr::Num(_) => None,
        IntOrExpr::Expr(text) => Some(text),
    }
}

/// Each number of `step` still text once filled: `step "NAME": PATH: "TEXT" is not a number`;
/// but a `withSequence` bound that is a step's output, read once that step told it.
pub(super) fn step_problems(step: &Step) -> Vec<String> {
    let mut problems: Vec<String> = step_texts(step)
        .filter(|(path, text)| {
            !(path.starts_with("withSequence.") && fan_out::output_bound(text).is_some())
        })
        .map(|(path, text)| not_a_number(&format!("step {:?}: {path}", step.step_name), text))
        .collect();
    problems.extend(quantity_problems(step));
    // The schema refuses a 0 written as such; this is one a parameter filled.
    if step.timeout == Some(IntOrExpr::Num(0)) {
        problems.push(format!(
            "step {:?}: timeout: must not be 0 (use -1 for unlimited)",
            step.step_name
        ));
    }
    problems
}

/// Each quantity of `step`'s `resources` that is not one once filled:
/// `step "NAME": resources.limits.cpu: "TEXT" is not a quantity`.
fn quantity_problems(step: &Step) -> Vec<String> {
    let Some(resources) = step.resources.as_deref() else {
        return Vec::new();
    };
    let kinds = [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ];
    let quantities = kinds.into_iter().flat_map(|(kind, quantities)| {
        (quantities.iter().flatten()).map(move |(name, q)| (kind, name, &q.0))
    });
    quantities
        .filter(|(_, _, text)| quantity::value(text).is_none())
        .map(|(kind, name, text)| {
            format!(
                "step {:?}: resources.{kind}.{name}: {text:?} is not a quantity",
                step.step_name
            )
        })
        .collect()
}

/// Each of the workflow's own numbers still text once filled.
pub(super) fn spec_problems(spec: &WorkFlowSpec) -> Vec<String> {
    spec_texts(spec)
        .map(|(path, text)| not_a_number(&path, text))
        .collect()
}

fn not_a_number(path: &str, text: &str) -> String {
    format!("{path}: {text:?} is not a number")
}

/// Fills the workflow's own numbers written as text with `vars` (`workflow.*` forms).
pub(super) fn fill_spec(spec: &mut WorkFlowSpec, vars: &Vars, problems: &mut Vec<String>) {
    let mut unfilled = Unfilled::new();
    fill_number(&mut spec.parallelism, vars, &mut unfilled);
    fill_number(&mut spec.active_deadline_seconds, vars, &mut unfilled);
    if let Some(locks) = spec.synchronization.as_deref_mut() {
        for semaphore in &mut locks.semaphores {
            fill_number(&mut semaphore.limit, vars, &mut unfilled);
        }
    }
    for (form, why) in unfilled {
        problems.push(format!("spec: {form}: {why}"));
    }
}

/// `value` filled with `vars`, a number once its text is one.
fn fill_number<T: FromStr>(value: &mut Option<IntOrExpr<T>>, vars: &Vars, unfilled: &mut Unfilled) {
    if let Some(IntOrExpr::Expr(text)) = value {
        let filled = fill(text, vars, unfilled);
        *value = Some(match filled.trim().parse() {
            Ok(n) => IntOrExpr::Num(n),
            Err(_) => IntOrExpr::Expr(Box::new(filled)),
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::crd::{IntOrExpr, OptionNum};
    use crate::template::tests::{expanded, problems, workflow};

    #[test]
    fn numbers_written_as_text_or_as_parameters_are_filled_before_they_are_checked() {
        let wf = workflow(
            r#"
arguments:
  parameters: [{name: n, value: "3"}, {name: p, value: 2}, {name: tries, value: "4"}]
parallelism: "{{workflow.parameters.p}}"
activeDeadlineSeconds: "600"
templates:
  - name: flaky
    inputs: {parameters: [{name: r}]}
    image: busybox
    retryStrategy: {limit: "{{inputs.parameters.r}}", backoff: {duration: 1s, factor: "2"}}
containers:
  - {stepName: each, image: busybox, withSequence: {count: "{{workflow.parameters.n}}", start: "10"}, timeout: 30}
  - {stepName: call, template: flaky, arguments: {parameters: [{name: r, value: "{{workflow.parameters.tries}}"}]}}
"#,
        );
        let spec = expanded(&wf);
        assert_eq!(spec.parallelism.num(), Some(2));
        assert_eq!(spec.active_deadline_seconds.num(), Some(600));
        let sequence = spec.containers[0].with_sequence.as_deref().unwrap();
        assert_eq!(
            (sequence.count.num(), sequence.start.num()),
            (Some(3), Some(10))
        );
        assert_eq!(spec.containers[0].timeout, Some(30.into()));
        let strategy = spec.containers[1].retry_strategy.as_deref().unwrap();
        assert_eq!(strategy.limit, IntOrExpr::Num(4));
        assert_eq!(strategy.backoff.as_ref().unwrap().factor.num(), Some(2.0));
        // Numbers stay numbers when written back, as the run id hashes them.
        let written = serde_json::to_value(&spec.containers[0]).unwrap();
        assert_eq!(
            written["withSequence"],
            serde_json::json!({"count": 3, "start": 10})
        );
    }

    #[test]
    fn a_quantity_from_a_parameter_is_filled_and_one_still_not_a_quantity_is_refused() {
        let text = r#"
arguments:
  parameters: [{name: cpu, value: CPU}]
templates:
  - name: work
    inputs: {parameters: [{name: mem}]}
    image: busybox
    resources: {limits: {cpu: "{{workflow.parameters.cpu}}", memory: "{{inputs.parameters.mem}}"}}
containers:
  - {stepName: a, template: work, arguments: {parameters: [{name: mem, value: 64Mi}]}}
"#;
        let spec = expanded(&workflow(&text.replace("CPU", "250m")));
        let resources = spec.containers[0].resources.as_deref().unwrap();
        let limits = resources.limits.as_ref().unwrap();
        assert_eq!(
            (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
            ("250m", "64Mi")
        );
        assert_eq!(
            problems(&workflow(&text.replace("CPU", "lots"))),
            [r#"step "a": resources.limits.cpu: "lots" is not a quantity"#]
        );
    }

    #[test]
    fn a_timeout_is_seconds_argos_duration_text_or_a_parameter_filled_with_either() {
        let wf = workflow(
            r#"
arguments:
  parameters: [{name: limit, value: 1m30s}, {name: plain, value: "20"}, {name: zero, value: "0"}]
templates:
  - {name: slow, inputs: {parameters: [{name: t}]}, image: busybox, timeout: "{{inputs.parameters.t}}"}
containers:
  - {stepName: text, image: busybox, timeout: "10s"}
  - {stepName: tenth, image: busybox, timeout: 1500ms}
  - {stepName: number, image: busybox, timeout: "-1"}
  - {stepName: param, image: busybox, timeout: "{{workflow.parameters.plain}}"}
  - {stepName: called, template: slow, arguments: {parameters: [{name: t, value: "{{workflow.parameters.limit}}"}]}}
"#,
        );
        let timeouts: Vec<serde_json::Value> = (expanded(&wf).containers.iter())
            .map(|s| serde_json::to_value(s).unwrap()["timeout"].clone())
            .collect();
        assert_eq!(timeouts, [10, 2, -1, 20, 90].map(serde_json::Value::from));
        let bad = workflow(
            r#"
arguments:
  parameters: [{name: zero, value: "0"}]
containers:
  - {stepName: a, image: busybox, timeout: "soon"}
  - {stepName: b, image: busybox, timeout: "{{workflow.parameters.zero}}"}
"#,
        );
        assert_eq!(
            problems(&bad),
            [
                r#"step "a": timeout: "soon" is not a number"#,
                r#"step "b": timeout: must not be 0 (use -1 for unlimited)"#,
            ]
        );
    }

    #[test]
    fn text_still_not_a_number_once_filled_is_refused_naming_the_field_and_the_value() {
        let wf = workflow(
            r#"
arguments:
  parameters: [{name: word, value: many}]
parallelism: "{{workflow.parameters.word}}"
templates:
  - name: main
    steps:
      - - {name: a, image: busybox}
      - - {name: b, image: busybox, withSequence: {count: "ten"}}
        - {name: c, image: busybox, retryStrategy: {limit: "{{workflow.parameters.word}}"}}
containers:
  - {stepName: s, template: main}
"#,
        );
        assert_eq!(
            problems(&wf),
            [
                r#"step "s/b": withSequence.count: "ten" is not a number"#,
                r#"step "s/c": retryStrategy.limit: "many" is not a number"#,
                r#"spec.parallelism: "many" is not a number"#,
            ]
        );
    }
}
