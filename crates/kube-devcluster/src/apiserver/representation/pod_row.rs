//! The READY, STATUS and RESTARTS cells of a pod's row in `kubectl get pods`, as the API server's
//! printer computes them (k8s.io/kubernetes pkg/printers/internalversion/printers.go,
//! `printPod`). [`super::table`] asks for them per row.
//!
//! - READY: the ready regular containers and started sidecars (init containers with
//!   `restartPolicy: Always`) over the regular containers and sidecars.
//! - STATUS: the phase (or `status.reason`); while the pod initializes, the first init
//!   container not done with: `Init:N/M` (N done of M), `Init:REASON` when it waits with a
//!   reason or terminated with one, `Init:ExitCode:C` without; once initialized, the reason a
//!   regular container (the first one that has one) waits or terminated with, `Running` (or
//!   `NotReady`) when one still runs beside one that completed; `Terminating` while a pod that
//!   has not ended is being deleted.
//! - RESTARTS: the restarts of the init containers while initializing, else of the sidecars and
//!   regular containers, and when the last restarted one ended (which [`super::table`] says
//!   as how long ago).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::kubelet::init_containers::is_restartable;

/// The three cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    pub ready: String,
    pub status: String,
    pub restarts: Restarts,
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn list<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn has_condition(pod: &Value, type_: &str) -> bool {
    list(pod, "/status/conditions")
        .iter()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// Restarts, and when the last restarted container ended (its `lastState.terminated`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restarts {
    pub count: i64,
    pub last: Option<DateTime<Utc>>,
}

impl Restarts {
    fn add(&mut self, status: &Value) {
        self.count += status
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let finished = text(status, "/lastState/terminated/finishedAt");
        if let Ok(at) = DateTime::parse_from_rfc3339(finished) {
            let at = at.with_timezone(&Utc);
            self.last = Some(self.last.map_or(at, |last| last.max(at)));
        }
    }
}

/// A terminated state's reason, or `ExitCode:C` (`Signal:S`) without one, after `prefix`.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    match terminated.get("reason").and_then(Value::as_str) {
        Some(reason) if !reason.is_empty() => format!("{prefix}{reason}"),
        _ => match terminated.get("signal").and_then(Value::as_i64) {
            Some(signal) if signal != 0 => format!("{prefix}Signal:{signal}"),
            _ => format!(
                "{prefix}ExitCode:{}",
                terminated
                    .get("exitCode")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            ),
        },
    }
}

/// What the init containers say: the STATUS while initializing (`None` once they are done
/// with), and their ready sidecars. `restarts` (and `sidecars`, a sidecar's) get the restarts of
/// those looked at, up to the first not done with, as `printPod` counts them.
fn init_progress(
    pod: &Value,
    restarts: &mut Restarts,
    sidecars: &mut Restarts,
) -> (Option<String>, usize) {
    let specs = list(pod, "/spec/initContainers");
    let restartable = |name: &Value| {
        specs
            .iter()
            .any(|c| c["name"] == *name && is_restartable(c))
    };
    let mut ready = 0;
    for (i, status) in list(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        restarts.add(status);
        let sidecar = restartable(&status["name"]);
        if sidecar {
            sidecars.add(status);
        }
        let state = &status["state"];
        if state
            .pointer("/terminated/exitCode")
            .and_then(Value::as_i64)
            == Some(0)
        {
            continue;
        }
        if sidecar && status["started"] == true {
            ready += usize::from(status["ready"] == true);
            continue;
        }
        let reason = if let Some(terminated) = state.get("terminated") {
            terminated_reason(terminated, "Init:")
        } else {
            match text(state, "/waiting/reason") {
                "" | "PodInitializing" => format!("Init:{i}/{}", specs.len()),
                reason => format!("Init:{reason}"),
            }
        };
        return (Some(reason), ready);
    }
    (None, ready)
}

