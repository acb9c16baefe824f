//! The kubelet: runs every pod's first container as a local process and writes the pod's status
//! as the real kubelet does. Started by [`crate::controllers::spawn_controllers`]; the API server
//! reads pod logs through [`Shared`] (as [`PodLogs`]).
//!
//! A container's `command` + `args` run without a shell (unless the command is one), after
//! `$(VAR)` expansion, with the container's environment ([`crate::kubelet::pod_env`]: `envFrom`,
//! `env` from values, ConfigMaps, Secrets and the pod's fields) on top of `PATH`, `HOME` and
//! `HOSTNAME`, in a fresh scratch directory that is removed afterwards. While a ConfigMap or
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
//! [`CONFIG_RETRY`]: a claim that does not exist leaves it unscheduled (`PodScheduled` False,
//! reason `Unschedulable`, and the scheduler's `FailedScheduling` Event); a missing ConfigMap or
//! Secret leaves its container `ContainerCreating` with the kubelet's `FailedMount` Event. A
//! volume kind the devcluster cannot make, or a machine without user namespaces for a container
//! that needs a sandbox, fails the container's start saying so (reason `StartError`). A
//! container without `command` runs its image's known defaults ([`crate::kubelet::entrypoints`]) or
//! fails saying why. A command that
//! cannot be executed fails like a container that cannot start (`terminated`, reason
//! `StartError`, exit code 128, phase `Failed`). Output (stdout and stderr interleaved, the last
//! [`LOG_LIMIT`](pod_logs::LOG_LIMIT) bytes, each line with its time) is kept as the pod's log
//! ([`crate::kubelet::pod_logs`]) until the pod is deleted. `restartPolicy` `OnFailure` and
//! `Always` restart the container (after 100 ms, doubling, at most 1 s), counting `restartCount`; each run has a log of its own
//! and the run before is kept as the previous log (`kubectl logs --previous`). Other containers, init
//! containers, probes and resources are ignored.
//!
//! A deleted pod is stopped gracefully ([`crate::storage::pod_deletion`]): its main process gets
//! SIGTERM, and SIGKILL (the whole group) once `deletionGracePeriodSeconds` are over; as soon as it has
//! stopped the kubelet writes its final status and deletes the pod for good (grace period 0).
//!
//! No process outlives its pod or the control plane:
//! - each container runs in its own process group, and the whole group is killed (SIGKILL, as
//!   with a grace period of 0) when its main process exits, when the pod is deleted, and when
//!   the controllers stop or are dropped;
//! - when the control plane process dies without running any of that (SIGKILL, abort), a small
//!   `sh` "reaper" started alongside the first container kills every group still registered with
//!   it: it reads group ids from a pipe and acts when the pipe closes, which the kernel does when
//!   the control plane dies. (`PR_SET_PDEATHSIG` would need `pre_exec`, which is unsafe code,
//!   and would reach only the direct child, not what it started.) A process that leaves its
//!   group on purpose (`setsid`) escapes both, as it would escape a container's cgroup only
//!   by breaking out of the container.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{
    DeleteOptions, EventType, Store, StoredObject, Target, WatchEvent, now_rfc3339,
};
use pod_logs::{LogOptions, LogStream, PodLogs};
use runner::Runner;
use volumes::VolumeHost;

pub mod entrypoints;
pub mod pod_env;
pub mod pod_logs;
mod process;
mod runner;
pub mod termination_message;
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

