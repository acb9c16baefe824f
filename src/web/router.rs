//! The routes of the web view, all GET (any other method on them is 405 Method Not Allowed, as
//! axum answers for a route without that method), each page with headers that allow nothing
//! but the embedded assets (Content-Security-Policy) and no framing.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use serde::Deserialize;

use super::WebState;
use super::assets;
use super::escape::query_value;
use super::graph;
use super::live::{self, Scope};
use super::pages::{self, WorkflowExtras, workflow_path};
use super::reads;
use super::schedules;
use super::svg;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::plan;

/// Only what the binary serves: its own stylesheet and script, and connections back to it
/// (the events stream, the script's re-reads). Inline scripts, handlers and styles are refused
/// by the browser, so even markup that slipped past escaping could not run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(all_workflows))
        .route("/live", get(live_all))
        .route(
            "/namespaces/{namespace}/workflows",
            get(namespace_workflows),
        )
        .route("/namespaces/{namespace}/live", get(live_namespace))
        .route("/namespaces/{namespace}/workflows/{name}", get(workflow))
        .route(
            "/namespaces/{namespace}/workflows/{name}/dag.svg",
            get(workflow_svg),
        )
        .route(
            "/namespaces/{namespace}/workflows/{name}/live",
            get(live_workflow),
        )
        .route("/assets/{file}", get(asset))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A 404 saying what was not found (plain text, never rendered as HTML).
struct NotFound(String);

impl IntoResponse for NotFound {
    fn into_response(self) -> Response {
        (StatusCode::NOT_FOUND, self.0).into_response()
    }
}

/// 404 unless the operator watches `namespace`.
fn watched(state: &WebState, namespace: &str) -> Result<(), NotFound> {
    match &state.namespace {
        Some(only) if only != namespace => Err(NotFound(format!(
            "namespace {namespace} is not watched by this operator (it watches {only})"
        ))),
        _ => Ok(()),
    }
}

/// The workflow as its page shows it: its templates expanded into the steps that run.
fn find(state: &WebState, namespace: &str, name: &str) -> Result<Arc<WorkFlow>, NotFound> {
    watched(state, namespace)?;
    let workflow = state
        .mirror
        .get(&ObjectRef::new(name).within(namespace))
        .ok_or_else(|| NotFound(format!("no workflow {namespace}/{name}")))?;
    Ok(match plan::prepare(&workflow).0 {
        Some(expanded) => Arc::new(expanded),
        None => workflow,
    })
}

async fn all_workflows(State(state): State<WebState>) -> Response {
    let workflows = state.mirror.state();
    let body = pages::workflow_list(None, &workflows, Timestamp::now())
        + &schedules::schedule_list(&state.crons.state(), &workflows);
    Html(pages::document("Workflows", &[], "/live", &body)).into_response()
}

async fn namespace_workflows(
    State(state): State<WebState>,
    Path(namespace): Path<String>,
) -> Response {
    if let Err(refused) = watched(&state, &namespace) {
        return refused.into_response();
    }
    let workflows: Vec<_> = state
        .mirror
        .state()
        .into_iter()
        .filter(|wf| wf.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .collect();
    let crons: Vec<_> = state
        .crons
        .state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .collect();
    let body = pages::workflow_list(Some(&namespace), &workflows, Timestamp::now())
        + &schedules::schedule_list(&crons, &workflows);
    let here = format!("/namespaces/{}/workflows", query_value(&namespace));
    let live = format!("/namespaces/{}/live", query_value(&namespace));
    Html(pages::document(
        &format!("Workflows in {namespace}"),
        &[(here, namespace.clone())],
        &live,
        &body,
    ))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct WorkflowQuery {
    /// The step whose panel is open.
    step: Option<String>,
}

async fn workflow(
    State(state): State<WebState>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<WorkflowQuery>,
) -> Response {
    let wf = match find(&state, &namespace, &name) {
        Ok(wf) => wf,
        Err(refused) => return refused.into_response(),
    };
    let step = match query.step {
        Some(step) => {
            let detail = reads::step_detail(&state.client, &wf, &step)
                .await
                .map_err(|error| format!("{error:#}"));
            Some((step, detail))
        }
        None => None,
    };
    let events = reads::events(&state.client, &wf)
        .await
        .map_err(|error| format!("{error:#}"));
    let body = pages::workflow_page(&wf, &WorkflowExtras { step, events }, Timestamp::now());
    let path = workflow_path(&namespace, &name);
    let crumbs = [
        (
            format!("/namespaces/{}/workflows", query_value(&namespace)),
            namespace.clone(),
        ),
        (path.clone(), name.clone()),
    ];
    Html(pages::document(
        &pages::workflow_title(&wf),
        &crumbs,
        &format!("{path}/live"),
        &body,
    ))
    .into_response()
}

/// The DAG alone, as an SVG document.
async fn workflow_svg(
    State(state): State<WebState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let wf = match find(&state, &namespace, &name) {
        Ok(wf) => wf,
        Err(refused) => return refused.into_response(),
    };
    match graph::drawing(&wf) {
        Ok(drawing) => (
            [(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")],
            svg::render(&drawing),
        )
            .into_response(),
        Err(problem) => (StatusCode::UNPROCESSABLE_ENTITY, problem).into_response(),
    }
}

async fn live_all(State(state): State<WebState>) -> Response {
    live::changes(&state.mirror, Scope::default(), state.shutdown.clone()).into_response()
}

async fn live_namespace(State(state): State<WebState>, Path(namespace): Path<String>) -> Response {
    if let Err(refused) = watched(&state, &namespace) {
        return refused.into_response();
    }
    let scope = Scope {
        namespace: Some(namespace),
        name: None,
    };
    live::changes(&state.mirror, scope, state.shutdown.clone()).into_response()
}

async fn live_workflow(
    State(state): State<WebState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    if let Err(refused) = watched(&state, &namespace) {
        return refused.into_response();
    }
    let scope = Scope {
        namespace: Some(namespace),
        name: Some(name),
    };
    live::changes(&state.mirror, scope, state.shutdown.clone()).into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    match assets::asset(&file) {
        Some((content_type, body)) => {
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        None => NotFound("no such asset".into()).into_response(),
    }
}
