//! The per-object queues of one resource type: what is pending for each object, the two ready
//! queues (objects in progress first, new ones paced by the intake window), and the workers,
//! one per object at a time.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue;
use tracing::{Instrument, error, info_span};

use crate::intake::SharedIntake;
use crate::kinds::Watched;
use crate::{Monitor, Ticket};

use super::object::{Done, ObjectState, Pending, work};
use super::{Ctl, Msg};

pub(super) struct Slot<K> {
    pub(super) pending: Pending,
    pub(super) running: bool,
    /// Present while the object waits in one of the ready queues for a worker: counts it as
    /// queued in the monitor, then goes with the worker, which counts it as running.
    pub(super) ticket: Option<Ticket>,
    /// Absent while a worker holds it. Boxed: the reactor keeps a slot for every object it
    /// has seen, and most of them are idle.
    pub(super) state: Option<Box<ObjectState<K>>>,
    pub(super) wake: Option<(Instant, delay_queue::Key)>,
}

/// Of every this many workers started while both ready queues wait, one goes to an object
/// never handled before; the rest go to objects already in progress.
const INTAKE_SHARE: u32 = 4;

/// The objects waiting for a worker, in two queues.
struct Ready<K: Watched> {
    /// Objects handled before, by this process or (their record says) another: their work is
    /// usually the next step of something under way (a child finished), and is served first
    /// so that a burst of new objects does not hold it up.
    progress: VecDeque<ObjectRef<K>>,
    /// Objects never handled: only as many are processed at once as the intake window allows
    /// ([`super::intake`]).
    intake: VecDeque<ObjectRef<K>>,
    /// Objects taken since the last one from `intake`.
    since_intake: u32,
}

impl<K: Watched> Ready<K> {
    pub(super) fn new() -> Self {
        Self {
            progress: VecDeque::new(),
            intake: VecDeque::new(),
            since_intake: 0,
        }
    }

    /// Whether an object may be given a worker now; `intake_open` says if the intake window
    /// has room.
    fn has_work(&self, intake_open: bool) -> bool {
        !self.progress.is_empty() || (intake_open && !self.intake.is_empty())
    }

    /// Queues the object of `slot`, in `intake` if it is `new`, counted as queued by `monitor`.
    fn push(&mut self, key: ObjectRef<K>, slot: &mut Slot<K>, new: bool, monitor: &Monitor) {
        slot.ticket = Some(monitor.ticket());
        if new {
            self.intake.push_back(key);
        } else {
            self.progress.push_back(key);
        }
    }

    /// The next object to get a worker, and whether it came from `intake`: from `progress`,
    /// but one in [`INTAKE_SHARE`] from `intake` (while `intake_open`) so that new objects are
    /// never starved.
    fn pop(&mut self, intake_open: bool) -> Option<(ObjectRef<K>, bool)> {
        let from_intake = |ready: &mut Self| {
            if intake_open {
                ready.intake.pop_front().map(|key| (key, true))
            } else {
                None
            }
        };
        let intake_turn = self.since_intake + 1 >= INTAKE_SHARE || self.progress.is_empty();
        let next = if intake_turn {
            from_intake(self).or_else(|| self.progress.pop_front().map(|key| (key, false)))
        } else {
            self.progress
                .pop_front()
                .map(|key| (key, false))
                .or_else(|| from_intake(self))
        };
        if let Some((_, took_intake)) = &next {
            self.since_intake = if *took_intake {
                0
            } else {
                self.since_intake + 1
            };
        }
        next
    }
}

/// A new object counted against the intake window.
struct IntakeEntry<K: Watched> {
    worker: Option<tokio::task::Id>,
    key: ObjectRef<K>,
    started: Instant,
}

/// This reactor's new objects counted against the intake window, oldest first, each counted in
/// the window's `in_flight` too (which other reactors may share) while it is here.
struct IntakeWorkers<K: Watched> {
    entries: VecDeque<IntakeEntry<K>>,
    window: Arc<SharedIntake>,
}

impl<K: Watched> IntakeWorkers<K> {
    fn push_back(&mut self, entry: IntakeEntry<K>) {
        self.window.took();
        self.entries.push_back(entry);
    }

    fn front(&self) -> Option<&IntakeEntry<K>> {
        self.entries.front()
    }

