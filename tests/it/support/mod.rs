//! Shared fixtures of the operator's integration and reliability tests (`tests/operator_*.rs`,
//! `tests/reliability_*.rs`), pytest-style, on rstest:
//!
//! - [`cluster`]: the embedded control plane with the WorkFlow CRD installed, or, when
//!   `WORKFLOW_TEST_CLUSTER=kube` is set, the cluster of the current kubeconfig (where the CRD
//!   and the operator are assumed installed);
//! - [`namespace`]: a fresh namespace per test, deleted afterwards;
//! - [`operator`] / [`operator_process`]: our operator running against the cluster, as a tokio
//!   task or as a separate OS process (the built binary), stoppable, killable and restartable;
//!   a no-op on a real cluster, where the installed operator runs;
//! - waits that watch for a condition with a deadline and fail naming what was awaited and the
//!   last state seen ([`wait_for`], [`wait_list`], [`Namespace::wait_terminal`]), and
//!   [`holds_for`], which watches that a condition stays true for a while;
//! - [`JobRecorder`]: every Job and pod that ever existed in a namespace, to prove no step ran
//!   twice;
//! - [`Shape`]: workflows of mixed shapes with their expected outcomes.
//! - [`session::Session`]: a user's kubectl session on the embedded control plane with the
//!   operator running, and the `workflow-operator` CLI pointed at it.
//!
//! Tests reach the cluster only through the Kubernetes API, so the same files run on kind. Only
//! fault injection ([`Cluster::dev`]) needs the embedded control plane; tests that use it, or
//! stop the operator, skip themselves on a real cluster.
#![allow(dead_code)]

pub mod queueing;
pub mod session;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace as CoreNamespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use kube_devcluster::{DevCluster, DevClusterOptions};
use rstest::fixture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use workflow_operator::controllers::workflow::operator::{
    self as workflow_operator_mod, OperatorOptions,
};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::{
    ANNOTATION_STEP, ANNOTATION_WORKFLOW, LABEL_ITEM, LABEL_RETRY, LABEL_RUN, LABEL_RUN_INDEX,
};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::testing::WorkFlowBuilder;

/// How long a wait may take unless a test says otherwise: generous, because the 2-core build
/// machine runs several tests (each with its processes) at once.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The operator's CRDs, generated once for the many control planes a test binary starts: in a
/// debug build, generating them took tens of milliseconds of CPU in every test's fixture.
pub static CRDS: LazyLock<Vec<CustomResourceDefinition>> =
    LazyLock::new(workflow_operator_core::crd::crds);

/// The environment variable that selects a real cluster (`kube`) instead of the embedded one.
pub const CLUSTER_ENV: &str = "WORKFLOW_TEST_CLUSTER";

/// Label on every namespace the tests create, so leftovers on a real cluster can be found.
pub const TEST_LABEL: &str = "workflow-operator-test";

/// The cluster the tests run against.
pub struct Cluster {
    /// The embedded control plane; `None` on a real cluster.
    dev: Option<DevCluster>,
    client: Client,
}

impl Cluster {
    /// A client for the cluster.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The embedded control plane, for fault injection; `None` on a real cluster.
    pub fn dev(&self) -> Option<&DevCluster> {
        self.dev.as_ref()
    }

    /// Whether the tests run on a real cluster (`WORKFLOW_TEST_CLUSTER=kube`).
    pub fn is_real() -> bool {
        std::env::var(CLUSTER_ENV).is_ok_and(|v| v == "kube")
    }
}

/// Logs to the test output when `RUST_LOG` is set (off otherwise, to keep the output short).
fn init_tracing() {
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// The cluster: a fresh embedded control plane with the WorkFlow CRD installed, or the current
/// kubeconfig's cluster with `WORKFLOW_TEST_CLUSTER=kube` (the CRD must be installed there).
#[fixture]
pub async fn cluster() -> Arc<Cluster> {
    init_tracing();
    if Cluster::is_real() {
        let client = Client::try_default()
            .await
            .expect("a kubeconfig for WORKFLOW_TEST_CLUSTER=kube");
        workflow_operator_mod::check_crd_installed(&client)
            .await
            .expect("the WorkFlow CRD is installed on the test cluster");
        return Arc::new(Cluster { dev: None, client });
    }
    let dev = DevCluster::start(DevClusterOptions {
        // Step retries in moments, as before the control plane had Kubernetes' 10 s back-off.
        job_backoff: kube_devcluster::jobs::JobBackoff::FAST,
        ..DevClusterOptions::default()
    })
    .await
    .expect("the embedded control plane starts");
    let client = dev.client();
    workflow_operator_mod::install_crds(&client, &CRDS)
        .await
        .expect("the WorkFlow CRD installs");
    Arc::new(Cluster {
        dev: Some(dev),
        client,
    })
}

/// A namespace of its own for one test; deleted when dropped.
pub struct Namespace {
    pub cluster: Arc<Cluster>,
    pub name: String,
}

/// A fresh namespace named after the running test (libtest names the test's thread after it).
#[fixture]
pub async fn namespace(#[future] cluster: Arc<Cluster>) -> Namespace {
    let cluster = cluster.await;
    let test = std::thread::current()
        .name()
        .unwrap_or("test")
        .rsplit("::")
        .next()
        .unwrap_or("test")
        .to_string();
    let mut base: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    base.truncate(50);
    let base = base.trim_matches('-');
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let name = format!("{base}-{suffix}");
    let object = CoreNamespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(TEST_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        ..CoreNamespace::default()
    };
    Api::<CoreNamespace>::all(cluster.client())
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    Namespace { cluster, name }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // The embedded control plane goes away with the test, and its namespaces with it. On a
        // real cluster the namespace is deleted from a thread of its own (a drop cannot await,
        // and this test's runtime may be the one dropping us), with a client of its own.
        if self.cluster.dev.is_some() {
            return;
        }
        let name = self.name.clone();
        let deleted = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the namespace clean-up");
            runtime.block_on(async move {
                let client = Client::try_default().await?;
                Api::<CoreNamespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .map(|_| ())
            })
        })
        .join();
        if !matches!(deleted, Ok(Ok(()))) {
            eprintln!("could not delete test namespace {}", self.name);
        }
    }
}

