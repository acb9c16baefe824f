//! Clean-up of finished work: deleting a workflow `ttlSecondsAfterFinished` after it finished,
//! and deleting step pods as `spec.podCleanup` says while the workflow, its Jobs and its status
//! stay.
//!
//! **TTL.** A workflow whose status is `Completed` or `Failed` for its current generation is
//! due once its TTL (`spec.ttlSecondsAfterFinished`, else the operator's
//! `--default-ttl-seconds-after-finished`) has passed since it finished: the `Finished`
//! condition's `lastTransitionTime`, else `status-changed`. The deadline is read from the stored
//! status at every tick of the `ttl` timer ([`ttl_expired`] is its `when`, evaluated on the
//! mirror without an API call), never kept in memory, so a workflow that finished or expired
//! while the operator was down is deleted once it is back. As Kubernetes' TTL-after-finished
//! controller does for Jobs (`pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`:
//! finish time from the final condition, delete with a uid precondition, foreground
//! propagation), [`expire`] posts a `TTLExpired` Event and deletes the workflow; its Jobs and
//! pods go with it (the operator's `cleanup` delete handler and the owner references). Argo's
//! `ttlStrategy.secondsAfterCompletion` is the same rule.
//!
//! **Pods.** After each reconcile pass of a workflow with `spec.podCleanup`, [`PodCleanup`]
//! deletes the pods of the Jobs [`pods_to_delete`] picks, as Argo's pod GC does
//! (`workflow/controller/pod_cleanup.go`, `determinePodCleanupAction`): `OnSuccess` a succeeded
//! Job's, `OnCompletion` a succeeded Job's and a failed one's once the workflow has finished,
//! `OnWorkflowSuccess` and `OnWorkflowCompletion` every finished Job's once the workflow is
//! `Completed` (or finished either way). A failed step's pods outlive its Job because they are
//! the cause of the failure: every full planning pass of a running workflow reads it from them
//! again (`failure_cause::explain`, called by the handlers), so pods deleted earlier would turn
//! `step bad failed: exit code 3` back into the Job's `BackoffLimitExceeded` at the next pass
//! (seen in `tests/run_control_cleanup.rs`). Once the workflow is terminal, its message is final
//! and nothing reads them.
//!
//! Only Jobs that ended (`Complete` or `Failed` condition) are touched: Kubernetes' Job
//! controller leaves a finished Job alone (`pkg/controller/job/job_controller.go`, `syncJob`: "if
//! job was finished previously, we don't want to redo the termination"), so deleting its pods
//! neither creates new ones nor changes its status, whereas a running Job would replace them and
//! count a failure. A Job whose pods were deleted is annotated
//! ([`ANNOTATION_PODS_DELETED`]), so a restart neither repeats nor misses it; pods go first, so
//! a crash in between only deletes nothing again. Workflows without `podCleanup` cost one field
//! check a pass.

use std::collections::HashSet;
use std::sync::Arc;

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::shared::{ControllerState, FIELD_MANAGER};
use kube_kopf::{Context, HandlerError, HandlerResult};
use workflow_operator_core::crd::{
    CONDITION_FINISHED, PodCleanup as Policy, StepPhase, WorkFlow, WorkFlowStatus,
};
use workflow_operator_core::job_summary::{JobEnd, JobSummary};
use workflow_operator_core::jobs::ANNOTATION_PODS_DELETED;
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::plan::Compiled;
use workflow_operator_core::template;

/// The Event reason posted before a workflow is deleted for its TTL.
pub const TTL_EXPIRED: &str = "TTLExpired";

/// How often finished workflows are checked for an expired TTL: the TTL's precision.
pub const TTL_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// The label the API server puts on every pod of a Job, with the Job's uid, so that its pods
/// match only that Job (`pkg/registry/batch/job/strategy.go`, `generateSelector`; the legacy
/// key, set by every Kubernetes version beside `batch.kubernetes.io/controller-uid`).
const CONTROLLER_UID_LABEL: &str = "controller-uid";

