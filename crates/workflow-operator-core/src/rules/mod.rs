//! Rules on a run's metrics (`spec.rules`): a pure stage of the planner. [`Rules::compile`]
//! checks the expressions once per spec (what `validate` and the API server's users see);
//! on each pass the planner measures the steps the rules name from the Jobs that exist
//! (`plan`'s `rules_metrics::measure`) and [`decide`]s which rules fire, from those metrics and what the
//! stored status says the rules already did.
//!
//! # Guarantees
//! - A firing is decided from the Jobs and the stored status only: the planner writes it in
//!   the status of the same pass, before the actions it changes (the operator writes a status
//!   with a firing before creating Jobs). A pass lost before that write decides it again; one
//!   after it sees the firing counted and its completion count, so it never fires twice.
//! - A rule fires at most `repetitions` times, and at least `backoff` step completions after
//!   its last firing; `grow` and `shrink` stay within `minParallelism..maxParallelism` (at a
//!   bound the rule does not fire, and its repetitions are not spent).
//! - A workflow without rules has no rules stage: nothing is measured, nothing is written.
//!
//! # Caveats
//! A metric without a value yet (the durations, before a Job of the step finished) makes
//! its rule's expression fail to evaluate, and the rule does not fire.

use std::collections::HashMap;
use std::sync::LazyLock;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value};
use regex::{Captures, Regex};

use crate::crd::{Metrics, Rule, RuleAction, RuleStatus, StepMetrics, WorkFlowSpec};

/// The metrics a rule reads of a step, `steps.NAME.METRIC`.
const STEP_METRICS: [&str; 4] = ["succeeded", "failed", "running", "attempts"];

/// The durations a rule reads of a step, `steps.NAME.duration.FIELD`.
const DURATION_FIELDS: [&str; 4] = ["mean", "min", "max", "last"];

/// The most runs a workflow may have, repeats included (`spec.runs`' own bound).
const MAX_RUNS: u32 = 10_000;

/// A metric a rule names: `steps.NAME.FIELD[.SUB]` (group 1, 2 or 3 the step, 4 and 5 the
/// field path) or `workflow.FIELD[.SUB]` (groups 6 and 7).
static METRIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:"([^"]*)"|'([^']*)')\s*\])(?:\s*\.\s*([A-Za-z_]\w*)(?:\s*\.\s*([A-Za-z_]\w*))?)?|\bworkflow\b(?:\s*\.\s*([A-Za-z_]\w*)(?:\s*\.\s*([A-Za-z_]\w*))?)?"#,
    )
    .expect("a valid regex")
});

/// One metric an expression names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Metric {
    /// `steps.STEP.FIELD` or `steps.STEP.duration.FIELD`.
    Step {
        step: String,
        field: &'static str,
        duration: bool,
    },
    /// `workflow.runs.completed`, `workflow.runs.failed`.
    Runs { failed: bool },
    /// `workflow.elapsed`.
    Elapsed,
}

impl Metric {
    /// The metric `found` (a [`METRIC`] match) names.
    ///
    /// # Errors
    /// What it names that is no metric.
    fn of(found: &Captures<'_>) -> Result<Metric, String> {
        let text = found[0].trim();
        let unknown = || {
            format!(
                "names {text:?}, no metric: a rule reads steps.NAME.{{{}}}, steps.NAME.duration.{{{}}}, workflow.runs.{{completed, failed}} and workflow.elapsed",
                STEP_METRICS.join(", "),
                DURATION_FIELDS.join(", ")
            )
        };
        let field = |i: usize| found.get(i).map(|m| m.as_str());
        if let Some(step) = field(1).or(field(2)).or(field(3)) {
            let (field, duration) = match (field(4), field(5)) {
                (Some("duration"), Some(sub)) => (sub, true),
                (Some(metric), None) => (metric, false),
                _ => return Err(unknown()),
            };
            let known: &[&'static str] = if duration {
                &DURATION_FIELDS
            } else {
                &STEP_METRICS
            };
            let field = known.iter().find(|k| **k == field).ok_or_else(unknown)?;
            return Ok(Metric::Step {
                step: step.to_string(),
                field,
                duration,
            });
        }
        match (field(6), field(7)) {
            (Some("runs"), Some("completed")) => Ok(Metric::Runs { failed: false }),
            (Some("runs"), Some("failed")) => Ok(Metric::Runs { failed: true }),
            (Some("elapsed"), None) => Ok(Metric::Elapsed),
            _ => Err(unknown()),
        }
    }

