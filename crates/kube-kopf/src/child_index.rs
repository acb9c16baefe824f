//! The in-memory mirror of one child kind, grouped by parent, and the watch that feeds it.
//!
//! Every child kind registered with [`super::Registry::on_child`] gets its own watcher. Its
//! objects are kept per parent for [`super::Context::children`], and each added, changed or
//! deleted child is sent to the parent's queue in the reactor ([`super::reactor`]) as a child
//! event, once the mirror shows the change (`Follower`): a handler never runs for a change
//! its [`super::Context::children`] does not show yet, and no change leaves the parent untold
//! (a deletion, or a change made while the watch was down and found by a re-listing, included).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::{FutureExt, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::oneshot;
use tracing::warn;

use super::kinds::{
    ChildEvent, ChildSink, ChildWatch, Children, Parent, ParentOf, Scope, Watched, owner_of,
};

/// The in-memory mirror of one child kind, grouped by parent.
pub(crate) struct ChildIndex<C> {
    groups: RwLock<Groups<C>>,
}

impl<C> ChildIndex<C> {
    pub(crate) fn of(&self, parent: &Parent) -> Vec<Arc<C>> {
        self.groups.read().expect("child index lock").of(parent)
    }
}

/// Children grouped by parent: the mirror itself, or a re-listing being built.
///
/// Each parent's children are a `Vec` sorted by namespace and name, read from the children
/// themselves: no key string per child and no B-tree node per parent (a `BTreeMap` per parent
/// cost a ~400-byte leaf node plus a "namespace/name" string even for a parent of one child,
/// which is most parents). Finding a child is a binary search; adding or removing one moves
/// the pointers after it, a few kilobytes for a parent of 10,000 children.
struct Groups<C> {
    by_parent: HashMap<Parent, Vec<Arc<C>>>,
}

impl<C> Default for Groups<C> {
    fn default() -> Self {
        Self {
            by_parent: HashMap::new(),
        }
    }
}

impl<C> Groups<C> {
    /// The children of `parent`, by namespace and name.
    fn of(&self, parent: &Parent) -> Vec<Arc<C>> {
        self.by_parent.get(parent).cloned().unwrap_or_default()
    }
}

impl<C: Resource> Groups<C> {
    /// Adds `child` to `parent`'s children, in place of the one of the same namespace and name.
    fn insert(&mut self, parent: &Parent, child: Arc<C>) {
        let Some(siblings) = self.by_parent.get_mut(parent) else {
            // Most parents have one child: `vec!` keeps no room for more until a second comes.
            self.by_parent.insert(parent.clone(), vec![child]);
            return;
        };
        match position(siblings, &child) {
            Ok(at) => siblings[at] = child,
            Err(at) => siblings.insert(at, child),
        }
    }

    /// Removes the child of `child`'s namespace and name from `parent`'s children, and the
    /// parent once it has none.
    fn remove(&mut self, parent: &Parent, child: &C) {
        let Some(siblings) = self.by_parent.get_mut(parent) else {
            return;
        };
        if let Ok(at) = position(siblings, child) {
            siblings.remove(at);
        }
        if siblings.is_empty() {
            self.by_parent.remove(parent);
        }
    }

    /// The child of `child`'s namespace and name among `parent`'s children.
    fn find(&self, parent: &Parent, child: &C) -> Option<&Arc<C>> {
        let siblings = self.by_parent.get(parent)?;
        position(siblings, child).ok().map(|at| &siblings[at])
    }

    /// The children of `self` that `before` did not hold in the same version (added or
    /// changed), then the children of `before` that `self` does not hold (deleted), each with
    /// its parent: what a re-listing `self` tells the parents that `before` had not.
    fn changed_since(&self, before: &Groups<C>) -> Vec<(Parent, Arc<C>)> {
        let mut changed = Vec::new();
        for (parent, children) in &self.by_parent {
            for child in children {
                let known = before.find(parent, child);
                if known.is_none_or(|known| known.resource_version() != child.resource_version()) {
                    changed.push((parent.clone(), child.clone()));
                }
            }
        }
        for (parent, children) in &before.by_parent {
            for child in children {
                if self.find(parent, child).is_none() {
                    changed.push((parent.clone(), child.clone()));
                }
            }
        }
        changed
    }
}

