//! The registry of served resources: the built-in kinds this project and `kubectl apply -f deploy/`
//! need, plus every CustomResourceDefinition installed at run time. The server looks every request
//! up here; discovery documents are rendered from it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use super::strategy::{CUSTOM_RESOURCE, Strategy};

/// A group and a resource (plural), the key objects are stored under. Versions are not part of
/// the key: every resource is served at exactly one version here.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Everything the server needs to know about one served resource.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    /// Plural, lower case: the URL segment.
    pub resource: String,
    pub singular: String,
    pub kind: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// Whether `/status` is a subresource: then writes to the main resource ignore `status`
    /// and writes to `/status` ignore everything else.
    pub status_subresource: bool,
    /// The structural OpenAPI v3 schema of a CRD version, for defaulting and validation.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns` of a CRD version, served as a `Table` to kubectl.
    pub printer_columns: Vec<Value>,
    pub categories: Vec<String>,
    /// The kind's rules: generation, what a delete answers, defaults, field labels.
    pub strategy: &'static Strategy,
}

impl ResourceInfo {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// The order its objects' keys are written in: a custom resource's sorted, a built-in
    /// kind's its Go struct's (`go_json`).
    pub fn key_order(&self) -> super::go_json::KeyOrder {
        if std::ptr::eq(self.strategy, &CUSTOM_RESOURCE) {
            super::go_json::KeyOrder::Sorted
        } else {
            super::go_json::KeyOrder::Struct
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Kind` in the core group, else `Kind.group` (`Job.batch`), as 422 messages name objects.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The qualified name used in error messages, e.g. `jobs.batch`.
    pub fn display_name(&self) -> String {
        self.group_resource().to_string()
    }

    /// The verbs discovery lists: every verb, but create alone for the reviews, which are never
    /// stored (`auth_reviews`), and deletecollection only where it is served.
    fn verbs(&self) -> Value {
        if is_review(self) {
            return json!(["create"]);
        }
        let verbs = [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        json!(
            verbs
                .into_iter()
                .filter(|v| *v != "deletecollection" || self.strategy.delete_collection)
                .collect::<Vec<_>>()
        )
    }

    /// The entry of this resource in an `APIResourceList`.
    pub fn discovery_entry(&self) -> Value {
        let mut entry = json!({
            "name": self.resource,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs(),
        });
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            entry["categories"] = json!(self.categories);
        }
        entry
    }

    /// The entry of this resource in aggregated discovery.
    fn aggregated_entry(&self) -> Value {
        let kind = json!({"group": self.group, "version": self.version, "kind": self.kind});
        let mut entry = json!({
            "resource": self.resource,
            "responseKind": kind,
            "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": self.singular,
            "verbs": self.verbs(),
        });
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            entry["categories"] = json!(self.categories);
        }
        let mut subresources = Vec::new();
        if self.status_subresource {
            subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
        }
        if self.strategy.log_subresource {
            subresources.push(json!({"subresource": "log", "responseKind": {"group": "", "version": "v1", "kind": "Pod"}, "verbs": ["get"]}));
        }
        if self.strategy.exec_subresource {
            subresources.push(json!({"subresource": "exec", "responseKind": {"group": "", "version": "v1", "kind": "PodExecOptions"}, "verbs": ["create", "get"]}));
        }
        if self.strategy.eviction_subresource {
            subresources.push(json!({"subresource": "eviction", "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}, "verbs": ["create"]}));
        }
        if !subresources.is_empty() {
            entry["subresources"] = json!(subresources);
        }
        entry
    }
}

/// The set of served resources; shared by the server and the controllers.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<RwLock<BTreeMap<GroupResource, Arc<ResourceInfo>>>>,
}

impl Registry {
    pub fn insert(&self, info: ResourceInfo) {
        self.inner
            .write()
            .expect("registry lock")
            .insert(info.group_resource(), Arc::new(info));
    }

    pub fn remove(&self, gr: &GroupResource) {
        self.inner.write().expect("registry lock").remove(gr);
    }

    /// The resource served at `group/version` under the plural `resource`.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        let map = self.inner.read().expect("registry lock");
        map.get(&GroupResource::new(group, resource))
            .filter(|info| info.version == version)
            .cloned()
    }

    pub fn get(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        self.inner.read().expect("registry lock").get(gr).cloned()
    }

    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner
            .read()
            .expect("registry lock")
            .values()
            .cloned()
            .collect()
    }

    /// The `/api` document.
    pub fn api_versions(&self) -> Value {
        json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
        ]})
    }

    /// The `/apis` document: every non-core group with its one version.
    pub fn api_group_list(&self) -> Value {
        let mut groups: BTreeMap<String, String> = BTreeMap::new();
        for info in self.all() {
            if !info.group.is_empty() {
                groups.insert(info.group.clone(), info.version.clone());
            }
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(group, version)| {
                let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
                json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// The `/apis/{group}` document, or `None` when no resource is served in that group.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        let version = self
            .all()
            .into_iter()
            .find(|i| i.group == group)?
            .version
            .clone();
        let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
        Some(
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv.clone()], "preferredVersion": gv}),
        )
    }

    /// The `APIResourceList` of one group/version, or `None` when nothing is served there.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let infos: Vec<_> = self
            .all()
            .into_iter()
            .filter(|i| i.group == group && i.version == version)
            .collect();
        if infos.is_empty() {
            return None;
        }
        let mut resources = Vec::new();
        for info in &infos {
            resources.push(info.discovery_entry());
            if info.status_subresource {
                resources.push(json!({"name": format!("{}/status", info.resource), "singularName": "", "namespaced": info.namespaced, "kind": info.kind, "verbs": ["get", "patch", "update"]}));
            }
            if info.strategy.log_subresource {
                resources.push(json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}));
            }
            if info.strategy.exec_subresource {
                resources.push(json!({"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions", "verbs": ["create", "get"]}));
            }
            if info.strategy.eviction_subresource {
                resources.push(json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}));
            }
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        )
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`): every group with
    /// its resources in one document, which kubectl asks for first. `core` selects `/api` (the
    /// legacy group) or `/apis` (all others).
    pub fn aggregated_discovery(&self, core: bool, api_version: &str) -> Value {
        let mut groups: BTreeMap<String, Vec<Arc<ResourceInfo>>> = BTreeMap::new();
        for info in self.all() {
            if info.group.is_empty() == core {
                groups.entry(info.group.clone()).or_default().push(info);
            }
        }
        let items: Vec<Value> = groups
            .into_iter()
            .map(|(group, infos)| {
                let version = infos[0].version.clone();
                let resources: Vec<Value> = infos.iter().map(|i| i.aggregated_entry()).collect();
                let mut metadata = json!({"creationTimestamp": null});
                if !group.is_empty() {
                    metadata["name"] = json!(group);
                }
                json!({
                    "metadata": metadata,
                    "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
                })
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
    }

    /// Registers the served version of a CustomResourceDefinition object; returns what it serves.
    pub fn register_crd(&self, crd: &Value) -> Option<Arc<ResourceInfo>> {
        let info = crd_resource_info(crd)?;
        self.insert(info.clone());
        self.get(&info.group_resource())
    }
}

/// Reads a CRD object (apiextensions.k8s.io/v1) into the resource it serves: its storage version
/// (or first served one), schema, status subresource and printer columns.
pub fn crd_resource_info(crd: &Value) -> Option<ResourceInfo> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let versions = spec.get("versions")?.as_array()?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| {
            versions
                .iter()
                .find(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        })?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = names.get("kind")?.as_str()?.to_string();
    Some(ResourceInfo {
        group: spec.get("group")?.as_str()?.to_string(),
        version: version.get("name")?.as_str()?.to_string(),
        resource: names.get("plural")?.as_str()?.to_string(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        short_names: strings(names.get("shortNames")),
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        status_subresource: version.pointer("/subresources/status").is_some(),
        schema: version.pointer("/schema/openAPIV3Schema").cloned(),
        printer_columns: version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        categories: strings(names.get("categories")),
        strategy: &CUSTOM_RESOURCE,
    })
}

/// Whether `info` is one of the review resources.
pub fn is_review(info: &ResourceInfo) -> bool {
    matches!(
        (info.group.as_str(), info.resource.as_str()),
        (
            "authorization.k8s.io",
            "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
        ) | ("authentication.k8s.io", "selfsubjectreviews")
    )
}

/// The resource infos every controller needs; built in, so always present.
pub(crate) fn builtin(registry: &Registry, group: &str, resource: &str) -> Arc<ResourceInfo> {
    registry
        .get(&GroupResource::new(group, resource))
        .unwrap_or_else(|| panic!("{resource} are built in"))
}
