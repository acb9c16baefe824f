//! Fan-out and repeated runs, the pure part.
//!
//! A step with `withItems`, `withSequence` or `withParam` runs once per item, each item in a Job
//! of its own; `spec.runs: N` runs the whole DAG N times. Neither changes the DAG: the planner
//! keeps one node per step, and an *instance* of a step ([`Instance`]: which run, which item) is
//! what one Job runs. A step that fans out is done when every item succeeded (its dependents
//! wait for all of them: the fan-in), and failed when one item failed.
//!
//! This module compiles a step's fan-out once per spec ([`FanOut::compile`], refusing what
//! cannot run), gives each item's value ([`ItemList`]), reads a `withParam` value
//! ([`parse_param`]) and the bounds of a `withSequence` from a step's output
//! ([`OutputSequence`]), and names instances ([`display_name`]): `build[3]` for item 3,
//! `run1/build` for run 1 of `runs: 3`. The display name is what the status, `get` and the
//! Job's name show; a Job's labels carry the run index and item ([`crate::jobs`]).

use serde_json::Value;

use super::agent;
use super::crd::{IntOrExpr, Items, Sequence, Step};
use super::dag::Dag;
use super::outputs::{self, Source};
use super::sequence_format;

/// The environment variable with the item of a step that fans out: a string item as itself,
/// anything else as JSON.
pub const ITEM_ENV: &str = "WORKFLOW_ITEM";

/// The environment variable with the index of the run (from 0) of `spec.runs`.
pub const RUN_INDEX_ENV: &str = "WORKFLOW_RUN_INDEX";

/// The most items one step may fan out over: the bound Kubernetes puts on an Indexed Job's
/// parallelism and failed indexes (`maxParallelismForIndexedJob`,
/// `maxFailedIndexesForIndexedJob`, both 10^5, in pkg/apis/batch/validation/validation.go).
/// Past it the planner's work per pass, and the Jobs in the namespace, grow beyond what one
/// workflow should ask for.
pub const MAX_ITEMS: usize = 100_000;

/// What one step fans out over, as compiled from its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FanOut {
    /// `withItems`: the step's own list, of this length.
    Items(usize),
    /// `withSequence`: `count` numbers from `start`, each `by` (1 or -1) from the last.
    Sequence {
        /// The first number.
        start: i64,
        /// 1 counting up, -1 counting down.
        by: i64,
        /// How many.
        count: usize,
    },
    /// `withParam`: the output `key` of step `step` (an index of the DAG), a JSON list.
    Param {
        /// The step whose output it is (upstream of this one).
        step: usize,
        /// The output's key.
        key: String,
    },
    /// `withSequence` whose `count`, `start` or `end` is a step's output (Argo's
    /// `count: "{{steps.gen.outputs.result}}"`): its numbers once those outputs are known.
    OutputSequence(OutputSequence),
}

/// A `withSequence` with a bound from a step's output, as compiled: each bound a number or
/// an output, and `count` or `end` (exactly one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSequence {
    /// The first number (0 when not given).
    pub start: Bound,
    /// How many numbers from `start`, or the last one inclusive.
    pub until: Until,
}

/// How a `withSequence` ends: after `count` numbers, or at `end` inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// `count`.
    Count(Bound),
    /// `end`.
    End(Bound),
}

/// A bound of a `withSequence`: a number the spec holds, or the output `key` of step `step`
/// (an index of the DAG), read as a whole number once that step told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// Written as a number (or filled as one from a parameter).
    Number(i64),
    /// `{{steps.NAME.outputs.KEY}}`.
    Output {
        /// The step whose output it is (upstream of this one).
        step: usize,
        /// The output's key.
        key: String,
        /// The reference as written, for messages.
        text: String,
    },
}

impl OutputSequence {
    /// The outputs its bounds name, as `(step, key)`.
    pub fn outputs(&self) -> impl Iterator<Item = (usize, &str)> {
        let until = match &self.until {
            Until::Count(bound) | Until::End(bound) => bound,
        };
        [&self.start, until]
            .into_iter()
            .filter_map(|bound| match bound {
                Bound::Number(_) => None,
                Bound::Output { step, key, .. } => Some((*step, key.as_str())),
            })
    }

    /// The reference of its first bound that is an output, as written (what `graph` shows).
    pub fn first_output(&self) -> &str {
        let until = match &self.until {
            Until::Count(bound) | Until::End(bound) => bound,
        };
        [&self.start, until]
            .into_iter()
            .find_map(|bound| match bound {
                Bound::Number(_) => None,
                Bound::Output { text, .. } => Some(text.as_str()),
            })
            .unwrap_or_default()
    }

