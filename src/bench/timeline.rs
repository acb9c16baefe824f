//! What a benchmark sees happen, and when: the instants at which each step's Job was created and
//! became `Complete`, and at which each workflow became terminal, read from the control plane's
//! in-process change stream ([`kube_devcluster::store::Store::subscribe`]) on a thread of its
//! own. [`super::run`] starts an [`Observer`] before submitting and turns its [`Timeline`] into
//! dispatch latencies at the end.
//!
//! Instants are the store's own commit instants ([`WatchEvent::committed_at`]): API timestamps
//! would do only whole seconds, and the time the observer gets to a change depends on how its
//! thread is scheduled (it lagged by up to 9 ms on a busy 2-core machine).
//!
//! Jobs are matched to their workflow and step without knowing which operator made them: the
//! workflow is the Job's `WorkFlow` owner reference (else the `workflow.crd.com/workflow`
//! annotation), the step is the `workflow.crd.com/step` annotation or label (else the last
//! `-`-separated part of the Job's name that is a bench step name, `s<N>`); an item `K` of a
//! step that fans out (label `workflow.crd.com/item`) is bench step `N + K`
//! ([`super::shape::Shape::Items`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::sync::watch;

use kube_devcluster::store::{EventType, WatchEvent};

use super::changes::ChangeReader;
use super::wait_order::{self, Rank, WaitOrder};

const WORKFLOW_GROUP: &str = "workflow.crd.com";
const STEP_KEY: &str = "workflow.crd.com/step";
const WORKFLOW_KEY: &str = "workflow.crd.com/workflow";
const ITEM_KEY: &str = "workflow.crd.com/item";
const LOCK_KEY: &str = "workflow.crd.com/lock";

/// One change the benchmark cares about. Workflows are `namespace/name`; steps are indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    JobCreated {
        workflow: String,
        step: usize,
    },
    JobCompleted {
        workflow: String,
        step: usize,
    },
    WorkflowTerminal {
        workflow: String,
        completed: bool,
    },
    /// A workflow was created: its place in a lock's line ([`super::wait_order::Rank`]).
    WorkflowCreated {
        workflow: String,
        rank: Rank,
    },
    /// A workflow's lock Lease was created: it took a lock.
    LockTaken {
        workflow: String,
    },
}

/// What a change to an object means for the benchmark, if anything. `group`/`resource` name
/// the object's kind as the store does (`batch`/`jobs`).
pub fn classify(
    group: &str,
    resource: &str,
    event: EventType,
    object: &Value,
) -> Option<Observation> {
    match (group, resource) {
        ("batch", "jobs") => {
            let (workflow, step) = job_identity(object)?;
            match event {
                EventType::Added => Some(Observation::JobCreated { workflow, step }),
                EventType::Modified if job_complete(object) => {
                    Some(Observation::JobCompleted { workflow, step })
                }
                _ => None,
            }
        }
        (WORKFLOW_GROUP, "workflows") if event == EventType::Added => {
            let name = object.pointer("/metadata/name")?.as_str()?;
            let priority = object.pointer("/spec/priority").and_then(Value::as_i64);
            let created = object.pointer("/metadata/creationTimestamp")?.as_str()?;
            let workflow = key(object, name);
            Some(Observation::WorkflowCreated {
                rank: (
                    Reverse(priority.unwrap_or(0)),
                    created.to_string(),
                    workflow.clone(),
                ),
                workflow,
            })
        }
        ("coordination.k8s.io", "leases") if event == EventType::Added => {
            object.pointer("/metadata/labels")?.get(LOCK_KEY)?;
            let owner = (object
                .pointer("/metadata/ownerReferences")?
                .as_array()?
                .iter())
            .find(|o| o.get("kind").and_then(Value::as_str) == Some("WorkFlow"))?;
            Some(Observation::LockTaken {
                workflow: key(object, owner.get("name")?.as_str()?),
            })
        }
        (WORKFLOW_GROUP, "workflows") if event != EventType::Deleted => {
            let status = object.get("status")?;
            let completed = match status.get("workflow-status")?.as_str()? {
                "Completed" => true,
                "Failed" => false,
                _ => return None,
            };
            // A terminal status written for an older spec is stale (operators that do not write
            // observedGeneration are taken at their word).
            let observed = status.get("observedGeneration").and_then(Value::as_i64);
            let generation = object
                .pointer("/metadata/generation")
                .and_then(Value::as_i64);
            if observed.is_some() && observed != generation {
                return None;
            }
            Some(Observation::WorkflowTerminal {
                workflow: key(object, object.pointer("/metadata/name")?.as_str()?),
                completed,
            })
        }
        _ => None,
    }
}

