//! The incremental planner: a per-workflow [`RunState`] built once from what
//! [`plan::plan_compiled`] sees, then updated by one observed Job change at a time, deciding in
//! O(degree of that step) exactly what the full planner would decide for the new set of Jobs.
//!
//! `handlers.rs` keeps one [`RunState`] per workflow uid (keyed by generation, run id and the
//! status' resource version) and uses [`RunState::observe`] for a Job event; every other cause
//! (create, spec update, resume, timer) and every [`Fallback`] goes through [`RunState::build`],
//! which runs the full planner. The state is only a faster way to compute the same answer: it is
//! never a source of truth, and dropping it costs one full plan.
//!
//! # What is followed, and what falls back
//! The state follows a workflow of the current run in phase `Started` with no failed step and no
//! live Job of another run, that sets no field [`crate::fields`] marks
//! [`Follow::InFull`](crate::fields::Follow::InFull) (run control, exit steps, a deadline, locks,
//! conditions, fan-outs, outputs, repeated runs, rules, ...: one decision per field, found once
//! per spec as [`Compiled::unfollowed`]) and whose steps name no other step's outputs. The
//! property test below generates every field marked
//! [`Follow::Followed`](crate::fields::Follow::Followed). A change is handled incrementally when
//! a step's Job appears, runs, succeeds or disappears. Everything else returns a [`Fallback`] and the caller re-plans in
//! full: a Job of another run that is not being deleted, a failed step (with or without
//! failFast, or whose pod could not start), a running step past its timeout or a step whose Job
//! the operator stopped at its timeout (`JobState::TimedOut`), a step whose pod has not started
//! by its start deadline (its pods are read before the full plan), a suspended Job (a `Queued`
//! step), a succeeded Job going back (deleted, or a stale event), a second Job for one step,
//! and the last step succeeding (the lifecycle move to `Completed` with its conditions is left
//! to the full planner, once per workflow).
//!
//! # Cost
//! The decision ([`RunState::decide`]) is O(degree + log steps) plus the size of its output:
//! the step's dependents are released through the same unmet-dependency counts as
//! [`crate::dag::Progress`], the ready steps without a Job sit in a sorted set, the
//! running steps' deadlines in another. Rendering the status for a write
//! ([`RunState::render`]) is O(steps), like the status itself: its `executed` and `started`
//! lists name every step. The lists, and the `steps` entries of the running steps (their name
//! and Job only, so that nothing but a step starting or finishing changes them), are rendered
//! in declaration order, exactly as the full planner renders them.
//!
//! Measured by `cargo bench --bench dag -- incremental` at 10,000 steps on the 2-core build
//! machine, one completion half-way through: the decision takes 4 µs (chain), 6 µs
//! (fan-out/fan-in), 1.5 µs (diamond lattice) and 9 µs (random, 3 dependencies per step);
//! with the status rendered, 150-260 µs (the full planner: 0.5-1.3 ms).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::crd::{OptionNum, UNLIMITED, WorkFlow, WorkFlowStatus};
use super::dag::Dag;
use super::lifecycle::Phase;
use super::names;
use super::plan::{self, Action, Compiled, JobState, ObservedJob, Plan};

/// One change of one Job, as a watch reports it.
// Changes live for one batch; boxing the Job would cost an allocation per change instead.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobChange {
    /// The Job was created or changed; this is its new state.
    Applied(ObservedJob),
    /// The Job named so is gone.
    Deleted {
        /// The Job's name.
        name: String,
    },
}

/// Why a change cannot be planned incrementally; the caller re-plans in full with
/// [`RunState::build`] and drops the old state (it may be half-updated).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fallback {
    /// The workflow is not in a state the incremental planner follows.
    #[error("the workflow is not followed incrementally: {0}")]
    NotFollowed(&'static str),
    /// The workflow sets a field the incremental planner does not follow (`fields::Follow`).
    #[error("the workflow sets {0}, which is planned in full")]
    Unfollowed(&'static str),
    /// A Job of another run that is not being deleted (the full planner deletes it).
    #[error("job {0} belongs to another run")]
    OtherRun(String),
    /// A step failed: the failure decides the workflow's outcome and message.
    #[error("step {0} failed")]
    StepFailed(String),
    /// A succeeded step's Job went back to running or disappeared.
    #[error("step {0} is no longer succeeded")]
    Uncompleted(String),
    /// A step has a second Job in the current run.
    #[error("step {step} has a second job {job}")]
    SecondJob {
        /// The step.
        step: String,
        /// The Job that is not the one tracked.
        job: String,
    },
    /// A step timed out: it runs past its timeout, or its Job was stopped at its timeout (the
    /// timeout decides the workflow's outcome and message, as a failure does).
    #[error("step {0} timed out")]
    TimedOut(String),
    /// Every step succeeded: the workflow completes.
    #[error("every step succeeded")]
    AllSucceeded,
    /// A step's pod has not started by its start deadline: the handler reads its pods.
    #[error("step {0} has not started by its start deadline")]
    NotStarted(String),
}

/// The decision for one change, before the status is rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do, in order: the same as [`Plan::actions`].
    pub actions: Vec<Action>,
    /// Whether the status differs from the one last rendered (then [`RunState::render`] it).
    pub status_changed: bool,
    /// When the next running step times out.
    pub next_timeout_at: Option<Timestamp>,
}

