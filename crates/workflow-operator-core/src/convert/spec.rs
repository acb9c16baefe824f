//! A Workflow's spec (a WorkflowTemplate's, a CronWorkflow's `workflowSpec`) as ours: the
//! pod-level fields in `podTemplate`, the templates converted, the entrypoint inlined as the
//! workflow's steps (`containers`) and the exit handler as its exit steps (`onExit`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::data::{self, Parameters};
use super::pod_patch::PodFields;
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
    let mut raw_arguments = Vec::new();
    let mut pod = PodFields::default();
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
                "arguments" => {
                    let arguments = workflow_arguments(value, path, report);
                    raw_arguments = arguments.1;
                    Some((field, arguments.0))
                }
                "synchronization" => Some((field, data::synchronization(value, path, report))),
                "ttlStrategy" => {
                    data::ttl(value, path, report).map(|v| ("ttlSecondsAfterFinished", v))
                }
                "podGC" => data::pod_gc(value, path, report).map(|v| ("podCleanup", v)),
                "artifactGC" => artifact_gc(value, path, report).map(|v| (field, v)),
                "hooks" => super::hooks::hooks(Some(value), None, path, report).map(|v| (field, v)),
                "hostNetwork"
                | "dnsPolicy"
                | "dnsConfig"
                | "schedulerName"
                | "hostAliases"
                | "automountServiceAccountToken" => {
                    pod.pod(field, value);
                    None
                }
                // entrypoint, onExit and retryStrategy: once the templates are converted.
                _ => None,
            };
            if let Some((key, converted)) = converted {
                out.insert(key.into(), converted);
            }
        },
    );
    pod.write(&mut out, at, report);
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
    let inputs = EntryInputs {
        raw: raw_arguments,
        declared: &shared.declared.artifacts,
    };
    let kept = steps_and_templates(spec, (at, usage), (templates, &inputs), &mut out, report);
    if !kept.is_empty() {
        out.insert("templates".into(), Value::Array(kept));
    }
    Value::Object(out)
}

/// The workflow's raw argument artifacts: each name and the artifact (converted).
type RawArguments = Vec<(String, Map<String, Value>)>;

/// The workflow's raw argument artifacts, which the entrypoint's (and exit handler's) input
/// artifacts of the same name take, and what each template declares (its input artifacts'
/// paths).
struct EntryInputs<'d> {
    raw: RawArguments,
    declared: &'d BTreeMap<String, Vec<(String, Value)>>,
}

