//! Argo's semaphores end to end, in Argo's YAML submitted as it is: a semaphore's limit is the
//! integer in a ConfigMap key (`configMapKeyRef`), read once when each workflow starts. Two
//! workflows naming the same key (one for its whole run, one on a template) never run at once
//! when it says 1; a limit that is not a whole number fails the workflow naming it.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use rstest::rstest;

use crate::support;

use support::{Operator, operator};

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

#[rstest]
#[tokio::test]
async fn two_workflows_sharing_a_semaphore_of_limit_one_from_a_configmap_never_overlap(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let limits = serde_json::json!({
        "metadata": {"name": "limits"},
        "data": {"db": "1", "bad": "one"},
    });
    let limits = serde_json::from_value(limits).unwrap();
    maps.create(&PostParams::default(), &limits).await.unwrap();
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
