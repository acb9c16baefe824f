//! The operator's controllers, each a folder whose reconcile reads as its stages: the
//! [`workflow`] controller, the [`cron`] controller that starts workflows on a schedule, and
//! the [`trigger`] controller that follows the runs WorkFlowTriggers started.

pub mod cron;
pub mod trigger;
pub mod workflow;

/// The field manager every controller of the operator writes with.
pub const FIELD_MANAGER: &str = "workflow-operator";

/// An API request that failed, with what it was for (`creating job build-x: ...`): worth
/// trying again, so the framework retries the handler after its backoff.
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub(crate) struct RequestFailed {
    doing: String,
    #[source]
    source: kube::Error,
}

impl RequestFailed {
    /// The request `doing` failed with `source`.
    pub(crate) fn new(doing: impl Into<String>, source: kube::Error) -> Self {
        RequestFailed {
            doing: doing.into(),
            source,
        }
    }
}

impl From<RequestFailed> for kube_kopf::HandlerError {
    fn from(failed: RequestFailed) -> Self {
        kube_kopf::HandlerError::temporary(failed.to_string())
    }
}
