//! Daemon steps (`daemon: true`): once a daemon's Job reports a ready pod (`status.ready`), the
//! pod's IP is read and recorded on the Job (`ANNOTATION_DAEMONED`), which the planner reads as
//! the step done while it runs on, and as its `{{steps.NAME.ip}}`. Read in a plan in full only,
//! for a Job of the current run of a daemon step that is ready and not recorded yet: one pod
//! list and one Job patch per daemon, once. The Job is the record, so an operator restarted
//! after the patch reads the IP from it and never from the pod again.

use std::net::IpAddr;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::failure_cause::JOB_NAME_LABEL;
use workflow_operator_core::labels::ANNOTATION_DAEMONED;
use workflow_operator_core::plan::{Compiled, JobState, ObservedJob};

/// Records the IP of each ready daemon in `observed` not recorded yet, on its Job and in
/// `daemoned`. A daemon whose pod cannot be read, or whose Job cannot be patched, stays
/// running for this pass; the next pass tries again.
pub async fn record(
    pods: &Api<Pod>,
    jobs: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
    observed: &mut [ObservedJob],
) {
    for job in observed.iter_mut() {
        let daemon = (compiled.step(&workflow.spec, &job.step, false))
            .is_some_and(|(_, step)| step.daemon == Some(true));
        let wanted = daemon
            && job.ready
            && job.daemoned.is_none()
            && job.run == compiled.run
            && matches!(job.state, JobState::Active { .. });
        if !wanted {
            continue;
        }
        let selector = format!("{JOB_NAME_LABEL}={}", job.name);
        let listed = match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(listed) => listed.items,
            Err(error) => {
                tracing::debug!(%error, job = %job.name, "reading a daemon's pod");
                continue;
            }
        };
        let Some(ip) = listed.iter().find_map(ready_ip) else {
            continue;
        };
        let patch = json!({"metadata": {"annotations": {ANNOTATION_DAEMONED: ip.to_string()}}});
        match jobs
            .patch(&job.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(job = %job.name, %ip, "a daemon step is ready");
                job.daemoned = Some(ip);
            }
            Err(error) => tracing::debug!(%error, job = %job.name, "recording a daemon's IP"),
        }
    }
}

/// The IP of `pod` when it runs with every container ready (Argo's rule for a daemon: running
/// and ready), as its `Ready` condition says.
pub fn ready_ip(pod: &Pod) -> Option<IpAddr> {
    let status = pod.status.as_ref()?;
    let running = status.phase.as_deref() == Some("Running");
    let ready =
        (status.conditions.iter().flatten()).any(|c| c.type_ == "Ready" && c.status == "True");
    let all_ready = (status.container_statuses.iter().flatten()).all(|c| c.ready);
    if !(running && ready && all_ready) {
        return None;
    }
    status.pod_ip.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn a_daemon_s_ip_is_read_from_a_running_pod_only_once_it_is_ready() {
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let unready = json!([{"type": "Ready", "status": "False"}]);
        let cases = [
            (
                json!({"phase": "Running", "podIP": "10.0.0.7", "conditions": ready}),
                Some("10.0.0.7"),
            ),
            (
                json!({"phase": "Running", "podIP": "10.0.0.7", "conditions": unready}),
                None,
            ),
            (
                json!({"phase": "Pending", "podIP": "10.0.0.7", "conditions": ready}),
                None,
            ),
            (json!({"phase": "Running", "conditions": ready}), None),
            (
                json!({"phase": "Running", "podIP": "10.0.0.7", "conditions": ready,
                       "containerStatuses": [{"name": "main", "ready": false, "image": "i",
                                              "imageID": "", "restartCount": 0}]}),
                None,
            ),
        ];
        for (status, want) in cases {
            let want = want.map(|ip: &str| ip.parse::<IpAddr>().unwrap());
            assert_eq!(ready_ip(&pod(status.clone())), want, "{status}");
        }
    }
}
