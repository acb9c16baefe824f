//! The job controller: runs batch/v1 Jobs as the real one does, as far as this project and its
//! users need. Started by [`crate::controllers::spawn_controllers`]; what the API server does to
//! a new Job (its selector, labels and defaults) is [`crate::registry::jobs`].
//!
//! For each Job it creates pods from the template (named `{job}-{5 random chars}`, with a
//! controller owner reference), counts the pods that finish, and writes `status` as a current
//! Kubernetes (1.31+) does: `startTime`, `active`, `ready`, `succeeded`, `failed`, `terminating`,
//! `uncountedTerminatedPods`, `completionTime`, and the conditions `SuccessCriteriaMet` then
//! `Complete`, `FailureTarget` then `Failed` (reasons `BackoffLimitExceeded` and
//! `DeadlineExceeded`), `Suspended`. It honours `parallelism`, `completions`, `backoffLimit`
//! (pod failures, or container restarts with `restartPolicy: OnFailure`),
//! `activeDeadlineSeconds` (counted from `startTime`; a later change applies), `suspend` and
//! `ttlSecondsAfterFinished`.
//!
//! A failed pod is replaced after the controller's back-off ([`JobBackoff`]: 10 s after the
//! first failure since the last success, doubling, at most 6 minutes), which
//! `DevClusterOptions::job_backoff` can shorten for tests and demos ([`JobBackoff::FAST`]).
//! `completionMode: Indexed` gives each pod an index (`JOB_COMPLETION_INDEX`, the annotation
//! and label `batch.kubernetes.io/job-completion-index`, name `{job}-{index}-…`, hostname
//! `{job}-{index}`) and completes when every index from 0 to `completions - 1` succeeded
//! (`status.completedIndexes`).
//!
//! Differences from the real controller, on purpose:
//! - finished pods are counted in memory instead of through the `batch.kubernetes.io/job-tracking`
//!   pod finalizer (the store lives in the same process, so nothing survives a restart anyway),
//!   which saves two writes per pod;
//! - pods deleted because the Job was suspended or scaled down are not counted as failed;
//! - `podFailurePolicy`, `successPolicy` and `backoffLimitPerIndex` are not implemented;
//! - the only Event written is `FailedCreate`, below.
//!
//! A pod the store or the API server's admission refuses (a `serviceAccountName` that does not
//! exist, [`crate::registry::pods::admit_pod`]) is not created; the refusal is recorded as a
//! `Warning` Event `FailedCreate`, `Error creating: <the API server's message>`, on the Job
//! (pkg/controller/controller_utils.go, `RealPodControl.createPods`: `FailedCreatePodReason`),
//! and the controller tries again after its API back-off (pkg/controller/job/job_controller.go:
//! the work queue's `DefaultJobApiBackOff` 1 s doubling to `MaxJobApiBackOff` 1 minute).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::api::error::ApiError;
use crate::api::resources::{GroupResource, Registry, ResourceInfo, builtin};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Queue, Reconciler, is_deleting};
use crate::storage::store::{
    DeleteOptions, Deleted, EventType, Propagation, Store, StoredObject, Target, WatchEvent,
    now_rfc3339,
};

const SUCCESS_REASON: &str = "CompletionsReached";
const SUCCESS_MESSAGE: &str = "Reached expected number of succeeded pods";
const BACKOFF_REASON: &str = "BackoffLimitExceeded";
const BACKOFF_MESSAGE: &str = "Job has reached the specified backoff limit";
const DEADLINE_REASON: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Job was active longer than specified deadline";

/// The longest name prefix `generateName` keeps, so that prefix plus 5 characters is a valid
/// DNS-1123 label (as the real name generator does).
const MAX_GENERATE_NAME_PREFIX: usize = 58;

/// Annotation and label of an Indexed Job's pod: its completion index.
pub const COMPLETION_INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";

/// How long the Job controller waits before replacing a failed pod.
///
/// k8s.io/kubernetes pkg/controller/job/job_controller.go: `DefaultJobPodFailureBackOff` (10 s)
/// and `MaxJobPodFailureBackOff` (360 s); pkg/controller/job/backoff_utils.go
/// (`getRemainingTime`): after `n` pod failures since the last success, the next pod is created
/// `base * 2^(n-1)` (at most `max`) after the last failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobBackoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for JobBackoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(10),
            max: Duration::from_secs(360),
        }
    }
}

impl JobBackoff {
    /// 100 ms doubling up to 1 s: retries in tests and demos take moments, not minutes.
    pub const FAST: JobBackoff = JobBackoff {
        base: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };

    /// The wait after `failures` failures since the last success (none: no wait).
    pub fn delay(&self, failures: usize) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = u32::try_from(failures - 1).unwrap_or(u32::MAX).min(20);
        self.base
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.max)
    }
}

/// Shared, so that `DevClusterOptions::job_backoff` can set it once the controllers run.
pub(crate) type SharedBackoff = Arc<std::sync::Mutex<JobBackoff>>;

/// When the controller tries again after `refused` pod creations in a row were refused: 1 s,
/// doubling, at most a minute (the job controller's work queue rate limiter).
fn api_retry_delay(refused: u32) -> Duration {
    Duration::from_secs(1)
        .saturating_mul(2u32.saturating_pow(refused.saturating_sub(1).min(6)))
        .min(Duration::from_secs(60))
}

