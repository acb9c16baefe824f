//! Queueing under quota: the operator's built-in limit `--max-running-steps` with
//! `spec.priority`, and the Kueue path (`spec.queueName`), checked through the Kubernetes API
//! with a watch of the Jobs (every change seen, not samples).
//!
//! Needs the embedded control plane: the operator runs as a process the tests kill, steps wait
//! on files the tests create, and Kueue is played by a loop of the test that behaves as Kueue
//! documents ([`support::queueing::Kueue`]).

use crate::support;

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube_devcluster::testing::eventually;
use rstest::rstest;
use support::queueing::{Kueue, RunningJobs};
use support::{
    DEADLINE, Gate, Namespace, Operator, holds_for, namespace, operator, phase, wait_for,
};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{StepPhase, StepStatus};
use workflow_operator_core::jobs::{LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::plan::REASON_QUEUE_TIMEOUT;
use workflow_operator_core::testing::WorkFlowBuilder;

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
    workflow
        .status
        .iter()
        .flat_map(|s| &s.steps)
        .filter(|s| s.phase == StepPhase::Queued && s.message.as_deref() == Some(message.as_str()))
        .count()
}

/// 20 workflows of 5 parallel steps under `--max-running-steps 4`. A watch of
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
    join_all(
        early
            .iter()
            .map(|name| ns.create(five_parallel(name, &step))),
    )
    .await;
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
    let waiting: Vec<&String> = early
        .iter()
        .filter(|w| jobs.first_job(w).is_none())
        .collect();
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

/// The status entry of `step`.
fn step_status(workflow: &WorkFlow, step: &str) -> Option<StepStatus> {
    workflow
        .status
        .as_ref()?
        .steps
        .iter()
        .find(|s| s.name == step)
        .cloned()
}

fn step_phase(workflow: &WorkFlow, step: &str) -> Option<StepPhase> {
    step_status(workflow, step).map(|s| s.phase)
}

/// The Job of `step` of `workflow`, once it exists.
async fn job_of(ns: &Namespace, workflow: &str, step: &str) -> Job {
    eventually(
        &format!("the job of {workflow}/{step}"),
        DEADLINE,
        || async {
            let jobs = ns.jobs_of(workflow).await;
            jobs.into_iter().find(|j| support::step_of(j) == Some(step))
        },
    )
    .await
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// Kueue's admission and preemption: with `queueName` (and `priorityClassName`) every
/// Job is created suspended with Kueue's labels, and its step is `Queued` until Kueue admits
/// it; admitted, it runs; preempted (suspended again), it is `Queued` again with no attempt
/// counted (its pod removed, not failed), and completes once admitted again.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_admits_preempts_and_readmits_a_step(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("plays Kueue; the step waits on a local file");
    let ns = &operator.ns;
    let kueue = Kueue::start(ns, "team-a", 1);
    kueue.hold();
    let gate = Gate::new();
    let wait = gate.wait_command("a done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("queued")
            .step("a", &[])
            .command(&wait)
            .step("b", &["a"])
            .queue_name("team-a")
            .priority_class_name("high"),
    )
    .await;
    let a = job_of(ns, "queued", "a").await;
    assert!(suspended(&a), "created suspended: {:?}", a.spec);
    assert_eq!(
        a.labels().get(LABEL_QUEUE_NAME).map(String::as_str),
        Some("team-a")
    );
    assert_eq!(
        a.labels().get(LABEL_PRIORITY_CLASS).map(String::as_str),
        Some("high")
    );
    let queued = ns
        .wait_workflow("queued", "step a queued", |wf| {
            step_phase(wf, "a") == Some(StepPhase::Queued)
        })
        .await;
    let entry = step_status(&queued, "a").unwrap();
    assert_eq!(
        entry.message.as_deref(),
        Some("waiting for Kueue to admit its Job (queue team-a)")
    );

    kueue.release();
    ns.wait_workflow("queued", "step a running", |wf| {
        step_phase(wf, "a") == Some(StepPhase::Running)
    })
    .await;
    let name = a.name_any();
    wait_for(&ns.jobs(), &name, "a pod of step a", |job: Option<&Job>| {
        job.and_then(|j| j.status.as_ref()?.active).unwrap_or(0) > 0
    })
    .await;

    kueue.hold();
    kueue.preempt(&name).await;
    ns.wait_workflow("queued", "step a queued again", |wf| {
        step_phase(wf, "a") == Some(StepPhase::Queued)
    })
    .await;
    let preempted = wait_for(
        &ns.jobs(),
        &name,
        "the preempted pod gone",
        |job: Option<&Job>| {
            job.is_some_and(|j| j.status.as_ref().and_then(|s| s.active).unwrap_or(0) == 0)
        },
    )
    .await
    .unwrap();
    assert_eq!(
        preempted
            .status
            .as_ref()
            .and_then(|s| s.failed)
            .unwrap_or(0),
        0
    );

    kueue.release();
    gate.open();
    let done = ns.expect_completed("queued").await;
    assert_eq!(phase(&done), Some(Phase::Completed));
    let a = ns.jobs().get(&name).await.unwrap();
    let status = a.status.unwrap();
    assert_eq!(
        (status.succeeded.unwrap_or(0), status.failed.unwrap_or(0)),
        (1, 0),
        "one attempt, the preempted pod not counted"
    );
    let b = job_of(ns, "queued", "b").await;
    assert_eq!(
        b.labels().get(LABEL_QUEUE_NAME).map(String::as_str),
        Some("team-a")
    );
}

/// Kueue and time: a step waiting for Kueue longer than its own timeout is not timed out
/// (its timeout counts from admission), and `queueTimeout` fails a step that waits too long,
/// saying so.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_step_waits_past_its_timeout_but_not_past_queue_timeout(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("plays Kueue");
    let ns = &operator.ns;
    let kueue = Kueue::start(ns, "slow", 1);
    kueue.hold();
    ns.create(
        WorkFlow::test("patient")
            .step("a", &[])
            .timeout(3)
            .queue_name("slow"),
    )
    .await;
    ns.create(
        WorkFlow::test("impatient")
            .step("a", &[])
            .queue_name("slow")
            .queue_timeout(2),
    )
    .await;
    let failed = ns
        .expect_failed(
            "impatient",
            &["a", "waited in queue slow for 2s", "queueTimeout of 2s"],
        )
        .await;
    let entry = step_status(&failed, "a").unwrap();
    assert_eq!(entry.reason.as_deref(), Some(REASON_QUEUE_TIMEOUT));
    // Queued for longer than its 3 s timeout (2 s until "impatient" failed, 2 s more here),
    // "patient" is still waiting, not timed out. Once admitted it has those 3 s to run: a loaded
    // machine has taken more than 1 s to start and finish a pod.
    holds_for(
        &ns.workflows(),
        "patient",
        "a queued step not timed out",
        Duration::from_secs(2),
        |wf| {
            wf.is_some_and(|wf| {
                step_phase(wf, "a") == Some(StepPhase::Queued) && !support::is_terminal(wf)
            })
        },
    )
    .await;
    kueue.release();
    ns.expect_completed("patient").await;
}
