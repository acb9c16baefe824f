//! `{{...}}` filled in before planning: `{{workflow.name}}`, `{{workflow.namespace}}`,
//! `{{workflow.uid}}`, `{{workflow.creationTimestamp}}`, `{{workflow.parameters.NAME}}` and,
//! inside a template, `{{inputs.parameters.NAME}}`. What the planner fills later
//! (`{{steps.NAME.outputs.KEY}}`, `{{item}}`) is left as written; any other form is a problem.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::outputs;

/// The values of `{{NAME}}` forms, by `NAME` (e.g. `workflow.parameters.version`).
pub type Vars = BTreeMap<String, String>;

/// Where forms were found that nothing fills: each `(form, why)`.
pub type Unfilled = Vec<(String, String)>;

/// `text` with each form of `vars` replaced; a `workflow.` or `inputs.` form that `vars` does
/// not hold is left as written and reported in `unfilled`.
pub fn fill(text: &str, vars: &Vars, unfilled: &mut Unfilled) -> String {
    replace_forms(text, |inner, whole| {
        if let Some(value) = vars.get(inner) {
            return Some(value.clone());
        }
        // Global outputs are filled once every call is expanded (`globals`).
        let at_run = (inner.strip_prefix("workflow.")).is_some_and(|name| {
            outputs::WORKFLOW_AT_RUN.contains(&name) || name.starts_with("outputs.")
        });
        if (inner.starts_with("workflow.") && !at_run) || inner.starts_with("inputs.") {
            unfilled.push((whole.to_string(), unknown_why(inner, vars)));
        }
        None
    })
}

/// `text` with each `{{...}}` form replaced by what `replace` gives for it (called with the
/// form's trimmed inside and the form as written), or left as written where it gives `None`.
pub(super) fn replace_forms(
    text: &str,
    mut replace: impl FnMut(&str, &str) -> Option<String>,
) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start + 2..].find("}}") else {
            break;
        };
        let whole = &rest[start..start + 2 + end + 2];
        let inner = rest[start + 2..start + 2 + end].trim();
        out.push_str(&rest[..start]);
        match replace(inner, whole) {
            Some(value) => out.push_str(&value),
            None => out.push_str(whole),
        }
        rest = &rest[start + 2 + end + 2..];
    }
    out.push_str(rest);
    out
}

fn unknown_why(inner: &str, vars: &Vars) -> String {
    let scope = if inner.starts_with("inputs.") {
        "inputs.parameters."
    } else if inner.starts_with("workflow.parameters.") {
        "workflow.parameters."
    } else {
        "workflow."
    };
    let known: Vec<&str> = vars
        .keys()
        .filter(|k| k.starts_with(scope) && (scope != "workflow." || !k.contains("parameters.")))
        .map(String::as_str)
        .collect();
    match (scope, known.is_empty()) {
        ("inputs.parameters.", true) => {
            "no input of that name here: inputs are read only inside a template that declares them"
                .into()
        }
        ("workflow.parameters.", true) => {
            "the workflow declares no parameters (spec.arguments.parameters)".into()
        }
        _ => format!("not known here (known: {})", known.join(", ")),
    }
}

/// `what: a, b` or `there are no what`.
pub(super) fn listed<'n>(what: &str, names: impl Iterator<Item = &'n str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        format!("there are no {what}")
    } else {
        format!("{what}: {}", names.join(", "))
    }
}

/// [`fill`] over every string of `value`, in place.
pub fn fill_json(value: &mut Value, vars: &Vars, unfilled: &mut Unfilled) {
    match value {
        Value::String(s) if s.contains("{{") => *s = fill(s, vars, unfilled),
        Value::Array(list) => list.iter_mut().for_each(|v| fill_json(v, vars, unfilled)),
        Value::Object(map) => map.values_mut().for_each(|v| fill_json(v, vars, unfilled)),
        _ => {}
    }
}

/// The forms of `value`'s strings that nothing will fill: not `{{steps.NAME.outputs.KEY}}`,
/// `{{item}}` nor `{{item.FIELD}}` (each once, with why).
pub fn unknown_forms(value: &Value, found: &mut Unfilled) {
    match value {
        Value::String(s) if s.contains("{{") => {
            if let Err(e) = outputs::references(s)
                && !found.iter().any(|(form, _)| *form == e.text)
                && !is_filled_form(&e.text)
            {
                found.push((
                    e.text.clone(),
                    "not a form the operator knows: {{workflow.parameters.NAME}}, \
                     {{workflow.name|namespace|uid|creationTimestamp|scheduledTime}}, \
                     {{workflow.parameters.json|duration|status|failures}}, \
                     {{inputs.parameters.NAME}} in a template, \
                     {{steps.NAME.outputs.KEY}}, \
                     {{steps.NAME.status|exitCode|startedAt|finishedAt|ip}}, {{item}}, {{item.FIELD}}"
                        .into(),
                ));
            }
        }
        Value::Array(list) => list.iter().for_each(|v| unknown_forms(v, found)),
        Value::Object(map) => map.values().for_each(|v| unknown_forms(v, found)),
        _ => {}
    }
}

