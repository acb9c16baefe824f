//! A step's `when`: a CEL expression (the expression language of Kubernetes itself,
//! run on the `cel` crate with kube-rs' Kubernetes CEL libraries, `kube-cel`) over the steps
//! upstream of it, `steps.NAME.outputs.KEY` (strings; Argo's `.outputs.parameters.KEY` is the
//! same value, `.outputs.result` the standard output, `.outputs.artifacts.NAME` an artifact's
//! key) and `steps.NAME.phase` (`Succeeded`, `Skipped` for a step a `when` skipped, `Failed` or
//! `TimedOut` for a step that failed and whose failure the workflow survives, `continueOn`;
//! Argo's `steps.NAME.status` names it as Argo does, see [`Ended`]), and of a step that ran
//! `steps.NAME.exitCode` (an int), `startedAt` and `finishedAt` (RFC 3339 text);
//! `steps.NAME.daemoned` is true for a daemon step that was ready (Argo's `.Daemoned`). A
//! step whose name is not a CEL identifier is `steps["my-step"]`, and any field may be written
//! `["field"]`. True: the step runs; false: it is skipped, and a skipped step counts as done for
//! its dependents. CEL's macros (`all`, `exists`, `exists_one`, `map`, `filter`) work as in
//! Kubernetes' validation rules.
//!
//! Any step's `when` may read `workflow.duration`, the seconds since the run started (a double,
//! as of when the `when` is decided). An exit step's `when` may also read `workflow.status`
//! (`Completed` or `Failed`) and every step (a step that did not finish reads `Omitted`), and may iterate over them
//! (`steps.exists(s, steps[s].phase == "Failed")`).
//!
//! On a step that fans out, `{{item}}` and `{{item.FIELD}}` are its item, and the `when` is
//! decided for each item (`item`: its text in a quoted string, its value elsewhere).
//!
//! [`When::compile`] is the check at create (it parses, names only `steps` and `workflow`, and
//! of a step only the fields it has; [`When::reads`] says which, for the checks against the
//! spec); [`When::evaluate`] runs it once the step is ready (once per item when it names one:
//! [`When::evaluate_in`]).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::LazyLock;

use k8s_openapi::jiff::Timestamp;
use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value};
use regex::Regex;

use super::agent::RESULT;
use super::outputs::{ARTIFACT_PREFIX, Outputs};

mod item;

pub use item::{ItemRead, fill as fill_item};

/// A compiled `when`.
#[derive(Debug)]
pub struct When {
    program: Program,
    /// The steps it names, in the order first named.
    steps: Vec<String>,
    /// What it reads of them, in the order written.
    reads: Vec<StepRead>,
    /// `workflow.parameters`, when it names `workflow`.
    workflow: Option<HashMap<Key, Value>>,
    /// It iterates over `steps` (an exit step's only): it sees every step.
    every_step: bool,
    /// It reads `workflow.failures` (an exit step's only).
    reads_failures: bool,
    /// The item placeholders it holds, each a variable of the program (`item`), in order.
    items: Vec<ItemRead>,
}

/// What a `when` reads of a step it names: the fields written after `steps.NAME` (or
/// `steps["NAME"]`) as names or quoted keys, up to the first that is neither or is a method
/// call (`["outputs", "result"]` for `steps["flip"].outputs.result.startsWith("h")`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRead {
    /// The step.
    pub step: String,
    /// The fields, outermost first.
    pub fields: Vec<String>,
    /// As written, normalized for messages: `steps["flip"].outputs.result`.
    pub shown: String,
}

impl StepRead {
    /// Whether it reads the step's standard output (`.outputs.result`).
    pub fn is_result(&self) -> bool {
        matches!(self.fields.as_slice(), [outputs, result, ..] if outputs == "outputs" && result == RESULT)
    }

    /// The output artifact it names (`.outputs.artifacts.NAME`).
    pub fn artifact(&self) -> Option<&str> {
        match self.fields.as_slice() {
            [outputs, artifacts, name] if outputs == "outputs" && artifacts == "artifacts" => {
                Some(name)
            }
            _ => None,
        }
    }

