//! The planner's rules, table-driven, and the seed operator's bugs it must not have.

use super::render::{SUMMARY_CHARS, summary};
use super::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;

use crate::crd::{CONDITION_COMPLETED, CONDITION_FAILED, CONDITION_FINISHED, Shutdown, UNLIMITED};

use proptest::prelude::*;

use crate::testing::{Jobs, creates};

fn at(seconds: i64) -> Timestamp {
    "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
}

/// `workflow` after the handler wrote `plan`'s status.
fn written(mut workflow: WorkFlow, plan: &Plan) -> WorkFlow {
    if let Some(status) = &plan.status {
        workflow.status = Some(status.clone());
    }
    workflow
}

/// A workflow whose first plan (at time 0, no Jobs) was carried out and written.
fn running(workflow: WorkFlow) -> WorkFlow {
    let first = plan(&workflow, &[], at(0));
    written(workflow, &first)
}

fn diamond() -> crate::testing::WorkFlowBuilder {
    WorkFlow::test("diamond")
        .step("a", &[])
        .step("b", &["a"])
        .step("c", &["a"])
        .step("d", &["b", "c"])
}

/// How a plan takes a Job out of the run: deleted (an old run's), or stopped and kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    OldRun,
    WorkflowFailed,
    Terminated,
    DaemonEnded,
}

fn deletes(plan: &Plan) -> Vec<(&str, Out)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteJob { job_name } => Some((job_name.as_str(), Out::OldRun)),
            Action::StopJob { job_name, reason } => Some((
                job_name.as_str(),
                match reason {
                    StopReason::WorkflowFailed => Out::WorkflowFailed,
                    StopReason::Terminated => Out::Terminated,
                    StopReason::DaemonEnded => Out::DaemonEnded,
                },
            )),
            _ => None,
        })
        .collect()
}

/// The Jobs the plan stops at their timeout, with why.
fn stops(plan: &Plan) -> Vec<(&str, &str)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::TimeOutJob { job_name, why } => Some((job_name.as_str(), why.as_str())),
            _ => None,
        })
        .collect()
}

fn reasons(plan: &Plan) -> Vec<&'static str> {
    plan.events.iter().map(|e| e.transition.reason()).collect()
}

fn status(plan: &Plan) -> &WorkFlowStatus {
    plan.status.as_ref().expect("the plan changes the status")
}

fn phase(plan: &Plan) -> Option<Phase> {
    status(plan).workflow_status
}

fn job_name(workflow: &WorkFlow, step: &str) -> String {
    names::job_name(
        workflow.metadata.name.as_deref().unwrap(),
        step,
        &names::run_id(&workflow.spec),
    )
}

/// `jobs` once the operator stopped the Job of `step` at its timeout, saying `why`.
fn timed_out(mut jobs: Vec<ObservedJob>, step: &str, why: &str) -> Vec<ObservedJob> {
    let job = jobs.iter_mut().find(|j| j.step == step).expect("a job");
    job.state = JobState::TimedOut { why: why.into() };
    jobs
}

/// One scenario of the planner's rules and what it must decide.
struct Case {
    name: &'static str,
    workflow: WorkFlow,
    jobs: fn(&WorkFlow) -> Vec<ObservedJob>,
    now: i64,
    phase: Phase,
    creates: &'static [&'static str],
    deletes: &'static [Out],
    /// Steps whose Jobs are stopped at their timeout (and kept).
    stops: &'static [&'static str],
    executed: &'static [&'static str],
    started: &'static [&'static str],
    progress: &'static str,
    message: Option<&'static str>,
    reasons: &'static [&'static str],
}

#[test]
fn planner_rules() {
    use Out::*;
    let cases = [
        Case {
            name: "a new workflow starts its roots",
            workflow: diamond().build(),
            jobs: |_| vec![],
            now: 0,
            phase: Phase::Started,
            creates: &["a"],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &["a"],
            progress: "0/4",
            message: None,
            reasons: &["StepsStarted"],
        },
        Case {
            name: "every root starts at once",
            workflow: WorkFlow::test("w")
                .step("x", &[])
                .step("y", &[])
                .step("z", &["x"])
                .build(),
            jobs: |_| vec![],
            now: 0,
            phase: Phase::Started,
            creates: &["x", "y"],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &["x", "y"],
            progress: "0/3",
            message: None,
            reasons: &["StepsStarted"],
        },
        Case {
            name: "an unknown dependency fails the workflow naming both steps",
            workflow: WorkFlow::test("w").step("a", &["nope"]).build(),
            jobs: |_| vec![],
            now: 0,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &[],
            progress: "0/1",
            message: Some("invalid workflow: step \"a\" depends on unknown step \"nope\""),
            reasons: &["InvalidSpec"],
        },
        Case {
            name: "a cycle fails the workflow naming its path",
            workflow: WorkFlow::test("w")
                .step("a", &["c"])
                .step("b", &["a"])
                .step("c", &["b"])
                .build(),
            jobs: |_| vec![],
            now: 0,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &[],
            progress: "0/3",
            message: Some("invalid workflow: dependency cycle: a -> b -> c -> a"),
            reasons: &["InvalidSpec"],
        },
        Case {
            name: "a duplicate step name fails the workflow",
            workflow: WorkFlow::test("w").step("a", &[]).step("a", &[]).build(),
            jobs: |_| vec![],
            now: 0,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &[],
            progress: "0/2",
            message: Some("invalid workflow: step name \"a\" is used more than once"),
            reasons: &["InvalidSpec"],
        },
        Case {
            name: "a succeeded job is executed and releases its dependents",
            workflow: running(diamond().build()),
            jobs: |w| Jobs::of(w).succeeded("a").build(),
            now: 1,
            phase: Phase::Started,
            creates: &["b", "c"],
            deletes: &[],
            stops: &[],
            executed: &["a"],
            started: &["b", "c"],
            progress: "1/4",
            message: None,
            reasons: &[],
        },
        Case {
            name: "a step waits for all its dependencies",
            workflow: running(diamond().build()),
            jobs: |w| {
                Jobs::of(w)
                    .succeeded("a")
                    .succeeded("b")
                    .active("c", at(1))
                    .build()
            },
            now: 2,
            phase: Phase::Started,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &["a", "b"],
            started: &["c"],
            progress: "2/4",
            message: None,
            reasons: &[],
        },
        Case {
            name: "all steps executed completes the workflow",
            workflow: running(diamond().build()),
            jobs: |w| {
                Jobs::of(w)
                    .succeeded("a")
                    .succeeded("b")
                    .succeeded("c")
                    .succeeded("d")
                    .build()
            },
            now: 3,
            phase: Phase::Completed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &["a", "b", "c", "d"],
            started: &[],
            progress: "4/4",
            message: Some("4 steps succeeded"),
            reasons: &["AllStepsSucceeded"],
        },
        Case {
            name: "a failed job fails the workflow and stops running steps (failFast)",
            workflow: running(diamond().build()),
            jobs: |w| {
                Jobs::of(w)
                    .succeeded("a")
                    .failed(
                        "b",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )
                    .active("c", at(1))
                    .build()
            },
            now: 2,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[WorkflowFailed],
            stops: &[],
            executed: &["a"],
            started: &[],
            progress: "1/4",
            message: Some(
                "step b failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
            ),
            reasons: &["StepFailed"],
        },
        Case {
            name: "without failFast independent steps keep running and starting",
            workflow: running(
                WorkFlow::test("w")
                    .fail_fast(false)
                    .step("a", &[])
                    .step("b", &["a"])
                    .step("x", &[])
                    .step("y", &["x"])
                    .build(),
            ),
            jobs: |w| {
                Jobs::of(w)
                    .failed("a", "BackoffLimitExceeded", "")
                    .succeeded("x")
                    .build()
            },
            now: 2,
            phase: Phase::Started,
            creates: &["y"],
            deletes: &[],
            stops: &[],
            executed: &["x"],
            started: &["y"],
            progress: "1/4",
            message: Some(
                "step a failed: BackoffLimitExceeded; waiting for running steps to finish",
            ),
            reasons: &[],
        },
        Case {
            name: "without failFast the workflow fails once nothing can run",
            workflow: running(
                WorkFlow::test("w")
                    .fail_fast(false)
                    .step("a", &[])
                    .step("b", &["a"])
                    .step("x", &[])
                    .build(),
            ),
            jobs: |w| {
                Jobs::of(w)
                    .failed("a", "BackoffLimitExceeded", "")
                    .succeeded("x")
                    .build()
            },
            now: 2,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &["x"],
            started: &[],
            progress: "1/3",
            message: Some("step a failed: BackoffLimitExceeded"),
            reasons: &["StepFailed"],
        },
        Case {
            name: "a step running past maxStepTimeout fails the workflow",
            workflow: running(
                WorkFlow::test("w")
                    .max_step_timeout(5)
                    .step("a", &[])
                    .step("b", &[])
                    .build(),
            ),
            jobs: |w| Jobs::of(w).active("a", at(0)).active("b", at(3)).build(),
            now: 6,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[WorkflowFailed],
            stops: &["a"],
            executed: &[],
            started: &[],
            progress: "0/2",
            message: Some(
                "step a timed out: running for 6s, longer than its timeout of 5s (spec.maxStepTimeout, default 60; -1 for none)",
            ),
            reasons: &["StepTimedOut"],
        },
        Case {
            name: "without failFast a step past its timeout has its job stopped, not deleted",
            workflow: running(
                WorkFlow::test("w")
                    .fail_fast(false)
                    .max_step_timeout(5)
                    .step("a", &[])
                    .step("b", &[])
                    .step("c", &["a"])
                    .build(),
            ),
            jobs: |w| Jobs::of(w).active("a", at(0)).active("b", at(3)).build(),
            now: 6,
            phase: Phase::Started,
            creates: &[],
            deletes: &[],
            stops: &["a"],
            executed: &[],
            started: &["b"],
            progress: "0/3",
            message: Some(
                "step a timed out: running for 6s, longer than its timeout of 5s (spec.maxStepTimeout, default 60; -1 for none); waiting for running steps to finish",
            ),
            reasons: &[],
        },
        Case {
            name: "a job stopped at its timeout is reported as recorded then, however late",
            workflow: running(
                WorkFlow::test("w")
                    .max_step_timeout(5)
                    .step("a", &[])
                    .build(),
            ),
            jobs: |w| {
                timed_out(
                    Jobs::of(w).active("a", at(0)).build(),
                    "a",
                    "running for 6s, longer than its timeout of 5s",
                )
            },
            now: 600,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &[],
            progress: "0/1",
            message: Some(
                "step a timed out: running for 6s, longer than its timeout of 5s (spec.maxStepTimeout, default 60; -1 for none)",
            ),
            reasons: &["StepTimedOut"],
        },
        Case {
            name: "a step's own timeout overrides maxStepTimeout",
            workflow: running(
                WorkFlow::test("w")
                    .max_step_timeout(5)
                    .step("a", &[])
                    .timeout(100)
                    .build(),
            ),
            jobs: |w| Jobs::of(w).active("a", at(0)).build(),
            now: 99,
            phase: Phase::Started,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &["a"],
            progress: "0/1",
            message: None,
            reasons: &[],
        },
        Case {
            name: "a job killed by its deadline is reported as a timeout",
            workflow: running(
                WorkFlow::test("w")
                    .max_step_timeout(2)
                    .step("a", &[])
                    .build(),
            ),
            jobs: |w| {
                Jobs::of(w)
                    .failed(
                        "a",
                        DEADLINE_EXCEEDED,
                        "Job was active longer than specified deadline",
                    )
                    .build()
            },
            now: 3,
            phase: Phase::Failed,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &[],
            progress: "0/1",
            message: Some(
                "step a timed out: its Job exceeded its deadline of 62s (spec.maxStepTimeout, default 60; -1 for none)",
            ),
            reasons: &["StepTimedOut"],
        },
        Case {
            name: "parallelism caps the running steps",
            workflow: running(
                WorkFlow::test("w")
                    .parallelism(2)
                    .step("a", &[])
                    .step("b", &[])
                    .step("c", &[])
                    .step("d", &[])
                    .build(),
            ),
            jobs: |w| Jobs::of(w).succeeded("a").active("b", at(0)).build(),
            now: 1,
            phase: Phase::Started,
            creates: &["c"],
            deletes: &[],
            stops: &[],
            executed: &["a"],
            started: &["b", "c"],
            progress: "1/4",
            message: None,
            reasons: &[],
        },
        Case {
            name: "jobs of another run are deleted and ignored",
            workflow: running(diamond().build()),
            jobs: |w| {
                Jobs::of(w)
                    .run("0ld")
                    .succeeded("a")
                    .active("b", at(0))
                    .build()
            },
            now: 1,
            phase: Phase::Started,
            creates: &["a"],
            deletes: &[OldRun, OldRun],
            stops: &[],
            executed: &[],
            started: &["a"],
            progress: "0/4",
            message: None,
            reasons: &[],
        },
        Case {
            name: "a running job that is being deleted is neither timed out nor deleted again",
            workflow: running(
                WorkFlow::test("w")
                    .max_step_timeout(1)
                    .step("a", &[])
                    .build(),
            ),
            jobs: |w| Jobs::of(w).active("a", at(0)).deleting().build(),
            now: 10,
            phase: Phase::Started,
            creates: &[],
            deletes: &[],
            stops: &[],
            executed: &[],
            started: &["a"],
            progress: "0/1",
            message: None,
            reasons: &[],
        },
    ];
    for case in cases {
        let jobs = (case.jobs)(&case.workflow);
        let plan = plan(&case.workflow, &jobs, at(case.now));
        let name = case.name;
        let new = plan
            .status
            .clone()
            .or(case.workflow.status.clone())
            .unwrap();
        assert_eq!(new.workflow_status, Some(case.phase), "{name}");
        assert_eq!(creates(&plan), case.creates, "{name}");
        let deleted: Vec<_> = deletes(&plan).into_iter().map(|(_, r)| r).collect();
        assert_eq!(deleted, case.deletes, "{name}");
        let stopped: Vec<&str> = stops(&plan).into_iter().map(|(j, _)| j).collect();
        let want: Vec<String> = case
            .stops
            .iter()
            .map(|step| job_name(&case.workflow, step))
            .collect();
        assert_eq!(stopped, want, "{name}");
        assert_eq!(new.executed, case.executed, "{name}");
        assert_eq!(new.started, case.started, "{name}");
        assert_eq!(new.progress.as_deref(), Some(case.progress), "{name}");
        assert_eq!(new.message.as_deref(), case.message, "{name}");
        assert_eq!(reasons(&plan), case.reasons, "{name}");
        assert_eq!(new.run.as_deref(), Some(plan.run.as_str()), "{name}");
        assert_eq!(new.observed_generation, Some(1), "{name}");
    }
}

