//! The namespaces that cannot be deleted, as the API server's `NamespaceLifecycle` admission
//! plugin keeps them (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go:
//! `immortalNamespaces` are `default`, `kube-system` and `kube-public`).

use crate::api::error::ApiError;
use crate::api::resources::ResourceInfo;

const IMMORTAL: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Refuses the delete (dry run or not) of an immortal namespace: 403 Forbidden, with the
/// plugin's message `this namespace may not be deleted`.
pub fn check_delete(info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    if info.group.is_empty() && info.resource == "namespaces" && IMMORTAL.contains(&name) {
        return Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ),
            details: Some(serde_json::json!({"name": name, "kind": "namespaces"})),
        });
    }
    Ok(())
}
