//! [`RunSummary`]: what the CronWorkFlow controller keeps in memory of each run it started.
//!
//! The controller mirrors every run of every CronWorkFlow (a watch of the WorkFlows with the
//! cron label), so one mirrored run is most of that memory: a whole `WorkFlow` holds its
//! spec (steps, templates, parameters) and status (every step's state) though a tick reads
//! only the run's name, owner, scheduled time, phase and whether it was asked to terminate.
//! A `RunSummary` is the same API object read with only those: the watch deserialises
//! straight into it (serde skips what it does not name). It is a `workflow.crd.com/v1`
//! `WorkFlow` to kube: `Api<RunSummary>` lists and watches `workflows`.
//!
//! Kept: name, namespace, uid, resourceVersion and owner references; the scheduled-time label
//! as a number; `spec.shutdown: Terminate` as a flag; `status.workflow-status` and
//! `status.status-changed`. Serialised, a `RunSummary` is a WorkFlow with just those fields.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::plan::Run;
use crate::WorkFlow;
use crate::crd::Shutdown;
use crate::labels::LABEL_SCHEDULED;
use crate::lifecycle::Phase;

/// A run of a CronWorkFlow as a tick reads it; see the module documentation for what is kept.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(from = "RunOnTheWire", into = "RunOnTheWire")]
pub struct RunSummary {
    /// Name, namespace, uid, resourceVersion and owner references only.
    pub metadata: ObjectMeta,
    /// The scheduled time it was started for (label `workflow.crd.com/scheduled-time`), unix
    /// seconds; `None` when the label is missing or not a number.
    pub scheduled: Option<i64>,
    /// `status.workflow-status`.
    pub phase: Option<Phase>,
    /// `status.status-changed`, when it is a time.
    pub phase_changed: Option<Timestamp>,
    /// `spec.shutdown` is `Terminate`.
    pub terminating: bool,
}

impl RunSummary {
    /// The run as the tick planner takes it; `None` without a scheduled time (not a run the
    /// controller made).
    pub fn run(&self) -> Option<Run> {
        Some(Run {
            name: self.metadata.name.clone().unwrap_or_default(),
            uid: self.metadata.uid.clone(),
            scheduled: self.scheduled?,
            phase: self.phase,
            finished_at: self.phase_changed,
            terminating: self.terminating,
        })
    }
}

/// The JSON shape of a WorkFlow, limited to the fields a [`RunSummary`] is made from.
#[derive(Deserialize, Serialize)]
struct RunOnTheWire {
    metadata: MetaOnTheWire,
    #[serde(default)]
    spec: SpecOnTheWire,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<StatusOnTheWire>,
}

/// A WorkFlow's metadata, limited to what is kept (and the labels, for the scheduled time).
#[derive(Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct MetaOnTheWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Default, Deserialize, Serialize)]
struct SpecOnTheWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shutdown: Option<Shutdown>,
}

#[derive(Default, Deserialize, Serialize)]
struct StatusOnTheWire {
    #[serde(
        rename = "workflow-status",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    phase: Option<Phase>,
    #[serde(
        rename = "status-changed",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    changed: Option<String>,
}

impl From<RunOnTheWire> for RunSummary {
    fn from(wire: RunOnTheWire) -> Self {
        let RunOnTheWire {
            metadata,
            spec,
            status,
        } = wire;
        let scheduled = metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(LABEL_SCHEDULED))
            .and_then(|t| t.parse().ok());
        let status = status.unwrap_or_default();
        // Read into a Vec grown for four; a run has one owner.
        let owner_references = metadata.owner_references.map(|mut owners| {
            owners.shrink_to_fit();
            owners
        });
        Self {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                owner_references,
                ..ObjectMeta::default()
            },
            scheduled,
            phase: status.phase,
            phase_changed: status.changed.and_then(|t| t.parse().ok()),
            terminating: spec.shutdown == Some(Shutdown::Terminate),
        }
    }
}

impl From<RunSummary> for RunOnTheWire {
    fn from(summary: RunSummary) -> Self {
        let meta = summary.metadata;
        let labels = summary
            .scheduled
            .map(|t| BTreeMap::from([(LABEL_SCHEDULED.to_string(), t.to_string())]));
        let status = StatusOnTheWire {
            phase: summary.phase,
            changed: summary.phase_changed.map(|t| t.to_string()),
        };
        Self {
            metadata: MetaOnTheWire {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                labels,
                owner_references: meta.owner_references,
            },
            spec: SpecOnTheWire {
                shutdown: summary.terminating.then_some(Shutdown::Terminate),
            },
            status: (status.phase.is_some() || status.changed.is_some()).then_some(status),
        }
    }
}

impl kube::Resource for RunSummary {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        WorkFlow::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        WorkFlow::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        WorkFlow::version(&())
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        WorkFlow::api_version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        WorkFlow::plural(&())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use kube::Resource;

    use crate::WorkFlowStatus;
    use crate::crd::CronWorkFlow;
    use crate::cron::run_of;

    fn cron() -> CronWorkFlow {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "workflow.crd.com/v1",
            "kind": "CronWorkFlow",
            "metadata": {"name": "nightly", "namespace": "ns", "uid": "cron-uid"},
            "spec": {
                "schedules": ["@every 60s"],
                "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox"}]}
            }
        }))
        .unwrap()
    }

    /// The WorkFlow as the API server sends it, read as a summary.
    fn read(workflow: &WorkFlow) -> RunSummary {
        serde_json::from_value(serde_json::to_value(workflow).unwrap()).unwrap()
    }

    #[test]
    fn reads_a_run_as_the_api_sends_it_into_what_the_planner_takes() {
        let mut workflow = run_of(&cron(), 1_800_000_000).unwrap();
        workflow.metadata.uid = Some("run-uid".into());
        workflow.spec.shutdown = Some(Shutdown::Terminate);
        workflow.status = Some(WorkFlowStatus {
            workflow_status: Some(Phase::Completed),
            status_changed: Some("2027-01-15T08:00:05Z".into()),
            ..WorkFlowStatus::default()
        });
        let summary = read(&workflow);
        assert_eq!(
            summary.metadata.owner_references,
            workflow.metadata.owner_references
        );
        assert_eq!(summary.metadata.labels, None, "the labels are not kept");
        assert_eq!(
            summary.run(),
            Some(Run {
                name: workflow.metadata.name.clone().unwrap(),
                uid: Some("run-uid".into()),
                scheduled: 1_800_000_000,
                phase: Some(Phase::Completed),
                finished_at: Some("2027-01-15T08:00:05Z".parse().unwrap()),
                terminating: true,
            })
        );
        let as_json = serde_json::to_value(&summary).unwrap();
        let back: RunSummary = serde_json::from_value(as_json).unwrap();
        assert_eq!(back, summary, "what is serialised reads back the same");
    }

    #[test]
    fn a_new_run_has_no_phase_and_a_workflow_without_the_time_is_no_run() {
        let mut workflow = run_of(&cron(), 1_800_000_000).unwrap();
        let summary = read(&workflow);
        let run = summary.run().unwrap();
        assert_eq!(
            (run.phase, run.finished_at, run.terminating),
            (None, None, false)
        );
        workflow
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_SCHEDULED.into(), "soon".into());
        assert_eq!(read(&workflow).run(), None);
    }

    #[test]
    fn is_served_as_workflows() {
        assert_eq!(
            RunSummary::url_path(&(), Some("ns")),
            WorkFlow::url_path(&(), Some("ns"))
        );
        assert_eq!(RunSummary::api_version(&()), "workflow.crd.com/v1");
    }
}
