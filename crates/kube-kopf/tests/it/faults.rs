//! The handler framework when the API misbehaves, and what it costs in writes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube_devcluster::faults::{InjectedError, Verb};
use kube_kopf::{Children, Context, HandlerResult, Operator};
use serde_json::json;

use crate::common::*;

fn probed(
    probe: &Arc<Probe>,
) -> impl Fn(Context<Widget>) -> futures::future::BoxFuture<'static, HandlerResult> + Send + Sync + 'static
{
    let probe = probe.clone();
    move |ctx| {
        let probe = probe.clone();
        async move {
            let _guard = probe.enter(&ctx);
            Ok(())
        }
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_run_once_per_cause_through_dropped_watches_and_failing_writes() {
    let (cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(&probe))
                .on_update_field("spec", "update", probed(&probe))
        }),
    );
    // A third of the framework's record writes fail, and every watch is cut short.
    cluster
        .faults()
        .set_error_rate(Verb::Patch, 0.3, InjectedError::Internal);
    cluster
        .faults()
        .close_watches_every(Some(Duration::from_millis(200)));

    let names: Vec<String> = (0..20).map(|i| format!("w{i:02}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .expect("create");
    }
    probe
        .wait("every create", Duration::from_secs(30), |p| {
            p.per_object("create").len() == names.len()
        })
        .await;
    // Forget the change history: watches must re-list.
    cluster.force_gone();
    for name in &names {
        set_size_by_update(&api, name, 2).await;
    }
    for name in &names {
        eventually(
            &format!("{name}'s update to be recorded"),
            Duration::from_secs(30),
            || async {
                record(&api, name)
                    .await
                    .filter(|r| r["generation"] == 2 && r.get("handlers").is_none())
            },
        )
        .await;
    }
    cluster.faults().clear();
    running.stop().await;

    for handler in ["create", "update"] {
        let counts = probe.per_object(handler);
        assert_eq!(counts.len(), names.len(), "{handler} ran for every object");
        assert!(
            counts.values().all(|n| *n == 1),
            "{handler} ran once per object: {counts:?}"
        );
    }
}

/// Sets a widget's size with a read-modify-update (PUT), which no injected fault touches. The
/// framework may record progress on the object between the read and the update; the 409 that
/// follows is a genuine conflict, and re-reading is what any client does.
async fn set_size_by_update(api: &kube::Api<Widget>, name: &str, size: i64) {
    for _ in 0..20 {
        let mut current = api.get(name).await.expect("get");
        current.spec.size = size;
        match api.replace(name, &PostParams::default(), &current).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(other) => panic!("replace {name}: {other}"),
        }
    }
    panic!("replace {name}: still conflicting after 20 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_handled_field_costs_one_write_and_children_timers_and_resyncs_none() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let child_probe = probe.clone();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(&probe))
                .on_update_field("spec", "update", probed(&probe))
                .on_update_field("metadata.labels", "labels", probed(&probe))
                .timer("tick", Duration::from_millis(20), probed(&probe))
                .on_child(
                    "child",
                    Children::<ConfigMap>::owned(),
                    move |ctx, _child: Arc<ConfigMap>| {
                        let probe = child_probe.clone();
                        async move {
                            let _guard = probe.enter(&ctx);
                            Ok(())
                        }
                    },
                )
        }),
    );
    // Every version of the widget, as a watch sees it.
    let versions: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let seen = versions.clone();
    let watch_api = api.clone();
    // The watch must have listed before the widget is created, or it starts from a later
    // version and never sees the first.
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut events = watcher(
            watch_api,
            watcher::Config::default().fields("metadata.name=w"),
        )
        .boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::Apply(w) | watcher::Event::InitApply(w) => {
                    seen.lock()
                        .unwrap()
                        .insert(w.resource_version().expect("a resourceVersion"));
                }
                watcher::Event::InitDone => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(20), listed)
        .await
        .expect("the watch lists within 20 s")
        .expect("the watch task is running");

    let created = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    wait_created(&api, "w").await;
    let patch = json!({"spec": {"size": 2}, "metadata": {"labels": {"team": "a"}}});
    api.patch("w", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch");
    probe
        .wait("both update handlers", Duration::from_secs(20), |p| {
            p.count("update", "w") == 1 && p.count("labels", "w") == 1
        })
        .await;
    for i in 0..5 {
        create_child(&client, &format!("c{i}"), &created).await;
    }
    // Timer ticks across two resyncs (500ms), after all child events.
    probe
        .wait("the child events", Duration::from_secs(20), |p| {
            p.count("child", "w") >= 5
        })
        .await;
    let ticks = probe.count("tick", "w");
    probe
        .wait("more timer ticks", Duration::from_secs(20), |p| {
            p.count("tick", "w") >= ticks + 50
        })
        .await;
    let stored = eventually(
        "the record of both updates",
        Duration::from_secs(20),
        || async {
            record(&api, "w")
                .await
                .filter(|r| r["generation"] == 2 && r.get("handlers").is_none())
        },
    )
    .await;
    let last = api
        .get("w")
        .await
        .expect("get")
        .resource_version()
        .expect("a resourceVersion");
    eventually("the watch to catch up", Duration::from_secs(20), || async {
        versions.lock().unwrap().contains(&last).then_some(())
    })
    .await;
    running.stop().await;
    watch.abort();

    // Created, recorded, patched by the test, recorded once per changed field: nothing else.
    let versions = versions.lock().unwrap().clone();
    assert_eq!(
        versions.len(),
        5,
        "five versions of the widget: {versions:?} (record {stored})"
    );
}

