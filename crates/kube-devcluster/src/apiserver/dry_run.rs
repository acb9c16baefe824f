//! `dryRun`: which writes are dry runs, and the 422 for a value the server does not know.
//!
//! A dry run goes through everything a write goes through (defaulting, admission, validation)
//! and is then not committed: the server writes to [`Store::dry_run`], the store's one dry-run
//! switch, and skips what follows a commit (CRD registration, Event mirroring, unserving a
//! deleted CRD's resource). The controllers only act on watch events, which a dry run makes none
//! of, so no pod starts and no garbage is collected.

use serde_json::Value;

use crate::api::error::{ApiError, FieldError, Result};
use crate::storage::store::Store;

/// The only dry-run value there is (`metav1.DryRunAll`).
const ALL: &str = "All";

/// Whether a write is a dry run, from the `dryRun` values of its options (the query parameter,
/// and for deletes also the `DeleteOptions` body). `options_kind` names the options in the error,
/// e.g. `PatchOptions`.
///
/// k8s.io/apimachinery/pkg/apis/meta/v1/validation ValidateDryRun: every value must be `All`,
/// else `field.NotSupported`; the handlers (k8s.io/apiserver/pkg/endpoints/handlers/create.go,
/// update.go, patch.go, delete.go) answer that as 422 Invalid on `<Kind>Options.meta.k8s.io`.
pub fn requested(options_kind: &str, values: &[&str]) -> Result<bool> {
    if values.iter().all(|v| *v == ALL) {
        return Ok(!values.is_empty());
    }
    let given = serde_json::to_string(values).expect("strings serialize");
    Err(ApiError::invalid(
        &format!("{options_kind}.meta.k8s.io"),
        "",
        vec![FieldError::not_supported(
            "dryRun",
            format!("Unsupported value: {given}: supported values: \"{ALL}\""),
        )],
    ))
}

/// The `dryRun` values of a `DeleteOptions` body (kubectl sends its `--dry-run=server` there,
/// not in the query).
pub fn in_delete_options(options: &Value) -> Vec<&str> {
    options
        .get("dryRun")
        .and_then(Value::as_array)
        .map(|values| values.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The store a write goes to: the store itself, or its dry-run view.
pub fn store(store: &Store, dry_run: bool) -> Store {
    if dry_run {
        store.dry_run()
    } else {
        store.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_all_is_a_dry_run() {
        assert!(!requested("CreateOptions", &[]).unwrap());
        assert!(requested("CreateOptions", &["All"]).unwrap());
        let error = requested("PatchOptions", &["Some"]).unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
        );
    }
}
