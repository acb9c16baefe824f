//! `workflow-operator submit FILE | --from KIND/NAME [-p NAME=VALUE]...`: creates a workflow
//! with its parameters given, as `argo submit` does; with `--wait`, waits until it finished
//! and exits as it ended, with `--watch` shows it as `watch` does meanwhile, with `--log`
//! follows its steps' logs. A file may hold shared templates besides its workflows: they are
//! applied (created, or updated) first; and CronWorkFlows (Argo's `argo cron create`), applied
//! next. Everything the operator would fail a workflow for at
//! once (an undeclared or missing parameter, a value outside its `enum`, an unknown template,
//! a shared template that does not exist, a bad DAG) refuses the submit before anything is
//! created.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use serde_json::json;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{CONDITION_FINISHED, CronWorkFlow};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::plan;
use workflow_operator_core::template::{
    ANNOTATION_RESOLVED_TEMPLATES, Arguments, CLUSTER_KIND, NAMESPACED_KIND, Parameter,
    ResolvedTemplate, Source,
};

use super::client::ClusterArgs;
use super::inspect::{self, WORKFLOW_KIND};
use super::template::{declared, fetch, record_of};
use workflow_operator_core::template::resolve;

/// Submit a workflow: from a manifest, or one that runs a shared template whole.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// A manifest of WorkFlows and CronWorkFlows, and of the WorkFlowTemplates and
    /// ClusterWorkFlowTemplates they use (applied first), or Argo's (`-` reads standard input).
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
    #[command(flatten)]
    then: Then,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// What `submit` (and `resubmit`) does once the workflow is created, as `argo submit`.
#[derive(Debug, Args)]
pub(super) struct Then {
    /// Wait until the workflow finished; exit 0 if it completed, 1 if it failed.
    #[arg(long, short = 'w')]
    wait: bool,
    /// Show the workflow as `watch` does until it finished; exit as `--wait`.
    #[arg(long, conflicts_with = "log")]
    watch: bool,
    /// Follow the logs of its steps as `logs -f` does until it finished; exit as `--wait`.
    /// (The log filter of the command itself is `--log-level`.)
    #[arg(long)]
    log: bool,
    /// `name`: `workflow.workflow.crd.com/NAME`, as kubectl prints it; `json`: the created
    /// workflow (with `--wait`, the finished one).
    #[arg(long, short = 'o', value_enum)]
    output: Option<Output>,
}

impl Then {
    /// Whether the command stays until the workflow finished.
    fn follows(&self) -> bool {
        self.wait || self.watch || self.log
    }
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
pub(super) fn parse_parameter(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))
}

pub async fn submit(args: SubmitArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let Some(source) = &args.from else {
            return submit_file(&args, &client, &namespace).await;
        };
        let workflow = from_template(&client, &namespace, source).await?;
        create_and_follow(&client, &namespace, workflow, &args.parameters, &args.then).await
    })
    .await
}

/// Checks `workflow` (its `-p` set), creates it and prints it, then follows it as `then` says.
pub(super) async fn create_and_follow(
    client: &Client,
    namespace: &str,
    mut workflow: WorkFlow,
    parameters: &[(String, String)],
    then: &Then,
) -> Result<ExitCode> {
    let namespace = workflow.namespace().unwrap_or(namespace.to_string());
    check(client, &namespace, &mut workflow, parameters, &[]).await?;
    let created = create(client, &namespace, &workflow, then).await?;
    follow(client, &namespace, &created, then).await
}

