//! The HTTP API server: routes Kubernetes API requests (discovery, get, list, watch, create,
//! update, patch, delete, deletecollection, `/status`, `pods/log`) to the store, with the
//! admission checks and CRD handling the real server does on the way.
//!
//! One fallback handler parses the path ([`super::path`]) rather than a route table, because
//! Kubernetes paths nest namespaces, resources, names and subresources in ways a router's
//! patterns cannot tell apart.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::wrappers::ReceiverStream;

use super::admission;
use super::error::{ApiError, Result};
use super::patch;
use super::path::{self, ApiPath, ResourcePath};
use super::resources::{GroupResource, Registry, ResourceInfo};
use super::selector::{FieldSelector, LabelSelector};
use super::store::{DeleteOptions, Deleted, Propagation, Store, StoredObject, Target};

/// The largest request body the real API server accepts (3 MiB).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Where the server reads pod logs from (the kubelet).
pub trait PodLogs: Send + Sync {
    fn pod_logs(&self, namespace: &str, pod: &str) -> Option<String>;
}

/// Create-time defaulting that needs the object's identity (e.g. a Job's selector from its uid).
pub type CreateHook = Arc<dyn Fn(&ResourceInfo, &mut Value) -> Result<()> + Send + Sync>;

/// Everything a request handler needs; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    pub registry: Registry,
    pub logs: Option<Arc<dyn PodLogs>>,
    pub on_create: Option<CreateHook>,
}

/// The axum application serving the Kubernetes API.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Query parameters the server understands; the rest are accepted and ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    watch: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    resource_version: Option<String>,
    timeout_seconds: Option<u64>,
    allow_watch_bookmarks: Option<bool>,
    limit: Option<usize>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
    propagation_policy: Option<String>,
    field_manager: Option<String>,
    dry_run: Option<String>,
}

async fn handle(
    State(state): State<ApiState>,
    method: Method,
    uri: Uri,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match route(&state, &method, &uri, &params, &headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn route(
    state: &ApiState,
    method: &Method,
    uri: &Uri,
    params: &Params,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let path = uri.path();
    match path {
        "/healthz" | "/readyz" | "/livez" => return Ok("ok".into_response()),
        "/version" => return Ok(json_response(StatusCode::OK, &version())),
        _ => {}
    }
    let not_found = || ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: None,
    };
    let parsed = path::parse(path).ok_or_else(not_found)?;
    let discovery = |doc: Option<Value>| {
        doc.map(|d| json_response(StatusCode::OK, &d))
            .ok_or_else(not_found)
    };
    match parsed {
        ApiPath::CoreVersions => discovery(Some(state.registry.api_versions())),
        ApiPath::Groups => discovery(Some(state.registry.api_group_list())),
        ApiPath::Group(group) => discovery(state.registry.api_group(&group)),
        ApiPath::ResourceList { group, version } => {
            discovery(state.registry.api_resource_list(&group, &version))
        }
        ApiPath::Resource(rp) => {
            let info = state
                .registry
                .lookup(&rp.group, &rp.version, &rp.resource)
                .ok_or_else(not_found)?;
            if !info.namespaced && rp.namespace.is_some() {
                return Err(not_found());
            }
            let request = Request {
                state,
                info: &info,
                path: &rp,
                params,
                headers,
            };
            request.dispatch(method, body).await
        }
    }
}

/// One request on a resource.
struct Request<'a> {
    state: &'a ApiState,
    info: &'a ResourceInfo,
    path: &'a ResourcePath,
    params: &'a Params,
    headers: &'a HeaderMap,
}