/// The entrypoint inlined as the workflow's steps and the exit handler as its exit steps, in
/// `out`; the templates to keep.
fn steps_and_templates(
    spec: &Value,
    (at, usage): (&str, Use),
    (templates, inputs): (Vec<Converted>, &EntryInputs<'_>),
    out: &mut Map<String, Value>,
    report: &mut Report,
) -> Vec<Value> {
    let parameters = workflow_parameters(out);
    let given = Given {
        parameters: &parameters,
        inputs,
    };
    let mut inlined = Vec::new();
    let entrypoint = spec.get("entrypoint").and_then(Value::as_str);
    unused_raw_arguments(
        entrypoint,
        &templates,
        inputs,
        &walk::join(at, "arguments.artifacts"),
        report,
    );
    if let Some(name) = entrypoint {
        let path = walk::join(at, "entrypoint");
        if spec.get("workflowTemplateRef").is_some() {
            report.not_converted(&path, "an entrypoint beside workflowTemplateRef is not supported: the shared template's own runs");
        } else if let Some(steps) = inline(name, &templates, &given, &path, report) {
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
        if let Some(mut steps) = inline(name, &templates, &given, &path, report) {
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
    kept_templates(templates, &inlined, &steps, usage, report)
}

/// Names each of the workflow's raw argument artifacts that the entrypoint does not declare as
/// an input artifact (with a path, for a container or script entrypoint): nothing takes it.
fn unused_raw_arguments(
    entrypoint: Option<&str>,
    templates: &[Converted],
    inputs: &EntryInputs<'_>,
    at: &str,
    report: &mut Report,
) {
    let template = entrypoint.and_then(|name| templates.iter().find(|t| t.name == name));
    let declared = entrypoint.and_then(|name| inputs.declared.get(name));
    for (name, _) in &inputs.raw {
        let why = match (entrypoint, template.map(|t| &t.body)) {
            (_, Some(Body::Container))
                if declared.is_some_and(|d| d.iter().any(|(n, _)| n == name)) =>
            {
                continue;
            }
            (_, Some(Body::Container)) => {
                "the entrypoint declares no input artifact of that name with a path"
            }
            (None, _) => {
                "the workflow names no entrypoint here to give it to (a workflowTemplateRef's is not given artifacts yet)"
            }
            // A dag's steps take it by name; a template not found or not converted is named.
            (Some(_), _) => continue,
        };
        report.not_converted(at, format!("artifact {name:?}: {why}"));
    }
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

/// The workflow's `arguments`: its parameters, and apart its raw artifacts by name (given to
/// the entrypoint's input artifacts, [`inline`]); others are named.
fn workflow_arguments(value: &Value, at: &str, report: &mut Report) -> (Value, RawArguments) {
    let mut raw = Vec::new();
    let arguments = walk::fields(
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
                return;
            }
            for artifact in data::artifacts(value, path, report) {
                let name = artifact.get("name").and_then(Value::as_str);
                match name.map(str::to_string) {
                    Some(name) if data::is_raw(&artifact) => raw.push((name, artifact)),
                    // A source of its own is named already.
                    _ if !artifact.contains_key("from") => {}
                    _ => report.not_converted(path, "a workflow's input artifact taken from elsewhere than raw is not supported yet"),
                }
            }
        },
    );
    (Value::Object(arguments), raw)
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

/// What the workflow gives the template it inlines: its parameters' names and its raw
/// artifacts.
struct Given<'g> {
    parameters: &'g [String],
    inputs: &'g EntryInputs<'g>,
}

/// The steps that run the template `name` at the top of the workflow: a dag's steps, a steps
/// template's entries (each depending on the whole group before), or one step calling a
/// container template, named after it. `{{inputs.parameters.X}}` is the workflow parameter X,
/// and an input artifact the workflow's raw artifact of its name, as Argo fills the
/// entrypoint's inputs from the workflow's arguments.
fn inline(
    name: &str,
    templates: &[Converted],
    given: &Given<'_>,
    at: &str,
    report: &mut Report,
) -> Option<Vec<Value>> {
    let Some(template) = templates.iter().find(|t| t.name == name) else {
        report.not_converted(at, format!("no template is named {name:?}"));
        return None;
    };
    let mut steps = match &template.body {
        Body::Container => vec![container_call(template, given)],
        // Only a call prunes a dag to its targets (they may be parameters).
        Body::Dag(_) if template.fields.contains_key("target") => {
            vec![container_call(template, given)]
        }
        Body::Dag(steps) => steps.clone(),
        Body::Steps(groups) => grouped(groups),
        Body::Unsupported => return None,
    };
    if !matches!(template.body, Body::Container) {
        let inputs = template_inputs(template);
        for step in &mut steps {
            walk::rewrite_strings(step, &|text| fill_inputs(text, &inputs, given.parameters));
            raw_from_inputs(step, template, given.inputs);
        }
    }
    Some(steps)
}

/// One step calling a container template, its inputs given from the workflow's parameters and
/// raw artifacts (each at the path the template declares; its own raw ones it keeps).
fn container_call(template: &Converted, given: &Given<'_>) -> Value {
    let arguments: Vec<Value> = template_inputs(template)
        .into_iter()
        .filter(|(input, _)| given.parameters.contains(input))
        .map(|(input, _)| json!({"name": input, "value": format!("{{{{workflow.parameters.{input}}}}}")}))
        .collect();
    let mut step = json!({"stepName": template.name, "template": template.name});
    if !arguments.is_empty() {
        step["arguments"] = json!({"parameters": arguments});
    }
    let declared = given.inputs.declared.get(&template.name);
    let artifacts: Vec<Value> = (given.inputs.raw.iter())
        .filter_map(|(name, artifact)| {
            let (_, path) = declared?.iter().find(|(n, _)| n == name)?;
            let mut artifact = artifact.clone();
            artifact.insert("path".into(), path.clone());
            Some(Value::Object(artifact))
        })
        .collect();
    if !artifacts.is_empty() {
        step["inputs"] = json!({ "artifacts": artifacts });
    }
    step
}

/// A step of the inlined `template` taking one of its input artifacts
/// (`from: "{{inputs.artifacts.NAME}}"`) takes its content instead: the workflow's raw
/// artifact of that name, else the template's own raw one. Any other stays as written (and is
/// refused at submit: a dag's input artifacts are not passed on yet).
fn raw_from_inputs(step: &mut Value, template: &Converted, inputs: &EntryInputs<'_>) {
    let own = template.raw_inputs.iter().flat_map(|(_, raw)| raw);
    let raw_of = |name: &str| {
        let given = inputs
            .raw
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.get("raw"));
        let own = own
            .clone()
            .find(|a| a.get("name").and_then(Value::as_str) == Some(name));
        given
            .flatten()
            .or_else(|| own.and_then(|a| a.get("raw")))
            .cloned()
    };
    let artifacts = step
        .pointer_mut("/inputs/artifacts")
        .and_then(Value::as_array_mut);
    for artifact in artifacts
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let from = artifact.get("from").and_then(Value::as_str).map(str::trim);
        let name = from
            .and_then(|f| f.strip_prefix("{{inputs.artifacts."))
            .and_then(|f| f.strip_suffix("}}"))
            .map(str::trim);
        if let Some(raw) = name.and_then(raw_of) {
            artifact.remove("from");
            artifact.insert("raw".into(), raw);
        }
    }
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
    report: &mut Report,
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
    let kept: Vec<Converted> = (templates.into_iter().zip(keep))
        .filter(|(t, keep)| *keep && t.body != Body::Unsupported)
        .map(|(t, _)| t)
        .collect();
    // A dag or steps template called as a template: its raw input artifacts reach no step.
    for (path, _) in kept.iter().filter_map(|t| t.raw_inputs.as_ref()) {
        report.not_converted(
            path,
            "raw input artifacts of a dag or steps template are supported only on the \
             entrypoint: give them to the steps it calls",
        );
    }
    kept.into_iter().map(|t| Value::Object(t.fields)).collect()
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
