//! The handler framework with many objects at once (issue 3, acceptance 4).

mod kopf_common;

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, stream};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use workflow_operator::kopf::{Context, HandlerResult, Operator};

use kopf_common::*;

const OBJECTS: usize = 1_000;
const CONCURRENCY: usize = 8;

fn probed(
    probe: &Arc<Probe>,
) -> impl Fn(Context<Widget>) -> futures::future::BoxFuture<'static, HandlerResult> + Send + Sync + 'static
{
    let probe = probe.clone();
    move |ctx| {
        let probe = probe.clone();
        async move {
            let _guard = probe.enter(&ctx);
            // Simulated work, so that handlers overlap if nothing bounds them.
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(())
        }
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_objects_stay_within_the_bound_and_are_handled_once_per_cause() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let mut config = config();
    config.concurrency = CONCURRENCY;
    let running = start(
        Operator::new(client.clone(), config).resource::<Widget>(|r| {
            r.on_create("create", probed(&probe))
                .on_update_field("spec", "update", probed(&probe))
                .on_delete("delete", probed(&probe))
        }),
    );
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("w{i:04}")).collect();
    let all = |handler: &'static str| {
        let names = names.clone();
        move |p: &Probe| {
            let counts = p.per_object(handler);
            names.iter().all(|name| counts.contains_key(name))
        }
    };

    stream::iter(&names)
        .for_each_concurrent(32, |name| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &widget(name, 1))
                    .await
                    .expect("create");
            }
        })
        .await;
    probe
        .wait("every create", Duration::from_secs(120), all("create"))
        .await;

    stream::iter(&names)
        .for_each_concurrent(32, |name| {
            let api = api.clone();
            async move {
                let patch = Patch::Merge(json!({"spec": {"size": 2}}));
                api.patch(name, &PatchParams::default(), &patch)
                    .await
                    .expect("patch");
            }
        })
        .await;
    probe
        .wait("every update", Duration::from_secs(120), all("update"))
        .await;

    stream::iter(&names)
        .for_each_concurrent(32, |name| {
            let api = api.clone();
            async move {
                api.delete(name, &DeleteParams::default())
                    .await
                    .expect("delete");
            }
        })
        .await;
    probe
        .wait("every delete", Duration::from_secs(120), all("delete"))
        .await;
    eventually(
        "every widget to be gone",
        Duration::from_secs(60),
        || async {
            api.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
                .then_some(())
        },
    )
    .await;
    running.stop().await;

    for handler in ["create", "update", "delete"] {
        let counts = probe.per_object(handler);
        let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
        assert!(
            repeated.is_empty(),
            "{handler} ran more than once for {repeated:?}"
        );
        assert_eq!(counts.len(), OBJECTS, "{handler} ran for every object");
    }
    assert!(
        probe.max_in_flight() <= CONCURRENCY,
        "at most {CONCURRENCY} at once: {}",
        probe.max_in_flight()
    );
    assert!(
        probe.max_in_flight() > 1,
        "objects were handled in parallel"
    );
    assert!(probe.overlaps().is_empty());
}

/// A burst of new objects does not hold up work on an object already in progress: with one
/// worker and handlers that take a while, an update of an object handled before waits for at
/// most a few of the 20 new objects queued ahead of it, not for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_on_an_object_in_progress_goes_before_a_burst_of_new_objects() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    let slow = |probe: &Arc<Probe>| {
        let probe = probe.clone();
        move |ctx: Context<Widget>| {
            let probe = probe.clone();
            async move {
                let _guard = probe.enter(&ctx);
                // Simulated work: the burst takes a second to get through one worker.
                tokio::time::sleep(Duration::from_millis(50)).await;
                HandlerResult::Ok(())
            }
            .boxed()
        }
    };
    let mut config = config();
    config.concurrency = 1;
    let running = start(
        Operator::new(client.clone(), config).resource::<Widget>(|r| {
            r.on_create("create", slow(&probe))
                .on_update_field("spec", "update", slow(&probe))
        }),
    );
    api.create(&PostParams::default(), &widget("early", 1))
        .await
        .expect("create early");
    wait_created(&api, "early").await;

    const BURST: usize = 20;
    for i in 0..BURST {
        api.create(&PostParams::default(), &widget(&format!("new{i:02}"), 1))
            .await
            .expect("create");
    }
    api.patch(
        "early",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .expect("update early");
    probe
        .wait("early's update", Duration::from_secs(30), |p| {
            p.count("update", "early") == 1
        })
        .await;

    let calls = probe.calls();
    let update_at = calls
        .iter()
        .position(|c| c.handler == "update" && c.object == "early")
        .expect("early's update was recorded");
    let new_before = calls[..update_at]
        .iter()
        .filter(|c| c.handler == "create" && c.object.starts_with("new"))
        .count();
    running.stop().await;
    // First come, first served would handle all 20 first; one in four workers goes to new
    // objects, so early waits for the one running and about one more.
    assert!(
        new_before <= BURST / 4,
        "{new_before} of {BURST} new objects were handled before early's update"
    );
}