/// The fields of a Job's spec the controller acts on.
#[derive(Debug, Clone, PartialEq)]
struct JobSpec {
    parallelism: i64,
    /// `None`: a work-queue Job, complete when any pod succeeded and none is left running.
    completions: Option<i64>,
    backoff_limit: i64,
    active_deadline: Option<Duration>,
    suspend: bool,
    ttl_after_finished: Option<Duration>,
    on_failure: bool,
    /// `completionMode: Indexed` (which requires `completions`).
    indexed: bool,
}

impl JobSpec {
    fn parse(job: &Value) -> Self {
        let int = |path: &str| job.pointer(path).and_then(Value::as_i64);
        let seconds = |path: &str| {
            int(path).map(|s| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0)))
        };
        Self {
            parallelism: int("/spec/parallelism").unwrap_or(1).max(0),
            completions: int("/spec/completions").map(|c| c.max(0)),
            backoff_limit: int("/spec/backoffLimit").unwrap_or(6).max(0),
            active_deadline: seconds("/spec/activeDeadlineSeconds"),
            suspend: job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true),
            ttl_after_finished: seconds("/spec/ttlSecondsAfterFinished"),
            on_failure: job
                .pointer("/spec/template/spec/restartPolicy")
                .and_then(Value::as_str)
                == Some("OnFailure"),
            indexed: job.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed"),
        }
    }

    /// How many pods should be running now, given how many succeeded.
    fn wanted_active(&self, succeeded: usize) -> i64 {
        let succeeded = i64::try_from(succeeded).unwrap_or(i64::MAX);
        match self.completions {
            Some(completions) => self.parallelism.min((completions - succeeded).max(0)),
            None if succeeded > 0 => 0,
            None => self.parallelism,
        }
    }
}

/// Why a Job is finishing: the interim condition and the final one that follows once no pod is
/// terminating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    Succeeded,
    BackoffLimitExceeded,
    DeadlineExceeded,
}

impl Finish {
    /// (interim type, final type, reason, message)
    fn conditions(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Finish::Succeeded => (
                "SuccessCriteriaMet",
                "Complete",
                SUCCESS_REASON,
                SUCCESS_MESSAGE,
            ),
            Finish::BackoffLimitExceeded => {
                ("FailureTarget", "Failed", BACKOFF_REASON, BACKOFF_MESSAGE)
            }
            Finish::DeadlineExceeded => {
                ("FailureTarget", "Failed", DEADLINE_REASON, DEADLINE_MESSAGE)
            }
        }
    }

    /// The finish an existing interim condition stands for.
    fn from_condition(cond: &Value) -> Option<Self> {
        match (
            cond.get("type").and_then(Value::as_str)?,
            cond.get("reason").and_then(Value::as_str),
        ) {
            ("SuccessCriteriaMet", _) => Some(Finish::Succeeded),
            ("FailureTarget", Some(DEADLINE_REASON)) => Some(Finish::DeadlineExceeded),
            ("FailureTarget", _) => Some(Finish::BackoffLimitExceeded),
            _ => None,
        }
    }
}

/// The counts a finish decision is made from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    succeeded: usize,
    failed: usize,
    active: usize,
    /// Container restarts of active pods (counted as failures with `restartPolicy: OnFailure`).
    restarts: i64,
}

/// Whether the Job must finish now, and why: enough successes, too many failures, or its
/// deadline passed (in that order, as the real controller checks them).
fn finish_decision(spec: &JobSpec, counts: Counts, deadline_passed: bool) -> Option<Finish> {
    let succeeded = i64::try_from(counts.succeeded).unwrap_or(i64::MAX);
    let done = match spec.completions {
        Some(completions) => succeeded >= completions,
        None => succeeded > 0 && counts.active == 0,
    };
    if done {
        return Some(Finish::Succeeded);
    }
    let failed = i64::try_from(counts.failed).unwrap_or(i64::MAX);
    let restarts_exceeded = spec.on_failure
        && if spec.backoff_limit == 0 {
            counts.restarts > 0
        } else {
            counts.restarts >= spec.backoff_limit
        };
    if failed > spec.backoff_limit || restarts_exceeded {
        return Some(Finish::BackoffLimitExceeded);
    }
    if deadline_passed {
        return Some(Finish::DeadlineExceeded);
    }
    None
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": type_,
        "status": status,
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

fn find_condition<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a Value> {
    conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn is_true(conditions: &[Value], type_: &str) -> bool {
    find_condition(conditions, type_)
        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

/// Sets a condition's status as the real `ensureJobConditionStatus` does: an existing condition
/// with another status is updated (with new times); a missing one is added only when "True".
/// Returns whether anything changed.
fn ensure_condition_status(
    conditions: &mut Vec<Value>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
    {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(status) {
                return false;
            }
            *existing = condition(type_, status, reason, message, now);
            true
        }
        None if status == "True" => {
            conditions.push(condition(type_, status, reason, message, now));
            true
        }
        None => false,
    }
}

/// The phase of a pod, as far as the job controller cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    fn of(pod: &Value) -> Self {
        match pod.pointer("/status/phase").and_then(Value::as_str) {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Pending,
        }
    }

    fn finished(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The last known state of one pod a Job owns.
#[derive(Debug, Clone)]
struct PodView {
    uid: String,
    owner_uid: String,
    phase: PodPhase,
    deleting: bool,
    ready: bool,
    restarts: i64,
    /// An Indexed Job's pod: its completion index.
    index: Option<i64>,
    /// Removed from the store; kept until counted.
    gone: bool,
}

impl PodView {
    fn of(pod: &Value, owner_uid: &str) -> Self {
        let ready = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| is_true(c, "Ready"));
        let restarts = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .map(|statuses| {
                statuses
                    .iter()
                    .filter_map(|s| s.get("restartCount").and_then(Value::as_i64))
                    .sum()
            })
            .unwrap_or(0);
        Self {
            uid: pod
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            owner_uid: owner_uid.to_string(),
            phase: PodPhase::of(pod),
            deleting: is_deleting(pod),
            ready,
            restarts,
            index: pod
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(COMPLETION_INDEX_KEY))
                .and_then(Value::as_str)
                .and_then(|i| i.parse().ok()),
            gone: false,
        }
    }

    fn active(&self) -> bool {
        !self.gone && !self.deleting && !self.phase.finished()
    }

    fn terminating(&self) -> bool {
        !self.gone && self.deleting && !self.phase.finished()
    }
}

