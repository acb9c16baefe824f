//! `workflow-operator list` and `delete`, as `argo list` and `argo delete`; and the workflows a
//! command acts on, by name or by label selector ([`Targets`]), which the run-control commands
//! share: each is acted on in turn, a failure said and the others done still, as kubectl does.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::lifecycle::Phase;

use super::client::ClusterArgs;
use super::get::{human, table};

/// List the workflows of the namespace.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The workflows of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Only those whose labels match this selector (`-l team=ci,tier!=prod`), as kubectl's.
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    selector: Option<String>,
    /// Only those in one of these phases (`--status Started,Failed`): Created, Queued, Started,
    /// Suspended, Completed, Failed; Argo's Pending, Running and Succeeded are taken too.
    #[arg(long, value_name = "PHASE,...", value_delimiter = ',', value_parser = parse_phase)]
    status: Vec<Phase>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// The workflows a command acts on: names, or a label selector.
#[derive(Debug, Args)]
pub struct Targets {
    /// The workflows' names.
    #[arg(value_name = "NAME", required_unless_present = "selector")]
    names: Vec<String>,
    /// Every workflow whose labels match this selector (`-l team=ci`), as kubectl's.
    #[arg(long, short = 'l', value_name = "SELECTOR", conflicts_with = "names")]
    selector: Option<String>,
}

/// Delete workflows (their Jobs and pods go with them).
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The workflows' names.
    #[arg(
        value_name = "NAME",
        required_unless_present_any = ["selector", "all", "completed"],
        conflicts_with_all = ["selector", "all", "completed"]
    )]
    names: Vec<String>,
    /// Every workflow whose labels match this selector (`-l team=ci`), as kubectl's.
    #[arg(long, short = 'l', value_name = "SELECTOR")]
    selector: Option<String>,
    /// Every workflow of the namespace.
    #[arg(long, conflicts_with = "selector")]
    all: bool,
    /// Every finished workflow (Completed or Failed), of those `-l` selects if given.
    #[arg(long)]
    completed: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `--status failed`: a phase, by our name or Argo's, in any case.
fn parse_phase(text: &str) -> Result<Phase, String> {
    let phase = match text.to_lowercase().as_str() {
        "pending" => Phase::Created,
        "running" => Phase::Started,
        "succeeded" => Phase::Completed,
        lower => (Phase::ALL.into_iter())
            .find(|p| p.as_str().to_lowercase() == lower)
            .ok_or_else(|| {
                let names: Vec<&str> = Phase::ALL.iter().map(|p| p.as_str()).collect();
                format!("expected one of {}", names.join(", "))
            })?,
    };
    Ok(phase)
}

