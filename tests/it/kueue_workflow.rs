//! Kueue at workflow scope (`queueScope: Workflow`) end to end: one Workload per run asking for
//! its peak concurrent footprint, no step before its admission, the admission's placement in
//! every step, the quota given back at the end, an eviction that stops the run until it is
//! admitted again, and a run that does not fit waiting without holding quota.
//!
//! Kueue is played on the embedded control plane by [`support::kueue::KueueStandIn`] (which
//! behaviours of Kueue it plays is written there and in docs/kueue.md).

use crate::support;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use rstest::rstest;
use support::kueue::{FLAVOR_LABEL, FLAVOR_TOLERATION, KueueStandIn};
use support::{
    Gate, JobRecorder, Namespace, Operator, holds_for, namespace, operator, operator_process,
};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::jobs::LABEL_QUEUE_NAME;
use workflow_operator_core::kueue::api::Workload;
use workflow_operator_core::kueue::workload::{MULTIKUEUE_CONTROLLER, Standing, standing};
use workflow_operator_core::lifecycle::Phase;

use workflow_operator_core::testing::WorkFlowBuilder;

/// A diamond whose middle steps run at once: a (500m), then b (1) and c (1), then d (500m):
/// its peak is 2 cpu, b and c together.
fn diamond(name: &str, queue: &str, command: &[&str]) -> WorkFlowBuilder {
    WorkFlow::test(name)
        .step("a", &[])
        .command(command)
        .cpu("500m")
        .step("b", &["a"])
        .command(&["true"])
        .cpu("1")
        .step("c", &["a"])
        .command(&["true"])
        .cpu("1")
        .step("d", &["b", "c"])
        .command(&["true"])
        .cpu("500m")
        .queue_whole(queue)
}

/// The cpu its Workload asks for.
fn asked_cpu(workload: &Workload) -> String {
    let pod = workload.spec.pod_sets[0]
        .template
        .spec
        .as_ref()
        .expect("a pod");
    let requests = pod.containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    requests.expect("requests")["cpu"].0.clone()
}

fn step_phase(workflow: &WorkFlow, step: &str) -> Option<StepPhase> {
    let steps = workflow
        .status
        .as_ref()
        .map(|s| s.steps.as_slice())
        .unwrap_or_default();
    steps.iter().find(|s| s.name == step).map(|s| s.phase)
}

fn step_message(workflow: &WorkFlow, step: &str) -> String {
    let steps = workflow
        .status
        .as_ref()
        .map(|s| s.steps.as_slice())
        .unwrap_or_default();
    let entry = steps.iter().find(|s| s.name == step);
    entry.and_then(|s| s.message.clone()).unwrap_or_default()
}

async fn stand_in(ns: &Namespace, cpu: &str) -> KueueStandIn {
    let kueue = KueueStandIn::start(ns.client()).await;
    kueue
        .queues(&ns.name, "team", &format!("cq-{}", ns.name), cpu)
        .await;
    kueue
}

