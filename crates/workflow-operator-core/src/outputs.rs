//! Outputs between steps: a step appends `key=value` lines to the file named by
//! `$WORKFLOW_OUTPUTS` (GitHub Actions' `$GITHUB_OUTPUT` convention). That file is the
//! container's termination message, so Kubernetes carries it to the pod's status (at most 4096
//! bytes; the kubelet keeps the last 4096, `kubecontainer.MaxContainerTerminationMessageLength`
//! in pkg/kubelet/container/runtime.go) with no extra permission for the step.
//!
//! A later step names an output as `{{steps.NAME.outputs.KEY}}` (or `steps["NAME"]`) in its
//! `command`, `args` or `env` values, and a step that fans out names its item as `{{item}}` or
//! `{{item.FIELD}}`; the operator substitutes them when it creates the step's Job. This module
//! is the pure part: reading a message into outputs ([`parse`]), finding references
//! ([`references`]) and substituting them ([`substitute`]).

use std::collections::BTreeMap;

use thiserror::Error;

/// The environment variable that names the outputs file.
pub const OUTPUTS_ENV: &str = "WORKFLOW_OUTPUTS";

/// Where the outputs file is: Kubernetes' default `terminationMessagePath`.
pub const OUTPUTS_PATH: &str = "/dev/termination-log";

/// The most the kubelet carries of a termination message; a message this long may have been
/// cut (the kubelet keeps its end), so it is refused rather than read wrong.
pub const MAX_OUTPUTS_BYTES: usize = 4096;

/// A step's outputs, by key.
pub type Outputs = BTreeMap<String, String>;

/// The values of the outputs a step names, by (step, key): what its Job is built with.
pub type Inputs = BTreeMap<(String, String), String>;

/// Where `$WORKFLOW_OUTPUTS` points in a step whose outputs no step names: nothing reads them,
/// so nothing keeps them. (On the embedded control plane a process told of its termination
/// message path runs in a sandbox, which costs time; a step whose outputs are not read has no
/// need of it.)
pub const UNREAD_OUTPUTS_PATH: &str = "/dev/null";

/// What a step's Job is built with of the data between steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepData<'a> {
    /// The values of the outputs it names.
    pub inputs: Option<&'a Inputs>,
    /// Whether another step names its outputs: `$WORKFLOW_OUTPUTS` is then its termination
    /// message file, else [`UNREAD_OUTPUTS_PATH`].
    pub outputs_read: bool,
    /// Whether another step reads its standard output (`{{steps.NAME.outputs.result}}`).
    pub result_read: bool,
}

/// Why a termination message is not a step's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OutputsError {
    /// The message reached the kubelet's limit: part of it may be lost.
    #[error(
        "its outputs reached {MAX_OUTPUTS_BYTES} bytes, the limit of a termination message \
         (the kubelet keeps only the last {MAX_OUTPUTS_BYTES}): write less to $WORKFLOW_OUTPUTS, \
         or use the workspace for files"
    )]
    TooLarge,
    /// A line is not `key=value`.
    #[error("its outputs line {number} is not key=value: {line:?}")]
    NotKeyValue {
        /// From 1.
        number: usize,
        /// The line, cut to 80 characters.
        line: String,
    },
    /// A key is not a name (letters, digits, `_` and `-`, not starting with a digit or `-`).
    #[error(
        "its outputs line {number} has the key {key:?}: a key is letters, digits, _ and -, starting with a letter or _"
    )]
    BadKey {
        /// From 1.
        number: usize,
        /// The key.
        key: String,
    },
}

