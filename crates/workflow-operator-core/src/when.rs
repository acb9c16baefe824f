//! A step's `when`: a CEL expression (the expression language of Kubernetes itself,
//! run on the `cel` crate with kube-rs' Kubernetes CEL libraries, `kube-cel`) over the steps
//! upstream of it, `steps.NAME.outputs.KEY` (strings) and `steps.NAME.phase` (`Succeeded`, or
//! `Skipped` for a step a `when` skipped). A step whose name is not a CEL identifier is
//! `steps["my-step"]`. True: the step runs; false: it is skipped, and a skipped step counts as
//! done for its dependents.
//!
//! [`When::compile`] is the check at create (it parses, names only `steps`, and only steps
//! that exist); [`When::evaluate`] runs it once the step is ready.

use std::collections::HashMap;
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
}

/// What an upstream step tells a `when`.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    /// `Succeeded` or `Skipped`.
    pub phase: &'a str,
    /// Its outputs (none for a skipped step).
    pub outputs: Option<&'a Outputs>,
}

/// `steps.NAME` and `steps["NAME"]` (or single quotes): the steps an expression names.
static STEP_NAMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:"([^"]*)"|'([^']*)')\s*\])"#)
        .expect("a valid regex")
});

impl When {
    /// Parses `expression`.
    ///
    /// # Errors
    /// Why it cannot run: it does not parse, or it names a variable other than `steps`, or it
    /// names no step at all through `steps` in a way that can be checked.
    pub fn compile(expression: &str) -> Result<When, String> {
        let program = Program::compile(expression)
            .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
        let references = program.references();
        let mut others: Vec<&str> = references
            .variables()
            .into_iter()
            .filter(|v| *v != "steps")
            .collect();
        others.sort_unstable();
        if let Some(other) = others.first() {
            return Err(format!(
                "names {other:?}: a when may name only steps (steps.NAME.outputs.KEY, steps.NAME.phase)"
            ));
        }
        let mut steps: Vec<String> = Vec::new();
        for found in STEP_NAMES.captures_iter(expression) {
            let name = found
                .get(1)
                .or_else(|| found.get(2))
                .or_else(|| found.get(3))
                .map_or("", |m| m.as_str());
            if !steps.iter().any(|s| s == name) {
                steps.push(name.to_string());
            }
        }
        Ok(When { program, steps })
    }

    /// The steps the expression names.
    pub fn steps(&self) -> &[String] {
        &self.steps
    }

    /// Runs the expression with `upstream` (the steps it may see, by name).
    ///
    /// # Errors
    /// The evaluation's error (a missing output is CEL's `No such key`), or a result that is
    /// not a bool.
    pub fn evaluate(&self, upstream: &HashMap<&str, Upstream<'_>>) -> Result<bool, String> {
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
            match self.program.execute(&context) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("is {other:?}, not a bool")),
                Err(e) => Err(one_line(&e.to_string())),
            }
        })
    }
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
