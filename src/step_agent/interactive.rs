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
        Some(Continued { code, by }) => {
            if let Some(pid) = by {
                wait_until_gone(pid, CONTINUE_EXIT_WAIT).await;
            }
            code
        }
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

/// What `continue` wrote in [`agent::CONTINUE_FILE`].
#[derive(Debug, PartialEq)]
struct Continued {
    /// The exit code to end the step with.
    code: i32,
    /// The process of `continue` that wrote it.
    by: Option<i32>,
}

impl Continued {
    /// `CODE PID`, or `CODE` alone.
    fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_whitespace();
        let code = words.next()?.parse().ok()?;
        let by = words.next().and_then(|pid| pid.parse().ok());
        Some(Self { code, by })
    }
}

/// How long the agent waits for the `continue` that ended the step to exit before ending the
/// container, which kills what still runs in it: `continue` was exec'd into this container, and
/// its exec session would answer 137 (killed) for a command that had succeeded.
const CONTINUE_EXIT_WAIT: Duration = Duration::from_secs(5);

/// Waits until process `pid` has exited (gone, or a zombie waiting to be reaped, whose exit
/// status is kept), or `limit` passed.
async fn wait_until_gone(pid: i32, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while has_not_exited(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether process `pid` still runs: its `/proc/PID/stat` state is not `Z` (zombie) or `X`
/// (dead). The state follows the command name, which is in parentheses and may hold any byte.
fn has_not_exited(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !matches!(
        state.and_then(|rest| rest.chars().next()),
        Some('Z' | 'X') | None
    )
}

/// What `continue` wrote, once it has; `None` when the agent is told to stop first.
async fn continued() -> Option<Continued> {
    let mut term = signal(SignalKind::terminate()).ok()?;
    let mut int = signal(SignalKind::interrupt()).ok()?;
    loop {
        if let Some(continued) = std::fs::read_to_string(agent::CONTINUE_FILE)
            .ok()
            .and_then(|text| Continued::parse(&text))
        {
            return Some(continued);
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
    // Written whole, then renamed: the waiting agent never reads half a number. The pid lets
    // it wait for this process to exit before ending the container.
    let partial = format!("{}.partial", agent::CONTINUE_FILE);
    let written = std::fs::write(&partial, format!("{code} {}\n", std::process::id()))
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
    fn what_continue_wrote_is_its_code_and_the_pid_that_wrote_it() {
        let both = Continued::parse("3 1234\n");
        assert_eq!(
            both,
            Some(Continued {
                code: 3,
                by: Some(1234)
            })
        );
        let alone = Continued::parse("0\n");
        assert_eq!(alone, Some(Continued { code: 0, by: None }));
        assert_eq!(Continued::parse("half"), None);
    }

    #[tokio::test]
    async fn the_agent_waits_for_continue_to_exit_a_zombie_counting_as_exited() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .expect("sleep runs");
        let pid = i32::try_from(child.id()).expect("a pid");
        assert!(has_not_exited(pid));
        let started = std::time::Instant::now();
        // Not reaped until after: once it exits it is a zombie, and that is exited.
        wait_until_gone(pid, Duration::from_secs(5)).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        assert!(waited < Duration::from_secs(4), "{waited:?}");
        assert!(child.try_wait().expect("waits").is_some());
    }

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