    /// Whether a step has these fields: `phase` and `outputs`, an output (a string), and the
    /// maps `outputs.parameters` and `outputs.artifacts` of strings.
    fn is_known(&self) -> bool {
        let fields: Vec<&str> = self.fields.iter().map(String::as_str).collect();
        matches!(
            fields.as_slice(),
            [] | ["phase" | "status" | "exitCode" | "startedAt" | "finishedAt" | "daemoned"]
                | ["outputs"]
                | ["outputs", _]
                | ["outputs", "parameters" | "artifacts", _]
        )
    }
}

/// The fields written at the start of `rest` (the text after a step), as [`StepRead::fields`].
fn fields_after(mut rest: &str) -> Vec<String> {
    let mut fields = Vec::new();
    loop {
        let text = rest.trim_start();
        if let Some(after) = text.strip_prefix('.') {
            let after = after.trim_start();
            let end = (after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
                .unwrap_or(after.len());
            let name = &after[..end];
            let called = after[end..].trim_start().starts_with('(');
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) || called {
                return fields;
            }
            fields.push(name.to_string());
            rest = &after[end..];
        } else if let Some(after) = text.strip_prefix('[') {
            let after = after.trim_start();
            let Some(quote) = after.chars().next().filter(|c| matches!(c, '"' | '\'')) else {
                return fields;
            };
            let Some(end) = after[1..].find(quote) else {
                return fields;
            };
            let Some(next) = after[1 + end + 1..].trim_start().strip_prefix(']') else {
                return fields;
            };
            fields.push(after[1..1 + end].to_string());
            rest = next;
        } else {
            return fields;
        }
    }
}

/// `steps.NAME` or `steps["NAME"]` (as written: a name that is not an identifier cannot be
/// written otherwise) and `fields`, each `.NAME` or `["KEY"]`.
fn shown(step: &str, bracket: bool, fields: &[String]) -> String {
    let is_name = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut text = match bracket {
        false => format!("steps.{step}"),
        true => format!("steps[{step:?}]"),
    };
    for field in fields {
        match is_name(field) {
            true => text.push_str(&format!(".{field}")),
            false => text.push_str(&format!("[{field:?}]")),
        }
    }
    text
}

/// What an upstream step tells a `when`.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    /// `Succeeded` or `Skipped`.
    pub phase: &'a str,
    /// Its outputs (none for a skipped step).
    pub outputs: Option<&'a Outputs>,
    /// How it ended, when it ran (Argo's `status`, `exitCode`, `startedAt`, `finishedAt`).
    pub ended: Option<Ended>,
}

/// How a step that ran ended, as Argo names it (`{{steps.NAME.status}}`, `.exitCode`,
/// `.startedAt`, `.finishedAt`): seen once, from its Job, when the planner first finds it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// `Succeeded`; `Failed` when its container exited non-zero or it ran past its timeout
    /// (Argo's `Failed`: a deadline kills the container); `Error` for any other failure (its
    /// pod did not start, its Job was refused, what it reads failed it), as Argo's `Error` is
    /// "an error other than a non-0 exit code".
    pub status: &'static str,
    /// The container's exit code (0 for a success); none when it did not exit by itself.
    pub exit_code: Option<i32>,
    /// When its Job started.
    pub started_at: Option<Timestamp>,
    /// When its Job ended.
    pub finished_at: Option<Timestamp>,
    /// A daemon step's pod's IP, read once when it became ready (`{{steps.NAME.ip}}`).
    pub ip: Option<IpAddr>,
}

impl Ended {
    /// The text of `field` (one of [`crate::outputs::STEP_FIELDS`] but `status`), times in
    /// RFC 3339 to the second as Argo writes them; `None` when it has none.
    pub fn text(&self, field: &str) -> Option<String> {
        match field {
            "status" => Some(self.status.to_string()),
            "exitCode" => self.exit_code.map(|c| c.to_string()),
            "startedAt" => self.started_at.map(|t| format!("{t:.0}")),
            "finishedAt" => self.finished_at.map(|t| format!("{t:.0}")),
            "ip" => self.ip.map(|ip| ip.to_string()),
            _ => None,
        }
    }
}

