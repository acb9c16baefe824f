//! A Workflow's spec (a WorkflowTemplate's, a CronWorkflow's `workflowSpec`) as ours: the
//! pod-level fields in `podTemplate`, the templates converted, the entrypoint inlined as the
//! workflow's steps (`containers`) and the exit handler as its exit steps (`onExit`).

use serde_json::{Map, Value, json};

use super::data::{self, Parameters};
use super::table::Place;
use super::template::{self, Body, Converted, Shared};
use super::walk::{self, Report};

/// Whether the templates are a library other workflows call (a shared template's), so the
/// entrypoint stays among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Workflow,
    Shared,
}

/// Converts the Argo spec at path `at`.
pub fn workflow_spec(spec: &Value, at: &str, usage: Use, report: &mut Report) -> Value {
    let argo_templates = spec
        .get("templates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut shared = Shared {
        declared: template::declared(&argo_templates),
        ..Shared::default()
    };
    if let Some(retry) = spec.get("retryStrategy") {
        shared.retry = data::retry(retry, &walk::join(at, "retryStrategy"), report);
    }
    let mut templates = Vec::new();
    let mut out = walk::fields(
        Place::Workflow,
        spec,
        at,
        report,
        |field, value, path, out, report| {
            let converted = match field {
                "templates" => {
                    for (path, t) in walk::items(value, path, report) {
                        templates.push(template::template(t, &path, &mut shared, report));
                    }
                    None
                }
                "arguments" => Some((field, workflow_arguments(value, path, report))),
                "synchronization" => Some((field, data::synchronization(value, path, report))),
                "ttlStrategy" => {
                    data::ttl(value, path, report).map(|v| ("ttlSecondsAfterFinished", v))
                }
                "podGC" => data::pod_gc(value, path, report).map(|v| ("podCleanup", v)),
                "artifactGC" => artifact_gc(value, path, report).map(|v| (field, v)),
                "hooks" => super::hooks::hooks(Some(value), None, path, report).map(|v| (field, v)),
                // entrypoint, onExit and retryStrategy: once the templates are converted.
                _ => None,
            };
            if let Some((key, converted)) = converted {
                out.insert(key.into(), converted);
            }
        },
    );
    if let Some(claims) = spec.get("volumeClaimTemplates") {
        let path = walk::join(at, "volumeClaimTemplates");
        if let Some(workspace) = workspace(claims, &path, &mut templates, report) {
            out.insert("workspace".into(), workspace);
        }
    }
    // Argo puts no time limit on a step.
    out.insert("maxStepTimeout".into(), (-1).into());
    if !shared.volumes.is_empty() {
        let volumes = out
            .entry("podTemplate")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("podTemplate is an object")
            .entry("volumes")
            .or_insert_with(|| json!([]));
        if let Value::Array(list) = volumes {
            list.extend(shared.volumes);
        }
    }
    let kept = steps_and_templates(spec, at, usage, templates, &mut out, report);
    if !kept.is_empty() {
        out.insert("templates".into(), Value::Array(kept));
    }
    Value::Object(out)
}

/// The entrypoint inlined as the workflow's steps and the exit handler as its exit steps, in
/// `out`; the templates to keep.
fn steps_and_templates(
    spec: &Value,
    at: &str,
    usage: Use,
    templates: Vec<Converted>,
    out: &mut Map<String, Value>,
    report: &mut Report,
) -> Vec<Value> {
    let parameters = workflow_parameters(out);
    let mut inlined = Vec::new();
    if let Some(name) = spec.get("entrypoint").and_then(Value::as_str) {
        let path = walk::join(at, "entrypoint");
        if spec.get("workflowTemplateRef").is_some() {
            report.not_converted(&path, "an entrypoint beside workflowTemplateRef is not supported: the shared template's own runs");
        } else if let Some(steps) = inline(name, &templates, &parameters, &path, report) {
            out.insert("containers".into(), Value::Array(steps));
            inlined.push(name);
            entrypoint_policies(name, &templates, out);
        }
    } else if spec.get("workflowTemplateRef").is_none() && usage == Use::Workflow {
        report.not_converted(
            at,
            "a Workflow without entrypoint nor workflowTemplateRef runs nothing",
        );
    }
    if let Some(name) = spec.get("onExit").and_then(Value::as_str) {
        let path = walk::join(at, "onExit");
        if let Some(mut steps) = inline(name, &templates, &parameters, &path, report) {
            let main = out.get("containers").and_then(Value::as_array);
            rename_exit_steps(
                &mut steps,
                main.map_or(&[][..], Vec::as_slice),
                &path,
                report,
            );
            out.insert("onExit".into(), Value::Array(steps));
            inlined.push(name);
        }
    }
    let steps = Value::Object(out.clone());
    kept_templates(templates, &inlined, &steps, usage)
}

