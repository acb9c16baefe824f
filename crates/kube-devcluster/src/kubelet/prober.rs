//! Readiness probes: a running container's `readinessProbe` run as the kubelet's prober runs
//! it, its result the container's `ready` (and so the pod's `Ready` and `ContainersReady`
//! conditions, [`super::status`]). The runner probes a container while its process runs
//! ([`probe_readiness`]); liveness and startup probes are not run.
//!
//! The rules are the kubelet's (k8s.io/kubernetes):
//! - a container with a readiness probe starts not ready, and is not ready again at each
//!   restart (pkg/kubelet/prober/worker.go, `newWorker`: `initialValue = results.Failure` for
//!   readiness; the worker is made anew for each container id); one without is ready once it
//!   runs (pkg/kubelet/prober/prober_manager.go, `UpdatePodStatus`);
//! - the first probe runs when the container starts, then one every `periodSeconds`; a probe
//!   before `initialDelaySeconds` since the container started does nothing (worker.go, `run`
//!   and `doProbe`);
//! - a result changes the container's readiness only once it came `successThreshold` times in
//!   a row (a success) or `failureThreshold` times (a failure) (worker.go, `doProbe`:
//!   `resultRun`);
//! - the defaults: `periodSeconds` 10, `timeoutSeconds` 1, `successThreshold` 1,
//!   `failureThreshold` 3, `initialDelaySeconds` 0 (pkg/apis/core/v1/defaults.go,
//!   `SetDefaults_Probe`);
//! - `exec` succeeds when the command exits 0 within `timeoutSeconds` (pkg/kubelet/prober/
//!   prober.go, `runProbe`, and pkg/probe/exec/exec.go); it runs in the container as `kubectl
//!   exec` does ([`super::exec`]);
//! - `httpGet` succeeds on a status from 200 to 399 within `timeoutSeconds` (pkg/probe/http/
//!   http.go, `DoHTTPProbe`: a redirect is a warning, which counts as a success); `host`
//!   defaults to the pod's IP, `path` to `/`, a `port` by name is the container's port of that
//!   name (prober.go, `runProbe`, `probe.ResolveContainerPort`); its `httpHeaders` are sent,
//!   with `User-Agent: kube-probe/1.34` unless they set one (pkg/probe/http/request.go,
//!   `NewProbeRequest`). Only `scheme: HTTP`: an `HTTPS` probe fails here;
//! - `tcpSocket` succeeds when a connection opens within `timeoutSeconds` (pkg/probe/tcp/tcp.go,
//!   `DoTCPProbe`), `host` defaulting to the pod's IP;
//! - a `grpc` probe is not run here: it fails, so its container is never ready.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::Shared;
use super::exec::{ExecRequest, PodExec as _};

/// The pod's IP, every pod's here: its processes run on the machine.
const POD_IP: &str = "127.0.0.1";

/// What a probe checks.
#[derive(Debug, Clone, PartialEq)]
enum Action {
    Exec(Vec<String>),
    Http {
        host: String,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
        https: bool,
    },
    Tcp {
        host: String,
        port: u16,
    },
    /// A probe this kubelet does not run (`grpc`, or one naming a port the container lacks).
    Unsupported,
}

/// A container's readiness probe, its defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Probe {
    action: Action,
    initial_delay: Duration,
    period: Duration,
    timeout: Duration,
    success_threshold: u32,
    failure_threshold: u32,
}

/// The readiness probe of `container`, if it has one.
pub(crate) fn readiness_probe(container: &Value) -> Option<Probe> {
    let probe = container.get("readinessProbe")?;
    let seconds = |field: &str, default: u64| {
        let value = probe.get(field).and_then(Value::as_u64).unwrap_or(default);
        Duration::from_secs(value)
    };
    let threshold = |field: &str, default: u32| {
        let value = probe.get(field).and_then(Value::as_u64);
        value
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(default)
            .max(1)
    };
    Some(Probe {
        action: action(probe, container),
        initial_delay: seconds("initialDelaySeconds", 0),
        period: seconds("periodSeconds", 10).max(Duration::from_secs(1)),
        timeout: seconds("timeoutSeconds", 1).max(Duration::from_secs(1)),
        success_threshold: threshold("successThreshold", 1),
        failure_threshold: threshold("failureThreshold", 3),
    })
}

fn action(probe: &Value, container: &Value) -> Action {
    let host = |handler: &Value| {
        (handler.get("host").and_then(Value::as_str))
            .filter(|h| !h.is_empty())
            .unwrap_or(POD_IP)
            .to_string()
    };
    if let Some(exec) = probe.get("exec") {
        let command = (exec.get("command").and_then(Value::as_array)).map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        });
        return Action::Exec(command.unwrap_or_default());
    }
    if let Some(http) = probe.get("httpGet") {
        let Some(port) = port(http.get("port"), container) else {
            return Action::Unsupported;
        };
        let path = (http.get("path").and_then(Value::as_str)).unwrap_or("");
        let headers = (http.get("httpHeaders").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter_map(|h| {
                let name = h.get("name")?.as_str()?;
                Some((name.to_string(), h.get("value")?.as_str()?.to_string()))
            })
            .collect();
        return Action::Http {
            host: host(http),
            port,
            path: if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            },
            headers,
            https: http.get("scheme").and_then(Value::as_str) == Some("HTTPS"),
        };
    }
    if let Some(tcp) = probe.get("tcpSocket") {
        return match port(tcp.get("port"), container) {
            Some(port) => Action::Tcp {
                host: host(tcp),
                port,
            },
            None => Action::Unsupported,
        };
    }
    Action::Unsupported
}