/// Admitted as a whole: the Workload asks for the diamond's peak (2 cpu, not the 3 of all its
/// steps), no Job exists while it waits (its first step `Queued`, naming the Workload and the
/// queue), once admitted every Job carries the flavor's node label and toleration and none of
/// Kueue's per-Job labels, and the run's end finishes the Workload, giving its quota back.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_admitted_as_a_whole_and_gives_its_quota_back(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("plays Kueue on the embedded control plane");
    let ns = &operator.ns;
    let kueue = stand_in(ns, "2").await;
    kueue.hold();
    ns.create(diamond("whole", "team", &["true"])).await;
    let workload = kueue
        .wait_workload(&ns.name, "whole", "created", |_| true)
        .await;
    assert_eq!(asked_cpu(&workload), "2000m", "the peak: b and c at once");
    assert_eq!(workload.spec.queue_name.as_deref(), Some("team"));
    let owner = &workload.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("WorkFlow", "whole")
    );
    let queued = ns
        .wait_workflow("whole", "step a queued", |wf| {
            step_phase(wf, "a") == Some(StepPhase::Queued)
        })
        .await;
    let said = step_message(&queued, "a");
    assert!(
        said.contains(&workload.name_any()) && said.contains("queue team"),
        "{said}"
    );
    holds_for(
        &ns.workflows(),
        "whole",
        "no step started before admission",
        Duration::from_secs(3),
        |wf| wf.is_some_and(|wf| step_phase(wf, "a") == Some(StepPhase::Queued)),
    )
    .await;
    assert!(
        ns.jobs_of("whole").await.is_empty(),
        "no Job before admission"
    );

    kueue.release();
    ns.expect_completed("whole").await;
    let jobs = ns.jobs_of("whole").await;
    assert_eq!(jobs.len(), 4);
    for job in &jobs {
        let pod = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod");
        let selector = pod.node_selector.clone().unwrap_or_default();
        assert_eq!(
            selector.get(FLAVOR_LABEL.0).map(String::as_str),
            Some(FLAVOR_LABEL.1),
            "{}",
            job.name_any()
        );
        let tolerations = pod.tolerations.clone().unwrap_or_default();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some(FLAVOR_TOLERATION)),
            "{}",
            job.name_any()
        );
        assert!(
            !job.labels().contains_key(LABEL_QUEUE_NAME),
            "Kueue would take the Job for its own"
        );
        assert_ne!(job.spec.as_ref().and_then(|s| s.suspend), Some(true));
    }
    let finished = kueue
        .wait_workload(&ns.name, "whole", "finished", |w| {
            standing(w) == Standing::Finished
        })
        .await;
    let reason = finished
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Finished"))
        .map(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("Succeeded"));
    support::wait_for(
        &kube::Api::<workflow_operator_core::kueue::api::ClusterQueue>::all(ns.client()),
        &format!("cq-{}", ns.name),
        "no workload reserving quota",
        |q| {
            q.and_then(|q| q.status.as_ref())
                .is_some_and(|s| s.reserving_workloads == 0)
        },
    )
    .await;
}

/// Evicted mid-run and admitted again: step a has succeeded and b runs when Kueue preempts
/// the Workload; b's Job is stopped (its pod gone), the reservation is cleared (Kueue may
/// queue it again), the run waits with b `Queued`, and once admitted again it resumes from b:
/// a never runs again (one Job, one pod), and the workflow completes.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_run_resumes_from_where_it_was_when_admitted_again(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("plays Kueue; the step waits on a local file");
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let kueue = stand_in(ns, "2").await;
    let gate = Gate::new();
    let wait = gate.wait_command("b done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    let chain = WorkFlow::test("evicted")
        .step("a", &[])
        .command(&["true"])
        .cpu("500m")
        .step("b", &["a"])
        .command(&wait)
        .cpu("1")
        .step("c", &["b"])
        .command(&["true"])
        .cpu("500m")
        .queue_whole("team");
    ns.create(chain).await;
    let b = ns
        .wait_step_job("evicted", "b", "running", |j| {
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
        })
        .await;
    let admitted = kueue
        .wait_workload(&ns.name, "evicted", "admitted", |w| {
            standing(w) == Standing::Admitted
        })
        .await;

    kueue.hold();
    kueue.evict(&ns.name, &admitted).await;
    kueue
        .wait_workload(&ns.name, "evicted", "its reservation cleared", |w| {
            w.status.as_ref().is_some_and(|s| s.admission.is_none())
        })
        .await;
    let waiting = ns
        .wait_workflow("evicted", "b queued again", |wf| {
            step_phase(wf, "b") == Some(StepPhase::Queued)
        })
        .await;
    assert!(support::executed(&waiting).contains("a"), "a had succeeded");
    let requeued = ns
        .wait_workflow("evicted", "the run Queued again", |wf| {
            support::phase(wf) == Some(Phase::Queued)
        })
        .await;
    let message = requeued.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains(&admitted.name_any())
            && message.contains("was evicted")
            && message.contains("waiting to be admitted again (queue team)"),
        "{message}"
    );
    ns.wait_no_pods("b's pod stopped", |p| {
        p.labels().get("job-name") == Some(&b.name_any())
            && !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
    })
    .await;

    kueue.release();
    gate.open();
    ns.expect_completed("evicted").await;
    recorder.catch_up(ns).await;
    let a_jobs = recorder.jobs_of("evicted", "a");
    assert_eq!(
        a_jobs.len(),
        1,
        "a succeeded before the eviction: never run again"
    );
    assert_eq!(recorder.pods_of(&a_jobs[0].uid), 1);
    assert_eq!(recorder.jobs_of("evicted", "c").len(), 1);
}

