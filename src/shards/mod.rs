//! `run --shards S`: several replicas share the work, each holding some of S shards and
//! caching only their objects.
//!
//! - Each WorkFlow and CronWorkFlow belongs to a shard (`workflow_operator_core::shards`),
//!   recorded as a label by [`stamp`] in the replica holding that shard; what the operator
//!   creates for it carries the label too.
//! - Shard `i` is worked by the holder of the Lease `workflow-operator-shard-<i>`, through the
//!   leader election of [`crate::leader`] (one per shard): the same exclusion rules as the
//!   leader Lease, so a replica that cannot renew stops its work on the shard before anyone
//!   else may start it, and one that gives a shard up stops its work first, then releases.
//! - While it holds a shard, a replica runs the operator's handlers for that shard alone
//!   ([`operator::run_shard`]), whose watches select the shard's objects on the API server.
//! - The replicas spread the shards evenly: each knows the others from their membership
//!   Leases (`members.rs`), takes free shards only while it holds fewer than its share
//!   (`shards::target`), and gives up its highest shards while it holds more.

mod members;
pub mod stamp;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use kube::Client;
use kube_kopf::Monitor;
use tokio_util::sync::CancellationToken;
use workflow_operator_core::shards;

use crate::controllers::workflow::operator::{self, Mirrors, OperatorOptions, ReplicaServices};
use crate::leader::{Ended, LeaderElection, Timing};
use members::Membership;

/// How the replicas share the shards.
#[derive(Debug, Clone)]
pub struct ShardOptions {
    /// How many shards there are (`--shards`).
    pub shards: u32,
    /// Where the shards' and replicas' Leases live.
    pub namespace: String,
    /// The operator's Lease name (`--leader-election-lease`): the replicas' Leases are named
    /// from it, so two operators in one namespace keep apart.
    pub group: String,
    /// This replica's identity in the Leases.
    pub identity: String,
    /// How long an unrenewed Lease stays valid.
    pub lease_duration: Duration,
}

/// What this replica holds now, shared by its shard tasks and its balancer.
#[derive(Default)]
struct Book {
    /// How many shards this replica should hold.
    target: AtomicU32,
    /// The shards whose work runs here, with their cache's monitor and mirrors.
    held: Mutex<BTreeMap<u32, (Monitor, Mirrors)>>,
    /// Cancelling one gives its shard up (its work stops, then its Lease is released).
    give_up: Mutex<BTreeMap<u32, CancellationToken>>,
    /// The held shards as they change, for the stamper (`stamp`).
    held_now: tokio::sync::watch::Sender<BTreeSet<u32>>,
    /// Told when `target` rose, so the shards' contenders standing by try at once.
    target_raised: Arc<tokio::sync::Notify>,
}

impl Book {
    fn held(&self) -> BTreeSet<u32> {
        self.held.lock().expect("book").keys().copied().collect()
    }

    /// Whether this replica may take one more shard.
    fn wants_more(&self) -> bool {
        let held = u32::try_from(self.held.lock().expect("book").len()).unwrap_or(u32::MAX);
        held < self.target.load(Ordering::Acquire)
    }

    /// True once every held shard's cache holds its first listing.
    fn synced(&self) -> bool {
        let held = self.held.lock().expect("book");
        held.values().all(|(monitor, _)| monitor.is_synced())
    }

    fn cached_workflows(&self) -> usize {
        let held = self.held.lock().expect("book");
        held.values().map(|(_, m)| m.workflows.len()).sum()
    }
}

/// Runs this replica's share of the work until `shutdown` is cancelled: then every held shard's
/// work stops and its Lease is released, and this replica's membership Lease is deleted.
///
/// # Errors
/// Only when the first read of the Leases fails in a way retrying cannot mend (none today:
/// API errors are logged and retried).
pub async fn run_sharded(
    client: Client,
    options: OperatorOptions,
    sharding: ShardOptions,
    readiness: crate::telemetry::http::Readiness,
    shutdown: CancellationToken,
) -> Result<()> {
    let services = Arc::new(ReplicaServices::start(&client, &options));
    let book = Arc::new(Book::default());
    {
        let book = book.clone();
        readiness.add_check(move || book.synced());
    }
    if let Some(metrics) = &options.metrics {
        let book = book.clone();
        metrics.sample_cached_workflows(move || book.cached_workflows());
    }
    let stamper = tokio::spawn(stamp::run(
        client.clone(),
        options.namespace.clone(),
        sharding.shards,
        book.held_now.subscribe(),
    ));
    let mut tasks = tokio::task::JoinSet::new();
    for shard in 0..sharding.shards {
        let work = ShardWork {
            client: client.clone(),
            options: options.clone(),
            services: services.clone(),
            book: book.clone(),
            sharding: sharding.clone(),
            shard,
        };
        tasks.spawn(work.contend(shutdown.clone()));
    }
    let mut membership = Membership::new(
        client,
        &sharding.namespace,
        &sharding.group,
        &sharding.identity,
        sharding.lease_duration,
    );
    balance(
        &mut membership,
        &book,
        &services,
        &sharding,
        &readiness,
        &shutdown,
    )
    .await;
    while tasks.join_next().await.is_some() {}
    membership.leave().await;
    stamper.abort();
    Ok(())
}

