//! Runs one pod to its end: the pod's volumes, its container's environment and sandbox, its
//! process (restarted as `restartPolicy` says, each run with a log and termination message of
//! its own) and the status written at each step. The kubelet ([`crate::kubelet::Kubelet`])
//! starts a [`Runner`] per pod it claims.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

use super::process::{command_for, spawn_error};
use super::termination_message::{self, MessageFile, OutputTail};
use super::volumes::{self, Blocked, PodVolumes, Sandbox};
use super::{
    CONFIG_RETRY, Error, InNamespace, KillAt, Log, PodEvents, PodMode, Shared, State, StoreSources,
    cannot_start, expand, field_ref, kill_group, retry_delay, terminated, unscheduled_status,
    write_pod_status, write_status,
};
use crate::api::resources::ResourceInfo;
use crate::storage::store::{Store, StoredObject, now_rfc3339};

/// Where one run of a container writes: the pod's log, the end of this run's output (for a
/// termination message from the log), and its termination message file (on the host, and the
/// container's path for it) when it runs in a sandbox.
struct Output<'a> {
    log: Log,
    tail: OutputTail,
    message_file: Option<(&'a std::path::Path, &'a str)>,
}

/// How one run of a container ended.
enum Outcome {
    /// It ran and exited (or was killed): the terminated state.
    Exited(State),
    /// It could not start: the terminated state with reason `StartError`.
    NotStarted(State),
    /// The pod was deleted or the kubelet stopped.
    Stopped,
}

/// Runs one pod to its end, restarting its container as `restartPolicy` says.
pub(super) struct Runner {
    pub store: Store,
    pub info: Arc<ResourceInfo>,
    pub sources: Arc<StoreSources>,
    pub shared: Arc<Shared>,
    pub events: Arc<PodEvents>,
    pub pod: Arc<StoredObject>,
    pub cancel: CancellationToken,
    /// When to kill the container, once the pod is deleted.
    pub terminating: tokio::sync::watch::Receiver<KillAt>,
}

/// A container ready to run ([`Runner::prepare`]).
struct Prepared {
    container: Value,
    argv: Vec<String>,
    env: HashMap<String, String>,
    volumes: Option<PodVolumes>,
    /// It runs in a user and mount namespace of its own.
    sandboxed: bool,
    termination: termination_message::Spec,
    /// Its pod's `restartPolicy`.
    policy: String,
}

