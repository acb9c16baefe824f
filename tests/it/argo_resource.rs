//! Argo's resource templates end to end on the embedded control plane, written in Argo's YAML
//! and submitted as it is: a Job created from a `generateName` and waited for until
//! `status.succeeded > 0`, its name read back by `jsonPath` into a later step, then deleted
//! by flags (twice: the second finds nothing, which `--ignore-not-found` lets pass); a Job
//! that fails meeting the `failureCondition`, failing the step with a message naming it; and a
//! ConfigMap applied, applied again changed, and merge-patched, from pods that run as the
//! workflow's `serviceAccountName` (the step agent acts with its pod's credentials); and, on a
//! control plane with RBAC, a ConfigMap created as the workflow's service account: refused
//! with the API server's Forbidden message until a Role bound to the account allows it.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use rstest::rstest;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{StepPhase, StepStatus};
use workflow_operator_core::resource_action::ANNOTATION_CREATED_BY;

use crate::support;

use support::{Operator, operator, rbac_operator, step_of};

/// Make a Job and wait for it, print its name and how many pods succeeded, delete it, and
/// delete it again.
const MADE_AND_DELETED: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: counted
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: make
            template: make-job
        - - name: show
            template: say
            arguments:
              parameters:
                - name: text
                  value: "{{steps.make.outputs.parameters.job}} {{steps.make.outputs.parameters.done}}"
        - - name: drop
            template: drop-job
            arguments:
              parameters: [{name: job, value: "{{steps.make.outputs.parameters.job}}"}]
        - - name: drop-again
            template: drop-job
            arguments:
              parameters: [{name: job, value: "{{steps.make.outputs.parameters.job}}"}]
    - name: make-job
      resource:
        action: create
        successCondition: status.succeeded > 0
        failureCondition: status.failed > 0
        manifest: |
          apiVersion: batch/v1
          kind: Job
          metadata:
            generateName: counter-
          spec:
            backoffLimit: 0
            template:
              spec:
                restartPolicy: Never
                containers:
                  - name: count
                    image: alpine:3.20
                    command: [sh, -c, "echo counted"]
      outputs:
        parameters:
          - name: job
            valueFrom: {jsonPath: '{.metadata.name}'}
          - name: done
            valueFrom: {jsonPath: '{.status.succeeded}'}
    - name: say
      inputs:
        parameters: [{name: text}]
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.text}}"]
    - name: drop-job
      inputs:
        parameters: [{name: job}]
      resource:
        action: delete
        flags: [job, "{{inputs.parameters.job}}", --ignore-not-found]
"#;

/// A Job whose only pod fails.
const FAILING: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: broken
spec:
  entrypoint: make-job
  templates:
    - name: make-job
      resource:
        action: create
        successCondition: status.succeeded > 0
        failureCondition: status.failed > 0
        manifest: |
          apiVersion: batch/v1
          kind: Job
          metadata:
            name: broken-job
          spec:
            backoffLimit: 0
            template:
              spec:
                restartPolicy: Never
                containers:
                  - name: fail
                    image: alpine:3.20
                    command: [sh, -c, "exit 3"]
"#;

fn step<'a>(workflow: &'a WorkFlow, name: &str) -> &'a StepStatus {
    (workflow.status.iter().flat_map(|s| &s.steps))
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("step {name} in {:?}", workflow.status))
}

