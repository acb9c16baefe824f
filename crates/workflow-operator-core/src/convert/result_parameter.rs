//! An output parameter named `result`, which Argo keeps apart from a step's standard output
//! (`{{steps.X.outputs.parameters.result}}` beside `{{steps.X.outputs.result}}`) and which here
//! would be the same key: renamed [`RENAMED`] in the Argo document before it is converted, in
//! every template that declares it and every reference to it, so both keep their meaning.

use serde_json::Value;

use super::walk::{self, Report};

/// What an output parameter named `result` is called here.
pub const RENAMED: &str = "result-parameter";

/// What a reference to the output parameter says after a step's (or the template's own)
/// `outputs.`: `{{steps.X.outputs.parameters.result}}`, `{{outputs.parameters.result}}`.
const REFERENCE: &str = "outputs.parameters.result";

/// `spec` (an Argo workflow's, template's or cron workflow's `workflowSpec`) with each output
/// parameter named `result` renamed [`RENAMED`], and the references to it; noted once at `at`.
pub fn rename(spec: &mut Value, at: &str, report: &mut Report) {
    let Some(templates) = spec.get_mut("templates").and_then(Value::as_array_mut) else {
        return;
    };
    let mut renamed = Vec::new();
    for template in templates.iter_mut() {
        let name = template
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let parameters = template
            .pointer_mut("/outputs/parameters")
            .and_then(Value::as_array_mut);
        for parameter in parameters.into_iter().flatten() {
            if parameter.get("name").and_then(Value::as_str) == Some("result") {
                parameter["name"] = Value::String(RENAMED.into());
                renamed.push(name.clone());
            }
        }
    }
    if renamed.is_empty() {
        return;
    }
    walk::rewrite_strings(spec, &rewrite);
    report.noted(
        at,
        format!(
            "output parameter \"result\" of template {} is {RENAMED:?} here, and so are the \
             references to it: a step's `result` is its standard output",
            renamed.join(", ")
        ),
    );
}

/// `text` with each reference to an output parameter `result` naming [`RENAMED`]; a workflow's
/// global output of that name (`workflow.outputs.parameters.result`) is another thing, kept.
fn rewrite(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(REFERENCE) {
        let (before, after) = (&rest[..at], &rest[at + REFERENCE.len()..]);
        let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let global = before.ends_with("workflow.");
        out.push_str(before);
        match whole && !global {
            true => out.push_str(&format!("outputs.parameters.{RENAMED}")),
            false => out.push_str(REFERENCE),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_to_the_parameter_are_renamed_and_others_are_kept() {
        let cases = [
            (
                "{{steps.a.outputs.parameters.result}}",
                "{{steps.a.outputs.parameters.result-parameter}}",
            ),
            (
                "{{ tasks.a.outputs.parameters.result }} == x",
                "{{ tasks.a.outputs.parameters.result-parameter }} == x",
            ),
            (
                "{{outputs.parameters.result}}",
                "{{outputs.parameters.result-parameter}}",
            ),
            ("{{steps.a.outputs.result}}", "{{steps.a.outputs.result}}"),
            (
                "{{steps.a.outputs.parameters.results}}",
                "{{steps.a.outputs.parameters.results}}",
            ),
            (
                "{{workflow.outputs.parameters.result}}",
                "{{workflow.outputs.parameters.result}}",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(rewrite(text), want, "{text}");
        }
    }
}
