//! A Kopf-style handler framework on kube-runtime, generic over any `kube::Resource`.
//!
//! An operator is a table of handlers per resource type, registered in one place, and run by
//! [`Operator::run`]. The workflow operator is written on top of it; this crate knows nothing
//! about workflows.
//!
//! ```ignore
//! Operator::new(client, OperatorConfig { name: "example.com".into(), ..Default::default() })
//!     .resource::<Widget>(|r| {
//!         r.on_create("start", start)
//!             .on_update_field("spec", "restart", restart).retries(5)
//!             .on_update_field("metadata.labels", "relabel", relabel)
//!             .on_delete("cleanup", cleanup)
//!             .on_resume("rebuild", rebuild)
//!             .timer("deadline", Duration::from_secs(5), check).when(|w| w.is_running())
//!             .on_child("job-changed", Children::<Job>::owned(), job_changed)
//!     })
//!     .run(shutdown_signal())
//!     .await?;
//! ```
//!
//! Handlers are async functions `(Context<K>) -> Result<(), HandlerError>` (child handlers also
//! get the child). [`HandlerError::Temporary`] retries after a delay or the handler's
//! [`Backoff`], up to its retry limit; [`HandlerError::Permanent`] stops, logs and posts a
//! Warning Event on the object.
//!
//! Layers: [`causes`] (pure detection) and [`registry`] (the table) below [`progress`]
//! (persistence) and [`reactor`] (watches, queues, handler calls).
//!
//! A [`Monitor`] given to [`Operator::with_monitor`] lets the caller watch the operator run: a
//! readiness probe reads [`Monitor::is_synced`], a metrics exporter the queue figures. A
//! [`Mirror`] given to [`Registry::mirror_to`] shares the in-memory copy of a resource (and a
//! signal per change) with readers such as a web view.
//!
//! # Guarantees
//!
//! - **One task per object.** At most one handler of an object runs at any time, whatever its
//!   cause: create, update, delete, resume, timer or child event (child events are queued in
//!   the parent's queue). Events arriving meanwhile are queued and coalesced.
//! - **Bounded parallelism.** At most [`OperatorConfig::concurrency`] objects are processed at
//!   once, across all resource types; operators given the same [`Slots`]
//!   ([`Operator::with_slots`]) share one such bound.
//! - **Work under way first.** Objects handled before are served before new ones, and new
//!   objects are taken in only as fast as the API server echoes the framework's writes
//!   ([`intake`]), so a burst of new objects cannot make the watches of the others fall
//!   behind. No object is starved: new ones get one worker in four while any wait, and a
//!   worker slow to set one up stops counting after [`OperatorConfig::intake_hold`].
//! - **Create/update/delete handlers run until they finish.** Each such handler is called
//!   until it succeeds or fails permanently (or exhausts its retries) for its cause; its
//!   progress is stored on the object after every outcome, so a restarted operator re-runs at
//!   most the handler whose outcome was not stored yet, and never skips one. The record of a
//!   completed cause is written behind ([`record_writer`]): the object's child events are
//!   handled meanwhile, and a graceful shutdown waits for it.
//! - **Spec changes are found by generation, metadata changes by comparison.** Status-only
//!   changes never cause update handlers to run. An update handler that finished for one value
//!   of its field runs again if the field changes again, even mid-retry.
//! - **Finalizer only with delete handlers.** The finalizer `<name>/finalizer` is added before
//!   any handler runs when delete handlers are registered, and removed once they have all
//!   finished; without delete handlers it is never added, and deleting an object that does not
//!   carry it is never blocked.
//! - **Level-triggered backup.** Every `resync` interval each mirrored object goes through
//!   detection again; a missed watch event only delays work. Watches recover with backoff.
//! - **Resume.** After a start, resume handlers run once for every object handled before.
//! - **Full picture first.** No handler runs before the resource and every child kind have
//!   been listed into memory, so [`Context::children`] is complete from the first call.
//!   [`Monitor::is_synced`] turns true at that point, once it holds for every resource type.
//! - **Graceful shutdown.** When the shutdown future resolves no new handler starts; running
//!   handlers finish and their progress is stored.
//!
//! # Caveats
//!
//! - Handlers must be idempotent: a crash between a handler's effect and the store of its
//!   progress re-runs it, as does an aborted operator.
//! - The full previous object is kept in memory only; after a restart the diff of a field too
//!   large to keep verbatim (over 512 bytes of JSON) reports `old: None`.
//! - Fields registered with `on_update_field` outside `metadata` are compared only when the
//!   generation moves: do not register status fields.
//! - Resume, timer and child handlers keep their retries in memory only; a permanently failed
//!   one is reported once per occurrence. Timers retry at their next tick.
//! - Child handlers run for added, changed and deleted children (a deleted child is handed over
//!   as last seen; [`Context::children`] no longer holds it), after a watch re-list for each
//!   child it found added, changed or gone, and always once [`Context::children`] shows the
//!   change. They do not run while the parent is being deleted.
//! - A permanently failed delete handler does not block deletion: the finalizer is removed.
//! - A child kind that cannot be listed (not installed, or forbidden) keeps every handler of
//!   its parent kind waiting; the watch failure is logged as a warning on every retry.
//! - Objects being deleted without this operator's finalizer get no handlers.
//! - The record annotation `<name>/last-handled` belongs to the framework; editing it by hand
//!   makes the object look new (its create handlers run again).

