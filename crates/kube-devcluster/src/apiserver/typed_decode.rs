//! What decoding a write into its Go type does to a built-in object on the real API server, done
//! on JSON against the kind's schema ([`crate::apiserver::builtin_schemas`]): unknown fields are
//! dropped and listed (the strict decoder's `unknown field "spec.containers[0].comand"`, which
//! `fieldValidation` turns into an error, a warning or nothing), nulls decode to nothing, and a
//! value of the wrong JSON type is the decoder's error, worded as Go's `encoding/json` words it
//! (`json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type
//! map[string]string`), which the handlers answer with 400 BadRequest.
//!
//! Unlike CRD schemas (`schema`), this covers `metadata` too: it is a Go struct like the rest.
//! k8s.io/apiserver pkg/endpoints/handlers/create.go decodes with the strict serializer of
//! k8s.io/apimachinery pkg/runtime/serializer/json (sigs.k8s.io/json: case-sensitive, unknown
//! fields reported with their full path and list indices).

use std::fmt::Write as _;

use serde_json::Value;

use crate::api::error::{ApiError, FieldError};
use crate::api::resources::ResourceInfo;
use crate::apiserver::builtin_schemas::{BuiltinSchemas, SCHEMAS};

/// What decoding found: the paths of dropped unknown fields.
#[derive(Debug, Default, PartialEq)]
pub struct Decoded {
    pub unknown_fields: Vec<String>,
}

/// Decodes `obj` as the definition `root` (e.g. `io.k8s.api.core.v1.Pod`): drops unknown
/// fields and nulls in place; `Err` is the Go decoder's message for the first value of a
/// wrong type (the object is then left half-pruned: the caller refuses it).
pub fn decode(schemas: &BuiltinSchemas, root: &str, obj: &mut Value) -> Result<Decoded, String> {
    let Some(schema) = schemas.get(root) else {
        return Ok(Decoded::default());
    };
    let mut walk = Walk {
        schemas,
        unknown: Vec::new(),
        path: String::new(),
        go_path: Vec::new(),
    };
    let name = root.rsplit('.').next().unwrap_or(root);
    walk.value(schema, name, obj)?;
    Ok(Decoded {
        unknown_fields: walk.unknown,
    })
}

/// Definitions whose Go types take any JSON (`runtime.RawExtension`, `apiextensions.JSON`,
/// `metav1.FieldsV1`): k8s-openapi describes them as objects, the decoder keeps them as raw bytes.
fn takes_any_json(name: &str) -> bool {
    matches!(
        name,
        "io.k8s.apimachinery.pkg.runtime.RawExtension"
            | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"
            | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
    )
}

struct Walk<'s> {
    schemas: &'s BuiltinSchemas,
    unknown: Vec<String>,
    /// The strict decoder's path: `spec.containers[0].comand`.
    path: String,
    /// Go's `UnmarshalTypeError.Field`: struct field names only, no indices or map keys.
    go_path: Vec<String>,
}