/// A tracked Job of a known step of the current run.
#[derive(Debug, Clone)]
struct StepJob {
    name: String,
    /// `Some(since)` while running, `None` once succeeded (failed and timed-out Jobs are never
    /// tracked).
    active_since: Option<Timestamp>,
    deleting: bool,
    active_deadline_seconds: Option<i64>,
    /// The `activeDeadlineSeconds` it should have (`plan::backstop_deadline_seconds`).
    wanted_deadline_seconds: Option<i64>,
}

impl StepJob {
    fn is_active(&self) -> bool {
        self.active_since.is_some()
    }
}

/// Whose a Job name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Step(usize),
    /// A Job of the current run for a step not in the spec: the planner ignores it.
    Unknown,
    /// A Job of another run, being deleted: the planner ignores it too.
    OtherRun,
}

/// What the full planner sees of one workflow, kept up to date one Job change at a time.
#[derive(Debug, Clone)]
pub struct RunState {
    compiled: Arc<Compiled>,
    workflow_name: String,
    /// The effective timeout of each step.
    timeouts: Vec<i64>,
    /// `spec.startTimeout`.
    start_timeout: i64,
    parallelism: Option<i32>,
    /// The status last rendered, lists left empty: phase, conditions, run and generation stay
    /// as they are while the state follows the workflow.
    base: WorkFlowStatus,
    /// Every Job name seen, so deletes can be placed and the Jobs counted.
    owners: HashMap<String, Owner>,
    job_of: Vec<Option<StepJob>>,
    /// Dependencies of each step not succeeded yet (as in `dag::Progress`).
    unmet: Vec<u32>,
    done: Vec<bool>,
    done_count: usize,
    /// Ready steps without a Job, in declaration order.
    pending: BTreeSet<usize>,
    /// Steps with a running Job.
    running: usize,
    /// The steps the last decision created Jobs for (the first `slots` of `pending`).
    created: Vec<usize>,
    /// Whether each step is in the `started` list of the status last rendered.
    in_started: Vec<bool>,
    /// Deadlines of running steps not being deleted, with a limit.
    deadlines: BTreeSet<(Timestamp, usize)>,
    deadline_of: Vec<Option<Timestamp>>,
    /// Start deadlines of running steps whose pod has not started (`ObservedJob::start_deadline`).
    start_deadlines: BTreeSet<(Timestamp, usize)>,
    start_deadline_of: Vec<Option<Timestamp>>,
    /// Running steps whose Job's `activeDeadlineSeconds` is not what the step's timeout asks.
    mismatched: BTreeSet<usize>,
}

impl RunState {
    /// Plans `workflow` in full with [`plan::plan_compiled`] and, when the workflow is one the
    /// incremental planner follows, the state as it is once that plan was carried out (its
    /// status written). O(steps + jobs).
    ///
    /// `compiled` must have been made from `workflow.spec`.
    pub fn build(
        workflow: &WorkFlow,
        compiled: Arc<Compiled>,
        jobs: &[ObservedJob],
        now: Timestamp,
    ) -> (Plan, Result<RunState, Fallback>) {
        let plan = plan::plan_compiled(workflow, &compiled, jobs, now);
        let state = Self::follow(workflow, compiled, jobs, &plan);
        (plan, state)
    }

