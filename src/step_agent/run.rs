//! `workflow-agent run -- COMMAND...`: the step's command, with the agent before and after it.

use std::collections::BTreeMap;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};

use workflow_operator_core::agent::{self, COLLECT_FAILED_EXIT, Report, TASK_ENV, Task};
use workflow_operator_core::outputs::{MAX_OUTPUTS_BYTES, OUTPUTS_ENV, OUTPUTS_PATH};

use super::interactive::{self, Ended};
use super::stdout::Stdout;
use super::{artifacts, collect, http, resource};

/// The exit code when the command cannot be started, as a shell's.
const CANNOT_RUN_EXIT: i32 = 127;

/// Runs `command` as the step (an HTTP step's request or a resource step's action instead, with
/// no command), and returns the step's exit code: the command's, or
/// [`COLLECT_FAILED_EXIT`] when its inputs cannot be had or its outputs collected. Whatever
/// fails says why in the termination message (the step's failure message) and on stderr.
pub fn run(command: &[String]) -> i32 {
    let report_path = std::env::var(OUTPUTS_ENV).unwrap_or_else(|_| OUTPUTS_PATH.to_string());
    let fail = Failing {
        report_path: &report_path,
    };
    let pod_name = std::env::var(agent::POD_NAME_ENV).unwrap_or_default();
    let task = std::env::var(TASK_ENV).map(|task| agent::with_pod_name(&task, &pod_name));
    let task: Task = match task.map(|t| serde_json::from_str(&t)) {
        Ok(Ok(task)) => task,
        Ok(Err(error)) => {
            return fail.with(CANNOT_RUN_EXIT, format!("${TASK_ENV} is not JSON: {error}"));
        }
        Err(_) => return fail.with(CANNOT_RUN_EXIT, format!("${TASK_ENV} is not set")),
    };
    if command.is_empty() && task.http.is_none() && task.resource.is_none() {
        return fail.with(CANNOT_RUN_EXIT, "no command to run".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(run_task(&task, command, &fail))
}

/// Where a failure is written: the termination message, as the step's failure message.
struct Failing<'a> {
    report_path: &'a str,
}

impl Failing<'_> {
    /// Says `message` (on stderr and in the termination message); `code`, to exit with.
    fn with(&self, code: i32, message: String) -> i32 {
        eprintln!("workflow-agent: {message}");
        let _ = std::fs::write(self.report_path, &message);
        code
    }
}

/// The step: inputs, the command, then its outputs.
async fn run_task(task: &Task, command: &[String], fail: &Failing<'_>) -> i32 {
    if let Err(message) = prepare(task) {
        return fail.with(CANNOT_RUN_EXIT, message);
    }
    if let Err(message) = artifacts::download(task).await {
        return fail.with(COLLECT_FAILED_EXIT, message);
    }
    let mut from_object = BTreeMap::new();
    let stdout = if let Some(request) = &task.http {
        match http::call(request, task.result).await {
            Ok(body) => body,
            Err(message) => return fail.with(COLLECT_FAILED_EXIT, message),
        }
    } else if let Some(resource) = &task.resource {
        match resource::act(resource).await {
            Ok(outputs) => from_object = outputs,
            Err(message) => return fail.with(COLLECT_FAILED_EXIT, message),
        }
        None
    } else if task.interactive {
        match interactive::wait(task, command).await {
            Ok(Ended::Succeeded(stdout)) => stdout,
            Ok(Ended::Failed(code, message)) => return fail.with(code, message),
            Err(message) => return fail.with(CANNOT_RUN_EXIT, message),
        }
    } else {
        match run_command(command, task.result).await {
            Ok((status, _)) if !status.success() => return exit_code(status),
            Ok((_, stdout)) => stdout,
            Err(error) => {
                return fail.with(
                    CANNOT_RUN_EXIT,
                    format!("cannot run {:?}: {error}", command[0]),
                );
            }
        }
    };
    let report = match collect::report(task, stdout.map(|s| s.result()).transpose()) {
        Ok(report) => report,
        Err(message) => return fail.with(COLLECT_FAILED_EXIT, message),
    };
    let stored = match artifacts::upload(task).await {
        Ok(stored) => stored,
        Err(message) => return fail.with(COLLECT_FAILED_EXIT, message),
    };
    let report = Report {
        outputs: (report.outputs.into_iter().chain(from_object))
            .chain(stored)
            .collect(),
    };
    match report.to_message() {
        Ok(message) => match std::fs::write(fail.report_path, message) {
            Ok(()) => 0,
            Err(error) => fail.with(
                COLLECT_FAILED_EXIT,
                format!("writing the outputs to {}: {error}", fail.report_path),
            ),
        },
        Err(message) => fail.with(COLLECT_FAILED_EXIT, message),
    }
}

/// Before the command: the script, and an empty outputs file for `$WORKFLOW_OUTPUTS`.
fn prepare(task: &Task) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let write = |path: &str, text: &str| {
        std::fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))
    };
    write(agent::OUTPUTS_FILE, "")?;
    if let Some(source) = &task.source {
        write(agent::SCRIPT_PATH, source)?;
        std::fs::set_permissions(agent::SCRIPT_PATH, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("making {} executable: {e}", agent::SCRIPT_PATH))?;
    }
    Ok(())
}

/// Runs the command to its end, its `$WORKFLOW_OUTPUTS` the agent's file; SIGTERM and SIGINT
/// are passed on to it (the agent is the container's first process). With `keep_stdout`, its
/// standard output is copied through and kept (up to one byte past what a termination message
/// holds: more is refused anyway).
async fn run_command(
    command: &[String],
    keep_stdout: bool,
) -> std::io::Result<(ExitStatus, Option<Stdout>)> {
    // The store's credentials are the agent's, not the command's.
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .env(OUTPUTS_ENV, agent::OUTPUTS_FILE)
        .env_remove(agent::ACCESS_KEY_ENV)
        .env_remove(agent::SECRET_KEY_ENV)
        .stdout(if keep_stdout {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .spawn()?;
    let stdout = child.stdout.take();
    let copy = tokio::spawn(async move {
        let mut stdout = stdout?;
        Some(copy_and_keep(&mut stdout).await)
    });
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = term.recv() => pass_on(&child, nix::sys::signal::Signal::SIGTERM),
            _ = int.recv() => pass_on(&child, nix::sys::signal::Signal::SIGINT),
        }
    };
    let kept = copy.await.ok().flatten();
    Ok((status, kept))
}

/// Copies `stdout` to the agent's own (the step's log) and keeps its first bytes.
async fn copy_and_keep(stdout: &mut tokio::process::ChildStdout) -> Stdout {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut out = tokio::io::stdout();
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(n) = stdout.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        let _ = out.write_all(&buffer[..n]).await;
        let room = (MAX_OUTPUTS_BYTES + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&buffer[..n.min(room)]);
        total += n;
    }
    let _ = out.flush().await;
    Stdout { kept, total }
}

fn pass_on(child: &tokio::process::Child, signal: nix::sys::signal::Signal) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
    }
}

/// The exit code a shell reports for `status`: the code, or 128 + the signal.
pub(super) fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
