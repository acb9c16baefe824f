//! The handler framework on the embedded control plane: serialization per object, retries,
//! permanent errors, finalizers.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Reporter};
use kube::{Resource, ResourceExt};
use kube_kopf::events::Publisher;
use kube_kopf::{Backoff, Children, Context, HandlerError, HandlerResult, Operator};
use serde_json::json;

use crate::common::*;

/// A handler that records its call and takes a little time, to widen any overlap.
fn probed<K: kube::ResourceExt + Send + Sync + 'static>(
    probe: &Arc<Probe>,
) -> impl Fn(Context<K>) -> std::pin::Pin<Box<dyn std::future::Future<Output = HandlerResult> + Send>>
+ Send
+ Sync
+ 'static {
    let probe = probe.clone();
    move |ctx| {
        let probe = probe.clone();
        Box::pin(async move {
            let _guard = probe.enter(&ctx);
            // Simulated work, not a wait for a condition.
            tokio::time::sleep(Duration::from_millis(3)).await;
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_of_one_object_never_run_concurrently() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let child_probe = probe.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_create("create", probed(&probe))
            .on_update_field("spec", "spec", probed(&probe))
            .on_update_field("metadata.labels", "labels", probed(&probe))
            .timer("tick", Duration::from_millis(20), probed(&probe))
            .on_child(
                "child",
                Children::<ConfigMap>::owned(),
                move |ctx, _child: Arc<ConfigMap>| {
                    let probe = child_probe.clone();
                    async move {
                        let _guard = probe.enter(&ctx);
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        Ok(())
                    }
                },
            )
    });
    let running = start(operator);

    let names: Vec<String> = (0..4).map(|i| format!("w{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 0))
            .await
            .expect("create");
    }
    // Many events per object at once: spec and label changes and child objects.
    join_all(names.iter().map(|name| {
        let api = api.clone();
        let client = client.clone();
        async move {
            let owner = api.get(name).await.expect("get");
            let owner_ref = OwnerReference {
                api_version: Widget::api_version(&()).into(),
                kind: Widget::kind(&()).into(),
                name: name.clone(),
                uid: owner.uid().expect("uid"),
                ..Default::default()
            };
            let config_maps: Api<ConfigMap> = Api::namespaced(client, NS);
            for step in 1..=10 {
                let patch = json!({"metadata": {"labels": {"v": step.to_string()}}, "spec": {"size": step}});
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.expect("patch");
                let mut child = ConfigMap::default();
                child.metadata.name = Some(format!("{name}-c{step}"));
                child.metadata.owner_references = Some(vec![owner_ref.clone()]);
                config_maps.create(&PostParams::default(), &child).await.expect("child");
            }
        }
    }))
    .await;

    probe
        .wait(
            "every object's last spec and label change, and its children",
            Duration::from_secs(30),
            |p| {
                let calls = p.calls();
                names.iter().all(|name| {
                    let saw = |handler: &str, path: &[&str], value: serde_json::Value| {
                        calls.iter().any(|c| {
                            c.object == *name
                                && c.handler == handler
                                && c.diff
                                    .iter()
                                    .any(|d| d.path == path && d.new.as_ref() == Some(&value))
                        })
                    };
                    saw("spec", &["spec", "size"], json!(10))
                        && saw("labels", &["metadata", "labels", "v"], json!("10"))
                        && calls
                            .iter()
                            .filter(|c| c.object == *name && c.handler == "child")
                            .count()
                            >= 10
                })
            },
        )
        .await;
    running.stop().await;

    assert_eq!(
        probe.overlaps(),
        Vec::<String>::new(),
        "handlers of one object overlapped"
    );
    assert!(
        probe.max_in_flight() >= 2,
        "objects were processed in parallel, so the check means something"
    );
    for name in &names {
        assert_eq!(probe.count("create", name), 1, "{name} created once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_error_is_retried_with_growing_delay_then_succeeds() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let attempts = Arc::new(AtomicU32::new(0));
    let backoff = Backoff {
        initial: Duration::from_millis(100),
        factor: 2.0,
        max: Duration::from_secs(5),
    };
    let flaky_probe = probe.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_create("flaky", move |ctx| {
            let probe = flaky_probe.clone();
            let attempts = attempts.clone();
            async move {
                let _guard = probe.enter(&ctx);
                if attempts.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(HandlerError::temporary("not yet"))
                } else {
                    Ok(())
                }
            }
        })
        .backoff(backoff)
    });
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");

    let record = wait_created(&api, "w").await;
    running.stop().await;

    let calls = probe.calls();
    assert_eq!(calls.len(), 4, "three failures and a success: {calls:?}");
    assert_eq!(
        calls.iter().map(|c| c.retry).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1].at - w[0].at).collect();
    for (n, gap) in gaps.iter().enumerate() {
        assert!(
            *gap >= backoff.delay(n as u32),
            "gap {n} is {gap:?}, shorter than the backoff"
        );
    }
    assert!(
        gaps[0] < gaps[1] && gaps[1] < gaps[2],
        "delays grow: {gaps:?}"
    );
    assert_eq!(
        record.get("handlers"),
        None,
        "no progress is left once the create finished"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_error_stops_retries_and_posts_a_warning_event() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let broken_probe = probe.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_create("broken", move |ctx| {
            let probe = broken_probe.clone();
            async move {
                let _guard = probe.enter(&ctx);
                Err(HandlerError::permanent("the widget is unusable"))
            }
        })
        .timer("tick", Duration::from_millis(50), probed(&probe))
    });
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");

    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let event = eventually(
        "a warning event about the failed handler",
        Duration::from_secs(20),
        || async {
            let list = events
                .list(&ListParams::default())
                .await
                .expect("list events");
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("HandlerFailed")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("w")
            })
        },
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("the widget is unusable"),
        "{event:?}"
    );
    wait_created(&api, "w").await;
    let version = api.get("w").await.expect("get").resource_version();

    // Let a few resyncs (500ms) and timer ticks pass over the object: none re-runs the handler,
    // and neither writes to the object.
    probe
        .wait(
            "timer ticks across two resyncs",
            Duration::from_secs(20),
            |p| p.count("tick", "w") >= 25,
        )
        .await;
    running.stop().await;
    assert_eq!(
        probe.count("broken", "w"),
        1,
        "a permanent error is not retried"
    );
    let after = api.get("w").await.expect("get").resource_version();
    assert_eq!(after, version, "timers and resyncs write nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_event_is_counted_in_a_series_and_created_anew_once_deleted() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let widget = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let regarding = widget.object_ref(&());
    let publisher = Publisher::new(
        client.clone(),
        Reporter {
            controller: "tester".into(),
            instance: None,
        },
    );
    let started = |note: &str| KubeEvent {
        type_: EventType::Normal,
        reason: "Started".into(),
        note: Some(note.into()),
        action: "Create".into(),
        secondary: None,
    };
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let listed = || async {
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
    };

    publisher
        .publish(&started("first"), &regarding)
        .await
        .expect("publish");
    publisher
        .publish(&started("second"), &regarding)
        .await
        .expect("publish");
    publisher
        .publish(&started("third"), &regarding)
        .await
        .expect("publish");
    let completed = KubeEvent {
        reason: "Completed".into(),
        ..started("done")
    };
    publisher
        .publish(&completed, &regarding)
        .await
        .expect("publish");

    let items = listed().await;
    assert_eq!(
        items.len(),
        2,
        "one Started with its series, one Completed: {items:?}"
    );
    let first = items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Started"))
        .expect("the Started event");
    assert_eq!(
        first.note.as_deref(),
        Some("first"),
        "a series keeps its first note"
    );
    assert_eq!(first.series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(first.reporting_controller.as_deref(), Some("tester"));
    let completed_event = items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Completed"))
        .expect("the Completed event");
    assert!(completed_event.series.is_none());

    // The Event is gone (as the API server's event TTL removes them): a repeat starts anew.
    events
        .delete(&first.name_any(), &DeleteParams::default())
        .await
        .expect("delete");
    publisher
        .publish(&started("fourth"), &regarding)
        .await
        .expect("publish");
    let started_now: Vec<Event> = listed()
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Started"))
        .collect();
    assert_eq!(started_now.len(), 1, "{started_now:?}");
    assert_eq!(started_now[0].note.as_deref(), Some("fourth"));
    assert!(started_now[0].series.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_handlers_run_before_the_finalizer_is_removed() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let seen: Arc<Mutex<Vec<(bool, bool)>>> = Arc::default();
    let (cleanup_probe, cleanup_seen) = (probe.clone(), seen.clone());
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_create("create", probed(&probe))
            .on_delete("cleanup", move |ctx: Context<Widget>| {
                let (probe, seen) = (cleanup_probe.clone(), cleanup_seen.clone());
                async move {
                    let _guard = probe.enter(&ctx);
                    // What the API says while the handler runs.
                    let live = ctx.api().get(&ctx.object.name_any()).await?;
                    let deleting = live.metadata.deletion_timestamp.is_some();
                    seen.lock()
                        .unwrap()
                        .push((deleting, live.finalizers().contains(&FINALIZER.to_string())));
                    Ok(())
                }
            })
    });
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    eventually(
        "the finalizer on the widget",
        Duration::from_secs(20),
        || async {
            let w = api.get("w").await.expect("get");
            w.finalizers()
                .contains(&FINALIZER.to_string())
                .then_some(())
        },
    )
    .await;
    wait_created(&api, "w").await;

    api.delete("w", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the widget to be gone", Duration::from_secs(20), || async {
        api.get_opt("w").await.expect("get").is_none().then_some(())
    })
    .await;
    running.stop().await;

    assert_eq!(probe.count("cleanup", "w"), 1);
    assert_eq!(
        *seen.lock().unwrap(),
        [(true, true)],
        "the handler ran while the finalizer held the object"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_finalizer_without_delete_handlers_and_no_blocking_without_ours() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);

    // Created and deleted while no operator runs: held by someone else's finalizer only.
    let mut held = widget("held", 1);
    held.metadata.finalizers = Some(vec!["kopf.test/other".into()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("create");
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete");

    let probe = Probe::new();
    let without = start(
        Operator::new(client.clone(), config())
            .resource::<Widget>(|r| r.on_create("create", probed(&probe))),
    );
    api.create(&PostParams::default(), &widget("plain", 1))
        .await
        .expect("create");
    wait_created(&api, "plain").await;
    let plain = api.get("plain").await.expect("get");
    assert!(
        plain.finalizers().is_empty(),
        "no delete handlers, no finalizer: {:?}",
        plain.finalizers()
    );
    api.delete("plain", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        "the plain widget to be gone",
        Duration::from_secs(20),
        || async {
            api.get_opt("plain")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;
    without.stop().await;

    // With delete handlers, an object already being deleted without our finalizer is left alone.
    let with = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(&probe))
                .on_delete("cleanup", probed(&probe))
        }),
    );
    api.create(&PostParams::default(), &widget("barrier", 1))
        .await
        .expect("create");
    wait_created(&api, "barrier").await;
    let patch = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("release");
    eventually(
        "the held widget to be gone",
        Duration::from_secs(20),
        || async {
            api.get_opt("held")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;
    with.stop().await;
    assert_eq!(probe.count("create", "held"), 0);
    assert_eq!(probe.count("cleanup", "held"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_handlers_see_the_child_and_its_siblings_from_memory() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    // (parent, child, the parent's children as the handler saw them)
    type Seen = Vec<(String, String, Vec<String>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let record = seen.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_child(
            "child",
            Children::<ConfigMap>::owned().labels("kopf.test/child=yes"),
            move |ctx: Context<Widget>, child: Arc<ConfigMap>| {
                let record = record.clone();
                async move {
                    let mut siblings: Vec<String> = ctx
                        .children::<ConfigMap>()
                        .iter()
                        .map(|c| c.name_any())
                        .collect();
                    siblings.sort();
                    record.lock().unwrap().push((
                        ctx.object.name_any(),
                        child.name_any(),
                        siblings,
                    ));
                    Ok(())
                }
            },
        )
    });
    let running = start(operator);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut children = Vec::new();
    for (parent, child, labelled) in [
        ("a", "a1", true),
        ("a", "a2", true),
        ("b", "b1", true),
        ("a", "a3", false),
    ] {
        let owner = match api.get_opt(parent).await.expect("get") {
            Some(owner) => owner,
            None => api
                .create(&PostParams::default(), &widget(parent, 1))
                .await
                .expect("create"),
        };
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(child.into());
        cm.metadata.owner_references = Some(vec![OwnerReference {
            api_version: Widget::api_version(&()).into(),
            kind: Widget::kind(&()).into(),
            name: parent.into(),
            uid: owner.uid().expect("uid"),
            ..Default::default()
        }]);
        if labelled {
            cm.metadata.labels = Some([("kopf.test/child".to_string(), "yes".to_string())].into());
        }
        children.push(
            config_maps
                .create(&PostParams::default(), &cm)
                .await
                .expect("child"),
        );
    }
    let expected = |parent: &str, child: &str, siblings: &[&str]| {
        (
            parent.to_string(),
            child.to_string(),
            siblings.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    eventually(
        "the child handler to see a2 among a's labelled children",
        Duration::from_secs(20),
        || async {
            seen.lock()
                .unwrap()
                .contains(&expected("a", "a2", &["a1", "a2"]))
                .then_some(())
        },
    )
    .await;
    eventually(
        "the child handler to see b1 alone",
        Duration::from_secs(20),
        || async {
            seen.lock()
                .unwrap()
                .contains(&expected("b", "b1", &["b1"]))
                .then_some(())
        },
    )
    .await;
    running.stop().await;
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|(_, child, siblings)| child != "a3" && !siblings.contains(&"a3".to_string())),
        "unlabelled children are not watched"
    );
}

/// A deleted child reaches its parent's child handler too, as last seen and gone from
/// `Context::children`: a parent that keeps something per child learns that it is gone without
/// a periodic look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_child_reaches_the_child_handler_gone_from_the_children() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    // (child, whether the parent's children held it) per call
    let seen: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let record = seen.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_child(
            "child",
            Children::<ConfigMap>::owned(),
            move |ctx: Context<Widget>, child: Arc<ConfigMap>| {
                let record = record.clone();
                async move {
                    let held = ctx
                        .children::<ConfigMap>()
                        .iter()
                        .any(|c| c.name_any() == child.name_any());
                    record.lock().unwrap().push((child.name_any(), held));
                    Ok(())
                }
            },
        )
    });
    let running = start(operator);
    let owner = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let mut child = ConfigMap::default();
    child.metadata.name = Some("c".into());
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Widget::api_version(&()).into(),
        kind: Widget::kind(&()).into(),
        name: "w".into(),
        uid: owner.uid().expect("uid"),
        ..Default::default()
    }]);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    config_maps
        .create(&PostParams::default(), &child)
        .await
        .expect("child");
    let told = |name: &'static str, held: bool| {
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            async move {
                let entry = (name.to_string(), held);
                seen.lock().unwrap().contains(&entry).then_some(())
            }
        }
    };
    eventually(
        "the child handler to see c added",
        Duration::from_secs(20),
        told("c", true),
    )
    .await;
    config_maps
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        "the child handler to see c deleted",
        Duration::from_secs(20),
        told("c", false),
    )
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_handler_call_after_start_sees_every_existing_child() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let owner = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    // Many other objects of the child kind make its listing take longer than the parent's.
    futures::stream::iter(0..1500)
        .for_each_concurrent(32, |i| {
            let config_maps = config_maps.clone();
            async move {
                let mut other = ConfigMap::default();
                other.metadata.name = Some(format!("other{i}"));
                config_maps
                    .create(&PostParams::default(), &other)
                    .await
                    .expect("create");
            }
        })
        .await;
    for i in 0..3 {
        create_child(&client, &format!("c{i}"), &owner).await;
    }

    let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
    let record = seen.clone();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", move |ctx: Context<Widget>| {
                let record = record.clone();
                async move {
                    record
                        .lock()
                        .unwrap()
                        .push(ctx.children::<ConfigMap>().len());
                    Ok(())
                }
            })
            .on_child(
                "child",
                Children::<ConfigMap>::owned(),
                |_ctx, _child: Arc<ConfigMap>| async { Ok(()) },
            )
        }),
    );
    wait_created(&api, "w").await;
    running.stop().await;
    assert_eq!(
        *seen.lock().unwrap(),
        [3],
        "the create handler saw all children at its only call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_over_its_timeout_is_cut_short_and_retried() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let stall_probe = probe.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.on_create("stalls-once", move |ctx: Context<Widget>| {
            let probe = stall_probe.clone();
            async move {
                let _guard = probe.enter(&ctx);
                if ctx.retry == 0 {
                    // A hung call, as a handler waiting on an unresponsive service would be.
                    tokio::time::sleep(Duration::from_secs(600)).await;
                }
                Ok(())
            }
        })
        .timeout(Duration::from_millis(200))
    });
    let started = tokio::time::Instant::now();
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    wait_created(&api, "w").await;
    running.stop().await;
    let retries: Vec<u32> = probe.calls().iter().map(|c| c.retry).collect();
    assert_eq!(
        retries,
        [0, 1],
        "the hung attempt was abandoned and retried"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the hung attempt did not hold the object"
    );
    assert!(
        probe.overlaps().is_empty(),
        "the abandoned attempt no longer counts as running"
    );
}

