//! The step graph of a workflow: validation, topological order, ready set and an incremental
//! progress tracker. Pure; no Kubernetes types beyond the spec's [`Step`].
//!
//! [`Dag::build`] rejects what cannot run (no steps, an empty or duplicate step name, a self or
//! unknown dependency, a cycle, named by its path) and orders the steps (Kahn's algorithm,
//! declaration order among peers). [`Progress`] tracks which steps are done and which became
//! ready in O(degree) per completion, so one Job finishing never rescans the whole DAG. Used by
//! `plan` (the planner), the CLI's `validate` and `graph` commands, and the benchmarks.

use std::collections::{HashMap, VecDeque};

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};

use super::crd::Step;

/// Why a workflow's steps cannot run; the message names the problem for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// `containers` is empty.
    #[error(
        "spec.containers: the workflow has no steps (give at least one, or a workflowTemplateRef)"
    )]
    NoSteps,
    /// A step has an empty name, which cannot become a Job.
    #[error("step #{index} has an empty stepName")]
    EmptyStepName {
        /// Position in `containers`, from 0.
        index: usize,
    },
    /// Two steps share a name.
    #[error("step name {name:?} is used more than once")]
    DuplicateStep {
        /// The repeated name.
        name: String,
    },
    /// A step lists itself in `dependsOn`.
    #[error("step {step:?} depends on itself")]
    SelfDependency {
        /// The step.
        step: String,
    },
    /// A step depends on a name that is not a step.
    #[error("step {step:?} depends on unknown step {dependency:?}")]
    UnknownDependency {
        /// The step with the bad dependency.
        step: String,
        /// The name that matches no step.
        dependency: String,
    },
    /// The dependencies form a cycle; `path` starts and ends with the same step, and each step
    /// in it must finish before the next one (the next depends on it).
    #[error("dependency cycle: {}", path.join(" -> "))]
    Cycle {
        /// The steps of the cycle, first repeated at the end.
        path: Vec<String>,
    },
    /// A step names what it cannot read: an output reference or a `when` that is malformed,
    /// or names a step that does not exist or does not run before it (see `data_flow`).
    #[error("step {step:?}: {problem}")]
    Reference {
        /// The step with the bad reference.
        step: String,
        /// What is wrong, naming the reference.
        problem: String,
    },
    /// A step's fan-out cannot run: more than one of `withItems`, `withParam` and
    /// `withSequence`, a malformed one, too many items, an exit step that fans out, or a
    /// step named as another's item (see `fan_out`).
    #[error("step {step:?} {problem}")]
    FanOut {
        /// The step.
        step: String,
        /// What is wrong.
        problem: String,
    },
    /// An exit step (`onExit`) lists a normal step in `dependsOn`: exit steps run once every
    /// normal step has finished, so they may depend only on each other.
    #[error(
        "exit step {step:?} depends on step {dependency:?}: exit steps run after every step, and may depend only on other exit steps"
    )]
    ExitDependsOnStep {
        /// The exit step.
        step: String,
        /// The normal step it names.
        dependency: String,
    },
    /// The rules on the run's metrics (`spec.rules`) cannot run: every problem, each naming
    /// its rule (see `rules`).
    #[error("spec.rules: {}", .0.join("; "))]
    Rules(Vec<String>),
    /// Custom metrics (`metrics`) that cannot be recorded: every problem, each naming where
    /// it is (see `custom_metrics`).
    #[error("{}", .0.join("; "))]
    Metrics(Vec<String>),
    /// An exit step has the name of a normal step (their Jobs and status entries would clash).
    #[error("exit step name {name:?} is also the name of a step")]
    ExitNameTaken {
        /// The name.
        name: String,
    },
    /// Something is wrong among the exit steps themselves (empty or duplicate names, unknown
    /// dependencies, a cycle).
    #[error("onExit: {0}")]
    Exit(Box<DagError>),
    /// The workflow's templates and parameters do not expand into steps (see `template`):
    /// every problem, each naming its place.
    #[error("{0}")]
    Template(String),
}

