//! Kueue at workflow scope (`spec.queueScope: Workflow`): a run admitted as a whole through one
//! Workload, and MultiKueue's generic adapter contract (`spec.managedBy`). Pure; the operator's
//! `kueue_gate` stage does the I/O.
//!
//! - [`api`]: the Kueue kinds (`Workload`, `LocalQueue`, `ClusterQueue`, `ResourceFlavor`).
//! - [`footprint`]: the peak concurrent footprint of a run, which its Workload asks for.
//! - [`workload`]: the Workload of a run, and what is read back from it.
//!
//! docs/kueue.md says which of Kueue's behaviours this follows, from which of its files.

pub mod api;
pub mod footprint;
pub mod workload;

use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::crd::{QueueScope, Step, WorkFlow, WorkFlowSpec};
use crate::dag::Dag;
use crate::fan_out::FanOut;
use footprint::{Amounts, Demand, Shape, Unsized};

/// Whether `workflow`'s runs are admitted by Kueue as a whole (`queueName` with
/// `queueScope: Workflow`).
pub fn workflow_scoped(spec: &WorkFlowSpec) -> bool {
    spec.queue_name.is_some() && spec.queue_scope == Some(QueueScope::Workflow)
}

/// Whether another controller than this operator manages `workflow` (`spec.managedBy` set to
/// anything but [`workload::OPERATOR_CONTROLLER`]): the operator does nothing with it.
pub fn managed_elsewhere(workflow: &WorkFlow) -> bool {
    workflow
        .spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != workload::OPERATOR_CONTROLLER)
}

/// What a run of `spec` asks Kueue for: `spec.resources` when declared, else the peak of its
/// steps (the DAG `dag`) and, after them, of its exit steps (`exit`), each resource the larger.
///
/// # Errors
/// [`Unsized`] when a fan-out's length is known only at run time and nothing bounds it.
pub fn footprint_of(
    spec: &WorkFlowSpec,
    dag: &Dag,
    exit: Option<&Dag>,
) -> Result<Amounts, Unsized> {
    if let Some(declared) = &spec.resources {
        return Ok(declared
            .iter()
            .map(|(r, q)| (r.clone(), milli(r, q)))
            .collect());
    }
    let parallelism = spec
        .parallelism
        .as_ref()
        .and_then(|p| p.num())
        .map(|p| p.max(1) as u32);
    let runs = spec.runs.unwrap_or(1).max(1) as u32;
    let mut amounts = peak_of(&spec.containers, dag, runs, parallelism)?;
    if let Some(exit) = exit {
        // Exit steps start once every step has finished: never beside them.
        for (resource, amount) in peak_of(&spec.on_exit, exit, 1, parallelism)? {
            let entry = amounts.entry(resource).or_insert(0);
            *entry = (*entry).max(amount);
        }
    }
    Ok(amounts)
}

fn peak_of(
    steps: &[Step],
    dag: &Dag,
    runs: u32,
    parallelism: Option<u32>,
) -> Result<Amounts, Unsized> {
    let dependencies: Vec<Vec<usize>> = (0..dag.len())
        .map(|i| dag.dependencies(i).collect())
        .collect();
    let order: Vec<usize> = dag.topological_order().collect();
    let shape = Shape::new(&dependencies, &order, runs, parallelism);
    let demands: Vec<Demand> = steps
        .iter()
        .map(|step| Demand {
            amounts: pod_requests(step),
            copies: copies_of(step, dag),
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s.step_name.as_str()).collect();
    Ok(footprint::peak(&shape, &demands, &names)?.amounts)
}

/// How many pods of `step` run at once in one run: its items when it fans out over a list the
/// spec holds, `None` when the list is known only at run time.
fn copies_of(step: &Step, dag: &Dag) -> Option<u32> {
    match FanOut::compile(step, dag) {
        Ok(None) | Err(_) => Some(1),
        Ok(Some(fan_out)) => fan_out.static_len().map(|n| n as u32),
    }
}

/// The requests of one pod of `step` as the scheduler and Kueue count them: its container and
/// sidecars together, or its largest init container if larger; a request left out is its
/// limit (Kubernetes defaults requests to limits).
pub fn pod_requests(step: &Step) -> Amounts {
    let mut running = requests(step.resources.as_deref());
    for sidecar in step.sidecars.iter().flat_map(|s| s.iter()) {
        for (resource, amount) in container_requests(sidecar) {
            *running.entry(resource).or_insert(0) += amount;
        }
    }
    for init in step.init_containers.iter().flat_map(|s| s.iter()) {
        for (resource, amount) in container_requests(init) {
            let entry = running.entry(resource).or_insert(0);
            *entry = (*entry).max(amount);
        }
    }
    running
}

/// The requests of a pod as the scheduler and Kueue count them: its containers together, or
/// its largest init container if larger.
pub fn pod_requests_of(pod: &k8s_openapi::api::core::v1::PodSpec) -> Amounts {
    let mut running = Amounts::new();
    for container in &pod.containers {
        for (resource, amount) in container_requests(container) {
            *running.entry(resource).or_insert(0) += amount;
        }
    }
    for init in pod.init_containers.iter().flatten() {
        for (resource, amount) in container_requests(init) {
            let entry = running.entry(resource).or_insert(0);
            *entry = (*entry).max(amount);
        }
    }
    running
}

fn container_requests(container: &Container) -> Amounts {
    requests(container.resources.as_ref())
}

fn requests(resources: Option<&ResourceRequirements>) -> Amounts {
    let Some(resources) = resources else {
        return Amounts::new();
    };
    let mut amounts: Amounts = resources
        .limits
        .iter()
        .flatten()
        .map(|(r, q)| (r.clone(), milli(r, q)))
        .collect();
    for (r, q) in resources.requests.iter().flatten() {
        amounts.insert(r.clone(), milli(r, q));
    }
    amounts
}

/// A quantity in milli-units, rounded up; 0 when it does not parse (the API server refuses
/// such a pod, whose step then fails on its own).
pub fn milli(_resource: &str, quantity: &Quantity) -> i128 {
    kube_schema_check::quantity::value(&quantity.0).map_or(0, |v| (v * 1000.0).ceil() as i128)
}