/// Where `child` is, or would go, among `siblings` (sorted by namespace, then name).
fn position<C: Resource>(siblings: &[Arc<C>], child: &C) -> Result<usize, usize> {
    let wanted = key(child);
    siblings.binary_search_by(|sibling| key(&**sibling).cmp(&wanted))
}

fn key<C: Resource>(child: &C) -> (Option<&str>, Option<&str>) {
    let meta = child.meta();
    (meta.namespace.as_deref(), meta.name.as_deref())
}

/// Sends `child`'s change (or, for a deleted child, its last state) to the queue of its parent
/// `parent`; later changes of the same child (by namespace/name) replace a queued one.
fn forward<C: Watched>(sink: &ChildSink, index: usize, parent: Parent, child: Arc<C>) {
    let key = format!(
        "{}/{}",
        child.namespace().unwrap_or_default(),
        child.name_any()
    );
    let object: Arc<dyn Any + Send + Sync> = child;
    let _ = sink.send((parent, ChildEvent { index, key, object }));
}

/// What one child watch does with each event: keeps the mirror, and says which children to
/// tell their parents of. A (re)listing is swapped into the mirror whole at its end, and only
/// then are its changes told: every child it holds in a version the mirror did not, and every
/// child the mirror held that it does not (deleted while the watch was down). Told at each
/// listed child instead, a parent's pass could run before the swap and plan from the mirror's
/// old copy, the change it was told of consumed and never shown.
struct Follower<C> {
    parent_of: ParentOf<C>,
    /// The re-listing being built, from `Init` to `InitDone`.
    relisted: Option<Groups<C>>,
}

impl<C: Resource> Follower<C> {
    /// Applies `event` to `mirror`; the children to tell their parents of, with the parents.
    fn follow(&mut self, event: Event<C>, mirror: &ChildIndex<C>) -> Vec<(Parent, Arc<C>)> {
        match event {
            Event::Init => {
                self.relisted = Some(Groups::default());
                Vec::new()
            }
            Event::InitApply(child) => {
                let Some(parent) = (self.parent_of)(&child) else {
                    return Vec::new();
                };
                let child = Arc::new(child);
                match self.relisted.as_mut() {
                    Some(listing) => {
                        listing.insert(&parent, child);
                        Vec::new()
                    }
                    None => self.apply(mirror, parent, child),
                }
            }
            Event::InitDone => {
                let Some(listing) = self.relisted.take() else {
                    return Vec::new();
                };
                let mut groups = mirror.groups.write().expect("child index lock");
                let before = std::mem::replace(&mut *groups, listing);
                groups.changed_since(&before)
            }
            Event::Apply(child) => match (self.parent_of)(&child) {
                Some(parent) => self.apply(mirror, parent, Arc::new(child)),
                None => Vec::new(),
            },
            Event::Delete(child) => {
                let Some(parent) = (self.parent_of)(&child) else {
                    return Vec::new();
                };
                let mut groups = mirror.groups.write().expect("child index lock");
                groups.remove(&parent, &child);
                vec![(parent, Arc::new(child))]
            }
        }
    }

    /// Puts `child` in the mirror, to be told to `parent`.
    fn apply(
        &self,
        mirror: &ChildIndex<C>,
        parent: Parent,
        child: Arc<C>,
    ) -> Vec<(Parent, Arc<C>)> {
        mirror
            .groups
            .write()
            .expect("child index lock")
            .insert(&parent, child.clone());
        vec![(parent, child)]
    }
}

