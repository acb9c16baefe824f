//! `kubectl exec`, `kubectl cp` and the official Python client's `stream()` against the pod
//! `exec` subresource: the command sees its container's environment, working directory and
//! volumes, its exit code comes back, stdin is piped in, a terminal is a real one (resized as
//! the client's), and a container that does not run is refused as the real server refuses it.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{self, Kubectl, setup, wait_phase};

/// A pod whose container sleeps, with an env var; `sandboxed`: it also has a working
/// directory and an emptyDir at `/data` (so it runs in its sandbox).
fn sleeper(name: &str, sandboxed: bool) -> String {
    let sandbox = if sandboxed {
        "    workingDir: /work\n    volumeMounts: [{name: data, mountPath: /data}]\n  volumes: [{name: data, emptyDir: {}}]\n"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  \
         containers:\n  - name: main\n    image: busybox\n    command: [sleep, '300']\n    \
         env: [{{name: GREETING, value: hello-from-{name}}}]\n{sandbox}"
    )
}

/// Creates the pod and waits until it runs.
async fn running(kubectl: &Kubectl, name: &str, sandboxed: bool) {
    let manifest = kubectl.manifest(&format!("{name}.yaml"), &sleeper(name, sandboxed));
    kubectl.ok(&["apply", "-f", &manifest]).await;
    wait_phase(kubectl, name, &["Running"]).await;
}

#[tokio::test]
async fn exec_sees_the_containers_env_working_dir_and_volumes() {
    let Some((_cluster, kubectl)) = setup("exec_env").await else {
        return;
    };
    running(&kubectl, "boxed", true).await;
    let out = kubectl
        .ok(&[
            "exec",
            "boxed",
            "--",
            "sh",
            "-c",
            "echo $GREETING; pwd; echo x > /data/f && cat /data/f",
        ])
        .await;
    assert_eq!(out, "hello-from-boxed\n/work\nx\n");

    // A container without a sandbox runs in its scratch directory, its HOME.
    running(&kubectl, "plain", false).await;
    let out = kubectl
        .ok(&[
            "exec",
            "plain",
            "--",
            "sh",
            "-c",
            "echo $GREETING; [ \"$PWD\" = \"$HOME\" ] && echo home",
        ])
        .await;
    assert_eq!(out, "hello-from-plain\nhome\n");
}

