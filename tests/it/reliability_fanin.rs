//! Reliability under a fan-in: 100 steps that finish at the same moment before a join.
//! Every completion is recorded (none erased by another's status write) and the join runs once.
//!
//! Run: `cargo test --test it reliability_fanin:: -- --nocapture` (prints its figures).

use crate::support;

use std::collections::BTreeMap;
use std::time::Instant;

use rstest::rstest;
use support::{JobRecorder, Operator, executed, operator, phase, wait_for_history};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::lifecycle::Phase;

const BRANCHES: usize = 100;

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_steps_finishing_together_are_all_recorded_and_the_join_runs_once(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let branches: Vec<String> = (0..BRANCHES).map(|i| format!("branch{i:03}")).collect();
    let mut workflow = WorkFlow::test("fanin");
    for branch in &branches {
        // All start in one reconcile and sleep the same second, so they finish together.
        workflow = workflow.step(branch, &[]).command(&["sleep", "1"]);
    }
    let deps: Vec<&str> = branches.iter().map(String::as_str).collect();
    let start = Instant::now();
    ns.create(workflow.step("join", &deps)).await;

    let history = wait_for_history(&ns.workflows(), "fanin", "terminal", |wf| {
        wf.is_some_and(support::is_terminal)
    })
    .await;
    let took = start.elapsed();
    let mut most_recorded_at_once = 0;
    for pair in history.windows(2) {
        let (before, after) = (executed(&pair[0]), executed(&pair[1]));
        assert!(
            before.is_subset(&after),
            "a recorded completion was lost: {:?}",
            before.difference(&after).collect::<Vec<_>>()
        );
        most_recorded_at_once = most_recorded_at_once.max(after.len() - before.len());
    }
    let last = history.last().expect("a state");
    assert_eq!(
        phase(last),
        Some(Phase::Completed),
        "{}",
        support::describe_status(last)
    );
    assert_eq!(executed(last).len(), BRANCHES + 1);

    recorder.catch_up(ns).await;
    let join = recorder.jobs_of("fanin", "join");
    assert_eq!(join.len(), 1, "the join ran once: {join:?}");
    assert_eq!(recorder.pods_of(&join[0].uid), 1, "one pod for the join");
    let last_branch = branches
        .iter()
        .map(|b| {
            recorder.jobs_of("fanin", b)[0]
                .finished
                .expect("finished")
                .0
        })
        .max()
        .expect("branches");
    assert!(join[0].first_seen > last_branch, "the join waited for all");
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());
    println!(
        "fan-in: {BRANCHES} branches + join completed in {took:.1?}; {} status states seen, up to \
         {most_recorded_at_once} completions recorded in one write; {checked} jobs checked, none twice",
        history.len()
    );
}
