//! What the real API server checks before it stores a write, where operators commonly trip:
//! object metadata ([`kube_schema_check::object_meta`]: names, label keys and values, annotations), the size
//! of ConfigMaps and Secrets, and immutable fields. Failures are 422 `Invalid` with one cause
//! per field.

use kube_schema_check::object_meta::{self, NameRule};
use serde_json::Value;

use crate::api::error::FieldError;
use crate::api::resources::ResourceInfo;

/// The problems the real server's metadata and built-in validation finds in a create (`old` is
/// `None`) or an update; the server adds the schema's own to the same list.
pub fn check(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = object_meta::validate(obj, name_rule(info), old.is_none());
    if info.group.is_empty() && matches!(info.resource.as_str(), "configmaps" | "secrets") {
        let size: usize = ["data", "binaryData", "stringData"]
            .into_iter()
            .filter_map(|field| obj.get(field).and_then(Value::as_object))
            .flat_map(|map| map.iter())
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAX_CONFIG_BYTES {
            errors.push(FieldError::too_long(
                "[]",
                format!("Too long: may not be more than {MAX_CONFIG_BYTES} bytes"),
            ));
        }
    }
    if let Some(old) = old {
        immutable_fields(info, obj, old, &mut errors);
    }
    if info.group == "apiextensions.k8s.io" && info.resource == "customresourcedefinitions" {
        errors.extend(crd_rules(obj));
    }
    if info.schema.is_none() {
        errors.extend(crate::apiserver::workload_validation::check(
            &info.group,
            &info.resource,
            obj,
            old,
        ));
    }
    errors
}

/// The largest data a ConfigMap or Secret holds (1 MiB), as on the real server.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// Namespaces and Services need a DNS-1123 label, most objects (and every custom resource) a
/// subdomain.
fn name_rule(info: &ResourceInfo) -> NameRule {
    if info.group.is_empty() && matches!(info.resource.as_str(), "namespaces" | "services") {
        NameRule::Label
    } else {
        NameRule::Subdomain
    }
}

/// The problems of the CEL rules in each version's schema of a CRD, as the real server refuses
/// them when the CRD is written (k8s.io/apiextensions-apiserver pkg/apis/apiextensions/validation
/// validation.go, `ValidateCustomResourceDefinitionOpenAPISchema`).
fn crd_rules(crd: &Value) -> Vec<FieldError> {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    versions
        .iter()
        .enumerate()
        .filter_map(|(i, version)| {
            let schema = version.pointer("/schema/openAPIV3Schema")?;
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            Some(kube_schema_check::schema::rules::check_crd_rules(
                schema, &path,
            ))
        })
        .flatten()
        .collect()
}

fn immutable_fields(info: &ResourceInfo, obj: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    if info.group == "batch" && info.resource == "jobs" {
        job_spec_update(obj, old, errors);
    }
}

/// What a Job's update may not change (pkg/apis/batch/validation `ValidateJobSpecUpdate`): its
/// template, selector, completion mode, pod failure and success policies, per-index back-off
/// limit and `managedBy`; and `completions`, except that an Indexed Job may change it together
/// with `parallelism` (`validateCompletions`, elastic Indexed Jobs).
fn job_spec_update(obj: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    let at = |v: &'_ Value, field: &str| v.pointer(&format!("/spec/{field}")).cloned();
    if at(obj, "template") != at(old, "template") {
        errors.push(FieldError::invalid("spec.template", "field is immutable"));
    }
    for field in [
        "selector",
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        let new = at(obj, field);
        if new != at(old, field) {
            if field == "selector" {
                errors.push(FieldError::invalid("spec.selector", "field is immutable"));
            } else {
                errors.push(FieldError::immutable(format!("spec.{field}"), new.as_ref()));
            }
        }
    }
    let completions = at(obj, "completions");
    if completions != at(old, "completions") {
        let indexed = at(obj, "completionMode").as_ref().and_then(Value::as_str) == Some("Indexed");
        if !indexed {
            errors.push(FieldError::immutable(
                "spec.completions",
                completions.as_ref(),
            ));
        } else if let Some(completions) = completions.filter(|c| !c.is_null())
            && Some(&completions) != obj.pointer("/spec/parallelism")
        {
            errors.push(FieldError::invalid(
                "spec.completions",
                format!(
                    "Invalid value: {completions}: can only be modified in tandem with spec.parallelism"
                ),
            ));
        }
    }
}
