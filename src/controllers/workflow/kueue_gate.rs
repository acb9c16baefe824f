//! The gate of Kueue at workflow scope (`queueScope: Workflow`), part of the `gate` stage: the
//! run's Jobs are made only while its one Workload is admitted. Each pass of such a workflow
//! reads the Workload (a GET) and
//! - creates it when missing (owned by the workflow; a 409 means it is there), unless the
//!   workflow is MultiKueue's copy on a worker (label `kueue.x-k8s.io/prebuilt-workload-name`),
//!   whose Workload MultiKueue made beforehand;
//! - while it is not admitted, holds every Job back: the workflow and its ready steps are
//!   `Queued`, saying so (naming the Workload and the queue, and an eviction that put it back);
//! - once admitted, lets the plan through with the admission's placement (the ResourceFlavors'
//!   node labels and tolerations, read only when a Job is to be made), which `apply` puts into
//!   every Job it creates;
//! - when Kueue evicts it, holds every Job back and suspends the run's unfinished Jobs (the Job
//!   controller deletes their pods, counting no failure; their steps are `Queued`), and once no
//!   pod of them is left clears the Workload's quota reservation so Kueue queues it again;
//!   admitted again, the suspended Jobs get the new admission's placement and are resumed;
//!   steps that succeeded keep their Jobs and never run again;
//! - when the run ends, marks the Workload `Finished`, which gives its quota back.
//!
//! What Kueue does and this follows is written in `workflow_operator_core::kueue::workload`
//! (from kubernetes-sigs/kueue `pkg/controller/jobframework/reconciler.go`). Workflows without
//! `queueScope: Workflow` pass through without a request.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::kueue::api::{ResourceFlavor, Workload};
use workflow_operator_core::kueue::workload::{self, LABEL_PREBUILT_WORKLOAD, Placement, Standing};
use workflow_operator_core::kueue::{self as kueue_core, footprint_of};
use workflow_operator_core::plan::{self, Action};
use workflow_operator_core::template;

use super::decide::Decided;
use super::shared::{FIELD_MANAGER, RequestFailed, exists_already};

/// What the gate lets through: `None` when it does not govern the workflow. The work is
/// boxed: every pass of every workflow awaits this, and a future holds the futures it awaits.
pub(super) async fn admit(
    client: &Client,
    decided: &Decided,
) -> Result<Option<plan::Gate>, RequestFailed> {
    if !kueue_core::workflow_scoped(&decided.seen.workflow.spec) {
        return Ok(None);
    }
    Box::pin(admit_scoped(client, decided)).await
}

/// [`admit`] for a workflow Kueue admits whole.
async fn admit_scoped(
    client: &Client,
    decided: &Decided,
) -> Result<Option<plan::Gate>, RequestFailed> {
    let workflow = decided.seen.workflow.as_ref();
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<Workload> = Api::namespaced(client.clone(), &namespace);
    let retry = workflow.status.as_ref().and_then(|s| s.retry).unwrap_or(0);
    let name = workload::workload_for(workflow, &decided.seen.compiled.run, retry);
    let found = api
        .get_opt(&name)
        .await
        .map_err(|e| RequestFailed::new(format!("reading workload {name}"), e))?;
    let queue = workflow.spec.queue_name.as_deref().unwrap_or_default();
    let recorded_run = workflow.status.as_ref().and_then(|s| s.run.as_deref());
    if recorded_run.is_some_and(|run| run != decided.seen.compiled.run) {
        finish_earlier(&api, workflow, &name).await?;
    }
    if planned_terminal(decided) {
        if let Some(found) = &found {
            finish(&api, found, decided).await?;
        }
        return Ok(None);
    }
    let Some(found) = found else {
        return Ok(Some(hold(create(&api, decided, &name).await?)));
    };
    match workload::standing(&found) {
        Standing::Pending => Ok(Some(hold(pending(&found, &name, queue)))),
        Standing::Finished => Ok(Some(hold(format!("workload {name} is finished")))),
        Standing::Evicted(why) => {
            stop_run(client, &api, decided, &found).await?;
            Ok(Some(hold(format!(
                "workload {name} was evicted ({why}); waiting to be admitted again (queue {queue})"
            ))))
        }
        Standing::Admitted => {
            let creates = decided
                .decision
                .plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::CreateJob { .. }));
            let resumes = unfinished(decided).any(suspended);
            let placement = match creates || resumes {
                true => Some(placement(client, &found).await?),
                false => None,
            };
            if let (true, Some(placement)) = (resumes, &placement) {
                resume_run(client, decided, placement).await?;
            }
            Ok(Some(plan::Gate {
                placement,
                ..plan::Gate::default()
            }))
        }
    }
}