#[test]
fn created_jobs_are_named_deterministically() {
    let wf = diamond().build();
    let plan = plan(&wf, &[], at(0));
    assert_eq!(
        plan.actions,
        [Action::CreateJob {
            step: "a".into(),
            job_name: job_name(&wf, "a"),
            retry: 0,
            exit: None,
            inputs: Default::default(),
            instance: Default::default(),
            attempt: 0,
        }]
    );
}

#[test]
fn events_say_from_to_and_why() {
    let wf = running(WorkFlow::test("w").step("a", &[]).build());
    let plan = plan(
        &wf,
        &Jobs::of(&wf)
            .failed("a", "BackoffLimitExceeded", "")
            .build(),
        at(1),
    );
    assert_eq!(plan.events.len(), 1);
    assert_eq!(
        plan.events[0].message,
        "Started -> Failed: step a failed: BackoffLimitExceeded"
    );
    assert_eq!(plan.events[0].transition.reason(), "StepFailed");
    let first = super::plan(
        &WorkFlow::test("w").step("a", &[]).step("b", &[]).build(),
        &[],
        at(0),
    );
    assert_eq!(first.events[0].message, "Created -> Started: starting a, b");
}

#[test]
fn bug1_completed_workflow_is_never_timed_out() {
    let wf = running(
        WorkFlow::test("w")
            .max_step_timeout(1)
            .step("a", &[])
            .build(),
    );
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let done = plan(&wf, &jobs, at(0));
    let completed = written(wf, &done);
    assert_eq!(
        completed.status.as_ref().unwrap().workflow_status,
        Some(Phase::Completed)
    );
    // Even a stray running Job of the same run, far past any timeout, changes nothing.
    let stray = Jobs::of(&completed).active("a", at(0)).build();
    for jobs in [jobs, stray] {
        let later = plan(&completed, &jobs, at(10_000));
        assert_eq!(later.status, None);
        assert!(
            later.events.is_empty() && later.actions.is_empty(),
            "{later:?}"
        );
        assert_eq!(later.next_timeout_at, None);
        assert_eq!(next_timeout_at(&completed, &jobs), None);
    }
}

#[test]
fn bug2_max_step_timeout_minus_one_never_times_out() {
    let before = running(
        WorkFlow::test("w")
            .max_step_timeout(5)
            .step("a", &[])
            .build(),
    );
    let jobs = Jobs::of(&before).active("a", at(0)).build();
    assert_eq!(
        jobs[0].active_deadline_seconds,
        Some(5 + POD_DEADLINE_SLACK_SECONDS)
    );
    // The user sets maxStepTimeout to -1 while `a` runs: same run, new generation.
    let mut after = before.clone();
    after.spec.max_step_timeout = UNLIMITED;
    after.metadata.generation = Some(2);
    let plan = plan(&after, &jobs, at(86_400));
    let status = status(&plan);
    assert_eq!(status.workflow_status, Some(Phase::Started));
    assert_eq!(status.observed_generation, Some(2));
    assert!(plan.events.is_empty());
    // The Job's own deadline is lifted too, or Kubernetes would still kill it at 5s.
    assert_eq!(
        plan.actions,
        [Action::SetJobDeadline {
            job_name: jobs[0].name.clone(),
            active_deadline_seconds: None
        }]
    );
    assert_eq!(plan.next_timeout_at, None);
    assert_eq!(next_timeout_at(&after, &jobs), None);
}

#[test]
fn raising_max_step_timeout_applies_to_running_steps() {
    let before = running(
        WorkFlow::test("w")
            .max_step_timeout(5)
            .step("a", &[])
            .build(),
    );
    let jobs = Jobs::of(&before).active("a", at(0)).build();
    let mut after = before.clone();
    after.spec.max_step_timeout = 50;
    let plan = plan(&after, &jobs, at(10));
    assert!(plan.events.is_empty(), "{plan:?}");
    assert_eq!(
        plan.actions,
        [Action::SetJobDeadline {
            job_name: jobs[0].name.clone(),
            active_deadline_seconds: Some(50 + POD_DEADLINE_SLACK_SECONDS)
        }]
    );
    assert_eq!(plan.next_timeout_at, Some(at(50)));
}

/// The operator stops a step at its timeout (by its pod's deadline, which keeps the pod and its
/// log); the Job's own deadline is a backstop 60 s later. A pod the kubelet failed past its
/// deadline, as its pod says, is the step's timeout.
#[test]
fn a_step_is_stopped_at_its_timeout_and_its_job_deadline_is_a_backstop() {
    let wf = running(
        WorkFlow::test("w")
            .max_step_timeout(2)
            .step("a", &[])
            .build(),
    );
    let jobs = Jobs::of(&wf).active("a", at(0)).build();
    assert_eq!(
        jobs[0].active_deadline_seconds,
        Some(2 + POD_DEADLINE_SLACK_SECONDS)
    );
    let running = plan(&wf, &jobs, at(1));
    assert!(running.actions.is_empty(), "{:?}", running.actions);
    assert_eq!(running.next_timeout_at, Some(at(2)));
    let stopped = plan(&wf, &jobs, at(2));
    assert_eq!(status(&stopped).workflow_status, Some(Phase::Failed));
    assert!(
        (stopped.actions.iter()).any(|a| matches!(a, Action::TimeOutJob { .. })),
        "{:?}",
        stopped.actions
    );

    let failed = Jobs::of(&wf)
        .exited(
            "a",
            143,
            DEADLINE_EXCEEDED,
            "Pod was active on the node longer than the specified deadline",
        )
        .build();
    let plan = plan(&wf, &failed, at(3));
    let status = status(&plan);
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "step a timed out: its pod ran past its timeout of 2s (spec.maxStepTimeout, default 60; -1 for none)"
        )
    );
    assert_eq!(status.steps[0].phase, StepPhase::TimedOut);
}

/// A Job an older operator built has the step's timeout as its deadline: it gets the backstop,
/// and the step still times out at its timeout.
#[test]
fn a_job_built_with_the_timeout_as_its_deadline_gets_the_backstop() {
    let wf = running(
        WorkFlow::test("w")
            .max_step_timeout(5)
            .step("a", &[])
            .build(),
    );
    let mut jobs = Jobs::of(&wf).active("a", at(0)).build();
    jobs[0].active_deadline_seconds = Some(5);
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(
        plan.actions,
        [Action::SetJobDeadline {
            job_name: jobs[0].name.clone(),
            active_deadline_seconds: Some(5 + POD_DEADLINE_SLACK_SECONDS)
        }]
    );
    assert_eq!(plan.next_timeout_at, Some(at(5)));
}

