//! A pod's status as the kubelet writes it, from what it knows of each container it runs (a
//! [`Record`] per init container and for the main container): the containers' statuses, the
//! phase and the kubelet's conditions. Pure; the runner in [`crate::kubelet`] writes the result.
//!
//! The rules are the kubelet's (k8s.io/kubernetes):
//! - every container has a status, a container not started yet waiting `PodInitializing` when
//!   the pod has init containers and `ContainerCreating` otherwise
//!   (pkg/kubelet/kubelet_pods.go, `convertToAPIContainerStatuses`);
//! - `started` is whether it runs (no startup probes here); `ready` is whether it runs (and its
//!   readiness probe, if it has one, says ready: `kubelet::prober`) for the main
//!   container and a sidecar, and whether it succeeded for an init container
//!   (pkg/kubelet/prober/prober_manager.go, `UpdatePodStatus`);
//! - the phase ([`phase`], pkg/kubelet/kubelet_pods.go `getPhase`);
//! - the conditions (pkg/kubelet/status/generate.go): `Initialized` once every init container
//!   has succeeded and every sidecar started (or a regular container started), else False with
//!   reason `ContainersNotInitialized`; `ContainersReady` and `Ready` when the main container
//!   and every sidecar are ready, with reason `PodCompleted` or `PodFailed` once the pod has
//!   ended; the conditions others own (`DisruptionTarget`, which an eviction adds) are kept
//!   ([`others_conditions`]).
//!
//! Only the first of a pod's `containers` runs here, so the others have no status and do not
//! count (a real kubelet would report them).

use std::os::unix::process::ExitStatusExt as _;

use serde_json::{Value, json};

use crate::kubelet::init_containers::{Kind, Slot};
use crate::storage::store::now_rfc3339;

/// A container's state, as `containerStatuses[i].state` says it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
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
    fn waiting(reason: &str) -> Self {
        State::Waiting {
            reason: reason.into(),
            message: String::new(),
        }
    }

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

    fn is_running(&self) -> bool {
        matches!(self, State::Running { .. })
    }

    /// The exit code, once terminated.
    fn exit_code(&self) -> Option<i32> {
        match self {
            State::Terminated { exit_code, .. } => Some(*exit_code),
            _ => None,
        }
    }
}

/// The state of a container that exited with code 0.
pub(crate) fn completed(started_at: String, finished_at: String) -> State {
    State::Terminated {
        exit_code: 0,
        reason: "Completed".into(),
        message: None,
        started_at,
        finished_at,
    }
}

/// The state of a container that could not start: `terminated`, reason `StartError`, exit code
/// 128, as a container runtime reports a failed start.
pub(crate) fn cannot_start(message: String) -> State {
    State::Terminated {
        exit_code: 128,
        reason: "StartError".into(),
        message: Some(message),
        started_at: "1970-01-01T00:00:00Z".into(),
        finished_at: now_rfc3339(),
    }
}

/// How a container that started at `started_at` ended, from its process's `exit`: its exit
/// code (128 + the signal that killed it), or the error of waiting for it.
pub(crate) fn terminated(
    exit: std::io::Result<std::process::ExitStatus>,
    started_at: String,
) -> State {
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

/// What the kubelet knows of one container: its state, the state it ended in before its last
/// restart, and how often it was restarted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub state: State,
    pub last_state: Option<State>,
    pub restarts: u32,
    /// Its readiness as its readiness probe last decided (`kubelet::prober`); `None`
    /// for a container without one, ready once it runs.
    pub probed: Option<bool>,
}

impl Record {
    pub fn new(state: State) -> Self {
        Self {
            state,
            last_state: None,
            restarts: 0,
            probed: None,
        }
    }

    /// It ended before its last restart with a failure (an exit code other than 0).
    fn failed_before(&self) -> bool {
        self.last_state
            .as_ref()
            .and_then(State::exit_code)
            .is_some_and(|code| code != 0)
    }

    /// Restarted at least once: it has terminated before.
    fn ran_before(&self) -> bool {
        self.last_state.is_some()
    }
}

/// The records of a pod's containers: one per init container, in order, then the main
/// container's; `None` until the kubelet has something to say of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Records {
    init: Vec<Option<Record>>,
    main: Option<Record>,
}

impl Records {
    pub fn new(init_containers: usize) -> Self {
        Self {
            init: vec![None; init_containers],
            main: None,
        }
    }

    pub fn get(&self, slot: Slot) -> Option<&Record> {
        match slot {
            Slot::Init(i) => self.init.get(i)?.as_ref(),
            Slot::Main => self.main.as_ref(),
        }
    }