/// The index of bench step `s<N>`.
pub fn parse_step(name: &str) -> Option<usize> {
    let digits = name.strip_prefix('s')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn key(object: &Value, name: &str) -> String {
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{namespace}/{name}")
}

fn job_identity(job: &Value) -> Option<(String, usize)> {
    let meta = job.get("metadata")?;
    let text = |map: &str, k: &str| meta.get(map)?.get(k)?.as_str();
    let owner = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some("WorkFlow"))
        .and_then(|o| o.get("name")?.as_str());
    let workflow = owner.or_else(|| text("annotations", WORKFLOW_KEY))?;
    let step = text("annotations", STEP_KEY)
        .or_else(|| text("labels", STEP_KEY))
        .and_then(parse_step)
        .or_else(|| {
            let name = meta.get("name")?.as_str()?;
            name.rsplit('-').find_map(parse_step)
        })?;
    let item = text("labels", ITEM_KEY).map_or(Some(0), |item| item.parse().ok())?;
    Some((key(job, workflow), step + item))
}

fn job_complete(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Complete")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The first instant of each observation.
#[derive(Debug, Default)]
pub struct Timeline {
    created: HashMap<(String, usize), Instant>,
    completed: HashMap<(String, usize), Instant>,
    terminal: HashMap<String, (Instant, bool)>,
    /// When each write the store committed was, by resource (`jobs`, `pods`,
    /// `workflows.workflow.crd.com`, ...): every create, update and delete, by any client or
    /// in-process controller.
    writes: HashMap<String, Vec<Instant>>,
    /// Each workflow's rank in a lock's line.
    ranks: HashMap<String, Rank>,
    /// The workflows in the order they first took a lock.
    taken: Vec<String>,
    taken_set: HashSet<String>,
}

/// Dispatch latencies: for each step with dependencies, from the moment its last dependency's
/// Job became `Complete` to the moment its own Job was created.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Dispatches {
    pub samples: Vec<Duration>,
    /// Steps whose Job exists but a dependency's completion was never seen.
    pub unmatched: usize,
    /// Steps whose Job was created before all their dependencies completed (an operator bug).
    pub early: usize,
}

impl Timeline {
    /// Counts one write of `resource` (of `group`) committed at `at`.
    pub fn count_write(&mut self, group: &str, resource: &str, at: Instant) {
        let key = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        self.writes.entry(key).or_default().push(at);
    }

