//! Argo's daemon steps end to end on the embedded control plane, written in Argo's YAML and
//! submitted as it is: a daemon serving HTTP (`python3 -m http.server`) with a readiness probe,
//! a step after it fetching from `{{steps.server.ip}}` (and, in a dag, from
//! `{{tasks.server.ip}}` once `server.Daemoned`); the workflow completes while the daemon runs
//! on, and the daemon is stopped when the workflow ends, also by an operator SIGKILLed once the
//! daemon was recorded ready and started again.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use rstest::rstest;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::labels::ANNOTATION_DAEMONED;

use crate::support;

use support::{Gate, JobRecorder, Operator, operator, operator_process, step_of};

/// The daemon's template: a file served on `port` once its probe finds the server up, and the
/// client's, which prints what it fetched from `ip` (the daemon's IP, as the caller fills it).
/// Given `unready`, the daemon's probe fails once that gate opens (it serves on).
fn templates(port: u16, unready: Option<&Gate>) -> String {
    let unready = unready.map_or(String::new(), |gate| {
        format!("({}; rm ready.txt) & ", gate.wait_script())
    });
    format!(
        r#"    - name: server
      daemon: true
      container:
        image: python:3-alpine
        command: [sh, -c]
        args: ["echo hello from the daemon > hello.txt; echo ok > ready.txt; {unready}exec python3 -m http.server {port} --bind 127.0.0.1"]
        readinessProbe:
          httpGet: {{path: /ready.txt, port: {port}}}
          periodSeconds: 1
    - name: client
      inputs:
        parameters: [{{name: ip}}]
      container:
        image: python:3-alpine
        command: [python3, -c]
        args: ["import urllib.request; print(urllib.request.urlopen('http://{{{{inputs.parameters.ip}}}}:{port}/hello.txt', timeout=5).read().decode().strip())"]
"#
    )
}

/// Argo's steps form (examples/daemon-step.yaml's shape).
fn steps(port: u16) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: daemon-steps
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: server
            template: server
        - - name: client
            template: client
            arguments: {{parameters: [{{name: ip, value: "{{{{steps.server.ip}}}}"}}]}}
{}"#,
        templates(port, None)
    )
}

/// Argo's dag form (examples/dag-daemon-task.yaml's shape): the client after `server.Daemoned`.
fn dag(port: u16) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: daemon-dag
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: server
            template: server
          - name: client
            template: client
            depends: server.Daemoned
            arguments: {{parameters: [{{name: ip, value: "{{{{tasks.server.ip}}}}"}}]}}
{}"#,
        templates(port, None)
    )
}

/// Argo's steps form with a step `hold` beside the daemon, waiting for `hold`: the client
/// starts only once both are done. The daemon is unready once `unready` opens.
fn held(port: u16, (hold, unready): (&Gate, &Gate)) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: daemon-killed
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: server
            template: server
          - name: hold
            template: hold
        - - name: client
            template: client
            arguments: {{parameters: [{{name: ip, value: "{{{{steps.server.ip}}}}"}}]}}
    - name: hold
      container:
        image: alpine:3.20
        command: [sh, -c]
        args: ["{}"]
{}"#,
        hold.wait_script(),
        templates(port, Some(unready))
    )
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn pod_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

