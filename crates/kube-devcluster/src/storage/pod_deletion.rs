//! Graceful deletion of pods, the API server's side: how long a deleted pod is given to stop
//! before it goes. The store marks the pod (`deletionTimestamp`, `deletionGracePeriodSeconds`)
//! instead of removing it; the kubelet ([`crate::kubelet`]) sends its container SIGTERM, then
//! SIGKILL when the period is over, and deletes the pod for good (grace period 0) once the
//! container has stopped.

use serde_json::Value;

use crate::api::resources::ResourceInfo;

/// The default of `spec.terminationGracePeriodSeconds` (pkg/apis/core/v1/defaults.go,
/// `DefaultTerminationGracePeriodSeconds`).
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// The grace period a delete gives `obj`: 0 (removed at once) for anything but a pod.
///
/// pkg/registry/core/pod/strategy.go (`CheckGracefulDelete`): `DeleteOptions.gracePeriodSeconds`
/// when given, else the pod's `terminationGracePeriodSeconds`; 0 for a pod that has finished
/// (phase `Succeeded` or `Failed`) or was never scheduled to a node (no `spec.nodeName`).
pub fn grace_period(info: &ResourceInfo, obj: &Value, requested: Option<i64>) -> i64 {
    if !info.group.is_empty() || info.resource != "pods" {
        return 0;
    }
    let phase = obj.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return 0;
    }
    let on_node = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !on_node {
        return 0;
    }
    requested
        .or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS)
        .max(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::{GroupResource, Registry};
    use serde_json::json;

    #[test]
    fn grace_periods_as_the_pod_strategy_gives_them() {
        let registry = Registry::with_builtins();
        let pods = registry.get(&GroupResource::new("", "pods")).unwrap();
        let cms = registry.get(&GroupResource::new("", "configmaps")).unwrap();
        let running = json!({"spec": {"nodeName": "box"}, "status": {"phase": "Running",
                             "containerStatuses": [{"name": "c"}]}});
        assert_eq!(grace_period(&pods, &running, None), 30);
        assert_eq!(grace_period(&pods, &running, Some(0)), 0);
        assert_eq!(grace_period(&pods, &running, Some(5)), 5);
        let mut custom = running.clone();
        custom["spec"]["terminationGracePeriodSeconds"] = json!(2);
        assert_eq!(grace_period(&pods, &custom, None), 2);
        let mut done = running.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(grace_period(&pods, &done, None), 0);
        assert_eq!(
            grace_period(&pods, &json!({"status": {"phase": "Pending"}}), None),
            0
        );
        assert_eq!(grace_period(&cms, &running, Some(5)), 0);
    }
}
