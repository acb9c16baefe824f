//! Locks between workflows (`synchronization`): the lock book ([`LockBook`]) keeps the locks'
//! Leases as a watch shows them (label `workflow.crd.com/lock`) and the workflows waiting for
//! each, in `spec.priority` order then by age; `hold`, a stage of every pass, takes the locks
//! a workflow (before its first step) or a starting step needs by creating their Leases, gives
//! back those no longer needed by deleting them, and gates the Jobs of what must wait.
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
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;

use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::locks::{
    ANNOTATION_HELD_BY, ANNOTATION_LOCK, Held, LABEL_HOLDER, LABEL_LOCK, Lock, Take,
    holder_identity, locks_of, take, waiting_message,
};
use workflow_operator_core::names;
use workflow_operator_core::plan::{self, Action, Compiled, JobState, ObservedJob, Plan};

use super::step_queue::{RESERVATION_TTL, Rank};
use crate::controllers::{FIELD_MANAGER, RequestFailed};

/// Annotation of a lock's Lease: its slot.
const ANNOTATION_SLOT: &str = "workflow.crd.com/lock-slot";

/// A lock in a namespace: (namespace, [`Lock::key`]).
type LockKey = (String, String);

/// The lock book. One per operator process; shared by every handler.
pub struct LockBook {
    state: Mutex<State>,
    synced: watch::Receiver<bool>,
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
enum Claim {
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
    fn claim(
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
    fn unreserve(&self, namespace: &str, lock: &Lock, lease: &str) {
        let key = (namespace.to_string(), lock.key());
        let mut state = self.state.lock().expect("lock book");
        if let Some(reserved) = state.reserved.get_mut(&key) {
            reserved.retain(|(held, _)| held.lease != lease);
        }
    }

    /// The Leases held by workflow `uid` (its own and its steps') in `namespace`, by lock key.
    fn held_by(&self, namespace: &str, uid: &str) -> Vec<(LockKey, Held)> {
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

/// The `locks` stage of a pass of `workflow` (as planned: templates expanded), whose plan is
/// `plan` and whose Jobs, when observed in full, are `observed`: gives back the locks no longer
/// needed (all of them once the workflow ended), takes the workflow's own before any step, then
/// those of each step its plan starts. A gate holding back what must wait, or `None`.
///
/// # Errors
/// A Lease that could not be created or deleted (temporary).
pub(super) async fn hold(
    book: Option<&LockBook>,
    client: &Client,
    (workflow, compiled): (&WorkFlow, &Compiled),
    (plan, observed): (&Plan, Option<&[ObservedJob]>),
) -> Result<Option<plan::Gate>, RequestFailed> {
    let Some(book) = book else {
        return Ok(None);
    };
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    book.forget(&uid);
    if !compiled.policies.locks && book.held_by(&namespace, &uid).is_empty() {
        return Ok(None);
    }
    let own = locks_of(workflow.spec.synchronization.as_deref());
    // After a restart, the Leases of the previous process must be known before anything is
    // given back or taken.
    let mut synced = book.synced.clone();
    let _ = synced.wait_for(|synced| *synced).await;
    let status = plan.status.as_ref().or(workflow.status.as_ref());
    let ended = status
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    give_back(book, &api, workflow, (plan, observed), ended).await?;
    let creates = step_creates((workflow, compiled), plan);
    if ended || (own.is_empty() && creates.is_empty()) {
        return Ok(None);
    }
    let rank = Rank::of(workflow);
    let by = format!("{namespace}/{}", workflow.name_any());
    for lock in &own {
        let holder = (uid.as_str(), by.as_str());
        if let Some(message) = acquire(book, &api, workflow, lock, holder, &rank).await? {
            return Ok(Some(plan::Gate::admitting([], message)));
        }
    }
    let mut held_back = None;
    let mut admitted: Vec<String> = plan_creates(plan);
    for (step, job, locks) in creates {
        let holder = holder_identity(&uid, Some(&job));
        let by = format!("{by} step {step}");
        for lock in &locks {
            if let Some(message) =
                acquire(book, &api, workflow, lock, (&holder, &by), &rank).await?
            {
                admitted.retain(|j| *j != job);
                held_back.get_or_insert(message);
                break;
            }
        }
    }
    Ok(held_back.map(|message| plan::Gate::admitting(admitted, message)))
}

/// The Jobs `plan` creates.
fn plan_creates(plan: &Plan) -> Vec<String> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob { job_name, .. } => Some(job_name.clone()),
            _ => None,
        })
        .collect()
}

/// The Jobs `plan` creates of steps that hold locks: (step, Job, its locks).
fn step_creates(
    (workflow, compiled): (&WorkFlow, &Compiled),
    plan: &Plan,
) -> Vec<(String, String, Vec<Lock>)> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob {
                step,
                job_name,
                exit,
                ..
            } => {
                let (_, found) = compiled.step(&workflow.spec, step, exit.is_some())?;
                let locks = locks_of(found.synchronization.as_deref());
                (!locks.is_empty()).then(|| (step.clone(), job_name.clone(), locks))
            }
            _ => None,
        })
        .collect()
}