#[test]
fn next_timeout_is_the_earliest_running_deadline() {
    let wf = running(
        WorkFlow::test("w")
            .max_step_timeout(30)
            .step("a", &[])
            .step("b", &[])
            .timeout(10)
            .step("c", &[])
            .timeout(-1)
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .active("a", at(0))
        .active("b", at(5))
        .active("c", at(0))
        .build();
    let plan = plan(&wf, &jobs, at(6));
    assert_eq!(plan.next_timeout_at, Some(at(15)));
    assert_eq!(next_timeout_at(&wf, &jobs), Some(at(15)));
    // At the deadline exactly the step has timed out: the timer never fires too early.
    let due = super::plan(&wf, &jobs, at(15));
    assert_eq!(status(&due).workflow_status, Some(Phase::Failed));
}

/// The bug: the Job of a step the timer found past its timeout was deleted, and it was the
/// only record of the timeout; the next plan found the step without a Job and started it
/// again.
#[test]
fn with_fail_fast_false_a_timed_out_step_is_not_started_again_on_the_next_plan() {
    let wf = running(
        WorkFlow::test("w")
            .fail_fast(false)
            .step("a", &[])
            .timeout(5)
            .step("b", &[])
            .step("c", &["a"])
            .build(),
    );
    let mut jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
    let first = plan(&wf, &jobs, at(6));
    let why = "running for 6s, longer than its timeout of 5s";
    assert_eq!(
        first.actions,
        [Action::TimeOutJob {
            job_name: jobs[0].name.clone(),
            why: why.into()
        }]
    );
    let waiting = format!(
        "step a timed out: {why} (the step's timeout; -1 for none); waiting for running steps to finish"
    );
    assert_eq!(status(&first).message.as_deref(), Some(waiting.as_str()));
    apply(&mut jobs, &wf, &first, at(6));
    let recorded = written(wf.clone(), &first);

    // The timer's next ticks; an operator restarted after the status write, or before it
    // (only the stopped Job records the timeout then): the step is neither started again
    // nor stopped twice, nothing else changes, and the timer waits for b's deadline.
    for (workflow, now) in [(&recorded, 7), (&recorded, 59), (&wf, 7)] {
        let next = plan(workflow, &jobs, at(now));
        assert!(next.actions.is_empty(), "at {now}: {next:?}");
        let status = next.status.as_ref().or(workflow.status.as_ref()).unwrap();
        assert_eq!(status.workflow_status, Some(Phase::Started), "at {now}");
        assert_eq!(
            status.message.as_deref(),
            Some(waiting.as_str()),
            "at {now}"
        );
        assert_eq!(status.started, ["b"], "at {now}");
        assert_eq!(next.next_timeout_at, Some(at(60)), "at {now}");
        assert_eq!(next_timeout_at(workflow, &jobs), Some(at(60)), "at {now}");
    }
    assert_eq!(plan(&recorded, &jobs, at(7)).status, None);

    // Once b finishes the workflow fails with the timeout; a's dependent never started.
    jobs[1].state = JobState::Succeeded;
    let last = plan(&recorded, &jobs, at(20));
    assert!(last.actions.is_empty(), "{last:?}");
    assert_eq!(reasons(&last), ["StepTimedOut"]);
    let failed = status(&last);
    assert_eq!(
        failed.message.as_deref(),
        Some(format!("step a timed out: {why} (the step's timeout; -1 for none)").as_str())
    );
    assert_eq!(failed.executed, ["b"]);
    let condition = failed
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FAILED);
    assert_eq!(condition.map(|c| c.reason.as_str()), Some("StepTimedOut"));
}

#[test]
fn with_fail_fast_a_timed_out_job_is_stopped_and_kept_and_the_others_deleted() {
    let wf = running(
        WorkFlow::test("w")
            .step("a", &[])
            .timeout(5)
            .step("b", &[])
            .build(),
    );
    let mut jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
    let first = plan(&wf, &jobs, at(6));
    assert_eq!(
        stops(&first),
        [(
            jobs[0].name.as_str(),
            "running for 6s, longer than its timeout of 5s"
        )]
    );
    assert_eq!(
        deletes(&first),
        [(jobs[1].name.as_str(), Out::WorkflowFailed)]
    );
    assert_eq!(phase(&first), Some(Phase::Failed));
    apply(&mut jobs, &wf, &first, at(6));
    // The failed workflow leaves its stopped Job alone: it is no longer running.
    let failed = written(wf, &first);
    let later = plan(&failed, &jobs, at(7));
    assert!(
        later.actions.is_empty() && later.status.is_none(),
        "{later:?}"
    );
}

#[test]
fn bug3_two_jobs_finishing_together_both_count() {
    let wf = running(diamond().build());
    let a_done = written(
        wf.clone(),
        &plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1)),
    );
    // b and c complete in the same instant; each handler may see both. Neither is lost.
    let jobs = Jobs::of(&a_done)
        .succeeded("a")
        .succeeded("b")
        .succeeded("c")
        .build();
    let plan = plan(&a_done, &jobs, at(2));
    assert_eq!(status(&plan).executed, ["a", "b", "c"]);
    assert_eq!(creates(&plan), ["d"]);
}

#[test]
fn state_comes_from_jobs_not_from_status_lists() {
    let mut wf = running(diamond().build());
    let stale = wf.status.as_mut().unwrap();
    stale.executed = vec!["a".into(), "b".into(), "c".into(), "d".into()];
    stale.started = vec![];
    let plan = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1));
    assert_eq!(status(&plan).executed, ["a"]);
    assert_eq!(status(&plan).workflow_status, Some(Phase::Started));
    assert_eq!(creates(&plan), ["b", "c"]);
}

#[test]
fn bug4_completions_while_the_operator_was_down_are_recorded() {
    // The status still says only `a` started; meanwhile a, b and c finished.
    let wf = running(diamond().build());
    assert_eq!(wf.status.as_ref().unwrap().started, ["a"]);
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .succeeded("b")
        .succeeded("c")
        .build();
    let plan = plan(&wf, &jobs, at(100));
    assert_eq!(status(&plan).executed, ["a", "b", "c"]);
    assert_eq!(creates(&plan), ["d"]);
}

#[test]
fn bug5_spec_update_before_any_step_finished_restarts() {
    let old = running(diamond().build());
    let old_jobs = Jobs::of(&old).active("a", at(0)).build();
    let mut new = old.clone();
    new.spec.containers[0].image = "busybox:1.37".into();
    new.metadata.generation = Some(2);
    let plan = plan(&new, &old_jobs, at(5));
    assert_eq!(reasons(&plan), ["SpecChanged", "StepsStarted"]);
    assert_eq!(deletes(&plan), [(old_jobs[0].name.as_str(), Out::OldRun)]);
    assert_eq!(creates(&plan), ["a"]);
    let new_name = job_name(&new, "a");
    assert_ne!(new_name, old_jobs[0].name);
    let status = status(&plan);
    assert_eq!(status.run, Some(names::run_id(&new.spec)));
    assert_eq!(
        (status.executed.len(), status.started.as_slice()),
        (0, &["a".to_string()][..])
    );
    assert_eq!(status.message, None);
}

#[test]
fn bug5_late_completion_of_an_old_job_is_ignored() {
    let old = running(diamond().build());
    let mut new = old.clone();
    new.spec.containers[0].command = Some(vec!["true".into()]);
    let new = written(new.clone(), &plan(&new, &[], at(1)));
    // The old run's `a` completes late, next to the new run's running `a`.
    let mut jobs = Jobs::of(&old).succeeded("a").build();
    jobs[0].deleting = true;
    jobs.extend(Jobs::of(&new).active("a", at(1)).build());
    let plan = plan(&new, &jobs, at(2));
    assert_eq!(plan.status, None, "nothing changed: {plan:?}");
    assert!(plan.actions.is_empty(), "{plan:?}");
}

#[test]
fn spec_change_restarts_a_terminal_workflow() {
    for outcome in ["succeeded", "failed"] {
        let wf = running(WorkFlow::test("w").step("a", &[]).build());
        let jobs = match outcome {
            "succeeded" => Jobs::of(&wf).succeeded("a").build(),
            _ => Jobs::of(&wf)
                .failed("a", "BackoffLimitExceeded", "")
                .build(),
        };
        let done = written(wf.clone(), &plan(&wf, &jobs, at(1)));
        let mut changed = done.clone();
        changed
            .spec
            .containers
            .push(crate::testing::step("b", &["a"]));
        let plan = plan(&changed, &jobs, at(2));
        assert_eq!(reasons(&plan), ["SpecChanged", "StepsStarted"], "{outcome}");
        assert_eq!(creates(&plan), ["a"], "{outcome}");
        assert_eq!(
            status(&plan).workflow_status,
            Some(Phase::Started),
            "{outcome}"
        );
        assert!(
            status(&plan).conditions.iter().all(|c| c.status == "False"),
            "{outcome}"
        );
    }
}

#[test]
fn limits_change_of_a_terminal_workflow_changes_only_observed_generation() {
    let wf = running(WorkFlow::test("w").step("a", &[]).build());
    let jobs = Jobs::of(&wf)
        .failed("a", "BackoffLimitExceeded", "")
        .build();
    let failed = written(wf.clone(), &plan(&wf, &jobs, at(1)));
    let mut changed = failed.clone();
    changed.spec.max_step_timeout = 600;
    changed.spec.containers[0].retries = Some(3.into());
    changed.metadata.generation = Some(2);
    let plan = plan(&changed, &jobs, at(2));
    let mut want = failed.status.clone().unwrap();
    want.observed_generation = Some(2);
    assert_eq!(plan.status, Some(want));
    assert!(
        plan.events.is_empty() && plan.actions.is_empty(),
        "{plan:?}"
    );
}

#[test]
fn bug6_missing_message_is_absent_not_type_text() {
    let wf = running(diamond().build());
    let status = wf.status.as_ref().unwrap();
    assert_eq!(status.message, None);
    let json = serde_json::to_value(status).unwrap();
    assert!(json.get("message").is_none(), "{json}");
    assert!(!json.to_string().contains("Optional"), "{json}");
}

