//! The operator's handlers through the Kubernetes API, one test (or table) per event of the
//! handlers' table in docs/architecture.md, plus the Kopf operator's manifests accepted unchanged.
//! Each test gets a fresh namespace and its own operator (see `support`); waits watch with a
//! deadline.
//!
//! Run: `cargo test --test it operator_handlers::`; on a real cluster with the operator
//! installed: `WORKFLOW_TEST_CLUSTER=kube cargo test --test it operator_handlers::`.

use crate::support;

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Resource, ResourceExt};
use rstest::rstest;
use serde_json::json;
use support::{
    JobRecorder, Namespace, Operator, executed, job_outcome, namespace, operator, phase, started,
    step_of, wait_for,
};
use tokio_util::sync::CancellationToken;
use workflow_operator::controllers::workflow::operator::{
    self as workflow_operator_mod, OperatorOptions,
};
use workflow_operator::telemetry::Metrics;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::{LABEL_RUN, LABEL_STEP, LABEL_WORKFLOW};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::plan::POD_DEADLINE_SLACK_SECONDS;
use workflow_operator_core::testing::WorkFlowBuilder;

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Asserts that the recorder saw `later`'s Job appear only after every one of `earlier` finished.
fn assert_started_after(recorder: &JobRecorder, workflow: &str, later: &str, earlier: &[&str]) {
    let later_jobs = recorder.jobs_of(workflow, later);
    assert_eq!(
        later_jobs.len(),
        1,
        "one job for step {later}: {later_jobs:?}"
    );
    for step in earlier {
        let jobs = recorder.jobs_of(workflow, step);
        assert_eq!(jobs.len(), 1, "one job for step {step}: {jobs:?}");
        let (finished, succeeded) = jobs[0].finished.expect("the dependency finished");
        assert!(succeeded, "step {step} succeeded");
        assert!(
            later_jobs[0].first_seen > finished,
            "step {later} started (event {}) before its dependency {step} finished (event {finished})",
            later_jobs[0].first_seen
        );
    }
}

#[rstest]
#[tokio::test]
async fn created_workflow_starts_its_roots_and_nothing_else(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("roots")
            .step("r1", &[])
            .command(&["sleep", "2"])
            .step("r2", &[])
            .command(&["sleep", "2"])
            .step("child", &["r1", "r2"]),
    )
    .await;

    let workflow = ns
        .wait_workflow("roots", "Started with both roots", |wf| {
            phase(wf) == Some(Phase::Started) && started(wf) == set(&["r1", "r2"])
        })
        .await;
    assert!(executed(&workflow).is_empty(), "nothing executed yet");

    ns.expect_completed("roots").await;
    recorder.catch_up(ns).await;
    assert_started_after(&recorder, "roots", "child", &["r1", "r2"]);
}

#[rstest]
#[case::cycle(
    WorkFlow::test("cycle").step("a", &["c"]).step("b", &["a"]).step("c", &["b"]),
    &["invalid workflow", "dependency cycle: a -> b -> c -> a"]
)]
#[case::self_dependency(
    WorkFlow::test("selfish").step("a", &[]).step("b", &["b"]),
    &["invalid workflow", "\"b\" depends on itself"]
)]
#[case::unknown_dependency(
    WorkFlow::test("unknown").step("a", &[]).step("b", &["a", "nope"]),
    &["invalid workflow", "step \"b\" depends on unknown step \"nope\""]
)]
#[case::duplicate_names(
    WorkFlow::test("twice").step("a", &[]).step("a", &[]),
    &["invalid workflow", "step name \"a\" is used more than once"]
)]
#[tokio::test]
async fn created_invalid_workflow_fails_naming_the_problem_and_starts_nothing(
    #[case] workflow: WorkFlowBuilder,
    #[case] words: &[&str],
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let name = ns.create(workflow).await.name_any();
    ns.expect_failed(&name, words).await;
    recorder.catch_up(ns).await;
    assert!(recorder.jobs().is_empty(), "{:?}", recorder.jobs());
}

#[rstest]
#[tokio::test]
async fn job_completion_records_the_step_and_starts_its_dependents(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("chain")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["b"]),
    )
    .await;

    let workflow = ns.expect_completed("chain").await;
    let status = workflow.status.as_ref().expect("status");
    assert_eq!(status.executed, ["a", "b", "c"]);
    assert!(status.started.is_empty(), "{:?}", status.started);
    assert_eq!(status.progress.as_deref(), Some("3/3"));
    assert_eq!(status.message.as_deref(), Some("3 steps succeeded"));
    recorder.catch_up(ns).await;
    assert_started_after(&recorder, "chain", "b", &["a"]);
    assert_started_after(&recorder, "chain", "c", &["b"]);
}

