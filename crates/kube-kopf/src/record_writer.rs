//! Progress records written behind: the record of a completed cause is handed to a task that
//! stores it while the object's next passes go on.
//!
//! Storing a record costs the API server the whole object, not just the annotation: for a
//! 10,000-step workflow (765 KB) about 30 ms on the build machine. The pass that completed the
//! create handler waited for it, and so did the child events that arrived meanwhile (the first
//! layer of Jobs completing), whose dispatch it delayed by that much.
//!
//! What a record written behind keeps of the synchronous write:
//! - **Order.** One write per object at a time; the task always writes the newest record handed
//!   to it and skips older ones. A write at once ([`RecordWriter::take_over`], used between the
//!   handlers of one cause) first waits for the write in flight and drops what is pending,
//!   since it holds newer progress.
//! - **Memory stays authoritative.** The pass keeps the record in memory, and forgets it only
//!   once the mirror shows it stored (`Pass::settle`), so no pass reads an older record back.
//! - **Nothing lost but by a crash.** A refused write is tried again with a growing delay until
//!   it lands or a newer one replaces it. At shutdown [`RecordWriter::settle_all`] writes what
//!   is waiting. A crash loses at most the record of the cause completed last: its last
//!   handler runs again after a restart, as after a crash just before a synchronous write.
//! - **The same object.** Each write carries the object's uid as a precondition: a record never
//!   lands on a new object created under the same name. A missing object (404) or another uid
//!   (409, or 422 from a server that reports the uid as immutable) ends the retries.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Resource;
use kube::api::Api;
use serde::de::DeserializeOwned;

use super::progress::{self, Record};

/// First and longest delay before a refused record is tried again.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// What the writer tells its owner: a record of the object was stored and produced this
/// resourceVersion (at once, for the intake window's echo timing), and no record of the object
/// is waiting or being written any more (stored, or given up for a gone object).
pub struct Callbacks<Key> {
    pub stored: Box<OnStored<Key>>,
    pub idle: Box<OnIdle<Key>>,
}

pub type OnStored<Key> = dyn Fn(&Key, String) + Send + Sync;
pub type OnIdle<Key> = dyn Fn(&Key) + Send + Sync;

/// A record to store on one object.
pub struct Write<K: Resource> {
    pub api: Api<K>,
    pub name: String,
    pub uid: Option<String>,
    pub annotation: String,
    pub record: Record,
}

/// Held by a write at once: no record of the object is written behind meanwhile.
pub type TakenOver = tokio::sync::OwnedMutexGuard<()>;

type Slots<K, Key> = Arc<Mutex<HashMap<Key, Arc<Slot<K>>>>>;

/// The record writes of one resource type, per object. An object has a slot only while a
/// record of it waits or is being written.
pub struct RecordWriter<K: Resource, Key> {
    slots: Slots<K, Key>,
    callbacks: Arc<Callbacks<Key>>,
}

struct Slot<K: Resource> {
    /// Held for each write of the object's record, behind or at once.
    writing: Arc<tokio::sync::Mutex<()>>,
    state: Mutex<SlotState<K>>,
}

struct SlotState<K: Resource> {
    pending: Option<Write<K>>,
    /// Whether a task is writing this object's records behind.
    draining: bool,
}

