//! `workflow-operator wait NAME...`: waits until each workflow finished, as `argo wait` does,
//! printing each one's outcome as it finishes; exits 0 when all completed, 1 when any failed,
//! and [`TIMED_OUT`] when `--timeout` passed first. The workflows are watched, not polled.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::Args;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::wait::await_condition;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::lifecycle::Phase;

use super::client::ClusterArgs;

/// The exit code when `--timeout` passed before every workflow finished: `timeout(1)`'s, apart
/// from 1 (a workflow failed) and 2 (a usage error).
pub const TIMED_OUT: u8 = 124;

/// Wait until each workflow finished: exit 0 when all completed, 1 when any failed.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The workflows' names.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    /// Give up after this long (`30s`, `5m`, `1h`): exit 124, naming the workflows not finished.
    /// Default: wait as long as it takes.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn wait(args: WaitArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let api: Api<WorkFlow> = Api::namespaced(client, &namespace);
        // A name that does not exist is refused at once, not waited for.
        for name in &args.names {
            super::read_workflow(&api, &namespace, name).await?;
        }
        let mut pending: FuturesUnordered<_> = (args.names.iter())
            .map(|name| finished(api.clone(), name))
            .collect();
        let mut left: Vec<&str> = args.names.iter().map(String::as_str).collect();
        let mut failed = false;
        let deadline = args.timeout.map(|t| tokio::time::Instant::now() + t);
        while !pending.is_empty() {
            let next = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, pending.next()).await,
                None => Ok(pending.next().await),
            };
            let Ok(Some(workflow)) = next else {
                let timeout = humantime::format_duration(args.timeout.unwrap_or_default());
                eprintln!(
                    "error: timed out after {timeout} waiting for {}",
                    left.join(", ")
                );
                return Ok(ExitCode::from(TIMED_OUT));
            };
            let workflow = workflow?;
            left.retain(|name| Some(*name) != workflow.metadata.name.as_deref());
            println!("{}", outcome_line(&workflow));
            failed |= !completed(&workflow);
        }
        Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    })
    .await
}

/// The workflow `name` once it finished (its status for its current spec says Completed or
/// Failed, so a retried workflow's last outcome does not count).
async fn finished(api: Api<WorkFlow>, name: &str) -> Result<WorkFlow> {
    await_condition(api, name, |workflow: Option<&WorkFlow>| {
        workflow.is_some_and(is_finished)
    })
    .await
    .map_err(|e| anyhow!("watching workflow {name}: {e}"))?
    .ok_or_else(|| anyhow!("workflow {name} was deleted before it finished"))
}

/// Whether the workflow finished, either way, for its current spec.
pub(super) fn is_finished(workflow: &WorkFlow) -> bool {
    let Some(status) = &workflow.status else {
        return false;
    };
    status.observed_generation == workflow.metadata.generation
        && status.workflow_status.is_some_and(|p| p.is_terminal())
}

/// Whether the workflow completed.
pub(super) fn completed(workflow: &WorkFlow) -> bool {
    workflow.status.as_ref().and_then(|s| s.workflow_status) == Some(Phase::Completed)
}

/// How the workflow ended: `workflow NAME PHASE: MESSAGE`.
pub(super) fn outcome_line(workflow: &WorkFlow) -> String {
    let status = workflow.status.clone().unwrap_or_default();
    let phase = status.workflow_status.map_or("Pending", |p| p.as_str());
    let mut line = format!("workflow {} {phase}", workflow.name_any());
    if let Some(message) = status.message.filter(|m| !m.is_empty()) {
        line.push_str(&format!(": {message}"));
    }
    line
}
