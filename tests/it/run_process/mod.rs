//! The operator as production runs it, for tests: a control plane with the WorkFlow CRD, a
//! `workflow-operator run` child process, and its HTTP endpoints read over plain HTTP.
#![allow(dead_code)] // each test file uses a part of it

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::wait::await_condition;
use kube_devcluster::{DevCluster, DevClusterOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use workflow_operator::controllers::workflow::operator;
use workflow_operator_core::crd::WorkFlow;

/// An embedded control plane with the WorkFlow CRD installed.
pub async fn cluster_with_crd() -> DevCluster {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .expect("control plane starts");
    operator::install_crds(&cluster.client(), &crate::support::CRDS)
        .await
        .expect("the WorkFlow CRD installs");
    cluster
}

/// A `workflow-operator run` process against the cluster, logging warnings only; killed when
/// dropped.
pub fn spawn_operator(cluster: &DevCluster, args: &[&str]) -> Child {
    operator_command(cluster, args)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the operator binary starts")
}

/// A `workflow-operator run` process at its default log level, its log (standard error) piped
/// for the test to read; killed when dropped.
pub fn spawn_operator_logging(cluster: &DevCluster, args: &[&str]) -> Child {
    operator_command(cluster, args)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the operator binary starts")
}

fn operator_command(cluster: &DevCluster, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_workflow-operator"));
    command
        .arg("run")
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    command
}

/// A free address on 127.0.0.1 (bound, then released for the child to take).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// A plain HTTP/1.0 GET; the status code and body, or `None` while nothing listens.
pub async fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

/// The value of a metric line (`name{labels} value`) in OpenMetrics text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

pub fn is_completed(wf: Option<&WorkFlow>) -> bool {
    wf.and_then(|w| w.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.as_str() == "Completed")
}

pub async fn wait_completed(api: &Api<WorkFlow>, name: &str, deadline: Duration) {
    tokio::time::timeout(deadline, await_condition(api.clone(), name, is_completed))
        .await
        .unwrap_or_else(|_| panic!("workflow {name} not Completed within {deadline:?}"))
        .expect("watching the workflow");
}
