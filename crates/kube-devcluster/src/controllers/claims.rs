//! PersistentVolumeClaims, bound at once to storage of the devcluster's own: each claim gets a
//! directory under the control plane's data directory ([`crate::kubelet::volumes::VolumeHost`]),
//! kept for the claim's life and removed with it, which every pod mounting the claim shares. The
//! claim's status says `Bound`, with its access modes and the capacity it asked for, as after a
//! real cluster's dynamic provisioning (pkg/controller/volume/persistentvolume/pv_controller.go
//! binds a claim to the volume its provisioner made; here no PersistentVolume object is made).
//!
//! A pod whose claim does not exist (or is not bound yet) is left unscheduled by the scheduler's
//! volume binding ([`crate::scheduler`]), and placed once the claim is bound.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::resources::{Registry, ResourceInfo, builtin};
use crate::kubelet::volumes::VolumeHost;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{EventType, Store, Target, WatchEvent};

/// The claim binder.
pub(crate) struct ClaimBinder {
    store: Store,
    claims: Arc<ResourceInfo>,
    host: Arc<VolumeHost>,
}

impl ClaimBinder {
    pub fn new(store: Store, registry: &Registry, host: Arc<VolumeHost>) -> Self {
        Self {
            store,
            claims: builtin(registry, "", "persistentvolumeclaims"),
            host,
        }
    }
}

/// The status of a claim bound to storage of its own.
fn bound_status(claim: &Value) -> Value {
    let spec = claim.get("spec").cloned().unwrap_or_default();
    json!({
        "phase": "Bound",
        "accessModes": spec.get("accessModes").cloned().unwrap_or(json!([])),
        "capacity": {
            "storage": spec.pointer("/resources/requests/storage").cloned().unwrap_or(json!("0")),
        },
    })
}

impl Reconciler for ClaimBinder {
    /// (namespace, name) of a claim.
    type Key = (String, String);

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<Self::Key>) {
        if event.gr != self.claims.group_resource() {
            return;
        }
        let claim = &event.object;
        if event.event_type == EventType::Deleted {
            self.host.remove_claim(claim.uid());
            return;
        }
        queue.add((claim.namespace().to_string(), claim.name().to_string()));
    }

    fn resync(&mut self, queue: &mut Queue<Self::Key>) {
        let (claims, _) = self.store.list(&self.claims.group_resource(), None);
        for claim in claims {
            queue.add((claim.namespace().to_string(), claim.name().to_string()));
        }
    }

    fn reconcile(&mut self, (namespace, name): Self::Key, _queue: &mut Queue<Self::Key>) {
        let Ok(claim) = self.store.get(&self.claims, &namespace, &name) else {
            return;
        };
        let bound = claim.value.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
        if bound || is_deleting(&claim.value) {
            return;
        }
        if let Err(error) = self.host.claim_dir(claim.uid()) {
            tracing::warn!(%error, claim = name, "cannot provision a claim");
            return;
        }
        let uid = claim.uid().to_string();
        // The binder first names the volume in the claim's spec, as the PV controller's
        // `bindVolumeToClaim` does (pkg/controller/volume/persistentvolume/pv_controller.go; a
        // dynamically provisioned volume is named `pvc-<claim uid>`, `getProvisionedVolumeNameForClaim`),
        // with its `bind-completed` and `bound-by-controller` annotations; then it writes the status.
        let named = self
            .store
            .modify(&self.claims, &namespace, &name, Target::Main, |old, _| {
                if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                    return Err(crate::api::error::ApiError::not_found(
                        "persistentvolumeclaims",
                        &name,
                    ));
                }
                let mut new = old.clone();
                if new.pointer("/spec/volumeName").is_none() {
                    new["spec"]["volumeName"] = json!(format!("pvc-{uid}"));
                }
                let annotations = &mut new["metadata"]["annotations"];
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations["pv.kubernetes.io/bind-completed"] = json!("yes");
                annotations["pv.kubernetes.io/bound-by-controller"] = json!("yes");
                Ok(new)
            });
        if let Err(error) = named {
            if error.code != 404 {
                tracing::warn!(%error, claim = name, "cannot bind a claim");
            }
            return;
        }
        let written =
            self.store
                .modify(&self.claims, &namespace, &name, Target::Status, |old, _| {
                    if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                        return Err(crate::api::error::ApiError::not_found(
                            "persistentvolumeclaims",
                            &name,
                        ));
                    }
                    let mut new = old.clone();
                    new["status"] = bound_status(old);
                    Ok(new)
                });
        if let Err(error) = written
            && error.code != 404
        {
            tracing::warn!(%error, claim = name, "cannot bind a claim");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_claim_has_what_it_asked_for() {
        let claim = json!({"spec": {"accessModes": ["ReadWriteOnce"],
                                    "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            bound_status(&claim),
            json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                   "capacity": {"storage": "1Gi"}})
        );
    }
}
