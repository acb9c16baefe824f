//! The command line: one clap subcommand per job, each in its own module. `main.rs` only calls
//! [`main`].

// `print!` and `println!` of every command below: these shadow std's in the modules declared
// after them, so every write to standard output goes through [`write_stdout`].
macro_rules! print {
    ($($arg:tt)*) => { $crate::cli::write_stdout(format_args!($($arg)*)) };
}
macro_rules! println {
    () => { $crate::cli::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod artifacts;
#[cfg(feature = "dev")]
mod bench;
mod cache;
mod client;
mod control;
mod convert;
mod cron;
#[cfg(feature = "dev")]
mod dev;
mod get;
mod graph;
pub(crate) mod inspect;
mod interactive;
mod list;
mod locks;
pub(crate) mod logs;
mod resubmit;
mod resume_steps;
mod run;
mod submit;
mod suggest;
mod template;
mod trigger;
mod wait;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Runs DAG workflows of container steps on Kubernetes: one Job per step, in dependency order,
/// with per-step timeouts and progress in the WorkFlow's status. Its kinds: WorkFlow (`wf`),
/// CronWorkFlow (`cwf`), WorkFlowTrigger (`wftrigger`), WorkFlowTemplate (`wftmpl`) and
/// ClusterWorkFlowTemplate (`cwftmpl`).
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
    #[arg(long, global = true, env = "RUST_LOG", value_name = "FILTER")]
    log_level: Option<String>,
    /// How log lines are written (to standard error): `text` for people, `json` (one object a
    /// line) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// `-n`, `--kubeconfig` and `--context`, taken before the subcommand too; each command
    /// reads them from its own arguments, which clap fills from these (`run`, which has no
    /// `--kubeconfig` or `--context` of its own, from here).
    #[command(flatten)]
    cluster: client::ClusterArgs,
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
    /// their command as local processes on this machine (no container, no image pull). The
    /// API's objects live in memory and are gone at exit; only `--artifact-dir`'s files are
    /// kept.
    #[cfg(feature = "dev")]
    Dev(dev::DevArgs),
    /// Print the CustomResourceDefinitions (WorkFlow, CronWorkFlow, WorkFlowTrigger,
    /// WorkFlowTemplate, ClusterWorkFlowTemplate) as YAML (what `crd/workflow.yaml` holds).
    Crd,
    /// Check WorkFlow, CronWorkFlow, WorkFlowTrigger, WorkFlowTemplate and ClusterWorkFlowTemplate manifests
    /// (or Argo's, converted on the way) without a cluster:
    /// exit 1 and name every problem (e.g. a cycle's path, an unknown template, a missing
    /// parameter).
    Validate(inspect::ValidateArgs),
    /// Convert Argo Workflows' manifests (Workflow, WorkflowTemplate, ClusterWorkflowTemplate,
    /// CronWorkflow) to ours, on standard output; name on standard error, with its path and
    /// why, everything that could not be converted. No cluster needed.
    ///
    /// Argo's meaning is kept where the defaults differ (no step time limit: `maxStepTimeout:
    /// -1`; a `retryStrategy` without `retryPolicy` is `OnFailure`); the entrypoint's tasks
    /// become the workflow's steps, named as the tasks. `submit` and `validate` take Argo's
    /// files as they are, converting them on the way. What each Argo field becomes:
    /// `--table`, or docs/argo.md.
    #[command(after_help = "Examples:\n  \
        workflow-operator convert argo/ci.yaml > ci.yaml\n  \
        workflow-operator convert --strict argo/*.yaml > ours.yaml   # exit 1 if anything was not converted\n  \
        hera-script.py | workflow-operator convert - | kubectl create -f -\n  \
        workflow-operator convert --table > docs/argo.md")]
    Convert(convert::ConvertArgs),
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
    /// Show a workflow as `get` does, refreshed as it changes, until it finishes
    /// (`--exit-code`: then exit 0 if it completed, 1 if it failed).
    Watch(get::WatchArgs),
    /// Wait until each workflow finished, printing how each ended, as `argo wait`: exit 0 when
    /// all completed, 1 when any failed, 124 when `--timeout` passed first.
    #[command(after_help = "Examples:\n  \
        workflow-operator wait build test --timeout 10m\n  \
        workflow-operator submit release.yaml && workflow-operator wait release")]
    Wait(wait::WaitArgs),
    /// List the workflows of the namespace (`-A`: of all), newest first, as `argo list`:
    /// status, age, duration, progress, message; `-l` and `--status` filter them.
    #[command(after_help = "Examples:\n  \
        workflow-operator list --status Failed\n  \
        workflow-operator list -A -l team=ci")]
    List(list::ListArgs),
    /// Delete workflows, by name, by label (`-l`), the finished ones (`--completed`) or all;
    /// their Jobs and pods go with them.
    #[command(after_help = "Examples:\n  \
        workflow-operator delete build test\n  \
        workflow-operator delete --completed -l team=ci")]
    Delete(list::DeleteArgs),
    /// Submit a new workflow of the spec of one that ran, as `argo resubmit`: named `NAME-`
    /// and a random suffix, its parameters kept unless `-p` gives another value.
    #[command(after_help = "Examples:\n  \
        workflow-operator resubmit release -p version=1.3 --wait")]
    Resubmit(resubmit::ResubmitArgs),
    /// Print the logs of a workflow's steps in DAG order, each line prefixed with its step
    /// (`--step` for one step, run or template call, `-f` to follow).
    Logs(logs::LogsArgs),
    /// Suspend workflows (by name, or `-l SELECTOR`): no new step starts; running steps go on
    /// (sets `spec.suspend`).
    Suspend(control::ControlArgs),
    /// Resume suspended workflows: steps start again (clears `spec.suspend`), and their
    /// suspend steps that wait succeed. `--step STEP --output NAME=VALUE` gives a suspend
    /// step's supplied outputs (`valueFrom.supplied`) as it resumes it, as Argo's `argo node
    /// set WF --output-parameter NAME=VALUE --node-field-selector displayName=STEP` then `argo
    /// resume WF`.
    #[command(after_help = "Examples:\n  \
        workflow-operator resume build\n  \
        workflow-operator resume release --step approve --output approve=YES")]
    Resume(control::ResumeArgs),
    /// Stop workflows: no new step starts, running steps finish, the exit steps run, and it
    /// ends Failed (sets `spec.shutdown: Stop`).
    Stop(control::ControlArgs),
    /// Terminate workflows: their running steps' pods are stopped at once (and kept, with their
    /// logs), no exit step runs, and it ends Failed (sets `spec.shutdown: Terminate`).
    Terminate(control::ControlArgs),
    /// Retry failed or stopped workflows: the steps that did not succeed run again in new Jobs;
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
    /// parameters given (`-p NAME=VALUE`), as `argo submit`; `-w/--wait` waits until it
    /// finished, `--watch` shows it meanwhile, `--log` follows its logs.
    ///
    /// A parameter the workflow (or its template) does not declare, a missing one, a value
    /// outside its `enum`, an unknown template: the submit is refused, nothing is created.
    #[command(after_help = "Examples:\n  \
        workflow-operator submit examples/diamond.yaml --wait\n  \
        workflow-operator submit examples/diamond.yaml --generate-name --log\n  \
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
    /// List and show WorkFlowTriggers (their source, runs and the delivery each was started
    /// for), or fire a test delivery from a file.
    #[command(after_help = "Examples:\n  \
        workflow-operator trigger list -A\n  \
        workflow-operator trigger get on-push\n  \
        workflow-operator trigger fire on-push --file push.json --id test-1")]
    Trigger(trigger::TriggerArgs),
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return refused(error),
    };
    let filter = cli.log_level.as_deref().unwrap_or(match cli.command {
        #[cfg(feature = "dev")]
        Command::Dev(_) => "warn",
        Command::Run(_) => DEFAULT_LOG,
        _ => CLIENT_LOG,
    });
    init_tracing(filter, cli.log_format);
    match cli.command {
        Command::Crd => inspect::crd(),
        Command::Validate(args) => inspect::validate(&args),
        Command::Convert(args) => convert::convert(&args),
        Command::Graph(args) => graph::graph(args),
        Command::Lifecycle(args) => inspect::lifecycle(&args),
        Command::Get(args) => block_on(get::get(args)),
        Command::Watch(args) => block_on(get::watch(args)),
        Command::Wait(args) => block_on(wait::wait(args)),
        Command::List(args) => block_on(list::list(args)),
        Command::Delete(args) => block_on(list::delete(args)),
        Command::Resubmit(args) => block_on(resubmit::resubmit(args)),
        Command::Logs(args) => block_on(logs::logs(args)),
        Command::Suspend(args) => block_on(control::control(control::Verb::Suspend, args)),
        Command::Resume(args) => block_on(control::resume(args)),
        Command::Stop(args) => block_on(control::control(control::Verb::Stop, args)),
        Command::Terminate(args) => block_on(control::control(control::Verb::Terminate, args)),
        Command::Retry(args) => block_on(control::control(control::Verb::Retry, args)),
        Command::Exec(args) => block_on(interactive::exec(args)),
        Command::Continue(args) => block_on(interactive::continue_step(args)),
        Command::Submit(args) => block_on(submit::submit(args)),
        Command::Template(args) => block_on(template::template(args)),
        Command::Cron(args) => block_on(cron::cron(args)),
        Command::Trigger(args) => block_on(trigger::trigger(args)),
        Command::Locks(args) => block_on(locks::locks(args)),
        Command::Cache(args) => block_on(cache::cache(args)),
        Command::Artifacts(args) => block_on(artifacts::artifacts(args)),
        Command::Run(args) => block_on(run::run(args, cli.cluster)),
        #[cfg(feature = "dev")]
        Command::Dev(args) => block_on(dev::dev(args)),
        #[cfg(feature = "dev")]
        Command::Bench(args) => block_on(bench::bench(args)),
    }
}

/// A command line clap refused, said as clap says it; but a verb that is kubectl's (`list`,
/// `delete`, `describe`, ...) names the kubectl command that does it, where clap would offer
/// the nearest subcommand (`a similar subcommand exists: 'validate'`).
fn refused(error: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let args = || std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    if error.use_stderr()
        && let Some(said) = old_log_flag(args())
    {
        eprintln!("error: {said}");
        return ExitCode::from(2);
    }
    if error.kind() == ErrorKind::InvalidSubcommand
        && let Some(ContextValue::String(verb)) = error.get(ContextKind::InvalidSubcommand)
        && let Some(command) = kubectl_command(verb, args())
    {
        eprintln!("error: workflow-operator has no {verb:?} command: use {command}");
        return ExitCode::from(2);
    }
    error.exit()
}

/// What to say of a command line refused for `--log` given as the log filter, which is
/// `--log-level` (`--log` is `submit`'s, following the logs): `--log=FILTER` anywhere, or
/// `--log FILTER` where `--log` takes no value.
fn old_log_flag(args: impl Iterator<Item = String>) -> Option<String> {
    let args: Vec<String> = args.skip(1).collect();
    let submits = args.iter().any(|a| a == "submit" || a == "resubmit");
    let filter = args
        .iter()
        .enumerate()
        .find_map(|(i, arg)| match arg.strip_prefix("--log") {
            Some(value) if value.starts_with('=') => Some(Some(value[1..].to_string())),
            Some("") if !submits => Some(args.get(i + 1).filter(|v| !v.starts_with('-')).cloned()),
            _ => None,
        })?;
    let said = "the log filter is --log-level now (or RUST_LOG)";
    Some(match filter {
        Some(filter) => format!("{said}: --log-level {filter}"),
        None => said.to_string(),
    })
}

/// The kubectl command for `verb`, of the kind the command line is about (`cron delete x`:
/// CronWorkFlows): `None` when kubectl has no such verb.
fn kubectl_command(verb: &str, args: impl Iterator<Item = String>) -> Option<String> {
    let args: Vec<String> = args.collect();
    let kind = if args.iter().any(|a| a == "cron") {
        "cwf"
    } else if args.iter().any(|a| a == "template") {
        "wftmpl"
    } else {
        "wf"
    };
    Some(match verb {
        "list" | "ls" => format!("kubectl get {kind}"),
        "delete" | "rm" => format!("kubectl delete {kind} NAME"),
        "describe" => format!("kubectl describe {kind} NAME"),
        "edit" => format!("kubectl edit {kind} NAME"),
        "create" | "apply" => "kubectl create -f FILE, or workflow-operator submit FILE".into(),
        _ => return None,
    })
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

/// Runs a command's body that chooses its exit code; an error is printed (with its causes,
/// or as one line when the API server could not be reached) and exits 1.
async fn report_with(
    body: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    match body.await {
        Ok(code) => code,
        Err(error) => {
            match client::unreachable(&error) {
                Some(message) => eprintln!("error: {message}"),
                None => eprintln!("error: {error:#}"),
            }
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

/// The exit status of a command whose standard output was closed by its reader: what a shell
/// shows for a program killed by SIGPIPE (128 + 13), as kubectl ends in `kubectl logs | head`.
const CLOSED_PIPE_STATUS: i32 = 141;

/// Writes to standard output. When its reader has gone (`logs x | head`), the command has
/// nothing more to do: it ends quietly ([`CLOSED_PIPE_STATUS`]), where std's `println!` panics.
pub(crate) fn write_stdout(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let Err(error) = std::io::stdout().lock().write_fmt(text) else {
        return;
    };
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(CLOSED_PIPE_STATUS);
    }
    eprintln!("error: writing to standard output: {error}");
    std::process::exit(1);
}

/// The log filter of `run`.
const DEFAULT_LOG: &str = "warn,workflow_operator=info,kube_kopf=info";

/// The log filter of the commands that make requests and end: without the client's own line
/// for a request that failed, as the command says why it failed (once).
const CLIENT_LOG: &str =
    "warn,workflow_operator=info,kube_kopf=info,kube_client::client::builder=off";

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
