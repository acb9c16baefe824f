//! Shared fixtures of the devcluster API tests: a started cluster, a small test CRD (`Widget`,
//! with a status subresource, printer columns, defaults and validation), raw HTTP requests, and
//! the external tools (`kubectl`, Python with the `kubernetes` client) that
//! `scripts/install-test-tools.sh` puts into `.venv/`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use workflow_operator::devcluster::{DevCluster, DevClusterOptions};

/// The test CRD as YAML: `widgets.test.example.com`, kind `Widget`, short name `wd`.
pub const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.example.com
spec:
  group: test.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              size: {type: integer, default: 3, minimum: 1}
              color: {type: string, enum: [red, blue]}
              parts:
                type: array
                items:
                  type: object
                  required: [partName]
                  properties:
                    partName: {type: string, pattern: '^[a-z0-9-]+$'}
                    weight: {type: integer, default: 1}
              blob: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              phase: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
"#;

pub async fn start() -> DevCluster {
    DevCluster::start(DevClusterOptions::default())
        .await
        .expect("the devcluster starts")
}

/// Installs the Widget CRD through the API.
pub async fn install_widget_crd(cluster: &DevCluster) {
    let crd: CustomResourceDefinition = serde_yaml::from_str(WIDGET_CRD).unwrap();
    Api::<CustomResourceDefinition>::all(cluster.client())
        .create(&PostParams::default(), &crd)
        .await
        .expect("the CRD is accepted");
}

pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.example.com", "v1", "Widget"),
        "widgets",
    )
}

pub fn widgets(cluster: &DevCluster, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(cluster.client(), namespace, &widget_resource())
}

/// A Widget manifest with the given name, labels and spec.
pub fn widget(name: &str, labels: Value, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "test.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

/// The answer to a raw request: status, headers and body.
pub struct RawResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

pub async fn raw(
    cluster: &DevCluster,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> RawResponse {
    raw_accepting(
        cluster,
        method,
        path,
        "application/json",
        content_type,
        body,
    )
    .await
}

/// [`raw`], asking for the media type `accept`.
pub async fn raw_accepting(
    cluster: &DevCluster,
    method: &str,
    path: &str,
    accept: &str,
    content_type: &str,
    body: Vec<u8>,
) -> RawResponse {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .unwrap();
    // Without kube-rs's retries (it retries 429s), so the test sees each answer as it was.
    let mut config = kube::Config::new(cluster.base_url().parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let response = client.send(request).await.expect("the request is sent");
    let (parts, body) = response.into_parts();
    RawResponse {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect_bytes().await.expect("a body").to_vec(),
    }
}

/// Waits until `check` holds, polling; panics after `deadline`.
pub async fn eventually<F, Fut>(deadline: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The tools the kubectl and Python tests drive the cluster with.
pub struct Tools {
    pub kubectl: PathBuf,
    pub python: PathBuf,
}

/// `.venv/bin/kubectl` and `.venv/bin/python`, installed by `scripts/install-test-tools.sh` on
/// first use. `None` (after printing why) only when this machine has no Python to install them
/// with; any other failure to install them fails the test.
pub fn require_tools(test: &str) -> Option<&'static Tools> {
    match tools() {
        Ok(tools) => Some(tools),
        Err(Missing::NoPython(reason)) => {
            println!("SKIPPED {test}: {reason}");
            eprintln!("SKIPPED {test}: {reason}");
            None
        }
        Err(Missing::InstallFailed(reason)) => panic!("{reason}"),
    }
}

#[derive(Debug, Clone)]
enum Missing {
    NoPython(String),
    InstallFailed(String),
}

fn tools() -> Result<&'static Tools, Missing> {
    static TOOLS: OnceLock<Result<Tools, Missing>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            let venv = root.join(".venv/bin");
            let tools = Tools {
                kubectl: venv.join("kubectl"),
                python: venv.join("python"),
            };
            let ready = |t: &Tools| {
                t.kubectl.exists()
                    && std::process::Command::new(&t.python)
                        .args(["-c", "import kubernetes"])
                        .output()
                        .is_ok_and(|o| o.status.success())
            };
            if ready(&tools) {
                return Ok(tools);
            }
            let python_present = std::process::Command::new("python3")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !python_present {
                return Err(Missing::NoPython(
                    "python3 is not installed, so kubectl and the Python client cannot be installed into .venv/".into(),
                ));
            }
            let status = std::process::Command::new("bash")
                .arg(root.join("scripts/install-test-tools.sh"))
                .status()
                .map_err(|e| {
                    Missing::InstallFailed(format!("cannot run scripts/install-test-tools.sh: {e}"))
                })?;
            if status.success() && ready(&tools) {
                Ok(tools)
            } else {
                Err(Missing::InstallFailed(format!(
                    "scripts/install-test-tools.sh failed ({status}); kubectl or the Python client is missing"
                )))
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}
