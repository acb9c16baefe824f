//! [`JobSummary`]: what the operator keeps in memory of each of its Jobs.
//!
//! The operator mirrors every Job of every workflow it sees, finished ones included, so the
//! size of one mirrored Job is most of its memory. A `k8s_openapi` `Job` is 2.8 KB before any
//! of its strings, because its pod template (a `PodSpec` of some fifty optional fields) is held
//! inline, and its label and annotation maps cost a B-tree node each. A `JobSummary` is the
//! same API object read with only what the planner needs: the watch deserialises straight into
//! it (serde skips what it does not name), so a pod template is never held at all. It is a
//! `batch/v1` `Job` to kube: `Api<JobSummary>` lists and watches `jobs`.
//!
//! Kept: name, namespace, uid, resourceVersion, creation and deletion timestamps, owner
//! references; the step and timed-out annotations and the run label as plain fields; `activeDeadlineSeconds` and
//! `suspend`; the status with only the conditions that hold and end a Job (`Complete`,
//! `Failed`). Whoever needs anything else (e.g. relabelling, which compares all labels) reads
//! the Job from the API.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::jobs::{ANNOTATION_STEP, ANNOTATION_TIMED_OUT, LABEL_RUN};

/// A Job as the planner reads it; see the module documentation for what is kept.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(from = "JobOnTheWire", into = "JobOnTheWire")]
pub struct JobSummary {
    /// Name, namespace, uid, resourceVersion, timestamps and owner references only.
    pub metadata: ObjectMeta,
    /// The exact step name (annotation `workflow.crd.com/step`).
    pub step: Option<String>,
    /// The run id (label `workflow.crd.com/run`).
    pub run: Option<String>,
    /// Why the operator timed the Job out (annotation `workflow.crd.com/timed-out`).
    pub timed_out: Option<String>,
    /// The part of `spec` the planner reads.
    pub spec: Option<JobSummarySpec>,
    /// The Job's status, with only the conditions that hold and end the Job.
    pub status: Option<JobStatus>,
}

/// The fields of a Job's `spec` the planner reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummarySpec {
    /// `spec.activeDeadlineSeconds`: the step's timeout as the Job controller enforces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// `spec.suspend`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// The JSON shape of a Job, limited to the fields a [`JobSummary`] is made from.
#[derive(Clone, Deserialize, Serialize)]
struct JobOnTheWire {
    metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<JobSummarySpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<JobStatus>,
}

impl From<JobOnTheWire> for JobSummary {
    fn from(wire: JobOnTheWire) -> Self {
        let JobOnTheWire {
            metadata,
            spec,
            mut status,
        } = wire;
        let mut annotations = metadata.annotations.unwrap_or_default();
        let step = annotations.remove(ANNOTATION_STEP);
        let timed_out = annotations.remove(ANNOTATION_TIMED_OUT);
        let run = metadata.labels.and_then(|mut l| l.remove(LABEL_RUN));
        if let Some(status) = status.as_mut() {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| {
                    c.status == "True" && matches!(c.type_.as_str(), "Complete" | "Failed")
                });
            }
            status.uncounted_terminated_pods = None;
        }
        Self {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                owner_references: metadata.owner_references,
                ..ObjectMeta::default()
            },
            step,
            run,
            timed_out,
            spec,
            status,
        }
    }
}

impl From<JobSummary> for JobOnTheWire {
    fn from(summary: JobSummary) -> Self {
        let mut metadata = summary.metadata;
        let annotations: BTreeMap<String, String> = [
            (ANNOTATION_STEP, summary.step),
            (ANNOTATION_TIMED_OUT, summary.timed_out),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect();
        metadata.annotations = (!annotations.is_empty()).then_some(annotations);
        metadata.labels = summary
            .run
            .map(|run| BTreeMap::from([(LABEL_RUN.to_string(), run)]));
        Self {
            metadata,
            spec: summary.spec,
            status: summary.status,
        }
    }
}

impl From<Job> for JobSummary {
    fn from(job: Job) -> Self {
        JobOnTheWire {
            metadata: job.metadata,
            spec: job.spec.map(|spec| JobSummarySpec {
                active_deadline_seconds: spec.active_deadline_seconds,
                suspend: spec.suspend,
            }),
            status: job.status,
        }
        .into()
    }
}

impl kube::Resource for JobSummary {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Job")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("batch")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("batch/v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("jobs")
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

    use k8s_openapi::api::batch::v1::JobCondition;
    use kube::Resource;

    use crate::workflow::WorkFlow;
    use crate::workflow::jobs::build_job;

    #[test]
    fn reads_a_job_as_the_api_sends_it_and_converts_a_job_alike() {
        let workflow = WorkFlow::test("wf").step("a", &[]).build();
        let mut job = build_job(&workflow, &workflow.spec.containers[0], "r1").unwrap();
        job.status = Some(JobStatus {
            conditions: Some(vec![
                condition("SuccessCriteriaMet", "True"),
                condition("Complete", "True"),
                condition("Failed", "False"),
            ]),
            ..JobStatus::default()
        });
        let from_wire: JobSummary =
            serde_json::from_value(serde_json::to_value(&job).unwrap()).unwrap();
        assert_eq!(from_wire, JobSummary::from(job.clone()));
        assert_eq!(from_wire.metadata.name, job.metadata.name);
        assert_eq!(
            from_wire.metadata.owner_references,
            job.metadata.owner_references
        );
        assert_eq!(
            (from_wire.step.as_deref(), from_wire.run.as_deref()),
            (Some("a"), Some("r1"))
        );
        assert_eq!(
            from_wire.spec.as_ref().unwrap().active_deadline_seconds,
            job.spec.unwrap().active_deadline_seconds
        );
        let kept: Vec<_> = from_wire
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(kept, ["Complete"]);
        let again: JobSummary =
            serde_json::from_value(serde_json::to_value(&from_wire).unwrap()).unwrap();
        assert_eq!(again, from_wire, "what is serialised reads back the same");
    }

    fn condition(type_: &str, status: &str) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: status.into(),
            ..JobCondition::default()
        }
    }

    #[test]
    fn is_served_as_batch_v1_jobs_and_is_a_fraction_of_a_job() {
        assert_eq!(
            JobSummary::url_path(&(), Some("ns")),
            Job::url_path(&(), Some("ns"))
        );
        assert_eq!(JobSummary::api_version(&()), "batch/v1");
        assert!(std::mem::size_of::<JobSummary>() * 4 < std::mem::size_of::<Job>());
    }
}
