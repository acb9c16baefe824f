//! The planner with suspend steps: one waits (no timeout, the next step held) until its Job
//! is resumed; one with a `duration` is resumed at its Job's creation plus the duration, the
//! timer set for it meanwhile.

use super::data_tests::{at, entry, running, written};
use super::*;
use crate::crd::SuspendStep;
use crate::testing::{Jobs, creates};

/// build -> approve (a suspend step, with `duration` seconds if any) -> release.
fn gate(duration: Option<&str>) -> WorkFlow {
    let mut wf = WorkFlow::test("gate")
        .step("build", &[])
        .step("approve", &["build"])
        .step("release", &["approve"])
        .build();
    wf.spec.containers[1].image = String::new();
    wf.spec.containers[1].command = None;
    wf.spec.containers[1].suspend = Some(Box::new(SuspendStep {
        duration: duration.map(str::to_string),
    }));
    running(wf)
}

#[test]
fn a_suspend_step_waits_without_a_timeout_and_says_how_to_resume_it() {
    let wf = gate(None);
    let jobs = Jobs::of(&wf).succeeded("build").build();
    let started = plan(&wf, &jobs, at(1));
    assert_eq!(creates(&started), ["approve"]);
    let wf = written(wf, &started);
    // A day later it still waits: nothing times it out, nothing else starts.
    let mut jobs = Jobs::of(&wf)
        .succeeded("build")
        .pending("approve", at(1))
        .build();
    jobs[1].suspended = true;
    let waiting = plan(&wf, &jobs, at(86_400));
    assert!(creates(&waiting).is_empty(), "{:?}", waiting.actions);
    assert!(waiting.actions.is_empty(), "{:?}", waiting.actions);
    assert_eq!(waiting.next_timeout_at, None);
    assert_eq!(waiting.status, None, "nothing changed while it waits");
    let approve = entry(&started, "approve");
    assert_eq!(approve.phase, StepPhase::Running);
    assert_eq!(approve.reason.as_deref(), Some("Suspended"));
    assert!(
        (approve.message.as_deref().unwrap())
            .contains("`workflow-operator resume -n default gate`"),
        "{approve:?}"
    );
    // Resumed (its Job annotated, read as succeeded): `release` starts.
    let jobs = Jobs::of(&wf)
        .succeeded("build")
        .succeeded("approve")
        .build();
    assert_eq!(creates(&plan(&wf, &jobs, at(86_401))), ["release"]);
}

#[test]
fn a_suspend_duration_resumes_the_step_at_its_job_s_creation_plus_the_duration() {
    let wf = gate(Some("1m"));
    let mut jobs = Jobs::of(&wf)
        .succeeded("build")
        .pending("approve", at(10))
        .build();
    jobs[1].suspended = true;
    let before = plan(&wf, &jobs, at(30));
    assert!(before.actions.is_empty(), "{:?}", before.actions);
    assert_eq!(before.next_timeout_at, Some(at(70)));
    // At (or, after a restart, long past) the deadline: resumed as of the deadline, and the
    // next step starts in the same plan.
    for now in [at(70), at(500)] {
        let after = plan(&wf, &jobs, now);
        let resumed: Vec<_> = (after.actions.iter())
            .filter_map(|a| match a {
                Action::ResumeJob { job_name, at } => Some((job_name.as_str(), *at)),
                _ => None,
            })
            .collect();
        assert_eq!(resumed, [(jobs[1].name.as_str(), at(70))]);
        assert_eq!(creates(&after), ["release"]);
    }
}
