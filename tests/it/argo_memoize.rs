//! Argo's `memoize` as it is, submitted unconverted (Argo's `examples/memoize-simple` and
//! docs/memoization.md, written anew here): a second workflow calling the memoized template
//! with the same key runs no pod for it and reads the outputs the first run stored. Argo keeps
//! every entry in the ConfigMap `memoize.cache.configMap.name`; here each entry is a ConfigMap
//! of its own, which `convert` says on standard error (without failing `--strict`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use rstest::rstest;
use workflow_operator_core::cache::{LABEL_CACHE, REASON_CACHED};
use workflow_operator_core::crd::StepPhase;

use crate::argo_dag_outputs::log_of;
use crate::support;

use support::{Operator, operator, step_of};

/// `gen` (memoized on its input) writes a random number as its output; `use` prints it.
const MEMOIZED: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: NAME
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: gen
            template: gen
            arguments:
              parameters: [{name: seed, value: "7"}]
        - - name: use
            template: show
            arguments:
              parameters: [{name: v, value: "{{steps.gen.outputs.parameters.n}}"}]
    - name: gen
      inputs:
        parameters: [{name: seed}]
      memoize:
        key: "gen-{{inputs.parameters.seed}}"
        maxAge: "1h"
        cache:
          configMap:
            name: gen-cache
      container:
        image: alpine:3.20
        command: [sh, -c, "cat /proc/sys/kernel/random/uuid > /tmp/n"]
      outputs:
        parameters:
          - name: n
            valueFrom: {path: /tmp/n}
    - name: show
      inputs:
        parameters: [{name: v}]
      container:
        image: alpine:3.20
        command: [echo, "got {{inputs.parameters.v}}"]
"#;

/// Submits the workflow `name` and waits for it to complete; what its step `use` printed.
async fn run(ns: &support::Namespace, name: &str) -> String {
    let file = support::yaml_file(&MEMOIZED.replace("NAME", name));
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed(name).await;
    log_of(ns, name, "use").await.trim().to_string()
}

#[rstest]
#[tokio::test]
async fn a_memoized_templates_second_call_reads_the_first_ones_outputs_and_runs_no_pod(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let first = run(ns, "memo-first").await;
    assert!(first.len() > "got ".len(), "{first}");
    let second = run(ns, "memo-second").await;
    assert_eq!(second, first, "the second read the first's output");
    let ran: Vec<String> = (ns.jobs_of("memo-second").await.iter())
        .filter_map(|j| step_of(j).map(str::to_string))
        .collect();
    assert_eq!(ran, ["use"], "gen ran no Job");
    let workflow = ns.get("memo-second").await;
    let gen_ = (workflow.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == "gen")
        .expect("gen's entry");
    assert_eq!(gen_.phase, StepPhase::Succeeded);
    assert_eq!(gen_.reason.as_deref(), Some(REASON_CACHED), "{gen_:?}");
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let entries = maps.list(&ListParams::default().labels(LABEL_CACHE)).await;
    assert_eq!(entries.unwrap().items.len(), 1);
}

#[test]
fn convert_says_where_a_memoized_templates_entries_are_kept_instead_of_its_config_map() {
    let file = support::yaml_file(&MEMOIZED.replace("NAME", "memo"));
    let output = crate::argo_convert::run(&["convert", "--strict", file.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("spec.templates[1].memoize.cache: ")
            && stderr.contains("not in the ConfigMap gen-cache"),
        "{stderr}"
    );
}
