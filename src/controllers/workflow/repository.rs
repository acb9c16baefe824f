//! Deciding a workflow's artifact repository, once: before the first pass that may start a
//! step with artifacts, the operator takes `spec.artifactRepository`, else the namespace's
//! ConfigMap `workflow-artifact-repository` (key `repository`, the same fields), else its own
//! `--artifact-repository`, and records the choice in `status.artifactRepository`. Every later
//! step, retry and restart uses that record: an edited or deleted ConfigMap does not move a
//! running workflow's artifacts.
//!
//! None found records nothing: each step with artifacts then fails saying where a repository
//! is looked for (reason `NoArtifactRepository`). A ConfigMap whose key does not parse, or
//! names no store or a `localDirectory` that is not an absolute path, is not passed over for
//! the operator's repository (the namespace asked for a store of its own): each step with
//! artifacts fails naming the ConfigMap and what is wrong. A SIGKILL between the
//! read and the record costs a second read: no step with artifacts ran yet.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube_kopf::Context;
use workflow_operator_core::agent::REPOSITORY_CONFIGMAP;
use workflow_operator_core::crd::{ArtifactRepository, ResolvedRepository, WorkFlow};

use kube::runtime::events::EventType;

use super::shared::{ControllerState, RequestFailed, note};

/// Where [`artifact_repository`] found a repository given by the operator's flag.
pub const FROM_FLAG: &str = "--artifact-repository";

/// Records the artifact repository of `ctx`'s workflow when it has artifacts and no record
/// yet; does nothing (no read, no write) otherwise. `Some` says why the namespace's ConfigMap
/// is not a repository: the message of each step with artifacts the pass would start.
pub(super) async fn artifact_repository(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
) -> Result<Option<String>, RequestFailed> {
    let workflow = shared.status.latest(&ctx.object);
    let prepared = shared.memory.compiled(&workflow);
    let recorded = (workflow.status.as_ref()).is_some_and(|s| s.artifact_repository.is_some());
    if !prepared.compiled.policies.artifacts || recorded || !super::resolve::may_run(&workflow) {
        return Ok(None);
    }
    let view = prepared.view(workflow.clone());
    let namespace = workflow.namespace().unwrap_or_default();
    let resolved = match find(shared, ctx, &view.spec.artifact_repository, &namespace).await? {
        Ok(Some(resolved)) => resolved,
        Ok(None) => return Ok(None),
        Err(unusable) => return Ok(Some(unusable)),
    };
    shared
        .status
        .settle(&workflow)
        .await
        .map_err(|e| RequestFailed::new("writing the status", e))?;
    let workflow = shared.status.latest(&ctx.object);
    let mut status = workflow.status.clone().unwrap_or_default();
    let from = resolved.from.clone();
    status.artifact_repository = Some(Box::new(resolved));
    shared
        .status
        .write(&ctx.client, &workflow, &status)
        .await
        .map_err(|e| {
            shared.metrics.api_error("patch");
            RequestFailed::new("recording the artifact repository", e)
        })?;
    let said = format!("artifacts go to the repository of {from}, whatever becomes of it");
    note(ctx, EventType::Normal, "ArtifactRepositoryResolved", &said).await;
    Ok(None)
}

/// The repository: the spec's, the namespace's ConfigMap's, or the operator's; `None` when
/// there is none; `Err` saying why when the ConfigMap is not a repository (a Warning Event
/// says it too).
async fn find(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    own: &Option<Box<ArtifactRepository>>,
    namespace: &str,
) -> Result<Result<Option<ResolvedRepository>, String>, RequestFailed> {
    if let Some(own) = own {
        return Ok(Ok(Some(ResolvedRepository {
            from: "spec.artifactRepository".to_string(),
            repository: (**own).clone(),
        })));
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let map = (api.get_opt(REPOSITORY_CONFIGMAP).await)
        .map_err(|e| RequestFailed::new(format!("reading configmap {REPOSITORY_CONFIGMAP}"), e))?;
    if let Some(map) = map {
        let text = map.data.as_ref().and_then(|d| d.get("repository"));
        let parsed = text.map(|t| {
            let repository = serde_yaml::from_str::<ArtifactRepository>(t);
            repository
                .map_err(|e| e.to_string())
                .and_then(|r| match r.problem() {
                    Some(problem) => Err(problem),
                    None => Ok(r),
                })
        });
        match parsed {
            Some(Ok(repository)) => {
                let version = map.resource_version().unwrap_or_default();
                return Ok(Ok(Some(ResolvedRepository {
                    from: format!("configmap/{REPOSITORY_CONFIGMAP} at resourceVersion {version}"),
                    repository,
                })));
            }
            problem => {
                let why = match problem {
                    Some(Err(e)) => format!("{REPOSITORY_CONFIGMAP}: {e}"),
                    _ => format!("{REPOSITORY_CONFIGMAP}: no key repository"),
                };
                let said = format!("configmap/{why}; it is not used");
                note(ctx, EventType::Warning, "BadArtifactRepository", &said).await;
                return Ok(Err(unusable(&why, namespace)));
            }
        }
    }
    Ok(Ok(shared.artifact_repository.clone().map(|repository| {
        ResolvedRepository {
            from: FROM_FLAG.to_string(),
            repository,
        }
    })))
}

/// The message of a step with artifacts whose namespace's ConfigMap is not a repository
/// (`why`): what is wrong, and what a repository needs.
fn unusable(why: &str, namespace: &str) -> String {
    format!(
        "it has artifacts and the artifact repository ConfigMap is not one: {why} (namespace \
         {namespace}; its key repository needs s3: {{endpoint, bucket, credentialsSecret: \
         {{name}}}} or oci: {{registry, repository}})"
    )
}