impl<K, Key> RecordWriter<K, Key>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Key: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    pub fn new(callbacks: Callbacks<Key>) -> Self {
        Self {
            slots: Arc::default(),
            callbacks: Arc::new(callbacks),
        }
    }

    /// Whether a record of `key` is waiting or being written behind.
    pub fn in_flight(&self, key: &Key) -> bool {
        self.slots
            .lock()
            .expect("record slots lock")
            .get(key)
            .is_some_and(|slot| slot.state.lock().expect("record slot lock").draining)
    }

    /// Hands `write` over to be stored behind, replacing any record of `key` still waiting.
    pub fn write_behind(&self, key: &Key, write: Write<K>) {
        let slot = self
            .slots
            .lock()
            .expect("record slots lock")
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    writing: Arc::default(),
                    state: Mutex::new(SlotState {
                        pending: None,
                        draining: false,
                    }),
                })
            })
            .clone();
        let mut state = slot.state.lock().expect("record slot lock");
        state.pending = Some(write);
        if !state.draining {
            state.draining = true;
            tokio::spawn(drain(
                key.clone(),
                slot.clone(),
                self.slots.clone(),
                self.callbacks.clone(),
            ));
        }
    }

    /// Before a write at once of `key`'s record: waits for the write in flight and drops the
    /// record waiting, which the caller's newer record replaces. Returns a guard that keeps
    /// writes behind from starting until the caller's write is done.
    pub async fn take_over(&self, key: &Key) -> Option<TakenOver> {
        let slot = self
            .slots
            .lock()
            .expect("record slots lock")
            .get(key)
            .cloned()?;
        let guard = slot.writing.clone().lock_owned().await;
        slot.state.lock().expect("record slot lock").pending = None;
        Some(guard)
    }

    /// Writes every record still waiting, once each (at shutdown: what the API refuses now is
    /// logged and left, and the handler it records runs again after the restart).
    pub async fn settle_all(&self) {
        let slots: Vec<_> = self
            .slots
            .lock()
            .expect("record slots lock")
            .iter()
            .map(|(key, slot)| (key.clone(), slot.clone()))
            .collect();
        for (key, slot) in slots {
            let _writing = slot.writing.lock().await;
            let pending = slot.state.lock().expect("record slot lock").pending.take();
            if let Some(write) = pending {
                match store(&write).await {
                    Ok(Some(version)) => (self.callbacks.stored)(&key, version),
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(%error, object = %write.name, "storing handler progress at shutdown")
                    }
                }
            }
        }
    }
}

/// Stores one record; `Ok(None)` when the object is gone or was replaced.
async fn store<K>(write: &Write<K>) -> Result<Option<String>, progress::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match progress::store(
        &write.api,
        &write.name,
        write.uid.as_deref(),
        &write.annotation,
        &write.record,
    )
    .await
    {
        Err(progress::Error::Store(kube::Error::Api(status)))
            if status.code == 409 || status.code == 422 =>
        {
            tracing::debug!(object = %write.name, reason = %status.message, "record not stored: the object was replaced");
            Ok(None)
        }
        other => other,
    }
}

/// Writes the slot's waiting records, the newest each time, until none is left.
async fn drain<K, Key>(
    key: Key,
    slot: Arc<Slot<K>>,
    slots: Slots<K, Key>,
    callbacks: Arc<Callbacks<Key>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Key: Eq + Hash + Send + Sync + 'static,
{
    let mut delay = RETRY_FIRST;
    loop {
        let writing = slot.writing.lock().await;
        let pending = {
            let mut state = slot.state.lock().expect("record slot lock");
            let pending = state.pending.take();
            // Under the same lock as the take, so a record handed over now starts a new task.
            state.draining = pending.is_some();
            pending
        };
        let Some(write) = pending else {
            drop(writing);
            forget_idle(&slots, &key, &slot);
            // After `draining` went false, so that whoever hears this sees the slot idle.
            (callbacks.idle)(&key);
            return;
        };
        match store(&write).await {
            Ok(Some(version)) => {
                (callbacks.stored)(&key, version);
                delay = RETRY_FIRST;
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, object = %write.name, retry_in = ?delay, "storing handler progress behind; trying again");
                slot.state
                    .lock()
                    .expect("record slot lock")
                    .pending
                    .get_or_insert(write);
                drop(writing);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_MAX);
            }
        }
    }
}

/// Drops `key`'s slot if it is still `slot` and nothing of it waits or is being written.
fn forget_idle<K: Resource, Key: Eq + Hash>(slots: &Slots<K, Key>, key: &Key, slot: &Arc<Slot<K>>) {
    let mut slots = slots.lock().expect("record slots lock");
    let idle = slots.get(key).is_some_and(|current| {
        Arc::ptr_eq(current, slot) && {
            let state = current.state.lock().expect("record slot lock");
            !state.draining && state.pending.is_none()
        }
    });
    if idle {
        slots.remove(key);
    }
}
