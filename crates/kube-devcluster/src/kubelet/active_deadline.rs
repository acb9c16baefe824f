//! A pod's `spec.activeDeadlineSeconds`, as the kubelet enforces it
//! (k8s.io/kubernetes pkg/kubelet/active_deadline.go): counted from the pod's `status.startTime`,
//! once past it the pod is `Failed` with reason `DeadlineExceeded` (pkg/kubelet/kubelet_pods.go,
//! `generateAPIPodStatus`: a `PodSyncHandler` that says evict sets the phase, reason and message),
//! a `Normal` Event says so, and its containers are stopped as any terminating pod's are: SIGTERM,
//! then SIGKILL after its `terminationGracePeriodSeconds` (pkg/kubelet/pod_workers.go,
//! `calculateEffectiveGracePeriod`). The pod is kept, with its logs: only its deletion removes
//! it. Pure; the pod's runner ([`super::runner`]) waits for the deadline and stops the pod.
//!
//! The deadline counts on the monotonic clock from when the runner started the pod (the wall
//! clock may jump), and follows the pod's spec: it may be set, or lowered, while the pod runs
//! (pkg/apis/core/validation `ValidatePodUpdate`), and the kubelet reads it at each sync.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// The pod's reason once past its deadline (pkg/kubelet/active_deadline.go `reason`).
pub const REASON: &str = "DeadlineExceeded";

/// The pod's message, and its Event's, once past its deadline (`message` there).
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// The pod's `activeDeadlineSeconds`, if it has one.
pub fn limit(pod: &Value) -> Option<Duration> {
    let seconds = pod
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)?;
    Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

/// How long ago, at `now`, a pod started at `start_time` (RFC 3339): zero for a start time in
/// the future or one that does not parse.
pub fn since(start_time: &str, now: DateTime<Utc>) -> Duration {
    DateTime::parse_from_rfc3339(start_time)
        .ok()
        .and_then(|start| (now - start.with_timezone(&Utc)).to_std().ok())
        .unwrap_or(Duration::ZERO)
}

/// The grace period the containers of a pod past its deadline get between SIGTERM and SIGKILL:
/// its `terminationGracePeriodSeconds`, 30 by default.
pub fn grace_period(pod: &Value) -> Duration {
    let seconds = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(30);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// Marks a pod status as the kubelet writes it for a pod past its deadline: `Failed`, with
/// [`REASON`] and [`MESSAGE`], whatever its containers did.
pub fn mark(status: &mut Value) {
    status["phase"] = json!("Failed");
    status["reason"] = json!(REASON);
    status["message"] = json!(MESSAGE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_deadline_counts_from_the_start_time() {
        let start = "2026-11-28T10:00:00Z";
        let table = [
            ("2026-11-28T09:59:00Z", 0),
            ("2026-11-28T10:00:00Z", 0),
            ("2026-11-28T10:00:03Z", 3),
            ("2026-11-28T10:01:00Z", 60),
        ];
        for (now, seconds) in table {
            assert_eq!(since(start, at(now)), Duration::from_secs(seconds), "{now}");
        }
        assert_eq!(since("not a time", at(start)), Duration::ZERO);
        let pod = json!({"spec": {"activeDeadlineSeconds": 5}});
        assert_eq!(limit(&pod), Some(Duration::from_secs(5)));
        assert_eq!(limit(&json!({"spec": {}})), None);
    }

    #[test]
    fn a_pod_past_its_deadline_fails_with_the_kubelets_reason() {
        let mut status = json!({"phase": "Succeeded", "startTime": "2026-11-28T10:00:00Z"});
        mark(&mut status);
        assert_eq!(status["phase"], "Failed");
        assert_eq!(status["reason"], "DeadlineExceeded");
        assert_eq!(status["message"], MESSAGE);
        assert_eq!(status["startTime"], "2026-11-28T10:00:00Z");
    }

    #[test]
    fn the_grace_period_is_the_pods_or_thirty_seconds() {
        let table = [
            (json!({"spec": {"terminationGracePeriodSeconds": 2}}), 2),
            (json!({"spec": {"terminationGracePeriodSeconds": 0}}), 0),
            (json!({"spec": {}}), 30),
        ];
        for (pod, seconds) in table {
            assert_eq!(grace_period(&pod), Duration::from_secs(seconds), "{pod}");
        }
    }
}
