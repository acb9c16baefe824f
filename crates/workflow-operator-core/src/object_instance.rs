//! Which instance of which step a Job or pod of a workflow runs, read back from the annotation
//! and labels the operator puts on it ([`crate::jobs`]): what `workflow-operator logs`
//! and the web view group pods by.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::WorkFlow;
use super::fan_out::display_name;
use super::jobs::{self, ANNOTATION_STEP};

/// The instance of a step a pod (or Job) runs, from the operator's annotation and labels.
pub struct ObjectInstance {
    /// The step's exact name.
    pub step: String,
    /// The item, for a step that fans out.
    pub item: Option<u32>,
    /// The row of `get` it is under: the step in its run (`run1/build`).
    pub row: String,
    /// Its own name: `build[3]`, `run1/build`.
    pub shown: String,
}

/// The instance a pod or Job runs, or `None` for one the operator did not label as a step's.
pub fn instance_of<K: ResourceExt>(object: &K, workflow: &WorkFlow) -> Option<ObjectInstance> {
    let step = step_of(object)?.to_string();
    let label = |key: &str| -> Option<u32> { object.labels().get(key)?.parse().ok() };
    let run_index = label(jobs::LABEL_RUN_INDEX).unwrap_or(0);
    let item = label(jobs::LABEL_ITEM);
    let runs = workflow.spec.run_count();
    Some(ObjectInstance {
        row: display_name(&step, run_index, runs, None),
        shown: display_name(&step, run_index, runs, item),
        step,
        item,
    })
}

/// The step a pod runs: its exact name from the annotation the operator puts on every step's
/// pod, else (pods of an older operator) the step label, which is exact for simple names.
fn step_of<K: ResourceExt>(pod: &K) -> Option<&str> {
    pod.annotations()
        .get(ANNOTATION_STEP)
        .or_else(|| pod.labels().get(jobs::LABEL_STEP))
        .map(String::as_str)
}

/// Whether the pod belongs to the workflow's current run (not a run its spec replaced).
pub fn in_run(pod: &Pod, workflow: &WorkFlow) -> bool {
    let run = workflow.status.as_ref().and_then(|s| s.run.as_deref());
    run.is_none() || pod.labels().get(jobs::LABEL_RUN).map(String::as_str) == run
}
