//! Real workloads end to end on the embedded control plane, through kubectl and the
//! `workflow-operator` CLI: a step reads a Secret and a
//! ConfigMap from its environment and from a mounted volume under its own service account; a
//! step that cannot start, because its service account or its claim does not exist, no Node can
//! take its pod, or its command does not exist, fails its workflow naming the step and the
//! cause.

use crate::support;

use support::session::{Session, row};

/// `examples/secrets-and-volumes.yaml` (a Secret through `valueFrom`, a ConfigMap
/// through `envFrom` and mounted as a volume, under `serviceAccountName`) completes, and its log
/// shows the values read.
#[tokio::test]
async fn a_step_reads_secrets_configmaps_and_volumes_under_its_service_account() {
    let Some(session) = Session::start("secrets_and_volumes").await else {
        return;
    };
    session
        .k(&["apply", "-f", "examples/secrets-and-volumes.yaml"])
        .await;
    session.wait_finished("secrets-and-volumes").await;
    let message = session
        .jsonpath("secrets-and-volumes", "{.status.message}")
        .await;
    assert_eq!(
        session
            .jsonpath("secrets-and-volumes", "{.status.workflow-status}")
            .await,
        "Completed",
        "{message}"
    );
    let logs = session.cli(&["logs", "secrets-and-volumes"]).await;
    assert_eq!(
        logs, "read: password=s3cret greeting=hello file=hello\n",
        "{logs}"
    );
    let account = session
        .k(&[
            "get",
            "pods",
            "-l",
            "workflow.crd.com/workflow=secrets-and-volumes",
            "-o",
            "jsonpath={.items[0].spec.serviceAccountName}",
        ])
        .await;
    assert_eq!(account, "demo-runner");
    session.stop().await;
}

/// Runs `manifest` (a workflow named `name` with one step `step` that cannot start, and a
/// `startTimeout` of 2 s) to its end, and checks that the workflow failed with `step STEP cannot
/// start: ...` containing `cause`, as `kubectl get`, `kubectl wait` and `workflow-operator get`
/// show it.
async fn fails_naming_the_cause(session: &Session, manifest: &str, name: &str, cause: &str) {
    session.create(manifest).await;
    session.wait_finished(name).await;
    assert_eq!(
        session.jsonpath(name, "{.status.workflow-status}").await,
        "Failed"
    );
    let message = session.jsonpath(name, "{.status.message}").await;
    assert!(
        message.starts_with("step only cannot start: ") && message.contains(cause),
        "{message}"
    );
    assert_eq!(
        session.jsonpath(name, "{.status.steps[0].reason}").await,
        "CannotStart"
    );
    let text = session.cli(&["get", name]).await;
    assert!(text.contains(&message), "{text}");
    assert_eq!(row(&text, "only")[1], "Failed", "{text}");
}

/// A missing service account: the API server refuses the step's pod, so no pod
/// exists; the cause comes from the Job controller's `FailedCreate` Event.
#[tokio::test]
async fn a_step_under_a_missing_service_account_fails_naming_it() {
    let Some(session) = Session::start("missing_service_account").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: no-account}
spec:
  startTimeout: 2
  podTemplate: {serviceAccountName: runner}
  containers:
    - {stepName: only, image: busybox:1.36, command: ["true"]}
"#;
    fails_naming_the_cause(
        &session,
        manifest,
        "no-account",
        "FailedCreate: Error creating: pods \"no-account-only-",
    )
    .await;
    let message = session.jsonpath("no-account", "{.status.message}").await;
    assert!(
        message.ends_with(
            "is forbidden: error looking up service account default/runner: \
             serviceaccount \"runner\" not found"
        ),
        "{message}"
    );
    let pods = session
        .k(&[
            "get",
            "pods",
            "-l",
            "workflow.crd.com/workflow=no-account",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(pods, "", "no pod was ever created");
    session.stop().await;
}

/// A pod that never starts: its claim does not exist, so it is never scheduled;
/// the cause is the scheduler's.
#[tokio::test]
async fn a_step_whose_pod_is_never_scheduled_fails_naming_why() {
    let Some(session) = Session::start("pod_never_scheduled").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: no-claim}
spec:
  startTimeout: 2
  podTemplate:
    volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
  containers:
    - stepName: only
      image: busybox:1.36
      command: ["ls", "/data"]
      volumeMounts: [{name: data, mountPath: /data}]
"#;
    fails_naming_the_cause(
        &session,
        manifest,
        "no-claim",
        "Unschedulable: 0/1 nodes are available: persistentvolumeclaim \"data\" not found.",
    )
    .await;
    session.stop().await;
}

/// A step whose pod no Node can take (a `nodeSelector` no label matches) stays `Pending` under
/// the embedded control plane's scheduler, as on a real cluster, and fails at its
/// `startTimeout` with the scheduler's message.
#[tokio::test]
async fn a_step_no_node_can_take_fails_at_its_start_timeout_with_the_schedulers_message() {
    let Some(session) = Session::start("pod_no_node_matches").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: no-node}
spec:
  startTimeout: 2
  podTemplate:
    nodeSelector: {disk: ssd}
  containers:
    - {stepName: only, image: busybox:1.36, command: ["true"]}
"#;
    fails_naming_the_cause(
        &session,
        manifest,
        "no-node",
        "Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node \
         affinity/selector. no new claims to deallocate, preemption: 0/1 nodes are available: 1 \
         Preemption is not helpful for scheduling.",
    )
    .await;
    session.stop().await;
}

/// A command not found: the container cannot start (`StartError`, exit code 128,
/// as containerd reports an `exec` that fails), so the step fails at once with that cause, and
/// `kubectl wait`, `kubectl get` and `workflow-operator get` say so.
#[tokio::test]
async fn a_step_whose_command_is_not_found_fails_naming_it() {
    let Some(session) = Session::start("command_not_found").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: typo}
spec:
  containers:
    - {stepName: only, image: busybox:1.36, command: [no-such-command-anywhere]}
"#;
    session.create(manifest).await;
    session.wait_finished("typo").await;
    assert_eq!(
        session.jsonpath("typo", "{.status.workflow-status}").await,
        "Failed"
    );
    let message = session.jsonpath("typo", "{.status.message}").await;
    assert!(
        message.starts_with("step only failed: exit code 128: StartError: ")
            && message.contains("no-such-command-anywhere"),
        "{message}"
    );
    assert_eq!(
        session
            .jsonpath("typo", "{.status.steps[0].exitCode}")
            .await,
        "128"
    );
    let text = session.cli(&["get", "typo"]).await;
    assert!(text.contains(&message), "{text}");
    assert_eq!(row(&text, "only")[1], "Failed", "{text}");
    session.stop().await;
}
