//! The kubelet's and the Secret strategy's side of the control plane, as kubectl and the official
//! Python client see it: `stringData` folded into `data`, container env from ConfigMaps, Secrets
//! and the pod's fields (and `CreateContainerConfigError` while one is missing), pod log options
//! (`follow`, `tailLines`, `timestamps`, `sinceSeconds`, `limitBytes`, `container`,
//! `previous`), graceful pod deletion,
//! containers without a `command` (the built-in entrypoints of common images), and readiness
//! probes.

use crate::support;

use std::time::Duration;

use crate::support::{Kubectl, get, setup, wait_phase};
use kube_devcluster::testing::eventually;
use serde_json::{Value, json};

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

// ---------------------------------------------------------------------------------------------
// 1. Secrets

#[tokio::test]
async fn secret_string_data_is_folded_into_data_on_create_and_update() {
    let Some((cluster, kubectl)) = setup("secret_string_data").await else {
        return;
    };
    let manifest = kubectl.manifest(
        "secret.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: s1}}\ndata:\n  kept: {}\n  clash: {}\nstringData:\n  a: b\n  clash: from-string-data\n",
            b64("kept"),
            b64("from-data")
        ),
    );
    kubectl.ok(&["apply", "-f", &manifest]).await;
    let secret = get(&kubectl, "secret", "s1").await.unwrap();
    assert_eq!(secret["data"]["a"], "Yg==", "{secret}");
    assert_eq!(secret["data"]["kept"], b64("kept"), "{secret}");
    assert_eq!(secret["data"]["clash"], b64("from-string-data"), "{secret}");
    assert!(secret.get("stringData").is_none(), "{secret}");
    assert_eq!(secret["type"], "Opaque", "{secret}");

    // Applying again with a changed stringData is an update (a patch): folded again.
    let manifest = kubectl.manifest(
        "secret2.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s1}\nstringData:\n  a: changed\n",
    );
    kubectl.ok(&["apply", "-f", &manifest]).await;
    let secret = get(&kubectl, "secret", "s1").await.unwrap();
    assert_eq!(secret["data"]["a"], b64("changed"), "{secret}");
    assert!(secret.get("stringData").is_none(), "{secret}");

    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
body = client.V1Secret(metadata=client.V1ObjectMeta(name="py"), string_data={"user": "admin"})
created = v1.create_namespaced_secret("default", body)
created.string_data = {"user": "root", "extra": "x"}
replaced = v1.replace_namespaced_secret("py", "default", created)
print(json.dumps({"created": created.data, "created_type": v1.read_namespaced_secret("py", "default").type,
                  "replaced": replaced.data, "string_data": replaced.string_data}))
"#,
    )
    .await;
    assert_eq!(seen["created_type"], "Opaque", "{seen}");
    assert_eq!(
        seen["replaced"],
        json!({"user": b64("root"), "extra": b64("x")}),
        "{seen}"
    );
    assert_eq!(seen["string_data"], Value::Null, "{seen}");
}

// ---------------------------------------------------------------------------------------------
// 2. Env from ConfigMaps, Secrets and the pod's fields

const ENV_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: envpod, labels: {app: demo}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo cm=$FROM_CM secret=$FROM_SECRET name=$POD_NAME ns=$POD_NS app=$APP ip=$IP pre=$CFG_color sec=$S_user over=$color opt=[$OPT]"]
    envFrom:
    - configMapRef: {name: settings}
      prefix: CFG_
    - secretRef: {name: creds}
      prefix: S_
    - configMapRef: {name: absent, optional: true}
    - configMapRef: {name: settings}
    env:
    - name: FROM_CM
      valueFrom: {configMapKeyRef: {name: settings, key: color}}
    - name: FROM_SECRET
      valueFrom: {secretKeyRef: {name: creds, key: user}}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NS
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: APP
      valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}
    - name: IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: color
      value: overridden
    - name: OPT
      valueFrom: {secretKeyRef: {name: creds, key: nope, optional: true}}
"#;

#[tokio::test]
async fn env_comes_from_configmaps_secrets_and_the_pods_fields() {
    let Some((_cluster, kubectl)) = setup("env_from_configmaps_and_secrets").await else {
        return;
    };
    // (`kubectl create configmap|secret` send protobuf: applied from YAML here.)
    let objects = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: blue}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {user: admin}\n";
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("objects.yaml", objects)])
        .await;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", ENV_POD)])
        .await;
    wait_phase(&kubectl, "envpod", &["Succeeded", "Failed"]).await;
    let logs = kubectl.ok(&["logs", "envpod"]).await;
    assert_eq!(
        logs.trim(),
        "cm=blue secret=admin name=envpod ns=default app=demo ip=127.0.0.1 pre=blue sec=admin over=overridden opt=[]",
        "{logs}"
    );
}

/// The container's waiting state; `None` while it has none.
fn waiting(pod: &Value) -> Option<(String, String)> {
    let w = pod.pointer("/status/containerStatuses/0/state/waiting")?;
    Some((
        w["reason"].as_str()?.to_string(),
        w["message"].as_str().unwrap_or_default().to_string(),
    ))
}

