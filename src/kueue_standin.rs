//! A stand-in for Kueue on the embedded control plane (`workflow-operator dev --kueue`, and the
//! tests): NOT Kueue. It plays only Kueue's admission by nominal quota, so a workflow with
//! `queueScope: Workflow` can be tried without a cluster:
//!
//! - it admits a pending Workload (no `status.admission`, not `Finished`, not `active: false`)
//!   when its LocalQueue's ClusterQueue has room, by nominal quota, for every resource of its
//!   pod sets: per resource, the first flavor of the resource group that covers it with room;
//!   admitting sets `status.admission` and `QuotaReserved`/`Admitted` true, and turns an
//!   `Evicted` or `Preempted` condition false (kubernetes-sigs/kueue `pkg/workload/workload.go`,
//!   `SetQuotaReservation`);
//! - oldest first, a Workload that does not fit not blocking younger ones (Kueue's default
//!   `BestEffortFIFO`); one that does not fit gets `QuotaReserved` false, saying which resource;
//! - a Workload holds quota while it has `status.admission` and is not `Finished`;
//! - it reports each ClusterQueue's use in its status (`flavorsUsage`, `reservingWorkloads`,
//!   `admittedWorkloads`, `pendingWorkloads`).
//!
//! It does not play borrowing, cohorts, preemption, fair sharing, admission checks, partial
//! admission, topology-aware scheduling, `waitForPodsReady` or MultiKueue (the tests' own
//! stand-in, in `tests/it/support/kueue.rs`, adds eviction and MultiKueue's copy).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use workflow_operator_core::kueue::api::{
    Admission, ClusterQueue, FlavorUsage, LocalQueue, PodSetAssignment, ResourceUsage, Workload,
};
use workflow_operator_core::kueue::footprint::Amounts;
use workflow_operator_core::kueue::workload::{self, Standing, condition_now, merge_conditions};
use workflow_operator_core::kueue::{milli, pod_requests_of};

/// How often the stand-in looks for Workloads to admit.
pub const ADMIT_EVERY: Duration = Duration::from_millis(200);

/// The field manager the stand-in writes as.
const MANAGER: &str = "kueue-stand-in";

/// Runs the stand-in until dropped: a round every [`ADMIT_EVERY`]; a failed round is logged
/// and tried again.
pub async fn run(client: Client) {
    loop {
        if let Err(error) = admit_round(&client).await {
            tracing::warn!(%error, "kueue stand-in: admission round failed; trying again");
        }
        tokio::time::sleep(ADMIT_EVERY).await;
    }
}

/// Quota in use, by ClusterQueue, flavor and resource (milli-units).
type Usage = BTreeMap<String, BTreeMap<String, Amounts>>;

/// One round: admits what fits, oldest first, and reports each ClusterQueue's use.
///
/// # Errors
/// A request that failed.
pub async fn admit_round(client: &Client) -> Result<()> {
    let queues: Vec<ClusterQueue> = Api::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let locals: Vec<LocalQueue> = Api::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut workloads: Vec<Workload> = Api::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    workloads.sort_by_key(|w| {
        (
            w.metadata.creation_timestamp.clone().map(|t| t.0),
            w.name_any(),
        )
    });
    let mut usage = Usage::new();
    for held in workloads.iter().filter(|w| holds_quota(w)) {
        add_usage(&mut usage, held);
    }
    let mut pending = BTreeMap::<String, usize>::new();
    for candidate in workloads.iter().filter(|w| waits(w)) {
        let Some(cluster_queue) = cluster_queue_of(candidate, &locals, &queues) else {
            continue;
        };
        match assign(candidate, cluster_queue, &usage) {
            Ok(admission) => {
                admit(client, candidate, admission.clone()).await?;
                let mut admitted = candidate.clone();
                admitted.status.get_or_insert_default().admission = Some(admission);
                add_usage(&mut usage, &admitted);
            }
            Err(why) => {
                *pending.entry(cluster_queue.name_any()).or_default() += 1;
                mark_pending(client, candidate, &why).await?;
            }
        }
    }
    report(client, &queues, &workloads, &usage, pending).await
}

/// Whether `workload` holds quota now: admitted (reserved) and not finished.
pub fn holds_quota(workload: &Workload) -> bool {
    let admitted = workload
        .status
        .as_ref()
        .is_some_and(|s| s.admission.is_some());
    admitted && workload::standing(workload) != Standing::Finished
}

/// Whether `workload` waits to be admitted.
fn waits(workload: &Workload) -> bool {
    let status = workload.status.clone().unwrap_or_default();
    let finished = workload::standing(workload) == Standing::Finished;
    status.admission.is_none() && !finished && workload.spec.active != Some(false)
}

fn cluster_queue_of<'a>(
    workload: &Workload,
    locals: &[LocalQueue],
    queues: &'a [ClusterQueue],
) -> Option<&'a ClusterQueue> {
    let local = workload.spec.queue_name.as_deref()?;
    let namespace = workload.namespace();
    let local = locals
        .iter()
        .find(|l| l.name_any() == local && l.namespace() == namespace)?;
    queues
        .iter()
        .find(|q| q.name_any() == local.spec.cluster_queue)
}

