//! [`DevCluster`]: the control plane's parts started together (API server, controllers, kubelet,
//! garbage collector) on a loopback port, with a kubeconfig that points at it; with
//! [`DevClusterOptions::rbac`], the bootstrap RBAC policy stored and the token store the kubelet
//! fills and the API server authenticates by shared between them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::api::resources::{GroupResource, Registry};
use crate::apiserver::server::ApiState;
use crate::apiserver::{faults, metrics, server, watch};
use crate::controllers;
use crate::controllers::Controllers;
pub use crate::kubelet::PodMode;
use crate::kubelet::tokens::ServiceAccountTokens;
use crate::storage::store;
use crate::storage::store::{HistoryLimits, Store};

/// Errors starting the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid control plane url {0:?}: {1}")]
    Url(String, #[source] http::uri::InvalidUri),
    #[error("cannot build a client for the control plane: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot make the directory of the pods' kubeconfigs: {0}")]
    Credentials(#[source] std::io::Error),
}

/// How to start the control plane.
#[derive(Debug, Clone, Default)]
pub struct DevClusterOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Where to write the kubeconfig; `None` writes one into a temporary directory.
    pub kubeconfig: Option<PathBuf>,
    /// How much change history watches can resume from.
    pub history: HistoryLimits,
    /// Whether pods run their command as local processes or are simulated.
    pub pods: PodMode,
    /// How often watches that allow bookmarks get one; `None` is
    /// `DEFAULT_BOOKMARK_INTERVAL` (1 s).
    pub bookmark_interval: Option<Duration>,
    /// Entrypoints of images for containers without `command`, by image (`my/app:v1`) or
    /// repository (`my/app`), on top of the built-in ones (`hello-world`, `busybox`, `alpine`,
    /// `ubuntu`, `debian`, `python`); see [`crate::entrypoints`].
    pub entrypoints: std::collections::HashMap<String, Vec<String>>,
    /// How long the Job controller waits before replacing a failed pod: Kubernetes' 10 s
    /// doubling to 6 minutes by default; [`JobBackoff::FAST`](crate::jobs::JobBackoff::FAST) for
    /// tests and demos.
    pub job_backoff: crate::controllers::jobs::JobBackoff,
    /// How long the kubelet waits before it restarts a container that ended: the kubelet's
    /// back-off by default (at once, then 10 s doubling to 5 minutes, `CrashLoopBackOff`
    /// meanwhile); [`RestartBackoff::FAST`](crate::RestartBackoff::FAST) for tests.
    pub restart_backoff: crate::kubelet::RestartBackoff,
    /// How long an Event lives after its last write (kube-apiserver's `--event-ttl`); `None` is
    /// its default, `DEFAULT_EVENT_TTL` (one hour).
    pub event_ttl: Option<Duration>,
    /// Authentication and RBAC, off by default (every request is the admin's). On, each pod's
    /// containers get a kubeconfig of their own with a token for the pod, requests with such a
    /// token are its service account's, and RBAC (Roles, ClusterRoles and their bindings, and
    /// the bootstrap policy's roles for every authenticated user) decides what they may do:
    /// 403 Forbidden otherwise, 401 for a token no pod holds. Requests without a token (the
    /// written kubeconfig's, [`DevCluster::client`]) stay the admin's, in `system:masters`.
    pub rbac: bool,
}

/// A running control plane; stops (and kills every process it started) when dropped.
pub struct DevCluster {
    base_url: String,
    kubeconfig: PathBuf,
    store: Store,
    registry: Registry,
    faults: Arc<faults::Faults>,
    requests: Arc<metrics::RequestCounters>,
    watches: Arc<watch::WatchHub>,
    shutdown: CancellationToken,
    controllers: Controllers,
    _tempdir: Option<tempfile::TempDir>,
}