#[rstest]
#[case::steps(steps as fn(u16) -> String, "daemon-steps")]
#[case::dag(dag as fn(u16) -> String, "daemon-dag")]
#[tokio::test]
async fn a_daemon_serves_the_steps_after_it_and_stops_when_the_workflow_ends(
    #[future(awt)] operator: Operator,
    #[case] workflow: fn(u16) -> String,
    #[case] name: &str,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's pods have IPs of their own; the test serves on 127.0.0.1.
    }
    let ns = &operator.ns;
    let port = free_port();
    let file = support::yaml_file(&workflow(port));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let done: WorkFlow = ns.expect_completed(name).await;
    let server = (done.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == "server")
        .unwrap_or_else(|| panic!("the server's entry in {:?}", done.status));
    assert_eq!(server.phase, StepPhase::Succeeded, "{server:?}");
    assert_eq!(server.reason.as_deref(), Some("Daemoned"), "{server:?}");
    assert_eq!(server.ip.as_deref(), Some("127.0.0.1"), "{server:?}");
    let jobs = ns.jobs_of(name).await;
    let client = jobs.iter().find(|j| step_of(j) == Some("client")).unwrap();
    assert_eq!(ns.job_log(client).await.trim(), "hello from the daemon");
    // Stopped at the workflow's end: its pod no longer runs, and nothing serves its port.
    let server_job = jobs.iter().find(|j| step_of(j) == Some("server")).unwrap();
    assert_daemon_stopped(ns, &server_job.name_any(), port).await;
}

/// Waits until no pod of the daemon's Job `job_name` runs, then checks nothing serves `port`.
async fn assert_daemon_stopped(ns: &support::Namespace, job_name: &str, port: u16) {
    ns.wait_no_pods("the daemon's pod running", |p| {
        let labels = p.metadata.labels.as_ref();
        labels.and_then(|l| l.get("job-name")).map(String::as_str) == Some(job_name)
            && pod_running(p)
    })
    .await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the daemon still serves port {port}"
    );
}

/// The operator SIGKILLed once the daemon's Job records it ready (`workflow.crd.com/daemoned`)
/// and before the step after it may start; while it is down the daemon's probe fails (its Job
/// reports no ready pod). The operator started again takes the daemon as done and its IP from
/// the Job's record (the pod no longer says ready), gives the client that IP, starts no second
/// daemon, and stops the daemon at the end.
#[rstest]
#[tokio::test]
async fn a_daemon_recorded_ready_survives_an_operator_sigkill_and_is_stopped_at_the_end(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process; the daemon serves on 127.0.0.1");
    let mut operator = operator_process;
    let recorder = JobRecorder::start(&operator.ns).await;
    let (port, hold, unready) = (free_port(), Gate::new(), Gate::new());
    let file = support::yaml_file(&held(port, (&hold, &unready)));
    (operator.ns)
        .cli(&["submit", file.path().to_str().unwrap()])
        .await;
    let recorded = |j: &Job| j.annotations().contains_key(ANNOTATION_DAEMONED);
    (operator.ns)
        .wait_step_job("daemon-killed", "server", "recorded ready", recorded)
        .await;
    operator.kill().await;
    unready.open();
    let no_ready_pod = |j: &Job| j.status.as_ref().and_then(|s| s.ready) == Some(0);
    (operator.ns)
        .wait_step_job("daemon-killed", "server", "no ready pod", no_ready_pod)
        .await;
    operator.start();
    let ns = &operator.ns;
    let jobs = ns.jobs_of("daemon-killed").await;
    assert!(
        !jobs.iter().any(|j| step_of(j) == Some("client")),
        "the client waits for hold"
    );
    hold.open();
    let done: WorkFlow = ns.expect_completed("daemon-killed").await;
    let entry = (done.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == "server")
        .unwrap_or_else(|| panic!("the server's entry in {:?}", done.status));
    assert_eq!(entry.reason.as_deref(), Some("Daemoned"), "{entry:?}");
    assert_eq!(entry.ip.as_deref(), Some("127.0.0.1"), "{entry:?}");
    let jobs = ns.jobs_of("daemon-killed").await;
    let client = jobs.iter().find(|j| step_of(j) == Some("client")).unwrap();
    assert_eq!(ns.job_log(client).await.trim(), "hello from the daemon");
    let servers = recorder.jobs_of("daemon-killed", "server");
    assert_eq!(servers.len(), 1, "one daemon Job: {servers:?}");
    assert_daemon_stopped(ns, &servers[0].name, port).await;
}
