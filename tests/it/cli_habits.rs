//! The CLI as kubectl and Argo users type it, against the embedded control plane with the
//! operator running: the cluster flags before the subcommand, `wait` and `watch --exit-code`,
//! output to a pipe its reader closed, and `submit` of a name that exists.

use crate::support;

use std::process::Output;

use rstest::rstest;
use support::{Gate, Namespace, Operator, operator};
use workflow_operator_core::WorkFlow;

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `workflow-operator ARGS` (no `-n` added), whatever its outcome.
pub(super) async fn run(ns: &Namespace, args: &[&str]) -> Output {
    ns.cli_command(args)
        .current_dir(support::session::ROOT)
        .output()
        .await
        .expect("workflow-operator runs")
}

/// A workflow of one step that succeeds and one whose step exits 1, both finished.
async fn one_completed_one_failed(ns: &Namespace) {
    ns.create(WorkFlow::test("ok").step("say", &[])).await;
    ns.create(
        WorkFlow::test("bad")
            .step("fail", &[])
            .command(&["sh", "-c", "exit 1"]),
    )
    .await;
    ns.expect_completed("ok").await;
    ns.expect_failed("bad", &["fail"]).await;
}

/// `-n`, `--kubeconfig` and `--context` are taken before the subcommand, as kubectl takes
/// them, and after it as before; one given after the subcommand wins over one before it.
#[rstest]
#[tokio::test]
async fn cluster_flags_are_taken_before_the_subcommand(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(WorkFlow::test("flags").step("say", &[])).await;
    ns.expect_completed("flags").await;
    let n = ns.name.as_str();
    for args in [
        vec!["-n", n, "get", "flags"],
        vec!["--namespace", n, "logs", "flags"],
        vec!["get", "flags", "-n", n],
        vec!["-n", "elsewhere", "get", "flags", "-n", n],
    ] {
        let output = run(ns, &args).await;
        assert!(output.status.success(), "{args:?}: {output:?}");
        // `get` names the step, `logs` prints its line: `say`.
        assert!(text(&output.stdout).contains("say"), "{args:?}: {output:?}");
    }
    let Some(dev) = ns.cluster.dev() else {
        return;
    };
    let kubeconfig = dev.kubeconfig_path().to_str().unwrap();
    let args = [
        "--kubeconfig",
        kubeconfig,
        "--context",
        "devcluster",
        "-n",
        n,
        "get",
        "flags",
    ];
    let output = ns
        .cli_command(&args)
        .env_remove("KUBECONFIG")
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{args:?}: {output:?}");
}

/// `wait` waits (on a watch) until each workflow finished and exits 0 when all completed, 1
/// when any failed, 124 naming those not finished when `--timeout` passed first; `watch
/// --exit-code` exits as `wait` does.
#[rstest]
#[tokio::test]
async fn wait_and_watch_exit_code_exit_as_the_workflows_ended(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("a step waits for a file the test creates");
    let ns = &operator.ns;
    one_completed_one_failed(ns).await;
    let gate = Gate::new();
    let held = gate.wait_command("done");
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    ns.create(WorkFlow::test("held").step("wait", &[]).command(&held))
        .await;
    let n = ns.name.as_str();

    let timed_out = run(ns, &["wait", "ok", "held", "-n", n, "--timeout", "1s"]).await;
    assert_eq!(timed_out.status.code(), Some(124), "{timed_out:?}");
    assert_eq!(
        text(&timed_out.stderr),
        "error: timed out after 1s waiting for held\n"
    );
    assert_eq!(
        text(&timed_out.stdout),
        "workflow ok Completed: 1 step succeeded\n"
    );

    // Started while `held` runs (as the timeout above shows), `wait` ends once it finished.
    let waiting = ns.cli_command(&["wait", "held", "ok", "-n", n]).output();
    gate.open();
    let completed = waiting.await.unwrap();
    assert_eq!(completed.status.code(), Some(0), "{completed:?}");
    let printed = text(&completed.stdout);
    assert!(printed.contains("workflow held Completed: "), "{printed}");

    let failed = run(ns, &["wait", "ok", "bad", "-n", n]).await;
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(
        text(&failed.stdout).contains("workflow bad Failed: "),
        "{failed:?}"
    );
    let absent = run(ns, &["wait", "nope", "-n", n]).await;
    assert_eq!(absent.status.code(), Some(1), "{absent:?}");
    assert!(text(&absent.stderr).contains("workflow nope not found"));

    for (name, code) in [("ok", 0), ("bad", 1)] {
        let watched = run(ns, &["watch", name, "--exit-code", "-n", n]).await;
        assert_eq!(watched.status.code(), Some(code), "{name}: {watched:?}");
    }
    let watched = run(ns, &["watch", "bad", "-n", n]).await;
    assert_eq!(watched.status.code(), Some(0), "without --exit-code");
}

/// `get` and `logs` to a pipe whose reader has gone (`| head` done reading) end quietly, with
/// the status of a program killed by SIGPIPE, as kubectl does; no panic.
#[rstest]
#[tokio::test]
async fn output_to_a_closed_pipe_ends_quietly(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(WorkFlow::test("piped").step("say", &[])).await;
    ns.expect_completed("piped").await;
    for verb in ["get", "logs"] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        // `output()` would capture standard output: spawned, it writes to `writer`.
        let output = ns
            .cli_command(&[verb, "piped", "-n", &ns.name])
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
            .wait_with_output()
            .await
            .unwrap();
        assert_eq!(output.status.code(), Some(141), "{verb}: {output:?}");
        assert_eq!(text(&output.stderr), "", "{verb}");
    }
}

/// `submit` of a workflow whose name exists says so and what to do, in one line.
#[rstest]
#[tokio::test]
async fn submit_of_a_name_that_exists_says_what_to_do(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let n = ns.name.as_str();
    let submit = ["submit", "examples/simple.yaml", "-n", n];
    let first = run(ns, &submit).await;
    assert!(first.status.success(), "{first:?}");
    let again = run(ns, &submit).await;
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert_eq!(
        text(&again.stderr),
        "error: workflow \"simple\" already exists: delete it, or use --generate-name\n"
    );
}
