//! Authorization by RBAC, when the control plane authenticates (`DevClusterOptions::rbac`), as
//! kube-apiserver's authorizers decide: `system:masters` is allowed everything (the privileged
//! group authorizer before RBAC); anyone else is allowed what a rule of the roles bound to them
//! allows ([`authorize`]), and refused with the API server's 403 otherwise ([`forbidden`]).
//!
//! The rules of a user in a namespace (kubernetes pkg/registry/rbac/validation/rule.go
//! `DefaultRuleResolver.VisitRulesFor`): those of the ClusterRoles every ClusterRoleBinding
//! naming the user binds, then, for a request in a namespace, those of the Roles and
//! ClusterRoles every RoleBinding there naming the user binds. A binding names a user by a
//! subject (`appliesToUser`): `User` by name, `Group` by one of the user's groups,
//! `ServiceAccount` by `system:serviceaccount:NS:NAME`, its namespace the binding's when the
//! subject has none. A binding whose role does not exist grants nothing and says so in the
//! refusal's reason (`RBAC: role.rbac.authorization.k8s.io "x" not found`, as the listers'
//! NotFound reads).
//!
//! A rule allows a request (plugin/pkg/auth/authorizer/rbac/rbac.go `RuleAllows` and
//! pkg/apis/rbac/v1/evaluation_helpers.go): a resource request when its verb, API group,
//! resource (`resource/subresource` for a subresource; `*/subresource` matches that
//! subresource of anything) and name (when the rule has `resourceNames`) are among the rule's,
//! `*` matching any verb, group or resource; a non-resource request when its verb and path are,
//! a path ending in `*` matching what it starts.
//!
//! The control plane starts with the bootstrap policy's roles that every authenticated user
//! holds ([`bootstrap`], plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go):
//! `system:discovery` and `system:public-info-viewer` (get on discovery, OpenAPI, health and
//! version paths) and `system:basic-user` (create the self-reviews `kubectl auth can-i` and
//! `whoami` send), bound to `system:authenticated`, and `cluster-admin` bound to
//! `system:masters`. Roles are read from the store at each request, so a binding made or
//! removed takes effect at once. Aggregated ClusterRoles (`aggregationRule`) are not filled in.

use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::resources::{Registry, builtin};
use crate::apiserver::authn::{AUTHENTICATED, MASTERS, User};
use crate::apiserver::request_info::RequestInfo;
use crate::storage::store::Store;

/// `rbac.authorization.k8s.io`.
const GROUP: &str = "rbac.authorization.k8s.io";

/// A policy rule (rbac/v1 `PolicyRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

impl PolicyRule {
    /// A rule as stored (a Role's or ClusterRole's `rules` item); missing lists are empty.
    pub fn from_json(rule: &Value) -> Self {
        let list = |field: &str| -> Vec<String> {
            (rule
                .get(field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten())
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
        };
        Self {
            verbs: list("verbs"),
            api_groups: list("apiGroups"),
            resources: list("resources"),
            resource_names: list("resourceNames"),
            non_resource_urls: list("nonResourceURLs"),
        }
    }

    /// Whether this rule allows the request (`RuleAllows`).
    pub fn allows(&self, request: &RequestInfo) -> bool {
        let verb = any_or(&self.verbs, &request.verb);
        if !request.is_resource_request {
            return verb && self.url_matches(&request.path);
        }
        let combined = if request.subresource.is_empty() {
            request.resource.clone()
        } else {
            format!("{}/{}", request.resource, request.subresource)
        };
        verb && any_or(&self.api_groups, &request.api_group)
            && self.resource_matches(&combined, &request.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&request.name))
    }

    /// `ResourceMatches`: `*`, the resource (with its subresource), or `*/subresource`.
    fn resource_matches(&self, combined: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            r == "*"
                || r == combined
                || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
        })
    }

    /// `NonResourceURLMatches`: `*`, the path, or a prefix of it ending in `*`.
    fn url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|url| {
            url == "*"
                || url == path
                || (url.ends_with('*') && path.starts_with(url.trim_end_matches('*')))
        })
    }
}

