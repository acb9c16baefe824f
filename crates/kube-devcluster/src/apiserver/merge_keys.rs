//! How each field of a stored object merges, for strategic merge patch and server-side apply: the
//! merge key and patch strategy of its lists (`patchMergeKey`/`patchStrategy` tags of the
//! k8s.io/api types, published as `x-kubernetes-patch-merge-key`/`x-kubernetes-patch-strategy`
//! in the OpenAPI spec) and their list type (`+listType`/`+listMapKey`, published as
//! `x-kubernetes-list-type`/`x-kubernetes-list-map-keys`).
//!
//! Built-in kinds are described by a small table of our own, written from the k8s.io/api types
//! (core/v1, batch/v1, apps/v1 `types.go`) for the fields those kinds carry here; a custom
//! resource by its CRD's structural schema and its extensions. A field neither knows is
//! untyped: objects merge key by key, lists are replaced whole (atomic), as the real server
//! treats lists without a strategy.

use serde_json::Value;

use crate::api::resources::ResourceInfo;

/// The type of a value: a named built-in type from the table, a node of a CRD schema, or
/// nothing known.
#[derive(Debug, Clone, Copy)]
pub enum Shape<'a> {
    Builtin(&'static str),
    Schema(&'a Value),
    Untyped,
}

/// How a list merges under server-side apply (sigs.k8s.io/structured-merge-diff schema
/// `ElementRelationship`): replaced whole, a set of scalars, or a map keyed by some fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType<'a> {
    Atomic,
    Set,
    Map(Vec<&'a str>),
}

/// What the schema says of one field.
#[derive(Debug, Clone)]
pub struct Field<'a> {
    /// The type of the value, or of each item of a list.
    pub shape: Shape<'a>,
    /// Server-side apply's list type (lists only).
    pub list: ListType<'a>,
    /// Strategic merge patch: the key list items merge on (`patchMergeKey`).
    pub merge_key: Option<&'a str>,
    /// Strategic merge patch: `patchStrategy` includes `merge` (lists merge instead of being
    /// replaced; for lists of scalars, a set union).
    pub merge: bool,
    /// Strategic merge patch: `patchStrategy` includes `retainKeys`. Kept as the Go types declare
    /// it; the patch reads only a patch's own `$retainKeys` directive ([`super::patch`]).
    #[allow(dead_code)]
    pub retain_keys: bool,
    /// Server-side apply: a map owned as a whole (`x-kubernetes-map-type: atomic`).
    pub atomic_map: bool,
}

impl<'a> Field<'a> {
    fn of(shape: Shape<'a>) -> Self {
        Field {
            shape,
            list: ListType::Atomic,
            merge_key: None,
            merge: false,
            retain_keys: false,
            atomic_map: false,
        }
    }
}

