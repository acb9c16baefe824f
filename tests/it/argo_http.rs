//! Argo's http templates end to end on the embedded control plane, written in Argo's YAML and
//! submitted as it is, against a service the test serves on 127.0.0.1: a response body passed
//! on as `{{steps.X.outputs.result}}` (a header's value from a Secret, a POST with a body, a
//! `successCondition` over the status and body), and a response that fails its condition
//! failing the step with a message naming the status code.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rstest::rstest;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{StepPhase, StepStatus};

use crate::support;

use support::{Namespace, Operator, operator, step_of};

/// What the service saw of each request: method and path, and the headers the test checks.
pub(crate) type Seen = Arc<Mutex<Vec<String>>>;

/// A service on 127.0.0.1 (the embedded control plane's pods run on this machine): `GET
/// /greeting` answers only with the token, `POST /echo` answers 201 with the body it was sent,
/// `GET /status/CODE` answers CODE, and `POST /post` answers as httpbin.org's does (a JSON
/// object holding the JSON body it was sent, `json`). Returns its base URL.
pub(crate) async fn serve(seen: Seen) -> String {
    async fn greeting(State(seen): State<Seen>, headers: HeaderMap) -> (StatusCode, String) {
        let header = |name: &str| {
            (headers.get(name))
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let line = format!(
            "GET /greeting authorization={} x-caller={}",
            header("authorization"),
            header("x-caller")
        );
        seen.lock().unwrap().push(line);
        if header("authorization") != "Bearer s3cret" {
            return (StatusCode::UNAUTHORIZED, "no token".into());
        }
        (StatusCode::OK, "hello from the service\n".into())
    }
    async fn echo(State(seen): State<Seen>, body: String) -> (StatusCode, String) {
        seen.lock().unwrap().push(format!("POST /echo {body}"));
        (StatusCode::CREATED, body)
    }
    async fn httpbin_post(State(seen): State<Seen>, headers: HeaderMap, body: String) -> String {
        let authorization = headers.get("authorization").and_then(|v| v.to_str().ok());
        seen.lock().unwrap().push(format!(
            "POST /post authorization={}",
            authorization.unwrap_or_default()
        ));
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        serde_json::json!({"data": body, "json": json}).to_string()
    }
    async fn status(Path(code): Path<u16>) -> (StatusCode, String) {
        let status = StatusCode::from_u16(code).unwrap();
        (status, format!("status {code}"))
    }
    let app = Router::new()
        .route("/greeting", get(greeting))
        .route("/echo", post(echo))
        .route("/post", post(httpbin_post))
        .route("/status/{code}", get(status))
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// Fetch with a token, post what was fetched, print what the post answered.
fn calls(base: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: calls
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: fetch
            template: get
            arguments: {{parameters: [{{name: url, value: "{base}/greeting"}}]}}
        - - name: post
            template: post
            arguments: {{parameters: [{{name: text, value: "{{{{steps.fetch.outputs.result}}}}"}}]}}
        - - name: show
            template: say
            arguments: {{parameters: [{{name: text, value: "{{{{steps.post.outputs.result}}}}"}}]}}
    - name: get
      inputs:
        parameters: [{{name: url}}]
      http:
        url: "{{{{inputs.parameters.url}}}}"
        timeoutSeconds: 10
        headers:
          - name: Authorization
            valueFrom:
              secretKeyRef: {{name: api-token, key: token}}
          - name: X-Caller
            value: workflow
    - name: post
      inputs:
        parameters: [{{name: text}}]
      http:
        url: "{base}/echo"
        method: POST
        body: "echo: {{{{inputs.parameters.text}}}}"
        successCondition: "response.statusCode == 201 && response.body contains \"hello\""
    - name: say
      inputs:
        parameters: [{{name: text}}]
      container:
        image: alpine:3.20
        command: [echo, "{{{{inputs.parameters.text}}}}"]
"#
    )
}

/// A 404 under Argo's default condition (the workflow goes on: `continueOn`), then a 200 where
/// the condition wants a 201.
fn failing(base: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: refused
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: missing
            template: get
            arguments: {{parameters: [{{name: url, value: "{base}/status/404"}}]}}
            continueOn: {{failed: true}}
        - - name: created
            template: created
    - name: get
      inputs:
        parameters: [{{name: url}}]
      http:
        url: "{{{{inputs.parameters.url}}}}"
    - name: created
      http:
        url: "{base}/status/200"
        successCondition: "response.statusCode == 201"
"#
    )
}

async fn token_secret(ns: &Namespace) {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "api-token"},
        "stringData": {"token": "Bearer s3cret"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(ns.client(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

fn step<'a>(workflow: &'a WorkFlow, name: &str) -> &'a StepStatus {
    (workflow.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("step {name} in {:?}", workflow.status))
}

#[rstest]
#[tokio::test]
async fn an_http_template_s_response_body_is_its_result_for_the_next_steps(
    #[future(awt)] operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's pods cannot reach this machine's 127.0.0.1.
    }
    let ns = &operator.ns;
    let seen = Seen::default();
    let base = serve(seen.clone()).await;
    token_secret(ns).await;
    let file = support::yaml_file(&calls(&base));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns.expect_completed("calls").await;
    assert_eq!(
        step(&workflow, "fetch")
            .outputs
            .get("result")
            .map(String::as_str),
        Some("hello from the service")
    );
    let jobs = ns.jobs_of("calls").await;
    let show = jobs.iter().find(|j| step_of(j) == Some("show")).unwrap();
    assert_eq!(
        ns.job_log(show).await.trim(),
        "echo: hello from the service"
    );
    // The token came from the Secret, in the pod: the service saw it, the workflow holds none.
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "GET /greeting authorization=Bearer s3cret x-caller=workflow",
            "POST /echo echo: hello from the service",
        ]
    );
    let stored = serde_json::to_string(&ns.get("calls").await).unwrap();
    assert!(!stored.contains("s3cret"), "{stored}");
}

#[rstest]
#[tokio::test]
async fn a_response_that_fails_its_condition_fails_the_step_naming_the_status(
    #[future(awt)] operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's pods cannot reach this machine's 127.0.0.1.
    }
    let ns = &operator.ns;
    let base = serve(Seen::default()).await;
    let file = support::yaml_file(&failing(&base));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns
        .expect_failed("refused", &["step created failed", "status 200"])
        .await;
    let missing = step(&workflow, "missing");
    assert_eq!(missing.phase, StepPhase::Failed);
    let message = missing.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("received non-2xx response code: 404"),
        "{message}"
    );
    let created = step(&workflow, "created");
    assert_eq!(created.phase, StepPhase::Failed);
    let message = created.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(r#"successCondition "response.statusCode == 201" is false"#),
        "{message}"
    );
}
