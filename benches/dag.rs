//! Benchmarks of the workflow operator's pure core at 10,000 steps:
//! validating, ordering and computing the initial ready set of a DAG, and the cost of one step
//! completion, both in the O(degree) tracker (`dag::Progress`) and in the full planner
//! (`plan::plan_compiled` with a cached `Compiled`), and in the incremental planner
//! (`incremental::RunState`, which the Job-event handler uses): its decision alone, and with the
//! O(steps) rendering of the status that a write needs.
//!
//! Shapes: a chain, a fan-out/fan-in, a diamond lattice (100 layers of 100, each step depending
//! on two of the layer before) and a random DAG with about 3 dependencies per step.
//! And templates: 100 calls of a 100-step `dag` template, expanded and planned.
//! Run with `cargo bench --bench dag` (release); `cargo bench --bench dag -- incremental` for
//! the incremental planner only.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::jiff::Timestamp;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::Step;
use workflow_operator_core::dag::Dag;
use workflow_operator_core::incremental::{JobChange, RunState};
use workflow_operator_core::names;
use workflow_operator_core::plan::{self, Compiled, JobState, ObservedJob};
use workflow_operator_core::template;
use workflow_operator_core::testing::step;

const STEPS: usize = 10_000;

fn name(i: usize) -> String {
    format!("step-{i}")
}

fn build(deps: impl Fn(usize) -> Vec<usize>) -> Vec<Step> {
    (0..STEPS)
        .map(|i| {
            let names: Vec<String> = deps(i).into_iter().map(name).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            step(&name(i), &refs)
        })
        .collect()
}

fn shapes() -> Vec<(&'static str, Vec<Step>)> {
    let width = 100;
    let mut rng = StdRng::seed_from_u64(7);
    let random: Vec<Vec<usize>> = (0..STEPS)
        .map(|i| {
            if i == 0 {
                vec![]
            } else {
                (0..3).map(|_| rng.random_range(0..i)).collect()
            }
        })
        .collect();
    vec![
        (
            "chain",
            build(|i| if i == 0 { vec![] } else { vec![i - 1] }),
        ),
        (
            "fan-out-fan-in",
            build(|i| match i {
                0 => vec![],
                i if i == STEPS - 1 => (1..STEPS - 1).collect(),
                _ => vec![0],
            }),
        ),
        (
            "diamond-lattice",
            build(|i| {
                let (layer, pos) = (i / width, i % width);
                if layer == 0 {
                    vec![]
                } else {
                    let prev = (layer - 1) * width;
                    vec![prev + pos, prev + (pos + 1) % width]
                }
            }),
        ),
        ("random-3", build(|i| random[i].clone())),
    ]
}

fn bench(c: &mut Criterion) {
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    for (shape, steps) in shapes() {
        let mut group = c.benchmark_group(shape);
        group.sample_size(30);

        group.bench_function("validate+order+ready", |b| {
            b.iter(|| {
                let dag = Dag::build(black_box(&steps)).unwrap();
                let order = dag.topological_order().len();
                let ready: Vec<usize> = dag.roots().collect();
                black_box((order, ready))
            })
        });

        // The state half-way: every step before the middle of the topological order is done.
        let dag = Dag::build(&steps).unwrap();
        let order: Vec<usize> = dag.topological_order().collect();
        let middle = order[STEPS / 2];
        let mut half = dag.progress();
        let mut scratch = Vec::new();
        for &i in &order[..STEPS / 2] {
            half.complete(i, &mut scratch);
        }
        group.bench_function("one completion (tracker)", |b| {
            b.iter_batched_ref(
                || (half.clone(), Vec::new()),
                |(progress, newly)| {
                    progress.complete(black_box(middle), newly);
                    black_box(newly.len())
                },
                BatchSize::LargeInput,
            )
        });

        // The planner on the same state: the Job of `middle` just succeeded; earlier steps'
        // Jobs succeeded; the other ready steps' Jobs run.
        let mut wf = WorkFlow::test("bench").build();
        wf.spec.containers = steps.clone();
        let compiled = Compiled::new(&wf.spec);
        let run = names::run_id(&wf.spec);
        let job = |i: usize, state: JobState| ObservedJob {
            name: names::job_name("bench", &name(i), &run),
            step: name(i),
            run: run.clone(),
            retry: 0,
            run_index: 0,
            item: None,
            attempt: 0,
            cache_key: None,
            state,
            deleting: false,
            stopped: false,
            active_deadline_seconds: Some(60),
            created: now,
            start_time: Some(now),
            finished_at: None,
            attempts: 1,
            pod_started: true,
            daemoned: None,
            ready: false,
            suspended: false,
            suspended_at: None,
            start_failure: None,
            outputs: None,
        };
        let mut jobs: Vec<ObservedJob> = order[..STEPS / 2]
            .iter()
            .map(|&i| job(i, JobState::Succeeded))
            .collect();
        jobs.extend(
            half.ready()
                .map(|i| job(i, JobState::Active { since: now })),
        );
        let before = plan::plan_compiled(&wf, &compiled, &jobs, now);
        wf.status = before.status;
        // The incremental state as the handler caches it: built before the completion.
        let (_, state) = RunState::build(&wf, Arc::new(compiled.clone()), &jobs, now);
        let state = state.expect("a started workflow is followed");
        let done = jobs.iter_mut().find(|j| j.step == name(middle)).unwrap();
        done.state = JobState::Succeeded;
        let change = JobChange::Applied(done.clone());
        group.bench_function("one completion (incremental decision)", |b| {
            b.iter_batched_ref(
                || state.clone(),
                |state| black_box(state.decide(black_box(&change), now).unwrap()),
                BatchSize::LargeInput,
            )
        });
        group.bench_function(
            "one completion (incremental decision + status render)",
            |b| {
                b.iter_batched_ref(
                    || state.clone(),
                    |state| black_box(state.observe(black_box(&change), now).unwrap()),
                    BatchSize::LargeInput,
                )
            },
        );
        group.bench_function("one completion (full plan, cached DAG)", |b| {
            b.iter(|| black_box(plan::plan_compiled(&wf, &compiled, black_box(&jobs), now)))
        });
        group.bench_function("compile (run id + DAG)", |b| {
            b.iter(|| black_box(Compiled::new(black_box(&wf.spec))))
        });
        group.finish();
    }
}