/// A workflow's phase; one the operator has not seen yet is `Created`.
fn phase(workflow: &WorkFlow) -> Phase {
    (workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .unwrap_or(Phase::Created)
}

pub async fn list(args: ListArgs) -> ExitCode {
    super::report(async {
        let (client, namespace) = args.cluster.connect().await?;
        let api: Api<WorkFlow> = if args.all_namespaces {
            Api::all(client)
        } else {
            Api::namespaced(client, &namespace)
        };
        let mut workflows = listed(&api, args.selector.as_deref()).await?;
        workflows.retain(|w| args.status.is_empty() || args.status.contains(&phase(w)));
        // Newest first, as `argo list`.
        workflows.sort_by_key(|w| std::cmp::Reverse(w.metadata.creation_timestamp.clone()));
        if workflows.is_empty() {
            eprintln!("{}", none_found(&namespace, args.all_namespaces));
            return Ok(());
        }
        let now = Timestamp::now();
        let rows: Vec<[String; 7]> = workflows.iter().map(|w| row(w, now)).collect();
        let header = [
            "NAMESPACE",
            "NAME",
            "STATUS",
            "AGE",
            "DURATION",
            "PROGRESS",
            "MESSAGE",
        ];
        if args.all_namespaces {
            print!("{}", table(header, &rows));
        } else {
            let [_, header @ ..] = header;
            let rows: Vec<[String; 6]> = rows.into_iter().map(|[_, row @ ..]| row).collect();
            print!("{}", table(header, &rows));
        }
        Ok(())
    })
    .await
}

/// `No workflows found in namespace NS.`, as kubectl says it (on standard error).
fn none_found(namespace: &str, everywhere: bool) -> String {
    match everywhere {
        true => "No workflows found.".into(),
        false => format!("No workflows found in namespace {namespace}."),
    }
}

/// The workflows `selector` selects (all without one).
async fn listed(api: &Api<WorkFlow>, selector: Option<&str>) -> Result<Vec<WorkFlow>> {
    let params = match selector {
        Some(selector) => ListParams::default().labels(selector),
        None => ListParams::default(),
    };
    Ok(api
        .list(&params)
        .await
        .context("listing the workflows")?
        .items)
}

/// A workflow as `list` shows it, its namespace first: its duration runs until it finished.
fn row(workflow: &WorkFlow, now: Timestamp) -> [String; 7] {
    let status = workflow.status.clone().unwrap_or_default();
    let created = workflow.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let ended = (status.status_changed.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok())
        .filter(|_| phase(workflow).is_terminal())
        .unwrap_or(now);
    let secs =
        |from: Timestamp, to: Timestamp| human(to.duration_since(from).as_secs().max(0) as u64);
    [
        workflow.namespace().unwrap_or_default(),
        workflow.name_any(),
        status
            .workflow_status
            .map_or("Pending", |p| p.as_str())
            .into(),
        created.map_or(String::new(), |c| secs(c, now)),
        created.map_or(String::new(), |c| secs(c, ended)),
        status.progress.unwrap_or_default(),
        status.message.unwrap_or_default(),
    ]
}

impl Targets {
    /// The names of the workflows targeted: those given, or those the selector selects now.
    pub(super) async fn names(&self, api: &Api<WorkFlow>, namespace: &str) -> Result<Vec<String>> {
        match &self.selector {
            None => Ok(self.names.clone()),
            Some(selector) => {
                let selected = listed(api, Some(selector)).await?;
                if selected.is_empty() {
                    eprintln!("{}", none_found(namespace, false));
                }
                Ok(sorted_names(&selected))
            }
        }
    }
}

fn sorted_names(workflows: &[WorkFlow]) -> Vec<String> {
    let mut names: Vec<String> = workflows.iter().map(ResourceExt::name_any).collect();
    names.sort();
    names
}

/// Runs `act` on each of `names` in turn, printing what it says; a failure is said (on
/// standard error) and the rest done still, the command then exiting 1. An API server that
/// cannot be reached ends it at once, said once.
pub(super) async fn each<F, Fut>(names: &[String], mut act: F) -> Result<ExitCode>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<String>>,
{
    let mut failed = false;
    for name in names {
        match act(name.clone()).await {
            Ok(said) => println!("{said}"),
            Err(error) if super::client::unreachable(&error).is_some() => return Err(error),
            Err(error) => {
                eprintln!("error: {error:#}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub async fn delete(args: DeleteArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
        let names = to_delete(&args, &api, &namespace).await?;
        each(&names, |name| delete_one(&client, &namespace, name)).await
    })
    .await
}

/// The names `delete` was given, or those its flags select now.
async fn to_delete(args: &DeleteArgs, api: &Api<WorkFlow>, namespace: &str) -> Result<Vec<String>> {
    if !args.names.is_empty() {
        return Ok(args.names.clone());
    }
    let mut selected = listed(api, args.selector.as_deref()).await?;
    if args.completed {
        selected.retain(|w| phase(w).is_terminal());
    }
    if selected.is_empty() {
        eprintln!("{}", none_found(namespace, false));
    }
    Ok(sorted_names(&selected))
}

async fn delete_one(client: &Client, namespace: &str, name: String) -> Result<String> {
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    match api.delete(&name, &DeleteParams::background()).await {
        Ok(_) => Ok(format!("workflow.workflow.crd.com {name:?} deleted")),
        Err(kube::Error::Api(status)) if status.is_not_found() => {
            anyhow::bail!("workflow {name} not found in namespace {namespace}")
        }
        Err(error) => Err(error).with_context(|| format!("deleting workflow {namespace}/{name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_our_phase_or_argos_in_any_case() {
        for (text, phase) in [
            ("Failed", Phase::Failed),
            ("started", Phase::Started),
            ("Running", Phase::Started),
            ("succeeded", Phase::Completed),
            ("Pending", Phase::Created),
        ] {
            assert_eq!(parse_phase(text), Ok(phase), "{text}");
        }
        assert_eq!(
            parse_phase("Sleeping"),
            Err("expected one of Created, Queued, Started, Suspended, Completed, Failed".into())
        );
    }
}
