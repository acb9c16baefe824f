use super::*;
use crate::crd::WorkFlow;

fn metrics(yaml: &str) -> CustomMetrics {
    serde_yaml::from_str(yaml).expect("metrics YAML")
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const ARGO: &str = r#"
prometheus:
  - name: result_counter
    help: by result
    labels: [{key: name, value: flakey}, {key: status, value: "{{status}}"}]
    when: "{{status}} == Failed"
    counter: {value: "1"}
  - name: duration_gauge
    help: duration
    gauge: {value: "{{duration}}", realtime: true}
  - name: out_histogram
    help: output
    when: "{{status}} == Succeeded"
    histogram: {buckets: [2.01, 4.01], value: "{{outputs.parameters.n}}"}
"#;

#[test]
fn a_failed_step_counts_and_a_succeeded_one_observes_its_output() {
    let m = metrics(ARGO);
    let failed = recordings(&m, &vars(&[("status", "Failed"), ("duration", "1.5")]));
    let failed: Vec<Recording> = failed.into_iter().map(Result::unwrap).collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].kind, Kind::Counter);
    assert_eq!(failed[0].value, 1.0);
    let labels = vec![
        ("name".into(), "flakey".into()),
        ("status".into(), "Failed".into()),
    ];
    assert_eq!(failed[0].labels, labels);
    assert_eq!(
        (failed[1].kind.clone(), failed[1].value),
        (Kind::Gauge, 1.5)
    );
    let ok = vars(&[
        ("status", "Succeeded"),
        ("duration", "2"),
        ("outputs.parameters.n", "3"),
    ]);
    let ok: Vec<Recording> = recordings(&m, &ok)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ok.len(), 2, "{ok:?}");
    assert_eq!(ok[1].kind, Kind::Histogram(vec![2.01, 4.01]));
    assert_eq!(ok[1].value, 3.0);
}

#[test]
fn a_value_without_its_variable_or_not_a_number_is_an_error_naming_the_metric() {
    let m = metrics(ARGO);
    let got = recordings(&m, &vars(&[("status", "Succeeded"), ("duration", "x")]));
    let errors: Vec<String> = got.into_iter().filter_map(Result::err).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("duration_gauge") && errors[0].contains("not a number"));
    assert!(
        errors[1].contains("{{outputs.parameters.n}} has no value"),
        "{errors:?}"
    );
}

#[test]
fn comparisons_are_numeric_between_numbers_and_textual_otherwise() {
    assert!(holds("10 > 9").unwrap());
    assert!(!holds("10 > 9a").unwrap());
    assert!(holds("Failed != Succeeded").unwrap());
    assert!(holds("2.0 == 2").unwrap());
    assert!(holds("Failed").is_err());
}

#[test]
fn check_refuses_bad_names_kinds_buckets_whens_and_variables() {
    let cases = [
        (
            "name: 1bad\ncounter: {value: '1'}",
            "not a Prometheus metric name",
        ),
        ("name: a", "none of gauge, counter, histogram"),
        (
            "name: a\ncounter: {value: '1'}\ngauge: {value: '1'}",
            "more than one",
        ),
        (
            "name: a\nhistogram: {buckets: [], value: '1'}",
            "no buckets",
        ),
        (
            "name: a\nwhen: '{{status}}'\ncounter: {value: '1'}",
            "is not LEFT OP RIGHT",
        ),
        (
            "name: a\ncounter: {value: '{{workflow.status}}'}",
            "{{workflow.status}} is not a variable a step's",
        ),
        (
            "name: a\nlabels: [{key: a-b, value: x}]\ncounter: {value: '1'}",
            "not a Prometheus label name",
        ),
    ];
    for (metric, expected) in cases {
        let yaml = format!("prometheus:\n  - {}", metric.replace('\n', "\n    "));
        let mut problems = Vec::new();
        check(
            &metrics(&yaml),
            Scope::Step,
            "step \"s\": metrics",
            &mut problems,
        );
        assert_eq!(problems.len(), 1, "{metric}: {problems:?}");
        assert!(problems[0].contains(expected), "{metric}: {problems:?}");
        assert!(
            problems[0].starts_with("step \"s\": metrics.prometheus[0]"),
            "{problems:?}"
        );
    }
    let mut problems = Vec::new();
    check(&metrics(ARGO), Scope::Step, "x", &mut problems);
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn check_spec_names_the_workflow_s_metrics_and_the_step_s() {
    let mut workflow = WorkFlow::test("w").step("a", &[]).build();
    workflow.spec.metrics = Some(Box::new(metrics(
        "prometheus: [{name: w, gauge: {value: '{{duration}}'}}]",
    )));
    workflow.spec.containers[0].metrics = Some(Box::new(metrics(
        "prometheus: [{name: s, gauge: {value: '{{workflow.duration}}'}}]",
    )));
    let problems = check_spec(&workflow.spec).unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("spec.metrics.prometheus[0] (\"w\")"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("step \"a\": metrics.prometheus[0]"),
        "{problems:?}"
    );
}

#[test]
fn validate_and_the_operator_refuse_a_bad_metric_of_a_called_template() {
    let workflow: WorkFlow = serde_yaml::from_str(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: w}
spec:
  containers: [{stepName: a, template: t}]
  templates:
    - name: t
      image: alpine
      metrics:
        prometheus: [{name: bad-name, counter: {value: "1"}}]
"#,
    )
    .unwrap();
    let problems = crate::plan::spec_problems(&workflow, &[]).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(
            "step \"a\": metrics.prometheus[0] (\"bad-name\"): is not a Prometheus metric name"
        ),
        "{problems:?}"
    );
}

#[test]
fn a_step_that_fans_out_may_not_declare_metrics_yet() {
    let mut workflow = WorkFlow::test("w").step("a", &[]).build();
    let step = &mut workflow.spec.containers[0];
    step.with_items = serde_json::from_value(serde_json::json!(["x", "y"])).unwrap();
    step.metrics = Some(Box::new(metrics(
        "prometheus: [{name: s, counter: {value: '1'}}]",
    )));
    let problems = check_spec(&workflow.spec).unwrap_err();
    assert_eq!(
        problems,
        [
            "step \"a\": metrics: metrics of a step that fans out (withItems, withParam, \
          withSequence) are not supported yet"
        ]
    );
}