/// (namespace, name) of a Job.
type JobKey = (String, String);

/// What the controller knows about one Job between reconciles.
#[derive(Debug, Default)]
struct JobState {
    uid: String,
    pods: BTreeMap<String, PodView>,
    succeeded: HashSet<String>,
    failed: HashSet<String>,
    /// Pods deleted for a suspension or scale-down: not counted when they go.
    uncounted: HashSet<String>,
    /// `status.startTime` as written by this controller, with the precise instant (the stored
    /// timestamp has whole seconds only).
    start: Option<(String, Instant)>,
    /// Likewise for the final condition's `lastTransitionTime`.
    finish: Option<(String, Instant)>,
    last_failure: Option<Instant>,
    /// Pod failures since the last success, for the back-off.
    failures_since_success: usize,
    /// An Indexed Job's succeeded indexes.
    succeeded_indexes: std::collections::BTreeSet<i64>,
    /// Whether the Job is Indexed (its `succeeded` counts indexes).
    indexed: bool,
    /// The resourceVersion of this controller's last status write, whose event needs no work.
    written_rv: u64,
    /// Pod creations refused in a row, for the API back-off.
    refused_creates: u32,
}

impl JobState {
    fn is_counted(&self, uid: &str) -> bool {
        self.succeeded.contains(uid) || self.failed.contains(uid) || self.uncounted.contains(uid)
    }

    fn count_failed(&mut self, uid: &str, now: Instant) {
        if self.failed.insert(uid.to_string()) {
            self.last_failure = Some(now);
            self.failures_since_success += 1;
        }
    }

    /// Counts every pod that finished (or went) since the last reconcile; forgets gone ones.
    fn count_finished_pods(&mut self, now: Instant) {
        let views: Vec<(String, PodView)> = self
            .pods
            .iter()
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        for (name, view) in views {
            if !self.is_counted(&view.uid) {
                if view.phase == PodPhase::Succeeded {
                    self.succeeded.insert(view.uid.clone());
                    self.failures_since_success = 0;
                    if let Some(index) = view.index {
                        self.succeeded_indexes.insert(index);
                    }
                } else if view.phase == PodPhase::Failed || view.gone {
                    // A pod removed before it finished counts as failed, as on a real cluster.
                    self.count_failed(&view.uid, now);
                }
            }
            if view.gone {
                self.pods.remove(&name);
            }
        }
    }

    /// `succeeded` as the status counts it: pods, or for an Indexed Job succeeded indexes
    /// (pkg/controller/job/job_controller.go: `succeeded = succeededIndexes.total()`).
    fn succeeded_count(&self) -> usize {
        if self.indexed {
            self.succeeded_indexes.len()
        } else {
            self.succeeded.len()
        }
    }

    /// The indexes an Indexed Job still needs pods for: neither succeeded nor held by an
    /// active pod, lowest first (pkg/controller/job/indexed_job_utils.go, `firstPendingIndexes`).
    fn pending_indexes(&self, completions: i64, count: usize) -> Vec<i64> {
        let held: std::collections::HashSet<i64> = self
            .pods
            .values()
            .filter(|p| p.active())
            .filter_map(|p| p.index)
            .collect();
        (0..completions)
            .filter(|i| !self.succeeded_indexes.contains(i) && !held.contains(i))
            .take(count)
            .collect()
    }

    /// (name, uid) of the pods running or about to.
    fn active_pods(&self) -> Vec<(String, String)> {
        self.pods
            .iter()
            .filter(|(_, p)| p.active())
            .map(|(n, p)| (n.clone(), p.uid.clone()))
            .collect()
    }

    fn counts(&self) -> Counts {
        let active = || self.pods.values().filter(|p| p.active());
        Counts {
            succeeded: self.succeeded_count(),
            failed: self.failed.len(),
            active: active().count(),
            restarts: active().map(|p| p.restarts).sum(),
        }
    }
}

/// The job controller; see the module documentation.
pub(crate) struct JobController {
    store: Store,
    jobs_info: Arc<ResourceInfo>,
    pods_info: Arc<ResourceInfo>,
    namespaces_info: Arc<ResourceInfo>,
    jobs_gr: GroupResource,
    pods_gr: GroupResource,
    jobs: HashMap<JobKey, JobState>,
    /// The Job each known pod belongs to, by (namespace, pod name).
    pod_owner: HashMap<(String, String), JobKey>,
    backoff: SharedBackoff,
    registry: Registry,
    events: Recorder,
}

impl JobController {
    pub fn new(store: Store, registry: Registry, backoff: SharedBackoff) -> Self {
        let jobs_info = builtin(&registry, "batch", "jobs");
        let pods_info = builtin(&registry, "", "pods");
        Self {
            events: Recorder::new(store.clone(), registry.clone(), "job-controller"),
            store,
            jobs_gr: jobs_info.group_resource(),
            pods_gr: pods_info.group_resource(),
            jobs_info,
            pods_info,
            namespaces_info: builtin(&registry, "", "namespaces"),
            jobs: HashMap::new(),
            pod_owner: HashMap::new(),
            backoff,
            registry,
        }
    }