    /// Its numbers given `value`, the text of each output it names by step and key (`Ok(None)`
    /// while one is not known): `(start, by, count)` as [`FanOut::Sequence`] holds them.
    ///
    /// # Errors
    /// Why it has none, for the step's failure: an output that is not a whole number
    /// (`withSequence.count: {{steps.gen.outputs.n}} is "many", not a whole number`), or more
    /// than [`MAX_ITEMS`] numbers.
    pub fn numbers(
        &self,
        value: impl Fn(usize, &str) -> Result<Option<String>, String>,
    ) -> Result<Option<(i64, i64, usize)>, String> {
        let read = |field: &str, bound: &Bound| -> Result<Option<i64>, String> {
            let (step, key, reference) = match bound {
                Bound::Number(n) => return Ok(Some(*n)),
                Bound::Output { step, key, text } => (*step, key, text),
            };
            let Some(text) =
                value(step, key).map_err(|why| format!("withSequence.{field}: {why}"))?
            else {
                return Ok(None);
            };
            match text.trim().parse() {
                Ok(n) => Ok(Some(n)),
                Err(_) => Err(format!(
                    "withSequence.{field}: {reference} is {:?}, not a whole number",
                    text.chars().take(80).collect::<String>()
                )),
            }
        };
        let Some(start) = read("start", &self.start)? else {
            return Ok(None);
        };
        let (count, end) = match &self.until {
            Until::Count(bound) => (read("count", bound)?, None),
            Until::End(bound) => (None, read("end", bound)?),
        };
        if count.is_none() && end.is_none() {
            return Ok(None);
        }
        let (by, count) = steps_of(start, count, end)?;
        Ok(Some((start, by, count)))
    }
}

impl FanOut {
    /// The fan-out of `step` (a step of `dag`), `None` when it runs once.
    ///
    /// # Errors
    /// What is wrong, for the step's error: more than one of the three fields, a `withParam`
    /// that is not one `{{steps.NAME.outputs.KEY}}`, a `withSequence` with both or neither of
    /// `count` and `end`, or more than [`MAX_ITEMS`] items. (That a `withParam`'s step is
    /// upstream is checked with the other references, by `data_flow`.)
    pub fn compile(step: &Step, dag: &Dag) -> Result<Option<FanOut>, String> {
        let given = [
            step.with_items.is_some(),
            step.with_param.is_some(),
            step.with_sequence.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(
                "has more than one of withItems, withParam and withSequence: a step fans out \
                 over one list"
                    .into(),
            );
        }
        if let Some(items) = &step.with_items {
            return within_limit(items.0.len()).map(|n| Some(FanOut::Items(n)));
        }
        if let Some(sequence) = &step.with_sequence {
            let index_of = |name: &str| dag.index_of(name).unwrap_or(usize::MAX);
            return sequence_of(sequence, &index_of).map(Some);
        }
        let Some(param) = &step.with_param else {
            return Ok(None);
        };
        let text = param.0.trim();
        let found = outputs::references(text).ok().unwrap_or_default();
        match found.as_slice() {
            [reference] if reference.text == text => match reference.source {
                Source::Output { step: source, key } => Ok(Some(FanOut::Param {
                    // An unknown step is named by `data_flow` with the other references.
                    step: dag.index_of(source).unwrap_or(usize::MAX),
                    key: key.to_string(),
                })),
                Source::Item { .. } | Source::Retries | Source::Workflow(_) => {
                    Err(not_a_param(text))
                }
            },
            _ => Err(not_a_param(text)),
        }
    }

    /// How many items, when the spec says (not for `withParam`, nor a `withSequence` over a
    /// step's output).
    pub fn static_len(&self) -> Option<usize> {
        match self {
            FanOut::Items(n) | FanOut::Sequence { count: n, .. } => Some(*n),
            FanOut::Param { .. } | FanOut::OutputSequence(_) => None,
        }
    }
}

