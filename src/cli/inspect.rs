//! The commands that need no cluster: `crd`, `validate` and `lifecycle`; and the checks
//! `submit` shares with `validate`, and the reading of a manifest `graph` shares.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kube::{CustomResourceExt, Resource, ResourceExt};
use serde_json::Value;

use k8s_openapi::jiff::Timestamp;
use kube_schema_check::object_meta::{self, NameRule};
use kube_schema_check::schema;
use workflow_operator_core::convert;
use workflow_operator_core::crd::{
    CronWorkFlow, WorkFlow, WorkFlowSpec, WorkFlowTrigger, crd_yaml,
};
use workflow_operator_core::cron;
use workflow_operator_core::lifecycle;
use workflow_operator_core::plan;
use workflow_operator_core::template::{
    self, CLUSTER_KIND, ClusterWorkFlowTemplate, NAMESPACED_KIND, ResolvedTemplate, Source,
    WorkFlowTemplate,
};
use workflow_operator_core::trigger;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// Graphviz DOT (`| dot -Tsvg > graph.svg`).
    Dot,
    /// Mermaid (paste into Markdown).
    Mermaid,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// WorkFlow, CronWorkFlow, WorkFlowTrigger and shared template manifests (multi-document
    /// YAML is fine); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
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

/// The first WorkFlow of `file`, its templates expanded with the shared templates the file
/// holds; or why it cannot be drawn.
pub(super) fn expanded_workflow(file: &Path) -> Result<WorkFlowSpec, String> {
    let documents = read_documents(file)?;
    let shared = shared_templates(&documents);
    let document = documents
        .iter()
        .find(|d| d.kind == WORKFLOW_KIND)
        .ok_or_else(|| format!("{}: no WorkFlow in the file", file.display()))?;
    let failed = |problems: Vec<String>| {
        format!(
            "{}: workflow {}: {}",
            file.display(),
            document.name,
            problems.join("; ")
        )
    };
    let mut workflow = parse_workflow(&document.value).map_err(failed)?;
    let absent = record_from(&mut workflow, &shared);
    if let Some(source) = absent.first() {
        return Err(failed(vec![format!(
            "{} is not in the file: give its manifest in the same file to draw the workflow",
            source.describe()
        )]));
    }
    plan::spec_problems(&workflow, &[])
        .map(|spec| spec.expect("nothing absent"))
        .map_err(failed)
}