/// Argo's name of a step's `phase` (`steps.NAME.status`) for a step that did not run (skipped,
/// or, in an exit step, omitted) or whose end is not known: a timed-out step is `Failed`.
pub fn argo_phase(phase: &str) -> &str {
    if phase == "TimedOut" { "Failed" } else { phase }
}

/// `steps.NAME` and `steps["NAME"]` (or single quotes): the steps an expression names. A
/// name followed by `(` (group 4) is a macro over `steps`, not a step.
static STEP_NAMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)(\s*\()?|\[\s*(?:"([^"]*)"|'([^']*)')\s*\])"#,
    )
    .expect("a valid regex")
});

/// The variable a CEL macro binds (`x` in `list.exists(x, x > 1)`), which is no variable of
/// the workflow's.
static MACRO_VARIABLES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
        .expect("a valid regex")
});

/// The step a [`STEP_NAMES`] match names, unless it is a macro over `steps`.
fn named_step<'t>(found: &regex::Captures<'t>) -> Option<&'t str> {
    if found.get(2).is_some() {
        return None;
    }
    let name = found
        .get(1)
        .or_else(|| found.get(3))
        .or_else(|| found.get(4));
    Some(name.map_or("", |m| m.as_str()))
}

/// What a `when` reads of the workflow as it runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Run<'a> {
    /// How it ended (`Completed` or `Failed`), an exit step's `workflow.status`.
    pub status: Option<&'a str>,
    /// Seconds since it started, `workflow.duration` (Argo's `{{workflow.duration}}`).
    pub duration: f64,
    /// The failed steps as Argo's `{{workflow.failures}}` text (`workflow_failures::json`), an
    /// exit step's `workflow.failures`, when its `when` reads it.
    pub failures: Option<&'a str>,
}

/// Where a `when` is: on a step, or on an exit step (which may read `workflow.status` and
/// every step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A step of `containers`.
    Step,
    /// A step of `onExit`.
    Exit,
}

impl When {
    /// Parses `expression`.
    ///
    /// # Errors
    /// Why it cannot run: it does not parse, or it names a variable other than `steps`, or it
    /// names no step at all through `steps` in a way that can be checked.
    pub fn compile(expression: &str) -> Result<When, String> {
        When::compile_with(expression, &BTreeMap::new())
    }

