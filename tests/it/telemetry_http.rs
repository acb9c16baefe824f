//! The `/healthz`, `/readyz` and `/metrics` endpoints of `telemetry::serve`, over loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;
use workflow_operator::telemetry::http::Error as HttpError;
use workflow_operator::telemetry::{Metrics, Readiness, StepOutcome, serve};

struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

async fn get(addr: SocketAddr, path: &str) -> Result<Reply, hyper_util::client::legacy::Error> {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let uri = format!("http://{addr}{path}").parse().expect("a valid uri");
    let response = client.get(uri).await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(::http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok(Reply {
        status,
        content_type,
        body: String::from_utf8(body.to_vec()).unwrap(),
    })
}

async fn start(metrics: Metrics, readiness: Readiness) -> (SocketAddr, CancellationToken) {
    let shutdown = CancellationToken::new();
    let addr = serve(
        "127.0.0.1:0".parse().unwrap(),
        metrics,
        readiness,
        shutdown.clone(),
    )
    .await
    .unwrap();
    (addr, shutdown)
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().unwrap())
    })
}

#[tokio::test]
async fn serve_binds_a_free_port_when_asked_for_port_zero() {
    let (addr, _shutdown) = start(Metrics::new(), Readiness::new()).await;
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);
}

#[tokio::test]
async fn healthz_is_ok_while_readyz_follows_readiness() {
    let readiness = Readiness::new();
    let (addr, _shutdown) = start(Metrics::new(), readiness.clone()).await;

    let health = get(addr, "/healthz").await.unwrap();
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    assert_eq!(get(addr, "/readyz").await.unwrap().status, 503);

    readiness.set_ready(true);
    let ready = get(addr, "/readyz").await.unwrap();
    assert_eq!((ready.status, ready.body.as_str()), (200, "ok\n"));

    readiness.set_ready(false);
    assert_eq!(get(addr, "/readyz").await.unwrap().status, 503);
    assert_eq!(get(addr, "/healthz").await.unwrap().status, 200);
}

#[tokio::test]
async fn readyz_needs_the_flag_and_every_check_evaluated_at_each_probe() {
    let readiness = Readiness::new();
    let (addr, _shutdown) = start(Metrics::new(), readiness.clone()).await;
    let synced = Arc::new(AtomicBool::new(false));
    let seen = synced.clone();
    readiness.add_check(move || seen.load(Ordering::Acquire));

    readiness.set_ready(true);
    assert_eq!(
        get(addr, "/readyz").await.unwrap().status,
        503,
        "check fails"
    );
    synced.store(true, Ordering::Release);
    assert_eq!(get(addr, "/readyz").await.unwrap().status, 200, "all pass");
    readiness.add_check(|| false);
    assert_eq!(
        get(addr, "/readyz").await.unwrap().status,
        503,
        "a new check fails"
    );
    assert!(!readiness.is_ready());
}

#[tokio::test]
async fn metrics_are_openmetrics_and_move_between_scrapes() {
    let metrics = Metrics::new();
    let (addr, _shutdown) = start(metrics.clone(), Readiness::new()).await;

    metrics.step_started();
    let first = get(addr, "/metrics").await.unwrap();
    assert_eq!(first.status, 200);
    assert!(
        first
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        first.content_type
    );
    assert!(first.body.ends_with("# EOF\n"), "{}", first.body);
    assert_eq!(
        sample(&first.body, "workflow_operator_steps_started_total"),
        Some(1.0)
    );

    metrics.step_started();
    metrics.step_finished(StepOutcome::Failed, Duration::from_secs(2));
    let second = get(addr, "/metrics").await.unwrap();
    assert_eq!(
        sample(&second.body, "workflow_operator_steps_started_total"),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &second.body,
            r#"workflow_operator_steps_finished_total{outcome="failed"}"#
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn unknown_paths_are_not_found() {
    let (addr, _shutdown) = start(Metrics::new(), Readiness::new()).await;
    assert_eq!(get(addr, "/nope").await.unwrap().status, 404);
}

#[tokio::test]
async fn server_stops_accepting_connections_after_shutdown() {
    let (addr, shutdown) = start(Metrics::new(), Readiness::new()).await;
    assert_eq!(get(addr, "/healthz").await.unwrap().status, 200);

    shutdown.cancel();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still accepting connections 5 s after shutdown"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn serve_fails_with_listen_error_on_a_taken_port() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap();
    let error = serve(
        addr,
        Metrics::new(),
        Readiness::new(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, HttpError::Listen { .. }), "{error:?}");
    assert!(error.to_string().starts_with("cannot listen on"), "{error}");
}
