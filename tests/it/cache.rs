//! Cached steps (`cache`) end to end on the embedded control plane: a success writes an entry,
//! a later run of the same step (in another workflow) takes its outputs from it and runs no
//! Job, a failure writes nothing, and an entry older than `maxAge` is not used.

use crate::support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use rstest::rstest;
use support::{Operator, operator, step_of};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::cache::{LABEL_CACHE, REASON_CACHED};
use workflow_operator_core::crd::StepPhase;

/// `gen` (cached) writes `n=42`; `use` prints it.
fn generate_then_use(
    name: &str,
    max_age: &str,
) -> workflow_operator_core::testing::WorkFlowBuilder {
    WorkFlow::test(name)
        .step("gen", &[])
        .command(&["sh", "-c", "echo n=42 >> $WORKFLOW_OUTPUTS"])
        .cache(&format!("{{maxAge: {max_age}}}"))
        .step("use", &["gen"])
        .command(&["sh", "-c", "echo got {{steps.gen.outputs.n}}"])
}

async fn entries(ns: &support::Namespace) -> usize {
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    maps.list(&ListParams::default().labels(LABEL_CACHE))
        .await
        .expect("config maps")
        .items
        .len()
}

async fn steps_run(ns: &support::Namespace, workflow: &str) -> Vec<String> {
    let mut steps: Vec<String> = (ns.jobs_of(workflow).await.iter())
        .filter_map(|j| step_of(j).map(str::to_string))
        .collect();
    steps.sort();
    steps
}

#[rstest]
#[tokio::test]
async fn a_second_run_of_a_cached_step_takes_its_outputs_from_the_entry_and_runs_no_job(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(generate_then_use("first", "1h")).await;
    ns.expect_completed("first").await;
    assert_eq!(steps_run(ns, "first").await, ["gen", "use"]);
    assert_eq!(entries(ns).await, 1, "the success wrote its entry");

    ns.create(generate_then_use("second", "1h")).await;
    let done = ns.expect_completed("second").await;
    assert_eq!(steps_run(ns, "second").await, ["use"], "gen ran no Job");
    let generated = (done.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == "gen")
        .expect("gen's entry");
    assert_eq!(generated.phase, StepPhase::Succeeded);
    assert_eq!(generated.reason.as_deref(), Some(REASON_CACHED));
    let message = generated.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(&format!("cached (from {}/first step gen at ", ns.name)),
        "{message}"
    );
    let jobs = ns.jobs_of("second").await;
    let used = jobs
        .iter()
        .find(|j| step_of(j) == Some("use"))
        .expect("use's Job");
    assert_eq!(ns.job_log(used).await.trim(), "got 42");
}

#[rstest]
#[tokio::test]
async fn a_failed_cached_step_writes_no_entry_and_an_old_entry_is_not_used(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("failing")
            .step("gen", &[])
            .command(&["sh", "-c", "exit 1"])
            .cache("{maxAge: 1h}"),
    )
    .await;
    ns.expect_failed("failing", &["step gen failed"]).await;
    assert_eq!(entries(ns).await, 0);

    ns.create(generate_then_use("young", "1s")).await;
    ns.expect_completed("young").await;
    assert_eq!(entries(ns).await, 1);
    // The entry's time is the Job's end, to the second: two seconds on, it is past 1s.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    ns.create(generate_then_use("later", "1s")).await;
    ns.expect_completed("later").await;
    assert_eq!(
        steps_run(ns, "later").await,
        ["gen", "use"],
        "the old entry was not used"
    );
}

#[rstest]
#[tokio::test]
async fn cache_list_shows_an_entry_and_clear_makes_the_step_run_again(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(generate_then_use("first", "1h")).await;
    ns.expect_completed("first").await;
    let listed: serde_json::Value =
        serde_json::from_str(&ns.cli(&["cache", "list", "-o", "json"]).await).expect("JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["from"], format!("{}/first step gen", ns.name));
    assert_eq!(listed[0]["outputs"]["n"], "42");
    let said = ns.cli(&["cache", "clear", "--older-than", "1h"]).await;
    assert!(said.starts_with("deleted 0 cache entries"), "{said}");
    let said = ns.cli(&["cache", "clear", "--all"]).await;
    assert!(said.starts_with("deleted 1 cache entries"), "{said}");
    assert_eq!(entries(ns).await, 0);
    ns.create(generate_then_use("again", "1h")).await;
    ns.expect_completed("again").await;
    assert_eq!(
        steps_run(ns, "again").await,
        ["gen", "use"],
        "gen ran again"
    );
}

/// `gen` (cached) is a script writing `n=VALUE`; `use` prints it.
fn script_then_use(name: &str, value: &str) -> workflow_operator_core::testing::WorkFlowBuilder {
    WorkFlow::test(name)
        .step("gen", &[])
        .command(&["sh"])
        .source(&format!("echo n={value} >> $WORKFLOW_OUTPUTS"))
        .cache("{maxAge: 1h}")
        .step("use", &["gen"])
        .command(&["sh", "-c", "echo got {{steps.gen.outputs.n}}"])
}

#[rstest]
#[tokio::test]
async fn a_cached_script_edited_runs_again_and_its_new_output_is_read(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(script_then_use("before", "1")).await;
    ns.expect_completed("before").await;
    ns.create(script_then_use("after", "2")).await;
    ns.expect_completed("after").await;
    assert_eq!(
        steps_run(ns, "after").await,
        ["gen", "use"],
        "the edited script ran"
    );
    let jobs = ns.jobs_of("after").await;
    let used = jobs
        .iter()
        .find(|j| step_of(j) == Some("use"))
        .expect("use's Job");
    assert_eq!(ns.job_log(used).await.trim(), "got 2");
    assert_eq!(entries(ns).await, 2, "an entry for each script");
}
