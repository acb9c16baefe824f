use proptest::prelude::*;
use rstest::rstest;

use super::{Amounts, Demand, Shape, Unsized, peak};

fn cpu(milli: i128, copies: u32) -> Demand {
    Demand {
        amounts: Amounts::from([("cpu".to_string(), milli)]),
        copies: Some(copies),
    }
}

fn shape(dependencies: &[Vec<usize>], runs: u32, parallelism: Option<u32>) -> Shape {
    // Tests give steps after their dependencies.
    let order: Vec<usize> = (0..dependencies.len()).collect();
    Shape::new(dependencies, &order, runs, parallelism)
}

fn cpu_peak(dependencies: &[Vec<usize>], demands: &[Demand], runs: u32, p: Option<u32>) -> i128 {
    let names = vec!["s"; demands.len()];
    let footprint = peak(&shape(dependencies, runs, p), demands, &names).expect("sized");
    assert!(footprint.exact);
    footprint.amounts.get("cpu").copied().unwrap_or(0)
}

#[rstest]
// A chain runs one step at a time: its heaviest.
#[case::chain(vec![vec![], vec![0], vec![1]], vec![cpu(100, 1), cpu(300, 1), cpu(200, 1)], 1, None, 300)]
// A diamond's middle steps run together.
#[case::diamond(vec![vec![], vec![0], vec![0], vec![1, 2]], vec![cpu(100, 1), cpu(300, 1), cpu(200, 1), cpu(400, 1)], 1, None, 500)]
// A fan-out's items run together, up to parallelism.
#[case::fan_out(vec![vec![]], vec![cpu(250, 10)], 1, None, 2500)]
#[case::fan_out_limited(vec![vec![]], vec![cpu(250, 10)], 1, Some(3), 750)]
// Two runs of a chain: each run's heaviest step at once.
#[case::runs(vec![vec![], vec![0]], vec![cpu(100, 1), cpu(300, 1)], 2, None, 600)]
// Parallelism picks the heavier pods.
#[case::limited(vec![vec![], vec![], vec![]], vec![cpu(100, 1), cpu(300, 1), cpu(200, 1)], 1, Some(2), 500)]
fn the_peak_is_the_heaviest_set_of_pods_that_can_run_at_once(
    #[case] dependencies: Vec<Vec<usize>>,
    #[case] demands: Vec<Demand>,
    #[case] runs: u32,
    #[case] parallelism: Option<u32>,
    #[case] expected: i128,
) {
    assert_eq!(
        cpu_peak(&dependencies, &demands, runs, parallelism),
        expected
    );
}

#[test]
fn each_resource_peaks_on_its_own() {
    let demand = |cpu: i128, memory: i128| Demand {
        amounts: Amounts::from([("cpu".into(), cpu), ("memory".into(), memory)]),
        copies: Some(1),
    };
    // a and b run at once, then c: cpu peaks at a+b, memory at c.
    let deps = [vec![], vec![], vec![0, 1]];
    let demands = [demand(500, 1), demand(500, 1), demand(100, 10)];
    let footprint = peak(&shape(&deps, 1, None), &demands, &["a", "b", "c"]).expect("sized");
    assert_eq!(footprint.amounts["cpu"], 1000);
    assert_eq!(footprint.amounts["memory"], 10);
}

#[test]
fn a_fan_out_known_only_at_run_time_needs_a_bound() {
    let unknown = Demand {
        amounts: Amounts::from([("cpu".into(), 100)]),
        copies: None,
    };
    let refused = peak(
        &shape(&[vec![]], 1, None),
        std::slice::from_ref(&unknown),
        &["scan"],
    );
    assert_eq!(refused, Err(Unsized::UnknownFanOut("scan".into())));
    let bounded = peak(&shape(&[vec![]], 1, Some(4)), &[unknown], &["scan"]).expect("sized");
    assert_eq!(bounded.amounts["cpu"], 400);
}

/// Every set of pods that can run at once, by brute force: per run, a set of steps none of
/// which depends on another, and how many pods of each; the best total within `parallelism`.
fn brute_force(
    deps: &[Vec<usize>],
    weights: &[i128],
    copies: &[u32],
    runs: u32,
    p: Option<u32>,
) -> i128 {
    let shape = shape(deps, runs, p);
    let n = deps.len();
    // Per run: (pods, total) of every choice.
    let mut choices: Vec<(u32, i128)> = Vec::new();
    for mask in 0u32..(1 << n) {
        let steps: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let antichain = steps
            .iter()
            .all(|&a| steps.iter().all(|&b| shape.concurrent(a, b)));
        if !antichain || steps.iter().any(|&i| copies[i] == 0) {
            continue;
        }
        let mut counts = vec![(0u32, 0i128)];
        for &i in &steps {
            counts = counts
                .into_iter()
                .flat_map(|(pods, total)| {
                    (1..=copies[i]).map(move |k| (pods + k, total + weights[i] * i128::from(k)))
                })
                .collect();
        }
        choices.extend(counts);
    }
    let mut totals = vec![(0u32, 0i128)];
    for _ in 0..runs {
        totals = totals
            .iter()
            .flat_map(|&(pods, total)| choices.iter().map(move |&(c, w)| (pods + c, total + w)))
            .filter(|&(pods, _)| p.is_none_or(|p| pods <= p))
            .collect();
        totals.sort();
        totals.dedup();
    }
    totals.into_iter().map(|(_, w)| w).max().unwrap_or(0)
}

/// A random DAG of up to five steps (each depends on some earlier ones), with weights and
/// fan-out sizes, runs and parallelism.
/// Each step's dependencies, weights and fan-out sizes; runs; parallelism.
type Generated = (Vec<Vec<usize>>, Vec<i128>, Vec<u32>, u32, Option<u32>);

fn workflows() -> impl Strategy<Value = Generated> {
    (1usize..=5).prop_flat_map(|n| {
        let deps = (0..n)
            .map(|i| proptest::collection::vec(any::<bool>(), i))
            .collect::<Vec<_>>()
            .prop_map(|rows| {
                rows.into_iter()
                    .map(|row| (0..row.len()).filter(|&j| row[j]).collect())
                    .collect()
            });
        (
            deps,
            proptest::collection::vec(0i128..1000, n),
            proptest::collection::vec(0u32..=2, n),
            1u32..=2,
            proptest::option::of(1u32..=5),
        )
    })
}

proptest! {
    /// The peak is the brute force's best set: never less than a set that can run at once
    /// (sound), never more than the best one (exact).
    #[test]
    fn the_peak_equals_the_best_concurrent_set((deps, weights, copies, runs, p) in workflows()) {
        let demands: Vec<Demand> = weights
            .iter()
            .zip(&copies)
            .map(|(&w, &c)| cpu(w, c))
            .collect();
        let expected = brute_force(&deps, &weights, &copies, runs, p);
        prop_assert_eq!(cpu_peak(&deps, &demands, runs, p), expected);
    }
}
