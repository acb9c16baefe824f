//! `workflow-agent resource`: a resource step's action (`resource_action::ResourceTask`),
//! taken from the step's pod with the pod's own credentials (`Config::infer`: a kubeconfig
//! named by `$KUBECONFIG`, which the embedded control plane's kubelet gives every pod, else
//! the service account's in-cluster config), then a watch of the object until its failure or
//! success condition holds (the step's `timeout`, the Job's deadline, bounds the wait), and the
//! outputs read from the object.
//!
//! A try of the step's Job that runs again (its pod replaced, the operator restarted) does not
//! make a second object: a `generateName` becomes the same name in every try
//! (`resource_action::generated_name`), and an object already there that the same Job created
//! (`ANNOTATION_CREATED_BY`) is taken as made.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Discovery, Scope};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::Value;

use workflow_operator_core::resource_action::{
    self, ANNOTATION_CREATED_BY, Flags, ResourceTask, Verdict,
};

/// The object an action is on: its API, and its name (none: every object a selector picks).
struct Target {
    api: Api<DynamicObject>,
    resource: ApiResource,
    name: Option<String>,
}

impl Target {
    /// `kind/name` as kubectl prints it.
    fn describe(&self) -> String {
        let kind = self.resource.kind.to_lowercase();
        format!("{kind}/{}", self.name.as_deref().unwrap_or("*"))
    }
}

/// Takes the action of `task`, waits for its conditions, and reads its outputs.
///
/// # Errors
/// The step's failure message: no access to the API server, an object that cannot be found,
/// made or changed, a failure condition that holds, the object deleted during the wait.
pub(super) async fn act(task: &ResourceTask) -> Result<BTreeMap<String, String>, String> {
    let config = Config::infer()
        .await
        .map_err(|e| format!("no access to the API server from the step's pod: {e}"))?;
    let client = Client::try_from(config).map_err(|e| format!("an API client: {e}"))?;
    act_with(&client, task).await
}

/// [`act`] with `client`.
async fn act_with(
    client: &Client,
    task: &ResourceTask,
) -> Result<BTreeMap<String, String>, String> {
    let flags = Flags::parse(&task.flags)?;
    let manifest = resource_action::manifest_value(&task.manifest)?;
    let target = target(client, task, &flags, manifest.as_ref()).await?;
    let object = take_action(task, &flags, manifest, &target).await?;
    let waits = task.success_condition.is_some() || task.failure_condition.is_some();
    let object = match (object, &target.name) {
        (Some(_), Some(name)) if waits => Some(wait(task, &target, name).await?),
        (object, _) => object,
    };
    resource_action::outputs(task, object.as_ref())
}

/// What `task` acts on: the type and name in `flags` when they give one (and the manifest is
/// not an object of its own kind, as kubectl's `patch` reads them), else the manifest's.
async fn target(
    client: &Client,
    task: &ResourceTask,
    flags: &Flags,
    manifest: Option<&Value>,
) -> Result<Target, String> {
    let has_kind = manifest.is_some_and(|m| m.get("kind").is_some());
    let json_patch = task.action == "patch" && task.merge_strategy == "json";
    let (resource, capabilities, name) = match &flags.object {
        Some((kind, name)) if json_patch || !has_kind => {
            let (resource, capabilities) = resolve_type(client, kind).await?;
            (resource, capabilities, name.clone())
        }
        _ => {
            let manifest = manifest.ok_or("manifest: required")?;
            let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
            let (group, version) = match text(manifest.get("apiVersion")).split_once('/') {
                Some((group, version)) => (group.to_string(), version.to_string()),
                None => (String::new(), text(manifest.get("apiVersion"))),
            };
            let gvk = GroupVersionKind::gvk(&group, &version, &text(manifest.get("kind")));
            let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|e| format!("{} {}: {}", gvk.kind, manifest_api(&gvk), one_line(&e)))?;
            let metadata = manifest.get("metadata");
            let name = text(metadata.and_then(|m| m.get("name")));
            let prefix = text(metadata.and_then(|m| m.get("generateName")));
            let name = match (name.is_empty(), prefix.is_empty()) {
                (false, _) => name,
                (true, false) => resource_action::generated_name(&prefix, &task.job),
                (true, true) => return Err("manifest: metadata.name is required".into()),
            };
            (resource, capabilities, Some(name))
        }
    };
    let in_manifest = manifest
        .and_then(|m| m.get("metadata")?.get("namespace")?.as_str())
        .map(String::from);
    let namespace = (flags.namespace.clone().or(in_manifest)).unwrap_or(task.namespace.clone());
    let api = match capabilities.scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), &namespace, &resource),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    Ok(Target {
        api,
        resource,
        name,
    })
}