/// A run whose peak does not fit its ClusterQueue waits without holding quota: its Workload is
/// not admitted (`QuotaReserved` false, saying why), it has no Job, and a smaller workflow
/// submitted after it is admitted and completes meanwhile.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_does_not_fit_waits_without_holding_quota(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("plays Kueue on the embedded control plane");
    let ns = &operator.ns;
    let kueue = stand_in(ns, "1500m").await;
    ns.create(diamond("big", "team", &["true"])).await;
    let pending = kueue
        .wait_workload(&ns.name, "big", "not admitted, saying why", |w| {
            let status = w.status.clone().unwrap_or_default();
            status.conditions.iter().any(|c| {
                c.type_ == "QuotaReserved"
                    && c.status == "False"
                    && c.message.contains("insufficient")
            })
        })
        .await;
    assert_eq!(asked_cpu(&pending), "2000m");
    let small = WorkFlow::test("small")
        .step("only", &[])
        .command(&["true"])
        .cpu("1")
        .queue_whole("team");
    ns.create(small).await;
    ns.expect_completed("small").await;
    let big = ns.get("big").await;
    assert_eq!(step_phase(&big, "a"), Some(StepPhase::Queued));
    assert!(
        ns.jobs_of("big").await.is_empty(),
        "no Job of the run that does not fit"
    );
    let big = kueue
        .workloads(&ns.name)
        .await
        .into_iter()
        .find(|w| w.name_any() == pending.name_any())
        .expect("there");
    assert!(
        big.status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .is_none(),
        "holds no quota"
    );
}

/// A run waiting for quota another run holds is `Queued` as a whole: its phase says so, naming
/// its Workload and its queue, in the status, `workflow-operator get` and `list`; it has no
/// Job. Once the other run ends and gives its quota back, it is admitted and completes.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_quota_is_queued_naming_its_queue_until_the_quota_frees(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("plays Kueue; the step waits on a local file");
    let ns = &operator.ns;
    let kueue = stand_in(ns, "2").await;
    let gate = Gate::new();
    let wait = gate.wait_command("first done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    let first = WorkFlow::test("first")
        .step("only", &[])
        .command(&wait)
        .cpu("1")
        .queue_whole("team");
    ns.create(first).await;
    ns.wait_step_job("first", "only", "running", |j| {
        j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
    })
    .await;
    ns.create(diamond("second", "team", &["true"])).await;
    let workload = kueue
        .wait_workload(&ns.name, "second", "made", |_| true)
        .await;
    let queued = ns
        .wait_workflow("second", "phase Queued", |wf| {
            support::phase(wf) == Some(Phase::Queued)
        })
        .await;
    let status = queued.status.clone().unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.contains(&workload.name_any()) && message.contains("queue team"),
        "{message}"
    );
    assert_eq!(status.summary.as_deref(), Some(message.as_str()));
    assert_eq!(step_phase(&queued, "a"), Some(StepPhase::Queued));
    assert!(ns.jobs_of("second").await.is_empty(), "no Job while queued");
    let got = ns.cli(&["get", "second"]).await;
    assert!(
        got.contains("Queued") && got.contains("queue team"),
        "{got}"
    );
    let listed = ns.cli(&["list"]).await;
    let row = listed
        .lines()
        .find(|l| l.contains("second"))
        .unwrap_or_default();
    assert!(row.contains("Queued"), "{listed}");

    gate.open();
    ns.expect_completed("first").await;
    let done = ns.expect_completed("second").await;
    let events: kube::Api<Event> = kube::Api::namespaced(ns.client(), &ns.name);
    support::wait_list(
        &events,
        kube::runtime::watcher::Config::default(),
        "the Events of Queued and Admitted",
        support::DEADLINE,
        |events| {
            let reasons: Vec<&str> = (events.iter())
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("second"))
                .filter_map(|e| e.reason.as_deref())
                .collect();
            reasons.contains(&"Queued") && reasons.contains(&"Admitted")
        },
    )
    .await;
    assert_eq!(support::executed(&done).len(), 4);
}

