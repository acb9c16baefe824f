//! Why a pass of [`super::pass`] stopped: one variant per stage, each keeping the error it
//! stopped on. All are retried by the framework but [`PassError::Unbuildable`], which no retry
//! can help.

use kube_kopf::HandlerError;

use super::artifact_gc::GcError;
use crate::controllers::RequestFailed;

/// The stage a pass stopped in, and why.
#[derive(Debug, thiserror::Error)]
pub(super) enum PassError {
    /// Reading or recording the shared templates the workflow names.
    #[error("resolving the shared templates: {0}")]
    Resolve(#[source] RequestFailed),
    /// Reading or recording the artifact repository.
    #[error("resolving the artifact repository: {0}")]
    Repository(#[source] RequestFailed),
    /// Reading the status in flight, pods or Events for a plan in full.
    #[error("observing: {0}")]
    Observe(#[source] RequestFailed),
    /// Looking up or writing cached steps' entries.
    #[error("cached steps: {0}")]
    Cache(#[source] RequestFailed),
    /// Reading, creating or updating the run's Kueue Workload, or stopping an evicted run.
    #[error("kueue: {0}")]
    Kueue(#[source] RequestFailed),
    /// Taking or giving back locks.
    #[error("locks: {0}")]
    Locks(#[source] RequestFailed),
    /// Creating, stopping, patching or deleting Jobs, or the workspace claim.
    #[error("applying the plan: {0}")]
    Apply(#[source] RequestFailed),
    /// A Job or claim the plan asks for cannot be built from the spec: retrying cannot help.
    #[error("{0}")]
    Unbuildable(String),
    /// Writing the status.
    #[error("recording: {0}")]
    Record(#[source] RequestFailed),
    /// Deleting the artifacts of an ended workflow.
    #[error(transparent)]
    ArtifactGc(#[from] GcError),
}

impl From<PassError> for HandlerError {
    fn from(error: PassError) -> Self {
        match error {
            PassError::Unbuildable(message) => HandlerError::permanent(message),
            PassError::ArtifactGc(gc) => gc.into(),
            other => HandlerError::temporary(other.to_string()),
        }
    }
}
