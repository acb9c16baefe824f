//! A `dag` task and a `steps` entry as ours: a step calling a template, with its arguments,
//! fan-out, `when` (in CEL), `continueOn` and lifecycle hooks. A task's `{{tasks.X...}}` reads `{{steps.X...}}`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::data::{self, Parameters};
use super::table::Place;
use super::walk::{self, Report};

/// What each template of the spec declares as inputs, for the calls of it.
#[derive(Debug, Default)]
pub struct Declared {
    /// Its input artifacts (name, path): a call's artifact is a step's input artifact there.
    pub artifacts: BTreeMap<String, Vec<(String, Value)>>,
    /// Its input parameters: Argo ignores a call's argument the template does not declare.
    pub parameters: BTreeMap<String, Vec<String>>,
    /// The templates some call fans out over (`withItems`, `withParam`, `withSequence`).
    pub fanned_out: BTreeSet<String>,
}

/// A `dag` task as a step (`stepName`, `dependsOn`).
pub fn task(task: &Value, at: &str, inputs: &Declared, report: &mut Report) -> Value {
    let mut step = Value::Object(call(Place::Task, task, at, inputs, report));
    walk::rewrite_strings(&mut step, &data::tasks_as_steps);
    step
}

/// A `steps` entry, as Argo writes it (`name`, no `dependsOn`).
pub fn entry(entry: &Value, at: &str, inputs: &Declared, report: &mut Report) -> Value {
    Value::Object(call(Place::Step, entry, at, inputs, report))
}

fn call(
    place: Place,
    call: &Value,
    at: &str,
    inputs: &Declared,
    report: &mut Report,
) -> Map<String, Value> {
    let template = call.get("template").and_then(Value::as_str);
    let mut input_artifacts = Vec::new();
    let mut out = walk::fields(
        place,
        call,
        at,
        report,
        |field, value, path, out, report| {
            let converted = match field {
                "arguments" => {
                    let declared = template.and_then(|t| inputs.artifacts.get(t));
                    let (mut arguments, artifacts) = arguments(value, path, declared, report);
                    input_artifacts = artifacts;
                    if let Some(names) = template.and_then(|t| inputs.parameters.get(t))
                        && let Some(Value::Array(given)) = arguments.get_mut("parameters")
                    {
                        given.retain(|p| {
                            p.get("name")
                                .and_then(Value::as_str)
                                .is_some_and(|n| names.iter().any(|d| d == n))
                        });
                    }
                    Some(arguments)
                }
                "depends" => depends(value, path, report),
                "withSequence" => Some(data::sequence(value, path, report)),
                "withParam" => match literal_list(value) {
                    Some(items) => {
                        out.insert("withItems".into(), items);
                        None
                    }
                    None => Some(value.clone()),
                },
                "continueOn" => data::continue_on(value, path, report),
                // Both at once, below: `onExit` is the `exit` hook.
                "hooks" | "onExit" => None,
                // The caller's: an inline template is converted as one.
                "inline" => None,
                _ => {
                    match value.as_str().map(super::when::to_cel) {
                        Some(Ok(cel)) => Some(cel.into()),
                        Some(Err(why)) => {
                            report.not_converted(
                        path,
                        format!("{value} is not translated to CEL ({why}): write it as a CEL `when`"),
                    );
                            None
                        }
                        None => Some(value.clone()),
                    }
                }
            };
            if let Some(converted) = converted {
                let key = if field == "depends" {
                    "dependsOn"
                } else {
                    field
                };
                out.insert(key.into(), converted);
            }
        },
    );
    if !input_artifacts.is_empty() {
        out.insert("inputs".into(), json!({"artifacts": input_artifacts}));
    }
    let on_exit_path = walk::join(at, "onExit");
    let on_exit = call.get("onExit").map(|v| (v, on_exit_path.as_str()));
    let hooks_path = walk::join(at, "hooks");
    if let Some(hooks) = super::hooks::hooks(call.get("hooks"), on_exit, &hooks_path, report) {
        out.insert("hooks".into(), hooks);
    }
    out
}

/// A call's `arguments`: its parameters, and its artifacts (`from` or `raw`) as the step's
/// input artifacts at the path the called template declares.
fn arguments(
    value: &Value,
    at: &str,
    declared: Option<&Vec<(String, Value)>>,
    report: &mut Report,
) -> (Value, Vec<Value>) {
    let mut artifacts = Vec::new();
    let out = walk::fields(
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
            for mut artifact in data::artifacts(value, path, report) {
                let name = artifact
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let declared_path = declared
                    .and_then(|d| d.iter().find(|(n, _)| *n == name))
                    .map(|(_, p)| p.clone());
                match declared_path {
                    // One without `from` nor `raw` (a location of its own) is named already.
                    Some(_) if !artifact.contains_key("from") && !data::is_raw(&artifact) => {}
                    Some(p) => {
                        artifact.entry("path").or_insert(p);
                        artifacts.push(Value::Object(artifact));
                    }
                    None => report.not_converted(
                        path,
                        format!("artifact {name:?}: the called template declares no input artifact of that name with a path"),
                    ),
                }
            }
        },
    );
    (Value::Object(out), artifacts)
}

/// `depends` as `dependsOn`: every task it names (the `when` it means is the dag's to write,
/// [`super::depends::apply`]).
fn depends(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let text = value.as_str().unwrap_or("");
    match super::depends::Expr::parse(text) {
        Ok(expr) => Some(json!(expr.tasks())),
        Err(why) => {
            report.not_converted(at, format!("depends {text:?} is not translated: {why}"));
            None
        }
    }
}

/// A `withParam` that is a JSON list written out (no `{{...}}`): its items.
fn literal_list(value: &Value) -> Option<Value> {
    let text = value.as_str()?;
    if text.contains("{{") {
        return None;
    }
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_array)
}
