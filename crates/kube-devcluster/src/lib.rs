//! The embedded Kubernetes control plane: an API server, a job controller, a scheduler placing
//! pods on its one Node, a kubelet that runs each pod's command as a local process, and a
//! garbage collector, all in one process. It knows nothing of workflows: it serves whatever CRDs
//! are installed. `make demo`, the integration tests and the benchmarks run on it
//! (docs/architecture.md, "kube-devcluster: the embedded control plane").
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use kube_devcluster::{DevCluster, DevClusterOptions};
//! let cluster = DevCluster::start(DevClusterOptions::default()).await?;
//! let client: kube::Client = cluster.client();
//! // ... the cluster stops when `cluster` is dropped.
//! # Ok(()) }
//! ```
//!
//! The server speaks plain HTTP on loopback, by default without authentication or
//! authorization: it is a local tool for trying, testing and measuring, not for production.
//! `DevClusterOptions::rbac` turns on what a test of permissions needs: each pod's own token,
//! its service account as the user of requests carrying it, impersonation, and RBAC with the
//! API server's 401 and 403 (requests without a token stay the admin's).
//!
//! Its modules mirror Kubernetes' components, each importing only the ones listed before it:
//! `api` (errors and the registry of served resources, as apimachinery), `storage` (the object
//! store, selectors), `registry` (per-kind rules both the API server and the controllers apply),
//! `runtime` (the reconcile loop and event recorder the controllers share), `scheduler`,
//! `kubelet` (and its Node), `controllers` (Jobs, garbage collection, claims, service accounts;
//! they also start the scheduler and the kubelet), `apiserver`, and `cluster`, which starts them
//! together. `scripts/module-cycles.py` checks that no module imports one that imports it back.
// Unsafe code is denied except where a module allows it and says why: the kubelet's sandbox
// setup runs in a forked child (`pre_exec`), which the standard library marks unsafe.
#![deny(unsafe_code)]

mod api;
mod apiserver;
mod cluster;
mod controllers;
mod kubelet;
mod registry;
mod runtime;
mod scheduler;
mod storage;
#[cfg(feature = "testing")]
pub mod testing;

pub use api::resources;
pub use apiserver::{faults, metrics};
pub use cluster::{DevCluster, DevClusterOptions, Error, PodMode, client_for};
pub use kubelet::{RestartBackoff, entrypoints};
pub use storage::store;

/// The Job controller's settings ([`DevClusterOptions::job_backoff`]).
pub mod jobs {
    pub use crate::controllers::jobs::JobBackoff;
}

/// The parts [`DevCluster::start`] assembles, for tests that assemble them otherwise (the API
/// server on a listener of their own, the controllers stopped at will).
pub mod parts {
    pub use crate::apiserver::server::{ApiState, router};
    pub use crate::controllers::{Controllers, spawn_controllers};
    pub use crate::registry::create_hook;
}
