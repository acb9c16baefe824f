//! `deploy/` installs with kubectl, and its ClusterRole and Role grant exactly what the operator
//! uses: no wildcard, and every (verb, resource) the operator process was seen calling on the
//! embedded control plane during a run through every handler (and a delivery to a
//! WorkFlowTrigger's receiver) is granted.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube_devcluster::DevCluster;
use serde_json::{Value, json};
use workflow_operator_core::crd::{PodCleanup, WorkFlow, WorkFlowTrigger};
use workflow_operator_core::names;
use workflow_operator_core::trigger::verify::sign;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every rule of the ClusterRole and Role in `deploy/base/rbac.yaml`, as (group, resource, verb).
fn granted() -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/base/rbac.yaml")).unwrap();
    let mut grants = BTreeSet::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let doc: Value = serde::Deserialize::deserialize(document).unwrap();
        if !matches!(doc["kind"].as_str(), Some("ClusterRole" | "Role")) {
            continue;
        }
        for rule in doc["rules"].as_array().unwrap() {
            let list = |field: &str| -> Vec<String> {
                rule[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        grants.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    grants
}

#[test]
fn rbac_has_no_wildcards() {
    for (group, resource, verb) in granted() {
        assert!(
            !group.contains('*') && !resource.contains('*') && !verb.contains('*'),
            "wildcard in rule ({group}, {resource}, {verb})"
        );
    }
}

/// `jobs.batch` -> (`batch`, `jobs`); `workflows.workflow.crd.com/status` ->
/// (`workflow.crd.com`, `workflows/status`); `events` -> (``, `events`).
fn group_resource(counted: &str) -> (String, String) {
    let (name, sub) = match counted.split_once('/') {
        Some((name, sub)) => (name, Some(sub)),
        None => (counted, None),
    };
    let (resource, group) = name.split_once('.').unwrap_or((name, ""));
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    (group.to_string(), resource)
}

async fn kubectl(
    cluster: &DevCluster,
    bin: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
) {
    let output = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(args)
        .current_dir(ROOT)
        .env("HOME", home)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Through the WorkFlowTrigger receiver and controller: a signed delivery (the Secret read, the
/// trigger read, the run created), the trigger's status, its run deleted by its history limit.
async fn deliver_to_a_trigger(cluster: &DevCluster, api: &Api<WorkFlow>, triggers: &str) {
    let client = cluster.client();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "hook"}, "stringData": {"token": "s3cret"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let trigger: WorkFlowTrigger = serde_json::from_value(json!({
        "apiVersion": "workflow.crd.com/v1", "kind": "WorkFlowTrigger",
        "metadata": {"name": "hook"},
        "spec": {
            "webhook": {"github": {"secretRef": {"name": "hook", "key": "token"}}},
            "successfulRunsHistoryLimit": 0,
            "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox", "command": ["true"]}]},
        },
    }))
    .unwrap();
    Api::<WorkFlowTrigger>::namespaced(client, "default")
        .create(&PostParams::default(), &trigger)
        .await
        .unwrap();
    let body = br#"{"ref": "refs/heads/main"}"#.to_vec();
    let signature = format!("sha256={}", sign(b"s3cret", &body));
    let url = format!("http://{triggers}/triggers/default/hook");
    // reqwest has no TLS provider of its own: ring, as the operator's clients use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = std::time::Instant::now();
    let status = loop {
        let sent = reqwest::Client::new()
            .post(&url)
            .header("x-github-delivery", "rbac-1")
            .header("x-hub-signature-256", &signature)
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(answer) => break answer.status().as_u16(),
            // The receiver is not listening yet: a backoff between tries, within a deadline.
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(error) => panic!("the receiver does not answer: {error}"),
        }
    };
    assert_eq!(status, 201);
    let run = names::trigger_run_name("hook", "rbac-1");
    wait_for(api, &run, "deletion by the trigger's history limit", |wf| {
        wf.is_none()
    })
    .await;
}

fn phase(wf: Option<&WorkFlow>) -> Option<&str> {
    wf?.status.as_ref()?.workflow_status.map(|p| p.as_str())
}

async fn wait_for(
    api: &Api<WorkFlow>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&WorkFlow>) -> bool,
) {
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), name, check),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: timed out waiting for {what}"))
    .unwrap();
}

