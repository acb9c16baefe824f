//! Applying: the plan's actions carried out against the API (client). Job creates, deadline
//! patches, stops and deletes run [`ACTIONS_IN_FLIGHT`] at a time; each is idempotent (Job
//! names are deterministic, deleting a missing Job succeeds, patches set fixed values), so a
//! retry, a duplicate event or a restart never starts a step twice.

use std::sync::Mutex;

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube_kopf::Context;
use serde_json::json;
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::failure_cause::JOB_NAME_LABEL;
use workflow_operator_core::fan_out::{self, Instance};
use workflow_operator_core::jobs;
use workflow_operator_core::kueue::workload::Placement;
use workflow_operator_core::outputs::{Inputs, Outputs, StepData};
use workflow_operator_core::plan::{self, Action, Compiled, ExitEnv, Plan};

use super::decide::Refusal;
use super::error::PassError;
use super::shared::{ControllerState, FIELD_MANAGER, RequestFailed, exists_already};

/// Actions (Job creates, patches, deletes) of one plan carried out at once. They touch
/// different Jobs and each is idempotent, so their order does not matter; one at a time, the
/// last Job of a wide layer of the DAG would wait for every request before it (a layer of 100
/// steps took 150 ms to start).
const ACTIONS_IN_FLIGHT: usize = 16;

/// Carries out the plan's actions, [`ACTIONS_IN_FLIGHT`] at a time; the Jobs the API server
/// refused with 422 (a bad value inside the parts of the spec the CRD keeps whole, such as a
/// malformed volume), which no retry can create: the pass fails their steps and carries out
/// the plan made again with those failures.
pub(super) async fn apply(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    planned: Planned<'_>,
    plan: &Plan,
) -> Result<Vec<Refusal>, PassError> {
    let Planned {
        workflow, compiled, ..
    } = planned;
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let refusals = Mutex::new(Vec::new());
    if plan
        .actions
        .iter()
        .any(|a| matches!(a, Action::CreateJob { .. }))
    {
        ensure_workspace(shared, &api, workflow, compiled).await?;
    }
    futures::stream::iter(plan.actions.iter().map(Ok))
        .try_for_each_concurrent(ACTIONS_IN_FLIGHT, |action| {
            execute(shared, &api, planned, action, &refusals)
        })
        .await?;
    Ok(refusals.into_inner().expect("refusals lock"))
}

/// Creates the workspace claim of the current run (`spec.workspace`) before the Jobs that
/// mount it: at each pass that creates Jobs, as 409 says it exists already (one request, no
/// memory to trust after a restart), and only for workflows with a workspace.
async fn ensure_workspace(
    shared: &ControllerState,
    jobs_api: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
) -> Result<(), PassError> {
    let claim = jobs::build_workspace_claim(workflow, &compiled.run)
        .map_err(|e| PassError::Unbuildable(e.to_string()))?;
    let Some(claim) = claim else {
        return Ok(());
    };
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(jobs_api.clone().into_client(), &namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&params, &claim).await {
        Ok(_) => Ok(()),
        Err(e) if exists_already(&e) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => Err(PassError::Unbuildable(
            format!("the API server refused the workspace claim: {}", e.message),
        )),
        Err(e) => {
            shared.metrics.api_error("create");
            let failed = RequestFailed::new("creating the workspace claim", e);
            Err(PassError::Apply(failed))
        }
    }
}

/// What every action of one apply reads.
#[derive(Clone, Copy)]
pub(super) struct Planned<'a> {
    /// The workflow as planned: its templates expanded.
    pub(super) workflow: &'a WorkFlow,
    /// `workflow.spec`'s: its run id and step index keep a create O(1) in the number of steps
    /// (no re-hash of the spec, no scan of the steps).
    pub(super) compiled: &'a Compiled,
    /// Where the run's pods go (Kueue's admission), when it was placed.
    pub(super) placement: Option<&'a Placement>,
    /// Why the namespace's artifact repository ConfigMap is not one, when it is not: the
    /// message of the steps with artifacts it fails.
    pub(super) unusable: Option<&'a str>,
}