/// MultiKueue's generic adapter contract, on two embedded control planes: a WorkFlow with
/// `managedBy: kueue.x-k8s.io/multikueue` on the manager is left alone by the manager's
/// operator (no Job, finalizer, progress record or status for 30 s) beside the run's Workload
/// it makes there for Kueue; Kueue (the tests' stand-in) admits that Workload, copies it and
/// the WorkFlow to the worker, where the worker's operator runs the copy under the prebuilt
/// Workload (making none of its own); the worker's status, copied back whole, is what the
/// manager's `kubectl get wf` and `workflow-operator get` show.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_multikueue_dispatches_runs_on_the_worker_and_its_status_comes_back(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("two embedded control planes");
    let manager = &operator.ns;
    let Some(tools) = kube_devcluster::testing::require_tools("multikueue") else {
        return;
    };
    let worker_cluster = support::cluster().await;
    let worker = support::namespace_named(worker_cluster, &manager.name).await;
    let worker_operator = Operator::task(worker);
    let worker = &worker_operator.ns;
    let manager_kueue = stand_in(manager, "4").await;
    let worker_kueue = stand_in(worker, "4").await;

    let dispatched = diamond("far", "team", &["true"]).managed_by(MULTIKUEUE_CONTROLLER);
    let created = manager.create(dispatched).await;
    let before = created.metadata.resource_version.clone();
    let workload = manager_kueue
        .wait_workload(
            &manager.name,
            "far",
            "made by the manager's operator, admitted",
            |w| standing(w) == Standing::Admitted,
        )
        .await;
    assert_eq!(asked_cpu(&workload), "2000m");
    holds_for(
        &manager.workflows(),
        "far",
        "left alone by the manager's operator",
        Duration::from_secs(30),
        |wf| {
            wf.is_some_and(|wf| {
                wf.metadata.resource_version == before
                    && wf.finalizers().is_empty()
                    && wf.status.is_none()
            })
        },
    )
    .await;
    assert!(
        manager.jobs_of("far").await.is_empty(),
        "no Job on the manager"
    );

    let name = manager_kueue
        .dispatch(&manager.name, "far", &worker.client())
        .await;
    assert_eq!(name, workload.name_any());
    worker.expect_completed("far").await;
    assert_eq!(
        worker_kueue.workloads(&worker.name).await.len(),
        1,
        "the prebuilt Workload, no second"
    );
    assert_eq!(worker.jobs_of("far").await.len(), 4);
    manager_kueue
        .sync_status(&manager.name, "far", &name, &worker.client())
        .await;
    let shown = manager.get("far").await;
    assert_eq!(
        support::phase(&shown),
        Some(workflow_operator_core::lifecycle::Phase::Completed)
    );
    assert!(
        manager.jobs_of("far").await.is_empty(),
        "still no Job on the manager"
    );
    let finished = manager_kueue
        .wait_workload(&manager.name, "far", "finished", |w| {
            standing(w) == Standing::Finished
        })
        .await;
    assert_eq!(finished.name_any(), name);

    let home = tempfile::tempdir().expect("a home for kubectl");
    let dev = manager.cluster.dev().expect("embedded");
    let table = support::session::kubectl(
        dev,
        &tools.kubectl,
        home.path(),
        &["get", "wf", "far", "-n", &manager.name],
    )
    .await;
    let row = support::session::row(&table, "far");
    assert!(
        row.contains(&"Completed"),
        "kubectl get wf on the manager:\n{table}"
    );
    let got = manager.cli(&["get", "far"]).await;
    assert!(
        got.contains("Completed"),
        "workflow-operator get on the manager:\n{got}"
    );
    for step in ["a", "b", "c", "d"] {
        assert!(got.contains(step), "step {step} shown:\n{got}");
    }
}

