//! The end-to-end benchmark behind `workflow-operator bench` and `make bench` (its figures are in
//! docs/performance.md): the embedded control plane in this process with simulated pods, the
//! operator as a separate OS process, `W` workflows of `S` steps submitted at once, and one JSON
//! [`Report`] with makespan, throughput, dispatch latency, API requests, the operator's CPU and
//! memory, and the control plane's own ceiling. With an idle period it also measures the operator
//! sitting on the finished workflows (its memory should stay flat as they pile up).
//!
//! [`crate::cli`] parses the options and prints the report; the parts are
//! [`shape`] (what is submitted), [`timeline`] (what happens when, from the store's change
//! stream), [`wait_order`] (with a semaphore, how fair it was), [`ceiling`], [`procfs`] and
//! [`process`]; [`cron`] is the schedule shape (`--crons`), CronWorkFlows firing instead of
//! workflows submitted; [`artifact`] the artifact shape (`--artifact-mib`), one file through the
//! embedded artifact store against `cp`.
//!
//! # What is counted
//! API requests are those of every client except the benchmark itself, which identifies its own
//! with the user agent [`BENCH_AGENT`]; the control plane's job controller, kubelet and garbage
//! collector work on the store in-process and are no API clients. With the operator started
//! here, "every other client" is the operator alone.
//!
//! The writes of the whole system (`systemWrites`) are every create, update and delete the
//! store committed while the operator's requests were counted, whoever made them: the
//! operator's through the API, and the in-process Job controller's, scheduler's, kubelet's and
//! garbage collector's, less the benchmark's own. On a real cluster each of those is an API
//! request (of kube-controller-manager's Job controller and GC, of kube-scheduler and of the
//! kubelet), which is what
//! bounds a step rate there (docs/performance.md).

pub mod artifact;
pub mod ceiling;
pub mod changes;
pub mod cron;
pub mod process;
pub mod procfs;
pub mod replicas;
pub mod shape;
pub mod timeline;
pub mod wait_order;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::Value;

use crate::controllers::workflow::operator::install_crd;
use ceiling::Ceiling;
use kube_devcluster::faults::Verb;
use kube_devcluster::metrics::RequestCounts;
use kube_devcluster::resources::GroupResource;
use kube_devcluster::{DevCluster, DevClusterOptions, PodMode};
use process::{OperatorProcess, Spawn};
pub use shape::Shape;
use timeline::{Observer, Summary};

/// The user agent of the benchmark's own requests (submissions, the ceiling loop), which are
/// left out of the operator's counts.
pub const BENCH_AGENT: &str = "workflow-operator-bench";

const WORKFLOWS: (&str, &str) = ("workflow.crd.com", "workflows");

