//! The scheduler: places each new pod on the devcluster's one Node
//! ([`crate::kubelet::node`]) as kube-scheduler's default profile would, or leaves it `Pending`
//! saying why.
//!
//! A pod that names no node, asks for `default-scheduler` (or no scheduler) and has no
//! scheduling gates goes through VolumeBinding's PreFilter (every claim it mounts exists, is not
//! being deleted and is bound: [`bound_claim`]) and the Filter plugins that can reject a Node
//! here ([`filters`]: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit against
//! what the pods already bound to the Node request). When the Node takes it, the pod is bound: one
//! write sets `spec.nodeName` and the `PodScheduled` condition, as the binding subresource does
//! (no `Scheduled` Event is written, so that the binding is the only write a pod's placing
//! costs). When it does not, the
//! pod gets `PodScheduled` False, reason `Unschedulable`, with the scheduler's message
//! (pkg/scheduler/schedule_one.go, `handleSchedulingFailure`) and a `FailedScheduling` Warning
//! from `default-scheduler`; it is tried again whenever the Node changes (a label added, a taint
//! removed, uncordoned), a claim changes, or a pod bound to it finishes or goes, as the
//! scheduling queue moves unschedulable pods back on those cluster events. A try that fails as
//! the last one did writes nothing.
//!
//! Not done here: host ports (NodePorts), volume limits and zones, pod (anti-)affinity and
//! topology spread constraints (one Node satisfies or defeats them trivially), priority and
//! preemption (no pod is ever evicted to make room).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::resources::{Registry, ResourceInfo, builtin};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{EventType, Store, StoredObject, Target, WatchEvent, now_rfc3339};
use filters::{Rejection, Used};
use resources::{Amounts, pod_requests};

pub(crate) mod filters;
pub(crate) mod resources;

/// The name pods ask for to be placed by this scheduler.
const SCHEDULER_NAME: &str = "default-scheduler";

/// (namespace, name) of a pod.
type PodKey = (String, String);

/// The scheduler's reconciler.
pub(crate) struct Scheduler {
    store: Store,
    pods: Arc<ResourceInfo>,
    nodes: Arc<ResourceInfo>,
    claims: Arc<ResourceInfo>,
    node_name: String,
    events: Recorder,
    /// The requests of each pod bound to the Node and not finished, by uid.
    bound: HashMap<String, Amounts>,
    /// The pods the Node could not take, tried again when it changes or room is freed.
    waiting: BTreeSet<PodKey>,
}

impl Scheduler {
    pub fn new(store: Store, registry: Registry, node_name: String) -> Self {
        Self {
            pods: builtin(&registry, "", "pods"),
            nodes: builtin(&registry, "", "nodes"),
            claims: builtin(&registry, "", "persistentvolumeclaims"),
            events: Recorder::new(store.clone(), registry, SCHEDULER_NAME),
            store,
            node_name,
            bound: HashMap::new(),
            waiting: BTreeSet::new(),
        }
    }

    fn retry_waiting(&self, queue: &mut Queue<PodKey>) {
        for key in &self.waiting {
            queue.add(key.clone());
        }
    }

    /// VolumeBinding's PreFilter: every claim the pod mounts is bound.
    fn claims_bound(&self, pod: &StoredObject) -> Result<(), String> {
        let volumes = pod
            .value
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for volume in volumes {
            if let Some(claim) = volume
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
            {
                bound_claim(&self.store, &self.claims, pod.namespace(), claim)?;
            }
        }
        Ok(())
    }

    /// Records a pod's change; true when it freed room on the Node.
    fn track(&mut self, pod: &StoredObject, deleted: bool) -> bool {
        let on_node = !deleted && node_name(&pod.value) == self.node_name && !finished(&pod.value);
        if !on_node {
            return self.bound.remove(pod.uid()).is_some();
        }
        if !self.bound.contains_key(pod.uid()) {
            self.bound
                .insert(pod.uid().to_string(), pod_requests(&pod.value));
        }
        false
    }

    fn used(&self) -> Used {
        let mut used = Used {
            pods: i64::try_from(self.bound.len()).unwrap_or(i64::MAX),
            ..Used::default()
        };
        for requests in self.bound.values() {
            for (resource, value) in requests {
                *used.requests.entry(resource.clone()).or_default() += value;
            }
        }
        used
    }

