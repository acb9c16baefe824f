//! Where handler progress lives between runs: one annotation per object, plus the finalizer.
//!
//! The reactor ([`super::reactor`]) keeps a [`Record`] per object in memory and writes it here
//! after a create, update or delete handler finishes, fails or is put off, so that a restarted
//! operator neither repeats finished handlers nor skips unfinished ones.
//!
//! # Design
//!
//! The record is one annotation, `<prefix>/last-handled`, holding compact JSON:
//!
//! ```json
//! {"created":true,"generation":3,
//!  "fields":{"metadata.labels":{"value":{"team":"a"}},"spec":{"sha256":"9f86d0…"}},
//!  "handlers":{"restart":{"target":"5e88…","retries":2,"next":"2026-11-22T05:50:00Z"}}}
//! ```
//!
//! - `created`, `generation` and `fields` are the diff base ([`DiffBase`]): the last handled
//!   generation and, per registered field, its value when small or its sha256 when large. The
//!   record therefore stays a few hundred bytes for any object size, unlike Kopf's copy of the
//!   whole object that overflows the 256 KiB annotation limit (kopf#1087). The full previous
//!   object, for the detail of large diffs, is kept in memory only.
//! - `handlers` holds the progress of the cause being handled: per handler, what it is handling
//!   (`target`: `create`, `delete`, or the fingerprint of the field value for update handlers),
//!   whether it finished (`done`, or `failed` with the message), its retry count and the time of
//!   its next attempt. Entries are dropped when their cause completes. Unlike Kopf's status
//!   storage, an annotation is never pruned by a structural schema (kopf#574).
//! - Resume, timer and child handlers write nothing: their progress is only meaningful within
//!   one process (resume runs again after every restart by definition).
//!
//! # Writes
//!
//! All writes are idempotent patches of the object's metadata only, so they never conflict with
//! spec or status writes:
//! - the record: a JSON merge patch of the one annotation. It has a single writer (the one task
//!   that processes this object), so it needs no resourceVersion precondition;
//! - the finalizer: a JSON patch whose `test` operation is the precondition, as kube-runtime's
//!   `finalizer()` does: adding tests the resourceVersion the list was read at, removing tests
//!   that our finalizer is still at the index we remove. A failed test means another writer
//!   moved the list; the reactor retries against a fresh object.

use std::collections::BTreeMap;
use std::fmt::Debug;

use chrono::{DateTime, Utc};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::causes::DiffBase;

/// Errors of reading and writing progress.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("annotation {key} does not hold a progress record: {source}")]
    Decode {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("failed to store the progress record: {0}")]
    Store(#[source] kube::Error),
    #[error("failed to add the finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    #[error("failed to remove the finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The progress target of every create handler.
pub const CREATE: &str = "create";
/// The progress target of every delete handler.
pub const DELETE: &str = "delete";

/// Everything persisted about one object. See the module docs for the format.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub base: DiffBase,
    /// Progress of the handlers of the cause being handled, by handler name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handlers: BTreeMap<String, HandlerProgress>,
}

/// The progress of one handler for one target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerProgress {
    /// What the handler is handling: [`CREATE`], [`DELETE`] or a field fingerprint. Progress
    /// recorded for another target does not count.
    pub target: String,
    /// The handler succeeded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// The handler failed for good with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Failed attempts so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Not to be tried again before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<DateTime<Utc>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl HandlerProgress {
    /// Whether the handler needs no more attempts.
    pub fn finished(&self) -> bool {
        self.done || self.failed.is_some()
    }
}

impl Record {
    /// The progress of `handler` for `target`, if any was recorded for that target.
    pub fn progress(&self, handler: &str, target: &str) -> Option<&HandlerProgress> {
        self.handlers.get(handler).filter(|p| p.target == target)
    }

    /// Whether `handler` finished for `target`.
    pub fn finished(&self, handler: &str, target: &str) -> bool {
        self.progress(handler, target)
            .is_some_and(HandlerProgress::finished)
    }

    /// The progress entry of `handler` for `target`, reset if it was for another target.
    pub fn entry(&mut self, handler: &str, target: &str) -> &mut HandlerProgress {
        let entry = self.handlers.entry(handler.to_string()).or_default();
        if entry.target != target {
            *entry = HandlerProgress {
                target: target.to_string(),
                ..Default::default()
            };
        }
        entry
    }

    /// Reads the record from an object's annotation: `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`Error::Decode`] when the annotation exists but is not a record (hand-edited, or written
    /// by an incompatible version).
    pub fn read<K: Resource>(object: &K, key: &str) -> Result<Option<Self>> {
        let Some(text) = object.meta().annotations.as_ref().and_then(|a| a.get(key)) else {
            return Ok(None);
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|source| Error::Decode {
                key: key.to_string(),
                source,
            })
    }

