//! The HTTP API server: routes Kubernetes API requests (discovery, aggregated discovery, OpenAPI
//! v3, get, list, watch, create, update, patch, delete, deletecollection, `/status`, `pods/log`)
//! to the store, and `pods/exec` WebSocket upgrades to [`crate::apiserver::exec`], with what the real server does on the way: CRD schema pruning, defaulting and
//! validation, metadata validation, size limits, `Table` output for kubectl, warnings, fault
//! injection and request counting; with RBAC on, authentication, impersonation and authorization
//! before any of it (`authenticate_and_authorize`).
//!
//! One fallback handler parses the path ([`crate::apiserver::path`]) rather than a route table,
//! because Kubernetes paths nest namespaces, resources, names and subresources in ways a router's
//! patterns cannot tell apart.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use kube_schema_check::schema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::api::error::{ApiError, FieldError, Result};
use crate::api::resources::{GroupResource, Registry, ResourceInfo};
use crate::apiserver::admission;
use crate::apiserver::authn::{self, User};
use crate::apiserver::eviction;
use crate::apiserver::exec;
use crate::apiserver::faults::{Faults, Verb};
use crate::apiserver::impersonation;
use crate::apiserver::list_options::{self, ListOptions};
use crate::apiserver::managed_fields;
use crate::apiserver::merge_keys::Shape;
use crate::apiserver::metrics::RequestCounters;
use crate::apiserver::openapi;
use crate::apiserver::openapi_v2;
use crate::apiserver::patch;
use crate::apiserver::path::{self, ApiPath, ResourcePath};
use crate::apiserver::protobuf;
use crate::apiserver::rbac;
use crate::apiserver::representation::{self, Representation};
use crate::apiserver::request_info;
use crate::apiserver::typed_decode;
use crate::apiserver::watch::{self, WatchHub, WatchRequest};
use crate::kubelet::exec::PodExec;
use crate::kubelet::pod_logs::PodLogs;
use crate::kubelet::tokens::ServiceAccountTokens;
use crate::registry::CreateHook;
use crate::registry::services;
use crate::storage::selector::{FieldSelector, LabelSelector};
use crate::storage::store::{
    self, DeleteOptions, Deleted, Propagation, Store, StoredObject, Target,
};

/// The largest request body the real API server accepts (3 MiB).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The largest object etcd stores (its default `--max-request-bytes`, 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// How often a watch that asked for bookmarks gets one, unless configured otherwise.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// Everything a request handler needs; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    pub registry: Registry,
    pub logs: Option<Arc<dyn PodLogs>>,
    /// Runs `pods/exec` commands (the kubelet); without it no container runs.
    pub exec: Option<Arc<dyn PodExec>>,
    pub on_create: Option<CreateHook>,
    pub service_allocator: Arc<services::Allocator>,
    pub faults: Arc<Faults>,
    pub requests: Arc<RequestCounters>,
    pub watches: Arc<WatchHub>,
    pub bookmark_interval: Duration,
    /// The tokens the kubelet gave pods, when requests are authenticated (`apiserver::authn`)
    /// and authorized by RBAC (`apiserver::rbac`); `None` (the default): every request is the
    /// admin's.
    pub service_account_tokens: Option<Arc<ServiceAccountTokens>>,
}

impl ApiState {
    /// State for a server on `store` and `registry`; its watch fan-out runs until `shutdown`.
    pub fn new(store: Store, registry: Registry, shutdown: CancellationToken) -> Self {
        let watches = WatchHub::start(&store, shutdown);
        Self {
            store,
            registry,
            logs: None,
            exec: None,
            on_create: None,
            service_allocator: Arc::default(),
            faults: Arc::default(),
            requests: Arc::default(),
            watches,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            service_account_tokens: None,
        }
    }
}

/// The axum application serving the Kubernetes API.
pub fn router(state: ApiState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// Query parameters the server understands; the rest are accepted and ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    watch: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    resource_version: Option<String>,
    resource_version_match: Option<String>,
    timeout_seconds: Option<u64>,
    allow_watch_bookmarks: Option<String>,
    send_initial_events: Option<String>,
    /// An int64 as on the real server: zero or less is no limit.
    limit: Option<i64>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
    propagation_policy: Option<String>,
    field_manager: Option<String>,
    field_validation: Option<String>,
    force: Option<String>,
    /// Every `dryRun` value (a list in `CreateOptions` and the rest), not only the first.
    #[serde(skip)]
    dry_run: Vec<String>,
    include_object: Option<String>,
    grace_period_seconds: Option<i64>,
    // Pod log options (`GET .../pods/NAME/log`, see `pod_logs`).
    follow: Option<String>,
    tail_lines: Option<i64>,
    timestamps: Option<String>,
    since_seconds: Option<i64>,
    since_time: Option<String>,
    limit_bytes: Option<i64>,
    container: Option<String>,
    previous: Option<String>,
    // Exec options (`.../pods/NAME/exec`, see `exec`); `command` repeats, one per argument.
    stdin: Option<String>,
    stdout: Option<String>,
    stderr: Option<String>,
    tty: Option<String>,
    #[serde(skip)]
    command: Vec<String>,
}

/// The query as the API server reads it: of a repeated parameter the options take the first value
/// (k8s.io/apimachinery/pkg/runtime/conversion.go, `Convert_Slice_string_To_string` and the
/// others take `(*in)[0]`), but `dryRun`, a list, takes them all.
fn parse_params(uri: &Uri) -> Result<Params> {
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))?;
    crate::apiserver::query::check_integers(&pairs)?;
    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<&(String, String)> = pairs
        .iter()
        .filter(|(key, _)| seen.insert(key.as_str()))
        .collect();
    // Rewritten only when a key repeats (rarely): every request passes here.
    let firsts = if firsts.len() < pairs.len() {
        let mut query = form_urlencoded::Serializer::new(String::from("/?"));
        query.extend_pairs(firsts);
        query
            .finish()
            .parse()
            .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))?
    } else {
        uri.clone()
    };
    let mut params: Params = Query::<Params>::try_from_uri(&firsts)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))?;
    let all = |name: &str| -> Vec<String> {
        (pairs.iter())
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .collect()
    };
    params.dry_run = all("dryRun");
    params.command = all("command");
    Ok(params)
}

