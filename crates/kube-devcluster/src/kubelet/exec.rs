//! `kubectl exec`'s kubelet half: a command started in a running container's own
//! environment. The pod runner ([`crate::kubelet::runner`]) registers each container while its
//! process runs ([`register`]); the API server's exec handler
//! ([`crate::apiserver::exec`]) finds it and starts the command through [`PodExec`].
//!
//! The command gets what the container's process got: its resolved environment (`HOME` the
//! scratch directory included), its working directory, and, for a sandboxed container, its
//! sandbox. It enters the sandbox with util-linux `nsenter`: the user and mount namespaces and
//! the root directory of the container's running process, then `env --chdir` to the working
//! directory inside it. Joining the running namespaces is the least a container runtime's
//! `exec` does too (runc's `setns` into the container's namespaces), and it sees exactly the
//! container's mounts, files it wrote to `/tmp` included, where replaying the set-up script
//! would build a second, different root. A container's process enters its root a moment after
//! it starts (the set-up script runs first), so the command waits for that.
//!
//! The command runs in a process group of its own, registered with the pod as the container's
//! is, so it dies with the pod, when the control plane stops, and when the control plane dies
//! (the reaper); it is also killed when the container's process exits (as a container's exec'd
//! processes die with it), when the session ends, and, with whatever it left in its group,
//! once it exits. With a terminal ([`crate::kubelet::pty`]) it is its session's leader instead,
//! the terminal its controlling one.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::process::{resolve_program, spawn_error};
use super::pty::{self, Pty};
use super::{Shared, kill_group};

/// (namespace, pod, container).
type ContainerKey = (String, String, String);

/// A running container, as an exec into it needs it.
pub(crate) struct ExecTarget {
    /// The pod's uid: a pod of the same name created since is another pod.
    pub uid: String,
    /// The container's main process.
    pub pid: i32,
    /// Its environment as it started with it.
    pub env: HashMap<String, String>,
    /// Its working directory (in its sandbox, when it has one).
    pub working_dir: String,
    pub sandboxed: bool,
    /// Cancelled when its process has exited.
    ended: CancellationToken,
}

impl ExecTarget {
    pub fn new(
        uid: &str,
        pid: i32,
        env: HashMap<String, String>,
        working_dir: String,
        sandboxed: bool,
    ) -> Self {
        Self {
            uid: uid.to_string(),
            pid,
            env,
            working_dir,
            sandboxed,
            ended: CancellationToken::new(),
        }
    }
}

/// The containers running now.
#[derive(Default)]
pub(crate) struct Targets(Mutex<HashMap<ContainerKey, Arc<ExecTarget>>>);

impl Targets {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContainerKey, Arc<ExecTarget>>> {
        self.0.lock().expect("exec targets lock poisoned")
    }
}

/// A container registered while its process runs; dropped when it has exited.
pub(crate) struct Registration {
    shared: Arc<Shared>,
    key: ContainerKey,
    target: Arc<ExecTarget>,
}

/// Registers a container whose process runs (see [`Registration`]).
pub(crate) fn register(
    shared: &Arc<Shared>,
    namespace: &str,
    pod: &str,
    container: &str,
    target: ExecTarget,
) -> Registration {
    let key = (namespace.into(), pod.into(), container.into());
    let target = Arc::new(target);
    shared
        .exec_targets
        .lock()
        .insert(key.clone(), target.clone());
    Registration {
        shared: shared.clone(),
        key,
        target,
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut targets = self.shared.exec_targets.lock();
        if targets
            .get(&self.key)
            .is_some_and(|t| Arc::ptr_eq(t, &self.target))
        {
            targets.remove(&self.key);
        }
        drop(targets);
        self.target.ended.cancel();
    }
}

/// What a client asked to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub command: Vec<String>,
    /// The client writes to the command's stdin (otherwise it reads nothing).
    pub stdin: bool,
    /// The command runs on a terminal: stdout and stderr are both the terminal.
    pub tty: bool,
}

/// Running commands in containers, as the API server's exec handler uses the kubelet.
pub trait PodExec: Send + Sync {
    /// Whether the container of pod `uid` runs now (otherwise there is nothing to exec into).
    fn is_running(&self, namespace: &str, pod: &str, uid: &str, container: &str) -> bool;

    /// Starts `request` in the container; `Err` is the runtime's reason it could not.
    fn exec(
        self: Arc<Self>,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
        request: ExecRequest,
    ) -> BoxFuture<'static, Result<ExecProcess, String>>;
}

impl PodExec for Shared {
    fn is_running(&self, namespace: &str, pod: &str, uid: &str, container: &str) -> bool {
        self.exec_target(namespace, pod, uid, container).is_some()
    }

    fn exec(
        self: Arc<Self>,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
        request: ExecRequest,
    ) -> BoxFuture<'static, Result<ExecProcess, String>> {
        let target = self.exec_target(namespace, pod, uid, container);
        let container = container.to_string();
        Box::pin(async move {
            // The kubelet's words for a container it does not find (pkg/kubelet/kubelet_pods.go,
            // `GetExec`).
            let target = target.ok_or_else(|| format!("container not found ({container:?})"))?;
            start(&self, &target, &request).await
        })
    }
}

impl Shared {
    fn exec_target(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
    ) -> Option<Arc<ExecTarget>> {
        let key = (namespace.into(), pod.into(), container.into());
        let target = self.exec_targets.lock().get(&key).cloned()?;
        (target.uid == uid && !target.ended.is_cancelled()).then_some(target)
    }
}