/// Creates the (checked) workflow and prints it; with `-o json` and a command that follows it,
/// the finished workflow is printed instead, once it finished.
async fn create(
    client: &Client,
    namespace: &str,
    workflow: &WorkFlow,
    then: &Then,
) -> Result<WorkFlow> {
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(super::FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let created = api
        .create(&params, workflow)
        .await
        .map_err(|e| create_error(e, workflow))?;
    if !(then.follows() && then.output == Some(Output::Json)) {
        print(then.output, &created)?;
    }
    Ok(created)
}

/// Follows the created workflow as `then` says (nothing to do without `--wait`, `--watch`
/// or `--log`), then says how it ended and exits as it ended.
async fn follow(
    client: &Client,
    namespace: &str,
    created: &WorkFlow,
    then: &Then,
) -> Result<ExitCode> {
    if !then.follows() {
        return Ok(ExitCode::SUCCESS);
    }
    let name = created.name_any();
    if then.watch {
        super::get::watch_until_done(client, namespace, &name, true).await?;
    } else if then.log {
        super::logs::print_logs(client, namespace, &name, None, true).await?;
    }
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    let finished = await_condition(api, &name, is_finished)
        .await
        .context("watching the workflow")?
        .ok_or_else(|| anyhow!("workflow {name} was deleted before it finished"))?;
    outcome(then.output, &finished)
}

/// `submit FILE`: applies the file's shared templates, then creates its workflows, each
/// checked first (against the file's templates and the cluster's), so that a file that would
/// fail changes nothing.
async fn submit_file(args: &SubmitArgs, client: &Client, namespace: &str) -> Result<ExitCode> {
    let file = args
        .file
        .as_deref()
        .expect("clap requires FILE without --from");
    let documents = inspect::read_documents(file).map_err(|e| anyhow!(e))?;
    let Split {
        templates,
        crons,
        workflows,
    } = split_documents(file, &documents)?;
    if args.then.follows() && workflows.len() != 1 {
        bail!(
            "{}: --wait, --watch and --log take a file with one WorkFlow",
            file.display()
        );
    }
    let shared = inspect::shared_templates(&documents);
    let mut checked = Vec::new();
    for document in workflows {
        let mut workflow = from_document(file, document, &args.cluster, namespace)?;
        if args.generate_name {
            generate_name(&mut workflow)?;
        }
        let namespace = workflow.namespace().unwrap_or(namespace.to_string());
        check(client, &namespace, &mut workflow, &args.parameters, &shared).await?;
        checked.push((namespace, workflow));
    }
    check_applied(&templates)?;
    check_applied(&crons)?;
    for document in templates.iter().chain(&crons) {
        apply(client, namespace, &args.cluster, document, args.then.output).await?;
    }
    let mut created = Vec::new();
    for (namespace, workflow) in &checked {
        created.push((
            namespace,
            create(client, namespace, workflow, &args.then).await?,
        ));
    }
    match created.as_slice() {
        [(namespace, workflow)] => follow(client, namespace, workflow, &args.then).await,
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A file's documents by what `submit` does with them.
struct Split<'d> {
    /// WorkFlowTemplates and ClusterWorkFlowTemplates, applied first.
    templates: Vec<&'d inspect::Document>,
    /// CronWorkFlows, applied once the templates are (their runs may use them).
    crons: Vec<&'d inspect::Document>,
    /// WorkFlows, created last.
    workflows: Vec<&'d inspect::Document>,
}

/// The shared templates, the CronWorkFlows and the workflows of a file; any other kind is
/// refused.
fn split_documents<'d>(
    file: &std::path::Path,
    documents: &'d [inspect::Document],
) -> Result<Split<'d>> {
    let mut split = Split {
        templates: Vec::new(),
        crons: Vec::new(),
        workflows: Vec::new(),
    };
    for document in documents {
        match document.kind {
            WORKFLOW_KIND => split.workflows.push(document),
            inspect::CRON_KIND => split.crons.push(document),
            NAMESPACED_KIND | CLUSTER_KIND => split.templates.push(document),
            kind => bail!(
                "{}: submit takes WorkFlows, CronWorkFlows and the shared templates they use, not a {kind} ({}): create it with kubectl apply -f",
                file.display(),
                document.name
            ),
        }
    }
    Ok(split)
}

/// Refuses the file when one of `documents` (shared templates and CronWorkFlows) has a
/// problem `validate` names, before anything is applied.
fn check_applied(documents: &[&inspect::Document]) -> Result<()> {
    for document in documents {
        let problems = inspect::problems(document);
        if !problems.is_empty() {
            bail!(
                "{} {}: {}",
                document.kind,
                document.name,
                problems.join("; ")
            );
        }
    }
    Ok(())
}