async fn handle(
    State(state): State<ApiState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    body: Body,
) -> Response {
    let response = match authenticate_and_authorize(&state, &method, &uri, &headers) {
        Ok(user) => {
            let request = (&method, &uri, &headers, upgrade.ok());
            match route(&state, request, &user, body).await {
                Ok(response) => response,
                Err(error) => error.into_response(),
            }
        }
        Err(error) => error.into_response(),
    };
    if let Some(counted) = response.extensions().get::<Counted>() {
        let user_agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("unknown");
        state.requests.record(
            counted.verb,
            counted.resource.clone(),
            user_agent,
            response.status().as_u16(),
        );
    }
    response
}

/// The request's user ([`authn`], or whom it impersonates: [`impersonation`]), once RBAC
/// allows it what it asks ([`rbac`]); with authentication off, the admin.
///
/// # Errors
/// 401 for a token no pod holds, 403 for what the user's roles do not allow.
fn authenticate_and_authorize(
    state: &ApiState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<User> {
    let Some(tokens) = state.service_account_tokens.as_deref() else {
        return Ok(User::admin());
    };
    let user = authn::authenticate(headers, Some(tokens), &state.store, &state.registry)?;
    let user = impersonation::acting_user(headers, user, &state.store, &state.registry)?;
    if user.is_privileged() {
        return Ok(user);
    }
    let query =
        Query::<Vec<(String, String)>>::try_from_uri(uri).map_or_else(|_| Vec::new(), |q| q.0);
    let info = request_info::of(method.as_str(), uri.path(), &query);
    match rbac::authorize(&state.store, &state.registry, &user, &info) {
        Ok(_) => Ok(user),
        Err(reason) => Err(rbac::forbidden(&user, &info, &reason)),
    }
}

/// Marks a response to a resource request for the request counters.
#[derive(Clone)]
struct Counted {
    verb: Verb,
    resource: String,
}

/// The content type of aggregated discovery, which kubectl asks for first.
const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// A request as the router reads it: its method, URI, headers and WebSocket upgrade, if any.
type Incoming<'a> = (&'a Method, &'a Uri, &'a HeaderMap, Option<WebSocketUpgrade>);

async fn route(
    state: &ApiState,
    (method, uri, headers, upgrade): Incoming<'_>,
    user: &User,
    body: Body,
) -> Result<Response> {
    let path = uri.path();
    if let Some(response) = fixed_route(state, path, headers) {
        return Ok(response);
    }
    let not_found = ApiError::no_route;
    if let Some(gv) = path.strip_prefix("/openapi/v3/") {
        let doc = match gv.split('/').collect::<Vec<_>>().as_slice() {
            ["api", version] => openapi::document(&state.registry, "", version),
            ["apis", group, version] => openapi::document(&state.registry, group, version),
            _ => None,
        };
        return doc
            .map(|d| json_response(StatusCode::OK, &d))
            .ok_or_else(not_found);
    }
    let params = parse_params(uri)?;
    let parsed = path::parse(path).ok_or_else(not_found)?;
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let discovery = |doc: Option<Value>| {
        doc.map(|d| json_response(StatusCode::OK, &d))
            .ok_or_else(not_found)
    };
    let aggregated =
        accept.contains("as=APIGroupDiscoveryList") && accept.contains("apidiscovery.k8s.io");
    match parsed {
        ApiPath::CoreVersions | ApiPath::Groups if aggregated => Ok(aggregated_discovery(
            state,
            matches!(parsed, ApiPath::CoreVersions),
            accept,
        )),
        ApiPath::CoreVersions => discovery(Some(state.registry.api_versions())),
        ApiPath::Groups => discovery(Some(state.registry.api_group_list())),
        ApiPath::Group(group) => discovery(state.registry.api_group(&group)),
        ApiPath::ResourceList { group, version } => {
            discovery(state.registry.api_resource_list(&group, &version))
        }
        ApiPath::Resource(rp) => {
            let call = (method, &rp, &params, headers, accept);
            serve_resource(state, call, user, upgrade, body).await
        }
    }
}

/// The answer of a path that names no resource (health, version, OpenAPI index, request
/// counts), if `path` is one.
fn fixed_route(state: &ApiState, path: &str, headers: &HeaderMap) -> Option<Response> {
    Some(match path {
        "/healthz" | "/readyz" | "/livez" => "ok".into_response(),
        // go-restful's `/version` WebService serves its route `/` too: the Python client asks
        // for `/version/` (k8s.io/apiserver pkg/server/routes/version.go).
        "/version" | "/version/" => json_response(StatusCode::OK, &version()),
        "/debug/requests" => json_response(StatusCode::OK, &state.requests.snapshot().to_json()),
        "/openapi/v3" => json_response(StatusCode::OK, &openapi::index(&state.registry)),
        "/openapi/v2" => openapi_v2::response(&state.registry, headers),
        _ => return None,
    })
}

