//! `exec` and `continue`: a person's side of an interactive step (`interactive: true`), whose
//! pod waits instead of running the step's command. `exec` opens a shell in that pod, where
//! the step's agent left the command as a script; `continue` ends the step, with the exit code
//! of the command's last run there unless told another.
//!
//! Both run `kubectl exec` (`$KUBECTL`, else `kubectl` on the `PATH`) with this command's
//! cluster flags: kubectl's terminal handling (raw mode, resizes, its WebSocket transport and
//! the SPDY fallback older API servers need) is what a person at a terminal expects, and every
//! Kubernetes user has it.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use workflow_operator_core::agent;
use workflow_operator_core::crd::{StepPhase, WorkFlow};

use super::client::ClusterArgs;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    workflow-operator exec sims lammps              # a shell; then run /var/run/workflow-agent/command\n  \
    workflow-operator exec sims lammps -- env       # one command")]
pub struct ExecArgs {
    /// The workflow's name.
    name: String,
    /// The interactive step.
    step: String,
    /// What to run instead of a shell (`sh`), after `--`.
    #[arg(last = true)]
    command: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    workflow-operator continue sims lammps                  # the exit code of the command's last run\n  \
    workflow-operator continue sims lammps --exit-code 3    # fail the step with 3")]
pub struct ContinueArgs {
    /// The workflow's name.
    name: String,
    /// The interactive step.
    step: String,
    /// End the step with this exit code (0 succeeds) instead of that of the command's last
    /// run in its pod.
    #[arg(long)]
    exit_code: Option<i32>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn exec(args: ExecArgs) -> ExitCode {
    super::report_with(async {
        let target = waiting_pod(&args.cluster, &args.name, &args.step).await?;
        eprintln!(
            "step {} of {}: {} runs the step's command (${}), whose exit code ends the step at \
             `workflow-operator continue {} {}`",
            args.step,
            args.name,
            agent::COMMAND_SCRIPT,
            agent::COMMAND_ENV,
            args.name,
            args.step
        );
        let tty = std::io::stdin().is_terminal();
        let flags: &[&str] = if tty { &["-i", "-t"] } else { &["-i"] };
        let command = if args.command.is_empty() {
            vec!["sh".to_string()]
        } else {
            args.command.clone()
        };
        kubectl_exec(&args.cluster, &target, flags, &command).await
    })
    .await
}

pub async fn continue_step(args: ContinueArgs) -> ExitCode {
    super::report_with(async {
        let target = waiting_pod(&args.cluster, &args.name, &args.step).await?;
        let mut command = vec![agent::AGENT_PATH.to_string(), "continue".to_string()];
        if let Some(code) = args.exit_code {
            command.extend(["--exit-code".to_string(), code.to_string()]);
        }
        kubectl_exec(&args.cluster, &target, &[], &command).await
    })
    .await
}

/// Why `step` of workflow `name`, in `phase`, cannot be continued or entered.
fn not_waiting(name: &str, step: &str, phase: StepPhase) -> String {
    let phase_name = phase.as_str();
    match phase {
        StepPhase::Succeeded | StepPhase::Failed | StepPhase::TimedOut | StepPhase::Skipped => {
            format!(
                "step {step} of workflow {name} has finished ({phase_name}); it no longer waits for you"
            )
        }
        _ => format!(
            "step {step} of workflow {name} is {phase_name}, not waiting for you (only a running \
             step with interactive: true waits)"
        ),
    }
}

/// The pod and container of an interactive step that waits.
struct Target {
    namespace: String,
    pod: String,
    container: String,
}

/// Finds the running pod of `step` of workflow `name`, which must be `Interactive`.
///
/// # Errors
/// When the workflow or step does not exist, the step does not wait (naming its phase), or
/// its pod does not run yet.
async fn waiting_pod(cluster: &ClusterArgs, name: &str, step: &str) -> Result<Target> {
    let (client, namespace) = cluster.connect().await?;
    let workflows: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
    let workflow = (workflows.get_opt(name).await)
        .with_context(|| format!("reading workflow {namespace}/{name}"))?
        .with_context(|| format!("workflow {name} not found in namespace {namespace}"))?;
    let entry = (workflow.status.iter())
        .flat_map(|s| &s.steps)
        .find(|entry| entry.name == step);
    let job = match entry {
        Some(entry) if entry.phase == StepPhase::Interactive => entry.job.clone(),
        Some(entry) => bail!(not_waiting(name, step, entry.phase)),
        None => bail!(
            "step {step} of workflow {name} is not waiting for you: it has not started, or the \
             workflow has no such step (workflow-operator get {name})"
        ),
    };
    let job = job.with_context(|| format!("step {step} has no Job yet"))?;
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    let listed = (pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await)
        .with_context(|| format!("listing the pods of Job {job}"))?;
    let running = (listed.items.into_iter())
        .find(|pod| pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
    let Some(pod) = running else {
        bail!("the pod of step {step} (Job {job}) is not running yet: try again in a moment");
    };
    let container = (pod.spec.iter().flat_map(|s| &s.containers))
        .next()
        .map(|c| c.name.clone())
        .context("the step's pod has no container")?;
    Ok(Target {
        namespace,
        pod: pod.metadata.name.unwrap_or_default(),
        container,
    })
}

/// Runs `kubectl exec` into `target` with `flags` and `command`, its standard streams ours;
/// returns its exit code.
async fn kubectl_exec(
    cluster: &ClusterArgs,
    target: &Target,
    flags: &[&str],
    command: &[String],
) -> Result<ExitCode> {
    let kubectl = std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into());
    let status = tokio::process::Command::new(&kubectl)
        .args(cluster.kubectl_flags())
        .args(["exec", "-n", &target.namespace, "-c", &target.container])
        .args(flags)
        .arg(&target.pod)
        .arg("--")
        .args(command)
        .status()
        .await
        .with_context(|| {
            format!(
                "running {}: install kubectl, or set KUBECTL to its path",
                kubectl.to_string_lossy()
            )
        })?;
    let code = status.code().unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_step_is_said_to_have_finished_a_running_one_not_to_wait() {
        assert_eq!(
            not_waiting("sims", "lammps", StepPhase::Succeeded),
            "step lammps of workflow sims has finished (Succeeded); it no longer waits for you"
        );
        assert_eq!(
            not_waiting("sims", "lammps", StepPhase::Running),
            "step lammps of workflow sims is Running, not waiting for you (only a running step \
             with interactive: true waits)"
        );
    }
}
