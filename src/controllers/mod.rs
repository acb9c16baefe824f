//! The operator's controllers, each a folder whose reconcile reads as its stages: the
//! [`workflow`] controller, and the [`cron`] controller that starts workflows on a schedule.

pub mod cron;
pub mod workflow;

/// The field manager every controller of the operator writes with.
pub const FIELD_MANAGER: &str = "workflow-operator";

/// A temporary error (the framework retries the handler) saying what failed.
pub(crate) fn temporary(what: &str, error: kube::Error) -> kube_kopf::HandlerError {
    kube_kopf::HandlerError::temporary(format!("{what}: {error}"))
}
