//! Smoke test of the embedded control plane through kube-rs: the calls every operator makes.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube_devcluster::{DevCluster, DevClusterOptions};
use serde_json::json;

fn config_map(name: &str, label: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": label}},
        "data": {"k": "v"}
    }))
    .unwrap()
}

#[tokio::test]
async fn kube_client_creates_gets_lists_patches_watches_and_deletes() {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");

    let created = api
        .create(&PostParams::default(), &config_map("one", "a"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.resource_version.is_some());
    api.create(&PostParams::default(), &config_map("two", "b"))
        .await
        .unwrap();

    let err = api
        .create(&PostParams::default(), &config_map("one", "a"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );

    let listed = api
        .list(&ListParams::default().labels("app=a"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("one"));

    let patched = api
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "w");

    // A stale resourceVersion on update is a conflict.
    let mut stale = created.clone();
    stale.data = Some([("k".to_string(), "stale".to_string())].into());
    let err = api
        .replace("one", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );

    let mut events = watcher(api.clone(), watcher::Config::default().labels("app=b")).boxed();
    let first = events.try_next().await.unwrap().unwrap();
    assert!(matches!(first, watcher::Event::Init), "{first:?}");
    let second = events.try_next().await.unwrap().unwrap();
    assert!(
        matches!(second, watcher::Event::InitApply(ref cm) if cm.metadata.name.as_deref() == Some("two"))
    );

    api.delete("one", &DeleteParams::default()).await.unwrap();
    let err = api.get("one").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}
