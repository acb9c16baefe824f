//! Run policies a workflow or a step may set: which failures it survives
//! (`continueOn`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
