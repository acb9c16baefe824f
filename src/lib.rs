//! workflow-operator: runs DAG workflows of container steps on Kubernetes.
//!
//! Layers, each importing only the ones below it (see `DESIGN.md` section 4):
//! - [`cli`]: the clap commands (`run`, `dev`, `crd`, `validate`, `graph`, `lifecycle`, `bench`).
//! - [`workflow`]: the operator itself: CRD types, DAG, planner, handlers.
//! - [`telemetry`]: metrics, health endpoints and leader election.
//! - [`web`]: the web view of the workflows (`--web-addr`), read from the operator's mirror.
//! - [`bench`]: the end-to-end benchmark (`workflow-operator bench`): the control plane plus the
//!   operator as a separate process, measured (the `dev` feature).
//!
//! Below them, crates of their own in this workspace: `kube-kopf`, the Kopf-style handler
//! framework, generic over any `kube::Resource`; `kube-devcluster`, the embedded Kubernetes
//! control plane. Neither knows workflows.
#![forbid(unsafe_code)]

#[cfg(feature = "dev")]
pub mod bench;
pub mod cli;
pub mod telemetry;
pub mod web;
pub mod workflow;
