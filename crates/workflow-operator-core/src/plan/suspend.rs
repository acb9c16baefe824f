//! Suspend steps in the plan (`crd::suspend`): a suspend step's Job, created suspended, waits
//! until it is resumed. `workflow-operator resume` resumes it by annotating the Job; a step
//! with a `duration` is resumed by the planner once its Job is that old (the deadline comes
//! from the Job's creation time, which the API server keeps, not from the operator's memory,
//! so a restarted operator resumes it on time), and the next timer is set for it meanwhile.

use crate::crd::SuspendStep;

use super::planner::Planner;
use super::{Action, ObservedJob};

impl<'a> Planner<'a> {
    /// Whether the suspend step whose running Job is `job` is done waiting now: past its
    /// `duration` (resuming it, see [`Action::ResumeJob`]). Until then, the timer is set for
    /// its deadline, if it has one. A step resumed by `workflow-operator resume` is a Job read
    /// as succeeded already, and never comes here.
    pub(super) fn see_suspended(&mut self, job: &'a ObservedJob, suspend: &SuspendStep) -> bool {
        let Some(at) = suspend.deadline(job.created) else {
            return false;
        };
        if self.now < at {
            self.next_timeout_at = Some(self.next_timeout_at.map_or(at, |t| t.min(at)));
            return false;
        }
        if !job.deleting && self.settled.insert(&job.name) {
            self.actions.push(Action::ResumeJob {
                job_name: job.name.clone(),
                at,
            });
        }
        true
    }
}