/// Checks every WorkFlow, CronWorkFlow, WorkFlowTrigger, WorkFlowTemplate and
/// ClusterWorkFlowTemplate in the files as the API server (schema) and the operator
/// (schedules, expressions, templates, DAG) would; a CronWorkFlow's and a WorkFlowTrigger's
/// runs as WorkFlows. A workflow's shared templates are taken from the files; one
/// they do not hold gets a note (the operator reads it at run time).
pub fn validate(args: &ValidateArgs) -> ExitCode {
    let mut failed = false;
    let mut read = Vec::new();
    for file in &args.files {
        match read_documents(file) {
            Ok(documents) => read.push((file, documents)),
            Err(problem) => {
                eprintln!("{problem}");
                failed = true;
            }
        }
    }
    let shared: Vec<ResolvedTemplate> = read
        .iter()
        .flat_map(|(_, documents)| shared_templates(documents))
        .collect();
    for (file, documents) in &read {
        for document in documents {
            let what = format!(
                "{}: {} {}",
                file.display(),
                document.kind.to_lowercase(),
                document.name
            );
            let Checked { problems, said } = document_problems(document, &shared);
            for line in said {
                println!("{what}: {line}");
            }
            if problems.is_empty() {
                println!("{what}: valid");
            } else {
                failed = true;
                for problem in problems {
                    eprintln!("{what}: {problem}");
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

/// What `validate` says of one document.
#[derive(Debug, Default)]
struct Checked {
    /// What is wrong, a line of standard error each.
    problems: Vec<String>,
    /// What is worth knowing (`note: ...`, `next: ...`), a line of standard output each.
    said: Vec<String>,
}

/// What is wrong with one document (none for a shared template the schema takes), as
/// `validate` says it.
pub(super) fn problems(document: &Document) -> Vec<String> {
    document_problems(document, &[]).problems
}

/// The problems of one document, and what is worth saying about it.
fn document_problems(document: &Document, shared: &[ResolvedTemplate]) -> Checked {
    match document.kind {
        WORKFLOW_KIND => workflow_problems(&document.value, shared),
        CRON_KIND => cron_problems(&document.value, shared),
        TRIGGER_KIND => trigger_problems(&document.value, shared),
        kind => Checked {
            problems: schema_problems(kind, &document.value)
                .err()
                .unwrap_or_default(),
            ..Checked::default()
        },
    }
}

/// A WorkFlow document's problems, and a note per shared template the files do not hold.
fn workflow_problems(value: &Value, shared: &[ResolvedTemplate]) -> Checked {
    let mut workflow = match parse_workflow(value) {
        Ok(workflow) => workflow,
        Err(problems) => {
            return Checked {
                problems,
                ..Checked::default()
            };
        }
    };
    let absent = record_from(&mut workflow, shared);
    let said = absent
        .iter()
        .map(|source| {
            format!(
                "note: {} is not in the files given: the operator reads it from the cluster when the workflow runs",
                source.describe()
            )
        })
        .collect();
    Checked {
        problems: plan::spec_problems(&workflow, &absent)
            .err()
            .unwrap_or_default(),
        said,
    }
}

/// A CronWorkFlow document checked as the API server checks it, its schedules and time zone
/// parsed, and the spec of its runs checked as a WorkFlow's is (each problem prefixed with its
/// field, `spec.workflowSpec: ...`); when all is valid, its next times, as `cron get` shows
/// them (`@every` counted from now).
fn cron_problems(value: &Value, shared: &[ResolvedTemplate]) -> Checked {
    let parsed = schema_problems(CRON_KIND, value).and_then(|normalized| {
        serde_json::from_value::<CronWorkFlow>(normalized)
            .map_err(|e| vec![format!("not a valid CronWorkFlow: {e}")])
    });
    let cron = match parsed {
        Ok(cron) => cron,
        Err(problems) => {
            return Checked {
                problems,
                ..Checked::default()
            };
        }
    };
    let mut checked = match run_document(&cron) {
        Ok(run) => {
            let mut checked = workflow_problems(&run, shared);
            let field = cron::spec_field(&cron);
            for problem in &mut checked.problems {
                *problem = format!("{field}: {problem}");
            }
            checked
        }
        Err(problem) => Checked {
            problems: vec![problem],
            ..Checked::default()
        },
    };
    // Whole seconds, as a creation timestamp is: `@every` counts from it.
    let now = Timestamp::from_second(Timestamp::now().as_second()).expect("now is a time");
    match super::cron::next_times(&cron, now) {
        Ok(_) if !checked.problems.is_empty() => {}
        Ok(times) => checked.said.extend(
            times
                .into_iter()
                .map(|t| format!("next: {} = {}", t.zoned, t.utc)),
        ),
        Err(problems) => {
            checked.problems.splice(0..0, problems);
        }
    }
    checked
}

/// A WorkFlowTrigger document checked as the API server checks it, then as the operator does
/// (its expressions compile, one source, one verification: `trigger::problems`), and the spec
/// of its runs checked as a WorkFlow's is (each problem prefixed with its field).
fn trigger_problems(value: &Value, shared: &[ResolvedTemplate]) -> Checked {
    let parsed = schema_problems(TRIGGER_KIND, value).and_then(|normalized| {
        serde_json::from_value::<WorkFlowTrigger>(normalized)
            .map_err(|e| vec![format!("not a valid WorkFlowTrigger: {e}")])
    });
    let trigger = match parsed {
        Ok(trigger) => trigger,
        Err(problems) => {
            return Checked {
                problems,
                ..Checked::default()
            };
        }
    };
    let mut problems = trigger::problems(&trigger);
    if let Ok(mut spec) = trigger::run_spec(&trigger) {
        // A delivery gives the parameters: each checked with a value.
        let values: Vec<(String, String)> = (trigger.spec.parameters.iter())
            .map(|p| (p.name.clone(), "value".to_string()))
            .collect();
        trigger::set_parameters(&mut spec, &values);
        let field = match trigger.spec.workflow_spec.is_some() {
            true => "spec.workflowSpec",
            false => "spec.workflowTemplateRef",
        };
        let run = serde_json::json!({
            "apiVersion": WorkFlow::api_version(&()),
            "kind": WORKFLOW_KIND,
            "metadata": {"name": trigger.name_any()},
            "spec": spec,
        });
        let checked = workflow_problems(&run, shared);
        // The run's spec as a WorkFlow: what `run_of` said of it is said again, with its field.
        problems.retain(|p| !p.starts_with("the run's spec is not a WorkFlow spec"));
        problems.extend(
            checked
                .problems
                .into_iter()
                .map(|p| format!("{field}: {p}")),
        );
        return Checked {
            problems,
            said: checked.said,
        };
    }
    Checked {
        problems,
        ..Checked::default()
    }
}

/// The WorkFlow document of a run of `cron` started now, its spec as written
/// (`cron::run_spec`), so that the WorkFlow schema sees an unknown field in it.
fn run_document(cron: &CronWorkFlow) -> Result<Value, String> {
    Ok(serde_json::json!({
        "apiVersion": WorkFlow::api_version(&()),
        "kind": WORKFLOW_KIND,
        "metadata": cron::run_metadata(cron, Timestamp::now().as_second()),
        "spec": cron::run_spec(cron)?,
    }))
}

/// A WorkFlow document checked as the API server checks it on a create, then read.
pub(crate) fn parse_workflow(value: &Value) -> Result<WorkFlow, Vec<String>> {
    let normalized = schema_problems(WORKFLOW_KIND, value)?;
    serde_json::from_value(normalized).map_err(|e| vec![format!("not a valid WorkFlow: {e}")])
}

/// Records in `workflow`'s status the shared templates it names that `shared` holds; those it
/// does not.
fn record_from(workflow: &mut WorkFlow, shared: &[ResolvedTemplate]) -> Vec<Source> {
    let find = |source: Source| {
        std::future::ready(Ok::<_, Infallible>(
            shared.iter().find(|r| r.is(&source)).cloned(),
        ))
    };
    let Ok(absent) = futures::executor::block_on(template::resolve(workflow, find));
    absent
}

/// The WorkFlowTemplates and ClusterWorkFlowTemplates of `documents` without schema problems,
/// as a workflow records those it reads.
pub(super) fn shared_templates(documents: &[Document]) -> Vec<ResolvedTemplate> {
    documents
        .iter()
        .filter(|d| [NAMESPACED_KIND, CLUSTER_KIND].contains(&d.kind))
        .filter_map(|d| {
            let normalized = schema_problems(d.kind, &d.value).ok()?;
            let spec = serde_json::from_value(normalized.get("spec")?.clone()).ok()?;
            Some(super::template::record(d.kind, &d.name, None, None, spec))
        })
        .collect()
}

/// The document normalized (defaults filled in), or what the API server would refuse it for on
/// a create: unknown fields, then metadata, schema and CEL rule violations with their field
/// paths, in the order and words of its 422.
fn schema_problems(kind: &str, value: &Value) -> Result<Value, Vec<String>> {
    let crd = match kind {
        WORKFLOW_KIND => workflow_operator_core::crd::workflow_crd(),
        CRON_KIND => CronWorkFlow::crd(),
        TRIGGER_KIND => WorkFlowTrigger::crd(),
        NAMESPACED_KIND => WorkFlowTemplate::crd(),
        _ => ClusterWorkFlowTemplate::crd(),
    };
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).expect("schemas serialize"))
        .expect("each of our CRDs has a schema");
    let mut normalized = value.clone();
    // kubectl validates strictly by default (`--validate=strict`, the server's
    // `fieldValidation=Strict`): an unknown field, such as a typo, refuses the whole object.
    let unknown = schema::normalize(&schema, &mut normalized).unknown_fields;
    // A custom resource's metadata as the server checks it on a create: its name is a DNS-1123
    // subdomain (apiextensions-apiserver's customresource validator), labels and annotations.
    let mut errors = object_meta::validate(&normalized, NameRule::Subdomain, true);
    errors.extend(schema::validate(&schema, &normalized));
    schema::validate_rules(&schema, &normalized, None, &mut errors);
    if unknown.is_empty() && errors.is_empty() {
        return Ok(normalized);
    }
    Err(unknown
        .into_iter()
        .map(|field| super::suggest::unknown_field(&schema, &field))
        .chain(
            errors
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message)),
        )
        .collect())
}

/// A document of a manifest of one of our kinds.
pub(crate) struct Document {
    /// `WorkFlow`, `CronWorkFlow`, `WorkFlowTemplate` or `ClusterWorkFlowTemplate`.
    pub kind: &'static str,
    /// Its `metadata.name` (`<unnamed>` without one).
    pub name: String,
    pub value: Value,
}

/// The kind of workflows.
pub(crate) const WORKFLOW_KIND: &str = "WorkFlow";

/// The kind of workflows started on a schedule.
pub(crate) const CRON_KIND: &str = "CronWorkFlow";

/// The kind of workflows started by events.
const TRIGGER_KIND: &str = "WorkFlowTrigger";

/// The WorkFlow, CronWorkFlow, WorkFlowTemplate and ClusterWorkFlowTemplate documents of a file (`-` reads
/// standard input). Argo's documents are converted on the way, saying so once on standard
/// error; one of an Argo kind that has no counterpart here is left out, named there as
/// `convert` names it.
pub(crate) fn read_documents(file: &Path) -> Result<Vec<Document>, String> {
    let mut documents = Vec::new();
    let (mut from_argo, mut not_converted) = (0, 0);
    for mut value in super::convert::read(file)? {
        if convert::is_argo(&value) {
            let converted = match convert::convert(&value) {
                Ok(converted) => converted,
                Err(why) => {
                    eprintln!("{}: {why}", super::convert::describe(file, &value));
                    continue;
                }
            };
            from_argo += 1;
            not_converted += converted.problems.len();
            value = converted.document;
        }
        let kind = value.get("kind").and_then(Value::as_str);
        let Some(kind) = [
            WORKFLOW_KIND,
            CRON_KIND,
            TRIGGER_KIND,
            NAMESPACED_KIND,
            CLUSTER_KIND,
        ]
        .into_iter()
        .find(|k| Some(*k) == kind) else {
            continue;
        };
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
            .to_string();
        documents.push(Document { kind, name, value });
    }
    if from_argo > 0 {
        let file = file.display();
        match not_converted {
            0 => eprintln!("{file}: converted from Argo"),
            n => eprintln!(
                "{file}: converted from Argo: {n} field{} not supported, run `workflow-operator convert {file}` for details",
                if n == 1 { "" } else { "s" }
            ),
        }
    }
    if documents.is_empty() {
        return Err(format!(
            "{}: no WorkFlow (nor CronWorkFlow, WorkFlowTrigger, WorkFlowTemplate, ClusterWorkFlowTemplate) in the file",
            file.display()
        ));
    }
    Ok(documents)
}