#[test]
fn bug9_failed_workflow_deletes_its_running_jobs() {
    let wf = running(WorkFlow::test("w").step("a", &[]).step("b", &[]).build());
    let jobs = Jobs::of(&wf)
        .failed("a", "BackoffLimitExceeded", "")
        .active("b", at(0))
        .build();
    let first = plan(&wf, &jobs, at(1));
    assert_eq!(
        deletes(&first),
        [(jobs[1].name.as_str(), Out::WorkflowFailed)]
    );
    // If that delete was lost, the failed workflow deletes the Job again, once.
    let failed = written(wf, &first);
    let again = plan(&failed, &jobs, at(2));
    assert_eq!(
        deletes(&again),
        [(jobs[1].name.as_str(), Out::WorkflowFailed)]
    );
    assert_eq!(again.status, None);
    let mut gone = jobs.clone();
    gone[1].deleting = true;
    assert!(plan(&failed, &gone, at(3)).actions.is_empty());
}

#[test]
fn bug10_retried_plan_creates_each_job_once() {
    let wf = diamond().build();
    let first = plan(&wf, &[], at(0));
    // The Job was created but the status write failed; the retry sees the Job.
    let jobs = Jobs::of(&wf).active("a", at(0)).build();
    let retry = plan(&wf, &jobs, at(1));
    assert!(creates(&retry).is_empty(), "{retry:?}");
    assert_eq!(reasons(&retry), ["StepsStarted"]);
    assert_eq!(retry.status.as_ref().unwrap().started, ["a"]);
    // The create itself failed: the retry asks for the very same Job name again.
    let again = plan(&wf, &[], at(1));
    assert_eq!(again.actions, first.actions);
}

#[test]
fn plan_is_idempotent_once_carried_out() {
    let wf = running(diamond().build());
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let first = plan(&wf, &jobs, at(1));
    let wf = written(wf, &first);
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .active("b", at(1))
        .active("c", at(1))
        .build();
    let second = plan(&wf, &jobs, at(2));
    assert_eq!(second.status, None, "{second:?}");
    assert!(
        second.actions.is_empty() && second.events.is_empty(),
        "{second:?}"
    );
}

#[test]
fn finished_is_true_once_the_workflow_ended_either_way() {
    let finished = |s: &WorkFlowStatus| {
        let c = s.conditions.iter().find(|c| c.type_ == CONDITION_FINISHED);
        c.map(|c| (c.status.clone(), c.reason.clone()))
    };
    let wf = running(WorkFlow::test("w").step("a", &[]).build());
    assert_eq!(
        finished(wf.status.as_ref().unwrap()),
        Some(("False".into(), "Started".into()))
    );
    let done = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(5));
    assert_eq!(
        finished(status(&done)),
        Some(("True".into(), "AllStepsSucceeded".into()))
    );
    let failed = plan(
        &wf,
        &Jobs::of(&wf)
            .failed("a", "BackoffLimitExceeded", "")
            .build(),
        at(5),
    );
    assert_eq!(
        finished(status(&failed)),
        Some(("True".into(), "StepFailed".into()))
    );
}

#[test]
fn conditions_follow_the_phase_and_keep_their_transition_time() {
    let wf = running(WorkFlow::test("w").step("a", &[]).step("b", &["a"]).build());
    let started = wf.status.as_ref().unwrap();
    let condition =
        |s: &WorkFlowStatus, t: &str| s.conditions.iter().find(|c| c.type_ == t).cloned().unwrap();
    assert_eq!(condition(started, CONDITION_COMPLETED).status, "False");
    assert_eq!(condition(started, CONDITION_COMPLETED).reason, "Started");
    assert_eq!(
        condition(started, CONDITION_FAILED).last_transition_time,
        Time(at(0))
    );

    let step = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(5));
    assert_eq!(
        condition(status(&step), CONDITION_FAILED).last_transition_time,
        Time(at(0))
    );
    assert_eq!(
        status(&step).status_changed,
        started.status_changed,
        "phase unchanged"
    );

    let done = plan(
        &wf,
        &Jobs::of(&wf).succeeded("a").succeeded("b").build(),
        at(9),
    );
    let completed = condition(status(&done), CONDITION_COMPLETED);
    assert_eq!(
        (completed.status.as_str(), completed.reason.as_str()),
        ("True", "AllStepsSucceeded")
    );
    assert_eq!(completed.last_transition_time, Time(at(9)));
    assert_eq!(
        status(&done).status_changed.as_deref(),
        Some("2026-01-01T00:00:09Z")
    );

    let failed = plan(
        &wf,
        &Jobs::of(&wf)
            .failed("a", "BackoffLimitExceeded", "")
            .build(),
        at(9),
    );
    let failed = condition(status(&failed), CONDITION_FAILED);
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "StepFailed")
    );
    assert_eq!(failed.message, "step a failed: BackoffLimitExceeded");
}

#[test]
fn lost_status_write_after_first_jobs_still_records_a_legal_path() {
    // No status at all, yet the step already finished: Created -> Started -> Completed.
    let wf = WorkFlow::test("w").step("a", &[]).build();
    let plan = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(1));
    assert_eq!(reasons(&plan), ["StepsStarted", "AllStepsSucceeded"]);
    assert_eq!(phase(&plan), Some(Phase::Completed));
}

/// `(name, phase, reason, message, exit code)` of a `status.steps` entry.
type Entry<'a> = (
    &'a str,
    StepPhase,
    Option<&'a str>,
    Option<&'a str>,
    Option<i32>,
);

/// Each `status.steps` entry of the plan's status.
fn step_entries(plan: &Plan) -> Vec<Entry<'_>> {
    status(plan)
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.phase,
                s.reason.as_deref(),
                s.message.as_deref(),
                s.exit_code,
            )
        })
        .collect()
}

#[test]
fn status_steps_list_running_and_created_steps_with_their_jobs_and_nothing_else() {
    let wf = running(diamond().build());
    let plan = plan(
        &wf,
        &Jobs::of(&wf).succeeded("a").active("b", at(1)).build(),
        at(2),
    );
    assert_eq!(
        step_entries(&plan),
        [
            ("b", StepPhase::Running, None, None, None),
            ("c", StepPhase::Running, None, None, None)
        ]
    );
    let jobs: Vec<_> = status(&plan).steps.iter().map(|s| s.job.clone()).collect();
    assert_eq!(
        jobs,
        [Some(job_name(&wf, "b")), Some(job_name(&wf, "c"))],
        "the Job of a step being created is named too"
    );
    // A running step's entry holds nothing its Job's start changes: no time, no attempts.
    assert!(
        status(&plan)
            .steps
            .iter()
            .all(|s| s.started_at.is_none() && s.attempts.is_none())
    );
    let done = plan_done(&wf);
    assert!(status(&done).steps.is_empty(), "{:?}", status(&done).steps);
}

fn plan_done(wf: &WorkFlow) -> Plan {
    let jobs = Jobs::of(wf)
        .succeeded("a")
        .succeeded("b")
        .succeeded("c")
        .succeeded("d")
        .build();
    plan(wf, &jobs, at(3))
}

#[test]
fn a_failed_step_is_recorded_with_its_exit_code_and_the_running_ones_as_stopped() {
    let wf = running(diamond().build());
    let mut jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "disk full")
        .active("c", at(1))
        .build();
    jobs[1].attempts = 3;
    jobs[1].start_time = Some(at(1));
    jobs[1].finished_at = Some(at(4));
    let plan = plan(&wf, &jobs, at(5));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some("step b failed: exit code 2: disk full")
    );
    assert_eq!(
        step_entries(&plan),
        [
            (
                "b",
                StepPhase::Failed,
                Some("Error"),
                Some("disk full"),
                Some(2)
            ),
            (
                "c",
                StepPhase::Failed,
                Some(REASON_STOPPED),
                Some("the workflow failed while it ran"),
                None
            )
        ]
    );
    let b = &status(&plan).steps[0];
    assert_eq!(
        (b.started_at.clone(), b.finished_at.clone(), b.attempts),
        (Some(Time(at(1))), Some(Time(at(4))), Some(3))
    );
    assert_eq!(b.job.as_deref(), Some(job_name(&wf, "b").as_str()));
}

#[test]
fn failure_messages_name_the_exit_code_and_the_containers_own_reason() {
    let wf = running(WorkFlow::test("w").step("x", &[]).build());
    let cases = [
        (
            Jobs::of(&wf).exited("x", 2, "Error", "").build(),
            "step x failed: exit code 2",
        ),
        (
            Jobs::of(&wf)
                .exited("x", 128, "StartError", "exec: \"nosuch\": not found")
                .build(),
            "step x failed: exit code 128: StartError: exec: \"nosuch\": not found",
        ),
        (
            Jobs::of(&wf).exited("x", 137, "OOMKilled", "").build(),
            "step x failed: exit code 137: OOMKilled",
        ),
        (
            Jobs::of(&wf)
                .failed(
                    "x",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                )
                .build(),
            "step x failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
        ),
    ];
    for (jobs, want) in cases {
        assert_eq!(
            status(&plan(&wf, &jobs, at(1))).message.as_deref(),
            Some(want)
        );
    }
}

#[test]
fn a_timed_out_step_is_recorded_as_timed_out() {
    let wf = running(
        WorkFlow::test("w")
            .fail_fast(false)
            .step("a", &[])
            .timeout(5)
            .step("b", &[])
            .build(),
    );
    let jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
    let plan = plan(&wf, &jobs, at(6));
    assert_eq!(
        step_entries(&plan),
        [
            (
                "a",
                StepPhase::TimedOut,
                Some(REASON_TIMED_OUT),
                Some("running for 6s, longer than its timeout of 5s"),
                None
            ),
            ("b", StepPhase::Running, None, None, None)
        ]
    );
}

/// A workflow whose step `db` (timeout 60s, startTimeout 10s) has a Job created at 0 whose
/// pod has not started.
fn not_started() -> (WorkFlow, Vec<ObservedJob>) {
    let wf = running(
        WorkFlow::test("w")
            .start_timeout(10)
            .step("db", &[])
            .timeout(60)
            .step("after", &["db"])
            .build(),
    );
    let jobs = Jobs::of(&wf).pending("db", at(0)).build();
    (wf, jobs)
}

#[test]
fn a_pod_not_started_waits_until_its_start_deadline_which_the_timer_is_set_for() {
    let (wf, jobs) = not_started();
    let plan = plan(&wf, &jobs, at(9));
    assert_eq!(plan.status, None, "nothing changed");
    assert_eq!(plan.next_timeout_at, Some(at(10)));
    assert_eq!(next_timeout_at(&wf, &jobs), Some(at(10)));
    // Once the pod started, only the step's own timeout is left.
    let mut started = jobs.clone();
    started[0].pod_started = true;
    assert_eq!(
        super::plan(&wf, &started, at(9)).next_timeout_at,
        Some(at(60))
    );
    assert_eq!(
        super::plan(&wf, &started, at(30)).status,
        None,
        "no failure"
    );
}

