//! Events are one resource served under two APIs, `events.k8s.io/v1` (what kube-rs' recorder and
//! current controllers write) and core `v1` (what `kubectl describe` reads). The real server
//! stores each Event once and converts between the two; here each write to one is mirrored,
//! converted, to the other, directly in the store, so either API sees every Event.
//!
//! Events also expire ([`expire_events`]): the real server stores each one under an etcd lease
//! of `--event-ttl` (default 1h), renewed by every write of it (k8s.io/kubernetes
//! pkg/registry/core/event/storage/storage.go: `TTLFunc` returns the TTL on create and update),
//! and etcd deletes a key whose lease expires, with a delete in its event history ("Each expired
//! key generates a delete event", etcd's `LeaseGrant` API); Events are served without the watch
//! cache, so a watcher sees that delete as `DELETED`. Here a periodic sweep deletes the Events
//! last written more than the TTL ago, through the store, so lists, gets and watches see them go
//! the same way.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::error::Result;
use crate::api::resources::{GroupResource, Registry, ResourceInfo};
use crate::api::strategy::{FieldLabels, Strategy};
use crate::storage::store::{DeleteOptions, Store, StoredObject, Target};

/// How long an Event lives after its last write: kube-apiserver's `--event-ttl` default
/// (cmd/kube-apiserver/app/options: `1h0m0s`).
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// A core/v1 Event's rules: its field labels (pkg/apis/core/v1/conversion.go).
pub static CORE_STRATEGY: Strategy = Strategy {
    field_labels: Some(FieldLabels::of(&[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ])),
    ..Strategy::DEFAULT
};

