//! A step's own pod settings, as an Argo template sets them: `nodeSelector`, `tolerations`,
//! `affinity` (over the workflow's `podTemplate`), and `podSpecPatch`, a patch of the step's
//! whole pod spec applied last; the workflow's `podSpecPatch` is applied just before it, as
//! Argo applies the workflow's patch and then the template's.
//!
//! `podSpecPatch` is a JSON merge patch (RFC 7386: an object's keys replace or, with `null`,
//! remove the pod spec's), with one difference Argo users rely on: a list whose items are all
//! objects with a `name` (`containers`, `initContainers`, `volumes`, a container's `env`) is
//! merged item by item by `name`, as Kubernetes' strategic merge patch does for those lists, so
//! `{"containers": [{"name": "main", "resources": ...}]}` changes the step's container instead
//! of replacing the list. Other lists (`tolerations`, `args`) are replaced whole. The step's
//! container is named after the step (`names::dns_label`); Argo's `main` names it too.

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Map, Value};

use super::Step;

/// The name Argo gives a step's container, which a `podSpecPatch` written for Argo names.
pub const ARGO_MAIN: &str = "main";

/// Whether `step` sets any of its own pod settings (most steps do not: nothing to do).
pub fn any(step: &Step) -> bool {
    step.node_selector.is_some()
        || step.tolerations.is_some()
        || step.affinity.is_some()
        || step.pod_spec_patch.is_some()
}

/// `pod` with `step`'s own settings: its node selector's labels over the workflow's, its
/// tolerations after the workflow's, its affinity instead of the workflow's, then the
/// workflow's `podSpecPatch` (`workflow_patch`), then the step's (where `main` names the
/// step's container `container`).
///
/// # Errors
/// A `podSpecPatch` that is not a JSON or YAML object, or that makes the pod spec invalid
/// (the workflow's named `spec.podSpecPatch`).
pub fn apply(
    mut pod: PodSpec,
    step: &Step,
    workflow_patch: Option<&str>,
    container: &str,
) -> Result<PodSpec, String> {
    if let Some(selector) = &step.node_selector {
        let mut merged = pod.node_selector.take().unwrap_or_default();
        merged.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
        pod.node_selector = Some(merged);
    }
    if let Some(tolerations) = &step.tolerations {
        let mut merged = pod.tolerations.take().unwrap_or_default();
        merged.extend(tolerations.iter().cloned());
        pod.tolerations = Some(merged);
    }
    if let Some(affinity) = &step.affinity {
        pod.affinity = Some((**affinity).clone());
    }
    let patches = [
        (workflow_patch, "spec.podSpecPatch"),
        (
            step.pod_spec_patch.as_deref().map(String::as_str),
            "podSpecPatch",
        ),
    ];
    for (text, name) in patches {
        let Some(text) = text else { continue };
        let mut patch = parse(text).map_err(|why| format!("{name}: {why}"))?;
        rename_main(&mut patch, container);
        let mut value = serde_json::to_value(&pod).expect("a pod spec serialises");
        merge(&mut value, patch);
        pod = serde_json::from_value(value)
            .map_err(|e| format!("{name}: the patched pod spec: {e}"))?;
    }
    Ok(pod)
}

/// What is wrong with `step`'s `podSpecPatch`, if it has one: not an object.
pub fn problems(step: &Step) -> Vec<String> {
    let Some(text) = step.pod_spec_patch.as_deref() else {
        return Vec::new();
    };
    // A form still to fill (`{{inputs.parameters.x}}`) is checked once filled.
    if text.contains("{{") {
        return Vec::new();
    }
    (parse(text).err().into_iter())
        .map(|why| format!("step {:?}: podSpecPatch: {why}", step.step_name))
        .collect()
}

/// What is wrong with the workflow's `podSpecPatch` (filled), if it has one: not an object.
pub fn workflow_problems(patch: Option<&str>) -> Vec<String> {
    let parsed = patch.map(parse);
    (parsed.and_then(Result::err).into_iter())
        .map(|why| format!("spec.podSpecPatch: {why}"))
        .collect()
}

/// The patch in `text`, JSON or YAML, which must be an object.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let value: Value = serde_yaml::from_str(text).map_err(|e| format!("not JSON or YAML: {e}"))?;
    if !value.is_object() {
        return Err(format!(
            "must be an object (a pod spec's fields), not {value}"
        ));
    }
    Ok(value)
}

/// Argo's name for the step's container, `main`, made the name of ours in the patch's
/// `containers`.
fn rename_main(patch: &mut Value, container: &str) {
    let containers = patch.get_mut("containers").and_then(Value::as_array_mut);
    for item in containers.into_iter().flatten() {
        if item.get("name").and_then(Value::as_str) == Some(ARGO_MAIN) {
            item["name"] = Value::from(container);
        }
    }
}