/// A validated step graph. Step indices are positions in the spec's `containers`.
#[derive(Debug, Clone)]
pub struct Dag {
    names: Vec<String>,
    index: HashMap<String, u32>,
    /// Edge `a -> b`: `a` must succeed before `b` starts (`b` depends on `a`). Node `i` is step `i`.
    graph: DiGraph<(), (), u32>,
    /// Number of distinct dependencies per step.
    in_degree: Vec<u32>,
    order: Vec<u32>,
    roots: Vec<u32>,
}

impl Dag {
    /// Validates the exit steps `on_exit` of a workflow whose steps are `steps` and builds
    /// their graph: besides [`Dag::build`]'s checks, no exit step is named like a step or
    /// depends on one.
    ///
    /// # Errors
    /// A [`DagError`] naming the problem.
    pub fn build_exit(on_exit: &[Step], steps: &[Step]) -> Result<Dag, DagError> {
        let step_names: std::collections::HashSet<&str> =
            steps.iter().map(|s| s.step_name.as_str()).collect();
        for exit in on_exit {
            if step_names.contains(exit.step_name.as_str()) {
                return Err(DagError::ExitNameTaken {
                    name: exit.step_name.clone(),
                });
            }
            if let Some(dependency) = exit
                .depends_on
                .iter()
                .find(|d| step_names.contains(d.as_str()))
            {
                return Err(DagError::ExitDependsOnStep {
                    step: exit.step_name.clone(),
                    dependency: dependency.clone(),
                });
            }
        }
        Dag::build(on_exit).map_err(|e| DagError::Exit(Box::new(e)))
    }

    /// Validates `steps` and builds their graph, in O(steps + dependencies).
    ///
    /// A dependency listed twice counts once. Checks run in this order, and the first problem
    /// found is returned: no steps, empty names, duplicate names, self dependencies, unknown
    /// dependencies, cycles.
    ///
    /// # Errors
    /// A [`DagError`] naming the problem.
    pub fn build(steps: &[Step]) -> Result<Dag, DagError> {
        if steps.is_empty() {
            return Err(DagError::NoSteps);
        }
        let mut names = Vec::with_capacity(steps.len());
        let mut index = HashMap::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            if step.step_name.is_empty() {
                return Err(DagError::EmptyStepName { index: i });
            }
            if index.insert(step.step_name.clone(), i as u32).is_some() {
                return Err(DagError::DuplicateStep {
                    name: step.step_name.clone(),
                });
            }
            names.push(step.step_name.clone());
        }

        let edges: usize = steps.iter().map(|s| s.depends_on.len()).sum();
        let mut graph = DiGraph::with_capacity(steps.len(), edges);
        for _ in steps {
            graph.add_node(());
        }
        let mut in_degree = vec![0u32; steps.len()];
        // last_dependent[d] == i + 1 once the edge d -> i exists: O(1) de-duplication.
        let mut last_dependent = vec![0u32; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            for dep in &step.depends_on {
                if *dep == step.step_name {
                    return Err(DagError::SelfDependency {
                        step: step.step_name.clone(),
                    });
                }
                let Some(&d) = index.get(dep.as_str()) else {
                    return Err(DagError::UnknownDependency {
                        step: step.step_name.clone(),
                        dependency: dep.clone(),
                    });
                };
                if last_dependent[d as usize] != i as u32 + 1 {
                    last_dependent[d as usize] = i as u32 + 1;
                    graph.add_edge(NodeIndex::new(d as usize), NodeIndex::new(i), ());
                    in_degree[i] += 1;
                }
            }
        }

        let roots: Vec<u32> = (0..steps.len() as u32)
            .filter(|&i| in_degree[i as usize] == 0)
            .collect();
        let mut dag = Dag {
            names,
            index,
            graph,
            in_degree,
            order: Vec::new(),
            roots,
        };