/// What `workload` asks for in all, by resource (milli-units).
pub fn requests_of(workload: &Workload) -> Amounts {
    let mut total = Amounts::new();
    for pod_set in &workload.spec.pod_sets {
        let Some(pod) = &pod_set.template.spec else {
            continue;
        };
        for (resource, amount) in pod_requests_of(pod) {
            *total.entry(resource).or_insert(0) += amount * i128::from(pod_set.count);
        }
    }
    total
}

fn add_usage(usage: &mut Usage, workload: &Workload) {
    let Some(admission) = workload.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return;
    };
    let queue = usage.entry(admission.cluster_queue.clone()).or_default();
    for assignment in &admission.pod_set_assignments {
        for (resource, quantity) in &assignment.resource_usage {
            let Some(flavor) = assignment.flavors.get(resource) else {
                continue;
            };
            let used = queue
                .entry(flavor.clone())
                .or_default()
                .entry(resource.clone())
                .or_insert(0);
            *used += milli(resource, quantity);
        }
    }
}

/// The admission of `workload` to `queue` given what is `used`; why not, when it does not fit.
fn assign(workload: &Workload, queue: &ClusterQueue, usage: &Usage) -> Result<Admission, String> {
    let asked = requests_of(workload);
    let used = usage.get(&queue.name_any());
    let mut flavors = BTreeMap::new();
    for (resource, amount) in &asked {
        let group = queue
            .spec
            .resource_groups
            .iter()
            .find(|g| g.covered_resources.contains(resource));
        let Some(group) = group else {
            return Err(format!(
                "resource {resource} unavailable in ClusterQueue {}",
                queue.name_any()
            ));
        };
        let fits = group.flavors.iter().find(|flavor| {
            let nominal = flavor.resources.iter().find(|r| &r.name == resource);
            let in_use = used
                .and_then(|u| u.get(&flavor.name))
                .and_then(|u| u.get(resource))
                .copied()
                .unwrap_or(0);
            nominal.is_some_and(|n| in_use + amount <= milli(resource, &n.nominal_quota))
        });
        match fits {
            Some(flavor) => flavors.insert(resource.clone(), flavor.name.clone()),
            None => {
                return Err(format!(
                    "insufficient unused quota for {resource} in ClusterQueue {} (nominal quota)",
                    queue.name_any()
                ));
            }
        };
    }
    let resource_usage: BTreeMap<String, Quantity> = asked
        .iter()
        .map(|(r, m)| (r.clone(), workload::quantity(r, *m)))
        .collect();
    Ok(Admission {
        cluster_queue: queue.name_any(),
        pod_set_assignments: vec![PodSetAssignment {
            name: workload
                .spec
                .pod_sets
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            flavors,
            resource_usage,
            count: workload.spec.pod_sets.first().map(|p| p.count),
        }],
    })
}

async fn admit(client: &Client, workload: &Workload, admission: Admission) -> Result<()> {
    let now = Time(Timestamp::now());
    let queue = admission.cluster_queue.clone();
    let conditions = workload.status.clone().unwrap_or_default().conditions;
    let mut changes = vec![
        condition_now(
            "QuotaReserved",
            true,
            "QuotaReserved",
            &format!("Quota reserved in ClusterQueue {queue}"),
            now.clone(),
        ),
        condition_now(
            "Admitted",
            true,
            "Admitted",
            &format!(
                "The workload is admitted (by the kueue stand-in of workflow-operator, ClusterQueue {queue})"
            ),
            now.clone(),
        ),
    ];
    for active in ["Evicted", "Preempted"] {
        if let Some(previous) = conditions
            .iter()
            .find(|c| c.type_ == active && c.status == "True")
        {
            changes.push(condition_now(
                active,
                false,
                "QuotaReserved",
                &format!("Previously: {}", previous.message),
                now.clone(),
            ));
        }
    }
    let conditions = merge_conditions(conditions, changes);
    let patch = serde_json::json!({"status": {"admission": admission, "conditions": conditions}});
    patch_status(client, workload, &patch).await?;
    tracing::info!(workload = %workload.name_any(), %queue, "kueue stand-in: admitted");
    Ok(())
}

async fn mark_pending(client: &Client, workload: &Workload, why: &str) -> Result<()> {
    let conditions = workload.status.clone().unwrap_or_default().conditions;
    let unchanged = conditions
        .iter()
        .any(|c| c.type_ == "QuotaReserved" && c.status == "False" && c.message == why);
    if unchanged {
        return Ok(());
    }
    let change = condition_now(
        "QuotaReserved",
        false,
        "Pending",
        why,
        Time(Timestamp::now()),
    );
    let patch =
        serde_json::json!({"status": {"conditions": merge_conditions(conditions, [change])}});
    patch_status(client, workload, &patch).await
}

async fn patch_status(
    client: &Client,
    workload: &Workload,
    patch: &serde_json::Value,
) -> Result<()> {
    let api: Api<Workload> =
        Api::namespaced(client.clone(), &workload.namespace().unwrap_or_default());
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_status(&workload.name_any(), &params, &Patch::Merge(patch))
        .await
        .with_context(|| format!("writing the status of workload {}", workload.name_any()))?;
    Ok(())
}

