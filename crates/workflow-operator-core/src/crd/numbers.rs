//! Numbers written as Argo writes them: a number, the same number as text (`limit: "10"`), or
//! a `{{workflow.parameters.X}}` / `{{inputs.parameters.X}}` form the template stage fills
//! before the number is checked. A number is kept (and written back) as a number, so a
//! workflow that writes numbers hashes as it always did.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::jiff::SignedDuration;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A number, or text that is not one yet (a form to fill; once filled, text that is still not
/// a number is refused naming the field, see [`IntOrExpr::check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntOrExpr<T> {
    /// A number (written as one, or as text holding one).
    Num(T),
    /// Text that is not a number as written. Boxed (a thin pointer) so that the field is as
    /// large as the number alone: a step's memory counts for every step the operator holds.
    #[allow(clippy::box_collection)]
    Expr(Box<String>),
}

impl<T: Copy> IntOrExpr<T> {
    /// The number; `None` for text (refused before planning but for a `withSequence` bound
    /// that is a step's output, which `fan_out` reads).
    pub fn num(&self) -> Option<T> {
        match self {
            IntOrExpr::Num(n) => Some(*n),
            IntOrExpr::Expr(_) => None,
        }
    }
}

impl<T: fmt::Display> IntOrExpr<T> {
    /// `Err("PATH: \"TEXT\" is not a number")` for text left after filling.
    ///
    /// # Errors
    /// The field's path and the text.
    pub fn check(&self, path: &str) -> Result<(), String> {
        match self {
            IntOrExpr::Num(_) => Ok(()),
            IntOrExpr::Expr(text) => Err(format!("{path}: {text:?} is not a number")),
        }
    }
}

impl<T: Default> Default for IntOrExpr<T> {
    fn default() -> Self {
        IntOrExpr::Num(T::default())
    }
}

impl<T> From<T> for IntOrExpr<T> {
    fn from(n: T) -> Self {
        IntOrExpr::Num(n)
    }
}

/// [`IntOrExpr::num`] of an optional field.
pub trait OptionNum<T> {
    /// The number, `None` when unset (or text).
    fn num(&self) -> Option<T>;
}

impl<T: Copy> OptionNum<T> for Option<IntOrExpr<T>> {
    fn num(&self) -> Option<T> {
        self.as_ref().and_then(IntOrExpr::num)
    }
}

impl<T: Serialize> Serialize for IntOrExpr<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrExpr::Num(n) => n.serialize(serializer),
            IntOrExpr::Expr(text) => text.serialize(serializer),
        }
    }
}

impl<'de, T: DeserializeOwned + FromStr> Deserialize<'de> for IntOrExpr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(text) => Ok(match text.trim().parse() {
                Ok(n) => IntOrExpr::Num(n),
                Err(_) => IntOrExpr::Expr(Box::new(text)),
            }),
            number @ Value::Number(_) => serde_json::from_value(number)
                .map(IntOrExpr::Num)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "expected a number or text, not {other}"
            ))),
        }
    }
}

impl<T> JsonSchema for IntOrExpr<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IntOrExpr".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        int_or_string()
    }
}

/// A number or text (`x-kubernetes-int-or-string`, the structural schema's only way to accept
/// both; `minimum` still applies to a number).
pub(crate) fn int_or_string() -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-int-or-string": true})
}

/// [`int_or_string`] with a minimum for a number.
fn at_least(min: f64) -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-int-or-string": true, "minimum": min})
}

/// The schema of a number or text at least 0.
pub(crate) fn at_least_zero(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    at_least(0.0)
}

/// The schema of a number or text at least 1.
pub(crate) fn at_least_one(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    at_least(1.0)
}

/// The schema of a number (not only an integer: the structural schema's int-or-string is
/// integers only, so the value is kept as given and the operator reads it) or text, a number
/// at least 1.
pub(crate) fn fraction_at_least_one(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-preserve-unknown-fields": true, "minimum": 1.0})
}

/// The schema of a step's `timeout`: a number at least -1 and not 0 (a rule that holds for text,
/// which the template stage checks once filled), or text.
pub(crate) fn timeout_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "minimum": -1.0,
        "x-kubernetes-validations": [{"rule": "self != 0", "message": "must not be 0 (use -1 for unlimited)"}],
    })
}

/// Reads a step's `timeout`: [`IntOrExpr`], Argo's duration text (`"10s"`, `"1m30s"`) as its
/// seconds rounded up. A form (`{{...}}`) stays text until the template stage fills it and
/// reads the step again.
pub(crate) fn seconds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<IntOrExpr<i64>>, D::Error> {
    Ok(match Option::<IntOrExpr<i64>>::deserialize(deserializer)? {
        Some(IntOrExpr::Expr(text)) if !text.contains("{{") => Some(match parse_duration(&text) {
            Ok(d) => IntOrExpr::Num(d.as_secs() + i64::from(d.subsec_nanos() > 0)),
            Err(_) => IntOrExpr::Expr(text),
        }),
        other => other,
    })
}

/// A Go duration (`5s`, `1m30s`, `500ms`), or whole seconds.
///
/// # Errors
/// What is wrong with `text`.
pub fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let text = text.trim();
    let parsed = match text.parse::<i64>() {
        Ok(seconds) => Ok(SignedDuration::from_secs(seconds)),
        Err(_) => text.parse::<SignedDuration>().map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(d) if d.is_negative() => Err(format!("{text:?} is negative")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "{text:?} is not a duration (e.g. 5s, 1m30s, 500ms): {e}"
        )),
    }
}

/// The schema of a number or text, any value.
pub(crate) fn any_number(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    int_or_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, Debug, PartialEq)]
    struct Holder {
        n: IntOrExpr<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        f: Option<IntOrExpr<f64>>,
    }

    #[test]
    fn a_number_a_number_as_text_and_a_form_are_read_and_a_number_is_written_as_one() {
        let read = |json: &str| serde_json::from_str::<Holder>(json).unwrap();
        assert_eq!(read(r#"{"n": 10}"#).n, IntOrExpr::Num(10));
        assert_eq!(read(r#"{"n": "10"}"#).n, IntOrExpr::Num(10));
        assert_eq!(read(r#"{"n": 1, "f": "2.5"}"#).f, Some(IntOrExpr::Num(2.5)));
        let form = read(r#"{"n": "{{workflow.parameters.n}}"}"#);
        assert_eq!(
            form.n,
            IntOrExpr::Expr(Box::new("{{workflow.parameters.n}}".into()))
        );
        assert_eq!(
            serde_json::to_string(&read(r#"{"n": "10"}"#)).unwrap(),
            r#"{"n":10}"#
        );
        assert_eq!(
            serde_json::to_string(&form).unwrap(),
            r#"{"n":"{{workflow.parameters.n}}"}"#
        );
        assert!(serde_json::from_str::<Holder>(r#"{"n": true}"#).is_err());
        assert!(serde_json::from_str::<Holder>(r#"{"n": 3000000000}"#).is_err());
    }

    #[test]
    fn text_that_is_not_a_number_is_refused_naming_the_field_and_the_text() {
        let ten: IntOrExpr<i64> = IntOrExpr::Expr(Box::new("ten".into()));
        assert_eq!(
            ten.check("step \"s\": withSequence.count"),
            Err(r#"step "s": withSequence.count: "ten" is not a number"#.to_string())
        );
        assert_eq!(IntOrExpr::Num(3).check("x"), Ok(()));
    }
}
