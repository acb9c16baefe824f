//! `workflow-operator template list|get`: the shared templates (WorkFlowTemplates and
//! ClusterWorkFlowTemplates) of a cluster, with their templates and parameters; and reading a
//! workflow's shared templates as the operator records them (`status.resolvedTemplates`), from
//! the cluster (`submit`) or from manifests (`validate`, `graph`).

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use workflow_operator_core::WorkFlowSpec;
use workflow_operator_core::template::{
    CLUSTER_KIND, ClusterWorkFlowTemplate, NAMESPACED_KIND, Parameter, ResolvedTemplate, Source,
    WorkFlowTemplate,
};

use super::client::ClusterArgs;

#[derive(Debug, Args)]
pub struct TemplateArgs {
    #[command(subcommand)]
    command: TemplateCommand,
}

#[derive(Debug, Subcommand)]
enum TemplateCommand {
    /// List the WorkFlowTemplates of the namespace (all namespaces with `-A`) and the
    /// ClusterWorkFlowTemplates, with their templates and parameters.
    #[command(after_help = "Examples:\n  \
        workflow-operator template list\n  \
        workflow-operator template list -A")]
    List(ListArgs),
    /// Show one WorkFlowTemplate (a ClusterWorkFlowTemplate with `--cluster`): its steps, its
    /// templates with their inputs, and its parameters with their values, allowed values and
    /// descriptions.
    #[command(after_help = "Examples:\n  \
        workflow-operator template get ci\n  \
        workflow-operator template get lib --cluster -o yaml")]
    Get(GetArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The WorkFlowTemplates of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct GetArgs {
    /// The template's name.
    name: String,
    /// A ClusterWorkFlowTemplate rather than a WorkFlowTemplate of the namespace.
    #[arg(long = "cluster")]
    cluster_scope: bool,
    /// `text` for people; `yaml` or `json`: the object, as kubectl prints it.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Yaml,
    Json,
}

pub async fn template(args: TemplateArgs) -> ExitCode {
    super::report(async {
        match args.command {
            TemplateCommand::List(args) => list(args).await,
            TemplateCommand::Get(args) => get(args).await,
        }
    })
    .await
}

async fn list(args: ListArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let scope = (!args.all_namespaces).then_some(namespace.as_str());
    let mut shared = list_kind(&client, NAMESPACED_KIND, scope).await?;
    shared.extend(list_kind(&client, CLUSTER_KIND, None).await?);
    let rows: Vec<[String; 5]> = shared
        .iter()
        .map(|object| {
            let record = record_of(object);
            [
                object.namespace().unwrap_or_default(),
                record.name.clone(),
                record.kind.clone(),
                dashed(record.spec.templates.iter().map(|t| t.name.clone())),
                dashed(declared(&record.spec).iter().map(parameter_summary)),
            ]
        })
        .collect();
    let header = ["NAMESPACE", "NAME", "KIND", "TEMPLATES", "PARAMETERS"];
    if args.all_namespaces {
        print!("{}", super::get::table(header, &rows));
    } else {
        let [_, header @ ..] = header;
        let rows: Vec<[String; 4]> = rows.into_iter().map(|[_, row @ ..]| row).collect();
        print!("{}", super::get::table(header, &rows));
    }
    Ok(())
}

async fn get(args: GetArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let source = Source::new(&args.name, args.cluster_scope);
    let Some(object) = fetch(&client, &namespace, &source).await? else {
        bail!(source.not_found(&namespace));
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&object)?),
        Output::Yaml => print!("{}", serde_yaml::to_string(&object)?),
        Output::Text => print!("{}", describe(&object)),
    }
    Ok(())
}