    /// [`When::compile`] for a workflow whose parameters are `parameters` (name to value):
    /// the expression may also read `workflow.parameters.NAME`.
    ///
    /// # Errors
    /// As [`When::compile`], and a parameter named that the workflow does not declare.
    pub fn compile_with(
        expression: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<When, String> {
        When::compile_for(expression, parameters, Place::Step)
    }

    /// [`When::compile_with`] for a `when` at `place`.
    ///
    /// # Errors
    /// As [`When::compile_with`], and, on a step, `workflow.status` or a macro over `steps`.
    pub fn compile_for(
        expression: &str,
        parameters: &BTreeMap<String, String>,
        place: Place,
    ) -> Result<When, String> {
        if let Some(why) = run_time_form(expression) {
            return Err(why);
        }
        let (cel, items) = item::variables(expression);
        let program = Program::compile(&cel)
            .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
        let references = program.references();
        let bound: Vec<&str> = MACRO_VARIABLES
            .captures_iter(expression)
            .filter_map(|found| found.get(1).map(|m| m.as_str()))
            .collect();
        let item_variables: Vec<String> = (0..items.len())
            .map(|i| format!("{}{i}", item::VARIABLE))
            .collect();
        let mut others: Vec<&str> = (references.variables().iter().copied())
            .filter(|v| *v != "steps" && *v != "workflow" && !bound.contains(v))
            .filter(|v| !item_variables.iter().any(|i| i == v))
            .collect();
        others.sort_unstable();
        if let Some(other) = others.first() {
            return Err(format!(
                "names {other:?}: a when may name only steps (steps.NAME.outputs.KEY, steps.NAME.phase) and workflow.parameters.NAME"
            ));
        }
        let workflow = references
            .variables()
            .contains(&"workflow")
            .then(|| workflow_variable(expression, parameters, place))
            .transpose()?;
        let (steps, reads, every_step) = step_reads(expression, place)?;
        let reads_failures =
            (PARAMETER_NAMES.captures_iter(expression)).any(|f| &f[1] == "failures");
        Ok(When {
            program,
            steps,
            reads,
            workflow,
            every_step,
            reads_failures,
            items,
        })
    }

    /// The steps the expression names.
    pub fn steps(&self) -> &[String] {
        &self.steps
    }

    /// What it reads of the steps it names, in the order written.
    pub fn reads(&self) -> &[StepRead] {
        &self.reads
    }

    /// Whether it reads the standard output of `step` (`.outputs.result`).
    pub fn reads_result(&self, step: &str) -> bool {
        (self.reads.iter()).any(|read| read.step == step && read.is_result())
    }

    /// Whether it reads of `step` only how it ended (`phase`, `status`, `exitCode`,
    /// `startedAt`, `finishedAt`, `daemoned`), none of its outputs.
    pub fn reads_only_end(&self, step: &str) -> bool {
        (self.reads.iter().filter(|read| read.step == step)).all(|read| {
            matches!(
                read.fields.first().map(String::as_str),
                Some("phase" | "status" | "exitCode" | "startedAt" | "finishedAt" | "daemoned")
            )
        })
    }

    /// Whether it iterates over `steps` (an exit step's): it must see every step.
    pub fn every_step(&self) -> bool {
        self.every_step
    }

    /// Whether it reads `workflow.failures` (an exit step's): the run's failed steps must be
    /// given ([`Run::failures`]).
    pub fn reads_failures(&self) -> bool {
        self.reads_failures
    }

    /// The item placeholders it holds (`{{item}}`, `{{item.FIELD}}`): it is decided per item.
    pub fn item_reads(&self) -> &[ItemRead] {
        &self.items
    }

    /// Runs the expression with `upstream` (the steps it may see, by name).
    ///
    /// # Errors
    /// The evaluation's error (a missing output is CEL's `No such key`), or a result that is
    /// not a bool.
    pub fn evaluate(&self, upstream: &HashMap<&str, Upstream<'_>>) -> Result<bool, String> {
        self.evaluate_in(upstream, Run::default(), None)
    }

    /// [`When::evaluate`] in the workflow as `run` says (an exit step's `workflow.status`,
    /// `workflow.duration`), and for an item of a step that fans out, `item` (for the
    /// placeholders it holds).
    ///
    /// # Errors
    /// As [`When::evaluate`]; an item without a field a placeholder names, or none given to a
    /// `when` that names one.
    pub fn evaluate_in(
        &self,
        upstream: &HashMap<&str, Upstream<'_>>,
        run: Run<'_>,
        item: Option<&serde_json::Value>,
    ) -> Result<bool, String> {
        let mut items = Vec::with_capacity(self.items.len());
        for (i, read) in self.items.iter().enumerate() {
            let Some(item) = item else {
                return Err(format!("{} names an item, and none is given", read.shown));
            };
            items.push((format!("{}{i}", item::VARIABLE), read.value(item)?));
        }
        thread_local! {
            static BASE: Context<'static> = Context::default().with_all();
        }
        let steps: HashMap<Key, Value> = upstream
            .iter()
            .map(|(name, step)| (Key::from(*name), step_value(step)))
            .collect();
        BASE.with(|base| {
            let mut context = base.new_inner_scope();
            context.add_variable_from_value("steps", Value::Map(Map::from(steps)));
            for (name, value) in items {
                context.add_variable_from_value(name, value);
            }
            if let Some(workflow) = &self.workflow {
                let mut fields = workflow.clone();
                if let Some(status) = run.status {
                    fields.insert(Key::from("status"), Value::from(status));
                }
                fields.insert(Key::from("duration"), Value::Float(run.duration));
                if let Some(failures) = run.failures {
                    fields.insert(Key::from("failures"), Value::from(failures));
                }
                context.add_variable_from_value("workflow", Value::Map(Map::from(fields)));
            }
            match self.program.execute(&context) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("is {other:?}, not a bool")),
                Err(e) => Err(one_line(&e.to_string())),
            }
        })
    }
}

