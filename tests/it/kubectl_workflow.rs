//! A user's kubectl session against `workflow-operator dev`'s pieces (the embedded control plane
//! with the operator running): install the CRD from `crd/`, create an example, wait for it,
//! read it back with the CRD's printer columns, look at its Jobs, pods, logs and Events, and
//! delete it.

use crate::support;

use support::session::{ROOT, Session, row};

#[tokio::test]
async fn kubectl_wait_for_finished_returns_when_a_workflow_fails() {
    let Some(session) = Session::start("kubectl_wait_for_finished").await else {
        return;
    };
    session.k(&["create", "-f", "examples/failing.yaml"]).await;
    session
        .k(&[
            "wait",
            "--for=condition=Finished",
            "wf/failing",
            "--timeout=60s",
        ])
        .await;
    let phase = session
        .k(&[
            "get",
            "wf",
            "failing",
            "-o",
            "jsonpath={.status.workflow-status}",
        ])
        .await;
    assert_eq!(phase, "Failed");
    session.stop().await;
}

/// A step whose pod can never start (it reads a Secret that does not exist: its container
/// waits with `CreateContainerConfigError`) fails at the workflow's `startTimeout` with a
/// message naming the step and the cause; `status.steps` and `get` show it, the Job records it,
/// and `kubectl wait --for=condition=Finished` returns.
#[tokio::test]
async fn a_step_whose_pod_cannot_start_fails_naming_the_cause() {
    let Some(owned) = Session::start("a_step_whose_pod_cannot_start").await else {
        return;
    };
    let session = &owned;
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cannot-start.yaml");
    let example = std::fs::read_to_string(format!("{ROOT}/examples/start-timeout.yaml")).unwrap();
    std::fs::write(
        &manifest,
        example.replace("startTimeout: 20", "startTimeout: 2"),
    )
    .unwrap();
    session
        .k(&["create", "-f", manifest.to_str().unwrap()])
        .await;
    session
        .k(&[
            "wait",
            "--for=condition=Finished",
            "wf/start-timeout",
            "--timeout=60s",
        ])
        .await;
    let want =
        r#"step db cannot start: CreateContainerConfigError: secret "missing-creds" not found"#;
    let jsonpath = |path: &'static str| {
        let path = format!("jsonpath={path}");
        async move {
            session
                .k(&["get", "wf", "start-timeout", "-o", &path])
                .await
        }
    };
    assert_eq!(jsonpath("{.status.workflow-status}").await, "Failed");
    assert_eq!(jsonpath("{.status.message}").await, want);
    assert_eq!(jsonpath("{.status.steps[0].phase}").await, "Failed");
    assert_eq!(jsonpath("{.status.steps[0].reason}").await, "CannotStart");
    // The Job is the record of the verdict, for an operator restarted after a crash.
    let annotation = session
        .k(&[
            "get",
            "jobs",
            "-l",
            "workflow.crd.com/workflow=start-timeout",
            "-o",
            r"jsonpath={.items[0].metadata.annotations.workflow\.crd\.com/cannot-start}",
        ])
        .await;
    assert_eq!(
        annotation,
        r#"CreateContainerConfigError: secret "missing-creds" not found"#
    );
    let text = session.cli(&["get", "start-timeout"]).await;
    assert!(text.contains(want), "{text}");
    let row = row(&text, "db");
    assert_eq!(row[1], "Failed", "{text}");
    assert!(
        text.contains(
            r#"CannotStart: CreateContainerConfigError: secret "missing-creds" not found"#
        ),
        "{text}"
    );
    owned.stop().await;
}

