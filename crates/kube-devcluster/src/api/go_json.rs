//! Objects written as kube-apiserver writes them in JSON. A built-in kind is a Go struct, whose
//! fields `encoding/json` writes in their declaration order: `TypeMeta` inline first (`kind`,
//! `apiVersion`), then `ObjectMeta` (`metadata`, its own fields in their order), then the kind's
//! fields (`spec`, `status`, or a ConfigMap's `immutable`, `data`, `binaryData`). A custom
//! resource is `unstructured.Unstructured`, maps all the way down, whose keys Go's encoder writes
//! sorted (`apiVersion`, `kind`, `metadata`, ...). Below the top level and `metadata`, keys are
//! written sorted for both: the order of every nested struct is not kept here. The final newline
//! `json.Encoder` adds to a response is the server's to write, not part of the stored bytes.

use serde_json::{Map, Value};

/// The order an object's keys are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// A built-in kind's: its Go struct's at the top level and in `metadata`.
    Struct,
    /// A custom resource's: sorted.
    Sorted,
}

/// `metav1.ObjectMeta`'s fields in their Go order (k8s.io/apimachinery pkg/apis/meta/v1/types.go).
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.ListMeta`'s fields in their Go order.
const LIST_META: &[&str] = &[
    "selfLink",
    "resourceVersion",
    "continue",
    "remainingItemCount",
];

/// The fields after `metadata` of the built-in kinds that have others than `spec` and `status`,
/// in their Go order (k8s.io/api core/v1 and rbac/v1 types.go).
fn own_fields(kind: &str, api_version: &str) -> &'static [&'static str] {
    match (kind, api_version) {
        ("ConfigMap", _) => &["immutable", "data", "binaryData"],
        ("Secret", _) => &["immutable", "data", "stringData", "type"],
        ("ServiceAccount", _) => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        ("Role" | "ClusterRole", _) => &["rules", "aggregationRule"],
        ("RoleBinding" | "ClusterRoleBinding", _) => &["subjects", "roleRef"],
        ("Event", "v1") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        _ => &["spec", "status"],
    }
}

/// The object's bytes, its keys in `order`.
pub fn to_vec(value: &Value, order: KeyOrder) -> Vec<u8> {
    let (KeyOrder::Struct, Value::Object(map)) = (order, value) else {
        return serde_json::to_vec(value).expect("json values serialize");
    };
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
    let own = own_fields(text("kind"), text("apiVersion"));
    let first: Vec<&str> = ["kind", "apiVersion", "metadata"]
        .into_iter()
        .chain(own.iter().copied())
        .collect();
    let mut out = Vec::with_capacity(512);
    write_object(&mut out, map, &first, &|out, key, value| match value {
        Value::Object(meta) if key == "metadata" => write_object(out, meta, OBJECT_META, &plain),
        _ => plain(out, key, value),
    });
    out
}

/// A list's `metadata` (`metav1.ListMeta`) in its Go order.
pub fn list_meta(meta: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_object(&mut out, meta, LIST_META, &plain);
    out
}

fn plain(out: &mut Vec<u8>, _key: &str, value: &Value) {
    serde_json::to_writer(out, value).expect("json values serialize");
}

/// `map` as a JSON object: the keys of `first` it has, in that order, then the others sorted,
/// each value written by `value`.
fn write_object(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    first: &[&str],
    value: &dyn Fn(&mut Vec<u8>, &str, &Value),
) {
    out.push(b'{');
    let listed = first.iter().copied().filter(|k| map.contains_key(*k));
    let rest = map
        .keys()
        .map(String::as_str)
        .filter(|k| !first.contains(k));
    for (i, key) in listed.chain(rest).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("strings serialize");
        out.push(b':');
        value(out, key, &map[key]);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: &Value, order: KeyOrder) -> String {
        String::from_utf8(to_vec(value, order)).unwrap()
    }

    #[test]
    fn a_built_in_kind_is_written_in_its_go_structs_order() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"},
            "spec": {"nodeName": "n", "containers": []},
            "metadata": {"uid": "u", "namespace": "default", "name": "p", "labels": {"b": "1", "a": "2"}}});
        assert_eq!(
            text(&pod, KeyOrder::Struct),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","uid":"u","labels":{"a":"2","b":"1"}},"spec":{"containers":[],"nodeName":"n"},"status":{"phase":"Running"}}"#
        );
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
            "immutable": true, "metadata": {"name": "c"}, "extra": 1});
        assert_eq!(
            text(&config_map, KeyOrder::Struct),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"},"immutable":true,"data":{"k":"v"},"extra":1}"#
        );
    }

    #[test]
    fn a_custom_resource_is_written_with_sorted_keys() {
        let widget =
            json!({"kind": "Widget", "apiVersion": "x/v1", "metadata": {"uid": "u", "name": "w"}});
        assert_eq!(
            text(&widget, KeyOrder::Sorted),
            r#"{"apiVersion":"x/v1","kind":"Widget","metadata":{"name":"w","uid":"u"}}"#
        );
    }

    #[test]
    fn list_metadata_is_written_in_its_go_order() {
        let meta = json!({"remainingItemCount": 3, "continue": "c", "resourceVersion": "7"});
        assert_eq!(
            String::from_utf8(list_meta(meta.as_object().unwrap())).unwrap(),
            r#"{"resourceVersion":"7","continue":"c","remainingItemCount":3}"#
        );
    }
}