/// Deletes the Leases of `workflow` no longer needed: all once it `ended`; its own for locks
/// its spec no longer names; a step's once its Job no longer runs (known only from the Jobs
/// observed in full) nor is being created.
async fn give_back(
    book: &LockBook,
    api: &Api<Lease>,
    workflow: &WorkFlow,
    (plan, observed): (&Plan, Option<&[ObservedJob]>),
    ended: bool,
) -> Result<(), RequestFailed> {
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let held = book.held_by(&namespace, &uid);
    if held.is_empty() {
        return Ok(());
    }
    let own: Vec<String> = (locks_of(workflow.spec.synchronization.as_deref()).iter())
        .map(Lock::key)
        .collect();
    let running: Option<HashSet<String>> = observed.map(|jobs| {
        let active = jobs
            .iter()
            .filter(|j| matches!(j.state, JobState::Active { .. }) && !j.deleting)
            .map(|j| j.name.clone());
        active.chain(plan_creates(plan)).collect()
    });
    for ((_, key), lease) in held {
        let keep = match lease.holder.strip_prefix(&format!("{uid}/")) {
            _ if ended => false,
            None => own.contains(&key),
            Some(job) => running.as_ref().is_none_or(|r| r.contains(job)),
        };
        if !keep {
            release(api, &lease).await?;
        }
    }
    Ok(())
}

/// Takes `lock` for `holder` (identity, and who as people read it) of `workflow` ranked
/// `rank`: `None` once held, else why it waits.
async fn acquire(
    book: &LockBook,
    api: &Api<Lease>,
    workflow: &WorkFlow,
    lock: &Lock,
    (holder, by): (&str, &str),
    rank: &Rank,
) -> Result<Option<String>, RequestFailed> {
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let held = match book.claim(&namespace, lock, holder, by, (rank, &uid)) {
        Claim::Held => return Ok(None),
        Claim::Wait(message) => return Ok(Some(message)),
        Claim::Create(held) => held,
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &lease(workflow, lock, &held)).await {
        Ok(_) => {
            tracing::debug!(lock = %lock.id(), %holder, "locks: taken");
            Ok(None)
        }
        // Taken by another holder the watch has not shown yet: wait as for a held one.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            book.unreserve(&namespace, lock, &held.lease);
            Ok(Some(waiting_message(lock, &[])))
        }
        Err(e) => {
            book.unreserve(&namespace, lock, &held.lease);
            Err(RequestFailed::new("taking a lock (creating its Lease)", e))
        }
    }
}

/// Gives `held` back: deletes its Lease, only that very Lease (by uid, when known), so a newer
/// holder's Lease of the same name is never deleted.
async fn release(api: &Api<Lease>, held: &Held) -> Result<(), RequestFailed> {
    let params = DeleteParams {
        preconditions: (!held.uid.is_empty()).then(|| Preconditions {
            uid: Some(held.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&held.lease, &params).await {
        Ok(_) => {
            tracing::debug!(lease = %held.lease, holder = %held.holder, "locks: given back");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(RequestFailed::new(
            "giving back a lock (deleting its Lease)",
            e,
        )),
    }
}

/// The Lease of slot `held` of `lock`, owned by `workflow` (deleting the workflow gives it back).
fn lease(workflow: &WorkFlow, lock: &Lock, held: &Held) -> Lease {
    let uid = workflow.uid().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(held.lease.clone()),
            namespace: workflow.namespace(),
            labels: Some(BTreeMap::from([
                (LABEL_LOCK.to_string(), lock.key()),
                (LABEL_HOLDER.to_string(), names::label_value(&uid)),
            ])),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_LOCK.to_string(), lock.id()),
                (ANNOTATION_HELD_BY.to_string(), held.by.clone()),
                (ANNOTATION_SLOT.to_string(), held.slot.to_string()),
            ])),
            owner_references: workflow.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(held.holder.clone()),
            acquire_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    }
}
