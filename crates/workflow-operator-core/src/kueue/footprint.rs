//! The peak concurrent footprint of a workflow: the most of each resource its steps' pods can
//! request at one moment, which is what a Workload for the whole run (`queueScope: Workflow`)
//! asks Kueue for. Pure: computed from the DAG, `runs`, `parallelism` and the steps' requests.
//!
//! Two pods can run at once when neither step depends (directly or not) on the other, or when
//! they belong to different runs of the DAG (`spec.runs`), or are two items of one fan-out.
//! The peak of a resource is the largest total of such a set of pods of at most `parallelism`
//! pods. Each resource is maximised on its own, so the footprint covers every set that can run
//! at once (it may ask for more than any one set uses when different sets peak on different
//! resources, never for less).
//!
//! # Guarantees
//! - Sound: no set of pods that can run at once requests more of any resource than the peak.
//! - Exact for each resource when the search ([`SEARCH_BUDGET`] nodes per slot count) ends;
//!   otherwise it falls back to the largest `parallelism` pods, a bound that is still sound
//!   ([`Footprint::exact`] says which).
//!
//! # Caveats
//! A fan-out whose length is known only at run time (`withParam`) cannot be sized: the caller
//! declares `spec.resources` instead, or a `parallelism` bounds it.

use std::collections::BTreeMap;

/// Amounts by resource name, in milli-units (`cpu: 500m` is 500, `memory: 1Ki` is 1,024,000).
pub type Amounts = BTreeMap<String, i128>;

/// What one step asks for: the amounts of one of its pods, and how many of its pods can run at
/// once within one run (1, or a fan-out's item count; `None` when not known before it runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    pub amounts: Amounts,
    pub copies: Option<u32>,
}

/// The shape a footprint is computed over: which steps depend on which, directly or not;
/// `runs` copies of the DAG; at most `parallelism` pods at once (`None`: no limit).
#[derive(Debug, Clone)]
pub struct Shape {
    /// `reach[b]` has bit `a` when step `b` depends on `a`, directly or not.
    reach: Vec<Vec<u64>>,
    pub runs: u32,
    pub parallelism: Option<u32>,
}

impl Shape {
    /// The shape of a DAG given as each step's direct dependencies, visited in `topological`
    /// order (every step after its dependencies).
    pub fn new(
        dependencies: &[Vec<usize>],
        topological: &[usize],
        runs: u32,
        parallelism: Option<u32>,
    ) -> Shape {
        let n = dependencies.len();
        let words = n.div_ceil(64);
        let mut reach = vec![vec![0u64; words]; n];
        for &b in topological {
            let mut bits = vec![0u64; words];
            for &a in &dependencies[b] {
                bits[a / 64] |= 1 << (a % 64);
                for (word, from) in bits.iter_mut().zip(&reach[a]) {
                    *word |= from;
                }
            }
            reach[b] = bits;
        }
        Shape {
            reach,
            runs,
            parallelism,
        }
    }

    fn depends(&self, b: usize, a: usize) -> bool {
        self.reach[b][a / 64] & (1 << (a % 64)) != 0
    }

    /// Whether pods of steps `a` and `b` of one run can run at once.
    pub fn concurrent(&self, a: usize, b: usize) -> bool {
        a == b || (!self.depends(a, b) && !self.depends(b, a))
    }

    /// How many steps.
    pub fn len(&self) -> usize {
        self.reach.len()
    }

    /// Whether there is no step.
    pub fn is_empty(&self) -> bool {
        self.reach.is_empty()
    }
}

/// The peak of each resource, and whether every one was found exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    pub amounts: Amounts,
    pub exact: bool,
}

/// Why a footprint cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsized {
    #[error(
        "step {0} fans out over a list known only when it runs (withParam): declare spec.resources, or bound it with spec.parallelism"
    )]
    UnknownFanOut(String),
}

/// How many search nodes one resource and slot count may visit before the search settles for
/// the sound bound.
pub const SEARCH_BUDGET: usize = 200_000;

/// The peak concurrent footprint of steps `demands` (by index in `shape`), named `names` for
/// errors.
///
/// # Errors
/// [`Unsized::UnknownFanOut`] for a fan-out of unknown length when `parallelism` is unset.
pub fn peak(shape: &Shape, demands: &[Demand], names: &[&str]) -> Result<Footprint, Unsized> {
    let cap = shape.parallelism;
    let mut copies = Vec::with_capacity(demands.len());
    for (i, demand) in demands.iter().enumerate() {
        match (demand.copies, cap) {
            (Some(n), _) => copies.push(n),
            // At most `parallelism` of its items run at once.
            (None, Some(p)) => copies.push(p),
            (None, None) => {
                return Err(Unsized::UnknownFanOut(
                    names.get(i).copied().unwrap_or("?").to_string(),
                ));
            }
        }
    }
    let resources: std::collections::BTreeSet<&String> =
        demands.iter().flat_map(|d| d.amounts.keys()).collect();
    let mut footprint = Footprint {
        amounts: Amounts::new(),
        exact: true,
    };
    for resource in resources {
        let weights: Vec<i128> = demands
            .iter()
            .map(|d| d.amounts.get(resource).copied().unwrap_or(0).max(0))
            .collect();
        let (amount, exact) = peak_of(shape, &weights, &copies);
        footprint.exact &= exact;
        if amount > 0 {
            footprint.amounts.insert(resource.clone(), amount);
        }
    }
    Ok(footprint)
}