impl Namespace {
    pub fn client(&self) -> Client {
        self.cluster.client()
    }

    pub fn workflows(&self) -> Api<WorkFlow> {
        Api::namespaced(self.client(), &self.name)
    }

    pub fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client(), &self.name)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client(), &self.name)
    }

    /// The workflow a builder describes, as a user would submit it: no uid, generation or
    /// status, in this namespace.
    pub fn manifest(&self, builder: WorkFlowBuilder) -> WorkFlow {
        let mut workflow = builder.build();
        workflow.metadata = ObjectMeta {
            name: workflow.metadata.name.take(),
            labels: workflow.metadata.labels.take(),
            namespace: Some(self.name.clone()),
            ..ObjectMeta::default()
        };
        workflow.status = None;
        workflow
    }

    /// Submits a workflow; panics if the API refuses it.
    pub async fn create(&self, builder: WorkFlowBuilder) -> WorkFlow {
        let workflow = self.manifest(builder);
        let name = workflow.name_any();
        let workflow = &workflow;
        retrying(&format!("creating workflow {name}"), || async move {
            self.workflows()
                .create(&PostParams::default(), workflow)
                .await
        })
        .await
    }

    /// The workflow now.
    pub async fn get(&self, name: &str) -> WorkFlow {
        retrying(&format!("getting workflow {name}"), || async move {
            self.workflows().get(name).await
        })
        .await
    }

    /// Waits until the workflow is Completed or Failed for its current spec (its status was
    /// computed for its current generation) and returns it.
    pub async fn wait_terminal(&self, name: &str) -> WorkFlow {
        self.wait_terminal_within(name, DEADLINE).await
    }

    pub async fn wait_terminal_within(&self, name: &str, deadline: Duration) -> WorkFlow {
        wait_for_within(
            &self.workflows(),
            name,
            "a terminal status for the current generation",
            deadline,
            |wf| wf.is_some_and(is_terminal),
        )
        .await
        .expect("present")
    }

    /// Waits until the workflow is terminal and asserts it Completed.
    pub async fn expect_completed(&self, name: &str) -> WorkFlow {
        let workflow = self.wait_terminal(name).await;
        assert_eq!(
            phase(&workflow),
            Some(Phase::Completed),
            "workflow {name} should have Completed; status: {}",
            describe_status(&workflow)
        );
        workflow
    }

    /// Waits until the workflow is terminal and asserts it Failed with a message containing
    /// every one of `words`.
    pub async fn expect_failed(&self, name: &str, words: &[&str]) -> WorkFlow {
        let workflow = self.wait_terminal(name).await;
        assert_eq!(
            phase(&workflow),
            Some(Phase::Failed),
            "workflow {name} should have Failed; status: {}",
            describe_status(&workflow)
        );
        let message = message(&workflow);
        for word in words {
            assert!(
                message.contains(word),
                "the message of workflow {name} should contain {word:?}: {message:?}"
            );
        }
        workflow
    }

    /// Waits until the workflow satisfies `cond`, describing it as `what` on a timeout.
    pub async fn wait_workflow(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&WorkFlow) -> bool,
    ) -> WorkFlow {
        wait_for(&self.workflows(), name, what, |wf| wf.is_some_and(&cond))
            .await
            .expect("present")
    }

    /// The workflow's Jobs now (by its label).
    pub async fn jobs_of(&self, workflow: &str) -> Vec<Job> {
        let selector = workflow_operator_core::jobs::selector(workflow);
        let selector = &selector;
        retrying("listing jobs", || async move {
            self.jobs()
                .list(&ListParams::default().labels(selector))
                .await
        })
        .await
        .items
    }

    /// Waits until the workflow's Jobs satisfy `cond` and returns them.
    pub async fn wait_jobs(
        &self,
        workflow: &str,
        what: &str,
        cond: impl Fn(&[Arc<Job>]) -> bool,
    ) -> Vec<Arc<Job>> {
        let selector = workflow_operator_core::jobs::selector(workflow);
        wait_list(
            &self.jobs(),
            watcher::Config::default().labels(&selector),
            what,
            DEADLINE,
            cond,
        )
        .await
    }

    /// Waits until the workflow's Job of `step` exists (any run) and satisfies `cond`.
    pub async fn wait_step_job(
        &self,
        workflow: &str,
        step: &str,
        what: &str,
        cond: impl Fn(&Job) -> bool,
    ) -> Arc<Job> {
        let jobs = self
            .wait_jobs(
                workflow,
                &format!("the job of step {step}: {what}"),
                |jobs| jobs.iter().any(|j| step_of(j) == Some(step) && cond(j)),
            )
            .await;
        jobs.into_iter()
            .find(|j| step_of(j) == Some(step) && cond(j))
            .expect("found")
    }

    /// Waits until no pod of the namespace is left that matches `cond`.
    pub async fn wait_no_pods(&self, what: &str, cond: impl Fn(&Pod) -> bool) {
        wait_list(
            &self.pods(),
            watcher::Config::default(),
            what,
            DEADLINE,
            |pods| !pods.iter().any(|p| cond(p)),
        )
        .await;
    }

    /// Waits until a pod of Job `job` runs.
    pub async fn wait_pods_ready(&self, job: &str) {
        let running =
            |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        wait_list(
            &self.pods(),
            watcher::Config::default().labels(&format!("job-name={job}")),
            "a running pod",
            DEADLINE,
            |pods| pods.iter().any(|p| running(p)),
        )
        .await;
    }
}

