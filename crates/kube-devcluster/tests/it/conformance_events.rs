//! Events expire as on the real API server, whose `--event-ttl` (default one hour) puts each
//! Event under an etcd lease: after the TTL since its last write it is gone from gets and lists
//! under both Event APIs, and a watcher sees it `DELETED`. Judged with kubectl, on a control
//! plane started with a short TTL.

use std::process::Stdio;
use std::time::Duration;

use crate::support::Kubectl;
use kube_devcluster::{DevCluster, DevClusterOptions, testing};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn kubectl_sees_an_event_expire_after_the_ttl_with_a_deleted_watch_event() {
    let Some(tools) = testing::require_tools("kubectl_event_ttl") else {
        return;
    };
    let ttl = Duration::from_secs(4);
    let cluster = DevCluster::start(DevClusterOptions {
        event_ttl: Some(ttl),
        ..Default::default()
    })
    .await
    .expect("the devcluster starts");
    let kubectl = Kubectl::new(&cluster, tools.kubectl.clone());
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "demo.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "demo", "namespace": "default"},
        "reason": "Demo", "message": "an event that expires", "type": "Normal",
    });
    let file = kubectl.manifest("event.json", &event.to_string());
    let mut watch = kubectl
        .command(&[
            "get",
            "events",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kubectl watches");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    kubectl.ok(&["create", "-f", &file]).await;
    // Well within the TTL it is there, under both APIs.
    kubectl.ok(&["get", "event", "demo.1"]).await;
    kubectl.ok(&["get", "events.events.k8s.io", "demo.1"]).await;

    let gone = |resource: &'static str| {
        let kubectl = &kubectl;
        async move {
            let out = kubectl.run(&["get", resource, "demo.1"]).await;
            (!out.success && out.stderr.contains("NotFound")).then_some(())
        }
    };
    testing::eventually("the Event to expire", Duration::from_secs(30), || {
        gone("event")
    })
    .await;
    testing::eventually(
        "the events.k8s.io face to expire",
        Duration::from_secs(30),
        || gone("events.events.k8s.io"),
    )
    .await;
    let listed = kubectl.ok(&["get", "events", "-o", "name"]).await;
    assert!(!listed.contains("demo.1"), "{listed}");

    // The watcher saw it added, then deleted (kubectl prints each watch event as an object with
    // its `type`; the Event's own `type` is `Normal`).
    let mut seen = String::new();
    let mut types = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("kubectl's output") {
            let compact: String = line.split_whitespace().collect();
            seen.push_str(&compact);
            for kind in ["ADDED", "MODIFIED", "DELETED"] {
                if compact.contains(&format!("\"type\":\"{kind}\"")) {
                    types.push(kind);
                }
            }
            if types.last() == Some(&"DELETED") {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no DELETED watch event in {seen}"));
    assert_eq!(types, ["ADDED", "DELETED"], "{seen}");
    watch.kill().await.ok();
}
