//! Run policies end to end on the embedded control plane: a step allowed to fail
//! (`continueOn`), `when`s reading failed steps and the workflow's end, and the workflow's
//! deadline (`activeDeadlineSeconds`).

use crate::support;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use rstest::rstest;
use support::{Gate, Operator, operator, phase};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::lifecycle::Phase;

/// The step entry of `name` in `workflow`'s status.
fn step_phase(workflow: &WorkFlow, name: &str) -> Option<StepPhase> {
    let status = workflow.status.as_ref()?;
    status
        .steps
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.phase)
}

#[rstest]
#[tokio::test]
async fn a_step_allowed_to_fail_fails_alone_and_its_dependents_read_that_it_did(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("lenient")
            .step("lint", &[])
            .command(&["sh", "-c", "exit 3"])
            .continue_on_failed()
            .step("report", &["lint"])
            .when(r#"steps.lint.phase == "Failed""#)
            .step("build", &["lint"]),
    )
    .await;
    let done = ns.expect_completed("lenient").await;
    let message = support::message(&done);
    assert_eq!(
        message,
        "2 steps succeeded; step lint failed: exit code 3 (continueOn.failed: the workflow went on)"
    );
    assert_eq!(step_phase(&done, "lint"), Some(StepPhase::Failed));
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["build", "report"]);
}

#[rstest]
#[tokio::test]
async fn an_exit_step_reads_which_step_failed_and_how_the_workflow_ended(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("ended")
            .step("bad", &[])
            .command(&["sh", "-c", "exit 1"])
            .exit_step("on-bad", &[])
            .when(r#"workflow.status == "Failed" && steps.bad.phase == "Failed""#)
            .exit_step("on-success", &[])
            .when(r#"workflow.status == "Completed""#),
    )
    .await;
    let done = ns.expect_failed("ended", &["step bad failed"]).await;
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["on-bad"]);
    assert_eq!(step_phase(&done, "on-success"), Some(StepPhase::Skipped));
}

#[rstest]
#[tokio::test]
async fn past_its_deadline_a_workflow_stops_its_steps_runs_its_exit_steps_and_fails(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("the step waits for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let wait = gate.wait_command("never opened");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("late")
            .active_deadline_seconds(2)
            .step("slow", &[])
            .command(&wait)
            .timeout(-1)
            .step("after", &["slow"])
            .exit_step("cleanup", &[]),
    )
    .await;
    let done = ns
        .expect_failed("late", &["ran past its activeDeadlineSeconds of 2s"])
        .await;
    let failed = (done.status.as_ref().unwrap().conditions.iter())
        .find(|c| c.type_ == "Failed")
        .expect("a Failed condition");
    assert_eq!(failed.reason, "DeadlineExceeded");
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["cleanup"]);
    assert_eq!(phase(&done), Some(Phase::Failed));
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    support::wait_list(
        &events,
        kube::runtime::watcher::Config::default(),
        "a DeadlineExceeded Event",
        support::DEADLINE,
        |events| {
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some("DeadlineExceeded"))
        },
    )
    .await;
}
