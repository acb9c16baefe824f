//! A read-only share of the framework's in-memory mirror of one resource type, for readers
//! beside the handlers (a web view, a status page): the objects the reactor's watch holds and a
//! signal per change, so such a reader adds no watch of its own to the API server, however many
//! people look.
//!
//! Given to [`crate::Registry::mirror_to`]; each [`crate::Operator::run`] attaches its store
//! afresh (a new leader's run replaces a lost one's), so a clone kept by the reader always reads
//! the current run.

use std::sync::{Arc, RwLock};

use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::broadcast;

use crate::kinds::Watched;

/// How many changes a slow subscriber may fall behind before it is told it lagged
/// ([`broadcast::error::RecvError::Lagged`]), after which it should re-read everything.
const CHANGES_BUFFERED: usize = 1024;

/// The mirror of resource `K` as the operator's reactor holds it. Cheap to clone; clones share.
pub struct Mirror<K: Watched> {
    inner: Arc<Inner<K>>,
}

struct Inner<K: Watched> {
    /// The reactor's reflector store; `None` before the operator runs.
    store: RwLock<Option<Store<K>>>,
    changes: broadcast::Sender<ObjectRef<K>>,
}

impl<K: Watched> Clone for Mirror<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Watched> Default for Mirror<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Watched> std::fmt::Debug for Mirror<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("attached", &self.store().is_some())
            .finish()
    }
}

impl<K: Watched> Mirror<K> {
    /// A mirror no operator has attached yet: it reads empty.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                store: RwLock::new(None),
                changes: broadcast::channel(CHANGES_BUFFERED).0,
            }),
        }
    }

    fn store(&self) -> Option<Store<K>> {
        self.inner.store.read().expect("mirror lock").clone()
    }

    /// Every object mirrored now (empty before the operator's first listing).
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store().map(|s| s.state()).unwrap_or_default()
    }

    /// How many objects are mirrored now.
    pub fn len(&self) -> usize {
        self.store().map_or(0, |s| s.len())
    }

    /// Whether no object is mirrored now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One object, as mirrored now.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store()?.get(key)
    }

    /// A stream of the objects that change from now on (added, modified or deleted), each as
    /// it is applied to the mirror: [`Mirror::get`] reads the new state.
    pub fn subscribe(&self) -> broadcast::Receiver<ObjectRef<K>> {
        self.inner.changes.subscribe()
    }

    /// Fills this mirror from a watch of its own of `api`, until the returned future is
    /// dropped: for a reader in a process whose operator watches only some of the objects (a
    /// replica holding some shards) that must show all of them.
    pub async fn follow(&self, api: kube::Api<K>) {
        use futures::StreamExt;
        use kube::ResourceExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let (reader, writer) = kube::runtime::reflector::store::<K>();
        self.attach(reader);
        let events = watcher(api, watcher::Config::default())
            .modify(|object: &mut K| object.managed_fields_mut().clear())
            .default_backoff()
            .reflect(writer);
        let mut events = std::pin::pin!(events);
        let mut listed = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listed.clear(),
                Ok(watcher::Event::InitApply(object)) => listed.push(ObjectRef::from(&object)),
                // The reflector swaps a listing in whole at its end: readers hear of it then.
                Ok(watcher::Event::InitDone) => listed.drain(..).for_each(|key| self.changed(key)),
                Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                    self.changed(ObjectRef::from(&object));
                }
                Err(_) => {} // retried by the backoff
            }
        }
    }

    pub(crate) fn attach(&self, store: Store<K>) {
        *self.inner.store.write().expect("mirror lock") = Some(store);
    }

    pub(crate) fn changed(&self, key: ObjectRef<K>) {
        // No subscriber is not an error: nobody is looking.
        let _ = self.inner.changes.send(key);
    }
}
