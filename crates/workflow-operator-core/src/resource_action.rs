//! Resource steps (`crd::resource`): what is wrong with one ([`problems`]), what the step agent
//! is told ([`ResourceTask`], built by [`task_of`] and placed by the Job's builder), which
//! object the action is on ([`Flags`], the manifest), the name a `generateName` gets
//! ([`generated_name`]: the same for every try of the step's Job, so a pod tried again, or an
//! operator restarted, finds the object the first try made instead of making a second), the
//! conditions ([`condition`]) and the outputs read from the object ([`json_path`]). Pure: the
//! agent talks to the API server.

pub mod condition;
pub mod json_path;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::crd::resource::{ACTIONS, MERGE_STRATEGIES, ResourceStep};
use crate::crd::{Step, StepOutputs};
use condition::Condition;
use json_path::JsonPath;

/// Annotation: on an object a resource step created, the name of the step's Job. A try of the
/// same Job that finds the object already there takes it as its own; any other refuses it.
pub const ANNOTATION_CREATED_BY: &str = "workflow.crd.com/created-by-job";

/// What the step agent is told of a resource step: the action, its texts filled in, where it
/// acts, and the outputs to read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTask {
    pub action: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    pub merge_strategy: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// The namespace of an object whose manifest and flags name none: the workflow's.
    #[serde(default)]
    pub namespace: String,
    /// The step's Job: the mark of what this step created, and the seed of a generated name.
    #[serde(default)]
    pub job: String,
    /// The workflow, as the owner of what it creates (`setOwnerReference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// Outputs read from the object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<JsonPathTask>,
}

/// The owner an object is given (an `ownerReferences` item): the workflow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// An output parameter read from the resulting object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct JsonPathTask {
    pub name: String,
    pub json_path: String,
    /// Its value when the action leaves no object (`delete`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

impl ResourceTask {
    /// The task with `fill` applied to each text a reference may be in.
    pub fn filled(mut self, fill: impl Fn(&str) -> String) -> ResourceTask {
        self.manifest = fill(&self.manifest);
        self.success_condition = self.success_condition.as_deref().map(&fill);
        self.failure_condition = self.failure_condition.as_deref().map(&fill);
        self.flags = self.flags.iter().map(|f| fill(f)).collect();
        self
    }
}

/// The agent's task for `resource`, its outputs those of `outputs` (where it acts is the Job
/// builder's to say).
pub fn task_of(resource: &ResourceStep, outputs: Option<&StepOutputs>) -> ResourceTask {
    let parameters = (outputs.iter().flat_map(|o| &o.parameters))
        .map(|p| JsonPathTask {
            name: p.name.clone(),
            json_path: p.value_from.json_path.clone().unwrap_or_default(),
            default: p.default.clone(),
        })
        .collect();
    ResourceTask {
        action: resource.action.clone(),
        manifest: resource.manifest.clone(),
        success_condition: resource.success_condition.clone(),
        failure_condition: resource.failure_condition.clone(),
        merge_strategy: resource.merge_strategy().to_string(),
        flags: resource.flags.clone(),
        parameters,
        ..ResourceTask::default()
    }
}

/// The object's name for a manifest's `generateName` `prefix`, made by the step's Job `job`:
/// the prefix (cut to 58 characters, as the API server cuts it) and five characters of
/// Kubernetes' alphabet for generated names, from a hash of the Job's name.
pub fn generated_name(prefix: &str, job: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let digest = Sha256::digest(job.as_bytes());
    let suffix: String = (digest.iter().take(5))
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    let prefix: String = prefix.chars().take(58).collect();
    format!("{prefix}{suffix}")
}

/// The object named by `flags` instead of a manifest, and kubectl's options a resource step
/// takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// The type (`configmap`, `jobs.batch`, `cm`) and, when given, the name.
    pub object: Option<(String, Option<String>)>,
    /// `--selector`/`-l`: a label selector, for a type without a name.
    pub selector: Option<String>,
    /// `--namespace`/`-n`.
    pub namespace: Option<String>,
    /// `--ignore-not-found`.
    pub ignore_not_found: bool,
}

/// The flags a resource step takes, for messages.
const KNOWN_FLAGS: &str =
    "TYPE NAME, TYPE/NAME, --selector/-l, --namespace/-n, --ignore-not-found, --validate";