#[rstest]
#[tokio::test]
async fn a_resource_template_makes_a_job_waits_for_it_reads_its_name_and_deletes_it(
    #[future(awt)] operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's step pods act with a service account this test has no RBAC for.
    }
    let ns = &operator.ns;
    let file = support::yaml_file(MADE_AND_DELETED);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns.expect_completed("counted").await;
    let made = &step(&workflow, "make").outputs;
    let job = made.get("job").cloned().unwrap_or_default();
    assert!(
        job.starts_with("counter-") && job.len() == "counter-".len() + 5,
        "{made:?}"
    );
    assert_eq!(made.get("done").map(String::as_str), Some("1"), "{made:?}");
    let jobs = ns.jobs_of("counted").await;
    let show = jobs.iter().find(|j| step_of(j) == Some("show")).unwrap();
    assert_eq!(ns.job_log(show).await.trim(), format!("{job} 1"));
    // The step's Job named the object it made; both deletes succeeded, the second finding
    // nothing.
    let make = jobs.iter().find(|j| step_of(j) == Some("make")).unwrap();
    let make_log = ns.job_log(make).await;
    assert!(
        make_log.contains(&format!("job/{job} created")),
        "{make_log}"
    );
    let status = workflow.status.as_ref().unwrap();
    assert_eq!(status.executed, ["make", "show", "drop", "drop-again"]);
    assert_eq!(status.message.as_deref(), Some("4 steps succeeded"));
    let drop = jobs.iter().find(|j| step_of(j) == Some("drop")).unwrap();
    assert!(
        ns.job_log(drop)
            .await
            .contains(&format!("job \"{job}\" deleted"))
    );
    let objects: Api<Job> = Api::namespaced(ns.client(), &ns.name);
    let gone = objects.get_opt(&job).await.unwrap();
    // Deleted in the background: gone, or going with its deletion started.
    assert!(
        gone.as_ref()
            .is_none_or(|j| j.metadata.deletion_timestamp.is_some()),
        "{gone:?}"
    );
    let made_by = make.metadata.name.as_deref().unwrap_or_default();
    if let Some(job) = gone {
        let annotations = job.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations.get(ANNOTATION_CREATED_BY).map(String::as_str),
            Some(made_by)
        );
    }
}

#[rstest]
#[tokio::test]
async fn a_resource_meeting_its_failure_condition_fails_the_step_naming_it(
    #[future(awt)] operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's step pods act with a service account this test has no RBAC for.
    }
    let ns = &operator.ns;
    let file = support::yaml_file(FAILING);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns.expect_failed("broken", &["make-job"]).await;
    let failed = step(&workflow, "make-job");
    assert_eq!(failed.phase, StepPhase::Failed);
    let message = failed.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(
            r#"job/broken-job: failureCondition "status.failed > 0" holds (status.failed is "1")"#
        ),
        "{message}"
    );
}

/// A ConfigMap applied, applied again with a key changed and one left out, then merge-patched
/// with a key added (its value read back as an output), all as the service account `actor`.
const APPLIED_AND_PATCHED: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: applied
spec:
  entrypoint: main
  serviceAccountName: actor
  templates:
    - name: main
      steps:
        - - name: first
            template: apply
            arguments:
              parameters: [{name: data, value: "{mode: fast, level: \"1\"}"}]
        - - name: second
            template: apply
            arguments:
              parameters: [{name: data, value: "{mode: safe}"}]
        - - name: add
            template: add-key
    - name: apply
      inputs:
        parameters: [{name: data}]
      resource:
        action: apply
        manifest: |
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
          data: {{inputs.parameters.data}}
    - name: add-key
      resource:
        action: patch
        mergeStrategy: merge
        manifest: |
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
          data:
            extra: "yes"
      outputs:
        parameters:
          - name: mode
            valueFrom: {jsonPath: '{.data.mode}'}
"#;