    /// The writes committed from `from` to `to`, by resource.
    pub fn writes_between(&self, from: Instant, to: Instant) -> BTreeMap<String, u64> {
        self.writes
            .iter()
            .map(|(resource, at)| {
                let n = at.iter().filter(|at| (from..=to).contains(*at)).count();
                (resource.clone(), n as u64)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Records `observation` at `at`, unless the same thing was seen before.
    pub fn record(&mut self, observation: Observation, at: Instant) {
        match observation {
            Observation::JobCreated { workflow, step } => {
                self.created.entry((workflow, step)).or_insert(at);
            }
            Observation::JobCompleted { workflow, step } => {
                self.completed.entry((workflow, step)).or_insert(at);
            }
            Observation::WorkflowTerminal {
                workflow,
                completed,
            } => {
                self.terminal.entry(workflow).or_insert((at, completed));
            }
            Observation::WorkflowCreated { workflow, rank } => {
                self.ranks.insert(workflow, rank);
            }
            Observation::LockTaken { workflow } => {
                if self.taken_set.insert(workflow.clone()) {
                    self.taken.push(workflow);
                }
            }
        }
    }

    /// How far the order in which workflows took their first lock is from their ranks; `None`
    /// when no workflow took one.
    pub fn wait_order(&self) -> Option<WaitOrder> {
        (!self.taken.is_empty()).then(|| wait_order::measure(&self.taken, &self.ranks))
    }

    pub fn steps_completed(&self) -> usize {
        self.completed.len()
    }

    pub fn jobs_created(&self) -> usize {
        self.created.len()
    }

    /// Workflows that reached a terminal phase: (completed, failed).
    pub fn outcomes(&self) -> (usize, usize) {
        let completed = self.terminal.values().filter(|(_, ok)| *ok).count();
        (completed, self.terminal.len() - completed)
    }

    /// When the last workflow became terminal.
    pub fn last_terminal(&self) -> Option<Instant> {
        self.terminal.values().map(|(at, _)| *at).max()
    }

    /// The dispatch latency of every non-root step whose Job was created; `dependencies[i]` are
    /// the steps step `i` depends on (the same for every workflow of a run).
    pub fn dispatches(&self, dependencies: &[Vec<usize>]) -> Dispatches {
        let mut out = Dispatches::default();
        for ((workflow, step), &created) in &self.created {
            let Some(deps) = dependencies.get(*step).filter(|d| !d.is_empty()) else {
                continue;
            };
            let ready = deps
                .iter()
                .map(|&d| self.completed.get(&(workflow.clone(), d)).copied())
                .collect::<Option<Vec<Instant>>>()
                .and_then(|instants| instants.into_iter().max());
            match ready {
                None => out.unmatched += 1,
                Some(ready) if created < ready => out.early += 1,
                Some(ready) => out.samples.push(created - ready),
            }
        }
        out
    }
}

/// Percentiles of a set of durations, in milliseconds (nearest-rank).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub count: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let millis = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        let rank = |p: f64| {
            let index = (p / 100.0 * sorted.len() as f64).ceil() as usize;
            millis(sorted[index.clamp(1, sorted.len()) - 1])
        };
        let total: Duration = sorted.iter().sum();
        Self {
            count: sorted.len(),
            p50: rank(50.0),
            p95: rank(95.0),
            p99: rank(99.0),
            max: millis(sorted[sorted.len() - 1]),
            mean: millis(total / sorted.len() as u32),
        }
    }
}

/// Progress visible while the observer runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub terminal: usize,
    pub steps_completed: usize,
}

/// The observer thread: records a [`Timeline`] from the store's change stream until stopped.
pub struct Observer {
    reader: ChangeReader<Timeline>,
    progress: watch::Receiver<Progress>,
}

impl Observer {
    /// Starts observing `changes` (a fresh [`kube_devcluster::store::Store::subscribe`]) on a
    /// thread of its own ([`ChangeReader`]).
    ///
    /// # Panics
    /// When the thread or its runtime cannot be started.
    pub fn start(changes: broadcast::Receiver<Arc<WatchEvent>>) -> Self {
        let (progress_tx, progress) = watch::channel(Progress::default());
        let record = move |timeline: &mut Timeline, change: &WatchEvent| {
            timeline.count_write(&change.gr.group, &change.gr.resource, change.committed_at);
            let observation = classify(
                &change.gr.group,
                &change.gr.resource,
                change.event_type,
                &change.object.value,
            );
            if let Some(observation) = observation {
                let counts = matches!(
                    observation,
                    Observation::JobCompleted { .. } | Observation::WorkflowTerminal { .. }
                );
                timeline.record(observation, change.committed_at);
                if counts {
                    let (completed, failed) = timeline.outcomes();
                    progress_tx.send_replace(Progress {
                        terminal: completed + failed,
                        steps_completed: timeline.steps_completed(),
                    });
                }
            }
        };
        let reader = ChangeReader::start("bench-observer", changes, Timeline::default(), record);
        Self { reader, progress }
    }

