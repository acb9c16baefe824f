//! The object store: every object as JSON, one global `resourceVersion` counter, and a bounded
//! history of changes so that watches resume from a resourceVersion (and get 410 Gone when it
//! is older than the history, as after an etcd compaction).
//!
//! All writes go through one mutex, so the order of changes, their resourceVersions and the order
//! watchers see them in are one and the same. The server calls it for API requests; the job
//! controller, kubelet and garbage collector call it directly (their writes are not API requests).
//!
//! Objects are kept both parsed (for selectors, patches and tables) and serialized (so a list or a
//! watch event going to a thousand watchers is serialized once, at write time).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::api::error::{ApiError, Result};
use crate::api::go_json::{self, KeyOrder};
use crate::api::resources::{GroupResource, ResourceInfo};

/// One stored version of an object.
#[derive(Debug)]
pub struct StoredObject {
    pub value: Value,
    pub json: Bytes,
}

impl StoredObject {
    /// The object with its bytes, written as the real server writes its kind
    /// ([`ResourceInfo::key_order`]).
    fn new(value: Value, order: KeyOrder) -> Arc<Self> {
        let json = Bytes::from(go_json::to_vec(&value, order));
        Arc::new(Self { value, json })
    }

    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn uid(&self) -> &str {
        self.value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn resource_version(&self) -> u64 {
        resource_version_of(&self.value).unwrap_or(0)
    }

    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.value
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
    }
}

/// `ADDED`, `MODIFIED` or `DELETED`, as in a watch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object. A `DELETED` event carries the last state with a new resourceVersion.
#[derive(Debug)]
pub struct WatchEvent {
    pub rv: u64,
    pub gr: GroupResource,
    pub event_type: EventType,
    pub object: Arc<StoredObject>,
    /// The object before this change (`None` for a create), so that a watch with a selector can
    /// send `DELETED` when an object stops matching and `ADDED` when it starts, as the real one.
    pub prev: Option<Arc<StoredObject>>,
    /// When the store committed the change (when it was made, for the events a watch starts
    /// with): in-process observers measure latencies from it, not from when they got to it.
    pub committed_at: Instant,
}

/// What starting a watch gives: the events to send first, then a receiver of all later changes
/// (to be filtered by the caller).
pub type WatchStart = (Vec<Arc<WatchEvent>>, broadcast::Receiver<Arc<WatchEvent>>);

/// Where an update is addressed: the main resource or its `/status` subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
    /// A pod's binding to a node: `spec.nodeName` and the `PodScheduled` condition in one
    /// write, as the binding subresource's storage writes them (pkg/registry/core/pod/storage
    /// storage.go, `assignPod`: a guaranteed update of the whole pod, outside the update
    /// strategy, so `metadata.generation` stays).
    Binding,
}

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// The finalizers the API server itself uses for foreground and orphan deletion.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
pub const ORPHAN_FINALIZER: &str = "orphan";

/// Options of a delete: propagation and the `preconditions` of `DeleteOptions`.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<u64>,
    /// `gracePeriodSeconds`: only pods have one (see `storage::pod_deletion`).
    pub grace_period_seconds: Option<i64>,
}

/// The outcome of a delete: removed at once, or marked with a `deletionTimestamp` and left for
/// its finalizers.
#[derive(Debug)]
pub enum Deleted {
    Removed(Arc<StoredObject>),
    Pending(Arc<StoredObject>),
}

/// Limits of the change history kept for watches.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    pub max_events: usize,
    pub max_bytes: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        Self {
            max_events: 50_000,
            max_bytes: 256 << 20,
        }
    }
}

/// Key of an object within its resource: namespace ("" for cluster-scoped) and name. Ordered, so
/// lists come out sorted as the real server's do and `continue` tokens can be keys.
pub type ObjectKey = (String, String);

struct Inner {
    rv: u64,
    objects: HashMap<GroupResource, BTreeMap<ObjectKey, Arc<StoredObject>>>,
    history: VecDeque<Arc<WatchEvent>>,
    history_bytes: usize,
    /// Changes at or below this resourceVersion are no longer in `history`.
    compacted_rv: u64,
}

/// The store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<Arc<WatchEvent>>,
    limits: HistoryLimits,
    /// A dry-run view ([`Store::dry_run`]): writes compute their result and commit nothing.
    dry_run: bool,
}

impl Default for Store {
    fn default() -> Self {
        Self::new(HistoryLimits::default())
    }
}

