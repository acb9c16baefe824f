//! Deadlines: each running Job's `activeDeadlineSeconds` kept as its step's timeout asks, the
//! workflow's own `activeDeadlineSeconds`, and when the next timeout falls, for the timer.
//!
//! The operator stops a step at its timeout (counted from its Job's `startTime`) by giving its
//! running pod an `activeDeadlineSeconds` already past ([`Action::TimeOutJob`]): the kubelet
//! stops the pod and keeps it, so the step's log stays readable
//! (k8s.io/kubernetes pkg/kubelet/active_deadline.go). The Job's own deadline is only a backstop
//! ([`backstop_deadline_seconds`]), for when the operator is not there to stop the step: at it
//! the Job controller deletes the Job's running pods, and their logs with them
//! (pkg/controller/job/job_controller.go, `deleteActivePods` once `pastActiveDeadline`). The
//! timeout is not put on the pod template: a pod's deadline may be lowered but never raised or
//! removed, and a raised `maxStepTimeout` reaches running steps.

use std::collections::HashMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::crd::OptionNum;
use crate::crd::{Step, UNLIMITED, WorkFlow};
use crate::lifecycle::Phase;
use crate::names;

use super::planner::{Planner, View};
use super::{Action, JobState, ObservedJob};

/// When the next running step of `workflow` times out, for a timer; `None` when nothing can
/// time out (no running step with a limit, or a terminal workflow of the current run). The
/// same as [`Plan::next_timeout_at`](super::Plan::next_timeout_at) when nothing else changes.
pub fn next_timeout_at(workflow: &WorkFlow, jobs: &[ObservedJob]) -> Option<Timestamp> {
    let run = names::run_id(&workflow.spec);
    let status = workflow.status.as_ref();
    let terminal = status
        .and_then(|s| s.workflow_status)
        .is_some_and(Phase::is_terminal);
    let same_run = status
        .and_then(|s| s.run.as_deref())
        .is_none_or(|r| r == run);
    if terminal && same_run {
        return None;
    }
    let timeouts: HashMap<&str, i64> = workflow
        .spec
        .containers
        .iter()
        .chain(&workflow.spec.on_exit)
        .map(|s| (s.step_name.as_str(), workflow.spec.effective_timeout(s)))
        .collect();
    let start_timeout = workflow.spec.start_timeout;
    let started = status.and_then(|s| s.started_at.as_ref()).map(|t| t.0);
    let workflow_deadline = workflow_deadline(workflow, started);
    let steps = jobs
        .iter()
        .filter(|j| j.run == run && !j.deleting)
        .filter_map(|j| match j.state {
            JobState::Active { since } => {
                let run_deadline = deadline(since, *timeouts.get(j.step.as_str())?);
                run_deadline
                    .into_iter()
                    .chain(j.start_deadline(start_timeout))
                    .min()
            }
            _ => None,
        });
    steps.chain(workflow_deadline).min()
}

/// When `workflow` (whose steps started at `started`, else at its creation) passes its
/// `activeDeadlineSeconds`, if it has one.
fn workflow_deadline(workflow: &WorkFlow, started: Option<Timestamp>) -> Option<Timestamp> {
    let limit = workflow.spec.active_deadline_seconds.num()?;
    let since = started.or_else(|| Some(workflow.metadata.creation_timestamp.as_ref()?.0))?;
    deadline(since, limit)
}

/// `since + timeout`, or `None` for an unlimited timeout.
pub(super) fn deadline(since: Timestamp, timeout: i64) -> Option<Timestamp> {
    if timeout == UNLIMITED {
        return None;
    }
    since.checked_add(SignedDuration::from_secs(timeout)).ok()
}

/// The `activeDeadlineSeconds` for a timeout: none for unlimited, at least 1 (Kubernetes
/// rejects 0).
pub fn job_deadline_seconds(timeout: i64) -> Option<i64> {
    (timeout != UNLIMITED).then_some(timeout.max(1))
}

/// How much longer than its step's timeout a Job runs before its own deadline, the backstop,
/// stops it (deleting its pods): room for the operator to stop the step at its timeout and for
/// the kubelet's stop of the pod (its `terminationGracePeriodSeconds`, 30 by default).
pub const POD_DEADLINE_SLACK_SECONDS: i64 = 60;

/// The Job `activeDeadlineSeconds` for a step's `timeout`: [`POD_DEADLINE_SLACK_SECONDS`] past
/// it, none for unlimited.
pub fn backstop_deadline_seconds(timeout: i64) -> Option<i64> {
    Some(job_deadline_seconds(timeout)? + POD_DEADLINE_SLACK_SECONDS)
}

impl<'a> Planner<'a> {
    /// When the workflow passes its `activeDeadlineSeconds`, if it has one.
    pub(super) fn workflow_deadline(&self) -> Option<Timestamp> {
        workflow_deadline(self.workflow, self.started_at)
    }

    /// Why the workflow must stop now: it is past its `activeDeadlineSeconds`.
    pub(super) fn past_deadline(&self) -> Option<String> {
        let at = self.workflow_deadline().filter(|at| self.now >= *at)?;
        let limit = self
            .workflow
            .spec
            .active_deadline_seconds
            .num()
            .unwrap_or_default();
        Some(format!(
            "the workflow ran past its activeDeadlineSeconds of {limit}s (at {at:.0})"
        ))
    }

    /// Keeps running Jobs' deadlines equal to their steps' current timeouts, and finds the
    /// next timeout for the timer.
    pub(super) fn plan_deadlines(&mut self, view: &View<'_>, steps: &[Step]) {
        let spec = &self.workflow.spec;
        let items = view
            .fans
            .iter()
            .flat_map(|(&i, fan)| fan.jobs.values().map(move |job| (i, *job)));
        let plain = view
            .job_of
            .iter()
            .enumerate()
            .filter_map(|(i, job)| Some((i, (*job)?)));
        let mut changes = Vec::new();
        for (i, job) in plain.chain(items) {
            let JobState::Active { since } = job.state else {
                continue;
            };
            // A Job stopped by the workflow keeps the deadline that stops it, and no timer.
            if job.deleting || job.stopped || self.settled.contains(job.name.as_str()) {
                continue;
            }
            if self.queued_for_kueue(job) {
                // Queued: only its queue's clock runs.
                let queue_deadline = spec
                    .queue_timeout
                    .filter(|_| job.suspended)
                    .and_then(|limit| deadline(job.queued_since(), limit));
                if let Some(at) = queue_deadline {
                    self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
                }
                continue;
            }
            if let Some(at) = job.start_deadline(spec.start_timeout) {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
            let timeout = spec.effective_timeout(&steps[i]);
            let want = backstop_deadline_seconds(timeout);
            if job.active_deadline_seconds != want {
                changes.push(Action::SetJobDeadline {
                    job_name: job.name.clone(),
                    active_deadline_seconds: want,
                });
            }
            if let Some(at) = deadline(since, timeout) {
                self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            }
        }
        self.actions.extend(changes);
        for at in view.backing_off.values().filter_map(|waiting| waiting.at) {
            self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
        }
    }
}
