//! Scenario tests: what a user sees, end to end, through the Kubernetes API. Other
//! scenarios live with the handler they exercise (`operator_handlers.rs`):
//! `deleting_a_workflow_deletes_its_jobs_and_pods`,
//! `job_failure_fails_the_workflow_naming_the_step_and_reason`,
//! `relabelling_copies_the_labels_to_the_jobs_but_never_over_the_operators` and
//! `spec_update_of_what_runs_deletes_old_jobs_and_pods_and_runs_from_the_roots`.
//!
//! Run: `cargo test --test it operator_scenarios::`.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use rstest::rstest;
use serde_json::json;
use support::{JobRecorder, Operator, executed, job_outcome, operator, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::{LABEL_STEP, LABEL_WORKFLOW};
use workflow_operator_core::lifecycle::Phase;

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[rstest]
#[tokio::test]
async fn jobs_are_created_one_per_step_and_carry_the_workflows_labels(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("labelled")
            .label("team", "a")
            .label("app.example.com/tier", "batch")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["a"]),
    )
    .await;
    ns.expect_completed("labelled").await;

    let jobs = ns.jobs_of("labelled").await;
    let steps: Vec<&str> = jobs.iter().filter_map(step_of).collect();
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(
        steps.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["a", "b", "c"])
    );
    for job in &jobs {
        let labels = job.labels();
        assert_eq!(labels["team"], "a", "{}", job.name_any());
        assert_eq!(labels["app.example.com/tier"], "batch");
        assert_eq!(labels[LABEL_WORKFLOW], "labelled");
        assert_eq!(Some(labels[LABEL_STEP].as_str()), step_of(job));
        let owner = &job.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("WorkFlow", "labelled")
        );
    }
    recorder.catch_up(ns).await;
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());
    assert_eq!(checked, 3);
}

#[rstest]
#[tokio::test]
async fn a_diamond_never_starts_the_join_before_both_branches_finish_then_completes(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("diamond")
            .step("top", &[])
            .step("left", &["top"])
            .command(&["sleep", "1"])
            .step("right", &["top"])
            .command(&["sh", "-c", "sleep 2; echo right done"])
            .step("join", &["left", "right"]),
    )
    .await;
    let workflow = ns.expect_completed("diamond").await;
    assert_eq!(executed(&workflow), set(&["top", "left", "right", "join"]));

    recorder.catch_up(ns).await;
    let join = &recorder.jobs_of("diamond", "join")[0];
    for branch in ["left", "right"] {
        let jobs = recorder.jobs_of("diamond", branch);
        let (finished, succeeded) = jobs[0].finished.expect("finished");
        assert!(succeeded);
        assert!(
            join.first_seen > finished,
            "join appeared (event {}) before {branch} finished (event {finished})",
            join.first_seen
        );
    }
    assert_eq!(recorder.assert_no_step_ran_twice(&BTreeMap::new()), 4);
    let pods: Vec<Pod> = ns.pods().list(&ListParams::default()).await.unwrap().items;
    let join_pod = pods
        .iter()
        .find(|p| p.owner_references().iter().any(|o| o.uid == join.uid))
        .expect("the join's pod");
    let log = ns
        .pods()
        .logs(&join_pod.name_any(), &LogParams::default())
        .await
        .expect("the join's log");
    assert_eq!(log.trim(), "join", "the join ran its own command once");
}

#[rstest]
#[tokio::test]
async fn a_slow_step_times_out_fails_the_workflow_and_its_dependents_never_start(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("slow")
            .step("quick", &[])
            .step("slow", &["quick"])
            .command(&["sleep", "30"])
            .timeout(2)
            .step("after", &["slow"]),
    )
    .await;
    let workflow = ns
        .expect_failed("slow", &["step slow timed out", "2s"])
        .await;
    assert_eq!(executed(&workflow), set(&["quick"]));
    let conditions = &workflow.status.as_ref().unwrap().conditions;
    let failed = conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .expect("a Failed condition");
    assert_eq!(failed.status, "True");
    assert_eq!(failed.reason, "StepTimedOut");

    ns.wait_no_pods("the slow step's pod stopped", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    recorder.catch_up(ns).await;
    assert!(recorder.jobs_of("slow", "after").is_empty());
}