// Constructors for the built-in table.
fn typed(ty: &'static str) -> Field<'static> {
    Field::of(Shape::Builtin(ty))
}

/// A list of objects merged on `key` by strategic merge patch and keyed by `map_keys` for apply.
fn keyed(ty: &'static str, key: &'static str, map_keys: &[&'static str]) -> Field<'static> {
    Field {
        list: ListType::Map(map_keys.to_vec()),
        merge_key: Some(key),
        merge: true,
        ..typed(ty)
    }
}

/// Merged on `key` by strategic merge patch, but atomic for apply (`+listType=atomic`).
fn keyed_atomic(ty: &'static str, key: &'static str) -> Field<'static> {
    Field {
        merge_key: Some(key),
        merge: true,
        ..typed(ty)
    }
}

impl<'a> Shape<'a> {
    /// The shape of a whole object of this resource.
    pub fn root(info: &'a ResourceInfo) -> Shape<'a> {
        if let Some(schema) = &info.schema {
            return Shape::Schema(schema);
        }
        Shape::Builtin(match (info.group.as_str(), info.kind.as_str()) {
            ("", "Pod") => "Pod",
            ("", "Namespace") => "Namespace",
            ("", "Service") => "Service",
            ("", "ServiceAccount") => "ServiceAccount",
            ("batch", "Job") => "Job",
            ("apps", "Deployment") => "Deployment",
            _ => "Object",
        })
    }

    /// What the schema says of the field `name` of an object of this shape.
    pub fn field(&self, name: &str) -> Field<'a> {
        match self {
            Shape::Builtin(ty) => builtin(ty, name).unwrap_or_else(|| Field::of(Shape::Untyped)),
            // A CRD's schema rarely describes metadata; it is ObjectMeta all the same.
            Shape::Schema(schema)
                if name == "metadata"
                    && schema.pointer("/properties/metadata/properties").is_none() =>
            {
                typed("ObjectMeta")
            }
            Shape::Schema(schema) => schema_field(schema, name),
            Shape::Untyped => Field::of(Shape::Untyped),
        }
    }

    /// Whether this is a struct with declared fields (server-side apply owns its fields one by
    /// one, not the struct itself) rather than a map of free keys (labels) or unknown.
    pub fn is_struct(&self) -> bool {
        match self {
            Shape::Builtin(ty) => !matches!(*ty, "" | "Map"),
            Shape::Schema(schema) => schema.get("properties").is_some(),
            Shape::Untyped => false,
        }
    }
}

/// The table of built-in types: only the fields that are not plain (typed objects on the way to
/// a keyed list, and the lists themselves). Cited from k8s.io/api at the tags named.
fn builtin(ty: &str, name: &str) -> Option<Field<'static>> {
    Some(match (ty, name) {
        // Every kind: ObjectMeta. labels/annotations are maps of free keys.
        (_, "metadata") if ty != "ObjectMeta" => typed("ObjectMeta"),
        // meta/v1 types.go: ownerReferences patchMergeKey uid, listType map, listMapKey uid;
        // finalizers patchStrategy merge, listType set.
        ("ObjectMeta", "ownerReferences") => keyed("", "uid", &["uid"]),
        ("ObjectMeta", "finalizers") => Field {
            list: ListType::Set,
            merge: true,
            ..typed("")
        },
        ("ObjectMeta", "labels" | "annotations") => typed("Map"),
        ("Pod", "spec") => typed("PodSpec"),
        ("Pod", "status") => typed("PodStatus"),
        ("Job", "spec") => typed("JobSpec"),
        ("Job", "status") => typed("JobStatus"),
        ("Deployment", "spec") => typed("DeploymentSpec"),
        ("Deployment", "status") => typed("DeploymentStatus"),
        ("Namespace", "status") => typed("NamespaceStatus"),
        ("Service", "spec") => typed("ServiceSpec"),
        ("Service", "status") => typed("ServiceStatus"),
        ("JobSpec" | "DeploymentSpec", "template") => typed("PodTemplateSpec"),
        // meta/v1 types.go: LabelSelector is `+structType=atomic`.
        ("JobSpec" | "DeploymentSpec", "selector") => Field {
            atomic_map: true,
            ..typed("LabelSelector")
        },
        ("PodTemplateSpec", "spec") => typed("PodSpec"),
        // apps/v1 types.go: DeploymentSpec.strategy patchStrategy retainKeys.
        ("DeploymentSpec", "strategy") => Field {
            retain_keys: true,
            ..typed("DeploymentStrategy")
        },
        // core/v1 types.go, PodSpec.
        ("PodSpec", "containers" | "initContainers" | "ephemeralContainers") => {
            keyed("Container", "name", &["name"])
        }
        // volumes and resourceClaims: patchStrategy "merge,retainKeys", merge key name.
        ("PodSpec", "volumes" | "resourceClaims") => Field {
            retain_keys: true,
            ..keyed("Volume", "name", &["name"])
        },
        ("PodSpec", "imagePullSecrets" | "schedulingGates") => keyed("", "name", &["name"]),
        ("PodSpec", "hostAliases") => keyed("", "ip", &["ip"]),
        ("PodSpec", "topologySpreadConstraints") => {
            keyed("", "topologyKey", &["topologyKey", "whenUnsatisfiable"])
        }
        ("PodSpec", "nodeSelector") => typed("Map"),
        // core/v1 types.go, Container.
        ("Container", "ports") => keyed("", "containerPort", &["containerPort", "protocol"]),
        ("Container", "env") => keyed("", "name", &["name"]),
        ("Container", "volumeMounts") => keyed("", "mountPath", &["mountPath"]),
        ("Container", "volumeDevices") => keyed("", "devicePath", &["devicePath"]),
        // PodStatus.conditions: patchMergeKey type, listType map; podIPs/hostIPs on ip.
        ("PodStatus" | "DeploymentStatus" | "NamespaceStatus" | "ServiceStatus", "conditions") => {
            keyed("", "type", &["type"])
        }
        ("PodStatus", "podIPs" | "hostIPs") => keyed("", "ip", &["ip"]),
        // batch/v1 types.go: JobStatus.conditions patchMergeKey type, but +listType=atomic.
        ("JobStatus", "conditions") => keyed_atomic("", "type"),
        ("ServiceSpec", "ports") => keyed("", "port", &["port", "protocol"]),
        ("ServiceSpec", "selector") => typed("Map"),
        ("ServiceAccount", "secrets") => keyed("", "name", &["name"]),
        ("Object", "data" | "stringData" | "binaryData") => typed("Map"),
        _ => return None,
    })
}

/// A field of a CRD's structural schema node: its extensions give the list type and map keys
/// (apiextensions-apiserver publishes them to the apply machinery). CRDs have no strategic merge
/// patch (the server refuses it), so only the apply side is filled in.
fn schema_field<'a>(schema: &'a Value, name: &str) -> Field<'a> {
    let node = schema
        .get("properties")
        .and_then(|p| p.get(name))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
    let Some(node) = node else {
        return Field::of(Shape::Untyped);
    };
    let is_list = node.get("type").and_then(Value::as_str) == Some("array");
    let value_node = if is_list {
        node.get("items").unwrap_or(&Value::Null)
    } else {
        node
    };
    let shape = if value_node.is_object() {
        Shape::Schema(value_node)
    } else {
        Shape::Untyped
    };
    // apiextensions v1 types_jsonschema.go: x-kubernetes-list-type atomic (the default), set,
    // map with x-kubernetes-list-map-keys; x-kubernetes-map-type granular or atomic.
    let list = match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default(),
        ),
        _ => ListType::Atomic,
    };
    Field {
        shape,
        list,
        atomic_map: node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
        ..Field::of(Shape::Untyped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ports_merge_on_container_port_and_are_keyed_with_protocol() {
        let container = Shape::Builtin("PodSpec").field("containers").shape;
        let ports = container.field("ports");
        assert_eq!(ports.merge_key, Some("containerPort"));
        assert_eq!(ports.list, ListType::Map(vec!["containerPort", "protocol"]));
        assert!(
            Shape::Builtin("Job")
                .field("status")
                .shape
                .field("conditions")
                .list
                == ListType::Atomic
        );
    }
}