/// A command started in a container.
pub struct ExecProcess {
    /// Its stdin, when the client writes to it (the terminal, with one).
    pub stdin: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    /// Its stdout (the terminal, with one).
    pub stdout: Option<Box<dyn AsyncRead + Send + Unpin>>,
    /// Its stderr (none with a terminal).
    pub stderr: Option<Box<dyn AsyncRead + Send + Unpin>>,
    /// Its terminal, to resize.
    pub terminal: Option<Pty>,
    child: tokio::process::Child,
    group: i32,
    uid: String,
    ended: CancellationToken,
    shared: Arc<Shared>,
}

impl ExecProcess {
    /// Waits for the command to exit (killing it if its container exits first): its exit code,
    /// 128 + the signal's number for a command killed by one, as container runtimes report it.
    pub async fn wait(&mut self) -> std::io::Result<i32> {
        let status = tokio::select! {
            status = self.child.wait() => status,
            () = self.ended.cancelled() => {
                kill_group(self.group);
                self.child.wait().await
            }
        };
        // What it started goes with it, so its output's end is not held open.
        kill_group(self.group);
        let status = status?;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }
}

impl Drop for ExecProcess {
    fn drop(&mut self) {
        kill_group(self.group);
        self.shared.clear_group(&self.uid, self.group);
    }
}

/// How long a sandboxed container's process may take to enter its root.
const ROOT_WAIT: Duration = Duration::from_secs(5);

/// Starts the command in `target`'s environment.
async fn start(
    shared: &Arc<Shared>,
    target: &Arc<ExecTarget>,
    request: &ExecRequest,
) -> Result<ExecProcess, String> {
    let program = request
        .command
        .first()
        .ok_or("you must specify at least one command for the container")?;
    if target.sandboxed {
        wait_for_root(target.pid).await?;
    }
    let mut command = command_for(target, request);
    let mut terminal = None;
    if request.tty {
        let (pty, slave) = pty::open().map_err(|e| format!("cannot open a terminal: {e}"))?;
        let stdio = || slave.stdio().map_err(|e| e.to_string());
        command.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
        terminal = Some(pty);
    } else {
        let stdin = if request.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        command
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
    }
    shared.ensure_reaper();
    let child = command.spawn().map_err(|e| spawn_error(program, &e))?;
    // Our copies of the terminal's command side go, so its end is the command's.
    drop(command);
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or("the command exited at once")?;
    if !shared.set_group(&target.uid, group) {
        return Err("the pod is stopping".into());
    }
    let mut process = ExecProcess {
        stdin: None,
        stdout: None,
        stderr: None,
        terminal: None,
        child,
        group,
        uid: target.uid.clone(),
        ended: target.ended.clone(),
        shared: shared.clone(),
    };
    process.attach(terminal, request.stdin)?;
    Ok(process)
}

impl ExecProcess {
    /// Takes the command's streams: its pipes, or the terminal.
    fn attach(&mut self, terminal: Option<Pty>, stdin: bool) -> Result<(), String> {
        let Some(pty) = terminal else {
            self.stdin = (self.child.stdin.take()).map(|s| Box::new(s) as Box<_>);
            self.stdout = (self.child.stdout.take()).map(|s| Box::new(s) as Box<_>);
            self.stderr = (self.child.stderr.take()).map(|s| Box::new(s) as Box<_>);
            return Ok(());
        };
        let handle_error = |e: std::io::Error| format!("cannot use the terminal: {e}");
        if stdin {
            self.stdin = Some(Box::new(pty.writer().map_err(handle_error)?));
        }
        self.stdout = Some(Box::new(pty.reader().map_err(handle_error)?));
        self.terminal = Some(pty);
        Ok(())
    }
}

/// The command that runs `request` as the container would: in its working directory with its
/// environment, inside its sandbox when it has one (see the module's documentation), under
/// `setsid --ctty` with a terminal.
fn command_for(target: &ExecTarget, request: &ExecRequest) -> tokio::process::Command {
    let mut argv: Vec<String> = Vec::new();
    if request.tty {
        argv.extend(["setsid".into(), "--ctty".into()]);
    }
    if target.sandboxed {
        let pid = target.pid.to_string();
        argv.extend(
            [
                "nsenter",
                "--target",
                &pid,
                "--user",
                "--mount",
                "--root",
                // Its uid stays the one the namespace maps to root: nsenter's default would
                // call setgroups, which the namespace denies.
                "--preserve-credentials",
                "--",
                "env",
                "--chdir",
                &target.working_dir,
                "--",
            ]
            .map(String::from),
        );
        argv.extend(request.command.iter().cloned());
    } else {
        let path = target.env.get("PATH").map(String::as_str);
        let program = &request.command[0];
        let found = resolve_program(program, path, |p| PathBuf::from(p));
        argv.push(found.map_or_else(|| program.clone(), |p| p.to_string_lossy().into_owned()));
        argv.extend(request.command[1..].iter().cloned());
    }
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .envs(&target.env)
        .kill_on_drop(true);
    if !target.sandboxed {
        command.current_dir(&target.working_dir);
    }
    command
}

/// Waits until the container's process `pid` has entered its sandbox's root (its root is no
/// longer the host's).
async fn wait_for_root(pid: i32) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + ROOT_WAIT;
    loop {
        match std::fs::read_link(format!("/proc/{pid}/root")) {
            Ok(root) if root != std::path::Path::new("/") => return Ok(()),
            Ok(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(_) => return Err("the container's sandbox is not set up".into()),
            Err(_) => return Err("the container's process is gone".into()),
        }
    }
}
