//! Strategic merge patch and server-side apply as a real API server answers them, driven by
//! kubectl (client-side and server-side `apply`, `patch --type strategic`) and the official
//! Python client. What each test asserts is what Kubernetes does: the merge keys and patch
//! strategies of the built-in types (k8s.io/api `patchMergeKey`/`patchStrategy` tags), the
//! directives of k8s.io/apimachinery/pkg/util/strategicpatch, and the managed fields and apply
//! conflicts of k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager.

use crate::support;

use crate::support::setup;

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
        // `protocol` is the API server's default (SetDefaults_ContainerPort).
        json!([{"containerPort": 80, "name": "web", "protocol": "TCP"}, {"containerPort": 443, "name": "https", "protocol": "TCP"}]),
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
        json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}]),
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

    // `$patch: delete` in a map removes it: the strategy with `maxSurge: 1` is gone, and the
    // defaulting of the result puts back the default one (SetDefaults_Deployment).
    let live = patch(json!({"spec": {"strategy": {"$patch": "delete"}}})).await;
    assert_eq!(
        live["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
        "{live}"
    );
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
                  "stored": [c.type for c in stored.status.conditions],
                  "managers": [[m.manager, m.operation, m.subresource, m.fields_v1]
                               for m in stored.metadata.managed_fields]}))
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
    // The status writes are the Python client's (manager: its User-Agent up to the first `/`),
    // recorded as an Update through the status subresource.
    let status_entry = out["managers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m[2] == "status")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(status_entry[0], "OpenAPI-Generator", "{out}");
    assert_eq!(status_entry[1], "Update", "{out}");
    assert!(
        status_entry[3]["f:status"]["f:conditions"].is_object(),
        "{out}"
    );
}

const SETTINGS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {app: web}\ndata:\n  a: \"1\"\n  b: \"1\"\n";

/// The managed fields of an object, by manager and operation.
fn managed<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

/// `kubectl apply --server-side` records what the manager applied in `metadata.managedFields`
/// (FieldsV1); applying the same manifest again changes nothing (no new resourceVersion); a field
/// the manager stops applying is removed (k8s.io/apiserver fieldmanager; structured-merge-diff
/// merge.Updater.Apply and prune).
#[tokio::test]
async fn server_side_apply_records_managed_fields_and_removes_what_it_no_longer_applies() {
    let Some((_cluster, kubectl)) = setup("server_side_apply_records_managed_fields").await else {
        return;
    };
    let file = kubectl.manifest("cm.yaml", SETTINGS);
    let out = kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let first = get_json(
        &kubectl,
        &["configmap", "settings", "--show-managed-fields"],
    )
    .await;
    let entry = managed(&first, "kubectl", "Apply").unwrap_or_else(|| panic!("{first}"));
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].is_string(), "{entry}");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}),
        "{first}"
    );

    let out = kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let again = get_json(
        &kubectl,
        &["configmap", "settings", "--show-managed-fields"],
    )
    .await;
    assert_eq!(
        again["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["managedFields"],
        first["metadata"]["managedFields"]
    );

    let without_b = kubectl.manifest(
        "cm2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {app: web}\ndata:\n  a: \"1\"\n",
    );
    kubectl
        .ok(&["apply", "--server-side", "-f", &without_b])
        .await;
    let pruned = get_json(
        &kubectl,
        &["configmap", "settings", "--show-managed-fields"],
    )
    .await;
    assert_eq!(pruned["data"], json!({"a": "1"}), "{pruned}");
    assert_eq!(
        managed(&pruned, "kubectl", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
}

/// An apply that changes a field another manager owns is refused with 409 naming the field and
/// the manager (fieldmanager/internal/conflict.go); `--force-conflicts` takes the field over.
/// A field two managers apply with the same value is shared, and stays while one still applies it.
#[tokio::test]
async fn server_side_apply_conflicts_name_fields_and_managers_and_force_takes_them_over() {
    let Some((_cluster, kubectl)) = setup("server_side_apply_conflicts").await else {
        return;
    };
    let file = kubectl.manifest("cm.yaml", SETTINGS);
    kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    let other = kubectl.manifest(
        "other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"2\"\n  b: \"1\"\n",
    );
    let out = kubectl
        .run(&[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "-f",
            &other,
        ])
        .await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr
            .contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{}",
        out.stderr
    );

    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "--force-conflicts",
            "-f",
            &other,
        ])
        .await;
    let live = get_json(
        &kubectl,
        &["configmap", "settings", "--show-managed-fields"],
    )
    .await;
    assert_eq!(live["data"], json!({"a": "2", "b": "1"}));
    assert_eq!(
        managed(&live, "other", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}}),
        "{live}"
    );
    assert_eq!(
        managed(&live, "kubectl", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}),
        "{live}"
    );

    // kubectl stops applying b; "other" still owns it, so it stays.
    let only_labels = kubectl.manifest(
        "labels.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {app: web}\n",
    );
    kubectl
        .ok(&["apply", "--server-side", "-f", &only_labels])
        .await;
    let live = get_json(&kubectl, &["configmap", "settings"]).await;
    assert_eq!(live["data"], json!({"a": "2", "b": "1"}), "{live}");
}