impl Flags {
    /// Reads `flags` as kubectl would.
    ///
    /// # Errors
    /// A flag it does not take, or a value missing.
    pub fn parse(flags: &[String]) -> Result<Flags, String> {
        let mut out = Flags::default();
        let mut words = Vec::new();
        let mut iter = flags.iter();
        while let Some(flag) = iter.next() {
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) if flag.starts_with('-') => (name, Some(value.to_string())),
                _ => (flag.as_str(), None),
            };
            let mut value = |what: &str| {
                (inline.clone().or_else(|| iter.next().cloned()))
                    .ok_or_else(|| format!("flags: {what} needs a value"))
            };
            match name {
                "--selector" | "-l" => out.selector = Some(value(name)?),
                "--namespace" | "-n" => out.namespace = Some(value(name)?),
                "--ignore-not-found" => {
                    out.ignore_not_found = inline.as_deref().is_none_or(|v| v == "true");
                }
                // Nothing is validated on the client here.
                "--validate" => {}
                _ if name.starts_with('-') => {
                    return Err(format!(
                        "flags: {flag:?} is not a flag a resource step takes ({KNOWN_FLAGS})"
                    ));
                }
                _ => words.push(flag.clone()),
            }
        }
        out.object = match words.as_slice() {
            [] => None,
            [one] => Some(match one.split_once('/') {
                Some((kind, name)) => (kind.to_string(), Some(name.to_string())),
                None => (one.clone(), None),
            }),
            [kind, name] => Some((kind.clone(), Some(name.clone()))),
            more => {
                return Err(format!(
                    "flags: {more:?}: one type and at most one name (TYPE NAME or TYPE/NAME)"
                ));
            }
        };
        Ok(out)
    }
}

/// The manifest as JSON; `None` when empty.
///
/// # Errors
/// When it is not YAML (or JSON).
pub fn manifest_value(manifest: &str) -> Result<Option<Value>, String> {
    if manifest.trim().is_empty() {
        return Ok(None);
    }
    serde_yaml::from_str::<Value>(manifest)
        .map(Some)
        .map_err(|e| format!("manifest is not YAML: {e}"))
}

/// How a wait on the object stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Succeeded,
    /// The failure condition holds; the step's message.
    Failed(String),
    Waiting,
}

/// Whether `object` meets the failure condition (checked first, as Argo does), else the
/// success condition (none: it has), of `task`.
///
/// # Errors
/// A condition that does not parse.
pub fn verdict(task: &ResourceTask, object: &Value) -> Result<Verdict, String> {
    if let Some(text) = &task.failure_condition {
        let condition = Condition::parse(text)
            .map_err(|why| format!("failureCondition {text:?} does not parse: {why}"))?;
        if let Some(requirement) = condition.any_holds(object) {
            let value = condition::field_text(object, requirement.key());
            let value = value.map_or("absent".to_string(), |v| format!("{v:?}"));
            return Ok(Verdict::Failed(format!(
                "failureCondition {:?} holds ({} is {value})",
                requirement.to_string(),
                requirement.key()
            )));
        }
    }
    let Some(text) = &task.success_condition else {
        return Ok(Verdict::Succeeded);
    };
    let condition = Condition::parse(text)
        .map_err(|why| format!("successCondition {text:?} does not parse: {why}"))?;
    Ok(match condition.all_hold(object) {
        true => Verdict::Succeeded,
        false => Verdict::Waiting,
    })
}

/// The outputs of `task` read from `object` (none: the action left none, and each output is
/// its default, or empty).
///
/// # Errors
/// A `jsonPath` that does not parse.
pub fn outputs(
    task: &ResourceTask,
    object: Option<&Value>,
) -> Result<BTreeMap<String, String>, String> {
    let mut outputs = BTreeMap::new();
    for parameter in &task.parameters {
        let value = match object {
            None => parameter.default.clone().unwrap_or_default(),
            Some(object) => JsonPath::parse(&parameter.json_path)
                .map_err(|why| format!("output parameter {}: jsonPath {why}", parameter.name))?
                .print(object),
        };
        outputs.insert(parameter.name.clone(), value);
    }
    Ok(outputs)
}