/// The items of a step that fans out over a list the spec holds (`withItems`,
/// `withSequence`): what a call of a `dag` template runs the DAG once per. `None` for a step
/// that does not fan out.
///
/// # Errors
/// As [`FanOut::compile`]; a `withParam`, or a `withSequence` over a step's output (known only
/// once a step ran), is refused.
pub fn static_items(step: &Step) -> Result<Option<Vec<Value>>, String> {
    const KNOWN_LATE: &str = "its items are known only once a step ran, so it cannot run a dag \
                              template per item (use withItems or withSequence)";
    if step.with_param.is_some() {
        return Err(format!("has withParam: {KNOWN_LATE}"));
    }
    if step.with_items.is_some() && step.with_sequence.is_some() {
        return Err("has both withItems and withSequence: a step fans out over one list".into());
    }
    if let Some(items) = &step.with_items {
        within_limit(items.0.len())?;
        return Ok(Some(items.0.clone()));
    }
    let Some(sequence) = &step.with_sequence else {
        return Ok(None);
    };
    let fan_out = sequence_of(sequence, &|_| usize::MAX)?;
    let Some(list) = ItemList::of_spec(step, &fan_out) else {
        return Err(format!(
            "has a withSequence over a step's output: {KNOWN_LATE}"
        ));
    };
    Ok(Some((0..list.len()).map(|i| list.get(i)).collect()))
}

fn not_a_param(text: &str) -> String {
    format!(
        "has withParam {text:?}, which is neither one {{{{steps.NAME.outputs.KEY}}}} (the \
         output, a JSON list, of a step upstream) nor a JSON list"
    )
}

/// `step` with a `withParam` that is a JSON list written out (as a parameter fills Argo's
/// `withParam: "{{inputs.parameters.list}}"`) made the `withItems` it is, so that its items are
/// the spec's like any list written out; one that is a step's output is read once it ran.
pub fn param_listed(step: &mut Step) {
    let Some(param) = step.with_param.as_deref() else {
        return;
    };
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(param.0.trim()) {
        step.with_param = None;
        step.with_items = Some(Box::new(Items(items)));
    }
}

fn within_limit(n: usize) -> Result<usize, String> {
    if n > MAX_ITEMS {
        return Err(format!(
            "fans out over {n} items, more than the {MAX_ITEMS} a step may"
        ));
    }
    Ok(n)
}

/// `withSequence` as Argo expands it: `count` numbers from `start`, or `start` to `end`
/// inclusive, counting down when `end` is below `start`; a bound that is one
/// `{{steps.NAME.outputs.KEY}}` (`index_of` the step's index) is read once that step told it.
fn sequence_of(sequence: &Sequence, index_of: &dyn Fn(&str) -> usize) -> Result<FanOut, String> {
    let bound = |field: &str, value: &Option<IntOrExpr<i64>>| match value {
        None => Ok(None),
        Some(IntOrExpr::Num(n)) => Ok(Some(Bound::Number(*n))),
        Some(IntOrExpr::Expr(text)) => match output_bound(text) {
            Some((step, key)) => Ok(Some(Bound::Output {
                // An unknown step is named by `data_flow` with the other references.
                step: index_of(step),
                key: key.to_string(),
                text: text.trim().to_string(),
            })),
            None => Err(format!("withSequence.{field}: {text:?} is not a number")),
        },
    };
    let start = bound("start", &sequence.start)?.unwrap_or(Bound::Number(0));
    let until = match (
        bound("count", &sequence.count)?,
        bound("end", &sequence.end)?,
    ) {
        (Some(_), Some(_)) => {
            return Err("has a withSequence with both count and end: give one of them".into());
        }
        (None, None) => return Err("has a withSequence with neither count nor end".into()),
        (Some(count), None) => Until::Count(count),
        (None, Some(end)) => Until::End(end),
    };
    if let Some(format) = &sequence.format {
        let first = match start {
            Bound::Number(n) => n,
            Bound::Output { .. } => 0,
        };
        sequence_format::apply(format, first)?;
    }
    let sequence = OutputSequence { start, until };
    match sequence.numbers(|_, _| Ok(None))? {
        Some((start, by, count)) => Ok(FanOut::Sequence { start, by, count }),
        None => Ok(FanOut::OutputSequence(sequence)),
    }
}

/// The step and output a `withSequence` bound written as text names, when it is one
/// `{{steps.NAME.outputs.KEY}}` (of an output, not of how the step ended).
pub fn output_bound(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    match outputs::references(text).ok()?.as_slice() {
        [reference] if reference.text == text => match reference.source {
            Source::Output { step, key } if outputs::step_field(key).is_none() => Some((step, key)),
            _ => None,
        },
        _ => None,
    }
}

