//! Label and field selectors, as `?labelSelector=` and `?fieldSelector=` say them:
//! `a=b,c!=d,e in (f,g),h notin (i),j,!k` for labels; `metadata.name=x,status.phase!=Running`
//! for fields (any dotted path into the object, compared as a string).

use serde_json::{Map, Value};

use crate::api::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let bad = || {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector {term:?}"
                ))
            };
            let requirement = if let Some(key) = term.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some((key, values)) = split_set(term, " notin ") {
                Requirement::NotIn(key, values.ok_or_else(bad)?)
            } else if let Some((key, values)) = split_set(term, " in ") {
                Requirement::In(key, values.ok_or_else(bad)?)
            } else if let Some((key, value)) = term.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = term.split_once("==") {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = term.split_once('=') {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else {
                Requirement::Exists(term.to_string())
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as
    /// `metav1.LabelSelectorAsSelector` reads it; `None` for an operator it does not know.
    pub fn from_object(selector: &Value) -> Option<Self> {
        let mut requirements: Vec<Requirement> = selector
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, value)| {
                Requirement::Equals(key.clone(), value.as_str().unwrap_or_default().into())
            })
            .collect();
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = |k: &str| {
                expression
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let key = text("key").to_string();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            requirements.push(match text("operator") {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::NotExists(key),
                _ => return None,
            });
        }
        Some(Self(requirements))
    }

    /// The selector as Go's `labels.Selector.String()` writes it (what
    /// `metav1.FormatLabelSelector` prints): requirements sorted by key, each `k=v`, `k!=v`,
    /// `k in (a,b)`, `k notin (a,b)`, `k` or `!k`, a set's values sorted; empty for none.
    pub fn to_go_string(&self) -> String {
        let set = |values: &[String]| {
            let mut values: Vec<&str> = values.iter().map(String::as_str).collect();
            values.sort_unstable();
            values.join(",")
        };
        let mut written: Vec<(&str, String)> = self
            .0
            .iter()
            .map(|requirement| match requirement {
                Requirement::Equals(k, v) => (k.as_str(), format!("{k}={v}")),
                Requirement::NotEquals(k, v) => (k.as_str(), format!("{k}!={v}")),
                Requirement::In(k, vs) => (k.as_str(), format!("{k} in ({})", set(vs))),
                Requirement::NotIn(k, vs) => (k.as_str(), format!("{k} notin ({})", set(vs))),
                Requirement::Exists(k) => (k.as_str(), k.clone()),
                Requirement::NotExists(k) => (k.as_str(), format!("!{k}")),
            })
            .collect();
        written.sort();
        written
            .into_iter()
            .map(|(_, requirement)| requirement)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: equality and inequality on dotted paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<Term>);

/// One `path=value` or `path!=value` of a field selector.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    path: String,
    equal: bool,
    value: String,
    /// What the field reads as when the object lacks it: empty for a string, Go's zero value as
    /// the kind prints it for another type (`false` for a Node's `spec.unschedulable`).
    absent: &'static str,
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term:?}"
                )));
            };
            terms.push(Term {
                path: path.trim().to_string(),
                equal,
                value: value.trim().to_string(),
                absent: "",
            });
        }
        Ok(Self(terms))
    }

    /// The selector with each field label converted to the path it selects on and what the
    /// field reads as when absent, or the first refusal of `convert` (as
    /// `fields.Selector.Transform` in k8s.io/apimachinery).
    pub fn transform(
        self,
        mut convert: impl FnMut(&str) -> Result<(String, &'static str), ApiError>,
    ) -> Result<Self, ApiError> {
        let terms = self
            .0
            .into_iter()
            .map(|term| {
                let (path, absent) = convert(&term.path)?;
                Ok(Term {
                    path,
                    absent,
                    ..term
                })
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(Self(terms))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|term| {
            let pointer = format!("/{}", term.path.replace('.', "/"));
            let actual = match obj.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => term.absent.to_string(),
                Some(other) => other.to_string(),
            };
            (actual == term.value) == term.equal
        })
    }
}

/// Splits on commas that are not inside parentheses (`a in (x,y),b`).
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

/// `key in (a,b)` -> (key, Some([a, b])); a malformed set gives `Some((key, None))`.
fn split_set(term: &str, op: &str) -> Option<(String, Option<Vec<String>>)> {
    let (key, rest) = term.split_once(op)?;
    let rest = rest.trim();
    let values = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|inner| {
            inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect()
        });
    Some((key.trim().to_string(), values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_selector_object_is_written_as_go_writes_it() {
        let selector = LabelSelector::from_object(&json!({
            "matchLabels": {"tier": "web", "app": "a"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b", "a"]},
                {"key": "gone", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "has", "operator": "Exists"},
            ],
        }))
        .unwrap();
        assert_eq!(
            selector.to_go_string(),
            "app=a,env notin (dev),!gone,has,tier=web,zone in (a,b)"
        );
        assert_eq!(
            LabelSelector::from_object(&Value::Null)
                .unwrap()
                .to_go_string(),
            ""
        );
    }

    #[test]
    fn label_selectors_match_like_the_api_server() {
        let labels = json!({"app": "web", "tier": "front", "team": "a"});
        let labels = labels.as_object();
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("tier in (front,back)", true),
            ("tier in (back)", false),
            ("tier notin (back)", true),
            ("tier notin (front, back)", false),
            ("missing notin (x)", true),
            ("team", true),
            ("missing", false),
            ("!missing", true),
            ("!team", false),
            ("app=web,tier in (front,back),!missing", true),
            ("app=web,team=b", false),
        ];
        for (selector, want) in cases {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(labels),
                want,
                "{selector}"
            );
        }
        assert!(LabelSelector::parse("x in y").is_err());
    }

    #[test]
    fn field_selectors_compare_dotted_paths() {
        let obj =
            json!({"metadata": {"name": "a", "namespace": "ns"}, "status": {"phase": "Running"}});
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name!=a", false),
            ("metadata.namespace==ns,status.phase=Running", true),
            ("status.phase=Succeeded", false),
            ("spec.nodeName=", true),
        ];
        for (selector, want) in cases {
            assert_eq!(
                FieldSelector::parse(selector).unwrap().matches(&obj),
                want,
                "{selector}"
            );
        }
        assert!(FieldSelector::parse("nonsense").is_err());
    }

    #[test]
    fn an_absent_field_reads_as_its_zero_value() {
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        let select = |text: &str| {
            FieldSelector::parse(text)
                .unwrap()
                .transform(|label| Ok((label.to_string(), "false")))
                .unwrap()
                .matches(&node)
        };
        assert!(select("spec.unschedulable=false"));
        assert!(!select("spec.unschedulable=true"));
        assert!(select("spec.unschedulable!=true"));
        let cordoned = json!({"spec": {"unschedulable": true}});
        let selector = FieldSelector::parse("spec.unschedulable=true")
            .unwrap()
            .transform(|label| Ok((label.to_string(), "false")))
            .unwrap();
        assert!(selector.matches(&cordoned));
    }
}
