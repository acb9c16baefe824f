//! Outputs between steps (issue 16): a step appends `key=value` lines to the file named by
//! `$WORKFLOW_OUTPUTS` (GitHub Actions' `$GITHUB_OUTPUT` convention). That file is the
//! container's termination message, so Kubernetes carries it to the pod's status (at most 4096
//! bytes; the kubelet keeps the last 4096, `kubecontainer.MaxContainerTerminationMessageLength`
//! in pkg/kubelet/container/runtime.go) with no extra permission for the step.
//!
//! A later step names an output as `{{steps.NAME.outputs.KEY}}` in its `command`, `args` or
//! `env` values; the operator substitutes it when it creates that step's Job. This module is
//! the pure part: reading a message into outputs ([`parse`]), finding references
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
/// message path runs in a sandbox, which costs time and hides the host's `/tmp`; a step whose
/// outputs are not read has no need of either.)
pub const UNREAD_OUTPUTS_PATH: &str = "/dev/null";

/// What a step's Job is built with of the data between steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepData<'a> {
    /// The values of the outputs it names.
    pub inputs: Option<&'a Inputs>,
    /// Whether another step names its outputs: `$WORKFLOW_OUTPUTS` is then its termination
    /// message file, else [`UNREAD_OUTPUTS_PATH`].
    pub outputs_read: bool,
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

fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A `{{steps.NAME.outputs.KEY}}` in a step's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference<'a> {
    /// The whole reference, braces included, as written.
    pub text: &'a str,
    /// The step named.
    pub step: &'a str,
    /// The output named.
    pub key: &'a str,
}

/// A `{{...}}` that is not a reference this operator knows.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{text} is not a reference the operator knows: outputs are named {{{{steps.NAME.outputs.KEY}}}}"
)]
pub struct UnknownReference {
    /// The text, braces included.
    pub text: String,
}

/// The references in `text`, in order.
///
/// # Errors
/// [`UnknownReference`] for the first `{{...}}` that is not `{{steps.NAME.outputs.KEY}}`
/// (spaces inside the braces allowed), or an unclosed `{{`.
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
        let parsed = inner
            .strip_prefix("steps.")
            .and_then(|s| s.rsplit_once(".outputs."))
            .filter(|(step, key)| !step.is_empty() && is_key(key));
        let Some((step, key)) = parsed else {
            return Err(UnknownReference {
                text: whole.to_string(),
            });
        };
        found.push(Reference {
            text: whole,
            step,
            key,
        });
        let consumed = start + 2 + end + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    Ok(found)
}

/// A reference whose value is not there.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{text}: step {step:?} wrote no output {key:?}")]
pub struct MissingOutput {
    /// The reference as written.
    pub text: String,
    /// The step named.
    pub step: String,
    /// The output named.
    pub key: String,
}

/// `text` with each reference replaced by its value from `lookup(step, key)`.
///
/// # Errors
/// [`MissingOutput`] for the first reference `lookup` has no value for; an unknown reference
/// (refused when the workflow was checked) is left as written.
pub fn substitute<'v>(
    text: &str,
    lookup: impl Fn(&str, &str) -> Option<&'v str>,
) -> Result<String, MissingOutput> {
    let Ok(found) = references(text) else {
        return Ok(text.to_string());
    };
    if found.is_empty() {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    for reference in found {
        let Some(value) = lookup(reference.step, reference.key) else {
            return Err(MissingOutput {
                text: reference.text.to_string(),
                step: reference.step.to_string(),
                key: reference.key.to_string(),
            });
        };
        let at = rest.find(reference.text).expect("found in order");
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + reference.text.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn references_are_found_in_order_and_anything_else_in_braces_is_refused() {
        let text = "echo {{steps.a.outputs.x}} and {{ steps.b.c.outputs.y_1 }}";
        let found = references(text).unwrap();
        assert_eq!(
            found,
            vec![
                Reference {
                    text: "{{steps.a.outputs.x}}",
                    step: "a",
                    key: "x"
                },
                Reference {
                    text: "{{ steps.b.c.outputs.y_1 }}",
                    step: "b.c",
                    key: "y_1"
                },
            ]
        );
        assert_eq!(references("no braces").unwrap(), vec![]);
        for bad in [
            "{{steps.a.output.x}}",
            "{{workflow.name}}",
            "{{steps..outputs.x}}",
            "{{steps.a.outputs.}}",
            "open {{steps.a.outputs.x",
        ] {
            let error = references(bad).unwrap_err();
            assert!(bad.contains(&error.text), "{bad}: {error}");
        }
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
            substitute("n={{steps.a.outputs.x}}/{{ steps.a.outputs.x }}!", lookup),
            Ok("n=42/42!".into())
        );
        assert_eq!(substitute("plain", lookup), Ok("plain".into()));
        let missing = substitute("{{steps.a.outputs.y}}", lookup).unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"{{steps.a.outputs.y}}: step "a" wrote no output "y""#
        );
    }
}
