//! Init containers and native sidecars (init containers with `restartPolicy: Always`), as kubectl
//! and the official Python client see them: init containers run in order, each to completion,
//! before the main container and sharing its volumes; `kubectl get pod` shows `Init:N/M` while
//! they run; a failed one fails the pod under `restartPolicy: Never` and is restarted otherwise;
//! a sidecar keeps running beside the main container, is restarted when it exits, and is stopped
//! (SIGTERM, then SIGKILL after the grace period) once the main container is done, the pod's
//! phase being the main container's alone; every container's log is read with `-c`; and no
//! process of any of them outlives its pod or the control plane.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};

use crate::support::{
    self, Kubectl, alive, all_gone, get, read_pids, rows, running_marker, setup, wait_phase,
};

/// A busybox container running `script` with `sh -c`.
fn container(name: &str, script: &str) -> Value {
    json!({"name": name, "image": "busybox", "command": ["sh", "-c", script]})
}

/// A native sidecar: an init container with `restartPolicy: Always`.
fn sidecar(name: &str, script: &str) -> Value {
    let mut c = container(name, script);
    c["restartPolicy"] = json!("Always");
    c
}

/// `c` with the volume `volume` mounted at `path`.
fn mounting(mut c: Value, volume: &str, path: &str) -> Value {
    c["volumeMounts"] = json!([{"name": volume, "mountPath": path}]);
    c
}

/// `c` with the variable `name` set to `value`.
fn with_env(mut c: Value, name: &str, value: &str) -> Value {
    c["env"] = json!([{"name": name, "value": value}]);
    c
}

/// A pod manifest (JSON is YAML): `spec` is completed with `init` and `main`.
fn pod(name: &str, mut spec: Value, init: Vec<Value>, main: Value) -> String {
    spec["initContainers"] = json!(init);
    spec["containers"] = json!([main]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}).to_string()
}

/// A spec with `restartPolicy` and an emptyDir named `volume` (when given).
fn spec(restart_policy: &str, volume: Option<&str>) -> Value {
    let mut spec = json!({"restartPolicy": restart_policy});
    if let Some(volume) = volume {
        spec["volumes"] = json!([{"name": volume, "emptyDir": {}}]);
    }
    spec
}

async fn apply(kubectl: &Kubectl, name: &str, manifest: &str) {
    let path = kubectl.manifest(&format!("{name}.yaml"), manifest);
    kubectl.ok(&["apply", "-f", &path]).await;
}

/// The pod's condition of `type_`.
fn condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition: {pod}"))
}

fn init_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|s| s.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no init container status of {name}: {pod}"))
}

fn main_status(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]
}

/// The cells of the pod's row in `kubectl get pod NAME`.
async fn row(kubectl: &Kubectl, name: &str) -> Vec<String> {
    let table = rows(&kubectl.ok(&["get", "pod", name]).await);
    table
        .into_iter()
        .find(|r| r[0] == name)
        .unwrap_or_else(|| panic!("no row of {name}"))
}

/// `kubectl get pods --watch` of one pod (by field selector, so it may start before the pod
/// exists): each change of the pod, a row each.
struct Watch {
    child: tokio::process::Child,
    lines: Lines<BufReader<tokio::process::ChildStdout>>,
    seen: Vec<String>,
}

