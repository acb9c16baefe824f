//! The Events a status write posts about its steps: one Event per write (not one per step)
//! naming the steps it reports as started or succeeded, but for starts a lifecycle Event of
//! the same pass tells ([`untold`]). [`step_changes`] and [`step_event`] are
//! pure; [`publish`] posts.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube_kopf::Context;
use workflow_operator_core::crd::{WorkFlow, WorkFlowStatus};
use workflow_operator_core::lifecycle::Trigger;
use workflow_operator_core::names;
use workflow_operator_core::plan::LifecycleEvent;

/// Event reasons of the steps a status write reports: started, succeeded, or both. Failed and
/// timed-out steps are named by the lifecycle Event of the failure (`StepFailed`,
/// `StepTimedOut`).
pub const STEP_STARTED: &str = "StepStarted";
pub const STEP_SUCCEEDED: &str = "StepSucceeded";
pub const STEPS_PROGRESSED: &str = "StepsProgressed";

/// The most an Event's note may hold (`events.k8s.io/v1` validation: 1 KiB).
const NOTE_MAX_BYTES: usize = 1024;

/// The steps that finished and that started between two statuses, in status order.
#[derive(Debug, Default, PartialEq)]
pub(super) struct StepChanges {
    pub(super) finished: Vec<String>,
    pub(super) started: Vec<String>,
}

/// A step that started and finished between the two (its start was in a status never
/// written) counts as both, started first.
pub(super) fn step_changes(old: Option<&WorkFlowStatus>, new: &WorkFlowStatus) -> StepChanges {
    fn set(list: Option<&Vec<String>>) -> HashSet<&String> {
        list.into_iter().flatten().collect()
    }
    let (old_executed, old_started) = (set(old.map(|s| &s.executed)), set(old.map(|s| &s.started)));
    let finished: Vec<String> = new
        .executed
        .iter()
        .filter(|s| !old_executed.contains(s))
        .cloned()
        .collect();
    let started = finished
        .iter()
        .filter(|s| !old_started.contains(s))
        .chain(new.started.iter().filter(|s| !old_started.contains(s)))
        .cloned()
        .collect();
    StepChanges { finished, started }
}

/// `changes` less the starts a lifecycle Event of the same pass tells: `StepsStarted` (the
/// first steps, `Created -> Started: starting a, b`) and `ExitStepsStarted` name the steps they
/// start, so a step Event naming them too would tell one start twice.
pub(super) fn untold(changes: &StepChanges, lifecycle: &[LifecycleEvent]) -> StepChanges {
    let told = lifecycle.iter().any(|event| {
        matches!(
            event.transition.trigger(),
            Trigger::StepsStarted | Trigger::ExitStepsStarted
        )
    });
    StepChanges {
        finished: changes.finished.clone(),
        started: if told {
            Vec::new()
        } else {
            changes.started.clone()
        },
    }
}

/// The one Event a status write posts about its step changes: its reason, its note (`step a
/// succeeded; started b, c`) and, when it is about a single step, that step (whose Job becomes
/// the related object); `None` without changes.
fn step_event(changes: &StepChanges) -> Option<(&'static str, String, Option<&str>)> {
    let reason = match (changes.started.is_empty(), changes.finished.is_empty()) {
        (true, true) => return None,
        (false, true) => STEP_STARTED,
        (true, false) => STEP_SUCCEEDED,
        (false, false) => STEPS_PROGRESSED,
    };
    let half = NOTE_MAX_BYTES / 2 - 32;
    let mut parts = Vec::new();
    if !changes.finished.is_empty() {
        let noun = if changes.finished.len() == 1 {
            "step"
        } else {
            "steps"
        };
        parts.push(format!(
            "{noun} {} succeeded",
            names_within(&changes.finished, half)
        ));
    }
    if !changes.started.is_empty() {
        let lead = if parts.is_empty() {
            if changes.started.len() == 1 {
                "step"
            } else {
                "steps"
            }
        } else {
            "started"
        };
        let list = names_within(&changes.started, half);
        parts.push(if parts.is_empty() {
            format!("{lead} {list} started")
        } else {
            format!("{lead} {list}")
        });
    }
    let single = match (changes.started.as_slice(), changes.finished.as_slice()) {
        ([one], []) | ([], [one]) => Some(one.as_str()),
        ([a], [b]) if a == b => Some(a.as_str()),
        _ => None,
    };
    Some((reason, parts.join("; "), single))
}

