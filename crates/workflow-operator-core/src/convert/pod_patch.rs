//! Argo's fields of a step's pod that have no field of their own here (a template's
//! `hostAliases` or pod `securityContext`, its container's `ports`, probes or `lifecycle`, the
//! workflow's `dnsPolicy`, ...): written into the `podSpecPatch` of the template (or the
//! workflow), which the Job builder applies to every pod it makes (`crd::step_pod`), the
//! step's container named `main` there as Argo names it. The template's own `podSpecPatch`
//! goes over them, as Argo applies it over the pod it made.

use serde_json::{Map, Value, json};

use super::walk::Report;
use crate::crd::step_pod;

/// What one object's walk set aside for its pod: the pod's fields, and its main container's.
#[derive(Debug, Default)]
pub struct PodFields {
    pod: Map<String, Value>,
    container: Map<String, Value>,
}

impl PodFields {
    /// Sets aside `field` of the pod.
    pub fn pod(&mut self, field: &str, value: &Value) {
        self.pod.insert(field.to_string(), value.clone());
    }

    /// Sets aside `field` of the step's container.
    pub fn container(&mut self, field: &str, value: &Value) {
        self.container.insert(field.to_string(), value.clone());
    }

    /// Writes what was set aside into `out`'s `podSpecPatch` (at path `at`), under the patch
    /// `out` already has; a patch that is not a JSON or YAML object (a `{{...}}` filled later
    /// may make it so) keeps its own and the fields set aside are named as not converted.
    pub fn write(self, out: &mut Map<String, Value>, at: &str, report: &mut Report) {
        let PodFields { mut pod, container } = self;
        if pod.is_empty() && container.is_empty() {
            return;
        }
        if !container.is_empty() {
            let mut main = Map::from_iter([("name".to_string(), json!(step_pod::ARGO_MAIN))]);
            main.extend(container);
            pod.insert("containers".into(), json!([main]));
        }
        let mut patch = Value::Object(pod);
        if let Some(own) = out.get("podSpecPatch").and_then(Value::as_str) {
            match step_pod::parse(own) {
                Ok(own) => step_pod::merge(&mut patch, own),
                Err(why) => {
                    let fields: Vec<&String> = patch
                        .as_object()
                        .into_iter()
                        .flat_map(|p| p.keys())
                        .collect();
                    report.not_converted(
                        at,
                        format!("{fields:?} go into the pod's podSpecPatch here, and it is not one to add to ({why})"),
                    );
                    return;
                }
            }
        }
        let text = serde_json::to_string(&patch).expect("plain data serializes");
        out.insert("podSpecPatch".into(), Value::String(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_set_aside_go_under_the_objects_own_patch() {
        let mut fields = PodFields::default();
        fields.pod(
            "hostAliases",
            &json!([{"ip": "10.0.0.1", "hostnames": ["db"]}]),
        );
        fields.pod("priorityClassName", &json!("low"));
        fields.container("ports", &json!([{"containerPort": 80}]));
        let mut out = Map::new();
        out.insert(
            "podSpecPatch".into(),
            json!(r#"{"priorityClassName": "high", "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]}"#),
        );
        let mut report = Report::default();
        fields.write(&mut out, "spec.templates[0]", &mut report);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let patch: Value = serde_json::from_str(out["podSpecPatch"].as_str().unwrap()).unwrap();
        assert_eq!(
            patch["priorityClassName"], "high",
            "the template's own patch goes over"
        );
        assert_eq!(patch["hostAliases"][0]["ip"], "10.0.0.1");
        assert_eq!(
            patch["containers"],
            json!([{"name": "main", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}])
        );
    }

    #[test]
    fn a_patch_that_is_not_an_object_keeps_its_own_and_the_fields_are_named() {
        let mut fields = PodFields::default();
        fields.pod("schedulerName", &json!("mine"));
        let mut out = Map::new();
        out.insert("podSpecPatch".into(), json!("[1, 2]"));
        let mut report = Report::default();
        fields.write(&mut out, "spec.templates[0]", &mut report);
        assert_eq!(out["podSpecPatch"], "[1, 2]");
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(
            report.problems[0].why.contains("schedulerName"),
            "{:?}",
            report.problems
        );
    }

    #[test]
    fn nothing_set_aside_leaves_the_object_as_it_is() {
        let mut out = Map::new();
        PodFields::default().write(&mut out, "spec", &mut Report::default());
        assert!(out.is_empty());
    }
}
