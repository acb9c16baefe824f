//! The WorkFlowTrigger receiver (`run --triggers-addr`, and `dev`): `POST
//! /triggers/<namespace>/<name>` takes a delivery (a webhook, an S3 bucket notification) and
//! starts its run, on its own address, apart from the web view and `/metrics`.
//!
//! Each answer tells the sender what to do: 201 the run was created (its name), 200 the
//! delivery's run exists already (a repeated delivery), 202 no run (the filter, or
//! `concurrencyPolicy: Forbid`, said so), 401 a bad signature (nothing of the body echoed), 404
//! no such trigger, 413 a body over the limit, 429 over the trigger's rate limit, 503 the API
//! server did not take the run (send again: nothing was half made), 400/422 a delivery or a
//! trigger no retry can fix. A run is answered 201 only once the API server has accepted its
//! create, and its name comes from the delivery's id, so a delivery answered 201 has its run
//! and a retried one never makes a second (`workflow_operator_core::trigger`).
//!
//! - [`lookup`]: the triggers (a watch, read through on a miss), their compiled expressions
//!   and their Secrets.
//! - [`limit`]: the per-trigger rate limit.
//! - [`start`]: one event's run created under the trigger's concurrency policy.
//! - `bucket` (the `dev` feature): the embedded artifact store's bucket notifications, sent
//!   to the triggers of their bucket.

#[cfg(feature = "dev")]
pub mod bucket;
pub mod limit;
pub mod lookup;
pub mod start;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::Client;
use tokio_util::sync::CancellationToken;
use workflow_operator_core::trigger::{self, Delivery, MAX_BODY, verify::Verification};

use crate::telemetry::metrics::Metrics;
use lookup::{Found, Lookup};
use start::Answer;

/// What the receiver needs.
#[derive(Clone)]
pub struct Receiver {
    lookup: Arc<Lookup>,
    limits: Arc<limit::Limits>,
    metrics: Option<Metrics>,
    max_body: usize,
}

impl Receiver {
    /// A receiver of the triggers in `namespace` (all when `None`), reading them through
    /// `client`, counting answers into `metrics`. Its watch of the triggers stops with
    /// `shutdown`.
    pub fn new(
        client: Client,
        namespace: Option<String>,
        metrics: Option<Metrics>,
        shutdown: &CancellationToken,
    ) -> Receiver {
        Receiver {
            lookup: Arc::new(Lookup::start(client, namespace, shutdown)),
            limits: Arc::new(limit::Limits::default()),
            metrics,
            max_body: MAX_BODY,
        }
    }

    /// The routes: `POST /triggers/{namespace}/{name}`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/triggers/{namespace}/{name}", post(receive))
            .with_state(self)
    }
}

/// Binds `addr` (port 0 picks a free one), serves `receiver` until `shutdown`, and returns the
/// bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    receiver: Receiver,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the triggers receiver to {addr}"))?;
    let local = listener.local_addr().context("the receiver's address")?;
    let app = receiver.router();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "the triggers receiver stopped");
        }
    });
    Ok(local)
}

async fn receive(
    State(receiver): State<Receiver>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    let started = Instant::now();
    let answer = answer(&receiver, &namespace, &name, request).await;
    if let Some(metrics) = &receiver.metrics {
        metrics.trigger_delivery(&namespace, &name, answer.outcome, started.elapsed());
    }
    tracing::debug!(%namespace, %name, status = %answer.status, outcome = answer.outcome, "delivery");
    answer.into_response()
}

/// The answer to one delivery, in the order a sender's mistakes are cheapest to find: the
/// trigger, the size, the signature, the rate, then the events.
async fn answer(receiver: &Receiver, namespace: &str, name: &str, request: Request) -> Answer {
    let trigger = match receiver.lookup.trigger(namespace, name).await {
        Found::Yes(trigger) => trigger,
        Found::No => return Answer::not_found(namespace, name),
        Found::Unreachable(why) => return Answer::unavailable(why),
    };
    let (parts, body) = request.into_parts();
    let body = match read_body(body, receiver.max_body).await {
        Ok(body) => body,
        Err(answer) => return *answer,
    };
    let delivery = Delivery {
        headers: headers_of(&parts.headers),
        body,
    };
    let verification = Verification::of(&trigger);
    let secret = match receiver.lookup.secret(&trigger, &verification, false).await {
        Ok(secret) => secret,
        Err(answer) => return answer,
    };
    if verification.check(&secret, &delivery).is_err() {
        // The Secret may have been rotated since it was cached: one fresh read decides.
        let fresh = match receiver.lookup.secret(&trigger, &verification, true).await {
            Ok(fresh) if fresh != secret => fresh,
            Ok(_) => return Answer::unauthorized(),
            Err(answer) => return answer,
        };
        if verification.check(&fresh, &delivery).is_err() {
            return Answer::unauthorized();
        }
    }
    // After the signature: deliveries nobody signed do not use up the trigger's rate.
    if let Some(wait) = receiver.limits.take(&trigger) {
        return Answer::rate_limited(wait);
    }
    let compiled = match receiver.lookup.compiled(&trigger) {
        Ok(compiled) => compiled,
        Err(problems) => return Answer::invalid(problems.join("; ")),
    };
    let events = match trigger::events(&trigger, &delivery) {
        Ok(events) => events,
        Err(why) => return Answer::bad_request(why),
    };
    start::all(&receiver.lookup.client(), &trigger, &compiled, &events).await
}

/// The body, or 413 when it is longer than `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Vec<u8>, Box<Answer>> {
    match axum::body::to_bytes(body, max).await {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(error) => {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            match too_large {
                true => Err(Box::new(Answer::too_large(max))),
                false => Err(Box::new(Answer::bad_request(format!(
                    "reading the body: {error}"
                )))),
            }
        }
    }
}

/// Headers by lower-case name (as `http` keeps them), repeated ones joined by `, `.
fn headers_of(headers: &HeaderMap) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::<String, String>::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        out.entry(name.as_str().to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    out
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.message)).into_response();
        if let Some(wait) = self.retry_after {
            let seconds = wait.as_secs().max(1).to_string();
            if let Ok(value) = seconds.parse() {
                response.headers_mut().insert("retry-after", value);
            }
        }
        response
    }
}