/// Whether `wanted` is in `list`, or `list` has `*`.
fn any_or(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

/// Whether a binding's subject names `user` (`appliesToUser`); `namespace` is the binding's
/// (empty for a ClusterRoleBinding).
fn applies_to(user: &User, subject: &Value, namespace: &str) -> bool {
    let text = |field: &str| subject.get(field).and_then(Value::as_str).unwrap_or("");
    match text("kind") {
        "User" => user.name == text("name"),
        "Group" => user.groups.iter().any(|g| g == text("name")),
        "ServiceAccount" => {
            let account_namespace = match text("namespace") {
                "" => namespace,
                given => given,
            };
            !account_namespace.is_empty()
                && user.name
                    == format!("system:serviceaccount:{account_namespace}:{}", text("name"))
        }
        _ => false,
    }
}

/// Whether `user` may do `request`: `Ok` with why when allowed (`RBAC: allowed by
/// RoleBinding "b/ns" of Role "r" to ServiceAccount "runner/ns"`, empty for `system:masters`),
/// else the refusal's reason (empty, or the roles that could not be found: `RBAC: ...`).
pub fn authorize(
    store: &Store,
    registry: &Registry,
    user: &User,
    request: &RequestInfo,
) -> Result<String, String> {
    if user.is_privileged() {
        return Ok(String::new());
    }
    let mut errors: Vec<String> = Vec::new();
    let mut allowed = None;
    visit_rules(
        store,
        registry,
        user,
        &request.namespace,
        |rule| match rule {
            Ok((source, rule)) if rule.allows(request) => {
                allowed = Some(format!("RBAC: allowed by {source}"));
                false
            }
            Ok(_) => true,
            Err(error) => {
                errors.push(error);
                true
            }
        },
    );
    if let Some(reason) = allowed {
        return Ok(reason);
    }
    if errors.is_empty() {
        return Err(String::new());
    }
    Err(format!("RBAC: {}", aggregate(errors)))
}

/// `utilerrors.NewAggregate(errors).Error()`: one error as it is, more (each once) in brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    match unique.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The `status` of a `SelfSubjectRulesReview` of `user` in `namespace`: every rule that
/// applies, as `resourceRules` and `nonResourceRules` (a rule with both in both), and the roles
/// that could not be found as `evaluationError` (as the `selfsubjectrulesreview` registry
/// writes what RBAC's `RulesFor` returns).
pub fn rules_review_status(
    store: &Store,
    registry: &Registry,
    user: &User,
    namespace: &str,
) -> Value {
    let (mut resource_rules, mut url_rules, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    visit_rules(store, registry, user, namespace, |rule| {
        match rule {
            Ok((_, rule)) => {
                let mut listed = json!({"verbs": rule.verbs});
                if !rule.resources.is_empty() {
                    for (field, list) in [
                        ("apiGroups", &rule.api_groups),
                        ("resources", &rule.resources),
                        ("resourceNames", &rule.resource_names),
                    ] {
                        if !list.is_empty() {
                            listed[field] = json!(list);
                        }
                    }
                    resource_rules.push(listed);
                }
                if !rule.non_resource_urls.is_empty() {
                    url_rules.push(
                        json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}),
                    );
                }
            }
            Err(error) => errors.push(error),
        }
        true
    });
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": url_rules,
        "incomplete": false,
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(aggregate(errors));
    }
    status
}

