//! The WorkFlow operator: the table of handlers, registered in one place, and what it needs at
//! start-up (the CRD installed). `workflow-operator dev` calls [`run`], `workflow-operator run`
//! [`run_monitored`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, CustomResourceExt};

use super::cleanup;
use super::handlers;
use super::kueue_gate::{self, polled as kueue_gate_polled};
use super::kueue_metrics::KueueQueueMetrics;
use super::lock_book::LockBook;
use super::shared::{ControllerState, FIELD_MANAGER, OPERATOR_NAME};
use super::step_queue::{StepQueue, WAKE_CHECK};
use crate::telemetry::metrics::Metrics;
use kube_kopf::{Children, Mirror, Monitor, Operator, OperatorConfig, Slots};
use workflow_operator_core::agent::AgentSource;
use workflow_operator_core::crd::{
    ArtifactRepository, ClusterWorkFlowTemplate, CronWorkFlow, WorkFlow, WorkFlowTemplate,
    WorkFlowTrigger,
};
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs::LABEL_WORKFLOW;
use workflow_operator_core::labels::{LABEL_CRON, LABEL_TRIGGER};
use workflow_operator_core::shards::LABEL_SHARD;

/// How often the `timeouts` timer asks which running workflows are due (an in-memory lookup
/// each): a workflow's pass runs at the first tick at or after the wake its last pass set, from
/// the plan's next deadline, a deferred status write and the full-reconcile safety net
/// ([`handlers::timer_due`]). So a deadline is acted on within this of passing.
pub const TIMEOUT_CHECK: Duration = Duration::from_secs(1);

/// How often a run admitted as a whole by Kueue (`queueScope: Workflow`) reads its Workload
/// while it is not ended: the most an admission or an eviction waits to be acted on.
pub const KUEUE_CHECK: Duration = Duration::from_secs(1);

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// Watch only this namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Handlers run at once over all workflows (one at a time per workflow).
    pub concurrency: usize,
    /// Post an Event per step started and succeeded (an API write each).
    pub step_events: bool,
    /// Where to record Prometheus metrics (served by `run --metrics-addr`).
    pub metrics: Option<Metrics>,
    /// Seconds after a workflow finished when it is deleted, for workflows whose spec sets no
    /// `ttlSecondsAfterFinished`; `None` keeps them.
    pub default_ttl_seconds_after_finished: Option<i64>,
    /// At most this many step Jobs run at once across every watched workflow
    /// (`--max-running-steps`); the others wait as `Queued`, in `spec.priority` order.
    pub max_running_steps: Option<usize>,
    /// Where to share the operator's in-memory copies of the workflows and CronWorkFlows (the
    /// web view reads them).
    pub mirror: Option<Mirrors>,
    /// Where the step agent is copied from into the pods of the steps that need it
    /// ([`default_agent`] by default).
    pub agent: Option<AgentSource>,
    /// The artifact repository of workflows that name none and whose namespace has no
    /// ConfigMap `workflow-artifact-repository` (`--artifact-repository`).
    pub artifact_repository: Option<ArtifactRepository>,
}

/// The image the step agent is copied from when not told (`--agent-image`): the operator's own
/// image as `deploy/` installs it.
pub const DEFAULT_AGENT_IMAGE: &str = "workflow-operator:dev";

/// The step agent beside this program (`workflow-agent` in the same directory, or the one
/// above, where cargo puts a test's binaries), in `image`; `None` when there is none.
pub fn default_agent(image: &str) -> Option<AgentSource> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let path = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("workflow-agent"))
        .find(|p| p.is_file())?;
    Some(AgentSource {
        image: image.to_string(),
        path: path.to_string_lossy().into_owned(),
    })
}

/// The operator's in-memory copies of the objects it watches, to share.
#[derive(Clone, Debug)]
pub struct Mirrors {
    pub workflows: Mirror<WorkFlow>,
    pub crons: Mirror<CronWorkFlow>,
}

impl Mirrors {
    /// Empty mirrors, filled once the operator runs with them.
    pub fn new() -> Self {
        Self {
            workflows: Mirror::new(),
            crons: Mirror::new(),
        }
    }
}

impl Default for Mirrors {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for OperatorOptions {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 64,
            step_events: true,
            metrics: None,
            default_ttl_seconds_after_finished: None,
            max_running_steps: None,
            mirror: None,
            agent: default_agent(DEFAULT_AGENT_IMAGE),
            artifact_repository: None,
        }
    }
}

/// Runs the operator until `shutdown` resolves; running handlers finish first.
///
/// # Errors
/// When the WorkFlow CRD is not installed or cannot be listed.
pub async fn run(
    client: Client,
    options: OperatorOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    run_monitored(client, options, Monitor::new(), shutdown).await
}

/// [`run`], reporting to `monitor` whether the caches are synced and how many workflows are
/// queued and being processed (for `/readyz` and `/metrics`).
///
/// # Errors
/// When the WorkFlow CRD is not installed or cannot be listed.
pub async fn run_monitored(
    client: Client,
    options: OperatorOptions,
    monitor: Monitor,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let services = ReplicaServices::start(&client, &options);
    run_shard(client, options, &services, None, monitor, shutdown).await
}