impl DevCluster {
    /// Starts the API server on 127.0.0.1 and writes a kubeconfig for it. The `default`,
    /// `kube-system` and `kube-public` namespaces exist from the start.
    pub async fn start(options: DevClusterOptions) -> Result<Self, Error> {
        let store = Store::new(options.history);
        let registry = Registry::with_builtins();
        let namespaces = registry
            .get(&GroupResource::new("", "namespaces"))
            .expect("built in");
        for name in ["default", "kube-system", "kube-public"] {
            store
                .create(&namespaces, "", json!({"metadata": {"name": name}}))
                .expect("a fresh store accepts the built-in namespaces");
        }
        let shutdown = CancellationToken::new();
        let controllers = controllers::spawn_controllers(
            store.clone(),
            registry.clone(),
            options.pods,
            shutdown.clone(),
        );
        controllers.set_entrypoints(options.entrypoints.clone());
        controllers.set_job_backoff(options.job_backoff);
        controllers.set_restart_backoff(options.restart_backoff);
        tokio::spawn(crate::registry::events::expire_events(
            store.clone(),
            registry.clone(),
            options
                .event_ttl
                .unwrap_or(crate::registry::events::DEFAULT_EVENT_TTL),
            shutdown.clone(),
        ));
        let mut state = ApiState::new(store.clone(), registry.clone(), shutdown.clone());
        state.logs = Some(controllers.logs());
        state.exec = Some(controllers.exec());
        state.on_create = Some(crate::registry::create_hook());
        if let Some(interval) = options.bookmark_interval {
            state.bookmark_interval = interval;
        }
        let tokens = options.rbac.then(|| {
            crate::apiserver::rbac::bootstrap(&store, &registry);
            Arc::new(ServiceAccountTokens::default())
        });
        state.service_account_tokens = tokens.clone();
        let (faults, requests, watches) = (
            state.faults.clone(),
            state.requests.clone(),
            state.watches.clone(),
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], options.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Listen { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| Error::Listen { addr, source })?;
        let base_url = format!("http://{local}");
        let app = server::router(state);
        let stop = shutdown.clone();
        // Go's net package, and so the real API server, sets TCP_NODELAY on every connection.
        // Without it, Nagle's algorithm holds each small watch event behind the peer's delayed
        // ACK: up to 40 ms of added latency per event.
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "could not set TCP_NODELAY");
            }
        });
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "devcluster API server stopped");
            }
        });
        let (kubeconfig, tempdir) = match options.kubeconfig {
            Some(path) => (path, None),
            None => {
                let dir = tempfile::tempdir().map_err(|source| Error::Kubeconfig {
                    path: "<tempdir>".into(),
                    source,
                })?;
                (dir.path().join("kubeconfig"), Some(dir))
            }
        };
        std::fs::write(&kubeconfig, kubeconfig_yaml(&base_url)).map_err(|source| {
            Error::Kubeconfig {
                path: kubeconfig.clone(),
                source,
            }
        })?;
        controllers.set_kubeconfig(kubeconfig.clone());
        if let Some(tokens) = tokens {
            (controllers.give_pods_tokens(tokens, base_url.clone())).map_err(Error::Credentials)?;
        }
        Ok(Self {
            base_url,
            kubeconfig,
            store,
            registry,
            faults,
            requests,
            watches,
            shutdown,
            controllers,
            _tempdir: tempdir,
        })
    }

    /// A client for the API, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        client_for(&self.base_url).expect("a client for a parsed loopback URL")
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The kubeconfig file pointing at this control plane.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The object store, for the in-process controllers and fault injection.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Pids of the pod processes running now (for tests that check nothing is left behind).
    pub fn running_pids(&self) -> Vec<u32> {
        self.controllers.running_pids()
    }

    /// Fault injection: error rates per verb, latency, watches closed periodically.
    pub fn faults(&self) -> &faults::Faults {
        &self.faults
    }

    /// The API requests served so far, per verb, resource, user agent and status code (also at
    /// `/debug/requests`).
    pub fn requests(&self) -> metrics::RequestCounts {
        self.requests.snapshot()
    }

    /// Starts counting requests from zero.
    pub fn reset_requests(&self) {
        self.requests.reset();
    }

    /// Closes every open watch; clients resume from their last resourceVersion.
    pub fn close_watches(&self) {
        self.watches.close_all();
    }

    /// Number of watches open now.
    pub fn open_watches(&self) -> usize {
        self.watches.watch_count()
    }

    /// Forces 410 Gone: forgets the change history (as an etcd compaction does) and closes every
    /// watch, so every client must re-list.
    pub fn force_gone(&self) {
        // A real cluster's resourceVersion always moves on (leases are renewed every few
        // seconds), so a compaction leaves every resourceVersion a client holds behind. Here
        // the control plane renews a lease of its own first, for the same effect on a quiet one.
        let leases = self
            .registry
            .get(&GroupResource::new("coordination.k8s.io", "leases"))
            .expect("leases are built in");
        let renew_time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let lease = json!({
            "metadata": {"name": "devcluster-compaction"},
            "spec": {"holderIdentity": "devcluster", "renewTime": renew_time},
        });
        let renewed = self
            .store
            .update(
                &leases,
                "kube-system",
                "devcluster-compaction",
                lease.clone(),
                store::Target::Main,
            )
            .or_else(|_| self.store.create(&leases, "kube-system", lease));
        if let Err(error) = renewed {
            tracing::warn!(%error, "cannot renew the compaction lease");
        }
        self.store.compact();
        self.watches.close_all();
    }

    /// Stops serving and kills every process the control plane started.
    pub fn stop(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A kube client for a control plane at `base_url`, without credentials.
pub fn client_for(base_url: &str) -> Result<kube::Client, Error> {
    let url = base_url
        .parse()
        .map_err(|e: http::uri::InvalidUri| Error::Url(base_url.to_string(), e))?;
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    kube::Client::try_from(config).map_err(Error::Client)
}

fn kubeconfig_yaml(base_url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: devcluster\n  cluster:\n    server: {base_url}\nusers:\n- name: devcluster\n  user: {{}}\ncontexts:\n- name: devcluster\n  context:\n    cluster: devcluster\n    user: devcluster\n    namespace: default\ncurrent-context: devcluster\n"
    )
}
