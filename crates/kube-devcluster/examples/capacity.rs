//! Capacity of the embedded control plane: stores N objects over HTTP, holds M open watches that
//! receive every change, and measures request throughput (creates/s and patches/s with C
//! concurrent clients) and memory (RSS from /proc/self/status). Prints one JSON object.
//!
//! ```sh
//! cargo run --release -p kube-devcluster --example capacity -- --objects 10000 --watches 1000
//! ```
//!
//! The clients run in the same process as the server, so the RSS figures include them (and the
//! watch streams' buffers on both sides): an upper bound for the control plane alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_devcluster::faults::Verb;
use kube_devcluster::{DevCluster, DevClusterOptions};
use serde_json::json;

#[derive(Parser, Debug)]
struct Args {
    /// Objects (ConfigMaps) to store.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Watches to hold open while patching (spread over the namespaces).
    #[arg(long, default_value_t = 1_000)]
    watches: usize,
    /// Namespaces the objects and watches are spread over.
    #[arg(long, default_value_t = 100)]
    namespaces: usize,
    /// Concurrent clients sending creates and patches.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Patches to send.
    #[arg(long, default_value_t = 20_000)]
    patches: usize,
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

fn namespace_of(i: usize, namespaces: usize) -> String {
    format!("capacity-{}", i % namespaces)
}

/// Runs `count` requests over `clients` concurrent tasks; the elapsed time.
async fn concurrently<F, Fut>(count: usize, clients: usize, request: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let request = Arc::new(request);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (request, next) = (request.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= count {
                        return;
                    }
                    request(i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a client task");
    }
    started.elapsed()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let baseline_kib = rss_kib("VmRSS:");
    let cluster = DevCluster::start(DevClusterOptions::default()).await?;
    let client = cluster.client();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    for n in 0..args.namespaces {
        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": namespace_of(n, args.namespaces)}}),
        )?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }

    let (objects, spread) = (args.objects, args.namespaces);
    let creator = client.clone();
    let create_time = concurrently(objects, args.clients, move |i| {
        let api: Api<ConfigMap> = Api::namespaced(creator.clone(), &namespace_of(i, spread));
        async move {
            let cm: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("object-{i}"), "labels": {"app": "capacity", "shard": (i % 10).to_string()}},
                "data": {"index": i.to_string(), "payload": "x".repeat(256)},
            }))
            .expect("a ConfigMap");
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create");
        }
    })
    .await;
    let after_objects_kib = rss_kib("VmRSS:");

    // Watches: each namespace gets an equal share; every watch drains its stream and counts.
    let events = Arc::new(AtomicU64::new(0));
    let rv = cluster.store().current_rv().to_string();
    let mut watch_tasks = Vec::with_capacity(args.watches);
    for w in 0..args.watches {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace_of(w, spread));
        let params = WatchParams::default().disable_bookmarks();
        let stream = api.watch(&params, &rv).await?;
        let events = events.clone();
        watch_tasks.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            while let Ok(Some(event)) = stream.try_next().await {
                if matches!(event, WatchEvent::Modified(_)) {
                    events.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    while cluster.open_watches() < args.watches {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after_watches_kib = rss_kib("VmRSS:");

    cluster.reset_requests();
    let patches_started = Instant::now();
    let patcher = client.clone();
    let patch_time = concurrently(args.patches, args.clients, move |i| {
        let n = i % objects;
        let api: Api<ConfigMap> = Api::namespaced(patcher.clone(), &namespace_of(n, spread));
        async move {
            api.patch(
                &format!("object-{n}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"round": i.to_string()}})),
            )
            .await
            .expect("patch");
        }
    })
    .await;
    // Every patch reaches the watches of its namespace.
    let per_namespace = args.watches / args.namespaces;
    let expected_events = (args.patches * per_namespace) as u64;
    let delivery_deadline = Instant::now() + Duration::from_secs(60);
    while events.load(Ordering::Relaxed) < expected_events && Instant::now() < delivery_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let delivery_time = patches_started.elapsed();
    let after_patches_kib = rss_kib("VmRSS:");
    let counts = cluster.requests();

    let report = json!({
        "benchmark": "kube-devcluster capacity",
        "objects": cluster.store().object_count(),
        "open_watches": cluster.open_watches(),
        "clients": args.clients,
        "creates": objects,
        "creates_per_s": (objects as f64 / create_time.as_secs_f64()).round(),
        "patches": counts.count(Verb::Patch, "configmaps"),
        "patches_per_s": (args.patches as f64 / patch_time.as_secs_f64()).round(),
        "watch_events_expected": expected_events,
        "watch_events_delivered": events.load(Ordering::Relaxed),
        "watch_events_per_s": (events.load(Ordering::Relaxed) as f64 / delivery_time.as_secs_f64()).round(),
        "rss_mib": {
            "baseline": mib(baseline_kib),
            "after_objects": mib(after_objects_kib),
            "after_watches": mib(after_watches_kib),
            "after_patches": mib(after_patches_kib),
            "peak": mib(rss_kib("VmHWM:")),
        },
    });
    println!("{report}");
    for task in watch_tasks {
        task.abort();
    }
    Ok(())
}
