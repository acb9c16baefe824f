//! The built-in step queue, `--max-running-steps N`: at most N step Jobs run at once across every
//! workflow the operator watches (every namespace), the waiting steps started in `spec.priority`
//! order (higher first, then the older workflow: creationTimestamp, then namespace and name).
//!
//! The count comes from the Jobs that exist, never from memory alone: [`StepQueue::watch`] keeps
//! a watch of the operator's step Jobs (label `workflow.crd.com/workflow`) and counts those that
//! run (not finished, not suspended). A Job admitted but not yet shown by that watch is
//! *reserved* (by namespace and name) until the watch shows it, for at most
//! [`RESERVATION_TTL`]. Counting and reserving happen under one lock ([`StepQueue::admit`]), so
//! two workflows' passes racing for the last slot cannot both take it; the Job creates
//! themselves run outside the lock, in parallel. After a restart or a leader change
//! nothing is admitted before the watch's first listing is in, so Jobs created by the previous
//! process count.
//!
//! A workflow whose steps must wait registers as a waiter with its rank and how many steps it
//! wants; a pass is granted only the room that the waiters ranked ahead of it do not want. When
//! room frees (a Job finishes or goes), the waiters at the head are marked to be woken, and the
//! operator's `admitted` timer re-plans exactly those ([`StepQueue::take_wake`]). The waiters'
//! wants are refreshed at every pass of their workflow (at least every second, by the timeout
//! timer), so one that no longer waits stops holding the others back.
//!
//! Workflows with `spec.queueName` are left to Kueue: their Jobs are neither counted nor held.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs::{LABEL_QUEUE_NAME, LABEL_WORKFLOW};
use workflow_operator_core::plan::{Action, Plan};

/// How long an admitted Job the watch does not show counts as running: longer than the watch
/// lags under load; a create that failed without telling (the process died) frees its slot then.
pub const RESERVATION_TTL: Duration = Duration::from_secs(30);

/// How often the operator looks for woken workflows (the `admitted` timer): the most a freed
/// slot waits for the next workflow in line, besides the time to plan it.
pub const WAKE_CHECK: Duration = Duration::from_millis(20);

/// A Job by namespace and name.
pub type JobKey = (String, String);

/// Where a workflow stands in line: higher `spec.priority` first, then the older workflow,
/// then by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rank {
    priority: Reverse<i32>,
    created: Option<Timestamp>,
    namespace: String,
    name: String,
}

impl Rank {
    pub(super) fn of(workflow: &WorkFlow) -> Rank {
        Rank {
            priority: Reverse(workflow.spec.priority),
            created: workflow.metadata.creation_timestamp.as_ref().map(|t| t.0),
            namespace: workflow.namespace().unwrap_or_default(),
            name: workflow.name_any(),
        }
    }
}

/// What one pass was granted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The wanted Jobs that may be created now, in the order asked.
    pub jobs: Vec<JobKey>,
    /// How many are held back.
    pub held: usize,
    /// Step Jobs running, and reserved, when it was decided (for the held steps' message).
    pub running: usize,
}

/// The gate. One per operator process; shared by every handler.
pub struct StepQueue {
    limit: usize,
    state: Mutex<State>,
    synced: watch::Receiver<bool>,
    set_synced: watch::Sender<bool>,
    metrics: Option<crate::telemetry::metrics::Metrics>,
}

#[derive(Default)]
struct State {
    /// Every step Job the watch shows, and whether it runs (not finished, not suspended).
    jobs: HashMap<JobKey, bool>,
    running: usize,
    /// A re-listing of the watch being built, swapped in when complete.
    relisting: Option<HashMap<JobKey, bool>>,
    /// Admitted Jobs the watch does not show yet, with when they were admitted.
    reserved: HashMap<JobKey, Instant>,
    /// Workflows with steps held back, in line, with how many they want and their uid.
    waiting: BTreeMap<Rank, (usize, String)>,
    rank_of: HashMap<String, Rank>,
    /// Uids of waiting workflows to plan again now.
    woken: HashSet<String>,
    /// When each held Job was first held, for the queue wait metric.
    held_since: HashMap<JobKey, Instant>,
}

