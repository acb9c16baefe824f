//! Every manifest of `examples/` runs, as a user would submit it, to the outcome its comments
//! promise: each example is a case below, and [`every_example_has_a_case`] fails when a file of
//! `examples/` has none. Where the comments walk through commands (`run-control.yaml`'s
//! `suspend`, `resume`, `stop`, `retry`), the case runs them with the `workflow-operator` CLI.
//!
//! Run: `cargo test --test it examples::`.

use crate::support;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use rstest::rstest;
use serde::Deserialize;
use serde_json::Value;
use support::{Namespace, Operator, job_outcome, operator, phase, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{CronWorkFlow, WorkFlowTrigger};
use workflow_operator_core::crd::{StepPhase, StepStatus};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::template::{ClusterWorkFlowTemplate, WorkFlowTemplate};

/// The examples this file runs, one case each below.
const EXAMPLES: &[&str] = &[
    "args",
    "cleanup",
    "cluster-workflow-template",
    "continue-on",
    "cron",
    "diamond",
    "env",
    "fail-fast-false",
    "failing",
    "fan-out",
    "http",
    "interactive",
    "invalid-cycle",
    "locks",
    "metrics",
    "outputs",
    "parallelism",
    "queued",
    "resources",
    "retries",
    "retry-strategy",
    "rules",
    "run-control",
    "scripts-and-results",
    "secrets-and-volumes",
    "simple",
    "start-timeout",
    "step-timeout",
    "templates",
    "timeout",
    "trigger",
    "workflow-template",
];

/// Every manifest of examples/ (its folders hold other languages' examples, run by their own
/// tests: `examples/python` by the Python SDK's).
#[test]
fn every_example_has_a_case() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|entry| entry.expect("an entry of examples/"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let cased: Vec<String> = EXAMPLES.iter().map(|e| format!("{e}.yaml")).collect();
    assert_eq!(
        files, cased,
        "every file of examples/ needs a case in tests/it/examples.rs saying what its comments promise"
    );
}

#[rstest]
#[case::args("args")]
#[case::cleanup("cleanup")]
#[case::cluster_workflow_template("cluster-workflow-template")]
#[case::continue_on("continue-on")]
#[case::cron("cron")]
#[case::diamond("diamond")]
#[case::env("env")]
#[case::fail_fast_false("fail-fast-false")]
#[case::failing("failing")]
#[case::fan_out("fan-out")]
#[case::http("http")]
#[case::interactive("interactive")]
#[case::invalid_cycle("invalid-cycle")]
#[case::locks("locks")]
#[case::metrics("metrics")]
#[case::outputs("outputs")]
#[case::parallelism("parallelism")]
#[case::queued("queued")]
#[case::resources("resources")]
#[case::retries("retries")]
#[case::retry_strategy("retry-strategy")]
#[case::rules("rules")]
#[case::run_control("run-control")]
#[case::scripts_and_results("scripts-and-results")]
#[case::secrets_and_volumes("secrets-and-volumes")]
#[case::simple("simple")]
#[case::start_timeout("start-timeout")]
#[case::step_timeout("step-timeout")]
#[case::templates("templates")]
#[case::timeout("timeout")]
#[case::trigger("trigger")]
#[case::workflow_template("workflow-template")]
#[tokio::test]
async fn example_runs_to_the_outcome_its_comments_promise(
    #[case] example: &str,
    #[future(awt)] operator: Operator,
) {
    assert!(
        EXAMPLES.contains(&example),
        "{example} is listed in EXAMPLES"
    );
    let ns = &operator.ns;
    // `run-control.yaml`'s `build` sleeps a minute, time for a user to type the commands its
    // comments walk through; here it waits for this gate, which the case opens once it has.
    let build_done = support::Gate::new();
    // `http.yaml` calls httpbin.org; here a stand-in on this machine, where the embedded
    // control plane's pods run (a real cluster's reach httpbin.org itself).
    let seen = crate::argo_http::Seen::default();
    let httpbin = match support::Cluster::is_real() {
        true => "https://httpbin.org".to_string(),
        false => crate::argo_http::serve(seen.clone()).await,
    };
    create_example(ns, example, |text| {
        (text.replace("sleep 60", &build_done.wait_script()))
            .replace("https://httpbin.org", &httpbin)
    })
    .await;
    // Each case a future of its own on the heap: together they overflow a test thread's stack.
    let case: Pin<Box<dyn Future<Output = ()> + '_>> = match example {
        "args" => Box::pin(async {
            ns.expect_completed("args").await;
            assert_eq!(log_of(ns, "args", "greet").await, "hello from args");
        }),
        "cleanup" => Box::pin(async {
            ns.expect_completed("cleanup").await;
            // Each succeeded step's pods are deleted; the workflow and its Jobs stay.
            ns.wait_no_pods("the pods of the succeeded steps", |_| true)
                .await;
            assert_eq!(steps_of(&ns.jobs_of("cleanup").await), ["extract", "load"]);
            assert_eq!(phase(&ns.get("cleanup").await), Some(Phase::Completed));
        }),
        "diamond" => Box::pin(async {
            ns.expect_completed("diamond").await;
            let jobs = ns.jobs_of("diamond").await;
            let job = |step: &str| jobs.iter().find(|j| step_of(j) == Some(step)).unwrap();
            let started = |step: &str| start_time(job(step));
            let finished = |step: &str| completion_time(job(step));
            assert!(started("step1") >= finished("step0"));
            assert!(started("step2") >= finished("step0"));
            assert!(started("step3") >= finished("step1"));
            assert!(started("step3") >= finished("step2"));
        }),
        "env" => Box::pin(async {
            ns.expect_completed("env").await;
            assert_eq!(
                log_of(ns, "env", "greet").await,
                format!("hello from greet of env in {}", ns.name)
            );
        }),
        "fail-fast-false" => Box::pin(async {
            let workflow = ns
                .expect_failed("fail-fast-false", &["step broken failed"])
                .await;
            // `independent` ran to its end although `broken` had failed.
            assert!(support::executed(&workflow).contains("independent"));
            assert!(
                log_of(ns, "fail-fast-false", "independent")
                    .await
                    .ends_with("independent done")
            );
            assert_eq!(
                steps_of(&ns.jobs_of("fail-fast-false").await),
                ["broken", "independent"],
                "after-broken never starts"
            );
        }),
        "failing" => Box::pin(async {
            ns.expect_failed("failing", &["step fail failed: exit code 1"])
                .await;
            assert_eq!(
                steps_of(&ns.jobs_of("failing").await),
                ["fail", "ok"],
                "after never starts"
            );
        }),
        "fan-out" => Box::pin(async {
            let workflow = ns.expect_completed("fan-out").await;
            // Twice (runs: 2): regions, build ×3 items, test ×3, deploy ×3 regions.
            let jobs = ns.jobs_of("fan-out").await;
            assert_eq!(jobs.len(), 2 * (1 + 3 + 3 + 3), "{:?}", steps_of(&jobs));
            assert!(jobs.iter().all(|j| job_outcome(j) == Some(true)));
            let deploys: Vec<String> = {
                let mut logs = Vec::new();
                for job in jobs.iter().filter(|j| step_of(j) == Some("deploy")) {
                    logs.push(ns.job_log(job).await.trim().to_owned());
                }
                logs.sort();
                logs
            };
            assert_eq!(
                deploys,
                [
                    "deploying to ap",
                    "deploying to ap",
                    "deploying to eu",
                    "deploying to eu",
                    "deploying to us",
                    "deploying to us"
                ],
                "{}",
                support::describe_status(&workflow)
            );
        }),
        "metrics" => Box::pin(async {
            // The operator of these cases serves no /metrics: tests/it/argo_metrics.rs reads it.
            let workflow = ns.expect_completed("metrics").await;
            assert_eq!(
                step_status(&workflow, "flaky").map(|s| (s.phase, s.exit_code)),
                Some((StepPhase::Failed, Some(3)))
            );
            assert!(support::executed(&workflow).contains("measure"));
        }),
        "continue-on" => Box::pin(async {
            let workflow = ns.expect_completed("continue-on").await;
            assert_eq!(
                support::message(&workflow),
                "2 steps and 1 exit step succeeded; step lint failed: exit code 1 (continueOn.failed: the workflow went on)"
            );
            assert_eq!(
                step_status(&workflow, "lint").map(|s| s.phase),
                Some(StepPhase::Failed)
            );
            assert_eq!(
                log_of(ns, "continue-on", "lint-report").await,
                "lint failed; the build went on"
            );
            assert_eq!(
                log_of(ns, "continue-on", "summary").await,
                "ended Completed; failed: lint"
            );
        }),
        "retry-strategy" => Box::pin(async {
            ns.expect_completed("retry-strategy").await;
            let jobs = ns.jobs_of("retry-strategy").await;
            let mut logs = Vec::new();
            for job in jobs.iter().filter(|j| step_of(j) == Some("fetch")) {
                logs.push(ns.job_log(job).await.trim().to_owned());
            }
            logs.sort();
            assert_eq!(logs, ["attempt 0", "attempt 1", "attempt 2"]);
        }),
        "locks" => Box::pin(async {
            let mut runs = Vec::new();
            for name in ["locks", "locks-2"] {
                ns.expect_completed(name).await;
                runs.push(span(&ns.jobs_of(name).await));
            }
            runs.sort();
            assert!(
                runs[0].1 <= runs[1].0,
                "one release after the other: {runs:?}"
            );
            // The semaphore of 1 kept load-a and load-b apart.
            for name in ["locks", "locks-2"] {
                let jobs = ns.jobs_of(name).await;
                let loads: Vec<(Time, Time)> = (jobs.iter())
                    .filter(|j| step_of(j).is_some_and(|s| s.starts_with("load-")))
                    .map(|j| span(std::slice::from_ref(j)))
                    .collect();
                let (a, b) = (&loads[0], &loads[1]);
                assert!(a.1 <= b.0 || b.1 <= a.0, "{name}: {loads:?}");
            }
        }),
        "invalid-cycle" => Box::pin(async {
            ns.expect_failed(
                "invalid-cycle",
                &["invalid workflow: dependency cycle: extract -> transform -> load -> extract"],
            )
            .await;
            assert!(ns.jobs_of("invalid-cycle").await.is_empty());
        }),
        "outputs" => Box::pin(async {
            let workflow = ns.expect_completed("outputs").await;
            assert_eq!(log_of(ns, "outputs", "deploy").await, "deploying 1.4.2");
            assert_eq!(
                step_status(&workflow, "alert").map(|s| s.phase),
                Some(StepPhase::Skipped),
                "{}",
                support::describe_status(&workflow)
            );
            assert_eq!(
                log_of(ns, "outputs", "report").await,
                "deploy ran, alert skipped"
            );
            assert_eq!(
                steps_of(&ns.jobs_of("outputs").await),
                ["check", "deploy", "report"]
            );
        }),
        "scripts-and-results" => Box::pin(async {
            let workflow = ns.expect_completed("scripts-and-results").await;
            let side = step_status(&workflow, "flip")
                .and_then(|s| s.outputs.get("result").cloned())
                .expect("flip's result recorded");
            assert!(side == "heads" || side == "tails", "{side}");
            let (ran, skipped) = match side.as_str() {
                "heads" => ("heads", "tails"),
                _ => ("tails", "heads"),
            };
            assert_eq!(
                log_of(ns, "scripts-and-results", ran).await,
                format!("it was {ran}")
            );
            assert_eq!(
                step_status(&workflow, skipped).map(|s| s.phase),
                Some(StepPhase::Skipped)
            );
            assert_eq!(
                log_of(ns, "scripts-and-results", "report").await,
                format!("flip said {side}; size 11, colour none")
            );
        }),
        "parallelism" => Box::pin(async {
            let history =
                support::wait_for_history(&ns.workflows(), "parallelism", "Completed", |wf| {
                    wf.is_some_and(|wf| phase(wf) == Some(Phase::Completed))
                })
                .await;
            let most = history
                .iter()
                .map(|wf| support::started(wf).len())
                .max()
                .unwrap_or_default();
            assert!(most <= 2, "at most two steps run at once, saw {most}");
            assert_eq!(support::executed(&ns.get("parallelism").await).len(), 6);
        }),
        "rules" => Box::pin(async {
            let workflow = ns.expect_completed("rules").await;
            let status = workflow.status.as_ref().unwrap();
            assert_eq!(status.parallelism, Some(3), "grown twice from 1");
            let fired: Vec<(&str, u32)> = (status.rules.iter())
                .map(|r| (r.name.as_str(), r.fired))
                .collect();
            assert_eq!(fired, [("slow-sims", 2), ("give-up", 0)]);
            let shown = ns.cli(&["get", "rules"]).await;
            assert!(shown.contains("RULES FIRED\nslow-sims: "), "{shown}");
        }),
        "queued" => Box::pin(async {
            let workflow = ns.expect_completed("queued").await;
            assert_eq!(support::executed(&workflow).len(), 5);
        }),
        "resources" => Box::pin(async {
            ns.expect_completed("resources").await;
            let jobs = ns.jobs_of("resources").await;
            let container = &jobs[0]
                .spec
                .as_ref()
                .unwrap()
                .template
                .spec
                .as_ref()
                .unwrap()
                .containers[0];
            let resources = serde_json::to_value(container.resources.as_ref().unwrap()).unwrap();
            assert_eq!(
                resources,
                serde_json::json!({
                    "requests": {"cpu": "100m", "memory": "16Mi"},
                    "limits": {"cpu": "1", "memory": "64Mi"},
                })
            );
        }),
        "retries" => Box::pin(async {
            let workflow = ns.expect_failed("retries", &["step flaky failed"]).await;
            assert_eq!(
                step_status(&workflow, "flaky").and_then(|s| s.attempts),
                Some(3),
                "{}",
                support::describe_status(&workflow)
            );
        }),
        "interactive" => Box::pin(async {
            let waiting = ns
                .wait_workflow("interactive", "simulate waiting for you", |wf| {
                    step_status(wf, "simulate").map(|s| s.phase) == Some(StepPhase::Interactive)
                })
                .await;
            let job = step_status(&waiting, "simulate").and_then(|s| s.job.clone());
            let job = job.expect("an interactive step names its Job");
            ns.wait_pods_ready(&job).await;
            ns.cli(&["continue", "interactive", "simulate", "--exit-code", "0"])
                .await;
            ns.expect_completed("interactive").await;
            assert_eq!(log_of(ns, "interactive", "report").await, "reported");
        }),
        "run-control" => Box::pin(run_control(&operator, &build_done)),
        "secrets-and-volumes" => Box::pin(async {
            ns.expect_completed("secrets-and-volumes").await;
            assert_eq!(
                log_of(ns, "secrets-and-volumes", "read").await,
                "password=s3cret greeting=hello file=hello"
            );
        }),
        "simple" => Box::pin(async {
            let workflow = ns.expect_completed("simple").await;
            assert_eq!(support::executed(&workflow).len(), 3);
        }),
        "start-timeout" => Box::pin(async {
            let workflow = ns
                .wait_terminal_within("start-timeout", Duration::from_secs(90))
                .await;
            assert_eq!(phase(&workflow), Some(Phase::Failed));
            let message = support::message(&workflow);
            assert!(
                message.contains(
                    r#"step db cannot start: CreateContainerConfigError: secret "missing-creds" not found"#
                ),
                "{message}"
            );
        }),
        "step-timeout" => Box::pin(async {
            let workflow = ns.expect_completed("step-timeout").await;
            assert_eq!(support::executed(&workflow).len(), 2);
        }),
        "timeout" => Box::pin(async {
            ns.expect_failed("timeout", &["step slow timed out"]).await;
        }),
        "templates" => Box::pin(async {
            let workflow = ns.expect_completed("templates").await;
            let steps = [
                "hello",
                "linux/build",
                "linux/test",
                "other/build",
                "other/test",
                "publish",
            ];
            assert_eq!(support::executed(&workflow), steps.map(String::from).into());
            assert_eq!(
                log_of(ns, "templates", "other/build").await,
                "build darwin\nbuild darwin"
            );
            assert_eq!(log_of(ns, "templates", "publish").await, "published 1.0");
        }),
        "workflow-template" => Box::pin(async {
            let workflow = ns.expect_completed("workflow-template").await;
            let record = &workflow.status.as_ref().unwrap().resolved_templates;
            assert_eq!(
                (record[0].kind.as_str(), record[0].name.as_str()),
                ("WorkFlowTemplate", "ci")
            );
            assert_eq!(
                log_of(ns, "workflow-template", "checkout").await,
                "checkout feature-x (depth 1)"
            );
            assert_eq!(
                log_of(ns, "workflow-template", "test").await,
                "tested feature-x"
            );
        }),
        "cron" => Box::pin(async {
            // A run named for its time completes, labelled by the CronWorkFlow's metadata.
            let selector = "workflow.crd.com/cron=heartbeat,team=platform";
            let completed =
                |runs: &[Arc<WorkFlow>]| runs.iter().any(|r| phase(r) == Some(Phase::Completed));
            let runs = support::wait_list(
                &ns.workflows(),
                kube::runtime::watcher::Config::default().labels(selector),
                "a run of heartbeat Completed",
                Duration::from_secs(60),
                completed,
            )
            .await;
            let run = runs
                .iter()
                .find(|r| phase(r) == Some(Phase::Completed))
                .unwrap();
            assert!(
                run.name_any().starts_with("heartbeat-"),
                "{}",
                run.name_any()
            );
            let log = log_of(ns, &run.name_any(), "ping").await;
            assert!(log.starts_with("alive at "), "{log}");
        }),
        "cluster-workflow-template" => Box::pin(async {
            ns.expect_completed("cluster-workflow-template").await;
            assert_eq!(
                log_of(ns, "cluster-workflow-template", "notify").await,
                "notify: cluster-workflow-template done"
            );
        }),
        "http" => Box::pin(async {
            let workflow = ns.expect_completed("http").await;
            assert_eq!(
                support::message(&workflow),
                "2 steps succeeded; step missing failed: exit code 1: received non-2xx response code: 404 (continueOn.failed: the workflow went on)"
            );
            let report = log_of(ns, "http", "report").await;
            assert!(report.contains(r#""json":{"name":"nightly"}"#), "{report}");
            if !support::Cluster::is_real() {
                let seen = seen.lock().unwrap().clone();
                assert_eq!(seen, ["POST /post authorization=Bearer not-a-real-token"]);
            }
        }),
        "trigger" => Box::pin(async {
            // The delivery its comments fire from a file starts one run, building the commit.
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(
                file.path(),
                r#"{"ref": "refs/heads/main", "after": "c0ffee"}"#,
            )
            .unwrap();
            let path = file.path().to_str().unwrap();
            let fire = [
                "trigger", "fire", "on-push", "--file", path, "--id", "test-1",
            ];
            let answer = ns.cli(&fire).await;
            let run = workflow_operator_core::names::trigger_run_name("on-push", "test-1");
            assert_eq!(answer.trim(), format!("201 started: {run}"));
            ns.expect_completed(&run).await;
            assert_eq!(log_of(ns, &run, "build").await, "building c0ffee");
            assert_eq!(
                ns.cli(&fire).await.trim(),
                format!("200 already started: {run}")
            );
        }),
        other => panic!("no case for examples/{other}.yaml"),
    };
    case.await;
}

/// `run-control.yaml`'s walk-through: suspend (build goes on, test does not start), resume, stop
/// (build finishes, report runs, Failed), retry (test and publish run, build keeps its Job).
async fn run_control(operator: &Operator, build_done: &support::Gate) {
    let ns = &operator.ns;
    ns.wait_step_job("run-control", "build", "created", |_| true)
        .await;
    ns.cli(&["suspend", "run-control"]).await;
    ns.wait_workflow("run-control", "Suspended", |wf| {
        phase(wf) == Some(Phase::Suspended)
    })
    .await;
    ns.cli(&["resume", "run-control"]).await;
    ns.wait_workflow("run-control", "Started again", |wf| {
        phase(wf) == Some(Phase::Started)
    })
    .await;
    ns.cli(&["stop", "run-control"]).await;
    // Stopping lets `build` finish; it does once the gate opens.
    build_done.open();
    let stopped = ns.wait_terminal("run-control").await;
    assert_eq!(
        phase(&stopped),
        Some(Phase::Failed),
        "{}",
        support::describe_status(&stopped)
    );
    assert!(
        support::message(&stopped).starts_with("stopped"),
        "{}",
        support::describe_status(&stopped)
    );
    let jobs = ns.jobs_of("run-control").await;
    assert_eq!(steps_of(&jobs), ["build", "report"], "test did not start");
    let report = jobs.iter().find(|j| step_of(j) == Some("report")).unwrap();
    let log = ns.job_log(report).await;
    assert!(
        log.starts_with("workflow run-control ended Failed; failed steps:"),
        "the exit step is told how the workflow ended: {log:?}"
    );

    ns.cli(&["retry", "run-control"]).await;
    let retried = ns
        .wait_workflow("run-control", "the end of the retry", |wf| {
            support::is_terminal(wf)
                && wf.status.as_ref().and_then(|s| s.retry) == Some(wf.spec.retry)
        })
        .await;
    assert_eq!(
        phase(&retried),
        Some(Phase::Completed),
        "{}",
        support::describe_status(&retried)
    );
    let jobs = ns.jobs_of("run-control").await;
    assert_eq!(
        jobs.iter().filter(|j| step_of(j) == Some("build")).count(),
        1,
        "build keeps its Job: {:?}",
        steps_of(&jobs)
    );
    for step in ["test", "publish"] {
        assert!(
            jobs.iter()
                .any(|j| step_of(j) == Some(step) && job_outcome(j) == Some(true)),
            "{step} ran after the retry: {:?}",
            steps_of(&jobs)
        );
    }
}

/// Creates every object of `examples/NAME.yaml` in the test's namespace, as `kubectl create -f`
/// would (the examples hold WorkFlows and, for `secrets-and-volumes`, what its step reads), its
/// text first passed through `edit`.
async fn create_example(ns: &Namespace, name: &str, edit: impl Fn(String) -> String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.yaml"));
    let text = edit(std::fs::read_to_string(&path).expect("the example reads"));
    let post = PostParams::default();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let object = Value::deserialize(document).expect("the example is YAML");
        if object.is_null() {
            continue;
        }
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let client = ns.client();
        match kind.as_str() {
            "WorkFlow" => {
                let workflow: WorkFlow = serde_json::from_value(object).unwrap();
                Api::<WorkFlow>::namespaced(client, &ns.name)
                    .create(&post, &workflow)
                    .await
                    .map(|_| ())
            }
            "Secret" => {
                let secret: Secret = serde_json::from_value(object).unwrap();
                Api::<Secret>::namespaced(client, &ns.name)
                    .create(&post, &secret)
                    .await
                    .map(|_| ())
            }
            "ConfigMap" => {
                let map: ConfigMap = serde_json::from_value(object).unwrap();
                Api::<ConfigMap>::namespaced(client, &ns.name)
                    .create(&post, &map)
                    .await
                    .map(|_| ())
            }
            "ServiceAccount" => {
                let account: ServiceAccount = serde_json::from_value(object).unwrap();
                Api::<ServiceAccount>::namespaced(client, &ns.name)
                    .create(&post, &account)
                    .await
                    .map(|_| ())
            }
            "WorkFlowTemplate" => {
                let template: WorkFlowTemplate = serde_json::from_value(object).unwrap();
                Api::<WorkFlowTemplate>::namespaced(client, &ns.name)
                    .create(&post, &template)
                    .await
                    .map(|_| ())
            }
            "CronWorkFlow" => {
                let cron: CronWorkFlow = serde_json::from_value(object).unwrap();
                Api::<CronWorkFlow>::namespaced(client, &ns.name)
                    .create(&post, &cron)
                    .await
                    .map(|_| ())
            }
            "WorkFlowTrigger" => {
                let trigger: WorkFlowTrigger = serde_json::from_value(object).unwrap();
                Api::<WorkFlowTrigger>::namespaced(client, &ns.name)
                    .create(&post, &trigger)
                    .await
                    .map(|_| ())
            }
            "ClusterWorkFlowTemplate" => {
                let template: ClusterWorkFlowTemplate = serde_json::from_value(object).unwrap();
                Api::<ClusterWorkFlowTemplate>::all(client)
                    .create(&post, &template)
                    .await
                    .map(|_| ())
            }
            other => panic!("examples/{name}.yaml: no way to create a {other} here"),
        }
        .unwrap_or_else(|e| panic!("creating the {kind} of examples/{name}.yaml: {e}"));
    }
}

/// The steps of `jobs`, sorted.
fn steps_of(jobs: &[Job]) -> Vec<String> {
    support::jobs_named(jobs)
}

/// The log of the (only) Job of `step`, trimmed.
/// From the first of `jobs` created to the last finished.
fn span(jobs: &[Job]) -> (Time, Time) {
    let created = jobs
        .iter()
        .filter_map(|j| j.metadata.creation_timestamp.clone());
    let finished = (jobs.iter()).filter_map(|j| j.status.as_ref()?.completion_time.clone());
    let first = created.min_by_key(|t| t.0).expect("created");
    let last = finished.max_by_key(|t| t.0).expect("finished");
    (first, last)
}

async fn log_of(ns: &Namespace, workflow: &str, step: &str) -> String {
    let jobs = ns.jobs_of(workflow).await;
    let job = jobs
        .iter()
        .find(|j| step_of(j) == Some(step))
        .unwrap_or_else(|| panic!("a Job of step {step}: {:?}", steps_of(&jobs)));
    ns.job_log(job).await.trim().to_owned()
}

fn step_status<'a>(workflow: &'a WorkFlow, step: &str) -> Option<&'a StepStatus> {
    workflow
        .status
        .as_ref()?
        .steps
        .iter()
        .find(|s| s.name == step)
}

fn start_time(job: &Job) -> Time {
    let time = job.status.as_ref().and_then(|s| s.start_time.clone());
    time.unwrap_or_else(|| panic!("Job {} started", job.name_any()))
}

fn completion_time(job: &Job) -> Time {
    let time = job.status.as_ref().and_then(|s| s.completion_time.clone());
    time.unwrap_or_else(|| panic!("Job {} completed", job.name_any()))
}
