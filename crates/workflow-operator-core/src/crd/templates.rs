//! The API of templates and parameters (expanded by `template`): `spec.arguments`, `spec.templates`, a step's
//! `template`/`templateRef`/`arguments`, `spec.workflowTemplateRef`, the shared kinds
//! `WorkFlowTemplate` and `ClusterWorkFlowTemplate`, `status.resolvedTemplates` (what a
//! workflow read from them, kept with it), a parameter's `valueFrom.configMapKeyRef` and
//! `status.resolvedConfigMapKeys` (what a workflow read from ConfigMaps, kept with it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::{InputArtifact, Step, WorkFlowSpec};

/// Values given to a workflow (`spec.arguments`) or to a template by a step calling it
/// (`arguments` of the step).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Arguments {
    /// The parameters, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
}

impl Arguments {
    /// Argo's `{{workflow.parameters.json}}` of these arguments (their values filled): a JSON
    /// list of the parameters as Go encodes Argo's `Parameter`.
    pub fn argo_json(&self) -> String {
        let all: Vec<ArgoParameter<'_>> = self.parameters.iter().map(ArgoParameter::of).collect();
        crate::outputs::go_json(&all)
    }
}

/// A workflow parameter in Argo's `{{workflow.parameters.json}}`: as Go encodes Argo's
/// `Parameter`, its fields in this order, the empty ones left out. The value is the one the
/// run has (a ConfigMap's read in), not Argo's `valueFrom` without it.
#[derive(serde::Serialize)]
struct ArgoParameter<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    allowed: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
}

impl<'a> ArgoParameter<'a> {
    fn of(parameter: &'a Parameter) -> ArgoParameter<'a> {
        let Parameter {
            name,
            value,
            default,
            allowed,
            description,
            value_from: _,
        } = parameter;
        ArgoParameter {
            name,
            default: default.as_deref(),
            value: value.as_deref(),
            allowed: (!allowed.is_empty()).then_some(allowed.as_slice()),
            description: description.as_deref(),
        }
    }
}

/// A named string value: a workflow's parameter (`name`, `value`, `enum`, `description`), a
/// template's input (`name`, `default`) or a step's argument to a template (`name`, `value`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Parameter {
    /// The name, as `{{workflow.parameters.NAME}}` or `{{inputs.parameters.NAME}}` read it.
    #[schemars(length(min = 1))]
    pub name: String,

    /// The value; a workflow parameter without one must be given at submit
    /// (`workflow-operator submit -p NAME=VALUE`). Numbers and booleans are taken as text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "scalar_text"
    )]
    #[schemars(schema_with = "scalar_text_schema")]
    pub value: Option<String>,

    /// A template input's value when the calling step gives none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "scalar_text"
    )]
    #[schemars(schema_with = "scalar_text_schema")]
    pub default: Option<String>,

    /// The values allowed; any value when empty.
    #[serde(default, rename = "enum", skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,

    /// What the parameter is for (shown by `workflow-operator template get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Where the value is read when no `value` is given: a key of a ConfigMap in the
    /// workflow's namespace, read once, before any step runs, and recorded in
    /// `status.resolvedConfigMapKeys` (the run keeps that value whatever becomes of the
    /// ConfigMap). A ConfigMap or key that is not there takes `default`, or fails the workflow
    /// naming it.
    #[serde(rename = "valueFrom", default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ParameterSource>,
}

/// Where a workflow's parameter, a template's input or a call's argument takes its value
/// from (`valueFrom`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ParameterSource {
    /// A key of a ConfigMap in the workflow's namespace.
    #[serde(rename = "configMapKeyRef")]
    pub config_map_key_ref: ConfigMapKeyRef,
}

/// A key of a ConfigMap in the workflow's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name, as written (no `{{...}}` form).
    #[schemars(length(min = 1))]
    pub name: String,
    /// The key of its `data`.
    #[schemars(length(min = 1))]
    pub key: String,
}

impl ConfigMapKeyRef {
    /// As a message names it: `configmap "settings" key "color"`.
    pub fn describe(&self) -> String {
        format!("configmap {:?} key {:?}", self.name, self.key)
    }
}

/// What a workflow read of one ConfigMap key when the operator first handled it
/// (`status.resolvedConfigMapKeys[]`): the run takes this value, whatever happens to the
/// ConfigMap since. A key that was not there is recorded too (`value` absent, `missing` saying
/// why), so a ConfigMap made later does not change the run either.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfigMapKey {
    /// The ConfigMap's name.
    pub name: String,
    /// The key.
    pub key: String,
    /// Its value when read; absent when the ConfigMap or the key was not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Why there is no value: `configmap "settings" not found in namespace "dev"`, or
    /// `configmap "settings" has no key "color"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// The ConfigMap's resourceVersion when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// When it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Time>,
}

impl ResolvedConfigMapKey {
    /// Whether this is the record of `reference`.
    pub fn is(&self, reference: &ConfigMapKeyRef) -> bool {
        self.name == reference.name && self.key == reference.key
    }
}

