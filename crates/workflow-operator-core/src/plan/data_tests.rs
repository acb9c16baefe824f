//! The planner with data between steps: outputs read, recorded and substituted,
//! missing or malformed ones failing their step, and `when` skipping or running a step. Its
//! helpers serve `plan_fan_out_tests.rs` too.

use super::*;

use crate::testing::Jobs;
use k8s_openapi::jiff::SignedDuration;

pub(super) fn at(seconds: i64) -> Timestamp {
    "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
}

pub(super) fn written(mut workflow: WorkFlow, plan: &Plan) -> WorkFlow {
    if let Some(status) = &plan.status {
        workflow.status = Some(status.clone());
    }
    workflow
}

pub(super) fn running(workflow: WorkFlow) -> WorkFlow {
    let first = plan(&workflow, &[], at(0));
    written(workflow, &first)
}

/// An input a Job is built with: (step, key, value).
type Input = (String, String, String);

/// The steps the plan creates Jobs for, with the inputs each is built with.
fn created(plan: &Plan) -> Vec<(&str, Vec<Input>)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { step, inputs, .. } => Some((
                step.as_str(),
                inputs
                    .iter()
                    .map(|((s, k), v)| (s.clone(), k.clone(), v.clone()))
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

pub(super) fn entry<'p>(plan: &'p Plan, step: &str) -> &'p StepStatus {
    plan.status
        .as_ref()
        .expect("a status")
        .steps
        .iter()
        .find(|s| s.name == step)
        .unwrap_or_else(|| panic!("no entry for {step}"))
}

fn triple(step: &str, key: &str, value: &str) -> Input {
    (step.into(), key.into(), value.into())
}

fn producer_consumer() -> WorkFlow {
    running(
        WorkFlow::test("pc")
            .step("a", &[])
            .step("b", &["a"])
            .command(&["echo", "{{steps.a.outputs.x}}"])
            .build(),
    )
}

#[test]
fn an_output_read_from_the_pod_is_recorded_and_substituted_once_and_for_all() {
    let wf = producer_consumer();
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .outputs(Ok(&[("x", "42")]))
        .build();
    let first = plan(&wf, &jobs, at(1));
    assert_eq!(created(&first), [("b", vec![triple("a", "x", "42")])]);
    let recorded = entry(&first, "a");
    assert_eq!(recorded.phase, StepPhase::Succeeded);
    assert_eq!(recorded.outputs["x"], "42");
    assert_eq!(recorded.job.as_deref(), Some(jobs[0].name.as_str()));

    // Once written, the status holds them: a pass that did not read the pod (a restart with
    // the Job of b not created yet) decides the same.
    let wf = written(wf, &first);
    let unread = Jobs::of(&wf).succeeded("a").build();
    let again = plan(&wf, &unread, at(2));
    assert_eq!(created(&again), [("b", vec![triple("a", "x", "42")])]);
}

#[test]
fn outputs_not_read_yet_hold_the_dependents_and_the_workflow_waits() {
    let wf = producer_consumer();
    let jobs = Jobs::of(&wf).succeeded("a").build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(created(&plan).is_empty(), "{:?}", plan.actions);
    assert!(
        plan.status
            .as_ref()
            .is_none_or(|s| s.workflow_status == Some(Phase::Started)),
        "{:?}",
        plan.status
    );
}

