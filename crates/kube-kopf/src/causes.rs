//! Pure cause detection: what happened to an object since its handlers last ran.
//!
//! [`detect`] takes the object as it is now, the diff base stored for it (a [`DiffBase`], part of
//! the progress record kept by [`super::progress`]), the object as last handled if this process
//! still remembers it, whether this process sees the object for the first time, and the
//! finalizer; it returns one [`Cause`]. It reads nothing else and writes nothing: the reactor
//! calls it for every event and every resync, so it is cheap when nothing changed (a generation
//! comparison and an equality check of small metadata fields).
//!
//! How a change is recognised:
//! - Fields outside `metadata` (the spec) are compared only when `metadata.generation` moved past
//!   the last handled generation: the API server bumps it on spec changes only, so status writes
//!   never cost a comparison and are never a cause.
//! - Fields inside `metadata` (labels, annotations) do not move the generation; they are compared
//!   with the stored base on every call. Small bases are stored verbatim, large ones as a sha256
//!   digest ([`FieldBase`]).
//! - The field-level diff names `(path, old, new)` for every leaf that changed (lists are compared
//!   whole, as in Kopf). The old value comes from the verbatim base, else from the previously
//!   handled object kept in memory; after a restart of a large field neither exists and the diff
//!   reports the whole field with `old: None`.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use kube::Resource;
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Values whose JSON is at most this long are kept verbatim in the diff base; longer ones are
/// kept as a digest so the record stays small whatever the object's size.
pub const VERBATIM_LIMIT: usize = 512;

/// What happened to an object, as far as its handlers are concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum Cause {
    /// The object has never been fully handled (no record, or its create handlers have not all
    /// finished yet).
    Create,
    /// Registered fields changed. The list may be empty when the generation moved but no
    /// registered field changed: no handler runs, the stored generation is brought up to date.
    Update(Vec<FieldDiff>),
    /// This process sees an already handled object for the first time (operator start, or the
    /// object came into scope). Resume handlers run, then the update handlers of any fields that
    /// changed while nobody watched, listed here as for [`Cause::Update`].
    Resume(Vec<FieldDiff>),
    /// The object is being deleted and still carries this operator's finalizer.
    Delete,
    /// Nothing for handlers: status-only changes, our own record writes, repeated events, and
    /// deletions that this operator does not block.
    Noop,
}

/// The change of one registered field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDiff {
    /// The registered field, dotted (`spec`, `metadata.labels`).
    pub field: String,
    /// The field's new base, to be stored once its handlers have finished.
    pub base: FieldBase,
    /// The changed leaves inside the field.
    pub changes: Vec<Change>,
}

/// One changed leaf: its full path from the object's root, and its old and new values
/// (`None` for absent, or for an old value that is no longer known).
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub path: Vec<String>,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

/// What the record keeps of a field as last handled: the value itself when small, else its
/// digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldBase {
    #[serde(rename = "value")]
    Value(Value),
    #[serde(rename = "sha256")]
    Digest(String),
}

impl FieldBase {
    /// The base for a field's current value (absent fields are `null`).
    pub fn of(value: &Value) -> Self {
        let bytes = serde_json::to_vec(value).expect("a JSON value serializes");
        if bytes.len() <= VERBATIM_LIMIT {
            FieldBase::Value(value.clone())
        } else {
            FieldBase::Digest(hex_sha256(&bytes))
        }
    }

    /// Whether `value` is what this base was taken from.
    pub fn matches(&self, value: &Value) -> bool {
        match self {
            FieldBase::Value(base) => base == value,
            FieldBase::Digest(digest) => *digest == digest_of(value),
        }
    }

    /// A short, stable identity of the value: the progress of an update handler is tied to it,
    /// so a handler that finished for one value runs again when the field changes once more.
    pub fn fingerprint(&self) -> String {
        match self {
            FieldBase::Value(value) => digest_of(value),
            FieldBase::Digest(digest) => digest.clone(),
        }
    }
}

