//! The kubelet: runs every pod's init containers and its first container as local processes and
//! writes the pod's status as the real kubelet does ([`status`]). Started by
//! [`crate::controllers::spawn_controllers`]; the API server reads pod logs through [`Shared`]
//! (as [`PodLogs`]) and runs `kubectl exec` commands in running containers through it (as
//! [`exec::PodExec`]: in the container's environment, working directory and sandbox, with a
//! pseudo-terminal from [`pty`] when asked). Each pod is run by a [`runner::Runner`] of its own.
//!
//! A container's `command` + `args` run without a shell (unless the command is one), after
//! `$(VAR)` expansion, with the container's environment ([`crate::kubelet::pod_env`]: `envFrom`,
//! `env` from values, ConfigMaps, Secrets and the pod's fields) on top of `PATH`, `HOME`,
//! `HOSTNAME` and `KUBECONFIG` ([`KUBECONFIG_ENV`]: the control plane's kubeconfig, or with RBAC
//! on the pod's own with a token issued for it, [`tokens`]), in a fresh scratch directory that is removed afterwards. While a ConfigMap or
//! Secret it needs is missing the container waits (`CreateContainerConfigError`, phase
//! `Pending`) and the kubelet tries again every [`CONFIG_RETRY`].
//!
//! The pod's volumes are made first ([`crate::kubelet::volumes`]), and a container runs in a user
//! and mount namespace of its own (a sandbox) where they are at their paths when it has
//! `volumeMounts` or a `workingDir`, or when its process is told of its
//! `terminationMessagePath`: a value of its resolved environment, its command or an argument
//! (after `$(VAR)` expansion) contains the path. A sandboxed container has an empty
//! termination message file at that path, fresh for each run, and when it terminates
//! `state.terminated.message` is what it wrote, read as the real kubelet reads it
//! ([`crate::kubelet::termination_message`]; with `FallbackToLogsOnError` a failed container's log
//! speaks for it, sandboxed or not). A container not told of the path runs as a plain local
//! process, as starting a sandbox costs more. Until volumes can be made, the pod waits as a
//! real one does, trying again every
//! [`CONFIG_RETRY`]: a claim gone since the scheduler bound the pod ([`crate::scheduler`] binds
//! none whose claim is missing) leaves it unscheduled (`PodScheduled` False, reason
//! `Unschedulable`, and the scheduler's `FailedScheduling` Event); a missing ConfigMap or
//! Secret leaves its containers `ContainerCreating` (`PodInitializing` behind init containers)
//! with the kubelet's `FailedMount` Event. A
//! volume kind the devcluster cannot make, or a machine without user namespaces for a container
//! that needs a sandbox, fails the container's start saying so (reason `StartError`). A
//! container without `command` runs its image's known defaults ([`crate::kubelet::entrypoints`]) or
//! fails saying why. A command that
//! cannot be executed fails like a container that cannot start (`terminated`, reason
//! `StartError`, exit code 128). Output (stdout and stderr interleaved, the last
//! [`LOG_LIMIT`](pod_logs::LOG_LIMIT) bytes, each line with its time) is kept as the container's
//! log ([`crate::kubelet::pod_logs`]) until the pod is deleted. `restartPolicy` `OnFailure` and
//! `Always` restart the container after the kubelet's back-off ([`RestartBackoff`]: at once, then
//! 10 s doubling to 5 minutes, `CrashLoopBackOff` meanwhile), counting `restartCount`; each run has a log of its own
//! and the run before is kept as the previous log (`kubectl logs --previous`). Regular containers
//! after the first, liveness and startup probes and resources are ignored, and no Events are
//! written of containers created, started or killed. A readiness probe (`exec`, `httpGet`,
//! `tcpSocket`) runs as the kubelet's prober runs it and decides the container's `ready`
//! (`prober`).
//!
//! Init containers ([`init_containers`]) run before the main container, in order, each as the
//! main container runs (its own command, environment, sandbox, termination message and log)
//! and seeing the same volumes (an emptyDir is one directory for all of them). A regular init
//! container runs to completion before the next one starts; when it fails the pod fails under
//! `restartPolicy: Never` (the main container never starts: it waits `PodInitializing`), and it
//! is restarted otherwise. An init container with `restartPolicy: Always` is a sidecar: the next
//! container starts once it runs, it is restarted whenever it exits, and once the main
//! container is done the sidecars are stopped ([`sidecars`]: the last one first, SIGTERM, then
//! SIGKILL of its group after the pod's `terminationGracePeriodSeconds`); the pod's phase is
//! then its main container's alone. Until the init containers are done the pod is `Pending`,
//! with `Initialized` False (`ContainersNotInitialized`) and every init container in
//! `initContainerStatuses`, so `kubectl get pod` shows `Init:N/M`.
//!
//! A pod with `activeDeadlineSeconds` is stopped once that long has passed since its
//! `startTime` ([`active_deadline`]): its containers as a deleted pod's (below), then it is
//! `Failed`, reason `DeadlineExceeded`, and kept with its logs.
//!
//! A deleted pod is stopped gracefully ([`crate::storage::pod_deletion`]): the running container's
//! main process gets SIGTERM (its sidecars' after it has stopped), and SIGKILL (the whole group)
//! once `deletionGracePeriodSeconds` are over; as soon as its containers have stopped the
//! kubelet writes its final status and deletes the pod for good (grace period 0).
//!
//! No process outlives its pod or the control plane:
//! - each container runs in its own process group (a pod's sidecars each in theirs, beside the
//!   running container's, and each exec'd command in its own too), and the whole group is killed (SIGKILL, as with a grace period of 0)
//!   when its main process exits, when the pod is deleted, and when the controllers stop or
//!   are dropped;
//! - when the control plane process dies without running any of that (SIGKILL, abort), a small
//!   `sh` "reaper", started before the first container's process, kills every group still
//!   registered with it: it reads group ids from a pipe and acts when the pipe closes, which
//!   the kernel does when the control plane dies. (`PR_SET_PDEATHSIG` would need `pre_exec`,
//!   which is unsafe code, and would reach only the direct child, not what it started.) A
//!   group is registered as soon as its process is spawned, so a control plane killed in that
//!   instant can still leave it behind. A process that leaves its
//!   group on purpose (`setsid`) escapes both, as it would escape a container's cgroup only
//!   by breaking out of the container.

