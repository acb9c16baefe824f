//! Awkward but valid input runs correctly: upper-case, `_` and 63-character step
//! names, a 200-character workflow name, a dependency listed twice, unicode in env values, and
//! (slow, `cargo test --test it reliability_awkward_input:: -- --ignored`) a 5,000-step workflow.
//!
//! Run: `cargo test --test it reliability_awkward_input:: -- --nocapture`.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube_devcluster::faults::Verb;
use rstest::rstest;
use support::{JobRecorder, Operator, executed, operator, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::LABEL_WORKFLOW;
use workflow_operator_core::names;

#[rstest]
#[tokio::test]
async fn awkward_step_names_a_repeated_dependency_and_unicode_env_run_correctly(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let long = format!("Step_{}", "X".repeat(58));
    assert_eq!(long.len(), 63);
    let greeting = "grüße, 世界! 👋 — ça va?";
    ns.create(
        WorkFlow::test("awkward")
            .step("FETCH", &[])
            .step("parse_data", &["FETCH", "FETCH"])
            .step(&long, &["parse_data"])
            // The step checks its own environment: it fails unless the value arrived intact.
            // `$$` is a literal `$` after Kubernetes' `$(VAR)` expansion.
            .step("Unicode_Env", &[&long, "FETCH", &long])
            .env("GREETING", greeting)
            .command(&[
                "sh",
                "-c",
                &format!(
                    "test \"$$GREETING\" = '{greeting}' && test \"$$STEP_NAME\" = Unicode_Env"
                ),
            ]),
    )
    .await;

    let workflow = ns.expect_completed("awkward").await;
    let all: BTreeSet<String> = ["FETCH", "parse_data", long.as_str(), "Unicode_Env"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(executed(&workflow), all);
    recorder.catch_up(ns).await;
    assert_eq!(recorder.assert_no_step_ran_twice(&BTreeMap::new()), 4);
    for job in ns.jobs_of("awkward").await {
        assert!(names::is_dns_label(&job.name_any()), "{}", job.name_any());
        assert!(step_of(&job).is_some_and(|s| all.contains(s)));
    }
}

#[rstest]
#[tokio::test]
async fn a_200_character_workflow_name_runs_with_valid_job_names_and_labels(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let name = format!("wf-{}", "long".repeat(50))
        .chars()
        .take(200)
        .collect::<String>();
    assert_eq!(name.len(), 200);
    ns.create(
        WorkFlow::test(&name)
            .label("team", "a")
            .step("a", &[])
            .step("b", &["a"]),
    )
    .await;
    let workflow = ns.expect_completed(&name).await;
    assert_eq!(executed(&workflow).len(), 2);
    let jobs = ns.jobs_of(&name).await;
    assert_eq!(jobs.len(), 2, "found by the workflow's (shortened) label");
    for job in &jobs {
        assert!(names::is_dns_label(&job.name_any()), "{}", job.name_any());
        assert!(names::is_label_value(&job.labels()[LABEL_WORKFLOW]));
        assert_eq!(job.annotations()["workflow.crd.com/workflow"], name);
    }
}

/// 5,000 steps in 10 layers of 500, each step after one of the layer before: up to 500 run
/// at once and every completion releases one step.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn a_5000_step_workflow_runs_to_completed(#[future(awt)] operator: Operator) {
    const STEPS: usize = 5000;
    const WIDTH: usize = 500;
    let ns = &operator.ns;
    let recorder = JobRecorder::start(ns).await;
    let names: Vec<String> = (0..STEPS).map(|i| format!("s{i:04}")).collect();
    let mut workflow = WorkFlow::test("huge");
    for (i, name) in names.iter().enumerate() {
        let deps: Vec<&str> = if i >= WIDTH {
            vec![names[i - WIDTH].as_str()]
        } else {
            vec![]
        };
        workflow = workflow.step(name, &deps).command(&["true"]);
    }
    if let Some(dev) = ns.cluster.dev() {
        dev.reset_requests();
    }
    let start = Instant::now();
    ns.create(workflow).await;
    let workflow = ns
        .wait_terminal_within("huge", Duration::from_secs(900))
        .await;
    let took = start.elapsed();
    assert_eq!(
        support::phase(&workflow),
        Some(workflow_operator_core::lifecycle::Phase::Completed),
        "{}",
        support::describe_status(&workflow)
    );
    assert_eq!(executed(&workflow).len(), STEPS);
    recorder.catch_up(ns).await;
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());
    let stored = serde_json::to_vec(&workflow).expect("json").len();
    let writes = ns.cluster.dev().map_or(String::new(), |dev| {
        let requests = dev.requests();
        format!(
            "; {} API writes ({} status writes)",
            requests.writes(),
            requests.count(Verb::Patch, "workflows.workflow.crd.com/status")
        )
    });
    println!(
        "{STEPS} steps: Completed in {took:.1?} ({:.0} steps/s); {checked} jobs checked, none \
         twice; the stored workflow is {} KiB{writes}",
        STEPS as f64 / took.as_secs_f64(),
        stored / 1024
    );
}
