//! The checks the real API server's validation makes of Pods, Jobs, ConfigMaps and Secrets
//! beyond their schema, with its messages (so kubectl prints the same errors):
//!
//! - a pod spec (of a Pod, or a Job's template) needs containers, each with a name (a unique
//!   DNS-1123 label) and an image; its `restartPolicy` is one of `Always`, `OnFailure`, `Never`
//!   (k8s.io/kubernetes pkg/apis/core/validation `ValidatePodSpec`, `validateContainers`,
//!   `validateRestartPolicy`);
//! - a Job's template `restartPolicy` is `OnFailure` or `Never` (pkg/apis/batch/validation
//!   `validateJobSpec`);
//! - a Pod's spec cannot change but for images, `activeDeadlineSeconds`, `tolerations` and
//!   `terminationGracePeriodSeconds` (core validation `ValidatePodUpdate`);
//! - a ConfigMap or Secret marked `immutable: true` keeps its data and stays immutable
//!   (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
//!
//! The real server defaults a pod's `restartPolicy` to `Always` before validating; this server
//! does not default it, so an absent value is taken as that default.

use serde_json::Value;

use crate::field_error::FieldError;
use crate::object_meta::dns1123_label;

/// Problems of a create or update of `obj` (a built-in of `group`/`resource`).
pub fn check(group: &str, resource: &str, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match (group, resource) {
        ("", "pods") => {
            if let Some(spec) = obj.get("spec") {
                pod_spec(spec, "spec", &mut errors);
            }
            if let Some(old) = old {
                pod_update(obj, old, &mut errors);
            }
        }
        ("batch", "jobs") => {
            if let Some(spec) = obj.pointer("/spec/template/spec") {
                pod_spec(spec, "spec.template.spec", &mut errors);
            }
            job_restart_policy(obj, &mut errors);
        }
        ("", "configmaps") => {
            if let Some(old) = old {
                immutable_data(obj, old, &["data", "binaryData"], &mut errors);
            }
        }
        ("", "secrets") => {
            if let Some(old) = old {
                immutable_data(obj, old, &["data"], &mut errors);
            }
        }
        _ => {}
    }
    errors
}

fn str_at<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// `ValidatePodSpec`'s checks of containers and restartPolicy, for the spec at `path`.
fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        errors.push(FieldError::required(format!("{path}.containers")));
    }
    // Names are unique across init and regular containers (validateInitContainers checks
    // init containers against the others' names too).
    let mut names: Vec<&str> = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| str_at(c, "name"))
        .collect();
    for (i, container) in containers.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        match str_at(container, "name").unwrap_or_default() {
            "" => errors.push(FieldError::required(format!("{at}.name"))),
            name => {
                if let Some(problem) = dns1123_label(name) {
                    errors.push(FieldError::invalid(
                        format!("{at}.name"),
                        format!("Invalid value: {name:?}: {problem}"),
                    ));
                }
                if names.contains(&name) {
                    errors.push(FieldError::duplicate(
                        format!("{at}.name"),
                        &Value::from(name),
                    ));
                }
                names.push(name);
            }
        }
        if str_at(container, "image").unwrap_or_default().is_empty() {
            errors.push(FieldError::required(format!("{at}.image")));
        }
    }
    if let Some(policy) = str_at(spec, "restartPolicy")
        && !matches!(policy, "" | "Always" | "OnFailure" | "Never")
    {
        errors.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            format!(
                "Unsupported value: {policy:?}: supported values: \"Always\", \"OnFailure\", \"Never\""
            ),
        ));
    }
}

/// `validateJobSpec`: Always (the pod default, so also an absent value) is "Required", any
/// other value but OnFailure or Never "Unsupported".
fn job_restart_policy(job: &Value, errors: &mut Vec<FieldError>) {
    let path = "spec.template.spec.restartPolicy";
    match job
        .pointer("/spec/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "OnFailure" | "Never" => {}
        "" | "Always" => errors.push(FieldError {
            reason: "FieldValueRequired",
            field: path.into(),
            message: "Required value: valid values: \"OnFailure\", \"Never\"".into(),
        }),
        // The real server reports this besides the pod spec's own Unsupported value.
        other => errors.push(FieldError::not_supported(
            path,
            format!("Unsupported value: {other:?}: supported values: \"OnFailure\", \"Never\""),
        )),
    }
}

