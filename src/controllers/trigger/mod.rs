//! The WorkFlowTrigger controller: the trigger's status (its source, its runs, the last
//! delivery, `Ready`) and its history limits, followed from its runs. It starts no run: the
//! receiver (`crate::triggers`) does, on every replica; this runs on the leader only.
//!
//! The runs are mirrored (a watch of the WorkFlows with the trigger label); a change of any of
//! them, and of the trigger's spec, recomputes the status from the trigger and the runs that
//! exist (`workflow_operator_core::trigger::status`), deletes the finished runs beyond the
//! limits, and writes the status when it changed.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube_kopf::{Children, Context, HandlerResult, Registry};
use serde_json::json;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::cron::plan::Run;
use workflow_operator_core::cron::run_summary::RunSummary;
use workflow_operator_core::trigger::status;

use crate::controllers::RequestFailed;

/// The WorkFlowTrigger handlers; its runs are the WorkFlows `runs_selector` selects
/// (`LABEL_TRIGGER`, and the shard when the replica holds one).
pub fn table(
    registry: Registry<WorkFlowTrigger>,
    runs_selector: &str,
) -> Registry<WorkFlowTrigger> {
    let runs = Children::<RunSummary>::owned().labels(runs_selector);
    registry
        .on_children(
            "follow-runs",
            runs,
            |ctx, _changed: Vec<Arc<RunSummary>>| follow(ctx),
        )
        .on_create("ready", follow)
        .on_update_field("spec", "recheck", follow)
        .on_resume("resume", follow)
}

/// Recomputes `ctx`'s trigger's status from its runs, and applies its history limits.
async fn follow(ctx: Context<WorkFlowTrigger>) -> HandlerResult {
    let trigger = &ctx.object;
    let uid = trigger.uid().unwrap_or_default();
    let runs: Vec<Run> = ctx
        .children::<RunSummary>()
        .iter()
        .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(|r| r.run())
        .collect();
    let decided = status::follow(trigger, &runs, Timestamp::now());
    let namespace = trigger.namespace().unwrap_or_default();
    let workflows: Api<WorkFlow> = Api::namespaced(ctx.client.clone(), &namespace);
    for name in &decided.delete {
        match workflows.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(RequestFailed::new(format!("deleting run {name}"), e).into()),
        }
    }
    if let Some(status) = decided.status {
        let api: Api<WorkFlowTrigger> = Api::namespaced(ctx.client.clone(), &namespace);
        // `add /status` replaces the whole status: a field the new one lacks is removed.
        let patch = json!([{"op": "add", "path": "/status", "value": status}]);
        let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
        api.patch_status(
            &trigger.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| RequestFailed::new("writing the status", e))?;
    }
    Ok(())
}