/// What the progress record keeps for change detection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffBase {
    /// Whether the create handlers have all finished (succeeded or failed for good).
    #[serde(default)]
    pub created: bool,
    /// The last generation whose registered fields were all handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The registered fields as last handled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, FieldBase>,
}

/// Everything [`detect`] knows besides the object itself.
#[derive(Clone, Copy, Debug)]
pub struct Known<'a, K> {
    /// The stored diff base; `None` when the object carries no record.
    pub base: Option<&'a DiffBase>,
    /// The object as its update handlers last saw it, if this process remembers it; only used
    /// for the detail of a diff whose base is a digest.
    pub previous: Option<&'a K>,
    /// Whether this process has not processed the object before.
    pub first_sighting: bool,
    /// This operator's finalizer.
    pub finalizer: &'a str,
    /// The registered update fields, dotted.
    pub fields: &'a [String],
}

/// Detects the cause for `object`. Pure: see the module docs for the rules.
pub fn detect<K: Resource + Serialize>(object: &K, known: &Known<'_, K>) -> Cause {
    let meta = object.meta();
    if meta.deletion_timestamp.is_some() {
        let ours = meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == known.finalizer);
        return if ours { Cause::Delete } else { Cause::Noop };
    }
    let base = match known.base {
        Some(base) if base.created => base,
        _ => return Cause::Create,
    };
    let generation_moved = match (meta.generation, base.generation) {
        (Some(now), Some(handled)) => now > handled,
        _ => true,
    };
    let current = Fields::new(object);
    let previous = known.previous.map(Fields::new);
    let mut diffs = Vec::new();
    for field in known.fields {
        // A field registered after the object was handled has no base: adopt its value quietly
        // rather than calling handlers for a change nobody made.
        let Some(old_base) = base.fields.get(field) else {
            continue;
        };
        if !is_metadata(field) && !generation_moved {
            continue;
        }
        let now = current.get(field);
        if old_base.matches(now) {
            continue;
        }
        let old = match old_base {
            FieldBase::Value(old) => Some(old),
            FieldBase::Digest(_) => previous
                .as_ref()
                .map(|previous| previous.get(field))
                .filter(|old| old_base.matches(old)),
        };
        let root = split(field);
        let mut changes = Vec::new();
        match old {
            Some(old) => diff_values(&root, old, now, &mut changes),
            None => changes.push(Change {
                path: root,
                old: None,
                new: present(now),
            }),
        }
        diffs.push(FieldDiff {
            field: field.clone(),
            base: FieldBase::of(now),
            changes,
        });
    }
    let generation_behind = matches!(
        (meta.generation, base.generation),
        (Some(now), Some(handled)) if now > handled
    ) || (meta.generation.is_some() && base.generation.is_none());
    if known.first_sighting {
        Cause::Resume(diffs)
    } else if !diffs.is_empty() || generation_behind {
        Cause::Update(diffs)
    } else {
        Cause::Noop
    }
}

/// The diff base of a fully handled object: created, at its generation, with every registered
/// field as it is now.
pub fn base_of<K: Resource + Serialize>(object: &K, fields: &[String]) -> DiffBase {
    let current = Fields::new(object);
    DiffBase {
        created: true,
        generation: object.meta().generation,
        fields: fields
            .iter()
            .map(|f| (f.clone(), FieldBase::of(current.get(f))))
            .collect(),
    }
}

/// The value at a dotted path of a JSON value; `null` when absent.
pub fn value_at<'v>(root: &'v Value, field: &str) -> &'v Value {
    let mut value = root;
    for part in field.split('.') {
        match value.get(part) {
            Some(next) => value = next,
            None => return &Value::Null,
        }
    }
    value
}

/// Appends the leaf-level changes between `old` and `new` under `path`. Objects are compared
/// key by key; anything else (lists included) is one leaf.
pub fn diff_values(path: &[String], old: &Value, new: &Value, out: &mut Vec<Change>) {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
            for key in keys {
                let mut child = path.to_vec();
                child.push(key.clone());
                match (old.get(key), new.get(key)) {
                    (Some(o), Some(n)) => diff_values(&child, o, n, out),
                    (o, n) => {
                        out.push(Change {
                            path: child,
                            old: o.cloned(),
                            new: n.cloned(),
                        });
                    }
                }
            }
        }
        _ if old == new => {}
        _ => out.push(Change {
            path: path.to_vec(),
            old: present(old),
            new: present(new),
        }),
    }
}

