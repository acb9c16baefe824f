//! The commands that need no cluster: `crd`, `validate`, `graph` and `lifecycle`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kube::CustomResourceExt;
use serde_json::Value;

use kube_schema_check::object_meta::{self, NameRule};
use kube_schema_check::schema;
use workflow_operator_core::crd::{WorkFlow, crd_yaml};
use workflow_operator_core::fan_out::node_label;
use workflow_operator_core::lifecycle;
use workflow_operator_core::plan::Compiled;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// Graphviz DOT (`| dot -Tsvg > graph.svg`).
    Dot,
    /// Mermaid (paste into Markdown).
    Mermaid,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// WorkFlow manifests (multi-document YAML is fine); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// A WorkFlow manifest (the first WorkFlow in it is drawn).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
}

#[derive(Debug, Args)]
pub struct LifecycleArgs {
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
}

pub fn crd() -> ExitCode {
    print!("{}", crd_yaml());
    ExitCode::SUCCESS
}

pub fn lifecycle(args: &LifecycleArgs) -> ExitCode {
    match args.format {
        Format::Dot => print!("{}", lifecycle::to_dot()),
        Format::Mermaid => print!("{}", lifecycle::to_mermaid()),
    }
    ExitCode::SUCCESS
}

pub fn graph(args: &GraphArgs) -> ExitCode {
    let workflows = match read_workflows(&args.file) {
        Ok(workflows) => workflows,
        Err(problem) => return fail(&problem),
    };
    let Some((name, value)) = workflows.into_iter().next() else {
        return fail(&format!("{}: no WorkFlow in the file", args.file.display()));
    };
    let problems = problems_of(&value);
    if !problems.is_empty() {
        return fail(&format!(
            "{}: workflow {name}: {}",
            args.file.display(),
            problems.join("; ")
        ));
    }
    let workflow: WorkFlow = serde_json::from_value(value).expect("validated above");
    let compiled = Compiled::new(&workflow.spec);
    let dag = compiled.dag.as_ref().expect("validated above");
    let label = |i: usize| node_label(&workflow.spec.containers[i], compiled.flow.fan_out.get(&i));
    let runs = workflow.spec.run_count();
    let title = (runs > 1).then(|| format!("runs: {runs}"));
    match args.format {
        Format::Dot => print!("{}", dag.to_dot_labelled(label, title.as_deref())),
        Format::Mermaid => print!("{}", dag.to_mermaid_labelled(label, title.as_deref())),
    }
    ExitCode::SUCCESS
}

/// Checks every WorkFlow in the files as the API server (schema) and the operator (DAG) would.
pub fn validate(args: &ValidateArgs) -> ExitCode {
    let mut failed = false;
    for file in &args.files {
        let workflows = match read_workflows(file) {
            Ok(workflows) => workflows,
            Err(problem) => {
                eprintln!("{problem}");
                failed = true;
                continue;
            }
        };
        for (name, value) in workflows {
            let problems = problems_of(&value);
            if problems.is_empty() {
                println!("{}: workflow {name}: valid", file.display());
            } else {
                failed = true;
                for problem in problems {
                    eprintln!("{}: workflow {name}: {problem}", file.display());
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What is wrong with one WorkFlow document: unknown fields, then metadata, schema and CEL rule
/// violations with their field paths, in the order and words of the API server's 422 (what
/// `kubectl create` would be refused for), else DAG problems (what the operator would fail it
/// for).
fn problems_of(value: &Value) -> Vec<String> {
    let crd = WorkFlow::crd();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).expect("schemas serialize"))
        .expect("the WorkFlow CRD has a schema");
    let mut normalized = value.clone();
    // kubectl validates strictly by default (`--validate=strict`, the server's
    // `fieldValidation=Strict`): an unknown field, such as a typo, refuses the whole object.
    let unknown = schema::normalize(&schema, &mut normalized).unknown_fields;
    // A custom resource's metadata as the server checks it on a create: its name is a DNS-1123
    // subdomain (apiextensions-apiserver's customresource validator), labels and annotations.
    let mut errors = object_meta::validate(&normalized, NameRule::Subdomain, true);
    errors.extend(schema::validate(&schema, &normalized));
    schema::validate_rules(&schema, &normalized, None, &mut errors);
    if !unknown.is_empty() || !errors.is_empty() {
        return unknown
            .into_iter()
            .map(|field| format!("unknown field {field:?}"))
            .chain(
                errors
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field, e.message)),
            )
            .collect();
    }
    match serde_json::from_value::<WorkFlow>(normalized) {
        Err(error) => vec![format!("not a valid WorkFlow: {error}")],
        // The steps and the exit steps, as the operator validates them.
        Ok(workflow) => match Compiled::new(&workflow.spec).dag {
            Ok(_) => Vec::new(),
            Err(error) => vec![error.to_string()],
        },
    }
}

/// The WorkFlow documents of a file, with their names.
fn read_workflows(file: &Path) -> Result<Vec<(String, Value)>, String> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| format!("reading standard input: {e}"))?
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    let mut workflows = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|e| format!("{}: not YAML: {e}", file.display()))?;
        if value.get("kind").and_then(Value::as_str) != Some("WorkFlow") {
            continue;
        }
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
            .to_string();
        workflows.push((name, value));
    }
    if workflows.is_empty() {
        return Err(format!("{}: no WorkFlow in the file", file.display()));
    }
    Ok(workflows)
}

fn fail(problem: &str) -> ExitCode {
    eprintln!("error: {problem}");
    ExitCode::FAILURE
}
