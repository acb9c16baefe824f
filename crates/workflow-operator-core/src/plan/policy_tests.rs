//! The planner with run policies: failures a workflow survives (`continueOn`), what a `when`
//! reads of failed steps and of the workflow's end, and the workflow's deadline
//! (`activeDeadlineSeconds`); interactive steps.

use super::data_tests::{at, entry, running, written};
use super::*;
use crate::crd::CONDITION_FAILED;
use crate::testing::{Jobs, creates};

fn status(plan: &Plan) -> &WorkFlowStatus {
    plan.status.as_ref().expect("the plan changes the status")
}

fn failed_by(plan: &Plan) -> Option<&str> {
    let failed = status(plan)
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_FAILED);
    failed
        .filter(|c| c.status == "True")
        .map(|c| c.reason.as_str())
}

/// lint (allowed to fail) -> report (runs only when lint failed), and -> build.
fn lint_then_report() -> WorkFlow {
    running(
        WorkFlow::test("w")
            .step("lint", &[])
            .continue_on_failed()
            .step("report", &["lint"])
            .when(r#"steps.lint.phase == "Failed""#)
            .step("build", &["lint"])
            .build(),
    )
}

#[test]
fn a_step_allowed_to_fail_shows_failed_and_its_dependents_run() {
    let wf = lint_then_report();
    let jobs = Jobs::of(&wf).exited("lint", 1, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    let mut started = creates(&plan);
    started.sort_unstable();
    assert_eq!(started, ["build", "report"]);
    assert_eq!(entry(&plan, "lint").phase, StepPhase::Failed);
    assert_eq!(entry(&plan, "lint").exit_code, Some(1));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Started));
    assert_eq!(status(&plan).message, None);

    let wf = written(wf, &plan);
    let jobs = Jobs::of(&wf)
        .exited("lint", 1, "Error", "")
        .succeeded("report")
        .succeeded("build")
        .build();
    let done = super::plan(&wf, &jobs, at(2));
    assert_eq!(status(&done).workflow_status, Some(Phase::Completed));
    assert_eq!(
        status(&done).message.as_deref(),
        Some(
            "2 steps succeeded; step lint failed: exit code 1 (continueOn.failed: the workflow went on)"
        )
    );
    assert_eq!(status(&done).progress.as_deref(), Some("2/3"));
    assert_eq!(entry(&done, "lint").phase, StepPhase::Failed);
}

#[test]
fn a_when_may_skip_a_step_because_its_upstream_succeeded_after_all() {
    let wf = lint_then_report();
    let jobs = Jobs::of(&wf).succeeded("lint").outputs(Ok(&[])).build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["build"]);
    assert_eq!(entry(&plan, "report").phase, StepPhase::Skipped);
}

#[test]
fn a_step_not_allowed_to_fail_still_fails_the_workflow() {
    let wf = running(
        WorkFlow::test("w")
            .step("lint", &[])
            .step("build", &["lint"])
            .build(),
    );
    let jobs = Jobs::of(&wf).exited("lint", 1, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(creates(&plan).is_empty());
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));
}

#[test]
fn the_items_of_a_step_allowed_to_fail_go_on_after_one_fails() {
    let wf = running(
        WorkFlow::test("w")
            .step("shard", &[])
            .with_sequence(3)
            .continue_on_failed()
            .step("after", &["shard"])
            .build(),
    );
    let some = Jobs::of(&wf)
        .exited("shard", 2, "Error", "")
        .item(0)
        .build();
    let plan = plan(&wf, &some, at(1));
    assert_eq!(
        creates(&plan),
        ["shard", "shard"],
        "items 1 and 2 still start"
    );
    let wf = written(wf, &plan);
    let all = Jobs::of(&wf)
        .exited("shard", 2, "Error", "")
        .item(0)
        .succeeded("shard")
        .item(1)
        .succeeded("shard")
        .item(2)
        .build();
    let plan = super::plan(&wf, &all, at(2));
    assert_eq!(creates(&plan), ["after"]);
    let shard = entry(&plan, "shard");
    assert_eq!(shard.phase, StepPhase::Failed);
    assert_eq!(shard.message.as_deref(), Some("1 of 3 items failed"));
}