/// Every retry period, until `shutdown`: renews this replica's membership, recomputes its
/// share from the live replicas, gives up the highest shards it holds beyond it, and tells its
/// intake windows how many replicas pace the API server with it.
async fn balance(
    membership: &mut Membership,
    book: &Book,
    services: &ReplicaServices,
    sharding: &ShardOptions,
    readiness: &crate::telemetry::http::Readiness,
    shutdown: &CancellationToken,
) {
    let period = Timing::from_lease_duration(sharding.lease_duration).retry_period;
    loop {
        if let Err(error) = membership.heartbeat().await {
            tracing::warn!(%error, "cannot renew this replica's membership Lease");
        }
        match membership.live().await {
            Ok(live) => {
                let position = live.iter().position(|id| *id == sharding.identity);
                let target = shards::target(sharding.shards, live.len(), position.unwrap_or(0));
                if book.target.swap(target, Ordering::AcqRel) < target {
                    book.target_raised.notify_waiters();
                }
                services.set_live_replicas(live.len());
                readiness.set_ready(true);
                give_up_beyond(book, target);
            }
            Err(error) => tracing::warn!(%error, "cannot list the replicas' Leases"),
        }
        // A member that stops renewing is counted gone when its Lease expires, not up to a
        // period later.
        let pause = membership
            .expires_in(tokio::time::Instant::now())
            .map_or(period, |left| period.min(left));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Gives up the highest held shards beyond `target`.
fn give_up_beyond(book: &Book, target: u32) {
    let held = book.held();
    let excess = held.len().saturating_sub(target as usize);
    let tokens = book.give_up.lock().expect("book");
    for shard in held.iter().rev().take(excess) {
        if let Some(token) = tokens.get(shard) {
            tracing::info!(shard, target, "giving a shard up to spread the work");
            token.cancel();
        }
    }
}

/// One shard's contention and work in this replica.
struct ShardWork {
    client: Client,
    options: OperatorOptions,
    services: Arc<ReplicaServices>,
    book: Arc<Book>,
    sharding: ShardOptions,
    shard: u32,
}

impl ShardWork {
    /// Contends for the shard's Lease and works the shard while holding it, again and again
    /// (after giving it up or losing it), until `shutdown`.
    async fn contend(self, shutdown: CancellationToken) {
        let lease = shards::lease_name(self.shard);
        while !shutdown.is_cancelled() {
            let give_up = shutdown.child_token();
            self.book
                .give_up
                .lock()
                .expect("book")
                .insert(self.shard, give_up.clone());
            let book = self.book.clone();
            let election = LeaderElection::new(
                self.client.clone(),
                &self.sharding.namespace,
                &lease,
                self.sharding.identity.clone(),
                self.sharding.lease_duration,
            )
            .with_gate(
                Arc::new(move || book.wants_more()),
                self.book.target_raised.clone(),
            );
            let ended = election
                .run_while_leader(|stop| self.work(stop), give_up)
                .await;
            match ended {
                Ended::LostLeadership(_) => {
                    tracing::warn!(
                        shard = self.shard,
                        "lost the shard's Lease: its work stopped"
                    )
                }
                Ended::Finished(Err(error)) | Ended::Shutdown(Some(Err(error))) => {
                    tracing::warn!(shard = self.shard, error = %format!("{error:#}"), "the shard's work stopped");
                }
                _ => {}
            }
        }
    }

    /// The operator's handlers for this shard, until `stop` is cancelled.
    async fn work(&self, stop: CancellationToken) -> Result<()> {
        let monitor = Monitor::new();
        let mirrors = Mirrors::new();
        let mut options = self.options.clone();
        options.mirror = Some(mirrors.clone());
        self.set_held(Some((monitor.clone(), mirrors)));
        tracing::info!(shard = self.shard, "working the shard");
        let ran = operator::run_shard(
            self.client.clone(),
            options,
            &self.services,
            Some(self.shard),
            monitor,
            stop.cancelled_owned(),
        )
        .await;
        self.set_held(None);
        tracing::info!(shard = self.shard, "stopped working the shard");
        ran
    }

    fn set_held(&self, held: Option<(Monitor, Mirrors)>) {
        let mut book = self.book.held.lock().expect("book");
        let now_held = held.is_some();
        match held {
            Some(entry) => book.insert(self.shard, entry),
            None => book.remove(&self.shard),
        };
        self.book
            .held_now
            .send_replace(book.keys().copied().collect());
        if let Some(metrics) = &self.options.metrics {
            metrics.set_shard_held(self.shard, now_held, book.len());
        }
    }
}