/// What is wrong with `step` as a resource step (nothing when it is none): an action, merge
/// strategy, manifest, condition, flag or output that cannot be used, a field that runs a
/// container. A text holding a reference is checked by the agent once filled.
pub fn problems(step: &Step) -> Vec<String> {
    let Some(resource) = &step.resource else {
        return Vec::new();
    };
    let name = &step.step_name;
    let mut problems: Vec<String> = action_problems(resource)
        .into_iter()
        .map(|why| format!("step {name:?}: resource.{why}"))
        .collect();
    let mut runs = step.container_fields_set();
    runs.retain(|field| *field != "outputs");
    runs.extend(step.inputs.is_some().then_some("inputs"));
    runs.extend(step.http.is_some().then_some("http"));
    for field in runs {
        problems.push(format!(
            "step {name:?}: {field}: a resource step acts on an object and runs no container, \
             so it cannot have one"
        ));
    }
    let outputs = step.outputs.as_deref();
    if outputs.is_some_and(|o| !o.artifacts.is_empty()) {
        problems.push(format!(
            "step {name:?}: outputs.artifacts: a resource step has no files: its outputs are \
             parameters read from the object (valueFrom.jsonPath)"
        ));
    }
    for parameter in outputs.iter().flat_map(|o| &o.parameters) {
        let why = match &parameter.value_from.json_path {
            None => Some(
                "reads no valueFrom.jsonPath (a resource step's outputs are read from \
                          the object)"
                    .to_string(),
            ),
            Some(_) if !parameter.value_from.path.is_empty() => {
                Some("valueFrom: give path or jsonPath, not both".to_string())
            }
            Some(path) if !path.contains("{{") => JsonPath::parse(path).err(),
            Some(_) => None,
        };
        if let Some(why) = why {
            problems.push(format!(
                "step {name:?}: output parameter {:?}: {why}",
                parameter.name
            ));
        }
    }
    problems
}

/// What is wrong with the action, each as `FIELD: why`.
fn action_problems(resource: &ResourceStep) -> Vec<String> {
    let mut problems = Vec::new();
    let action = resource.action.as_str();
    if !ACTIONS.contains(&action) {
        problems.push(format!(
            "action: {action:?} is not an action (one of {})",
            ACTIONS.join(", ")
        ));
    }
    if let Some(strategy) = &resource.merge_strategy {
        if !MERGE_STRATEGIES.contains(&strategy.as_str()) {
            problems.push(format!(
                "mergeStrategy: {strategy:?} is not one (one of {})",
                MERGE_STRATEGIES.join(", ")
            ));
        } else if action != "patch" {
            problems.push("mergeStrategy: only a patch has one".into());
        }
    }
    if resource.set_owner_reference && !["create", "apply", "replace"].contains(&action) {
        problems.push(
            "setOwnerReference: only an object that is created, applied or replaced gets an \
             owner"
                .into(),
        );
    }
    let conditions = [
        ("successCondition", &resource.success_condition),
        ("failureCondition", &resource.failure_condition),
    ];
    for (field, text) in conditions {
        let text = text.as_deref().filter(|t| !t.contains("{{"));
        if let Some(Err(why)) = text.map(Condition::parse) {
            problems.push(format!(
                "{field}: {:?} does not parse: {why}",
                text.unwrap_or("")
            ));
        }
    }
    if resource.flags.iter().all(|f| !f.contains("{{")) {
        let flags = Flags::parse(&resource.flags);
        problems.extend(flags.as_ref().err().cloned());
        if let Ok(flags) = flags {
            problems.extend(target_problem(resource, &flags));
        }
    }
    problems
}

/// What is wrong with the object the action is on: a manifest that is not YAML or lacks what
/// the action needs, flags that name nothing where they must.
fn target_problem(resource: &ResourceStep, flags: &Flags) -> Option<String> {
    let action = resource.action.as_str();
    let json_patch = action == "patch" && resource.merge_strategy() == "json";
    if resource.manifest.contains("{{") {
        return None;
    }
    let manifest = match manifest_value(&resource.manifest) {
        Ok(manifest) => manifest,
        Err(why) => return Some(why),
    };
    let Some(manifest) = manifest else {
        let by_flags = ["get", "delete", "patch"].contains(&action) && flags.object.is_some();
        return (!by_flags).then(|| {
            "manifest: required (get and delete may name the object in flags instead)".into()
        });
    };
    if json_patch {
        return match (manifest.is_array(), &flags.object) {
            (false, _) => Some("manifest: a json patch is a list of operations".into()),
            (true, Some((_, Some(_)))) => None,
            (true, _) => Some("flags: a json patch names its object in flags (TYPE NAME)".into()),
        };
    }
    if !manifest.is_object() {
        return Some("manifest: not an object".into());
    }
    if flags.object.is_some() {
        return None;
    }
    let text = |field: &str| manifest.get(field).and_then(Value::as_str).unwrap_or("");
    let metadata = |field: &str| {
        (manifest.get("metadata").and_then(|m| m.get(field)))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if text("apiVersion").is_empty() || text("kind").is_empty() {
        return Some("manifest: apiVersion and kind are required".into());
    }
    match (
        metadata("name").is_empty(),
        metadata("generateName").is_empty(),
    ) {
        (true, false) if action != "create" => {
            Some("manifest: metadata.generateName is create's: name the object".into())
        }
        (true, true) => Some("manifest: metadata.name (or generateName) is required".into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
