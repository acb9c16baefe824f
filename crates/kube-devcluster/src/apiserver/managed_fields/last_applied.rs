//! Client-side apply's `kubectl.kubernetes.io/last-applied-configuration` annotation meeting
//! server-side apply, as the API server's field manager treats it when the applier is kubectl
//! (field manager `kubectl`), so that an object made by `kubectl apply` can move to
//! `kubectl apply --server-side` and back:
//!
//! - conflicts with fields the annotation still agrees with the live object on are not
//!   conflicts: the apply is forced (k8s.io/apimachinery
//!   pkg/util/managedfields/internal/lastappliedmanager.go), since those fields were set by the
//!   same user's earlier client-side apply;
//! - after the apply, an annotation the object carries is rewritten to what was applied
//!   (lastappliedupdater.go), so a later client-side apply diffs against it.
//!
//! Any other field manager opts out, as on a real server.

use kube_schema_check::object_meta::{MAX_ANNOTATIONS_BYTES, annotations_size};
use serde_json::Value;

use super::{FieldSet, Writer, compare, field_set};
use crate::apiserver::merge_keys::Shape;

/// The annotation client-side apply keeps (lastapplied.go LastAppliedConfigAnnotation).
const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The only manager the API server upgrades for ("To opt-out of this behavior, users may
/// specify a different field manager").
const KUBECTL: &str = "kubectl";

/// The fields of `live` whose values its last-applied annotation still matches, where a
/// conflict with another manager does not stop `who`'s apply: nothing unless `who` is kubectl
/// and the annotation is there, parses, and is of the version being applied
/// (allowedConflictsFromLastApplied: the annotation's fields, less those it modifies, adds or
/// removes compared with the live object).
pub fn agreed_fields(live: &Value, who: &Writer, shape: Shape) -> Option<FieldSet> {
    if who.manager != KUBECTL {
        return None;
    }
    let text = annotation(live)?;
    let last_applied: Value = serde_json::from_str(text).ok()?;
    if last_applied.get("apiVersion").and_then(Value::as_str) != Some(who.api_version) {
        return None;
    }
    let comparison = compare(&last_applied, live, shape);
    Some(
        field_set(&last_applied, shape)
            .difference(&comparison.modified)
            .difference(&comparison.added)
            .difference(&comparison.removed),
    )
}

/// After kubectl's server-side apply of `config`: an annotation `obj` carries is set to the
/// configuration (without the annotation itself), encoded as Go encodes it, and dropped when
/// the annotations would outgrow their limit (SetLastApplied, ValidateAnnotationsSize).
pub fn sync_annotation(obj: &mut Value, config: &Value, who: &Writer) {
    if who.manager != KUBECTL || annotation(obj).is_none() {
        return;
    }
    let mut applied = config.clone();
    if let Some(annotations) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION);
    }
    let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(ANNOTATION.into(), Value::String(go_encode(&applied)));
    if annotations_size(annotations) > MAX_ANNOTATIONS_BYTES {
        annotations.remove(ANNOTATION);
    }
}

fn annotation(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")?
        .get(ANNOTATION)?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// What `json.NewEncoder(w).Encode` writes for an unstructured object (buildLastApplied
/// encodes with UnstructuredJSONScheme): keys sorted, `<`, `>`, `&`, U+2028 and U+2029
/// escaped, and a newline. They can only occur inside strings, so replacing them in the
/// output is exact.
fn go_encode(value: &Value) -> String {
    let mut out = String::new();
    for c in value.to_string().chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_encoding_sorts_keys_escapes_html_and_ends_with_a_newline() {
        assert_eq!(
            go_encode(&json!({"b": "<a&b>", "a": 1})),
            "{\"a\":1,\"b\":\"\\u003ca\\u0026b\\u003e\"}\n"
        );
    }
}