use std::collections::HashMap;
use std::io::Write as _;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{
    DeleteOptions, EventType, Store, StoredObject, Target, WatchEvent, now_rfc3339,
};
use init_containers::Slot;
use pod_logs::{LogOptions, LogStream, PodLogs};
use runner::Runner;
use status::Records;
use volumes::VolumeHost;

mod active_deadline;
pub mod entrypoints;
pub mod exec;
pub(crate) mod init_containers;
pub(crate) mod node;
pub mod pod_env;
pub mod pod_logs;
pub(crate) mod prober;
mod process;
pub mod pty;
mod runner;
mod sandbox_setup;
mod sidecars;
mod status;
pub mod termination_message;
pub mod tokens;
pub(crate) mod volumes;

/// How the kubelet runs pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMode {
    /// Each pod's first container runs as a local process.
    #[default]
    Real,
    /// No process: every pod succeeds after this long (for benchmarks).
    Simulated(Duration),
}

/// How soon the kubelet tries again to start a container whose ConfigMap or Secret is missing:
/// its pod worker's back-off after a failed sync (pkg/kubelet/kubelet.go `backOffPeriod`, 10 s,
/// used by pkg/kubelet/pod_workers.go; the real one adds up to 50% jitter).
pub const CONFIG_RETRY: Duration = Duration::from_secs(10);

/// The variable naming a kubeconfig in every container whose pod does not say
/// `automountServiceAccountToken: false`: what kube-rs' `Config::infer`, client-go and kubectl
/// read, where a real pod reads its service account's token. By default it is the control
/// plane's (everyone is allowed everything, so the pod's service account grants nothing more or
/// less); with `DevClusterOptions::rbac` it is the pod's own, with a token that makes its
/// requests its service account's ([`tokens`]).
pub const KUBECONFIG_ENV: &str = "KUBECONFIG";

/// When a terminating container is to be killed (`None`: it is not terminating).
type KillAt = Option<tokio::time::Instant>;

/// What can go wrong around running a pod, outside the pod's own command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create a scratch directory: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("cannot start the process reaper: {0}")]
    Reaper(#[source] std::io::Error),
}

/// The kubelet's back-off before it starts again a container that ended and is to run again
/// (`restartPolicy: Always`, `OnFailure` after a failure, a sidecar): the first restart at once,
/// then `base` doubling up to `max`, the container `CrashLoopBackOff` meanwhile. The real
/// kubelet's is `flowcontrol.NewBackOff(backOffPeriod, MaxContainerBackOff)`, 10 s and 300 s
/// (pkg/kubelet/kubelet.go); pkg/kubelet/kuberuntime/kuberuntime_manager.go `doBackOff` starts
/// a container with no back-off entry yet at once and enters it at 10 s, and an entry not
/// moved for twice `max` starts over (flowcontrol's `hasExpired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBackoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for RestartBackoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

impl RestartBackoff {
    /// 100 ms doubling up to 1 s: for tests whose containers restart several times.
    pub const FAST: RestartBackoff = RestartBackoff {
        base: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };

    /// The wait before the `step`th restart since the back-off last started over (1: the
    /// first, at once).
    pub fn delay(&self, step: u32) -> Duration {
        if step <= 1 {
            return Duration::ZERO;
        }
        let doublings = (step - 2).min(20);
        self.base
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.max)
    }

    /// Whether a back-off last moved `since` ago starts over (twice `max`, as flowcontrol's).
    pub fn expired(&self, since: Duration) -> bool {
        since > self.max.saturating_mul(2)
    }
}