impl Namespace {
    /// Merge-patches the workflow's spec with `spec` (as `kubectl patch --type merge` does).
    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) -> WorkFlow {
        let patch = serde_json::json!({ "spec": spec });
        let patch = &patch;
        retrying(&format!("patching workflow {name}"), || async move {
            self.workflows()
                .patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(patch),
                )
                .await
        })
        .await
    }

    /// `workflow-operator ARGS` against the cluster (its kubeconfig as `KUBECONFIG`), with no
    /// namespace added: a test gives `-n` where it wants it.
    pub fn cli_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"));
        command.args(args).kill_on_drop(true);
        if let Some(dev) = self.cluster.dev() {
            command.env("KUBECONFIG", dev.kubeconfig_path());
        }
        // `exec` and `continue` run kubectl: the test tools' one, where installed.
        let kubectl = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/kubectl");
        if kubectl.exists() {
            command.env("KUBECTL", kubectl);
        }
        command
    }

    /// Runs `workflow-operator ARGS -n NAMESPACE` against the cluster, as a user would; it must
    /// succeed. Its standard output.
    pub async fn cli(&self, args: &[&str]) -> String {
        let output = self
            .cli_command(args)
            .args(["-n", &self.name])
            .output()
            .await
            .expect("workflow-operator runs");
        assert!(
            output.status.success(),
            "workflow-operator {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The logs of the pods of `job`, concatenated (a Job with `retries` may have several).
    pub async fn job_log(&self, job: &Job) -> String {
        let selector = format!("job-name={}", job.name_any());
        let pods = self
            .pods()
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("listing the job's pods")
            .items;
        let mut log = String::new();
        for pod in pods {
            log.push_str(
                &self
                    .pods()
                    .logs(&pod.name_any(), &Default::default())
                    .await
                    .expect("the pod's log"),
            );
        }
        log
    }
}

/// A file a step waits for (`gate.wait_command()`), filled by the test (`gate.open()`), so that
/// a test decides when a step finishes instead of guessing how long it takes. The embedded
/// control plane runs steps as local processes, which see the file; tests that use a gate skip
/// themselves on a real cluster.
pub struct Gate {
    path: std::path::PathBuf,
}

impl Gate {
    /// A closed gate: an empty file, which opening fills.
    pub fn new() -> Gate {
        // The file is there from the start and opening writes to it rather than creating it: a
        // sandboxed step sees the host's /tmp (where a clone may live) through an overlay,
        // which keeps a name it looked up and did not find as missing (overlayfs caches the
        // failed lookup), but reads an existing file's size and bytes from the host's file.
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "workflow-operator-gate-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::write(&path, b"").expect("making the gate");
        Gate { path }
    }

    /// A command that waits until the gate opens, then prints `then` and exits 0.
    pub fn wait_command(&self, then: &str) -> Vec<String> {
        let script = format!("{}; echo {then}", self.wait_script());
        vec!["sh".into(), "-c".into(), script]
    }

    /// A shell command line that returns once the gate opens.
    pub fn wait_script(&self) -> String {
        format!("until [ -s {} ]; do sleep 0.05; done", self.path.display())
    }

    /// A command that exits 0 when the gate is open, and fails with exit code 1 otherwise.
    pub fn check_command(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            format!("[ -s {} ]", self.path.display()),
        ]
    }

    /// Opens the gate: steps waiting for it go on.
    pub fn open(&self) {
        std::fs::write(&self.path, b"open").expect("opening the gate");
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The steps of `jobs`, sorted (a step with two Jobs appears twice).
pub fn jobs_named(jobs: &[Job]) -> Vec<String> {
    let mut steps: Vec<String> = jobs.iter().filter_map(step_of).map(String::from).collect();
    steps.sort();
    steps
}

/// The workflow's phase, if it has a status.
pub fn phase(workflow: &WorkFlow) -> Option<Phase> {
    workflow.status.as_ref().and_then(|s| s.workflow_status)
}

/// The workflow's status message, or "".
pub fn message(workflow: &WorkFlow) -> String {
    workflow
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

/// The steps the status lists as executed.
pub fn executed(workflow: &WorkFlow) -> BTreeSet<String> {
    workflow
        .status
        .as_ref()
        .map(|s| s.executed.iter().cloned().collect())
        .unwrap_or_default()
}

/// The steps the status lists as started.
pub fn started(workflow: &WorkFlow) -> BTreeSet<String> {
    workflow
        .status
        .as_ref()
        .map(|s| s.started.iter().cloned().collect())
        .unwrap_or_default()
}

/// Completed or Failed, for the current generation.
pub fn is_terminal(workflow: &WorkFlow) -> bool {
    let current = workflow.status.as_ref().and_then(|s| s.observed_generation)
        == workflow.metadata.generation;
    current && phase(workflow).is_some_and(|p| p.is_terminal())
}

/// Whether the workflow's status is for its current generation.
pub fn is_current(workflow: &WorkFlow) -> bool {
    workflow.status.as_ref().and_then(|s| s.observed_generation) == workflow.metadata.generation
}

/// The status (and generation) of a workflow, as YAML, for failure messages.
pub fn describe_status(workflow: &WorkFlow) -> String {
    let view = serde_json::json!({
        "generation": workflow.metadata.generation,
        "status": workflow.status,
    });
    truncate(serde_yaml::to_string(&view).unwrap_or_default(), 3000)
}

/// The exact step name of a Job the operator made.
pub fn step_of(job: &Job) -> Option<&str> {
    job.annotations().get(ANNOTATION_STEP).map(String::as_str)
}

/// A Job's finished condition: `Some(true)` Complete, `Some(false)` Failed, `None` running.
pub fn job_outcome(job: &Job) -> Option<bool> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let holds = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if holds("Complete") {
        Some(true)
    } else if holds("Failed") {
        Some(false)
    } else {
        None
    }
}

fn truncate(mut text: String, at: usize) -> String {
    if text.len() > at {
        let mut cut = at;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n... (truncated)");
    }
    text
}

/// An object as YAML for failure messages: name, generation and status first, then the rest,
/// without `managedFields`, truncated.
fn describe<K: Serialize>(object: Option<&K>) -> String {
    let Some(object) = object else {
        return "nothing (the object does not exist)".into();
    };
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    let head = serde_json::json!({
        "name": value.pointer("/metadata/name"),
        "generation": value.pointer("/metadata/generation"),
        "deletionTimestamp": value.pointer("/metadata/deletionTimestamp"),
        "status": value.get("status"),
    });
    let text = format!(
        "{}---\n{}",
        serde_yaml::to_string(&head).unwrap_or_default(),
        serde_yaml::to_string(&value).unwrap_or_default()
    );
    truncate(text, 4000)
}

/// Waits (watching it) until the object named `name` satisfies `cond` (given `None` while it
/// does not exist), for at most [`DEADLINE`]; returns it.
///
/// # Panics
/// On the deadline, naming what was awaited and the last state seen.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    wait_for_within(api, name, what, DEADLINE, cond).await
}

/// [`wait_for`] with a deadline of `deadline`.
pub async fn wait_for_within<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    deadline: Duration,
    cond: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    watch_one(api, name, what, deadline, cond, |_| {}).await
}