/// Regression: an operator watching all namespaces wrote its record and finalizer through an
/// `Api` without a namespace, so every such write addressed a cluster-scoped path and got 404:
/// objects never got the finalizer and progress was never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_watching_all_namespaces_stores_progress_and_finalizer_on_the_object() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let mut all_namespaces = config();
    all_namespaces.namespace = None;
    let probe = Probe::new();
    let running = start(
        Operator::new(client.clone(), all_namespaces).resource::<Widget>(|r| {
            r.on_create("create", probed(&probe))
                .on_delete("delete", probed(&probe))
        }),
    );
    api.create(&PostParams::default(), &widget("anywhere", 1))
        .await
        .expect("create");
    wait_created(&api, "anywhere").await;
    let stored = api.get("anywhere").await.expect("get");
    assert!(
        stored.finalizers().contains(&FINALIZER.to_string()),
        "the finalizer is on the object: {:?}",
        stored.finalizers()
    );
    running.stop().await;
}

/// A batch child handler (`on_children`) gets every changed child in one call: the children a
/// fresh operator lists at start come together, a failed call is retried with all of them,
/// and a later change of one child brings just that child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_child_handler_gets_the_changed_children_together_and_retries_them_together() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let owner = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for i in 0..3 {
        create_child(&client, &format!("c{i}"), &owner).await;
    }

    // (retry, the children of the call)
    type Calls = Vec<(u32, Vec<String>)>;
    let calls: Arc<Mutex<Calls>> = Arc::default();
    let record = calls.clone();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_children(
                "children",
                Children::<ConfigMap>::owned(),
                move |ctx: Context<Widget>, children: Vec<Arc<ConfigMap>>| {
                    let record = record.clone();
                    async move {
                        let names = children.iter().map(|c| c.name_any()).collect();
                        record.lock().unwrap().push((ctx.retry, names));
                        if ctx.retry == 0 && children.len() > 1 {
                            return Err(HandlerError::temporary("the first batch fails once"));
                        }
                        Ok(())
                    }
                },
            )
        }),
    );
    let call_count = |n: usize| {
        let calls = calls.clone();
        move || {
            let calls = calls.clone();
            async move { (calls.lock().unwrap().len() >= n).then_some(()) }
        }
    };
    eventually(
        "the batch and its retry",
        Duration::from_secs(30),
        call_count(2),
    )
    .await;
    config_maps
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .expect("change c1");
    eventually(
        "the call for c1's change",
        Duration::from_secs(30),
        call_count(3),
    )
    .await;
    running.stop().await;

    let all = vec!["c0".to_string(), "c1".to_string(), "c2".to_string()];
    assert_eq!(
        *calls.lock().unwrap(),
        [(0, all.clone()), (1, all), (0, vec!["c1".to_string()])]
    );
}

