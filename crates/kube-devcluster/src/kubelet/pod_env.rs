//! A container's environment as the kubelet builds it (k8s.io/kubernetes
//! pkg/kubelet/kubelet_pods.go, `makeEnvironmentVariables`): first every `envFrom` source in
//! order (ConfigMaps and Secrets, each key with the source's `prefix`), then each `env` entry in
//! order, a later one replacing an earlier one of the same name. An `env` value has its `$(VAR)`
//! references expanded against what is defined before it; `valueFrom` reads a ConfigMap key, a
//! Secret key (decoded from base64) or a field of the pod.
//!
//! A source that is missing, and not `optional`, is an error the kubelet reports as the
//! container's waiting reason `CreateContainerConfigError`, with the message built here.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value};

/// Where ConfigMaps and Secrets are read from: `(kind, name) -> the object's data`, as strings
/// (Secret values already decoded), or `None` when it does not exist.
pub(crate) trait Sources {
    fn config_map(&self, name: &str) -> Option<Map<String, Value>>;
    fn secret(&self, name: &str) -> Option<Map<String, Value>>;
}

/// The kubelet's not-found errors come from its watch-based object cache, which names the
/// resource in the singular (pkg/kubelet/configmap and pkg/kubelet/secret:
/// `corev1.Resource("configmap")`, `corev1.Resource("secret")`), hence `configmap "x" not found`.
fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} \"{name}\" not found")
}

fn optional(source: &Value) -> bool {
    source.get("optional").and_then(Value::as_bool) == Some(true)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A Secret's `data` values decoded (invalid base64 is taken as it is).
fn decoded(data: Map<String, Value>) -> Map<String, Value> {
    data.into_iter()
        .map(|(k, v)| {
            let raw = text(&v);
            let value = base64::engine::general_purpose::STANDARD
                .decode(raw.as_bytes())
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or(raw);
            (k, Value::String(value))
        })
        .collect()
}

/// Reads a Secret's `data` through `sources`, decoded.
fn secret_data(sources: &dyn Sources, name: &str) -> Option<Map<String, Value>> {
    sources.secret(name).map(decoded)
}

/// Adds `vars` (the environment so far: `PATH`, `HOSTNAME`, ...) the container's `envFrom` and
/// `env`; `Err` is the kubelet's message for a missing ConfigMap, Secret or key.
pub(crate) fn resolve(
    pod: &Value,
    container: &Value,
    sources: &dyn Sources,
    field_ref: impl Fn(&str) -> String,
    vars: &mut HashMap<String, String>,
) -> Result<(), String> {
    for source in container
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = source.get("prefix").and_then(Value::as_str).unwrap_or("");
        let (reference, data) = if let Some(cm) = source.get("configMapRef") {
            let name = cm.get("name").and_then(Value::as_str).unwrap_or_default();
            (
                cm,
                sources
                    .config_map(name)
                    .ok_or_else(|| not_found("configmap", name)),
            )
        } else if let Some(secret) = source.get("secretRef") {
            let name = secret
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (
                secret,
                secret_data(sources, name).ok_or_else(|| not_found("secret", name)),
            )
        } else {
            continue;
        };
        let data = match data {
            Ok(data) => data,
            Err(_) if optional(reference) => continue,
            Err(message) => return Err(message),
        };
        for (key, value) in data {
            let name = format!("{prefix}{key}");
            // Keys that are not valid variable names are skipped (the kubelet records a
            // warning event, InvalidEnvironmentVariableNames). Since Kubernetes 1.32
            // (RelaxedEnvironmentVariableValidation) any printable ASCII but `=` is valid.
            if name.is_empty()
                || name.contains('=')
                || !name.bytes().all(|b| (32..127).contains(&b))
            {
                continue;
            }
            vars.insert(name, text(&value));
        }
    }
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for var in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = var.get("name").and_then(Value::as_str) else {
            continue;
        };
        let value = match var.get("value") {
            Some(Value::String(value)) if !value.is_empty() => crate::kubelet::expand(value, vars),
            _ => match value_from(var.get("valueFrom"), namespace, sources, &field_ref)? {
                Some(value) => value,
                // An optional source that is missing: the variable is not set at all.
                None => continue,
            },
        };
        vars.insert(name.to_string(), value);
    }
    Ok(())
}

