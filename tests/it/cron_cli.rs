//! `workflow-operator cron list|get|suspend|resume|trigger` end to end on the embedded control
//! plane: the list and a CronWorkFlow's next times (in its zone and in UTC), `spec.suspend` set
//! and cleared, a run started now that the operator runs to the end, and the message for a
//! CronWorkFlow that does not exist.

use crate::support;

use std::time::Duration;

use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{Timestamp, ToSpan};
use kube_devcluster::testing::eventually;
use support::session::Session;

/// A CronWorkFlow `name` running `0 2 * * *` in `Europe/Berlin`, whose runs echo and carry the
/// label `team: data`.
fn nightly(name: &str) -> String {
    format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {{name: {name}}}
spec:
  schedules: ["0 2 * * *"]
  timezone: Europe/Berlin
  workflowMetadata: {{labels: {{team: data}}}}
  workflowSpec:
    containers: [{{stepName: a, image: busybox, command: [echo, hi]}}]
"#
    )
}

/// `line` with its runs of spaces (the columns' padding) made one.
fn words(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The next five 02:00 of Berlin after `now`, as `cron get` prints them: in the zone and in
/// UTC (computed here from the calendar, not by the schedule under test).
fn next_berlin_two_am(now: Timestamp) -> Vec<(String, String)> {
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    let today = now.to_zoned(berlin.clone()).date();
    (0..7i64)
        .map(|days| {
            let date = today.checked_add(days.days()).unwrap();
            date.at(2, 0, 0, 0).to_zoned(berlin.clone()).unwrap()
        })
        .filter(|zoned| zoned.timestamp() > now)
        .take(5)
        .map(|zoned| {
            (
                format!("{} (Europe/Berlin)", zoned.strftime("%Y-%m-%d %H:%M:%S %Z")),
                zoned.timestamp().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn list_and_get_show_the_schedule_and_the_next_five_times_in_the_zone_and_utc() {
    let Some(session) = Session::start("cron_cli_get").await else {
        return;
    };
    session.create(&nightly("nightly")).await;
    eventually("the status written", Duration::from_secs(20), || async {
        let ready = session
            .k(&[
                "get",
                "cwf",
                "nightly",
                "-o",
                r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
            ])
            .await;
        (ready.trim() == "True").then_some(())
    })
    .await;

    let list = session.cli(&["cron", "list"]).await;
    for column in [
        "NAME",
        "SCHEDULES",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "NEXT",
        "READY",
        "MESSAGE",
    ] {
        assert!(list.contains(column), "{list}");
    }
    // Nothing ran yet: LAST is `-`; the schedule is healthy: READY True.
    let row = support::session::row(&list, "nightly").join(" ");
    assert!(
        row.starts_with("nightly 0 2 * * * Europe/Berlin false 0 - in ") && row.ends_with(" True"),
        "{list}"
    );
    let all = session.cli(&["cron", "list", "-A"]).await;
    assert!(all.starts_with("NAMESPACE"), "{all}");
    assert!(support::session::row(&all, "default").contains(&"nightly"));

    let now = Timestamp::now();
    let shown = session.cli(&["cron", "get", "nightly"]).await;
    let flat: Vec<String> = shown.lines().map(words).collect();
    for line in [
        "Name: nightly",
        "Schedules: 0 2 * * *",
        "Timezone: Europe/Berlin",
        "Concurrency: Allow",
        "Suspend: false",
        "Ready: True",
        "NEXT (Europe/Berlin) UTC",
        "No runs.",
    ] {
        assert!(
            flat.iter().any(|l| l.starts_with(line)),
            "{line:?} in\n{shown}"
        );
    }
    let lines: Vec<String> = flat
        .iter()
        .skip_while(|l| !l.starts_with("NEXT"))
        .skip(1)
        .take(5)
        .cloned()
        .collect();
    let want: Vec<String> = next_berlin_two_am(now)
        .into_iter()
        .map(|(zoned, utc)| format!("{zoned} {utc}"))
        .collect();
    assert_eq!(lines, want, "{shown}");

    let json: serde_json::Value =
        serde_json::from_str(&session.cli(&["cron", "get", "nightly", "-o", "json"]).await)
            .unwrap();
    assert_eq!(json["nextTimes"].as_array().unwrap().len(), 5);
    assert_eq!(json["cronWorkFlow"]["metadata"]["name"], "nightly");
    session.stop().await;
}

#[tokio::test]
async fn suspend_and_resume_set_the_field_and_say_so_when_there_is_nothing_to_do() {
    let Some(session) = Session::start("cron_cli_suspend").await else {
        return;
    };
    session.create(&nightly("nightly")).await;
    let suspend = || async {
        session
            .k(&["get", "cwf", "nightly", "-o", "jsonpath={.spec.suspend}"])
            .await
    };
    let said = session.cli(&["cron", "suspend", "nightly"]).await;
    assert!(said.starts_with("cronworkflow nightly suspended"), "{said}");
    assert_eq!(suspend().await.trim(), "true");
    let again = session.cli(&["cron", "suspend", "nightly"]).await;
    assert_eq!(again.trim(), "cronworkflow nightly is already suspended");
    let shown = session.cli(&["cron", "get", "nightly"]).await;
    assert!(
        shown.lines().any(|l| words(l) == "Suspend: true"),
        "{shown}"
    );
    // No next time while suspended.
    let list = session.cli(&["cron", "list"]).await;
    let row = support::session::row(&list, "nightly").join(" ");
    assert!(
        row.starts_with("nightly 0 2 * * * Europe/Berlin true 0 - - "),
        "{list}"
    );

    let said = session.cli(&["cron", "resume", "nightly"]).await;
    assert!(said.starts_with("cronworkflow nightly resumed"), "{said}");
    assert_eq!(suspend().await.trim(), "false");
    let again = session.cli(&["cron", "resume", "nightly"]).await;
    assert_eq!(again.trim(), "cronworkflow nightly is not suspended");
    session.stop().await;
}

#[tokio::test]
async fn trigger_starts_a_run_now_named_labelled_and_owned_as_a_scheduled_one() {
    let Some(session) = Session::start("cron_cli_trigger").await else {
        return;
    };
    session.create(&nightly("nightly")).await;
    let uid = session
        .k(&["get", "cwf", "nightly", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let before = Timestamp::now().as_second();
    let said = session.cli(&["cron", "trigger", "nightly"]).await;
    let after = Timestamp::now().as_second();
    let run = said.split_whitespace().nth(1).expect("the run's name");
    assert!(said.starts_with("workflow nightly-"), "{said}");
    let time: i64 = run.strip_prefix("nightly-").unwrap().parse().unwrap();
    assert!(
        (before..=after).contains(&time),
        "{said} at {before}..{after}"
    );

    let field = |path: &'static str| session.jsonpath(run, path);
    assert_eq!(
        field("{.metadata.labels.workflow\\.crd\\.com/cron}").await,
        "nightly"
    );
    assert_eq!(
        field("{.metadata.labels.workflow\\.crd\\.com/scheduled-time}").await,
        time.to_string()
    );
    assert_eq!(field("{.metadata.labels.team}").await, "data");
    let owner = field(
        "{.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].name} \
         {.metadata.ownerReferences[0].uid} {.metadata.ownerReferences[0].controller}",
    )
    .await;
    assert_eq!(owner, format!("CronWorkFlow nightly {uid} true"));

    session.wait_finished(run).await;
    assert_eq!(field("{.status.workflow-status}").await, "Completed");
    let shown = session.cli(&["cron", "get", "nightly"]).await;
    let listed = support::session::row(&shown, run);
    assert_eq!(listed.last(), Some(&"Completed"), "{shown}");

    // A second run needs a second of its own (runs are named for it): the first may have
    // finished within its second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let name_only = session
        .cli(&["cron", "trigger", "nightly", "-o", "name"])
        .await;
    assert!(name_only.trim().starts_with("nightly-"), "{name_only}");
    session.stop().await;
}

#[tokio::test]
async fn a_cronworkflow_that_does_not_exist_is_named_in_the_error() {
    let Some(session) = Session::start("cron_cli_missing").await else {
        return;
    };
    for verb in ["get", "suspend", "resume", "trigger"] {
        let said = session.cli_refused(&["cron", verb, "nope"]).await;
        assert_eq!(
            said.trim(),
            "error: cronworkflow nope not found in namespace default",
            "cron {verb}"
        );
    }
    session.stop().await;
}

/// The cells of `table`'s row whose first cell is `name`, by its header's columns (a cell may
/// hold spaces: `["0 2 * * *"]`), as `(header, cell)`.
fn cells<'a>(table: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<usize> = (header.char_indices())
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let line = (lines.find(|l| l.split_whitespace().next() == Some(name)))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    let cell = |text: &'a str, from: usize, to: usize| {
        text.get(from..to.min(text.len())).unwrap_or("").trim()
    };
    (starts.iter().enumerate())
        .map(|(i, &from)| {
            let to = starts.get(i + 1).copied().unwrap_or(usize::MAX);
            (cell(header, from, to), cell(line, from, to))
        })
        .collect()
}

/// `kubectl get cwf` tells a healthy cron from a broken one (READY, and MESSAGE with `-o
/// wide`), counts its active runs, leaves LAST empty until a run started (an edit of the
/// schedule is no run) and NEXT empty while suspended. Every column is a scalar of the status: a
/// real API server prints only the first match of a `[*]` JSONPath.
#[tokio::test]
async fn kubectl_get_cwf_shows_health_active_runs_last_and_next() {
    let Some(session) = Session::start("cron_cli_columns").await else {
        return;
    };
    let paused = nightly("paused").replace("spec:\n", "spec:\n  suspend: true\n");
    let broken = nightly("broken").replace("[echo, hi]}]", "[echo, hi], dependsOn: [a]}]");
    let busy = nightly("busy").replace("[echo, hi]", "[sleep, '300']");
    for manifest in [nightly("nightly"), paused, broken, busy] {
        session.create(&manifest).await;
    }
    let edit = r#"{"spec": {"schedules": ["30 2 * * *"]}}"#;
    (session.k(&["patch", "cwf", "nightly", "--type=merge", "-p", edit])).await;
    let run = session
        .cli(&["cron", "trigger", "busy", "-o", "name"])
        .await;
    let status = |name: &'static str, path: &'static str| {
        let path = format!("jsonpath={path}");
        let session = &session;
        async move { session.k(&["get", "cwf", name, "-o", &path]).await }
    };
    eventually("every status written", Duration::from_secs(30), || async {
        let seen = [
            status("nightly", "{.status.nextScheduleTime}")
                .await
                .ends_with(":30:00Z"),
            !status("paused", "{.status.suspendedAt}").await.is_empty(),
            status("broken", "{.status.conditions[0].status}").await == "False",
            status("busy", "{.status.active[0].name}").await == run.trim(),
        ];
        seen.iter().all(|&seen| seen).then_some(())
    })
    .await;

    let table = session.k(&["get", "cwf"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "NEXT", "READY", "AGE"
        ],
        "{table}"
    );
    let row = |name| {
        let cells = cells(&table, name);
        (cells.iter())
            .filter(|(h, _)| ["SUSPEND", "ACTIVE", "LAST", "NEXT", "READY"].contains(h))
            .map(|(_, c)| *c)
            .collect::<Vec<_>>()
    };
    let nightly = row("nightly");
    assert_eq!(nightly[..3], ["", "0", ""], "{table}");
    assert!(nightly[3].ends_with(":30:00Z"), "{table}");
    assert_eq!(nightly[4], "True", "{table}");
    assert_eq!(row("paused"), ["true", "0", "", "", "True"], "{table}");
    assert_eq!(row("broken")[4], "False", "{table}");
    let busy = row("busy");
    assert_eq!(busy[..2], ["", "1"], "{table}");
    assert!(!busy[2].is_empty(), "{table}");

    let wide = session.k(&["get", "cwf", "-o", "wide"]).await;
    let message = (cells(&wide, "broken").into_iter())
        .find(|(h, _)| *h == "MESSAGE")
        .map(|(_, c)| c.to_string());
    assert!(
        message.is_some_and(|m| m.starts_with("spec.workflowSpec: ")),
        "{wide}"
    );
    session.stop().await;
}
