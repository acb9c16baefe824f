//! Argo's recursion end to end on the embedded control plane, written in Argo's YAML and
//! submitted as it is: a `steps` template that calls itself under a `when` (coinflip-recursive)
//! runs until its `when` stops it, and one that would not stop fails the workflow naming the
//! depth limit.

use rstest::rstest;
use workflow_operator_core::template::recursion::DEPTH_LIMIT;

use crate::support;

use support::{Namespace, Operator, operator};

/// Argo's coinflip-recursive, made deterministic: `flip` prints the count so far plus one;
/// at `stop` it is "heads" (the `heads` step runs), below it the template calls itself with
/// the new count.
fn recursive(name: &str, stop: u32) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  entrypoint: coinflip
  arguments:
    parameters: [{{name: n, value: "0"}}]
  templates:
    - name: coinflip
      inputs:
        parameters: [{{name: n}}]
      steps:
        - - name: flip
            template: flip
            arguments: {{parameters: [{{name: n, value: "{{{{inputs.parameters.n}}}}"}}]}}
        - - name: heads
            template: heads
            when: "{{{{steps.flip.outputs.result}}}} >= {stop}"
          - name: tails
            template: coinflip
            arguments: {{parameters: [{{name: n, value: "{{{{steps.flip.outputs.result}}}}"}}]}}
            when: "{{{{steps.flip.outputs.result}}}} < {stop}"
    - name: flip
      inputs:
        parameters: [{{name: n}}]
      script:
        image: alpine:3.20
        command: [sh]
        source: echo $(( {{{{inputs.parameters.n}}}} + 1 ))
    - name: heads
      container:
        image: alpine:3.20
        command: [echo, "it was heads"]
"#
    )
}

/// The steps `workflow-operator get -o json` shows for `workflow` whose names end with
/// `suffix`, with their phases.
async fn ending(ns: &Namespace, workflow: &str, suffix: &str) -> Vec<(String, String)> {
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", workflow, "-o", "json"]).await).unwrap();
    (get["steps"].as_array().into_iter().flatten())
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["phase"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(name, _)| name.ends_with(suffix))
        .collect()
}

#[rstest]
#[tokio::test]
async fn a_template_calling_itself_under_a_when_recurses_until_the_when_stops_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(&recursive("flips", 3));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("flips").await;
    // Three flips, the third one heads; no level past it ran.
    let flips = ending(ns, "flips", "flip").await;
    let ran: Vec<&str> = (flips.iter())
        .filter(|(_, p)| p == "Succeeded")
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(ran, ["flip", "tails/flip", "tails/tails/flip"], "{flips:?}");
    let heads = ending(ns, "flips", "heads").await;
    let ran: Vec<&str> = (heads.iter())
        .filter(|(_, p)| p == "Succeeded")
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(ran, ["tails/tails/heads"], "{heads:?}");
}

#[rstest]
#[tokio::test]
async fn a_recursion_past_the_depth_limit_fails_the_workflow_naming_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(&recursive("endless", 1000));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_failed("endless", &["recursion depth limit reached", "coinflip"])
        .await;
    let flips = ending(ns, "endless", "flip").await;
    // The entrypoint's own level (its steps are the workflow's), then the template called
    // `DEPTH_LIMIT` deep; the call past that is the step that fails.
    let ran = flips.iter().filter(|(_, p)| p == "Succeeded").count();
    assert_eq!(ran, DEPTH_LIMIT + 1, "{flips:?}");
}
