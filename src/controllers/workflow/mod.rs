//! The workflow controller: the client side above the pure core (`workflow-operator-core`,
//! which holds the CRD types, the DAG, the planner and Job building).
//!
//! - [`operator`]: the handlers' registration and the operator's start-up.
//! - [`handlers`]: what each event does; every reconcile is one pass of the stages below.
//! - The pass, stage by stage: `resolve` (templates) and `repository` (the artifact
//!   repository), `observe`, `decide`, `gate`, `apply`, `record` (with
//!   `status_policy`, the choice of how the status is written, and `step_events`); what is
//!   remembered between passes is `memory`.
//! - `shared`: what the handlers share, below every stage.
//! - [`status_writer`]: statuses written in order, some behind the passes.
//! - [`step_queue`]: the built-in step queue (`--max-running-steps`), fed by a watch of the step
//!   Jobs.
//! - [`lock_book`]: locks between workflows (`synchronization`), held in Leases, fed by a watch
//!   of them; the `locks` stage takes and gives them back.
//! - `kueue_gate`: Kueue's admission of a whole run (`queueScope: Workflow`), in the `gate`
//!   stage: the run's Workload, its eviction and its end.
//! - [`kueue_metrics`]: the Kueue path's queue metrics, from a watch of the Jobs Kueue queues.
//! - [`failure_cause`]: reading a failed or unstarted step's pods and Events.
//! - [`step_outputs`]: reading a step's outputs from its pod; `daemons`: a ready daemon step's
//!   pod's IP, recorded on its Job.
//! - [`cleanup`]: the clean-up of finished work (TTL, `podCleanup`).
//! - [`metrics`]: the operator's workflow metrics.

mod apply;
mod artifact_gc;
mod cache;
pub mod cleanup;
mod custom_metrics;
mod daemons;
mod decide;
mod error;
pub mod failure_cause;
mod gate;
pub mod handlers;
mod kueue_gate;
pub mod kueue_metrics;
pub mod lock_book;
mod locks;
mod memory;
pub mod metrics;
mod observe;
pub mod operator;
mod pass;
mod record;
mod repository;
mod resolve;
mod shared;
mod spec_change;
mod status_policy;
pub mod status_writer;
mod step_events;
pub mod step_outputs;
pub mod step_queue;
