//! One container's runs: its process started in a fresh scratch directory and a process group
//! of its own (in its sandbox when it has one), its output kept as its log, its termination
//! message read when it ends, and the container started again as its kind and the pod's
//! `restartPolicy` say ([`crate::kubelet::init_containers::restarts`]), after the kubelet's
//! back-off ([`crate::kubelet::RestartBackoff`]), each run with a log and message file of its own.
//! While its process runs, the container is registered for `exec` ([`crate::kubelet::exec`])
//! and its readiness probe runs (`kubelet::prober`).

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;
use tokio::sync::watch;

use super::Runner;
use super::prepare::Prepared;
use crate::kubelet::exec;
use crate::kubelet::init_containers::{self, Kind, Slot};
use crate::kubelet::prober;
use crate::kubelet::process::{command_for, spawn_error};
use crate::kubelet::status::{State, cannot_start, terminated};
use crate::kubelet::termination_message::{self, MessageFile, OutputTail};
use crate::kubelet::volumes::Sandbox;
use crate::kubelet::{Error, KillAt, Log, kill_group};
use crate::storage::store::now_rfc3339;

/// One container as the runner runs it.
pub(super) struct ContainerRun<'a> {
    slot: Slot,
    kind: Kind,
    prepared: &'a Prepared,
    /// When it is to stop (SIGTERM now, SIGKILL at that time): the pod's deletion for the main
    /// container and init containers, the main container's end for a sidecar.
    stop: watch::Receiver<KillAt>,
    /// Told once its process runs (so the pod's next container may start after a sidecar).
    pub started: Option<watch::Sender<bool>>,
}

impl<'a> ContainerRun<'a> {
    pub fn new(
        slot: Slot,
        kind: Kind,
        prepared: &'a Prepared,
        stop: watch::Receiver<KillAt>,
    ) -> Self {
        Self {
            slot,
            kind,
            prepared,
            stop,
            started: None,
        }
    }

    fn is_stopping(&self) -> bool {
        self.stop.borrow().is_some()
    }
}

/// How a container ended for good; its last state is recorded (not yet written).
pub(super) enum Ended {
    /// It terminated and is not started again: its state.
    Terminated(State),
    /// It was stopped while it ran or waited to be restarted (the pod deleted, the main
    /// container done for a sidecar, the kubelet stopping).
    Stopped,
    /// The pod is gone.
    Gone,
}

/// Where one run of a container writes: its log, the end of this run's output (for a
/// termination message from the log), and its termination message file (on the host, and the
/// container's path for it) when it runs in a sandbox.
struct Output<'a> {
    log: Log,
    tail: OutputTail,
    message_file: Option<(&'a std::path::Path, &'a str)>,
}

/// Where a container is in the kubelet's back-off: its restarts since the back-off last
/// started over, and when it last moved.
#[derive(Default)]
struct Backoff {
    step: u32,
    moved: Option<tokio::time::Instant>,
}

impl Backoff {
    /// The wait before the next restart.
    fn next(&mut self, kubelet: crate::kubelet::RestartBackoff) -> Duration {
        if self.moved.is_some_and(|at| kubelet.expired(at.elapsed())) {
            self.step = 0;
        }
        self.step += 1;
        kubelet.delay(self.step)
    }
}