/// Above this many slots the spread of slots over runs is not searched: the sound bound is
/// used.
const MAX_SPREAD_SLOTS: u64 = 512;

/// The peak of one resource whose per-pod amounts are `weights`, and whether it is exact.
fn peak_of(shape: &Shape, weights: &[i128], copies: &[u32]) -> (i128, bool) {
    let per_run: u64 = copies.iter().map(|&c| u64::from(c)).sum();
    let pods = per_run * u64::from(shape.runs);
    let unlimited = Search::new(shape, weights, copies, per_run).run();
    let slots = match shape.parallelism {
        Some(p) if u64::from(p) < pods => u64::from(p),
        // No limit, or one no set of pods reaches: each run at its own peak.
        _ => return (unlimited.0 * i128::from(shape.runs), unlimited.1),
    };
    if !unlimited.1 || slots > MAX_SPREAD_SLOTS {
        return (largest_pods(weights, copies, shape.runs, slots), false);
    }
    // The best of one run with at most s pods, for s = 0..=min(slots, per_run).
    let mut best = Vec::new();
    for s in 0..=slots.min(per_run) {
        let (value, done) = Search::new(shape, weights, copies, s).run();
        if !done {
            return (largest_pods(weights, copies, shape.runs, slots), false);
        }
        best.push(value);
    }
    (spread_over_runs(&best, shape.runs, slots), true)
}

/// The best total of `runs` runs together using at most `slots` pods, each run's best for s
/// pods being `best[s]` (or `best`'s last beyond it): a knapsack over the runs.
fn spread_over_runs(best: &[i128], runs: u32, slots: u64) -> i128 {
    let at = |s: u64| best[(s as usize).min(best.len() - 1)];
    let slots = slots as usize;
    let mut total = vec![0i128; slots + 1];
    // A run that adds anything uses a slot: more runs than slots add nothing.
    for _ in 0..u64::from(runs).min(slots as u64) {
        let mut next = total.clone();
        for used in 0..=slots {
            for s in 1..=(slots - used) {
                let value = total[used] + at(s as u64);
                if value > next[used + s] {
                    next[used + s] = value;
                }
            }
        }
        total = next;
    }
    total.into_iter().max().unwrap_or(0)
}

/// The sound bound: the `slots` largest pods of all runs, whether or not they can run at once.
fn largest_pods(weights: &[i128], copies: &[u32], runs: u32, slots: u64) -> i128 {
    let mut all: Vec<(i128, u64)> = weights
        .iter()
        .zip(copies)
        .map(|(&w, &c)| (w, u64::from(c) * u64::from(runs)))
        .collect();
    all.sort_by_key(|pod| std::cmp::Reverse(pod.0));
    let (mut left, mut total) = (slots, 0i128);
    for (w, n) in all {
        let take = n.min(left);
        total += w * take as i128;
        left -= take;
    }
    total
}

/// A branch-and-bound search for the heaviest set of pods of one run, at most `slots` of them,
/// whose steps can all run at once.
struct Search<'a> {
    shape: &'a Shape,
    /// Steps with a positive weight and pods, heaviest first.
    order: Vec<(usize, i128, u64)>,
    slots: u64,
    best: i128,
    visited: usize,
}

impl<'a> Search<'a> {
    fn new(shape: &'a Shape, weights: &[i128], copies: &[u32], slots: u64) -> Self {
        let mut order: Vec<(usize, i128, u64)> = (0..weights.len())
            .filter(|&i| weights[i] > 0 && copies[i] > 0)
            .map(|i| (i, weights[i], u64::from(copies[i])))
            .collect();
        order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Search {
            shape,
            order,
            slots,
            best: 0,
            visited: 0,
        }
    }

    /// The best total, and whether the search finished within its budget.
    fn run(mut self) -> (i128, bool) {
        let mut chosen = Vec::new();
        let done = self.visit(0, self.slots, 0, &mut chosen);
        (self.best, done)
    }

    /// Explores the choices from `order[at]` on; false when the budget ran out.
    fn visit(&mut self, at: usize, left: u64, total: i128, chosen: &mut Vec<usize>) -> bool {
        self.visited += 1;
        if self.visited > SEARCH_BUDGET {
            return false;
        }
        self.best = self.best.max(total);
        if at == self.order.len() || left == 0 || total + self.bound(at, left) <= self.best {
            return true;
        }
        let (step, weight, copies) = self.order[at];
        if chosen.iter().all(|&c| self.shape.concurrent(c, step)) {
            let take = copies.min(left);
            chosen.push(step);
            // Taking all the pods it can is never worse than fewer: the slots it leaves could
            // only go to lighter pods (the order is heaviest first).
            let ok = self.visit(
                at + 1,
                left - take,
                total + weight * i128::from(take),
                chosen,
            );
            chosen.pop();
            if !ok {
                return false;
            }
        }
        self.visit(at + 1, left, total, chosen)
    }

    /// The most the pods from `order[at]` on could add in `left` slots.
    fn bound(&self, at: usize, left: u64) -> i128 {
        let (mut left, mut total) = (left, 0i128);
        for &(_, weight, copies) in &self.order[at..] {
            let take = copies.min(left);
            total += weight * i128::from(take);
            left -= take;
            if left == 0 {
                break;
            }
        }
        total
    }
}

#[cfg(test)]
#[path = "footprint_tests.rs"]
mod tests;