#[test]
fn a_pod_not_started_by_its_start_deadline_fails_the_step_with_its_cause() {
    let (wf, jobs) = not_started();
    let why = "CreateContainerConfigError: secret \"creds\" not found";
    // Past the deadline, until the handler read the pods, the step waits.
    let unread = plan(&wf, &jobs, at(10));
    assert_eq!(unread.status, None, "nothing changed");
    assert!(unread.actions.is_empty(), "{:?}", unread.actions);
    let read = Jobs::of(&wf)
        .pending("db", at(0))
        .start_failure(why)
        .build();
    let plan = plan(&wf, &read, at(10));
    assert_eq!(phase(&plan), Some(Phase::Failed));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some("step db cannot start: CreateContainerConfigError: secret \"creds\" not found")
    );
    assert_eq!(reasons(&plan), ["StepFailed"]);
    assert_eq!(
        plan.actions,
        [Action::FailStart {
            job_name: job_name(&wf, "db"),
            why: why.into()
        }]
    );
    assert_eq!(
        step_entries(&plan),
        [(
            "db",
            StepPhase::Failed,
            Some(REASON_CANNOT_START),
            Some(why),
            None
        )]
    );
    // Before the deadline, a cause read early (a lagging status) decides nothing.
    assert_eq!(super::plan(&wf, &read, at(9)).status, None);
}

#[test]
fn a_pod_not_started_by_the_steps_own_timeout_fails_for_its_cause_not_as_timed_out() {
    let wf = running(
        WorkFlow::test("w")
            .start_timeout(300)
            .step("x", &[])
            .timeout(5)
            .build(),
    );
    let why = "FailedCreate: Error creating: serviceaccount \"runner\" not found";
    let jobs = Jobs::of(&wf).pending("x", at(0)).start_failure(why).build();
    let plan = plan(&wf, &jobs, at(5));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some(format!("step x cannot start: {why}").as_str())
    );
    // A suspended Job has no pod to start: it times out, whatever was read...
    let mut queued = jobs.clone();
    queued[0].suspended = true;
    let plan = super::plan(&wf, &queued, at(5));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some(
            "step x timed out: running for 5s, longer than its timeout of 5s (the step's timeout; -1 for none)"
        )
    );
    // ...unless it waits for Kueue to admit it: no run timeout before.
    let mut kueue = wf.clone();
    kueue.spec.queue_name = Some("q".into());
    let plan = super::plan(&kueue, &queued, at(5));
    assert_eq!(status(&plan).message, None);
    assert_eq!(status(&plan).steps[0].phase, StepPhase::Queued);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    // Without a cause (the pods could not be read) it times out as before.
    let plan = super::plan(&wf, &Jobs::of(&wf).pending("x", at(0)).build(), at(5));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some(
            "step x timed out: running for 5s, longer than its timeout of 5s (the step's timeout; -1 for none)"
        )
    );
}

#[test]
fn a_job_recorded_as_not_started_keeps_the_step_failed_after_a_restart() {
    let (wf, mut jobs) = not_started();
    let why = "ErrImagePull: pull access denied";
    jobs[0].state = JobState::CannotStart { why: why.into() };
    let plan = plan(&wf, &jobs, at(11));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some("step db cannot start: ErrImagePull: pull access denied")
    );
    assert!(plan.actions.is_empty(), "the Job is stopped already");
}

#[test]
fn a_job_the_api_server_refused_fails_its_step_as_the_status_records_it() {
    let wf = running(diamond().fail_fast(false).step("x", &[]).build());
    let message = r#"Job.batch "diamond-a" is invalid: spec.template.spec.volumes[0].name: Invalid value: "Bad_Name""#;
    let mut recorded = wf.clone();
    let stored = recorded.status.as_mut().unwrap();
    stored.steps.retain(|s| s.name != "a");
    stored.steps.push(refused_step_status(
        "a",
        &job_name(&wf, "a"),
        REASON_JOB_REFUSED,
        message,
    ));
    let jobs = Jobs::of(&wf).active("x", at(0)).build();
    let plan = plan(&recorded, &jobs, at(1));
    assert!(
        creates(&plan).is_empty(),
        "a is never created again: {:?}",
        plan.actions
    );
    let want = format!("step a failed: the API server refused its Job: {message}");
    assert_eq!(
        status(&plan).message,
        Some(format!("{want}; waiting for running steps to finish"))
    );
    assert_eq!(
        step_entries(&plan)[0],
        (
            "a",
            StepPhase::Failed,
            Some(REASON_JOB_REFUSED),
            Some(message),
            None
        )
    );
    // Once nothing runs, the workflow fails with it.
    let done = Jobs::of(&wf).succeeded("x").build();
    let failed = super::plan(&written(recorded, &plan), &done, at(2));
    assert_eq!(phase(&failed), Some(Phase::Failed));
    assert_eq!(status(&failed).message.as_deref(), Some(want.as_str()));
    // A refusal recorded for another run (another Job name) is forgotten.
    let mut other_run = wf.clone();
    other_run.status.as_mut().unwrap().steps = vec![refused_step_status(
        "a",
        "diamond-a-old",
        REASON_JOB_REFUSED,
        message,
    )];
    assert!(
        super::plan(&other_run, &[], at(1))
            .status
            .is_none_or(|s| s.message.is_none())
    );
}

#[test]
fn status_from_another_operator_is_adopted_without_a_restart() {
    let wf = WorkFlow::test("w")
        .step("a", &[])
        .status(WorkFlowStatus {
            workflow_status: Some(Phase::Completed),
            ..Default::default()
        })
        .build();
    let plan = plan(&wf, &[], at(1));
    assert!(
        plan.events.is_empty() && plan.actions.is_empty(),
        "{plan:?}"
    );
    assert_eq!(phase(&plan), Some(Phase::Completed));
    assert_eq!(status(&plan).run, Some(names::run_id(&wf.spec)));
}

/// What a simulated cluster does with a plan's actions: creates Jobs, deletes them, stops
/// timed-out ones (as `jobs::observe_job` then reads them).
fn apply(jobs: &mut Vec<ObservedJob>, wf: &WorkFlow, plan: &Plan, now: Timestamp) {
    for action in &plan.actions {
        match action {
            Action::CreateJob {
                step,
                job_name,
                retry,
                ..
            } => {
                assert!(
                    !jobs.iter().any(|j| j.name == *job_name),
                    "duplicate create {job_name}"
                );
                let mut new = Jobs::of(wf).retry(*retry).active(step, now).build();
                assert_eq!(new[0].name, *job_name);
                jobs.append(&mut new);
            }
            Action::DeleteJob { job_name } | Action::StopJob { job_name, .. } => {
                jobs.retain(|j| j.name != *job_name)
            }
            Action::TimeOutJob { job_name, why } => {
                let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                job.state = JobState::TimedOut { why: why.clone() };
            }
            Action::FailStart { job_name, why } => {
                let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                job.state = JobState::CannotStart { why: why.clone() };
            }
            Action::ResumeJob { job_name, .. } => {
                let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                job.state = JobState::Succeeded;
            }
            Action::SetJobDeadline { .. } => {}
        }
    }
}

/// The exit steps' Jobs the plan creates, with what they are told.
fn exit_creates(plan: &Plan) -> Vec<(&str, &ExitEnv)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob {
                step,
                exit: Some(exit),
                ..
            } => Some((step.as_str(), exit)),
            _ => None,
        })
        .collect()
}

#[test]
fn suspend_holds_new_steps_while_the_running_one_finishes_and_resume_starts_them() {
    let wf = running(diamond().build());
    let wf = WorkFlow {
        spec: diamond().suspend(true).build().spec,
        ..wf
    };
    let jobs = Jobs::of(&wf).active("a", at(0)).build();
    let plan1 = plan(&wf, &jobs, at(1));
    assert!(creates(&plan1).is_empty());
    assert_eq!(phase(&plan1), Some(Phase::Suspended));
    assert_eq!(reasons(&plan1), ["Suspended"]);
    assert_eq!(
        status(&plan1).message.as_deref(),
        Some("suspended (spec.suspend): no new step starts")
    );
    let wf = written(wf, &plan1);
    // `a` finishes while suspended: `b` and `c` are ready, and wait.
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let plan2 = plan(&wf, &jobs, at(2));
    assert!(creates(&plan2).is_empty());
    assert!(plan2.events.is_empty());
    let wf = written(wf, &plan2);
    assert_eq!(wf.status.as_ref().unwrap().executed, ["a"]);
    let wf = WorkFlow {
        spec: diamond().build().spec,
        ..wf
    };
    let plan3 = plan(&wf, &jobs, at(3));
    assert_eq!(creates(&plan3), ["b", "c"]);
    assert_eq!(reasons(&plan3), ["Resumed"]);
    assert_eq!(phase(&plan3), Some(Phase::Started));
    assert_eq!(status(&plan3).message, None);
}

#[test]
fn a_workflow_created_suspended_starts_nothing_until_resumed() {
    let wf = diamond().suspend(true).build();
    let plan1 = plan(&wf, &[], at(0));
    assert!(creates(&plan1).is_empty());
    assert_eq!(reasons(&plan1), ["Suspended"]);
    assert_eq!(
        plan1.events[0].message,
        "Created -> Suspended: spec.suspend is true: no new step starts"
    );
    let wf = written(wf, &plan1);
    let wf = WorkFlow {
        spec: diamond().build().spec,
        ..wf
    };
    let plan2 = plan(&wf, &[], at(1));
    assert_eq!(creates(&plan2), ["a"]);
    assert_eq!(reasons(&plan2), ["Resumed"]);
}

#[test]
fn stop_lets_the_running_step_finish_starts_nothing_new_and_ends_failed() {
    let wf = running(diamond().build());
    let wf = WorkFlow {
        spec: diamond().shutdown(Shutdown::Stop).build().spec,
        ..wf
    };
    let plan1 = plan(&wf, &Jobs::of(&wf).active("a", at(0)).build(), at(1));
    assert!(creates(&plan1).is_empty() && deletes(&plan1).is_empty());
    assert_eq!(phase(&plan1), Some(Phase::Started));
    assert_eq!(
        status(&plan1).message.as_deref(),
        Some("stopping (spec.shutdown: Stop): waiting for running steps to finish")
    );
    let wf = written(wf, &plan1);
    let plan2 = plan(&wf, &Jobs::of(&wf).succeeded("a").build(), at(2));
    assert!(creates(&plan2).is_empty());
    assert_eq!(reasons(&plan2), ["Stopped"]);
    assert_eq!(phase(&plan2), Some(Phase::Failed));
    let st = status(&plan2);
    assert_eq!(
        st.message.as_deref(),
        Some("stopped (spec.shutdown: Stop): 3 steps never ran")
    );
    let failed = st
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FAILED)
        .unwrap();
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "Stopped")
    );
    assert_eq!(st.executed, ["a"]);
}