/// A command that does not exist: the container cannot start, and the message says so, as
/// `kubectl describe pod` would.
#[rstest]
#[tokio::test]
async fn a_command_not_found_fails_the_workflow_saying_so(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("typo")
            .step("a", &[])
            .command(&["no-such-command-here"]),
    )
    .await;
    ns.expect_failed(
        "typo",
        &["step a failed: exit code", "no-such-command-here"],
    )
    .await;
}

#[rstest]
#[tokio::test]
async fn job_failure_fails_the_workflow_naming_the_step_and_reason(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("failing")
            .step("ok", &[])
            .step("bad", &["ok"])
            .command(&["sh", "-c", "echo failing; exit 3"])
            .step("after", &["bad"]),
    )
    .await;

    let workflow = ns
        .expect_failed("failing", &["step bad failed: exit code 3"])
        .await;
    assert_eq!(executed(&workflow), set(&["ok"]));
    let conditions = &workflow.status.as_ref().expect("status").conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True"),
        "{conditions:?}"
    );
    recorder.catch_up(ns).await;
    assert!(recorder.jobs_of("failing", "after").is_empty());
}

#[rstest]
#[tokio::test]
async fn spec_update_of_what_runs_deletes_old_jobs_and_pods_and_runs_from_the_roots(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("update")
            .step("a", &[])
            .command(&["sleep", "30"])
            .step("b", &["a"]),
    )
    .await;
    let old = ns
        .wait_step_job("update", "a", "with a running pod", |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(1)
        })
        .await;
    let old_uid = old.uid().expect("uid");
    let old_run = old.labels()[LABEL_RUN].clone();

    let patch = json!({"spec": {"containers": [
        {"stepName": "a", "image": "busybox:1.36", "command": ["sh", "-c", "echo new a"]},
        {"stepName": "b", "image": "busybox:1.36", "command": ["sh", "-c", "echo new b"], "dependsOn": ["a"]},
    ]}});
    ns.workflows()
        .patch("update", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the spec update is accepted");

    let workflow = ns.expect_completed("update").await;
    assert_eq!(executed(&workflow), set(&["a", "b"]));
    wait_for(&ns.jobs(), &old.name_any(), "the old job deleted", |j| {
        j.is_none()
    })
    .await;
    ns.wait_no_pods("the old job's pods deleted", |p| {
        p.owner_references().iter().any(|o| o.uid == old_uid)
    })
    .await;
    let jobs = ns.jobs_of("update").await;
    assert_eq!(jobs.len(), 2, "one job per step of the new run");
    for job in &jobs {
        assert_ne!(job.labels()[LABEL_RUN], old_run, "{}", job.name_any());
        assert_eq!(job_outcome(job), Some(true), "{}", job.name_any());
    }
}

#[rstest]
#[tokio::test]
async fn spec_update_of_limits_only_applies_to_the_running_job_in_place(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("limits")
            .max_step_timeout(60)
            .step("a", &[])
            .command(&["sleep", "3"]),
    )
    .await;
    let job = ns
        .wait_step_job("limits", "a", "running", |j| job_outcome(j).is_none())
        .await;
    // The Job's deadline is a backstop behind the operator's own stop at the timeout.
    let deadline = |seconds| Some(seconds + POD_DEADLINE_SLACK_SECONDS);
    assert_eq!(
        job.spec.as_ref().unwrap().active_deadline_seconds,
        deadline(60)
    );

    ns.workflows()
        .patch(
            "limits",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxStepTimeout": 30}})),
        )
        .await
        .expect("the limit change is accepted");
    let updated = wait_for(&ns.jobs(), &job.name_any(), "the new deadline", |j| {
        j.and_then(|j| j.spec.as_ref()?.active_deadline_seconds) == deadline(30)
    })
    .await
    .expect("present");
    assert_eq!(updated.uid(), job.uid(), "the same job, updated in place");

    let workflow = ns.expect_completed("limits").await;
    assert_eq!(executed(&workflow), set(&["a"]));
    recorder.catch_up(ns).await;
    assert_eq!(recorder.jobs().len(), 1, "{:?}", recorder.jobs());
}