    /// Its value in `facts`, as a firing's message shows it; `None` while it has none.
    fn value(&self, facts: &Facts<'_>) -> Option<f64> {
        match self {
            Metric::Step {
                step,
                field,
                duration,
            } => {
                let metrics = facts.metrics.get(step)?;
                if *duration {
                    let d = metrics.duration?;
                    Some(match *field {
                        "mean" => d.mean,
                        "min" => d.min,
                        "max" => d.max,
                        _ => d.last,
                    })
                } else {
                    Some(f64::from(match *field {
                        "succeeded" => metrics.succeeded,
                        "failed" => metrics.failed,
                        "running" => metrics.running,
                        _ => metrics.attempts,
                    }))
                }
            }
            Metric::Runs { failed: false } => Some(f64::from(facts.runs_completed)),
            Metric::Runs { failed: true } => Some(f64::from(facts.runs_failed)),
            Metric::Elapsed => Some(facts.elapsed as f64),
        }
    }
}

/// One compiled rule.
#[derive(Debug)]
struct Compiled {
    program: Program,
}

/// The compiled rules of a spec, in spec order; empty without rules.
#[derive(Debug, Default)]
pub struct Rules {
    compiled: Vec<Compiled>,
    /// The steps the rules name, each once.
    steps: Vec<String>,
}

/// What the rules read on one pass besides the steps' metrics.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'m> {
    /// The metrics of the steps the rules name.
    pub metrics: &'m Metrics,
    /// Runs whose steps are all done.
    pub runs_completed: u32,
    /// Runs with a failed step.
    pub runs_failed: u32,
    /// Seconds since the workflow's steps started.
    pub elapsed: i64,
    /// Step Jobs that finished (succeeded or failed), every step counted: what `backoff`
    /// counts.
    pub completions: u64,
}

/// Where the workflow stands before the rules of a pass.
#[derive(Debug, Clone, Copy)]
pub struct Standing {
    /// The parallelism in force: the rules' (status), else the spec's.
    pub parallelism: Option<i32>,
    /// The runs in force, those the rules added included.
    pub runs: u32,
}

/// What the rules decided on one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Each rule's record, in spec order, this pass's firings counted.
    pub statuses: Vec<RuleStatus>,
    /// The parallelism in force from now on.
    pub parallelism: Option<i32>,
    /// The runs added by `repeat` rules, this pass's included.
    pub added_runs: u32,
    /// The message of each firing of this pass, for its Event.
    pub fired: Vec<String>,
    /// The firing of a `finish` rule, once one fired (in any pass): the workflow stops.
    pub finish: Option<String>,
    /// The firing of a `fail` rule, once one fired (in any pass): the workflow fails.
    pub fail: Option<String>,
}

impl Rules {
    /// Compiles `rules`, whose steps must be among `steps`.
    ///
    /// # Errors
    /// Every problem, each naming its rule: an expression that does not compile, names a
    /// variable other than `steps` and `workflow`, an unknown step or metric, or is not a
    /// bool; a name used twice.
    pub fn compile(spec: &WorkFlowSpec, steps: &[&str]) -> Result<Rules, Vec<String>> {
        let rules = &spec.rules;
        let mut compiled = Vec::with_capacity(rules.len());
        let mut named: Vec<String> = Vec::new();
        let mut problems = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            if rules[..i].iter().any(|r| r.name == rule.name) {
                problems.push(format!("rule {:?} is named twice", rule.name));
            }
            if let Some(problem) = misplaced(rule, spec) {
                problems.push(format!("rule {:?}: {problem}", rule.name));
            }
            match compile_one(&rule.when, steps) {
                Ok((program, metrics)) => {
                    for metric in metrics {
                        if let Metric::Step { step, .. } = metric
                            && !named.contains(&step)
                        {
                            named.push(step);
                        }
                    }
                    compiled.push(Compiled { program });
                }
                Err(problem) => problems.push(format!(
                    "rule {:?}: when {:?} {problem}",
                    rule.name, rule.when
                )),
            }
        }
        if problems.is_empty() {
            Ok(Rules {
                compiled,
                steps: named,
            })
        } else {
            Err(problems)
        }
    }

    /// Whether there are no rules: the planner skips the stage.
    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// The steps the rules name: those measured.
    pub fn steps(&self) -> &[String] {
        &self.steps
    }
}

