//! The pure core of workflow-operator: what a `WorkFlow` is and what should happen to it, as
//! plain data in and plain data out. It knows no Kubernetes client and no async runtime (the
//! compiler holds that: neither is a dependency), so the operator's decisions are unit-tested
//! here without a cluster, and the operator crate above it does the I/O.
//!
//! - [`agent`]: the step agent's task and report (scripts, results, outputs from files).
//! - [`crd`]: the `WorkFlow` custom resource (spec, status), the generated CRD YAML, and what
//!   kind of step each step is ([`crd::StepKind`]).
//! - [`convert`]: Argo Workflows' documents as ours (`workflow-operator convert`), and the table
//!   docs/argo.md is generated from.
//! - [`cron`]: CronWorkFlow schedules (time zones, DST, `@every`) and what a tick starts.
//! - [`trigger`]: what a delivery to a WorkFlowTrigger (a webhook, a bucket notification)
//!   starts: its verification, filter, parameters and the run named for its id.
//! - [`lifecycle`]: the lifecycle as one explicit transition table, with DOT/Mermaid rendering.
//! - [`fields`]: what each API field means to a running workflow (part of the run or not,
//!   followed by the incremental planner or not), decided once per type.
//! - [`http_call`]: HTTP steps (`http`): their checks, the agent's request, the success
//!   condition.
//! - [`resource_action`]: resource steps (`resource`): their checks, the agent's task, the
//!   conditions over the object and the outputs read from it.
//! - [`names`]: deterministic Job names, label values and run ids.
//! - [`labels`]: the labels and annotations of step Jobs.
//! - [`dag`]: step graph validation, topological order, ready set, incremental progress.
//! - [`data_flow`]: what steps read of each other (outputs, `when`), checked once per spec.
//! - [`fan_out`]: a step run once per item (`withItems`, `withParam`, `withSequence`) and the
//!   whole DAG run `spec.runs` times: compiled fan-outs, items and instance names.
//! - [`outputs`]: a step's outputs (its termination message) and `{{steps.X.outputs.K}}`.
//! - [`when`]: a step's `when` condition, a CEL expression over its upstream outputs.
//! - [`workflow_failures`]: Argo's `{{workflow.failures}}`, for exit steps' Jobs and `when`s.
//! - [`template`]: templates and parameters, expanded into plain steps before planning.
//! - [`rules`]: rules on a run's metrics (`spec.rules`), decided on each pass of the planner.
//! - [`plan`]: the decision function `(workflow, observed Jobs, now) -> actions + status`.
//! - [`incremental`]: the planner updated by one Job change in O(degree), for Job events.
//! - [`jobs`]: building a step's Job; reading Jobs back as plain data; relabel patches.
//! - [`kueue`]: Kueue at workflow scope (one Workload per run, its peak footprint) and
//!   MultiKueue's `managedBy` contract.
//! - [`job_summary`]: a Job as the operator keeps it in memory (no pod template).
//! - [`object_instance`]: which step instance a Job or pod runs, read back from its labels.
//! - [`failure_cause`]: why a step failed or did not start, from its pods and Events.
//! - [`step_view`]: where each step stands (phase, times, attempts, exit code), for `get`.
//! - [`pods_gone`]: why a step that ran has no pod left to read the log of.
//! - `testing` (feature `testing`): fixture builders for unit and integration tests.
#![forbid(unsafe_code)]
// Every module says by name what it takes from where: a glob hides which stage uses which
// (and the import-circle check, `scripts/module-cycles.py`, sees only named paths). Clippy
// allows `use super::*` in a `#[cfg(test)]` module, and public re-exports.
#![deny(clippy::wildcard_imports)]

pub mod agent;
pub mod cache;
pub mod convert;
pub mod crd;
pub mod cron;
pub mod custom_metrics;
pub mod dag;
pub mod data_flow;
pub mod failure_cause;
pub mod fan_out;
pub mod fields;
pub mod http_call;
pub mod incremental;
pub mod job_summary;
pub mod jobs;
pub mod kueue;
pub mod labels;
pub mod lifecycle;
pub mod locks;
pub mod names;
pub mod object_instance;
pub mod outputs;
pub mod plan;
pub mod pods_gone;
pub mod resource_action;
pub mod retry;
pub mod rules;
pub mod sequence_format;
pub mod shards;
pub mod step_view;
pub mod template;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod trigger;
pub mod when;
pub mod workflow_failures;

pub use crd::{WorkFlow, WorkFlowSpec, WorkFlowStatus};
