//! Recursion: a template that calls itself, or calls a template that calls it back, under a
//! `when` (Argo's coinflip-recursive: flip until heads). Argo expands such a call as the run
//! goes. Here templates are expanded before anything is planned (the planner runs plain steps,
//! and the run id hashes them), so a recursive call is unrolled up to [`DEPTH_LIMIT`] calls
//! deep: each level's `when` still decides at run time whether the next level runs. The call
//! that would go deeper becomes a step that fails (`fail`, no pod) naming the limit, under the
//! same `when`, so a run that stops recursing in time completes as in Argo, and one that would
//! recurse further fails the workflow saying why. A cycle with no `when` on any of its calls
//! could never stop and is refused as a template cycle.

use serde_json::json;

use crate::crd::Step;

/// How many times a template may be on the stack of calls at once: its first call and nine
/// recursive ones. Each level is a copy of the template's steps, so a template that calls
/// itself twice per level makes up to 2^10 copies: the limit keeps that within what the
/// planner handles.
pub const DEPTH_LIMIT: usize = 10;

/// What a recursive call of `key` (its name in the cycle's terms) at the depth limit becomes:
/// a step under the call's `when` that fails naming the limit.
pub(super) fn limit_step(call: &Step, key: &str) -> Step {
    let why = format!(
        "recursion depth limit reached: template {key} is already {DEPTH_LIMIT} calls deep \
         (templates are unrolled before the run, up to {DEPTH_LIMIT} calls)"
    );
    serde_json::from_value(json!({
        "stepName": call.step_name,
        "dependsOn": call.depends_on,
        "when": call.when,
        "fail": why,
    }))
    .expect("a plain step")
}

/// Whether a call of `key`, already called on `stack` (outermost first), may recurse:
/// `guarded`, a call on the cycle (this one, or one inside the template since its last call)
/// has a `when` that can stop it. `Ok(true)` to expand it once more, `Ok(false)` at the limit.
pub(super) fn may_recurse(guarded: bool, stack: &[String], key: &str) -> Result<bool, String> {
    if !guarded {
        return Err(
            "a template may call itself only under a `when` (that stops the recursion)".into(),
        );
    }
    let depth = stack.iter().filter(|k| *k == key).count();
    Ok(depth < DEPTH_LIMIT)
}