/// Why `expression` cannot hold the first form it holds that is filled only when a Job is
/// made (`{{pod.name}}`, `{{workflow.duration}}`, ...): left as text, it would be compared as
/// written.
fn run_time_form(expression: &str) -> Option<String> {
    let inner = (expression.split("{{").skip(1))
        .filter_map(|rest| rest.split("}}").next().map(str::trim))
        .find(|inner| {
            *inner == super::outputs::POD_NAME
                || (inner.strip_prefix("workflow."))
                    .is_some_and(|name| super::outputs::WORKFLOW_AT_RUN.contains(&name))
        })?;
    Some(match inner {
        "workflow.duration" | "workflow.status" | "workflow.failures" => format!("names {{{{{inner}}}}}: write {inner}, the expression's own variable"),
        _ => "names {{pod.name}}: a pod's name is known only inside its pod (a step's command, args, env values or source), not in a when; Argo refuses it there too".to_string(),
    })
}

/// A step as a `when` sees it: `phase`, Argo's `status`, `outputs`, whether it is a daemon
/// that was ready (`daemoned`, its IP known), and for a step that ran `exitCode` (an int),
/// `startedAt` and `finishedAt` (RFC 3339 text) when it has them.
fn step_value(step: &Upstream<'_>) -> Value {
    let status = step.ended.map_or(argo_phase(step.phase), |e| e.status);
    let daemoned = step.ended.is_some_and(|e| e.ip.is_some());
    let mut fields: HashMap<Key, Value> = [
        (Key::from("phase"), Value::from(step.phase)),
        (Key::from("status"), Value::from(status)),
        (Key::from("outputs"), outputs_value(step.outputs)),
        (Key::from("daemoned"), Value::Bool(daemoned)),
    ]
    .into();
    if let Some(ended) = step.ended {
        if let Some(code) = ended.exit_code {
            fields.insert(Key::from("exitCode"), Value::Int(code.into()));
        }
        for field in ["startedAt", "finishedAt"] {
            if let Some(text) = ended.text(field) {
                fields.insert(Key::from(field), Value::from(text));
            }
        }
    }
    Value::Map(Map::from(fields))
}

/// The steps `expression` (a `when` at `place`) names, what it reads of them, and whether it
/// iterates over `steps`.
fn step_reads(
    expression: &str,
    place: Place,
) -> Result<(Vec<String>, Vec<StepRead>, bool), String> {
    let mut steps: Vec<String> = Vec::new();
    let mut reads = Vec::new();
    let mut every_step = false;
    for found in STEP_NAMES.captures_iter(expression) {
        let Some(name) = named_step(&found) else {
            if place == Place::Step {
                return Err(
                    "iterates over steps: only an exit step's when may (it runs once \
                     every step ended); name the steps instead"
                        .to_string(),
                );
            }
            every_step = true;
            continue;
        };
        let fields = fields_after(&expression[found.get(0).map_or(0, |m| m.end())..]);
        let read = StepRead {
            shown: shown(name, found.get(1).is_none(), &fields),
            step: name.to_string(),
            fields,
        };
        if !read.is_known() {
            return Err(format!(
                "names {}, which a step does not have: a when reads steps.NAME.phase (or Argo's \
                 .status, and .exitCode, .startedAt, .finishedAt of a step that ran) and \
                 steps.NAME.outputs.KEY (or .outputs.parameters.KEY, .outputs.result, \
                 .outputs.artifacts.NAME), each a string",
                read.shown
            ));
        }
        if !steps.iter().any(|s| s == name) {
            steps.push(name.to_string());
        }
        reads.push(read);
    }
    Ok((steps, reads, every_step))
}

