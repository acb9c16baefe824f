//! An Argo template (`spec.templates[]`) as ours: a container or script template's container
//! fields on the template, a `dag`'s tasks as steps, a `steps` template's groups as Argo writes
//! them; its deadline as the step's `timeout`. Kinds not supported yet are named.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::call::{self, Declared};
use super::data::{self, Parameters};
use super::pod_patch::PodFields;
use super::table::Place;
use super::walk::{self, Report, int_or_string};

/// What the whole spec's templates share while they are converted.
#[derive(Debug, Default)]
pub struct Shared {
    /// What each template declares as inputs, for its callers.
    pub declared: Declared,
    /// The templates' own volumes, which become the workflow's.
    pub volumes: Vec<Value>,
    /// The workflow's `retryStrategy`, for each template without one.
    pub retry: Option<Value>,
}

/// What runs when the template is called.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A container or script: the template's fields.
    Container,
    /// A `dag`'s steps (`stepName`, `dependsOn`).
    Dag(Vec<Value>),
    /// A `steps` template's groups of entries (`name`).
    Steps(Vec<Vec<Value>>),
    /// A kind not converted (named already).
    Unsupported,
}

/// A converted template.
#[derive(Debug, Clone)]
pub struct Converted {
    pub name: String,
    /// Ours, as written in `spec.templates`.
    pub fields: Map<String, Value>,
    pub body: Body,
    /// Its `failFast` and `parallelism` (a dag's or its own), which the entrypoint's are the
    /// workflow's.
    pub fail_fast: Option<Value>,
    pub parallelism: Option<(String, Value)>,
    /// A `dag` or `steps` template's raw input artifacts (converted) and their path in the
    /// document: the entrypoint's are what its calls' `{{inputs.artifacts.NAME}}` take
    /// ([`super::spec`]); ours keeps input artifacts on container templates only.
    pub raw_inputs: Option<(String, Vec<Value>)>,
}

/// A suspend template's supplied outputs take the `default`, `enum` and `description` they
/// lack from its input of the same name, where Argo's UI finds them to ask the person who
/// resumes it (Argo's intermediate parameters); ours are on the output.
fn supplied_from_inputs(fields: &mut Map<String, Value>) {
    let inputs = fields
        .get("inputs")
        .and_then(|i| i.get("parameters"))
        .cloned();
    let inputs = inputs.as_ref().and_then(Value::as_array);
    let outputs = (fields.get_mut("outputs"))
        .and_then(|o| o.get_mut("parameters"))
        .and_then(Value::as_array_mut);
    let (Some(inputs), Some(outputs)) = (inputs, outputs) else {
        return;
    };
    for output in outputs.iter_mut().filter_map(Value::as_object_mut) {
        if output
            .get("valueFrom")
            .and_then(|v| v.get("supplied"))
            .is_none()
        {
            continue;
        }
        let input = inputs.iter().find(|i| i.get("name") == output.get("name"));
        for field in ["default", "enum", "description"] {
            if let Some(value) = input.and_then(|i| i.get(field))
                && !output.contains_key(field)
            {
                output.insert(field.into(), value.clone());
            }
        }
    }
}

/// A dag or steps template's `parallelism` and `target` into `fields` (its fields other than
/// its calls' named as not converted); a container template's `parallelism` named.
fn calls_policies(
    body: &Body,
    fields: &mut Map<String, Value>,
    (parallelism, target): (&Option<(String, Value)>, Option<Value>),
    at: &str,
    report: &mut Report,
) {
    if matches!(body, Body::Dag(_) | Body::Steps(_)) {
        only_calls(fields, at, report);
        // A called template's own; the entrypoint's is the workflow's too.
        if let Some((_, limit)) = parallelism {
            fields.insert("parallelism".into(), int_or_string(limit));
        }
        if let Some(target) = target {
            fields.insert("target".into(), target);
        }
    } else if let Some((path, _)) = parallelism {
        report.not_converted(
            path,
            "parallelism is a dag or steps template's: a container template is one step",
        );
    }
}