/// A timer's `when` may take a flag: each flag set runs the handler exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_whose_when_takes_a_flag_runs_once_per_flag() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let flags = Arc::new(AtomicU32::new(0));
    let taken = flags.clone();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.timer("woken", Duration::from_millis(20), probed(&probe))
            .when(move |_| {
                taken
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
            })
    });
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    wait_created(&api, "w").await;
    for wakes in 1..=3 {
        flags.fetch_add(1, Ordering::SeqCst);
        probe
            .wait("the woken timer ran", Duration::from_secs(10), |p| {
                p.count("woken", "w") == wakes
            })
            .await;
    }
    running.stop().await;
    assert_eq!(probe.count("woken", "w"), 3);
}

/// A timer's `tick_if` gate is asked once a tick; while it does not hold, no object is asked
/// (its `when` is not called) and the handler does not run; once it holds, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_whose_gate_is_shut_asks_no_object() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let (open, gate_asked, objects_asked) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let (gate_open, asked, when_asked) = (open.clone(), gate_asked.clone(), objects_asked.clone());
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.timer("gated", Duration::from_millis(20), probed(&probe))
            .when(move |_| {
                when_asked.fetch_add(1, Ordering::SeqCst);
                true
            })
            .tick_if(move || {
                asked.fetch_add(1, Ordering::SeqCst);
                gate_open.load(Ordering::SeqCst)
            })
    });
    let running = start(operator);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    wait_created(&api, "w").await;
    let ticks_from = gate_asked.load(Ordering::SeqCst);
    eventually(
        "five ticks with the gate shut",
        Duration::from_secs(10),
        || {
            let ticks = gate_asked.load(Ordering::SeqCst);
            async move { (ticks >= ticks_from + 5).then_some(()) }
        },
    )
    .await;
    assert_eq!(objects_asked.load(Ordering::SeqCst), 0);
    assert_eq!(probe.count("gated", "w"), 0);
    open.store(true, Ordering::SeqCst);
    probe
        .wait("the gated timer ran", Duration::from_secs(10), |p| {
            p.count("gated", "w") >= 1
        })
        .await;
    running.stop().await;
    assert!(objects_asked.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_children_are_listed_before_the_first_handler_and_kept_current_without_a_child_handler()
 {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let owner = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    create_child(&client, "c0", &owner).await;

    // The children each handler call saw, by the handler's name.
    type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;
    let seen: Seen = Arc::default();
    let recorder = |seen: Seen| {
        move |ctx: Context<Widget>| {
            let seen = seen.clone();
            async move {
                let mut names: Vec<String> = ctx
                    .children::<ConfigMap>()
                    .iter()
                    .map(|c| c.name_any())
                    .collect();
                names.sort();
                seen.lock().unwrap().push((ctx.handler.to_string(), names));
                Ok(())
            }
        }
    };
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.keep_children(Children::<ConfigMap>::owned())
                .on_create("create", recorder(seen.clone()))
                .on_update_field("spec", "update", recorder(seen.clone()))
        }),
    );
    wait_created(&api, "w").await;
    create_child(&client, "c1", &owner).await;
    // Each spec change runs the update handler once; another is made once it has run, until
    // one sees the new child.
    let want = (
        "update".to_string(),
        vec!["c0".to_string(), "c1".to_string()],
    );
    let mut patches = 0;
    eventually(
        "an update handler to see the child added after the start",
        Duration::from_secs(20),
        || {
            let updates = seen
                .lock()
                .unwrap()
                .iter()
                .filter(|(h, _)| h == "update")
                .count();
            let found = seen.lock().unwrap().contains(&want);
            let patch = (!found && updates == patches).then(|| {
                patches += 1;
                json!({"spec": {"size": patches + 1}})
            });
            let api = api.clone();
            async move {
                if let Some(patch) = patch {
                    api.patch("w", &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("patch");
                }
                found.then_some(())
            }
        },
    )
    .await;
    running.stop().await;
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        ("create".to_string(), vec!["c0".to_string()]),
        "the first call saw the child that existed: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|(_, names)| names.contains(&"c0".to_string())),
        "every call saw the first child: {seen:?}"
    );
}

