//! The handler framework with many objects at once.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, stream};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_kopf::{Context, HandlerResult, Monitor, Operator, Slots};
use serde_json::json;

use crate::common::*;

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

/// A handler that records its calls in `probe` and, on the object `held`, keeps its worker until
/// `gate` is given a permit.
fn held_at(
    held: &'static str,
    probe: &Arc<Probe>,
    gate: &Arc<tokio::sync::Semaphore>,
) -> impl Fn(Context<Widget>) -> futures::future::BoxFuture<'static, HandlerResult>
+ Clone
+ Send
+ Sync
+ 'static {
    let (probe, gate) = (probe.clone(), gate.clone());
    move |ctx: Context<Widget>| {
        let (probe, gate) = (probe.clone(), gate.clone());
        async move {
            let _guard = probe.enter(&ctx);
            if ctx.object.name_any() == held {
                let _open = gate.acquire().await;
            }
            HandlerResult::Ok(())
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
/// worker, busy while 19 new objects and an update of an object handled before queue up, the
/// update is served next, not after the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_on_an_object_in_progress_goes_before_a_burst_of_new_objects() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    // The first new object's handler holds the only worker until the test opens the gate, so
    // that everything else is queued, in a known order, when the worker frees up.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut config = config();
    config.concurrency = 1;
    // Only the test's own changes queue work: a resync could queue early before its update.
    config.resync = None;
    let monitor = Monitor::new();
    let running = start(
        Operator::new(client.clone(), config)
            .with_monitor(monitor.clone())
            .resource::<Widget>(|r| {
                r.on_create("create", held_at("new00", &probe, &gate))
                    .on_update_field("spec", "update", held_at("new00", &probe, &gate))
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
    probe
        .wait("new00 to hold the worker", Duration::from_secs(30), |p| {
            p.count("create", "new00") == 1
        })
        .await;
    api.patch(
        "early",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .expect("update early");
    eventually(
        "the other new objects and early's update to be queued",
        Duration::from_secs(30),
        || async { (monitor.queued() == BURST).then_some(()) },
    )
    .await;
    gate.add_permits(1);
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
    let new_before: Vec<&str> = calls[..update_at]
        .iter()
        .filter(|c| c.handler == "create" && c.object.starts_with("new"))
        .map(|c| c.object.as_str())
        .collect();
    running.stop().await;
    // First come, first served would handle all 20 first.
    assert_eq!(
        new_before,
        ["new00"],
        "new objects handled before early's update"
    );
}

/// New objects are taken in only as fast as the API server echoes the framework's writes
/// (`kopf::intake`): before any echo, one new object at a time, however many workers are free;
/// once the first is done and echoed, the rest follow, none left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_objects_start_one_at_a_time_until_the_watch_echoes_a_write() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    // The first handler holds its worker until the test opens the gate.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handler = held_at("new0", &probe, &gate);
    let mut config = config();
    config.concurrency = 16;
    // Never release the held worker from the window: the test decides when it ends.
    config.intake_hold = Duration::from_secs(3600);
    let monitor = Monitor::new();
    let running = start(
        Operator::new(client.clone(), config)
            .with_monitor(monitor.clone())
            .resource::<Widget>(|r| r.on_create("create", handler)),
    );
    api.create(&PostParams::default(), &widget("new0", 1))
        .await
        .expect("create new0");
    probe
        .wait("new0 to hold its worker", Duration::from_secs(30), |p| {
            p.count("create", "new0") == 1
        })
        .await;
    for name in ["new1", "new2", "new3"] {
        api.create(&PostParams::default(), &widget(name, 1))
            .await
            .expect("create");
    }
    eventually(
        "the other three to wait, with 15 workers free",
        Duration::from_secs(30),
        || async { (monitor.queued() == 3).then_some(()) },
    )
    .await;
    assert_eq!(monitor.running(), 1);
    assert_eq!(probe.max_in_flight(), 1, "no other new object was started");

    gate.add_permits(1);
    probe
        .wait("every new object handled", Duration::from_secs(30), |p| {
            ["new1", "new2", "new3"]
                .iter()
                .all(|name| p.count("create", name) == 1)
        })
        .await;
    running.stop().await;
}

/// Operators given the same [`Slots`] share them: together they never process more objects at
/// once than there are slots, and one with work may use slots the other leaves free, however
/// small its own `concurrency` (the way a replica's shards share its `--concurrency`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_sharing_slots_stay_within_them_together_and_a_busy_one_uses_the_free_ones() {
    const SLOTS: usize = 4;
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let all = Probe::new();
    let busy = Probe::new();
    let handler = |own: &Arc<Probe>| {
        let (all, own) = (all.clone(), own.clone());
        move |ctx: Context<Widget>| {
            let (all, own) = (all.clone(), own.clone());
            async move {
                let _all = all.enter(&ctx);
                let _own = own.enter(&ctx);
                tokio::time::sleep(Duration::from_millis(5)).await;
                HandlerResult::Ok(())
            }
            .boxed()
        }
    };
    let slots = Slots::new(SLOTS);
    let operator = |part: &str, probe: &Arc<Probe>| {
        let mut config = config();
        // Alone, each would process one object at a time.
        config.concurrency = 1;
        config.labels = Some(format!("part={part}"));
        start(
            Operator::new(client.clone(), config)
                .with_slots(slots.clone())
                .resource::<Widget>(|r| r.on_create("create", handler(probe))),
        )
    };
    let quiet = Probe::new();
    let running = [operator("busy", &busy), operator("quiet", &quiet)];
    let names: Vec<(String, &str)> = (0..300)
        .map(|i| (format!("b{i:03}"), "busy"))
        .chain((0..20).map(|i| (format!("q{i:03}"), "quiet")))
        .collect();
    stream::iter(&names)
        .for_each_concurrent(32, |(name, part)| {
            let api = api.clone();
            async move {
                let mut object = widget(name, 1);
                object.labels_mut().insert("part".into(), part.to_string());
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("create");
            }
        })
        .await;
    all.wait("every create", Duration::from_secs(120), |p| {
        p.per_object("create").len() == names.len()
    })
    .await;
    for running in running {
        running.stop().await;
    }
    assert!(
        all.max_in_flight() <= SLOTS,
        "at most {SLOTS} at once across both: {}",
        all.max_in_flight()
    );
    assert!(
        busy.max_in_flight() > 1,
        "the busy operator used the shared slots, not only its own one: {}",
        busy.max_in_flight()
    );
}

/// Operators sharing [`Slots`] take new objects in through one intake window: before any echo,
/// one new object at a time across both, as one operator would, not one each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_sharing_slots_take_new_objects_in_through_one_window() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let probe = Probe::new();
    // The first new object's handler holds its worker until the test opens the gate.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let handler = held_at("a0", &probe, &gate);
    let slots = Slots::new(16);
    let operator = |part: &str, monitor: &Monitor| {
        let mut config = config();
        config.labels = Some(format!("part={part}"));
        // Never release the held worker from the window: the test decides when it ends.
        config.intake_hold = Duration::from_secs(3600);
        config.resync = None;
        start(
            Operator::new(client.clone(), config)
                .with_slots(slots.clone())
                .with_monitor(monitor.clone())
                .resource::<Widget>(|r| r.on_create("create", handler.clone())),
        )
    };
    let other = Monitor::new();
    let running = [operator("a", &Monitor::new()), operator("b", &other)];
    let create = |name: &'static str, part: &'static str| {
        let api = api.clone();
        async move {
            let mut object = widget(name, 1);
            object.labels_mut().insert("part".into(), part.into());
            api.create(&PostParams::default(), &object)
                .await
                .expect("create");
        }
    };
    create("a0", "a").await;
    probe
        .wait("a0 to hold its worker", Duration::from_secs(30), |p| {
            p.count("create", "a0") == 1
        })
        .await;
    for name in ["b1", "b2", "b3"] {
        create(name, "b").await;
    }
    eventually(
        "the other operator's three new objects to wait, with 15 slots free",
        Duration::from_secs(30),
        || async { (other.queued() == 3).then_some(()) },
    )
    .await;
    assert_eq!(probe.max_in_flight(), 1, "no other new object was started");

    gate.add_permits(1);
    probe
        .wait("every new object handled", Duration::from_secs(30), |p| {
            ["b1", "b2", "b3"]
                .iter()
                .all(|name| p.count("create", name) == 1)
        })
        .await;
    for running in running {
        running.stop().await;
    }
}