/// Jobs whose pods are deleted at once (as the handlers' Job actions).
const DELETES_IN_FLIGHT: usize = 16;

/// When a finished workflow expires: when it finished, its TTL in seconds and where the TTL
/// came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    pub finished_at: Timestamp,
    pub ttl_seconds: i64,
    /// The TTL is the operator's default, not the workflow's own.
    pub by_default: bool,
}

impl Expiry {
    /// The moment the workflow is due for deletion (never, for a TTL past the calendar's end).
    pub fn at(&self) -> Timestamp {
        let ttl = k8s_openapi::jiff::SignedDuration::from_secs(self.ttl_seconds);
        self.finished_at.checked_add(ttl).unwrap_or(Timestamp::MAX)
    }

    /// The Event's (and the log's) words: `deleting: finished 3600s ago
    /// (ttlSecondsAfterFinished: 3600)`.
    pub fn message(&self, now: Timestamp) -> String {
        let ago = now.duration_since(self.finished_at).as_secs().max(0);
        let source = if self.by_default {
            "the operator's --default-ttl-seconds-after-finished"
        } else {
            "ttlSecondsAfterFinished"
        };
        format!(
            "deleting: finished {ago}s ago ({source}: {})",
            self.ttl_seconds
        )
    }
}

/// The workflow's expiry, if it has finished for its current spec and has a TTL (its own, else
/// `default_ttl`). `None` for a workflow being deleted, one whose terminal status is for an
/// older generation (its spec changed since), and one whose finish time cannot be read: on any
/// doubt, nothing is deleted.
pub fn expiry(workflow: &WorkFlow, default_ttl: Option<i64>) -> Option<Expiry> {
    let own = template::own_or_taken(workflow, |s| s.ttl_seconds_after_finished);
    let ttl_seconds = own.or(default_ttl)?;
    if workflow.meta().deletion_timestamp.is_some() {
        return None;
    }
    let status = workflow.status.as_ref()?;
    if !finished_for_current_spec(workflow, status) {
        return None;
    }
    Some(Expiry {
        finished_at: finished_at(status)?,
        ttl_seconds,
        by_default: own.is_none(),
    })
}

/// Whether the workflow's TTL has passed at `now`: the `ttl` timer's `when`. Cheap, as it runs
/// for every mirrored workflow at every tick: a field check for a workflow without a TTL.
pub fn ttl_expired(workflow: &WorkFlow, default_ttl: Option<i64>, now: Timestamp) -> bool {
    expiry(workflow, default_ttl).is_some_and(|e| e.at() <= now)
}

/// Whether `status` is terminal and was computed for the workflow's current generation (a
/// terminal status of an older spec is stale: the workflow runs again).
fn finished_for_current_spec(workflow: &WorkFlow, status: &WorkFlowStatus) -> bool {
    status.workflow_status.is_some_and(Phase::is_terminal)
        && status.observed_generation == workflow.metadata.generation
}

/// When the workflow finished: the `Finished=True` condition's transition, else
/// `status-changed` (statuses of operators that wrote no conditions).
fn finished_at(status: &WorkFlowStatus) -> Option<Timestamp> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FINISHED && c.status == "True")
        .map(|c| c.last_transition_time.0)
        .or_else(|| status.status_changed.as_deref()?.parse().ok())
}

