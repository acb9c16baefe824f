//! `/openapi/v2`: the Swagger 2.0 document of everything served, its `definitions` made from
//! the same schemas as the `/openapi/v3` documents ([`crate::apiserver::openapi`]). kubectl reads
//! it, in gnostic's protobuf encoding (github.com/google/gnostic-models openapiv2/OpenAPIv2.proto),
//! for `kubectl explain --output plaintext-openapiv2` and to validate the items of a
//! `kind: List` file; it finds a kind's definition by its `x-kubernetes-group-version-kind`
//! (k8s.io/kube-openapi pkg/util/proto, which refuses the whole document if one definition is
//! not of the shapes it knows, so every schema is converted as the API server converts its
//! own).
//!
//! The conversion from v3 (apiextensions-apiserver pkg/controller/openapi/v2/conversion.go,
//! ToStructuralOpenAPIV2, applied here to every schema): references point at
//! `#/definitions/`; a field's `allOf: [{$ref}]` becomes the `$ref` itself (as the real
//! document writes it); the other junctors (`allOf`, `oneOf`, `anyOf`, `not`) are dropped; a
//! nullable schema loses its type, items and properties; one preserving unknown fields loses
//! its items and properties, and its `object` type; an array left without items loses its
//! type. The document has no paths: kubectl reads only the definitions.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::resources::Registry;
use crate::apiserver::builtin_schemas::{REF_PREFIX, SCHEMAS};
use crate::apiserver::openapi::{self, OBJECT_META};

/// The protobuf media type of `/openapi/v2` (kubectl asks for it as `...spec.v2@v1.0+protobuf`,
/// which is no valid media type to answer with).
const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Where v2 references point.
const V2_REF_PREFIX: &str = "#/definitions/";

/// `/openapi/v2`: protobuf when asked for (as kubectl does), else JSON.
pub fn response(registry: &Registry, headers: &HeaderMap) -> Response {
    let doc = document(registry);
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept.contains("protobuf") {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, OPENAPI_V2_PROTOBUF)],
            encode_document(&doc),
        )
            .into_response()
    } else {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            doc.to_string(),
        )
            .into_response()
    }
}

/// The Swagger 2.0 document: every definition of every served group/version, converted.
pub fn document(registry: &Registry) -> Value {
    let mut definitions = Map::new();
    for (group, version) in openapi::group_versions(registry) {
        let Some(doc) = openapi::document(registry, &group, &version) else {
            continue;
        };
        let Some(Value::Object(schemas)) = doc.pointer("/components/schemas").cloned() else {
            continue;
        };
        for (name, schema) in schemas {
            definitions.insert(name, to_v2(schema));
        }
    }
    // A group/version of custom resources carries a short ObjectMeta of its own; the full one
    // is the built-in definition.
    if let Some(meta) = SCHEMAS.get(OBJECT_META) {
        definitions.insert(OBJECT_META.into(), to_v2(meta.clone()));
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": openapi::KUBERNETES_VERSION},
        "paths": {},
        "definitions": definitions,
    })
}

/// One schema in the shapes OpenAPI v2 and kubectl's parser know (see the module doc).
fn to_v2(schema: Value) -> Value {
    let Value::Object(mut map) = schema else {
        return schema;
    };
    if let Some(Value::String(reference)) = map.get_mut("$ref") {
        if let Some(name) = reference.strip_prefix(REF_PREFIX) {
            *reference = format!("{V2_REF_PREFIX}{name}");
        }
        return Value::Object(map);
    }
    if let Some(Value::Array(all_of)) = map.get("allOf")
        && let [only] = all_of.as_slice()
        && only.get("$ref").is_some()
    {
        let reference = to_v2(only.clone())["$ref"].clone();
        map.remove("allOf");
        map.insert("$ref".into(), reference);
        // A reference has no type of its own (kube-openapi parseReference).
        map.remove("type");
        return Value::Object(map);
    }
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        map.remove(junctor);
    }
    if map.remove("nullable") == Some(Value::Bool(true)) {
        map.remove("type");
        map.remove("items");
        map.remove("properties");
    }
    if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        map.remove("items");
        map.remove("properties");
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.remove("type");
        }
    }
    if map.get("type").and_then(Value::as_str) == Some("array") && !map.contains_key("items") {
        map.remove("type");
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for value in properties.values_mut() {
            *value = to_v2(value.take());
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(value) = map.get_mut(key)
            && value.is_object()
        {
            *value = to_v2(value.take());
        }
    }
    Value::Object(map)
}

