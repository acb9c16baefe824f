//! What the DAG view draws, from the workflow alone (as the operator's mirror holds it): a node
//! per step (per step and run of `spec.runs`; a step that fans out is one node with its
//! count), its phase, the dependency edges, laid out in layers ([`super::layout`]). The exit
//! steps (`onExit`) are a group of their own below the rest, each that depends on no other exit
//! step joined to the last steps by an edge of its own kind, as `graph` draws them. Above
//! [`MAX_NODES`] steps the drawing collapses to one node per band of layers, each counting its
//! steps by phase, so a 10,000-step workflow stays a page a browser draws at once.

use std::collections::{HashMap, HashSet};

use super::layout::{self, Layout};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{ItemCounts, Step, StepPhase, StepStatus};
use workflow_operator_core::fan_out::display_name;
use workflow_operator_core::fan_out::node_label;
use workflow_operator_core::plan::Compiled;

/// Most step nodes drawn one by one; a larger workflow is drawn collapsed.
pub const MAX_NODES: usize = 400;

/// Most nodes of a collapsed drawing: layers are banded to stay under it.
pub const MAX_BANDS: usize = 200;

/// The phases in the order a summary counts them.
pub const PHASES: [StepPhase; 8] = [
    StepPhase::Succeeded,
    StepPhase::Running,
    StepPhase::Interactive,
    StepPhase::Queued,
    StepPhase::Failed,
    StepPhase::TimedOut,
    StepPhase::Waiting,
    StepPhase::Skipped,
];

/// One box of the drawing.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A step (of one run): its name as the status names it (`build`, `run1/build`).
    Step {
        name: String,
        label: String,
        phase: StepPhase,
        /// A step that fans out: how its items stand, once known.
        items: Option<ItemCounts>,
        /// Failed (or timed out) and `continueOn.failed`: the workflow goes on past it.
        tolerated: bool,
    },
    /// A band of layers of a collapsed drawing: how many of its steps are in each phase.
    Band {
        first_layer: usize,
        last_layer: usize,
        counts: Vec<(StepPhase, usize)>,
    },
}

impl Node {
    /// The phase the node is drawn in: a band's is its most telling (any failure, else
    /// anything running, else all succeeded, else waiting).
    pub fn phase(&self) -> StepPhase {
        match self {
            Node::Step { phase, .. } => *phase,
            Node::Band { counts, .. } => {
                let has = |p: StepPhase| counts.iter().any(|&(q, n)| q == p && n > 0);
                [
                    StepPhase::Failed,
                    StepPhase::TimedOut,
                    StepPhase::Interactive,
                    StepPhase::Running,
                    StepPhase::Queued,
                ]
                .into_iter()
                .find(|&p| has(p))
                .unwrap_or(
                    if counts
                        .iter()
                        .all(|&(p, n)| n == 0 || p == StepPhase::Succeeded)
                    {
                        StepPhase::Succeeded
                    } else if has(StepPhase::Waiting) {
                        StepPhase::Waiting
                    } else {
                        StepPhase::Skipped
                    },
                )
            }
        }
    }
}

/// The drawing of one workflow.
#[derive(Debug, Clone)]
pub struct Drawing {
    pub nodes: Vec<Node>,
    /// From a dependency to its dependent, indexes of `nodes`.
    pub edges: Vec<(usize, usize)>,
    /// From each last step to each exit step that depends on no other exit step: it runs
    /// after them all.
    pub after_all: Vec<(usize, usize)>,
    /// The first exit step's index: `nodes` from there on are the exit steps.
    pub exit_from: Option<usize>,
    pub layout: Layout,
    /// The steps in all, when the drawing is collapsed into bands.
    pub collapsed_from: Option<usize>,
}

