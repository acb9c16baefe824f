//! Structural OpenAPI v3 schemas of CustomResourceDefinitions, applied as the real API server
//! applies them to every create and update of a custom object: nulls of non-nullable fields are
//! dropped, unknown fields pruned (unless `x-kubernetes-preserve-unknown-fields`), `default`s
//! filled in at any depth, and the result validated, each problem a [`FieldError`] with its field
//! path (`spec.containers[0].stepName`). The server calls [`normalize`], then [`validate`], then
//! [`validate_rules`] (the CEL rules of `x-kubernetes-validations`, [`rules`]);
//! `metadata` is the server's own and left alone.
//!
//! Messages follow the real server's wording (kube-openapi's validator as the apiextensions server
//! reports it), so a test written against kind reads the same errors here.

use std::fmt::Write as _;
use std::sync::Mutex;

use regex::Regex;
use serde_json::{Map, Value};

use crate::field_error::FieldError;

pub mod rules;

/// What [`normalize`] changed that the caller may have to report: the paths of pruned unknown
/// fields (`fieldValidation=Strict` refuses them, `Warn` warns about them).
#[derive(Debug, Default, PartialEq)]
pub struct Normalized {
    pub unknown_fields: Vec<String>,
}

/// Drops nulls of non-nullable fields, prunes unknown fields and applies defaults, in that order
/// (as the real server does: a pruned or null field gets its default).
pub fn normalize(schema: &Value, obj: &mut Value) -> Normalized {
    let mut out = Normalized::default();
    let mut path = String::new();
    prune(schema, obj, &mut path, true, &mut out.unknown_fields);
    apply_defaults(schema, obj);
    out
}

/// Validates an object against its schema; `metadata` (of the object and of embedded resources)
/// is not the schema's to check.
pub fn validate(schema: &Value, obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut path = String::new();
    Validator {
        errors: &mut errors,
    }
    .check(schema, obj, &mut path, true);
    errors
}

/// Adds the problems of the schema's CEL rules (`x-kubernetes-validations`) for a create (`old`
/// is `None`) or an update to `errors`, the problems found so far (metadata and [`validate`]).
/// As on the real server, the rules do not run when those include a missing, wrongly typed,
/// unsupported or too large value: one cause says so instead.
pub fn validate_rules(
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    if rules::blocked_by(errors) {
        if rules::has_rules(schema) {
            errors.push(rules::not_checked());
        }
    } else {
        errors.extend(rules::validate(schema, obj, old));
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn preserves_unknown(schema: &Value) -> bool {
    flag(schema, "x-kubernetes-preserve-unknown-fields")
}

/// Appends `.key` (or `key` at the root) to a path.
fn push_field(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn push_index(path: &mut String, index: usize) {
    let _ = write!(path, "[{index}]");
}

/// The fields the schema declares beside the field at `path` (as [`normalize`] reports an
/// unknown one: `spec.containers[0].dependencies`), for a "did you mean" of a misspelt field;
/// empty when the path does not lead through the schema.
pub fn sibling_fields(schema: &Value, path: &str) -> Vec<String> {
    let mut parent = schema;
    let segments: Vec<&str> = path.split('.').collect();
    for segment in &segments[..segments.len().saturating_sub(1)] {
        let (key, indexes) = segment.split_once('[').unwrap_or((segment, ""));
        let Some(Some(child)) = property_schema(parent, key) else {
            return Vec::new();
        };
        parent = child;
        for _ in indexes.matches(']') {
            let Some(items) = parent.get("items") else {
                return Vec::new();
            };
            parent = items;
        }
    }
    (parent.get("properties").and_then(Value::as_object))
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// The schema of a map's value under `key`: a declared property, else `additionalProperties`
/// when it is a schema. `Some(None)` means allowed without a schema (`additionalProperties: true`).
pub(crate) fn property_schema<'a>(schema: &'a Value, key: &str) -> Option<Option<&'a Value>> {
    if let Some(prop) = schema.get("properties").and_then(|p| p.get(key)) {
        return Some(Some(prop));
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(true)) => Some(None),
        Some(additional @ Value::Object(_)) => Some(Some(additional)),
        _ => None,
    }
}

fn prune(
    schema: &Value,
    value: &mut Value,
    path: &mut String,
    root: bool,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
            let preserve = preserves_unknown(schema);
            let mut drop = Vec::new();
            for (key, child) in map.iter_mut() {
                let mark = path.len();
                push_field(path, key);
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    // The server's own fields; metadata is validated by the server, not the schema.
                } else {
                    match property_schema(schema, key) {
                        Some(Some(child_schema)) => {
                            if child.is_null() && !flag(child_schema, "nullable") {
                                drop.push(key.clone());
                            } else {
                                prune(child_schema, child, path, false, unknown);
                            }
                        }
                        Some(None) => {}
                        None if preserve => {}
                        None => {
                            unknown.push(path.clone());
                            drop.push(key.clone());
                        }
                    }
                }
                path.truncate(mark);
            }
            for key in drop {
                map.remove(&key);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let mark = path.len();
                    push_index(path, i);
                    prune(item_schema, item, path, false, unknown);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, prop) in properties {
                    if !map.contains_key(key)
                        && let Some(default) = prop.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if let Some(prop) = properties.get(key) {
                        apply_defaults(prop, child);
                    }
                }
            }
            if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
                for (key, child) in map.iter_mut() {
                    if schema.pointer(&format!("/properties/{key}")).is_none() {
                        apply_defaults(additional, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name the validator reports for a value.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    }
}

/// A value as Go's `field.Error` prints it: strings quoted, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

struct Validator<'e> {
    errors: &'e mut Vec<FieldError>,
}