/// Aggregated discovery of the core group (`core`) or of the named groups, in the version the
/// client `accept`s.
fn aggregated_discovery(state: &ApiState, core: bool, accept: &str) -> Response {
    // v2 unless the client asks only for the older v2beta1 (same shape, other name).
    let (api_version, content_type) = if accept.contains("v=v2;") || !accept.contains("v=v2beta1") {
        ("apidiscovery.k8s.io/v2", AGGREGATED_DISCOVERY.to_string())
    } else {
        (
            "apidiscovery.k8s.io/v2beta1",
            AGGREGATED_DISCOVERY.replace("v=v2;", "v=v2beta1;"),
        )
    };
    let doc = state.registry.aggregated_discovery(core, api_version);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type)],
        doc.to_string(),
    )
        .into_response()
}

/// A request on a resource (`method` on `rp`, with its query `params`), through fault
/// injection, with the warnings it raised as `Warning` headers and its counts for
/// `/debug/requests`.
async fn serve_resource(
    state: &ApiState,
    (method, rp, params, headers, accept): (&Method, &ResourcePath, &Params, &HeaderMap, &str),
    user: &User,
    upgrade: Option<WebSocketUpgrade>,
    body: Body,
) -> Result<Response> {
    let not_found = ApiError::no_route;
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
        path: rp,
        params,
        headers,
        user,
        representation: Representation::from_accept(accept, params.include_object.as_deref()),
        warnings: Mutex::new(Vec::new()),
    };
    let verb = request.verb(method);
    let mut resource = info.display_name();
    if let Some(sub) = &rp.subresource {
        resource = format!("{resource}/{sub}");
    }
    let counted = Counted { verb, resource };
    let outcome = async {
        state
            .faults
            .before_request(
                verb,
                &info.display_name(),
                rp.name.as_deref().unwrap_or_default(),
            )
            .await?;
        if request.is_exec() {
            return request.exec(method, upgrade).await;
        }
        let body = read_body(body).await?;
        request.dispatch(method, body).await
    }
    .await;
    let mut response = outcome.unwrap_or_else(IntoResponse::into_response);
    for warning in request.warnings.lock().expect("warnings").drain(..) {
        let value = format!("299 - {}", serde_json::to_string(&warning).expect("json"));
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response.extensions_mut().insert(counted);
    Ok(response)
}

/// Reads a request body up to the real server's limit; a larger one is 413, as there.
async fn read_body(body: Body) -> Result<Bytes> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::too_large(format!(
                "Request entity too large: limit is {MAX_BODY_BYTES}"
            ))
        })
}

/// One request on a resource.
struct Request<'a> {
    state: &'a ApiState,
    info: &'a ResourceInfo,
    path: &'a ResourcePath,
    params: &'a Params,
    headers: &'a HeaderMap,
    /// Who makes it.
    user: &'a User,
    /// How the response renders objects (`Accept`: as stored, their metadata, or a Table).
    representation: Representation,
    /// `Warning` headers for the response (unknown fields under `fieldValidation=Warn`).
    warnings: Mutex<Vec<String>>,
}

