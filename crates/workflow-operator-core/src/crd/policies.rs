//! Run policies a workflow or a step may set: which failures it survives (`continueOn`), how
//! a failed step is tried again (`retryStrategy`), the locks it holds (`synchronization`), and
//! whether its result is reused (`cache`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::numbers::{self, IntOrExpr};
use super::templates::ConfigMapKeyRef;

/// Which failures of a step the workflow survives, as Argo's `continueOn`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContinueOn {
    /// True: when the step fails (its Job fails, times out or cannot start, its `when` fails,
    /// an output it names is missing), it shows `Failed`, its dependents run as if it had
    /// succeeded (a `when` may test `steps.NAME.phase`), and the workflow may still end
    /// `Completed`, its message naming the failure. For a step that fans out, each item's
    /// failure is tolerated and the other items go on.
    #[serde(default)]
    pub failed: bool,
}

/// How a failed step is tried again, as Argo's `retryStrategy`: each attempt is a Job of its
/// own, started after the back-off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryStrategy {
    /// Attempts after the first; 0 tries once.
    #[schemars(schema_with = "numbers::at_least_zero")]
    pub limit: IntOrExpr<i32>,

    /// Which failures are tried again: `Always` (the default), `OnFailure` (the program
    /// exited non-zero) or `OnError` (its pod could not run: evicted, OOM-killed, its image
    /// not pulled, not started in time, past its timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,

    /// How long to wait before each attempt; none starts it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,

    /// A CEL expression over `lastRetry` (`exitCode`, an int, -1 when the program did not
    /// exit; `reason`; `message`; `duration`, seconds): false stops retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

/// Which failures [`RetryStrategy`] tries again.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RetryPolicy {
    /// Every failure.
    #[default]
    Always,
    /// The program exited non-zero.
    OnFailure,
    /// The pod could not run the program to its end: evicted, OOM-killed, its image not
    /// pulled, not started in time, past its timeout or deadline.
    OnError,
}

/// The wait before attempt `n` (1 for the first retry): `duration * factor^(n-1)`, at most
/// `cap`; no attempt starts later than `maxDuration` after the first. Durations are Go's
/// (`5s`, `1m30s`, `500ms`) or whole seconds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Backoff {
    /// The first wait.
    pub duration: String,
    /// What each wait is multiplied by for the next; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::fraction_at_least_one")]
    pub factor: Option<IntOrExpr<f64>>,
    /// The longest wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<String>,
    /// No attempt starts later than this after the first started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
}

/// Locks a workflow holds for its whole run, or a step while it runs, as Argo's
/// `synchronization`: each a `coordination.k8s.io` Lease in the workflow's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Synchronization {
    /// Mutexes: one holder at a time in the namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutexes: Vec<MutexRef>,
    /// Semaphores: at most `limit` holders at a time in the namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub semaphores: Vec<SemaphoreRef>,
}

/// A mutex, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MutexRef {
    /// Its name, shared by every workflow of the namespace that names it.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A semaphore, by name, with its limit: `limit`, or `limitFrom` a ConfigMap key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.limit) != has(self.limitFrom)", "message": "give the limit or where it is read (limitFrom), one of the two", "fieldPath": ".limit", "reason": "FieldValueInvalid"}]))]
pub struct SemaphoreRef {
    /// Its name, shared by every workflow of the namespace that names it.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Holders at a time, as this workflow counts them (it may change while the semaphore is
    /// in use: nobody new takes it while as many hold it). Required unless `limitFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_one")]
    pub limit: Option<IntOrExpr<i32>>,
    /// Where the limit is read instead (Argo's semaphore from a ConfigMap): a key of a
    /// ConfigMap in the workflow's namespace holding a whole number of at least 1, read once,
    /// when the workflow starts, and recorded in `status.resolvedConfigMapKeys`: the workflow
    /// counts with that number to its end, whatever becomes of the ConfigMap. A ConfigMap or
    /// key that is not there, or a value that is not such a number, fails the workflow naming
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_from: Option<LimitSource>,
}

/// Where a semaphore's limit is read (`limitFrom`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitSource {
    /// A key of a ConfigMap in the workflow's namespace.
    pub config_map_key_ref: ConfigMapKeyRef,
}

/// A step whose result is kept and reused (`cache`): before it runs, an entry for its key that
/// is younger than `maxAge` makes it `Succeeded` with the entry's outputs, and no Job runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cache {
    /// How old an entry may be to be used (`24h`, `90m`; Go's durations or whole seconds);
    /// absent: any age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
    /// The key, instead of the step's resolved content; `{{steps.NAME.outputs.KEY}}` and
    /// `{{item}}` are filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
