//! An interactive step under the agent: instead of running the step's command, the agent
//! writes it as a script a person in the pod can run ([`agent::COMMAND_SCRIPT`], which keeps
//! its exit code), then waits until `workflow-agent continue` (what `workflow-operator
//! continue` runs in the pod) says how the step ends. All of it lives in the agent's
//! `emptyDir`, so an operator restarted meanwhile finds the step where it was.

use std::io::Read;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use workflow_operator_core::agent::{self, Task};
use workflow_operator_core::outputs::{MAX_OUTPUTS_BYTES, OUTPUTS_ENV};

use super::stdout::Stdout;

/// How an interactive step ended.
pub(super) enum Ended {
    /// Continued with exit code 0: its outputs are collected, with the standard output of the
    /// command's last run when the result is read.
    Succeeded(Option<Stdout>),
    /// Continued with another exit code, or stopped while waiting: the code and why.
    Failed(i32, String),
}

/// How often the agent looks for [`agent::CONTINUE_FILE`]: a person is waited for.
const POLL: Duration = Duration::from_millis(200);

/// Writes the command's script, then waits for `continue` (or SIGTERM/SIGINT, the step being
/// stopped).
///
/// # Errors
/// When the script cannot be written.
pub(super) async fn wait(task: &Task, command: &[String]) -> Result<Ended, String> {
    let script = command_script(command, task.result);
    std::fs::write(agent::COMMAND_SCRIPT, script)
        .and_then(|()| make_executable(agent::COMMAND_SCRIPT))
        .map_err(|e| format!("writing {}: {e}", agent::COMMAND_SCRIPT))?;
    println!(
        "workflow-agent: waiting for you: `workflow-operator exec` opens a shell here; {} runs \
         the step's command; `workflow-operator continue` ends the step",
        agent::COMMAND_SCRIPT
    );
    let code = match continued().await {
        Some(code) => code,
        None => {
            return Ok(Ended::Failed(
                143,
                "stopped while waiting for `workflow-operator continue`".to_string(),
            ));
        }
    };
    if code != 0 {
        let message = format!("ended by `workflow-operator continue` with exit code {code}");
        return Ok(Ended::Failed(code, message));
    }
    Ok(Ended::Succeeded(task.result.then(last_stdout)))
}

/// The script that runs `command` as the step would, keeping its exit code (and, with
/// `keep_stdout`, its standard output) for `continue`.
fn command_script(command: &[String], keep_stdout: bool) -> String {
    let line = agent::shell_line(command);
    let last = agent::LAST_EXIT_FILE;
    let run = if keep_stdout {
        let stdout = agent::STDOUT_FILE;
        format!("{{ {line}; echo $? > {last}; }} | tee {stdout}\nexit \"$(cat {last})\"\n")
    } else {
        format!("{line}\ncode=$?\necho \"$code\" > {last}\nexit \"$code\"\n")
    };
    format!(
        "#!/bin/sh\n\
         # The step's command, as its container would run it; its exit code is what\n\
         # `workflow-operator continue` ends the step with unless told another.\n\
         unset {} {}\n\
         export {OUTPUTS_ENV}={}\n\
         {run}",
        agent::ACCESS_KEY_ENV,
        agent::SECRET_KEY_ENV,
        agent::OUTPUTS_FILE,
    )
}

/// The exit code `continue` wrote, once it has; `None` when the agent is told to stop first.
async fn continued() -> Option<i32> {
    let mut term = signal(SignalKind::terminate()).ok()?;
    let mut int = signal(SignalKind::interrupt()).ok()?;
    loop {
        if let Some(code) = std::fs::read_to_string(agent::CONTINUE_FILE)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return Some(code);
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = term.recv() => return None,
            _ = int.recv() => return None,
        }
    }
}

/// The standard output of the command's last run (none if it never ran).
fn last_stdout() -> Stdout {
    let Ok(file) = std::fs::File::open(agent::STDOUT_FILE) else {
        return Stdout {
            kept: Vec::new(),
            total: 0,
        };
    };
    let total = file.metadata().map_or(0, |m| m.len() as usize);
    let mut kept = Vec::new();
    let _ = file
        .take(MAX_OUTPUTS_BYTES as u64 + 1)
        .read_to_end(&mut kept);
    Stdout { kept, total }
}

fn make_executable(path: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// `workflow-agent continue [--exit-code N]`: ends the interactive step waiting in this pod
/// with `exit_code`, or the exit code of the command's last run; returns the exit code of
/// `continue` itself (2 when neither is known).
pub fn continue_step(exit_code: Option<i32>) -> i32 {
    let code = match exit_code {
        Some(code) => code,
        None => match std::fs::read_to_string(agent::LAST_EXIT_FILE) {
            Ok(text) => text.trim().parse().unwrap_or(1),
            Err(_) => {
                eprintln!(
                    "the step's command has not run in this pod: run {} first, or give the \
                     exit code to end the step with (--exit-code N)",
                    agent::COMMAND_SCRIPT
                );
                return 2;
            }
        },
    };
    // Written whole, then renamed: the waiting agent never reads half a number.
    let partial = format!("{}.partial", agent::CONTINUE_FILE);
    let written = std::fs::write(&partial, format!("{code}\n"))
        .and_then(|()| std::fs::rename(&partial, agent::CONTINUE_FILE));
    match written {
        Ok(()) => {
            let outcome = if code == 0 { "succeeds" } else { "fails" };
            println!("the step ended with exit code {code}: it {outcome}");
            0
        }
        Err(error) => {
            eprintln!("writing {}: {error}", agent::CONTINUE_FILE);
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_the_command_and_keeps_its_exit_code() {
        let command = ["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let script = command_script(&command, false);
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(
            script.contains(
                "sh -c 'exit 3'\ncode=$?\necho \"$code\" > /var/run/workflow-agent/last-exit\n"
            ),
            "{script}"
        );
        let kept = command_script(&command, true);
        assert!(
            kept.contains("| tee /var/run/workflow-agent/stdout"),
            "{kept}"
        );
    }
}