/// The API of `kind` (a shared template's or CronWorkFlows'), in `namespace` unless
/// cluster-scoped.
fn applied_api(client: &Client, kind: &str, namespace: &str) -> Api<DynamicObject> {
    if kind != inspect::CRON_KIND {
        return super::template::api(client, kind, Some(namespace));
    }
    let resource = ApiResource::erase::<CronWorkFlow>(&());
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Creates the shared template or CronWorkFlow of `document` (checked), or updates the one of
/// its name (server-side apply, as `kubectl apply --server-side`); prints `KIND/NAME created`
/// or `configured`.
async fn apply(
    client: &Client,
    namespace: &str,
    cluster: &ClusterArgs,
    document: &inspect::Document,
    output: Option<Output>,
) -> Result<()> {
    let own = document
        .value
        .pointer("/metadata/namespace")
        .and_then(|n| n.as_str());
    let namespace = cluster.namespace.as_deref().or(own).unwrap_or(namespace);
    let api = applied_api(client, document.kind, namespace);
    let existed = (api.get_opt(&document.name).await)
        .with_context(|| format!("reading {} {}", document.kind, document.name))?
        .is_some();
    let mut value = document.value.clone();
    if document.kind != CLUSTER_KIND {
        value["metadata"]["namespace"] = json!(namespace);
    }
    let params = PatchParams::apply(super::FIELD_MANAGER).force();
    api.patch(&document.name, &params, &Patch::Apply(&value))
        .await
        .with_context(|| format!("applying {} {}", document.kind, document.name))?;
    let kind = document.kind.to_lowercase();
    match (output, existed) {
        (Some(Output::Name), _) => println!("{kind}.workflow.crd.com/{}", document.name),
        (_, false) => println!("{kind}.workflow.crd.com/{} created", document.name),
        (_, true) => println!("{kind}.workflow.crd.com/{} configured", document.name),
    }
    Ok(())
}

/// The workflow of a document of `file`, checked as `validate` checks it, in the namespace of
/// `-n`, else its own, else the context's.
fn from_document(
    file: &std::path::Path,
    document: &inspect::Document,
    cluster: &ClusterArgs,
    namespace: &str,
) -> Result<WorkFlow> {
    let mut workflow = inspect::parse_workflow(&document.value).map_err(|problems| {
        anyhow!(
            "{}: workflow {}: {}",
            file.display(),
            document.name,
            problems.join("; ")
        )
    })?;
    match (&cluster.namespace, workflow.namespace()) {
        (Some(given), Some(own)) if *given != own => bail!(
            "the namespace of the workflow ({own:?}) does not match the namespace {given:?} given: pass --namespace={own} or remove it from the file"
        ),
        (_, own) => workflow.metadata.namespace = Some(own.unwrap_or(namespace.to_string())),
    }
    Ok(workflow)
}

/// The label on a workflow `submit --from` made of a WorkFlowTemplate, naming it, as Argo's
/// `workflows.argoproj.io/workflow-template`: `list -l workflow.crd.com/workflow-template=ci`
/// lists the runs of `ci`.
const LABEL_TEMPLATE: &str = "workflow.crd.com/workflow-template";

/// [`LABEL_TEMPLATE`] of a ClusterWorkFlowTemplate.
const LABEL_CLUSTER_TEMPLATE: &str = "workflow.crd.com/cluster-workflow-template";

/// A workflow that runs the shared template `source` whole, named after it and labelled with
/// it.
async fn from_template(client: &Client, namespace: &str, source: &Source) -> Result<WorkFlow> {
    if fetch(client, namespace, source).await?.is_none() {
        bail!(source.not_found(namespace));
    }
    let cluster_scope = source.kind == workflow_operator_core::template::CLUSTER_KIND;
    let label = match cluster_scope {
        true => LABEL_CLUSTER_TEMPLATE,
        false => LABEL_TEMPLATE,
    };
    let workflow = json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": WORKFLOW_KIND,
        "metadata": {
            "generateName": format!("{}-", source.name),
            "namespace": namespace,
            "labels": {label: source.name},
        },
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

/// Sets each `-p` into `workflow`'s arguments, after reading its shared templates from
/// `in_file` (those of the file it comes from), else from the cluster; refuses a parameter it does not declare, and anything the operator would fail it
/// for at once.
async fn check(
    client: &Client,
    namespace: &str,
    workflow: &mut WorkFlow,
    given: &[(String, String)],
    in_file: &[ResolvedTemplate],
) -> Result<()> {
    let find = |source: Source| async move {
        if let Some(record) = in_file.iter().find(|r| r.is(&source)) {
            return Ok(Some(record.clone()));
        }
        let object = fetch(client, namespace, &source).await?;
        Ok::<_, anyhow::Error>(object.as_ref().map(record_of))
    };
    let absent = resolve(workflow, find).await?;
    if absent.is_empty() {
        set_parameters(workflow, given)?;
    }
    let problems = plan::spec_problems(workflow, &[]).err().unwrap_or_default();
    record_for_dispatch(workflow)?;
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

/// For a workflow another controller dispatches (`spec.managedBy`, MultiKueue), the shared
/// templates read here written into its annotation `workflow.crd.com/resolved-templates`:
/// MultiKueue copies annotations to the worker cluster, not the status, and the worker's
/// operator runs these rather than its own cluster's (which may not have them). Other
/// workflows' templates are read and recorded by their operator.
fn record_for_dispatch(workflow: &mut WorkFlow) -> Result<()> {
    let records = (workflow.status.as_ref()).map_or(&[][..], |s| &s.resolved_templates[..]);
    if !workflow_operator_core::kueue::managed_elsewhere(workflow) || records.is_empty() {
        return Ok(());
    }
    let text = serde_json::to_string(records)?;
    workflow
        .annotations_mut()
        .insert(ANNOTATION_RESOLVED_TEMPLATES.into(), text);
    Ok(())
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
