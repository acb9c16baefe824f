//! The ticks' own writes to runs that the watch of the runs has not shown yet.
//!
//! A tick plans from the runs mirrored by a watch, not from a LIST per tick: with thousands of
//! CronWorkFlows a LIST per firing is most of the API server's work. A watch lags its writer
//! by a moment, though, and a tick must never plan without its own last writes: a run it
//! created and the mirror does not show yet would let `Forbid` start a second run beside it,
//! and a deleted one still shown counts against the history limits. So each tick notes what
//! it wrote; the next tick of that CronWorkFlow plans from the mirror only when the mirror
//! shows all of it, and otherwise reads the runs from the API, as current as any read.
//!
//! The same holds for the CronWorkFlow itself: its `status.lastScheduleTime` is the record of
//! which times were handled, and a tick planning from a cached object older than the last
//! status write would decide those times again (start one named missed a tick before). So the
//! status each tick writes is noted too, and a tick whose cached object does not show it reads
//! the CronWorkFlow from the API.

use std::collections::HashMap;
use std::sync::Mutex;

use workflow_operator_core::crd::CronWorkFlowStatus;
use workflow_operator_core::cron::plan::Run;

/// What a tick did to a run, as the mirror will show it once the watch delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrote {
    /// Created: the run is there with this uid.
    Created { uid: Option<String> },
    /// Asked to terminate: the run is marked so, or gone.
    Terminated,
    /// Deleted: the run is gone.
    Deleted,
}

impl Wrote {
    /// Whether `runs` show this write to run `name`.
    fn shown_in(&self, name: &str, runs: &[Run]) -> bool {
        let run = runs.iter().find(|r| r.name == name);
        match self {
            Wrote::Created { uid } => run.is_some_and(|r| &r.uid == uid),
            Wrote::Terminated => run.is_none_or(|r| r.terminating),
            Wrote::Deleted => run.is_none(),
        }
    }
}

/// The writes not yet shown by the mirror, per CronWorkFlow (by uid: a CronWorkFlow made
/// again under the same name starts with none). A CronWorkFlow's ticks never overlap (the
/// framework runs one handler per object at a time); the lock is for different CronWorkFlows.
#[derive(Debug, Default)]
pub struct Unseen {
    by_cron: Mutex<HashMap<String, Vec<(String, Wrote)>>>,
    /// The status each CronWorkFlow's last tick wrote, as sent, until a read shows it: its
    /// JSON text ([`status_text`]), as every CronWorkFlow may have one at once (a few hundred
    /// bytes each, where a `serde_json::Value` tree of the same status takes a few KiB).
    statuses: Mutex<HashMap<String, String>>,
}

impl Unseen {
    /// Notes that a tick of CronWorkFlow `cron` (its uid) did `wrote` to run `name`.
    pub fn note(&self, cron: &str, name: &str, wrote: Wrote) {
        let mut by_cron = self.by_cron.lock().expect("unseen writes lock");
        by_cron
            .entry(cron.to_string())
            .or_default()
            .push((name.to_string(), wrote));
    }

    /// Forgets the writes of `cron` that `mirrored` shows; true when none is left, i.e. the
    /// mirror is at least as new as this operator's writes to the runs.
    pub fn all_shown(&self, cron: &str, mirrored: &[Run]) -> bool {
        self.keep(cron, |name, wrote| !wrote.shown_in(name, mirrored))
    }

    /// After `cron`'s runs were read from the API (`listed`): forgets the writes `mirrored`
    /// shows, and those `listed` does not (someone changed the run since, which the watch
    /// will bring like any change).
    pub fn settle(&self, cron: &str, mirrored: &[Run], listed: &[Run]) {
        self.keep(cron, |name, wrote| {
            wrote.shown_in(name, listed) && !wrote.shown_in(name, mirrored)
        });
    }

    /// Notes that a tick of CronWorkFlow `cron` (its uid) wrote `status`, as sent.
    pub fn note_status(&self, cron: &str, status: &CronWorkFlowStatus) {
        let mut statuses = self.statuses.lock().expect("unseen statuses lock");
        statuses.insert(cron.to_string(), status_text(Some(status)));
    }

    /// Whether `status`, as cached, shows the last status `cron`'s ticks wrote; forgets that
    /// write once it does. A cached status that differs is taken as older than the write and
    /// read again ([`Unseen::settle_status`] then tells a change by someone else).
    pub fn status_shown(&self, cron: &str, status: Option<&CronWorkFlowStatus>) -> bool {
        let mut statuses = self.statuses.lock().expect("unseen statuses lock");
        match statuses.get(cron) {
            Some(written) if *written != status_text(status) => false,
            Some(_) => {
                statuses.remove(cron);
                true
            }
            None => true,
        }
    }

    /// The status `cron`'s ticks last wrote, when `status` (as cached) does not show it;
    /// forgets nothing: a look, for deciding whether a tick is needed at all.
    pub fn written_status(
        &self,
        cron: &str,
        status: Option<&CronWorkFlowStatus>,
    ) -> Option<CronWorkFlowStatus> {
        let statuses = self.statuses.lock().expect("unseen statuses lock");
        let written = statuses.get(cron)?;
        if *written == status_text(status) {
            return None;
        }
        serde_json::from_str(written).ok()
    }

    /// After `cron` was read from the API with `status`: forgets the written status when the
    /// read shows another (someone changed it since; the watch will bring that), and keeps it
    /// when the read shows it, for the cache still to catch up with.
    pub fn settle_status(&self, cron: &str, status: Option<&CronWorkFlowStatus>) {
        let mut statuses = self.statuses.lock().expect("unseen statuses lock");
        if statuses
            .get(cron)
            .is_some_and(|written| *written != status_text(status))
        {
            statuses.remove(cron);
        }
    }

