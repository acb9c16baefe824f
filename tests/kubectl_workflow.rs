//! A user's kubectl session against `workflow-operator dev`'s pieces (the embedded control plane
//! with the operator running): install the CRD from `crd/`, create an example, wait for it,
//! read it back with the CRD's printer columns, look at its Jobs, pods, logs and Events, and
//! delete it (issue 2 acceptance 1, issue 6 acceptance 3).

use std::path::Path;
use std::time::Duration;

use kube_devcluster::DevCluster;
use tokio_util::sync::CancellationToken;
use workflow_operator::workflow::operator::{self, OperatorOptions};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs kubectl against the cluster; panics with its output unless it succeeds.
async fn kubectl(cluster: &DevCluster, bin: &Path, home: &Path, args: &[&str]) -> String {
    let output = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(args)
        .current_dir(ROOT)
        .env("HOME", home)
        .kill_on_drop(true)
        .output()
        .await
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The cells of the first data row of a `kubectl get` table whose first cell is `name`.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

#[tokio::test]
async fn kubectl_session_runs_the_diamond_example_to_completed_and_deletes_it() {
    let Some(tools) =
        kube_devcluster::testing::require_tools("kubectl_session_runs_the_diamond_example")
    else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cluster = kube_devcluster::testing::start().await;
    let k = |args: &'static [&'static str]| kubectl(&cluster, &tools.kubectl, home.path(), args);

    k(&["apply", "-f", "crd/"]).await;
    k(&[
        "wait",
        "--for=condition=Established",
        "crd/workflows.workflow.crd.com",
        "--timeout=30s",
    ])
    .await;

    let stop = CancellationToken::new();
    let operator = tokio::spawn(operator::run(
        cluster.client(),
        OperatorOptions::default(),
        stop.clone().cancelled_owned(),
    ));

    k(&["create", "-f", "examples/diamond.yaml"]).await;
    k(&[
        "wait",
        "--for=condition=Completed",
        "wf/diamond",
        "--timeout=60s",
    ])
    .await;

    let table = k(&["get", "wf"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "PROGRESS", "MESSAGE", "AGE"],
        "{table}"
    );
    let diamond = row(&table, "diamond");
    assert_eq!(diamond[1..3], ["Completed", "4/4"], "{table}");

    let jobs = k(&[
        "get",
        "jobs",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    let jobs: Vec<&str> = jobs.lines().collect();
    assert_eq!(jobs.len(), 4, "one Job per step: {jobs:?}");
    let pods = k(&[
        "get",
        "pods",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    assert_eq!(pods.lines().count(), 4, "one pod per step: {pods}");

    let step0 = jobs
        .iter()
        .find(|j| j.contains("step0"))
        .expect("the step0 job");
    let logs = kubectl(&cluster, &tools.kubectl, home.path(), &["logs", step0]).await;
    assert_eq!(logs.trim(), "step0");

    let described = k(&["describe", "wf", "diamond"]).await;
    for reason in [
        "StepsStarted",
        "StepStarted",
        "StepSucceeded",
        "AllStepsSucceeded",
    ] {
        assert!(
            described.contains(reason),
            "no {reason} Event in\n{described}"
        );
    }

    k(&["delete", "wf", "diamond", "--wait=true", "--timeout=30s"]).await;
    let left = k(&[
        "get",
        "jobs,pods",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    if !left.trim().is_empty() {
        // Background deletion: wait for the garbage collector rather than assume it is done.
        k(&[
            "wait",
            "--for=delete",
            "jobs,pods",
            "-l",
            "workflow.crd.com/workflow=diamond",
            "--timeout=30s",
        ])
        .await;
    }

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), operator)
        .await
        .expect("the operator stops")
        .expect("the operator task")
        .expect("the operator ran without error");
}