/// A planner bug: a step the operator's timer found past its timeout had its Job deleted, and
/// the Job was the only record of the timeout; with `failFast: false` the workflow goes on, so
/// the next plan found the step without a Job and started it again. The Job is now stopped
/// (the kubelet fails its pod at the pod's deadline, and the pod's failure the Job) and kept,
/// and so is its pod.
#[rstest]
#[tokio::test]
async fn with_fail_fast_false_a_timed_out_step_is_not_started_again(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("patient")
            .fail_fast(false)
            .step("slow", &[])
            .command(&["sleep", "30"])
            .timeout(1)
            .step("other", &[])
            .command(&["sleep", "4"]),
    )
    .await;
    let workflow = ns.expect_failed("patient", &["step slow timed out"]).await;
    assert_eq!(executed(&workflow), set(&["other"]));
    let failed = workflow
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .expect("a Failed condition");
    assert_eq!(failed.reason, "StepTimedOut");

    // The timed-out step's Job is kept, failed by its pod's deadline, its pod stopped and kept.
    let job = ns
        .wait_step_job("patient", "slow", "failed", |j| {
            job_outcome(j) == Some(false)
        })
        .await;
    ns.wait_no_pods("the slow step's pod stopped", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    let pods: Vec<Pod> = ns.pods().list(&ListParams::default()).await.unwrap().items;
    let slow_pod = pods
        .iter()
        .find(|p| {
            p.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == job.uid().as_ref())
        })
        .expect("the timed-out step's pod is kept");
    let reason = slow_pod.status.as_ref().and_then(|s| s.reason.as_deref());
    assert_eq!(reason, Some("DeadlineExceeded"));
    recorder.catch_up(ns).await;
    let slow = recorder.jobs_of("patient", "slow");
    assert_eq!(slow.len(), 1, "the timed-out step ran once: {slow:?}");
    assert!(
        !slow[0].deleted,
        "the timed-out step's Job is kept: {slow:?}"
    );
}

/// With `failFast: false`, a step whose timeout only the operator's timer sees (its Job
/// suspended: no pod, no deadline counting, so Kubernetes never fails it): the stopped Job alone
/// records the timeout, and an operator restarted while another step still runs, with nothing
/// but the API's state, does not start the step again.
#[rstest]
#[tokio::test]
async fn with_fail_fast_false_a_step_timed_out_by_the_timer_is_not_started_again_after_a_restart(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("stops the operator");
    let mut operator = operator;
    let recorder = JobRecorder::start(&operator.ns).await;
    operator
        .ns
        .create(
            WorkFlow::test("restarted")
                .fail_fast(false)
                .step("stuck", &[])
                .command(&["sleep", "30"])
                .timeout(2)
                .step("other", &[])
                .command(&["sleep", "12"]),
        )
        .await;
    let job = operator
        .ns
        .wait_step_job("restarted", "stuck", "created", |_| true)
        .await;
    operator
        .ns
        .jobs()
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("the job is suspended");
    operator
        .ns
        .wait_workflow("restarted", "the timeout recorded while other runs", |wf| {
            support::phase(wf) == Some(Phase::Started)
                && support::message(wf).contains("step stuck timed out")
        })
        .await;
    operator.stop().await;
    operator.start();
    let ns = &operator.ns;
    let workflow = ns
        .expect_failed("restarted", &["step stuck timed out", "timeout of 2s"])
        .await;
    assert_eq!(executed(&workflow), set(&["other"]));
    recorder.catch_up(ns).await;
    let stuck = recorder.jobs_of("restarted", "stuck");
    assert_eq!(stuck.len(), 1, "the timed-out step ran once: {stuck:?}");
    assert!(
        !stuck[0].deleted,
        "the timed-out step's Job is kept: {stuck:?}"
    );
}

#[rstest]
#[tokio::test]
async fn parallelism_caps_the_steps_running_at_once(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let mut workflow = WorkFlow::test("capped").parallelism(2);
    for i in 0..6 {
        workflow = workflow
            .step(&format!("s{i}"), &[])
            .command(&["sleep", "0.5"]);
    }
    ns.create(workflow).await;
    let workflow = ns.expect_completed("capped").await;
    assert_eq!(executed(&workflow).len(), 6);

    recorder.catch_up(ns).await;
    // Sweep the Jobs' lives (first seen .. seen finished) in event order.
    let mut moments: Vec<(u64, i32)> = Vec::new();
    for job in recorder.jobs() {
        let (finished, succeeded) = job.finished.expect("finished");
        assert!(succeeded);
        moments.push((job.first_seen, 1));
        moments.push((finished, -1));
    }
    moments.sort();
    let (mut running, mut most) = (0, 0);
    for (_, change) in moments {
        running += change;
        most = most.max(running);
    }
    assert_eq!(most, 2, "at most 2 steps ran at once, and 2 did");
}

