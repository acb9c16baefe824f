//! Run control: deleting Jobs of other runs, stopping (and keeping) a failed workflow's running
//! steps, `spec.retry`, an invalid workflow, and how exit steps change a workflow's end.

use crate::dag::DagError;
use crate::lifecycle::{Phase, Trigger};

use super::planner::{Outcome, Planner};
use super::{Action, JobState, ObservedJob, StopReason};

impl<'a> Planner<'a> {
    /// Whether `job` may be acted on by this plan: not on its way out, not stopped already,
    /// not acted on yet. Marks it acted on.
    fn settle(&mut self, job: &'a ObservedJob) -> bool {
        !job.deleting && !job.stopped && self.settled.insert(&job.name)
    }

    /// Deletes `job` of an earlier run (see [`Action::DeleteJob`]).
    fn delete_old(&mut self, job: &'a ObservedJob) {
        if self.settle(job) {
            let job_name = job.name.clone();
            self.actions.push(Action::DeleteJob { job_name });
        }
    }

    /// Stops `job` and keeps it (see [`Action::StopJob`]).
    fn stop(&mut self, job: &'a ObservedJob, reason: StopReason) {
        if self.settle(job) {
            self.stopping.insert(&job.name);
            let job_name = job.name.clone();
            self.actions.push(Action::StopJob { job_name, reason });
        }
    }

    /// Whether `job` is stopped by the workflow: marked so, or being stopped by this plan.
    pub(super) fn is_stopped(&self, job: &ObservedJob) -> bool {
        job.stopped || self.stopping.contains(job.name.as_str())
    }

    /// Stops the Job of a step past its timeout and keeps it (see [`Action::TimeOutJob`]); a
    /// failed workflow then does not delete it with its running Jobs.
    pub(super) fn time_out(&mut self, job: &'a ObservedJob, why: String) {
        if self.settled.insert(&job.name) {
            self.actions.push(Action::TimeOutJob {
                job_name: job.name.clone(),
                why,
            });
        }
    }

    /// Stops the Job of a step whose pod did not start and keeps it (see
    /// [`Action::FailStart`]).
    pub(super) fn fail_start(&mut self, job: &'a ObservedJob, why: String) {
        if self.settled.insert(&job.name) {
            self.actions.push(Action::FailStart {
                job_name: job.name.clone(),
                why,
            });
        }
    }

    pub(super) fn delete_other_runs(&mut self, jobs: &'a [ObservedJob]) {
        let run = self.run;
        for job in jobs.iter().filter(|j| j.run != run) {
            self.delete_old(job);
        }
    }

    /// Stops the current run's Jobs that still run, keeping them (a failed workflow stops its
    /// steps). A timed-out step's Job is not one of them: it is stopping already, and it is
    /// the record.
    pub(super) fn stop_running(&mut self, current: &[&'a ObservedJob], reason: StopReason) {
        for &job in current {
            if matches!(job.state, JobState::Active { .. }) {
                self.stop(job, reason);
            }
        }
    }

    /// Stops the daemon steps still running once the workflow ended (Argo stops one when the
    /// template that started it ends; here it lives as long as its workflow): their steps stay
    /// done. A daemon that was not ready yet is stopped as a failed workflow's running step.
    pub(super) fn stop_daemons(&mut self, current: &[&'a ObservedJob]) {
        for &job in current {
            if job.daemoned.is_some() && matches!(job.state, JobState::Active { .. }) {
                self.stop(job, StopReason::DaemonEnded);
            }
        }
    }

    /// A finished workflow's Jobs: a failed one's running steps are stopped, and any
    /// workflow's daemons (the pass that ended it stopped them, unless its actions were lost).
    pub(super) fn keep_terminal(&mut self, current: &[&'a ObservedJob]) {
        self.stop_daemons(current);
        if self.phase == Phase::Failed {
            self.stop_running(current, StopReason::WorkflowFailed);
        }
    }

    /// A failed workflow whose `spec.retry` is above the retry its status describes is retried:
    /// `Failed -> Created`, and the steps that did not succeed run again (see
    /// [`Planner::assess`]). Only a failed workflow of the current run: a completed one has
    /// nothing to retry, and a new run starts from scratch anyway.
    pub(super) fn retry_if_asked(&mut self) {
        let retry = self.workflow.spec.retry;
        let previous = self.previous.retry.unwrap_or(0);
        let same_run = self.previous.run.as_deref() == Some(self.run);
        if self.phase == Phase::Failed && same_run && retry > previous {
            self.go(
                Trigger::Retried,
                format!("retry {retry}: running again the steps that did not succeed"),
            );
        }
    }

    pub(super) fn fail_invalid(&mut self, error: &DagError, current: &[&'a ObservedJob]) {
        let message = format!("invalid workflow: {error}");
        self.go(Trigger::InvalidSpec, message.clone());
        self.stop_running(current, StopReason::WorkflowFailed);
        self.outcome = Some(Outcome {
            message: Some(message),
            executed: Vec::new(),
            started: Vec::new(),
            steps: Vec::new(),
            total: self.workflow.spec.containers.len(),
            failed_by: Some(Trigger::InvalidSpec),
        });
    }
}
