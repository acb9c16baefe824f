//! The garbage collector and the namespace controller. Started by
//! [`crate::controllers::spawn_controllers`].
//!
//! Garbage collection follows `metadata.ownerReferences` as the real one does:
//! - an object none of whose owners exists (by uid, in its namespace or cluster-wide) is deleted,
//!   with the propagation its own finalizers ask for (background when none); references to
//!   missing owners of an object that still has a live owner are removed instead;
//! - background: once an owner is gone, its dependents go;
//! - foreground: an owner marked deleted with the `foregroundDeletion` finalizer (which the store
//!   adds) has its dependents deleted (in the foreground themselves when they have dependents);
//!   when no dependent with `blockOwnerDeletion: true` remains, the finalizer is removed;
//! - orphan: an owner marked deleted with the `orphan` finalizer has its references removed from
//!   every dependent, then the finalizer is removed.
//!
//! Namespace deletion: a deleted namespace stays, phase `Terminating`, while the `kubernetes`
//! entry of its `spec.finalizers` (which the store adds) is there. This controller deletes
//! everything in it (background propagation, so objects' own finalizers are respected and hold
//! the namespace), and removes that entry once the namespace is empty; the store then removes
//! the namespace.
//!
//! It keeps an index of every object's uid and owner references, built from the store's change
//! stream, to find dependents without scanning; every decision is made on the store's current
//! objects.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{
    DeleteOptions, Deleted, EventType, FOREGROUND_FINALIZER, NAMESPACE_FINALIZER, ORPHAN_FINALIZER,
    Propagation, Store, StoredObject, Target, WatchEvent, finalizers,
};

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Location {
    gr: GroupResource,
    namespace: String,
    name: String,
}

/// What the collector does next.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Work {
    /// Check an object's owners; delete it (or drop dangling references) when they are gone.
    Dependent(String),
    /// Carry out foreground or orphan deletion of an owner being deleted.
    Owner(String),
    /// Empty a terminating namespace, then let it go.
    Namespace(String),
}

/// What an owner reference points at, seen from its dependent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// Exists and is not waiting for its dependents.
    Solid,
    /// Exists, being deleted in the foreground: waits for its dependents.
    Waiting,
    /// Does not exist (or is another object now).
    Absent,
    /// Of a kind no longer (or not yet) served, and not known to be gone: left alone.
    Unknown,
}

/// The garbage collector; see the module documentation.
pub(crate) struct GarbageCollector {
    store: Store,
    registry: Registry,
    namespaces_info: Arc<ResourceInfo>,
    /// Every object, by uid.
    objects: HashMap<String, Location>,
    /// Owner uid -> dependent uids.
    dependents: HashMap<String, HashSet<String>>,
    /// Dependent uid -> owner uids.
    owners: HashMap<String, HashSet<String>>,
    /// Owners being deleted in the foreground.
    waiting: HashSet<String>,
    terminating: HashSet<String>,
}

impl GarbageCollector {
    pub fn new(store: Store, registry: Registry) -> Self {
        Self {
            namespaces_info: builtin(&registry, "", "namespaces"),
            store,
            registry,
            objects: HashMap::new(),
            dependents: HashMap::new(),
            owners: HashMap::new(),
            waiting: HashSet::new(),
            terminating: HashSet::new(),
        }
    }

    fn is_namespaces(gr: &GroupResource) -> bool {
        gr.group.is_empty() && gr.resource == "namespaces"
    }

    fn set_owners(&mut self, uid: &str, new: HashSet<String>, queue: &mut Queue<Work>) {
        let old = self.owners.remove(uid).unwrap_or_default();
        for owner in old.difference(&new) {
            if let Some(deps) = self.dependents.get_mut(owner) {
                deps.remove(uid);
                if deps.is_empty() {
                    self.dependents.remove(owner);
                }
            }
            if self.waiting.contains(owner) {
                queue.add(Work::Owner(owner.clone()));
            }
        }
        for owner in &new {
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(uid.to_string());
        }
        if !new.is_empty() {
            self.owners.insert(uid.to_string(), new);
        }
    }

