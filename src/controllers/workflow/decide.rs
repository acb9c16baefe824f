//! Deciding: the plan of one pass, from the cached run state in O(degree) of the changed Jobs'
//! steps when it still holds, else from the core's full planner. No client: everything it
//! reads was observed first ([`super::observe`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use workflow_operator_core::crd::{WorkFlow, WorkFlowStatus};
use workflow_operator_core::incremental::{JobChange, RunState};
use workflow_operator_core::job_summary::JobSummary;
use workflow_operator_core::jobs;
use workflow_operator_core::plan::{self, Compiled, LifecycleEvent, ObservedJob, Plan};

use super::memory::{CachedRun, Wake};
use super::observe::Observed;

/// How long the timer's passes may plan from the cached run state (checking deadlines and
/// writing a deferred status) before a pass rebuilds it from the mirror with the full planner.
/// The state follows every Job change and the mirror's Job count, so the rebuild is a safety
/// net; a full pass of a 10,000-step workflow takes about 120 ms, during which its completions
/// wait, and every second that was an eighth of the workflow's time.
pub(super) const FULL_RECONCILE_EVERY: Duration = Duration::from_secs(10);

/// When the timer's pass must next look at a workflow `decision` planned (the plan carried
/// out): at the plan's next deadline, and by the full-reconcile safety net
/// ([`FULL_RECONCILE_EVERY`] after the run state was built when a pass moved it on
/// incrementally since; as long from `now` when no state is kept), or at the next tick when
/// `at_once` (the pass deferred its status, the workflow's rules read the clock, or a gate holds
/// steps back and their wants go stale). A state the full planner has just built is what a
/// rebuild would make again until a Job changes or is deleted, and the Job's event (kube-kopf
/// tells deletions, and a re-listing's changes once mirrored) starts a pass that moves it: the
/// net is not set for it, so a running workflow where nothing happens is not planned again
/// until its deadline (10,000 of them were 1,000 full passes a second).
pub(super) fn next_wake(decision: &Decision, at_once: bool, now: Instant) -> Wake {
    let by = if at_once {
        Some(now)
    } else if decision.state.is_none() {
        Some(now + FULL_RECONCILE_EVERY)
    } else {
        decision
            .incremental
            .then_some(decision.built_at + FULL_RECONCILE_EVERY)
    };
    Wake {
        deadline: decision.plan.next_timeout_at,
        by,
    }
}

/// What one pass decided: the plan, the run state to keep for the next pass (if any), when
/// that state was built in full, and whether the plan was made incrementally.
pub(super) struct Decision {
    pub(super) plan: Plan,
    pub(super) state: Option<RunState>,
    pub(super) built_at: Instant,
    pub(super) incremental: bool,
}

impl Decision {
    /// A plan made incrementally, from `run` (the remembered state, moved on by the plan).
    pub(super) fn incremental(plan: Plan, run: CachedRun) -> Decision {
        Decision {
            plan,
            state: Some(run.state),
            built_at: run.built_at,
            incremental: true,
        }
    }

    /// A plan made in full that keeps no run state: the next pass plans in full too.
    pub(super) fn without_state(plan: Plan) -> Decision {
        Decision {
            plan,
            state: None,
            built_at: Instant::now(),
            incremental: false,
        }
    }
}

/// What the decide stage hands on: what was observed, what was decided from it, and the
/// Jobs observed in full when the plan was made in full.
pub(super) struct Decided {
    pub(super) seen: Observed,
    pub(super) decision: Decision,
    /// The Jobs, explained, when the plan was made in full; `None` when incrementally.
    pub(super) jobs: Option<Vec<ObservedJob>>,
    /// What the plan was made behind (cached steps' hits, locks, the queue), once the gates
    /// planned again.
    pub(super) gate: Option<plan::Gate>,
}

