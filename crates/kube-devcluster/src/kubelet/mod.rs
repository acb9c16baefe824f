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
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{
    DeleteOptions, EventType, Store, StoredObject, Target, WatchEvent, now_rfc3339,
};
use pod_logs::{LogOptions, LogStream, PodLogs};
use termination_message::{MessageFile, OutputTail};
use volumes::{Blocked, PodVolumes, Sandbox, VolumeHost};

pub mod entrypoints;
pub mod pod_env;
pub mod pod_logs;
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
struct Runner {
    store: Store,
    info: Arc<ResourceInfo>,
    sources: Arc<StoreSources>,
    shared: Arc<Shared>,
    events: Arc<PodEvents>,
    pod: Arc<StoredObject>,
    cancel: CancellationToken,
    /// When to kill the container, once the pod is deleted.
    terminating: tokio::sync::watch::Receiver<KillAt>,
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
    async fn run(&self) {
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

/// The executable `name` stands for on `path` (the container's `PATH`, else the usual
/// default), as exec would find it, with `locate` giving where a container path is on the
/// host; a name with a `/` is taken as it is.
fn resolve_program(
    name: &str,
    path: Option<&str>,
    locate: impl Fn(&str) -> std::path::PathBuf,
) -> Option<std::path::PathBuf> {
    if name.contains('/') {
        return Some(name.into());
    }
    let path = path.unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| format!("{}/{name}", dir.trim_end_matches('/')))
        .find(|candidate| is_executable(&locate(candidate)))
        .map(std::path::PathBuf::from)
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command that runs `argv` (with the container's `PATH`, `path`): the program itself, or
/// started inside the pod's `sandbox`, in the `scratch` directory.
///
/// # Errors
/// In a sandbox, a program the container would not find, as exec says it.
fn command_for(
    argv: &[String],
    path: Option<&str>,
    sandbox: Option<&Sandbox>,
    scratch: &std::path::Path,
) -> Result<tokio::process::Command, String> {
    let Some(sandbox) = sandbox else {
        // An absolute program path lets the standard library use posix_spawn: with a bare
        // name and a PATH of the container's own, it falls back to fork, whose cost grows with
        // this process's memory (a 1 GB test process spent 30% of a 2,000-step run copying
        // page tables). Not found: spawn the bare name and report what exec says.
        let program = resolve_program(&argv[0], path, |p| p.into())
            .unwrap_or_else(|| std::path::PathBuf::from(&argv[0]));
        let mut command = tokio::process::Command::new(program);
        command.args(&argv[1..]);
        return Ok(command);
    };
    // The program is looked for where the container sees it (a volume's file at its mount
    // path): exec in the namespace would say "not found" only later, as the container's own
    // failure.
    let program = &argv[0];
    let found = if program.starts_with('/') {
        is_executable(&sandbox.host_path(program))
    } else {
        resolve_program(program, path, |p| sandbox.host_path(p)).is_some()
    };
    if !found {
        return Err(format!(
            "failed to start container process: exec: {:?}: executable file not found in $PATH",
            argv[0]
        ));
    }
    let (program, args) = sandbox.command(argv, scratch);
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    Ok(command)
}

/// Why `program` did not start, as the container runtime says it.
fn spawn_error(program: &str, error: &std::io::Error) -> String {
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "executable file not found in $PATH".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => error.to_string(),
    };
    format!("failed to start container process: exec: {program:?}: {why}")
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

    #[test]
    fn programs_resolve_on_the_path_as_exec_finds_them() {
        let host = |p: &str| std::path::PathBuf::from(p);
        let sh = resolve_program("sh", None, host).expect("sh is on the default PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{sh:?}");
        assert_eq!(resolve_program("./x", None, host), Some("./x".into()));
        assert_eq!(
            resolve_program("/bin/true", Some(""), host),
            Some("/bin/true".into())
        );
        assert_eq!(resolve_program("sh", Some("/nonexistent"), host), None);
        assert_eq!(resolve_program("no-such-program-here", None, host), None);
        // In a sandbox, where the container sees it: `/scripts/true` is the host's /bin/true.
        let sandboxed = |p: &str| match p.strip_prefix("/scripts/") {
            Some(rest) => std::path::Path::new("/bin").join(rest),
            None => p.into(),
        };
        assert_eq!(
            resolve_program("true", Some("/scripts"), sandboxed),
            Some("/scripts/true".into())
        );
        assert_eq!(
            resolve_program("no-such", Some("/scripts"), sandboxed),
            None
        );
    }

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
