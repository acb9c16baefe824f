//! Interactive steps end to end on the embedded control plane: the step's pod waits instead of
//! running its command; `workflow-operator exec` (driven through a pseudo-terminal, as a person
//! at a terminal) opens a shell there in which the step's command runs; `workflow-operator
//! continue` ends the step with that run's exit code, or the one it is given.

use std::process::Stdio;
use std::time::Duration;

use rstest::rstest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;

use crate::support;

use support::session::Session;
use support::{Operator, operator_process, step_of};

/// A workflow named `name` whose step `sim` is interactive (with a one-second `timeout`, which
/// must not run while it waits) and whose step `after` follows it.
fn manifest(name: &str) -> String {
    format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: {name}}}
spec:
  containers:
    - stepName: sim
      image: alpine:3.20
      interactive: true
      timeout: 1
      command: [sh, -c, 'echo ran-the-step-$((6*7)); exit ${{EXIT:-0}}']
    - stepName: after
      image: alpine:3.20
      dependsOn: [sim]
      command: [echo, done]
"#
    )
}

/// Waits until step `sim` of `workflow` is `Interactive` and its pod is ready.
async fn wait_interactive(session: &Session, workflow: &str) {
    session
        .k(&[
            "wait",
            "--for=jsonpath={.status.steps[0].phase}=Interactive",
            &format!("wf/{workflow}"),
            "--timeout=60s",
        ])
        .await;
    let job = session.jsonpath(workflow, "{.status.steps[0].job}").await;
    session
        .k(&[
            "wait",
            "--for=condition=Ready",
            "pod",
            "-l",
            &format!("job-name={job}"),
            "--timeout=60s",
        ])
        .await;
}

#[tokio::test]
async fn an_interactive_step_waits_for_a_shell_and_continue_ends_it() {
    let Some(session) = Session::start("interactive").await else {
        return;
    };
    session.create(&manifest("debug")).await;
    wait_interactive(&session, "debug").await;
    let shown = session.cli(&["get", "debug"]).await;
    assert!(shown.contains("Interactive"), "{shown}");
    // The hint names the script that runs the step's command in the shell `exec` opens.
    assert!(
        shown.contains("(/var/run/workflow-agent/command runs the step's command)"),
        "{shown}"
    );
    // `kubectl get wf`'s MESSAGE says who the workflow waits for.
    let summary = session.jsonpath("debug", "{.status.summary}").await;
    assert_eq!(summary, "waiting for you at step sim");
    // Past the step's one-second timeout: it waits for a person, not for its command.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let phase = session.jsonpath("debug", "{.status.steps[0].phase}").await;
    assert_eq!(phase, "Interactive");

    let seen = shell(
        &session,
        "debug",
        "sim",
        &[
            "echo \"command: $WORKFLOW_COMMAND\"",
            "EXIT=0 /var/run/workflow-agent/command",
            "exit",
        ],
    )
    .await;
    assert!(seen.contains("ran-the-step-42"), "{seen:?}");
    assert!(
        seen.contains("command: sh -c 'echo ran-the-step"),
        "{seen:?}"
    );

    let said = session.cli(&["continue", "debug", "sim"]).await;
    assert!(said.contains("exit code 0"), "{said}");
    session.finished_as("debug", "Completed").await;
    session.stop().await;
}

/// The script of an interactive step reaches the shell byte for byte, as any script does
/// (`step_agent::a_script_reaches_the_shell_byte_for_byte`): run from the step's shell, it
/// prints its `$(NAME)` and `$$` as the shell reads them.
#[tokio::test]
async fn an_interactive_scripts_dollars_reach_the_shell_unchanged() {
    let Some(session) = Session::start("interactive-literal").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: literal}
spec:
  containers:
    - stepName: sim
      image: alpine:3.20
      interactive: true
      source: |
        printf '%s\n' 'kept: $(STEP_NAME) $$ $$(STEP_NAME)'
