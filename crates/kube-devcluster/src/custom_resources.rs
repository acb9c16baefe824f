//! Custom resources (those a CRD serves) and the one write rule here that differs for them: an
//! update must name the resourceVersion it replaces.

use std::sync::Arc;

use serde_json::Value;

use super::error::{ApiError, FieldError, Result};
use super::resources::{GroupResource, Registry, ResourceInfo};
use super::store::{Store, StoredObject};

/// The CRD that serves `info`, or `None` for a built-in resource.
pub fn crd_of(
    store: &Store,
    registry: &Registry,
    info: &ResourceInfo,
) -> Option<Arc<StoredObject>> {
    if info.group.is_empty() {
        return None;
    }
    let crds = registry.get(&GroupResource::new(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ))?;
    store
        .get(&crds, "", &format!("{}.{}", info.resource, info.group))
        .ok()
}

/// A custom object's update (PUT, of the object or its `/status`) must carry
/// `metadata.resourceVersion`: the custom resource strategies do not allow unconditional updates
/// (k8s.io/apiextensions-apiserver/pkg/registry/customresource/strategy.go
/// `AllowUnconditionalUpdate` is false), and k8s.io/apiserver/pkg/registry/generic/registry/
/// store.go `Update` answers a missing one with this 422. Built-ins such as ConfigMap allow it
/// (the update then replaces whatever is stored).
pub fn check_update(info: &ResourceInfo, name: &str, new: &Value) -> Result<()> {
    let given = new
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    if given {
        return Ok(());
    }
    // The error's kind is the resource, qualified by its group (the TODO in store.go says so).
    Err(ApiError::invalid(
        &info.display_name(),
        name,
        vec![FieldError::invalid(
            "metadata.resourceVersion",
            "Invalid value: 0: must be specified for an update",
        )],
    ))
}
