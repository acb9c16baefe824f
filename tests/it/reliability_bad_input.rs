//! Reliability under bad input: each bad manifest is either refused at create with a
//! 422 naming the field, or ends `Failed` with a message naming the problem; a valid workflow
//! running beside them completes; the operator (a separate process) never restarts or panics;
//! an object over the real server's size limit is refused as a real server refuses it.
//!
//! Run: `cargo test --test it reliability_bad_input:: -- --nocapture` (prints each case's answer).

use crate::support;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rstest::rstest;
use serde_json::{Value, json};
use support::{Namespace, Operator, operator_process};
use workflow_operator_core::WorkFlow;

/// What a bad manifest must get.
enum Answer {
    /// Refused at create: 422 with every one of these in the message (the field's path).
    Refused(&'static [&'static str]),
    /// Accepted, then `Failed` with every one of these in the message.
    Fails(&'static [&'static str]),
}

use Answer::{Fails, Refused};

/// A step as the seed writes it.
fn step(name: &str, depends_on: &[&str]) -> Value {
    json!({"stepName": name, "image": "busybox:1.36", "command": ["sh", "-c", "echo ok"], "dependsOn": depends_on})
}

/// The bad manifests: a name, the `spec` (or a whole object for metadata cases), the answer.
fn cases() -> Vec<(&'static str, Value, Answer)> {
    let with_step = |field: &str, value: Value| {
        let mut s = step("a", &[]);
        s[field] = value;
        json!({"containers": [s]})
    };
    vec![
        (
            "cycle",
            json!({"containers": [step("a", &["c"]), step("b", &["a"]), step("c", &["b"])]}),
            Fails(&["dependency cycle: a -> b -> c -> a"]),
        ),
        (
            "self-dependency",
            json!({"containers": [step("a", &["a"])]}),
            Fails(&["\"a\" depends on itself"]),
        ),
        (
            "unknown-dependency",
            json!({"containers": [step("a", &["ghost"])]}),
            Fails(&["depends on unknown step \"ghost\""]),
        ),
        (
            "duplicate-names",
            json!({"containers": [step("a", &[]), step("a", &[])]}),
            Fails(&["\"a\" is used more than once"]),
        ),
        (
            "command-not-found",
            json!({"containers": [
                {"stepName": "a", "image": "busybox:1.36", "command": ["/no/such/program"]},
            ]}),
            Fails(&["step a failed"]),
        ),
        (
            "no-steps",
            json!({"containers": []}),
            Refused(&["spec.containers"]),
        ),
        (
            "containers-missing",
            json!({"maxStepTimeout": 5}),
            Refused(&["spec.containers"]),
        ),
        (
            "containers-not-a-list",
            json!({"containers": {"stepName": "a", "image": "busybox"}}),
            Refused(&["spec.containers"]),
        ),
        (
            "empty-step-name",
            with_step("stepName", json!("")),
            Refused(&["spec.containers[0].stepName"]),
        ),
        (
            "300-character-step-name",
            with_step("stepName", json!("s".repeat(300))),
            Refused(&["spec.containers[0].stepName"]),
        ),
        (
            "numeric-step-name",
            with_step("stepName", json!(5)),
            Refused(&["spec.containers[0].stepName"]),
        ),
        (
            "max-step-timeout-minus-5",
            json!({"maxStepTimeout": -5, "containers": [step("a", &[])]}),
            Refused(&["spec.maxStepTimeout"]),
        ),
        (
            "max-step-timeout-text",
            json!({"maxStepTimeout": "sixty", "containers": [step("a", &[])]}),
            Refused(&["spec.maxStepTimeout"]),
        ),
        (
            "non-string-command",
            with_step("command", json!([1, true])),
            Refused(&["spec.containers[0].command[0]"]),
        ),
        (
            "command-as-a-string",
            with_step("command", json!("echo hi")),
            Refused(&["spec.containers[0].command"]),
        ),
        (
            "missing-image",
            json!({"containers": [{"stepName": "a", "command": ["true"]}]}),
            Refused(&["spec.containers[0].image"]),
        ),
        (
            "empty-image",
            with_step("image", json!("")),
            Refused(&["spec.containers[0].image"]),
        ),
        (
            "depends-on-a-string",
            with_step("dependsOn", json!("b")),
            Refused(&["spec.containers[0].dependsOn"]),
        ),
        (
            "step-timeout-minus-7",
            with_step("timeout", json!(-7)),
            Refused(&["spec.containers[0].timeout"]),
        ),
        (
            "negative-retries",
            with_step("retries", json!(-1)),
            Refused(&["spec.containers[0].retries"]),
        ),
        (
            "zero-parallelism",
            json!({"parallelism": 0, "containers": [step("a", &[])]}),
            Refused(&["spec.parallelism"]),
        ),
        (
            "fail-fast-text",
            json!({"failFast": "yes", "containers": [step("a", &[])]}),
            Refused(&["spec.failFast"]),
        ),
        (
            "env-without-name",
            with_step("env", json!([{"value": "x"}])),
            Refused(&["spec.containers[0].env[0].name"]),
        ),
        (
            "env-value-a-number",
            with_step("env", json!([{"name": "X", "value": 5}])),
            Refused(&["spec.containers[0].env[0].value"]),
        ),
        (
            "resources-not-a-quantity",
            with_step("resources", json!({"limits": {"cpu": "lots"}})),
            Refused(&["spec.containers[0].resources.limits.cpu"]),
        ),
    ]
}

