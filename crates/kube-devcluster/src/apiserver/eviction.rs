//! The `pods/eviction` subresource: `POST /api/v1/namespaces/NS/pods/NAME/eviction` with a
//! policy/v1 `Eviction`, as kube-apiserver serves it (pkg/registry/core/pod/storage/eviction.go,
//! `EvictionREST.Create`). Called by [`crate::apiserver::server`].
//!
//! This control plane serves no PodDisruptionBudgets (the `policy` group is not served), so
//! every eviction takes the real server's "no PDB matches the pod" path: the pod gets the
//! condition `DisruptionTarget` (`addConditionAndDeletePod`: status True, reason
//! `EvictionByEvictionAPI`, message `Eviction API: evicting`) and is then deleted with the
//! Eviction's `deleteOptions`, gracefully as any delete ([`crate::storage::pod_deletion`]): the
//! kubelet stops its containers and the pod ends `Failed` with the condition kept. A dry run
//! changes nothing.

use serde_json::{Value, json};

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;
use crate::storage::store::{DeleteOptions, Store, Target, now_rfc3339};

/// The condition an eviction adds (pkg/registry/core/pod/storage/eviction.go,
/// `addConditionAndDeletePod`; k8s.io/api/core/v1 `DisruptionTarget`).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Its reason when the Eviction API evicted the pod.
pub const EVICTION_BY_EVICTION_API: &str = "EvictionByEvictionAPI";
const EVICTION_MESSAGE: &str = "Eviction API: evicting";

/// The checks `EvictionREST.Create` and the create handler make of the body before reading the
/// pod: the object's namespace, when it has one, is the request's
/// (k8s.io/apiserver/pkg/registry/rest `EnsureObjectNamespaceMatchesRequestNamespace`), and its
/// name is the URL's (`name in URL does not match name in Eviction object`, 400).
///
/// # Errors
/// 400 Bad Request, worded as the real server words it.
pub fn check(eviction: &Value, namespace: &str, name: &str) -> Result<()> {
    if !eviction.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    let body_namespace = eviction
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    if body_namespace.is_some_and(|ns| !ns.is_empty() && ns != namespace) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let body_name = eviction.pointer("/metadata/name").and_then(Value::as_str);
    if body_name != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    Ok(())
}

/// Evicts pod `(namespace, name)`: adds the `DisruptionTarget` condition (unless `dry_run`),
/// then deletes it with `options`. Answers the `Success` Status the real server answers, with
/// the code the create handler fills in (k8s.io/apiserver/pkg/endpoints/handlers/create.go: a
/// `Status` result without a code gets 201).
///
/// The `options` preconditions are checked against the pod before the condition is added, as
/// `getLatestPod` does, and a resourceVersion precondition then names the version the condition
/// wrote ("bump the resource version, since we are the one who modified it").
///
/// # Errors
/// 404 when the pod does not exist, 409 when a precondition does not hold, and what the delete
/// answers.
pub fn evict(
    store: &Store,
    pods: &ResourceInfo,
    (namespace, name): (&str, &str),
    options: &DeleteOptions,
    dry_run: bool,
) -> Result<Value> {
    let mut options = options.clone();
    if dry_run {
        store.get(pods, namespace, name)?;
    } else {
        let marked = store.modify(pods, namespace, name, Target::Status, |old, _| {
            check_preconditions(old, name, &options)?;
            let mut new = old.clone();
            set_disruption_target(&mut new, &now_rfc3339());
            Ok(new)
        })?;
        if options.precondition_rv.is_some() {
            options.precondition_rv = Some(marked.resource_version());
        }
    }
    store.delete(pods, namespace, name, &options)?;
    Ok(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201,
    }))
}

/// `getLatestPod`'s precondition checks, its 409s worded as there (the resource named `Pod`).
fn check_preconditions(pod: &Value, name: &str, options: &DeleteOptions) -> Result<()> {
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(wanted) = options
        .precondition_uid
        .as_deref()
        .filter(|u| !u.is_empty())
        && wanted != uid
    {
        return Err(ApiError::conflict(
            "Pod",
            name,
            &format!(
                "the UID in the precondition ({wanted}) does not match the UID in record ({uid}). \
                 The object might have been deleted and then recreated"
            ),
        ));
    }
    let rv = pod
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(wanted) = options.precondition_rv
        && wanted.to_string() != rv
    {
        return Err(ApiError::conflict(
            "Pod",
            name,
            &format!(
                "the ResourceVersion in the precondition ({wanted}) does not match the \
                 ResourceVersion in record ({rv}). The object might have been modified"
            ),
        ));
    }
    Ok(())
}

/// Sets the pod's `DisruptionTarget` condition as pkg/api/v1/pod `UpdatePodCondition` does: a
/// new condition, or the same one with its reason and message replaced, its
/// `lastTransitionTime` moved only when its status changes.
fn set_disruption_target(pod: &mut Value, now: &str) {
    let wanted = json!({
        "type": DISRUPTION_TARGET,
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": now,
        "reason": EVICTION_BY_EVICTION_API,
        "message": EVICTION_MESSAGE,
    });
    let status = pod
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})));
    let Some(conditions) = status.and_then(|s| {
        let s = s.as_object_mut()?;
        s.entry("conditions")
            .or_insert_with(|| json!([]))
            .as_array_mut()
    }) else {
        return;
    };
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(DISRUPTION_TARGET))
    {
        Some(existing) => {
            let mut updated = wanted;
            if existing.get("status") == updated.get("status") {
                updated["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = updated;
        }
        None => conditions.push(wanted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_names_the_pod_of_the_url() {
        let eviction = |ns: &str, name: &str| {
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": name, "namespace": ns}})
        };
        assert!(check(&eviction("ns", "p"), "ns", "p").is_ok());
        assert!(check(&eviction("", "p"), "ns", "p").is_ok());
        let cases = [
            (
                eviction("ns", "q"),
                "name in URL does not match name in Eviction object",
            ),
            (
                json!({"kind": "Eviction"}),
                "name in URL does not match name in Eviction object",
            ),
            (
                eviction("other", "p"),
                "the namespace of the provided object does not match the namespace sent on the request",
            ),
        ];
        for (body, message) in cases {
            let error = check(&body, "ns", "p").unwrap_err();
            assert_eq!((error.code, error.message.as_str()), (400, message));
        }
    }

    #[test]
    fn the_condition_is_added_once_and_keeps_its_transition_time() {
        let mut pod = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        set_disruption_target(&mut pod, "2026-01-01T00:00:00Z");
        set_disruption_target(&mut pod, "2026-01-01T00:00:09Z");
        let conditions = pod["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(
            conditions[1],
            json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                   "lastTransitionTime": "2026-01-01T00:00:00Z",
                   "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"})
        );
        let mut bare = json!({});
        set_disruption_target(&mut bare, "2026-01-01T00:00:00Z");
        assert_eq!(bare["status"]["conditions"][0]["type"], "DisruptionTarget");
    }
}
