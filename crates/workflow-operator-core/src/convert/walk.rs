//! Walking an Argo object by the table: its fields copied, renamed, handed to the code of
//! their place, or named as not converted, each with its path in the document.

use serde_json::{Map, Value};

use super::table::{self, Becomes, Place};

/// A field that was not converted: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its path in the Argo document, `spec.templates[2].resource`.
    pub path: String,
    pub why: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

/// What a conversion could not convert, in the order met; and what it converted with a
/// difference an Argo user would not guess from the document (said, never failing `--strict`).
#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<Problem>,
    pub notes: Vec<Problem>,
}

impl Report {
    pub fn not_converted(&mut self, path: &str, why: impl Into<String>) {
        self.problems.push(Problem {
            path: path.to_string(),
            why: why.into(),
        });
    }

    /// `path` was converted, but works differently here: `how`.
    pub fn noted(&mut self, path: &str, how: impl Into<String>) {
        self.notes.push(Problem {
            path: path.to_string(),
            why: how.into(),
        });
    }
}

/// `at.field`, or `field` at the top.
pub fn join(at: &str, field: &str) -> String {
    if at.is_empty() {
        field.to_string()
    } else {
        format!("{at}.{field}")
    }
}

/// The fields of `object` (an object of `place`, at path `at`) as the table says: `Same` ones
/// copied, `Renamed` ones set at their new (dotted) path, `Converted` ones given to `convert`
/// (with their path, to write into the output), `Unsupported` ones and those the table does
/// not know named in `report`, `Dropped` ones left out.
pub fn fields(
    place: Place,
    object: &Value,
    at: &str,
    report: &mut Report,
    mut convert: impl FnMut(&str, &Value, &str, &mut Map<String, Value>, &mut Report),
) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(object) = object.as_object() else {
        report.not_converted(at, "expected an object");
        return out;
    };
    for (field, value) in object {
        let path = join(at, field);
        match table::lookup(place, field).map(|r| (r.becomes, r.note)) {
            Some((Becomes::Same, _)) => {
                out.insert(field.clone(), value.clone());
            }
            Some((Becomes::Renamed(to), _)) => set_path(&mut out, to, value.clone()),
            Some((Becomes::Converted(_), _)) => convert(field, value, &path, &mut out, report),
            Some((Becomes::Unsupported, why)) => report.not_converted(&path, why),
            Some((Becomes::Dropped, _)) => {}
            None => report.not_converted(&path, "not a field the converter knows"),
        }
    }
    out
}

/// Sets `value` at the dotted `path` of `out`, making the objects on the way.
pub fn set_path(out: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            out.insert(path.to_string(), value);
        }
        Some((head, rest)) => {
            let inner = out
                .entry(head.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = inner {
                set_path(inner, rest, value);
            }
        }
    }
}

/// The items of a list field, each with its path (`at[i]`); a value that is not a list is named.
pub fn items<'v>(value: &'v Value, at: &str, report: &mut Report) -> Vec<(String, &'v Value)> {
    match value.as_array() {
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("{at}[{i}]"), item))
            .collect(),
        None => {
            report.not_converted(at, "expected a list");
            Vec::new()
        }
    }
}

/// A number Argo may write as a string (`"10"`): the number, or the text as it is when it is
/// not one (a `{{...}}` filled in later).
pub fn int_or_string(value: &Value) -> Value {
    match value {
        Value::String(text) => text
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    }
}

/// Every string in `value` passed through `rewrite`.
pub fn rewrite_strings(value: &mut Value, rewrite: &dyn Fn(&str) -> String) {
    match value {
        Value::String(text) => *text = rewrite(text),
        Value::Array(list) => list.iter_mut().for_each(|v| rewrite_strings(v, rewrite)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite_strings(v, rewrite)),
        _ => {}
    }
}
