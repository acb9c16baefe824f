//! Fault injection and request counting of the embedded control plane: error rates per verb with
//! real Status bodies (and `Retry-After` on 429), added latency, watches closed periodically,
//! forced 410 Gone, and the per-verb/resource counters benchmarks read. Clients are expected to
//! survive each fault; the kube-rs watcher is shown to.

use crate::support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube_devcluster::DevCluster;
use kube_devcluster::faults::{InjectedError, Verb};
use kube_devcluster::testing;
use serde_json::json;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

fn api(cluster: &DevCluster) -> Api<ConfigMap> {
    Api::namespaced(cluster.client(), "default")
}

/// Runs a kube-rs watcher on its own task, as an operator does; the names of the objects it
/// applies come out of the receiver.
fn spawn_watcher(
    api: &Api<ConfigMap>,
) -> (
    tokio::sync::mpsc::UnboundedReceiver<String>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut objects = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let driver = tokio::spawn(async move {
        while let Some(result) = objects.next().await {
            if let Ok(cm) = result
                && tx.send(cm.metadata.name.unwrap_or_default()).is_err()
            {
                return;
            }
        }
    });
    (rx, driver)
}

/// Waits for the watcher to report `name`.
async fn seen_by(seen: &mut tokio::sync::mpsc::UnboundedReceiver<String>, name: &str) -> bool {
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(seen_name) = seen.recv().await {
            if seen_name == name {
                return true;
            }
        }
        false
    })
    .await;
    found == Ok(true)
}

fn status_of(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_error_rate_fails_that_verbs_requests_with_a_status_body() {
    let cluster = testing::start().await;
    let api = api(&cluster);
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();

    cluster
        .faults()
        .set_error_rate(Verb::Create, 1.0, InjectedError::Internal);
    for name in ["b", "c", "d"] {
        let result = api.create(&PostParams::default(), &config_map(name)).await;
        assert_eq!(status_of(result), (500, "InternalError".into()));
    }
    assert!(api.get("a").await.is_ok(), "other verbs are unaffected");

    cluster
        .faults()
        .set_error_rate(Verb::Patch, 1.0, InjectedError::Conflict);
    let result = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await;
    assert_eq!(status_of(result), (409, "Conflict".into()));

    cluster
        .faults()
        .set_error_rate(Verb::List, 1.0, InjectedError::TooManyRequests);
    let response = support::raw(
        &cluster,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(response.status, 429);
    assert_eq!(response.headers["retry-after"], "1");
    assert_eq!(response.json()["kind"], "Status");
    assert_eq!(response.json()["reason"], "TooManyRequests");

    cluster.faults().clear();
    api.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");
}

#[tokio::test]
async fn added_latency_delays_every_request() {
    let cluster = testing::start().await;
    let api = api(&cluster);
    cluster.faults().set_latency(Duration::from_millis(200));
    let started = tokio::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn watches_are_closed_every_period_and_the_kube_watcher_carries_on() {
    let cluster = testing::start().await;
    let api = api(&cluster);
    cluster
        .faults()
        .close_watches_every(Some(Duration::from_millis(300)));

    // A raw watch without a timeout ends by itself.
    let rv = cluster.store().current_rv().to_string();
    let stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>()).await;
    assert!(ended.is_ok(), "the watch was closed");

    // The kube-rs watcher resumes after each close and still sees every change.
    let (mut seen, driver) = spawn_watcher(&api);
    for i in 0..3 {
        let name = format!("cm-{i}");
        api.create(&PostParams::default(), &config_map(&name))
            .await
            .unwrap();
        assert!(seen_by(&mut seen, &name).await, "{name} seen");
        // The next change comes after the watcher has been closed and has watched again.
        let watches_so_far = cluster.requests().by_verb(Verb::Watch);
        testing::eventually("a re-opened watch", Duration::from_secs(10), || async {
            (cluster.requests().by_verb(Verb::Watch) > watches_so_far).then_some(())
        })
        .await;
    }
    driver.abort();
}

#[tokio::test]
async fn forcing_gone_closes_watches_and_their_resource_versions_expire() {
    let cluster = testing::start().await;
    let api = api(&cluster);
    api.create(&PostParams::default(), &config_map("before"))
        .await
        .unwrap();
    let rv = cluster.store().current_rv().to_string();
    let (mut seen, driver) = spawn_watcher(&api);
    assert_eq!(seen.recv().await.as_deref(), Some("before"));
    let raw = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap();
    testing::eventually("two open watches", Duration::from_secs(10), || async {
        (cluster.open_watches() >= 2).then_some(())
    })
    .await;

    cluster.force_gone();
    let ended = tokio::time::timeout(Duration::from_secs(10), raw.collect::<Vec<_>>()).await;
    assert!(ended.is_ok(), "the open watch was closed");
    let mut resumed = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    match resumed.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }

    // The kube-rs watcher re-lists and goes on.
    api.create(&PostParams::default(), &config_map("after"))
        .await
        .unwrap();
    assert!(seen_by(&mut seen, "after").await);
    driver.abort();
}

#[tokio::test]
async fn request_counters_count_each_verb_and_resource_and_are_served_over_http() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let api = api(&cluster);
    cluster.reset_requests();
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    let _ = api.create(&PostParams::default(), &config_map("a")).await;
    api.get("a").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    let widgets = support::widgets(&cluster, "default");
    widgets
        .create(
            &PostParams::default(),
            &support::widget("w", json!({}), json!({"color": "red"})),
        )
        .await
        .unwrap();
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();

    let counts = cluster.requests();
    assert_eq!(counts.count(Verb::Create, "configmaps"), 3);
    assert_eq!(counts.count(Verb::Get, "configmaps"), 1);
    assert_eq!(counts.count(Verb::List, "configmaps"), 1);
    assert_eq!(counts.count(Verb::Create, "widgets.test.example.com"), 1);
    assert_eq!(
        counts.count(Verb::Patch, "widgets.test.example.com/status"),
        1
    );
    assert_eq!(counts.writes(), 5);
    assert_eq!(counts.total, 7);

    let response = support::raw(
        &cluster,
        "GET",
        "/debug/requests",
        "application/json",
        Vec::new(),
    )
    .await;
    let json = response.json();
    assert_eq!(json["byVerb"]["create"], 4);
    assert!(
        json["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["verb"] == "create" && r["resource"] == "configmaps" && r["code"] == 409),
        "{json}"
    );
}
