//! What the workflow controller remembers of each workflow between passes, in one place: the
//! compiled spec, the incremental planner's state, the Jobs it created that the mirror may
//! not show yet, and when the timer must look at it again. No client.
//!
//! Nothing here is a source of truth: every entry is a cache of what the API already told us,
//! checked against it before use (the generation, the run id, the stored status, the mirror's
//! Jobs), and losing it costs only recomputation. One map keyed by workflow uid, so what is
//! forgotten of a workflow is forgotten together.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use workflow_operator_core::crd::{WorkFlow, WorkFlowSpec};
use workflow_operator_core::incremental::RunState;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::plan::{self, Compiled, ObservedJob};
use workflow_operator_core::template;

/// How long a Job we created counts as existing without the mirror showing it: longer than the
/// Job watch lags under load, short enough that a Job deleted before the watch saw it is soon
/// created again.
const UNMIRRORED_TTL: Duration = Duration::from_secs(30);

/// A [`RunState`] and what it is valid for: the workflow's generation (the run id is the
/// state's own), and a stored status the state follows ([`RunState::follows`]).
pub(super) struct CachedRun {
    pub(super) generation: i64,
    pub(super) state: RunState,
    /// When this process last wrote the workflow's status.
    pub(super) status_written_at: Option<Instant>,
    /// When the full planner last built the state from the mirror.
    pub(super) built_at: Instant,
}

/// When the timer's pass must look at a workflow again, as its last pass planned: whichever
/// of the two comes first. Only decides when to look: what the pass then does is read from the
/// API as always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wake {
    /// The plan's next deadline (a step's timeout or start deadline, a retry's back-off, the
    /// workflow's `activeDeadlineSeconds`), on the wall clock the planner counts them on.
    pub(super) deadline: Option<Timestamp>,
    /// The latest the timer looks again, on the monotonic clock (so a wall clock set back
    /// cannot put it off): the full-reconcile safety net, or at once; `None` when only the
    /// deadline is awaited.
    pub(super) by: Option<Instant>,
}

impl Wake {
    /// Whether the wake has come at `now` (monotonic) and `wall` (the wall clock).
    pub(super) fn is_due(&self, now: Instant, wall: Timestamp) -> bool {
        self.by.is_some_and(|by| now >= by) || self.deadline.is_some_and(|at| wall >= at)
    }
}

/// A workflow's spec as planned: compiled, and expanded when it uses templates.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) compiled: Arc<Compiled>,
    /// The spec with its templates and parameters expanded; `None` for a spec without any
    /// (it is planned as it is).
    pub(super) spec: Option<Arc<WorkFlowSpec>>,
    /// The spec names shared templates or ConfigMap keys its status has not recorded yet
    /// (`resolve` reads them): known once per generation, so a pass does not scan the steps for them.
    pub(super) unresolved: bool,
}

impl Prepared {
    /// `workflow` with the expanded spec in place of its own, when there is one.
    pub(super) fn view(&self, workflow: Arc<WorkFlow>) -> Arc<WorkFlow> {
        match &self.spec {
            None => workflow,
            Some(spec) => Arc::new(WorkFlow {
                metadata: workflow.metadata.clone(),
                spec: (**spec).clone(),
                status: workflow.status.clone(),
            }),
        }
    }
}

/// What a [`Prepared`] was made from: the generation, and how many shared templates and
/// ConfigMap keys the status recorded (records are only ever added, before the workflow runs).
#[derive(Clone, Copy, PartialEq, Eq)]
struct SpecKey {
    generation: i64,
    resolved: usize,
    config_map_keys: usize,
}

impl SpecKey {
    fn of(workflow: &WorkFlow) -> SpecKey {
        let status = workflow.status.as_ref();
        SpecKey {
            generation: workflow.metadata.generation.unwrap_or_default(),
            resolved: status.map_or(0, |s| s.resolved_templates.len()),
            config_map_keys: status.map_or(0, |s| s.resolved_config_map_keys.len()),
        }
    }
}

