//! The planner with rules on the run's metrics (`spec.rules`): firings change what starts
//! in the same plan that records them, a plan made again from the same Jobs and status
//! decides the same firing, and one made after the status was written never repeats it.

use super::data_tests::{at, running, written};
use super::*;
use crate::crd::{CONDITION_FAILED, RuleAction};
use crate::testing::{Jobs, creates};

fn status(plan: &Plan) -> &WorkFlowStatus {
    plan.status.as_ref().expect("the plan changes the status")
}

/// Six runs of one step `sim`, two at once; `grow` (twice at most, within 4) once a run of
/// `sim` took 10 s on average.
fn growing() -> WorkFlow {
    running(
        WorkFlow::test("w")
            .runs(6)
            .parallelism(2)
            .step("sim", &[])
            .rule_with(
                "slow",
                "steps.sim.duration.mean >= 10",
                RuleAction::Grow,
                |r| {
                    r.repetitions = Some(2);
                    r.max_parallelism = Some(4);
                },
            )
            .build(),
    )
}

/// The runs of `plan`'s Job creates.
fn created_runs(plan: &Plan) -> Vec<u32> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { instance, .. } => Some(instance.run_index),
            _ => None,
        })
        .collect()
}

#[test]
fn a_firing_is_recorded_with_the_plan_it_changes_and_never_repeated() {
    let workflow = growing();
    let jobs = Jobs::of(&workflow)
        .succeeded("sim")
        .in_run(0)
        .ran(at(0), at(12))
        .active("sim", at(0))
        .in_run(1)
        .build();
    let first = plan(&workflow, &jobs, at(12));
    assert_eq!(
        first.fired,
        ["slow: steps.sim.duration.mean = 12 >= 10: parallelism 2 -> 3"]
    );
    assert_eq!(
        created_runs(&first),
        [2, 3],
        "parallelism 3: two more start"
    );
    let recorded = status(&first);
    assert_eq!(recorded.parallelism, Some(3));
    assert_eq!(recorded.rules[0].fired, 1);
    assert_eq!(recorded.rules[0].last_fired_at_completions, Some(1));
    assert_eq!(recorded.metrics["sim"].succeeded, 1);

    // The operator killed before the status was written plans again from the same Jobs and
    // the old status: the same firing, the same Jobs (whose creates are idempotent).
    let again = plan(&workflow, &jobs, at(13));
    assert_eq!(
        (again.fired.clone(), again.actions.clone()),
        (first.fired.clone(), first.actions.clone())
    );

    // Once written, the next plan sees the firing: no second one without a new completion.
    let after = written(workflow, &first);
    let started = Jobs::of(&after)
        .succeeded("sim")
        .in_run(0)
        .ran(at(0), at(12))
        .active("sim", at(0))
        .in_run(1)
        .active("sim", at(12))
        .in_run(2)
        .active("sim", at(12))
        .in_run(3)
        .build();
    let next = plan(&after, &started, at(14));
    assert!(next.fired.is_empty());
    assert!(creates(&next).is_empty());
    assert_eq!(
        next.status.as_ref().map_or(Some(3), |s| s.parallelism),
        Some(3)
    );

    // A completion later it fires again (backoff 1), and then its repetitions are spent.
    let done = Jobs::of(&after)
        .succeeded("sim")
        .in_run(0)
        .ran(at(0), at(12))
        .succeeded("sim")
        .in_run(1)
        .ran(at(0), at(14))
        .active("sim", at(12))
        .in_run(2)
        .active("sim", at(12))
        .in_run(3)
        .build();
    let second = plan(&after, &done, at(14));
    assert_eq!(
        second.fired,
        ["slow: steps.sim.duration.mean = 13 >= 10: parallelism 3 -> 4"]
    );
    assert_eq!(created_runs(&second), [4, 5]);
    let after = written(after, &second);
    let third = plan(&after, &done, at(15));
    assert!(third.fired.is_empty());
    assert_eq!(status_or(&after, &third).rules[0].fired, 2);
}

fn status_or<'p>(workflow: &'p WorkFlow, plan: &'p Plan) -> &'p WorkFlowStatus {
    plan.status
        .as_ref()
        .or(workflow.status.as_ref())
        .expect("a status")
}