/// Reads a termination message as outputs: `key=value` lines (the value is the rest of the
/// line, `=` included); blank lines are skipped; a later line of the same key wins, as in
/// `$GITHUB_OUTPUT`.
///
/// # Errors
/// [`OutputsError`] when the message is at the limit or a line is not `key=value`.
pub fn parse(message: &str) -> Result<Outputs, OutputsError> {
    if message.len() >= MAX_OUTPUTS_BYTES {
        return Err(OutputsError::TooLarge);
    }
    let mut outputs = Outputs::new();
    for (n, line) in message.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let number = n + 1;
        let Some((key, value)) = line.split_once('=') else {
            return Err(OutputsError::NotKeyValue {
                number,
                line: line.chars().take(80).collect(),
            });
        };
        if !is_key(key) {
            return Err(OutputsError::BadKey {
                number,
                key: key.to_string(),
            });
        }
        outputs.insert(key.to_string(), value.to_string());
    }
    Ok(outputs)
}

/// The output key a reference's `KEY` names: a key, Argo's `parameters.KEY` (the same
/// output), or `artifacts.NAME` (kept whole: an artifact's outputs entry is its stored key).
fn output_key(key: &str) -> Option<&str> {
    if let Some(name) = key.strip_prefix("parameters.") {
        return is_key(name).then_some(name);
    }
    let name = key.strip_prefix(ARTIFACT_PREFIX).unwrap_or(key);
    is_key(name).then_some(key)
}

/// The key of `{{steps.NAME.outputs.parameters}}`: of a step that fans out, every item's
/// parameters (Argo's aggregate); no step writes an output of that name.
pub const ALL_PARAMETERS: &str = "parameters";

/// What an output artifact's key in a step's outputs starts with: `artifacts.NAME`.
pub const ARTIFACT_PREFIX: &str = "artifacts.";

fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A `{{...}}` in a step's text: `{{steps.NAME.outputs.KEY}}` (or one of [`STEP_FIELDS`],
/// `{{steps.NAME.status}}`), or `{{item}}` /
/// `{{item.FIELD}}` in a step that fans out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference<'a> {
    /// The whole reference, braces included, as written.
    pub text: &'a str,
    /// What it names.
    pub source: Source<'a>,
}

/// What a [`Reference`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// `{{steps.NAME.outputs.KEY}}`: the output `key` of step `step`.
    Output {
        /// The step named.
        step: &'a str,
        /// The output named.
        key: &'a str,
    },
    /// `{{item}}` (`field` none) or `{{item.FIELD}}`: the item of a step that fans out.
    Item {
        /// The field of an object item.
        field: Option<&'a str>,
    },
    /// `{{retries}}`: the step's attempt (`retryStrategy`), 0 for the first, filled in when
    /// its Job is built ([`fill_retries`]).
    Retries,
    /// `{{workflow.duration}}`, `{{workflow.status}}` or `{{workflow.failures}}` (the name
    /// without `workflow.`), or `{{pod.name}}` (`pod.name`): known only when the step's Job is
    /// built (the pod's name once it runs), filled then ([`fill_workflow`]).
    Workflow(&'a str),
}

/// Argo's `{{pod.name}}`: the name of the pod running the step.
pub const POD_NAME: &str = "pod.name";

/// The `{{workflow.NAME}}` forms known only when a step's Job is built, as Argo names them.
pub const WORKFLOW_AT_RUN: [&str; 3] = ["duration", "status", "failures"];

/// `value` as Go's `json.Marshal` writes it, as Argo's JSON variables are
/// (`{{workflow.failures}}`, `{{workflow.parameters.json}}`): compact, and `<`, `>`, `&`, U+2028
/// and U+2029 escaped (`\u003c`), which Go does so that the text is safe inside HTML. They can
/// only be inside strings, so replacing them in the written text keeps it the same JSON.
pub fn go_json(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(value).expect("a JSON value serializes");
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// A `{{...}}` that is not a reference this operator knows.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{text} is not a reference the operator knows: outputs are named {{{{steps.NAME.outputs.KEY}}}} \
     (or .outputs.parameters.KEY, .outputs.result, .outputs.artifacts.NAME), a step that ended \
     {{{{steps.NAME.status}}}} (.exitCode, .startedAt, .finishedAt), a daemon's \
     {{{{steps.NAME.ip}}}}, items {{{{item}}}} or \
     {{{{item.FIELD}}}}, the attempt {{{{retries}}}}, the run's {{{{workflow.duration}}}}, \
     {{{{workflow.status}}}}, {{{{workflow.failures}}}}"
)]
pub struct UnknownReference {
    /// The text, braces included.
    pub text: String,
}

