//! The workflows a benchmark submits: `S` steps in one of five shapes, as the plain JSON a user
//! would `kubectl create` (only the seed's fields, so any operator serving the same CRD can run
//! them, but for [`Shape::Items`], which needs `withSequence`). Pure; [`super::run`] calls
//! [`Shape::dependencies`] and [`spec`].
//!
//! A "step" of a benchmark is one Job: an item of a step that fans out counts as one (the
//! timeline tells them apart by their item label).
//!
//! Step names are short (`s0`, `s1`, ...) and the image is the same for every step: the stored
//! size of a 10,000-step workflow is then mostly what the operator adds, not what the user wrote.

use std::fmt;
use std::str::FromStr;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use serde_json::{Value, json};

/// How the steps of a benchmark workflow depend on each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `s0 -> s1 -> ... -> s(S-1)`: one step ready at a time.
    Chain,
    /// `s0 -> {s1 .. s(S-2)} -> s(S-1)`: everything in the middle ready at once, then a join.
    Fan,
    /// A lattice of layers `ceil(sqrt(S))` wide; each step depends on two neighbours of the
    /// layer before (the diamond `a -> {b, c} -> d`, repeated).
    Diamond,
    /// Each step depends on up to 3 distinct earlier steps, picked at random (seeded).
    Random,
    /// [`Shape::Fan`]'s graph written as a step that fans out: `s0 -> s1 over S-2 items
    /// (withSequence) -> s(S-1)`, item `k` of `s1` being bench step `1 + k`.
    Items,
}

impl Shape {
    pub const ALL: [Shape; 5] = [
        Shape::Chain,
        Shape::Fan,
        Shape::Diamond,
        Shape::Random,
        Shape::Items,
    ];

    /// The dependencies of each of `steps` steps, as indices of earlier steps (so the graph is
    /// acyclic by construction). `seed` matters only for [`Shape::Random`].
    pub fn dependencies(self, steps: usize, seed: u64) -> Vec<Vec<usize>> {
        match self {
            Shape::Chain => (0..steps)
                .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
                .collect(),
            Shape::Fan | Shape::Items => (0..steps)
                .map(|i| match i {
                    0 => vec![],
                    i if i == steps - 1 && steps > 2 => (1..i).collect(),
                    _ => vec![0],
                })
                .collect(),
            Shape::Diamond => {
                let width = (steps as f64).sqrt().ceil().max(1.0) as usize;
                (0..steps)
                    .map(|i| {
                        let (layer, pos) = (i / width, i % width);
                        if layer == 0 {
                            return vec![];
                        }
                        let prev = (layer - 1) * width;
                        let mut deps = vec![prev + pos, prev + (pos + 1) % width];
                        deps.dedup();
                        deps
                    })
                    .collect()
            }
            Shape::Random => {
                let mut rng = StdRng::seed_from_u64(seed);
                (0..steps)
                    .map(|i| {
                        let picks = i.min(3);
                        let mut deps = sample(&mut rng, i.max(1), picks).into_vec();
                        deps.sort_unstable();
                        deps
                    })
                    .collect()
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shape::Chain => "chain",
            Shape::Fan => "fan",
            Shape::Diamond => "diamond",
            Shape::Random => "random",
            Shape::Items => "items",
        })
    }
}

impl FromStr for Shape {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Shape::ALL
            .into_iter()
            .find(|s| s.to_string() == text)
            .ok_or_else(|| format!("expected chain, fan, diamond, random or items, got {text:?}"))
    }
}

/// The name of step `i`.
pub fn step_name(i: usize) -> String {
    format!("s{i}")
}

/// The `spec` of a workflow of `shape` with these dependencies: image `busybox` with its own
/// entrypoint (no `command`: simulated pods run nothing, and a 10,000-step spec stays small),
/// `maxStepTimeout` 300 s (a step that waits for a busy machine must not time out).
pub fn spec(shape: Shape, dependencies: &[Vec<usize>]) -> Value {
    let steps = dependencies.len();
    if shape == Shape::Items && steps >= 3 {
        let containers = json!([
            {"stepName": step_name(0), "image": "busybox"},
            {"stepName": step_name(1), "image": "busybox", "dependsOn": [step_name(0)],
             "withSequence": {"count": steps - 2}},
            {"stepName": step_name(steps - 1), "image": "busybox", "dependsOn": [step_name(1)]},
        ]);
        return json!({"maxStepTimeout": 300, "containers": containers});
    }
    let containers: Vec<Value> = dependencies
        .iter()
        .enumerate()
        .map(|(i, deps)| {
            let mut step = json!({"stepName": step_name(i), "image": "busybox"});
            if !deps.is_empty() {
                step["dependsOn"] = deps.iter().map(|&d| step_name(d)).collect();
            }
            step
        })
        .collect();
    json!({"maxStepTimeout": 300, "containers": containers})
}

