//! Run policies end to end on the embedded control plane: a step allowed to fail
//! (`continueOn`), `when`s reading failed steps and the workflow's end, the workflow's
//! deadline (`activeDeadlineSeconds`), and retries (`retryStrategy`), of a program's failure
//! and of an evicted pod.

use crate::support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::EvictParams;
use kube::{Api, ResourceExt};
use rstest::rstest;
use support::{Gate, Operator, operator, phase, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::jobs::LABEL_ATTEMPT;
use workflow_operator_core::lifecycle::Phase;

/// The step entry of `name` in `workflow`'s status.
fn step_phase(workflow: &WorkFlow, name: &str) -> Option<StepPhase> {
    let status = workflow.status.as_ref()?;
    status
        .steps
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.phase)
}

#[rstest]
#[tokio::test]
async fn a_step_allowed_to_fail_fails_alone_and_its_dependents_read_that_it_did(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("lenient")
            .step("lint", &[])
            .command(&["sh", "-c", "exit 3"])
            .continue_on_failed()
            .step("report", &["lint"])
            .when(r#"steps.lint.phase == "Failed""#)
            .step("build", &["lint"]),
    )
    .await;
    let done = ns.expect_completed("lenient").await;
    let message = support::message(&done);
    assert_eq!(
        message,
        "2 steps succeeded; step lint failed: exit code 3 (continueOn.failed: the workflow went on)"
    );
    assert_eq!(step_phase(&done, "lint"), Some(StepPhase::Failed));
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["build", "report"]);
}

#[rstest]
#[tokio::test]
async fn an_exit_step_reads_which_step_failed_and_how_the_workflow_ended(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("ended")
            .step("bad", &[])
            .command(&["sh", "-c", "exit 1"])
            .exit_step("on-bad", &[])
            .when(r#"workflow.status == "Failed" && steps.bad.phase == "Failed""#)
            .exit_step("on-success", &[])
            .when(r#"workflow.status == "Completed""#),
    )
    .await;
    let done = ns.expect_failed("ended", &["step bad failed"]).await;
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["on-bad"]);
    assert_eq!(step_phase(&done, "on-success"), Some(StepPhase::Skipped));
}

#[rstest]
#[tokio::test]
async fn past_its_deadline_a_workflow_stops_its_steps_runs_its_exit_steps_and_fails(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("the step waits for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let wait = gate.wait_command("never opened");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    ns.create(
        WorkFlow::test("late")
            .active_deadline_seconds(2)
            .step("slow", &[])
            .command(&wait)
            .timeout(-1)
            .step("after", &["slow"])
            .exit_step("cleanup", &[]),
    )
    .await;
    let done = ns
        .expect_failed("late", &["ran past its activeDeadlineSeconds of 2s"])
        .await;
    let failed = (done.status.as_ref().unwrap().conditions.iter())
        .find(|c| c.type_ == "Failed")
        .expect("a Failed condition");
    assert_eq!(failed.reason, "DeadlineExceeded");
    let executed: Vec<String> = support::executed(&done).into_iter().collect();
    assert_eq!(executed, ["cleanup"]);
    assert_eq!(phase(&done), Some(Phase::Failed));
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    support::wait_list(
        &events,
        kube::runtime::watcher::Config::default(),
        "a DeadlineExceeded Event",
        support::DEADLINE,
        |events| {
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some("DeadlineExceeded"))
        },
    )
    .await;
}

/// The attempts of `step` of `workflow`: (attempt, the log of its Job), in attempt order.
async fn attempt_logs(ns: &support::Namespace, workflow: &str, step: &str) -> Vec<(u32, String)> {
    let jobs = ns.jobs_of(workflow).await;
    let mut attempts = Vec::new();
    for job in jobs.iter().filter(|j| step_of(j) == Some(step)) {
        let attempt = (job.labels().get(LABEL_ATTEMPT)).map_or(0, |a| a.parse().expect("a number"));
        attempts.push((attempt, ns.job_log(job).await));
    }
    attempts.sort();
    attempts
}

#[rstest]
#[tokio::test]
async fn a_failed_step_is_tried_again_after_each_back_off_in_a_job_of_its_own(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("flaky")
            .step("fetch", &[])
            .command(&[
                "sh",
                "-c",
                "echo attempt {{retries}} at $(date +%s.%N); exit 1",
            ])
            .retry_strategy("{limit: 2, backoff: {duration: 5s, factor: 2}}"),
    )
    .await;
    let done = ns
        .expect_failed(
            "flaky",
            &["step fetch failed: exit code 1: after 3 attempts (retryStrategy.limit 2)"],
        )
        .await;
    assert_eq!(phase(&done), Some(Phase::Failed));
    let attempts = attempt_logs(ns, "flaky", "fetch").await;
    let times: Vec<f64> = attempts
        .iter()
        .enumerate()
        .map(|(i, (attempt, log))| {
            assert_eq!(*attempt, i as u32);
            let (said, at) = log.trim().split_once(" at ").expect("attempt N at T");
            assert_eq!(said, format!("attempt {i}"));
            at.parse().expect("seconds")
        })
        .collect();
    assert_eq!(times.len(), 3, "{attempts:?}");
    // The back-off counts from the failed Job's end as Kubernetes records it, to the second: an
    // attempt's line may come up to a second before the back-off's end measured from the line
    // before; a loaded machine starts a pod late (up to 3 s is allowed), never early.
    for (gap, want) in times.windows(2).map(|w| w[1] - w[0]).zip([5.0, 10.0]) {
        assert!(
            (want - 1.0..=want + 3.0).contains(&gap),
            "a gap of {gap:.2}s where the strategy says {want}s: {times:?}"
        );
    }
    // `get` shows each attempt before the last, with the wait after it.
    let shown: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "flaky", "-o", "json"]).await).expect("JSON");
    let fetch = &shown["steps"][0];
    assert_eq!(fetch["attempts"], 3, "{fetch}");
    let earlier = fetch["previousAttempts"].as_array().expect("the attempts");
    let waited: Vec<i64> = earlier
        .iter()
        .map(|a| a["waited"].as_i64().unwrap())
        .collect();
    assert_eq!(earlier.len(), 2, "{fetch}");
    assert!(
        (4..=6).contains(&waited[0]) && (9..=11).contains(&waited[1]),
        "{waited:?}"
    );
}

