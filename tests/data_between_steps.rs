//! Data between steps end to end on the embedded control plane, through kubectl and the
//! `workflow-operator` CLI (issue 16, acceptance 1): a file written to the workspace by one
//! step is read by the next; an output is substituted into a dependent's command; a `when`
//! runs one branch and skips the other.

mod support;

use support::session::{Session, row};

/// A workflow with `spec.workspace`: one claim for the run, owned by the workflow, mounted in
/// every step at its `mountPath`; what `write` leaves there, `read` finds. Deleting the workflow
/// deletes the claim.
#[tokio::test]
async fn a_file_written_to_the_workspace_by_one_step_is_read_by_the_next() {
    let Some(session) = Session::start("workspace").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: shared}
spec:
  workspace:
    mountPath: /work
    volumeClaimTemplate:
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  containers:
    - {stepName: write, image: busybox:1.36, command: [sh, -c, 'echo "made by write" > "$WORKFLOW_WORKSPACE/note"']}
    - {stepName: read, image: busybox:1.36, dependsOn: [write], command: [sh, -c, 'cat /work/note']}
"#;
    session.create(manifest).await;
    session.wait_finished("shared").await;
    let message = session.jsonpath("shared", "{.status.message}").await;
    assert_eq!(
        session
            .jsonpath("shared", "{.status.workflow-status}")
            .await,
        "Completed",
        "{message}"
    );
    let logs = session.cli(&["logs", "shared", "--step", "read"]).await;
    assert!(logs.contains("made by write"), "{logs}");
    let claims = session
        .k(&[
            "get",
            "pvc",
            "-l",
            "workflow.crd.com/workflow=shared",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.ownerReferences[0].kind}{\"\\n\"}{end}",
        ])
        .await;
    let lines: Vec<Vec<&str>> = claims.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 1, "one claim for the run: {claims}");
    assert!(lines[0][0].starts_with("shared-ws-"), "{claims}");
    assert_eq!(lines[0][1..], ["Bound", "WorkFlow"], "{claims}");
    session.k(&["delete", "wf", "shared", "--wait=true"]).await;
    kube_devcluster::testing::eventually(
        "the workspace claim deleted with its workflow",
        std::time::Duration::from_secs(30),
        || async {
            let left = session
                .k(&[
                    "get",
                    "pvc",
                    "-l",
                    "workflow.crd.com/workflow=shared",
                    "-o",
                    "name",
                ])
                .await;
            left.trim().is_empty().then_some(())
        },
    )
    .await;
    session.stop().await;
}