#[tokio::test]
async fn a_missing_secret_or_key_holds_the_container_until_it_exists() {
    let Some((_cluster, kubectl)) = setup("missing_secret_holds_the_container").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: waits}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo user=$USER_NAME"]
    env:
    - name: USER_NAME
      valueFrom: {secretKeyRef: {name: creds, key: user}}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", pod)])
        .await;
    let (reason, message) = eventually("the config error", Duration::from_secs(20), || async {
        waiting(&get(&kubectl, "pod", "waits").await?)
    })
    .await;
    assert_eq!(reason, "CreateContainerConfigError");
    assert_eq!(message, "secret \"creds\" not found");
    let pod = get(&kubectl, "pod", "waits").await.unwrap();
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");

    // The Secret, without the key: the message changes at the kubelet's next try.
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {other: x}\n";
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("secret.yaml", secret)])
        .await;
    eventually("the missing key", Duration::from_secs(30), || async {
        let (_, message) = waiting(&get(&kubectl, "pod", "waits").await?)?;
        (message == "couldn't find key user in Secret default/creds").then_some(())
    })
    .await;
    kubectl
        .ok(&[
            "patch",
            "secret",
            "creds",
            "-p",
            &format!("{{\"data\": {{\"user\": \"{}\"}}}}", b64("admin")),
        ])
        .await;
    wait_phase(&kubectl, "waits", &["Succeeded"]).await;
    assert_eq!(kubectl.ok(&["logs", "waits"]).await.trim(), "user=admin");

    let cm_pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: cmwaits}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["true"]
    envFrom:
    - configMapRef: {name: nowhere}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("cm.yaml", cm_pod)])
        .await;
    let (reason, message) = eventually("the config error", Duration::from_secs(20), || async {
        waiting(&get(&kubectl, "pod", "cmwaits").await?)
    })
    .await;
    assert_eq!(reason, "CreateContainerConfigError");
    assert_eq!(message, "configmap \"nowhere\" not found");
}

// ---------------------------------------------------------------------------------------------
// 3. Pod logs

#[tokio::test]
async fn pod_logs_follow_tail_timestamps_since_and_limit_bytes() {
    let Some((cluster, kubectl)) = setup("pod_logs_options").await else {
        return;
    };
    let manifest = r#"
apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo one; echo two; echo three; sleep 2; echo four"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod.yaml", manifest)])
        .await;
    wait_phase(&kubectl, "talker", &["Running", "Succeeded"]).await;
    // Follow streams until the container ends.
    let followed = kubectl.ok(&["logs", "-f", "talker"]).await;
    assert_eq!(followed, "one\ntwo\nthree\nfour\n");
    let pod = get(&kubectl, "pod", "talker").await.unwrap();
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");

    assert_eq!(
        kubectl.ok(&["logs", "talker", "--tail=2"]).await,
        "three\nfour\n"
    );
    assert_eq!(kubectl.ok(&["logs", "talker", "--tail=0"]).await, "");
    assert_eq!(
        kubectl.ok(&["logs", "talker", "--limit-bytes=6"]).await,
        "one\ntw"
    );
    let stamped = kubectl.ok(&["logs", "talker", "--timestamps"]).await;
    let lines: Vec<&str> = stamped.lines().collect();
    assert_eq!(lines.len(), 4, "{stamped}");
    for (line, text) in lines.iter().zip(["one", "two", "three", "four"]) {
        let (stamp, rest) = line.split_once(' ').unwrap();
        assert_eq!(rest, text);
        let parsed = chrono::DateTime::parse_from_rfc3339(stamp).unwrap();
        assert!(stamp.ends_with('Z') && stamp.contains('.'), "{stamp}");
        assert!(parsed <= chrono::Utc::now());
    }
    let fourth = chrono::DateTime::parse_from_rfc3339(lines[3].split_once(' ').unwrap().0)
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert_eq!(
        kubectl.ok(&["logs", "talker", "--since=1h"]).await,
        "one\ntwo\nthree\nfour\n"
    );
    // sinceTime (whole seconds) after the third line and before the fourth (two seconds later).
    let third = chrono::DateTime::parse_from_rfc3339(lines[2].split_once(' ').unwrap().0)
        .unwrap()
        .with_timezone(&chrono::Utc);
    let after_third = chrono::DateTime::from_timestamp(third.timestamp() + 1, 0).unwrap();
    assert!(third < after_third && after_third < fourth);
    let since_time = after_third.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = kubectl
        .ok(&["logs", "talker", &format!("--since-time={since_time}")])
        .await;
    assert_eq!(out, "four\n");

    // The Python client, following as a stream.
    let pod2 = manifest.replace("talker", "talker2");
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pod2.yaml", &pod2)])
        .await;
    wait_phase(&kubectl, "talker2", &["Running", "Succeeded"]).await;
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
resp = v1.read_namespaced_pod_log("talker2", "default", follow=True, _preload_content=False)
chunks = [c.decode() for c in resp.stream()]
phase = v1.read_namespaced_pod("talker2", "default").status.phase
tail = v1.read_namespaced_pod_log("talker2", "default", tail_lines=1)
since = v1.read_namespaced_pod_log("talker2", "default", since_seconds=3600)
print(json.dumps({"followed": "".join(chunks), "phase": phase, "tail": tail, "since": since}))
"#,
    )
    .await;
    assert_eq!(seen["followed"], "one\ntwo\nthree\nfour\n", "{seen}");
    assert_eq!(seen["phase"], "Succeeded", "{seen}");
    assert_eq!(seen["tail"], "four\n", "{seen}");
    assert_eq!(seen["since"], "one\ntwo\nthree\nfour\n", "{seen}");
}

/// A container that keeps crashing under `restartPolicy: Always` is restarted at once the first
/// time, then waits the kubelet's back-off of 10 s (doubling to 5 minutes) in
/// `CrashLoopBackOff`, with the kubelet's message, counting the restart it made.
#[tokio::test]
async fn a_crashing_container_backs_off_as_the_kubelet_does() {
    let Some((_cluster, kubectl)) = setup("crash_loop_back_off").await else {
        return;
    };
    let runs = kubectl.manifest("runs", "");
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: crasher}}\nspec:\n  restartPolicy: Always\n  \
         containers:\n  - name: main\n    image: busybox\n    \
         command: [sh, -c, 'echo run >> {runs}; exit 3']\n"
    );
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("crasher.yaml", &pod)])
        .await;
    let status = eventually("crasher backing off", Duration::from_secs(20), || async {
        let pod = get(&kubectl, "pod", "crasher").await?;
        let status = pod["status"]["containerStatuses"][0].clone();
        (status["state"]["waiting"]["reason"] == "CrashLoopBackOff").then_some((pod, status))
    })
    .await;
    let (pod, status) = status;
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        status["state"]["waiting"]["message"],
        format!("back-off 10s restarting failed container=main pod=crasher_default({uid})"),
        "{status}"
    );
    assert_eq!(status["restartCount"], 1, "{status}");
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 3, "{status}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\nrun\n");
    let table = support::rows(&kubectl.ok(&["get", "pod", "crasher"]).await);
    assert_eq!(
        table[1][1..4],
        ["0/1", "CrashLoopBackOff", "1"],
        "{table:?}"
    );
}

