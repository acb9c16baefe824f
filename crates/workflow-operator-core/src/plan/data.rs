//! The data between steps, as a pass reads it for the steps that may start: what a `when` sees
//! of the steps before it ([`Facts`]), the values of the outputs a step names
//! ([`step_inputs`]), the items of a step that fans out ([`items_of`]). The `observe` stage
//! decides with them which steps start, are skipped or fail for their data.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::crd::{Step, StepPhase};
use crate::dag::Dag;
use crate::data_flow;
use crate::fan_out::{self, FanOut, ItemList};
use crate::outputs::{self, Inputs, Outputs, Source};
use crate::when::{Ended, Upstream, argo_phase};

use super::JobState;
use super::planner::{Fan, Known};

/// What the `when`s of one set of steps may read of the steps before them.
pub(super) struct Facts<'k, 'a> {
    /// The outputs read of the steps that succeeded, by index.
    pub(super) outputs: &'k HashMap<usize, &'a Outputs>,
    /// The steps a `when` skipped.
    pub(super) skipped: &'k [bool],
    /// The phase of the steps that failed, and of those that fan out and are done.
    pub(super) phases: &'k HashMap<usize, &'static str>,
    /// How the steps that ran ended, of those whose end some step names.
    pub(super) ended: &'k HashMap<usize, Ended>,
    /// The `when`s are the exit steps': every step has ended, and one that did not finish
    /// reads `Omitted`.
    pub(super) exit: bool,
}

impl<'a> Known<'a> {
    /// What the `when`s and references of other steps (the exit steps', `exit`) read of these.
    pub(super) fn facts(&self, exit: bool) -> Facts<'_, 'a> {
        Facts {
            outputs: &self.outputs,
            skipped: &self.skipped,
            phases: &self.phases,
            ended: &self.ended,
            exit,
        }
    }
}

/// How a step that did not finish reads in an exit step's `when`.
const OMITTED: &str = "Omitted";

/// A set of steps another step reads: their DAG, what they told, and those of them that fan
/// out. An exit step reads two: the exit steps before it, and the workflow's steps.
pub(super) struct StepsRead<'k, 'a> {
    pub(super) dag: &'k Dag,
    pub(super) facts: Facts<'k, 'a>,
    pub(super) fans: &'k HashMap<usize, Fan<'a>>,
}

/// The first of `sources` that holds step `name`, with its index there.
fn find<'s, 'k, 'a>(
    sources: &'s [StepsRead<'k, 'a>],
    name: &str,
) -> Option<(&'s StepsRead<'k, 'a>, usize)> {
    sources
        .iter()
        .find_map(|source| Some((source, source.dag.index_of(name)?)))
}

/// Whether step `name` of `sources` was skipped by its `when`.
pub(super) fn is_skipped(sources: &[StepsRead<'_, '_>], name: &str) -> bool {
    find(sources, name).is_some_and(|(s, i)| s.facts.skipped.get(i).copied().unwrap_or(false))
}

/// What a `when` naming `names` (steps of `sources`) sees of them: each that is skipped,
/// failed, done, or succeeded with outputs (and, of the steps an exit step reads, every one).
pub(super) fn upstream<'n, 'a>(
    sources: &[StepsRead<'_, 'a>],
    names: impl Iterator<Item = &'n str>,
) -> HashMap<&'n str, Upstream<'a>> {
    names
        .filter_map(|name| {
            let (source, i) = find(sources, name)?;
            let (phase, outputs) = source.facts.phase(i)?;
            let ended = source.facts.ended.get(&i).copied();
            Some((
                name,
                Upstream {
                    phase,
                    outputs,
                    ended,
                },
            ))
        })
        .collect()
}

