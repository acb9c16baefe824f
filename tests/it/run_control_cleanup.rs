//! Clean-up of finished work, through the Kubernetes API: `ttlSecondsAfterFinished`
//! deletes a finished workflow with its Jobs and pods, the operator's
//! `--default-ttl-seconds-after-finished` applies where the spec says nothing, an operator down
//! when the TTL passes deletes the workflow once it is back, and each `podCleanup` mode deletes
//! exactly the pods it should while the workflow, its Jobs and its status stay. Bad values are
//! refused by the API server.
//!
//! Run: `cargo test --test it run_control_cleanup::`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Resource, ResourceExt};
use kube_devcluster::testing::eventually;
use rstest::rstest;
use serde_json::json;
use support::{
    DEADLINE, Gate, Namespace, Operator, describe_status, holds_for, namespace, operator,
    operator_process, phase, retrying, step_of, wait_for,
};
use workflow_operator::controllers::workflow::cleanup::TTL_EXPIRED;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::PodCleanup;
use workflow_operator_core::jobs::{ANNOTATION_PODS_DELETED, selector};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::testing::WorkFlowBuilder;

/// Submits the workflow `builder` describes, with `edit` applied to its spec first.
async fn submit(ns: &Namespace, builder: WorkFlowBuilder, edit: impl FnOnce(&mut WorkFlow)) {
    let mut workflow = ns.manifest(builder);
    edit(&mut workflow);
    let workflow = &workflow;
    retrying("creating a workflow", || async move {
        ns.workflows()
            .create(&PostParams::default(), workflow)
            .await
    })
    .await;
}

/// A workflow of two steps that succeed.
fn two_steps(name: &str) -> WorkFlowBuilder {
    WorkFlow::test(name)
        .step("a", &[])
        .command(&["true"])
        .step("b", &["a"])
        .command(&["true"])
}

/// A workflow whose step `ok` succeeds and `bad` fails (exit code 3); `failFast: false`, so
/// `ok` finishes either way. It ends Failed.
fn one_fails(name: &str) -> WorkFlowBuilder {
    WorkFlow::test(name)
        .step("ok", &[])
        .command(&["true"])
        .step("bad", &[])
        .command(&["sh", "-c", "exit 3"])
        .fail_fast(false)
}

/// The pods of the namespace that belong to the workflow `name` (by the operator's label).
async fn pods_of(ns: &Namespace, name: &str) -> Vec<Pod> {
    let selector = selector(name);
    let selector = &selector;
    retrying("listing pods", || async move {
        ns.pods()
            .list(&ListParams::default().labels(selector))
            .await
    })
    .await
    .items
}

/// Waits until the workflow is gone, then until its Jobs and pods are.
async fn wait_gone_with_everything(ns: &Namespace, name: &str) {
    wait_for(&ns.workflows(), name, "deletion", |wf| wf.is_none()).await;
    ns.wait_jobs(name, "every job deleted", <[_]>::is_empty)
        .await;
    eventually(&format!("the pods of {name} deleted"), DEADLINE, || async {
        pods_of(ns, name).await.is_empty().then_some(())
    })
    .await;
}

/// The notes of the `TTLExpired` Events about the workflow `name`.
async fn ttl_events(ns: &Namespace, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let listed = retrying("listing events", || async {
        events.list(&ListParams::default()).await
    })
    .await;
    listed
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(TTL_EXPIRED))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.note)
        .collect()
}

#[rstest]
#[tokio::test]
async fn the_ttl_deletes_a_finished_workflow_with_its_jobs_and_pods_either_way(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let ttl = |wf: &mut WorkFlow| wf.spec.ttl_seconds_after_finished = Some(1);
    submit(ns, two_steps("completes"), ttl).await;
    submit(ns, one_fails("fails"), ttl).await;
    // Each finished with its Jobs and pods in place...
    for (name, jobs) in [("completes", 2), ("fails", 2)] {
        let finished = wait_for(&ns.workflows(), name, "a terminal status", |wf| {
            wf.is_some_and(support::is_terminal)
        })
        .await;
        if let Some(wf) = finished {
            // Deleted this soon after finishing, it might be seen gone instead.
            assert!(phase(&wf).is_some_and(Phase::is_terminal));
            assert_eq!(ns.jobs_of(name).await.len(), jobs, "{name}");
        }
    }
    // ...and went, with them, a second later.
    for name in ["completes", "fails"] {
        wait_gone_with_everything(ns, name).await;
        let notes = ttl_events(ns, name).await;
        assert!(
            notes.iter().any(|n| n.starts_with("deleting: finished ")
                && n.ends_with("s ago (ttlSecondsAfterFinished: 1)")),
            "{name}: {notes:?}"
        );
    }
}

