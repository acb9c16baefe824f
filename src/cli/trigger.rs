//! `workflow-operator trigger list|get|fire`: the WorkFlowTriggers of a cluster, one shown
//! with its runs (newest first, with the delivery each was started for), and a test delivery
//! fired from a file: decided as the receiver decides (`workflow_operator_core::trigger`:
//! events, filter, id, parameters) and its run created as the receiver creates it
//! (`crate::triggers::start`), without the receiver and without its signature check (the
//! caller's own API credentials create the run).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::labels::{ANNOTATION_DELIVERY, LABEL_SCHEDULED, LABEL_TRIGGER};
use workflow_operator_core::names;
use workflow_operator_core::trigger::{self, Compiled, Delivery};

use super::client::ClusterArgs;
use super::get::table;

#[derive(Debug, Args)]
pub struct TriggerArgs {
    #[command(subcommand)]
    command: TriggerCommand,
}

#[derive(Debug, Subcommand)]
enum TriggerCommand {
    /// List the WorkFlowTriggers of the namespace (all namespaces with `-A`): source, runs,
    /// last delivery, ready.
    #[command(after_help = "Examples:\n  \
        workflow-operator trigger list\n  \
        workflow-operator trigger list -A")]
    List(ListArgs),
    /// Show one WorkFlowTrigger: its source, filter and parameters, its status and its runs,
    /// newest first, each with the delivery id it was started for.
    #[command(after_help = "Examples:\n  \
        workflow-operator trigger get on-push\n  \
        workflow-operator trigger get on-push -n ci -o json")]
    Get(GetArgs),
    /// Fire a test delivery from a file: its filter, id and parameters decided as the
    /// receiver decides them and its run created (no signature is checked: your credentials
    /// create the run). The same file and headers twice are the same delivery (`already
    /// started`); `--id` names a new one.
    #[command(after_help = "Examples:\n  \
        workflow-operator trigger fire on-push --file push.json -H X-GitHub-Event=push\n  \
        workflow-operator trigger fire on-upload --file s3-event.json --id test-1")]
    Fire(FireArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The WorkFlowTriggers of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct GetArgs {
    /// The WorkFlowTrigger's name.
    name: String,
    /// `text` for people; `yaml` or `json`: the WorkFlowTrigger and its runs.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Yaml,
    Json,
}

#[derive(Debug, Args)]
struct FireArgs {
    /// The WorkFlowTrigger's name.
    name: String,
    /// The delivery's body (JSON, or the text the sender would send).
    #[arg(long, short = 'f', value_name = "FILE")]
    file: PathBuf,
    /// A header of the delivery, `NAME=VALUE` (repeatable), e.g. `X-GitHub-Event=push`.
    #[arg(long = "header", short = 'H', value_name = "NAME=VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// The delivery's id (sent as `X-Delivery-Id`, and as `X-GitHub-Delivery` to a GitHub
    /// trigger); default: the sender's header among `--header`, else the body's hash.
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or(format!("expected NAME=VALUE, got {text:?}"))?;
    Ok((name.trim().to_ascii_lowercase(), value.to_string()))
}

/// Runs `trigger`'s subcommand.
pub async fn trigger(args: TriggerArgs) -> ExitCode {
    match args.command {
        TriggerCommand::List(args) => super::report(list(args)).await,
        TriggerCommand::Get(args) => super::report(get(args)).await,
        TriggerCommand::Fire(args) => super::report_with(fire(args)).await,
    }
}

async fn list(args: ListArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<WorkFlowTrigger> = if args.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &namespace)
    };
    let triggers = api
        .list(&ListParams::default())
        .await
        .context("listing the WorkFlowTriggers")?;
    let rows: Vec<[String; 6]> = triggers.items.iter().map(list_row).collect();
    let header = [
        "NAMESPACE",
        "NAME",
        "SOURCE",
        "RUNS",
        "LAST DELIVERY",
        "READY",
    ];
    if args.all_namespaces {
        print!("{}", table(header, &rows));
    } else {
        let [_, header @ ..] = header;
        let rows: Vec<[String; 5]> = rows.into_iter().map(|[_, row @ ..]| row).collect();
        print!("{}", table(header, &rows));
    }
    Ok(())
}

/// A trigger as `trigger list` shows it, with its namespace first.
fn list_row(trigger: &WorkFlowTrigger) -> [String; 6] {
    let status = trigger.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or("-".to_string(), |c| c.status.clone());
    [
        trigger.namespace().unwrap_or_default(),
        trigger.name_any(),
        trigger::source_of(trigger),
        status.runs.to_string(),
        status
            .last_delivery_time
            .map_or("-".into(), |t| t.0.to_string()),
        ready,
    ]
}

/// What `trigger get` shows: the trigger and its runs.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    work_flow_trigger: WorkFlowTrigger,
    runs: Vec<RunRow>,
}

/// A run as `trigger get` lists it.
#[derive(Debug, Serialize)]
struct RunRow {
    name: String,
    delivered: String,
    delivery: String,
    phase: String,
}