/// How a sequence from `start` runs: `count` numbers up, or to `end` inclusive (down when it
/// is below `start`): `(by, count)`.
fn steps_of(start: i64, count: Option<i64>, end: Option<i64>) -> Result<(i64, usize), String> {
    let (by, count) = match (count, end) {
        (Some(count), _) => (1, u64::try_from(count).unwrap_or(0)),
        (None, Some(end)) => {
            let by = if end >= start { 1 } else { -1 };
            (by, end.abs_diff(start).saturating_add(1))
        }
        (None, None) => (1, 0),
    };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    within_limit(count).map(|count| (by, count))
}

/// The items of one step, once known.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemList<'a> {
    /// `withItems`, as written in the spec.
    Spec(&'a [Value]),
    /// `withSequence`.
    Sequence {
        /// The first number.
        start: i64,
        /// 1 or -1.
        by: i64,
        /// How many.
        count: usize,
        /// `format`: each number as text (`sequence_format`), checked when compiled.
        format: Option<&'a str>,
    },
    /// `withParam`, read from the upstream step's output.
    Param(Vec<Value>),
}

impl<'a> ItemList<'a> {
    /// The items of `step`, whose fan-out is `fan_out`, when the spec holds them (`None` for
    /// `withParam` and a `withSequence` over a step's output).
    pub fn of_spec(step: &'a Step, fan_out: &FanOut) -> Option<ItemList<'a>> {
        match fan_out {
            FanOut::Items(_) => step
                .with_items
                .as_deref()
                .map(|items| ItemList::Spec(&items.0)),
            FanOut::Sequence { start, by, count } => {
                Some(ItemList::numbers(step, (*start, *by, *count)))
            }
            FanOut::Param { .. } | FanOut::OutputSequence(_) => None,
        }
    }

    /// The numbers of `step`'s `withSequence`: `count` from `start`, each `by` from the last,
    /// in its `format`.
    pub fn numbers(step: &'a Step, (start, by, count): (i64, i64, usize)) -> ItemList<'a> {
        ItemList::Sequence {
            start,
            by,
            count,
            format: (step.with_sequence.as_deref()).and_then(|s| s.format.as_deref()),
        }
    }

    /// How many items.
    pub fn len(&self) -> usize {
        match self {
            ItemList::Spec(items) => items.len(),
            ItemList::Sequence { count, .. } => *count,
            ItemList::Param(items) => items.len(),
        }
    }

    /// Whether there are none (the step is then done at once).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i` (below [`ItemList::len`]).
    pub fn get(&self, i: usize) -> Value {
        match self {
            ItemList::Spec(items) => items[i].clone(),
            ItemList::Param(items) => items[i].clone(),
            ItemList::Sequence {
                start, by, format, ..
            } => {
                let number = start.saturating_add(by.saturating_mul(i as i64));
                match format.map(|f| sequence_format::apply(f, number)) {
                    Some(Ok(text)) => Value::from(text),
                    // Refused when the sequence was compiled ([`FanOut::of`]).
                    Some(Err(_)) | None => Value::from(number),
                }
            }
        }
    }
}

/// An output of a step that fans out, as a later step reads it (Argo's aggregated outputs): a
/// JSON list of its items' values, in item order, `values` being each item's that has one. The
/// standard output (`result`) is each value read as JSON, else as text; a parameter is each
/// value as text, unless every one is a JSON object or list (then those), as Argo aggregates
/// them.
pub fn aggregate<'v>(result: bool, values: impl Iterator<Item = &'v str>) -> String {
    let values: Vec<&str> = values.collect();
    let parsed = |v: &str| serde_json::from_str::<Value>(v.trim()).ok();
    let list: Vec<Value> = if result {
        (values.iter())
            .map(|v| parsed(v).unwrap_or_else(|| Value::from(*v)))
            .collect()
    } else {
        let structured: Option<Vec<Value>> = (values.iter())
            .map(|v| parsed(v).filter(|p| p.is_object() || p.is_array()))
            .collect();
        structured.unwrap_or_else(|| values.iter().map(|v| Value::from(*v)).collect())
    };
    Value::Array(list).to_string()
}

/// Every output parameter of a step that fans out, as a later step reads it
/// (`{{steps.NAME.outputs.parameters}}`, Argo's aggregate): a JSON list with, for each item
/// in item order that has any, the object of its parameters by name (its `result` and output
/// artifacts left out).
pub fn aggregate_parameters<'v>(
    items: impl Iterator<Item = &'v std::collections::BTreeMap<String, String>>,
) -> String {
    let maps: Vec<Value> = items
        .map(|outputs| {
            (outputs.iter())
                .filter(|(k, _)| *k != agent::RESULT && !k.starts_with(outputs::ARTIFACT_PREFIX))
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect::<serde_json::Map<_, _>>()
        })
        .filter(|map| !map.is_empty())
        .map(Value::Object)
        .collect();
    Value::Array(maps).to_string()
}

