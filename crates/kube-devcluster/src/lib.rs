//! The embedded Kubernetes control plane: an API server, a job controller, a kubelet that runs
//! each pod's command as a local process, and a garbage collector, all in one process. It knows
//! nothing of workflows: it serves whatever CRDs are installed. `make demo`, the integration
//! tests and the benchmarks run on it (DESIGN section 5).
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
//! The server speaks plain HTTP on loopback without authentication: it is a local tool for
//! trying, testing and measuring, not for production.
#![forbid(unsafe_code)]

pub mod admission;
pub mod builtin_schemas;
mod claims;
mod cluster;
pub mod controllers;
pub mod entrypoints;
pub mod error;
pub mod events;
pub mod faults;
pub mod gc;
pub mod jobs;
pub mod kubelet;
pub mod last_applied;
pub mod list_options;
pub mod managed_fields;
pub mod merge_keys;
pub mod metrics;
pub mod openapi;
pub mod openapi_v2;
pub mod patch;
pub mod path;
pub mod pod_defaults;
pub mod pod_deletion;
pub mod pod_env;
pub mod pod_logs;
pub mod protobuf;
pub(crate) mod recorder;
pub mod representation;
pub mod resources;
pub mod secrets;
pub mod selector;
pub mod server;
pub mod service_accounts;
pub mod store;
pub mod table;
pub mod termination_message;
pub mod typed_decode;
pub(crate) mod volumes;
pub mod watch;
pub mod workload_validation;
pub use cluster::{DevCluster, DevClusterOptions, Error, PodMode, client_for};
#[cfg(feature = "testing")]
pub mod testing;
// Issue 13, requests answered as the real API server answers them.
pub mod auth_reviews;
pub mod custom_resources;
pub mod dry_run;
pub mod field_labels;
pub mod namespace_lifecycle;
pub mod query;