#[tokio::test]
async fn pod_logs_of_a_named_container_and_of_the_previous_run() {
    let Some((cluster, kubectl)) = setup("pod_logs_container_previous").await else {
        return;
    };
    // Fails its first run and succeeds its second: two runs, each with a log of its own.
    let marker = kubectl.manifest("ran-once", "");
    std::fs::remove_file(&marker).unwrap();
    let restarter = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: restarter}}
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "if [ -f {marker} ]; then echo second; else touch {marker}; echo first; exit 1; fi"]
"#
    );
    let single = r#"
apiVersion: v1
kind: Pod
metadata: {name: single}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["echo", "only"]
---
apiVersion: v1
kind: Pod
metadata: {name: pair}
spec:
  restartPolicy: Never
  initContainers:
  - name: setup
    image: busybox
    command: ["true"]
  containers:
  - name: main
    image: busybox
    command: ["echo", "main says"]
  - name: side
    image: busybox
    command: ["echo", "side says"]
"#;
    kubectl
        .ok(&[
            "apply",
            "-f",
            &kubectl.manifest("restarter.yaml", &restarter),
        ])
        .await;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("single.yaml", single)])
        .await;
    let pod = wait_phase(&kubectl, "restarter", &["Succeeded"]).await;
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 1,
        "{pod}"
    );
    wait_phase(&kubectl, "single", &["Succeeded"]).await;
    wait_phase(&kubectl, "pair", &["Succeeded"]).await;

    assert_eq!(kubectl.ok(&["logs", "restarter"]).await, "second\n");
    assert_eq!(
        kubectl.ok(&["logs", "restarter", "-c", "main"]).await,
        "second\n"
    );
    assert_eq!(
        kubectl.ok(&["logs", "restarter", "--previous"]).await,
        "first\n"
    );

    let refused = |out: support::Output, message: &str| {
        assert!(!out.success, "{}", out.stdout);
        assert!(
            out.stderr
                .contains(&format!("Error from server (BadRequest): {message}")),
            "{}",
            out.stderr
        );
    };
    refused(
        kubectl.run(&["logs", "single", "--previous"]).await,
        r#"previous terminated container "main" in pod "single" not found"#,
    );
    // kubectl picks the first container itself; the embedded kubelet runs only that one.
    assert_eq!(kubectl.ok(&["logs", "pair"]).await, "main says\n");
    refused(
        kubectl.run(&["logs", "pair", "-c", "side"]).await,
        r#"container "side" in pod "pair" is not available"#,
    );

    // The Python client sends no container unless told: the server picks or asks for one.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
only = v1.read_namespaced_pod_log("single", "default")
try:
    v1.read_namespaced_pod_log("pair", "default")
    pair = None
except ApiException as e:
    pair = {"status": e.status, "message": json.loads(e.body)["message"]}
try:
    v1.read_namespaced_pod_log("restarter", "default", container="nope")
    nope = None
except ApiException as e:
    nope = {"status": e.status, "message": json.loads(e.body)["message"]}
print(json.dumps({"only": only, "pair": pair, "nope": nope}))
"#,
    )
    .await;
    assert_eq!(seen["only"], "only\n", "{seen}");
    assert_eq!(seen["pair"]["status"], 400, "{seen}");
    assert_eq!(
        seen["pair"]["message"],
        "a container name must be specified for pod pair, choose one of: [setup main side]",
        "{seen}"
    );
    // (kubectl refuses an unknown container itself, before asking.)
    assert_eq!(seen["nope"]["status"], 400, "{seen}");
    assert_eq!(
        seen["nope"]["message"], "container nope is not valid for pod restarter",
        "{seen}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Graceful deletion

#[tokio::test]
async fn deleting_a_running_pod_terminates_it_gracefully() {
    let Some((cluster, kubectl)) = setup("graceful_pod_deletion").await else {
        return;
    };
    // Exits on SIGTERM after saying so: the wait ends at once.
    let polite = r#"
apiVersion: v1
kind: Pod
metadata: {name: polite}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo started; while true; do sleep 0.1; done"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("polite.yaml", polite)])
        .await;
    wait_phase(&kubectl, "polite", &["Running"]).await;
    eventually("the trap is set", Duration::from_secs(10), || async {
        let out = kubectl.run(&["logs", "polite"]).await;
        out.stdout.contains("started").then_some(())
    })
    .await;
    // The Python client watches the pod while it is deleted.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
deleted = v1.delete_namespaced_pod("polite", "default")
events = []
# From the deleted object's resourceVersion: it may be gone before the watch starts.
for event in watch.Watch().stream(v1.list_namespaced_pod, "default",
                                  field_selector="metadata.name=polite", timeout_seconds=20,
                                  resource_version=deleted.metadata.resource_version):
    obj = event["object"]
    events.append(event["type"])
    if event["type"] == "DELETED":
        break
print(json.dumps({"ts": deleted.metadata.deletion_timestamp is not None,
                  "grace": deleted.metadata.deletion_grace_period_seconds,
                  "events": events}))
"#,
    )
    .await;
    assert_eq!(seen["ts"], true, "{seen}");
    assert_eq!(seen["grace"], 30, "{seen}");
    assert_eq!(
        seen["events"].as_array().unwrap().last().unwrap(),
        "DELETED"
    );

    // Ignores SIGTERM: killed when its grace period (2 s) is over, shown Terminating meanwhile.
    let stubborn = r#"
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap '' TERM; echo started; while true; do sleep 0.1; done"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("stubborn.yaml", stubborn)])
        .await;
    wait_phase(&kubectl, "stubborn", &["Running"]).await;
    eventually("the trap is set", Duration::from_secs(10), || async {
        let out = kubectl.run(&["logs", "stubborn"]).await;
        out.stdout.contains("started").then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    kubectl
        .ok(&["delete", "pod", "stubborn", "--wait=false"])
        .await;
    let pod = get(&kubectl, "pod", "stubborn")
        .await
        .expect("still there, terminating");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 2, "{pod}");
    let table = kubectl.ok(&["get", "pod", "stubborn"]).await;
    assert!(table.contains("Terminating"), "{table}");
    eventually("the pod is gone", Duration::from_secs(20), || async {
        get(&kubectl, "pod", "stubborn")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1500), "gone after {took:?}");

    // --grace-period=0 --force: at once.
    let again = stubborn
        .replace("stubborn", "forced")
        .replace(": 2", ": 30");
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("forced.yaml", &again)])
        .await;
    wait_phase(&kubectl, "forced", &["Running"]).await;
    kubectl
        .ok(&["delete", "pod", "forced", "--grace-period=0", "--force"])
        .await;
    assert!(get(&kubectl, "pod", "forced").await.is_none());

    // A pod that has finished goes at once.
    let done = r#"
apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: ["true"]}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("done.yaml", done)])
        .await;
    wait_phase(&kubectl, "done", &["Succeeded"]).await;
    kubectl.ok(&["delete", "pod", "done", "--wait=false"]).await;
    assert!(get(&kubectl, "pod", "done").await.is_none());
}

/// A pod's `activeDeadlineSeconds` (k8s.io/kubernetes pkg/kubelet/active_deadline.go): once
/// that long since its `startTime`, the kubelet stops its containers (SIGTERM, which a trap
/// sees) and the pod is `Failed`, reason `DeadlineExceeded`, with a `Normal` Event saying so;
/// the pod is kept, and so is its log, for kubectl and the Python client alike. A Job's pod
/// past its own deadline fails the Job by its `backoffLimit` (pkg/controller/job/
/// job_controller.go counts a failed pod against it), and is kept too.
#[tokio::test]
async fn a_pod_past_its_active_deadline_fails_and_keeps_its_log() {
    let Some((cluster, kubectl)) = setup("pod_active_deadline").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: bounded}
spec:
  restartPolicy: Never
  activeDeadlineSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'echo got TERM; exit 3' TERM; echo before; while true; do sleep 0.1; done"]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("bounded.yaml", pod)])
        .await;
    let pod = wait_phase(&kubectl, "bounded", &["Failed"]).await;
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "{pod}");
    assert_eq!(
        pod["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let started = pod["status"]["startTime"].as_str().expect("a startTime");
    let finished = pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        .as_str()
        .expect("the container terminated");
    let ran = chrono::DateTime::parse_from_rfc3339(finished).unwrap()
        - chrono::DateTime::parse_from_rfc3339(started).unwrap();
    assert!(ran.num_seconds() >= 2, "stopped after {ran} only: {pod}");
    let log = kubectl.ok(&["logs", "bounded"]).await;
    assert_eq!(log, "before\ngot TERM\n");
    let events = events_of(&kubectl, "bounded").await;
    assert!(
        events
            .iter()
            .any(|(reason, message, source)| reason == "DeadlineExceeded"
                && message.contains("longer than the specified deadline")
                && source == "kubelet"),
        "{events:?}"
    );
    let read = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = v1.read_namespaced_pod("bounded", "default")
print(json.dumps({"reason": pod.status.reason,
                  "log": v1.read_namespaced_pod_log("bounded", "default")}))
"#,
    )
    .await;
    assert_eq!(read["reason"], "DeadlineExceeded", "{read}");
    assert_eq!(read["log"], "before\ngot TERM\n", "{read}");

    // Set on a running pod (a pod's deadline may be set or lowered): enforced from its start.
    let open_ended = r#"
apiVersion: v1
kind: Pod
metadata: {name: open-ended}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: ["sh", "-c", "echo running; sleep 60"]}
"#;
    kubectl
        .ok(&[
            "apply",
            "-f",
            &kubectl.manifest("open-ended.yaml", open_ended),
        ])
        .await;
    wait_phase(&kubectl, "open-ended", &["Running"]).await;
    kubectl
        .ok(&[
            "patch",
            "pod",
            "open-ended",
            "-p",
            r#"{"spec":{"activeDeadlineSeconds":1}}"#,
        ])
        .await;
    let pod = wait_phase(&kubectl, "open-ended", &["Failed"]).await;
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "{pod}");
    assert_eq!(kubectl.ok(&["logs", "open-ended"]).await, "running\n");

    let job = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: bounded-job}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      activeDeadlineSeconds: 1
      containers:
      - {name: main, image: busybox, command: ["sh", "-c", "echo job before; sleep 60"]}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("bounded-job.yaml", job)])
        .await;
    let failed =
        wait_job_condition(&kubectl, "bounded-job", "Failed", Duration::from_secs(30)).await;
    let condition = failed["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .unwrap();
    assert_eq!(condition["reason"], "BackoffLimitExceeded", "{failed}");
    let pods = job_pods(&kubectl, "bounded-job").await;
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(pods[0]["status"]["reason"], "DeadlineExceeded");
    let name = pods[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(kubectl.ok(&["logs", name]).await, "job before\n");
}

// ---------------------------------------------------------------------------------------------
// 5. Containers without a command

#[tokio::test]
async fn images_without_a_command_run_their_known_entrypoint_or_fail_saying_why() {
    let Some((_cluster, kubectl)) = setup("known_entrypoints").await else {
        return;
    };
    let pods = r#"
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: hello-world}
---
apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  restartPolicy: Never
  containers:
  # No ENTRYPOINT in busybox: `args` replace its CMD (`sh`) and run as the command.
  - {name: main, image: "busybox:1.36", args: ["sh", "-c", "echo from busybox"]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: "alpine"}
---
apiVersion: v1
kind: Pod
metadata: {name: unknown}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: "nginx:1.27"}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pods.yaml", pods)])
        .await;
    wait_phase(&kubectl, "hello", &["Succeeded"]).await;
    let hello = kubectl.ok(&["logs", "hello"]).await;
    assert!(hello.contains("Hello from Docker!"), "{hello}");
    wait_phase(&kubectl, "shell", &["Succeeded"]).await;
    assert_eq!(kubectl.ok(&["logs", "shell"]).await, "from busybox\n");
    // Its CMD, `sh`, with no terminal: it reads an empty stdin and exits 0.
    wait_phase(&kubectl, "bare", &["Succeeded"]).await;
    let pod = wait_phase(&kubectl, "unknown", &["Failed"]).await;
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["reason"], "StartError", "{pod}");
    let message = terminated["message"].as_str().unwrap();
    assert!(
        message.contains("nginx:1.27") && message.contains("entrypoint"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Indexed Jobs, 7. the Job controller's back-off

/// Waits until the Job has a true condition of `type_`; the Job.
async fn wait_job_condition(kubectl: &Kubectl, job: &str, type_: &str, within: Duration) -> Value {
    eventually(&format!("job {job} {type_}"), within, || async {
        let job = get(kubectl, "job", job).await?;
        job["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
            .then_some(job)
    })
    .await
}

/// The pods of a Job, by `kubectl get pods -l job-name=...`.
async fn job_pods(kubectl: &Kubectl, job: &str) -> Vec<Value> {
    let out = kubectl
        .ok(&[
            "get",
            "pods",
            "-l",
            &format!("job-name={job}"),
            "-o",
            "json",
        ])
        .await;
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// Each pod gets its completion index; `status.completedIndexes` is written as the real Job
/// controller writes it (pkg/controller/job/indexed_job_utils.go, `orderedIntervals.String`):
/// three or more consecutive indexes as a range (`0-2`), two as a pair (`0,1`).
#[rstest::rstest]
#[case::three(3, "0-2")]
#[case::two(2, "0,1")]
#[tokio::test]
async fn indexed_jobs_give_each_pod_its_completion_index(
    #[case] completions: usize,
    #[case] completed_indexes: &str,
) {
    let Some((_cluster, kubectl)) = setup(&format!("indexed_jobs_{completions}")).await else {
        return;
    };
    let job = format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {{name: indexed}}
spec:
  completionMode: Indexed
  completions: {completions}
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sh", "-c", "echo index=$JOB_COMPLETION_INDEX"]
"#
    );
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("job.yaml", &job)])
        .await;
    let done = wait_job_condition(&kubectl, "indexed", "Complete", Duration::from_secs(30)).await;
    assert_eq!(done["status"]["succeeded"], completions, "{done}");
    assert_eq!(
        done["status"]["completedIndexes"], completed_indexes,
        "{done}"
    );
    let pods = job_pods(&kubectl, "indexed").await;
    let mut indexes = Vec::new();
    for pod in &pods {
        let key = "batch.kubernetes.io/job-completion-index";
        let index = pod["metadata"]["annotations"][key]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(pod["metadata"]["labels"][key], index, "{pod}");
        let name = pod["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with(&format!("indexed-{index}-")), "{name}");
        let logs = kubectl.ok(&["logs", name]).await;
        assert_eq!(logs, format!("index={index}\n"));
        indexes.push(index);
    }
    indexes.sort();
    let expected: Vec<String> = (0..completions).map(|i| i.to_string()).collect();
    assert_eq!(indexes, expected);
}

#[tokio::test]
async fn a_failed_job_pod_is_replaced_after_the_controllers_back_off() {
    let Some((_cluster, kubectl)) = setup("job_backoff").await else {
        return;
    };
    let job = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: flaky}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: ["false"]}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("job.yaml", job)])
        .await;
    let failed = wait_job_condition(&kubectl, "flaky", "Failed", Duration::from_secs(40)).await;
    assert_eq!(failed["status"]["failed"], 2, "{failed}");
    let mut pods = job_pods(&kubectl, "flaky").await;
    assert_eq!(pods.len(), 2);
    let time = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    pods.sort_by_key(|p| time(&p["metadata"]["creationTimestamp"]));
    let first_failed =
        time(&pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]);
    let second_created = time(&pods[1]["metadata"]["creationTimestamp"]);
    // 10 s after the first failure (timestamps have whole seconds).
    let gap = second_created - first_failed;
    assert!(gap >= chrono::Duration::seconds(9), "replaced after {gap}");
    assert!(gap <= chrono::Duration::seconds(13), "replaced after {gap}");
}