impl Walk<'_> {
    /// Decodes `value` as `schema` (not yet resolved). `owner` is the Go struct the current
    /// field belongs to, as the type error names it.
    fn value(&mut self, schema: &Value, owner: &str, value: &mut Value) -> Result<(), String> {
        let (name, schema) = self.schemas.resolve(schema);
        if name.is_some_and(takes_any_json) {
            return Ok(());
        }
        if schema
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            // intstr.IntOrString and resource.Quantity take a number or a string.
            return match value {
                Value::Number(_) | Value::String(_) => Ok(()),
                other => Err(self.type_error(other, owner, &go_type(name, schema))),
            };
        }
        let expected = schema.get("type").and_then(Value::as_str).unwrap_or("");
        match (expected, &mut *value) {
            ("object", Value::Object(map)) => {
                let struct_name = name.map(short_name);
                let properties = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                let mut drop = Vec::new();
                for (key, child) in map.iter_mut() {
                    let key = key.as_str();
                    let mark = self.path.len();
                    if !self.path.is_empty() {
                        self.path.push('.');
                    }
                    self.path.push_str(key);
                    if child.is_null() {
                        // A null decodes to the field's zero value: nothing is stored.
                        drop.push(key.to_string());
                    } else if let Some(prop) = properties.and_then(|p| p.get(key)) {
                        self.go_path.push(key.to_string());
                        let owner = struct_name.unwrap_or(owner);
                        let result = self.value(prop, owner, child);
                        self.go_path.pop();
                        result?;
                    } else if let Some(additional) = additional {
                        // A map's values: Go names the map field, not the key.
                        let result = self.value(additional, owner, child);
                        result?;
                    } else if properties.is_some() || struct_name.is_some() {
                        self.unknown.push(self.path.clone());
                        drop.push(key.to_string());
                    }
                    self.path.truncate(mark);
                }
                for key in drop {
                    map.remove(&key);
                }
                Ok(())
            }
            ("array", Value::Array(items)) => {
                let item_schema = schema.get("items");
                for (i, item) in items.iter_mut().enumerate() {
                    let mark = self.path.len();
                    let _ = write!(self.path, "[{i}]");
                    let result = match item_schema {
                        Some(item_schema) if !item.is_null() => {
                            self.value(item_schema, owner, item)
                        }
                        _ => Ok(()),
                    };
                    self.path.truncate(mark);
                    result?;
                }
                Ok(())
            }
            ("string", Value::String(s)) => {
                if schema.get("format").and_then(Value::as_str) == Some("byte")
                    && let Some(at) = base64_error(s)
                {
                    // encoding/base64's CorruptInputError, as []byte fields decode.
                    return Err(format!("illegal base64 data at input byte {at}"));
                }
                Ok(())
            }
            ("integer", Value::Number(n)) => {
                let fits = match schema.get("format").and_then(Value::as_str) {
                    Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => n.is_i64() || n.is_u64(),
                };
                if fits {
                    Ok(())
                } else {
                    // strconv fails on the literal: Go names it ("number 1.5").
                    let shown = Value::String(format!("number {n}"));
                    Err(self.type_error(&shown, owner, &go_type(name, schema)))
                }
            }
            ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) | ("", _) => Ok(()),
            (_, other) => Err(self.type_error(other, owner, &go_type(name, schema))),
        }
    }

    /// Go's `UnmarshalTypeError` text: `json: cannot unmarshal <json type> into Go struct field
    /// <Struct>.<field path> of type <Go type>`.
    fn type_error(&self, value: &Value, owner: &str, go_type: &str) -> String {
        let got = match value {
            Value::String(s) if s.starts_with("number ") => s.clone(),
            Value::String(_) => "string".into(),
            Value::Number(_) => "number".into(),
            Value::Bool(_) => "bool".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
            Value::Null => "null".into(),
        };
        if self.go_path.is_empty() {
            format!("json: cannot unmarshal {got} into Go value of type {go_type}")
        } else {
            format!(
                "json: cannot unmarshal {got} into Go struct field {owner}.{} of type {go_type}",
                self.go_path.join(".")
            )
        }
    }
}

/// `PodSpec` from `io.k8s.api.core.v1.PodSpec`.
fn short_name(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The Go type a schema stands for, as Go prints it: `v1.PodSpec`, `[]string`,
/// `map[string]string`, `int32`.
fn go_type(name: Option<&str>, schema: &Value) -> String {
    if let Some(name) = name {
        let mut parts = name.rsplit('.');
        let kind = parts.next().unwrap_or(name);
        return match parts.next() {
            Some(package) => format!("{package}.{kind}"),
            None => kind.to_string(),
        };
    }
    let inner = |key: &str| {
        schema
            .get(key)
            .filter(|s| s.is_object())
            .map(|s| {
                let (name, resolved) = crate::apiserver::builtin_schemas::SCHEMAS.resolve(s);
                go_type(name, resolved)
            })
            .unwrap_or_else(|| "interface {}".into())
    };
    match schema.get("type").and_then(Value::as_str) {
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
            "[]uint8".into()
        }
        Some("string") => "string".into(),
        Some("boolean") => "bool".into(),
        Some("number") => "float64".into(),
        Some("integer") => match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".into(),
            Some("int64") => "int64".into(),
            _ => "int".into(),
        },
        Some("array") => format!("[]{}", inner("items")),
        Some("object") if schema.get("additionalProperties").is_some() => {
            format!("map[string]{}", inner("additionalProperties"))
        }
        _ => "map[string]interface {}".into(),
    }
}