/// Builds the watch of child kind `C` for parents of kind `K`, and its index. Changes are sent
/// to the parents' queues only if `notify`.
pub(crate) fn child_watch<K: Watched, C: Watched>(
    index: usize,
    children: Children<C>,
    notify: bool,
) -> (ChildWatch, Arc<dyn Any + Send + Sync>) {
    let parent_of = children
        .parent
        .unwrap_or_else(|| Arc::new(owner_of::<K, C>));
    let labels = children.labels;
    let mirror = Arc::new(ChildIndex::<C> {
        groups: RwLock::default(),
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
                let mut follower = Follower {
                    parent_of: Arc::new(move |child: &C| {
                        parent_of(child).map(|mut parent| {
                            if !K::Scope::namespaced() {
                                parent.namespace = None;
                            }
                            parent
                        })
                    }),
                    relisted: None,
                };
                let events = watcher(api, config)
                    // Handlers never read managedFields; the real API server can make them
                    // most of an object.
                    .modify(|child: &mut C| child.managed_fields_mut().clear())
                    .default_backoff();
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    let event = match event {
                        Ok(event) => event,
                        Err(error) => {
                            warn!(%error, kind = %C::kind(&()), "child watch failed; retrying");
                            continue;
                        }
                    };
                    let listed = matches!(event, Event::InitDone);
                    let changed = follower.follow(event, &mirror);
                    if notify {
                        for (parent, child) in changed {
                            forward(&sink, index, parent, child);
                        }
                    }
                    // After the listing's changes: they are in the parents' queues before the
                    // reactor hears that the listing is mirrored.
                    if listed && let Some(synced) = synced.take() {
                        let _ = synced.send(());
                    }
                }
            }
            .boxed()
        },
    );
    (watch, erased)
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn parent(name: &str) -> Parent {
        Parent {
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn child(namespace: &str, name: &str, version: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    /// (namespace, name, resourceVersion) of each child, in the order `of` gives them.
    fn seen(groups: &Groups<ConfigMap>, parent: &Parent) -> Vec<(String, String, String)> {
        groups
            .of(parent)
            .iter()
            .map(|c| {
                let meta = &c.metadata;
                (
                    meta.namespace.clone().unwrap(),
                    meta.name.clone().unwrap(),
                    meta.resource_version.clone().unwrap(),
                )
            })
            .collect()
    }

    fn row(namespace: &str, name: &str, version: &str) -> (String, String, String) {
        (namespace.into(), name.into(), version.into())
    }

    #[test]
    fn children_are_kept_per_parent_by_namespace_and_name_and_replaced_in_place() {
        let mut groups = Groups::default();
        let (p, q) = (parent("p"), parent("q"));
        groups.insert(&p, child("ns", "b", "1"));
        groups.insert(&p, child("ns", "a", "1"));
        groups.insert(&q, child("ns", "a", "1"));
        // A cluster-scoped parent can have children in several namespaces.
        groups.insert(&p, child("another", "z", "1"));
        groups.insert(&p, child("ns", "b", "2"));
        assert_eq!(
            seen(&groups, &p),
            [
                row("another", "z", "1"),
                row("ns", "a", "1"),
                row("ns", "b", "2")
            ]
        );
        assert_eq!(seen(&groups, &q), [row("ns", "a", "1")]);

        groups.remove(&p, &child("ns", "a", "9"));
        groups.remove(&p, &child("ns", "unknown", "1"));
        groups.remove(&parent("unknown"), &child("ns", "b", "2"));
        assert_eq!(
            seen(&groups, &p),
            [row("another", "z", "1"), row("ns", "b", "2")]
        );
        groups.remove(&q, &child("ns", "a", "1"));
        assert!(groups.of(&q).is_empty());
        assert!(
            !groups.by_parent.contains_key(&q),
            "a parent without children is forgotten"
        );
    }

    #[test]
    fn a_parent_of_many_children_keeps_them_sorted_through_inserts_and_removals() {
        let mut groups = Groups::default();
        let p = parent("p");
        let n = 10_000;
        let name = |i: usize| format!("job-{i:05}");
        // Every index once, in a scattered order (7919 is prime, so coprime with 10,000).
        let scattered: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
        for &i in &scattered {
            groups.insert(&p, child("ns", &name(i), "1"));
        }
        for &i in scattered.iter().filter(|&&i| i % 3 == 0) {
            groups.insert(&p, child("ns", &name(i), "2"));
        }
        for &i in scattered.iter().filter(|&&i| i % 2 == 1) {
            groups.remove(&p, &child("ns", &name(i), "1"));
        }
        let want: Vec<_> = (0..n)
            .filter(|i| i % 2 == 0)
            .map(|i| row("ns", &name(i), if i % 3 == 0 { "2" } else { "1" }))
            .collect();
        assert_eq!(seen(&groups, &p), want);
    }

    /// A follower whose children all belong to parent `p`, and an empty mirror.
    fn following_p() -> (Follower<ConfigMap>, ChildIndex<ConfigMap>) {
        let follower = Follower {
            parent_of: Arc::new(|_: &ConfigMap| Some(parent("p"))),
            relisted: None,
        };
        let mirror = ChildIndex {
            groups: RwLock::default(),
        };
        (follower, mirror)
    }

    /// (name, resourceVersion) of each child told, sorted.
    fn told(changed: Vec<(Parent, Arc<ConfigMap>)>) -> Vec<(String, String)> {
        let mut told: Vec<_> = changed
            .into_iter()
            .map(|(_, c)| (c.name_any(), c.resource_version().unwrap_or_default()))
            .collect();
        told.sort();
        told
    }

    fn named(rows: &[(&str, &str)]) -> Vec<(String, String)> {
        rows.iter()
            .map(|(name, version)| (name.to_string(), version.to_string()))
            .collect()
    }

    /// A listing of `children` (each an owned copy of the helper's `child`).
    fn list(
        follower: &mut Follower<ConfigMap>,
        mirror: &ChildIndex<ConfigMap>,
        children: &[(&str, &str)],
    ) -> Vec<(Parent, Arc<ConfigMap>)> {
        assert!(follower.follow(Event::Init, mirror).is_empty());
        for (name, version) in children {
            let listed = (*child("ns", name, version)).clone();
            assert!(
                follower.follow(Event::InitApply(listed), mirror).is_empty(),
                "a listed child is told only once the listing is mirrored"
            );
        }
        follower.follow(Event::InitDone, mirror)
    }

    #[test]
    fn a_relisting_tells_once_mirrored_what_changed_and_what_is_gone() {
        let (mut follower, mirror) = following_p();
        let first = list(
            &mut follower,
            &mirror,
            &[("a", "1"), ("b", "1"), ("c", "1")],
        );
        assert_eq!(told(first), named(&[("a", "1"), ("b", "1"), ("c", "1")]));

        // The watch was down (a 410): b changed, c was deleted and d created meanwhile.
        assert!(follower.follow(Event::Init, &mirror).is_empty());
        for (name, version) in [("a", "1"), ("b", "2"), ("d", "1")] {
            let listed = (*child("ns", name, version)).clone();
            assert!(
                follower
                    .follow(Event::InitApply(listed), &mirror)
                    .is_empty()
            );
            assert_eq!(
                seen(&mirror.groups.read().unwrap(), &parent("p")).len(),
                3,
                "the mirror holds the old listing until the new one is whole"
            );
        }
        let changed = follower.follow(Event::InitDone, &mirror);
        assert_eq!(told(changed), named(&[("b", "2"), ("c", "1"), ("d", "1")]));
        assert_eq!(
            seen(&mirror.groups.read().unwrap(), &parent("p")),
            [
                row("ns", "a", "1"),
                row("ns", "b", "2"),
                row("ns", "d", "1")
            ]
        );
    }

    #[test]
    fn a_deleted_child_is_told_to_its_parent_and_gone_from_the_mirror() {
        let (mut follower, mirror) = following_p();
        list(&mut follower, &mirror, &[("a", "1"), ("b", "1")]);
        let changed = follower.follow(Event::Apply((*child("ns", "a", "2")).clone()), &mirror);
        assert_eq!(told(changed), named(&[("a", "2")]));
        let deleted = (*child("ns", "b", "1")).clone();
        let changed = follower.follow(Event::Delete(deleted), &mirror);
        assert_eq!(told(changed), named(&[("b", "1")]));
        assert_eq!(mirror.of(&parent("p")).len(), 1);
    }

    #[test]
    fn the_index_reads_the_groups_it_holds() {
        let index = ChildIndex::<ConfigMap> {
            groups: RwLock::default(),
        };
        let p = parent("p");
        assert!(index.of(&p).is_empty());
        index
            .groups
            .write()
            .unwrap()
            .insert(&p, child("ns", "a", "1"));
        let children = index.of(&p);
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].metadata.name.as_deref(), Some("a"));
    }
}