    fn observe_object(
        &mut self,
        gr: &GroupResource,
        event_type: EventType,
        obj: &StoredObject,
        queue: &mut Queue<Work>,
    ) {
        let uid = obj.uid().to_string();
        let namespace = obj.namespace().to_string();
        if event_type == EventType::Deleted {
            self.objects.remove(&uid);
            self.waiting.remove(&uid);
            // Owners waiting for this dependent may go now.
            for owner in self.owners.get(&uid).cloned().unwrap_or_default() {
                if self.waiting.contains(&owner) {
                    queue.add(Work::Owner(owner));
                }
            }
            self.set_owners(&uid, HashSet::new(), queue);
            // Background: the dependents of a removed owner go.
            for dependent in self.dependents.get(&uid).cloned().unwrap_or_default() {
                queue.add(Work::Dependent(dependent));
            }
            if Self::is_namespaces(gr) {
                self.terminating.remove(obj.name());
            }
        } else {
            self.objects.insert(
                uid.clone(),
                Location {
                    gr: gr.clone(),
                    namespace: namespace.clone(),
                    name: obj.name().to_string(),
                },
            );
            let owners = crate::runtime::owner_uids(&obj.value);
            let suspicious = owners
                .iter()
                .any(|o| !self.objects.contains_key(o) || self.waiting.contains(o));
            for owner in &owners {
                if self.waiting.contains(owner) {
                    // A dependent changed (e.g. stopped blocking): look at the owner again.
                    queue.add(Work::Owner(owner.clone()));
                }
            }
            self.set_owners(&uid, owners, queue);
            if suspicious {
                queue.add(Work::Dependent(uid.clone()));
            }
            if is_deleting(&obj.value) {
                let fins = finalizers(&obj.value);
                if fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
                    self.waiting.insert(uid.clone());
                    queue.add(Work::Owner(uid.clone()));
                } else {
                    self.waiting.remove(&uid);
                }
                if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
                    queue.add(Work::Owner(uid.clone()));
                }
                if Self::is_namespaces(gr) {
                    self.terminating.insert(obj.name().to_string());
                    queue.add(Work::Namespace(obj.name().to_string()));
                }
            }
        }
        if !namespace.is_empty() && self.terminating.contains(&namespace) {
            queue.add(Work::Namespace(namespace));
        }
    }

    /// The served resource an owner reference's `apiVersion` and `kind` name.
    fn resolve(&self, reference: &Value) -> Option<Arc<ResourceInfo>> {
        let api_version = reference.get("apiVersion").and_then(Value::as_str)?;
        let kind = reference.get("kind").and_then(Value::as_str)?;
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        self.registry
            .all()
            .into_iter()
            .find(|info| info.group == group && info.kind == kind)
    }

    fn owner_state(&self, reference: &Value, dependent_namespace: &str) -> OwnerState {
        let uid = reference
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = reference
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(info) = self.resolve(reference) else {
            return if self.objects.contains_key(uid) {
                OwnerState::Unknown
            } else {
                OwnerState::Absent
            };
        };
        // A namespaced owner must be in its dependent's namespace.
        let namespace = if info.namespaced {
            dependent_namespace
        } else {
            ""
        };
        match self.store.get(&info, namespace, name) {
            Ok(owner) if owner.uid() == uid => {
                if is_deleting(&owner.value)
                    && finalizers(&owner.value)
                        .iter()
                        .any(|f| f == FOREGROUND_FINALIZER)
                {
                    OwnerState::Waiting
                } else {
                    OwnerState::Solid
                }
            }
            _ => OwnerState::Absent,
        }
    }

    fn current(&self, uid: &str) -> Option<(Arc<ResourceInfo>, Arc<StoredObject>)> {
        let location = self.objects.get(uid)?;
        let info = self.registry.get(&location.gr)?;
        let obj = self
            .store
            .get(&info, &location.namespace, &location.name)
            .ok()?;
        (obj.uid() == uid).then_some((info, obj))
    }

    fn delete(&self, info: &ResourceInfo, obj: &StoredObject, propagation: Propagation) {
        let options = DeleteOptions {
            propagation: Some(propagation),
            precondition_uid: Some(obj.uid().to_string()),
            precondition_rv: None,
            grace_period_seconds: None,
        };
        match self
            .store
            .delete(info, obj.namespace(), obj.name(), &options)
        {
            Ok(Deleted::Removed(_) | Deleted::Pending(_)) => {}
            Err(error) if error.code == 404 || error.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, name = obj.name(), "garbage collector cannot delete")
            }
        }
    }

    /// Rewrites an object's owner references (main resource) with `edit`.
    fn edit_owner_references(
        &self,
        info: &ResourceInfo,
        obj: &StoredObject,
        edit: impl Fn(&mut Vec<Value>),
    ) {
        let uid = obj.uid().to_string();
        let written =
            self.store
                .modify(info, obj.namespace(), obj.name(), Target::Main, |old, _| {
                    let mut new = old.clone();
                    if new.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                        return Err(crate::api::error::ApiError::not_found(
                            &info.display_name(),
                            &uid,
                        ));
                    }
                    let mut refs = new
                        .pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    edit(&mut refs);
                    let meta = new["metadata"].as_object_mut().expect("metadata");
                    if refs.is_empty() {
                        meta.remove("ownerReferences");
                    } else {
                        meta.insert("ownerReferences".into(), Value::Array(refs));
                    }
                    Ok(new)
                });
        if let Err(error) = written
            && error.code != 404
        {
            tracing::warn!(%error, name = obj.name(), "garbage collector cannot update owner references");
        }
    }

    fn remove_finalizer(&self, info: &ResourceInfo, obj: &StoredObject, finalizer: &str) {
        let uid = obj.uid().to_string();
        let written =
            self.store
                .modify(info, obj.namespace(), obj.name(), Target::Main, |old, _| {
                    if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                        return Err(crate::api::error::ApiError::not_found(
                            &info.display_name(),
                            &uid,
                        ));
                    }
                    let mut new = old.clone();
                    let kept: Vec<String> = finalizers(old)
                        .into_iter()
                        .filter(|f| f != finalizer)
                        .collect();
                    new["metadata"]["finalizers"] = serde_json::json!(kept);
                    Ok(new)
                });
        if let Err(error) = written
            && error.code != 404
        {
            tracing::warn!(%error, name = obj.name(), finalizer, "garbage collector cannot remove a finalizer");
        }
    }

    /// The real collector's `attemptToDeleteItem`.
    fn attempt_to_delete(&mut self, uid: &str) {
        let Some((info, obj)) = self.current(uid) else {
            return;
        };
        if is_deleting(&obj.value) {
            // Already on its way; its own finalizers (and Owner work) take it from here.
            return;
        }
        let refs: Vec<Value> = obj
            .value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if refs.is_empty() {
            return;
        }
        let states: Vec<(String, OwnerState)> = refs
            .iter()
            .map(|r| {
                (
                    r.get("uid")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    self.owner_state(r, obj.namespace()),
                )
            })
            .collect();
        let has = |wanted: OwnerState| states.iter().any(|(_, s)| *s == wanted);
        let uids_in = |wanted: OwnerState| -> HashSet<String> {
            states
                .iter()
                .filter(|(_, s)| *s == wanted)
                .map(|(u, _)| u.clone())
                .collect()
        };
        if has(OwnerState::Solid) {
            let dangling = uids_in(OwnerState::Absent);
            let waiting = uids_in(OwnerState::Waiting);
            if dangling.is_empty() && waiting.is_empty() {
                return;
            }
            // A live owner keeps it: drop the references to gone owners, and stop blocking
            // owners that wait for their dependents.
            self.edit_owner_references(&info, &obj, |refs| {
                refs.retain(|r| {
                    !r.get("uid")
                        .and_then(Value::as_str)
                        .is_some_and(|u| dangling.contains(u))
                });
                for r in refs.iter_mut() {
                    if r.get("uid")
                        .and_then(Value::as_str)
                        .is_some_and(|u| waiting.contains(u))
                    {
                        r["blockOwnerDeletion"] = Value::Bool(false);
                    }
                }
            });
            return;
        }
        if has(OwnerState::Unknown) {
            return;
        }
        let has_dependents = self
            .dependents
            .get(uid)
            .is_some_and(|deps| !deps.is_empty());
        let propagation = if has(OwnerState::Waiting) && has_dependents {
            Propagation::Foreground
        } else {
            let fins = finalizers(&obj.value);
            if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
                Propagation::Orphan
            } else if fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
                Propagation::Foreground
            } else {
                Propagation::Background
            }
        };
        self.delete(&info, &obj, propagation);
    }

    /// Foreground and orphan deletion of an owner marked deleted.
    fn process_owner(&mut self, uid: &str) {
        let Some((info, owner)) = self.current(uid) else {
            return;
        };
        if !is_deleting(&owner.value) {
            return;
        }
        let fins = finalizers(&owner.value);
        let dependents: Vec<String> = self
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dependent in &dependents {
                if let Some((dep_info, dep)) = self.current(dependent) {
                    self.edit_owner_references(&dep_info, &dep, |refs| {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                    });
                }
            }
            self.remove_finalizer(&info, &owner, ORPHAN_FINALIZER);
            return;
        }
        if fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
            let mut blocking = false;
            for dependent in &dependents {
                let Some((_, dep)) = self.current(dependent) else {
                    continue;
                };
                let blocks = dep
                    .value
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter().any(|r| {
                            r.get("uid").and_then(Value::as_str) == Some(uid)
                                && r.get("blockOwnerDeletion").and_then(Value::as_bool)
                                    == Some(true)
                        })
                    });
                blocking |= blocks;
                self.attempt_to_delete(dependent);
            }
            if !blocking {
                self.remove_finalizer(&info, &owner, FOREGROUND_FINALIZER);
            }
        }
    }

    /// Deletes what is left in a terminating namespace; lets the namespace go once it is empty.
    fn process_namespace(&mut self, name: &str) {
        let Ok(namespace) = self.store.get(&self.namespaces_info, "", name) else {
            self.terminating.remove(name);
            return;
        };
        if !is_deleting(&namespace.value) {
            self.terminating.remove(name);
            return;
        }
        let mut remaining = 0usize;
        for info in self.registry.all() {
            if !info.namespaced {
                continue;
            }
            let (items, _) = self.store.list(&info.group_resource(), Some(name));
            for item in items {
                if is_deleting(&item.value) {
                    remaining += 1;
                    continue;
                }
                let options = DeleteOptions {
                    propagation: Some(Propagation::Background),
                    precondition_uid: Some(item.uid().to_string()),
                    precondition_rv: None,
                    grace_period_seconds: None,
                };
                match self
                    .store
                    .delete(&info, item.namespace(), item.name(), &options)
                {
                    Ok(Deleted::Removed(_)) => {}
                    Ok(Deleted::Pending(_)) => remaining += 1,
                    Err(error) if error.code == 404 => {}
                    Err(error) => {
                        remaining += 1;
                        tracing::warn!(%error, namespace = name, object = item.name(), "cannot delete namespace content");
                    }
                }
            }
        }
        if remaining > 0 {
            return;
        }
        let uid = namespace.uid().to_string();
        let written = self
            .store
            .modify(&self.namespaces_info, "", name, Target::Main, |old, _| {
                if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                    return Err(crate::api::error::ApiError::not_found("namespaces", &uid));
                }
                let mut new = old.clone();
                if let Some(fins) = new
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    fins.retain(|f| f.as_str() != Some(NAMESPACE_FINALIZER));
                }
                Ok(new)
            });
        if let Err(error) = written
            && error.code != 404
        {
            tracing::warn!(%error, namespace = name, "cannot finalize namespace");
        }
    }
}