        // Kahn's algorithm, which is the progress tracker run to the end.
        let mut order = Vec::with_capacity(steps.len());
        let mut progress = dag.progress();
        let mut queue: VecDeque<u32> = dag.roots.iter().copied().collect();
        let mut newly = Vec::new();
        while let Some(i) = queue.pop_front() {
            order.push(i);
            newly.clear();
            progress.complete(i as usize, &mut newly);
            // petgraph lists neighbours newest edge first; keep declaration order.
            newly.sort_unstable();
            queue.extend(newly.iter().map(|&n| n as u32));
        }
        if order.len() < steps.len() {
            return Err(DagError::Cycle {
                path: dag.find_cycle(),
            });
        }
        dag.order = order;
        Ok(dag)
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a `Dag` has at least one step.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of step `i`.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// The index of the step named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).map(|&i| i as usize)
    }

    /// The distinct steps `i` depends on.
    pub fn dependencies(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .neighbors_directed(NodeIndex::new(i), Direction::Incoming)
            .map(|n| n.index())
    }

    /// The steps that depend on `i`.
    pub fn dependents(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .neighbors_directed(NodeIndex::new(i), Direction::Outgoing)
            .map(|n| n.index())
    }

    /// Every step, each after all its dependencies; among steps that become ready together,
    /// declaration order.
    pub fn topological_order(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.order.iter().map(|&i| i as usize)
    }

    /// The steps without dependencies: the ready set before anything ran, in declaration order.
    pub fn roots(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.roots.iter().map(|&i| i as usize)
    }

    /// A tracker with nothing done yet.
    pub fn progress(&self) -> Progress<'_> {
        Progress {
            dag: self,
            unmet: self.in_degree.clone(),
            done: vec![false; self.len()],
            done_count: 0,
        }
    }

    /// A shortest cycle through the lowest-numbered step that lies on one; only called when
    /// Kahn's algorithm could not order every step.
    fn find_cycle(&self) -> Vec<String> {
        // Tarjan's SCCs: a component of more than one step contains a cycle (self loops were
        // rejected before).
        let component = petgraph::algo::tarjan_scc(&self.graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .min_by_key(|c| c.iter().map(|n| n.index()).min())
            .expect("an unordered graph has a cycle");
        let mut in_component = vec![false; self.len()];
        for n in &component {
            in_component[n.index()] = true;
        }
        let start = component
            .iter()
            .map(|n| n.index())
            .min()
            .expect("non-empty component");
        // Breadth-first search from `start` inside the component, back to `start`.
        let mut parent = vec![usize::MAX; self.len()];
        let mut queue = VecDeque::from([start]);
        let mut last = None;
        'search: while let Some(n) = queue.pop_front() {
            for m in self.dependents(n) {
                if m == start {
                    last = Some(n);
                    break 'search;
                }
                if in_component[m] && parent[m] == usize::MAX {
                    parent[m] = n;
                    queue.push_back(m);
                }
            }
        }
        let mut path = vec![start];
        let mut n = last.expect("a strongly connected component leads back to its start");
        while n != start {
            path.push(n);
            n = parent[n];
        }
        path.push(start);
        path.reverse();
        path.into_iter().map(|i| self.names[i].clone()).collect()
    }
}

/// Which steps of a [`Dag`] are done and which are ready, updated in O(dependents) per
/// completion.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    dag: &'a Dag,
    /// Dependencies of each step not done yet.
    unmet: Vec<u32>,
    done: Vec<bool>,
    done_count: usize,
}