#[rstest]
#[tokio::test]
async fn relabelling_copies_the_labels_to_the_jobs_but_never_over_the_operators(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("relabel")
            .label("team", "a")
            .step("a", &[])
            .command(&["sleep", "30"]),
    )
    .await;
    let job = ns
        .wait_step_job("relabel", "a", "with label team=a", |j| {
            j.labels().get("team").map(String::as_str) == Some("a")
        })
        .await;
    let own: Vec<(String, String)> = [LABEL_WORKFLOW, LABEL_STEP, LABEL_RUN]
        .iter()
        .map(|k| (k.to_string(), job.labels()[*k].clone()))
        .collect();

    let labels = json!({"metadata": {"labels": {
        "team": "b", "owner": "x", LABEL_STEP: "evil", LABEL_WORKFLOW: "evil", LABEL_RUN: "evil",
    }}});
    ns.workflows()
        .patch("relabel", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("relabelling is accepted");

    let relabelled = wait_for(
        &ns.jobs(),
        &job.name_any(),
        "labels team=b and owner=x",
        |j| {
            j.is_some_and(|j| {
                j.labels().get("team").map(String::as_str) == Some("b")
                    && j.labels().get("owner").map(String::as_str) == Some("x")
            })
        },
    )
    .await
    .expect("present");
    for (key, value) in &own {
        assert_eq!(&relabelled.labels()[key], value, "label {key} untouched");
    }
    assert_eq!(relabelled.uid(), job.uid(), "relabelled in place");
}

#[rstest]
#[tokio::test]
async fn deleting_a_workflow_deletes_its_jobs_and_pods(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("doomed")
            .step("a", &[])
            .command(&["sleep", "30"])
            .step("b", &[])
            .command(&["sleep", "30"]),
    )
    .await;
    support::wait_list(
        &ns.pods(),
        kube::runtime::watcher::Config::default(),
        "a running pod per step",
        support::DEADLINE,
        |pods| {
            pods.iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
                == 2
        },
    )
    .await;

    ns.workflows()
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("the delete is accepted");
    wait_for(&ns.workflows(), "doomed", "the workflow gone", |w| {
        w.is_none()
    })
    .await;
    ns.wait_jobs("doomed", "no jobs left", |jobs| jobs.is_empty())
        .await;
    ns.wait_no_pods("no pods left", |_| true).await;
}

#[rstest]
#[tokio::test]
async fn resumed_operator_records_completions_made_while_it_was_down(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("stops the operator");
    let mut operator = operator;
    let recorder = JobRecorder::start(&operator.ns).await;
    operator
        .ns
        .create(
            WorkFlow::test("resume")
                .step("a", &[])
                .command(&["sleep", "2"])
                .step("b", &["a"]),
        )
        .await;
    operator
        .ns
        .wait_workflow("resume", "step a started", |wf| started(wf) == set(&["a"]))
        .await;

    operator.stop().await;
    let ns = &operator.ns;
    ns.wait_step_job("resume", "a", "Complete", |j| job_outcome(j) == Some(true))
        .await;
    let workflow = ns.get("resume").await;
    assert!(
        executed(&workflow).is_empty(),
        "nobody recorded the completion yet: {}",
        support::describe_status(&workflow)
    );
    assert!(ns.jobs_of("resume").await.len() == 1, "b not started yet");

    operator.start();
    let workflow = operator.ns.expect_completed("resume").await;
    assert_eq!(executed(&workflow), set(&["a", "b"]));
    recorder.catch_up(&operator.ns).await;
    recorder.assert_no_step_ran_twice(&Default::default());
}

#[rstest]
#[tokio::test]
async fn timer_fails_a_step_whose_pod_never_runs_at_its_timeout(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("stuck")
            .step("stuck", &[])
            .command(&["sleep", "30"])
            .timeout(2)
            .step("after", &["stuck"]),
    )
    .await;
    let job = ns
        .wait_step_job("stuck", "stuck", "created", |_| true)
        .await;
    // Suspending the Job removes its pod and stops Kubernetes counting its deadline, as for a
    // pod that is never scheduled: only the operator's own timer can notice the timeout.
    ns.jobs()
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("the job is suspended");

    ns.expect_failed(
        "stuck",
        &["step stuck timed out", "running for", "timeout of 2s"],
    )
    .await;
    recorder.catch_up(ns).await;
    assert!(recorder.jobs_of("stuck", "after").is_empty());
}

