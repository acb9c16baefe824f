//! `{{item}}` and `{{item.FIELD}}` in a `when`, decided once per item of its step: Argo fills
//! the item into the condition's text and evaluates it for each item. Inside a quoted string
//! the item is its text (a string as itself, anything else as JSON, as in a command);
//! elsewhere its value: a number, a bool, a list, a map, or a string (one that reads as a JSON
//! number or bool being that, as the text filled in would read).
//!
//! A step's `when` is compiled once: each placeholder becomes a variable bound per item
//! ([`variables`], [`ItemRead::value`]). A call of a `dag` template, whose items the spec
//! holds, has its `when` filled per item when it is expanded ([`fill`]).

use std::sync::LazyLock;

use kube_cel::cel::Value;
use regex::{Captures, Regex};
use serde_json::Value as Json;

use crate::outputs;

/// `{{item}}` or `{{item.FIELD}}` (a field as [`outputs::references`] takes one), spaces
/// allowed inside the braces.
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\{\{\s*item(?:\.([A-Za-z_][A-Za-z0-9_-]*))?\s*\}\}").expect("a valid regex")
});

/// What the variables placeholders become are named, with their number: a name CEL allows that
/// a `when` has no other use for (it may name only `steps` and `workflow`).
pub(super) const VARIABLE: &str = "__item";

/// An item placeholder of a `when`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRead {
    /// The field of an object item; `None` for the whole item.
    pub field: Option<String>,
    /// Written inside a quoted string: read as text.
    pub quoted: bool,
    /// As written (`{{item.evenness}}`).
    pub shown: String,
}

impl ItemRead {
    /// What the placeholder is for `item`: text inside a quoted string, else the value.
    ///
    /// # Errors
    /// The item is not an object with the field.
    pub(super) fn value(&self, item: &Json) -> Result<Value, String> {
        let value = match &self.field {
            None => item,
            Some(field) => item.get(field).ok_or_else(|| self.no_field(item))?,
        };
        if self.quoted {
            return Ok(Value::from(outputs::item_text(value)));
        }
        let read = read_as_written(value);
        kube_cel::cel::to_value(read.as_ref()).map_err(|e| format!("{}: {e}", self.shown))
    }

    fn no_field(&self, item: &Json) -> String {
        let shown: String = item.to_string().chars().take(80).collect();
        let field = self.field.as_deref().unwrap_or_default();
        format!("{}: the item {shown} has no field {field:?}", self.shown)
    }
}

/// `value` as the text filled in would read: a string holding a JSON number or bool is that.
fn read_as_written(value: &Json) -> std::borrow::Cow<'_, Json> {
    if let Json::String(text) = value
        && let Ok(read @ (Json::Number(_) | Json::Bool(_))) = serde_json::from_str(text.trim())
    {
        return std::borrow::Cow::Owned(read);
    }
    std::borrow::Cow::Borrowed(value)
}

/// `expression` with each item placeholder a variable (`__item0`, `__item1`, ...), and what
/// each reads, in the variables' order: outside a string the variable stands where the
/// placeholder did; a string holding placeholders becomes the concatenation of its parts, in
/// parentheses (`"n-{{item}}"` is `("n-" + __item0)`).
pub(super) fn variables(expression: &str) -> (String, Vec<ItemRead>) {
    let mut reads = Vec::new();
    if !PLACEHOLDER.is_match(expression) {
        return (expression.to_string(), reads);
    }
    let mut out = String::with_capacity(expression.len() + 16);
    let next = |found: &Captures<'_>, quoted: bool, reads: &mut Vec<ItemRead>| {
        reads.push(ItemRead {
            field: found.get(1).map(|f| f.as_str().to_string()),
            quoted,
            shown: found[0].to_string(),
        });
        format!("{VARIABLE}{}", reads.len() - 1)
    };
    for segment in segments(expression) {
        match segment {
            Segment::Code(text) => {
                let replaced =
                    PLACEHOLDER.replace_all(text, |f: &Captures<'_>| next(f, false, &mut reads));
                out.push_str(&replaced);
            }
            Segment::Quoted { open, body, close } if PLACEHOLDER.is_match(body) => {
                let mut parts = Vec::new();
                let mut last = 0;
                for found in PLACEHOLDER.captures_iter(body) {
                    let whole = found.get(0).expect("a match");
                    if whole.start() > last {
                        parts.push(format!("{open}{}{close}", &body[last..whole.start()]));
                    }
                    parts.push(next(&found, true, &mut reads));
                    last = whole.end();
                }
                if last < body.len() {
                    parts.push(format!("{open}{}{close}", &body[last..]));
                }
                out.push_str(&format!("({})", parts.join(" + ")));
            }
            Segment::Quoted { open, body, close } => {
                out.push_str(open);
                out.push_str(body);
                out.push_str(close);
            }
        }
    }
    (out, reads)
}

