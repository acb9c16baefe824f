//! The checks the real API server's validation makes of Pods, Jobs, Deployments, ConfigMaps,
//! Secrets and CRDs beyond their metadata and schema, with its messages (so kubectl prints the
//! same errors), one function per kind for its strategy's `validate`:
//!
//! - a pod spec (of a Pod, or a Job's template) needs containers, each with a name (a unique
//!   DNS-1123 label) and an image; its `restartPolicy` is one of `Always`, `OnFailure`, `Never`
//!   (k8s.io/kubernetes pkg/apis/core/validation `ValidatePodSpec`, `validateContainers`,
//!   `validateRestartPolicy`);
//! - a Job's template `restartPolicy` is `OnFailure` or `Never` (pkg/apis/batch/validation
//!   `validateJobSpec`), and an update keeps what [`job_spec_update`] lists;
//! - a Pod's spec cannot change but for images, `activeDeadlineSeconds`, `tolerations` and
//!   `terminationGracePeriodSeconds` (core validation `ValidatePodUpdate`);
//! - a ConfigMap or Secret marked `immutable: true` keeps its data and stays immutable
//!   (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`);
//! - a Deployment has a non-negative `replicas`, a non-empty `selector` that its template's
//!   labels match and that never changes, and a template that is a valid pod spec with
//!   `restartPolicy: Always` and no `activeDeadlineSeconds` (pkg/apis/apps/validation
//!   `ValidateDeploymentSpec`, `ValidatePodTemplateSpecForReplicaSet`; the selector's
//!   immutability is the apps/v1 strategy's `ValidateUpdate`);
//! - a ConfigMap or Secret holds at most [`MAX_CONFIG_BYTES`];
//! - a CRD's schemas have valid CEL rules.
//!
//! A bad value in a message is printed as k8s.io/apimachinery's `field.Error` prints it: numbers
//! as they are, strings quoted, anything else as its JSON.
//!
//! The real server defaults a pod's `restartPolicy` to `Always` before validating; this server
//! does not default it, so an absent value is taken as that default.

use kube_schema_check::FieldError;
use kube_schema_check::object_meta::dns1123_label;
use serde_json::Value;

use crate::storage::selector::LabelSelector;

/// A Pod's problems: its spec, and on update what may not change (pkg/registry/core/pod
/// strategy.go `Validate`, `ValidateUpdate`).
pub fn pod(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(spec) = obj.get("spec") {
        pod_spec(spec, "spec", &mut errors);
    }
    if let Some(old) = old {
        pod_update(obj, old, &mut errors);
    }
    errors
}

/// A Job's problems: on update what may not change ([`job_spec_update`]), then its template and
/// its restart policy (pkg/registry/batch/job/strategy.go `Validate`, `ValidateUpdate`).
pub fn job(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(old) = old {
        job_spec_update(obj, old, &mut errors);
    }
    if let Some(spec) = obj.pointer("/spec/template/spec") {
        pod_spec(spec, "spec.template.spec", &mut errors);
    }
    job_restart_policy(obj, &mut errors);
    errors
}

/// A Deployment's problems: its spec, and on update its selector, which never changes
/// (pkg/registry/apps/deployment/strategy.go `ValidateUpdate`).
pub fn deployment(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    deployment_spec(obj, &mut errors);
    if let Some(old) = old {
        let selector = |d: &Value| d.pointer("/spec/selector").cloned();
        if selector(obj) != selector(old) {
            errors.push(FieldError::invalid(
                "spec.selector",
                format!(
                    "Invalid value: {}: field is immutable",
                    go_label_selector_json(selector(obj).as_ref())
                ),
            ));
        }
    }
    errors
}

/// A ConfigMap's problems: its size, and on update its data when it is immutable.
pub fn config_map(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = config_size(obj);
    if let Some(old) = old {
        immutable_data(obj, old, &["data", "binaryData"], &mut errors);
    }
    errors
}