/// The kubelet's restart back-off and the retry of a failed pod creation: 100 ms, doubling, at
/// most 1 s (the real kubelet's CrashLoopBackOff is 10 s doubling to 5 minutes).
pub fn retry_delay(failures: usize) -> Duration {
    const BASE: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(1);
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = u32::try_from(failures - 1).unwrap_or(u32::MAX).min(10);
    (BASE * 2u32.pow(doublings)).min(MAX)
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

/// A pod's logs: its container's current run, and the run before when it was restarted (what
/// `previous=true` reads, as the kubelet keeps the last terminated container's log).
struct PodLog {
    uid: String,
    current: Log,
    previous: Option<Log>,
}

/// A container the kubelet is running (or about to).
struct Running {
    cancel: CancellationToken,
    /// Set when the pod is deleted: SIGTERM now, SIGKILL at that time.
    terminate: tokio::sync::watch::Sender<KillAt>,
    /// The process group, once the process exists.
    group: Option<i32>,
}

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
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, RunningSet> {
        self.running.lock().expect("kubelet lock poisoned")
    }

    pub fn pod_logs(&self, namespace: &str, pod: &str) -> Option<String> {
        Some(self.log(namespace, pod)?.text())
    }

    fn log(&self, namespace: &str, pod: &str) -> Option<Log> {
        self.log_of(namespace, pod, false)
    }

    /// The pod's current log, or with `previous` its container's run before.
    fn log_of(&self, namespace: &str, pod: &str, previous: bool) -> Option<Log> {
        let logs = self.logs.lock().expect("kubelet lock poisoned");
        let log = logs.get(&(namespace.to_string(), pod.to_string()))?;
        if previous {
            log.previous.clone()
        } else {
            Some(log.current.clone())
        }
    }

    pub fn set_entrypoints(&self, entrypoints: HashMap<String, Vec<String>>) {
        *self.entrypoints.lock().expect("kubelet lock poisoned") = entrypoints;
    }

    pub fn running_pids(&self) -> Vec<u32> {
        self.running()
            .pods
            .values()
            .filter_map(|r| r.group.and_then(|g| u32::try_from(g).ok()))
            .collect()
    }

    /// A fresh log for a pod (replacing any of an older pod of the same name).
    fn new_log(&self, namespace: &str, pod: &str, uid: &str) -> Log {
        let log = Log::default();
        self.logs.lock().expect("kubelet lock poisoned").insert(
            (namespace.to_string(), pod.to_string()),
            PodLog {
                uid: uid.to_string(),
                current: log.clone(),
                previous: None,
            },
        );
        log
    }

    /// A fresh log for a restarted container; the one before becomes the previous log.
    fn restart_log(&self, namespace: &str, pod: &str, uid: &str) -> Log {
        let log = Log::default();
        let mut logs = self.logs.lock().expect("kubelet lock poisoned");
        if let Some(entry) = logs.get_mut(&(namespace.to_string(), pod.to_string()))
            && entry.uid == uid
        {
            entry.previous = Some(std::mem::replace(&mut entry.current, log.clone()));
        }
        log
    }

    fn forget_log(&self, namespace: &str, pod: &str, uid: &str) {
        let mut logs = self.logs.lock().expect("kubelet lock poisoned");
        let key = (namespace.to_string(), pod.to_string());
        if logs.get(&key).is_some_and(|log| log.uid == uid)
            && let Some(log) = logs.remove(&key)
        {
            // Followers of a deleted pod's log stop.
            log.current.close();
        }
    }

    /// Claims a pod for running; `None` when it runs already or the kubelet stopped.
    fn claim(
        &self,
        uid: &str,
    ) -> Option<(CancellationToken, tokio::sync::watch::Receiver<KillAt>)> {
        let mut running = self.running();
        if running.closed || running.pods.contains_key(uid) {
            return None;
        }
        let cancel = CancellationToken::new();
        let (terminate, terminating) = tokio::sync::watch::channel(None);
        running.pods.insert(
            uid.to_string(),
            Running {
                cancel: cancel.clone(),
                terminate,
                group: None,
            },
        );
        Some((cancel, terminating))
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
                entry.group = Some(group);
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
            entry.group = None;
        }
        self.with_reaper(|reaper| reaper.unregister(group));
    }

    /// Stops a pod's container (if running); its runner writes what follows.
    fn stop(&self, uid: &str) {
        let running = self.running();
        if let Some(entry) = running.pods.get(uid) {
            entry.cancel.cancel();
            if let Some(group) = entry.group {
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
            if let Some(group) = entry.group {
                kill_group(group);
            }
        }
        drop(running);
        for log in self.logs.lock().expect("kubelet lock poisoned").values() {
            log.current.close();
        }
        // Closing the reaper's pipe lets it exit (killing again whatever is still registered).
        let reaper = self.reaper.lock().expect("kubelet lock poisoned").take();
        drop(reaper);
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
    fn pod_log(&self, namespace: &str, pod: &str, options: &LogOptions) -> Option<LogStream> {
        Some(self.log_of(namespace, pod, options.previous)?.read(options))
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

/// The kubelet's reconciler: starts a runner for every pending pod, stops it when the pod goes.
pub(crate) struct Kubelet {
    store: Store,
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
            store,
            pods_gr: pods_info.group_resource(),
            pods_info,
            shared,
            stop,
        }
    }

    fn start(&self, pod: Arc<StoredObject>) {
        let Some((cancel, terminating)) = self.shared.claim(pod.uid()) else {
            return;
        };
        let runner = Runner {
            store: self.store.clone(),
            info: self.pods_info.clone(),
            sources: self.sources.clone(),
            shared: self.shared.clone(),
            events: self.events.clone(),
            pod,
            cancel: cancel.clone(),
            terminating,
        };
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let uid = runner.pod.uid().to_string();
            let shared = runner.shared.clone();
            tokio::select! {
                _ = runner.run() => {}
                // The runner kills its group on cancel; the controllers' stop cancels it too.
                _ = stop.cancelled() => shared.stop(&uid),
            }
            if let Some(log) = shared.log(runner.pod.namespace(), runner.pod.name()) {
                log.close();
            }
            shared.finished(&uid);
            if runner.terminating.borrow().is_some() && !stop.is_cancelled() {
                // Stopped because the pod was deleted: now it goes for good.
                delete_now(&runner.store, &runner.info, &runner.pod);
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
        let pending = matches!(
            pod.value.pointer("/status/phase").and_then(Value::as_str),
            None | Some("Pending")
        );
        if !pending || self.shared.is_running(pod.uid()) {
            return;
        }
        if self.shared.mode == PodMode::Simulated(Duration::ZERO) {
            // One write per pod: straight to Succeeded.
            let now = now_rfc3339();
            let state = State::Terminated {
                exit_code: 0,
                reason: "Completed".into(),
                message: None,
                started_at: now.clone(),
                finished_at: now,
            };
            write_status(&self.store, &self.pods_info, &pod, &state, None, 0);
            return;
        }
        self.start(pod);
    }
}

/// A container's state, as `containerStatuses[0].state` says it.
#[derive(Debug, Clone, PartialEq)]
enum State {
    Waiting {
        reason: String,
        message: String,
    },
    Running {
        started_at: String,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        message: Option<String>,
        started_at: String,
        finished_at: String,
    },
}

impl State {
    fn to_json(&self, container_id: &str) -> Value {
        match self {
            State::Waiting { reason, message } if message.is_empty() => {
                json!({"waiting": {"reason": reason}})
            }
            State::Waiting { reason, message } => {
                json!({"waiting": {"reason": reason, "message": message}})
            }
            State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
            State::Terminated {
                exit_code,
                reason,
                message,
                started_at,
                finished_at,
            } => {
                let mut terminated = json!({
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": started_at,
                    "finishedAt": finished_at,
                });
                if let Some(message) = message {
                    terminated["message"] = json!(message);
                }
                if !container_id.is_empty() {
                    terminated["containerID"] = json!(container_id);
                }
                json!({"terminated": terminated})
            }
        }
    }
}

/// The pod status the real kubelet writes for a single-container pod whose container is in
/// `state`: phase, conditions, `containerStatuses[0]`; `startTime` is kept once set.
fn pod_status(
    pod: &Value,
    old_status: Option<&Value>,
    state: &State,
    last_state: Option<&State>,
    restarts: u32,
    container_id: &str,
) -> Value {
    let now = now_rfc3339();
    let container = pod.pointer("/spec/containers/0");
    let name = container
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("main");
    let image = container
        .and_then(|c| c.get("image"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let phase = match state {
        State::Terminated { exit_code: 0, .. } => "Succeeded",
        State::Terminated { .. } => "Failed",
        // Waiting before the container ever ran (CreateContainerConfigError) is still Pending.
        State::Waiting { .. } if restarts == 0 && last_state.is_none() => "Pending",
        State::Running { .. } | State::Waiting { .. } => "Running",
    };
    let running = matches!(state, State::Running { .. });
    let cond = |type_: &str, status: bool, reason: Option<&str>, message: Option<String>| {
        let mut c = json!({
            "type": type_,
            "status": if status { "True" } else { "False" },
            "lastProbeTime": null,
            "lastTransitionTime": now,
        });
        if let Some(reason) = reason {
            c["reason"] = json!(reason);
        }
        if let Some(message) = message {
            c["message"] = json!(message);
        }
        c
    };
    let finished = matches!(state, State::Terminated { .. });
    let (ready_reason, ready_message) = if finished {
        (Some("PodCompleted"), None)
    } else if running {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: [{name}]")),
        )
    };
    let conditions = json!([
        cond("PodReadyToStartContainers", !finished, None, None),
        cond(
            "Initialized",
            true,
            finished.then_some("PodCompleted"),
            None
        ),
        cond("Ready", running, ready_reason, ready_message.clone()),
        cond("ContainersReady", running, ready_reason, ready_message),
        cond("PodScheduled", true, None, None),
    ]);
    let start_time = old_status
        .and_then(|s| s.get("startTime"))
        .cloned()
        .unwrap_or_else(|| json!(now));
    let mut container_status = json!({
        "name": name,
        "image": image,
        "imageID": "",
        "ready": running,
        "started": running,
        "restartCount": restarts,
        "state": state.to_json(container_id),
        "lastState": last_state.map_or(json!({}), |s| s.to_json(container_id)),
    });
    if !container_id.is_empty() {
        container_status["containerID"] = json!(container_id);
    }
    json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": start_time,
        "qosClass": "BestEffort",
        "containerStatuses": [container_status],
    })
}

/// Writes a pod's status; false when the pod is gone (or replaced by another of the same name).
fn write_status(
    store: &Store,
    info: &ResourceInfo,
    pod: &StoredObject,
    state: &State,
    last_state: Option<&State>,
    restarts: u32,
) -> bool {
    let container_id = match state {
        State::Running { .. } | State::Terminated { .. } => format!("devcluster://{}", pod.uid()),
        State::Waiting { .. } => String::new(),
    };
    write_pod_status(store, info, pod, |old| {
        pod_status(
            old,
            old.get("status"),
            state,
            last_state,
            restarts,
            &container_id,
        )
    })
}

/// The status of a pod the scheduler cannot place: `PodScheduled` False, reason
/// `Unschedulable`, with the scheduler's message, and nothing else.
fn unscheduled_status(message: &str) -> Value {
    json!({
        "phase": "Pending",
        "conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": now_rfc3339(),
        }],
        "qosClass": "BestEffort",
    })
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
        let Ok(claim) = self.0.store.get(&self.0.claims, self.1, name) else {
            return Err(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if is_deleting(&claim.value) {
            return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
        }
        if claim.value.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        }
        self.2.claim_dir(claim.uid())
    }
}

