//! A WorkFlowTrigger's status and the runs its history limits delete, from the trigger and
//! its runs as they exist: pure, like a CronWorkFlow's tick, so a restarted operator decides
//! the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{problems, source_of};
use crate::crd::{WorkFlowTrigger, WorkFlowTriggerStatus};
use crate::cron::plan::{Run, beyond_limits, ready};

/// The condition type saying whether deliveries can start runs.
pub const CONDITION_READY: &str = "Ready";

/// What the controller does for a trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Follow {
    /// Finished runs beyond the history limits, oldest first.
    pub delete: Vec<String>,
    /// The new status, when it differs.
    pub status: Option<WorkFlowTriggerStatus>,
}

/// The status of `trigger` with `runs` (its runs that exist; `Run::scheduled` is when each
/// delivery was taken) at `now`, and the runs to delete.
pub fn follow(trigger: &WorkFlowTrigger, runs: &[Run], now: Timestamp) -> Follow {
    let old = trigger.status.clone().unwrap_or_default();
    let spec = &trigger.spec;
    let delete = beyond_limits(
        runs,
        spec.successful_runs_history_limit,
        spec.failed_runs_history_limit,
    );
    let kept: Vec<&Run> = runs.iter().filter(|r| !delete.contains(&r.name)).collect();
    let mut active: Vec<&Run> = kept.iter().copied().filter(|r| r.is_active()).collect();
    active.sort_by(|a, b| (a.scheduled, &a.name).cmp(&(b.scheduled, &b.name)));
    let problems = problems(trigger);
    let condition = match problems.is_empty() {
        true => ready(true, "Ready", "deliveries start runs", now, &old.conditions),
        false => ready(
            false,
            "InvalidTrigger",
            &problems.join("; "),
            now,
            &old.conditions,
        ),
    };
    let status = WorkFlowTriggerStatus {
        source: Some(source_of(trigger)),
        runs: i64::try_from(kept.len()).unwrap_or(i64::MAX),
        active: active.iter().map(|r| r.name.clone()).collect(),
        last_delivery_time: runs
            .iter()
            .map(|r| r.scheduled)
            .max()
            .and_then(|t| Timestamp::from_second(t).ok())
            .map(Time)
            .or(old.last_delivery_time.clone()),
        conditions: vec![condition],
    };
    Follow {
        delete,
        status: (status != old).then_some(status),
    }
}
