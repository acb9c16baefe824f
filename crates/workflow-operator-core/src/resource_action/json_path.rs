//! An output's `valueFrom.jsonPath` over a resource step's object, as `kubectl get -o
//! jsonpath=...` prints it (Argo's executor runs that): text outside `{...}` as it is, each
//! `{...}` the fields it names, several results joined by a space. Inside the braces: `.name`,
//! `['name']` (a name with dots), `[N]` (a list's item, negative from the end), `[*]` and
//! `.*` (every item or value); `{range}`, filters and slices are refused. A field that does not
//! exist prints nothing (kubectl's `--allow-missing-template-keys`, on by default).

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Field(String),
    Index(i64),
    All,
}

/// A part of the template: text, or a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Path(Vec<Segment>),
}

/// A parsed `jsonPath`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    parts: Vec<Part>,
}

impl JsonPath {
    /// Parses `template`.
    ///
    /// # Errors
    /// Why it is not one this reads, naming the part.
    pub fn parse(template: &str) -> Result<JsonPath, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let close = (rest[open..].find('}'))
                .ok_or_else(|| format!("{template:?}: a {{ without its }}"))?;
            let inner = rest[open + 1..open + close].trim();
            parts.push(Part::Path(
                path(inner).map_err(|why| format!("{{{inner}}}: {why}"))?,
            ));
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(JsonPath { parts })
    }

    /// The text it prints of `object`.
    pub fn print(&self, object: &Value) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Path(segments) => {
                    let found: Vec<String> =
                        select(object, segments).iter().map(|v| text(v)).collect();
                    out.push_str(&found.join(" "));
                }
            }
        }
        out
    }
}

/// The segments of a path inside braces (`.metadata.name`, `$.items[0]`, `.data['a.b']`).
fn path(inner: &str) -> Result<Vec<Segment>, String> {
    let unsupported = || {
        "only .field, ['field'], [N], [*] and .* are read here (not range, filters, slices or \
         recursive descent)"
            .to_string()
    };
    if inner == "." {
        return Ok(Vec::new());
    }
    let rooted = inner.starts_with('$');
    let mut rest = inner.strip_prefix('$').unwrap_or(inner);
    let mut segments = Vec::new();
    while !rest.is_empty() {
        if rest.starts_with("..") {
            return Err(unsupported());
        }
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            segments.push(match name {
                "" => return Err(unsupported()),
                "*" => Segment::All,
                _ if name.chars().any(|c| "()?@ ,:".contains(c)) => return Err(unsupported()),
                _ => Segment::Field(name.to_string()),
            });
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or_else(|| "a [ without its ]".to_string())?;
            let inside = after[..end].trim();
            let quoted = (inside.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            segments.push(match (inside, quoted, inside.parse::<i64>()) {
                ("*", _, _) => Segment::All,
                (_, Some(name), _) => Segment::Field(name.to_string()),
                (_, None, Ok(index)) => Segment::Index(index),
                _ => return Err(unsupported()),
            });
            rest = &after[end + 1..];
        } else if segments.is_empty() && !rooted {
            // kubectl reads `{metadata.name}` as `{.metadata.name}`.
            return path(&format!(".{rest}"));
        } else {
            return Err(unsupported());
        }
    }
    Ok(segments)
}

/// What `segments` select of `value`, in order.
fn select<'v>(value: &'v Value, segments: &[Segment]) -> Vec<&'v Value> {
    let Some((first, rest)) = segments.split_first() else {
        return vec![value];
    };
    let next: Vec<&Value> = match (first, value) {
        (Segment::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
        (Segment::Index(i), Value::Array(list)) => {
            let at = if *i < 0 { list.len() as i64 + i } else { *i };
            usize::try_from(at)
                .ok()
                .and_then(|at| list.get(at))
                .into_iter()
                .collect()
        }
        (Segment::All, Value::Array(list)) => list.iter().collect(),
        (Segment::All, Value::Object(map)) => map.values().collect(),
        _ => Vec::new(),
    };
    next.into_iter().flat_map(|v| select(v, rest)).collect()
}

/// A value as kubectl prints it: a string as it is, anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
