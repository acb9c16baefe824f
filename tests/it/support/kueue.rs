//! Kueue's part in the tests of `queueScope: Workflow` and `managedBy`, played on the embedded
//! control plane ([`KueueStandIn`]): Kueue's kinds installed, Workloads admitted by nominal
//! quota (the product's stand-in, `workflow_operator::kueue_standin`, one round at a time while
//! not held), and what the stand-in of `dev --kueue` does not play:
//! - an eviction, as Kueue's preemption writes it: `Evicted` and `Preempted` true, reason
//!   `Preempted`, the admission kept until the job's controller clears it
//!   (kubernetes-sigs/kueue `pkg/workload/workload.go`, `SetEvictedCondition`,
//!   `SetPreemptedCondition`);
//! - MultiKueue's generic adapter for a kind listed in `multiKueue.externalFrameworks`
//!   ([`KueueStandIn::dispatch`]): the Workload copied to the worker before the job, the job
//!   copied with its spec, labels and annotations only, `spec.managedBy` removed and the labels
//!   `kueue.x-k8s.io/prebuilt-workload-name` and `kueue.x-k8s.io/multikueue-origin` added,
//!   then the worker's status copied back whole onto the manager's object's status
//!   (`pkg/controller/admissionchecks/multikueue/externalframeworks/adapter.go`: `SyncJob`,
//!   `cloneUnstructuredForCreation`, `removeManagedByField`, `copyStatusFromRemote`), and the
//!   manager's Workload finished when the worker's is (MultiKueue's workload controller).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;
use workflow_operator::controllers::workflow::operator as workflow_operator_mod;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::kueue::api::{
    ClusterQueue, ClusterQueueSpec, FlavorQuotas, LocalQueue, LocalQueueSpec, ResourceFlavor,
    ResourceFlavorSpec, ResourceGroup, ResourceQuota, Workload,
};
use workflow_operator_core::kueue::workload::{
    self, LABEL_MULTIKUEUE_ORIGIN, LABEL_PREBUILT_WORKLOAD, condition_now, merge_conditions,
};

use super::{DEADLINE, retrying, wait_list};

/// The flavor every queue of the tests gives quota in: its nodes are the embedded control
/// plane's one node (by a label that node has), and its admitted pods get a toleration.
pub const FLAVOR: &str = "default-flavor";
/// The node label [`FLAVOR`]'s pods are sent to.
pub const FLAVOR_LABEL: (&str, &str) = ("kubernetes.io/os", "linux");
/// The toleration [`FLAVOR`] adds.
pub const FLAVOR_TOLERATION: &str = "kueue-test-flavor";

