//! The command line: one clap subcommand per job, each in its own module. `main.rs` only calls
//! [`main`].

mod artifacts;
#[cfg(feature = "dev")]
mod bench;
mod cache;
mod client;
mod control;
mod cron;
#[cfg(feature = "dev")]
mod dev;
mod get;
mod graph;
pub(crate) mod inspect;
mod interactive;
mod locks;
pub(crate) mod logs;
mod run;
mod submit;
mod template;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Runs DAG workflows of container steps on Kubernetes: one Job per step, in dependency order,
/// with per-step timeouts and progress in the WorkFlow's status.
#[derive(Debug, Parser)]
#[command(name = "workflow-operator", version, propagate_version = true)]
#[command(
    after_help = "Try it without a cluster:\n  workflow-operator dev --apply examples/diamond.yaml --until-done"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter, as `RUST_LOG` (e.g. `info`, `workflow_operator=debug`). Default: the
    /// operator's and its framework's info lines and everything's warnings; for `dev`, warnings
    /// only (it prints each workflow's progress itself).
    #[arg(long, global = true, env = "RUST_LOG")]
    log: Option<String>,
    /// How log lines are written (to standard error): `text` for people, `json` (one object a
    /// line) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The format of the log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against a cluster (the current kubeconfig, or in-cluster config).
    Run(run::RunArgs),
    /// Start the embedded control plane (and the operator) for trying and testing: no cluster needed.
    ///
    /// Serves the Kubernetes API on 127.0.0.1 over plain HTTP without authentication: a local
    /// tool for trying, testing and measuring, never for production or a shared host. Pods run
    /// their command as local processes on this machine (no container, no image pull).
    #[cfg(feature = "dev")]
    Dev(dev::DevArgs),
    /// Print the CustomResourceDefinitions (WorkFlow, WorkFlowTemplate, ClusterWorkFlowTemplate)
    /// as YAML (what `crd/workflow.yaml` holds).
    Crd,
    /// Check WorkFlow, WorkFlowTemplate and ClusterWorkFlowTemplate manifests without a cluster:
    /// exit 1 and name every problem (e.g. a cycle's path, an unknown template, a missing
    /// parameter).
    Validate(inspect::ValidateArgs),
    /// Print a workflow's DAG as Graphviz DOT or Mermaid: from a manifest, or by name from the
    /// cluster with each step's phase (as `get` shows it).
    ///
    /// Each step is a node (a step that fans out is one, with its count) showing its `when`;
    /// the exit steps (`onExit`) are a group reached by dashed edges from the last steps, as
    /// they run after every other. A workflow given by name is read as `get` reads it (templates
    /// expanded) and each node is coloured and labelled with its step's phase.
    #[command(after_help = "Examples:\n  \
        workflow-operator graph examples/diamond.yaml | dot -Tsvg > diamond.svg\n  \
        workflow-operator graph -f release --format mermaid\n  \
        workflow-operator graph release -n ci\n  \
        workflow-operator graph release --context prod -n ci --format mermaid")]
    Graph(graph::GraphArgs),
    /// Show a workflow and each of its steps in DAG order: phase, duration, attempts, exit code,
    /// message (like `argo get`; `-o json` for scripts).
    Get(get::GetArgs),
    /// Show a workflow as `get` does, refreshed as it changes, until it finishes.
    Watch(get::WatchArgs),
    /// Print the logs of a workflow's steps in DAG order, each line prefixed with its step
    /// (`--step` for one, `-f` to follow).
    Logs(logs::LogsArgs),
    /// Suspend a workflow: no new step starts; running steps go on (sets `spec.suspend`).
    Suspend(control::ControlArgs),
    /// Resume a suspended workflow: steps start again (clears `spec.suspend`).
    Resume(control::ControlArgs),
    /// Stop a workflow: no new step starts, running steps finish, the exit steps run, and it
    /// ends Failed (sets `spec.shutdown: Stop`).
    Stop(control::ControlArgs),
    /// Terminate a workflow: its running steps' pods are stopped at once (and kept, with their
    /// logs), no exit step runs, and it ends Failed (sets `spec.shutdown: Terminate`).
    Terminate(control::ControlArgs),
    /// Retry a failed or stopped workflow: the steps that did not succeed run again in new Jobs;
    /// succeeded steps keep theirs (raises `spec.retry`, clears `spec.shutdown` and
    /// `spec.suspend`).
    Retry(control::ControlArgs),
    /// Open a shell in an interactive step's pod (`interactive: true`), which waits instead
    /// of running the step's command, as `kubectl exec -it` (it runs kubectl); the command is
    /// there as a script to run.
    Exec(interactive::ExecArgs),
    /// End an interactive step: with the exit code of its command's last run in its pod, or
    /// `--exit-code N`; 0 succeeds, as any step.
    Continue(interactive::ContinueArgs),
    /// Submit a workflow from a manifest, or one that runs a shared template whole, with its
    /// parameters given (`-p NAME=VALUE`), as `argo submit`; `--wait` waits until it finished.
    ///
    /// A parameter the workflow (or its template) does not declare, a missing one, a value
    /// outside its `enum`, an unknown template: the submit is refused, nothing is created.
    #[command(after_help = "Examples:\n  \
        workflow-operator submit examples/diamond.yaml --wait\n  \
        workflow-operator submit release.yaml -p version=1.2 -p target=darwin --generate-name -o name\n  \
        workflow-operator submit --from workflowtemplate/ci -p branch=main -n dev\n  \
        workflow-operator submit --from cwftmpl/nightly --wait")]
    Submit(submit::SubmitArgs),
    /// List and show the shared templates: WorkFlowTemplates and ClusterWorkFlowTemplates,
    /// with their templates and parameters.
    Template(template::TemplateArgs),
    /// List and show CronWorkFlows (their next scheduled times, in their time zone and UTC, and
    /// their runs), suspend or resume one, or start a run of one now.
    #[command(after_help = "Examples:\n  \
        workflow-operator cron list -A\n  \
        workflow-operator cron get nightly\n  \
        workflow-operator cron suspend nightly\n  \
        workflow-operator cron trigger nightly")]
    Cron(cron::CronArgs),
    /// List the cache entries of cached steps (`cache`), or clear them (all, or those older
    /// than an age) so their steps run again.
    #[command(after_help = "Examples:\n  \
        workflow-operator cache list\n  \
        workflow-operator cache clear --older-than 24h")]
    Cache(cache::CacheArgs),
    /// List a workflow's artifacts, or download one (`outputs.artifacts` of its steps, kept in
    /// its artifact repository).
    #[command(after_help = "Examples:\n  \
        workflow-operator artifacts list build\n  \
        workflow-operator artifacts get build compile app -o ./app")]
    Artifacts(artifacts::ArtifactsArgs),
    /// List the locks between workflows (`synchronization`): who holds each mutex and
    /// semaphore, and who waits for it, first in line first.
    #[command(after_help = "Examples:\n  \
        workflow-operator locks\n  \
        workflow-operator locks -A -o json")]
    Locks(locks::LocksArgs),
    /// Print the workflow lifecycle (its states and legal transitions) as DOT or Mermaid.
    Lifecycle(inspect::LifecycleArgs),
    /// Measure the operator end to end and print one JSON object (makespan, steps per second,
    /// dispatch latency, API requests, the operator's CPU and memory, the control plane's
    /// ceiling).
    ///
    /// Starts the embedded control plane in this process with simulated pods and the operator as
    /// a separate process (`run`), submits the workflows, and waits for all of them to finish.
    /// `--external` measures another operator serving the same CRD instead. `--crons N` measures
    /// N CronWorkFlows firing instead (each run's lateness after its scheduled time, runs per
    /// second, the operator's CPU and memory).
    #[cfg(feature = "dev")]
    Bench(bench::BenchArgs),
}

