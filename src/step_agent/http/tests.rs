//! The agent's request against a service on 127.0.0.1 in the test.

use super::*;

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::{any, get};
use workflow_operator_core::http_call::HeaderTask;

/// `ANY /echo` answers 200 with the method, the headers `x-*` and the body it was sent;
/// `/status/CODE` answers CODE; `/never` never answers.
async fn serve() -> String {
    async fn echo(method: Method, headers: HeaderMap, body: String) -> String {
        let mut seen: Vec<String> = (headers.iter())
            .filter(|(name, _)| name.as_str().starts_with("x-"))
            .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
            .collect();
        seen.sort();
        format!("{method} {} {body}", seen.join(","))
    }
    async fn status(axum::extract::Path(code): axum::extract::Path<u16>) -> (StatusCode, String) {
        (
            StatusCode::from_u16(code).unwrap(),
            format!("status {code}"),
        )
    }
    let app = Router::new()
        .route("/echo", any(echo))
        .route("/status/{code}", get(status))
        .route("/never", get(std::future::pending::<String>));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

fn task(url: String) -> HttpTask {
    HttpTask {
        url,
        method: "GET".into(),
        timeout_seconds: 10,
        ..HttpTask::default()
    }
}

fn kept(stdout: Option<Stdout>) -> String {
    String::from_utf8(stdout.expect("the body is kept").kept).unwrap()
}

#[tokio::test]
async fn the_request_carries_its_method_headers_and_body_and_the_body_is_the_result() {
    let base = serve().await;
    // A header from a Secret is read from the pod's environment: cargo sets this variable.
    let package = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let request = HttpTask {
        method: "POST".into(),
        body: Some("hello".into()),
        headers: vec![
            HeaderTask {
                name: "X-Kind".into(),
                value: Some("test".into()),
                env: None,
            },
            HeaderTask {
                name: "X-Secret".into(),
                value: None,
                env: Some("CARGO_PKG_NAME".into()),
            },
        ],
        success_condition: Some(r#"response.body.startsWith("POST")"#.into()),
        ..task(format!("{base}/echo"))
    };
    let body = kept(call(&request, true).await.unwrap());
    assert_eq!(body, format!("POST x-kind=test,x-secret={package} hello"));
    // Nobody reads the result: nothing is kept.
    assert!(call(&request, false).await.unwrap().is_none());
}

#[tokio::test]
async fn a_response_that_fails_its_condition_fails_naming_the_status() {
    let base = serve().await;
    let error = call(&task(format!("{base}/status/500")), false).await.err();
    assert_eq!(
        error.as_deref(),
        Some("received non-2xx response code: 500")
    );
    let wants_201 = HttpTask {
        success_condition: Some("response.statusCode == 201".into()),
        ..task(format!("{base}/status/200"))
    };
    assert_eq!(
        call(&wants_201, true).await.err().as_deref(),
        Some(r#"successCondition "response.statusCode == 201" is false (status 200)"#)
    );
    let accepts_404 = HttpTask {
        success_condition: Some("response.statusCode == 404".into()),
        ..task(format!("{base}/status/404"))
    };
    assert_eq!(kept(call(&accepts_404, true).await.unwrap()), "status 404");
}

#[tokio::test]
async fn a_request_without_an_answer_fails_saying_why() {
    let base = serve().await;
    let slow = HttpTask {
        timeout_seconds: 1,
        ..task(format!("{base}/never"))
    };
    let error = call(&slow, false).await.err().unwrap();
    assert_eq!(
        error,
        format!("GET {base}/never: no response within 1 s (http.timeoutSeconds)")
    );
    // A port nothing listens on: the listener is dropped before the request.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let error = call(&task(format!("http://{address}/x")), false)
        .await
        .err()
        .unwrap();
    assert!(
        error.starts_with(&format!("GET http://{address}/x: ")),
        "{error}"
    );
    let missing = HttpTask {
        headers: vec![HeaderTask {
            name: "Authorization".into(),
            value: None,
            env: Some("WORKFLOW_HTTP_TEST_NOT_SET".into()),
        }],
        ..task(format!("{base}/echo"))
    };
    assert_eq!(
        call(&missing, false).await.err().as_deref(),
        Some(
            "header Authorization: its Secret's value is not in $WORKFLOW_HTTP_TEST_NOT_SET (the pod's environment)"
        )
    );
    let filled_badly = task("not a url".into());
    assert_eq!(
        call(&filled_badly, false).await.err().as_deref(),
        Some(r#"http.url: "not a url" is not an http:// or https:// URL"#)
    );
}