#[rstest]
#[tokio::test]
async fn the_operators_default_ttl_applies_only_where_the_spec_says_nothing(
    #[future(awt)] namespace: Namespace,
) {
    skip_on_real_cluster!("starts the operator with a flag");
    let operator =
        Operator::process_with_args(namespace, &["--default-ttl-seconds-after-finished", "1"]);
    let ns = &operator.ns;
    submit(ns, two_steps("by-default"), |_| {}).await;
    submit(ns, two_steps("its-own"), |wf| {
        wf.spec.ttl_seconds_after_finished = Some(3600);
    })
    .await;
    ns.expect_completed("its-own").await;
    wait_gone_with_everything(ns, "by-default").await;
    let notes = ttl_events(ns, "by-default").await;
    assert!(
        notes
            .iter()
            .any(|n| n.ends_with("(the operator's --default-ttl-seconds-after-finished: 1)")),
        "{notes:?}"
    );
    // Both finished about together; the one with its own TTL outlives the default's by far.
    holds_for(
        &ns.workflows(),
        "its-own",
        "still there, Completed",
        Duration::from_secs(3),
        |wf| wf.is_some_and(|wf| phase(wf) == Some(Phase::Completed)),
    )
    .await;
}

#[rstest]
#[tokio::test]
async fn a_workflow_whose_ttl_passes_while_the_operator_is_down_is_deleted_when_it_is_back(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    const TTL: i64 = 3;
    submit(&operator.ns, two_steps("outlived"), |wf| {
        wf.spec.ttl_seconds_after_finished = Some(TTL);
    })
    .await;
    let finished = operator.ns.expect_completed("outlived").await;
    operator.kill().await;
    let ns = &operator.ns;
    let finished_at: Timestamp = finished
        .status
        .as_ref()
        .and_then(|s| s.status_changed.as_deref())
        .and_then(|t| t.parse().ok())
        .expect("a finish time");
    let expired_at = finished_at + SignedDuration::from_secs(TTL + 1);
    // The clock passes the deadline while no operator runs.
    eventually(
        "the TTL to pass",
        Duration::from_secs(TTL as u64 + 10),
        || async { (Timestamp::now() > expired_at).then_some(()) },
    )
    .await;
    let kept = ns.get("outlived").await;
    assert!(
        kept.meta().deletion_timestamp.is_none(),
        "nothing deletes it while the operator is down: {}",
        describe_status(&kept)
    );
    assert_eq!(ns.jobs_of("outlived").await.len(), 2);
    operator.start();
    wait_gone_with_everything(&operator.ns, "outlived").await;
    assert_eq!(ttl_events(&operator.ns, "outlived").await.len(), 1);
}

/// What a workflow's Jobs show once its pod clean-up has had its say: per step, whether its
/// Job carries the pods-deleted mark and how many pods it has.
async fn pods_by_step(ns: &Namespace, name: &str) -> BTreeMap<String, (bool, usize)> {
    let pods = pods_of(ns, name).await;
    ns.jobs_of(name)
        .await
        .iter()
        .map(|job| {
            let uid = job.uid().unwrap_or_default();
            let count = pods
                .iter()
                .filter(|p| p.labels().get("controller-uid") == Some(&uid))
                .count();
            let marked = job.annotations().contains_key(ANNOTATION_PODS_DELETED);
            (
                step_of(job).unwrap_or_default().to_string(),
                (marked, count),
            )
        })
        .collect()
}

