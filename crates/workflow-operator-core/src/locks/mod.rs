//! Locks between workflows (`synchronization`): which locks a workflow (for its whole run) or a
//! step (while it runs) needs, the `coordination.k8s.io` Lease that holds each (one per mutex,
//! one per slot of a semaphore, in the workflow's namespace), and whether a lock may be taken
//! given the Leases that exist. Pure: the operator's `locks` stage does the I/O.
//!
//! A Lease is created to take a lock and deleted to give it back; creating a Lease that exists
//! fails, so two holders can never take one slot, whatever the operator's memory says. Each
//! Lease is owned by its workflow, so deleting the workflow gives its locks back (the garbage
//! collector deletes the Lease), and it names its holder (`spec.holderIdentity`: the workflow's
//! uid, and the step for a step's lock), so a restarted operator knows whose it is.

use std::collections::BTreeMap;

use crate::crd::Synchronization;
use crate::names;

/// Label of a lock's Leases: which lock ([`Lock::key`]).
pub const LABEL_LOCK: &str = "workflow.crd.com/lock";
/// Label of a lock's Leases: the uid of the workflow holding it.
pub const LABEL_HOLDER: &str = "workflow.crd.com/holder";
/// Annotation of a lock's Lease: the lock's kind and exact name (`mutex/deploy-prod`).
pub const ANNOTATION_LOCK: &str = "workflow.crd.com/lock-name";
/// Annotation of a lock's Lease: who holds it, as people read it (`ns/wf`, `ns/wf step load`).
pub const ANNOTATION_HELD_BY: &str = "workflow.crd.com/held-by";

/// A mutex or a semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// One holder at a time.
    Mutex,
    /// At most `limit` holders at a time.
    Semaphore,
}

impl Kind {
    /// `mutex` or `semaphore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Semaphore => "semaphore",
        }
    }
}

/// A lock a workflow or step asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lock {
    /// Mutex or semaphore.
    pub kind: Kind,
    /// Its name, unique per kind in the namespace.
    pub name: String,
    /// Holders at a time: 1 for a mutex; a semaphore's as the asking workflow declares it.
    pub limit: u32,
}

impl Lock {
    /// The value of [`LABEL_LOCK`] on its Leases: kind and name, hashed into a label value.
    pub fn key(&self) -> String {
        names::label_value(&format!("{}-{}", self.kind.as_str(), self.name))
    }

    /// `mutex/deploy-prod`: the value of [`ANNOTATION_LOCK`].
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.name)
    }

    /// The name of the Lease of slot `slot` (always 0 for a mutex).
    pub fn lease_name(&self, slot: u32) -> String {
        let prefix = match self.kind {
            Kind::Mutex => "wf-mutex".to_string(),
            Kind::Semaphore => format!("wf-semaphore-{slot}"),
        };
        names::job_name(&prefix, &self.name, &self.id())
    }

    /// `mutex deploy-prod`, `semaphore db (limit 3)`.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Mutex => format!("mutex {}", self.name),
            Kind::Semaphore => format!("semaphore {} (limit {})", self.name, self.limit),
        }
    }
}

/// The locks `synchronization` asks for, in the one order every holder takes them in (so two
/// workflows never each hold what the other waits for).
pub fn locks_of(synchronization: Option<&Synchronization>) -> Vec<Lock> {
    let Some(sync) = synchronization else {
        return Vec::new();
    };
    let mutexes = sync.mutexes.iter().map(|m| Lock {
        kind: Kind::Mutex,
        name: m.name.clone(),
        limit: 1,
    });
    let semaphores = sync.semaphores.iter().map(|s| Lock {
        kind: Kind::Semaphore,
        name: s.name.clone(),
        limit: u32::try_from(s.limit.as_ref().and_then(|l| l.num()).unwrap_or(1).max(1))
            .unwrap_or(1),
    });
    let mut locks: Vec<Lock> = mutexes.chain(semaphores).collect();
    locks.sort();
    locks.dedup_by(|a, b| a.kind == b.kind && a.name == b.name);
    locks
}

/// Who holds a lock: `spec.holderIdentity` of its Lease, the workflow's uid, with the step's
/// name for a step's lock.
pub fn holder_identity(workflow_uid: &str, step: Option<&str>) -> String {
    match step {
        Some(step) => format!("{workflow_uid}/{step}"),
        None => workflow_uid.to_string(),
    }
}

/// One Lease of a lock, as the operator's watch shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The Lease's name.
    pub lease: String,
    /// The Lease's uid, for a delete that must not remove a newer Lease of the same name.
    pub uid: String,
    /// Its slot ([`Lock::lease_name`]).
    pub slot: u32,
    /// [`holder_identity`].
    pub holder: String,
    /// Who, as people read it ([`ANNOTATION_HELD_BY`]).
    pub by: String,
}

/// Whether a lock may be taken now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Create the Lease of this slot.
    Slot(u32),
    /// It is full: these hold it (as people read them).
    Full(Vec<String>),
}

/// Whether `lock` may be taken, given the Leases of it that exist (`held`): the lowest free slot
/// below its limit, unless as many hold it as its limit allows, or one holds a slot at or above
/// the limit (it was lowered): then nobody new takes it until they are below it.
pub fn take(lock: &Lock, held: &[Held]) -> Take {
    let over = held.iter().any(|h| h.slot >= lock.limit);
    if over || held.len() >= lock.limit as usize {
        let mut by: Vec<String> = held.iter().map(|h| h.by.clone()).collect();
        by.sort();
        return Take::Full(by);
    }
    let taken: std::collections::BTreeSet<u32> = held.iter().map(|h| h.slot).collect();
    let slot = (0..lock.limit).find(|s| !taken.contains(s)).unwrap_or(0);
    Take::Slot(slot)
}

/// Why a workflow or step waits for `lock` held by `by`: `waiting for mutex deploy-prod held by
/// ns/wf`.
pub fn waiting_message(lock: &Lock, by: &[String]) -> String {
    let holders = if by.is_empty() {
        "others ahead in line".to_string()
    } else {
        by.join(", ")
    };
    format!("waiting for {} held by {holders}", lock.describe())
}

/// The locks of a workflow's steps that ask for any, by step name.
pub fn step_locks<'s>(
    steps: impl IntoIterator<Item = (&'s str, Option<&'s Synchronization>)>,
) -> BTreeMap<&'s str, Vec<Lock>> {
    steps
        .into_iter()
        .map(|(name, sync)| (name, locks_of(sync)))
        .filter(|(_, locks)| !locks.is_empty())
        .collect()
}

#[cfg(test)]
mod tests;
