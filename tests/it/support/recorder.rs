//! [`JobRecorder`]: every Job and pod that ever existed in a namespace; [`Shape`]: workflows of
//! mixed shapes with their expected outcomes.

use super::*;

/// One Job as the [`JobRecorder`] saw it over its life.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub uid: String,
    pub name: String,
    /// Annotation `workflow.crd.com/workflow`.
    pub workflow: String,
    /// Annotation `workflow.crd.com/step`.
    pub step: String,
    /// Label `workflow.crd.com/run`.
    pub run: String,
    /// Label `workflow.crd.com/retry` (`0` when absent).
    pub retry: String,
    /// Label `workflow.crd.com/attempt`: the step's attempt under a `retryStrategy` (`0` when
    /// absent).
    pub attempt: String,
    /// Which of the step's instances: `RUN_INDEX/ITEM` from the labels `workflow.crd.com/run-index`
    /// (`spec.runs`) and `workflow.crd.com/item` (a step that fans out), each empty when absent.
    pub instance: String,
    /// Order of the event the Job was first seen in (Jobs' watch only).
    pub first_seen: u64,
    /// Order of the event it was first seen finished in, and whether it succeeded.
    pub finished: Option<(u64, bool)>,
    /// Whether it has been seen deleted (or being deleted).
    pub deleted: bool,
}

#[derive(Default)]
struct Recorded {
    seq: u64,
    jobs: BTreeMap<String, JobRecord>,
    /// Pod uid -> (owning Job uid, deleted).
    pods: BTreeMap<String, (String, bool)>,
}

