//! What the CLI says of an Argo file besides its result: `submit` says once that it converted
//! it, as `validate` does; an Argo document of a kind with no counterpart here is named with
//! why (as `convert` names it) by `submit` and `validate`, not silently left out; and
//! `convert` reads JSON.

use crate::argo_convert::{run, text};
use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// An Argo Workflow beside a WorkflowEventBinding, a kind of Argo's with nothing here to
/// become.
const WITH_BINDING: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: noted
spec:
  entrypoint: say
  templates:
    - name: say
      container:
        image: alpine:3.20
        command: [echo, noted]
---
apiVersion: argoproj.io/v1alpha1
kind: WorkflowEventBinding
metadata:
  name: on-event
spec:
  event:
    selector: payload.message != ""
"#;

/// The line naming the binding left out, as `convert` writes it for `path`.
fn binding_left_out(path: &str) -> String {
    format!(
        "{path}: WorkflowEventBinding on-event: kind \"WorkflowEventBinding\" of argoproj.io is not converted (only Workflow, WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow are)\n"
    )
}

#[test]
fn convert_and_validate_name_an_argo_kind_left_out_alike() {
    let file = support::yaml_file(WITH_BINDING);
    let path = file.path().to_str().unwrap();
    let convert = run(&["convert", path]);
    assert!(convert.status.success(), "{}", text(&convert.stderr));
    assert_eq!(text(&convert.stderr), binding_left_out(path));
    let validate = run(&["validate", path]);
    assert!(validate.status.success(), "{}", text(&validate.stderr));
    assert_eq!(
        text(&validate.stderr),
        format!("{}{path}: converted from Argo\n", binding_left_out(path))
    );
    assert_eq!(
        text(&validate.stdout),
        format!("{path}: workflow noted: valid\n")
    );
}

#[rstest]
#[tokio::test]
async fn submit_says_once_it_converted_an_argo_file_and_names_a_kind_left_out(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(WITH_BINDING);
    let path = file.path().to_str().unwrap();
    let (stdout, stderr) = ns.cli_with_stderr(&["submit", path]).await;
    assert_eq!(stdout, "workflow.workflow.crd.com/noted created\n");
    assert_eq!(
        stderr,
        format!("{}{path}: converted from Argo\n", binding_left_out(path))
    );
    ns.expect_completed("noted").await;
}

/// The converter's JSON test data: an Argo Workflow whose entrypoint takes a parameter.
const HELLO_JSON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/workflow-operator-core/src/convert/testdata/hello.json"
);

#[test]
fn convert_reads_a_json_file() {
    let output = run(&["convert", "--strict", HELLO_JSON]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "");
    let written = text(&output.stdout);
    let converted: serde_json::Value = serde_yaml::from_str(&written).unwrap();
    assert_eq!(converted["kind"], "WorkFlow", "{written}");
    assert_eq!(converted["metadata"]["name"], "hello", "{written}");
    assert_eq!(
        converted["spec"]["containers"][0]["arguments"]["parameters"][0]["value"],
        "{{workflow.parameters.message}}",
        "{written}"
    );
}
