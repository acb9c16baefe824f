//! Artifacts end to end on the embedded control plane with its embedded S3 store, through
//! kubectl and the `workflow-operator` CLI: a file and a directory passed between steps, an
//! init container and a sidecar around a step, artifact GC by each strategy, and what fails
//! (a missing output path, bad credentials, a missing input) saying what it is.

use crate::support;

use std::time::Duration;

use kube::api::PostParams;
use kube_devcluster::testing::eventually;
use rstest::rstest;
use support::session::Session;
use support::{Namespace, Operator, namespace, operator_process};
use workflow_operator::artifacts::{self, embedded::EmbeddedStore};
use workflow_operator_core::WorkFlow;

/// The session with the embedded store as the `default` namespace's repository.
async fn with_store(test: &str) -> Option<(Session, EmbeddedStore)> {
    let session = Session::start(test).await?;
    let store = EmbeddedStore::start(None)
        .await
        .expect("the embedded store");
    artifacts::embedded::install_default_repository(session.cluster.client(), "default", &store)
        .await
        .expect("the default repository installed");
    Some((session, store))
}

/// The embedded store, started and installed as `ns`'s repository (its ConfigMap and its
/// credentials Secret).
pub(crate) async fn store_of(ns: &Namespace) -> EmbeddedStore {
    let store = EmbeddedStore::start(None)
        .await
        .expect("the embedded store");
    artifacts::embedded::install_default_repository(ns.client(), &ns.name, &store)
        .await
        .expect("the namespace's repository");
    store
}

/// The keys under `prefix` in the store.
async fn keys(store: &EmbeddedStore, prefix: &str) -> Vec<String> {
    let listed = artifacts::list(store.target(), prefix)
        .await
        .expect("listing the store");
    listed.into_iter().map(|s| s.key).collect()
}

/// The workflow `name` whose step `make` writes a file and a directory (nested, with an empty
/// subdirectory) as artifacts and whose step `use` prints them from its inputs; `spec` is
/// more of its spec (YAML lines indented two spaces), e.g. a repository.
pub fn passing_manifest(name: &str, spec: &str) -> String {
    format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: {name}}}
spec:
{spec}
  containers:
    - stepName: make
      image: alpine:3.20
      source: |
        mkdir -p /tmp/out/site/css /tmp/out/site/empty
        echo 'hello' > /tmp/out/site/index.html
        echo 'body{{}}' > /tmp/out/site/css/main.css
        echo 'v1.2' > /tmp/out/version
      outputs:
        artifacts:
          - {{name: site, path: /tmp/out/site}}
          - {{name: version, path: /tmp/out/version}}
    - stepName: use
      image: alpine:3.20
      dependsOn: [make]
      source: |
        cat /tmp/in/version /tmp/in/site/index.html /tmp/in/site/css/main.css
        test -d /tmp/in/site/empty && echo 'empty kept'
      inputs:
        artifacts:
          - {{name: site, path: /tmp/in/site, from: "{{{{steps.make.outputs.artifacts.site}}}}"}}
          - {{name: version, path: /tmp/in/version, from: "{{{{steps.make.outputs.artifacts.version}}}}"}}
"#
    )
}