#[rstest]
#[tokio::test]
async fn on_error_does_not_retry_an_exit_code_nor_on_failure_a_timeout(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("exits")
            .step("fetch", &[])
            .command(&["sh", "-c", "exit 1"])
            .retry_strategy("{limit: 3, retryPolicy: OnError}"),
    )
    .await;
    ns.create(
        WorkFlow::test("slow")
            .step("fetch", &[])
            .command(&["sleep", "30"])
            .timeout(1)
            .retry_strategy("{limit: 3, retryPolicy: OnFailure}"),
    )
    .await;
    ns.expect_failed(
        "exits",
        &["exit code 1: not retried: retryPolicy OnError retries only a pod that could not run"],
    )
    .await;
    ns.expect_failed(
        "slow",
        &[
            "timed out",
            "not retried: retryPolicy OnFailure retries only a program that exited non-zero",
        ],
    )
    .await;
    for workflow in ["exits", "slow"] {
        assert_eq!(ns.jobs_of(workflow).await.len(), 1, "{workflow} ran once");
    }
}

/// Waits until a pod of `workflow` runs and evicts it through the Eviction API.
async fn evict_running_pod(ns: &support::Namespace, workflow: &str) {
    let pods: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
    let selector = workflow_operator_core::jobs::selector(workflow);
    let running = support::wait_list(
        &pods,
        kube::runtime::watcher::Config::default().labels(&selector),
        "a running pod",
        support::DEADLINE,
        |pods| {
            pods.iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        },
    )
    .await;
    let pod = running
        .iter()
        .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .expect("a running pod");
    pods.evict(&pod.name_any(), &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("evicting {} of {}: {e}", pod.name_any(), ns.name));
}

/// An evicted pod is not the program's failure: `OnFailure` does not try it again (one Job,
/// the step failed saying its pod was evicted or deleted), `OnError` does (the second attempt
/// succeeds).
#[rstest]
#[tokio::test]
async fn on_failure_does_not_retry_an_evicted_pod_and_on_error_does(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    // The first attempt runs until evicted; the next one succeeds at once.
    let script = r#"if [ "{{retries}}" = 0 ]; then exec sleep 300; fi"#;
    for (name, policy) in [("on-failure", "OnFailure"), ("on-error", "OnError")] {
        ns.create(
            WorkFlow::test(name)
                .step("work", &[])
                .command(&["sh", "-c", script])
                .timeout(-1)
                .retry_strategy(&format!("{{limit: 2, retryPolicy: {policy}}}")),
        )
        .await;
        evict_running_pod(ns, name).await;
    }
    let failed = ns
        .expect_failed(
            "on-failure",
            &[
                "step work failed",
                "evict",
                "not retried: retryPolicy OnFailure retries only a program that exited non-zero",
            ],
        )
        .await;
    assert_eq!(step_phase(&failed, "work"), Some(StepPhase::Failed));
    assert_eq!(ns.jobs_of("on-failure").await.len(), 1, "one attempt");
    ns.expect_completed("on-error").await;
    let attempts: Vec<u32> = attempt_logs(ns, "on-error", "work")
        .await
        .into_iter()
        .map(|(attempt, _)| attempt)
        .collect();
    assert_eq!(attempts, [0, 1]);
}

/// `logs` prints a retried step's attempts in attempt order, each under a line naming the
/// attempt and its pod (four attempts a moment apart are created within the same second, so the
/// pods' creation times cannot order them); `logs -f` of a finished workflow prints what `logs`
/// does, steps in DAG order, not in the order its log streams happen to end.
#[rstest]
#[tokio::test]
async fn logs_print_attempts_in_order_and_follow_a_finished_workflow_in_dag_order(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let mut workflow = WorkFlow::test("attempts")
        .step("flaky", &[])
        .command(&[
            "sh",
            "-c",
            "echo retries {{retries}}; [ {{retries}} -ge 3 ]",
        ])
        .retry_strategy("{limit: 3}");
    for (step, after) in [
        ("e", &["flaky"][..]),
        ("d", &[]),
        ("c", &["d"]),
        ("b", &[]),
        ("a", &["b", "e"]),
    ] {
        workflow = workflow.step(step, after);
    }
    ns.create(workflow).await;
    ns.expect_completed("attempts").await;
    let logs = ns.cli(&["logs", "attempts"]).await;
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.len(), 13, "{logs}");
    for (attempt, pair) in lines[..8].chunks(2).enumerate() {
        let marker = pair[0];
        assert!(
            marker.starts_with(&format!(
                "--- attempt {} of flaky (pod attempts-",
                attempt + 1
            )) && marker.ends_with(") ---"),
            "{logs}"
        );
        assert_eq!(pair[1], format!("flaky: retries {attempt}"), "{logs}");
    }
    // DAG order: the roots in declaration order, then each step once its dependencies were.
    assert_eq!(
        lines[8..],
        ["d: d", "b: b", "e: e", "c: c", "a: a"],
        "{logs}"
    );
    let followed = ns.cli(&["logs", "attempts", "-f"]).await;
    assert_eq!(followed, logs);
}