/// Updates are recorded too (operation Update, the manager from `fieldManager`), and an apply
/// conflicting with one names it with its API version and time; the status is a 409 whose causes
/// are `FieldManagerConflict`s, as the Python client sees it.
#[tokio::test]
async fn updates_are_managed_fields_too_and_conflict_with_apply() {
    let Some((cluster, kubectl)) = setup("updates_are_managed_fields_too").await else {
        return;
    };
    let file = kubectl.manifest("cm.yaml", SETTINGS);
    kubectl.ok(&["create", "-f", &file]).await;
    kubectl
        .ok(&["label", "configmap", "settings", "tier=front"])
        .await;
    let live = get_json(
        &kubectl,
        &["configmap", "settings", "--show-managed-fields"],
    )
    .await;
    assert_eq!(
        managed(&live, "kubectl-create", "Update").unwrap_or_else(|| panic!("{live}"))["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
        "{live}"
    );
    assert_eq!(
        managed(&live, "kubectl-label", "Update").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}}),
        "{live}"
    );

    let out = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
core = client.CoreV1Api()
body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": {"tier": "back"}}}
try:
    core.patch_namespaced_config_map("settings", "default", body, field_manager="py",
                                     _content_type="application/apply-patch+yaml")
    print(json.dumps({"status": 200}))
except client.exceptions.ApiException as e:
    print(json.dumps({"status": e.status, "body": json.loads(e.body)}))
"#,
    )
    .await;
    assert_eq!(out["status"], 409, "{out}");
    assert_eq!(out["body"]["reason"], "Conflict", "{out}");
    let message = out["body"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"Apply failed with 1 conflict: conflict with "kubectl-label" using v1 at "#
        ) && message.ends_with(": .metadata.labels.tier"),
        "{message}"
    );
    let cause = &out["body"]["details"]["causes"][0];
    assert_eq!(cause["reason"], "FieldManagerConflict", "{out}");
    assert_eq!(cause["field"], ".metadata.labels.tier", "{out}");
}

/// An object keeps at most 10 Update entries: after each update the oldest are merged into an
/// `ancient-changes` entry (apimachinery's capmanagers.go), here the creator's and the first two
/// patchers' of twelve managers, as the Python client reads them back.
#[tokio::test]
async fn update_managers_beyond_ten_are_merged_into_ancient_changes() {
    let Some((cluster, _kubectl)) = setup("update_managers_are_capped").await else {
        return;
    };
    let out = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
core = client.CoreV1Api()
body = {"metadata": {"name": "many"}, "data": {"k00": "0"}}
core.create_namespaced_config_map("default", body, field_manager="creator")
for i in range(1, 12):
    core.patch_namespaced_config_map("many", "default", {"data": {"k%02d" % i: str(i)}},
                                     field_manager="m%02d" % i)
cm = core.read_namespaced_config_map("many", "default")
print(json.dumps([
    {"manager": e.manager, "operation": e.operation,
     "keys": sorted(k for k in e.fields_v1.get("f:data", {}) if k != ".")}
    for e in cm.metadata.managed_fields
]))
"#,
    )
    .await;
    let entries = out.as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(entries.len(), 10, "{out}");
    assert!(entries.iter().all(|e| e["operation"] == "Update"), "{out}");
    let ancient = entries
        .iter()
        .find(|e| e["manager"] == "ancient-changes")
        .unwrap_or_else(|| panic!("no ancient-changes entry: {out}"));
    assert_eq!(ancient["keys"], json!(["f:k00", "f:k01", "f:k02"]), "{out}");
    let mut others: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .filter(|m| *m != "ancient-changes")
        .collect();
    others.sort_unstable();
    let expected: Vec<String> = (3..=11).map(|i| format!("m{i:02}")).collect();
    assert_eq!(others, expected, "{out}");
}

