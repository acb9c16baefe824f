//! What the workflow page reads through the API when it is requested, beyond the operator's
//! mirror: the selected step's Jobs and pods (its times, attempts, exit code) and their logs,
//! found as `workflow-operator logs` finds them (or why its pods are gone), and the workflow's
//! Events. Reads only: lists of Jobs, pods and Events and pod logs. Secrets are never read.

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, LogParams};
use kube::{Client, ResourceExt};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::fan_out::display_name;
use workflow_operator_core::lifecycle::Trigger;
use workflow_operator_core::object_instance::{in_run, instance_of};
use workflow_operator_core::pods_gone::why_pods_gone;
use workflow_operator_core::step_view::{StepView, step_views};
use workflow_operator_core::{jobs, names};

/// Most pods whose logs a step panel shows (a step that fans out may have thousands): failed
/// ones first.
pub const MAX_LOGS: usize = 20;
/// The last lines of each log shown.
const LOG_LINES: i64 = 500;
/// At most this much of each log is read.
const LOG_BYTES: i64 = 256 * 1024;
/// The most recent Events shown.
pub const MAX_EVENTS: usize = 100;

/// One step as its panel shows it.
pub struct StepDetail {
    /// The step's row, as `workflow-operator get` shows it.
    pub view: StepView,
    /// For a step that fans out, its failed items' rows.
    pub failed_items: Vec<StepView>,
    /// Outputs the status records for the step.
    pub outputs: Vec<(String, String)>,
    pub logs: Vec<PodLog>,
    /// Why a step that ran has no pod left to show, as `workflow-operator logs` says it.
    pub gone: Option<String>,
    /// Pods of the step whose logs are not shown ([`MAX_LOGS`]).
    pub more_pods: usize,
}

/// One pod's log.
pub struct PodLog {
    /// The instance it runs (`build[3]`) and the pod's name.
    pub title: String,
    /// The log's last lines, or why it cannot be read.
    pub text: Result<String, String>,
}

/// The step named `step` (a row of `get`: `build`, `run1/build`), or `None` when the workflow
/// has no such step.
pub async fn step_detail(
    client: &Client,
    workflow: &WorkFlow,
    step: &str,
) -> Result<Option<StepDetail>> {
    let Some(spec_step) = step_of_row(workflow, step) else {
        return Ok(None);
    };
    let namespace = workflow.namespace().unwrap_or_default();
    // Only this step's Jobs and pods: a 10,000-step workflow's would be megabytes.
    let selector = ListParams::default().labels(&format!(
        "{},{}={}",
        jobs::selector(&workflow.name_any()),
        jobs::LABEL_STEP,
        names::label_value(spec_step)
    ));
    let job_api: Api<Job> = Api::namespaced(client.clone(), &namespace);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let found = job_api
        .list(&selector)
        .await
        .context("listing the workflow's Jobs")?
        .items;
    let pods = pod_api
        .list(&selector)
        .await
        .context("listing the workflow's pods")?
        .items;
    let views = step_views(workflow, &found, &pods);
    let Some(view) = views.iter().find(|v| v.name == step).cloned() else {
        return Ok(None);
    };
    let item_prefix = format!("{step}[");
    let failed_items = views
        .into_iter()
        .filter(|v| v.name.starts_with(&item_prefix))
        .collect();
    let outputs = workflow
        .status
        .iter()
        .flat_map(|s| &s.steps)
        .filter(|entry| entry.name == step)
        .flat_map(|entry| entry.outputs.clone())
        .collect();
    let mut own: Vec<(bool, Option<u32>, &Pod, String)> = pods
        .iter()
        .filter(|pod| in_run(pod, workflow))
        .filter_map(|pod| {
            let instance = instance_of(pod, workflow)?;
            (instance.row == step).then(|| (!failed(pod), instance.item, pod, instance.shown))
        })
        .collect();
    own.sort_by_key(|(ok, item, pod, _)| (*ok, *item, pod.metadata.creation_timestamp.clone()));
    let more_pods = own.len().saturating_sub(MAX_LOGS);
    let params = LogParams {
        tail_lines: Some(LOG_LINES),
        limit_bytes: Some(LOG_BYTES),
        ..LogParams::default()
    };
    let mut logs = Vec::new();
    for (_, _, pod, shown) in own.into_iter().take(MAX_LOGS) {
        let name = pod.name_any();
        let text = pod_api
            .logs(&name, &params)
            .await
            .map_err(|error| format!("cannot read the log: {error}"));
        logs.push(PodLog {
            title: format!("{shown} (pod {name})"),
            text,
        });
    }
    let gone = (logs.is_empty())
        .then(|| why_pods_gone(&view, &found, workflow))
        .flatten();
    Ok(Some(StepDetail {
        view,
        failed_items,
        outputs,
        logs,
        gone,
        more_pods,
    }))
}

