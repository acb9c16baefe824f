//! Reading why a step failed or did not start, from the Kubernetes API: the failed Job's pods,
//! and for a Job without a started pod its pods and Events. The explanation itself is the core's
//! pure [`failure_cause`](workflow_operator_core::failure_cause); this module does the reading.
//!
//! Reading it costs one pod list per failed step, made only on the failure path (the full
//! planner runs on a step's failure, see `incremental::Fallback::StepFailed`), never for a
//! success. A Job still without a started pod is read only at its start deadline (see
//! `plan::ObservedJob::start_deadline`).

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::ListParams;
use workflow_operator_core::crd::{UNLIMITED, WorkFlowSpec};
use workflow_operator_core::dag::Dag;
use workflow_operator_core::failure_cause::{
    JOB_NAME_LABEL, StartCause, describe, pod_deleted, start_cause,
};
use workflow_operator_core::plan::{DEADLINE_EXCEEDED, JobState, ObservedJob};

/// Replaces the Job condition's reason and message of each failed Job in `observed` (not timed
/// out, nor stopped by its workflow: the planner does not read those from the Job) with the
/// cause read from its pods: an evicted pod's `Evicted`, a failed
/// container's exit, or for a Job whose pods are all gone `PodDeleted` (a pod deleted before it
/// finished, as an evicted one is once its Job counted it). A Job whose pods cannot be listed
/// keeps what its condition says.
pub async fn explain(pods: &Api<Pod>, observed: &mut [ObservedJob]) {
    for job in observed.iter_mut().filter(|job| !job.stopped) {
        let JobState::Failed {
            reason,
            message,
            exit_code,
        } = &mut job.state
        else {
            continue;
        };
        if reason == DEADLINE_EXCEEDED || exit_code.is_some() {
            continue;
        }
        let selector = format!("{JOB_NAME_LABEL}={}", job.name);
        match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => {
                let found = match describe(&list.items) {
                    None if list.items.is_empty() => Some(pod_deleted()),
                    found => found,
                };
                if let Some(cause) = found {
                    *exit_code = cause.exit_code;
                    *reason = cause.reason;
                    *message = cause.message;
                }
            }
            Err(error) => {
                tracing::debug!(%error, job = %job.name, "reading the failed job's pods");
            }
        }
    }
}

/// Reads the pods of each running Job in `observed` that has no started pod past its start
/// deadline or its step's timeout (one pod list each; an Event list too when it has no pod),
/// and records what they say: a container that did start (the Job's status lags) marks the
/// Job started; otherwise [`start_cause`] is the Job's `start_failure` (past the start
/// deadline, `its pod did not start in Ns` when nothing says why). A Job whose pods cannot be
/// read keeps waiting: the next pass reads them again.
pub async fn explain_start(
    pods: &Api<Pod>,
    events: &Api<Event>,
    spec: &WorkFlowSpec,
    dag: Option<&Dag>,
    observed: &mut [ObservedJob],
    now: Timestamp,
) {
    for job in observed.iter_mut() {
        let JobState::Active { since } = job.state else {
            continue;
        };
        if !job.may_fail_to_start() {
            continue;
        }
        let start_over = job
            .start_deadline(spec.start_timeout)
            .is_some_and(|at| now >= at);
        // The step by its index: a scan of the steps per Job is O(steps²) at 10,000 steps.
        let timeout = dag
            .and_then(|dag| dag.index_of(&job.step))
            .and_then(|i| spec.containers.get(i))
            .map_or(spec.max_step_timeout, |s| spec.effective_timeout(s));
        let run_over =
            timeout != UNLIMITED && now.duration_since(since) >= SignedDuration::from_secs(timeout);
        if !(start_over || run_over) {
            continue;
        }
        let selector = format!("{JOB_NAME_LABEL}={}", job.name);
        let listed = match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list.items,
            Err(error) => {
                tracing::debug!(%error, job = %job.name, "reading the pods of a job not started");
                continue;
            }
        };
        let failed_creates = if listed.is_empty() {
            let fields = format!("involvedObject.name={}", job.name);
            match events.list(&ListParams::default().fields(&fields)).await {
                Ok(list) => list.items,
                Err(error) => {
                    tracing::debug!(%error, job = %job.name, "reading the events of a job");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        match start_cause(&listed, &failed_creates, &job.name) {
            StartCause::Started => job.pod_started = true,
            // At the step's timeout, a pod that says nothing leaves it timed out, as before.
            StartCause::NotStarted(None) if !start_over => {}
            StartCause::NotStarted(why) => {
                job.start_failure = Some(why.unwrap_or_else(|| {
                    let waited = now.duration_since(job.created).as_secs();
                    format!("its pod did not start in {waited}s")
                }));
            }
        }
    }
}
