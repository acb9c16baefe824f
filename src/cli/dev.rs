//! `workflow-operator dev`: the embedded control plane, the WorkFlow CRD and (unless
//! `--no-operator`) the operator, in one process, with manifests applied from files and a line
//! printed whenever a workflow's status changes. `make demo` runs this. Beside them, an
//! S3-compatible artifact store, announced to the cluster as the default artifact repository.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::artifacts::embedded::{self, EmbeddedStore};
use crate::controllers::workflow::operator::{self, OperatorOptions};
use crate::triggers::{self, Receiver};
use crate::web;
use kube_devcluster::entrypoints;
use kube_devcluster::faults::{ErrorRate, FaultConfig};
use kube_devcluster::jobs::JobBackoff;
use kube_devcluster::{DevCluster, DevClusterOptions, PodMode};

use workflow_operator_core::crd::WorkFlow;

/// Options of `dev` (its help text is on `Command::Dev`).
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Port on 127.0.0.1 to serve the Kubernetes API on (0 picks a free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to serve the web view (the workflows, their DAGs and steps, live; read-only, plain
    /// HTTP, no authentication): an address (port 0 picks a free one), or `off`. Its URL is
    /// printed at start.
    #[arg(long, value_name = "ADDR|off", default_value = "127.0.0.1:0", value_parser = parse_web_addr)]
    web_addr: WebAddr,
    /// Where to serve the WorkFlowTrigger receiver (`POST /triggers/<namespace>/<name>`): an
    /// address (port 0 picks a free one), or `off`. Printed as `triggers at http://ADDR`.
    #[arg(long, value_name = "ADDR|off", default_value = "127.0.0.1:0", value_parser = parse_web_addr)]
    triggers_addr: WebAddr,
    /// Where to write a kubeconfig for kubectl (default: a temporary file, printed at start).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where the artifact store keeps its bucket (kept after exit; default: a temporary
    /// directory, removed at exit).
    #[arg(long, value_name = "DIR")]
    artifact_dir: Option<PathBuf>,
    /// Only the control plane and the CRD; run the operator yourself (`workflow-operator run`).
    #[arg(long)]
    no_operator: bool,
    /// Authorize as a cluster does: each pod acts as its service account (a token of its own,
    /// in the kubeconfig its containers get), refused what no Role or ClusterRole grants it, so
    /// a resource step shows the RBAC it needs. kubectl and the operator stay the cluster's
    /// admin.
    #[arg(long)]
    rbac: bool,
    /// A manifest file to submit once the control plane is up (repeatable; multi-document YAML).
    #[arg(long = "apply", value_name = "FILE")]
    apply: Vec<PathBuf>,
    /// Exit when every submitted workflow is terminal: 0 if all Completed, 1 otherwise.
    #[arg(long)]
    until_done: bool,
    /// Serve Kueue's Workload, LocalQueue, ClusterQueue and ResourceFlavor kinds and run a
    /// stand-in for Kueue that admits Workloads by their ClusterQueue's nominal quota (not
    /// Kueue: no preemption, borrowing or MultiKueue; docs/kueue.md), to try
    /// `queueScope: Workflow`. Apply the queues with `--apply` or kubectl.
    #[arg(long)]
    kueue: bool,
    /// How pods run: `real` runs each container's command as a local process (no image is
    /// pulled: the command runs on this machine); `simulated:<millis>` completes every pod after
    /// that long without a process (for benchmarks).
    #[arg(long, default_value = "real", value_parser = parse_pod_mode)]
    pods: PodMode,
    /// What a container without `command` runs for this image (or repository), as
    /// `IMAGE=COMMAND`, e.g. `my/app=python3 -m app` (repeatable). Built in: hello-world,
    /// busybox, alpine, ubuntu, debian, python; any other image needs a command.
    #[arg(long = "entrypoint", value_name = "IMAGE=COMMAND", value_parser = entrypoints::parse_mapping)]
    entrypoints: Vec<(String, Vec<String>)>,
    /// Replace a failed step's pod after Kubernetes' Job back-off (10 s, doubling, at most
    /// 6 minutes) instead of after 100 ms (doubling, at most 1 s).
    #[arg(long)]
    real_job_backoff: bool,
    /// Handlers the operator runs at once, over all workflows.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Do not post an Event per step started and succeeded (saves two API writes per step).
    #[arg(long)]
    no_step_events: bool,
    /// How long the control plane keeps an Event after its last write, as kube-apiserver's
    /// `--event-ttl` (e.g. `10m`, `1h30m`, `90s`).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    event_ttl: Duration,
    /// Delete finished workflows this many seconds after they finished (Completed or Failed),
    /// with their Jobs and pods, unless their spec sets `ttlSecondsAfterFinished`. Off when not
    /// given: finished workflows stay.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(0..))]
    default_ttl_seconds_after_finished: Option<i64>,
    /// Run at most this many steps at once, across every workflow and namespace: the other
    /// steps wait as `Queued` and start in `spec.priority` order (higher first, then the older
    /// workflow) as running ones finish. Workflows with `spec.queueName` are left to Kueue.
    /// Off when not given.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_running_steps: Option<u32>,
    /// Fault injection: fail this fraction of a verb's requests, as `VERB=RATE[:CODE]` with CODE
    /// 500 (default), 409 or 429, e.g. `patch=0.1:409` (repeatable).
    #[arg(
        long = "fail",
        value_name = "VERB=RATE[:CODE]",
        help_heading = "Fault injection"
    )]
    fail: Vec<ErrorRate>,
    /// Fault injection: delay every API request by this many milliseconds.
    #[arg(long, value_name = "MILLIS", help_heading = "Fault injection")]
    latency_ms: Option<u64>,
    /// Fault injection: close every watch this many seconds after it opened.
    #[arg(long, value_name = "SECONDS", help_heading = "Fault injection")]
    close_watches_every: Option<u64>,
    /// Fault injection: forget the change history every this many seconds, so watches get
    /// 410 Gone and clients must re-list (as after an etcd compaction).
    #[arg(long, value_name = "SECONDS", help_heading = "Fault injection")]
    force_gone_every: Option<u64>,
}

