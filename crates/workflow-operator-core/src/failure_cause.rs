//! Why a step failed, in the words a user acts on: the exit code and the container's own reason
//! and message, read from the failed Job's pods. A Job's `Failed` condition only says
//! `BackoffLimitExceeded: Job has reached the specified backoff limit`; the cause (`exit code 2`,
//! `exit code 128: StartError: ... executable file not found in $PATH`) is in the pod's container
//! state, as `kubectl describe pod` shows it.
//!
//! An evicted or otherwise disrupted pod is told apart from a program's failure (reason
//! `Evicted`, whatever its container's exit), and a failed Job whose pods are gone is
//! `PodDeleted`: `retryPolicy` reads both as the pod's failure.
//!
//! Why a step's pod did not start (image pull error, missing Secret or ConfigMap,
//! unschedulable, or no pod at all because the Job controller cannot create it) is read the
//! same way: [`start_cause`]. Both are pure; the operator reads the pods and Events they take,
//! only on the failure path.

use k8s_openapi::api::core::v1::{ContainerStateTerminated, Event, Pod};

/// The reason Kubernetes gives a Job, or a pod (the kubelet), past its `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// The label the Job controller puts on its pods (`job-name`, kept by every Kubernetes version
/// next to the newer `batch.kubernetes.io/job-name`).
pub const JOB_NAME_LABEL: &str = "job-name";

/// The reason of a failure whose pod was evicted, whatever its container's exit: the kubelet's
/// own for a pod it evicted under node pressure (pkg/kubelet/eviction/helpers.go,
/// `Reason = "Evicted"`), given here as well to a pod another component disrupted.
pub const REASON_EVICTED: &str = "Evicted";

/// The reason of a failed Job whose pods are gone: deleted before they finished (an eviction,
/// a preemption, a drain, a user), their failure then counted by the Job controller and the
/// pods removed (pkg/controller/job/job_controller.go counts a deleted pod as failed and removes
/// its `batch.kubernetes.io/job-tracking` finalizer).
pub const REASON_POD_DELETED: &str = "PodDeleted";

/// What a failed Job without pods says: see [`REASON_POD_DELETED`].
pub fn pod_deleted() -> Cause {
    Cause {
        exit_code: None,
        reason: REASON_POD_DELETED.into(),
        message: "its pod was deleted before it finished (evicted, preempted or deleted)".into(),
    }
}

/// The cause of a failed attempt: a pod the kubelet stopped at its `activeDeadlineSeconds`
/// (reason `DeadlineExceeded`, whatever its container did); else the last container to
/// terminate with a failure, among `pods`; else the last init container to (a pod whose init
/// container failed never ran its step), its message naming it. A pod that was evicted or
/// otherwise disrupted ([`disruption`]) speaks for itself instead: its container's exit (143
/// after the SIGTERM of its deletion) is not the program's failure.
pub fn describe(pods: &[Pod]) -> Option<Cause> {
    if let Some(cause) = past_deadline(pods) {
        return Some(cause);
    }
    if let Some(failed) = last_failure(pods) {
        let pod = pods.iter().find(|pod| {
            containers(pod).any(|s| {
                let terminated = s.state.as_ref().and_then(|s| s.terminated.as_ref());
                terminated.is_some_and(|t| std::ptr::eq(t, failed))
            })
        });
        return Some(match pod.and_then(disruption) {
            Some(why) => Cause {
                exit_code: Some(failed.exit_code),
                reason: REASON_EVICTED.into(),
                message: why,
            },
            None => cause(failed),
        });
    }
    if let Some(why) = pods.iter().find_map(disruption) {
        return Some(Cause {
            exit_code: None,
            reason: REASON_EVICTED.into(),
            message: why,
        });
    }
    let init = pods.iter().flat_map(|pod| {
        let statuses = pod
            .status
            .iter()
            .flat_map(|s| s.init_container_statuses.iter().flatten());
        statuses.filter_map(|status| {
            let terminated = status.state.as_ref()?.terminated.as_ref()?;
            (terminated.exit_code != 0).then_some((&status.name, terminated))
        })
    });
    let (name, terminated) = init.max_by_key(|(_, t)| t.finished_at.as_ref().map(|t| t.0))?;
    let mut found = cause(terminated);
    found.message = format!("init container {name}: {}", found.message)
        .trim_end_matches([' ', ':'])
        .to_string();
    Some(found)
}

/// How `pod` was disrupted, if it was: the kubelet evicted it (phase `Failed`, reason
/// `Evicted`, its message), or a `DisruptionTarget` condition says who is removing it
/// (pkg/apis/core/types.go `DisruptionTarget`; reasons `EvictionByEvictionAPI`,
/// `PreemptionByScheduler`, `DeletionByTaintManager`, `TerminationByKubelet`, ...), as
/// `REASON: message`.
pub fn disruption(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if status.reason.as_deref() == Some(REASON_EVICTED) {
        return Some(
            status
                .message
                .clone()
                .unwrap_or_default()
                .trim()
                .to_string(),
        );
    }
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")?;
    let parts: Vec<&str> = [condition.reason.as_deref(), condition.message.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    Some(parts.join(": "))
}

/// The statuses of `pod`'s (regular) containers.
fn containers(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
}

/// Why a container failed, as the planner reports it (`step X failed: exit code 2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The container's exit code; none for a disrupted pod whose container never ended.
    pub exit_code: Option<i32>,
    /// The container's reason: `Error` for a plain non-zero exit, `StartError`, `OOMKilled`...
    pub reason: String,
    /// The termination message, or the runtime's error; may be empty.
    pub message: String,
}

