//! The `pods/eviction` subresource as the Python client and kubectl see it
//! (pkg/registry/core/pod/storage/eviction.go): a running pod gets `DisruptionTarget` then is
//! deleted with the Eviction's `deleteOptions`, its kubelet stops it, it ends `Failed` with the
//! condition kept, and its Job counts it failed; bad requests answer the real server's words.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams, ListParams, WatchEvent, WatchParams};
use kube_devcluster::testing::eventually;
use serde_json::Value;

use crate::support::{self, setup};

/// Evicts `pod` of namespace `default` through the Python client
/// (`create_namespaced_pod_eviction`) with `delete_options` (a Python literal) and `dry_run`
/// (the query's, a Python literal); `{"status": code, "body": ...}`.
async fn evict(
    cluster: &kube_devcluster::DevCluster,
    (url_name, body_name): (&str, &str),
    delete_options: &str,
    dry_run: &str,
) -> Value {
    let script = format!(
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
eviction = {{"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {{"name": "{body_name}", "namespace": "default"}},
            "deleteOptions": {delete_options}}}
kw = {{"dry_run": {dry_run}}} if {dry_run} else {{}}
try:
    r = v1.create_namespaced_pod_eviction("{url_name}", "default", eviction,
                                          _preload_content=False, **kw)
    print(json.dumps({{"status": r.status, "body": json.loads(r.data)}}))
except client.exceptions.ApiException as e:
    print(json.dumps({{"status": e.status, "body": json.loads(e.body)}}))
"#
    );
    support::python(cluster, &script).await
}

/// The Job's one pod, once it runs.
async fn running_pod(cluster: &kube_devcluster::DevCluster, job: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let params = ListParams::default().labels(&format!("job-name={job}"));
    eventually("the job's pod to run", Duration::from_secs(30), || async {
        let list = pods.list(&params).await.ok()?;
        let pod = list.items.into_iter().next()?;
        let phase = pod.status.as_ref()?.phase.as_deref()?;
        (phase == "Running").then_some(pod)
    })
    .await
}

fn disruption_target(pod: &Pod) -> Option<(String, String, String)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "DisruptionTarget")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// A Job's running pod, evicted with `gracePeriodSeconds: 5`: 201 `Success`; the pod is marked
/// `DisruptionTarget` before its deletion starts, is deleted with the Eviction's grace period,
/// ends `Failed` (its `sleep` killed by SIGTERM, exit code 143) with the condition kept, and
/// goes; the Job counts it failed.
#[tokio::test]
async fn an_evicted_pod_is_marked_then_stopped_and_its_job_counts_it_failed() {
    let Some((cluster, kubectl)) = setup("an_evicted_pod_is_marked_then_stopped").await else {
        return;
    };
    kubectl.create_sleeping_job("j").await;
    let pod = running_pod(&cluster, "j").await;
    let name = pod.metadata.name.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let rv = pod.metadata.resource_version.clone().unwrap();
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = pods.watch(&params, &rv).await.unwrap().boxed();

    let out = evict(
        &cluster,
        (&name, &name),
        r#"{"gracePeriodSeconds": 5}"#,
        "None",
    )
    .await;
    assert_eq!(out["status"], 201, "{out}");
    assert_eq!(
        out["body"],
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Success", "code": 201}),
        "{out}"
    );

    let mut seen = Vec::new();
    let last = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.try_next().await.unwrap() {
            match event {
                WatchEvent::Modified(pod) => seen.push(pod),
                WatchEvent::Deleted(pod) => return pod,
                WatchEvent::Bookmark(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("the watch ended before the pod went")
    })
    .await
    .expect("the evicted pod goes within 30 s");

    let first = &seen[0];
    let condition = (
        "True".to_string(),
        "EvictionByEvictionAPI".to_string(),
        "Eviction API: evicting".to_string(),
    );
    assert_eq!(disruption_target(first), Some(condition.clone()));
    assert!(first.metadata.deletion_timestamp.is_none(), "{first:?}");
    let deleting = seen
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_some())
        .expect("a deletion");
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(5));
    let status = last.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"), "{last:?}");
    assert_eq!(disruption_target(&last), Some(condition));
    let terminated = status.container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .unwrap();
    assert_eq!(terminated.exit_code, 143, "{last:?}");

    let jobs: Api<Job> = Api::namespaced(cluster.client(), "default");
    eventually(
        "the job to count the pod failed",
        Duration::from_secs(10),
        || async {
            let job = jobs.get("j").await.ok()?;
            (job.status?.failed == Some(1)).then_some(())
        },
    )
    .await;
}

