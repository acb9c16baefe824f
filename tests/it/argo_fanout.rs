//! Argo's YAML as it is, submitted unconverted, for fan-outs whose items are known only once
//! the workflow runs: a `withSequence` whose `count` or `end` is a step's output (Argo's
//! `examples/handle-large-output-results` and `withsequence-nested-result`), a `withParam` over
//! a template's input parameter, in the entrypoint and in a called `steps` template (Argo's
//! `loops-param-argument` and `parallelism-nested`), written anew here. Each runs to the outcome
//! Argo documents: the items it ran, in order, and what each printed.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;

use crate::support;

use rstest::rstest;
use support::{Operator, operator};
use workflow_operator_core::jobs::LABEL_ITEM;

/// What each item of `step` of `workflow` printed, in item order.
pub(crate) async fn item_logs(ns: &support::Namespace, workflow: &str, step: &str) -> Vec<String> {
    let mut jobs: Vec<Job> = (ns.jobs_of(workflow).await.into_iter())
        .filter(|j| support::step_of(j) == Some(step))
        .collect();
    let item = |job: &Job| -> u32 {
        let label = job.labels().get(LABEL_ITEM).cloned().unwrap_or_default();
        label
            .parse()
            .unwrap_or_else(|_| panic!("{}: no item", job.name_any()))
    };
    jobs.sort_by_key(item);
    let mut logs = Vec::new();
    for job in &jobs {
        logs.push(ns.job_log(job).await.trim().to_string());
    }
    logs
}

/// `count` writes 3 to a file (a parameter) and prints 2 (its result); `shard` runs `count`
/// numbers from 0, `upto` from 1 to the result.
const SEQUENCE: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: seq-outputs
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: count
            template: count
        - - name: shard
            template: show
            arguments:
              parameters: [{name: i, value: "{{item}}"}]
            withSequence:
              count: "{{steps.count.outputs.parameters.n}}"
          - name: upto
            template: show
            arguments:
              parameters: [{name: i, value: "{{item}}"}]
            withSequence:
              start: "1"
              end: "{{steps.count.outputs.result}}"
    - name: count
      script:
        image: alpine:3.20
        command: [sh]
        source: |
          echo 3 > /tmp/n
          echo 2
      outputs:
        parameters:
          - name: n
            valueFrom: {path: /tmp/n}
    - name: show
      inputs:
        parameters: [{name: i}]
      container:
        image: alpine:3.20
        command: [echo, "item {{inputs.parameters.i}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_sequence_whose_count_or_end_is_a_steps_output_runs_those_numbers(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(SEQUENCE);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("seq-outputs").await;
    let shards = item_logs(ns, "seq-outputs", "shard").await;
    assert_eq!(shards, ["item 0", "item 1", "item 2"]);
    let upto = item_logs(ns, "seq-outputs", "upto").await;
    assert_eq!(upto, ["item 1", "item 2"]);
}

