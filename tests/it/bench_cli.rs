//! `workflow-operator bench` end to end, at a tiny size: the report's figures add up to what was
//! submitted or scheduled (the speed figures themselves are for `make bench`, not for tests).

use std::process::{Command, Output};

use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .arg("bench")
        .args(args)
        .output()
        .expect("running workflow-operator bench")
}

fn report(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "bench failed: {}\nstdout: {}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object on stdout")
}

#[test]
fn bench_report_accounts_for_every_submitted_step() {
    // 3 diamonds of 4 steps: 2 roots and 2 dependents each.
    let output = bench(&[
        "--workflows",
        "3",
        "--steps",
        "4",
        "--shape",
        "diamond",
        "--ceiling-secs",
        "0.3",
        "--timeout-secs",
        "120",
    ]);
    let report = report(&output);
    assert_eq!(report["workflowsCompleted"], 3, "{report:#}");
    assert_eq!(report["workflowsFailed"], 0);
    assert_eq!(report["timedOut"], false);
    assert_eq!(report["stepsCompleted"], 12);
    assert!(report["stepsPerSecond"].as_f64().unwrap() > 0.0);

    let dispatch = &report["dispatchLatencyMs"];
    assert_eq!(dispatch["count"], 6, "{report:#}");
    assert!(dispatch["p50"].as_f64().unwrap() <= dispatch["max"].as_f64().unwrap());
    assert_eq!(report["dispatchEarly"], 0);
    assert_eq!(report["dispatchUnmatched"], 0);

    let api = &report["api"];
    let job_creates = api["byVerbAndResource"]["create jobs.batch"]
        .as_u64()
        .unwrap();
    assert!(job_creates >= 12, "{api:#}");
    let writes = api["writes"].as_f64().unwrap();
    assert!((api["writesPerStep"].as_f64().unwrap() - writes / 12.0).abs() < 0.001);
    // The whole system's writes: the operator's, plus at least a pod per step created by the
    // Job controller, bound by the scheduler, and the Jobs' and pods' status written by the Job
    // controller and the kubelet.
    let system = api["systemWrites"].as_f64().unwrap();
    let pods = api["systemWritesByResource"]["pods"].as_u64().unwrap();
    assert!(
        pods >= 3 * 12,
        "a pod created, bound and its status written, per step: {api:#}"
    );
    assert!(system >= writes + pods as f64, "{api:#}");
    assert!((api["systemWritesPerStep"].as_f64().unwrap() - system / 12.0).abs() < 0.001);
    // The benchmark's own workflow creates are not the operator's.
    assert!(
        api["byVerbAndResource"]
            .get("create workflows.workflow.crd.com")
            .is_none(),
        "{api:#}"
    );

    assert!(report["operator"]["peakRssMib"].as_f64().unwrap() > 0.0);
    assert!(report["operator"]["cpuSecondsTotal"].as_f64().unwrap() >= 0.0);
    let ceiling = &report["controlPlane"]["ceiling"];
    assert!(
        ceiling["requestsPerSecond"].as_f64().unwrap() > 0.0,
        "{ceiling:#}"
    );
    assert_eq!(ceiling["errors"], 0);
    let largest = &report["largestWorkflow"];
    assert!(largest["bytes"].as_u64().unwrap() > largest["specBytes"].as_u64().unwrap());
    assert!(report["idle"].is_null());
    assert!(report["waitOrder"].is_null(), "no semaphore, no wait order");
}

/// `--replicas 2 --shards 4`: two operator processes share the work, each measured.
#[test]
fn replicas_share_the_run_and_each_is_measured() {
    let output = bench(&[
        "--workflows",
        "8",
        "--steps",
        "3",
        "--shape",
        "chain",
        "--replicas",
        "2",
        "--shards",
        "4",
        "--ceiling-secs",
        "0",
        "--timeout-secs",
        "120",
    ]);
    let report = report(&output);
    assert_eq!(report["workflowsCompleted"], 8, "{report:#}");
    assert_eq!(report["stepsCompleted"], 24);
    let others = report["replicas"]
        .as_array()
        .expect("the other replica's figures");
    assert_eq!(others.len(), 1, "{report:#}");
    for replica in [&report["operator"], &others[0]] {
        assert!(replica["peakRssMib"].as_f64().unwrap() > 0.0, "{report:#}");
    }
    assert_ne!(report["operator"]["pid"], others[0]["pid"]);
}

#[test]
fn with_a_semaphore_the_report_says_how_far_the_wait_order_is_from_priority_then_age() {
    let output = bench(&[
        "--workflows",
        "6",
        "--steps",
        "2",
        "--semaphore",
        "2",
        "--ceiling-secs",
        "0",
        "--timeout-secs",
        "120",
    ]);
    let report = report(&output);
    assert_eq!(report["workflowsCompleted"], 6, "{report:#}");
    assert_eq!(report["config"]["semaphore"], 2);
    let order = &report["waitOrder"];
    assert_eq!(
        order["acquired"], 6,
        "every workflow took the semaphore: {order:#}"
    );
    let inversions = order["inversions"].as_u64().unwrap();
    assert!(inversions <= 15, "at most all 15 pairs: {order:#}");
    let fraction = order["inversionFraction"].as_f64().unwrap();
    assert!(
        (fraction - inversions as f64 / 15.0).abs() < 0.001,
        "{order:#}"
    );
    assert!(order["maxDisplacement"].as_u64().unwrap() < 6, "{order:#}");
}