/// `template get`'s text: the template's name, kind and steps, its templates with their
/// inputs, and its parameters.
fn describe(object: &DynamicObject) -> String {
    let record = record_of(object);
    let mut out = format!(
        "Name:        {}\nKind:        {}\n",
        record.name, record.kind
    );
    if let Some(namespace) = object.namespace() {
        out.push_str(&format!("Namespace:   {namespace}\n"));
    }
    let steps = record.spec.containers.iter().map(|s| s.step_name.clone());
    out.push_str(&format!("Steps:       {}\n", dashed(steps)));
    if !record.spec.templates.is_empty() {
        out.push('\n');
        let rows: Vec<[String; 3]> = record
            .spec
            .templates
            .iter()
            .map(|t| {
                let inputs = t.inputs.iter().flat_map(|i| &i.parameters);
                let shape = match &t.dag {
                    Some(dag) => {
                        format!(
                            "dag: {}",
                            dashed(
                                dag.iter()
                                    .filter_map(|s| Some(s.get("stepName")?.as_str()?.to_string()))
                            )
                        )
                    }
                    None => "container".to_string(),
                };
                [t.name.clone(), shape, dashed(inputs.map(parameter_summary))]
            })
            .collect();
        out.push_str(&super::get::table(["TEMPLATE", "KIND", "INPUTS"], &rows));
    }
    let parameters = declared(&record.spec);
    if !parameters.is_empty() {
        out.push('\n');
        let rows: Vec<[String; 4]> = parameters
            .iter()
            .map(|p| {
                [
                    p.name.clone(),
                    p.value.clone().unwrap_or_else(|| "(required)".into()),
                    p.allowed.join(", "),
                    p.description.clone().unwrap_or_default(),
                ]
            })
            .collect();
        let header = ["PARAMETER", "VALUE", "ENUM", "DESCRIPTION"];
        out.push_str(&super::get::table(header, &rows));
    }
    out
}

/// `version`, `target=linux (linux|darwin)`, `times=1`: a parameter or input in a list.
fn parameter_summary(parameter: &Parameter) -> String {
    let mut text = parameter.name.clone();
    if let Some(value) = parameter.value.as_ref().or(parameter.default.as_ref()) {
        text.push_str(&format!("={value}"));
    }
    if !parameter.allowed.is_empty() {
        text.push_str(&format!(" ({})", parameter.allowed.join("|")));
    }
    text
}

/// The items joined by `, `, or `-` for none.
fn dashed(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

/// The parameters a spec declares (`spec.arguments.parameters`).
pub(crate) fn declared(spec: &WorkFlowSpec) -> &[Parameter] {
    spec.arguments.as_deref().map_or(&[], |a| &a.parameters)
}

/// The API of a kind of shared template, in `namespace` (namespaced kind) or everywhere.
pub(super) fn api(client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = if kind == CLUSTER_KIND {
        ApiResource::erase::<ClusterWorkFlowTemplate>(&())
    } else {
        ApiResource::erase::<WorkFlowTemplate>(&())
    };
    match namespace {
        Some(namespace) if kind != CLUSTER_KIND => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    }
}

async fn list_kind(
    client: &Client,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Vec<DynamicObject>> {
    Ok(api(client, kind, namespace)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing the {kind}s"))?
        .items)
}

/// The shared template `source` names (a WorkFlowTemplate of `namespace`), if it exists.
pub(crate) async fn fetch(
    client: &Client,
    namespace: &str,
    source: &Source,
) -> Result<Option<DynamicObject>> {
    api(client, source.kind, Some(namespace))
        .get_opt(&source.name)
        .await
        .with_context(|| format!("reading {}", source.describe()))
}

/// A shared template read from the cluster, as a workflow records it.
pub(crate) fn record_of(object: &DynamicObject) -> ResolvedTemplate {
    let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
    let kind = [NAMESPACED_KIND, CLUSTER_KIND]
        .into_iter()
        .find(|k| *k == kind)
        .unwrap_or(NAMESPACED_KIND);
    // The API server checked it against the CRD's schema.
    let spec = serde_json::from_value(object.data["spec"].clone()).unwrap_or_else(|_| {
        serde_json::from_value(serde_json::json!({})).expect("an empty spec reads")
    });
    record(
        kind,
        &object.name_any(),
        object.uid(),
        object.resource_version(),
        spec,
    )
}

/// A shared template's record (`status.resolvedTemplates[]`).
pub(crate) fn record(
    kind: &str,
    name: &str,
    uid: Option<String>,
    resource_version: Option<String>,
    spec: WorkFlowSpec,
) -> ResolvedTemplate {
    ResolvedTemplate {
        kind: kind.to_string(),
        name: name.to_string(),
        uid,
        resource_version,
        resolved_at: None,
        spec,
    }
}