/// The pod's READY, STATUS and RESTARTS cells.
pub fn pod_row(pod: &Value) -> PodRow {
    let specs = list(pod, "/spec/initContainers");
    let total =
        list(pod, "/spec/containers").len() + specs.iter().filter(|c| is_restartable(c)).count();
    let phase = text(pod, "/status/phase");
    let mut reason = match text(pod, "/status/reason") {
        "" => phase.to_string(),
        reason => reason.to_string(),
    };
    let gated = list(pod, "/status/conditions")
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated");
    if gated {
        reason = "SchedulingGated".into();
    }
    let (mut restarts, mut sidecar_restarts) = (Restarts::default(), Restarts::default());
    let (initializing, mut ready) = init_progress(pod, &mut restarts, &mut sidecar_restarts);
    if let Some(init_reason) = &initializing {
        reason = init_reason.clone();
    }
    if initializing.is_none() || has_condition(pod, "Initialized") {
        restarts = sidecar_restarts;
        let mut running = false;
        for status in list(pod, "/status/containerStatuses").iter().rev() {
            restarts.add(status);
            let state = &status["state"];
            match (text(state, "/waiting/reason"), state.get("terminated")) {
                ("", Some(terminated)) => reason = terminated_reason(terminated, ""),
                ("", None) if status["ready"] == true && state.get("running").is_some() => {
                    running = true;
                    ready += 1;
                }
                ("", None) => {}
                (waiting, _) => reason = waiting.to_string(),
            }
        }
        // A container still running beside one that completed.
        if reason == "Completed" && running {
            reason = if has_condition(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }
    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    if deleting && text(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    if reason.is_empty() {
        reason = "Pending".into();
    }
    PodRow {
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn running() -> Value {
        json!({"running": {"startedAt": "2020-01-01T00:00:00Z"}})
    }

    fn waiting(reason: &str) -> Value {
        json!({"waiting": {"reason": reason}})
    }

    fn done(code: i64, reason: &str) -> Value {
        json!({"terminated": {"exitCode": code, "reason": reason}})
    }

    fn status(name: &str, state: Value, ready: bool, started: bool) -> Value {
        json!({"name": name, "state": state, "ready": ready, "started": started, "restartCount": 0})
    }

    /// A pod with init containers `a` and `s` (a sidecar) and the container `main`.
    fn pod(phase: &str, initialized: bool, init: [Value; 2], main: Value) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "a"}, {"name": "s", "restartPolicy": "Always"}],
                     "containers": [{"name": "main"}]},
            "status": {"phase": phase,
                       "conditions": [{"type": "Initialized", "status": if initialized { "True" } else { "False" }}],
                       "initContainerStatuses": init, "containerStatuses": [main]}
        })
    }

    #[test]
    fn init_containers_show_their_progress_then_the_main_container_its_state() {
        let pending = status("s", waiting("PodInitializing"), false, false);
        let table = [
            // (pod, READY, STATUS)
            (
                pod(
                    "Pending",
                    false,
                    [status("a", running(), false, true), pending.clone()],
                    status("main", waiting("PodInitializing"), false, false),
                ),
                "0/2",
                "Init:0/2",
            ),
            (
                pod(
                    "Pending",
                    false,
                    [
                        status("a", done(0, "Completed"), true, false),
                        pending.clone(),
                    ],
                    status("main", waiting("PodInitializing"), false, false),
                ),
                "0/2",
                "Init:1/2",
            ),
            (
                pod(
                    "Failed",
                    false,
                    [status("a", done(3, "Error"), false, false), pending.clone()],
                    status("main", waiting("PodInitializing"), false, false),
                ),
                "0/2",
                "Init:Error",
            ),
            (
                pod(
                    "Pending",
                    false,
                    [
                        status("a", waiting("CrashLoopBackOff"), false, false),
                        pending,
                    ],
                    status("main", waiting("PodInitializing"), false, false),
                ),
                "0/2",
                "Init:CrashLoopBackOff",
            ),
            (
                pod(
                    "Running",
                    true,
                    [
                        status("a", done(0, "Completed"), true, false),
                        status("s", running(), true, true),
                    ],
                    status("main", running(), true, true),
                ),
                "2/2",
                "Running",
            ),
            // The sidecar stopped by SIGTERM at the end: the main container speaks.
            (
                pod(
                    "Succeeded",
                    true,
                    [
                        status("a", done(0, "Completed"), true, false),
                        status("s", done(143, "Error"), false, false),
                    ],
                    status("main", done(0, "Completed"), false, false),
                ),
                "0/2",
                "Completed",
            ),
        ];
        for (pod, ready, phase) in table {
            let row = pod_row(&pod);
            assert_eq!(
                (row.ready.as_str(), row.status.as_str()),
                (ready, phase),
                "{pod}"
            );
        }
    }

    #[test]
    fn restarts_count_init_containers_while_initializing_then_sidecars_and_containers() {
        let ended = "2020-01-01T00:00:00Z";
        let two_restarts = Restarts {
            count: 2,
            last: Some(
                DateTime::parse_from_rfc3339(ended)
                    .unwrap()
                    .with_timezone(&Utc),
            ),
        };
        let restarted = |name: &str, state: Value, n: i64| {
            json!({"name": name, "state": state, "restartCount": n, "started": true, "ready": true,
                   "lastState": {"terminated": {"exitCode": 1, "finishedAt": ended}}})
        };
        let initializing = pod(
            "Pending",
            false,
            [
                restarted("a", waiting("CrashLoopBackOff"), 2),
                status("s", waiting("PodInitializing"), false, false),
            ],
            status("main", waiting("PodInitializing"), false, false),
        );
        assert_eq!(pod_row(&initializing).restarts, two_restarts);
        let started = pod(
            "Running",
            true,
            [
                restarted("a", done(0, "Completed"), 2),
                restarted("s", running(), 1),
            ],
            restarted("main", running(), 1),
        );
        assert_eq!(pod_row(&started).restarts, two_restarts);
        let plain = json!({"spec": {"containers": [{"name": "c"}]},
                           "status": {"phase": "Running", "containerStatuses": [status("c", running(), true, true)]}});
        assert_eq!(
            pod_row(&plain),
            PodRow {
                ready: "1/1".into(),
                status: "Running".into(),
                restarts: Restarts::default(),
            }
        );
    }

    #[test]
    fn a_deleted_pod_is_terminating_until_it_has_ended() {
        let mut pod = json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z"},
                             "spec": {"containers": [{"name": "c"}]},
                             "status": {"phase": "Running"}});
        assert_eq!(pod_row(&pod).status, "Terminating");
        pod["status"]["phase"] = json!("Succeeded");
        assert_eq!(pod_row(&pod).status, "Succeeded");
    }
}