/// The references in `text`, in order.
///
/// # Errors
/// [`UnknownReference`] for the first `{{...}}` that is not `{{steps.NAME.outputs.KEY}}`,
/// `{{item}}` or `{{item.FIELD}}` (spaces inside the braces allowed), or an unclosed `{{`.
pub fn references(text: &str) -> Result<Vec<Reference<'_>>, UnknownReference> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(UnknownReference {
                text: rest[start..].chars().take(80).collect(),
            });
        };
        let whole = &text[offset + start..offset + start + 2 + end + 2];
        let inner = after[..end].trim();
        let output = output_reference(inner).map(|(step, key)| Source::Output { step, key });
        let item = match inner.strip_prefix("item") {
            Some("") => Some(Source::Item { field: None }),
            Some(field) => field
                .strip_prefix('.')
                .filter(|f| is_key(f))
                .map(|f| Source::Item { field: Some(f) }),
            None => None,
        };
        let retries = (inner == "retries").then_some(Source::Retries);
        let workflow = (inner.strip_prefix("workflow."))
            .filter(|name| WORKFLOW_AT_RUN.contains(name))
            .or((inner == POD_NAME).then_some(inner))
            .map(Source::Workflow);
        let Some(source) = output.or(item).or(retries).or(workflow) else {
            return Err(UnknownReference {
                text: whole.to_string(),
            });
        };
        found.push(Reference {
            text: whole,
            source,
        });
        let consumed = start + 2 + end + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    Ok(found)
}

/// The step and output `inner` (a reference without its braces) names:
/// `steps.NAME.outputs.KEY`, or `steps["NAME"].outputs.KEY` (or single quotes), the form a
/// `when` needs for a name that is not a CEL identifier.
fn output_reference(inner: &str) -> Option<(&str, &str)> {
    if let Some(found) = step_field_reference(inner) {
        return Some(found);
    }
    let (step, key) = match inner.strip_prefix("steps[") {
        Some(bracket) => {
            let quote = bracket.chars().next().filter(|c| matches!(c, '"' | '\''))?;
            let (step, rest) = bracket[1..].split_once(quote)?;
            (step, rest.strip_prefix("].outputs.")?)
        }
        None => inner.strip_prefix("steps.")?.rsplit_once(".outputs.")?,
    };
    Some((step, output_key(key)?)).filter(|(step, _)| !step.is_empty())
}

/// Argo's `{{steps.NAME.status}}`, `.exitCode`, `.startedAt`, `.finishedAt` and `.ip` (a
/// daemon step's pod's IP): what a step that ended, or a daemon that is ready, tells of itself
/// rather than an output it wrote. A reference names one as the
/// output key `@FIELD` ([`step_field`]), which no output a step writes can be (a key starts
/// with a letter or `_`), so it travels with the outputs a step names and is filled with them.
pub const STEP_FIELDS: [&str; 5] = ["status", "exitCode", "startedAt", "finishedAt", "ip"];

/// The output key that stands for each of [`STEP_FIELDS`].
const STEP_FIELD_KEYS: [&str; 5] = ["@status", "@exitCode", "@startedAt", "@finishedAt", "@ip"];

/// The output key of Argo's `{{steps.NAME.ip}}`: only a daemon step's is recorded.
pub const IP_KEY: &str = "@ip";

/// The field of [`STEP_FIELDS`] an output key stands for (`@exitCode` is `exitCode`).
pub fn step_field(key: &str) -> Option<&str> {
    key.strip_prefix('@').filter(|f| STEP_FIELDS.contains(f))
}

