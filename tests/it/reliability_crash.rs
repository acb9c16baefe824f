//! Reliability under crashes: the operator, a separate process, is killed with SIGKILL
//! at random moments, 20 times, while 50 workflows of mixed shapes run, and restarted each time.
//! Afterwards every workflow is in its correct terminal state and no step ran twice (at most one
//! Job per step per run, one pod per Job), from a watch the test keeps of every Job and pod.
//!
//! Slow (about a minute): `cargo test --test it reliability_crash:: -- --ignored --nocapture`
//! (`make test-slow`). Prints the kills and the Jobs checked. Needs the embedded control plane
//! (it kills the operator's process); skipped on a real cluster.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;
use serde_json::json;
use support::{JobRecorder, Operator, Shape, check_outcome, operator_process, retrying};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::PodCleanup;
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::testing::WorkFlowBuilder;

const WORKFLOWS: usize = 50;
const KILLS: usize = 20;

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn operator_killed_20_times_during_50_workflows_finishes_them_all_and_runs_no_step_twice(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    let recorder = JobRecorder::start(&operator.ns).await;
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("crash: seed {seed} (set CRASH_SEED to replay the same moments)");
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Instant::now();

    // Workflows are submitted over the first seconds of the run, so the kills land while some
    // are being created, some are half-way and some are finishing.
    let mut manifests = Vec::new();
    let mut expected = Vec::new();
    for i in 0..WORKFLOWS {
        let shape = Shape::ALL[i % Shape::ALL.len()];
        let (workflow, outcome) =
            shape.build(&format!("wf-{i:02}-{shape:?}").to_lowercase(), "0.5");
        let manifest = operator.ns.manifest(workflow);
        expected.push((manifest.name_any(), outcome));
        manifests.push((manifest, Duration::from_millis(rng.random_range(50..400))));
    }
    let api = operator.ns.workflows();
    let submit = tokio::spawn(async move {
        for (manifest, pause) in manifests {
            let manifest = &manifest;
            let api = &api;
            retrying("creating a workflow", || async move {
                api.create(&PostParams::default(), manifest).await
            })
            .await;
            // The pace of submission, not a wait for a condition.
            tokio::time::sleep(pause).await;
        }
    });

    for _ in 0..KILLS {
        // A random moment of the run: what is being tested is that any moment is safe.
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..1200))).await;
        operator.kill().await;
        operator.start();
    }
    submit.await.expect("every workflow submitted");
    let killing = start.elapsed();

    let ns = &operator.ns;
    let finished = join_all(
        expected
            .iter()
            .map(|(name, _)| ns.wait_terminal_within(name, Duration::from_secs(300))),
    )
    .await;
    let took = start.elapsed();
    recorder.catch_up(ns).await;
    let wrong: Vec<String> = finished
        .iter()
        .zip(&expected)
        .filter_map(|(workflow, (_, outcome))| check_outcome(workflow, outcome, &recorder))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let checked = recorder.assert_no_step_ran_twice(&BTreeMap::new());
    assert!(operator.is_running(), "the last operator is still running");
    let log = operator.log();
    assert!(!log.contains("panicked"), "the operator panicked:\n{log}");
    let completed = expected
        .iter()
        .filter(|(_, e)| *e == support::Expected::Completed)
        .count();
    println!(
        "crash: {} SIGKILLs in {killing:.1?} ({} starts); {WORKFLOWS} workflows ended correctly \
         ({completed} Completed, {} Failed as expected) in {took:.1?}; {checked} jobs checked: at \
         most one per step per run, one pod each",
        operator.kills,
        operator.starts,
        WORKFLOWS - completed
    );
    assert_eq!(operator.kills, KILLS);
}

/// What a workflow of the run-control crash test has done to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    /// Suspended, then resumed: it completes.
    SuspendResume,
    /// Stopped half-way: it ends Failed as stopped, or Completed if it finished first.
    Stop,
    /// Terminated while a step runs: Failed, its running pod stopped (and kept), no exit step.
    Terminate,
    /// A step fails until its gate opens; then the workflow is retried and completes.
    Retry,
    /// `ttlSecondsAfterFinished: 1`: it completes and is deleted with its Jobs and pods.
    Expire,
    /// `podCleanup: OnSuccess`: it completes and stays, its pods gone.
    CleanPods,
    /// `a` writes an output that `b` gets in its command and `c`'s `when` reads: it completes,
    /// `b`'s Job built with the value, `c` run (not skipped), each once.
    Outputs,
    /// `runs: 2` of `a` writing a JSON list, `b` over 3 `withItems` and `c` over `a`'s list
    /// (`withParam`): it completes, every item of every run made once.
    FanOut,
}