/// Converts `spec.templates[i]` at path `at`.
pub fn template(template: &Value, at: &str, shared: &mut Shared, report: &mut Report) -> Converted {
    let template = &*paths_written_out(template);
    let mut body = Body::Unsupported;
    let mut fail_fast = None;
    let mut parallelism = None;
    let mut target = None;
    let mut container = Map::new();
    let mut pod = PodFields::default();
    let mut fields = walk::fields(
        Place::Template,
        template,
        at,
        report,
        |field, value, path, out, report| match field {
            "container" | "script" => {
                body = Body::Container;
                // Its only converted fields are the pod's container's.
                let aside = |field: &str,
                             value: &Value,
                             _: &str,
                             _: &mut Map<String, Value>,
                             _: &mut Report| {
                    pod.container(field, value);
                };
                container = walk::fields(Place::Container, value, path, report, aside);
            }
            "dag" => {
                let policies = (&mut fail_fast, &mut target);
                body = Body::Dag(dag(value, path, &shared.declared, policies, report));
            }
            "steps" => body = Body::Steps(steps(value, path, &shared.declared, report)),
            "suspend" => {
                body = Body::Container;
                out.insert(field.into(), value.clone());
            }
            "http" => {
                body = Body::Container;
                out.insert(field.into(), super::http::http(value, path, report));
            }
            "resource" => {
                body = Body::Container;
                let resource =
                    walk::fields(Place::Resource, value, path, report, |_, _, _, _, _| {});
                out.insert(field.into(), Value::Object(resource));
            }
            "metrics" if shared.declared.fanned_out.contains(name_of(template)) => {
                report.not_converted(
                    path,
                    "metrics of a template called with withItems, withParam or withSequence are \
                     not supported yet",
                );
            }
            "metrics" => {
                out.insert(field.into(), value.clone());
            }
            "hostAliases"
            | "securityContext"
            | "priorityClassName"
            | "serviceAccountName"
            | "automountServiceAccountToken"
            | "schedulerName" => pod.pod(field, value),
            "failFast" => fail_fast = Some(value.clone()),
            "parallelism" => parallelism = Some((path.to_string(), value.clone())),
            "volumes" => shared
                .volumes
                .extend(value.as_array().into_iter().flatten().cloned()),
            _ => {
                if let Some((key, converted)) = own_field(field, value, path, report) {
                    out.insert(key.into(), converted);
                }
            }
        },
    );
    fields.extend(container);
    pod.write(&mut fields, at, report);
    mirror_volume_mounts(&mut fields);
    calls_policies(&body, &mut fields, (&parallelism, target), at, report);
    let mut raw_inputs = None;
    if matches!(body, Body::Dag(_) | Body::Steps(_)) {
        let inputs = fields.get_mut("inputs").and_then(Value::as_object_mut);
        if let Some(Value::Array(raw)) = inputs.and_then(|i| i.remove("artifacts")) {
            raw_inputs = Some((walk::join(at, "inputs.artifacts"), raw));
        }
    }
    match &body {
        Body::Dag(steps) => {
            fields.insert("dag".into(), Value::Array(steps.clone()));
        }
        Body::Steps(groups) => {
            fields.insert("steps".into(), json!(groups));
        }
        // A suspend step runs nothing that could fail: the workflow's retries are not for it.
        Body::Container if fields.contains_key("suspend") => supplied_from_inputs(&mut fields),
        Body::Container => {
            if let Some(retry) = &shared.retry {
                fields
                    .entry("retryStrategy")
                    .or_insert_with(|| retry.clone());
            }
        }
        Body::Unsupported => {}
    }
    Converted {
        name: fields
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        fields,
        body,
        fail_fast,
        parallelism,
        raw_inputs,
    }
}

/// A `dag` or `steps` template keeps its name, inputs and outputs: what a container's step has
/// besides (its own `cache`, `timeout`, ...) is named and left out.
fn only_calls(fields: &mut Map<String, Value>, at: &str, report: &mut Report) {
    let own: Vec<String> = fields
        .keys()
        .filter(|k| !["name", "inputs", "outputs"].contains(&k.as_str()))
        .cloned()
        .collect();
    for field in own {
        fields.remove(&field);
        let why = if field == "metrics" {
            "a dag or steps template's metrics are not supported yet: declare them on the \
             templates it calls, or the workflow's"
        } else {
            "a dag or steps template's own timeout, retries, cache or locks are not supported yet"
        };
        report.not_converted(&walk::join(at, &field), why);
    }
}

