//! Which shard an object belongs to when several operator replicas share the work
//! (`run --shards S`), and how many shards each replica should hold. Pure: the replicas'
//! Leases and watches are the operator's (`src/shards/`).
//!
//! A WorkFlow, CronWorkFlow or WorkFlowTrigger belongs to the shard of its *key*: its namespace
//! and name, or, for the run of a CronWorkFlow or a WorkFlowTrigger, its owner's. Keeping a
//! cron's or a trigger's runs in its shard lets the replica holding it follow its runs (history
//! limits, `concurrencyPolicy`) from its own cache, as Flyte keeps a workflow's nodes with it. The shard is recorded as the label
//! [`LABEL_SHARD`] when the object is first seen, and copied to everything the operator
//! creates for it (its Jobs and their pods, a cron's runs), so each replica's watches select
//! their objects on the server.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// Label: the shard (`0..S`) of a WorkFlow, a CronWorkFlow, and everything the operator
/// creates for one.
pub const LABEL_SHARD: &str = "workflow.crd.com/shard";

/// The prefix of the shards' Leases: shard `i` is held through `workflow-operator-shard-<i>`.
pub const SHARD_LEASE_PREFIX: &str = "workflow-operator-shard-";

/// The shard of the object keyed by `namespace` and `name` among `shards`: the first eight
/// bytes of SHA-256 over `namespace/name`, modulo `shards`. Stable across releases and
/// platforms (it is recorded in labels), and spread evenly whatever the names look like.
///
/// # Panics
/// When `shards` is 0.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    assert!(shards > 0, "there is at least one shard");
    let digest = Sha256::new()
        .chain_update(namespace.as_bytes())
        .chain_update(b"/")
        .chain_update(name.as_bytes())
        .finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % u64::from(shards)) as u32
}

/// The kinds whose runs live in their shard (see the module's documentation).
pub const RUN_OWNERS: [&str; 2] = ["CronWorkFlow", "WorkFlowTrigger"];

/// The name whose shard an object takes: the CronWorkFlow or WorkFlowTrigger that owns it (a
/// run of one), else its own.
pub fn key_name<'a>(name: &'a str, run_owner: Option<&'a str>) -> &'a str {
    run_owner.unwrap_or(name)
}

/// The shard recorded on an object with `labels`, when it is a valid one of `shards`.
pub fn recorded(labels: &BTreeMap<String, String>, shards: u32) -> Option<u32> {
    labels
        .get(LABEL_SHARD)?
        .parse::<u32>()
        .ok()
        .filter(|shard| *shard < shards)
}

/// The label selector of the objects in `held` (a watch's `labelSelector`): `key in (0,3)`.
/// Empty `held` selects nothing a stamped object can carry (`key in ()` is refused by the API
/// server), so callers hold at least one shard before they watch.
pub fn selector(held: &[u32]) -> String {
    let values: Vec<String> = held.iter().map(u32::to_string).collect();
    format!("{LABEL_SHARD} in ({})", values.join(","))
}

/// The name of shard `shard`'s Lease.
pub fn lease_name(shard: u32) -> String {
    format!("{SHARD_LEASE_PREFIX}{shard}")
}

/// How many of `shards` the replica at `position` (0-based) of `replicas`, sorted by
/// identity, should hold: `shards / replicas`, one more for the first `shards % replicas`.
/// The targets add up to `shards`, and differ by at most one.
pub fn target(shards: u32, replicas: usize, position: usize) -> u32 {
    let replicas = u32::try_from(replicas.max(1)).unwrap_or(u32::MAX);
    let position = u32::try_from(position).unwrap_or(u32::MAX);
    shards / replicas + u32::from(position < shards % replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    /// `int.from_bytes(hashlib.sha256(b"default/a").digest()[:8], "big") % 12` and so on,
    /// in Python: the function written down independently.
    const GOLDEN: [u32; 4] = [2, 10, 5, 7];
    use proptest::prelude::*;

    #[test]
    fn shards_are_stable_values() {
        // Recorded in labels: a change here moves every existing object to another shard.
        let shards: Vec<u32> = ["a", "b", "c", "d"]
            .iter()
            .map(|name| shard_of("default", name, 12))
            .collect();
        assert_eq!(shards, GOLDEN);
    }

    #[test]
    fn names_spread_evenly() {
        let mut counts = [0u32; 6];
        for i in 0..6000 {
            counts[shard_of("team", &format!("wf-{i}"), 6) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (850..1150).contains(c)), "{counts:?}");
    }

    #[test]
    fn a_cron_run_takes_its_crons_key() {
        assert_eq!(key_name("nightly-1700000000", Some("nightly")), "nightly");
        assert_eq!(key_name("build", None), "build");
    }

    #[test]
    fn recorded_reads_only_shards_in_range() {
        let labels = |v: &str| BTreeMap::from([(LABEL_SHARD.to_string(), v.to_string())]);
        assert_eq!(recorded(&labels("3"), 6), Some(3));
        assert_eq!(
            recorded(&labels("6"), 6),
            None,
            "from a run with more shards"
        );
        assert_eq!(recorded(&labels("x"), 6), None);
        assert_eq!(recorded(&BTreeMap::new(), 6), None);
    }

    #[test]
    fn the_selector_names_the_held_shards() {
        assert_eq!(selector(&[0, 3]), "workflow.crd.com/shard in (0,3)");
    }

    proptest! {
        #[test]
        fn targets_add_up_and_differ_by_at_most_one(shards in 1u32..64, replicas in 1usize..16) {
            let targets: Vec<u32> = (0..replicas).map(|p| target(shards, replicas, p)).collect();
            prop_assert_eq!(targets.iter().sum::<u32>(), shards);
            let (min, max) = (targets.iter().min().unwrap(), targets.iter().max().unwrap());
            prop_assert!(max - min <= 1);
        }

        #[test]
        fn every_object_has_a_shard_in_range(ns in "[a-z]{1,8}", name in "[a-z0-9-]{1,20}", shards in 1u32..64) {
            prop_assert!(shard_of(&ns, &name, shards) < shards);
        }
    }
}
