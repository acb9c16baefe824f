//! Conformance of the embedded API server with the real one, through kube-rs and raw HTTP, at
//! each point where a naive in-memory map would let an operator bug through:
//! optimistic concurrency, 410 Gone, generation, status isolation, schema defaulting and
//! validation, finalizers, name and label validation, selectors, pagination, watch bookmarks,
//! timeouts and selector transitions, the four patch types, immutable Job templates,
//! deletecollection, size limits and metadata-only responses. Each test would fail against a plain map of objects.

use crate::support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube_devcluster::testing;
use kube_devcluster::{DevCluster, DevClusterOptions};
use serde_json::{Value, json};

fn config_map(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cause_fields(error: &Status) -> Vec<String> {
    error
        .details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

async fn config_maps(cluster: &DevCluster) -> Api<ConfigMap> {
    Api::namespaced(cluster.client(), "default")
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    let first = api
        .create(&PostParams::default(), &config_map("cm", json!({})))
        .await
        .unwrap();
    let mut fresh = first.clone();
    fresh.data = Some([("k".into(), "new".into())].into());
    let second = api
        .replace("cm", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );

    let mut stale = first.clone();
    stale.data = Some([("k".into(), "stale".into())].into());
    let error = api_error(api.replace("cm", &PostParams::default(), &stale).await);
    assert_eq!((error.code, error.reason.as_str()), (409, "Conflict"));
    assert_eq!(api.get("cm").await.unwrap().data.unwrap()["k"], "new");

    // Without a resourceVersion, an update is unconditional.
    let mut unconditional = stale;
    unconditional.metadata.resource_version = None;
    api.replace("cm", &PostParams::default(), &unconditional)
        .await
        .unwrap();
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_is_gone() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    let old = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let newer = api
        .create(&PostParams::default(), &config_map("b", json!({})))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    // Before compaction, a watch from the old version replays what followed it.
    let mut replay = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match replay.try_next().await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b ADDED, got {other:?}"),
    }

    cluster.store().compact();
    let mut gone = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match gone.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    // The newest version is still a valid starting point.
    let current = cluster.store().current_rv().to_string();
    let mut fresh = api
        .watch(
            &WatchParams::default().timeout(1).disable_bookmarks(),
            &current,
        )
        .await
        .unwrap()
        .boxed();
    assert!(
        fresh.try_next().await.unwrap().is_none(),
        "no error, no events"
    );
    let _ = newer;
}

/// `metadata.generation` is kept only by kinds whose strategies set it (Pods, Jobs, custom
/// resources, ...; pkg/registry/*/strategy.go `PrepareForCreate`), not by ConfigMaps, Secrets,
/// ServiceAccounts or Namespaces, whose data changes then show no generation either; and the
/// start of a deletion moves it (registry/rest BeforeDelete, store.go markAsDeleting), once, so
/// controllers that filter on generation see an object with finalizers start going.
#[tokio::test]
async fn generation_is_kept_by_the_kinds_that_have_it_and_moves_when_deletion_starts() {
    let Some((cluster, kubectl)) = support::setup("generation_by_kind").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    kubectl
        .ok(&["create", "configmap", "c", "--from-literal=a=1"])
        .await;
    kubectl
        .ok(&["create", "secret", "generic", "s", "--from-literal=a=1"])
        .await;
    kubectl.ok(&["create", "serviceaccount", "sa"]).await;
    kubectl.ok(&["create", "namespace", "n"]).await;
    kubectl.create_sleeping_job("j").await;
    let widget = kubectl.manifest(
        "w.yaml",
        "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  finalizers: [example.com/keep]\nspec:\n  color: red\n",
    );
    kubectl.ok(&["create", "-f", &widget]).await;
    let generation = |what: &'static str| {
        let kubectl = &kubectl;
        async move {
            kubectl
                .ok(&["get", what, "-o", "jsonpath={.metadata.generation}"])
                .await
        }
    };
    kubectl
        .ok(&["patch", "configmap", "c", "-p", r#"{"data":{"a":"2"}}"#])
        .await;
    for what in [
        "configmap/c",
        "secret/s",
        "serviceaccount/sa",
        "namespace/n",
    ] {
        assert_eq!(generation(what).await, "", "{what}");
    }
    assert_eq!(generation("job/j").await, "1");
    assert_eq!(generation("widget/w").await, "1");
    for _ in 0..2 {
        kubectl.ok(&["delete", "widget", "w", "--wait=false"]).await;
        assert_eq!(generation("widget/w").await, "2");
    }
}

#[tokio::test]
async fn generation_moves_only_with_spec_changes() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let api = support::widgets(&cluster, "default");
    let created = api
        .create(
            &PostParams::default(),
            &support::widget("w", json!({}), json!({"color": "red"})),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let pp = PatchParams::default();
    let labelled = api
        .patch(
            "w",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    assert_ne!(
        labelled.metadata.resource_version,
        created.metadata.resource_version
    );
    let with_status = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.metadata.generation, Some(1));
    let respec = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"size": 9}})))
        .await
        .unwrap();
    assert_eq!(respec.metadata.generation, Some(2));
    // A write that changes nothing changes neither generation nor resourceVersion.
    let same = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"size": 9}})))
        .await
        .unwrap();
    assert_eq!(same.metadata.generation, Some(2));
    assert_eq!(
        same.metadata.resource_version,
        respec.metadata.resource_version
    );
}