impl Reconciler for GarbageCollector {
    type Key = Work;

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<Work>) {
        self.observe_object(&event.gr, event.event_type, &event.object, queue);
    }

    fn resync(&mut self, queue: &mut Queue<Work>) {
        self.objects.clear();
        self.dependents.clear();
        self.owners.clear();
        self.waiting.clear();
        self.terminating.clear();
        let mut all = Vec::new();
        for info in self.registry.all() {
            let gr = info.group_resource();
            let (items, _) = self.store.list(&gr, None);
            all.extend(items.into_iter().map(|item| (gr.clone(), item)));
        }
        // Index every object first, so that owners listed after their dependents are known.
        for (gr, item) in &all {
            self.objects.insert(
                item.uid().to_string(),
                Location {
                    gr: gr.clone(),
                    namespace: item.namespace().to_string(),
                    name: item.name().to_string(),
                },
            );
        }
        for (gr, item) in &all {
            self.observe_object(gr, EventType::Modified, item, queue);
        }
    }

    fn reconcile(&mut self, key: Work, _queue: &mut Queue<Work>) {
        match key {
            Work::Dependent(uid) => self.attempt_to_delete(&uid),
            Work::Owner(uid) => self.process_owner(&uid),
            Work::Namespace(name) => self.process_namespace(&name),
        }
    }
}