/// `get` lists the steps in DAG order with their phase, attempts and exit code (text and JSON);
/// `logs` prints each step's output prefixed with the step, in DAG order; `logs -f` follows the
/// workflow until it finishes.
#[tokio::test]
async fn get_and_logs_show_each_step_in_dag_order() {
    let Some(session) = Session::start("get_and_logs_show_each_step").await else {
        return;
    };
    session.k(&["create", "-f", "examples/failing.yaml"]).await;
    // Follows from now until the workflow finished: steps that ran before it started too.
    // Lines of steps read at once may interleave, so compare them as a set.
    let followed = session.cli(&["logs", "failing", "-f"]).await;
    let mut lines: Vec<&str> = followed.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["fail: about to fail", "ok: this one works"],
        "{followed}"
    );

    let text = session.cli(&["get", "failing"]).await;
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("STEP"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["STEP", "PHASE", "DURATION", "ATTEMPTS", "EXIT", "MESSAGE"]
    );
    assert_eq!(rows[1][..2], ["ok", "Succeeded"], "{text}");
    assert_eq!(rows[2][..2], ["fail", "Failed"], "{text}");
    assert_eq!(
        rows[2][3..5],
        ["1", "1"],
        "one attempt, exit code 1: {text}"
    );
    assert_eq!(rows[3], ["after", "Skipped"], "{text}");
    assert!(text.contains("step fail failed: exit code 1"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&session.cli(&["get", "failing", "-o", "json"]).await).unwrap();
    assert_eq!(json["phase"], "Failed");
    assert_eq!(json["steps"][1]["name"], "fail");
    assert_eq!(json["steps"][1]["phase"], "Failed");
    assert_eq!(json["steps"][1]["exitCode"], 1);
    assert_eq!(json["steps"][2]["phase"], "Skipped");

    let logs = session.cli(&["logs", "failing"]).await;
    assert_eq!(
        logs.lines().collect::<Vec<_>>(),
        ["ok: this one works", "fail: about to fail"]
    );
    let one = session.cli(&["logs", "failing", "--step", "fail"]).await;
    assert_eq!(one.trim(), "fail: about to fail");
    session.stop().await;
}

