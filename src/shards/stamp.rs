//! Stamps the shard label on the objects that lack it (or carry one out of range, from a run
//! with more shards): WorkFlows, CronWorkFlows and WorkFlowTriggers, from their key
//! (`shards::shard_of`), and the Jobs of a workflow from before sharding, from their
//! workflow's label. Every replica watches for them, and the replica holding an object's shard
//! stamps it: one write per object however many replicas run (each stamping every object would
//! send the API server a patch per replica). An object of a shard nobody holds waits until a
//! replica takes the shard, whose work could not start before anyway. The watches are of
//! metadata only and select, on the API server, just the objects to stamp (`notin` also
//! matches an object without the label: `Requirement.Matches` in apimachinery's
//! `pkg/labels/selector.go`), so they cache next to nothing once everything is stamped.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use workflow_operator_core::crd::{CronWorkFlow, WorkFlow, WorkFlowTrigger};
use workflow_operator_core::jobs::LABEL_WORKFLOW;
use workflow_operator_core::shards::{self, LABEL_SHARD};

/// The shards this replica holds, as they change.
pub type Held = watch::Receiver<BTreeSet<u32>>;

/// Stamps until dropped (its watches retry with backoff).
pub async fn run(client: Client, namespace: Option<String>, count: u32, held: Held) {
    let unstamped = {
        let values: Vec<String> = (0..count).map(|i| i.to_string()).collect();
        format!("{LABEL_SHARD} notin ({})", values.join(","))
    };
    let of_key = |object: ObjectMeta| std::future::ready(Some(shard_of_object(&object, count)));
    let watched = Watched {
        client: &client,
        namespace: &namespace,
        held: &held,
    };
    let workflows = watched.stamp::<WorkFlow, _, _>(&unstamped, of_key);
    let crons = watched.stamp::<CronWorkFlow, _, _>(&unstamped, of_key);
    let triggers = watched.stamp::<WorkFlowTrigger, _, _>(&unstamped, of_key);
    let of_workflows = format!("{LABEL_WORKFLOW},{unstamped}");
    let jobs = watched.stamp::<Job, _, _>(&of_workflows, |job| {
        let client = client.clone();
        async move { workflow_shard(&client, &job, count).await }
    });
    tokio::join!(workflows, crons, triggers, jobs);
}

/// Where the stampers watch, and what this replica holds.
struct Watched<'a> {
    client: &'a Client,
    namespace: &'a Option<String>,
    held: &'a Held,
}

impl Watched<'_> {
    /// Stamps each object of kind `K` that `selector` finds with the shard `shard_of` gives it,
    /// once this replica holds that shard; objects whose shard is held elsewhere wait here
    /// until it is stamped by its holder (the watch then drops it) or this replica takes it.
    async fn stamp<K, F, Fut>(&self, selector: &str, shard_of: F)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
        F: Fn(ObjectMeta) -> Fut,
        Fut: Future<Output = Option<u32>>,
    {
        let config = watcher::Config::default().labels(selector);
        let events = watcher::watcher(
            api::<PartialObjectMeta<K>>(self.client, self.namespace),
            config,
        )
        .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut held = self.held.clone();
        let mut waiting: HashMap<(String, String), (PartialObjectMeta<K>, u32)> = HashMap::new();
        loop {
            let ready: Vec<_> = tokio::select! {
                event = events.next() => match event {
                    None => return,
                    Some(Err(_)) => continue,
                    Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                        let Some(shard) = shard_of(object.metadata.clone()).await else { continue };
                        if !held.borrow().contains(&shard) {
                            waiting.insert(key(&object), (object, shard));
                            continue;
                        }
                        waiting.remove(&key(&object));
                        vec![(object, shard)]
                    }
                    Some(Ok(Event::Delete(object))) => {
                        waiting.remove(&key(&object));
                        continue;
                    }
                    Some(Ok(Event::Init)) => {
                        waiting.clear();
                        continue;
                    }
                    Some(Ok(Event::InitDone)) => continue,
                },
                changed = held.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now_held = held.borrow_and_update().clone();
                    take_held(&mut waiting, &now_held)
                }
            };
            for (object, shard) in ready {
                stamp(&api::<K>(self.client, &object.namespace()), &object, shard).await;
            }
        }
    }
}