/// Calls `visit` with each rule that applies to `user` in `namespace` (empty: cluster-wide
/// only) and the binding it comes from, or the error of a binding whose role cannot be found,
/// until it returns false.
fn visit_rules(
    store: &Store,
    registry: &Registry,
    user: &User,
    namespace: &str,
    mut visit: impl FnMut(Result<(&str, PolicyRule), String>) -> bool,
) {
    let cluster_bindings = builtin(registry, GROUP, "clusterrolebindings");
    let (bindings, _) = store.list(&cluster_bindings.group_resource(), None);
    let mut scopes = vec![(bindings, String::new())];
    if !namespace.is_empty() {
        let role_bindings = builtin(registry, GROUP, "rolebindings");
        let (bindings, _) = store.list(&role_bindings.group_resource(), Some(namespace));
        scopes.push((bindings, namespace.to_string()));
    }
    for (bindings, namespace) in scopes {
        for binding in bindings {
            let subjects = binding.value.get("subjects").and_then(Value::as_array);
            let subject =
                (subjects.into_iter().flatten()).find(|s| applies_to(user, s, &namespace));
            let Some(subject) = subject else {
                continue;
            };
            let rules = match role_rules(store, registry, &binding.value["roleRef"], &namespace) {
                Ok(rules) => rules,
                Err(error) => {
                    if !visit(Err(error)) {
                        return;
                    }
                    continue;
                }
            };
            let source = describe(&binding.value, subject, &namespace);
            for rule in rules {
                if !visit(Ok((&source, rule))) {
                    return;
                }
            }
        }
    }
}

