//! Where each step of a workflow stands, as a person (or a script) reads it: its phase, times,
//! attempts, and for a failed step its exit code, reason and message, and its Job, and the
//! outputs the status records for it; a step that
//! fans out with its items counted and its failed items after it; each run of `spec.runs` in
//! turn. Pure: built
//! from the workflow (its `status.steps` first: the operator's verdict, with the cause it read
//! from the pods), its Jobs (the times of succeeded and running steps) and their pods as read
//! from the API. `workflow-operator get` prints it.
//!
//! The phase names are a contract (the CLI, scripts and the web view read them): `Waiting`
//! (its dependencies have not all succeeded), `Queued` (its Job exists but is suspended),
//! `Running`, `Succeeded`, `Failed`, `TimedOut`, `Skipped` (the workflow ended without it
//! starting).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use serde::Serialize;

use super::crd::suspend::{ANNOTATION_RESUMED, LABEL_SUSPEND};
use super::crd::{ItemCounts, Step, StepStatus, UNLIMITED, WorkFlow, WorkFlowSpec};
use super::dag::Dag;
use super::failure_cause;
use super::fan_out;
use super::jobs::{
    ANNOTATION_STEP, ANNOTATION_TIMED_OUT, LABEL_ATTEMPT, LABEL_ITEM, LABEL_RETRY, LABEL_RUN,
    LABEL_RUN_INDEX,
};
use super::plan::DEADLINE_EXCEEDED;

pub use super::crd::StepPhase;

/// One step, as `get` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// The step's name, or its instance's: `build[3]` (an item of a step that fans out),
    /// `run1/build` (a run of `spec.runs`).
    pub name: String,
    pub phase: StepPhase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Pods the step's Job has run (each try of `retries` is one).
    pub attempts: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// A step that fans out: how its items stand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemCounts>,
    /// What it wrote to `$WORKFLOW_OUTPUTS`, as `status.steps` records it (the outputs of a
    /// succeeded step that another step names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// A running step: when its timeout fails it (none when unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
    /// The attempts before its latest (`retryStrategy`), first first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_attempts: Vec<AttemptView>,
}

/// An attempt of a step with a `retryStrategy` before its latest, as `get` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// 0 for the first.
    pub attempt: u32,
    pub job: String,
    pub phase: StepPhase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Seconds from its end to the next attempt's Job (the back-off as it happened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited: Option<i64>,
}

/// When a running step's timeout runs out, and where that timeout is set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deadline {
    /// Its Job's start plus the timeout.
    pub at: Timestamp,
    /// The timeout, in seconds.
    pub seconds: i64,
    /// `timeout` (the step's own) or `spec.maxStepTimeout` (the workflow's, 60 unless set).
    pub from: &'static str,
}

impl StepView {
    /// How long the step ran: to its end, or to `now` while it runs.
    pub fn duration(&self, now: Timestamp) -> Option<std::time::Duration> {
        let end = self.finished_at.unwrap_or(now);
        let elapsed = end.duration_since(self.started_at?);
        elapsed.try_into().ok()
    }

    /// A step of nothing but its name and phase, as `get` shows one with no Job yet.
    pub fn empty(name: &str, phase: StepPhase) -> StepView {
        StepView {
            name: name.to_string(),
            phase,
            started_at: None,
            finished_at: None,
            attempts: 0,
            exit_code: None,
            reason: None,
            message: None,
            job: None,
            items: None,
            outputs: BTreeMap::new(),
            deadline: None,
            previous_attempts: Vec::new(),
        }
    }
}