/// A gate that holds the whole run back, saying `message`: the workflow is `Queued`.
fn hold(message: String) -> plan::Gate {
    plan::Gate::queueing(message)
}

/// What a run whose Workload waits says: that it waits, or, while the `Evicted` condition of
/// an eviction whose reservation was cleared stays true (until Kueue admits it again), that it
/// was evicted and waits to be admitted again.
fn pending(found: &Workload, name: &str, queue: &str) -> String {
    let conditions = found.status.as_ref().map(|s| s.conditions.as_slice());
    let evicted = (conditions.unwrap_or_default().iter())
        .find(|c| c.type_ == "Evicted" && c.status == "True");
    match evicted {
        Some(c) => format!(
            "workload {name} was evicted ({}); waiting to be admitted again (queue {queue})",
            c.message
        ),
        None => format!("waiting for Kueue to admit workload {name} (queue {queue})"),
    }
}

/// Whether the pass's plan leaves the run ended.
fn planned_terminal(decided: &Decided) -> bool {
    let plan = &decided.decision.plan;
    let status = plan
        .status
        .as_ref()
        .or(decided.seen.workflow.status.as_ref());
    status
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal())
}

/// Creates the run's Workload; what the held steps say. A Workload already there (a pass
/// before a restart made it) is success.
async fn create(
    api: &Api<Workload>,
    decided: &Decided,
    name: &str,
) -> Result<String, RequestFailed> {
    let workflow = decided.seen.workflow.as_ref();
    let queue = workflow.spec.queue_name.as_deref().unwrap_or_default();
    if workflow.labels().contains_key(LABEL_PREBUILT_WORKLOAD) {
        return Ok(format!(
            "waiting for the prebuilt workload {name} (queue {queue})"
        ));
    }
    let compiled = &decided.seen.compiled;
    let Ok(dag) = &compiled.dag else {
        return Ok("invalid DAG".into());
    };
    let footprint = match footprint_of(&workflow.spec, dag, compiled.exit.as_ref()) {
        Ok(footprint) => footprint,
        Err(why) => return Ok(format!("cannot ask Kueue for the run: {why}")),
    };
    let retry = workflow.status.as_ref().and_then(|s| s.retry).unwrap_or(0);
    let Some(object) = workload::build(workflow, &compiled.run, retry, &footprint) else {
        return Ok("waiting for the workflow's uid".into());
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => tracing::info!(workload = name, "created the run's workload"),
        Err(e) if exists_already(&e) => {}
        Err(e) => return Err(RequestFailed::new(format!("creating workload {name}"), e)),
    }
    Ok(format!(
        "waiting for Kueue to admit workload {name} (queue {queue})"
    ))
}

/// The admission's placement: its flavors read by name (a flavor gone adds nothing).
async fn placement(client: &Client, found: &Workload) -> Result<Placement, RequestFailed> {
    let api: Api<ResourceFlavor> = Api::all(client.clone());
    let mut flavors = Vec::new();
    let admission = found.status.as_ref().and_then(|s| s.admission.as_ref());
    let names: std::collections::BTreeSet<&String> = admission
        .iter()
        .flat_map(|a| &a.pod_set_assignments)
        .flat_map(|a| a.flavors.values())
        .collect();
    for name in names {
        let flavor = api
            .get_opt(name)
            .await
            .map_err(|e| RequestFailed::new(format!("reading resource flavor {name}"), e))?;
        flavors.extend(flavor);
    }
    Ok(Placement::of(found, &flavors))
}