fn manifest_api(gvk: &GroupVersionKind) -> String {
    match gvk.group.as_str() {
        "" => gvk.version.clone(),
        group => format!("{group}/{}", gvk.version),
    }
}

/// The resource a kubectl type names: its plural, its kind in lower case, or either with its
/// group after a dot (`jobs.batch`).
async fn resolve_type(
    client: &Client,
    type_: &str,
) -> Result<(ApiResource, ApiCapabilities), String> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| format!("discovering the API's types: {}", one_line(&e)))?;
    let wanted = type_.to_lowercase();
    let (name, group) = match wanted.split_once('.') {
        Some((name, group)) => (name.to_string(), Some(group.to_string())),
        None => (wanted.clone(), None),
    };
    for api_group in discovery.groups() {
        if group.as_deref().is_some_and(|g| g != api_group.name()) {
            continue;
        }
        let found = (api_group.recommended_resources().into_iter())
            .find(|(r, _)| r.plural == name || r.kind.to_lowercase() == name);
        if let Some(found) = found {
            return Ok(found);
        }
    }
    Err(format!(
        "flags: the server doesn't have a resource type {type_:?} (a type is its plural, its \
         kind, or either with its group: jobs.batch)"
    ))
}

/// Takes the action on `target`; the object it leaves (none after a `delete`).
async fn take_action(
    task: &ResourceTask,
    flags: &Flags,
    manifest: Option<Value>,
    target: &Target,
) -> Result<Option<Value>, String> {
    let what = target.describe();
    let api = &target.api;
    let name = target.name.clone().unwrap_or_default();
    let failed = |doing: &str, e: kube::Error| format!("{doing} {what}: {}", one_line(&e));
    let object = |manifest: Option<Value>| -> Result<DynamicObject, String> {
        let mut object: DynamicObject = serde_json::from_value(manifest.unwrap_or_default())
            .map_err(|e| format!("manifest: not an object: {e}"))?;
        object.metadata.name = Some(name.clone());
        object.metadata.generate_name = None;
        if let Some(owner) = &task.owner {
            (object.metadata.owner_references.get_or_insert_default()).push(OwnerReference {
                api_version: owner.api_version.clone(),
                kind: owner.kind.clone(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                ..OwnerReference::default()
            });
        }
        Ok(object)
    };
    let done = match task.action.as_str() {
        "get" => api.get(&name).await.map_err(|e| failed("getting", e))?,
        "create" => create(task, api, object(manifest)?, &what).await?,
        "apply" => {
            let params = PatchParams::apply("workflow-operator").force();
            (api.patch(&name, &params, &Patch::Apply(object(manifest)?))
                .await)
                .map_err(|e| failed("applying", e))?
        }
        "replace" => {
            let current = api.get(&name).await.map_err(|e| failed("replacing", e))?;
            let mut object = object(manifest)?;
            object.metadata.resource_version = current.metadata.resource_version;
            (api.replace(&name, &PostParams::default(), &object).await)
                .map_err(|e| failed("replacing", e))?
        }
        "patch" => {
            let body = manifest.unwrap_or_default();
            let patch = match task.merge_strategy.as_str() {
                "merge" => Patch::Merge(body),
                "json" => Patch::Json(
                    serde_json::from_value(body)
                        .map_err(|e| format!("manifest: not a json patch: {e}"))?,
                ),
                _ => Patch::Strategic(body),
            };
            (api.patch(&name, &PatchParams::default(), &patch).await)
                .map_err(|e| failed("patching", e))?
        }
        "delete" => {
            delete(api, target.name.as_deref(), flags, &what).await?;
            return Ok(None);
        }
        other => return Err(format!("resource.action: {other:?} is not an action")),
    };
    println!("{what} {}", past(&task.action));
    serde_json::to_value(done)
        .map(Some)
        .map_err(|e| format!("{what}: {e}"))
}

fn past(action: &str) -> &str {
    match action {
        "get" => "read",
        "create" => "created",
        "apply" => "applied",
        "replace" => "replaced",
        "patch" => "patched",
        _ => "deleted",
    }
}

/// Creates `object`; one already there that this step's Job created is taken as made.
async fn create(
    task: &ResourceTask,
    api: &Api<DynamicObject>,
    mut object: DynamicObject,
    what: &str,
) -> Result<DynamicObject, String> {
    (object.metadata.annotations.get_or_insert_default())
        .insert(ANNOTATION_CREATED_BY.into(), task.job.clone());
    let name = object.metadata.name.clone().unwrap_or_default();
    let exists = match api.create(&PostParams::default(), &object).await {
        Ok(made) => return Ok(made),
        Err(kube::Error::Api(status)) if status.code == 409 => status.message,
        Err(e) => return Err(format!("creating {what}: {}", one_line(&e))),
    };
    let there = api
        .get(&name)
        .await
        .map_err(|e| format!("creating {what}: {exists}; {}", one_line(&e)))?;
    let creator = there
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CREATED_BY));
    if creator == Some(&task.job) {
        eprintln!("workflow-agent: {what} was created by an earlier try of this step's Job");
        return Ok(there);
    }
    Err(format!("creating {what}: {exists}"))
}

