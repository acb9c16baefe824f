//! The API server's checks of an object's `metadata` that need nothing but the object: its name
//! (a DNS-1123 subdomain, or label for the few kinds that say so), label keys and values, and
//! annotation keys and total size. Failures are [`FieldError`]s with the real server's messages.
//!
//! The rules are apimachinery's `ValidateObjectMeta` (k8s.io/apimachinery
//! pkg/api/validation/objectmeta.go), with the name checked by `NameIsDNSSubdomain` or
//! `NameIsDNSLabel` (pkg/api/validation/generic.go, the regexes of
//! pkg/util/validation/validation.go); a custom resource's name is always a subdomain
//! (apiextensions-apiserver pkg/registry/customresource/validator.go passes
//! `NameIsDNSSubdomain`). The admission of the embedded API server (kube-devcluster) and the
//! operator's offline `validate` both use it, so what `validate` calls valid the server accepts.

use serde_json::{Map, Value};

use crate::field_error::FieldError;

/// How an object's name is checked (`ValidateObjectMeta`'s name function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds and every custom resource.
    Subdomain,
    /// `NameIsDNSLabel`: Namespaces and Services.
    Label,
}

/// The largest total size of an object's annotations (keys plus values), as on the real server
/// (`TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The size the annotation limit counts: keys plus values (ValidateAnnotationsSize).
pub fn annotations_size(annotations: &Map<String, Value>) -> usize {
    annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum()
}

/// The problems of `obj`'s metadata: its name (on a create: an update cannot change it), its
/// labels and its annotations.
pub fn validate(obj: &Value, rule: NameRule, create: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if create && !name.is_empty() {
        let problem = match rule {
            NameRule::Label => dns1123_label(name),
            NameRule::Subdomain => dns1123_subdomain(name),
        };
        if let Some(problem) = problem {
            errors.push(FieldError::invalid(
                "metadata.name",
                format!("Invalid value: {name:?}: {problem}"),
            ));
        }
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(problem) = label_key(key) {
                errors.push(FieldError::invalid(
                    "metadata.labels",
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
            match value.as_str() {
                Some(v) => {
                    if let Some(problem) = label_value(v) {
                        errors.push(FieldError::invalid(
                            format!("metadata.labels.{key}"),
                            format!("Invalid value: {v:?}: {problem}"),
                        ));
                    }
                }
                None => errors.push(FieldError::invalid(
                    format!("metadata.labels.{key}"),
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for key in annotations.keys() {
            if let Some(problem) = label_key(key) {
                errors.push(FieldError::invalid(
                    "metadata.annotations",
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
        }
        if annotations_size(annotations) > MAX_ANNOTATIONS_BYTES {
            errors.push(FieldError::too_long(
                "metadata.annotations",
                format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
            ));
        }
    }
    errors
}

const LABEL_CHARS: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `None` when `value` is a valid label value (empty, or at most 63 characters of
/// `[A-Za-z0-9_.-]` starting and ending alphanumeric), else why not.
pub fn label_value(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok_inner = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if ok_inner && ends(value.chars().next()) && ends(value.chars().last()) {
        None
    } else {
        Some(format!("a valid label {LABEL_CHARS}"))
    }
}

/// `None` when `key` is a valid label key: an optional DNS-1123 subdomain prefix and `/`, then a
/// name of at most 63 characters with the label value syntax.
pub fn label_key(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(problem) = dns1123_subdomain(prefix)
    {
        return Some(format!("prefix part {problem}"));
    }
    if name.is_empty() {
        return Some(format!(
            "name part must be non-empty; name part {LABEL_CHARS}"
        ));
    }
    label_value(name).map(|p| format!("name part {p}"))
}

/// `None` when `name` is a DNS-1123 label: at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn dns1123_label(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        None
    } else {
        Some("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into())
    }
}

/// `None` when `name` is a DNS-1123 subdomain: at most 253 characters, dot-separated labels.
pub fn dns1123_subdomain(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if ok {
        None
    } else {
        Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_dns_1123() {
        let long_label = "a".repeat(64);
        let cases: &[(&str, bool, bool)] = &[
            // (name, valid label, valid subdomain)
            ("my-name", true, true),
            ("a", true, true),
            ("123-abc", true, true),
            ("My-Name", false, false),
            ("under_score", false, false),
            ("-start", false, false),
            ("end-", false, false),
            ("dotted.name", false, true),
            ("", false, false),
            (&long_label, false, true),
        ];
        for &(name, label, subdomain) in cases {
            assert_eq!(dns1123_label(name).is_none(), label, "label {name:?}");
            assert_eq!(
                dns1123_subdomain(name).is_none(),
                subdomain,
                "subdomain {name:?}"
            );
        }
        assert!(dns1123_subdomain(&"a".repeat(254)).is_some());
    }

    #[test]
    fn label_keys_and_values_follow_the_api_server() {
        let cases: &[(&str, bool)] = &[
            ("app", true),
            ("workflow.crd.com/step", true),
            ("Upper_Case.ok", true),
            ("bad/prefix/twice", false),
            ("UPPER.com/x", false),
            ("/noname", false),
            ("x/", false),
            ("-x", false),
        ];
        for &(key, ok) in cases {
            assert_eq!(label_key(key).is_none(), ok, "key {key:?}");
        }
        let values: &[(&str, bool)] = &[
            ("", true),
            ("Step_1.a-b", true),
            ("_x", false),
            ("x-", false),
            ("has space", false),
        ];
        for &(value, ok) in values {
            assert_eq!(label_value(value).is_none(), ok, "value {value:?}");
        }
        assert!(label_value(&"a".repeat(64)).is_some());
        assert!(label_value(&"a".repeat(63)).is_none());
    }
}
