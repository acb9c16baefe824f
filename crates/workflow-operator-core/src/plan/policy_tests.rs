//! The planner with run policies: failures a workflow survives (`continueOn`), what a `when`
//! reads of failed steps and of the workflow's end, and the workflow's deadline
//! (`activeDeadlineSeconds`).

use super::data_tests::{at, entry, running, written};
use super::*;
use crate::testing::{Jobs, creates};

fn status(plan: &Plan) -> &WorkFlowStatus {
    plan.status.as_ref().expect("the plan changes the status")
}

fn failed_by(plan: &Plan) -> Option<&str> {
    let failed = status(plan)
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FAILED);
    failed
        .filter(|c| c.status == "True")
        .map(|c| c.reason.as_str())
}

/// lint (allowed to fail) -> report (runs only when lint failed), and -> build.
fn lint_then_report() -> WorkFlow {
    running(
        WorkFlow::test("w")
            .step("lint", &[])
            .continue_on_failed()
            .step("report", &["lint"])
            .when(r#"steps.lint.phase == "Failed""#)
            .step("build", &["lint"])
            .build(),
    )
}

#[test]
fn a_step_allowed_to_fail_shows_failed_and_its_dependents_run() {
    let wf = lint_then_report();
    let jobs = Jobs::of(&wf).exited("lint", 1, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    let mut started = creates(&plan);
    started.sort_unstable();
    assert_eq!(started, ["build", "report"]);
    assert_eq!(entry(&plan, "lint").phase, StepPhase::Failed);
    assert_eq!(entry(&plan, "lint").exit_code, Some(1));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Started));
    assert_eq!(status(&plan).message, None);

    let wf = written(wf, &plan);
    let jobs = Jobs::of(&wf)
        .exited("lint", 1, "Error", "")
        .succeeded("report")
        .succeeded("build")
        .build();
    let done = super::plan(&wf, &jobs, at(2));
    assert_eq!(status(&done).workflow_status, Some(Phase::Completed));
    assert_eq!(
        status(&done).message.as_deref(),
        Some(
            "2 steps succeeded; step lint failed: exit code 1 (continueOn.failed: the workflow went on)"
        )
    );
    assert_eq!(status(&done).progress.as_deref(), Some("2/3"));
    assert_eq!(entry(&done, "lint").phase, StepPhase::Failed);
}

#[test]
fn a_when_may_skip_a_step_because_its_upstream_succeeded_after_all() {
    let wf = lint_then_report();
    let jobs = Jobs::of(&wf).succeeded("lint").outputs(Ok(&[])).build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["build"]);
    assert_eq!(entry(&plan, "report").phase, StepPhase::Skipped);
}

#[test]
fn a_step_not_allowed_to_fail_still_fails_the_workflow() {
    let wf = running(
        WorkFlow::test("w")
            .step("lint", &[])
            .step("build", &["lint"])
            .build(),
    );
    let jobs = Jobs::of(&wf).exited("lint", 1, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(creates(&plan).is_empty());
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));
}

#[test]
fn the_items_of_a_step_allowed_to_fail_go_on_after_one_fails() {
    let wf = running(
        WorkFlow::test("w")
            .step("shard", &[])
            .with_sequence(3)
            .continue_on_failed()
            .step("after", &["shard"])
            .build(),
    );
    let some = Jobs::of(&wf)
        .exited("shard", 2, "Error", "")
        .item(0)
        .build();
    let plan = plan(&wf, &some, at(1));
    assert_eq!(
        creates(&plan),
        ["shard", "shard"],
        "items 1 and 2 still start"
    );
    let wf = written(wf, &plan);
    let all = Jobs::of(&wf)
        .exited("shard", 2, "Error", "")
        .item(0)
        .succeeded("shard")
        .item(1)
        .succeeded("shard")
        .item(2)
        .build();
    let plan = super::plan(&wf, &all, at(2));
    assert_eq!(creates(&plan), ["after"]);
    let shard = entry(&plan, "shard");
    assert_eq!(shard.phase, StepPhase::Failed);
    assert_eq!(shard.message.as_deref(), Some("1 of 3 items failed"));
}