fn workflow_api(ns: &Namespace) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("workflow.crd.com", "v1", "WorkFlow");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "workflows");
    Api::namespaced_with(ns.client(), &ns.name, &resource)
}

fn object(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlow",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("an object")
}

#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_or_fails_naming_the_problem_and_never_takes_the_operator_down(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let ns = &operator.ns;
    let api = workflow_api(ns);
    ns.create(
        WorkFlow::test("valid")
            .step("a", &[])
            .command(&["sleep", "2"])
            .step("b", &["a"])
            .step("c", &["a"])
            .step("d", &["b", "c"]),
    )
    .await;

    let cases = cases();
    assert!(cases.len() >= 20, "at least 20 cases");
    let mut failing = Vec::new();
    for (name, spec, answer) in &cases {
        let created = api
            .create(&PostParams::default(), &object(name, spec.clone()))
            .await;
        match (answer, created) {
            (Refused(words), Err(kube::Error::Api(error))) => {
                println!("{name}: refused, {} {}", error.code, error.message);
                assert_eq!(error.code, 422, "{name}: {error:?}");
                for word in *words {
                    assert!(
                        error.message.contains(word),
                        "{name}: {word:?} in {error:?}"
                    );
                }
            }
            (Refused(_), other) => panic!("{name}: should be refused with a 422, got {other:?}"),
            (Fails(_), Ok(_)) => failing.push(*name),
            (Fails(_), Err(error)) => panic!("{name}: should be accepted, got {error}"),
        }
    }
    // A name the API server refuses, whatever the spec.
    let refused = api
        .create(
            &PostParams::default(),
            &object("Bad_Name", json!({"containers": [step("a", &[])]})),
        )
        .await;
    match refused {
        Err(kube::Error::Api(error)) if error.code == 422 => {
            println!("upper-case-name: refused, {} {}", error.code, error.message);
            assert!(error.message.contains("metadata.name"), "{error:?}");
        }
        other => panic!("an invalid name should be refused with a 422, got {other:?}"),
    }

    for (name, _, answer) in cases.iter().filter(|(n, ..)| failing.contains(n)) {
        let Fails(words) = answer else { continue };
        let workflow = ns.expect_failed(name, words).await;
        println!("{name}: Failed, {}", support::message(&workflow));
    }
    ns.expect_completed("valid").await;

    assert!(operator.is_running(), "the operator is still running");
    if operator.controllable() {
        assert_eq!(operator.starts, 1, "the operator never restarted");
    }
    let log = operator.log();
    assert!(!log.contains("panicked"), "the operator panicked:\n{log}");
    println!(
        "bad input: {} cases ({} refused at create, {} failed), the valid workflow completed, \
         the operator never restarted",
        cases.len() + 1,
        cases.len() + 1 - failing.len(),
        failing.len()
    );
}

#[rstest]
#[tokio::test]
async fn an_object_over_the_size_limit_is_refused_as_the_real_server_refuses_it(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let ns = &operator.ns;
    let api = workflow_api(ns);
    let huge = "x".repeat(2 * 1024 * 1024);
    let spec = json!({"containers": [
        {"stepName": "a", "image": "busybox:1.36", "command": ["sh", "-c", huge]},
    ]});
    match api
        .create(&PostParams::default(), &object("huge", spec))
        .await
    {
        // etcd's request limit (1.5 MiB): the real API server answers 500 with etcd's message;
        // past 3 MiB it would be a 413 before decoding.
        Err(kube::Error::Api(error)) => {
            println!("2 MiB command: {} {}", error.code, error.message);
            assert_eq!(error.code, 500, "{error:?}");
            assert!(error.message.contains("request is too large"), "{error:?}");
        }
        other => panic!("a 2 MiB workflow should be refused, got {other:?}"),
    }
    assert!(
        api.get_opt("huge").await.expect("get").is_none(),
        "nothing stored"
    );
    ns.create(WorkFlow::test("after").step("a", &[])).await;
    ns.expect_completed("after").await;
    assert!(operator.is_running(), "the operator is still running");
}
