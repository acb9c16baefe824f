//! The step agent end to end on the embedded control plane, through kubectl and the
//! `workflow-operator` CLI: scripts in sh and python3, a step's standard output as `result` in
//! a dependent's command and in a `withParam`, output parameters read from files (with and
//! without a `default`), and what fails says which output it could not collect.

use crate::support;

use support::session::{Session, row};

/// A python3 script prints a JSON list; a `withParam` fans out over it and a shell script reads
/// it; output parameters come from files, a missing one from its default; Argo's
/// `outputs.parameters.NAME` and the short `outputs.NAME` name the same output.
#[tokio::test]
async fn scripts_results_and_parameters_from_files_pass_between_steps() {
    let Some(session) = Session::start("step-agent").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: scripts}
spec:
  containers:
    - stepName: gen
      image: python:3.12-alpine
      command: [python3]
      source: |
        import json
        print(json.dumps(["a", "b", "c"]))
    - stepName: shout
      image: alpine:3.20
      dependsOn: [gen]
      source: |
        echo 'got {{steps.gen.outputs.result}}'
        printf 'abc123\n' > /tmp/sha
      outputs:
        parameters:
          - {name: sha, valueFrom: {path: /tmp/sha}}
          - {name: flavour, valueFrom: {path: /tmp/none}, default: plain}
    - stepName: each
      image: alpine:3.20
      dependsOn: [gen]
      withParam: "{{steps.gen.outputs.result}}"
      command: [sh, -c, 'echo item {{item}}']
    - stepName: report
      image: alpine:3.20
      dependsOn: [shout]
      command: [echo, "sha={{steps.shout.outputs.parameters.sha}} flavour={{steps.shout.outputs.flavour}} said={{steps.shout.outputs.result}}"]
"#;
    session.create(manifest).await;
    session.finished_as("scripts", "Completed").await;
    let result = session
        .jsonpath(
            "scripts",
            r#"{.status.steps[?(@.name=="gen")].outputs.result}"#,
        )
        .await;
    assert_eq!(result, r#"["a", "b", "c"]"#);
    let logs = session.cli(&["logs", "scripts", "--step", "report"]).await;
    assert!(
        logs.contains(r#"sha=abc123 flavour=plain said=got ["a", "b", "c"]"#),
        "{logs}"
    );
    let logs = session.cli(&["logs", "scripts", "--step", "each"]).await;
    for item in ["a", "b", "c"] {
        assert!(logs.contains(&format!("item {item}")), "{logs}");
    }
    // The standard output stays the step's log too.
    let logs = session.cli(&["logs", "scripts", "--step", "gen"]).await;
    assert!(logs.contains(r#"["a", "b", "c"]"#), "{logs}");
    session.stop().await;
}

/// A parameter's file missing without a default, and a result larger than a termination
/// message, each fail the step saying which output and why; a plain step beside them is not
/// wrapped by the agent.
#[tokio::test]
async fn outputs_the_agent_cannot_collect_fail_the_step_naming_them() {
    let Some(session) = Session::start("step-agent-failures").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: missing}
spec:
  containers:
    - stepName: make
      image: alpine:3.20
      command: [sh, -c, 'echo made']
      outputs:
        parameters: [{name: sha, valueFrom: {path: /tmp/sha}}]
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: large}
spec:
  containers:
    - stepName: big
      image: alpine:3.20
      command: [sh, -c, 'head -c 5000 /dev/zero | tr "\0" x']
    - {stepName: use, image: alpine:3.20, dependsOn: [big], command: [echo, "{{steps.big.outputs.result}}"]}
"#;
    session.create(manifest).await;
    session.wait_finished("missing").await;
    session.wait_finished("large").await;
    let missing = session.jsonpath("missing", "{.status.message}").await;
    assert!(
        missing.contains("output parameter sha: /tmp/sha does not exist"),
        "{missing}"
    );
    let large = session.jsonpath("large", "{.status.message}").await;
    assert!(
        large.contains("the standard output (result) is 5000 bytes") && large.contains("artifact"),
        "{large}"
    );
    for workflow in ["missing", "large"] {
        assert_eq!(
            session
                .jsonpath(workflow, "{.status.workflow-status}")
                .await,
            "Failed"
        );
    }
    session.stop().await;
}

/// Argo's coinflip in the bracket form a step name with a `-` needs: `flip-coin`'s result
/// decides which branch runs (here always heads, so that the test knows which).
#[tokio::test]
async fn a_when_reads_a_result_named_in_the_bracket_form() {
    let Some(session) = Session::start("step-agent-coinflip").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: coinflip}
spec:
  containers:
    - stepName: flip-coin
      image: alpine:3.20
      source: |
        echo heads
    - stepName: heads
      image: alpine:3.20
      dependsOn: [flip-coin]
      when: 'steps["flip-coin"].outputs.result == "heads"'
      command: [echo, "it was heads"]
    - stepName: tails
      image: alpine:3.20
      dependsOn: [flip-coin]
      when: "steps['flip-coin'].outputs[\"result\"] == 'tails'"
      command: [echo, "it was tails"]
"#;
    session.create(manifest).await;
    session.finished_as("coinflip", "Completed").await;
    let get = session.cli(&["get", "coinflip"]).await;
    for (step, phase) in [
        ("flip-coin", "Succeeded"),
        ("heads", "Succeeded"),
        ("tails", "Skipped"),
    ] {
        assert_eq!(row(&get, step)[1], phase, "{get}");
    }
    let logs = session.cli(&["logs", "coinflip", "--step", "heads"]).await;
    assert_eq!(logs, "heads: it was heads\n");
    session.stop().await;
}

/// A script is a file: Kubernetes' `$(VAR)` expansion (of a container's command, args and env
/// values) does not touch it, so `$$` is the shell's pid and `$(NAME)` is left to the shell;
/// only `{{...}}` is filled in.
#[tokio::test]
async fn a_script_reaches_the_shell_byte_for_byte() {
    let Some(session) = Session::start("step-agent-literal").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: literal}
spec:
  containers:
    - stepName: script
      image: alpine:3.20
      source: |
        printf '%s\n' 'kept: $(STEP_NAME) $$ $(NOT_SET) $$(STEP_NAME)'
        echo "pid: $$"
        echo x > /tmp/m-$$.yaml
        ls /tmp/m-*.yaml
        echo 'k=$(STEP_NAME)' >> "$WORKFLOW_OUTPUTS"
    - stepName: after
      image: alpine:3.20
      dependsOn: [script]
      source: |
        printf '%s\n' 'got {{steps.script.outputs.k}} $$'
"#;
    session.create(manifest).await;
    session.finished_as("literal", "Completed").await;
    let logs = session.cli(&["logs", "literal"]).await;
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.len(), 4, "{logs}");
    assert_eq!(
        lines[0],
        "script: kept: $(STEP_NAME) $$ $(NOT_SET) $$(STEP_NAME)"
    );
    let pid = lines[1].strip_prefix("script: pid: ").expect(&logs);
    assert!(pid.parse::<u32>().is_ok(), "{logs}");
    assert_eq!(lines[2], format!("script: /tmp/m-{pid}.yaml"));
    assert_eq!(lines[3], "after: got $(STEP_NAME) $$");
    session.stop().await;
}
