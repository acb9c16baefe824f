//! The built-in kinds this server serves (what this project and `kubectl apply -f deploy/`
//! need), each with its strategy, and the strategies of the kinds with no module of their own.
//! A kind's rules are added to its strategy: the generic parts of the control plane read them
//! from there.

use kube_schema_check::object_meta::NameRule;

use super::{events, jobs, pod_defaults, pods, secrets, services, validation};
use crate::api::resources::{Registry, ResourceInfo};
use crate::api::strategy::{FieldLabels, Strategy};

/// A Namespace's rules: a delete answers the namespace and there is no delete of the collection
/// (pkg/registry/core/namespace/storage/storage.go: `ReturnDeletedObject`, a REST without
/// `DeleteCollection`), its name is a DNS label (pkg/apis/core/validation
/// `ValidateNamespace`), its field labels are pkg/apis/core/v1/conversion.go's.
pub static NAMESPACES: Strategy = Strategy {
    delete_returns_object: true,
    delete_collection: false,
    name_rule: NameRule::Label,
    field_labels: Some(FieldLabels::of(&["status.phase", "metadata.name"])),
    ..Strategy::DEFAULT
};

/// A Node's rules: its field labels are pkg/apis/core/v1/conversion.go's; `spec.unschedulable`
/// selects on `fmt.Sprint(node.Spec.Unschedulable)`, `false` when absent
/// (pkg/registry/core/node/strategy.go, `NodeToSelectableFields`).
pub static NODES: Strategy = Strategy {
    field_labels: Some(FieldLabels {
        labels: &["metadata.name", "spec.unschedulable"],
        paths: &[],
        absent: &[("spec.unschedulable", "false")],
        refusal_names: None,
    }),
    ..Strategy::DEFAULT
};

/// A ServiceAccount's rules: a delete answers the account
/// (pkg/registry/core/serviceaccount/storage/storage.go `ReturnDeletedObject`).
pub static SERVICE_ACCOUNTS: Strategy = Strategy {
    delete_returns_object: true,
    ..Strategy::DEFAULT
};

/// A Deployment's rules: it keeps `metadata.generation` (pkg/registry/apps/deployment/strategy.go
/// `PrepareForCreate`), `kubectl get all` lists it (storage/storage.go `Categories`), every
/// write gets its own and its pod template's defaults ([`pod_defaults`]).
pub static DEPLOYMENTS: Strategy = Strategy {
    tracks_generation: true,
    categories: &["all"],
    decode: pod_defaults::deployment_and_template,
    validate: validation::deployment,
    ..Strategy::DEFAULT
};

/// A CustomResourceDefinition's rules (k8s.io/apiextensions-apiserver
/// pkg/registry/customresourcedefinition): it keeps `metadata.generation` (strategy.go
/// `PrepareForCreate`) and is in the `api-extensions` category (etcd.go `Categories`). Its first
/// delete answers the CRD marked for deletion (etcd.go `Delete` adds the cleanup finalizer);
/// this server cleans up at once, so the removed CRD is that answer.
pub static CUSTOM_RESOURCE_DEFINITIONS: Strategy = Strategy {
    tracks_generation: true,
    delete_returns_object: true,
    categories: &["api-extensions"],
    validate: validation::custom_resource_definition,
    ..Strategy::DEFAULT
};

/// A ConfigMap's rules: its size and, once immutable, its data are checked
/// (pkg/registry/core/configmap/strategy.go `Validate`, `ValidateUpdate`).
pub static CONFIG_MAPS: Strategy = Strategy {
    validate: validation::config_map,
    ..Strategy::DEFAULT
};

/// A built-in resource: (group, version, plural, kind, namespaced, status subresource, short
/// names, strategy).
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    &'static [&'static str],
    &'static Strategy,
);

const BUILTINS: &[Builtin] = &[
    // The reviews of `kubectl auth can-i` and `whoami` (answered by `auth_reviews`, never stored).
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        true,
        &["ns"],
        &NAMESPACES,
    ),
    (
        "",
        "v1",
        "pods",
        "Pod",
        true,
        true,
        &["po"],
        &pods::STRATEGY,
    ),
    ("", "v1", "nodes", "Node", false, true, &["no"], &NODES),
    (
        "",
        "v1",
        "events",
        "Event",
        true,
        false,
        &["ev"],
        &events::CORE_STRATEGY,
    ),
    (
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        true,
        false,
        &["cm"],
        &CONFIG_MAPS,
    ),
    (
        "",
        "v1",
        "secrets",
        "Secret",
        true,
        false,
        &[],
        &secrets::STRATEGY,
    ),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        true,
        &["pvc"],
        &Strategy::DEFAULT,
    ),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        false,
        &["sa"],
        &SERVICE_ACCOUNTS,
    ),
    (
        "",
        "v1",
        "services",
        "Service",
        true,
        true,
        &["svc"],
        &services::STRATEGY,
    ),
    (
        "batch",
        "v1",
        "jobs",
        "Job",
        true,
        true,
        &[],
        &jobs::STRATEGY,
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        true,
        &["deploy"],
        &DEPLOYMENTS,
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        false,
        &["ev"],
        &events::EVENTS_V1_STRATEGY,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        false,
        &[],
        &Strategy::DEFAULT,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
        &["crd", "crds"],
        &CUSTOM_RESOURCE_DEFINITIONS,
    ),
];

impl Registry {
    /// A registry with the built-in kinds.
    pub fn with_builtins() -> Self {
        let registry = Self::default();
        for &(group, version, resource, kind, namespaced, status, short, strategy) in BUILTINS {
            registry.insert(ResourceInfo {
                group: group.into(),
                version: version.into(),
                resource: resource.into(),
                singular: kind.to_lowercase(),
                kind: kind.into(),
                short_names: short.iter().map(|s| s.to_string()).collect(),
                namespaced,
                status_subresource: status,
                schema: None,
                printer_columns: Vec::new(),
                categories: strategy.categories.iter().map(|c| c.to_string()).collect(),
                strategy,
            });
        }
        registry
    }
}
