//! A step's `when`: a CEL expression (the expression language of Kubernetes itself,
//! run on the `cel` crate with kube-rs' Kubernetes CEL libraries, `kube-cel`) over the steps
//! upstream of it, `steps.NAME.outputs.KEY` (strings) and `steps.NAME.phase` (`Succeeded`,
//! `Skipped` for a step a `when` skipped, `Failed` or `TimedOut` for a step that failed and
//! whose failure the workflow survives, `continueOn`). A step whose name is not a CEL
//! identifier is `steps["my-step"]`. True: the step runs; false: it is skipped, and a skipped
//! step counts as done for its dependents. CEL's macros (`all`, `exists`, `exists_one`, `map`,
//! `filter`) work as in Kubernetes' validation rules.
//!
//! An exit step's `when` may also read `workflow.status` (`Completed` or `Failed`) and every
//! step (a step that did not finish reads `Omitted`), and may iterate over them
//! (`steps.exists(s, steps[s].phase == "Failed")`).
//!
//! [`When::compile`] is the check at create (it parses, names only `steps` and `workflow`, and
//! only steps that exist); [`When::evaluate`] runs it once the step is ready.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value};
use regex::Regex;

use super::outputs::Outputs;

/// A compiled `when`.
#[derive(Debug)]
pub struct When {
    program: Program,
    /// The steps it names, in the order first named.
    steps: Vec<String>,
    /// `workflow.parameters`, when it names `workflow`.
    workflow: Option<HashMap<Key, Value>>,
    /// It iterates over `steps` (an exit step's only): it sees every step.
    every_step: bool,
}

/// What an upstream step tells a `when`.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    /// `Succeeded` or `Skipped`.
    pub phase: &'a str,
    /// Its outputs (none for a skipped step).
    pub outputs: Option<&'a Outputs>,
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
        let program = Program::compile(expression)
            .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
        let references = program.references();
        let bound: Vec<&str> = MACRO_VARIABLES
            .captures_iter(expression)
            .filter_map(|found| found.get(1).map(|m| m.as_str()))
            .collect();
        let mut others: Vec<&str> = (references.variables().iter().copied())
            .filter(|v| *v != "steps" && *v != "workflow" && !bound.contains(v))
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
        let mut steps: Vec<String> = Vec::new();
        let mut every_step = false;
        for found in STEP_NAMES.captures_iter(expression) {
            match named_step(&found) {
                Some(name) if !steps.iter().any(|s| s == name) => steps.push(name.to_string()),
                Some(_) => {}
                None if place == Place::Exit => every_step = true,
                None => {
                    return Err(
                        "iterates over steps: only an exit step's when may (it runs once every \
                         step ended); name the steps instead"
                            .to_string(),
                    );
                }
            }
        }
        Ok(When {
            program,
            steps,
            workflow,
            every_step,
        })
    }

    /// The steps the expression names.
    pub fn steps(&self) -> &[String] {
        &self.steps
    }

    /// Whether it iterates over `steps` (an exit step's): it must see every step.
    pub fn every_step(&self) -> bool {
        self.every_step
    }

    /// Runs the expression with `upstream` (the steps it may see, by name).
    ///
    /// # Errors
    /// The evaluation's error (a missing output is CEL's `No such key`), or a result that is
    /// not a bool.
    pub fn evaluate(&self, upstream: &HashMap<&str, Upstream<'_>>) -> Result<bool, String> {
        self.evaluate_in(upstream, None)
    }

    /// [`When::evaluate`] in an exit step, where `workflow.status` is `status`.
    ///
    /// # Errors
    /// As [`When::evaluate`].
    pub fn evaluate_in(
        &self,
        upstream: &HashMap<&str, Upstream<'_>>,
        status: Option<&str>,
    ) -> Result<bool, String> {
        thread_local! {
            static BASE: Context<'static> = Context::default().with_all();
        }
        let steps: HashMap<Key, Value> = upstream
            .iter()
            .map(|(name, step)| {
                let outputs: HashMap<Key, Value> = step
                    .outputs
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (Key::from(k.as_str()), Value::from(v.as_str())))
                    .collect();
                let fields: HashMap<Key, Value> = [
                    (Key::from("phase"), Value::from(step.phase)),
                    (Key::from("outputs"), Value::Map(Map::from(outputs))),
                ]
                .into();
                (Key::from(*name), Value::Map(Map::from(fields)))
            })
            .collect();
        BASE.with(|base| {
            let mut context = base.new_inner_scope();
            context.add_variable_from_value("steps", Value::Map(Map::from(steps)));
            if let Some(workflow) = &self.workflow {
                let mut fields = workflow.clone();
                if let Some(status) = status {
                    fields.insert(Key::from("status"), Value::from(status));
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
            ("status", Place::Exit) => continue,
            ("status", Place::Step) => {
                return Err(
                    "names workflow.status, which only an exit step's when may read (the workflow has not ended before)"
                        .to_string(),
                );
            }
            _ => {
                return Err(format!(
                    "names workflow.{field}: a when may read only workflow.parameters.NAME (and workflow.status in an exit step)"
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
    fn a_when_sees_the_outputs_and_phases_of_the_steps_it_names() {
        let check = outputs(&[("ok", "true"), ("count", "3")]);
        let upstream: HashMap<&str, Upstream<'_>> = [
            (
                "check",
                Upstream {
                    phase: "Succeeded",
                    outputs: Some(&check),
                },
            ),
            (
                "my-step",
                Upstream {
                    phase: "Skipped",
                    outputs: None,
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
            },
        )]
        .into();
        assert!(when.evaluate(&upstream).unwrap_err().contains("not a bool"));
        let missing = When::compile("steps.a.outputs.y == '1'").unwrap();
        let error = missing.evaluate(&upstream).unwrap_err();
        assert!(error.contains('y'), "{error}");
    }
}
