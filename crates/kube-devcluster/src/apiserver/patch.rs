//! The four patch types of the API: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic
//! merge patch (each field merges as its type declares: lists by their merge key, with the
//! `$patch`, `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList` directives; see
//! `merge_keys`), and server-side apply (see `managed_fields`).

use serde_json::{Map, Value};

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;
use crate::apiserver::merge_keys::{Field, Shape};

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
        PatchKind::StrategicMerge => strategic_merge(&mut new, patch, Shape::root(info))?,
        PatchKind::Apply => {
            crate::apiserver::managed_fields::apply_merge(&mut new, patch, Shape::root(info))
        }
    }
    Ok(new)
}

/// Strategic merge patch as k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (`mergeMap`,
/// `mergeSlice`) applies one to an object whose fields merge as `shape` declares.
pub fn strategic_merge(target: &mut Value, patch: &Value, shape: Shape) -> Result<()> {
    match (target.as_object_mut(), patch) {
        (Some(map), Value::Object(patch)) => {
            if merge_map(map, patch, shape)? == Outcome::Delete {
                // `$patch: delete` of the whole object leaves an empty one (patch.go mergeMap).
                map.clear();
            }
        }
        (_, patch) => *target = patch.clone(),
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    /// The patch said `$patch: delete`: the parent removes this map.
    Delete,
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// A malformed strategic merge patch is a 400 (endpoints/handlers/patch.go
/// interpretStrategicMergePatchError).
fn invalid_patch(message: String) -> ApiError {
    ApiError::bad_request(message)
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    shape: Shape,
) -> Result<Outcome> {
    // patch.go handleDirectiveInMergeMap: `$patch: replace` replaces the map with the patch's
    // other keys, `$patch: delete` deletes it, `merge` is the default.
    match patch.get(DIRECTIVE) {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "replace" => {
            *target = patch
                .iter()
                .filter(|(k, _)| k.as_str() != DIRECTIVE)
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect();
            return Ok(Outcome::Keep);
        }
        Some(Value::String(d)) if d == "delete" => return Ok(Outcome::Delete),
        Some(other) => return Err(invalid_patch(format!("Unknown patch type: {other}"))),
    }
    // patch.go applyRetainKeysDirective: fields of the original the list does not name are
    // cleared, and every field the patch sets must be named.
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Some(retain) = retain.as_array() else {
            return Err(invalid_patch(format!(
                "invalid patch: {RETAIN_KEYS} must be a list"
            )));
        };
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        // Nulls (fields the patch deletes) need not be named.
        for (key, _) in patch
            .iter()
            .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
        {
            if !keep.contains(&key.as_str()) {
                return Err(invalid_patch(format!(
                    "invalid patch format of retainKeys: {key}"
                )));
            }
        }
        target.retain(|key, _| keep.contains(&key.as_str()));
    }
    let mut orders = Vec::new();
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            // patch.go mergePatchIntoOriginal: removes these values from the primitive list.
            let remove = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            orders.push((field, value));
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        let field = shape.field(key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(patch) => {
                let entry = target
                    .entry(key.clone())
                    .or_insert(Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                let map = entry.as_object_mut().expect("an object");
                if merge_map(map, patch, field.shape)? == Outcome::Delete {
                    target.remove(key);
                }
            }
            Value::Array(patch) if field.merge => {
                let mut items = match target.remove(key) {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                merge_list(&mut items, patch, &field)?;
                target.insert(key.clone(), Value::Array(items));
            }
            _ => {
                target.insert(key.clone(), strip_nulls(value));
            }
        }
    }
    for (field, order) in orders {
        let Some(order) = order.as_array() else {
            return Err(invalid_patch(format!(
                "invalid patch: {SET_ELEMENT_ORDER}{field} must be a list"
            )));
        };
        let merge_key = shape.field(field).merge_key;
        if let Some(Value::Array(items)) = target.get_mut(field) {
            let original = items.clone();
            *items = set_element_order(std::mem::take(items), order, &original, merge_key);
        }
    }
    Ok(Outcome::Keep)
}

/// A list with patch strategy `merge`: items of objects merge on the merge key (and a
/// `$patch: delete` item removes one, a `$patch: replace` item makes the patch's items the list);
/// lists of scalars become the union, original items first (patch.go mergeSlice).
fn merge_list(target: &mut Vec<Value>, patch: &[Value], field: &Field) -> Result<()> {
    let is_directive =
        |item: &Value, which: &str| item.get(DIRECTIVE).and_then(Value::as_str) == Some(which);
    if patch.iter().any(|item| is_directive(item, "replace")) {
        *target = patch
            .iter()
            .filter(|item| !is_directive(item, "replace"))
            .map(strip_nulls)
            .collect();
        return Ok(());
    }
    let Some(key) = field.merge_key else {
        for item in patch {
            if !target.contains(item) {
                target.push(item.clone());
            }
        }
        return Ok(());
    };
    for item in patch {
        let Some(patch_item) = item.as_object() else {
            return Err(invalid_patch(format!(
                "invalid patch: the list items must be objects with the merge key {key:?}"
            )));
        };
        let Some(id) = patch_item.get(key) else {
            return Err(invalid_patch(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let position = target.iter().position(|t| t.get(key) == Some(id));
        if is_directive(item, "delete") {
            target.retain(|t| t.get(key) != Some(id));
            continue;
        }
        match position {
            Some(i) => {
                let found = target[i]
                    .as_object_mut()
                    .expect("items with a merge key are objects");
                merge_map(found, patch_item, field.shape)?;
            }
            None => {
                let mut new = Map::new();
                merge_map(&mut new, patch_item, field.shape)?;
                target.push(Value::Object(new));
            }
        }
    }
    Ok(())
}

/// `$setElementOrder/<field>`: the items the order names come in that order; the others (only
/// on the server) keep their place relative to them in the original list (patch.go
/// normalizeElementOrder and mergeSortedSlice).
fn set_element_order(
    merged: Vec<Value>,
    order: &[Value],
    original: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let id = |item: &Value| -> Value {
        match merge_key {
            Some(key) => item.get(key).cloned().unwrap_or(Value::Null),
            None => item.clone(),
        }
    };
    let order_ids: Vec<Value> = order.iter().map(&id).collect();
    let server_ids: Vec<Value> = original.iter().map(&id).collect();
    let (mut named, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| order_ids.contains(&id(item)));
    named.sort_by_key(|item| order_ids.iter().position(|o| *o == id(item)));
    let index = |item: &Value| server_ids.iter().position(|s| *s == id(item));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut left, mut right) = (
        named.into_iter().peekable(),
        server_only.into_iter().peekable(),
    );
    loop {
        match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                let take_left = matches!((index(l), index(r)), (Some(a), Some(b)) if a < b);
                out.push(if take_left { left.next() } else { right.next() }.expect("peeked"));
            }
            (Some(_), None) => out.push(left.next().expect("peeked")),
            (None, Some(_)) => out.push(right.next().expect("peeked")),
            (None, None) => break,
        }
    }
    out
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
    use crate::api::resources::Registry;
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
    fn strategic_merge_merges_containers_by_name() {
        let old = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}}});
        let new = apply(PatchKind::StrategicMerge, &old, &patch, &jobs()).unwrap();
        assert_eq!(
            new["spec"]["template"]["spec"]["containers"],
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
