//! The step agent's program (`workflow-agent`, the binary `src/bin/workflow-agent.rs`): it
//! runs inside a step's pod, copied there by an init container ([`install`]), and runs the
//! step's command ([`run`]): it writes the step's script and downloads its input artifacts
//! first, keeps the standard output as `result`, and afterwards reads the output parameters,
//! uploads the output artifacts and writes everything as one report where the operator reads
//! outputs; for an interactive step it waits for `continue` instead of running the command;
//! for an HTTP step it makes the step's request instead (`http`), for a resource step it takes
//! the step's action on an object (`resource`).
//! What it is told and what it answers are the core's
//! `workflow_operator_core::agent` types.

mod artifacts;
mod collect;
mod http;
mod interactive;
mod resource;
mod run;
mod stdout;

pub use interactive::continue_step;
pub use run::run;

use std::path::Path;

use workflow_operator_core::agent;

/// `workflow-agent install DEST`: copies this program to `DEST` (a hard link when it can,
/// which costs nothing on the embedded control plane, else a copy), executable.
///
/// # Errors
/// When `DEST` cannot be written.
pub fn install(dest: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let me = std::env::current_exe()?;
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let _ = std::fs::remove_file(dest);
    if std::fs::hard_link(&me, dest).is_err() {
        std::fs::copy(&me, dest)?;
    }
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755))
}

/// The agent's command line: `install DEST`, `run -- COMMAND...`, `http` (an HTTP step's
/// request), `resource` (a resource step's action) or `continue [--exit-code N]` (an interactive step); returns the exit code.
pub fn main_with(args: &[String]) -> i32 {
    match args {
        [install_, dest] if install_ == "install" => match install(Path::new(dest)) {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("workflow-agent: installing into {dest}: {error}");
                1
            }
        },
        [run_, dash, command @ ..] if run_ == "run" && dash == "--" && !command.is_empty() => {
            run(command)
        }
        [http_] if http_ == agent::HTTP_VERB => run(&[]),
        [resource_] if resource_ == agent::RESOURCE_VERB => run(&[]),
        [continue_] if continue_ == "continue" => continue_step(None),
        [continue_, flag, code] if continue_ == "continue" && flag == "--exit-code" => {
            match code.parse() {
                Ok(code) => continue_step(Some(code)),
                Err(_) => {
                    eprintln!("workflow-agent: --exit-code {code:?} is not a number");
                    2
                }
            }
        }
        _ => {
            eprintln!(
                "usage: workflow-agent install DEST | workflow-agent run -- COMMAND [ARG...] | \
                 workflow-agent http | workflow-agent resource | workflow-agent continue [--exit-code N]\n\
                 (the operator starts it in a step's pod; it is not meant to be run by hand)"
            );
            2
        }
    }
}

/// An error and its causes, on one line, each text once: what a step's message shows (reqwest's own error says
/// only "error sending request", the artifact store's "putting KEY ... failed").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        // object_store repeats a cause's text in the error wrapping it: said once.
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(&format!(": {said}"));
        }
        source = cause.source();
    }
    text
}
