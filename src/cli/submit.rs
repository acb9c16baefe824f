//! `workflow-operator submit FILE | --from KIND/NAME [-p NAME=VALUE]...`: creates a workflow
//! with its parameters given, as `argo submit` does; with `--wait`, waits until it finished
//! and exits as it ended. Everything the operator would fail the workflow for at once (an
//! undeclared or missing parameter, a value outside its `enum`, an unknown template, a shared
//! template that does not exist, a bad DAG) refuses the submit before anything is created.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use serde_json::json;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::CONDITION_FINISHED;
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::plan;
use workflow_operator_core::template::{Arguments, Parameter, Source};

use super::client::ClusterArgs;
use super::inspect::{self, WORKFLOW_KIND};
use super::template::{declared, fetch, record_of};
use workflow_operator_core::template::resolve;

/// Submit a workflow: from a manifest, or one that runs a shared template whole.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// A manifest holding one WorkFlow (`-` reads standard input).
    #[arg(
        value_name = "FILE",
        required_unless_present = "from",
        conflicts_with = "from"
    )]
    file: Option<PathBuf>,
    /// Submit a workflow that runs this shared template whole (`spec.workflowTemplateRef`):
    /// `workflowtemplate/NAME` (or `wftmpl/NAME`) in the namespace, `clusterworkflowtemplate/NAME`
    /// (or `cwftmpl/NAME`). The workflow is named `NAME-` and a random suffix.
    #[arg(long, value_name = "KIND/NAME", value_parser = parse_from)]
    from: Option<Source>,
    /// A workflow parameter's value (`spec.arguments.parameters`); repeat for each. A name the
    /// workflow (or its template) does not declare is refused.
    #[arg(short = 'p', long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    parameters: Vec<(String, String)>,
    /// Name the workflow by `metadata.generateName` (its name, or its `generateName`, plus a
    /// random suffix), to submit one manifest many times.
    #[arg(long)]
    generate_name: bool,
    /// Wait until the workflow finished; exit 0 if it completed, 1 if it failed.
    #[arg(long)]
    wait: bool,
    /// `name`: `workflow.workflow.crd.com/NAME`, as kubectl prints it; `json`: the created
    /// workflow (with `--wait`, the finished one).
    #[arg(long, short = 'o', value_enum)]
    output: Option<Output>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Name,
    Json,
}

/// `--from workflowtemplate/ci`: the shared template it names.
fn parse_from(text: &str) -> Result<Source, String> {
    let (kind, name) = text
        .split_once('/')
        .filter(|(_, name)| !name.is_empty())
        .ok_or("expected KIND/NAME, e.g. workflowtemplate/ci")?;
    match kind.to_lowercase().as_str() {
        "workflowtemplate" | "workflowtemplates" | "wftmpl" => Ok(Source::new(name, false)),
        "clusterworkflowtemplate" | "clusterworkflowtemplates" | "cwftmpl" => {
            Ok(Source::new(name, true))
        }
        _ => Err(format!(
            "unknown kind {kind:?}: workflowtemplate (wftmpl) or clusterworkflowtemplate (cwftmpl)"
        )),
    }
}

/// `-p version=1.2`: a name and its value.
fn parse_parameter(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))
}

pub async fn submit(args: SubmitArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let mut workflow = match &args.from {
            Some(source) => from_template(&client, &namespace, source).await?,
            None => from_file(&args, &namespace)?,
        };
        if args.generate_name {
            generate_name(&mut workflow)?;
        }
        let namespace = workflow.namespace().unwrap_or(namespace);
        check(&client, &namespace, &mut workflow, &args.parameters).await?;
        let api: Api<WorkFlow> = Api::namespaced(client, &namespace);
        let params = PostParams {
            field_manager: Some(super::FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let created = api
            .create(&params, &workflow)
            .await
            .map_err(|e| create_error(e, &workflow))?;
        let name = created.name_any();
        if !args.wait {
            print(args.output, &created)?;
            return Ok(ExitCode::SUCCESS);
        }
        if args.output != Some(Output::Json) {
            print(args.output, &created)?;
        }
        let finished = await_condition(api, &name, is_finished)
            .await
            .context("watching the workflow")?
            .ok_or_else(|| anyhow!("workflow {name} was deleted before it finished"))?;
        outcome(args.output, &finished)
    })
    .await
}

/// The workflow of the manifest `args.file`: its one WorkFlow, checked as `validate` checks
/// it, in the namespace of `-n`, else its own, else the context's.
fn from_file(args: &SubmitArgs, namespace: &str) -> Result<WorkFlow> {
    let file = args
        .file
        .as_deref()
        .expect("clap requires FILE without --from");
    let documents = inspect::read_documents(file).map_err(|e| anyhow!(e))?;
    let mut workflows = documents.iter().filter(|d| d.kind == WORKFLOW_KIND);
    let (Some(document), None) = (workflows.next(), workflows.next()) else {
        bail!("{}: submit takes a file with one WorkFlow", file.display());
    };
    let mut workflow = inspect::parse_workflow(&document.value).map_err(|problems| {
        anyhow!(
            "{}: workflow {}: {}",
            file.display(),
            document.name,
            problems.join("; ")
        )
    })?;
    match (&args.cluster.namespace, workflow.namespace()) {
        (Some(given), Some(own)) if *given != own => bail!(
            "the namespace of the workflow ({own:?}) does not match the namespace {given:?} given: pass --namespace={own} or remove it from the file"
        ),
        (_, own) => workflow.metadata.namespace = Some(own.unwrap_or(namespace.to_string())),
    }
    Ok(workflow)
}