#[test]
fn keep_finished_measures_a_restarted_operator_on_the_finished_workflows() {
    let output = bench(&[
        "--keep-finished",
        "4",
        "--steps",
        "1",
        "--idle-secs",
        "1",
        "--restart-before-idle",
        "--ceiling-secs",
        "0",
        "--timeout-secs",
        "120",
    ]);
    let report = report(&output);
    assert_eq!(report["workflowsCompleted"], 4, "{report:#}");
    let idle = &report["idle"];
    assert_eq!(idle["restarted"], true, "{idle:#}");
    assert_eq!(idle["finishedWorkflows"], 4);
    assert!(idle["rssMibEnd"].as_f64().unwrap() > 0.0);
    assert!(idle["operatorCpuSeconds"].as_f64().unwrap() >= 0.0);
    assert!(report["controlPlane"]["ceiling"].is_null());
}

#[test]
fn external_mode_fails_when_no_operator_shows_up() {
    let output = bench(&[
        "--external",
        "--external-wait-secs",
        "1",
        "--ceiling-secs",
        "0",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("KUBECONFIG="), "{stderr}");
    assert!(stderr.contains("no operator watched workflows"), "{stderr}");
}

#[test]
fn schedule_shape_reports_one_run_per_scheduled_time_with_its_lateness() {
    // 100 CronWorkFlows of `@every 5s` created over 5 s: every one fires twice or three times
    // in 15 s.
    let output = bench(&[
        "--crons",
        "100",
        "--cron-period-secs",
        "5",
        "--cron-duration-secs",
        "15",
        "--idle-secs",
        "2",
    ]);
    let report = report(&output);
    let expected = report["runsExpected"].as_u64().unwrap();
    assert!((200..=300).contains(&expected), "{report:#}");
    assert_eq!(report["runsCreated"], expected, "{report:#}");
    assert_eq!(report["runsMissing"], 0);
    assert_eq!(report["runsDuplicated"], 0);
    assert_eq!(report["runsEarly"], 0);
    assert_eq!(report["lostEvents"], 0);

    let lateness = &report["latenessMs"];
    assert_eq!(lateness["count"], expected, "{lateness:#}");
    let (p50, p99, max) = (
        lateness["p50"].as_f64().unwrap(),
        lateness["p99"].as_f64().unwrap(),
        lateness["max"].as_f64().unwrap(),
    );
    assert!(0.0 <= p50 && p50 <= p99 && p99 <= max, "{lateness:#}");
    // Generous for a debug build on a shared machine; a timer that ticks on its own phase
    // rather than on the second would make most runs hundreds of milliseconds late.
    assert!(p50 < 500.0, "{lateness:#}");

    // 200 to 300 runs from the first time (5 s after the first creation) to the end (15 s).
    let per_second = report["runsPerSecond"].as_f64().unwrap();
    assert!((10.0..=40.0).contains(&per_second), "{report:#}");
    assert!(report["peakRunsPerSecond"].as_u64().unwrap() >= 1);
    assert!(report["operator"]["peakRssMib"].as_f64().unwrap() > 0.0);
    let creates = report["requestsByVerbAndResource"]["create workflows.workflow.crd.com"]
        .as_u64()
        .unwrap();
    assert!(creates >= expected, "{report:#}");
    // A tick reads the runs from the operator's watch of them, not with a list per fire.
    let lists = &report["requestsByVerbAndResource"]["list workflows.workflow.crd.com"];
    assert!(lists.as_u64().unwrap_or(0) * 10 < expected, "{report:#}");

    let idle = &report["idle"];
    assert_eq!(idle["suspended"], 100, "{idle:#}");
    assert_eq!(idle["seconds"], 2.0);
    assert!(idle["operatorCpuSeconds"].as_f64().unwrap() >= 0.0);
    assert!(
        idle["operatorCpuPercent"].as_f64().unwrap() < 50.0,
        "{idle:#}"
    );
}

#[test]
fn schedule_shape_without_idle_seconds_skips_the_idle_measurement() {
    let output = bench(&[
        "--crons",
        "20",
        "--cron-period-secs",
        "5",
        "--cron-duration-secs",
        "12",
        "--idle-secs",
        "0",
    ]);
    let report = report(&output);
    // Each of the 20, created in the first 5 s, fires at least once by 12 s.
    assert!(report["runsExpected"].as_u64().unwrap() >= 20, "{report:#}");
    assert_eq!(report["runsMissing"], 0, "{report:#}");
    assert!(report["idle"].is_null(), "{report:#}");
}

#[test]
fn the_artifact_shape_reports_each_round_of_cp_put_and_get_and_their_medians() {
    let output = bench(&["--artifact-mib", "3", "--rounds", "3"]);
    let report = report(&output);
    assert_eq!(report["mib"], 3, "{report:#}");
    for what in ["cp", "put", "get"] {
        let times = &report[what];
        let seconds: Vec<f64> = (times["seconds"].as_array().unwrap().iter())
            .map(|s| s.as_f64().unwrap())
            .collect();
        assert_eq!(seconds.len(), 3, "{what}: {report:#}");
        let mut sorted = seconds.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(times["medianSeconds"].as_f64(), Some(sorted[1]), "{what}");
    }
    let ratio = report["putOverCp"].as_f64().unwrap();
    let expected = report["put"]["medianSeconds"].as_f64().unwrap()
        / report["cp"]["medianSeconds"].as_f64().unwrap();
    assert!((ratio - expected).abs() < 1e-9, "{report:#}");
}
