//! API errors as the real API server reports them: an HTTP status plus a `Status` body
//! (`kind: Status`, `reason`, `message`, `details`), which kube-rs, kubectl and the Python client
//! all parse.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

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

    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(json!({"name": name, "kind": resource}))
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(json!({"name": name, "kind": resource}))
    }

    pub fn conflict(resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(json!({"name": name, "kind": resource}))
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
        let (kind, group) = qualified_kind
            .split_once('.')
            .unwrap_or((qualified_kind, ""));
        let mut details = json!({"name": name, "kind": kind, "causes": causes});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
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
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            body["details"] = details.clone();
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, axum::Json(self.status_body())).into_response();
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
