//! [`FieldError`]: one invalid field, as a 422 response's `details.causes` names it; what every
//! check of this crate ([`crate::schema`], [`crate::object_meta`]) reports.

use serde_json::Value;

/// One invalid field of a 422 response.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The field path, e.g. `spec.containers[0].stepName`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: message.into(),
        }
    }
    /// `ValidateImmutableField`: `Invalid value: <new value>: field is immutable`, the value
    /// printed as `field.Error` prints it (`null` when absent).
    pub fn immutable(field: impl Into<String>, value: Option<&Value>) -> Self {
        Self::invalid(
            field,
            format!(
                "Invalid value: {}: field is immutable",
                value.unwrap_or(&Value::Null)
            ),
        )
    }
    pub fn required(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }
    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with_reason("FieldValueForbidden", field, message)
    }
    /// A value of the wrong JSON type.
    pub fn type_invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with_reason("FieldValueTypeInvalid", field, message)
    }
    /// A value outside an enum.
    pub fn not_supported(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with_reason("FieldValueNotSupported", field, message)
    }
    pub fn too_long(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with_reason("FieldValueTooLong", field, message)
    }
    pub fn too_many(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with_reason("FieldValueTooMany", field, message)
    }
    /// A repeated entry of a set or map list.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        Self::with_reason(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {value}"),
        )
    }
    fn with_reason(
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            reason,
            field: field.into(),
            message: message.into(),
        }
    }
}