/// The step and key of `steps.NAME.FIELD` or `steps["NAME"].FIELD`, FIELD one of
/// [`STEP_FIELDS`].
fn step_field_reference(inner: &str) -> Option<(&str, &'static str)> {
    let (step, field) = match inner.strip_prefix("steps[") {
        Some(bracket) => {
            let quote = bracket.chars().next().filter(|c| matches!(c, '"' | '\''))?;
            let (step, rest) = bracket[1..].split_once(quote)?;
            (step, rest.strip_prefix("].")?)
        }
        None => inner.strip_prefix("steps.")?.rsplit_once('.')?,
    };
    let at = STEP_FIELDS.iter().position(|f| *f == field)?;
    (!step.is_empty() && !step.ends_with(".outputs")).then_some((step, STEP_FIELD_KEYS[at]))
}

/// The reference to output `key` of `step` as written: `{{steps.STEP.outputs.KEY}}`, or
/// `{{steps.STEP.FIELD}}` for one of [`STEP_FIELDS`].
pub fn reference_text(step: &str, key: &str) -> String {
    match step_field(key) {
        Some(field) => format!("{{{{steps.{step}.{field}}}}}"),
        None => format!("{{{{steps.{step}.outputs.{key}}}}}"),
    }
}

/// A reference whose value is not there.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{text}: step {step:?} {}", missing_why(*skipped, key))]
pub struct MissingOutput {
    /// The reference as written.
    pub text: String,
    /// The step named.
    pub step: String,
    /// The output named.
    pub key: String,
    /// Whether the step named was skipped by its `when` (so it wrote nothing at all).
    pub skipped: bool,
}

fn missing_why(skipped: bool, key: &str) -> String {
    if let Some(field) = step_field(key) {
        let why = if skipped {
            "was skipped (its when was false)"
        } else {
            "did not run, or did not exit by itself"
        };
        return format!("has no {field}: it {why}");
    }
    if skipped {
        "was skipped (its when was false), so it wrote no outputs".to_string()
    } else {
        format!("wrote no output {key:?}")
    }
}

/// Why a reference cannot be replaced.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Unresolved {
    /// An output that is not there.
    #[error(transparent)]
    Output(#[from] MissingOutput),
    /// `{{item.FIELD}}` of an item that is not an object with that field.
    #[error("{text}: the item {item} has no field {field:?}")]
    ItemField {
        /// The reference as written.
        text: String,
        /// The item, as JSON (cut to 80 characters).
        item: String,
        /// The field named.
        field: String,
    },
}