/// Every Job and pod that ever existed in a namespace from its start, from a watch of its own:
/// proves that no step ran twice even when the operator restarted in between.
pub struct JobRecorder {
    state: Arc<Mutex<Recorded>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for JobRecorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl JobRecorder {
    /// Starts recording, once the first list of Jobs and pods is in.
    pub async fn start(ns: &Namespace) -> JobRecorder {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let (jobs_ready, jobs_listed) = tokio::sync::oneshot::channel();
        let (pods_ready, pods_listed) = tokio::sync::oneshot::channel();
        let jobs = {
            let state = state.clone();
            let api = ns.jobs();
            tokio::spawn(async move {
                let mut ready = Some(jobs_ready);
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    let mut state = state.lock().expect("recorder lock");
                    match event {
                        watcher::Event::InitApply(job) | watcher::Event::Apply(job) => {
                            state.seq += 1;
                            let seq = state.seq;
                            record_job(&mut state.jobs, &job, seq, false);
                        }
                        watcher::Event::Delete(job) => {
                            state.seq += 1;
                            let seq = state.seq;
                            record_job(&mut state.jobs, &job, seq, true);
                        }
                        watcher::Event::InitDone => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        watcher::Event::Init => {}
                    }
                }
            })
        };
        let pods = {
            let state = state.clone();
            let api = ns.pods();
            tokio::spawn(async move {
                let mut ready = Some(pods_ready);
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    let mut state = state.lock().expect("recorder lock");
                    match event {
                        watcher::Event::InitApply(pod) | watcher::Event::Apply(pod) => {
                            record_pod(&mut state.pods, &pod, false)
                        }
                        watcher::Event::Delete(pod) => record_pod(&mut state.pods, &pod, true),
                        watcher::Event::InitDone => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        watcher::Event::Init => {}
                    }
                }
            })
        };
        let listed = async {
            let _ = jobs_listed.await;
            let _ = pods_listed.await;
        };
        tokio::time::timeout(DEADLINE, listed)
            .await
            .expect("the recorder's watches start");
        JobRecorder {
            state,
            tasks: vec![jobs, pods],
        }
    }

    /// Every Job seen so far.
    pub fn jobs(&self) -> Vec<JobRecord> {
        let state = self.state.lock().expect("recorder lock");
        state.jobs.values().cloned().collect()
    }

    /// The Jobs seen for one step of one workflow (any run).
    pub fn jobs_of(&self, workflow: &str, step: &str) -> Vec<JobRecord> {
        self.jobs()
            .into_iter()
            .filter(|j| j.workflow == workflow && j.step == step)
            .collect()
    }

    /// Pods seen for a Job.
    pub fn pods_of(&self, job_uid: &str) -> usize {
        let state = self.state.lock().expect("recorder lock");
        state.pods.values().filter(|(j, _)| j == job_uid).count()
    }

    /// Pods seen so far that have not been seen deleted.
    pub fn live_pods(&self) -> usize {
        let state = self.state.lock().expect("recorder lock");
        state.pods.values().filter(|(_, deleted)| !deleted).count()
    }

    /// Waits until the recorder has seen every Job and pod that exists now (its watch can lag
    /// behind a list).
    pub async fn catch_up(&self, ns: &Namespace) {
        let jobs = retrying("listing jobs", || async move {
            ns.jobs().list(&ListParams::default()).await
        })
        .await;
        let pods = retrying("listing pods", || async move {
            ns.pods().list(&ListParams::default()).await
        })
        .await;
        let want_jobs: Vec<String> = jobs.items.iter().filter_map(|j| j.uid()).collect();
        let want_pods: Vec<String> = pods.items.iter().filter_map(|p| p.uid()).collect();
        let start = Instant::now();
        loop {
            let (missing_jobs, missing_pods) = {
                let state = self.state.lock().expect("recorder lock");
                (
                    want_jobs
                        .iter()
                        .filter(|u| !state.jobs.contains_key(*u))
                        .count(),
                    want_pods
                        .iter()
                        .filter(|u| !state.pods.contains_key(*u))
                        .count(),
                )
            };
            if missing_jobs + missing_pods == 0 {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the recorder missed {missing_jobs} jobs and {missing_pods} pods that exist"
            );
            // A short poll of in-memory state fed by the watch tasks.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Checks that no step ran twice: per workflow, step, instance (run index and item), run,
    /// retry and attempt at most one Job, and per Job at most `1 + retries` pods (`retries` of the step, by
    /// Job uid: 0 unless listed). Returns the number of Jobs checked.
    ///
    /// # Panics
    /// Listing every duplicate.
    pub fn assert_no_step_ran_twice(&self, retries: &BTreeMap<(String, String), usize>) -> usize {
        let jobs = self.jobs();
        type Attempt<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, &'a str);
        let mut per_attempt: BTreeMap<Attempt, Vec<&JobRecord>> = BTreeMap::new();
        for job in &jobs {
            per_attempt
                .entry((
                    &job.workflow,
                    &job.step,
                    &job.instance,
                    &job.run,
                    &job.retry,
                    &job.attempt,
                ))
                .or_default()
                .push(job);
        }
        let mut duplicates: Vec<String> = per_attempt
            .iter()
            .filter(|(_, jobs)| jobs.len() > 1)
            .map(|((wf, step, instance, run, retry, attempt), jobs)| {
                let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
                format!(
                    "workflow {wf} step {step} instance {instance} run {run} retry {retry} \
                     attempt {attempt}: {} jobs {names:?}",
                    jobs.len()
                )
            })
            .collect();
        let mut pods_per_job: BTreeMap<String, usize> = BTreeMap::new();
        for (job, _) in self.state.lock().expect("recorder lock").pods.values() {
            *pods_per_job.entry(job.clone()).or_default() += 1;
        }
        for job in &jobs {
            let allowed = 1 + retries
                .get(&(job.workflow.clone(), job.step.clone()))
                .copied()
                .unwrap_or(0);
            let pods = pods_per_job.get(&job.uid).copied().unwrap_or(0);
            if pods > allowed {
                duplicates.push(format!(
                    "job {} (workflow {} step {}) ran {pods} pods, at most {allowed} allowed",
                    job.name, job.workflow, job.step
                ));
            }
        }
        assert!(
            duplicates.is_empty(),
            "steps ran more than once:\n{}",
            duplicates.join("\n")
        );
        jobs.len()
    }
}

fn record_job(jobs: &mut BTreeMap<String, JobRecord>, job: &Job, seq: u64, deleted: bool) {
    let Some(uid) = job.uid() else { return };
    let record = jobs.entry(uid.clone()).or_insert_with(|| JobRecord {
        uid,
        name: job.name_any(),
        workflow: job
            .annotations()
            .get(ANNOTATION_WORKFLOW)
            .cloned()
            .unwrap_or_default(),
        step: step_of(job).unwrap_or_default().to_string(),
        run: job.labels().get(LABEL_RUN).cloned().unwrap_or_default(),
        retry: job
            .labels()
            .get(LABEL_RETRY)
            .cloned()
            .unwrap_or_else(|| "0".into()),
        attempt: job
            .labels()
            .get(LABEL_ATTEMPT)
            .cloned()
            .unwrap_or_else(|| "0".into()),
        instance: {
            let label = |key| job.labels().get(key).cloned().unwrap_or_default();
            format!("{}/{}", label(LABEL_RUN_INDEX), label(LABEL_ITEM))
        },
        first_seen: seq,
        finished: None,
        deleted: false,
    });
    if record.finished.is_none()
        && let Some(succeeded) = job_outcome(job)
    {
        record.finished = Some((seq, succeeded));
    }
    record.deleted |= deleted || job.metadata.deletion_timestamp.is_some();
}

fn record_pod(pods: &mut BTreeMap<String, (String, bool)>, pod: &Pod, deleted: bool) {
    let Some(uid) = pod.uid() else { return };
    let owner = pod
        .owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| o.uid.clone())
        .unwrap_or_default();
    let entry = pods.entry(uid).or_insert((owner, false));
    entry.1 |= deleted;
}

