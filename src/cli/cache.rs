//! `workflow-operator cache list|clear`: the entries of cached steps (`cache`), one ConfigMap
//! each (label `workflow.crd.com/cache`): where each came from and when, and what it holds;
//! and clearing them, all or those older than an age, so the next run of their steps runs.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde::Serialize;

use workflow_operator_core::cache::{Entry, LABEL_CACHE};
use workflow_operator_core::crd::numbers::parse_duration;

use super::client::ClusterArgs;
use super::get::{human, table};

#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Debug, Subcommand)]
enum CacheCommand {
    /// List the cache entries of the namespace (all namespaces with `-A`): each key, the
    /// workflow and step whose run wrote it, its age and its outputs.
    #[command(after_help = "Examples:\n  \
        workflow-operator cache list\n  \
        workflow-operator cache list -A -o json")]
    List(ListArgs),
    /// Delete cache entries of the namespace: all of them, or those older than an age; the next
    /// run of their steps runs instead of taking its outputs from them.
    #[command(after_help = "Examples:\n  \
        workflow-operator cache clear --all\n  \
        workflow-operator cache clear --older-than 24h -n ci")]
    Clear(ClearArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The entries of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// `text` for people, `json` for scripts.
    #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
    output: String,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct ClearArgs {
    /// Every entry of the namespace.
    #[arg(
        long,
        conflicts_with = "older_than",
        required_unless_present = "older_than"
    )]
    all: bool,
    /// Only entries older than this (Go's durations, e.g. `24h`, or whole seconds).
    #[arg(long, value_name = "AGE", value_parser = parse_duration)]
    older_than: Option<k8s_openapi::jiff::SignedDuration>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// One entry, as `cache list` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    namespace: String,
    name: String,
    from: String,
    created: Timestamp,
    outputs: std::collections::BTreeMap<String, String>,
}

pub async fn cache(args: CacheArgs) -> ExitCode {
    super::report(async {
        match args.command {
            CacheCommand::List(args) => list(args).await,
            CacheCommand::Clear(args) => clear(args).await,
        }
    })
    .await
}

async fn entries(api: &Api<ConfigMap>) -> Result<Vec<(ConfigMap, Entry)>> {
    let maps = api
        .list(&ListParams::default().labels(LABEL_CACHE))
        .await
        .context("listing the cache entries")?
        .items;
    Ok(maps
        .into_iter()
        .filter_map(|map| {
            let entry = Entry::from_data(map.data.as_ref()?)?;
            Some((map, entry))
        })
        .collect())
}

async fn list(args: ListArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<ConfigMap> = if args.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &namespace)
    };
    let rows: Vec<Row> = entries(&api)
        .await?
        .into_iter()
        .map(|(map, entry)| Row {
            namespace: map.namespace().unwrap_or_default(),
            name: map.name_any(),
            from: entry.from,
            created: entry.created,
            outputs: entry.outputs,
        })
        .collect();
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("No cache entries.");
        return Ok(());
    }
    let now = Timestamp::now();
    let lines: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let age = now.duration_since(r.created).as_secs().max(0) as u64;
            let outputs: Vec<String> = r.outputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            [
                r.namespace.clone(),
                r.name.clone(),
                r.from.clone(),
                human(age),
                outputs.join(" "),
            ]
        })
        .collect();
    print!(
        "{}",
        table(["NAMESPACE", "ENTRY", "FROM", "AGE", "OUTPUTS"], &lines)
    );
    Ok(())
}

async fn clear(args: ClearArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let now = Timestamp::now();
    let mut deleted = 0;
    for (map, entry) in entries(&api).await? {
        let old = (args.older_than).is_some_and(|age| now.duration_since(entry.created) > age);
        if args.all || old {
            let name = map.name_any();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("deleting cache entry {name}")),
            }
        }
    }
    println!("deleted {deleted} cache entries in namespace {namespace}");
    Ok(())
}
