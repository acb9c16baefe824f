//! `workflow-operator convert`: Argo Workflows' documents (`argoproj.io/v1alpha1` `Workflow`,
//! `WorkflowTemplate`, `ClusterWorkflowTemplate`, `CronWorkflow`) as ours, keeping Argo's
//! meaning where the defaults differ, and naming with its path and why every field it cannot
//! convert. Pure: a JSON value in, a JSON value and the problems out; the CLI reads and writes
//! the files, and `submit` and `validate` convert Argo's documents on the way.
//!
//! - [`table`]: every Argo field, what it becomes and where the meaning differs; the converter
//!   walks objects by it and docs/argo.md is generated from it.
//! - [`walk`]: fields copied, renamed, converted or named by the table.
//! - [`spec`]: a workflow spec, its entrypoint inlined as the steps.
//! - [`template`]: a template; [`call`]: a dag task or a steps entry; [`data`]: parameters,
//!   artifacts, retries and the other small objects; [`when`]: govaluate to CEL; [`cron`]: a
//!   CronWorkflow's spec; [`http`]: an http template's request, its condition expr to CEL.
//! - [`result_parameter`]: an output parameter named `result` renamed, before the rest.
//! - [`pod_patch`]: the pod's fields that have no field here, into `podSpecPatch`.

pub mod call;
pub mod cron;
pub mod data;
pub mod depends;
pub mod hooks;
pub mod http;
pub mod pod_patch;
pub mod result_parameter;
pub mod spec;
pub mod table;
pub mod template;
pub mod walk;
pub mod when;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

pub use walk::Problem;

/// Argo's API group.
pub const ARGO_GROUP: &str = "argoproj.io";

/// Our kind for each of Argo's.
const KINDS: [(&str, &str); 4] = [
    ("Workflow", "WorkFlow"),
    ("WorkflowTemplate", "WorkFlowTemplate"),
    ("ClusterWorkflowTemplate", "ClusterWorkFlowTemplate"),
    ("CronWorkflow", "CronWorkFlow"),
];

/// A document converted, what of it was not, and what works differently here.
#[derive(Debug)]
pub struct Converted {
    pub document: Value,
    pub problems: Vec<Problem>,
    pub notes: Vec<Problem>,
}

/// Whether `document` is one of Argo's (`apiVersion: argoproj.io/...`).
pub fn is_argo(document: &Value) -> bool {
    document
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.split('/').next() == Some(ARGO_GROUP))
}

/// Converts an Argo document; `Err` for a kind that has no counterpart here (a
/// `WorkflowEventBinding`, ...), saying so.
pub fn convert(document: &Value) -> Result<Converted, String> {
    let argo_kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some((_, kind)) = KINDS.iter().find(|(argo, _)| *argo == argo_kind) else {
        return Err(format!(
            "kind {argo_kind:?} of argoproj.io is not converted (only Workflow, WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow are)"
        ));
    };
    let mut report = walk::Report::default();
    misplaced_names(document.get("metadata"), &mut report);
    let mut argo_spec = document.get("spec").cloned().unwrap_or_else(|| json!({}));
    match argo_spec.get_mut("workflowSpec") {
        Some(workflow) => result_parameter::rename(workflow, "spec.workflowSpec", &mut report),
        None => result_parameter::rename(&mut argo_spec, "spec", &mut report),
    }
    let argo_spec = &argo_spec;
    let spec = match *kind {
        "CronWorkFlow" => cron::cron_spec(argo_spec, "spec", &mut report),
        "WorkFlow" => spec::workflow_spec(argo_spec, "spec", spec::Use::Workflow, &mut report),
        _ => spec::workflow_spec(argo_spec, "spec", spec::Use::Shared, &mut report),
    };
    let document = json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": kind,
        "metadata": metadata(document.get("metadata")),
        "spec": spec,
    });
    Ok(Converted {
        document,
        problems: report.problems,
        notes: report.notes,
    })
}

/// The metadata a manifest sets: name, generateName, namespace, labels and annotations.
fn metadata(metadata: Option<&Value>) -> Value {
    let kept: Map<String, Value> = metadata
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            ["name", "generateName", "namespace", "labels", "annotations"].contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

/// A label named `name` or `generateName` on a document that has no name of that kind: the
/// name indented one level too deep (Argo's own `fun-with-gifs` example has it). Kept as a
/// label, as Argo's API server keeps it (and refuses the document for it), but named here with
/// the fix, which the label's own refusal does not say.
fn misplaced_names(metadata: Option<&Value>, report: &mut walk::Report) {
    let Some(metadata) = metadata else { return };
    for field in ["name", "generateName"] {
        let label = metadata.pointer(&format!("/labels/{field}"));
        if label.is_some() && metadata.get(field).is_none() {
            report.not_converted(
                &format!("metadata.labels.{field}"),
                format!("a label named {field}, and metadata has no {field}: indented one level too deep? move it to metadata.{field} (Argo refuses the document as it is too)"),
            );
        }
    }
}

/// The documents of a YAML or JSON text (`---` between documents), empty ones left out.
pub fn read(text: &str) -> Result<Vec<Value>, String> {
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).map_err(|e| e.to_string())?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}
