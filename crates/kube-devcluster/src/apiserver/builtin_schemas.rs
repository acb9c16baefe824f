//! The OpenAPI schemas of the built-in kinds this server stores, generated once (on first use)
//! from k8s-openapi's `schemars` implementations, which k8s-openapi generates from the real API
//! server's own OpenAPI document. One set of definitions, named as the real server names them
//! (`io.k8s.api.core.v1.PodSpec`), referencing each other as `#/components/schemas/<name>`, so
//! the same map serves `/openapi/v3` documents ([`crate::apiserver::openapi`]) and the decoding
//! checks of writes ([`crate::apiserver::typed_decode`]).

use std::sync::LazyLock;

use k8s_openapi::api::{apps, batch, coordination, core, events, rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

/// Where references point (`#/components/schemas/<name>`), as in the real server's OpenAPI v3.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// Every definition, and the definition name of each served built-in kind.
pub struct BuiltinSchemas {
    pub definitions: Map<String, Value>,
    /// (group, version, kind) -> definition name.
    kinds: Vec<((&'static str, &'static str, &'static str), String)>,
}

/// The generated schemas, shared by every cluster in the process (they never change).
pub static SCHEMAS: LazyLock<BuiltinSchemas> = LazyLock::new(BuiltinSchemas::generate);

impl BuiltinSchemas {
    fn generate() -> Self {
        // OpenAPI 3.0 settings: `$ref`s with siblings (a field's description) become
        // `allOf: [{$ref}]`, as in the real server's documents, which kubectl explain reads.
        let mut generator = SchemaSettings::openapi3().into_generator();
        let mut kinds = Vec::new();
        fn add<T: JsonSchema>(
            generator: &mut SchemaGenerator,
            kinds: &mut Vec<((&'static str, &'static str, &'static str), String)>,
            gvk: (&'static str, &'static str, &'static str),
        ) {
            generator.subschema_for::<T>();
            kinds.push((gvk, T::schema_name().into_owned()));
        }
        let g = &mut generator;
        let k = &mut kinds;
        add::<core::v1::Namespace>(g, k, ("", "v1", "Namespace"));
        add::<core::v1::Pod>(g, k, ("", "v1", "Pod"));
        add::<core::v1::Node>(g, k, ("", "v1", "Node"));
        add::<core::v1::Event>(g, k, ("", "v1", "Event"));
        add::<core::v1::ConfigMap>(g, k, ("", "v1", "ConfigMap"));
        add::<core::v1::Secret>(g, k, ("", "v1", "Secret"));
        add::<core::v1::PersistentVolumeClaim>(g, k, ("", "v1", "PersistentVolumeClaim"));
        add::<core::v1::ServiceAccount>(g, k, ("", "v1", "ServiceAccount"));
        add::<core::v1::Service>(g, k, ("", "v1", "Service"));
        add::<batch::v1::Job>(g, k, ("batch", "v1", "Job"));
        add::<apps::v1::Deployment>(g, k, ("apps", "v1", "Deployment"));
        add::<events::v1::Event>(g, k, ("events.k8s.io", "v1", "Event"));
        add::<coordination::v1::Lease>(g, k, ("coordination.k8s.io", "v1", "Lease"));
        add::<rbac::v1::Role>(g, k, ("rbac.authorization.k8s.io", "v1", "Role"));
        add::<rbac::v1::RoleBinding>(g, k, ("rbac.authorization.k8s.io", "v1", "RoleBinding"));
        add::<rbac::v1::ClusterRole>(g, k, ("rbac.authorization.k8s.io", "v1", "ClusterRole"));
        add::<rbac::v1::ClusterRoleBinding>(
            g,
            k,
            ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        );
        add::<CustomResourceDefinition>(
            g,
            k,
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        );
        let definitions = generator.take_definitions(true);
        Self { definitions, kinds }
    }

    /// The definition name of a served built-in kind.
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .iter()
            .find(|((g, v, k), _)| *g == group && *v == version && *k == kind)
            .map(|(_, name)| name.as_str())
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.definitions.get(name)
    }

    /// Follows a reference (`{"$ref"}` or the `allOf: [{"$ref"}]` form of a described field) to
    /// its definition; the name of the definition, if any, and the schema to apply.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> (Option<&'a str>, &'a Value) {
        let reference = schema.get("$ref").or_else(|| {
            schema
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|all| all.len() == 1)
                .and_then(|all| all[0].get("$ref"))
        });
        match reference
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(REF_PREFIX))
        {
            Some(name) => match self.definitions.get(name) {
                Some(target) => (Some(name), target),
                None => (None, schema),
            },
            None => (None, schema),
        }
    }

    /// The names of the definitions `roots` use, directly or through others (for a document
    /// that carries only what its kinds need).
    pub fn reachable(&self, roots: &[&str]) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
        while let Some(name) = todo.pop() {
            if seen.contains(&name) {
                continue;
            }
            if let Some(schema) = self.definitions.get(&name) {
                collect_refs(schema, &mut todo);
            }
            seen.push(name);
        }
        seen.sort();
        seen
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "$ref"
                    && let Some(name) = child.as_str().and_then(|r| r.strip_prefix(REF_PREFIX))
                {
                    out.push(name.to_string());
                } else {
                    collect_refs(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_refs(i, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_resolve_to_their_definitions_with_references_between_them() {
        let schemas = &*SCHEMAS;
        let pod = schemas.kind("", "v1", "Pod").unwrap();
        assert_eq!(pod, "io.k8s.api.core.v1.Pod");
        let spec = &schemas.get(pod).unwrap()["properties"]["spec"];
        let (name, resolved) = schemas.resolve(spec);
        assert_eq!(name, Some("io.k8s.api.core.v1.PodSpec"));
        assert!(resolved["properties"]["containers"].is_object());
        let reachable = schemas.reachable(&["io.k8s.api.batch.v1.Job"]);
        assert!(reachable.contains(&"io.k8s.api.core.v1.Container".to_string()));
        assert!(!reachable.contains(&"io.k8s.api.rbac.v1.Role".to_string()));
        assert!(schemas.kind("", "v1", "Widget").is_none());
    }
}
