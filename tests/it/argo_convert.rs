//! Argo's YAML as it is: `workflow-operator convert` (what it writes, what it names, `--strict`),
//! and an Argo Workflow submitted unconverted through the CLI, run to the outcome Argo
//! documents on the embedded control plane.

use std::process::{Command, Output};

use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// A coin flip in Argo's own words: a steps entrypoint whose second group runs one branch by a
/// govaluate `when` over the script's result, and a parameter of the workflow read as the
/// entrypoint's input.
const COINFLIP: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: coinflip
spec:
  entrypoint: coinflip
  arguments:
    parameters: [{name: greeting, value: hello}]
  templates:
    - name: coinflip
      inputs:
        parameters: [{name: greeting}]
      steps:
        - - name: flip-coin
            template: flip-coin
        - - name: heads
            template: say
            arguments:
              parameters: [{name: text, value: "{{inputs.parameters.greeting}} heads"}]
            when: "{{steps.flip-coin.outputs.result}} == heads"
          - name: tails
            template: say
            arguments:
              parameters: [{name: text, value: "tails"}]
            when: "{{steps.flip-coin.outputs.result}} == tails"
    - name: flip-coin
      retryStrategy: {limit: "1"}
      script:
        image: alpine:3.20
        command: [sh]
        source: |
          echo heads
    - name: say
      inputs:
        parameters: [{name: text}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
"#;

/// `workflow-operator ARGS`, with no cluster.
pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .output()
        .expect("the binary runs")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The test data of the converter's unit tests: fields it cannot convert.
const UNSUPPORTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/workflow-operator-core/src/convert/testdata/unsupported.yaml"
);

#[test]
fn convert_writes_ours_and_names_what_it_cannot_convert_and_strict_fails_on_it() {
    let output = run(&["convert", UNSUPPORTED]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let written = text(&output.stdout);
    assert!(written.contains("kind: WorkFlow\n"), "{written}");
    assert!(written.contains("stepName: make"), "{written}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unsupported.yaml: Workflow unsupported: spec.templates[2].resource.manifestFrom: a manifest from an artifact is not supported yet"),
        "{stderr}"
    );

    let strict = run(&["convert", "--strict", UNSUPPORTED]);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict.stderr));
    assert_eq!(text(&strict.stderr), stderr, "--strict names the same");

    let file = support::yaml_file(COINFLIP);
    let clean = run(&["convert", "--strict", file.path().to_str().unwrap()]);
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    assert_eq!(text(&clean.stderr), "");
}

/// Strings YAML 1.1 reads as booleans (`NO`, `yes`, `on`) are written quoted: kubectl's parser
/// (sigs.k8s.io/yaml over go-yaml v2, YAML 1.1) would read them bare as `false` and `true`, and
/// a converted file applied with kubectl would be refused or mean something else.
#[test]
fn convert_quotes_what_yaml_1_1_reads_as_a_boolean() {
    let file = support::yaml_file(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: answers}
spec:
  entrypoint: say
  arguments:
    parameters: [{name: a, value: "NO"}, {name: b, value: "yes"}, {name: c, value: "on"}]
  templates:
    - name: say
      container: {image: alpine:3.20, command: [echo, "{{workflow.parameters.a}}"]}
"#,
    );
    let output = run(&["convert", file.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let written = text(&output.stdout);
    for word in ["NO", "yes", "on"] {
        let quoted = [format!("value: '{word}'"), format!("value: \"{word}\"")];
        assert!(
            quoted.iter().any(|q| written.contains(q.as_str())),
            "{word} not quoted: {written}"
        );
    }
}

#[test]
fn validate_takes_an_argo_file_as_it_is_saying_once_it_was_converted() {
    let file = support::yaml_file(COINFLIP);
    let path = file.path().to_str().unwrap();
    let output = run(&["validate", path]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stderr),
        format!("{path}: converted from Argo\n")
    );
    assert_eq!(
        text(&output.stdout),
        format!("{path}: workflow coinflip: valid\n")
    );
    let unsupported = run(&["validate", UNSUPPORTED]);
    let stderr = text(&unsupported.stderr);
    assert_eq!(
        stderr
            .matches("converted from Argo: 3 fields not supported, run `workflow-operator convert")
            .count(),
        1,
        "{stderr}"
    );
}

#[rstest]
#[tokio::test]
async fn an_argo_workflow_submitted_as_it_is_runs_to_argos_outcome(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(COINFLIP);
    ns.cli(&["submit", file.path().to_str().unwrap(), "--wait"])
        .await;
    let workflow = ns.expect_completed("coinflip").await;
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "coinflip", "-o", "json"]).await).unwrap();
    let phases: Vec<(String, String)> = get["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().into(),
                s["phase"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [
        ("flip-coin", "Succeeded"),
        ("heads", "Succeeded"),
        ("tails", "Skipped"),
    ]
    .map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(phases, expected, "{get}");
    let heads = ns
        .jobs_of("coinflip")
        .await
        .into_iter()
        .find(|j| support::step_of(j) == Some("heads"))
        .expect("a Job ran heads");
    assert_eq!(
        ns.job_log(&heads).await.trim(),
        "hello heads",
        "{workflow:?}"
    );
}
