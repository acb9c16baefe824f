//! workflow-operator: runs DAG workflows of container steps on Kubernetes.
//!
//! Layers, each importing only the ones below it:
//! - [`cli`]: the clap commands (`run`, `dev`, `crd`, `validate`, `graph`, `lifecycle`, `bench`).
//! - [`controllers`]: the operator's controllers (today the workflow controller): what each
//!   event does, as a pipeline of stages over the pure core.
//! - [`kueue_standin`]: a stand-in for Kueue's admission by nominal quota, for `dev --kueue`
//!   and the tests (not Kueue).
//! - [`leader`]: leader election on a Lease, so one replica of several does the work.
//! - [`shards`]: several replicas sharing the work by shards (`run --shards`), each holding its
//!   shards through Leases and caching only their objects.
//! - [`step_agent`]: the step agent's program (`workflow-agent`), run inside a step's pod.
//! - [`telemetry`]: metrics and health endpoints.
//! - [`triggers`]: the WorkFlowTrigger receiver (`--triggers-addr`): a delivery in, its run
//!   created (exactly one per delivery id), an answer the sender can act on.
//! - [`web`]: the web view of the workflows (`--web-addr`), read from the operator's mirror.
//! - [`artifacts`]: files and directories passed between steps through an S3-compatible
//!   bucket (the step agent's and the operator's library), and the store `dev` runs.
//! - [`bench`](mod@bench): the end-to-end benchmark (`workflow-operator bench`): the control plane plus the
//!   operator as a separate process, measured (the `dev` feature).
//!
//! Below them, crates of their own in this workspace: `workflow-operator-core`, the pure operator
//! (the API types, the DAG, the planner, Job building; no client, no async runtime);
//! `kube-kopf`, the Kopf-style handler framework, generic over any `kube::Resource`;
//! `kube-devcluster`, the embedded Kubernetes control plane. The last two know no workflows.
#![forbid(unsafe_code)]

pub mod artifacts;
#[cfg(feature = "dev")]
pub mod bench;
pub mod cli;
pub mod controllers;
pub mod kueue_standin;
pub mod leader;
pub mod shards;
pub mod step_agent;
pub mod telemetry;
pub mod triggers;
pub mod web;