#[rstest]
#[tokio::test]
async fn a_config_map_applied_twice_then_merge_patched_as_the_workflows_service_account(
    #[future(awt)] operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // A real cluster's account `actor` would need RBAC on ConfigMaps this test lacks.
    }
    let ns = &operator.ns;
    let accounts: Api<ServiceAccount> = Api::namespaced(ns.client(), &ns.name);
    let actor = serde_json::from_value(serde_json::json!({"metadata": {"name": "actor"}}));
    (accounts
        .create(&PostParams::default(), &actor.unwrap())
        .await)
        .unwrap();
    let file = support::yaml_file(APPLIED_AND_PATCHED);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let workflow = ns.expect_completed("applied").await;
    let added = &step(&workflow, "add").outputs;
    assert_eq!(
        added.get("mode").map(String::as_str),
        Some("safe"),
        "{added:?}"
    );
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let data = maps.get("settings").await.unwrap().data.unwrap_or_default();
    let data: Vec<(&str, &str)> = (data.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(data, [("extra", "yes"), ("mode", "safe")]);
    let jobs = ns.jobs_of("applied").await;
    for name in ["first", "second", "add"] {
        let job = jobs.iter().find(|j| step_of(j) == Some(name)).unwrap();
        let pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        let account = pod.and_then(|p| p.service_account_name.as_deref());
        assert_eq!(account, Some("actor"), "{name}");
    }
}

/// A workflow whose only step creates the ConfigMap `made-by-runner` as the service account
/// `runner`.
fn create_as_runner(name: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  entrypoint: make-map
  serviceAccountName: runner
  templates:
    - name: make-map
      resource:
        action: create
        manifest: |
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: made-by-runner
          data:
            made-by: {name}
"#
    )
}

/// What the step pods of a resource step need of the API to create a ConfigMap: the
/// action's `create`, and `get`, with which the step agent reads an object already there
/// (an earlier try of its Job may have made it). Discovery, which it reads first, every
/// authenticated user may read.
const CONFIG_MAP_MAKER: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: config-map-maker
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [create, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: runner-makes-config-maps
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: config-map-maker
subjects:
  - kind: ServiceAccount
    name: runner
"#;

#[rstest]
#[tokio::test]
async fn a_resource_step_acts_as_the_workflows_service_account_refused_until_a_role_allows_it(
    #[future(awt)] rbac_operator: Operator,
) {
    if support::Cluster::is_real() {
        return; // The account `runner` and its Role would be the real cluster's to set up.
    }
    let ns = &rbac_operator.ns;
    let accounts: Api<ServiceAccount> = Api::namespaced(ns.client(), &ns.name);
    let runner = serde_json::from_value(serde_json::json!({"metadata": {"name": "runner"}}));
    (accounts
        .create(&PostParams::default(), &runner.unwrap())
        .await)
        .unwrap();
    let denied = support::yaml_file(&create_as_runner("denied"));
    ns.cli(&["submit", denied.path().to_str().unwrap()]).await;
    let refused = format!(
        "configmaps is forbidden: User \"system:serviceaccount:{0}:runner\" cannot create \
         resource \"configmaps\" in API group \"\" in the namespace \"{0}\"",
        ns.name
    );
    let workflow = ns.expect_failed("denied", &["make-map"]).await;
    let failed = step(&workflow, "make-map");
    assert_eq!(failed.phase, StepPhase::Failed);
    let message = failed.message.as_deref().unwrap_or_default();
    assert!(message.contains(&refused), "{message}");
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    assert!(maps.get_opt("made-by-runner").await.unwrap().is_none());
    // The admin (this test's client) grants it; the same workflow, named anew, succeeds.
    let mut documents = serde_yaml::Deserializer::from_str(CONFIG_MAP_MAKER);
    let role: Role = serde::Deserialize::deserialize(documents.next().unwrap()).unwrap();
    let binding: RoleBinding = serde::Deserialize::deserialize(documents.next().unwrap()).unwrap();
    let create = PostParams::default();
    let roles: Api<Role> = Api::namespaced(ns.client(), &ns.name);
    roles.create(&create, &role).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(ns.client(), &ns.name);
    bindings.create(&create, &binding).await.unwrap();
    let allowed = support::yaml_file(&create_as_runner("allowed"));
    ns.cli(&["submit", allowed.path().to_str().unwrap()]).await;
    ns.expect_completed("allowed").await;
    let made = maps.get("made-by-runner").await.unwrap();
    let data = made.data.unwrap_or_default();
    assert_eq!(data.get("made-by").map(String::as_str), Some("allowed"));
}