impl Request<'_> {
    fn namespace(&self) -> &str {
        if self.info.namespaced {
            self.path.namespace.as_deref().unwrap_or_default()
        } else {
            ""
        }
    }

    fn target(&self) -> Result<Target> {
        match self.path.subresource.as_deref() {
            None => Ok(Target::Main),
            Some("status") => Ok(Target::Status),
            Some(other) => Err(ApiError::not_found(
                &format!("{}/{other}", self.info.resource),
                self.path.name.as_deref().unwrap_or_default(),
            )),
        }
    }

    async fn dispatch(&self, method: &Method, body: Bytes) -> Result<Response> {
        let name = self.path.name.as_deref();
        match (method.as_str(), name) {
            ("GET", None) if is_true(self.params.watch.as_deref()) => self.watch(),
            ("GET", None) => self.list(),
            ("GET", Some(name)) if self.path.subresource.as_deref() == Some("log") => {
                self.logs(name)
            }
            ("GET", Some(name)) => {
                self.target()?;
                let obj = self.state.store.get(self.info, self.namespace(), name)?;
                Ok(object_response(StatusCode::OK, &obj))
            }
            ("POST", None) => self.create(body),
            ("PUT", Some(name)) => self.update(name, body),
            ("PATCH", Some(name)) => self.patch(name, body),
            ("DELETE", Some(name)) => self.delete(name, body),
            ("DELETE", None) => self.delete_collection(body),
            _ => Err(ApiError::method_not_allowed(format!(
                "{method} is not supported here"
            ))),
        }
    }

    fn ensure_namespace_exists(&self) -> Result<()> {
        if !self.info.namespaced {
            return Ok(());
        }
        let ns_info = self
            .state
            .registry
            .get(&GroupResource::new("", "namespaces"))
            .expect("namespaces are built in");
        let namespace = self
            .state
            .store
            .get(&ns_info, "", self.namespace())
            .map_err(|_| ApiError::not_found("namespaces", self.namespace()))?;
        if namespace
            .value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Err(ApiError {
                code: 403,
                reason: "Forbidden",
                message: format!(
                    "{} is forbidden: unable to create new content in namespace {} because it is being terminated",
                    self.info.display_name(),
                    self.namespace()
                ),
                details: None,
            });
        }
        Ok(())
    }

    fn create(&self, body: Bytes) -> Result<Response> {
        let obj = parse_body(&body)?;
        self.check_body_identity(&obj, None)?;
        self.ensure_namespace_exists()?;
        admission::admit(self.info, &obj, None)?;
        if is_dry_run(self.params) {
            return Ok(json_response(StatusCode::CREATED, &obj));
        }
        let on_create = self.state.on_create.clone();
        let info = self.info.clone();
        let stored =
            self.state
                .store
                .create_with(
                    self.info,
                    self.namespace(),
                    obj,
                    move |obj| match &on_create {
                        Some(hook) => hook(&info, obj),
                        None => Ok(()),
                    },
                )?;
        let stored = self.after_write(stored)?;
        Ok(object_response(StatusCode::CREATED, &stored))
    }

    fn update(&self, name: &str, body: Bytes) -> Result<Response> {
        let target = self.target()?;
        let new = parse_body(&body)?;
        self.check_body_identity(&new, Some(name))?;
        let stored =
            self.state
                .store
                .modify(self.info, self.namespace(), name, target, |old, info| {
                    admission::admit(info, &new, Some(old))?;
                    Ok(new)
                })?;
        let stored = self.after_write(stored)?;
        Ok(object_response(StatusCode::OK, &stored))
    }

    fn patch(&self, name: &str, body: Bytes) -> Result<Response> {
        let target = self.target()?;
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let kind = patch::PatchKind::from_content_type(&content_type)
            .ok_or_else(|| ApiError::unsupported_media_type(&content_type))?;
        let patch_doc = patch::parse(kind, &body)?;
        let manager = self.params.field_manager.clone();
        if kind == patch::PatchKind::Apply && manager.is_none() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let exists = self
            .state
            .store
            .get(self.info, self.namespace(), name)
            .is_ok();
        if !exists && kind == patch::PatchKind::Apply && target == Target::Main {
            // Server-side apply creates what does not exist yet.
            let mut obj = patch_doc;
            obj["metadata"]["name"] = json!(name);
            let body = Bytes::from(serde_json::to_vec(&obj).expect("json"));
            return self.create(body);
        }
        let stored =
            self.state
                .store
                .modify(self.info, self.namespace(), name, target, |old, info| {
                    let new = patch::apply(kind, old, &patch_doc, info)?;
                    admission::admit(info, &new, Some(old))?;
                    Ok(new)
                })?;
        let stored = self.after_write(stored)?;
        Ok(object_response(StatusCode::OK, &stored))
    }

    fn delete_options(&self, body: &Bytes) -> Result<DeleteOptions> {
        let options: Value = if body.is_empty() {
            json!({})
        } else {
            parse_body(body)?
        };
        let policy = options
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| self.params.propagation_policy.clone())
            .or_else(
                || match options.get("orphanDependents").and_then(Value::as_bool) {
                    Some(true) => Some("Orphan".into()),
                    Some(false) => Some("Background".into()),
                    None => None,
                },
            );
        let propagation = match policy.as_deref() {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "unsupported propagation policy {other:?}"
                )));
            }
        };
        Ok(DeleteOptions {
            propagation,
            precondition_uid: options
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            precondition_rv: options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
        })
    }

    fn delete(&self, name: &str, body: Bytes) -> Result<Response> {
        let options = self.delete_options(&body)?;
        let outcome = self
            .state
            .store
            .delete(self.info, self.namespace(), name, &options)?;
        if self.is_crd()
            && let Deleted::Removed(obj) = &outcome
        {
            self.unregister_crd(obj);
        }
        let (Deleted::Removed(obj) | Deleted::Pending(obj)) = outcome;
        Ok(object_response(StatusCode::OK, &obj))
    }

    fn delete_collection(&self, body: Bytes) -> Result<Response> {
        let options = self.delete_options(&body)?;
        let (items, _) = self.selected()?;
        let mut deleted = Vec::new();
        for item in items {
            match self
                .state
                .store
                .delete(self.info, item.namespace(), item.name(), &options)
            {
                Ok(Deleted::Removed(obj) | Deleted::Pending(obj)) => deleted.push(obj),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let rv = self.state.store.current_rv();
        Ok(list_response(self.info, &deleted, rv, None))
    }

    /// The objects the request's namespace and selectors pick, with the list's resourceVersion.
    fn selected(&self) -> Result<(Vec<Arc<StoredObject>>, u64)> {
        let labels =
            LabelSelector::parse(self.params.label_selector.as_deref().unwrap_or_default())?;
        let fields =
            FieldSelector::parse(self.params.field_selector.as_deref().unwrap_or_default())?;
        let namespace = self
            .path
            .namespace
            .as_deref()
            .filter(|_| self.info.namespaced);
        let (items, rv) = self
            .state
            .store
            .list(&self.info.group_resource(), namespace);
        let items = items
            .into_iter()
            .filter(|o| labels.matches(o.labels()) && fields.matches(&o.value))
            .collect();
        Ok((items, rv))
    }

    fn list(&self) -> Result<Response> {
        let (items, rv) = self.selected()?;
        // `continue` is "<list rv>/<namespace>/<name>" of the last item sent.
        let (rv, start) = match &self.params.continue_token {
            Some(token) => {
                let mut parts = token.splitn(3, '/');
                let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
                let token_rv: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
                let ns = parts.next().ok_or_else(bad)?.to_string();
                let name = parts.next().ok_or_else(bad)?.to_string();
                (token_rv, Some((ns, name)))
            }
            None => (rv, None),
        };
        let items: Vec<_> = match &start {
            Some(after) => items
                .into_iter()
                .filter(|o| (o.namespace().to_string(), o.name().to_string()) > *after)
                .collect(),
            None => items,
        };
        let limit = self.params.limit.filter(|&l| l > 0);
        let (page, next) = match limit {
            Some(limit) if items.len() > limit => {
                let last = &items[limit - 1];
                (
                    items[..limit].to_vec(),
                    Some(format!("{rv}/{}/{}", last.namespace(), last.name())),
                )
            }
            _ => (items, None),
        };
        Ok(list_response(self.info, &page, rv, next))
    }

    fn watch(&self) -> Result<Response> {
        let labels =
            LabelSelector::parse(self.params.label_selector.as_deref().unwrap_or_default())?;
        let fields =
            FieldSelector::parse(self.params.field_selector.as_deref().unwrap_or_default())?;
        let since =
            match self.params.resource_version.as_deref() {
                None | Some("") => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        let gr = self.info.group_resource();
        let namespace = self.path.namespace.clone().filter(|_| self.info.namespaced);
        let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, Infallible>>(256);
        let (backlog, mut live) = match self.state.store.watch(&gr, namespace.as_deref(), since) {
            Ok(started) => started,
            Err(gone) => {
                // The real server answers 200 and then an ERROR event carrying the 410 Status.
                let line = watch_line(
                    "ERROR",
                    &Bytes::from(serde_json::to_vec(&gone.status_body()).expect("json")),
                );
                tx.try_send(Ok(line)).expect("fresh channel has room");
                return Ok(watch_response(rx));
            }
        };
        let timeout = self.params.timeout_seconds.map(Duration::from_secs);
        let bookmarks = self.params.allow_watch_bookmarks.unwrap_or(false);
        let info = self.info.clone();
        let store = self.state.store.clone();
        let matches =
            move |o: &StoredObject| labels.matches(o.labels()) && fields.matches(&o.value);
        let in_scope = move |ev: &super::store::WatchEvent| {
            ev.gr == gr
                && namespace
                    .as_deref()
                    .is_none_or(|ns| ev.object.namespace() == ns)
        };
        tokio::spawn(async move {
            let mut last_rv = since.unwrap_or(0);
            for ev in backlog {
                last_rv = last_rv.max(ev.rv);
                if matches(&ev.object)
                    && tx
                        .send(Ok(watch_line(ev.event_type.as_str(), &ev.object.json)))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
            let mut bookmark_timer = tokio::time::interval(Duration::from_secs(1));
            bookmark_timer.tick().await;
            loop {
                let until_deadline = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    received = live.recv() => match received {
                        Ok(ev) => {
                            if ev.rv <= last_rv || !in_scope(&ev) {
                                continue;
                            }
                            last_rv = ev.rv;
                            if matches(&ev.object) && tx.send(Ok(watch_line(ev.event_type.as_str(), &ev.object.json))).await.is_err() {
                                return;
                            }
                        }
                        // A watcher that falls behind is closed, as the real server closes slow
                        // watchers; the client resumes from its last resourceVersion.
                        Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                    },
                    _ = bookmark_timer.tick(), if bookmarks => {
                        let rv = store.current_rv().max(last_rv);
                        let object = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": {"resourceVersion": rv.to_string()}});
                        if tx.send(Ok(watch_line("BOOKMARK", &Bytes::from(object.to_string())))).await.is_err() {
                            return;
                        }
                    }
                    _ = until_deadline => return,
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(watch_response(rx))
    }

    fn logs(&self, name: &str) -> Result<Response> {
        if self.info.resource != "pods" || !self.info.group.is_empty() {
            return Err(ApiError::not_found(
                &format!("{}/log", self.info.resource),
                name,
            ));
        }
        let pod = self.state.store.get(self.info, self.namespace(), name)?;
        let logs = self
            .state
            .logs
            .as_ref()
            .and_then(|l| l.pod_logs(pod.namespace(), pod.name()))
            .unwrap_or_default();
        Ok(([(header::CONTENT_TYPE, "text/plain")], logs).into_response())
    }

    /// The body's apiVersion, kind, namespace and name must agree with the URL.
    fn check_body_identity(&self, obj: &Value, name: Option<&str>) -> Result<()> {
        if let Some(kind) = obj.get("kind").and_then(Value::as_str)
            && kind != self.info.kind
            && self.path.subresource.is_none()
        {
            return Err(ApiError::bad_request(format!(
                "the kind of the object ({kind}) does not match the resource ({})",
                self.info.kind
            )));
        }
        if self.info.namespaced
            && let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str)
            && !ns.is_empty()
            && ns != self.namespace()
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if let (Some(name), Some(body_name)) =
            (name, obj.pointer("/metadata/name").and_then(Value::as_str))
            && body_name != name
        {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        Ok(())
    }

    fn is_crd(&self) -> bool {
        self.info.group == "apiextensions.k8s.io"
            && self.info.resource == "customresourcedefinitions"
    }

    /// After a CRD is written, serve what it defines and report it `Established`, as the real
    /// server's CRD controllers do within moments.
    fn after_write(&self, stored: Arc<StoredObject>) -> Result<Arc<StoredObject>> {
        if !self.is_crd() {
            return Ok(stored);
        }
        if stored
            .value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Ok(stored);
        }
        let served = self.state.registry.register_crd(&stored.value).ok_or_else(|| {
            ApiError::invalid("CustomResourceDefinition", stored.name(), vec![super::error::FieldError::invalid("spec", "a CRD needs spec.group, spec.names.kind, spec.names.plural and a served version")])
        })?;
        let now = super::store::now_rfc3339();
        let condition = |type_: &str, reason: &str, message: &str| json!({"type": type_, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now});
        let status = json!({
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
            "acceptedNames": {"kind": served.kind, "listKind": format!("{}List", served.kind), "plural": served.resource, "singular": served.singular, "shortNames": served.short_names},
            "storedVersions": [served.version],
        });
        if stored.value.get("status").is_some_and(|s| {
            s.get("conditions") == status.get("conditions").map(|_| &s["conditions"])
                && s["acceptedNames"] == status["acceptedNames"]
        }) {
            return Ok(stored);
        }
        self.state
            .store
            .modify(self.info, "", stored.name(), Target::Status, |old, _| {
                let mut new = old.clone();
                new["status"] = status;
                new["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("resourceVersion");
                Ok(new)
            })
    }

    fn unregister_crd(&self, crd: &StoredObject) {
        if let Some(info) = super::resources::crd_resource_info(&crd.value) {
            self.state.registry.remove(&info.group_resource());
            self.state.store.drop_resource(&info.group_resource());
        }
    }
}

fn is_true(v: Option<&str>) -> bool {
    matches!(v, Some("true" | "1"))
}

fn is_dry_run(params: &Params) -> bool {
    params.dry_run.as_deref() == Some("All")
}

/// Parses a JSON (or YAML, which is a superset) request body.
fn parse_body(body: &Bytes) -> Result<Value> {
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml::from_slice(body))
        .map_err(|e| ApiError::bad_request(format!("the request body could not be decoded: {e}")))
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn object_response(code: StatusCode, obj: &StoredObject) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        obj.json.clone(),
    )
        .into_response()
}

/// A `...List` built from the stored bytes of each item, without re-serializing them.
fn list_response(
    info: &ResourceInfo,
    items: &[Arc<StoredObject>],
    rv: u64,
    next: Option<String>,
) -> Response {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(next) = next {
        metadata["continue"] = json!(next);
    }
    let head = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        info.kind,
        info.api_version(),
        metadata
    );
    let mut body =
        Vec::with_capacity(head.len() + items.iter().map(|o| o.json.len() + 1).sum::<usize>() + 2);
    body.extend_from_slice(head.as_bytes());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&item.json);
    }
    body.extend_from_slice(b"]}");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

fn watch_line(event_type: &str, object: &Bytes) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(event_type.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn watch_response(
    rx: tokio::sync::mpsc::Receiver<std::result::Result<Bytes, Infallible>>,
) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .expect("valid response")
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-workflow-devcluster",
        "gitCommit": "devcluster",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}
