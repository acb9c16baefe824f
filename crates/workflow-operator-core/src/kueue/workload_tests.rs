use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{Placement, Standing, build, clear_admission, condition_now, standing, workload_name};
use crate::crd::WorkFlow;
use crate::kueue::api::{
    Admission, PodSetAssignment, ResourceFlavor, ResourceFlavorSpec, Workload, WorkloadStatus,
};
use crate::kueue::footprint::Amounts;
use crate::labels::LABEL_QUEUE_NAME;

fn now() -> Time {
    Time(Timestamp::UNIX_EPOCH)
}

fn with(conditions: &[(&str, bool, &str)], admitted: bool) -> Workload {
    let mut workload = Workload::new("w", Default::default());
    workload.status = Some(WorkloadStatus {
        conditions: conditions
            .iter()
            .map(|(kind, status, reason)| condition_now(kind, *status, reason, "why", now()))
            .collect(),
        admission: admitted.then(|| Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "workflow".into(),
                flavors: BTreeMap::from([("cpu".into(), "spot".into())]),
                ..Default::default()
            }],
        }),
        admission_checks: Vec::new(),
    });
    workload
}

#[test]
fn a_workload_stands_as_kueue_reads_its_conditions() {
    assert_eq!(
        standing(&Workload::new("w", Default::default())),
        Standing::Pending
    );
    let admitted = with(
        &[
            ("QuotaReserved", true, "Admitted"),
            ("Admitted", true, "Admitted"),
        ],
        true,
    );
    assert_eq!(standing(&admitted), Standing::Admitted);
    let reserved_only = with(&[("QuotaReserved", true, "Admitted")], true);
    assert_eq!(standing(&reserved_only), Standing::Pending);
    let evicted = with(
        &[
            ("QuotaReserved", true, "Admitted"),
            ("Admitted", true, "Admitted"),
            ("Evicted", true, "Preempted"),
        ],
        true,
    );
    assert_eq!(standing(&evicted), Standing::Evicted("why".into()));
    // Its reservation cleared, an evicted Workload waits to be admitted again.
    let cleared = with(
        &[
            ("QuotaReserved", false, "Pending"),
            ("Evicted", true, "Preempted"),
        ],
        false,
    );
    assert_eq!(standing(&cleared), Standing::Pending);
    let finished = with(
        &[
            ("Finished", true, "Succeeded"),
            ("Admitted", true, "Admitted"),
        ],
        true,
    );
    assert_eq!(standing(&finished), Standing::Finished);
}

#[test]
fn clearing_an_eviction_unsets_the_admission_and_requeues_a_preempted_workload() {
    let evicted = with(
        &[
            ("QuotaReserved", true, "Admitted"),
            ("Admitted", true, "Admitted"),
            ("Evicted", true, "Preempted"),
        ],
        true,
    );
    let patch = clear_admission(&evicted, now());
    assert_eq!(patch["status"]["admission"], serde_json::Value::Null);
    let conditions = patch["status"]["conditions"]
        .as_array()
        .expect("conditions");
    let of = |kind: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == kind)
            .expect(kind)
            .clone()
    };
    assert_eq!(of("QuotaReserved")["status"], "False");
    assert_eq!(of("Admitted")["status"], "False");
    assert_eq!(of("Requeued")["status"], "True");
    assert_eq!(of("Evicted")["status"], "True");
}

#[test]
fn the_placement_is_the_flavors_node_labels_and_tolerations_added_to_each_pod() {
    let flavor = ResourceFlavor {
        metadata: ObjectMeta {
            name: Some("spot".into()),
            ..Default::default()
        },
        spec: ResourceFlavorSpec {
            node_labels: BTreeMap::from([("pool".into(), "spot".into())]),
            tolerations: vec![Toleration {
                key: Some("spot".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }],
        },
    };
    let admitted = with(
        &[
            ("QuotaReserved", true, "Admitted"),
            ("Admitted", true, "Admitted"),
        ],
        true,
    );
    let placement = Placement::of(&admitted, &[flavor]);
    let mut pod = PodSpec {
        node_selector: Some(BTreeMap::from([("disk".into(), "ssd".into())])),
        ..Default::default()
    };
    placement.apply_to(&mut pod);
    placement.apply_to(&mut pod);
    let selector = pod.node_selector.expect("a selector");
    assert_eq!(selector.get("pool").map(String::as_str), Some("spot"));
    assert_eq!(selector.get("disk").map(String::as_str), Some("ssd"));
    assert_eq!(pod.tolerations.map(|t| t.len()), Some(1), "added once");
}

#[test]
fn a_workload_is_owned_by_its_workflow_and_named_per_run_within_a_label() {
    let mut workflow = WorkFlow::test("a-rather-long-workflow-name-that-goes-on-and-on-and-on-x")
        .step("a", &[])
        .queue_whole("team-a")
        .build();
    workflow.metadata.uid = Some("uid-1".into());
    workflow.metadata.namespace = Some("ns".into());
    let amounts = Amounts::from([
        ("cpu".to_string(), 1500),
        ("memory".to_string(), 1_048_576_000),
    ]);
    let workload = build(&workflow, "run1", 0, &amounts).expect("built");
    let name = workload.metadata.name.clone().expect("named");
    assert!(
        name.len() <= 63 && name.starts_with("workflow-a-rather"),
        "{name}"
    );
    assert_ne!(
        name,
        workload_name(&workflow.metadata.name.clone().unwrap(), "uid-1", "run2", 0)
    );
    assert_ne!(
        name,
        workload_name(&workflow.metadata.name.clone().unwrap(), "uid-1", "run1", 1)
    );
    let owner = &workload.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        ("uid-1", Some(true))
    );
    let labels = workload.metadata.labels.as_ref().expect("labels");
    assert_eq!(
        labels.get(LABEL_QUEUE_NAME).map(String::as_str),
        Some("team-a")
    );
    assert_eq!(workload.spec.queue_name.as_deref(), Some("team-a"));
    let pod = workload.spec.pod_sets[0]
        .template
        .spec
        .as_ref()
        .expect("a pod");
    let requests = pod.containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .expect("requests");
    assert_eq!(requests["cpu"].0, "1500m");
    assert_eq!(requests["memory"].0, "1048576");
}
