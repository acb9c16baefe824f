//! Rules on a run's metrics (`spec.rules`) and what they did (`status.rules`,
//! `status.parallelism`, `status.metrics`): a CEL expression over the steps' metrics across
//! runs that, once true, changes how the workflow goes on. Decided by [`crate::rules`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most rules a workflow may have.
pub const MAX_RULES: u32 = 16;

/// The most times a rule may fire: its firings are kept in the status.
pub const MAX_REPETITIONS: i32 = 100;

/// A rule: when `when` holds, `action` fires, at most `repetitions` times, at least
/// `backoff` step completions apart.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "!has(self.minParallelism) || !has(self.maxParallelism) || self.minParallelism <= self.maxParallelism", "message": "minParallelism must not be above maxParallelism", "fieldPath": ".minParallelism"}]))]
pub struct Rule {
    /// The rule's name, unique in the workflow: its firings are recorded under it.
    #[schemars(length(min = 1, max = 63), regex(pattern = RULE_NAME))]
    pub name: String,

    /// A CEL expression over the run's metrics: per step across runs and items
    /// `steps.NAME.{succeeded, failed, running, attempts}` and
    /// `steps.NAME.duration.{mean, min, max, last}` (seconds, once a Job of the step
    /// finished), and `workflow.runs.{completed, failed}` and `workflow.elapsed` (seconds).
    #[schemars(length(min = 1, max = 1024))]
    pub when: String,

    /// What a firing does: `grow` or `shrink` the parallelism by one (within
    /// `minParallelism`..`maxParallelism`), `finish` the workflow (as `shutdown: Stop`), `fail`
    /// it, or `repeat` (one more run).
    pub action: RuleAction,

    /// The most times the rule fires. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_REPETITIONS))]
    pub repetitions: Option<i32>,

    /// Step completions (succeeded or failed Jobs) at least between two firings. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff: Option<i32>,

    /// The least parallelism `shrink` leaves. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_parallelism: Option<i32>,

    /// The most parallelism `grow` gives. Default: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_parallelism: Option<i32>,
}

/// A rule's name: a DNS-1123 label, as it appears in Events.
const RULE_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

impl Rule {
    /// How many times it may fire.
    pub fn repetitions(&self) -> u32 {
        u32::try_from(self.repetitions.unwrap_or(1).max(1)).unwrap_or(1)
    }

    /// Step completions at least between two firings.
    pub fn backoff(&self) -> u64 {
        u64::try_from(self.backoff.unwrap_or(1)).unwrap_or(0)
    }
}

/// What a rule's firing does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Parallelism + 1, at most `maxParallelism`.
    Grow,
    /// Parallelism - 1, at least `minParallelism`.
    Shrink,
    /// End the workflow as `shutdown: Stop` does: running steps finish, nothing new starts.
    Finish,
    /// Fail the workflow: running steps are stopped.
    Fail,
    /// One more run of the DAG.
    Repeat,
}

impl RuleAction {
    /// Its name in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Grow => "grow",
            RuleAction::Shrink => "shrink",
            RuleAction::Finish => "finish",
            RuleAction::Fail => "fail",
            RuleAction::Repeat => "repeat",
        }
    }
}

/// What one rule did in the current run, as the operator recorded it in the same status
/// write as the plan its firing changed: a firing is never lost nor made twice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleStatus {
    /// The rule's name.
    pub name: String,

    /// How many times it fired.
    #[serde(default)]
    pub fired: u32,

    /// The step completions counted when it last fired: its `backoff` counts from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired_at_completions: Option<u64>,

    /// One line per firing, what its Event said, e.g. `steps.sim.duration.mean = 372 >= 360:
    /// parallelism 4 -> 5`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firings: Vec<String>,
}

/// What the rules may read of one step, across its runs, items and attempts, rebuilt from its
/// Jobs on every pass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StepMetrics {
    /// Jobs that succeeded.
    #[serde(default)]
    pub succeeded: u32,
    /// Jobs that failed, timed out or could not start.
    #[serde(default)]
    pub failed: u32,
    /// Jobs running.
    #[serde(default)]
    pub running: u32,
    /// Pods the Jobs ran.
    #[serde(default)]
    pub attempts: u32,
    /// How long the finished Jobs ran, from their start to their end, once one finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Durations>,
}

/// Run times of a step's finished Jobs, in seconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub struct Durations {
    /// The mean.
    pub mean: f64,
    /// The shortest.
    pub min: f64,
    /// The longest.
    pub max: f64,
    /// The Job that finished last's.
    pub last: f64,
}

/// The metrics of the steps the rules name, by step.
pub type Metrics = BTreeMap<String, StepMetrics>;

/// The runs the `repeat` rules of `rules` added, as `recorded` says they fired.
pub fn added_runs(rules: &[Rule], recorded: &[RuleStatus]) -> u32 {
    recorded
        .iter()
        .filter(|s| {
            rules
                .iter()
                .any(|r| r.name == s.name && r.action == RuleAction::Repeat)
        })
        .map(|s| s.fired)
        .sum()
}
