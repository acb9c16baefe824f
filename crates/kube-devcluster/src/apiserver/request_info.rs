//! What a request asks to do, for authorization: [`RequestInfo`] as
//! k8s.io/apiserver/pkg/endpoints/request/requestinfo.go `RequestInfoFactory.NewRequestInfo`
//! derives it from the method and path alone, before anything is looked up.
//!
//! A path under `/api/VERSION/...` or `/apis/GROUP/VERSION/...` with a resource is a resource
//! request; anything else (`/api`, `/apis/GROUP/VERSION`, `/version`, `/openapi/v3`, ...) is a
//! non-resource request on its path, its verb the method in lower case. A resource request's
//! verb comes from the method: POST `create`, GET and HEAD `get` (`list`, or `watch` with
//! `?watch=true`, without a name), PUT `update`, PATCH `patch`, DELETE `delete`
//! (`deletecollection` without a name); `/watch/` and `/proxy/` before the resource are verbs
//! too. `namespaces/NAME` is in namespace NAME; `namespaces/NAME/status|finalize` are its
//! subresources; a `list` or `watch` whose field selector requires `metadata.name=X` names X.

use std::collections::BTreeMap;

/// The attributes of a request that authorization reads (`authorizer.AttributesRecord`, less
/// the user).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    pub is_resource_request: bool,
    /// The URL path, for non-resource requests.
    pub path: String,
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

/// Verbs given as a path segment before the resource (`specialVerbs`).
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];