impl Validator<'_> {
    fn invalid(&mut self, path: &str, value: &Value, detail: String) {
        self.errors.push(FieldError::invalid(
            path,
            format!("Invalid value: {}: {detail}", shown(value)),
        ));
    }

    /// Whether `value` satisfies `schema` (for `anyOf`, `oneOf` and `not`).
    fn passes(schema: &Value, value: &Value, path: &str) -> bool {
        let mut errors = Vec::new();
        let mut path = path.to_string();
        Validator {
            errors: &mut errors,
        }
        .check(schema, value, &mut path, false);
        errors.is_empty()
    }

    fn check(&mut self, schema: &Value, value: &Value, path: &mut String, root: bool) {
        let shown_path = if path.is_empty() {
            "<root>"
        } else {
            path.as_str()
        };
        if value.is_null() {
            if flag(schema, "nullable") {
                return;
            }
            if let Some(expected) = schema.get("type").and_then(Value::as_str) {
                self.errors.push(FieldError::type_invalid(
                    path.as_str(),
                    format!(
                        "Invalid value: \"null\": {shown_path} in body must be of type {expected}: \"null\""
                    ),
                ));
            }
            return;
        }
        if flag(schema, "x-kubernetes-int-or-string") {
            if !(is_integer(value) || value.is_string()) {
                self.errors.push(FieldError::type_invalid(
                    path.as_str(),
                    format!(
                        "Invalid value: {}: {shown_path} in body must be of type integer or string: {:?}",
                        shown(value),
                        type_name(value)
                    ),
                ));
                return;
            }
        } else if let Some(expected) = schema.get("type").and_then(Value::as_str)
            && !type_matches(expected, value)
        {
            self.errors.push(FieldError::type_invalid(
                path.as_str(),
                format!(
                    "Invalid value: {:?}: {shown_path} in body must be of type {expected}: {:?}",
                    type_name(value),
                    type_name(value)
                ),
            ));
            return;
        }
        if let Some(Value::Array(allowed)) = schema.get("enum")
            && !allowed.contains(value)
        {
            let supported: Vec<String> = allowed.iter().map(shown).collect();
            self.errors.push(FieldError::not_supported(
                path.as_str(),
                format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(value),
                    supported.join(", ")
                ),
            ));
        }
        match value {
            Value::String(s) => self.check_string(schema, value, s, path),
            Value::Number(_) => self.check_number(schema, value, path),
            Value::Array(items) => self.check_array(schema, items, path),
            Value::Object(map) => self.check_object(schema, map, path, root),
            _ => {}
        }
        self.check_combinators(schema, value, path);
    }

    fn check_string(&mut self, schema: &Value, value: &Value, s: &str, path: &str) {
        let chars = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            self.errors.push(FieldError::too_long(
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match compiled(pattern) {
                Some(re) if !re.is_match(s) => self.invalid(
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                ),
                Some(_) => {}
                None => self.invalid(
                    path,
                    value,
                    format!("the schema's pattern '{pattern}' does not compile"),
                ),
            }
        }
    }

    fn check_number(&mut self, schema: &Value, value: &Value, path: &str) {
        let Some(n) = value.as_f64() else { return };
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMinimum");
            if (exclusive && n <= min) || (!exclusive && n < min) {
                let relation = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
                    path,
                    value,
                    format!("{path} in body should be {relation} {}", schema["minimum"]),
                );
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMaximum");
            if (exclusive && n >= max) || (!exclusive && n > max) {
                let relation = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    value,
                    format!("{path} in body should be {relation} {}", schema["maximum"]),
                );
            }
        }
        if let Some(multiple) = schema.get("multipleOf").and_then(Value::as_f64)
            && multiple > 0.0
            && (n / multiple).fract() != 0.0
        {
            self.invalid(
                path,
                value,
                format!(
                    "{path} in body should be a multiple of {}",
                    schema["multipleOf"]
                ),
            );
        }
    }

    fn check_array(&mut self, schema: &Value, items: &[Value], path: &mut String) {
        let len = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            self.errors.push(FieldError::too_many(
                path.as_str(),
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            self.invalid(
                path,
                &Value::from(len),
                format!("{path} in body should have at least {min} items"),
            );
        }
        let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
        if flag(schema, "uniqueItems") || list_type == Some("set") {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    let mark = path.len();
                    push_index(path, i);
                    self.errors.push(FieldError::duplicate(path.as_str(), item));
                    path.truncate(mark);
                }
            }
        }
        if list_type == Some("map")
            && let Some(Value::Array(keys)) = schema.get("x-kubernetes-list-map-keys")
        {
            let key_of = |item: &Value| -> Vec<Value> {
                keys.iter()
                    .map(|k| {
                        k.as_str()
                            .and_then(|k| item.get(k))
                            .cloned()
                            .unwrap_or(Value::Null)
                    })
                    .collect()
            };
            for (i, item) in items.iter().enumerate() {
                let key = key_of(item);
                if items[..i].iter().any(|earlier| key_of(earlier) == key) {
                    let mark = path.len();
                    push_index(path, i);
                    self.errors
                        .push(FieldError::duplicate(path.as_str(), &Value::Array(key)));
                    path.truncate(mark);
                }
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                let mark = path.len();
                push_index(path, i);
                self.check(item_schema, item, path, false);
                path.truncate(mark);
            }
        }
    }

    fn check_object(
        &mut self,
        schema: &Value,
        map: &Map<String, Value>,
        path: &mut String,
        root: bool,
    ) {
        let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
        if let Some(Value::Array(required)) = schema.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    let mark = path.len();
                    push_field(path, key);
                    self.errors.push(FieldError::required(path.as_str()));
                    path.truncate(mark);
                }
            }
        }
        let count = map.len() as u64;
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            self.errors.push(FieldError::too_many(
                path.as_str(),
                format!("Too many: {count}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            self.invalid(
                path,
                &Value::from(count),
                format!("{path} in body should have at least {min} properties"),
            );
        }
        for (key, child) in map {
            if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(Some(child_schema)) = property_schema(schema, key) {
                let mark = path.len();
                push_field(path, key);
                self.check(child_schema, child, path, false);
                path.truncate(mark);
            }
        }
    }

    fn check_combinators(&mut self, schema: &Value, value: &Value, path: &mut String) {
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for sub in all {
                self.check(sub, value, path, false);
            }
        }
        if let Some(Value::Array(any)) = schema.get("anyOf")
            && !any.iter().any(|sub| Self::passes(sub, value, path))
        {
            self.invalid(
                path,
                value,
                format!("{path} in body must match at least one schema in anyOf"),
            );
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            let matching = one
                .iter()
                .filter(|sub| Self::passes(sub, value, path))
                .count();
            if matching != 1 {
                self.invalid(
                    path,
                    value,
                    format!("{path} in body must validate one and only one schema (oneOf)"),
                );
            }
        }
        if let Some(not) = schema.get("not")
            && Self::passes(not, value, path)
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should not validate the schema in not"),
            );
        }
    }
}