/// A field of the template itself: its name in ours and its value, or `None` when it is named
/// as not converted.
fn own_field(
    field: &str,
    value: &Value,
    at: &str,
    report: &mut Report,
) -> Option<(&'static str, Value)> {
    Some(match field {
        "inputs" => ("inputs", inputs(value, at, report)),
        "outputs" => ("outputs", data::outputs(value, at, report)),
        "activeDeadlineSeconds" => ("timeout", int_or_string(value)),
        "timeout" => ("timeout", seconds(value, at, report)?),
        "retryStrategy" => ("retryStrategy", data::retry(value, at, report)?),
        "initContainers" => ("initContainers", containers(value, at, report)),
        "sidecars" => ("sidecars", containers(value, at, report)),
        "synchronization" => ("synchronization", data::synchronization(value, at, report)),
        "memoize" => ("cache", data::memoize(value, at, report)),
        _ => unreachable!("every Converted row of a template is handled: {field}"),
    })
}

/// A template's `inputs`: its parameters (a `value` as the `default`) and raw artifacts; its
/// other artifacts are given by its callers ([`Shared::declared`]).
fn inputs(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Inputs,
        value,
        at,
        report,
        |field, value, path, out, report| {
            if field == "parameters" {
                out.insert(
                    field.into(),
                    data::parameters(value, path, Parameters::Inputs, report),
                );
                return;
            }
            let raw: Vec<Value> = (data::artifacts(value, path, report).into_iter())
                .filter(data::is_raw)
                .map(Value::Object)
                .collect();
            if !raw.is_empty() {
                out.insert(field.into(), Value::Array(raw));
            }
        },
    ))
}

