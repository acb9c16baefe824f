//! `workflow-operator artifacts list|get`: a workflow's artifacts, as its steps' statuses
//! record them (`artifacts.NAME`: the key in the workflow's recorded repository), and
//! downloading one with the credentials of the repository's Secret.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use kube::api::Api;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::outputs::ARTIFACT_PREFIX;

use super::client::ClusterArgs;
use super::get::table;
use crate::artifacts::credentials;

#[derive(Debug, Args)]
pub struct ArtifactsArgs {
    #[command(subcommand)]
    command: ArtifactsCommand,
}

#[derive(Debug, Subcommand)]
enum ArtifactsCommand {
    /// List a workflow's artifacts: step, name and key in its repository.
    #[command(after_help = "Examples:\n  workflow-operator artifacts list build")]
    List(ListArgs),
    /// Download one artifact of a step: the file or directory it stored, at `-o PATH` (default:
    /// its name, in the current directory).
    #[command(after_help = "Examples:\n  \
        workflow-operator artifacts get build compile app\n  \
        workflow-operator artifacts get build compile app -o ./app")]
    Get(GetArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The workflow.
    workflow: String,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct GetArgs {
    /// The workflow.
    workflow: String,
    /// The step (as `get` names it: `build[2]` for an item of a fan-out).
    step: String,
    /// The artifact's name (`outputs.artifacts[].name`).
    name: String,
    /// Where to put it.
    #[arg(long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn artifacts(args: ArtifactsArgs) -> ExitCode {
    super::report(async {
        match args.command {
            ArtifactsCommand::List(args) => list(args).await,
            ArtifactsCommand::Get(args) => get(args).await,
        }
    })
    .await
}

/// Every recorded artifact of `workflow`: (step, name, key).
fn recorded(workflow: &WorkFlow) -> Vec<[String; 3]> {
    let steps = workflow.status.iter().flat_map(|s| &s.steps);
    steps
        .flat_map(|step| {
            let artifacts = step.outputs.iter().filter_map(|(key, value)| {
                let name = key.strip_prefix(ARTIFACT_PREFIX)?;
                Some([step.name.clone(), name.to_string(), value.clone()])
            });
            artifacts.collect::<Vec<_>>()
        })
        .collect()
}

async fn list(args: ListArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<WorkFlow> = Api::namespaced(client, &namespace);
    let workflow = (api.get(&args.workflow).await)
        .with_context(|| format!("reading workflow {}", args.workflow))?;
    let rows = recorded(&workflow);
    if rows.is_empty() {
        println!("No artifacts recorded for workflow {}.", args.workflow);
        return Ok(());
    }
    print!("{}", table(["STEP", "NAME", "KEY"], &rows));
    Ok(())
}

async fn get(args: GetArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
    let workflow = (api.get(&args.workflow).await)
        .with_context(|| format!("reading workflow {}", args.workflow))?;
    let rows = recorded(&workflow);
    let Some([_, _, key]) = rows
        .iter()
        .find(|[s, n, _]| *s == args.step && *n == args.name)
    else {
        let known: Vec<String> = rows.iter().map(|[s, n, _]| format!("{s} {n}")).collect();
        bail!(
            "workflow {} has no artifact {} of step {} recorded (recorded: {})",
            args.workflow,
            args.name,
            args.step,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    if key.is_empty() {
        bail!(
            "step {} made no artifact {} (it is optional)",
            args.step,
            args.name
        );
    }
    let resolved = workflow
        .status
        .as_ref()
        .and_then(|s| s.artifact_repository.as_deref());
    let repository = resolved.map(|r| &r.repository);
    let target = match repository {
        Some(repository) => credentials::target_of(&client, &namespace, repository).await?,
        None => None,
    };
    let Some(target) = target else {
        bail!("workflow {} records no artifact repository", args.workflow);
    };
    let output = args.output.unwrap_or_else(|| PathBuf::from(&args.name));
    (target.get_path(key, &output))
        .await
        .with_context(|| format!("downloading {key}"))?;
    println!("{}", output.display());
    Ok(())
}