    fn observe_pod(
        &mut self,
        event_type: EventType,
        pod: &StoredObject,
        queue: &mut Queue<JobKey>,
    ) {
        let pod_key = (pod.namespace().to_string(), pod.name().to_string());
        let owner = controller_job(&pod.value)
            .map(|(name, uid)| ((pod.namespace().to_string(), name), uid));
        if event_type == EventType::Deleted {
            if let Some(job_key) = self.pod_owner.remove(&pod_key) {
                let state = self.jobs.entry(job_key.clone()).or_default();
                if let Some(view) = state.pods.get_mut(&pod_key.1) {
                    view.phase = PodPhase::of(&pod.value);
                    view.gone = true;
                }
                queue.add(job_key);
            }
            return;
        }
        let previous = self.pod_owner.get(&pod_key).cloned();
        if let Some(previous) = previous
            && owner.as_ref().is_none_or(|(key, _)| *key != previous)
        {
            // No longer this Job's pod (orphaned or re-owned): forget it, uncounted.
            if let Some(state) = self.jobs.get_mut(&previous) {
                state.pods.remove(&pod_key.1);
            }
            self.pod_owner.remove(&pod_key);
            queue.add(previous);
        }
        if let Some((job_key, owner_uid)) = owner {
            self.jobs
                .entry(job_key.clone())
                .or_default()
                .pods
                .insert(pod_key.1.clone(), PodView::of(&pod.value, &owner_uid));
            self.pod_owner.insert(pod_key, job_key.clone());
            queue.add(job_key);
        }
    }

    fn forget(&mut self, key: &JobKey) {
        if let Some(state) = self.jobs.remove(key) {
            for (pod, view) in state.pods {
                if !view.gone {
                    self.pod_owner.remove(&(key.0.clone(), pod));
                }
            }
        }
    }

    fn namespace_terminating(&self, namespace: &str) -> bool {
        self.store
            .get(&self.namespaces_info, "", namespace)
            .map_or(true, |ns| is_deleting(&ns.value))
    }

    fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> bool {
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(uid.to_string()),
            precondition_rv: None,
            grace_period_seconds: None,
        };
        match self
            .store
            .delete(&self.pods_info, namespace, name, &options)
        {
            Ok(Deleted::Removed(_)) => true,
            Ok(Deleted::Pending(_)) => false,
            Err(error) if error.code == 404 || error.code == 409 => true,
            Err(error) => {
                tracing::warn!(%error, namespace, pod = name, "cannot delete pod");
                false
            }
        }
    }

    fn create_pod(
        &self,
        job: &StoredObject,
        index: Option<i64>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut pod = pod_from_template(&job.value);
        if let Some(index) = index {
            with_completion_index(&mut pod, &job.value, index);
        }
        // The API server's admission, as for any pod created through it.
        crate::registry::pods::admit_pod(
            &self.store,
            &self.registry,
            &self.pods_info,
            job.namespace(),
            &mut pod,
        )?;
        let mut attempt = 0;
        loop {
            let created =
                self.store
                    .create_with(&self.pods_info, job.namespace(), pod.clone(), |obj| {
                        crate::registry::pods::pod_defaults_on_create(obj);
                        Ok(())
                    });
            match created {
                // A generated name can collide; the real controller's next sync retries too.
                Err(error) if error.reason == "AlreadyExists" && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    /// One sync of one Job: count what finished, decide, act on pods, write status, set the
    /// timer.
    fn reconcile_job(&mut self, key: &JobKey, queue: &mut Queue<JobKey>) {
        let Ok(job) = self.store.get(&self.jobs_info, &key.0, &key.1) else {
            queue.set_timer(key.clone(), None);
            self.forget(key);
            return;
        };
        let mut state = self.jobs.remove(key).unwrap_or_default();
        if state.uid != job.uid() {
            // A new Job under an old name (or the first sight of this one).
            state = JobState {
                uid: job.uid().to_string(),
                pods: std::mem::take(&mut state.pods),
                ..JobState::default()
            };
        }
        state.pods.retain(|_, p| p.owner_uid == state.uid);
        let spec = JobSpec::parse(&job.value);
        state.indexed = spec.indexed && spec.completions.is_some();
        let old_status = job.value.get("status").cloned().unwrap_or(json!({}));
        let mut draft = Draft::of(&old_status);
        state.count_finished_pods(draft.now);

        if draft.is_finished() {
            self.finished(key, &spec, &mut state, &mut draft);
        } else if let Some(finish) = draft.interim().or_else(|| {
            let decided =
                finish_decision(&spec, state.counts(), draft.deadline_passed(&spec, &state))?;
            draft.add_condition(decided.conditions().0, decided);
            Some(decided)
        }) {
            self.finishing(key, finish, &spec, &mut state, &mut draft);
        } else if is_deleting(&job.value) {
            // Being deleted (foreground): the garbage collector removes the pods; start none.
        } else if spec.suspend {
            self.suspended(key, &mut state, &mut draft);
        } else {
            self.running(key, &job, &spec, &mut state, &mut draft);
        }

        let new_status = render_status(&state, &old_status, &draft);
        if job.value.get("status") != Some(&new_status) {
            let written = self.store.modify(
                &self.jobs_info,
                &key.0,
                &key.1,
                Target::Status,
                move |old, _| {
                    let mut new = old.clone();
                    new["status"] = new_status.clone();
                    Ok(new)
                },
            );
            match written {
                Ok(stored) => state.written_rv = stored.resource_version(),
                Err(error) => tracing::warn!(%error, job = %key.1, "cannot write job status"),
            }
        }
        queue.set_timer(key.clone(), draft.wake);
        self.jobs.insert(key.clone(), state);
    }

    /// A finished Job: nothing may run, and `ttlSecondsAfterFinished` deletes it.
    fn finished(&self, key: &JobKey, spec: &JobSpec, state: &mut JobState, draft: &mut Draft) {
        for (name, uid) in state.active_pods() {
            if self.delete_pod(&key.0, &name, &uid) {
                state.pods.remove(&name);
            }
            state.count_failed(&uid, draft.now);
        }
        let Some(ttl) = spec.ttl_after_finished else {
            return;
        };
        let final_type = if is_true(&draft.conditions, "Complete") {
            "Complete"
        } else {
            "Failed"
        };
        let finished_at = find_condition(&draft.conditions, final_type)
            .and_then(|c| c.get("lastTransitionTime"))
            .and_then(Value::as_str)
            .map_or(draft.now, |t| instant_of(t, state.finish.as_ref()));
        let expires = finished_at + ttl;
        if expires > draft.now {
            draft.wake_at(expires);
            return;
        }
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(state.uid.clone()),
            precondition_rv: None,
            grace_period_seconds: None,
        };
        match self.store.delete(&self.jobs_info, &key.0, &key.1, &options) {
            Ok(_) => {}
            Err(error) if error.code == 404 || error.code == 409 => {}
            Err(error) => tracing::warn!(%error, job = %key.1, "cannot delete an expired job"),
        }
    }

    /// A Job with an interim condition: every pod still running is stopped (and counts as
    /// failed); once none is terminating, the final condition follows.
    fn finishing(
        &self,
        key: &JobKey,
        finish: Finish,
        spec: &JobSpec,
        state: &mut JobState,
        draft: &mut Draft,
    ) {
        for (name, uid) in state.active_pods() {
            if self.delete_pod(&key.0, &name, &uid) {
                state.pods.remove(&name);
            } else if let Some(view) = state.pods.get_mut(&name) {
                view.deleting = true;
            }
            state.count_failed(&uid, draft.now);
        }
        if state.pods.values().any(PodView::terminating) {
            return;
        }
        draft.add_condition(finish.conditions().1, finish);
        state.finish = Some((draft.now_text.clone(), draft.now));
        if finish == Finish::Succeeded {
            draft.completion_time = Some(draft.now_text.clone());
        }
        if let Some(ttl) = spec.ttl_after_finished {
            draft.wake_at(draft.now + ttl);
        }
    }

    /// A suspended Job: no pods (those removed are not failures), condition `Suspended`.
    fn suspended(&self, key: &JobKey, state: &mut JobState, draft: &mut Draft) {
        for (name, uid) in state.active_pods() {
            state.uncounted.insert(uid.clone());
            if self.delete_pod(&key.0, &name, &uid) {
                state.pods.remove(&name);
            }
        }
        let now = draft.now_text.clone();
        ensure_condition_status(
            &mut draft.conditions,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            &now,
        );
    }

    /// A running Job: as many pods as `parallelism` and the remaining completions ask for,
    /// replacing failed ones after [`retry_delay`]; the deadline timer.
    fn running(
        &mut self,
        key: &JobKey,
        job: &StoredObject,
        spec: &JobSpec,
        state: &mut JobState,
        draft: &mut Draft,
    ) {
        let now = draft.now_text.clone();
        let resumed = ensure_condition_status(
            &mut draft.conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            &now,
        );
        if resumed || draft.start_time.is_none() {
            // A resumed Job's deadline counts from the resumption.
            draft.start_time = Some(now.clone());
            state.start = Some((now, draft.now));
        }
        if let Some(deadline) = spec.active_deadline
            && let Some(start) = draft.start(state)
        {
            draft.wake_at(start + deadline);
        }
        let active = state.active_pods();
        let missing = spec.wanted_active(state.succeeded_count())
            - i64::try_from(active.len()).unwrap_or(i64::MAX);
        if missing < 0 {
            // Parallelism went down: stop the extra pods, uncounted.
            let extra = usize::try_from(-missing).unwrap_or(0);
            for (name, uid) in active.into_iter().take(extra) {
                state.uncounted.insert(uid.clone());
                if self.delete_pod(&key.0, &name, &uid) {
                    state.pods.remove(&name);
                }
            }
            return;
        }
        if missing == 0 || self.namespace_terminating(&key.0) {
            // (The API server refuses new objects in a terminating namespace.)
            return;
        }
        if let Some(last) = state.last_failure {
            let backoff = *self.backoff.lock().expect("backoff lock poisoned");
            let retry_at = last + backoff.delay(state.failures_since_success);
            if retry_at > draft.now {
                draft.wake_at(retry_at);
                return;
            }
        }
        let count = usize::try_from(missing).unwrap_or(0);
        let indexes: Vec<Option<i64>> = match spec.completions {
            Some(completions) if state.indexed => state
                .pending_indexes(completions, count)
                .into_iter()
                .map(Some)
                .collect(),
            _ => vec![None; count],
        };
        for index in indexes {
            match self.create_pod(job, index) {
                Ok(pod) => {
                    state.refused_creates = 0;
                    self.pod_owner
                        .insert((key.0.clone(), pod.name().to_string()), key.clone());
                    state
                        .pods
                        .insert(pod.name().to_string(), PodView::of(&pod.value, &state.uid));
                }
                Err(error) => {
                    tracing::debug!(%error, job = %key.1, "cannot create pod");
                    self.events.warn(
                        job,
                        "FailedCreate",
                        &format!("Error creating: {}", error.message),
                    );
                    state.refused_creates = state.refused_creates.saturating_add(1);
                    draft.wake_at(draft.now + api_retry_delay(state.refused_creates));
                    break;
                }
            }
        }
    }
}

/// The parts of a Job's status one reconcile rewrites, and when to reconcile again.
#[derive(Debug)]
struct Draft {
    conditions: Vec<Value>,
    start_time: Option<String>,
    completion_time: Option<String>,
    wake: Option<Instant>,
    now: Instant,
    now_text: String,
}

impl Draft {
    fn of(status: &Value) -> Self {
        let text = |field: &str| status.get(field).and_then(Value::as_str).map(String::from);
        Self {
            conditions: status
                .get("conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            start_time: text("startTime"),
            completion_time: text("completionTime"),
            wake: None,
            now: Instant::now(),
            now_text: now_rfc3339(),
        }
    }

    fn is_finished(&self) -> bool {
        is_true(&self.conditions, "Complete") || is_true(&self.conditions, "Failed")
    }

    /// The finish an interim condition already set stands for.
    fn interim(&self) -> Option<Finish> {
        self.conditions
            .iter()
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .find_map(Finish::from_condition)
    }

    fn add_condition(&mut self, type_: &str, finish: Finish) {
        let (_, _, reason, message) = finish.conditions();
        self.conditions
            .push(condition(type_, "True", reason, message, &self.now_text));
    }

    fn start(&self, state: &JobState) -> Option<Instant> {
        self.start_time
            .as_deref()
            .map(|t| instant_of(t, state.start.as_ref()))
    }

    /// `activeDeadlineSeconds` has passed since `startTime` (never while suspended).
    fn deadline_passed(&self, spec: &JobSpec, state: &JobState) -> bool {
        !spec.suspend
            && matches!(
                (spec.active_deadline, self.start(state)),
                (Some(deadline), Some(start)) if start + deadline <= self.now
            )
    }

    fn wake_at(&mut self, at: Instant) {
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }
}

impl Reconciler for JobController {
    type Key = JobKey;

    fn observe(&mut self, event: &WatchEvent, queue: &mut Queue<JobKey>) {
        if event.gr == self.pods_gr {
            self.observe_pod(event.event_type, &event.object, queue);
        } else if event.gr == self.jobs_gr {
            let key = (
                event.object.namespace().to_string(),
                event.object.name().to_string(),
            );
            let own_write = event.event_type != EventType::Deleted
                && self
                    .jobs
                    .get(&key)
                    .is_some_and(|s| s.written_rv == event.rv);
            if !own_write {
                queue.add(key);
            }
        }
    }

    fn resync(&mut self, queue: &mut Queue<JobKey>) {
        // Pods first, so that every Job sees its pods when it is reconciled.
        let (pods, _) = self.store.list(&self.pods_gr, None);
        let known: HashSet<(String, String)> = pods
            .iter()
            .map(|p| (p.namespace().to_string(), p.name().to_string()))
            .collect();
        let vanished: Vec<((String, String), JobKey)> = self
            .pod_owner
            .iter()
            .filter(|(pod, _)| !known.contains(*pod))
            .map(|(pod, job)| (pod.clone(), job.clone()))
            .collect();
        for ((namespace, name), job) in vanished {
            self.pod_owner.remove(&(namespace, name.clone()));
            if let Some(view) = self.jobs.get_mut(&job).and_then(|s| s.pods.get_mut(&name)) {
                view.gone = true;
            }
            queue.add(job);
        }
        for pod in pods {
            self.observe_pod(EventType::Modified, &pod, queue);
        }
        let (jobs, _) = self.store.list(&self.jobs_gr, None);
        for job in &jobs {
            queue.add((job.namespace().to_string(), job.name().to_string()));
        }
        for key in self.jobs.keys() {
            queue.add(key.clone());
        }
    }

    fn reconcile(&mut self, key: JobKey, queue: &mut Queue<JobKey>) {
        self.reconcile_job(&key, queue);
    }
}

/// The Job that controls a pod: (name, uid) of its controller owner reference of kind Job.
fn controller_job(pod: &Value) -> Option<(String, String)> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| {
            r.get("controller").and_then(Value::as_bool) == Some(true)
                && r.get("kind").and_then(Value::as_str) == Some("Job")
                && r.get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("batch/"))
        })
        .and_then(|r| {
            Some((
                r.get("name")?.as_str()?.to_string(),
                r.get("uid")?.as_str()?.to_string(),
            ))
        })
}

