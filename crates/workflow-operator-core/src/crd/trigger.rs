//! The `WorkFlowTrigger` custom resource: workflows started by events (a webhook delivery, an
//! S3 bucket notification), one run per delivery. What a delivery makes is decided in
//! `trigger`; the operator's receiver serves it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::WorkflowTemplateRef;
use super::cron::{ConcurrencyPolicy, RunMetadata};

/// Workflows started by events: one WorkFlow per delivery, named for the delivery's id.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "workflow.crd.com",
    version = "v1",
    kind = "WorkFlowTrigger",
    plural = "workflowtriggers",
    singular = "workflowtrigger",
    shortname = "wftrigger",
    namespaced,
    status = "WorkFlowTriggerStatus",
    derive = "PartialEq",
    doc = "Workflows started by events (webhook deliveries, bucket notifications): one WorkFlow per delivery, named for its id.",
    printcolumn = r#"{"name": "Source", "type": "string", "jsonPath": ".status.source", "description": "What deliveries come from"}"#,
    printcolumn = r#"{"name": "Runs", "type": "integer", "jsonPath": ".status.runs", "description": "Runs of this trigger that exist"}"#,
    printcolumn = r#"{"name": "Last Delivery", "type": "date", "jsonPath": ".status.lastDeliveryTime", "description": "When the latest run was started"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[0].status", "description": "Whether deliveries start runs (the Ready condition, the only one)"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkFlowTriggerSpec {
    /// Deliveries by HTTP: `POST /triggers/<namespace>/<name>` on the operator's
    /// `--triggers-addr`, verified as one of `github`, `gitlab` or `hmac` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSource>,

    /// S3 event notifications (`Records[].s3`, as S3 and MinIO send to a webhook target) of a
    /// bucket, on the same address; one run per record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketSource>,

    /// A CEL expression over the delivery (`body`, `headers`, `event`, and for a bucket
    /// `bucket`, `key`, `record`): false (or an error, such as a field the body lacks) starts
    /// no run, and the sender is answered 202 with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,

    /// A CEL expression giving the delivery's id, which names its run (a repeated delivery
    /// finds its run and starts none). Default: GitHub's `X-GitHub-Delivery`, GitLab's
    /// `X-Gitlab-Event-UUID`, a bucket record's bucket, key and `sequencer`, else
    /// `X-Delivery-Id`, else the body's SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,

    /// The run's parameters (`spec.arguments.parameters` of the run, set by name), each a
    /// `name` and a CEL expression `value` over the delivery (`body.after`); a value that is
    /// not a string is written as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<TriggerParameter>,

    /// What a delivery does while a run of this trigger is active: `Allow` (default) starts
    /// another, `Forbid` starts none (202), `Replace` terminates the active runs first.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,

    /// Finished runs that succeeded kept, the oldest deleted first; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_runs_history_limit: Option<i32>,

    /// Finished runs that failed kept, the oldest deleted first; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_runs_history_limit: Option<i32>,

    /// Deliveries taken per second, with bursts up to `burst`; beyond it the sender is
    /// answered 429 (and retries). No limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,

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

/// `spec.webhook`: how a delivery proves it comes from the sender; at most one of the three.
/// None of them: every delivery is taken (for a receiver reachable only from inside).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct WebhookSource {
    /// GitHub: `X-Hub-Signature-256`, the HMAC-SHA256 of the body with the webhook's secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<SecretSource>,
    /// GitLab: `X-Gitlab-Token`, the webhook's secret token itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<SecretSource>,
    /// Any sender: the HMAC-SHA256 of the body, hex, in a header of its choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac: Option<HmacSource>,
}

/// A Secret's key holding the shared secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretSource {
    /// The Secret (in the trigger's namespace) and its key.
    pub secret_ref: SecretKeyRef,
}

/// `hmac`: a header holding the HMAC-SHA256 of the body, hex (an optional `sha256=` prefix is
/// allowed), keyed with a Secret's key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HmacSource {
    /// The header, e.g. `X-Signature`.
    #[schemars(length(min = 1))]
    pub header: String,
    /// The Secret (in the trigger's namespace) and its key.
    pub secret_ref: SecretKeyRef,
}

/// A key of a Secret in the trigger's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The key.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// `spec.bucket`: S3 event notifications of one bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BucketSource {
    /// The bucket; a record of another bucket starts no run. Under `dev`, the embedded
    /// artifact store sends the notifications of this bucket itself.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Only keys starting with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Only keys ending with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Verification as a generic webhook's (the header holding the body's HMAC-SHA256); none
    /// takes every notification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac: Option<HmacSource>,
}

/// A run parameter from the delivery.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TriggerParameter {
    /// The workflow parameter's name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// A CEL expression over the delivery, e.g. `body.after`.
    #[schemars(length(min = 1))]
    pub value: String,
}

/// `spec.rateLimit`: a token bucket per trigger, in each receiver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// Deliveries per second, sustained.
    #[schemars(range(min = 1))]
    pub per_second: u32,
    /// Deliveries taken at once after a quiet spell; default `perSecond`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
}

/// What the operator observed of a WorkFlowTrigger; written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkFlowTriggerStatus {
    /// `webhook/github`, `webhook/gitlab`, `webhook/hmac`, `webhook`, or `bucket/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The runs of this trigger that exist (the history limits delete finished ones).
    #[serde(default)]
    pub runs: i64,
    /// The runs not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// When the latest run that exists was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_time: Option<Time>,
    /// `Ready`: the filter, id and parameters compile and the run's spec is one; with why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}