/// What a replica keeps once, however many shards it holds: the built-in step queue (one
/// count of the cluster's running steps), the lock book, Kueue's queue metrics, and the
/// watches that feed them. They stop when this is dropped.
pub struct ReplicaServices {
    step_queue: Option<Arc<StepQueue>>,
    locks: Arc<LockBook>,
    /// `--concurrency`: the replica's, shared by its shards as their work comes (a fixed part
    /// each would leave a busy shard's workflows waiting beside idle slots).
    slots: Slots,
    _watches: Vec<AbortOnDrop>,
}

impl ReplicaServices {
    /// Starts the watches of the parts `options` asks for.
    pub fn start(client: &Client, options: &OperatorOptions) -> Self {
        let step_queue = options
            .max_running_steps
            .map(|limit| StepQueue::new(limit, options.metrics.clone()));
        let namespace = || options.namespace.clone();
        let locks = LockBook::new();
        // The lock book reads the locks' Leases from a watch of its own.
        let mut watches = vec![AbortOnDrop(tokio::spawn(
            locks.clone().watch(client.clone(), namespace()),
        ))];
        // Kueue's queues, for the metrics only (the operator leaves admission to Kueue).
        if let Some(metrics) = options.metrics.clone() {
            let watch = KueueQueueMetrics::new(metrics).watch(client.clone(), namespace());
            watches.push(AbortOnDrop(tokio::spawn(watch)));
        }
        // The gate counts the Jobs that exist from a watch of its own.
        if let Some(queue) = &step_queue {
            let watch = queue.clone().watch(client.clone(), namespace());
            watches.push(AbortOnDrop(tokio::spawn(watch)));
        }
        Self {
            step_queue,
            locks,
            slots: Slots::new(options.concurrency),
            _watches: watches,
        }
    }

    /// `replicas` (this one among them) take new workflows in from the API server now: each
    /// replica's intake windows grow as fast as one window's share of them
    /// ([`Slots::set_processes`]).
    pub fn set_live_replicas(&self, replicas: usize) {
        self.slots.set_processes(replicas);
    }
}

