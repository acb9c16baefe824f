//! A suspend step's outputs supplied as it is resumed (Argo's `valueFrom.supplied`, set with
//! `argo node set --output-parameter` then `argo resume`), end to end on the embedded control
//! plane, written in Argo's YAML and submitted as it is: a resume without a required value or
//! with one outside its `enum` is refused and resumes nothing; one with the value resumes the
//! step, and the later steps' `when` and arguments read it, also when the operator was down
//! while it was given.

use rstest::rstest;
use serde_json::Value;

use crate::support;

use support::{Namespace, Operator, operator, operator_process};

/// An approval whose decision (`YES` or `NO`, no default) and target (default `staging`) are
/// supplied at resume; `release` runs on `YES` and says the target, `hold` runs otherwise.
fn approval(name: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: approve
            template: approve
        - - name: release
            template: say
            when: "{{{{steps.approve.outputs.parameters.decision}}}} == YES"
            arguments:
              parameters:
                - name: text
                  value: "releasing to {{{{steps.approve.outputs.parameters.target}}}}"
          - name: hold
            template: say
            when: "{{{{steps.approve.outputs.parameters.decision}}}} != YES"
            arguments: {{parameters: [{{name: text, value: held}}]}}
    - name: approve
      suspend: {{}}
      outputs:
        parameters:
          - name: decision
            enum: ["YES", "NO"]
            description: release to production?
            valueFrom: {{supplied: {{}}}}
          - name: target
            valueFrom: {{supplied: {{}}, default: staging}}
    - name: say
      inputs:
        parameters: [{{name: text}}]
      container:
        image: alpine:3.20
        command: [echo, "{{{{inputs.parameters.text}}}}"]
"#
    )
}

/// `workflow-operator resume ARGS -n NS`, which must fail: its standard error.
async fn refused(ns: &Namespace, args: &[&str]) -> String {
    let output = (ns.cli_command(args).args(["-n", &ns.name]).output().await).unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} succeeded: {said}");
    said
}

/// Once `workflow` completed: its steps' phases as `get -o json` shows them, and what the
/// status recorded of `approve`'s outputs.
async fn outcome(ns: &Namespace, workflow: &str) -> (Vec<(String, String)>, Value) {
    let done = ns.expect_completed(workflow).await;
    let get: Value = serde_json::from_str(&ns.cli(&["get", workflow, "-o", "json"]).await).unwrap();
    let phases = (get["steps"].as_array().into_iter().flatten())
        .map(|s| {
            (
                s["name"].as_str().unwrap().into(),
                s["phase"].as_str().unwrap().into(),
            )
        })
        .collect();
    let approve = (done.status.iter().flat_map(|s| &s.steps)).find(|s| s.name == "approve");
    let outputs = serde_json::to_value(&approve.expect("approve's entry").outputs).unwrap();
    (phases, outputs)
}

fn phases(of: &[(&str, &str)]) -> Vec<(String, String)> {
    of.iter()
        .map(|(s, p)| (s.to_string(), p.to_string()))
        .collect()
}

/// The text `release`'s container was given.
async fn release_args(ns: &Namespace, workflow: &str) -> String {
    let job = ns
        .wait_step_job(workflow, "release", "created", |_| true)
        .await;
    let spec = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let container = &spec.containers[0];
    let words = container.command.iter().chain(&container.args).flatten();
    words.cloned().collect::<Vec<_>>().join(" ")
}

#[rstest]
#[tokio::test]
async fn a_resume_supplies_the_outputs_a_later_step_reads_and_is_refused_without_them(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(&approval("gate"));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.wait_workflow("gate", "approve suspended", |wf| {
        support::waits_suspended(wf, "approve")
    })
    .await;

    // `get` says how to resume it: with the decision, which has no default.
    let shown = ns.cli(&["get", "gate"]).await;
    assert!(
        shown.contains("--step approve --output decision=VALUE` resumes it"),
        "{shown}"
    );
    // No decision: refused, naming it and what it may be.
    let said = refused(ns, &["resume", "gate"]).await;
    assert!(said.contains("output \"decision\" needs a value"), "{said}");
    assert!(said.contains("\"YES\", \"NO\""), "{said}");
    // A decision outside its enum: refused, listing the allowed ones.
    let said = refused(
        ns,
        &[
            "resume",
            "gate",
            "--step",
            "approve",
            "--output",
            "decision=MAYBE",
        ],
    )
    .await;
    assert!(
        said.contains("output \"decision\": \"MAYBE\" is not one of \"YES\", \"NO\""),
        "{said}"
    );
    // Neither resumed anything.
    assert!(support::waits_suspended(&ns.get("gate").await, "approve"));

    let resumed = ns
        .cli(&[
            "resume",
            "gate",
            "--step",
            "approve",
            "--output",
            "decision=YES",
        ])
        .await;
    assert_eq!(resumed.trim(), "workflow gate: resumed step approve");
    let (phases_seen, outputs) = outcome(ns, "gate").await;
    assert_eq!(
        phases_seen,
        phases(&[
            ("approve", "Succeeded"),
            ("release", "Succeeded"),
            ("hold", "Skipped")
        ])
    );
    // Recorded once, in the status; the target took its default.
    assert_eq!(
        outputs,
        serde_json::json!({"decision": "YES", "target": "staging"})
    );
    assert!(
        release_args(ns, "gate")
            .await
            .contains("releasing to staging"),
        "release reads the supplied target"
    );
}

#[rstest]
#[tokio::test]
async fn values_given_while_the_operator_is_down_are_read_when_it_is_back(
    #[future(awt)] operator_process: Operator,
) {
    let mut operator = operator_process;
    let file = support::yaml_file(&approval("later"));
    (operator.ns)
        .cli(&["submit", file.path().to_str().unwrap()])
        .await;
    (operator.ns)
        .wait_workflow("later", "approve suspended", |wf| {
            support::waits_suspended(wf, "approve")
        })
        .await;
    operator.kill().await;
    operator
        .ns
        .cli(&[
            "resume",
            "later",
            "--step",
            "approve",
            "--output",
            "decision=NO",
            "--output",
            "target=prod",
        ])
        .await;
    operator.start();
    let (phases_seen, outputs) = outcome(&operator.ns, "later").await;
    assert_eq!(
        phases_seen,
        phases(&[
            ("approve", "Succeeded"),
            ("release", "Skipped"),
            ("hold", "Succeeded")
        ])
    );
    assert_eq!(
        outputs,
        serde_json::json!({"decision": "NO", "target": "prod"})
    );
}
