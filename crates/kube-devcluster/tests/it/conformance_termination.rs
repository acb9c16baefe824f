//! Termination messages, as kubectl and the official Python client see them: a container's
//! `terminationMessagePath` (default `/dev/termination-log`) is an empty file it may write, and
//! once it has terminated `state.terminated.message` is what it wrote, the last 4,096 bytes of it
//! (k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go, `getTerminationMessage`
//! with `kubecontainer.MaxContainerTerminationMessageLength`), or with `FallbackToLogsOnError`
//! the end of a failed container's log; a fresh file for each run, the previous run's message in
//! `lastState`; for a Job's pods too. A container whose process is not told of the path runs
//! unsandboxed, as before, and has no `message` (the field is `omitempty`).

use crate::support;

use crate::support::{Kubectl, setup};
use serde_json::Value;

/// Waits (`kubectl wait`) until the pod's phase is `phase`; the pod, as `kubectl get -o json`.
async fn pod_in_phase(kubectl: &Kubectl, name: &str, phase: &str) -> Value {
    kubectl
        .ok(&[
            "wait",
            &format!("--for=jsonpath={{.status.phase}}={phase}"),
            &format!("pod/{name}"),
            "--timeout=60s",
        ])
        .await;
    let pod = kubectl.ok(&["get", "pod", name, "-o", "json"]).await;
    serde_json::from_str(&pod).expect("json")
}

/// The state of the pod's (first) container.
fn container_status(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]
}

/// The message of the pod's container read through the Python client:
/// `{"message": state.terminated.message, "last": lastState.terminated.message}`.
async fn python_messages(cluster: &kube_devcluster::DevCluster, pod: &str) -> Value {
    let script = format!(
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
status = client.CoreV1Api().read_namespaced_pod("{pod}", "default").status.container_statuses[0]
last = status.last_state.terminated
print(json.dumps({{"message": status.state.terminated.message,
                  "last": last.message if last else None}}))
"#
    );
    support::python(cluster, &script).await
}

/// A step appends `key=value` lines to the file its env names (the workflow operator's
/// `$WORKFLOW_OUTPUTS`): the pod succeeds and its message is exactly those lines. The API
/// server's defaults are on the container.
#[tokio::test]
async fn a_container_told_of_its_message_file_reports_what_it_wrote() {
    let Some((cluster, kubectl)) = setup("termination_message_file").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: outputs}
spec:
  restartPolicy: Never
  containers:
  - name: step
    image: busybox
    command: ["sh", "-c", "printf 'a=1\n' >> \"$OUT\"; printf 'b=2\n' >> \"$OUT\"; echo wrote"]
    env: [{name: OUT, value: /dev/termination-log}]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", pod)])
        .await;
    let pod = pod_in_phase(&kubectl, "outputs", "Succeeded").await;
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");
    let terminated = &container_status(&pod)["state"]["terminated"];
    assert_eq!(terminated["message"], "a=1\nb=2\n", "{pod}");
    assert_eq!(terminated["exitCode"], 0, "{pod}");
    assert_eq!(kubectl.ok(&["logs", "outputs"]).await, "wrote\n");
    let seen = python_messages(&cluster, "outputs").await;
    assert_eq!(seen["message"], "a=1\nb=2\n", "{seen}");
}

/// A custom `terminationMessagePath` (given to the process in its arguments) works the same,
/// without making anything on the host, and
/// a message over 4,096 bytes keeps its last 4,096 (`tail.ReadAtMost`); the pod made by the
/// Python client.
#[tokio::test]
async fn a_custom_path_works_and_a_long_message_keeps_its_last_4096_bytes() {
    let Some((cluster, kubectl)) = setup("termination_message_custom_path").await else {
        return;
    };
    support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
def pod(name, path, script):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", containers=[client.V1Container(
            name="main", image="busybox", command=["sh", "-c"], args=[script],
            termination_message_path=path)]))
v1.create_namespaced_pod("default", pod(
    "custom", "/tmp/results/message", "printf done > /tmp/results/message"))
v1.create_namespaced_pod("default", pod(
    "long", "/dev/termination-log",
    "{ printf HEAD; head -c 5000 /dev/zero | tr '\\0' x; printf TAIL; } > /dev/termination-log"))
print(json.dumps(None))
"#,
    )
    .await;
    let custom = pod_in_phase(&kubectl, "custom", "Succeeded").await;
    assert_eq!(
        custom["spec"]["containers"][0]["terminationMessagePath"],
        "/tmp/results/message"
    );
    let terminated = &container_status(&custom)["state"]["terminated"];
    assert_eq!(terminated["message"], "done", "{custom}");
    assert!(
        !std::path::Path::new("/tmp/results").exists(),
        "the message file's directory was made on the host"
    );

    let long = pod_in_phase(&kubectl, "long", "Succeeded").await;
    let message = container_status(&long)["state"]["terminated"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(message.len(), 4096, "{long}");
    assert_eq!(message, format!("{}TAIL", "x".repeat(4092)));
    let seen = python_messages(&cluster, "long").await;
    assert_eq!(seen["message"], message.as_str());
}

