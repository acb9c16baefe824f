//! [`JobSummary`]: what the operator keeps in memory of each of its Jobs.
//!
//! The operator mirrors every Job of every workflow it sees, finished ones included, so the
//! size of one mirrored Job is most of its memory. A `k8s_openapi` `Job` is 2.8 KB before any
//! of its strings, because its pod template (a `PodSpec` of some fifty optional fields) is held
//! inline, and its label and annotation maps cost a B-tree node each. Its `JobStatus` alone is
//! ~300 bytes inline, and its conditions (a finished Job has two or three, each with up to four
//! strings) another ~600 bytes once read. A `JobSummary` is the same API object read with only
//! what the operator reads: the watch deserialises straight into it (serde skips what it does
//! not name), so a pod template or a condition's strings are never kept. It is a `batch/v1`
//! `Job` to kube: `Api<JobSummary>` lists and watches `jobs`.
//!
//! Kept: name, namespace, uid, resourceVersion, creation and deletion timestamps, owner
//! references; the step, timed-out, cannot-start and stopped annotations daemoned and the run, retry, run-index
//! and item labels as plain fields, and whether the pods-deleted annotation is there; `activeDeadlineSeconds` and `suspend`; of the status, `startTime`, `completionTime`,
//! the pod counts (`active`, `ready`, `succeeded`, `failed`) and the condition that ended the
//! Job, if one holds ([`JobEnd`]: `Complete`, or `Failed` with its reason, message and time). Whoever needs anything else (e.g. relabelling, which compares all
//! labels) reads the Job from the API. Serialised, a `JobSummary` is a valid `Job` with just
//! those fields (the ending condition as the one condition it lists).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Serialize};

use super::crd::suspend::ANNOTATION_RESUMED;
use super::labels::{
    ANNOTATION_CACHE_KEY, ANNOTATION_CANNOT_START, ANNOTATION_DAEMONED, ANNOTATION_PODS_DELETED,
    ANNOTATION_STEP, ANNOTATION_STOPPED, ANNOTATION_TIMED_OUT, LABEL_ATTEMPT, LABEL_ITEM,
    LABEL_RETRY, LABEL_RUN, LABEL_RUN_INDEX,
};

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
    /// The retry of the run it was created for (label `workflow.crd.com/retry`; absent is 0).
    pub retry: i32,
    /// The index of its run of `spec.runs` (label `workflow.crd.com/run-index`; absent is 0).
    pub run_index: u32,
    /// The item it runs of a step that fans out (label `workflow.crd.com/item`).
    pub item: Option<u32>,
    /// Its step's attempt (label `workflow.crd.com/attempt`; absent is 0).
    pub attempt: u32,
    /// Why the operator timed the Job out (annotation `workflow.crd.com/timed-out`).
    pub timed_out: Option<String>,
    /// Why the operator failed the Job's step for a pod that could not start (annotation
    /// `workflow.crd.com/cannot-start`).
    pub cannot_start: Option<String>,
    /// Why the workflow stopped the Job's running step (annotation `workflow.crd.com/stopped`).
    pub stopped: Option<String>,
    /// Whether `spec.podCleanup` had the Job's pods deleted (annotation
    /// `workflow.crd.com/pods-deleted`; its time is not kept).
    pub pods_deleted: bool,
    /// The key of a cached step's Job (annotation `workflow.crd.com/cache-key`).
    pub cache_key: Option<String>,
    /// When a suspend step's Job was resumed (annotation `workflow.crd.com/resumed`).
    pub resumed: Option<String>,
    /// A daemon step's pod's IP, once it was ready (annotation `workflow.crd.com/daemoned`).
    pub daemoned: Option<String>,
    /// The part of `spec` the planner reads.
    pub spec: Option<JobSummarySpec>,
    /// The part of `status` the operator reads.
    pub status: Option<JobSummaryStatus>,
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

/// The fields of a Job's `status` the operator reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobSummaryStatus {
    /// `status.startTime`: a running step's timeout counts from it.
    pub start_time: Option<Time>,
    /// `status.completionTime`, for the step duration metric.
    pub completion_time: Option<Time>,
    /// The pod counts: whether the step's pod started (`ready`, `succeeded`, `failed`) and how
    /// many attempts it made.
    pub pods: PodCounts,
    /// The condition that ended the Job, if one holds.
    pub ended: Option<JobEnd>,
    /// When the Job was last suspended (its `Suspended=True` condition's time), if it is: a
    /// step queued for Kueue waits from then (`spec.queueTimeout`).
    // Boxed: most Jobs are never suspended, and the mirror keeps every Job.
    pub suspended_at: Option<Box<Time>>,
}

