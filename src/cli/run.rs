//! `workflow-operator run`: the operator against a real cluster, from the current kubeconfig or
//! the in-cluster service account, with optional leader election and `/healthz`, `/readyz`,
//! `/metrics` endpoints.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::controllers::workflow::operator::{self, Mirrors, OperatorOptions};
use crate::leader::{Ended, LeaderElection};
use crate::telemetry::http::{self, Readiness};
use crate::telemetry::metrics::{Metrics, QueueSample};
use crate::triggers::{self, Receiver};
use crate::web;
use kube_kopf::Monitor;
use workflow_operator_core::agent::AgentSource;
use workflow_operator_core::crd::ArtifactRepository;

/// Run the operator. Credentials come from `--kubeconfig` (and `--context`), else `KUBECONFIG` /
/// `~/.kube/config`, or from the pod's service account when running in a cluster. The WorkFlow
/// CRD must be installed (`kubectl apply -f crd/workflow.yaml`).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, short = 'n', env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Handlers run at once, over all workflows (one at a time per workflow); with `--shards`,
    /// over this replica's shards, shared among them as their work comes.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Do not post the Events naming the steps started and succeeded (one per status write;
    /// lifecycle Events, failures included, are always posted).
    #[arg(long)]
    no_step_events: bool,
    /// Delete finished workflows this many seconds after they finished (Completed or Failed),
    /// with their Jobs and pods, unless their spec sets `ttlSecondsAfterFinished`. Off when not
    /// given: finished workflows stay.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(0..))]
    default_ttl_seconds_after_finished: Option<i64>,
    /// Run at most this many steps at once, across every workflow and namespace: the other
    /// steps wait as `Queued` and start in `spec.priority` order (higher first, then the older
    /// workflow) as running ones finish. Workflows with `spec.queueName` are left to Kueue.
    /// Off when not given. Not with `--shards` above 1 (use Kueue there).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_running_steps: Option<u32>,
    /// The image the step agent is copied from into the pods of steps that need it (a
    /// `source`, outputs from files, artifacts, a `result` read): the operator's own image.
    #[arg(long, value_name = "IMAGE", env = "WORKFLOW_AGENT_IMAGE", default_value = operator::DEFAULT_AGENT_IMAGE)]
    agent_image: String,
    /// The step agent's path in `--agent-image`; default: `workflow-agent` beside this program.
    #[arg(long, value_name = "PATH")]
    agent_path: Option<String>,
    /// A YAML file naming the artifact repository of workflows that set no
    /// `spec.artifactRepository` and whose namespace has no ConfigMap
    /// `workflow-artifact-repository`, e.g. `s3: {endpoint: https://..., bucket: wf,
    /// credentialsSecret: {name: s3-creds}}` (the Secret is read in each workflow's namespace).
    #[arg(long, value_name = "FILE")]
    artifact_repository: Option<std::path::PathBuf>,
    /// Serve `/healthz`, `/readyz` and `/metrics` (Prometheus) on this address, e.g.
    /// `0.0.0.0:8080`. Off when not given. `/readyz` answers 200 once the operator's caches of
    /// workflows and Jobs are synced; with `--leader-election`, a standby answers 200 once it
    /// has read the Lease, and a new leader 503 again until its caches are synced.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// Serve the web view (the workflows, their DAGs and steps, live; read-only, plain HTTP,
    /// no authentication) on this address, e.g. `127.0.0.1:8081`; reach it in a cluster with
    /// `kubectl port-forward`. Off when not given.
    #[arg(long, value_name = "ADDR")]
    web_addr: Option<SocketAddr>,
    /// Serve the WorkFlowTrigger receiver (`POST /triggers/<namespace>/<name>`: webhook
    /// deliveries and S3 bucket notifications, each starting one run) on this address, e.g.
    /// `0.0.0.0:8082`; printed as `triggers at http://ADDR`. Every replica serves it, leader or
    /// not. Off when not given.
    #[arg(long, value_name = "ADDR")]
    triggers_addr: Option<SocketAddr>,
    /// Run as one of several replicas: only the holder of a Lease handles workflows; a standby
    /// takes over when the leader dies (after the lease duration) or stops (at once).
    #[arg(long)]
    leader_election: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "workflow-operator")]
    leader_election_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "workflow-operator")]
    leader_election_lease: String,
    /// This replica's identity in the Lease (default: the pod name, else the host name).
    #[arg(long, env = "POD_NAME")]
    leader_election_identity: Option<String>,
    /// How long a Lease not renewed stays valid: the longest a standby waits after the leader
    /// died. Renewal happens well within it.
    #[arg(long, default_value = "10", value_name = "SECONDS")]
    lease_duration: u64,
    /// Share the work among replicas by this many shards: each WorkFlow and CronWorkFlow
    /// belongs to one (the label `workflow.crd.com/shard`), each shard is worked by the one
    /// replica holding its Lease (`workflow-operator-shard-<i>` in
    /// `--leader-election-namespace`), and each replica caches only its shards' objects. The
    /// replicas spread the shards evenly and take over a stopped one's within the lease
    /// duration. 1 (the default) is one active replica, with `--leader-election` as before.
    #[arg(long, default_value_t = 1, value_name = "S", value_parser = clap::value_parser!(u32).range(1..=1000))]
    shards: u32,
}

