//! Custom metrics ([`crate::crd::CustomMetrics`], Argo's `metrics.prometheus`): checked at
//! create ([`check_spec`]) and, once a step or the workflow ended, filled into the recordings
//! the operator makes on its `/metrics` ([`recordings`]).
//!
//! A metric's `value`, `when` and label values are text with `{{VARIABLE}}`s: of a step,
//! `{{status}}` (Argo's node phase: `Succeeded`, `Failed`, `Error`), `{{duration}}` (seconds,
//! a float), `{{exitCode}}` and `{{outputs.parameters.NAME}}`; of the workflow,
//! `{{workflow.status}}` (Argo's: `Succeeded`, `Failed`, `Error`) and `{{workflow.duration}}`.
//! `{{inputs...}}` and `{{workflow.parameters...}}` are filled when the templates are expanded.
//! A `when` is Argo's simple comparison, `LEFT OP RIGHT` with `OP` one of `==`, `!=`, `<`,
//! `>`, `<=`, `>=`: once filled, two numbers compare as numbers, anything else as text. A step
//! that fans out may not declare metrics yet (its items end one by one, in no status entry of
//! their own when they succeed).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::crd::{CustomMetrics, PrometheusMetric, WorkFlowSpec};

/// Where metrics are declared: what their variables may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A step's (`metrics` of a step, Argo's template metrics).
    Step,
    /// The workflow's (`spec.metrics`).
    Workflow,
}

/// What a recording does to its metric.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Sets a gauge.
    Gauge,
    /// Adds to a counter.
    Counter,
    /// Observes into a histogram of these buckets.
    Histogram(Vec<f64>),
}

/// One metric to record, filled.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The metric's name, as declared.
    pub name: String,
    /// Its help text.
    pub help: String,
    /// Its labels, filled, in declared order.
    pub labels: Vec<(String, String)>,
    /// What it does.
    pub kind: Kind,
    /// The value filled and parsed.
    pub value: f64,
}

/// `{{NAME}}`, spaces allowed inside the braces.
static VARIABLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{\{\s*([^{}\s]+)\s*\}\}").expect("a valid regex"));

/// A name Prometheus accepts for a metric.
static METRIC_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z_][a-zA-Z0-9_]*$").expect("a valid regex"));

/// `LEFT OP RIGHT`.
static COMPARISON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(\S(?:.*?\S)?)\s*(==|!=|<=|>=|<|>)\s*(\S(?:.*?\S)?)\s*$")
        .expect("a valid regex")
});

/// Whether `variable` is one a metric of `scope` may name.
fn known(variable: &str, scope: Scope) -> bool {
    let parameter = variable.starts_with("workflow.parameters.");
    match scope {
        Scope::Step => {
            matches!(variable, "status" | "duration" | "exitCode")
                || variable.starts_with("outputs.parameters.")
                || variable.starts_with("inputs.parameters.")
                || parameter
        }
        Scope::Workflow => matches!(variable, "workflow.status" | "workflow.duration") || parameter,
    }
}