impl State {
    fn occupied(&self) -> usize {
        self.running + self.reserved.len()
    }

    fn set(&mut self, key: JobKey, running: bool) {
        self.reserved.remove(&key);
        if let Some(was) = self.jobs.insert(key, running) {
            self.running -= usize::from(was);
        }
        self.running += usize::from(running);
    }

    fn remove(&mut self, key: &JobKey) {
        if let Some(was) = self.jobs.remove(key) {
            self.running -= usize::from(was);
        }
    }

    fn expire_reservations(&mut self) {
        self.reserved.retain(|_, at| at.elapsed() < RESERVATION_TTL);
    }

    /// Marks the waiters at the head of the line to be woken, as many as the free room serves.
    fn wake(&mut self, limit: usize) {
        let mut free = limit.saturating_sub(self.occupied());
        for (wants, uid) in self.waiting.values() {
            if free == 0 {
                break;
            }
            self.woken.insert(uid.clone());
            free = free.saturating_sub(*wants);
        }
    }

    fn waiting_steps(&self) -> usize {
        self.waiting.values().map(|(wants, _)| wants).sum()
    }
}

impl StepQueue {
    /// A gate of `limit` running steps (at least 1). Nothing is admitted before [`watch`] has
    /// listed the Jobs.
    ///
    /// [`watch`]: StepQueue::watch
    pub fn new(limit: usize, metrics: Option<crate::telemetry::metrics::Metrics>) -> Arc<Self> {
        let (set_synced, synced) = watch::channel(false);
        Arc::new(StepQueue {
            limit: limit.max(1),
            state: Mutex::default(),
            synced,
            set_synced,
            metrics,
        })
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether a workflow's steps go through this gate (not Kueue's).
    pub fn governs(workflow: &WorkFlow) -> bool {
        workflow.spec.queue_name.is_none()
    }

    /// Decides which of `wanted` (the Jobs a pass of `workflow` is about to create, `uid` its
    /// uid) may be created now, reserving them; the rest are held and the workflow waits in
    /// line. A Job the watch shows already, or reserved already, is admitted without taking a
    /// slot (its create is answered 409, or it is on its way). Waits for the watch's first
    /// listing.
    pub async fn admit(&self, workflow: &WorkFlow, uid: &str, wanted: &[JobKey]) -> Admitted {
        let mut synced = self.synced.clone();
        // Only at start-up, for the time the first listing takes; the sender lives as long as
        // `self`, so this returns.
        let _ = synced.wait_for(|synced| *synced).await;
        let rank = Rank::of(workflow);
        let mut state = self.state.lock().expect("step queue lock");
        state.expire_reservations();
        state.woken.remove(uid);
        if let Some(old) = state.rank_of.remove(uid) {
            state.waiting.remove(&old);
        }
        let ahead: usize = state
            .waiting
            .range(..&rank)
            .map(|(_, (wants, _))| wants)
            .sum();
        let mut room = self
            .limit
            .saturating_sub(state.occupied())
            .saturating_sub(ahead);
        let mut admitted = Admitted {
            running: state.occupied(),
            ..Admitted::default()
        };
        let now = Instant::now();
        for key in wanted {
            if state.jobs.contains_key(key) || state.reserved.contains_key(key) {
                admitted.jobs.push(key.clone());
            } else if room > 0 {
                room -= 1;
                state.reserved.insert(key.clone(), now);
                if let (Some(since), Some(metrics)) = (state.held_since.remove(key), &self.metrics)
                {
                    metrics.queue_wait(BUILTIN_QUEUE, since.elapsed());
                }
                admitted.jobs.push(key.clone());
            } else {
                state.held_since.entry(key.clone()).or_insert(now);
                admitted.held += 1;
            }
        }
        if admitted.held > 0 {
            state
                .waiting
                .insert(rank.clone(), (admitted.held, uid.to_string()));
            state.rank_of.insert(uid.to_string(), rank);
        }
        self.report(&state);
        admitted
    }

    /// A Job admitted by [`admit`](StepQueue::admit) that was not created (its create failed):
    /// its slot is free again.
    pub fn release(&self, key: &JobKey) {
        let mut state = self.state.lock().expect("step queue lock");
        if state.reserved.remove(key).is_some() {
            state.wake(self.limit);
        }
    }