/// [`wait_for`] that also returns every state of the object seen on the way, oldest first
/// (the first is the state when the watch started).
pub async fn wait_for_history<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut history = Vec::new();
    watch_one(api, name, what, DEADLINE, cond, |k: &K| {
        history.push(k.clone())
    })
    .await;
    history
}

async fn watch_one<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    deadline: Duration,
    cond: impl Fn(Option<&K>) -> bool,
    mut seen: impl FnMut(&K),
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut last: Option<K> = None;
    let mut listed = false;
    let mut errors = Vec::new();
    let watched = tokio::time::timeout(deadline, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => last = None,
                Ok(watcher::Event::InitApply(object)) => last = Some(object),
                Ok(watcher::Event::InitDone) => listed = true,
                Ok(watcher::Event::Apply(object)) => last = Some(object),
                Ok(watcher::Event::Delete(_)) => last = None,
                Err(error) => {
                    errors.push(error.to_string());
                    continue;
                }
            }
            if !listed {
                continue;
            }
            if let Some(object) = &last {
                seen(object);
            }
            if cond(last.as_ref()) {
                return true;
            }
        }
        false
    })
    .await;
    if watched != Ok(true) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let errors = if errors.is_empty() {
            String::new()
        } else {
            format!(
                "\nwatch errors ({}), the last: {}",
                errors.len(),
                errors.last().expect("not empty")
            )
        };
        panic!(
            "timed out after {deadline:?} waiting for {what} of {kind} {name}; last seen:\n{}{errors}",
            describe(last.as_ref())
        );
    }
    last
}

/// Waits (watching them) until the objects `config` selects satisfy `cond`, for at most
/// `deadline`; returns them.
///
/// # Panics
/// On the deadline, naming what was awaited and the objects last seen.
pub async fn wait_list<K>(
    api: &Api<K>,
    config: watcher::Config,
    what: &str,
    deadline: Duration,
    cond: impl Fn(&[Arc<K>]) -> bool,
) -> Vec<Arc<K>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let mut events = watcher(api.clone(), config)
        .default_backoff()
        .reflect(writer)
        .boxed();
    let mut listed = false;
    let watched = tokio::time::timeout(deadline, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitDone) => listed = true,
                Ok(_) => {}
                Err(_) => continue,
            }
            if listed && cond(&reader.state()) {
                return true;
            }
        }
        false
    })
    .await;
    let state = reader.state();
    if watched != Ok(true) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let seen: Vec<String> = state
            .iter()
            .map(|o| {
                let status = serde_json::to_value(o.as_ref())
                    .ok()
                    .and_then(|v| v.get("status").cloned())
                    .unwrap_or_default();
                format!("- {}: {}", o.name_any(), truncate(status.to_string(), 400))
            })
            .collect();
        panic!(
            "timed out after {deadline:?} waiting for {what} ({kind} list); last seen {} objects:\n{}",
            state.len(),
            truncate(seen.join("\n"), 6000)
        );
    }
    state
}

