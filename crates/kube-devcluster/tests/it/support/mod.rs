//! Shared fixtures of the devcluster API tests: a started cluster, a small test CRD (`Widget`,
//! with a status subresource, printer columns, defaults and validation), raw HTTP requests,
//! pods read through kubectl, and the processes pods leave (or must not leave) on the machine;
//! what every crate's tests share comes from [`kube_devcluster::testing`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube_devcluster::testing::eventually;
use kube_devcluster::{DevCluster, testing};
use serde_json::{Value, json};

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
    send(cluster, request).await
}

/// A request without a body carrying `Authorization: Bearer TOKEN`, for a control plane with
/// `DevClusterOptions::rbac`.
pub async fn raw_with_token(
    cluster: &DevCluster,
    method: &str,
    path: &str,
    token: &str,
) -> RawResponse {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(kube::client::Body::empty())
        .unwrap();
    send(cluster, request).await
}

/// Sends `request` to `cluster` as it is and reads the whole answer.
async fn send(cluster: &DevCluster, request: http::Request<kube::client::Body>) -> RawResponse {
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

/// kubectl bound to one cluster, with its own discovery cache and a directory for manifests.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn new(cluster: &DevCluster, bin: PathBuf) -> Self {
        Self {
            bin,
            kubeconfig: cluster.kubeconfig_path().to_path_buf(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.bin);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .envs(testing::KUBECTL_ENV)
            .kill_on_drop(true);
        command
    }

    pub async fn run(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().await.expect("kubectl runs");
        Output {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a command that must succeed; its standard output.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.success,
            "kubectl {args:?} failed:\n{}\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    /// `kubectl create job NAME --image=busybox -- sh -c 'sleep 30'`: a Job whose pod runs
    /// while the test looks at it.
    pub async fn create_sleeping_job(&self, name: &str) {
        self.ok(&[
            "create",
            "job",
            name,
            "--image=busybox",
            "--",
            "sh",
            "-c",
            "sleep 30",
        ])
        .await;
    }

    /// Writes a manifest file and returns its path.
    pub fn manifest(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path.to_string_lossy().into_owned()
    }
}

pub async fn setup(test: &str) -> Option<(DevCluster, Kubectl)> {
    let tools = testing::require_tools(test)?;
    let cluster = testing::start().await;
    let kubectl = Kubectl::new(&cluster, tools.kubectl.clone());
    Some((cluster, kubectl))
}

/// The words of each line of a `kubectl get` table.
pub fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Runs a Python script with the official `kubernetes` client against `cluster` (its kubeconfig
/// is `sys.argv[1]`); the script must succeed. Its standard output, parsed as one JSON value.
pub async fn python(cluster: &DevCluster, script: &str) -> Value {
    let tools = testing::require_tools("python").expect("the tools, already checked by setup");
    let out = tokio::process::Command::new(&tools.python)
        .arg("-c")
        .arg(script)
        .arg(cluster.kubeconfig_path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `kubectl get KIND NAME -o json`, parsed; `None` when it is not found.
pub async fn get(kubectl: &Kubectl, kind: &str, name: &str) -> Option<Value> {
    let out = kubectl.run(&["get", kind, name, "-o", "json"]).await;
    out.success
        .then(|| serde_json::from_str(&out.stdout).expect("json"))
}

/// Waits until the pod's phase is one of `phases`; the pod.
pub async fn wait_phase(kubectl: &Kubectl, pod: &str, phases: &[&str]) -> Value {
    eventually(
        &format!("pod {pod} in {phases:?}"),
        Duration::from_secs(30),
        || async {
            let pod = get(kubectl, "pod", pod).await?;
            let phase = pod["status"]["phase"].as_str()?.to_string();
            phases.contains(&phase.as_str()).then_some(pod)
        },
    )
    .await
}

/// Whether a process exists and is not a zombie (a killed orphan whose reaping is up to init).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            Some(state != 'Z')
        })
        .unwrap_or(false)
}

/// The file a helper test run in a child process writes once the kubelet reports its pod's
/// containers running (it holds their process groups from then on), beside its pid file.
pub fn running_marker(pid_file: &Path) -> std::path::PathBuf {
    pid_file.with_extension("running")
}

/// The pids a pod command wrote to `file`, one a line, once it wrote `count` of them.
pub async fn read_pids(file: &Path, count: usize) -> Vec<u32> {
    eventually("the pod to write its pids", Duration::from_secs(10), || {
        let pids: Vec<u32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        std::future::ready((pids.len() >= count).then_some(pids))
    })
    .await
}

/// Waits until none of `pids` is alive.
pub async fn all_gone(pids: &[u32]) {
    for &pid in pids {
        eventually(
            &format!("process {pid} to die"),
            Duration::from_secs(10),
            || std::future::ready((!alive(pid)).then_some(())),
        )
        .await;
    }
}
