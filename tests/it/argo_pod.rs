//! Argo's per-template pod settings and `withSequence.format` end to end on the embedded
//! control plane, written in Argo's YAML and submitted as it is: a `podSpecPatch` adding an
//! environment variable to Argo's `main` container, a template's `tolerations`, `nodeSelector`
//! and `affinity` on its pod, a sequence's items written with a format, the workflow's
//! `podSpecPatch` under a template's, a sidecar mirroring the main container's volume
//! mounts (`mirrorVolumeMounts`), and pod fields that have no field here (`hostAliases`, a
//! template's `securityContext` and `serviceAccountName`, a container's `ports`) on the pod.

use std::io::Write as _;

use rstest::rstest;

use crate::support;

use support::{Operator, operator, step_of};

const ARGO: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: pods
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - name: patched
            template: patched
          - name: shard
            template: shard
            arguments: {parameters: [{name: n, value: "{{item}}"}]}
            withSequence: {start: "8", count: "3", format: "shard-%02d"}
    - name: patched
      tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
      nodeSelector: {kubernetes.io/os: linux}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: kubernetes.io/arch, operator: Exists}]
      podSpecPatch: '{"containers": [{"name": "main", "env": [{"name": "COLOUR", "value": "teal"}]}]}'
      container:
        image: alpine:3.20
        command: [sh, -c, 'echo "colour $COLOUR"']
    - name: shard
      inputs: {parameters: [{name: n}]}
      container:
        image: alpine:3.20
        command: [echo, "{{inputs.parameters.n}}"]
"#;