#[test]
fn an_exit_steps_when_reads_failed_steps_the_workflows_end_and_every_step() {
    let wf = running(
        WorkFlow::test("w")
            .step("bad", &[])
            .step("never", &["bad"])
            .exit_step("on-bad", &[])
            .when(r#"workflow.status == "Failed" && steps.bad.phase == "Failed""#)
            .exit_step("any-failed", &[])
            .when(r#"steps.exists(s, steps[s].phase == "Failed")"#)
            .exit_step("never-ran", &[])
            .when(r#"steps.never.phase == "Omitted""#)
            .exit_step("on-success", &[])
            .when(r#"workflow.status == "Completed""#)
            .build(),
    );
    let jobs = Jobs::of(&wf).exited("bad", 3, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["on-bad", "any-failed", "never-ran"]);
    assert_eq!(entry(&plan, "on-success").phase, StepPhase::Skipped);
}

#[test]
fn a_steps_when_may_use_cel_macros_but_not_iterate_over_steps_or_read_the_end() {
    let ok = WorkFlow::test("w")
        .step("a", &[])
        .step("b", &["a"])
        .when(r#"["x", "y"].exists(v, v == steps.a.outputs.key)"#)
        .build();
    assert_eq!(
        status(&plan(&ok, &[], at(0))).workflow_status,
        Some(Phase::Started)
    );
    for (when, says) in [
        (
            r#"steps.all(s, steps[s].phase == "Succeeded")"#,
            "iterates over steps: only an exit step's when may",
        ),
        (
            r#"workflow.status == "Failed""#,
            "names workflow.status, which only an exit step's when may read",
        ),
    ] {
        let wf = WorkFlow::test("w")
            .step("a", &[])
            .step("b", &["a"])
            .when(when)
            .build();
        let message = status(&plan(&wf, &[], at(0))).message.clone().unwrap();
        assert!(message.contains(says), "{when}: {message}");
    }
}

fn with_deadline() -> WorkFlow {
    running(
        WorkFlow::test("w")
            .active_deadline_seconds(10)
            .step("slow", &[])
            .timeout(-1)
            .step("after", &["slow"])
            .exit_step("cleanup", &[])
            .build(),
    )
}

#[test]
fn a_workflow_records_when_it_started_and_wakes_at_its_deadline() {
    let wf = with_deadline();
    let started = wf.status.as_ref().and_then(|s| s.started_at.clone());
    assert_eq!(started.map(|t| t.0), Some(at(0)));
    let jobs = Jobs::of(&wf).active("slow", at(0)).build();
    let plan = plan(&wf, &jobs, at(5));
    assert_eq!(plan.next_timeout_at, Some(at(10)));
    assert_eq!(next_timeout_at(&wf, &jobs), Some(at(10)));
}

#[test]
fn past_its_deadline_a_workflow_stops_its_steps_runs_its_exit_steps_and_fails() {
    let wf = with_deadline();
    let jobs = Jobs::of(&wf).active("slow", at(0)).build();
    let plan = plan(&wf, &jobs, at(10));
    let deleted: Vec<&str> = (plan.actions.iter())
        .filter_map(|a| match a {
            Action::StopJob { job_name, .. } => Some(job_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [jobs[0].name.as_str()]);
    assert_eq!(creates(&plan), ["cleanup"]);

    let wf = written(wf, &plan);
    let jobs = Jobs::of(&wf).succeeded("cleanup").build();
    let plan = super::plan(&wf, &jobs, at(12));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));
    assert_eq!(failed_by(&plan), Some("DeadlineExceeded"));
    let message = status(&plan).message.clone().unwrap();
    assert!(
        message.starts_with("the workflow ran past its activeDeadlineSeconds of 10s"),
        "{message}"
    );
}

#[test]
fn a_workflow_that_ends_in_time_is_not_failed_by_its_deadline() {
    let wf = with_deadline();
    let jobs = Jobs::of(&wf)
        .succeeded("slow")
        .succeeded("after")
        .succeeded("cleanup")
        .build();
    let plan = plan(&wf, &jobs, at(30));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Completed));
}

fn created_jobs(plan: &Plan) -> Vec<(&str, u32)> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob {
                job_name, attempt, ..
            } => Some((job_name.as_str(), *attempt)),
            _ => None,
        })
        .collect()
}

fn fetch(strategy: &str) -> WorkFlow {
    running(
        WorkFlow::test("w")
            .step("fetch", &[])
            .retry_strategy(strategy)
            .step("load", &["fetch"])
            .build(),
    )
}