/// Where standard base64 (with padding) is corrupt, as encoding/base64 reports it; `None` when
/// it decodes.
fn base64_error(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    for (quantum, chunk) in bytes.chunks(4).enumerate() {
        let start = quantum * 4;
        let last = start + chunk.len() == bytes.len();
        for (i, &b) in chunk.iter().enumerate() {
            if b == b'=' {
                // Padding only in the last quantum, after at least two characters, and only
                // '=' after it.
                let ok =
                    last && chunk.len() == 4 && i >= 2 && chunk[i..].iter().all(|&c| c == b'=');
                return if ok { None } else { Some(start + i) };
            }
            if !valid(b) {
                return Some(start + i);
            }
        }
        if chunk.len() < 4 {
            // A truncated last quantum: Go reports the offset where input ran out of place.
            return Some(if chunk.len() == 1 { start } else { bytes.len() });
        }
    }
    None
}

/// How a write reached the server: the handlers word a decoding failure differently.
pub enum Write<'a> {
    /// POST or PUT: the body is decoded.
    Body,
    /// PATCH: the patched object is decoded; the closure renders the patch as the error's
    /// value (only called on an error).
    Patch(&'a dyn Fn() -> String),
}

/// `fieldValidation` of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    Ignore,
    Warn,
    Strict,
}

/// A failure to decode the body `obj` of a POST or PUT as the endpoint's kind, worded as
/// `transformDecodeError` (k8s.io/apiserver pkg/endpoints/handlers/rest.go) words it: 400
/// BadRequest `Pod in version "v1" cannot be handled as a Pod: {failure}`.
fn decoding_error(info: &ResourceInfo, obj: &Value, failure: &str) -> ApiError {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (_, version) = split_api_version(obj);
    if kind.is_empty() {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {failure}",
            info.kind
        ))
    } else {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {}: {failure}",
            info.kind
        ))
    }
}