/// A new pod for a Job: the template's labels, annotations, finalizers and spec, a generated
/// name `{job}-xxxxx`, and a controller owner reference that blocks the Job's foreground
/// deletion.
fn pod_from_template(job: &Value) -> Value {
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let template = job.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut metadata = Map::new();
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(value) = template.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), value.clone());
        }
    }
    let mut prefix = format!("{name}-");
    if let Some((cut, _)) = prefix.char_indices().nth(MAX_GENERATE_NAME_PREFIX) {
        prefix.truncate(cut);
    }
    metadata.insert("generateName".into(), json!(prefix));
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": job.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
            "controller": true,
            "blockOwnerDeletion": true,
        }]),
    );
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
    })
}

/// Makes a pod from the template an Indexed Job's pod for `index` (pkg/controller/job/
/// indexed_job_utils.go: `addCompletionIndexAnnotation`, `addCompletionIndexLabel`,
/// `addCompletionIndexEnvVariables` (a `fieldRef` to the annotation, unless the container
/// sets `JOB_COMPLETION_INDEX` itself), `podGenerateNameWithIndex`, and the hostname).
fn with_completion_index(pod: &mut Value, job: &Value, index: i64) {
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = index.to_string();
    for field in ["annotations", "labels"] {
        if !pod["metadata"].get(field).is_some_and(Value::is_object) {
            pod["metadata"][field] = json!({});
        }
        pod["metadata"][field][COMPLETION_INDEX_KEY] = json!(text);
    }
    let mut prefix = format!("{name}-{index}-");
    if let Some((cut, _)) = prefix.char_indices().nth(MAX_GENERATE_NAME_PREFIX) {
        prefix.truncate(cut);
    }
    pod["metadata"]["generateName"] = json!(prefix);
    if pod.pointer("/spec/hostname").is_none() {
        pod["spec"]["hostname"] = json!(format!("{name}-{index}"));
    }
    let env = json!({
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath":
            format!("metadata.annotations['{COMPLETION_INDEX_KEY}']")}},
    });
    for list in ["containers", "initContainers"] {
        let Some(containers) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            if !container.get("env").is_some_and(Value::is_array) {
                container["env"] = json!([]);
            }
            let vars = container["env"].as_array_mut().expect("just made an array");
            if !vars.iter().any(|v| v["name"] == "JOB_COMPLETION_INDEX") {
                vars.push(env.clone());
            }
        }
    }
}