/// Errors that stop a benchmark (a run that times out is not one: it is reported).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the embedded control plane: {0}")]
    Cluster(#[from] kube_devcluster::Error),
    #[error("installing the WorkFlow CRD: {0:#}")]
    Crd(anyhow::Error),
    #[error("measuring the control plane's ceiling: {0}")]
    Ceiling(#[source] kube::Error),
    #[error("starting the operator {exe}: {source}")]
    Spawn {
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the operator exited ({status}); the end of its log:\n{log}")]
    OperatorExited { status: String, log: String },
    /// No operator did `what` (e.g. "watched cronworkflows") within `limit`.
    #[error("no operator {what} within {limit:?}{detail}")]
    NoOperator {
        what: String,
        limit: Duration,
        detail: String,
    },
    #[error("submitting workflow {name}: {source}")]
    Submit {
        name: String,
        #[source]
        source: kube::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which operator is measured.
#[derive(Debug, Clone)]
pub enum OperatorUnderTest {
    /// Ours, started as a separate process.
    Spawn(Spawn),
    /// Another one, started by the user against the printed kubeconfig; `pid` (optional) lets
    /// its CPU and memory be read.
    External { pid: Option<u32>, wait: Duration },
}

impl OperatorUnderTest {
    /// How long to wait for the operator to start watching: what the user gave for one
    /// started by hand (`--external-wait-secs`), a minute for ours.
    pub fn wait(&self) -> Duration {
        match self {
            OperatorUnderTest::Spawn(_) => Duration::from_secs(60),
            OperatorUnderTest::External { wait, .. } => *wait,
        }
    }
}

/// The idle measurement of target 4.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    /// How long to watch the operator do nothing.
    pub duration: Duration,
    /// Restart the operator first (only when started here), so it starts on the finished
    /// workflows as after an upgrade.
    pub restart: bool,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub workflows: usize,
    pub steps: usize,
    pub shape: Shape,
    /// Seed of [`Shape::Random`].
    pub seed: u64,
    /// How long each simulated pod runs.
    pub pod_millis: u64,
    pub operator: OperatorUnderTest,
    /// Control plane port (0: any) and kubeconfig path (`None`: a temporary file).
    pub port: u16,
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the workflows.
    pub namespace: String,
    /// How long to run the ceiling loop; `None` skips it.
    pub ceiling: Option<Duration>,
    pub ceiling_workers: usize,
    /// Workflow creates in flight at once.
    pub submit_concurrency: usize,
    /// Workflows submitted per second; `None` submits them all at once (a burst).
    pub submit_rate: Option<f64>,
    /// Give up waiting for the workflows after this long (the report says so).
    pub timeout: Duration,
    pub idle: Option<Idle>,
    /// Every workflow holds one semaphore of this limit for its whole run.
    pub semaphore: Option<u32>,
    /// Every step is cached (`cache.key`) under this key, `{i}` replaced by the workflow's
    /// index: one key for all makes every workflow after the first hit the cache.
    pub cache_key: Option<String>,
    /// Our operator as several processes sharing the work by shards (`run --shards`).
    pub replicas: replicas::Replicas,
}

/// The one JSON object a benchmark prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub config: Config,
    pub machine: Machine,
    pub workflows_completed: usize,
    pub workflows_failed: usize,
    pub timed_out: bool,
    /// From the first submission to the last workflow becoming terminal.
    pub makespan_seconds: f64,
    pub steps_completed: usize,
    pub steps_per_second: f64,
    /// From a step's Job becoming `Complete` to each newly ready dependent's Job existing.
    pub dispatch_latency_ms: Summary,
    /// Dependents created before their dependencies completed (must be 0), and ones whose
    /// dependencies' completions were not seen.
    pub dispatch_early: usize,
    pub dispatch_unmatched: usize,
    pub api: ApiFigures,
    /// Replica 0 with `--replicas`.
    pub operator: Option<ProcessFigures>,
    /// With `--replicas R`: replicas 1 to R-1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ProcessFigures>,
    pub control_plane: ControlPlane,
    pub largest_workflow: Option<ObjectSize>,
    pub idle: Option<IdleFigures>,
    /// With a semaphore: how far the order the workflows took it in is from their
    /// priority-then-age order ([`wait_order`]).
    pub wait_order: Option<wait_order::WaitOrder>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub workflows: usize,
    pub steps: usize,
    pub shape: String,
    pub pod_millis: u64,
    /// Workflows submitted per second; absent: all at once.
    pub submit_rate: Option<f64>,
    /// The limit of the semaphore every workflow holds; absent: none.
    pub semaphore: Option<u32>,
    /// The cache key of every step; absent: not cached.
    pub cache_key: Option<String>,
    /// `spawned` (ours, `run --concurrency N`) or `external`.
    pub operator: String,
    pub concurrency: Option<usize>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
    /// The 1-minute load average when the benchmark started (the machine may be shared).
    pub load_average: f64,
}

/// API requests of the operator, between the moment it was watching and the end of the run.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiFigures {
    /// What is counted (see the module documentation).
    pub counted: &'static str,
    pub total: u64,
    pub writes: u64,
    pub writes_per_step: f64,
    /// Writes of the whole system (see the module documentation).
    pub system_writes: u64,
    pub system_writes_per_step: f64,
    /// The whole system's writes by resource, the benchmark's own included.
    pub system_writes_by_resource: BTreeMap<String, u64>,
    pub by_verb: BTreeMap<String, u64>,
    /// `verb resource` -> requests, e.g. `patch workflows.workflow.crd.com/status`.
    pub by_verb_and_resource: BTreeMap<String, u64>,
    /// Answers other than 2xx: `code verb resource` -> requests.
    pub errors: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessFigures {
    pub pid: u32,
    /// CPU (user + system) from the moment it was watching to the end of the run.
    pub cpu_seconds: f64,
    /// CPU since it started.
    pub cpu_seconds_total: f64,
    /// `VmHWM`: the highest resident memory since it started.
    pub peak_rss_mib: f64,
    pub rss_mib: f64,
    pub log: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    pub ceiling: Option<Ceiling>,
    /// The ceiling divided by the operator's writes per step: the steps per second the control
    /// plane could take at that write rate.
    pub steps_per_second_allowed: Option<f64>,
    /// CPU of this process (control plane, simulated pods and the benchmark's own client)
    /// during the run.
    pub cpu_seconds: f64,
    /// Changes the latency observer missed by falling behind (should be 0).
    pub lost_events: u64,
}

/// The stored size of the largest workflow, and of its parts (compact JSON).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectSize {
    pub name: String,
    pub bytes: usize,
    pub metadata_bytes: usize,
    pub spec_bytes: usize,
    pub status_bytes: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleFigures {
    pub seconds: f64,
    /// Whether the operator was restarted (and had settled) before the idle period.
    pub restarted: bool,
    pub finished_workflows: usize,
    pub operator_cpu_seconds: Option<f64>,
    pub rss_mib_start: Option<f64>,
    pub rss_mib_end: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    /// The operator's API requests during the idle period, by verb.
    pub requests_by_verb: BTreeMap<String, u64>,
}

/// Runs a benchmark.
///
/// # Errors
/// When the control plane or the operator cannot be started, the operator exits, or a workflow
/// cannot be submitted. A run that does not finish within `options.timeout` is reported with
/// `timed_out` set, not as an error.
pub async fn run(options: Options) -> Result<Report> {
    let machine = machine();
    let (cluster, client) =
        start_cluster(options.port, options.kubeconfig.clone(), options.pod_millis).await?;
    let ceiling = match options.ceiling {
        Some(duration) => Some(
            ceiling::measure(
                client.clone(),
                "bench-ceiling",
                duration,
                options.ceiling_workers,
            )
            .await
            .map_err(Error::Ceiling)?,
        ),
        None => None,
    };

    let observer = Observer::start(cluster.store().subscribe());
    let (mut operator, operator_pid) =
        operator_under_test(&cluster, &replica_zero(&options)).await?;
    let others = other_replicas(&cluster, &client, &options).await?;
    cluster.reset_requests();
    let counted_from = Instant::now();
    let operator_start = operator_pid.and_then(sample);
    let others_start = replicas::sample_all(&others);
    let self_start = procfs::sample("self").ok();

    let dependencies = options.shape.dependencies(options.steps, options.seed);
    let started = Instant::now();
    submit(&client, &options, &dependencies).await?;
    let timed_out = !wait_until_terminal(&observer, &mut operator, &options).await?;
    let settled_requests = settle(&cluster, Duration::from_secs(1)).await;
    let counted_to = Instant::now();

    let operator_end = operator_pid.and_then(sample);
    let others_end = replicas::sample_all(&others);
    let self_end = procfs::sample("self").ok();
    let largest_workflow = largest_workflow(&cluster, &options.namespace);

    let idle = match options.idle {
        Some(idle) => {
            Some(measure_idle(&cluster, &mut operator, operator_pid, &options, idle).await?)
        }
        None => None,
    };
    if let Some(process) = operator.take() {
        process.stop(Duration::from_secs(10)).await;
    }
    let replica_figures = replicas::figures(&others, &others_start, &others_end);
    for (process, _) in others {
        process.stop(Duration::from_secs(10)).await;
    }
    let (timeline, lost_events) = observer.finish();

    let dispatches = timeline.dispatches(&dependencies);
    let (workflows_completed, workflows_failed) = timeline.outcomes();
    let makespan = match (timed_out, timeline.last_terminal()) {
        (false, Some(last)) => last.saturating_duration_since(started),
        _ => started.elapsed(),
    };
    let steps_completed = timeline.steps_completed();
    let system_writes = timeline.writes_between(counted_from, counted_to);
    let api = api_figures(&settled_requests, system_writes, steps_completed);
    let steps_per_second_allowed = ceiling
        .as_ref()
        .filter(|_| api.writes_per_step > 0.0)
        .map(|c| round(c.requests_per_second / api.writes_per_step, 1));
    let operator_log = match &options.operator {
        OperatorUnderTest::Spawn(spawn) => Some(spawn.log.clone()),
        OperatorUnderTest::External { .. } => None,
    };
    Ok(Report {
        config: Config::of(&options),
        machine,
        workflows_completed,
        workflows_failed,
        timed_out,
        makespan_seconds: round(makespan.as_secs_f64(), 3),
        steps_completed,
        steps_per_second: round(steps_completed as f64 / makespan.as_secs_f64(), 1),
        dispatch_latency_ms: Summary::of(&dispatches.samples),
        dispatch_early: dispatches.early,
        dispatch_unmatched: dispatches.unmatched,
        api,
        operator: match (operator_pid, operator_start, operator_end) {
            (Some(pid), Some(start), Some(end)) => {
                Some(ProcessFigures::between(pid, &start, &end, operator_log))
            }
            _ => None,
        },
        replicas: replica_figures,
        control_plane: ControlPlane {
            ceiling,
            steps_per_second_allowed,
            cpu_seconds: match (self_start, self_end) {
                (Some(start), Some(end)) => {
                    round(end.cpu.saturating_sub(start.cpu).as_secs_f64(), 2)
                }
                _ => 0.0,
            },
            lost_events,
        },
        largest_workflow,
        idle,
        wait_order: timeline.wait_order(),
    })
}

/// The operator of `options`, as replica 0 when it runs sharded.
fn replica_zero(options: &Options) -> OperatorUnderTest {
    match &options.operator {
        OperatorUnderTest::Spawn(spawn) if options.replicas.sharded() => OperatorUnderTest::Spawn(
            replicas::spawn_of(spawn, 0, options.replicas, &options.namespace),
        ),
        operator => operator.clone(),
    }
}

/// Replicas 1 and up of a sharded operator, started once replica 0 watches, and waited for
/// until the shards are spread over all of them.
async fn other_replicas(
    cluster: &DevCluster,
    client: &kube::Client,
    options: &Options,
) -> Result<Vec<(OperatorProcess, Spawn)>> {
    let OperatorUnderTest::Spawn(spawn) = &options.operator else {
        return Ok(Vec::new());
    };
    if !options.replicas.sharded() {
        return Ok(Vec::new());
    }
    let namespace = &options.namespace;
    let others = replicas::start_others(
        spawn,
        options.replicas,
        namespace,
        cluster.kubeconfig_path(),
    )?;
    let limit = Duration::from_secs(120);
    replicas::wait_spread(client, namespace, options.replicas, limit).await?;
    Ok(others)
}

/// The operator measured: spawned here as a process of its own, or one started by the user,
/// waited for until it watches the workflows; and its pid, when known.
async fn operator_under_test(
    cluster: &DevCluster,
    operator: &OperatorUnderTest,
) -> Result<(Option<OperatorProcess>, Option<u32>)> {
    match operator {
        OperatorUnderTest::Spawn(spawn) => {
            let process = start_operator(cluster, spawn).await?;
            let pid = process.pid();
            Ok((Some(process), Some(pid)))
        }
        OperatorUnderTest::External { wait, pid } => {
            eprintln!(
                "waiting up to {wait:?} for an operator: KUBECONFIG={}",
                cluster.kubeconfig_path().display()
            );
            wait_for_watches(cluster, &[WORKFLOWS], *wait, None).await?;
            Ok((None, *pid))
        }
    }
}

impl Config {
    /// What a run of `options` was.
    fn of(options: &Options) -> Self {
        let (operator, concurrency) = match &options.operator {
            OperatorUnderTest::Spawn(spawn) => ("spawned", Some(spawn.concurrency)),
            OperatorUnderTest::External { .. } => ("external", None),
        };
        Config {
            workflows: options.workflows,
            steps: options.steps,
            shape: options.shape.to_string(),
            pod_millis: options.pod_millis,
            submit_rate: options.submit_rate,
            semaphore: options.semaphore,
            cache_key: options.cache_key.clone(),
            operator: operator.into(),
            concurrency,
        }
    }
}

impl ProcessFigures {
    /// The figures of process `pid` between the samples `start` and `end`.
    fn between(
        pid: u32,
        start: &procfs::Sample,
        end: &procfs::Sample,
        log: Option<PathBuf>,
    ) -> Self {
        ProcessFigures {
            pid,
            cpu_seconds: round((end.cpu.saturating_sub(start.cpu)).as_secs_f64(), 2),
            cpu_seconds_total: round(end.cpu.as_secs_f64(), 2),
            peak_rss_mib: end.peak_rss_mib(),
            rss_mib: end.rss_mib(),
            log,
        }
    }
}

/// The control plane a benchmark runs on (its pods simulated, lasting `pod_millis`), with the
/// CRDs installed, and a [`bench_client`] of it.
async fn start_cluster(
    port: u16,
    kubeconfig: Option<PathBuf>,
    pod_millis: u64,
) -> Result<(DevCluster, kube::Client)> {
    let cluster = DevCluster::start(DevClusterOptions {
        port,
        kubeconfig,
        pods: PodMode::Simulated(Duration::from_millis(pod_millis)),
        job_backoff: kube_devcluster::jobs::JobBackoff::FAST,
        ..Default::default()
    })
    .await?;
    let client = bench_client(cluster.base_url())?;
    install_crd(&client).await.map_err(Error::Crd)?;
    Ok((cluster, client))
}

/// A client for the control plane whose requests carry [`BENCH_AGENT`].
fn bench_client(base_url: &str) -> Result<kube::Client> {
    let url = base_url
        .parse()
        .map_err(|e| kube_devcluster::Error::Url(base_url.to_string(), e))?;
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(BENCH_AGENT),
    ));
    Ok(kube::Client::try_from(config).map_err(kube_devcluster::Error::Client)?)
}

