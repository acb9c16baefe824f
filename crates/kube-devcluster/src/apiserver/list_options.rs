//! The checks a list or watch request's options pass before anything is read, as the API
//! server makes them:
//!
//! - `resourceVersionMatch`, `continue` and `sendInitialEvents` together
//!   (k8s.io/apimachinery pkg/apis/meta/internalversion/validation `ValidateListOptions` and
//!   `validateWatchOptions`; the list handler answers 422 `ListOptions.meta.k8s.io "" is
//!   invalid`);
//! - a `continue` token with a `resourceVersion` other than `0` (k8s.io/apiserver
//!   pkg/storage/etcd3/store.go `GetList`: 400);
//! - a list at a resourceVersion this server has not reached yet: the cacher waits up to 3 s
//!   for it, then answers 504 `Timeout: Too large resource version` with the cause
//!   `ResourceVersionTooLarge` (k8s.io/apiserver pkg/storage/cacher `waitUntilFreshAndBlock`,
//!   `storage.NewTooLargeResourceVersionError`).

use std::time::Duration;

use kube_schema_check::FieldError;
use serde_json::json;

use crate::api::error::{ApiError, Result};
use crate::storage::store::Store;

/// What the cacher waits for a resourceVersion it has not seen (`blockTimeout`).
const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// The options that bear on the checks, as sent (`None`: the parameter is absent).
pub struct ListOptions<'a> {
    pub watch: bool,
    pub resource_version: Option<&'a str>,
    pub resource_version_match: Option<&'a str>,
    pub continue_token: Option<&'a str>,
    pub send_initial_events: Option<&'a str>,
}

const EXACT: &str = "Exact";
const NOT_OLDER_THAN: &str = "NotOlderThan";

impl ListOptions<'_> {
    /// 422 naming every problem, or 400 for `continue` with a resourceVersion.
    pub fn validate(&self) -> Result<()> {
        let errors = if self.watch {
            self.watch_errors()
        } else {
            self.list_errors()
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid("ListOptions.meta.k8s.io", "", errors));
        }
        if !self.watch
            && self.has_continue()
            && self
                .resource_version
                .is_some_and(|rv| !rv.is_empty() && rv != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(())
    }

    fn has_continue(&self) -> bool {
        self.continue_token.is_some_and(|c| !c.is_empty())
    }

    fn list_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(given) = self.resource_version_match.filter(|m| !m.is_empty()) {
            if self.resource_version.is_none_or(str::is_empty) {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if self.has_continue() {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if given != EXACT && given != NOT_OLDER_THAN {
                errors.push(unsupported(given, &[EXACT, NOT_OLDER_THAN, ""]));
            }
            if given == EXACT && self.resource_version == Some("0") {
                errors.push(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            errors.push(FieldError::forbidden(
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for list",
            ));
        }
        errors
    }

    fn watch_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let given = self.resource_version_match.unwrap_or_default();
        if self.send_initial_events.is_some() && given != NOT_OLDER_THAN {
            errors.push(forbidden(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !given.is_empty() {
            if self.send_initial_events.is_none() {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if given != NOT_OLDER_THAN {
                errors.push(unsupported(given, &[NOT_OLDER_THAN]));
            }
            if self.has_continue() {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        errors
    }
}

fn forbidden(message: &str) -> FieldError {
    FieldError::forbidden("resourceVersionMatch", format!("Forbidden: {message}"))
}

fn unsupported(given: &str, supported: &[&str]) -> FieldError {
    let supported: Vec<String> = supported.iter().map(|s| json!(s).to_string()).collect();
    FieldError::not_supported(
        "resourceVersionMatch",
        format!(
            "Unsupported value: {}: supported values: {}",
            json!(given),
            supported.join(", ")
        ),
    )
}

/// Waits (up to 3 s) until the store has reached `wanted`, as the watch cache does before
/// serving a list at that resourceVersion; then 504 Too large resource version.
pub async fn wait_until_fresh(store: &Store, wanted: u64) -> Result<()> {
    let mut changes = store.subscribe();
    let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
    while store.current_rv() < wanted {
        if tokio::time::timeout_at(deadline, changes.recv())
            .await
            .is_err()
        {
            let current = store.current_rv();
            return Err(ApiError::new(
                504,
                "Timeout",
                format!("Timeout: Too large resource version: {wanted}, current: {current}"),
            )
            .with_details(json!({
                "causes": [{
                    "reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version",
                }],
                "retryAfterSeconds": 1,
            })));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(rv: Option<&'static str>, matching: Option<&'static str>) -> ListOptions<'static> {
        ListOptions {
            watch: false,
            resource_version: rv,
            resource_version_match: matching,
            continue_token: None,
            send_initial_events: None,
        }
    }

    #[test]
    fn a_match_needs_a_resource_version_and_a_known_value() {
        assert!(list(Some("5"), Some("NotOlderThan")).validate().is_ok());
        assert!(list(None, None).validate().is_ok());
        let error = list(None, Some("Bogus")).validate().unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"]"
        );
    }
}