/// Runs the handlers of the WorkFlows and CronWorkFlows of `shard` (all when `None`), with
/// `services`, until `shutdown` resolves; running handlers finish first.
///
/// # Errors
/// When the WorkFlow CRD is not installed or cannot be listed.
pub async fn run_shard(
    client: Client,
    options: OperatorOptions,
    services: &ReplicaServices,
    shard: Option<u32>,
    monitor: Monitor,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let step_queue = services.step_queue.clone();
    let locks = services.locks.clone();
    let mut shared = ControllerState::new(options.step_events, options.metrics);
    shared.step_queue = step_queue.clone();
    shared.agent = options.agent.clone();
    shared.artifact_repository = options.artifact_repository.clone();
    shared.locks = Some(locks.clone());
    let shared = Arc::new(shared);
    let default_ttl = options.default_ttl_seconds_after_finished;
    let reconcile =
        move |shared: Arc<ControllerState>| move |ctx| handlers::reconcile(shared.clone(), ctx);
    let cleanup = {
        let shared = shared.clone();
        move |ctx| handlers::cleanup(shared.clone(), ctx)
    };
    let in_shard = |selector: &str| match shard {
        Some(shard) => format!("{selector},{LABEL_SHARD}={shard}"),
        None => selector.to_string(),
    };
    let config = OperatorConfig {
        name: OPERATOR_NAME.into(),
        instance: std::env::var("POD_NAME").ok(),
        namespace: options.namespace,
        labels: shard.map(|shard| format!("{LABEL_SHARD}={shard}")),
        concurrency: options.concurrency,
        ..Default::default()
    };
    let cron_mirror = options.mirror.as_ref().map(|m| m.crons.clone());
    let jobs = Children::<JobSummary>::owned().labels(&in_shard(LABEL_WORKFLOW));
    let cron_runs = in_shard(LABEL_CRON);
    let trigger_runs = in_shard(LABEL_TRIGGER);
    let job_changed = {
        let shared = shared.clone();
        move |ctx, jobs: Vec<Arc<JobSummary>>| handlers::reconcile_jobs(shared.clone(), ctx, jobs)
    };
    Operator::new(client, config)
        .with_monitor(monitor)
        .with_slots(services.slots.clone())
        .resource::<WorkFlow>(|r| {
            let r = match &options.mirror {
                Some(mirrors) => r.mirror_to(&mirrors.workflows),
                None => r,
            };
            // `spec.managedBy` naming another controller (MultiKueue): nothing of ours.
            let r = r
                .leave_alone_beside(
                    workflow_operator_core::kueue::managed_elsewhere,
                    kueue_gate::beside_left,
                )
                .on_create("start", reconcile(shared.clone()))
                .on_update_field("spec", "restart", reconcile(shared.clone()))
                .on_update_field("metadata.labels", "relabel", handlers::relabel)
                .on_delete("cleanup", cleanup)
                .on_resume("rebuild", reconcile(shared.clone()))
                .timer("timeouts", TIMEOUT_CHECK, reconcile(shared.clone()))
                .when({
                    let shared = shared.clone();
                    move |wf| handlers::timer_due(&shared, wf)
                })
                .timer("ttl", cleanup::TTL_CHECK, move |ctx| {
                    cleanup::expire(ctx, default_ttl)
                })
                .when(move |wf| cleanup::ttl_expired(wf, default_ttl, Timestamp::now()))
                .on_children("job-changed", jobs, job_changed)
                // Workflows waiting for a lock that was given back are planned again now.
                .timer("locks", WAKE_CHECK, reconcile(shared.clone()))
                .when({
                    let locks = locks.clone();
                    move |wf| locks.take_wake(wf)
                })
                .tick_if(move || locks.any_woken())
                // A run admitted as a whole reads its Workload on each pass: this pass notices
                // an admission or eviction without a watch of Workloads for every operator.
                .timer("kueue", KUEUE_CHECK, reconcile(shared.clone()))
                .when(kueue_gate_polled);
            match step_queue {
                // Workflows the gate woke, as room freed for them, are planned again now.
                Some(queue) => r
                    .timer("admitted", WAKE_CHECK, reconcile(shared.clone()))
                    .when({
                        let queue = queue.clone();
                        move |wf| queue.take_wake(wf)
                    })
                    .tick_if(move || queue.any_woken()),
                None => r,
            }
        })
        .resource::<CronWorkFlow>(|r| {
            let r = match &cron_mirror {
                Some(mirror) => r.mirror_to(mirror),
                None => r,
            };
            crate::controllers::cron::table(r, &cron_runs)
        })
        .resource::<WorkFlowTrigger>(|r| crate::controllers::trigger::table(r, &trigger_runs))
        .run(shutdown)
        .await
        .context("the operator stopped")?;
    // Handlers have finished; statuses they handed over to be written behind are stored now.
    shared.status.settle_all().await;
    Ok(())
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Installs (or updates) the operator's CRDs (`WorkFlow` and the shared templates) and waits
/// until the API serves them.
pub async fn install_crd(client: &Client) -> Result<()> {
    install_crds(client, &workflow_operator_core::crd::crds()).await
}

/// An embedded control plane with the operator's CRDs installed, for the crate's own tests.
#[cfg(test)]
pub(crate) async fn control_plane_with_crds() -> (kube_devcluster::DevCluster, Client) {
    let cluster = kube_devcluster::DevCluster::start(kube_devcluster::DevClusterOptions::default())
        .await
        .expect("control plane starts");
    let client = cluster.client();
    install_crd(&client).await.expect("CRDs install");
    (cluster, client)
}

/// Installs (or updates) `crds` and waits until the API serves them: for a caller that
/// generated them once for many control planes (the tests start one per test).
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> Result<()> {
    for crd in crds {
        install_one(client, crd).await?;
    }
    Ok(())
}

// CRDs are written and read as untyped JSON: `JSONSchemaProps` deserialises one Rust frame
// set per level of the schema, and the templates' schema is deep enough to overflow a 2 MiB
// test thread's stack in a debug build (a real cluster's client never needs the typed form).
async fn install_one(client: &Client, crd: &CustomResourceDefinition) -> Result<()> {
    let api = crd_api(client);
    let name = crd.metadata.name.clone().unwrap_or_default();
    let object: DynamicObject =
        serde_json::from_value(serde_json::to_value(crd).context("a CRD is JSON")?)
            .context("a CRD is an object")?;
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .with_context(|| format!("applying CRD {name}"))?;
    let established = kube::runtime::wait::await_condition(api, &name, is_established);
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .with_context(|| format!("CRD {name} not established after 30s"))??;
    Ok(())
}

/// CustomResourceDefinitions, as untyped objects.
fn crd_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<CustomResourceDefinition>(&()),
    )
}

/// Whether a CRD has condition `Established=True`.
fn is_established(crd: Option<&DynamicObject>) -> bool {
    crd.and_then(|crd| crd.data["status"]["conditions"].as_array())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// Fails fast, saying how to fix it, when one of the operator's CRDs is not installed.
pub async fn check_crd_installed(client: &Client) -> Result<()> {
    let api = crd_api(client);
    // By name only: generating the CRDs' schemas to read their names would cost the operator
    // megabytes of resident memory that the allocator keeps.
    let kinds = [
        (WorkFlow::crd_name(), "WorkFlow"),
        (WorkFlowTemplate::crd_name(), "WorkFlowTemplate"),
        (
            ClusterWorkFlowTemplate::crd_name(),
            "ClusterWorkFlowTemplate",
        ),
    ];
    for (name, kind) in kinds {
        match api.get_metadata_opt(name).await {
            Ok(Some(_)) => {}
            Ok(None) => bail!(
                "the {kind} CRD ({name}) is not installed; install the operator's CRDs with `kubectl apply -f crd/workflow.yaml` or `workflow-operator crd | kubectl apply -f -`"
            ),
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("checking that CRD {name} is installed"));
            }
        }
    }
    Ok(())
}
