//! OpenAPI v3 documents for what the registry serves: the `/openapi/v3` index and one document
//! per group/version. kubectl reads them before `apply` and `create` to learn that the server
//! validates fields itself (the `fieldValidation` parameter of each PATCH operation; it then sends
//! `fieldValidation=Strict` instead of validating on its side), and `kubectl explain` reads the
//! schemas. CRDs contribute their structural schema; built-in kinds their full schema (the
//! definitions k8s-openapi carries, [`crate::apiserver::builtin_schemas`]), with every definition
//! they use.
//!
//! PATCH operations of built-in kinds deliberately do not list the strategic merge patch media
//! type: kubectl then computes client-side apply patches from its compiled-in types (strategic
//! merge for built-ins, JSON merge for custom resources), as it does with any server whose
//! OpenAPI lacks the Kubernetes patch extensions.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::api::resources::{Registry, ResourceInfo};
use crate::apiserver::builtin_schemas::SCHEMAS;

/// The Kubernetes version the documents say they describe.
pub const KUBERNETES_VERSION: &str = "v1.34.0";

/// `api/v1` or `apis/{group}/{version}`: the key of a group/version in the index.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` index: each served group/version with the URL of its document. The URL
/// carries a hash of the document so clients can cache it.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(registry) {
        let Some(hash) = document_hash(registry, &group, &version) else {
            continue;
        };
        let path = gv_path(&group, &version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({ "paths": paths })
}

/// Every served (group, version), sorted.
pub fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = registry
        .all()
        .iter()
        .map(|i| (i.group.clone(), i.version.clone()))
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs
}

