//! The planner with fan-outs decided from what ran before: a `withSequence` whose bound is a
//! step's output, read once that step told it.

use serde_json::{Value, json};

use super::data_tests::{at, entry, running};
use super::*;
use crate::crd::{IntOrExpr, Sequence};
use crate::testing::Jobs;

/// The items of the Jobs the plan creates for `step`, in order.
fn items_created(plan: &Plan, step: &str) -> Vec<Value> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob {
                step: s, instance, ..
            } if s == step => instance.item.as_ref().map(|i| i.value.clone()),
            _ => None,
        })
        .collect()
}

/// A `withSequence` of `count`, `start` and `end` each a number or text.
fn sequence(count: Option<&str>, start: Option<&str>, end: Option<&str>) -> Box<Sequence> {
    let bound = |text: Option<&str>| {
        text.map(|t| match t.parse() {
            Ok(n) => IntOrExpr::Num(n),
            Err(_) => IntOrExpr::Expr(Box::new(t.to_string())),
        })
    };
    Box::new(Sequence {
        count: bound(count),
        start: bound(start),
        end: bound(end),
        format: None,
    })
}

/// `gen`, then `each` over `sequence` (its bounds from gen's outputs), then `after`; gen
/// succeeded with `outputs`.
fn over_outputs(sequence: Box<Sequence>, outputs: &[(&str, &str)]) -> (WorkFlow, Vec<ObservedJob>) {
    let mut wf = WorkFlow::test("seq")
        .step("gen", &[])
        .command(&["sh", "-c", "echo 3"])
        .step("each", &["gen"])
        .command(&["echo", "{{item}}"])
        .step("after", &["each"])
        .build();
    wf.spec.containers[1].with_sequence = Some(sequence);
    let wf = running(wf);
    let jobs = Jobs::of(&wf).succeeded("gen").outputs(Ok(outputs)).build();
    (wf, jobs)
}

#[test]
fn a_sequence_whose_bound_is_a_steps_output_runs_its_numbers_once_that_step_told_it() {
    let count = sequence(Some("{{steps.gen.outputs.parameters.n}}"), None, None);
    let (wf, jobs) = over_outputs(count.clone(), &[("n", "3\n")]);
    // Before gen ends, nothing of `each` runs.
    let waiting = plan(&wf, &[], at(1));
    assert!(items_created(&waiting, "each").is_empty());
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(items_created(&plan, "each"), [json!(0), json!(1), json!(2)]);
    // gen's output is recorded with it: a restart finds the same numbers.
    assert_eq!(entry(&plan, "gen").outputs["n"], "3\n");

    let to_end = sequence(None, Some("2"), Some("{{steps.gen.outputs.result}}"));
    let (wf, jobs) = over_outputs(to_end, &[("result", "4")]);
    let plan = super::plan(&wf, &jobs, at(1));
    assert_eq!(items_created(&plan, "each"), [json!(2), json!(3), json!(4)]);

    let from = sequence(None, Some("{{steps.gen.outputs.first}}"), Some("0"));
    let (wf, jobs) = over_outputs(from, &[("first", "1")]);
    let plan = super::plan(&wf, &jobs, at(1));
    assert_eq!(items_created(&plan, "each"), [json!(1), json!(0)]);
}

#[test]
fn a_sequence_bound_that_is_not_a_whole_number_fails_its_step_saying_so() {
    let count = sequence(Some("{{steps.gen.outputs.n}}"), None, None);
    let (wf, jobs) = over_outputs(count, &[("n", "many")]);
    let plan = plan(&wf, &jobs, at(1));
    assert!(items_created(&plan, "each").is_empty());
    let status = plan.status.as_ref().unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some(
            r#"step each failed: withSequence.count: {{steps.gen.outputs.n}} is "many", not a whole number"#
        )
    );
    assert_eq!(
        entry(&plan, "each").reason.as_deref(),
        Some(REASON_BAD_PARAM)
    );
    // A count of none: the step is done at once.
    let count = sequence(Some("{{steps.gen.outputs.n}}"), None, None);
    let (wf, jobs) = over_outputs(count, &[("n", "0")]);
    let plan = super::plan(&wf, &jobs, at(1));
    assert_eq!(plan.status.unwrap().executed, ["gen", "each"]);
}

#[test]
fn a_sequence_bound_must_name_an_output_of_a_step_upstream() {
    let refused = |sequence: Box<Sequence>| {
        let mut wf = WorkFlow::test("seq")
            .step("gen", &[])
            .step("each", &[])
            .build();
        wf.spec.containers[1].with_sequence = Some(sequence);
        match Compiled::new(&wf.spec).dag {
            Err(error) => error.to_string(),
            Ok(_) => panic!("accepted"),
        }
    };
    let not_upstream = refused(sequence(Some("{{steps.gen.outputs.n}}"), None, None));
    assert!(
        not_upstream.contains("withSequence.count {{steps.gen.outputs.n}} names step \"gen\", which does not run before it"),
        "{not_upstream}"
    );
    let unknown = refused(sequence(None, None, Some("{{steps.nope.outputs.n}}")));
    assert!(unknown.contains("which does not exist"), "{unknown}");
}