/// The plan for the changed Jobs from the cached run state, in O(degree) of their steps, or
/// `None` when the full planner must decide: no cache, a cache made for another generation, run
/// or status, a pass without changed Jobs when the state was built [`FULL_RECONCILE_EVERY`]
/// ago or more, a change the state does not follow, or a state that knows a Job neither the
/// mirror nor our `unmirrored` creates show (a Job deleted).
///
/// Besides the changed Jobs, the state is given the Jobs the full planner would count that it
/// has not seen: the `unmirrored` Jobs we created (otherwise their steps look waiting and are
/// created again, a 409 each), and Jobs the mirror received after the batch was taken (they
/// come again in the next batch). While Jobs are created faster than the watch shows them (a
/// 10,000-step workflow), nearly every other pass fell back to the full planner for want of
/// these, and wrote the status.
pub(super) fn plan_incrementally(
    children: &[Arc<JobSummary>],
    unmirrored: &[ObservedJob],
    workflow: &WorkFlow,
    compiled: &Compiled,
    cached: Option<CachedRun>,
    changed: Vec<Arc<JobSummary>>,
    now: Timestamp,
) -> Option<(Plan, CachedRun)> {
    let mut cached = cached?;
    if changed.is_empty() && cached.built_at.elapsed() >= FULL_RECONCILE_EVERY {
        return None;
    }
    let uid = workflow.uid()?;
    let current = cached.generation == workflow.metadata.generation.unwrap_or_default()
        && cached.state.run() == compiled.run;
    let owned = |job: &JobSummary| job.owner_references().iter().any(|o| o.uid == uid);
    if !current || !changed.iter().all(|job| owned(job)) {
        return None;
    }
    // O(jobs) in pointer copies and lookups, but no parsing: the mirror and the state agree.
    let in_batch: HashSet<&str> = changed
        .iter()
        .filter_map(|j| j.meta().name.as_deref())
        .collect();
    let mut mirrored = 0;
    let mut arrived_since = Vec::new();
    for job in children.iter().filter(|j| owned(j)) {
        mirrored += 1;
        let name = job.meta().name.as_deref().unwrap_or_default();
        if !in_batch.contains(name) && !cached.state.knows(name) {
            arrived_since.push(job);
        }
    }
    let changes = unmirrored
        .iter()
        .cloned()
        .map(Some)
        .chain(changed.iter().map(|job| jobs::observe_job(job, now)))
        .chain(
            arrived_since
                .into_iter()
                .map(|job| jobs::observe_job(job, now)),
        )
        .map(|job| job.map(JobChange::Applied))
        .collect::<Option<Vec<_>>>()?;
    let plan = match cached.state.observe_all(&changes, now) {
        Ok(plan) => plan,
        Err(why) => {
            tracing::debug!(%why, workflow = %workflow.name_any(), "planning in full");
            return None;
        }
    };
    if mirrored + unmirrored.len() != cached.state.job_count() {
        return None;
    }
    Some((plan, cached))
}

/// The plan in full from `observed` (the workflow's Jobs, explained), and the run state the
/// incremental planner goes on from.
pub(super) fn plan_in_full(
    workflow: &WorkFlow,
    compiled: Arc<Compiled>,
    observed: &[ObservedJob],
    now: Timestamp,
) -> Decision {
    let (plan, state) = RunState::build(workflow, compiled, observed, now);
    Decision {
        plan,
        state: state.ok(),
        built_at: Instant::now(),
        incremental: false,
    }
}

/// The plan in full from `observed` behind `gate` (see [`plan::plan_gated`]). No run state is
/// kept: the incremental planner does not know the gate, so the next pass plans in full too.
pub(super) fn plan_gated(
    workflow: &WorkFlow,
    compiled: &Compiled,
    observed: &[ObservedJob],
    now: Timestamp,
    gate: &plan::Gate,
) -> Decision {
    Decision::without_state(plan::plan_gated(workflow, compiled, observed, now, gate))
}

/// The status a pass without changed Jobs (the timer's) writes from the cached state: what
/// passes with changes deferred, if it differs from `before` (the newest status handed over to
/// be written, else the stored one).
pub(super) fn deferred_status(
    state: &RunState,
    before: Option<&WorkFlowStatus>,
) -> Option<WorkFlowStatus> {
    let rendered = state.render();
    (before != Some(&rendered)).then_some(rendered)
}

/// A Job the API server refused (422): no retry can create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The step instance it was for, as the status names it (`build[3]`, `run1/build`).
    pub(super) step: String,
    pub(super) job: String,
    /// Why: `JobRefused` (the API server's 422) or `NoArtifactRepository`.
    pub(super) reason: &'static str,
    /// The API server's message, or the operator's.
    pub(super) message: String,
}