/// With `OperatorConfig::labels`, only the objects the selector matches are watched: one
/// outside it is never handled, and is handled once relabelled into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_objects_the_label_selector_matches_are_handled() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let shards_seen = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let handler = {
        let (probe, shards_seen) = (probe.clone(), shards_seen.clone());
        move |ctx: Context<Widget>| {
            let (probe, shards_seen) = (probe.clone(), shards_seen.clone());
            async move {
                let shard = ctx.object.labels().get("shard").cloned();
                shards_seen
                    .lock()
                    .unwrap()
                    .push((ctx.object.name_any(), shard.unwrap_or_default()));
                let _guard = probe.enter(&ctx);
                Ok(())
            }
        }
    };
    let mut config = config();
    config.labels = Some("shard=a".into());
    let running = start(
        Operator::new(client.clone(), config)
            .resource::<Widget>(|r| r.on_create("create", handler)),
    );
    let labelled = |name: &str, shard: &str| {
        let mut widget = widget(name, 0);
        widget.labels_mut().insert("shard".into(), shard.into());
        widget
    };
    let params = PostParams::default();
    api.create(&params, &labelled("other", "b"))
        .await
        .expect("create");
    api.create(&params, &labelled("mine", "a"))
        .await
        .expect("create");
    let deadline = Duration::from_secs(20);
    probe
        .wait("mine to be handled", deadline, |p| {
            p.count("create", "mine") == 1
        })
        .await;
    let relabel = json!({"metadata": {"labels": {"shard": "a"}}});
    api.patch("other", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("relabel");
    probe
        .wait("other to be handled once selected", deadline, |p| {
            p.count("create", "other") == 1
        })
        .await;
    let seen = shards_seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|(_, shard)| shard == "a"),
        "handled outside the selector: {seen:?}"
    );
    running.stop().await;
}

