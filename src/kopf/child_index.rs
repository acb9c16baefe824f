//! The in-memory mirror of one child kind, grouped by parent, and the watch that feeds it.
//!
//! Every child kind registered with [`super::Registry::on_child`] gets its own watcher. Its
//! objects are kept per parent for [`super::Context::children`], and each added or changed
//! child is sent to the parent's queue in the reactor ([`super::reactor`]) as a child event.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::{FutureExt, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;
use tracing::warn;

use super::registry::{
    ChildEvent, ChildSink, ChildWatch, Children, Parent, Scope, Watched, owner_of,
};

/// The in-memory mirror of one child kind, grouped by parent.
pub(crate) struct ChildIndex<C> {
    by_parent: RwLock<HashMap<Parent, BTreeMap<String, Arc<C>>>>,
}

impl<C> ChildIndex<C> {
    pub(crate) fn of(&self, parent: &Parent) -> Vec<Arc<C>> {
        let index = self.by_parent.read().expect("child index lock");
        index
            .get(parent)
            .map(|children| children.values().cloned().collect())
            .unwrap_or_default()
    }
}

/// Builds the watch of child kind `C` for parents of kind `K`, and its index.
pub(crate) fn child_watch<K: Watched, C: Watched>(
    index: usize,
    children: Children<C>,
) -> (ChildWatch, Arc<dyn Any + Send + Sync>) {
    let parent_of = children
        .parent
        .unwrap_or_else(|| Arc::new(owner_of::<K, C>));
    let labels = children.labels;
    let mirror = Arc::new(ChildIndex::<C> {
        by_parent: RwLock::default(),
    });
    let erased: Arc<dyn Any + Send + Sync> = mirror.clone();
    let watch: ChildWatch = Arc::new(
        move |client: Client,
              namespace: Option<String>,
              sink: ChildSink,
              synced: oneshot::Sender<()>| {
            let api = C::Scope::api::<C>(client, namespace.as_deref());
            let mut config = watcher::Config::default();
            if let Some(labels) = &labels {
                config = config.labels(labels);
            }
            let parent_of = parent_of.clone();
            let mirror = mirror.clone();
            let mut synced = Some(synced);
            async move {
                let parent = |child: &C| {
                    parent_of(child).map(|mut parent| {
                        if !K::Scope::namespaced() {
                            parent.namespace = None;
                        }
                        parent
                    })
                };
                let key = |child: &C| {
                    format!(
                        "{}/{}",
                        child.namespace().unwrap_or_default(),
                        child.name_any()
                    )
                };
                let mut relisted: Option<HashMap<Parent, BTreeMap<String, Arc<C>>>> = None;
                let events = watcher(api, config)
                    // Handlers never read managedFields; the real API server can make them
                    // most of an object.
                    .modify(|child: &mut C| child.managed_fields_mut().clear())
                    .default_backoff();
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    match event {
                        Ok(Event::Init) => relisted = Some(HashMap::new()),
                        Ok(Event::InitApply(child)) => {
                            let Some(p) = parent(&child) else { continue };
                            let child = Arc::new(child);
                            let k = key(&child);
                            if let Some(buffer) = relisted.as_mut() {
                                buffer
                                    .entry(p.clone())
                                    .or_default()
                                    .insert(k.clone(), child.clone());
                            }
                            let object: Arc<dyn Any + Send + Sync> = child;
                            let _ = sink.send((
                                p,
                                ChildEvent {
                                    index,
                                    key: k,
                                    object,
                                },
                            ));
                        }
                        Ok(Event::InitDone) => {
                            if let Some(buffer) = relisted.take() {
                                *mirror.by_parent.write().expect("child index lock") = buffer;
                            }
                            if let Some(synced) = synced.take() {
                                let _ = synced.send(());
                            }
                        }
                        Ok(Event::Apply(child)) => {
                            let Some(p) = parent(&child) else { continue };
                            let child = Arc::new(child);
                            let k = key(&child);
                            mirror
                                .by_parent
                                .write()
                                .expect("child index lock")
                                .entry(p.clone())
                                .or_default()
                                .insert(k.clone(), child.clone());
                            let object: Arc<dyn Any + Send + Sync> = child;
                            let _ = sink.send((
                                p,
                                ChildEvent {
                                    index,
                                    key: k,
                                    object,
                                },
                            ));
                        }
                        Ok(Event::Delete(child)) => {
                            let Some(p) = parent(&child) else { continue };
                            let mut index = mirror.by_parent.write().expect("child index lock");
                            if let Some(siblings) = index.get_mut(&p) {
                                siblings.remove(&key(&child));
                                if siblings.is_empty() {
                                    index.remove(&p);
                                }
                            }
                        }
                        Err(error) => {
                            warn!(%error, kind = %C::kind(&()), "child watch failed; retrying")
                        }
                    }
                }
            }
            .boxed()
        },
    );
    (watch, erased)
}