/// What a workflow of a [`Shape`] must end as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Completed, every step executed.
    Completed,
    /// Completed, every step executed, this step on its second attempt (`retryStrategy`): the
    /// recorder saw its attempts 0 and 1.
    CompletedOnRetry { step: String },
    /// Failed with the message naming this step; the listed steps never got a Job.
    Failed {
        step: String,
        never_started: Vec<String>,
    },
}

/// Workflow shapes for the reliability tests, each with the outcome it must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// a -> b -> c -> d.
    Chain,
    /// a -> (b, c) -> d.
    Diamond,
    /// a -> (b1..b6) -> z.
    FanOutIn,
    /// Three unrelated steps.
    Independent,
    /// a -> bad (exits 1) -> after: Failed naming `bad`; `after` never starts.
    Failing,
    /// a -> slow (sleeps past its 1 s timeout) -> after: Failed naming `slow`.
    TimingOut,
    /// a -> flaky (fails its first attempt, a `retryStrategy` retries it) -> after: Completed.
    Retrying,
}

impl Shape {
    pub const ALL: [Shape; 7] = [
        Shape::Chain,
        Shape::Diamond,
        Shape::FanOutIn,
        Shape::Independent,
        Shape::Failing,
        Shape::TimingOut,
        Shape::Retrying,
    ];