/// Why `rule` cannot act in `spec`, if it cannot.
fn misplaced(rule: &Rule, spec: &WorkFlowSpec) -> Option<&'static str> {
    let parallelism = matches!(rule.action, RuleAction::Grow | RuleAction::Shrink);
    if parallelism && spec.parallelism.is_none() {
        Some("grow and shrink need spec.parallelism, their starting point")
    } else if rule.action == RuleAction::Repeat && spec.run_count() < 2 {
        Some("repeat needs spec.runs of at least 2 (the runs' Jobs are named by index only then)")
    } else if rule.min_parallelism.unwrap_or(1) > rule.max_parallelism.unwrap_or(i32::MAX) {
        Some("minParallelism is above maxParallelism")
    } else {
        None
    }
}

/// The program of `expression` and the metrics it names, checked against `steps`.
fn compile_one(expression: &str, steps: &[&str]) -> Result<(Program, Vec<Metric>), String> {
    let program = Program::compile(expression)
        .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
    let references = program.references();
    let mut others: Vec<&str> = (references.variables().iter().copied())
        .filter(|v| *v != "steps" && *v != "workflow")
        .collect();
    others.sort_unstable();
    if let Some(other) = others.first() {
        return Err(format!(
            "names {other:?}: a rule reads only steps.NAME.METRIC and workflow.METRIC"
        ));
    }
    let metrics = METRIC
        .captures_iter(expression)
        .map(|found| Metric::of(&found))
        .collect::<Result<Vec<_>, _>>()?;
    for metric in &metrics {
        if let Metric::Step { step, .. } = metric
            && !steps.contains(&step.as_str())
        {
            return Err(format!("names step {step:?}, which is not a step"));
        }
    }
    // Run once on metrics that all have a value: an expression that cannot be a bool, or
    // mixes types CEL does not (a double divided by an int), says so now.
    let sample = Metrics::from_iter(metrics.iter().filter_map(|m| match m {
        Metric::Step { step, .. } => Some((step.clone(), sample_metrics())),
        _ => None,
    }));
    let facts = Facts {
        metrics: &sample,
        runs_completed: 1,
        runs_failed: 1,
        elapsed: 1,
        completions: 1,
    };
    evaluate(&program, &facts)?;
    Ok((program, metrics))
}

/// Metrics with every value set, for the check at compile.
fn sample_metrics() -> StepMetrics {
    StepMetrics {
        succeeded: 1,
        failed: 1,
        running: 1,
        attempts: 1,
        duration: Some(crate::crd::Durations {
            mean: 1.0,
            min: 1.0,
            max: 1.0,
            last: 1.0,
        }),
    }
}

/// Runs `program` over `facts`.
fn evaluate(program: &Program, facts: &Facts<'_>) -> Result<bool, String> {
    thread_local! {
        static BASE: Context<'static> = Context::default().with_all();
    }
    BASE.with(|base| {
        let mut context = base.new_inner_scope();
        context.add_variable_from_value("steps", steps_value(facts.metrics));
        context.add_variable_from_value("workflow", workflow_value(facts));
        match program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("is {other:?}, not a bool")),
            Err(e) => Err(format!("fails: {}", one_line(&e.to_string()))),
        }
    })
}

/// `steps`: each measured step's metrics.
fn steps_value(metrics: &Metrics) -> Value {
    let steps: HashMap<Key, Value> = metrics
        .iter()
        .map(|(name, m)| {
            let count = |n: u32| Value::Int(i64::from(n));
            let mut fields: HashMap<Key, Value> = [
                (Key::from("succeeded"), count(m.succeeded)),
                (Key::from("failed"), count(m.failed)),
                (Key::from("running"), count(m.running)),
                (Key::from("attempts"), count(m.attempts)),
            ]
            .into();
            if let Some(d) = m.duration {
                let durations: HashMap<Key, Value> = [
                    (Key::from("mean"), Value::Float(d.mean)),
                    (Key::from("min"), Value::Float(d.min)),
                    (Key::from("max"), Value::Float(d.max)),
                    (Key::from("last"), Value::Float(d.last)),
                ]
                .into();
                fields.insert(Key::from("duration"), Value::Map(Map::from(durations)));
            }
            (Key::from(name.as_str()), Value::Map(Map::from(fields)))
        })
        .collect();
    Value::Map(Map::from(steps))
}

/// `workflow`: its runs and elapsed time.
fn workflow_value(facts: &Facts<'_>) -> Value {
    let runs: HashMap<Key, Value> = [
        (
            Key::from("completed"),
            Value::Int(i64::from(facts.runs_completed)),
        ),
        (
            Key::from("failed"),
            Value::Int(i64::from(facts.runs_failed)),
        ),
    ]
    .into();
    let fields: HashMap<Key, Value> = [
        (Key::from("runs"), Value::Map(Map::from(runs))),
        (Key::from("elapsed"), Value::Int(facts.elapsed)),
    ]
    .into();
    Value::Map(Map::from(fields))
}