    /// Changes a container's record (a fresh one, never restarted, when it has none).
    pub fn update(&mut self, slot: Slot, change: impl FnOnce(&mut Record)) {
        let entry = match slot {
            Slot::Init(i) => match self.init.get_mut(i) {
                Some(entry) => entry,
                None => return,
            },
            Slot::Main => &mut self.main,
        };
        change(entry.get_or_insert_with(|| Record::new(State::waiting(""))));
    }

    /// Every init container completed at `at` (a simulated pod's).
    pub fn complete_init(&mut self, at: &str) {
        for entry in &mut self.init {
            *entry = Some(Record::new(completed(at.to_string(), at.to_string())));
        }
    }
}

/// One container as its status is written.
struct Entry<'a> {
    name: &'a str,
    image: &'a str,
    kind: Kind,
    record: &'a Record,
}

impl Entry<'_> {
    fn ready(&self) -> bool {
        match self.kind {
            Kind::Init => self.record.state.exit_code() == Some(0),
            Kind::Sidecar | Kind::Main => {
                self.record.state.is_running() && self.record.probed != Some(false)
            }
        }
    }

    /// An init container is done with: it succeeded, or it is a sidecar that started.
    fn initialized(&self) -> bool {
        match self.kind {
            Kind::Sidecar => self.record.state.is_running(),
            _ => self.ready(),
        }
    }

    fn to_json(&self, uid: &str) -> Value {
        let state = &self.record.state;
        let container_id = match state {
            State::Running { .. } | State::Terminated { .. } => {
                format!("devcluster://{uid}/{}", self.name)
            }
            State::Waiting { .. } => String::new(),
        };
        let mut status = json!({
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready(),
            "started": state.is_running(),
            "restartCount": self.record.restarts,
            "state": state.to_json(&container_id),
            "lastState": self.record.last_state.as_ref().map_or(json!({}), |s| s.to_json(&container_id)),
        });
        if !container_id.is_empty() {
            status["containerID"] = json!(container_id);
        }
        status
    }
}

