//! A resource step (`resource: {action, manifest, successCondition, failureCondition,
//! setOwnerReference, mergeStrategy, flags}`, Argo's resource template): one action on a
//! Kubernetes object, taken by the step agent in the step's pod with the pod's service account,
//! then a wait until the object meets a condition. The fields as the API holds them; what they
//! mean, what the agent is told and how the conditions read are `resource_action`'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The actions a resource step takes, as kubectl names them.
pub const ACTIONS: [&str; 6] = ["get", "create", "apply", "delete", "replace", "patch"];

/// The patch types of `mergeStrategy`, as kubectl's `--type`.
pub const MERGE_STRATEGIES: [&str; 3] = ["strategic", "merge", "json"];

/// `resource`: the object and what to do with it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStep {
    /// What to do: `get`, `create`, `apply` (server-side apply, forced), `delete`, `replace`
    /// or `patch`.
    #[schemars(length(min = 1))]
    pub action: String,

    /// The object, as YAML or JSON (for `patch`, the patch; a `json` patch is a list of
    /// operations); its `{{...}}` are filled in before the action. Without a namespace the
    /// object is the workflow's namespace's. May be empty for `delete` and `get` with `flags`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,

    /// When the object succeeds: requirements over its fields, joined by `,`, each all of
    /// which must hold, in Kubernetes' label selector form with field paths as keys
    /// (`status.succeeded > 0`, `status.phase == Succeeded`, `status.phase in (Failed,
    /// Error)`, `metadata.labels.app`, `!status.failed`). The step waits, watching the
    /// object, until it holds (or `failureCondition` does). Absent: the step ends after the
    /// action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,

    /// When the object fails the step: requirements in `successCondition`'s form, any one of
    /// which fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,

    /// Make the workflow the owner of the object it creates, so Kubernetes' garbage collector
    /// deletes the object with the workflow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub set_owner_reference: bool,

    /// The patch type of `patch`: `strategic` (the default), `merge` (a JSON merge patch) or
    /// `json` (a JSON patch, with the object named in `flags`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_strategy: Option<String>,

    /// kubectl's arguments that name the object instead of the manifest, and options: a type
    /// and a name (`[configmap, NAME]` or `[configmap/NAME]`), `--selector`/`-l` (`delete`,
    /// `get`), `--namespace`/`-n`, `--ignore-not-found` (`delete` always ignores a missing
    /// object), `--validate=false` (accepted; nothing is validated on the client).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

impl ResourceStep {
    /// The patch type: `mergeStrategy`, or `strategic`.
    pub fn merge_strategy(&self) -> &str {
        self.merge_strategy.as_deref().unwrap_or("strategic")
    }

    /// The texts that may hold a reference to fill before the action: the manifest, the
    /// conditions and the flags.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.manifest.as_str())
            .chain(self.success_condition.as_deref())
            .chain(self.failure_condition.as_deref())
            .chain(self.flags.iter().map(String::as_str))
    }
}