/// Decides which of `rules` (compiled as `compiled`) fire on this pass, given what they did
/// before (`previous`, the stored status), where the workflow stands, and `facts`.
pub fn decide(
    rules: &[Rule],
    compiled: &Rules,
    previous: &[RuleStatus],
    standing: Standing,
    facts: &Facts<'_>,
) -> Decision {
    let mut decision = Decision {
        parallelism: standing.parallelism,
        ..Decision::default()
    };
    let mut runs = standing.runs;
    let already = |action: RuleAction| {
        rules
            .iter()
            .zip(previous_of(rules, previous))
            .find_map(|(r, s)| {
                (r.action == action && s.fired > 0)
                    .then(|| s.firings.last().cloned().unwrap_or_default())
            })
    };
    decision.finish = already(RuleAction::Finish);
    decision.fail = already(RuleAction::Fail);
    for ((rule, compiled), mut status) in rules
        .iter()
        .zip(&compiled.compiled)
        .zip(previous_of(rules, previous))
    {
        let rested = status
            .last_fired_at_completions
            .is_none_or(|at| facts.completions >= at.saturating_add(rule.backoff()));
        if status.fired < rule.repetitions()
            && rested
            && evaluate(&compiled.program, facts) == Ok(true)
            && let Some(effect) = act(rule, &mut decision, &mut runs)
        {
            let message = format!(
                "{}: {}: {effect}",
                rule.name,
                with_values(&rule.when, facts)
            );
            status.fired += 1;
            status.last_fired_at_completions = Some(facts.completions);
            status.firings.push(message.clone());
            match rule.action {
                RuleAction::Finish => decision.finish = Some(message.clone()),
                RuleAction::Fail => decision.fail = Some(message.clone()),
                _ => {}
            }
            decision.fired.push(message);
        }
        if rule.action == RuleAction::Repeat {
            decision.added_runs += status.fired;
        }
        decision.statuses.push(status);
    }
    decision
}

/// Each rule's stored record (an empty one for a rule that has none yet), in spec order.
fn previous_of(rules: &[Rule], previous: &[RuleStatus]) -> Vec<RuleStatus> {
    rules
        .iter()
        .map(|rule| {
            previous
                .iter()
                .find(|s| s.name == rule.name)
                .cloned()
                .unwrap_or_else(|| RuleStatus {
                    name: rule.name.clone(),
                    ..RuleStatus::default()
                })
        })
        .collect()
}

/// Does what `rule` does to `decision` (and the runs in force, `runs`): what changed, or
/// `None` when it has nothing to do (a bound reached, the workflow already ending).
fn act(rule: &Rule, decision: &mut Decision, runs: &mut u32) -> Option<String> {
    let ending = decision.finish.is_some() || decision.fail.is_some();
    match rule.action {
        RuleAction::Grow | RuleAction::Shrink => {
            let from = decision.parallelism?;
            let to = if rule.action == RuleAction::Grow {
                from.checked_add(1)
                    .filter(|to| rule.max_parallelism.is_none_or(|max| *to <= max))?
            } else {
                Some(from - 1).filter(|to| *to >= rule.min_parallelism.unwrap_or(1).max(1))?
            };
            decision.parallelism = Some(to);
            Some(format!("parallelism {from} -> {to}"))
        }
        RuleAction::Finish if !ending => {
            Some("finish (as spec.shutdown: Stop): running steps finish, no new step starts".into())
        }
        RuleAction::Fail if !ending => Some("fail the workflow".into()),
        RuleAction::Repeat if !ending && *runs < MAX_RUNS => {
            let from = *runs;
            *runs += 1;
            Some(format!("runs {from} -> {}", *runs))
        }
        _ => None,
    }
}

/// `expression` with each metric it names followed by its value: `steps.sim.duration.mean
/// = 372 >= 360`.
pub fn with_values(expression: &str, facts: &Facts<'_>) -> String {
    METRIC
        .replace_all(expression, |found: &Captures<'_>| {
            let text = &found[0];
            match Metric::of(found).ok().map(|m| m.value(facts)) {
                Some(Some(value)) => format!("{text} = {}", number(value)),
                Some(None) => format!("{text} = none"),
                None => text.to_string(),
            }
        })
        .into_owned()
}

/// `value` as a message shows it: whole numbers without a fraction, others to a tenth.
fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