/// Kueue, as the tests play it, on one control plane.
pub struct KueueStandIn {
    client: Client,
    held: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Drop for KueueStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KueueStandIn {
    /// Installs Kueue's kinds on the control plane of `client` and starts admitting.
    pub async fn start(client: Client) -> KueueStandIn {
        let crds = workflow_operator_core::kueue::api::crds();
        workflow_operator_mod::install_crds(&client, &crds)
            .await
            .expect("Kueue's CRDs install");
        let held = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (client, held) = (client.clone(), held.clone());
            async move {
                loop {
                    if !held.load(Ordering::SeqCst)
                        && let Err(error) =
                            workflow_operator::kueue_standin::admit_round(&client).await
                    {
                        tracing::warn!(%error, "kueue stand-in round failed");
                    }
                    tokio::time::sleep(workflow_operator::kueue_standin::ADMIT_EVERY).await;
                }
            }
        });
        KueueStandIn { client, held, task }
    }

    /// Stops admitting (a full cluster) until [`KueueStandIn::release`].
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Admits again.
    pub fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }

    /// A ResourceFlavor [`FLAVOR`], a ClusterQueue `cluster_queue` with `cpu` of it, and a
    /// LocalQueue `local` pointing at it in `namespace`.
    pub async fn queues(&self, namespace: &str, local: &str, cluster_queue: &str, cpu: &str) {
        let flavor = ResourceFlavor {
            metadata: ObjectMeta {
                name: Some(FLAVOR.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceFlavorSpec {
                node_labels: BTreeMap::from([(FLAVOR_LABEL.0.into(), FLAVOR_LABEL.1.into())]),
                tolerations: vec![k8s_openapi::api::core::v1::Toleration {
                    key: Some(FLAVOR_TOLERATION.into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }],
            },
        };
        create_or_keep(&Api::all(self.client.clone()), &flavor).await;
        let queue = ClusterQueue {
            metadata: ObjectMeta {
                name: Some(cluster_queue.into()),
                ..ObjectMeta::default()
            },
            spec: ClusterQueueSpec {
                resource_groups: vec![ResourceGroup {
                    covered_resources: vec!["cpu".into()],
                    flavors: vec![FlavorQuotas {
                        name: FLAVOR.into(),
                        resources: vec![ResourceQuota {
                            name: "cpu".into(),
                            nominal_quota: Quantity(cpu.into()),
                        }],
                    }],
                }],
            },
            status: None,
        };
        create_or_keep(&Api::all(self.client.clone()), &queue).await;
        let local = LocalQueue {
            metadata: ObjectMeta {
                name: Some(local.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            spec: LocalQueueSpec {
                cluster_queue: cluster_queue.into(),
            },
        };
        create_or_keep(&Api::namespaced(self.client.clone(), namespace), &local).await;
    }

    /// Waits until the Workload of `workflow` in `namespace` (by its label) satisfies `cond`.
    pub async fn wait_workload(
        &self,
        namespace: &str,
        workflow: &str,
        what: &str,
        cond: impl Fn(&Workload) -> bool,
    ) -> Workload {
        let api: Api<Workload> = Api::namespaced(self.client.clone(), namespace);
        let selector = workflow_operator_core::jobs::selector(workflow);
        let found = wait_list(
            &api,
            kube::runtime::watcher::Config::default().labels(&selector),
            &format!("the workload of {workflow}: {what}"),
            DEADLINE,
            |list| list.iter().any(|w| cond(w)),
        )
        .await;
        found
            .into_iter()
            .find(|w| cond(w))
            .map(|w| (*w).clone())
            .expect("found")
    }

    /// Every Workload of `namespace`.
    pub async fn workloads(&self, namespace: &str) -> Vec<Workload> {
        let api: Api<Workload> = Api::namespaced(self.client.clone(), namespace);
        let params = kube::api::ListParams::default();
        retrying("listing workloads", || api.list(&params))
            .await
            .items
    }

    /// The ClusterQueue `name` now.
    pub async fn cluster_queue(&self, name: &str) -> ClusterQueue {
        let api: Api<ClusterQueue> = Api::all(self.client.clone());
        retrying("reading the cluster queue", || api.get(name)).await
    }

    /// Evicts `workload` as Kueue's preemption does.
    pub async fn evict(&self, namespace: &str, workload: &Workload) {
        let now = Time(Timestamp::now());
        let why = "Preempted to accommodate a workload (the tests' Kueue stand-in)";
        let conditions = merge_conditions(
            workload.status.clone().unwrap_or_default().conditions,
            [
                condition_now("Evicted", true, "Preempted", why, now.clone()),
                condition_now("Preempted", true, "InClusterQueue", why, now),
            ],
        );
        let api: Api<Workload> = Api::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({"status": {"conditions": conditions}});
        api.patch_status(
            &workload.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("evicting the workload");
    }

    /// MultiKueue's dispatch of `name` in `namespace`, once its Workload on this (the manager's)
    /// plane is admitted: the Workload copied to `worker` (admitted there by the worker's own
    /// Kueue, `worker_kueue`), then the WorkFlow copied as the generic adapter copies a job.
    pub async fn dispatch(&self, namespace: &str, name: &str, worker: &Client) -> String {
        let admitted = self
            .wait_workload(namespace, name, "admitted on the manager", |w| {
                workload::standing(w) == workload::Standing::Admitted
            })
            .await;
        let workload_name = admitted.name_any();
        let copy = Workload {
            metadata: ObjectMeta {
                name: Some(workload_name.clone()),
                namespace: Some(namespace.into()),
                labels: admitted.metadata.labels.clone(),
                ..ObjectMeta::default()
            },
            spec: admitted.spec.clone(),
            status: None,
        };
        create_or_keep(&Api::namespaced(worker.clone(), namespace), &copy).await;
        let local: Api<WorkFlow> = Api::namespaced(self.client.clone(), namespace);
        let original = retrying("reading the manager's workflow", || local.get(name)).await;
        let mut remote = serde_json::json!({
            "apiVersion": "workflow.crd.com/v1",
            "kind": "WorkFlow",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": original.metadata.labels.clone().unwrap_or_default(),
                "annotations": original.metadata.annotations.clone().unwrap_or_default(),
            },
            "spec": serde_json::to_value(&original.spec).expect("a spec"),
        });
        remote["spec"]
            .as_object_mut()
            .expect("an object")
            .remove("managedBy");
        remote["metadata"]["labels"][LABEL_PREBUILT_WORKLOAD] = workload_name.clone().into();
        remote["metadata"]["labels"][LABEL_MULTIKUEUE_ORIGIN] = "multikueue".into();
        let remote: WorkFlow = serde_json::from_value(remote).expect("a workflow");
        create_or_keep(&Api::namespaced(worker.clone(), namespace), &remote).await;
        workload_name
    }

    /// One status sync of MultiKueue's generic adapter: the worker's WorkFlow status copied
    /// whole onto the manager's (a merge patch of the status subresource), and the manager's
    /// Workload finished once the worker's is.
    pub async fn sync_status(
        &self,
        namespace: &str,
        name: &str,
        workload_name: &str,
        worker: &Client,
    ) {
        let remote: Api<WorkFlow> = Api::namespaced(worker.clone(), namespace);
        let local: Api<WorkFlow> = Api::namespaced(self.client.clone(), namespace);
        let copied = retrying("reading the worker's workflow", || remote.get(name)).await;
        if let Some(status) = copied.status {
            let patch = serde_json::json!({"status": status});
            local
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("copying the status to the manager");
        }
        let worker_workloads: Api<Workload> = Api::namespaced(worker.clone(), namespace);
        let worker_workload = retrying("reading the worker's workload", || {
            worker_workloads.get(workload_name)
        })
        .await;
        if workload::standing(&worker_workload) == workload::Standing::Finished {
            let finished = worker_workload
                .status
                .clone()
                .unwrap_or_default()
                .conditions;
            let finished: Vec<_> = finished
                .into_iter()
                .filter(|c| c.type_ == "Finished")
                .collect();
            let api: Api<Workload> = Api::namespaced(self.client.clone(), namespace);
            let mine = retrying("reading the manager's workload", || api.get(workload_name)).await;
            let conditions = merge_conditions(mine.status.unwrap_or_default().conditions, finished);
            let patch = serde_json::json!({"status": {"conditions": conditions}});
            api.patch_status(
                workload_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .expect("finishing the manager's workload");
        }
    }
}

/// Creates `object`; one already there is kept.
async fn create_or_keep<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating {}: {e}", object.name_any()),
    }
}