impl Store {
    pub fn new(limits: HistoryLimits) -> Self {
        let (events, _) = broadcast::channel(1 << 16);
        Self {
            inner: Arc::new(Mutex::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                history_bytes: 0,
                compacted_rv: 1,
            })),
            events,
            limits,
            dry_run: false,
        }
    }

    /// The same store, as a dry run (`?dryRun=All`) writes to it: every write (create, update,
    /// patch, delete) runs its checks and returns the object it would store, and stores nothing:
    /// no resourceVersion is used, no watch event is sent. As the real server's
    /// `DryRunnableStorage` (k8s.io/apiserver/pkg/registry/generic/registry/dryrun.go), the one
    /// place where a dry run differs is the commit.
    pub fn dry_run(&self) -> Store {
        Store {
            dry_run: true,
            ..self.clone()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("store lock poisoned")
    }

    /// The newest resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Every change from now on, for in-process controllers. A receiver that lags behind by more
    /// than the channel's capacity gets `Lagged` and must re-list.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.events.subscribe()
    }

    /// Creates an object. `metadata.name` (or `generateName`) is required; uid, resourceVersion,
    /// generation and creationTimestamp are set here, whatever the request said.
    pub fn create(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        obj: Value,
    ) -> Result<Arc<StoredObject>> {
        self.create_with(info, namespace, obj, |_| Ok(()))
    }

    /// [`Store::create`] with a last step that sees the object with its identity set (name, uid),
    /// as the real server's create strategies do (a Job's selector is made from its uid).
    pub fn create_with(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        mut obj: Value,
        prepare: impl FnOnce(&mut Value) -> Result<()>,
    ) -> Result<Arc<StoredObject>> {
        let mut inner = self.lock();
        let meta = metadata_mut(&mut obj)?;
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", random_suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        &info.kind,
                        "",
                        vec![crate::api::error::FieldError::required("metadata.name")],
                    ));
                }
            },
        };
        let key = (namespace.to_string(), name.clone());
        if inner
            .objects
            .get(&info.group_resource())
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::already_exists(&info.display_name(), &name));
        }
        meta.insert("name".into(), json!(name));
        if info.namespaced {
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        if info.strategy.tracks_generation {
            meta.insert("generation".into(), json!(1));
        }
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        let rv = inner.rv + 1;
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        obj["apiVersion"] = json!(info.api_version());
        obj["kind"] = json!(info.kind);
        if info.status_subresource {
            // With a status subresource, status is the controllers' to write: create ignores it.
            obj.as_object_mut().expect("object").remove("status");
        }
        if is_namespaces(info) {
            namespace_defaults(&mut obj);
        }
        prepare(&mut obj)?;
        if self.dry_run {
            // Nothing is stored, so no resourceVersion is given out.
            metadata_mut(&mut obj)?.remove("resourceVersion");
            return Ok(StoredObject::new(obj, info.key_order()));
        }
        let stored = StoredObject::new(obj, info.key_order());
        inner
            .objects
            .entry(info.group_resource())
            .or_default()
            .insert(key, stored.clone());
        self.commit(
            &mut inner,
            rv,
            info.group_resource(),
            EventType::Added,
            stored.clone(),
            None,
        );
        Ok(stored)
    }

    pub fn get(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>> {
        self.lock()
            .objects
            .get(&info.group_resource())
            .and_then(|m| m.get(&(namespace.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&info.display_name(), name))
    }

    /// Every object of a resource, in one namespace or all, sorted by (namespace, name), with the
    /// resourceVersion the list is consistent at.
    pub fn list(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
    ) -> (Vec<Arc<StoredObject>>, u64) {
        let inner = self.lock();
        let items = match inner.objects.get(gr) {
            None => Vec::new(),
            Some(map) => match namespace {
                None => map.values().cloned().collect(),
                Some(ns) => map
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
            },
        };
        (items, inner.rv)
    }

    /// Replaces an object (PUT). When the new object carries a resourceVersion it must be the
    /// current one (else 409 Conflict). Identity fields are kept from the stored object; with a
    /// status subresource, a main write keeps the stored status and a status write keeps
    /// everything but status. `generation` is bumped when anything but metadata and status
    /// changed. An update that removes the last finalizer of an object being deleted removes it.
    pub fn update(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        new: Value,
        target: Target,
    ) -> Result<Arc<StoredObject>> {
        self.modify(info, namespace, name, target, |_, _| Ok(new.clone()))
    }

    /// Read-modify-write: `f` gets the stored object and returns the new one, which then goes
    /// through the same rules as [`Store::update`]. Patches use this, so they never conflict
    /// with a concurrent write, as on the real server.
    ///
    /// Like the real server's guaranteed update, the new object is computed outside the store
    /// lock and committed only if the stored object is still the one it was computed from;
    /// otherwise `f` runs again on the newer one. A patch of a large object (a 700 KB workflow
    /// takes tens of milliseconds to patch, validate and compare) then holds up no other write.
    pub fn modify(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        target: Target,
        mut f: impl FnMut(&Value, &ResourceInfo) -> Result<Value>,
    ) -> Result<Arc<StoredObject>> {
        let gr = info.group_resource();
        let key = (namespace.to_string(), name.to_string());
        loop {
            let old = self
                .lock()
                .objects
                .get(&gr)
                .and_then(|m| m.get(&key))
                .cloned()
                .ok_or_else(|| ApiError::not_found(&info.display_name(), name))?;
            let new = f(&old.value, info)?;
            if let Some(stored) = self.commit_modified(info, &gr, &key, old, new, target)? {
                return Ok(stored);
            }
        }
    }

    /// The second half of [`Store::modify`]: applies the update rules to `new` and commits it,
    /// unless the stored object is no longer `old` (`Ok(None)`: compute again).
    fn commit_modified(
        &self,
        info: &ResourceInfo,
        gr: &GroupResource,
        key: &(String, String),
        old: Arc<StoredObject>,
        mut new: Value,
        target: Target,
    ) -> Result<Option<Arc<StoredObject>>> {
        let name = key.1.as_str();
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        if let Some(rv) = resource_version_of(&new)
            && rv != old.resource_version()
        {
            return Err(ApiError::conflict(
                &info.display_name(),
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        if let Some(uid) = new.pointer("/metadata/uid").and_then(Value::as_str)
            && !uid.is_empty()
            && uid != old.uid()
        {
            return Err(ApiError::conflict(
                &info.display_name(),
                name,
                "Precondition failed: UID in precondition does not match the UID in record",
            ));
        }
        merge_for_target(info, &old.value, &mut new, target);
        preserve_identity(&old.value, &mut new);
        if is_namespaces(info) {
            namespace_name_label(&mut new);
        }
        if info.strategy.tracks_generation && target != Target::Binding {
            let old_generation = old
                .value
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let generation = if spec_changed(&old.value, &new) {
                old_generation + 1
            } else {
                old_generation
            };
            new["metadata"]["generation"] = json!(generation);
        }
        // The server does not bump resourceVersion for a write that changes nothing.
        new["metadata"]["resourceVersion"] = old.value["metadata"]["resourceVersion"].clone();
        if new == old.value {
            return Ok(Some(old));
        }
        if self.dry_run {
            // The would-be object, at the resourceVersion it was computed from.
            return Ok(Some(StoredObject::new(new, info.key_order())));
        }
        let being_deleted = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let mut inner = self.lock();
        let objects = inner.objects.get_mut(gr).expect("resource present");
        if !objects
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, &old))
        {
            return Ok(None);
        }
        let rv = inner.rv + 1;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let stored = StoredObject::new(new, info.key_order());
        let objects = inner.objects.get_mut(gr).expect("resource present");
        let event_type = if being_deleted
            && finalizers(&stored.value).is_empty()
            && !has_namespace_finalizers(info, &stored.value)
        {
            objects.remove(key);
            EventType::Deleted
        } else {
            objects.insert(key.clone(), stored.clone());
            EventType::Modified
        };
        self.commit(
            &mut inner,
            rv,
            gr.clone(),
            event_type,
            stored.clone(),
            Some(old),
        );
        Ok(Some(stored))
    }

    /// Removes `old` from the store at once (`new` is it with its last resource version), or
    /// only answers it in a dry run.
    fn remove_now(
        &self,
        inner: &mut Inner,
        info: &ResourceInfo,
        gr: GroupResource,
        key: (String, String),
        old: Arc<StoredObject>,
        mut new: Value,
    ) -> Deleted {
        if self.dry_run {
            return Deleted::Removed(old);
        }
        let rv = inner.rv + 1;
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let stored = StoredObject::new(new, info.key_order());
        inner
            .objects
            .get_mut(&gr)
            .expect("resource present")
            .remove(&key);
        self.commit(inner, rv, gr, EventType::Deleted, stored.clone(), Some(old));
        Deleted::Removed(stored)
    }

    /// Deletes an object: removed at once when it has no finalizers, else marked with a
    /// `deletionTimestamp` and left until its finalizers are removed. Foreground and orphan
    /// propagation add the server's own finalizers, which the garbage collector removes.
    pub fn delete(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted> {
        let mut inner = self.lock();
        let gr = info.group_resource();
        let key = (namespace.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&gr)
            .and_then(|m| m.get(&key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&info.display_name(), name))?;
        check_preconditions(info, name, &old, opts)?;
        let mut new = old.value.clone();
        let mut fins = finalizers(&new);
        let extra = match opts
            .propagation
            .unwrap_or_else(|| default_propagation(info))
        {
            Propagation::Foreground => Some(FOREGROUND_FINALIZER),
            Propagation::Orphan => Some(ORPHAN_FINALIZER),
            Propagation::Background => None,
        };
        let already_deleting = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let grace =
            crate::storage::pod_deletion::grace_period(info, &new, opts.grace_period_seconds);
        let old_grace = new
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        if fins.is_empty() && extra.is_none() && grace == 0 && !has_namespace_finalizers(info, &new)
        {
            return Ok(self.remove_now(&mut inner, info, gr, key, old, new));
        }
        if let Some(extra) = extra {
            // Orphan and foreground finalizers only make sense when there are dependents to
            // handle; the garbage collector removes them (at once when there are none).
            if !already_deleting && !fins.iter().any(|f| f == extra) {
                fins.push(extra.to_string());
            }
        }
        // A second delete may only shorten a grace period (apiserver registry/rest/delete.go,
        // BeforeDelete).
        let shorter = already_deleting && old_grace.is_some_and(|g| grace < g);
        if already_deleting && finalizers(&old.value) == fins && !shorter {
            return Ok(Deleted::Pending(old));
        }
        let rv = inner.rv + 1;
        let meta = new["metadata"].as_object_mut().expect("metadata object");
        mark_deleting(meta, fins, already_deleting, shorter, grace);
        if !self.dry_run {
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        if is_namespaces(info) {
            new["status"]["phase"] = json!("Terminating");
        }
        let stored = StoredObject::new(new, info.key_order());
        if self.dry_run {
            // Returned marked for deletion, as it would be stored.
            return Ok(Deleted::Pending(stored));
        }
        inner
            .objects
            .get_mut(&gr)
            .expect("resource present")
            .insert(key, stored.clone());
        self.commit(
            &mut inner,
            rv,
            gr,
            EventType::Modified,
            stored.clone(),
            Some(old),
        );
        Ok(Deleted::Pending(stored))
    }

    /// Removes every object of a resource (used when its CRD is deleted).
    pub fn drop_resource(&self, gr: &GroupResource) {
        if self.dry_run {
            return;
        }
        let mut inner = self.lock();
        let Some(map) = inner.objects.remove(gr) else {
            return;
        };
        for (_, obj) in map {
            let rv = inner.rv + 1;
            let mut value = obj.value.clone();
            value["metadata"]["resourceVersion"] = json!(rv.to_string());
            self.commit(
                &mut inner,
                rv,
                gr.clone(),
                EventType::Deleted,
                // Only custom resources are dropped (their CRD deleted).
                StoredObject::new(value, KeyOrder::Sorted),
                Some(obj),
            );
        }
    }

    /// Starts a watch of one resource, in one namespace or all: the events to send first, and a
    /// receiver for what follows. With no resourceVersion (or "0"), the backlog is the current
    /// objects as `ADDED`; with a resourceVersion, it is every change after it, or 410 Gone when
    /// history no longer reaches back that far.
    pub fn watch(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        since: Option<u64>,
    ) -> Result<WatchStart> {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        let in_scope = |ev: &WatchEvent| {
            ev.gr == *gr && namespace.is_none_or(|ns| ev.object.namespace() == ns)
        };
        let backlog = match since {
            None | Some(0) => {
                let map = inner.objects.get(gr);
                map.into_iter()
                    .flat_map(|m| m.values())
                    .filter(|o| namespace.is_none_or(|ns| o.namespace() == ns))
                    .map(|o| {
                        Arc::new(WatchEvent {
                            rv: o.resource_version(),
                            gr: gr.clone(),
                            event_type: EventType::Added,
                            object: o.clone(),
                            prev: None,
                            committed_at: Instant::now(),
                        })
                    })
                    .collect()
            }
            Some(rv) if rv < inner.compacted_rv => {
                return Err(ApiError::gone(format!(
                    "too old resource version: {rv} ({})",
                    inner.compacted_rv
                )));
            }
            Some(rv) => inner
                .history
                .iter()
                .filter(|ev| ev.rv > rv && in_scope(ev))
                .cloned()
                .collect(),
        };
        Ok((backlog, receiver))
    }

    /// Forgets all history, so every watch from an older resourceVersion gets 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.compacted_rv = inner.rv;
        inner.history.clear();
        inner.history_bytes = 0;
    }

    /// Number of objects stored, over all resources.
    pub fn object_count(&self) -> usize {
        self.lock().objects.values().map(BTreeMap::len).sum()
    }

    fn commit(
        &self,
        inner: &mut Inner,
        rv: u64,
        gr: GroupResource,
        event_type: EventType,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
    ) {
        inner.rv = rv;
        let event = Arc::new(WatchEvent {
            rv,
            gr,
            event_type,
            object,
            prev,
            committed_at: Instant::now(),
        });
        inner.history_bytes += event.object.json.len();
        inner.history.push_back(event.clone());
        while inner.history.len() > self.limits.max_events
            || inner.history_bytes > self.limits.max_bytes
        {
            let Some(dropped) = inner.history.pop_front() else {
                break;
            };
            inner.history_bytes -= dropped.object.json.len();
            inner.compacted_rv = dropped.rv;
        }
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(event);
    }
}

/// The preconditions of a delete: the uid and resource version it names, if any, are `old`'s.
fn check_preconditions(
    info: &ResourceInfo,
    name: &str,
    old: &StoredObject,
    opts: &DeleteOptions,
) -> Result<()> {
    if let Some(uid) = &opts.precondition_uid
        && uid != old.uid()
    {
        return Err(ApiError::conflict(
            &info.display_name(),
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old.uid()
            ),
        ));
    }
    if let Some(rv) = opts.precondition_rv
        && rv != old.resource_version()
    {
        return Err(ApiError::conflict(
            &info.display_name(),
            name,
            "Precondition failed: ResourceVersion in precondition does not match",
        ));
    }
    Ok(())
}

/// Marks the metadata of an object whose deletion waits: its finalizers, its generation moved
/// when the deletion starts, and the deletion timestamp (now plus the grace period) when it
/// starts or the grace period is shortened.
fn mark_deleting(
    meta: &mut Map<String, Value>,
    fins: Vec<String>,
    already_deleting: bool,
    shorter: bool,
    grace: i64,
) {
    if fins.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), json!(fins));
    }
    if !already_deleting
        && let Some(generation) = meta
            .get("generation")
            .and_then(Value::as_i64)
            .filter(|g| *g > 0)
    {
        // Deletion starting is a change of what the object asks for: generation moves, so
        // controllers that watch generation see it (registry/rest/delete.go BeforeDelete for
        // graceful deletion, store.go markAsDeleting otherwise).
        meta.insert("generation".into(), json!(generation + 1));
    }
    if !already_deleting || shorter {
        // The timestamp is when the object should be gone: now plus its grace period.
        let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
        meta.insert(
            "deletionTimestamp".into(),
            json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    }
}