/// Checks the metrics of `spec` and of each of its steps.
///
/// # Errors
/// Every problem, each naming where it is (`spec.metrics.prometheus[0]`, `step "a" ...`).
pub fn check_spec(spec: &WorkFlowSpec) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if let Some(metrics) = &spec.metrics {
        check(metrics, Scope::Workflow, "spec.metrics", &mut problems);
    }
    for step in spec.containers.iter().chain(&spec.on_exit) {
        let Some(metrics) = &step.metrics else {
            continue;
        };
        let place = format!("step {:?}: metrics", step.step_name);
        let fans_out =
            step.with_items.is_some() || step.with_param.is_some() || step.with_sequence.is_some();
        if fans_out && !metrics.prometheus.is_empty() {
            problems.push(format!(
                "{place}: metrics of a step that fans out (withItems, withParam, withSequence) are \
                 not supported yet"
            ));
            continue;
        }
        check(metrics, Scope::Step, &place, &mut problems);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Checks `metrics` declared at `place` with `scope`'s variables into `problems`.
pub fn check(metrics: &CustomMetrics, scope: Scope, place: &str, problems: &mut Vec<String>) {
    for (i, metric) in metrics.prometheus.iter().enumerate() {
        let at = format!("{place}.prometheus[{i}] ({:?})", metric.name);
        if let Err(problem) = check_one(metric, scope) {
            problems.push(format!("{at}: {problem}"));
        }
    }
}

fn check_one(metric: &PrometheusMetric, scope: Scope) -> Result<(), String> {
    if !METRIC_NAME.is_match(&metric.name) {
        return Err(
            "is not a Prometheus metric name (letters, digits and _, not starting with a digit)"
                .into(),
        );
    }
    let (_, value) = kind_and_value(metric)?;
    if let Some(histogram) = &metric.histogram
        && histogram.buckets.is_empty()
    {
        return Err("histogram has no buckets".into());
    }
    for label in &metric.labels {
        if !METRIC_NAME.is_match(&label.key) || label.key.starts_with("__") {
            return Err(format!(
                "label key {:?} is not a Prometheus label name",
                label.key
            ));
        }
    }
    if let Some(when) = &metric.when
        && !COMPARISON.is_match(when)
    {
        return Err(format!(
            "when {when:?} is not LEFT OP RIGHT with OP one of ==, !=, <, >, <=, >= (e.g. \
             \"{{{{status}}}} == Failed\")"
        ));
    }
    let texts = std::iter::once(value)
        .chain(metric.when.as_deref())
        .chain(metric.labels.iter().map(|l| l.value.as_str()));
    for text in texts {
        for variable in VARIABLE.captures_iter(text) {
            let name = &variable[1];
            if !known(name, scope) {
                let scope = match scope {
                    Scope::Step => "a step's metric",
                    Scope::Workflow => "the workflow's metric",
                };
                return Err(format!("{{{{{name}}}}} is not a variable {scope} may name"));
            }
        }
    }
    Ok(())
}

/// The kind of `metric` and its value's text: exactly one of gauge, counter, histogram.
fn kind_and_value(metric: &PrometheusMetric) -> Result<(Kind, &str), String> {
    match (&metric.gauge, &metric.counter, &metric.histogram) {
        (Some(g), None, None) => Ok((Kind::Gauge, &g.value)),
        (None, Some(c), None) => Ok((Kind::Counter, &c.value)),
        (None, None, Some(h)) => Ok((Kind::Histogram(h.buckets.clone()), &h.value)),
        (None, None, None) => Err("has none of gauge, counter, histogram: give one".into()),
        _ => Err("has more than one of gauge, counter, histogram: give one".into()),
    }
}

/// `text` with its variables from `vars`.
///
/// # Errors
/// The first variable `vars` does not have.
fn fill(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut missing = None;
    let filled = VARIABLE.replace_all(text, |c: &regex::Captures| match vars.get(&c[1]) {
        Some(value) => value.clone(),
        None => {
            missing.get_or_insert_with(|| c[1].to_string());
            String::new()
        }
    });
    match missing {
        Some(name) => Err(format!("{{{{{name}}}}} has no value")),
        None => Ok(filled.into_owned()),
    }
}

/// Whether the filled comparison `when` holds.
fn holds(when: &str) -> Result<bool, String> {
    let parts = COMPARISON
        .captures(when)
        .ok_or_else(|| format!("{when:?} is not LEFT OP RIGHT"))?;
    let (left, op, right) = (&parts[1], &parts[2], &parts[3]);
    let order = match (left.parse::<f64>(), right.parse::<f64>()) {
        (Ok(l), Ok(r)) => l.partial_cmp(&r),
        _ => Some(left.cmp(right)),
    };
    let Some(order) = order else {
        return Ok(op == "!=");
    };
    Ok(match op {
        "==" => order.is_eq(),
        "!=" => order.is_ne(),
        "<" => order.is_lt(),
        ">" => order.is_gt(),
        "<=" => order.is_le(),
        _ => order.is_ge(),
    })
}

/// The recordings `metrics` make with `vars` (`status`, `duration`, ... without braces): those
/// whose `when` holds, in declared order. A metric whose variables or value cannot be filled
/// is an `Err` naming it, its siblings recorded all the same.
pub fn recordings(
    metrics: &CustomMetrics,
    vars: &BTreeMap<String, String>,
) -> Vec<Result<Recording, String>> {
    let one = |metric: &PrometheusMetric| -> Result<Option<Recording>, String> {
        if let Some(when) = &metric.when
            && !holds(&fill(when, vars)?)?
        {
            return Ok(None);
        }
        let (kind, value) = kind_and_value(metric)?;
        let filled = fill(value, vars)?;
        let value = filled
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("value {filled:?} is not a number"))?;
        let labels = (metric.labels.iter())
            .map(|l| Ok((l.key.clone(), fill(&l.value, vars)?)))
            .collect::<Result<_, String>>()?;
        Ok(Some(Recording {
            name: metric.name.clone(),
            help: metric.help.clone(),
            labels,
            kind,
            value,
        }))
    };
    (metrics.prometheus.iter())
        .filter_map(|metric| {
            one(metric)
                .map_err(|problem| format!("metric {:?}: {problem}", metric.name))
                .transpose()
        })
        .collect()
}

#[cfg(test)]
mod tests;