async fn get(args: GetArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let trigger = read_trigger(&client, &namespace, &args.name).await?;
    let runs = runs_of(&client, &namespace, &trigger).await?;
    let shown = Shown {
        work_flow_trigger: trigger,
        runs,
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&shown)?),
        Output::Yaml => print!("{}", serde_yaml::to_string(&shown)?),
        Output::Text => print!("{}", describe(&shown)),
    }
    Ok(())
}

fn describe(shown: &Shown) -> String {
    let trigger = &shown.work_flow_trigger;
    let spec = &trigger.spec;
    let status = trigger.status.clone().unwrap_or_default();
    let mut out = format!("Name:        {}\n", trigger.name_any());
    out.push_str(&format!(
        "Namespace:   {}\n",
        trigger.namespace().unwrap_or_default()
    ));
    out.push_str(&format!("Source:      {}\n", trigger::source_of(trigger)));
    out.push_str(&format!(
        "Filter:      {}\n",
        spec.filter.as_deref().unwrap_or("-")
    ));
    for parameter in &spec.parameters {
        out.push_str(&format!(
            "Parameter:   {} = {}\n",
            parameter.name, parameter.value
        ));
    }
    out.push_str(&format!("Concurrency: {:?}\n", spec.concurrency_policy));
    for condition in &status.conditions {
        let line = format!(
            "{}: {} ({})",
            condition.type_, condition.status, condition.message
        );
        out.push_str(&format!("Condition:   {line}\n"));
    }
    out.push('\n');
    if shown.runs.is_empty() {
        out.push_str("No runs.\n");
    } else {
        let rows: Vec<[String; 4]> = shown
            .runs
            .iter()
            .map(|r| {
                [
                    r.name.clone(),
                    r.delivered.clone(),
                    r.delivery.clone(),
                    r.phase.clone(),
                ]
            })
            .collect();
        out.push_str(&table(["RUN", "DELIVERED", "DELIVERY", "PHASE"], &rows));
    }
    out
}

async fn read_trigger(client: &Client, namespace: &str, name: &str) -> Result<WorkFlowTrigger> {
    let api: Api<WorkFlowTrigger> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .with_context(|| format!("reading workflowtrigger {namespace}/{name}"))?
        .with_context(|| format!("workflowtrigger {name} not found in namespace {namespace}"))
}

/// `trigger`'s runs (the WorkFlows with its label that it owns), newest first.
async fn runs_of(
    client: &Client,
    namespace: &str,
    trigger: &WorkFlowTrigger,
) -> Result<Vec<RunRow>> {
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "{LABEL_TRIGGER}={}",
        names::label_value(&trigger.name_any())
    );
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await
        .context("listing the runs")?;
    let uid = trigger.uid().unwrap_or_default();
    let mut runs: Vec<(i64, RunRow)> = listed
        .items
        .iter()
        .filter(|w| w.owner_references().iter().any(|o| o.uid == uid))
        .map(|w| {
            let at: i64 = (w.labels().get(LABEL_SCHEDULED))
                .and_then(|s| s.parse().ok())
                .unwrap_or_default();
            let delivered = Timestamp::from_second(at).map_or("-".into(), |t| t.to_string());
            let phase = (w.status.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())
                .and_then(|s| s["workflow-status"].as_str().map(str::to_string))
                .unwrap_or_else(|| "-".into());
            let delivery = w
                .annotations()
                .get(ANNOTATION_DELIVERY)
                .cloned()
                .unwrap_or_default();
            (
                at,
                RunRow {
                    name: w.name_any(),
                    delivered,
                    delivery,
                    phase,
                },
            )
        })
        .collect();
    runs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.name.cmp(&a.1.name)));
    Ok(runs.into_iter().map(|(_, row)| row).collect())
}

/// Fires the delivery of `args`: prints the receiver's answer; exits 0 for a 2xx.
async fn fire(args: FireArgs) -> Result<ExitCode> {
    let (client, namespace) = args.cluster.connect().await?;
    let trigger = read_trigger(&client, &namespace, &args.name).await?;
    let body =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let mut headers: std::collections::BTreeMap<String, String> =
        args.headers.into_iter().collect();
    if let Some(id) = &args.id {
        headers.insert("x-delivery-id".into(), id.clone());
        headers.insert("x-github-delivery".into(), id.clone());
        headers.insert("x-gitlab-event-uuid".into(), id.clone());
    }
    let delivery = Delivery { headers, body };
    let compiled = match Compiled::of(&trigger) {
        Ok(compiled) => compiled,
        Err(problems) => bail!("the trigger cannot start runs: {}", problems.join("; ")),
    };
    let events = trigger::events(&trigger, &delivery).map_err(anyhow::Error::msg)?;
    let answer = crate::triggers::start::all(&client, &trigger, &compiled, &events).await;
    println!("{} {}", answer.status.as_u16(), answer.message);
    Ok(match answer.status.is_success() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}