/// A Job's `status.active`, `ready`, `succeeded` and `failed` (absent is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodCounts {
    pub active: i32,
    pub ready: i32,
    pub succeeded: i32,
    pub failed: i32,
}

impl PodCounts {
    /// Whether a pod of the Job got as far as running its container: one is ready, or one
    /// finished (a pod that fails to start its container, `StartError`, counts as failed and
    /// is explained as a failure).
    pub fn started(&self) -> bool {
        self.ready > 0 || self.succeeded > 0 || self.failed > 0
    }

    /// Pods the Job ran or runs.
    pub fn attempts(&self) -> i32 {
        self.active + self.succeeded + self.failed
    }
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The condition that ended a Job: `Complete=True`, else `Failed=True`.
#[derive(Clone, Debug, PartialEq)]
pub enum JobEnd {
    Complete,
    /// The condition's reason, message and time, for the step's failure (boxed: few Jobs fail,
    /// and every summary would otherwise hold room for them).
    Failed(Box<JobFailure>),
}

/// The `Failed=True` condition of a failed Job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFailure {
    pub reason: Option<String>,
    pub message: Option<String>,
    pub at: Option<Time>,
}

/// The JSON shape of a Job, limited to the fields a [`JobSummary`] is made from.
#[derive(Deserialize, Serialize)]
struct JobOnTheWire {
    metadata: MetaOnTheWire,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<JobSummarySpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<StatusOnTheWire>,
}

/// The JSON shape of a Job's metadata, limited to what is kept. Not an `ObjectMeta`: that would
/// read `managedFields` (on a Job as much JSON again as the rest of it, every field of its pod
/// template named) into values only to drop them; serde skips what this does not name.
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
    creation_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_references: Option<Vec<OwnerReference>>,
}

impl From<ObjectMeta> for MetaOnTheWire {
    fn from(meta: ObjectMeta) -> Self {
        Self {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            labels: meta.labels,
            annotations: meta.annotations,
            owner_references: meta.owner_references,
        }
    }
}

/// The JSON shape of a Job's status, limited likewise.
#[derive(Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusOnTheWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    completion_time: Option<Time>,
    // Not `#[serde(flatten)]` of a `PodCounts`: that buffers every status read into a map.
    #[serde(default, skip_serializing_if = "is_zero")]
    active: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    ready: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    succeeded: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    failed: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Vec<ConditionOnTheWire>>,
}