/// The `ttl` timer's handler: posts `TTLExpired` and deletes the workflow (it is due: the
/// timer's `when` said so of this very object).
///
/// The delete carries the uid and resourceVersion of the object the deadline was computed from
/// as preconditions: a workflow re-created under the same name, or changed since (a new spec
/// runs again, a new TTL may not have passed), answers 409 and is looked at again at the next
/// tick, from the newer object. This replaces the re-read Kubernetes' controller makes before
/// deleting, without its extra request.
pub async fn expire(ctx: Context<WorkFlow>, default_ttl: Option<i64>) -> HandlerResult {
    let workflow = &ctx.object;
    let now = Timestamp::now();
    let Some(expiry) = expiry(workflow, default_ttl).filter(|e| e.at() <= now) else {
        return Ok(());
    };
    let message = expiry.message(now);
    let key = format!(
        "{}/{}",
        workflow.namespace().unwrap_or_default(),
        workflow.name_any()
    );
    tracing::info!(workflow = %key, reason = TTL_EXPIRED, "{message}");
    if let Err(error) = ctx.publish(EventType::Normal, TTL_EXPIRED, &message).await {
        tracing::warn!(%error, workflow = %key, "posting the TTLExpired event");
    }
    let params = DeleteParams::foreground().preconditions(Preconditions {
        uid: workflow.uid(),
        resource_version: workflow.resource_version(),
    });
    match ctx.api().delete(&workflow.name_any(), &params).await {
        Ok(_) => Ok(()),
        // Gone already, or not the object we judged: the next tick judges the one there is.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
            tracing::debug!(workflow = %key, message = %e.message, "not deleted for its TTL");
            Ok(())
        }
        Err(e) => Err(HandlerError::temporary(format!(
            "deleting the workflow for its TTL: {e}"
        ))),
    }
}

/// Whether the pods of `job` (a Job of `workflow`) are due for deletion under `policy`, the
/// workflow's status being `status` (the stored one).
fn pods_due(
    policy: Policy,
    workflow: &WorkFlow,
    status: Option<&WorkFlowStatus>,
    outputs_read: &HashSet<&str>,
    job: &JobSummary,
) -> bool {
    if job.pods_deleted || job.metadata.deletion_timestamp.is_some() {
        return false;
    }
    // A step's outputs live in its pod's termination message until the status records them:
    // the pod stays until then, unless the workflow ended (nothing reads them any more).
    let finished = status.is_some_and(|s| finished_for_current_spec(workflow, s));
    if !finished
        && job
            .step
            .as_deref()
            .is_some_and(|step| outputs_read.contains(step))
        && !outputs_recorded(status, job)
    {
        return false;
    }
    let Some(end) = job.status.as_ref().and_then(|s| s.ended.as_ref()) else {
        // Not finished: its pods are the Job controller's to run and replace.
        return false;
    };
    let workflow_phase = status
        .filter(|s| finished_for_current_spec(workflow, s))
        .and_then(|s| s.workflow_status);
    match policy {
        Policy::OnSuccess => matches!(end, JobEnd::Complete),
        Policy::OnCompletion => matches!(end, JobEnd::Complete) || workflow_phase.is_some(),
        Policy::OnWorkflowSuccess => workflow_phase == Some(Phase::Completed),
        Policy::OnWorkflowCompletion => workflow_phase.is_some(),
    }
}

/// Whether `status` records the outputs of `job`'s step, read from its pod.
fn outputs_recorded(status: Option<&WorkFlowStatus>, job: &JobSummary) -> bool {
    let name = job.metadata.name.as_deref();
    status.is_some_and(|s| {
        s.steps
            .iter()
            .any(|e| e.phase == StepPhase::Succeeded && e.job.as_deref() == name)
    })
}

/// The Jobs among `jobs` whose pods are due for deletion: owned by this very workflow (by uid)
/// and picked by its `spec.podCleanup` with its stored `status` (none without `podCleanup`),
/// but for those of the steps and exit steps whose outputs are read (`compiled.flow.read`,
/// `exit_read`) and not recorded yet.
pub fn pods_to_delete<'a>(
    workflow: &WorkFlow,
    compiled: &Compiled,
    status: Option<&WorkFlowStatus>,
    jobs: &'a [Arc<JobSummary>],
) -> Vec<&'a JobSummary> {
    let Some(policy) = workflow.spec.pod_cleanup else {
        return Vec::new();
    };
    let flow = &compiled.flow;
    let outputs_read: HashSet<&str> = match &compiled.dag {
        Ok(dag) => (flow.read.iter().map(|&i| dag.name(i)))
            .chain((compiled.exit.iter()).flat_map(|e| flow.exit_read.iter().map(|&i| e.name(i))))
            .collect(),
        Err(_) => HashSet::new(),
    };
    let uid = workflow.uid().unwrap_or_default();
    jobs.iter()
        .map(Arc::as_ref)
        .filter(|job| job.owner_references().iter().any(|o| o.uid == uid))
        .filter(|job| pods_due(policy, workflow, status, &outputs_read, job))
        .collect()
}