/// The record of a completed cause is written behind: while that write is in flight (held by
/// the control plane), the object's child events are handled; the record lands after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_events_are_handled_while_the_completed_causes_record_is_being_written() {
    let (cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let child_probe = probe.clone();
    let creator = client.clone();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", move |ctx: Context<Widget>| {
                let client = creator.clone();
                async move {
                    create_child(&client, "w-child", &ctx.object).await;
                    Ok(())
                }
            })
            .on_child(
                "child",
                Children::<ConfigMap>::owned(),
                move |ctx: Context<Widget>, _child: Arc<ConfigMap>| {
                    let probe = child_probe.clone();
                    async move {
                        let _guard = probe.enter(&ctx);
                        Ok(())
                    }
                },
            )
        }),
    );
    let held = cluster.faults().hold(Verb::Patch, "widgets.kopf.test");
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    probe
        .wait(
            "the child handler, while the record write is held",
            Duration::from_secs(10),
            |p| p.count("child", "w") >= 1,
        )
        .await;
    assert_eq!(
        record(&api, "w").await,
        None,
        "the record must still be on its way"
    );
    drop(held);
    wait_created(&api, "w").await;
    running.stop().await;
}

/// A graceful shutdown stores the records still being written behind before it returns, so a
/// restarted operator does not run their handlers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_records_written_behind() {
    let (cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let running = start(
        Operator::new(client.clone(), config())
            .resource::<Widget>(|r| r.on_create("create", probed(&probe))),
    );
    let held = cluster.faults().hold(Verb::Patch, "widgets.kopf.test");
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    probe
        .wait("the create handler", Duration::from_secs(10), |p| {
            p.count("create", "w") == 1
        })
        .await;
    running.request_stop();
    // The record write is let go only after the shutdown began.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
    });
    running.stop().await;
    let stored = record(&api, "w").await.expect("the record is stored");
    assert_eq!(stored["created"], true);
    release.await.expect("released");
}

/// A record carries its object's uid as a precondition: one written late, after the object was
/// replaced by another of the same name, is refused instead of marking the new object handled.
#[tokio::test]
async fn a_record_for_a_replaced_object_is_refused() {
    use kube_kopf::progress::{self, Record};
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let first = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    api.delete("w", &Default::default()).await.expect("delete");
    let second = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create again");
    assert_ne!(first.uid(), second.uid());
    let stale = progress::store(
        &api,
        "w",
        first.uid().as_deref(),
        ANNOTATION,
        &Record::default(),
    )
    .await;
    assert!(
        matches!(&stale, Err(progress::Error::Store(kube::Error::Api(s))) if s.code == 409),
        "{stale:?}"
    );
    assert_eq!(record(&api, "w").await, None);
    let current = progress::store(
        &api,
        "w",
        second.uid().as_deref(),
        ANNOTATION,
        &Record::default(),
    )
    .await;
    assert!(matches!(current, Ok(Some(_))), "{current:?}");
    assert!(record(&api, "w").await.is_some());
}