/// Deletes the named object, or every object of the type the selector picks; one that is
/// not there is no failure (as Argo's `kubectl delete --ignore-not-found`).
async fn delete(
    api: &Api<DynamicObject>,
    name: Option<&str>,
    flags: &Flags,
    what: &str,
) -> Result<(), String> {
    let names = match (name, &flags.selector) {
        (Some(name), _) => vec![name.to_string()],
        (None, Some(selector)) => {
            let listed = (api.list(&ListParams::default().labels(selector)).await)
                .map_err(|e| format!("listing {what} ({selector}): {}", one_line(&e)))?;
            listed
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect()
        }
        (None, None) => return Err("flags: a type needs a name or a --selector to delete".into()),
    };
    for name in names {
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => println!(
                "{} \"{name}\" deleted",
                what.split('/').next().unwrap_or(what)
            ),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(format!("deleting {what} {name:?}: {}", one_line(&e))),
        }
    }
    Ok(())
}

/// Watches the object until the failure condition holds (an error) or the success condition
/// does (the object as it is then).
async fn wait(task: &ResourceTask, target: &Target, name: &str) -> Result<Value, String> {
    let what = target.describe();
    let mut stream = std::pin::pin!(watcher::watch_object(target.api.clone(), name));
    let mut last_error = None;
    while let Some(event) = stream.next().await {
        let object = match event {
            Ok(Some(object)) => object,
            Ok(None) => {
                return Err(format!(
                    "{what} was deleted while the step waited for its condition"
                ));
            }
            // The watch starts again by itself; say why once.
            Err(error) => {
                let text = one_line(&error);
                if last_error.as_ref() != Some(&text) {
                    eprintln!("workflow-agent: watching {what}: {text}");
                }
                last_error = Some(text);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let object = serde_json::to_value(object).map_err(|e| format!("{what}: {e}"))?;
        match resource_action::verdict(task, &object)? {
            Verdict::Succeeded => return Ok(object),
            Verdict::Failed(message) => return Err(format!("{what}: {message}")),
            Verdict::Waiting => {}
        }
    }
    Err(format!("the watch of {what} ended"))
}

fn one_line(error: &dyn std::fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