/// The document as gnostic's `openapi_v2.Document`: `swagger = 1`, `info = 2` (`title = 1`,
/// `version = 2`), `definitions = 9` (`additional_properties = 1` of `NamedSchema`).
fn encode_document(doc: &Value) -> Vec<u8> {
    let mut out = Proto::default();
    out.string(1, doc["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Proto::default();
    info.string(1, doc["info"]["title"].as_str().unwrap_or_default());
    info.string(2, doc["info"]["version"].as_str().unwrap_or_default());
    out.message(2, info);
    let mut definitions = Proto::default();
    if let Some(map) = doc["definitions"].as_object() {
        for (name, schema) in map {
            definitions.message(1, named_schema(name, schema));
        }
    }
    out.message(9, definitions);
    out.0
}

/// `NamedSchema`: `name = 1`, `value = 2`.
fn named_schema(name: &str, schema: &Value) -> Proto {
    let mut out = Proto::default();
    out.string(1, name);
    out.message(2, encode_schema(schema));
    out
}

/// gnostic's `Schema` message, field by field; `x-` keys are vendor extensions, their values
/// written as YAML (JSON is YAML) in an `Any`.
fn encode_schema(schema: &Value) -> Proto {
    let mut out = Proto::default();
    let Some(map) = schema.as_object() else {
        return out;
    };
    for (key, value) in map {
        match (key.as_str(), value) {
            ("$ref", Value::String(s)) => out.string(1, s),
            ("format", Value::String(s)) => out.string(2, s),
            ("title", Value::String(s)) => out.string(3, s),
            ("description", Value::String(s)) => out.string(4, s),
            ("default", v) => out.message(5, any(v)),
            ("multipleOf", v) => out.double(6, v),
            ("maximum", v) => out.double(7, v),
            ("exclusiveMaximum", Value::Bool(b)) => out.boolean(8, *b),
            ("minimum", v) => out.double(9, v),
            ("exclusiveMinimum", Value::Bool(b)) => out.boolean(10, *b),
            ("maxLength", v) => out.int64(11, v),
            ("minLength", v) => out.int64(12, v),
            ("pattern", Value::String(s)) => out.string(13, s),
            ("maxItems", v) => out.int64(14, v),
            ("minItems", v) => out.int64(15, v),
            ("uniqueItems", Value::Bool(b)) => out.boolean(16, *b),
            ("maxProperties", v) => out.int64(17, v),
            ("minProperties", v) => out.int64(18, v),
            ("required", Value::Array(names)) => {
                for name in names.iter().filter_map(Value::as_str) {
                    out.string(19, name);
                }
            }
            ("enum", Value::Array(values)) => {
                for v in values {
                    out.message(20, any(v));
                }
            }
            ("additionalProperties", v) => {
                // AdditionalPropertiesItem: `oneof {Schema schema = 1; bool boolean = 2}`.
                let mut item = Proto::default();
                match v {
                    Value::Bool(b) => item.boolean_always(2, *b),
                    v => item.message(1, encode_schema(v)),
                }
                out.message(21, item);
            }
            ("type", v) => {
                // TypeItem: `repeated string value = 1`.
                let mut item = Proto::default();
                let types = match v {
                    Value::Array(types) => types.iter().filter_map(Value::as_str).collect(),
                    v => v.as_str().into_iter().collect::<Vec<_>>(),
                };
                for t in types {
                    item.string(1, t);
                }
                out.message(22, item);
            }
            ("items", v) => {
                // ItemsItem: `repeated Schema schema = 1`.
                let mut item = Proto::default();
                match v {
                    Value::Array(schemas) => {
                        for s in schemas {
                            item.message(1, encode_schema(s));
                        }
                    }
                    v => item.message(1, encode_schema(v)),
                }
                out.message(23, item);
            }
            ("properties", Value::Object(properties)) => {
                // Properties: `repeated NamedSchema additional_properties = 1`.
                let mut item = Proto::default();
                for (name, s) in properties {
                    item.message(1, named_schema(name, s));
                }
                out.message(25, item);
            }
            ("discriminator", Value::String(s)) => out.string(26, s),
            ("readOnly", Value::Bool(b)) => out.boolean(27, *b),
            ("example", v) => out.message(30, any(v)),
            (name, v) if name.starts_with("x-") => {
                // NamedAny: `name = 1`, `value = 2`.
                let mut named = Proto::default();
                named.string(1, name);
                named.message(2, any(v));
                out.message(31, named);
            }
            _ => {}
        }
    }
    out
}

/// gnostic's `Any`: the value as YAML text in `yaml = 2`.
fn any(value: &Value) -> Proto {
    let mut out = Proto::default();
    out.string(2, &value.to_string());
    out
}

/// A protobuf message being written: proto3 fields, defaults (empty, zero, false) left out.
#[derive(Default)]
struct Proto(Vec<u8>);

impl Proto {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A sub-message is written even when empty: its presence means something (`type`, a
    /// `properties` of none).
    fn message(&mut self, field: u32, message: Proto) {
        self.bytes(field, &message.0);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            self.boolean_always(field, b);
        }
    }

    /// A bool inside a `oneof`, where `false` is a value too.
    fn boolean_always(&mut self, field: u32, b: bool) {
        self.tag(field, 0);
        self.varint(u64::from(b));
    }

    fn double(&mut self, field: u32, v: &Value) {
        if let Some(f) = v.as_f64().filter(|f| *f != 0.0) {
            self.tag(field, 1);
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }

    fn int64(&mut self, field: u32, v: &Value) {
        if let Some(i) = v.as_i64().filter(|i| *i != 0) {
            self.tag(field, 0);
            self.varint(i as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_junctors_become_what_v2_knows() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "meta": {"allOf": [{"$ref": "#/components/schemas/M"}], "description": "d"},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {}}},
                "maybe": {"type": "string", "nullable": true},
                "list": {"type": "array", "items": {"$ref": "#/components/schemas/I"}},
            }
        });
        assert_eq!(
            to_v2(v3),
            json!({
                "type": "object",
                "properties": {
                    "meta": {"$ref": "#/definitions/M", "description": "d"},
                    "either": {"x-kubernetes-int-or-string": true},
                    "free": {"x-kubernetes-preserve-unknown-fields": true},
                    "maybe": {},
                    "list": {"type": "array", "items": {"$ref": "#/definitions/I"}},
                }
            })
        );
    }

    #[test]
    fn a_schema_is_written_with_gnostics_field_numbers() {
        let schema = json!({"type": "string", "description": "d", "x-k": 1});
        // description = 4, type = 22 (TypeItem value = 1), vendor_extension = 31 (NamedAny
        // name = 1, value = 2: Any yaml = 2); serde_json's map keeps keys sorted.
        let expected = [
            &[0x22, 1, b'd'][..],
            &[0xb2, 0x01, 8, 0x0a, 6],
            b"string",
            &[0xfa, 0x01, 10, 0x0a, 3],
            b"x-k",
            &[0x12, 3, 0x12, 1, b'1'],
        ]
        .concat();
        assert_eq!(encode_schema(&schema).0, expected);
    }
}
