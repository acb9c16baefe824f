//! Argo's YAML as it is, submitted unconverted, for numbers as Argo writes them in fields the
//! planner reads as numbers: a cpu limit from a workflow parameter (on the step's container;
//! one that is no quantity once filled refused naming it),
//! a back-off `factor` written as text (each wait that factor times the last), and a
//! `withSequence.count` that is still not a number once its parameter is filled, which `submit`
//! refuses and the operator fails (a workflow made without `submit`), naming the field and the
//! value.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use crate::support;

use rstest::rstest;
use support::{Operator, operator, step_of};
use workflow_operator_core::WorkFlow;

/// `workflow-operator ARGS -n NAMESPACE`, which must fail: its standard error.
pub(crate) async fn refused(ns: &support::Namespace, args: &[&str]) -> String {
    let command = ns.cli_command(args).args(["-n", &ns.name]).output();
    let output = command.await.expect("workflow-operator runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{stderr}");
    stderr
}

/// A step whose cpu and memory limits are the workflow's parameters.
const CPU_FROM_PARAMETER: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: cpu-param
spec:
  entrypoint: work
  arguments:
    parameters:
      - {name: cpu, value: 250m}
      - {name: memory, value: 64Mi}
  templates:
    - name: work
      container:
        image: alpine:3.20
        command: [echo, working]
        resources:
          limits:
            cpu: "{{workflow.parameters.cpu}}"
            memory: "{{workflow.parameters.memory}}"
"#;

#[rstest]
#[tokio::test]
async fn a_cpu_limit_from_a_workflow_parameter_is_the_step_containers_limit(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(CPU_FROM_PARAMETER);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("cpu-param").await;
    let jobs = ns.jobs_of("cpu-param").await;
    let job = (jobs.iter())
        .find(|j| step_of(j) == Some("work"))
        .unwrap_or_else(|| panic!("no Job ran work: {:?}", support::jobs_named(&jobs)));
    let pod = (job.spec.as_ref().and_then(|s| s.template.spec.as_ref()))
        .unwrap_or_else(|| panic!("{}: no pod spec", job.name_any()));
    let limits = (pod.containers.iter())
        .find_map(|c| c.resources.as_ref()?.limits.clone())
        .unwrap_or_else(|| panic!("no container with limits: {:?}", pod.containers));
    assert_eq!(
        limits.get("cpu"),
        Some(&Quantity("250m".into())),
        "{limits:?}"
    );
    assert_eq!(
        limits.get("memory"),
        Some(&Quantity("64Mi".into())),
        "{limits:?}"
    );
}

#[rstest]
#[tokio::test]
async fn a_cpu_limit_that_is_no_quantity_once_filled_is_refused_naming_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let text = CPU_FROM_PARAMETER.replace("cpu-param", "cpu-lots");
    let file = support::yaml_file(&text.replace("250m", "lots"));
    let stderr = refused(ns, &["submit", file.path().to_str().unwrap()]).await;
    let said = r#"step "work": resources.limits.cpu: "lots" is not a quantity"#;
    assert!(stderr.contains(said), "{stderr}");
}

/// A step that always fails, retried twice, the first wait 2s and the factor `"2"` (text).
const FACTOR_AS_TEXT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: factor-text
spec:
  entrypoint: flaky
  templates:
    - name: flaky
      retryStrategy:
        limit: "2"
        backoff:
          duration: "2"
          factor: "2"
      container:
        image: alpine:3.20
        command: [sh, -c, "exit 1"]
"#;

/// The back-offs the status showed for `step` while it waited, in order, each once.
fn back_offs(history: &[WorkFlow], step: &str) -> Vec<String> {
    let mut waits: Vec<String> = Vec::new();
    let messages = (history.iter())
        .flat_map(|wf| wf.status.iter().flat_map(|s| &s.steps))
        .filter(|s| s.name == step && s.reason.as_deref() == Some("BackingOff"))
        .filter_map(|s| s.message.as_deref());
    for message in messages {
        let Some(wait) = message.split("(back-off ").nth(1) else {
            continue;
        };
        let wait = wait.trim_end_matches(')').to_string();
        if waits.last() != Some(&wait) {
            waits.push(wait);
        }
    }
    waits
}

#[rstest]
#[tokio::test]
async fn a_back_off_factor_written_as_text_multiplies_each_wait(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = support::yaml_file(FACTOR_AS_TEXT);
    let submit = ["submit", file.path().to_str().unwrap()];
    let workflows = ns.workflows();
    let (history, _) = tokio::join!(
        support::wait_for_history(&workflows, "factor-text", "a terminal status", |wf| {
            wf.is_some_and(support::is_terminal)
        }),
        ns.cli(&submit),
    );
    let workflow = ns.expect_failed("factor-text", &["flaky"]).await;
    assert_eq!(back_offs(&history, "flaky"), ["2s", "4s"], "{workflow:?}");
    let jobs = ns.jobs_of("factor-text").await;
    assert_eq!(jobs.len(), 3, "{:?}", support::jobs_named(&jobs));
}

/// A sequence whose count is a parameter that holds no number.
const COUNT_NOT_A_NUMBER: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: count-text
spec:
  entrypoint: main
  arguments:
    parameters: [{name: n, value: ten}]
  templates:
    - name: main
      steps:
        - - name: each
            template: say
            arguments:
              parameters: [{name: i, value: "{{item}}"}]
            withSequence:
              count: "{{workflow.parameters.n}}"
    - name: say
      inputs:
        parameters: [{name: i}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.i}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_count_still_not_a_number_once_filled_is_refused_naming_it(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(COUNT_NOT_A_NUMBER);
    let path = file.path().to_str().unwrap();
    let refused = (ns
        .cli_command(&["submit", path, "-n", &ns.name])
        .output()
        .await)
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"step "each": withSequence.count: "ten" is not a number"#),
        "{stderr}"
    );
    assert!(
        ns.workflows()
            .get_opt("count-text")
            .await
            .unwrap()
            .is_none()
    );
    // Made without submit's check (converted, then created as kubectl would): the operator
    // fails it, naming the same.
    let converted = crate::argo_convert::run(&["convert", path]);
    let mut workflow: WorkFlow = serde_saphyr::from_slice(&converted.stdout).unwrap();
    workflow.metadata.namespace = Some(ns.name.clone());
    let created = ns.workflows().create(&Default::default(), &workflow).await;
    created.unwrap();
    let words = [r#"withSequence.count: "ten" is not a number"#];
    ns.expect_failed("count-text", &words).await;
    assert!(ns.jobs_of("count-text").await.is_empty());
}
