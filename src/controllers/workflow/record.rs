//! Recording: the status a pass planned, written as [`status_policy::choose`] says (client);
//! the steps it reports counted in the metrics and announced in one Event; one Event per
//! lifecycle transition; and what the controller remembers for the next pass.

use std::time::Instant;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube_kopf::Context;
use workflow_operator_core::crd::{WorkFlow, WorkFlowStatus};
use workflow_operator_core::lifecycle::{Phase, Trigger};
use workflow_operator_core::plan::Plan;

use super::custom_metrics::{self, Ended};
use super::decide::{self, Decided, Decision};
use super::memory::CachedRun;
use super::shared::{ControllerState, RequestFailed};
use super::spec_change;
use super::status_policy::{self, Facts, STATUS_MIN_INTERVAL, StatusWrite};
use super::step_events::{self, StepChanges};

/// The status of one pass on its way to being recorded, with what the pass decided.
pub(super) struct Record {
    /// What the pass observed and decided; its plan's status is [`Record::status`].
    pub(super) decided: Box<Decided>,
    /// The status to write: the plan's, or for the timer's pass the one passes before it
    /// deferred.
    pub(super) status: Option<WorkFlowStatus>,
    write: StatusWrite,
    /// The steps it reports as started and finished, against the newest status handed over
    /// (else the stored one): a status on its way must be neither written again nor counted
    /// again.
    counted: Option<StepChanges>,
    /// The failed steps and workflow end it reports, against the same status as `counted`;
    /// `None` for a workflow that declares no metrics.
    ended: Option<Ended>,
    /// Its steps failed for Jobs the API server refused: written at once by [`refused`].
    replanned: bool,
    /// When this process last wrote the workflow's status.
    written_at: Option<Instant>,
    /// The rules' firings the status records, each posted as an Event once it is written.
    fired: Vec<String>,
}

/// Takes the status to write out of the decided plan (or, for the timer's pass, the one
/// deferred), counts its step changes, and chooses how to write it.
pub(super) fn prepare(shared: &ControllerState, mut decided: Box<Decided>) -> Box<Record> {
    let (seen, decision) = (&decided.seen, &mut decided.decision);
    let planned = decision.plan.status.take();
    let (status, counted, phase_before) = shared.status.with_newest(&seen.uid, |newest, _| {
        let before = newest.or(seen.workflow.status.as_ref());
        let status = match planned {
            None if seen.flush && decision.incremental => decision
                .state
                .as_ref()
                .and_then(|state| decide::deferred_status(state, before)),
            planned => planned,
        };
        let counted = status
            .as_ref()
            .map(|new| step_events::step_changes(before, new));
        // Only a workflow that declares metrics has anything to record when steps end.
        let ended = (status.as_ref())
            .filter(|_| custom_metrics::declared(&seen.workflow))
            .map(|new| custom_metrics::ended(before, new));
        (
            status,
            (counted, ended),
            before.and_then(|s| s.workflow_status),
        )
    });
    let (counted, ended) = counted;
    let phase = status.as_ref().and_then(|s| s.workflow_status);
    let write = status_policy::choose(Facts {
        has_status: status.is_some(),
        terminal: phase.is_some_and(Phase::is_terminal),
        phase_changed: phase != phase_before,
        incremental: decision.incremental,
        flush: seen.flush,
        written_recently: seen
            .status_written_at
            .is_some_and(|at| at.elapsed() < STATUS_MIN_INTERVAL),
        state_kept: decision.state.is_some(),
        fired: !decision.plan.fired.is_empty(),
    });
    Box::new(Record {
        status,
        write,
        counted,
        ended,
        replanned: false,
        written_at: seen.status_written_at,
        fired: decision.plan.fired.clone(),
        decided,
    })
}

/// Writes a terminal status, or one recording a rule's firing, before the actions; then
/// posts the firings' Events, before the Jobs they let start.
pub(super) async fn before_actions(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut record: Box<Record>,
) -> Result<Box<Record>, RequestFailed> {
    let workflow = &record.decided.seen.workflow;
    if record.write == StatusWrite::BeforeActions
        && write_now(shared, ctx, workflow, record.status.as_ref()).await?
    {
        record.written_at = Some(Instant::now());
        publish_rule_events(ctx, workflow, &record.fired).await;
    }
    Ok(record)
}

/// Writes at once the status of a plan made again for Jobs the API server refused
/// (`decision`, whose plan's status it takes), and hands on that plan.
pub(super) async fn refused(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut record: Box<Record>,
    mut decision: Decision,
) -> Result<Box<Record>, RequestFailed> {
    record.status = decision.plan.status.take();
    record.decided.decision = decision;
    let workflow = &record.decided.seen.workflow;
    write_now(shared, ctx, workflow, record.status.as_ref()).await?;
    record.written_at = Some(Instant::now());
    record.counted = Some(StepChanges::default());
    record.ended = None;
    record.replanned = true;
    Ok(record)
}