/// Kubernetes' `$(VAR)` expansion of a command, argument or env value: a defined variable is
/// replaced, an undefined reference is kept as written, and `$$` stands for a literal `$`.
pub fn expand(text: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(close) = inner.find(')')
        {
            let name = &inner[..close];
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

type Log = Arc<crate::kubelet::pod_logs::Log>;

/// A pod's logs, a [`ContainerLog`] for each container that has run.
struct PodLog {
    uid: String,
    /// The main container's name: whose log a request without a container reads.
    main: String,
    containers: Vec<ContainerLog>,
}

/// A container's log: its current run, and the run before when it was restarted (what
/// `previous=true` reads, as the kubelet keeps the last terminated container's log).
struct ContainerLog {
    name: String,
    current: Log,
    previous: Option<Log>,
}

impl PodLog {
    fn container(&self, name: Option<&str>) -> Option<&ContainerLog> {
        let name = name.unwrap_or(&self.main);
        self.containers.iter().find(|c| c.name == name)
    }

    fn close(&self) {
        for container in &self.containers {
            container.current.close();
        }
    }
}

/// A pod the kubelet is running (or about to).
struct Running {
    cancel: CancellationToken,
    /// Set when the pod is deleted: SIGTERM now, SIGKILL at that time.
    terminate: tokio::sync::watch::Sender<KillAt>,
    /// The process groups of its containers running now (a sidecar's beside another's).
    groups: Vec<i32>,
    /// Its `activeDeadlineSeconds` now: it may be set or lowered while the pod runs.
    deadline: tokio::sync::watch::Sender<Deadline>,
}

/// A pod's `activeDeadlineSeconds`, if it has one ([`active_deadline::limit`]).
type Deadline = Option<Duration>;

/// What a runner is given when the kubelet claims its pod: its cancellation, when it is to be
/// killed once deleted, and its deadline as it changes.
type Claim = (
    CancellationToken,
    tokio::sync::watch::Receiver<KillAt>,
    tokio::sync::watch::Receiver<Deadline>,
);

#[derive(Default)]
struct RunningSet {
    /// Set when the controllers stop: nothing starts after that.
    closed: bool,
    pods: HashMap<String, Running>,
}

/// What the kubelet shares with its runner tasks, the API server (logs) and [`Controllers`]
/// (killing everything on drop).
///
/// [`Controllers`]: crate::controllers::Controllers
pub(crate) struct Shared {
    mode: PodMode,
    /// Images' entrypoints added to the built-in ones (`DevClusterOptions::entrypoints`).
    entrypoints: Mutex<HashMap<String, Vec<String>>>,
    logs: Mutex<HashMap<(String, String), PodLog>>,
    running: Mutex<RunningSet>,
    reaper: Mutex<Option<Reaper>>,
    /// Where pods' volumes and claims' storage are kept.
    volumes: Arc<VolumeHost>,
    /// The containers running now, for `exec`.
    exec_targets: exec::Targets,
    /// The back-off before a container is restarted (`DevClusterOptions::restart_backoff`).
    restart_backoff: Mutex<RestartBackoff>,
    /// The control plane's kubeconfig, named by `$KUBECONFIG` in every container
    /// ([`KUBECONFIG_ENV`]) unless pods get credentials of their own.
    kubeconfig: Mutex<Option<std::path::PathBuf>>,
    /// Each pod's own token and kubeconfig instead, when the API server authenticates
    /// requests (`DevClusterOptions::rbac`).
    credentials: Mutex<Option<Arc<tokens::Credentials>>>,
}

impl Shared {
    pub fn new(mode: PodMode, volumes: Arc<VolumeHost>) -> Arc<Self> {
        Arc::new(Self {
            mode,
            volumes,
            entrypoints: Mutex::default(),
            logs: Mutex::default(),
            running: Mutex::default(),
            reaper: Mutex::default(),
            exec_targets: exec::Targets::default(),
            restart_backoff: Mutex::default(),
            kubeconfig: Mutex::default(),
            credentials: Mutex::default(),
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, RunningSet> {
        self.running.lock().expect("kubelet lock poisoned")
    }

    /// The main container's current log, as text.
    pub fn pod_logs(&self, namespace: &str, pod: &str) -> Option<String> {
        Some(self.log_of(namespace, pod, None, false)?.text())
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), PodLog>> {
        self.logs.lock().expect("kubelet lock poisoned")
    }

    /// A container's current log (the main container's without a name), or with `previous`
    /// its run before.
    fn log_of(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
        previous: bool,
    ) -> Option<Log> {
        let logs = self.logs();
        let log = logs
            .get(&(namespace.to_string(), pod.to_string()))?
            .container(container)?;
        if previous {
            log.previous.clone()
        } else {
            Some(log.current.clone())
        }
    }

    pub fn set_entrypoints(&self, entrypoints: HashMap<String, Vec<String>>) {
        *self.entrypoints.lock().expect("kubelet lock poisoned") = entrypoints;
    }

    pub fn set_restart_backoff(&self, backoff: RestartBackoff) {
        *self.restart_backoff.lock().expect("kubelet lock poisoned") = backoff;
    }

    pub fn set_kubeconfig(&self, path: std::path::PathBuf) {
        *self.kubeconfig.lock().expect("kubelet lock poisoned") = Some(path);
    }

    /// From now on each pod's containers get a kubeconfig of their own, with a token issued
    /// for the pod into `tokens`, for the API server at `server` ([`tokens`]).
    ///
    /// # Errors
    /// When the directory for the pods' kubeconfigs cannot be made.
    pub fn give_pods_tokens(
        &self,
        tokens: Arc<tokens::ServiceAccountTokens>,
        server: String,
    ) -> std::io::Result<()> {
        let dir = tempfile::Builder::new()
            .prefix("devcluster-credentials-")
            .tempdir()?;
        let credentials = tokens::Credentials {
            tokens,
            server,
            dir,
        };
        *self.credentials.lock().expect("kubelet lock poisoned") = Some(Arc::new(credentials));
        Ok(())
    }

    /// The kubeconfig a container of `pod` is given (`$KUBECONFIG`): the pod's own when pods
    /// get tokens, else the control plane's.
    ///
    /// # Errors
    /// When the pod's own cannot be written.
    pub fn kubeconfig_for(&self, pod: &StoredObject) -> Result<Option<std::path::PathBuf>, String> {
        let credentials = self
            .credentials
            .lock()
            .expect("kubelet lock poisoned")
            .clone();
        match credentials {
            Some(credentials) => credentials.kubeconfig_for(pod).map(Some),
            None => Ok(self
                .kubeconfig
                .lock()
                .expect("kubelet lock poisoned")
                .clone()),
        }
    }

    /// Forgets a deleted pod's token, if it has one.
    fn forget_credentials(&self, uid: &str) {
        let credentials = self
            .credentials
            .lock()
            .expect("kubelet lock poisoned")
            .clone();
        if let Some(credentials) = credentials {
            credentials.forget(uid);
        }
    }

    pub fn restart_backoff(&self) -> RestartBackoff {
        *self.restart_backoff.lock().expect("kubelet lock poisoned")
    }

    pub fn running_pids(&self) -> Vec<u32> {
        self.running()
            .pods
            .values()
            .flat_map(|r| r.groups.iter().filter_map(|g| u32::try_from(*g).ok()))
            .collect()
    }

    /// The logs of a pod whose containers are about to run, none yet (replacing those of an
    /// older pod of the same name); `main` is its main container's name.
    fn new_pod_log(&self, namespace: &str, pod: &str, uid: &str, main: &str) {
        self.logs().insert(
            (namespace.to_string(), pod.to_string()),
            PodLog {
                uid: uid.to_string(),
                main: main.to_string(),
                containers: Vec::new(),
            },
        );
    }

    /// The pod's entry, unless it was forgotten or replaced by another pod's.
    fn pod_log<'a>(
        logs: &'a mut HashMap<(String, String), PodLog>,
        namespace: &str,
        pod: &str,
        uid: &str,
    ) -> Option<&'a mut PodLog> {
        logs.get_mut(&(namespace.to_string(), pod.to_string()))
            .filter(|entry| entry.uid == uid)
    }

    /// A fresh log for a container's first run.
    fn container_log(&self, namespace: &str, pod: &str, uid: &str, container: &str) -> Log {
        let log = Log::default();
        if let Some(entry) = Self::pod_log(&mut self.logs(), namespace, pod, uid) {
            entry.containers.retain(|c| c.name != container);
            entry.containers.push(ContainerLog {
                name: container.to_string(),
                current: log.clone(),
                previous: None,
            });
        }
        log
    }

    /// A fresh log for a restarted container; the one before becomes the previous log.
    fn restart_log(&self, namespace: &str, pod: &str, uid: &str, container: &str) -> Log {
        let log = Log::default();
        let mut logs = self.logs();
        let entry = Self::pod_log(&mut logs, namespace, pod, uid)
            .and_then(|entry| entry.containers.iter_mut().find(|c| c.name == container));
        if let Some(entry) = entry {
            entry.previous = Some(std::mem::replace(&mut entry.current, log.clone()));
        }
        log
    }

    /// The pod's containers have stopped: followers of their logs get the rest and stop.
    fn close_logs(&self, namespace: &str, pod: &str, uid: &str) {
        if let Some(entry) = Self::pod_log(&mut self.logs(), namespace, pod, uid) {
            entry.close();
        }
    }

    fn forget_log(&self, namespace: &str, pod: &str, uid: &str) {
        let mut logs = self.logs();
        let key = (namespace.to_string(), pod.to_string());
        if logs.get(&key).is_some_and(|log| log.uid == uid)
            && let Some(log) = logs.remove(&key)
        {
            // Followers of a deleted pod's log stop.
            log.close();
        }
    }

    /// Claims a pod for running; `None` when it runs already or the kubelet stopped.
    fn claim(&self, uid: &str, deadline: Deadline) -> Option<Claim> {
        let mut running = self.running();
        if running.closed || running.pods.contains_key(uid) {
            return None;
        }
        let cancel = CancellationToken::new();
        let (terminate, terminating) = tokio::sync::watch::channel(None);
        let (deadline, deadline_changes) = tokio::sync::watch::channel(deadline);
        running.pods.insert(
            uid.to_string(),
            Running {
                cancel: cancel.clone(),
                terminate,
                groups: Vec::new(),
                deadline,
            },
        );
        Some((cancel, terminating, deadline_changes))
    }

    /// Tells a running pod's runner its `activeDeadlineSeconds` now.
    fn set_deadline(&self, uid: &str, deadline: Deadline) {
        if let Some(entry) = self.running().pods.get(uid) {
            entry.deadline.send_if_modified(|current| {
                let changed = *current != deadline;
                *current = deadline;
                changed
            });
        }
    }

    /// Starts stopping a pod's container gracefully, to be killed at `kill_at` (an earlier time
    /// given later wins); false when nothing runs for that pod.
    fn terminate(&self, uid: &str, kill_at: tokio::time::Instant) -> bool {
        let running = self.running();
        let Some(entry) = running.pods.get(uid) else {
            return false;
        };
        entry.terminate.send_if_modified(|current| match current {
            Some(at) if *at <= kill_at => false,
            _ => {
                *current = Some(kill_at);
                true
            }
        });
        true
    }

    fn is_running(&self, uid: &str) -> bool {
        self.running().pods.contains_key(uid)
    }

    /// Records a started process group; false (and the group is killed) when the pod was
    /// stopped or the kubelet closed meanwhile.
    fn set_group(&self, uid: &str, group: i32) -> bool {
        let mut running = self.running();
        let closed = running.closed;
        match running.pods.get_mut(uid) {
            Some(entry) if !closed && !entry.cancel.is_cancelled() => {
                entry.groups.push(group);
                drop(running);
                self.with_reaper(|reaper| reaper.register(group));
                true
            }
            _ => {
                kill_group(group);
                false
            }
        }
    }

    fn clear_group(&self, uid: &str, group: i32) {
        if let Some(entry) = self.running().pods.get_mut(uid) {
            entry.groups.retain(|g| *g != group);
        }
        self.with_reaper(|reaper| reaper.unregister(group));
    }

    /// Stops a pod's containers (if running); its runner writes what follows.
    fn stop(&self, uid: &str) {
        let running = self.running();
        if let Some(entry) = running.pods.get(uid) {
            entry.cancel.cancel();
            for &group in &entry.groups {
                kill_group(group);
            }
        }
    }

    fn finished(&self, uid: &str) {
        self.running().pods.remove(uid);
    }

    /// Kills every process group and refuses new pods. Synchronous, for `Drop`.
    pub fn kill_all(&self) {
        let mut running = self.running();
        running.closed = true;
        for entry in running.pods.values() {
            entry.cancel.cancel();
            for &group in &entry.groups {
                kill_group(group);
            }
        }
        drop(running);
        for log in self.logs().values() {
            log.close();
        }
        // Closing the reaper's pipe lets it exit (killing again whatever is still registered).
        let reaper = self.reaper.lock().expect("kubelet lock poisoned").take();
        drop(reaper);
    }

    /// Starts the reaper if it is not running: done before a container's process is spawned,
    /// so that registering its group is all that is left once it runs.
    fn ensure_reaper(&self) {
        self.with_reaper(|_| {});
    }

    fn with_reaper(&self, f: impl FnOnce(&mut Reaper)) {
        let mut slot = self.reaper.lock().expect("kubelet lock poisoned");
        if slot.is_none() && !self.running().closed {
            match Reaper::spawn() {
                Ok(reaper) => *slot = Some(reaper),
                Err(error) => {
                    tracing::warn!(%error, "pods may outlive a killed control plane");
                    return;
                }
            }
        }
        if let Some(reaper) = slot.as_mut() {
            f(reaper);
        }
    }
}

impl PodLogs for Shared {
    fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Option<LogStream> {
        let log = self.log_of(namespace, pod, Some(container), options.previous)?;
        Some(log.read(options))
    }
}

fn kill_group(group: i32) {
    // ESRCH (nothing left in the group) is the usual, fine outcome.
    let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
}

/// The reaper script: remembers the process groups registered (`+ ID`) and not unregistered
/// (`- ID`) on its stdin, and kills them when stdin closes.
const REAPER_SCRIPT: &str = r#"
groups=" "
while read -r op group; do
  case "$op" in
    +) groups="$groups$group " ;;
    -) case "$groups" in
         *" $group "*) groups="${groups%% $group *} ${groups#* $group }" ;;
       esac ;;
  esac
