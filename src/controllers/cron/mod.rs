//! The CronWorkFlow controller: at each scheduled time, a WorkFlow named for the time.
//!
//! A tick reads the CronWorkFlow and its runs (the WorkFlows labelled with its name), both from
//! the watches' caches, each read from the API instead when its cache does not show the
//! controller's own last writes yet (see `unseen.rs`), lets the pure planner
//! (`workflow_operator_core::cron::plan`) decide, then carries
//! the decision out: terminate (`Replace`), create (a 409 for a run that exists is success: the
//! name is the time's), delete beyond the history limits, the Events, and the status last. A
//! SIGKILL between any two writes leaves nothing a later tick does twice: the runs that exist
//! are the record of what started. Ticks come from a 1 s timer whose `when` looks only at
//! `status.nextScheduleTime` in memory, from any change of the spec, and from a change of a run
//! that the status must follow (a run's start or end: `active`, `lastSuccessfulTime` and the
//! history limits follow it within moments, suspended or not). The timer ticks just
//! after each whole second of the wall clock, where scheduled times fall, so a run is created
//! milliseconds after its time rather than anywhere up to a second later.

mod tick;
mod unseen;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube_kopf::{Children, Registry};
use workflow_operator_core::crd::CronWorkFlow;
use workflow_operator_core::cron::run_summary::RunSummary;

/// How often the timer looks for CronWorkFlows that are due (in memory; nothing is read or
/// written for one that is not).
pub const TICK: Duration = Duration::from_secs(1);

pub use workflow_operator_core::labels::{LABEL_CRON, LABEL_SCHEDULED};

/// The CronWorkFlow handlers; their runs are the WorkFlows `runs_selector` selects (`LABEL_CRON`,
/// and the shard when the replica holds one).
pub fn table(registry: Registry<CronWorkFlow>, runs_selector: &str) -> Registry<CronWorkFlow> {
    let unseen = Arc::new(unseen::Unseen::default());
    let followed = unseen.clone();
    let runs_changed = move |ctx, changed| tick::runs_changed(followed.clone(), ctx, changed);
    let tick = move |ctx| tick::tick(unseen.clone(), ctx);
    // The runs are mirrored for the ticks to read, and a run's change that the status must
    // follow (its start or end) ticks its CronWorkFlow, and only it.
    let runs = Children::<RunSummary>::owned().labels(runs_selector);
    registry
        .on_children("follow-runs", runs, runs_changed)
        .on_create("schedule", tick.clone())
        .on_update_field("spec", "reschedule", tick.clone())
        .on_resume("resume", tick.clone())
        .timer("fire", TICK, tick)
        .aligned()
        .when(|cron| is_due(cron, Timestamp::now()))
}

/// Whether a tick has something to do: a run is due, the spec changed since the status was
/// written, or there is no status yet. Cheap: it runs for every CronWorkFlow every second.
pub fn is_due(cron: &CronWorkFlow, now: Timestamp) -> bool {
    let Some(status) = &cron.status else {
        return true;
    };
    let suspended = status.suspended_at.is_some();
    if suspended != cron.spec.suspend {
        return true;
    }
    !cron.spec.suspend
        && status
            .next_schedule_time
            .as_ref()
            .is_some_and(|next| next.0 <= now)
}