/// What each template declares as inputs: its artifacts (name and path) and parameters.
pub fn declared(templates: &[Value]) -> Declared {
    let mut declared = Declared::default();
    for template in templates {
        let Some(name) = template.get("name").and_then(Value::as_str) else {
            continue;
        };
        let listed = |list: &str| {
            template
                .pointer(&format!("/inputs/{list}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let artifacts = listed("artifacts")
            .iter()
            .filter_map(|a| Some((a.get("name")?.as_str()?.to_string(), a.get("path")?.clone())))
            .collect();
        let parameters = listed("parameters")
            .iter()
            .filter_map(|p| Some(p.get("name")?.as_str()?.to_string()))
            .collect();
        declared.artifacts.insert(name.to_string(), artifacts);
        declared.parameters.insert(name.to_string(), parameters);
        declared.fanned_out.extend(calls_fanning_out(template));
    }
    declared
}

/// The templates `template`'s dag tasks or steps call with a fan-out.
fn calls_fanning_out(template: &Value) -> impl Iterator<Item = String> + '_ {
    let tasks = template.pointer("/dag/tasks").and_then(Value::as_array);
    let steps = template.get("steps").and_then(Value::as_array);
    let groups = steps.into_iter().flatten().filter_map(Value::as_array);
    (tasks.into_iter().flatten().chain(groups.flatten()))
        .filter(|call| {
            ["withItems", "withParam", "withSequence"]
                .iter()
                .any(|k| call.get(k).is_some())
        })
        .filter_map(|call| Some(call.get("template")?.as_str()?.to_string()))
}

/// `initContainers` or `sidecars`, each as written; Argo's `mirrorVolumeMounts` is kept for
/// [`mirror_volume_mounts`], which knows the template's own mounts.
fn containers(value: &Value, at: &str, report: &mut Report) -> Value {
    let list = walk::items(value, at, report);
    Value::Array(list.into_iter().map(|(_, c)| c.clone()).collect())
}

/// Argo's `mirrorVolumeMounts: true` on an init container or sidecar written out: the
/// template's own `volumeMounts` appended to that container's, as Argo's controller appends the
/// main container's; the flag itself is removed from every one.
fn mirror_volume_mounts(fields: &mut Map<String, Value>) {
    let mounts = fields.get("volumeMounts").cloned();
    for key in ["initContainers", "sidecars"] {
        let list = fields.get_mut(key).and_then(Value::as_array_mut);
        for container in list.into_iter().flatten().filter_map(Value::as_object_mut) {
            let mirror = container.remove("mirrorVolumeMounts");
            let Some(Value::Array(mounts)) = mounts
                .as_ref()
                .filter(|_| mirror == Some(Value::Bool(true)))
            else {
                continue;
            };
            let own = container.entry("volumeMounts").or_insert_with(|| json!([]));
            if let Some(own) = own.as_array_mut() {
                own.extend(mounts.iter().cloned());
            }
        }
    }
}

/// A `dag`'s tasks as steps; its `failFast` and `target` in `policies`.
fn dag(
    value: &Value,
    at: &str,
    inputs: &Declared,
    (fail_fast, target): (&mut Option<Value>, &mut Option<Value>),
    report: &mut Report,
) -> Vec<Value> {
    let mut steps = Vec::new();
    let mut tasks = Vec::new();
    walk::fields(
        Place::Dag,
        value,
        at,
        report,
        |field, value, path, _, report| {
            if field == "failFast" {
                *fail_fast = Some(value.clone());
                return;
            }
            if field == "target" {
                *target = Some(value.clone());
                return;
            }
            for (path, task) in walk::items(value, path, report) {
                let mut step = call::task(task, &path, inputs, report);
                inline(task, &mut step, &path, report);
                steps.push(step);
                tasks.push((path, task.clone()));
            }
        },
    );
    super::depends::apply(&tasks, &mut steps, report);
    steps
}

fn steps(value: &Value, at: &str, inputs: &Declared, report: &mut Report) -> Vec<Vec<Value>> {
    walk::items(value, at, report)
        .into_iter()
        .map(|(path, group)| {
            walk::items(group, &path, report)
                .into_iter()
                .map(|(path, entry)| {
                    let mut step = call::entry(entry, &path, inputs, report);
                    inline(entry, &mut step, &path, report);
                    step
                })
                .collect()
        })
        .collect()
}

/// A call's `inline` container or script template: its fields on the step.
fn inline(call: &Value, step: &mut Value, at: &str, report: &mut Report) {
    let (Some(inline), Some(step)) = (call.get("inline"), step.as_object_mut()) else {
        return;
    };
    let path = walk::join(at, "inline");
    let converted = template(inline, &path, &mut Shared::default(), report);
    if converted.body != Body::Container {
        report.not_converted(&path, "an inline template that is not a container or script is not supported yet: name a template");
        return;
    }
    step.extend(converted.fields.into_iter().filter(|(k, _)| k != "name"));
}

/// A Go duration (`30s`, `1h30m`, `500ms`) or a number, as whole seconds (rounded up).
fn seconds(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let text = match value {
        Value::Number(n) => return Some(Value::Number(n.clone())),
        // A parameter, filled in before the field is read.
        Value::String(text) if text.contains("{{") => return Some(value.clone()),
        Value::String(text) => text.trim(),
        _ => "",
    };
    if let Ok(n) = text.parse::<i64>() {
        return Some(n.into());
    }
    match go_duration(text) {
        Some(seconds) => Some(Value::from(seconds.ceil() as i64)),
        None => {
            report.not_converted(at, format!("{value} is not a duration"));
            None
        }
    }
}

fn go_duration(text: &str) -> Option<f64> {
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    (!text.is_empty()).then_some(total)
}

/// `template` with Argo's path placeholders written out, as ours has no such form:
/// `{{inputs.artifacts.NAME.path}}`, `{{outputs.artifacts.NAME.path}}` and
/// `{{outputs.parameters.NAME.path}}` are the paths its inputs and outputs declare.
fn paths_written_out(template: &Value) -> Cow<'_, Value> {
    let mut forms: Vec<(String, String)> = Vec::new();
    for (kind, path) in [
        ("inputs.artifacts", "/path"),
        ("outputs.artifacts", "/path"),
        ("outputs.parameters", "/valueFrom/path"),
    ] {
        let list = format!("/{}", kind.replace('.', "/"));
        let items = template.pointer(&list).and_then(Value::as_array);
        forms.extend((items.into_iter().flatten()).filter_map(|item| {
            let name = item.get("name")?.as_str()?;
            let declared = item.pointer(path)?.as_str()?;
            Some((format!("{kind}.{name}.path"), declared.to_string()))
        }));
    }
    if forms.is_empty() {
        return Cow::Borrowed(template);
    }
    let mut written = template.clone();
    walk::rewrite_strings(&mut written, &|text| {
        let mut text = text.to_string();
        for (form, path) in &forms {
            for written in [format!("{{{{{form}}}}}"), format!("{{{{ {form} }}}}")] {
                text = text.replace(&written, path);
            }
        }
        text
    });
    Cow::Owned(written)
}

/// A template's `name` (empty when it has none).
fn name_of(template: &Value) -> &str {
    template
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}