/// A WorkFlowTemplate on the manager and a WorkFlow MultiKueue dispatches whose steps call it.
const MANAGER_ONLY_TEMPLATE: &str = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: manager-only}
spec:
  templates:
    - name: say
      inputs: {parameters: [{name: text}]}
      image: busybox
      command: [echo, "{{inputs.parameters.text}}"]
      resources: {requests: {cpu: "1"}}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: templated}
spec:
  queueName: team
  queueScope: Workflow
  managedBy: kueue.x-k8s.io/multikueue
  containers:
    - stepName: a
      templateRef: {name: manager-only, template: say}
      arguments: {parameters: [{name: text, value: a}]}
    - stepName: b
      dependsOn: [a]
      templateRef: {name: manager-only, template: say}
      arguments: {parameters: [{name: text, value: b}]}
"#;

/// Templates are resolved into what MultiKueue copies: a WorkFlow submitted to the manager
/// whose steps call a WorkFlowTemplate that exists only there runs on the worker from the
/// record `submit` made of it (in an annotation, which MultiKueue copies), the manager sizing
/// its Workload from the same record, and the manager shows the run.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_workflow_runs_on_the_worker_from_templates_only_the_manager_has(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("two embedded control planes");
    let manager = &operator.ns;
    let worker = support::namespace_named(support::cluster().await, &manager.name).await;
    let worker_operator = Operator::task(worker);
    let worker = &worker_operator.ns;
    let manager_kueue = stand_in(manager, "4").await;
    // Admits the prebuilt Workload on the worker while it lives.
    let _worker_kueue = stand_in(worker, "4").await;
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("templated.yaml");
    std::fs::write(&file, MANAGER_ONLY_TEMPLATE).expect("written");
    manager.cli(&["submit", &file.to_string_lossy()]).await;
    let workload = manager_kueue
        .wait_workload(
            &manager.name,
            "templated",
            "made from the record, admitted",
            |w| standing(w) == Standing::Admitted,
        )
        .await;
    assert_eq!(asked_cpu(&workload), "1000m", "a then b, 1 cpu each");

    manager_kueue
        .dispatch(&manager.name, "templated", &worker.client())
        .await;
    let done = worker.expect_completed("templated").await;
    let templates: kube::Api<workflow_operator_core::template::WorkFlowTemplate> =
        kube::Api::namespaced(manager.client(), &manager.name);
    let on_manager = templates.get("manager-only").await.expect("on the manager");
    let records = done.status.clone().unwrap_or_default().resolved_templates;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        (records[0].name.as_str(), &records[0].spec),
        ("manager-only", &on_manager.spec.workflow),
        "the manager's template"
    );
    let on_worker = kube::Api::<workflow_operator_core::template::WorkFlowTemplate>::namespaced(
        worker.client(),
        &worker.name,
    );
    assert!(
        on_worker
            .get_opt("manager-only")
            .await
            .expect("read")
            .is_none()
    );
    manager_kueue
        .sync_status(
            &manager.name,
            "templated",
            &workload.name_any(),
            &worker.client(),
        )
        .await;
    let got = manager.cli(&["get", "templated"]).await;
    assert!(
        got.contains("Completed"),
        "workflow-operator get on the manager:\n{got}"
    );
}

/// A WorkFlow MultiKueue dispatches made without `submit` (no record of its templates) is sized
/// from the manager's templates, read in memory: its Workload asks for the run's peak, and the
/// WorkFlow is not written (no annotation, no status).
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_workflow_made_without_submit_is_sized_from_the_managers_templates(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("plays Kueue on the embedded control plane");
    let ns = &operator.ns;
    let kueue = stand_in(ns, "4").await;
    kueue.hold();
    let documents: Vec<serde_json::Value> = (MANAGER_ONLY_TEMPLATE.split("\n---\n"))
        .map(|d| serde_yaml::from_str(d).expect("yaml"))
        .collect();
    let template: workflow_operator_core::template::WorkFlowTemplate =
        serde_json::from_value(documents[0].clone()).expect("a template");
    let templates = kube::Api::namespaced(ns.client(), &ns.name);
    templates
        .create(&Default::default(), &template)
        .await
        .expect("created");
    let workflow: WorkFlow = serde_json::from_value(documents[1].clone()).expect("a workflow");
    ns.workflows()
        .create(&Default::default(), &workflow)
        .await
        .expect("created");
    let workload = kueue
        .wait_workload(&ns.name, "templated", "made", |_| true)
        .await;
    assert_eq!(asked_cpu(&workload), "1000m");
    let left = ns.get("templated").await;
    assert!(
        left.status.is_none()
            && !left
                .annotations()
                .contains_key("workflow.crd.com/resolved-templates"),
        "{left:?}"
    );
}