/// The workflow's drawing, or why there is none (its DAG is invalid: the status says why).
pub fn drawing(workflow: &WorkFlow) -> Result<Drawing, String> {
    let spec = &workflow.spec;
    let compiled = Compiled::new(spec);
    let dag = compiled.dag.as_ref().map_err(ToString::to_string)?;
    let phases = Phases::of(workflow);
    let runs = spec.run_count();
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for run in 0..runs {
        let base = nodes.len();
        for (i, step) in spec.containers.iter().enumerate() {
            let name = display_name(&step.step_name, run, runs, None);
            let label = node_label(step, compiled.flow.fan_out.get(&i));
            nodes.push(phases.node(name, label, step));
            edges.extend(dag.dependencies(i).map(|d| (base + d, base + i)));
        }
    }
    let mut after_all = Vec::new();
    let mut exit_from = None;
    if let Some(exit) = &compiled.exit {
        let base = nodes.len();
        exit_from = Some(base);
        let mut has_dependents = vec![false; base];
        for &(from, _) in &edges {
            has_dependents[from] = true;
        }
        let sinks: Vec<usize> = (0..base).filter(|&n| !has_dependents[n]).collect();
        for (i, step) in spec.on_exit.iter().enumerate() {
            nodes.push(phases.node(step.step_name.clone(), step.step_name.clone(), step));
            let mut dependencies = exit.dependencies(i).peekable();
            if dependencies.peek().is_none() {
                after_all.extend(sinks.iter().map(|&s| (s, base + i)));
            }
            edges.extend(dependencies.map(|d| (base + d, base + i)));
        }
    }
    let all: Vec<(usize, usize)> = edges.iter().chain(&after_all).copied().collect();
    let layout =
        layout::layered(nodes.len(), &all).ok_or("the steps depend on each other in a cycle")?;
    if nodes.len() <= MAX_NODES {
        return Ok(Drawing {
            nodes,
            edges,
            after_all,
            exit_from,
            layout,
            collapsed_from: None,
        });
    }
    Ok(collapse(&nodes, &layout))
}

/// One node per band of consecutive layers, in a column.
fn collapse(nodes: &[Node], layout: &Layout) -> Drawing {
    let layers = layout.layers.len();
    let per_band = layers.div_ceil(MAX_BANDS);
    let bands: Vec<Node> = (0..layers)
        .step_by(per_band)
        .map(|first| {
            let last = (first + per_band).min(layers) - 1;
            let mut counts: Vec<(StepPhase, usize)> = PHASES.iter().map(|&p| (p, 0)).collect();
            for node in layout.layers[first..=last].iter().flatten() {
                let phase = nodes[*node].phase();
                if let Some(count) = counts.iter_mut().find(|(p, _)| *p == phase) {
                    count.1 += 1;
                }
            }
            Node::Band {
                first_layer: first,
                last_layer: last,
                counts,
            }
        })
        .collect();
    let edges: Vec<(usize, usize)> = (1..bands.len()).map(|b| (b - 1, b)).collect();
    let layout = layout::layered(bands.len(), &edges).expect("a chain has no cycle");
    Drawing {
        nodes: bands,
        edges,
        after_all: Vec::new(),
        exit_from: None,
        layout,
        collapsed_from: Some(nodes.len()),
    }
}

/// Where each step stands as the workflow's status says, by the rule `step_view` applies to a
/// step without its Jobs: its entry in `status.steps`, else `Succeeded` when `executed`, else
/// `Skipped` once the workflow ended, else `Waiting`. Indexed, so a 10,000-step workflow is
/// read in one pass.
struct Phases<'a> {
    recorded: HashMap<&'a str, &'a StepStatus>,
    executed: HashSet<&'a str>,
    terminal: bool,
}