#[test]
fn a_fail_rule_fails_the_workflow_and_stops_its_running_steps() {
    let workflow = running(
        WorkFlow::test("w")
            .runs(3)
            .step("sim", &[])
            .rule(
                "too-many-failures",
                "steps.sim.failed >= 1",
                RuleAction::Fail,
            )
            .build(),
    );
    let jobs = Jobs::of(&workflow)
        .failed("sim", "BackoffLimitExceeded", "")
        .in_run(0)
        .active("sim", at(0))
        .in_run(1)
        .build();
    // failFast false: only the rule fails it.
    let mut workflow = workflow;
    workflow.spec.fail_fast = false;
    let plan = plan(&workflow, &jobs, at(5));
    let status = status(&plan);
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    let failed = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FAILED)
        .unwrap();
    assert_eq!(failed.reason, "RuleFailed");
    assert!(
        status.message.as_deref().is_some_and(|m| m
            .starts_with("rule too-many-failures: steps.sim.failed = 1 >= 1: fail the workflow")),
        "{:?}",
        status.message
    );
    assert!(plan.actions.iter().any(|a| matches!(
        a,
        Action::StopJob {
            reason: StopReason::WorkflowFailed,
            ..
        }
    )));
}

#[test]
fn a_finish_rule_stops_the_workflow_as_shutdown_stop_does() {
    let workflow = running(
        WorkFlow::test("w")
            .runs(4)
            .parallelism(2)
            .step("sim", &[])
            .rule("enough", "steps.sim.succeeded >= 1", RuleAction::Finish)
            .build(),
    );
    let jobs = Jobs::of(&workflow)
        .succeeded("sim")
        .in_run(0)
        .active("sim", at(0))
        .in_run(1)
        .build();
    let stopping = plan(&workflow, &jobs, at(5));
    assert_eq!(stopping.fired.len(), 1);
    assert!(creates(&stopping).is_empty(), "nothing new starts");
    assert_eq!(status(&stopping).workflow_status, Some(Phase::Started));
    let workflow = written(workflow, &stopping);
    let jobs = Jobs::of(&workflow)
        .succeeded("sim")
        .in_run(0)
        .succeeded("sim")
        .in_run(1)
        .build();
    let stopped = plan(&workflow, &jobs, at(6));
    let status = status(&stopped);
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "finished by rule enough: steps.sim.succeeded = 1 >= 1: finish (as spec.shutdown: Stop): running steps finish, no new step starts: 2 steps never ran"
        )
    );
}

#[test]
fn a_repeat_rule_adds_a_run_before_the_workflow_can_complete() {
    let workflow = running(
        WorkFlow::test("w")
            .runs(2)
            .step("sim", &[])
            .rule("again", "workflow.runs.completed >= 2", RuleAction::Repeat)
            .build(),
    );
    let jobs = Jobs::of(&workflow)
        .succeeded("sim")
        .in_run(0)
        .succeeded("sim")
        .in_run(1)
        .build();
    let repeated = plan(&workflow, &jobs, at(5));
    assert_eq!(
        repeated.fired,
        ["again: workflow.runs.completed = 2 >= 2: runs 2 -> 3"]
    );
    assert_eq!(created_runs(&repeated), [2]);
    assert_eq!(status(&repeated).workflow_status, Some(Phase::Started));
    assert_eq!(status(&repeated).progress.as_deref(), Some("2/3"));
    let workflow = written(workflow, &repeated);
    let jobs = Jobs::of(&workflow)
        .succeeded("sim")
        .in_run(0)
        .succeeded("sim")
        .in_run(1)
        .succeeded("sim")
        .in_run(2)
        .build();
    let done = plan(&workflow, &jobs, at(6));
    assert!(done.fired.is_empty());
    let status = status(&done);
    assert_eq!(status.workflow_status, Some(Phase::Completed));
    assert_eq!(status.progress.as_deref(), Some("3/3"));
    assert_eq!(
        status.message.as_deref(),
        Some("1 step succeeded in each of 3 runs")
    );
}

#[test]
fn a_workflow_without_rules_writes_no_rule_fields() {
    let workflow = running(WorkFlow::test("w").parallelism(1).step("a", &[]).build());
    let json = serde_json::to_value(workflow.status.as_ref().unwrap()).unwrap();
    for field in ["rules", "parallelism", "metrics"] {
        assert!(json.get(field).is_none(), "{field}: {json}");
    }
}