/// Indexes as `status.completedIndexes` writes them, e.g. `0,2,3,5,7-9`: a run of three or
/// more consecutive indexes as a range, a run of two as the pair (pkg/controller/job/
/// indexed_job_utils.go, `orderedIntervals.String` writes `First,Last` when
/// `Last == First+1`).
fn interval_list(indexes: &std::collections::BTreeSet<i64>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        parts.push(match last - first {
            0 => first.to_string(),
            1 => format!("{first},{last}"),
            _ => format!("{first}-{last}"),
        });
    }
    parts.join(",")
}

/// The status object, with the fields a real controller writes (zero counters omitted, except
/// `ready` and `terminating`, as in its JSON). `succeeded` and `failed` never go down: counts a
/// previous status holds (from before this controller knew the Job) are kept.
fn render_status(state: &JobState, old: &Value, draft: &Draft) -> Value {
    let active = state.pods.values().filter(|p| p.active()).count();
    let ready = state
        .pods
        .values()
        .filter(|p| p.active() && p.ready)
        .count();
    let terminating = state.pods.values().filter(|p| p.terminating()).count();
    let mut status = Map::new();
    if !draft.conditions.is_empty() {
        status.insert("conditions".into(), json!(draft.conditions));
    }
    if let Some(start) = &draft.start_time {
        status.insert("startTime".into(), json!(start));
    }
    if let Some(done) = &draft.completion_time {
        status.insert("completionTime".into(), json!(done));
    }
    if active > 0 {
        status.insert("active".into(), json!(active));
    }
    let at_least = |field: &str, count: usize| {
        let old = old
            .get(field)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        count.max(old)
    };
    let succeeded = at_least("succeeded", state.succeeded_count());
    if succeeded > 0 {
        status.insert("succeeded".into(), json!(succeeded));
    }
    if state.indexed && !state.succeeded_indexes.is_empty() {
        status.insert(
            "completedIndexes".into(),
            json!(interval_list(&state.succeeded_indexes)),
        );
    }
    let failed = at_least("failed", state.failed.len());
    if failed > 0 {
        status.insert("failed".into(), json!(failed));
    }
    status.insert("ready".into(), json!(ready));
    status.insert("terminating".into(), json!(terminating));
    status.insert("uncountedTerminatedPods".into(), json!({}));
    Value::Object(status)
}

