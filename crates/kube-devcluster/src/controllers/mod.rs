//! The in-process controllers that make the store a cluster, as kube-controller-manager's are:
//! the job controller ([`jobs`]), the claim binder ([`claims`]), the ServiceAccount controller
//! ([`service_accounts`]) and the garbage and namespace collector ([`gc`]); and the
//! [`scheduler`](crate::scheduler) and the node's [`kubelet`](crate::kubelet), which
//! [`spawn_controllers`] starts with them once the kubelet has registered its Node
//! ([`crate::kubelet::node`]).
//! `DevCluster::start` calls [`spawn_controllers`] and keeps the returned [`Controllers`]; the API
//! server reads pod logs through [`Controllers::logs`].
//!
//! Each is a [`Reconciler`](crate::runtime::Reconciler) on the store's change stream
//! ([`crate::runtime`]); they write to the store directly, applying the per-kind rules of
//! [`crate::registry`] that the API server would apply to their writes.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::api::resources::Registry;
use crate::kubelet::pod_logs::PodLogs;
use crate::kubelet::{self, PodMode, volumes};
use crate::runtime::run;
use crate::scheduler;
use crate::storage::store::Store;

pub mod claims;
pub mod gc;
pub mod jobs;
pub mod service_accounts;

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

    /// The kubelet as the API server's exec handler runs commands in containers
    /// (`.../pods/NAME/exec`). Holding this does not keep the controllers running.
    pub fn exec(&self) -> Arc<dyn crate::kubelet::exec::PodExec> {
        self.kubelet.clone()
    }

    /// Images' entrypoints the kubelet runs for containers without `command`, on top of its
    /// built-in ones ([`crate::kubelet::entrypoints`]): image (or repository) -> ENTRYPOINT.
    pub fn set_entrypoints(&self, entrypoints: std::collections::HashMap<String, Vec<String>>) {
        self.kubelet.set_entrypoints(entrypoints);
    }

    /// The kubeconfig file the kubelet names in every container's `$KUBECONFIG`, so a pod
    /// reaches the API server as a real cluster's pod does with its service account.
    pub fn set_kubeconfig(&self, path: std::path::PathBuf) {
        self.kubelet.set_kubeconfig(path);
    }

    /// From now on the kubelet gives each pod a token of its own in `tokens` and a kubeconfig
    /// with it for the API server at `server`, instead of the control plane's kubeconfig
    /// (`kubelet::tokens`).
    ///
    /// # Errors
    /// When the directory for the pods' kubeconfigs cannot be made.
    pub fn give_pods_tokens(
        &self,
        tokens: Arc<kubelet::tokens::ServiceAccountTokens>,
        server: String,
    ) -> std::io::Result<()> {
        self.kubelet.give_pods_tokens(tokens, server)
    }

    /// How long the kubelet waits before it restarts a container (default: the kubelet's, at
    /// once, then 10 s doubling to 5 minutes; [`kubelet::RestartBackoff::FAST`] for tests).
    pub fn set_restart_backoff(&self, backoff: kubelet::RestartBackoff) {
        self.kubelet.set_restart_backoff(backoff);
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
/// process itself: see the kubelet (`src/kubelet/mod.rs`).
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
    let node = kubelet::node::register(&store, &registry);
    run(
        scheduler::Scheduler::new(store.clone(), registry.clone(), node.clone()),
        store.subscribe(),
        stop.clone(),
    );
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
            node,
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