/// A workflow that runs the shared template `source` whole, named after it.
async fn from_template(client: &Client, namespace: &str, source: &Source) -> Result<WorkFlow> {
    if fetch(client, namespace, source).await?.is_none() {
        bail!(source.not_found(namespace));
    }
    let cluster_scope = source.kind == workflow_operator_core::template::CLUSTER_KIND;
    let workflow = json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": WORKFLOW_KIND,
        "metadata": {"generateName": format!("{}-", source.name), "namespace": namespace},
        "spec": {"workflowTemplateRef": {"name": source.name, "clusterScope": cluster_scope}},
    });
    Ok(serde_json::from_value(workflow)?)
}

/// `metadata.generateName` from the name (plus `-`) or as it is; the name cleared.
fn generate_name(workflow: &mut WorkFlow) -> Result<()> {
    let metadata = &mut workflow.metadata;
    let base = match (metadata.generate_name.take(), metadata.name.take()) {
        (Some(base), _) => base,
        (None, Some(name)) => format!("{name}-"),
        (None, None) => bail!("the workflow has neither metadata.name nor generateName"),
    };
    metadata.generate_name = Some(base);
    Ok(())
}

/// Sets each `-p` into `workflow`'s arguments, after reading its shared templates from the
/// cluster; refuses a parameter it does not declare, and anything the operator would fail it
/// for at once.
async fn check(
    client: &Client,
    namespace: &str,
    workflow: &mut WorkFlow,
    given: &[(String, String)],
) -> Result<()> {
    let find = |source: Source| async move {
        let object = fetch(client, namespace, &source).await?;
        Ok::<_, anyhow::Error>(object.as_ref().map(record_of))
    };
    let absent = resolve(workflow, find).await?;
    if absent.is_empty() {
        set_parameters(workflow, given)?;
    }
    let problems = plan::spec_problems(workflow, &[]).err().unwrap_or_default();
    // Recorded by the operator, not by a user.
    workflow.status = None;
    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "workflow {} would fail: {}",
        workflow_name(workflow),
        problems.join("; ")
    )
}

/// Sets each of `given` into `workflow`'s arguments, each a parameter it (or the shared
/// template it runs, recorded in its status) declares.
fn set_parameters(workflow: &mut WorkFlow, given: &[(String, String)]) -> Result<()> {
    let (owner, declarations) = match &workflow.spec.workflow_template_ref {
        Some(reference) => {
            let source = Source::new(&reference.name, reference.cluster_scope);
            let status = workflow.status.as_ref().expect("resolved");
            let record = status.resolved_templates.iter().find(|r| r.is(&source));
            let record = record.expect("resolved");
            (source.describe(), declared(&record.spec).to_vec())
        }
        None => (
            format!("workflow {:?}", workflow_name(workflow)),
            declared(&workflow.spec).to_vec(),
        ),
    };
    let arguments = workflow
        .spec
        .arguments
        .get_or_insert_with(|| Box::new(Arguments::default()));
    for (name, value) in given {
        if !declarations.iter().any(|d| d.name == *name) {
            let names: Vec<&str> = declarations.iter().map(|d| d.name.as_str()).collect();
            let known = if names.is_empty() {
                "it declares none".to_string()
            } else {
                format!("parameters: {}", names.join(", "))
            };
            bail!("-p {name}: {owner} declares no parameter {name:?} ({known})");
        }
        match arguments.parameters.iter_mut().find(|p| p.name == *name) {
            Some(parameter) => parameter.value = Some(value.clone()),
            None => arguments.parameters.push(Parameter {
                name: name.clone(),
                value: Some(value.clone()),
                ..Parameter::default()
            }),
        }
    }
    Ok(())
}

/// Why the API server refused to create `workflow`: one that exists already is named with what
/// to do, as a person reads it, not as the API's `Status` object.
fn create_error(error: kube::Error, workflow: &WorkFlow) -> anyhow::Error {
    match &error {
        kube::Error::Api(status) if status.is_already_exists() => anyhow!(
            "workflow {:?} already exists: delete it, or use --generate-name",
            workflow_name(workflow)
        ),
        _ => anyhow::Error::new(error).context("creating the workflow"),
    }
}

/// The workflow's name, or its `generateName` with `*` for what the server adds.
fn workflow_name(workflow: &WorkFlow) -> String {
    match (&workflow.metadata.name, &workflow.metadata.generate_name) {
        (Some(name), _) => name.clone(),
        (None, Some(base)) => format!("{base}*"),
        (None, None) => "<unnamed>".into(),
    }
}

fn print(output: Option<Output>, workflow: &WorkFlow) -> Result<()> {
    let name = workflow.name_any();
    match output {
        None => println!("workflow.workflow.crd.com/{name} created"),
        Some(Output::Name) => println!("workflow.workflow.crd.com/{name}"),
        Some(Output::Json) => println!("{}", serde_json::to_string_pretty(workflow)?),
    }
    Ok(())
}

/// Whether the workflow has finished, either way (its `Finished` condition).
fn is_finished(workflow: Option<&WorkFlow>) -> bool {
    workflow.and_then(|w| w.status.as_ref()).is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == CONDITION_FINISHED && c.status == "True")
    })
}

/// Prints how the workflow ended (the finished workflow with `-o json`; the line then goes to
/// standard error): exit 0 if it completed, 1 otherwise.
fn outcome(output: Option<Output>, workflow: &WorkFlow) -> Result<ExitCode> {
    let status = workflow.status.clone().unwrap_or_default();
    let line = super::wait::outcome_line(workflow);
    if output == Some(Output::Json) {
        print(output, workflow)?;
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(if status.workflow_status == Some(Phase::Completed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
