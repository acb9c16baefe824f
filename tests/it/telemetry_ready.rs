//! `/readyz` waits for the operator's caches, and `/metrics` shows its work queue:
//!
//! - through the handler framework, with a child kind whose CRD is not installed yet, which keeps
//!   the initial listing from completing for as long as the test wants: `/readyz` is 503 and the
//!   waiting objects are the queue depth; a leader is unready while a standby is ready;
//! - through `workflow-operator run`, with added API latency: `/readyz` is 503 before the
//!   listings are done, and a burst of workflows on one worker shows in `queue_depth`.

// The framework's test fixtures (the `Widget` resource, the handler `Probe`), shared, not copied.
use crate::kopf_common;
use crate::run_process;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Client, CustomResourceExt};
use kube_devcluster::{DevCluster, DevClusterOptions};
use kube_kopf::{Children, Monitor, Operator, OperatorConfig};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;
use workflow_operator::leader::{LeaderElection, LeaderStatus};
use workflow_operator::telemetry::{Metrics, QueueSample, Readiness, serve};
use workflow_operator_core::crd::WorkFlow;

use kopf_common::{Probe, Widget, eventually};
use run_process::{cluster_with_crd, free_addr, get, metric, spawn_operator, wait_completed};

const DEADLINE: Duration = Duration::from_secs(60);

async fn readyz(addr: SocketAddr) -> u16 {
    get(addr, "/readyz").await.expect("/readyz answers").0
}

/// `(queue_depth, active_workers)` as `/metrics` shows them.
async fn queue(addr: SocketAddr) -> Option<(f64, f64)> {
    let (_, body) = get(addr, "/metrics").await?;
    Some((
        metric(&body, "workflow_operator_queue_depth")?,
        metric(&body, "workflow_operator_active_workers")?,
    ))
}

/// The endpoints of one replica, wired as `workflow-operator run` wires them: the queue gauges
/// read from the monitor; the readiness checks are the test's.
struct Endpoints {
    addr: SocketAddr,
    readiness: Readiness,
    monitor: Monitor,
    _stop: tokio_util::sync::DropGuard,
}

impl Endpoints {
    async fn start() -> Self {
        let (metrics, readiness, monitor) = (Metrics::new(), Readiness::new(), Monitor::new());
        let sampled = monitor.clone();
        metrics.sample_queue(move || QueueSample {
            queued: sampled.queued(),
            running: sampled.running(),
            intake_window: sampled.intake_window(),
        });
        let stop = CancellationToken::new();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            metrics,
            readiness.clone(),
            stop.clone(),
        )
        .await
        .expect("the endpoints serve");
        Self {
            addr,
            readiness,
            monitor,
            _stop: stop.drop_guard(),
        }
    }

    /// The check readiness needs: the monitor's caches are synced.
    fn synced(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let monitor = self.monitor.clone();
        move || monitor.is_synced()
    }
}

/// A namespace with `n` ConfigMaps of ours in it (and whatever the control plane adds).
async fn namespace_with_config_maps(client: &Client, name: &str, n: usize) -> usize {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .expect("the namespace is created");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), name);
    for i in 0..n {
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("map-{i}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &map)
            .await
            .expect("the ConfigMap is created");
    }
    api.list(&ListParams::default())
        .await
        .expect("ConfigMaps list")
        .items
        .len()
}

/// An operator on the ConfigMaps of `namespace` with Widgets as children: until the Widget CRD
/// is installed, the child kind cannot be listed and no handler may run.
fn config_map_operator(client: &Client, namespace: &str, probe: &Arc<Probe>) -> Operator {
    let config = OperatorConfig {
        name: "ready.test".into(),
        namespace: Some(namespace.into()),
        // No resync: the queue only holds what the test caused.
        resync: None,
        ..OperatorConfig::default()
    };
    let probe = probe.clone();
    Operator::new(client.clone(), config).resource::<ConfigMap>(|r| {
        r.on_create("seen", move |ctx| {
            let probe = probe.clone();
            async move {
                let _guard = probe.enter(&ctx);
                Ok(())
            }
        })
        .on_child(
            "widget",
            Children::<Widget>::owned(),
            |_ctx, _widget| async { Ok(()) },
        )
    })
}