#[rstest]
#[tokio::test]
async fn a_pod_spec_patch_tolerations_and_a_sequence_format_reach_the_pods(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(ARGO.as_bytes()).unwrap();
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("pods").await;
    let jobs = ns.jobs_of("pods").await;
    let patched = (jobs.iter())
        .find(|j| step_of(j) == Some("patched"))
        .expect("a Job ran patched");
    assert_eq!(ns.job_log(patched).await.trim(), "colour teal");
    let pod = patched
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let tolerations: Vec<_> = (pod.tolerations.iter().flatten())
        .filter_map(|t| t.key.as_deref())
        .collect();
    assert_eq!(tolerations, ["gpu"]);
    let node_selector = pod.node_selector.clone().unwrap_or_default();
    assert_eq!(
        node_selector.get("kubernetes.io/os").map(String::as_str),
        Some("linux"),
        "{node_selector:?}"
    );
    let required = (pod.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let keys: Vec<_> = (required.iter())
        .flat_map(|r| &r.node_selector_terms)
        .flat_map(|t| t.match_expressions.iter().flatten())
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(keys, ["kubernetes.io/arch"], "{:?}", pod.affinity);
    let mut shards = Vec::new();
    for job in jobs.iter().filter(|j| step_of(j) == Some("shard")) {
        shards.push(ns.job_log(job).await.trim().to_string());
    }
    shards.sort();
    assert_eq!(shards, ["shard-08", "shard-09", "shard-10"]);
}

/// The workflow's `podSpecPatch` (a parameter filled in it) on every pod, a template's own
/// patch over it.
const WORKFLOW_PATCH: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: wf-patch
spec:
  entrypoint: main
  arguments:
    parameters: [{name: colour, value: teal}]
  podSpecPatch: |
    containers:
      - name: main
        env:
          - {name: COLOUR, value: "{{workflow.parameters.colour}}"}
          - {name: SIZE, value: small}
  templates:
    - name: main
      steps:
        - - name: plain
            template: show
          - name: patched
            template: patched
    - name: show
      container:
        image: alpine:3.20
        command: [sh, -c, 'echo "$COLOUR $SIZE"']
    - name: patched
      podSpecPatch: '{"containers": [{"name": "main", "env": [{"name": "SIZE", "value": "large"}]}]}'
      container:
        image: alpine:3.20
        command: [sh, -c, 'echo "$COLOUR $SIZE"']
"#;

#[rstest]
#[tokio::test]
async fn a_workflow_pod_spec_patch_reaches_every_pod_under_a_template_s_own(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(WORKFLOW_PATCH);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("wf-patch").await;
    let mut logs = Vec::new();
    for job in ns.jobs_of("wf-patch").await {
        let step = step_of(&job).unwrap_or_default().to_string();
        logs.push((step, ns.job_log(&job).await.trim().to_string()));
    }
    logs.sort();
    assert_eq!(
        logs,
        [
            ("patched".to_string(), "teal large".to_string()),
            ("plain".to_string(), "teal small".to_string()),
        ]
    );
}

/// The main container writes a file to an emptyDir only it mounts; the sidecar, mirroring its
/// mounts, reads it and answers in another file the main container prints (or gives up).
const MIRRORED: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: mirrored
spec:
  entrypoint: talk
  volumes: [{name: shared, emptyDir: {}}]
  templates:
    - name: talk
      sidecars:
        - name: reader
          image: alpine:3.20
          mirrorVolumeMounts: true
          command: [sh, -c, 'until [ -f /shared/said ]; do sleep 0.1; done; echo "sidecar read $(cat /shared/said)" > /shared/reply; sleep 600']
      container:
        image: alpine:3.20
        volumeMounts: [{name: shared, mountPath: /shared}]
        command: [sh, -c, 'echo hello > /shared/said; for i in $(seq 300); do [ -f /shared/reply ] && break; sleep 0.1; done; cat /shared/reply']
"#;

#[rstest]
#[tokio::test]
async fn a_sidecar_mirroring_the_main_container_s_mounts_reads_what_it_wrote(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let file = support::yaml_file(MIRRORED);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("mirrored").await;
    let jobs = ns.jobs_of("mirrored").await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(ns.job_log(&jobs[0]).await.trim(), "sidecar read hello");
}

/// Pod fields that have no field of their own here: the workflow's `hostAliases`, a template's
/// pod `securityContext` and `serviceAccountName`, its container's `ports`.
const POD_FIELDS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: pod-fields
spec:
  entrypoint: serve
  hostAliases: [{ip: 10.1.2.3, hostnames: [registry.local]}]
  templates:
    - name: serve
      securityContext: {fsGroup: 2000}
      serviceAccountName: runner
      container:
        image: alpine:3.20
        command: [sh, -c, "echo served"]
        ports: [{name: http, containerPort: 8080}]
"#;

#[rstest]
#[tokio::test]
async fn pod_fields_without_a_field_here_reach_the_pod_through_its_patch(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(ns.client(), &ns.name);
    let runner = serde_json::from_value(serde_json::json!({"metadata": {"name": "runner"}}));
    let created = accounts.create(&Default::default(), &runner.unwrap()).await;
    created.unwrap();
    let file = support::yaml_file(POD_FIELDS);
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    ns.expect_completed("pod-fields").await;
    let jobs = ns.jobs_of("pod-fields").await;
    let job = (jobs.iter())
        .find(|j| step_of(j) == Some("serve"))
        .expect("serve's Job");
    assert_eq!(ns.job_log(job).await.trim(), "served");
    let pod = (job.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .unwrap();
    let aliases: Vec<_> = (pod.host_aliases.iter().flatten())
        .map(|a| (a.ip.as_str(), a.hostnames.clone().unwrap_or_default()))
        .collect();
    assert_eq!(aliases, [("10.1.2.3", vec!["registry.local".to_string()])]);
    let fs_group = pod.security_context.as_ref().and_then(|s| s.fs_group);
    assert_eq!(fs_group, Some(2000));
    assert_eq!(pod.service_account_name.as_deref(), Some("runner"));
    let ports: Vec<_> = (pod.containers[0].ports.iter().flatten())
        .map(|p| (p.name.as_deref(), p.container_port))
        .collect();
    assert_eq!(ports, [(Some("http"), 8080)]);
}
