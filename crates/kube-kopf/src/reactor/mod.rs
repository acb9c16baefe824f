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
//!   the objects it holds for (after its `tick_if` gate, when it has one, says any may be due).
//!
//! Child kinds get their own watcher; their objects are grouped by parent in memory
//! ([`super::Context::children`]) and their events go to the parent's queue.
//!
//! This module holds the watches and timers; `queues` the per-object queues and the workers;
//! `object` what one worker does for one object.

mod object;
mod queues;

use std::any::Any;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::ListParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::causes::Change;
use crate::intake::{Echoes, SharedIntake};
use crate::kinds::{ChildEvent, Scope, Watched};
use crate::record_writer::{Callbacks, RecordWriter};
use crate::registry::{Handler, Registry, Trigger};
use crate::{Monitor, OperatorConfig};

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
    pub slots: crate::Slots,
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
    // New objects may fill every slot the operator may use, its own or shared.
    let window = env.slots.intake::<K>();
    env.monitor.set_intake_window(window.limit());
    let intake = Arc::new(Mutex::new(Intake {
        window,
        echoes: Echoes::default(),
        monitor: env.monitor.clone(),
    }));
    // Handlers never read managedFields; the real API server can make them most of an object.
    let mut selected = watcher::Config::default();
    if let Some(labels) = &config.labels {
        selected = selected.labels(labels);
    }
    let events = watcher(api.clone(), selected)
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
/// and the handlers of each change once the reflector holds it ([`Listing`]), and the intake
/// window of each echo of a record write.
async fn forward_watch<K: Watched>(
    events: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
    mirrors: Vec<crate::Mirror<K>>,
    watch_intake: Arc<Mutex<Intake<K>>>,
    watch_tx: mpsc::UnboundedSender<Msg<K>>,
) {
    let mut events = std::pin::pin!(events);
    let mut listing = Listing::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                warn!(%error, kind = %K::kind(&()), "watch failed; retrying with backoff");
                continue;
            }
        };
        match &event {
            Event::Apply(obj) | Event::InitApply(obj) => {
                if let Some(version) = obj.meta().resource_version.as_deref() {
                    let mut intake = watch_intake.lock().expect("intake lock");
                    intake.echoed(&ObjectRef::from(obj), version);
                }
            }
            Event::Delete(obj) => {
                let mut intake = watch_intake.lock().expect("intake lock");
                intake.echoes.forget(&ObjectRef::from(obj));
            }
            Event::Init | Event::InitDone => {}
        }
        for key in listing.tell(&event) {
            for mirror in &mirrors {
                mirror.changed(key.clone());
            }
            if watch_tx.send(Msg::Changed(key)).is_err() {
                return;
            }
        }
    }
}

/// When a watch event's object is told to the mirrors and the handlers: once the reflector's
/// store holds it. `reflect` applies a change before yielding it, but a (re)listing's objects
/// only when the listing is done (it swaps the whole listing in at `InitDone`): told at each
/// listed object, a handler could run before the swap, read the store's old copy, and so take
/// the change as seen (after a 410, an update made while the watch was down waited for the
/// next resync).
struct Listing<K: Watched> {
    /// The objects of the listing under way.
    listed: Vec<ObjectRef<K>>,
}

impl<K: Watched> Default for Listing<K> {
    fn default() -> Self {
        Self { listed: Vec::new() }
    }
}

impl<K: Watched> Listing<K> {
    /// The objects to tell of now that `event` came.
    fn tell(&mut self, event: &Event<K>) -> Vec<ObjectRef<K>> {
        match event {
            Event::Init => {
                self.listed.clear();
                Vec::new()
            }
            Event::InitApply(obj) => {
                self.listed.push(ObjectRef::from(obj));
                Vec::new()
            }
            Event::InitDone => std::mem::take(&mut self.listed),
            Event::Apply(obj) | Event::Delete(obj) => vec![ObjectRef::from(obj)],
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
        let window = queues.intake_window();
        tokio::select! {
            biased;
            () = env.shutdown.cancelled() => break,
            // Before everything else, so that a busy watch never holds up a free worker.
            permit = env.slots.semaphore.clone().acquire_owned(), if queues.waiting() => {
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
            // Another reactor sharing the window made room for this one's new objects.
            () = window.room(), if queues.intake_waits_for_room() => {}
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
        if timer.is_some_and(|index| !ctl.registry.handlers[index].ticks_now()) {
            continue;
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
    window: Arc<SharedIntake>,
    echoes: Echoes<ObjectRef<K>>,
    monitor: Monitor,
}

impl<K: Watched> Intake<K> {
    /// The watch delivered `version` of `key`: if that is a record write's echo, the window
    /// learns its lag.
    fn echoed(&mut self, key: &ObjectRef<K>, version: &str) {
        let now = Instant::now();
        if let Some(lag) = self.echoes.seen(key, version, now)
            && let Some(limit) = self.window.observe(lag, now)
        {
            self.monitor.set_intake_window(limit);
        }
    }
}

enum Msg<K: Watched> {
    Changed(ObjectRef<K>),
    Timer(ObjectRef<K>, usize),
    Child(ObjectRef<K>, ChildEvent),
}

use queues::Queues;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn map(name: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.into());
        map.metadata.namespace = Some("ns".into());
        map
    }

    #[test]
    fn a_listings_objects_are_told_once_it_is_done_other_changes_at_once() {
        let mut listing = Listing::<ConfigMap>::default();
        let names = |keys: Vec<ObjectRef<ConfigMap>>| -> Vec<String> {
            keys.into_iter().map(|k| k.name).collect()
        };
        assert!(listing.tell(&Event::Init).is_empty());
        assert!(listing.tell(&Event::InitApply(map("a"))).is_empty());
        assert!(listing.tell(&Event::InitApply(map("b"))).is_empty());
        assert_eq!(names(listing.tell(&Event::InitDone)), ["a", "b"]);
        assert_eq!(names(listing.tell(&Event::Apply(map("c")))), ["c"]);
        assert_eq!(names(listing.tell(&Event::Delete(map("c")))), ["c"]);
        // A listing cut short by a new one forgets its objects: the new one lists them again.
        listing.tell(&Event::Init);
        listing.tell(&Event::InitApply(map("d")));
        listing.tell(&Event::Init);
        assert!(listing.tell(&Event::InitDone).is_empty());
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
}