impl Runner {
    pub async fn run(&self) {
        if let PodMode::Simulated(after) = self.shared.mode {
            self.simulate(after).await;
            return;
        }
        let Some(Prepared {
            container,
            argv,
            env,
            volumes,
            sandboxed,
            termination,
            policy,
        }) = self.prepare().await
        else {
            return;
        };
        let mut log = self
            .shared
            .new_log(self.pod.namespace(), self.pod.name(), self.pod.uid());
        let mut restarts: u32 = 0;
        let mut last_state: Option<State> = None;
        loop {
            // A restarted container writes a log of its own; until it starts, its current log
            // is the last run's (as the kubelet reads `lastState` while the container waits).
            if restarts > 0 {
                log =
                    self.shared
                        .restart_log(self.pod.namespace(), self.pod.name(), self.pod.uid());
            }
            // Each run of the container has a message file of its own, as each container the
            // real kubelet starts does (`makeMounts`), and its own output for the log fallback.
            let file = match volumes.as_ref().filter(|_| sandboxed) {
                None => None,
                Some(made) => match MessageFile::create_in(made.dir()) {
                    Ok(file) => Some(file),
                    Err(error) => {
                        let why = format!("cannot create the termination message file: {error}");
                        self.write(&cannot_start(why), last_state.as_ref(), restarts);
                        return;
                    }
                },
            };
            let output = Output {
                log: log.clone(),
                tail: OutputTail::default(),
                message_file: file.as_ref().map(|f| (f.path(), termination.path.as_str())),
            };
            let outcome = self
                .run_once(
                    &argv,
                    &env,
                    (&container, volumes.as_ref()),
                    &output,
                    last_state.as_ref(),
                    restarts,
                )
                .await;
            let ended =
                |state: State| self.with_message(state, &termination, file.as_ref(), &output.tail);
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
                    self.write(&state, last_state.as_ref(), restarts);
                    return;
                }
                Outcome::Exited(state) => ended(state),
                // It never ran: nothing of its own to say (and the real kubelet's log fallback
                // finds an empty log).
                Outcome::NotStarted(state) => state,
            };
            let failed = !matches!(terminated, State::Terminated { exit_code: 0, .. });
            let restart = match policy.as_str() {
                "Never" => false,
                "OnFailure" => failed,
                _ => true,
            };
            // A container that stopped because its pod is deleted is not restarted.
            if !restart || self.is_terminating() {
                self.write(&terminated, last_state.as_ref(), restarts);
                return;
            }
            restarts += 1;
            let delay = retry_delay(restarts as usize);
            let waiting = State::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: format!(
                    "back-off {}ms restarting failed container",
                    delay.as_millis()
                ),
            };
            if !self.write(&waiting, Some(&terminated), restarts) {
                return;
            }
            last_state = Some(terminated);
            let mut terminating = self.terminating.clone();
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => return,
                _ = terminating.wait_for(Option::is_some) => return,
            }
        }
    }

    /// What running the container needs, once its volumes and env can be made: its argv with
    /// the env expanded, and whether it runs in a sandbox. `None` when it cannot start (said in
    /// its status) or the pod went away meanwhile.
    async fn prepare(&self) -> Option<Prepared> {
        let container = self
            .pod
            .value
            .pointer("/spec/containers/0")
            .cloned()
            .unwrap_or(json!({}));
        let argv = match self.argv(&container) {
            Ok(argv) => argv,
            Err(message) => {
                // Like an executable that is not there: the container cannot start.
                self.write(&cannot_start(message), None, 0);
                return None;
            }
        };
        let volumes = match self.wait_for_volumes().await {
            Ok(volumes) => volumes,
            Err(None) => return None,
            Err(Some(why)) => {
                self.write(&cannot_start(why), None, 0);
                return None;
            }
        };
        let env = self.wait_for_env(&container).await?;
        let argv: Vec<String> = argv.iter().map(|a| expand(a, &env)).collect();
        let termination = termination_message::Spec::of(&container);
        // The sandbox: for the container's volumes and working directory, and for its
        // termination message file when the process is told where that is (the module
        // documentation of `termination_message` says why only then).
        let needs_mounts = volumes::wants_sandbox(&container);
        let sandboxed = needs_mounts || termination.is_told(&argv, env.values());
        if sandboxed && let Err(why) = volumes::available().await {
            let what = if needs_mounts {
                "mount its volumes".to_string()
            } else {
                format!("give it its terminationMessagePath {:?}", termination.path)
            };
            self.write(
                &cannot_start(format!("{why}, so the devcluster cannot {what}")),
                None,
                0,
            );
            return None;
        }
        let volumes = match volumes {
            // A pod without volumes still needs its own directory for a sandbox.
            None if sandboxed => match PodVolumes::new(&self.shared.volumes, self.pod.uid()) {
                Ok(made) => Some(made),
                Err(why) => {
                    self.write(&cannot_start(why), None, 0);
                    return None;
                }
            },
            volumes => volumes,
        };
        let policy = self
            .pod
            .value
            .pointer("/spec/restartPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Always")
            .to_string();
        Some(Prepared {
            container,
            argv,
            env,
            volumes,
            sandboxed,
            termination,
            policy,
        })
    }

    fn is_terminating(&self) -> bool {
        self.terminating.borrow().is_some()
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

    /// The pod's volumes (`None` when it has none), once they can be made; meanwhile the pod
    /// waits, unscheduled or with its container `ContainerCreating`, and the scheduler's or the
    /// kubelet's Event says why. `Err(None)`: the pod was deleted (or the kubelet stopped)
    /// first; `Err(Some(why))`: it can never run here.
    async fn wait_for_volumes(&self) -> Result<Option<PodVolumes>, Option<String>> {
        let has_volumes = self
            .pod
            .value
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .is_some_and(|v| !v.is_empty());
        if !has_volumes {
            return Ok(None);
        }
        loop {
            let sources = InNamespace(&self.sources, self.pod.namespace(), &self.shared.volumes);
            let written =
                match volumes::materialise(&self.shared.volumes, &self.pod.value, &sources) {
                    Ok(made) => return Ok(Some(made)),
                    Err(Blocked::Unsupported(why)) => return Err(Some(why)),
                    Err(Blocked::Unschedulable(why)) => {
                        // pkg/scheduler/framework/types.go, `FitError.Error`: the nodes' count, the
                        // PreFilter plugin's message, then the preemption plugin's.
                        let message = format!(
                            "0/1 nodes are available: {why}. preemption: 0/1 nodes are available: \
                         1 Preemption is not helpful for scheduling."
                        );
                        self.events
                            .scheduler
                            .warn(&self.pod, "FailedScheduling", &message);
                        write_pod_status(&self.store, &self.info, &self.pod, |_| {
                            unscheduled_status(&message)
                        })
                    }
                    Err(Blocked::FailedMount(message)) => {
                        self.events.kubelet.warn(&self.pod, "FailedMount", &message);
                        let waiting = State::Waiting {
                            reason: "ContainerCreating".into(),
                            message: String::new(),
                        };
                        self.write(&waiting, None, 0)
                    }
                };
            if !written {
                return Err(None);
            }
            let mut terminating = self.terminating.clone();
            tokio::select! {
                _ = tokio::time::sleep(CONFIG_RETRY) => {}
                _ = self.cancel.cancelled() => return Err(None),
                _ = terminating.wait_for(Option::is_some) => return Err(None),
            }
        }
    }

    /// The container's environment, once every ConfigMap and Secret it needs exists; meanwhile
    /// the container waits with reason `CreateContainerConfigError`. `None`: the pod was
    /// deleted (or the kubelet stopped) first.
    async fn wait_for_env(&self, container: &Value) -> Option<HashMap<String, String>> {
        loop {
            let message = match self.env(container) {
                Ok(env) => return Some(env),
                Err(message) => message,
            };
            // pkg/kubelet/kuberuntime/kuberuntime_container.go (startContainer): a failed
            // generateContainerConfig is reported as ErrCreateContainerConfig,
            // "CreateContainerConfigError", with the error's message.
            let waiting = State::Waiting {
                reason: "CreateContainerConfigError".into(),
                message,
            };
            if !self.write(&waiting, None, 0) {
                return None;
            }
            let mut terminating = self.terminating.clone();
            tokio::select! {
                _ = tokio::time::sleep(CONFIG_RETRY) => {}
                _ = self.cancel.cancelled() => return None,
                _ = terminating.wait_for(Option::is_some) => return None,
            }
        }
    }

    /// What the container runs: its `command` and `args` over its image's defaults.
    fn argv(&self, container: &Value) -> Result<Vec<String>, String> {
        let strings = |field: &str| -> Vec<String> {
            container
                .get(field)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let image = container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let extra = self
            .shared
            .entrypoints
            .lock()
            .expect("kubelet lock poisoned")
            .clone();
        crate::kubelet::entrypoints::argv(image, strings("command"), strings("args"), &extra)
    }

    /// `PATH`, `HOME` (the scratch directory, set later), `HOSTNAME`, then the container's
    /// `envFrom` and `env` ([`crate::kubelet::pod_env`]); `Err` is the kubelet's message for a
    /// missing ConfigMap, Secret or key.
    fn env(&self, container: &Value) -> Result<HashMap<String, String>, String> {
        let mut env = HashMap::new();
        env.insert(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            }),
        );
        env.insert("HOSTNAME".to_string(), self.pod.name().to_string());
        // The pod as stored now: labels and annotations may have changed since it was created.
        let pod = self
            .store
            .get(&self.info, self.pod.namespace(), self.pod.name())
            .ok()
            .filter(|p| p.uid() == self.pod.uid())
            .map_or_else(|| self.pod.value.clone(), |p| p.value.clone());
        crate::kubelet::pod_env::resolve(
            &pod,
            container,
            &InNamespace(&self.sources, self.pod.namespace(), &self.shared.volumes),
            |path| field_ref(&pod, path),
            &mut env,
        )?;
        Ok(env)
    }

    fn write(&self, state: &State, last_state: Option<&State>, restarts: u32) -> bool {
        write_status(
            &self.store,
            &self.info,
            &self.pod,
            state,
            last_state,
            restarts,
        )
    }

    async fn simulate(&self, after: Duration) {
        let started_at = now_rfc3339();
        let running = State::Running {
            started_at: started_at.clone(),
        };
        if !self.write(&running, None, 0) {
            return;
        }
        let mut terminating = self.terminating.clone();
        tokio::select! {
            _ = tokio::time::sleep(after) => {}
            _ = self.cancel.cancelled() => return,
            // No process to stop: a deleted simulated pod goes at once.
            _ = terminating.wait_for(Option::is_some) => return,
        }
        let done = State::Terminated {
            exit_code: 0,
            reason: "Completed".into(),
            message: None,
            started_at,
            finished_at: now_rfc3339(),
        };
        self.write(&done, None, 0);
    }

    /// Runs the container's process once, in a fresh scratch directory and its own process
    /// group, collecting its output into `output`.
    async fn run_once(
        &self,
        argv: &[String],
        env: &HashMap<String, String>,
        (container, volumes): (&Value, Option<&PodVolumes>),
        output: &Output<'_>,
        last_state: Option<&State>,
        restarts: u32,
    ) -> Outcome {
        let log = &output.log;
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
        let sandbox = match Sandbox::of(volumes, container, scratch.path(), output.message_file) {
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
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => return not_started(spawn_error(&argv[0], &error)),
        };
        let Some(group) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            return Outcome::Stopped;
        };
        if !self.shared.set_group(self.pod.uid(), group) {
            let _ = child.wait().await;
            return Outcome::Stopped;
        }
        let readers = read_output(&mut child, output);
        let running = State::Running {
            started_at: started_at.clone(),
        };
        let alive = self.write(&running, last_state, restarts);
        log.open();
        let exit = if alive {
            self.wait_or_terminate(&mut child, group).await
        } else {
            None
        };
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
        log.close();
        drop(scratch);
        if let Some(why) = sandbox.as_ref().and_then(Sandbox::start_error) {
            return not_started(format!(
                "failed to start container process: setting up the pod's mounts: {why}"
            ));
        }
        Outcome::Exited(terminated(exit, started_at))
    }
}

impl Runner {
    /// Waits for the container's main process to exit; `None` when it is to be killed instead
    /// (the kubelet stopped, or the pod's grace period is over). Once the pod is deleted the
    /// main process gets SIGTERM, as the container runtime sends the container's PID 1
    /// (pkg/kubelet/kuberuntime/kuberuntime_container.go, killContainer: StopContainer with the
    /// grace period, after which the runtime kills).
    async fn wait_or_terminate(
        &self,
        child: &mut tokio::process::Child,
        group: i32,
    ) -> Option<std::io::Result<std::process::ExitStatus>> {
        let mut terminating = self.terminating.clone();
        let mut signalled = false;
        loop {
            let kill_at = *terminating.borrow_and_update();
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
                changed = terminating.changed() => {
                    if changed.is_err() {
                        // The kubelet forgot the pod: only the cancel (or an exit) is left.
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
