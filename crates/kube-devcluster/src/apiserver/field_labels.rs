//! Which field selectors the server supports, per resource. The real server converts each field
//! label of a `fieldSelector` before it lists or watches, and a label it does not know is a 400
//! BadRequest with the conversion's message (k8s.io/apiserver/pkg/endpoints/handlers/get.go
//! `ListResource`: `errors.NewBadRequest(err.Error())`), rather than a selector that matches
//! nothing. The field labels of a built-in kind are its strategy's
//! ([`crate::api::strategy::FieldLabels`]), a custom resource's its CRD's.

use serde_json::Value;

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;
use crate::api::strategy::FieldLabels;

/// Converts one field label of a selector on `info` to the dotted path of the stored object it
/// selects on, as the server's `ConvertFieldLabel` does, or refuses it. `crd` is the CRD serving
/// `info`, for a custom resource.
pub fn convert(info: &ResourceInfo, crd: Option<&Value>, label: &str) -> Result<String> {
    if let Some(crd) = crd {
        // k8s.io/apiextensions-apiserver/pkg/apiserver/conversion/converter.go
        // `ConvertFieldLabel`: metadata.name, metadata.namespace when namespaced, and the
        // version's `selectableFields`.
        let known = label == "metadata.name"
            || (info.namespaced && label == "metadata.namespace")
            || selectable_fields(crd, &info.version).any(|f| f == label);
        return if known {
            Ok(label.to_string())
        } else {
            Err(not_supported(label))
        };
    }
    match &info.strategy.field_labels {
        Some(own) if own.labels.contains(&label) => Ok(own
            .paths
            .iter()
            .find(|(from, _)| *from == label)
            .map_or(label, |(_, path)| path)
            .to_string()),
        Some(FieldLabels {
            refusal_names: Some(kind),
            ..
        }) => Err(ApiError::bad_request(format!(
            "field label {label:?} not supported for {kind}"
        ))),
        Some(_) => Err(not_supported(label)),
        // k8s.io/apimachinery/pkg/runtime/conversion.go DefaultMetaV1FieldSelectorConversion.
        None if label == "metadata.name" || label == "metadata.namespace" => Ok(label.to_string()),
        None => Err(ApiError::bad_request(format!(
            "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ))),
    }
}

/// What the field of `label` reads as on an object that lacks it: the kind's
/// [`FieldLabels::absent`], else the empty string (a string field, or a custom resource's).
pub fn absent(info: &ResourceInfo, crd: Option<&Value>, label: &str) -> &'static str {
    let own = info
        .strategy
        .field_labels
        .as_ref()
        .filter(|_| crd.is_none());
    own.and_then(|own| own.absent.iter().find(|(l, _)| *l == label))
        .map_or("", |(_, value)| value)
}

fn not_supported(label: &str) -> ApiError {
    ApiError::bad_request(format!("field label not supported: {label}"))
}

/// The `selectableFields` of a CRD version, as field labels (`.spec.color` -> `spec.color`).
fn selectable_fields<'a>(crd: &'a Value, version: &'a str) -> impl Iterator<Item = &'a str> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |v| v.get("name").and_then(Value::as_str) == Some(version))
        .filter_map(|v| v.get("selectableFields").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
        .map(|path| path.trim_start_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::{GroupResource, Registry};
    use serde_json::json;

    fn builtin(group: &str, resource: &str) -> ResourceInfo {
        let registry = Registry::with_builtins();
        (*registry.get(&GroupResource::new(group, resource)).unwrap()).clone()
    }

    #[test]
    fn builtins_know_their_own_labels() {
        let pods = builtin("", "pods");
        assert_eq!(
            convert(&pods, None, "status.phase").unwrap(),
            "status.phase"
        );
        assert_eq!(convert(&pods, None, "spec.host").unwrap(), "spec.nodeName");
        let jobs = builtin("batch", "jobs");
        assert_eq!(
            convert(&jobs, None, "status.successful").unwrap(),
            "status.succeeded"
        );
        let error = convert(&jobs, None, "spec.x").unwrap_err();
        assert_eq!(
            error.message,
            "field label \"spec.x\" not supported for Job"
        );
        let error = convert(&builtin("", "namespaces"), None, "metadata.namespace").unwrap_err();
        assert_eq!(
            error.message,
            "field label not supported: metadata.namespace"
        );
        let error = convert(&builtin("", "configmaps"), None, "data.a").unwrap_err();
        assert_eq!(error.code, 400);
    }

    #[test]
    fn fields_that_are_not_strings_read_as_their_zero_value_when_absent() {
        let nodes = builtin("", "nodes");
        assert_eq!(absent(&nodes, None, "spec.unschedulable"), "false");
        assert_eq!(absent(&nodes, None, "metadata.name"), "");
        assert_eq!(
            absent(&builtin("", "pods"), None, "spec.hostNetwork"),
            "false"
        );
        assert_eq!(
            absent(&builtin("batch", "jobs"), None, "status.successful"),
            "0"
        );
    }

    #[test]
    fn custom_resources_know_their_selectable_fields() {
        let mut info = builtin("", "configmaps");
        info.group = "test.example.com".into();
        info.version = "v1".into();
        let crd = json!({"spec": {"versions": [{"name": "v1", "selectableFields": [{"jsonPath": ".spec.color"}]}]}});
        assert_eq!(
            convert(&info, Some(&crd), "spec.color").unwrap(),
            "spec.color"
        );
        assert!(convert(&info, Some(&crd), "metadata.namespace").is_ok());
        let error = convert(&info, Some(&crd), "spec.size").unwrap_err();
        assert_eq!(error.message, "field label not supported: spec.size");
    }
}