/// What is remembered of one workflow.
#[derive(Default)]
struct Remembered {
    /// The validated DAG and run id, and the spec with its templates expanded (when it has
    /// any), for what they were made from: saves an O(steps) build per Job event.
    compiled: Option<(SpecKey, Prepared)>,
    /// The incremental planner's state, as of the last plan carried out.
    run: Option<CachedRun>,
    /// Jobs we created that the mirror may not show yet, with when: planned as existing until
    /// the mirror has them (for at most [`UNMIRRORED_TTL`]), so a pass that runs before the Job
    /// watch catches up does not create them again (each such create is a wasted write
    /// answered 409: half of the Job creates of `make bench` without it).
    unmirrored: Vec<(ObservedJob, Instant)>,
    /// When the timer must look again; `None` (no pass finished since the operator started,
    /// or the last one failed): at its next tick.
    wake: Option<Wake>,
}

impl Remembered {
    fn is_empty(&self) -> bool {
        self.compiled.is_none()
            && self.run.is_none()
            && self.unmirrored.is_empty()
            && self.wake.is_none()
    }
}

/// The controller's memory of every workflow, by uid.
#[derive(Default)]
pub(super) struct Memory {
    workflows: Mutex<HashMap<String, Remembered>>,
}

impl Memory {
    fn with<R>(&self, uid: &str, f: impl FnOnce(&mut Remembered) -> R) -> R {
        let mut all = self.workflows.lock().expect("workflow memory lock");
        let entry = all.entry(uid.to_string()).or_default();
        let result = f(entry);
        if entry.is_empty() {
            all.remove(uid);
        }
        result
    }

    /// `workflow.spec` expanded ([`plan::prepare_spec`]) and compiled, made once per
    /// generation and record of shared templates read.
    pub(super) fn compiled(&self, workflow: &WorkFlow) -> Prepared {
        let uid = workflow.uid().unwrap_or_default();
        let key = SpecKey::of(workflow);
        self.with(&uid, |remembered| match &remembered.compiled {
            Some((k, prepared)) if *k == key => prepared.clone(),
            _ => {
                let (spec, compiled) = plan::prepare_spec(workflow);
                let prepared = Prepared {
                    compiled: Arc::new(compiled),
                    spec: spec.map(Arc::new),
                    unresolved: !template::missing(workflow).is_empty()
                        || !template::config_maps::missing(workflow).is_empty(),
                };
                remembered.compiled = Some((key, prepared.clone()));
                prepared
            }
        })
    }

    /// Takes the cached run state out: a pass that fails half-way leaves none behind.
    pub(super) fn take_run(&self, uid: &str) -> Option<CachedRun> {
        self.with(uid, |remembered| remembered.run.take())
    }

    pub(super) fn keep_run(&self, uid: &str, run: CachedRun) {
        self.with(uid, |remembered| remembered.run = Some(run));
    }

    /// Drops what planning a finished workflow would use (its run state is already taken out):
    /// a DAG and a run state for each of thousands of finished workflows would be most of the
    /// operator's memory, to save work that is rarely needed again.
    pub(super) fn finished(&self, uid: &str) {
        self.with(uid, |remembered| {
            remembered.compiled = None;
            remembered.run = None;
            remembered.wake = None;
        });
    }

    /// Sets when the timer must look at workflow `uid` again.
    pub(super) fn wake_at(&self, uid: &str, wake: Wake) {
        self.with(uid, |remembered| remembered.wake = Some(wake));
    }

    /// Has the timer look at workflow `uid` at its next tick (its last pass failed).
    pub(super) fn wake_now(&self, uid: &str) {
        self.with(uid, |remembered| remembered.wake = None);
    }

    /// Whether the timer's pass is due for workflow `uid`: its wake has come, or it has none.
    /// A lookup under the lock: the timer asks this of every workflow at every tick.
    pub(super) fn is_due(&self, uid: &str) -> bool {
        let (now, wall) = (Instant::now(), Timestamp::now());
        let all = self.workflows.lock().expect("workflow memory lock");
        all.get(uid)
            .and_then(|remembered| remembered.wake)
            .is_none_or(|wake| wake.is_due(now, wall))
    }