impl<'a> Facts<'_, 'a> {
    /// The phase of step `i` and its outputs, once it is skipped, failed, done, or succeeded
    /// with outputs (and, in an exit step, always).
    fn phase(&self, i: usize) -> Option<(&'static str, Option<&'a Outputs>)> {
        Some(if self.skipped.get(i).copied().unwrap_or(false) {
            (StepPhase::Skipped.as_str(), None)
        } else if let Some(phase) = self.phases.get(&i) {
            (*phase, None)
        } else if let Some(outputs) = self.outputs.get(&i) {
            (StepPhase::Succeeded.as_str(), Some(*outputs))
        } else if self.exit {
            (OMITTED, None)
        } else {
            return None;
        })
    }

    /// The text of Argo's `{{steps.NAME.FIELD}}` (one of [`outputs::STEP_FIELDS`]) of step
    /// `i`: its status once it ended (a skipped one's `Skipped`), the rest when it ran and has
    /// them.
    fn field(&self, i: usize, field: &str) -> Option<String> {
        if let Some(ended) = self.ended.get(&i) {
            return ended.text(field);
        }
        let (phase, _) = self.phase(i)?;
        (field == "status").then(|| argo_phase(phase).to_string())
    }
}

/// The values of the outputs `step` names, from what the steps of `sources` told (their
/// outputs, and how they ended for Argo's `{{steps.NAME.status}}` and the like); `None` when
/// it names none. An output artifact of a step that fans out (done; the only output of one a
/// step may name) is its items' Jobs, see [`fan_in_jobs`], unless the step was skipped.
///
/// # Errors
/// The first output named that is not there (its step was skipped, or did not write it; the
/// caller, which knows the skipped steps, says which).
pub(super) fn step_inputs(
    step: &Step,
    sources: &[StepsRead<'_, '_>],
) -> Result<Option<Inputs>, outputs::MissingOutput> {
    let mut inputs = Inputs::new();
    for text in data_flow::texts(step) {
        let Ok(found) = outputs::references(text) else {
            continue;
        };
        for reference in found {
            let Source::Output { step, key } = reference.source else {
                continue;
            };
            let found = find(sources, step);
            let fan = (found.filter(|(s, i)| !s.facts.skipped.get(*i).copied().unwrap_or(false)))
                .and_then(|(s, i)| s.fans.get(&i));
            let fan_in = fan.and_then(|fan| match key.starts_with(outputs::ARTIFACT_PREFIX) {
                true => fan_in_jobs(fan),
                false => aggregate(fan, key),
            });
            let value = match outputs::step_field(key) {
                Some(field) => found.and_then(|(s, i)| s.facts.field(i, field)),
                None => fan_in.or_else(|| {
                    let (s, i) = found?;
                    s.facts.outputs.get(&i)?.get(key).cloned()
                }),
            };
            let Some(value) = value else {
                return Err(outputs::MissingOutput {
                    text: reference.text.to_string(),
                    step: step.to_string(),
                    key: key.to_string(),
                    skipped: false,
                });
            };
            inputs.insert((step.to_string(), key.to_string()), value);
        }
    }
    Ok((!inputs.is_empty()).then_some(inputs))
}

/// What a step taking an output artifact of `fan` (a step that fans out, done) is given: the
/// name of each item's succeeded Job (the attempt that succeeded), in item order, empty for
/// an item that has none (failed, its failure tolerated), as a JSON list. The Job builder
/// makes each the artifact's key in the store ([`crate::agent::artifact_key`]), as the item's
/// agent did: the keys follow from the Jobs alone, so every pass finds the same.
/// `None` when its items are not known.
pub(super) fn fan_in_jobs(fan: &Fan<'_>) -> Option<String> {
    let items = fan.items.as_ref()?;
    let jobs: Vec<&str> = (0..items.len() as u32)
        .map(|item| {
            (fan.jobs.get(&item))
                .filter(|job| job.state == JobState::Succeeded)
                .map_or("", |job| job.name.as_str())
        })
        .collect();
    Some(serde_json::to_string(&jobs).expect("names serialize"))
}