// ---------------------------------------------------------------------------------------------
// 8. Volumes

/// The events of an object, as `kubectl get events --field-selector involvedObject.name=NAME`;
/// (reason, message, source component) of each.
async fn events_of(kubectl: &Kubectl, name: &str) -> Vec<(String, String, String)> {
    let out = kubectl
        .ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "-o",
            "json",
        ])
        .await;
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = |p: &str| {
                e.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (text("/reason"), text("/message"), text("/source/component"))
        })
        .collect()
}

const VOLUMES: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: blue, size: "3", "run.sh": "echo script ran"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  restartPolicy: Never
  volumes:
  - {name: settings, configMap: {name: settings}}
  - name: picked
    configMap:
      name: settings
      defaultMode: 0755
      items: [{key: "run.sh", path: bin/run.sh}, {key: size, path: size, mode: 0400}]
  - {name: creds, secret: {secretName: creds}}
  - name: both
    projected:
      sources:
      - configMap: {name: settings, items: [{key: color, path: paint}]}
      - secret: {name: creds}
  - {name: scratch, emptyDir: {}}
  - {name: data, persistentVolumeClaim: {claimName: data}}
  containers:
  - name: main
    image: busybox
    workingDir: /devcluster-test/work/here
    command:
    - sh
    - -c
    - |
      echo color=$(cat /etc/devcluster-test/settings/color) user=$(cat /var/run/devcluster-test/creds/user)
      echo paint=$(cat /projected/paint) projected-user=$(cat /projected/user)
      ls -l /picked/size | cut -c1-10; run.sh
      echo pwd=$(pwd)
      echo kept > /data/note
      echo scratch > /scratch/file && echo scratch=$(cat /scratch/file)
      { echo x > /etc/devcluster-test/settings/new; } 2>/dev/null || echo settings-read-only
      { echo x > /usr/devcluster-test-file; } 2>/dev/null || echo host-read-only
    env: [{name: PATH, value: "/picked/bin:/usr/local/bin:/usr/bin:/bin"}]
    volumeMounts:
    - {name: settings, mountPath: /etc/devcluster-test/settings, readOnly: true}
    - {name: picked, mountPath: /picked}
    - {name: creds, mountPath: /var/run/devcluster-test/creds, readOnly: true}
    - {name: both, mountPath: /projected}
    - {name: scratch, mountPath: /scratch}
    - {name: data, mountPath: /data}
    - {name: scratch, mountPath: /devcluster-test/work, subPath: sub}
