//! The reviews `kubectl auth can-i` and `kubectl auth whoami` ask the server for:
//! `SelfSubjectAccessReview` and `SelfSubjectRulesReview` (authorization.k8s.io/v1) and
//! `SelfSubjectReview` (authentication.k8s.io/v1). They are create-only and never stored: the
//! server answers each with the request and its `status` filled in. The registry serves them
//! (`resources.rs`), so that discovery lists them.
//!
//! The devcluster has no authentication and no authorization, so every request is made by
//! [`USER`] and everything is allowed.

use serde_json::{Value, json};

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;

/// Who every request is made by: the user the written kubeconfig names (`cluster.rs`).
pub const USER: &str = "devcluster";

/// The groups of [`USER`]: `system:masters`, the group a real cluster's admin credentials are in.
const GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// The first bytes of a protobuf-encoded Kubernetes object.
const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

/// Why everything is allowed, as the review's `status.reason` says.
const REASON: &str = "the devcluster has no authorization: every request is allowed";

/// The answer to a request on a review resource: for a create, the review with its status
/// (201, as any create); any other verb is not served, as on the real server
/// (k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview/rest.go implements
/// only `rest.Creater`).
pub fn answer(info: &ResourceInfo, method: &str, body: &[u8]) -> Result<Value> {
    if method != "POST" {
        return Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {}: it can only be created",
            info.display_name()
        )));
    }
    // kubectl sends these typed requests as protobuf (a body starting with the `k8s\0` magic of
    // k8s.io/apimachinery/pkg/runtime/serializer/protobuf). The answer does not depend on what
    // is asked (everything is allowed), so such a review is answered without its spec echoed,
    // in JSON, which kubectl accepts too (it sends `Accept: ...protobuf,application/json`).
    let mut review = if body.starts_with(PROTOBUF_MAGIC) {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => return Err(ApiError::bad_request("the review must be a JSON object")),
        }
    };
    review["apiVersion"] = json!(info.api_version());
    review["kind"] = json!(info.kind);
    if !review.get("metadata").is_some_and(Value::is_object) {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review["status"] = match info.resource.as_str() {
        "selfsubjectaccessreviews" => json!({"allowed": true, "reason": REASON}),
        // One rule granting every verb on every resource and URL, as the rules of
        // `system:masters` (the cluster-admin ClusterRole) read.
        "selfsubjectrulesreviews" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        _ => json!({"userInfo": {"username": USER, "groups": GROUPS}}),
    };
    Ok(review)
}
