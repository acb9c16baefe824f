//! The operator's HTTP endpoints for the kubelet and Prometheus: `/healthz`, `/readyz` and
//! `/metrics`. The `run` command starts it with [`serve`] next to the operator.
//!
//! - `/healthz` (liveness) answers 200 whenever the process can answer at all: the tokio runtime
//!   is alive. It checks nothing else on purpose: a liveness probe that fails when the API
//!   server is down would restart every replica during an API outage and fix nothing.
//! - `/readyz` (readiness) answers 200 once [`Readiness::set_ready`] was called with `true` and
//!   while every check added with [`Readiness::add_check`] passes, 503 otherwise. The `run`
//!   command makes a replica that runs the operator ready once the operator's watch caches hold
//!   their initial listings (a check on the handler framework's monitor). With leader election,
//!   [`crate::leader::LeaderElection::with_readiness`] sets the flag once the Lease has been
//!   read, and [`crate::leader::LeaderElection::readiness_check`] requires the synced caches
//!   only while the replica does not stand by: a standby, which runs no operator, is ready as
//!   soon as it can reach the API server and take over, the leader once its caches have synced.
//!   A ready standby is deliberate: nothing routes traffic to an operator, so readiness only
//!   gates rollouts, and a standby that were never ready would stall every rolling update (the
//!   new pod waits for the lease, the old leader is not replaced until the new pod is ready). A
//!   replica that just became the leader answers 503 until its caches sync. Whether this replica
//!   leads is the `workflow_operator_leader` metric.
//! - `/metrics` is [`Metrics::encode`] in the OpenMetrics text format.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

/// Errors starting the HTTP server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// Whether `/readyz` answers 200: a flag, and checks evaluated at every probe. Cheap to clone;
/// every clone shares the flag and the checks.
#[derive(Clone, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
    checks: Arc<RwLock<Vec<Check>>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("ready", &self.ready.load(Ordering::Acquire))
            .field(
                "checks",
                &self.checks.read().expect("readiness checks").len(),
            )
            .finish()
    }
}

impl Readiness {
    /// Not ready.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Adds a condition that readiness also requires from now on, such as the operator's caches
    /// having synced. It is called at every probe, so it must be cheap and must not block.
    pub fn add_check(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        self.checks
            .write()
            .expect("readiness checks")
            .push(Box::new(check));
    }

    /// The flag is set and every check passes.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
            && self
                .checks
                .read()
                .expect("readiness checks")
                .iter()
                .all(|check| check())
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    readiness: Readiness,
}

/// The content type Prometheus asks for when it scrapes OpenMetrics.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn router(metrics: Metrics, readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { metrics, readiness })
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, OPENMETRICS)],
        state.metrics.encode(),
    )
}

/// Binds `addr` (port 0 picks a free port), serves the three endpoints on a spawned task until
/// `shutdown` is cancelled, and returns the bound address.
///
/// # Errors
/// [`Error::Listen`] when the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Listen { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr, source })?;
    let app = router(metrics, readiness);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "telemetry HTTP server stopped");
        }
    });
    tracing::info!(addr = %local, "serving /healthz, /readyz and /metrics");
    Ok(local)
}
