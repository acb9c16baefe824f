//! Deleting a workflow's artifacts (`spec.artifactGC`): every key under the workflow's prefix
//! in its recorded repository (`status.artifactRepository`), with the credentials of the
//! repository's Secret. `OnWorkflowCompletion`: once the workflow ended, recorded in
//! `status.artifactsDeletedAt`; `OnWorkflowDeletion`: by the delete handler, which the
//! framework's finalizer holds the workflow for, after its Jobs are deleted. Either waits
//! until no pod of the workflow is pending or running: a step still running may yet upload,
//! and would leave its artifact behind. Deleting is idempotent: a SIGKILL before the
//! record (or before the finalizer goes) deletes again, finding what is left.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use kube_kopf::{Context, HandlerError};
use workflow_operator_core::agent;
use workflow_operator_core::crd::{ArtifactGcStrategy, WorkFlow};
use workflow_operator_core::jobs::LABEL_WORKFLOW;
use workflow_operator_core::names;

use super::shared::{ControllerState, RequestFailed, note};
use crate::artifacts;
use crate::artifacts::credentials::{self, CredentialsError};

/// Why the artifacts were not deleted.
#[derive(Debug, thiserror::Error)]
pub(super) enum GcError {
    /// Listing the pods, or recording the deletion.
    #[error(transparent)]
    Request(#[from] RequestFailed),
    /// A step's pod is pending or running: it may yet upload.
    #[error("deleting the artifacts once the workflow's step pods have ended")]
    StepsRunning,
    /// The repository's credentials cannot be read (a Secret missing or without its key is
    /// not worth retrying).
    #[error("deleting the artifacts: {0}")]
    Credentials(#[source] CredentialsError),
    /// The store refused.
    #[error("deleting the artifacts: {0}")]
    Store(#[source] artifacts::Error),
}

impl From<GcError> for HandlerError {
    fn from(error: GcError) -> Self {
        match &error {
            GcError::Credentials(e) if !e.is_temporary() => {
                HandlerError::permanent(error.to_string())
            }
            _ => HandlerError::temporary(error.to_string()),
        }
    }
}

/// After a pass: the artifacts of an ended workflow with `OnWorkflowCompletion`, once.
pub(super) async fn on_completion(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
) -> Result<(), GcError> {
    let workflow = shared.status.latest(&ctx.object);
    let Some(status) = &workflow.status else {
        return Ok(());
    };
    let ended = status.workflow_status.is_some_and(|p| p.is_terminal())
        && status.observed_generation == workflow.metadata.generation;
    let wanted = strategy(&workflow) == ArtifactGcStrategy::OnWorkflowCompletion;
    if !ended || !wanted || status.artifacts_deleted_at.is_some() {
        return Ok(());
    }
    let deleted = delete_all(&ctx.client, &workflow).await?;
    let mut status = status.clone();
    status.artifacts_deleted_at = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    shared
        .status
        .write(&ctx.client, &workflow, &status)
        .await
        .map_err(|e| RequestFailed::new("recording the artifacts deleted", e))?;
    publish(ctx, deleted).await;
    Ok(())
}

/// When the workflow is deleted: its artifacts, with `OnWorkflowDeletion`.
pub(super) async fn on_deletion(ctx: &Context<WorkFlow>) -> Result<(), GcError> {
    if strategy(&ctx.object) != ArtifactGcStrategy::OnWorkflowDeletion {
        return Ok(());
    }
    let deleted = delete_all(&ctx.client, &ctx.object).await?;
    publish(ctx, deleted).await;
    Ok(())
}

fn strategy(workflow: &WorkFlow) -> ArtifactGcStrategy {
    workflow
        .spec
        .artifact_gc
        .map(|gc| gc.strategy)
        .unwrap_or_default()
}

async fn publish(ctx: &Context<WorkFlow>, deleted: usize) {
    let said = format!("deleted the workflow's {deleted} artifacts (artifactGC)");
    note(
        ctx,
        kube::runtime::events::EventType::Normal,
        "ArtifactsDeleted",
        &said,
    )
    .await;
}

/// Deletes every artifact under `workflow`'s prefix; how many. None without a recorded
/// repository (no step with artifacts ran).
async fn delete_all(client: &Client, workflow: &WorkFlow) -> Result<usize, GcError> {
    let resolved = workflow
        .status
        .as_ref()
        .and_then(|s| s.artifact_repository.as_deref());
    let Some(repository) = resolved.map(|r| &r.repository) else {
        return Ok(0);
    };
    let namespace = workflow.namespace().unwrap_or_default();
    if still_running(client, &namespace, &workflow.name_any()).await? {
        // A step still running may yet upload: deleting now could leave its artifact behind.
        return Err(GcError::StepsRunning);
    }
    let target = (credentials::target_of(client, &namespace, repository).await)
        .map_err(GcError::Credentials)?;
    let Some(target) = target else {
        return Ok(0);
    };
    let prefix = agent::repository_prefix(repository, &namespace, &workflow.name_any());
    (target
        .delete_prefix(&format!("{}/", prefix.trim_end_matches('/')))
        .await)
        .map_err(GcError::Store)
}

/// Whether a pod of `workflow` is pending or running.
async fn still_running(
    client: &Client,
    namespace: &str,
    workflow: &str,
) -> Result<bool, RequestFailed> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{LABEL_WORKFLOW}={}", names::label_value(workflow));
    let list = (pods.list(&ListParams::default().labels(&selector)).await)
        .map_err(|e| RequestFailed::new("listing the workflow's pods", e))?;
    Ok(list.items.iter().any(|pod| {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        matches!(phase, None | Some("Pending") | Some("Running"))
    }))
}
