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
//!
//! The ConfigMap keys its parameters take values from (`valueFrom.configMapKeyRef`, in the
//! spec and in the templates just read) are read in the same pass, in the workflow's namespace,
//! and recorded with the templates in one status write (`status.resolvedConfigMapKeys`). A
//! ConfigMap or key that is not there is recorded as missing: a parameter that takes it, without
//! a default, fails the workflow naming the ConfigMap and key, and one made later changes
//! nothing (submit the workflow again). As with templates, a SIGKILL before the record costs a
//! second read, and no step ran.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Client, ResourceExt};
use kube_kopf::Context;
use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::template::{
    self, CLUSTER_KIND, ClusterWorkFlowTemplate, ResolvedConfigMapKey, ResolvedTemplate, Source,
    WorkFlowTemplate, config_maps,
};

use kube::runtime::events::EventType;

use super::shared::{ControllerState, RequestFailed, note};

/// Reads and records the shared templates and ConfigMap keys `ctx`'s workflow names that its
/// status does not hold yet; does nothing (no read, no write) for a workflow that names none,
/// or that ended and is not being retried.
pub(super) async fn what_it_reads(
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
    let keys = config_maps::resolve(&mut probe, |name| read_config_map(client, namespace, name));
    let keys = keys.await?;
    let status = probe.status.unwrap_or_default();
    if status.resolved_templates.len() == before && keys == 0 {
        return Ok(());
    }
    shared
        .status
        .write(&ctx.client, &workflow, &status)
        .await
        .map_err(|e| {
            shared.metrics.api_error("patch");
            RequestFailed::new("recording the templates and ConfigMap keys read", e)
        })?;
    if status.resolved_templates.len() > before {
        let said = templates_read(&status.resolved_templates[before..], &submitted);
        note(ctx, EventType::Normal, "TemplatesResolved", &said).await;
    }
    if keys > 0 {
        let recorded = &status.resolved_config_map_keys;
        let said = config_map_keys_read(&recorded[recorded.len() - keys..]);
        note(ctx, EventType::Normal, "ConfigMapKeysResolved", &said).await;
    }
    Ok(())
}

/// The Event's message for the templates `read` (those of `submitted` from the annotation).
fn templates_read(read: &[ResolvedTemplate], submitted: &[ResolvedTemplate]) -> String {
    let read: Vec<String> = read
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
    format!(
        "read {}; the workflow runs these, whatever becomes of them",
        read.join(", ")
    )
}

/// The Event's message for the ConfigMap keys `read`.
fn config_map_keys_read(read: &[ResolvedConfigMapKey]) -> String {
    let read: Vec<String> = read
        .iter()
        .map(|r| match &r.missing {
            Some(why) => format!("key {:?}: {why}", r.key),
            None => format!(
                "configmap {:?} key {:?} at resourceVersion {}",
                r.name,
                r.key,
                r.resource_version.as_deref().unwrap_or("?")
            ),
        })
        .collect();
    format!(
        "read {}; the workflow's parameters keep these values, whatever becomes of the ConfigMaps",
        read.join(", ")
    )
}

/// Reads the ConfigMap `name` of `namespace`; `None` when it does not exist.
async fn read_config_map(
    client: &Client,
    namespace: &str,
    name: String,
) -> Result<Option<config_maps::Read>, RequestFailed> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let found = api.get_opt(&name).await;
    let found = found.map_err(|e| RequestFailed::new(format!("reading configmap {name}"), e))?;
    Ok(found.map(|map| config_maps::Read {
        resource_version: map.resource_version(),
        data: map.data.unwrap_or_default(),
    }))
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