/// Watches the object for `period` and asserts that every state seen satisfies `cond`: a check
/// that something does *not* happen (a completed workflow is not failed later), not a wait.
///
/// # Panics
/// At the first state seen that breaks `cond`.
pub async fn holds_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    period: Duration,
    cond: impl Fn(Option<&K>) -> bool,
) where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut seen = 0usize;
    let _ = tokio::time::timeout(period, async {
        let mut last: Option<K> = None;
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitApply(object) | watcher::Event::Apply(object)) => {
                    last = Some(object)
                }
                Ok(watcher::Event::Delete(_)) => last = None,
                Ok(watcher::Event::Init) => last = None,
                Ok(watcher::Event::InitDone) => listed = true,
                Err(_) => continue,
            }
            if !listed {
                continue;
            }
            seen += 1;
            assert!(
                cond(last.as_ref()),
                "{what} broke for {name} after {seen} states seen; state:\n{}",
                describe(last.as_ref())
            );
        }
    })
    .await;
    assert!(
        seen > 0,
        "watching {name} for {period:?} saw no state at all"
    );
}

/// Calls `call` until it succeeds, retrying what a busy or fault-injecting API server answers
/// (409, 429, 500, 503, transport errors) with a short backoff, for at most [`DEADLINE`].
///
/// # Panics
/// On another error, or on the deadline.
pub async fn retrying<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(50);
    loop {
        match call().await {
            Ok(value) => return value,
            Err(error) => {
                let transient = match &error {
                    // A 409 AlreadyExists is an answer, not a hiccup (an injected 409 is a
                    // Conflict).
                    kube::Error::Api(e) => {
                        matches!(e.code, 409 | 429 | 500 | 503) && e.reason != "AlreadyExists"
                    }
                    kube::Error::HyperError(_) | kube::Error::Service(_) => true,
                    _ => false,
                };
                assert!(transient && start.elapsed() < DEADLINE, "{what}: {error}");
                // A backoff between attempts, not a wait for a condition.
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// How the operator under test runs.
enum Running {
    /// On a real cluster: the installed operator; the tests do not control it.
    External,
    /// A tokio task of this test process.
    Task {
        token: CancellationToken,
        handle: JoinHandle<anyhow::Result<()>>,
    },
    /// The built binary, `workflow-operator run`.
    Process(tokio::process::Child),
    /// Not running (stopped or killed).
    Stopped,
}

/// Our operator running against the test's namespace, with the namespace it runs in.
pub struct Operator {
    pub ns: Namespace,
    as_process: bool,
    running: Running,
    /// Times it was started, including the first.
    pub starts: usize,
    /// Times it was killed (SIGKILL or task abort).
    pub kills: usize,
    /// The process's stderr (its log), appended over restarts.
    log: Option<tempfile::NamedTempFile>,
    /// Options given to `workflow-operator run` besides `--namespace` (process only).
    args: Vec<String>,
}

/// The operator as a tokio task of the test, watching only the test's namespace.
#[fixture]
pub async fn operator(#[future] namespace: Namespace) -> Operator {
    Operator::start_new(namespace.await, false, Vec::new())
}

/// The operator as a separate OS process (the built `workflow-operator run`), watching only the
/// test's namespace; killable with SIGKILL.
#[fixture]
pub async fn operator_process(#[future] namespace: Namespace) -> Operator {
    Operator::start_new(namespace.await, true, Vec::new())
}

impl Operator {
    /// The operator as a separate OS process (as [`operator_process`]) with `args` added to
    /// its command line on every start, e.g. `--default-ttl-seconds-after-finished 1`.
    pub fn process_with_args(ns: Namespace, args: &[&str]) -> Operator {
        Operator::start_new(ns, true, args.iter().map(|a| a.to_string()).collect())
    }

    /// `count` operator processes for `ns` under leader election, as the replicas of a
    /// Deployment: identities `replica-0`, `replica-1`, ... (kept over a restart, as a pod's
    /// name is over a container's), the Lease `workflow-operator` in `ns`, lasting
    /// `lease_seconds`.
    ///
    /// # Panics
    /// On a real cluster, whose namespace each replica's handle would delete.
    pub fn replicas(ns: Namespace, count: usize, lease_seconds: u32) -> Vec<Operator> {
        assert!(
            ns.cluster.dev.is_some(),
            "replicas: the embedded control plane only"
        );
        (0..count)
            .map(|i| {
                let handle = Namespace {
                    cluster: ns.cluster.clone(),
                    name: ns.name.clone(),
                };
                let args = [
                    "--leader-election",
                    "--leader-election-namespace",
                    &ns.name,
                    "--lease-duration",
                    &lease_seconds.to_string(),
                    "--leader-election-identity",
                    &format!("replica-{i}"),
                ];
                Operator::process_with_args(handle, &args)
            })
            .collect()
    }

    fn start_new(ns: Namespace, as_process: bool, args: Vec<String>) -> Operator {
        let external = ns.cluster.dev.is_none();
        let mut operator = Operator {
            ns,
            as_process,
            args,
            running: if external {
                Running::External
            } else {
                Running::Stopped
            },
            starts: 0,
            kills: 0,
            log: None,
        };
        if !external {
            operator.start();
        }
        operator
    }

    /// Whether this test can stop and start the operator (not on a real cluster).
    pub fn controllable(&self) -> bool {
        !matches!(self.running, Running::External)
    }

    /// Starts the operator (again).
    ///
    /// # Panics
    /// When it is running, or not controllable.
    pub fn start(&mut self) {
        assert!(
            matches!(self.running, Running::Stopped),
            "start: the operator is not stopped"
        );
        let options = OperatorOptions {
            namespace: Some(self.ns.name.clone()),
            ..OperatorOptions::default()
        };
        self.running = if self.as_process {
            let dev = self.ns.cluster.dev().expect("controllable");
            let log = self.log.get_or_insert_with(|| {
                tempfile::NamedTempFile::new().expect("a file for the operator's log")
            });
            let stderr = log.reopen().expect("the operator's log file");
            let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
                .args(["run", "--namespace", &self.ns.name])
                .args(&self.args)
                .env("KUBECONFIG", dev.kubeconfig_path())
                .env("RUST_LOG", "warn,workflow_operator=info")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(append(stderr))
                .kill_on_drop(true)
                .spawn()
                .expect("the operator binary starts");
            Running::Process(child)
        } else {
            let token = CancellationToken::new();
            let client = self.ns.client();
            let stop = token.clone();
            let handle = tokio::spawn(async move {
                workflow_operator_mod::run(client, options, stop.cancelled_owned()).await
            });
            Running::Task { token, handle }
        };
        self.starts += 1;
    }

    /// Stops the operator gracefully (SIGTERM for the process); running handlers finish.
    pub async fn stop(&mut self) {
        match std::mem::replace(&mut self.running, Running::Stopped) {
            Running::Task { token, handle } => {
                token.cancel();
                tokio::time::timeout(DEADLINE, handle)
                    .await
                    .expect("the operator stops in time")
                    .expect("the operator task does not panic")
                    .expect("the operator ran without error");
            }
            Running::Process(mut child) => {
                let pid = child.id().expect("a running process");
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                )
                .expect("SIGTERM delivered");
                let status = tokio::time::timeout(DEADLINE, child.wait())
                    .await
                    .expect("the operator exits in time after SIGTERM")
                    .expect("waiting for the operator");
                assert!(status.success(), "the operator exited with {status}");
            }
            Running::External => panic!("stop: the operator of a real cluster is not ours"),
            Running::Stopped => panic!("stop: the operator is not running"),
        }
    }

    /// Kills the operator at once: SIGKILL for the process, an abort for the task.
    pub async fn kill(&mut self) {
        match std::mem::replace(&mut self.running, Running::Stopped) {
            Running::Task { handle, .. } => {
                handle.abort();
                let _ = handle.await;
            }
            Running::Process(mut child) => {
                child.kill().await.expect("SIGKILL delivered");
            }
            Running::External => panic!("kill: the operator of a real cluster is not ours"),
            Running::Stopped => panic!("kill: the operator is not running"),
        }
        self.kills += 1;
    }

    /// Whether the operator is still running (it has not exited or failed on its own).
    pub fn is_running(&mut self) -> bool {
        match &mut self.running {
            Running::External => true,
            Running::Task { handle, .. } => !handle.is_finished(),
            Running::Process(child) => matches!(child.try_wait(), Ok(None)),
            Running::Stopped => false,
        }
    }

    /// The operator process's log so far (empty for a task).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f.path()).ok())
            .unwrap_or_default()
    }
}

/// An append-mode handle, so restarts add to the same log.
fn append(file: std::fs::File) -> Stdio {
    use std::io::Seek;
    let mut file = file;
    let _ = file.seek(std::io::SeekFrom::End(0));
    Stdio::from(file)
}

/// Skips the rest of a test that needs the embedded control plane or an operator it controls.
#[macro_export]
macro_rules! skip_on_real_cluster {
    ($why:expr) => {
        if $crate::support::Cluster::is_real() {
            eprintln!("skipped on a real cluster: {}", $why);
            return;
        }
    };
}

/// One Job as the [`JobRecorder`] saw it over its life.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub uid: String,
    pub name: String,
    /// Annotation `workflow.crd.com/workflow`.
    pub workflow: String,
    /// Annotation `workflow.crd.com/step`.
    pub step: String,
    /// Label `workflow.crd.com/run`.
    pub run: String,
    /// Label `workflow.crd.com/retry` (`0` when absent).
    pub retry: String,
    /// Which of the step's instances: `RUN_INDEX/ITEM` from the labels `workflow.crd.com/run-index`
    /// (`spec.runs`) and `workflow.crd.com/item` (a step that fans out), each empty when absent.
    pub instance: String,
    /// Order of the event the Job was first seen in (Jobs' watch only).
    pub first_seen: u64,
    /// Order of the event it was first seen finished in, and whether it succeeded.
    pub finished: Option<(u64, bool)>,
    /// Whether it has been seen deleted (or being deleted).
    pub deleted: bool,
}