impl<'a> Phases<'a> {
    fn of(workflow: &'a WorkFlow) -> Phases<'a> {
        let status = workflow.status.as_ref();
        Phases {
            recorded: status
                .into_iter()
                .flat_map(|s| &s.steps)
                .map(|entry| (entry.name.as_str(), entry))
                .collect(),
            executed: status
                .into_iter()
                .flat_map(|s| &s.executed)
                .map(String::as_str)
                .collect(),
            terminal: status
                .and_then(|s| s.workflow_status)
                .is_some_and(|p| p.is_terminal()),
        }
    }

    fn node(&self, name: String, label: String, step: &Step) -> Node {
        let recorded = self.recorded.get(name.as_str());
        let phase = match recorded {
            Some(entry) => entry.phase,
            None if self.executed.contains(name.as_str()) => StepPhase::Succeeded,
            None if self.terminal => StepPhase::Skipped,
            None => StepPhase::Waiting,
        };
        let failed = matches!(phase, StepPhase::Failed | StepPhase::TimedOut);
        Node::Step {
            items: recorded.and_then(|e| e.items),
            label,
            name,
            phase,
            tolerated: failed && step.continue_on.as_ref().is_some_and(|c| c.failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step_nodes(drawing: &Drawing) -> Vec<(String, StepPhase)> {
        drawing
            .nodes
            .iter()
            .map(|n| match n {
                Node::Step { name, phase, .. } => (name.clone(), *phase),
                Node::Band { .. } => panic!("collapsed"),
            })
            .collect()
    }

    #[test]
    fn a_diamond_is_four_nodes_and_four_edges_with_phases_from_the_status() {
        let mut wf = WorkFlow::test("d")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["a"])
            .step("d", &["b", "c"])
            .build();
        let status = wf.status.get_or_insert_default();
        status.executed = vec!["a".into()];
        status.steps =
            vec![serde_json::from_value(json!({"name": "b", "phase": "Running"})).unwrap()];
        let drawing = drawing(&wf).unwrap();
        assert_eq!(
            step_nodes(&drawing),
            vec![
                ("a".into(), StepPhase::Succeeded),
                ("b".into(), StepPhase::Running),
                ("c".into(), StepPhase::Waiting),
                ("d".into(), StepPhase::Waiting),
            ]
        );
        assert_eq!(drawing.edges.len(), 4);
        assert_eq!(drawing.layout.layers.len(), 3);
    }

    #[test]
    fn a_step_that_fans_out_is_one_node_with_its_count_and_items() {
        let mut wf = WorkFlow::test("f")
            .step("gen", &[])
            .step("build", &["gen"])
            .with_items(&[json!("a"), json!("b"), json!("c")])
            .build();
        wf.status.get_or_insert_default().steps = vec![
            serde_json::from_value(json!({
                "name": "build", "phase": "Running",
                "items": {"total": 3, "succeeded": 1, "running": 2}
            }))
            .unwrap(),
        ];
        let drawing = drawing(&wf).unwrap();
        assert_eq!(drawing.nodes.len(), 2);
        match &drawing.nodes[1] {
            Node::Step {
                name,
                label,
                phase,
                items,
                ..
            } => {
                assert_eq!((name.as_str(), label.as_str()), ("build", "build ×3"));
                assert_eq!(*phase, StepPhase::Running);
                assert_eq!(items.map(|i| (i.succeeded, i.total)), Some((1, 3)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_big_workflow_collapses_into_bands_counting_every_step() {
        let mut builder = WorkFlow::test("big");
        let names: Vec<String> = (0..1000).map(|i| format!("s{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let deps: Vec<&str> = if i < 10 {
                vec![]
            } else {
                vec![names[i - 10].as_str()]
            };
            builder = builder.step(name, &deps);
        }
        let drawing = drawing(&builder.build()).unwrap();
        assert_eq!(drawing.collapsed_from, Some(1000));
        assert_eq!(drawing.nodes.len(), 100);
        let counted: usize = drawing
            .nodes
            .iter()
            .map(|n| match n {
                Node::Band { counts, .. } => counts.iter().map(|c| c.1).sum::<usize>(),
                Node::Step { .. } => panic!("not collapsed"),
            })
            .sum();
        assert_eq!(counted, 1000);
    }
}
