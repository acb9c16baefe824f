//! The lock book of locks between workflows (`synchronization`): [`LockBook`] keeps the locks'
//! Leases as a watch shows them (label `workflow.crd.com/lock`) and the workflows waiting for
//! each, in `spec.priority` order then by age. The `locks` stage of a pass takes and gives back
//! the locks through it.
//!
//! The Leases are the truth: a Lease created is a lock held, and creating one that exists fails
//! (409), so two holders never share a slot whatever this process believes. The book is a
//! cache: a Lease this process created and the watch does not show yet is *reserved* (so a
//! second pass does not take a second slot) until the watch shows it, for at most
//! [`RESERVATION_TTL`]; nothing is taken before the watch's first listing, so after a restart or
//! a leader change the Leases of the previous process count. The waiters are refreshed at every
//! pass of their workflow (at least every second, by the timeout timer); when a Lease goes, the
//! head of its line is woken at once (the `locks` timer).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::locks::{
    ANNOTATION_HELD_BY, Held, LABEL_LOCK, Lock, Take, take, waiting_message,
};

use super::step_queue::{RESERVATION_TTL, Rank};

/// Annotation of a lock's Lease: its slot.
pub(super) const ANNOTATION_SLOT: &str = "workflow.crd.com/lock-slot";

/// A lock in a namespace: (namespace, [`Lock::key`]).
pub(super) type LockKey = (String, String);

/// The lock book. One per operator process; shared by every handler.
pub struct LockBook {
    state: Mutex<State>,
    pub(super) synced: watch::Receiver<bool>,
    set_synced: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    /// The Leases the watch shows, by lock.
    leases: HashMap<LockKey, Vec<Held>>,
    /// A re-listing of the watch being built, swapped in when complete.
    relisting: Option<HashMap<LockKey, Vec<Held>>>,
    /// Leases created that the watch does not show yet, with when.
    reserved: HashMap<LockKey, Vec<(Held, Instant)>>,
    /// The workflows (uids) waiting for each lock, in line.
    waiting: HashMap<LockKey, BTreeMap<Rank, String>>,
    /// The locks each waiting workflow waits for.
    waits_for: HashMap<String, Vec<(LockKey, Rank)>>,
    /// Uids of waiting workflows to plan again now.
    woken: HashSet<String>,
}

/// What a claim of a lock found.
pub(super) enum Claim {
    /// The holder holds it already.
    Held,
    /// Create this Lease (reserved).
    Create(Held),
    /// It must wait, saying why.
    Wait(String),
}

impl State {
    /// The Leases of `key`, those the watch shows and those reserved.
    fn holders(&mut self, key: &LockKey) -> Vec<Held> {
        let reserved = self.reserved.entry(key.clone()).or_default();
        reserved.retain(|(_, at)| at.elapsed() < RESERVATION_TTL);
        let shown = self.leases.get(key).into_iter().flatten();
        let mut all: Vec<Held> = shown.cloned().collect();
        for (held, _) in reserved.iter() {
            if !all.iter().any(|h| h.lease == held.lease) {
                all.push(held.clone());
            }
        }
        all
    }

    /// Marks the head of the line of `key` to be woken.
    fn wake(&mut self, key: &LockKey) {
        if let Some((_, uid)) = self.waiting.get(key).and_then(|line| line.iter().next()) {
            tracing::debug!(lock = %key.1, %uid, "locks: waking the first in line");
            self.woken.insert(uid.clone());
        }
    }

    /// Takes `uid` out of every line.
    fn leave(&mut self, uid: &str) {
        for (key, rank) in self.waits_for.remove(uid).unwrap_or_default() {
            if let Some(line) = self.waiting.get_mut(&key) {
                line.remove(&rank);
            }
        }
    }
}

impl LockBook {
    /// An empty book; nothing is taken before [`LockBook::watch`] has listed the Leases.
    pub fn new() -> Arc<Self> {
        let (set_synced, synced) = watch::channel(false);
        Arc::new(LockBook {
            state: Mutex::default(),
            synced,
            set_synced,
        })
    }

    /// Whether `lock` (in `namespace`) may be taken by `holder` of the workflow ranked `rank`
    /// (uid `uid`), who holds it already, or why it waits. Taking reserves the slot.
    pub(super) fn claim(
        &self,
        namespace: &str,
        lock: &Lock,
        holder: &str,
        by: &str,
        waiter: (&Rank, &str),
    ) -> Claim {
        let (rank, uid) = waiter;
        let key = (namespace.to_string(), lock.key());
        let mut state = self.state.lock().expect("lock book");
        let holders = state.holders(&key);
        if holders.iter().any(|h| h.holder == holder) {
            return Claim::Held;
        }
        let ahead = (state.waiting.get(&key).into_iter().flatten())
            .filter(|(r, u)| *r < rank && u.as_str() != uid)
            .count();
        let free = lock.limit as usize - holders.len().min(lock.limit as usize);
        let slot = match take(lock, &holders) {
            Take::Slot(slot) if ahead < free => slot,
            Take::Slot(_) => {
                return self.wait(&mut state, key, lock, waiter, &[]);
            }
            Take::Full(by) => return self.wait(&mut state, key, lock, waiter, &by),
        };
        let held = Held {
            lease: lock.lease_name(slot),
            uid: String::new(),
            slot,
            holder: holder.to_string(),
            by: by.to_string(),
        };
        state.leave(uid);
        let reserved = state.reserved.entry(key).or_default();
        reserved.push((held.clone(), Instant::now()));
        Claim::Create(held)
    }

