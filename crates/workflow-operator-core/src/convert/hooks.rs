//! Argo's lifecycle hooks (`hooks` of a workflow, a task or a step; a task's or step's own
//! `onExit`, which is its `exit` hook) as ours: each hook's `template` and `arguments` as they
//! are, its `expression` (expr-lang) in CEL where the translation keeps its meaning.
//!
//! Argo's expressions read `workflow.status` and a step's status (`steps["X"].status`,
//! `steps.X.status`, `tasks.X.status`); here a task is a step, and the workflow's `Succeeded`
//! is `Completed` (`Error` is `Failed`), as in an exit step's `when`. An expression that reads
//! anything else, or that CEL does not read as Argo's expr-lang does, is named with why.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::data::{self, Parameters};
use super::walk::{self, Report};
use crate::crd::hooks::EXIT;
use crate::when::{Place, When};

/// `hooks` at path `at`, with `on_exit` (a task's or step's `onExit`, the template of its
/// `exit` hook) when given; `None` when no hook is left.
pub fn hooks(
    value: Option<&Value>,
    on_exit: Option<(&Value, &str)>,
    at: &str,
    report: &mut Report,
) -> Option<Value> {
    let mut out = Map::new();
    if let Some(value) = value {
        match value.as_object() {
            Some(hooks) => {
                for (name, hook) in hooks {
                    let path = walk::join(at, name);
                    if let Some(converted) = hook_of(name, hook, &path, report) {
                        out.insert(name.clone(), converted);
                    }
                }
            }
            None => report.not_converted(at, "expected an object of hooks by name"),
        }
    }
    if let Some((template, path)) = on_exit {
        match template.as_str() {
            Some(_) if out.contains_key(EXIT) => {
                report.not_converted(path, "hooks.exit is given too: the hook is kept");
            }
            Some(name) => {
                out.insert(EXIT.into(), json!({ "template": name }));
            }
            None => report.not_converted(path, "expected a template's name"),
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// One hook, `name`, at `at`.
fn hook_of(name: &str, hook: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let Some(fields) = hook.as_object() else {
        report.not_converted(at, "expected an object (template, arguments, expression)");
        return None;
    };
    let mut out = Map::new();
    for (field, value) in fields {
        let path = walk::join(at, field);
        match field.as_str() {
            "template" => {
                out.insert(field.clone(), value.clone());
            }
            "arguments" => {
                if let Some(arguments) = arguments(value, &path, report) {
                    out.insert(field.clone(), arguments);
                }
            }
            "expression" => match value.as_str().map(expression) {
                Some(Ok(cel)) => {
                    out.insert(field.clone(), cel.into());
                }
                Some(Err(why)) => {
                    report.not_converted(at, format!("the hook is left out: {why}"));
                    return None;
                }
                None => report.not_converted(&path, "expected a text"),
            },
            "templateRef" => {
                report.not_converted(
                    at,
                    "the hook is left out: a hook calling a templateRef is not supported yet",
                );
                return None;
            }
            _ => report.not_converted(&path, "not a field of a hook"),
        }
    }
    if name != EXIT && !out.contains_key("expression") {
        report.not_converted(
            at,
            "the hook is left out: a hook other than exit needs an expression",
        );
        return None;
    }
    Some(Value::Object(out))
}

/// A hook's `arguments`: its parameters (an artifact is named, not converted).
fn arguments(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let object = value.as_object()?;
    let mut out = Map::new();
    for (field, value) in object {
        let path = walk::join(at, field);
        if field == "parameters" {
            let parameters = data::parameters(value, &path, Parameters::Arguments, report);
            let mut parameters = parameters;
            walk::rewrite_strings(&mut parameters, &data::tasks_as_steps);
            out.insert(field.clone(), parameters);
        } else {
            report.not_converted(&path, "a hook's artifacts are not supported yet");
        }
    }
    Some(Value::Object(out))
}

/// `workflow.status` compared with a word Argo names otherwise.
static WORKFLOW_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(workflow\.status\s*[!=]=\s*)(["'])(Succeeded|Error)(["'])"#)
        .expect("a valid regex")
});

/// A task named as a step: `tasks.X`, `tasks["X"]`.
static TASKS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\btasks\s*([.\[])").expect("a valid regex"));

/// A hook's `expression` (expr-lang) in CEL, or why it is not translated.
pub fn expression(argo: &str) -> Result<String, String> {
    let cel = TASKS.replace_all(argo, "steps$1");
    let cel = WORKFLOW_STATUS.replace_all(&cel, |found: &regex::Captures<'_>| {
        let ours = if &found[3] == "Succeeded" {
            "Completed"
        } else {
            "Failed"
        };
        format!("{}\"{ours}\"", &found[1])
    });
    let cel = cel.replace(" and ", " && ").replace(" or ", " || ");
    if cel.contains("not ") || cel.contains(" in ") {
        return Err(format!(
            "expression {argo:?} uses expr-lang's not or in, which are not translated"
        ));
    }
    if let Some(other) = other_read(&cel) {
        return Err(format!(
            "expression {argo:?} reads {other}: only workflow.status and a step's status are translated"
        ));
    }
    When::compile_for(&cel, &Default::default(), Place::Exit)
        .map_err(|why| format!("expression {argo:?} as CEL {cel:?} {why}"))?;
    Ok(cel)
}

/// What of the workflow or of a step `cel` reads besides its status, if anything.
fn other_read(cel: &str) -> Option<String> {
    static READS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"\b(workflow|steps)\s*(?:\.\s*[A-Za-z_][A-Za-z0-9_-]*|\[\s*(?:"[^"]*"|'[^']*')\s*\])?(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?"#)
            .expect("a valid regex")
    });
    for found in READS.captures_iter(cel) {
        let root = &found[1];
        let field = found.get(2).map(|m| m.as_str());
        let status = match root {
            "workflow" => found[0].trim_start_matches("workflow").trim() == ".status",
            _ => field == Some("status"),
        };
        if !status {
            return Some(found[0].to_string());
        }
    }
    None
}