pub mod causes;
pub mod child_index;
pub mod events;
pub mod intake;
pub mod kinds;
pub mod mirror;
pub mod progress;
pub mod reactor;
pub mod record_writer;
pub mod registry;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::runtime::events::Reporter;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use causes::{Cause, Change};
pub use kinds::{Children, Parent, Watched, owner_of};
pub use mirror::Mirror;
pub use reactor::Error;
pub use registry::{
    Backoff, Context, HandlerError, HandlerOptions, HandlerResult, Reason, Registry,
};

/// How an operator runs.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// A DNS-subdomain style name: the Event reporter, and the prefix of the framework's
    /// annotation (`<name>/last-handled`) and finalizer (`<name>/finalizer`).
    pub name: String,
    /// The reporting instance on Events (e.g. the pod name).
    pub instance: Option<String>,
    /// Watch only this namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Watch only the objects of the registered kinds that match this label selector (selected
    /// by the API server, so the others are never sent or cached); `None` watches all. Children
    /// keep their own selectors ([`Children::labels`]).
    pub labels: Option<String>,
    /// Objects processed at once, across all resource types (the operator's own slots; see
    /// [`Operator::with_slots`] for slots shared with other operators).
    pub concurrency: usize,
    /// How long a worker on a never-handled object counts against the intake window
    /// ([`intake`]): one slower than this (a handler waiting on something) no longer holds
    /// up the other new objects.
    pub intake_hold: Duration,
    /// Every object goes through cause detection again this often; `None` disables it.
    pub resync: Option<Duration>,
    /// Options of handlers that set none.
    pub defaults: HandlerOptions,
    /// Test hooks.
    #[doc(hidden)]
    pub hooks: Hooks,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            name: "kopf.rs".into(),
            instance: None,
            namespace: None,
            labels: None,
            concurrency: 16,
            intake_hold: Duration::from_secs(1),
            resync: Some(Duration::from_secs(60)),
            defaults: HandlerOptions::default(),
            hooks: Hooks::default(),
        }
    }
}

/// Points where tests can stop the reactor.
#[doc(hidden)]
#[derive(Clone, Default)]
pub struct Hooks {
    /// Awaited after a create/update/delete handler's outcome is known and before it is stored,
    /// with the object's name and the handler's name. A hook that never completes freezes
    /// the object there, so a test can abort the operator at exactly that point.
    #[allow(clippy::type_complexity)]
    pub before_store: Option<Arc<dyn Fn(String, String) -> BoxFuture<'static, ()> + Send + Sync>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("before_store", &self.before_store.is_some())
            .finish()
    }
}