/// A whole number of seconds as Go's `time.Duration.String` writes it (`10s`, `5m0s`), as the
/// kubelet's back-off message has it; below a second, in milliseconds (`100ms`).
fn go_duration(delay: Duration) -> String {
    let seconds = delay.as_secs();
    if seconds == 0 {
        return format!("{}ms", delay.as_millis());
    }
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// How one run of a container ended.
enum Outcome {
    /// It ran and exited (or was killed): the terminated state.
    Exited(State),
    /// It could not start: the terminated state with reason `StartError`.
    NotStarted(State),
    /// It was killed: its grace period is over, the kubelet stopped, or the pod is gone.
    Stopped,
}

impl Runner {
    /// Runs a container until it ends for good: not to be started again, or stopped.
    pub(super) async fn run_container(&self, run: ContainerRun<'_>) -> Ended {
        let (namespace, pod, uid) = (self.pod.namespace(), self.pod.name(), self.pod.uid());
        let prepared = run.prepared;
        let mut log = (self.shared).container_log(namespace, pod, uid, &prepared.name);
        let mut restarts: u32 = 0;
        let mut backoff = Backoff::default();
        loop {
            // A restarted container writes a log of its own; until it starts, its current log
            // is the last run's (as the kubelet reads `lastState` while the container waits).
            if restarts > 0 {
                log = (self.shared).restart_log(namespace, pod, uid, &prepared.name);
            }
            // Each run of the container has a message file of its own, as each container the
            // real kubelet starts does (`makeMounts`), and its own output for the log fallback.
            let file = match prepared.volumes.as_deref().filter(|_| prepared.sandboxed) {
                None => None,
                Some(made) => match MessageFile::create_in(made.dir()) {
                    Ok(file) => Some(file),
                    Err(error) => {
                        let why = format!("cannot create the termination message file: {error}");
                        let state = cannot_start(why);
                        self.note(run.slot, |r| r.state = state.clone());
                        return Ended::Terminated(state);
                    }
                },
            };
            let output = Output {
                log: log.clone(),
                tail: OutputTail::default(),
                message_file: file
                    .as_ref()
                    .map(|f| (f.path(), prepared.termination.path.as_str())),
            };
            let outcome = self.run_once(&run, &output).await;
            let ended = |state: State| {
                self.with_message(state, &prepared.termination, file.as_ref(), &output.tail)
            };
            let terminated = match outcome {
                Outcome::Stopped => {
                    // Killed: the pod is gone, unless finalizers keep it; then say how it ended.
                    let now = now_rfc3339();
                    let state = ended(State::Terminated {
                        exit_code: 137,
                        reason: "Error".into(),
                        message: None,
                        started_at: now.clone(),
                        finished_at: now,
                    });
                    self.note(run.slot, |r| r.state = state);
                    return Ended::Stopped;
                }
                Outcome::Exited(state) => ended(state),
                // It never ran: nothing of its own to say (and the real kubelet's log fallback
                // finds an empty log).
                Outcome::NotStarted(state) => state,
            };
            let failed = !matches!(terminated, State::Terminated { exit_code: 0, .. });
            // A container told to stop (its pod deleted, or the main container done for a
            // sidecar) is not started again.
            if !init_containers::restarts(run.kind, self.policy(), failed) || run.is_stopping() {
                self.note(run.slot, |r| r.state = terminated.clone());
                return Ended::Terminated(terminated);
            }
            restarts += 1;
            if let Some(end) = self
                .back_off(&run, &mut backoff, terminated, restarts)
                .await
            {
                return end;
            }
        }
    }

    /// Waits the kubelet's back-off before the container's next run, `CrashLoopBackOff`
    /// meanwhile with the kubelet's message (kuberuntime_manager.go `doBackOff`). `restarts`
    /// counts the restart to come: `restartCount` shows it once the container runs again, as
    /// the real count is the runs before the current one. `Some`: it is not to run again.
    async fn back_off(
        &self,
        run: &ContainerRun<'_>,
        backoff: &mut Backoff,
        terminated: State,
        restarts: u32,
    ) -> Option<Ended> {
        let delay = backoff.next(self.shared.restart_backoff());
        if delay.is_zero() {
            // Started again at once: nothing to publish until it runs.
            self.note(run.slot, |r| {
                r.state = terminated.clone();
                r.last_state = Some(terminated);
            });
        } else {
            let waiting = State::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: format!(
                    "back-off {} restarting failed container={} pod={}_{}({})",
                    go_duration(delay),
                    run.prepared.name,
                    self.pod.name(),
                    self.pod.namespace(),
                    self.pod.uid()
                ),
            };
            let written = self.set(run.slot, |r| {
                r.state = waiting;
                r.last_state = Some(terminated);
            });
            if !written {
                return Some(Ended::Gone);
            }
            let mut stop = run.stop.clone();
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => return Some(Ended::Gone),
                _ = stop.wait_for(Option::is_some) => return Some(Ended::Stopped),
            }
        }
        self.note(run.slot, |r| r.restarts = restarts);
        backoff.moved = Some(tokio::time::Instant::now());
        None
    }

    /// A terminated state with the container's termination message ([`termination_message`])
    /// from this run's message file and output.
    fn with_message(
        &self,
        state: State,
        spec: &termination_message::Spec,
        file: Option<&MessageFile>,
        output: &OutputTail,
    ) -> State {
        let State::Terminated {
            exit_code,
            reason,
            message,
            started_at,
            finished_at,
        } = state
        else {
            return state;
        };
        let containers = ["/spec/containers", "/spec/initContainers"]
            .iter()
            .filter_map(|p| self.pod.value.pointer(p).and_then(Value::as_array))
            .map(Vec::len)
            .sum();
        State::Terminated {
            message: termination_message::message(
                spec,
                message.as_deref(),
                exit_code,
                file,
                output,
                containers,
            ),
            exit_code,
            reason,
            started_at,
            finished_at,
        }
    }

    /// Runs the container's process once, in a fresh scratch directory and its own process
    /// group, collecting its output into `output`.
    async fn run_once(&self, run: &ContainerRun<'_>, output: &Output<'_>) -> Outcome {
        let Prepared {
            container,
            argv,
            env,
            volumes,
            ..
        } = run.prepared;
        let started_at = now_rfc3339();
        let not_started = |message: String| Outcome::NotStarted(cannot_start(message));
        let scratch = match tempfile::Builder::new()
            .prefix("devcluster-pod-")
            .tempdir()
            .map_err(Error::Scratch)
        {
            Ok(dir) => dir,
            Err(error) => return not_started(error.to_string()),
        };
        let sandbox = match Sandbox::of(
            volumes.as_deref(),
            container,
            scratch.path(),
            output.message_file,
        ) {
            Ok(sandbox) => sandbox,
            Err(why) => return not_started(why),
        };
        let path = env.get("PATH").map(String::as_str);
        let mut command = match command_for(argv, path, sandbox.as_ref(), scratch.path()) {
            Ok(command) => command,
            Err(why) => return not_started(why),
        };
        command
            .current_dir(scratch.path())
            .env_clear()
            .envs(env)
            .env("HOME", scratch.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The reaper runs before the process does, so the group is in its hands at once.
        self.shared.ensure_reaper();
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                return not_started(match sandbox.as_ref().and_then(Sandbox::start_error) {
                    Some(why) => format!(
                        "failed to start container process: setting up the pod's mounts: {why}"
                    ),
                    None => spawn_error(&argv[0], &error),
                });
            }
        };
        let Some(group) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            return Outcome::Stopped;
        };
        if !self.shared.set_group(self.pod.uid(), group) {
            let _ = child.wait().await;
            return Outcome::Stopped;
        }
        let readers = read_output(&mut child, output);
        let registered = self.register_exec(run, group, sandbox.as_ref(), scratch.path());
        let running = State::Running {
            started_at: started_at.clone(),
        };
        // A regular init container has no readiness (Kubernetes refuses its probe).
        let probe = (run.kind != Kind::Init)
            .then(|| prober::readiness_probe(container))
            .flatten();
        let alive = self.set(run.slot, |r| {
            r.state = running;
            r.probed = probe.as_ref().map(|_| false);
        });
        output.log.open();
        let exit = if alive {
            if let Some(started) = &run.started {
                started.send_replace(true);
            }
            let pod = &self.pod;
            let target = prober::Target {
                shared: &self.shared,
                namespace: pod.namespace(),
                pod: pod.name(),
                uid: pod.uid(),
                container: &run.prepared.name,
            };
            let probing = prober::probe_readiness(probe.as_ref(), target, |ready| {
                self.set(run.slot, |r| r.probed = Some(ready));
            });
            tokio::select! {
                exit = self.wait_or_terminate(&mut child, group, run.stop.clone()) => exit,
                () = probing => None,
            }
        } else {
            None
        };
        drop(registered);
        // Whatever the main process left behind dies with it, as in a container.
        kill_group(group);
        let exit = match exit {
            Some(exit) => exit,
            None => {
                let _ = child.wait().await;
                self.shared.clear_group(self.pod.uid(), group);
                return Outcome::Stopped;
            }
        };
        self.shared.clear_group(self.pod.uid(), group);
        // A process that left the group (setsid) may hold the pipes open: do not wait for it.
        let _ =
            tokio::time::timeout(Duration::from_secs(1), futures::future::join_all(readers)).await;
        output.log.close();
        drop(scratch);
        Outcome::Exited(terminated(exit, started_at))
    }

    /// Makes the running container one `exec` can reach: its process, its environment as it
    /// started with it, and its working directory.
    fn register_exec(
        &self,
        run: &ContainerRun<'_>,
        group: i32,
        sandbox: Option<&Sandbox>,
        scratch: &std::path::Path,
    ) -> exec::Registration {
        let prepared = run.prepared;
        let mut env = prepared.env.clone();
        env.insert("HOME".into(), scratch.to_string_lossy().into_owned());
        let working_dir = sandbox.map_or_else(
            || scratch.to_string_lossy().into_owned(),
            |s| s.working_dir().to_string(),
        );
        let pod = &self.pod;
        let target = exec::ExecTarget::new(pod.uid(), group, env, working_dir, sandbox.is_some());
        exec::register(
            &self.shared,
            pod.namespace(),
            pod.name(),
            &prepared.name,
            target,
        )
    }

    /// Waits for the container's main process to exit; `None` when it is to be killed instead
    /// (the kubelet stopped, or its grace period is over). Once `stop` says so the main
    /// process gets SIGTERM, as the container runtime sends the container's PID 1
    /// (pkg/kubelet/kuberuntime/kuberuntime_container.go, killContainer: StopContainer with the
    /// grace period, after which the runtime kills).
    async fn wait_or_terminate(
        &self,
        child: &mut tokio::process::Child,
        group: i32,
        mut stop: watch::Receiver<KillAt>,
    ) -> Option<std::io::Result<std::process::ExitStatus>> {
        let mut signalled = false;
        loop {
            let kill_at = *stop.borrow_and_update();
            if kill_at.is_some() && !signalled {
                signalled = true;
                // ESRCH: it has just exited, which the wait below sees.
                let _ = nix::sys::signal::kill(Pid::from_raw(group), Signal::SIGTERM);
            }
            let deadline = async {
                match kill_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                exit = child.wait() => return Some(exit),
                _ = self.cancel.cancelled() => return None,
                _ = deadline => return None,
                changed = stop.changed() => {
                    if changed.is_err() {
                        // Nobody can stop it any more (the kubelet forgot the pod): only the
                        // cancel (or an exit) is left.
                        tokio::select! {
                            exit = child.wait() => return Some(exit),
                            _ = self.cancel.cancelled() => return None,
                        }
                    }
                }
            }
        }
    }
}

/// Copies the child's stdout and stderr into `output`'s log and tail, one task each.
fn read_output(
    child: &mut tokio::process::Child,
    output: &Output<'_>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let streams = [
        (child.stdout.take()).map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        (child.stderr.take()).map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ];
    streams
        .into_iter()
        .flatten()
        .map(|mut stream| {
            let log = output.log.clone();
            let tail = output.tail.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    log.push(&buf[..n]);
                    tail.push(&buf[..n]);
                }
            })
        })
        .collect()
}