    /// Takes `workflow` out of line (deleted or finished), and what it waited for.
    pub fn forget(&self, uid: &str) {
        let mut state = self.state.lock().expect("step queue lock");
        state.woken.remove(uid);
        if let Some(rank) = state.rank_of.remove(uid) {
            state.waiting.remove(&rank);
            state.wake(self.limit);
            self.report(&state);
        }
    }

    /// Whether any workflow is woken and has not asked yet: the `admitted` timer's gate, so
    /// that a tick with none asks no workflow.
    pub fn any_woken(&self) -> bool {
        !self.state.lock().expect("step queue lock").woken.is_empty()
    }

    /// Whether `workflow` was woken since it last asked, and no longer is: the `admitted`
    /// timer's predicate, so each wake plans the workflow once.
    pub fn take_wake(&self, workflow: &WorkFlow) -> bool {
        let uid = workflow.metadata.uid.as_deref().unwrap_or_default();
        let mut state = self.state.lock().expect("step queue lock");
        !state.woken.is_empty() && state.woken.remove(uid)
    }

    /// The message of a held step.
    pub fn message(&self, running: usize) -> String {
        format!(
            "waiting: {} of {} running steps (--max-running-steps)",
            running.min(self.limit),
            self.limit
        )
    }

    fn report(&self, state: &State) {
        if let Some(metrics) = &self.metrics {
            metrics.set_queued_steps(BUILTIN_QUEUE, state.waiting_steps() as i64);
        }
    }

    /// Feeds the gate from a watch of the operator's step Jobs (all namespaces, or
    /// `namespace`), except Kueue's (label `kueue.x-k8s.io/queue-name`), until dropped.
    pub async fn watch(self: Arc<Self>, client: Client, namespace: Option<String>) {
        let api: Api<JobSummary> = match &namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        };
        let config =
            watcher::Config::default().labels(&format!("{LABEL_WORKFLOW},!{LABEL_QUEUE_NAME}"));
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => self.observe(event),
                Err(error) => tracing::warn!(%error, "step queue: job watch failed; retrying"),
            }
        }
    }

    fn observe(&self, event: Event<JobSummary>) {
        let key = |job: &JobSummary| (job.namespace().unwrap_or_default(), job.name_any());
        let mut state = self.state.lock().expect("step queue lock");
        let freed_before = state.occupied();
        match event {
            Event::Init => state.relisting = Some(HashMap::new()),
            Event::InitApply(job) => {
                let runs = runs(&job);
                if let Some(relisting) = state.relisting.as_mut() {
                    relisting.insert(key(&job), runs);
                }
            }
            Event::InitDone => {
                if let Some(listed) = state.relisting.take() {
                    for key in listed.keys() {
                        state.reserved.remove(key);
                    }
                    state.running = listed.values().filter(|r| **r).count();
                    state.jobs = listed;
                }
                self.set_synced.send_replace(true);
                state.wake(self.limit);
            }
            Event::Apply(job) => state.set(key(&job), runs(&job)),
            Event::Delete(job) => state.remove(&key(&job)),
        }
        if state.occupied() < freed_before {
            state.wake(self.limit);
        }
    }
}

/// The `queue` label value of the built-in queue's metrics.
pub const BUILTIN_QUEUE: &str = "builtin";

/// Whether a step Job occupies a slot: not finished and not suspended.
fn runs(job: &JobSummary) -> bool {
    let ended = job.status.as_ref().is_some_and(|s| s.ended.is_some());
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    !ended && !suspended
}

