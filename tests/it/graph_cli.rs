//! `workflow-operator graph NAME` end to end on the embedded control plane: a finished workflow
//! read from the cluster, drawn with each step's phase as `get` reports it, its `when`, its
//! fan-out counted and its exit step in a group after the rest.

use crate::support;

use rstest::rstest;
use serde_json::json;
use support::{Operator, operator};
use workflow_operator_core::WorkFlow;

#[rstest]
#[tokio::test]
async fn graph_name_draws_the_live_workflow_with_each_steps_phase_as_get_shows_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    ns.create(
        WorkFlow::test("drawn")
            .step("check", &[])
            .step("alert", &["check"])
            .when(r#"steps.check.phase == "Failed""#)
            .step("build", &["check"])
            .with_items(&[json!("linux"), json!("darwin")])
            .exit_step("report", &[]),
    )
    .await;
    ns.expect_completed("drawn").await;

    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "drawn", "-o", "json"]).await).unwrap();
    let phase_of = |step: &str| {
        let steps = get["steps"].as_array().unwrap();
        let view = steps.iter().find(|s| s["name"] == step).unwrap();
        view["phase"].as_str().unwrap().to_string()
    };
    assert_eq!(
        ["check", "alert", "build", "report"].map(phase_of),
        ["Succeeded", "Skipped", "Succeeded", "Succeeded"],
        "{get}"
    );

    let dot = ns.cli(&["graph", "drawn"]).await;
    for node in [
        format!(r#"s0 [label="check\n{}""#, phase_of("check")),
        format!(
            r#"s1 [label="alert\nwhen: steps.check.phase == \"Failed\"\n{}", style="filled,dashed""#,
            phase_of("alert")
        ),
        format!(r#"s2 [label="build ×2\n{} · 2/2 items""#, phase_of("build")),
        format!(r#"e0 [label="report\n{}""#, phase_of("report")),
    ] {
        assert!(dot.contains(&node), "{node} not in {dot}");
    }
    assert!(dot.contains("subgraph cluster_exit {"), "{dot}");
    for edge in [
        "s0 -> s1;",
        "s0 -> s2;",
        "s1 -> e0 [style=dashed];",
        "s2 -> e0 [style=dashed];",
    ] {
        assert!(dot.contains(edge), "{edge} not in {dot}");
    }

    let mermaid = ns.cli(&["graph", "drawn", "--format", "mermaid"]).await;
    for line in [
        "class s0,s2,e0 Succeeded",
        "class s1 Skipped",
        "e0[\"report<br>Succeeded\"]",
    ] {
        assert!(mermaid.contains(line), "{line} not in {mermaid}");
    }
}