#[tokio::test]
async fn status_and_spec_writes_ignore_each_other() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let api = support::widgets(&cluster, "default");
    let mut manifest = support::widget("w", json!({"team": "a"}), json!({"color": "red"}));
    manifest.data["status"] = json!({"phase": "Forged"});
    let created = api.create(&PostParams::default(), &manifest).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "create ignores status"
    );

    let pp = PatchParams::default();
    let main = api
        .patch(
            "w",
            &pp,
            &Patch::Merge(json!({"spec": {"size": 5}, "status": {"phase": "Forged"}})),
        )
        .await
        .unwrap();
    assert_eq!(main.data["spec"]["size"], 5);
    assert!(
        main.data.get("status").is_none(),
        "the main resource ignores status"
    );

    let status = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({
                "metadata": {"labels": {"team": "forged"}},
                "spec": {"size": 8},
                "status": {"phase": "Ready"}
            })),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 5, "/status ignores spec");
    assert_eq!(
        status.metadata.labels.unwrap()["team"],
        "a",
        "/status ignores labels"
    );
}

#[tokio::test]
async fn schema_defaults_apply_and_invalid_objects_get_422_with_field_paths() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let api = support::widgets(&cluster, "default");
    let created = api
        .create(
            &PostParams::default(),
            &support::widget(
                "w",
                json!({}),
                json!({"color": "red", "parts": [{"partName": "p0"}, {"partName": "p1", "weight": 5}]}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], 3);
    assert_eq!(created.data["spec"]["parts"][0]["weight"], 1);
    assert_eq!(created.data["spec"]["parts"][1]["weight"], 5);

    let error = api_error(
        api.create(
            &PostParams::default(),
            &support::widget(
                "bad",
                json!({}),
                json!({"color": "red", "size": "big", "parts": [{"partName": "ok"}, {"partName": "Not_OK"}, {}]}),
            ),
        )
        .await,
    );
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        cause_fields(&error),
        [
            "spec.parts[1].partName",
            "spec.parts[2].partName",
            "spec.size"
        ]
    );
    assert!(
        error
            .message
            .starts_with("Widget.test.example.com \"bad\" is invalid: ["),
        "{}",
        error.message
    );

    // Updates are validated and defaulted too: removing a defaulted field brings it back.
    let pp = PatchParams::default();
    let error = api_error(
        api.patch("w", &pp, &Patch::Merge(json!({"spec": {"color": "green"}})))
            .await,
    );
    assert_eq!(cause_fields(&error), ["spec.color"]);
    let reset = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"size": null}})))
        .await
        .unwrap();
    assert_eq!(reset.data["spec"]["size"], 3);
    // Status writes validate the status.
    let error = api_error(
        api.patch_status("w", &pp, &Patch::Merge(json!({"status": {"phase": 7}})))
            .await,
    );
    assert_eq!(cause_fields(&error), ["status.phase"]);
}

#[tokio::test]
async fn a_finalizer_blocks_deletion_until_it_is_removed() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    let mut cm = config_map("held", json!({}));
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();

    api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("held").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // Deleting again changes nothing; the object stays while the finalizer does.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    assert!(api.get("held").await.is_ok());

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let error = api_error(api.get("held").await);
    assert_eq!(error.code, 404);
}

