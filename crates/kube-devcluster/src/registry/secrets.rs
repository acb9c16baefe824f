//! What the API server does to every Secret it is sent (create, update, patch, apply) before it
//! validates and stores it: `stringData` folded into base64 `data`, and `type` defaulted.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::api::strategy::{FieldLabels, Strategy};

/// A Secret's rules: its field labels (pkg/apis/core/v1/conversion.go) and what decoding does
/// to it ([`normalize`]).
pub static STRATEGY: Strategy = Strategy {
    field_labels: Some(FieldLabels::of(&[
        "type",
        "metadata.namespace",
        "metadata.name",
    ])),
    decode: normalize,
    validate: super::validation::secret,
    ..Strategy::DEFAULT
};

/// Normalizes a core/v1 Secret `obj`.
///
/// - k8s.io/kubernetes pkg/apis/core/v1/conversion.go (`Convert_v1_Secret_To_core_Secret`):
///   `stringData` is a write-only convenience; each of its entries is written into `data`
///   (base64 on the wire), overwriting an entry of the same key, and `stringData` itself is
///   never stored. It is part of decoding, so every verb that sends an object gets it.
/// - pkg/apis/core/v1/defaults.go (`SetDefaults_Secret`): an empty `type` is `Opaque`.
pub fn normalize(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if let Some(string_data) = map.remove("stringData")
        && let Value::Object(entries) = string_data
        && !entries.is_empty()
    {
        if !map.get("data").is_some_and(Value::is_object) {
            map.insert("data".into(), Value::Object(Map::new()));
        }
        let data = map
            .get_mut("data")
            .and_then(Value::as_object_mut)
            .expect("just made an object");
        for (key, value) in entries {
            let text = match value {
                Value::String(s) => s,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            data.insert(
                key,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
    if map
        .get("type")
        .is_none_or(|t| t.is_null() || t.as_str() == Some(""))
    {
        map.insert("type".into(), json!("Opaque"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::{GroupResource, Registry, ResourceInfo};

    fn info(resource: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::with_builtins()
            .get(&GroupResource::new("", resource))
            .unwrap()
    }

    #[test]
    fn string_data_wins_and_goes() {
        let mut secret = json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"a": "b"}});
        (info("secrets").strategy.decode)(&mut secret);
        assert_eq!(
            secret,
            json!({"data": {"a": "Yg==", "b": "eQ=="}, "type": "Opaque"})
        );
        let mut typed = json!({"type": "kubernetes.io/tls", "stringData": {"k": ""}});
        (info("secrets").strategy.decode)(&mut typed);
        assert_eq!(
            typed,
            json!({"type": "kubernetes.io/tls", "data": {"k": ""}})
        );
    }

    #[test]
    fn other_kinds_are_untouched() {
        let mut cm = json!({"stringData": {"a": "b"}});
        (info("configmaps").strategy.decode)(&mut cm);
        assert_eq!(cm, json!({"stringData": {"a": "b"}}));
    }
}
