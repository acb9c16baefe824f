//! What a run is, end to end on the embedded control plane: a workflow edited while a step runs
//! starts a new run when the edit changes what runs (a script, an init container, a sidecar, an
//! output's path), so no run mixes two versions of its spec.

use crate::support;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{ListParams, LogParams, PostParams};
use rstest::rstest;
use serde_json::{Value, json};
use support::{Gate, Operator, operator};
use workflow_operator_core::WorkFlow;

/// Step `a` then `b`, each with the fields `a` and `b` over a plain step.
fn two_steps(name: &str, ns: &str, a: Value, b: Value) -> WorkFlow {
    serde_json::from_value(json!({
        "apiVersion": "workflow.crd.com/v1", "kind": "WorkFlow",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [
            merged(json!({"stepName": "a", "image": "busybox:1.36"}), a),
            merged(json!({"stepName": "b", "image": "busybox:1.36", "dependsOn": ["a"]}), b),
        ]},
    }))
    .unwrap()
}

fn merged(mut base: Value, patch: Value) -> Value {
    json_patch::merge(&mut base, &patch);
    base
}

/// One field under test: each step's fields in a version (`v1` or `v2`), and which log shows
/// the version (a container's name, or `None` for the step's own).
struct Variant {
    fields: fn(step: &str, version: &str) -> Value,
    log_of: Option<&'static str>,
    /// The fields the new run's Event and `get` name as changed.
    changed: &'static str,
}

/// The script of every variant but `script`'s: the same in both versions.
fn fixed_script(step: &str) -> Value {
    json!(format!("echo ran-{step}"))
}

fn script(step: &str, version: &str) -> Value {
    json!({"source": format!("echo {version}-{step}")})
}

fn init_container(step: &str, version: &str) -> Value {
    json!({"source": fixed_script(step), "initContainers": [{"name": "init", "image": "busybox:1.36",
        "command": ["sh", "-c", format!("echo {version}-{step}")]}]})
}

fn sidecar(step: &str, version: &str) -> Value {
    json!({"source": fixed_script(step), "sidecars": [{"name": "side", "image": "busybox:1.36",
        "command": ["sh", "-c", format!("echo {version}-{step}; sleep 3600")]}]})
}

/// `a` writes both versions' files; the output's path picks which `b` prints.
fn output_path(step: &str, version: &str) -> Value {
    if step == "a" {
        json!({"source": "echo v1-a > /tmp/v1; echo v2-a > /tmp/v2",
               "outputs": {"parameters": [{"name": "k", "valueFrom": {"path": format!("/tmp/{version}")}}]}})
    } else {
        json!({"source": "echo {{steps.a.outputs.parameters.k}}-b"})
    }
}

/// Both steps edited while `a` runs: a new run (a new `status.run`) that `get` names with the
/// fields that changed, `a` started again, and the completed run's logs show the second version
/// only; the first run's Jobs are gone.
#[rstest]
#[case::script("script", Variant {
    fields: script, log_of: None, changed: "steps.a.source, steps.b.source" })]
#[case::init_container("init", Variant {
    fields: init_container, log_of: Some("init"),
    changed: "steps.a.initContainers, steps.b.initContainers" })]
#[case::sidecar("sidecar", Variant {
    fields: sidecar, log_of: Some("side"), changed: "steps.a.sidecars, steps.b.sidecars" })]
#[case::output_path("output", Variant {
    fields: output_path, log_of: None, changed: "steps.a.outputs" })]
#[tokio::test]
async fn an_edit_while_a_step_runs_starts_a_new_run_of_the_new_version(
    #[future(awt)] operator: Operator,
    #[case] name: &str,
    #[case] variant: Variant,
) {
    skip_on_real_cluster!("step a waits for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    // `a` waits on the gate in both versions (the wait is no part of the edit).
    let version = |v: &str| {
        let mut a = (variant.fields)("a", v);
        let source = a["source"].as_str().unwrap().to_string();
        a["source"] = json!(format!("{}\n{source}", gate.wait_script()));
        two_steps(name, &ns.name, a, (variant.fields)("b", v))
    };
    let v1 = version("v1");
    ns.workflows()
        .create(&PostParams::default(), &v1)
        .await
        .unwrap();
    let first_a = ns.wait_step_job(name, "a", "created", |_| true).await;
    let first_run = ns.get(name).await.status.unwrap().run.unwrap();

    ns.patch_spec(name, serde_json::to_value(&version("v2").spec).unwrap())
        .await;
    ns.wait_workflow(name, "a new run", |wf| {
        wf.status.as_ref().and_then(|s| s.run.as_deref()) != Some(first_run.as_str())
    })
    .await;
    gate.open();
    let done = ns.expect_completed(name).await;
    assert_ne!(done.status.unwrap().run.unwrap(), first_run);
    // The new run says so: `get`'s header names it, when, and what changed.
    let shown = ns.cli(&["get", name]).await;
    let run_line = shown
        .lines()
        .find(|l| l.starts_with("Run:"))
        .unwrap_or_default();
    assert!(run_line.contains("new run 2 at "), "{shown}");
    assert!(
        run_line.ends_with(&format!("the spec changed: {}", variant.changed)),
        "{shown}"
    );

    let jobs = ns.jobs_of(name).await;
    assert_eq!(
        support::jobs_named(&jobs),
        ["a", "b"],
        "the new run's Jobs only"
    );
    for job in &jobs {
        assert_ne!(job.metadata.uid, first_a.metadata.uid, "a started again");
        let step = support::step_of(job).unwrap();
        let log = container_log(ns, job, variant.log_of).await;
        // An output's path shows in what `b` prints of it; `a`'s script is the same in both.
        let shown = match name {
            "output" => (step == "b").then_some("v2-a-b".to_string()),
            _ => Some(format!("v2-{step}")),
        };
        if let Some(shown) = shown {
            assert!(log.contains(&shown), "{step}: {log}");
        }
        assert!(!log.contains("v1-"), "{step}: {log}");
    }
}

/// The log of `container` (the step's own when `None`) in the pods of `job`.
async fn container_log(ns: &support::Namespace, job: &Job, container: Option<&str>) -> String {
    let pods = ns
        .pods()
        .list(&ListParams::default().labels(&format!("job-name={}", job.name_any())))
        .await
        .unwrap()
        .items;
    let mut log = String::new();
    for pod in pods {
        let params = LogParams {
            container: container.map(String::from),
            ..LogParams::default()
        };
        log.push_str(&ns.pods().logs(&pod.name_any(), &params).await.unwrap());
    }
    log
}