/// An events.k8s.io/v1 Event's rules: its field labels (pkg/apis/events/v1/conversion.go).
pub static EVENTS_V1_STRATEGY: Strategy = Strategy {
    field_labels: Some(FieldLabels::of(&[
        "reason",
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reportingController",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ])),
    ..Strategy::DEFAULT
};

/// Whether a resource is one of the two faces of Events.
pub fn is_event(info: &ResourceInfo) -> bool {
    info.resource == "events" && (info.group.is_empty() || info.group == "events.k8s.io")
}

/// Brings the other face of a written Event in line with it (created when missing).
pub fn mirror_write(
    store: &Store,
    registry: &Registry,
    info: &ResourceInfo,
    written: &StoredObject,
) -> Result<()> {
    let (other, converted) = match info.group.as_str() {
        "" => (
            GroupResource::new("events.k8s.io", "events"),
            to_events_v1(&written.value),
        ),
        _ => (GroupResource::new("", "events"), to_core(&written.value)),
    };
    let Some(other) = registry.get(&other) else {
        return Ok(());
    };
    let (namespace, name) = (written.namespace(), written.name());
    match store.get(&other, namespace, name) {
        Ok(_) => store
            .modify(&other, namespace, name, Target::Main, |old, _| {
                let mut new = converted.clone();
                new["metadata"] = old["metadata"].clone();
                new["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("resourceVersion");
                Ok(new)
            })
            .map(drop),
        Err(_) => store.create(&other, namespace, converted).map(drop),
    }
}

/// Deletes the other face of a deleted Event.
pub fn mirror_delete(
    store: &Store,
    registry: &Registry,
    info: &ResourceInfo,
    namespace: &str,
    name: &str,
) {
    let other = match info.group.as_str() {
        "" => GroupResource::new("events.k8s.io", "events"),
        _ => GroupResource::new("", "events"),
    };
    if let Some(other) = registry.get(&other) {
        // Already gone is fine: the two faces are deleted together either way.
        let _ = store.delete(&other, namespace, name, &DeleteOptions::default());
    }
}

/// Deletes the Events (both faces) not written for `ttl`, sweeping every tenth of it (at least
/// every 100 ms, at most every minute), until `shutdown`. An Event goes between `ttl` and `ttl`
/// plus two sweep periods after its last write, never before.
pub async fn expire_events(
    store: Store,
    registry: Registry,
    ttl: Duration,
    shutdown: CancellationToken,
) {
    let period = (ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut expiry = Expiry::default();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        expiry.sweep(&store, &registry, ttl, Instant::now());
    }
}

/// When the store's resourceVersions were handed out, sampled at each sweep: an Event whose
/// resourceVersion is at most the one sampled `ttl` ago was last written before then. So no
/// write needs a timestamp and no Event a timer, and a sweep costs one pass over the Events.
#[derive(Debug, Default)]
struct Expiry {
    samples: VecDeque<(Instant, u64)>,
}

impl Expiry {
    /// Deletes the Events last written `ttl` or more before `now`; how many it deleted.
    fn sweep(&mut self, store: &Store, registry: &Registry, ttl: Duration, now: Instant) -> usize {
        self.samples.push_back((now, store.current_rv()));
        let Some(deadline) = now.checked_sub(ttl) else {
            return 0;
        };
        // The newest sample at or before the deadline; older ones are of no more use.
        while self.samples.get(1).is_some_and(|(at, _)| *at <= deadline) {
            self.samples.pop_front();
        }
        let Some(&(at, cutoff)) = self.samples.front() else {
            return 0;
        };
        if at > deadline {
            return 0;
        }
        let mut deleted = 0;
        for face in [
            GroupResource::new("", "events"),
            GroupResource::new("events.k8s.io", "events"),
        ] {
            let Some(info) = registry.get(&face) else {
                continue;
            };
            let (events, _) = store.list(&face, None);
            for event in events.iter().filter(|e| e.resource_version() <= cutoff) {
                // The precondition keeps an Event written again since the list.
                let options = DeleteOptions {
                    precondition_rv: Some(event.resource_version()),
                    ..Default::default()
                };
                if store
                    .delete(&info, event.namespace(), event.name(), &options)
                    .is_ok()
                {
                    deleted += 1;
                }
            }
        }
        deleted
    }
}

fn metadata_of(event: &Value) -> Value {
    let mut meta = Map::new();
    for field in ["name", "namespace", "labels", "annotations"] {
        if let Some(v) = event.pointer(&format!("/metadata/{field}")) {
            meta.insert(field.into(), v.clone());
        }
    }
    Value::Object(meta)
}

/// `events.k8s.io/v1` -> core `v1`, as the API server's conversion does.
pub fn to_core(event: &Value) -> Value {
    let get = |path: &str| event.pointer(path).cloned();
    let event_time = get("/eventTime");
    let last = get("/deprecatedLastTimestamp")
        .or_else(|| get("/series/lastObservedTime"))
        .or_else(|| event_time.clone());
    let first = get("/deprecatedFirstTimestamp").or_else(|| event_time.clone());
    let count = get("/deprecatedCount")
        .or_else(|| get("/series/count"))
        .unwrap_or(json!(1));
    let source = get("/deprecatedSource").unwrap_or_else(|| {
        let mut source = Map::new();
        if let Some(c) = get("/reportingController") {
            source.insert("component".into(), c);
        }
        if let Some(h) = get("/reportingInstance") {
            source.insert("host".into(), h);
        }
        Value::Object(source)
    });
    let mut core = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata_of(event),
        "involvedObject": get("/regarding").unwrap_or(json!({})),
        "source": source,
        "count": count,
    });
    let fields = [
        ("reason", get("/reason")),
        ("message", get("/note")),
        ("type", get("/type")),
        ("action", get("/action")),
        ("related", get("/related")),
        ("eventTime", event_time),
        ("series", get("/series")),
        ("reportingComponent", get("/reportingController")),
        ("reportingInstance", get("/reportingInstance")),
        // Timestamps are whole seconds in core; MicroTime has microseconds.
        ("firstTimestamp", first.map(whole_seconds)),
        ("lastTimestamp", last.map(whole_seconds)),
    ];
    for (field, value) in fields {
        if let Some(value) = value.filter(|v| !v.is_null()) {
            core[field] = value;
        }
    }
    core
}

/// Core `v1` -> `events.k8s.io/v1`.
pub fn to_events_v1(event: &Value) -> Value {
    let get = |path: &str| event.pointer(path).cloned();
    let mut converted = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": metadata_of(event),
    });
    let fields = [
        ("regarding", get("/involvedObject")),
        ("note", get("/message")),
        ("reason", get("/reason")),
        ("type", get("/type")),
        ("action", get("/action")),
        ("related", get("/related")),
        ("eventTime", get("/eventTime")),
        ("series", get("/series")),
        (
            "reportingController",
            get("/reportingComponent").or_else(|| get("/source/component")),
        ),
        (
            "reportingInstance",
            get("/reportingInstance").or_else(|| get("/source/host")),
        ),
        ("deprecatedSource", get("/source")),
        ("deprecatedCount", get("/count")),
        ("deprecatedFirstTimestamp", get("/firstTimestamp")),
        ("deprecatedLastTimestamp", get("/lastTimestamp")),
    ];
    for (field, value) in fields {
        if let Some(value) = value.filter(|v| !v.is_null()) {
            converted[field] = value;
        }
    }
    converted
}