#[tokio::test]
async fn exec_reports_the_exit_code_as_kubectl_expects() {
    let Some((_cluster, kubectl)) = setup("exec_exit_code").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    let out = kubectl
        .command(&[
            "exec",
            "p",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("err\n"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
}

#[tokio::test]
async fn exec_pipes_stdin_to_the_command() {
    let Some((_cluster, kubectl)) = setup("exec_stdin").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    let mut child = kubectl
        .command(&["exec", "-i", "p", "--", "sh", "-c", "cat; echo done"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hi\nthere\n").await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("stdin's end ends cat")
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\nthere\ndone\n");
}

#[tokio::test]
async fn exec_with_a_terminal_gets_a_tty_of_the_clients_size() {
    let Some((_cluster, kubectl)) = setup("exec_tty").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    // `script` gives kubectl a terminal (33 rows, 101 columns), which it puts in raw mode and
    // whose size it sends; the shell in the pod reads our keystrokes from its own terminal.
    let command = kubectl.command(&["exec", "-it", "p", "--", "sh"]);
    let std = command.as_std();
    let line: Vec<String> = std::iter::once(std.get_program())
        .chain(std.get_args())
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect();
    let mut child = tokio::process::Command::new("script")
        .args(["-qefc"])
        .arg(format!("stty rows 33 cols 101; exec {}", line.join(" ")))
        .arg("/dev/null")
        .envs(std.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut wait_for = async |text: &str, seen: &mut String| {
        while !seen.contains(text) {
            let n = tokio::time::timeout(Duration::from_secs(20), stdout.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no {text:?} in {seen:?}"))
                .unwrap();
            assert!(n > 0, "no {text:?} in {seen:?}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    stdin
        .write_all(b"tty -s && echo is-a-$((6*7))-tty; stty size\n")
        .await
        .unwrap();
    wait_for("is-a-42-tty", &mut seen).await;
    wait_for("33 101", &mut seen).await;
    stdin.write_all(b"exit 5\n").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the shell's exit ends the session")
        .unwrap();
    assert_eq!(status.code(), Some(5), "{seen:?}");
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[tokio::test]
async fn kubectl_cp_copies_into_and_out_of_a_volume() {
    let Some((_cluster, kubectl)) = setup("exec_cp").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("in.txt");
    std::fs::write(&local, "copied in\n").unwrap();
    kubectl
        .ok(&["cp", &local.to_string_lossy(), "p:/data/in.txt"])
        .await;
    let inside = kubectl
        .ok(&["exec", "p", "--", "cat", "/data/in.txt"])
        .await;
    assert_eq!(inside, "copied in\n");

    kubectl
        .ok(&[
            "exec",
            "p",
            "--",
            "sh",
            "-c",
            "echo made inside > /data/out.txt",
        ])
        .await;
    let back = dir.path().join("out.txt");
    kubectl
        .ok(&["cp", "p:/data/out.txt", &back.to_string_lossy()])
        .await;
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "made inside\n");
}

#[tokio::test]
async fn exec_is_refused_as_the_real_server_refuses_it() {
    let Some((_cluster, kubectl)) = setup("exec_refused").await else {
        return;
    };
    let missing = kubectl.run(&["exec", "nope", "--", "true"]).await;
    assert!(!missing.success);
    assert!(
        missing.stderr.contains(r#"pods "nope" not found"#),
        "{}",
        missing.stderr
    );

    running(&kubectl, "p", false).await;
    // kubectl's SPDY, which the devcluster does not serve, is told so in words.
    let spdy = kubectl
        .command(&["exec", "p", "--", "true"])
        .env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&spdy.stderr);
    assert!(!spdy.status.success());
    assert!(stderr.contains("not SPDY"), "{stderr}");

    let bad = kubectl
        .run(&["exec", "p", "-c", "other", "--", "true"])
        .await;
    assert!(
        bad.stderr
            .contains("container other is not valid for pod p"),
        "{}",
        bad.stderr
    );

    // Its ConfigMap missing, the container waits and does not run.
    let waiting = kubectl.manifest(
        "waiting.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: waiting}\nspec:\n  containers:\n  - name: main\n    \
         image: busybox\n    command: [sleep, '300']\n    \
         env: [{name: X, valueFrom: {configMapKeyRef: {name: absent, key: k}}}]\n",
    );
    kubectl.ok(&["apply", "-f", &waiting]).await;
    let out = kubectl.run(&["exec", "waiting", "--", "true"]).await;
    assert!(!out.success);
    assert!(
        out.stderr
            .contains(r#"unable to upgrade connection: container not found ("main")"#),
        "{}",
        out.stderr
    );
}

const PYTHON_EXEC: &str = r#"
import json, sys
from kubernetes import client, config
from kubernetes.stream import stream
config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
out = stream(core.connect_get_namespaced_pod_exec, "p", "default",
             command=["sh", "-c", "echo $GREETING; pwd"],
             stderr=True, stdin=False, stdout=True, tty=False)
resp = stream(core.connect_get_namespaced_pod_exec, "p", "default",
              command=["sh", "-c", "read line; echo got-$line; echo oops >&2; exit 4"],
              stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
resp.write_stdin("typed\n")
stdout, stderr = "", ""
while resp.is_open():
    resp.update(timeout=1)
    stdout += resp.read_stdout()
    stderr += resp.read_stderr()
print(json.dumps({"out": out, "stdout": stdout, "stderr": stderr, "code": resp.returncode}))
"#;

#[tokio::test]
async fn python_client_streams_exec() {
    let Some((cluster, kubectl)) = setup("exec_python").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    let seen = support::python(&cluster, PYTHON_EXEC).await;
    assert_eq!(seen["out"], "hello-from-p\n/work\n", "{seen}");
    assert_eq!(seen["stdout"], "got-typed\n", "{seen}");
    assert_eq!(seen["stderr"], "oops\n", "{seen}");
    assert_eq!(seen["code"], 4, "{seen}");
}

/// The Python client offers `v5.channel.k8s.io,v4.channel.k8s.io`; the server takes the first it
/// supports, as kube-apiserver's handshake does, so the client can close stdin with v5's close
/// signal and `cat` ends. Other offers get their first supported protocol too.
const PYTHON_EXEC_V5: &str = r#"
import faulthandler, json, sys, time
# A stream that never ends fails the test with where it hung, instead of hanging it.
faulthandler.dump_traceback_later(40, exit=True)
from kubernetes import client, config
from kubernetes.stream import stream
from kubernetes.stream.ws_client import WSClient, get_websocket_url
config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
resp = stream(core.connect_get_namespaced_pod_exec, "p", "default", command=["cat"],
              stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
resp.write_stdin("typed\n")
resp.close_channel(0)
stdout = ""
deadline = time.monotonic() + 10
while resp.is_open() and time.monotonic() < deadline:
    resp.update(timeout=1)
    if resp.peek_stdout():
        stdout += resp.read_stdout()
ended = not resp.is_open()
code = resp.returncode if ended else None
resp.close()
configuration = client.Configuration.get_default_copy()
url = get_websocket_url(configuration.host
                        + "/api/v1/namespaces/default/pods/p/exec?command=true&stdout=true")
chosen = {}
for offer in ["v4.channel.k8s.io,channel.k8s.io", "channel.k8s.io,v5.channel.k8s.io",
              "x.k8s.io, v4.base64.channel.k8s.io, v5.channel.k8s.io"]:
    ws = WSClient(configuration, url, {"sec-websocket-protocol": offer}, capture_all=False)
    chosen[offer] = ws.subprotocol
    ws.close()
print(json.dumps({"protocol": resp.subprotocol, "stdout": stdout, "ended": ended,
                  "code": code, "chosen": chosen}))
"#;

#[tokio::test]
async fn exec_takes_the_clients_first_supported_protocol_and_v5_closes_stdin() {
    let Some((cluster, kubectl)) = setup("exec_v5").await else {
        return;
    };
    running(&kubectl, "p", true).await;
    let seen = support::python(&cluster, PYTHON_EXEC_V5).await;
    assert_eq!(seen["protocol"], "v5.channel.k8s.io", "{seen}");
    assert_eq!(seen["stdout"], "typed\n", "{seen}");
    assert_eq!(seen["ended"], true, "cat ends once stdin is closed: {seen}");
    assert_eq!(seen["code"], 0, "{seen}");
    assert_eq!(
        seen["chosen"],
        serde_json::json!({
            "v4.channel.k8s.io,channel.k8s.io": "v4.channel.k8s.io",
            "channel.k8s.io,v5.channel.k8s.io": "channel.k8s.io",
            "x.k8s.io, v4.base64.channel.k8s.io, v5.channel.k8s.io": "v4.base64.channel.k8s.io",
        }),
        "{seen}"
    );
}