/// What a delete that names no propagation policy does: orphan the dependents for the kinds
/// whose strategy says so (Jobs), else delete them in the background. kubectl always sends a
/// policy, API clients often do not.
pub fn default_propagation(info: &ResourceInfo) -> Propagation {
    if info.strategy.orphans_by_default {
        Propagation::Orphan
    } else {
        Propagation::Background
    }
}

/// With a status subresource, a write to the main resource keeps the stored status, and a write
/// to `/status` keeps everything but status (labels and annotations included). Public so that the
/// server validates the object that will be stored; applying it twice changes nothing more.
pub fn merge_for_target(info: &ResourceInfo, old: &Value, new: &mut Value, target: Target) {
    match (info.status_subresource, target) {
        (true, Target::Main) => keep_field(old, new, "status"),
        (true, Target::Status) | (false, Target::Status) => {
            // The real server's status strategy copies the old object and sets the new status
            // on the copy. Fields already equal to the old ones stay as they are: the server
            // merges a write before validating it and the store again when committing it, and
            // the second time (or a status write of a large object) should cost a comparison,
            // not a copy of the spec.
            let rv = new.pointer("/metadata/resourceVersion").cloned();
            // The write's managed fields are the field manager's record of this write (see
            // `managed_fields`), not part of the metadata a status write cannot change.
            let managed = new.pointer("/metadata/managedFields").cloned();
            match (new.as_object_mut(), old.as_object()) {
                (Some(fields), Some(old_fields)) => {
                    fields.retain(|key, _| key == "status" || old_fields.contains_key(key));
                    for (key, value) in old_fields {
                        if key != "status" && fields.get(key) != Some(value) {
                            fields.insert(key.clone(), value.clone());
                        }
                    }
                }
                _ => {
                    let status = new.get("status").cloned();
                    *new = old.clone();
                    if let Some(status) = status {
                        new["status"] = status;
                    }
                }
            }
            if let Some(managed) = managed
                && new.pointer("/metadata/managedFields") != Some(&managed)
            {
                new["metadata"]["managedFields"] = managed;
            }
            match rv {
                Some(rv) => new["metadata"]["resourceVersion"] = rv,
                None => {
                    if let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        metadata.remove("resourceVersion");
                    }
                }
            }
        }
        (false, Target::Main) | (_, Target::Binding) => {}
    }
}

