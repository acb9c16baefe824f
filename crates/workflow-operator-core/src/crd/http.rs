//! An HTTP step (`http: {url, method, headers, body, timeoutSeconds, successCondition,
//! insecureSkipVerify}`, Argo's http template): one request, made by the step agent in the
//! step's own pod, whose response body is the step's `result`. The fields as the API holds
//! them; what the step agent is told and how the answer is judged are `http_call`'s.

use k8s_openapi::api::core::v1::SecretKeySelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::numbers::{self, IntOrExpr};

/// The request's timeout when `timeoutSeconds` is not given, in seconds (as Argo documents
/// it).
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 30;

/// The methods an HTTP step may use.
pub const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
];

/// `http`: the request the step makes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpStep {
    /// The URL, `http://` or `https://`.
    #[schemars(length(min = 1))]
    pub url: String,

    /// The method (default `GET`): `GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `OPTIONS`
    /// or `TRACE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,

    /// Headers sent with the request, each a `value` or a Secret's key (`valueFrom`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HttpHeader>,

    /// The request's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,

    /// How long the request may take, connecting and reading the whole response, in seconds
    /// (default 30). The step's `timeout` still bounds the whole step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_one")]
    pub timeout_seconds: Option<IntOrExpr<i64>>,

    /// A CEL expression over `response.statusCode` (an int), `response.body` (a string),
    /// `response.headers` (header name, as Go writes it, e.g. `Content-Type`, to a list of
    /// values) and `request.url`, `.method`, `.body`: the step succeeds when it is true.
    /// Absent: when the status is 2xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,

    /// Do not verify the server's TLS certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

/// A header of the request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeader {
    /// The header's name.
    #[schemars(length(min = 1))]
    pub name: String,

    /// Its value (not with `valueFrom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,

    /// Its value from a Secret, read by the step's pod (never by the operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<HttpHeaderSource>,
}

/// Where a header's value comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeaderSource {
    /// A key of a Secret in the workflow's namespace.
    pub secret_key_ref: SecretKeySelector,
}

impl HttpStep {
    /// The method to use: `method`, or `GET`.
    pub fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("GET")
    }

    /// The texts that may hold a reference to fill before the request is made: the URL, the
    /// method, the body and the headers' values.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let headers = self.headers.iter().filter_map(|h| h.value.as_deref());
        std::iter::once(self.url.as_str())
            .chain(self.method.as_deref())
            .chain(self.body.as_deref())
            .chain(headers)
    }
}