/// The group and version of the body's `apiVersion` (`apps/v1`, or `v1` for the core group).
fn split_api_version(obj: &Value) -> (&str, &str) {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// A POST or PUT body of a built-in kind other than the endpoint's (a Deployment sent to
/// `pods`): the codec decodes it as the kind it names, then cannot convert that into the
/// endpoint's internal type (k8s.io/apimachinery pkg/runtime/serializer/versioning/versioning.go
/// `codec.Decode` converts into the handler's `r.New()`; pkg/conversion/converter.go `Convert`
/// fails with `converting (v1.Deployment) to (core.Pod): unknown conversion`, each type named
/// by its Go package: the version for k8s.io/api, the group's first label for the internal
/// types, `core` for the core group and for events.k8s.io, whose internal type is the core
/// Event). `None` for a kind this server does not serve: left to the caller.
pub fn foreign_kind(info: &ResourceInfo, obj: &Value) -> Option<ApiError> {
    let kind = obj.get("kind").and_then(Value::as_str)?;
    let (group, version) = split_api_version(obj);
    SCHEMAS.kind(group, version, kind)?;
    let internal = match info.group.as_str() {
        "" | "events.k8s.io" => "core",
        group => group.split('.').next().unwrap_or(group),
    };
    let failure = format!(
        "converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
        info.kind
    );
    Some(decoding_error(info, obj, &failure))
}

/// Decodes a write of a built-in kind as the real server does and answers as its handlers do;
/// `Ok` with the warnings to send (`Warn`). Kinds without a built-in schema pass unchanged.
///
/// - POST/PUT (k8s.io/apiserver pkg/endpoints/handlers/create.go and update.go): a strict
///   decoding error under `Strict`, or any type error, goes through `transformDecodeError`
///   (handlers/rest.go): 400 BadRequest `Pod in version "v1" cannot be handled as a Pod: ...`.
/// - PATCH (handlers/patch.go, `applyPatchToObject` and `jsonPatcher`): either is a 422 with no
///   kind or name, the patch as the invalid field `patch`.
/// - `Warn`: one warning per unknown field, `unknown field "spec.containers[0].comand"`
///   (handlers/rest.go `addStrictDecodingWarnings`); `Ignore`: dropped silently.
pub fn admit(
    info: &ResourceInfo,
    obj: &mut Value,
    directive: Directive,
    write: Write<'_>,
) -> Result<Vec<String>, ApiError> {
    let schemas = &*SCHEMAS;
    let Some(root) = schemas.kind(&info.group, &info.version, &info.kind) else {
        return Ok(Vec::new());
    };
    let unknown_fields = |fields: &[String]| -> Vec<String> {
        fields
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect()
    };
    let failure = match decode(schemas, root, obj) {
        Ok(decoded) if decoded.unknown_fields.is_empty() => return Ok(Vec::new()),
        Ok(decoded) => match directive {
            Directive::Ignore => return Ok(Vec::new()),
            Directive::Warn => return Ok(unknown_fields(&decoded.unknown_fields)),
            // runtime.strictDecodingError: "strict decoding error: " and the errors joined.
            Directive::Strict => format!(
                "strict decoding error: {}",
                unknown_fields(&decoded.unknown_fields).join(", ")
            ),
        },
        Err(type_error) => type_error,
    };
    Err(match write {
        Write::Body => decoding_error(info, obj, &failure),
        Write::Patch(render) => ApiError::invalid(
            "",
            "",
            vec![FieldError::invalid(
                "patch",
                format!("Invalid value: {:?}: {failure}", render()),
            )],
        ),
    })
}

/// A JSON value as Go's `fmt.Sprintf("%+v", map[string]interface{})` prints a decoded patch
/// (the value of the `patch` field in a strategic merge patch's error): `map[k:v ...]` with
/// sorted keys, `[a b]` lists, strings bare, `<nil>` for null.
pub fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_print).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": null, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "comand": ["x"],
                      "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                      "ports": [{"containerPort": 80}]}],
                     "restartPolicy": "Never"}
        })
    }

    #[test]
    fn unknown_fields_are_dropped_and_listed_with_their_paths() {
        let mut obj = pod();
        let decoded = decode(&SCHEMAS, "io.k8s.api.core.v1.Pod", &mut obj).unwrap();
        assert_eq!(
            decoded.unknown_fields,
            vec!["metadata.bogus", "spec.containers[0].comand"]
        );
        assert!(obj["spec"]["containers"][0].get("comand").is_none());
        assert!(obj["metadata"].get("creationTimestamp").is_none());
        assert_eq!(
            obj["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            1
        );
        assert_eq!(obj["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn wrong_types_are_the_go_decoders_errors() {
        let cases = [
            (
                "io.k8s.api.core.v1.ConfigMap",
                json!({"metadata": {"labels": "x"}}),
                "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string",
            ),
            (
                "io.k8s.api.core.v1.ConfigMap",
                json!({"data": {"a": 1}}),
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            ),
            (
                "io.k8s.api.core.v1.Pod",
                json!({"spec": {"containers": [{"name": "c", "command": "sleep"}]}}),
                "json: cannot unmarshal string into Go struct field Container.spec.containers.command of type []string",
            ),
            (
                "io.k8s.api.batch.v1.Job",
                json!({"spec": {"backoffLimit": "3"}}),
                "json: cannot unmarshal string into Go struct field JobSpec.spec.backoffLimit of type int32",
            ),
            (
                "io.k8s.api.batch.v1.Job",
                json!({"spec": {"backoffLimit": 1.5}}),
                "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.backoffLimit of type int32",
            ),
            (
                "io.k8s.api.core.v1.Secret",
                json!({"data": {"a": "not base64!"}}),
                "illegal base64 data at input byte 3",
            ),
        ];
        for (root, mut obj, want) in cases {
            assert_eq!(
                decode(&SCHEMAS, root, &mut obj),
                Err(want.to_string()),
                "{obj}"
            );
        }
        let mut ok = json!({"data": {"a": "aGVsbG8="}, "type": "Opaque"});
        assert!(decode(&SCHEMAS, "io.k8s.api.core.v1.Secret", &mut ok).is_ok());
    }

    #[test]
    fn base64_errors_point_at_the_corrupt_byte() {
        assert_eq!(base64_error("aGVsbG8="), None);
        assert_eq!(base64_error("aGVsbA=="), None);
        assert_eq!(base64_error(""), None);
        assert_eq!(base64_error("hello world"), Some(5));
        assert_eq!(base64_error("a=bc"), Some(1));
    }
}