/// The workflow's steps in DAG (topological) order, run after run of `spec.runs`, then its
/// exit steps (`onExit`) in theirs, each with what its Job of the current run (of its latest
/// retry) and that Job's pods say. A step that fans out is one row counting its items (as its
/// status entry does), followed by a row per failed item. `jobs` and `pods` may hold others
/// (they are matched by step annotation, run and item labels and owner); an invalid DAG lists
/// the steps in spec order.
pub fn step_views(workflow: &WorkFlow, jobs: &[Job], pods: &[Pod]) -> Vec<StepView> {
    let status = workflow.status.as_ref();
    let run = status.and_then(|s| s.run.as_deref());
    let terminal = status
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    let uid = workflow.uid();
    let in_order = |steps: &'_ [Step]| -> Vec<usize> {
        match Dag::build(steps) {
            Ok(dag) => dag.topological_order().collect(),
            Err(_) => (0..steps.len()).collect(),
        }
    };
    // The current run's Jobs of this very workflow.
    let ours: Vec<&Job> = jobs
        .iter()
        .filter(|job| {
            run.is_some_and(|r| job.labels().get(LABEL_RUN).map(String::as_str) == Some(r))
                && job
                    .owner_references()
                    .iter()
                    .any(|o| Some(&o.uid) == uid.as_ref())
        })
        .collect();
    let job_of = |step: &str, run_index: u32, item: Option<u32>| -> Option<&Job> {
        attempts_of(&ours, step, run_index, item).pop()
    };
    let recorded = |name: &str| {
        status
            .into_iter()
            .flat_map(|s| &s.steps)
            .find(|entry| entry.name == name)
    };
    let executed = |name: &str| status.is_some_and(|s| s.executed.iter().any(|e| e == name));
    let runs = workflow.runs_in_force();
    let mut views = Vec::new();
    let show = |steps: &[Step], runs: u32, views: &mut Vec<StepView>| {
        for run_index in 0..runs {
            for i in in_order(steps) {
                let step = &steps[i];
                let name = fan_out::display_name(&step.step_name, run_index, runs, None);
                if fan_out::fans_out(step) {
                    let items: Vec<(u32, &Job)> = ours
                        .iter()
                        .filter(|job| {
                            job.annotations().get(ANNOTATION_STEP) == Some(&step.step_name)
                                && label(job, LABEL_RUN_INDEX).unwrap_or(0) == run_index
                        })
                        .filter_map(|job| Some((label(job, LABEL_ITEM)?, *job)))
                        .collect();
                    views.push(fanned_view(
                        &name,
                        recorded(&name),
                        executed(&name),
                        terminal,
                        &items,
                    ));
                    // The failed items, as the status records them (a succeeded item's entry,
                    // kept for its outputs, is counted in the step's row).
                    let prefix = format!("{name}[");
                    for entry in status.into_iter().flat_map(|s| &s.steps) {
                        if entry.name.starts_with(&prefix) && entry.phase != StepPhase::Succeeded {
                            let item = entry.name[prefix.len()..]
                                .trim_end_matches(']')
                                .parse()
                                .ok();
                            let job = job_of(&step.step_name, run_index, item);
                            views.push(with_entry(
                                job.map(|job| view_of_job(&entry.name, job, pods)),
                                entry,
                            ));
                        }
                    }
                    continue;
                }
                let attempts = attempts_of(&ours, &step.step_name, run_index, None);
                let job = attempts.last().copied();
                let mut view = match (job, recorded(&name)) {
                    (job, Some(entry)) => {
                        with_entry(job.map(|job| view_of_job(&name, job, pods)), entry)
                    }
                    (Some(job), None) => view_of_job(&name, job, pods),
                    (None, None) => StepView::empty(
                        &name,
                        if terminal {
                            StepPhase::Skipped
                        } else {
                            StepPhase::Waiting
                        },
                    ),
                };
                if view.phase == StepPhase::Running {
                    view.deadline = deadline(&workflow.spec, step, view.started_at);
                }
                view.previous_attempts = previous_attempts(&attempts, pods);
                if !view.previous_attempts.is_empty() {
                    view.attempts += view.previous_attempts.len() as i32;
                }
                views.push(view);
            }
        }
    };
    show(&workflow.spec.containers, runs, &mut views);
    show(&workflow.spec.on_exit, 1, &mut views);
    views
}

/// A number label of `job`.
fn label(job: &Job, key: &str) -> Option<u32> {
    job.labels().get(key)?.parse().ok()
}

