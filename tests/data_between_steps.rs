//! Data between steps end to end on the embedded control plane, through kubectl and the
//! `workflow-operator` CLI (issue 16, acceptance 1): a file written to the workspace by one
//! step is read by the next; an output is substituted into a dependent's command; a `when`
//! runs one branch and skips the other.

mod support;

use support::session::Session;

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