done
for group in $groups; do kill -9 -"$group" 2>/dev/null; done
"#;

/// A `sh` process (in its own process group, so a terminal's Ctrl-C does not reach it) that
/// kills the registered process groups once the control plane is gone.
struct Reaper {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
}

impl Reaper {
    fn spawn() -> Result<Self, Error> {
        use std::os::unix::process::CommandExt as _;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(REAPER_SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(Error::Reaper)?;
        let stdin = child.stdin.take();
        Ok(Self { child, stdin })
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut()
            && let Err(error) = writeln!(stdin, "{line}")
        {
            tracing::warn!(%error, "the process reaper is gone; pods may outlive a killed control plane");
            self.stdin = None;
        }
    }

    fn register(&mut self, group: i32) {
        self.send(&format!("+ {group}"));
    }

    fn unregister(&mut self, group: i32) {
        self.send(&format!("- {group}"));
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.stdin = None;
        // It exits as soon as it has read the closed pipe; reap it so no zombie is left.
        let _ = self.child.wait();
    }
}

/// (namespace, name) of a pod.
type PodKey = (String, String);

/// The kubelet's reconciler: starts a runner for every pending pod bound to its Node, stops it
/// when the pod goes.
pub(crate) struct Kubelet {
    store: Store,
    /// Its Node's name: it runs the pods bound there (`spec.nodeName`), and only those.
    node: String,
    pods_info: Arc<ResourceInfo>,
    sources: Arc<StoreSources>,
    pods_gr: GroupResource,
    shared: Arc<Shared>,
    stop: CancellationToken,
    events: Arc<PodEvents>,
}

/// The Events written about pods: the kubelet's and, for pods it cannot place, the scheduler's.
struct PodEvents {
    kubelet: Recorder,
    scheduler: Recorder,
}

impl Kubelet {
    pub fn new(
        store: Store,
        registry: Registry,
        shared: Arc<Shared>,
        node: String,
        stop: CancellationToken,
    ) -> Self {
        let pods_info = builtin(&registry, "", "pods");
        let sources = Arc::new(StoreSources {
            store: store.clone(),
            configmaps: builtin(&registry, "", "configmaps"),
            secrets: builtin(&registry, "", "secrets"),
            claims: builtin(&registry, "", "persistentvolumeclaims"),
        });
        let events = Arc::new(PodEvents {
            kubelet: Recorder::new(store.clone(), registry.clone(), "kubelet"),
            scheduler: Recorder::new(store.clone(), registry.clone(), "default-scheduler"),
        });
        Self {
            sources,
            events,
            node,
            store,
            pods_gr: pods_info.group_resource(),
            pods_info,
            shared,
            stop,
        }
    }