    fn pop_front(&mut self) {
        if self.entries.pop_front().is_some() {
            self.window.released(1);
        }
    }

    fn retain_mut(&mut self, keep: impl FnMut(&mut IntakeEntry<K>) -> bool) {
        let before = self.entries.len();
        self.entries.retain_mut(keep);
        self.window.released(before - self.entries.len());
    }
}

impl<K: Watched> Drop for IntakeWorkers<K> {
    /// A reactor that stops (its shard given up) leaves the shared window its room.
    fn drop(&mut self) {
        self.window.released(self.entries.len());
    }
}

/// The per-object queues of one resource type.
pub(super) struct Queues<K: Watched> {
    ctl: Arc<Ctl<K>>,
    pub(super) slots: HashMap<ObjectRef<K>, Slot<K>>,
    ready: Ready<K>,
    pub(super) workers: JoinSet<Done<K>>,
    running: HashMap<tokio::task::Id, ObjectRef<K>>,
    /// New objects counted against the intake window, oldest first: while their worker runs,
    /// then while the record it handed over is written behind (`worker` is `None` then), as
    /// long as [`OperatorConfig::intake_hold`] allows.
    intake_workers: IntakeWorkers<K>,
    pub(super) wakes: DelayQueue<ObjectRef<K>>,
}

impl<K: Watched> Queues<K> {
    pub(super) fn new(ctl: Arc<Ctl<K>>) -> Self {
        let window = ctl.intake.lock().expect("intake lock").window.clone();
        Self {
            ctl,
            slots: HashMap::new(),
            ready: Ready::new(),
            workers: JoinSet::new(),
            running: HashMap::new(),
            intake_workers: IntakeWorkers {
                entries: VecDeque::new(),
                window,
            },
            wakes: DelayQueue::new(),
        }
    }

    /// Whether the intake window has room for one more new object.
    fn intake_open(&self) -> bool {
        self.intake_workers.window.open()
    }

    /// The intake window, shared with the reactors of this resource type in operators that
    /// share [`crate::Slots`].
    pub(super) fn intake_window(&self) -> Arc<SharedIntake> {
        self.intake_workers.window.clone()
    }

    /// Whether new objects wait only for room in the intake window.
    pub(super) fn intake_waits_for_room(&self) -> bool {
        self.ctl.ready.is_cancelled() && !self.ready.intake.is_empty() && !self.intake_open()
    }

    /// Whether an object waits for a worker it may have and handlers may run.
    pub(super) fn waiting(&self) -> bool {
        self.ctl.ready.is_cancelled() && self.ready.has_work(self.intake_open())
    }

    /// Starts a worker, holding `permit`, for the next waiting object.
    pub(super) fn admit(&mut self, permit: OwnedSemaphorePermit) {
        if let Some((key, new)) = self.ready.pop(self.intake_open()) {
            let id = self.spawn(key.clone(), permit);
            if new {
                self.intake_workers.push_back(IntakeEntry {
                    worker: Some(id),
                    key,
                    started: Instant::now(),
                });
            }
        }
    }

    /// When the oldest worker on a new object stops counting against the intake window.
    pub(super) fn intake_release(&self) -> Option<Instant> {
        self.intake_workers
            .front()
            .map(|entry| entry.started + self.ctl.env.config.intake_hold)
    }

    /// Stops counting the workers on new objects that have run for
    /// [`OperatorConfig::intake_hold`].
    pub(super) fn release_slow_intake(&mut self) {
        let now = Instant::now();
        let hold = self.ctl.env.config.intake_hold;
        while self
            .intake_workers
            .front()
            .is_some_and(|entry| entry.started + hold <= now)
        {
            self.intake_workers.pop_front();
        }
    }

    /// No record of `key` is being written behind any more: a new object whose worker has
    /// finished stops counting against the intake window.
    pub(super) fn record_idle(&mut self, key: &ObjectRef<K>) {
        self.intake_workers
            .retain_mut(|entry| entry.worker.is_some() || entry.key != *key);
    }