#[tokio::test]
async fn invalid_names_and_labels_are_refused_with_422() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    let long_value = "v".repeat(64);
    let long_name = "n".repeat(254);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("Upper_Case", json!({}), "metadata.name"),
        ("-leading-dash", json!({}), "metadata.name"),
        (&long_name, json!({}), "metadata.name"),
        ("ok-1", json!({"bad key": "v"}), "metadata.labels"),
        (
            "ok-2",
            json!({"UPPER.example.com/x": "v"}),
            "metadata.labels",
        ),
        ("ok-3", json!({"app": "-dash"}), "metadata.labels.app"),
        ("ok-4", json!({"app": long_value}), "metadata.labels.app"),
    ];
    for (name, labels, field) in cases {
        let error = api_error(
            api.create(&PostParams::default(), &config_map(name, labels.clone()))
                .await,
        );
        assert_eq!(
            (error.code, error.reason.as_str()),
            (422, "Invalid"),
            "{name} {labels}"
        );
        assert_eq!(cause_fields(&error), [field], "{name} {labels}");
    }
    api.create(
        &PostParams::default(),
        &config_map(
            "fine.name-1",
            json!({"example.com/Tier_1": "Gold.2", "empty": ""}),
        ),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "web", "tier": "back"})),
        ("c", json!({"app": "db"})),
        ("d", json!({})),
    ] {
        api.create(&PostParams::default(), &config_map(name, labels))
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|cm| cm.metadata.name)
            .filter(|n| n.len() == 1)
            .collect()
    };
    let cases: &[(&str, &str, &[&str])] = &[
        ("app=web", "", &["a", "b"]),
        ("app!=web", "", &["c", "d"]),
        ("tier in (front,side)", "", &["a"]),
        ("app,!tier", "", &["c"]),
        ("app=web", "metadata.name!=a", &["b"]),
        ("", "metadata.name=d", &["d"]),
        ("", "metadata.namespace=default", &["a", "b", "c", "d"]),
        ("", "metadata.namespace=other", &[]),
    ];
    for &(labels, fields, want) in cases {
        let mut params = ListParams::default();
        if !labels.is_empty() {
            params = params.labels(labels);
        }
        if !fields.is_empty() {
            params = params.fields(fields);
        }
        let got = names(api.list(&params).await.unwrap());
        assert_eq!(got, want, "labels {labels:?} fields {fields:?}");
    }
}

#[tokio::test]
async fn pagination_with_limit_and_continue_returns_every_object_once() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    for i in 0..7 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i}"), json!({"page": "t"})),
        )
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut params = ListParams::default().labels("page=t").limit(3);
    let mut list_rv = None;
    loop {
        let page = api.list(&params).await.unwrap();
        pages.push(page.items.len());
        list_rv.get_or_insert(page.metadata.resource_version.clone());
        assert_eq!(
            Some(&page.metadata.resource_version),
            list_rv.as_ref(),
            "every page is at the first page's resourceVersion"
        );
        seen.extend(page.items.into_iter().filter_map(|cm| cm.metadata.name));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, [3, 3, 1]);
    let want: Vec<String> = (0..7).map(|i| format!("cm-{i}")).collect();
    assert_eq!(seen, want);
}

#[tokio::test]
async fn bookmarks_are_sent_only_when_asked_for() {
    let cluster = DevCluster::start(DevClusterOptions {
        bookmark_interval: Some(Duration::from_millis(50)),
        ..Default::default()
    })
    .await
    .unwrap();
    let api = config_maps(&cluster).await;
    let rv = cluster.store().current_rv().to_string();
    let mut with = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(10), with.try_next()).await {
        Ok(Ok(Some(WatchEvent::Bookmark(bookmark)))) => {
            assert!(
                bookmark.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse().unwrap()
            )
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Without bookmarks, a one-second watch (twenty bookmark periods) ends with nothing in it.
    let without: Vec<_> = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(1), &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(without.is_empty(), "{without:?}");
}

#[tokio::test]
async fn watch_timeout_seconds_ends_the_stream() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    let started = tokio::time::Instant::now();
    let rv = cluster.store().current_rv().to_string();
    let stream = api
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), &rv)
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>()).await;
    assert!(ended.is_ok(), "the stream ended by itself");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn a_selective_watch_reports_objects_leaving_and_entering_its_selection() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    api.create(
        &PostParams::default(),
        &config_map("cm", json!({"app": "a"})),
    )
    .await
    .unwrap();
    let rv = cluster.store().current_rv().to_string();
    let mut events = api
        .watch(
            &WatchParams::default().labels("app=a").disable_bookmarks(),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let relabel = |app: &'static str| {
        let api = api.clone();
        async move {
            api.patch(
                "cm",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": app}}})),
            )
            .await
            .unwrap();
        }
    };
    relabel("b").await;
    relabel("c").await; // outside the selection before and after: nothing is sent
    relabel("a").await;
    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        seen.push(match event {
            WatchEvent::Added(cm) => ("ADDED", cm.metadata.labels.unwrap()["app"].clone()),
            WatchEvent::Modified(cm) => ("MODIFIED", cm.metadata.labels.unwrap()["app"].clone()),
            WatchEvent::Deleted(cm) => ("DELETED", cm.metadata.labels.unwrap()["app"].clone()),
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        seen,
        [
            ("DELETED", "b".to_string()),
            ("ADDED", "a".to_string()),
            ("MODIFIED", "a".to_string())
        ]
    );
}