/// A second handle on `ns` (the same namespace of the same plane), for a test that moves its
/// operator.
fn handle(ns: &Namespace) -> Namespace {
    Namespace {
        cluster: ns.cluster.clone(),
        name: ns.name.clone(),
    }
}

/// An operator killed while Kueue admits the run (it dies with the Workload made and not yet
/// admitted, and comes back once Kueue admitted it), then killed again with a step running:
/// one Workload, no step twice, the run completes and its Workload is finished.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_during_admission_makes_no_second_workload_and_runs_no_step_twice(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator; the step waits on a local file");
    let mut operator = operator_process;
    let ns = &handle(&operator.ns);
    let recorder = JobRecorder::start(ns).await;
    let kueue = stand_in(ns, "2").await;
    kueue.hold();
    let gate = Gate::new();
    let wait = gate.wait_command("a done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    ns.create(diamond("killed", "team", &wait)).await;
    kueue
        .wait_workload(&ns.name, "killed", "made", |_| true)
        .await;
    operator.kill().await;
    kueue.release();
    kueue
        .wait_workload(&ns.name, "killed", "admitted", |w| {
            standing(w) == Standing::Admitted
        })
        .await;
    operator.start();
    ns.wait_step_job("killed", "a", "running", |j| {
        j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
    })
    .await;
    operator.kill().await;
    operator.start();
    gate.open();
    ns.expect_completed("killed").await;
    kueue
        .wait_workload(&ns.name, "killed", "finished", |w| {
            standing(w) == Standing::Finished
        })
        .await;
    assert_eq!(
        kueue.workloads(&ns.name).await.len(),
        1,
        "one Workload for the run"
    );
    recorder.catch_up(ns).await;
    assert_eq!(recorder.assert_no_step_ran_twice(&Default::default()), 4);
}

/// Operators killed around MultiKueue's copy: the manager's, once its Workload is made (it
/// comes back and makes no second one); the worker's, down while the copy is created, and
/// again once the copy's first Job exists. One Workload on each plane, no step twice on the
/// worker, none on the manager, and the manager shows the run Completed.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_killed_during_a_copy_make_no_second_workload_and_run_no_step_twice(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("two embedded control planes; kills the operators");
    let mut manager_operator = operator_process;
    let manager = &handle(&manager_operator.ns);
    let worker = support::namespace_named(support::cluster().await, &manager.name).await;
    let mut worker_operator = Operator::process_with_args(handle(&worker), &[]);
    let recorder = JobRecorder::start(&worker).await;
    let manager_kueue = stand_in(manager, "4").await;
    let worker_kueue = stand_in(&worker, "4").await;
    let gate = Gate::new();
    let wait = gate.wait_command("a done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    manager
        .create(diamond("copied", "team", &wait).managed_by(MULTIKUEUE_CONTROLLER))
        .await;
    manager_kueue
        .wait_workload(&manager.name, "copied", "admitted", |w| {
            standing(w) == Standing::Admitted
        })
        .await;
    manager_operator.kill().await;
    manager_operator.start();

    worker_operator.kill().await;
    let name = manager_kueue
        .dispatch(&manager.name, "copied", &worker.client())
        .await;
    worker_operator.start();
    worker
        .wait_step_job("copied", "a", "running", |j| {
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
        })
        .await;
    worker_operator.kill().await;
    worker_operator.start();
    gate.open();
    worker.expect_completed("copied").await;
    manager_kueue
        .sync_status(&manager.name, "copied", &name, &worker.client())
        .await;
    let shown = manager.get("copied").await;
    assert_eq!(
        support::phase(&shown),
        Some(workflow_operator_core::lifecycle::Phase::Completed)
    );
    assert_eq!(
        manager_kueue.workloads(&manager.name).await.len(),
        1,
        "one Workload on the manager"
    );
    assert_eq!(
        worker_kueue.workloads(&worker.name).await.len(),
        1,
        "the prebuilt one on the worker"
    );
    assert!(
        manager.jobs_of("copied").await.is_empty(),
        "no Job on the manager"
    );
    recorder.catch_up(&worker).await;
    assert_eq!(recorder.assert_no_step_ran_twice(&Default::default()), 4);
}

