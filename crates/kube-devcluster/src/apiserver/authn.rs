//! Who makes a request ([`authenticate`]), as k8s.io/apiserver's authentication filter decides
//! it when the control plane authenticates (`DevClusterOptions::rbac`); without that, every
//! request is the admin's ([`User::admin`]), as it always was.
//!
//! - `Authorization: Bearer TOKEN` with a token the kubelet issued to a pod
//!   ([`crate::kubelet::tokens`]) is that pod's service account, named and grouped as
//!   k8s.io/apiserver/pkg/authentication/serviceaccount/util.go `ServiceAccountInfo.UserInfo`
//!   makes it: user `system:serviceaccount:NS:NAME` (`MakeUsername`), groups
//!   `system:serviceaccounts` and `system:serviceaccounts:NS` (`MakeGroupNames`), the account's
//!   uid, and the pod's name and uid as `extra`
//!   (`authentication.kubernetes.io/pod-name`, `.../pod-uid`); then `system:authenticated`, which
//!   pkg/authentication/group/authenticated_group_adder.go adds to every authenticated user.
//! - Any other bearer token, or one whose pod was deleted or whose ServiceAccount is gone (the
//!   real token authenticator looks the account up too), is 401 Unauthorized with the Status
//!   pkg/endpoints/filters/authentication.go `Unauthorized` writes
//!   (`apierrors.NewUnauthorized("Unauthorized")`), which kubectl prints as `error: You must be
//!   logged in to the server (Unauthorized)`.
//! - A request without a bearer token (none, an empty one, another scheme) is the admin: the
//!   user of the kubeconfig the control plane writes, in `system:masters` (where a real server
//!   would make it `system:anonymous`; pkg/authentication/request/bearertoken/bearertoken.go
//!   leaves such headers to other authenticators). The operator, the tests and the CLI connect
//!   so.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::resources::{Registry, builtin};
use crate::kubelet::tokens::ServiceAccountTokens;
use crate::storage::store::Store;

/// The admin's name: the user the written kubeconfig names (`cluster.rs`).
pub const ADMIN: &str = "devcluster";

/// The group every check lets through: a real cluster's admin credentials are in it, and
/// kube-apiserver's first authorizer allows it everything (`authorizerfactory.NewPrivilegedGroups`
/// with `user.SystemPrivilegedGroup`).
pub const MASTERS: &str = "system:masters";

/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";

/// A request's user, as k8s.io/apiserver's `user.Info` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The admin: every request without a token.
    pub fn admin() -> Self {
        Self {
            name: ADMIN.to_string(),
            uid: String::new(),
            groups: vec![MASTERS.to_string(), AUTHENTICATED.to_string()],
            extra: BTreeMap::new(),
        }
    }

    /// Whether no authorization applies: a member of `system:masters`.
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// `status.userInfo` of a `SelfSubjectReview` (authentication.k8s.io/v1 `UserInfo`, its
    /// empty fields left out as Go's `omitempty` does).
    pub fn to_json(&self) -> Value {
        let mut info = json!({"username": self.name});
        if !self.uid.is_empty() {
            info["uid"] = json!(self.uid);
        }
        info["groups"] = json!(self.groups);
        if !self.extra.is_empty() {
            info["extra"] = json!(self.extra);
        }
        info
    }
}

/// The user of a request with these `headers`: a pod's service account for a token in
/// `tokens`, the admin without a bearer token or when `tokens` is `None` (authentication off).
///
/// # Errors
/// 401 Unauthorized for a bearer token no pod holds now.
pub fn authenticate(
    headers: &HeaderMap,
    tokens: Option<&ServiceAccountTokens>,
    store: &Store,
    registry: &Registry,
) -> Result<User, ApiError> {
    let Some(tokens) = tokens else {
        return Ok(User::admin());
    };
    let Some(token) = bearer_token(headers) else {
        return Ok(User::admin());
    };
    let identity = tokens.lookup(token).ok_or_else(unauthorized)?;
    let accounts = builtin(registry, "", "serviceaccounts");
    let account = store
        .get(&accounts, &identity.namespace, &identity.service_account)
        .map_err(|_| unauthorized())?;
    let namespace = &identity.namespace;
    Ok(User {
        name: format!(
            "system:serviceaccount:{namespace}:{}",
            identity.service_account
        ),
        uid: account.uid().to_string(),
        groups: vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
            AUTHENTICATED.to_string(),
        ],
        extra: BTreeMap::from([
            (
                "authentication.kubernetes.io/pod-name".to_string(),
                vec![identity.pod_name],
            ),
            (
                "authentication.kubernetes.io/pod-uid".to_string(),
                vec![identity.pod_uid],
            ),
        ]),
    })
}

/// The token of an `Authorization: Bearer TOKEN` header, read as bearertoken.go reads it: the
/// header trimmed, split at spaces into at most 3 parts, the scheme in any case; `None` when
/// there is no such header, another scheme, or an empty token.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// 401 as the authentication filter answers a request it cannot authenticate.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::tokens::PodIdentity;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn the_bearer_token_is_read_as_the_real_server_reads_it() {
        let cases = [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("  Bearer abc  ", Some("abc")),
            ("Bearer abc extra", Some("abc")),
            ("Bearer  abc", None),
            ("Bearer", None),
            ("Basic abc", None),
        ];
        for (header, token) in cases {
            assert_eq!(bearer_token(&headers(header)), token, "{header:?}");
        }
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    fn cluster_with_account() -> (Store, Registry) {
        let store = Store::new(Default::default());
        let registry = Registry::with_builtins();
        let accounts = builtin(&registry, "", "serviceaccounts");
        store
            .create(&accounts, "ns", json!({"metadata": {"name": "runner"}}))
            .unwrap();
        (store, registry)
    }

    #[test]
    fn a_pods_token_is_its_service_account_and_a_made_up_one_is_refused() {
        let (store, registry) = cluster_with_account();
        let tokens = ServiceAccountTokens::default();
        let token = tokens.issue(PodIdentity {
            namespace: "ns".into(),
            service_account: "runner".into(),
            pod_name: "p".into(),
            pod_uid: "u".into(),
        });
        let user = authenticate(
            &headers(&format!("Bearer {token}")),
            Some(&tokens),
            &store,
            &registry,
        )
        .unwrap();
        assert_eq!(user.name, "system:serviceaccount:ns:runner");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert!(!user.is_privileged());
        let refused = authenticate(&headers("Bearer nope"), Some(&tokens), &store, &registry);
        let refused = refused.unwrap_err();
        assert_eq!((refused.code, refused.reason), (401, "Unauthorized"));
        // No token, or authentication off: the admin.
        let admin = authenticate(&HeaderMap::new(), Some(&tokens), &store, &registry).unwrap();
        assert!(admin.is_privileged());
        let off = authenticate(&headers("Bearer nope"), None, &store, &registry).unwrap();
        assert_eq!(off, User::admin());
        // A deleted pod's token no longer works.
        tokens.forget("u");
        let forgotten = authenticate(
            &headers(&format!("Bearer {token}")),
            Some(&tokens),
            &store,
            &registry,
        );
        assert_eq!(forgotten.unwrap_err().code, 401);
    }
}