/// A step definition called by name (`spec.templates[]`): either the fields of a container
/// step (everything a step in `containers` may have but `stepName` and `dependsOn`), a `dag`
/// of steps, or Argo's `steps`: groups of steps, each group after the one before.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Template {
    /// The name steps call it by (`template: NAME`).
    pub name: String,

    /// The parameters a call gives, `{{inputs.parameters.NAME}}` inside the template, and a
    /// container template's input artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<TemplateInputs>,

    /// The steps of a template that is itself a DAG, as written (read as steps, unknown fields
    /// refused, when called); a step calling it becomes these steps, named `STEP/INNER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dag: Option<Vec<Map<String, Value>>>,

    /// Argo's form of a DAG, as written: groups of steps, each entry named by `name`; the
    /// entries of a group run side by side once every entry of the group before is done. A
    /// step calling it becomes these steps, named `STEP/NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Vec<Map<String, Value>>>>,

    /// A `dag` template's targets, as Argo's `dag.target`: the names of some of its steps,
    /// separated by spaces (parameters filled); a call runs only those and the steps they
    /// depend on. Absent or empty: every step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,

    /// At most this many of a call's steps run at once (a `dag` or `steps` template's, as
    /// Argo's template `parallelism`); absent: no limit but the workflow's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,

    /// The step fields of a container template, as written; read as a step when called.
    #[serde(flatten)]
    pub container: Map<String, Value>,
}

/// What a template takes in (`spec.templates[].inputs`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TemplateInputs {
    /// The parameters a call gives, `{{inputs.parameters.NAME}}` inside the template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    /// A container template's input artifacts, as a step's `inputs.artifacts` (Argo's `raw`
    /// ones, written in every call's pod): a call's own input artifact of the same name is
    /// taken instead. Their `{{inputs.parameters.NAME}}` are the call's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<InputArtifact>,
}

/// A step's call of a template of a shared `WorkFlowTemplate` or `ClusterWorkFlowTemplate`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// The WorkFlowTemplate (in the workflow's namespace) or ClusterWorkFlowTemplate.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The template of it to call, by its `name`.
    #[schemars(length(min = 1))]
    pub template: String,
    /// True for a ClusterWorkFlowTemplate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scope: bool,
}

/// `spec.workflowTemplateRef`: the workflow is a shared template's whole spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTemplateRef {
    /// The WorkFlowTemplate (in the workflow's namespace) or ClusterWorkFlowTemplate.
    #[schemars(length(min = 1))]
    pub name: String,
    /// True for a ClusterWorkFlowTemplate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scope: bool,
}

/// Which shared template a reference names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    /// `WorkFlowTemplate` or `ClusterWorkFlowTemplate`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
}

impl Source {
    /// The source `name` names, in the namespace or cluster-wide.
    pub fn new(name: &str, cluster_scope: bool) -> Source {
        Source {
            kind: if cluster_scope {
                CLUSTER_KIND
            } else {
                NAMESPACED_KIND
            },
            name: name.to_string(),
        }
    }

    /// As kubectl names it: `workflowtemplate "ci"`.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.kind.to_lowercase(), self.name)
    }

    /// Why a reference to it does not resolve from `namespace`: `workflowtemplate "ci" not
    /// found in namespace "dev"` (a cluster-scoped one names no namespace).
    pub fn not_found(&self, namespace: &str) -> String {
        if self.kind == CLUSTER_KIND {
            format!("{} not found", self.describe())
        } else {
            format!("{} not found in namespace {namespace:?}", self.describe())
        }
    }
}

/// The namespaced kind of shared templates.
pub const NAMESPACED_KIND: &str = "WorkFlowTemplate";
/// The cluster-scoped kind of shared templates.
pub const CLUSTER_KIND: &str = "ClusterWorkFlowTemplate";

/// What a workflow read from a shared template when the operator first handled it
/// (`status.resolvedTemplates[]`): the workflow runs this, whatever happens to the template
/// since.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedTemplate {
    /// `WorkFlowTemplate` or `ClusterWorkFlowTemplate`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its uid when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its resourceVersion when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// When it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Time>,
    /// Its spec as read.
    #[schemars(schema_with = "free_object")]
    pub spec: WorkFlowSpec,
}

impl ResolvedTemplate {
    /// Whether this is what `source` names.
    pub fn is(&self, source: &Source) -> bool {
        self.kind == source.kind && self.name == source.name
    }
}

/// A workflow shared in a namespace: a `WorkFlow` spec that workflows take whole
/// (`spec.workflowTemplateRef`) or call a template of (`templateRef`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "workflow.crd.com",
    version = "v1",
    kind = "WorkFlowTemplate",
    plural = "workflowtemplates",
    singular = "workflowtemplate",
    shortname = "wftmpl",
    namespaced,
    derive = "PartialEq",
    doc = "A WorkFlow spec shared in a namespace: workflows run it whole (spec.workflowTemplateRef) or call its templates (templateRef).",
    printcolumn = r#"{"name": "Steps", "type": "string", "jsonPath": ".spec.containers[*].stepName", "description": "Its steps, when it is a whole workflow"}"#,
    printcolumn = r#"{"name": "Templates", "type": "string", "jsonPath": ".spec.templates[*].name", "description": "The templates steps may call"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
