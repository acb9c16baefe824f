//! Why a step that ran has no pod left to read the log of: what `workflow-operator logs` says
//! on stderr and the web view's step panel says in place of the log. Pure: from the step's row
//! ([`crate::step_view`]), the workflow's Jobs as read from the API, and the workflow.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use kube::ResourceExt;

use crate::crd::{StepPhase, WorkFlow};
use crate::labels::{
    ANNOTATION_CANNOT_START, ANNOTATION_PODS_DELETED, ANNOTATION_STOPPED, ANNOTATION_TIMED_OUT,
};
use crate::plan::DEADLINE_EXCEEDED;
use crate::step_view::StepView;

/// Why the pods of the step `view` shows are gone, for a step whose pods are not found, or
/// `None` when it has none to show: it has not run a pod (not yet, or a cached or refused step
/// never does), or it runs and its pod may be yet to come. Its Job's marks and conditions say
/// who deleted them; a step whose Job is gone too says how the workflow stopped it.
pub fn why_pods_gone(view: &StepView, jobs: &[Job], workflow: &WorkFlow) -> Option<String> {
    let finished = matches!(
        view.phase,
        StepPhase::Succeeded | StepPhase::Failed | StepPhase::TimedOut
    );
    let job_name = view
        .job
        .as_deref()
        .filter(|_| finished && view.attempts > 0)?;
    let Some(job) = jobs.iter().find(|job| job.name_any() == job_name) else {
        let said = [view.reason.as_deref(), view.message.as_deref()];
        let said: Vec<&str> = said.into_iter().flatten().collect();
        return Some(format!(
            "its Job {job_name} was deleted, and its pods with it ({})",
            said.join(": ")
        ));
    };
    let annotations = job.annotations();
    if annotations.contains_key(ANNOTATION_PODS_DELETED) {
        // The variants are named as the spec spells them.
        let policy = workflow.spec.pod_cleanup.map(|p| format!("{p:?}"));
        return Some(format!(
            "its pods were deleted once it finished (spec.podCleanup: {})",
            policy.unwrap_or_default()
        ));
    }
    if let Some(why) = annotations.get(ANNOTATION_CANNOT_START) {
        return Some(format!("its pod never started ({why})"));
    }
    let stopped_by = |what: &str, why: &str| {
        format!(
            "the operator stopped its Job {job_name} {what} ({why}), and the Job controller \
             deleted its pods"
        )
    };
    if let Some(why) = annotations.get(ANNOTATION_TIMED_OUT) {
        return Some(stopped_by("at its timeout", why));
    }
    if let Some(why) = annotations.get(ANNOTATION_STOPPED) {
        return Some(stopped_by("with the workflow", why));
    }
    let failed = |c: &&JobCondition| c.type_ == "Failed" && c.status == "True";
    let condition = (job.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(failed));
    if condition.is_some_and(|c| c.reason.as_deref() == Some(DEADLINE_EXCEEDED)) {
        return Some(format!(
            "the Job controller deleted its pods at its Job {job_name}'s activeDeadlineSeconds"
        ));
    }
    Some(format!(
        "its pods were deleted (its Job {job_name} is kept)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::crd::PodCleanup;
    use crate::jobs::{build_job, stop_patch};

    #[test]
    fn a_stopped_steps_pods_are_gone_as_the_clean_up_or_the_job_controller_took_them() {
        let mut wf = WorkFlow::test("w").step("long", &[]).build();
        let mut job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let mut value = serde_json::to_value(&job).unwrap();
        json_patch::merge(&mut value, &stop_patch("spec.shutdown: Terminate"));
        job = serde_json::from_value(value).unwrap();
        let view = StepView {
            attempts: 1,
            job: Some(job.name_any()),
            ..StepView::empty("long", StepPhase::Failed)
        };
        let jobs = [job];
        assert_eq!(
            why_pods_gone(&view, &jobs, &wf).as_deref(),
            Some(
                format!(
                    "the operator stopped its Job {} with the workflow (spec.shutdown: \
                     Terminate), and the Job controller deleted its pods",
                    jobs[0].name_any()
                )
                .as_str()
            )
        );
        let [mut job] = jobs;
        job.annotations_mut().insert(
            ANNOTATION_PODS_DELETED.into(),
            "2026-01-01T00:00:00Z".into(),
        );
        wf.spec.pod_cleanup = Some(PodCleanup::OnWorkflowCompletion);
        assert_eq!(
            why_pods_gone(&view, &[job], &wf).as_deref(),
            Some("its pods were deleted once it finished (spec.podCleanup: OnWorkflowCompletion)")
        );
        let waiting = StepView::empty("long", StepPhase::Running);
        assert_eq!(why_pods_gone(&waiting, &[], &wf), None);
    }
}