/// The state of a container that could not start: `terminated`, reason `StartError`, exit code
/// 128, as a container runtime reports a failed start.
fn cannot_start(message: String) -> State {
    State::Terminated {
        exit_code: 128,
        reason: "StartError".into(),
        message: Some(message),
        started_at: "1970-01-01T00:00:00Z".into(),
        finished_at: now_rfc3339(),
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

/// How a container that started at `started_at` ended, from its process's `exit`: its exit
/// code (128 + the signal that killed it), or the error of waiting for it.
fn terminated(exit: std::io::Result<std::process::ExitStatus>, started_at: String) -> State {
    let finished_at = now_rfc3339();
    match exit {
        Ok(status) => {
            let exit_code = status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(1);
            State::Terminated {
                exit_code,
                reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
                message: None,
                started_at,
                finished_at,
            }
        }
        Err(error) => State::Terminated {
            exit_code: 128,
            reason: "Error".into(),
            message: Some(error.to_string()),
            started_at,
            finished_at,
        },
    }
}

#[cfg(test)]
mod tests {

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
    fn retry_delay_doubles_up_to_a_second() {
        let table = [
            (0, 0),
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (100, 1000),
        ];
        for (failures, millis) in table {
            assert_eq!(
                retry_delay(failures),
                Duration::from_millis(millis),
                "{failures}"
            );
        }
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

    #[test]
    fn status_of_each_container_state() {
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let running = State::Running {
            started_at: "t0".into(),
        };
        let status = pod_status(&pod, None, &running, None, 0, "devcluster://u");
        assert_eq!(status["phase"], "Running");
        assert_eq!(
            status["containerStatuses"][0]["state"]["running"]["startedAt"],
            "t0"
        );
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        let ready = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");

        let old = json!({"startTime": "t-start"});
        for (exit_code, reason, phase) in [(0, "Completed", "Succeeded"), (3, "Error", "Failed")] {
            let done = State::Terminated {
                exit_code,
                reason: reason.into(),
                message: None,
                started_at: "t0".into(),
                finished_at: "t1".into(),
            };
            let status = pod_status(&pod, Some(&old), &done, None, 0, "devcluster://u");
            assert_eq!(status["phase"], phase);
            assert_eq!(status["startTime"], "t-start");
            let terminated = &status["containerStatuses"][0]["state"]["terminated"];
            assert_eq!(terminated["exitCode"], exit_code);
            assert_eq!(terminated["reason"], reason);
            assert_eq!(terminated["finishedAt"], "t1");
            let ready = status["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "Ready")
                .unwrap();
            assert_eq!(ready["status"], "False");
            assert_eq!(ready["reason"], "PodCompleted");
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
