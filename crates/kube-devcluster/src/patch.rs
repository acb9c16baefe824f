//! The four patch types of the API: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic
//! merge patch (approximated: lists of objects keyed by `name` merge by key, as they do for
//! containers, env and ports), and server-side apply (a merge patch with a field manager; field
//! ownership is not tracked).

use serde_json::{Map, Value};

use super::error::{ApiError, Result};
use super::resources::ResourceInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Parses a patch body (apply patches may be YAML).
pub fn parse(kind: PatchKind, body: &[u8]) -> Result<Value> {
    let parsed = match kind {
        PatchKind::Apply => serde_json::from_slice(body)
            .or_else(|_| serde_yaml::from_slice(body).map_err(|e| e.to_string())),
        _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Applies a patch to the stored object, giving the object to write.
pub fn apply(kind: PatchKind, old: &Value, patch: &Value, info: &ResourceInfo) -> Result<Value> {
    let mut new = old.clone();
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut new, &ops).map_err(|e| ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "the server rejected our request due to an error in our request: {e}"
                ),
                details: None,
            })?;
        }
        PatchKind::Merge => json_patch::merge(&mut new, patch),
        // Custom resources have no patch strategy: strategic merge is refused as on the real server.
        PatchKind::StrategicMerge if info.schema.is_some() => {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
            ));
        }
        PatchKind::StrategicMerge | PatchKind::Apply => strategic_merge(&mut new, patch),
    }
    Ok(new)
}

/// A merge patch in which lists of objects that all carry a `name` are merged element by element
/// on that key, instead of replaced.
fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => merge_maps(target, patch),
        (target, patch) => *target = strip_nulls(patch),
    }
}

fn merge_maps(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if key.starts_with("$") {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Array(items) if keyed_by_name(items) => match target.get_mut(key) {
                Some(Value::Array(existing)) if keyed_by_name(existing) => {
                    merge_keyed_lists(existing, items)
                }
                _ => {
                    target.insert(key.clone(), strip_nulls(value));
                }
            },
            Value::Object(_) => {
                let entry = target
                    .entry(key.clone())
                    .or_insert(Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                strategic_merge(entry, value);
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

fn keyed_by_name(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| i.get("name").is_some_and(Value::is_string))
}

fn merge_keyed_lists(existing: &mut Vec<Value>, patch: &[Value]) {
    for item in patch {
        let name = &item["name"];
        match existing.iter_mut().find(|e| &e["name"] == name) {
            Some(found) => strategic_merge(found, item),
            None => existing.push(strip_nulls(item)),
        }
    }
}

fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn jobs() -> ResourceInfo {
        let registry = Registry::with_builtins();
        (*registry.lookup("batch", "v1", "jobs").unwrap()).clone()
    }

    #[test]
    fn merge_patch_replaces_lists_and_removes_nulls() {
        let old = json!({"spec": {"a": 1, "b": 2, "list": [1, 2]}});
        let new = apply(
            PatchKind::Merge,
            &old,
            &json!({"spec": {"a": null, "list": [3]}}),
            &jobs(),
        )
        .unwrap();
        assert_eq!(new, json!({"spec": {"b": 2, "list": [3]}}));
    }

    #[test]
    fn strategic_merge_merges_named_lists_by_name() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}});
        let new = apply(PatchKind::StrategicMerge, &old, &patch, &jobs()).unwrap();
        assert_eq!(
            new["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}])
        );
    }

    #[test]
    fn json_patch_applies_operations_and_reports_failures() {
        let old = json!({"metadata": {"labels": {"a": "1"}}});
        let ops = json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"}, {"op": "remove", "path": "/metadata/labels/a"}]);
        assert_eq!(
            apply(PatchKind::Json, &old, &ops, &jobs()).unwrap(),
            json!({"metadata": {"labels": {"b": "2"}}})
        );
        let bad = json!([{"op": "remove", "path": "/nope"}]);
        assert_eq!(
            apply(PatchKind::Json, &old, &bad, &jobs())
                .unwrap_err()
                .code,
            422
        );
    }
}