/// A step's `outputs` as a `when` sees them: each key (an artifact's as `artifacts.NAME`), and
/// Argo's maps `parameters` (every key but the result and artifacts) and `artifacts` (by
/// name), unless the step wrote a key of that name.
fn outputs_value(outputs: Option<&Outputs>) -> Value {
    let value = |v: &String| Value::from(v.as_str());
    let mut map: HashMap<Key, Value> = (outputs.into_iter().flatten())
        .map(|(k, v)| (Key::from(k.as_str()), value(v)))
        .collect();
    let mut parameters = HashMap::new();
    let mut artifacts = HashMap::new();
    for (k, v) in outputs.into_iter().flatten() {
        match k.strip_prefix(ARTIFACT_PREFIX) {
            Some(name) => artifacts.insert(Key::from(name), value(v)),
            None if k != RESULT => parameters.insert(Key::from(k.as_str()), value(v)),
            None => None,
        };
    }
    for (field, values) in [("parameters", parameters), ("artifacts", artifacts)] {
        (map.entry(Key::from(field))).or_insert_with(|| Value::Map(Map::from(values)));
    }
    Value::Map(Map::from(map))
}

/// `workflow.NAME` as an expression may name it: `workflow.parameters.NAME`.
static PARAMETER_NAMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bworkflow\s*\.\s*(\w+)(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_-]*))?")
        .expect("a valid regex")
});

/// The `workflow` variable of `expression` at `place` (its `status` is added when it runs),
/// checking each parameter it names is declared.
fn workflow_variable(
    expression: &str,
    parameters: &BTreeMap<String, String>,
    place: Place,
) -> Result<HashMap<Key, Value>, String> {
    for found in PARAMETER_NAMES.captures_iter(expression) {
        let field = &found[1];
        let name = found.get(2).map_or("", |m| m.as_str());
        match (field, place) {
            ("parameters", _) => {}
            ("status" | "failures", Place::Exit) | ("duration", _) => continue,
            ("status" | "failures", Place::Step) => {
                return Err(format!(
                    "names workflow.{field}, which only an exit step's when may read (the workflow has not ended before)"
                ));
            }
            _ => {
                return Err(format!(
                    "names workflow.{field}: a when may read only workflow.parameters.NAME, workflow.duration (and workflow.status, workflow.failures in an exit step)"
                ));
            }
        }
        if !name.is_empty() && !parameters.contains_key(name) {
            let declared: Vec<&str> = parameters.keys().map(String::as_str).collect();
            return Err(format!(
                "names workflow.parameters.{name}, which the workflow does not declare (parameters: {})",
                if declared.is_empty() {
                    "none".to_string()
                } else {
                    declared.join(", ")
                }
            ));
        }
    }
    let values: HashMap<Key, Value> = parameters
        .iter()
        .map(|(k, v)| (Key::from(k.as_str()), Value::from(v.as_str())))
        .collect();
    Ok([(Key::from("parameters"), Value::Map(Map::from(values)))].into())
}

