//! Lifecycle hooks (Argo's `hooks`): a template a workflow (`spec.hooks`) or a step (`hooks`)
//! calls when something happens to it. What each becomes is [`crate::template::hooks`]'s: a
//! step of its own, named `STEP.hooks.NAME` (`hooks.NAME` for the workflow's), that the planner
//! runs as any step.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::templates::Arguments;

/// The hooks of a workflow or a step, by name: `exit` runs once it ended (whatever its result),
/// any other name once its `expression` holds.
pub type Hooks = BTreeMap<String, LifecycleHook>;

/// The name of the hook that runs once its workflow or step ended.
pub const EXIT: &str = "exit";

/// One hook: the template it calls, with `arguments`, and when.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    /// The template of `spec.templates` the hook calls (required).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template: String,

    /// The arguments of the call: `{{steps.STEP.outputs.KEY}}` and `{{steps.STEP.status}}`
    /// read the hooked step's (in an `exit` hook, once it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Box<Arguments>>,

    /// A CEL expression, required but for `exit` (where it is the hook's `when`): over
    /// `workflow.status` on the workflow (`Running`, then `Completed` or `Failed`), over
    /// `steps.STEP.status` on a step (`Running`, then as a `when` reads it). One that holds
    /// while its workflow or step runs starts the hook with it; any other is decided once it
    /// ended, as the hook's `when`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}