/// The value of one `valueFrom`: `Ok(None)` for an optional source that is missing.
fn value_from(
    source: Option<&Value>,
    namespace: &str,
    sources: &dyn Sources,
    field_ref: &impl Fn(&str) -> String,
) -> Result<Option<String>, String> {
    let Some(source) = source else {
        return Ok(Some(String::new()));
    };
    if let Some(path) = source
        .pointer("/fieldRef/fieldPath")
        .and_then(Value::as_str)
    {
        return Ok(Some(field_ref(path)));
    }
    let keyed = |selector: &Value, resource: &str, kind: &str, data: Option<Map<String, Value>>| {
        let name = selector
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key = selector
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(data) = data else {
            return if optional(selector) {
                Ok(None)
            } else {
                Err(not_found(resource, name))
            };
        };
        match data.get(key) {
            Some(value) => Ok(Some(text(value))),
            None if optional(selector) => Ok(None),
            None => Err(format!(
                "couldn't find key {key} in {kind} {namespace}/{name}"
            )),
        }
    };
    if let Some(selector) = source.get("configMapKeyRef") {
        let name = selector
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return keyed(selector, "configmap", "ConfigMap", sources.config_map(name));
    }
    if let Some(selector) = source.get("secretKeyRef") {
        let name = selector
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return keyed(selector, "secret", "Secret", secret_data(sources, name));
    }
    // resourceFieldRef (limits and requests) and fileKeyRef are not resolved here.
    Ok(Some(String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed(Value);

    impl Sources for Fixed {
        fn config_map(&self, name: &str) -> Option<Map<String, Value>> {
            self.0["configmaps"][name].as_object().cloned()
        }
        fn secret(&self, name: &str) -> Option<Map<String, Value>> {
            self.0["secrets"][name].as_object().cloned()
        }
    }

    fn run(container: Value) -> Result<HashMap<String, String>, String> {
        let sources = Fixed(json!({
            "configmaps": {"cm": {"a": "1", "b": "2", "bad=key": "x"}},
            "secrets": {"s": {"user": "YWRtaW4="}},
        }));
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}});
        let mut vars = HashMap::new();
        resolve(
            &pod,
            &container,
            &sources,
            |path| format!("<{path}>"),
            &mut vars,
        )?;
        Ok(vars)
    }

    #[test]
    fn env_from_then_env_in_order() {
        let vars = run(json!({
            "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "P_"},
                        {"secretRef": {"name": "s"}},
                        {"secretRef": {"name": "gone", "optional": true}}],
            "env": [{"name": "P_a", "value": "over"},
                    {"name": "X", "value": "$(P_b)-$(user)"},
                    {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "O", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "zz", "optional": true}}}],
        }))
        .unwrap();
        assert_eq!(vars["P_a"], "over");
        assert_eq!(vars["P_b"], "2");
        assert_eq!(vars["user"], "admin");
        assert_eq!(vars["X"], "2-admin");
        assert_eq!(vars["F"], "<metadata.name>");
        assert!(!vars.contains_key("O") && !vars.contains_key("P_bad=key"));
    }

    #[test]
    fn missing_sources_say_what_the_kubelet_says() {
        let cases = [
            (
                json!({"envFrom": [{"configMapRef": {"name": "x"}}]}),
                "configmap \"x\" not found",
            ),
            (
                json!({"envFrom": [{"secretRef": {"name": "x"}}]}),
                "secret \"x\" not found",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
                "couldn't find key k in Secret ns/s",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}),
                "couldn't find key k in ConfigMap ns/cm",
            ),
        ];
        for (container, message) in cases {
            assert_eq!(run(container).unwrap_err(), message);
        }
    }
}
