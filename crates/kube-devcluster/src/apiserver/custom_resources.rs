//! Custom resources (those a CRD serves) and the one write rule here that differs for them (and
//! for the few built-ins whose strategies say the same): an update must name the
//! resourceVersion it replaces.

use std::sync::Arc;

use serde_json::Value;

use crate::api::error::{ApiError, FieldError, Result};
use crate::api::resources::{GroupResource, Registry, ResourceInfo};
use crate::storage::store::{Store, StoredObject};

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

/// Whether an update (PUT, of the object or its `/status`) must carry
/// `metadata.resourceVersion`: when the resource's strategy does not allow unconditional
/// updates. `AllowUnconditionalUpdate` is false for custom resources
/// (k8s.io/apiextensions-apiserver/pkg/registry/customresource/strategy.go), CRDs
/// (.../registry/customresourcedefinition/strategy.go) and Leases
/// (k8s.io/kubernetes/pkg/registry/coordination/lease/strategy.go); the other built-ins served
/// here (ConfigMap, Pod, Job, ...) allow it, and the update then replaces what is stored.
pub fn requires_resource_version(info: &ResourceInfo, custom: bool) -> bool {
    custom
        || matches!(
            (info.group.as_str(), info.resource.as_str()),
            ("apiextensions.k8s.io", "customresourcedefinitions")
                | ("coordination.k8s.io", "leases")
        )
}

/// Refuses an update without `metadata.resourceVersion` as
/// k8s.io/apiserver/pkg/registry/generic/registry/store.go `Update` does when the resource
/// requires one ([`requires_resource_version`]): 422.
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

/// A body for a custom resource naming another apiVersion or kind than the resource's. The
/// request decoder copies any object into the resource's unstructured type (k8s.io/apimachinery
/// pkg/runtime/scheme.go `Convert` of two `Unstructured`s), then the handler refuses another
/// group or version (k8s.io/apiserver pkg/endpoints/handlers/create.go and update.go,
/// `AcceptsGroupVersion`: 400 `the API version in the data (apps/v1) does not match the expected
/// API version (test.example.com/v1)`) and the custom resource validator another kind
/// (k8s.io/apiextensions-apiserver pkg/registry/customresource/validator.go `ValidateTypeMeta`:
/// 422 `kind: Invalid value: "Gadget": must be Widget`). `None` when both are the resource's or
/// left out (the decoder fills them in from the path).
pub fn foreign_type(info: &ResourceInfo, obj: &Value) -> Option<ApiError> {
    let text = |field: &str| obj.get(field).and_then(Value::as_str).unwrap_or_default();
    let expected = info.api_version();
    if !text("apiVersion").is_empty() && text("apiVersion") != expected {
        return Some(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({expected})",
            text("apiVersion")
        )));
    }
    let kind = text("kind");
    if kind.is_empty() || kind == info.kind {
        return None;
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(ApiError::invalid(
        &info.qualified_kind(),
        name,
        vec![FieldError::invalid(
            "kind",
            format!("Invalid value: {kind:?}: must be {}", info.kind),
        )],
    ))
}
