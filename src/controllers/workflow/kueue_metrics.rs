//! The queue metrics of the Kueue path: `queued_steps{queue}` and
//! `queue_wait{queue}` for workflows with `spec.queueName`, as [`super::step_queue`] reports them
//! for the built-in queue (`queue="builtin"`).
//!
//! Kueue admits a Job by unsuspending it and preempts it by suspending it again
//! (<https://kueue.sigs.k8s.io/docs/tasks/run/jobs/>,
//! <https://kueue.sigs.k8s.io/docs/concepts/preemption/>), so a step Job labelled
//! `kueue.x-k8s.io/queue-name` is queued while it is suspended and not finished. The counts come
//! from a watch of those Jobs ([`KueueQueueMetrics::watch`]; a relisting replaces them, so they
//! hold across restarts). A step's wait is observed when the watch sees its Job go from queued to
//! admitted: from the moment it was queued (the Job's creation, or its `Suspended` condition
//! turning true on a preemption) to that event; a wait that began before this process saw the
//! Job queued is not observed (a histogram counts what its own process saw).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};

use crate::telemetry::metrics::Metrics;
use workflow_operator_core::jobs::{LABEL_QUEUE_NAME, LABEL_WORKFLOW};

/// A Kueue step Job as the metrics need it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    queue: String,
    /// Since when it waits, while it is queued.
    queued_since: Option<Timestamp>,
}

/// The Kueue step Jobs by namespace and name, and the metrics they feed.
pub struct KueueQueueMetrics {
    metrics: Metrics,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    jobs: HashMap<(String, String), Seen>,
    /// During a relisting: what it has listed so far.
    relisting: Option<HashMap<(String, String), Seen>>,
    /// Queues reported before, so one that emptied is reported as 0.
    queues: Vec<String>,
}

impl KueueQueueMetrics {
    pub fn new(metrics: Metrics) -> Arc<Self> {
        Arc::new(KueueQueueMetrics {
            metrics,
            state: Mutex::new(State::default()),
        })
    }

    /// Watches the operator's step Jobs that Kueue queues (in `namespace`, or everywhere), until
    /// dropped.
    pub async fn watch(self: Arc<Self>, client: Client, namespace: Option<String>) {
        let api: Api<Job> = match &namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        };
        let config =
            watcher::Config::default().labels(&format!("{LABEL_WORKFLOW},{LABEL_QUEUE_NAME}"));
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => self.observe(event, Timestamp::now()),
                Err(error) => tracing::warn!(%error, "kueue metrics: job watch failed; retrying"),
            }
        }
    }

    /// Takes in one event of the watch, seen at `now`.
    fn observe(&self, event: Event<Job>, now: Timestamp) {
        let key = |job: &Job| (job.namespace().unwrap_or_default(), job.name_any());
        let mut state = self.state.lock().expect("kueue metrics lock");
        match event {
            Event::Init => state.relisting = Some(HashMap::new()),
            Event::InitApply(job) => {
                if let (Some(seen), Some(relisting)) = (seen(&job), state.relisting.as_mut()) {
                    relisting.insert(key(&job), seen);
                }
            }
            Event::InitDone => {
                if let Some(listed) = state.relisting.take() {
                    state.jobs = listed;
                }
            }
            Event::Apply(job) => {
                let key = key(&job);
                match seen(&job) {
                    Some(now_seen) => {
                        let before = state.jobs.insert(key, now_seen.clone());
                        let was_queued = before.and_then(|b| b.queued_since);
                        // Admitted: unsuspended (a Job that finished while queued was not).
                        let admitted = job.spec.as_ref().and_then(|s| s.suspend) != Some(true);
                        if let (Some(since), true) = (was_queued, admitted) {
                            let waited = now.duration_since(since);
                            let waited = Duration::try_from(waited).unwrap_or_default();
                            self.metrics.queue_wait(&now_seen.queue, waited);
                        }
                    }
                    None => {
                        state.jobs.remove(&key);
                    }
                }
            }
            Event::Delete(job) => {
                state.jobs.remove(&key(&job));
            }
        }
        self.report(&mut state);
    }

    fn report(&self, state: &mut State) {
        let mut counts: HashMap<&str, i64> = state
            .queues
            .iter()
            .map(|queue| (queue.as_str(), 0))
            .collect();
        for seen in state.jobs.values() {
            let count = counts.entry(seen.queue.as_str()).or_default();
            *count += i64::from(seen.queued_since.is_some());
        }
        for (queue, count) in &counts {
            self.metrics.set_queued_steps(queue, *count);
        }
        let mut queues: Vec<String> = counts.keys().map(|q| q.to_string()).collect();
        queues.sort_unstable();
        state.queues = queues;
    }
}