/// Caches every step of `spec` under `key` (`cache.key`): a fresh entry for it makes a step
/// `Succeeded` without a Job.
pub fn cache(spec: &mut Value, key: &str) {
    for step in spec["containers"].as_array_mut().into_iter().flatten() {
        step["cache"] = json!({"key": key});
    }
}

/// A whole WorkFlow manifest named `name` in `namespace`.
pub fn manifest(name: &str, namespace: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_operator_core::WorkFlowSpec;
    use workflow_operator_core::crd::OptionNum;
    use workflow_operator_core::dag::Dag;

    fn edges(deps: &[Vec<usize>]) -> usize {
        deps.iter().map(Vec::len).sum()
    }

    #[test]
    fn a_cache_key_caches_every_step() {
        let mut cached = spec(Shape::Chain, &Shape::Chain.dependencies(2, 0));
        cache(&mut cached, "k1");
        let steps = cached["containers"].as_array().unwrap();
        assert_eq!(steps.len(), 2);
        assert!(steps.iter().all(|s| s["cache"] == json!({"key": "k1"})));
        let spec: WorkFlowSpec = serde_json::from_value(cached).expect("a valid spec");
        assert!(spec.containers.iter().all(|s| s.cache.is_some()));
    }

    #[test]
    fn shapes_have_the_documented_edges_and_roots() {
        // (shape, steps, edges, roots)
        let cases = [
            (Shape::Chain, 1, 0, 1),
            (Shape::Chain, 10, 9, 1),
            (Shape::Fan, 1, 0, 1),
            (Shape::Fan, 2, 1, 1),
            (Shape::Fan, 10, 8 + 8, 1),
            // 4 steps, width 2: s0 s1 / s2(s0,s1) s3(s1,s0).
            (Shape::Diamond, 4, 4, 2),
            // 10 steps, width 4: 4 roots, 6 steps with 2 deps each.
            (Shape::Diamond, 10, 12, 4),
            (Shape::Random, 1, 0, 1),
            // 1 + 2 + 3 * 7 picks.
            (Shape::Random, 10, 24, 1),
            (Shape::Items, 10, 8 + 8, 1),
        ];
        for (shape, steps, want_edges, want_roots) in cases {
            let deps = shape.dependencies(steps, 7);
            assert_eq!(deps.len(), steps, "{shape} {steps}");
            assert_eq!(edges(&deps), want_edges, "{shape} {steps}: {deps:?}");
            let roots = deps.iter().filter(|d| d.is_empty()).count();
            assert_eq!(roots, want_roots, "{shape} {steps}: {deps:?}");
        }
    }

    #[test]
    fn every_shape_is_a_valid_workflow_for_the_operator() {
        for shape in Shape::ALL {
            for steps in [1, 2, 3, 10, 101] {
                let spec: WorkFlowSpec =
                    serde_json::from_value(spec(shape, &shape.dependencies(steps, 3))).unwrap();
                // Each Job a step: the items of a step that fans out count one each.
                let jobs: usize = spec
                    .containers
                    .iter()
                    .map(|c| {
                        c.with_sequence
                            .as_ref()
                            .map_or(1, |s| s.count.num().unwrap() as usize)
                    })
                    .sum();
                assert_eq!(jobs, steps, "{shape} {steps}");
                let dag = Dag::build(&spec.containers);
                assert!(dag.is_ok(), "{shape} {steps}: {:?}", dag.err());
            }
        }
    }

    #[test]
    fn random_shape_is_repeatable_per_seed_and_has_no_duplicate_edges() {
        let a = Shape::Random.dependencies(200, 11);
        assert_eq!(a, Shape::Random.dependencies(200, 11));
        assert_ne!(a, Shape::Random.dependencies(200, 12));
        for (i, deps) in a.iter().enumerate() {
            let mut unique = deps.clone();
            unique.dedup();
            assert_eq!(&unique, deps, "step {i}");
            assert!(deps.iter().all(|&d| d < i), "step {i}: {deps:?}");
        }
    }

    #[test]
    fn shapes_parse_from_their_names() {
        for shape in Shape::ALL {
            assert_eq!(shape.to_string().parse::<Shape>(), Ok(shape));
        }
        assert!("star".parse::<Shape>().is_err());
    }
}
