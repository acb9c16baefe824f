//! Per-kind behaviour that the API server and the in-process controllers both apply, kept by kind
//! as Kubernetes keeps it in `pkg/registry/<group>/<kind>/strategy.go` and its admission plugins:
//! what a new Pod ([`pods`], [`pod_defaults`]) or Job ([`jobs`]) gets, a pod's service account
//! admission ([`pods::admit_pod`]), a Secret's `stringData` ([`secrets`]), a Service's defaults,
//! cluster IP and node ports ([`services`], [`node_ports`]), and Events served under two APIs
//! ([`events`]). Each kind's strategy ([`crate::api::strategy::Strategy`]) is beside its rules
//! (`pods::STRATEGY`, `jobs::STRATEGY`, ...; the kinds with no module of their own in [`kinds`],
//! which also lists the built-in kinds). The controllers write to the store directly, not
//! through the API, so they call these themselves where the API server would. Depends only on
//! [`crate::storage`] and [`crate::api`].

use std::sync::Arc;

use serde_json::Value;

use crate::api::error::Result;
use crate::api::resources::ResourceInfo;

pub mod events;
pub mod jobs;
pub mod kinds;
pub mod node_ports;
pub mod pod_defaults;
pub mod pods;
pub mod secrets;
pub mod services;
pub mod validation;

/// Create-time defaulting that needs the object's identity (e.g. a Job's selector from its uid).
pub type CreateHook = Arc<dyn Fn(&ResourceInfo, &mut Value) -> Result<()> + Send + Sync>;

/// The create-time defaulting the real API server does (each kind's strategy's
/// `prepare_for_create`: a Job's selector, a Pod's status). For `ApiState::on_create`.
pub fn create_hook() -> CreateHook {
    Arc::new(defaults_on_create)
}

/// See [`create_hook`].
pub fn defaults_on_create(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    (info.strategy.prepare_for_create)(obj);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::{Registry, builtin};

    #[test]
    fn defaults_apply_only_to_jobs_and_pods() {
        let registry = Registry::with_builtins();
        let cm = builtin(&registry, "", "configmaps");
        let mut obj = serde_json::json!({"metadata": {"name": "x", "uid": "u"}});
        let before = obj.clone();
        defaults_on_create(&cm, &mut obj).unwrap();
        assert_eq!(obj, before);
        let pods = builtin(&registry, "", "pods");
        defaults_on_create(&pods, &mut obj).unwrap();
        assert_eq!(obj["status"]["phase"], "Pending");
    }
}
