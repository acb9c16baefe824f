//! `workflow-operator convert FILE...`: Argo Workflows' manifests as ours, on standard output;
//! what could not be converted named on standard error (`--strict`: and exit 1), and what works
//! differently here said there too (`note:`, never failing `--strict`). `--table`
//! prints the converter's table, docs/argo.md. No cluster: the conversion is the core's
//! `convert`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use workflow_operator_core::convert;

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Argo manifests (`argoproj.io/v1alpha1` Workflow, WorkflowTemplate,
    /// ClusterWorkflowTemplate, CronWorkflow; YAML or JSON, several documents a file); `-`
    /// reads standard input. Documents of other kinds are written as they are.
    #[arg(value_name = "FILE", required_unless_present = "table")]
    files: Vec<PathBuf>,
    /// Exit 1 when anything could not be converted (it is named on standard error either way).
    #[arg(long)]
    strict: bool,
    /// Print the converter's table as Markdown instead: every Argo field, what it becomes and
    /// where the meaning differs (what docs/argo.md holds).
    #[arg(long, conflicts_with_all = ["files", "strict"])]
    table: bool,
}

pub fn convert(args: &ConvertArgs) -> ExitCode {
    if args.table {
        print!("{}", convert::table::markdown());
        return ExitCode::SUCCESS;
    }
    let mut failed = false;
    let mut not_converted = 0;
    let mut first = true;
    for file in &args.files {
        let documents = match read(file) {
            Ok(documents) => documents,
            Err(problem) => {
                eprintln!("{problem}");
                failed = true;
                continue;
            }
        };
        for document in documents {
            let Some(ours) = converted(file, &document, &mut not_converted) else {
                continue;
            };
            match serde_saphyr::to_string(&ordered(&ours)) {
                Ok(yaml) => {
                    print!("{}{yaml}", if first { "" } else { "---\n" });
                    first = false;
                }
                Err(e) => {
                    eprintln!("{}: writing YAML: {e}", file.display());
                    failed = true;
                }
            }
        }
    }
    if failed || (args.strict && not_converted > 0) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The document as ours (another kind as it is), each problem named on standard error and
/// counted in `not_converted`, each note said there; `None` for an Argo kind that has no counterpart here.
fn converted(file: &Path, document: &Value, not_converted: &mut usize) -> Option<Value> {
    if !convert::is_argo(document) {
        return Some(document.clone());
    }
    let what = describe(file, document);
    match convert::convert(document) {
        Ok(converted) => {
            for problem in &converted.problems {
                eprintln!("{what}: {problem}");
            }
            for note in &converted.notes {
                eprintln!("{what}: note: {note}");
            }
            *not_converted += converted.problems.len();
            Some(converted.document)
        }
        Err(why) => {
            eprintln!("{what}: {why}");
            *not_converted += 1;
            None
        }
    }
}

/// `FILE: Workflow NAME`, as the problems of a document are prefixed.
pub(super) fn describe(file: &Path, document: &Value) -> String {
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = document
        .pointer("/metadata/name")
        .or_else(|| document.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    format!("{}: {kind} {name}", file.display())
}

/// The documents of `file` (`-`: standard input).
pub(super) fn read(file: &Path) -> Result<Vec<Value>, String> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| format!("reading standard input: {e}"))?
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    convert::read(&text).map_err(|e| format!("{}: not YAML: {e}", file.display()))
}

/// The fields written first, in this order, so a converted document reads as one written by
/// hand (the rest follow in alphabetical order).
const FIRST: [&str; 17] = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "generateName",
    "namespace",
    "stepName",
    "template",
    "templateRef",
    "dependsOn",
    "when",
    "image",
    "command",
    "args",
    "source",
    "arguments",
    "inputs",
];

/// `value` as YAML with the [`FIRST`] fields first.
fn ordered(value: &Value) -> serde_yaml::Value {
    match value {
        Value::Object(map) => {
            let rank = |k: &str| FIRST.iter().position(|f| *f == k).unwrap_or(FIRST.len());
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(|k| rank(k));
            serde_yaml::Value::Mapping(
                keys.into_iter()
                    .map(|k| (serde_yaml::Value::String(k.clone()), ordered(&map[k])))
                    .collect(),
            )
        }
        Value::Array(list) => serde_yaml::Value::Sequence(list.iter().map(ordered).collect()),
        other => serde_yaml::to_value(other).unwrap_or(serde_yaml::Value::Null),
    }
}