/// One of a Job's conditions. Its type and status are read as enums, so the conditions that
/// do not end the Job cost no allocation for them (the reason and message of every condition
/// are still read, and dropped with the condition).
#[derive(Deserialize, Serialize)]
struct ConditionOnTheWire {
    #[serde(rename = "type", default)]
    type_: ConditionType,
    #[serde(default)]
    status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(
        rename = "lastTransitionTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    last_transition_time: Option<Time>,
}

/// A condition's type; only the two that end a Job are told apart. (`Other` is never written:
/// a summary keeps no other condition.)
#[derive(Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
enum ConditionType {
    Complete,
    Failed,
    Suspended,
    #[default]
    #[serde(other)]
    Other,
}

/// A condition's status; only `True` is told apart.
#[derive(Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
enum ConditionStatus {
    True,
    #[default]
    #[serde(other)]
    Other,
}

impl ConditionType {
    fn of(type_: &str) -> Self {
        match type_ {
            "Complete" => Self::Complete,
            "Failed" => Self::Failed,
            "Suspended" => Self::Suspended,
            _ => Self::Other,
        }
    }
}

impl From<StatusOnTheWire> for JobSummaryStatus {
    fn from(wire: StatusOnTheWire) -> Self {
        let mut holding = wire.conditions.unwrap_or_default();
        holding.retain(|c| c.status == ConditionStatus::True);
        let suspended_at = holding
            .iter()
            .find(|c| c.type_ == ConditionType::Suspended)
            .and_then(|c| c.last_transition_time.clone())
            .map(Box::new);
        // `Complete` wins over a `Failed` that also holds (the Job controller never sets both).
        let ended = if holding.iter().any(|c| c.type_ == ConditionType::Complete) {
            Some(JobEnd::Complete)
        } else {
            holding
                .into_iter()
                .find(|c| c.type_ == ConditionType::Failed)
                .map(|c| {
                    JobEnd::Failed(Box::new(JobFailure {
                        reason: c.reason,
                        message: c.message,
                        at: c.last_transition_time,
                    }))
                })
        };
        Self {
            start_time: wire.start_time,
            completion_time: wire.completion_time,
            pods: PodCounts {
                active: wire.active,
                ready: wire.ready,
                succeeded: wire.succeeded,
                failed: wire.failed,
            },
            ended,
            suspended_at,
        }
    }
}

impl From<JobSummaryStatus> for StatusOnTheWire {
    fn from(status: JobSummaryStatus) -> Self {
        let condition = |type_, reason, message, at| ConditionOnTheWire {
            type_,
            status: ConditionStatus::True,
            reason,
            message,
            last_transition_time: at,
        };
        Self {
            start_time: status.start_time,
            completion_time: status.completion_time,
            active: status.pods.active,
            ready: status.pods.ready,
            succeeded: status.pods.succeeded,
            failed: status.pods.failed,
            conditions: {
                let ended = status.ended.map(|end| match end {
                    JobEnd::Complete => condition(ConditionType::Complete, None, None, None),
                    JobEnd::Failed(failure) => {
                        let JobFailure {
                            reason,
                            message,
                            at,
                        } = *failure;
                        condition(ConditionType::Failed, reason, message, at)
                    }
                });
                let suspended = status
                    .suspended_at
                    .map(|at| condition(ConditionType::Suspended, None, None, Some(*at)));
                let conditions: Vec<_> = ended.into_iter().chain(suspended).collect();
                (!conditions.is_empty()).then_some(conditions)
            },
        }
    }
}

impl From<JobStatus> for StatusOnTheWire {
    fn from(status: JobStatus) -> Self {
        Self {
            start_time: status.start_time,
            completion_time: status.completion_time,
            active: status.active.unwrap_or(0),
            ready: status.ready.unwrap_or(0),
            succeeded: status.succeeded.unwrap_or(0),
            failed: status.failed.unwrap_or(0),
            conditions: status.conditions.map(|conditions| {
                conditions
                    .into_iter()
                    .map(|c| ConditionOnTheWire {
                        type_: ConditionType::of(&c.type_),
                        status: if c.status == "True" {
                            ConditionStatus::True
                        } else {
                            ConditionStatus::Other
                        },
                        reason: c.reason,
                        message: c.message,
                        last_transition_time: c.last_transition_time,
                    })
                    .collect()
            }),
        }
    }
}

impl From<JobOnTheWire> for JobSummary {
    fn from(wire: JobOnTheWire) -> Self {
        let JobOnTheWire {
            metadata,
            spec,
            status,
        } = wire;
        let mut annotations = metadata.annotations.unwrap_or_default();
        let step = annotations.remove(ANNOTATION_STEP);
        let timed_out = annotations.remove(ANNOTATION_TIMED_OUT);
        let cannot_start = annotations.remove(ANNOTATION_CANNOT_START);
        let stopped = annotations.remove(ANNOTATION_STOPPED);
        let pods_deleted = annotations.contains_key(ANNOTATION_PODS_DELETED);
        let cache_key = annotations.remove(ANNOTATION_CACHE_KEY);
        let resumed = annotations.remove(ANNOTATION_RESUMED);
        let daemoned = annotations.remove(ANNOTATION_DAEMONED);
        let mut labels = metadata.labels.unwrap_or_default();
        let run = labels.remove(LABEL_RUN);
        let retry = labels
            .get(LABEL_RETRY)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let run_index = labels
            .get(LABEL_RUN_INDEX)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let item = labels.get(LABEL_ITEM).and_then(|i| i.parse().ok());
        let attempt = labels
            .get(LABEL_ATTEMPT)
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        // Read into a Vec grown for four; a Job has one owner.
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
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                owner_references,
                ..ObjectMeta::default()
            },
            step,
            run,
            retry,
            run_index,
            item,
            attempt,
            timed_out,
            cannot_start,
            stopped,
            pods_deleted,
            cache_key,
            resumed,
            daemoned,
            spec,
            status: status.map(JobSummaryStatus::from),
        }
    }
}

