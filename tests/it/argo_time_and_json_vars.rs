//! Argo's variables of when a step ran and of all the workflow's parameters, in an Argo
//! Workflow submitted as it is: `{{steps.X.startedAt}}` and `.finishedAt` in an argument (RFC
//! 3339 text) and in `when`s comparing them with a constant time, and
//! `{{workflow.parameters.json}}` as Argo writes it (Go's encoding of the workflow's
//! `arguments.parameters`: a JSON list of objects, `name` first, empty fields left out).

use k8s_openapi::jiff::Timestamp;

use crate::argo_dag_outputs::{log_of, phases};
use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// `first` runs; the next group prints its times, runs `after` (it started after 2000) and
/// skips `before` (it finished before 2000), comparing as govaluate does two quoted texts that
/// read as dates.
const TIMES: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: step-times
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: first
            template: say
            arguments: {parameters: [{name: text, value: first}]}
        - - name: times
            template: say
            arguments:
              parameters: [{name: text, value: "{{steps.first.startedAt}} {{steps.first.finishedAt}}"}]
          - name: after
            template: say
            when: "'{{steps.first.startedAt}}' > '2000-01-01T00:00:00Z'"
            arguments: {parameters: [{name: text, value: after}]}
          - name: before
            template: say
            when: "'{{steps.first.finishedAt}}' < '2000-01-01T00:00:00Z'"
            arguments: {parameters: [{name: text, value: before}]}
    - name: say
      inputs: {parameters: [{name: text}]}
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_steps_start_and_finish_are_rfc_3339_times_in_an_argument_and_a_when(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let submitted = Timestamp::now();
    let file = support::yaml_file(TIMES);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("step-times").await;
    let shown = phases(ns, "step-times").await;
    let expected = [
        ("first", "Succeeded"),
        ("times", "Succeeded"),
        ("after", "Succeeded"),
        ("before", "Skipped"),
    ]
    .map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(shown, expected);
    let log = log_of(ns, "step-times", "times").await;
    let times: Vec<Timestamp> = (log.split_whitespace())
        .map(|t| t.parse().unwrap_or_else(|e| panic!("{t}: {e}: {log}")))
        .collect();
    let [started, finished] = times[..] else {
        panic!("two times: {log}");
    };
    // Argo's times are to the second.
    let second_before = submitted - std::time::Duration::from_secs(1);
    assert!(
        second_before <= started && started <= finished && finished <= Timestamp::now(),
        "{log}"
    );
    assert_eq!(log_of(ns, "step-times", "after").await.trim(), "after");
}

/// A step printing `{{workflow.parameters.json}}`; `count` is given at submit (`-p`), and
/// `colour` has Argo's `enum` and `description`.
const PARAMETERS_JSON: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: parameters-json
spec:
  entrypoint: show
  arguments:
    parameters:
      - {name: greeting, value: hello}
      - {name: count, value: "1"}
      - {name: colour, value: red, enum: [red, blue], description: the colour}
  templates:
    - name: show
      container:
        image: alpine:3.20
        command: [echo, "{{workflow.parameters.json}}"]
"#;

#[rstest]
#[tokio::test]
async fn workflow_parameters_json_is_argos_list_of_the_parameters(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(PARAMETERS_JSON);
    ns.cli(&["submit", file.path().to_str().unwrap(), "-p", "count=3"])
        .await;
    ns.expect_completed("parameters-json").await;
    assert_eq!(
        log_of(ns, "parameters-json", "show").await.trim(),
        r#"[{"name":"greeting","value":"hello"},{"name":"count","value":"3"},{"name":"colour","value":"red","enum":["red","blue"],"description":"the colour"}]"#
    );
}