/// A Job of Kueue's queue as the metrics see it: its queue, and since when it waits if it is
/// suspended and not finished; `None` without the queue label.
fn seen(job: &Job) -> Option<Seen> {
    let queue = job.labels().get(LABEL_QUEUE_NAME)?.clone();
    let status = job.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
    let is_true = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
    };
    let finished = is_true("Complete").is_some() || is_true("Failed").is_some();
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    let queued_since = (suspended && !finished).then(|| {
        // The Job controller sets `Suspended` true when it stops a Job that ran (a
        // preemption); a Job created suspended may not have it yet: its wait starts at creation.
        is_true("Suspended")
            .and_then(|c| c.last_transition_time.as_ref())
            .or(job.metadata.creation_timestamp.as_ref())
            .map_or_else(Timestamp::now, |time| time.0)
    });
    Some(Seen {
        queue,
        queued_since,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, suspended: bool, conditions: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {LABEL_WORKFLOW: "wf", LABEL_QUEUE_NAME: "team-a"}},
            "spec": {"suspend": suspended, "template": {}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap()
    }

    /// The metric lines of the queue `team-a` in the encoded metrics.
    fn lines(metrics: &Metrics) -> Vec<String> {
        metrics
            .encode()
            .lines()
            .filter(|l| l.contains("queue=\"team-a\""))
            .filter(|l| !l.contains("_bucket"))
            .map(|l| {
                l.split_once("workflow_operator_")
                    .map_or(l, |(_, m)| m)
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn a_suspended_job_is_queued_until_admitted_and_its_wait_is_observed_then() {
        let metrics = Metrics::new();
        let queues = KueueQueueMetrics::new(metrics.clone());
        queues.observe(Event::Init, at(0));
        queues.observe(Event::InitApply(job("a", true, json!([]))), at(0));
        queues.observe(Event::InitDone, at(0));
        queues.observe(Event::Apply(job("b", true, json!([]))), at(1));
        assert!(
            lines(&metrics).contains(&r#"queued_steps{queue="team-a"} 2"#.to_string()),
            "{:?}",
            lines(&metrics)
        );

        // Kueue admits a: one queued, one wait observed (7 s since its creation).
        queues.observe(Event::Apply(job("a", false, json!([]))), at(7));
        let seen = lines(&metrics);
        assert!(
            seen.contains(&r#"queued_steps{queue="team-a"} 1"#.to_string()),
            "{seen:?}"
        );
        assert!(
            seen.contains(&r#"queue_wait_seconds_count{queue="team-a"} 1"#.to_string()),
            "{seen:?}"
        );
        assert!(
            seen.contains(&r#"queue_wait_seconds_sum{queue="team-a"} 7.0"#.to_string()),
            "{seen:?}"
        );

        // Preempted, a waits again (from its Suspended condition); b is deleted while queued.
        let preempted = json!([{"type": "Suspended", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:09Z"}]);
        queues.observe(Event::Apply(job("a", true, preempted)), at(9));
        queues.observe(Event::Delete(job("b", true, json!([]))), at(10));
        let seen = lines(&metrics);
        assert!(
            seen.contains(&r#"queued_steps{queue="team-a"} 1"#.to_string()),
            "{seen:?}"
        );

        // A finished Job is not queued, even suspended; the emptied queue reads 0.
        let done = json!([{"type": "Complete", "status": "True"}]);
        queues.observe(Event::Apply(job("a", true, done)), at(11));
        let seen = lines(&metrics);
        assert!(
            seen.contains(&r#"queued_steps{queue="team-a"} 0"#.to_string()),
            "{seen:?}"
        );
        assert!(
            seen.contains(&r#"queue_wait_seconds_count{queue="team-a"} 1"#.to_string()),
            "{seen:?}"
        );
    }
}