#[tokio::test]
async fn kubectl_session_runs_the_diamond_example_to_completed_and_deletes_it() {
    let Some(session) = Session::start("kubectl_session_runs_the_diamond_example").await else {
        return;
    };
    let k = |args: &'static [&'static str]| session.k(args);

    k(&["create", "-f", "examples/diamond.yaml"]).await;
    // `watch` into a pipe prints a line per change and returns once the workflow finished.
    let watched = session.cli(&["watch", "diamond"]).await;
    let last = watched.lines().last().unwrap_or_default();
    assert!(last.starts_with("diamond   Completed   4/4"), "{watched}");
    let succeeded = watched
        .lines()
        .filter(|l| l.starts_with("diamond/") && l.ends_with("   Succeeded"))
        .count();
    assert_eq!(succeeded, 4, "{watched}");
    k(&[
        "wait",
        "--for=condition=Completed",
        "wf/diamond",
        "--timeout=60s",
    ])
    .await;

    let table = k(&["get", "wf"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "PROGRESS", "MESSAGE", "AGE"],
        "{table}"
    );
    let diamond = row(&table, "diamond");
    assert_eq!(diamond[1..3], ["Completed", "4/4"], "{table}");
    let wide = k(&["get", "wf", "-o", "wide"]).await;
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "STATUS", "PROGRESS", "MESSAGE", "AGE", "RUNNING", "CHANGED", "RUN"
        ],
        "{wide}"
    );

    let jobs = k(&[
        "get",
        "jobs",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    let jobs: Vec<&str> = jobs.lines().collect();
    assert_eq!(jobs.len(), 4, "one Job per step: {jobs:?}");
    let pods = k(&[
        "get",
        "pods",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    assert_eq!(pods.lines().count(), 4, "one pod per step: {pods}");

    let step0 = jobs
        .iter()
        .find(|j| j.contains("step0"))
        .expect("the step0 job");
    let logs = session.k(&["logs", step0]).await;
    assert_eq!(logs.trim(), "step0");

    let described = k(&["describe", "wf", "diamond"]).await;
    for reason in ["StepsStarted", "AllStepsSucceeded"] {
        assert!(
            described.contains(reason),
            "no {reason} Event in\n{described}"
        );
    }
    // Step Events come one per status write, naming the steps it reports (`step step0
    // started`, `steps step1, step2 succeeded; started step3`): each step is in one.
    let events = described.split("Events:").nth(1).unwrap_or_default();
    for step in ["step0", "step1", "step2", "step3"] {
        assert!(events.contains(step), "{step} in no Event:\n{described}");
    }

    k(&["delete", "wf", "diamond", "--wait=true", "--timeout=30s"]).await;
    let left = k(&[
        "get",
        "jobs,pods",
        "-l",
        "workflow.crd.com/workflow=diamond",
        "-o",
        "name",
    ])
    .await;
    if !left.trim().is_empty() {
        // Background deletion: wait for the garbage collector rather than assume it is done.
        k(&[
            "wait",
            "--for=delete",
            "jobs,pods",
            "-l",
            "workflow.crd.com/workflow=diamond",
            "--timeout=30s",
        ])
        .await;
    }

    session.stop().await;
}

/// The run-control verbs as a user types them: each answers what it did, a verb that
/// makes no sense now is refused saying why, and nothing changes; a bad `shutdown` value and an
/// exit step that names a step are answered clearly too.
#[tokio::test]
async fn run_control_verbs_answer_clearly_and_refuse_what_makes_no_sense() {
    let Some(session) = Session::start("run_control_verbs").await else {
        return;
    };
    session.k(&["create", "-f", "examples/simple.yaml"]).await;
    session
        .k(&[
            "wait",
            "--for=condition=Completed",
            "wf/simple",
            "--timeout=60s",
        ])
        .await;
    for (verb, why) in [
        (
            "suspend",
            "workflow simple has finished (Completed); there is nothing to suspend",
        ),
        (
            "stop",
            "workflow simple has finished (Completed); there is nothing to stop",
        ),
        (
            "terminate",
            "workflow simple has finished (Completed); there is nothing to terminate",
        ),
        (
            "retry",
            "workflow simple completed: every step succeeded, there is nothing to retry",
        ),
    ] {
        let refused = session.cli_refused(&[verb, "simple"]).await;
        assert_eq!(refused.trim(), format!("error: {why}"), "{verb}");
    }
    let spec = session
        .k(&["get", "wf", "simple", "-o", "jsonpath={.spec}"])
        .await;
    assert!(
        !spec.contains("suspend") && !spec.contains("shutdown") && !spec.contains("retry"),
        "{spec}"
    );
    let missing = session.cli_refused(&["stop", "nope"]).await;
    assert_eq!(
        missing.trim(),
        "error: workflow nope not found in namespace default"
    );

    // A workflow that never finishes on its own: suspend, resume, retry while it runs, stop.
    session
        .create(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: endless}\nspec:\n  maxStepTimeout: -1\n  containers:\n    - {stepName: a, image: busybox:1.36, command: [sleep, \"3600\"]}\n    - {stepName: b, image: busybox:1.36, command: [\"true\"], dependsOn: [a]}\n",
        )
        .await;
    let name = "endless";
    assert_eq!(
        session.cli(&["suspend", name]).await.trim(),
        format!("workflow {name} suspended")
    );
    assert_eq!(
        session.cli(&["suspend", name]).await.trim(),
        format!("workflow {name} is already suspended")
    );
    let retry = session.cli_refused(&["retry", name]).await;
    assert!(retry.contains("is still running"), "{retry}");
    assert_eq!(
        session.cli(&["resume", name]).await.trim(),
        format!("workflow {name} resumed")
    );
    assert_eq!(
        session.cli(&["terminate", name]).await.trim(),
        format!("workflow {name} terminated: its running steps are being stopped")
    );
    session
        .k(&[
            "wait",
            "--for=condition=Finished",
            &format!("wf/{name}"),
            "--timeout=60s",
        ])
        .await;
    let message = session
        .k(&["get", "wf", name, "-o", "jsonpath={.status.message}"])
        .await;
    assert!(
        message.starts_with("terminated (spec.shutdown: Terminate)"),
        "{message}"
    );

    // The API server refuses an unknown shutdown, naming the values it takes.
    let bad = session
        .k_refused(&[
            "patch",
            "wf",
            name,
            "--type=merge",
            "-p",
            r#"{"spec":{"shutdown":"Pause"}}"#,
        ])
        .await;
    assert!(
        bad.contains(
            r#"spec.shutdown: Unsupported value: "Pause": supported values: "Stop", "Terminate""#
        ),
        "{bad}"
    );
    // An exit step that names a step: valid to the schema, refused by the operator naming both.
    let manifest = session.write_manifest(
        "exit.yaml",
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: exit-deps}\nspec:\n  containers:\n    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n  onExit:\n    - {stepName: notify, image: busybox:1.36, command: [\"true\"], dependsOn: [a]}\n",
    );
    let manifest = manifest.as_str();
    let validate = session.cli_refused(&["validate", manifest]).await;
    assert!(
        validate.contains(r#"exit step "notify" depends on step "a""#),
        "{validate}"
    );
    session.k(&["create", "-f", manifest]).await;
    session
        .k(&[
            "wait",
            "--for=condition=Failed",
            "wf/exit-deps",
            "--timeout=60s",
        ])
        .await;
    let message = session
        .k(&["get", "wf", "exit-deps", "-o", "jsonpath={.status.message}"])
        .await;
    assert!(
        message
            .contains(r#"exit step "notify" depends on step "a": exit steps run after every step"#),
        "{message}"
    );
    session.stop().await;
}

/// A long failure message keeps `kubectl get wf` readable: the MESSAGE column shows its first
/// line cut to 120 characters (`status.summary`); `status.message` keeps it whole.
#[tokio::test]
async fn a_long_message_is_cut_to_120_characters_in_the_message_column_and_kept_whole() {
    let Some(session) = Session::start("a_long_message_is_cut").await else {
        return;
    };
    let unknown = "a-step-with-a-long-name-that-does-not-exist-".repeat(4);
    let unknown = unknown.trim_end_matches('-');
    session
        .create(&format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: long}}\nspec:\n  containers:\n    - {{stepName: a, image: busybox:1.36, command: [\"true\"], dependsOn: [{unknown}]}}\n"
        ))
        .await;
    session.wait_finished("long").await;
    let message = session.jsonpath("long", "{.status.message}").await;
    assert!(message.contains(unknown), "{message}");
    assert!(message.chars().count() > 120, "{message}");
    let summary = session.jsonpath("long", "{.status.summary}").await;
    assert_eq!(summary.chars().count(), 120, "{summary}");
    assert!(summary.ends_with("..."), "{summary}");
    assert!(message.starts_with(summary.trim_end_matches("...")));
    let table = session.k(&["get", "wf", "long"]).await;
    let line = table.lines().find(|l| l.starts_with("long ")).unwrap();
    assert!(line.contains(&summary), "{table}");
    assert!(!line.contains(&message), "{table}");
    session.stop().await;
}

/// `watch` into a pipe (not a terminal) prints one line per change, as `kubectl get -w` does:
/// the workflow's row and each step's when it changes, never the whole `get` again.
#[tokio::test]
async fn watch_into_a_pipe_prints_one_line_per_change() {
    let Some(session) = Session::start("watch_into_a_pipe").await else {
        return;
    };
    session.k(&["create", "-f", "examples/simple.yaml"]).await;
    let watched = session.cli(&["watch", "simple"]).await;
    let lines: Vec<Vec<&str>> = watched
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        lines
            .iter()
            .all(|cells| cells.first().is_some_and(|c| c.starts_with("simple"))),
        "every line is a row of the workflow or of one of its steps:\n{watched}"
    );
    assert_eq!(
        lines.last().map(|cells| &cells[..3]),
        Some(&["simple", "Completed", "3/3"][..]),
        "{watched}"
    );
    for step in ["step0", "step1", "step2"] {
        let rows: Vec<&Vec<&str>> = lines
            .iter()
            .filter(|cells| cells[0] == format!("simple/{step}"))
            .collect();
        assert!(
            rows.last().is_some_and(|cells| cells[1] == "Succeeded"),
            "{watched}"
        );
        // One line per change: a step's row is never printed twice in a row unchanged.
        for pair in rows.windows(2) {
            assert_ne!(pair[0], pair[1], "{watched}");
        }
    }
    session.stop().await;
}

/// A step past its timeout (`examples/timeout.yaml`: `slow` sleeps past its 2 s) is stopped by
/// the kubelet at its pod's `activeDeadlineSeconds`, which keeps the pod: `workflow-operator
/// logs` prints what it printed before, and so does `kubectl logs` of its pod, whose reason is
/// `DeadlineExceeded`; the workflow fails with the timeout as before. (The timeout was the Job's
/// deadline, whose Job controller deleted the pod: `logs` printed nothing and exited 0.)
#[tokio::test]
async fn a_timed_out_steps_log_stays_readable_by_logs_and_kubectl() {
    let Some(session) = Session::start("a_timed_out_steps_log_stays_readable").await else {
        return;
    };
    session.k(&["create", "-f", "examples/timeout.yaml"]).await;
    session.wait_finished("timeout").await;
    let message = session.jsonpath("timeout", "{.status.message}").await;
    assert!(message.contains("step slow timed out"), "{message}");
    assert_eq!(
        session
            .jsonpath("timeout", "{.status.workflow-status}")
            .await,
        "Failed"
    );

    let logs = session.cli(&["logs", "timeout", "--step", "slow"]).await;
    assert_eq!(logs.trim(), "slow: sleeping");
    let pods = session
        .k(&[
            "get",
            "pods",
            "-l",
            "workflow.crd.com/workflow=timeout",
            "-o",
            "name",
        ])
        .await;
    let pods: Vec<&str> = pods.lines().collect();
    assert_eq!(pods.len(), 1, "the timed-out step's pod is kept: {pods:?}");
    assert_eq!(session.k(&["logs", pods[0]]).await.trim(), "sleeping");
    let reason = session
        .k(&["get", pods[0], "-o", "jsonpath={.status.reason}"])
        .await;
    assert_eq!(reason, "DeadlineExceeded");
    session.stop().await;
}

/// `workflow-operator terminate` stops the running steps and keeps their pods: the pod of the
/// terminated step ends `Failed` (its deadline exceeded) and stays, so `logs` prints what it wrote
/// before it was stopped, for that step alone and for the whole workflow.
#[tokio::test]
async fn a_terminated_steps_pod_is_kept_with_its_log() {
    let Some(session) = Session::start("a_terminated_steps_pod_is_kept").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: ended}
spec:
  containers:
    - {stepName: quick, image: busybox, command: [sh, -c, "echo quick done"]}
    - stepName: long
      image: busybox
      command: [sh, -c, "echo long started; sleep 60"]
      dependsOn: [quick]
"#,
        )
        .await;
    kube_devcluster::testing::eventually(
        "the long step's log has its first line",
        support::DEADLINE,
        || async {
            let logs = session.cli(&["logs", "ended", "--step", "long"]).await;
            logs.contains("long started").then_some(())
        },
    )
    .await;
    session.cli(&["terminate", "ended"]).await;
    session.wait_finished("ended").await;
    kube_devcluster::testing::eventually(
        "the long step's pod stopped and kept",
        support::DEADLINE,
        || async {
            let phases = session
                .k(&[
                    "get",
                    "pods",
                    "-l",
                    "workflow.crd.com/step=long",
                    "-o",
                    "jsonpath={.items[*].status.phase}",
                ])
                .await;
            (phases.trim() == "Failed").then_some(())
        },
    )
    .await;

    let said = session.cli(&["logs", "ended", "--step", "long"]).await;
    assert_eq!(said.trim(), "long: long started");
    let all = session.cli(&["logs", "ended"]).await;
    assert_eq!(all.trim(), "quick: quick done\nlong: long started");
    session.stop().await;
}