/// Renames each exit step named as one of the workflow's steps (`main`) `NAME-on-exit`, and
/// what the exit steps say of it: Argo's exit handler is a template of its own, whose steps'
/// names are apart from the entrypoint's, where here an exit step has a name of its own in the
/// workflow and, by a name both have, reads the workflow's step.
fn rename_exit_steps(exit: &mut [Value], main: &[Value], at: &str, report: &mut Report) {
    let name_of = |step: &Value| {
        step.get("stepName")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut taken: Vec<String> = main.iter().chain(exit.iter()).filter_map(name_of).collect();
    let main_names: Vec<String> = main.iter().filter_map(name_of).collect();
    let mut renamed: Vec<(String, String)> = Vec::new();
    for step in exit.iter_mut() {
        let Some(old) = name_of(step).filter(|n| main_names.contains(n)) else {
            continue;
        };
        let mut new = format!("{old}-on-exit");
        while taken.contains(&new) {
            new.push_str("-again");
        }
        report.noted(
            at,
            format!("exit step {old:?} is named {new:?}: a step of the workflow is named {old:?}"),
        );
        step["stepName"] = Value::String(new.clone());
        taken.push(new.clone());
        renamed.push((old, new));
    }
    if renamed.is_empty() {
        return;
    }
    for step in exit.iter_mut() {
        if let Some(Value::Array(depends)) = step.get_mut("dependsOn") {
            for name in depends.iter_mut() {
                if let Some((_, new)) = renamed.iter().find(|(old, _)| name == old) {
                    *name = Value::String(new.clone());
                }
            }
        }
        walk::rewrite_strings(step, &|text| {
            let mut text = text.to_string();
            for (old, new) in &renamed {
                for (from, to) in [
                    (format!("{{{{steps.{old}."), format!("{{{{steps.{new}.")),
                    (format!("{{{{tasks.{old}."), format!("{{{{tasks.{new}.")),
                    (format!("steps[{old:?}]"), format!("steps[{new:?}]")),
                ] {
                    text = text.replace(&from, &to);
                }
            }
            text
        });
    }
}

/// The workflow's `arguments`: parameters only.
fn workflow_arguments(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Arguments,
        value,
        at,
        report,
        |field, value, path, out, report| {
            if field == "parameters" {
                out.insert(
                    field.into(),
                    data::parameters(value, path, Parameters::Arguments, report),
                );
            } else {
                report.not_converted(path, "a workflow's input artifacts are not supported yet");
            }
        },
    ))
}

fn artifact_gc(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let object = value.as_object()?;
    for field in object.keys().filter(|k| *k != "strategy") {
        report.not_converted(
            &walk::join(at, field),
            "only the artifactGC strategy is converted",
        );
    }
    Some(json!({"strategy": object.get("strategy")?}))
}