/// The step of the spec (or of `onExit`) that a row of `get` shows: `build` for `build`,
/// `run1/build` and an item's `build[3]`.
fn step_of_row<'a>(workflow: &'a WorkFlow, row: &str) -> Option<&'a str> {
    let spec = &workflow.spec;
    let runs = workflow.runs_in_force();
    let named = |wanted: &str| {
        spec.containers
            .iter()
            .flat_map(|s| (0..runs).map(move |r| (s, display_name(&s.step_name, r, runs, None))))
            .chain(spec.on_exit.iter().map(|s| (s, s.step_name.clone())))
            .find(|(_, shown)| shown == wanted)
            .map(|(s, _)| s.step_name.as_str())
    };
    named(row).or_else(|| named(item_base(row)?))
}

/// `build` of an item's row `build[3]`.
fn item_base(row: &str) -> Option<&str> {
    let (base, item) = row.strip_suffix(']')?.rsplit_once('[')?;
    item.parse::<u32>().ok().map(|_| base)
}

fn failed(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
}

/// The workflow's Events, oldest first, the last [`MAX_EVENTS`].
pub async fn events(client: &Client, workflow: &WorkFlow) -> Result<Vec<Event>> {
    let api: Api<Event> =
        Api::namespaced(client.clone(), &workflow.namespace().unwrap_or_default());
    // events.k8s.io/v1 answers field selectors on `regarding.*`, as core/v1 does on
    // `involvedObject.*` (the field label conversion of k8s.io/kubernetes
    // pkg/apis/events/v1/conversion.go).
    let fields = format!(
        "regarding.kind=WorkFlow,regarding.name={}",
        workflow.name_any()
    );
    let mut listed = api
        .list(&ListParams::default().fields(&fields))
        .await
        .context("listing the workflow's Events")?
        .items;
    listed.sort_by_key(event_time);
    let skip = listed.len().saturating_sub(MAX_EVENTS);
    Ok(listed.into_iter().skip(skip).collect())
}

/// What started the workflow's current run when it is not its first: the newest `SpecChanged`
/// Event's story of it (`new run 3 at ...: what runs changed (...); the spec changed:
/// steps.c.command`, the fields named when the operator knew them), else the status's record.
pub fn new_run(workflow: &WorkFlow, events: &[Event]) -> Option<String> {
    let status = workflow.status.as_ref()?;
    let number = status.run_number?;
    let heading = format!("new run {number} ");
    let told = events
        .iter()
        .rev()
        .filter(|e| e.reason.as_deref() == Some(Trigger::SpecChanged.reason()))
        .filter_map(|e| e.note.as_deref()?.split_once(": new run "))
        .map(|(_, story)| format!("new run {story}"))
        .find(|story| story.starts_with(&heading));
    told.or_else(|| {
        let at = status
            .run_changed_at
            .as_ref()
            .map(|t| format!("at {:.0}", t.0));
        Some(
            format!("{heading}{}", at.unwrap_or_default())
                .trim_end()
                .to_string(),
        )
    })
}

/// When the Event last happened: its series' last, else its time, else when it was stored.
pub fn event_time(event: &Event) -> Option<k8s_openapi::jiff::Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_names_its_step_in_any_run_or_item() {
        let wf = WorkFlow::test("r")
            .step("build", &[])
            .step("odd[1]", &[])
            .runs(2)
            .exit_step("notify", &[])
            .build();
        assert_eq!(step_of_row(&wf, "run1/build"), Some("build"));
        assert_eq!(step_of_row(&wf, "run0/build[3]"), Some("build"));
        assert_eq!(step_of_row(&wf, "run1/odd[1]"), Some("odd[1]"));
        assert_eq!(step_of_row(&wf, "notify"), Some("notify"));
        assert_eq!(
            step_of_row(&wf, "build"),
            None,
            "with two runs a row names its run"
        );
        assert_eq!(step_of_row(&wf, "other"), None);
    }
}