#[test]
fn an_exit_steps_when_reads_failed_steps_the_workflows_end_and_every_step() {
    let wf = running(
        WorkFlow::test("w")
            .step("bad", &[])
            .step("never", &["bad"])
            .exit_step("on-bad", &[])
            .when(r#"workflow.status == "Failed" && steps.bad.phase == "Failed""#)
            .exit_step("any-failed", &[])
            .when(r#"steps.exists(s, steps[s].phase == "Failed")"#)
            .exit_step("never-ran", &[])
            .when(r#"steps.never.phase == "Omitted""#)
            .exit_step("on-success", &[])
            .when(r#"workflow.status == "Completed""#)
            .build(),
    );
    let jobs = Jobs::of(&wf).exited("bad", 3, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["on-bad", "any-failed", "never-ran"]);
    assert_eq!(entry(&plan, "on-success").phase, StepPhase::Skipped);
}

#[test]
fn a_steps_when_may_use_cel_macros_but_not_iterate_over_steps_or_read_the_end() {
    let ok = WorkFlow::test("w")
        .step("a", &[])
        .step("b", &["a"])
        .when(r#"["x", "y"].exists(v, v == steps.a.outputs.key)"#)
        .build();
    assert_eq!(
        status(&plan(&ok, &[], at(0))).workflow_status,
        Some(Phase::Started)
    );
    for (when, says) in [
        (
            r#"steps.all(s, steps[s].phase == "Succeeded")"#,
            "iterates over steps: only an exit step's when may",
        ),
        (
            r#"workflow.status == "Failed""#,
            "names workflow.status, which only an exit step's when may read",
        ),
    ] {
        let wf = WorkFlow::test("w")
            .step("a", &[])
            .step("b", &["a"])
            .when(when)
            .build();
        let message = status(&plan(&wf, &[], at(0))).message.clone().unwrap();
        assert!(message.contains(says), "{when}: {message}");
    }
}

fn with_deadline() -> WorkFlow {
    running(
        WorkFlow::test("w")
            .active_deadline_seconds(10)
            .step("slow", &[])
            .timeout(-1)
            .step("after", &["slow"])
            .exit_step("cleanup", &[])
            .build(),
    )
}

#[test]
fn a_workflow_records_when_it_started_and_wakes_at_its_deadline() {
    let wf = with_deadline();
    let started = wf.status.as_ref().and_then(|s| s.started_at.clone());
    assert_eq!(started.map(|t| t.0), Some(at(0)));
    let jobs = Jobs::of(&wf).active("slow", at(0)).build();
    let plan = plan(&wf, &jobs, at(5));
    assert_eq!(plan.next_timeout_at, Some(at(10)));
    assert_eq!(next_timeout_at(&wf, &jobs), Some(at(10)));
}

#[test]
fn past_its_deadline_a_workflow_stops_its_steps_runs_its_exit_steps_and_fails() {
    let wf = with_deadline();
    let jobs = Jobs::of(&wf).active("slow", at(0)).build();
    let plan = plan(&wf, &jobs, at(10));
    let deleted: Vec<&str> = (plan.actions.iter())
        .filter_map(|a| match a {
            Action::DeleteJob { job_name, .. } => Some(job_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [jobs[0].name.as_str()]);
    assert_eq!(creates(&plan), ["cleanup"]);

    let wf = written(wf, &plan);
    let jobs = Jobs::of(&wf).succeeded("cleanup").build();
    let plan = super::plan(&wf, &jobs, at(12));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));
    assert_eq!(failed_by(&plan), Some("DeadlineExceeded"));
    let message = status(&plan).message.clone().unwrap();
    assert!(
        message.starts_with("the workflow ran past its activeDeadlineSeconds of 10s"),
        "{message}"
    );
}

#[test]
fn a_workflow_that_ends_in_time_is_not_failed_by_its_deadline() {
    let wf = with_deadline();
    let jobs = Jobs::of(&wf)
        .succeeded("slow")
        .succeeded("after")
        .succeeded("cleanup")
        .build();
    let plan = plan(&wf, &jobs, at(30));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Completed));
}