/// How unknown fields in a write are handled (`?fieldValidation=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl Request<'_> {
    fn namespace(&self) -> &str {
        if self.info.namespaced {
            self.path.namespace.as_deref().unwrap_or_default()
        } else {
            ""
        }
    }

    fn verb(&self, method: &Method) -> Verb {
        match (method.as_str(), self.path.name.is_some()) {
            ("GET", false) if is_true(self.params.watch.as_deref()) => Verb::Watch,
            ("GET", false) => Verb::List,
            ("GET", true) => Verb::Get,
            ("POST", _) => Verb::Create,
            ("PUT", _) => Verb::Update,
            ("PATCH", _) => Verb::Patch,
            ("DELETE", true) => Verb::Delete,
            ("DELETE", false) => Verb::DeleteCollection,
            _ => Verb::Get,
        }
    }

    fn target(&self) -> Result<Target> {
        match self.path.subresource.as_deref() {
            None => Ok(Target::Main),
            Some("status") => Ok(Target::Status),
            // attach, portforward, binding, token, scale: not served here (exec and eviction
            // are served before this), and a path nothing serves is go-restful's 404, not a missing
            // object.
            Some(_) => Err(ApiError::no_route()),
        }
    }

    fn field_validation(&self) -> Result<FieldValidation> {
        match self.params.field_validation.as_deref() {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, not {other:?}"
            ))),
        }
    }

    async fn dispatch(&self, method: &Method, body: Bytes) -> Result<Response> {
        if crate::api::resources::is_review(self.info) {
            let reviewer = crate::apiserver::auth_reviews::Reviewer {
                user: self.user,
                rbac: (self.state.service_account_tokens.is_some())
                    .then_some((&self.state.store, &self.state.registry)),
            };
            let review = crate::apiserver::auth_reviews::answer(
                self.info,
                method.as_str(),
                &body,
                &reviewer,
            )?;
            return Ok(json_response(StatusCode::CREATED, &review));
        }
        let name = self.path.name.as_deref();
        match (method.as_str(), name) {
            ("GET", None) => {
                let watch = is_true(self.params.watch.as_deref());
                let p = self.params;
                ListOptions {
                    watch,
                    resource_version: p.resource_version.as_deref(),
                    resource_version_match: p.resource_version_match.as_deref(),
                    continue_token: p.continue_token.as_deref(),
                    send_initial_events: p.send_initial_events.as_deref(),
                }
                .validate()?;
                if watch {
                    return self.watch();
                }
                let wanted = watch::parse_resource_version(p.resource_version.as_deref())?;
                if let Some(wanted) = wanted.filter(|rv| *rv > 0) {
                    list_options::wait_until_fresh(&self.state.store, wanted).await?;
                }
                self.list()
            }
            ("POST", Some(name)) if self.is_eviction() => self.evict(name, body),
            (_, Some(_)) if self.is_eviction() => Err(ApiError::method_not_served()),
            ("GET", Some(name)) if self.path.subresource.as_deref() == Some("log") => {
                self.logs(name)
            }
            ("GET", Some(name)) => {
                self.target()?;
                let obj = self.state.store.get(self.info, self.namespace(), name)?;
                Ok(self.object_response(StatusCode::OK, &obj))
            }
            ("POST", None) => self.create(body),
            ("PUT", Some(name)) => self.update(name, body),
            ("PATCH", Some(name)) => self.patch(name, body),
            ("DELETE", Some(name)) => self.delete(name, body),
            ("DELETE", None) if self.info.strategy.delete_collection => {
                self.delete_collection(body)
            }
            (_, Some(_)) if self.path.subresource.is_some() => {
                self.target()?;
                Err(ApiError::method_not_served())
            }
            _ => Err(ApiError::method_not_served()),
        }
    }

    /// An object as the client asked for it: as stored, its metadata, or a one-row Table.
    fn object_response(&self, code: StatusCode, obj: &Arc<StoredObject>) -> Response {
        match representation::render_one(self.representation, self.info, obj, true) {
            None => object_response(code, obj),
            Some(rendered) => encoded_response(code, &rendered),
        }
    }

    /// The namespace of a create of `name` exists and is not being deleted.
    fn ensure_namespace_exists(&self, name: &str) -> Result<()> {
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
            // NamespaceLifecycle admission: admission.NewForbidden names the object (when the
            // create names it), and the cause tells clients why (v1.NamespaceTerminatingCause).
            let namespace = self.namespace();
            let resource = self.info.display_name();
            let subject = if name.is_empty() {
                resource
            } else {
                format!("{resource} {name:?}")
            };
            let mut details = object_details(self.info, name);
            details["causes"] = json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {namespace} is being terminated"),
                "field": "metadata.namespace",
            }]);
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{subject} is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
                ),
            )
            .with_details(details));
        }
        Ok(())
    }

    /// What the real server does to a write before storing it: the CRD schema prunes unknown
    /// fields (refused under `fieldValidation=Strict`, warned about under `Warn`) and fills in
    /// defaults; then metadata, built-in rules and the schema validate the result, all problems
    /// in one 422; and the object must fit in etcd. `new` is the object as it will be stored
    /// (for `/status` writes: the stored object with the new status).
    fn prepare(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        size_hint: usize,
        write: typed_decode::Write<'_>,
    ) -> Result<()> {
        let mut errors: Vec<FieldError> = Vec::new();
        if self.info.schema.is_none() {
            // Built-in kinds: what decoding into their Go types does (typed_decode).
            let directive = match self.field_validation()? {
                FieldValidation::Ignore => typed_decode::Directive::Ignore,
                FieldValidation::Warn => typed_decode::Directive::Warn,
                FieldValidation::Strict => typed_decode::Directive::Strict,
            };
            let warnings = typed_decode::admit(self.info, new, directive, write)?;
            self.warnings.lock().expect("warnings").extend(warnings);
        }
        // After decoding, as the kind's v1 conversion and defaulting follow it (a Secret's
        // stringData folded, a Pod's, Job's or Deployment's defaults).
        (self.info.strategy.decode)(new);
        if let Some(old) = old {
            (self.info.strategy.prepare_for_update)(new, old);
        }
        if let Some(schema) = &self.info.schema {
            let normalized = schema::normalize(schema, new);
            if !normalized.unknown_fields.is_empty() {
                match self.field_validation()? {
                    FieldValidation::Strict => {
                        let fields: Vec<String> = normalized
                            .unknown_fields
                            .iter()
                            .map(|f| format!("unknown field {f:?}"))
                            .collect();
                        return Err(ApiError::bad_request(format!(
                            "strict decoding error: {}",
                            fields.join(", ")
                        )));
                    }
                    FieldValidation::Warn => {
                        let mut warnings = self.warnings.lock().expect("warnings");
                        warnings.extend(
                            normalized
                                .unknown_fields
                                .iter()
                                .map(|f| format!("unknown field {f:?}")),
                        );
                    }
                    FieldValidation::Ignore => {}
                }
            }
            errors.extend(admission::check(self.info, new, old));
            errors.extend(schema::validate(schema, new));
            schema::validate_rules(schema, new, old, &mut errors);
        } else {
            errors.extend(admission::check(self.info, new, old));
        }
        if !errors.is_empty() {
            let name = new
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(ApiError::invalid(&self.info.qualified_kind(), name, errors));
        }
        // Measuring means serializing: only when the object could be near the limit.
        if size_hint > MAX_OBJECT_BYTES / 2
            && serde_json::to_vec(new).map_or(0, |v| v.len()) > MAX_OBJECT_BYTES
        {
            return Err(ApiError::internal("etcdserver: request is too large"));
        }
        Ok(())
    }

    /// A create or update body by its `Content-Type`: JSON or YAML, or protobuf for built-in
    /// kinds (`protobuf`), else 415.
    fn request_body(&self, body: &Bytes) -> Result<Value> {
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        match protobuf::body_format(content_type, self.info)? {
            protobuf::BodyFormat::Text => parse_body(body),
            protobuf::BodyFormat::Protobuf => protobuf::decode(body, self.info),
        }
    }

    fn create(&self, body: Bytes) -> Result<Response> {
        let obj = self.request_body(&body)?;
        self.create_object(obj, body.len(), false)
    }

    /// The field manager of this request: `fieldManager`, else the client's User-Agent.
    fn manager(&self) -> String {
        self.params.field_manager.clone().unwrap_or_else(|| {
            managed_fields::manager_from_user_agent(
                self.headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
            )
        })
    }

    /// Creates `obj`; `applied` when server-side apply made it (its managed fields are set).
    fn create_object(&self, mut obj: Value, size_hint: usize, applied: bool) -> Result<Response> {
        self.check_body_identity(&obj, None)?;
        self.ensure_namespace_exists(
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )?;
        if self.info.status_subresource
            && let Some(map) = obj.as_object_mut()
        {
            // With a status subresource, create ignores status (the store drops it too); it
            // must not be validated either.
            map.remove("status");
        }
        let dry_run = self.dry_run("CreateOptions", &[])?;
        self.prepare(&mut obj, None, size_hint, typed_decode::Write::Body)?;
        crate::registry::pods::admit_pod(
            &self.state.store,
            &self.state.registry,
            self.info,
            self.namespace(),
            &mut obj,
        )?;
        if !applied {
            let manager = self.manager();
            let api_version = self.info.api_version();
            let who = managed_fields::Writer {
                manager: &manager,
                api_version: &api_version,
                subresource: None,
            };
            let now = store::now_rfc3339();
            managed_fields::record_update(None, &mut obj, Shape::root(self.info), &who, &now);
        }
        // As the service storage allocates, after the field manager: no manager owns what it
        // gives. Held until the service is stored, so that no other create takes it.
        let _allocating =
            self.state
                .service_allocator
                .allocate(&self.state.store, self.info, &mut obj)?;
        let on_create = self.state.on_create.clone();
        let info = self.info.clone();
        let stored = crate::apiserver::dry_run::store(&self.state.store, dry_run).create_with(
            self.info,
            self.namespace(),
            obj,
            move |obj| match &on_create {
                Some(hook) => hook(&info, obj),
                None => Ok(()),
            },
        )?;
        let stored = self.after_write_unless(dry_run, stored)?;
        Ok(self.object_response(StatusCode::CREATED, &stored))
    }

    fn update(&self, name: &str, body: Bytes) -> Result<Response> {
        let target = self.target()?;
        let new = self.request_body(&body)?;
        self.check_body_identity(&new, Some(name))?;
        let dry_run = self.dry_run("UpdateOptions", &[])?;
        let custom = self.custom_resource().is_some();
        if crate::apiserver::custom_resources::requires_resource_version(self.info, custom) {
            crate::apiserver::custom_resources::check_update(self.info, name, &new)?;
        }
        let old_size = self
            .state
            .store
            .get(self.info, self.namespace(), name)
            .map_or(0, |o| o.json.len());
        let manager = self.manager();
        let api_version = self.info.api_version();
        let who = self.writer(&manager, &api_version, target);
        let stored = crate::apiserver::dry_run::store(&self.state.store, dry_run).modify(
            self.info,
            self.namespace(),
            name,
            target,
            |old, info| {
                let mut new = new.clone();
                store::merge_for_target(info, old, &mut new, target);
                self.prepare(
                    &mut new,
                    Some(old),
                    old_size + body.len(),
                    typed_decode::Write::Body,
                )?;
                let now = store::now_rfc3339();
                managed_fields::record_update(Some(old), &mut new, Shape::root(info), &who, &now);
                Ok(new)
            },
        )?;
        let stored = self.after_write_unless(dry_run, stored)?;
        Ok(self.object_response(StatusCode::OK, &stored))
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
        let dry_run = self.dry_run("PatchOptions", &[])?;
        let mut patch_doc = patch::parse(kind, &body)?;
        if kind == patch::PatchKind::Apply && self.params.field_manager.is_none() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let existing = self.state.store.get(self.info, self.namespace(), name);
        let old_size = existing.as_ref().map_or(0, |o| o.json.len());
        let manager = self.manager();
        let api_version = self.info.api_version();
        let who = self.writer(&manager, &api_version, target);
        let force = is_true(self.params.force.as_deref());
        let apply = kind == patch::PatchKind::Apply;
        if apply {
            managed_fields::reset_fields(
                &mut patch_doc,
                self.info.status_subresource,
                target == Target::Status,
            )?;
            managed_fields::check_applied_kind(&patch_doc, &api_version, &self.info.kind)?;
        }
        if existing.is_err() && apply && target == Target::Main {
            // Server-side apply creates what does not exist yet.
            self.authorize_create_on_update(name)?;
            let mut config = patch_doc;
            config["metadata"]["name"] = json!(name);
            let now = store::now_rfc3339();
            let obj = managed_fields::apply(
                &json!({}),
                &config,
                Shape::root(self.info),
                &who,
                force,
                &now,
            )?;
            return self.create_object(obj, body.len(), true);
        }
        let stored = crate::apiserver::dry_run::store(&self.state.store, dry_run).modify(
            self.info,
            self.namespace(),
            name,
            target,
            |old, info| {
                let now = store::now_rfc3339();
                let mut new = if apply {
                    managed_fields::apply(old, &patch_doc, Shape::root(info), &who, force, &now)?
                } else {
                    patch::apply(kind, old, &patch_doc, info)?
                };
                store::merge_for_target(info, old, &mut new, target);
                // The patch as the real server shows it in a decoding error: Go's print of the
                // decoded map for a strategic merge patch, JSON otherwise.
                let render = || match kind {
                    patch::PatchKind::StrategicMerge => typed_decode::go_print(&patch_doc),
                    _ => patch_doc.to_string(),
                };
                self.prepare(
                    &mut new,
                    Some(old),
                    old_size + body.len(),
                    typed_decode::Write::Patch(&render),
                )?;
                if !apply {
                    managed_fields::record_update(
                        Some(old),
                        &mut new,
                        Shape::root(info),
                        &who,
                        &now,
                    );
                }
                Ok(new)
            },
        )?;
        let stored = self.after_write_unless(dry_run, stored)?;
        Ok(self.object_response(StatusCode::OK, &stored))
    }

    /// A write that creates (a server-side apply of an object not there) needs `create` too, as
    /// k8s.io/apiserver pkg/endpoints/handlers/update.go `withAuthorization` checks it with the
    /// create's attributes; refused with `NewForbidden` and the authorizer's reason alone.
    fn authorize_create_on_update(&self, name: &str) -> Result<()> {
        if self.state.service_account_tokens.is_none() || self.user.is_privileged() {
            return Ok(());
        }
        let create = request_info::RequestInfo {
            is_resource_request: true,
            verb: "create".to_string(),
            api_group: self.info.group.clone(),
            api_version: self.info.version.clone(),
            namespace: self.namespace().to_string(),
            resource: self.info.resource.clone(),
            name: name.to_string(),
            ..request_info::RequestInfo::default()
        };
        match rbac::authorize(&self.state.store, &self.state.registry, self.user, &create) {
            Ok(_) => Ok(()),
            Err(reason) => Err(rbac::new_forbidden(&create, &reason)),
        }
    }

    fn writer<'a>(
        &self,
        manager: &'a str,
        api_version: &'a str,
        target: Target,
    ) -> managed_fields::Writer<'a> {
        managed_fields::Writer {
            manager,
            api_version,
            subresource: (target == Target::Status).then_some("status"),
        }
    }

    fn delete_options(&self, body: &Bytes) -> Result<DeleteOptions> {
        let options: Value = if body.is_empty() {
            json!({})
        } else {
            parse_body(body)?
        };
        self.delete_options_of(&options)
    }

    /// The store's [`DeleteOptions`] of a `DeleteOptions` object, the query filling what it
    /// leaves out.
    fn delete_options_of(&self, options: &Value) -> Result<DeleteOptions> {
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
            grace_period_seconds: options
                .get("gracePeriodSeconds")
                .and_then(Value::as_i64)
                .or(self.params.grace_period_seconds),
        })
    }

    fn delete(&self, name: &str, body: Bytes) -> Result<Response> {
        let options = self.delete_options(&body)?;
        let dry_run = self.delete_dry_run(&body)?;
        crate::apiserver::namespace_lifecycle::check_delete(self.info, name)?;
        let outcome = crate::apiserver::dry_run::store(&self.state.store, dry_run).delete(
            self.info,
            self.namespace(),
            name,
            &options,
        )?;
        if self.is_crd()
            && !dry_run
            && let Deleted::Removed(obj) = &outcome
        {
            self.unregister_crd(obj);
        }
        if crate::registry::events::is_event(self.info) && !dry_run {
            crate::registry::events::mirror_delete(
                &self.state.store,
                &self.state.registry,
                self.info,
                self.namespace(),
                name,
            );
        }
        match outcome {
            Deleted::Removed(obj) if !self.info.strategy.delete_returns_object => Ok(
                encoded_response(StatusCode::OK, &deleted_status(self.info, &obj)),
            ),
            Deleted::Removed(obj) | Deleted::Pending(obj) => {
                Ok(self.object_response(StatusCode::OK, &obj))
            }
        }
    }

    fn delete_collection(&self, body: Bytes) -> Result<Response> {
        let options = self.delete_options(&body)?;
        let dry_run = self.delete_dry_run(&body)?;
        let store = crate::apiserver::dry_run::store(&self.state.store, dry_run);
        let (items, _) = self.selected()?;
        let mut deleted = Vec::new();
        for item in items {
            crate::apiserver::namespace_lifecycle::check_delete(self.info, item.name())?;
            match store.delete(self.info, item.namespace(), item.name(), &options) {
                Ok(outcome) => {
                    if self.is_crd()
                        && !dry_run
                        && let Deleted::Removed(obj) = &outcome
                    {
                        self.unregister_crd(obj);
                    }
                    let (Deleted::Removed(obj) | Deleted::Pending(obj)) = outcome;
                    deleted.push(obj);
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let rv = self.state.store.current_rv();
        Ok(list_response(
            self.info,
            &deleted,
            &json!({"resourceVersion": rv.to_string()}),
        ))
    }

    fn selectors(&self) -> Result<(LabelSelector, FieldSelector)> {
        let fields =
            FieldSelector::parse(self.params.field_selector.as_deref().unwrap_or_default())?;
        let crd = self.custom_resource();
        let crd = crd.as_ref().map(|c| &c.value);
        let fields = fields.transform(|label| {
            use crate::apiserver::field_labels::{absent, convert};
            Ok((
                convert(self.info, crd, label)?,
                absent(self.info, crd, label),
            ))
        })?;
        Ok((
            LabelSelector::parse(self.params.label_selector.as_deref().unwrap_or_default())?,
            fields,
        ))
    }

    /// The CRD serving this request's resource, `None` for a built-in.
    fn custom_resource(&self) -> Option<Arc<StoredObject>> {
        crate::apiserver::custom_resources::crd_of(
            &self.state.store,
            &self.state.registry,
            self.info,
        )
    }

    /// Whether this write is a dry run (`?dryRun=All`); `body_values` are the `dryRun` of a
    /// `DeleteOptions` body. An unknown value is a 422 on `options_kind`.
    fn dry_run(&self, options_kind: &str, body_values: &[&str]) -> Result<bool> {
        let mut values: Vec<&str> = self.params.dry_run.iter().map(String::as_str).collect();
        values.extend_from_slice(body_values);
        crate::apiserver::dry_run::requested(options_kind, &values)
    }

    /// [`Request::dry_run`] of a delete: the query's `dryRun` and its `DeleteOptions` body's.
    fn delete_dry_run(&self, body: &Bytes) -> Result<bool> {
        let options = if body.is_empty() {
            json!({})
        } else {
            parse_body(body)?
        };
        self.dry_run(
            "DeleteOptions",
            &crate::apiserver::dry_run::in_delete_options(&options),
        )
    }

    /// [`Request::after_write`], which a dry run skips: it stored nothing to follow up on.
    fn after_write_unless(
        &self,
        dry_run: bool,
        stored: Arc<StoredObject>,
    ) -> Result<Arc<StoredObject>> {
        if dry_run {
            Ok(stored)
        } else {
            self.after_write(stored)
        }
    }

    /// The objects the request's namespace and selectors pick, with the list's resourceVersion.
    fn selected(&self) -> Result<(Vec<Arc<StoredObject>>, u64)> {
        let (labels, fields) = self.selectors()?;
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
        // `continue` is "<list rv>/<namespace>/<name>" of the last item sent. The rest of the
        // list is read now, not at that resourceVersion: objects changed meanwhile show their
        // new state, as on the real server when the continue token's revision is compacted.
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
        let limit = self
            .params
            .limit
            .filter(|&l| l > 0)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        let page = match limit {
            Some(limit) if items.len() > limit => {
                let last = &items[limit - 1];
                metadata["continue"] = json!(format!("{rv}/{}/{}", last.namespace(), last.name()));
                // How many items the next pages hold, known only without selectors (etcd3
                // store GetList sets it when `opts.Predicate.Empty()`).
                let unselected = |s: &Option<String>| s.as_deref().is_none_or(str::is_empty);
                if unselected(&self.params.label_selector)
                    && unselected(&self.params.field_selector)
                {
                    metadata["remainingItemCount"] = json!(items.len() - limit);
                }
                items[..limit].to_vec()
            }
            _ => items,
        };
        match representation::render_list(self.representation, self.info, &page, metadata.clone()) {
            None => Ok(list_response(self.info, &page, &metadata)),
            Some(rendered) => Ok(encoded_response(StatusCode::OK, &rendered)),
        }
    }

    fn watch(&self) -> Result<Response> {
        let (labels, fields) = self.selectors()?;
        let since = watch::parse_resource_version(self.params.resource_version.as_deref())?;
        let mut timeout = self.params.timeout_seconds.map(Duration::from_secs);
        if let Some(lifetime) = self.state.faults.watch_lifetime() {
            timeout = Some(timeout.map_or(lifetime, |t| t.min(lifetime)));
        }
        let info = self
            .state
            .registry
            .get(&self.info.group_resource())
            .unwrap_or_else(|| Arc::new(self.info.clone()));
        let request = WatchRequest {
            info,
            namespace: self.path.namespace.clone().filter(|_| self.info.namespaced),
            labels,
            fields,
            since,
            send_initial_events: is_true(self.params.send_initial_events.as_deref()),
            timeout,
            bookmarks: is_true(self.params.allow_watch_bookmarks.as_deref()),
            bookmark_interval: self.state.bookmark_interval,
            representation: self.representation,
        };
        let rx = watch::serve(&self.state.store, &self.state.watches, request)?;
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(ReceiverStream::new(rx)))
            .expect("valid response"))
    }

    fn is_eviction(&self) -> bool {
        self.info.strategy.eviction_subresource
            && self.path.subresource.as_deref() == Some("eviction")
    }

    /// `POST .../pods/NAME/eviction` ([`crate::apiserver::eviction`]).
    fn evict(&self, name: &str, body: Bytes) -> Result<Response> {
        let eviction = parse_body(&body)?;
        eviction::check(&eviction, self.namespace(), name)?;
        let options = eviction.get("deleteOptions").cloned().unwrap_or(json!({}));
        let dry_run = self.dry_run(
            "CreateOptions",
            &crate::apiserver::dry_run::in_delete_options(&options),
        )?;
        let delete = self.delete_options_of(&options)?;
        let store = crate::apiserver::dry_run::store(&self.state.store, dry_run);
        let status = eviction::evict(
            &store,
            self.info,
            (self.namespace(), name),
            &delete,
            dry_run,
        )?;
        Ok(json_response(StatusCode::CREATED, &status))
    }

    fn is_exec(&self) -> bool {
        self.info.strategy.exec_subresource && self.path.subresource.as_deref() == Some("exec")
    }

    /// `GET` or `POST .../pods/NAME/exec` ([`crate::apiserver::exec`]).
    async fn exec(&self, method: &Method, upgrade: Option<WebSocketUpgrade>) -> Result<Response> {
        let Some(name) = self.path.name.as_deref() else {
            return Err(ApiError::no_route());
        };
        if method != Method::GET && method != Method::POST {
            return Err(ApiError::method_not_served());
        }
        let p = self.params;
        let target = exec::Target {
            store: &self.state.store,
            pods: self.info,
            namespace: self.namespace(),
            name,
        };
        let query = exec::ExecQuery {
            command: p.command.clone(),
            container: p.container.as_deref(),
            stdin: p.stdin.as_deref(),
            stdout: p.stdout.as_deref(),
            stderr: p.stderr.as_deref(),
            tty: p.tty.as_deref(),
        };
        let runner = self.state.exec.clone();
        exec::serve(target, query, runner, self.headers, upgrade).await
    }

    fn logs(&self, name: &str) -> Result<Response> {
        if !self.info.strategy.log_subresource {
            return Err(ApiError::not_found(
                &format!("{}/log", self.info.resource),
                name,
            ));
        }
        let pod = self.state.store.get(self.info, self.namespace(), name)?;
        let p = self.params;
        let options = crate::kubelet::pod_logs::LogOptions::parse(
            p.follow.as_deref(),
            p.tail_lines,
            p.timestamps.as_deref(),
            p.since_seconds,
            p.since_time.as_deref(),
            p.limit_bytes,
            p.previous.as_deref(),
        )?;
        let container = crate::kubelet::pod_logs::container_of(&pod.value, p.container.as_deref())?;
        if !crate::kubelet::pod_logs::is_run(&pod.value, &container) {
            return Err(crate::kubelet::pod_logs::not_available(&container, name));
        }
        let stream = self
            .state
            .logs
            .as_ref()
            .and_then(|l| l.pod_log(pod.namespace(), pod.name(), &container, &options));
        if stream.is_none() && options.previous {
            return Err(crate::kubelet::pod_logs::no_previous(&container, name));
        }
        let body = match stream {
            // Streamed: with `follow` it lasts as long as the container runs.
            Some(stream) => Body::from_stream(futures::StreamExt::map(
                stream,
                Ok::<_, std::convert::Infallible>,
            )),
            None => Body::empty(),
        };
        Ok(([(header::CONTENT_TYPE, "text/plain")], body).into_response())
    }

    /// The refusal of a body naming another type than the resource's: as a custom resource's
    /// or a built-in kind's decoder refuses it.
    fn foreign_type(&self, obj: &Value) -> Option<ApiError> {
        if self.info.schema.is_some() {
            return crate::apiserver::custom_resources::foreign_type(self.info, obj);
        }
        let kind = obj.get("kind").and_then(Value::as_str)?;
        if kind == self.info.kind {
            return None;
        }
        Some(
            typed_decode::foreign_kind(self.info, obj).unwrap_or_else(|| {
                ApiError::bad_request(format!(
                    "the kind of the object ({kind}) does not match the resource ({})",
                    self.info.kind
                ))
            }),
        )
    }

    /// The body's apiVersion, kind, namespace and name must agree with the URL.
    fn check_body_identity(&self, obj: &Value, name: Option<&str>) -> Result<()> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        if self.path.subresource.is_none()
            && let Some(refusal) = self.foreign_type(obj)
        {
            return Err(refusal);
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
        if crate::registry::events::is_event(self.info) {
            crate::registry::events::mirror_write(
                &self.state.store,
                &self.state.registry,
                self.info,
                &stored,
            )?;
            return Ok(stored);
        }
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
            ApiError::invalid("CustomResourceDefinition.apiextensions.k8s.io", stored.name(), vec![FieldError::invalid("spec", "a CRD needs spec.group, spec.names.kind, spec.names.plural and a served version")])
        })?;
        let now = store::now_rfc3339();
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
                new["status"] = status.clone();
                new["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("resourceVersion");
                Ok(new)
            })
    }

    fn unregister_crd(&self, crd: &StoredObject) {
        if let Some(info) = crate::api::resources::crd_resource_info(&crd.value) {
            self.state.registry.remove(&info.group_resource());
            self.state.store.drop_resource(&info.group_resource());
        }
    }
}

