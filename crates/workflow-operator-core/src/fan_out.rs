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
//! ([`parse_param`]) and names instances ([`display_name`]): `build[3]` for item 3,
//! `run1/build` for run 1 of `runs: 3`. The display name is what the status, `get` and the
//! Job's name show; a Job's labels carry the run index and item ([`crate::jobs`]).

use serde_json::Value;

use super::agent;
use super::crd::{IntOrExpr, OptionNum, Sequence, Step};
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
            return sequence_of(sequence).map(Some);
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

    /// How many items, when the spec says (not for `withParam`).
    pub fn static_len(&self) -> Option<usize> {
        match self {
            FanOut::Items(n) | FanOut::Sequence { count: n, .. } => Some(*n),
            FanOut::Param { .. } => None,
        }
    }
}

/// The items of a step that fans out over a list the spec holds (`withItems`,
/// `withSequence`): what a call of a `dag` template runs the DAG once per. `None` for a step
/// that does not fan out.
///
/// # Errors
/// As [`FanOut::compile`]; a `withParam` (known only once a step ran) is refused.
pub fn static_items(step: &Step) -> Result<Option<Vec<Value>>, String> {
    if step.with_param.is_some() {
        return Err("has withParam: its items are known only once a step ran, so it cannot                     run a dag template per item (use withItems or withSequence)"
            .into());
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
    let fan_out = sequence_of(sequence)?;
    let list = ItemList::of_spec(step, &fan_out).expect("a sequence lists its items");
    Ok(Some((0..list.len()).map(|i| list.get(i)).collect()))
}

fn not_a_param(text: &str) -> String {
    format!(
        "has withParam {text:?}, which is not one {{{{steps.NAME.outputs.KEY}}}} (the output, a \
         JSON list, of a step upstream)"
    )
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
/// inclusive, counting down when `end` is below `start`.
fn sequence_of(sequence: &Sequence) -> Result<FanOut, String> {
    let number = |field: &str, value: &Option<IntOrExpr<i64>>| match value {
        Some(IntOrExpr::Expr(text)) => {
            Err(format!("withSequence.{field}: {text:?} is not a number"))
        }
        other => Ok(other.num()),
    };
    let start = number("start", &sequence.start)?.unwrap_or(0);
    let (count, end) = (
        number("count", &sequence.count)?,
        number("end", &sequence.end)?,
    );
    let (by, count) = match (count, end) {
        (Some(_), Some(_)) => {
            return Err("has a withSequence with both count and end: give one of them".into());
        }
        (None, None) => return Err("has a withSequence with neither count nor end".into()),
        (Some(count), None) => (1, u64::try_from(count).unwrap_or(0)),
        (None, Some(end)) => {
            let by = if end >= start { 1 } else { -1 };
            (by, end.abs_diff(start).saturating_add(1))
        }
    };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if let Some(format) = &sequence.format {
        sequence_format::apply(format, start)?;
    }
    within_limit(count).map(|count| FanOut::Sequence { start, by, count })
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
    /// `withParam`).
    pub fn of_spec(step: &'a Step, fan_out: &FanOut) -> Option<ItemList<'a>> {
        match fan_out {
            FanOut::Items(_) => step
                .with_items
                .as_deref()
                .map(|items| ItemList::Spec(&items.0)),
            FanOut::Sequence { start, by, count } => Some(ItemList::Sequence {
                start: *start,
                by: *by,
                count: *count,
                format: (step.with_sequence.as_deref()).and_then(|s| s.format.as_deref()),
            }),
            FanOut::Param { .. } => None,
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
                let param = step.with_param.as_deref().map_or("", |p| p.0.trim());
                format!("{name} × {param}")
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
                error.contains("is not one {{steps.NAME.outputs.KEY}}"),
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