/// Gives `new` the old object's `field` (or none, as the old one has none), copying it only
/// when it differs.
fn keep_field(old: &Value, new: &mut Value, field: &str) {
    let Some(fields) = new.as_object_mut() else {
        return;
    };
    match old.get(field) {
        Some(value) if fields.get(field) != Some(value) => {
            fields.insert(field.to_string(), value.clone());
        }
        Some(_) => {}
        None => {
            fields.remove(field);
        }
    }
}

/// uid, name, namespace, creationTimestamp and deletionTimestamp cannot be changed by a write.
fn preserve_identity(old: &Value, new: &mut Value) {
    if !new.get("metadata").is_some_and(Value::is_object) {
        new["metadata"] = json!({});
    }
    for field in [
        "uid",
        "name",
        "namespace",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old["metadata"].get(field) {
            Some(v) => new["metadata"][field] = v.clone(),
            None => {
                new["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove(field);
            }
        }
    }
    if new["metadata"]
        .get("finalizers")
        .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty))
    {
        new["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("finalizers");
    }
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
}

/// Whether anything outside `metadata` and `status` differs (compared in place: a write of a
/// large object must not copy its spec to find out).
fn spec_changed(old: &Value, new: &Value) -> bool {
    let outside = |v: &Value| {
        v.as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| *k != "metadata" && *k != "status")
                    .count()
            })
            .unwrap_or(0)
    };
    let Some(old_fields) = old.as_object() else {
        return new.is_object();
    };
    outside(old) != outside(new)
        || old_fields
            .iter()
            .filter(|(k, _)| *k != "metadata" && *k != "status")
            .any(|(k, v)| new.get(k) != Some(v))
}