    fn start(&self, pod: Arc<StoredObject>) {
        let deadline = active_deadline::limit(&pod.value);
        let Some(claim) = self.shared.claim(pod.uid(), deadline) else {
            return;
        };
        let runner = Arc::new(Runner::new(self, pod, claim));
        let (shared, store, info, stop) = (
            self.shared.clone(),
            self.store.clone(),
            self.pods_info.clone(),
            self.stop.clone(),
        );
        tokio::spawn(async move {
            let pod = runner.pod.clone();
            tokio::select! {
                () = runner.run() => {}
                // The runner kills its groups on cancel; the controllers' stop cancels it too.
                _ = stop.cancelled() => shared.stop(pod.uid()),
            }
            shared.close_logs(pod.namespace(), pod.name(), pod.uid());
            shared.finished(pod.uid());
            // Stopped because the pod was deleted (not only past its deadline, which keeps
            // it): now it goes for good.
            if runner.terminating.borrow().is_some()
                && !stop.is_cancelled()
                && is_being_deleted(&store, &info, &pod)
            {
                delete_now(&store, &info, &pod);
            }
        });
    }
}

impl Reconciler for Kubelet {
    type Key = PodKey;

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<PodKey>) {
        if event.gr != self.pods_gr {
            return;
        }
        let pod = &event.object;
        if event.event_type == EventType::Deleted {
            self.shared.stop(pod.uid());
            self.shared
                .forget_log(pod.namespace(), pod.name(), pod.uid());
            self.shared.forget_credentials(pod.uid());
            return;
        }
        queue.add((pod.namespace().to_string(), pod.name().to_string()));
    }

