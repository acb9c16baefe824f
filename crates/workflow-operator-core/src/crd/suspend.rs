//! A suspend step (`suspend: {}` or `suspend: {duration: 20s}`, Argo's suspend template): it
//! runs nothing and waits, until `workflow-operator resume NAME` or, with a `duration`, until
//! that long after it started. Its record is a Job created suspended (so no pod ever runs),
//! which the operator annotates [`ANNOTATION_RESUMED`] when the step is resumed; the Job's
//! creation time and the step's `duration` give the deadline, so an operator restarted while
//! a step waits resumes it on time.
//!
//! A suspend step's outputs are supplied when it is resumed (`valueFrom.supplied`, Argo's
//! `argo node set --output-parameter`): the resume writes them on the Job with the resumed
//! mark, in one patch ([`ANNOTATION_SUPPLIED`]); [`supplied_outputs`] decides, for the CLI
//! before it resumes and for the operator when it reads them, what they are (the values given,
//! else the defaults) or why they cannot be. The operator records them in the step's status
//! entry, as any step's outputs, and later steps read them from there.

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::templates::{scalar_text, scalar_text_schema};
use super::{OutputSource, Step};
use crate::outputs::Outputs;

/// Annotation: put on a suspend step's Job when the step is resumed (by `workflow-operator
/// resume`, or by the operator at its `duration`), the time (RFC 3339). It makes the Job the
/// record that the step succeeded: [`crate::jobs::observe_job`] reads it as succeeded.
pub const ANNOTATION_RESUMED: &str = "workflow.crd.com/resumed";

/// Label on a suspend step's Job, so `workflow-operator resume` finds the steps that wait.
pub const LABEL_SUSPEND: &str = "workflow.crd.com/suspend";

/// Annotation: put on a suspend step's Job with [`ANNOTATION_RESUMED`] by a resume that gives
/// its outputs, a JSON object of their values (`{"approve": "YES"}`).
pub const ANNOTATION_SUPPLIED: &str = "workflow.crd.com/supplied";

/// The image of a suspend step's Job: a Job needs a container, but a suspend step's Job is
/// created suspended and never unsuspended, so no pod of it runs and the image is never pulled.
pub const SUSPEND_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// `suspend`: the step waits instead of running anything.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendStep {
    /// How long the step waits before it resumes itself: seconds (`30`, `"30"`) or a duration
    /// (`"20s"`, `"5m"`, `"1h30m"`). Absent: until `workflow-operator resume`, which also ends
    /// a wait with a duration early.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "scalar_text"
    )]
    #[schemars(schema_with = "scalar_text_schema")]
    pub duration: Option<String>,
}

impl SuspendStep {
    /// The wait in seconds; `None` without a duration.
    ///
    /// # Errors
    /// A duration that is neither seconds nor a duration such as `20s`, naming it.
    pub fn seconds(&self) -> Result<Option<i64>, String> {
        let Some(duration) = &self.duration else {
            return Ok(None);
        };
        parse_seconds(duration).map(Some)
    }

    /// When a step whose Job was created at `created` resumes itself, if it has a duration (an
    /// invalid one was refused when the workflow was checked: it waits for `resume` here).
    pub fn deadline(&self, created: Timestamp) -> Option<Timestamp> {
        let seconds = self.seconds().ok()??;
        created.checked_add(SignedDuration::from_secs(seconds)).ok()
    }
}