/// `--web-addr` and `--triggers-addr`: an address to serve on, or `off`.
#[derive(Debug, Clone, Copy)]
struct WebAddr(Option<SocketAddr>);

fn parse_web_addr(text: &str) -> Result<WebAddr, String> {
    if text == "off" {
        return Ok(WebAddr(None));
    }
    text.parse()
        .map(|addr| WebAddr(Some(addr)))
        .map_err(|_| format!("expected an address such as 127.0.0.1:8081, or `off`; got {text:?}"))
}

fn parse_pod_mode(text: &str) -> Result<PodMode, String> {
    match text.split_once(':') {
        None if text == "real" => Ok(PodMode::Real),
        Some(("simulated", millis)) => millis
            .parse::<u64>()
            .map(|ms| PodMode::Simulated(Duration::from_millis(ms)))
            .map_err(|_| format!("expected simulated:<millis>, got {text:?}")),
        _ => Err(format!(
            "expected `real` or `simulated:<millis>`, got {text:?}"
        )),
    }
}

pub async fn dev(args: DevArgs) -> ExitCode {
    match run_dev(args).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The embedded control plane `dev`'s arguments ask for.
async fn start_cluster(args: &DevArgs) -> Result<DevCluster> {
    DevCluster::start(DevClusterOptions {
        port: args.port,
        kubeconfig: args.kubeconfig.clone(),
        pods: args.pods,
        entrypoints: args.entrypoints.iter().cloned().collect(),
        job_backoff: if args.real_job_backoff {
            JobBackoff::default()
        } else {
            JobBackoff::FAST
        },
        event_ttl: Some(args.event_ttl),
        rbac: args.rbac,
        ..Default::default()
    })
    .await
    .context("starting the embedded control plane")
}

async fn run_dev(args: DevArgs) -> Result<ExitCode> {
    let cluster = start_cluster(&args).await?;
    cluster.faults().set(FaultConfig {
        error_rates: args.fail.clone(),
        latency: Duration::from_millis(args.latency_ms.unwrap_or(0)),
        close_watches_every: args.close_watches_every.map(Duration::from_secs),
    });
    println!(
        "control plane serving at {} (plain HTTP, no authentication)",
        cluster.base_url()
    );
    println!("export KUBECONFIG={}", cluster.kubeconfig_path().display());
    let client = cluster.client();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mirror = match (args.web_addr.0, args.no_operator) {
        (Some(_), true) => {
            println!("web view off: it shows the operator's own view, and --no-operator runs none");
            None
        }
        (Some(addr), false) => {
            let mirror = operator::Mirrors::new();
            let state = web::WebState {
                mirror: mirror.workflows.clone(),
                crons: mirror.crons.clone(),
                client: client.clone(),
                namespace: None,
                shutdown: shutdown.clone(),
            };
            let bound = web::serve(addr, state).await?;
            println!("web view at http://{bound}/ (read-only, plain HTTP, no authentication)");
            Some(mirror)
        }
        (None, _) => None,
    };
    // Printed before the store's line, which a script may read up to and then stop reading.
    let triggers = match args.triggers_addr.0 {
        Some(addr) => Some(serve_triggers(addr, &client, &shutdown).await?),
        None => None,
    };
    // Signals are caught from here on, not only once the workflows are followed: SIGTERM while
    // starting up still ends in the clean-up below (the store's temporary directory).
    let signalled = tokio::spawn(crate::cli::shutdown_signal());
    let store = start_artifact_store(args.artifact_dir.clone(), &client, &shutdown).await?;
    if let Some(base) = triggers {
        notify_buckets(&client, &store, base);
    }
    operator::install_crd(&client)
        .await
        .context("installing the WorkFlow CRD")?;
    let _kueue = if args.kueue {
        Some(start_kueue_stand_in(&client).await?)
    } else {
        None
    };

    let operator_task = if args.no_operator {
        None
    } else {
        let options = OperatorOptions {
            namespace: None,
            concurrency: args.concurrency,
            step_events: !args.no_step_events,
            metrics: None,
            default_ttl_seconds_after_finished: args.default_ttl_seconds_after_finished,
            max_running_steps: args.max_running_steps.map(|n| n as usize),
            mirror,
            agent: operator::default_agent(operator::DEFAULT_AGENT_IMAGE),
            // The store serves every namespace, as Argo's controller-wide repository does; a
            // namespace's own ConfigMap overrides it.
            artifact_repository: Some(store.repository()),
        };
        let (client, stop) = (client.clone(), shutdown.clone());
        Some(tokio::spawn(async move {
            operator::run(client, options, stop.cancelled_owned()).await
        }))
    };

    if args.until_done && args.apply.is_empty() {
        bail!("--until-done waits for the workflows of --apply FILE; none were given");
    }
    let mut submitted = BTreeSet::new();
    for file in &args.apply {
        submitted.extend(apply_file(&cluster, file).await?);
    }

    let force_gone = async {
        let Some(seconds) = args.force_gone_every else {
            return std::future::pending().await;
        };
        let mut tick = tokio::time::interval(Duration::from_secs(seconds.max(1)));
        tick.tick().await;
        loop {
            tick.tick().await;
            cluster.force_gone();
        }
    };
    let outcome = tokio::select! {
        outcome = follow_workflows(client.clone(), args.until_done.then_some(&submitted)) => outcome,
        _ = signalled => Ok(ExitCode::SUCCESS),
        () = force_gone => unreachable!("the fault ticker never ends"),
    };
    shutdown.cancel();
    store.shutdown().await;
    if let Some(task) = operator_task {
        match task.await {
            Ok(Err(error)) => eprintln!("operator stopped with an error: {error:#}"),
            Err(error) => eprintln!("operator task failed: {error}"),
            Ok(Ok(())) => {}
        }
    }
    outcome
}

/// Installs Kueue's kinds and starts the stand-in that admits Workloads; it stops when the
/// returned guard is dropped.
async fn start_kueue_stand_in(client: &kube::Client) -> Result<AbortOnDrop> {
    let crds = workflow_operator_core::kueue::api::crds();
    operator::install_crds(client, &crds)
        .await
        .context("installing Kueue's CRDs for the stand-in")?;
    println!(
        "Kueue stand-in (not Kueue): Workloads are admitted by their ClusterQueue's nominal quota; \
         no preemption, borrowing or MultiKueue (docs/kueue.md)"
    );
    Ok(AbortOnDrop(tokio::spawn(crate::kueue_standin::run(
        client.clone(),
    ))))
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the WorkFlowTrigger receiver on `addr` (its watch of the triggers waits for their
/// CRD) and prints its URL; returns it.
async fn serve_triggers(
    addr: SocketAddr,
    client: &kube::Client,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<String> {
    let receiver = Receiver::new(client.clone(), None, None, shutdown);
    let bound = triggers::serve(addr, receiver, shutdown.clone()).await?;
    println!("triggers at http://{bound}");
    Ok(format!("http://{bound}"))
}

/// Objects written into `store` are notified to the triggers naming their bucket, through the
/// receiver at `base`.
fn notify_buckets(client: &kube::Client, store: &EmbeddedStore, base: String) {
    let (puts, written) = tokio::sync::mpsc::unbounded_channel();
    store.notify(puts);
    tokio::spawn(triggers::bucket::notify(client.clone(), base, written));
}

/// Starts the artifact store, writes the default repository's Secret and ConfigMap into the
/// namespace `default` and its Secret into every other namespace as it appears (the operator
/// is given the store as its own repository), and prints the store's endpoint.
async fn start_artifact_store(
    dir: Option<PathBuf>,
    client: &kube::Client,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<EmbeddedStore> {
    let store = EmbeddedStore::start(dir).await?;
    embedded::install_default_repository(client.clone(), "default", &store).await?;
    // Its watch ends at shutdown: the control plane waits for open requests before it stops.
    let spreading = spread_credentials(client.clone(), store.credentials(""));
    let stop = shutdown.clone();
    tokio::spawn(async move { stop.run_until_cancelled(spreading).await });
    println!(
        "artifact store at {} (S3, bucket {} in {}, plain HTTP; every namespace's repository \
         unless its ConfigMap {} names another)",
        store.endpoint(),
        embedded::BUCKET,
        store.dir().display(),
        embedded::REPOSITORY_CONFIGMAP,
    );
    Ok(store)
}

/// Writes the store's credentials Secret (`secret`, its namespace left unset) into every
/// namespace as it appears, so that a step with artifacts finds it in its own namespace.
async fn spread_credentials(client: kube::Client, secret: Secret) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut appearing = watcher(namespaces, watcher::Config::default())
        .applied_objects()
        .boxed();
    let params = PatchParams::apply("workflow-operator-dev").force();
    while let Some(event) = appearing.next().await {
        let Ok(namespace) = event else { continue };
        let name = namespace.name_any();
        let mut secret = secret.clone();
        secret.metadata.namespace = Some(name.clone());
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &name);
        let secret_name = secret.name_any();
        if let Err(error) = secrets
            .patch(&secret_name, &params, &Patch::Apply(&secret))
            .await
        {
            tracing::warn!(%error, namespace = name, "writing the artifact store's Secret");
        }
    }
}

/// Submits every document of a manifest file; returns the (namespace, name) of each WorkFlow.
async fn apply_file(cluster: &DevCluster, file: &PathBuf) -> Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut workflows = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)
            .with_context(|| format!("parsing {}", file.display()))?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value)
            .with_context(|| format!("{}: not a Kubernetes object", file.display()))?;
        let types = object
            .types
            .clone()
            .with_context(|| format!("{}: apiVersion and kind are required", file.display()))?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let info = cluster
            .registry()
            .all()
            .into_iter()
            .find(|i| i.group == gvk.group && i.version == gvk.version && i.kind == gvk.kind)
            .with_context(|| {
                format!(
                    "{}: the server does not serve {}",
                    file.display(),
                    types.kind
                )
            })?;
        let resource = ApiResource::from_gvk_with_plural(&gvk, &info.resource);
        let namespace = object
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<DynamicObject> = if info.namespaced {
            Api::namespaced_with(cluster.client(), &namespace, &resource)
        } else {
            Api::all_with(cluster.client(), &resource)
        };
        let created = api
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| {
                format!(
                    "{}: creating {} {:?}",
                    file.display(),
                    types.kind,
                    object.metadata.name
                )
            })?;
        let name = created.metadata.name.clone().unwrap_or_default();
        println!("created {}/{name}", info.resource);
        if gvk.kind == "WorkFlow" {
            workflows.push((namespace, name));
        }
    }
    Ok(workflows)
}