async fn install_widget_crd(client: &Client) {
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &Widget::crd())
        .await
        .expect("the Widget CRD installs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_and_objects_are_queued_until_every_kind_is_listed() {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .expect("control plane starts");
    let client = cluster.client();
    let maps = namespace_with_config_maps(&client, "listing", 3).await;
    let endpoints = Endpoints::start().await;
    // As `run` without leader election does.
    endpoints.readiness.set_ready(true);
    endpoints.readiness.add_check(endpoints.synced());
    assert_eq!(
        readyz(endpoints.addr).await,
        503,
        "before the operator runs"
    );

    let probe = Probe::new();
    let operator =
        config_map_operator(&client, "listing", &probe).with_monitor(endpoints.monitor.clone());
    let running = kopf_common::start(operator);

    // Every ConfigMap is listed and has a worker waiting for the Widget listing, which fails
    // until the CRD exists: a state that lasts, so the test can look at it.
    let depth = maps as f64;
    eventually("every ConfigMap to be queued", DEADLINE, || async {
        queue(endpoints.addr).await.filter(|(q, _)| *q == depth)
    })
    .await;
    assert_eq!(
        readyz(endpoints.addr).await,
        503,
        "a child kind is unlisted"
    );
    assert!(!endpoints.monitor.is_synced());
    assert_eq!(queue(endpoints.addr).await, Some((depth, 0.0)));
    assert_eq!(
        probe.count_handler("seen"),
        0,
        "no handler before the listing"
    );

    install_widget_crd(&client).await;
    eventually("/readyz to answer 200", DEADLINE, || async {
        (readyz(endpoints.addr).await == 200).then_some(())
    })
    .await;
    eventually("every ConfigMap to be handled", DEADLINE, || async {
        (probe.count_handler("seen") == maps).then_some(())
    })
    .await;
    eventually("the queue to drain", DEADLINE, || async {
        queue(endpoints.addr)
            .await
            .filter(|sample| *sample == (0.0, 0.0))
    })
    .await;

    running.stop().await;
    assert!(
        !endpoints.monitor.is_synced(),
        "a stopped operator is not synced"
    );
    assert_eq!(readyz(endpoints.addr).await, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_is_unready_until_its_caches_sync_while_a_standby_is_ready() {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .expect("control plane starts");
    let client = cluster.client();
    namespace_with_config_maps(&client, "election", 1).await;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();

    // As `run --leader-election` does: the election sets the flag once it has read the Lease,
    // and its check requires the operator's caches unless the replica stands by.
    let contender = |identity: &str| {
        let client = client.clone();
        let identity = identity.to_owned();
        let shutdown = shutdown.clone();
        async move {
            let endpoints = Endpoints::start().await;
            let election = LeaderElection::new(
                client.clone(),
                "election",
                "operator",
                identity,
                Duration::from_secs(10),
            )
            .with_readiness(endpoints.readiness.clone());
            endpoints
                .readiness
                .add_check(election.readiness_check(endpoints.synced()));
            let status = election.status();
            let probe = Probe::new();
            let operator = config_map_operator(&client, "election", &probe)
                .with_monitor(endpoints.monitor.clone());
            tokio::spawn(async move {
                election
                    .run_while_leader(|leading| operator.run(leading.cancelled_owned()), shutdown)
                    .await
            });
            (endpoints, status)
        }
    };

    let (leader, mut leader_status) = contender("first").await;
    tokio::time::timeout(
        DEADLINE,
        leader_status.wait_for(|s| *s == LeaderStatus::Leader),
    )
    .await
    .expect("the first contender leads in time")
    .expect("its election runs");
    let (standby, mut standby_status) = contender("second").await;
    tokio::time::timeout(
        DEADLINE,
        standby_status.wait_for(|s| matches!(s, LeaderStatus::Standby { .. })),
    )
    .await
    .expect("the second contender stands by in time")
    .expect("its election runs");

    assert_eq!(
        readyz(standby.addr).await,
        200,
        "the standby read the Lease"
    );
    assert_eq!(
        readyz(leader.addr).await,
        503,
        "the leader's child kind is unlisted"
    );
    assert!(!leader.monitor.is_synced());

    install_widget_crd(&client).await;
    eventually("the leader's /readyz to answer 200", DEADLINE, || async {
        (readyz(leader.addr).await == 200).then_some(())
    })
    .await;
    assert_eq!(readyz(standby.addr).await, 200);
    assert!(!standby.monitor.is_synced(), "the standby runs no operator");
}

/// `workflow-operator run` with its endpoints on a free port; killed when dropped.
fn spawn_with_endpoints(cluster: &DevCluster, args: &[&str]) -> (Child, SocketAddr) {
    let addr = free_addr();
    let metrics_addr = addr.to_string();
    let child = spawn_operator(
        cluster,
        &[&["--metrics-addr", &metrics_addr][..], args].concat(),
    );
    (child, addr)
}

fn one_step(name: &str) -> WorkFlow {
    WorkFlow::test(name)
        .step("only", &[])
        .command(&["true"])
        .namespace("default")
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_answers_503_on_readyz_until_its_caches_are_synced() {
    let cluster = cluster_with_crd().await;
    // Every API request takes a second: the endpoints come up after the CRD check, and the
    // operator's listings need at least two more requests, one after the other.
    cluster.faults().set_latency(Duration::from_secs(1));
    let (_operator, addr) = spawn_with_endpoints(&cluster, &[]);

    let (first, _) = eventually("/readyz to answer", DEADLINE, || get(addr, "/readyz")).await;
    assert_eq!(first, 503, "the first answer comes before the listings");
    cluster.faults().set_latency(Duration::ZERO);
    eventually("/readyz to answer 200", DEADLINE, || async {
        (readyz(addr).await == 200).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_depth_rises_during_a_burst_of_workflows_and_returns_to_zero() {
    let cluster = cluster_with_crd().await;
    let (_operator, addr) = spawn_with_endpoints(&cluster, &["--concurrency", "1"]);
    eventually("/readyz to answer 200", DEADLINE, || async {
        get(addr, "/readyz").await.filter(|(code, _)| *code == 200)
    })
    .await;
    assert_eq!(queue(addr).await, Some((0.0, 0.0)), "idle before the burst");
    let (_, body) = get(addr, "/metrics").await.expect("/metrics answers");
    assert_eq!(
        metric(&body, "workflow_operator_intake_window"),
        Some(1.0),
        "no write echoed yet: one new workflow at a time"
    );

    // Slow API calls keep the one worker on each workflow for a while, so the others queue.
    cluster.faults().set_latency(Duration::from_millis(200));
    let api: Api<WorkFlow> = Api::namespaced(cluster.client(), "default");
    let names: Vec<String> = (0..6).map(|i| format!("burst-{i}")).collect();
    let created = join_all(
        names
            .iter()
            .map(|name| async { api.create(&PostParams::default(), &one_step(name)).await }),
    )
    .await;
    for workflow in created {
        workflow.expect("the workflow is created");
    }
    // --concurrency 1: one workflow is processed, the others wait for its slot.
    let (queued, _) = eventually(
        "workflows to queue behind the one worker",
        DEADLINE,
        || async {
            queue(addr)
                .await
                .filter(|(queued, running)| *queued > 0.0 && *running == 1.0)
        },
    )
    .await;
    assert!(queued < 6.0, "one of the burst is running: {queued} queued");
    cluster.faults().set_latency(Duration::ZERO);

    for name in &names {
        wait_completed(&api, name, DEADLINE).await;
    }
    eventually("the queue to drain", DEADLINE, || async {
        queue(addr).await.filter(|sample| *sample == (0.0, 0.0))
    })
    .await;
}