/// A pod the kubelet failed for running past its `activeDeadlineSeconds` (pod reason
/// `DeadlineExceeded`, k8s.io/kubernetes pkg/kubelet/active_deadline.go): the pod's reason and
/// message, and its container's exit code (137, killed, if it has none).
fn past_deadline(pods: &[Pod]) -> Option<Cause> {
    let status = pods
        .iter()
        .filter_map(|pod| pod.status.as_ref())
        .find(|status| status.reason.as_deref() == Some(DEADLINE_EXCEEDED))?;
    let exit_code = (status.container_statuses.iter().flatten())
        .find_map(|c| c.state.as_ref()?.terminated.as_ref())
        .map_or(137, |terminated| terminated.exit_code);
    Some(Cause {
        exit_code: Some(exit_code),
        reason: DEADLINE_EXCEEDED.to_string(),
        message: status.message.clone().unwrap_or_default(),
    })
}

/// The state of the last container among `pods` to terminate with a non-zero exit code.
pub fn last_failure(pods: &[Pod]) -> Option<&ContainerStateTerminated> {
    pods.iter()
        .flat_map(containers)
        .filter_map(|status| status.state.as_ref()?.terminated.as_ref())
        .filter(|terminated| terminated.exit_code != 0)
        .max_by_key(|terminated| terminated.finished_at.as_ref().map(|t| t.0))
}

fn cause(terminated: &ContainerStateTerminated) -> Cause {
    Cause {
        exit_code: Some(terminated.exit_code),
        reason: terminated.reason.clone().unwrap_or_else(|| "Error".into()),
        message: terminated
            .message
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
            .to_string(),
    }
}

/// What a Job's pods (and, without pods, its Events) say about its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartCause {
    /// A container runs or ran.
    Started,
    /// None did; why, when something says (`CreateContainerConfigError: secret "creds" not
    /// found`, `ErrImagePull: ...`, `Unschedulable: ...`, the Job controller's `FailedCreate`).
    NotStarted(Option<String>),
}