/// Carries out one action. A Job create the API server refuses with 422 goes to `refusals`.
async fn execute(
    shared: &ControllerState,
    api: &Api<Job>,
    planned: Planned<'_>,
    action: &Action,
    refusals: &Mutex<Vec<Refusal>>,
) -> Result<(), PassError> {
    let Planned {
        workflow,
        placement,
        ..
    } = planned;
    let uid = workflow.uid().unwrap_or_default();
    match action {
        Action::CreateJob {
            step,
            job_name,
            retry,
            exit,
            inputs,
            instance,
            attempt,
        } => {
            let create = Create {
                step,
                retry: *retry,
                exit: exit.as_ref(),
                inputs,
                instance,
                attempt: *attempt,
            };
            let refuse = |reason, message| {
                refusals.lock().expect("refusals lock").push(Refusal {
                    step: shown_name(workflow, &create),
                    job: job_name.clone(),
                    reason,
                    message,
                });
            };
            // Boxed, and the match ended before the request: a Job is 2.8 KB, and what an
            // `async fn` holds across an await is part of its future, which the concurrent
            // actions move (a future of 10 KB per action, copied at every move, before).
            let mut job = match build_job(shared, planned, &create)? {
                Ok(job) => Box::new(job),
                Err(message) => {
                    refuse(plan::REASON_NO_ARTIFACT_REPOSITORY, message);
                    return Ok(());
                }
            };
            // Kueue admitted the run to these nodes (`queueScope: Workflow`).
            let pod = job.spec.as_mut().and_then(|s| s.template.spec.as_mut());
            if let (Some(placement), Some(pod)) = (placement, pod) {
                placement.apply_to(pod);
            }
            create_job(shared, api, workflow, &job, refuse)
                .await
                .map_err(PassError::Apply)
        }
        Action::StopJob { job_name, reason } => {
            let stopping = Stopping {
                mark: jobs::stop_mark(reason.why()),
                whole: jobs::stop_patch(reason.why()),
                what: "stopping the",
                queued: Queued::Delete,
            };
            // Stopping reads the Job: boxed, so that what only a stop needs is not part of
            // every action's future.
            if Box::pin(stop(api, job_name, stopping))
                .await
                .map_err(PassError::Apply)?
                == Stopped::Deleted
            {
                shared.memory.deleted(&uid, job_name);
            }
            Ok(())
        }
        Action::DeleteJob { job_name } => {
            delete_job(api, job_name).await.map_err(PassError::Apply)?;
            shared.memory.deleted(&uid, job_name);
            Ok(())
        }
        Action::SetJobDeadline {
            job_name,
            active_deadline_seconds,
        } => {
            let patch = json!({"spec": {"activeDeadlineSeconds": active_deadline_seconds}});
            let patched = patch_job(api, job_name, patch, "updating the deadline of").await;
            patched.map_err(PassError::Apply)
        }
        Action::TimeOutJob { job_name, why } => {
            let stopped = Box::pin(time_out(api, job_name, why)).await;
            stopped.map_err(PassError::Apply)
        }
        Action::FailStart { job_name, why } => {
            let patch = jobs::cannot_start_patch(why);
            let patched = patch_job(api, job_name, patch, "stopping the not started").await;
            patched.map_err(PassError::Apply)
        }
        Action::ResumeJob { job_name, at } => {
            // A step resumed at its duration is given no outputs: it takes their defaults.
            let patch = jobs::resume_patch(*at, &Outputs::new());
            let patched = patch_job(api, job_name, patch, "resuming the suspended").await;
            patched.map_err(PassError::Apply)
        }
    }
}

/// What a `CreateJob` action builds its Job from.
struct Create<'a> {
    step: &'a str,
    retry: i32,
    exit: Option<&'a ExitEnv>,
    inputs: &'a Inputs,
    instance: &'a Instance,
    attempt: u32,
}

