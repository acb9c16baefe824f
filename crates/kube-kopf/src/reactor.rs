//! The reactor: watches, per-object queues, handler calls, retries, finalizers.
//!
//! [`super::Operator::run`] starts one reactor per registered resource type. Each reactor:
//! - mirrors the resource in memory with a kube-runtime `watcher` feeding a reflector store
//!   (the watcher re-lists and re-watches with its default backoff after failures);
//! - queues work per object: watch events, resyncs and retry wake-ups mark the object
//!   "changed", child events and timer ticks are queued beside; repeated work for the same
//!   object (or the same child) coalesces while queued;
//! - runs at most one worker per object, and at most `concurrency` workers in total across all
//!   resource types (a semaphore); objects waiting for a worker wait in two ready queues, not as
//!   tasks: objects handled before (by this process, or by another as their record says) go
//!   first, since their work is usually the next step of something under way; objects never
//!   handled get one worker in `INTAKE_SHARE` (4), and only as many at once as the intake window
//!   allows ([`super::intake`]: it grows while the watch echoes the record writes promptly), so
//!   a burst of new objects neither starves nor holds up the ones in progress;
//! - counts its objects in the operator's [`super::Monitor`]: queued while in a ready queue,
//!   running while a worker holds a permit for it; and reports to it when its mirrors hold
//!   their initial listings;
//! - in a worker, reads the object from the mirror, detects the cause ([`super::causes`]), runs
//!   the matching handlers and records their progress ([`super::progress`]), then runs queued
//!   child and timer handlers;
//! - resyncs every `resync` interval by marking every mirrored object changed: detection on an
//!   unchanged object is a no-op, so this only costs CPU, never API calls, and a missed or
//!   failed event only delays work;
//! - ticks timers by evaluating each timer's `when` predicate on the mirror and queueing only
//!   the objects it holds for.
//!
//! Child kinds get their own watcher; their objects are grouped by parent in memory
//! ([`super::Context::children`]) and their events go to the parent's queue.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use kube::api::{Api, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::causes::{self, Cause, Change, FieldDiff, Known};
use super::intake::{Echoes, IntakeWindow};
use super::kinds::{ChildEvent, Scope, Watched};
use super::progress::{self, CREATE, DELETE, Record};
use super::record_writer::{Callbacks, RecordWriter, Write};
use super::registry::{Context, Handler, HandlerError, HandlerResult, Reason, Registry, Trigger};
use super::{Hooks, Monitor, OperatorConfig, Ticket};

/// Errors that stop the reactor.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list {kind}: is its CRD installed and readable? {source}")]
    Unlistable {
        kind: String,
        #[source]
        source: kube::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A child object with its type erased.
type AnyObject = Arc<dyn Any + Send + Sync>;

/// A handler due for a persisted cause: the handler, its progress target, its diff.
type Due<'a, K> = (&'a Handler<K>, String, Option<Arc<[Change]>>);

/// What every reactor of one operator shares.
#[derive(Clone)]
pub(crate) struct Env {
    pub client: Client,
    pub config: Arc<OperatorConfig>,
    pub semaphore: Arc<Semaphore>,
    pub recorder: crate::events::Publisher,
    pub shutdown: CancellationToken,
    pub monitor: Monitor,
}

/// Runs the reactor of resource `K` until `env.shutdown` is cancelled, then waits for running
/// handlers to finish.
pub(crate) async fn run<K: Watched>(registry: Registry<K>, env: Env) -> Result<()> {
    let config = env.config.clone();
    let api = K::Scope::api::<K>(env.client.clone(), config.namespace.as_deref());
    // Fail fast, with a useful message, when the resource is not served at all.
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(|source| Error::Unlistable {
            kind: K::kind(&()).to_string(),
            source,
        })?;

    let (reader, writer) = reflector::store::<K>();
    for mirror in &registry.mirrors {
        mirror.attach(reader.clone());
    }
    let (tx, rx) = mpsc::unbounded_channel::<Msg<K>>();
    let mut background = JoinSet::new();
    let window = IntakeWindow::new(config.concurrency, Instant::now());
    env.monitor.set_intake_window(window.limit());
    let intake = Arc::new(Mutex::new(Intake {
        window,
        echoes: Echoes::default(),
        monitor: env.monitor.clone(),
    }));
    // Handlers never read managedFields; the real API server can make them most of an object.
    let events = watcher(api.clone(), watcher::Config::default())
        .modify(|object: &mut K| object.managed_fields_mut().clear())
        .default_backoff()
        .reflect(writer);
    let mirrors = registry.mirrors.clone();
    background.spawn(forward_watch(events, mirrors, intake.clone(), tx.clone()));
    let (records, records_idle) = record_writer(intake.clone());
    let ctl = Arc::new(Ctl {
        fields: registry.fields(),
        finalizer: format!("{}/finalizer", config.name),
        annotation: format!("{}/last-handled", config.name),
        deletes: registry.has_delete_handlers(),
        reader,
        env: env.clone(),
        child_indexes: registry.child_indexes.clone().into(),
        registry,
        ready: CancellationToken::new(),
        intake,
        records,
    });
    background.spawn(start_when_listed(ctl.clone(), tx));
    let mut queues = serve(&ctl, rx, records_idle).await;
    // Graceful shutdown: workers see the cancellation between handlers and return.
    background.abort_all();
    while let Some(done) = queues.workers.join_next_with_id().await {
        queues.finished(done);
    }
    ctl.records.settle_all().await;
    info!(kind = %K::kind(&()), "reactor stopped");
    Ok(())
}