/// A probe's port: a number, or the name of one of the container's `ports`.
fn port(port: Option<&Value>, container: &Value) -> Option<u16> {
    match port? {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(name) => match name.parse() {
            Ok(number) => Some(number),
            Err(_) => (container.get("ports").and_then(Value::as_array))?
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(name))?
                .get("containerPort")?
                .as_u64()
                .and_then(|n| u16::try_from(n).ok()),
        },
        _ => None,
    }
}

/// The results of a container's probes so far: its readiness and the run of equal results.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Results {
    ready: bool,
    last: Option<bool>,
    run: u32,
}

impl Results {
    /// Before any probe: not ready.
    pub fn new() -> Self {
        Self {
            ready: false,
            last: None,
            run: 0,
        }
    }

    /// Takes a probe's result; the container's readiness when it changed.
    pub fn observe(&mut self, success: bool, probe: &Probe) -> Option<bool> {
        if self.last == Some(success) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(success);
            self.run = 1;
        }
        let needed = match success {
            true => probe.success_threshold,
            false => probe.failure_threshold,
        };
        if self.run < needed || self.ready == success {
            return None;
        }
        self.ready = success;
        Some(success)
    }
}

/// Where a probe runs: the container's pod and name, for an `exec`.
pub(crate) struct Target<'a> {
    pub shared: &'a Arc<Shared>,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub uid: &'a str,
    pub container: &'a str,
}

/// Probes the container's readiness for as long as it is polled (the runner stops polling when
/// the container's process ends), telling `changed` each change. Never returns; without a
/// probe it waits for ever.
pub(crate) async fn probe_readiness(
    probe: Option<&Probe>,
    target: Target<'_>,
    mut changed: impl FnMut(bool),
) {
    let Some(probe) = probe else {
        return std::future::pending().await;
    };
    let started = tokio::time::Instant::now();
    let mut results = Results::new();
    let mut ticker = tokio::time::interval(probe.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if started.elapsed() < probe.initial_delay {
            continue;
        }
        let success = run(probe, &target).await;
        if let Some(ready) = results.observe(success, probe) {
            changed(ready);
        }
    }
}

/// Runs the probe once: whether it succeeded within its timeout.
async fn run(probe: &Probe, target: &Target<'_>) -> bool {
    let attempt = async {
        match &probe.action {
            Action::Exec(command) => exec(command, target).await,
            Action::Http {
                host,
                port,
                path,
                headers,
                https,
            } => !https && http_get(host, *port, path, headers).await.unwrap_or(false),
            Action::Tcp { host, port } => tokio::net::TcpStream::connect((host.as_str(), *port))
                .await
                .is_ok(),
            Action::Unsupported => false,
        }
    };
    tokio::time::timeout(probe.timeout, attempt)
        .await
        .unwrap_or(false)
}

async fn exec(command: &[String], target: &Target<'_>) -> bool {
    let request = ExecRequest {
        command: command.to_vec(),
        stdin: false,
        tty: false,
    };
    let started = Arc::clone(target.shared).exec(
        target.namespace,
        target.pod,
        target.uid,
        target.container,
        request,
    );
    let Ok(mut process) = started.await else {
        return false;
    };
    // Its output is read, and dropped, so that a command writing much does not block.
    let drain = |stream: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>| async move {
        if let Some(mut stream) = stream {
            let _ = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await;
        }
    };
    let (stdout, stderr) = (process.stdout.take(), process.stderr.take());
    let (code, _, _) = tokio::join!(process.wait(), drain(stdout), drain(stderr));
    code.is_ok_and(|code| code == 0)
}

/// One `GET` over HTTP/1.1: whether its status is 200 to 399.
async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> std::io::Result<bool> {
    let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("User-Agent") {
        request.push_str("User-Agent: kube-probe/1.34\r\n");
    }
    if !has("Accept") {
        request.push_str("Accept: */*\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.contains(&b'\n') {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok());
    Ok(status.is_some_and(|s| (200..400).contains(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_probe_s_defaults_are_the_kubelet_s_and_a_named_port_is_the_container_s() {
        let container = json!({
            "ports": [{"name": "web", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"port": "web", "path": "ready"}},
        });
        let probe = readiness_probe(&container).unwrap();
        assert_eq!(
            probe,
            Probe {
                action: Action::Http {
                    host: POD_IP.into(),
                    port: 8080,
                    path: "/ready".into(),
                    headers: Vec::new(),
                    https: false,
                },
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
        let tcp = json!({"readinessProbe": {"tcpSocket": {"port": 9}, "periodSeconds": 2}});
        let probe = readiness_probe(&tcp).unwrap();
        let want = Action::Tcp {
            host: POD_IP.into(),
            port: 9,
        };
        assert_eq!((probe.action, probe.period), (want, Duration::from_secs(2)));
        let grpc = json!({"readinessProbe": {"grpc": {"port": 9}}});
        assert_eq!(readiness_probe(&grpc).unwrap().action, Action::Unsupported);
        assert_eq!(readiness_probe(&json!({})), None);
    }

    #[test]
    fn readiness_changes_only_after_the_thresholds_run_of_equal_results() {
        let container = json!({"readinessProbe": {"exec": {"command": ["true"]},
                               "successThreshold": 2, "failureThreshold": 3}});
        let probe = readiness_probe(&container).unwrap();
        let mut results = Results::new();
        let seen: Vec<Option<bool>> = [true, false, true, true, true, false, false, true, false]
            .into_iter()
            .map(|r| results.observe(r, &probe))
            .collect();
        // Ready after two successes in a row; not ready after three failures in a row only.
        assert_eq!(
            seen,
            [None, None, None, Some(true), None, None, None, None, None]
        );
        // The failure just seen and one more are two: the third in a row makes it not ready.
        assert_eq!(results.observe(false, &probe), None);
        assert_eq!(results.observe(false, &probe), Some(false));
    }
}
