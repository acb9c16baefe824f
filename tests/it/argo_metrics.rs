//! Argo's custom metrics (`metrics.prometheus`), in an Argo Workflow submitted as it is (written
//! anew after Argo's `examples/custom-metrics.yaml` and `dag-custom-metrics.yaml`): a counter
//! of a failing step's failure, a gauge of its duration, a histogram of another step's output
//! parameter and the workflow's own metrics appear on the operator's `/metrics` with the
//! labels given; an operator restarted while the workflow runs does not record the steps that
//! finished before again, and records those that finish after.

use std::net::SocketAddr;
use std::time::Duration;

use crate::run_process::{get, metric};
use crate::support;

use kube_devcluster::testing::eventually;
use rstest::rstest;
use support::{Gate, Namespace, Operator, namespace};
use workflow_operator_core::crd::StepPhase;

/// `flakey` fails (exit 2), which the DAG survives (`continueOn.failed`); `rand` waits for the
/// test's gate (`GATE`), then writes 3 as its output parameter. The workflow completes (Argo's
/// `Succeeded`).
const CUSTOM_METRICS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: custom-metrics
spec:
  entrypoint: main
  metrics:
    prometheus:
      - name: wf_status_counter
        help: "Workflows by status"
        labels: [{key: status, value: "{{workflow.status}}"}]
        counter: {value: "1"}
      - name: wf_duration_gauge
        help: "Workflow duration"
        labels: [{key: wf, value: custom-metrics}]
        gauge: {value: "{{workflow.duration}}"}
  templates:
    - name: main
      dag:
        tasks:
          - {name: flakey, template: flakey, continueOn: {failed: true}}
          - {name: rand, template: rand}
    - name: flakey
      metrics:
        prometheus:
          - name: result_counter
            help: "Count of step execution by result status"
            labels: [{key: name, value: flakey}]
            when: "{{status}} == Failed"
            counter: {value: "1"}
          - name: success_counter
            help: "Count of successes"
            when: "{{status}} == Succeeded"
            counter: {value: "1"}
          - name: duration_gauge
            help: "Duration gauge by name"
            labels: [{key: name, value: flakey}, {key: exit, value: "{{exitCode}}"}]
            gauge: {value: "{{duration}}", realtime: true}
      container:
        image: alpine:3.20
        command: [sh, -c, "exit 2"]
    - name: rand
      metrics:
        prometheus:
          - name: random_int_step_histogram
            help: "Value of the int emitted by random-int"
            when: "{{status}} == Succeeded"
            histogram:
              buckets: [2.01, 4.01, 6.01]
              value: "{{outputs.parameters.rand-int-value}}"
      container:
        image: alpine:3.20
        command: [sh, -c, "GATE; echo 3 > /tmp/value"]
      outputs:
        parameters:
          - name: rand-int-value
            valueFrom: {path: /tmp/value}
"#;

/// `/metrics` once the operator at `addr` counts `n` Completed workflows.
async fn scrape_when_completed(addr: SocketAddr, n: f64) -> String {
    let completed = r#"workflow_operator_workflows{status="Completed"}"#;
    let (_, text) = eventually(
        "the workflow Completed in /metrics",
        Duration::from_secs(60),
        || async {
            get(addr, "/metrics")
                .await
                .filter(|(_, body)| metric(body, completed) == Some(n))
        },
    )
    .await;
    text
}

/// Whether `ns`'s workflow `name` records its step `step` failed.
async fn failed_recorded(ns: &Namespace, name: &str, step: &str) -> Option<()> {
    let workflow = ns.get(name).await;
    let steps = workflow.status.map(|s| s.steps).unwrap_or_default();
    (steps.iter())
        .any(|s| s.name == step && s.phase == StepPhase::Failed)
        .then_some(())
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_metrics_appear_with_their_labels_once_per_step_across_a_restart(
    #[future(awt)] namespace: Namespace,
) {
    skip_on_real_cluster!("reads the operator process's /metrics; a step waits on a local file");
    let addr = crate::run_process::free_addr();
    let mut operator =
        Operator::process_with_args(namespace, &["--metrics-addr", &addr.to_string()]);
    let gate = Gate::new();
    let file = support::yaml_file(&CUSTOM_METRICS.replace("GATE", &gate.wait_script()));
    operator
        .ns
        .cli(&["submit", file.path().to_str().unwrap()])
        .await;
    let ns = &operator.ns;
    let deadline = Duration::from_secs(60);
    eventually("flakey failed in the status", deadline, || {
        failed_recorded(ns, "custom-metrics", "flakey")
    })
    .await;
    let failed = r#"workflow_operator_result_counter_total{name="flakey"}"#;
    let gauge = r#"workflow_operator_duration_gauge{name="flakey",exit="2"}"#;
    let (_, text) = eventually("flakey's metrics in /metrics", deadline, || async {
        get(addr, "/metrics")
            .await
            .filter(|(_, body)| metric(body, failed) == Some(1.0))
    })
    .await;
    let duration = metric(&text, gauge).unwrap_or_else(|| panic!("{gauge} in {text}"));
    assert!((0.0..60.0).contains(&duration), "{text}");
    assert_eq!(
        metric(&text, "workflow_operator_success_counter_total"),
        None,
        "{text}"
    );
    let histogram = "workflow_operator_random_int_step_histogram";
    assert!(!text.contains(histogram), "rand still runs: {text}");

    // The new process reads flakey's end from the stored status: it records it no more, and
    // records what ends in its time.
    operator.stop().await;
    operator.start();
    gate.open();
    operator.ns.expect_completed("custom-metrics").await;
    let text = scrape_when_completed(addr, 1.0).await;
    assert_eq!(metric(&text, failed), None, "{text}");
    assert_eq!(metric(&text, gauge), None, "{text}");
    for (line, value) in [
        // A family without labels is written with an empty set, `{}`, which Prometheus reads.
        (format!("{histogram}_sum{{}}"), 3.0),
        (format!("{histogram}_count{{}}"), 1.0),
        (format!(r#"{histogram}_bucket{{le="2.01"}}"#), 0.0),
        (format!(r#"{histogram}_bucket{{le="4.01"}}"#), 1.0),
    ] {
        assert_eq!(metric(&text, &line), Some(value), "{line} in {text}");
    }
    let status = r#"workflow_operator_wf_status_counter_total{status="Succeeded"}"#;
    assert_eq!(metric(&text, status), Some(1.0), "{text}");
    let wf = r#"workflow_operator_wf_duration_gauge{wf="custom-metrics"}"#;
    assert!(metric(&text, wf).is_some_and(|d| d > 0.0), "{text}");
}
