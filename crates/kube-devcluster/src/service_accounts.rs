//! Service accounts as a real cluster keeps them: every namespace has a `default` one (the
//! ServiceAccount controller's job), and a pod may only be created under a service account that
//! exists (the API server's `ServiceAccount` admission plugin).
//!
//! - [`admit_pod`]: kubernetes plugin/pkg/admission/serviceaccount/admission.go, `Admit`: a pod
//!   without `serviceAccountName` gets `default`; a pod naming a service account that does not
//!   exist is refused with 403 Forbidden, `pods "NAME" is forbidden: error looking up service
//!   account NS/SA: serviceaccount "SA" not found` (the name is the pod's, or its
//!   `generateName` before one is generated: k8s.io/apiserver/pkg/admission/errors.go,
//!   `extractResourceName`). It runs for pods created through the API and for those the Job
//!   controller creates, whose refusal becomes the Job's `FailedCreate` Event.
//! - [`DefaultServiceAccounts`]: kubernetes pkg/controller/serviceaccount/serviceaccounts_controller.go
//!   creates `default` in every namespace that is not terminating, and again when it is
//!   deleted.
//!
//! The plugin looks `default` up several times before giving up, because the controller may not
//! have made it yet in a new namespace; here, where the controller runs in the same process and
//! recreates it at once, a pod under `default` is always admitted.

use serde_json::{Value, json};

use super::controllers::{Queue, Reconciler, builtin, is_deleting};
use super::error::{ApiError, Result};
use super::resources::{GroupResource, Registry, ResourceInfo};
use super::store::{EventType, Store, WatchEvent};

/// The service account of pods that name none.
pub const DEFAULT: &str = "default";

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
        .unwrap_or(DEFAULT)
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    if account == DEFAULT {
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

/// The ServiceAccount controller: a `default` service account in every live namespace.
pub(crate) struct DefaultServiceAccounts {
    store: Store,
    namespaces: std::sync::Arc<ResourceInfo>,
    accounts: std::sync::Arc<ResourceInfo>,
}

impl DefaultServiceAccounts {
    pub fn new(store: Store, registry: &Registry) -> Self {
        Self {
            store,
            namespaces: builtin(registry, "", "namespaces"),
            accounts: builtin(registry, "", "serviceaccounts"),
        }
    }
}

impl Reconciler for DefaultServiceAccounts {
    /// A namespace's name.
    type Key = String;

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<String>) {
        let object = &event.object;
        if event.gr == self.namespaces.group_resource() && event.event_type != EventType::Deleted {
            queue.add(object.name().to_string());
        } else if event.gr == self.accounts.group_resource()
            && event.event_type == EventType::Deleted
            && object.name() == DEFAULT
        {
            queue.add(object.namespace().to_string());
        }
    }

    fn resync(&mut self, queue: &mut Queue<String>) {
        let (namespaces, _) = self.store.list(&GroupResource::new("", "namespaces"), None);
        for namespace in namespaces {
            queue.add(namespace.name().to_string());
        }
    }

    fn reconcile(&mut self, namespace: String, _queue: &mut Queue<String>) {
        let live = self
            .store
            .get(&self.namespaces, "", &namespace)
            .is_ok_and(|ns| !is_deleting(&ns.value));
        if !live || self.store.get(&self.accounts, &namespace, DEFAULT).is_ok() {
            return;
        }
        let account = json!({"metadata": {"name": DEFAULT}});
        match self.store.create(&self.accounts, &namespace, account) {
            Ok(_) => {}
            Err(error) if error.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, namespace, "cannot create the default service account")
            }
        }
    }
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
}
