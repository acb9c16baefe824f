//! An Argo `CronWorkflow` as it is, given to `workflow-operator submit` (Argo's users create
//! one with `argo cron create`), which converts it on the way and creates the CronWorkFlow, run
//! on its schedule by the operator: its step reads `{{workflow.scheduledTime}}`, the time the run
//! was scheduled for, in RFC 3339 as Argo writes it (Argo's `examples/cron-workflow`, written
//! anew here), and `when`s compare it with a time.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::watcher;
use rstest::rstest;
use workflow_operator_core::labels::LABEL_SCHEDULED;

use crate::argo_dag_outputs::{log_of, phases};
use crate::support;

use support::{Operator, operator};

/// Every 2 s, a step that prints the time its run was scheduled for; then one step whose
/// `when` holds (the run was scheduled after 2000) and one whose `when` does not.
const CRON: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: stamp
spec:
  schedule: "@every 2s"
  concurrencyPolicy: Forbid
  workflowSpec:
    entrypoint: main
    templates:
      - name: main
        steps:
          - - name: say-when
              template: say
              arguments: {parameters: [{name: text, value: "scheduled for {{workflow.scheduledTime}}"}]}
          - - name: after-2000
              template: say
              when: "'{{workflow.scheduledTime}}' > '2000-01-01T00:00:00Z'"
              arguments: {parameters: [{name: text, value: after}]}
            - name: before-2000
              template: say
              when: "'{{workflow.scheduledTime}}' < '2000-01-01T00:00:00Z'"
              arguments: {parameters: [{name: text, value: before}]}
      - name: say
        inputs: {parameters: [{name: text}]}
        container:
          image: alpine:3.20
          command: [echo, "{{inputs.parameters.text}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_cron_workflows_run_prints_its_scheduled_time_in_rfc_3339_and_whens_compare_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(CRON);
    let (said, told) = ns
        .cli_with_stderr(&["submit", file.path().to_str().unwrap()])
        .await;
    assert_eq!(
        said, "cronworkflow.workflow.crd.com/stamp created\n",
        "{told}"
    );
    assert_eq!(told.matches("converted from Argo").count(), 1, "{told}");
    assert!(!told.contains("not supported"), "{told}");
    let selector = watcher::Config::default().labels("workflow.crd.com/cron=stamp");
    let runs = support::wait_list(
        &ns.workflows(),
        selector,
        "a finished run",
        Duration::from_secs(60),
        |runs| runs.iter().any(|r| support::is_terminal(r)),
    )
    .await;
    let run = runs.iter().find(|r| support::is_terminal(r)).unwrap();
    let name = run.name_any();
    ns.expect_completed(&name).await;
    let seconds: i64 = (run.labels().get(LABEL_SCHEDULED))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{name}: no {LABEL_SCHEDULED}: {:?}", run.labels()));
    let scheduled = Timestamp::from_second(seconds).unwrap();
    let said = log_of(ns, &name, "say-when").await;
    let printed = (said.trim().strip_prefix("scheduled for ")).unwrap_or_else(|| panic!("{said}"));
    assert_eq!(printed, scheduled.to_string(), "{said}");
    let parsed: Timestamp = printed.parse().unwrap();
    assert_eq!(parsed.as_second(), seconds);
    let expected = [
        ("say-when", "Succeeded"),
        ("after-2000", "Succeeded"),
        ("before-2000", "Skipped"),
    ]
    .map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(phases(ns, &name).await, expected);
    assert!(
        printed.len() == "2026-01-01T00:00:00Z".len() && printed.ends_with('Z'),
        "{printed}: RFC 3339 in UTC, to the second"
    );
}
