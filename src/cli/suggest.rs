//! "Did you mean": the field a misspelt or Argo-named one most likely is, among the fields the
//! schema declares beside it.

use kube_schema_check::schema;
use serde_json::Value;

/// Fields Argo Workflows names otherwise, by Argo's name: a step's `dependencies` is
/// `dependsOn` here, a DAG task's `name` a step's `stepName`.
const ARGO_NAMES: &[(&str, &str)] = &[
    ("dependencies", "dependsOn"),
    ("depends", "dependsOn"),
    ("name", "stepName"),
    ("tasks", "containers"),
    ("script", "source"),
    ("podGC", "podCleanup"),
    ("ttlStrategy", "ttlSecondsAfterFinished"),
];

/// `unknown field "PATH"`, with the field it most likely meant when one is close.
pub(super) fn unknown_field(schema: &Value, path: &str) -> String {
    match did_you_mean(schema, path) {
        Some(meant) => format!("unknown field {path:?}: did you mean {meant:?}?"),
        None => format!("unknown field {path:?}"),
    }
}

/// The declared sibling the unknown field at `path` most likely is: Argo's name for it, else
/// the nearest by edit distance (ignoring case) within a third of its length.
fn did_you_mean(schema: &Value, path: &str) -> Option<String> {
    let field = path.rsplit('.').next()?;
    let siblings = schema::sibling_fields(schema, path);
    let argo = ARGO_NAMES
        .iter()
        .find(|(argo, ours)| *argo == field && siblings.iter().any(|s| s == ours));
    if let Some((_, ours)) = argo {
        return Some(ours.to_string());
    }
    let lower = field.to_lowercase();
    siblings
        .into_iter()
        .map(|sibling| {
            (
                strsim::damerau_levenshtein(&lower, &sibling.to_lowercase()),
                sibling,
            )
        })
        .filter(|(distance, sibling)| *distance * 3 <= sibling.len().max(3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, sibling)| sibling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "containers": {"type": "array", "items": {"type": "object", "properties": {
                "dependsOn": {}, "stepName": {}, "image": {}, "timeout": {}}}},
            "maxStepTimeout": {}}}}})
    }

    #[test]
    fn an_argo_name_or_a_typo_is_answered_with_the_field_meant() {
        let cases = [
            ("spec.containers[0].dependencies", Some("dependsOn")),
            ("spec.containers[1].name", Some("stepName")),
            ("spec.containers[0].imagee", Some("image")),
            ("spec.containers[0].TimeOut", Some("timeout")),
            ("spec.maxStepTimout", Some("maxStepTimeout")),
            ("spec.containers[0].volumes", None),
            ("spec.nowhere[0].image", None),
        ];
        for (path, meant) in cases {
            assert_eq!(did_you_mean(&schema(), path).as_deref(), meant, "{path}");
        }
        assert_eq!(
            unknown_field(&schema(), "spec.containers[0].dependencies"),
            r#"unknown field "spec.containers[0].dependencies": did you mean "dependsOn"?"#
        );
    }
}
