//! The processing of one object by one worker ([`ObjectPass`]): its cause detected, its
//! handlers run and their progress recorded, then its child and timer handlers.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::FutureExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use crate::causes::{self, Cause, Change, FieldDiff, Known};
use crate::kinds::{Scope, Watched};
use crate::progress::{self, CREATE, DELETE, Record};
use crate::record_writer::Write;
use crate::registry::{Context, Handler, HandlerError, HandlerResult, Reason, Trigger};
use crate::{Hooks, Ticket};

use super::{AnyObject, Ctl, Due};

/// Work queued for one object.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) changed: bool,
    pub(super) timers: BTreeSet<usize>,
    pub(super) children: BTreeMap<(usize, String), Arc<dyn Any + Send + Sync>>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        !self.changed && self.timers.is_empty() && self.children.is_empty()
    }
}

/// What the reactor remembers about one object between workers.
pub(super) struct ObjectState<K> {
    pub(super) uid: Option<String>,
    /// Not processed by this process yet.
    pub(super) fresh: bool,
    /// The record as this process last stored (or read) it; `None` before it is read.
    pub(super) record: Option<Record>,
    /// The record differs from what the API holds.
    pub(super) dirty: bool,
    /// Consecutive failed record or finalizer writes.
    pub(super) write_failures: u32,
    /// This process put the finalizer on the object (the mirror may not show it yet).
    pub(super) finalizer_added: bool,
    /// The object as its create/update handlers last finished with it, for diff detail.
    pub(super) handled: Option<Arc<K>>,
    /// Resume handlers still to run in this process: retries and next attempt.
    pub(super) resume: BTreeMap<Arc<str>, (u32, Instant)>,
    /// Child events that failed temporarily.
    pub(super) child_retries: BTreeMap<(usize, String), (AnyObject, u32, Instant)>,
    /// Child events that arrived before their parent was in the mirror (the two watches are
    /// not ordered), kept until the parent shows up or [`ORPHAN_WAIT`] passes.
    pub(super) orphans: BTreeMap<(usize, String), (AnyObject, Instant)>,
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

/// What a worker hands back: the object, its state (`None` once it is gone), when to wake it.
/// When work beside an object left to another controller is tried again after failing.
const LEFT_RETRY: Duration = Duration::from_secs(1);

pub(super) type Done<K> = (ObjectRef<K>, Option<Box<ObjectState<K>>>, Option<Instant>);

/// One worker run for one object: returns its state (`None` once the object is gone) and when
/// to wake it for retries. `ticket` counts it in the monitor until it returns.
pub(super) async fn work<K: Watched>(
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
    if ctl.registry.leaves(&object) {
        debug!("left to another controller");
        let Some(beside) = ctl.registry.beside() else {
            return (key, None, None);
        };
        return match beside(ctl.env.client.clone(), object).await {
            Ok(()) => (key, None, None),
            Err(error) => {
                warn!(%error, "work beside an object left to another controller failed; retrying");
                (key, Some(state), Some(Instant::now() + LEFT_RETRY))
            }
        };
    }
    let mut pass = ObjectPass {
        ctl: &ctl,
        object,
        state,
        wake: None,
    };
    pass.run(pending).await;
    pass.settle();
    let ObjectPass { state, wake, .. } = pass;
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
pub(super) struct ObjectPass<'a, K: Watched> {
    pub(super) ctl: &'a Ctl<K>,
    pub(super) object: Arc<K>,
    pub(super) state: Box<ObjectState<K>>,
    pub(super) wake: Option<Instant>,
}

impl<'a, K: Watched> ObjectPass<'a, K> {
    /// Forgets what the object itself holds, once it does: the reactor keeps state for every
    /// object it has seen, mostly idle ones, and a parsed record or an old copy of the object
    /// for each would double the memory of the mirror.
    /// - The record, once the object's annotation says the same (stored, and the mirror has
    ///   caught up): the next pass reads it back from the mirror.
    /// - The previously handled object, when every field base is verbatim: diffs take their old
    ///   values from the base then, and the copy is only needed for fields stored as digests.
    pub(super) fn settle(&mut self) {
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

    pub(super) async fn run(&mut self, mut pending: Pending) {
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
    use crate::registry::{HandlerError, HandlerOptions};
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
            tick_if: None,
            run: Arc::new(|_| async { Ok(()) }.boxed()),
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
