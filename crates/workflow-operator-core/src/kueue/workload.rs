//! A workflow's run as one Kueue Workload (`queueScope: Workflow`): its name, the object the
//! operator creates, and what the operator reads back from it (admitted, evicted, finished,
//! where its pods go). Pure.
//!
//! It follows what Kueue's own job integrations do (kubernetes-sigs/kueue
//! `pkg/controller/jobframework/reconciler.go`, `workload_names.go`):
//! - one Workload per job, owned by it (controller reference), named `<kind>-<name>-<hash>`
//!   within 63 characters (`ShortWorkloadNames`), labelled with its queue and priority class;
//! - the job runs only while its Workload is admitted (`QuotaReserved` and `Admitted` true);
//! - `Evicted` true: the job stops (its pods go), and once nothing of it runs the controller
//!   clears the quota reservation (`status.admission` unset, `QuotaReserved` false, `Requeued`
//!   true for a preemption) so Kueue queues it again;
//! - the job finished: the controller sets `Finished` true (reason `Succeeded` or `Failed`),
//!   which gives the quota back;
//! - the admission's flavors' node labels and tolerations (ResourceFlavor `nodeLabels`,
//!   `tolerations`) and the admission checks' `podSetUpdates` go into every pod
//!   (`podset.FromAssignment`, `RunWithPodSetsInfo`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::{Resource, ResourceExt};

use super::api::{ResourceFlavor, Workload, WorkloadSpec, WorkloadStatus};
use super::footprint::Amounts;
use crate::crd::WorkFlow;
use crate::labels::{LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, LABEL_WORKFLOW};
use crate::names;

/// `spec.managedBy` of a WorkFlow that MultiKueue dispatches (Kueue's
/// `MultiKueueControllerName`, checked by `externalframeworks/adapter.go`'s
/// `IsJobManagedByKueue`).
pub const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";

/// `spec.managedBy` naming this operator: the same as leaving it out.
pub const OPERATOR_CONTROLLER: &str = "workflow.crd.com/workflow-operator";

/// Label MultiKueue puts on the copy of a job it creates on a worker: the name of the Workload
/// it created there beforehand, which the job's controller uses instead of making one
/// (`jobframework.SetMultiKueueMeta`, `PrebuiltWorkloadNameFor`).
pub const LABEL_PREBUILT_WORKLOAD: &str = "kueue.x-k8s.io/prebuilt-workload-name";

/// Label MultiKueue puts on a worker's copy: the manager's origin name.
pub const LABEL_MULTIKUEUE_ORIGIN: &str = "kueue.x-k8s.io/multikueue-origin";

/// Where `priorityClassName` is looked up (Kueue's `WorkloadPriorityClassSource`).
pub const PRIORITY_CLASS_SOURCE: &str = "kueue.x-k8s.io/workloadpriorityclass";

/// The one pod set of a workflow's Workload.
pub const POD_SET: &str = "workflow";

/// The Workload of run `run` (retry `retry`) of the workflow named `workflow` with uid `uid`:
/// `workflow-<name>-<hash>`, a label value (Kueue's short Workload names), the hash over all
/// four so each run and retry has its own.
pub fn workload_name(workflow: &str, uid: &str, run: &str, retry: i32) -> String {
    let hash = names::hash_of(&[workflow, uid, run, &retry.to_string()]);
    let mut base = format!("workflow-{workflow}");
    base.truncate(63 - 1 - hash.len());
    let base = base.trim_end_matches(['-', '.']);
    format!("{base}-{hash}")
}

/// The name of the Workload `workflow` runs under: the prebuilt one MultiKueue names on its
/// copy, else its own for run `run`, retry `retry`.
pub fn workload_for(workflow: &WorkFlow, run: &str, retry: i32) -> String {
    if let Some(prebuilt) = workflow.labels().get(LABEL_PREBUILT_WORKLOAD) {
        return prebuilt.clone();
    }
    let uid = workflow.metadata.uid.as_deref().unwrap_or_default();
    workload_name(&workflow.name_any(), uid, run, retry)
}