#[derive(Default)]
struct Recorded {
    seq: u64,
    jobs: BTreeMap<String, JobRecord>,
    /// Pod uid -> (owning Job uid, deleted).
    pods: BTreeMap<String, (String, bool)>,
}

/// Every Job and pod that ever existed in a namespace from its start, from a watch of its own:
/// proves that no step ran twice even when the operator restarted in between.
pub struct JobRecorder {
    state: Arc<Mutex<Recorded>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for JobRecorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl JobRecorder {
    /// Starts recording, once the first list of Jobs and pods is in.
    pub async fn start(ns: &Namespace) -> JobRecorder {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let (jobs_ready, jobs_listed) = tokio::sync::oneshot::channel();
        let (pods_ready, pods_listed) = tokio::sync::oneshot::channel();
        let jobs = {
            let state = state.clone();
            let api = ns.jobs();
            tokio::spawn(async move {
                let mut ready = Some(jobs_ready);
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    let mut state = state.lock().expect("recorder lock");
                    match event {
                        watcher::Event::InitApply(job) | watcher::Event::Apply(job) => {
                            state.seq += 1;
                            let seq = state.seq;
                            record_job(&mut state.jobs, &job, seq, false);
                        }
                        watcher::Event::Delete(job) => {
                            state.seq += 1;
                            let seq = state.seq;
                            record_job(&mut state.jobs, &job, seq, true);
                        }
                        watcher::Event::InitDone => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        watcher::Event::Init => {}
                    }
                }
            })
        };
        let pods = {
            let state = state.clone();
            let api = ns.pods();
            tokio::spawn(async move {
                let mut ready = Some(pods_ready);
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    let mut state = state.lock().expect("recorder lock");
                    match event {
                        watcher::Event::InitApply(pod) | watcher::Event::Apply(pod) => {
                            record_pod(&mut state.pods, &pod, false)
                        }
                        watcher::Event::Delete(pod) => record_pod(&mut state.pods, &pod, true),
                        watcher::Event::InitDone => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        watcher::Event::Init => {}
                    }
                }
            })
        };
        let listed = async {
            let _ = jobs_listed.await;
            let _ = pods_listed.await;
        };
        tokio::time::timeout(DEADLINE, listed)
            .await
            .expect("the recorder's watches start");
        JobRecorder {
            state,
            tasks: vec![jobs, pods],
        }
    }

    /// Every Job seen so far.
    pub fn jobs(&self) -> Vec<JobRecord> {
        let state = self.state.lock().expect("recorder lock");
        state.jobs.values().cloned().collect()
    }

    /// The Jobs seen for one step of one workflow (any run).
    pub fn jobs_of(&self, workflow: &str, step: &str) -> Vec<JobRecord> {
        self.jobs()
            .into_iter()
            .filter(|j| j.workflow == workflow && j.step == step)
            .collect()
    }

    /// Pods seen for a Job.
    pub fn pods_of(&self, job_uid: &str) -> usize {
        let state = self.state.lock().expect("recorder lock");
        state.pods.values().filter(|(j, _)| j == job_uid).count()
    }

    /// Pods seen so far that have not been seen deleted.
    pub fn live_pods(&self) -> usize {
        let state = self.state.lock().expect("recorder lock");
        state.pods.values().filter(|(_, deleted)| !deleted).count()
    }

    /// Waits until the recorder has seen every Job and pod that exists now (its watch can lag
    /// behind a list).
    pub async fn catch_up(&self, ns: &Namespace) {
        let jobs = retrying("listing jobs", || async move {
            ns.jobs().list(&ListParams::default()).await
        })
        .await;
        let pods = retrying("listing pods", || async move {
            ns.pods().list(&ListParams::default()).await
        })
        .await;
        let want_jobs: Vec<String> = jobs.items.iter().filter_map(|j| j.uid()).collect();
        let want_pods: Vec<String> = pods.items.iter().filter_map(|p| p.uid()).collect();
        let start = Instant::now();
        loop {
            let (missing_jobs, missing_pods) = {
                let state = self.state.lock().expect("recorder lock");
                (
                    want_jobs
                        .iter()
                        .filter(|u| !state.jobs.contains_key(*u))
                        .count(),
                    want_pods
                        .iter()
                        .filter(|u| !state.pods.contains_key(*u))
                        .count(),
                )
            };
            if missing_jobs + missing_pods == 0 {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the recorder missed {missing_jobs} jobs and {missing_pods} pods that exist"
            );
            // A short poll of in-memory state fed by the watch tasks.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Checks that no step ran twice: per workflow, step, instance (run index and item), run and
    /// retry at most one Job, and per Job at most `1 + retries` pods (`retries` of the step, by
    /// Job uid: 0 unless listed). Returns the number of Jobs checked.
    ///
    /// # Panics
    /// Listing every duplicate.
    pub fn assert_no_step_ran_twice(&self, retries: &BTreeMap<(String, String), usize>) -> usize {
        let jobs = self.jobs();
        let mut per_step: BTreeMap<(&str, &str, &str, &str, &str), Vec<&JobRecord>> =
            BTreeMap::new();
        for job in &jobs {
            per_step
                .entry((
                    &job.workflow,
                    &job.step,
                    &job.instance,
                    &job.run,
                    &job.retry,
                ))
                .or_default()
                .push(job);
        }
        let mut duplicates: Vec<String> = per_step
            .iter()
            .filter(|(_, jobs)| jobs.len() > 1)
            .map(|((wf, step, instance, run, retry), jobs)| {
                let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
                format!(
                    "workflow {wf} step {step} instance {instance} run {run} retry {retry}: {} \
                     jobs {names:?}",
                    jobs.len()
                )
            })
            .collect();
        let mut pods_per_job: BTreeMap<String, usize> = BTreeMap::new();
        for (job, _) in self.state.lock().expect("recorder lock").pods.values() {
            *pods_per_job.entry(job.clone()).or_default() += 1;
        }
        for job in &jobs {
            let allowed = 1 + retries
                .get(&(job.workflow.clone(), job.step.clone()))
                .copied()
                .unwrap_or(0);
            let pods = pods_per_job.get(&job.uid).copied().unwrap_or(0);
            if pods > allowed {
                duplicates.push(format!(
                    "job {} (workflow {} step {}) ran {pods} pods, at most {allowed} allowed",
                    job.name, job.workflow, job.step
                ));
            }
        }
        assert!(
            duplicates.is_empty(),
            "steps ran more than once:\n{}",
            duplicates.join("\n")
        );
        jobs.len()
    }
}

fn record_job(jobs: &mut BTreeMap<String, JobRecord>, job: &Job, seq: u64, deleted: bool) {
    let Some(uid) = job.uid() else { return };
    let record = jobs.entry(uid.clone()).or_insert_with(|| JobRecord {
        uid,
        name: job.name_any(),
        workflow: job
            .annotations()
            .get(ANNOTATION_WORKFLOW)
            .cloned()
            .unwrap_or_default(),
        step: step_of(job).unwrap_or_default().to_string(),
        run: job.labels().get(LABEL_RUN).cloned().unwrap_or_default(),
        retry: job
            .labels()
            .get(LABEL_RETRY)
            .cloned()
            .unwrap_or_else(|| "0".into()),
        instance: {
            let label = |key| job.labels().get(key).cloned().unwrap_or_default();
            format!("{}/{}", label(LABEL_RUN_INDEX), label(LABEL_ITEM))
        },
        first_seen: seq,
        finished: None,
        deleted: false,
    });
    if record.finished.is_none()
        && let Some(succeeded) = job_outcome(job)
    {
        record.finished = Some((seq, succeeded));
    }
    record.deleted |= deleted || job.metadata.deletion_timestamp.is_some();
}

fn record_pod(pods: &mut BTreeMap<String, (String, bool)>, pod: &Pod, deleted: bool) {
    let Some(uid) = pod.uid() else { return };
    let owner = pod
        .owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| o.uid.clone())
        .unwrap_or_default();
    let entry = pods.entry(uid).or_insert((owner, false));
    entry.1 |= deleted;
}

