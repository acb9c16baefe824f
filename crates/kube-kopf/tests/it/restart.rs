//! The handler framework across operator restarts: resume, crash between a handler and the
//! store of its progress, and objects over the 256 KiB annotation limit.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube_kopf::{Context, HandlerResult, Operator, OperatorConfig};
use serde_json::json;
use tokio::sync::mpsc;

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
async fn resume_handlers_run_for_every_existing_object_on_start() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let first = Probe::new();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(&first))
                .on_update_field("spec", "spec", probed(&first))
        }),
    );
    let names: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .expect("create");
    }
    for name in &names {
        wait_created(&api, name).await;
    }
    running.stop().await;

    // Changed while no operator ran.
    let patch = json!({"spec": {"size": 2}});
    api.patch("w0", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch");

    let second = Probe::new();
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(&second))
                .on_update_field("spec", "spec", probed(&second))
                .on_resume("resume", probed(&second))
        }),
    );
    second
        .wait("a resume of every widget", Duration::from_secs(20), |p| {
            p.per_object("resume").len() == names.len()
        })
        .await;
    second
        .wait("the update made while down", Duration::from_secs(20), |p| {
            p.count("spec", "w0") == 1
        })
        .await;
    running.stop().await;

    assert!(
        names.iter().all(|name| second.count("resume", name) == 1),
        "{:?}",
        second.per_object("resume")
    );
    assert_eq!(
        second.count_handler("create"),
        0,
        "handled objects are not created again"
    );
    let update = second
        .calls()
        .into_iter()
        .find(|c| c.handler == "spec")
        .expect("a spec call");
    let size = update
        .diff
        .iter()
        .find(|d| d.path == ["spec", "size"])
        .expect("a size change");
    assert_eq!(
        (size.old.clone(), size.new.clone()),
        (Some(json!(1)), Some(json!(2))),
        "small bases are verbatim"
    );
    assert_eq!(first.count_handler("spec"), 0);
}

/// Runs two create handlers, freezes the operator before the progress of `frozen` is stored,
/// aborts it, starts a fresh one and returns the calls of both, per handler.
async fn crash_before_storing(frozen: &'static str) -> (usize, usize) {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let (reached, mut at_hook) = mpsc::unbounded_channel();
    let mut crashing = config();
    crashing.hooks.before_store = Some(Arc::new(move |_object, handler| {
        if handler == frozen {
            let _ = reached.send(());
            // Never completes: the operator is aborted while waiting here.
            futures::future::pending().boxed()
        } else {
            async {}.boxed()
        }
    }));
    let table = |config: OperatorConfig, probe: &Arc<Probe>| {
        Operator::new(client.clone(), config).resource::<Widget>(|r| {
            r.on_create("a", probed(probe))
                .on_create("b", probed(probe))
        })
    };
    let running = start(table(crashing, &probe));
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    tokio::time::timeout(Duration::from_secs(20), at_hook.recv())
        .await
        .expect("the hook is reached")
        .expect("the hook sends");
    running.abort().await;

    let running = start(table(config(), &probe));
    wait_created(&api, "w").await;
    running.stop().await;
    (probe.count("a", "w"), probe.count("b", "w"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_operator_reruns_at_most_the_handler_whose_progress_was_not_stored() {
    // (handler frozen before its progress store, expected calls of a, expected calls of b)
    let table = [("a", (2, 1)), ("b", (1, 2))];
    for (frozen, expected) in table {
        assert_eq!(
            crash_before_storing(frozen).await,
            expected,
            "frozen before storing {frozen}"
        );
    }
}

fn items(tag: &str) -> Vec<String> {
    (0..10_000)
        .map(|i| format!("{tag}-item-{i:05}-padding-padding"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_spec_goes_through_create_update_and_delete() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let table = |probe: &Arc<Probe>| {
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("create", probed(probe))
                .on_update_field("spec", "spec", probed(probe))
                .on_delete("delete", probed(probe))
        })
    };
    let running = start(table(&probe));

    let mut big = widget("big", 1);
    big.spec.items = items("a");
    let size = serde_json::to_vec(&big.spec).expect("json").len();
    assert!(size > 256 * 1024, "the spec is over 256 KiB: {size}");
    api.create(&PostParams::default(), &big)
        .await
        .expect("create");
    let record = wait_created(&api, "big").await;
    assert!(
        record.to_string().len() < 1024,
        "the record stays small: {record}"
    );

    // An update while the operator remembers the old object: the old value is known.
    let patch = json!([{"op": "replace", "path": "/spec/items/0", "value": "changed"}]);
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("patch");
    api.patch("big", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("patch");
    probe
        .wait("the first update", Duration::from_secs(20), |p| {
            p.count("spec", "big") == 1
        })
        .await;
    let update = probe
        .calls()
        .into_iter()
        .find(|c| c.handler == "spec")
        .expect("an update");
    let [change] = &update.diff[..] else {
        panic!("one change: {:?}", update.diff.len())
    };
    assert_eq!(change.path, ["spec", "items"]);
    assert_eq!(
        change.old.as_ref().map(|old| old[0].clone()),
        Some(json!("a-item-00000-padding-padding"))
    );
    assert_eq!(
        change.new.as_ref().map(|new| new[0].clone()),
        Some(json!("changed"))
    );
    running.stop().await;

    // An update made while no operator ran: the old value is gone with the old process.
    let patch = json!({"spec": {"size": 2}});
    api.patch("big", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch");
    let running = start(table(&probe));
    probe
        .wait("the update made while down", Duration::from_secs(20), |p| {
            p.count("spec", "big") == 2
        })
        .await;
    let update = probe
        .calls()
        .into_iter()
        .filter(|c| c.handler == "spec")
        .nth(1)
        .expect("a second update");
    let [change] = &update.diff[..] else {
        panic!("one change: {:?}", update.diff.len())
    };
    assert_eq!(change.path, ["spec"]);
    assert_eq!(change.old, None);
    assert_eq!(
        change.new.as_ref().map(|new| new["size"].clone()),
        Some(json!(2))
    );

    api.delete("big", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        "the big widget to be gone",
        Duration::from_secs(20),
        || async {
            api.get_opt("big")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;
    running.stop().await;
    assert_eq!(
        (probe.count("create", "big"), probe.count("delete", "big")),
        (1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_running_handlers_finish_and_store_their_progress() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let release = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (slow_probe, slow_release, slow_finished) =
        (probe.clone(), release.clone(), finished.clone());
    let running = start(
        Operator::new(client.clone(), config()).resource::<Widget>(|r| {
            r.on_create("slow", move |ctx| {
                let (probe, release, finished) = (
                    slow_probe.clone(),
                    slow_release.clone(),
                    slow_finished.clone(),
                );
                async move {
                    let guard = probe.enter(&ctx);
                    release.notified().await;
                    finished.store(true, std::sync::atomic::Ordering::SeqCst);
                    drop(guard);
                    Ok(())
                }
            })
        }),
    );
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    probe
        .wait("the handler to start", Duration::from_secs(20), |p| {
            p.count("slow", "w") == 1
        })
        .await;

    running.request_stop();
    release.notify_one();
    running.stop().await;

    assert!(
        finished.load(std::sync::atomic::Ordering::SeqCst),
        "the running handler was not cut short"
    );
    let record = record(&api, "w").await.expect("a record");
    assert_eq!(
        record["created"], true,
        "its progress was stored before the operator stopped: {record}"
    );
}