/// A file and a directory (nested, with an empty subdirectory) made by one step are placed
/// at the paths of the next, through the store's directory; `artifacts get` downloads one; the
/// status records each key.
#[tokio::test]
async fn a_file_and_a_directory_pass_between_steps() {
    let Some((session, store)) = with_store("artifacts").await else {
        return;
    };
    let (puts, mut announced) = tokio::sync::mpsc::unbounded_channel();
    store.notify(puts);
    session.create(&passing_manifest("passing", "")).await;
    session.finished_as("passing", "Completed").await;
    // The steps ran on the store's machine: each wrote its artifact's one part in the store's
    // directory (a small upload over HTTP would be a plain PUT, its ETag an MD5 without `-1`).
    for _ in 0..2 {
        let put = announced.recv().await.unwrap();
        assert!(
            put.etag.ends_with("-1"),
            "not through the directory: {put:?}"
        );
    }
    let logs = session.cli(&["logs", "passing", "--step", "use"]).await;
    for line in ["v1.2", "hello", "body{}", "empty kept"] {
        assert!(logs.contains(line), "{line}: {logs}");
    }
    let stored = keys(&store, "default/passing/").await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(
        stored
            .iter()
            .all(|k| k.ends_with("/site.tgz") || k.ends_with("/version.tgz"))
    );
    let listed = session.cli(&["artifacts", "list", "passing"]).await;
    assert!(
        listed.contains("make") && listed.contains("site"),
        "{listed}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("version");
    session
        .cli(&[
            "artifacts",
            "get",
            "passing",
            "make",
            "version",
            "-o",
            out.to_str().unwrap(),
        ])
        .await;
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "v1.2\n");
    let from = session
        .jsonpath("passing", "{.status.artifactRepository.from}")
        .await;
    assert!(
        from.starts_with("configmap/workflow-artifact-repository"),
        "{from}"
    );
    session.stop().await;
    store.shutdown().await;
}

/// A script of a step with artifacts reaches its file byte for byte, as a plain script does
/// (`step_agent::a_script_reaches_the_shell_byte_for_byte`): Kubernetes' `$(VAR)` expansion
/// does not touch it, and the artifact it writes to a path made of `$$` is the one stored.
#[tokio::test]
async fn a_script_with_artifacts_reaches_the_shell_byte_for_byte() {
    let Some((session, store)) = with_store("artifacts-literal").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: literal-artifacts}
spec:
  containers:
    - stepName: make
      image: alpine:3.20
      source: |
        printf '%s\n' 'kept: $(STEP_NAME) $$ $$(STEP_NAME)'
        mkdir -p /tmp/out
        echo "pid $$" > /tmp/out/m-$$.txt
      outputs:
        artifacts: [{name: out, path: /tmp/out}]
    - stepName: use
      image: alpine:3.20
      dependsOn: [make]
      source: |
        cat /tmp/in/m-*.txt
      inputs:
        artifacts: [{name: out, path: /tmp/in, from: "{{steps.make.outputs.artifacts.out}}"}]
"#;
    session.create(manifest).await;
    session.finished_as("literal-artifacts", "Completed").await;
    let logs = session.cli(&["logs", "literal-artifacts"]).await;
    let lines: Vec<&str> = logs.lines().collect();
    assert_eq!(lines.len(), 2, "{logs}");
    assert_eq!(lines[0], "make: kept: $(STEP_NAME) $$ $$(STEP_NAME)");
    let pid = lines[1].strip_prefix("use: pid ").expect(&logs);
    assert!(pid.parse::<u32>().is_ok(), "{logs}");
    session.stop().await;
    store.shutdown().await;
}

/// `OnWorkflowCompletion` deletes the artifacts once the workflow ended; `OnWorkflowDeletion`
/// keeps them until it is deleted; `Never` keeps them.
#[tokio::test]
async fn artifact_gc_deletes_by_each_strategy() {
    let Some((session, store)) = with_store("artifact-gc").await else {
        return;
    };
    let workflow = |name: &str, strategy: &str| {
        format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n  \
             artifactGC: {{strategy: {strategy}}}\n  containers:\n    - stepName: make\n      \
             image: alpine:3.20\n      command: [sh, -c, 'echo x > /tmp/x']\n      outputs: {{artifacts: [{{name: x, path: /tmp/x}}]}}\n"
        )
    };
    let manifest = [
        workflow("on-completion", "OnWorkflowCompletion"),
        workflow("on-deletion", "OnWorkflowDeletion"),
        workflow("never", "Never"),
    ]
    .join("---\n");
    session.create(&manifest).await;
    for name in ["on-completion", "on-deletion", "never"] {
        session.wait_finished(name).await;
        let phase = session.jsonpath(name, "{.status.workflow-status}").await;
        assert_eq!(phase, "Completed", "{name}");
    }
    kube_devcluster::testing::eventually(
        "OnWorkflowCompletion deletes the artifacts once the workflow ended",
        Duration::from_secs(30),
        || async {
            keys(&store, "default/on-completion/")
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    let deleted_at = session
        .jsonpath("on-completion", "{.status.artifactsDeletedAt}")
        .await;
    assert!(!deleted_at.is_empty(), "recorded");
    assert_eq!(keys(&store, "default/on-deletion/").await.len(), 1);
    session
        .k(&["delete", "wf", "on-deletion", "--wait=true"])
        .await;
    assert!(keys(&store, "default/on-deletion/").await.is_empty());
    session.k(&["delete", "wf", "never", "--wait=true"]).await;
    assert_eq!(keys(&store, "default/never/").await.len(), 1);
    session.stop().await;
    store.shutdown().await;
}

/// A missing output path fails its step naming the path; wrong credentials fail the step
/// saying the store refused them, without the secret in the message.
#[tokio::test]
async fn a_missing_output_and_bad_credentials_fail_the_step_saying_why() {
    let Some((session, store)) = with_store("artifact-failures").await else {
        return;
    };
    session
        .k(&[
            "create",
            "secret",
            "generic",
            "wrong",
            "--from-literal=accessKey=nobody",
            "--from-literal=secretKey=not-the-secret",
        ])
        .await;
    let manifest = format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: missing}}