/// The pod's containers the kubelet runs, each with its record or the default one.
fn entries<'a>(pod: &'a Value, records: &'a Records, default: &'a Record) -> Vec<Entry<'a>> {
    let text = |c: Option<&'a Value>, field: &str| -> &'a str {
        c.and_then(|c| c.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let init = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let record = |slot| records.get(slot).unwrap_or(default);
    let mut entries: Vec<Entry<'a>> = init
        .iter()
        .enumerate()
        .map(|(i, c)| Entry {
            name: text(Some(c), "name"),
            image: text(Some(c), "image"),
            kind: Kind::of_init(c),
            record: record(Slot::Init(i)),
        })
        .collect();
    let main = pod.pointer("/spec/containers/0");
    entries.push(Entry {
        name: text(main, "name"),
        image: text(main, "image"),
        kind: Kind::Main,
        record: record(Slot::Main),
    });
    entries
}

/// The pod's phase (`getPhase`): `Failed` when an init container failed under
/// `restartPolicy: Never`; `Pending` while initialization is pending (and no regular container
/// has started) or a container waits to start for the first time; `Running` while a container
/// runs; once all have stopped, `Succeeded` when every regular one succeeded (sidecars do not
/// count), else `Failed` under `Never` and `Running` (restarting) otherwise. `terminal`: the
/// kubelet runs nothing more for the pod, so a stopped pod is `Succeeded` or `Failed` whatever
/// its policy.
fn phase(entries: &[Entry<'_>], policy: &str, terminal: bool) -> &'static str {
    let (mut pending_init, mut failed_init) = (0, 0);
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for entry in entries {
        let record = &entry.record;
        match (entry.kind, &record.state) {
            (Kind::Init, State::Running { .. }) => pending_init += 1,
            (Kind::Init, State::Terminated { exit_code, .. }) => {
                failed_init += usize::from(*exit_code != 0);
            }
            (Kind::Init, State::Waiting { .. }) if record.ran_before() => {
                failed_init += usize::from(record.failed_before());
            }
            (Kind::Init, State::Waiting { .. }) => pending_init += 1,
            // A sidecar's exits do not count: only whether it runs or waits to start.
            (Kind::Sidecar, State::Running { .. }) => running += 1,
            (Kind::Sidecar, State::Waiting { .. }) if !record.ran_before() => {
                pending_init += 1;
                waiting += 1;
            }
            (Kind::Sidecar, _) => {}
            (Kind::Main, State::Running { .. }) => running += 1,
            (Kind::Main, State::Terminated { exit_code, .. }) => {
                stopped += 1;
                succeeded += usize::from(*exit_code == 0);
            }
            (Kind::Main, State::Waiting { .. }) if record.ran_before() => stopped += 1,
            (Kind::Main, State::Waiting { .. }) => waiting += 1,
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    let regular_started = entries
        .iter()
        .any(|e| e.kind == Kind::Main && !matches!(e.record.state, State::Waiting { .. }));
    if (pending_init > 0 && !regular_started) || waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped == 0 {
        return "Pending";
    }
    if terminal {
        return if stopped == succeeded {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    match policy {
        // Every container is being restarted.
        "Always" => "Running",
        _ if stopped == succeeded => "Succeeded",
        "Never" => "Failed",
        // OnFailure: the failed ones are being restarted.
        _ => "Running",
    }
}

/// Go's `%s` of a `[]string`: `[a b]`.
fn go_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    format!("[{}]", names.collect::<Vec<_>>().join(" "))
}

/// `Initialized` (`GeneratePodInitializedCondition`): status, reason, message.
fn initialized(entries: &[Entry<'_>], phase: &str) -> (bool, Option<&'static str>, Option<String>) {
    if phase == "Succeeded" {
        return (true, Some("PodCompleted"), None);
    }
    let started = entries
        .iter()
        .any(|e| e.kind == Kind::Main && !matches!(e.record.state, State::Waiting { .. }));
    let incomplete: Vec<&str> = entries
        .iter()
        .filter(|e| e.kind != Kind::Main && !e.initialized())
        .map(|e| e.name)
        .collect();
    if started || incomplete.is_empty() {
        return (true, None, None);
    }
    let message = format!(
        "containers with incomplete status: {}",
        go_list(incomplete.into_iter())
    );
    (false, Some("ContainersNotInitialized"), Some(message))
}

/// `ContainersReady`, and `Ready` with it (`GenerateContainersReadyCondition`): the main
/// container and the sidecars.
fn containers_ready(
    entries: &[Entry<'_>],
    phase: &str,
) -> (bool, Option<&'static str>, Option<String>) {
    match phase {
        "Succeeded" => return (false, Some("PodCompleted"), None),
        "Failed" => return (false, Some("PodFailed"), None),
        _ => {}
    }
    let unready: Vec<&str> = entries
        .iter()
        .filter(|e| e.kind != Kind::Init && !e.ready())
        .map(|e| e.name)
        .collect();
    if unready.is_empty() {
        return (true, None, None);
    }
    let message = format!(
        "containers with unready status: {}",
        go_list(unready.into_iter())
    );
    (false, Some("ContainersNotReady"), Some(message))
}

fn condition(
    type_: &str,
    (status, reason, message): (bool, Option<&str>, Option<String>),
    now: &str,
) -> Value {
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
}

/// The status the kubelet writes for `pod` (the stored pod; `old_status` its status now, whose
/// `startTime` is kept once set) whose containers are as `records` say. `terminal`: the kubelet
/// runs nothing more for the pod; if the rules would still have it pending or running (a
/// container the devcluster can never start, under a policy that restarts it) it is `Failed`.
pub(crate) fn pod_status(
    pod: &Value,
    old_status: Option<&Value>,
    records: &Records,
    terminal: bool,
) -> Value {
    let now = now_rfc3339();
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let policy = pod
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    // A container not started yet waits: behind init containers, for them.
    let has_init = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .is_some_and(|init| !init.is_empty());
    let reason = if has_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let default = Record::new(State::waiting(reason));
    let entries = entries(pod, records, &default);
    let phase = match phase(&entries, policy, terminal) {
        "Pending" | "Running" if terminal => "Failed",
        phase => phase,
    };
    let ready = containers_ready(&entries, phase);
    let mut conditions = vec![
        condition("PodReadyToStartContainers", (!terminal, None, None), &now),
        condition("Initialized", initialized(&entries, phase), &now),
        condition("Ready", ready.clone(), &now),
        condition("ContainersReady", ready, &now),
        condition("PodScheduled", (true, None, None), &now),
    ];
    conditions.extend(others_conditions(old_status));
    let start_time = old_status
        .and_then(|s| s.get("startTime"))
        .cloned()
        .unwrap_or_else(|| json!(now));
    let (main, init) = entries.split_last().expect("the main container's entry");
    let mut status = json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": start_time,
        "qosClass": "BestEffort",
        "containerStatuses": [main.to_json(uid)],
    });
    if !init.is_empty() {
        status["initContainerStatuses"] = init.iter().map(|e| e.to_json(uid)).collect();
    }
    status
}

/// The conditions the kubelet does not own (pkg/kubelet/types/pod_status.go,
/// `PodConditionByKubelet`), kept from `old_status` as the status manager's `mergePodStatus`
/// keeps them (pkg/kubelet/status/status_manager.go): an eviction's `DisruptionTarget` stays on
/// the pod it stopped.
fn others_conditions(old_status: Option<&Value>) -> Vec<Value> {
    const BY_KUBELET: [&str; 5] = [
        "PodScheduled",
        "Ready",
        "Initialized",
        "ContainersReady",
        "PodReadyToStartContainers",
    ];
    old_status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            let type_ = c.get("type").and_then(Value::as_str).unwrap_or_default();
            !BY_KUBELET.contains(&type_)
        })
        .cloned()
        .collect()
}

/// The status of a pod the scheduler cannot place: `PodScheduled` False, reason
/// `Unschedulable`, with the scheduler's message, and nothing else.
pub(crate) fn unscheduled_status(message: &str) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> State {
        State::Running {
            started_at: "t0".into(),
        }
    }

    fn exited(exit_code: i32) -> State {
        State::Terminated {
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at: "t0".into(),
            finished_at: "t1".into(),
        }
    }

    fn restarting(after: i32) -> Record {
        Record {
            state: State::waiting("CrashLoopBackOff"),
            last_state: Some(exited(after)),
            restarts: 1,
            probed: None,
        }
    }

    fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .unwrap()
    }

    /// A pod with init containers `i` (regular) and `s` (a sidecar) before `main`.
    fn pod_with_init(policy: &str) -> Value {
        json!({"metadata": {"uid": "u"},
               "spec": {"restartPolicy": policy,
                        "initContainers": [{"name": "i", "image": "busybox"},
                                           {"name": "s", "image": "busybox", "restartPolicy": "Always"}],
                        "containers": [{"name": "main", "image": "busybox"}]}})
    }

    fn records(init: [Option<Record>; 2], main: Option<Record>) -> Records {
        let mut records = Records::new(2);
        for (i, record) in init.into_iter().enumerate() {
            if let Some(record) = record {
                records.update(Slot::Init(i), |r| *r = record);
            }
        }
        if let Some(main) = main {
            records.update(Slot::Main, |r| *r = main);
        }
        records
    }

    #[test]
    fn the_phase_follows_the_kubelets_rules() {
        let ok = || Some(Record::new(exited(0)));
        let run = || Some(Record::new(running()));
        // (policy, init, sidecar, main, terminal, phase)
        let table = [
            ("Never", None, None, None, false, "Pending"),
            ("Never", run(), None, None, false, "Pending"),
            (
                "Never",
                Some(Record::new(exited(3))),
                None,
                None,
                false,
                "Failed",
            ),
            (
                "OnFailure",
                Some(restarting(3)),
                None,
                None,
                false,
                "Pending",
            ),
            ("Never", ok(), run(), None, false, "Pending"),
            ("Never", ok(), run(), run(), false, "Running"),
            // The main container is done, its sidecar still stopping.
            (
                "Never",
                ok(),
                run(),
                Some(Record::new(exited(0))),
                false,
                "Running",
            ),
            // A sidecar's exit does not count, whatever its code.
            (
                "Never",
                ok(),
                Some(Record::new(exited(143))),
                Some(Record::new(exited(0))),
                true,
                "Succeeded",
            ),
            (
                "Never",
                ok(),
                Some(Record::new(exited(143))),
                Some(Record::new(exited(1))),
                true,
                "Failed",
            ),
            (
                "OnFailure",
                ok(),
                run(),
                Some(restarting(1)),
                false,
                "Running",
            ),
            (
                "Always",
                ok(),
                run(),
                Some(Record::new(exited(0))),
                false,
                "Running",
            ),
            // The devcluster gives up (a container it can never start): Failed.
            (
                "OnFailure",
                Some(Record::new(cannot_start("no".into()))),
                None,
                None,
                true,
                "Failed",
            ),
        ];
        for (policy, init, sidecar, main, terminal, phase) in table {
            let records = records([init, sidecar], main);
            let status = pod_status(&pod_with_init(policy), None, &records, terminal);
            assert_eq!(
                status["phase"], phase,
                "{policy} {records:?} terminal={terminal}"
            );
        }
    }

    #[test]
    fn initialized_waits_for_init_containers_to_succeed_and_sidecars_to_start() {
        let status = pod_status(&pod_with_init("Never"), None, &Records::new(2), false);
        let initialized = condition(&status, "Initialized");
        assert_eq!(initialized["status"], "False");
        assert_eq!(initialized["reason"], "ContainersNotInitialized");
        assert_eq!(
            initialized["message"],
            "containers with incomplete status: [i s]"
        );
        // Not started yet: waiting PodInitializing, the main container too.
        for status in [
            &status["initContainerStatuses"][0],
            &status["containerStatuses"][0],
        ] {
            assert_eq!(status["state"]["waiting"]["reason"], "PodInitializing");
            assert_eq!(status["ready"], false);
            assert_eq!(status["started"], false);
        }

        let done = records(
            [Some(Record::new(exited(0))), Some(Record::new(running()))],
            None,
        );
        let status = pod_status(&pod_with_init("Never"), None, &done, false);
        assert_eq!(condition(&status, "Initialized")["status"], "True");
        let init = &status["initContainerStatuses"];
        assert_eq!(
            (&init[0]["ready"], &init[0]["started"]),
            (&json!(true), &json!(false))
        );
        assert_eq!(
            (&init[1]["ready"], &init[1]["started"]),
            (&json!(true), &json!(true))
        );
        assert_eq!(init[1]["containerID"], "devcluster://u/s");
        // The sidecar counts for readiness; the main container waits.
        let ready = condition(&status, "ContainersReady");
        assert_eq!(ready["message"], "containers with unready status: [main]");
    }

    #[test]
    fn a_simulated_pod_has_its_init_containers_completed() {
        let mut records = Records::new(2);
        records.complete_init("t0");
        records.update(Slot::Main, |r| {
            r.state = completed("t0".into(), "t1".into());
        });
        let status = pod_status(&pod_with_init("Never"), None, &records, true);
        assert_eq!(status["phase"], "Succeeded");
        for init in status["initContainerStatuses"].as_array().unwrap() {
            assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{init}");
        }
        assert_eq!(condition(&status, "Initialized")["reason"], "PodCompleted");
    }

    #[test]
    fn a_pod_without_init_containers_has_one_container_status_and_no_init_statuses() {
        let pod = json!({"metadata": {"uid": "u"},
                         "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
        let mut records = Records::new(0);
        let waiting = pod_status(&pod, None, &records, false);
        assert_eq!(waiting["phase"], "Pending");
        assert_eq!(
            waiting["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert!(waiting.get("initContainerStatuses").is_none());

        records.update(Slot::Main, |r| *r = Record::new(running()));
        let status = pod_status(&pod, None, &records, false);
        assert_eq!(status["phase"], "Running");
        let container = &status["containerStatuses"][0];
        assert_eq!(container["state"]["running"]["startedAt"], "t0");
        assert_eq!(container["ready"], true);
        assert_eq!(container["containerID"], "devcluster://u/c");
        assert_eq!(condition(&status, "Ready")["status"], "True");
        assert_eq!(condition(&status, "Initialized")["status"], "True");

        let old = json!({"startTime": "t-start"});
        for (exit_code, phase, ready_reason) in
            [(0, "Succeeded", "PodCompleted"), (3, "Failed", "PodFailed")]
        {
            records.update(Slot::Main, |r| *r = Record::new(exited(exit_code)));
            let status = pod_status(&pod, Some(&old), &records, true);
            assert_eq!(status["phase"], phase);
            assert_eq!(status["startTime"], "t-start");
            let terminated = &status["containerStatuses"][0]["state"]["terminated"];
            assert_eq!(terminated["exitCode"], exit_code);
            assert_eq!(terminated["finishedAt"], "t1");
            let ready = condition(&status, "Ready");
            assert_eq!(
                (&ready["status"], &ready["reason"]),
                (&json!("False"), &json!(ready_reason))
            );
            assert_eq!(
                condition(&status, "PodReadyToStartContainers")["status"],
                "False"
            );
        }
    }

    #[test]
    fn conditions_the_kubelet_does_not_own_are_kept() {
        let pod = pod_with_init("Never");
        let disruption = json!({"type": "DisruptionTarget", "status": "True",
                                "reason": "EvictionByEvictionAPI"});
        let old = json!({"conditions": [
            {"type": "Ready", "status": "True"},
            disruption.clone(),
        ]});
        let mut records = Records::new(2);
        records.update(Slot::Main, |r| *r = Record::new(exited(143)));
        let status = pod_status(&pod, Some(&old), &records, true);
        assert_eq!(condition(&status, "DisruptionTarget"), &disruption);
        let readies = status["conditions"].as_array().unwrap().iter();
        assert_eq!(readies.filter(|c| c["type"] == "Ready").count(), 1);
    }
}