fn is_true(v: Option<&str>) -> bool {
    crate::apiserver::query::flag(v)
}

/// Parses a JSON (or YAML, which is a superset) request body.
fn parse_body(body: &Bytes) -> Result<Value> {
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml::from_slice(body))
        .map_err(|e| ApiError::bad_request(format!("the request body could not be decoded: {e}")))
}

/// What a delete that removed an object answers for kinds whose storage does not return the
/// object (registry/store.go `finalizeDelete`): a `Success` Status naming it, its `kind` the
/// resource ("Yes we set Kind field to resource").
fn deleted_status(info: &ResourceInfo, obj: &StoredObject) -> Value {
    let mut details = object_details(info, obj.name());
    details["uid"] = json!(obj.uid());
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// A Status's `details` naming an object: `name`, `kind` (the resource, as the registry names
/// it) and `group` unless it is the core group (`metav1.StatusDetails`, group omitted when
/// empty).
fn object_details(info: &ResourceInfo, name: &str) -> Value {
    let mut details = json!({"name": name, "kind": info.resource});
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    details
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// A response object as the API server's serializer writes it: `json.Encoder.Encode`, which
/// ends it with a newline (k8s.io/apimachinery pkg/runtime/serializer/json/json.go `Encode`).
fn encoded_response(code: StatusCode, value: &Value) -> Response {
    let mut body = serde_json::to_vec(value).expect("json values serialize");
    body.push(b'\n');
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A stored object as the response body: its bytes (in its kind's key order) and the
/// encoder's newline.
fn object_response(code: StatusCode, obj: &StoredObject) -> Response {
    let mut body = Vec::with_capacity(obj.json.len() + 1);
    body.extend_from_slice(&obj.json);
    body.push(b'\n');
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A `...List` built from the stored bytes of each item, without re-serializing them, in the
/// order of the kind's keys: a built-in list's Go struct (`kind`, `apiVersion`, `metadata`,
/// `items`), a custom resource's `UnstructuredList` sorted; with the encoder's newline.
fn list_response(info: &ResourceInfo, items: &[Arc<StoredObject>], metadata: &Value) -> Response {
    use crate::api::go_json::{self, KeyOrder};
    let kind = format!("\"{}List\"", info.kind);
    let api_version = format!("\"{}\"", info.api_version());
    let order = info.key_order();
    let metadata = match metadata.as_object() {
        Some(meta) if order == KeyOrder::Struct => go_json::list_meta(meta),
        _ => serde_json::to_vec(metadata).expect("json values serialize"),
    };
    let metadata = String::from_utf8(metadata).expect("json is utf-8");
    let (head, tail) = match order {
        KeyOrder::Struct => (
            format!(
                "{{\"kind\":{kind},\"apiVersion\":{api_version},\"metadata\":{metadata},\"items\":["
            ),
            "]}\n".to_string(),
        ),
        KeyOrder::Sorted => (
            format!("{{\"apiVersion\":{api_version},\"items\":["),
            format!("],\"kind\":{kind},\"metadata\":{metadata}}}\n"),
        ),
    };
    let size = head.len() + items.iter().map(|o| o.json.len() + 1).sum::<usize>() + tail.len();
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&item.json);
    }
    body.extend_from_slice(tail.as_bytes());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": crate::api::GIT_VERSION,
        "gitCommit": "devcluster",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}