/// Applies `patch` to `target` as described in the module's documentation.
pub(crate) fn merge(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let object = target.as_object_mut().expect("an object");
            for (key, value) in patch {
                if value.is_null() {
                    object.remove(&key);
                    continue;
                }
                let slot = object.entry(key).or_insert(Value::Null);
                merge(slot, value);
            }
        }
        Value::Array(items) if by_name(&items) && target.as_array().is_some_and(|t| by_name(t)) => {
            let list = target.as_array_mut().expect("a list");
            for item in items {
                let name = item.get("name").cloned();
                match list.iter_mut().find(|t| t.get("name") == name.as_ref()) {
                    Some(existing) => merge(existing, item),
                    None => list.push(item),
                }
            }
        }
        other => *target = other,
    }
}

/// Whether every item of `items` is an object with a string `name`.
fn by_name(items: &[Value]) -> bool {
    items
        .iter()
        .all(|i| i.get("name").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, Toleration};
    use serde_json::json;

    fn pod() -> PodSpec {
        serde_json::from_value(json!({
            "nodeSelector": {"disk": "ssd", "zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [{"name": "build", "image": "alpine", "env": [{"name": "A", "value": "1"}]}],
        }))
        .unwrap()
    }

    fn step(fields: Value) -> Step {
        let mut step = json!({"stepName": "build", "image": "alpine"});
        json_patch::merge(&mut step, &fields);
        serde_json::from_value(step).unwrap()
    }

    #[test]
    fn the_step_s_selector_tolerations_and_affinity_go_over_the_workflow_s() {
        let step = step(json!({
            "nodeSelector": {"zone": "b"},
            "tolerations": [{"key": "spot", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {}},
        }));
        let out = apply(pod(), &step, None, "build").unwrap();
        let selector = out.node_selector.unwrap();
        assert_eq!(selector["zone"], "b");
        assert_eq!(selector["disk"], "ssd");
        let keys: Vec<_> = (out.tolerations.unwrap().into_iter())
            .map(|t: Toleration| t.key.unwrap())
            .collect();
        assert_eq!(keys, ["gpu", "spot"]);
        assert!(out.affinity.is_some());
    }

    #[test]
    fn pod_spec_patch_merges_named_lists_by_name_and_argo_s_main_is_the_step_s_container() {
        let patch = r#"{"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}],
            "resources": {"limits": {"cpu": "1"}}}], "tolerations": null,
            "activeDeadlineSeconds": 30}"#;
        let patched = step(json!({"podSpecPatch": patch}));
        let out = apply(pod(), &patched, None, "build").unwrap();
        let container: &Container = &out.containers[0];
        assert_eq!(out.containers.len(), 1);
        assert_eq!(container.image.as_deref(), Some("alpine"));
        let env: Vec<_> = (container.env.iter().flatten())
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(env, ["A", "B"]);
        assert!(container.resources.is_some());
        assert_eq!(out.tolerations, None);
        assert_eq!(out.active_deadline_seconds, Some(30));
        // YAML as Argo allows.
        let yaml = step(json!({"podSpecPatch": "priority: 5\n"}));
        assert_eq!(
            apply(pod(), &yaml, None, "build").unwrap().priority,
            Some(5)
        );
    }

    #[test]
    fn a_pod_spec_patch_that_is_not_an_object_is_refused_naming_the_step() {
        let list = step(json!({"podSpecPatch": "[1, 2]"}));
        assert_eq!(
            problems(&list),
            ["step \"build\": podSpecPatch: must be an object (a pod spec's fields), not [1,2]"]
        );
        let bad = apply(
            pod(),
            &step(json!({"podSpecPatch": "{\"priority\": \"high\"}"})),
            None,
            "build",
        );
        assert!(
            bad.unwrap_err()
                .starts_with("podSpecPatch: the patched pod spec:")
        );
    }

    #[test]
    fn the_workflow_s_patch_goes_first_and_the_step_s_over_it() {
        let workflow = r#"{"priority": 1, "containers": [{"name": "main",
            "env": [{"name": "A", "value": "workflow"}, {"name": "W", "value": "w"}]}]}"#;
        let patched = step(json!({"podSpecPatch":
            "containers: [{name: main, env: [{name: A, value: step}]}]\npriority: 2\n"}));
        let out = apply(pod(), &patched, Some(workflow), "build").unwrap();
        assert_eq!(
            out.priority,
            Some(2),
            "the step's patch goes over the workflow's"
        );
        let env: Vec<_> = (out.containers[0].env.iter().flatten())
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
            .collect();
        assert_eq!(env, [("A", "step"), ("W", "w")]);
        let plain = step(json!({}));
        let out = apply(pod(), &plain, Some(workflow), "build").unwrap();
        assert_eq!(
            out.priority,
            Some(1),
            "a step without a patch takes the workflow's"
        );
        assert_eq!(
            workflow_problems(Some("[1]")),
            ["spec.podSpecPatch: must be an object (a pod spec's fields), not [1]"]
        );
        let bad = apply(pod(), &plain, Some("priority: high"), "build");
        assert!(
            bad.unwrap_err()
                .starts_with("spec.podSpecPatch: the patched pod spec:")
        );
    }
}