    /// The workflow `name` of this shape whose steps each take about `step_secs` seconds.
    pub fn build(self, name: &str, step_secs: &str) -> (WorkFlowBuilder, Expected) {
        let sleep = |w: WorkFlowBuilder, step: &str, deps: &[&str]| {
            w.step(step, deps)
                .command(&["sh", "-c", &format!("echo {step}; sleep {step_secs}")])
        };
        let w = WorkFlow::test(name);
        match self {
            Shape::Chain => {
                let w = sleep(w, "a", &[]);
                let w = sleep(w, "b", &["a"]);
                let w = sleep(w, "c", &["b"]);
                (sleep(w, "d", &["c"]), Expected::Completed)
            }
            Shape::Diamond => {
                let w = sleep(w, "a", &[]);
                let w = sleep(w, "b", &["a"]);
                let w = sleep(w, "c", &["a"]);
                (sleep(w, "d", &["b", "c"]), Expected::Completed)
            }
            Shape::FanOutIn => {
                let mut w = sleep(w, "a", &[]);
                let middle: Vec<String> = (1..=6).map(|i| format!("b{i}")).collect();
                for step in &middle {
                    w = sleep(w, step, &["a"]);
                }
                let deps: Vec<&str> = middle.iter().map(String::as_str).collect();
                (sleep(w, "z", &deps), Expected::Completed)
            }
            Shape::Independent => {
                let w = sleep(w, "x", &[]);
                let w = sleep(w, "y", &[]);
                (sleep(w, "z", &[]), Expected::Completed)
            }
            Shape::Failing => {
                let w = sleep(w, "a", &[]);
                let w = w
                    .step("bad", &["a"])
                    .command(&["sh", "-c", "echo failing; exit 3"]);
                (
                    sleep(w, "after", &["bad"]),
                    Expected::Failed {
                        step: "bad".into(),
                        never_started: vec!["after".into()],
                    },
                )
            }
            Shape::TimingOut => {
                let w = sleep(w, "a", &[]);
                let w = w.step("slow", &["a"]).command(&["sleep", "30"]).timeout(1);
                (
                    sleep(w, "after", &["slow"]),
                    Expected::Failed {
                        step: "slow".into(),
                        never_started: vec!["after".into()],
                    },
                )
            }
            Shape::Retrying => {
                let w = sleep(w, "a", &[]);
                let fails_first = format!(
                    "echo flaky {{{{retries}}}}; sleep {step_secs}; test {{{{retries}}}} -ge 1"
                );
                let w = w
                    .step("flaky", &["a"])
                    .command(&["sh", "-c", &fails_first])
                    .retry_strategy("limit: 2");
                (
                    sleep(w, "after", &["flaky"]),
                    Expected::CompletedOnRetry {
                        step: "flaky".into(),
                    },
                )
            }
        }
    }
}

/// Waits (up to `limit` each) for every workflow of `expected` to end, then asserts that each
/// ended as expected ([`check_outcome`]) and that no step ran twice; the Jobs checked.
pub async fn assert_ended_as_expected(
    recorder: &JobRecorder,
    ns: &Namespace,
    expected: &[(String, Expected)],
    limit: Duration,
) -> usize {
    let finished = futures::future::join_all(
        expected
            .iter()
            .map(|(name, _)| ns.wait_terminal_within(name, limit)),
    )
    .await;
    recorder.catch_up(ns).await;
    let wrong: Vec<String> = finished
        .iter()
        .zip(expected)
        .filter_map(|(workflow, (_, outcome))| check_outcome(workflow, outcome, recorder))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    recorder.assert_no_step_ran_twice(&BTreeMap::new())
}

/// Checks that `workflow` ended as `expected` (and, through the recorder, that the steps that
/// must never start got no Job). Returns a description of what is wrong, if anything.
pub fn check_outcome(
    workflow: &WorkFlow,
    expected: &Expected,
    recorder: &JobRecorder,
) -> Option<String> {
    let name = workflow.name_any();
    let all: BTreeSet<String> = workflow
        .spec
        .containers
        .iter()
        .map(|s| s.step_name.clone())
        .collect();
    match expected {
        Expected::Completed | Expected::CompletedOnRetry { .. } => {
            if phase(workflow) != Some(Phase::Completed) || executed(workflow) != all {
                return Some(format!(
                    "{name}: expected Completed with every step executed; {}",
                    describe_status(workflow)
                ));
            }
            if let Expected::CompletedOnRetry { step } = expected {
                let attempts: BTreeSet<String> = recorder
                    .jobs_of(&name, step)
                    .into_iter()
                    .map(|job| job.attempt)
                    .collect();
                if attempts != BTreeSet::from(["0".to_string(), "1".to_string()]) {
                    return Some(format!(
                        "{name}: expected step {step} to run attempts 0 and 1, saw {attempts:?}"
                    ));
                }
            }
        }
        Expected::Failed {
            step,
            never_started,
        } => {
            let text = message(workflow);
            if phase(workflow) != Some(Phase::Failed) || !text.contains(&format!("step {step} ")) {
                return Some(format!(
                    "{name}: expected Failed naming step {step}; {}",
                    describe_status(workflow)
                ));
            }
            for never in never_started {
                if !recorder.jobs_of(&name, never).is_empty() {
                    return Some(format!("{name}: step {never} started after {step} failed"));
                }
            }
        }
    }
    None
}