#[test]
fn stop_runs_the_exit_steps_once_nothing_runs_then_ends() {
    let spec = |b: crate::testing::WorkFlowBuilder| b.exit_step("notify", &[]);
    let wf = running(spec(diamond()).build());
    let wf = WorkFlow {
        spec: spec(diamond()).shutdown(Shutdown::Stop).build().spec,
        ..wf
    };
    let plan1 = plan(&wf, &Jobs::of(&wf).active("a", at(0)).build(), at(1));
    assert!(exit_creates(&plan1).is_empty(), "not while a step runs");
    let wf = written(wf, &plan1);
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let plan2 = plan(&wf, &jobs, at(2));
    let want = ExitEnv {
        status: Phase::Failed,
        failed_steps: vec![],
        failures: "null".into(),
    };
    assert_eq!(exit_creates(&plan2), [("notify", &want)]);
    assert_eq!(reasons(&plan2), ["ExitStepsStarted"]);
    assert_eq!(phase(&plan2), Some(Phase::Started));
    assert_eq!(
        status(&plan2).message.as_deref(),
        Some("running exit steps: stopped (spec.shutdown: Stop): 3 steps never ran")
    );
    let wf = written(wf, &plan2);
    let jobs = Jobs::of(&wf).succeeded("a").succeeded("notify").build();
    let plan3 = plan(&wf, &jobs, at(3));
    assert!(creates(&plan3).is_empty());
    assert_eq!(reasons(&plan3), ["Stopped"]);
    assert_eq!(phase(&plan3), Some(Phase::Failed));
    assert_eq!(status(&plan3).executed, ["a", "notify"]);
    assert_eq!(status(&plan3).progress.as_deref(), Some("2/5"));
}

#[test]
fn terminate_deletes_the_running_jobs_at_once_and_runs_no_exit_step() {
    let spec = |b: crate::testing::WorkFlowBuilder| b.exit_step("notify", &[]);
    let wf = running(spec(diamond()).build());
    let wf = WorkFlow {
        spec: spec(diamond()).shutdown(Shutdown::Terminate).build().spec,
        ..wf
    };
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .active("b", at(1))
        .active("c", at(1))
        .build();
    let plan1 = plan(&wf, &jobs, at(2));
    assert_eq!(
        deletes(&plan1),
        [
            (job_name(&wf, "b").as_str(), Out::Terminated),
            (job_name(&wf, "c").as_str(), Out::Terminated)
        ]
    );
    assert!(creates(&plan1).is_empty());
    assert_eq!(reasons(&plan1), ["Terminated"]);
    let st = status(&plan1);
    assert_eq!(st.workflow_status, Some(Phase::Failed));
    assert_eq!(
        st.message.as_deref(),
        Some("terminated (spec.shutdown: Terminate)")
    );
    let halted: Vec<(&str, Option<&str>, Option<&str>)> = st
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.reason.as_deref(), s.message.as_deref()))
        .collect();
    // `get` shows `reason: message`: the message says what the reason does not.
    let killed = Some("its pod was killed (spec.shutdown: Terminate)");
    assert_eq!(
        halted,
        [
            ("b", Some(REASON_TERMINATED), killed),
            ("c", Some(REASON_TERMINATED), killed)
        ]
    );
    // Nothing more happens once the Jobs are stopped, and kept.
    let wf = written(wf, &plan1);
    let stopped = Jobs::of(&wf)
        .succeeded("a")
        .active("b", at(1))
        .stopped()
        .failed("c", "BackoffLimitExceeded", "")
        .stopped()
        .build();
    let plan2 = plan(&wf, &stopped, at(3));
    assert!(plan2.actions.is_empty() && plan2.events.is_empty());
    assert_eq!(plan2.status, None, "the status stays as it was");
}

/// The start and end the status records for `step`.
fn times(plan: &Plan, step: &str) -> (Option<Time>, Option<Time>) {
    let entry = status(plan).steps.iter().find(|s| s.name == step);
    let entry = entry.unwrap_or_else(|| panic!("an entry for {step}"));
    (entry.started_at.clone(), entry.finished_at.clone())
}

#[test]
fn a_step_the_workflow_stops_records_when_it_was_stopped() {
    // By a terminate.
    let wf = running(diamond().build());
    let wf = WorkFlow {
        spec: diamond().shutdown(Shutdown::Terminate).build().spec,
        ..wf
    };
    let jobs = Jobs::of(&wf).succeeded("a").active("b", at(1)).build();
    let terminated = plan(&wf, &jobs, at(7));
    assert_eq!(
        times(&terminated, "b"),
        (Some(Time(at(1))), Some(Time(at(7))))
    );
    // By a failure (failFast).
    let wf = running(diamond().build());
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .active("c", at(1))
        .build();
    let failed = plan(&wf, &jobs, at(5));
    assert_eq!(times(&failed, "c"), (Some(Time(at(1))), Some(Time(at(5)))));
}

/// `workflow` (a diamond) running, its `a` succeeded, `b` failed with exit code 2 and `c`
/// running since 1 s.
fn b_failed_while_c_runs(
    workflow: crate::testing::WorkFlowBuilder,
) -> (WorkFlow, Vec<ObservedJob>) {
    let wf = running(workflow.build());
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .active("c", at(1))
        .build();
    (wf, jobs)
}

#[test]
fn a_stopped_steps_kept_job_keeps_it_stopped_and_a_retry_runs_it_again() {
    let spec = || diamond().exit_step("notify", &[]);
    let (wf, jobs) = b_failed_while_c_runs(spec());
    let first = plan(&wf, &jobs, at(2));
    assert_eq!(
        deletes(&first),
        [(job_name(&wf, "c").as_str(), Out::WorkflowFailed)]
    );
    let stopped_c = (
        "c",
        StepPhase::Failed,
        Some(REASON_STOPPED),
        Some("the workflow failed while it ran"),
        None,
    );
    assert_eq!(step_entries(&first)[1], stopped_c);
    assert_eq!(times(&first, "c").1, Some(Time(at(2))));
    let wf = written(wf, &first);
    // c's Job still stopping, by the deadline it was given: left alone.
    let mut stopping = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .active("c", at(1))
        .stopped()
        .active("notify", at(2))
        .build();
    stopping[2].active_deadline_seconds = Some(1);
    let meanwhile = plan(&wf, &stopping, at(3));
    assert!(meanwhile.actions.is_empty(), "{:?}", meanwhile.actions);
    assert_eq!(meanwhile.status, None);
    // c's Job is kept, stopped (its pod killed: the Job failed), while notify runs.
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .failed("c", "BackoffLimitExceeded", "")
        .ran(at(1), at(4))
        .stopped()
        .active("notify", at(2))
        .build();
    let second = plan(&wf, &jobs, at(9));
    assert!(second.actions.is_empty(), "{:?}", second.actions);
    assert_eq!(second.status, None, "c reads as it did when it was stopped");
    // notify ends: the workflow fails for b alone, c as stopped then.
    let wf = written(wf, &second);
    let mut jobs = jobs;
    jobs.last_mut().unwrap().state = JobState::Succeeded;
    let ended = plan(&wf, &jobs, at(10));
    assert_eq!(phase(&ended), Some(Phase::Failed));
    assert_eq!(
        status(&ended).message.as_deref(),
        Some("step b failed: exit code 2")
    );
    assert_eq!(step_entries(&ended)[1], stopped_c);
    assert_eq!(times(&ended, "c").1, Some(Time(at(2))));
    // A retry runs b and c again at once, c's old pod still stopping.
    let wf = written(wf, &ended);
    let wf = WorkFlow {
        spec: spec().retry(1).build().spec,
        ..wf
    };
    jobs[2].state = JobState::Active { since: at(1) };
    let retried = plan(&wf, &jobs, at(11));
    assert_eq!(creates(&retried), ["b", "c"]);
}

#[test]
fn a_step_stopped_by_a_failure_stays_stopped_while_the_exit_steps_run() {
    let spec = || diamond().exit_step("notify", &[]);
    let (wf, jobs) = b_failed_while_c_runs(spec());
    let first = plan(&wf, &jobs, at(2));
    assert_eq!(exit_creates(&first).len(), 1, "notify starts");
    let wf = written(wf, &first);
    // c's Job is gone (a queued Job has no pod to keep) while notify runs.
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .active("notify", at(2))
        .build();
    let second = plan(&wf, &jobs, at(3));
    assert!(
        creates(&second).is_empty(),
        "nothing starts again once the steps ended: {:?}",
        creates(&second)
    );
}

#[test]
fn retry_reruns_only_the_steps_that_did_not_succeed_in_jobs_of_new_names() {
    let wf = running(diamond().fail_fast(false).build());
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("b", 2, "Error", "")
        .succeeded("c")
        .build();
    let failed = plan(&wf, &jobs, at(5));
    assert_eq!(phase(&failed), Some(Phase::Failed));
    let wf = written(wf, &failed);
    let wf = WorkFlow {
        spec: diamond().fail_fast(false).retry(1).build().spec,
        ..wf
    };
    let retried = plan(&wf, &jobs, at(6));
    assert_eq!(reasons(&retried), ["Retried", "StepsStarted"]);
    assert_eq!(creates(&retried), ["b"]);
    assert!(
        deletes(&retried).is_empty(),
        "the succeeded steps' Jobs stay"
    );
    let Action::CreateJob {
        job_name: new_name,
        retry,
        ..
    } = &retried.actions[0]
    else {
        panic!("{:?}", retried.actions)
    };
    assert_eq!(*retry, 1);
    assert_ne!(*new_name, job_name(&wf, "b"), "a Job name is never reused");
    let st = status(&retried);
    assert_eq!(
        (st.workflow_status, st.retry),
        (Some(Phase::Started), Some(1))
    );
    assert_eq!(st.executed, ["a", "c"]);
    assert_eq!(st.message, None);
    // The retried step succeeds; `d` follows, in retry 1 too.
    let wf = written(wf, &retried);
    let mut jobs = jobs;
    jobs.extend(Jobs::of(&wf).retry(1).succeeded("b").build());
    let next = plan(&wf, &jobs, at(7));
    assert_eq!(creates(&next), ["d"]);
    let wf = written(wf, &next);
    jobs.extend(Jobs::of(&wf).retry(1).succeeded("d").build());
    let done = plan(&wf, &jobs, at(8));
    assert_eq!(phase(&done), Some(Phase::Completed));
    // Planning again changes nothing: the retry is not started twice.
    let wf = written(wf, &done);
    assert_eq!(plan(&wf, &jobs, at(9)).status, None);
}

