//! Run control end to end on the embedded control plane, through the API: suspend
//! and resume, stop, terminate, retry and exit steps. Steps that must still be running when a
//! verb lands wait for a [`Gate`] the test opens, so no test depends on how long a step takes.
//!
//! Run: `cargo test --test it run_control::`. Gates are files the steps' local processes read, so
//! these tests skip themselves on a real cluster.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::ListParams;
use kube_devcluster::testing::eventually;
use rstest::rstest;
use serde_json::json;
use support::{DEADLINE, Gate, Operator, holds_for, jobs_named, operator, phase, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::LABEL_RETRY;
use workflow_operator_core::lifecycle::Phase;

/// How long a test watches that something does not happen.
const QUIET: Duration = Duration::from_secs(2);

#[rstest]
#[tokio::test]
async fn suspend_holds_new_steps_while_the_running_one_finishes_and_resume_continues(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("steps wait for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let first = gate.wait_command("first done");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("held")
            .step("first", &[])
            .command(&first)
            .step("second", &["first"]),
    )
    .await;
    ns.wait_step_job("held", "first", "created", |_| true).await;
    ns.patch_spec("held", json!({"suspend": true})).await;
    ns.wait_workflow("held", "Suspended", |wf| {
        phase(wf) == Some(Phase::Suspended)
    })
    .await;
    gate.open();
    ns.wait_step_job("held", "first", "succeeded", |j| {
        support::job_outcome(j) == Some(true)
    })
    .await;
    // The running step finished; nothing new starts while suspended.
    holds_for(
        &ns.workflows(),
        "held",
        "suspended, with no Job for `second`",
        QUIET,
        |wf| wf.is_some_and(|wf| phase(wf) == Some(Phase::Suspended)),
    )
    .await;
    let jobs = ns.jobs_of("held").await;
    assert_eq!(
        jobs_named(&jobs),
        ["first"],
        "no Job is created while suspended"
    );

    ns.patch_spec("held", json!({"suspend": false})).await;
    let done = ns.expect_completed("held").await;
    assert_eq!(support::executed(&done).len(), 2);
}

#[rstest]
#[tokio::test]
async fn stop_lets_the_running_step_finish_starts_nothing_new_and_runs_the_exit_steps(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("steps wait for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let first = gate.wait_command("first done");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("stopped")
            .step("first", &[])
            .command(&first)
            .step("second", &["first"])
            .exit_step("report", &[])
            .command(&["sh", "-c", "echo status=$WORKFLOW_STATUS"]),
    )
    .await;
    ns.wait_step_job("stopped", "first", "created", |_| true)
        .await;
    ns.patch_spec("stopped", json!({"shutdown": "Stop"})).await;
    ns.wait_workflow("stopped", "stopping", |wf| {
        support::message(wf).starts_with("stopping")
    })
    .await;
    gate.open();
    let stopped = ns
        .expect_failed(
            "stopped",
            &["stopped (spec.shutdown: Stop): 1 steps never ran"],
        )
        .await;
    assert_eq!(
        support::executed(&stopped).len(),
        2,
        "first and the exit step"
    );
    let jobs = ns.jobs_of("stopped").await;
    assert_eq!(
        jobs_named(&jobs),
        ["first", "report"],
        "second never started"
    );
    let first = jobs.iter().find(|j| step_of(j) == Some("first")).unwrap();
    assert_eq!(support::job_outcome(first), Some(true), "first finished");
    let report = jobs.iter().find(|j| step_of(j) == Some("report")).unwrap();
    assert_eq!(ns.job_log(report).await.trim(), "status=Failed");
}

#[rstest]
#[tokio::test]
async fn terminate_stops_the_running_pods_at_once_keeps_them_and_runs_no_exit_step(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("steps wait for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let forever = gate.wait_command("never");
    let forever: Vec<&str> = forever.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("ended")
            .step("long", &[])
            .command(&forever)
            .timeout(-1)
            .exit_step("report", &[]),
    )
    .await;
    let job = ns
        .wait_step_job("ended", "long", "running", |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(1)
        })
        .await;
    let uid = job.uid().unwrap();
    ns.patch_spec("ended", json!({"shutdown": "Terminate"}))
        .await;
    ns.expect_failed("ended", &["terminated (spec.shutdown: Terminate)"])
        .await;
    // Stopped, not deleted: the pod stays, Failed, and so does its Job.
    let selector = format!("job-name={}", job.name_any());
    let stopped = |pod: &Pod| {
        let status = pod.status.as_ref();
        status.and_then(|s| s.phase.as_deref()) == Some("Failed")
            && status.and_then(|s| s.reason.as_deref()) == Some("DeadlineExceeded")
    };
    eventually("the terminated step's pod stopped", DEADLINE, || async {
        let pods = ns
            .pods()
            .list(&ListParams::default().labels(&selector))
            .await;
        pods.ok()?.items.iter().any(stopped).then_some(())
    })
    .await;
    holds_for(&ns.workflows(), "ended", "still Failed", QUIET, |wf| {
        wf.is_some_and(|wf| phase(wf) == Some(Phase::Failed))
    })
    .await;
    let jobs = ns.jobs_of("ended").await;
    assert!(
        !jobs_named(&jobs).contains(&"report".to_string()),
        "no exit step runs after a terminate"
    );
    assert!(
        jobs.iter().any(|j| j.uid().as_ref() == Some(&uid)),
        "the terminated step's Job is kept"
    );
}

