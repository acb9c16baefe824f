//! Reliability under crashes (issue 7): the operator, a separate process, is killed with SIGKILL
//! at random moments, 20 times, while 50 workflows of mixed shapes run, and restarted each time.
//! Afterwards every workflow is in its correct terminal state and no step ran twice (at most one
//! Job per step per run, one pod per Job), from a watch the test keeps of every Job and pod.
//!
//! Slow (about a minute): `cargo test --test reliability_crash -- --ignored --nocapture`
//! (`make test-slow`). Prints the kills and the Jobs checked. Needs the embedded control plane
//! (it kills the operator's process); skipped on a real cluster.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::ResourceExt;
use kube::api::PostParams;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;
use support::{JobRecorder, Operator, Shape, check_outcome, operator_process, retrying};

const WORKFLOWS: usize = 50;
const KILLS: usize = 20;

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn operator_killed_20_times_during_50_workflows_finishes_them_all_and_runs_no_step_twice(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    let recorder = JobRecorder::start(&operator.ns).await;
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("crash: seed {seed} (set CRASH_SEED to replay the same moments)");
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Instant::now();

    // Workflows are submitted over the first seconds of the run, so the kills land while some
    // are being created, some are half-way and some are finishing.
    let mut manifests = Vec::new();
    let mut expected = Vec::new();
    for i in 0..WORKFLOWS {
        let shape = Shape::ALL[i % Shape::ALL.len()];
        let (workflow, outcome) =
            shape.build(&format!("wf-{i:02}-{shape:?}").to_lowercase(), "0.5");
        let manifest = operator.ns.manifest(workflow);
        expected.push((manifest.name_any(), outcome));
        manifests.push((manifest, Duration::from_millis(rng.random_range(50..400))));
    }
    let api = operator.ns.workflows();
    let submit = tokio::spawn(async move {
        for (manifest, pause) in manifests {
            let manifest = &manifest;
            let api = &api;
            retrying("creating a workflow", || async move {
                api.create(&PostParams::default(), manifest).await
            })
            .await;
            // The pace of submission, not a wait for a condition.
            tokio::time::sleep(pause).await;
        }
    });

    for _ in 0..KILLS {
        // A random moment of the run: what is being tested is that any moment is safe.
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..1200))).await;
        operator.kill().await;
        operator.start();
    }
    submit.await.expect("every workflow submitted");
    let killing = start.elapsed();

    let ns = &operator.ns;
    let finished = join_all(
        expected
            .iter()
            .map(|(name, _)| ns.wait_terminal_within(name, Duration::from_secs(300))),
    )
    .await;
    let took = start.elapsed();
    recorder.catch_up(ns).await;
    let wrong: Vec<String> = finished
        .iter()
        .zip(&expected)
        .filter_map(|(workflow, (_, outcome))| check_outcome(workflow, outcome, &recorder))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());
    assert!(operator.is_running(), "the last operator is still running");
    let log = operator.log();
    assert!(!log.contains("panicked"), "the operator panicked:\n{log}");
    let completed = expected
        .iter()
        .filter(|(_, e)| *e == support::Expected::Completed)
        .count();
    println!(
        "crash: {} SIGKILLs in {killing:.1?} ({} starts); {WORKFLOWS} workflows ended correctly \
         ({completed} Completed, {} Failed as expected) in {took:.1?}; {checked} jobs checked: at \
         most one per step per run, one pod each",
        operator.kills,
        operator.starts,
        WORKFLOWS - completed
    );
    assert_eq!(operator.kills, KILLS);
}
