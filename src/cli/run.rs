//! `workflow-operator run`: the operator against a real cluster, from the current kubeconfig or
//! the in-cluster service account.

use std::process::ExitCode;

use clap::Args;

use crate::workflow::operator::{self, OperatorOptions};

/// Run the operator. Credentials come from `KUBECONFIG` / `~/.kube/config`, or from the pod's
/// service account when running in a cluster. The WorkFlow CRD must be installed
/// (`workflow-operator crd | kubectl apply -f -`).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, short = 'n', env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Handlers run at once, over all workflows (one at a time per workflow).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Do not post an Event per step started and succeeded (saves two API writes per step;
    /// lifecycle Events, failures included, are always posted).
    #[arg(long)]
    no_step_events: bool,
}

pub async fn run(args: RunArgs) -> ExitCode {
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            eprintln!(
                "error: no Kubernetes configuration found ({error}); set KUBECONFIG or run in a cluster"
            );
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = operator::check_crd_installed(&client).await {
        eprintln!("error: {error:#}");
        return ExitCode::FAILURE;
    }
    let options = OperatorOptions {
        namespace: args.namespace,
        concurrency: args.concurrency,
        step_events: !args.no_step_events,
    };
    match operator::run(client, options, crate::cli::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