#[rstest]
#[tokio::test]
async fn retry_reruns_only_the_steps_that_did_not_succeed(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("a step checks for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let flaky = gate.check_command();
    let flaky: Vec<&str> = flaky.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("again")
            .step("setup", &[])
            .step("flaky", &["setup"])
            .command(&flaky)
            .step("after", &["flaky"])
            .exit_step("report", &[])
            .command(&[
                "sh",
                "-c",
                "echo status=$WORKFLOW_STATUS failed=$WORKFLOW_FAILED_STEPS",
            ]),
    )
    .await;
    ns.expect_failed("again", &["step flaky failed: exit code 1"])
        .await;
    let before = ns.jobs_of("again").await;
    assert_eq!(jobs_named(&before), ["flaky", "report", "setup"]);
    let report = before
        .iter()
        .find(|j| step_of(j) == Some("report"))
        .unwrap();
    assert_eq!(
        ns.job_log(report).await.trim(),
        "status=Failed failed=flaky"
    );
    let setup_uid = before
        .iter()
        .find(|j| step_of(j) == Some("setup"))
        .and_then(|j| j.uid())
        .unwrap();

    gate.open();
    ns.patch_spec("again", json!({"retry": 1})).await;
    ns.wait_workflow("again", "retried", |wf| {
        wf.status.as_ref().and_then(|s| s.retry) == Some(1)
    })
    .await;
    let done = ns.expect_completed("again").await;
    assert_eq!(support::executed(&done).len(), 4);
    let after = ns.jobs_of("again").await;
    let setups: Vec<_> = after
        .iter()
        .filter(|j| step_of(j) == Some("setup"))
        .collect();
    assert_eq!(setups.len(), 1, "the succeeded step is not run again");
    assert_eq!(setups[0].uid().unwrap(), setup_uid, "its Job is untouched");
    let flakies: Vec<_> = after
        .iter()
        .filter(|j| step_of(j) == Some("flaky"))
        .collect();
    assert_eq!(
        flakies.len(),
        2,
        "the failed Job stays; the retry has its own"
    );
    assert_ne!(flakies[0].name_any(), flakies[1].name_any());
    let retried = |step: &str| {
        after
            .iter()
            .find(|j| {
                step_of(j) == Some(step)
                    && j.labels().get(LABEL_RETRY).map(String::as_str) == Some("1")
            })
            .cloned()
            .unwrap_or_else(|| panic!("a retry-1 Job of {step}"))
    };
    assert_eq!(support::job_outcome(&retried("after")), Some(true));
    assert_eq!(
        ns.job_log(&retried("report")).await.trim(),
        "status=Completed failed=",
        "the exit step runs again after the retry, told it completed"
    );
}

#[rstest]
#[tokio::test]
async fn retry_of_a_workflow_suspended_then_terminated_runs_it(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("steps wait for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let long = gate.wait_command("long done");
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("paused")
            .step("long", &[])
            .command(&long)
            .timeout(-1)
            .step("after", &["long"]),
    )
    .await;
    ns.wait_step_job("paused", "long", "running", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;
    ns.cli(&["suspend", "paused"]).await;
    ns.wait_workflow("paused", "Suspended", |wf| {
        phase(wf) == Some(Phase::Suspended)
    })
    .await;
    ns.cli(&["terminate", "paused"]).await;
    ns.expect_failed("paused", &["terminated (spec.shutdown: Terminate)"])
        .await;
    gate.open();
    let said = ns.cli(&["retry", "paused"]).await;
    let done = ns.expect_completed("paused").await;
    assert_eq!(support::executed(&done).len(), 2, "long and after ran");
    assert!(!done.spec.suspend, "the retry lifted the suspension");
    assert_eq!(
        said.trim(),
        "workflow paused retried: the steps that did not succeed run again (no longer suspended)"
    );
}

#[rstest]
#[tokio::test]
async fn exit_steps_run_after_success_with_the_status_in_their_environment(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("notify")
            .step("work", &[])
            .exit_step("report", &[])
            .command(&["sh", "-c", "echo status=$WORKFLOW_STATUS"])
            .exit_step("after-report", &["report"]),
    )
    .await;
    let done = ns.expect_completed("notify").await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.progress.as_deref()),
        Some("3/3")
    );
    let jobs = ns.jobs_of("notify").await;
    let report = jobs.iter().find(|j| step_of(j) == Some("report")).unwrap();
    assert_eq!(ns.job_log(report).await.trim(), "status=Completed");
}

#[rstest]
#[tokio::test]
async fn a_failing_exit_step_fails_a_workflow_whose_steps_succeeded(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("bad-exit")
            .step("work", &[])
            .exit_step("report", &[])
            .command(&["sh", "-c", "exit 4"]),
    )
    .await;
    ns.expect_failed("bad-exit", &["exit step report failed: exit code 4"])
        .await;
}