/// The status a Job's controller wrote, for comparing before and after its pods were deleted.
fn job_status(job: &Job) -> serde_json::Value {
    serde_json::to_value(&job.status).unwrap()
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pod_cleanup_mode_deletes_exactly_its_pods_and_keeps_jobs_and_status(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    // (workflow, its podCleanup, whether it completes (else `one_fails`), the steps whose pods
    // go)
    let cases: [(&str, Option<PodCleanup>, bool, &[&str]); 7] = [
        ("none", None, false, &[]),
        ("on-success", Some(PodCleanup::OnSuccess), false, &["ok"]),
        (
            "on-success-completes",
            Some(PodCleanup::OnSuccess),
            true,
            &["a", "b"],
        ),
        (
            "on-completion",
            Some(PodCleanup::OnCompletion),
            false,
            &["bad", "ok"],
        ),
        (
            "on-wf-success-fails",
            Some(PodCleanup::OnWorkflowSuccess),
            false,
            &[],
        ),
        (
            "on-wf-success",
            Some(PodCleanup::OnWorkflowSuccess),
            true,
            &["a", "b"],
        ),
        (
            "on-wf-completion",
            Some(PodCleanup::OnWorkflowCompletion),
            false,
            &["bad", "ok"],
        ),
    ];
    for (name, policy, completes, _) in &cases {
        let shape = if *completes { two_steps } else { one_fails };
        submit(ns, shape(name), |wf| wf.spec.pod_cleanup = *policy).await;
    }
    let finished = join_all(cases.iter().map(|(name, ..)| ns.wait_terminal(name))).await;
    for (wf, (name, _, completes, _)) in finished.iter().zip(&cases) {
        if *completes {
            assert_eq!(phase(wf), Some(Phase::Completed), "{name}");
        } else {
            assert_eq!(phase(wf), Some(Phase::Failed), "{name}");
            // Read from the failed pod, whatever the pod clean-up did after.
            let message = support::message(wf);
            assert!(
                message.contains("step bad failed: exit code 3"),
                "{name}: {message}"
            );
        }
    }
    // Every Job due is marked once its pods are deleted...
    for (name, _, _, gone) in &cases {
        ns.wait_jobs(name, "the jobs due marked as cleaned up", |jobs| {
            jobs.iter()
                .filter(|j| j.annotations().contains_key(ANNOTATION_PODS_DELETED))
                .count()
                == gone.len()
        })
        .await;
    }
    let statuses_before: Vec<_> = join_all(cases.iter().map(|(name, ..)| ns.jobs_of(name)))
        .await
        .into_iter()
        .map(|jobs| jobs.iter().map(job_status).collect::<Vec<_>>())
        .collect();
    // ...its pods are gone, the other Jobs' pods stay, and every Job stays.
    for (name, _, _, gone) in &cases {
        let seen = eventually(
            &format!("{name}: the pods of the marked jobs gone"),
            DEADLINE,
            || async {
                let seen = pods_by_step(ns, name).await;
                seen.values()
                    .all(|(marked, pods)| !marked || *pods == 0)
                    .then_some(seen)
            },
        )
        .await;
        assert_eq!(seen.len(), 2, "{name}: both Jobs stay: {seen:?}");
        for (step, (marked, pods)) in &seen {
            let due = gone.contains(&step.as_str());
            assert_eq!(*marked, due, "{name}: step {step}: {seen:?}");
            assert_eq!(*pods == 0, due, "{name}: step {step}: {seen:?}");
        }
    }
    // Nothing more happens: no pod comes back, no Job's status changes, no workflow's status
    // changes, no other Job is marked.
    let watched = cases.iter().zip(&finished).map(|((name, ..), wf)| {
        let before = wf.status.clone();
        async move {
            holds_for(
                &ns.workflows(),
                name,
                "the status as it finished",
                Duration::from_secs(2),
                |now| now.is_some_and(|now| now.status == before),
            )
            .await
        }
    });
    join_all(watched).await;
    let statuses_after: Vec<_> = join_all(cases.iter().map(|(name, ..)| ns.jobs_of(name)))
        .await
        .into_iter()
        .map(|jobs| jobs.iter().map(job_status).collect::<Vec<_>>())
        .collect();
    assert_eq!(statuses_before, statuses_after);
    for (name, _, _, gone) in &cases {
        let seen = pods_by_step(ns, name).await;
        for (step, (marked, pods)) in &seen {
            let due = gone.contains(&step.as_str());
            assert_eq!(
                (*marked, *pods == 0),
                (due, due),
                "{name}: {step}: {seen:?}"
            );
        }
    }
}

/// `OnCompletion` keeps a failed step's pods while the workflow runs on (`failFast: false`):
/// the operator reads the failure's cause from them at each full pass until the workflow ends,
/// so the message names the exit code, and only then do the pods go.
#[rstest]
#[tokio::test]
async fn on_completion_keeps_a_failed_steps_pods_until_the_workflow_ends(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    submit(
        ns,
        WorkFlow::test("runs-on")
            .step("bad", &[])
            .command(&["sh", "-c", "exit 3"])
            .step("slow", &[])
            .command(&["sleep", "2"])
            .fail_fast(false),
        |wf| wf.spec.pod_cleanup = Some(PodCleanup::OnCompletion),
    )
    .await;
    let ended = ns.wait_terminal("runs-on").await;
    let message = support::message(&ended);
    assert_eq!(
        message,
        "step bad failed: exit code 3",
        "{}",
        describe_status(&ended)
    );
    ns.wait_jobs("runs-on", "both jobs marked as cleaned up", |jobs| {
        jobs.len() == 2
            && jobs
                .iter()
                .all(|j| j.annotations().contains_key(ANNOTATION_PODS_DELETED))
    })
    .await;
    eventually("the pods gone", DEADLINE, || async {
        pods_of(ns, "runs-on").await.is_empty().then_some(())
    })
    .await;
    assert_eq!(support::message(&ns.get("runs-on").await), message);
}

/// A step that failFast stops when another fails: `long` prints, then waits; `bad` fails once
/// `gate` opens.
fn one_stops_another(name: &str, gate: &Gate) -> WorkFlowBuilder {
    let bad = format!("{}; exit 3", gate.wait_script());
    WorkFlow::test(name)
        .step("long", &[])
        .command(&["sh", "-c", "echo long started; sleep 60"])
        .timeout(-1)
        .step("bad", &[])
        .command(&["sh", "-c", &bad])
}

/// The phases of the pods of step `step` of workflow `name`.
async fn step_pod_phases(ns: &Namespace, name: &str, step: &str) -> Vec<String> {
    let of_step = |p: &Pod| {
        p.annotations()
            .get("workflow.crd.com/step")
            .map(String::as_str)
            == Some(step)
    };
    let pods = pods_of(ns, name).await;
    pods.iter()
        .filter(|p| of_step(p))
        .filter_map(|p| p.status.as_ref()?.phase.clone())
        .collect()
}

/// A running step stopped because another failed (failFast) keeps its pod, stopped, with its
/// log; `podCleanup` decides when it goes, as for any step that ended.
#[rstest]
#[tokio::test]
async fn a_stopped_steps_pod_stays_until_pod_cleanup_deletes_it(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("a step waits for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    submit(ns, one_stops_another("kept", &gate), |_| {}).await;
    submit(ns, one_stops_another("cleaned", &gate), |wf| {
        wf.spec.pod_cleanup = Some(PodCleanup::OnWorkflowCompletion)
    })
    .await;
    for name in ["kept", "cleaned"] {
        let job = ns
            .wait_step_job(name, "long", "running", |j| {
                j.status.as_ref().and_then(|s| s.active) == Some(1)
            })
            .await;
        eventually("long's first line", DEADLINE, || async {
            ns.job_log(&job)
                .await
                .contains("long started")
                .then_some(())
        })
        .await;
    }
    gate.open();
    for name in ["kept", "cleaned"] {
        ns.expect_failed(name, &["step bad failed: exit code 3"])
            .await;
    }
    eventually("kept's stopped pod", DEADLINE, || async {
        let phases = step_pod_phases(ns, "kept", "long").await;
        (phases == ["Failed"]).then_some(())
    })
    .await;
    let kept = ns
        .wait_step_job("kept", "long", "failed", |j| {
            support::job_outcome(j) == Some(false)
        })
        .await;
    assert_eq!(ns.job_log(&kept).await.trim(), "long started");
    ns.wait_step_job("cleaned", "long", "its pods cleaned up", |job| {
        job.annotations().contains_key(ANNOTATION_PODS_DELETED)
    })
    .await;
    eventually("cleaned's pods gone", DEADLINE, || async {
        step_pod_phases(ns, "cleaned", "long")
            .await
            .is_empty()
            .then_some(())
    })
    .await;
}

#[rstest]
#[tokio::test]
async fn logs_say_when_a_steps_pods_were_cleaned_up(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("runs the CLI with the embedded control plane's kubeconfig");
    let ns = &operator.ns;
    submit(
        ns,
        WorkFlow::test("logged")
            .step("kept", &[])
            .command(&["sh", "-c", "echo still here; exit 1"])
            .step("cleaned", &[])
            .command(&["sh", "-c", "echo gone"])
            .fail_fast(false),
        |wf| wf.spec.pod_cleanup = Some(PodCleanup::OnSuccess),
    )
    .await;
    ns.wait_terminal("logged").await;
    ns.wait_step_job("logged", "cleaned", "marked as cleaned up", |job| {
        job.annotations().contains_key(ANNOTATION_PODS_DELETED)
    })
    .await;
    eventually("the cleaned step's pods gone", DEADLINE, || async {
        let pods = pods_of(ns, "logged").await;
        pods.iter()
            .all(|p| {
                p.annotations()
                    .get("workflow.crd.com/step")
                    .map(String::as_str)
                    != Some("cleaned")
            })
            .then_some(())
    })
    .await;
    let dev = ns.cluster.dev().expect("the embedded control plane");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["logs", "logged", "-n", &ns.name])
        .env("KUBECONFIG", dev.kubeconfig_path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("workflow-operator logs runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "kept: still here", "{stderr}");
    assert_eq!(
        stderr.trim(),
        "cleaned: no logs: its pods were deleted once it finished (spec.podCleanup: OnSuccess)"
    );
}

/// The WorkFlow resource, for manifests the typed API cannot hold (an unknown enum value).
fn workflows_dynamic(ns: &Namespace) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("workflow.crd.com", "v1", "WorkFlow");
    Api::namespaced_with(
        ns.client(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(&gvk, "workflows"),
    )
}

/// A manifest of one step with `extra` merged into its spec.
fn manifest(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({"containers": [
        {"stepName": "a", "image": "busybox:1.36", "command": ["true"]},
    ]});
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlow",
        "metadata": {"name": name},
        "spec": spec,
    })
}

#[rstest]
#[tokio::test]
async fn a_negative_ttl_or_an_unknown_pod_cleanup_is_refused_with_422(
    #[future(awt)] namespace: Namespace,
) {
    let ns = &namespace;
    let cases = [
        (
            "negative-ttl",
            json!({"ttlSecondsAfterFinished": -1}),
            "spec.ttlSecondsAfterFinished",
        ),
        (
            "unknown-cleanup",
            json!({"podCleanup": "OnTuesdays"}),
            "spec.podCleanup",
        ),
    ];
    let api = workflows_dynamic(ns);
    for (name, extra, field) in &cases {
        let object: DynamicObject = serde_json::from_value(manifest(name, extra.clone())).unwrap();
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{name}: {e:?}");
                assert!(e.message.contains(field), "{name}: {}", e.message);
            }
            other => panic!("{name}: accepted: {other:?}"),
        }
    }
    // kubectl, as a user submits it, gets the same answer.
    let Some(dev) = ns.cluster.dev() else {
        return;
    };
    let Some(tools) = kube_devcluster::testing::require_tools("refused_with_422") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    for (name, extra, field) in &cases {
        let mut kubectl = tokio::process::Command::new(&tools.kubectl)
            .arg("--kubeconfig")
            .arg(dev.kubeconfig_path())
            .args(["create", "-n", &ns.name, "-f", "-"])
            .env("HOME", home.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl runs");
        let text = serde_json::to_string(&manifest(name, extra.clone())).unwrap();
        use tokio::io::AsyncWriteExt;
        let mut stdin = kubectl.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
        drop(stdin);
        let output = kubectl.wait_with_output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: kubectl accepted it");
        // One error prints on the line of "is invalid:"; an enum violation also brings the
        // apiextensions-apiserver's "some validation rules were not checked" (hasBlockingErr in
        // staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/strategy.go),
        // so kubectl lists both, a line each.
        assert!(
            stderr.contains(&format!("The WorkFlow \"{name}\" is invalid:"))
                && stderr.contains(&format!("{field}: ")),
            "{name}: {stderr}"
        );
    }
    // Nothing was stored.
    let listed = ns.workflows().list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
}

/// `run` and `dev` (which runs the operator in-process) take the default TTL; a negative one is
/// refused before anything starts.
#[test]
fn run_and_dev_take_a_default_ttl_and_refuse_a_negative_one() {
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
            .args(args)
            .output()
            .expect("workflow-operator runs")
    };
    for command in ["run", "dev"] {
        let help = cli(&[command, "--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(
            text.contains("--default-ttl-seconds-after-finished <SECONDS>"),
            "{command}: {text}"
        );
        let refused = cli(&[command, "--default-ttl-seconds-after-finished=-1"]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("invalid value '-1' for '--default-ttl-seconds-after-finished"),
            "{command}: {stderr}"
        );
    }
}