/// Parses the command line and runs the chosen command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = cli.log.as_deref().unwrap_or(match cli.command {
        #[cfg(feature = "dev")]
        Command::Dev(_) => "warn",
        _ => DEFAULT_LOG,
    });
    init_tracing(filter, cli.log_format);
    match cli.command {
        Command::Crd => inspect::crd(),
        Command::Validate(args) => inspect::validate(&args),
        Command::Graph(args) => graph::graph(args),
        Command::Lifecycle(args) => inspect::lifecycle(&args),
        Command::Get(args) => block_on(get::get(args)),
        Command::Watch(args) => block_on(get::watch(args)),
        Command::Logs(args) => block_on(logs::logs(args)),
        Command::Suspend(args) => block_on(control::control(control::Verb::Suspend, args)),
        Command::Resume(args) => block_on(control::control(control::Verb::Resume, args)),
        Command::Stop(args) => block_on(control::control(control::Verb::Stop, args)),
        Command::Terminate(args) => block_on(control::control(control::Verb::Terminate, args)),
        Command::Retry(args) => block_on(control::control(control::Verb::Retry, args)),
        Command::Exec(args) => block_on(interactive::exec(args)),
        Command::Continue(args) => block_on(interactive::continue_step(args)),
        Command::Submit(args) => block_on(submit::submit(args)),
        Command::Template(args) => block_on(template::template(args)),
        Command::Cron(args) => block_on(cron::cron(args)),
        Command::Locks(args) => block_on(locks::locks(args)),
        Command::Cache(args) => block_on(cache::cache(args)),
        Command::Artifacts(args) => block_on(artifacts::artifacts(args)),
        Command::Run(args) => block_on(run::run(args)),
        #[cfg(feature = "dev")]
        Command::Dev(args) => block_on(dev::dev(args)),
        #[cfg(feature = "dev")]
        Command::Bench(args) => block_on(bench::bench(args)),
    }
}

/// The workflow `name` in `namespace`, or an error saying it does not exist there.
async fn read_workflow(
    api: &kube::Api<workflow_operator_core::WorkFlow>,
    namespace: &str,
    name: &str,
) -> anyhow::Result<workflow_operator_core::WorkFlow> {
    use anyhow::Context as _;
    api.get_opt(name)
        .await
        .with_context(|| format!("reading workflow {namespace}/{name}"))?
        .with_context(|| format!("workflow {name} not found in namespace {namespace}"))
}

/// The field manager of the CLI's writes (as `kubectl` is of its own).
const FIELD_MANAGER: &str = "workflow-operator-cli";

/// The workflow `name` in `namespace` as its steps run: its templates expanded with the shared
/// templates its status records (`plan::prepare`), or as it is when it uses none or does not
/// expand (yet).
async fn read_expanded(
    api: &kube::Api<workflow_operator_core::WorkFlow>,
    namespace: &str,
    name: &str,
) -> anyhow::Result<workflow_operator_core::WorkFlow> {
    let workflow = read_workflow(api, namespace, name).await?;
    Ok(workflow_operator_core::plan::prepare(&workflow)
        .0
        .unwrap_or(workflow))
}

/// Runs a command's body; an error is printed (with its causes) and exits 1.
async fn report(body: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    report_with(async { body.await.map(|()| ExitCode::SUCCESS) }).await
}

/// Runs a command's body that chooses its exit code; an error is printed (with its causes)
/// and exits 1.
async fn report_with(
    body: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    match body.await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn block_on(future: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(future),
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The log filter of every command but `dev`.
const DEFAULT_LOG: &str = "warn,workflow_operator=info,kube_kopf=info";

fn init_tracing(filter: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