    /// Watches progress (workflows terminal, steps completed).
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.clone()
    }

    /// Stops observing; returns what was seen and how many changes were missed because the
    /// observer fell more than the channel's capacity behind.
    pub fn finish(self) -> (Timeline, u64) {
        self.reader.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(name: &str, meta: Value, conditions: Value) -> Value {
        let mut metadata = json!({"name": name, "namespace": "ns"});
        metadata
            .as_object_mut()
            .unwrap()
            .extend(meta.as_object().unwrap().clone());
        json!({"metadata": metadata, "status": {"conditions": conditions}})
    }

    /// One row of the classification table.
    struct Case {
        what: &'static str,
        kind: (&'static str, &'static str),
        event: EventType,
        object: Value,
        want: Option<Observation>,
    }

    impl Case {
        fn new(
            what: &'static str,
            kind: (&'static str, &'static str),
            event: EventType,
            object: Value,
            want: Option<Observation>,
        ) -> Self {
            Self {
                what,
                kind,
                event,
                object,
                want,
            }
        }
    }

    fn owned_by(workflow: &str) -> Value {
        json!({"ownerReferences": [{"kind": "WorkFlow", "name": workflow}]})
    }

    #[test]
    fn changes_are_classified_by_kind_and_content() {
        let complete = json!([{"type": "Complete", "status": "True"}]);
        let running = json!([]);
        let created = |workflow: &str, step| Observation::JobCreated {
            workflow: workflow.into(),
            step,
        };
        let cases = [
            Case::new(
                "our job, identified by its step annotation",
                ("batch", "jobs"),
                EventType::Added,
                job(
                    "wf-s3-abc",
                    json!({"ownerReferences": [{"kind": "WorkFlow", "name": "wf"}],
                           "annotations": {STEP_KEY: "s3"}}),
                    running.clone(),
                ),
                Some(created("ns/wf", 3)),
            ),
            Case::new(
                "item 4 of step s1, which fans out: bench step 5",
                ("batch", "jobs"),
                EventType::Added,
                job(
                    "wf-s1-4-abc",
                    json!({"ownerReferences": [{"kind": "WorkFlow", "name": "wf"}],
                           "annotations": {STEP_KEY: "s1"}, "labels": {ITEM_KEY: "4"}}),
                    running.clone(),
                ),
                Some(created("ns/wf", 5)),
            ),
            Case::new(
                "another operator's job, identified by its name",
                ("batch", "jobs"),
                EventType::Added,
                job("wf-s12", owned_by("wf"), running.clone()),
                Some(created("ns/wf", 12)),
            ),
            Case::new(
                "a job that completed",
                ("batch", "jobs"),
                EventType::Modified,
                job("wf-s1", owned_by("wf"), complete.clone()),
                Some(Observation::JobCompleted {
                    workflow: "ns/wf".into(),
                    step: 1,
                }),
            ),
            Case::new(
                "a job that changed but did not complete",
                ("batch", "jobs"),
                EventType::Modified,
                job("wf-s1", owned_by("wf"), running.clone()),
                None,
            ),
            Case::new(
                "a job of no workflow",
                ("batch", "jobs"),
                EventType::Added,
                job("other-s1", json!({}), running.clone()),
                None,
            ),
            Case::new(
                "a job with no step in its name",
                ("batch", "jobs"),
                EventType::Added,
                job("wf-build", owned_by("wf"), running),
                None,
            ),
            Case::new(
                "a workflow created: its priority and age",
                ("workflow.crd.com", "workflows"),
                EventType::Added,
                json!({"metadata": {"name": "wf", "namespace": "ns",
                                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                       "spec": {"priority": 3}}),
                Some(Observation::WorkflowCreated {
                    workflow: "ns/wf".into(),
                    rank: (Reverse(3), "2026-01-01T00:00:00Z".into(), "ns/wf".into()),
                }),
            ),
            Case::new(
                "a lock's Lease created: its workflow took the lock",
                ("coordination.k8s.io", "leases"),
                EventType::Added,
                json!({"metadata": {"name": "l", "namespace": "ns",
                                    "labels": {LOCK_KEY: "semaphore-bench"},
                                    "ownerReferences": [{"kind": "WorkFlow", "name": "wf"}]}}),
                Some(Observation::LockTaken {
                    workflow: "ns/wf".into(),
                }),
            ),
            Case::new(
                "a Lease that is no lock",
                ("coordination.k8s.io", "leases"),
                EventType::Added,
                json!({"metadata": {"name": "leader", "namespace": "ns", "labels": {}}}),
                None,
            ),
            Case::new(
                "a completed workflow",
                ("workflow.crd.com", "workflows"),
                EventType::Modified,
                json!({"metadata": {"name": "wf", "namespace": "ns", "generation": 2},
                       "status": {"workflow-status": "Completed", "observedGeneration": 2}}),
                Some(Observation::WorkflowTerminal {
                    workflow: "ns/wf".into(),
                    completed: true,
                }),
            ),
            Case::new(
                "a failed workflow of an operator without observedGeneration",
                ("workflow.crd.com", "workflows"),
                EventType::Modified,
                json!({"metadata": {"name": "wf", "namespace": "ns", "generation": 1},
                       "status": {"workflow-status": "Failed"}}),
                Some(Observation::WorkflowTerminal {
                    workflow: "ns/wf".into(),
                    completed: false,
                }),
            ),
            Case::new(
                "a terminal status of an older generation",
                ("workflow.crd.com", "workflows"),
                EventType::Modified,
                json!({"metadata": {"name": "wf", "namespace": "ns", "generation": 2},
                       "status": {"workflow-status": "Completed", "observedGeneration": 1}}),
                None,
            ),
            Case::new(
                "a running workflow",
                ("workflow.crd.com", "workflows"),
                EventType::Modified,
                json!({"metadata": {"name": "wf", "namespace": "ns"},
                       "status": {"workflow-status": "Started"}}),
                None,
            ),
            Case::new(
                "a completed pod",
                ("", "pods"),
                EventType::Modified,
                job("wf-s1", owned_by("wf"), complete),
                None,
            ),
        ];
        for Case {
            what,
            kind: (group, resource),
            event,
            object,
            want,
        } in cases
        {
            assert_eq!(classify(group, resource, event, &object), want, "{what}");
        }
    }

    #[test]
    fn step_names_parse_only_in_bench_form() {
        let cases = [
            ("s0", Some(0)),
            ("s42", Some(42)),
            ("s", None),
            ("x1", None),
            ("s1a", None),
            ("s-1", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse_step(name), want, "{name}");
        }
    }

    #[test]
    fn dispatch_latency_runs_from_the_last_dependency_to_the_job() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let wf = || "ns/wf".to_string();
        // s0 and s1 are roots; s2 depends on both; s3 on s2 (created too early); s4 on s9
        // (never completed).
        let deps = vec![vec![], vec![], vec![0, 1], vec![2], vec![9]];
        let mut timeline = Timeline::default();
        let created = |step| Observation::JobCreated {
            workflow: wf(),
            step,
        };
        let completed = |step| Observation::JobCompleted {
            workflow: wf(),
            step,
        };
        let events = [
            (created(0), 0),
            (created(1), 0),
            (completed(0), 10),
            (completed(1), 30),
            (created(3), 31),
            (created(2), 37),
            // A duplicate: the first instant counts.
            (created(2), 90),
            (completed(2), 40),
            (created(4), 50),
        ];
        for (observation, at) in events {
            timeline.record(observation, ms(at));
        }
        let dispatches = timeline.dispatches(&deps);
        assert_eq!(dispatches.samples, vec![Duration::from_millis(7)]);
        assert_eq!(dispatches.early, 1);
        assert_eq!(dispatches.unmatched, 1);
        assert_eq!(timeline.steps_completed(), 3);
        assert_eq!(timeline.jobs_created(), 5);
    }

    #[test]
    fn summaries_use_nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=200).rev().map(Duration::from_millis).collect();
        let summary = Summary::of(&samples);
        assert_eq!(
            summary,
            Summary {
                count: 200,
                p50: 100.0,
                p95: 190.0,
                p99: 198.0,
                max: 200.0,
                mean: 100.5,
            }
        );
        let one = Summary::of(&[Duration::from_micros(1500)]);
        assert_eq!((one.p50, one.p99, one.max), (1.5, 1.5, 1.5));
        assert_eq!(Summary::of(&[]).count, 0);
    }
}