    fn resync(&mut self, queue: &mut Queue<PodKey>) {
        let (pods, _) = self.store.list(&self.pods_gr, None);
        let uids: std::collections::HashSet<&str> = pods.iter().map(|p| p.uid()).collect();
        let orphaned: Vec<String> = self
            .shared
            .running()
            .pods
            .keys()
            .filter(|uid| !uids.contains(uid.as_str()))
            .cloned()
            .collect();
        for uid in orphaned {
            self.shared.stop(&uid);
            self.shared.forget_credentials(&uid);
        }
        for pod in &pods {
            queue.add((pod.namespace().to_string(), pod.name().to_string()));
        }
    }

    fn reconcile(&mut self, key: PodKey, _queue: &mut Queue<PodKey>) {
        let Ok(pod) = self.store.get(&self.pods_info, &key.0, &key.1) else {
            return;
        };
        if is_deleting(&pod.value) {
            let grace = pod
                .value
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let kill_at = tokio::time::Instant::now()
                + Duration::from_secs(u64::try_from(grace).unwrap_or(0));
            if !self.shared.terminate(pod.uid(), kill_at) && grace > 0 {
                // Nothing runs for it (it never started, or has just ended): it goes now.
                delete_now(&self.store, &self.pods_info, &pod);
            }
            return;
        }
        // Its deadline may have been set or lowered since it started.
        (self.shared).set_deadline(pod.uid(), active_deadline::limit(&pod.value));
        let pending = matches!(
            pod.value.pointer("/status/phase").and_then(Value::as_str),
            None | Some("Pending")
        );
        let bound_here = crate::scheduler::node_name(&pod.value) == self.node;
        if !pending || !bound_here || self.shared.is_running(pod.uid()) {
            return;
        }
        if self.shared.mode == PodMode::Simulated(Duration::ZERO) {
            // One write per pod: straight to Succeeded, its init containers done.
            let now = now_rfc3339();
            let mut records = Records::new(init_containers::init_containers(&pod.value).len());
            records.complete_init(&now);
            let done = status::completed(now.clone(), now);
            records.update(Slot::Main, |r| r.state = done);
            write_pod_status(&self.store, &self.pods_info, &pod, |old| {
                status::pod_status(old, old.get("status"), &records, true)
            });
            return;
        }
        self.start(pod);
    }
}