/// What `ValidatePodUpdate` allows to change in a Pod's spec.
const POD_UPDATE_FORBIDDEN: &str = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: the old spec with the mutable fields taken from the new one must equal
/// the new spec.
fn pod_update(new: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    let (Some(new_spec), Some(old_spec)) = (new.get("spec"), old.get("spec")) else {
        return;
    };
    let mut allowed = old_spec.clone();
    for list in ["containers", "initContainers"] {
        let new_images: Vec<Option<Value>> = new_spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| c.get("image").cloned())
            .collect();
        if let Some(Value::Array(containers)) = allowed.get_mut(list)
            && containers.len() == new_images.len()
        {
            for (container, image) in containers.iter_mut().zip(new_images) {
                if let (Some(map), Some(image)) = (container.as_object_mut(), image) {
                    map.insert("image".into(), image);
                }
            }
        }
    }
    for field in [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
    ] {
        if let Some(map) = allowed.as_object_mut() {
            match new_spec.get(field) {
                Some(value) => map.insert(field.into(), value.clone()),
                None => map.remove(field),
            };
        }
    }
    if &allowed != new_spec {
        errors.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
}

const IMMUTABLE_SET: &str = "Forbidden: field is immutable when `immutable` is set";

/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate`: once `immutable: true`, it stays, and so
/// do the data fields. A Secret's `stringData` is written into `data` by the real server, so
/// any `stringData` is a change of `data`.
fn immutable_data(new: &Value, old: &Value, fields: &[&str], errors: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errors.push(FieldError::forbidden("immutable", IMMUTABLE_SET));
    }
    let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_some_and(|m| m.is_empty()));
    for &field in fields {
        let (a, b) = (new.get(field), old.get(field));
        let changed = if empty(a) && empty(b) { false } else { a != b };
        let string_data = field == "data" && !empty(new.get("stringData"));
        if changed || string_data {
            errors.push(FieldError::forbidden(field, IMMUTABLE_SET));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(errors: &[FieldError]) -> Vec<String> {
        errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn pod_specs_need_named_unique_containers_with_images() {
        let pod = json!({"spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "a", "image": "i"}, {"name": "a", "image": "i"}, {"image": "i"}, {"name": "x"}
        ]}});
        assert_eq!(
            fields(&check("", "pods", &pod, None)),
            vec![
                "spec.containers[1].name: Duplicate value: \"a\"",
                "spec.containers[2].name: Required value",
                "spec.containers[3].image: Required value",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
        let ok = json!({"spec": {"containers": [{"name": "a", "image": "i"}]}});
        assert!(check("", "pods", &ok, None).is_empty());
    }

    #[test]
    fn job_templates_restart_on_failure_or_never() {
        let job = |policy: Value| json!({"spec": {"template": {"spec": {"restartPolicy": policy, "containers": [{"name": "a", "image": "i"}]}}}});
        assert!(check("batch", "jobs", &job(json!("Never")), None).is_empty());
        assert!(check("batch", "jobs", &job(json!("OnFailure")), None).is_empty());
        for policy in [json!("Always"), Value::Null] {
            assert_eq!(
                fields(&check("batch", "jobs", &job(policy), None)),
                vec![
                    "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
                ]
            );
        }
    }

    #[test]
    fn pod_updates_change_only_what_the_server_allows() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "i"}], "restartPolicy": "Never"}});
        let image = json!({"spec": {"containers": [{"name": "a", "image": "j"}], "restartPolicy": "Never", "activeDeadlineSeconds": 5}});
        assert!(check("", "pods", &image, Some(&old)).is_empty());
        let policy = json!({"spec": {"containers": [{"name": "a", "image": "i"}], "restartPolicy": "Always"}});
        assert_eq!(
            check("", "pods", &policy, Some(&old))[0].field,
            "spec".to_string()
        );
    }

    #[test]
    fn immutable_config_keeps_its_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(check("", "configmaps", &old, Some(&old)).is_empty());
        let changed = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(
            fields(&check("", "configmaps", &changed, Some(&old))),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        let unset = json!({"immutable": false, "data": {"a": "1"}});
        assert_eq!(
            fields(&check("", "secrets", &unset, Some(&old))),
            vec!["immutable: Forbidden: field is immutable when `immutable` is set"]
        );
        let mutable = json!({"data": {"a": "1"}});
        assert!(check("", "configmaps", &changed, Some(&mutable)).is_empty());
    }
}