pub struct WorkFlowTemplateSpec {
    /// A WorkFlow's spec.
    #[serde(flatten)]
    pub workflow: WorkFlowSpec,
}

/// A workflow shared across the cluster, as a WorkFlowTemplate is in a namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "workflow.crd.com",
    version = "v1",
    kind = "ClusterWorkFlowTemplate",
    plural = "clusterworkflowtemplates",
    singular = "clusterworkflowtemplate",
    shortname = "cwftmpl",
    derive = "PartialEq",
    doc = "A WorkFlow spec shared across the cluster: workflows run it whole (spec.workflowTemplateRef with clusterScope) or call its templates (templateRef with clusterScope).",
    printcolumn = r#"{"name": "Steps", "type": "string", "jsonPath": ".spec.containers[*].stepName", "description": "Its steps, when it is a whole workflow"}"#,
    printcolumn = r#"{"name": "Templates", "type": "string", "jsonPath": ".spec.templates[*].name", "description": "The templates steps may call"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
pub struct ClusterWorkFlowTemplateSpec {
    /// A WorkFlow's spec.
    #[serde(flatten)]
    pub workflow: WorkFlowSpec,
}

/// A parameter's value as text: YAML's `3` or `true` are the strings `"3"` and `"true"`.
pub(crate) fn scalar_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "a parameter's value is text, a number or a boolean, not {other}"
        ))),
    }
}

/// Text, or a number taken as text (`x-kubernetes-int-or-string`, the structural schema's
/// only way to accept both).
pub(crate) fn scalar_text_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-int-or-string": true})
}

/// An object kept whole: a stored spec, checked when it was read.
fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// The schema of `spec.templates`: a step's fields (without `stepName` and `dependsOn`) plus
/// `name`, `inputs` and `dag`. Written from the step's schema, so the two never drift.
pub(crate) fn templates_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let step = generator.subschema_for::<Step>();
    let inputs = generator.subschema_for::<TemplateInputs>();
    let mut template = step.clone();
    let object = template.ensure_object();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.remove("stepName");
        properties.remove("dependsOn");
        properties.insert("name".into(), serde_json::json!({"type": "string", "minLength": 1, "description": "The name steps call it by (`template: NAME`)."}));
        let mut inputs = inputs.as_value().clone();
        if let Value::Object(inputs) = &mut inputs {
            inputs.insert(
                "description".into(),
                "The parameters a call gives, `{{inputs.parameters.NAME}}` inside the template, \
                 and a container template's input artifacts."
                    .into(),
            );
        }
        properties.insert("inputs".into(), inputs);
        // A `dag`'s steps are kept as written: the step schema again inside the template's
        // would double the CRD's depth and size (the operator reads them as steps, refusing
        // unknown fields, when the template is called).
        properties.insert(
            "dag".into(),
            serde_json::json!({
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["stepName"],
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"stepName": {"type": "string", "minLength": 1, "description": "The step's name, unique in the template."}},
                    "description": "A step, with the fields of a step in `containers`.",
                },
                "description": "The steps of a template that is itself a DAG; a step calling it becomes these steps, named `STEP/INNER`.",
            }),
        );
        properties.insert(
            "target".into(),
            serde_json::json!({"type": "string", "description": "A `dag` template's targets: the names of some of its steps, separated by spaces; a call runs only those and the steps they depend on. Absent or empty: every step."}),
        );
        properties.insert(
            "parallelism".into(),
            serde_json::json!({"type": "integer", "minimum": 1, "description": "At most this many of a call's steps run at once (a `dag` or `steps` template's); absent: no limit but the workflow's."}),
        );
        // Argo's groups of steps, kept as written for the same reason as `dag`.
        properties.insert(
            "steps".into(),
            serde_json::json!({
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"name": {"type": "string", "minLength": 1, "description": "The step's name, unique in the template."}},
                        "description": "A step, with the fields of a step in `containers` but `stepName` (it is `name`) and `dependsOn` (it is the group before).",
                    },
                    "description": "Steps run side by side, once every step of the group before is done.",
                },
                "description": "Argo's form of a DAG: groups of steps, each group after the one before; a step calling it becomes these steps, named `STEP/NAME`.",
            }),
        );
    }
    object.insert("required".into(), serde_json::json!(["name"]));
    object.insert(
        "description".into(),
        "A step definition called by name: a container step's fields, a `dag` of steps, or `steps` (groups of steps, each group after the one before).".into(),
    );
    object.remove("x-kubernetes-validations");
    schemars::json_schema!({"type": "array", "items": template.as_value()})
}