/// Replaces a pod's status with `status(stored pod)`; false when the pod is gone (or replaced
/// by another of the same name).
fn write_pod_status(
    store: &Store,
    info: &ResourceInfo,
    pod: &StoredObject,
    status: impl Fn(&Value) -> Value,
) -> bool {
    let uid = pod.uid().to_string();
    let written = store.modify(
        info,
        pod.namespace(),
        pod.name(),
        Target::Status,
        |old, _| {
            if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                return Err(crate::api::error::ApiError::not_found("pods", &uid));
            }
            let mut new = old.clone();
            new["status"] = status(old);
            Ok(new)
        },
    );
    match written {
        Ok(_) => true,
        Err(error) if error.code == 404 => false,
        Err(error) => {
            tracing::warn!(%error, pod = pod.name(), "cannot write pod status");
            false
        }
    }
}

/// Whether the stored pod (this very one, not another of the same name) is being deleted.
fn is_being_deleted(store: &Store, info: &ResourceInfo, pod: &StoredObject) -> bool {
    store
        .get(info, pod.namespace(), pod.name())
        .is_ok_and(|stored| stored.uid() == pod.uid() && is_deleting(&stored.value))
}

/// Deletes a pod whose container has stopped for good (grace period 0), as the kubelet's status
/// manager does once a deleted pod's containers are gone (pkg/kubelet/status/status_manager.go,
/// `canBeDeleted` then a delete with `GracePeriodSeconds: 0` and the pod's uid as precondition).
fn delete_now(store: &Store, info: &ResourceInfo, pod: &StoredObject) {
    let options = DeleteOptions {
        propagation: None,
        precondition_uid: Some(pod.uid().to_string()),
        precondition_rv: None,
        grace_period_seconds: Some(0),
    };
    match store.delete(info, pod.namespace(), pod.name(), &options) {
        Ok(_) => {}
        Err(error) if error.code == 404 || error.code == 409 => {}
        Err(error) => tracing::warn!(%error, pod = pod.name(), "cannot delete a stopped pod"),
    }
}

/// ConfigMaps, Secrets and claims of a pod's namespace, read from the store.
struct StoreSources {
    store: Store,
    configmaps: Arc<ResourceInfo>,
    secrets: Arc<ResourceInfo>,
    claims: Arc<ResourceInfo>,
}

impl StoreSources {
    fn data(&self, info: &ResourceInfo, namespace: &str, name: &str) -> Option<Map<String, Value>> {
        let obj = self.store.get(info, namespace, name).ok()?;
        Some(
            obj.value
                .get("data")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        )
    }
}

/// [`StoreSources`] for one namespace, with where claims' storage is.
struct InNamespace<'a>(&'a StoreSources, &'a str, &'a VolumeHost);

impl crate::kubelet::pod_env::Sources for InNamespace<'_> {
    fn config_map(&self, name: &str) -> Option<Map<String, Value>> {
        self.0.data(&self.0.configmaps, self.1, name)
    }
    fn secret(&self, name: &str) -> Option<Map<String, Value>> {
        self.0.data(&self.0.secrets, self.1, name)
    }
}

/// A `data` map as bytes: its values as they are, or decoded from base64 (`decode`).
fn bytes_of(data: Option<&Value>, decode: bool) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    use base64::Engine as _;
    data.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(move |(key, value)| {
            let text = value.as_str().unwrap_or_default();
            let bytes = if decode {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap_or_else(|_| text.as_bytes().to_vec())
            } else {
                text.as_bytes().to_vec()
            };
            (key.clone(), bytes)
        })
}