#[rstest]
#[tokio::test]
async fn retries_run_a_failing_step_again_then_fail_the_workflow(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("flaky")
            .step("flaky", &[])
            .command(&["sh", "-c", "echo attempt; exit 1"])
            .retries(2),
    )
    .await;
    ns.expect_failed("flaky", &["step flaky failed: exit code 1"])
        .await;
    recorder.catch_up(ns).await;
    let jobs = recorder.jobs_of("flaky", "flaky");
    assert_eq!(jobs.len(), 1, "one Job: {jobs:?}");
    assert_eq!(
        recorder.pods_of(&jobs[0].uid),
        3,
        "one attempt and two retries"
    );
}

#[rstest]
#[tokio::test]
async fn with_fail_fast_false_independent_steps_finish_before_the_workflow_fails(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("lenient")
            .fail_fast(false)
            .step("broken", &[])
            .command(&["sh", "-c", "exit 1"])
            .step("after-broken", &["broken"])
            .step("independent", &[])
            .command(&["sleep", "2"])
            .step("after-independent", &["independent"]),
    )
    .await;
    let workflow = ns.expect_failed("lenient", &["step broken failed"]).await;
    assert_eq!(
        executed(&workflow),
        set(&["independent", "after-independent"])
    );
    recorder.catch_up(ns).await;
    assert!(recorder.jobs_of("lenient", "after-broken").is_empty());
}

#[rstest]
#[tokio::test]
async fn every_lifecycle_transition_is_posted_as_an_event(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(WorkFlow::test("evented").step("a", &[]).step("b", &["a"]))
        .await;
    ns.expect_completed("evented").await;
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let posted = support::wait_list(
        &events,
        kube::runtime::watcher::Config::default(),
        "the Events of both transitions",
        support::DEADLINE,
        |events| {
            let reasons: BTreeSet<&str> = events
                .iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("evented"))
                .filter_map(|e| e.reason.as_deref())
                .collect();
            reasons.contains("StepsStarted") && reasons.contains("AllStepsSucceeded")
        },
    )
    .await;
    let done = posted
        .iter()
        .find(|e| e.reason.as_deref() == Some("AllStepsSucceeded"))
        .expect("posted");
    assert_eq!(done.type_.as_deref(), Some("Normal"));
    assert!(
        done.note
            .as_deref()
            .is_some_and(|n| n.contains("Started -> Completed")),
        "{:?}",
        done.note
    );
}

/// One start, one Event: the first steps' start is the lifecycle Event `StepsStarted` alone,
/// not it and a twin `StepStarted` naming the same steps; a later step's start is its own
/// `StepStarted`. So `kubectl describe wf` tells each start once.
#[rstest]
#[tokio::test]
async fn each_start_of_steps_is_told_by_one_event(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("told")
            .step("alpha", &[])
            .step("beta", &[])
            .step("gamma", &["alpha", "beta"]),
    )
    .await;
    ns.expect_completed("told").await;
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    // The last pass posts its step Event before its lifecycle one.
    let posted = support::wait_list(
        &events,
        kube::runtime::watcher::Config::default(),
        "the Event of the workflow's completion",
        support::DEADLINE,
        |events| (events.iter()).any(|e| e.reason.as_deref() == Some("AllStepsSucceeded")),
    )
    .await;
    let starts = |step: &str| -> Vec<String> {
        (posted.iter())
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("told"))
            .filter(|e| {
                let reasons = ["StepStarted", "StepsStarted", "StepsProgressed"];
                reasons.contains(&e.reason.as_deref().unwrap_or_default())
            })
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.as_deref().unwrap_or_default(),
                    e.note.as_deref().unwrap_or_default()
                )
            })
            // The part of the note about starts: `steps a, b succeeded; started c` starts c.
            .filter(|told| {
                let starting = told.rsplit("; ").next().unwrap_or_default();
                let words = starting.split(|c: char| !c.is_alphanumeric());
                starting.contains("start") && words.into_iter().any(|w| w == step)
            })
            .collect()
    };
    for step in ["alpha", "beta"] {
        let told = starts(step);
        assert_eq!(told.len(), 1, "{step}'s start told by {told:?}");
        assert!(told[0].starts_with("StepsStarted: "), "{told:?}");
    }
    let told = starts("gamma");
    assert_eq!(told.len(), 1, "gamma's start told by {told:?}");
}