/// A `{{workflow.…}}` or `{{inputs.…}}` form: [`fill`] reports one it cannot fill.
fn is_filled_form(form: &str) -> bool {
    let inner = form.trim_start_matches("{{").trim_start();
    inner.starts_with("workflow.") || inner.starts_with("inputs.")
}

/// `{{steps.NAME.outputs.KEY}}` in `text` with `NAME` renamed by `rename` (a step of a `dag`
/// template becomes `STEP/NAME` once called).
pub fn rename_outputs(text: &str, rename: &dyn Fn(&str) -> Option<String>) -> String {
    let Ok(found) = outputs::references(text) else {
        return text.to_string();
    };
    let mut out = text.to_string();
    for reference in found {
        if let outputs::Source::Output { step, key } = reference.source
            && let Some(renamed) = rename(step)
        {
            out = out.replace(reference.text, &outputs::reference_text(&renamed, key));
        }
    }
    out
}

/// Marks the step references in `value`, a caller's argument, as the caller's: the callee's
/// steps are renamed under the call after its inputs are filled, and a reference of the
/// caller's to its own step `X` must not become one to the callee's step of the same name
/// (a recursive call passes `{{steps.X.outputs.result}}` to a template that has an `X`).
/// [`unshield_json`] and [`unshield`] take the mark off once the callee is renamed.
pub fn shield(value: &str) -> String {
    if !value.contains("steps") && !value.contains("tasks") {
        return value.to_string();
    }
    value
        .replace("steps.", "steps\u{1}.")
        .replace("steps[", "steps\u{1}[")
        .replace("tasks.", "tasks\u{1}.")
}

/// `text` without [`shield`]'s marks.
pub fn unshield(text: &str) -> String {
    text.replace('\u{1}', "")
}

/// Every string of `value` without [`shield`]'s marks.
pub fn unshield_json(value: &mut Value) {
    match value {
        Value::String(s) if s.contains('\u{1}') => *s = unshield(s),
        Value::Array(list) => list.iter_mut().for_each(unshield_json),
        Value::Object(map) => map.values_mut().for_each(unshield_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        [
            ("workflow.name", "release-x"),
            ("workflow.parameters.version", "1.2"),
            ("inputs.parameters.message", "hi"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn known_forms_are_filled_and_the_planners_are_left_alone() {
        let mut unfilled = Unfilled::new();
        let text = "v{{ workflow.parameters.version }} of {{workflow.name}}: {{inputs.parameters.message}} {{item}} {{steps.a.outputs.k}}";
        assert_eq!(
            fill(text, &vars(), &mut unfilled),
            "v1.2 of release-x: hi {{item}} {{steps.a.outputs.k}}"
        );
        assert!(unfilled.is_empty(), "{unfilled:?}");
    }

    #[test]
    fn an_unknown_workflow_or_inputs_form_is_reported_naming_what_is_known() {
        let mut unfilled = Unfilled::new();
        fill(
            "{{workflow.parameters.verison}} {{inputs.parameters.x}}",
            &vars(),
            &mut unfilled,
        );
        assert_eq!(unfilled[0].0, "{{workflow.parameters.verison}}");
        assert!(
            unfilled[0].1.contains("workflow.parameters.version"),
            "{:?}",
            unfilled[0]
        );
        assert!(
            unfilled[1].1.contains("inputs.parameters.message"),
            "{:?}",
            unfilled[1]
        );
        let mut found = Unfilled::new();
        unknown_forms(
            &serde_json::json!({"image": "x:{{tag}}", "command": ["{{item}}"]}),
            &mut found,
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "{{tag}}");
    }

    #[test]
    fn output_references_are_renamed() {
        let renamed = rename_outputs(
            "a {{steps.build.outputs.sha}} {{steps.other.outputs.x}}",
            &|s| (s == "build").then(|| "linux/build".to_string()),
        );
        assert_eq!(
            renamed,
            "a {{steps.linux/build.outputs.sha}} {{steps.other.outputs.x}}"
        );
    }
}