/// The current run's Jobs that have not ended.
fn unfinished<'a>(decided: &'a Decided) -> impl Iterator<Item = &'a JobSummary> + 'a {
    let run = decided.seen.compiled.run.as_str();
    decided
        .seen
        .children
        .iter()
        .map(|j| j.as_ref())
        .filter(move |j| {
            j.run.as_deref() == Some(run) && j.status.as_ref().is_none_or(|s| s.ended.is_none())
        })
}

fn suspended(job: &JobSummary) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// Stops an evicted run as Kueue stops a Job (`stopJob`: suspended, its pods deleted by the
/// Job controller without counting a failure): each unfinished Job of the run suspended, its
/// step `Queued`; once no pod of them is left, the reservation is cleared.
async fn stop_run(
    client: &Client,
    api: &Api<Workload>,
    decided: &Decided,
    found: &Workload,
) -> Result<(), RequestFailed> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), &decided.seen.namespace());
    let mut running = false;
    for job in unfinished(decided) {
        let name = job.metadata.name.clone().unwrap_or_default();
        if !suspended(job) {
            patch_job(
                &jobs,
                &name,
                serde_json::json!({"spec": {"suspend": true}}),
                "suspending",
            )
            .await?;
            tracing::info!(job = name, "suspended a step of an evicted workload");
            running = true;
        }
        running |= job.status.as_ref().is_some_and(|s| s.pods.active > 0);
    }
    if running || !decided.seen.unmirrored.is_empty() {
        // Cleared on a later pass, once the mirror shows no pod running.
        return Ok(());
    }
    let patch = workload::clear_admission(found, Time(Timestamp::now()));
    patch_status(api, found, patch, "clearing the reservation of").await
}

/// Resumes the Jobs an eviction suspended, on the nodes of the new admission: each read (its
/// tolerations are merged with the admission's), given the placement, and unsuspended.
async fn resume_run(
    client: &Client,
    decided: &Decided,
    placement: &Placement,
) -> Result<(), RequestFailed> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), &decided.seen.namespace());
    for job in unfinished(decided).filter(|j| suspended(j)) {
        let name = job.metadata.name.clone().unwrap_or_default();
        let Some(current) = jobs
            .get_opt(&name)
            .await
            .map_err(|e| RequestFailed::new(format!("reading job {name}"), e))?
        else {
            continue;
        };
        let mut pod = current
            .spec
            .and_then(|s| s.template.spec)
            .unwrap_or_default();
        placement.apply_to(&mut pod);
        let patch = serde_json::json!({"spec": {
            "suspend": false,
            "template": {"spec": {"nodeSelector": pod.node_selector, "tolerations": pod.tolerations}},
        }});
        patch_job(&jobs, &name, patch, "resuming").await?;
        tracing::info!(job = name, "resumed a step of a workload admitted again");
    }
    Ok(())
}

async fn patch_job(
    api: &Api<Job>,
    name: &str,
    patch: serde_json::Value,
    what: &str,
) -> Result<(), RequestFailed> {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(RequestFailed::new(format!("{what} job {name}"), e)),
    }
}

/// Marks the run's Workload finished, once: its quota goes back to its queue.
async fn finish(
    api: &Api<Workload>,
    found: &Workload,
    decided: &Decided,
) -> Result<(), RequestFailed> {
    if workload::standing(found) == Standing::Finished {
        return Ok(());
    }
    let plan = &decided.decision.plan;
    let status = plan
        .status
        .as_ref()
        .or(decided.seen.workflow.status.as_ref());
    let phase = status.and_then(|s| s.workflow_status);
    let succeeded = phase == Some(workflow_operator_core::lifecycle::Phase::Completed);
    let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
    let patch = workload::finish(found, succeeded, &message, Time(Timestamp::now()));
    patch_status(api, found, patch, "finishing").await
}

