//! Argo's variables of when a step ran and of all the workflow's parameters, in an Argo
//! Workflow submitted as it is: `{{steps.X.startedAt}}` and `.finishedAt` in an argument (RFC
//! 3339 text) and in `when`s comparing them with a constant time, and
//! `{{workflow.parameters.json}}` as Argo writes it (Go's encoding of the workflow's
//! `arguments.parameters`: a JSON list of objects, `name` first, empty fields left out), in a
//! step and in `when`s; `{{workflow.duration}}` in a `when`; and `{{pod.name}}` in a `when`,
//! refused as Argo refuses it.

use k8s_openapi::jiff::Timestamp;

use crate::argo_dag_outputs::{log_of, phases};
use crate::argo_numbers::refused;
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
/// `colour` has Argo's `enum` and `description`. Then two steps whose `when`s match the JSON:
/// `red` (the value is red) runs, `blue` (no value is blue, though the `enum` names it) is
/// skipped.
const PARAMETERS_JSON: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: parameters-json
spec:
  entrypoint: main
  arguments:
    parameters:
      - {name: greeting, value: hello}
      - {name: count, value: "1"}
      - {name: colour, value: red, enum: [red, blue], description: the colour}
  templates:
    - name: main
      steps:
        - - name: show
            template: show
        - - name: red
            template: show
            when: "'{{workflow.parameters.json}}' =~ '\"value\":\"red\"'"
          - name: blue
            template: show
            when: "'{{workflow.parameters.json}}' =~ '\"value\":\"blue\"'"
    - name: show
      container:
        image: alpine:3.20
        command: [echo, "{{workflow.parameters.json}}"]
"#;

#[rstest]
#[tokio::test]
async fn workflow_parameters_json_is_argos_list_of_the_parameters_in_a_step_and_a_when(
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
    let expected = [
        ("show", "Succeeded"),
        ("red", "Succeeded"),
        ("blue", "Skipped"),
    ]
    .map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(phases(ns, "parameters-json").await, expected);
}

/// A `when` reading `{{pod.name}}`, which Argo fills only in a template's pod (it refuses the
/// workflow): refused at submit, naming the step and why, and nothing is created.
const POD_NAME_IN_WHEN: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: pod-name-when
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: named
            template: say
            when: "'{{pod.name}}' != ''"
    - name: say
      container:
        image: alpine:3.20
        command: [echo, "{{pod.name}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_when_reading_the_pods_name_is_refused_at_submit(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = support::yaml_file(POD_NAME_IN_WHEN);
    let stderr = refused(ns, &["submit", file.path().to_str().unwrap()]).await;
    assert!(
        stderr.contains(r#"step "named": when"#) && stderr.contains("names {{pod.name}}"),
        "{stderr}"
    );
    let created = ns.workflows().get_opt("pod-name-when").await.unwrap();
    assert!(created.is_none(), "{stderr}");
}

/// `first` runs; then `running` (the run has been going for more than no time) runs and
/// `a-day-in` (a day has gone by) is skipped, by `{{workflow.duration}}` in their `when`s.
const DURATION_WHEN: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: duration-when
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: first
            template: say
        - - name: running
            template: say
            when: "{{workflow.duration}} > 0"
          - name: a-day-in
            template: say
            when: "{{workflow.duration}} > 86400"
    - name: say
      container:
        image: alpine:3.20
        command: [echo, "{{workflow.duration}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_when_compares_the_workflows_duration_in_seconds(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = support::yaml_file(DURATION_WHEN);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("duration-when").await;
    let expected = [
        ("first", "Succeeded"),
        ("running", "Succeeded"),
        ("a-day-in", "Skipped"),
    ]
    .map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(phases(ns, "duration-when").await, expected);
}