/// The workflow's argument `outer` (a JSON list) fans out the entrypoint's call of `worker`,
/// whose step fans out over its input `list` (the argument `inner`) one at a time (the
/// template's `parallelism`); `each-of` fans out over what `gen` printed, passed to it as an
/// input parameter.
const OVER_PARAMETERS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: param-loops
spec:
  entrypoint: main
  arguments:
    parameters:
      - name: outer
        value: |
          [1, 2]
      - name: inner
        value: '["a", "b"]'
  templates:
    - name: main
      inputs:
        parameters: [{name: outer}, {name: inner}]
      steps:
        - - name: worker
            template: worker
            arguments:
              parameters:
                - {name: id, value: "{{item}}"}
                - {name: list, value: "{{inputs.parameters.inner}}"}
            withParam: "{{inputs.parameters.outer}}"
          - name: gen
            template: gen
        - - name: each-of
            template: each-of
            arguments:
              parameters: [{name: list, value: "{{steps.gen.outputs.result}}"}]
    - name: worker
      parallelism: 1
      inputs:
        parameters: [{name: id}, {name: list}]
      steps:
        - - name: job
            template: show
            arguments:
              parameters: [{name: v, value: "{{inputs.parameters.id}}{{item}}"}]
            withParam: "{{inputs.parameters.list}}"
    - name: gen
      script:
        image: alpine:3.20
        command: [sh]
        source: echo '["x", "y", "z"]'
    - name: each-of
      inputs:
        parameters: [{name: list}]
      steps:
        - - name: show
            template: show
            arguments:
              parameters: [{name: v, value: "{{item}}"}]
            withParam: "{{inputs.parameters.list}}"
    - name: show
      inputs:
        parameters: [{name: v}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.v}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_with_param_over_an_input_parameter_runs_each_item_of_its_value(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(OVER_PARAMETERS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("param-loops").await;
    for (call, id) in [("worker[0]", "1"), ("worker[1]", "2")] {
        let jobs = item_logs(ns, "param-loops", &format!("{call}/job")).await;
        assert_eq!(jobs, [format!("{id}a"), format!("{id}b")], "{call}");
    }
    let shown = item_logs(ns, "param-loops", "each-of/show").await;
    assert_eq!(shown, ["x", "y", "z"]);
}

/// Argo's parameter aggregation with a `when` per item: `classify` tells each number's parity,
/// `halve` runs for the even ones (`when` over its item's parameter), `show` over halve's
/// results; `big` runs for the items above 8 of its own list.
const ITEM_WHEN: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: item-when
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: classify
            template: classify
            arguments:
              parameters: [{name: n, value: "{{item}}"}]
            withItems: [1, 2, 3, 4]
        - - name: halve
            template: halve
            arguments:
              parameters: [{name: n, value: "{{item.n}}"}]
            withParam: "{{steps.classify.outputs.parameters}}"
            when: "{{item.parity}} == even"
        - - name: show
            template: show
            arguments:
              parameters: [{name: v, value: "{{item}}"}]
            withParam: "{{steps.halve.outputs.result}}"
          - name: big
            template: show
            arguments:
              parameters: [{name: v, value: "{{item}}"}]
            withItems: [5, 10, 20]
            when: "{{item}} > 8"
    - name: classify
      inputs:
        parameters: [{name: n}]
      container:
        image: alpine:3.20
        command: [sh, -c]
        args:
          - |
            echo {{inputs.parameters.n}} > /tmp/n
            if [ $(({{inputs.parameters.n}} % 2)) -eq 0 ]; then echo even; else echo odd; fi > /tmp/parity
      outputs:
        parameters:
          - name: n
            valueFrom: {path: /tmp/n}
          - name: parity
            valueFrom: {path: /tmp/parity}
    - name: halve
      inputs:
        parameters: [{name: n}]
      script:
        image: alpine:3.20
        command: [sh]
        source: echo $(({{inputs.parameters.n}} / 2))
    - name: show
      inputs:
        parameters: [{name: v}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.v}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_when_naming_the_item_runs_the_items_it_holds_for_and_shows_the_others_skipped(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(ITEM_WHEN);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("item-when").await;
    assert_eq!(item_logs(ns, "item-when", "halve").await, ["1", "2"]);
    assert_eq!(item_logs(ns, "item-when", "show").await, ["1", "2"]);
    assert_eq!(item_logs(ns, "item-when", "big").await, ["10", "20"]);
    let shown = crate::argo_dag_outputs::phases(ns, "item-when").await;
    for (step, phase) in [
        ("halve", "Succeeded"),
        ("halve[0]", "Skipped"),
        ("halve[2]", "Skipped"),
        ("big[0]", "Skipped"),
    ] {
        assert!(
            shown.iter().any(|(s, p)| s == step && p == phase),
            "{step} {phase}: {shown:?}"
        );
    }
    let get = ns.cli(&["get", "item-when"]).await;
    assert!(get.contains("2/4 items, 2 skipped"), "{get}");
}