impl volumes::Sources for InNamespace<'_> {
    fn config_map(&self, name: &str) -> Option<std::collections::BTreeMap<String, Vec<u8>>> {
        let map = self.0.store.get(&self.0.configmaps, self.1, name).ok()?;
        Some(
            bytes_of(map.value.get("data"), false)
                .chain(bytes_of(map.value.get("binaryData"), true))
                .collect(),
        )
    }
    fn secret(&self, name: &str) -> Option<std::collections::BTreeMap<String, Vec<u8>>> {
        let secret = self.0.store.get(&self.0.secrets, self.1, name).ok()?;
        Some(bytes_of(secret.value.get("data"), true).collect())
    }
    /// The scheduler's volume binding plugin refuses a pod whose claim is missing or being
    /// deleted (pkg/scheduler/framework/plugins/volumebinding, `PreFilter`, with the lister's
    /// `persistentvolumeclaim "x" not found`) and waits for one not bound yet.
    fn claim(&self, name: &str) -> Result<std::path::PathBuf, String> {
        let claim = crate::scheduler::bound_claim(&self.0.store, &self.0.claims, self.1, name)?;
        self.2.claim_dir(claim.uid())
    }
}

/// The value of a `fieldRef` env source: the pod's name, namespace, uid, a label or annotation,
/// its service account, node or IPs.
fn field_ref(pod: &Value, path: &str) -> String {
    let text = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let keyed = |prefix: &str, map: &str| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?.to_string();
        Some(
            pod.pointer(map)
                .and_then(Value::as_object)
                .and_then(|m: &Map<String, Value>| m.get(&key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    };
    match path {
        "metadata.name" => text("/metadata/name"),
        "metadata.namespace" => text("/metadata/namespace"),
        "metadata.uid" => text("/metadata/uid"),
        "spec.serviceAccountName" => text("/spec/serviceAccountName"),
        "spec.nodeName" => text("/spec/nodeName"),
        "status.podIP" | "status.hostIP" => "127.0.0.1".into(),
        _ => keyed("metadata.labels['", "/metadata/labels")
            .or_else(|| keyed("metadata.annotations['", "/metadata/annotations"))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars: HashMap<String, String> = [("A", "1"), ("B", "two")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let table = [
            ("plain", "plain"),
            ("$(A)", "1"),
            ("x$(A)y$(B)z", "x1ytwoz"),
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("$$(A)", "$(A)"),
            ("$$", "$"),
            ("$A", "$A"),
            ("$(A", "$(A"),
            ("cost: 5$", "cost: 5$"),
        ];
        for (input, expected) in table {
            assert_eq!(expand(input, &vars), expected, "{input}");
        }
    }

    #[test]
    fn restarts_back_off_as_the_kubelet_does() {
        let kubelet = RestartBackoff::default();
        let table = [
            (1, 0),
            (2, 10),
            (3, 20),
            (4, 40),
            (5, 80),
            (6, 160),
            (7, 300),
            (100, 300),
        ];
        for (step, seconds) in table {
            assert_eq!(kubelet.delay(step), Duration::from_secs(seconds), "{step}");
        }
        assert!(!kubelet.expired(Duration::from_secs(600)));
        assert!(kubelet.expired(Duration::from_secs(601)));
        assert_eq!(RestartBackoff::FAST.delay(2), Duration::from_millis(100));
        assert_eq!(RestartBackoff::FAST.delay(9), Duration::from_secs(1));
    }

    #[test]
    fn field_refs_read_the_pod() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u",
                         "labels": {"app": "x"}, "annotations": {"note": "y"}},
                         "spec": {"serviceAccountName": "sa"}});
        let table = [
            ("metadata.name", "p"),
            ("metadata.namespace", "ns"),
            ("metadata.uid", "u"),
            ("metadata.labels['app']", "x"),
            ("metadata.labels['missing']", ""),
            ("metadata.annotations['note']", "y"),
            ("spec.serviceAccountName", "sa"),
            ("status.podIP", "127.0.0.1"),
        ];
        for (path, expected) in table {
            assert_eq!(field_ref(&pod, path), expected, "{path}");
        }
    }

    /// Whether a process exists and is not a zombie.
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                Some(state != 'Z')
            })
            .unwrap_or(false)
    }

    fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !condition() {
            assert!(std::time::Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn sleeper_group() -> std::process::Child {
        use std::os::unix::process::CommandExt as _;
        std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .expect("sleep runs")
    }

    #[test]
    fn reaper_kills_registered_groups_when_its_pipe_closes() {
        let mut child = sleeper_group();
        let group = i32::try_from(child.id()).unwrap();
        let mut reaper = Reaper::spawn().unwrap();
        reaper.register(group);
        // As when the control plane dies: the pipe closes without any unregistering.
        drop(reaper);
        wait_until("the reaper killed the group", || {
            child.try_wait().unwrap().is_some()
        });
        assert_eq!(child.try_wait().unwrap().unwrap().signal(), Some(9));
    }

    #[test]
    fn reaper_spares_unregistered_groups() {
        let mut spared = sleeper_group();
        let mut killed = sleeper_group();
        let mut reaper = Reaper::spawn().unwrap();
        reaper.register(i32::try_from(spared.id()).unwrap());
        reaper.register(i32::try_from(killed.id()).unwrap());
        reaper.unregister(i32::try_from(spared.id()).unwrap());
        drop(reaper);
        wait_until("the registered group is killed", || {
            killed.try_wait().unwrap().is_some()
        });
        assert!(alive(spared.id()), "an unregistered group was killed");
        spared.kill().unwrap();
        spared.wait().unwrap();
    }
}
