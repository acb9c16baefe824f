//! One tick of a CronWorkFlow: read its runs, plan (pure), then write.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube_kopf::{Context, HandlerError, HandlerResult};
use serde_json::json;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{CronWorkFlow, Shutdown};
use workflow_operator_core::cron::run_summary::RunSummary;
use workflow_operator_core::cron::{
    self,
    plan::{self, Run},
};
use workflow_operator_core::names;

use super::LABEL_CRON;
use super::unseen::{Unseen, Wrote};
use crate::controllers::{FIELD_MANAGER, RequestFailed, exists_already};

/// Plans and carries out one tick of `ctx`'s CronWorkFlow.
pub async fn tick(unseen: Arc<Unseen>, ctx: Context<CronWorkFlow>) -> HandlerResult {
    let cron = current(&ctx, &unseen).await?;
    carry_out(&unseen, &ctx, &cron).await
}

/// Ticks `ctx`'s CronWorkFlow when a change among `changed` (its runs, as the watch brings
/// them) is one its status must follow at once ([`plan::follows_run`]): a run's end leaves
/// `active`, moves `lastSuccessfulTime` and the history limits apply within moments of it,
/// suspended or not, rather than at the next scheduled time. Only this CronWorkFlow and its
/// runs are read, from the caches; a run's progress between its start and its end costs a
/// look at the status.
pub async fn runs_changed(
    unseen: Arc<Unseen>,
    ctx: Context<CronWorkFlow>,
    changed: Vec<Arc<RunSummary>>,
) -> HandlerResult {
    let known = as_written(&ctx.object, &unseen);
    let changed = owned_runs(&known, changed.iter().map(|r| &**r));
    let mirrored = || owned_runs(&known, ctx.children::<RunSummary>().iter().map(|r| &**r));
    if !changed
        .iter()
        .any(|run| plan::follows_run(&known, run, mirrored))
    {
        return Ok(());
    }
    let cron = current(&ctx, &unseen).await?;
    carry_out(&unseen, &ctx, &cron).await
}

/// `cached` with the status this operator's ticks wrote last where the cache does not show it
/// yet. A run's events follow the tick that created it closely, before the watch of the
/// CronWorkFlows shows that tick's status: deciding on the status as written, rather than
/// reading the CronWorkFlow from the API ([`current`]) for each event, costs no request. A
/// tick, when one is needed, reads it as ever.
fn as_written(cached: &Arc<CronWorkFlow>, unseen: &Unseen) -> Arc<CronWorkFlow> {
    let uid = cached.uid().unwrap_or_default();
    match unseen.written_status(&uid, cached.status.as_ref()) {
        Some(status) => {
            let mut cron = (**cached).clone();
            cron.status = Some(status);
            Arc::new(cron)
        }
        None => cached.clone(),
    }
}

/// Plans one tick of `cron` (as [`current`] read it) from its runs, and carries it out.
async fn carry_out(
    unseen: &Unseen,
    ctx: &Context<CronWorkFlow>,
    cron: &CronWorkFlow,
) -> HandlerResult {
    let cron_uid = cron.uid().unwrap_or_default();
    let namespace = cron.namespace().unwrap_or_default();
    let workflows: Api<WorkFlow> = Api::namespaced(ctx.client.clone(), &namespace);
    let runs = runs_of(ctx, cron, unseen).await?;
    let decided = plan::tick(cron, &runs, Timestamp::now());
    for name in &decided.terminate {
        let patch = json!({"spec": {"shutdown": Shutdown::Terminate.as_str()}});
        workflows
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| RequestFailed::new(format!("terminating run {name}"), e))?;
        unseen.note(&cron_uid, name, Wrote::Terminated);
    }
    for &scheduled in &decided.create {
        create_run(ctx, cron, &workflows, unseen, scheduled).await?;
    }
    for name in &decided.delete {
        match workflows.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(RequestFailed::new(format!("deleting run {name}"), e).into()),
        }
        unseen.note(&cron_uid, name, Wrote::Deleted);
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
        .map_err(|e| RequestFailed::new("writing the status", e))?;
        unseen.note_status(&cron_uid, &status);
    }
    Ok(())
}

/// `ctx`'s CronWorkFlow: as cached when the cache shows the status the last tick wrote, else
/// read from the API ([`Unseen`]).
async fn current(
    ctx: &Context<CronWorkFlow>,
    unseen: &Unseen,
) -> Result<Arc<CronWorkFlow>, HandlerError> {
    let cached = &ctx.object;
    let cron_uid = cached.uid().unwrap_or_default();
    if unseen.status_shown(&cron_uid, cached.status.as_ref()) {
        return Ok(cached.clone());
    }
    let api: Api<CronWorkFlow> =
        Api::namespaced(ctx.client.clone(), &cached.namespace().unwrap_or_default());
    let read = api
        .get(&cached.name_any())
        .await
        .map_err(|e| RequestFailed::new("reading the CronWorkFlow", e))?;
    unseen.settle_status(&cron_uid, read.status.as_ref());
    Ok(Arc::new(read))
}

/// The CronWorkFlow's runs: from the watch's mirror when it shows this operator's writes to
/// them ([`Unseen`]), else read from the API.
async fn runs_of(
    ctx: &Context<CronWorkFlow>,
    cron: &CronWorkFlow,
    unseen: &Unseen,
) -> Result<Vec<Run>, HandlerError> {
    let cron_uid = cron.uid().unwrap_or_default();
    let mirrored = owned_runs(cron, ctx.children::<RunSummary>().iter().map(|r| &**r));
    if unseen.all_shown(&cron_uid, &mirrored) {
        return Ok(mirrored);
    }
    let api: Api<RunSummary> =
        Api::namespaced(ctx.client.clone(), &cron.namespace().unwrap_or_default());
    let selector = format!("{LABEL_CRON}={}", names::label_value(&cron.name_any()));
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| RequestFailed::new("listing the runs", e))?;
    let listed = owned_runs(cron, listed.items.iter());
    unseen.settle(&cron_uid, &mirrored, &listed);
    Ok(listed)
}

/// The runs among `workflows` that `cron` owns (by uid: not those of an earlier CronWorkFlow
/// of the same name).
fn owned_runs<'a>(
    cron: &CronWorkFlow,
    workflows: impl Iterator<Item = &'a RunSummary>,
) -> Vec<Run> {
    let uid = cron.uid().unwrap_or_default();
    workflows
        .filter(|w| w.owner_references().iter().any(|o| o.uid == uid))
        .filter_map(RunSummary::run)
        .collect()
}

/// Creates the run of `scheduled`; one that exists already (a repeated tick, another replica)
/// is success.
async fn create_run(
    ctx: &Context<CronWorkFlow>,
    cron: &CronWorkFlow,
    workflows: &Api<WorkFlow>,
    unseen: &Unseen,
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
        Ok(created) => {
            let cron_uid = cron.uid().unwrap_or_default();
            unseen.note(&cron_uid, &name, Wrote::Created { uid: created.uid() });
            let at = Timestamp::from_second(scheduled)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let message = format!("started run {name} for {at}");
            if let Err(error) = ctx.publish(EventType::Normal, "RunStarted", &message).await {
                tracing::warn!(%error, "posting a CronWorkFlow event");
            }
            Ok(())
        }
        // Started before (the name is the scheduled time's): once per time. Any other
        // answer, a 409 Conflict too, started nothing: the tick tries again.
        Err(e) if exists_already(&e) => Ok(()),
        Err(e) => Err(RequestFailed::new(format!("creating run {name}"), e).into()),
    }
}