/// A chain `a -> b -> c` of half-second steps with an exit step `report`, shaped for `verb`.
fn verb_workflow(name: &str, verb: Verb, gate: &support::Gate) -> WorkFlowBuilder {
    let sleep = |w: WorkFlowBuilder, step: &str, deps: &[&str]| {
        w.step(step, deps)
            .command(&["sh", "-c", &format!("echo {step}; sleep 0.5")])
    };
    if verb == Verb::FanOut {
        return fan_out_workflow(name);
    }
    let w = if verb == Verb::Outputs {
        WorkFlow::test(name).step("a", &[]).command(&[
            "sh",
            "-c",
            "echo n=7 >> \"$WORKFLOW_OUTPUTS\"; sleep 0.5",
        ])
    } else {
        sleep(WorkFlow::test(name), "a", &[])
    };
    let w = match verb {
        Verb::Terminate => w.step("b", &["a"]).command(&["sleep", "600"]).timeout(-1),
        Verb::Retry => {
            let check = gate.check_command();
            let check: Vec<&str> = check.iter().map(String::as_str).collect();
            w.step("b", &["a"]).command(&check)
        }
        Verb::SuspendResume | Verb::Stop | Verb::Expire | Verb::CleanPods => sleep(w, "b", &["a"]),
        Verb::FanOut => unreachable!("built above"),
        Verb::Outputs => {
            let w = w.step("b", &["a"]).command(&[
                "sh",
                "-c",
                "echo got {{steps.a.outputs.n}}; echo n=8 >> \"$WORKFLOW_OUTPUTS\"; sleep 0.5",
            ]);
            return sleep(w, "c", &["b"])
                .when(r#"steps.a.outputs.n == "7" && steps.b.outputs.n == "8""#)
                .exit_step("report", &[])
                .command(&["sh", "-c", "echo $WORKFLOW_STATUS"]);
        }
    };
    let w = sleep(w, "c", &["b"]).exit_step("report", &[]).command(&[
        "sh",
        "-c",
        "echo $WORKFLOW_STATUS",
    ]);
    match verb {
        Verb::Expire => w.ttl_seconds_after_finished(1),
        Verb::CleanPods => w.pod_cleanup(PodCleanup::OnSuccess),
        _ => w,
    }
}

/// [`Verb::FanOut`]'s workflow: in each of 2 runs, `a` writes a list of 2, then `b`'s 3 items,
/// then `c`'s 2 (from `a`'s list), then the exit step.
fn fan_out_workflow(name: &str) -> WorkFlowBuilder {
    WorkFlow::test(name)
        .runs(2)
        .step("a", &[])
        .command(&[
            "sh",
            "-c",
            r#"echo 'list=["p", "q"]' >> "$WORKFLOW_OUTPUTS"; sleep 0.3"#,
        ])
        .step("b", &["a"])
        .with_items(&[json!("x"), json!("y"), json!("z")])
        .command(&["sh", "-c", "echo $WORKFLOW_ITEM; sleep 0.3"])
        .step("c", &["b"])
        .with_param("{{steps.a.outputs.list}}")
        .command(&["sh", "-c", "echo {{item}}; sleep 0.3"])
        .exit_step("report", &[])
        .command(&["sh", "-c", "echo $WORKFLOW_STATUS"])
}

/// Run control under crashes: while the operator is SIGKILLed and
/// restarted at random moments, workflows are suspended and resumed, stopped, terminated and
/// retried through the API, or expire (`ttlSecondsAfterFinished`), lose their pods
/// (`podCleanup`), pass outputs between steps or fan out in repeated runs. Afterwards each ended
/// as its verb says (an expired one deleted with its Jobs and pods, a cleaned one with no pod
/// left, one with outputs with its value in the next step's Job and its `when` true), no step ran twice in a run and retry (at most one
/// Job per step, run and retry), and each exit step ran exactly once per retry that reached it
/// (never after a terminate).
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn operator_killed_while_workflows_are_suspended_stopped_terminated_and_retried(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    let recorder = JobRecorder::start(&operator.ns).await;
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("crash+verbs: seed {seed} (set CRASH_SEED to replay the same moments)");
    let mut rng = StdRng::seed_from_u64(seed);
    const VERBS: [Verb; 8] = [
        Verb::SuspendResume,
        Verb::Stop,
        Verb::Terminate,
        Verb::Retry,
        Verb::Expire,
        Verb::CleanPods,
        Verb::Outputs,
        Verb::FanOut,
    ];
    const EACH: usize = 2;

    let api = operator.ns.workflows();
    let mut drivers = Vec::new();
    for i in 0..VERBS.len() * EACH {
        let verb = VERBS[i % VERBS.len()];
        let name = format!("v{i:02}-{verb:?}").to_lowercase();
        let gate = support::Gate::new();
        let manifest = operator.ns.manifest(verb_workflow(&name, verb, &gate));
        let delays: [u64; 2] = [rng.random_range(100..2500), rng.random_range(200..2000)];
        let api = api.clone();
        drivers.push(tokio::spawn(async move {
            let manifest = &manifest;
            let api = &api;
            retrying("creating a workflow", || async move {
                api.create(&PostParams::default(), manifest).await
            })
            .await;
            drive(api, &name, verb, &gate, delays).await;
            (name, verb)
        }));
    }
    for _ in 0..KILLS {
        // A random moment: what is being tested is that any moment is safe.
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..900))).await;
        operator.kill().await;
        operator.start();
    }
    let mut ended = Vec::new();
    for driver in drivers {
        ended.push(driver.await.expect("the driver ran"));
    }

    let ns = &operator.ns;
    recorder.catch_up(ns).await;
    recorder.assert_no_step_ran_twice(&BTreeMap::new());
    let mut wrong = Vec::new();
    for (name, verb) in &ended {
        let reports: Vec<String> = recorder
            .jobs_of(name, "report")
            .iter()
            .map(|j| j.retry.clone())
            .collect();
        let expected_reports: &[&str] = match verb {
            Verb::Terminate => &[],
            Verb::Retry => &["0", "1"],
            Verb::SuspendResume
            | Verb::Stop
            | Verb::Expire
            | Verb::CleanPods
            | Verb::Outputs
            | Verb::FanOut => &["0"],
        };
        let mut sorted = reports.clone();
        sorted.sort();
        if sorted != expected_reports {
            wrong.push(format!(
                "{name}: exit step Jobs by retry {sorted:?}, want {expected_reports:?}"
            ));
        }
        if *verb == Verb::Expire {
            // `drive` saw it deleted; what it owned goes with it.
            wait_until_cleaned(ns, name, true).await;
            continue;
        }
        if *verb == Verb::CleanPods {
            wait_until_cleaned(ns, name, false).await;
        }
        let workflow = ns
            .wait_terminal_within(name, Duration::from_secs(300))
            .await;
        let phase = support::phase(&workflow);
        let message = support::message(&workflow);
        let ok = match verb {
            Verb::SuspendResume | Verb::Retry | Verb::CleanPods | Verb::Outputs | Verb::FanOut => {
                phase == Some(Phase::Completed)
            }
            Verb::Expire => unreachable!("checked above"),
            Verb::Stop => {
                phase == Some(Phase::Completed)
                    || phase == Some(Phase::Failed) && message.starts_with("stopped")
            }
            Verb::Terminate => phase == Some(Phase::Failed) && message.starts_with("terminated"),
        };
        if !ok {
            wrong.push(format!("{name}: ended {phase:?}: {message}"));
        }
        if *verb == Verb::Outputs {
            wrong.extend(outputs_went_through(ns, name, &recorder).await);
        }
        if *verb == Verb::FanOut {
            // One Job per item per run: no item lost, and (checked above) none twice.
            for (step, each_run) in [("a", 1), ("b", 3), ("c", 2)] {
                let made = recorder.jobs_of(name, step).len();
                if made != 2 * each_run {
                    wrong.push(format!(
                        "{name}: {made} Jobs of {step}, want {}",
                        2 * each_run
                    ));
                }
            }
        }
        if *verb == Verb::Retry && recorder.jobs_of(name, "a").len() != 1 {
            wrong.push(format!(
                "{name}: the succeeded step a ran again on the retry"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let log = operator.log();
    assert!(!log.contains("panicked"), "the operator panicked:\n{log}");
    println!(
        "crash+verbs: {} SIGKILLs; {} workflows suspended/resumed, stopped, terminated, \
         retried, expired, cleaned, passing outputs and fanning out ended as their verb says; no step ran twice in a run and \
         retry; exit steps ran once per retry",
        operator.kills,
        ended.len()
    );
}

/// Applies `verb` to the workflow `name` through the API, at the random `delays` (ms), waiting
/// (for a retry) for the failure first; returns once the workflow ended.
async fn drive(
    api: &Api<WorkFlow>,
    name: &str,
    verb: Verb,
    gate: &support::Gate,
    delays: [u64; 2],
) {
    let patch = |spec: serde_json::Value| async move {
        let patch = serde_json::json!({ "spec": spec });
        let patch = &patch;
        retrying("patching a workflow", || async move {
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        })
        .await;
    };
    let ended = Duration::from_secs(300);
    // The moments of the verbs, not waits for conditions.
    tokio::time::sleep(Duration::from_millis(delays[0])).await;
    match verb {
        Verb::SuspendResume => {
            patch(serde_json::json!({"suspend": true})).await;
            tokio::time::sleep(Duration::from_millis(delays[1])).await;
            patch(serde_json::json!({"suspend": null})).await;
        }
        Verb::Stop => patch(serde_json::json!({"shutdown": "Stop"})).await,
        Verb::Terminate => patch(serde_json::json!({"shutdown": "Terminate"})).await,
        Verb::Expire => {
            support::wait_for_within(api, name, "deleted by its TTL", ended, |wf| wf.is_none())
                .await;
            return;
        }
        Verb::CleanPods | Verb::Outputs | Verb::FanOut => {}
        Verb::Retry => {
            support::wait_for_within(api, name, "failed", ended, |wf| {
                wf.is_some_and(|wf| support::phase(wf) == Some(Phase::Failed))
            })
            .await;
            gate.open();
            patch(serde_json::json!({"retry": 1})).await;
            support::wait_for_within(api, name, "retried", ended, |wf| {
                wf.is_some_and(|wf| wf.status.as_ref().and_then(|s| s.retry) == Some(1))
            })
            .await;
        }
    }
    support::wait_for_within(api, name, "ended", ended, |wf| {
        wf.is_some_and(support::is_terminal)
    })
    .await;
}

/// Waits until workflow `name` has no pod left, and no Job either when `jobs_too`: the garbage
/// collector and the pod clean-up work apart from the operator, so only polling can tell.
async fn wait_until_cleaned(ns: &support::Namespace, name: &str, jobs_too: bool) {
    let selector = workflow_operator_core::jobs::selector(name);
    let params = &kube::api::ListParams::default().labels(&selector);
    let what = format!(
        "{name}'s pods{} deleted",
        if jobs_too { " and Jobs" } else { "" }
    );
    kube_devcluster::testing::eventually(&what, Duration::from_secs(60), || async move {
        let jobs = retrying(
            "listing jobs",
            || async move { ns.jobs().list(params).await },
        )
        .await;
        let pods = retrying(
            "listing pods",
            || async move { ns.pods().list(params).await },
        )
        .await;
        (pods.items.is_empty() && (!jobs_too || jobs.items.is_empty())).then_some(())
    })
    .await;
}

/// What is wrong with workflow `name` of [`Verb::Outputs`]: `b`'s Job not built with `a`'s
/// output, or `c` (whose `when` reads both outputs) not run exactly once.
async fn outputs_went_through(
    ns: &support::Namespace,
    name: &str,
    recorder: &JobRecorder,
) -> Vec<String> {
    let mut wrong = Vec::new();
    let b_command: Vec<String> = ns
        .jobs_of(name)
        .await
        .into_iter()
        .filter(|job| {
            job.annotations()
                .get("workflow.crd.com/step")
                .map(String::as_str)
                == Some("b")
        })
        .flat_map(|job| {
            job.spec
                .and_then(|s| s.template.spec)
                .map(|p| p.containers[0].command.clone().unwrap_or_default())
                .unwrap_or_default()
        })
        .collect();
    if !b_command.iter().any(|a| a.contains("echo got 7;")) {
        wrong.push(format!(
            "{name}: b's Job was not built with a's output: {b_command:?}"
        ));
    }
    if recorder.jobs_of(name, "c").len() != 1 {
        wrong.push(format!(
            "{name}: c ran {} times, not once",
            recorder.jobs_of(name, "c").len()
        ));
    }
    wrong
}