/// Whether one of `pods` started its container, else the cause of the newest pod's wait, or of
/// the Job controller's newest `FailedCreate` among `events` (of the Job named `job`).
pub fn start_cause(pods: &[Pod], events: &[Event], job: &str) -> StartCause {
    let statuses = || {
        pods.iter().flat_map(|pod| {
            pod.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
    };
    let started = statuses().any(|c| {
        c.state
            .as_ref()
            .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    });
    if started {
        return StartCause::Started;
    }
    let said = |reason: Option<&String>, message: Option<&String>| {
        let parts: Vec<&str> = [reason, message]
            .into_iter()
            .flatten()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join(": "))
    };
    let newest_pod = pods
        .iter()
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let waiting = newest_pod
        .and_then(|pod| pod.status.as_ref())
        .into_iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        // `ContainerCreating` says only that it is not there yet.
        .filter(|w| w.reason.as_deref() != Some("ContainerCreating") || w.message.is_some())
        .find_map(|w| said(w.reason.as_ref(), w.message.as_ref()));
    let unscheduled = || {
        newest_pod
            .and_then(|pod| pod.status.as_ref())
            .into_iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.type_ == "PodScheduled" && c.status == "False")
            .find_map(|c| said(c.reason.as_ref(), c.message.as_ref()))
    };
    let failed_create = || {
        events
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(job))
            .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
            .max_by_key(|e| {
                e.last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or(e.event_time.as_ref().map(|t| t.0))
            })
            .and_then(|e| said(e.reason.as_ref(), e.message.as_ref()))
    };
    StartCause::NotStarted(waiting.or_else(unscheduled).or_else(failed_create))
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn pod(terminated: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"containerStatuses": [{
                "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": terminated},
            }]},
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_past_its_deadline_speaks_for_its_killed_container() {
        let mut stopped = pod(json!({"exitCode": 143, "reason": "Error"}));
        let status = stopped.status.as_mut().unwrap();
        status.phase = Some("Failed".into());
        status.reason = Some("DeadlineExceeded".into());
        status.message =
            Some("Pod was active on the node longer than the specified deadline".into());
        assert_eq!(
            describe(&[stopped]),
            Some(Cause {
                exit_code: Some(143),
                reason: "DeadlineExceeded".into(),
                message: "Pod was active on the node longer than the specified deadline".into()
            })
        );
    }

    #[test]
    fn a_failed_init_container_speaks_naming_itself() {
        let pods: [Pod; 1] = [serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {
                "initContainerStatuses": [{
                    "name": "workflow-agent", "image": "x", "imageID": "", "ready": false,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "disk full"}},
                }],
                "containerStatuses": [{
                    "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }],
            },
        }))
        .unwrap()];
        assert_eq!(
            describe(&pods),
            Some(Cause {
                exit_code: Some(1),
                reason: "Error".into(),
                message: "init container workflow-agent: disk full".into()
            })
        );
    }

    #[test]
    fn a_plain_non_zero_exit_is_its_exit_code() {
        let pods = [pod(json!({"exitCode": 2, "reason": "Error"}))];
        assert_eq!(
            describe(&pods),
            Some(Cause {
                exit_code: Some(2),
                reason: "Error".into(),
                message: String::new()
            })
        );
    }

    #[test]
    fn a_container_that_could_not_start_says_why() {
        let pods = [pod(json!({
            "exitCode": 128, "reason": "StartError",
            "message": "exec: \"nosuch\": executable file not found in $PATH",
        }))];
        assert_eq!(
            describe(&pods),
            Some(Cause {
                exit_code: Some(128),
                reason: "StartError".into(),
                message: "exec: \"nosuch\": executable file not found in $PATH".into()
            })
        );
    }

    #[test]
    fn the_last_failed_attempt_speaks() {
        let pods = [
            pod(json!({"exitCode": 1, "reason": "Error", "finishedAt": "2026-01-01T00:00:01Z"})),
            pod(
                json!({"exitCode": 3, "reason": "Error", "message": "disk full",
                       "finishedAt": "2026-01-01T00:00:09Z"}),
            ),
            pod(
                json!({"exitCode": 0, "reason": "Completed", "finishedAt": "2026-01-01T00:00:20Z"}),
            ),
        ];
        assert_eq!(
            describe(&pods),
            Some(Cause {
                exit_code: Some(3),
                reason: "Error".into(),
                message: "disk full".into()
            })
        );
    }

    #[test]
    fn an_evicted_or_disrupted_pod_is_evicted_whatever_its_exit() {
        let by_api: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {
                "phase": "Failed",
                "conditions": [{"type": "DisruptionTarget", "status": "True",
                                "reason": "EvictionByEvictionAPI",
                                "message": "Eviction API: evicting"}],
                "containerStatuses": [{
                    "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 143, "reason": "Error"}},
                }],
            },
        }))
        .unwrap();
        let by_kubelet = pod_with(json!({
            "phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory. ",
        }));
        let cases = [
            (
                by_api,
                Some(143),
                "EvictionByEvictionAPI: Eviction API: evicting",
            ),
            (by_kubelet, None, "The node was low on resource: memory."),
        ];
        for (pod, exit_code, message) in cases {
            assert_eq!(
                describe(&[pod]),
                Some(Cause {
                    exit_code,
                    reason: REASON_EVICTED.into(),
                    message: message.into()
                })
            );
        }
    }

    #[test]
    fn no_terminated_container_means_no_cause() {
        assert_eq!(describe(&[]), None);
    }

    fn pod_with(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    fn waiting(reason: &str, message: &str) -> Pod {
        pod_with(json!({"phase": "Pending", "containerStatuses": [{
            "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}},
        }]}))
    }

    #[test]
    fn a_pod_that_cannot_start_says_why() {
        let cases = [
            (
                waiting("CreateContainerConfigError", "secret \"creds\" not found"),
                "CreateContainerConfigError: secret \"creds\" not found",
            ),
            (
                waiting("ErrImagePull", "pull access denied for nosuch"),
                "ErrImagePull: pull access denied for nosuch",
            ),
            (
                pod_with(json!({"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                }]})),
                "Unschedulable: 0/3 nodes are available",
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(
                start_cause(&[pod], &[], "j"),
                StartCause::NotStarted(Some(want.into()))
            );
        }
    }

    #[test]
    fn a_pod_whose_container_runs_or_ran_started() {
        let running = pod_with(json!({"containerStatuses": [{
            "name": "c", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }]}));
        assert_eq!(start_cause(&[running], &[], "j"), StartCause::Started);
        let ended = pod(json!({"exitCode": 1, "reason": "Error"}));
        assert_eq!(start_cause(&[ended], &[], "j"), StartCause::Started);
    }

    #[test]
    fn without_a_pod_the_job_controllers_failed_create_says_why() {
        let event = |job: &str, reason: &str, message: &str| -> Event {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{job}.1")},
                "involvedObject": {"kind": "Job", "name": job},
                "reason": reason, "message": message, "type": "Warning",
            }))
            .unwrap()
        };
        let events = [
            event("other", "FailedCreate", "not this job"),
            event("j", "SuccessfulCreate", "Created pod: j-abcde"),
            event(
                "j",
                "FailedCreate",
                "Error creating: serviceaccount \"runner\" not found",
            ),
        ];
        assert_eq!(
            start_cause(&[], &events, "j"),
            StartCause::NotStarted(Some(
                "FailedCreate: Error creating: serviceaccount \"runner\" not found".into()
            ))
        );
        assert_eq!(start_cause(&[], &[], "j"), StartCause::NotStarted(None));
    }
}
