//! A suspend step (`suspend: {}` or `suspend: {duration: 20s}`, Argo's suspend template): it
//! runs nothing and waits, until `workflow-operator resume NAME` or, with a `duration`, until
//! that long after it started. Its record is a Job created suspended (so no pod ever runs),
//! which the operator annotates [`ANNOTATION_RESUMED`] when the step is resumed; the Job's
//! creation time and the step's `duration` give the deadline, so an operator restarted while
//! a step waits resumes it on time.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Step;
use super::templates::{scalar_text, scalar_text_schema};

/// Annotation: put on a suspend step's Job when the step is resumed (by `workflow-operator
/// resume`, or by the operator at its `duration`), the time (RFC 3339). It makes the Job the
/// record that the step succeeded: [`crate::jobs::observe_job`] reads it as succeeded.
pub const ANNOTATION_RESUMED: &str = "workflow.crd.com/resumed";

/// Label on a suspend step's Job, so `workflow-operator resume` finds the steps that wait.
pub const LABEL_SUSPEND: &str = "workflow.crd.com/suspend";

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

/// What is wrong with `step` as a suspend step (nothing when it is none): a duration that is
/// not one, or a field that runs something, which a step that runs nothing cannot use.
pub fn problems(step: &Step) -> Vec<String> {
    let Some(suspend) = &step.suspend else {
        return Vec::new();
    };
    let name = &step.step_name;
    let mut problems: Vec<String> = (suspend.seconds().err().into_iter())
        .map(|why| format!("step {name:?}: {why}"))
        .collect();
    for field in step.container_fields_set() {
        problems.push(format!(
            "step {name:?}: {field}: a suspend step runs nothing, so it cannot have one"
        ));
    }
    problems
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