/// Gives back the quota of the workflow's Workloads of earlier runs (what runs changed while one
/// was admitted or waiting): each not finished is marked `Finished`, as Kueue's job framework
/// finishes the Workload of a job it no longer matches. Read only on the passes before a new
/// run is recorded.
async fn finish_earlier(
    api: &Api<Workload>,
    workflow: &WorkFlow,
    current: &str,
) -> Result<(), RequestFailed> {
    let selector = workflow_operator_core::jobs::selector(&workflow.name_any());
    let params = kube::api::ListParams::default().labels(&selector);
    let listed = api
        .list(&params)
        .await
        .map_err(|e| RequestFailed::new("listing the workflow's workloads", e))?;
    let uid = workflow.metadata.uid.as_deref();
    for earlier in listed.items {
        let owned = earlier
            .owner_references()
            .iter()
            .any(|o| Some(o.uid.as_str()) == uid);
        if !owned
            || earlier.name_any() == current
            || workload::standing(&earlier) == Standing::Finished
        {
            continue;
        }
        let message = "the workflow's run changed: a new run has a Workload of its own";
        let patch = workload::finish(&earlier, false, message, Time(Timestamp::now()));
        patch_status(api, &earlier, patch, "finishing the earlier run's").await?;
        tracing::info!(workload = %earlier.name_any(), "finished the workload of an earlier run");
    }
    Ok(())
}

async fn patch_status(
    api: &Api<Workload>,
    found: &Workload,
    patch: serde_json::Value,
    what: &str,
) -> Result<(), RequestFailed> {
    let name = found.name_any();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(RequestFailed::new(format!("{what} workload {name}"), e)),
    }
}

/// The workflows whose pass reads their Workload on the `kueue` timer: admitted as a whole,
/// and not ended (an ended run's Workload was finished by the pass that ended it).
pub(super) fn polled(workflow: &WorkFlow) -> bool {
    let ended = workflow
        .status
        .as_ref()
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    kueue_core::workflow_scoped(&workflow.spec) && !ended
}

/// Beside a workflow MultiKueue dispatches (`managedBy: kueue.x-k8s.io/multikueue`, left alone
/// otherwise): its run's Workload on the manager, which Kueue admits to a worker, as the KEP's
/// generic adapter flow has the job's own controller make it (kubernetes-sigs/kueue
/// `keps/2349-multikueue-external-custom-job-support`, "Job Flow for the Generic Adapter",
/// step 2). Nothing is written to the workflow itself.
///
/// # Errors
/// The create's error but a 409 (it exists).
pub(super) async fn beside_left(
    client: Client,
    workflow: std::sync::Arc<WorkFlow>,
) -> Result<(), String> {
    let dispatched = workflow.spec.managed_by.as_deref() == Some(workload::MULTIKUEUE_CONTROLLER);
    if !dispatched
        || !kueue_core::workflow_scoped(&workflow.spec)
        || workflow.metadata.deletion_timestamp.is_some()
    {
        return Ok(());
    }
    let workflow = sized_from(&client, &workflow).await?;
    let (expanded, compiled) = plan::prepare(&workflow);
    let spec = expanded.as_ref().map_or(&workflow.spec, |w| &w.spec);
    let dag = match &compiled.dag {
        Ok(dag) => dag,
        Err(why) => {
            tracing::warn!(%why, "no workload for a workflow MultiKueue dispatches: its run cannot be sized");
            return Ok(());
        }
    };
    let footprint = footprint_of(spec, dag, compiled.exit.as_ref()).map_err(|e| e.to_string())?;
    let Some(object) = workload::build(&workflow, &compiled.run, 0, &footprint) else {
        return Ok(());
    };
    let api: Api<Workload> = Api::namespaced(client, &workflow.namespace().unwrap_or_default());
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(e) if exists_already(&e) => Ok(()),
        Err(e) => Err(format!(
            "creating the workload of a workflow MultiKueue dispatches: {e}"
        )),
    }
}

/// `workflow` with the shared templates it names, to size its run: those `submit` recorded in
/// its annotation (which the worker runs from: no status on the manager holds them), else read
/// here, in memory only (a workflow made with kubectl, whose templates the workers read
/// themselves). Nothing is written.
async fn sized_from(client: &Client, workflow: &WorkFlow) -> Result<WorkFlow, String> {
    let mut probe = template::with_submitted(workflow).into_owned();
    if template::missing(&probe).is_empty() {
        return Ok(probe);
    }
    let namespace = workflow.namespace().unwrap_or_default();
    let read = |source| super::resolve::read(client, &namespace, source);
    template::resolve(&mut probe, read)
        .await
        .map_err(|e| e.to_string())?;
    Ok(probe)
}