/// After the actions: the status written at once or behind, the steps it reports counted and
/// announced, one Event per lifecycle transition of the plan, and what is remembered for the
/// next pass ([`remember`]).
pub(super) async fn after_actions(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    mut record: Box<Record>,
) -> Result<(), RequestFailed> {
    let (seen, plan) = (&record.decided.seen, &record.decided.decision.plan);
    let workflow = &seen.workflow;
    if !record.replanned {
        match (record.write, &record.status) {
            (StatusWrite::Behind, Some(status)) => {
                shared
                    .status
                    .write_behind(&ctx.client, workflow, status.clone());
                record.written_at = Some(Instant::now());
            }
            (StatusWrite::AfterActions, status)
                if write_now(shared, ctx, workflow, status.as_ref()).await? =>
            {
                record.written_at = Some(Instant::now());
            }
            _ => {}
        }
    }
    // Steps are counted and announced when a status that lists them is written or handed over
    // to be written: a deferred status is counted by the write that stores it.
    let reported = record.status.as_ref().zip(record.counted.as_ref());
    if let Some((new, changes)) = reported.filter(|_| record.write != StatusWrite::Deferred) {
        // Steps first: a scrape that sees the workflow Completed must see its last step too.
        shared
            .metrics
            .steps(&changes.started, &changes.finished, plan, &seen.children);
        if let Some(ended) = &record.ended {
            let steps = (changes.finished.as_slice(), ended);
            custom_metrics::record(&shared.metrics, workflow, new, steps, &seen.children);
        }
        shared
            .metrics
            .workflow_phase(&seen.uid, new.workflow_status);
        if shared.step_events {
            let untold = step_events::untold(changes, &plan.events);
            step_events::publish(ctx, workflow, &plan.run, &untold).await;
        }
    }
    publish_lifecycle_events(ctx, workflow, plan).await;
    remember(shared, record);
    Ok(())
}

/// Keeps the run state for the next pass and when the timer must look again
/// ([`decide::next_wake`]), or, for a workflow that has finished, forgets what planning it
/// used: it has no more Jobs to start, and its state would only hold memory (the operator may
/// keep thousands of finished workflows). A late event plans in full.
fn remember(shared: &ControllerState, record: Box<Record>) {
    let Decided {
        seen,
        decision,
        gate,
        ..
    } = *record.decided;
    // Steps a gate holds back want to be looked at again soon: their wants go stale.
    let held = gate.is_some_and(|gate| gate.admitted.is_some());
    let finished = record
        .status
        .as_ref()
        .or(seen.workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(Phase::is_terminal);
    if finished {
        shared.finished(&seen.uid);
        return;
    }
    // The rules may read `workflow.elapsed` and running steps' durations: no deadline says
    // when those cross a rule's threshold, so such a workflow is looked at every tick.
    let at_once =
        record.write == StatusWrite::Deferred || held || !seen.workflow.spec.rules.is_empty();
    let wake = decide::next_wake(&decision, at_once, Instant::now());
    shared.memory.wake_at(&seen.uid, wake);
    if let Some(state) = decision.state {
        let run = CachedRun {
            generation: seen.workflow.metadata.generation.unwrap_or_default(),
            state,
            status_written_at: record.written_at,
            built_at: decision.built_at,
        };
        shared.memory.keep_run(&seen.uid, run);
    }
}

/// One Event per lifecycle transition, and the same story in the operator's log.
async fn publish_lifecycle_events(ctx: &Context<WorkFlow>, workflow: &WorkFlow, plan: &Plan) {
    let key = format!(
        "{}/{}",
        workflow.namespace().unwrap_or_default(),
        workflow.name_any()
    );
    for event in &plan.events {
        let reason = event.transition.reason();
        let message = match event.transition.trigger() {
            Trigger::SpecChanged => with_changed_fields(ctx, &event.message),
            _ => event.message.clone(),
        };
        let failed = event.transition.to() == Phase::Failed;
        let type_ = if failed {
            tracing::warn!(workflow = %key, reason, "{message}");
            EventType::Warning
        } else {
            tracing::info!(workflow = %key, reason, "{message}");
            EventType::Normal
        };
        if let Err(error) = ctx.publish(type_, reason, &message).await {
            // An Event that cannot be posted is not worth redoing the whole pass for.
            tracing::warn!(%error, workflow = %key, "posting a lifecycle event");
        }
    }
}

/// A new run's message, with the fields of the run the spec update changed when the update
/// handler's diff tells them: `...: the spec changed: steps.c.command`.
fn with_changed_fields(ctx: &Context<WorkFlow>, message: &str) -> String {
    match spec_change::changed_fields(&ctx.object, &ctx.diff) {
        Some(fields) if !fields.is_empty() => {
            format!("{message}; the spec changed: {}", fields.join(", "))
        }
        _ => message.to_string(),
    }
}

/// One Event `RuleFired` per rule that fired (`spec.rules`), each its own (the same reason
/// folded into one series would keep only the first firing's note), and the same in the log.
async fn publish_rule_events(ctx: &Context<WorkFlow>, workflow: &WorkFlow, fired: &[String]) {
    for note in fired {
        tracing::info!(workflow = %workflow.name_any(), reason = REASON_RULE_FIRED, "{note}");
        let posted = step_events::post(ctx, workflow, REASON_RULE_FIRED, note.clone(), None);
        if let Err(error) = posted.await {
            // As a lifecycle Event: the status holds the firing; its Event is not worth a pass.
            tracing::warn!(%error, workflow = %workflow.name_any(), "posting a rule's event");
        }
    }
}

/// The reason of the Event a rule's firing posts.
const REASON_RULE_FIRED: &str = "RuleFired";

/// Replaces the workflow's status with `status` (if any) in one write, after any write of it in
/// flight ([`StatusWriter::write`](super::status_writer::StatusWriter::write)); whether a write
/// was made.
async fn write_now(
    shared: &ControllerState,
    ctx: &Context<WorkFlow>,
    workflow: &WorkFlow,
    status: Option<&WorkFlowStatus>,
) -> Result<bool, RequestFailed> {
    let Some(status) = status else {
        return Ok(false);
    };
    shared
        .status
        .write(&ctx.client, workflow, status)
        .await
        .map_err(|e| {
            shared.metrics.api_error("patch");
            RequestFailed::new("writing the status", e)
        })?;
    Ok(true)
}