/// The User-Agent of the operator's API requests.
pub const USER_AGENT: &str = concat!("workflow-operator/", env!("CARGO_PKG_VERSION"));

pub async fn run(args: RunArgs, cluster: super::client::ClusterArgs) -> ExitCode {
    match run_operator(args, cluster).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the web view on `addr` from mirrors the operator will share; returns them.
async fn serve_web(
    addr: SocketAddr,
    client: &kube::Client,
    namespace: Option<String>,
    shutdown: &CancellationToken,
) -> Result<Mirrors> {
    let mirror = Mirrors::new();
    let state = web::WebState {
        mirror: mirror.workflows.clone(),
        crons: mirror.crons.clone(),
        client: client.clone(),
        namespace,
        shutdown: shutdown.clone(),
    };
    let bound = web::serve(addr, state).await?;
    tracing::info!(url = %format!("http://{bound}/"), "serving the web view");
    Ok(mirror)
}

/// Serves the WorkFlowTrigger receiver on `addr`, counting into `metrics`; prints its URL.
async fn serve_triggers(
    addr: SocketAddr,
    client: &kube::Client,
    namespace: Option<String>,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<()> {
    let receiver = Receiver::new(client.clone(), namespace, Some(metrics.clone()), shutdown);
    let bound = triggers::serve(addr, receiver, shutdown.clone()).await?;
    println!("triggers at http://{bound}");
    tracing::info!(url = %format!("http://{bound}"), "serving the triggers receiver");
    Ok(())
}

async fn run_operator(args: RunArgs, cluster: super::client::ClusterArgs) -> Result<ExitCode> {
    if args.shards > 1 && args.max_running_steps.is_some() {
        // The built-in queue keeps its one count of running steps, and its one line, in one
        // process; replicas each admitting would go past the limit.
        anyhow::bail!(
            "--max-running-steps needs one active replica: with --shards {} use Kueue \
             (spec.queueName) to limit the steps running across replicas",
            args.shards
        );
    }
    let mut config = cluster.config().await?;
    // Named requests show up as ours in audit logs (and in the devcluster's request counters).
    config.headers.push((
        ::http::header::USER_AGENT,
        ::http::HeaderValue::from_static(USER_AGENT),
    ));
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    operator::check_crd_installed(&client).await?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        namespace = args.namespace.as_deref().unwrap_or("<all>"),
        leader_election = args.leader_election,
        "starting the operator"
    );

    let metrics = Metrics::new();
    let monitor = Monitor::new();
    {
        let monitor = monitor.clone();
        metrics.sample_queue(move || QueueSample {
            queued: monitor.queued(),
            running: monitor.running(),
            intake_window: monitor.intake_window(),
        });
    }
    let readiness = Readiness::new();
    let shutdown = CancellationToken::new();
    if let Some(addr) = args.metrics_addr {
        let bound = http::serve(addr, metrics.clone(), readiness.clone(), shutdown.clone())
            .await
            .context("serving /healthz, /readyz and /metrics")?;
        tracing::info!(%bound, "serving /healthz, /readyz and /metrics");
    }
    {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            crate::cli::shutdown_signal().await;
            tracing::info!("shutting down: running handlers finish first");
            shutdown.cancel();
        });
    }
    if let Some(addr) = args.triggers_addr {
        serve_triggers(addr, &client, args.namespace.clone(), &metrics, &shutdown).await?;
    }
    let mirror = match args.web_addr {
        Some(addr) => Some(serve_web(addr, &client, args.namespace.clone(), &shutdown).await?),
        None => None,
    };
    let mut options = operator_options(&args, mirror, &metrics)?;
    if args.shards > 1 {
        run_shards(&args, client, options, readiness, shutdown).await?;
        return Ok(ExitCode::SUCCESS);
    }
    // The operator's own cache, shared with the web view when there is one.
    let workflows = options.mirror.get_or_insert_default().workflows.clone();
    metrics.sample_cached_workflows(move || workflows.len());
    // A replica running the operator is ready only once its caches hold the initial listings:
    // before that it has not seen the workflows it is responsible for.
    let synced = {
        let monitor = monitor.clone();
        move || monitor.is_synced()
    };
    let operate = {
        let client = client.clone();
        move |stop: CancellationToken| {
            operator::run_monitored(client, options, monitor, stop.cancelled_owned())
        }
    };

    if !args.leader_election {
        // The API server answered (the CRD check): only the caches remain to wait for.
        readiness.set_ready(true);
        readiness.add_check(synced);
        operate(shutdown).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let election = LeaderElection::new(
        client.clone(),
        &args.leader_election_namespace,
        &args.leader_election_lease,
        identity(&args),
        Duration::from_secs(args.lease_duration.max(1)),
    )
    .with_metrics(metrics)
    .with_readiness(readiness.clone());
    readiness.add_check(election.readiness_check(synced));
    tracing::info!(
        lease = %format!("{}/{}", args.leader_election_namespace, args.leader_election_lease),
        "standing by until this replica holds the Lease"
    );
    let ended = election.run_while_leader(operate, shutdown).await;
    match ended {
        Ended::Finished(result) | Ended::Shutdown(Some(result)) => {
            result.map(|()| ExitCode::SUCCESS)
        }
        Ended::Shutdown(None) => Ok(ExitCode::SUCCESS),
        Ended::LostLeadership(_) => {
            // Exit so a restart rejoins the election with fresh state, as client-go users do.
            eprintln!("error: lost leadership of the Lease; exiting");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `run --shards S` with S above 1: this replica's share of the work, until `shutdown`.
async fn run_shards(
    args: &RunArgs,
    client: kube::Client,
    options: OperatorOptions,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<()> {
    let sharding = crate::shards::ShardOptions {
        shards: args.shards,
        namespace: args.leader_election_namespace.clone(),
        group: args.leader_election_lease.clone(),
        identity: identity(args),
        lease_duration: Duration::from_secs(args.lease_duration.max(1)),
    };
    tracing::info!(shards = args.shards, identity = %sharding.identity, "sharing the work by shards");
    // The web view shows every shard's workflows: its mirrors follow watches of their own.
    let _web_watches = options
        .mirror
        .clone()
        .map(|mirror| follow_all(mirror, &client, args.namespace.as_deref()));
    crate::shards::run_sharded(client, options, sharding, readiness, shutdown).await
}

/// Fills `mirror` from watches of every WorkFlow and CronWorkFlow (in `namespace`, else all),
/// until the returned tasks are dropped.
fn follow_all(mirror: Mirrors, client: &kube::Client, namespace: Option<&str>) -> [AbortOnDrop; 2] {
    let workflows = match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    };
    let crons = match namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    };
    let followed = mirror.clone();
    [
        AbortOnDrop(tokio::spawn(async move {
            mirror.workflows.follow(workflows).await
        })),
        AbortOnDrop(tokio::spawn(
            async move { followed.crons.follow(crons).await },
        )),
    ]
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The operator's options from `run`'s arguments.
fn operator_options(
    args: &RunArgs,
    mirror: Option<Mirrors>,
    metrics: &Metrics,
) -> Result<OperatorOptions> {
    Ok(OperatorOptions {
        mirror,
        namespace: args.namespace.clone(),
        concurrency: args.concurrency,
        step_events: !args.no_step_events,
        metrics: Some(metrics.clone()),
        default_ttl_seconds_after_finished: args.default_ttl_seconds_after_finished,
        max_running_steps: args.max_running_steps.map(|n| n as usize),
        agent: agent_source(&args.agent_image, args.agent_path.as_deref()),
        artifact_repository: match &args.artifact_repository {
            Some(file) => Some(read_repository(file)?),
            None => None,
        },
    })
}

/// This replica's identity in the Leases: `--leader-election-identity`, else the host name.
fn identity(args: &RunArgs) -> String {
    args.leader_election_identity.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .unwrap_or_else(|_| format!("workflow-operator-{}", std::process::id()))
    })
}

/// Where the step agent is copied from: `path` in `image`, else the one beside this program.
fn agent_source(image: &str, path: Option<&str>) -> Option<AgentSource> {
    match path {
        Some(path) => Some(AgentSource {
            image: image.to_string(),
            path: path.to_string(),
        }),
        None => operator::default_agent(image),
    }
}

/// The artifact repository in `file` (`--artifact-repository`).
fn read_repository(file: &std::path::Path) -> Result<ArtifactRepository> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading --artifact-repository {}", file.display()))?;
    let repository: ArtifactRepository = serde_yaml::from_str(&text)
        .with_context(|| format!("--artifact-repository {}", file.display()))?;
    if let Some(problem) = repository.problem() {
        anyhow::bail!("--artifact-repository {}: {problem}", file.display());
    }
    Ok(repository)
}