/// The most step names one Event's note gives: past it, a count, so that `kubectl describe`
/// of a big workflow stays readable.
const NAMES_SHOWN: usize = 5;

/// `a, b, c`, or the first [`NAMES_SHOWN`] (as many as fit in `budget` bytes) and `and 7 more`.
fn names_within(names: &[String], budget: usize) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let rest = names.len() - i;
        let more = format!(" and {rest} more");
        let full = i == NAMES_SHOWN || out.len() + name.len() + 2 + more.len() > budget;
        if full && rest > 0 && i > 0 {
            out.push_str(&more);
            return out;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
    }
    out
}

/// One Event for the steps a status write reports as started or succeeded (see
/// [`step_event`]), about the workflow; when it names one step, its Job is the related object.
/// It is an API write, so it is posted once per status write, not once per step (at most one
/// Event for every status write: the status is written at most every 500 ms while steps finish
/// quickly); `--no-step-events` turns them off.
///
/// Created directly, not through the framework's [`kube_kopf::events::Publisher`]: it folds an
/// Event with the reason of one published within 6 minutes into the first one's series, keeping
/// the first note, and each step Event has a note of its own (the steps it names). (kube's
/// `Recorder`, which the publisher replaced, also scanned every Event of those 6 minutes on each
/// post: 44% of the operator's CPU at 22,000 step Events in `make bench`.)
pub(super) async fn publish(
    ctx: &Context<WorkFlow>,
    workflow: &WorkFlow,
    run: &str,
    changes: &StepChanges,
) {
    let Some((reason, note, single)) = step_event(changes) else {
        return;
    };
    let name = workflow.name_any();
    let namespace = workflow.namespace().unwrap_or_default();
    let related = single.map(|step| ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: Some(names::job_name(&name, step, run)),
        namespace: Some(namespace),
        ..Default::default()
    });
    if let Err(error) = post(ctx, workflow, reason, note, related).await {
        tracing::warn!(%error, workflow = %name, "posting a step event");
    }
}

