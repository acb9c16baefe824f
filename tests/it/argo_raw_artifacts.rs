//! Argo's raw input artifacts, in Argo's YAML submitted as it is, end to end on the embedded
//! control plane with no artifact repository in the namespace (none is needed): a container
//! template's own raw file and the workflow's raw argument artifact given to the entrypoint
//! (Argo's `examples/input-artifact-raw` and `artifact-path-placeholders`, written anew here:
//! `{{inputs.artifacts.NAME.path}}` is the declared path),
//! and a `steps` entrypoint passing the workflow's raw artifact on to the template it calls
//! (`from: "{{inputs.artifacts.NAME}}"`), beside a called template's raw file filled with the
//! call's parameter. Each step's log shows the files' content, lines as written.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use rstest::rstest;

use crate::argo_dag_outputs::log_of;
use crate::argo_forms::submit;
use crate::support;

use support::{Operator, operator};
use workflow_operator_core::agent::REPOSITORY_CONFIGMAP;

/// A container entrypoint reading its own raw file (in a directory the agent makes) and the
/// workflow's raw argument artifact, at the path the template declares (named by Argo's
/// placeholder).
const CONTAINER_ENTRYPOINT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: raw-contents
spec:
  entrypoint: raw-contents
  arguments:
    parameters:
      - name: lines-count
        value: "2"
    artifacts:
      - name: text
        raw:
          data: |
            1
            2
            3
  templates:
    - name: raw-contents
      inputs:
        parameters:
          - name: lines-count
        artifacts:
          - name: myfile
            path: /tmp/raw-contents/deep/file
            raw:
              data: |
                this is
                the raw file
                contents
          - name: text
            path: /tmp/raw-contents/text
      container:
        image: alpine:3.20
        command: [sh, -c]
        args: ["cat /tmp/raw-contents/deep/file; head -n {{inputs.parameters.lines-count}} < \"{{inputs.artifacts.text.path}}\""]
"#;

/// A steps entrypoint handing the workflow's raw artifact to the template it calls, and a
/// template whose own raw file says the call's parameter.
const STEPS_ENTRYPOINT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: raw-passed
spec:
  entrypoint: main
  arguments:
    artifacts:
      - name: seed
        raw:
          data: |
            seed line 1
            seed line 2
  templates:
    - name: main
      inputs:
        artifacts:
          - name: seed
      steps:
        - - name: print-seed
            template: print
            arguments:
              artifacts:
                - name: in
                  from: "{{inputs.artifacts.seed}}"
          - name: greet
            template: greet
            arguments:
              parameters:
                - name: who
                  value: world
    - name: print
      inputs:
        artifacts:
          - name: in
            path: /tmp/raw-passed/seed.txt
      container:
        image: alpine:3.20
        command: [cat, /tmp/raw-passed/seed.txt]
    - name: greet
      inputs:
        parameters:
          - name: who
        artifacts:
          - name: greeting
            path: /tmp/raw-greet/greeting
            raw:
              data: |
                hello {{inputs.parameters.who}}
                from a raw artifact
      script:
        image: alpine:3.20
        command: [sh]
        source: cat /tmp/raw-greet/greeting
"#;

#[rstest]
#[tokio::test]
async fn raw_input_artifacts_are_written_before_the_command_with_no_artifact_repository(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let repository = config_maps.get_opt(REPOSITORY_CONFIGMAP).await.unwrap();
    assert!(
        repository.is_none(),
        "the namespace has no artifact repository"
    );
    submit(ns, CONTAINER_ENTRYPOINT).await;
    submit(ns, STEPS_ENTRYPOINT).await;

    let done = ns.expect_completed("raw-contents").await;
    let status = done.status.as_ref().unwrap();
    assert!(status.artifact_repository.is_none(), "{status:?}");
    assert_eq!(
        log_of(ns, "raw-contents", "raw-contents").await,
        "this is\nthe raw file\ncontents\n1\n2\n"
    );

    ns.expect_completed("raw-passed").await;
    assert_eq!(
        log_of(ns, "raw-passed", "print-seed").await,
        "seed line 1\nseed line 2\n"
    );
    assert_eq!(
        log_of(ns, "raw-passed", "greet").await,
        "hello world\nfrom a raw artifact\n"
    );
}