/// A quantity of `resource` from milli-units: `cpu` in millicores, the rest in whole units
/// rounded up (what Kueue and the scheduler count).
pub fn quantity(resource: &str, milli: i128) -> Quantity {
    if resource == "cpu" {
        Quantity(format!("{milli}m"))
    } else {
        Quantity(format!("{}", (milli + 999).div_euclid(1000)))
    }
}

/// The Workload of `workflow`'s run `run` (retry `retry`) asking for `footprint`, owned by the
/// workflow.
///
/// # Errors
/// When the workflow has no uid or namespace yet (it was never stored).
pub fn build(workflow: &WorkFlow, run: &str, retry: i32, footprint: &Amounts) -> Option<Workload> {
    let owner = workflow.controller_owner_ref(&())?;
    let spec = &workflow.spec;
    let mut labels = BTreeMap::from([(
        LABEL_WORKFLOW.to_string(),
        names::label_value(&workflow.name_any()),
    )]);
    if let Some(queue) = &spec.queue_name {
        labels.insert(LABEL_QUEUE_NAME.into(), queue.to_string());
    }
    if let Some(class) = &spec.priority_class_name {
        labels.insert(LABEL_PRIORITY_CLASS.into(), class.to_string());
    }
    let requests: BTreeMap<String, Quantity> = footprint
        .iter()
        .map(|(resource, milli)| (resource.clone(), quantity(resource, *milli)))
        .collect();
    let container = Container {
        name: "peak".into(),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    let template = PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![container],
            ..PodSpec::default()
        }),
    };
    Some(Workload {
        metadata: ObjectMeta {
            name: Some(workload_for(workflow, run, retry)),
            namespace: workflow.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: WorkloadSpec {
            pod_sets: vec![super::api::PodSet {
                name: POD_SET.into(),
                template,
                count: 1,
            }],
            queue_name: spec.queue_name.as_deref().map(String::from),
            priority_class_source: spec
                .priority_class_name
                .as_ref()
                .map(|_| PRIORITY_CLASS_SOURCE.into()),
            priority_class_name: spec.priority_class_name.as_deref().map(String::from),
            active: None,
        },
        status: None,
    })
}

/// Where a Workload stands, for the run it admits.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Waiting for quota (or for the job's controller to clear an eviction): no pod may run.
    Pending,
    /// Admitted: the run goes on.
    Admitted,
    /// Evicted while it held quota: the run stops; once nothing of it runs, the quota
    /// reservation is cleared ([`clear_admission`]). The message says why.
    Evicted(String),
    /// Finished: its quota is given back; nothing more happens with it.
    Finished,
}

fn condition<'a>(status: &'a WorkloadStatus, kind: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == kind)
}

fn is_true(status: &WorkloadStatus, kind: &str) -> bool {
    condition(status, kind).is_some_and(|c| c.status == "True")
}

/// Where `workload` stands (Kueue's `workload.IsAdmitted`, `HasQuotaReservation`,
/// `IsEvicted`, `IsFinished`).
pub fn standing(workload: &Workload) -> Standing {
    let Some(status) = &workload.status else {
        return Standing::Pending;
    };
    if is_true(status, "Finished") {
        return Standing::Finished;
    }
    let reserved = status.admission.is_some() && is_true(status, "QuotaReserved");
    if is_true(status, "Evicted") {
        return match reserved {
            true => Standing::Evicted(
                condition(status, "Evicted")
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            ),
            false => Standing::Pending,
        };
    }
    if reserved && is_true(status, "Admitted") {
        Standing::Admitted
    } else {
        Standing::Pending
    }
}

/// A condition to merge into a Workload's status.
pub fn condition_now(
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Time,
) -> Condition {
    Condition {
        type_: kind.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now,
        observed_generation: None,
    }
}

