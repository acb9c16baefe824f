//! What the real API server checks before it stores a write, where operators commonly trip:
//! object metadata ([`kube_schema_check::object_meta`]: names, label keys and values,
//! annotations) and the kind's own validation (its strategy's `validate`, in
//! [`crate::registry::validation`]: the size of ConfigMaps and Secrets, immutable fields, pod
//! specs, a CRD's CEL rules). Failures are 422 `Invalid` with one cause per field.

use kube_schema_check::object_meta;
use serde_json::Value;

use crate::api::error::FieldError;
use crate::api::resources::ResourceInfo;

/// The problems the real server's metadata and built-in validation finds in a create (`old` is
/// `None`) or an update; the server adds the schema's own to the same list.
pub fn check(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = object_meta::validate(obj, info.strategy.name_rule, old.is_none());
    errors.extend((info.strategy.validate)(obj, old));
    errors
}
