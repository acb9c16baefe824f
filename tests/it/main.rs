//! The operator's integration tests, one binary (so the control plane is linked once, not once per
//! file): a module per area. Run one area with a name filter, e.g.
//! `cargo test --test it queueing::`.
//!
//! The slow reliability tests are `#[ignore]`d here and run by `make test-slow`.

// Fixtures shared by the modules below.
mod run_process;
#[macro_use]
mod support;
// The handler framework's test fixtures (the `Widget` resource, the handler `Probe`), shared,
// not copied.
#[path = "../../crates/kube-kopf/tests/common/mod.rs"]
mod kopf_common;

mod argo_cli_notes;
mod argo_convert;
mod argo_cron;
mod argo_daemon;
mod argo_dag_outputs;
mod argo_exit_handler;
mod argo_fanout;
mod argo_forms;
mod argo_hooks;
mod argo_http;
mod argo_locks;
mod argo_memoize;
mod argo_metrics;
mod argo_numbers;
mod argo_params;
mod argo_pod;
mod argo_raw_artifacts;
mod argo_recursion;
mod argo_resource;
mod argo_supplied;
mod argo_suspend;
mod argo_template_ref;
mod argo_time_and_json_vars;
mod argo_vars;
mod artifact_store;
mod artifacts;
mod bench_cli;
mod cache;
mod cli;
mod cli_habits;
mod cli_verbs;
mod cron;
mod cron_cli;
mod data_between_steps;
mod deploy_rbac;
mod examples;
mod graph_cli;
mod interactive;
mod kubectl_workflow;
mod kueue_workflow;
mod locks;
mod oci_artifacts;
mod operator_bugs;
mod operator_handlers;
mod operator_production;
mod operator_scenarios;
mod queueing;
mod real_workloads;
// The script it checks is used on x86-64 Linux only (lld).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod release_layout;
mod reliability_awkward_input;
mod reliability_bad_input;
mod reliability_crash;
mod reliability_fanin;
mod reliability_faults;
mod rules;
mod run_control;
mod run_control_cleanup;
mod run_identity;
mod run_policies;
mod shards;
mod step_agent;
mod submit;
mod telemetry_deploy;
mod telemetry_http;
mod telemetry_leader;
mod telemetry_ready;
mod templates;
mod triggers;
mod validate_schema;
mod web_view;