/// The output `key` of `fan` (a step that fans out, done) as a later step reads it: a JSON list
/// of its succeeded items' values, in item order ([`fan_out::aggregate`]); an item without the
/// output adds nothing, as in Argo; `parameters`, every item's parameters as an object
/// ([`fan_out::aggregate_parameters`]). `None` when its items are not known.
pub(super) fn aggregate(fan: &Fan<'_>, key: &str) -> Option<String> {
    let items = fan.items.as_ref()?;
    if key == outputs::ALL_PARAMETERS {
        let each = (0..items.len() as u32).filter_map(|item| fan.outputs.get(&item).copied());
        return Some(fan_out::aggregate_parameters(each));
    }
    let values = (0..items.len() as u32)
        .filter_map(|item| fan.outputs.get(&item)?.get(key).map(String::as_str));
    Some(fan_out::aggregate(key == crate::agent::RESULT, values))
}

/// The items of the step fanning out as `fan_out` (`step` of `dag`), given the known outputs
/// and the steps that fan out seen so far: `None` while the step whose output they come from
/// (a `withParam`'s, a `withSequence` bound's) has not told it.
///
/// # Errors
/// Why that output is not its items, for the step's failure: a `withParam` that is not a JSON
/// list, a bound that is not a whole number, an output the step did not write.
pub(super) fn items_of<'a>(
    step: &'a Step,
    fan_out: &FanOut,
    dag: &Dag,
    known: (&HashMap<usize, &Outputs>, &HashMap<usize, Fan<'_>>),
) -> Result<Option<ItemList<'a>>, String> {
    match fan_out {
        FanOut::Items(_) | FanOut::Sequence { .. } => Ok(ItemList::of_spec(step, fan_out)),
        FanOut::Param { step: source, key } => {
            let param = step.with_param.as_deref().map_or("", |p| p.0.trim());
            let Some(text) = output_text(*source, key, dag, known)
                .map_err(|why| format!("withParam {param}: {why}"))?
            else {
                return Ok(None);
            };
            fan_out::parse_param(&text)
                .map(|items| Some(ItemList::Param(items)))
                .map_err(|why| format!("withParam {param} {why}"))
        }
        FanOut::OutputSequence(sequence) => {
            let numbers = sequence.numbers(|source, key| {
                Ok(output_text(source, key, dag, known)?.map(Cow::into_owned))
            })?;
            Ok(numbers.map(|numbers| ItemList::numbers(step, numbers)))
        }
    }
}

/// The text of output `key` of step `source` (of `dag`) as a later step's fan-out reads it,
/// from the `known` outputs and steps that fan out: of a step that fans out, its items'
/// outputs as a list once they all ended. `None` while the step has not told it.
///
/// # Errors
/// The step (done) did not write the output.
fn output_text<'k>(
    source: usize,
    key: &str,
    dag: &Dag,
    (outputs, fans): (&'k HashMap<usize, &Outputs>, &HashMap<usize, Fan<'_>>),
) -> Result<Option<Cow<'k, str>>, String> {
    if let Some(fan) = fans.get(&source) {
        if !fan.ended() {
            return Ok(None);
        }
        return Ok(Some(Cow::Owned(
            aggregate(fan, key).unwrap_or_else(|| "[]".into()),
        )));
    }
    let Some(outputs) = outputs.get(&source) else {
        return Ok(None);
    };
    match outputs.get(key) {
        Some(text) => Ok(Some(Cow::Borrowed(text.as_str()))),
        None => Err(format!(
            "step {:?} wrote no output {key:?}",
            dag.name(source)
        )),
    }
}

/// The first `{{item.FIELD}}` of `step` (its `when` too) that `item` cannot fill, as the
/// item's failure.
pub(super) fn item_unresolved(step: &Step, item: &serde_json::Value) -> Option<String> {
    let when = step.when.as_deref();
    (data_flow::texts(step).chain(when)).find_map(|text| {
        outputs::substitute(text, |_, _| Some(""), Some(item))
            .err()
            .map(|e| e.to_string())
    })
}