/// The names of the workflow's parameters (converted).
fn workflow_parameters(spec: &Map<String, Value>) -> Vec<String> {
    spec.get("arguments")
        .and_then(|a| a.get("parameters"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("name")?.as_str().map(str::to_string))
        .collect()
}

/// The steps that run the template `name` at the top of the workflow: a dag's steps, a steps
/// template's entries (each depending on the whole group before), or one step calling a
/// container template, named after it. `{{inputs.parameters.X}}` is the workflow parameter X,
/// as Argo fills the entrypoint's inputs from the workflow's arguments.
fn inline(
    name: &str,
    templates: &[Converted],
    parameters: &[String],
    at: &str,
    report: &mut Report,
) -> Option<Vec<Value>> {
    let Some(template) = templates.iter().find(|t| t.name == name) else {
        report.not_converted(at, format!("no template is named {name:?}"));
        return None;
    };
    let mut steps = match &template.body {
        Body::Container => vec![container_call(template, parameters)],
        // Only a call prunes a dag to its targets (they may be parameters).
        Body::Dag(_) if template.fields.contains_key("target") => {
            vec![container_call(template, parameters)]
        }
        Body::Dag(steps) => steps.clone(),
        Body::Steps(groups) => grouped(groups),
        Body::Unsupported => return None,
    };
    if !matches!(template.body, Body::Container) {
        let inputs = template_inputs(template);
        for step in &mut steps {
            walk::rewrite_strings(step, &|text| fill_inputs(text, &inputs, parameters));
        }
    }
    Some(steps)
}

/// One step calling a container template, its inputs given from the workflow's parameters.
fn container_call(template: &Converted, parameters: &[String]) -> Value {
    let arguments: Vec<Value> = template_inputs(template)
        .into_iter()
        .filter(|(input, _)| parameters.contains(input))
        .map(|(input, _)| json!({"name": input, "value": format!("{{{{workflow.parameters.{input}}}}}")}))
        .collect();
    let mut step = json!({"stepName": template.name, "template": template.name});
    if !arguments.is_empty() {
        step["arguments"] = json!({"parameters": arguments});
    }
    step
}

/// A steps template's groups as steps: each entry depends on every entry of the group before.
fn grouped(groups: &[Vec<Value>]) -> Vec<Value> {
    let mut steps = Vec::new();
    let mut before: Vec<Value> = Vec::new();
    for group in groups {
        let mut names = Vec::new();
        for entry in group {
            let mut step = entry.as_object().cloned().unwrap_or_default();
            let name = step.remove("name").unwrap_or_default();
            names.push(name.clone());
            let mut ordered = Map::new();
            ordered.insert("stepName".into(), name);
            if !before.is_empty() {
                ordered.insert("dependsOn".into(), Value::Array(before.clone()));
            }
            ordered.extend(step);
            steps.push(Value::Object(ordered));
        }
        before = names;
    }
    steps
}

/// A template's inputs: name and default.
fn template_inputs(template: &Converted) -> Vec<(String, Option<String>)> {
    template
        .fields
        .get("inputs")
        .and_then(|i| i.get("parameters"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?.to_string();
            let default = p.get("default").and_then(Value::as_str).map(str::to_string);
            Some((name, default))
        })
        .collect()
}

fn fill_inputs(text: &str, inputs: &[(String, Option<String>)], parameters: &[String]) -> String {
    let mut text = text.to_string();
    for (name, default) in inputs {
        let reference = format!("{{{{inputs.parameters.{name}}}}}");
        let value = if parameters.contains(name) {
            format!("{{{{workflow.parameters.{name}}}}}")
        } else if let Some(default) = default {
            default.clone()
        } else {
            continue;
        };
        text = text.replace(&reference, &value);
    }
    text
}

/// The entrypoint's `failFast` and `parallelism` are the workflow's.
fn entrypoint_policies(name: &str, templates: &[Converted], out: &mut Map<String, Value>) {
    for template in templates {
        let entry = template.name == name;
        if let Some(fail_fast) = &template.fail_fast
            && entry
        {
            out.insert("failFast".into(), fail_fast.clone());
        }
        // Another template's is its own (`template::template`).
        if let Some((_, parallelism)) = &template.parallelism
            && entry
        {
            out.entry("parallelism")
                .or_insert_with(|| walk::int_or_string(parallelism));
        }
    }
}

/// The converted templates to keep: all but the inlined ones nothing calls, neither another
/// template nor the workflow's steps (`spec`: a recursive entrypoint calls itself); a shared
/// template keeps every one, as other workflows may call it.
fn kept_templates(
    templates: Vec<Converted>,
    inlined: &[&str],
    spec: &Value,
    usage: Use,
) -> Vec<Value> {
    let called = |name: &str| {
        calls(spec, name)
            || templates
                .iter()
                .any(|t| t.name != name && calls(&Value::Object(t.fields.clone()), name))
    };
    let keep: Vec<bool> = templates
        .iter()
        .map(|t| {
            usage == Use::Shared
                || matches!(t.body, Body::Container)
                || !inlined.contains(&t.name.as_str())
                || called(&t.name)
        })
        .collect();
    templates
        .into_iter()
        .zip(keep)
        .filter(|(t, keep)| *keep && t.body != Body::Unsupported)
        .map(|(t, _)| Value::Object(t.fields))
        .collect()
}

/// Whether `value` holds a call `template: name`.
fn calls(value: &Value, name: &str) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| (k == "template" && v.as_str() == Some(name)) || calls(v, name)),
        Value::Array(list) => list.iter().any(|v| calls(v, name)),
        _ => false,
    }
}

/// Whether an init container or sidecar of `template` mounts the volume `name`.
fn other_containers_mount(template: &Map<String, Value>, name: &str) -> bool {
    let containers = ["initContainers", "sidecars"]
        .iter()
        .filter_map(|k| template.get(*k)?.as_array())
        .flatten();
    let mounts = containers.filter_map(|c| c.get("volumeMounts")?.as_array());
    mounts
        .flatten()
        .any(|m| m.get("name").and_then(Value::as_str) == Some(name))
}

/// Argo's one `volumeClaimTemplates` claim as our `workspace`, mounted where the templates
/// mount it (their mounts of it removed: the workspace is mounted in every step).
fn workspace(
    claims: &Value,
    at: &str,
    templates: &mut [Converted],
    report: &mut Report,
) -> Option<Value> {
    let [claim] = claims.as_array().map(Vec::as_slice).unwrap_or_default() else {
        report.not_converted(
            at,
            "several volume claims are not supported yet: one becomes the `workspace`",
        );
        return None;
    };
    let name = claim
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut paths = Vec::new();
    for template in templates.iter_mut() {
        if let Some(Value::Array(mounts)) = template.fields.get_mut("volumeMounts") {
            mounts.retain(|m| {
                let ours = m.get("name").and_then(Value::as_str) == Some(name);
                if ours {
                    paths.extend(m.get("mountPath").cloned());
                }
                !ours
            });
        }
    }
    if templates
        .iter()
        .any(|t| other_containers_mount(&t.fields, name))
    {
        report.not_converted(at, format!("claim {name:?} is mounted in an init container or sidecar, not supported: the workspace is mounted in the step's container only"));
        return None;
    }
    if paths.iter().any(|p| *p != paths[0]) {
        report.not_converted(at, format!("claim {name:?} is mounted at different paths, not supported yet: the workspace has one"));
        return None;
    }
    let mount_path = paths.pop().unwrap_or_else(|| "/workspace".into());
    Some(json!({"mountPath": mount_path, "volumeClaimTemplate": {"spec": claim.get("spec")?}}))
}