/// The instant a stored timestamp stands for: the precise one this controller remembered when
/// it wrote that timestamp, else the timestamp itself (whole seconds).
fn instant_of(text: &str, remembered: Option<&(String, Instant)>) -> Instant {
    if let Some((written, at)) = remembered
        && written == text
    {
        return *at;
    }
    let now = Instant::now();
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(at) => {
            let age = chrono::Utc::now().signed_duration_since(at);
            match age.to_std() {
                Ok(age) => now.checked_sub(age).unwrap_or(now),
                // In the future: treat as now.
                Err(_) => now,
            }
        }
        Err(_) => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            parallelism: 1,
            completions: Some(1),
            backoff_limit: 6,
            active_deadline: None,
            suspend: false,
            ttl_after_finished: None,
            on_failure: false,
            indexed: false,
        }
    }

    #[test]
    fn backoff_doubles_from_ten_seconds_up_to_six_minutes() {
        let backoff = JobBackoff::default();
        let table = [
            (0, 0),
            (1, 10),
            (2, 20),
            (3, 40),
            (6, 320),
            (7, 360),
            (100, 360),
        ];
        for (failures, seconds) in table {
            assert_eq!(
                backoff.delay(failures),
                Duration::from_secs(seconds),
                "{failures}"
            );
        }
        assert_eq!(JobBackoff::FAST.delay(1), Duration::from_millis(100));
        assert_eq!(JobBackoff::FAST.delay(9), Duration::from_secs(1));
    }

    #[test]
    fn completed_indexes_are_written_as_ranges() {
        let set = |v: &[i64]| {
            v.iter()
                .copied()
                .collect::<std::collections::BTreeSet<i64>>()
        };
        assert_eq!(interval_list(&set(&[0, 1, 2])), "0-2");
        // Two consecutive indexes are a pair, not a range, as Kubernetes writes them.
        assert_eq!(interval_list(&set(&[0, 1])), "0,1");
        assert_eq!(interval_list(&set(&[0, 2, 3, 5, 7, 8, 9])), "0,2,3,5,7-9");
        assert_eq!(interval_list(&set(&[4])), "4");
        assert_eq!(interval_list(&set(&[])), "");
    }

    #[test]
    fn finish_decision_follows_the_real_controllers_order() {
        let counts = |succeeded, failed, active, restarts| Counts {
            succeeded,
            failed,
            active,
            restarts,
        };
        let backoff_2 = JobSpec {
            backoff_limit: 2,
            ..spec()
        };
        let on_failure = JobSpec {
            backoff_limit: 2,
            on_failure: true,
            ..spec()
        };
        let work_queue = JobSpec {
            completions: None,
            parallelism: 2,
            ..spec()
        };
        use Finish::*;
        // (case, spec, counts (succeeded, failed, active, restarts), deadline passed, expected)
        #[rustfmt::skip]
        let table: &[(&str, &JobSpec, Counts, bool, Option<Finish>)] = &[
            ("nothing yet", &backoff_2, counts(0, 0, 1, 0), false, None),
            ("one success completes", &backoff_2, counts(1, 0, 0, 0), false, Some(Succeeded)),
            ("failures up to the limit retry", &backoff_2, counts(0, 2, 0, 0), false, None),
            ("one more fails", &backoff_2, counts(0, 3, 0, 0), false, Some(BackoffLimitExceeded)),
            ("success wins over a deadline", &backoff_2, counts(1, 0, 0, 0), true, Some(Succeeded)),
            ("deadline", &backoff_2, counts(0, 1, 1, 0), true, Some(DeadlineExceeded)),
            ("backoff wins over a deadline", &backoff_2, counts(0, 3, 0, 0), true, Some(BackoffLimitExceeded)),
            ("restarts below the limit", &on_failure, counts(0, 0, 1, 1), false, None),
            ("restarts reach the limit", &on_failure, counts(0, 0, 1, 2), false, Some(BackoffLimitExceeded)),
            ("work queue waits for the others", &work_queue, counts(1, 0, 1, 0), false, None),
            ("work queue done", &work_queue, counts(1, 0, 0, 0), false, Some(Succeeded)),
        ];
        for (name, spec, counts, deadline, expected) in table {
            assert_eq!(
                finish_decision(spec, *counts, *deadline),
                *expected,
                "{name}"
            );
        }
    }

    #[test]
    fn wanted_active_pods() {
        let table = [
            (Some(1), 1, 0, 1),
            (Some(1), 1, 1, 0),
            (Some(5), 2, 4, 1),
            (Some(5), 2, 0, 2),
            (None, 3, 0, 3),
            (None, 3, 1, 0),
        ];
        for (completions, parallelism, succeeded, wanted) in table {
            let spec = JobSpec {
                completions,
                parallelism,
                ..spec()
            };
            assert_eq!(
                spec.wanted_active(succeeded),
                wanted,
                "{completions:?} {parallelism} {succeeded}"
            );
        }
    }

    #[test]
    fn suspended_condition_flips_but_false_is_never_added() {
        let mut conditions = Vec::new();
        assert!(!ensure_condition_status(
            &mut conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            "t0"
        ));
        assert!(conditions.is_empty());
        assert!(ensure_condition_status(
            &mut conditions,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            "t1"
        ));
        assert!(!ensure_condition_status(
            &mut conditions,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            "t2"
        ));
        assert_eq!(conditions[0]["lastTransitionTime"], "t1");
        assert!(ensure_condition_status(
            &mut conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            "t3"
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "False");
        assert_eq!(conditions[0]["reason"], "JobResumed");
        assert_eq!(conditions[0]["lastTransitionTime"], "t3");
    }

    #[test]
    fn pods_get_the_template_a_generated_name_and_a_blocking_controller_reference() {
        let long = "a".repeat(63);
        for (name, prefix) in [("pi", "pi-".to_string()), (long.as_str(), "a".repeat(58))] {
            let job = json!({
                "metadata": {"name": name, "uid": "u-1", "namespace": "ns"},
                "spec": {"template": {
                    "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                }}
            });
            let pod = pod_from_template(&job);
            assert_eq!(pod["metadata"]["generateName"], json!(prefix));
            assert_eq!(pod["metadata"]["labels"], json!({"app": "x"}));
            assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
            assert_eq!(pod["spec"], job["spec"]["template"]["spec"]);
            assert_eq!(
                pod["metadata"]["ownerReferences"],
                json!([{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u-1",
                        "controller": true, "blockOwnerDeletion": true}])
            );
            assert_eq!(
                controller_job(&pod),
                Some((name.to_string(), "u-1".to_string()))
            );
        }
    }

    #[test]
    fn instant_of_prefers_the_remembered_precise_instant() {
        let at = Instant::now() - Duration::from_millis(1500);
        let ten_seconds_ago = (chrono::Utc::now() - chrono::Duration::seconds(10))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        assert_eq!(
            instant_of(&ten_seconds_ago, Some(&(ten_seconds_ago.clone(), at))),
            at
        );
        // Without a remembered instant (or for another timestamp), the text is parsed.
        for remembered in [None, Some(("2020-01-01T00:00:00Z".to_string(), at))] {
            let parsed = instant_of(&ten_seconds_ago, remembered.as_ref());
            let age = Instant::now() - parsed;
            assert!(
                age >= Duration::from_secs(9) && age <= Duration::from_secs(12),
                "{age:?}"
            );
        }
    }
}