    fn wait(
        &self,
        state: &mut State,
        key: LockKey,
        lock: &Lock,
        (rank, uid): (&Rank, &str),
        by: &[String],
    ) -> Claim {
        state
            .waiting
            .entry(key.clone())
            .or_default()
            .insert(rank.clone(), uid.to_string());
        state
            .waits_for
            .entry(uid.to_string())
            .or_default()
            .push((key, rank.clone()));
        Claim::Wait(waiting_message(lock, by))
    }

    /// A reserved Lease that was not created after all (409, or an error).
    pub(super) fn unreserve(&self, namespace: &str, lock: &Lock, lease: &str) {
        let key = (namespace.to_string(), lock.key());
        let mut state = self.state.lock().expect("lock book");
        if let Some(reserved) = state.reserved.get_mut(&key) {
            reserved.retain(|(held, _)| held.lease != lease);
        }
    }

    /// The Leases held by workflow `uid` (its own and its steps') in `namespace`, by lock key.
    pub(super) fn held_by(&self, namespace: &str, uid: &str) -> Vec<(LockKey, Held)> {
        let state = self.state.lock().expect("lock book");
        let mine = |h: &Held| h.holder == uid || h.holder.starts_with(&format!("{uid}/"));
        let shown = state
            .leases
            .iter()
            .flat_map(|(k, v)| v.iter().map(move |h| (k, h)));
        let reserved =
            (state.reserved.iter()).flat_map(|(k, v)| v.iter().map(move |(h, _)| (k, h)));
        let mut all: Vec<(LockKey, Held)> = Vec::new();
        for (key, held) in shown.chain(reserved) {
            if key.0 == namespace && mine(held) && !all.iter().any(|(_, h)| h.lease == held.lease) {
                all.push((key.clone(), held.clone()));
            }
        }
        all
    }

    /// Takes workflow `uid` out of line (its pass starts, or it is gone).
    pub fn forget(&self, uid: &str) {
        let mut state = self.state.lock().expect("lock book");
        state.leave(uid);
        state.woken.remove(uid);
    }

    /// Whether any workflow is woken and has not asked yet: the `locks` timer's gate, so that a
    /// tick with none asks no workflow.
    pub fn any_woken(&self) -> bool {
        !self.state.lock().expect("lock book").woken.is_empty()
    }

    /// Whether `workflow` was woken since it last asked: the `locks` timer's predicate.
    pub fn take_wake(&self, workflow: &WorkFlow) -> bool {
        let uid = workflow.metadata.uid.as_deref().unwrap_or_default();
        let mut state = self.state.lock().expect("lock book");
        let woken = !state.woken.is_empty() && state.woken.remove(uid);
        if woken {
            tracing::debug!(%uid, "locks: planning a woken waiter");
        }
        woken
    }

    /// Feeds the book from a watch of the lock Leases (all namespaces, or `namespace`).
    pub async fn watch(self: Arc<Self>, client: Client, namespace: Option<String>) {
        let api: Api<Lease> = match &namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        };
        let config = watcher::Config::default().labels(LABEL_LOCK);
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => self.observe(event),
                Err(error) => tracing::warn!(%error, "locks: lease watch failed; retrying"),
            }
        }
    }

    fn observe(&self, event: Event<Lease>) {
        let mut state = self.state.lock().expect("lock book");
        match event {
            Event::Init => state.relisting = Some(HashMap::new()),
            Event::InitApply(lease) => {
                if let (Some(relisting), Some((key, held))) =
                    (state.relisting.as_mut(), read(&lease))
                {
                    relisting.entry(key).or_default().push(held);
                }
            }
            Event::InitDone => {
                if let Some(listed) = state.relisting.take() {
                    let gone: Vec<LockKey> = (state.leases.keys())
                        .filter(|k| !listed.contains_key(*k))
                        .cloned()
                        .collect();
                    state.leases = listed;
                    for key in gone {
                        state.wake(&key);
                    }
                }
                self.set_synced.send_replace(true);
            }
            Event::Apply(lease) => {
                if let Some((key, held)) = read(&lease) {
                    if let Some(reserved) = state.reserved.get_mut(&key) {
                        reserved.retain(|(h, _)| h.lease != held.lease);
                    }
                    let leases = state.leases.entry(key).or_default();
                    leases.retain(|h| h.lease != held.lease);
                    leases.push(held);
                }
            }
            Event::Delete(lease) => {
                if let Some((key, held)) = read(&lease) {
                    if let Some(leases) = state.leases.get_mut(&key) {
                        leases.retain(|h| h.lease != held.lease);
                    }
                    state.wake(&key);
                }
            }
        }
    }
}

/// A lock Lease as the book keeps it.
fn read(lease: &Lease) -> Option<(LockKey, Held)> {
    let key = lease.labels().get(LABEL_LOCK)?.clone();
    let annotations = lease.annotations();
    let held = Held {
        lease: lease.name_any(),
        uid: lease.uid().unwrap_or_default(),
        slot: annotations
            .get(ANNOTATION_SLOT)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        holder: lease.spec.as_ref()?.holder_identity.clone()?,
        by: annotations
            .get(ANNOTATION_HELD_BY)
            .cloned()
            .unwrap_or_default(),
    };
    Some(((lease.namespace().unwrap_or_default(), key), held))
}