/// Passes of the `timeouts` timer the operator's metrics counted so far, whatever their outcome.
fn timer_passes(metrics: &Metrics) -> f64 {
    metrics
        .encode()
        .lines()
        .filter(|line| line.starts_with("workflow_operator_handler_outcomes_total{"))
        .filter(|line| line.contains(r#"handler="timeouts""#))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// A running workflow with nothing due (one step sleeping, its timeout far off) is looked at
/// by the `timeouts` timer at its next deadline or the 10 s full-reconcile safety net, not at
/// every 1 s tick: over 6 s, at most two timer passes (a deferred status write and the safety
/// net), where a pass per tick would be six.
#[rstest]
#[tokio::test]
async fn the_timer_looks_at_a_running_workflow_when_due_not_every_tick(
    #[future(awt)] namespace: Namespace,
) {
    if support::Cluster::is_real() {
        return; // The operator is the cluster's, without these metrics.
    }
    let ns = &namespace;
    let metrics = Metrics::new();
    let options = OperatorOptions {
        namespace: Some(ns.name.clone()),
        metrics: Some(metrics.clone()),
        ..OperatorOptions::default()
    };
    let stop = CancellationToken::new();
    let running = tokio::spawn(workflow_operator_mod::run(
        ns.client(),
        options,
        stop.clone().cancelled_owned(),
    ));
    ns.create(
        WorkFlow::test("sleeper")
            .step("nap", &[])
            .command(&["sleep", "300"])
            .timeout(600),
    )
    .await;
    let job = ns
        .wait_step_job("sleeper", "nap", "created", |_| true)
        .await;
    ns.wait_pods_ready(&job.name_any()).await;
    ns.wait_workflow("sleeper", "the step reported started", |wf| {
        started(wf).contains("nap")
    })
    .await;
    // A measurement over a fixed window, not a wait for a condition: the window is the point.
    let window = std::time::Duration::from_secs(6);
    let before = timer_passes(&metrics);
    tokio::time::sleep(window).await;
    let passes = timer_passes(&metrics) - before;
    stop.cancel();
    running
        .await
        .expect("the operator task")
        .expect("the operator stops cleanly");
    assert!(
        passes <= 2.0,
        "{passes} timer passes of a workflow with nothing due in {window:?}: it is woken every tick"
    );
}

/// The seed's manifests (and this project's versions of its examples), submitted unchanged as
/// YAML, end as the seed documents.
#[rstest]
#[case::simple("simple", Phase::Completed, &[])]
#[case::diamond("diamond", Phase::Completed, &[])]
#[case::failing("failing", Phase::Failed, &["step fail failed"])]
#[case::timeout("timeout", Phase::Failed, &["step slow timed out"])]
#[case::invalid_cycle(
    "invalid-cycle",
    Phase::Failed,
    &["dependency cycle: extract -> transform -> load -> extract"]
)]
#[tokio::test]
async fn seed_manifest_is_accepted_unchanged(
    #[case] example: &str,
    #[case] outcome: Phase,
    #[case] words: &[&str],
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let path = format!("{}/examples/{example}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the example exists");
    let manifest: serde_json::Value = serde_yaml::from_str(&text).expect("YAML");
    let created = create_raw(ns, manifest).await;
    let name = created.name_any();
    let workflow = ns.wait_terminal(&name).await;
    assert_eq!(
        phase(&workflow),
        Some(outcome),
        "{}",
        support::describe_status(&workflow)
    );
    for word in words {
        assert!(support::message(&workflow).contains(word), "{word:?}");
    }
}

/// A manifest written to the seed's schema alone: no `maxStepTimeout`, a `null` command, no
/// `dependsOn`, an image without a tag. The API fills in the seed's default and it runs.
#[rstest]
#[tokio::test]
async fn seed_schema_manifest_with_defaults_and_null_command_runs(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let manifest = json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlow",
        "metadata": {"name": "seed"},
        "spec": {"containers": [
            {"stepName": "step0", "image": "busybox", "command": null},
            {"stepName": "step1", "image": "busybox", "command": ["echo", "step1"], "dependsOn": ["step0"]},
        ]},
    });
    let created = create_raw(ns, manifest).await;
    assert_eq!(created.data["spec"]["maxStepTimeout"], 60);
    let workflow = ns.expect_completed("seed").await;
    assert_eq!(executed(&workflow), set(&["step0", "step1"]));
    let jobs: Vec<Job> = ns.jobs_of("seed").await;
    let steps: BTreeSet<&str> = jobs.iter().filter_map(step_of).collect();
    assert_eq!(steps, BTreeSet::from(["step0", "step1"]));
}

/// Creates a WorkFlow from raw JSON, as `kubectl create -f` would, in the test's namespace.
async fn create_raw(ns: &support::Namespace, mut manifest: serde_json::Value) -> DynamicObject {
    manifest["metadata"]["namespace"] = json!(ns.name);
    let object: DynamicObject = serde_json::from_value(manifest).expect("an object");
    let gvk = GroupVersionKind::gvk(
        WorkFlow::group(&()).as_ref(),
        WorkFlow::version(&()).as_ref(),
        WorkFlow::kind(&()).as_ref(),
    );
    let resource = ApiResource::from_gvk_with_plural(&gvk, "workflows");
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), &ns.name, &resource);
    api.create(&PostParams::default(), &object)
        .await
        .expect("the manifest is accepted unchanged")
}
