//! A pod's `spec.activeDeadlineSeconds`, as the kubelet enforces it
//! (k8s.io/kubernetes pkg/kubelet/active_deadline.go): counted from the pod's `status.startTime`,
//! once past it the pod is `Failed` with reason `DeadlineExceeded` (pkg/kubelet/kubelet_pods.go,
//! `generateAPIPodStatus`: a `PodSyncHandler` that says evict sets the phase, reason and message),
//! a `Normal` Event says so, and its containers are stopped as any terminating pod's are: SIGTERM,
//! then SIGKILL after its `terminationGracePeriodSeconds` (pkg/kubelet/pod_workers.go,
//! `calculateEffectiveGracePeriod`). The pod is kept, with its logs: only its deletion removes
//! it. Pure; the pod's runner ([`super::runner`]) waits for the deadline and stops the pod.
//!
//! The deadline is read when the pod starts: a later change to it (the field may be lowered on
//! a running pod) is not seen.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// The pod's reason once past its deadline (pkg/kubelet/active_deadline.go `reason`).
pub const REASON: &str = "DeadlineExceeded";

/// The pod's message, and its Event's, once past its deadline (`message` there).
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// How long until `pod` (started at `start_time`, RFC 3339) is past its
/// `activeDeadlineSeconds`: zero when it is already; `None` without a deadline, or with a start
/// time that does not parse.
pub fn remaining(pod: &Value, start_time: &str, now: DateTime<Utc>) -> Option<Duration> {
    let seconds = pod
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)?;
    let start = DateTime::parse_from_rfc3339(start_time)
        .ok()?
        .with_timezone(&Utc);
    let deadline = start + chrono::Duration::seconds(seconds);
    Some((deadline - now).to_std().unwrap_or(Duration::ZERO))
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
        let pod = json!({"spec": {"activeDeadlineSeconds": 5}});
        let start = "2026-11-28T10:00:00Z";
        let table = [
            ("2026-11-28T10:00:00Z", Some(5)),
            ("2026-11-28T10:00:03Z", Some(2)),
            ("2026-11-28T10:00:05Z", Some(0)),
            ("2026-11-28T10:01:00Z", Some(0)),
        ];
        for (now, left) in table {
            assert_eq!(
                remaining(&pod, start, at(now)),
                left.map(Duration::from_secs),
                "{now}"
            );
        }
        let unlimited = json!({"spec": {}});
        assert_eq!(remaining(&unlimited, start, at(start)), None);
        assert_eq!(remaining(&pod, "not a time", at(start)), None);
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