/// The waiting objects whose shard is held now, taken out of `waiting`.
fn take_held<T>(
    waiting: &mut HashMap<(String, String), (T, u32)>,
    held: &BTreeSet<u32>,
) -> Vec<(T, u32)> {
    let keys: Vec<_> = waiting
        .iter()
        .filter(|(_, (_, shard))| held.contains(shard))
        .map(|(key, _)| key.clone())
        .collect();
    keys.into_iter()
        .filter_map(|key| waiting.remove(&key))
        .collect()
}

fn key<K: Resource>(object: &PartialObjectMeta<K>) -> (String, String) {
    (object.namespace().unwrap_or_default(), object.name_any())
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

/// The shard of a Job of a workflow from before sharding: its workflow's (once the workflow
/// has one); `None` for a Job of no workflow, or whose workflow is gone or unreadable.
async fn workflow_shard(client: &Client, job: &ObjectMeta, count: u32) -> Option<u32> {
    let owner = job
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "WorkFlow")?;
    let namespace = job.namespace.clone();
    let workflows = api::<WorkFlow>(client, &namespace);
    let workflow = workflows.get_metadata_opt(&owner.name).await.ok()??;
    Some(
        shards::recorded(workflow.labels(), count)
            .unwrap_or_else(|| shard_of_object(&workflow.metadata, count)),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;
    use std::time::Duration;

    use kube::api::PostParams;
    use kube_devcluster::faults::Verb;
    use kube_devcluster::testing::eventually;

    use crate::controllers::workflow::operator::control_plane_with_crds;

    /// Each workflow's shard label, by name (`None`: not stamped).
    async fn labels(api: &Api<WorkFlow>) -> BTreeMap<String, Option<String>> {
        let listed = api.list(&Default::default()).await.expect("list");
        listed
            .items
            .iter()
            .map(|w| (w.name_any(), w.labels().get(LABEL_SHARD).cloned()))
            .collect()
    }

    #[tokio::test]
    async fn each_workflow_is_stamped_once_by_the_replica_holding_its_shard() {
        let (cluster, client) = control_plane_with_crds().await;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), "default");
        let names: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
        let shard = |name: &str| shards::shard_of("default", name, 2);
        assert!(
            names.iter().any(|n| shard(n) == 0) && names.iter().any(|n| shard(n) == 1),
            "the names fall in both shards"
        );
        // Two replicas: one holds shard 0, the other nothing yet.
        let namespace = Some("default".to_string());
        let (_holds_0, held) = watch::channel(BTreeSet::from([0]));
        tokio::spawn(run(client.clone(), namespace.clone(), 2, held));
        let (holds_1, held) = watch::channel(BTreeSet::new());
        tokio::spawn(run(client.clone(), namespace, 2, held));
        for name in &names {
            let workflow = WorkFlow::test(name).step("a", &[]).build();
            api.create(&PostParams::default(), &workflow)
                .await
                .expect("created");
        }
        let expected = |held: &[u32]| -> BTreeMap<String, Option<String>> {
            let stamped = |n: &String| held.contains(&shard(n)).then(|| shard(n).to_string());
            names.iter().map(|n| (n.clone(), stamped(n))).collect()
        };
        let deadline = Duration::from_secs(10);
        eventually("shard 0's workflows stamped", deadline, || async {
            (labels(&api).await == expected(&[0])).then_some(())
        })
        .await;
        // Shard 1's wait for a holder, then its holder stamps them.
        holds_1.send_replace(BTreeSet::from([1]));
        eventually("every workflow stamped", deadline, || async {
            (labels(&api).await == expected(&[0, 1])).then_some(())
        })
        .await;
        let patches = cluster
            .requests()
            .count(Verb::Patch, "workflows.workflow.crd.com");
        assert_eq!(patches, names.len() as u64, "one stamp per workflow");
    }
}