/// The items of a `withParam`: the output's text as a JSON list.
///
/// # Errors
/// Why it is not one, for the step's failure: not JSON, or JSON that is not a list, or a list
/// of more than [`MAX_ITEMS`].
pub fn parse_param(text: &str) -> Result<Vec<Value>, String> {
    let shown: String = text.chars().take(80).collect();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => within_limit(items.len()).map(|_| items),
        Ok(_) => Err(format!("is not a JSON list: {shown:?}")),
        Err(error) => Err(format!("is not a JSON list ({error}): {shown:?}")),
    }
}

/// One item of a step that fans out, for its Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its index in the list, from 0.
    pub index: u32,
    /// Its value.
    pub value: Value,
}

/// Which instance of a step a Job runs: the run (of `spec.runs`) and the item, if the step
/// fans out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instance {
    /// The run, from 0 (`$WORKFLOW_RUN_INDEX`).
    pub run_index: u32,
    /// The item.
    pub item: Option<Item>,
}

/// Whether `step` fans out (`withItems`, `withParam` or `withSequence`).
pub fn fans_out(step: &Step) -> bool {
    step.with_items.is_some() || step.with_param.is_some() || step.with_sequence.is_some()
}

/// The name an instance shows in the status, in `get` and in its Job's name: `step`, with
/// `[i]` for item `i`, after `runR/` when the workflow has more than one run. A workflow with
/// neither keeps its step names (and so its Job names).
pub fn display_name(step: &str, run_index: u32, runs: u32, item: Option<u32>) -> String {
    let mut name = String::with_capacity(step.len() + 12);
    if runs > 1 {
        name.push_str(&format!("run{run_index}/"));
    }
    name.push_str(step);
    if let Some(item) = item {
        name.push_str(&format!("[{item}]"));
    }
    name
}

