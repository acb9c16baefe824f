//! The pod `exec` subresource (`GET`/`POST .../pods/NAME/exec?command=...&stdin=&stdout=&
//! stderr=&tty=&container=`): the request checked as the API server and the kubelet check it,
//! upgraded to a WebSocket in one of the remote command protocols ([`protocol`]), and the
//! command run in the container by the kubelet ([`crate::kubelet::exec`]) for the
//! [`session`]. Called by [`crate::apiserver::server`] for an exec path.
//!
//! What is answered before any upgrade, in the order the real servers check it: a pod that does
//! not exist (404), a container the pod does not have or a pod of several without one named
//! (400, pkg/registry/core/pod/strategy.go, `validateContainer`), no stream asked for (400,
//! pkg/kubelet/cri/streaming/remotecommand/httpstream.go, `NewOptions`, which also drops
//! stderr under a terminal), a container that does not run now (the kubelet's `container not
//! found ("NAME")`, pkg/kubelet/kubelet_pods.go `GetExec`, written with status 500 by
//! pkg/kubelet/cri/streaming/errors.go `WriteError`, which kubectl prints as `unable to upgrade
//! connection: ...`), and a request that is no WebSocket upgrade.
//!
//! SPDY (`Upgrade: SPDY/3.1`, kubectl's fallback when WebSockets fail, or its only way with
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`) is not served: such a request is answered 400
//! with a sentence saying so, which kubectl prints after `unable to upgrade connection:`. Since
//! kubectl falls back to SPDY only when the WebSocket upgrade was refused, a refusal above
//! reaches the user with its own words either way.

pub mod protocol;
mod session;

use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;
use crate::kubelet::exec::{ExecRequest, PodExec};
use crate::kubelet::pod_logs::{container_of, parse_bool};
use crate::storage::store::Store;
use session::Session;

/// The exec options of the query (`PodExecOptions`), as given.
#[derive(Debug, Default)]
pub struct ExecQuery<'a> {
    pub command: Vec<String>,
    pub container: Option<&'a str>,
    pub stdin: Option<&'a str>,
    pub stdout: Option<&'a str>,
    pub stderr: Option<&'a str>,
    pub tty: Option<&'a str>,
}

/// The streams a client asked for, decoded.
struct Streams {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

impl ExecQuery<'_> {
    fn streams(&self) -> Result<Streams> {
        let tty = parse_bool("tty", self.tty)?;
        let streams = Streams {
            stdin: parse_bool("stdin", self.stdin)?,
            stdout: parse_bool("stdout", self.stdout)?,
            // A terminal has no stderr of its own (httpstream.go, `NewOptions`).
            stderr: parse_bool("stderr", self.stderr)? && !tty,
            tty,
        };
        if !(streams.stdin || streams.stdout || streams.stderr) {
            return Err(ApiError::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        Ok(streams)
    }
}

/// Where the command runs.
pub struct Target<'a> {
    pub store: &'a Store,
    pub pods: &'a ResourceInfo,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Serves an exec request: the checks, then the upgrade with the session behind it.
pub async fn serve(
    target: Target<'_>,
    query: ExecQuery<'_>,
    exec: Option<Arc<dyn PodExec>>,
    headers: &HeaderMap,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response> {
    let pod = target
        .store
        .get(target.pods, target.namespace, target.name)?;
    let container = container_of(&pod.value, query.container)?;
    let streams = query.streams()?;
    let running = exec.filter(|e| e.is_running(pod.namespace(), pod.name(), pod.uid(), &container));
    let Some(exec) = running else {
        let message = format!("container not found ({container:?})");
        return Ok((StatusCode::INTERNAL_SERVER_ERROR, message).into_response());
    };
    let Some(mut upgrade) = upgrade else {
        return Err(not_upgraded(headers));
    };
    // The offer in the client's order, from the headers: axum's `requested_protocols` yields it
    // sorted, and the handshake takes the first protocol the client names that it supports.
    let requested = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let protocol = protocol::negotiate(requested).map_err(ApiError::bad_request)?;
    if !protocol.name.is_empty() {
        upgrade.set_selected_protocol(HeaderValue::from_static(protocol.name));
    }
    let request = ExecRequest {
        command: query.command.clone(),
        stdin: streams.stdin,
        tty: streams.tty,
    };
    let start = exec.exec(pod.namespace(), pod.name(), pod.uid(), &container, request);
    let session = Session {
        protocol,
        command: query.command,
        stdout: streams.stdout,
        stderr: streams.stderr,
    };
    Ok(upgrade.on_upgrade(move |socket| session.run(socket, start)))
}

/// The answer to an exec request that is not a WebSocket upgrade.
fn not_upgraded(headers: &HeaderMap) -> ApiError {
    let asked = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if asked.to_ascii_uppercase().starts_with("SPDY/") {
        return ApiError::bad_request(
            "the devcluster serves exec over WebSockets (v5.channel.k8s.io, v4.channel.k8s.io), \
             not SPDY: use kubectl 1.30 or later without KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false",
        );
    }
    // k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go: a streaming subresource proxied
    // without an upgrade.
    ApiError::bad_request("Upgrade request required")
}
