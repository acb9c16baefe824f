//! Stamps the shard label on the objects that lack it (or carry one out of range, from a run
//! with more shards): WorkFlows, CronWorkFlows and WorkFlowTriggers, from their key
//! (`shards::shard_of`), and
//! the Jobs of a workflow from before sharding, from their workflow's label. Every replica runs
//! it; racing replicas write the same value. Its watches are of metadata only and select, on
//! the API server, just the objects to stamp (`notin` also matches an object without the
//! label: `Requirement.Matches` in apimachinery's `pkg/labels/selector.go`), so they cache
//! next to nothing once everything is stamped.

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use workflow_operator_core::crd::{CronWorkFlow, WorkFlow, WorkFlowTrigger};
use workflow_operator_core::jobs::LABEL_WORKFLOW;
use workflow_operator_core::shards::{self, LABEL_SHARD};

/// Stamps until dropped (its watches retry with backoff).
pub async fn run(client: Client, namespace: Option<String>, count: u32) {
    let unstamped = {
        let values: Vec<String> = (0..count).map(|i| i.to_string()).collect();
        format!("{LABEL_SHARD} notin ({})", values.join(","))
    };
    let workflows = stamp_kind::<WorkFlow>(&client, &namespace, &unstamped, count);
    let crons = stamp_kind::<CronWorkFlow>(&client, &namespace, &unstamped, count);
    let triggers = stamp_kind::<WorkFlowTrigger>(&client, &namespace, &unstamped, count);
    let of_workflows = format!("{LABEL_WORKFLOW},{unstamped}");
    let jobs = stamp_jobs(&client, &namespace, &of_workflows, count);
    tokio::join!(workflows, crons, triggers, jobs);
}

fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Stamps each object of kind `K` `selector` finds with the shard of its key.
async fn stamp_kind<K>(client: &Client, namespace: &Option<String>, selector: &str, count: u32)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let config = watcher::Config::default().labels(selector);
    let objects = watcher(api::<PartialObjectMeta<K>>(client, namespace), config)
        .default_backoff()
        .applied_objects();
    let mut objects = std::pin::pin!(objects);
    while let Some(object) = objects.next().await {
        let Ok(object) = object else { continue };
        let shard = shard_of_object(&object.metadata, count);
        stamp(&api::<K>(client, &object.namespace()), &object, shard).await;
    }
}

/// The shard of a WorkFlow, CronWorkFlow or WorkFlowTrigger: of its namespace and key name.
fn shard_of_object(object: &ObjectMeta, count: u32) -> u32 {
    let cron = object
        .owner_references
        .iter()
        .flatten()
        .find(|owner| shards::RUN_OWNERS.contains(&owner.kind.as_str()))
        .map(|owner| owner.name.as_str());
    let name = object.name.as_deref().unwrap_or_default();
    let namespace = object.namespace.as_deref().unwrap_or_default();
    shards::shard_of(namespace, shards::key_name(name, cron), count)
}

/// Stamps each Job `selector` finds with its workflow's shard (once the workflow has one).
async fn stamp_jobs(client: &Client, namespace: &Option<String>, selector: &str, count: u32) {
    let config = watcher::Config::default().labels(selector);
    let jobs = watcher(api::<PartialObjectMeta<Job>>(client, namespace), config)
        .default_backoff()
        .applied_objects();
    let mut jobs = std::pin::pin!(jobs);
    while let Some(job) = jobs.next().await {
        let Ok(job) = job else { continue };
        let Some(owner) = job.owner_references().iter().find(|o| o.kind == "WorkFlow") else {
            continue;
        };
        let workflows = api::<WorkFlow>(client, &job.namespace());
        let Ok(Some(workflow)) = workflows.get_metadata_opt(&owner.name).await else {
            continue;
        };
        let shard = shards::recorded(workflow.labels(), count)
            .unwrap_or_else(|| shard_of_object(&workflow.metadata, count));
        stamp(&api::<Job>(client, &job.namespace()), &job, shard).await;
    }
}

/// Writes `shard` into `object`'s labels (a merge patch: idempotent, and it touches no other
/// label).
async fn stamp<K>(api: &Api<K>, object: &PartialObjectMeta<K>, shard: u32)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let patch = serde_json::json!({"metadata": {"labels": {LABEL_SHARD: shard.to_string()}}});
    let name = object.name_any();
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::debug!(%name, shard, "stamped the shard label"),
        Err(error) => tracing::warn!(%name, %error, "cannot stamp the shard label"),
    }
}