/// The Job of a `CreateJob` action; `Err` inside with why its step cannot run without an
/// artifact repository.
///
/// # Errors
/// A step the spec does not hold, or a workflow without the metadata a Job needs (permanent).
fn build_job(
    shared: &ControllerState,
    planned: Planned<'_>,
    create: &Create<'_>,
) -> Result<Result<Job, String>, PassError> {
    let Planned {
        workflow,
        compiled,
        unusable,
        ..
    } = planned;
    let Create {
        step,
        retry,
        exit,
        inputs,
        instance,
        attempt,
    } = *create;
    let (index, step) = (compiled.step(&workflow.spec, step, exit.is_some()))
        .ok_or_else(|| PassError::Unbuildable(format!("planned step {step} is not in the spec")))?;
    let data = StepData {
        inputs: Some(inputs),
        outputs_read: compiled.flow.outputs_read(index, exit.is_some()),
        result_read: compiled.flow.result_read(index, exit.is_some()),
    };
    let kind = compiled.kind(index, exit.is_some());
    let mut job = jobs::StepJob::new(workflow, step, kind, &compiled.run);
    if let Some(agent) = &shared.agent {
        job = job.agent(agent);
    }
    let repository = (workflow.status.as_ref()).and_then(|s| s.artifact_repository.as_deref());
    let built = job
        .retry(retry)
        .exit(exit)
        .data(data)
        .instance(instance)
        .attempt(attempt)
        .repository(repository)
        .build();
    match built {
        Ok(job) => Ok(Ok(job)),
        Err(jobs::JobError::NoRepository(message)) => match (repository, unusable) {
            (None, Some(unusable)) => Ok(Err(unusable.to_string())),
            _ => Ok(Err(message)),
        },
        // A patch that cannot apply fails the step, saying why, as a refused Job does.
        Err(e @ jobs::JobError::PodSpec(..)) => Ok(Err(e.to_string())),
        Err(e) => Err(PassError::Unbuildable(e.to_string())),
    }
}

/// The name a refused Job's step is shown under: its instance's (`build[3]`, `run1/build`).
fn shown_name(workflow: &WorkFlow, create: &Create<'_>) -> String {
    fan_out::display_name(
        create.step,
        create.instance.run_index,
        workflow.spec.run_count(),
        create.instance.item.as_ref().map(|item| item.index),
    )
}

/// Creates `job`; one that exists already is this step's (its name is deterministic). A
/// refusal (422) goes to `refuse`; any other error, a 409 `Conflict` among them, fails the
/// pass, which is tried again.
async fn create_job(
    shared: &ControllerState,
    api: &Api<Job>,
    workflow: &WorkFlow,
    job: &Job,
    refuse: impl Fn(&'static str, String),
) -> Result<(), RequestFailed> {
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let job_name = job.name_any();
    match api.create(&params, job).await {
        Ok(created) => {
            if let Some(observed) = jobs::observe_job(&created.into(), Timestamp::now()) {
                let uid = workflow.uid().unwrap_or_default();
                shared.memory.created(&uid, observed);
            }
            Ok(())
        }
        Err(e) if exists_already(&e) => Ok(()),
        Err(e) => {
            // A slot of `--max-running-steps` taken for a Job not created is free again.
            if let Some(queue) = &shared.step_queue {
                let namespace = workflow.namespace().unwrap_or_default();
                queue.release(&(namespace, job_name.clone()));
            }
            match e {
                kube::Error::Api(e) if e.code == 422 => {
                    tracing::warn!(job = %job_name, message = %e.message, "the API server refused a step's job");
                    refuse(plan::REASON_JOB_REFUSED, e.message);
                    Ok(())
                }
                e => Err(RequestFailed::new(format!("creating job {job_name}"), e)),
            }
        }
    }
}

/// Stops the Job of a step past its timeout, keeping its pod and its log where it can (see
/// [`stop`]); a queued (suspended) Job is kept too, marked: it is the record of the timeout.
async fn time_out(api: &Api<Job>, job_name: &str, why: &str) -> Result<(), RequestFailed> {
    let stopping = Stopping {
        mark: jobs::time_out_mark(why),
        whole: jobs::time_out_patch(why),
        what: "stopping the timed-out",
        queued: Queued::Keep,
    };
    stop(api, job_name, stopping).await.map(|_| ())
}

/// How [`stop`] stops a running Job, and records why.
struct Stopping {
    /// The patch marking the Job with why it was stopped: the record the planner reads back.
    mark: serde_json::Value,
    /// The mark with a Job deadline already past, for a Job whose pod cannot be stopped alone.
    whole: serde_json::Value,
    /// What the errors say is being done, e.g. `stopping the timed-out`.
    what: &'static str,
    /// What becomes of a suspended Job, queued for Kueue: it has no pod, and its deadline does
    /// not count while it is suspended.
    queued: Queued,
}

/// What [`stop`] does to a suspended Job.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Queued {
    /// Mark it ([`Stopping::whole`]): the record of why its step failed.
    Keep,
    /// Delete it: it never ran a pod, so nothing of it is worth keeping, and Kueue would
    /// otherwise still admit it.
    Delete,
}