/// What the real server answers: a missing pod 404 (`pods "nosuch" not found`), a body naming
/// another pod 400, a `dryRun` other than `All` 422 on `CreateOptions`, a method other than
/// POST 405; a dry run (here from kubectl's `create --raw`, in the query) leaves the pod as it
/// was; discovery lists `pods/eviction` as policy/v1 `Eviction`, verb `create`.
#[tokio::test]
async fn bad_evictions_answer_as_the_real_server_and_a_dry_run_changes_nothing() {
    let Some((cluster, kubectl)) = setup("bad_evictions_answer_as_the_real_server").await else {
        return;
    };
    kubectl.create_sleeping_job("j").await;
    let pod = running_pod(&cluster, "j").await;
    let name = pod.metadata.name.clone().unwrap();

    let missing = evict(&cluster, ("nosuch", "nosuch"), "None", "None").await;
    assert_eq!(missing["status"], 404, "{missing}");
    assert_eq!(missing["body"]["message"], r#"pods "nosuch" not found"#);
    assert_eq!(missing["body"]["reason"], "NotFound");
    let other = evict(&cluster, (&name, "other"), "None", "None").await;
    assert_eq!(other["status"], 400, "{other}");
    assert_eq!(
        other["body"]["message"],
        "name in URL does not match name in Eviction object"
    );
    let dry = evict(&cluster, (&name, &name), "None", r#""Bogus""#).await;
    assert_eq!(dry["status"], 422, "{dry}");
    assert_eq!(
        dry["body"]["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All""#
    );
    let path = format!("/api/v1/namespaces/default/pods/{name}/eviction");
    let get = support::raw(&cluster, "GET", &path, "application/json", Vec::new()).await;
    assert_eq!(get.status, 405);

    let body = format!(
        r#"{{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {{"name": "{name}"}}}}"#
    );
    let file = kubectl.manifest("eviction.json", &body);
    kubectl
        .ok(&[
            "create",
            "--raw",
            &format!("{path}?dryRun=All"),
            "-f",
            &file,
        ])
        .await;
    let after = support::get(&kubectl, "pod", &name)
        .await
        .expect("the pod stays");
    assert!(after["metadata"]["deletionTimestamp"].is_null(), "{after}");
    let conditions = after["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions.iter().all(|c| c["type"] != "DisruptionTarget"),
        "{after}"
    );

    let resources = support::raw(&cluster, "GET", "/api/v1", "application/json", Vec::new())
        .await
        .json();
    let eviction = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .cloned();
    assert_eq!(
        eviction,
        Some(
            serde_json::json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                                "group": "policy", "version": "v1", "kind": "Eviction",
                                "verbs": ["create"]})
        )
    );
}

/// kube-rs' `Api::<Pod>::evict` (a body with neither `kind` nor `apiVersion`, as the real
/// server's decoder defaults them) evicts the pod as the Python client's request does. The
/// pod is watched from before the eviction: once marked it is deleted, and may be gone by the
/// time a read would ask for it.
#[tokio::test]
async fn kube_rs_evicts_a_pod() {
    let Some((cluster, kubectl)) = setup("kube_rs_evicts_a_pod").await else {
        return;
    };
    kubectl.create_sleeping_job("j").await;
    let pod = running_pod(&cluster, "j").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let name = pod.metadata.name.clone().unwrap();
    let version = pod.metadata.resource_version.clone().unwrap();
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut changes = pods.watch(&params, &version).await.unwrap().boxed();
    let status = pods.evict(&name, &EvictParams::default()).await;
    assert!(status.is_ok(), "{status:?}");
    let marked = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(change) = changes.try_next().await.unwrap() {
            if let WatchEvent::Modified(pod) | WatchEvent::Deleted(pod) = change
                && disruption_target(&pod).is_some()
            {
                return pod;
            }
        }
        panic!("the watch of {name} ended before the pod was marked");
    })
    .await;
    assert!(marked.is_ok(), "no DisruptionTarget on {name} within 30 s");
}