    /// Queues the object of `slot` for a worker: in the intake queue if no process has handled
    /// it yet (neither this one, nor another whose record the object carries).
    fn push_ready(&mut self, key: ObjectRef<K>) {
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        let handled_here = slot.state.as_ref().is_some_and(|state| !state.fresh);
        let new = !handled_here
            && self
                .ctl
                .reader
                .get(&key)
                .is_none_or(|object| !object.annotations().contains_key(&self.ctl.annotation));
        self.ready.push(key, slot, new, &self.ctl.env.monitor);
    }

    pub(super) fn receive(&mut self, msg: Msg<K>) {
        match msg {
            Msg::Changed(key) => self.enqueue(key, |p| p.changed = true),
            Msg::Timer(key, index) => self.enqueue(key, |p| {
                p.timers.insert(index);
            }),
            Msg::Child(key, event) => self.enqueue(key, |p| {
                p.children.insert((event.index, event.key), event.object);
            }),
        }
    }

    pub(super) fn enqueue(&mut self, key: ObjectRef<K>, add: impl FnOnce(&mut Pending)) {
        if self.ctl.env.shutdown.is_cancelled() {
            return;
        }
        let slot = self.slots.entry(key.clone()).or_insert_with(|| Slot {
            pending: Pending::default(),
            running: false,
            ticket: None,
            state: None,
            wake: None,
        });
        add(&mut slot.pending);
        if !slot.running && slot.ticket.is_none() {
            self.push_ready(key);
        }
    }

    /// Only as many worker tasks exist as there are permits: a queued object costs its slot,
    /// not a task (a task per queued object was 6 KB each, 60 MB for 10,000 objects at
    /// start-up).
    fn spawn(&mut self, key: ObjectRef<K>, permit: OwnedSemaphorePermit) -> tokio::task::Id {
        let slot = self.slots.get_mut(&key).expect("spawned for a known slot");
        slot.running = true;
        let pending = std::mem::take(&mut slot.pending);
        let state = slot.state.take().unwrap_or_default();
        let ticket = slot
            .ticket
            .take()
            .expect("a queued object holds its ticket");
        let ctl = self.ctl.clone();
        let span = info_span!("object", kind = %K::kind(&()), namespace = key.namespace.as_deref().unwrap_or(""), name = %key.name);
        let handle = self
            .workers
            .spawn(work(ctl, key.clone(), pending, state, ticket, permit).instrument(span));
        self.running.insert(handle.id(), key);
        handle.id()
    }

    pub(super) fn finished(
        &mut self,
        done: Result<(tokio::task::Id, Done<K>), tokio::task::JoinError>,
    ) {
        let (key, state, wake) = match done {
            Ok((id, (key, state, wake))) => {
                self.running.remove(&id);
                // A new object's record still on its way counts as the worker did: the
                // window paces new objects by their writes, as when the worker wrote it.
                let writing = self.ctl.records.in_flight(&key);
                self.intake_workers.retain_mut(|entry| {
                    if entry.worker != Some(id) {
                        return true;
                    }
                    entry.worker = None;
                    writing
                });
                (key, state, wake)
            }
            Err(error) => {
                // Our own bug (handler panics are caught): forget what we knew, the record on
                // the object is still there.
                self.intake_workers
                    .retain_mut(|entry| entry.worker != Some(error.id()));
                let Some(key) = self.running.remove(&error.id()) else {
                    return;
                };
                error!(%error, name = %key.name, "object worker failed");
                (
                    key,
                    Some(Box::default()),
                    Some(Instant::now() + Duration::from_secs(1)),
                )
            }
        };
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        slot.running = false;
        match state {
            None if slot.pending.is_empty() => {
                if let Some((_, wake)) = slot.wake.take() {
                    self.wakes.remove(&wake);
                }
                self.slots.remove(&key);
                return;
            }
            None => slot.state = Some(Box::default()),
            Some(state) => slot.state = Some(state),
        }
        if let Some(at) = wake {
            match slot.wake {
                Some((scheduled, _)) if scheduled <= at => {}
                Some((_, old)) => {
                    self.wakes.reset_at(&old, at);
                    slot.wake = Some((at, old));
                }
                None => slot.wake = Some((at, self.wakes.insert_at(key.clone(), at))),
            }
        }
        if !slot.pending.is_empty() && !self.ctl.env.shutdown.is_cancelled() {
            self.push_ready(key);
        }
    }
}