spec:
  containers:
    - stepName: make
      image: alpine:3.20
      command: [sh, -c, 'echo made']
      outputs: {{artifacts: [{{name: app, path: /tmp/app}}]}}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: refused}}
spec:
  artifactRepository:
    s3: {{endpoint: "{endpoint}", bucket: workflows, credentialsSecret: {{name: wrong}}}}
  containers:
    - stepName: make
      image: alpine:3.20
      command: [sh, -c, 'echo x > /tmp/x']
      outputs: {{artifacts: [{{name: x, path: /tmp/x}}]}}
"#,
        endpoint = store.endpoint()
    );
    session.create(&manifest).await;
    session.wait_finished("missing").await;
    session.wait_finished("refused").await;
    let missing = session.jsonpath("missing", "{.status.message}").await;
    assert!(
        missing.contains("output artifact app") && missing.contains("/tmp/app"),
        "{missing}"
    );
    let refused = session.jsonpath("refused", "{.status.message}").await;
    assert!(refused.contains("output artifact x"), "{refused}");
    assert!(refused.contains("credentials"), "{refused}");
    assert!(!refused.contains("not-the-secret"), "{refused}");
    session.stop().await;
    store.shutdown().await;
}

/// An input artifact gone from the store by the time its step runs (deleted between the step
/// that made it and the one that reads it) fails the reading step, naming the input and the
/// key it looked for.
#[tokio::test]
async fn a_missing_input_artifact_fails_the_step_naming_it() {
    let Some((session, store)) = with_store("missing-input").await else {
        return;
    };
    let gate = support::Gate::new();
    let hold = serde_json::to_string(&gate.wait_command("held")).unwrap();
    let manifest = format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: missing}}
spec:
  containers:
    - stepName: make
      image: alpine:3.20
      source: echo made > /tmp/made
      outputs: {{artifacts: [{{name: made, path: /tmp/made}}]}}
    - {{stepName: hold, image: alpine:3.20, dependsOn: [make], command: {hold}}}
    - stepName: use
      image: alpine:3.20
      dependsOn: [hold]
      source: cat /tmp/in/made
      inputs: {{artifacts: [{{name: made, path: /tmp/in/made, from: "{{{{steps.make.outputs.artifacts.made}}}}"}}]}}
"#
    );
    session.create(&manifest).await;
    let made = eventually("the artifact stored", Duration::from_secs(60), || async {
        keys(&store, "default/missing/").await.into_iter().next()
    })
    .await;
    let deleted = artifacts::delete_prefix(store.target(), "default/missing/")
        .await
        .expect("deleting the artifact");
    assert_eq!(deleted, 1);
    gate.open();
    let message = session.finished_as("missing", "Failed").await;
    assert!(message.contains("step use failed"), "{message}");
    assert!(message.contains("input artifact made"), "{message}");
    assert!(message.contains(&made), "names the key {made}: {message}");
    session.stop().await;
    store.shutdown().await;
}

