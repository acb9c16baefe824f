//! The web view (`run --web-addr`, and `dev`, where it is on by default): the workflows of the
//! namespaces the operator watches, each with its DAG drawn as SVG, a step panel (times,
//! attempts, exit code, message, outputs, logs) and its Events, updated live. Read-only: only
//! GET routes, lists and logs read through the API, never a Secret.
//!
//! - [`router`]: the routes and the response headers.
//! - [`pages`]: the HTML of each page.
//! - [`graph`]: what the DAG view draws (nodes, phases, edges; collapsed when large).
//! - [`layout`]: the layered layout of a DAG.
//! - [`svg`]: a drawing as SVG.
//! - [`live`]: server-sent events from the operator's mirror of the workflows.
//! - [`reads`]: what a page reads through the API (a step's Jobs, pods and logs; Events).
//! - [`escape`]: HTML escaping and URL encoding of user strings, once.
//! - [`assets`]: the embedded stylesheet and script.

pub mod assets;
pub mod escape;
pub mod graph;
pub mod layout;
pub mod live;
pub mod pages;
pub mod reads;
pub mod router;
pub mod schedules;
pub mod svg;

use std::net::SocketAddr;

use anyhow::{Context, Result};
use kube::Client;
use kube_kopf::Mirror;
use tokio_util::sync::CancellationToken;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::CronWorkFlow;

/// What the web view reads.
#[derive(Clone)]
pub struct WebState {
    /// The operator's own copy of the workflows (see [`kube_kopf::Mirror`]).
    pub mirror: Mirror<WorkFlow>,
    /// The operator's own copy of the CronWorkFlows.
    pub crons: Mirror<CronWorkFlow>,
    /// For what the mirror does not hold: a step's Jobs, pods and logs, and Events.
    pub client: Client,
    /// The namespace the operator watches, when it watches one: no other is shown.
    pub namespace: Option<String>,
    /// Ends the live streams, so the server can stop.
    pub shutdown: CancellationToken,
}

/// Binds `addr` (port 0 picks a free one), serves the web view on a spawned task until
/// `state.shutdown` is cancelled, and returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, state: WebState) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the web view to {addr}"))?;
    let local = listener.local_addr().context("the web view's address")?;
    let shutdown = state.shutdown.clone();
    let app = router::router(state);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "the web view stopped");
        }
    });
    Ok(local)
}