/// The pod clean-up that follows one reconcile pass of a workflow with `spec.podCleanup`.
pub struct PodCleanup {
    ctx: Context<WorkFlow>,
    /// The Jobs the pass was for; empty for a pass of another cause (a timer tick, a resume).
    changed: Vec<Arc<JobSummary>>,
}

impl PodCleanup {
    /// The clean-up to run after the pass for `ctx` (with `changed` Jobs), or `None` when the
    /// workflow does not ask for one.
    pub fn after(ctx: &Context<WorkFlow>, changed: &[Arc<JobSummary>]) -> Option<Self> {
        template::own_or_taken(&ctx.object, |s| s.pod_cleanup)?;
        Some(Self {
            ctx: ctx.clone(),
            changed: changed.to_vec(),
        })
    }

    /// Deletes the pods of every Job that is due, then marks it. A pass for changed Jobs of a
    /// running workflow looks at those Jobs only (the pass itself is O(their steps)); any
    /// other pass, and every pass of a finished workflow (which the planner plans in full),
    /// looks at all of them, so nothing a missed event would have triggered is left behind.
    ///
    /// # Errors
    /// A temporary error when a delete or a patch fails: the framework retries the pass.
    pub async fn run(self, shared: &ControllerState) -> HandlerResult {
        // The stored status (or our last write of it): the workflow has finished once it says so.
        let workflow = shared.status.latest(&self.ctx.object);
        if workflow.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        let status = workflow.status.as_ref();
        let finished = status.is_some_and(|s| finished_for_current_spec(&workflow, s));
        let jobs = if self.changed.is_empty() || finished {
            self.ctx.children::<JobSummary>()
        } else {
            self.changed
        };
        let prepared = shared.memory.compiled(&workflow);
        let planned = prepared.view(workflow.clone());
        let due = pods_to_delete(&planned, &prepared.compiled, status, &jobs);
        if due.is_empty() {
            return Ok(());
        }
        let namespace = workflow.namespace().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &namespace);
        let job_api: Api<Job> = Api::namespaced(self.ctx.client.clone(), &namespace);
        futures::stream::iter(due.into_iter().map(Ok))
            .try_for_each_concurrent(DELETES_IN_FLIGHT, |job| {
                delete_pods_of(&pods, &job_api, job)
            })
            .await?;
        Ok(())
    }
}

