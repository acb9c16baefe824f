//! Global outputs, as Argo's `globalName`: an output parameter or artifact a step declares
//! with a `globalName` is also the workflow's, read by later steps and exit steps as
//! `{{workflow.outputs.parameters.NAME}}` (`{{workflow.outputs.artifacts.NAME}}` in an input
//! artifact's `from`). Resolved once every call is expanded: each such form becomes the
//! writer's own output (`{{steps.W.outputs.parameters.P}}`), and a step reading it depends on
//! the writer, so the planner reads it as any other output and it runs after it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::fill::{listed, replace_forms};
use crate::crd::Step;
use crate::outputs::ARTIFACT_PREFIX;

/// The forms a global output is read with, by kind.
const PARAMETERS: &str = "workflow.outputs.parameters.";
const ARTIFACTS: &str = "workflow.outputs.artifacts.";

/// Who writes a global output: the step and its output's key (`P`, `artifacts.A`).
type Writers = BTreeMap<(&'static str, String), (String, String)>;

/// The workflow's global outputs: `(kind, global name, step, output)` of each parameter
/// (`parameters`, its output key `P`), then of each artifact (`artifacts`, `artifacts.A`), of
/// `steps` (plain, expanded).
pub fn declared(steps: &[Step]) -> Vec<(&'static str, String, String, String)> {
    let mut found = Vec::new();
    for step in steps {
        let Some(outputs) = step.outputs.as_deref() else {
            continue;
        };
        for p in &outputs.parameters {
            if let Some(global) = &p.global_name {
                found.push((
                    "parameters",
                    global.clone(),
                    step.step_name.clone(),
                    p.name.clone(),
                ));
            }
        }
        for a in &outputs.artifacts {
            if let Some(global) = &a.global_name {
                let key = format!("{ARTIFACT_PREFIX}{}", a.name);
                found.push(("artifacts", global.clone(), step.step_name.clone(), key));
            }
        }
    }
    found
}

/// Makes every `{{workflow.outputs...}}` of `containers` and `on_exit` its writer's output, a
/// step reading one depending on its writer; returns the problems, each naming its step.
pub(super) fn apply(containers: &mut [Step], on_exit: &mut [Step]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut writers = Writers::new();
    for (kind, global, step, key) in declared(containers) {
        let fans_out = containers.iter().any(|s| {
            s.step_name == step
                && (s.with_items.is_some() || s.with_param.is_some() || s.with_sequence.is_some())
        });
        if fans_out {
            problems.push(format!("step {step:?}: globalName {global:?}: the step fans out, and a workflow output has one value (whose item's would it be?)"));
        }
        if let Some((other, _)) = writers.insert((kind, global.clone()), (step.clone(), key)) {
            problems.push(format!("globalName {global:?} is given by steps {other:?} and {step:?}: a workflow output has one writer"));
        }
    }
    for (steps, main) in [(containers, true), (on_exit, false)] {
        for step in steps.iter_mut() {
            problems.extend(read_by(step, &writers, main));
        }
    }
    problems
}

/// `step` with its global forms made its writers' outputs, depending on them when `main`.
fn read_by(step: &mut Step, writers: &Writers, main: bool) -> Vec<String> {
    let mut value = serde_json::to_value(&*step).expect("a step serialises to JSON");
    if !value.to_string().contains("workflow.outputs.") {
        return Vec::new();
    }
    let mut read = Vec::new();
    let mut problems = Vec::new();
    rewrite(&mut value, writers, &mut read, &mut problems);
    let mut filled: Step =
        serde_json::from_value(value).expect("a step with its forms filled reads back");
    for writer in read {
        if writer == filled.step_name {
            problems.push("reads its own global output: read it as a file of its own".into());
        } else if main && !filled.depends_on.contains(&writer) {
            filled.depends_on.push(writer);
        }
    }
    *step = filled;
    let name = &step.step_name;
    problems
        .into_iter()
        .map(|p| format!("step {name:?}: {p}"))
        .collect()
}

fn rewrite(
    value: &mut Value,
    writers: &Writers,
    read: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    match value {
        Value::String(text) if text.contains("workflow.outputs.") => {
            *text = fill(text, writers, read, problems);
        }
        Value::Array(list) => list
            .iter_mut()
            .for_each(|v| rewrite(v, writers, read, problems)),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(k, _)| *k != "when")
            .for_each(|(_, v)| rewrite(v, writers, read, problems)),
        _ => {}
    }
}

/// `text` with each global form replaced by its writer's output, the writer added to `read`.
fn fill(
    text: &str,
    writers: &Writers,
    read: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> String {
    replace_forms(text, |inner, whole| {
        let (kind, name) = (inner.strip_prefix(PARAMETERS).map(|n| ("parameters", n)))
            .or_else(|| inner.strip_prefix(ARTIFACTS).map(|n| ("artifacts", n)))?;
        let Some((step, key)) = writers.get(&(kind, name.to_string())) else {
            let known = writers
                .keys()
                .filter(|(k, _)| *k == kind)
                .map(|(_, n)| n.as_str());
            problems.push(format!(
                "{whole}: no step's output {kind} has globalName {name:?} ({})",
                listed("global output names", known)
            ));
            return None;
        };
        let key = match kind {
            "parameters" => format!("parameters.{key}"),
            _ => key.clone(),
        };
        read.push(step.clone());
        Some(format!("{{{{steps.{step}.outputs.{key}}}}}"))
    })
}