/// A step's init container and sidecar run around it, sharing the pod's emptyDir: the init
/// container writes before the step, the sidecar writes while it runs, and the step (with
/// its result read by the next) sees both.
#[tokio::test]
async fn an_init_container_and_a_sidecar_run_around_a_step() {
    let Some(session) = Session::start("init-and-sidecar").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: around}
spec:
  podTemplate:
    volumes: [{name: shared, emptyDir: {}}]
  containers:
    - stepName: main
      image: alpine:3.20
      volumeMounts: [{name: shared, mountPath: /shared}]
      initContainers:
        - {name: setup, image: alpine:3.20, command: [sh, -c, 'echo configured > /shared/config'], volumeMounts: [{name: shared, mountPath: /shared}]}
      sidecars:
        - {name: ticker, image: alpine:3.20, command: [sh, -c, 'while true; do echo tick > /shared/tick; sleep 0.1; done'], volumeMounts: [{name: shared, mountPath: /shared}]}
      command: [sh, -c, 'cat /shared/config; for i in $(seq 50); do test -f /shared/tick && break; sleep 0.1; done; cat /shared/tick']
    - stepName: after
      image: alpine:3.20
      dependsOn: [main]
      command: [echo, "main said {{steps.main.outputs.result}}"]
"#;
    session.create(manifest).await;
    session.finished_as("around", "Completed").await;
    let logs = session.cli(&["logs", "around", "--step", "after"]).await;
    assert!(logs.contains("main said configured"), "{logs}");
    assert!(
        logs.contains("tick"),
        "the sidecar ran beside the step: {logs}"
    );
    session.stop().await;
}

/// The operator SIGKILLed every 1.1 s, 8 times, while four workflows upload and download
/// artifacts (each 1 MiB) and then collect them (`OnWorkflowCompletion`), and a fifth, with
/// `OnWorkflowDeletion`, is deleted: every workflow completes having read what it wrote, and
/// no artifact is left that GC should have deleted.
#[rstest]
#[tokio::test]
async fn killed_while_artifacts_upload_and_are_collected_nothing_is_lost_or_left(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    Box::pin(kill_around_artifacts(operator_process)).await;
}

/// `run --artifact-repository FILE` serves a namespace without a repository of its own: its
/// workflow's artifacts pass through the file's store, and the status says where it came from.
#[rstest]
#[tokio::test]
async fn the_operators_own_repository_serves_a_namespace_without_one(
    #[future(awt)] namespace: Namespace,
) {
    skip_on_real_cluster!("runs its own operator process with its own flags");
    // The store's credentials Secret, but no repository ConfigMap (deleted below).
    let store = store_of(&namespace).await;
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(namespace.client(), &namespace.name);
    (config_maps.delete(
        workflow_operator_core::agent::REPOSITORY_CONFIGMAP,
        &Default::default(),
    ))
    .await
    .expect("the namespace's own repository deleted");
    let (operator, _dir) = operator_with_repository_flag(namespace, &store);
    let ns = &operator.ns;
    let workflow = passing_workflow("from-flag", "Never");
    (ns.workflows().create(&PostParams::default(), &workflow))
        .await
        .expect("created");
    let done = ns.expect_completed("from-flag").await;
    let from = (done.status.as_ref()).and_then(|s| s.artifact_repository.as_ref());
    assert_eq!(from.map(|r| r.from.as_str()), Some("--artifact-repository"));
    let stored = keys(&store, &format!("{}/from-flag/", ns.name)).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    store.shutdown().await;
}

/// The operator as a process whose own repository (`--artifact-repository`, a file in the
/// returned directory) is `store`.
fn operator_with_repository_flag(
    namespace: Namespace,
    store: &EmbeddedStore,
) -> (Operator, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("repository.yaml");
    std::fs::write(&file, serde_yaml::to_string(&store.repository()).unwrap()).unwrap();
    let operator = Operator::process_with_args(
        namespace,
        &["--artifact-repository", file.to_str().unwrap()],
    );
    (operator, dir)
}

