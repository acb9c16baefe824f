//! workflow-operator: runs DAG workflows of container steps on Kubernetes.
//!
//! Layers, each importing only the ones below it (see `DESIGN.md` section 4):
//! - [`cli`]: the clap commands (`run`, `dev`, `crd`, `validate`, `graph`, `lifecycle`, `bench`).
//! - [`workflow`]: the operator itself: CRD types, DAG, planner, handlers.
//! - [`kopf`]: the Kopf-style handler framework, generic over any `kube::Resource`.
//! - [`devcluster`]: the embedded Kubernetes control plane; knows nothing of workflows.
//! - [`bench`]: the end-to-end benchmark (`workflow-operator bench`): the control plane plus the
//!   operator as a separate process, measured.
#![forbid(unsafe_code)]

pub mod bench;
pub mod cli;
pub mod devcluster;
pub mod kopf;
pub mod telemetry;
pub mod workflow;