/// With leader election (`deploy/`) and sharing the work by shards (`deploy/sharded/`).
#[rstest::rstest]
#[case::leader_election("deploy/", &["--leader-election"])]
#[case::shards("deploy/sharded/", &["--shards", "3"])]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_installs_with_kubectl_and_grants_every_call_the_operator_makes(
    #[case] directory: &str,
    #[case] replication: &[&str],
) {
    let Some(tools) = kube_devcluster::testing::require_tools("deploy_installs_with_kubectl")
    else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cluster = kube_devcluster::testing::start().await;
    kubectl(
        &cluster,
        &tools.kubectl,
        home.path(),
        &["apply", "-k", directory],
    )
    .await;

    let triggers = crate::run_process::free_addr().to_string();
    let _operator = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["run", "--leader-election-namespace", "workflow-operator"])
        .args(["--triggers-addr", &triggers])
        .args(replication)
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // Through every handler: create, job status (success and failure), pod clean-up and TTL,
    // relabel, spec update, delete.
    let api: Api<WorkFlow> = Api::namespaced(cluster.client(), "default");
    let workflow = WorkFlow::test("rbac")
        .step("a", &[])
        .command(&["true"])
        .step("b", &["a"])
        .command(&["true"])
        .namespace("default")
        .build();
    api.create(&PostParams::default(), &workflow).await.unwrap();
    wait_for(&api, "rbac", "Completed", |wf| {
        phase(wf) == Some("Completed")
    })
    .await;
    // A failure: its cause is read from the failed step's pods.
    let failing = WorkFlow::test("rbac-failing")
        .step("a", &[])
        .command(&["false"])
        .namespace("default")
        .build();
    api.create(&PostParams::default(), &failing).await.unwrap();
    wait_for(&api, "rbac-failing", "Failed", |wf| {
        phase(wf) == Some("Failed")
    })
    .await;
    // Clean-up: pods deleted by `podCleanup`, then the workflow by its TTL.
    let mut cleaned = WorkFlow::test("rbac-cleanup")
        .step("a", &[])
        .command(&["true"])
        .namespace("default")
        .build();
    cleaned.spec.pod_cleanup = Some(PodCleanup::OnWorkflowCompletion);
    cleaned.spec.ttl_seconds_after_finished = Some(1);
    api.create(&PostParams::default(), &cleaned).await.unwrap();
    wait_for(&api, "rbac-cleanup", "deletion by its TTL", |wf| {
        wf.is_none()
    })
    .await;
    api.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})),
    )
    .await
    .unwrap();
    let changed = json!({"spec": {"containers": [
        {"stepName": "a", "image": "busybox", "command": ["sh", "-c", "true"]},
        {"stepName": "b", "image": "busybox", "command": ["true"], "dependsOn": ["a"]},
    ]}});
    api.patch("rbac", &PatchParams::default(), &Patch::Merge(changed))
        .await
        .unwrap();
    wait_for(&api, "rbac", "Completed for generation 2", |wf| {
        phase(wf) == Some("Completed")
            && wf.and_then(|w| w.status.as_ref()?.observed_generation) == Some(2)
    })
    .await;
    api.delete("rbac", &DeleteParams::default()).await.unwrap();
    wait_for(&api, "rbac", "deletion", |wf| wf.is_none()).await;
    deliver_to_a_trigger(&cluster, &api, &triggers).await;

    let grants = granted();
    let counts = cluster.requests();
    let calls: BTreeSet<(String, String, String)> = counts
        .requests
        .iter()
        .filter(|(key, _)| key.user_agent.starts_with("workflow-operator"))
        .map(|(key, _)| {
            let (group, resource) = group_resource(&key.resource);
            (group, resource, key.verb.to_string())
        })
        .collect();
    assert!(
        calls.len() >= 8,
        "the operator's calls were counted: {calls:?}"
    );
    let missing: Vec<_> = calls.difference(&grants).collect();
    assert!(
        missing.is_empty(),
        "calls the RBAC does not grant: {missing:?}"
    );
    let unused: Vec<_> = grants.difference(&calls).collect();
    println!("operator calls: {calls:?}\ngranted but not seen in this run: {unused:?}");
}