/// A binding and the subject of it that names the user, as rule.go's
/// `clusterRoleBindingDescriber` and `roleBindingDescriber` write them.
fn describe(binding: &Value, subject: &Value, namespace: &str) -> String {
    let text = |value: &Value, field: &str| -> String {
        value
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let name = binding
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let role_ref = &binding["roleRef"];
    let (kind, subject_name) = (text(subject, "kind"), text(subject, "name"));
    // `describeSubject`: a ServiceAccount as NAME/NAMESPACE.
    let subject = match (kind.as_str(), text(subject, "namespace")) {
        ("ServiceAccount", given) => {
            let account_namespace = if given.is_empty() {
                namespace.to_string()
            } else {
                given
            };
            format!("{kind} {:?}", format!("{subject_name}/{account_namespace}"))
        }
        _ => format!("{kind} {subject_name:?}"),
    };
    let (role_kind, role_name) = (text(role_ref, "kind"), text(role_ref, "name"));
    if namespace.is_empty() {
        format!("ClusterRoleBinding {name:?} of {role_kind} {role_name:?} to {subject}")
    } else {
        let binding = format!("{name}/{namespace}");
        format!("RoleBinding {binding:?} of {role_kind} {role_name:?} to {subject}")
    }
}

/// The rules of the role a binding refers to (`GetRoleReferenceRules`): a Role in the
/// binding's namespace or a ClusterRole.
fn role_rules(
    store: &Store,
    registry: &Registry,
    role_ref: &Value,
    namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    // The listers' NotFound names the kind in lower case (`v1.Resource("role")`).
    let (resource, singular, namespace) = match role_ref.get("kind").and_then(Value::as_str) {
        Some("Role") => ("roles", "role", namespace),
        Some("ClusterRole") => ("clusterroles", "clusterrole", ""),
        other => {
            let kind = other.unwrap_or("");
            return Err(format!("unsupported role reference kind: {kind:?}"));
        }
    };
    let info = builtin(registry, GROUP, resource);
    let role = store
        .get(&info, namespace, name)
        .map_err(|_| format!("{singular}.{GROUP} {name:?} not found"))?;
    let rules = role.value.get("rules").and_then(Value::as_array);
    Ok((rules.into_iter().flatten())
        .map(PolicyRule::from_json)
        .collect())
}

/// The 403 of a refused request, as k8s.io/apiserver
/// pkg/endpoints/handlers/responsewriters/errors.go `ForbiddenStatusError` writes it:
/// `forbiddenMessage` (`User "U" cannot VERB resource "R[/SUB]" in API group "G" in the
/// namespace "NS"`, or `at the cluster scope`, or `cannot VERB path "/P"`) with `&`, `<` and `>`
/// escaped, `: REASON` after it when there is one, inside apimachinery's `NewForbidden`
/// (`R[.G] ["NAME" ]is forbidden: ...`, details naming the resource, its group and the name).
pub fn forbidden(user: &User, request: &RequestInfo, reason: &str) -> ApiError {
    let mut message = escape(&forbidden_message(user, request));
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    new_forbidden(request, &message)
}

/// apimachinery's `NewForbidden` of the request's resource and name, with `why` after
/// `is forbidden: `.
pub fn new_forbidden(request: &RequestInfo, why: &str) -> ApiError {
    let qualified = match request.api_group.as_str() {
        "" => request.resource.clone(),
        group => format!("{}.{group}", request.resource),
    };
    let message = match (qualified.is_empty(), request.name.is_empty()) {
        (true, _) => format!("forbidden: {why}"),
        (false, true) => format!("{qualified} is forbidden: {why}"),
        (false, false) => format!("{qualified} {:?} is forbidden: {why}", request.name),
    };
    let mut details = json!({});
    for (field, value) in [
        ("name", &request.name),
        ("group", &request.api_group),
        ("kind", &request.resource),
    ] {
        if !value.is_empty() {
            details[field] = json!(value);
        }
    }
    ApiError::new(403, "Forbidden", message).with_details(details)
}

/// `forbiddenMessage`.
fn forbidden_message(user: &User, request: &RequestInfo) -> String {
    let (name, verb) = (&user.name, &request.verb);
    if !request.is_resource_request {
        return format!("User {name:?} cannot {verb} path {:?}", request.path);
    }
    let mut resource = request.resource.clone();
    if !request.subresource.is_empty() {
        resource = format!("{resource}/{}", request.subresource);
    }
    let group = &request.api_group;
    match request.namespace.as_str() {
        "" => format!(
            "User {name:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
        ),
        namespace => format!(
            "User {name:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {namespace:?}"
        ),
    }
}

/// The responsewriters' `sanitizer`: nothing in an error that reads as HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Stores the bootstrap policy's roles every authenticated user holds, and `cluster-admin`
/// (see the module documentation), labelled and annotated as kube-apiserver's RBAC post-start
/// hook makes them.
pub fn bootstrap(store: &Store, registry: &Registry) {
    let roles = builtin(registry, GROUP, "clusterroles");
    let bindings = builtin(registry, GROUP, "clusterrolebindings");
    let metadata = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let urls = |urls: &[&str]| json!([{"verbs": ["get"], "nonResourceURLs": urls}]);
    let policy = [
        (
            "cluster-admin",
            json!([
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ]),
            MASTERS,
        ),
        (
            "system:discovery",
            urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ]),
            AUTHENTICATED,
        ),
        (
            "system:public-info-viewer",
            urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"]),
            AUTHENTICATED,
        ),
        (
            "system:basic-user",
            json!([
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"]},
            ]),
            AUTHENTICATED,
        ),
    ];
    for (name, rules, group) in policy {
        let role = json!({"metadata": metadata(name), "rules": rules});
        let binding = json!({
            "metadata": metadata(name),
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": group}],
        });
        for (info, object) in [(&roles, role), (&bindings, binding)] {
            if let Err(error) = store.create(info, "", object) {
                tracing::warn!(%error, name, "cannot store the bootstrap RBAC policy");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::request_info;

    fn rule(value: Value) -> PolicyRule {
        PolicyRule::from_json(&value)
    }

    fn request(method: &str, path: &str) -> RequestInfo {
        request_info::of(method, path, &[])
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let create_cm = request("POST", "/api/v1/namespaces/ns/configmaps");
        let get_job = request("GET", "/apis/batch/v1/namespaces/ns/jobs/j");
        let job_status = request("PUT", "/apis/batch/v1/namespaces/ns/jobs/j/status");
        let pod_log = request("GET", "/api/v1/namespaces/ns/pods/p/log");
        let cases = [
            (
                json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}),
                &create_cm,
                true,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}),
                &create_cm,
                false,
            ),
            (
                json!({"verbs": ["create"], "apiGroups": ["apps"], "resources": ["configmaps"]}),
                &create_cm,
                false,
            ),
            (
                json!({"verbs": ["create"], "apiGroups": [""], "resources": ["secrets"]}),
                &create_cm,
                false,
            ),
            (
                json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                &create_cm,
                true,
            ),
            // A create names nothing, so a rule limited to names never allows it.
            (
                json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
                &create_cm,
                false,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["j"]}),
                &get_job,
                true,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": ["k"]}),
                &get_job,
                false,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["jobs"]}),
                &get_job,
                false,
            ),
            // A subresource is its own resource: `jobs` does not grant `jobs/status`.
            (
                json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs"]}),
                &job_status,
                false,
            ),
            (
                json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs/status"]}),
                &job_status,
                true,
            ),
            (
                json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["*/status"]}),
                &job_status,
                true,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}),
                &pod_log,
                false,
            ),
            (
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}),
                &pod_log,
                true,
            ),
            // A rule of URLs allows no resource.
            (
                json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
                &create_cm,
                false,
            ),
        ];
        for (rule_json, request, allowed) in cases {
            assert_eq!(
                rule(rule_json.clone()).allows(request),
                allowed,
                "{rule_json} {request:?}"
            );
        }
    }

    #[test]
    fn url_rules_match_paths_and_prefixes() {
        let version = request("GET", "/version");
        let group = request("GET", "/apis/batch/v1");
        let post = request("POST", "/version");
        let discovery = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/version", "/apis/*"]}));
        assert!(discovery.allows(&version));
        assert!(discovery.allows(&group));
        assert!(!discovery.allows(&post));
        assert!(!discovery.allows(&request("GET", "/healthz")));
        assert!(!discovery.allows(&request("GET", "/apis")));
        // A resource rule allows no path.
        let everything = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(!everything.allows(&version));
    }

    fn account(namespace: &str, name: &str) -> User {
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
            extra: Default::default(),
        }
    }

    #[test]
    fn subjects_name_users_groups_and_service_accounts() {
        let runner = account("ns", "runner");
        let cases = [
            (
                json!({"kind": "ServiceAccount", "name": "runner"}),
                "ns",
                true,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "runner"}),
                "other",
                false,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "runner", "namespace": "ns"}),
                "other",
                true,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "runner"}),
                "",
                false,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "default"}),
                "ns",
                false,
            ),
            (
                json!({"kind": "User", "name": "system:serviceaccount:ns:runner"}),
                "",
                true,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
                "",
                true,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts:other"}),
                "",
                false,
            ),
            (json!({"kind": "Robot", "name": "runner"}), "ns", false),
        ];
        for (subject, namespace, applies) in cases {
            assert_eq!(
                applies_to(&runner, &subject, namespace),
                applies,
                "{subject} in {namespace:?}"
            );
        }
    }

    fn store_with(objects: &[(&str, &str, Value)]) -> (Store, Registry) {
        let store = Store::new(Default::default());
        let registry = Registry::with_builtins();
        for (resource, namespace, object) in objects {
            let info = builtin(&registry, GROUP, resource);
            store.create(&info, namespace, object.clone()).unwrap();
        }
        (store, registry)
    }

    #[test]
    fn roles_are_granted_by_bindings_in_the_namespace_and_cluster_wide() {
        let role = json!({"metadata": {"name": "cm-writer"},
            "rules": [{"verbs": ["create", "get"], "apiGroups": [""], "resources": ["configmaps"]}]});
        let binding = |name: &str, kind: &str, role: &str| {
            json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "ns"}],
            })
        };
        let (store, registry) = store_with(&[
            ("roles", "ns", role.clone()),
            ("clusterroles", "", role),
            ("rolebindings", "ns", binding("b", "Role", "cm-writer")),
            ("rolebindings", "ns", binding("missing", "Role", "nope")),
            (
                "rolebindings",
                "other",
                binding("c", "ClusterRole", "cm-writer"),
            ),
        ]);
        let runner = account("ns", "runner");
        let ask = |method: &str, path: &str| {
            authorize(&store, &registry, &runner, &request(method, path))
        };
        assert_eq!(
            ask("POST", "/api/v1/namespaces/ns/configmaps"),
            Ok(r#"RBAC: allowed by RoleBinding "b/ns" of Role "cm-writer" to ServiceAccount "runner/ns""#.into())
        );
        assert_eq!(
            ask("POST", "/api/v1/namespaces/other/configmaps"),
            Ok(r#"RBAC: allowed by RoleBinding "c/other" of ClusterRole "cm-writer" to ServiceAccount "runner/ns""#.into())
        );
        // Not granted; the binding to a missing Role says so.
        assert_eq!(
            ask("DELETE", "/api/v1/namespaces/ns/configmaps/a"),
            Err(r#"RBAC: role.rbac.authorization.k8s.io "nope" not found"#.into())
        );
        assert_eq!(
            ask("POST", "/api/v1/namespaces/third/configmaps"),
            Err(String::new())
        );
        // RoleBindings grant nothing cluster-wide.
        assert_eq!(ask("GET", "/api/v1/configmaps"), Err(String::new()));
        // The privileged group needs no binding.
        assert_eq!(
            authorize(
                &store,
                &registry,
                &User::admin(),
                &request("DELETE", "/api/v1/nodes/n")
            ),
            Ok(String::new())
        );
    }

    #[test]
    fn the_bootstrap_policy_lets_everyone_discover_and_review_themselves() {
        let (store, registry) = store_with(&[]);
        bootstrap(&store, &registry);
        let runner = account("ns", "runner");
        let ask = |method: &str, path: &str| {
            authorize(&store, &registry, &runner, &request(method, path))
        };
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/batch/v1",
            "/version",
            "/openapi/v3",
            "/healthz",
        ] {
            assert!(ask("GET", path).is_ok(), "{path}");
        }
        assert_eq!(
            ask("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            Ok(r#"RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated""#.into())
        );
        assert!(ask("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews").is_ok());
        assert_eq!(ask("GET", "/debug/requests"), Err(String::new()));
        assert_eq!(
            ask("GET", "/api/v1/namespaces/ns/configmaps"),
            Err(String::new())
        );
    }

    #[test]
    fn a_refusal_reads_as_the_api_servers() {
        let runner = account("ns", "runner");
        let create = request("POST", "/api/v1/namespaces/ns/configmaps");
        let error = forbidden(&runner, &create, "");
        assert_eq!((error.code, error.reason), (403, "Forbidden"));
        assert_eq!(
            error.message,
            r#"configmaps is forbidden: User "system:serviceaccount:ns:runner" cannot create resource "configmaps" in API group "" in the namespace "ns""#
        );
        assert_eq!(error.details, Some(json!({"kind": "configmaps"})));
        let status = request("GET", "/apis/batch/v1/namespaces/ns/jobs/j/status");
        let error = forbidden(&runner, &status, "RBAC: why");
        assert_eq!(
            error.message,
            r#"jobs.batch "j" is forbidden: User "system:serviceaccount:ns:runner" cannot get resource "jobs/status" in API group "batch" in the namespace "ns": RBAC: why"#
        );
        assert_eq!(
            error.details,
            Some(json!({"name": "j", "group": "batch", "kind": "jobs"}))
        );
        let nodes = forbidden(&runner, &request("GET", "/api/v1/nodes"), "");
        assert_eq!(
            nodes.message,
            r#"nodes is forbidden: User "system:serviceaccount:ns:runner" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
        let path = forbidden(&runner, &request("GET", "/debug/<x>"), "");
        assert_eq!(
            path.message,
            r#"forbidden: User "system:serviceaccount:ns:runner" cannot get path "/debug/&lt;x&gt;""#
        );
        assert_eq!(path.details, Some(json!({})));
    }
}
