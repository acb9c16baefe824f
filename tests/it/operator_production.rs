//! The operator as it runs in production: a separate process (`workflow-operator run`) with
//! `/healthz`, `/readyz` and `/metrics`, and two replicas with leader election against one
//! control plane.

use crate::run_process;

use kube_devcluster::testing::eventually;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, PostParams};
use workflow_operator_core::crd::WorkFlow;

use run_process::{
    cluster_with_crd, free_addr, get, metric, spawn_operator, spawn_operator_logging,
    wait_completed,
};

fn diamond(name: &str) -> WorkFlow {
    WorkFlow::test(name)
        .step("a", &[])
        .command(&["true"])
        .step("b", &["a"])
        .command(&["true"])
        .step("c", &["a"])
        .command(&["true"])
        .step("d", &["b", "c"])
        .command(&["true"])
        .namespace("default")
        .build()
}

/// At its default level the operator logs its start and each workflow's phase changes with their
/// messages, a failure as a warning; `--log-format json` makes every line one JSON object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_logs_its_start_and_each_phase_change_as_json_lines() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let cluster = cluster_with_crd().await;
    let mut operator = spawn_operator_logging(&cluster, &["--log-format", "json"]);
    let mut lines = BufReader::new(operator.stderr.take().expect("piped")).lines();
    let api: Api<WorkFlow> = Api::namespaced(cluster.client(), "default");
    let broken = WorkFlow::test("broken")
        .step("a", &[])
        .command(&["false"])
        .namespace("default")
        .build();
    api.create(&PostParams::default(), &broken).await.unwrap();

    let mut seen = Vec::new();
    let failure = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("the log") {
            let entry: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            let fields = &entry["fields"];
            let failed = fields["workflow"] == "default/broken"
                && fields["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("step a failed"));
            seen.push(entry.clone());
            if failed {
                return entry;
            }
        }
        panic!("the log ended without the failure: {seen:#?}");
    })
    .await
    .expect("the failure is logged within 60 s");
    assert_eq!(failure["level"], "WARN", "{failure}");
    let start = seen
        .iter()
        .find(|e| e["fields"]["message"] == "starting the operator")
        .unwrap_or_else(|| panic!("no start-up line in {seen:#?}"));
    assert_eq!(start["level"], "INFO");
    assert_eq!(start["fields"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(start["fields"]["namespace"], "<all>");
    assert!(
        seen.iter()
            .any(|e| e["fields"]["workflow"] == "default/broken" && e["level"] == "INFO"),
        "the start of the workflow is logged too: {seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_shows_counters_moving_during_a_run() {
    let cluster = cluster_with_crd().await;
    let addr = free_addr();
    let _operator = spawn_operator(&cluster, &["--metrics-addr", &addr.to_string()]);
    eventually(
        "/healthz to answer 200",
        Duration::from_secs(30),
        || async { get(addr, "/healthz").await.filter(|(code, _)| *code == 200) },
    )
    .await;
    eventually("/readyz to answer 200", Duration::from_secs(30), || async {
        get(addr, "/readyz").await.filter(|(code, _)| *code == 200)
    })
    .await;
    let (_, before) = get(addr, "/metrics").await.expect("/metrics answers");
    assert_eq!(
        metric(&before, "workflow_operator_steps_started_total"),
        Some(0.0),
        "{before}"
    );

    let api: Api<WorkFlow> = Api::namespaced(cluster.client(), "default");
    api.create(&PostParams::default(), &diamond("scraped"))
        .await
        .unwrap();
    wait_completed(&api, "scraped", Duration::from_secs(60)).await;

    let (_, after) = eventually(
        "the completion to show in /metrics",
        Duration::from_secs(10),
        || async {
            get(addr, "/metrics").await.filter(|(_, body)| {
                metric(body, r#"workflow_operator_workflows{status="Completed"}"#) == Some(1.0)
            })
        },
    )
    .await;
    assert_eq!(
        metric(&after, "workflow_operator_steps_started_total"),
        Some(4.0),
        "{after}"
    );
    assert_eq!(
        metric(
            &after,
            r#"workflow_operator_steps_finished_total{outcome="completed"}"#
        ),
        Some(4.0),
        "{after}"
    );
    assert!(
        after.contains("workflow_operator_handler_duration_seconds"),
        "{after}"
    );
    // One replica without shards caches every workflow: the one it ran.
    assert_eq!(
        metric(&after, "workflow_operator_cached_workflows"),
        Some(1.0),
        "{after}"
    );
}

/// Two replicas with leader election: one does all the work (one Job per step, no duplicates);
/// killing it lets the other finish the run. Prints the measured takeover time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_and_the_standby_takes_over_when_it_dies() {
    let cluster = cluster_with_crd().await;
    let lease = [
        "--leader-election",
        "--leader-election-namespace",
        "default",
        "--lease-duration",
        "3",
    ];
    let mut first = spawn_operator(
        &cluster,
        &[&lease[..], &["--leader-election-identity", "first"]].concat(),
    );
    let client = cluster.client();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let holder = |lease: Option<k8s_openapi::api::coordination::v1::Lease>| {
        lease
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    };
    let leader = eventually("a leader", Duration::from_secs(30), || async {
        holder(leases.get_opt("workflow-operator").await.ok().flatten())
    })
    .await;
    assert_eq!(leader, "first");
    let _second = spawn_operator(
        &cluster,
        &[&lease[..], &["--leader-election-identity", "second"]].concat(),
    );

    // Workflows with a slow last step, so the run is still going when the leader dies.
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), "default");
    for i in 0..20 {
        let workflow = WorkFlow::test(&format!("run-{i}"))
            .step("a", &[])
            .command(&["true"])
            .step("b", &["a"])
            .command(&["sleep", "2"])
            .step("c", &["b"])
            .command(&["true"])
            .namespace("default")
            .build();
        api.create(&PostParams::default(), &workflow).await.unwrap();
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    eventually(
        "the leader to start steps",
        Duration::from_secs(30),
        || async {
            let n = jobs.list(&ListParams::default()).await.ok()?.items.len();
            (n >= 20).then_some(())
        },
    )
    .await;

    first.kill().await.expect("killing the leader");
    let killed = Instant::now();
    let next = eventually(
        "the standby to take over",
        Duration::from_secs(30),
        || async {
            holder(leases.get_opt("workflow-operator").await.ok().flatten())
                .filter(|h| h == "second")
        },
    )
    .await;
    println!(
        "takeover after the leader was killed: {:.2}s (lease 3s)",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(next, "second");

    for i in 0..20 {
        wait_completed(&api, &format!("run-{i}"), Duration::from_secs(90)).await;
    }
    let mut per_step: BTreeMap<(String, String), usize> = BTreeMap::new();
    for job in jobs.list(&ListParams::default()).await.unwrap().items {
        let labels = job.metadata.labels.unwrap_or_default();
        let key = (
            labels["workflow.crd.com/workflow"].clone(),
            labels["workflow.crd.com/step"].clone(),
        );
        *per_step.entry(key).or_default() += 1;
    }
    assert_eq!(per_step.len(), 60, "every step of the 20 workflows ran");
    let duplicated: Vec<_> = per_step.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicated.is_empty(), "duplicate Jobs: {duplicated:?}");
    println!(
        "checked {} Jobs of 20 workflows: one per step",
        per_step.len()
    );
}