#[test]
fn a_retry_of_a_completed_workflow_runs_nothing() {
    let wf = running(WorkFlow::test("w").step("a", &[]).build());
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let wf = written(wf.clone(), &plan(&wf, &jobs, at(1)));
    let wf = WorkFlow {
        spec: WorkFlow::test("w").step("a", &[]).retry(1).build().spec,
        ..wf
    };
    let again = plan(&wf, &jobs, at(2));
    assert!(again.actions.is_empty() && again.events.is_empty());
}

#[test]
fn exit_steps_run_after_success_and_after_failure_told_how_it_ended() {
    let wf = |b: crate::testing::WorkFlowBuilder| {
        running(
            b.step("a", &[])
                .step("b", &[])
                .exit_step("notify", &[])
                .exit_step("last", &["notify"])
                .build(),
        )
    };
    // After success.
    let ok = wf(WorkFlow::test("ok"));
    let jobs = Jobs::of(&ok).succeeded("a").succeeded("b").build();
    let plan1 = plan(&ok, &jobs, at(1));
    let completed = ExitEnv {
        status: Phase::Completed,
        failed_steps: vec![],
        failures: "null".into(),
    };
    assert_eq!(exit_creates(&plan1), [("notify", &completed)]);
    assert_eq!(phase(&plan1), Some(Phase::Started));
    let ok = written(ok, &plan1);
    let jobs2 = Jobs::of(&ok)
        .succeeded("a")
        .succeeded("b")
        .succeeded("notify")
        .build();
    let plan2 = plan(&ok, &jobs2, at(2));
    assert_eq!(exit_creates(&plan2), [("last", &completed)]);
    assert!(plan2.events.is_empty(), "ExitStepsStarted only once");
    let ok = written(ok, &plan2);
    let jobs3 = Jobs::of(&ok)
        .succeeded("a")
        .succeeded("b")
        .succeeded("notify")
        .succeeded("last")
        .build();
    let plan3 = plan(&ok, &jobs3, at(3));
    assert_eq!(reasons(&plan3), ["AllStepsSucceeded"]);
    // The message counts the exit steps as the progress does.
    assert_eq!(status(&plan3).progress.as_deref(), Some("4/4"));
    assert_eq!(
        status(&plan3).message.as_deref(),
        Some("2 steps and 2 exit steps succeeded")
    );
    assert_eq!(
        plan3.events[0].message,
        "Started -> Completed: 2 steps and 2 exit steps succeeded"
    );

    // After failure: the exit steps learn which step failed; the workflow stays failed
    // even though they succeed.
    let bad = wf(WorkFlow::test("bad"));
    let jobs = Jobs::of(&bad)
        .exited("a", 3, "Error", "")
        .active("b", at(0))
        .build();
    let plan1 = plan(&bad, &jobs, at(1));
    let [("notify", exit)] = exit_creates(&plan1)[..] else {
        panic!("{:?}", exit_creates(&plan1));
    };
    assert_eq!(
        (exit.status, &exit.failed_steps[..]),
        (Phase::Failed, &["a".to_string()][..])
    );
    // Argo's `{{workflow.failures}}` from the pass that saw `a` fail, before its status entry
    // was written.
    let failures: serde_json::Value = serde_json::from_str(&exit.failures).unwrap();
    assert_eq!(failures[0]["displayName"], "a");
    assert_eq!(failures[0]["message"], "a: Error (exit code 3)");
    assert_eq!(failures[0]["templateName"], "a");
    assert_eq!(failures[0]["podName"], job_name(&bad, "a").as_str());
    assert_eq!(
        deletes(&plan1),
        [(job_name(&bad, "b").as_str(), Out::WorkflowFailed)]
    );
    let bad = written(bad, &plan1);
    let jobs = Jobs::of(&bad)
        .exited("a", 3, "Error", "")
        .succeeded("notify")
        .succeeded("last")
        .build();
    let end = plan(&bad, &jobs, at(2));
    assert_eq!(reasons(&end), ["StepFailed"]);
    assert_eq!(
        status(&end).message.as_deref(),
        Some("step a failed: exit code 3")
    );
}

#[test]
fn a_suspended_workflow_whose_steps_ended_waits_to_run_its_exit_steps() {
    let build = |suspend| {
        WorkFlow::test("w")
            .step("a", &[])
            .exit_step("notify", &[])
            .suspend(suspend)
            .build()
    };
    let wf = running(build(false));
    let wf = WorkFlow {
        spec: build(true).spec,
        ..wf
    };
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let held = plan(&wf, &jobs, at(1));
    assert!(creates(&held).is_empty());
    assert_eq!(
        phase(&held),
        Some(Phase::Suspended),
        "not ended: the exit step has not run"
    );
    let wf = written(wf, &held);
    let wf = WorkFlow {
        spec: build(false).spec,
        ..wf
    };
    let resumed = plan(&wf, &jobs, at(2));
    assert_eq!(creates(&resumed), ["notify"]);
    assert_eq!(reasons(&resumed), ["Resumed", "ExitStepsStarted"]);
}

#[test]
fn a_failing_exit_step_fails_a_workflow_whose_steps_succeeded() {
    let wf = running(
        WorkFlow::test("w")
            .step("a", &[])
            .exit_step("notify", &[])
            .exit_step("after", &["notify"])
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .exited("notify", 1, "Error", "")
        .build();
    let end = plan(&wf, &jobs, at(1));
    assert!(
        creates(&end).is_empty(),
        "an exit step after a failed one does not run"
    );
    assert_eq!(phase(&end), Some(Phase::Failed));
    assert_eq!(
        status(&end).message.as_deref(),
        Some("exit step notify failed: exit code 1")
    );
}

#[test]
fn a_retry_runs_the_exit_steps_again() {
    let build = |retry| {
        WorkFlow::test("w")
            .step("a", &[])
            .exit_step("notify", &[])
            .retry(retry)
            .build()
    };
    let wf = running(build(0));
    let jobs = Jobs::of(&wf)
        .exited("a", 1, "Error", "")
        .succeeded("notify")
        .build();
    let wf = written(wf.clone(), &plan(&wf, &jobs, at(1)));
    assert_eq!(
        wf.status.as_ref().unwrap().workflow_status,
        Some(Phase::Failed)
    );
    let wf = WorkFlow {
        spec: build(1).spec,
        ..wf
    };
    let retried = plan(&wf, &jobs, at(2));
    assert_eq!(creates(&retried), ["a"]);
    let wf = written(wf, &retried);
    let mut jobs = jobs;
    jobs.extend(Jobs::of(&wf).retry(1).succeeded("a").build());
    let exit = plan(&wf, &jobs, at(3));
    let completed = ExitEnv {
        status: Phase::Completed,
        failed_steps: vec![],
        failures: "null".into(),
    };
    assert_eq!(exit_creates(&exit), [("notify", &completed)]);
}

#[rstest::rstest]
#[case::depends_on_a_step(&["a"], "exit step \"notify\" depends on step \"a\": exit steps run after every step, and may depend only on other exit steps")]
#[case::unknown(&["nope"], "onExit: step \"notify\" depends on unknown step \"nope\"")]
fn an_exit_step_that_names_a_step_is_refused_naming_both(#[case] deps: &[&str], #[case] why: &str) {
    let wf = WorkFlow::test("w")
        .step("a", &[])
        .exit_step("notify", deps)
        .build();
    let first = plan(&wf, &[], at(0));
    assert!(first.actions.is_empty());
    assert_eq!(phase(&first), Some(Phase::Failed));
    assert_eq!(
        status(&first).message.as_deref(),
        Some(format!("invalid workflow: {why}").as_str())
    );
}

proptest! {

    /// Any sequence of run-control edits (suspend, resume, stop, terminate, retry) and Job
    /// outcomes makes only legal transitions (the planner would panic otherwise), never
    /// creates a Job that exists, and ends every workflow: nothing waits forever.
    #[test]
    fn run_control_in_any_order_is_legal_and_always_ends(
        deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 1..8),
        exits in 0usize..3,
        ops in proptest::collection::vec((0u8..8, any::<prop::sample::Index>()), 1..60),
    ) {
        let mut builder = WorkFlow::test("rc").fail_fast(false);
        for (i, ds) in deps.iter().enumerate() {
            let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            builder = builder.step(&format!("s{i}"), &refs);
        }
        for e in 0..exits {
            builder = builder.exit_step(&format!("e{e}"), &[]);
        }
        let mut wf = builder.build();
        let mut jobs: Vec<ObservedJob> = Vec::new();
        let mut tick = 0;
        let mut step = |wf: &mut WorkFlow, jobs: &mut Vec<ObservedJob>| {
            tick += 1;
            let plan = plan(wf, jobs, at(tick));
            apply(jobs, wf, &plan, at(tick));
            *wf = written(wf.clone(), &plan);
        };
        for (op, pick) in ops {
            step(&mut wf, &mut jobs);
            let running: Vec<usize> = jobs.iter().enumerate()
                .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                .map(|(i, _)| i)
                .collect();
            let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
            match op {
                0 => wf.spec.suspend = true,
                1 => wf.spec.suspend = false,
                2 => wf.spec.shutdown = Some(Shutdown::Stop),
                3 => wf.spec.shutdown = Some(Shutdown::Terminate),
                4 if phase == Some(Phase::Failed) => {
                    wf.spec.retry += 1;
                    wf.spec.shutdown = None;
                }
                5 | 6 if !running.is_empty() => {
                    let r = running[pick.index(running.len())];
                    jobs[r].state = if op == 5 {
                        JobState::Succeeded
                    } else {
                        JobState::Failed { reason: "Error".into(), message: String::new(), exit_code: Some(1) }
                    };
                }
                _ => {}
            }
        }
        // Let it end: resume, and finish whatever runs, successfully.
        wf.spec.suspend = false;
        for _ in 0..100 {
            step(&mut wf, &mut jobs);
            let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
            if phase.is_some_and(Phase::is_terminal) {
                break;
            }
            for job in jobs.iter_mut().filter(|j| matches!(j.state, JobState::Active { .. })) {
                job.state = JobState::Succeeded;
            }
        }
        let phase = wf.status.as_ref().and_then(|s| s.workflow_status);
        prop_assert!(phase.is_some_and(Phase::is_terminal), "never ended: {:?}", wf.status);
    }
    #[test]
    fn random_workflows_run_each_step_once_after_its_dependencies_to_completion(
        deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 1..25),
        parallelism in proptest::option::of(1i32..4),
        finish_order in proptest::collection::vec(any::<prop::sample::Index>(), 200),
    ) {
        let mut builder = WorkFlow::test("p");
        for (i, ds) in deps.iter().enumerate() {
            let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            builder = builder.step(&format!("s{i}"), &refs);
        }
        if let Some(p) = parallelism {
            builder = builder.parallelism(p);
        }
        let mut wf = builder.build();
        let mut jobs: Vec<ObservedJob> = Vec::new();
        let mut finished: Vec<String> = Vec::new();
        let mut picks = finish_order.iter().cycle();
        for tick in 0..500 {
            let now = at(tick);
            let plan = plan(&wf, &jobs, now);
            apply(&mut jobs, &wf, &plan, now);
            wf = written(wf, &plan);
            let status = wf.status.as_ref().unwrap();
            if status.workflow_status == Some(Phase::Completed) {
                break;
            }
            prop_assert_eq!(status.workflow_status, Some(Phase::Started));
            let running: Vec<usize> = jobs.iter().enumerate()
                .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                .map(|(i, _)| i)
                .collect();
            if let Some(p) = parallelism {
                prop_assert!(running.len() <= p as usize, "{} running > {}", running.len(), p);
            }
            prop_assert!(!running.is_empty(), "stalled at {:?}", status);
            // Every running step's dependencies finished before it started.
            for &r in &running {
                let step = wf.spec.containers.iter().find(|s| s.step_name == jobs[r].step).unwrap();
                for d in &step.depends_on {
                    prop_assert!(finished.contains(d), "{} started before {}", step.step_name, d);
                }
            }
            let r = running[picks.next().unwrap().index(running.len())];
            jobs[r].state = JobState::Succeeded;
            finished.push(jobs[r].step.clone());
        }
        let status = wf.status.as_ref().unwrap();
        prop_assert_eq!(status.workflow_status, Some(Phase::Completed));
        prop_assert_eq!(jobs.len(), deps.len(), "one Job per step");
        prop_assert_eq!(status.progress.clone(), Some(format!("{0}/{0}", deps.len())));
    }

    #[test]
    fn random_failures_end_failed_without_running_dependents_of_the_failed_step(
        deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 2..20),
        fail_fast in any::<bool>(),
        outcomes in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4), 200),
    ) {
        let mut builder = WorkFlow::test("f").fail_fast(fail_fast);
        for (i, ds) in deps.iter().enumerate() {
            let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            builder = builder.step(&format!("s{i}"), &refs);
        }
        let mut wf = builder.build();
        let mut jobs: Vec<ObservedJob> = Vec::new();
        let mut failed: Vec<String> = Vec::new();
        let mut outcomes = outcomes.iter().cycle();
        for tick in 0..500 {
            let now = at(tick);
            let plan = plan(&wf, &jobs, now);
            // No step whose dependency failed is ever started.
            for action in &plan.actions {
                if let Action::CreateJob { step, .. } = action {
                    let spec = wf.spec.containers.iter().find(|s| s.step_name == *step).unwrap();
                    prop_assert!(spec.depends_on.iter().all(|d| !failed.contains(d)), "{} started after a failed dependency", step);
                    prop_assert!(!fail_fast || failed.is_empty(), "{} started after a failure with failFast", step);
                }
            }
            apply(&mut jobs, &wf, &plan, now);
            wf = written(wf, &plan);
            let phase = wf.status.as_ref().unwrap().workflow_status.unwrap();
            if phase.is_terminal() {
                break;
            }
            let running: Vec<usize> = jobs.iter().enumerate()
                .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                .map(|(i, _)| i)
                .collect();
            prop_assert!(!running.is_empty(), "stalled in {}", phase);
            let (pick, outcome) = outcomes.next().unwrap();
            let r = running[pick.index(running.len())];
            if *outcome == 0 {
                jobs[r].state = JobState::Failed { reason: "BackoffLimitExceeded".into(), message: String::new(), exit_code: None };
                failed.push(jobs[r].step.clone());
            } else {
                jobs[r].state = JobState::Succeeded;
            }
        }
        let status = wf.status.as_ref().unwrap();
        let want = if failed.is_empty() { Phase::Completed } else { Phase::Failed };
        prop_assert_eq!(status.workflow_status, Some(want));
        // A failed workflow leaves nothing running.
        prop_assert!(jobs.iter().all(|j| !matches!(j.state, JobState::Active { .. })), "{:?}", jobs);
        if let Some(first) = failed.first().filter(|_| fail_fast) {
            let prefix = format!("step {first} failed");
            prop_assert!(status.message.as_deref().unwrap().starts_with(&prefix));
        }
    }
}

