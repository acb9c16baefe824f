//! Reading a step's outputs from its pod: the termination message of the container
//! of the pod that succeeded, as the kubelet put it in `state.terminated.message`. Read only for
//! a succeeded Job of a step whose outputs another step names, and only until the status
//! records them (the planner writes them in the step's `status.steps` entry): one pod list per
//! such step, once. A suspend step runs no pod: its outputs were supplied by the resume, on its
//! Job (`crd::suspend::ANNOTATION_SUPPLIED`), read with one Job read, once, the same way.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::agent::Report;
use workflow_operator_core::crd::suspend::{self, ANNOTATION_SUPPLIED};
use workflow_operator_core::crd::{Step, StepKind, StepPhase};
use workflow_operator_core::dag::Dag;
use workflow_operator_core::data_flow::DataFlow;
use workflow_operator_core::failure_cause::JOB_NAME_LABEL;
use workflow_operator_core::outputs::{self, Outputs};
use workflow_operator_core::plan::{Compiled, JobState, ObservedJob};

/// Sets `outputs` of each Job in `observed` whose outputs are wanted and not recorded yet. A
/// Job whose pods (a suspend step's: the Job itself) cannot be read keeps `None`: the planner
/// waits, and the next pass reads them again.
pub async fn read(
    pods: &Api<Pod>,
    jobs: &Api<Job>,
    workflow: &WorkFlow,
    compiled: &Compiled,
    observed: &mut [ObservedJob],
) {
    let Ok(dag) = compiled.dag.as_ref() else {
        return;
    };
    let flow = &compiled.flow;
    if flow.read.is_empty() && flow.exit_read.is_empty() {
        return;
    }
    let recorded: HashSet<&str> = workflow
        .status
        .iter()
        .flat_map(|s| &s.steps)
        .filter(|s| s.phase == StepPhase::Succeeded)
        .filter_map(|s| s.job.as_deref())
        .collect();
    for job in observed.iter_mut() {
        let wanted = job.state == JobState::Succeeded
            && job.run == compiled.run
            && read_of(dag, compiled.exit.as_ref(), flow, &job.step)
            && !recorded.contains(job.name.as_str());
        if !wanted {
            continue;
        }
        let exit = dag.index_of(&job.step).is_none();
        let suspend_step = (compiled.step(&workflow.spec, &job.step, exit))
            .filter(|&(i, _)| compiled.kind(i, exit) == StepKind::Suspend);
        if let Some((_, step)) = suspend_step {
            job.outputs = supplied(jobs, &job.name, step).await;
            continue;
        }
        let selector = format!("{JOB_NAME_LABEL}={}", job.name);
        match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => job.outputs = Some(outputs_of(&list.items)),
            Err(error) => tracing::debug!(%error, job = %job.name, "reading a step's outputs"),
        }
    }
}

/// Whether the outputs of step `name` (of the steps' `dag`, or of the `exit` steps') are read.
fn read_of(dag: &Dag, exit: Option<&Dag>, flow: &DataFlow, name: &str) -> bool {
    match (dag.index_of(name), exit.and_then(|e| e.index_of(name))) {
        (Some(i), _) => flow.outputs_read(i, false),
        (None, Some(i)) => flow.outputs_read(i, true),
        (None, None) => false,
    }
}

/// The outputs the resume supplied to suspend step `step`, from its Job `name`; `None` when
/// the Job cannot be read.
async fn supplied(jobs: &Api<Job>, name: &str, step: &Step) -> Option<Result<Outputs, String>> {
    match jobs.get(name).await {
        Ok(job) => {
            let annotation = job.annotations().get(ANNOTATION_SUPPLIED);
            Some(suspend::outputs_of_resumed(
                step,
                annotation.map(String::as_str),
            ))
        }
        Err(error) => {
            tracing::debug!(%error, job = %name, "reading a suspend step's supplied outputs");
            None
        }
    }
}

/// The outputs among `pods` (a succeeded Job's): the termination message of the container that
/// exited 0.
///
/// # Errors
/// Why there are none to read: no such container (the pod is gone), or a message that is not
/// outputs.
pub fn outputs_of(pods: &[Pod]) -> Result<Outputs, String> {
    let succeeded = pods
        .iter()
        .flat_map(|pod| {
            pod.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .filter_map(|status| status.state.as_ref()?.terminated.as_ref())
        .find(|terminated| terminated.exit_code == 0);
    let Some(terminated) = succeeded else {
        return Err("its outputs cannot be read: its pod is gone".into());
    };
    let message = terminated.message.as_deref().unwrap_or_default();
    match Report::from_message(message) {
        Some(report) => report.map(|r| r.outputs),
        None => outputs::parse(message).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(terminated: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"containerStatuses": [{
                "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": terminated},
            }]},
        }))
        .unwrap()
    }

    #[test]
    fn the_outputs_are_the_message_of_the_container_that_succeeded() {
        let pods = [
            pod(json!({"exitCode": 1, "message": "x=failed attempt"})),
            pod(json!({"exitCode": 0, "message": "x=1\ny=two\n"})),
        ];
        let outputs = outputs_of(&pods).unwrap();
        assert_eq!(outputs["x"], "1");
        assert_eq!(outputs["y"], "two");
        assert_eq!(
            outputs_of(&[pod(json!({"exitCode": 0}))]),
            Ok(Outputs::new())
        );
    }

    #[test]
    fn no_pod_or_a_bad_message_says_why() {
        assert_eq!(
            outputs_of(&[]),
            Err("its outputs cannot be read: its pod is gone".into())
        );
        let error = outputs_of(&[pod(json!({"exitCode": 0, "message": "oops"}))]).unwrap_err();
        assert!(error.contains("not key=value"), "{error}");
    }

    #[test]
    fn the_step_agents_report_is_read_as_json() {
        let message = r#"{"outputs": {"result": "two\nlines", "sha": "abc"}}"#;
        let outputs = outputs_of(&[pod(json!({"exitCode": 0, "message": message}))]).unwrap();
        assert_eq!(outputs["result"], "two\nlines");
        assert_eq!(outputs["sha"], "abc");
    }
}