/// Subresources of a Namespace rather than resources in it (`namespaceSubresources`).
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The request info of `method` on `path` with its `query` (decoded pairs).
pub fn of(method: &str, path: &str, query: &[(String, String)]) -> RequestInfo {
    let mut info = RequestInfo {
        path: path.to_string(),
        verb: method.to_ascii_lowercase(),
        ..RequestInfo::default()
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut parts: &[&str] = &parts;
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return info;
    }
    let groupless = parts[0] == "api";
    parts = &parts[1..];
    if !groupless {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts[0].to_string();
        parts = &parts[1..];
    }
    info.is_resource_request = true;
    info.api_version = parts[0].to_string();
    parts = &parts[1..];
    if SPECIAL_VERBS.contains(&parts[0]) {
        if parts.len() < 2 {
            // The real server answers an error here; nothing that names no resource is allowed.
            return info;
        }
        info.verb = parts[0].to_string();
        parts = &parts[1..];
    } else {
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
            parts = &parts[2..];
        }
    }
    let with_subresource = info.verb != "proxy";
    if parts.len() >= 3 && with_subresource {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    info.resource = parts[0].to_string();
    if info.name.is_empty() && info.verb == "get" {
        list_or_watch(&mut info, query);
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
    info
}

/// A `get` without a name: `watch` when `?watch=` says so, else `list`; named by a field
/// selector `metadata.name=X` (`RequiresExactMatch`) when it selects one name.
fn list_or_watch(info: &mut RequestInfo, query: &[(String, String)]) {
    let first: BTreeMap<&str, &str> = query
        .iter()
        .rev()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let watch = first
        .get("watch")
        .is_some_and(|v| crate::apiserver::query::flag(Some(v)));
    info.verb = if watch { "watch" } else { "list" }.to_string();
    let Some(selector) = first.get("fieldSelector") else {
        return;
    };
    // The first term requiring `metadata.name` to equal a value (`andTerm.RequiresExactMatch`),
    // if that value can be a name in a path (`content.IsPathSegmentName`).
    let name = selector.split(',').find_map(|term| {
        let term = term.trim();
        term.strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))
    });
    if let Some(name) = name
        && !name.is_empty()
        && !name.contains(['/', '%'])
        && !matches!(name, "." | "..")
    {
        info.name = name.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: &[(&str, &str)]) -> RequestInfo {
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        of(method, path, &query)
    }

    /// (verb, group, namespace, resource, subresource, name) of a resource request.
    fn resource(i: &RequestInfo) -> (&str, &str, &str, &str, &str, &str) {
        assert!(i.is_resource_request, "{i:?}");
        (
            &i.verb,
            &i.api_group,
            &i.namespace,
            &i.resource,
            &i.subresource,
            &i.name,
        )
    }

    #[test]
    fn verbs_come_from_the_method_and_whether_a_name_is_given() {
        let cm = "/api/v1/namespaces/ns/configmaps";
        let one = "/api/v1/namespaces/ns/configmaps/a";
        let cases = [
            ("GET", cm, vec![], ("list", "", "ns", "configmaps", "", "")),
            (
                "GET",
                cm,
                vec![("watch", "true")],
                ("watch", "", "ns", "configmaps", "", ""),
            ),
            (
                "GET",
                cm,
                vec![("watch", "false")],
                ("list", "", "ns", "configmaps", "", ""),
            ),
            ("GET", one, vec![], ("get", "", "ns", "configmaps", "", "a")),
            (
                "HEAD",
                one,
                vec![],
                ("get", "", "ns", "configmaps", "", "a"),
            ),
            (
                "POST",
                cm,
                vec![],
                ("create", "", "ns", "configmaps", "", ""),
            ),
            (
                "PUT",
                one,
                vec![],
                ("update", "", "ns", "configmaps", "", "a"),
            ),
            (
                "PATCH",
                one,
                vec![],
                ("patch", "", "ns", "configmaps", "", "a"),
            ),
            (
                "DELETE",
                one,
                vec![],
                ("delete", "", "ns", "configmaps", "", "a"),
            ),
            (
                "DELETE",
                cm,
                vec![],
                ("deletecollection", "", "ns", "configmaps", "", ""),
            ),
            (
                "GET",
                "/apis/batch/v1/namespaces/ns/jobs/j/status",
                vec![],
                ("get", "batch", "ns", "jobs", "status", "j"),
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/pods/p/exec",
                vec![],
                ("create", "", "ns", "pods", "exec", "p"),
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                vec![],
                (
                    "list",
                    "rbac.authorization.k8s.io",
                    "",
                    "clusterroles",
                    "",
                    "",
                ),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/ns/pods",
                vec![],
                ("watch", "", "ns", "pods", "", ""),
            ),
        ];
        for (method, path, query, expected) in cases {
            assert_eq!(
                resource(&info(method, path, &query)),
                expected,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn a_namespace_is_in_itself_and_has_subresources() {
        let get = info("GET", "/api/v1/namespaces/ns", &[]);
        assert_eq!(resource(&get), ("get", "", "ns", "namespaces", "", "ns"));
        let status = info("PUT", "/api/v1/namespaces/ns/status", &[]);
        assert_eq!(
            resource(&status),
            ("update", "", "ns", "namespaces", "status", "ns")
        );
        let all = info("GET", "/api/v1/namespaces", &[]);
        assert_eq!(resource(&all), ("list", "", "", "namespaces", "", ""));
    }

    #[test]
    fn a_field_selector_on_the_name_names_the_object() {
        let path = "/api/v1/namespaces/ns/configmaps";
        let watch = info(
            "GET",
            path,
            &[("watch", "1"), ("fieldSelector", "metadata.name=a")],
        );
        assert_eq!(resource(&watch), ("watch", "", "ns", "configmaps", "", "a"));
        let two = info(
            "GET",
            path,
            &[("fieldSelector", "metadata.name=a,metadata.name=b")],
        );
        assert_eq!(two.name, "a");
        let not_a_name = info("GET", path, &[("fieldSelector", "metadata.name=a/b")]);
        assert_eq!(not_a_name.name, "");
        let other = info("GET", path, &[("fieldSelector", "metadata.namespace=ns")]);
        assert_eq!(other.name, "");
    }

    #[test]
    fn discovery_and_other_paths_are_not_resource_requests() {
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/batch",
            "/apis/batch/v1",
            "/version",
            "/openapi/v3/apis/batch/v1",
            "/healthz",
        ] {
            let i = info("GET", path, &[]);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!((i.verb.as_str(), i.path.as_str()), ("get", path));
        }
    }
}