/// The Jobs `plan` creates, by namespace and name.
pub fn creates(plan: &Plan, namespace: &str) -> Vec<JobKey> {
    plan.actions
        .iter()
        .filter_map(|action| match action {
            Action::CreateJob { job_name, .. } => Some((namespace.to_string(), job_name.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn key(name: &str) -> JobKey {
        ("default".into(), name.into())
    }

    fn keys(names: &[&str]) -> Vec<JobKey> {
        names.iter().map(|n| key(n)).collect()
    }

    fn workflow(name: &str, priority: i32, created_secs: i64) -> WorkFlow {
        let mut wf = WorkFlow::test(name)
            .step("a", &[])
            .priority(priority)
            .build();
        wf.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created_secs).unwrap()));
        wf.metadata.uid = Some(name.into());
        wf
    }

    fn synced(limit: usize) -> Arc<StepQueue> {
        let gate = StepQueue::new(limit, None);
        gate.observe(Event::Init);
        gate.observe(Event::InitDone);
        gate
    }

    fn job(name: &str, running: bool) -> JobSummary {
        use workflow_operator_core::job_summary::{JobEnd, JobSummaryStatus};
        JobSummary {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            status: Some(JobSummaryStatus {
                ended: (!running).then_some(JobEnd::Complete),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn admits_up_to_the_limit_counting_reserved_and_watched_jobs() {
        let gate = synced(4);
        gate.observe(Event::Apply(job("x", true)));
        let w = workflow("w", 0, 1);
        let admitted = gate.admit(&w, "w", &keys(&["a", "b", "c", "d", "e"])).await;
        assert_eq!(admitted.jobs, keys(&["a", "b", "c"]));
        assert_eq!(admitted.held, 2);
        // Reserved Jobs count until the watch shows them; then as what they are.
        let again = gate.admit(&w, "w", &keys(&["a", "d"])).await;
        assert_eq!(again.jobs, keys(&["a"]));
        gate.observe(Event::Apply(job("a", false)));
        let later = gate.admit(&w, "w", &keys(&["d", "e"])).await;
        assert_eq!(later.jobs, keys(&["d"]));
    }

    #[tokio::test]
    async fn room_goes_to_the_waiters_ahead_and_wakes_them() {
        let gate = synced(1);
        let (old, new, urgent) = (
            workflow("old", 0, 1),
            workflow("new", 0, 2),
            workflow("urgent", 5, 3),
        );
        assert_eq!(gate.admit(&old, "old", &keys(&["o1"])).await.jobs.len(), 1);
        assert_eq!(gate.admit(&new, "new", &keys(&["n1"])).await.held, 1);
        assert_eq!(gate.admit(&urgent, "urgent", &keys(&["u1"])).await.held, 1);
        gate.observe(Event::Apply(job("o1", true)));
        // o1 finishes: the room is the urgent workflow's, submitted last but of higher priority.
        gate.observe(Event::Apply(job("o1", false)));
        assert!(gate.take_wake(&urgent));
        assert!(!gate.take_wake(&urgent), "one wake, one pass");
        assert!(!gate.take_wake(&new));
        assert_eq!(gate.admit(&new, "new", &keys(&["n1"])).await.held, 1);
        assert_eq!(
            gate.admit(&urgent, "urgent", &keys(&["u1"])).await.jobs,
            keys(&["u1"])
        );
    }

    #[tokio::test]
    async fn a_forgotten_waiter_no_longer_holds_the_line() {
        let gate = synced(1);
        gate.observe(Event::Apply(job("x", true)));
        let (a, b) = (workflow("a", 0, 1), workflow("b", 0, 2));
        assert_eq!(gate.admit(&a, "a", &keys(&["a1"])).await.held, 1);
        assert_eq!(gate.admit(&b, "b", &keys(&["b1"])).await.held, 1);
        gate.observe(Event::Delete(job("x", true)));
        assert_eq!(gate.admit(&b, "b", &keys(&["b1"])).await.held, 1);
        gate.forget("a");
        assert!(gate.take_wake(&b));
        assert_eq!(
            gate.admit(&b, "b", &keys(&["b1"])).await.jobs,
            keys(&["b1"])
        );
    }

    #[tokio::test]
    async fn a_relisting_replaces_what_the_watch_missed() {
        let gate = synced(2);
        gate.observe(Event::Apply(job("gone", true)));
        gate.observe(Event::Apply(job("kept", true)));
        // The watch broke; "gone" was deleted meanwhile.
        gate.observe(Event::Init);
        gate.observe(Event::InitApply(job("kept", true)));
        gate.observe(Event::InitDone);
        let w = workflow("w", 0, 1);
        assert_eq!(
            gate.admit(&w, "w", &keys(&["a", "b"])).await.jobs,
            keys(&["a"])
        );
    }
}
