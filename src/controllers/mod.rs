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

/// Whether a create failed because the object exists already (409 `AlreadyExists`), which a
/// create of a name chosen deterministically takes as done. Only that 409 says so: a 409
/// `Conflict` (a write that lost a race, such as a ResourceQuota's count of the namespace's
/// objects) created nothing, and taken as made it leaves the caller waiting for an object, and
/// its events, that will never come (a step reported running with no Job, a cron run or a
/// trigger's delivery never started).
pub(crate) fn exists_already(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if e.code == 409 && e.reason == "AlreadyExists")
}

impl From<RequestFailed> for kube_kopf::HandlerError {
    fn from(failed: RequestFailed) -> Self {
        kube_kopf::HandlerError::temporary(failed.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_409_already_exists_says_a_create_was_made_before() {
        let answer = |code, reason: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("refused", reason).with_code(code),
            ))
        };
        assert!(exists_already(&answer(409, "AlreadyExists")));
        assert!(!exists_already(&answer(409, "Conflict")));
        assert!(!exists_already(&answer(500, "InternalError")));
    }
}
