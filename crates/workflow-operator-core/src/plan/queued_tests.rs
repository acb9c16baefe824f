//! The planner behind a gate that holds the whole run (Kueue at workflow scope, not admitted):
//! the workflow is `Queued`, saying the gate's message, until a gate lets it through
//! (`Admitted`), and `Queued` again when one holds it once more (an eviction).

use super::data_tests::{at, written};
use super::*;
use crate::crd::Shutdown;
use crate::testing::{Jobs, creates};

const WAITING: &str = "waiting for Kueue to admit workload w-1 (queue team)";

fn reasons(plan: &Plan) -> Vec<&'static str> {
    plan.events.iter().map(|e| e.transition.reason()).collect()
}

fn phase(plan: &Plan) -> Option<Phase> {
    plan.status.as_ref().and_then(|s| s.workflow_status)
}

fn message(plan: &Plan) -> Option<&str> {
    plan.status.as_ref().and_then(|s| s.message.as_deref())
}

/// `workflow` planned behind `gate` with `jobs` at `now`, and written.
fn step(workflow: &WorkFlow, jobs: &[ObservedJob], now: i64, gate: &Gate) -> (Plan, WorkFlow) {
    let compiled = Compiled::new(&workflow.spec);
    let plan = plan_gated(workflow, &compiled, jobs, at(now), gate);
    let next = written(workflow.clone(), &plan);
    (plan, next)
}

#[test]
fn a_run_held_whole_is_queued_then_started_once_admitted_and_queued_again_when_held_again() {
    let wf = WorkFlow::test("w").step("a", &[]).step("b", &["a"]).build();
    let held = Gate::queueing(WAITING.into());
    let (queued, wf) = step(&wf, &[], 0, &held);
    assert!(creates(&queued).is_empty(), "{:?}", queued.actions);
    assert_eq!(phase(&queued), Some(Phase::Queued));
    assert_eq!(reasons(&queued), ["Queued"]);
    assert_eq!(message(&queued), Some(WAITING));
    let status = wf.status.as_ref().unwrap();
    assert_eq!(status.summary.as_deref(), Some(WAITING));
    assert!(status.started_at.is_some(), "the run is under way");
    let a = status.steps.iter().find(|s| s.name == "a").unwrap();
    assert_eq!(
        (a.phase, a.message.as_deref()),
        (StepPhase::Queued, Some(WAITING))
    );

    let (still, wf) = step(&wf, &[], 1, &held);
    assert!(still.events.is_empty() && creates(&still).is_empty());

    let (admitted, wf) = step(&wf, &[], 2, &Gate::default());
    assert_eq!(creates(&admitted), ["a"]);
    assert_eq!(reasons(&admitted), ["Admitted"]);
    assert_eq!(phase(&admitted), Some(Phase::Started));
    assert_eq!(message(&admitted), None);

    let evicted = "workload w-1 was evicted (Preempted); waiting to be admitted again (queue team)";
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let (requeued, wf) = step(&wf, &jobs, 3, &Gate::queueing(evicted.into()));
    assert!(creates(&requeued).is_empty(), "{:?}", requeued.actions);
    assert_eq!(reasons(&requeued), ["Queued"]);
    assert_eq!(message(&requeued), Some(evicted));
    assert_eq!(wf.status.as_ref().unwrap().executed, ["a"]);

    let (done, _) = step(
        &wf,
        &Jobs::of(&wf).succeeded("a").succeeded("b").build(),
        4,
        &held,
    );
    assert_eq!(reasons(&done), ["AllStepsSucceeded"]);
    assert_eq!(phase(&done), Some(Phase::Completed));
}

#[test]
fn a_queued_run_can_be_suspended_stopped_and_changed_and_its_exit_steps_wait_for_admission() {
    let wf = WorkFlow::test("w")
        .step("a", &[])
        .exit_step("notify", &[])
        .build();
    let held = Gate::queueing(WAITING.into());
    let (_, queued) = step(&wf, &[], 0, &held);
    assert_eq!(
        queued.status.as_ref().unwrap().workflow_status,
        Some(Phase::Queued)
    );

    let mut suspended = queued.clone();
    suspended.spec.suspend = true;
    let (plan, _) = step(&suspended, &[], 1, &held);
    assert_eq!(reasons(&plan), ["Suspended"]);

    let mut stopped = queued.clone();
    stopped.spec.shutdown = Some(Shutdown::Stop);
    let (plan, stopping) = step(&stopped, &[], 1, &held);
    assert!(creates(&plan).is_empty(), "the exit step waits too");
    assert_eq!(phase(&plan), Some(Phase::Queued), "{:?}", plan.events);
    let (plan, _) = step(&stopping, &[], 2, &Gate::default());
    assert_eq!(creates(&plan), ["notify"]);
    assert_eq!(reasons(&plan), ["Admitted", "ExitStepsStarted"]);

    let mut changed = queued;
    changed.spec.containers[0].command = Some(vec!["false".into()]);
    let (plan, _) = step(&changed, &[], 1, &held);
    assert_eq!(reasons(&plan), ["SpecChanged", "Queued"]);
}
