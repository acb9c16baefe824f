//! Lifecycle hooks (Argo's `hooks`) made steps, before the calls are expanded: a hook is a
//! call of its template, a step of its own, so the planner runs it as any step and a hook runs
//! at most once (its Job's name is its step's).
//!
//! - A step's hook `STEP.hooks.NAME` whose `expression` holds while the step runs (evaluated
//!   here with `steps.STEP.status == "Running"`) starts with the step: the step's `dependsOn`
//!   and `when`. Any other (and `exit`) runs once the step ended: it depends on the step, with
//!   its `expression` as its `when`, and the planner starts it after the step's failure too
//!   ([`after`]). Each tolerates its own failure (`continueOn.failed`), as Argo's hook nodes
//!   do not fail their step group, and the steps after the step depend on its hooks too (Argo
//!   waits for a task's hooks before its dependents).
//! - The workflow's hook `hooks.NAME` whose `expression` holds while the workflow runs
//!   (`workflow.status == "Running"`) is a step with no dependencies; any other an exit step
//!   with the expression as its `when`. `exit` is an exit step that, as any exit step, fails
//!   the workflow when it fails; the others tolerate their failure.
//!
//! What is left on a step of its `hooks` is their names, so that the planner finds the hooks
//! that run after it whatever its result: [`after`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::json;

use crate::crd::hooks::EXIT;
use crate::crd::{ContinueOn, Hooks, LifecycleHook, Step, WorkFlowSpec};
use crate::when::{Place, Run, Upstream, When};

/// The name of hook `name` of step `step` (of the workflow when `None`).
pub fn hook_step_name(step: Option<&str>, name: &str) -> String {
    match step {
        Some(step) => format!("{step}.hooks.{name}"),
        None => format!("hooks.{name}"),
    }
}

/// `steps` (of the template called at `at`) with each step's hooks made steps after it (and
/// its dependents after them), the step keeping only its hooks' names; `steps` as they are
/// when none has hooks.
///
/// # Errors
/// Every hook that cannot be made a step, naming it.
pub(super) fn unfold<'s>(steps: &'s [Step], at: &str) -> Result<Cow<'s, [Step]>, Vec<String>> {
    if steps.iter().all(|s| s.hooks.is_none()) {
        return Ok(Cow::Borrowed(steps));
    }
    let mut problems = Vec::new();
    let mut out: Vec<Step> = steps.to_vec();
    // The hook steps of each hooked step, to be depended on by its dependents.
    let mut hooked: HashMap<String, Vec<String>> = HashMap::new();
    let mut added = Vec::new();
    for step in &mut out {
        let Some(hooks) = step.hooks.take() else {
            continue;
        };
        let mut names = Hooks::new();
        for (name, hook) in hooks.iter() {
            let at = format!("step {:?}: hooks.{name}", format!("{at}{}", step.step_name));
            match step_hook(step, name, hook) {
                Ok(made) => {
                    (hooked.entry(step.step_name.clone()).or_default())
                        .push(made.step_name.clone());
                    added.push(made);
                }
                Err(why) => problems.push(format!("{at}: {why}")),
            }
            names.insert(name.clone(), LifecycleHook::default());
        }
        step.hooks = Some(Box::new(names));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    for step in &mut out {
        let extra: Vec<String> = (step.depends_on.iter())
            .filter_map(|d| hooked.get(d))
            .flatten()
            .cloned()
            .collect();
        step.depends_on.extend(extra);
    }
    out.extend(added);
    Ok(Cow::Owned(out))
}

/// The step hook `name` of `step` makes.
fn step_hook(step: &Step, name: &str, hook: &LifecycleHook) -> Result<Step, String> {
    let expression = checked(name, hook)?;
    if step.with_items.is_some() || step.with_param.is_some() || step.with_sequence.is_some() {
        return Err("the hooks of a step that fans out are not supported yet".into());
    }
    let mut made = call(hook_step_name(Some(&step.step_name), name), hook)?;
    made.continue_on = Some(ContinueOn { failed: true });
    let upstream = HashMap::from([(
        step.step_name.as_str(),
        Upstream {
            phase: "Running",
            outputs: None,
            ended: None,
        },
    )]);
    if expression.is_some_and(|e| holds_running(e, &upstream)) {
        made.depends_on = step.depends_on.clone();
        made.when = step.when.clone();
    } else {
        made.depends_on = vec![step.step_name.clone()];
        made.when = expression.map(Into::into);
    }
    Ok(made)
}