/// `FallbackToLogsOnError`: a failed container that wrote no message is explained by the end of
/// its log, its last 80 lines (`MaxContainerTerminationMessageLogLines`), as kubectl shows.
#[tokio::test]
async fn fallback_to_logs_on_error_gives_a_failed_containers_log_tail() {
    let Some((cluster, kubectl)) = setup("termination_message_fallback").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: crashes}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "i=1; while [ $i -le 100 ]; do echo line $i; i=$((i+1)); done; exit 3"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", pod)])
        .await;
    let pod = pod_in_phase(&kubectl, "crashes", "Failed").await;
    let want: String = (21..=100).map(|i| format!("line {i}\n")).collect();
    let terminated = &container_status(&pod)["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 3, "{pod}");
    assert_eq!(terminated["reason"], "Error", "{pod}");
    assert_eq!(terminated["message"], want.as_str(), "{pod}");
    let jsonpath = kubectl
        .ok(&[
            "get",
            "pod",
            "crashes",
            "-o",
            "jsonpath={.status.containerStatuses[0].state.terminated.message}",
        ])
        .await;
    assert_eq!(jsonpath, want);
    let seen = python_messages(&cluster, "crashes").await;
    assert_eq!(seen["message"], want.as_str());
}

/// A container whose command, args and env do not mention its message path runs as a plain
/// local process, as before (it sees the host's /tmp, as a sandbox does through its overlay),
/// and its terminated state has no `message` at all; the API server's defaults are on its spec.
#[tokio::test]
async fn a_container_not_told_of_the_path_runs_unsandboxed_without_a_message() {
    let Some((cluster, kubectl)) = setup("termination_message_unsandboxed").await else {
        return;
    };
    let marker = tempfile::Builder::new()
        .prefix("devcluster-host-marker-")
        .tempfile_in("/tmp")
        .unwrap();
    let pod = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: plain}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "test -e {} && echo host-tmp"]
    env: [{{name: GREETING, value: hello}}]
"#,
        marker.path().display()
    );
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", &pod)])
        .await;
    let pod = pod_in_phase(&kubectl, "plain", "Succeeded").await;
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");
    assert_eq!(kubectl.ok(&["logs", "plain"]).await, "host-tmp\n");
    let terminated = container_status(&pod)["state"]["terminated"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(terminated["reason"], "Completed", "{pod}");
    assert!(!terminated.contains_key("message"), "{pod}");
    let seen = python_messages(&cluster, "plain").await;
    assert_eq!(seen["message"], Value::Null, "{seen}");
}

/// A container with only a `workingDir` (in a pod without volumes) runs there, sandboxed as
/// before; a sandboxed container has its message file even when its command does not name it
/// (`ls /dev` shows it), and wrote nothing to it, so it has no message.
#[tokio::test]
async fn a_working_dir_alone_sandboxes_the_container_with_its_message_file() {
    let Some((_cluster, kubectl)) = setup("termination_message_working_dir").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: workdir}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    workingDir: /tmp/work/here
    command: ["sh", "-c", "pwd; ls /dev"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", pod)])
        .await;
    let pod = pod_in_phase(&kubectl, "workdir", "Succeeded").await;
    let logs = kubectl.ok(&["logs", "workdir"]).await;
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.first(), Some(&"/tmp/work/here"), "{logs}");
    assert!(lines.contains(&"termination-log"), "{logs}");
    let terminated = &container_status(&pod)["state"]["terminated"];
    assert!(terminated.get("message").is_none(), "{pod}");
}

/// Each run of a restarted container has a fresh, empty message file (appending does not carry
/// the first run's lines over), and the first run's message is in `lastState`.
#[tokio::test]
async fn a_restarted_container_has_a_fresh_file_and_its_last_message_in_last_state() {
    let Some((cluster, kubectl)) = setup("termination_message_restart").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: retried}
spec:
  restartPolicy: OnFailure
  volumes: [{name: state, emptyDir: {}}]
  containers:
  - name: main
    image: busybox
    volumeMounts: [{name: state, mountPath: /state}]
    command:
    - sh
    - -c
    - |
      n=$(( $(cat /state/runs 2>/dev/null || echo 0) + 1 ))
      echo $n > /state/runs
      echo "run=$n" >> /dev/termination-log
      [ $n -ge 2 ]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", pod)])
        .await;
    let pod = pod_in_phase(&kubectl, "retried", "Succeeded").await;
    let status = container_status(&pod);
    assert_eq!(status["restartCount"], 1, "{pod}");
    assert_eq!(status["state"]["terminated"]["message"], "run=2\n", "{pod}");
    assert_eq!(
        status["lastState"]["terminated"]["message"], "run=1\n",
        "{pod}"
    );
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 1, "{pod}");
    let seen = python_messages(&cluster, "retried").await;
    assert_eq!(seen["message"], "run=2\n", "{seen}");
    assert_eq!(seen["last"], "run=1\n", "{seen}");
}

/// The workflow operator reads its outputs from a Job's pod: the Job completes and its pod
/// (found by the `job-name` label) carries the message.
#[tokio::test]
async fn a_jobs_pod_carries_its_termination_message() {
    let Some((_cluster, kubectl)) = setup("termination_message_job").await else {
        return;
    };
    let job = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: produce}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: step
        image: busybox
        command: ["sh", "-c", "echo result=42 >> $(WORKFLOW_OUTPUTS)"]
        env: [{name: WORKFLOW_OUTPUTS, value: /dev/termination-log}]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("job.yaml", job)])
        .await;
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Complete",
            "job/produce",
            "--timeout=60s",
        ])
        .await;
    // The Job completes once its pod's status says it succeeded, message and all.
    let message = kubectl
        .ok(&[
            "get",
            "pods",
            "-l",
            "job-name=produce",
            "-o",
            "jsonpath={.items[*].status.containerStatuses[0].state.terminated.message}",
        ])
        .await;
    assert_eq!(message, "result=42\n");
}