/// Lower-case hex sha256 of a value's JSON. serde_json's maps are sorted (its `preserve_order`
/// feature is off), so equal values have equal digests whatever their key order on the wire.
pub fn digest_of(value: &Value) -> String {
    hex_sha256(&serde_json::to_vec(value).expect("a JSON value serializes"))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_metadata(field: &str) -> bool {
    field == "metadata" || field.starts_with("metadata.")
}

fn split(field: &str) -> Vec<String> {
    field.split('.').map(str::to_string).collect()
}

fn present(value: &Value) -> Option<Value> {
    (!value.is_null()).then(|| value.clone())
}

/// Field values of an object, serializing only what is asked for: `metadata.*` fields come
/// from the metadata alone; anything else serializes the whole object, once.
struct Fields<'a, K> {
    object: &'a K,
    meta: OnceCell<Value>,
    whole: OnceCell<Value>,
}

impl<'a, K: Resource + Serialize> Fields<'a, K> {
    fn new(object: &'a K) -> Self {
        Self {
            object,
            meta: OnceCell::new(),
            whole: OnceCell::new(),
        }
    }

    /// The field's value, borrowed from one conversion of the object: a large spec is not
    /// copied again (a 10,000-step spec took 9 ms to copy and 4 ms to drop).
    fn get(&self, field: &str) -> &Value {
        if is_metadata(field) {
            let meta = self.meta.get_or_init(|| meta_json(self.object.meta()));
            let rest = field.strip_prefix("metadata").unwrap_or_default();
            match rest.strip_prefix('.') {
                Some(rest) => value_at(meta, rest),
                None => meta,
            }
        } else {
            let whole = self
                .whole
                .get_or_init(|| serde_json::to_value(self.object).unwrap_or(Value::Null));
            value_at(whole, field)
        }
    }
}

