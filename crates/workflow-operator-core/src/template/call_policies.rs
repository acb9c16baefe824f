//! What a `dag` or `steps` template says of the steps a call of it becomes, besides the steps
//! themselves: which of them run (`target`, a dag's), how many of them at once
//! (`parallelism`), and which of their outputs are the workflow's (a template output's
//! `globalName`, given to the inner output it names).

use std::collections::{BTreeSet, HashMap};

use super::call_outputs::Outputs;
use super::fill::{self, Vars, listed};
use crate::crd::{SemaphoreRef, Step, Synchronization, Template};
use crate::outputs;

/// The steps of `dag` (`template`'s, as written) a call runs: with a `target` (its forms
/// filled from `vars`), the targets and every step they depend on, in the template's order;
/// without one (or an empty one), all.
///
/// # Errors
/// A target that is not a step of the template, or one set on a `steps` template.
pub(super) fn targeted(
    template: &Template,
    dag: &[Step],
    vars: &Vars,
) -> Result<Vec<Step>, String> {
    let Some(target) = template.target.as_deref() else {
        return Ok(dag.to_vec());
    };
    if template.dag.is_none() {
        return Err(
            "target: only a dag template has targets (a steps template runs its groups in order)"
                .into(),
        );
    }
    let mut unfilled = Vec::new();
    let target = fill::fill(target, vars, &mut unfilled);
    if let Some((form, why)) = unfilled.first() {
        return Err(format!("target: {form}: {why}"));
    }
    let names: Vec<&str> = target.split_whitespace().collect();
    if names.is_empty() {
        return Ok(dag.to_vec());
    }
    let by_name: HashMap<&str, &Step> = dag.iter().map(|s| (s.step_name.as_str(), s)).collect();
    let mut wanted = BTreeSet::new();
    let mut todo: Vec<&str> = Vec::new();
    for name in names {
        if !by_name.contains_key(name) {
            return Err(format!(
                "target {name:?} is not a step of it ({})",
                listed("its steps", dag.iter().map(|s| s.step_name.as_str()))
            ));
        }
        todo.push(name);
    }
    while let Some(name) = todo.pop() {
        if !wanted.insert(name) {
            continue;
        }
        // A dependency outside the template is refused before this, naming it.
        if let Some(step) = by_name.get(name) {
            todo.extend(step.depends_on.iter().map(String::as_str));
        }
    }
    Ok(dag
        .iter()
        .filter(|s| wanted.contains(s.step_name.as_str()))
        .cloned()
        .collect())
}

/// Holds `steps` (one call's) to at most `limit` running at once: a semaphore of that limit
/// named after the call (`call`) and the workflow (`workflow`: name and uid), so no other
/// call or workflow shares it, on each step that runs a pod.
pub(super) fn limit_parallelism(
    steps: &mut [Step],
    limit: i32,
    call: &str,
    (name, uid): (Option<&String>, Option<&String>),
) {
    let semaphore = SemaphoreRef {
        name: format!(
            "{}/{call} parallelism {}",
            name.map_or("", String::as_str),
            uid.map_or("", String::as_str)
        ),
        limit: Some(limit.into()),
        limit_from: None,
    };
    for step in steps
        .iter_mut()
        .filter(|s| s.suspend.is_none() && s.fail.is_none())
    {
        step.synchronization
            .get_or_insert_with(|| Box::new(Synchronization::default()))
            .semaphores
            .push(semaphore.clone());
    }
}

/// Gives each output of a call with a `globalName` (`outputs`) to the inner output it names,
/// declared on the inner step (one of `steps`), where the workflow's outputs are read from.
///
/// # Errors
/// An output with a `globalName` taken from an output its step does not declare (`result`, a
/// `$WORKFLOW_OUTPUTS` line), or from one that has another `globalName` already.
pub(super) fn global_names(steps: &mut [Step], outputs: &Outputs) -> Result<(), String> {
    for (key, alias) in outputs {
        let Some(global) = &alias.global_name else {
            continue;
        };
        let step = steps.iter_mut().find(|s| s.step_name == alias.step);
        let declared = step.and_then(|s| s.outputs.as_deref_mut());
        let slot = match alias.key.strip_prefix(outputs::ARTIFACT_PREFIX) {
            Some(artifact) => declared
                .and_then(|o| o.artifacts.iter_mut().find(|a| a.name == artifact))
                .map(|a| &mut a.global_name),
            None => declared
                .and_then(|o| o.parameters.iter_mut().find(|p| p.name == alias.key))
                .map(|p| &mut p.global_name),
        };
        let shown = key.strip_prefix(outputs::ARTIFACT_PREFIX).unwrap_or(key);
        match slot {
            None => {
                return Err(format!(
                    "output {shown:?} has globalName {global:?} but is taken from {:?} of step {:?}, which the step does not declare in its outputs: a global output is a declared one",
                    alias.key, alias.step
                ));
            }
            Some(Some(other)) if other != global => {
                return Err(format!(
                    "output {shown:?} has globalName {global:?}, but the output of step {:?} it is taken from is global as {other:?} already",
                    alias.step
                ));
            }
            Some(slot) => *slot = Some(global.clone()),
        }
    }
    Ok(())
}