#[rstest]
#[tokio::test]
async fn a_completed_workflow_runs_again_only_when_what_runs_changes(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(WorkFlow::test("again").step("a", &[])).await;
    let first = ns.expect_completed("again").await;

    // A change of limits only: still Completed, nothing runs.
    let limits = json!({"spec": {"maxStepTimeout": 30}});
    ns.workflows()
        .patch("again", &PatchParams::default(), &Patch::Merge(&limits))
        .await
        .expect("accepted");
    let limited = ns.expect_completed("again").await;
    assert_eq!(
        limited.status.as_ref().unwrap().status_changed,
        first.status.as_ref().unwrap().status_changed,
        "the phase did not change"
    );

    // A change of what runs: a new run, from the roots.
    let command = json!({"spec": {"containers": [
        {"stepName": "a", "image": "busybox:1.36", "command": ["sh", "-c", "echo again"]},
    ]}});
    ns.workflows()
        .patch("again", &PatchParams::default(), &Patch::Merge(&command))
        .await
        .expect("accepted");
    let again = ns.expect_completed("again").await;
    assert_ne!(
        again.status.as_ref().unwrap().run,
        first.status.as_ref().unwrap().run
    );
    recorder.catch_up(ns).await;
    let runs: BTreeSet<String> = recorder
        .jobs_of("again", "a")
        .into_iter()
        .map(|j| j.run)
        .collect();
    assert_eq!(runs.len(), 2, "one Job per run: {runs:?}");
    recorder.assert_no_step_ran_twice(&BTreeMap::new());
}

#[rstest]
#[tokio::test]
async fn a_workflow_recreated_under_the_same_name_runs_again_with_its_own_jobs(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let workflow = || WorkFlow::test("phoenix").step("a", &[]).step("b", &["a"]);
    let first = ns.create(workflow()).await;
    ns.expect_completed("phoenix").await;
    ns.workflows()
        .delete("phoenix", &DeleteParams::default())
        .await
        .expect("deleted");
    support::wait_for(&ns.workflows(), "phoenix", "gone", |w| w.is_none()).await;

    // The same name and spec at once: the same Job names, while the old Jobs may still exist.
    let second = ns.create(workflow()).await;
    assert_ne!(first.uid(), second.uid());
    let done = ns.expect_completed("phoenix").await;
    assert_eq!(executed(&done), set(&["a", "b"]));
    for job in ns.jobs_of("phoenix").await {
        assert_eq!(
            job.owner_references()[0].uid,
            second.uid().unwrap(),
            "{} belongs to the new workflow",
            job.name_any()
        );
        assert_eq!(job_outcome(&job), Some(true));
    }
    recorder.catch_up(ns).await;
    assert_eq!(
        recorder.jobs_of("phoenix", "a").len(),
        2,
        "one Job per workflow"
    );
}

#[rstest]
#[tokio::test]
async fn a_workflow_deleted_while_the_operator_is_down_is_cleaned_up_when_it_returns(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("stops the operator");
    let mut operator = operator;
    operator
        .ns
        .create(
            WorkFlow::test("orphan")
                .step("a", &[])
                .command(&["sleep", "30"]),
        )
        .await;
    operator
        .ns
        .wait_step_job("orphan", "a", "running", |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(1)
        })
        .await;
    operator.stop().await;
    let ns = &operator.ns;
    ns.workflows()
        .delete("orphan", &DeleteParams::default())
        .await
        .expect("the delete is accepted");
    operator.start();
    let ns = &operator.ns;
    support::wait_for(&ns.workflows(), "orphan", "gone", |w| w.is_none()).await;
    ns.wait_jobs("orphan", "no jobs left", |jobs| jobs.is_empty())
        .await;
    ns.wait_no_pods("no pods left", |_| true).await;
}