/// What a running [`Operator`] reports about itself, for a readiness probe and for metrics:
/// whether its mirrors hold their initial listings, and how many objects wait for a worker or
/// have one. Cheap to clone; clones share the figures.
///
/// Reading is an atomic load. The reactors keep the figures with atomic increments when a worker
/// is spawned, starts and ends; no lock is taken for them.
///
/// # Caveats
/// - The figures count objects, not events: an object with more work queued while its worker
///   runs counts once, as running; an object waiting for a retry's backoff delay counts
///   nowhere until the delay ends.
/// - One [`Operator::run`] at a time per monitor: each run starts it afresh.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    inner: Arc<MonitorInner>,
}

#[derive(Debug, Default)]
struct MonitorInner {
    /// Resource types of the current run whose mirrors are not all listed yet.
    unlisted: AtomicUsize,
    synced: AtomicBool,
    queued: AtomicUsize,
    running: AtomicUsize,
    intake_window: AtomicUsize,
}

impl Monitor {
    /// A monitor of no run yet: not synced, nothing queued.
    pub fn new() -> Self {
        Self::default()
    }

    /// True from the moment every registered resource type and every child kind has been
    /// listed into memory (handlers run from then on) until [`Operator::run`] returns.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }

    /// Objects with work whose worker has not started: waiting for the initial listings, or
    /// for a free slot of [`OperatorConfig::concurrency`].
    pub fn queued(&self) -> usize {
        self.inner.queued.load(Ordering::Relaxed)
    }

    /// Objects being processed now, each holding one slot of [`OperatorConfig::concurrency`].
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::Relaxed)
    }

    /// How many never-handled objects may be processed at once ([`intake`]): the window of the
    /// resource type whose window changed last (an operator of one resource type has one).
    pub fn intake_window(&self) -> usize {
        self.inner.intake_window.load(Ordering::Relaxed)
    }

    pub(crate) fn set_intake_window(&self, limit: usize) {
        self.inner.intake_window.store(limit, Ordering::Relaxed);
    }

    /// A run with `resources` resource types starts: none is listed yet.
    fn start(&self, resources: usize) {
        self.inner.unlisted.store(resources, Ordering::Release);
        self.inner.synced.store(resources == 0, Ordering::Release);
    }

    /// The mirrors of one resource type (and of its child kinds) hold their initial listings.
    pub(crate) fn listed(&self) {
        if self.inner.unlisted.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.synced.store(true, Ordering::Release);
        }
    }

    fn stopped(&self) {
        self.inner.synced.store(false, Ordering::Release);
    }

    /// Counts one object's worker as queued until [`Ticket::start`], and uncounts it when
    /// dropped (the worker ended, however).
    pub(crate) fn ticket(&self) -> Ticket {
        self.inner.queued.fetch_add(1, Ordering::Relaxed);
        Ticket {
            inner: self.inner.clone(),
            running: false,
        }
    }
}

/// One object's worker, as counted by a [`Monitor`].
pub(crate) struct Ticket {
    inner: Arc<MonitorInner>,
    running: bool,
}

impl Ticket {
    /// The worker holds its concurrency slot: queued no more, running.
    pub(crate) fn start(&mut self) {
        debug_assert!(!self.running, "a worker starts once");
        self.running = true;
        self.inner.queued.fetch_sub(1, Ordering::Relaxed);
        self.inner.running.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let counter = if self.running {
            &self.inner.running
        } else {
            &self.inner.queued
        };
        counter.fetch_sub(1, Ordering::Relaxed);
    }
}

type Reactor = Box<dyn FnOnce(reactor::Env) -> BoxFuture<'static, Result<(), Error>> + Send>;

/// An operator: resource types with their handler tables.
pub struct Operator {
    client: Client,
    config: OperatorConfig,
    reactors: Vec<Reactor>,
    monitor: Monitor,
    slots: Option<Slots>,
}

