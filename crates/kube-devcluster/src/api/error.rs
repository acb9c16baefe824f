//! API errors as the real API server reports them: an HTTP status plus a `Status` body
//! (`kind: Status`, `reason`, `message`, `details`), which kube-rs, kubectl and the Python client
//! all parse, written as Go's encoder writes it: the fields in the order of `metav1.Status`, empty
//! ones left out, and a newline at the end (some clients compare an error's text byte for byte).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use kube_schema_check::FieldError;

/// One failed API request. `reason` is the machine-readable `StatusReason` (`NotFound`,
/// `AlreadyExists`, `Conflict`, `Invalid`, `Gone`, ...).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// `resource` is qualified as `GroupResource.String()` writes it: `pods`, `jobs.batch`.
    /// (apimachinery pkg/api/errors/errors.go `NewNotFound`, as the next two.)
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(object_details(resource, name))
    }

    /// See [`ApiError::not_found`] (`NewAlreadyExists`).
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(object_details(resource, name))
    }

    /// See [`ApiError::not_found`] (`NewConflict`).
    pub fn conflict(resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(object_details(resource, name))
    }

    /// 422 with one cause per invalid field, as `field.ErrorList` renders it. `qualified_kind` is
    /// `Kind` for the core group and `Kind.group` otherwise (`Job.batch`), as in the real message.
    pub fn invalid(qualified_kind: &str, name: &str, causes: Vec<FieldError>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let summary = match summary.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let message = format!("{qualified_kind} \"{name}\" is invalid: {summary}");
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        let mut details = object_details(qualified_kind, name);
        details["causes"] = json!(causes);
        Self::new(422, "Invalid", message).with_details(details)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// A path no route serves: go-restful's 404, with empty details (the handlers'
    /// `NotFound` answer names an object instead).
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// A served path asked with a method it does not take: go-restful's 405.
    pub fn method_not_served() -> Self {
        Self::method_not_allowed("the server does not allow this method on the requested resource")
            .with_details(json!({}))
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` object that goes in the response body (and in watch `ERROR` events).
    pub fn status_body(&self) -> Value {
        serde_json::to_value(self.go_status()).expect("a Status serializes")
    }

    fn go_status(&self) -> GoStatus<'_> {
        GoStatus {
            kind: "Status",
            api_version: "v1",
            metadata: Map::new(),
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details: self.details.as_ref().map(GoDetails::of),
            code: self.code,
        }
    }

    /// The response body as the real server writes it: `json.Encoder.Encode`, which ends it
    /// with a newline (k8s.io/apimachinery pkg/runtime/serializer/json/json.go `Encode`).
    fn response_body(&self) -> Vec<u8> {
        let mut body = serde_json::to_vec(&self.go_status()).expect("a Status serializes");
        body.push(b'\n');
        body
    }
}

/// The `details` naming an object of a qualified resource (`jobs.batch`) or kind (`Job.batch`):
/// `kind` and `group` apart, as the constructors of apimachinery's errors.go fill
/// `StatusDetails` from a `GroupResource` or `GroupKind`. Neither a resource nor a kind has a
/// dot, so the first dot starts the group.
fn object_details(qualified: &str, name: &str) -> Value {
    let (kind, group) = qualified.split_once('.').unwrap_or((qualified, ""));
    let mut details = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    details
}

/// `metav1.Status` with its fields in the order of the Go struct, which is the order Go's
/// encoder writes them in (k8s.io/apimachinery pkg/apis/meta/v1/types.go `Status`); `message`
/// and `reason` are `omitempty`, `metadata` never left out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoStatus<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Map<String, Value>,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<GoDetails<'a>>,
    code: u16,
}

/// `metav1.StatusDetails` in its Go order, every field `omitempty`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoDetails<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<GoCause<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<&'a Value>,
}

/// `metav1.StatusCause` in its Go order (`type` is written as `reason`).
#[derive(Serialize)]
struct GoCause<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a Value>,
}

/// The field `key` of `map` unless Go would leave it out as empty (`omitempty`).
fn non_empty<'a>(map: &'a Value, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    })
}

impl<'a> GoDetails<'a> {
    fn of(details: &'a Value) -> Self {
        let causes = details
            .get("causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|cause| GoCause {
                reason: non_empty(cause, "reason"),
                message: non_empty(cause, "message"),
                field: non_empty(cause, "field"),
            })
            .collect();
        Self {
            name: non_empty(details, "name"),
            group: non_empty(details, "group"),
            kind: non_empty(details, "kind"),
            uid: non_empty(details, "uid"),
            causes,
            retry_after_seconds: non_empty(details, "retryAfterSeconds"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.response_body(),
        )
            .into_response();
        if self.code == 429 {
            // Clients (client-go, kube-rs's retry layers) wait as long as Retry-After says.
            let seconds = self
                .details
                .as_ref()
                .and_then(|d| d.get("retryAfterSeconds"))
                .and_then(Value::as_u64)
                .unwrap_or(1);
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}
