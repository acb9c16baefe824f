//! Reliability under API faults: 10% of writes answered 500, 409 or 429, every watch
//! closed every 2 s, and one forced 410 Gone (history compacted, every client re-lists), while
//! workflows of mixed shapes run. Every workflow must still end in its correct terminal state,
//! with no step run twice. Needs the embedded control plane (fault injection); skipped on a
//! real cluster.
//!
//! Run: `cargo test --test it reliability_faults:: -- --nocapture` (prints the faults injected).

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube_devcluster::faults::{InjectedError, Verb};
use rstest::rstest;
use serde_json::json;
use support::{JobRecorder, Operator, Shape, check_outcome, operator};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::lifecycle::Phase;

const WORKFLOWS: usize = 30;
/// Between two submissions: the run lasts long enough for several watch closes.
const PACE: Duration = Duration::from_millis(400);
const RATE: f64 = 0.1;
const WRITES: [Verb; 4] = [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];
const ERRORS: [InjectedError; 3] = [
    InjectedError::Internal,
    InjectedError::Conflict,
    InjectedError::TooManyRequests,
];

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workflow_ends_correctly_despite_write_errors_dropped_watches_and_a_410(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("injects API faults");
    let ns = &operator.ns;
    let dev = ns.cluster.dev().expect("the embedded control plane");
    let recorder = JobRecorder::start(ns).await;
    dev.reset_requests();
    let start = Instant::now();

    // The faults: each write verb fails at RATE with one of the three errors, the error of each
    // verb changing every second so each verb sees all three.
    let faults = {
        let faults_of = ns.cluster.clone();
        tokio::spawn(async move {
            let faults = faults_of.dev().expect("dev").faults();
            faults.close_watches_every(Some(Duration::from_secs(2)));
            for round in 0.. {
                for (i, verb) in WRITES.iter().enumerate() {
                    faults.set_error_rate(*verb, RATE, ERRORS[(i + round) % ERRORS.len()]);
                }
                // The period of the rotation, not a wait for a condition.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let mut expected = Vec::new();
    for i in 0..WORKFLOWS {
        let shape = Shape::ALL[i % Shape::ALL.len()];
        let (workflow, outcome) =
            shape.build(&format!("wf-{i:02}-{shape:?}").to_lowercase(), "0.3");
        let created = ns.create(workflow).await;
        expected.push((created.name_any(), outcome));
        if i == WORKFLOWS / 2 {
            // Compaction while half the workflows run: every watch must re-list.
            dev.force_gone();
        }
        // The pace of submission, not a wait for a condition.
        tokio::time::sleep(PACE).await;
    }

    let finished = join_all(
        expected
            .iter()
            .map(|(name, _)| ns.wait_terminal_within(name, Duration::from_secs(180))),
    )
    .await;
    let took = start.elapsed();
    faults.abort();
    dev.faults().clear();
    let requests = dev.requests();

    recorder.catch_up(ns).await;
    let wrong: Vec<String> = finished
        .iter()
        .zip(&expected)
        .filter_map(|(workflow, (_, outcome))| check_outcome(workflow, outcome, &recorder))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());

    let writes = requests.writes();
    let mut by_code: BTreeMap<u16, u64> = BTreeMap::new();
    for (key, n) in &requests.requests {
        let write = WRITES.iter().any(|v| v.as_str() == key.verb);
        if write && matches!(key.code, 409 | 429 | 500) {
            *by_code.entry(key.code).or_default() += n;
        }
    }
    let injected: u64 = by_code.values().sum();
    assert!(injected > 0, "faults were injected");
    println!(
        "faults: {WORKFLOWS} workflows ended correctly in {took:.1?} under {injected} failed \
         writes of {writes} ({} x 500, {} x 409 including genuine conflicts, {} x 429), watches \
         closed every 2 s, one forced 410 Gone; {checked} jobs checked, none ran twice",
        by_code.get(&500).unwrap_or(&0),
        by_code.get(&409).unwrap_or(&0),
        by_code.get(&429).unwrap_or(&0),
    );
}

/// Found by `reliability_crash`: the operator deleted a timed-out step's Job before recording
/// the failure, so a crash (or a failed status write) in between left a step without a Job and
/// the step was started again. Here the status writes fail for a while instead of a crash.
#[rstest]
#[tokio::test]
async fn a_timed_out_step_is_not_started_again_when_recording_the_failure_fails(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("injects API faults");
    let ns = &operator.ns;
    let dev = ns.cluster.dev().expect("the embedded control plane");
    let recorder = JobRecorder::start(ns).await;
    ns.create(
        WorkFlow::test("stuck")
            .step("stuck", &[])
            .command(&["sleep", "30"])
            .timeout(2),
    )
    .await;
    let job = ns
        .wait_step_job("stuck", "stuck", "created", |_| true)
        .await;
    // Suspended, its deadline stops counting: only the operator's timer sees the timeout.
    ns.jobs()
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("the job is suspended");
    ns.wait_workflow("stuck", "Started", |wf| {
        support::phase(wf) == Some(Phase::Started)
    })
    .await;

    dev.reset_requests();
    dev.faults()
        .set_error_rate(Verb::Patch, 1.0, InjectedError::Internal);
    // Until the operator has tried, and failed, to record the timeout a few times.
    let failed_status_writes = || {
        dev.requests()
            .requests
            .iter()
            .filter(|(k, _)| k.resource == "workflows.workflow.crd.com/status" && k.code == 500)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let start = Instant::now();
    while failed_status_writes() < 3 {
        assert!(
            start.elapsed() < support::DEADLINE,
            "the operator never tried"
        );
        // A short poll of the request counters.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dev.faults().clear();

    ns.expect_failed("stuck", &["step stuck timed out"]).await;
    recorder.catch_up(ns).await;
    let jobs = recorder.jobs_of("stuck", "stuck");
    assert_eq!(jobs.len(), 1, "the step was started again: {jobs:?}");
}

/// A Job create answered 409 `Conflict` (a write that lost a race, as to a ResourceQuota's
/// count; not `AlreadyExists`) made no Job. Taken as made, it left the step reported running
/// with no Job whose events could ever move it on, so the workflow waited for the timer's
/// periodic rebuild. The create must fail the pass and be tried again.
#[rstest]
#[tokio::test]
async fn a_job_create_refused_with_a_conflict_is_tried_again_not_taken_as_made(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("injects API faults");
    let ns = &operator.ns;
    let dev = ns.cluster.dev().expect("the embedded control plane");
    dev.reset_requests();
    dev.faults()
        .set_error_rate(Verb::Create, 1.0, InjectedError::Conflict);
    // Submitted with server-side apply (a patch): every create is refused now.
    let workflow = ns.manifest(WorkFlow::test("refused").step("a", &[]).command(&["true"]));
    ns.workflows()
        .patch(
            "refused",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&workflow),
        )
        .await
        .expect("the workflow is submitted");

    let refused_job_creates = || {
        dev.requests()
            .requests
            .iter()
            .filter(|(k, _)| k.resource == "jobs.batch" && k.verb == "create" && k.code == 409)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let start = Instant::now();
    while refused_job_creates() < 3 {
        let seen = ns.get("refused").await;
        assert!(
            support::started(&seen).is_empty(),
            "a step whose Job create was refused is reported started: {}",
            support::describe_status(&seen)
        );
        assert!(
            start.elapsed() < support::DEADLINE,
            "the operator did not try the create again"
        );
        // A short poll of the request counters and the status.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dev.faults().clear();

    ns.expect_completed("refused").await;
}
