//! The WorkFlow operator: CRD types, DAG, planner, lifecycle and handlers.
//!
//! The pure core, which knows no client and does no I/O:
//! - [`crd`]: the `WorkFlow` custom resource (spec, status) and the generated CRD YAML.
//! - [`dag`]: step graph validation, topological order, ready set, incremental progress.
//! - [`data_flow`]: what steps read of each other (outputs, `when`), checked once per spec.
//! - [`fan_out`]: a step run once per item (`withItems`, `withParam`, `withSequence`) and the
//!   whole DAG run `spec.runs` times: compiled fan-outs, items and instance names.
//! - [`lifecycle`]: the lifecycle as one explicit transition table, with DOT/Mermaid rendering.
//! - [`names`]: deterministic Job names, label values and run ids.
//! - [`object_instance`]: which step instance a Job or pod runs, read back from its labels.
//! - [`jobs`]: building a step's Job; reading Jobs back as plain data; relabel patches.
//! - [`job_summary`]: a Job as the operator keeps it in memory (no pod template).
//! - [`plan`]: the decision function `(workflow, observed Jobs, now) -> actions + status`.
//! - [`incremental`]: the planner updated by one Job change in O(degree), for Job events.
//! - [`outputs`]: a step's outputs (its termination message) and `{{steps.X.outputs.K}}`.
//! - [`when`]: a step's `when` condition, a CEL expression over its upstream outputs.
//! - [`step_view`]: where each step stands (phase, times, attempts, exit code), for `get`.
//! - [`testing`]: fixture builders for unit and integration tests.

pub mod crd;
pub mod dag;
pub mod data_flow;
pub mod fan_out;
pub mod incremental;
pub mod job_summary;
pub mod jobs;
pub mod lifecycle;
pub mod names;
pub mod object_instance;
pub mod outputs;
pub mod plan;
pub mod step_view;
pub mod testing;
pub mod when;

pub use crd::{WorkFlow, WorkFlowSpec, WorkFlowStatus};

// The built-in queue (`--max-running-steps`): a gate fed by a watch of the step Jobs.
pub mod admission;
// The Kueue path's queue metrics, from a watch of the Jobs Kueue queues.
pub mod kueue_queue;

// The operator: the handlers and their registration (client side; above the pure core), what
// it reads to explain a failure, the outputs it reads from pods, and the clean-up of finished work (TTL, `podCleanup`).
pub mod cleanup;
pub mod failure_cause;
pub mod handlers;
pub mod metrics;
pub mod operator;
pub mod status_writer;
pub mod step_outputs;