/// The full plan once the `refusals` are recorded in the status the first plan made (or the
/// stored one): the planner reads each as its step's failure ([`plan::refused_step_status`]).
/// `first` is that plan's status and lifecycle events; `observed` the workflow's Jobs (the
/// mirror's and those created but not yet mirrored). The plan's status is always set, to be
/// written.
pub(super) fn replan_refused(
    workflow: &WorkFlow,
    compiled: &Compiled,
    observed: &[ObservedJob],
    first: (Option<&WorkFlowStatus>, &[LifecycleEvent]),
    refusals: &[Refusal],
    now: Timestamp,
) -> Plan {
    let (first_status, first_events) = first;
    let mut recorded = workflow.clone();
    let status = recorded.status.get_or_insert_with(Default::default);
    if let Some(planned) = first_status {
        *status = planned.clone();
    }
    for refusal in refusals {
        status.steps.retain(|s| s.name != refusal.step);
        status.steps.push(plan::refused_step_status(
            &refusal.step,
            &refusal.job,
            refusal.reason,
            &refusal.message,
        ));
    }
    let mut replanned = plan::plan_compiled(&recorded, compiled, observed, now);
    replanned.status = replanned.status.or(recorded.status);
    // The moves the first plan made happened too (e.g. `Created -> Started`).
    replanned.events.splice(0..0, first_events.iter().cloned());
    replanned
}

#[cfg(test)]
mod tests {
    use super::super::observe::still_follows;
    use super::*;
    use workflow_operator_core::job_summary::{JobEnd, JobSummaryStatus};
    use workflow_operator_core::names;
    use workflow_operator_core::testing::{Jobs, creates};

    /// A started workflow (a and b ready, c after both, d after c), the state its first plan
    /// left in the cache, and its compiled form.
    fn started() -> (WorkFlow, Arc<Compiled>, CachedRun) {
        let mut wf = WorkFlow::test("w")
            .step("a", &[])
            .step("b", &[])
            .step("c", &["a", "b"])
            .step("d", &["c"])
            .build();
        let compiled = Arc::new(Compiled::new(&wf.spec));
        let (first, state) = RunState::build(&wf, compiled.clone(), &[], Timestamp::now());
        wf.status = first.status;
        let cached = CachedRun {
            generation: 1,
            state: state.expect("a started workflow is followed"),
            status_written_at: None,
            built_at: Instant::now(),
        };
        (wf, compiled, cached)
    }

    /// Step `step`'s Job as the mirror holds it, running or complete.
    fn mirrored(wf: &WorkFlow, compiled: &Compiled, step: &str, complete: bool) -> Arc<JobSummary> {
        let spec = wf
            .spec
            .containers
            .iter()
            .find(|s| s.step_name == step)
            .unwrap();
        let mut job: JobSummary = jobs::build_job(wf, spec, &compiled.run).unwrap().into();
        job.status = Some(JobSummaryStatus {
            ended: complete.then_some(JobEnd::Complete),
            ..Default::default()
        });
        Arc::new(job)
    }

    #[test]
    fn jobs_the_mirror_shows_beyond_the_batch_are_followed_not_created_again() {
        let (wf, compiled, cached) = started();
        // b's Job reached the mirror after the batch with a's was taken.
        let a = mirrored(&wf, &compiled, "a", false);
        let b = mirrored(&wf, &compiled, "b", false);
        let now = Timestamp::now();
        let (plan, run) = plan_incrementally(
            &[a.clone(), b],
            &[],
            &wf,
            &compiled,
            Some(cached),
            vec![a],
            now,
        )
        .expect("planned incrementally");
        assert_eq!(creates(&plan), Vec::<&str>::new());
        assert_eq!(run.state.job_count(), 2);
    }

    #[test]
    fn jobs_we_created_that_the_mirror_does_not_show_yet_are_not_created_again() {
        let (wf, compiled, cached) = started();
        let a = mirrored(&wf, &compiled, "a", false);
        let b_created = Jobs::of(&wf).active("b", Timestamp::now()).build();
        let now = Timestamp::now();
        let (plan, run) = plan_incrementally(
            std::slice::from_ref(&a),
            &b_created,
            &wf,
            &compiled,
            Some(cached),
            vec![a.clone()],
            now,
        )
        .expect("planned incrementally");
        assert_eq!(creates(&plan), Vec::<&str>::new());
        assert_eq!(run.state.job_count(), 2);
    }