impl From<JobSummary> for JobOnTheWire {
    fn from(summary: JobSummary) -> Self {
        let mut metadata = summary.metadata;
        let annotations: BTreeMap<String, String> = [
            (ANNOTATION_STEP, summary.step),
            (ANNOTATION_TIMED_OUT, summary.timed_out),
            (ANNOTATION_CANNOT_START, summary.cannot_start),
            (ANNOTATION_STOPPED, summary.stopped),
            (
                ANNOTATION_PODS_DELETED,
                summary.pods_deleted.then(|| "true".to_string()),
            ),
            (ANNOTATION_CACHE_KEY, summary.cache_key),
            (ANNOTATION_RESUMED, summary.resumed),
            (ANNOTATION_DAEMONED, summary.daemoned),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect();
        metadata.annotations = (!annotations.is_empty()).then_some(annotations);
        let labels: BTreeMap<String, String> = [
            (LABEL_RUN, summary.run),
            (
                LABEL_RETRY,
                (summary.retry != 0).then(|| summary.retry.to_string()),
            ),
            (
                LABEL_RUN_INDEX,
                (summary.run_index != 0).then(|| summary.run_index.to_string()),
            ),
            (LABEL_ITEM, summary.item.map(|i| i.to_string())),
            (
                LABEL_ATTEMPT,
                (summary.attempt != 0).then(|| summary.attempt.to_string()),
            ),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect();
        metadata.labels = (!labels.is_empty()).then_some(labels);
        Self {
            metadata: metadata.into(),
            spec: summary.spec,
            status: summary.status.map(StatusOnTheWire::from),
        }
    }
}

impl From<Job> for JobSummary {
    fn from(job: Job) -> Self {
        JobOnTheWire {
            metadata: job.metadata.into(),
            spec: job.spec.map(|spec| JobSummarySpec {
                active_deadline_seconds: spec.active_deadline_seconds,
                suspend: spec.suspend,
            }),
            status: job.status.map(StatusOnTheWire::from),
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

    use crate::WorkFlow;
    use crate::jobs::build_job;

    fn job_with(conditions: Vec<JobCondition>) -> Job {
        let workflow = WorkFlow::test("wf").step("a", &[]).build();
        let mut job = build_job(&workflow, &workflow.spec.containers[0], "r1").unwrap();
        job.status = Some(JobStatus {
            conditions: Some(conditions),
            start_time: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
            completion_time: Some(Time("2026-01-01T00:00:05Z".parse().unwrap())),
            active: Some(0),
            ..JobStatus::default()
        });
        job
    }

    /// The Job as the API server sends it, read as a summary.
    fn read(job: &Job) -> JobSummary {
        serde_json::from_value(serde_json::to_value(job).unwrap()).unwrap()
    }

    #[test]
    fn reads_a_job_as_the_api_sends_it_and_converts_a_job_alike() {
        let job = job_with(vec![
            condition("SuccessCriteriaMet", "True", None),
            condition("Complete", "True", None),
            condition("Failed", "False", None),
        ]);
        let from_wire = read(&job);
        assert_eq!(from_wire, JobSummary::from(job.clone()));
        assert_eq!(from_wire.metadata.name, job.metadata.name);
        let owners = from_wire.metadata.owner_references.as_ref().unwrap();
        assert_eq!(Some(owners), job.metadata.owner_references.as_ref());
        assert_eq!(owners.capacity(), owners.len(), "no room kept for more");
        assert_eq!(
            (from_wire.step.as_deref(), from_wire.run.as_deref()),
            (Some("a"), Some("r1"))
        );
        assert_eq!(
            from_wire.spec.as_ref().unwrap().active_deadline_seconds,
            job.spec.as_ref().unwrap().active_deadline_seconds
        );
        let status = job.status.unwrap();
        assert_eq!(
            from_wire.status,
            Some(JobSummaryStatus {
                start_time: status.start_time,
                completion_time: status.completion_time,
                pods: PodCounts::default(),
                ended: Some(JobEnd::Complete),
                suspended_at: None,
            })
        );
    }

    #[test]
    fn keeps_the_pod_counts_and_when_a_failed_job_failed() {
        let mut job = job_with(vec![JobCondition {
            last_transition_time: Some(Time("2026-01-01T00:00:09Z".parse().unwrap())),
            ..condition("Failed", "True", Some("BackoffLimitExceeded"))
        }]);
        let status = job.status.as_mut().unwrap();
        (status.active, status.ready, status.failed) = (Some(1), Some(1), Some(2));
        let summary = read(&job);
        let counts = summary.status.as_ref().unwrap().pods;
        assert_eq!(
            counts,
            PodCounts {
                active: 1,
                ready: 1,
                succeeded: 0,
                failed: 2
            }
        );
        assert_eq!((counts.started(), counts.attempts()), (true, 3));
        assert!(
            !PodCounts {
                active: 1,
                ..PodCounts::default()
            }
            .started()
        );
        assert_eq!(summary, JobSummary::from(job));
        let Some(JobEnd::Failed(failure)) = &summary.status.as_ref().unwrap().ended else {
            panic!("failed: {summary:?}");
        };
        assert_eq!(
            &failure.at,
            &Some(Time("2026-01-01T00:00:09Z".parse().unwrap()))
        );
        let as_json = serde_json::to_value(&summary).unwrap();
        assert_eq!(read(&serde_json::from_value(as_json).unwrap()), summary);
    }

    #[test]
    fn keeps_the_condition_that_ended_the_job_with_the_reason_and_message_of_a_failure() {
        let failed = |reason: &str| {
            JobEnd::Failed(Box::new(JobFailure {
                reason: Some(reason.into()),
                message: Some("it broke".into()),
                at: None,
            }))
        };
        let cases = [
            (vec![], None),
            (
                vec![
                    condition("Complete", "False", None),
                    condition("Suspended", "True", Some("JobSuspended")),
                ],
                None,
            ),
            (
                vec![
                    condition("FailureTarget", "True", Some("BackoffLimitExceeded")),
                    condition("Failed", "True", Some("BackoffLimitExceeded")),
                ],
                Some(failed("BackoffLimitExceeded")),
            ),
            (
                vec![
                    condition("Failed", "True", Some("DeadlineExceeded")),
                    condition("Complete", "True", None),
                ],
                Some(JobEnd::Complete),
            ),
        ];
        for (conditions, want) in cases {
            let shown = format!("{conditions:?}");
            let job = job_with(conditions);
            assert_eq!(read(&job).status.unwrap().ended, want, "{shown}");
            assert_eq!(JobSummary::from(job).status.unwrap().ended, want, "{shown}");
        }
    }

    #[test]
    fn serialises_as_a_job_with_the_ending_condition_and_reads_back_the_same() {
        let job = job_with(vec![
            condition("FailureTarget", "True", Some("DeadlineExceeded")),
            condition("Failed", "True", Some("DeadlineExceeded")),
        ]);
        let summary = read(&job);
        let as_job: Job = serde_json::from_value(serde_json::to_value(&summary).unwrap())
            .expect("a valid batch/v1 Job");
        let status = as_job.status.as_ref().unwrap();
        assert_eq!(
            status.conditions,
            Some(vec![condition("Failed", "True", Some("DeadlineExceeded"))])
        );
        assert_eq!(status.start_time, job.status.as_ref().unwrap().start_time);
        assert_eq!(as_job.metadata.name, job.metadata.name);
        assert_eq!(
            read(&as_job),
            summary,
            "what is serialised reads back the same"
        );
    }

    #[test]
    fn reads_whether_pod_cleanup_deleted_the_pods() {
        let mut job = job_with(vec![condition("Complete", "True", None)]);
        assert!(!read(&job).pods_deleted);
        job.metadata.annotations.get_or_insert_default().insert(
            ANNOTATION_PODS_DELETED.into(),
            "2026-01-01T00:00:09Z".into(),
        );
        let summary = read(&job);
        assert!(summary.pods_deleted);
        assert_eq!(summary, JobSummary::from(job));
        let as_json = serde_json::to_value(&summary).unwrap();
        assert_eq!(read(&serde_json::from_value(as_json).unwrap()), summary);
    }

    fn condition(type_: &str, status: &str, reason: Option<&str>) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.map(str::to_string),
            message: reason.map(|_| "it broke".to_string()),
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
        assert!(std::mem::size_of::<JobSummaryStatus>() * 2 < std::mem::size_of::<JobStatus>());
    }
}
