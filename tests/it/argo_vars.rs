//! Argo's step variables and enhanced `depends`, in an Argo Workflow submitted as it is: a
//! task that fails, one that runs on its failure printing `{{tasks.X.status}}` and
//! `{{tasks.X.exitCode}}`, and one omitted by its `depends`, to the outcome Argo documents.

use std::io::Write as _;

use crate::support;

use rstest::rstest;
use support::{Operator, operator};

/// `fail` exits 3; `report` runs on its failure (`depends: fail.Failed`) and prints how it
/// ended; `checked` runs after `report` when `fail`'s exit code was 3, printing `report`'s
/// status; `unreported` depends on `report` failing, so Argo omits it. `say`'s `timeout` is a
/// parameter holding a duration, text until it is filled. Argo's phase is
/// `Succeeded`: the failure reached no last task (docs/enhanced-depends-logic.md, and
/// `assessDAGPhase` in workflow/controller/dag.go).
const ON_FAILURE: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: on-failure
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: fail
            template: exit
            arguments:
              parameters: [{name: code, value: "3"}]
          - name: report
            depends: "fail.Failed || fail.Errored"
            template: say
            arguments:
              parameters: [{name: text, value: "fail {{tasks.fail.status}} {{tasks.fail.exitCode}}"}]
          - name: checked
            depends: report
            when: "{{tasks.fail.exitCode}} == 3"
            template: say
            arguments:
              parameters: [{name: text, value: "report {{tasks.report.status}}"}]
          - name: unreported
            depends: "report.Failed"
            template: say
            arguments:
              parameters: [{name: text, value: "never"}]
    - name: exit
      inputs:
        parameters: [{name: code}]
      container:
        image: alpine:3.20
        command: [sh, -c, "exit {{inputs.parameters.code}}"]
    - name: say
      inputs:
        parameters: [{name: text}, {name: limit, default: 30s}]
      timeout: "{{inputs.parameters.limit}}"
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_task_on_anothers_failure_prints_its_status_and_exit_code_and_the_run_completes(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(ON_FAILURE.as_bytes()).unwrap();
    ns.cli(&["submit", file.path().to_str().unwrap(), "--wait"])
        .await;
    let workflow = ns.expect_completed("on-failure").await;
    let get: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "on-failure", "-o", "json"]).await).unwrap();
    let phases: Vec<(&str, &str)> = (get["steps"].as_array().unwrap().iter())
        .map(|s| (s["name"].as_str().unwrap(), s["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(
        phases,
        [
            ("fail", "Failed"),
            ("report", "Succeeded"),
            ("checked", "Succeeded"),
            ("unreported", "Skipped"),
        ],
        "{get}"
    );
    let jobs = ns.jobs_of("on-failure").await;
    let log_of = |step: &str| {
        let job = (jobs.iter())
            .find(|j| support::step_of(j) == Some(step))
            .unwrap_or_else(|| panic!("a Job ran {step}"));
        ns.job_log(job)
    };
    assert_eq!(
        log_of("report").await.trim(),
        "fail Failed 3",
        "{workflow:?}"
    );
    assert_eq!(log_of("checked").await.trim(), "report Succeeded");
}