/// `examples/outputs.yaml`: `check` writes `ok=yes` and `version=1.4.2`; `deploy` runs (its
/// `when` is true) with the version substituted into its command; `alert` is skipped; `report`
/// runs after both. `get` and the status say so.
#[tokio::test]
async fn an_output_is_substituted_and_a_when_runs_one_branch_and_skips_the_other() {
    let Some(session) = Session::start("outputs_and_when").await else {
        return;
    };
    session.k(&["apply", "-f", "examples/outputs.yaml"]).await;
    session.wait_finished("outputs").await;
    let message = session.jsonpath("outputs", "{.status.message}").await;
    assert_eq!(
        session
            .jsonpath("outputs", "{.status.workflow-status}")
            .await,
        "Completed",
        "{message}"
    );
    let deploy = session.cli(&["logs", "outputs", "--step", "deploy"]).await;
    assert!(deploy.contains("deploying 1.4.2"), "{deploy}");
    assert_eq!(
        session
            .jsonpath(
                "outputs",
                r#"{.status.steps[?(@.name=="check")].outputs.version}"#
            )
            .await,
        "1.4.2"
    );
    assert_eq!(
        session
            .jsonpath("outputs", r#"{.status.steps[?(@.name=="alert")].reason}"#)
            .await,
        "WhenFalse"
    );
    let get = session.cli(&["get", "outputs"]).await;
    assert_eq!(row(&get, "alert")[1], "Skipped", "{get}");
    assert_eq!(row(&get, "report")[1], "Succeeded", "{get}");
    session.stop().await;
}

/// Bad outputs are answered clearly (issue 16 acceptance 2): outputs at the kubelet's 4 KiB
/// limit fail their step; a named output the step did not write fails the step naming it.
#[tokio::test]
async fn outputs_over_4_kib_or_missing_fail_their_step_saying_why() {
    let Some(session) = Session::start("bad_outputs").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: too-big}
spec:
  containers:
    - {stepName: big, image: busybox:1.36, command: [sh, -c, 'i=0; while [ $i -lt 500 ]; do echo "k$i=0123456789" >> "$WORKFLOW_OUTPUTS"; i=$((i+1)); done']}
    - {stepName: use, image: busybox:1.36, dependsOn: [big], command: [echo, '{{steps.big.outputs.k1}}']}
"#;
    session.create(manifest).await;
    session.wait_finished("too-big").await;
    let message = session.jsonpath("too-big", "{.status.message}").await;
    assert!(
        message.starts_with("step big failed: its outputs reached 4096 bytes"),
        "{message}"
    );
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: missing}
spec:
  containers:
    - {stepName: a, image: busybox:1.36, command: [sh, -c, 'echo "x=1" >> "$WORKFLOW_OUTPUTS"']}
    - {stepName: b, image: busybox:1.36, dependsOn: [a], command: [echo, '{{steps.a.outputs.y}}']}
"#;
    session.create(manifest).await;
    session.wait_finished("missing").await;
    assert_eq!(
        session.jsonpath("missing", "{.status.message}").await,
        r#"step b failed: {{steps.a.outputs.y}}: step "a" wrote no output "y""#
    );
    let get = session.cli(&["get", "missing"]).await;
    assert_eq!(row(&get, "b")[1], "Failed", "{get}");
    session.stop().await;
}

/// A reference to a step that does not run before it, and a `when` that does not compile:
/// the API server stores them (a CRD cannot check them), the operator fails each workflow at
/// once naming the step and the reference, and `validate` refuses the same files (issue 16
/// acceptance 2).
#[tokio::test]
async fn a_reference_not_upstream_or_a_when_that_does_not_compile_fails_at_once() {
    let Some(session) = Session::start("bad_references").await else {
        return;
    };
    let cases = [
        (
            "sideways",
            "    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n    - {stepName: b, image: busybox:1.36, command: [echo, '{{steps.a.outputs.x}}']}\n",
            r#"invalid workflow: step "b": {{steps.a.outputs.x}} names step "a", which does not run before it"#,
        ),
        (
            "broken-when",
            "    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n    - {stepName: b, image: busybox:1.36, dependsOn: [a], when: 'steps.a.outputs.x ==', command: [\"true\"]}\n",
            r#"invalid workflow: step "b": when "steps.a.outputs.x ==" does not compile"#,
        ),
    ];
    for (name, steps, message) in cases {
        let manifest = format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n  containers:\n{steps}"
        );
        let file = session.write_manifest(&format!("{name}.yaml"), &manifest);
        let refused = session.cli_refused(&["validate", &file]).await;
        let reason = message.trim_start_matches("invalid workflow: ");
        assert!(refused.contains(reason), "{refused}");
        session.k(&["create", "-f", &file]).await;
        session.wait_finished(name).await;
        assert_eq!(
            session.jsonpath(name, "{.status.workflow-status}").await,
            "Failed"
        );
        let got = session.jsonpath(name, "{.status.message}").await;
        assert!(got.starts_with(message), "{got}");
        let jobs = session
            .k(&[
                "get",
                "jobs",
                "-l",
                &format!("workflow.crd.com/workflow={name}"),
                "-o",
                "name",
            ])
            .await;
        assert_eq!(jobs, "", "no step ran");
    }
    session.stop().await;
}