/// What the printed status line is made of, per workflow.
#[derive(Debug, Default, PartialEq)]
struct Shown {
    phase: String,
    started: BTreeSet<String>,
    executed: BTreeSet<String>,
    message: String,
}

/// What changed of the steps from `before` to `now`: each step that finished, then each that
/// started; a step that finished between two looks, never seen running, `started and finished`.
fn step_lines(before: &Shown, now: &Shown) -> Vec<String> {
    let finished = now.executed.difference(&before.executed).map(|step| {
        if before.started.contains(step) {
            format!("step {step} finished")
        } else {
            format!("step {step} started and finished")
        }
    });
    let started = now.started.difference(&before.started);
    let started = started.map(|step| format!("step {step} started"));
    finished.chain(started).collect()
}

/// Prints a line whenever a workflow's status changes, and each step starting and finishing.
/// With `until_done`, returns once every listed workflow is terminal.
async fn follow_workflows(
    client: kube::Client,
    until_done: Option<&BTreeSet<(String, String)>>,
) -> Result<ExitCode> {
    let start = std::time::Instant::now();
    let api: Api<WorkFlow> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let mut shown: BTreeMap<(String, String), Shown> = BTreeMap::new();
    let mut terminal: BTreeMap<(String, String), Option<bool>> = BTreeMap::new();
    while let Some(event) = events.next().await {
        let workflow = match event {
            Ok(watcher::Event::Apply(wf) | watcher::Event::InitApply(wf)) => wf,
            Ok(_) => continue,
            Err(error) => {
                tracing::warn!(%error, "watching workflows");
                continue;
            }
        };
        let key = (
            workflow.metadata.namespace.clone().unwrap_or_default(),
            workflow.metadata.name.clone().unwrap_or_default(),
        );
        let status = serde_json::to_value(&workflow.status).unwrap_or(Value::Null);
        let strings = |field: &str| -> BTreeSet<String> {
            status
                .get(field)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let now = Shown {
            phase: status
                .get("workflow-status")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            started: strings("started"),
            executed: strings("executed"),
            message: status
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        };
        let before = shown.remove(&key).unwrap_or_default();
        let name = format!("{}/{}", key.0, key.1);
        for line in step_lines(&before, &now) {
            println!("{} {name}: {line}", elapsed(start));
        }
        if now.phase.is_empty() {
            // Not picked up by the operator yet: nothing to say beyond `created` above.
        } else if now.phase != before.phase || now.message != before.message {
            let progress = status.get("progress").and_then(Value::as_str).unwrap_or("");
            let message = if now.message.is_empty() {
                String::new()
            } else {
                format!(": {}", now.message)
            };
            println!(
                "{} workflow {name} {} {progress}{message}",
                elapsed(start),
                now.phase
            );
        }
        // Terminal for the current spec: a status written for an older generation is stale.
        let generation = workflow.metadata.generation;
        let observed = status.get("observedGeneration").and_then(Value::as_i64);
        let outcome = match now.phase.as_str() {
            "Completed" | "Failed" if observed == generation => Some(now.phase == "Completed"),
            _ => None,
        };
        terminal.insert(key.clone(), outcome);
        shown.insert(key, now);
        if let Some(wanted) = until_done {
            let outcomes: Option<Vec<bool>> = wanted
                .iter()
                .map(|k| terminal.get(k).copied().flatten())
                .collect();
            if let Some(outcomes) = outcomes {
                let all_completed = outcomes.into_iter().all(|completed| completed);
                return Ok(if all_completed {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                });
            }
        }
    }
    bail!("the workflow watch ended unexpectedly")
}

/// `[  1.25s]`: time since the control plane came up, for the progress lines.
fn elapsed(start: std::time::Instant) -> String {
    format!("[{:6.2}s]", start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(started: &[&str], executed: &[&str]) -> Shown {
        Shown {
            started: started.iter().map(|s| s.to_string()).collect(),
            executed: executed.iter().map(|s| s.to_string()).collect(),
            ..Shown::default()
        }
    }

    #[test]
    fn a_step_that_finished_between_two_looks_is_shown_starting_too() {
        let before = shown(&["a"], &[]);
        let now = shown(&["d"], &["a", "b"]);
        assert_eq!(
            step_lines(&before, &now),
            [
                "step a finished",
                "step b started and finished",
                "step d started"
            ]
        );
    }
}