/// The text an item stands for in `{{item}}` and `$WORKFLOW_ITEM`: a string as itself,
/// anything else (a number, an object) as JSON.
pub fn item_text(item: &serde_json::Value) -> String {
    match item {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The text of `{{item}}` (`field` none) or `{{item.FIELD}}` for `item`; `None` when the item
/// is not an object with that field.
pub fn item_value(item: &serde_json::Value, field: Option<&str>) -> Option<String> {
    match field {
        None => Some(item_text(item)),
        Some(field) => item.get(field).map(item_text),
    }
}

/// `text` with each reference replaced: an output by its value from `lookup(step, key)`, an
/// item reference by `item`'s value.
///
/// # Errors
/// [`Unresolved`] for the first reference without a value; an unknown reference (refused
/// when the workflow was checked), or an item reference where there is no `item`, is left as
/// written.
pub fn substitute<'v>(
    text: &str,
    lookup: impl Fn(&str, &str) -> Option<&'v str>,
    item: Option<&serde_json::Value>,
) -> Result<String, Unresolved> {
    let Ok(found) = references(text) else {
        return Ok(text.to_string());
    };
    if found.is_empty() {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    for reference in found {
        let value = match reference.source {
            Source::Output { step, key } => match lookup(step, key) {
                Some(value) => value.to_string(),
                None => {
                    return Err(Unresolved::Output(MissingOutput {
                        text: reference.text.to_string(),
                        step: step.to_string(),
                        key: key.to_string(),
                        skipped: false,
                    }));
                }
            },
            // Filled when the Job is built, by `fill_retries` and `fill_workflow`.
            Source::Retries | Source::Workflow(_) => continue,
            Source::Item { field } => {
                let Some(item) = item else { continue };
                match item_value(item, field) {
                    Some(value) => value,
                    None => {
                        return Err(Unresolved::ItemField {
                            text: reference.text.to_string(),
                            item: item.to_string().chars().take(80).collect(),
                            field: field.unwrap_or_default().to_string(),
                        });
                    }
                }
            }
        };
        let at = rest.find(reference.text).expect("found in order");
        out.push_str(&rest[..at]);
        out.push_str(&value);
        rest = &rest[at + reference.text.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` with each `{{retries}}` (spaces inside the braces allowed) replaced by `attempt`.
pub fn fill_retries(text: &str, attempt: u32) -> String {
    let Ok(found) = references(text) else {
        return text.to_string();
    };
    let attempt = attempt.to_string();
    let mut out = text.to_string();
    for reference in found.iter().filter(|r| r.source == Source::Retries) {
        out = out.replacen(reference.text, &attempt, 1);
    }
    out
}

/// `text` with each `{{workflow.NAME}}` of [`WORKFLOW_AT_RUN`] replaced by `value(NAME)`, and
/// `{{pod.name}}` by `value("pod.name")`.
pub fn fill_workflow(text: &str, value: impl Fn(&str) -> String) -> String {
    let Ok(found) = references(text) else {
        return text.to_string();
    };
    let mut out = text.to_string();
    for reference in found {
        if let Source::Workflow(name) = reference.source {
            out = out.replacen(reference.text, &value(name), 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_escapes_what_go_escapes_for_html_and_nothing_else() {
        let value = serde_json::json!([{"m": "a<b>c&d\u{2028}\u{2029} \"é\" ü"}]);
        assert_eq!(
            go_json(&value),
            r#"[{"m":"a\u003cb\u003ec\u0026d\u2028\u2029 \"é\" ü"}]"#
        );
        let back: serde_json::Value = serde_json::from_str(&go_json(&value)).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn retries_is_the_attempt_filled_in_when_the_job_is_built() {
        let text = "echo attempt {{retries}} of {{ retries }} {{item}}";
        let found = references(text).unwrap();
        assert_eq!(found[0].source, Source::Retries);
        assert_eq!(
            substitute(text, |_, _| None, None),
            Ok(text.to_string()),
            "left for fill_retries"
        );
        assert_eq!(fill_retries(text, 2), "echo attempt 2 of 2 {{item}}");
    }

    #[test]
    fn a_message_is_key_value_lines_the_last_of_a_key_winning() {
        let outputs = parse("a=1\n\nurl=http://x/?q=2\r\na=3\n").unwrap();
        assert_eq!(outputs["a"], "3");
        assert_eq!(outputs["url"], "http://x/?q=2");
        assert_eq!(outputs.len(), 2);
        assert_eq!(parse(""), Ok(Outputs::new()));
        assert_eq!(parse("empty=").unwrap()["empty"], "");
    }

    #[test]
    fn a_line_that_is_not_key_value_or_a_message_at_the_limit_is_refused_saying_which() {
        assert_eq!(
            parse("a=1\nhello\n"),
            Err(OutputsError::NotKeyValue {
                number: 2,
                line: "hello".into()
            })
        );
        assert_eq!(
            parse("1x=2"),
            Err(OutputsError::BadKey {
                number: 1,
                key: "1x".into()
            })
        );
        assert_eq!(parse(&"a=b\n".repeat(1024)), Err(OutputsError::TooLarge));
        assert!(parse(&"a=b\n".repeat(1023)).is_ok());
        let message = OutputsError::TooLarge.to_string();
        assert!(message.contains("4096 bytes"), "{message}");
    }

    fn output<'a>(text: &'a str, step: &'a str, key: &'a str) -> Reference<'a> {
        Reference {
            text,
            source: Source::Output { step, key },
        }
    }

    #[test]
    fn references_are_found_in_order_and_anything_else_in_braces_is_refused() {
        let text = "echo {{steps.a.outputs.x}} and {{ steps.b.c.outputs.y_1 }}";
        let found = references(text).unwrap();
        assert_eq!(
            found,
            vec![
                output("{{steps.a.outputs.x}}", "a", "x"),
                output("{{ steps.b.c.outputs.y_1 }}", "b.c", "y_1"),
            ]
        );
        assert_eq!(references("no braces").unwrap(), vec![]);
        for bad in [
            "{{steps.a.output.x}}",
            "{{workflow.name}}",
            "{{steps..outputs.x}}",
            "{{steps.a.outputs.}}",
            "open {{steps.a.outputs.x",
            "{{items}}",
            "{{item.}}",
            "{{item.a.b}}",
        ] {
            let error = references(bad).unwrap_err();
            assert!(bad.contains(&error.text), "{bad}: {error}");
        }
    }

    #[test]
    fn a_step_is_named_in_the_bracket_form_too() {
        let text = r#"{{steps["flip-coin"].outputs.result}} {{ steps['a'].outputs.parameters.k }}"#;
        assert_eq!(
            references(text).unwrap(),
            vec![
                output(
                    r#"{{steps["flip-coin"].outputs.result}}"#,
                    "flip-coin",
                    "result"
                ),
                output("{{ steps['a'].outputs.parameters.k }}", "a", "k"),
            ]
        );
        for bad in [
            r#"{{steps[""].outputs.x}}"#,
            r#"{{steps["a'].outputs.x}}"#,
            r#"{{steps["a"]outputs.x}}"#,
            r#"{{steps["a"].outputs.}}"#,
        ] {
            let error = references(bad).unwrap_err();
            assert!(bad.contains(&error.text), "{bad}: {error}");
        }
    }

    #[test]
    fn item_references_name_the_item_or_one_of_its_fields() {
        let found = references("{{item}}-{{ item.name }}").unwrap();
        assert_eq!(
            found.iter().map(|r| r.source).collect::<Vec<_>>(),
            [
                Source::Item { field: None },
                Source::Item {
                    field: Some("name")
                }
            ]
        );
    }

    #[test]
    fn substitution_replaces_each_reference_or_names_the_missing_one() {
        let values: Outputs = [("x".to_string(), "42".to_string())].into();
        let lookup = |step: &str, key: &str| {
            (step == "a")
                .then(|| values.get(key))
                .flatten()
                .map(String::as_str)
        };
        assert_eq!(
            substitute(
                "n={{steps.a.outputs.x}}/{{ steps.a.outputs.x }}!",
                lookup,
                None
            ),
            Ok("n=42/42!".into())
        );
        assert_eq!(substitute("plain", lookup, None), Ok("plain".into()));
        let missing = substitute("{{steps.a.outputs.y}}", lookup, None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"{{steps.a.outputs.y}}: step "a" wrote no output "y""#
        );
    }

    #[test]
    fn an_item_is_substituted_as_itself_or_as_json_and_a_missing_field_is_named() {
        let none = |_: &str, _: &str| None;
        let object = serde_json::json!({"os": "linux", "n": 2});
        assert_eq!(
            substitute("{{item.os}}/{{item.n}} {{item}}", none, Some(&object)),
            Ok(r#"linux/2 {"n":2,"os":"linux"}"#.into())
        );
        let word = serde_json::json!("blue");
        assert_eq!(
            substitute("paint {{item}}", none, Some(&word)),
            Ok("paint blue".into())
        );
        assert_eq!(
            substitute("{{item}} {{steps.a.outputs.x}}", |_, _| Some("1"), None),
            Ok("{{item}} 1".into())
        );
        let missing = substitute("{{item.arch}}", none, Some(&object)).unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"{{item.arch}}: the item {"n":2,"os":"linux"} has no field "arch""#
        );
    }
}