/// Compiled `pattern`s, kept because every write of a custom object checks them again.
fn compiled(pattern: &str) -> Option<Regex> {
    static CACHE: Mutex<Vec<(String, Option<Regex>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().expect("pattern cache");
    if let Some((_, re)) = cache.iter().find(|(p, _)| p == pattern) {
        return re.clone();
    }
    let re = Regex::new(pattern).ok();
    // The cache is for the handful of patterns the installed CRDs carry; it never grows large.
    if cache.len() >= 256 {
        cache.clear();
    }
    cache.push((pattern.to_string(), re.clone()));
    re
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["containers"],
                    "properties": {
                        "maxStepTimeout": {"type": "integer", "default": 60, "minimum": -1},
                        "mode": {"type": "string", "enum": ["a", "b"]},
                        "note": {"type": "string", "nullable": true, "maxLength": 5},
                        "port": {"x-kubernetes-int-or-string": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "containers": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 3,
                            "items": {
                                "type": "object",
                                "required": ["stepName"],
                                "properties": {
                                    "stepName": {"type": "string", "pattern": "^[a-z0-9-]+$", "minLength": 1},
                                    "image": {"type": "string", "default": "busybox"},
                                    "retries": {"type": "integer", "maximum": 5, "default": 0}
                                }
                            }
                        }
                    }
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
            }
        })
    }

    fn normalized(mut obj: Value) -> (Value, Vec<String>) {
        let out = normalize(&schema(), &mut obj);
        (obj, out.unknown_fields)
    }

    #[test]
    fn defaults_fill_absent_fields_at_any_depth_and_keep_given_ones() {
        let (obj, unknown) = normalized(json!({
            "metadata": {"name": "x", "anything": 1},
            "spec": {"containers": [{"stepName": "a"}, {"stepName": "b", "image": "alpine", "retries": 2}]}
        }));
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(obj["spec"]["maxStepTimeout"], 60);
        assert_eq!(obj["spec"]["containers"][0]["image"], "busybox");
        assert_eq!(obj["spec"]["containers"][0]["retries"], 0);
        assert_eq!(obj["spec"]["containers"][1]["image"], "alpine");
        assert_eq!(obj["spec"]["containers"][1]["retries"], 2);
        // metadata is the server's: never pruned by the schema.
        assert_eq!(obj["metadata"]["anything"], 1);
    }

    #[test]
    fn the_siblings_of_a_field_are_found_through_maps_and_lists() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "steps": {"type": "array", "items": {"type": "object", "properties": {
                "dependsOn": {"type": "array"}, "stepName": {"type": "string"}}}}}}}});
        assert_eq!(
            sibling_fields(&schema, "spec.steps[0].dependencies"),
            ["dependsOn", "stepName"]
        );
        assert_eq!(sibling_fields(&schema, "spec.stepz"), ["steps"]);
        assert!(sibling_fields(&schema, "spec.nowhere[1].x").is_empty());
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported_unless_preserved() {
        let (obj, unknown) = normalized(json!({
            "apiVersion": "x/v1", "kind": "X",
            "spec": {
                "containers": [{"stepName": "a", "bogus": true}],
                "extra": 1,
                "free": {"any": {"thing": 1}},
                "labels": {"k": "v"}
            },
            "top": 2
        }));
        assert_eq!(
            unknown,
            vec!["spec.containers[0].bogus", "spec.extra", "top"]
        );
        assert!(obj["spec"]["containers"][0].get("bogus").is_none());
        assert!(obj["spec"].get("extra").is_none());
        assert!(obj.get("top").is_none());
        assert_eq!(obj["spec"]["free"]["any"]["thing"], 1);
        assert_eq!(obj["spec"]["labels"]["k"], "v");
        assert_eq!(obj["kind"], "X");
    }

    #[test]
    fn nulls_are_dropped_then_defaulted_unless_nullable() {
        let (obj, _) = normalized(json!({
            "spec": {"maxStepTimeout": null, "mode": null, "note": null, "containers": [{"stepName": "a"}]}
        }));
        assert_eq!(obj["spec"]["maxStepTimeout"], 60);
        assert!(obj["spec"].get("mode").is_none());
        assert!(obj["spec"]["note"].is_null() && obj["spec"].get("note").is_some());
    }

    #[test]
    fn validation_reports_each_problem_with_its_field_path() {
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (
                json!({"spec": {"containers": [{"stepName": "ok"}]}}),
                vec![],
            ),
            (
                json!({"spec": {}}),
                vec![("spec.containers", "FieldValueRequired")],
            ),
            (
                json!({"spec": {"containers": []}}),
                vec![("spec.containers", "FieldValueInvalid")],
            ),
            (
                json!({"spec": {"containers": [{"stepName": "a"}, {"stepName": "b"}, {"stepName": "c"}, {"stepName": "d"}]}}),
                vec![("spec.containers", "FieldValueTooMany")],
            ),
            (
                json!({"spec": {"containers": [{"image": "x"}]}}),
                vec![("spec.containers[0].stepName", "FieldValueRequired")],
            ),
            (
                json!({"spec": {"containers": [{"stepName": "Bad_Name"}]}}),
                vec![("spec.containers[0].stepName", "FieldValueInvalid")],
            ),
            (
                json!({"spec": {"containers": [{"stepName": ""}]}}),
                vec![
                    ("spec.containers[0].stepName", "FieldValueInvalid"),
                    ("spec.containers[0].stepName", "FieldValueInvalid"),
                ],
            ),
            (
                json!({"spec": {"containers": [{"stepName": "a", "retries": 6}]}}),
                vec![("spec.containers[0].retries", "FieldValueInvalid")],
            ),
            (
                json!({"spec": {"maxStepTimeout": "60", "containers": [{"stepName": "a"}]}}),
                vec![("spec.maxStepTimeout", "FieldValueTypeInvalid")],
            ),
            (
                json!({"spec": {"maxStepTimeout": -2, "containers": [{"stepName": "a"}]}}),
                vec![("spec.maxStepTimeout", "FieldValueInvalid")],
            ),
            (
                json!({"spec": {"maxStepTimeout": 1.5, "containers": [{"stepName": "a"}]}}),
                vec![("spec.maxStepTimeout", "FieldValueTypeInvalid")],
            ),
            (
                json!({"spec": {"mode": "c", "containers": [{"stepName": "a"}]}}),
                vec![("spec.mode", "FieldValueNotSupported")],
            ),
            (
                json!({"spec": {"note": "too long", "containers": [{"stepName": "a"}]}}),
                vec![("spec.note", "FieldValueTooLong")],
            ),
            (
                json!({"spec": {"note": null, "port": "http", "containers": [{"stepName": "a"}]}}),
                vec![],
            ),
            (
                json!({"spec": {"port": 8080, "containers": [{"stepName": "a"}]}}),
                vec![],
            ),
            (
                json!({"spec": {"port": true, "containers": [{"stepName": "a"}]}}),
                vec![("spec.port", "FieldValueTypeInvalid")],
            ),
            (
                json!({"spec": {"mode": null, "containers": [{"stepName": "a"}]}}),
                vec![("spec.mode", "FieldValueTypeInvalid")],
            ),
            (
                json!({"spec": {"labels": {"k": 1}, "containers": [{"stepName": "a"}]}}),
                vec![("spec.labels.k", "FieldValueTypeInvalid")],
            ),
            (
                json!({"spec": {"containers": [{"stepName": "a"}]}, "status": {"phase": 3}}),
                vec![("status.phase", "FieldValueTypeInvalid")],
            ),
            (
                json!({"metadata": {"name": 5}, "spec": {"containers": [{"stepName": "a"}]}}),
                vec![],
            ),
        ];
        for (obj, want) in cases {
            let got: Vec<(String, &str)> = validate(&schema(), &obj)
                .into_iter()
                .map(|e| (e.field, e.reason))
                .collect();
            let want: Vec<(String, &str)> =
                want.into_iter().map(|(f, r)| (f.to_string(), r)).collect();
            assert_eq!(got, want, "{obj}");
        }
    }

    #[test]
    fn messages_read_like_the_real_servers() {
        let errors = validate(
            &schema(),
            &json!({"spec": {"maxStepTimeout": -5, "mode": "z", "containers": [{"stepName": "A"}]}}),
        );
        let messages: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            messages,
            vec![
                "spec.containers[0].stepName: Invalid value: \"A\": spec.containers[0].stepName in body should match '^[a-z0-9-]+$'",
                "spec.maxStepTimeout: Invalid value: -5: spec.maxStepTimeout in body should be greater than or equal to -1",
                "spec.mode: Unsupported value: \"z\": supported values: \"a\", \"b\"",
            ]
        );
    }

    #[test]
    fn combinators_and_set_lists_are_checked() {
        let schema = json!({
            "type": "object",
            "properties": {
                "v": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+%$"}]},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
            }
        });
        let reasons = |obj: Value| -> Vec<(String, &'static str)> {
            validate(&schema, &obj)
                .into_iter()
                .map(|e| (e.field, e.reason))
                .collect()
        };
        assert!(reasons(json!({"v": 3})).is_empty());
        assert!(reasons(json!({"v": "50%"})).is_empty());
        assert_eq!(
            reasons(json!({"v": "x"})),
            vec![("v".to_string(), "FieldValueInvalid")]
        );
        assert_eq!(
            reasons(json!({"tags": ["a", "b", "a"]})),
            vec![("tags[2]".to_string(), "FieldValueDuplicate")]
        );
        assert_eq!(
            reasons(json!({"ports": [{"name": "a"}, {"name": "a"}]})),
            vec![("ports[1]".to_string(), "FieldValueDuplicate")]
        );
    }
}
