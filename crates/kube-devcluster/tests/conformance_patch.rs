//! Strategic merge patch and server-side apply as a real API server answers them, driven by
//! kubectl (client-side and server-side `apply`, `patch --type strategic`) and the official
//! Python client. What each test asserts is what Kubernetes does: the merge keys and patch
//! strategies of the built-in types (k8s.io/api `patchMergeKey`/`patchStrategy` tags), the
//! directives of k8s.io/apimachinery/pkg/util/strategicpatch, and the managed fields and apply
//! conflicts of k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager.

mod support;

use support::setup;

use serde_json::{Value, json};

/// A Deployment with one container of two ports, two volume mounts and two env variables.
fn deployment(port_80_name: &str, mount_a_read_only: bool) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 1}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: c
        image: busybox
        env:
        - {{name: A, value: "1"}}
        - {{name: B, value: "1"}}
        ports:
        - {{containerPort: 80, name: {port_80_name}}}
        - {{containerPort: 443, name: https}}
        volumeMounts:
        - {{name: v1, mountPath: /a, readOnly: {mount_a_read_only}}}
        - {{name: v2, mountPath: /b}}
      volumes:
      - {{name: v1, emptyDir: {{}}}}
      - {{name: v2, emptyDir: {{}}}}
"#
    )
}

async fn get_json(kubectl: &support::Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args).await).unwrap()
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// `kubectl apply` (client-side) sends a strategic merge patch of what changed, with
/// `$setElementOrder` directives: ports merge on containerPort, volume mounts on mountPath
/// (k8s.io/api/core/v1 types.go `patchMergeKey`), so the untouched ones stay.
#[tokio::test]
async fn client_side_apply_merges_ports_and_volume_mounts_by_their_merge_keys() {
    let Some((_cluster, kubectl)) = setup("client_side_apply_merges_ports").await else {
        return;
    };
    let first = kubectl.manifest("d1.yaml", &deployment("http", false));
    let out = kubectl.ok(&["apply", "-f", &first]).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");

    let second = kubectl.manifest("d2.yaml", &deployment("web", true));
    let out = kubectl.ok(&["apply", "-f", &second]).await;
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let live = get_json(&kubectl, &["deployment", "web"]).await;
    assert_eq!(
        container(&live)["ports"],
        json!([{"containerPort": 80, "name": "web"}, {"containerPort": 443, "name": "https"}]),
        "{live}"
    );
    assert_eq!(
        container(&live)["volumeMounts"],
        json!([{"name": "v1", "mountPath": "/a", "readOnly": true}, {"name": "v2", "mountPath": "/b"}]),
        "{live}"
    );

    // Applying the same manifest again changes nothing, as against a real server.
    let out = kubectl.ok(&["apply", "-f", &second]).await;
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    let again = get_json(&kubectl, &["deployment", "web"]).await;
    assert_eq!(
        again["metadata"]["resourceVersion"],
        live["metadata"]["resourceVersion"]
    );
}

/// The directives of a strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch,
/// patch.go): `$patch: delete` of a list element by merge key, `$patch: replace` of a list and of
/// a map, `$setElementOrder`, `$retainKeys`, `$deleteFromPrimitiveList`, and the merge strategy
/// of `finalizers` (a set of strings).
#[tokio::test]
async fn kubectl_patch_strategic_follows_the_directives() {
    let Some((_cluster, kubectl)) = setup("kubectl_patch_strategic_follows_the_directives").await
    else {
        return;
    };
    let manifest = kubectl.manifest("d.yaml", &deployment("http", false));
    kubectl.ok(&["create", "-f", &manifest]).await;
    let patch = |p: Value| {
        let p = p.to_string();
        let kubectl = &kubectl;
        async move {
            kubectl
                .ok(&[
                    "patch",
                    "deployment",
                    "web",
                    "--type",
                    "strategic",
                    "-p",
                    &p,
                ])
                .await;
            get_json(kubectl, &["deployment", "web"]).await
        }
    };

    // A port deleted by its merge key; the other stays.
    let live = patch(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "ports": [{"containerPort": 443, "$patch": "delete"}]}
    ]}}}}))
    .await;
    assert_eq!(
        container(&live)["ports"],
        json!([{"containerPort": 80, "name": "http"}]),
        "{live}"
    );

    // One env variable changed, the order set by `$setElementOrder/env`.
    let live = patch(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "$setElementOrder/env": [{"name": "B"}, {"name": "A"}], "env": [{"name": "B", "value": "2"}]}
    ]}}}}))
    .await;
    assert_eq!(
        container(&live)["env"],
        json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]),
        "{live}"
    );

    // `$retainKeys` clears what it does not name: the strategy becomes Recreate without
    // rollingUpdate (DeploymentSpec.strategy has patchStrategy retainKeys).
    let live =
        patch(json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})).await;
    assert_eq!(
        live["spec"]["strategy"],
        json!({"type": "Recreate"}),
        "{live}"
    );

    // finalizers merge as a set; `$deleteFromPrimitiveList/finalizers` removes one.
    patch(json!({"metadata": {"finalizers": ["example.com/x"]}})).await;
    let live = patch(json!({"metadata": {"finalizers": ["example.com/y"]}})).await;
    assert_eq!(
        live["metadata"]["finalizers"],
        json!(["example.com/x", "example.com/y"]),
        "{live}"
    );
    let live =
        patch(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/x"]}}))
            .await;
    assert_eq!(
        live["metadata"]["finalizers"],
        json!(["example.com/y"]),
        "{live}"
    );

    // `$patch: replace` in a map replaces it whole.
    let live = patch(json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}})).await;
    assert_eq!(
        live["metadata"]["labels"],
        json!({"only": "this"}),
        "{live}"
    );

    // `$patch: replace` as a list element replaces the list.
    let live = patch(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "n", "image": "busybox"}, {"$patch": "replace"}
    ]}}}}))
    .await;
    let names: Vec<&str> = live["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n"], "{live}");

    // `$patch: delete` in a map removes it.
    let live = patch(json!({"spec": {"strategy": {"$patch": "delete"}}})).await;
    assert!(live["spec"].get("strategy").is_none(), "{live}");
    kubectl
        .ok(&[
            "patch",
            "deployment",
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ])
        .await;
}

/// The Python client sends a dict as a strategic merge patch: a status patch of one condition
/// merges on the condition's `type` (JobStatus.conditions `patchMergeKey:"type"`), leaving the
/// others.
#[tokio::test]
async fn python_status_patch_of_one_condition_keeps_the_others() {
    let Some((cluster, _kubectl)) = setup("python_status_patch_of_one_condition").await else {
        return;
    };
    let out = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
batch = client.BatchV1Api()
job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
       "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}
batch.create_namespaced_job("default", job)
def condition(t):
    return {"type": t, "status": "True", "reason": "Testing", "message": t,
            "lastTransitionTime": "2024-01-01T00:00:00Z", "lastProbeTime": "2024-01-01T00:00:00Z"}
batch.patch_namespaced_job_status("j", "default", {"status": {"conditions": [condition("example.com/A")]}})
answer = batch.patch_namespaced_job_status("j", "default", {"status": {"conditions": [condition("example.com/B")]}})
stored = batch.read_namespaced_job_status("j", "default")
print(json.dumps({"answer": [c.type for c in answer.status.conditions],
                  "stored": [c.type for c in stored.status.conditions]}))
"#,
    )
    .await;
    for key in ["answer", "stored"] {
        let types: Vec<&str> = out[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            types.contains(&"example.com/A") && types.contains(&"example.com/B"),
            "{out}"
        );
    }
}
