//! The cluster the tests run against (the embedded control plane, or a real one), a fresh
//! namespace per test with its helpers, and [`Gate`].

use super::*;

/// The cluster the tests run against.
pub struct Cluster {
    /// The embedded control plane; `None` on a real cluster.
    pub(crate) dev: Option<DevCluster>,
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
    start_cluster(false).await
}

/// [`cluster`], the embedded control plane with authentication and RBAC
/// (`DevClusterOptions::rbac`): each pod acts as its service account, allowed only what Roles
/// bound to it allow; the tests' and the operator's clients stay the admin. A real cluster has
/// RBAC of its own.
#[fixture]
pub async fn rbac_cluster() -> Arc<Cluster> {
    start_cluster(true).await
}

/// The cluster, the embedded control plane with `rbac` as asked.
async fn start_cluster(rbac: bool) -> Arc<Cluster> {
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
        rbac,
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
    namespace_for_test(cluster.await).await
}

/// [`namespace`] on a cluster with RBAC ([`rbac_cluster`]).
#[fixture]
pub async fn rbac_namespace(#[future] rbac_cluster: Arc<Cluster>) -> Namespace {
    namespace_for_test(rbac_cluster.await).await
}

/// A fresh namespace on `cluster` named after the running test.
async fn namespace_for_test(cluster: Arc<Cluster>) -> Namespace {
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
    namespace_named(cluster, &format!("{base}-{suffix}")).await
}

/// A namespace named `name` on `cluster` (the name of another plane's namespace, as MultiKueue
/// copies a job into the namespace of the same name on a worker).
pub async fn namespace_named(cluster: Arc<Cluster>, name: &str) -> Namespace {
    let object = CoreNamespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([(TEST_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        ..CoreNamespace::default()
    };
    Api::<CoreNamespace>::all(cluster.client())
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    Namespace {
        cluster,
        name: name.to_string(),
    }
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
        self.cli_with_stderr(args).await.0
    }

    /// Runs `workflow-operator ARGS -n NAMESPACE` as [`Namespace::cli`] does; its standard
    /// output and its standard error (what the CLI says to the user besides its result).
    pub async fn cli_with_stderr(&self, args: &[&str]) -> (String, String) {
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
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
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
