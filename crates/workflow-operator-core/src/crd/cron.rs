//! The `CronWorkFlow` custom resource: workflows started on a schedule. What the controller
//! decides from it is in `cron`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::WorkflowTemplateRef;

/// Workflows started on a schedule: one WorkFlow per scheduled time, named for it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "workflow.crd.com",
    version = "v1",
    kind = "CronWorkFlow",
    plural = "cronworkflows",
    singular = "cronworkflow",
    shortname = "cwf",
    namespaced,
    status = "CronWorkFlowStatus",
    derive = "PartialEq",
    doc = "Workflows started on a schedule: one WorkFlow per scheduled time, named for it.",
    printcolumn = r#"{"name": "Schedule", "type": "string", "jsonPath": ".spec.schedules", "description": "When runs start"}"#,
    printcolumn = r#"{"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"}"#,
    printcolumn = r#"{"name": "Active", "type": "integer", "jsonPath": ".status.activeCount", "description": "How many runs are not finished"}"#,
    printcolumn = r#"{"name": "Last", "type": "date", "jsonPath": ".status.lastRunTime", "description": "When the newest run was started for; empty while none was"}"#,
    printcolumn = r#"{"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime", "description": "The next scheduled time; empty while suspended"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[0].status", "description": "Whether runs start (the Ready condition, the only one)"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".status.conditions[0].message", "description": "Why runs start or not (the Ready condition's message)", "priority": 1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CronWorkFlowSpec {
    /// When runs start: five-field cron expressions (`0 2 * * *`), `@hourly`, `@daily`,
    /// `@weekly`, `@monthly`, `@yearly`, or `@every DURATION` (`@every 90s`, counted from the
    /// CronWorkFlow's creation). The union of all of them.
    #[schemars(length(min = 1))]
    pub schedules: Vec<String>,

    /// The IANA time zone the cron expressions are read in (`Europe/Berlin`); default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,

    /// What a scheduled time does while a run is active: `Allow` (default) starts another,
    /// `Forbid` skips the time, `Replace` terminates the active runs and starts the new one (of
    /// times due at once, after downtime, only the latest; the others are named missed).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,

    /// How many whole seconds late a run may still start (the operator was down, the
    /// CronWorkFlow suspended); absent means no limit. It limits late runs only: a run handled
    /// within its scheduled second is on time and starts, so 0 starts on-time runs and no late
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// Which missed runs start late (within `startingDeadlineSeconds`): `Latest` (default) the
    /// latest, `All` every one oldest first (at most 100), `None` none.
    #[serde(default)]
    pub catch_up: CatchUp,

    /// While true no run starts; runs missed meanwhile are not caught up, but for the latest
    /// (per `catchUp`) when it is set back to false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,

    /// Finished runs that succeeded kept, the oldest deleted first; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_runs_history_limit: Option<i32>,

    /// Finished runs that failed kept, the oldest deleted first; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_runs_history_limit: Option<i32>,

    /// Labels and annotations of every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_metadata: Option<RunMetadata>,

    /// The spec of every run: a WorkFlow's spec (checked when a run is created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object")]
    pub workflow_spec: Option<serde_json::Value>,

    /// Or a shared template each run takes whole (`spec.workflowTemplateRef` of the runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_template_ref: Option<WorkflowTemplateRef>,
}

/// Labels and annotations of every run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RunMetadata {
    /// Labels of every run (the operator's own win).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of every run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec.concurrencyPolicy`, as a Kubernetes CronJob's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap.
    #[default]
    Allow,
    /// A scheduled time is skipped while a run is active.
    Forbid,
    /// The active runs are terminated and the new one starts.
    Replace,
}

/// `spec.catchUp`: which missed runs start late.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CatchUp {
    /// The latest missed run within the deadline.
    #[default]
    Latest,
    /// Every missed run within the deadline, oldest first (at most 100).
    All,
    /// None.
    None,
}

/// What the operator observed of a CronWorkFlow; written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronWorkFlowStatus {
    /// The runs not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<RunRef>,
    /// How many runs are not finished (`active`'s length; `kubectl get`'s ACTIVE column).
    #[serde(default)]
    pub active_count: i32,
    /// The last scheduled time a run was started, skipped or missed for: the next is after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// The time the newest run was started for (its scheduled time, or when it was triggered
    /// by hand); absent while no run was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_time: Option<Time>,
    /// When the last run that succeeded finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
    /// The next scheduled time (RFC 3339, UTC); absent while suspended or while the schedule
    /// does not parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
    /// The schedules and time zone the times above are of (a hash): an edit is seen by it
    /// changing, and fires nothing by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_hash: Option<String>,
    /// Since when the schedule was suspended (`spec.suspend`), while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<Time>,
    /// `Ready` (the schedule parses and runs start) with a reason and message when not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A run of a CronWorkFlow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RunRef {
    /// The WorkFlow's name.
    pub name: String,
    /// Its uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}