/// A workflow of 10,000 steps made from templates: 100 calls of a `dag` template of 100 steps
/// (each calling a container template with an argument), the calls in a chain.
fn templated() -> WorkFlow {
    let inner: Vec<serde_json::Value> = (0..100)
        .map(|i| {
            let depends: Vec<String> = if i == 0 { vec![] } else { vec![format!("s{}", i - 1)] };
            serde_json::json!({"stepName": format!("s{i}"), "template": "echo", "dependsOn": depends,
                "arguments": {"parameters": [{"name": "text", "value": format!("{{{{inputs.parameters.block}}}}-{i}")}]}})
        })
        .collect();
    let calls: Vec<serde_json::Value> = (0..100)
        .map(|i| {
            let depends: Vec<String> = if i == 0 { vec![] } else { vec![format!("call-{}", i - 1)] };
            serde_json::json!({"stepName": format!("call-{i}"), "template": "block", "dependsOn": depends,
                "arguments": {"parameters": [{"name": "block", "value": format!("b{i}")}]}})
        })
        .collect();
    let spec = serde_json::json!({
        "arguments": {"parameters": [{"name": "version", "value": "1"}]},
        "templates": [
            {"name": "echo", "inputs": {"parameters": [{"name": "text"}]}, "image": "busybox",
             "command": ["echo", "{{inputs.parameters.text}} {{workflow.parameters.version}}"]},
            {"name": "block", "inputs": {"parameters": [{"name": "block"}]}, "dag": inner},
        ],
        "containers": calls,
    });
    WorkFlow {
        metadata: WorkFlow::test("templated").build().metadata,
        ..WorkFlow::new("templated", serde_json::from_value(spec).expect("a spec"))
    }
}

/// Expanding templates (pure, once per spec) and the first plan of what they expand to.
fn bench_templates(c: &mut Criterion) {
    let wf = templated();
    let (expanded, compiled) = plan::prepare(&wf);
    let expanded = expanded.expect("templates expand");
    assert_eq!(expanded.spec.containers.len(), STEPS);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
    let now = Timestamp::now();
    let mut group = c.benchmark_group("templates 100 x 100");
    group.sample_size(10);
    group.bench_function("expand", |b| {
        b.iter(|| black_box(template::expand(black_box(&wf)).unwrap()))
    });
    group.bench_function("expand + compile", |b| {
        b.iter(|| black_box(plan::prepare(black_box(&wf))))
    });
    group.bench_function("expand + compile + first plan", |b| {
        b.iter(|| {
            let (expanded, compiled) = plan::prepare(black_box(&wf));
            let expanded = expanded.expect("templates expand");
            black_box(plan::plan_compiled(&expanded, &compiled, &[], now))
        })
    });
    group.finish();
}

criterion_group!(benches, bench, bench_templates);
criterion_main!(benches);