/// A Secret's problems: its size, and on update its data when it is immutable.
pub fn secret(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = config_size(obj);
    if let Some(old) = old {
        immutable_data(obj, old, &["data"], &mut errors);
    }
    errors
}

/// The largest data a ConfigMap or Secret holds (1 MiB), as on the real server.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

fn config_size(obj: &Value) -> Vec<FieldError> {
    let size: usize = ["data", "binaryData", "stringData"]
        .into_iter()
        .filter_map(|field| obj.get(field).and_then(Value::as_object))
        .flat_map(|map| map.iter())
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > MAX_CONFIG_BYTES {
        vec![FieldError::too_long(
            "[]",
            format!("Too long: may not be more than {MAX_CONFIG_BYTES} bytes"),
        )]
    } else {
        Vec::new()
    }
}

/// A CustomResourceDefinition's problems: the CEL rules in each version's schema, as the real
/// server refuses them when the CRD is written (k8s.io/apiextensions-apiserver
/// pkg/apis/apiextensions/validation validation.go,
/// `ValidateCustomResourceDefinitionOpenAPISchema`).
pub fn custom_resource_definition(crd: &Value, _old: Option<&Value>) -> Vec<FieldError> {
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

/// `ValidateDeploymentSpec` and the template checks of `ValidatePodTemplateSpecForReplicaSet`,
/// in their order.
fn deployment_spec(deployment: &Value, errors: &mut Vec<FieldError>) {
    let Some(spec) = deployment.get("spec") else {
        return;
    };
    if let Some(replicas) = spec.get("replicas").and_then(Value::as_i64)
        && replicas < 0
    {
        errors.push(FieldError::invalid(
            "spec.replicas",
            format!("Invalid value: {replicas}: must be greater than or equal to 0"),
        ));
    }
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let selects_something = selector.is_some_and(|s| {
        let count = |key: &str| {
            s.get(key).map_or(0, |v| {
                v.as_object().map_or(0, |m| m.len()) + v.as_array().map_or(0, Vec::len)
            })
        };
        count("matchLabels") + count("matchExpressions") > 0
    });
    match selector {
        None => errors.push(FieldError::required("spec.selector")),
        Some(s) if !selects_something => errors.push(FieldError::invalid(
            "spec.selector",
            format!(
                "Invalid value: {}: empty selector is invalid for deployment",
                go_label_selector_json(Some(s))
            ),
        )),
        Some(_) => {}
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let labels = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object);
    if let Some(selector) = selector.filter(|_| selects_something)
        // An operator the server does not know selects nothing here.
        && !LabelSelector::from_object(selector).is_some_and(|s| s.matches(labels))
    {
        let shown = labels.map_or("null".to_string(), |l| Value::Object(l.clone()).to_string());
        errors.push(FieldError::invalid(
            "spec.template.metadata.labels",
            format!("Invalid value: {shown}: `selector` does not match template `labels`"),
        ));
    }
    if let Some(pod) = template.get("spec") {
        pod_spec(pod, "spec.template.spec", errors);
        // Absent is the pod default, Always.
        if let Some(policy) = str_at(pod, "restartPolicy").filter(|p| *p != "Always") {
            errors.push(FieldError::not_supported(
                "spec.template.spec.restartPolicy",
                format!("Unsupported value: {policy:?}: supported values: \"Always\""),
            ));
        }
        if pod
            .get("activeDeadlineSeconds")
            .is_some_and(|v| !v.is_null())
        {
            errors.push(FieldError::forbidden(
                "spec.template.spec.activeDeadlineSeconds",
                "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ));
        }
    }
}

/// A `metav1.LabelSelector` as Go's `json.Marshal` writes it: fields in struct order
/// (`matchLabels`, then `matchExpressions` with `key`, `operator`, `values`), empty ones omitted.
fn go_label_selector_json(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return "null".into();
    };
    let mut parts = Vec::new();
    if let Some(labels) = selector
        .get("matchLabels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        parts.push(format!("\"matchLabels\":{labels}"));
    }
    if let Some(expressions) = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty())
    {
        let rendered: Vec<String> = expressions
            .iter()
            .map(|e| {
                let mut fields = vec![
                    format!("\"key\":{}", e.get("key").unwrap_or(&Value::Null)),
                    format!("\"operator\":{}", e.get("operator").unwrap_or(&Value::Null)),
                ];
                if let Some(values) = e
                    .get("values")
                    .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
                {
                    fields.push(format!("\"values\":{values}"));
                }
                format!("{{{}}}", fields.join(","))
            })
            .collect();
        parts.push(format!("\"matchExpressions\":[{}]", rendered.join(",")));
    }
    format!("{{{}}}", parts.join(","))
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
            fields(&super::pod(&pod, None)),
            vec![
                "spec.containers[1].name: Duplicate value: \"a\"",
                "spec.containers[2].name: Required value",
                "spec.containers[3].image: Required value",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
        let ok = json!({"spec": {"containers": [{"name": "a", "image": "i"}]}});
        assert!(super::pod(&ok, None).is_empty());
    }

    #[test]
    fn job_templates_restart_on_failure_or_never() {
        let job = |policy: Value| json!({"spec": {"template": {"spec": {"restartPolicy": policy, "containers": [{"name": "a", "image": "i"}]}}}});
        assert!(super::job(&job(json!("Never")), None).is_empty());
        assert!(super::job(&job(json!("OnFailure")), None).is_empty());
        for policy in [json!("Always"), Value::Null] {
            assert_eq!(
                fields(&super::job(&job(policy), None)),
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
        assert!(super::pod(&image, Some(&old)).is_empty());
        let policy = json!({"spec": {"containers": [{"name": "a", "image": "i"}], "restartPolicy": "Always"}});
        assert_eq!(super::pod(&policy, Some(&old))[0].field, "spec".to_string());
    }

    #[test]
    fn deployments_select_their_template_and_restart_always() {
        let deployment = |selector: Value, labels: Value, pod: Value| {
            json!({"spec": {"replicas": -1, "selector": selector,
                "template": {"metadata": {"labels": labels}, "spec": pod}}})
        };
        let pod = json!({"containers": [{"name": "a", "image": "i"}], "restartPolicy": "Never",
            "activeDeadlineSeconds": 5});
        let bad = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "other"}),
            pod,
        );
        assert_eq!(
            fields(&super::deployment(&bad, None)),
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ]
        );
        let good_pod = json!({"containers": [{"name": "a", "image": "i"}]});
        let expressions = json!({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "old", "operator": "DoesNotExist"}
        ]});
        let ok = json!({"spec": {"selector": expressions, "template": {
            "metadata": {"labels": {"tier": "b"}}, "spec": good_pod}}});
        assert!(super::deployment(&ok, None).is_empty());
        let empty = json!({"spec": {"selector": {}, "template": {"spec": good_pod}}});
        assert_eq!(
            fields(&super::deployment(&empty, None)),
            vec!["spec.selector: Invalid value: {}: empty selector is invalid for deployment"]
        );
        let moved = json!({"spec": {"selector": {"matchLabels": {"tier": "b"}}, "template": {
            "metadata": {"labels": {"tier": "b"}}, "spec": good_pod}}});
        assert_eq!(
            fields(&super::deployment(&moved, Some(&ok))),
            vec![
                "spec.selector: Invalid value: {\"matchLabels\":{\"tier\":\"b\"}}: field is immutable"
            ]
        );
    }

    #[test]
    fn immutable_config_keeps_its_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(config_map(&old, Some(&old)).is_empty());
        let changed = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(
            fields(&config_map(&changed, Some(&old))),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        let unset = json!({"immutable": false, "data": {"a": "1"}});
        assert_eq!(
            fields(&secret(&unset, Some(&old))),
            vec!["immutable: Forbidden: field is immutable when `immutable` is set"]
        );
        let mutable = json!({"data": {"a": "1"}});
        assert!(config_map(&changed, Some(&mutable)).is_empty());
    }
}