"#;

/// The container sees every kind of volume at its mount path (a ConfigMap whole and by items
/// with their modes, a Secret, a projection of both, an emptyDir, a claim, a subPath), runs in
/// its `workingDir`, cannot write where it is read-only, and nothing on the host changes. A
/// claim's files outlive the pod that wrote them, for the next pod.
#[tokio::test]
async fn a_pods_volumes_are_at_their_mount_paths() {
    let Some((cluster, kubectl)) = setup("volumes_at_mount_paths").await else {
        return;
    };
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("volumes.yaml", VOLUMES)])
        .await;
    let pod = wait_phase(&kubectl, "writer", &["Succeeded", "Failed"]).await;
    let logs = kubectl.ok(&["logs", "writer"]).await;
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}\n{logs}");
    assert_eq!(
        logs,
        "color=blue user=admin\npaint=blue projected-user=admin\n-r--------\nscript ran\n\
         pwd=/devcluster-test/work/here\nscratch=scratch\nsettings-read-only\nhost-read-only\n"
    );
    for path in [
        "/etc/devcluster-test",
        "/var/run/devcluster-test",
        "/devcluster-test",
        "/projected",
        "/usr/devcluster-test-file",
    ] {
        assert!(
            !std::path::Path::new(path).exists(),
            "{path} was made on the host"
        );
    }
    let claim = get(&kubectl, "pvc", "data").await.unwrap();
    assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    assert_eq!(claim["status"]["capacity"]["storage"], "1Gi", "{claim}");
    // Bound as the PV controller binds: the claim names its volume, `pvc-<uid>`.
    let volume = format!("pvc-{}", claim["metadata"]["uid"].as_str().unwrap());
    assert_eq!(claim["spec"]["volumeName"], volume.as_str(), "{claim}");
    // `kubectl get pvc` prints the server's table: the columns of the claim printer
    // (pkg/printers/internalversion/printers.go, persistentVolumeClaimColumnDefinitions).
    let table = kubectl.ok(&["get", "pvc", "data"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        ["data", "Bound", volume.as_str(), "1Gi", "RWO"],
        "{table}"
    );
    assert_eq!(
        row[5], "<unset>",
        "no storage class: the cell is empty, the next is <unset>: {table}"
    );

    // The next pod on the claim reads what the first wrote (through the Python client).
    let seen = support::python(
        &cluster,
        r#"
import json, sys, time
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="reader"),
    spec=client.V1PodSpec(restart_policy="Never", containers=[client.V1Container(
        name="main", image="busybox", command=["cat", "/mnt/claim/note"],
        volume_mounts=[client.V1VolumeMount(name="d", mount_path="/mnt/claim")])],
        volumes=[client.V1Volume(name="d",
            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name="data"))]))
v1.create_namespaced_pod("default", pod)
for _ in range(600):
    phase = v1.read_namespaced_pod("reader", "default").status.phase
    if phase in ("Succeeded", "Failed"):
        break
    time.sleep(0.05)
print(json.dumps({"phase": phase, "log": v1.read_namespaced_pod_log("reader", "default")}))
"#,
    )
    .await;
    assert_eq!(seen, json!({"phase": "Succeeded", "log": "kept\n"}));
}

/// A `hostPath` volume is the node's directory itself, read-write (what the pod writes is on
/// the host after it is gone); one of type `Directory` whose path is no directory holds the pod
/// `ContainerCreating` with the kubelet's `FailedMount` Event (pkg/volume/hostpath/host_path.go,
/// `checkType`: "hostPath type check failed: %s is not a directory").
#[tokio::test]
async fn a_host_path_volume_is_the_nodes_directory_and_a_missing_one_fails_the_mount() {
    let Some((_cluster, kubectl)) = setup("host_path_volumes").await else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let missing = host.path().join("absent");
    let pod = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: writes}}