    fn follow(
        workflow: &WorkFlow,
        compiled: Arc<Compiled>,
        jobs: &[ObservedJob],
        plan: &Plan,
    ) -> Result<RunState, Fallback> {
        let Some(status) = plan.status.as_ref().or(workflow.status.as_ref()) else {
            return Err(Fallback::NotFollowed("no status"));
        };
        if status.workflow_status != Some(Phase::Started) || status.message.is_some() {
            return Err(Fallback::NotFollowed("not started, or a step failed"));
        }
        // What the state does not model is left to the full planner: a workflow that sets a
        // field `fields` does not mark followed, or whose steps name each other's outputs (read
        // from their pods before a full plan).
        let spec = &workflow.spec;
        if let Some(field) = compiled.unfollowed {
            return Err(Fallback::Unfollowed(field));
        }
        if !compiled.flow.is_empty() {
            return Err(Fallback::NotFollowed("outputs read between steps"));
        }
        if plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::DeleteJob { .. } | Action::StopJob { .. }))
        {
            return Err(Fallback::NotFollowed("jobs are being deleted"));
        }
        let Ok(dag) = &compiled.dag else {
            return Err(Fallback::NotFollowed("invalid workflow"));
        };
        let n = dag.len();
        let mut state = RunState {
            workflow_name: workflow.metadata.name.clone().unwrap_or_default(),
            timeouts: spec
                .containers
                .iter()
                .map(|s| spec.effective_timeout(s))
                .collect(),
            start_timeout: spec.start_timeout,
            parallelism: spec.parallelism.num(),
            base: WorkFlowStatus {
                executed: Vec::new(),
                started: Vec::new(),
                steps: Vec::new(),
                progress: None,
                ..status.clone()
            },
            owners: HashMap::with_capacity(jobs.len()),
            job_of: vec![None; n],
            unmet: (0..n).map(|i| dag.dependencies(i).count() as u32).collect(),
            done: vec![false; n],
            done_count: 0,
            pending: BTreeSet::new(),
            running: 0,
            created: Vec::new(),
            in_started: vec![false; n],
            deadlines: BTreeSet::new(),
            deadline_of: vec![None; n],
            start_deadlines: BTreeSet::new(),
            start_deadline_of: vec![None; n],
            mismatched: BTreeSet::new(),
            compiled: compiled.clone(),
        };
        for job in jobs {
            state.track(dag, job)?;
        }
        state.pending = (0..n)
            .filter(|&i| state.unmet[i] == 0 && !state.done[i] && state.job_of[i].is_none())
            .collect();
        if state.done_count == n {
            return Err(Fallback::AllSucceeded);
        }
        state.created = state.pending.iter().take(state.slots()).copied().collect();
        for (i, started) in state.in_started.iter_mut().enumerate() {
            *started = state.job_of[i].as_ref().is_some_and(StepJob::is_active);
        }
        for &i in &state.created {
            state.in_started[i] = true;
        }
        // The state must render exactly the status the full planner wrote; anything it does
        // not model shows up here and is left to the full planner.
        if &state.render() != status {
            return Err(Fallback::NotFollowed("the status is not the planner's"));
        }
        Ok(state)
    }

    fn dag_arc(&self) -> Arc<Compiled> {
        self.compiled.clone()
    }

    /// How many Jobs the state knows of, of every run: equal to the workflow's Jobs in the
    /// mirror when the state is up to date.
    pub fn job_count(&self) -> usize {
        self.owners.len()
    }

    /// Whether `status` is one the state rendered or will render: the same phase, message,
    /// change time and observed generation. Its lists and progress are not compared: they
    /// are the state's own, and the stored ones lag behind while a write is on its way. A
    /// status someone else changed in those fields is left to the full planner.
    pub fn follows(&self, status: &WorkFlowStatus) -> bool {
        let base = &self.base;
        status.workflow_status == base.workflow_status
            && status.status_changed == base.status_changed
            && status.message == base.message
            && status.observed_generation == base.observed_generation
    }

    /// Whether the state has seen the Job `name` (of any run).
    pub fn knows(&self, name: &str) -> bool {
        self.owners.contains_key(name)
    }

    /// The run id the state follows.
    pub fn run(&self) -> &str {
        &self.compiled.run
    }

    /// Records a Job while building: the same checks as an applied change, without deciding.
    fn track(&mut self, dag: &Dag, job: &ObservedJob) -> Result<(), Fallback> {
        if job.run != self.compiled.run {
            if !job.deleting {
                return Err(Fallback::OtherRun(job.name.clone()));
            }
            self.owners.insert(job.name.clone(), Owner::OtherRun);
            return Ok(());
        }
        let Some(i) = dag.index_of(&job.step) else {
            self.owners.insert(job.name.clone(), Owner::Unknown);
            return Ok(());
        };
        self.set_job(dag, i, job)?;
        Ok(())
    }

    /// Replaces the Job of step `i` with `job`. Returns whether the step newly succeeded.
    fn set_job(&mut self, dag: &Dag, i: usize, job: &ObservedJob) -> Result<bool, Fallback> {
        let active_since = match &job.state {
            JobState::Active { since } => Some(*since),
            JobState::Succeeded => None,
            JobState::Failed { .. } | JobState::CannotStart { .. } => {
                return Err(Fallback::StepFailed(job.step.clone()));
            }
            JobState::TimedOut { .. } => return Err(Fallback::TimedOut(job.step.clone())),
        };
        if job.suspended {
            // A queued step's phase (and Kueue's admission of it) is the full planner's.
            return Err(Fallback::NotFollowed("a suspended job"));
        }
        if let Some(old) = &self.job_of[i] {
            if old.name != job.name {
                return Err(Fallback::SecondJob {
                    step: job.step.clone(),
                    job: job.name.clone(),
                });
            }
            if !old.is_active() && active_since.is_some() {
                return Err(Fallback::Uncompleted(job.step.clone()));
            }
        }
        self.clear_job(i);
        self.owners.insert(job.name.clone(), Owner::Step(i));
        let new = StepJob {
            name: job.name.clone(),
            active_since,
            deleting: job.deleting,
            active_deadline_seconds: job.active_deadline_seconds,
            wanted_deadline_seconds: plan::backstop_deadline_seconds(self.timeouts[i]),
        };
        self.pending.remove(&i);
        let newly_done = match active_since {
            Some(since) => {
                self.running += 1;
                if !new.deleting {
                    let timeout = self.timeouts[i];
                    if new.active_deadline_seconds != new.wanted_deadline_seconds {
                        self.mismatched.insert(i);
                    }
                    if timeout != UNLIMITED
                        && let Ok(at) = since.checked_add(SignedDuration::from_secs(timeout))
                    {
                        self.deadlines.insert((at, i));
                        self.deadline_of[i] = Some(at);
                    }
                    if let Some(at) = job.start_deadline(self.start_timeout) {
                        self.start_deadlines.insert((at, i));
                        self.start_deadline_of[i] = Some(at);
                    }
                }
                false
            }
            None => self.complete(dag, i),
        };
        self.job_of[i] = Some(new);
        Ok(newly_done)
    }

    /// Forgets the Job of step `i` (its running count, deadline and mismatch), if any.
    fn clear_job(&mut self, i: usize) {
        if let Some(old) = self.job_of[i].take()
            && old.is_active()
        {
            self.running -= 1;
            self.mismatched.remove(&i);
            if let Some(at) = self.deadline_of[i].take() {
                self.deadlines.remove(&(at, i));
            }
            if let Some(at) = self.start_deadline_of[i].take() {
                self.start_deadlines.remove(&(at, i));
            }
        }
    }

    /// Marks step `i` succeeded and releases its dependents, as `dag::Progress::complete`.
    fn complete(&mut self, dag: &Dag, i: usize) -> bool {
        if std::mem::replace(&mut self.done[i], true) {
            return false;
        }
        self.done_count += 1;
        for d in dag.dependents(i) {
            self.unmet[d] -= 1;
            if self.unmet[d] == 0 && !self.done[d] && self.job_of[d].is_none() {
                self.pending.insert(d);
            }
        }
        true
    }

    fn slots(&self) -> usize {
        plan::free_slots(self.parallelism, self.running)
    }

    /// Decides what the full planner would for the Jobs after `change`, at `now`, in
    /// O(degree + log steps + output). The state then assumes the decision is carried out and
    /// the status, when changed, written. On a [`Fallback`] the state is stale: drop it.
    pub fn decide(&mut self, change: &JobChange, now: Timestamp) -> Result<Decision, Fallback> {
        self.decide_all(std::slice::from_ref(change), now)
    }

    /// [`RunState::decide`] for several changes at once: each is applied to the state, then the
    /// steps to create and the actions are worked out once. Doing that per change would cost
    /// O(changes × steps waiting to be created) (every decision lists them all, with their Job
    /// names): quadratic for a batch of a thousand completions of a wide workflow.
    pub fn decide_all(
        &mut self,
        changes: &[JobChange],
        now: Timestamp,
    ) -> Result<Decision, Fallback> {
        let compiled = self.dag_arc();
        let dag = compiled
            .dag
            .as_ref()
            .expect("followed workflows have a dag");
        let mut status_changed = false;
        let mut touched = Vec::new();
        for change in changes {
            status_changed |= self.apply(dag, &compiled, change, &mut touched)?;
        }
        if self.done_count == dag.len() {
            return Err(Fallback::AllSucceeded);
        }
        if let Some(&(at, i)) = self.deadlines.first()
            && at <= now
        {
            return Err(Fallback::TimedOut(dag.name(i).to_string()));
        }
        if let Some(&(at, i)) = self.start_deadlines.first()
            && at <= now
        {
            return Err(Fallback::NotStarted(dag.name(i).to_string()));
        }

        let created: Vec<usize> = self.pending.iter().take(self.slots()).copied().collect();
        let old = std::mem::replace(&mut self.created, created);
        for i in old.iter().chain(&self.created).chain(&touched).copied() {
            let started = self.job_of[i].as_ref().is_some_and(StepJob::is_active)
                || self.created.binary_search(&i).is_ok();
            if self.in_started[i] != started {
                self.in_started[i] = started;
                status_changed = true;
            }
        }

        let mut actions = Vec::with_capacity(self.created.len() + self.mismatched.len());
        for &i in &self.created {
            let step = dag.name(i);
            actions.push(Action::CreateJob {
                step: step.to_string(),
                job_name: names::job_name(&self.workflow_name, step, &compiled.run),
                retry: 0,
                exit: None,
                inputs: Default::default(),
                instance: Default::default(),
                attempt: 0,
            });
        }
        for &i in &self.mismatched {
            let job = self.job_of[i]
                .as_ref()
                .expect("mismatched steps have a job");
            actions.push(Action::SetJobDeadline {
                job_name: job.name.clone(),
                active_deadline_seconds: job.wanted_deadline_seconds,
            });
        }
        let next_timeout_at = [self.deadlines.first(), self.start_deadlines.first()]
            .into_iter()
            .flatten()
            .map(|(at, _)| *at)
            .min();
        Ok(Decision {
            actions,
            status_changed,
            next_timeout_at,
        })
    }

    /// Applies one change to the state; the steps it touched go to `touched`. Whether the
    /// status changed with it.
    fn apply(
        &mut self,
        dag: &Dag,
        compiled: &Compiled,
        change: &JobChange,
        touched: &mut Vec<usize>,
    ) -> Result<bool, Fallback> {
        let mut status_changed = false;
        match change {
            JobChange::Applied(job) => {
                if job.run != compiled.run {
                    if !job.deleting {
                        return Err(Fallback::OtherRun(job.name.clone()));
                    }
                    self.owners.insert(job.name.clone(), Owner::OtherRun);
                } else if let Some(i) = dag.index_of(&job.step) {
                    status_changed |= self.set_job(dag, i, job)?;
                    touched.push(i);
                } else {
                    self.owners.insert(job.name.clone(), Owner::Unknown);
                }
            }
            JobChange::Deleted { name } => match self.owners.remove(name) {
                Some(Owner::Step(i)) => {
                    if self.done[i] {
                        return Err(Fallback::Uncompleted(dag.name(i).to_string()));
                    }
                    self.clear_job(i);
                    if self.unmet[i] == 0 {
                        self.pending.insert(i);
                    }
                    touched.push(i);
                }
                Some(Owner::Unknown | Owner::OtherRun) | None => {}
            },
        }
        Ok(status_changed)
    }

    /// The status as the full planner renders it for the Jobs the state knows: O(steps).
    pub fn render(&self) -> WorkFlowStatus {
        let dag = self
            .compiled
            .dag
            .as_ref()
            .expect("followed workflows have a dag");
        let mut executed = Vec::with_capacity(self.done_count);
        let mut started = Vec::new();
        let mut steps = Vec::new();
        let mut created = self.created.iter().peekable();
        for (i, job) in self.job_of.iter().enumerate() {
            let name = dag.name(i);
            match job {
                Some(job) if job.is_active() => {
                    started.push(name.to_string());
                    steps.push(plan::running_step_status(name, job.name.clone(), false));
                }
                Some(_) => executed.push(name.to_string()),
                None => {}
            }
            if created.next_if_eq(&&i).is_some() {
                started.push(name.to_string());
                let job = names::job_name(&self.workflow_name, name, &self.compiled.run);
                steps.push(plan::running_step_status(name, job, false));
            }
        }
        WorkFlowStatus {
            progress: Some(format!("{}/{}", executed.len(), dag.len())),
            executed,
            started,
            steps,
            ..self.base.clone()
        }
    }

    /// [`RunState::decide`], then the [`Plan`] with the status rendered when it changed.
    pub fn observe(&mut self, change: &JobChange, now: Timestamp) -> Result<Plan, Fallback> {
        self.observe_all(std::slice::from_ref(change), now)
    }

    /// [`RunState::decide_all`], then one [`Plan`] with the status rendered once, if it
    /// changed.
    pub fn observe_all(&mut self, changes: &[JobChange], now: Timestamp) -> Result<Plan, Fallback> {
        let decision = self.decide_all(changes, now)?;
        Ok(Plan {
            run: self.compiled.run.clone(),
            actions: decision.actions,
            status: decision.status_changed.then(|| self.render()),
            events: Vec::new(),
            next_timeout_at: decision.next_timeout_at,
            fired: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    use crate::testing::{Jobs, WorkFlowBuilder};

    fn at(seconds: i64) -> Timestamp {
        "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
    }

    fn written(mut workflow: WorkFlow, plan: &Plan) -> WorkFlow {
        if let Some(status) = &plan.status {
            workflow.status = Some(status.clone());
        }
        workflow
    }

    /// A workflow after its first plan was written, its compiled form, and the state built
    /// from that first plan (with no Jobs yet).
    fn started(builder: WorkFlowBuilder) -> (WorkFlow, Arc<Compiled>, RunState) {
        let wf = builder.build();
        let compiled = Arc::new(Compiled::new(&wf.spec));
        let (first, state) = RunState::build(&wf, compiled.clone(), &[], at(0));
        // The state is the workflow's once the first plan (Created -> Started) is written.
        let wf = written(wf, &first);
        (wf, compiled, state.expect("a started workflow is followed"))
    }

    fn applied(jobs: Vec<ObservedJob>) -> JobChange {
        JobChange::Applied(jobs.into_iter().next().unwrap())
    }

    #[test]
    fn a_chain_runs_incrementally_until_its_last_step() {
        let (mut wf, compiled, mut state) = started(
            WorkFlow::test("c")
                .step("a", &[])
                .step("b", &["a"])
                .step("c", &["b"]),
        );
        let mut jobs: Vec<ObservedJob> = Vec::new();
        for (t, step) in ["a", "b"].into_iter().enumerate() {
            let now = at(t as i64 + 1);
            for change in [
                applied(Jobs::of(&wf).active(step, now).build()),
                applied(Jobs::of(&wf).succeeded(step).build()),
            ] {
                let JobChange::Applied(job) = &change else {
                    unreachable!()
                };
                jobs.retain(|j| j.name != job.name);
                jobs.push(job.clone());
                let full = plan::plan_compiled(&wf, &compiled, &jobs, now);
                let got = state.observe(&change, now).expect("followed");
                assert_eq!(got, full, "{step}");
                wf = written(wf, &full);
            }
        }
        assert_eq!(state.job_count(), 2);
        let last = applied(Jobs::of(&wf).succeeded("c").build());
        assert_eq!(state.observe(&last, at(9)), Err(Fallback::AllSucceeded));
    }

    #[test]
    fn changes_it_does_not_follow_fall_back_naming_why() {
        let builder = || {
            WorkFlow::test("f")
                .step("a", &[])
                .timeout(5)
                .step("b", &[])
                .step("c", &["a", "b"])
        };
        let (wf, _, state) = started(builder());
        let job = |jobs: Vec<ObservedJob>| JobChange::Applied(jobs[0].clone());
        let a_name = Jobs::of(&wf).succeeded("a").build()[0].name.clone();
        let cases: Vec<(&str, Vec<JobChange>, Timestamp, Fallback)> = vec![
            (
                "a failed step",
                vec![job(Jobs::of(&wf)
                    .failed("a", "BackoffLimitExceeded", "")
                    .build())],
                at(1),
                Fallback::StepFailed("a".into()),
            ),
            (
                "a live job of another run",
                vec![job(Jobs::of(&wf).run("old").active("a", at(0)).build())],
                at(1),
                Fallback::OtherRun(
                    Jobs::of(&wf).run("old").active("a", at(0)).build()[0]
                        .name
                        .clone(),
                ),
            ),
            (
                "a step past its timeout",
                vec![job(Jobs::of(&wf).active("a", at(0)).build())],
                at(5),
                Fallback::TimedOut("a".into()),
            ),
            (
                "a step whose job was stopped at its timeout",
                vec![JobChange::Applied(ObservedJob {
                    state: JobState::TimedOut {
                        why: "running for 5s, longer than its timeout of 5s".into(),
                    },
                    ..Jobs::of(&wf).active("a", at(0)).build()[0].clone()
                })],
                at(5),
                Fallback::TimedOut("a".into()),
            ),
            (
                "a succeeded job deleted",
                vec![
                    job(Jobs::of(&wf).succeeded("a").build()),
                    JobChange::Deleted { name: a_name },
                ],
                at(1),
                Fallback::Uncompleted("a".into()),
            ),
            (
                "a second job for one step",
                vec![
                    job(Jobs::of(&wf).active("a", at(0)).build()),
                    JobChange::Applied(ObservedJob {
                        name: "other".into(),
                        ..Jobs::of(&wf).active("a", at(0)).build()[0].clone()
                    }),
                ],
                at(1),
                Fallback::SecondJob {
                    step: "a".into(),
                    job: "other".into(),
                },
            ),
        ];
        for (name, changes, now, want) in cases {
            let mut state = state.clone();
            let (last, before) = changes.split_last().unwrap();
            for change in before {
                state.decide(change, now).expect(name);
            }
            assert_eq!(state.decide(last, now), Err(want), "{name}");
        }
    }

    #[test]
    fn a_job_of_a_step_not_in_the_spec_changes_nothing() {
        let (wf, _, mut state) = started(WorkFlow::test("u").step("a", &[]));
        let mut stray = Jobs::of(&wf).active("a", at(0)).build().remove(0);
        stray.step = "gone".into();
        stray.name = "u-gone".into();
        let decision = state.decide(&JobChange::Applied(stray), at(1)).unwrap();
        assert!(!decision.status_changed);
        assert_eq!(state.job_count(), 1);
    }

    /// `workflow` with some of the fields the incremental planner follows set
    /// (`fields::tests::followed_patches`): spec patch `i` when bit `i` of `spec_bits` is, step
    /// patch `i` on step `s` when bit `(i + s) % 64` of `step_bits` is.
    fn with_followed_fields(workflow: WorkFlow, step_bits: u64, spec_bits: u64) -> WorkFlow {
        let (step_patches, spec_patches) = crate::fields::tests::followed_patches();
        let bit = |bits: u64, i: usize| bits >> (i % 64) & 1 == 1;
        let mut value = serde_json::to_value(&workflow).unwrap();
        for (i, (_, patch)) in spec_patches.iter().enumerate() {
            if bit(spec_bits, i) {
                json_patch::merge(&mut value["spec"], patch);
            }
        }
        let steps = value["spec"]["containers"].as_array_mut().unwrap();
        for (s, step) in steps.iter_mut().enumerate() {
            for (i, (_, patch)) in step_patches.iter().enumerate() {
                if bit(step_bits, i + s) {
                    json_patch::merge(step, patch);
                }
            }
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_property_test_can_set_every_followed_field_it_is_given() {
        let (step_patches, spec_patches) = crate::fields::tests::followed_patches();
        assert!(
            step_patches.len() <= 64 && spec_patches.len() <= 64,
            "one bit each"
        );
        let all = with_followed_fields(WorkFlow::test("p").step("a", &[]).build(), !0, !0);
        let compiled = Arc::new(Compiled::new(&all.spec));
        let (_, state) = RunState::build(&all, compiled, &[], at(0));
        assert!(state.is_ok(), "followed: {state:?}");
        let step = serde_json::to_value(&all.spec.containers[0]).unwrap();
        for (name, _) in &step_patches {
            assert!(step.get(*name).is_some(), "{name} is generated");
        }
        let spec = serde_json::to_value(&all.spec).unwrap();
        for (name, _) in &spec_patches {
            assert!(spec.get(*name).is_some(), "{name} is generated");
        }
    }

    proptest! {
        /// The incremental state's plan equals the full planner's after every batch of Job
        /// events (of one to four, as the framework delivers them); on a fallback the state is
        /// rebuilt from the full planner, as the handler does.
        #[test]
        fn incremental_plans_equal_full_plans_for_random_dags_and_events(
            batch in 1usize..5,
            deps in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..3), 1..25),
            timeouts in proptest::collection::vec(proptest::option::of(2i64..30), 25),
            parallelism in proptest::option::of(1i32..4),
            fail_fast in any::<bool>(),
            start_timeout in 2i64..30,
            events in proptest::collection::vec((0u8..12, any::<prop::sample::Index>()), 1..120),
            step_fields in any::<u64>(),
            spec_fields in any::<u64>(),
        ) {
            let mut builder = WorkFlow::test("p").fail_fast(fail_fast).start_timeout(start_timeout);
            for (i, ds) in deps.iter().enumerate() {
                let names: Vec<String> = ds.iter().filter(|_| i > 0).map(|d| format!("s{}", d.index(i))).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                builder = builder.step(&format!("s{i}"), &refs);
                if let Some(t) = timeouts[i] {
                    builder = builder.timeout(t);
                }
            }
            if let Some(p) = parallelism {
                builder = builder.parallelism(p);
            }
            let mut wf = with_followed_fields(builder.build(), step_fields, spec_fields);
            let compiled = Arc::new(Compiled::new(&wf.spec));
            let mut jobs: Vec<ObservedJob> = Vec::new();
            let (mut last, mut state) = RunState::build(&wf, compiled.clone(), &jobs, at(0));
            wf = written(wf, &last);
            let mut batched: Vec<JobChange> = Vec::new();
            for (tick, (kind, pick)) in events.iter().enumerate() {
                let now = at(tick as i64 + 1);
                let to_start: Vec<&str> = last.actions.iter().filter_map(|a| match a {
                    Action::CreateJob { step, .. } if !jobs.iter().any(|j| j.step == *step && j.run == compiled.run) => Some(step.as_str()),
                    _ => None,
                }).collect();
                let active: Vec<usize> = jobs.iter().enumerate()
                    .filter(|(_, j)| matches!(j.state, JobState::Active { .. }))
                    .map(|(i, _)| i)
                    .collect();
                let pending: Vec<usize> = active.iter().copied().filter(|&i| !jobs[i].pod_started).collect();
                let change = match kind {
                    0..=3 if !to_start.is_empty() => {
                        let step = to_start[pick.index(to_start.len())].to_string();
                        // Some pods take their time to start, or never do.
                        let job = if *kind == 3 {
                            Jobs::of(&wf).pending(&step, now).build().remove(0)
                        } else {
                            Jobs::of(&wf).active(&step, now).build().remove(0)
                        };
                        jobs.push(job.clone());
                        JobChange::Applied(job)
                    }
                    10 | 11 if !pending.is_empty() => {
                        let r = pending[pick.index(pending.len())];
                        if *kind == 10 {
                            jobs[r].pod_started = true;
                        } else {
                            // As the handler reads it from the pods at the start deadline.
                            jobs[r].start_failure = Some("ErrImagePull: no such image".into());
                        }
                        JobChange::Applied(jobs[r].clone())
                    }
                    _ if active.is_empty() => continue,
                    0..=6 | 10 | 11 => {
                        let r = active[pick.index(active.len())];
                        jobs[r].state = JobState::Succeeded;
                        JobChange::Applied(jobs[r].clone())
                    }
                    7 => {
                        let r = active[pick.index(active.len())];
                        jobs[r].state = JobState::Failed { reason: "BackoffLimitExceeded".into(), message: String::new(), exit_code: None };
                        JobChange::Applied(jobs[r].clone())
                    }
                    8 => {
                        let r = active[pick.index(active.len())];
                        jobs[r].deleting = true;
                        JobChange::Applied(jobs[r].clone())
                    }
                    _ => {
                        let r = active[pick.index(active.len())];
                        JobChange::Deleted { name: jobs.remove(r).name }
                    }
                };
                batched.push(change);
                if batched.len() < batch && tick + 1 < events.len() {
                    continue;
                }
                let changes = std::mem::take(&mut batched);
                let full = plan::plan_compiled(&wf, &compiled, &jobs, now);
                let incremental = match &mut state {
                    Ok(state) => state.observe_all(&changes, now),
                    Err(why) => Err(why.clone()),
                };
                match incremental {
                    Ok(plan) => {
                        prop_assert_eq!(&plan, &full, "after {:?}", changes);
                    }
                    Err(_) => {
                        let (plan, rebuilt) = RunState::build(&wf, compiled.clone(), &jobs, now);
                        prop_assert_eq!(&plan, &full);
                        state = rebuilt;
                    }
                }
                // Carry the plan out: deletes remove Jobs (the state sees them on a rebuild,
                // as deletes only come from full plans), timed-out Jobs are stopped and kept,
                // the status is written.
                for action in &full.actions {
                    match action {
                        Action::DeleteJob { job_name } | Action::StopJob { job_name, .. } => {
                            jobs.retain(|j| j.name != *job_name);
                            state = Err(Fallback::NotFollowed("jobs deleted"));
                        }
                        Action::TimeOutJob { job_name, why } => {
                            // A timeout is never planned incrementally, nor followed after.
                            prop_assert!(state.is_err(), "{} timed out incrementally", job_name);
                            let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                            job.state = JobState::TimedOut { why: why.clone() };
                        }
                        Action::FailStart { job_name, why } => {
                            prop_assert!(state.is_err(), "{} failed to start incrementally", job_name);
                            let job = jobs.iter_mut().find(|j| j.name == *job_name).unwrap();
                            job.state = JobState::CannotStart { why: why.clone() };
                        }
                        Action::CreateJob { .. }
                        | Action::SetJobDeadline { .. }
                        | Action::ResumeJob { .. } => {}
                    }
                }
                wf = written(wf, &full);
                last = full;
                if let Ok(state) = &state {
                    prop_assert_eq!(state.job_count(), jobs.len());
                }
                if wf.status.as_ref().unwrap().workflow_status.unwrap().is_terminal() {
                    break;
                }
            }
        }
    }
}