/// What [`stop`] did.
#[derive(Debug, PartialEq, Eq)]
enum Stopped {
    /// Stopped and kept (or gone already).
    Kept,
    /// A queued Job, deleted.
    Deleted,
}

/// Stops a running Job, keeping its pod and its log where it can: its running pods are given
/// a deadline already past ([`jobs::stop_pod_patch`]), which the kubelet enforces by stopping
/// them and keeping them (k8s.io/kubernetes pkg/kubelet/active_deadline.go); the failed pod
/// fails the Job, whose controller deletes only the pods still active when it fails
/// (pkg/controller/job/job_controller.go, `syncJob`: `exceedsBackoffLimit := jobCtx.failed >
/// *job.Spec.BackoffLimit`, then `deleteActivePods`); then the Job is marked (the record). A Job
/// with retries left would start another pod, and one without a running pod has none to stop:
/// those are stopped by their own deadline ([`Stopping::whole`]), the Job controller deleting
/// their pods.
async fn stop(
    api: &Api<Job>,
    job_name: &str,
    stopping: Stopping,
) -> Result<Stopped, RequestFailed> {
    let what = stopping.what;
    let job = match api.get_opt(job_name).await {
        Ok(Some(job)) => job,
        Ok(None) => return Ok(Stopped::Kept),
        Err(e) => return Err(RequestFailed::new(format!("{what} job {job_name}"), e)),
    };
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    if suspended && stopping.queued == Queued::Delete {
        delete_job(api, job_name).await?;
        return Ok(Stopped::Deleted);
    }
    let failed = job.status.as_ref().and_then(|s| s.failed).unwrap_or(0);
    // The Job controller's default `backoffLimit` is 6.
    let last_pod = job.spec.as_ref().and_then(|s| s.backoff_limit).unwrap_or(6) <= failed;
    let pods: Api<Pod> = Api::namespaced(
        api.clone().into_client(),
        &job.namespace().unwrap_or_default(),
    );
    let running = match last_pod && !suspended {
        true => running_pods(&pods, job_name).await?,
        false => Vec::new(),
    };
    if running.is_empty() {
        patch_job(api, job_name, stopping.whole, what).await?;
        return Ok(Stopped::Kept);
    }
    // The pods first: once the mark is there the planner asks nothing more of the Job, so a
    // pod left running by a failed request would run on.
    for pod in running {
        let patch = Patch::Merge(jobs::stop_pod_patch());
        match pods.patch(&pod, &PatchParams::default(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(RequestFailed::new(format!("{what} pod {pod}"), e)),
        }
    }
    patch_job(api, job_name, stopping.mark, what).await?;
    Ok(Stopped::Kept)
}

/// The names of the Job's pods that have not finished and are not being deleted, and that a
/// kubelet runs (bound to a node): only a kubelet enforces a pod's deadline, so one still
/// waiting for a node is stopped with its Job instead.
async fn running_pods(pods: &Api<Pod>, job_name: &str) -> Result<Vec<String>, RequestFailed> {
    let selector = format!("{JOB_NAME_LABEL}={job_name}");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| RequestFailed::new(format!("listing the pods of job {job_name}"), e))?;
    let not_running = |pod: &Pod| {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let unbound = pod.spec.as_ref().is_none_or(|s| s.node_name.is_none());
        matches!(phase, Some("Succeeded" | "Failed"))
            || pod.metadata.deletion_timestamp.is_some()
            || unbound
    };
    Ok(listed
        .items
        .iter()
        .filter(|pod| !not_running(pod))
        .map(ResourceExt::name_any)
        .collect())
}

/// Merge-patches a Job. A Job already gone is success: the next plan goes by the Jobs that
/// exist.
pub(super) async fn patch_job(
    api: &Api<Job>,
    name: &str,
    patch: serde_json::Value,
    what: &str,
) -> Result<(), RequestFailed> {
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(RequestFailed::new(format!("{what} job {name}"), e)),
    }
}

/// Deletes a Job with its pods (background propagation: the API's default for Jobs orphans the
/// pods, which would leave them running). A Job already gone is success.
pub(super) async fn delete_job(api: &Api<Job>, name: &str) -> Result<(), RequestFailed> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(RequestFailed::new(format!("deleting job {name}"), e)),
    }
}