#[test]
fn a_failed_attempt_waits_its_back_off_then_runs_again_in_a_job_of_its_own() {
    let wf = fetch("{limit: 2, backoff: {duration: 5s, factor: 2}}");
    let first = Jobs::of(&wf)
        .exited("fetch", 1, "Error", "")
        .ran(at(0), at(10))
        .build();
    let waiting = plan(&wf, &first, at(12));
    assert!(created_jobs(&waiting).is_empty());
    assert_eq!(waiting.next_timeout_at, Some(at(15)));
    let entry_ = entry(&waiting, "fetch");
    assert_eq!(entry_.phase, StepPhase::Running);
    assert_eq!(entry_.reason.as_deref(), Some(REASON_BACKING_OFF));
    assert_eq!(
        entry_.message.as_deref(),
        Some("step fetch failed: exit code 1; attempt 1 at 2026-01-01T00:00:15Z (back-off 5s)")
    );

    let wf = written(wf, &waiting);
    let due = plan(&wf, &first, at(15));
    let second_name = names::attempt_job_name("w", "fetch", &names::run_id(&wf.spec), 0, 1);
    assert_eq!(created_jobs(&due), [(second_name.as_str(), 1)]);
    assert_ne!(second_name, first[0].name);

    // The second attempt failed too: the wait doubles.
    let two = Jobs::of(&wf)
        .exited("fetch", 1, "Error", "")
        .ran(at(0), at(10))
        .exited("fetch", 1, "Error", "")
        .attempt(1)
        .ran(at(15), at(20))
        .build();
    let waiting = plan(&wf, &two, at(21));
    assert_eq!(waiting.next_timeout_at, Some(at(30)));
    let due = plan(&wf, &two, at(30));
    assert_eq!(created_jobs(&due).first().map(|(_, a)| *a), Some(2));
}

#[test]
fn after_its_last_attempt_a_step_fails_saying_how_many_it_had() {
    let wf = fetch("{limit: 1}");
    let jobs = Jobs::of(&wf)
        .exited("fetch", 1, "Error", "")
        .ran(at(0), at(1))
        .exited("fetch", 2, "Error", "")
        .attempt(1)
        .ran(at(1), at(2))
        .build();
    let plan = plan(&wf, &jobs, at(3));
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some("step fetch failed: exit code 2: after 2 attempts (retryStrategy.limit 1)")
    );
    assert_eq!(
        entry(&plan, "fetch").job.as_deref(),
        Some(jobs[1].name.as_str())
    );
}

#[test]
fn on_error_does_not_retry_an_exit_code_nor_on_failure_a_timeout() {
    let wf = fetch("{limit: 3, retryPolicy: OnError}");
    let jobs = Jobs::of(&wf)
        .exited("fetch", 1, "Error", "")
        .ran(at(0), at(1))
        .build();
    let plan = plan(&wf, &jobs, at(2));
    assert_eq!(
        status(&plan).message.as_deref(),
        Some(
            "step fetch failed: exit code 1: not retried: retryPolicy OnError retries only a pod that could not run"
        )
    );
    let oom = Jobs::of(&wf)
        .exited("fetch", 137, "OOMKilled", "")
        .ran(at(0), at(1))
        .build();
    assert_eq!(created_jobs(&super::plan(&wf, &oom, at(2))).len(), 1);

    let wf = fetch("{limit: 3, retryPolicy: OnFailure}");
    let mut timed_out = Jobs::of(&wf)
        .exited("fetch", 1, "Error", "")
        .ran(at(0), at(60))
        .build();
    timed_out[0].state = JobState::TimedOut {
        why: "running for 60s, longer than its timeout of 60s".into(),
    };
    let plan = super::plan(&wf, &timed_out, at(61));
    assert!(created_jobs(&plan).is_empty());
    let message = status(&plan).message.clone().unwrap();
    assert!(
        message.contains("not retried: retryPolicy OnFailure"),
        "{message}"
    );
}

#[test]
fn a_bad_retry_strategy_or_retries_beside_it_makes_the_workflow_invalid() {
    for (strategy, says) in [
        (
            "{limit: 1, backoff: {duration: 1s, factor: 0.5}}",
            "factor 0.5 is below 1",
        ),
        (
            "{limit: 1, expression: 'lastRetry.exitCode =='}",
            "does not compile",
        ),
    ] {
        let wf = WorkFlow::test("w")
            .step("a", &[])
            .retry_strategy(strategy)
            .build();
        let message = status(&plan(&wf, &[], at(0))).message.clone().unwrap();
        assert!(message.contains(says), "{strategy}: {message}");
    }
    let both = WorkFlow::test("w")
        .step("a", &[])
        .retries(2)
        .retry_strategy("{limit: 2}")
        .build();
    let message = status(&plan(&both, &[], at(0))).message.clone().unwrap();
    assert!(
        message.contains("sets both retries and retryStrategy"),
        "{message}"
    );
    let no_strategy = WorkFlow::test("w")
        .step("a", &[])
        .command(&["echo", "{{retries}}"])
        .build();
    let message = status(&plan(&no_strategy, &[], at(0)))
        .message
        .clone()
        .unwrap();
    assert!(
        message.contains("{{retries}} is the attempt of a step with a retryStrategy"),
        "{message}"
    );
}