/// A step as `graph` draws it: its name, and for a step that fans out its count (`build ×3`)
/// or the list it fans out over (`each × {{steps.gen.outputs.list}}`).
pub fn node_label(step: &Step, fan_out: Option<&FanOut>) -> String {
    let name = &step.step_name;
    match fan_out {
        None => name.clone(),
        Some(fan_out) => match fan_out.static_len() {
            Some(count) => format!("{name} ×{count}"),
            None => {
                let list = match fan_out {
                    FanOut::OutputSequence(sequence) => sequence.first_output(),
                    _ => step.with_param.as_deref().map_or("", |p| p.0.trim()),
                };
                format!("{name} × {list}")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkFlow;

    fn compile(step: &Step) -> Result<Option<FanOut>, String> {
        let wf = WorkFlow::test("w").step("gen", &[]).build();
        let dag = Dag::build(&wf.spec.containers).unwrap();
        FanOut::compile(step, &dag)
    }

    fn sequence(count: Option<i64>, start: Option<i64>, end: Option<i64>) -> Step {
        let mut step = crate::testing::step("s", &[]);
        step.with_sequence = Some(Box::new(Sequence {
            count: count.map(Into::into),
            start: start.map(Into::into),
            end: end.map(Into::into),
            format: None,
        }));
        step
    }

    #[test]
    fn a_sequence_with_a_format_lists_each_number_as_text() {
        let mut step = sequence(Some(3), Some(8), None);
        step.with_sequence.as_mut().unwrap().format = Some("n%02d".into());
        assert_eq!(
            numbers(&step),
            [
                serde_json::json!("n08"),
                serde_json::json!("n09"),
                serde_json::json!("n10")
            ]
        );
        step.with_sequence.as_mut().unwrap().format = Some("%f".into());
        assert!(
            compile(&step)
                .unwrap_err()
                .contains("%f is not a verb a number takes")
        );
    }

    fn numbers(step: &Step) -> Vec<Value> {
        let fan_out = compile(step).unwrap().unwrap();
        let list = ItemList::of_spec(step, &fan_out).unwrap();
        (0..list.len()).map(|i| list.get(i)).collect()
    }

    #[test]
    fn a_sequence_counts_from_start_or_runs_to_end_inclusive_either_way() {
        assert_eq!(numbers(&sequence(Some(3), None, None)), [0, 1, 2]);
        assert_eq!(numbers(&sequence(Some(2), Some(5), None)), [5, 6]);
        assert_eq!(numbers(&sequence(None, Some(2), Some(4))), [2, 3, 4]);
        assert_eq!(numbers(&sequence(None, Some(2), Some(0))), [2, 1, 0]);
        assert_eq!(numbers(&sequence(Some(0), None, None)), Vec::<Value>::new());
        for (bad, why) in [
            (sequence(Some(1), None, Some(1)), "both count and end"),
            (sequence(None, Some(1), None), "neither count nor end"),
            (sequence(Some(100_001), None, None), "more than the 100000"),
        ] {
            let error = compile(&bad).unwrap_err();
            assert!(error.contains(why), "{error}");
        }
    }

    #[test]
    fn a_sequence_bound_from_a_steps_output_is_read_once_known_and_no_dag_runs_per_item() {
        let mut step = sequence(None, Some(1), None);
        step.with_sequence.as_mut().unwrap().end = Some(IntOrExpr::Expr(Box::new(
            " {{steps.gen.outputs.result}}".into(),
        )));
        let Ok(Some(FanOut::OutputSequence(late))) = compile(&step) else {
            panic!("{:?}", compile(&step));
        };
        assert_eq!(late.outputs().collect::<Vec<_>>(), [(0, "result")]);
        assert_eq!(late.numbers(|_, _| Ok(None)), Ok(None));
        assert_eq!(
            late.numbers(|_, _| Ok(Some("3\n".into()))),
            Ok(Some((1, 1, 3)))
        );
        assert_eq!(
            late.numbers(|_, _| Ok(Some("x".into()))),
            Err(
                r#"withSequence.end: {{steps.gen.outputs.result}} is "x", not a whole number"#
                    .into()
            )
        );
        let error = static_items(&step).unwrap_err();
        assert!(
            error.contains("known only once a step ran, so it cannot run a dag template"),
            "{error}"
        );
        step.with_sequence.as_mut().unwrap().end =
            Some(IntOrExpr::Expr(Box::new("{{steps.gen.status}}".into())));
        assert_eq!(
            compile(&step),
            Err(r#"withSequence.end: "{{steps.gen.status}}" is not a number"#.into())
        );
    }

    #[test]
    fn a_param_is_one_output_reference_and_its_value_a_json_list() {
        let mut step = crate::testing::step("s", &["gen"]);
        step.with_param = Some(Box::new(crate::crd::Param(
            " {{steps.gen.outputs.list}} ".into(),
        )));
        assert_eq!(
            compile(&step),
            Ok(Some(FanOut::Param {
                step: 0,
                key: "list".into()
            }))
        );
        for bad in ["{{item}}", "x {{steps.gen.outputs.list}}", "[1, 2]"] {
            step.with_param = Some(Box::new(crate::crd::Param(bad.into())));
            let error = compile(&step).unwrap_err();
            assert!(
                error.contains("is neither one {{steps.NAME.outputs.KEY}}"),
                "{error}"
            );
        }
        assert_eq!(
            parse_param(r#"["a", {"b": 1}]"#),
            Ok(vec![Value::from("a"), serde_json::json!({"b": 1})])
        );
        assert_eq!(
            parse_param(r#"{"a": 1}"#),
            Err(r#"is not a JSON list: "{\"a\": 1}""#.into())
        );
        assert!(
            parse_param("a,b")
                .unwrap_err()
                .starts_with("is not a JSON list (")
        );
    }

    #[test]
    fn a_step_fans_out_over_one_list() {
        let mut step = sequence(Some(2), None, None);
        step.with_items = Some(Box::new(crate::crd::Items(vec!["a".into()])));
        let error = compile(&step).unwrap_err();
        assert!(error.contains("more than one of withItems"), "{error}");
        assert_eq!(compile(&crate::testing::step("s", &[])), Ok(None));
    }

    #[test]
    fn instances_are_named_by_run_and_item_and_plain_steps_keep_their_names() {
        assert_eq!(display_name("build", 0, 1, None), "build");
        assert_eq!(display_name("build", 0, 1, Some(3)), "build[3]");
        assert_eq!(display_name("build", 2, 3, None), "run2/build");
        assert_eq!(display_name("build", 0, 3, Some(0)), "run0/build[0]");
    }
}
