//! How a pass writes the status it planned: at once before its actions, at once after them,
//! behind them, or not yet. Pure: [`choose`] decides from what the pass knows; the writes
//! themselves are [`StatusWriter`](super::status_writer::StatusWriter)'s.
//!
//! A status write costs the API server the whole object (700 KB for 10,000 steps), and the
//! workflow's next pass waits for a write made at once. So:
//! - a terminal outcome is written at once, **before** the actions (which then only stop or
//!   delete Jobs): once the status is terminal, whatever becomes of those writes, a restarted
//!   operator only deletes what is left running;
//! - so is a status recording a rule's firing (`spec.rules`): the firing is stored before the
//!   Jobs it lets start exist, so a restarted operator neither loses it nor makes it again;
//! - otherwise Jobs come first, so the status never lists a step as started before its Job
//!   exists, and a timed-out step's Job carries the record of its timeout before the status
//!   reports it;
//! - progress within the same phase, planned incrementally while Job events come quickly, is
//!   **deferred** for at most [`STATUS_MIN_INTERVAL`] (the timer's pass at its next tick writes
//!   it);
//! - while the incremental planner's state is kept for the next pass, the status is written
//!   **behind** ([`StatusWriter`](super::status_writer::StatusWriter)): that state does not
//!   read the stored status, and a pass in full waits for the write to land.

use std::time::Duration;

/// While a workflow runs, a status that only lists more steps started or executed is written at
/// most this often when Job events come quickly; a pass that defers its status has the timer
/// look at the workflow at its next tick (every
/// [`TIMEOUT_CHECK`](super::operator::TIMEOUT_CHECK)), and that pass writes whatever is left. A
/// phase change is never deferred (it is written at once, or behind while a run state is kept).
pub(super) const STATUS_MIN_INTERVAL: Duration = Duration::from_millis(500);

/// What a pass knows when it chooses how to write its status.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Facts {
    /// The plan has a status to write (it differs from the one stored or handed over).
    pub(super) has_status: bool,
    /// That status is terminal (Completed or Failed).
    pub(super) terminal: bool,
    /// Its phase differs from the newest status's.
    pub(super) phase_changed: bool,
    /// The plan was made by the incremental planner.
    pub(super) incremental: bool,
    /// The pass has no changed Jobs (the timer's): it writes whatever was deferred.
    pub(super) flush: bool,
    /// This process wrote the workflow's status less than [`STATUS_MIN_INTERVAL`] ago.
    pub(super) written_recently: bool,
    /// The incremental planner's state is kept for the next pass.
    pub(super) state_kept: bool,
    /// The status records a rule's firing.
    pub(super) fired: bool,
}

/// How the status is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StatusWrite {
    /// There is nothing to write.
    Nothing,
    /// At once, before the actions.
    BeforeActions,
    /// At once, after the actions.
    AfterActions,
    /// Handed to the status writer after the actions; the pass does not wait.
    Behind,
    /// Not in this pass: a later one writes it (and counts its steps).
    Deferred,
}

/// How the status of a pass that knows `facts` is written.
pub(super) fn choose(facts: Facts) -> StatusWrite {
    if !facts.has_status {
        StatusWrite::Nothing
    } else if facts.terminal || facts.fired {
        StatusWrite::BeforeActions
    } else if facts.incremental && !facts.flush && !facts.phase_changed && facts.written_recently {
        StatusWrite::Deferred
    } else if facts.state_kept {
        StatusWrite::Behind
    } else {
        StatusWrite::AfterActions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use StatusWrite::*;

    /// A running workflow's incremental pass for changed Jobs, state kept, written long ago.
    fn progress() -> Facts {
        Facts {
            has_status: true,
            incremental: true,
            state_kept: true,
            ..Facts::default()
        }
    }

    #[test]
    fn the_status_write_follows_the_table() {
        let cases: [(&str, Facts, StatusWrite); 10] = [
            ("no status", Facts::default(), Nothing),
            (
                "no status, even when recent",
                Facts {
                    written_recently: true,
                    ..Facts::default()
                },
                Nothing,
            ),
            ("progress, written long ago", progress(), Behind),
            (
                "progress, written recently",
                Facts {
                    written_recently: true,
                    ..progress()
                },
                Deferred,
            ),
            (
                "the timer's pass writes what was deferred",
                Facts {
                    written_recently: true,
                    flush: true,
                    ..progress()
                },
                Behind,
            ),
            (
                "a phase change is never deferred",
                Facts {
                    written_recently: true,
                    phase_changed: true,
                    ..progress()
                },
                Behind,
            ),
            (
                "a terminal outcome goes first",
                Facts {
                    terminal: true,
                    written_recently: true,
                    phase_changed: true,
                    ..progress()
                },
                BeforeActions,
            ),
            (
                "a plan in full is never deferred",
                Facts {
                    incremental: false,
                    written_recently: true,
                    ..progress()
                },
                Behind,
            ),
            (
                "a rule's firing goes first, never deferred",
                Facts {
                    fired: true,
                    written_recently: true,
                    state_kept: false,
                    incremental: false,
                    ..progress()
                },
                BeforeActions,
            ),
            (
                "no state kept: written at once after the Jobs",
                Facts {
                    state_kept: false,
                    ..progress()
                },
                AfterActions,
            ),
        ];
        for (case, pass, want) in cases {
            assert_eq!(choose(pass), want, "{case}: {pass:?}");
        }
    }
}