impl Watch {
    fn start(kubectl: &Kubectl, name: &str) -> Self {
        let mut child = kubectl
            .command(&[
                "get",
                "pods",
                "--field-selector",
                &format!("metadata.name={name}"),
                "--watch",
                "--no-headers",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads rows until one has `status` in its STATUS column; that row's cells.
    async fn until_status(&mut self, status: &str) -> Vec<String> {
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                self.seen.push(line.clone());
                let cells: Vec<String> = line.split_whitespace().map(String::from).collect();
                if cells.get(2).map(String::as_str) == Some(status) {
                    return Some(cells);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(cells)) => cells,
            _ => panic!("no row with status {status}: {:?}", self.seen),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn touch(path: &Path) {
    std::fs::write(path, "").unwrap();
}

// ---------------------------------------------------------------------------------------------
// 1. Init containers in order

#[tokio::test]
async fn init_containers_run_in_order_and_share_the_pods_volumes_with_the_main_container() {
    let Some((cluster, kubectl)) = setup("init_containers_in_order").await else {
        return;
    };
    let manifest = pod(
        "ordered",
        spec("Never", Some("work")),
        vec![
            mounting(
                container("first", "echo first ran; echo one > /work/log"),
                "work",
                "/work",
            ),
            mounting(
                container(
                    "second",
                    "echo second ran; test -f /work/log && echo two >> /work/log",
                ),
                "work",
                "/work",
            ),
        ],
        mounting(container("main", "cat /work/log"), "work", "/work"),
    );
    apply(&kubectl, "ordered", &manifest).await;
    let pod = wait_phase(&kubectl, "ordered", &["Succeeded", "Failed"]).await;
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    assert_eq!(kubectl.ok(&["logs", "ordered"]).await, "one\ntwo\n");
    assert_eq!(
        kubectl.ok(&["logs", "ordered", "-c", "first"]).await,
        "first ran\n"
    );
    assert_eq!(
        kubectl.ok(&["logs", "ordered", "-c", "second"]).await,
        "second ran\n"
    );

    let names: Vec<&Value> = pod["status"]["initContainerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["name"])
        .collect();
    assert_eq!(names, ["first", "second"], "{pod}");
    for name in ["first", "second"] {
        let status = init_status(&pod, name);
        let terminated = &status["state"]["terminated"];
        assert_eq!(terminated["exitCode"], 0, "{status}");
        assert_eq!(terminated["reason"], "Completed", "{status}");
        assert_eq!(status["ready"], true, "{status}");
        assert_eq!(status["started"], false, "{status}");
        assert_eq!(status["restartCount"], 0, "{status}");
    }
    // Each starts once the one before has finished.
    let time = |status: &Value, field: &str| {
        let text = status["state"]["terminated"][field].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(text).unwrap()
    };
    let (first, second, main) = (
        init_status(&pod, "first"),
        init_status(&pod, "second"),
        main_status(&pod),
    );
    assert!(
        time(first, "finishedAt") <= time(second, "startedAt"),
        "{pod}"
    );
    assert!(
        time(second, "finishedAt") <= time(main, "startedAt"),
        "{pod}"
    );
    assert_eq!(main["state"]["terminated"]["reason"], "Completed", "{pod}");
    let initialized = condition(&pod, "Initialized");
    assert_eq!(initialized["status"], "True", "{pod}");
    assert_eq!(initialized["reason"], "PodCompleted", "{pod}");
    assert_eq!(
        row(&kubectl, "ordered").await[1..4],
        ["0/1", "Completed", "0"]
    );

    // The Python client reads the statuses into its models and each container's log; without a
    // container the server picks the pod's only regular container.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = v1.read_namespaced_pod("ordered", "default")
print(json.dumps({
    "init": [[s.name, s.state.terminated.exit_code, s.ready] for s in pod.status.init_container_statuses],
    "main": v1.read_namespaced_pod_log("ordered", "default"),
    "second": v1.read_namespaced_pod_log("ordered", "default", container="second"),
}))
"#,
    )
    .await;
    assert_eq!(
        seen,
        json!({"init": [["first", 0, true], ["second", 0, true]],
               "main": "one\ntwo\n", "second": "second ran\n"})
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Progress while they run

#[tokio::test]
async fn kubectl_get_shows_init_progress_while_init_containers_run() {
    let Some((_cluster, kubectl)) = setup("init_progress").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let wait_for = |file: &Path| format!("until [ -f {} ]; do sleep 0.05; done", file.display());
    let manifest = pod(
        "progress",
        spec("Never", None),
        vec![container("a", &wait_for(&a)), container("b", &wait_for(&b))],
        container("main", "echo done"),
    );
    let mut watch = Watch::start(&kubectl, "progress");
    apply(&kubectl, "progress", &manifest).await;

    let cells = watch.until_status("Init:0/2").await;
    assert_eq!(cells[1], "0/1", "{cells:?}");
    let pod = get(&kubectl, "pod", "progress").await.unwrap();
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    let initialized = condition(&pod, "Initialized");
    assert_eq!(initialized["status"], "False", "{pod}");
    assert_eq!(initialized["reason"], "ContainersNotInitialized", "{pod}");
    assert_eq!(
        initialized["message"], "containers with incomplete status: [a b]",
        "{pod}"
    );
    assert!(
        init_status(&pod, "a")["state"]["running"].is_object(),
        "{pod}"
    );
    assert_eq!(init_status(&pod, "a")["started"], true, "{pod}");
    assert_eq!(
        init_status(&pod, "b")["state"]["waiting"]["reason"],
        "PodInitializing",
        "{pod}"
    );
    assert_eq!(
        main_status(&pod)["state"]["waiting"]["reason"],
        "PodInitializing",
        "{pod}"
    );

    touch(&a);
    watch.until_status("Init:1/2").await;
    let pod = get(&kubectl, "pod", "progress").await.unwrap();
    assert_eq!(
        condition(&pod, "Initialized")["message"],
        "containers with incomplete status: [b]",
        "{pod}"
    );
    touch(&b);
    watch.until_status("Completed").await;
    assert_eq!(kubectl.ok(&["logs", "progress"]).await, "done\n");
}

// ---------------------------------------------------------------------------------------------
// 3. Failures

#[tokio::test]
async fn a_failed_init_container_fails_the_pod_under_restart_policy_never() {
    let Some((_cluster, kubectl)) = setup("init_failure_never").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let mark = format!("touch {}", ran.display());
    let manifest = pod(
        "doomed",
        spec("Never", None),
        vec![
            container("setup", "echo setting up; exit 3"),
            container("later", &mark),
        ],
        container("main", &mark),
    );
    apply(&kubectl, "doomed", &manifest).await;
    let pod = wait_phase(&kubectl, "doomed", &["Failed", "Succeeded"]).await;
    assert_eq!(pod["status"]["phase"], "Failed", "{pod}");
    let setup_status = init_status(&pod, "setup");
    assert_eq!(setup_status["state"]["terminated"]["exitCode"], 3, "{pod}");
    assert_eq!(
        setup_status["state"]["terminated"]["reason"], "Error",
        "{pod}"
    );
    assert_eq!(setup_status["restartCount"], 0, "{pod}");
    assert_eq!(setup_status["ready"], false, "{pod}");
    assert_eq!(
        init_status(&pod, "later")["state"]["waiting"]["reason"],
        "PodInitializing",
        "{pod}"
    );
    assert_eq!(
        main_status(&pod)["state"]["waiting"]["reason"],
        "PodInitializing",
        "{pod}"
    );
    assert!(!ran.exists(), "a container after the failed one ran");
    let initialized = condition(&pod, "Initialized");
    assert_eq!(initialized["status"], "False", "{pod}");
    assert_eq!(
        initialized["message"], "containers with incomplete status: [setup later]",
        "{pod}"
    );
    assert_eq!(condition(&pod, "Ready")["reason"], "PodFailed", "{pod}");
    assert_eq!(row(&kubectl, "doomed").await[1..3], ["0/1", "Init:Error"]);
    assert_eq!(
        kubectl.ok(&["logs", "doomed", "-c", "setup"]).await,
        "setting up\n"
    );
}

#[tokio::test]
async fn a_failed_init_container_is_restarted_under_restart_policy_on_failure() {
    let Some((_cluster, kubectl)) = setup("init_failure_on_failure").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran-once");
    let flaky = format!(
        "if [ -f {m} ]; then echo second; else touch {m}; echo first; exit 1; fi",
        m = marker.display()
    );
    let manifest = pod(
        "retried",
        spec("OnFailure", None),
        vec![container("flaky", &flaky)],
        container("main", "echo main ran"),
    );
    apply(&kubectl, "retried", &manifest).await;
    let pod = wait_phase(&kubectl, "retried", &["Succeeded", "Failed"]).await;
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    let flaky = init_status(&pod, "flaky");
    assert_eq!(flaky["restartCount"], 1, "{pod}");
    assert_eq!(flaky["lastState"]["terminated"]["exitCode"], 1, "{pod}");
    assert_eq!(flaky["state"]["terminated"]["exitCode"], 0, "{pod}");
    assert_eq!(
        kubectl.ok(&["logs", "retried", "-c", "flaky"]).await,
        "second\n"
    );
    assert_eq!(
        kubectl
            .ok(&["logs", "retried", "-c", "flaky", "--previous"])
            .await,
        "first\n"
    );
    assert_eq!(kubectl.ok(&["logs", "retried"]).await, "main ran\n");
}

// ---------------------------------------------------------------------------------------------
// 4. Sidecars

/// The pids a container printed on a line `pids A B`.
fn printed_pids(log: &str) -> Vec<u32> {
    log.lines()
        .find_map(|l| l.strip_prefix("pids "))
        .map(|rest| {
            rest.split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_sidecar_serves_the_main_container_is_restarted_and_is_stopped_when_it_ends() {
    let Some((cluster, kubectl)) = setup("sidecar_serves").await else {
        return;
    };
    // Crashes on its first run, then writes ticks for the main container with a child beside it.
    // (`$$$$` and `$$(`: Kubernetes turns `$$` into `$` before the shell sees it.)
    let ticker = "if [ ! -f /shared/crashed ]; then touch /shared/crashed; echo crashing; exit 1; fi; \
         sleep 1000 & echo pids $$$$ $!; \
         while true; do echo tick >> /shared/ticks; sleep 0.05; done";
    let reader = "until [ $$(cat /shared/ticks 2>/dev/null | wc -l) -ge 3 ]; do sleep 0.05; done; \
         echo saw ticks";
    let manifest = pod(
        "served",
        spec("Never", Some("shared")),
        vec![mounting(sidecar("ticker", ticker), "shared", "/shared")],
        mounting(container("main", reader), "shared", "/shared"),
    );
    apply(&kubectl, "served", &manifest).await;
    let pod = wait_phase(&kubectl, "served", &["Succeeded", "Failed"]).await;
    // The main container alone decides: the sidecar failed once and was stopped at the end.
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    assert_eq!(kubectl.ok(&["logs", "served"]).await, "saw ticks\n");
    let ticker = init_status(&pod, "ticker");
    assert!(ticker["restartCount"].as_u64() >= Some(1), "{pod}");
    assert_eq!(ticker["lastState"]["terminated"]["exitCode"], 1, "{pod}");
    // Stopped with SIGTERM: 128 + 15.
    assert_eq!(ticker["state"]["terminated"]["exitCode"], 143, "{pod}");
    assert_eq!(main_status(&pod)["state"]["terminated"]["exitCode"], 0);

    let log = kubectl.ok(&["logs", "served", "-c", "ticker"]).await;
    let pids = printed_pids(&log);
    assert_eq!(pids.len(), 2, "{log}");
    all_gone(&pids).await;
    assert_eq!(
        kubectl
            .ok(&["logs", "served", "-c", "ticker", "--previous"])
            .await,
        "crashing\n"
    );
    // The sidecar counts among the pod's containers and restarts (`printPod`).
    let cells = row(&kubectl, "served").await;
    assert_eq!(cells[1..3], ["0/2", "Completed"], "{cells:?}");
    assert!(cells[3].starts_with('1'), "{cells:?}");

    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
pod = v1.read_namespaced_pod("served", "default")
status = pod.status.init_container_statuses[0]
print(json.dumps({"name": status.name, "policy": pod.spec.init_containers[0].restart_policy,
                  "log": v1.read_namespaced_pod_log("served", "default", container="ticker")}))
"#,
    )
    .await;
    assert_eq!(seen["name"], "ticker", "{seen}");
    assert_eq!(seen["policy"], "Always", "{seen}");
    assert!(seen["log"].as_str().unwrap().starts_with("pids "), "{seen}");
}

#[tokio::test]
async fn a_sidecar_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let Some((_cluster, kubectl)) = setup("sidecar_grace").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let stubborn = with_env(
        sidecar(
            "stubborn",
            "trap '' TERM; echo $$$$ >> \"$PIDS\"; while true; do sleep 0.1; done",
        ),
        "PIDS",
        pids.to_str().unwrap(),
    );
    let mut spec = spec("Never", None);
    spec["terminationGracePeriodSeconds"] = json!(2);
    let manifest = pod(
        "graceful",
        spec,
        vec![stubborn],
        container(
            "main",
            &format!("until [ -s {} ]; do sleep 0.05; done", pids.display()),
        ),
    );
    apply(&kubectl, "graceful", &manifest).await;
    let pid = read_pids(&pids, 1).await[0];
    let pod = wait_phase(&kubectl, "graceful", &["Running"]).await;
    assert!(alive(pid), "{pod}");
    let pod = wait_phase(&kubectl, "graceful", &["Succeeded", "Failed"]).await;
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    let time = |status: &Value| {
        let text = status["state"]["terminated"]["finishedAt"]
            .as_str()
            .unwrap();
        chrono::DateTime::parse_from_rfc3339(text).unwrap()
    };
    let stubborn = init_status(&pod, "stubborn");
    // SIGKILL (128 + 9) once the grace period was over.
    assert_eq!(stubborn["state"]["terminated"]["exitCode"], 137, "{pod}");
    let waited = time(stubborn) - time(main_status(&pod));
    assert!(waited >= chrono::Duration::seconds(1), "{pod}");
    all_gone(&[pid]).await;
}

// ---------------------------------------------------------------------------------------------
// 5. No process left behind

/// `sh` that records its own pid and a child's in `$PIDS`, then waits on the child forever.
const RECORD_PIDS_AND_SLEEP: &str =
    "echo $$$$ >> \"$PIDS\"; sleep 1000 & echo $! >> \"$PIDS\"; wait";

/// A pod whose sidecar runs forever beside an init container that never finishes, both
/// recording their pids in `pids`.
fn never_initialised(name: &str, pids: &Path) -> String {
    let record = |c: Value| with_env(c, "PIDS", pids.to_str().unwrap());
    pod(
        name,
        spec("Never", None),
        vec![
            record(sidecar("helper", RECORD_PIDS_AND_SLEEP)),
            record(container("blocked", RECORD_PIDS_AND_SLEEP)),
        ],
        container("main", "true"),
    )
}

#[tokio::test]
async fn deleting_a_pod_stops_its_sidecar_and_init_container_leaving_no_process() {
    let Some((_cluster, kubectl)) = setup("init_deletion").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    apply(&kubectl, "stuck", &never_initialised("stuck", &pid_file)).await;
    let pids = read_pids(&pid_file, 4).await;
    assert!(pids.iter().all(|&pid| alive(pid)));
    // The sidecar has started, so it counts as initialized; `blocked` runs.
    assert_eq!(row(&kubectl, "stuck").await[2], "Init:1/2");
    kubectl
        .ok(&["delete", "pod", "stuck", "--wait=false"])
        .await;
    all_gone(&pids).await;
    kube_devcluster::testing::eventually("the pod is gone", Duration::from_secs(20), || async {
        get(&kubectl, "pod", "stuck").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn stopping_the_control_plane_leaves_no_sidecar_behind() {
    let Some((cluster, kubectl)) = setup("init_control_plane_stop").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    apply(
        &kubectl,
        "abandoned",
        &never_initialised("abandoned", &pid_file),
    )
    .await;
    let pids = read_pids(&pid_file, 4).await;
    drop(cluster);
    all_gone(&pids).await;
}

/// The environment variable that makes [`sidecar_pod_until_killed`] run (in a child process).
const HELPER_PIDS: &str = "DEVCLUSTER_TEST_SIDECAR_PIDS";

#[tokio::test]
#[ignore = "helper: run in a child process by a_killed_control_plane_leaves_no_sidecar_behind"]
async fn sidecar_pod_until_killed() {
    let pid_file = std::env::var(HELPER_PIDS).expect("run by the parent test");
    let cluster = kube_devcluster::testing::start().await;
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_str(&never_initialised("survivor", Path::new(&pid_file))).unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // The guarantee starts once the kubelet has both containers' process groups (it reports a
    // container running after that): a kill in the instant between a spawn and that is the
    // window the kubelet's module doc owns up to, and the commands can write their pids in it.
    let running = |pod: k8s_openapi::api::core::v1::Pod| {
        let statuses = pod.status?.init_container_statuses?;
        let started = statuses.iter().filter(|s| {
            let state = s.state.as_ref();
            state.and_then(|state| state.running.as_ref()).is_some()
        });
        (started.count() == 2).then_some(())
    };
    let both = || async { pods.get("survivor").await.ok().and_then(running) };
    kube_devcluster::testing::eventually("both containers to run", Duration::from_secs(20), both)
        .await;
    std::fs::write(running_marker(Path::new(&pid_file)), "").unwrap();
    // Runs until the parent kills this process.
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn a_killed_control_plane_leaves_no_sidecar_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let control_plane = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "conformance_init_containers::sidecar_pod_until_killed",
            "--quiet",
        ])
        .env(HELPER_PIDS, &pid_file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut control_plane = KilledOnDrop(control_plane);
    let pids = read_pids(&pid_file, 4).await;
    let marker = running_marker(&pid_file);
    let reported = || std::future::ready(marker.exists().then_some(()));
    kube_devcluster::testing::eventually(
        "the helper's containers to run",
        Duration::from_secs(20),
        reported,
    )
    .await;
    assert!(pids.iter().all(|&pid| alive(pid)));
    // SIGKILL: no destructor, no shutdown; only the reaper is left to kill the groups.
    control_plane.0.kill().unwrap();
    control_plane.0.wait().unwrap();
    all_gone(&pids).await;
}

/// A child process killed when the test ends, even when it fails first.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// 6. The cost of pods without init containers

/// Not a test: how long pods without init containers take from their creation to `Succeeded`,
/// run as local processes and simulated, to compare the kubelet before and after a change:
/// `cargo test -p kube-devcluster --test it -- --ignored --nocapture measure_pods_without`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test"]
async fn measure_pods_without_init_containers() {
    use kube_devcluster::{DevCluster, DevClusterOptions, PodMode};
    let runs = [
        ("real", PodMode::Real, 300),
        ("simulated 0 ms", PodMode::Simulated(Duration::ZERO), 3000),
        (
            "simulated 1 ms",
            PodMode::Simulated(Duration::from_millis(1)),
            3000,
        ),
    ];
    for (what, pods, count) in runs {
        let cluster = DevCluster::start(DevClusterOptions {
            pods,
            ..DevClusterOptions::default()
        })
        .await
        .unwrap();
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(cluster.client());
        let started = std::time::Instant::now();
        for i in 0..count {
            let manifest = pod(
                &format!("p{i}"),
                spec("Never", None),
                vec![],
                container("main", "true"),
            );
            let mut pod: Value = serde_json::from_str(&manifest).unwrap();
            pod["spec"]
                .as_object_mut()
                .unwrap()
                .remove("initContainers");
            api.create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
            .unwrap();
        }
        kube_devcluster::testing::eventually(
            "every pod done",
            Duration::from_secs(600),
            || async {
                let list = api.list(&Default::default()).await.ok()?;
                let done = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
                    })
                    .count();
                (done == count).then_some(())
            },
        )
        .await;
        println!("{what}: {count} pods in {:?}", started.elapsed());
    }
}
