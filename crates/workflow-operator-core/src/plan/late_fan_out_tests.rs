//! The planner with fan-outs decided from what ran before: a `withSequence` whose bound is a
//! step's output, read once that step told it; a `when` naming the item, decided per item (a
//! skipped item recorded as such, the step done once every item ran or was skipped).

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

/// Argo's parameter aggregation: `gen` over four numbers, each telling its `evenness`; `half`
/// over every item's parameters, each item under its own `when`; `show` over half's results.
fn evenness() -> WorkFlow {
    running(
        WorkFlow::test("agg")
            .step("gen", &[])
            .with_items(&[json!(1), json!(2), json!(3), json!(4)])
            .command(&["sh", "-c", "echo {{item}}"])
            .step("half", &["gen"])
            .with_param("{{steps.gen.outputs.parameters}}")
            .when(r#""{{item.evenness}}" == "even""#)
            .command(&["sh", "-c", "echo $(({{item.n}} / 2))"])
            .step("show", &["half"])
            .with_param("{{steps.half.outputs.result}}")
            .command(&["echo", "{{item}}"])
            .build(),
    )
}

/// `gen`'s four items succeeded, telling their number and evenness; then `half`'s `done`
/// items succeeded printing half their number.
fn evenness_jobs(wf: &WorkFlow, done: &[u32]) -> Vec<ObservedJob> {
    let mut jobs = Jobs::of(wf);
    for item in 0..4u32 {
        let n = (item + 1).to_string();
        let evenness = if item % 2 == 1 { "even" } else { "odd" };
        jobs = (jobs.succeeded("gen").item(item))
            .outputs(Ok(&[("n", n.as_str()), ("evenness", evenness)]));
    }
    for &item in done {
        let number = item + 1;
        let half = (number / 2).to_string();
        jobs = (jobs.succeeded("half").item(item)).outputs(Ok(&[("result", half.as_str())]));
    }
    jobs.build()
}

#[test]
fn a_when_naming_the_item_runs_each_item_it_holds_for_and_skips_the_others() {
    let wf = evenness();
    let plan = plan(&wf, &evenness_jobs(&wf, &[]), at(2));
    assert_eq!(
        items_created(&plan, "half"),
        [
            json!({"n": "2", "evenness": "even"}),
            json!({"n": "4", "evenness": "even"})
        ]
    );
    for skipped in ["half[0]", "half[2]"] {
        let entry = entry(&plan, skipped);
        assert_eq!(entry.phase, StepPhase::Skipped, "{skipped}");
        assert_eq!(entry.reason.as_deref(), Some(REASON_WHEN_FALSE));
    }
    let half = entry(&plan, "half").items.unwrap();
    assert_eq!((half.total, half.running, half.skipped), (4, 2, 2));

    // Once its items that ran succeeded, the step is done; `show` runs over their results
    // alone, in the same pass.
    let wf = super::data_tests::written(wf, &plan);
    let plan = super::plan(&wf, &evenness_jobs(&wf, &[1, 3]), at(3));
    assert_eq!(items_created(&plan, "show"), [json!(1), json!(2)]);
    let half = entry(&plan, "half");
    assert_eq!(half.phase, StepPhase::Succeeded);
    assert_eq!(
        half.items.map(|i| (i.total, i.succeeded, i.skipped)),
        Some((4, 2, 2))
    );
    assert_eq!(entry(&plan, "half[2]").phase, StepPhase::Skipped);
    assert!(plan.status.unwrap().executed.contains(&"half".to_string()));
}

#[test]
fn a_step_whose_when_skips_every_item_is_done_and_its_dependents_run() {
    let mut wf = WorkFlow::test("none")
        .step("each", &[])
        .with_items(&[json!(1), json!(2)])
        .when("{{item}} > 5")
        .step("after", &["each"])
        .with_param("{{steps.each.outputs.result}}")
        .step("last", &["after"])
        .build();
    wf.spec.containers[0].command = Some(vec!["echo".into()]);
    let plan = plan(&wf, &[], at(0));
    let created: Vec<&str> = (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob { step, .. } => Some(step.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(created, ["last"]);
    let status = plan.status.unwrap();
    assert_eq!(status.executed, ["each", "after"]);
    let skipped: Vec<&str> = (status.steps.iter())
        .filter(|s| s.phase == StepPhase::Skipped)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(skipped, ["each[0]", "each[1]"]);
}

#[test]
fn a_when_that_fails_for_an_item_fails_that_item_naming_it() {
    let wf = WorkFlow::test("bad")
        .step("each", &[])
        .with_items(&[json!({"n": 1}), json!({"n": "many"})])
        .when("{{item.n}} > 0")
        .build();
    let plan = plan(&wf, &[], at(0));
    // As any item failing: the step starts no more items, and fails the workflow.
    assert!(items_created(&plan, "each").is_empty());
    let failed = entry(&plan, "each[1]");
    assert_eq!(failed.reason.as_deref(), Some(REASON_WHEN_FAILED));
    let message = failed.message.clone().unwrap();
    assert!(
        message.starts_with(r#"when "{{item.n}} > 0": "#),
        "{message}"
    );
    let status = plan.status.unwrap();
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    let message = status.message.unwrap();
    assert!(
        message.starts_with("step each[1] failed: when"),
        "{message}"
    );
}

#[test]
fn an_item_without_the_field_its_when_names_fails_as_a_bad_item() {
    let wf = running(
        WorkFlow::test("bad")
            .step("gen", &[])
            .step("each", &["gen"])
            .with_param("{{steps.gen.outputs.list}}")
            .when(r#""{{item.e}}" == "even""#)
            .build(),
    );
    let list = r#"[{"e": "even"}, {"x": 1}]"#;
    let jobs = Jobs::of(&wf)
        .succeeded("gen")
        .outputs(Ok(&[("list", list)]))
        .build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(items_created(&plan, "each").is_empty());
    let failed = entry(&plan, "each[1]");
    assert_eq!(failed.reason.as_deref(), Some(REASON_BAD_ITEM));
    assert_eq!(
        failed.message.as_deref(),
        Some(r#"{{item.e}}: the item {"x":1} has no field "e""#)
    );
}
