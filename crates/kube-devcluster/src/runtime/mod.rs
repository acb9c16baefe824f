//! What the in-process controllers and the kubelet share, as Kubernetes' controllers share
//! client-go (and kube-rs' controllers kube-runtime): a [`Reconciler`] fed by the store's change
//! stream, with its [`Queue`] of keys to reconcile now or at a time ([`run`]), and the Events
//! they record ([`recorder`]).
//!
//! The controllers work on the store directly (their writes are not API requests) and are
//! event-driven: each subscribes to the store's change stream, keeps what it needs to know in
//! memory, and reconciles the objects a change concerns, always against the store's current
//! state. The only timers are the ones the behaviour asks for (Job deadlines, retry back-off and
//! `ttlSecondsAfterFinished`). A controller that falls behind the change stream re-lists.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::storage::store::WatchEvent;

pub mod recorder;

/// Keys to reconcile: now (deduplicated) or at a time (one timer per key; setting it again
/// replaces it).
pub(crate) struct Queue<K> {
    ready: BTreeSet<K>,
    timers: BTreeMap<K, Instant>,
    by_time: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Clone> Default for Queue<K> {
    fn default() -> Self {
        Self {
            ready: BTreeSet::new(),
            timers: BTreeMap::new(),
            by_time: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> Queue<K> {
    pub fn add(&mut self, key: K) {
        self.ready.insert(key);
    }

    /// Reconciles `key` at `at` (replacing its previous timer), or never again by timer.
    pub fn set_timer(&mut self, key: K, at: Option<Instant>) {
        if let Some(old) = self.timers.remove(&key) {
            self.by_time.remove(&(old, key.clone()));
        }
        if let Some(at) = at {
            self.timers.insert(key.clone(), at);
            self.by_time.insert((at, key));
        }
    }

    /// The next key to reconcile, moving due timers to the ready set first.
    fn pop(&mut self, now: Instant) -> Option<K> {
        while let Some((at, _)) = self.by_time.first() {
            if *at > now {
                break;
            }
            let (_, key) = self.by_time.pop_first().expect("non-empty");
            self.timers.remove(&key);
            self.ready.insert(key);
        }
        self.ready.pop_first()
    }

    fn next_timer(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }
}

/// One controller: what it learns from each change, how it rebuilds its knowledge, and how it
/// reconciles one key.
pub(crate) trait Reconciler: Send + 'static {
    type Key: Ord + Clone + Send;

    /// Records one change and queues the keys it concerns.
    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<Self::Key>);

    /// Rebuilds what the controller knows from the store (at start and after falling behind).
    fn resync(&mut self, queue: &mut Queue<Self::Key>);

    /// Brings one key's objects where they should be; may set the key's timer.
    fn reconcile(&mut self, key: Self::Key, queue: &mut Queue<Self::Key>);
}

/// Runs a controller until `stop`: observe every change, batch what is already waiting, then
/// reconcile each queued key once.
pub(crate) fn run<R: Reconciler>(
    mut reconciler: R,
    mut events: broadcast::Receiver<Arc<WatchEvent>>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut queue = Queue::default();
        reconciler.resync(&mut queue);
        loop {
            while let Some(key) = queue.pop(Instant::now()) {
                if stop.is_cancelled() {
                    return;
                }
                reconciler.reconcile(key, &mut queue);
            }
            let timer = queue.next_timer();
            let first = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                event = events.recv() => event,
                _ = sleep_until(timer), if timer.is_some() => continue,
            };
            let mut next = first;
            let mut lagged = false;
            loop {
                match next {
                    Ok(event) => reconciler.observe(&event, &mut queue),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "controller fell behind the store; re-listing");
                        lagged = true;
                    }
                    Err(RecvError::Closed) => return,
                }
                next = match events.try_recv() {
                    Ok(event) => Ok(event),
                    Err(TryRecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => Err(RecvError::Closed),
                };
            }
            if lagged {
                reconciler.resync(&mut queue);
            }
        }
    });
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads `metadata.ownerReferences[*].uid`.
pub(crate) fn owner_uids(obj: &Value) -> HashSet<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn queue_deduplicates_and_fires_timers_in_order() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.add("a");
        queue.add("a");
        queue.set_timer("b", Some(now + Duration::from_secs(2)));
        queue.set_timer("c", Some(now + Duration::from_secs(1)));
        assert_eq!(queue.pop(now), Some("a"));
        assert_eq!(queue.pop(now), None);
        assert_eq!(queue.next_timer(), Some(now + Duration::from_secs(1)));
        assert_eq!(queue.pop(now + Duration::from_secs(1)), Some("c"));
        assert_eq!(queue.pop(now + Duration::from_secs(1)), None);
        assert_eq!(queue.pop(now + Duration::from_secs(3)), Some("b"));
    }

    #[test]
    fn setting_a_timer_again_replaces_it() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.set_timer("a", Some(now + Duration::from_secs(1)));
        queue.set_timer("a", Some(now + Duration::from_secs(5)));
        assert_eq!(queue.pop(now + Duration::from_secs(2)), None);
        queue.set_timer("a", None);
        assert_eq!(queue.next_timer(), None);
        assert_eq!(queue.pop(now + Duration::from_secs(10)), None);
    }
}