    #[test]
    fn a_job_the_state_knows_but_the_mirror_lost_is_left_to_the_full_planner() {
        let (wf, compiled, cached) = started();
        let (a, b) = (
            mirrored(&wf, &compiled, "a", false),
            mirrored(&wf, &compiled, "b", false),
        );
        let now = Timestamp::now();
        let (_, cached) = plan_incrementally(
            &[a.clone(), b.clone()],
            &[],
            &wf,
            &compiled,
            Some(cached),
            vec![a.clone(), b],
            now,
        )
        .expect("planned incrementally");
        // b's Job was deleted: only a is left in the mirror.
        let planned = plan_incrementally(
            std::slice::from_ref(&a),
            &[],
            &wf,
            &compiled,
            Some(cached),
            vec![a.clone()],
            now,
        );
        assert!(planned.is_none());
    }

    #[test]
    fn a_pass_without_changes_writes_what_passes_with_changes_deferred() {
        let (wf, compiled, cached) = started();
        let (a, b) = (
            mirrored(&wf, &compiled, "a", true),
            mirrored(&wf, &compiled, "b", false),
        );
        let now = Timestamp::now();
        let (with_changes, cached) = plan_incrementally(
            &[a.clone(), b.clone()],
            &[],
            &wf,
            &compiled,
            Some(cached),
            vec![a, b],
            now,
        )
        .expect("planned incrementally");
        let rendered = with_changes.status.expect("a finished: the status changed");
        assert_eq!(rendered.executed, vec!["a".to_string()]);
        // That status was deferred: the stored one still lists nothing executed.
        assert_eq!(
            deferred_status(&cached.state, wf.status.as_ref()),
            Some(rendered.clone())
        );
        // Once it is written or handed over to be, there is nothing left to write.
        assert_eq!(deferred_status(&cached.state, Some(&rendered)), None);
    }

    #[test]
    fn a_cached_state_follows_its_own_statuses_not_one_changed_by_another() {
        let (wf, _, cached) = started();
        let stored = wf.status.clone().expect("the first plan's status");
        // Our own status written behind landed: more progress, the same phase.
        let mut ours = stored.clone();
        ours.progress = Some("1/4".into());
        ours.executed = vec!["a".into()];
        assert!(still_follows(&cached.state, Some(&ours), None));
        // Someone else wrote a message the state never rendered...
        let mut edited = stored.clone();
        edited.message = Some("edited by hand".into());
        assert!(!still_follows(&cached.state, Some(&edited), None));
        // ...unless a status of ours, which will replace it, is on its way.
        assert!(still_follows(&cached.state, Some(&edited), Some(&ours)));
        // Our first status is on its way; nothing is stored yet.
        assert!(still_follows(&cached.state, None, Some(&stored)));
        assert!(!still_follows(&cached.state, None, None));
    }

    #[test]
    fn a_refused_job_fails_its_step_in_the_status_written_at_once() {
        let (wf, compiled, _) = started();
        // The first plan created a and b; the API server refused a's Job.
        let plan = Plan {
            status: wf.status.clone(),
            ..RunState::build(&wf, compiled.clone(), &[], Timestamp::now()).0
        };
        let job = names::job_name("w", "a", &compiled.run);
        let message = "spec.template.spec.volumes[0].name: Invalid value: \"Bad_Name\"";
        let refusals = vec![Refusal {
            step: "a".to_string(),
            job: job.clone(),
            reason: plan::REASON_JOB_REFUSED,
            message: message.to_string(),
        }];
        let replanned = replan_refused(
            &wf,
            &compiled,
            &[],
            (plan.status.as_ref(), &plan.events),
            &refusals,
            Timestamp::now(),
        );
        let status = replanned.status.clone().expect("a status to write");
        assert_eq!(
            status.workflow_status,
            Some(workflow_operator_core::lifecycle::Phase::Failed)
        );
        assert_eq!(
            status.message.as_deref(),
            Some(format!("step a failed: the API server refused its Job: {message}").as_str())
        );
        let entry = status.steps.iter().find(|s| s.name == "a").unwrap();
        assert_eq!(
            entry.reason.as_deref(),
            Some(workflow_operator_core::plan::REASON_JOB_REFUSED)
        );
        assert_eq!(entry.job.as_deref(), Some(job.as_str()));
        assert!(creates(&replanned).is_empty(), "{:?}", replanned.actions);
    }

