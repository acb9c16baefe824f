//! Argo's semaphores end to end, in Argo's YAML submitted as it is: a semaphore's limit is the
//! integer in a ConfigMap key (`configMapKeyRef`), read once when each workflow starts. Two
//! workflows naming the same key (one for its whole run, one on a template) never run at once
//! when it says 1; a limit that is not a whole number fails the workflow naming it; `locks`
//! shows the limit the workflows read, not the ConfigMap's value now.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use rstest::rstest;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::locks::LABEL_LOCK;

use crate::support;

use support::{DEADLINE, Gate, Operator, operator, wait_list};

/// `whole` holds the semaphore of `limits`' key `db` for its whole run (Argo's older
/// `semaphore:`); `step` holds it while its one step runs; `bad` reads a key that is no number.
const SHARING: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: sem-whole
spec:
  entrypoint: work
  synchronization:
    semaphore:
      configMapKeyRef: {name: limits, key: db}
  templates:
    - name: work
      container:
        image: alpine:3.20
        command: [sleep, "3"]
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: sem-step
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: work
            template: work
    - name: work
      synchronization:
        semaphores:
          - configMapKeyRef: {name: limits, key: db}
      container:
        image: alpine:3.20
        command: [sleep, "3"]
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: sem-bad
spec:
  entrypoint: work
  synchronization:
    semaphores:
      - configMapKeyRef: {name: limits, key: bad}
  templates:
    - name: work
      container:
        image: alpine:3.20
        command: [echo, never]
"#;

/// When `job` started and completed, as the Job records them.
fn ran(job: &Job) -> (Timestamp, Timestamp) {
    let status = job.status.as_ref().expect("a finished Job has a status");
    let start = status.start_time.as_ref().expect("a start time").0;
    let end = status
        .completion_time
        .as_ref()
        .expect("a completion time")
        .0;
    (start, end)
}

/// Makes the ConfigMap `limits` with `data`.
async fn limits(ns: &support::Namespace, data: serde_json::Value) -> Api<ConfigMap> {
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let limits = serde_json::json!({"metadata": {"name": "limits"}, "data": data});
    let limits = serde_json::from_value(limits).unwrap();
    maps.create(&PostParams::default(), &limits).await.unwrap();
    maps
}

#[rstest]
#[tokio::test]
async fn two_workflows_sharing_a_semaphore_of_limit_one_from_a_configmap_never_overlap(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    limits(ns, serde_json::json!({"db": "1", "bad": "one"})).await;
    let file = support::yaml_file(SHARING);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let (mut runs, mut workflows) = (Vec::new(), Vec::new());
    for name in ["sem-whole", "sem-step"] {
        workflows.push(ns.expect_completed(name).await);
        let jobs = ns.jobs_of(name).await;
        assert_eq!(jobs.len(), 1, "{name} ran one step");
        runs.push(ran(&jobs[0]));
    }
    runs.sort();
    assert!(
        runs[1].0 >= runs[0].1,
        "the second started after the first ended: {runs:?}"
    );
    for workflow in workflows {
        let recorded = &workflow.status.unwrap().resolved_config_map_keys;
        let db = recorded
            .iter()
            .find(|r| r.key == "db")
            .expect("db is recorded");
        assert_eq!(db.value.as_deref(), Some("1"));
    }
    ns.expect_failed(
        "sem-bad",
        &[
            "limitFrom",
            r#"configmap "limits" key "bad""#,
            r#""one" is not a whole number"#,
        ],
    )
    .await;
}

/// Workflow `name` whose one step holds the semaphore of `limits`' key `db` until `gate` opens.
fn gated(name: &str, gate: &Gate) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: work
            template: work
    - name: work
      synchronization:
        semaphores:
          - configMapKeyRef: {{name: limits, key: db}}
      container:
        image: alpine:3.20
        command: [sh, -c]
        args: ["{}"]
"#,
        gate.wait_script()
    )
}

#[rstest]
#[tokio::test]
async fn locks_shows_the_limit_a_workflow_read_from_its_configmap_and_the_step_waiting(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("the steps wait for a file the test creates");
    let ns = &operator.ns;
    let maps = limits(ns, serde_json::json!({"db": "2"})).await;
    let gate = Gate::new();
    let names = ["sem-a", "sem-b", "sem-c"];
    let manifests: Vec<String> = names.iter().map(|n| gated(n, &gate)).collect();
    let file = support::yaml_file(&manifests.join("---\n"));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    // Two hold the semaphore of 2, the third's step waits, saying so.
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    let config = watcher::Config::default().labels(LABEL_LOCK);
    wait_list(&leases, config, "two holders", DEADLINE, |l| l.len() == 2).await;
    let queued = |wf: &workflow_operator_core::WorkFlow| {
        (wf.status.iter().flat_map(|s| &s.steps)).any(|e| {
            e.phase == StepPhase::Queued
                && (e.message.as_deref().unwrap_or("")).contains("waiting for semaphore limits/db")
        })
    };
    let config = watcher::Config::default();
    wait_list(&ns.workflows(), config, "a step waiting", DEADLINE, |wfs| {
        wfs.iter().any(|wf| queued(wf))
    })
    .await;
    // The key changed since the workflows read it: they count with 2, and so does `locks`.
    let patch = serde_json::json!({"data": {"db": "5"}});
    (maps
        .patch("limits", &PatchParams::default(), &Patch::Merge(&patch))
        .await)
        .unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&ns.cli(&["locks", "-o", "json"]).await).expect("JSON");
    let row = &listed[0];
    assert_eq!(row["lock"], "semaphore/limits/db", "{listed}");
    assert_eq!(row["heldBy"].as_array().map(Vec::len), Some(2), "{listed}");
    assert_eq!(row["waiting"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(row["limits"], serde_json::json!(["2"]), "{listed}");
    let text = ns.cli(&["locks"]).await;
    let line = (text.lines())
        .find(|l| l.starts_with("semaphore/limits/db"))
        .unwrap_or_else(|| panic!("the semaphore's row in {text}"));
    assert_eq!(line.split_whitespace().nth(1), Some("2"), "{text}");
    gate.open();
    for name in names {
        ns.expect_completed(name).await;
    }
}
