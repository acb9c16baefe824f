//! The in-process controllers that make the store a cluster: the job controller ([`super::jobs`]),
//! the kubelet ([`super::kubelet`]), the claim binder ([`super::claims`]), the ServiceAccount
//! controller ([`super::service_accounts`]) and the garbage and namespace collector
//! ([`super::gc`]).
//! `DevCluster::start` calls [`spawn_controllers`] and keeps the returned [`Controllers`]; the API
//! server reads pod logs through [`Controllers::logs`] and defaults new objects with
//! [`create_hook`].
//!
//! The controllers work on the store directly (their writes are not API requests) and are
//! event-driven: each subscribes to the store's change stream, keeps what it needs to know in
//! memory, and reconciles the objects a change concerns, always against the store's current
//! state. The only timers are the ones the behaviour asks for (Job deadlines, retry back-off and
//! `ttlSecondsAfterFinished`). A controller that falls behind the change stream re-lists.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::Result;
use super::resources::{GroupResource, Registry, ResourceInfo};
use super::server::{CreateHook, PodLogs};
use super::store::{Store, WatchEvent};
use super::{claims, gc, jobs, kubelet, service_accounts, volumes};

/// How the kubelet runs pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMode {
    /// Each pod's first container runs as a local process.
    #[default]
    Real,
    /// No process: every pod succeeds after this long (for benchmarks).
    Simulated(Duration),
}

/// The running controllers. Dropping this (or cancelling the token given to
/// [`spawn_controllers`]) stops them and kills every process the kubelet started.
pub struct Controllers {
    kubelet: Arc<kubelet::Shared>,
    job_backoff: jobs::SharedBackoff,
    stop: CancellationToken,
}

impl Controllers {
    /// The output of a pod's container (stdout and stderr interleaved, the last 1 MiB), or `None`
    /// when the kubelet never ran that pod (or it is gone).
    pub fn pod_logs(&self, namespace: &str, pod: &str) -> Option<String> {
        self.kubelet.pod_logs(namespace, pod)
    }

    /// The pod logs as the API server reads them (`GET .../pods/NAME/log`). Holding this does not
    /// keep the controllers running.
    pub fn logs(&self) -> Arc<dyn PodLogs> {
        self.kubelet.clone()
    }

    /// Images' entrypoints the kubelet runs for containers without `command`, on top of its
    /// built-in ones ([`super::entrypoints`]): image (or repository) -> ENTRYPOINT.
    pub fn set_entrypoints(&self, entrypoints: std::collections::HashMap<String, Vec<String>>) {
        self.kubelet.set_entrypoints(entrypoints);
    }

    /// How long the Job controller waits before replacing a failed pod (default: Kubernetes'
    /// 10 s doubling to 6 minutes; [`jobs::JobBackoff::FAST`] for tests).
    pub fn set_job_backoff(&self, backoff: jobs::JobBackoff) {
        *self.job_backoff.lock().expect("backoff lock poisoned") = backoff;
    }

    /// Process ids of the containers running now, for diagnostics and tests.
    pub fn running_pids(&self) -> Vec<u32> {
        self.kubelet.running_pids()
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.stop.cancel();
        // The tasks may never run again (the runtime may be shutting down), so kill here.
        self.kubelet.kill_all();
    }
}

/// Starts the job controller, the kubelet and the garbage collector on the current tokio
/// runtime. They see every change made after this returns.
///
/// # Guarantees
/// No process the kubelet starts outlives the returned [`Controllers`], the `shutdown` token, or
/// (when the control plane process dies without unwinding, even by SIGKILL) the control plane
/// process itself: see [`super::kubelet`].
///
/// # Caveats
/// A process that leaves its process group on purpose (`setsid`, daemons) escapes the kill. A
/// control plane killed in the microseconds between starting a process and registering its group
/// with the reaper leaves that one process behind. Namespaces are only ever removed while these
/// controllers run (they empty them and remove the `kubernetes` finalizer).
///
/// # Panics
/// When called outside a tokio runtime.
pub fn spawn_controllers(
    store: Store,
    registry: Registry,
    pods: PodMode,
    shutdown: CancellationToken,
) -> Controllers {
    let stop = shutdown.child_token();
    let volumes = Arc::new(volumes::VolumeHost::default());
    let kubelet = kubelet::Shared::new(pods, volumes.clone());
    let job_backoff = jobs::SharedBackoff::default();
    run(
        jobs::JobController::new(store.clone(), registry.clone(), job_backoff.clone()),
        store.subscribe(),
        stop.clone(),
    );
    run(
        kubelet::Kubelet::new(
            store.clone(),
            registry.clone(),
            kubelet.clone(),
            stop.clone(),
        ),
        store.subscribe(),
        stop.clone(),
    );
    run(
        claims::ClaimBinder::new(store.clone(), &registry, volumes),
        store.subscribe(),
        stop.clone(),
    );
    run(
        service_accounts::DefaultServiceAccounts::new(store.clone(), &registry),
        store.subscribe(),
        stop.clone(),
    );
    run(
        gc::GarbageCollector::new(store.clone(), registry),
        store.subscribe(),
        stop.clone(),
    );
    let on_stop = kubelet.clone();
    let token = stop.clone();
    tokio::spawn(async move {
        token.cancelled().await;
        on_stop.kill_all();
    });
    Controllers {
        kubelet,
        job_backoff,
        stop,
    }
}

/// The create-time defaulting the real API server does for the kinds the controllers run: Jobs
/// ([`jobs::job_defaults_on_create`]) and Pods ([`kubelet::pod_defaults_on_create`]). For
/// `ApiState::on_create`.
pub fn create_hook() -> CreateHook {
    Arc::new(defaults_on_create)
}

