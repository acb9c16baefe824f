//! Argo's forms end to end on the embedded control plane, written in this API with Argo's
//! shapes: a `steps` template (groups, a `when` on a sibling's result, `withItems` in a group,
//! `continueOn`), numbers written as text and filled from parameters, and the variables an
//! exit step reads (`{{workflow.failures}}`, `{{steps.X.status}}`, ...).

use crate::support;

use support::session::{Session, row};

/// Asserts the phase `workflow-operator get` shows for each step.
async fn expect_steps(session: &Session, workflow: &str, phases: &[(&str, &str)]) {
    let get = session.cli(&["get", workflow]).await;
    for (step, phase) in phases {
        assert_eq!(row(&get, step)[1], *phase, "{step}: {get}");
    }
}

/// The log of `step` of `workflow`, through the CLI.
async fn log_of(session: &Session, workflow: &str, step: &str) -> String {
    session.cli(&["logs", workflow, "--step", step]).await
}

/// Argo's coin flip as a `steps` template: `flip` prints heads; the next group runs `heads`
/// (its `when` reads `steps.flip`) and skips `tails` (its `when` reads Argo's `tasks.flip`);
/// the third group fans `each` out over two items beside `lint`, which fails under
/// `continueOn`; the last group runs once all of them are done.
#[tokio::test]
async fn a_steps_template_runs_its_groups_in_order_with_whens_items_and_continue_on() {
    let Some(session) = Session::start("argo_steps").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: coinflip}
spec:
  templates:
    - name: flip-coin
      image: alpine:3.20
      source: |
        echo heads
    - name: say
      inputs: {parameters: [{name: message}]}
      image: alpine:3.20
      command: [echo, "{{inputs.parameters.message}}"]
    - name: main
      steps:
        - - {name: flip, template: flip-coin}
        - - name: heads
            template: say
            when: 'steps.flip.outputs.result == "heads"'
            arguments: {parameters: [{name: message, value: "it was {{steps.flip.outputs.result}}"}]}
          - name: tails
            template: say
            when: 'tasks.flip.outputs.result == "tails"'
            arguments: {parameters: [{name: message, value: "it was tails"}]}
        - - name: each
            template: say
            withItems: [red, blue]
            arguments: {parameters: [{name: message, value: "colour {{item}}"}]}
          - {name: lint, image: alpine:3.20, command: [sh, -c, "exit 3"], continueOn: {failed: true}}
        - - {name: done, template: say, arguments: {parameters: [{name: message, value: "all done"}]}}
  containers:
    - {stepName: coin, template: main}
"#;
    session.create(manifest).await;
    session.finished_as("coinflip", "Completed").await;
    let phases = [
        ("coin/flip", "Succeeded"),
        ("coin/heads", "Succeeded"),
        ("coin/tails", "Skipped"),
        ("coin/each", "Succeeded"),
        ("coin/lint", "Failed"),
        ("coin/done", "Succeeded"),
    ];
    expect_steps(&session, "coinflip", &phases).await;
    let heads = log_of(&session, "coinflip", "coin/heads").await;
    assert!(heads.contains("it was heads"), "{heads}");
    let each = log_of(&session, "coinflip", "coin/each").await;
    for colour in ["colour red", "colour blue"] {
        assert!(each.contains(colour), "{each}");
    }
    let done = log_of(&session, "coinflip", "coin/done").await;
    assert!(done.contains("all done"), "{done}");
    session.stop().await;
}
