//! How fair a semaphore was in a benchmark run: how far the order in which the workflows took
//! it is from the order the operator promises, `spec.priority` (highest first) then age
//! (`creationTimestamp`, to the second, then namespace and name: the lock book's `Rank`).
//! Pure; [`super::run`] feeds it what the [`super::timeline::Timeline`] saw (each workflow's
//! first lock Lease, in commit order, and each workflow's priority and creation time).
//!
//! Two figures: the **inversions** (pairs of workflows that took the lock in the opposite order
//! to their ranks; 0 is a perfect queue, half of all pairs a random one) and the **rank
//! displacement** of each workflow (|its place in the taking order − its rank|).

use std::cmp::Reverse;
use std::collections::HashMap;

use serde::Serialize;

/// What orders the workflows waiting for a lock: priority (highest first), creation time
/// (RFC 3339 to the second, which sorts as text), `namespace/name`.
pub type Rank = (Reverse<i64>, String, String);

/// The wait-order figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitOrder {
    /// Workflows seen taking the lock (those with a known rank).
    pub acquired: usize,
    /// Pairs taken in the opposite order to their ranks.
    pub inversions: u64,
    /// `inversions` over all pairs: 0 in rank order, about 0.5 for a random order.
    pub inversion_fraction: f64,
    /// The largest |place taken − rank| of a workflow.
    pub max_displacement: usize,
    pub mean_displacement: f64,
}

/// The figures of `taken` (workflows, `namespace/name`, in the order they took the lock),
/// ranked by `ranks`; a workflow without a rank is left out.
pub fn measure(taken: &[String], ranks: &HashMap<String, Rank>) -> WaitOrder {
    let ranked: Vec<&Rank> = taken.iter().filter_map(|w| ranks.get(w)).collect();
    let n = ranked.len();
    let mut by_rank: Vec<usize> = (0..n).collect();
    by_rank.sort_by(|&a, &b| ranked[a].cmp(ranked[b]));
    // rank_of_place[i]: the rank of the i-th workflow to take the lock.
    let mut rank_of_place = vec![0; n];
    for (rank, &place) in by_rank.iter().enumerate() {
        rank_of_place[place] = rank;
    }
    let inversions = (0..n)
        .map(|i| {
            let later = &rank_of_place[i + 1..];
            later.iter().filter(|&&r| r < rank_of_place[i]).count() as u64
        })
        .sum();
    let displacements: Vec<usize> = (rank_of_place.iter().enumerate())
        .map(|(place, &rank)| place.abs_diff(rank))
        .collect();
    let pairs = (n * n.saturating_sub(1) / 2) as f64;
    WaitOrder {
        acquired: n,
        inversions,
        inversion_fraction: if pairs > 0.0 {
            round4(inversions as f64 / pairs)
        } else {
            0.0
        },
        max_displacement: displacements.iter().copied().max().unwrap_or(0),
        mean_displacement: if n > 0 {
            round4(displacements.iter().sum::<usize>() as f64 / n as f64)
        } else {
            0.0
        },
    }
}

fn round4(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks(of: &[(&str, i64, &str)]) -> HashMap<String, Rank> {
        of.iter()
            .map(|(name, priority, created)| {
                let rank = (Reverse(*priority), created.to_string(), name.to_string());
                (name.to_string(), rank)
            })
            .collect()
    }

    fn taken(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn inversions_and_displacements_against_priority_then_age() {
        let ranks = ranks(&[
            ("ns/a", 0, "2026-01-01T00:00:00Z"),
            ("ns/b", 0, "2026-01-01T00:00:01Z"),
            ("ns/c", 5, "2026-01-01T00:00:02Z"),
            ("ns/d", 0, "2026-01-01T00:00:01Z"),
        ]);
        // Rank order: c (priority 5), a (oldest), b, d (same second, by name).
        let cases = [
            (&["ns/c", "ns/a", "ns/b", "ns/d"][..], 0, 0),
            (&["ns/a", "ns/c", "ns/b", "ns/d"][..], 1, 1),
            (&["ns/d", "ns/b", "ns/a", "ns/c"][..], 6, 3),
        ];
        for (order, inversions, max_displacement) in cases {
            let figures = measure(&taken(order), &ranks);
            assert_eq!(
                (
                    figures.acquired,
                    figures.inversions,
                    figures.max_displacement
                ),
                (4, inversions, max_displacement),
                "{order:?}"
            );
        }
        let reversed = measure(&taken(&["ns/d", "ns/b", "ns/a", "ns/c"]), &ranks);
        assert_eq!(reversed.inversion_fraction, 1.0);
        assert_eq!(reversed.mean_displacement, 2.0);
    }

    #[test]
    fn workflows_without_a_rank_are_left_out() {
        let ranks = ranks(&[("ns/a", 0, "2026-01-01T00:00:00Z")]);
        let figures = measure(&taken(&["ns/x", "ns/a"]), &ranks);
        assert_eq!((figures.acquired, figures.inversions), (1, 0));
        assert_eq!(measure(&[], &ranks).inversion_fraction, 0.0);
    }
}