/// The finalizer the namespace controller owns: a deleted namespace stays (phase `Terminating`)
/// until its contents are gone and the controller removes this entry of `spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

fn is_namespaces(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.resource == "namespaces"
}

/// A new namespace gets `spec.finalizers: [kubernetes]` and phase `Active`, as on the real server.
fn namespace_defaults(obj: &mut Value) {
    if obj.pointer("/spec/finalizers").is_none() {
        obj["spec"]["finalizers"] = json!([NAMESPACE_FINALIZER]);
    }
    obj["status"] = json!({"phase": "Active"});
    namespace_name_label(obj);
}

/// Every namespace is labelled `kubernetes.io/metadata.name` with its name, on create and on
/// every update, whatever the client sent (pkg/apis/core/v1/defaults.go
/// `SetDefaults_Namespace`, and the namespace strategy's `Canonicalize` for generated names), so
/// that namespaces can be selected by name (`namespaceSelector`s).
fn namespace_name_label(obj: &mut Value) {
    let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else {
        return;
    };
    let name = json!(name);
    let metadata = &mut obj["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"]["kubernetes.io/metadata.name"] = name;
}

/// Whether a namespace still has `spec.finalizers`, which keep it (like `metadata.finalizers`)
/// while it is being deleted.
fn has_namespace_finalizers(info: &ResourceInfo, obj: &Value) -> bool {
    is_namespaces(info)
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn resource_version_of(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// The five-character suffix `generateName` gets (the real server's alphabet has no vowels).
fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Now, as the API server writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
