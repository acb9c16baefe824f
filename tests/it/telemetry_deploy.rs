//! `deploy/base/deployment.yaml`: every field is one Kubernetes knows, the pod is hardened (non-root,
//! read-only root filesystem, no privilege escalation, no capabilities), its probes and port match the telemetry server, and the API accepts it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::PostParams;
use kube_devcluster::{DevCluster, DevClusterOptions};
use serde_json::json;

const MANIFEST: &str = include_str!("../../deploy/base/deployment.yaml");

fn manifest() -> serde_json::Value {
    serde_yaml::from_str(MANIFEST).expect("deployment.yaml is YAML")
}

fn deployment() -> Deployment {
    serde_json::from_value(manifest()).expect("deployment.yaml is a Deployment")
}

fn operator(deployment: &Deployment) -> Container {
    let pod = deployment.spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.containers.len(), 1, "one container");
    pod.containers[0].clone()
}

#[test]
fn every_field_of_the_manifest_is_a_known_deployment_field() {
    // The typed Deployment drops fields it does not know (a typo such as `readOnlyRootFS`), so
    // a round trip that loses nothing proves every field is spelled right and placed right.
    let round_trip = serde_json::to_value(deployment()).unwrap();
    assert_eq!(round_trip, manifest());
}

#[test]
fn deployment_runs_two_replicas_of_the_local_image_with_leader_election() {
    let deployment = deployment();
    assert_eq!(
        deployment.metadata.namespace.as_deref(),
        Some("workflow-operator")
    );
    let spec = &deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("workflow-operator")
    );

    let container = operator(&deployment);
    assert_eq!(container.image.as_deref(), Some("workflow-operator:dev"));
    let args = container.args.clone().unwrap();
    assert_eq!(args[0], "run");
    assert!(args.contains(&"--leader-election".to_owned()), "{args:?}");
    assert!(
        args.contains(&"--leader-election-identity=$(POD_NAME)".to_owned()),
        "{args:?}"
    );
    let env = container.env.clone().unwrap();
    let field_of = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(field_of("POD_NAME").as_deref(), Some("metadata.name"));
    assert_eq!(
        field_of("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
}

#[test]
fn probes_and_port_match_the_telemetry_server() {
    let container = operator(&deployment());
    let args = container.args.clone().unwrap();
    let metrics_addr = args
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-addr="))
        .expect("a --metrics-addr flag");
    let port: i32 = metrics_addr.rsplit_once(':').unwrap().1.parse().unwrap();
    let http = container
        .ports
        .clone()
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("http"))
        .expect("a port named http");
    assert_eq!(http.container_port, port);

    let cases = [
        ("liveness", container.liveness_probe.clone(), "/healthz"),
        ("readiness", container.readiness_probe.clone(), "/readyz"),
    ];
    for (name, probe, path) in cases {
        let get = probe
            .and_then(|p| p.http_get)
            .unwrap_or_else(|| panic!("{name} probe is an HTTP GET"));
        assert_eq!(get.path.as_deref(), Some(path), "{name}");
        assert_eq!(get.port, IntOrString::String("http".into()), "{name}");
    }
}

#[test]
fn pod_is_hardened_and_bounded() {
    let deployment = deployment();
    let pod = deployment.spec.template.spec.unwrap();
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security.seccomp_profile.map(|s| s.type_),
        Some("RuntimeDefault".to_owned())
    );

    let container = pod.containers[0].clone();
    let security = container.security_context.unwrap();
    let cases = [
        ("runAsNonRoot", security.run_as_non_root == Some(true)),
        ("runAsUser 65532", security.run_as_user == Some(65532)),
        (
            "readOnlyRootFilesystem",
            security.read_only_root_filesystem == Some(true),
        ),
        (
            "no privilege escalation",
            security.allow_privilege_escalation == Some(false),
        ),
        ("not privileged", security.privileged != Some(true)),
        (
            "capabilities drop ALL, add none",
            security.capabilities.as_ref().is_some_and(|c| {
                c.drop.as_deref() == Some(&["ALL".to_owned()][..]) && c.add.is_none()
            }),
        ),
        (
            "seccomp RuntimeDefault",
            security.seccomp_profile.as_ref().map(|s| s.type_.as_str()) == Some("RuntimeDefault"),
        ),
    ];
    for (what, holds) in cases {
        assert!(holds, "container security context: {what}");
    }

    let resources = container.resources.unwrap();
    for (kind, values) in [
        ("requests", resources.requests),
        ("limits", resources.limits),
    ] {
        let values = values.unwrap_or_else(|| panic!("resource {kind}"));
        assert!(
            values.contains_key("cpu") && values.contains_key("memory"),
            "{kind}: {values:?}"
        );
    }
}

#[tokio::test]
async fn the_api_accepts_the_deployment() {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "workflow-operator"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    let api: Api<Deployment> = Api::namespaced(cluster.client(), "workflow-operator");
    let created = api
        .create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let read = api.get("workflow-operator").await.unwrap();
    assert_eq!(read.spec.replicas, Some(2));
}