#[tokio::test]
async fn json_merge_strategic_and_apply_patches_each_behave_as_specified() {
    let cluster = testing::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d", "labels": {"keep": "1", "drop": "1"}},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pp = PatchParams::default();
    let containers = |d: &Deployment| -> Vec<(String, String)> {
        d.spec
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .collect()
    };
    let b2 =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}});

    // Strategic merge: the container list merges by name.
    let strategic = api
        .patch("d", &pp, &Patch::Strategic(b2.clone()))
        .await
        .unwrap();
    assert_eq!(
        containers(&strategic),
        [("a".into(), "a:1".into()), ("b".into(), "b:2".into())]
    );
    // JSON merge: the list is replaced; null removes a key.
    let merged = api
        .patch(
            "d",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"drop": null}}, "spec": b2["spec"]})),
        )
        .await
        .unwrap();
    assert_eq!(containers(&merged), [("b".to_string(), "b:2".to_string())]);
    assert_eq!(
        merged.metadata.labels.unwrap().keys().collect::<Vec<_>>(),
        ["keep"]
    );
    // JSON patch: operations, with a failing test operation refusing the whole patch.
    let patched = api
        .patch("d", &pp, &Patch::<()>::Json(serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels/added", "value": "yes"},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "b:3"}
        ])).unwrap()))
        .await
        .unwrap();
    assert_eq!(containers(&patched), [("b".to_string(), "b:3".to_string())]);
    let error = api_error(
        api.patch(
            "d",
            &pp,
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/labels/added", "value": "no"},
                    {"op": "remove", "path": "/metadata/labels/keep"}
                ]))
                .unwrap(),
            ),
        )
        .await,
    );
    assert_eq!(error.code, 422);
    assert!(
        api.get("d")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap()
            .contains_key("keep")
    );

    // Server-side apply creates what is missing and needs a field manager.
    let cms = config_maps(&cluster).await;
    let applied = cms
        .patch(
            "applied",
            &PatchParams::apply("conformance-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"x": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["x"], "1");
    let reapplied = cms
        .patch(
            "applied",
            &PatchParams::apply("conformance-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"x": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(reapplied.data.unwrap()["x"], "2");

    // Custom resources have no strategic merge patch.
    support::install_widget_crd(&cluster).await;
    let widgets = support::widgets(&cluster, "default");
    widgets
        .create(
            &PostParams::default(),
            &support::widget("w", json!({}), json!({"color": "red"})),
        )
        .await
        .unwrap();
    let error = api_error(
        widgets
            .patch("w", &pp, &Patch::Strategic(json!({"spec": {"size": 4}})))
            .await,
    );
    assert_eq!(error.code, 415);
}

#[tokio::test]
async fn a_jobs_pod_template_is_immutable() {
    let cluster = testing::start().await;
    let api: Api<Job> = Api::namespaced(cluster.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &job).await.unwrap();
    let pp = PatchParams::default();
    let error = api_error(
        api.patch(
            "j",
            &pp,
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}})),
        )
        .await,
    );
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert_eq!(cause_fields(&error), ["spec.template"]);
    // Other fields of the spec stay mutable.
    let patched = api
        .patch(
            "j",
            &pp,
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 30}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().active_deadline_seconds, Some(30));
}

