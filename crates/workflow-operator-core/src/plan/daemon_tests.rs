//! The planner with daemon steps: a daemon holds the steps after it until its Job records its
//! pod's IP, then is done while it runs on, its IP given to `{{steps.NAME.ip}}`; the workflow's
//! end stops it, its step staying done; a daemon that failed before it was ready fails.

use super::data_tests::{at, entry, running};
use super::*;
use crate::outputs;
use crate::testing::{Jobs, creates};

/// server (a daemon) -> client, which names the server's IP.
fn served() -> WorkFlow {
    let mut wf = WorkFlow::test("served")
        .step("server", &[])
        .step("client", &["server"])
        .build();
    wf.spec.containers[0].daemon = Some(true);
    wf.spec.containers[1].command = Some(vec![
        "wget".into(),
        "http://{{steps.server.ip}}:8080/".into(),
    ]);
    running(wf)
}

fn phase(plan: &Plan) -> Option<Phase> {
    plan.status.as_ref().and_then(|s| s.workflow_status)
}

fn stops(plan: &Plan) -> Vec<(&str, StopReason)> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::StopJob { job_name, reason } => Some((job_name.as_str(), *reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_daemon_is_done_once_its_ip_is_recorded_and_gives_it_to_the_steps_after_it() {
    let wf = served();
    // Its pod runs, even ready, but its IP is not recorded yet: the client waits.
    let mut jobs = Jobs::of(&wf).pending("server", at(1)).build();
    jobs[0].ready = true;
    let waiting = plan(&wf, &jobs, at(5));
    assert!(creates(&waiting).is_empty(), "{:?}", waiting.actions);
    // Recorded: done while it runs, the client created with its IP.
    let jobs = Jobs::of(&wf)
        .pending("server", at(1))
        .daemoned("10.1.2.3")
        .build();
    let started = plan(&wf, &jobs, at(6));
    assert_eq!(creates(&started), ["client"]);
    let inputs = (started.actions.iter()).find_map(|a| match a {
        Action::CreateJob { inputs, .. } => Some(inputs.clone()),
        _ => None,
    });
    let key = ("server".to_string(), outputs::IP_KEY.to_string());
    assert_eq!(
        inputs.unwrap().get(&key).map(String::as_str),
        Some("10.1.2.3")
    );
    let server = entry(&started, "server");
    assert_eq!(server.phase, StepPhase::Succeeded);
    assert_eq!(server.reason.as_deref(), Some(REASON_DAEMONED));
    assert_eq!(server.ip.as_deref(), Some("10.1.2.3"));
    assert!(stops(&started).is_empty(), "{:?}", started.actions);
    // Its timeout does not run once it serves: a day later it is still done, not timed out.
    let later = plan(&wf, &jobs, at(86_400));
    assert_eq!(entry(&later, "server").phase, StepPhase::Succeeded);
    assert!(stops(&later).is_empty(), "{:?}", later.actions);
    // One that failed before it was ready fails as any step.
    let jobs = Jobs::of(&wf)
        .failed("server", "Error", "exit code 1")
        .build();
    let failed = plan(&wf, &jobs, at(10));
    assert_eq!(phase(&failed), Some(Phase::Failed));
    assert_eq!(entry(&failed, "server").phase, StepPhase::Failed);
    assert!(creates(&failed).is_empty());
}

#[test]
fn the_workflow_s_end_stops_its_daemons_and_they_stay_done() {
    let wf = served();
    let jobs = Jobs::of(&wf)
        .pending("server", at(1))
        .daemoned("10.1.2.3")
        .succeeded("client")
        .build();
    let ended = plan(&wf, &jobs, at(10));
    assert_eq!(phase(&ended), Some(Phase::Completed));
    let server_job = jobs[0].name.as_str();
    assert_eq!(stops(&ended), [(server_job, StopReason::DaemonEnded)]);
    assert_eq!(entry(&ended, "server").phase, StepPhase::Succeeded);
    // A pass after the end whose stop was lost stops it again; once stopped (its Job failed
    // by the stop) it stays done.
    let mut done = wf.clone();
    done.status.as_mut().unwrap().workflow_status = Some(Phase::Completed);
    assert_eq!(
        stops(&plan(&done, &jobs, at(11))),
        [(server_job, StopReason::DaemonEnded)]
    );
    let mut jobs = jobs;
    jobs[0].stopped = true;
    jobs[0].state = JobState::Failed {
        reason: "DeadlineExceeded".into(),
        message: "stopped".into(),
        exit_code: None,
    };
    assert!(stops(&plan(&done, &jobs, at(12))).is_empty());
}

#[test]
fn daemons_and_their_ips_are_checked_when_the_workflow_is_compiled() {
    let refused = |wf: &WorkFlow| match Compiled::new(&wf.spec).dag.as_ref().err() {
        Some(error) => error.to_string(),
        None => String::new(),
    };
    let mut suspend = served();
    suspend.spec.containers[0].suspend = Some(Box::default());
    assert!(
        refused(&suspend).contains(
            "which only a step running a container or a script may be, not a suspend step"
        ),
        "{}",
        refused(&suspend)
    );
    let mut not_daemon = served();
    not_daemon.spec.containers[0].daemon = None;
    assert!(
        refused(&not_daemon).contains("names the IP of step \"server\", which is not a daemon"),
        "{}",
        refused(&not_daemon)
    );
    let mut fanned = served();
    fanned.spec.containers[1].command = None;
    fanned.spec.containers[0].with_items = Some(serde_json::from_str(r#"["a","b"]"#).unwrap());
    assert!(
        refused(&fanned).contains("a daemon runs once"),
        "{}",
        refused(&fanned)
    );
    let mut probed = served();
    probed.spec.containers[1].http = Some(Box::default());
    probed.spec.containers[1].readiness_probe = Some(Box::default());
    assert!(
        refused(&probed).contains("has a readinessProbe"),
        "{}",
        refused(&probed)
    );
    assert_eq!(refused(&served()), "");
}