/// Two managers apply different containers of one Deployment: the containers list is a map
/// keyed by name (`x-kubernetes-list-map-keys`), so each keeps its own, and re-applying the
/// first manifest leaves the other manager's container.
#[tokio::test]
async fn server_side_apply_merges_keyed_lists_per_manager() {
    let Some((_cluster, kubectl)) = setup("server_side_apply_merges_keyed_lists").await else {
        return;
    };
    let first = kubectl.manifest("d.yaml", &deployment("http", false));
    kubectl.ok(&["apply", "--server-side", "-f", &first]).await;
    let sidecar = kubectl.manifest(
        "sidecar.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - {name: sidecar, image: busybox}\n",
    );
    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager",
            "mesh",
            "-f",
            &sidecar,
        ])
        .await;
    kubectl.ok(&["apply", "--server-side", "-f", &first]).await;
    let live = get_json(&kubectl, &["deployment", "web", "--show-managed-fields"]).await;
    let names: Vec<&str> = live["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "sidecar"], "{live}");
    assert_eq!(
        managed(&live, "mesh", "Apply").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"sidecar\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}),
        "{live}"
    );
}

/// A malformed apply body is a 400 with a Status, never a panic or a closed connection.
#[tokio::test]
async fn malformed_apply_bodies_are_bad_requests() {
    let Some((cluster, kubectl)) = setup("malformed_apply_bodies_are_bad_requests").await else {
        return;
    };
    let file = kubectl.manifest("cm.yaml", SETTINGS);
    kubectl.ok(&["create", "-f", &file]).await;
    for name in ["settings", "absent"] {
        for body in [
            "- a\n- b\n",
            "\"just a string\"",
            "data: [unclosed\n",
            "{\"data\": ",
        ] {
            let path = format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=m");
            let answer = support::raw(
                &cluster,
                "PATCH",
                &path,
                "application/apply-patch+yaml",
                body.as_bytes().to_vec(),
            )
            .await;
            assert_eq!(
                answer.status,
                400,
                "{name} {body:?}: {}",
                String::from_utf8_lossy(&answer.body)
            );
            assert_eq!(answer.json()["kind"], "Status");
        }
    }
}

const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.test.example.com
spec:
  group: test.example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [partName]
                items:
                  type: object
                  properties:
                    partName: {type: string}
                    weight: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              steps:
                type: array
                items: {type: string}
"#;

/// For custom resources the list types come from the CRD's schema: a `map` list merges per key
/// and a `set` per value across managers, a list without a type is atomic and conflicts whole
/// (apiextensions `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`).
#[tokio::test]
async fn server_side_apply_of_custom_objects_follows_the_schema_list_types() {
    let Some((_cluster, kubectl)) = setup("server_side_apply_of_custom_objects").await else {
        return;
    };
    let crd = kubectl.manifest("crd.yaml", GADGET_CRD);
    kubectl.ok(&["apply", "-f", &crd]).await;
    let gadget = |parts: &str, tags: &str, steps: &str| {
        format!(
            "apiVersion: test.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  parts: {parts}\n  tags: {tags}\n  steps: {steps}\n"
        )
    };
    let first = kubectl.manifest(
        "a.yaml",
        &gadget("[{partName: a, weight: 1}]", "[red]", "[one]"),
    );
    kubectl.ok(&["apply", "--server-side", "-f", &first]).await;
    let second = kubectl.manifest(
        "b.yaml",
        "apiVersion: test.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  parts: [{partName: b}]\n  tags: [blue]\n",
    );
    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "--field-manager",
            "b",
            "-f",
            &second,
        ])
        .await;
    let live = get_json(&kubectl, &["gadget", "g", "--show-managed-fields"]).await;
    assert_eq!(
        live["spec"]["parts"],
        json!([{"partName": "a", "weight": 1}, {"partName": "b"}]),
        "{live}"
    );
    assert_eq!(live["spec"]["tags"], json!(["red", "blue"]), "{live}");
    assert_eq!(
        managed(&live, "b", "Apply").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:parts": {"k:{\"partName\":\"b\"}": {".": {}, "f:partName": {}}}, "f:tags": {"v:\"blue\"": {}}}}),
        "{live}"
    );

    let steps = kubectl.manifest(
        "steps.yaml",
        "apiVersion: test.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  steps: [two]\n",
    );
    let out = kubectl
        .run(&[
            "apply",
            "--server-side",
            "--field-manager",
            "b",
            "-f",
            &steps,
        ])
        .await;
    assert!(
        out.stderr
            .contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.steps"#),
        "{}",
        out.stderr
    );
}

