//! Query parameters decoded as the real API server decodes them.

/// A boolean query parameter (`watch`, `allowWatchBookmarks`, `sendInitialEvents`, ...).
///
/// k8s.io/apimachinery/pkg/runtime/conversion.go `Convert_Slice_string_To_bool`: absent is
/// false, "0" and "false" in any case are false, and every other value is true: "True" (what
/// older Python clients send), "t", "yes" and the empty string alike. No value is refused.
pub fn flag(value: Option<&str>) -> bool {
    match value {
        None => false,
        Some(v) => v != "0" && !v.eq_ignore_ascii_case("false"),
    }
}

#[cfg(test)]
mod tests {
    use super::flag;

    #[test]
    fn booleans_as_the_api_server_reads_them() {
        for yes in ["true", "True", "TRUE", "1", "t", "yes", ""] {
            assert!(flag(Some(yes)), "{yes:?}");
        }
        for no in ["false", "False", "FALSE", "0"] {
            assert!(!flag(Some(no)), "{no:?}");
        }
        assert!(!flag(None));
    }
}
