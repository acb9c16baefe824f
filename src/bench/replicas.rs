//! `bench --replicas R --shards S`: the operator as R processes sharing the work by S shards
//! (`run --shards`), each measured on its own. Replica 0 is the one the single-process figures
//! describe; the run starts once the shards are spread over the replicas (each holding
//! `S / R`, within one), so the figures are of the shared work, not of the hand-over.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use workflow_operator_core::shards::{self, SHARD_LEASE_PREFIX};

use super::process::{OperatorProcess, Spawn};
use super::procfs;
use super::{Error, ProcessFigures, Result};

/// How many operator processes, and how many shards they share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    pub count: usize,
    pub shards: u32,
}

impl Replicas {
    /// Whether the operator runs sharded (anything but one process, one shard).
    pub fn sharded(&self) -> bool {
        self.count > 1 || self.shards > 1
    }
}

/// The spawn of replica `index`: `spawn` with `run --shards`, its identity, its Leases in
/// `namespace`, and its own log file.
pub fn spawn_of(spawn: &Spawn, index: usize, replicas: Replicas, namespace: &str) -> Spawn {
    let mut spawn = spawn.clone();
    spawn.extra_args.extend([
        "--shards".to_string(),
        replicas.shards.to_string(),
        "--leader-election-namespace".to_string(),
        namespace.to_string(),
        "--leader-election-identity".to_string(),
        format!("replica-{index}"),
    ]);
    if index > 0 {
        let mut log = spawn.log.into_os_string();
        log.push(format!(".{index}"));
        spawn.log = PathBuf::from(log);
    }
    spawn
}

/// Starts replicas `1..count` (replica 0 is started as the single operator is).
///
/// # Errors
/// When one cannot be started.
pub fn start_others(
    spawn: &Spawn,
    replicas: Replicas,
    namespace: &str,
    kubeconfig: &std::path::Path,
) -> Result<Vec<(OperatorProcess, Spawn)>> {
    (1..replicas.count)
        .map(|index| {
            let spawn = spawn_of(spawn, index, replicas, namespace);
            let process =
                OperatorProcess::start(&spawn, kubeconfig).map_err(|source| Error::Spawn {
                    exe: spawn.exe.clone(),
                    source,
                })?;
            Ok((process, spawn))
        })
        .collect()
}

/// Waits (up to `limit`) until the shards' Leases in `namespace` are held by `replicas.count`
/// holders, each within one of its share.
///
/// # Errors
/// [`Error::NoOperator`] when they are not by then.
pub async fn wait_spread(
    client: &kube::Client,
    namespace: &str,
    replicas: Replicas,
    limit: Duration,
) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + limit;
    let mut last = BTreeMap::new();
    while Instant::now() < deadline {
        if let Ok(list) = leases.list(&ListParams::default()).await {
            last = holders(&list.items);
            let held: u32 = last.values().sum();
            let share = |position| shards::target(replicas.shards, replicas.count, position);
            let even = last.values().all(|n| n.abs_diff(share(0)) <= 1);
            if held == replicas.shards && last.len() == replicas.count && even {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::NoOperator {
        what: "spread the shards over the replicas".into(),
        limit,
        detail: format!("; the Leases' holders: {last:?}"),
    })
}

/// How many shard Leases each holder holds.
fn holders(leases: &[Lease]) -> BTreeMap<String, u32> {
    let mut held = BTreeMap::new();
    for lease in leases {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
        if let (true, Some(holder)) = (name.starts_with(SHARD_LEASE_PREFIX), holder)
            && !holder.is_empty()
        {
            *held.entry(holder).or_insert(0) += 1;
        }
    }
    held
}

/// Samples each of `processes` now (for CPU between two samples and peak RSS).
pub fn sample_all(processes: &[(OperatorProcess, Spawn)]) -> Vec<Option<procfs::Sample>> {
    processes
        .iter()
        .map(|(process, _)| procfs::sample(&process.pid().to_string()).ok())
        .collect()
}

/// Each replica's figures between `start` and `end` samples.
pub fn figures(
    processes: &[(OperatorProcess, Spawn)],
    start: &[Option<procfs::Sample>],
    end: &[Option<procfs::Sample>],
) -> Vec<ProcessFigures> {
    processes
        .iter()
        .zip(start.iter().zip(end))
        .filter_map(|((process, spawn), (start, end))| {
            let (start, end) = (start.as_ref()?, end.as_ref()?);
            let log = Some(spawn.log.clone());
            Some(ProcessFigures::between(process.pid(), start, end, log))
        })
        .collect()
}
