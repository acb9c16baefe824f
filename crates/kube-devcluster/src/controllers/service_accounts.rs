//! The ServiceAccount controller ([`DefaultServiceAccounts`], kubernetes
//! pkg/controller/serviceaccount/serviceaccounts_controller.go): every namespace that is not
//! terminating has a `default` service account, made again when it is deleted. Pods may only
//! be created under a service account that exists ([`crate::registry::pods::admit_pod`]); the
//! admission plugin looks `default` up several times before giving up, because the controller
//! may not have made it yet in a new namespace; here, where the controller runs in the same
//! process and recreates it at once, a pod under `default` is always admitted.

use serde_json::json;

use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::registry::pods::DEFAULT_SERVICE_ACCOUNT as DEFAULT;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{EventType, Store, WatchEvent};

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
