//! Scenario tests of issue 7: what a user sees, end to end, through the Kubernetes API. Other
//! scenarios of the issue live with the handler they exercise (`operator_handlers.rs`):
//! `deleting_a_workflow_deletes_its_jobs_and_pods`,
//! `job_failure_fails_the_workflow_naming_the_step_and_reason`,
//! `relabelling_copies_the_labels_to_the_jobs_but_never_over_the_operators` and
//! `spec_update_of_what_runs_deletes_old_jobs_and_pods_and_runs_from_the_roots`.
//!
//! Run: `cargo test --test operator_scenarios`.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ListParams, LogParams};
use rstest::rstest;
use support::{JobRecorder, Operator, executed, operator, step_of};
use workflow_operator::workflow::WorkFlow;
use workflow_operator::workflow::jobs::{LABEL_STEP, LABEL_WORKFLOW};

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
            .max_step_timeout(2)
            .step("quick", &[])
            .step("slow", &["quick"])
            .command(&["sleep", "30"])
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