/// `spec`'s steps and exit steps with its hooks made steps: `(containers, on_exit)`.
///
/// # Errors
/// Every hook that cannot be made a step, naming it.
pub(super) fn unfold_workflow(spec: &WorkFlowSpec) -> Result<(Vec<Step>, Vec<Step>), Vec<String>> {
    let mut containers = spec.containers.clone();
    let mut on_exit = spec.on_exit.clone();
    let mut problems = Vec::new();
    for (name, hook) in &spec.hooks {
        let made = checked(name, hook).and_then(|expression| {
            let mut made = call(hook_step_name(None, name), hook)?;
            let with_run = expression.is_some_and(|e| holds_running(e, &HashMap::new()));
            made.when = (!with_run).then(|| expression.map(Into::into)).flatten();
            if name != EXIT {
                made.continue_on = Some(ContinueOn { failed: true });
            }
            Ok((made, with_run))
        });
        match made {
            Ok((made, true)) => containers.push(made),
            Ok((made, false)) => on_exit.push(made),
            Err(why) => problems.push(format!("spec.hooks.{name}: {why}")),
        }
    }
    if problems.is_empty() {
        Ok((containers, on_exit))
    } else {
        Err(problems)
    }
}

/// The expression of hook `name`, checked: required but for `exit`, and a template called.
fn checked<'h>(name: &str, hook: &'h LifecycleHook) -> Result<Option<&'h str>, String> {
    if name.is_empty() {
        return Err("a hook's name may not be empty".into());
    }
    if hook.template.is_empty() {
        return Err("template: required (the template the hook calls)".into());
    }
    match hook.expression.as_deref() {
        Some(e) if e.trim().is_empty() => Err("expression: may not be empty".into()),
        None if name != EXIT => Err(format!(
            "expression: required (only the {EXIT:?} hook runs without one)"
        )),
        expression => Ok(expression),
    }
}

/// A step named `name` calling the hook's template with its arguments.
fn call(name: String, hook: &LifecycleHook) -> Result<Step, String> {
    let mut made: Step = serde_json::from_value(json!({
        "stepName": name,
        "template": hook.template,
    }))
    .map_err(|e| e.to_string())?;
    made.arguments = hook.arguments.clone();
    Ok(made)
}

/// Whether `expression` holds while its workflow (status `Running`) and the steps of
/// `upstream` run; an expression that reads anything else does not (it is decided at the end).
fn holds_running(expression: &str, upstream: &HashMap<&str, Upstream<'_>>) -> bool {
    When::compile_for(expression, &BTreeMap::new(), Place::Exit)
        .and_then(|when| {
            let run = Run {
                status: Some("Running"),
                duration: 0.0,
                failures: None,
            };
            when.evaluate_in(upstream, run, None)
        })
        .unwrap_or(false)
}

/// The hooks of `steps` (by index) that run once their step ended, whatever its result: each
/// step's hook whose step depends on it alone. The planner starts them after its failure too.
pub fn after(steps: &[Step]) -> HashMap<usize, Vec<usize>> {
    let index: HashMap<&str, usize> = (steps.iter().enumerate())
        .map(|(i, s)| (s.step_name.as_str(), i))
        .collect();
    let mut after: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        let Some(hooks) = &step.hooks else { continue };
        let names: HashSet<String> = (hooks.keys())
            .map(|name| hook_step_name(Some(&step.step_name), name))
            .collect();
        for name in &names {
            if let Some(&h) = index.get(name.as_str())
                && steps[h].depends_on == [step.step_name.as_str()]
            {
                after.entry(i).or_default().push(h);
            }
        }
        if let Some(list) = after.get_mut(&i) {
            list.sort_unstable();
        }
    }
    after
}