/// `managedBy` cannot be set, changed or removed once a WorkFlow exists (the CRD's CEL rule).
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_by_is_immutable(#[future(awt)] namespace: Namespace) {
    let ns = &namespace;
    ns.create(WorkFlow::test("mine").step("a", &[]).command(&["true"]))
        .await;
    ns.create(
        WorkFlow::test("theirs")
            .step("a", &[])
            .command(&["true"])
            .managed_by(MULTIKUEUE_CONTROLLER),
    )
    .await;
    for (name, value) in [
        ("mine", serde_json::json!("kueue.x-k8s.io/multikueue")),
        ("theirs", serde_json::json!("someone-else")),
        ("theirs", serde_json::Value::Null),
    ] {
        let patch = serde_json::json!({"spec": {"managedBy": value}});
        let refused = ns
            .workflows()
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .expect_err("managedBy is immutable");
        assert!(
            refused.to_string().contains("managedBy is immutable"),
            "{name}: {refused}"
        );
    }
}

/// What runs changes while the run is admitted: the earlier run's Workload is finished (its
/// quota given back) and the new run waits for a Workload of its own, then completes.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_run_gives_back_the_quota_of_the_one_it_replaces(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("plays Kueue; the step waits on a local file");
    let ns = &operator.ns;
    let kueue = stand_in(ns, "2").await;
    let gate = Gate::new();
    let wait = gate.wait_command("a done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    ns.create(diamond("changed", "team", &wait)).await;
    let first = kueue
        .wait_workload(&ns.name, "changed", "admitted", |w| {
            standing(w) == Standing::Admitted
        })
        .await;
    ns.wait_step_job("changed", "a", "running", |j| {
        j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
    })
    .await;
    ns.patch_spec("changed", serde_json::json!({"containers": [{"stepName": "only", "image": "busybox", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]})).await;
    let finished = kueue
        .wait_workload(&ns.name, "changed", "the first run's finished", |w| {
            w.name_any() == first.name_any() && standing(w) == Standing::Finished
        })
        .await;
    let reason = finished
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Finished"))
        .map(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("Failed"));
    ns.expect_completed("changed").await;
    let second = kueue
        .wait_workload(&ns.name, "changed", "the new run's, finished", |w| {
            w.name_any() != first.name_any() && standing(w) == Standing::Finished
        })
        .await;
    assert_eq!(asked_cpu(&second), "1000m");
    gate.open();
}

/// Workflows that do not use Kueue at workflow scope cost it nothing: on a control plane
/// without Kueue's kinds, a plain run completes and no request names a Kueue kind.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_without_queue_scope_makes_no_kueue_request(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("counts the embedded control plane's requests");
    let ns = &operator.ns;
    let plain = WorkFlow::test("plain")
        .step("a", &[])
        .command(&["true"])
        .step("b", &["a"])
        .command(&["true"]);
    ns.create(plain).await;
    ns.expect_completed("plain").await;
    let counts = ns.cluster.dev().expect("embedded").requests();
    let kueue: Vec<_> = counts
        .requests
        .iter()
        .filter(|(key, _)| key.resource.contains("kueue"))
        .collect();
    assert!(kueue.is_empty(), "requests naming a Kueue kind: {kueue:?}");
    let workflows: Vec<_> = counts
        .requests
        .iter()
        .filter(|(key, _)| key.resource.contains("workflow.crd.com"))
        .collect();
    assert!(!workflows.is_empty(), "the requests were counted");
}
