//! How many objects never handled before may be processed at once: a window that grows while
//! the API server keeps up and halves when it falls behind.
//!
//! Why: setting up a new object (a workflow's first Jobs, its status) adds load the API server
//! pays for later, in the watch events of everything it creates. With every worker free to take
//! new objects, a burst of a thousand fills the API server faster than it can send the events
//! back, and the watches of *every* object fall behind: on the bench (1,000 workflows at once,
//! 2 cores) the Job watch was a second late, so each step's successor started a second after it
//! could have. Bounding the intake moves the wait to where it belongs: new objects wait to
//! start, and the ones under way keep their pace.
//!
//! The signal is the *echo lag* of the framework's own writes: the time from a progress record
//! written to the watch delivering that very version of the object (matched by
//! resourceVersion, compared only for equality). It measures exactly what makes the operator
//! late, the API server's write-and-watch round trip, wherever the time goes (request queue,
//! watch dispatch, the operator's own backlog of watch events).
//!
//! The window is additive-increase, multiplicative-decrease, as TCP's congestion window:
//! - it starts at one object;
//! - each echo within the tolerance adds `1/limit` (so about one object per window's worth of
//!   echoes), or `1/(limit * processes)` when that many processes take new objects in from one
//!   API server, each through its own window: together they then grow as one window would, where
//!   each growing at one window's pace would overshoot the API server by their number (TCP's
//!   flows sharing a link converge to their fair shares the same way, each adding less);
//! - an echo beyond the tolerance halves it, at most once per lag (echoes of writes made before
//!   a cut would otherwise cut it again for the same congestion).
//!
//! The tolerance is relative, since a real API server's normal echo lag is tens of milliseconds
//! and loopback's is one: an echo is late when it is more than twice the smallest lag seen in
//! the last [`BASELINE_WINDOW`]s plus [`LAG_MARGIN`].
//!
//! A crate was not used: the tower and concurrency-limit crates limit requests a caller sends
//! through them, not a queue's admission on a signal measured elsewhere, and the rule is a few
//! lines.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use tokio::time::Instant;

/// Added to twice the baseline lag before an echo counts as late. On loopback (baseline about
/// 1 ms), 2 ms against 5 ms halved the burst benchmark's dispatch p50 (8-10 ms against 13-17)
/// and kept its p99 under 51 ms in 5 of 6 alternating runs (the 5 ms margin: 2 of 6), for the
/// same throughput. A real API server's larger baseline counts twice.
pub const LAG_MARGIN: Duration = Duration::from_millis(2);

/// The baseline is the smallest lag seen in the current and the previous window this long.
pub const BASELINE_WINDOW: Duration = Duration::from_secs(10);

/// A write not echoed within this long is forgotten (a re-list may have skipped its version).
const ECHO_EXPIRY: Duration = Duration::from_secs(60);

/// The smallest lag over roughly the last one to two [`BASELINE_WINDOW`]s.
#[derive(Debug)]
struct Baseline {
    started: Instant,
    current: Option<Duration>,
    previous: Option<Duration>,
}

impl Baseline {
    fn observe(&mut self, lag: Duration, now: Instant) {
        let elapsed = now.duration_since(self.started);
        if elapsed >= BASELINE_WINDOW {
            self.previous = if elapsed >= BASELINE_WINDOW * 2 {
                None
            } else {
                self.current
            };
            self.current = None;
            self.started = now;
        }
        self.current = Some(self.current.map_or(lag, |c| c.min(lag)));
    }