/// `expression` with its item placeholders filled for `item`, as CEL: inside a string the
/// item's text, escaped for it; elsewhere a literal of its value.
///
/// # Errors
/// A placeholder naming a field the item does not have.
pub fn fill(expression: &str, item: &Json) -> Result<String, String> {
    if !PLACEHOLDER.is_match(expression) {
        return Ok(expression.to_string());
    }
    let mut problem = None;
    let mut filled = |found: &Captures<'_>, quote: Option<&str>| {
        let read = ItemRead {
            field: found.get(1).map(|f| f.as_str().to_string()),
            quoted: quote.is_some(),
            shown: found[0].to_string(),
        };
        let value = match &read.field {
            None => Some(item),
            Some(field) => item.get(field),
        };
        let Some(value) = value else {
            problem.get_or_insert_with(|| read.no_field(item));
            return found[0].to_string();
        };
        match quote {
            Some(quote) => escaped(&outputs::item_text(value), quote),
            None => match read_as_written(value).as_ref() {
                Json::String(text) => serde_json::to_string(text).expect("a string serializes"),
                other => other.to_string(),
            },
        }
    };
    let mut out = String::with_capacity(expression.len() + 16);
    for segment in segments(expression) {
        match segment {
            Segment::Code(text) => {
                out.push_str(&PLACEHOLDER.replace_all(text, |f: &Captures<'_>| filled(f, None)));
            }
            Segment::Quoted { open, body, close } => {
                let quote = if open.contains(['r', 'R']) { "" } else { close };
                out.push_str(open);
                out.push_str(
                    &PLACEHOLDER.replace_all(body, |f: &Captures<'_>| filled(f, Some(quote))),
                );
                out.push_str(close);
            }
        }
    }
    match problem {
        Some(problem) => Err(problem),
        None => Ok(out),
    }
}

/// `text` inside a CEL string closed by `quote` (none for a raw string, which has no escapes).
fn escaped(text: &str, quote: &str) -> String {
    if quote.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' if quote.len() == 1 => out.push_str("\\n"),
            '\r' if quote.len() == 1 => out.push_str("\\r"),
            c if quote.starts_with(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A part of a CEL expression: code, or a string literal (its opening with any `r`/`b`
/// prefix, its body as written, its closing quote).
#[derive(Debug, PartialEq, Eq)]
enum Segment<'e> {
    Code(&'e str),
    Quoted {
        open: &'e str,
        body: &'e str,
        close: &'e str,
    },
}

/// `expression` cut into code and string literals (`"..."`, `'...'`, triple-quoted, raw
/// `r"..."`, bytes `b"..."`), as CEL's lexer reads them. An unclosed string is left as code:
/// the expression does not compile, and says so.
fn segments(expression: &str) -> Vec<Segment<'_>> {
    let bytes = expression.as_bytes();
    let mut out = Vec::new();
    let (mut code_from, mut at) = (0, 0);
    while at < bytes.len() {
        let quote = bytes[at];
        if quote != b'"' && quote != b'\'' {
            at += 1;
            continue;
        }
        let open_at = at - prefix_len(&expression[code_from..at]);
        let raw = expression[open_at..at].contains(['r', 'R']);
        let delimiter: &[u8] = if bytes[at..].starts_with(&[quote; 3]) {
            &bytes[at..at + 3]
        } else {
            &bytes[at..at + 1]
        };
        let body_from = at + delimiter.len();
        let mut end = body_from;
        while end < bytes.len() && !bytes[end..].starts_with(delimiter) {
            end += if !raw && bytes[end] == b'\\' { 2 } else { 1 };
        }
        if end >= bytes.len() {
            break;
        }
        out.push(Segment::Code(&expression[code_from..open_at]));
        out.push(Segment::Quoted {
            open: &expression[open_at..body_from],
            body: &expression[body_from..end],
            close: &expression[end..end + delimiter.len()],
        });
        at = end + delimiter.len();
        code_from = at;
    }
    out.push(Segment::Code(&expression[code_from..]));
    out
}

/// How many of the characters ending `code` are a string literal's prefix (`r`, `b`, `rb`,
/// `br`, either case): letters after something that is not part of a name.
fn prefix_len(code: &str) -> usize {
    let tail: Vec<char> = code.chars().rev().take(3).collect();
    let is_prefix = |c: &char| matches!(c, 'r' | 'R' | 'b' | 'B');
    let part_of_name = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
    match tail.as_slice() {
        [a, b, rest @ ..] if is_prefix(a) && is_prefix(b) && !a.eq_ignore_ascii_case(b) => {
            if part_of_name(rest.first()) {
                0
            } else {
                2
            }
        }
        [a, rest @ ..] if is_prefix(a) => {
            if part_of_name(rest.first()) {
                0
            } else {
                1
            }
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_placeholder_is_a_variable_and_a_string_holding_one_the_concatenation_of_its_parts() {
        let (cel, reads) = variables(r#""{{item.evenness}}" == "even" && {{ item.n }} > 2"#);
        assert_eq!(cel, r#"(__item0) == "even" && __item1 > 2"#);
        let fields: Vec<(Option<&str>, bool)> = (reads.iter())
            .map(|r| (r.field.as_deref(), r.quoted))
            .collect();
        assert_eq!(fields, [(Some("evenness"), true), (Some("n"), false)]);
        let (cel, _) = variables(r#"'n-{{item}}-x'.startsWith("n") && r"{{item}}" != "\"{{"#);
        assert_eq!(
            cel,
            r#"('n-' + __item0 + '-x').startsWith("n") && (__item1) != "\"{{"#
        );
        assert_eq!(variables("true").0, "true");
    }

    #[test]
    fn an_item_is_its_text_in_a_string_and_its_value_elsewhere() {
        let read = |field: Option<&str>, quoted| ItemRead {
            field: field.map(Into::into),
            quoted,
            shown: "{{item}}".into(),
        };
        let item = json!({"n": "3", "ok": true, "name": "a", "list": [1]});
        assert_eq!(read(None, true).value(&json!(4)), Ok(Value::from("4")));
        assert_eq!(read(Some("n"), false).value(&item), Ok(Value::Int(3)));
        assert_eq!(read(Some("n"), true).value(&item), Ok(Value::from("3")));
        assert_eq!(read(Some("ok"), false).value(&item), Ok(Value::Bool(true)));
        assert_eq!(read(Some("name"), false).value(&item), Ok(Value::from("a")));
        assert!(read(Some("list"), false).value(&item).is_ok());
        assert_eq!(
            read(Some("other"), false).value(&item).unwrap_err(),
            r#"{{item}}: the item {"list":[1],"n":"3","name":"a","ok":true} has no field "other""#
        );
    }

    #[test]
    fn a_when_naming_the_item_is_compiled_once_and_decided_per_item() {
        use crate::when::When;
        let when = When::compile(r#""{{item.e}}" == "even" && {{item.n}} > 1"#).unwrap();
        assert_eq!(when.item_reads().len(), 2);
        let upstream = std::collections::HashMap::new();
        let decide =
            |item: Json| when.evaluate_in(&upstream, crate::when::Run::default(), Some(&item));
        assert_eq!(decide(json!({"e": "even", "n": "2"})), Ok(true));
        assert_eq!(decide(json!({"e": "odd", "n": 2})), Ok(false));
        let without = when.evaluate(&upstream).unwrap_err();
        assert!(
            without.contains("names an item, and none is given"),
            "{without}"
        );
        // Its variables are no names a `when` may write.
        let error = When::compile("__item0 == 1").unwrap_err();
        assert!(error.contains(r#"names "__item0""#), "{error}");
    }

    #[test]
    fn a_when_filled_for_an_item_is_cel_that_reads_it_as_the_variables_do() {
        let item = json!({"evenness": "ev\"en", "n": "3"});
        assert_eq!(
            fill(r#""{{item.evenness}}" == "x" && {{item.n}} > 2"#, &item),
            Ok(r#""ev\"en" == "x" && 3 > 2"#.into())
        );
        assert_eq!(
            fill("{{item}} == 'b'", &json!("b")),
            Ok(r#""b" == 'b'"#.into())
        );
        assert_eq!(
            fill("'{{item.x}}' == ''", &item),
            Err(r#"{{item.x}}: the item {"evenness":"ev\"en","n":"3"} has no field "x""#.into())
        );
    }
}