/// What a workflow of a [`Shape`] must end as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Completed, every step executed.
    Completed,
    /// Failed with the message naming this step; the listed steps never got a Job.
    Failed {
        step: String,
        never_started: Vec<String>,
    },
}

/// Workflow shapes for the reliability tests, each with the outcome it must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// a -> b -> c -> d.
    Chain,
    /// a -> (b, c) -> d.
    Diamond,
    /// a -> (b1..b6) -> z.
    FanOutIn,
    /// Three unrelated steps.
    Independent,
    /// a -> bad (exits 1) -> after: Failed naming `bad`; `after` never starts.
    Failing,
    /// a -> slow (sleeps past its 1 s timeout) -> after: Failed naming `slow`.
    TimingOut,
}

impl Shape {
    pub const ALL: [Shape; 6] = [
        Shape::Chain,
        Shape::Diamond,
        Shape::FanOutIn,
        Shape::Independent,
        Shape::Failing,
        Shape::TimingOut,
    ];

    /// The workflow `name` of this shape whose steps each take about `step_secs` seconds.
    pub fn build(self, name: &str, step_secs: &str) -> (WorkFlowBuilder, Expected) {
        let sleep = |w: WorkFlowBuilder, step: &str, deps: &[&str]| {
            w.step(step, deps)
                .command(&["sh", "-c", &format!("echo {step}; sleep {step_secs}")])
        };
        let w = WorkFlow::test(name);
        match self {
            Shape::Chain => {
                let w = sleep(w, "a", &[]);
                let w = sleep(w, "b", &["a"]);
                let w = sleep(w, "c", &["b"]);
                (sleep(w, "d", &["c"]), Expected::Completed)
            }
            Shape::Diamond => {
                let w = sleep(w, "a", &[]);
                let w = sleep(w, "b", &["a"]);
                let w = sleep(w, "c", &["a"]);
                (sleep(w, "d", &["b", "c"]), Expected::Completed)
            }
            Shape::FanOutIn => {
                let mut w = sleep(w, "a", &[]);
                let middle: Vec<String> = (1..=6).map(|i| format!("b{i}")).collect();
                for step in &middle {
                    w = sleep(w, step, &["a"]);
                }
                let deps: Vec<&str> = middle.iter().map(String::as_str).collect();
                (sleep(w, "z", &deps), Expected::Completed)
            }
            Shape::Independent => {
                let w = sleep(w, "x", &[]);
                let w = sleep(w, "y", &[]);
                (sleep(w, "z", &[]), Expected::Completed)
            }
            Shape::Failing => {
                let w = sleep(w, "a", &[]);
                let w = w
                    .step("bad", &["a"])
                    .command(&["sh", "-c", "echo failing; exit 3"]);
                (
                    sleep(w, "after", &["bad"]),
                    Expected::Failed {
                        step: "bad".into(),
                        never_started: vec!["after".into()],
                    },
                )
            }
            Shape::TimingOut => {
                let w = sleep(w, "a", &[]);
                let w = w.step("slow", &["a"]).command(&["sleep", "30"]).timeout(1);
                (
                    sleep(w, "after", &["slow"]),
                    Expected::Failed {
                        step: "slow".into(),
                        never_started: vec!["after".into()],
                    },
                )
            }
        }
    }
}

/// Checks that `workflow` ended as `expected` (and, through the recorder, that the steps that
/// must never start got no Job). Returns a description of what is wrong, if anything.
pub fn check_outcome(
    workflow: &WorkFlow,
    expected: &Expected,
    recorder: &JobRecorder,
) -> Option<String> {
    let name = workflow.name_any();
    let all: BTreeSet<String> = workflow
        .spec
        .containers
        .iter()
        .map(|s| s.step_name.clone())
        .collect();
    match expected {
        Expected::Completed => {
            if phase(workflow) != Some(Phase::Completed) || executed(workflow) != all {
                return Some(format!(
                    "{name}: expected Completed with every step executed; {}",
                    describe_status(workflow)
                ));
            }
        }
        Expected::Failed {
            step,
            never_started,
        } => {
            let text = message(workflow);
            if phase(workflow) != Some(Phase::Failed) || !text.contains(&format!("step {step} ")) {
                return Some(format!(
                    "{name}: expected Failed naming step {step}; {}",
                    describe_status(workflow)
                ));
            }
            for never in never_started {
                if !recorder.jobs_of(&name, never).is_empty() {
                    return Some(format!("{name}: step {never} started after {step} failed"));
                }
            }
        }
    }
    None
}
