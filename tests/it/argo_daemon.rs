//! Argo's daemon steps end to end on the embedded control plane, written in Argo's YAML and
//! submitted as it is: a daemon serving HTTP (`python3 -m http.server`) with a readiness probe,
//! a step after it fetching from `{{steps.server.ip}}` (and, in a dag, from
//! `{{tasks.server.ip}}` once `server.Daemoned`); the workflow completes while the daemon runs
//! on, and the daemon is stopped when the workflow ends.

use k8s_openapi::api::core::v1::Pod;
use rstest::rstest;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;

use crate::support;

use support::{Operator, operator, step_of};

/// The daemon's template: a file served on `port` once its probe finds the server up, and the
/// client's, which prints what it fetched from `ip` (the daemon's IP, as the caller fills it).
fn templates(port: u16) -> String {
    format!(
        r#"    - name: server
      daemon: true
      container:
        image: python:3-alpine
        command: [sh, -c]
        args: ["echo hello from the daemon > hello.txt && exec python3 -m http.server {port} --bind 127.0.0.1"]
        readinessProbe:
          httpGet: {{path: /hello.txt, port: {port}}}
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
        templates(port)
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
        templates(port)
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
    let job_name = server_job.metadata.name.clone().unwrap();
    ns.wait_no_pods("the daemon's pod running", |p| {
        let labels = p.metadata.labels.as_ref();
        labels.and_then(|l| l.get("job-name")) == Some(&job_name) && pod_running(p)
    })
    .await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the daemon still serves port {port}"
    );
}