/// Worker slots several [`Operator`]s of one process share: at most this many objects are
/// processed at once across all of them, each taking a free slot when it has work (first come,
/// first served), and new objects are taken in through one [`intake`] window per resource type
/// for all of them. Without it each operator has its own [`OperatorConfig::concurrency`] slots
/// and windows, so operators that split one budget between them each get a fixed part of it,
/// idle or not, and their windows together let in as many new objects as each would alone.
/// Cheap to clone; clones share the slots.
#[derive(Clone, Debug)]
pub struct Slots {
    semaphore: Arc<Semaphore>,
    count: usize,
    intakes: Arc<
        std::sync::Mutex<std::collections::HashMap<std::any::TypeId, Arc<intake::SharedIntake>>>,
    >,
    processes: Arc<AtomicUsize>,
}

impl Slots {
    /// `count` slots (at least one).
    pub fn new(count: usize) -> Self {
        let count = count.max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(count)),
            count,
            intakes: Arc::default(),
            processes: Arc::new(AtomicUsize::new(1)),
        }
    }

    /// Tells the intake windows how many processes (this one among them) take new objects in
    /// from the same API server now, each through windows of its own: each window then grows
    /// `1/processes` as fast, so that together they pace the API server as one would
    /// ([`intake`]). One until told otherwise.
    pub fn set_processes(&self, processes: usize) {
        self.processes.store(processes.max(1), Ordering::Release);
    }

    /// The intake window of resource type `K` for every operator sharing these slots.
    fn intake<K: 'static>(&self) -> Arc<intake::SharedIntake> {
        let mut intakes = self.intakes.lock().expect("intakes");
        intakes
            .entry(std::any::TypeId::of::<K>())
            .or_insert_with(|| {
                Arc::new(intake::SharedIntake::new(
                    self.count,
                    tokio::time::Instant::now(),
                    self.processes.clone(),
                ))
            })
            .clone()
    }
}

impl Operator {
    pub fn new(client: Client, config: OperatorConfig) -> Self {
        Self {
            client,
            config,
            reactors: Vec::new(),
            monitor: Monitor::new(),
            slots: None,
        }
    }

    /// Processes objects in `slots` shared with other operators, instead of
    /// [`OperatorConfig::concurrency`] slots of its own.
    #[must_use]
    pub fn with_slots(mut self, slots: Slots) -> Self {
        self.slots = Some(slots);
        self
    }

    /// Reports to `monitor` while running (see [`Monitor`]); keep a clone to read it.
    #[must_use]
    pub fn with_monitor(mut self, monitor: Monitor) -> Self {
        self.monitor = monitor;
        self
    }

    /// Registers the handlers of resource type `K`.
    #[must_use]
    pub fn resource<K: Watched>(mut self, table: impl FnOnce(Registry<K>) -> Registry<K>) -> Self {
        let registry = table(Registry::new(self.config.defaults.clone()));
        self.reactors
            .push(Box::new(move |env| reactor::run(registry, env).boxed()));
        self
    }

    /// Runs until `shutdown` resolves, then lets running handlers finish.
    ///
    /// # Errors
    /// [`Error::Unlistable`] at start when a registered resource cannot be listed (its CRD is
    /// not installed, or access is denied).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let token = CancellationToken::new();
        self.monitor.start(self.reactors.len());
        let env = reactor::Env {
            recorder: events::Publisher::new(
                self.client.clone(),
                Reporter {
                    controller: self.config.name.clone(),
                    instance: self.config.instance.clone(),
                },
            ),
            client: self.client,
            slots: self
                .slots
                .unwrap_or_else(|| Slots::new(self.config.concurrency)),
            config: Arc::new(self.config),
            shutdown: token.clone(),
            monitor: self.monitor.clone(),
        };
        let reactors = futures::future::join_all(self.reactors.into_iter().map(|start| {
            let token = token.clone();
            start(env.clone()).map(move |result| {
                // One failed reactor stops the operator.
                if result.is_err() {
                    token.cancel();
                }
                result
            })
        }));
        let stop = async {
            tokio::select! {
                () = shutdown => token.cancel(),
                () = token.cancelled() => {}
            }
        };
        let (results, ()) = tokio::join!(reactors, stop);
        self.monitor.stopped();
        results.into_iter().collect()
    }
}
