//! The Node and the scheduler, judged as a user of a real one-node cluster judges them: kubectl
//! (`get nodes`, `describe node`, `label`, `taint`, `cordon`) and the Python client. A pod the
//! Node cannot take stays `Pending` with kube-scheduler's message in its `PodScheduled`
//! condition and a `FailedScheduling` Event from `default-scheduler`
//! (pkg/scheduler/schedule_one.go, `handleSchedulingFailure`), and runs once the Node changes so
//! that it can.

use std::time::Duration;

use crate::support::{Kubectl, get, python, rows, setup, wait_phase};
use kube_devcluster::testing;
use serde_json::Value;

/// The one Node's name.
async fn node_name(kubectl: &Kubectl) -> String {
    kubectl
        .ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
        .await
}

/// A pod that exits at once, with `spec` (YAML flow mapping entries) added to its spec.
fn pod_manifest(kubectl: &Kubectl, name: &str, spec: &str) -> String {
    kubectl.manifest(
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{restartPolicy: Never, \
             containers: [{{name: c, image: busybox, command: [\"true\"]}}], {spec}}}\n"
        ),
    )
}

/// Waits until the pod is unschedulable; its `PodScheduled` condition.
async fn unschedulable(kubectl: &Kubectl, name: &str) -> Value {
    testing::eventually(
        &format!("pod {name} unschedulable"),
        Duration::from_secs(20),
        || async {
            let pod = get(kubectl, "pod", name).await?;
            let conditions = pod["status"]["conditions"].as_array()?;
            conditions
                .iter()
                .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
                .cloned()
        },
    )
    .await
}

/// The `FailedScheduling` Events of a pod, as `kubectl get events` lists them.
async fn failed_scheduling(kubectl: &Kubectl, pod: &str) -> Vec<Value> {
    let selector = format!("involvedObject.name={pod},reason=FailedScheduling");
    let out = kubectl
        .ok(&["get", "events", "--field-selector", &selector, "-o", "json"])
        .await;
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

const AFFINITY_MESSAGE: &str = "0/1 nodes are available: 1 node(s) didn't match Pod's node \
    affinity/selector. no new claims to deallocate, preemption: 0/1 nodes are available: 1 \
    Preemption is not helpful for scheduling.";

#[tokio::test]
async fn kubectl_and_python_see_one_ready_node_named_after_the_machine() {
    let Some((cluster, kubectl)) = setup("scheduling_node").await else {
        return;
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let name = node_name(&kubectl).await;
    assert_eq!(name, host.trim().to_lowercase());

    let table = rows(&kubectl.ok(&["get", "nodes"]).await);
    assert_eq!(table[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(table.len(), 2, "{table:?}");
    assert_eq!(table[1][..3], [name.as_str(), "Ready", "<none>"]);
    assert_eq!(table[1][4], "v1.34.0-workflow-devcluster");
    let wide = rows(&kubectl.ok(&["get", "no", "-o", "wide"]).await);
    assert_eq!(wide[0][5..7], ["INTERNAL-IP", "EXTERNAL-IP"]);
    assert_eq!(wide[1][5..7], ["127.0.0.1", "<none>"]);

    let described = kubectl.ok(&["describe", "node", &name]).await;
    for expected in [
        format!("Name:               {name}"),
        format!("kubernetes.io/hostname={name}"),
        "kubernetes.io/os=linux".to_string(),
        "Taints:             <none>".to_string(),
        "Unschedulable:      false".to_string(),
        "KubeletReady".to_string(),
        format!("HolderIdentity:  {name}"),
        "InternalIP:  127.0.0.1".to_string(),
        "Capacity:".to_string(),
        "Allocatable:".to_string(),
        "pods:               110".to_string(),
        "Kubelet Version:            v1.34.0-workflow-devcluster".to_string(),
    ] {
        assert!(described.contains(&expected), "{expected}:\n{described}");
    }

    let cores = std::thread::available_parallelism().unwrap().get();
    let seen = python(
        &cluster,
        "import json, sys\nfrom kubernetes import client, config\n\
         config.load_kube_config(sys.argv[1])\n\
         node = client.CoreV1Api().list_node().items[0]\n\
         ready = [c.status for c in node.status.conditions if c.type == 'Ready']\n\
         print(json.dumps({'name': node.metadata.name, 'cpu': node.status.allocatable['cpu'],\n\
             'arch': node.metadata.labels['kubernetes.io/arch'], 'ready': ready,\n\
             'os': node.status.node_info.operating_system}))",
    )
    .await;
    assert_eq!(seen["name"], name.as_str());
    assert_eq!(seen["cpu"], cores.to_string().as_str());
    assert_eq!(seen["ready"], serde_json::json!(["True"]));
    assert_eq!(seen["os"], "linux");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(seen["arch"], arch);
}

#[tokio::test]
async fn a_pod_no_node_matches_stays_pending_until_the_node_is_labelled() {
    let Some((cluster, kubectl)) = setup("scheduling_node_selector").await else {
        return;
    };
    let name = node_name(&kubectl).await;
    let file = pod_manifest(&kubectl, "picky", "nodeSelector: {disk: ssd}");
    kubectl.ok(&["create", "-f", &file]).await;

    let condition = unschedulable(&kubectl, "picky").await;
    assert_eq!(condition["reason"], "Unschedulable");
    assert_eq!(condition["message"], AFFINITY_MESSAGE);
    let pod = get(&kubectl, "pod", "picky").await.unwrap();
    assert_eq!(pod["status"]["phase"], "Pending");
    assert!(pod["spec"].get("nodeName").is_none(), "{pod}");
    let events = failed_scheduling(&kubectl, "picky").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["message"], AFFINITY_MESSAGE);
    assert_eq!(events[0]["source"]["component"], "default-scheduler");
    let seen = python(
        &cluster,
        "import json, sys\nfrom kubernetes import client, config\n\
         config.load_kube_config(sys.argv[1])\n\
         pod = client.CoreV1Api().read_namespaced_pod('picky', 'default')\n\
         c = [c for c in pod.status.conditions if c.type == 'PodScheduled'][0]\n\
         print(json.dumps({'phase': pod.status.phase, 'reason': c.reason, 'message': c.message}))",
    )
    .await;
    assert_eq!(seen["phase"], "Pending");
    assert_eq!(seen["reason"], "Unschedulable");
    assert_eq!(seen["message"], AFFINITY_MESSAGE);

    // An affinity term that no label satisfies either.
    let file = pod_manifest(
        &kubectl,
        "by-affinity",
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
         {nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: In, values: [ssd, nvme]}]}]}}}",
    );
    kubectl.ok(&["create", "-f", &file]).await;
    let condition = unschedulable(&kubectl, "by-affinity").await;
    assert_eq!(condition["message"], AFFINITY_MESSAGE);

    // Labelling the Node lets both run there.
    kubectl.ok(&["label", "node", &name, "disk=ssd"]).await;
    for pod in ["picky", "by-affinity"] {
        let done = wait_phase(&kubectl, pod, &["Succeeded"]).await;
        assert_eq!(done["spec"]["nodeName"], name.as_str());
        let scheduled = done["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "PodScheduled")
            .cloned()
            .unwrap();
        assert_eq!(scheduled["status"], "True", "{done}");
    }
}

#[tokio::test]
async fn a_taint_or_a_cordon_keeps_out_pods_that_do_not_tolerate_it() {
    let Some((_cluster, kubectl)) = setup("scheduling_taints").await else {
        return;
    };
    let name = node_name(&kubectl).await;
    kubectl
        .ok(&["taint", "node", &name, "dedicated=ci:NoSchedule"])
        .await;
    let plain = pod_manifest(&kubectl, "plain", "");
    kubectl.ok(&["create", "-f", &plain]).await;
    let tolerant = pod_manifest(
        &kubectl,
        "tolerant",
        "tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]",
    );
    kubectl.ok(&["create", "-f", &tolerant]).await;

    wait_phase(&kubectl, "tolerant", &["Succeeded"]).await;
    let condition = unschedulable(&kubectl, "plain").await;
    assert_eq!(
        condition["message"],
        "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to \
         deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
         scheduling."
    );
    let described = kubectl.ok(&["describe", "node", &name]).await;
    assert!(
        described.contains("Taints:             dedicated=ci:NoSchedule"),
        "{described}"
    );

    // Untainted but cordoned: still out, for another reason.
    kubectl.ok(&["cordon", &name]).await;
    kubectl
        .ok(&["taint", "node", &name, "dedicated=ci:NoSchedule-"])
        .await;
    testing::eventually(
        "the cordon to speak for the pod",
        Duration::from_secs(20),
        || async {
            let pod = get(&kubectl, "pod", "plain").await?;
            let message = pod["status"]["conditions"][0]["message"]
                .as_str()?
                .to_string();
            message
                .starts_with("0/1 nodes are available: 1 node(s) were unschedulable.")
                .then_some(())
        },
    )
    .await;
    let table = rows(&kubectl.ok(&["get", "nodes"]).await);
    assert_eq!(table[1][1], "Ready,SchedulingDisabled");

    kubectl.ok(&["uncordon", &name]).await;
    let done = wait_phase(&kubectl, "plain", &["Succeeded"]).await;
    assert_eq!(done["spec"]["nodeName"], name.as_str());
}

#[tokio::test]
async fn a_pod_asking_more_cpu_than_the_machine_has_is_insufficient_cpu() {
    let Some((_cluster, kubectl)) = setup("scheduling_insufficient_cpu").await else {
        return;
    };
    let file = kubectl.manifest(
        "greedy.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: greedy}\nspec: {restartPolicy: Never, \
         containers: [{name: c, image: busybox, command: [\"true\"], \
         resources: {requests: {cpu: \"100000\", memory: 1Mi}}}]}\n",
    );
    kubectl.ok(&["create", "-f", &file]).await;
    let condition = unschedulable(&kubectl, "greedy").await;
    let message = "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, \
        preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    assert_eq!(condition["message"], message);
    let described = kubectl.ok(&["describe", "pod", "greedy"]).await;
    assert!(described.contains("FailedScheduling"), "{described}");
    assert!(described.contains("default-scheduler"), "{described}");
    assert_eq!(failed_scheduling(&kubectl, "greedy").await.len(), 1);
}

#[tokio::test]
async fn a_pod_waiting_for_cpu_runs_once_the_pod_holding_it_finishes() {
    let Some((_cluster, kubectl)) = setup("scheduling_room_freed").await else {
        return;
    };
    let cores = std::thread::available_parallelism().unwrap().get();
    let asking = |name: &str, cpu: &str, command: &str| {
        kubectl.manifest(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{restartPolicy: \
                 Never, containers: [{{name: c, image: busybox, command: [sh, -c, \"{command}\"], \
                 resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}\n"
            ),
        )
    };
    // The holder runs until the test lets it go, by making a file.
    let gate = tempfile::tempdir().unwrap();
    let go = gate.path().join("go");
    let hold = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let holder = asking("holder", &cores.to_string(), &hold);
    kubectl.ok(&["create", "-f", &holder]).await;
    wait_phase(&kubectl, "holder", &["Running"]).await;
    let waiter = asking("waiter", "100m", "true");
    kubectl.ok(&["create", "-f", &waiter]).await;
    let condition = unschedulable(&kubectl, "waiter").await;
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{condition}"
    );
    // No Node change: the holder's end alone frees the room.
    std::fs::write(&go, "").unwrap();
    wait_phase(&kubectl, "holder", &["Succeeded"]).await;
    wait_phase(&kubectl, "waiter", &["Succeeded"]).await;
}

/// A Node without `spec.unschedulable` is selected by `spec.unschedulable=false`, as the real
/// server selects on `fmt.Sprint(node.Spec.Unschedulable)`; cordoned, by `=true` only.
#[tokio::test]
async fn nodes_are_selected_on_spec_unschedulable_even_without_the_field() {
    let Some((_cluster, kubectl)) = setup("nodes_field_selector").await else {
        return;
    };
    let name = node_name(&kubectl).await;
    let selected = |value: &'static str| {
        let kubectl = &kubectl;
        async move {
            let selector = format!("spec.unschedulable={value}");
            kubectl
                .ok(&[
                    "get",
                    "nodes",
                    "--field-selector",
                    &selector,
                    "-o",
                    "jsonpath={.items[*].metadata.name}",
                ])
                .await
        }
    };
    assert_eq!(selected("false").await, name, "an uncordoned Node");
    assert_eq!(selected("true").await, "");
    kubectl.ok(&["cordon", &name]).await;
    assert_eq!(selected("true").await, name, "a cordoned Node");
    assert_eq!(selected("false").await, "");
    kubectl.ok(&["uncordon", &name]).await;
    assert_eq!(selected("false").await, name, "an uncordoned Node again");
}
