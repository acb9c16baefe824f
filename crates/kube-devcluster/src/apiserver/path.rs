//! Parsing of Kubernetes API paths into what a request addresses:
//! `/api/v1/namespaces/{ns}/pods/{name}/log`, `/apis/{group}/{version}/{resource}`, and the
//! discovery documents in between.

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    ResourceList { group: String, version: String },
    /// A resource, a collection of it, or one object's subresource.
    Resource(ResourcePath),
}

/// A request on a resource: a collection (no name), one object, or a subresource of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses an API path; `None` when it is not one.
pub fn parse(path: &str) -> Option<ApiPath> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Some(ApiPath::CoreVersions),
        ["apis"] => return Some(ApiPath::Groups),
        ["apis", group] => return Some(ApiPath::Group(group.to_string())),
        ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
        _ => return None,
    };
    let resource_path = |namespace: Option<&str>, rest: &[&str]| -> Option<ApiPath> {
        let (resource, name, subresource) = match rest {
            [resource] => (resource, None, None),
            [resource, name] => (resource, Some(name), None),
            [resource, name, sub] => (resource, Some(name), Some(sub)),
            _ => return None,
        };
        Some(ApiPath::Resource(ResourcePath {
            group: group.clone(),
            version: version.clone(),
            namespace: namespace.map(String::from),
            resource: resource.to_string(),
            name: name.map(|s| s.to_string()),
            subresource: subresource.map(|s| s.to_string()),
        }))
    };
    match rest {
        [] => Some(ApiPath::ResourceList { group, version }),
        // `/api/v1/namespaces/{name}/status|finalize` are subresources of a Namespace, not a
        // resource called "status" inside it.
        ["namespaces", _, "status" | "finalize"] if group.is_empty() => resource_path(None, rest),
        ["namespaces", namespace, inner @ ..] if !inner.is_empty() => {
            resource_path(Some(namespace), inner)
        }
        _ => resource_path(None, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        group: &str,
        ns: Option<&str>,
        resource: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Option<ApiPath> {
        Some(ApiPath::Resource(ResourcePath {
            group: group.into(),
            version: "v1".into(),
            namespace: ns.map(String::from),
            resource: resource.into(),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        }))
    }

    #[test]
    fn parses_every_shape_of_api_path() {
        let cases = [
            ("/api", Some(ApiPath::CoreVersions)),
            ("/apis", Some(ApiPath::Groups)),
            ("/apis/batch", Some(ApiPath::Group("batch".into()))),
            (
                "/api/v1",
                Some(ApiPath::ResourceList {
                    group: "".into(),
                    version: "v1".into(),
                }),
            ),
            (
                "/apis/batch/v1",
                Some(ApiPath::ResourceList {
                    group: "batch".into(),
                    version: "v1".into(),
                }),
            ),
            ("/api/v1/pods", res("", None, "pods", None, None)),
            (
                "/api/v1/namespaces",
                res("", None, "namespaces", None, None),
            ),
            (
                "/api/v1/namespaces/default",
                res("", None, "namespaces", Some("default"), None),
            ),
            (
                "/api/v1/namespaces/default/status",
                res("", None, "namespaces", Some("default"), Some("status")),
            ),
            (
                "/api/v1/namespaces/default/pods",
                res("", Some("default"), "pods", None, None),
            ),
            (
                "/api/v1/namespaces/ns/pods/p1/log",
                res("", Some("ns"), "pods", Some("p1"), Some("log")),
            ),
            (
                "/apis/batch/v1/namespaces/ns/jobs/j/status",
                res("batch", Some("ns"), "jobs", Some("j"), Some("status")),
            ),
            (
                "/apis/batch/v1/jobs",
                res("batch", None, "jobs", None, None),
            ),
            ("/healthz", None),
            ("/api/v1/namespaces/ns/pods/p/log/extra", None),
        ];
        for (path, want) in cases {
            assert_eq!(parse(path), want, "{path}");
        }
    }
}