/// A namespace's repository ConfigMap that does not parse, or names a store it cannot be, is
/// neither used nor passed over for the operator's own repository: each step with artifacts
/// fails with a message naming the ConfigMap and what is wrong, which `kubectl get wf` shows.
#[rstest]
#[case::missing_field(
    "{endpoint: 'ENDPOINT', bucket: workflows}",
    "s3: missing field `credentialsSecret`"
)]
#[case::relative_directory(
    "{endpoint: 'ENDPOINT', bucket: workflows, credentialsSecret: {name: x}, localDirectory: store}",
    "s3.localDirectory \"store\" is not an absolute path"
)]
#[tokio::test]
async fn a_malformed_repository_configmap_fails_the_step_naming_it(
    #[future(awt)] namespace: Namespace,
    #[case] s3: &str,
    #[case] why: &str,
) {
    skip_on_real_cluster!("runs its own operator process with its own flags");
    let store = store_of(&namespace).await;
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(namespace.client(), &namespace.name);
    let s3 = s3.replace("ENDPOINT", store.endpoint());
    let malformed = serde_json::json!({"data": {"repository": format!("s3: {s3}")}});
    (config_maps.patch(
        workflow_operator_core::agent::REPOSITORY_CONFIGMAP,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&malformed),
    ))
    .await
    .expect("the namespace's repository made malformed");
    let (operator, _dir) = operator_with_repository_flag(namespace, &store);
    let ns = &operator.ns;
    let workflow = passing_workflow("malformed", "Never");
    (ns.workflows().create(&PostParams::default(), &workflow))
        .await
        .expect("created");
    let words = ["workflow-artifact-repository", why];
    let failed = ns.expect_failed("malformed", &words).await;
    let step = (failed
        .status
        .as_ref()
        .and_then(|s| s.steps.iter().find(|s| s.name == "make")))
    .and_then(|s| s.message.clone())
    .unwrap_or_default();
    for word in words {
        assert!(step.contains(word), "the step's message: {step}");
    }
    assert!(
        keys(&store, &format!("{}/malformed/", ns.name))
            .await
            .is_empty()
    );
    store.shutdown().await;
}

fn passing_workflow(name: &str, strategy: &str) -> WorkFlow {
    let yaml = format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: {name}}}
spec:
  artifactGC: {{strategy: {strategy}}}
  containers:
    - stepName: make
      image: alpine:3.20
      command: [sh, -c, 'head -c 1048576 /dev/urandom > /tmp/blob; sha256sum /tmp/blob | cut -c1-64 > /tmp/sum; sleep 0.5']
      outputs:
        parameters: [{{name: sum, valueFrom: {{path: /tmp/sum}}}}]
        artifacts: [{{name: blob, path: /tmp/blob}}]
    - stepName: check
      image: alpine:3.20
      dependsOn: [make]
      command: [sh, -c, 'test "$(sha256sum /tmp/in | cut -c1-64)" = "{{{{steps.make.outputs.sum}}}}"']
      inputs:
        artifacts: [{{name: blob, path: /tmp/in, from: "{{{{steps.make.outputs.artifacts.blob}}}}"}}]
"#
    );
    serde_yaml::from_str(&yaml).expect("a workflow")
}

async fn kill_around_artifacts(mut operator: Operator) {
    let ns = &operator.ns;
    let store = store_of(ns).await;
    let params = PostParams::default();
    let mut names: Vec<String> = (0..4).map(|i| format!("a-{i}")).collect();
    for name in &names {
        let workflow = passing_workflow(name, "OnWorkflowCompletion");
        ns.workflows()
            .create(&params, &workflow)
            .await
            .expect("created");
    }
    let deleted = passing_workflow("deleted", "OnWorkflowDeletion");
    ns.workflows()
        .create(&params, &deleted)
        .await
        .expect("created");
    for kill in 0..8 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        operator.kill().await;
        operator.start();
        if kill == 4 {
            operator
                .ns
                .workflows()
                .delete("deleted", &Default::default())
                .await
                .expect("deleting");
        }
    }
    let ns = &operator.ns;
    for name in &names {
        ns.expect_completed(name).await;
    }
    support::wait_for(&ns.workflows(), "deleted", "deleted", |wf| wf.is_none()).await;
    names.push("deleted".into());
    for name in &names {
        let prefix = format!("{}/{name}/", ns.name);
        kube_devcluster::testing::eventually(
            &format!("{name}'s artifacts collected ({} kills)", operator.kills),
            Duration::from_secs(30),
            || async { keys(&store, &prefix).await.is_empty().then_some(()) },
        )
        .await;
    }
    store.shutdown().await;
}