/// Creates a Normal Event about `workflow` saying `note`, with `reason` (and `related`): a
/// new Event each time, never folded into an earlier one's series, for Events each of whose
/// notes matters (the steps a status write reports, a rule's firing).
pub(super) async fn post(
    ctx: &Context<WorkFlow>,
    workflow: &WorkFlow,
    reason: &str,
    note: String,
    related: Option<ObjectReference>,
) -> Result<(), kube::Error> {
    let name = workflow.name_any();
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<events::v1::Event> = Api::namespaced(ctx.client.clone(), &namespace);
    let instance =
        std::env::var("POD_NAME").unwrap_or_else(|_| super::shared::OPERATOR_NAME.to_string());
    let now = Timestamp::now();
    // Named as kube's recorder names Events (`<object>.<nanoseconds in hex>`): unique without
    // `generateName`, whose 5 random characters (27^5 names) are more likely than not to collide
    // within 4,500 Events of one prefix.
    let event_name = format!("{}.{:x}", names::dns_label(&name), now.as_nanosecond());
    let event = events::v1::Event {
        metadata: ObjectMeta {
            name: Some(event_name),
            namespace: Some(namespace),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(ctx.reason.to_string()),
        reason: Some(reason.into()),
        note: Some(note),
        regarding: Some(ctx.object_ref()),
        related,
        reporting_controller: Some(super::shared::OPERATOR_NAME.into()),
        reporting_instance: Some(instance),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &event).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(executed: &[&str], started: &[&str]) -> WorkFlowStatus {
        WorkFlowStatus {
            executed: executed.iter().map(|s| s.to_string()).collect(),
            started: started.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn changes(finished: &[&str], started: &[&str]) -> StepChanges {
        StepChanges {
            finished: finished.iter().map(|s| s.to_string()).collect(),
            started: started.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn one_event_names_every_step_a_status_write_reports() {
        assert_eq!(step_event(&changes(&[], &[])), None);
        assert_eq!(
            step_event(&changes(&[], &["a"])),
            Some((STEP_STARTED, "step a started".to_string(), Some("a")))
        );
        assert_eq!(
            step_event(&changes(&["a", "b"], &[])),
            Some((STEP_SUCCEEDED, "steps a, b succeeded".to_string(), None))
        );
        assert_eq!(
            step_event(&changes(&["a"], &["b", "c"])),
            Some((
                STEPS_PROGRESSED,
                "step a succeeded; started b, c".to_string(),
                None
            ))
        );
        // Started and finished between two writes: one step, its Job related.
        assert_eq!(step_event(&changes(&["a"], &["a"])).unwrap().2, Some("a"));
    }

    #[test]
    fn starts_a_lifecycle_event_tells_are_not_told_again() {
        use workflow_operator_core::lifecycle::{Phase, Transition};
        let event = |from, trigger| LifecycleEvent {
            transition: Transition::new(from, trigger).unwrap(),
            message: String::new(),
        };
        let both = changes(&["a"], &["b"]);
        let first = [event(Phase::Created, Trigger::StepsStarted)];
        assert_eq!(untold(&both, &first), changes(&["a"], &[]));
        let exits = [event(Phase::Started, Trigger::ExitStepsStarted)];
        assert_eq!(untold(&both, &exits), changes(&["a"], &[]));
        let failed = [event(Phase::Started, Trigger::StepFailed)];
        assert_eq!(untold(&both, &failed), both);
        assert_eq!(untold(&both, &[]), both);
    }

    #[test]
    fn a_step_events_note_fits_the_api_limit() {
        let many: Vec<String> = (0..5000).map(|i| format!("step-number-{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let (_, note, _) = step_event(&changes(&names, &names)).unwrap();
        assert!(note.len() <= NOTE_MAX_BYTES, "{} bytes", note.len());
        assert!(note.contains("step-number-0, step-number-1"), "{note}");
        assert!(note.contains("step-number-4 and 4995 more"), "{note}");
        assert!(note.contains(" more"), "{note}");
    }

    /// `kubectl describe` of a big workflow stays readable: a write that reports 80 steps
    /// names the first few and counts the rest.
    #[test]
    fn an_event_of_many_steps_names_a_few_and_counts_the_rest() {
        let many: Vec<String> = (0..80).map(|i| format!("s{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let (_, note, _) = step_event(&changes(&[], &names)).unwrap();
        assert_eq!(note, "steps s0, s1, s2, s3, s4 and 75 more started");
    }

    #[test]
    fn step_changes_name_the_steps_that_finished_and_started() {
        let cases = [
            (None, status(&[], &["a"]), changes(&[], &["a"])),
            (
                Some(status(&[], &["a"])),
                status(&["a"], &["b", "c"]),
                changes(&["a"], &["b", "c"]),
            ),
            (
                Some(status(&["a"], &["b", "c"])),
                status(&["a", "b"], &["c"]),
                changes(&["b"], &[]),
            ),
            (
                Some(status(&["a"], &["b"])),
                status(&["a"], &["b"]),
                changes(&[], &[]),
            ),
            // b started and finished between two written statuses.
            (
                Some(status(&["a"], &[])),
                status(&["a", "b"], &["c"]),
                changes(&["b"], &["b", "c"]),
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(step_changes(old.as_ref(), &new), want, "{old:?} -> {new:?}");
        }
    }
}
