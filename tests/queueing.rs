//! Queueing under quota (issue 17): the operator's built-in limit `--max-running-steps` with
//! `spec.priority`, and the Kueue path (`spec.queueName`), checked through the Kubernetes API
//! with a watch of the Jobs (every change seen, not samples).
//!
//! Needs the embedded control plane: the operator runs as a process the tests kill, steps wait
//! on files the tests create, and Kueue is played by a loop of the test that behaves as Kueue
//! documents ([`support::queueing::Kueue`]).

#[macro_use]
mod support;

use futures::future::join_all;
use kube_devcluster::testing::eventually;
use rstest::rstest;
use support::queueing::RunningJobs;
use support::{DEADLINE, Gate, Namespace, Operator, namespace, phase};
use workflow_operator::workflow::lifecycle::Phase;
use workflow_operator::workflow::WorkFlow;
use workflow_operator::workflow::crd::StepPhase;
use workflow_operator::workflow::testing::WorkFlowBuilder;

const LIMIT: usize = 4;

/// A workflow of five steps that may all run at once, each running `command`.
fn five_parallel(name: &str, command: &[String]) -> WorkFlowBuilder {
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let mut builder = WorkFlow::test(name);
    for step in ["a", "b", "c", "d", "e"] {
        builder = builder.step(step, &[]).command(&command);
    }
    builder
}

/// The workflow's steps whose status entry is `Queued` with the built-in queue's message.
fn queued_by_the_limit(workflow: &WorkFlow) -> usize {
    let message = format!("waiting: {LIMIT} of {LIMIT} running steps (--max-running-steps)");
    workflow.status.iter().flat_map(|s| &s.steps).filter(|s| {
        s.phase == StepPhase::Queued && s.message.as_deref() == Some(message.as_str())
    }).count()
}

/// Acceptance 1: 20 workflows of 5 parallel steps under `--max-running-steps 4`. A watch of
/// the Jobs never sees more than 4 running, through two SIGKILLs of the operator (one while 4
/// steps hold every slot: the restarted operator must count them from the Jobs); the workflow
/// of higher priority submitted last starts before every earlier one still waiting; all
/// complete.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_steps_holds_across_workflows_priority_and_a_sigkill(
    #[future(awt)] namespace: Namespace,
) {
    skip_on_real_cluster!("runs and kills the operator's process; steps wait on local files");
    let jobs = RunningJobs::start(&namespace).await;
    let mut operator =
        Operator::process_with_args(namespace, &["--max-running-steps", &LIMIT.to_string()]);
    let ns = &operator.ns;
    // Every step waits for the gate: the first four hold the slots until the test opens it.
    let gate = Gate::new();
    let step = gate.wait_command("done; sleep 0.2");
    let early: Vec<String> = (0..19).map(|i| format!("early-{i:02}")).collect();
    join_all(early.iter().map(|name| ns.create(five_parallel(name, &step)))).await;
    eventually("4 steps running", DEADLINE, || async {
        (jobs.running() == LIMIT).then_some(())
    })
    .await;

    // Killed while every slot is taken: the restarted operator counts the running Jobs.
    operator.kill().await;
    operator.start();
    let ns = &operator.ns;
    ns.create(five_parallel("late", &step).priority(10)).await;
    let late = ns
        .wait_workflow("late", "its steps queued by the limit", |wf| {
            queued_by_the_limit(wf) == 5
        })
        .await;
    assert_eq!(late.status.unwrap().started, Vec::<String>::new());
    let waiting: Vec<&String> = early.iter().filter(|w| jobs.first_job(w).is_none()).collect();
    assert!(
        waiting.len() >= 15,
        "most workflows wait behind the first four steps: {waiting:?}"
    );
    gate.open();

    // Killed again half-way.
    eventually("some workflows completed", DEADLINE, || async {
        let done = ns
            .workflows()
            .list(&Default::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|wf| phase(wf) == Some(Phase::Completed))
            .count();
        (done >= 5).then_some(())
    })
    .await;
    operator.kill().await;
    operator.start();
    let ns = &operator.ns;
    for name in early.iter().map(String::as_str).chain(["late"]) {
        ns.expect_completed(name).await;
    }

    let (peak, at_peak) = jobs.peak();
    assert!(
        peak <= LIMIT,
        "the watch saw {peak} steps running at once: {at_peak:?}"
    );
    assert_eq!(peak, LIMIT, "the limit is used in full");
    let late_first = jobs.first_job("late").expect("late ran");
    for workflow in waiting {
        let first = jobs.first_job(workflow).expect("every workflow ran");
        assert!(
            late_first < first,
            "{workflow}, waiting when late (priority 10) was submitted, started first"
        );
    }
    operator.stop().await;
}