#[test]
fn malformed_outputs_fail_their_step_and_a_missing_one_fails_the_step_naming_it() {
    let wf = producer_consumer();
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .outputs(Err("its outputs line 1 is not key=value: \"oops\""))
        .build();
    let bad = plan(&wf, &jobs, at(1));
    assert_eq!(
        bad.status.as_ref().unwrap().workflow_status,
        Some(Phase::Failed)
    );
    assert_eq!(
        bad.status.as_ref().unwrap().message.as_deref(),
        Some("step a failed: its outputs line 1 is not key=value: \"oops\"")
    );
    assert_eq!(entry(&bad, "a").reason.as_deref(), Some(REASON_BAD_OUTPUTS));
    assert!(created(&bad).is_empty());

    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .outputs(Ok(&[("y", "1")]))
        .build();
    let missing = plan(&wf, &jobs, at(1));
    assert!(created(&missing).is_empty());
    assert_eq!(
        missing.status.as_ref().unwrap().message.as_deref(),
        Some(r#"step b failed: {{steps.a.outputs.x}}: step "a" wrote no output "x""#)
    );
    let b = entry(&missing, "b");
    assert_eq!(
        (b.phase, b.reason.as_deref(), b.job.as_deref()),
        (StepPhase::Failed, Some(REASON_MISSING_OUTPUT), None)
    );
}

fn branches() -> WorkFlow {
    running(
        WorkFlow::test("br")
            .step("check", &[])
            .step("deploy", &["check"])
            .when(r#"steps.check.outputs.ok == "yes""#)
            .step("alert", &["check"])
            .when(r#"steps.check.outputs.ok != "yes""#)
            .step("after-alert", &["alert"])
            .build(),
    )
}

#[test]
fn a_when_runs_one_branch_and_skips_the_other_whose_dependents_then_run() {
    let wf = branches();
    let jobs = Jobs::of(&wf)
        .succeeded("check")
        .outputs(Ok(&[("ok", "yes")]))
        .build();
    let first = plan(&wf, &jobs, at(1));
    let mut steps: Vec<&str> = created(&first).into_iter().map(|(s, _)| s).collect();
    steps.sort_unstable();
    assert_eq!(steps, ["after-alert", "deploy"]);
    let alert = entry(&first, "alert");
    assert_eq!(alert.phase, StepPhase::Skipped);
    assert_eq!(alert.reason.as_deref(), Some(REASON_WHEN_FALSE));
    assert_eq!(
        alert.message.as_deref(),
        Some(r#"when "steps.check.outputs.ok != \"yes\"" is false"#)
    );

    // Both ran: the workflow completes, the skipped step counted as done.
    let wf = written(wf, &first);
    let jobs = Jobs::of(&wf)
        .succeeded("check")
        .succeeded("deploy")
        .succeeded("after-alert")
        .build();
    let done = plan(&wf, &jobs, at(2));
    assert_eq!(
        done.status.as_ref().unwrap().workflow_status,
        Some(Phase::Completed)
    );
}

#[test]
fn naming_an_output_of_a_skipped_step_fails_saying_it_was_skipped() {
    let wf = running(
        WorkFlow::test("w")
            .step("check", &[])
            .step("alert", &["check"])
            .when(r#"steps.check.outputs.ok != "yes""#)
            .step("page", &["alert"])
            .command(&["echo", "{{steps.alert.outputs.who}}"])
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .succeeded("check")
        .outputs(Ok(&[("ok", "yes")]))
        .build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(created(&plan).is_empty());
    assert_eq!(
        plan.status.as_ref().unwrap().message.as_deref(),
        Some(
            r#"step page failed: {{steps.alert.outputs.who}}: step "alert" was skipped (its when was false), so it wrote no outputs"#
        )
    );
    assert_eq!(
        entry(&plan, "page").reason.as_deref(),
        Some(REASON_MISSING_OUTPUT)
    );
}

#[test]
fn a_when_that_fails_to_evaluate_fails_its_step_saying_why() {
    let wf = running(
        WorkFlow::test("w")
            .step("a", &[])
            .step("b", &["a"])
            .when("int(steps.a.outputs.n) > 2")
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .outputs(Ok(&[("n", "many")]))
        .build();
    let plan = plan(&wf, &jobs, at(1));
    assert!(created(&plan).is_empty());
    let message = plan.status.as_ref().unwrap().message.clone().unwrap();
    assert!(
        message.starts_with(r#"step b failed: when "int(steps.a.outputs.n) > 2": "#),
        "{message}"
    );
    assert_eq!(
        entry(&plan, "b").reason.as_deref(),
        Some(REASON_WHEN_FAILED)
    );
}

#[test]
fn a_bad_reference_fails_the_workflow_at_once_as_an_invalid_spec() {
    let wf = WorkFlow::test("w")
        .step("a", &[])
        .step("b", &[])
        .command(&["echo", "{{steps.a.outputs.x}}"])
        .build();
    let plan = plan(&wf, &[], at(0));
    assert!(created(&plan).is_empty());
    let status = plan.status.as_ref().unwrap();
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    assert!(
        status
            .message
            .as_deref()
            .unwrap()
            .starts_with(r#"invalid workflow: step "b": {{steps.a.outputs.x}} names step "a", which does not run before it"#),
        "{:?}",
        status.message
    );
}

/// `a` fails with exit code 3 (the workflow goes on), `ok` succeeds from second 1 to 5, and
/// `b`, after both, names how each ended in its command, `env` or `when` as Argo does.
fn argo_step_fields(command: &[&str], when: Option<&str>) -> (WorkFlow, Vec<ObservedJob>) {
    let mut builder = WorkFlow::test("ended")
        .step("a", &[])
        .continue_on_failed()
        .step("ok", &[])
        .step("b", &["a", "ok"])
        .command(command);
    if let Some(when) = when {
        builder = builder.when(when);
    }
    let wf = running(builder.build());
    let jobs = Jobs::of(&wf)
        .exited("a", 3, "Error", "")
        .succeeded("ok")
        .ran(at(1), at(5))
        .build();
    (wf, jobs)
}

#[test]
fn argos_step_status_exit_code_and_times_are_filled_from_the_jobs_that_ended() {
    let (wf, jobs) = argo_step_fields(
        &[
            "echo",
            "{{steps.a.status}} {{steps.a.exitCode}} {{steps.a.startedAt}}",
            "{{steps['ok'].status}} {{steps.ok.exitCode}}",
            "{{steps.ok.startedAt}}..{{ steps.ok.finishedAt }}",
        ],
        None,
    );
    let first = plan(&wf, &jobs, at(6));
    let started = format!("{:.0}", jobs[0].start_time.unwrap());
    assert_eq!(
        created(&first),
        [(
            "b",
            vec![
                triple("a", "@exitCode", "3"),
                triple("a", "@startedAt", &started),
                triple("a", "@status", "Failed"),
                triple("ok", "@exitCode", "0"),
                triple("ok", "@finishedAt", "2026-01-01T00:00:05Z"),
                triple("ok", "@startedAt", "2026-01-01T00:00:01Z"),
                triple("ok", "@status", "Succeeded"),
            ]
        )]
    );
    // The succeeded step's entry records its end, so a later pass decides the same.
    let recorded = entry(&first, "ok");
    assert_eq!(recorded.phase, StepPhase::Succeeded);
    assert_eq!(
        recorded.finished_at.as_ref().map(|t| t.0),
        Some(at(5)),
        "{recorded:?}"
    );
}

#[test]
fn a_when_reads_argos_status_and_exit_code_and_a_missing_one_fails_the_step_naming_it() {
    for (when, runs) in [
        (
            r#"steps.a.status == "Failed" && steps.a.exitCode == 3"#,
            true,
        ),
        (
            r#"steps.ok.exitCode != 0 || steps.ok.status == "Error""#,
            false,
        ),
        (r#"steps.ok.finishedAt == "2026-01-01T00:00:05Z""#, true),
    ] {
        let (wf, jobs) = argo_step_fields(&["true"], Some(when));
        let plan = plan(&wf, &jobs, at(6));
        assert_eq!(created(&plan).len(), usize::from(runs), "{when}");
    }
    let wf = WorkFlow::test("w")
        .step("a", &[])
        .when("1 == 2")
        .step("b", &["a"])
        .command(&["echo", "{{steps.a.status}} {{steps.a.exitCode}}"])
        .build();
    let plan = plan(&wf, &[], at(0));
    assert!(created(&plan).is_empty(), "{:?}", plan.status);
    assert_eq!(
        entry(&plan, "b").message.as_deref(),
        Some(
            r#"{{steps.a.exitCode}}: step "a" has no exitCode: it was skipped (its when was false)"#
        )
    );
}

/// Argo's exit handler as a `steps` template: after `a` failed, `probe` (writing a result)
/// and `check` (failing, tolerated) run; then `notify` reads `probe`'s result and runs on
/// `check`'s failure, and `cheer`, whose `when` wants its success, is skipped.
fn exit_handler_reading_its_steps() -> WorkFlow {
    running(
        WorkFlow::test("exits")
            .step("a", &[])
            .exit_step("probe", &[])
            .command(&["echo", "ok"])
            .exit_step("check", &[])
            .continue_on_failed()
            .exit_step("notify", &["probe", "check"])
            .when(r#"steps.check.status == "Failed""#)
            .command(&["echo", "{{steps.probe.outputs.result}}"])
            .exit_step("cheer", &["probe", "check"])
            .when(r#"steps.check.status == "Succeeded""#)
            .build(),
    )
}

#[test]
fn an_exit_step_reads_the_exit_steps_before_it_their_outputs_recorded_for_a_restart() {
    let wf = exit_handler_reading_its_steps();
    let jobs = Jobs::of(&wf).exited("a", 1, "Error", "").build();
    let first = plan(&wf, &jobs, at(1));
    let names: Vec<&str> = created(&first).iter().map(|(s, _)| *s).collect();
    assert_eq!(names, ["probe", "check"]);
    let wf = written(wf, &first);
    let jobs = Jobs::of(&wf)
        .exited("a", 1, "Error", "")
        .succeeded("probe")
        .outputs(Ok(&[("result", "ok")]))
        .exited("check", 2, "Error", "")
        .build();
    let second = plan(&wf, &jobs, at(2));
    assert_eq!(
        created(&second),
        [("notify", vec![triple("probe", "result", "ok")])]
    );
    assert_eq!(entry(&second, "cheer").phase, StepPhase::Skipped);
    assert_eq!(entry(&second, "probe").outputs["result"], "ok");
    // A restart whose pass did not read probe's pod decides the same from the status.
    let wf = written(wf, &second);
    let unread = Jobs::of(&wf)
        .exited("a", 1, "Error", "")
        .succeeded("probe")
        .exited("check", 2, "Error", "")
        .build();
    let again = plan(&wf, &unread, at(3));
    assert_eq!(
        created(&again),
        [("notify", vec![triple("probe", "result", "ok")])]
    );
    let ended = Jobs::of(&wf)
        .exited("a", 1, "Error", "")
        .succeeded("probe")
        .exited("check", 2, "Error", "")
        .succeeded("notify")
        .build();
    let last = plan(&written(wf, &again), &ended, at(4));
    let status = last.status.as_ref().unwrap();
    assert_eq!(status.workflow_status, Some(Phase::Failed));
    assert_eq!(status.executed, ["probe", "notify"]);
    assert_eq!(entry(&last, "cheer").phase, StepPhase::Skipped);
    assert_eq!(
        status.message.as_deref(),
        Some("step a failed: exit code 1")
    );
}