/// The Jobs of instance `item` of `step` in run `run_index` among `ours`, of its latest retry,
/// in attempt order: a retried step has a Job per retry, and per attempt, and the latest speaks
/// for it.
fn attempts_of<'j>(
    ours: &[&'j Job],
    step: &str,
    run_index: u32,
    item: Option<u32>,
) -> Vec<&'j Job> {
    let mut jobs: Vec<&Job> = (ours.iter().copied())
        .filter(|job| {
            job.annotations().get(ANNOTATION_STEP).map(String::as_str) == Some(step)
                && label(job, LABEL_RUN_INDEX).unwrap_or(0) == run_index
                && label(job, LABEL_ITEM) == item
        })
        .collect();
    let retry = |job: &Job| label(job, LABEL_RETRY).unwrap_or(0);
    jobs.sort_by_key(|job| (retry(job), label(job, LABEL_ATTEMPT).unwrap_or(0)));
    let latest = jobs.last().map(|job| retry(job));
    jobs.retain(|job| Some(retry(job)) == latest);
    jobs
}

/// The attempts of `attempts` (one step's Jobs, attempt order) before the last.
fn previous_attempts(attempts: &[&Job], pods: &[Pod]) -> Vec<AttemptView> {
    let Some((_, earlier)) = attempts.split_last() else {
        return Vec::new();
    };
    earlier
        .iter()
        .zip(&attempts[1..])
        .map(|(job, next)| {
            let view = view_of_job(&job.name_any(), job, pods);
            let next_created = next.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let waited = view
                .finished_at
                .zip(next_created)
                .map(|(end, next)| next.duration_since(end).as_secs().max(0));
            AttemptView {
                attempt: (job.labels().get(LABEL_ATTEMPT))
                    .and_then(|a| a.parse().ok())
                    .unwrap_or(0),
                job: job.name_any(),
                phase: view.phase,
                exit_code: view.exit_code,
                reason: view.reason,
                finished_at: view.finished_at,
                waited,
            }
        })
        .collect()
}

/// The deadline of `step` of `spec` that started at `started` (none when its timeout is
/// unlimited).
fn deadline(spec: &WorkFlowSpec, step: &Step, started: Option<Timestamp>) -> Option<Deadline> {
    let seconds = spec.effective_timeout(step);
    if seconds == UNLIMITED {
        return None;
    }
    let at = started?
        .checked_add(SignedDuration::from_secs(seconds))
        .ok()?;
    let from = if step.timeout.is_some() {
        "timeout"
    } else {
        "spec.maxStepTimeout"
    };
    Some(Deadline { at, seconds, from })
}

/// The row of a step that fans out (`name`), from its status entry (`recorded`), whether it
/// is in `executed`, and its items' Jobs: its times are its first item's start and, once it
/// ended, its last item's end.
fn fanned_view(
    name: &str,
    recorded: Option<&StepStatus>,
    executed: bool,
    terminal: bool,
    items: &[(u32, &Job)],
) -> StepView {
    let (started, finished): (Vec<Timestamp>, Vec<Timestamp>) = (
        items
            .iter()
            .filter_map(|(_, job)| Some(job.status.as_ref()?.start_time.as_ref()?.0))
            .collect(),
        items
            .iter()
            .filter_map(|(_, job)| Some(job.status.as_ref()?.completion_time.as_ref()?.0))
            .collect(),
    );
    let phase = match recorded {
        Some(entry) => entry.phase,
        None if executed => StepPhase::Succeeded,
        None if terminal => StepPhase::Skipped,
        None => StepPhase::Waiting,
    };
    let ended = !matches!(
        phase,
        StepPhase::Running | StepPhase::Interactive | StepPhase::Queued | StepPhase::Waiting
    );
    let succeeded = items
        .iter()
        .filter(|(_, job)| {
            job.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Complete" && c.status == "True")
                })
        })
        .map(|(item, _)| *item)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u32;
    let counts = recorded.and_then(|e| e.items).or_else(|| {
        executed.then_some(ItemCounts {
            total: succeeded,
            succeeded,
            ..ItemCounts::default()
        })
    });
    // A step the workflow stopped records when; its items' Jobs do not (a failed Job has no
    // completion time).
    let recorded_end = recorded.and_then(|e| e.finished_at.as_ref()).map(|t| t.0);
    StepView {
        started_at: started.into_iter().min(),
        finished_at: recorded_end.or(finished.into_iter().max().filter(|_| ended)),
        reason: recorded.and_then(|e| e.reason.clone()),
        message: recorded.and_then(|e| e.message.clone()),
        items: counts,
        ..StepView::empty(name, phase)
    }
}