/// What is wrong with `step` as a suspend step: a duration that is not one, a field that runs
/// something, which a step that runs nothing cannot use, an output not supplied; when it is
/// none, an output supplied, which only a resume gives.
pub fn problems(step: &Step) -> Vec<String> {
    let Some(suspend) = &step.suspend else {
        return (step.outputs.iter().flat_map(|o| &o.parameters))
            .filter(|p| p.value_from.supplied.is_some())
            .map(|p| {
                format!(
                    "step {:?}: output parameter {:?}: valueFrom.supplied is given when a \
                     suspend step is resumed, and this step is not one",
                    step.step_name, p.name
                )
            })
            .collect();
    };
    let name = &step.step_name;
    let mut problems: Vec<String> = (suspend.seconds().err().into_iter())
        .map(|why| format!("step {name:?}: {why}"))
        .collect();
    // Its outputs are supplied when it is resumed; checked below.
    for field in step.container_fields_set() {
        if field != "outputs" {
            problems.push(format!(
                "step {name:?}: {field}: a suspend step runs nothing, so it cannot have one"
            ));
        }
    }
    let outputs = step.outputs.as_deref();
    if outputs.is_some_and(|o| !o.artifacts.is_empty()) {
        problems.push(format!(
            "step {name:?}: outputs.artifacts: a suspend step runs nothing, so it has no \
             artifacts (its output parameters may be supplied: valueFrom.supplied)"
        ));
    }
    for parameter in outputs.iter().flat_map(|o| &o.parameters) {
        let output = &parameter.name;
        match parameter.value_from.source() {
            Ok(OutputSource::Supplied) => {}
            Ok(_) => problems.push(format!(
                "step {name:?}: output parameter {output:?}: a suspend step runs nothing: its \
                 outputs are supplied when it is resumed (valueFrom.supplied)"
            )),
            Err(why) => problems.push(format!("step {name:?}: output parameter {output:?}: {why}")),
        }
        let default = parameter.default.as_ref();
        if let Some(default) = default.filter(|d| !allowed(&parameter.allowed, d)) {
            problems.push(format!(
                "step {name:?}: output parameter {output:?}: its default {default:?} is not \
                 one of its enum ({})",
                parameter.allowed.join(", ")
            ));
        }
    }
    problems
}

/// Whether `value` is one of `allowed` (any value when there are none).
fn allowed(allowed: &[String], value: &str) -> bool {
    allowed.is_empty() || allowed.iter().any(|a| a == value)
}

/// The outputs of suspend step `step` resumed with `given`: each supplied output parameter's
/// value given, else its default. The one decision of what a resume supplies: the CLI makes it
/// before it resumes the step, the operator again when it reads what the resume wrote (a Job
/// resumed by hand or at its `duration` gives no values, and takes the defaults).
///
/// # Errors
/// Every problem, in one message naming the step: a value given for an output the step does
/// not supply, an output given no value that has no default, a value outside its `enum`
/// (listing the allowed ones).
pub fn supplied_outputs(step: &Step, given: &Outputs) -> Result<Outputs, String> {
    let name = &step.step_name;
    let declared: Vec<_> = (step.outputs.iter().flat_map(|o| &o.parameters))
        .filter(|p| p.value_from.source() == Ok(OutputSource::Supplied))
        .collect();
    let mut problems = Vec::new();
    for key in given.keys() {
        if !declared.iter().any(|p| &p.name == key) {
            problems.push(match declared.as_slice() {
                [] => format!("it supplies no outputs, so {key:?} cannot be given"),
                _ => format!(
                    "it has no supplied output {key:?} (it has {})",
                    names(declared.iter().map(|p| p.name.as_str()))
                ),
            });
        }
    }
    let mut outputs = Outputs::new();
    for parameter in declared {
        let output = &parameter.name;
        match given.get(output).or(parameter.default.as_ref()) {
            Some(value) if allowed(&parameter.allowed, value) => {
                outputs.insert(output.clone(), value.clone());
            }
            Some(value) => problems.push(format!(
                "output {output:?}: {value:?} is not one of {}",
                names(parameter.allowed.iter().map(String::as_str))
            )),
            None => problems.push(format!(
                "output {output:?} needs a value: it has no default{}",
                describe(parameter.description.as_deref(), &parameter.allowed)
            )),
        }
    }
    if problems.is_empty() {
        return Ok(outputs);
    }
    Err(format!("step {name:?}: {}", problems.join("; ")))
}

