//! A `dag` or `steps` template's own outputs: each names an output of one of its steps
//! (`valueFrom.parameter`, an artifact's `from`), so a caller reads
//! `{{steps.CALL.outputs.parameters.NAME}}` (or takes `{{steps.CALL.outputs.artifacts.NAME}}`)
//! of a call of it. Resolved once, as the call is expanded: the caller's reference becomes one
//! to the inner step's output (`{{steps.CALL/X.outputs.parameters.Y}}`), which the planner
//! reads as any other, and which runs before the caller as the call's leaves do.

use std::collections::HashMap;

use serde_json::Value;

use super::fill::listed;
use crate::crd::{Step, StepOutputs, Template};
use crate::outputs::{self, Source};

/// One output of a call: the step that writes it (named at the calling level) and its key
/// there, and the `globalName` the template gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Alias {
    pub(super) step: String,
    pub(super) key: String,
    pub(super) global_name: Option<String>,
}

/// The outputs of one call, by the key a reference names them with (`NAME` for a parameter,
/// `artifacts.NAME` for an artifact).
pub(super) type Outputs = HashMap<String, Alias>;

/// The outputs of each call of a `dag` template in one level, by the call's name.
pub(super) type Calls = HashMap<String, Outputs>;

/// The outputs `template` declares (`outputs` beside its `dag` or `steps`), `None` without.
///
/// # Errors
/// Why they are not outputs.
pub(super) fn declared_of(template: &Template) -> Result<Option<StepOutputs>, String> {
    let Some(value) = template.container.get("outputs") else {
        return Ok(None);
    };
    serde_json::from_value(value.clone())
        .map(Some)
        .map_err(|e| format!("outputs: {e}"))
}

/// Each output of `declared` (of the template `template`, whose steps as written are
/// `inner`) resolved to the inner step that writes it, through `inner_calls` when that step
/// is itself a call of a `dag` template, renamed under `prefix` (`CALL/`).
///
/// # Errors
/// Every output that does not name an output of one of the template's steps, each saying why.
pub(super) fn resolve(
    declared: &StepOutputs,
    (template, inner): (&str, &[Step]),
    inner_calls: &Calls,
    prefix: &str,
) -> Result<Outputs, Vec<String>> {
    let mut resolved = Outputs::new();
    let mut problems = Vec::new();
    let parameters = declared.parameters.iter().map(|p| {
        let from = p.value_from.parameter.as_deref();
        (("parameter", &p.name, p.name.clone()), from, &p.global_name)
    });
    let artifacts = declared.artifacts.iter().map(|a| {
        let key = format!("{}{}", outputs::ARTIFACT_PREFIX, a.name);
        (
            ("artifact", &a.name, key),
            a.from.as_deref(),
            &a.global_name,
        )
    });
    for ((what, name, key), from, global_name) in parameters.chain(artifacts) {
        let field = if what == "parameter" {
            "valueFrom.parameter"
        } else {
            "from"
        };
        let at = format!("template {template:?}: output {what} {name:?}");
        let Some(from) = from else {
            problems.push(format!("{at}: {field}: required in a dag or steps template (the output of one of its steps: {{{{steps.X.outputs...}}}})"));
            continue;
        };
        match source(from, what == "artifact", (template, inner), inner_calls) {
            Ok((step, inner_key)) => {
                let alias = Alias {
                    step: format!("{prefix}{step}"),
                    key: inner_key,
                    global_name: global_name.clone(),
                };
                resolved.insert(key, alias);
            }
            Err(why) => problems.push(format!("{at}: {field} {from:?} {why}")),
        }
    }
    if problems.is_empty() {
        Ok(resolved)
    } else {
        Err(problems)
    }
}

