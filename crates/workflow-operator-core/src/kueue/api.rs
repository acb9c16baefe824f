//! The Kueue kinds the operator reads and writes (`kueue.x-k8s.io/v1beta1`): `Workload`,
//! `LocalQueue`, `ClusterQueue` and `ResourceFlavor`, with only the fields this project uses.
//! Written from Kueue's API (kubernetes-sigs/kueue `apis/kueue/v1beta1/workload_types.go`,
//! `localqueue_types.go`, `clusterqueue_types.go`, `resourceflavor_types.go`); every spec and
//! status keeps the fields it does not name (`x-kubernetes-preserve-unknown-fields`), so the
//! CRDs `dev --kueue` installs from these types hold what a real Kueue writes, and reading a
//! real Kueue's object drops nothing the operator writes back (it writes merge patches only).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of Kueue's kinds.
pub const GROUP: &str = "kueue.x-k8s.io";

/// A unit of admission: what a job (here, a workflow's run) asks Kueue's quota for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "Workload",
    namespaced,
    status = "WorkloadStatus"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkloadSpec {
    /// The groups of identical pods, and how many of each.
    pub pod_sets: Vec<PodSet>,
    /// The LocalQueue it is queued in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    /// Its WorkloadPriorityClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Where `priorityClassName` is looked up (`kueue.x-k8s.io/workloadpriorityclass`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_source: Option<String>,
    /// False deactivates it (Kueue evicts it and does not admit it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

/// A group of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    pub name: String,
    /// The pods' template: Kueue counts its containers' requests.
    #[schemars(schema_with = "any_object")]
    pub template: PodTemplateSpec,
    pub count: i32,
}

/// What Kueue decided, and the job's controller reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkloadStatus {
    /// `QuotaReserved`, `Admitted`, `Evicted`, `Finished`, `Requeued`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "any_list")]
    pub conditions: Vec<Condition>,
    /// The quota reserved for it: set when reserved, cleared when released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// The admission checks' states, with what each adds to the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckState>,
}

/// The quota reserved for a Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub cluster_queue: String,
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// The flavors and amounts assigned to one pod set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    pub name: String,
    /// The ResourceFlavor of each resource.
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
    /// The amounts reserved.
    #[serde(default)]
    pub resource_usage: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}

/// One admission check's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    pub name: String,
    /// `Pending`, `Ready`, `Retry` or `Rejected`.
    pub state: String,
    #[serde(default)]
    pub message: String,
    /// What the check adds to each pod set's pods once ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_set_updates: Vec<PodSetUpdate>,
}

/// What an admission check adds to a pod set's pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    pub name: String,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    #[schemars(schema_with = "any_list")]
    pub tolerations: Vec<Toleration>,
}

/// A namespace's queue, pointing at a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "LocalQueue",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct LocalQueueSpec {
    pub cluster_queue: String,
}

/// A pool of quota, by flavor and resource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterQueue",
    status = "ClusterQueueStatus"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterQueueSpec {
    #[serde(default)]
    pub resource_groups: Vec<ResourceGroup>,
}

/// Resources whose quota is given by the same flavors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    pub covered_resources: Vec<String>,
    pub flavors: Vec<FlavorQuotas>,
}

/// One flavor's quota of each resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    pub name: String,
    pub resources: Vec<ResourceQuota>,
}

/// One resource's quota.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    pub name: String,
    pub nominal_quota: Quantity,
}

/// What a ClusterQueue holds now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterQueueStatus {
    #[serde(default)]
    pub pending_workloads: i32,
    #[serde(default)]
    pub reserving_workloads: i32,
    #[serde(default)]
    pub admitted_workloads: i32,
    /// The quota in use, by flavor and resource.
    #[serde(default)]
    pub flavors_usage: Vec<FlavorUsage>,
}

/// One flavor's use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    pub name: String,
    pub resources: Vec<ResourceUsage>,
}

/// One resource's use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    pub name: String,
    pub total: Quantity,
}

/// A kind of node: the labels and tolerations a pod admitted to it gets.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(group = "kueue.x-k8s.io", version = "v1beta1", kind = "ResourceFlavor")]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ResourceFlavorSpec {
    /// Labels of the flavor's nodes: the admitted pods' node selector.
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    /// Tolerations the admitted pods get.
    #[serde(default)]
    #[schemars(schema_with = "any_list")]
    pub tolerations: Vec<Toleration>,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn any_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// The CRDs of the four kinds, for an embedded control plane standing in for Kueue
/// (`dev --kueue`, the tests); a real cluster has Kueue's own.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    vec![
        Workload::crd(),
        LocalQueue::crd(),
        ClusterQueue::crd(),
        ResourceFlavor::crd(),
    ]
}