async fn start_operator(cluster: &DevCluster, spawn: &Spawn) -> Result<OperatorProcess> {
    let mut process =
        OperatorProcess::start(spawn, cluster.kubeconfig_path()).map_err(|source| {
            Error::Spawn {
                exe: spawn.exe.clone(),
                source,
            }
        })?;
    let watched = [WORKFLOWS, ("batch", "jobs")];
    wait_for_watches(
        cluster,
        &watched,
        Duration::from_secs(60),
        Some((&mut process, spawn)),
    )
    .await?;
    Ok(process)
}

/// Waits until clients other than the benchmark watch each of `resources`; fails early when the
/// operator process exits.
async fn wait_for_watches(
    cluster: &DevCluster,
    resources: &[(&str, &str)],
    limit: Duration,
    mut process: Option<(&mut OperatorProcess, &Spawn)>,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let counts = cluster.requests();
        let watching = |(group, resource): &(&str, &str)| {
            let name = qualified(group, resource);
            counts.requests.iter().any(|(k, _)| {
                k.verb == Verb::Watch.as_str() && k.resource == name && !is_bench(&k.user_agent)
            })
        };
        if resources.iter().all(watching) {
            return Ok(());
        }
        if let Some((process, spawn)) = process.as_mut()
            && let Some(status) = process.exited()
        {
            return Err(Error::OperatorExited {
                status: status.to_string(),
                log: process::log_tail(&spawn.log, 20),
            });
        }
        if Instant::now() >= deadline {
            let log = process
                .map(|(_, spawn)| {
                    format!(
                        "; the end of its log:\n{}",
                        process::log_tail(&spawn.log, 20)
                    )
                })
                .unwrap_or_default();
            let names: Vec<String> = resources.iter().map(|(g, r)| qualified(g, r)).collect();
            return Err(Error::NoOperator {
                what: format!("watched {}", names.join(" and ")),
                limit,
                detail: log,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `jobs.batch`, `pods`: how the request counters name a resource.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn is_bench(user_agent: &str) -> bool {
    user_agent.starts_with(BENCH_AGENT)
}

async fn submit(
    client: &kube::Client,
    options: &Options,
    dependencies: &[Vec<usize>],
) -> Result<()> {
    let gvk = GroupVersionKind::gvk(WORKFLOWS.0, "v1", "WorkFlow");
    let resource = ApiResource::from_gvk_with_plural(&gvk, WORKFLOWS.1);
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &options.namespace, &resource);
    let mut spec = shape::spec(options.shape, dependencies);
    if let Some(limit) = options.semaphore {
        spec["synchronization"] =
            serde_json::json!({"semaphores": [{"name": "bench", "limit": limit}]});
    }
    let width = options.workflows.to_string().len();
    let start = tokio::time::Instant::now();
    futures::stream::iter(0..options.workflows)
        .map(|i| {
            let name = format!("w{i:0width$}");
            let mut spec = spec.clone();
            if let Some(key) = &options.cache_key {
                shape::cache(&mut spec, &key.replace("{i}", &i.to_string()));
            }
            let manifest = shape::manifest(&name, &options.namespace, &spec);
            let api = api.clone();
            let due = options
                .submit_rate
                .map(|rate| start + Duration::from_secs_f64(i as f64 / rate));
            async move {
                if let Some(due) = due {
                    tokio::time::sleep_until(due).await;
                }
                let object: DynamicObject =
                    serde_json::from_value(manifest).expect("a valid manifest");
                api.create(&PostParams::default(), &object)
                    .await
                    .map(drop)
                    .map_err(|source| Error::Submit { name, source })
            }
        })
        .buffer_unordered(options.submit_concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Waits until every workflow is terminal; `false` when `options.timeout` passed first.
async fn wait_until_terminal(
    observer: &Observer,
    operator: &mut Option<OperatorProcess>,
    options: &Options,
) -> Result<bool> {
    let deadline = tokio::time::Instant::now() + options.timeout;
    let mut progress = observer.progress();
    loop {
        if progress.borrow_and_update().terminal >= options.workflows {
            return Ok(true);
        }
        tokio::select! {
            _ = progress.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
            () = tokio::time::sleep_until(deadline) => return Ok(false),
        }
        if let (Some(process), OperatorUnderTest::Spawn(spawn)) =
            (operator.as_mut(), &options.operator)
            && let Some(status) = process.exited()
        {
            return Err(Error::OperatorExited {
                status: status.to_string(),
                log: process::log_tail(&spawn.log, 20),
            });
        }
    }
}

/// Waits until the operator has made no request for `quiet` (at most 30 s), so that the writes
/// that follow a workflow's last status (Events, progress records) are counted; returns the
/// counts then.
async fn settle(cluster: &DevCluster, quiet: Duration) -> RequestCounts {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = cluster.requests();
    let mut since = Instant::now();
    while Instant::now() < deadline && since.elapsed() < quiet {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = cluster.requests();
        if operator_total(&now) != operator_total(&last) {
            since = Instant::now();
        }
        last = now;
    }
    last
}

fn operator_total(counts: &RequestCounts) -> u64 {
    counts
        .requests
        .iter()
        .filter(|(k, _)| !is_bench(&k.user_agent))
        .map(|(_, n)| n)
        .sum()
}

/// The API figures from the requests `counts` and the store's writes by resource
/// (`system_writes`), per step of `steps`.
fn api_figures(
    counts: &RequestCounts,
    system_writes: BTreeMap<String, u64>,
    steps: usize,
) -> ApiFigures {
    let mut figures = ApiFigures {
        counted: "requests of every API client but the benchmark (user agent workflow-operator-bench): the operator's; the control plane's controllers are in-process and not API clients. systemWrites: every write the store committed meanwhile (operator, Job controller, scheduler, kubelet, garbage collector), less the benchmark's",
        ..Default::default()
    };
    let writes: Vec<&str> = Verb::ALL
        .into_iter()
        .filter(|v| v.is_write())
        .map(Verb::as_str)
        .collect();
    let bench_writes: u64 = (counts.requests.iter())
        .filter(|(k, _)| is_bench(&k.user_agent) && writes.contains(&k.verb))
        .map(|(_, n)| n)
        .sum();
    figures.system_writes = system_writes
        .values()
        .sum::<u64>()
        .saturating_sub(bench_writes);
    figures.system_writes_by_resource = system_writes;
    for (key, n) in counts
        .requests
        .iter()
        .filter(|(k, _)| !is_bench(&k.user_agent))
    {
        figures.total += n;
        if writes.contains(&key.verb) {
            figures.writes += n;
        }
        *figures.by_verb.entry(key.verb.to_string()).or_default() += n;
        *figures
            .by_verb_and_resource
            .entry(format!("{} {}", key.verb, key.resource))
            .or_default() += n;
        if !(200..300).contains(&key.code) {
            *figures
                .errors
                .entry(format!("{} {} {}", key.code, key.verb, key.resource))
                .or_default() += n;
        }
    }
    if steps > 0 {
        figures.writes_per_step = round(figures.writes as f64 / steps as f64, 3);
        figures.system_writes_per_step = round(figures.system_writes as f64 / steps as f64, 3);
    }
    figures
}

fn largest_workflow(cluster: &DevCluster, namespace: &str) -> Option<ObjectSize> {
    let (items, _) = cluster.store().list(
        &GroupResource::new(WORKFLOWS.0, WORKFLOWS.1),
        Some(namespace),
    );
    let largest = items.into_iter().max_by_key(|o| o.json.len())?;
    let part = |field: &str| {
        largest
            .value
            .get(field)
            .map(|v| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0))
            .unwrap_or(0)
    };
    Some(ObjectSize {
        name: largest.name().to_string(),
        bytes: largest.json.len(),
        metadata_bytes: part("metadata"),
        spec_bytes: part("spec"),
        status_bytes: part("status"),
    })
}

async fn measure_idle(
    cluster: &DevCluster,
    operator: &mut Option<OperatorProcess>,
    mut pid: Option<u32>,
    options: &Options,
    idle: Idle,
) -> Result<IdleFigures> {
    let mut restarted = false;
    if let (true, OperatorUnderTest::Spawn(spawn)) = (idle.restart, &options.operator)
        && let Some(process) = operator.take()
    {
        process.stop(Duration::from_secs(10)).await;
        cluster.reset_requests();
        let fresh = start_operator(cluster, spawn).await?;
        pid = Some(fresh.pid());
        *operator = Some(fresh);
        settle(cluster, Duration::from_secs(3)).await;
        restarted = true;
    }
    cluster.reset_requests();
    let start = pid.and_then(sample);
    // The measurement itself: a fixed interval in which nothing is submitted.
    tokio::time::sleep(idle.duration).await;
    let end = pid.and_then(sample);
    let requests = api_figures(&cluster.requests(), BTreeMap::new(), 0).by_verb;
    let (items, _) = cluster.store().list(
        &GroupResource::new(WORKFLOWS.0, WORKFLOWS.1),
        Some(&options.namespace),
    );
    let finished_workflows = items
        .iter()
        .filter(|o| {
            matches!(
                o.value
                    .pointer("/status/workflow-status")
                    .and_then(Value::as_str),
                Some("Completed" | "Failed")
            )
        })
        .count();
    Ok(IdleFigures {
        seconds: idle.duration.as_secs_f64(),
        restarted,
        finished_workflows,
        operator_cpu_seconds: start
            .zip(end)
            .map(|(s, e)| round(e.cpu.saturating_sub(s.cpu).as_secs_f64(), 2)),
        rss_mib_start: start.map(|s| s.rss_mib()),
        rss_mib_end: end.map(|e| e.rss_mib()),
        peak_rss_mib: end.map(|e| e.peak_rss_mib()),
        requests_by_verb: requests,
    })
}

fn sample(pid: u32) -> Option<procfs::Sample> {
    procfs::sample(&pid.to_string()).ok()
}

fn machine() -> Machine {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default();
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        load_average: read("/proc/loadavg")
            .split_whitespace()
            .next()
            .and_then(|l| l.parse().ok())
            .unwrap_or(0.0),
    }
}

fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}