    /// Keeps the writes of `cron` for which `unshown` holds; true when none is left.
    fn keep(&self, cron: &str, unshown: impl Fn(&str, &Wrote) -> bool) -> bool {
        let mut by_cron = self.by_cron.lock().expect("unseen writes lock");
        let Some(writes) = by_cron.get_mut(cron) else {
            return true;
        };
        writes.retain(|(name, wrote)| unshown(name, wrote));
        if writes.is_empty() {
            by_cron.remove(cron);
            return true;
        }
        false
    }
}

/// `status` as JSON text, in the field order of its type: two statuses of the same fields and
/// values give the same text, whether built by a tick or read back from the API.
fn status_text(status: Option<&CronWorkFlowStatus>) -> String {
    serde_json::to_string(&status).expect("a CronWorkFlow status serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, uid: &str, terminating: bool) -> Run {
        Run {
            name: name.into(),
            uid: Some(uid.into()),
            scheduled: 0,
            phase: None,
            finished_at: None,
            terminating,
        }
    }

    fn created(uid: &str) -> Wrote {
        Wrote::Created {
            uid: Some(uid.into()),
        }
    }

    #[test]
    fn the_mirror_is_used_once_it_shows_every_write_of_the_cron() {
        let unseen = Unseen::default();
        assert!(unseen.all_shown("c", &[]), "nothing written yet");
        unseen.note("c", "r1", created("u1"));
        unseen.note("c", "r0", Wrote::Deleted);
        unseen.note("c", "r2", Wrote::Terminated);
        unseen.note("other", "x", created("ux"));
        let before = [run("r0", "u0", false), run("r2", "u2", false)];
        assert!(!unseen.all_shown("c", &before));
        // A run of the same name but another uid is not the one created.
        assert!(!unseen.all_shown("c", &[run("r1", "old", false)]));
        let after = [run("r1", "u1", false), run("r2", "u2", true)];
        assert!(unseen.all_shown("c", &after));
        assert!(
            !unseen.by_cron.lock().unwrap().contains_key("c"),
            "a CronWorkFlow whose writes were all shown is forgotten"
        );
        assert!(
            unseen.all_shown("c", &[]),
            "shown writes are not asked for again"
        );
        assert!(!unseen.all_shown("other", &after), "per CronWorkFlow");
    }

    #[test]
    fn a_read_of_the_runs_forgets_writes_someone_undid_and_keeps_those_still_coming() {
        let unseen = Unseen::default();
        unseen.note("c", "gone", created("u1"));
        unseen.note("c", "coming", created("u2"));
        unseen.note("c", "mirrored", created("u3"));
        let mirrored = [run("mirrored", "u3", false)];
        let listed = [run("coming", "u2", false), run("mirrored", "u3", false)];
        unseen.settle("c", &mirrored, &listed);
        let left = unseen.by_cron.lock().unwrap()["c"].clone();
        assert_eq!(left, [("coming".to_string(), created("u2"))]);
        assert!(unseen.all_shown("c", &listed));
    }

    fn status(json: serde_json::Value) -> CronWorkFlowStatus {
        serde_json::from_value(json).expect("a CronWorkFlow status")
    }

    #[test]
    fn a_cached_status_is_used_once_it_shows_the_last_status_written() {
        let unseen = Unseen::default();
        let old = status(serde_json::json!({"lastScheduleTime": "2026-11-28T08:00:00Z"}));
        let new = status(serde_json::json!({"lastScheduleTime": "2026-11-28T08:00:03Z"}));
        assert!(unseen.status_shown("c", Some(&old)), "nothing written yet");
        unseen.note_status("c", &new);
        assert!(
            !unseen.status_shown("c", Some(&old)),
            "the cache lags the write"
        );
        assert!(
            !unseen.status_shown("c", Some(&old)),
            "and is read again until it shows it"
        );
        assert!(unseen.status_shown("other", Some(&old)), "per CronWorkFlow");
        assert!(unseen.status_shown("c", Some(&new)));
        assert!(
            unseen.status_shown("c", Some(&old)),
            "a shown write is forgotten"
        );
    }

    #[test]
    fn the_status_written_is_shown_where_the_cache_lags_it_without_forgetting_it() {
        let unseen = Unseen::default();
        let old = status(serde_json::json!({"active": [{"name": "r0"}]}));
        let new = status(serde_json::json!({"active": [{"name": "r1"}]}));
        assert_eq!(
            unseen.written_status("c", Some(&old)),
            None,
            "nothing written"
        );
        unseen.note_status("c", &new);
        assert_eq!(unseen.written_status("c", Some(&old)), Some(new.clone()));
        assert_eq!(
            unseen.written_status("c", Some(&new)),
            None,
            "the cache shows it"
        );
        assert!(
            !unseen.status_shown("c", Some(&old)),
            "still noted for the ticks"
        );
    }

    #[test]
    fn a_read_showing_another_status_than_the_one_written_forgets_the_write() {
        let unseen = Unseen::default();
        let old = status(serde_json::json!({"lastScheduleTime": "2026-11-28T08:00:00Z"}));
        let written = status(serde_json::json!({"lastScheduleTime": "2026-11-28T08:00:03Z"}));
        let theirs = status(serde_json::json!({"lastScheduleTime": "2026-11-28T09:00:00Z"}));
        unseen.note_status("c", &written);
        unseen.settle_status("c", Some(&written));
        assert!(
            !unseen.status_shown("c", Some(&old)),
            "read as written: the cache may still lag"
        );
        unseen.settle_status("c", Some(&theirs));
        assert!(
            unseen.status_shown("c", Some(&old)),
            "changed by someone else since: forgotten"
        );
    }
}