/// `expression` with each step it names through `steps` renamed by `rename` (a step of a
/// `dag` template becomes `STEP/NAME` once called), written `steps["NEW"]`.
pub fn rename_steps(expression: &str, rename: &dyn Fn(&str) -> Option<String>) -> String {
    STEP_NAMES
        .replace_all(
            expression,
            |found: &regex::Captures<'_>| match named_step(found).and_then(rename) {
                Some(renamed) => format!("steps[{renamed:?}]"),
                None => found[0].to_string(),
            },
        )
        .into_owned()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(pairs: &[(&str, &str)]) -> Outputs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn argos_status_of_a_step_is_its_phase_a_timed_out_one_failed() {
        let upstream: HashMap<&str, Upstream<'_>> = [
            (
                "slow",
                Upstream {
                    phase: "TimedOut",
                    outputs: None,
                    ended: None,
                },
            ),
            (
                "ok",
                Upstream {
                    phase: "Succeeded",
                    outputs: None,
                    ended: None,
                },
            ),
        ]
        .into();
        let when =
            When::compile(r#"steps.slow.status == "Failed" && steps.ok.status == "Succeeded""#)
                .unwrap();
        assert_eq!(when.evaluate(&upstream), Ok(true));
    }

    #[test]
    fn a_when_sees_the_outputs_and_phases_of_the_steps_it_names() {
        let check = outputs(&[("ok", "true"), ("count", "3")]);
        let upstream: HashMap<&str, Upstream<'_>> = [
            (
                "check",
                Upstream {
                    phase: "Succeeded",
                    outputs: Some(&check),
                    ended: None,
                },
            ),
            (
                "my-step",
                Upstream {
                    phase: "Skipped",
                    outputs: None,
                    ended: None,
                },
            ),
        ]
        .into();
        for (expression, expected) in [
            (r#"steps.check.outputs.ok == "true""#, true),
            (r#"int(steps.check.outputs.count) > 5"#, false),
            (r#"steps["my-step"].phase == "Skipped""#, true),
            (r#"has(steps.check.outputs.missing)"#, false),
        ] {
            let when = When::compile(expression).unwrap();
            assert_eq!(when.evaluate(&upstream), Ok(expected), "{expression}");
        }
        let when =
            When::compile(r#"steps.check.outputs.ok == "true" && steps['my-step'].phase != """#)
                .unwrap();
        assert_eq!(when.steps(), ["check", "my-step"]);
    }

    #[test]
    fn every_output_kind_is_read_in_the_dot_and_the_bracket_forms() {
        let flip = outputs(&[
            ("result", "heads"),
            ("k", "v"),
            ("artifacts.log", "wf/flip/log"),
        ]);
        let upstream: HashMap<&str, Upstream<'_>> = [(
            "flip-coin",
            Upstream {
                phase: "Succeeded",
                outputs: Some(&flip),
                ended: None,
            },
        )]
        .into();
        for expression in [
            r#"steps["flip-coin"].outputs.result == "heads""#,
            r#"steps['flip-coin'].outputs["result"] == "heads""#,
            r#"steps["flip-coin"].outputs.k == "v""#,
            r#"steps["flip-coin"].outputs.parameters.k == "v""#,
            r#"steps["flip-coin"]["outputs"]["parameters"]["k"] == "v""#,
            r#"steps["flip-coin"].outputs.artifacts.log == "wf/flip/log""#,
            r#"steps["flip-coin"].outputs["artifacts.log"] == "wf/flip/log""#,
            r#"steps["flip-coin"].phase == "Succeeded""#,
            r#"!has(steps["flip-coin"].outputs.parameters.result)"#,
            r#"steps["flip-coin"].outputs.exists(k, k == "k")"#,
        ] {
            let when = When::compile(expression).unwrap();
            assert_eq!(when.evaluate(&upstream), Ok(true), "{expression}");
        }
    }

    #[test]
    fn a_field_a_step_does_not_have_is_refused_naming_it() {
        for (expression, named) in [
            (r#"steps.a.exitcode == 0"#, "steps.a.exitcode"),
            (
                r#"steps["a"].output.result == "x""#,
                r#"steps["a"].output.result"#,
            ),
            (r#"steps["a"].phase.x == "x""#, r#"steps["a"].phase.x"#),
            (
                r#"steps['a'].outputs.result.x == "x""#,
                r#"steps["a"].outputs.result.x"#,
            ),
            (
                r#"steps.a.outputs.parameters.k.v == "x""#,
                "steps.a.outputs.parameters.k.v",
            ),
        ] {
            let error = When::compile(expression).unwrap_err();
            assert!(
                error.starts_with(&format!("names {named}, which a step does not have: ")),
                "{expression}: {error}"
            );
        }
    }

    #[test]
    fn a_when_reads_the_workflows_parameters_and_only_those_declared() {
        let parameters: BTreeMap<String, String> =
            [("target".to_string(), "linux".to_string())].into();
        let upstream = HashMap::new();
        let when =
            When::compile_with(r#"workflow.parameters.target == "linux""#, &parameters).unwrap();
        assert_eq!(when.evaluate(&upstream), Ok(true));
        let when =
            When::compile_with(r#"workflow.parameters.target != "linux""#, &parameters).unwrap();
        assert_eq!(when.evaluate(&upstream), Ok(false));
        let error =
            When::compile_with("workflow.parameters.tagret == 'x'", &parameters).unwrap_err();
        assert!(
            error.contains("tagret") && error.contains("parameters: target"),
            "{error}"
        );
        let error = When::compile("workflow.parameters.target == 'x'").unwrap_err();
        assert!(error.contains("parameters: none"), "{error}");
    }

    #[test]
    fn a_when_holding_a_form_filled_only_in_a_job_is_refused_saying_why() {
        let refused = [
            (
                r#""{{pod.name}}" != """#,
                "names {{pod.name}}: a pod's name",
            ),
            (
                r#""{{ pod.name }}" == "x""#,
                "names {{pod.name}}: a pod's name",
            ),
            (
                r#"double("{{workflow.duration}}") > 1.0"#,
                "names {{workflow.duration}}: write workflow.duration",
            ),
            (
                r#""{{workflow.failures}}" != "null""#,
                "names {{workflow.failures}}: write workflow.failures",
            ),
        ];
        for (expression, why) in refused {
            let error = When::compile(expression).unwrap_err();
            assert!(error.starts_with(why), "{expression}: {error}");
        }
        assert!(When::compile(r#""pod.name" != "" && workflow.duration > 1.0"#).is_ok());
    }

    #[test]
    fn an_exit_steps_when_reads_the_failures_as_text_and_a_steps_when_may_not() {
        let expression =
            r#"workflow.failures != "null" && workflow.failures.contains("\"build\"")"#;
        let no_parameters = BTreeMap::new();
        let when = When::compile_for(expression, &no_parameters, Place::Exit).unwrap();
        assert!(when.reads_failures());
        let run = |failures| Run {
            status: Some("Failed"),
            duration: 1.0,
            failures,
        };
        let failed = r#"[{"displayName":"build","phase":"Failed"}]"#;
        assert_eq!(
            when.evaluate_in(&HashMap::new(), run(Some(failed)), None),
            Ok(true)
        );
        let other = r#"[{"displayName":"test","phase":"Failed"}]"#;
        assert_eq!(
            when.evaluate_in(&HashMap::new(), run(Some(other)), None),
            Ok(false)
        );
        assert_eq!(
            when.evaluate_in(&HashMap::new(), run(Some("null")), None),
            Ok(false)
        );
        let on_status = When::compile_for(
            r#"workflow.status == "Failed""#,
            &no_parameters,
            Place::Exit,
        );
        assert!(!on_status.unwrap().reads_failures());
        let error = When::compile_for(expression, &no_parameters, Place::Step).unwrap_err();
        assert!(
            error.starts_with("names workflow.failures, which only an exit step's when"),
            "{error}"
        );
    }

    #[test]
    fn the_steps_a_when_names_are_renamed() {
        let rename = |s: &str| (s != "outer").then(|| format!("linux/{s}"));
        assert_eq!(
            rename_steps(
                r#"steps.build.phase == "Succeeded" && steps['my-test'].outputs.ok == "1" && steps.outer.phase != """#,
                &rename
            ),
            r#"steps["linux/build"].phase == "Succeeded" && steps["linux/my-test"].outputs.ok == "1" && steps.outer.phase != """#
        );
    }

    #[test]
    fn a_when_that_does_not_compile_names_another_variable_or_is_not_a_bool_says_so() {
        let error = When::compile("steps.a.outputs.x ==").unwrap_err();
        assert!(error.starts_with("does not compile: "), "{error}");
        let error = When::compile("self.x == 1").unwrap_err();
        assert!(error.contains(r#"names "self""#), "{error}");
        let when = When::compile("steps.a.outputs.x").unwrap();
        let a = outputs(&[("x", "1")]);
        let upstream: HashMap<&str, Upstream<'_>> = [(
            "a",
            Upstream {
                phase: "Succeeded",
                outputs: Some(&a),
                ended: None,
            },
        )]
        .into();
        assert!(when.evaluate(&upstream).unwrap_err().contains("not a bool"));
        let missing = When::compile("steps.a.outputs.y == '1'").unwrap();
        let error = missing.evaluate(&upstream).unwrap_err();
        assert!(error.contains('y'), "{error}");
    }
}
