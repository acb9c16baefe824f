//! The steps of a `dag` or `steps` template, read as steps: a `dag`'s as written, Argo's
//! `steps` groups with each entry's `name` its `stepName` and each entry depending on every
//! entry of the group before. Argo's `{{tasks.NAME...}}` (and `tasks.NAME` in a `when`) is read
//! as `{{steps.NAME...}}`, so either form names a sibling.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::crd::{Step, Template};

/// The steps inside `template`, `None` for a container template.
///
/// # Errors
/// The first entry that is not a step, naming it; a template with both `dag` and `steps`.
pub(super) fn inner_steps(template: &Template) -> Option<Result<Vec<Step>, String>> {
    let read = match (&template.dag, &template.steps) {
        (None, None) => return None,
        (Some(_), Some(_)) => Err("has both dag and steps: it is one or the other".to_string()),
        (Some(dag), None) => read_dag(dag),
        (None, Some(groups)) => read_groups(groups),
    };
    Some(read.map(|steps| steps.into_iter().map(tasks_as_steps).collect()))
}

fn read_dag(dag: &[Map<String, Value>]) -> Result<Vec<Step>, String> {
    dag.iter()
        .enumerate()
        .map(|(i, fields)| {
            read_step(fields).map_err(|problem| {
                let inner = fields
                    .get("stepName")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("#{i}"), str::to_string);
                format!("step {inner:?}: {problem}")
            })
        })
        .collect()
}

/// Argo's groups as steps: each entry after every entry of the group before.
fn read_groups(groups: &[Vec<Map<String, Value>>]) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut seen = HashSet::new();
    let mut before: Vec<String> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let mut this = Vec::with_capacity(group.len());
        for (e, entry) in group.iter().enumerate() {
            let at = format!("steps[{g}][{e}]");
            let step = read_entry(entry, &before).map_err(|p| format!("{at}: {p}"))?;
            if !seen.insert(step.step_name.clone()) {
                return Err(format!(
                    "{at}: name {:?} is used twice (names are unique in the template)",
                    step.step_name
                ));
            }
            this.push(step.step_name.clone());
            steps.push(step);
        }
        before = this;
    }
    Ok(steps)
}

/// One entry of a group (`name` and a step's fields but `stepName` and `dependsOn`), run
/// after `before`.
fn read_entry(entry: &Map<String, Value>, before: &[String]) -> Result<Step, String> {
    let Some(Value::String(name)) = entry.get("name") else {
        return Err("name: required (a text, unique in the template)".into());
    };
    for field in ["stepName", "dependsOn"] {
        if entry.contains_key(field) {
            return Err(format!(
                "{name:?}: {field} is not a field of a steps entry (its name is `name`, and it runs after the group before)"
            ));
        }
    }
    let mut fields = entry.clone();
    fields.remove("name");
    fields.insert("stepName".into(), Value::from(name.clone()));
    fields.insert("dependsOn".into(), Value::from(before.to_vec()));
    read_step(&fields).map_err(|p| format!("{name:?}: {p}"))
}

/// `tasks.` at the start of a name in a CEL expression (not `x.tasks.`).
static TASKS_IN_CEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(^|[^A-Za-z0-9_.])tasks(\s*[.\[])").expect("a valid regex"));

/// `step` with Argo's `tasks` forms written as `steps`.
fn tasks_as_steps(step: Step) -> Step {
    let has_tasks = |s: &str| s.contains("tasks");
    let mut value = serde_json::to_value(&step).expect("a step serialises to JSON");
    if !value.to_string().contains("tasks") {
        return step;
    }
    rewrite_texts(&mut value);
    if let Some(when) = value.get_mut("when")
        && let Some(text) = when.as_str().filter(|s| has_tasks(s))
    {
        *when = Value::from(TASKS_IN_CEL.replace_all(text, "${1}steps${2}").into_owned());
    }
    serde_json::from_value(value).expect("a step with its forms renamed reads back")
}

/// `{{tasks.` made `{{steps.` in every string of `value` but its `when`.
fn rewrite_texts(value: &mut Value) {
    match value {
        Value::String(s) if s.contains("tasks.") => {
            *s = s
                .replace("{{tasks.", "{{steps.")
                .replace("{{ tasks.", "{{ steps.");
        }
        Value::Array(list) => list.iter_mut().for_each(rewrite_texts),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(k, _)| *k != "when")
            .for_each(|(_, v)| rewrite_texts(v)),
        _ => {}
    }
}

/// The fields a step may have, by their API names.
static STEP_FIELDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let schema = serde_json::to_value(schemars::schema_for!(Step)).expect("a schema is JSON");
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
});

/// `fields` read as a step, refusing a field no step has (the API server keeps a `dag`'s
/// steps as written, so a misspelt field would otherwise be dropped without a word).
///
/// # Errors
/// The unknown fields, or why the fields are not a step.
fn read_step(fields: &Map<String, Value>) -> Result<Step, String> {
    let unknown: Vec<&str> = fields
        .keys()
        .filter(|k| !STEP_FIELDS.contains(k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown field {}: a step has {}",
            unknown.join(", "),
            STEP_FIELDS.join(", ")
        ));
    }
    serde_json::from_value(Value::Object(fields.clone())).map_err(|e| e.to_string())
}
