//! Which of a pod's containers the kubelet runs, of which kind, and which it starts again once
//! they end. Pure; the runner in [`crate::kubelet`] follows these rules.
//!
//! A pod's init containers run in order before its (first) container. A regular init container
//! runs to completion before the next one starts; an init container with `restartPolicy:
//! Always` is a sidecar (Kubernetes 1.29+): once it runs the next one starts, it keeps running
//! beside the main container and is started again whenever it exits, until the main container
//! is done (k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go,
//! `computeInitContainerActions`).

use serde_json::Value;

/// Where a container sits in its pod: the init container at an index, or the main container
/// (the first of `containers`, the only regular one the devcluster runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Init(usize),
    Main,
}

/// The kind of a container the kubelet runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An init container that runs to completion.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
    /// The pod's regular container.
    Main,
}

impl Kind {
    /// The kind of an init container: a sidecar when its own `restartPolicy` is `Always`
    /// (pkg/api/v1/pod/util.go, `IsRestartableInitContainer`; `Always` is the only value the
    /// API allows there).
    pub fn of_init(container: &Value) -> Self {
        if is_restartable(container) {
            Kind::Sidecar
        } else {
            Kind::Init
        }
    }
}

/// Whether an init container is restartable, a sidecar (`IsRestartableInitContainer`).
pub(crate) fn is_restartable(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// The pod's init containers, in order.
pub(crate) fn init_containers(pod: &Value) -> &[Value] {
    pod.pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether a container of `kind` that has just ended (`failed`: with an exit code other than 0,
/// or it could not start) is started again under the pod's `restartPolicy`:
/// - a sidecar always, whatever the pod's policy (`computeInitContainerActions`: an exited
///   restartable init container is started again);
/// - a regular init container only when it failed and the policy is not `Never`
///   (`computeInitContainerActions` with `shouldRestartOnFailure`; under `Never` its failure
///   fails the pod);
/// - the main container as `restartPolicy` says: `Always` always, `OnFailure` when it failed,
///   `Never` never (pkg/kubelet/container/helpers.go, `ShouldContainerBeRestarted`).
pub(crate) fn restarts(kind: Kind, policy: &str, failed: bool) -> bool {
    match (kind, policy) {
        (Kind::Sidecar, _) => true,
        (_, "Never") => false,
        (Kind::Init, _) | (Kind::Main, "OnFailure") => failed,
        (Kind::Main, _) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn restarts_follow_the_kind_and_the_pods_policy() {
        // (kind, policy, failed, restarted)
        let table = [
            (Kind::Sidecar, "Never", false, true),
            (Kind::Sidecar, "Never", true, true),
            (Kind::Sidecar, "OnFailure", false, true),
            (Kind::Init, "Never", true, false),
            (Kind::Init, "OnFailure", true, true),
            (Kind::Init, "Always", true, true),
            (Kind::Init, "Always", false, false),
            (Kind::Init, "OnFailure", false, false),
            (Kind::Main, "Never", true, false),
            (Kind::Main, "OnFailure", true, true),
            (Kind::Main, "OnFailure", false, false),
            (Kind::Main, "Always", false, true),
            (Kind::Main, "Always", true, true),
        ];
        for (kind, policy, failed, restarted) in table {
            assert_eq!(
                restarts(kind, policy, failed),
                restarted,
                "{kind:?} {policy} failed={failed}"
            );
        }
    }

    #[test]
    fn an_init_container_with_restart_policy_always_is_a_sidecar() {
        assert_eq!(
            Kind::of_init(&json!({"name": "s", "restartPolicy": "Always"})),
            Kind::Sidecar
        );
        assert_eq!(Kind::of_init(&json!({"name": "i"})), Kind::Init);
        let pod = json!({"spec": {"initContainers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(init_containers(&pod).len(), 2);
        assert!(init_containers(&json!({"spec": {}})).is_empty());
    }
}