/// A ConfigMap `mig` with the given data, as a manifest.
fn config_map_mig(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mig\ndata: {data}\n")
}

/// Moving from `kubectl apply` to `kubectl apply --server-side` and back, as the API server
/// allows it for the `kubectl` field manager (apimachinery managedfields/internal
/// lastappliedmanager.go, lastappliedupdater.go): a change to a field client-side apply set, whose
/// value the last-applied annotation still agrees with, is no conflict; the annotation is then
/// rewritten to what was applied, so a later client-side apply removes what the server-side one
/// added. A field someone else changed since is still a conflict.
#[tokio::test]
async fn kubectl_moves_from_client_side_to_server_side_apply_and_back() {
    let Some((cluster, kubectl)) = setup("kubectl_moves_between_apply_modes").await else {
        return;
    };
    let v1 = kubectl.manifest("v1.yaml", &config_map_mig("{a: \"1\"}"));
    let v2 = kubectl.manifest("v2.yaml", &config_map_mig("{a: \"2\", b: \"1\"}"));
    let v3 = kubectl.manifest("v3.yaml", &config_map_mig("{a: \"2\"}"));
    kubectl.ok(&["apply", "-f", &v1]).await;

    let out = kubectl.ok(&["apply", "--server-side", "-f", &v2]).await;
    assert!(out.contains("configmap/mig serverside-applied"), "{out}");
    let live = get_json(&kubectl, &["configmap", "mig", "--show-managed-fields"]).await;
    assert_eq!(live["data"], json!({"a": "2", "b": "1"}), "{live}");
    let annotation =
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_else(|| panic!("{live}"));
    assert!(annotation.ends_with('\n'), "{annotation:?}");
    let last_applied: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(
        last_applied["data"],
        json!({"a": "2", "b": "1"}),
        "{annotation}"
    );
    assert!(
        managed(&live, "kubectl", "Apply").is_some(),
        "{}",
        live["metadata"]["managedFields"]
    );

    kubectl.ok(&["apply", "-f", &v3]).await;
    let live = get_json(&kubectl, &["configmap", "mig"]).await;
    assert_eq!(live["data"], json!({"a": "2"}), "{live}");

    // kubectl 1.37 rewrites the annotation itself (manager `kubectl-last-applied`); older ones
    // leave it to the server, which does it for the `kubectl` manager only.
    let annotations = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
core = client.CoreV1Api()
seen = []
for manager, data in [("kubectl", {"a": "2", "c": "<3>"}), ("py", {"d": "4"})]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig"}, "data": data}
    cm = core.patch_namespaced_config_map("mig", "default", body, field_manager=manager,
                                          _content_type="application/apply-patch+yaml")
    seen.append(cm.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"])
print(json.dumps(seen))
"#,
    )
    .await;
    let by_kubectl = "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"2\",\"c\":\"\\u003c3\\u003e\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"mig\"}}\n";
    assert_eq!(annotations, json!([by_kubectl, by_kubectl]));

    kubectl
        .ok(&["patch", "configmap", "mig", "-p", r#"{"data":{"a":"5"}}"#])
        .await;
    let out = kubectl.run(&["apply", "--server-side", "-f", &v2]).await;
    assert!(
        !out.success
            && out
                .stderr
                .contains(r#"Apply failed with 1 conflict: conflict with "kubectl-patch""#)
            && out.stderr.contains(".data.a"),
        "{}",
        out.stderr
    );
}