#[test]
fn a_gate_holds_back_the_jobs_it_does_not_admit_their_steps_queued_not_started() {
    let wf = WorkFlow::test("w").step("a", &[]).step("b", &[]).build();
    let compiled = Compiled::new(&wf.spec);
    let open = plan_compiled(&wf, &compiled, &[], at(0));
    assert_eq!(creates(&open), vec!["a", "b"]);
    let gate = Gate::admitting([job_name(&wf, "a")], "waiting: 1 of 1".into());
    let plan = plan_gated(&wf, &compiled, &[], at(0), &gate);
    assert_eq!(creates(&plan), vec!["a"]);
    let status = status(&plan);
    assert_eq!(status.started, vec!["a".to_string()]);
    let b = status.steps.iter().find(|s| s.name == "b").unwrap();
    assert_eq!(b.phase, StepPhase::Queued);
    assert_eq!(b.message.as_deref(), Some("waiting: 1 of 1"));
    assert_eq!(b.job, None);
    // The workflow is under way either way: the same moves along the lifecycle.
    assert_eq!(plan.events, open.events);
    assert_eq!(phase(&plan), Some(Phase::Started));
}

#[test]
fn a_step_that_fans_out_is_queued_while_the_gate_holds_back_all_its_items() {
    let wf = WorkFlow::test("w").step("s", &[]).with_sequence(3).build();
    let compiled = Compiled::new(&wf.spec);
    let gate = Gate::admitting([], "waiting: 2 of 2".into());
    let plan = plan_gated(&wf, &compiled, &[], at(0), &gate);
    assert!(creates(&plan).is_empty(), "{:?}", plan.actions);
    let status = status(&plan);
    assert!(status.started.is_empty(), "{:?}", status.started);
    let s = status.steps.iter().find(|s| s.name == "s").unwrap();
    assert_eq!(s.phase, StepPhase::Queued);
    assert_eq!(s.message.as_deref(), Some("waiting: 2 of 2"));
    let items = s.items.as_ref().expect("its items counted");
    assert_eq!((items.total, items.running), (3, 0));
}

#[test]
fn a_completed_workflow_says_how_many_steps_succeeded_and_were_skipped_as_its_progress_counts_them()
{
    let wf = running(
        WorkFlow::test("w")
            .step("check", &[])
            .step("deploy", &["check"])
            .when(r#"steps.check.outputs.ok == "yes""#)
            .step("alert", &["check"])
            .when(r#"steps.check.outputs.ok != "yes""#)
            .step("page", &["alert"])
            .when(r#"steps.check.outputs.ok != "yes""#)
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .succeeded("check")
        .outputs(Ok(&[("ok", "yes")]))
        .succeeded("deploy")
        .build();
    let done = plan(&wf, &jobs, at(2));
    assert_eq!(phase(&done), Some(Phase::Completed));
    assert_eq!(status(&done).progress.as_deref(), Some("2/4"));
    assert_eq!(
        status(&done).message.as_deref(),
        Some("2 steps succeeded, 2 skipped")
    );

    let one = running(WorkFlow::test("one").step("a", &[]).build());
    let jobs = Jobs::of(&one).succeeded("a").build();
    let done = plan(&one, &jobs, at(1));
    assert_eq!(status(&done).progress.as_deref(), Some("1/1"));
    assert_eq!(status(&done).message.as_deref(), Some("1 step succeeded"));
}

#[test]
fn the_summary_is_the_first_line_of_the_message_cut_to_120_characters() {
    assert_eq!(
        summary("step a failed: exit code 1"),
        "step a failed: exit code 1"
    );
    assert_eq!(summary("first line\nsecond line"), "first line");
    let long = format!("step a failed: {}", "x".repeat(300));
    let short = summary(&long);
    assert_eq!(short.chars().count(), SUMMARY_CHARS);
    assert!(short.starts_with("step a failed: xxx") && short.ends_with("..."));
    let wide = "é".repeat(200);
    assert_eq!(summary(&wide).chars().count(), SUMMARY_CHARS);
}

#[test]
fn a_long_failure_message_is_summarised_for_the_message_column_and_kept_whole() {
    let wf = running(WorkFlow::test("w").step("a", &[]).build());
    let why = format!(
        "{}\nand a second line",
        "no space left on device ".repeat(10)
    );
    let jobs = Jobs::of(&wf).exited("a", 1, "Error", &why).build();
    let failed = plan(&wf, &jobs, at(1));
    assert_eq!(phase(&failed), Some(Phase::Failed));
    let status = status(&failed);
    let message = status.message.as_deref().unwrap();
    assert!(message.contains("and a second line"), "{message}");
    let summary = status.summary.as_deref().unwrap();
    assert!(summary.chars().count() <= SUMMARY_CHARS, "{summary}");
    assert!(
        summary.starts_with("step a failed: exit code 1"),
        "{summary}"
    );
    assert!(!summary.contains('\n'), "{summary}");
}

#[test]
fn a_timed_out_step_says_where_its_limit_came_from() {
    let wf = running(
        WorkFlow::test("w")
            .step("a", &[])
            .timeout(5)
            .step("b", &[])
            .build(),
    );
    let jobs = Jobs::of(&wf).active("a", at(0)).active("b", at(0)).build();
    let failed = plan(&wf, &jobs, at(6));
    assert_eq!(
        status(&failed).message.as_deref(),
        Some(
            "step a timed out: running for 6s, longer than its timeout of 5s (the step's timeout; -1 for none)"
        )
    );
    assert_eq!(
        failed.events[0].message,
        "Started -> Failed: step a timed out: running for 6s, longer than its timeout of 5s (the step's timeout; -1 for none)"
    );
    let jobs = Jobs::of(&wf).succeeded("a").active("b", at(0)).build();
    let failed = plan(&wf, &jobs, at(61));
    assert_eq!(
        status(&failed).message.as_deref(),
        Some(
            "step b timed out: running for 61s, longer than its timeout of 60s (spec.maxStepTimeout, default 60; -1 for none)"
        )
    );
}