/// Deletes one Job's pods (one DELETE of the collection its uid label selects) and marks the
/// Job. Both are idempotent: a second delete finds nothing, a second mark sets the same key.
async fn delete_pods_of(pods: &Api<Pod>, jobs: &Api<Job>, job: &JobSummary) -> HandlerResult {
    let name = job.name_any();
    let uid = job.uid().unwrap_or_default();
    let selector = format!("{CONTROLLER_UID_LABEL}={uid}");
    let deleted = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
        .map_err(|e| HandlerError::temporary(format!("deleting the pods of job {name}: {e}")))?;
    let count = deleted.left().map_or(0, |list| list.items.len());
    tracing::debug!(job = %name, pods = count, "deleted a finished job's pods (podCleanup)");
    let patch = json!({"metadata": {"annotations": {
        ANNOTATION_PODS_DELETED: Timestamp::now().to_string(),
    }}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match jobs.patch(&name, &params, &Patch::Merge(patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(HandlerError::temporary(format!(
            "marking job {name} as cleaned up: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::SignedDuration;

    use workflow_operator_core::crd::{StepPhase, StepStatus};
    use workflow_operator_core::job_summary::{JobFailure, JobSummaryStatus};
    use workflow_operator_core::jobs::build_job;

    const FINISHED: &str = "2026-03-01T10:00:00Z";

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn secs(n: i64) -> SignedDuration {
        SignedDuration::from_secs(n)
    }

    /// A workflow in `phase` since [`FINISHED`] (with the `Finished` condition when terminal),
    /// for generation 1.
    fn workflow(phase: Phase, ttl: Option<i64>) -> WorkFlow {
        let mut wf = WorkFlow::test("w").step("a", &[]).step("b", &[]).build();
        wf.spec.ttl_seconds_after_finished = ttl;
        let conditions = phase
            .is_terminal()
            .then(|| Condition {
                type_: CONDITION_FINISHED.into(),
                status: "True".into(),
                reason: "Done".into(),
                message: String::new(),
                last_transition_time: Time(at(FINISHED)),
                observed_generation: Some(1),
            })
            .into_iter()
            .collect();
        wf.status = Some(WorkFlowStatus {
            workflow_status: Some(phase),
            status_changed: Some(FINISHED.into()),
            observed_generation: Some(1),
            conditions,
            ..WorkFlowStatus::default()
        });
        wf
    }

    #[test]
    fn a_finished_workflow_is_due_its_ttl_after_it_finished_not_before() {
        for phase in [Phase::Completed, Phase::Failed] {
            let wf = workflow(phase, Some(60));
            let finished = at(FINISHED);
            assert!(!ttl_expired(&wf, None, finished + secs(59)), "{phase}");
            assert!(ttl_expired(&wf, None, finished + secs(60)), "{phase}");
            assert!(ttl_expired(&wf, None, finished + secs(3600)), "{phase}");
        }
        // A TTL past the calendar's end never expires (and does not overflow).
        assert!(!ttl_expired(
            &workflow(Phase::Completed, Some(i64::MAX)),
            None,
            at(FINISHED) + secs(1_000_000_000)
        ));
        // 0: due as soon as it finished.
        assert!(ttl_expired(
            &workflow(Phase::Completed, Some(0)),
            None,
            at(FINISHED)
        ));
    }

    #[test]
    fn a_workflow_still_running_or_without_a_ttl_is_never_due() {
        let late = at(FINISHED) + secs(1_000_000);
        for phase in [
            Phase::Created,
            Phase::Queued,
            Phase::Started,
            Phase::Suspended,
        ] {
            assert!(!ttl_expired(&workflow(phase, Some(1)), Some(1), late));
        }
        assert!(!ttl_expired(&workflow(Phase::Completed, None), None, late));
        assert_eq!(expiry(&workflow(Phase::Completed, None), None), None);
    }

    #[test]
    fn the_operators_default_applies_only_where_the_spec_says_nothing() {
        let finished = at(FINISHED);
        let unset = workflow(Phase::Completed, None);
        let by_default = expiry(&unset, Some(30)).unwrap();
        assert_eq!((by_default.ttl_seconds, by_default.by_default), (30, true));
        assert!(ttl_expired(&unset, Some(30), finished + secs(30)));
        // The workflow's own TTL wins, longer or shorter.
        let own = workflow(Phase::Completed, Some(300));
        assert!(!ttl_expired(&own, Some(30), finished + secs(30)));
        let own = expiry(&own, Some(30)).unwrap();
        assert_eq!((own.ttl_seconds, own.by_default), (300, false));
    }

    #[test]
    fn a_stale_terminal_status_or_a_deletion_under_way_is_not_due() {
        let late = at(FINISHED) + secs(1_000);
        // The spec changed after it finished: it runs again.
        let mut changed = workflow(Phase::Completed, Some(1));
        changed.metadata.generation = Some(2);
        assert!(!ttl_expired(&changed, None, late));
        let mut deleting = workflow(Phase::Completed, Some(1));
        deleting.metadata.deletion_timestamp = Some(Time(late));
        assert!(!ttl_expired(&deleting, None, late));
    }

    #[test]
    fn the_finish_time_is_the_finished_condition_else_the_status_change() {
        let mut wf = workflow(Phase::Failed, Some(10));
        let status = wf.status.as_mut().unwrap();
        status.status_changed = Some("2026-03-01T09:00:00Z".into());
        assert_eq!(expiry(&wf, None).unwrap().finished_at, at(FINISHED));
        let status = wf.status.as_mut().unwrap();
        status.conditions.clear();
        assert_eq!(
            expiry(&wf, None).unwrap().finished_at,
            at("2026-03-01T09:00:00Z")
        );
        // Nothing readable: never deleted on a guess.
        wf.status.as_mut().unwrap().status_changed = Some("yesterday".into());
        assert_eq!(expiry(&wf, None), None);
    }

    #[test]
    fn the_message_says_how_long_ago_and_which_ttl() {
        let own = expiry(&workflow(Phase::Completed, Some(3600)), None).unwrap();
        assert_eq!(
            own.message(at(FINISHED) + secs(3600)),
            "deleting: finished 3600s ago (ttlSecondsAfterFinished: 3600)"
        );
        let default = expiry(&workflow(Phase::Failed, None), Some(5)).unwrap();
        assert_eq!(
            default.message(at(FINISHED) + secs(7)),
            "deleting: finished 7s ago (the operator's --default-ttl-seconds-after-finished: 5)"
        );
    }

    /// Step `step`'s Job of `wf`, ended as `end` (running if `None`).
    fn job(wf: &WorkFlow, step: &str, end: Option<JobEnd>) -> Arc<JobSummary> {
        let spec = wf
            .spec
            .containers
            .iter()
            .find(|s| s.step_name == step)
            .unwrap();
        let mut job: JobSummary = build_job(wf, spec, "r1").unwrap().into();
        job.metadata.uid = Some(format!("job-uid-{step}"));
        job.status = Some(JobSummaryStatus {
            ended: end,
            ..JobSummaryStatus::default()
        });
        Arc::new(job)
    }

    fn failed() -> Option<JobEnd> {
        Some(JobEnd::Failed(Box::new(JobFailure {
            reason: Some("BackoffLimitExceeded".into()),
            message: None,
            at: None,
        })))
    }

    /// The steps whose Jobs' pods are due, for `wf` with `policy` and these Jobs.
    fn due(wf: &WorkFlow, policy: Option<Policy>, jobs: &[Arc<JobSummary>]) -> Vec<String> {
        let mut wf = wf.clone();
        wf.spec.pod_cleanup = policy;
        pods_to_delete(&wf, &Compiled::new(&wf.spec), wf.status.as_ref(), jobs)
            .into_iter()
            .filter_map(|j| j.step.clone())
            .collect()
    }

    /// A running workflow with a succeeded step `a`, a failed `b`, a running `c`, `d` cleaned
    /// up already and `e` being deleted (all Jobs finished but `c`).
    fn running_with_every_kind_of_job() -> (WorkFlow, Vec<Arc<JobSummary>>) {
        let mut wf = WorkFlow::test("w")
            .step("a", &[])
            .step("b", &[])
            .step("c", &[])
            .step("d", &[])
            .step("e", &[])
            .fail_fast(false)
            .build();
        wf.status = Some(WorkFlowStatus {
            workflow_status: Some(Phase::Started),
            observed_generation: Some(1),
            ..WorkFlowStatus::default()
        });
        let mut cleaned = (*job(&wf, "d", Some(JobEnd::Complete))).clone();
        cleaned.pods_deleted = true;
        let mut deleting = (*job(&wf, "e", Some(JobEnd::Complete))).clone();
        deleting.metadata.deletion_timestamp = Some(Time(at(FINISHED)));
        let jobs = vec![
            job(&wf, "a", Some(JobEnd::Complete)),
            job(&wf, "b", failed()),
            job(&wf, "c", None),
            Arc::new(cleaned),
            Arc::new(deleting),
        ];
        (wf, jobs)
    }

    #[test]
    fn without_pod_cleanup_no_pod_is_ever_deleted() {
        let (mut wf, jobs) = running_with_every_kind_of_job();
        wf.status.as_mut().unwrap().workflow_status = Some(Phase::Failed);
        assert!(due(&wf, None, &jobs).is_empty());
    }

    #[test]
    fn on_success_deletes_the_pods_of_succeeded_jobs_only_once() {
        let (wf, jobs) = running_with_every_kind_of_job();
        assert_eq!(due(&wf, Some(Policy::OnSuccess), &jobs), ["a"]);
    }

    #[test]
    fn a_pod_whose_outputs_are_read_stays_until_the_status_records_them() {
        let mut wf = workflow(Phase::Started, None);
        wf.spec.containers[1].depends_on = vec!["a".into()];
        wf.spec.containers[1].command = Some(vec!["echo".into(), "{{steps.a.outputs.x}}".into()]);
        let jobs = [job(&wf, "a", Some(JobEnd::Complete))];
        assert!(due(&wf, Some(Policy::OnSuccess), &jobs).is_empty());
        let a_job = jobs[0].name_any();
        wf.status.as_mut().unwrap().steps.push(StepStatus {
            name: "a".into(),
            phase: StepPhase::Succeeded,
            started_at: None,
            finished_at: None,
            attempts: None,
            exit_code: None,
            reason: None,
            message: None,
            job: Some(a_job),
            ip: None,
            outputs: [("x".to_string(), "1".to_string())].into(),
            items: None,
        });
        assert_eq!(due(&wf, Some(Policy::OnSuccess), &jobs), ["a"]);
    }

    #[test]
    fn on_completion_keeps_a_failed_steps_pods_until_the_workflow_finished() {
        let (mut wf, jobs) = running_with_every_kind_of_job();
        assert_eq!(due(&wf, Some(Policy::OnCompletion), &jobs), ["a"]);
        // b's failure is in the status, explained from its pods; the next full pass of the
        // running workflow reads them again, so they stay.
        let b_job = jobs[1].name_any();
        wf.status.as_mut().unwrap().steps.push(StepStatus {
            name: "b".into(),
            phase: StepPhase::Failed,
            started_at: None,
            finished_at: None,
            attempts: Some(1),
            exit_code: Some(2),
            reason: Some("Error".into()),
            message: None,
            job: Some(b_job),
            ip: None,
            outputs: Default::default(),
            items: None,
        });
        assert_eq!(due(&wf, Some(Policy::OnCompletion), &jobs), ["a"]);
        // Finished: its message is final, and nothing reads the pods again.
        wf.status.as_mut().unwrap().workflow_status = Some(Phase::Failed);
        assert_eq!(due(&wf, Some(Policy::OnCompletion), &jobs), ["a", "b"]);
    }

    #[test]
    fn workflow_policies_wait_for_the_workflow_to_finish_and_never_touch_a_running_job() {
        let (mut wf, jobs) = running_with_every_kind_of_job();
        for policy in [Policy::OnWorkflowSuccess, Policy::OnWorkflowCompletion] {
            assert!(due(&wf, Some(policy), &jobs).is_empty(), "{policy:?}");
        }
        wf.status.as_mut().unwrap().workflow_status = Some(Phase::Failed);
        assert!(due(&wf, Some(Policy::OnWorkflowSuccess), &jobs).is_empty());
        assert_eq!(
            due(&wf, Some(Policy::OnWorkflowCompletion), &jobs),
            ["a", "b"]
        );
        wf.status.as_mut().unwrap().workflow_status = Some(Phase::Completed);
        assert_eq!(due(&wf, Some(Policy::OnWorkflowSuccess), &jobs), ["a", "b"]);
        // A terminal status of an older spec is not this run's end.
        wf.metadata.generation = Some(2);
        assert!(due(&wf, Some(Policy::OnWorkflowCompletion), &jobs).is_empty());
    }

    #[test]
    fn jobs_of_another_workflow_of_the_same_name_are_never_picked() {
        let (wf, jobs) = running_with_every_kind_of_job();
        let mut recreated = wf.clone();
        recreated.metadata.uid = Some("another-uid".into());
        assert!(due(&recreated, Some(Policy::OnSuccess), &jobs).is_empty());
    }
}