/// The outputs of suspend step `step` as the resume wrote them on its Job (the annotation
/// [`ANNOTATION_SUPPLIED`]'s value, `None` when it wrote none): [`supplied_outputs`].
///
/// # Errors
/// An annotation that is not a JSON object of strings, or what [`supplied_outputs`] refuses.
pub fn outputs_of_resumed(step: &Step, annotation: Option<&str>) -> Result<Outputs, String> {
    let given: Outputs = match annotation {
        None => Outputs::new(),
        Some(text) => serde_json::from_str::<BTreeMap<String, String>>(text).map_err(|e| {
            format!(
                "step {:?}: its Job's {ANNOTATION_SUPPLIED} is not a JSON object of strings: {e}",
                step.step_name
            )
        })?,
    };
    supplied_outputs(step, &given)
}

/// The flags of `workflow-operator resume` that give suspend step `step` its supplied outputs
/// (`" --step approve --output decision=VALUE"`): those without a default; none when it
/// supplies no outputs.
pub fn resume_flags(step: &Step) -> String {
    let supplied: Vec<_> = (step.outputs.iter().flat_map(|o| &o.parameters))
        .filter(|p| p.value_from.source() == Ok(OutputSource::Supplied))
        .collect();
    if supplied.is_empty() {
        return String::new();
    }
    let required = (supplied.iter().filter(|p| p.default.is_none()))
        .map(|p| format!(" --output {}=VALUE", p.name));
    format!(" --step {}{}", step.step_name, required.collect::<String>())
}