/// `2026-11-22T08:00:00.123456Z` -> `2026-11-22T08:00:00Z`.
fn whole_seconds(time: Value) -> Value {
    match time
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    {
        Some(t) => json!(
            t.with_timezone(&chrono::Utc)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        None => time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_expire_a_ttl_after_their_last_write_in_both_faces() {
        let store = Store::default();
        let registry = Registry::with_builtins();
        let core = registry.get(&GroupResource::new("", "events")).unwrap();
        let v1 = registry
            .get(&GroupResource::new("events.k8s.io", "events"))
            .unwrap();
        let event = |name: &str| json!({"metadata": {"name": name}, "reason": "R"});
        let ttl = Duration::from_secs(60);
        let start = Instant::now();
        let mut expiry = Expiry::default();
        store.create(&core, "ns", event("old")).unwrap();
        store.create(&v1, "ns", event("old")).unwrap();
        assert_eq!(expiry.sweep(&store, &registry, ttl, start), 0);
        store.create(&core, "ns", event("new")).unwrap();
        let later = start + Duration::from_secs(30);
        assert_eq!(expiry.sweep(&store, &registry, ttl, later), 0);
        // A TTL after the first sweep, what was written before it goes; "new" was written after.
        assert_eq!(
            expiry.sweep(&store, &registry, ttl, start + ttl),
            2,
            "both faces of the old Event"
        );
        let names = |gr: &GroupResource| -> Vec<String> {
            store
                .list(gr, None)
                .0
                .iter()
                .map(|e| e.name().to_string())
                .collect()
        };
        assert_eq!(names(&core.group_resource()), vec!["new"]);
        assert!(names(&v1.group_resource()).is_empty());
        // A write renews an Event's lease: "new", written again, outlives its first TTL.
        store
            .modify(&core, "ns", "new", Target::Main, |old, _| {
                let mut new = old.clone();
                new["count"] = json!(2);
                Ok(new)
            })
            .unwrap();
        assert_eq!(expiry.sweep(&store, &registry, ttl, later + ttl), 0);
        let renewed = later + ttl + Duration::from_secs(1);
        assert_eq!(expiry.sweep(&store, &registry, ttl, renewed), 0);
        assert_eq!(expiry.sweep(&store, &registry, ttl, renewed + ttl), 1);
        assert!(names(&core.group_resource()).is_empty());
    }

    #[test]
    fn events_convert_both_ways_keeping_what_describe_shows() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "wf.1", "namespace": "ns", "uid": "dropped"},
            "regarding": {"kind": "WorkFlow", "name": "wf", "namespace": "ns", "uid": "u1"},
            "note": "step a started", "reason": "StepStarted", "type": "Normal", "action": "Create",
            "eventTime": "2026-11-22T08:00:00.123456Z",
            "reportingController": "workflow.crd.com", "reportingInstance": "pod-1",
        });
        let core = to_core(&v1);
        assert_eq!(core["involvedObject"]["uid"], "u1");
        assert_eq!(core["message"], "step a started");
        assert_eq!(core["reason"], "StepStarted");
        assert_eq!(
            core["source"],
            json!({"component": "workflow.crd.com", "host": "pod-1"})
        );
        assert_eq!(core["count"], 1);
        assert_eq!(core["lastTimestamp"], "2026-11-22T08:00:00Z");
        assert_eq!(core["metadata"], json!({"name": "wf.1", "namespace": "ns"}));
        let back = to_events_v1(&core);
        for field in [
            "regarding",
            "note",
            "reason",
            "type",
            "action",
            "eventTime",
            "reportingController",
            "reportingInstance",
        ] {
            assert_eq!(back[field], v1[field], "{field}");
        }
    }
}