spec:
  restartPolicy: Never
  volumes: [{{name: h, hostPath: {{path: "{dir}", type: Directory}}}}]
  containers:
  - {{name: main, image: busybox, command: ["sh", "-c", "echo kept > /data/out"],
     volumeMounts: [{{name: h, mountPath: /data}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: missing}}
spec:
  restartPolicy: Never
  volumes: [{{name: h, hostPath: {{path: "{missing}", type: Directory}}}}]
  containers:
  - {{name: main, image: busybox, command: ["true"], volumeMounts: [{{name: h, mountPath: /data}}]}}
"#,
        dir = host.path().display(),
        missing = missing.display(),
    );
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pods.yaml", &pod)])
        .await;
    wait_phase(&kubectl, "writes", &["Succeeded"]).await;
    let written = std::fs::read_to_string(host.path().join("out")).unwrap();
    assert_eq!(written, "kept\n");

    let events = eventually("FailedMount", Duration::from_secs(20), || async {
        let events = events_of(&kubectl, "missing").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let want = format!(
        "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: {} is not a \
         directory",
        missing.display()
    );
    assert_eq!(events[0], ("FailedMount".into(), want, "kubelet".into()));
    let table = kubectl.ok(&["get", "pod", "missing"]).await;
    assert!(table.contains("ContainerCreating"), "{table}");
}

/// A ConfigMap volume that does not exist holds the pod `ContainerCreating` with the kubelet's
/// `FailedMount` Event, until the ConfigMap is made; a claim that does not exist leaves the pod
/// unscheduled with the scheduler's reason, until the claim is made.
#[tokio::test]
async fn missing_volume_sources_hold_the_pod_as_a_real_cluster_does() {
    let Some((cluster, kubectl)) = setup("missing_volume_sources").await else {
        return;
    };
    let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: mounts}
spec:
  restartPolicy: Never
  volumes: [{name: cfg, configMap: {name: later}}]
  containers:
  - name: main
    image: busybox
    command: ["cat", "/cfg/key"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
---
apiVersion: v1
kind: Pod
metadata: {name: claims}
spec:
  restartPolicy: Never
  volumes: [{name: d, persistentVolumeClaim: {claimName: later}}]
  containers:
  - {name: main, image: busybox, command: ["ls", "/d"], volumeMounts: [{name: d, mountPath: /d}]}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("pods.yaml", pod)])
        .await;
    let (reason, message) = eventually("ContainerCreating", Duration::from_secs(20), || async {
        waiting(&get(&kubectl, "pod", "mounts").await?)
    })
    .await;
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("ContainerCreating", "")
    );
    let table = kubectl.ok(&["get", "pod", "mounts"]).await;
    assert!(table.contains("ContainerCreating"), "{table}");
    let events = eventually("FailedMount", Duration::from_secs(20), || async {
        let events = events_of(&kubectl, "mounts").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(
        events[0],
        (
            "FailedMount".into(),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"later\" not found".into(),
            "kubelet".into()
        )
    );

    let unscheduled = eventually("Unschedulable", Duration::from_secs(20), || async {
        let pod = get(&kubectl, "pod", "claims").await?;
        let condition = pod["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")?
            .clone();
        Some((pod, condition))
    })
    .await;
    let (pod, condition) = unscheduled;
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    assert!(pod["status"].get("containerStatuses").is_none(), "{pod}");
    // The scheduler holds it: it is bound to no node.
    assert!(pod["spec"].get("nodeName").is_none(), "{pod}");
    assert_eq!(condition["reason"], "Unschedulable");
    let want = "0/1 nodes are available: persistentvolumeclaim \"later\" not found. no new claims \
                to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful \
                for scheduling.";
    assert_eq!(condition["message"], want);
    let events = events_of(&kubectl, "claims").await;
    assert_eq!(
        events[0],
        (
            "FailedScheduling".into(),
            want.into(),
            "default-scheduler".into()
        )
    );
    // The Python client reads the same status.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
mounts = v1.read_namespaced_pod("mounts", "default").status
claims = v1.read_namespaced_pod("claims", "default").status
print(json.dumps({"mounts": [mounts.phase, mounts.container_statuses[0].state.waiting.reason],
                  "claims": [claims.phase, claims.conditions[0].reason]}))
"#,
    )
    .await;
    assert_eq!(
        seen,
        json!({"mounts": ["Pending", "ContainerCreating"], "claims": ["Pending", "Unschedulable"]})
    );

    let sources = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: later}
data: {key: found}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: later}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("sources.yaml", sources)])
        .await;
    wait_phase(&kubectl, "mounts", &["Succeeded"]).await;
    wait_phase(&kubectl, "claims", &["Succeeded"]).await;
    assert_eq!(kubectl.ok(&["logs", "mounts"]).await, "found");
}

// ---------------------------------------------------------------------------------------------
// 9. Service accounts

/// Every namespace has a `default` service account, which pods without one run under; a pod
/// naming one that does not exist is refused (403), and a Job's pod under it is never created:
/// the Job shows the Job controller's `FailedCreate` until the service account exists.
#[tokio::test]
async fn pods_run_only_under_service_accounts_that_exist() {
    let Some((cluster, kubectl)) = setup("service_accounts").await else {
        return;
    };
    kubectl.ok(&["create", "namespace", "team"]).await;
    let accounts = eventually(
        "the default service account",
        Duration::from_secs(10),
        || {
            let kubectl = &kubectl;
            async move {
                let out = kubectl.run(&["get", "sa", "default", "-n", "team"]).await;
                out.success.then_some(out.stdout)
            }
        },
    )
    .await;
    assert!(accounts.contains("default"), "{accounts}");
    let plain = "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec:\n  restartPolicy: Never\n  containers: [{name: main, image: busybox, command: [\"true\"]}]\n";
    kubectl
        .ok(&[
            "create",
            "-n",
            "team",
            "-f",
            &kubectl.manifest("plain.yaml", plain),
        ])
        .await;
    let created = get(&kubectl, "pod", "plain").await;
    assert!(created.is_none(), "in default, not team");
    let out = kubectl
        .ok(&[
            "get",
            "pod",
            "plain",
            "-n",
            "team",
            "-o",
            "jsonpath={.spec.serviceAccountName}",
        ])
        .await;
    assert_eq!(out, "default");

    let under_runner = "apiVersion: v1\nkind: Pod\nmetadata: {name: runs}\nspec:\n  serviceAccountName: runner\n  restartPolicy: Never\n  containers: [{name: main, image: busybox, command: [\"true\"]}]\n";
    let refused = kubectl
        .run(&["create", "-f", &kubectl.manifest("runs.yaml", under_runner)])
        .await;
    assert!(!refused.success);
    assert_eq!(
        refused.stderr.trim(),
        "Error from server (Forbidden): error when creating \"".to_string()
            + &kubectl.manifest("runs.yaml", under_runner)
            + "\": pods \"runs\" is forbidden: error looking up service account default/runner: \
               serviceaccount \"runner\" not found"
    );
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = client.V1Pod(metadata=client.V1ObjectMeta(generate_name="gen-"),
    spec=client.V1PodSpec(service_account_name="runner", restart_policy="Never",
        containers=[client.V1Container(name="main", image="busybox", command=["true"])]))
try:
    v1.create_namespaced_pod("default", pod)
    print(json.dumps({"created": True}))
except ApiException as e:
    body = json.loads(e.body)
    print(json.dumps({"status": e.status, "reason": body["reason"], "message": body["message"]}))
"#,
    )
    .await;
    assert_eq!(
        seen,
        json!({"status": 403, "reason": "Forbidden",
               "message": "pods \"gen-\" is forbidden: error looking up service account default/runner: serviceaccount \"runner\" not found"})
    );

    let job = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: under-runner}