/// The step as `status.steps` records it, with what its Job says where the entry is silent
/// (a running step's start, a stopped step's end).
fn with_entry(from_job: Option<StepView>, entry: &StepStatus) -> StepView {
    let job = from_job.unwrap_or_else(|| StepView::empty(&entry.name, entry.phase));
    let ended = !matches!(
        entry.phase,
        StepPhase::Running | StepPhase::Interactive | StepPhase::Queued
    );
    StepView {
        name: entry.name.clone(),
        phase: entry.phase,
        started_at: entry.started_at.as_ref().map(|t| t.0).or(job.started_at),
        finished_at: entry
            .finished_at
            .as_ref()
            .map(|t| t.0)
            .or(job.finished_at.filter(|_| ended)),
        attempts: entry.attempts.unwrap_or(job.attempts),
        exit_code: entry.exit_code.or(job.exit_code),
        reason: entry.reason.clone().or(job.reason),
        message: entry.message.clone().or(job.message),
        job: entry.job.clone().or(job.job),
        items: entry.items,
        outputs: entry.outputs.clone(),
        deadline: None,
        previous_attempts: Vec::new(),
    }
}

fn view_of_job(name: &str, job: &Job, pods: &[Pod]) -> StepView {
    let status = job.status.clone().unwrap_or_default();
    let ended = status
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
    let timed_out = job.annotations().get(ANNOTATION_TIMED_OUT);
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    // A suspend step's Job stays suspended: it waits (running) until resumed (succeeded).
    let resumed = job.annotations().contains_key(ANNOTATION_RESUMED);
    let waits = job.labels().contains_key(LABEL_SUSPEND);
    let phase = match (timed_out, ended) {
        (Some(_), _) => StepPhase::TimedOut,
        (None, _) if resumed => StepPhase::Succeeded,
        (None, Some(c)) if c.type_ == "Complete" => StepPhase::Succeeded,
        (None, Some(c)) if c.reason.as_deref() == Some(DEADLINE_EXCEEDED) => StepPhase::TimedOut,
        (None, Some(_)) => StepPhase::Failed,
        (None, None) if suspended && !waits => StepPhase::Queued,
        (None, None) => StepPhase::Running,
    };
    let job_name = job.name_any();
    let own_pods: Vec<Pod> = pods
        .iter()
        .filter(|pod| pod.labels().get("job-name") == Some(&job_name))
        .cloned()
        .collect();
    let (exit_code, reason, message) = match phase {
        StepPhase::Failed => match failure_cause::last_failure(&own_pods) {
            Some(terminated) => (
                Some(terminated.exit_code),
                terminated.reason.clone(),
                terminated.message.clone().filter(|m| !m.trim().is_empty()),
            ),
            None => (
                None,
                ended.and_then(|c| c.reason.clone()),
                ended.and_then(|c| c.message.clone()),
            ),
        },
        StepPhase::TimedOut => (
            None,
            Some("TimedOut".into()),
            timed_out
                .cloned()
                .or_else(|| ended.and_then(|c| c.message.clone())),
        ),
        _ => (None, None, None),
    };
    let finished_at = ended.and_then(|c| {
        let at = status
            .completion_time
            .as_ref()
            .or(c.last_transition_time.as_ref());
        at.map(|t| t.0)
    });
    StepView {
        name: name.to_string(),
        phase,
        started_at: status.start_time.as_ref().map(|t| t.0),
        finished_at,
        attempts: status.succeeded.unwrap_or(0)
            + status.failed.unwrap_or(0)
            + status.active.unwrap_or(0),
        exit_code,
        reason,
        message,
        job: Some(job_name),
        items: None,
        outputs: BTreeMap::new(),
        deadline: None,
        previous_attempts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    use crate::jobs::build_job;
    use crate::lifecycle::Phase;
    use crate::names;

    /// `a -> b -> c`, `d` alone, written as started in run `r1`.
    fn workflow(phase: Phase) -> WorkFlow {
        let mut wf = WorkFlow::test("wf")
            .step("c", &["b"])
            .step("b", &["a"])
            .step("a", &[])
            .step("d", &[])
            .build();
        wf.status = Some(crate::WorkFlowStatus {
            workflow_status: Some(phase),
            run: Some("r1".into()),
            ..Default::default()
        });
        wf
    }

    fn job(wf: &WorkFlow, step: &str, status: serde_json::Value) -> Job {
        let spec = wf
            .spec
            .containers
            .iter()
            .find(|s| s.step_name == step)
            .unwrap();
        let mut job = build_job(wf, spec, "r1").unwrap();
        job.status = Some(serde_json::from_value(status).unwrap());
        job
    }

    fn failed_pod(step: &str, exit_code: i32, message: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{step}-pod"), "labels": {"job-name": names::job_name("wf", step, "r1")}},
            "status": {"containerStatuses": [{
                "name": step, "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "reason": "Error", "message": message,
                                         "finishedAt": "2026-01-01T00:00:05Z"}},
            }]},
        }))
        .unwrap()
    }

    #[test]
    fn steps_come_in_dag_order_with_their_phase_times_and_attempts() {
        let wf = workflow(Phase::Started);
        let jobs = [
            job(
                &wf,
                "a",
                json!({"startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:03Z", "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True"}]}),
            ),
            job(
                &wf,
                "b",
                json!({"startTime": "2026-01-01T00:00:03Z", "active": 1}),
            ),
        ];
        let views = step_views(&wf, &jobs, &[]);
        let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
        let position = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(
            position("a") < position("b") && position("b") < position("c"),
            "{names:?}"
        );
        let of = |n: &str| views.iter().find(|v| v.name == n).unwrap();
        assert_eq!(of("a").phase, StepPhase::Succeeded);
        assert_eq!(of("a").attempts, 1);
        assert_eq!(
            of("a").duration(Timestamp::now()),
            Some(std::time::Duration::from_secs(3))
        );
        assert_eq!(of("b").phase, StepPhase::Running);
        assert_eq!(of("b").finished_at, None);
        assert_eq!(of("c").phase, StepPhase::Waiting);
        assert_eq!(of("c").job, None);
    }

    #[test]
    fn a_running_step_shows_its_deadline_and_where_its_timeout_comes_from() {
        let mut wf = workflow(Phase::Started);
        wf.spec
            .containers
            .iter_mut()
            .find(|s| s.step_name == "d")
            .unwrap()
            .timeout = Some(5.into());
        let running = json!({"startTime": "2026-01-01T00:00:00Z", "active": 1});
        let jobs = [job(&wf, "a", running.clone()), job(&wf, "d", running)];
        let views = step_views(&wf, &jobs, &[]);
        let of = |n: &str| views.iter().find(|v| v.name == n).unwrap();
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            of("a").deadline,
            Some(Deadline {
                at: start + k8s_openapi::jiff::SignedDuration::from_secs(60),
                seconds: 60,
                from: "spec.maxStepTimeout",
            })
        );
        assert_eq!(
            of("d").deadline.as_ref().map(|d| (d.seconds, d.from)),
            Some((5, "timeout"))
        );
        assert_eq!(of("b").deadline, None, "a waiting step has none");
        let mut unlimited = wf.clone();
        unlimited.spec.max_step_timeout = crate::crd::UNLIMITED;
        let views = step_views(&unlimited, &jobs, &[]);
        assert_eq!(views.iter().find(|v| v.name == "a").unwrap().deadline, None);
    }

    #[test]
    fn a_failed_step_shows_its_exit_code_and_the_rest_are_skipped_once_the_workflow_ended() {
        let wf = workflow(Phase::Failed);
        let jobs = [job(
            &wf,
            "a",
            json!({"startTime": "2026-01-01T00:00:00Z", "failed": 3,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                            "lastTransitionTime": "2026-01-01T00:00:06Z"}]}),
        )];
        let pods = [failed_pod("a", 2, "disk full")];
        let views = step_views(&wf, &jobs, &pods);
        let a = views.iter().find(|v| v.name == "a").unwrap();
        assert_eq!(a.phase, StepPhase::Failed);
        assert_eq!(a.exit_code, Some(2));
        assert_eq!(a.reason.as_deref(), Some("Error"));
        assert_eq!(a.message.as_deref(), Some("disk full"));
        assert_eq!(a.attempts, 3);
        assert_eq!(
            a.job.as_deref(),
            Some(names::job_name("wf", "a", "r1").as_str())
        );
        for other in ["b", "c", "d"] {
            let v = views.iter().find(|v| v.name == other).unwrap();
            assert_eq!(v.phase, StepPhase::Skipped, "{other}");
        }
    }

    #[test]
    fn timed_out_and_suspended_jobs() {
        let wf = workflow(Phase::Started);
        let mut slow = job(
            &wf,
            "a",
            json!({"startTime": "2026-01-01T00:00:00Z", "active": 1}),
        );
        slow.metadata.annotations.get_or_insert_default().insert(
            ANNOTATION_TIMED_OUT.into(),
            "running for 6s, longer than its timeout of 5s".into(),
        );
        let mut queued = job(&wf, "d", json!({}));
        queued.spec.as_mut().unwrap().suspend = Some(true);
        let views = step_views(&wf, &[slow, queued], &[]);
        let of = |n: &str| views.iter().find(|v| v.name == n).unwrap();
        assert_eq!(of("a").phase, StepPhase::TimedOut);
        assert_eq!(
            of("a").message.as_deref(),
            Some("running for 6s, longer than its timeout of 5s")
        );
        assert_eq!(of("d").phase, StepPhase::Queued);
    }

    #[test]
    fn jobs_of_another_run_or_workflow_do_not_count() {
        let wf = workflow(Phase::Started);
        let mut old = job(
            &wf,
            "a",
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
        );
        old.metadata
            .labels
            .get_or_insert_default()
            .insert(LABEL_RUN.into(), "r0".into());
        let views = step_views(&wf, &[old], &[]);
        assert_eq!(
            views.iter().find(|v| v.name == "a").unwrap().phase,
            StepPhase::Waiting
        );
    }

    #[test]
    fn the_status_entry_of_a_step_wins_and_its_job_fills_in_the_times() {
        let mut wf = workflow(Phase::Failed);
        let entry = |name: &str, phase, reason: &str, message: &str| StepStatus {
            name: name.into(),
            phase,
            started_at: None,
            finished_at: None,
            attempts: None,
            exit_code: None,
            reason: Some(reason.into()),
            message: Some(message.into()),
            job: Some(names::job_name("wf", name, "r1")),
            ip: None,
            outputs: Default::default(),
            items: None,
        };
        wf.status.as_mut().unwrap().steps = vec![
            entry(
                "a",
                StepPhase::Failed,
                "CannotStart",
                "CreateContainerConfigError: secret \"creds\" not found",
            ),
            entry(
                "d",
                StepPhase::Failed,
                "Stopped",
                "the workflow failed while it ran",
            ),
        ];
        // a's Job was stopped by the operator: Kubernetes says DeadlineExceeded.
        let jobs = [job(
            &wf,
            "a",
            json!({"startTime": "2026-01-01T00:00:00Z", "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                            "lastTransitionTime": "2026-01-01T00:00:06Z"}]}),
        )];
        let views = step_views(&wf, &jobs, &[]);
        let of = |n: &str| views.iter().find(|v| v.name == n).unwrap();
        assert_eq!(of("a").phase, StepPhase::Failed);
        assert_eq!(of("a").reason.as_deref(), Some("CannotStart"));
        assert_eq!(
            of("a").message.as_deref(),
            Some("CreateContainerConfigError: secret \"creds\" not found")
        );
        assert_eq!(
            of("a").duration(Timestamp::now()),
            Some(std::time::Duration::from_secs(6)),
            "the times are the Job's"
        );
        assert_eq!(of("a").attempts, 1);
        assert_eq!(of("d").phase, StepPhase::Failed, "its Job is gone");
        assert_eq!(of("b").phase, StepPhase::Skipped);
    }

    fn instance_job(wf: &WorkFlow, step: &str, run_index: u32, item: Option<u32>) -> Job {
        let spec = wf
            .spec
            .containers
            .iter()
            .find(|s| s.step_name == step)
            .unwrap();
        let instance = crate::fan_out::Instance {
            run_index,
            item: item.map(|index| crate::fan_out::Item {
                index,
                value: json!(index),
            }),
        };
        crate::jobs::StepJob::new(wf, spec, crate::crd::StepKind::of(&wf.spec, spec), "r1")
            .instance(&instance)
            .build()
            .unwrap()
    }

    #[test]
    fn a_step_that_fans_out_is_one_row_counting_its_items_then_its_failed_items() {
        let mut wf = WorkFlow::test("wf")
            .step("s", &[])
            .with_sequence(3)
            .step("t", &["s"])
            .build();
        let mut done = instance_job(&wf, "s", 0, Some(0));
        done.status = Some(
            serde_json::from_value(json!({"startTime": "2026-01-01T00:00:01Z",
                "completionTime": "2026-01-01T00:00:02Z", "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True"}]}))
            .unwrap(),
        );
        let mut busy = instance_job(&wf, "s", 0, Some(1));
        busy.status =
            Some(serde_json::from_value(json!({"startTime": "2026-01-01T00:00:00Z"})).unwrap());
        let failed = instance_job(&wf, "s", 0, Some(2));
        let counts = ItemCounts {
            total: 3,
            succeeded: 1,
            running: 1,
            failed: 1,
            skipped: 0,
        };
        wf.status = Some(crate::WorkFlowStatus {
            workflow_status: Some(Phase::Started),
            run: Some("r1".into()),
            steps: vec![
                StepStatus {
                    items: Some(counts),
                    ..crate::plan::running_step_status("s", String::new(), false)
                },
                StepStatus {
                    phase: StepPhase::Failed,
                    exit_code: Some(1),
                    ..crate::plan::running_step_status("s[2]", failed.name_any(), false)
                },
            ],
            ..Default::default()
        });
        let views = step_views(&wf, &[done, busy, failed], &[]);
        let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["s", "s[2]", "t"]);
        assert_eq!(views[0].items, Some(counts));
        assert_eq!(views[0].phase, StepPhase::Running);
        assert_eq!(
            views[0].started_at,
            Some("2026-01-01T00:00:00Z".parse().unwrap())
        );
        assert_eq!(views[0].finished_at, None, "it still runs");
        assert_eq!(
            (views[1].phase, views[1].exit_code),
            (StepPhase::Failed, Some(1))
        );
        assert_eq!(views[2].phase, StepPhase::Waiting);
    }

    #[test]
    fn each_run_of_a_repeated_workflow_is_shown_in_turn() {
        let mut wf = WorkFlow::test("wf")
            .runs(2)
            .step("a", &[])
            .step("b", &["a"])
            .build();
        wf.status = Some(crate::WorkFlowStatus {
            workflow_status: Some(Phase::Started),
            run: Some("r1".into()),
            ..Default::default()
        });
        let mut second = instance_job(&wf, "a", 1, None);
        second.status = Some(serde_json::from_value(json!({"active": 1})).unwrap());
        let views = step_views(&wf, &[second], &[]);
        let rows: Vec<(&str, StepPhase)> =
            views.iter().map(|v| (v.name.as_str(), v.phase)).collect();
        assert_eq!(
            rows,
            [
                ("run0/a", StepPhase::Waiting),
                ("run0/b", StepPhase::Waiting),
                ("run1/a", StepPhase::Running),
                ("run1/b", StepPhase::Waiting),
            ]
        );
    }
}
