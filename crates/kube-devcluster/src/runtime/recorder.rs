//! Events the in-process controllers record about the objects they act on (the Job controller's
//! `FailedCreate`, the kubelet's `FailedMount`, the scheduler's `FailedScheduling`), written
//! straight to the store as core `v1` Events and mirrored to `events.k8s.io/v1`
//! ([`crate::registry::events::mirror_write`]), so `kubectl describe`, `kubectl get events` and
//! clients of either API see them.
//!
//! A repeat of the same Event (same object, type, reason and message) bumps the first one's
//! `count` and `lastTimestamp` instead of adding another, as client-go's event correlator does
//! (k8s.io/client-go/tools/record/events_cache.go, `EventAggregator`/`eventLogger`: the key is the
//! source, involved object, type, reason and message; the name is `{object}.{unix nanos in hex}`,
//! tools/record/event.go `makeEvent`).

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::api::resources::Registry;
use crate::api::resources::builtin;
use crate::storage::store::{Store, StoredObject, Target, now_rfc3339};

/// How many distinct Events are remembered for aggregation (client-go's cache holds 4096).
const REMEMBERED: usize = 4096;

/// What makes two Warnings the same Event: the object's uid, the reason and the message.
type Key = (String, String, String);

/// Writes Events for one controller (its `source.component`, e.g. `job-controller`).
pub(crate) struct Recorder {
    store: Store,
    registry: Registry,
    component: &'static str,
    /// The Event (namespace, name) recorded for each (object uid, reason, message).
    seen: Mutex<HashMap<Key, (String, String)>>,
}

impl Recorder {
    pub fn new(store: Store, registry: Registry, component: &'static str) -> Self {
        Self {
            store,
            registry,
            component,
            seen: Mutex::default(),
        }
    }

    /// Records a `Warning` Event: `reason` happened to `object` (a stored object of any
    /// namespaced kind). Failures are logged: an Event is a record for people, never a decision.
    pub fn warn(&self, object: &StoredObject, reason: &str, message: &str) {
        self.record(object, "Warning", reason, message);
    }

    /// Records a `Normal` Event, as [`Recorder::warn`] does a `Warning`.
    pub fn normal(&self, object: &StoredObject, reason: &str, message: &str) {
        self.record(object, "Normal", reason, message);
    }

    fn record(&self, object: &StoredObject, type_: &str, reason: &str, message: &str) {
        let key = (
            object.uid().to_string(),
            reason.to_string(),
            message.to_string(),
        );
        let events = builtin(&self.registry, "", "events");
        let now = now_rfc3339();
        let known = self
            .seen
            .lock()
            .expect("recorder lock poisoned")
            .get(&key)
            .cloned();
        let written = match known {
            Some((namespace, name)) => self
                .store
                .modify(&events, &namespace, &name, Target::Main, |old, _| {
                    let mut new = old.clone();
                    let count = old.get("count").and_then(Value::as_i64).unwrap_or(1);
                    new["count"] = json!(count + 1);
                    new["lastTimestamp"] = json!(now);
                    Ok(new)
                })
                .or_else(|_| self.create(object, type_, reason, message, &now)),
            None => self.create(object, type_, reason, message, &now),
        };
        match written {
            Ok(event) => {
                if let Err(error) = crate::registry::events::mirror_write(
                    &self.store,
                    &self.registry,
                    &events,
                    &event,
                ) {
                    tracing::debug!(%error, "cannot mirror an event to events.k8s.io");
                }
                let mut seen = self.seen.lock().expect("recorder lock poisoned");
                if seen.len() >= REMEMBERED {
                    seen.clear();
                }
                seen.insert(key, (event.namespace().into(), event.name().into()));
            }
            Err(error) => tracing::warn!(%error, reason, "cannot record an event"),
        }
    }

    fn create(
        &self,
        object: &StoredObject,
        type_: &str,
        reason: &str,
        message: &str,
        now: &str,
    ) -> crate::api::error::Result<std::sync::Arc<StoredObject>> {
        let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        let event = json!({
            "metadata": {"name": format!("{}.{nanos:x}", object.name())},
            "involvedObject": {
                "apiVersion": object.value.get("apiVersion").cloned().unwrap_or(Value::Null),
                "kind": object.value.get("kind").cloned().unwrap_or(Value::Null),
                "namespace": object.namespace(),
                "name": object.name(),
                "uid": object.uid(),
                "resourceVersion": object.resource_version().to_string(),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": "",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let events = builtin(&self.registry, "", "events");
        self.store.create(&events, object.namespace(), event)
    }
}