/// Forwards the resource's watch `events` to the reactor's queue (`tx`), telling the `mirrors`
/// of each change once the reflector holds it, and the intake window of each echo of a record
/// write.
async fn forward_watch<K: Watched>(
    events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
    mirrors: Vec<crate::Mirror<K>>,
    watch_intake: Arc<Mutex<Intake<K>>>,
    watch_tx: mpsc::UnboundedSender<Msg<K>>,
) {
    let mut events = std::pin::pin!(events);
    // Objects of a (re)listing: the reflector holds them only once the listing is done
    // (it swaps the whole listing in at `InitDone`), so mirrors hear of them then.
    let mut listed: Vec<ObjectRef<K>> = Vec::new();
    while let Some(event) = events.next().await {
        if matches!(event, Ok(Event::Init)) {
            listed.clear();
        }
        if matches!(event, Ok(Event::InitDone)) {
            for key in listed.drain(..) {
                for mirror in &mirrors {
                    mirror.changed(key.clone());
                }
            }
        }
        let initial = matches!(event, Ok(Event::InitApply(_)));
        let msg = match event {
            Ok(Event::Apply(obj) | Event::InitApply(obj)) => {
                let key = ObjectRef::from(&obj);
                if let Some(version) = obj.meta().resource_version.as_deref() {
                    watch_intake
                        .lock()
                        .expect("intake lock")
                        .echoed(&key, version);
                }
                Msg::Changed(key)
            }
            Ok(Event::Delete(obj)) => {
                let key = ObjectRef::from(&obj);
                watch_intake
                    .lock()
                    .expect("intake lock")
                    .echoes
                    .forget(&key);
                Msg::Changed(key)
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(error) => {
                warn!(%error, kind = %K::kind(&()), "watch failed; retrying with backoff");
                continue;
            }
        };
        // The store holds the change already (`reflect` applies it before yielding it),
        // but for an object of a listing (above).
        if let Msg::Changed(key) = &msg {
            if initial {
                listed.push(key.clone());
            } else {
                for mirror in &mirrors {
                    mirror.changed(key.clone());
                }
            }
        }
        if watch_tx.send(msg).is_err() {
            break;
        }
    }
}

/// The writer of the records of completed causes, which tells the intake window of each record
/// stored (to wait for its echo), and the receiver of the objects whose records are all written.
fn record_writer<K: Watched>(
    intake: Arc<Mutex<Intake<K>>>,
) -> (
    RecordWriter<K, ObjectRef<K>>,
    mpsc::UnboundedReceiver<ObjectRef<K>>,
) {
    let (records_idle_tx, records_idle) = mpsc::unbounded_channel::<ObjectRef<K>>();
    let records = RecordWriter::new(Callbacks {
        stored: Box::new(move |key: &ObjectRef<K>, version: String| {
            intake
                .lock()
                .expect("intake lock")
                .echoes
                .wrote(key.clone(), version, Instant::now());
        }),
        idle: Box::new(move |key: &ObjectRef<K>| {
            let _ = records_idle_tx.send(key.clone());
        }),
    });
    (records, records_idle)
}

/// No handler runs before the mirrors of the resource and of every child kind hold a full
/// listing, so handlers never act on a partial picture (e.g. a resume handler that would see
/// no children yet). This starts the child watches, waits for every listing, then opens
/// `ctl.ready` and starts the timers and the resync.
async fn start_when_listed<K: Watched>(ctl: Arc<Ctl<K>>, tx: mpsc::UnboundedSender<Msg<K>>) {
    let mut tasks = JoinSet::new();
    let (child_tx, mut child_rx) = mpsc::unbounded_channel();
    let mut synced = Vec::new();
    for watch in &ctl.registry.children {
        let (done, listed) = oneshot::channel();
        synced.push(listed);
        tasks.spawn(watch(
            ctl.env.client.clone(),
            ctl.env.config.namespace.clone(),
            child_tx.clone(),
            done,
        ));
    }
    let forward = tx.clone();
    let send = move |(parent, event): (super::kinds::Parent, ChildEvent)| {
        let mut key = ObjectRef::<K>::new(&parent.name);
        key.namespace = parent.namespace;
        forward.send(Msg::Child(key, event)).is_ok()
    };
    let listed = async {
        ctl.reader.wait_until_ready().await.ok()?;
        for listed in synced {
            listed.await.ok()?;
        }
        Some(())
    };
    let mut listed = std::pin::pin!(listed);
    // Child events are forwarded here until every mirror is listed, and the listings'
    // events (each child watch sends them before it reports its listing) are all in
    // the queue before `ready`: the first pass of an object sees all its children's.
    loop {
        tokio::select! {
            biased;
            done = &mut listed => match done {
                Some(()) => break,
                None => return,
            },
            Some(event) = child_rx.recv() => if !send(event) { return },
        }
    }
    while let Ok(event) = child_rx.try_recv() {
        if !send(event) {
            return;
        }
    }
    tasks.spawn(async move {
        while let Some(event) = child_rx.recv().await {
            if !send(event) {
                break;
            }
        }
    });
    debug!(kind = %K::kind(&()), "mirrors listed; handlers may run");
    ctl.ready.cancel();
    ctl.env.monitor.listed();
    for (index, handler) in ctl.registry.handlers.iter().enumerate() {
        if let Trigger::Timer { every, aligned } = handler.trigger {
            let ticks = Ticks { every, aligned };
            tasks.spawn(tick(ctl.clone(), tx.clone(), ticks, Some(index)));
        }
    }
    if let Some(every) = ctl.env.config.resync {
        let ticks = Ticks {
            every,
            aligned: false,
        };
        tasks.spawn(tick(ctl.clone(), tx.clone(), ticks, None));
    }
    tasks.join_all().await;
}

/// The reactor's loop until shutdown: queues what the watches and timers send and admits
/// queued objects to workers as permits free. Returns the queues, whose workers may still run.
async fn serve<K: Watched>(
    ctl: &Arc<Ctl<K>>,
    mut rx: mpsc::UnboundedReceiver<Msg<K>>,
    mut records_idle: mpsc::UnboundedReceiver<ObjectRef<K>>,
) -> Queues<K> {
    let env = &ctl.env;
    let mut queues = Queues::<K>::new(ctl.clone());
    let mut listings_queued = false;
    loop {
        if !listings_queued && ctl.ready.is_cancelled() {
            // Everything the listings brought is in `rx` by now: queue it before any worker
            // starts (admitting comes first in the select below).
            while let Ok(msg) = rx.try_recv() {
                queues.receive(msg);
            }
            listings_queued = true;
        }
        let intake_release = queues.intake_release();
        tokio::select! {
            biased;
            () = env.shutdown.cancelled() => break,
            // Before everything else, so that a busy watch never holds up a free worker.
            permit = env.semaphore.clone().acquire_owned(), if queues.waiting() => {
                if let Ok(permit) = permit {
                    queues.admit(permit);
                }
            }
            // Only wakes the loop once the mirrors are listed, so waiting objects are admitted.
            () = ctl.ready.cancelled(), if !ctl.ready.is_cancelled() => {}
            Some(done) = queues.workers.join_next_with_id() => queues.finished(done),
            Some(expired) = queues.wakes.next(), if !queues.wakes.is_empty() => {
                let key = expired.into_inner();
                if let Some(slot) = queues.slots.get_mut(&key) {
                    slot.wake = None;
                }
                queues.enqueue(key, |pending| pending.changed = true);
            }
            Some(msg) = rx.recv() => queues.receive(msg),
            Some(key) = records_idle.recv() => queues.record_idle(&key),
            () = tokio::time::sleep_until(intake_release.unwrap_or_else(Instant::now)), if intake_release.is_some() => {
                queues.release_slow_intake();
            }
        }
    }
    queues
}

/// When a timer ticks: every `every` from its start, or just after each wall-clock multiple of
/// `every` when `aligned`.
#[derive(Debug, Clone, Copy)]
struct Ticks {
    every: Duration,
    aligned: bool,
}

/// How far past a wall-clock multiple an aligned tick falls, so that a clock read by the handler
/// at the tick is surely past it.
const ALIGNED_MARGIN: Duration = Duration::from_millis(1);

/// How long from `now` (a wall-clock time as a duration since the Unix epoch) to the aligned
/// tick after it: the next multiple of `every`, plus [`ALIGNED_MARGIN`].
fn to_aligned_tick(now: Duration, every: Duration) -> Duration {
    let every = every.as_nanos().max(1);
    let left = every - now.as_nanos() % every;
    Duration::from_nanos(u64::try_from(left).unwrap_or(u64::MAX)) + ALIGNED_MARGIN
}

/// Queues the objects a timer (or, with `None`, the resync) is due for, at every tick.
async fn tick<K: Watched>(
    ctl: Arc<Ctl<K>>,
    tx: mpsc::UnboundedSender<Msg<K>>,
    ticks: Ticks,
    timer: Option<usize>,
) {
    let every = ticks.every;
    let mut interval = tokio::time::interval_at(Instant::now() + every, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if ticks.aligned {
            // Read the wall clock at each tick: the monotonic clock the sleep counts in may
            // drift from it, and a tick that took long moves to the next multiple.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            tokio::time::sleep(to_aligned_tick(now, every)).await;
        } else {
            interval.tick().await;
        }
        for object in ctl.reader.state() {
            let msg = match timer {
                Some(index) => {
                    let handler = &ctl.registry.handlers[index];
                    if object.meta().deletion_timestamp.is_some() || !handler.wants(&object) {
                        continue;
                    }
                    Msg::Timer(ObjectRef::from(&*object), index)
                }
                None => Msg::Changed(ObjectRef::from(&*object)),
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
}

/// What the reactor of one resource type knows.
struct Ctl<K: Watched> {
    registry: Registry<K>,
    fields: Vec<String>,
    finalizer: String,
    annotation: String,
    deletes: bool,
    reader: Store<K>,
    env: Env,
    child_indexes: Arc<[Arc<dyn Any + Send + Sync>]>,
    /// A latch: cancelled once every mirror holds a full listing.
    ready: CancellationToken,
    /// How many new objects may be processed at once, from the echoes of the record writes.
    intake: Arc<Mutex<Intake<K>>>,
    /// Records of completed causes, written behind ([`super::record_writer`]).
    records: RecordWriter<K, ObjectRef<K>>,
}

/// The intake window and the record writes whose echo it waits for ([`super::intake`]).
struct Intake<K: Watched> {
    window: IntakeWindow,
    echoes: Echoes<ObjectRef<K>>,
    monitor: Monitor,
}

impl<K: Watched> Intake<K> {
    /// The watch delivered `version` of `key`: if that is a record write's echo, the window
    /// learns its lag.
    fn echoed(&mut self, key: &ObjectRef<K>, version: &str) {
        let now = Instant::now();
        if let Some(lag) = self.echoes.seen(key, version, now) {
            let before = self.window.limit();
            self.window.observe(lag, now);
            if self.window.limit() != before {
                self.monitor.set_intake_window(self.window.limit());
            }
        }
    }
}

enum Msg<K: Watched> {
    Changed(ObjectRef<K>),
    Timer(ObjectRef<K>, usize),
    Child(ObjectRef<K>, ChildEvent),
}

/// Work queued for one object.
#[derive(Default)]
struct Pending {
    changed: bool,
    timers: BTreeSet<usize>,
    children: BTreeMap<(usize, String), Arc<dyn Any + Send + Sync>>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        !self.changed && self.timers.is_empty() && self.children.is_empty()
    }
}

/// What the reactor remembers about one object between workers.
struct ObjectState<K> {
    uid: Option<String>,
    /// Not processed by this process yet.
    fresh: bool,
    /// The record as this process last stored (or read) it; `None` before it is read.
    record: Option<Record>,
    /// The record differs from what the API holds.
    dirty: bool,
    /// Consecutive failed record or finalizer writes.
    write_failures: u32,
    /// This process put the finalizer on the object (the mirror may not show it yet).
    finalizer_added: bool,
    /// The object as its create/update handlers last finished with it, for diff detail.
    handled: Option<Arc<K>>,
    /// Resume handlers still to run in this process: retries and next attempt.
    resume: BTreeMap<Arc<str>, (u32, Instant)>,
    /// Child events that failed temporarily.
    child_retries: BTreeMap<(usize, String), (AnyObject, u32, Instant)>,
    /// Child events that arrived before their parent was in the mirror (the two watches are
    /// not ordered), kept until the parent shows up or [`ORPHAN_WAIT`] passes.
    orphans: BTreeMap<(usize, String), (AnyObject, Instant)>,
}

/// How long a child event waits for its parent to appear in the mirror.
const ORPHAN_WAIT: Duration = Duration::from_secs(30);

impl<K> Default for ObjectState<K> {
    fn default() -> Self {
        Self {
            uid: None,
            fresh: true,
            record: None,
            dirty: false,
            write_failures: 0,
            finalizer_added: false,
            handled: None,
            resume: BTreeMap::new(),
            child_retries: BTreeMap::new(),
            orphans: BTreeMap::new(),
        }
    }
}

struct Slot<K> {
    pending: Pending,
    running: bool,
    /// Present while the object waits in one of the ready queues for a worker: counts it as
    /// queued in the monitor, then goes with the worker, which counts it as running.
    ticket: Option<Ticket>,
    /// Absent while a worker holds it. Boxed: the reactor keeps a slot for every object it
    /// has seen, and most of them are idle.
    state: Option<Box<ObjectState<K>>>,
    wake: Option<(Instant, delay_queue::Key)>,
}

type Done<K> = (ObjectRef<K>, Option<Box<ObjectState<K>>>, Option<Instant>);

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
    fn new() -> Self {
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

/// The per-object queues of one resource type.
struct Queues<K: Watched> {
    ctl: Arc<Ctl<K>>,
    slots: HashMap<ObjectRef<K>, Slot<K>>,
    ready: Ready<K>,
    workers: JoinSet<Done<K>>,
    running: HashMap<tokio::task::Id, ObjectRef<K>>,
    /// New objects counted against the intake window, oldest first: while their worker runs,
    /// then while the record it handed over is written behind (`worker` is `None` then), as
    /// long as [`OperatorConfig::intake_hold`] allows.
    intake_workers: VecDeque<IntakeEntry<K>>,
    wakes: DelayQueue<ObjectRef<K>>,
}

impl<K: Watched> Queues<K> {
    fn new(ctl: Arc<Ctl<K>>) -> Self {
        Self {
            ctl,
            slots: HashMap::new(),
            ready: Ready::new(),
            workers: JoinSet::new(),
            running: HashMap::new(),
            intake_workers: VecDeque::new(),
            wakes: DelayQueue::new(),
        }
    }

    /// Whether the intake window has room for one more new object.
    fn intake_open(&self) -> bool {
        let limit = self.ctl.intake.lock().expect("intake lock").window.limit();
        self.intake_workers.len() < limit
    }

    /// Whether an object waits for a worker it may have and handlers may run.
    fn waiting(&self) -> bool {
        self.ctl.ready.is_cancelled() && self.ready.has_work(self.intake_open())
    }

    /// Starts a worker, holding `permit`, for the next waiting object.
    fn admit(&mut self, permit: OwnedSemaphorePermit) {
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
    fn intake_release(&self) -> Option<Instant> {
        self.intake_workers
            .front()
            .map(|entry| entry.started + self.ctl.env.config.intake_hold)
    }

    /// Stops counting the workers on new objects that have run for
    /// [`OperatorConfig::intake_hold`].
    fn release_slow_intake(&mut self) {
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
    fn record_idle(&mut self, key: &ObjectRef<K>) {
        self.intake_workers
            .retain(|entry| entry.worker.is_some() || entry.key != *key);
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

    fn receive(&mut self, msg: Msg<K>) {
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

    fn enqueue(&mut self, key: ObjectRef<K>, add: impl FnOnce(&mut Pending)) {
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

    fn finished(&mut self, done: Result<(tokio::task::Id, Done<K>), tokio::task::JoinError>) {
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
                    .retain(|entry| entry.worker != Some(error.id()));
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

/// One worker run for one object: returns its state (`None` once the object is gone) and when
/// to wake it for retries. `ticket` counts it in the monitor until it returns.
async fn work<K: Watched>(
    ctl: Arc<Ctl<K>>,
    key: ObjectRef<K>,
    pending: Pending,
    state: Box<ObjectState<K>>,
    mut ticket: Ticket,
    _permit: OwnedSemaphorePermit,
) -> Done<K> {
    ticket.start();
    let Some(object) = ctl.reader.get(&key) else {
        return orphaned(key, pending, state);
    };
    let mut pass = Pass {
        ctl: &ctl,
        object,
        state,
        wake: None,
    };
    pass.run(pending).await;
    pass.settle();
    let Pass { state, wake, .. } = pass;
    (key, Some(state), wake)
}

/// Keeps the child events of an object missing from the mirror until it appears (its own
/// watch event may simply lag behind the child's) or they expire.
fn orphaned<K: Watched>(
    key: ObjectRef<K>,
    pending: Pending,
    mut state: Box<ObjectState<K>>,
) -> Done<K> {
    let now = Instant::now();
    state.orphans.retain(|_, (_, expiry)| *expiry > now);
    for (child, object) in pending.children {
        state.orphans.insert(child, (object, now + ORPHAN_WAIT));
    }
    match state.orphans.values().map(|(_, expiry)| *expiry).min() {
        None => {
            debug!("object is gone");
            (key, None, None)
        }
        Some(expiry) => {
            debug!(
                children = state.orphans.len(),
                "child events wait for their parent"
            );
            (key, Some(state), Some(expiry))
        }
    }
}

/// The processing of one object by one worker.
struct Pass<'a, K: Watched> {
    ctl: &'a Ctl<K>,
    object: Arc<K>,
    state: Box<ObjectState<K>>,
    wake: Option<Instant>,
}

impl<'a, K: Watched> Pass<'a, K> {
    /// Forgets what the object itself holds, once it does: the reactor keeps state for every
    /// object it has seen, mostly idle ones, and a parsed record or an old copy of the object
    /// for each would double the memory of the mirror.
    /// - The record, once the object's annotation says the same (stored, and the mirror has
    ///   caught up): the next pass reads it back from the mirror.
    /// - The previously handled object, when every field base is verbatim: diffs take their old
    ///   values from the base then, and the copy is only needed for fields stored as digests.
    fn settle(&mut self) {
        let Some(record) = &self.state.record else {
            return;
        };
        let verbatim = record
            .base
            .fields
            .values()
            .all(|base| matches!(base, causes::FieldBase::Value(_)));
        if verbatim {
            self.state.handled = None;
        }
        if !self.state.dirty
            && Record::read(&*self.object, &self.ctl.annotation)
                .is_ok_and(|stored| stored.as_ref() == Some(record))
        {
            self.state.record = None;
        }
    }

    async fn run(&mut self, mut pending: Pending) {
        for (child, (object, _)) in std::mem::take(&mut self.state.orphans) {
            pending.children.entry(child).or_insert(object);
        }
        let uid = self.object.uid();
        if self.state.uid != uid {
            // A new object under a known name: nothing we remember applies to it.
            *self.state = ObjectState {
                uid,
                ..ObjectState::default()
            };
        }
        if self.state.record.is_none() {
            self.state.record = match Record::read(&*self.object, &self.ctl.annotation) {
                Ok(record) => Some(record.unwrap_or_default()),
                Err(error) => {
                    warn!(%error, "ignoring an unreadable progress record; handling as new");
                    Some(Record::default())
                }
            };
        }
        let deleting = self.object.meta().deletion_timestamp.is_some();
        let retry_due = self.due_retry();
        if pending.changed || self.state.fresh || self.state.dirty || retry_due {
            self.changed().await;
        }
        if deleting {
            return;
        }
        self.resume().await;
        // Children for handlers that take them together, by child kind.
        let mut batches: BTreeMap<usize, Vec<(String, AnyObject, u32)>> = BTreeMap::new();
        for ((index, child_key), object) in std::mem::take(&mut pending.children) {
            // A newer event of a child supersedes its failed one. A per-child handler starts
            // counting retries again; a batch keeps the count, so a failing batch backs off.
            let retries = self
                .state
                .child_retries
                .remove(&(index, child_key.clone()))
                .map_or(0, |(_, retries, _)| retries);
            if self.batched(index) {
                batches
                    .entry(index)
                    .or_default()
                    .push((child_key, object, retries));
            } else {
                self.child(index, child_key, object, 0).await;
            }
        }
        let now = Instant::now();
        let due: Vec<_> = self
            .state
            .child_retries
            .iter()
            .filter(|(_, (_, _, at))| *at <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if let Some((object, retries, _)) = self.state.child_retries.remove(&key) {
                if self.batched(key.0) {
                    batches
                        .entry(key.0)
                        .or_default()
                        .push((key.1, object, retries));
                } else {
                    self.child(key.0, key.1, object, retries).await;
                }
            }
        }
        for (index, batch) in batches {
            self.children(index, batch).await;
        }
        for index in std::mem::take(&mut pending.timers) {
            self.timer(index).await;
        }
        let retries: Vec<Instant> = self
            .state
            .child_retries
            .values()
            .map(|(_, _, at)| *at)
            .collect();
        for at in retries {
            self.wake_at(at);
        }
    }

    fn stopping(&self) -> bool {
        self.ctl.env.shutdown.is_cancelled()
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |wake| wake.min(at)));
    }

    /// Whether a persisted handler retry is due now.
    fn due_retry(&self) -> bool {
        let now = Utc::now();
        self.state.record.as_ref().is_some_and(|record| {
            record
                .handlers
                .values()
                .any(|p| !p.finished() && p.next.is_none_or(|next| next <= now))
        })
    }

    /// Detects the cause and runs its handlers.
    async fn changed(&mut self) {
        let cause = {
            let record = self.state.record.as_ref();
            let known = Known {
                base: record.map(|r| &r.base),
                previous: self.state.handled.as_deref(),
                first_sighting: self.state.fresh,
                finalizer: &self.ctl.finalizer,
                fields: &self.ctl.fields,
            };
            causes::detect(&*self.object, &known)
        };
        if self.state.fresh && matches!(cause, Cause::Resume(_)) {
            let now = Instant::now();
            self.state.resume = self
                .ctl
                .registry
                .with_trigger(|t| *t == Trigger::Resume)
                .map(|h| (h.name.clone(), (0, now)))
                .collect();
        }
        self.state.fresh = false;
        debug!(?cause, "detected");
        let deleting = self.object.meta().deletion_timestamp.is_some();
        let needs_finalizer = self.ctl.deletes && !deleting && !self.has_finalizer();
        if needs_finalizer && !self.add_finalizer().await {
            return;
        }
        match cause {
            Cause::Noop => {}
            Cause::Create => self.create().await,
            Cause::Update(diffs) => self.update(diffs).await,
            Cause::Resume(diffs) => {
                self.resume().await;
                self.update(diffs).await;
            }
            Cause::Delete => self.delete().await,
        }
        if self.state.dirty {
            self.store_behind();
        }
    }

    /// An `Api` for writes to this object: in its own namespace, whatever namespace (or none)
    /// the operator watches. The watch-wide `Ctl::api` has no namespace when the operator
    /// watches all of them, and a patch through it would address a cluster-scoped path (404).
    fn object_api(&self) -> Api<K> {
        K::Scope::api::<K>(
            self.ctl.env.client.clone(),
            self.object.namespace().as_deref(),
        )
    }

    fn has_finalizer(&self) -> bool {
        self.state.finalizer_added || self.object.finalizers().contains(&self.ctl.finalizer)
    }

    /// Adds the finalizer; false when it could not be added (a wake-up is scheduled).
    async fn add_finalizer(&mut self) -> bool {
        let mut object = self.object.clone();
        for attempt in 0..2 {
            match progress::add_finalizer(&self.object_api(), &*object, &self.ctl.finalizer).await {
                Ok(()) => {
                    self.state.write_failures = 0;
                    self.state.finalizer_added = true;
                    return true;
                }
                // The mirror lags behind the object; read it once and try again.
                Err(error) if attempt == 0 => {
                    debug!(%error, "finalizer precondition failed; re-reading the object");
                    match self.object_api().get_opt(&object.name_any()).await {
                        Ok(Some(fresh)) if fresh.finalizers().contains(&self.ctl.finalizer) => {
                            self.state.finalizer_added = true;
                            return true;
                        }
                        Ok(Some(fresh)) if fresh.meta().deletion_timestamp.is_none() => {
                            object = Arc::new(fresh)
                        }
                        Ok(_) => return false,
                        Err(error) => {
                            self.write_failed(&error.to_string());
                            return false;
                        }
                    }
                }
                Err(error) => self.write_failed(&error.to_string()),
            }
        }
        false
    }

    fn write_failed(&mut self, error: &str) {
        let delay = self
            .ctl
            .env
            .config
            .defaults
            .backoff
            .delay(self.state.write_failures);
        self.state.write_failures = self.state.write_failures.saturating_add(1);
        warn!(%error, retry_in = ?delay, "write failed");
        self.wake_at(Instant::now() + delay);
    }

    async fn create(&mut self) {
        let handlers: Vec<_> = self
            .ctl
            .registry
            .with_trigger(|t| *t == Trigger::Create)
            .map(|h| (h, CREATE.to_string(), None))
            .collect();
        if self.persisted(&handlers, Reason::Create).await {
            let record = self.state.record.get_or_insert_default();
            record.base = causes::base_of(&*self.object, &self.ctl.fields);
            record.handlers.clear();
            self.state.handled = Some(self.object.clone());
            self.state.dirty = true;
        }
    }

    async fn update(&mut self, diffs: Vec<FieldDiff>) {
        let mut all_done = true;
        let count = diffs.len();
        for (position, diff) in diffs.into_iter().enumerate() {
            let target = diff.base.fingerprint();
            let changes: Arc<[Change]> = diff.changes.into();
            let handlers: Vec<_> = self
                .ctl
                .registry
                .with_trigger(|t| matches!(t, Trigger::Update { field } if *field == diff.field))
                .map(|h| (h, target.clone(), Some(changes.clone())))
                .collect();
            if self.persisted(&handlers, Reason::Update).await {
                let record = self.state.record.get_or_insert_default();
                record.base.fields.insert(diff.field.clone(), diff.base);
                for (handler, _, _) in &handlers {
                    record.handlers.remove(&*handler.name);
                }
                self.state.dirty = true;
                // Later fields' handlers must not be able to lose this field's completion.
                if position + 1 < count {
                    self.store(None).await;
                }
            } else {
                all_done = false;
            }
        }
        if all_done {
            let generation = self.object.meta().generation;
            let record = self.state.record.get_or_insert_default();
            if record.base.generation != generation {
                record.base.generation = generation;
                self.state.dirty = true;
            }
            // Progress left for values the fields no longer have is moot.
            if !record.handlers.is_empty() {
                record.handlers.clear();
                self.state.dirty = true;
            }
            self.state.handled = Some(self.object.clone());
        }
    }

    async fn delete(&mut self) {
        let handlers: Vec<_> = self
            .ctl
            .registry
            .with_trigger(|t| *t == Trigger::Delete)
            .map(|h| (h, DELETE.to_string(), None))
            .collect();
        if !self.persisted(&handlers, Reason::Delete).await || self.stopping() {
            return;
        }
        // The object goes away with the finalizer: no record to store.
        self.state.dirty = false;
        let mut object = self.object.clone();
        for attempt in 0..2 {
            match progress::remove_finalizer(&self.object_api(), &*object, &self.ctl.finalizer)
                .await
            {
                Ok(()) => {
                    info!("deletion handled; finalizer removed");
                    return;
                }
                Err(error) if attempt == 0 => {
                    debug!(%error, "finalizer list moved; re-reading the object");
                    match self.object_api().get_opt(&object.name_any()).await {
                        Ok(Some(fresh)) => object = Arc::new(fresh),
                        Ok(None) => return,
                        Err(error) => return self.write_failed(&error.to_string()),
                    }
                }
                Err(error) => self.write_failed(&error.to_string()),
            }
        }
    }

    /// Runs the handlers of a persisted cause (create, update of one field, delete) that have
    /// not finished for their target, storing progress after each. True when all finished.
    async fn persisted(&mut self, handlers: &[Due<'_, K>], reason: Reason) -> bool {
        let mut unfinished: Vec<usize> = Vec::new();
        for (i, (handler, target, _)) in handlers.iter().enumerate() {
            let record = self.state.record.get_or_insert_default();
            if !record.finished(&handler.name, target) && handler.wants(&self.object) {
                unfinished.push(i);
            }
        }
        let mut remaining = unfinished.len();
        for i in unfinished {
            let (handler, target, diff) = &handlers[i];
            if self.stopping() {
                return false;
            }
            let record = self.state.record.get_or_insert_default();
            let progress = record
                .progress(&handler.name, target)
                .cloned()
                .unwrap_or_default();
            if let Some(next) = progress.next.filter(|next| *next > Utc::now()) {
                let wait = (next - Utc::now()).to_std().unwrap_or_default();
                self.wake_at(Instant::now() + wait);
                continue;
            }
            let result = self
                .call(handler, reason, diff.clone(), progress.retries, None)
                .await;
            let record = self.state.record.get_or_insert_default();
            let entry = record.entry(&handler.name, target);
            match settle(handler, entry.retries, result) {
                Settled::Done => entry.done = true,
                Settled::Retry(delay, message) => {
                    entry.retries += 1;
                    entry.next =
                        Some(Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default());
                    warn!(handler = %handler.name, %message, retry_in = ?delay, "handler failed; will retry");
                    self.wake_at(Instant::now() + delay);
                }
                Settled::Failed(message) => {
                    entry.failed = Some(message.clone());
                    self.report_failure(handler, reason, &message).await;
                }
            }
            let finished = self
                .state
                .record
                .as_ref()
                .is_some_and(|r| r.finished(&handler.name, target));
            if finished {
                remaining -= 1;
            }
            self.state.dirty = true;
            // The last handler's progress goes out with the completed cause, in one write.
            if remaining > 0 || !finished {
                self.store(Some(&handler.name)).await;
            } else {
                self.before_store(&handler.name).await;
            }
        }
        remaining == 0
    }

    async fn before_store(&self, handler: &str) {
        let Hooks { before_store } = &self.ctl.env.config.hooks;
        if let Some(hook) = before_store {
            hook(self.object.name_any(), handler.to_string()).await;
        }
    }

    /// Writes the record now if it changed, after any record of the object written behind;
    /// `handler` names the handler whose outcome is written. Between the handlers of one cause,
    /// so that a restart re-runs at most the handler whose outcome was not stored.
    async fn store(&mut self, handler: Option<&str>) {
        if let Some(handler) = handler {
            self.before_store(handler).await;
        }
        if !self.state.dirty {
            return;
        }
        let key = ObjectRef::from(&*self.object);
        let _taken_over = self.ctl.records.take_over(&key).await;
        let record = self.state.record.clone().unwrap_or_default();
        match progress::store(
            &self.object_api(),
            &self.object.name_any(),
            self.object.meta().uid.as_deref(),
            &self.ctl.annotation,
            &record,
        )
        .await
        {
            Ok(version) => {
                self.state.dirty = false;
                self.state.write_failures = 0;
                if let Some(version) = version {
                    self.ctl.intake.lock().expect("intake lock").echoes.wrote(
                        ObjectRef::from(&*self.object),
                        version,
                        Instant::now(),
                    );
                }
            }
            Err(error) => self.write_failed(&error.to_string()),
        }
    }

    /// Hands the record of a completed cause over to be written behind
    /// ([`super::record_writer`]): the object's next passes (its child events) need not wait
    /// for a write that costs the API server the whole object. The record stays in memory
    /// until the mirror shows it stored ([`Pass::settle`]).
    fn store_behind(&mut self) {
        let record = self.state.record.clone().unwrap_or_default();
        self.ctl.records.write_behind(
            &ObjectRef::from(&*self.object),
            Write {
                api: self.object_api(),
                name: self.object.name_any(),
                uid: self.object.meta().uid.clone(),
                annotation: self.ctl.annotation.clone(),
                record,
            },
        );
        self.state.dirty = false;
        self.state.write_failures = 0;
    }

    /// Runs the resume handlers still due in this process.
    async fn resume(&mut self) {
        let now = Instant::now();
        let due: Vec<Arc<str>> = self
            .state
            .resume
            .iter()
            .filter(|(_, (_, at))| *at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            if self.stopping() {
                return;
            }
            let Some(handler) = self.ctl.registry.handlers.iter().find(|h| h.name == name) else {
                continue;
            };
            let retries = self
                .state
                .resume
                .get(&name)
                .map_or(0, |(retries, _)| *retries);
            if !handler.wants(&self.object) {
                self.state.resume.remove(&name);
                continue;
            }
            let result = self
                .call(handler, Reason::Resume, None, retries, None)
                .await;
            match settle(handler, retries, result) {
                Settled::Done => {
                    self.state.resume.remove(&name);
                }
                Settled::Retry(delay, message) => {
                    warn!(handler = %name, %message, retry_in = ?delay, "resume handler failed; will retry");
                    let at = Instant::now() + delay;
                    self.state.resume.insert(name, (retries + 1, at));
                    self.wake_at(at);
                }
                Settled::Failed(message) => {
                    self.state.resume.remove(&name);
                    self.report_failure(handler, Reason::Resume, &message).await;
                }
            }
        }
        let retries: Vec<Instant> = self.state.resume.values().map(|(_, at)| *at).collect();
        for at in retries {
            self.wake_at(at);
        }
    }

    async fn child(
        &mut self,
        index: usize,
        key: String,
        object: Arc<dyn Any + Send + Sync>,
        retries: u32,
    ) {
        let Some(handler) = self.child_handler(Trigger::Child { index }) else {
            return;
        };
        let result = self
            .call(handler, Reason::Child, None, retries, Some(object.clone()))
            .await;
        match settle(handler, retries, result) {
            Settled::Done => {}
            Settled::Retry(delay, message) => {
                warn!(handler = %handler.name, child = %key, %message, retry_in = ?delay, "child handler failed; will retry");
                self.state
                    .child_retries
                    .insert((index, key), (object, retries + 1, Instant::now() + delay));
            }
            Settled::Failed(message) => self.report_failure(handler, Reason::Child, &message).await,
        }
    }

    /// The child handler registered for `trigger`, if it is to run now: not stopping, and its
    /// `when` holds for the parent.
    fn child_handler(&self, trigger: Trigger) -> Option<&'a Handler<K>> {
        let handler = self
            .ctl
            .registry
            .handlers
            .iter()
            .find(|h| h.trigger == trigger)?;
        (!self.stopping() && handler.wants(&self.object)).then_some(handler)
    }

    /// Whether child kind `index` is handled in batches ([`Registry::on_children`]).
    fn batched(&self, index: usize) -> bool {
        self.ctl
            .registry
            .handlers
            .iter()
            .any(|h| h.trigger == Trigger::Children { index })
    }

    /// Runs the batch handler of child kind `index` once with every child in `batch` (key,
    /// object, retries so far); on a temporary failure each child waits for the retry, counted
    /// from the most retried of them.
    async fn children(&mut self, index: usize, mut batch: Vec<(String, AnyObject, u32)>) {
        if batch.is_empty() {
            return;
        }
        let Some(handler) = self.child_handler(Trigger::Children { index }) else {
            return;
        };
        batch.sort_by(|a, b| a.0.cmp(&b.0));
        let retries = batch.iter().map(|(_, _, r)| *r).max().unwrap_or(0);
        let objects: Vec<AnyObject> = batch.iter().map(|(_, o, _)| o.clone()).collect();
        let result = self
            .call(
                handler,
                Reason::Child,
                None,
                retries,
                Some(Arc::new(objects)),
            )
            .await;
        match settle(handler, retries, result) {
            Settled::Done => {}
            Settled::Retry(delay, message) => {
                warn!(handler = %handler.name, children = batch.len(), %message, retry_in = ?delay, "child handler failed; will retry");
                let at = Instant::now() + delay;
                for (key, object, _) in batch {
                    self.state
                        .child_retries
                        .insert((index, key), (object, retries + 1, at));
                }
            }
            Settled::Failed(message) => self.report_failure(handler, Reason::Child, &message).await,
        }
    }

    async fn timer(&mut self, index: usize) {
        if self.stopping() {
            return;
        }
        // Its `when` was asked at the tick that queued it, once: it may take a flag, as a queue's
        // "plan this one again now" does, and asking again here would find the flag gone.
        let handler = &self.ctl.registry.handlers[index];
        // A failing timer is simply tried again at its next tick.
        match self.call(handler, Reason::Timer, None, 0, None).await {
            Ok(()) => {}
            Err(HandlerError::Temporary { message, .. }) => {
                warn!(handler = %handler.name, %message, "timer failed; next tick retries");
            }
            Err(HandlerError::Permanent(message)) => {
                self.report_failure(handler, Reason::Timer, &message).await
            }
        }
    }

    /// Calls one handler with its timeout, turning panics into temporary errors.
    async fn call(
        &self,
        handler: &Handler<K>,
        reason: Reason,
        diff: Option<Arc<[Change]>>,
        retry: u32,
        child: Option<Arc<dyn Any + Send + Sync>>,
    ) -> HandlerResult {
        let ctx = Context {
            client: self.ctl.env.client.clone(),
            object: self.object.clone(),
            reason,
            diff: diff.unwrap_or_else(|| Arc::new([])),
            handler: handler.name.clone(),
            retry,
            recorder: self.ctl.env.recorder.clone(),
            child,
            mirrors: self.ctl.child_indexes.clone(),
        };
        debug!(handler = %handler.name, %reason, retry, "calling handler");
        let run = AssertUnwindSafe((handler.run)(ctx)).catch_unwind();
        let outcome = match handler.options.timeout {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    return Err(HandlerError::temporary(format!(
                        "timed out after {limit:?}"
                    )));
                }
            },
            None => run.await,
        };
        outcome.unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(HandlerError::temporary(format!(
                "handler panicked: {message}"
            )))
        })
    }

    async fn report_failure(&self, handler: &Handler<K>, reason: Reason, message: &str) {
        error!(handler = %handler.name, %reason, %message, "handler failed permanently");
        let mut note = format!("handler {} failed: {message}", handler.name);
        if note.len() > 1000 {
            let mut end = 1000;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: "HandlerFailed".into(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(error) = self
            .ctl
            .env
            .recorder
            .publish(&event, &self.object.object_ref(&()))
            .await
        {
            warn!(%error, "could not post the failure event");
        }
    }
}

/// What becomes of a handler's result.
#[derive(Debug, PartialEq)]
enum Settled {
    Done,
    Retry(Duration, String),
    Failed(String),
}

/// Applies the handler's retry policy to its result; `retries` counts earlier failures.
fn settle<K>(handler: &Handler<K>, retries: u32, result: HandlerResult) -> Settled {
    match result {
        Ok(()) => Settled::Done,
        Err(HandlerError::Permanent(message)) => Settled::Failed(message),
        Err(HandlerError::Temporary { delay, message }) => {
            if handler
                .options
                .retries
                .is_some_and(|limit| retries >= limit)
            {
                Settled::Failed(format!("gave up after {} retries: {message}", retries))
            } else {
                Settled::Retry(
                    delay.unwrap_or_else(|| handler.options.backoff.delay(retries)),
                    message,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::HandlerOptions;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn handler(retries: Option<u32>) -> Handler<ConfigMap> {
        Handler {
            name: "h".into(),
            trigger: Trigger::Create,
            options: HandlerOptions {
                retries,
                ..HandlerOptions::default()
            },
            when: None,
            run: Arc::new(|_| async { Ok(()) }.boxed()),
        }
    }

    #[test]
    fn aligned_ticks_fall_just_after_the_next_wall_clock_multiple() {
        let ms = Duration::from_millis;
        let second = Duration::from_secs(1);
        // (now, every, wait)
        let table = [
            (ms(10_250), second, ms(751)),
            (ms(10_999), second, ms(2)),
            // On the multiple itself: the next one, a whole period on.
            (ms(10_000), second, ms(1_001)),
            (ms(7_000), Duration::from_secs(5), ms(3_001)),
            (
                Duration::from_nanos(1_500_000_001),
                second,
                Duration::from_nanos(500_999_999),
            ),
        ];
        for (now, every, want) in table {
            assert_eq!(to_aligned_tick(now, every), want, "{now:?} every {every:?}");
        }
    }

    #[test]
    fn results_settle_by_the_retry_policy() {
        let backoff = HandlerOptions::default().backoff;
        let table = [
            (None, 0, Ok(()), Settled::Done),
            (
                None,
                9,
                Err(HandlerError::permanent("bad")),
                Settled::Failed("bad".into()),
            ),
            (
                None,
                2,
                Err(HandlerError::temporary("later")),
                Settled::Retry(backoff.delay(2), "later".into()),
            ),
            (
                Some(5),
                1,
                Err(HandlerError::retry_after(Duration::from_millis(7), "soon")),
                Settled::Retry(Duration::from_millis(7), "soon".into()),
            ),
            (
                Some(2),
                2,
                Err(HandlerError::temporary("again")),
                Settled::Failed("gave up after 2 retries: again".into()),
            ),
        ];
        for (limit, retries, result, expected) in table {
            let shown = format!("{limit:?} {retries} {result:?}");
            assert_eq!(
                settle(&handler(limit), retries, result),
                expected,
                "{shown}"
            );
        }
    }
}