fn meta_json(meta: &ObjectMeta) -> Value {
    serde_json::to_value(meta).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    const FINALIZER: &str = "kopf.test/finalizer";

    fn object(value: Value) -> DynamicObject {
        let mut value = value;
        value["apiVersion"] = json!("kopf.test/v1");
        value["kind"] = json!("Widget");
        serde_json::from_value(value).expect("a valid object")
    }

    fn fields() -> Vec<String> {
        vec!["spec".into(), "metadata.labels".into()]
    }

    /// The base an object would leave behind once fully handled.
    fn handled(obj: &DynamicObject) -> DiffBase {
        base_of(obj, &fields())
    }

    fn change(path: &str, old: Option<Value>, new: Option<Value>) -> Change {
        Change {
            path: split(path),
            old,
            new,
        }
    }

    fn big_list(len: usize, tag: &str) -> Value {
        Value::Array((0..len).map(|i| json!(format!("{tag}-{i:05}"))).collect())
    }

    struct Case {
        name: &'static str,
        object: DynamicObject,
        base: Option<DiffBase>,
        previous: Option<DynamicObject>,
        first_sighting: bool,
        expected: Cause,
    }

    fn cases() -> Vec<Case> {
        let v1 = object(json!({
            "metadata": {"name": "w", "generation": 1, "labels": {"team": "a"}},
            "spec": {"size": 1, "nested": {"deep": {"x": "old"}}, "list": [1, 2]},
        }));
        let v1_status = {
            let mut obj = v1.clone();
            obj.data["status"] = json!({"phase": "Started"});
            obj.metadata.resource_version = Some("7".into());
            obj
        };
        let v2 = object(json!({
            "metadata": {"name": "w", "generation": 2, "labels": {"team": "a"}},
            "spec": {"size": 2, "nested": {"deep": {"x": "new", "y": true}}, "list": [1, 2, 3]},
        }));
        let v1_relabelled = object(json!({
            "metadata": {"name": "w", "generation": 1, "labels": {"team": "b", "tier": "x"}},
            "spec": {"size": 1, "nested": {"deep": {"x": "old"}}, "list": [1, 2]},
        }));
        // The body differs but the generation did not move: the server says the spec is the
        // same (this is how a status-subresource write looks to a stale reader).
        let v1_body_only = object(json!({
            "metadata": {"name": "w", "generation": 1, "labels": {"team": "a"}},
            "spec": {"size": 99},
        }));
        let v2_unregistered = {
            let mut obj = v1.clone();
            obj.metadata.generation = Some(2);
            obj
        };
        let deleting = |finalizers: Vec<&str>| {
            let mut obj = v1.clone();
            obj.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-01-01T00:00:00Z".parse().expect("a timestamp"),
                ));
            obj.metadata.finalizers = Some(finalizers.into_iter().map(String::from).collect());
            obj
        };
        let big = |tag: &str, generation: i64| {
            object(json!({
                "metadata": {"name": "big", "generation": generation},
                "spec": {"items": big_list(10_000, tag)},
            }))
        };
        let big1 = big("a", 1);
        let big2 = big("b", 2);
        let half_created = DiffBase {
            created: false,
            ..handled(&v1)
        };

        vec![
            Case {
                name: "new object is created",
                object: v1.clone(),
                base: None,
                previous: None,
                first_sighting: false,
                expected: Cause::Create,
            },
            Case {
                name: "new object seen at start is created, not resumed",
                object: v1.clone(),
                base: None,
                previous: None,
                first_sighting: true,
                expected: Cause::Create,
            },
            Case {
                name: "unfinished create goes on",
                object: v1.clone(),
                base: Some(half_created),
                previous: None,
                first_sighting: false,
                expected: Cause::Create,
            },
            Case {
                name: "status-only change is a noop",
                object: v1_status.clone(),
                base: Some(handled(&v1)),
                previous: Some(v1.clone()),
                first_sighting: false,
                expected: Cause::Noop,
            },
            Case {
                name: "body change without a new generation is a noop",
                object: v1_body_only,
                base: Some(handled(&v1)),
                previous: Some(v1.clone()),
                first_sighting: false,
                expected: Cause::Noop,
            },
            Case {
                name: "spec change by generation diffs nested fields",
                object: v2.clone(),
                base: Some(handled(&v1)),
                previous: Some(v1.clone()),
                first_sighting: false,
                expected: Cause::Update(vec![FieldDiff {
                    field: "spec".into(),
                    base: FieldBase::of(&v2.data["spec"]),
                    changes: vec![
                        change("spec.list", Some(json!([1, 2])), Some(json!([1, 2, 3]))),
                        change("spec.nested.deep.x", Some(json!("old")), Some(json!("new"))),
                        change("spec.nested.deep.y", None, Some(json!(true))),
                        change("spec.size", Some(json!(1)), Some(json!(2))),
                    ],
                }]),
            },
            Case {
                name: "label change diffs labels without a generation",
                object: v1_relabelled.clone(),
                base: Some(handled(&v1)),
                previous: None,
                first_sighting: false,
                expected: Cause::Update(vec![FieldDiff {
                    field: "metadata.labels".into(),
                    base: FieldBase::of(&json!({"team": "b", "tier": "x"})),
                    changes: vec![
                        change("metadata.labels.team", Some(json!("a")), Some(json!("b"))),
                        change("metadata.labels.tier", None, Some(json!("x"))),
                    ],
                }]),
            },
            Case {
                name: "new generation with no registered change refreshes the base",
                object: v2_unregistered,
                base: Some(handled(&v1)),
                previous: Some(v1.clone()),
                first_sighting: false,
                expected: Cause::Update(vec![]),
            },
            Case {
                name: "large spec change with the previous object in memory has the old value",
                object: big2.clone(),
                base: Some(handled(&big1)),
                previous: Some(big1.clone()),
                first_sighting: false,
                expected: Cause::Update(vec![FieldDiff {
                    field: "spec".into(),
                    base: FieldBase::of(&big2.data["spec"]),
                    changes: vec![change(
                        "spec.items",
                        Some(big_list(10_000, "a")),
                        Some(big_list(10_000, "b")),
                    )],
                }]),
            },
            Case {
                name: "large spec change after a restart reports an unknown old value",
                object: big2.clone(),
                base: Some(handled(&big1)),
                previous: None,
                first_sighting: false,
                expected: Cause::Update(vec![FieldDiff {
                    field: "spec".into(),
                    base: FieldBase::of(&big2.data["spec"]),
                    changes: vec![change("spec", None, Some(big2.data["spec"].clone()))],
                }]),
            },
            Case {
                name: "delete with our finalizer",
                object: deleting(vec!["other/finalizer", FINALIZER]),
                base: Some(handled(&v1)),
                previous: None,
                first_sighting: false,
                expected: Cause::Delete,
            },
            Case {
                name: "delete without our finalizer is not ours to block",
                object: deleting(vec!["other/finalizer"]),
                base: Some(handled(&v1)),
                previous: None,
                first_sighting: false,
                expected: Cause::Noop,
            },
            Case {
                name: "delete of a never handled object with our finalizer",
                object: deleting(vec![FINALIZER]),
                base: None,
                previous: None,
                first_sighting: true,
                expected: Cause::Delete,
            },
            Case {
                name: "handled object seen at start is resumed",
                object: v1_status,
                base: Some(handled(&v1)),
                previous: None,
                first_sighting: true,
                expected: Cause::Resume(vec![]),
            },
            Case {
                name: "resume carries changes made while nobody watched",
                object: v1_relabelled,
                base: Some(handled(&v1)),
                previous: None,
                first_sighting: true,
                expected: Cause::Resume(vec![FieldDiff {
                    field: "metadata.labels".into(),
                    base: FieldBase::of(&json!({"team": "b", "tier": "x"})),
                    changes: vec![
                        change("metadata.labels.team", Some(json!("a")), Some(json!("b"))),
                        change("metadata.labels.tier", None, Some(json!("x"))),
                    ],
                }]),
            },
        ]
    }

    #[test]
    fn causes_are_detected() {
        let fields = fields();
        for case in cases() {
            let known = Known {
                base: case.base.as_ref(),
                previous: case.previous.as_ref(),
                first_sighting: case.first_sighting,
                finalizer: FINALIZER,
                fields: &fields,
            };
            assert_eq!(
                detect(&case.object, &known),
                case.expected,
                "case: {}",
                case.name
            );
        }
    }

    #[test]
    fn large_values_are_kept_as_digests_and_small_ones_verbatim() {
        let small = json!({"team": "a"});
        let large = big_list(10_000, "a");
        assert_eq!(FieldBase::of(&small), FieldBase::Value(small.clone()));
        let FieldBase::Digest(digest) = FieldBase::of(&large) else {
            panic!("a 10,000 element list is stored as a digest");
        };
        assert_eq!(digest.len(), 64);
        assert!(FieldBase::of(&large).matches(&large));
        assert!(!FieldBase::of(&large).matches(&big_list(10_000, "b")));
    }

    #[test]
    fn digest_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"x": 1, "y": {"b": 2, "a": 1}}"#).expect("json");
        let b: Value = serde_json::from_str(r#"{"y": {"a": 1, "b": 2}, "x": 1}"#).expect("json");
        assert_eq!(digest_of(&a), digest_of(&b));
        assert_ne!(digest_of(&a), digest_of(&json!({"x": 2})));
    }

    #[test]
    fn removed_keys_and_emptied_fields_are_diffed() {
        let table = [
            (
                json!({"a": 1, "b": 2}),
                json!({"a": 1}),
                vec![change("f.b", Some(json!(2)), None)],
            ),
            (
                json!({"a": 1}),
                Value::Null,
                vec![change("f", Some(json!({"a": 1})), None)],
            ),
            (json!("x"), json!("x"), vec![]),
        ];
        for (old, new, expected) in table {
            let mut out = Vec::new();
            diff_values(&split("f"), &old, &new, &mut out);
            assert_eq!(out, expected, "{old} -> {new}");
        }
    }
}