    /// Forgets everything of a deleted workflow.
    pub(super) fn forget(&self, uid: &str) {
        self.workflows
            .lock()
            .expect("workflow memory lock")
            .remove(uid);
    }

    pub(super) fn created(&self, uid: &str, job: ObservedJob) {
        self.with(uid, |remembered| {
            remembered.unmirrored.push((job, Instant::now()))
        });
    }

    pub(super) fn deleted(&self, uid: &str, name: &str) {
        self.with(uid, |remembered| {
            remembered.unmirrored.retain(|(job, _)| job.name != name)
        });
    }

    /// The Jobs we created for workflow `uid` that `mirrored` (its Jobs in the mirror) does not
    /// show yet; forgets the ones it shows, the ones among `seen` (Jobs the watch delivered
    /// since the last pass: one the mirror does not show was deleted, and would otherwise
    /// count as existing, with no event to come, until it expired) and the expired ones. O(1)
    /// when there are none.
    pub(super) fn unmirrored(
        &self,
        uid: &str,
        mirrored: &[Arc<JobSummary>],
        seen: &[Arc<JobSummary>],
    ) -> Vec<ObservedJob> {
        let mut all = self.workflows.lock().expect("workflow memory lock");
        let Some(remembered) = all.get_mut(uid).filter(|r| !r.unmirrored.is_empty()) else {
            return Vec::new();
        };
        let shown: HashSet<&str> = mirrored
            .iter()
            .chain(seen)
            .filter_map(|job| job.metadata.name.as_deref())
            .collect();
        remembered.unmirrored.retain(|(job, at)| {
            at.elapsed() < UNMIRRORED_TTL && !shown.contains(job.name.as_str())
        });
        let pending = remembered
            .unmirrored
            .iter()
            .map(|(job, _)| job.clone())
            .collect();
        if remembered.is_empty() {
            all.remove(uid);
        }
        pending
    }
}

/// The cached steps' Jobs whose entries this process wrote (the `cache` stage), by workflow
/// uid: each entry is written once.
#[derive(Default)]
pub struct CacheWrites(Mutex<BTreeMap<String, HashSet<String>>>);

impl CacheWrites {
    /// Forgets a workflow's (deleted).
    pub fn forget(&self, uid: &str) {
        self.0.lock().expect("cache writes").remove(uid);
    }

    /// Whether `job` of `uid` is newly marked written.
    pub(super) fn mark(&self, uid: &str, job: &str) -> bool {
        let mut written = self.0.lock().expect("cache writes");
        written
            .entry(uid.to_string())
            .or_default()
            .insert(job.to_string())
    }

    pub(super) fn unmark(&self, uid: &str, job: &str) {
        if let Some(jobs) = self.0.lock().expect("cache writes").get_mut(uid) {
            jobs.remove(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use workflow_operator_core::testing::Jobs;

    #[test]
    fn a_job_we_created_that_the_watch_saw_deleted_no_longer_counts_as_existing() {
        let workflow = WorkFlow::test("w").step("a", &[]).step("b", &[]).build();
        let now = Timestamp::now();
        let created = Jobs::of(&workflow)
            .active("a", now)
            .active("b", now)
            .build();
        let memory = Memory::default();
        for job in &created {
            memory.created("uid", job.clone());
        }
        let summary = |job: &ObservedJob| {
            Arc::new(JobSummary {
                metadata: ObjectMeta {
                    name: Some(job.name.clone()),
                    ..ObjectMeta::default()
                },
                ..JobSummary::default()
            })
        };
        // a's Job was added and deleted before a pass saw the mirror hold it: its deletion is
        // in the batch, the mirror does not show it.
        let deleted = summary(&created[0]);
        let pending = memory.unmirrored("uid", &[], &[deleted]);
        let names: Vec<&str> = pending.iter().map(|job| job.name.as_str()).collect();
        assert_eq!(names, [created[1].name.as_str()]);
        // b's Job shows in the mirror: nothing is left to count.
        assert!(
            memory
                .unmirrored("uid", &[summary(&created[1])], &[])
                .is_empty()
        );
    }
}
