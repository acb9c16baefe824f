//! CronWorkFlows end to end on the embedded control plane, through kubectl, with `@every`
//! schedules of a few seconds: runs start on time under names made of the time, finished runs
//! beyond the history limit are deleted, `Forbid` skips a time while a run is active, and a
//! resumed schedule fires at most once.

use crate::support;

use std::time::Duration;

use kube_devcluster::testing::eventually;
use support::session::Session;

/// The runs of `cron` as `NAME PHASE` lines, sorted.
async fn runs(session: &Session, cron: &str) -> Vec<(String, String)> {
    let listed = session
        .k(&[
            "get",
            "wf",
            "-l",
            &format!("workflow.crd.com/cron={cron}"),
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.workflow-status}{"\n"}{end}"#,
        ])
        .await;
    let mut runs: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            Some((
                parts.next()?.to_string(),
                parts.next().unwrap_or("").to_string(),
            ))
        })
        .collect();
    runs.sort();
    runs
}

/// The CronWorkFlow's `.status` field `path`.
async fn status(session: &Session, cron: &str, path: &str) -> String {
    session
        .k(&[
            "get",
            "cwf",
            cron,
            "-o",
            &format!("jsonpath={{.status.{path}}}"),
        ])
        .await
}

#[tokio::test]
async fn runs_start_on_time_named_for_their_time_and_old_ones_are_deleted() {
    let Some(session) = Session::start("cron_on_time").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {name: tick}
spec:
  schedules: ["@every 2s"]
  successfulRunsHistoryLimit: 2
  workflowSpec:
    containers: [{stepName: a, image: busybox, command: [echo, hi]}]
"#,
        )
        .await;
    let created = session
        .k(&[
            "get",
            "cwf",
            "tick",
            "-o",
            "jsonpath={.metadata.creationTimestamp}",
        ])
        .await;
    let created: k8s_openapi::jiff::Timestamp = created.trim().parse().unwrap();
    // Four runs have started: the status's last time is four periods after the creation.
    eventually("four runs started", Duration::from_secs(30), || async {
        let last = status(&session, "tick", "lastScheduleTime").await;
        let last: k8s_openapi::jiff::Timestamp = last.trim().parse().ok()?;
        (last.as_second() - created.as_second() >= 8).then_some(())
    })
    .await;
    // The first runs finished long ago and are beyond the history limit: deleted.
    let first = created.as_second() + 2;
    let runs = eventually(
        "the oldest runs deleted",
        Duration::from_secs(30),
        || async {
            let runs = runs(&session, "tick").await;
            let oldest: i64 = runs.first()?.0.strip_prefix("tick-")?.parse().ok()?;
            (oldest > first + 2).then_some(runs)
        },
    )
    .await;
    for (name, _) in &runs {
        let time: i64 = name
            .strip_prefix("tick-")
            .expect("named tick-TIME")
            .parse()
            .unwrap();
        assert_eq!(
            (time - created.as_second()) % 2,
            0,
            "{name} is a scheduled time"
        );
    }
    let shown = session.k(&["get", "cwf", "tick"]).await;
    for column in ["SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "NEXT"] {
        assert!(shown.contains(column), "{shown}");
    }
    session.stop().await;
}

#[tokio::test]
async fn forbid_skips_times_while_a_run_is_active_and_a_resume_fires_at_most_once() {
    let Some(session) = Session::start("cron_forbid").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {name: slow}
spec:
  schedules: ["@every 1s"]
  concurrencyPolicy: Forbid
  workflowSpec:
    containers: [{stepName: a, image: busybox, command: [sleep, "6"]}]
"#,
        )
        .await;
    eventually("a run started", Duration::from_secs(20), || async {
        (!runs(&session, "slow").await.is_empty()).then_some(())
    })
    .await;
    // Four more seconds pass with the run still sleeping: each time is skipped.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = runs(&session, "slow").await;
    assert_eq!(during.len(), 1, "one run while it is active: {during:?}");
    let events = session
        .k(&[
            "get",
            "events",
            "--field-selector",
            "reason=RunSkipped",
            "-o",
            "name",
        ])
        .await;
    assert!(!events.trim().is_empty(), "a RunSkipped Event");

    // Suspended for three seconds, then resumed: of the times passed meanwhile, at most the
    // latest starts, though `catchUp: All` would start all of them after downtime.
    let patch = r#"{"spec":{"suspend":true,"concurrencyPolicy":"Allow","catchUp":"All"}}"#;
    session
        .k(&["patch", "cwf", "slow", "--type=merge", "-p", patch])
        .await;
    let suspended = eventually("suspended", Duration::from_secs(10), || async {
        let at = status(&session, "slow", "suspendedAt").await;
        at.trim().parse::<k8s_openapi::jiff::Timestamp>().ok()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let resumed = k8s_openapi::jiff::Timestamp::now();
    session
        .k(&[
            "patch",
            "cwf",
            "slow",
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ])
        .await;
    eventually("resumed", Duration::from_secs(10), || async {
        status(&session, "slow", "suspendedAt")
            .await
            .trim()
            .is_empty()
            .then_some(())
    })
    .await;
    let in_the_pause: Vec<String> = runs(&session, "slow")
        .await
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| {
            let time: i64 = name.strip_prefix("slow-").unwrap().parse().unwrap();
            time > suspended.as_second() && time <= resumed.as_second()
        })
        .collect();
    assert!(
        in_the_pause.len() <= 1,
        "a resume fires at most once: {in_the_pause:?}"
    );
    session.stop().await;
}
