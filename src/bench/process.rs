//! The operator under test as a separate OS process: this same binary's `run` subcommand,
//! pointed at the embedded control plane through `KUBECONFIG`, its stderr appended to a log
//! file. [`super::run`] starts and stops it; the process is killed if the benchmark drops it.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How to start the operator.
#[derive(Debug, Clone)]
pub struct Spawn {
    /// The `workflow-operator` binary.
    pub exe: PathBuf,
    /// Its `run --concurrency`.
    pub concurrency: usize,
    /// Its log filter (`--log-level`).
    pub log_filter: String,
    /// Where its stderr goes (appended).
    pub log: PathBuf,
    /// More arguments for `run` (e.g. `--no-step-events`).
    pub extra_args: Vec<String>,
}

/// A running operator process.
pub struct OperatorProcess {
    child: Child,
    pid: u32,
}

impl OperatorProcess {
    /// Starts `spawn.exe run` against the control plane of `kubeconfig`.
    ///
    /// # Errors
    /// When the log file cannot be opened or the binary cannot be started.
    pub fn start(spawn: &Spawn, kubeconfig: &Path) -> std::io::Result<Self> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spawn.log)?;
        let child = Command::new(&spawn.exe)
            .arg("run")
            .arg("--concurrency")
            .arg(spawn.concurrency.to_string())
            .arg("--log-level")
            .arg(&spawn.log_filter)
            .args(&spawn.extra_args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("WATCH_NAMESPACE")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| std::io::Error::other("exited at once"))?;
        Ok(Self { child, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Asks it to stop (SIGTERM), as a cluster would; kills it after `grace`.
    pub async fn stop(mut self, grace: Duration) -> Option<ExitStatus> {
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        }
    }
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
