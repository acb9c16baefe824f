//! The reviews `kubectl auth can-i` and `kubectl auth whoami` ask the server for:
//! `SelfSubjectAccessReview` and `SelfSubjectRulesReview` (authorization.k8s.io/v1) and
//! `SelfSubjectReview` (authentication.k8s.io/v1). They are create-only and never stored: the
//! server answers each with the request and its `status` filled in. The registry serves them
//! (`resources.rs`), so that discovery lists them.
//!
//! A `SelfSubjectReview` names the request's user ([`crate::apiserver::authn`]). The access and
//! rules reviews of the admin (`system:masters`), and of everyone while the control plane does
//! not authorize (its default), say everything is allowed; with RBAC on
//! (`DevClusterOptions::rbac`), another user's are answered from RBAC
//! ([`crate::apiserver::rbac`]), as kube-apiserver's `selfsubjectaccessreview` and
//! `selfsubjectrulesreview` registries ask its authorizer.

use serde_json::{Value, json};

use crate::api::error::{ApiError, Result};
use crate::api::resources::{Registry, ResourceInfo};
use crate::apiserver::authn::User;
use crate::apiserver::protobuf;
use crate::apiserver::rbac;
use crate::apiserver::request_info::RequestInfo;
use crate::storage::store::Store;

/// The first bytes of a protobuf-encoded Kubernetes object.
const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

/// Why everything is allowed, as the review's `status.reason` says.
const REASON: &str = "the devcluster has no authorization: every request is allowed";

/// Who asks, and what answers when RBAC is on: the store and registry its roles are read from.
pub struct Reviewer<'a> {
    pub user: &'a User,
    pub rbac: Option<(&'a Store, &'a Registry)>,
}

/// The answer to a request on a review resource: for a create, the review with its status
/// (201, as any create); any other verb is not served, as on the real server
/// (k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview/rest.go implements
/// only `rest.Creater`).
pub fn answer(
    info: &ResourceInfo,
    method: &str,
    body: &[u8],
    reviewer: &Reviewer<'_>,
) -> Result<Value> {
    if method != "POST" {
        return Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {}: it can only be created",
            info.display_name()
        )));
    }
    // kubectl sends these typed requests as protobuf (a body starting with the `k8s\0` magic of
    // k8s.io/apimachinery/pkg/runtime/serializer/protobuf); their spec is read from it, and the
    // review is answered in JSON, which kubectl accepts too (it sends
    // `Accept: ...protobuf,application/json`).
    let mut review = if body.starts_with(PROTOBUF_MAGIC) {
        json!({"spec": protobuf::review_spec(body, &info.kind)?})
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
    let rbac = reviewer.rbac.filter(|_| !reviewer.user.is_privileged());
    review["status"] = match (info.resource.as_str(), rbac) {
        ("selfsubjectaccessreviews", None) => json!({"allowed": true, "reason": REASON}),
        ("selfsubjectaccessreviews", Some((store, registry))) => {
            let request = attributes(&review["spec"]);
            match rbac::authorize(store, registry, reviewer.user, &request) {
                Ok(reason) => json!({"allowed": true, "reason": reason}),
                Err(reason) if reason.is_empty() => json!({"allowed": false}),
                Err(reason) => json!({"allowed": false, "reason": reason}),
            }
        }
        // One rule granting every verb on every resource and URL, as the rules of
        // `system:masters` (the cluster-admin ClusterRole) read.
        ("selfsubjectrulesreviews", None) => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        ("selfsubjectrulesreviews", Some((store, registry))) => {
            let namespace = review["spec"]["namespace"].as_str().unwrap_or_default();
            rbac::rules_review_status(store, registry, reviewer.user, namespace)
        }
        _ => json!({"userInfo": reviewer.user.to_json()}),
    };
    Ok(review)
}

/// The request a `SelfSubjectAccessReview`'s spec asks about (`ResourceAttributesFrom` and
/// `NonResourceAttributesFrom` of pkg/registry/authorization/util).
fn attributes(spec: &Value) -> RequestInfo {
    let text = |attributes: &Value, field: &str| {
        attributes
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if let Some(resource) = spec.get("resourceAttributes").filter(|a| a.is_object()) {
        return RequestInfo {
            is_resource_request: true,
            verb: text(resource, "verb"),
            api_group: text(resource, "group"),
            api_version: text(resource, "version"),
            namespace: text(resource, "namespace"),
            resource: text(resource, "resource"),
            subresource: text(resource, "subresource"),
            name: text(resource, "name"),
            ..RequestInfo::default()
        };
    }
    let other = spec.get("nonResourceAttributes").unwrap_or(&Value::Null);
    RequestInfo {
        path: text(other, "path"),
        verb: text(other, "verb"),
        ..RequestInfo::default()
    }
}