"#;
    session.create(manifest).await;
    wait_interactive(&session, "literal").await;
    let seen = shell(
        &session,
        "literal",
        "sim",
        &["/var/run/workflow-agent/command", "exit"],
    )
    .await;
    assert!(
        seen.contains("kept: $(STEP_NAME) $$ $$(STEP_NAME)"),
        "{seen:?}"
    );
    session.cli(&["continue", "literal", "sim"]).await;
    session.finished_as("literal", "Completed").await;
    session.stop().await;
}

#[tokio::test]
async fn continue_with_an_exit_code_fails_the_step_with_it() {
    let Some(session) = Session::start("interactive-exit").await else {
        return;
    };
    session.create(&manifest("debug-exit")).await;
    wait_interactive(&session, "debug-exit").await;
    let refused = session.cli_refused(&["exec", "debug-exit", "after"]).await;
    assert!(refused.contains("not waiting for you"), "{refused}");
    // Nothing was run in the pod: continue needs an exit code.
    let refused = session
        .cli_refused(&["continue", "debug-exit", "sim"])
        .await;
    assert!(refused.contains("has not run in this pod"), "{refused}");
    let said = session
        .cli(&["continue", "debug-exit", "sim", "--exit-code", "3"])
        .await;
    assert!(
        said.contains("the step ended with exit code 3: it fails"),
        "{said}"
    );
    let message = session.finished_as("debug-exit", "Failed").await;
    assert!(message.contains("exit code 3"), "{message}");
    let refused = session
        .cli_refused(&["continue", "debug-exit", "sim"])
        .await;
    assert!(
        refused.contains("step sim of workflow debug-exit has finished (Failed)"),
        "{refused}"
    );
    session.stop().await;
}

/// The state of an interactive step is in its pod: the operator SIGKILLed while the step
/// waits, the step continued while no operator runs, and the operator started again finds it
/// done, with one Job for the step.
#[rstest]
#[tokio::test]
async fn an_operator_killed_while_a_step_waits_finds_it_continued(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    operator
        .ns
        .create(
            WorkFlow::test("waits")
                .step("sim", &[])
                .command(&["sh", "-c", "echo simulated"])
                .interactive()
                .step("after", &["sim"]),
        )
        .await;
    let waiting = operator
        .ns
        .wait_workflow("waits", "sim waiting for you", |wf| {
            let steps = wf.status.iter().flat_map(|s| &s.steps);
            steps
                .clone()
                .any(|s| s.name == "sim" && s.phase == StepPhase::Interactive)
        })
        .await;
    let job = (waiting.status.iter().flat_map(|s| &s.steps))
        .find_map(|s| s.job.clone())
        .expect("sim names its Job");
    operator.ns.wait_pods_ready(&job).await;
    operator.kill().await;
    operator
        .ns
        .cli(&["continue", "waits", "sim", "--exit-code", "0"])
        .await;
    operator.start();
    operator.ns.expect_completed("waits").await;
    let jobs = operator.ns.jobs_of("waits").await;
    let sims = jobs.iter().filter(|j| step_of(j) == Some("sim")).count();
    assert_eq!(sims, 1, "one Job for sim: {:?}", support::jobs_named(&jobs));
}

/// Runs `workflow-operator exec WORKFLOW STEP` under a pseudo-terminal (`script`), types
/// `lines`, and returns what the terminal showed once the shell has exited with 0.
async fn shell(session: &Session, workflow: &str, step: &str, lines: &[&str]) -> String {
    let cli = session.cli_command(&["exec", workflow, step]);
    let std = cli.as_std();
    let line: Vec<String> = std::iter::once(std.get_program())
        .chain(std.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''")))
        .collect();
    let mut child = tokio::process::Command::new("script")
        .args(["-qefc", &line.join(" "), "/dev/null"])
        .envs(std.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let typed = lines.join("\n") + "\n";
    stdin.write_all(typed.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stdout.read_to_end(&mut seen))
        .await
        .expect("the shell exits")
        .unwrap();
    let status = child.wait().await.unwrap();
    let seen = String::from_utf8_lossy(&seen).into_owned();
    assert!(status.success(), "{seen:?}");
    seen
}