/// The inner step (named at the template's level) and key that `from` names.
fn source(
    from: &str,
    artifact: bool,
    (template, inner): (&str, &[Step]),
    inner_calls: &Calls,
) -> Result<(String, String), String> {
    // Argo's dag templates name their tasks `tasks.X`.
    let from = (from.trim())
        .replace("{{tasks.", "{{steps.")
        .replace("{{ tasks.", "{{ steps.");
    let found = outputs::references(&from).map_err(|e| e.to_string())?;
    let (step, key) = match found.as_slice() {
        [reference] if reference.text == from => match reference.source {
            Source::Output { step, key } => (step, key),
            _ => return Err("is not {{steps.X.outputs...}} of one of its steps".into()),
        },
        _ => return Err("is not one {{steps.X.outputs...}} of one of its steps".into()),
    };
    if artifact != key.starts_with(outputs::ARTIFACT_PREFIX) {
        return Err(if artifact {
            "names no artifact: an output artifact is {{steps.X.outputs.artifacts.A}}".into()
        } else {
            "names an artifact: an output parameter is {{steps.X.outputs.parameters.P}} or .outputs.result".into()
        });
    }
    if let Some(call) = inner_calls.get(step) {
        return match call.get(key) {
            Some(alias) => Ok((alias.step.clone(), alias.key.clone())),
            None => Err(format!(
                "names {key:?} of step {step:?}, a call whose template declares no such output ({})",
                listed("outputs", call.keys().map(String::as_str))
            )),
        };
    }
    if !inner.iter().any(|s| s.step_name == step) {
        return Err(format!(
            "names step {step:?}, which is not a step of template {template:?} ({})",
            listed("its steps", inner.iter().map(|s| s.step_name.as_str()))
        ));
    }
    Ok((step.to_string(), key.to_string()))
}

/// Every reference of `steps` (one level's) to an output of a call in `calls` made a
/// reference to the inner step that writes it; a reference to an output the call's template
/// does not declare is a problem `(step, why)`.
pub(super) fn apply(steps: &mut [Step], calls: &Calls) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    for step in steps.iter_mut() {
        let mut value = serde_json::to_value(&*step).expect("a step serialises to JSON");
        let mut changed = false;
        let mut found = Vec::new();
        rewrite(&mut value, calls, &mut changed, &mut found);
        let when = step.when.as_deref().unwrap_or_default();
        for call in calls.keys() {
            if when.contains(&format!("steps.{call}.outputs"))
                || when.contains(&format!("steps[\"{call}\"].outputs"))
            {
                found.push(format!("when {when:?} reads an output of {call:?}, a call of a dag template: a when reads the outputs of a step (pass the output as a parameter, or read the inner step)"));
            }
        }
        problems.extend(found.into_iter().map(|p| (step.step_name.clone(), p)));
        if changed {
            *step = serde_json::from_value(value)
                .expect("a step with its references aliased reads back");
        }
    }
    problems
}

fn rewrite(value: &mut Value, calls: &Calls, changed: &mut bool, found: &mut Vec<String>) {
    match value {
        Value::String(text) if text.contains("{{") => {
            let Ok(references) = outputs::references(text) else {
                return;
            };
            let mut out = text.clone();
            for reference in references {
                let Source::Output { step, key } = reference.source else {
                    continue;
                };
                let Some(call) = calls.get(step) else {
                    continue;
                };
                match call.get(key) {
                    Some(alias) => {
                        let aliased = format!("{{{{steps.{}.outputs.{}}}}}", alias.step, alias.key);
                        out = out.replacen(reference.text, &aliased, 1);
                        *changed = true;
                    }
                    None => found.push(format!(
                        "{}: step {step:?} calls a dag or steps template that declares no output {key:?} ({})",
                        reference.text,
                        listed("outputs", call.keys().map(String::as_str))
                    )),
                }
            }
            *text = out;
        }
        Value::Array(list) => list
            .iter_mut()
            .for_each(|v| rewrite(v, calls, changed, found)),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(k, _)| *k != "when")
            .for_each(|(_, v)| rewrite(v, calls, changed, found)),
        _ => {}
    }
}