impl Progress<'_> {
    /// Marks step `i` done and appends to `newly_ready` each dependent whose last dependency
    /// this was, in no particular order. Completing a step twice changes nothing.
    pub fn complete(&mut self, i: usize, newly_ready: &mut Vec<usize>) {
        if std::mem::replace(&mut self.done[i], true) {
            return;
        }
        self.done_count += 1;
        for d in self.dag.dependents(i) {
            self.unmet[d] -= 1;
            if self.unmet[d] == 0 && !self.done[d] {
                newly_ready.push(d);
            }
        }
    }

    /// Whether step `i` is done.
    pub fn is_done(&self, i: usize) -> bool {
        self.done[i]
    }

    /// Whether every dependency of step `i` is done (and `i` itself is not).
    pub fn is_ready(&self, i: usize) -> bool {
        self.unmet[i] == 0 && !self.done[i]
    }

    /// Number of steps done.
    pub fn done_count(&self) -> usize {
        self.done_count
    }

    /// Whether every step is done.
    pub fn all_done(&self) -> bool {
        self.done_count == self.dag.len()
    }

    /// Every ready step, in declaration order; O(steps).
    pub fn ready(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.dag.len()).filter(|&i| self.is_ready(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use rstest::rstest;

    use crate::testing::step;

    /// Steps from `"a b:a c:a,b"`: space-separated `name[:dep,dep]`; `":"` is an empty name.
    fn steps(spec: &str) -> Vec<Step> {
        spec.split_whitespace()
            .map(|token| {
                let (name, deps) = token.split_once(':').unwrap_or((token, ""));
                let deps: Vec<&str> = deps.split(',').filter(|d| !d.is_empty()).collect();
                step(name, &deps)
            })
            .collect()
    }

    #[rstest]
    #[case::no_steps("", DagError::NoSteps)]
    #[case::empty_name("a :", DagError::EmptyStepName { index: 1 })]
    #[case::duplicate("a b a", DagError::DuplicateStep { name: "a".into() })]
    #[case::self_dependency("a:a", DagError::SelfDependency { step: "a".into() })]
    #[case::unknown(
        "a b:a,zz",
        DagError::UnknownDependency { step: "b".into(), dependency: "zz".into() }
    )]
    #[case::two_cycle("a:b b:a", DagError::Cycle { path: vec!["a".into(), "b".into(), "a".into()] })]
    #[case::three_cycle_behind_a_root(
        "r a:r,c b:a c:b",
        DagError::Cycle { path: vec!["a".into(), "b".into(), "c".into(), "a".into()] }
    )]
    #[case::cycle_downstream_of_a_valid_part(
        "x y:x p:y,q q:p",
        DagError::Cycle { path: vec!["p".into(), "q".into(), "p".into()] }
    )]
    fn invalid_dags_are_rejected(#[case] spec: &str, #[case] want: DagError) {
        assert_eq!(Dag::build(&steps(spec)).unwrap_err(), want);
    }

    #[rstest]
    #[case(DagError::Cycle { path: vec!["a".into(), "b".into(), "a".into()] }, "dependency cycle: a -> b -> a")]
    #[case(
        DagError::UnknownDependency { step: "b".into(), dependency: "x".into() },
        "step \"b\" depends on unknown step \"x\""
    )]
    #[case(DagError::DuplicateStep { name: "a".into() }, "step name \"a\" is used more than once")]
    fn errors_name_the_problem(#[case] error: DagError, #[case] message: &str) {
        assert_eq!(error.to_string(), message);
    }

    #[test]
    fn diamond_is_ordered_and_has_one_root() {
        let dag = Dag::build(&steps("d:b,c b:a c:a a")).unwrap();
        let order: Vec<_> = dag.topological_order().map(|i| dag.name(i)).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        assert_eq!(dag.roots().map(|i| dag.name(i)).collect::<Vec<_>>(), ["a"]);
        let d = dag.index_of("d").unwrap();
        let mut deps: Vec<_> = dag.dependencies(d).map(|i| dag.name(i)).collect();
        deps.sort();
        assert_eq!(deps, ["b", "c"]);
    }

    #[test]
    fn independent_steps_keep_declaration_order() {
        let dag = Dag::build(&steps("z y x:z")).unwrap();
        let order: Vec<_> = dag.topological_order().map(|i| dag.name(i)).collect();
        assert_eq!(order, ["z", "y", "x"]);
        assert_eq!(dag.roots().collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn a_dependency_listed_twice_counts_once() {
        let dag = Dag::build(&steps("a b:a,a")).unwrap();
        assert_eq!(dag.dependencies(1).collect::<Vec<_>>(), [0]);
        let mut progress = dag.progress();
        let mut newly = Vec::new();
        progress.complete(0, &mut newly);
        assert_eq!(newly, [1]);
    }

    #[test]
    fn progress_releases_a_step_when_its_last_dependency_completes() {
        let dag = Dag::build(&steps("a b c:a,b")).unwrap();
        let mut progress = dag.progress();
        assert_eq!(progress.ready().collect::<Vec<_>>(), [0, 1]);
        let mut newly = Vec::new();
        progress.complete(0, &mut newly);
        assert!(newly.is_empty());
        progress.complete(0, &mut newly);
        assert!(newly.is_empty(), "completing twice releases nothing");
        progress.complete(1, &mut newly);
        assert_eq!(newly, [2]);
        assert_eq!((progress.done_count(), progress.all_done()), (2, false));
        progress.complete(2, &mut newly);
        assert!(progress.all_done());
        assert!(progress.is_done(2) && !progress.is_ready(2));
    }

    /// A random DAG: step `i` depends only on steps with a smaller index, then shuffled so the
    /// declaration order is not already a topological order.
    fn random_dag() -> impl Strategy<Value = Vec<Step>> {
        let deps = proptest::collection::vec(any::<prop::sample::Index>(), 0..4);
        proptest::collection::vec(deps, 1..60)
            .prop_map(|deps| {
                deps.iter()
                    .enumerate()
                    .map(|(i, ds)| {
                        let names: Vec<String> = ds
                            .iter()
                            .filter(|_| i > 0)
                            .map(|d| format!("s{}", d.index(i)))
                            .collect();
                        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                        step(&format!("s{i}"), &refs)
                    })
                    .collect::<Vec<_>>()
            })
            .prop_shuffle()
    }

    /// A random DAG plus a ring of 2-6 distinct steps (each depending on the previous one, the
    /// first on the last), so at least one cycle exists, possibly joined by the DAG's edges.
    fn random_cyclic() -> impl Strategy<Value = Vec<Step>> {
        let ring = proptest::collection::vec(any::<prop::sample::Index>(), 2..7);
        (
            random_dag().prop_filter("needs two steps", |s| s.len() >= 2),
            ring,
        )
            .prop_map(|(mut steps, ring)| {
                let n = steps.len();
                let mut members: Vec<usize> = Vec::new();
                for r in ring {
                    let i = r.index(n);
                    if !members.contains(&i) {
                        members.push(i);
                    }
                }
                if members.len() < 2 {
                    members = vec![0, 1];
                }
                for k in 0..members.len() {
                    let prev = members[(k + members.len() - 1) % members.len()];
                    let name = steps[prev].step_name.clone();
                    steps[members[k]].depends_on.push(name);
                }
                steps
            })
    }

    proptest! {
        #[test]
        fn random_dags_order_every_step_after_its_dependencies(steps in random_dag()) {
            let dag = Dag::build(&steps).unwrap();
            let mut position = vec![usize::MAX; dag.len()];
            for (p, i) in dag.topological_order().enumerate() {
                position[i] = p;
            }
            prop_assert!(position.iter().all(|&p| p != usize::MAX), "every step ordered once");
            for (i, step) in steps.iter().enumerate() {
                for dep in &step.depends_on {
                    let d = dag.index_of(dep).unwrap();
                    prop_assert!(position[d] < position[i], "{} before {}", dep, step.step_name);
                }
            }
            let roots: Vec<_> = dag.roots().collect();
            let want: Vec<_> = (0..steps.len()).filter(|&i| steps[i].depends_on.is_empty()).collect();
            prop_assert_eq!(roots, want);
        }

        #[test]
        fn random_graphs_with_a_cycle_are_rejected_naming_a_real_cycle(steps in random_cyclic()) {
            let Err(DagError::Cycle { path }) = Dag::build(&steps) else {
                return Err(TestCaseError::fail("a cyclic graph was accepted"));
            };
            prop_assert!(path.len() >= 3, "{path:?}");
            prop_assert_eq!(path.first(), path.last());
            let inner = &path[..path.len() - 1];
            let mut unique = inner.to_vec();
            unique.sort();
            unique.dedup();
            prop_assert_eq!(unique.len(), inner.len(), "a simple cycle: {:?}", path);
            for pair in path.windows(2) {
                let later = steps.iter().find(|s| s.step_name == pair[1]).unwrap();
                prop_assert!(later.depends_on.contains(&pair[0]), "{} -> {} is not an edge", pair[0], pair[1]);
            }
        }
    }
}
