//! Resolving: the shared templates a workflow names (`workflowTemplateRef`, `templateRef`)
//! are read once, the first time the operator handles the workflow, and recorded in its status
//! (`status.resolvedTemplates`) before any of its steps runs. Every later pass expands the
//! workflow from that record, never from the templates again: an edited or deleted template
//! does not change a workflow that started from it, on retry, stop or restart.
//!
//! A workflow `workflow-operator submit` sent to another controller (`spec.managedBy`:
//! MultiKueue, which copies it to this cluster) carries the templates read where it was
//! submitted, in the annotation `workflow.crd.com/resolved-templates`: those are recorded as
//! they are written there, not read here.
//!
//! A template that is not found is not recorded; expanding the workflow then fails it naming
//! the template (`workflowTemplateRef: workflowtemplate "ci" not found in namespace "dev"`),
//! and a `retry` reads it again. A SIGKILL between the read and the record costs a second read:
//! nothing ran yet.

use kube::api::Api;
use kube::{Client, ResourceExt};
use kube_kopf::Context;
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::template::{
    self, CLUSTER_KIND, ClusterWorkFlowTemplate, ResolvedTemplate, Source, WorkFlowTemplate,
};

use kube::runtime::events::EventType;

use super::shared::{ControllerState, RequestFailed, note};

/// Reads and records the shared templates `ctx`'s workflow names that its status does not
/// hold yet; does nothing (no read, no write) for a workflow that names none, or that ended
/// and is not being retried.
pub(super) async fn shared_templates(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
) -> Result<(), RequestFailed> {
    let workflow = shared.status.latest(&ctx.object);
    if !shared.memory.compiled(&workflow).unresolved || !may_run(&workflow) {
        return Ok(());
    }
    shared
        .status
        .settle(&workflow)
        .await
        .map_err(|e| RequestFailed::new("writing the status", e))?;
    let workflow = shared.status.latest(&ctx.object);
    let namespace = workflow.namespace().unwrap_or_default();
    let before = workflow
        .status
        .as_ref()
        .map_or(0, |s| s.resolved_templates.len());
    let submitted = template::submitted(&workflow).unwrap_or_else(|why| {
        tracing::warn!(%why, "the templates recorded at submit are not read");
        Vec::new()
    });
    let mut probe = (*workflow).clone();
    let (client, namespace, given) = (&ctx.client, &namespace, &submitted);
    template::resolve(&mut probe, |source| async move {
        if let Some(record) = given.iter().find(|r| r.is(&source)) {
            return Ok(Some(record.clone()));
        }
        read(client, namespace, source).await
    })
    .await?;
    let status = probe.status.unwrap_or_default();
    if status.resolved_templates.len() == before {
        return Ok(());
    }
    shared
        .status
        .write(&ctx.client, &workflow, &status)
        .await
        .map_err(|e| {
            shared.metrics.api_error("patch");
            RequestFailed::new("recording the templates read", e)
        })?;
    let read: Vec<String> = status.resolved_templates[before..]
        .iter()
        .map(|r| {
            let from = match submitted.contains(r) {
                true => " (as submitted, from the annotation workflow.crd.com/resolved-templates)",
                false => "",
            };
            format!(
                "{} {:?} at resourceVersion {}{from}",
                r.kind.to_lowercase(),
                r.name,
                r.resource_version.as_deref().unwrap_or("?")
            )
        })
        .collect();
    let said = format!(
        "read {}; the workflow runs these, whatever becomes of them",
        read.join(", ")
    );
    note(ctx, EventType::Normal, "TemplatesResolved", &said).await;
    Ok(())
}

/// Whether the workflow may still run steps: not ended, or ended and asked to retry.
pub(super) fn may_run(workflow: &WorkFlow) -> bool {
    let Some(status) = &workflow.status else {
        return true;
    };
    let ended = status.workflow_status.is_some_and(|p| p.is_terminal());
    !ended || workflow.spec.retry > status.retry.unwrap_or(0)
}

/// Reads the shared template `source` names, as a record; `None` when it does not exist.
pub(super) async fn read(
    client: &Client,
    namespace: &str,
    source: Source,
) -> Result<Option<ResolvedTemplate>, RequestFailed> {
    let reading = |e| RequestFailed::new(format!("reading {}", source.describe()), e);
    let (meta, spec) = if source.kind == CLUSTER_KIND {
        let api: Api<ClusterWorkFlowTemplate> = Api::all(client.clone());
        match api.get_opt(&source.name).await.map_err(reading)? {
            Some(t) => (t.metadata, t.spec.workflow),
            None => return Ok(None),
        }
    } else {
        let api: Api<WorkFlowTemplate> = Api::namespaced(client.clone(), namespace);
        match api.get_opt(&source.name).await.map_err(reading)? {
            Some(t) => (t.metadata, t.spec.workflow),
            None => return Ok(None),
        }
    };
    Ok(Some(ResolvedTemplate {
        kind: source.kind.to_string(),
        name: source.name.clone(),
        uid: meta.uid,
        resource_version: meta.resource_version,
        resolved_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        )),
        spec,
    }))
}
