//! One tick of a CronWorkFlow: read its runs, plan (pure), then write.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube_kopf::{Context, HandlerError, HandlerResult};
use serde_json::json;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{CronWorkFlow, Shutdown};
use workflow_operator_core::cron::{
    self,
    plan::{self, Run},
};
use workflow_operator_core::names;

use super::{LABEL_CRON, LABEL_SCHEDULED};
use crate::controllers::{FIELD_MANAGER, temporary};

/// Plans and carries out one tick of `ctx`'s CronWorkFlow.
pub async fn tick(ctx: Context<CronWorkFlow>) -> HandlerResult {
    let cron = ctx.object.clone();
    let namespace = cron.namespace().unwrap_or_default();
    let workflows: Api<WorkFlow> = Api::namespaced(ctx.client.clone(), &namespace);
    let runs = runs_of(&workflows, &cron).await?;
    let decided = plan::tick(&cron, &runs, Timestamp::now());
    for name in &decided.terminate {
        let patch = json!({"spec": {"shutdown": Shutdown::Terminate.as_str()}});
        workflows
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| temporary(&format!("terminating run {name}"), e))?;
    }
    for &scheduled in &decided.create {
        create_run(&ctx, &workflows, &cron, scheduled).await?;
    }
    for name in &decided.delete {
        match workflows.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(temporary(&format!("deleting run {name}"), e)),
        }
    }
    for (reason, message) in &decided.events {
        let type_ = if *reason == "RunStarted" {
            EventType::Normal
        } else {
            EventType::Warning
        };
        if let Err(error) = ctx.publish(type_, reason, message).await {
            tracing::warn!(%error, "posting a CronWorkFlow event");
        }
    }
    if let Some(status) = decided.status {
        let api: Api<CronWorkFlow> = Api::namespaced(ctx.client.clone(), &namespace);
        // `add /status` replaces the whole status: a field the new one lacks is removed.
        let patch = json!([{"op": "add", "path": "/status", "value": status}]);
        let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
        api.patch_status(
            &cron.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(|e| temporary("writing the status", e))?;
    }
    Ok(())
}

/// The CronWorkFlow's runs: the WorkFlows with its label that it owns (by uid).
async fn runs_of(workflows: &Api<WorkFlow>, cron: &CronWorkFlow) -> Result<Vec<Run>, HandlerError> {
    let selector = format!("{LABEL_CRON}={}", names::label_value(&cron.name_any()));
    let listed = workflows
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| temporary("listing the runs", e))?;
    let uid = cron.uid().unwrap_or_default();
    Ok(listed
        .items
        .into_iter()
        .filter(|w| w.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(|w| {
            let scheduled = w.labels().get(LABEL_SCHEDULED)?.parse().ok()?;
            let status = w.status.as_ref();
            Some(Run {
                name: w.name_any(),
                uid: w.uid(),
                scheduled,
                phase: status.and_then(|s| s.workflow_status),
                finished_at: status
                    .and_then(|s| s.status_changed.as_deref())
                    .and_then(|t| t.parse().ok()),
                terminating: w.spec.shutdown == Some(Shutdown::Terminate),
            })
        })
        .collect())
}

/// Creates the run of `scheduled`; one that exists already (a repeated tick, another replica)
/// is success.
async fn create_run(
    ctx: &Context<CronWorkFlow>,
    workflows: &Api<WorkFlow>,
    cron: &CronWorkFlow,
    scheduled: i64,
) -> HandlerResult {
    let workflow = cron::run_of(cron, scheduled).map_err(HandlerError::permanent)?;
    let name = workflow.name_any();
    match workflows
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            },
            &workflow,
        )
        .await
    {
        Ok(_) => {
            let at = Timestamp::from_second(scheduled)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let message = format!("started run {name} for {at}");
            if let Err(error) = ctx.publish(EventType::Normal, "RunStarted", &message).await {
                tracing::warn!(%error, "posting a CronWorkFlow event");
            }
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(temporary(&format!("creating run {name}"), e)),
    }
}