/// Writes each ClusterQueue's use into its status.
async fn report(
    client: &Client,
    queues: &[ClusterQueue],
    workloads: &[Workload],
    usage: &Usage,
    pending: BTreeMap<String, usize>,
) -> Result<()> {
    let api: Api<ClusterQueue> = Api::all(client.clone());
    for queue in queues {
        let name = queue.name_any();
        let holding = workloads
            .iter()
            .filter(|w| {
                holds_quota(w)
                    && w.status
                        .as_ref()
                        .and_then(|s| s.admission.as_ref())
                        .is_some_and(|a| a.cluster_queue == name)
            })
            .count();
        let flavors: Vec<FlavorUsage> = queue
            .spec
            .resource_groups
            .iter()
            .flat_map(|g| &g.flavors)
            .map(|flavor| FlavorUsage {
                name: flavor.name.clone(),
                resources: flavor
                    .resources
                    .iter()
                    .map(|r| {
                        let used = usage
                            .get(&name)
                            .and_then(|u| u.get(&flavor.name))
                            .and_then(|u| u.get(&r.name))
                            .copied()
                            .unwrap_or(0);
                        ResourceUsage {
                            name: r.name.clone(),
                            total: workload::quantity(&r.name, used),
                        }
                    })
                    .collect(),
            })
            .collect();
        let status = serde_json::json!({"status": {
            "flavorsUsage": flavors,
            "reservingWorkloads": holding,
            "admittedWorkloads": holding,
            "pendingWorkloads": pending.get(&name).copied().unwrap_or(0),
        }});
        if queue.status.as_ref().map(|s| serde_json::to_value(s).ok())
            == Some(Some(status["status"].clone()))
        {
            continue;
        }
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch_status(&name, &params, &Patch::Merge(&status))
            .await
            .with_context(|| format!("writing the status of ClusterQueue {name}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use workflow_operator_core::kueue::api::{
        ClusterQueueSpec, FlavorQuotas, PodSet, ResourceGroup, ResourceQuota, WorkloadSpec,
    };

    use super::*;

    fn asking(cpu: &str) -> Workload {
        let requests = BTreeMap::from([("cpu".to_string(), Quantity(cpu.into()))]);
        let container = Container {
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        };
        let template = PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![container],
                ..Default::default()
            }),
        };
        Workload::new(
            "w",
            WorkloadSpec {
                pod_sets: vec![PodSet {
                    name: "workflow".into(),
                    template,
                    count: 1,
                }],
                ..Default::default()
            },
        )
    }

    /// A ClusterQueue `cq` with 2 cpu in flavor `small`, then 4 in `big`.
    fn queue() -> ClusterQueue {
        let flavor = |name: &str, cpu: &str| FlavorQuotas {
            name: name.into(),
            resources: vec![ResourceQuota {
                name: "cpu".into(),
                nominal_quota: Quantity(cpu.into()),
            }],
        };
        ClusterQueue {
            metadata: ObjectMeta {
                name: Some("cq".into()),
                ..Default::default()
            },
            spec: ClusterQueueSpec {
                resource_groups: vec![ResourceGroup {
                    covered_resources: vec!["cpu".into()],
                    flavors: vec![flavor("small", "2"), flavor("big", "4")],
                }],
            },
            status: None,
        }
    }

    #[test]
    fn a_workload_goes_to_the_first_flavor_with_room_by_nominal_quota() {
        let usage = Usage::new();
        let admission = assign(&asking("1500m"), &queue(), &usage).expect("fits");
        assert_eq!(admission.pod_set_assignments[0].flavors["cpu"], "small");
        assert_eq!(
            admission.pod_set_assignments[0].resource_usage["cpu"].0,
            "1500m"
        );
        let used = Usage::from([(
            "cq".to_string(),
            BTreeMap::from([(
                "small".to_string(),
                Amounts::from([("cpu".to_string(), 1000)]),
            )]),
        )]);
        let admission = assign(&asking("1500m"), &queue(), &used).expect("fits in big");
        assert_eq!(admission.pod_set_assignments[0].flavors["cpu"], "big");
    }

    #[test]
    fn a_workload_that_fits_no_flavor_or_asks_for_an_uncovered_resource_waits_saying_why() {
        let why = assign(&asking("5"), &queue(), &Usage::new()).expect_err("too big");
        assert!(why.contains("insufficient unused quota for cpu"), "{why}");
        let mut gpu = asking("1");
        let pod = gpu.spec.pod_sets[0].template.spec.as_mut().expect("a pod");
        let requests = pod.containers[0]
            .resources
            .as_mut()
            .and_then(|r| r.requests.as_mut());
        requests
            .expect("requests")
            .insert("nvidia.com/gpu".into(), Quantity("1".into()));
        let why = assign(&gpu, &queue(), &Usage::new()).expect_err("no gpu quota");
        assert!(why.contains("nvidia.com/gpu unavailable"), "{why}");
    }
}