/// `names` quoted and joined: `"YES", "NO"`.
fn names<'n>(names: impl Iterator<Item = &'n str>) -> String {
    names
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the person resuming is told of an output they must give: its description, its values.
fn describe(description: Option<&str>, allowed: &[String]) -> String {
    let values = (!allowed.is_empty())
        .then(|| format!("one of {}", names(allowed.iter().map(String::as_str))));
    match (description, values) {
        (Some(d), Some(v)) => format!(" ({d}; {v})"),
        (Some(d), None) => format!(" ({d})"),
        (None, Some(v)) => format!(" ({v})"),
        (None, None) => String::new(),
    }
}

/// Seconds in `text`: a whole number of seconds, or a duration as Argo writes one (`20s`,
/// `5m`, `1h30m`, `1d`).
fn parse_seconds(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let invalid =
        || format!("suspend.duration: {text:?} is not a duration (seconds, or as 20s, 5m, 1h30m)");
    if let Ok(seconds) = text.parse::<i64>() {
        return (seconds >= 0).then_some(seconds).ok_or_else(invalid);
    }
    let mut total: i64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(invalid()),
        };
        let n: i64 = number.parse().map_err(|_| invalid())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(invalid)?;
        number.clear();
    }
    if !number.is_empty() || text.is_empty() {
        return Err(invalid());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::crd::{OutputParameter, StepOutputs, Supplied, ValueFrom};

    /// A suspend step `approve` whose outputs are `parameters`.
    fn approve(parameters: Vec<OutputParameter>) -> Step {
        let mut step = crate::testing::step("approve", &[]);
        step.image = String::new();
        step.command = None;
        step.suspend = Some(Box::default());
        step.outputs = Some(Box::new(StepOutputs {
            parameters,
            ..StepOutputs::default()
        }));
        step
    }

    /// A supplied output parameter `name`, with `default` and `enum` if any.
    fn supplied(name: &str, default: Option<&str>, allowed: &[&str]) -> OutputParameter {
        OutputParameter {
            name: name.into(),
            value_from: ValueFrom {
                supplied: Some(Supplied {}),
                ..ValueFrom::default()
            },
            default: default.map(str::to_string),
            allowed: allowed.iter().map(|a| a.to_string()).collect(),
            ..OutputParameter::default()
        }
    }

    fn given(pairs: &[(&str, &str)]) -> Outputs {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_resume_supplies_the_values_given_and_the_defaults_of_the_rest() {
        let step = approve(vec![
            supplied("decision", None, &["YES", "NO"]),
            supplied("target", Some("staging"), &[]),
        ]);
        assert_eq!(
            supplied_outputs(&step, &given(&[("decision", "YES")])),
            Ok(given(&[("decision", "YES"), ("target", "staging")]))
        );
        assert_eq!(
            supplied_outputs(&step, &given(&[("decision", "NO"), ("target", "prod")])),
            Ok(given(&[("decision", "NO"), ("target", "prod")]))
        );
    }

    #[test]
    fn a_resume_without_a_required_value_or_outside_the_enum_is_refused_naming_why() {
        let mut decision = supplied("decision", None, &["YES", "NO"]);
        decision.description = Some("release?".into());
        let step = approve(vec![decision, supplied("target", Some("staging"), &[])]);
        assert_eq!(
            supplied_outputs(&step, &Outputs::new()),
            Err(
                "step \"approve\": output \"decision\" needs a value: it has no default \
                 (release?; one of \"YES\", \"NO\")"
                    .into()
            )
        );
        assert_eq!(
            supplied_outputs(&step, &given(&[("decision", "MAYBE"), ("colour", "red")])),
            Err(
                "step \"approve\": it has no supplied output \"colour\" (it has \"decision\", \
                 \"target\"); output \"decision\": \"MAYBE\" is not one of \"YES\", \"NO\""
                    .into()
            )
        );
        let plain = approve(Vec::new());
        assert_eq!(
            supplied_outputs(&plain, &given(&[("x", "1")])),
            Err("step \"approve\": it supplies no outputs, so \"x\" cannot be given".into())
        );
    }

    #[test]
    fn the_resume_flags_name_the_step_and_the_outputs_without_a_default() {
        let step = approve(vec![
            supplied("decision", None, &["YES", "NO"]),
            supplied("target", Some("staging"), &[]),
        ]);
        assert_eq!(
            resume_flags(&step),
            " --step approve --output decision=VALUE"
        );
        assert_eq!(resume_flags(&approve(Vec::new())), "");
    }

    #[test]
    fn what_a_resume_wrote_on_the_job_is_read_with_the_same_decision() {
        let step = approve(vec![supplied("target", Some("staging"), &[])]);
        assert_eq!(
            outputs_of_resumed(&step, None),
            Ok(given(&[("target", "staging")]))
        );
        assert_eq!(
            outputs_of_resumed(&step, Some(r#"{"target": "prod"}"#)),
            Ok(given(&[("target", "prod")]))
        );
        let error = outputs_of_resumed(&step, Some("target=prod")).unwrap_err();
        assert!(error.contains("not a JSON object of strings"), "{error}");
    }

    #[test]
    fn a_suspend_step_supplies_its_outputs_and_only_a_suspend_step_does() {
        let ok = approve(vec![supplied("decision", Some("NO"), &["YES", "NO"])]);
        assert_eq!(problems(&ok), Vec::<String>::new());
        let mut read = supplied("file", None, &[]);
        read.value_from = ValueFrom {
            path: "/tmp/file".into(),
            ..ValueFrom::default()
        };
        let bad_default = supplied("decision", Some("MAYBE"), &["YES", "NO"]);
        assert_eq!(
            problems(&approve(vec![read, bad_default])),
            [
                "step \"approve\": output parameter \"file\": a suspend step runs nothing: its \
                 outputs are supplied when it is resumed (valueFrom.supplied)",
                "step \"approve\": output parameter \"decision\": its default \"MAYBE\" is not \
                 one of its enum (YES, NO)",
            ]
        );
        let mut container = approve(vec![supplied("decision", None, &[])]);
        container.suspend = None;
        assert_eq!(
            problems(&container),
            [
                "step \"approve\": output parameter \"decision\": valueFrom.supplied is given \
              when a suspend step is resumed, and this step is not one"
            ]
        );
    }

    #[test]
    fn a_duration_is_seconds_or_argo_s_units() {
        assert_eq!(parse_seconds("30"), Ok(30));
        assert_eq!(parse_seconds("20s"), Ok(20));
        assert_eq!(parse_seconds("5m"), Ok(300));
        assert_eq!(parse_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_seconds("2d"), Ok(172_800));
        for bad in ["", "soon", "5x", "10m5", "-3"] {
            let error = parse_seconds(bad).unwrap_err();
            assert!(error.contains("is not a duration"), "{bad}: {error}");
        }
    }
}
