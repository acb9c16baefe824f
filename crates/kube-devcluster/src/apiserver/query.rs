//! Query parameters decoded as the real API server decodes them
//! (k8s.io/apimachinery/pkg/runtime/conversion.go, which `ParameterCodec.DecodeParameters`
//! applies to the URL's values; a failure is answered 400 BadRequest with its message).

use crate::api::error::ApiError;

/// The integer parameters of the options the server reads (`ListOptions`, `DeleteOptions`).
const INTEGERS: [&str; 3] = ["limit", "timeoutSeconds", "gracePeriodSeconds"];

/// Refuses an integer parameter that is not one, with the message of the conversion
/// (`Convert_Slice_string_To_int64`: `strconv.ParseInt`, base 10, 64 bits, of the first value).
pub fn check_integers(pairs: &[(String, String)]) -> Result<(), ApiError> {
    for name in INTEGERS {
        let Some((_, value)) = pairs.iter().find(|(key, _)| key == name) else {
            continue;
        };
        if let Err(error) = value.parse::<i64>() {
            let why = match error.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            return Err(ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {value:?}: {why}"
            )));
        }
    }
    Ok(())
}

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
    use super::{check_integers, flag};

    #[test]
    fn integers_as_strconv_parses_them() {
        let pairs = |v: &str| vec![("limit".to_string(), v.to_string())];
        assert!(check_integers(&pairs("-1")).is_ok());
        assert_eq!(
            check_integers(&pairs("abc")).unwrap_err().message,
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            check_integers(&pairs("99999999999999999999"))
                .unwrap_err()
                .message,
            "strconv.ParseInt: parsing \"99999999999999999999\": value out of range"
        );
    }

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