spec:
  template:
    spec:
      serviceAccountName: runner
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: ["true"]}]
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("job.yaml", job)])
        .await;
    let events = eventually("FailedCreate", Duration::from_secs(20), || async {
        let events = events_of(&kubectl, "under-runner").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(
        events[0],
        (
            "FailedCreate".into(),
            "Error creating: pods \"under-runner-\" is forbidden: error looking up service \
             account default/runner: serviceaccount \"runner\" not found"
                .into(),
            "job-controller".into()
        )
    );
    assert!(job_pods(&kubectl, "under-runner").await.is_empty());
    let described = kubectl.ok(&["describe", "job", "under-runner"]).await;
    assert!(
        described.contains("FailedCreate")
            && described.contains("serviceaccount \"runner\" not found"),
        "{described}"
    );
    kubectl.ok(&["create", "serviceaccount", "runner"]).await;
    wait_job_condition(
        &kubectl,
        "under-runner",
        "Complete",
        Duration::from_secs(30),
    )
    .await;
    let pods = job_pods(&kubectl, "under-runner").await;
    assert_eq!(pods[0]["spec"]["serviceAccountName"], "runner");
}

// ---------------------------------------------------------------------------------------------
// Readiness probes

/// The pod's `Ready` condition's status and its container's `ready`, once it runs.
async fn readiness(kubectl: &Kubectl, pod: &str) -> Option<(String, bool, Value)> {
    let pod = get(kubectl, "pod", pod).await?;
    pod["status"]["containerStatuses"][0]["state"].get("running")?;
    let conditions = pod["status"]["conditions"].as_array()?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    let status = ready["status"].as_str()?.to_string();
    let container = pod["status"]["containerStatuses"][0]["ready"].as_bool()?;
    Some((status, container, pod))
}

/// Waits until the pod runs and its readiness is `want` (condition and container alike).
async fn wait_ready(kubectl: &Kubectl, pod: &str, want: bool) -> Value {
    let status = if want { "True" } else { "False" };
    eventually(
        &format!("pod {pod} ready {want}"),
        Duration::from_secs(30),
        || async {
            let (condition, container, pod) = readiness(kubectl, pod).await?;
            (condition == status && container == want).then_some(pod)
        },
    )
    .await
}

#[tokio::test]
async fn readiness_probes_decide_a_running_containers_ready_and_the_pods_ready_condition() {
    let Some((_cluster, kubectl)) = setup("readiness_probes").await else {
        return;
    };
    // exec: ready while the file is there, not ready again after two failures in a row.
    let exec = r#"
apiVersion: v1
kind: Pod
metadata: {name: by-exec}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "while true; do sleep 0.1; done"]
    readinessProbe:
      exec: {command: ["sh", "-c", "test -f \"$HOME/ready\""]}
      periodSeconds: 1
      failureThreshold: 2
"#;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("by-exec.yaml", exec)])
        .await;
    // Running, but not ready before any probe succeeded (a plain container would be).
    let pod = wait_phase(&kubectl, "by-exec", &["Running"]).await;
    assert_eq!(
        pod["status"]["containerStatuses"][0]["ready"], false,
        "{pod}"
    );
    let touch = ["exec", "by-exec", "--", "sh", "-c", "touch \"$HOME/ready\""];
    kubectl.ok(&touch).await;
    wait_ready(&kubectl, "by-exec", true).await;
    let remove = ["exec", "by-exec", "--", "sh", "-c", "rm \"$HOME/ready\""];
    kubectl.ok(&remove).await;
    let pod = wait_ready(&kubectl, "by-exec", false).await;
    let ready = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ContainersReady")
        .cloned()
        .unwrap();
    assert_eq!(
        ready["message"], "containers with unready status: [main]",
        "{pod}"
    );

    // httpGet after its initial delay, a port by name; tcpSocket on the same port (every pod
    // is at 127.0.0.1 here).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pods = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: by-http}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python:3
    command: ["python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
    ports: [{{name: web, containerPort: {port}}}]
    readinessProbe:
      httpGet: {{path: /, port: web}}
      initialDelaySeconds: 2
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: by-tcp}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "while true; do sleep 0.1; done"]
    readinessProbe:
      tcpSocket: {{port: {port}}}
      periodSeconds: 1
"#
    );
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("probed.yaml", &pods)])
        .await;
    let pod = wait_ready(&kubectl, "by-http", true).await;
    let started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        .as_str()
        .unwrap();
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    let ready_at = conditions.iter().find(|c| c["type"] == "Ready").unwrap()["lastTransitionTime"]
        .as_str()
        .unwrap();
    let waited = chrono::DateTime::parse_from_rfc3339(ready_at).unwrap()
        - chrono::DateTime::parse_from_rfc3339(started).unwrap();
    assert!(
        waited.num_seconds() >= 2,
        "ready after {waited} only: {pod}"
    );
    wait_ready(&kubectl, "by-tcp", true).await;
    // The server gone, the TCP probe fails: not ready after three failures in a row.
    kubectl.ok(&["delete", "pod", "by-http"]).await;
    wait_ready(&kubectl, "by-tcp", false).await;
}