    fn get(&self) -> Option<Duration> {
        match (self.current, self.previous) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The number of new objects that may be processed at once; see the module documentation.
#[derive(Debug)]
pub struct IntakeWindow {
    limit: usize,
    max: usize,
    credit: f64,
    baseline: Baseline,
    /// No cut before this instant.
    hold_until: Option<Instant>,
}

impl IntakeWindow {
    /// A window of one object, which may grow to `max`.
    pub fn new(max: usize, now: Instant) -> Self {
        Self {
            limit: 1,
            max: max.max(1),
            credit: 0.0,
            baseline: Baseline {
                started: now,
                current: None,
                previous: None,
            },
            hold_until: None,
        }
    }

    /// How many new objects may be processed at once now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The lag beyond which an echo is late, once any echo has been seen.
    pub fn tolerance(&self) -> Option<Duration> {
        self.baseline.get().map(|base| base * 2 + LAG_MARGIN)
    }

    /// One echo of a write, `lag` after the write returned.
    pub fn observe(&mut self, lag: Duration, now: Instant) {
        self.observe_among(lag, now, 1);
    }

    /// One echo of a write, `lag` after the write returned, with `processes` windows (this one
    /// among them) pacing one API server: an echo on time grows this one `1/processes` as much.
    pub fn observe_among(&mut self, lag: Duration, now: Instant, processes: usize) {
        self.baseline.observe(lag, now);
        let tolerance = self.tolerance().expect("just observed");
        if lag > tolerance {
            if self.hold_until.is_none_or(|until| now >= until) {
                self.limit = (self.limit / 2).max(1);
                self.credit = 0.0;
                self.hold_until = Some(now + lag);
            }
        } else if self.limit < self.max {
            self.credit += 1.0 / (self.limit * processes.max(1)) as f64;
            if self.credit >= 1.0 {
                self.credit -= 1.0;
                self.limit += 1;
            }
        }
    }
}

/// An intake window and the new objects it admits now, for every reactor of one resource type
/// whose operators share [`crate::Slots`] (a replica's shards): one window paces them all, as
/// it would one operator, where a window each would let in their sum.
#[derive(Debug)]
pub(crate) struct SharedIntake {
    window: Mutex<IntakeWindow>,
    /// New objects counted against the window now, over every reactor sharing it.
    in_flight: AtomicUsize,
    /// Told when `in_flight` falls, so a reactor whose new objects wait for room learns of it.
    room: Notify,
    /// Processes taking new objects in from the same API server, this one among them
    /// ([`crate::Slots::set_processes`]).
    processes: Arc<AtomicUsize>,
}

impl SharedIntake {
    pub(crate) fn new(max: usize, now: Instant, processes: Arc<AtomicUsize>) -> Self {
        Self {
            window: Mutex::new(IntakeWindow::new(max, now)),
            in_flight: AtomicUsize::new(0),
            room: Notify::new(),
            processes,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.window.lock().expect("intake window").limit()
    }

    /// Whether one more new object may be processed now.
    pub(crate) fn open(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) < self.limit()
    }

    /// One echo of a write ([`IntakeWindow::observe`]); the new limit when it changed.
    pub(crate) fn observe(&self, lag: Duration, now: Instant) -> Option<usize> {
        let mut window = self.window.lock().expect("intake window");
        let before = window.limit();
        window.observe_among(lag, now, self.processes.load(Ordering::Acquire));
        (window.limit() != before).then(|| window.limit())
    }

    pub(crate) fn took(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn released(&self, count: usize) {
        if count > 0 {
            self.in_flight.fetch_sub(count, Ordering::AcqRel);
            self.room.notify_waiters();
        }
    }

    /// Resolves once `in_flight` falls after this call.
    pub(crate) fn room(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.notified()
    }
}

/// Writes waiting for their echo, by object: the resourceVersion each write returned, and when.
#[derive(Debug)]
pub struct Echoes<Key> {
    waiting: HashMap<Key, (String, Instant)>,
}

impl<Key: Hash + Eq> Default for Echoes<Key> {
    fn default() -> Self {
        Self {
            waiting: HashMap::new(),
        }
    }
}

impl<Key: Hash + Eq> Echoes<Key> {
    /// A write to `key` returned version `resource_version` at `now`; an earlier write's echo
    /// still awaited is no longer (its lag would count the same congestion twice).
    pub fn wrote(&mut self, key: Key, resource_version: String, now: Instant) {
        self.waiting.insert(key, (resource_version, now));
    }

    /// The watch delivered version `resource_version` of `key`: the lag if that is the version
    /// written. Other versions (someone else's writes, older events still on their way) leave
    /// the write waiting, unless it is too old to be echoed any more.
    pub fn seen(&mut self, key: &Key, resource_version: &str, now: Instant) -> Option<Duration> {
        let (written, at) = self.waiting.get(key)?;
        let lag = now.duration_since(*at);
        if written == resource_version {
            self.waiting.remove(key);
            return Some(lag);
        }
        if lag > ECHO_EXPIRY {
            self.waiting.remove(key);
        }
        None
    }

    /// The object is gone: no echo will come.
    pub fn forget(&mut self, key: &Key) {
        self.waiting.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn grown_to(limit: usize, now: Instant) -> IntakeWindow {
        let mut window = IntakeWindow::new(64, now);
        while window.limit() < limit {
            window.observe(MS, now);
        }
        window
    }

    #[test]
    fn starts_at_one_and_grows_by_one_per_window_of_timely_echoes() {
        let now = Instant::now();
        let mut window = IntakeWindow::new(64, now);
        assert_eq!(window.limit(), 1);
        window.observe(MS, now);
        assert_eq!(window.limit(), 2, "one echo fills a window of one");
        window.observe(MS, now);
        assert_eq!(window.limit(), 2, "a window of two needs two echoes");
        window.observe(MS, now);
        assert_eq!(window.limit(), 3);
        for _ in 0..3 {
            window.observe(MS, now);
        }
        assert_eq!(window.limit(), 4);
    }

    #[test]
    fn the_windows_of_several_processes_grow_together_as_one_window_would() {
        let now = Instant::now();
        let mut alone = IntakeWindow::new(64, now);
        let mut pair = [IntakeWindow::new(64, now), IntakeWindow::new(64, now)];
        // The same echoes: all to the one window, or half to each of two processes' windows.
        for echo in 0..200 {
            alone.observe(MS, now);
            pair[echo % 2].observe_among(MS, now, 2);
        }
        assert_eq!(
            alone.limit(),
            20,
            "1 + 2 + ... + 19 echoes grow one window to 20"
        );
        assert_eq!(
            pair.iter().map(IntakeWindow::limit).sum::<usize>(),
            alone.limit(),
            "two windows pacing one API server add up to the one window"
        );
    }

    #[test]
    fn never_grows_past_its_maximum() {
        let now = Instant::now();
        let mut window = IntakeWindow::new(3, now);
        for _ in 0..100 {
            window.observe(MS, now);
        }
        assert_eq!(window.limit(), 3);
    }

    #[test]
    fn a_late_echo_halves_the_window_once_per_lag() {
        let now = Instant::now();
        let mut window = grown_to(16, now);
        let tolerance = 2 * MS + LAG_MARGIN;
        assert_eq!(
            window.tolerance(),
            Some(tolerance),
            "twice the 1 ms baseline, plus the margin"
        );
        window.observe(tolerance, now);
        assert_eq!(window.limit(), 16, "at the tolerance is on time");
        window.observe(200 * MS, now);
        assert_eq!(window.limit(), 8);
        window.observe(300 * MS, now + 100 * MS);
        assert_eq!(
            window.limit(),
            8,
            "echoes within the lag of the cut do not cut again"
        );
        window.observe(300 * MS, now + 200 * MS);
        assert_eq!(window.limit(), 4, "after that lag, a late echo cuts again");
    }

    #[test]
    fn never_shrinks_below_one() {
        let now = Instant::now();
        let mut window = IntakeWindow::new(64, now);
        window.observe(MS, now);
        for i in 1..10 {
            window.observe(Duration::from_secs(1), now + Duration::from_secs(2 * i));
        }
        assert_eq!(window.limit(), 1);
    }

    #[test]
    fn lateness_is_relative_to_the_recent_smallest_lag() {
        let start = Instant::now();
        let mut window = IntakeWindow::new(64, start);
        // An API server whose echoes normally take 40 ms: 40 ms is on time.
        for _ in 0..10 {
            window.observe(40 * MS, start);
        }
        assert_eq!(window.tolerance(), Some(80 * MS + LAG_MARGIN));
        assert!(window.limit() > 1, "normal echoes grow the window");
        // A quick echo lowers the baseline; it is forgotten after two windows.
        window.observe(MS, start);
        assert_eq!(window.tolerance(), Some(2 * MS + LAG_MARGIN));
        window.observe(40 * MS, start + BASELINE_WINDOW + MS);
        assert_eq!(
            window.tolerance(),
            Some(2 * MS + LAG_MARGIN),
            "still in the previous window"
        );
        let later = start + BASELINE_WINDOW * 3 + 2 * MS;
        window.observe(40 * MS, later);
        assert_eq!(window.tolerance(), Some(80 * MS + LAG_MARGIN));
    }

    #[test]
    fn an_echo_is_the_written_version_of_the_same_object() {
        let now = Instant::now();
        let mut echoes = Echoes::default();
        echoes.wrote("a", "10".to_string(), now);
        assert_eq!(echoes.seen(&"b", "10", now + MS), None, "another object");
        assert_eq!(echoes.seen(&"a", "9", now + MS), None, "an older event");
        assert_eq!(echoes.seen(&"a", "10", now + 5 * MS), Some(5 * MS));
        assert_eq!(echoes.seen(&"a", "10", now + 6 * MS), None, "echoed once");
    }

    #[test]
    fn a_later_write_replaces_the_one_awaited_and_old_ones_expire() {
        let now = Instant::now();
        let mut echoes = Echoes::default();
        echoes.wrote("a", "10".to_string(), now);
        echoes.wrote("a", "12".to_string(), now + MS);
        assert_eq!(echoes.seen(&"a", "10", now + 2 * MS), None);
        assert_eq!(echoes.seen(&"a", "12", now + 3 * MS), Some(2 * MS));

        echoes.wrote("b", "20".to_string(), now);
        assert_eq!(echoes.seen(&"b", "21", now + ECHO_EXPIRY + MS), None);
        assert_eq!(
            echoes.seen(&"b", "20", now + ECHO_EXPIRY + 2 * MS),
            None,
            "expired"
        );

        echoes.wrote("c", "30".to_string(), now);
        echoes.forget(&"c");
        assert_eq!(echoes.seen(&"c", "30", now + MS), None);
    }
}