#[test]
fn an_interactive_step_says_so_from_its_create_and_never_times_out() {
    let wf = running(
        WorkFlow::test("w")
            .step("sim", &[])
            .interactive()
            .timeout(1)
            .step("after", &["sim"])
            .build(),
    );
    let sim = entry_of(&wf, "sim");
    assert_eq!(sim.phase, StepPhase::Interactive);
    let message = sim.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("workflow-operator continue -n default w sim"),
        "{message}"
    );
    // Its Job running for an hour, past its timeout, changes nothing: no write, no action.
    let jobs = Jobs::of(&wf).active("sim", at(0)).build();
    let later = plan(&wf, &jobs, at(3600));
    assert_eq!(later.status, None);
    assert!(later.actions.is_empty(), "{:?}", later.actions);
    assert_eq!(next_timeout_at(&wf, &jobs), None);
}

fn entry_of<'w>(workflow: &'w WorkFlow, step: &str) -> &'w StepStatus {
    (workflow.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == step)
        .unwrap_or_else(|| panic!("no entry for {step}"))
}

#[test]
fn an_evicted_or_deleted_pod_is_retried_by_on_error_and_not_by_on_failure() {
    let evicted = |wf: &WorkFlow| {
        Jobs::of(wf)
            .exited("fetch", 143, crate::failure_cause::REASON_EVICTED, "")
            .ran(at(0), at(1))
            .build()
    };
    let deleted = |wf: &WorkFlow| {
        let mut jobs = Jobs::of(wf)
            .exited("fetch", 1, "Error", "")
            .ran(at(0), at(1))
            .build();
        let gone = crate::failure_cause::pod_deleted();
        jobs[0].state = JobState::Failed {
            reason: gone.reason,
            message: gone.message,
            exit_code: gone.exit_code,
        };
        jobs
    };
    for (policy, retried) in [("OnError", true), ("Always", true), ("OnFailure", false)] {
        let wf = fetch(&format!("{{limit: 3, retryPolicy: {policy}}}"));
        for (how, jobs) in [("evicted", evicted(&wf)), ("deleted", deleted(&wf))] {
            let plan = plan(&wf, &jobs, at(2));
            assert_eq!(
                created_jobs(&plan).len(),
                usize::from(retried),
                "{policy}, {how}: {:?}",
                status(&plan).message
            );
        }
    }
}

/// lint with an exit hook (`lint.hooks.exit`, calling `note`), and build after it.
fn lint_with_exit_hook() -> WorkFlow {
    let mut wf = WorkFlow::test("w").step("lint", &[]).build();
    wf.spec = serde_yaml::from_str(
        r#"
templates:
  - {name: note, image: alpine}
containers:
  - {stepName: lint, image: alpine, hooks: {exit: {template: note}}}
  - {stepName: build, image: alpine, dependsOn: [lint]}
"#,
    )
    .unwrap();
    running(wf)
}

/// Jobs of `wf`'s run, as its status names it (its spec is expanded before the run is hashed).
fn jobs_of(wf: &WorkFlow) -> Jobs<'_> {
    let run = wf.status.as_ref().and_then(|s| s.run.as_deref());
    Jobs::of(wf).run(run.expect("a run was planned"))
}

#[test]
fn a_steps_exit_hook_starts_after_its_failure_and_the_workflow_fails_once_it_ended() {
    let wf = lint_with_exit_hook();
    let jobs = jobs_of(&wf).exited("lint", 1, "Error", "").build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["lint.hooks.exit"]);
    assert_eq!(status(&plan).workflow_status, Some(Phase::Started));

    let wf = written(wf, &plan);
    let jobs = jobs_of(&wf)
        .exited("lint", 1, "Error", "")
        .active("lint.hooks.exit", at(1))
        .build();
    let plan = super::plan(&wf, &jobs, at(2));
    assert!(creates(&plan).is_empty(), "started once");
    let phase = plan.status.as_ref().map(|s| s.workflow_status);
    assert!(phase.is_none_or(|p| p == Some(Phase::Started)), "{phase:?}");

    let wf = written(wf, &plan);
    let jobs = jobs_of(&wf)
        .exited("lint", 1, "Error", "")
        .exited("lint.hooks.exit", 2, "Error", "")
        .build();
    let done = super::plan(&wf, &jobs, at(3));
    assert!(creates(&done).is_empty(), "build never runs");
    assert_eq!(status(&done).workflow_status, Some(Phase::Failed));
    let message = status(&done).message.clone().unwrap_or_default();
    assert!(
        message.starts_with("step lint failed: exit code 1"),
        "{message}"
    );
    assert_eq!(entry(&done, "lint.hooks.exit").phase, StepPhase::Failed);
}

#[test]
fn a_steps_exit_hook_runs_after_its_success_before_the_steps_after_it() {
    let wf = lint_with_exit_hook();
    let jobs = jobs_of(&wf).succeeded("lint").build();
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&plan), ["lint.hooks.exit"]);
    let wf = written(wf, &plan);
    let jobs = jobs_of(&wf)
        .succeeded("lint")
        .succeeded("lint.hooks.exit")
        .build();
    assert_eq!(creates(&super::plan(&wf, &jobs, at(2))), ["build"]);
}