/// The hash of a group/version's document. The documents of built-in kinds are large (every
/// definition they use) and never change, so their hashes are kept, keyed by the kinds served
/// (a document with a custom resource is hashed anew: its CRD can change).
fn document_hash(registry: &Registry, group: &str, version: &str) -> Option<String> {
    static BUILTIN_HASHES: LazyLock<Mutex<HashMap<String, String>>> =
        LazyLock::new(Default::default);
    let infos: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|i| i.group == group && i.version == version)
        .collect();
    let builtin_only = infos.iter().all(|i| builtin_schema(i).is_some());
    let key = format!(
        "{group}/{version}:{}",
        infos
            .iter()
            .map(|i| i.kind.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    if builtin_only && let Some(hash) = BUILTIN_HASHES.lock().expect("hashes").get(&key) {
        return Some(hash.clone());
    }
    let doc = document(registry, group, version)?;
    let hash = hex(&Sha256::digest(doc.to_string().as_bytes())[..16]);
    if builtin_only {
        BUILTIN_HASHES
            .lock()
            .expect("hashes")
            .insert(key, hash.clone());
    }
    Some(hash)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// The name a kind's schema has under `components/schemas`: `io.k8s.api.batch.v1.Job` for
/// built-ins, the reversed group for custom resources (`com.example.v1.Widget`).
fn schema_name(info: &ResourceInfo) -> String {
    if let Some((definition, _)) = builtin_schema(info) {
        return definition.to_string();
    }
    if info.schema.is_some() {
        let reversed: Vec<&str> = info.group.split('.').rev().collect();
        format!("{}.{}.{}", reversed.join("."), info.version, info.kind)
    } else {
        let group = match info.group.as_str() {
            "" => "core".to_string(),
            g => g.trim_end_matches(".k8s.io").replace('.', "_"),
        };
        format!("io.k8s.api.{group}.{}.{}", info.version, info.kind)
    }
}

/// The full schema of a built-in kind (k8s-openapi's, [`crate::apiserver::builtin_schemas`]) and
/// its definition name, as the real server's documents carry it; `None` for custom resources.
fn builtin_schema(info: &ResourceInfo) -> Option<(&'static str, &'static Value)> {
    if info.schema.is_some() {
        return None;
    }
    let name = SCHEMAS.kind(&info.group, &info.version, &info.kind)?;
    Some((name, SCHEMAS.get(name)?))
}

pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The OpenAPI v3 document of one group/version, or `None` when nothing is served there.
pub fn document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|i| i.group == group && i.version == version)
        .collect();
    if infos.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(OBJECT_META.into(), object_meta_schema());
    for info in &infos {
        let name = schema_name(info);
        let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        let base = format!("/{}", gv_path(group, version));
        let collection = if info.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", info.resource)
        } else {
            format!("{base}/{}", info.resource)
        };
        let op = |action: &str, with_body: bool, patch: bool| {
            let mut op = json!({
                "operationId": format!("{action}{}", info.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": parameters(patch || with_body),
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
            });
            if patch {
                let media: Map<String, Value> = [
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]
                .into_iter()
                .map(|m| (m.to_string(), json!({"schema": {"type": "object"}})))
                .collect();
                op["requestBody"] = json!({"content": media, "required": true});
            } else if with_body {
                op["requestBody"] = json!({"content": {"application/json": {"schema": reference}}, "required": true});
            }
            op
        };
        paths.insert(
            collection.clone(),
            json!({
                "get": op("list", false, false),
                "post": op("post", true, false),
                "delete": op("deletecollection", false, false),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": op("get", false, false),
                "put": op("put", true, false),
                "patch": op("patch", true, true),
                "delete": op("delete", false, false),
            }),
        );
        if info.status_subresource {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": op("get", false, false),
                    "put": op("put", true, false),
                    "patch": op("patch", true, true),
                }),
            );
        }
        match builtin_schema(info) {
            Some((definition, schema)) => {
                for needed in SCHEMAS.reachable(&[definition]) {
                    if let Some(def) = SCHEMAS.get(&needed) {
                        schemas.insert(needed, def.clone());
                    }
                }
                let mut schema = schema.clone();
                schema["x-kubernetes-group-version-kind"] = json!([gvk]);
                schemas.insert(definition.to_string(), schema);
            }
            None => {
                schemas.insert(name, kind_schema(info, gvk));
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The query parameters of an operation; writes take `fieldValidation`, which is what kubectl
/// looks for to leave field validation to the server.
fn parameters(write: bool) -> Value {
    let query = |name: &str, description: &str| json!({"name": name, "in": "query", "description": description, "schema": {"type": "string"}, "uniqueItems": true});
    let mut params = vec![query(
        "pretty",
        "If 'true', then the output is pretty printed.",
    )];
    if write {
        params.push(query(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ));
        params.push(query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."));
        params.push(query("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn or Strict."));
    }
    json!(params)
}

/// The schema of a kind: a CRD's structural schema with the standard fields, or an open object
/// for a built-in kind without a schema in [`crate::apiserver::builtin_schemas`].
fn kind_schema(info: &ResourceInfo, gvk: Value) -> Value {
    let mut schema = info.schema.clone().unwrap_or_else(|| {
        json!({
            "type": "object",
            "description": format!("{} is a built-in Kubernetes kind.", info.kind),
            "x-kubernetes-preserve-unknown-fields": true,
        })
    });
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    let properties = schema
        .as_object_mut()
        .expect("object schema")
        .entry("properties")
        .or_insert_with(|| json!({}));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
        );
        properties.insert(
            "kind".into(),
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
        );
        properties.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}),
        );
    }
    schema["x-kubernetes-group-version-kind"] = json!([gvk]);
    schema
}

fn object_meta_schema() -> Value {
    let string = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": d});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": string("Name must be unique within a namespace."),
            "generateName": string("An optional prefix used by the server to generate a unique name."),
            "namespace": string("Namespace defines the space within which each name must be unique."),
            "uid": string("UID is the unique in time and space value for this object."),
            "resourceVersion": string("An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": string("The server time when this object was created."),
            "deletionTimestamp": string("The time after which this resource will be deleted."),
            "labels": map("Map of string keys and values that can be used to organize and categorize objects."),
            "annotations": map("Unstructured key value map stored with a resource."),
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "List of objects depended by this object."},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "Field ownership of server-side apply."},
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_operations_declare_field_validation_for_each_kind() {
        let registry = Registry::with_builtins();
        let index = index(&registry);
        let url = index["paths"]["apis/batch/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/batch/v1?hash="), "{url}");
        assert!(index["paths"]["api/v1"].is_object());
        let doc = document(&registry, "batch", "v1").unwrap();
        let patch = &doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "batch", "version": "v1", "kind": "Job"})
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        assert!(
            patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        assert!(document(&registry, "nope.io", "v1").is_none());
    }
}