/// The status patch (a JSON merge patch, so what this project does not model is kept) that
/// clears an evicted Workload's quota reservation once nothing of its run runs, as the job
/// framework does (`UnsetQuotaReservationWithCondition`, `SetRequeuedCondition`).
pub fn clear_admission(workload: &Workload, now: Time) -> serde_json::Value {
    let status = workload.status.clone().unwrap_or_default();
    let evicted = condition(&status, "Evicted").cloned();
    let message = evicted
        .as_ref()
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let requeue = evicted
        .as_ref()
        .is_some_and(|c| c.reason == "Preempted" || c.reason == "NodeFailures");
    let conditions = merge_conditions(
        status.conditions,
        [
            condition_now("QuotaReserved", false, "Pending", &message, now.clone()),
            condition_now(
                "Admitted",
                false,
                "NoReservation",
                "The workload has no reservation",
                now.clone(),
            ),
            condition_now(
                "Requeued",
                requeue,
                evicted.map(|c| c.reason).as_deref().unwrap_or("Pending"),
                &message,
                now,
            ),
        ],
    );
    serde_json::json!({"status": {"admission": null, "conditions": conditions}})
}

/// The status patch marking a Workload finished (`workloadfinish.Finish`): its quota is given
/// back.
pub fn finish(workload: &Workload, succeeded: bool, message: &str, now: Time) -> serde_json::Value {
    let status = workload.status.clone().unwrap_or_default();
    let reason = if succeeded { "Succeeded" } else { "Failed" };
    let conditions = merge_conditions(
        status.conditions,
        [condition_now("Finished", true, reason, message, now)],
    );
    serde_json::json!({"status": {"conditions": conditions}})
}

/// `conditions` with each of `new` replacing the one of its type (its transition time kept
/// when its status did not change, as `meta.SetStatusCondition` does).
pub fn merge_conditions(
    mut conditions: Vec<Condition>,
    new: impl IntoIterator<Item = Condition>,
) -> Vec<Condition> {
    for mut c in new {
        match conditions.iter_mut().find(|old| old.type_ == c.type_) {
            Some(old) => {
                if old.status == c.status {
                    c.last_transition_time = old.last_transition_time.clone();
                }
                *old = c;
            }
            None => conditions.push(c),
        }
    }
    conditions
}

/// Where an admitted Workload's pods go: the node labels and tolerations of the flavors it was
/// admitted to, and what its admission checks add.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

// A toleration is strings and an integer: its equality is total (k8s-openapi derives only
// `PartialEq`), and the planner's gate, which holds a placement, is `Eq`.
impl Eq for Placement {}

impl Placement {
    /// The placement of `workload`'s admission, its flavors looked up in `flavors` (a flavor
    /// not found adds nothing).
    pub fn of(workload: &Workload, flavors: &[ResourceFlavor]) -> Placement {
        let mut placement = Placement::default();
        let Some(status) = &workload.status else {
            return placement;
        };
        let assigned = status.admission.iter().flat_map(|a| &a.pod_set_assignments);
        for name in assigned.flat_map(|a| a.flavors.values()) {
            if let Some(flavor) = flavors.iter().find(|f| f.name_any() == *name) {
                placement.add(&flavor.spec.node_labels, &flavor.spec.tolerations);
            }
        }
        for update in status
            .admission_checks
            .iter()
            .flat_map(|c| &c.pod_set_updates)
        {
            placement.add(&update.node_selector, &update.tolerations);
        }
        placement
    }

    fn add(&mut self, labels: &BTreeMap<String, String>, tolerations: &[Toleration]) {
        self.node_selector
            .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        for toleration in tolerations {
            if !self.tolerations.contains(toleration) {
                self.tolerations.push(toleration.clone());
            }
        }
    }

    /// Adds the placement to a step's pod: the admission's node labels over the step's own
    /// selector (Kueue's admission decides where the quota is), its tolerations beside the
    /// step's.
    pub fn apply_to(&self, pod: &mut PodSpec) {
        if !self.node_selector.is_empty() {
            let selector = pod.node_selector.get_or_insert_with(BTreeMap::new);
            selector.extend(
                self.node_selector
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        if !self.tolerations.is_empty() {
            let tolerations = pod.tolerations.get_or_insert_with(Vec::new);
            for toleration in &self.tolerations {
                if !tolerations.contains(toleration) {
                    tolerations.push(toleration.clone());
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