/// `build` fans out over three items, each writing its item to the artifact `app` (once
/// `before` has run); `join` fails unless `/tmp/in/app/0`, `/1` and `/2` hold the three, in
/// item order, and nothing else.
fn fan_in_manifest(name: &str, before: &str) -> String {
    format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: {name}}}
spec:
  containers:
    - stepName: build
      image: alpine:3.20
      withItems: [red, green, blue]
      source: |
        {before}
        echo "built {{{{item}}}}" > /tmp/app
      outputs:
        artifacts:
          - {{name: app, path: /tmp/app}}
    - stepName: join
      image: alpine:3.20
      dependsOn: [build]
      source: |
        set -e
        test "$(cat /tmp/in/app/0)" = "built red"
        test "$(cat /tmp/in/app/1)" = "built green"
        test "$(cat /tmp/in/app/2)" = "built blue"
        test "$(ls /tmp/in/app | wc -l)" = 3
        echo 'all three joined'
      inputs:
        artifacts:
          - {{name: app, path: /tmp/in/app, from: "{{{{steps.build.outputs.artifacts.app}}}}"}}
"#
    )
}

/// A step after one that fans out over three items takes the artifact of every item, each at
/// `PATH/<index>`.
#[tokio::test]
async fn a_step_takes_the_artifact_of_every_item_of_a_step_that_fans_out() {
    let Some((session, store)) = with_store("artifact-fan-in").await else {
        return;
    };
    session.create(&fan_in_manifest("fan-in", "true")).await;
    session.finished_as("fan-in", "Completed").await;
    let logs = session.cli(&["logs", "fan-in", "--step", "join"]).await;
    assert!(logs.contains("all three joined"), "{logs}");
    let stored = keys(&store, "default/fan-in/").await;
    assert_eq!(stored.len(), 3, "one artifact per item: {stored:?}");
    session.stop().await;
    store.shutdown().await;
}

/// The operator SIGKILLed while the items of a step that fans out run, the items ending while
/// it is down: the operator started again creates the fan-in step's Job from the items' Jobs
/// alone, and the step gets every item's artifact.
#[rstest]
#[tokio::test]
async fn killed_between_the_items_end_and_the_fan_in_the_fan_in_gets_every_item(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process; the items wait for a local file");
    let mut operator = operator_process;
    let ns = &operator.ns;
    let store = store_of(ns).await;
    let gate = support::Gate::new();
    let wait = gate.wait_command("go").pop().expect("a script");
    let workflow: WorkFlow =
        serde_yaml::from_str(&fan_in_manifest("killed-fan-in", &wait)).expect("a workflow");
    (ns.workflows().create(&PostParams::default(), &workflow))
        .await
        .expect("created");
    let builds = |jobs: &[std::sync::Arc<k8s_openapi::api::batch::v1::Job>], done: bool| {
        let items = jobs.iter().filter(|j| support::step_of(j) == Some("build"));
        items
            .filter(|j| !done || support::job_outcome(j) == Some(true))
            .count()
            == 3
    };
    ns.wait_jobs("killed-fan-in", "the three items' Jobs", |jobs| {
        builds(jobs, false)
    })
    .await;
    operator.kill().await;
    gate.open();
    let ns = &operator.ns;
    let jobs = ns
        .wait_jobs("killed-fan-in", "the three items succeeded", |jobs| {
            builds(jobs, true)
        })
        .await;
    let join = jobs.iter().filter(|j| support::step_of(j) == Some("join"));
    assert_eq!(join.count(), 0, "no fan-in Job while the operator is down");
    operator.start();
    operator.ns.expect_completed("killed-fan-in").await;
    store.shutdown().await;
}
