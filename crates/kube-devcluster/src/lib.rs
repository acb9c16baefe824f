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

#[cfg(feature = "server")]
pub mod admission;
#[cfg(feature = "server")]
pub mod builtin_schemas;
#[cfg(feature = "server")]
mod claims;
#[cfg(feature = "server")]
mod cluster;
#[cfg(feature = "server")]
pub mod controllers;
#[cfg(feature = "server")]
pub mod entrypoints;
#[cfg(feature = "server")]
pub mod error;
#[cfg(feature = "server")]
pub mod events;
#[cfg(feature = "server")]
pub mod faults;
pub mod field_error;
#[cfg(feature = "server")]
pub mod gc;
#[cfg(feature = "server")]
pub mod jobs;
#[cfg(feature = "server")]
pub mod kubelet;
#[cfg(feature = "server")]
pub mod last_applied;
#[cfg(feature = "server")]
pub mod list_options;
#[cfg(feature = "server")]
pub mod managed_fields;
#[cfg(feature = "server")]
pub mod merge_keys;
#[cfg(feature = "server")]
pub mod metrics;
pub mod object_meta;
#[cfg(feature = "server")]
pub mod openapi;
#[cfg(feature = "server")]
pub mod openapi_v2;
#[cfg(feature = "server")]
pub mod patch;
#[cfg(feature = "server")]
pub mod path;
#[cfg(feature = "server")]
pub mod pod_defaults;
#[cfg(feature = "server")]
pub mod pod_deletion;
#[cfg(feature = "server")]
pub mod pod_env;
#[cfg(feature = "server")]
pub mod pod_logs;
#[cfg(feature = "server")]
pub mod protobuf;
#[cfg(feature = "server")]
pub(crate) mod recorder;
#[cfg(feature = "server")]
pub mod representation;
#[cfg(feature = "server")]
pub mod resources;
pub mod schema;
pub mod schema_rules;
#[cfg(feature = "server")]
pub mod secrets;
#[cfg(feature = "server")]
pub mod selector;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod service_accounts;
#[cfg(feature = "server")]
pub mod store;
#[cfg(feature = "server")]
pub mod table;
#[cfg(feature = "server")]
pub mod termination_message;
#[cfg(feature = "server")]
pub mod typed_decode;
#[cfg(feature = "server")]
pub(crate) mod volumes;
#[cfg(feature = "server")]
pub mod watch;
#[cfg(feature = "server")]
pub mod workload_validation;
#[cfg(feature = "server")]
pub use cluster::{DevCluster, DevClusterOptions, Error, PodMode, client_for};
#[cfg(feature = "testing")]
pub mod testing;
// Issue 13, requests answered as the real API server answers them.
#[cfg(feature = "server")]
pub mod auth_reviews;
#[cfg(feature = "server")]
pub mod custom_resources;
#[cfg(feature = "server")]
pub mod dry_run;
#[cfg(feature = "server")]
pub mod field_labels;
#[cfg(feature = "server")]
pub mod namespace_lifecycle;
#[cfg(feature = "server")]
pub mod query;