    #[test]
    fn a_pass_without_changes_rebuilds_a_state_built_long_ago() {
        let (wf, compiled, mut cached) = started();
        cached.built_at = Instant::now()
            .checked_sub(FULL_RECONCILE_EVERY)
            .expect("the clock is past the interval");
        let planned = plan_incrementally(
            &[],
            &[],
            &wf,
            &compiled,
            Some(cached),
            vec![],
            Timestamp::now(),
        );
        assert!(planned.is_none());
    }

    /// A workflow whose step `a` (timeout 30 s) runs since `since`, planned in full at `now`.
    fn running_with_timeout(since: Timestamp, now: Timestamp) -> Decision {
        let wf = WorkFlow::test("w").step("a", &[]).timeout(30).build();
        let compiled = Arc::new(Compiled::new(&wf.spec));
        let (first, _) = RunState::build(&wf, compiled.clone(), &[], since);
        let wf = WorkFlow {
            status: first.status,
            ..wf
        };
        let jobs = Jobs::of(&wf).active("a", since).build();
        plan_in_full(&wf, compiled, &jobs, now)
    }

    #[test]
    fn a_moved_state_wakes_the_timer_at_its_deadline_or_the_safety_net_whichever_first() {
        let since = Timestamp::now();
        let decision = running_with_timeout(since, since);
        assert!(
            decision.state.is_some(),
            "a running plain workflow is followed"
        );
        let timeout_at = since + k8s_openapi::jiff::SignedDuration::from_secs(30);
        assert_eq!(decision.plan.next_timeout_at, Some(timeout_at));
        let now = Instant::now();
        let moved = Decision {
            incremental: true,
            ..decision
        };
        let wake = next_wake(&moved, false, now);
        assert_eq!(wake.deadline, Some(timeout_at));
        let by = moved.built_at + FULL_RECONCILE_EVERY;
        assert_eq!(wake.by, Some(by));
        let (second, a_second_before) = (
            std::time::Duration::from_secs(1),
            k8s_openapi::jiff::SignedDuration::from_secs(1),
        );
        // Nothing due between the pass and the first of the two.
        assert!(!wake.is_due(now, since));
        assert!(!wake.is_due(by - second, timeout_at - a_second_before));
        // The deadline is due on the wall clock, the safety net on the monotonic one.
        assert!(wake.is_due(now, timeout_at));
        assert!(wake.is_due(by, since));
    }

    #[test]
    fn a_state_just_built_in_full_waits_for_its_deadline_alone() {
        let since = Timestamp::now();
        let decision = running_with_timeout(since, since);
        assert!(!decision.incremental && decision.state.is_some());
        let timeout_at = since + k8s_openapi::jiff::SignedDuration::from_secs(30);
        let wake = next_wake(&decision, false, Instant::now());
        assert_eq!(wake.by, None);
        let an_hour = std::time::Duration::from_secs(3600);
        assert!(!wake.is_due(Instant::now() + an_hour, since));
        assert!(wake.is_due(Instant::now(), timeout_at));
    }

    #[test]
    fn a_deferred_status_wakes_the_timer_at_its_next_tick() {
        let since = Timestamp::now();
        let now = Instant::now();
        let wake = next_wake(&running_with_timeout(since, since), true, now);
        assert_eq!(wake.by, Some(now));
        assert!(wake.is_due(now, since));
    }

    #[test]
    fn without_a_kept_state_the_safety_net_counts_from_the_pass() {
        let since = Timestamp::now();
        let mut decision = running_with_timeout(since, since);
        decision.state = None;
        let now = Instant::now() + std::time::Duration::from_secs(3);
        let wake = next_wake(&decision, false, now);
        assert_eq!(wake.by, Some(now + FULL_RECONCILE_EVERY));
    }
}
