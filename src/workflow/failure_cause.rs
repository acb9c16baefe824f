//! Why a step failed, in the words a user acts on: the exit code and the container's own reason
//! and message, read from the failed Job's pods. A Job's `Failed` condition only says
//! `BackoffLimitExceeded: Job has reached the specified backoff limit`; the cause (`exit code 2`,
//! `exit code 128: StartError: ... executable file not found in $PATH`) is in the pod's container
//! state, as `kubectl describe pod` shows it.
//!
//! Reading it costs one pod list per failed step, made only on the failure path (the full
//! planner runs on a step's failure, see `incremental::Fallback::StepFailed`), never for a
//! success. [`describe`] is pure; [`explain`] does the reading.

use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::Api;
use kube::api::ListParams;

use super::plan::{DEADLINE_EXCEEDED, JobState, ObservedJob};

/// The label the Job controller puts on its pods (`job-name`, kept by every Kubernetes version
/// next to the newer `batch.kubernetes.io/job-name`).
const JOB_NAME_LABEL: &str = "job-name";

/// The cause of a failed attempt as `(reason, message)` for the planner's `step X failed:
/// {reason}: {message}`: the last container to terminate with a failure, among `pods`.
pub fn describe(pods: &[Pod]) -> Option<(String, String)> {
    last_failure(pods).map(cause)
}

/// The state of the last container among `pods` to terminate with a non-zero exit code.
pub fn last_failure(pods: &[Pod]) -> Option<&ContainerStateTerminated> {
    pods.iter()
        .flat_map(|pod| {
            pod.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .filter_map(|status| status.state.as_ref()?.terminated.as_ref())
        .filter(|terminated| terminated.exit_code != 0)
        .max_by_key(|terminated| terminated.finished_at.as_ref().map(|t| t.0))
}

/// `exit code N` as the reason; the container's reason (unless the plain `Error` of a non-zero
/// exit) and its message (the termination message, or the runtime's error) as the message.
fn cause(terminated: &ContainerStateTerminated) -> (String, String) {
    let reason = format!("exit code {}", terminated.exit_code);
    let said = terminated
        .message
        .as_deref()
        .map(str::trim)
        .unwrap_or_default();
    let message = match terminated.reason.as_deref() {
        None | Some("Error") => said.to_string(),
        Some(other) if said.is_empty() => other.to_string(),
        Some(other) => format!("{other}: {said}"),
    };
    (reason, message)
}

/// Replaces the Job condition's reason and message of each failed (not timed-out) Job in
/// `observed` with the cause read from its pods. A Job whose pods are gone, or that cannot be
/// listed, keeps what its condition says: the cause is an explanation, not a decision.
pub async fn explain(pods: &Api<Pod>, observed: &mut [ObservedJob]) {
    for job in observed.iter_mut() {
        let JobState::Failed { reason, message } = &mut job.state else {
            continue;
        };
        if reason == DEADLINE_EXCEEDED {
            continue;
        }
        let selector = format!("{JOB_NAME_LABEL}={}", job.name);
        match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => {
                if let Some((why, said)) = describe(&list.items) {
                    *reason = why;
                    *message = said;
                }
            }
            Err(error) => {
                tracing::debug!(%error, job = %job.name, "reading the failed job's pods");
            }
        }
    }
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
    fn a_plain_non_zero_exit_is_its_exit_code() {
        let pods = [pod(json!({"exitCode": 2, "reason": "Error"}))];
        assert_eq!(describe(&pods), Some(("exit code 2".into(), String::new())));
    }

    #[test]
    fn a_container_that_could_not_start_says_why() {
        let pods = [pod(json!({
            "exitCode": 128, "reason": "StartError",
            "message": "exec: \"nosuch\": executable file not found in $PATH",
        }))];
        assert_eq!(
            describe(&pods),
            Some((
                "exit code 128".into(),
                "StartError: exec: \"nosuch\": executable file not found in $PATH".into()
            ))
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
            Some(("exit code 3".into(), "disk full".into()))
        );
    }

    #[test]
    fn no_terminated_container_means_no_cause() {
        assert_eq!(describe(&[]), None);
    }
}
