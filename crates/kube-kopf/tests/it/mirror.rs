//! A [`Mirror`] shares the reactor's in-memory copy of a resource: a reader sees the objects
//! the operator's watch holds and is told of each change, with no watch of its own.

use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube_kopf::{Context, Mirror, Operator};
use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_reads_what_the_watch_holds_and_hears_of_each_change() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    let mirror = Mirror::<Widget>::new();
    assert!(mirror.state().is_empty(), "empty before the operator runs");
    let mut changes = mirror.subscribe();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.mirror_to(&mirror)
            .on_create("create", |_: Context<Widget>| async { Ok(()) })
    });
    let running = start(operator);

    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .expect("create");
    let key = ObjectRef::<Widget>::new("w").within(NS);
    let heard = tokio::time::timeout(Duration::from_secs(20), changes.recv())
        .await
        .expect("a change in time")
        .expect("the change");
    assert_eq!(heard, key);
    assert!(mirror.get(&key).is_some(), "the mirror holds it once told");

    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 7}})),
    )
    .await
    .expect("patch");
    // Told of each change; the mirror holds the newest state by the time it is told.
    let size = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let heard = changes.recv().await.expect("a change");
            let size = mirror.get(&heard).map(|w| w.spec.size);
            if size == Some(7) {
                return size;
            }
        }
    })
    .await
    .expect("the new size in time");
    assert_eq!(size, Some(7));
    assert_eq!(mirror.state().len(), 1);
    running.stop().await;
}

/// Objects that exist before the operator starts come in its first listing, which the mirror
/// holds only once the listing is complete: a reader is told of them then, so each one it
/// hears of, it can read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_tells_of_listed_objects_once_it_holds_them() {
    let (_cluster, client) = cluster().await;
    let api = widgets(&client);
    const LISTED: usize = 50;
    for i in 0..LISTED {
        api.create(&PostParams::default(), &widget(&format!("w{i}"), 1))
            .await
            .expect("create");
    }
    let mirror = Mirror::<Widget>::new();
    let mut changes = mirror.subscribe();
    let operator = Operator::new(client.clone(), config()).resource::<Widget>(|r| {
        r.mirror_to(&mirror)
            .on_create("create", |_: Context<Widget>| async { Ok(()) })
    });
    let running = start(operator);
    let mut heard = std::collections::BTreeSet::new();
    while heard.len() < LISTED {
        let key = tokio::time::timeout(Duration::from_secs(20), changes.recv())
            .await
            .expect("a change in time")
            .expect("the change");
        assert!(
            mirror.get(&key).is_some(),
            "told of {key} before the mirror holds it"
        );
        heard.insert(key.name);
    }
    running.stop().await;
}