    /// The annotation text.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }
}

/// Stores `record` in the annotation `key` of the object `name` (a merge patch of that one
/// annotation, with the object's `uid`, when given, as a precondition). Returns the object's
/// new resourceVersion, `None` if the object is gone.
///
/// # Errors
/// [`Error::Store`] when the API refuses the patch, including when the object under `name`
/// has another uid (409); a missing object is not an error (there is nothing left to record
/// progress for).
pub async fn store<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    key: &str,
    record: &Record,
) -> Result<Option<String>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut patch = json!({"metadata": {"annotations": {key: record.encode()}}});
    if let Some(uid) = uid {
        patch["metadata"]["uid"] = json!(uid);
    }
    match api
        .patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(stored) => Ok(stored.metadata.resource_version),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(Error::Store(error)),
    }
}

/// Adds `finalizer` to `object`, failing if the object changed since it was read.
///
/// # Errors
/// [`Error::AddFinalizer`] when the API refuses, including when the precondition fails (422):
/// re-read the object and try again.
pub async fn add_finalizer<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(finalizer.to_string());
    let patch = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": object.resource_version()},
        {"op": "add", "path": "/metadata/finalizers", "value": finalizers},
    ]);
    json_patch(api, &object.name_any(), patch)
        .await
        .map_err(Error::AddFinalizer)
}

/// Removes `finalizer` from `object` if it carries it; a missing object is fine.
///
/// # Errors
/// [`Error::RemoveFinalizer`] when the API refuses, including when the finalizer list changed
/// since the object was read (422): re-read the object and try again.
pub async fn remove_finalizer<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let Some(index) = object.finalizers().iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch = json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]);
    json_patch(api, &object.name_any(), patch)
        .await
        .map_err(Error::RemoveFinalizer)
}

async fn json_patch<K>(api: &Api<K>, name: &str, patch: Value) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a well-formed JSON patch");
    ignore_not_found(
        api.patch_metadata(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await,
    )
}

fn ignore_not_found<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causes::FieldBase;
    use serde_json::json;

    #[test]
    fn record_round_trips_through_its_annotation_text() {
        let mut record = Record {
            base: DiffBase {
                created: true,
                generation: Some(3),
                fields: BTreeMap::from([
                    (
                        "metadata.labels".to_string(),
                        FieldBase::Value(json!({"team": "a"})),
                    ),
                    ("spec".to_string(), FieldBase::Digest("ab".repeat(32))),
                ]),
            },
            handlers: BTreeMap::new(),
        };
        let entry = record.entry("restart", "fp");
        entry.retries = 2;
        entry.next = Some("2026-11-22T05:50:00Z".parse().expect("a time"));
        let text = record.encode();
        let decoded: Record = serde_json::from_str(&text).expect("decodes");
        assert_eq!(decoded, record);
        assert!(text.len() < 512, "the record is small: {text}");
    }

    #[test]
    fn progress_for_another_target_does_not_count() {
        let mut record = Record::default();
        record.entry("h", "v1").done = true;
        assert!(record.finished("h", "v1"));
        assert!(!record.finished("h", "v2"));
        let entry = record.entry("h", "v2");
        assert!(!entry.done, "a new target starts afresh");
        assert_eq!(entry.target, "v2");
    }

    #[test]
    fn failed_handlers_are_finished() {
        let table = [
            (
                HandlerProgress {
                    done: true,
                    ..Default::default()
                },
                true,
            ),
            (
                HandlerProgress {
                    failed: Some("boom".into()),
                    ..Default::default()
                },
                true,
            ),
            (
                HandlerProgress {
                    retries: 3,
                    ..Default::default()
                },
                false,
            ),
        ];
        for (progress, finished) in table {
            assert_eq!(progress.finished(), finished, "{progress:?}");
        }
    }

    #[test]
    fn missing_or_garbled_annotations_are_told_apart() {
        use kube::api::DynamicObject;
        let object = |annotations: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "X",
                "metadata": {"name": "x", "annotations": annotations},
            }))
            .expect("an object")
        };
        assert_eq!(
            Record::read(&object(json!({})), "k/last-handled").expect("ok"),
            None
        );
        let stored = object(json!({"k/last-handled": r#"{"created":true}"#}));
        let read = Record::read(&stored, "k/last-handled")
            .expect("ok")
            .expect("some");
        assert!(read.base.created);
        let garbled = object(json!({"k/last-handled": "not json"}));
        assert!(matches!(
            Record::read(&garbled, "k/last-handled"),
            Err(Error::Decode { .. })
        ));
    }
}
