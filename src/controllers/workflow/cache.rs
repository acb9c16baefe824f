//! Cached steps (`cache`), the client side of `workflow_operator_core::cache`. Before a pass
//! creates the Job of a cached step, [`look_up`] reads its entry (one GET of the ConfigMap its
//! key names); a fresh entry is a hit, handed to the planner (`plan::Gate::cached`), which
//! records the step `Succeeded` from it (reason `Cached`, recorded in the status and never
//! looked up again) and creates no Job, and an Event says so. After a cached step's Job
//! succeeded and its outputs are recorded, [`write`] creates its entry (replacing one too old
//! for the step), once per Job per process; a restarted operator writes again and is answered
//! 409. A failed step writes nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};
use kube_kopf::Context;

use workflow_operator_core::cache::{Entry, Key, LABEL_CACHE, key_of};
use workflow_operator_core::crd::numbers::parse_duration;
use workflow_operator_core::crd::{Step, StepStatus, WorkFlow};
use workflow_operator_core::fan_out;
use workflow_operator_core::plan::{Action, Compiled, JobState, Plan};

use super::decide::Decided;
use super::memory::CacheWrites;
use crate::controllers::{FIELD_MANAGER, RequestFailed, exists_already};

/// The cache hits of the cached steps the decided plan would start: each step's status entry
/// as the planner is to record it. Posts an Event per hit.
///
/// # Errors
/// An entry that could not be read (temporary).
pub(super) async fn look_up(
    ctx: &Context<WorkFlow>,
    decided: &Decided,
) -> Result<Vec<StepStatus>, RequestFailed> {
    if !decided.seen.compiled.policies.cache {
        return Ok(Vec::new());
    }
    // Boxed: every pass of every workflow awaits this, and a future holds those it awaits.
    Box::pin(look_up_cached(ctx, decided)).await
}

/// [`look_up`] for a workflow with cached steps.
async fn look_up_cached(
    ctx: &Context<WorkFlow>,
    decided: &Decided,
) -> Result<Vec<StepStatus>, RequestFailed> {
    let (workflow, compiled) = (
        decided.seen.workflow.as_ref(),
        decided.seen.compiled.as_ref(),
    );
    let plan = &decided.decision.plan;
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut hits = Vec::new();
    for (step, job, key, name) in cached_creates((workflow, compiled), plan) {
        let Some(entry) = read(&api, &key).await? else {
            continue;
        };
        if !entry.fresh(max_age(step), Timestamp::now()) {
            continue;
        }
        let hit = entry.status(&name, &job);
        let message = format!(
            "step {name}: {}",
            hit.message.as_deref().unwrap_or_default()
        );
        if let Err(error) = ctx.publish(EventType::Normal, "StepCached", &message).await {
            tracing::warn!(%error, "posting a StepCached Event");
        }
        hits.push(hit);
    }
    Ok(hits)
}

/// The cached steps `plan` creates Jobs for: (step, Job, key, name in the status). Not items
/// of a step that fans out nor exit steps (refused at create).
fn cached_creates<'w>(
    (workflow, compiled): (&'w WorkFlow, &Compiled),
    plan: &Plan,
) -> Vec<(&'w Step, String, Key, String)> {
    let runs = workflow.spec.run_count();
    (plan.actions.iter())
        .filter_map(|action| {
            let Action::CreateJob {
                step,
                job_name,
                exit: None,
                inputs,
                instance,
                ..
            } = action
            else {
                return None;
            };
            let (_, found) = compiled.step(&workflow.spec, step, false)?;
            found.cache.as_ref()?;
            let name = fan_out::display_name(step, instance.run_index, runs, None);
            Some((found, job_name.clone(), key_of(found, inputs, None), name))
        })
        .collect()
}

fn max_age(step: &Step) -> Option<SignedDuration> {
    let age = step.cache.as_ref()?.max_age.as_ref()?;
    parse_duration(age).ok()
}

async fn read(api: &Api<ConfigMap>, key: &Key) -> Result<Option<Entry>, RequestFailed> {
    let found = api
        .get_opt(&key.entry_name())
        .await
        .map_err(|e| RequestFailed::new("reading a cache entry", e))?;
    Ok(found.and_then(|map| Entry::from_data(map.data.as_ref()?)))
}

/// Writes the entry of each cached step whose Job succeeded and whose outputs the status (the
/// plan's, else the workflow's) records. Only a pass that observed the Jobs in full has any: a
/// workflow with cached steps is always planned in full (`cache` is `InFull` in the core's
/// `fields`).
///
/// # Errors
/// An entry that could not be written (temporary).
pub(super) async fn write(
    written: &CacheWrites,
    client: &Client,
    decided: &Decided,
) -> Result<(), RequestFailed> {
    let Some(observed) = &decided.jobs else {
        return Ok(());
    };
    let (workflow, plan) = (&decided.seen.workflow, &decided.decision.plan);
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let status = plan.status.as_ref().or(workflow.status.as_ref());
    let recorded = status.map(|s| s.steps.as_slice()).unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    for job in observed {
        let (JobState::Succeeded, Some(hash)) = (&job.state, &job.cache_key) else {
            continue;
        };
        let Some(entry) = recorded
            .iter()
            .find(|s| s.job.as_deref() == Some(&job.name))
        else {
            continue;
        };
        if !written.mark(&uid, &job.name) {
            continue;
        }
        let step = workflow
            .spec
            .containers
            .iter()
            .find(|s| s.step_name == job.step);
        let cached = Entry {
            outputs: entry.outputs.clone(),
            from: format!("{namespace}/{} step {}", workflow.name_any(), entry.name),
            created: job.finished_at.unwrap_or_else(Timestamp::now),
        };
        let key = Key { hash: hash.clone() };
        if let Err(error) = put(&api, &key, &cached, step.and_then(max_age)).await {
            written.unmark(&uid, &job.name);
            return Err(error);
        }
    }
    Ok(())
}

/// Creates the entry of `key`; one that exists is kept unless too old for `max_age`.
async fn put(
    api: &Api<ConfigMap>,
    key: &Key,
    entry: &Entry,
    max_age: Option<SignedDuration>,
) -> Result<(), RequestFailed> {
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(key.entry_name()),
            labels: Some(BTreeMap::from([(LABEL_CACHE.to_string(), key.label())])),
            ..ObjectMeta::default()
        },
        data: Some(entry.to_data()),
        ..ConfigMap::default()
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &map).await {
        Ok(_) => Ok(()),
        Err(e) if exists_already(&e) => {
            let existing = read(api, key).await?;
            if existing.is_some_and(|e| e.fresh(max_age, Timestamp::now())) {
                return Ok(());
            }
            api.replace(&key.entry_name(), &params, &map)
                .await
                .map(|_| ())
                .map_err(|e| RequestFailed::new("replacing a cache entry too old", e))
        }
        Err(e) => Err(RequestFailed::new("writing a cache entry", e)),
    }
}