    /// Binds the pod to the Node: `spec.nodeName` and `PodScheduled` True in one write.
    fn bind(&mut self, pod: &StoredObject) {
        let uid = pod.uid().to_string();
        let node = self.node_name.clone();
        let written = self.store.modify(
            &self.pods,
            pod.namespace(),
            pod.name(),
            Target::Binding,
            |old, _| {
                if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str())
                    || !needs_scheduling(old)
                {
                    // pkg/registry/core/pod/storage/storage.go, `setPodNodeNameAndAnnotations`.
                    return Err(ApiError::conflict(
                        "pods",
                        pod.name(),
                        "pod is being deleted or already assigned",
                    ));
                }
                let mut new = old.clone();
                new["spec"]["nodeName"] = json!(node);
                set_scheduled(&mut new, json!({"type": "PodScheduled", "status": "True"}));
                Ok(new)
            },
        );
        if let Ok(bound) = written {
            self.bound
                .insert(bound.uid().to_string(), pod_requests(&bound.value));
        }
    }

    /// Leaves the pod unscheduled, saying why, unless it already says so.
    fn reject(&mut self, pod: &StoredObject, message: &str) {
        let said = scheduled_condition(&pod.value).is_some_and(|c| {
            c.get("status").and_then(Value::as_str) == Some("False")
                && c.get("message").and_then(Value::as_str) == Some(message)
        });
        if said {
            return;
        }
        let uid = pod.uid().to_string();
        let written = self.store.modify(
            &self.pods,
            pod.namespace(),
            pod.name(),
            Target::Status,
            |old, _| {
                if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                    return Err(ApiError::not_found("pods", &uid));
                }
                let mut new = old.clone();
                set_scheduled(
                    &mut new,
                    json!({
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                    }),
                );
                Ok(new)
            },
        );
        if written.is_ok() {
            self.events.warn(pod, "FailedScheduling", message);
        }
    }
}

impl Reconciler for Scheduler {
    type Key = PodKey;

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<PodKey>) {
        if event.gr == self.nodes.group_resource() {
            if event.object.name() == self.node_name {
                self.retry_waiting(queue);
            }
            return;
        }
        if event.gr == self.claims.group_resource() {
            self.retry_waiting(queue);
            return;
        }
        if event.gr != self.pods.group_resource() {
            return;
        }
        let pod = &event.object;
        let deleted = event.event_type == EventType::Deleted;
        let key = (pod.namespace().to_string(), pod.name().to_string());
        if self.track(pod, deleted) {
            self.retry_waiting(queue);
        }
        if deleted {
            self.waiting.remove(&key);
        } else if needs_scheduling(&pod.value) {
            queue.add(key);
        }
    }

    fn resync(&mut self, queue: &mut Queue<PodKey>) {
        let (pods, _) = self.store.list(&self.pods.group_resource(), None);
        self.bound.clear();
        for pod in &pods {
            self.track(pod, false);
            if needs_scheduling(&pod.value) {
                queue.add((pod.namespace().to_string(), pod.name().to_string()));
            }
        }
    }

    fn reconcile(&mut self, key: PodKey, _queue: &mut Queue<PodKey>) {
        let pod = match self.store.get(&self.pods, &key.0, &key.1) {
            Ok(pod) if needs_scheduling(&pod.value) => pod,
            _ => {
                self.waiting.remove(&key);
                return;
            }
        };
        let outcome = match self.store.get(&self.nodes, "", &self.node_name) {
            // pkg/scheduler/schedule_one.go, `ErrNoNodesAvailable`.
            Err(_) => Err("no nodes available to schedule pods".to_string()),
            Ok(node) => self
                .claims_bound(&pod)
                .map_err(|why| filters::pre_filter_error(&why))
                .and_then(|()| {
                    filters::filter(&pod.value, &node.value, &self.used())
                        .map_err(|rejection: Rejection| filters::fit_error(&rejection))
                }),
        };
        match outcome {
            Ok(()) => {
                self.waiting.remove(&key);
                self.bind(&pod);
            }
            Err(message) => {
                self.waiting.insert(key);
                self.reject(&pod, &message);
            }
        }
    }
}

/// A claim a pod mounts, when it is bound; else the VolumeBinding plugin's reason
/// (pkg/scheduler/framework/plugins/volumebinding/volume_binding.go, `PreFilter`, and
/// binder.go, `GetPodVolumeClaims`: a missing claim, one being deleted, an unbound one).
pub(crate) fn bound_claim(
    store: &Store,
    claims: &ResourceInfo,
    namespace: &str,
    name: &str,
) -> Result<Arc<StoredObject>, String> {
    let Ok(claim) = store.get(claims, namespace, name) else {
        return Err(format!("persistentvolumeclaim \"{name}\" not found"));
    };
    if is_deleting(&claim.value) {
        return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
    }
    if claim.value.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err("pod has unbound immediate PersistentVolumeClaims".into());
    }
    Ok(claim)
}

/// Whether the pod is this scheduler's to place now.
fn needs_scheduling(pod: &Value) -> bool {
    let scheduler = pod
        .pointer("/spec/schedulerName")
        .and_then(Value::as_str)
        .unwrap_or(SCHEDULER_NAME);
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty());
    node_name(pod).is_empty()
        && scheduler == SCHEDULER_NAME
        && !gated
        && !finished(pod)
        && !is_deleting(pod)
}

/// The node a pod is bound to (empty: none).
pub(crate) fn node_name(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn finished(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn scheduled_condition(pod: &Value) -> Option<&Value> {
    pod.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
}

/// Sets the pod's `PodScheduled` condition, in place of the one before
/// (pkg/api/v1/pod/util.go, `UpdatePodCondition`: the transition time is now).
fn set_scheduled(pod: &mut Value, mut condition: Value) {
    condition["lastProbeTime"] = Value::Null;
    condition["lastTransitionTime"] = json!(now_rfc3339());
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({"phase": "Pending"});
    }
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
    list.push(condition);
}
