//! Pods as the API server admits and stores them, for the writes of the API server and of the Job
//! controller alike (which writes its pods to the store directly):
//!
//! - [`pod_defaults_on_create`]: a new pod's spec defaults ([`super::pod_defaults`]) and
//!   `status.phase: Pending`;
//! - [`admit_pod`]: the `ServiceAccount` admission plugin (kubernetes
//!   plugin/pkg/admission/serviceaccount/admission.go, `Admit`): a pod without
//!   `serviceAccountName` gets `default`; a pod naming a service account that does not exist is
//!   refused with 403 Forbidden, `pods "NAME" is forbidden: error looking up service account
//!   NS/SA: serviceaccount "SA" not found` (the name is the pod's, or its `generateName` before
//!   one is generated: k8s.io/apiserver/pkg/admission/errors.go, `extractResourceName`). For
//!   the Job controller's pods a refusal becomes the Job's `FailedCreate` Event.

use serde_json::{Value, json};

use crate::api::error::{ApiError, Result};
use crate::api::resources::{Registry, ResourceInfo, builtin};
use crate::api::strategy::{FieldLabels, Strategy};
use crate::storage::store::Store;

/// A Pod's rules: it keeps `metadata.generation` (pkg/registry/core/pod/strategy.go
/// `PrepareForCreate`), a delete answers the deleted pod and `kubectl get all` lists it
/// (pkg/registry/core/pod/storage/storage.go `ReturnDeletedObject`, `Categories`), it has a
/// `/log`, an `/exec` and an `/eviction`, its field labels are pkg/apis/core/v1/conversion.go's (`spec.host` the old name of
/// `spec.nodeName`), every write gets the pod defaults ([`super::pod_defaults`]) and a new pod
/// [`pod_defaults_on_create`].
pub static STRATEGY: Strategy = Strategy {
    tracks_generation: true,
    delete_returns_object: true,
    categories: &["all"],
    log_subresource: true,
    exec_subresource: true,
    eviction_subresource: true,
    field_labels: Some(FieldLabels {
        labels: &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        paths: &[("spec.host", "spec.nodeName")],
        // pkg/registry/core/pod/strategy.go `ToSelectableFields`:
        // `strconv.FormatBool(pod.Spec.HostNetwork)`.
        absent: &[("spec.hostNetwork", "false")],
        refusal_names: None,
    }),
    decode: super::pod_defaults::pod,
    prepare_for_create: pod_defaults_on_create,
    validate: super::validation::pod,
    ..Strategy::DEFAULT
};

/// A new pod as the real API server stores it: the spec's defaults ([`super::pod_defaults`], which
/// every write through the API gets too; the Job controller's pods are written straight to the
/// store) and `status.phase: Pending`.
pub fn pod_defaults_on_create(pod: &mut Value) {
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    super::pod_defaults::pod(pod);
    pod["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
}

/// The service account of pods that name none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The `ServiceAccount` admission plugin for a pod being created in `namespace` (any other
/// object passes untouched): defaults `serviceAccountName` (and its deprecated alias
/// `serviceAccount`, which the v1 API mirrors) and refuses an unknown service account.
pub fn admit_pod(
    store: &Store,
    registry: &Registry,
    info: &ResourceInfo,
    namespace: &str,
    pod: &mut Value,
) -> Result<()> {
    if !(info.group.is_empty() && info.resource == "pods") {
        return Ok(());
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let account = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .or_else(|| spec.get("serviceAccount").and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    if account == DEFAULT_SERVICE_ACCOUNT {
        return Ok(());
    }
    let accounts = builtin(registry, "", "serviceaccounts");
    if store.get(&accounts, namespace, &account).is_ok() {
        return Ok(());
    }
    let text = |field: &str| {
        pod.pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let name = text("name")
        .or_else(|| text("generateName"))
        .unwrap_or_else(|| "Unknown".into());
    Err(ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!(
            "pods \"{name}\" is forbidden: error looking up service account \
             {namespace}/{account}: serviceaccount \"{account}\" not found"
        ),
        details: Some(json!({"name": name, "kind": "pods"})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(registry: &Registry) -> std::sync::Arc<ResourceInfo> {
        builtin(registry, "", "pods")
    }

    #[test]
    fn a_pod_without_an_account_runs_as_default() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        admit_pod(&store, &registry, &pods(&registry), "ns", &mut pod).unwrap();
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert_eq!(pod["spec"]["serviceAccount"], "default");
    }

    #[test]
    fn an_unknown_account_is_forbidden_naming_the_generate_name() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let mut pod = json!({"metadata": {"generateName": "job-"},
                             "spec": {"serviceAccountName": "runner"}});
        let error = admit_pod(&store, &registry, &pods(&registry), "ns", &mut pod).unwrap_err();
        assert_eq!((error.code, error.reason), (403, "Forbidden"));
        assert_eq!(
            error.message,
            "pods \"job-\" is forbidden: error looking up service account ns/runner: \
             serviceaccount \"runner\" not found"
        );
        let accounts = builtin(&registry, "", "serviceaccounts");
        store
            .create(&accounts, "ns", json!({"metadata": {"name": "runner"}}))
            .unwrap();
        admit_pod(&store, &registry, &pods(&registry), "ns", &mut pod).unwrap();
    }

    #[test]
    fn other_kinds_pass() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let jobs = builtin(&registry, "batch", "jobs");
        let mut job = json!({"spec": {"serviceAccountName": "nobody"}});
        admit_pod(&store, &registry, &jobs, "ns", &mut job).unwrap();
        assert_eq!(job, json!({"spec": {"serviceAccountName": "nobody"}}));
    }

    #[test]
    fn pod_defaults_set_pending_and_restart_always() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        pod_defaults_on_create(&mut pod);
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        let mut never = json!({"spec": {"restartPolicy": "Never"}});
        pod_defaults_on_create(&mut never);
        assert_eq!(never["spec"]["restartPolicy"], "Never");
    }
}