/// An object `leave_alone` picks (another controller's, by a field that never changes) gets no
/// handler call and nothing written to it, no finalizer and no progress record, though the
/// operator has delete handlers; the work beside it runs; other objects are handled as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_left_alone_gets_no_handler_finalizer_or_record_but_the_work_beside_it() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let beside = Arc::new(AtomicU32::new(0));
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            let beside = beside.clone();
            r.leave_alone_beside(
                |w: &Widget| w.name_any().starts_with("theirs"),
                move |_client, _widget| {
                    let beside = beside.clone();
                    async move {
                        beside.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    }
                },
            )
            .on_create("create", probed(&probe))
            .on_delete("cleanup", probed(&probe))
        }),
    );
    let created = api
        .create(&PostParams::default(), &widget("theirs", 1))
        .await
        .expect("create");
    api.create(&PostParams::default(), &widget("mine", 1))
        .await
        .expect("create");
    wait_created(&api, "mine").await;
    eventually(
        "the work beside theirs",
        Duration::from_secs(20),
        || async { (beside.load(Ordering::SeqCst) > 0).then_some(()) },
    )
    .await;
    let theirs = api.get("theirs").await.expect("get");
    assert_eq!(
        theirs.resource_version(),
        created.resource_version(),
        "nothing written to it"
    );
    assert!(theirs.finalizers().is_empty());
    assert_eq!(record(&api, "theirs").await, None);
    assert_eq!(probe.count("create", "theirs"), 0);
    assert_eq!(probe.count("create", "mine"), 1);
    running.stop().await;
}