/// See [`create_hook`].
pub fn defaults_on_create(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    match (info.group.as_str(), info.resource.as_str()) {
        ("batch", "jobs") => jobs::job_defaults_on_create(obj),
        ("", "pods") => kubelet::pod_defaults_on_create(obj),
        _ => {}
    }
    Ok(())
}

/// The resource infos every controller needs; built in, so always present.
pub(crate) fn builtin(registry: &Registry, group: &str, resource: &str) -> Arc<ResourceInfo> {
    registry
        .get(&GroupResource::new(group, resource))
        .unwrap_or_else(|| panic!("{resource} are built in"))
}

/// Keys to reconcile: now (deduplicated) or at a time (one timer per key; setting it again
/// replaces it).
pub(crate) struct Queue<K> {
    ready: BTreeSet<K>,
    timers: BTreeMap<K, Instant>,
    by_time: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Clone> Default for Queue<K> {
    fn default() -> Self {
        Self {
            ready: BTreeSet::new(),
            timers: BTreeMap::new(),
            by_time: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> Queue<K> {
    pub fn add(&mut self, key: K) {
        self.ready.insert(key);
    }

    /// Reconciles `key` at `at` (replacing its previous timer), or never again by timer.
    pub fn set_timer(&mut self, key: K, at: Option<Instant>) {
        if let Some(old) = self.timers.remove(&key) {
            self.by_time.remove(&(old, key.clone()));
        }
        if let Some(at) = at {
            self.timers.insert(key.clone(), at);
            self.by_time.insert((at, key));
        }
    }

    /// The next key to reconcile, moving due timers to the ready set first.
    fn pop(&mut self, now: Instant) -> Option<K> {
        while let Some((at, _)) = self.by_time.first() {
            if *at > now {
                break;
            }
            let (_, key) = self.by_time.pop_first().expect("non-empty");
            self.timers.remove(&key);
            self.ready.insert(key);
        }
        self.ready.pop_first()
    }

    fn next_timer(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }
}

/// One controller: what it learns from each change, how it rebuilds its knowledge, and how it
/// reconciles one key.
pub(crate) trait Reconciler: Send + 'static {
    type Key: Ord + Clone + Send;

    /// Records one change and queues the keys it concerns.
    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<Self::Key>);

    /// Rebuilds what the controller knows from the store (at start and after falling behind).
    fn resync(&mut self, queue: &mut Queue<Self::Key>);

    /// Brings one key's objects where they should be; may set the key's timer.
    fn reconcile(&mut self, key: Self::Key, queue: &mut Queue<Self::Key>);
}

/// Runs a controller until `stop`: observe every change, batch what is already waiting, then
/// reconcile each queued key once.
fn run<R: Reconciler>(
    mut reconciler: R,
    mut events: broadcast::Receiver<Arc<WatchEvent>>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut queue = Queue::default();
        reconciler.resync(&mut queue);
        loop {
            while let Some(key) = queue.pop(Instant::now()) {
                if stop.is_cancelled() {
                    return;
                }
                reconciler.reconcile(key, &mut queue);
            }
            let timer = queue.next_timer();
            let first = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                event = events.recv() => event,
                _ = sleep_until(timer), if timer.is_some() => continue,
            };
            let mut next = first;
            let mut lagged = false;
            loop {
                match next {
                    Ok(event) => reconciler.observe(&event, &mut queue),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "controller fell behind the store; re-listing");
                        lagged = true;
                    }
                    Err(RecvError::Closed) => return,
                }
                next = match events.try_recv() {
                    Ok(event) => Ok(event),
                    Err(TryRecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => Err(RecvError::Closed),
                };
            }
            if lagged {
                reconciler.resync(&mut queue);
            }
        }
    });
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads `metadata.ownerReferences[*].uid`.
pub(crate) fn owner_uids(obj: &Value) -> HashSet<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_deduplicates_and_fires_timers_in_order() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.add("a");
        queue.add("a");
        queue.set_timer("b", Some(now + Duration::from_secs(2)));
        queue.set_timer("c", Some(now + Duration::from_secs(1)));
        assert_eq!(queue.pop(now), Some("a"));
        assert_eq!(queue.pop(now), None);
        assert_eq!(queue.next_timer(), Some(now + Duration::from_secs(1)));
        assert_eq!(queue.pop(now + Duration::from_secs(1)), Some("c"));
        assert_eq!(queue.pop(now + Duration::from_secs(1)), None);
        assert_eq!(queue.pop(now + Duration::from_secs(3)), Some("b"));
    }

    #[test]
    fn setting_a_timer_again_replaces_it() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.set_timer("a", Some(now + Duration::from_secs(1)));
        queue.set_timer("a", Some(now + Duration::from_secs(5)));
        assert_eq!(queue.pop(now + Duration::from_secs(2)), None);
        queue.set_timer("a", None);
        assert_eq!(queue.next_timer(), None);
        assert_eq!(queue.pop(now + Duration::from_secs(10)), None);
    }

    #[test]
    fn defaults_apply_only_to_jobs_and_pods() {
        let registry = Registry::with_builtins();
        let cm = builtin(&registry, "", "configmaps");
        let mut obj = serde_json::json!({"metadata": {"name": "x", "uid": "u"}});
        let before = obj.clone();
        defaults_on_create(&cm, &mut obj).unwrap();
        assert_eq!(obj, before);
        let pods = builtin(&registry, "", "pods");
        defaults_on_create(&pods, &mut obj).unwrap();
        assert_eq!(obj["status"]["phase"], "Pending");
    }
}
