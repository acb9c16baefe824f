//! Publishes Events (events.k8s.io/v1) about the objects an operator serves.
//!
//! It aggregates as client-go's event broadcaster (`tools/events/event_broadcaster.go`,
//! `recordToSink` and `getKey`) and kube-runtime's `Recorder` do: an Event that repeats (same
//! type, action, reason, regarding and related object) within 6 minutes of its last occurrence
//! is not created again; the first one's `series` counts it (2 at the first repeat) and records
//! when it was last seen, in a patch of `series` only. A repeat whose Event is gone (deleted, or
//! expired by the API server's `--event-ttl`) is created anew, as client-go does.
//!
//! What it remembers of each Event is its key, where it is and its count, not the whole Event:
//! kube-runtime's `Recorder` keeps every Event of the last 6 minutes whole and scans them all at
//! every publish, which in a burst of 1,000 workflows was 9 MiB of the operator's 35 MiB heap.
//! Here expired entries are dropped at most once a minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};

/// How long after its last occurrence a repeat still counts in an Event's series (client-go's
/// `finishTime`, kube-runtime's `CACHE_TTL`).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// How often expired entries are dropped.
const PRUNE_EVERY: SignedDuration = SignedDuration::from_mins(1);

/// Publishes Events as one reporting controller (and instance). Clones share what they remember.
#[derive(Clone)]
pub struct Publisher {
    client: Client,
    reporter: Reporter,
    recent: Arc<Mutex<Recent>>,
}

impl Publisher {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            recent: Arc::default(),
        }
    }

    /// Publishes `event` about `regarding`: creates it, or counts it in the series of the same
    /// Event published within the last 6 minutes.
    ///
    /// # Errors
    /// The API server's refusal to store or patch the Event.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = EventKey::of(event, regarding);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);

        let repeat = self.lock().repeat_of(&key, now);
        if let Some(repeat) = repeat {
            let series = EventSeries {
                count: repeat.count,
                last_observed_time: MicroTime(now),
            };
            let patch = serde_json::json!({ "series": series });
            match api
                .patch(&repeat.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.lock().observed(key, repeat.name, repeat.count, now);
                    return Ok(());
                }
                // Gone since: start a new Event (client-go's `recordEvent` does the same).
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }

        let created = self.event(event, regarding, now);
        let name = created.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &created).await?;
        self.lock().observed(key, name, 1, now);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        // A panic while holding the lock leaves a consistent map (every update is one insert).
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new Event, named as client-go and kube-runtime name them: `<regarding>.<ns in hex>`.
    fn event(&self, event: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let controller = &self.reporter.controller;
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(controller),
                    now.as_nanosecond()
                )),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| controller.clone()),
            ),
            type_: Some(type_name(event.type_).into()),
            ..K8sEvent::default()
        }
    }
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// What makes two Events the same for a series (client-go's `getKey`; the reporting controller
/// and instance are the publisher's own): one string, so an entry costs one allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey(String);

impl EventKey {
    fn of(event: &Event, regarding: &ObjectReference) -> Self {
        let mut key = format!(
            "{}\0{}\0{}\0",
            type_name(event.type_),
            event.action,
            event.reason
        );
        push_reference(&mut key, regarding);
        if let Some(related) = &event.secondary {
            push_reference(&mut key, related);
        }
        Self(key)
    }
}

fn push_reference(key: &mut String, reference: &ObjectReference) {
    for part in [
        &reference.api_version,
        &reference.kind,
        &reference.namespace,
        &reference.name,
        &reference.uid,
        &reference.field_path,
    ] {
        key.push_str(part.as_deref().unwrap_or_default());
        key.push('\0');
    }
}

/// An Event published recently: its name (in the regarding object's namespace), how many times
/// it occurred, and when last.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Occurrence {
    name: String,
    count: i32,
    last: Timestamp,
}

/// A repeat to count: the Event to patch and its new count.
#[derive(Debug, PartialEq, Eq)]
struct Repeat {
    name: String,
    count: i32,
}

/// The Events published within the series window.
#[derive(Debug, Default)]
struct Recent {
    events: HashMap<EventKey, Occurrence>,
    pruned: Option<Timestamp>,
}

impl Recent {
    /// The Event that an occurrence of `key` at `now` repeats, if one is still in its window.
    fn repeat_of(&mut self, key: &EventKey, now: Timestamp) -> Option<Repeat> {
        if self.pruned.is_none_or(|at| at + PRUNE_EVERY <= now) {
            self.events.retain(|_, seen| in_window(seen, now));
            self.pruned = Some(now);
        }
        self.events
            .get(key)
            .filter(|seen| in_window(seen, now))
            .map(|seen| Repeat {
                name: seen.name.clone(),
                count: seen.count.saturating_add(1),
            })
    }

    fn observed(&mut self, key: EventKey, name: String, count: i32, last: Timestamp) {
        self.events.insert(key, Occurrence { name, count, last });
    }
}

fn in_window(seen: &Occurrence, now: Timestamp) -> bool {
    seen.last + SERIES_WINDOW > now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some("a note that is not part of the key".into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("example.com/v1".into()),
            kind: Some("Widget".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn the_key_tells_reasons_objects_and_related_objects_apart_but_not_notes() {
        let a = EventKey::of(&event("Started"), &reference("a"));
        let mut other_note = event("Started");
        other_note.note = Some("another note".into());
        assert_eq!(a, EventKey::of(&other_note, &reference("a")));
        assert_ne!(a, EventKey::of(&event("Completed"), &reference("a")));
        assert_ne!(a, EventKey::of(&event("Started"), &reference("b")));
        let mut related = event("Started");
        related.secondary = Some(reference("job"));
        assert_ne!(a, EventKey::of(&related, &reference("a")));
    }

    #[test]
    fn a_repeat_within_six_minutes_of_the_last_counts_and_a_later_one_starts_anew() {
        let key = EventKey::of(&event("Started"), &reference("a"));
        let mut recent = Recent::default();
        assert_eq!(recent.repeat_of(&key, at(0)), None);
        recent.observed(key.clone(), "a.1".into(), 1, at(0));
        let repeat = recent.repeat_of(&key, at(300)).expect("within the window");
        assert_eq!(
            repeat,
            Repeat {
                name: "a.1".into(),
                count: 2
            }
        );
        recent.observed(key.clone(), repeat.name, repeat.count, at(300));
        // The window runs from the last occurrence, not the first.
        assert_eq!(recent.repeat_of(&key, at(659)).map(|r| r.count), Some(3));
        assert_eq!(recent.repeat_of(&key, at(660)), None);
    }

    #[test]
    fn expired_events_are_forgotten_at_most_once_a_minute() {
        let mut recent = Recent::default();
        for (name, last) in [("a", 0), ("b", 5), ("c", 300)] {
            let key = EventKey::of(&event("Started"), &reference(name));
            recent.observed(key, format!("{name}.1"), 1, at(last));
        }
        let probe = EventKey::of(&event("Probe"), &reference("z"));
        recent.repeat_of(&probe, at(360));
        assert_eq!(recent.events.len(), 2, "a, last seen at 0, expired at 360");
        // b expires at 365, but within the minute after a prune nothing is scanned...
        recent.repeat_of(&probe, at(419));
        assert_eq!(recent.events.len(), 2);
        // ...though an expired entry never counts a repeat.
        let b = EventKey::of(&event("Started"), &reference("b"));
        assert_eq!(recent.repeat_of(&b, at(419)), None);
        recent.repeat_of(&probe, at(420));
        assert_eq!(recent.events.len(), 1, "only c is left");
    }
}
