//! What the workflow controller remembers of each workflow between passes, in one place: the
//! compiled spec, the incremental planner's state, and the Jobs it created that the mirror may
//! not show yet. No client.
//!
//! Nothing here is a source of truth: every entry is a cache of what the API already told us,
//! checked against it before use (the generation, the run id, the stored status, the mirror's
//! Jobs), and losing it costs only recomputation. One map keyed by workflow uid, so what is
//! forgotten of a workflow is forgotten together.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use workflow_operator_core::crd::{WorkFlow, WorkFlowSpec};
use workflow_operator_core::incremental::RunState;
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::plan::{self, Compiled, ObservedJob};

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

/// A workflow's spec as planned: compiled, and expanded when it uses templates.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) compiled: Arc<Compiled>,
    /// The spec with its templates and parameters expanded; `None` for a spec without any
    /// (it is planned as it is).
    pub(super) spec: Option<Arc<WorkFlowSpec>>,
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

/// What a [`Prepared`] was made from: the generation, and how many shared templates the
/// status recorded (records are only ever added, before the workflow runs).
#[derive(Clone, Copy, PartialEq, Eq)]
struct SpecKey {
    generation: i64,
    resolved: usize,
}

impl SpecKey {
    fn of(workflow: &WorkFlow) -> SpecKey {
        SpecKey {
            generation: workflow.metadata.generation.unwrap_or_default(),
            resolved: workflow
                .status
                .as_ref()
                .map_or(0, |s| s.resolved_templates.len()),
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
}

impl Remembered {
    fn is_empty(&self) -> bool {
        self.compiled.is_none() && self.run.is_none() && self.unmirrored.is_empty()
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
        });
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
    /// show yet; forgets the ones it shows and the expired ones. O(1) when there are none.
    pub(super) fn unmirrored(&self, uid: &str, mirrored: &[Arc<JobSummary>]) -> Vec<ObservedJob> {
        let mut all = self.workflows.lock().expect("workflow memory lock");
        let Some(remembered) = all.get_mut(uid).filter(|r| !r.unmirrored.is_empty()) else {
            return Vec::new();
        };
        let shown: HashSet<&str> = mirrored
            .iter()
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
