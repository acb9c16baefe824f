//! Impersonation (`Impersonate-User`, `Impersonate-Group`: what `kubectl --as` and `--as-group`
//! send), when the control plane authorizes (`DevClusterOptions::rbac`), as k8s.io/apiserver
//! pkg/endpoints/filters/impersonation/impersonation.go `WithImpersonation` does it: the
//! requester must be allowed the verb `impersonate` on what it asks to be (`serviceaccounts`
//! NAME in NAMESPACE for `system:serviceaccount:NAMESPACE:NAME`, `users` NAME otherwise, and
//! `groups` NAME for each group; the admin, in `system:masters`, is allowed everything), else
//! 403; the request is then made by that user: a service account in its groups
//! (`system:serviceaccounts`, `system:serviceaccounts:NAMESPACE`) unless groups are given,
//! and in `system:authenticated` unless a group given is it or `system:unauthenticated`.
//!
//! This is the way kubectl acts as a service account here: client-go sends a kubeconfig's or
//! `--token`'s credentials only over TLS (k8s.io/client-go/tools/clientcmd/client_config.go,
//! "only try to read the auth information if we are secure"), and the control plane serves
//! plain HTTP, while impersonation headers are sent either way. `Impersonate-Uid` and
//! `Impersonate-Extra-*` are not read.

use axum::http::HeaderMap;

use crate::api::error::ApiError;
use crate::api::resources::Registry;
use crate::apiserver::authn::{AUTHENTICATED, User};
use crate::apiserver::rbac;
use crate::apiserver::request_info::RequestInfo;
use crate::storage::store::Store;

const USER_HEADER: &str = "impersonate-user";
const GROUP_HEADER: &str = "impersonate-group";

/// The user `requester` acts as: itself without impersonation headers, else the user they ask
/// for, once RBAC allows `requester` to impersonate it.
///
/// # Errors
/// 400 for groups without a user, 403 for what `requester` may not impersonate.
pub fn acting_user(
    headers: &HeaderMap,
    requester: User,
    store: &Store,
    registry: &Registry,
) -> Result<User, ApiError> {
    let text = |value: &axum::http::HeaderValue| value.to_str().unwrap_or_default().to_string();
    let name = headers.get(USER_HEADER).map(text).unwrap_or_default();
    let given_groups: Vec<String> = headers.get_all(GROUP_HEADER).iter().map(text).collect();
    if name.is_empty() {
        if given_groups.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::bad_request(
            "requested groups without impersonating a user",
        ));
    }
    let mut asked = Vec::new();
    let mut groups = Vec::new();
    match service_account(&name) {
        Some((namespace, account)) => {
            asked.push(impersonate("serviceaccounts", namespace, account));
            if given_groups.is_empty() {
                groups.push("system:serviceaccounts".to_string());
                groups.push(format!("system:serviceaccounts:{namespace}"));
            }
        }
        None => asked.push(impersonate("users", "", &name)),
    }
    for group in &given_groups {
        asked.push(impersonate("groups", "", group));
        groups.push(group.clone());
    }
    for request in &asked {
        if let Err(reason) = rbac::authorize(store, registry, &requester, request) {
            return Err(rbac::forbidden(&requester, request, &reason));
        }
    }
    if !groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == "system:unauthenticated")
    {
        groups.push(AUTHENTICATED.to_string());
    }
    Ok(User {
        name,
        uid: String::new(),
        groups,
        extra: Default::default(),
    })
}

/// The namespace and name of a service account's user name (`serviceaccount.SplitUsername`,
/// less its validation of the two names).
fn service_account(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("system:serviceaccount:")?;
    let (namespace, account) = rest.split_once(':')?;
    let valid = |s: &str| !s.is_empty() && !s.contains(':');
    (valid(namespace) && valid(account)).then_some((namespace, account))
}

/// The request to `impersonate` one thing.
fn impersonate(resource: &str, namespace: &str, name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: "impersonate".to_string(),
        api_version: "v1".to_string(),
        namespace: namespace.to_string(),
        resource: resource.to_string(),
        name: name.to_string(),
        ..RequestInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::builtin;
    use serde_json::json;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            headers.append(name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_admin_acts_as_a_service_account_in_its_groups() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let act =
            |pairs: &[(&str, &str)]| acting_user(&headers(pairs), User::admin(), &store, &registry);
        let runner = act(&[("Impersonate-User", "system:serviceaccount:ns:runner")]).unwrap();
        assert_eq!(runner.name, "system:serviceaccount:ns:runner");
        assert_eq!(
            runner.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        let alice = act(&[("Impersonate-User", "alice"), ("Impersonate-Group", "devs")]).unwrap();
        assert_eq!(
            (alice.name.as_str(), alice.groups),
            ("alice", vec!["devs".to_string(), AUTHENTICATED.to_string()])
        );
        assert_eq!(act(&[]).unwrap(), User::admin());
        assert_eq!(act(&[("Impersonate-Group", "devs")]).unwrap_err().code, 400);
    }

    #[test]
    fn anyone_else_needs_the_impersonate_verb() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let alice = User {
            name: "alice".into(),
            uid: String::new(),
            groups: vec![AUTHENTICATED.into()],
            extra: Default::default(),
        };
        let as_runner = headers(&[("Impersonate-User", "system:serviceaccount:ns:runner")]);
        let refused = acting_user(&as_runner, alice.clone(), &store, &registry).unwrap_err();
        assert_eq!(
            refused.message,
            r#"serviceaccounts "runner" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#
        );
        let group = "rbac.authorization.k8s.io";
        let role = json!({"metadata": {"name": "imp"},
            "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]}]});
        let binding = json!({"metadata": {"name": "imp"},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": "imp"},
            "subjects": [{"kind": "User", "name": "alice"}]});
        (store.create(&builtin(&registry, group, "clusterroles"), "", role)).unwrap();
        (store.create(
            &builtin(&registry, group, "clusterrolebindings"),
            "",
            binding,
        ))
        .unwrap();
        let runner = acting_user(&as_runner, alice, &store, &registry).unwrap();
        assert_eq!(runner.name, "system:serviceaccount:ns:runner");
    }
}