#[tokio::test]
async fn deletecollection_deletes_only_what_the_selector_picks() {
    let cluster = testing::start().await;
    let api = config_maps(&cluster).await;
    for (name, app) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        api.create(
            &PostParams::default(),
            &config_map(name, json!({"app": app})),
        )
        .await
        .unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=a"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default().labels("app"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    assert_eq!(left, ["b1"]);
}

#[tokio::test]
async fn objects_over_the_size_limits_are_refused_as_the_real_server_refuses_them() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let widget = |blob_bytes: usize| {
        serde_json::to_vec(&json!({
            "apiVersion": "test.example.com/v1", "kind": "Widget",
            "metadata": {"name": "big"},
            "spec": {"color": "red", "blob": {"data": "x".repeat(blob_bytes)}}
        }))
        .unwrap()
    };
    let path = "/apis/test.example.com/v1/namespaces/default/widgets";
    // Over etcd's 1.5 MiB: the write fails in storage, as a 500 from etcd.
    let response = support::raw(&cluster, "POST", path, "application/json", widget(2 << 20)).await;
    assert_eq!(response.status, 500);
    assert_eq!(
        response.json()["message"],
        "etcdserver: request is too large"
    );
    // Over the 3 MiB request limit: 413 before anything is decoded.
    let response = support::raw(&cluster, "POST", path, "application/json", widget(4 << 20)).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["reason"], "RequestEntityTooLarge");
    // Under both limits it is stored.
    let response = support::raw(&cluster, "POST", path, "application/json", widget(1 << 20)).await;
    assert_eq!(response.status, 201);
    // A ConfigMap holds at most 1 MiB of data.
    let api = config_maps(&cluster).await;
    let mut cm = config_map("big", json!({}));
    cm.data = Some([("k".to_string(), "x".repeat((1 << 20) + 1))].into());
    let error = api_error(api.create(&PostParams::default(), &cm).await);
    assert_eq!(error.code, 422);
}

#[tokio::test]
async fn metadata_requests_are_answered_with_metadata_only() {
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let path = "/apis/test.example.com/v1/namespaces/default/widgets";
    let widget = json!({
        "apiVersion": "test.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "labels": {"team": "a"}},
        "spec": {"color": "red", "blob": {"data": "x".repeat(100_000)}}
    });
    let created = support::raw(
        &cluster,
        "POST",
        path,
        "application/json",
        serde_json::to_vec(&widget).unwrap(),
    )
    .await;
    assert_eq!(created.status, 201);
    let meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let only_metadata = |body: &Value| {
        assert_eq!(
            body["kind"],
            "PartialObjectMetadata",
            "{:.300}",
            body.to_string()
        );
        assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(body["metadata"]["labels"]["team"], "a");
        assert!(
            body.get("spec").is_none(),
            "a spec in {:.300}",
            body.to_string()
        );
    };

    let got = support::raw_accepting(&cluster, "GET", &format!("{path}/w"), meta, "", vec![]).await;
    assert_eq!(got.status, 200);
    only_metadata(&got.json());
    assert!(got.body.len() < 1_000, "{} bytes", got.body.len());

    let patch = json!({"metadata": {"annotations": {"note": "x"}}});
    let patched = support::raw_accepting(
        &cluster,
        "PATCH",
        &format!("{path}/w"),
        meta,
        "application/merge-patch+json",
        serde_json::to_vec(&patch).unwrap(),
    )
    .await;
    assert_eq!(patched.status, 200);
    let patched = patched.json();
    only_metadata(&patched);
    assert_eq!(patched["metadata"]["annotations"]["note"], "x");

    let list_meta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let listed = support::raw_accepting(&cluster, "GET", path, list_meta, "", vec![]).await;
    let listed = listed.json();
    assert_eq!(listed["kind"], "PartialObjectMetadataList");
    assert!(listed["metadata"]["resourceVersion"].is_string());
    only_metadata(&listed["items"][0]);

    // Asked for the object, the object comes whole; and kube-rs reads both forms.
    let full = support::raw(&cluster, "GET", &format!("{path}/w"), "", vec![]).await;
    assert_eq!(full.json()["spec"]["color"], "red");
    let widgets = support::widgets(&cluster, "default");
    let meta = widgets.get_metadata("w").await.unwrap();
    assert_eq!(meta.metadata.annotations.unwrap()["note"], "x");
}
