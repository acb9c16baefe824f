//! The embedded control plane's controllers, through the Kubernetes API (kube-rs): the job
//! controller, the kubelet that runs pods as local processes, and the garbage collector.
//! Each test gets a fresh control plane and namespace; waits are watches or short polls with a
//! deadline, never fixed sleeps. Process checks read `/proc`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition, conditions};
use kube::{Client, Resource, ResourceExt};
use kube_devcluster::PodMode;
use kube_devcluster::parts::{ApiState, Controllers, create_hook, router, spawn_controllers};
use kube_devcluster::resources::Registry;
use kube_devcluster::store::Store;
use kube_devcluster::testing::eventually;
use rstest::{fixture, rstest};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{alive, read_pids, running_marker};

/// How long any one wait may take.
const WAIT: Duration = Duration::from_secs(10);

/// A control plane with the controllers, served over HTTP, and a fresh namespace.
struct TestCluster {
    client: Client,
    namespace: String,
    controllers: Option<Controllers>,
    shutdown: CancellationToken,
}

impl TestCluster {
    async fn start(pods: PodMode) -> Self {
        let store = Store::default();
        let registry = Registry::with_builtins();
        let shutdown = CancellationToken::new();
        let controllers =
            spawn_controllers(store.clone(), registry.clone(), pods, shutdown.clone());
        // Retries in moments (Kubernetes' own back-off is 10 s doubling).
        controllers.set_job_backoff(kube_devcluster::jobs::JobBackoff::FAST);
        // A container restarted in place (`OnFailure`) too: the kubelet's back-off is 10 s on.
        controllers.set_restart_backoff(kube_devcluster::RestartBackoff::FAST);
        let mut state = ApiState::new(store, registry, shutdown.clone());
        state.logs = Some(controllers.logs());
        state.on_create = Some(create_hook());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, router(state))
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
                .unwrap();
        });
        let client = kube_devcluster::client_for(&url).unwrap();
        let namespace = format!("test-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        Self {
            client,
            namespace,
            controllers: Some(controllers),
            shutdown,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn create_job(&self, job: &JobBuilder) -> Job {
        self.api::<Job>()
            .create(&PostParams::default(), &job.build())
            .await
            .unwrap()
    }

    /// The pods of a Job, by its name label.
    async fn pods_of(&self, job: &str) -> Vec<Pod> {
        self.api::<Pod>()
            .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
            .await
            .unwrap()
            .items
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[fixture]
async fn cluster() -> TestCluster {
    TestCluster::start(PodMode::Real).await
}

/// A Job with one container (`restartPolicy: Never` unless set).
#[derive(Clone)]
struct JobBuilder {
    name: String,
    command: Option<Vec<String>>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    restart_policy: &'static str,
    spec: serde_json::Map<String, serde_json::Value>,
}

impl JobBuilder {
    fn new(name: &str, command: &[&str]) -> Self {
        Self {
            name: name.into(),
            command: Some(command.iter().map(|s| s.to_string()).collect()),
            args: Vec::new(),
            env: Vec::new(),
            restart_policy: "Never",
            spec: serde_json::Map::new(),
        }
    }

    /// A container without `command`: the image's entrypoint.
    fn entrypoint(name: &str) -> Self {
        Self {
            command: None,
            ..Self::new(name, &[])
        }
    }

    fn args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    fn restart_policy(mut self, policy: &'static str) -> Self {
        self.restart_policy = policy;
        self
    }

    fn backoff_limit(self, limit: i32) -> Self {
        self.spec_field("backoffLimit", json!(limit))
    }

    fn active_deadline_seconds(self, seconds: i64) -> Self {
        self.spec_field("activeDeadlineSeconds", json!(seconds))
    }

    fn suspend(self, suspend: bool) -> Self {
        self.spec_field("suspend", json!(suspend))
    }

    fn ttl_seconds_after_finished(self, seconds: i32) -> Self {
        self.spec_field("ttlSecondsAfterFinished", json!(seconds))
    }

    fn spec_field(mut self, field: &str, value: serde_json::Value) -> Self {
        self.spec.insert(field.into(), value);
        self
    }

    fn build(&self) -> Job {
        let mut container = json!({"name": "main", "image": "busybox:1.36"});
        if let Some(command) = &self.command {
            container["command"] = json!(command);
        }
        if !self.args.is_empty() {
            container["args"] = json!(self.args);
        }
        if !self.env.is_empty() {
            container["env"] = self
                .env
                .iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
        }
        let mut spec = self.spec.clone();
        spec.insert(
            "template".into(),
            json!({"spec": {"restartPolicy": self.restart_policy, "containers": [container]}}),
        );
        serde_json::from_value(json!({"metadata": {"name": self.name}, "spec": spec})).unwrap()
    }
}

/// Waits (watching) until `condition` holds for the named object; returns it.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, condition: impl Condition<K>) -> K
where
    K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + Resource + 'static,
{
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, condition))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap()
        .unwrap_or_else(|| panic!("{name} is gone while waiting for {what}"))
}

/// Waits (watching) until the named object is gone.
async fn wait_gone<K>(api: &Api<K>, obj: &K)
where
    K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + Resource + 'static,
{
    let uid = obj.uid().unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), &obj.name_any(), conditions::is_deleted(&uid)),
    )
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {} to go", obj.name_any()))
    .unwrap();
}

/// A Job condition of this type with status "True".
fn job_condition(type_: &'static str) -> impl Condition<Job> {
    move |job: Option<&Job>| condition_of(job, type_).is_some()
}

fn condition_of<'a>(
    job: Option<&'a Job>,
    type_: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job?.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

fn condition_types(job: &Job) -> Vec<String> {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|c| c.iter().map(|c| c.type_.clone()).collect())
        .unwrap_or_default()
}

/// `sh` that records its own pid and a child's in `$PIDS`, then waits on the child forever.
/// (`$$$$`: Kubernetes turns `$$` into `$` before the shell sees it.)
const RECORD_PIDS_AND_SLEEP: &str =
    "echo $$$$ > \"$PIDS\"; sleep 1000 & echo $! >> \"$PIDS\"; wait";

fn terminated(pod: &Pod) -> &k8s_openapi::api::core::v1::ContainerStateTerminated {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.first())
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .expect("a terminated container")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

#[rstest]
#[tokio::test]
async fn sleep_one_completes_in_about_a_second(#[future(awt)] cluster: TestCluster) {
    let started = Instant::now();
    let created = cluster
        .create_job(&JobBuilder::new("sleepy", &["sleep", "1"]))
        .await;
    let job = wait_for(
        &cluster.api(),
        "sleepy",
        "Complete",
        job_condition("Complete"),
    )
    .await;
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");

    let status = job.status.as_ref().unwrap();
    assert_eq!(status.succeeded, Some(1));
    assert_eq!(status.active, None);
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(0));
    assert!(status.start_time.is_some());
    assert!(status.completion_time.is_some());
    assert_eq!(condition_types(&job), ["SuccessCriteriaMet", "Complete"]);
    let complete = condition_of(Some(&job), "Complete").unwrap();
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(
        complete.message.as_deref(),
        Some("Reached expected number of succeeded pods")
    );
    assert!(complete.last_probe_time.is_some() && complete.last_transition_time.is_some());

    let pods = cluster.pods_of("sleepy").await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    let name = pod.name_any();
    let suffix = name.strip_prefix("sleepy-").expect("named after the job");
    assert_eq!(suffix.len(), 5, "{name}");
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), &owner.uid),
        ("Job", "sleepy", created.metadata.uid.as_ref().unwrap())
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(
        pod.labels().get("batch.kubernetes.io/controller-uid"),
        created.metadata.uid.as_ref()
    );
    assert_eq!(phase(pod), "Succeeded");
    let terminated = terminated(pod);
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(terminated.reason.as_deref(), Some("Completed"));
    assert!(terminated.started_at.is_some() && terminated.finished_at.is_some());
}

#[rstest]
#[tokio::test]
async fn failing_command_fails_the_job(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(&JobBuilder::new("fails", &["sh", "-c", "exit 3"]).backoff_limit(0))
        .await;
    let job = wait_for(&cluster.api(), "fails", "Failed", job_condition("Failed")).await;
    assert_eq!(condition_types(&job), ["FailureTarget", "Failed"]);
    let failed = condition_of(Some(&job), "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        failed.message.as_deref(),
        Some("Job has reached the specified backoff limit")
    );
    let status = job.status.unwrap();
    assert_eq!(status.failed, Some(1));
    assert_eq!(status.completion_time, None);
    let pods = cluster.pods_of("fails").await;
    assert_eq!(pods.len(), 1);
    assert_eq!(phase(&pods[0]), "Failed");
    assert_eq!(terminated(&pods[0]).exit_code, 3);
    assert_eq!(terminated(&pods[0]).reason.as_deref(), Some("Error"));
}

#[rstest]
#[tokio::test]
async fn unknown_command_fails_like_a_container_that_cannot_start(
    #[future(awt)] cluster: TestCluster,
) {
    cluster
        .create_job(&JobBuilder::new("unknown", &["no-such-command-anywhere"]).backoff_limit(0))
        .await;
    let job = wait_for(&cluster.api(), "unknown", "Failed", job_condition("Failed")).await;
    assert_eq!(
        condition_of(Some(&job), "Failed")
            .unwrap()
            .reason
            .as_deref(),
        Some("BackoffLimitExceeded")
    );
    let pods = cluster.pods_of("unknown").await;
    assert_eq!(phase(&pods[0]), "Failed");
    let terminated = terminated(&pods[0]);
    assert_eq!(terminated.exit_code, 128);
    assert_eq!(terminated.reason.as_deref(), Some("StartError"));
    assert!(
        terminated
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("no-such-command-anywhere"),
        "{terminated:?}"
    );
}

#[rstest]
#[tokio::test]
async fn container_without_command_stands_for_the_entrypoint_and_succeeds(
    #[future(awt)] cluster: TestCluster,
) {
    cluster.create_job(&JobBuilder::entrypoint("image")).await;
    let job = wait_for(
        &cluster.api(),
        "image",
        "Complete",
        job_condition("Complete"),
    )
    .await;
    assert_eq!(job.status.unwrap().succeeded, Some(1));
}

#[rstest]
#[tokio::test]
async fn active_deadline_kills_the_pod_and_reports_deadline_exceeded(
    #[future(awt)] cluster: TestCluster,
) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let started = Instant::now();
    cluster
        .create_job(
            &JobBuilder::new("slow", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap())
                .active_deadline_seconds(1),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let job = wait_for(&cluster.api(), "slow", "Failed", job_condition("Failed")).await;
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(condition_types(&job), ["FailureTarget", "Failed"]);
    let failed = condition_of(Some(&job), "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        failed.message.as_deref(),
        Some("Job was active longer than specified deadline")
    );
    let status = job.status.unwrap();
    assert_eq!(status.failed, Some(1));
    assert_eq!(status.active, None);
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
    // The pod is deleted before the Job is marked failed.
    assert!(cluster.pods_of("slow").await.is_empty());
}

#[rstest]
#[tokio::test]
async fn shortening_the_deadline_of_a_running_job_takes_effect(
    #[future(awt)] cluster: TestCluster,
) {
    cluster
        .create_job(&JobBuilder::new("patient", &["sleep", "1000"]).active_deadline_seconds(3600))
        .await;
    let jobs: Api<Job> = cluster.api();
    wait_for(&jobs, "patient", "an active pod", |job: Option<&Job>| {
        job.and_then(|j| j.status.as_ref()?.active) == Some(1)
    })
    .await;
    jobs.patch(
        "patient",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 1}})),
    )
    .await
    .unwrap();
    let job = wait_for(&jobs, "patient", "Failed", job_condition("Failed")).await;
    assert_eq!(
        condition_of(Some(&job), "Failed")
            .unwrap()
            .reason
            .as_deref(),
        Some("DeadlineExceeded")
    );
}

#[rstest]
#[tokio::test]
async fn backoff_limit_two_gives_three_pods_then_failed(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(&JobBuilder::new("retries", &["sh", "-c", "exit 1"]).backoff_limit(2))
        .await;
    let job = wait_for(&cluster.api(), "retries", "Failed", job_condition("Failed")).await;
    assert_eq!(
        condition_of(Some(&job), "Failed")
            .unwrap()
            .reason
            .as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(job.status.unwrap().failed, Some(3));
    let pods = cluster.pods_of("retries").await;
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| phase(p) == "Failed"));
}

#[rstest]
#[tokio::test]
async fn on_failure_restarts_count_against_the_backoff_limit(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(
            &JobBuilder::new("restarts", &["sh", "-c", "exit 1"])
                .restart_policy("OnFailure")
                .backoff_limit(2),
        )
        .await;
    let job = wait_for(
        &cluster.api(),
        "restarts",
        "Failed",
        job_condition("Failed"),
    )
    .await;
    assert_eq!(
        condition_of(Some(&job), "Failed")
            .unwrap()
            .reason
            .as_deref(),
        Some("BackoffLimitExceeded")
    );
    // One pod, restarted in place (without restarts, three pods would have failed), stopped
    // and counted as failed once the Job fails.
    assert_eq!(job.status.unwrap().failed, Some(1));
    assert!(cluster.pods_of("restarts").await.is_empty());
}

#[rstest]
#[tokio::test]
async fn deleting_a_running_job_leaves_no_process_behind(#[future(awt)] cluster: TestCluster) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let job = cluster
        .create_job(
            &JobBuilder::new("doomed", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    assert!(pids.iter().all(|&pid| alive(pid)));
    let pod = cluster.pods_of("doomed").await.remove(0);
    cluster
        .api::<Job>()
        .delete("doomed", &DeleteParams::background())
        .await
        .unwrap();
    wait_gone(&cluster.api(), &job).await;
    wait_gone(&cluster.api(), &pod).await;
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
}

#[rstest]
#[tokio::test]
async fn dropping_the_controllers_kills_running_processes(#[future(awt)] cluster: TestCluster) {
    let mut cluster = cluster;
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    cluster
        .create_job(
            &JobBuilder::new("abandoned", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    drop(cluster.controllers.take());
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
}

#[rstest]
#[tokio::test]
async fn env_and_args_reach_the_process_without_a_shell(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(
            &JobBuilder::new("printer", &["printf", "%s|%s|%s|%s\\n"])
                .args(&["$(GREETING)", "two words", "$HOME", "$$(GREETING)"])
                .env("GREETING", "hello"),
        )
        .await;
    wait_for(
        &cluster.api(),
        "printer",
        "Complete",
        job_condition("Complete"),
    )
    .await;
    let pod = cluster.pods_of("printer").await.remove(0);
    let logs = cluster
        .api::<Pod>()
        .logs(&pod.name_any(), &LogParams::default())
        .await
        .unwrap();
    // `$(GREETING)` is expanded by Kubernetes; `$HOME` would need a shell, so it stays.
    assert_eq!(logs, "hello|two words|$HOME|$(GREETING)\n");
}

#[rstest]
#[tokio::test]
async fn pods_run_in_a_scratch_directory_that_is_removed_afterwards(
    #[future(awt)] cluster: TestCluster,
) {
    cluster
        .create_job(
            &JobBuilder::new(
                "where",
                &["sh", "-c", "pwd; touch made-here; echo \"$GREETING\""],
            )
            .env("GREETING", "hi"),
        )
        .await;
    wait_for(
        &cluster.api(),
        "where",
        "Complete",
        job_condition("Complete"),
    )
    .await;
    let pod = cluster.pods_of("where").await.remove(0);
    let logs = cluster
        .api::<Pod>()
        .logs(&pod.name_any(), &LogParams::default())
        .await
        .unwrap();
    let mut lines = logs.lines();
    let dir = lines.next().unwrap();
    assert_eq!(lines.next(), Some("hi"));
    assert_ne!(Path::new(dir), std::env::current_dir().unwrap());
    assert!(!Path::new(dir).exists(), "{dir} is left behind");
}

#[rstest]
#[tokio::test]
async fn logs_keep_stdout_and_stderr(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(
            &JobBuilder::new("chatty", &["sh", "-c", "echo out; echo err >&2; exit 2"])
                .backoff_limit(0),
        )
        .await;
    wait_for(&cluster.api(), "chatty", "Failed", job_condition("Failed")).await;
    let pod = cluster.pods_of("chatty").await.remove(0);
    let logs = cluster
        .api::<Pod>()
        .logs(&pod.name_any(), &LogParams::default())
        .await
        .unwrap();
    let mut lines: Vec<&str> = logs.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["err", "out"]);
    let controllers = cluster.controllers.as_ref().unwrap();
    assert_eq!(
        controllers.pod_logs(&cluster.namespace, &pod.name_any()),
        Some(logs)
    );
}

#[rstest]
#[tokio::test]
async fn suspended_job_creates_no_pods_until_resumed(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(&JobBuilder::new("later", &["true"]).suspend(true))
        .await;
    let jobs: Api<Job> = cluster.api();
    let job = wait_for(&jobs, "later", "Suspended", job_condition("Suspended")).await;
    let suspended = condition_of(Some(&job), "Suspended").unwrap();
    assert_eq!(suspended.reason.as_deref(), Some("JobSuspended"));
    assert!(job.status.as_ref().unwrap().start_time.is_none());
    assert!(cluster.pods_of("later").await.is_empty());

    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    let job = wait_for(&jobs, "later", "Complete", job_condition("Complete")).await;
    let resumed = job
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(
        (resumed.status.as_str(), resumed.reason.as_deref()),
        ("False", Some("JobResumed"))
    );
    assert!(job.status.unwrap().start_time.is_some());
    assert_eq!(cluster.pods_of("later").await.len(), 1);
}

#[rstest]
#[tokio::test]
async fn suspending_a_running_job_removes_its_pod_and_process(#[future(awt)] cluster: TestCluster) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    cluster
        .create_job(
            &JobBuilder::new("paused", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let jobs: Api<Job> = cluster.api();
    jobs.patch(
        "paused",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    let job = wait_for(&jobs, "paused", "Suspended", job_condition("Suspended")).await;
    let status = job.status.unwrap();
    assert_eq!(status.active, None);
    // Pods removed for a suspension are not failures.
    assert_eq!(status.failed, None);
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
    assert!(cluster.pods_of("paused").await.is_empty());
}

#[rstest]
#[tokio::test]
async fn ttl_after_finished_deletes_the_job_and_its_pods(#[future(awt)] cluster: TestCluster) {
    let job = cluster
        .create_job(&JobBuilder::new("brief", &["true"]).ttl_seconds_after_finished(1))
        .await;
    let jobs: Api<Job> = cluster.api();
    let finished = wait_for(&jobs, "brief", "Complete", job_condition("Complete")).await;
    let done_at = Instant::now();
    let pod = cluster.pods_of("brief").await.remove(0);
    assert!(finished.status.unwrap().completion_time.is_some());
    wait_gone(&jobs, &job).await;
    let kept = done_at.elapsed();
    assert!(kept >= Duration::from_millis(800), "deleted after {kept:?}");
    wait_gone(&cluster.api(), &pod).await;
}

/// Deleting a finished Job's pods (what an operator's pod clean-up does) leaves the Job as it
/// is: the real controller returns early for a finished Job (pkg/controller/job/job_controller.go,
/// `syncJob`: "if job was finished previously, we don't want to redo the termination"), so it
/// creates no pod and its status keeps its counts and conditions.
#[rstest]
#[case::complete("done", &["true"], "Complete")]
#[case::failed("broke", &["sh", "-c", "exit 3"], "Failed")]
#[tokio::test]
async fn deleting_a_finished_jobs_pods_makes_no_new_pod_and_keeps_its_status(
    #[case] name: &str,
    #[case] command: &[&str],
    #[case] ended: &'static str,
    #[future(awt)] cluster: TestCluster,
) {
    cluster
        .create_job(&JobBuilder::new(name, command).backoff_limit(0))
        .await;
    let jobs: Api<Job> = cluster.api();
    let finished = wait_for(&jobs, name, ended, job_condition(ended)).await;
    let pods: Api<Pod> = cluster.api();
    let selector = format!("batch.kubernetes.io/job-name={name}");
    let deleted = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
        .unwrap();
    assert_eq!(deleted.left().map(|l| l.items.len()), Some(1));
    eventually("the pod gone", WAIT, || async {
        cluster.pods_of(name).await.is_empty().then_some(())
    })
    .await;
    // The controller saw the pod go (its watch is in this process) and had its chance to act:
    // a pod it created would show in a watch from now on.
    use futures::TryStreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let mut watched =
        Box::pin(watcher(pods, watcher::Config::default().labels(&selector)).applied_objects());
    let appeared = tokio::time::timeout(Duration::from_secs(2), watched.try_next()).await;
    assert!(appeared.is_err(), "a pod appeared: {appeared:?}");
    let now = jobs.get(name).await.unwrap();
    assert_eq!(now.status, finished.status);
    assert_eq!(
        now.metadata.resource_version,
        finished.metadata.resource_version
    );
}

fn config_map(name: &str, owners: &[(&ConfigMap, bool)], finalizers: &[&str]) -> ConfigMap {
    let refs: Vec<_> = owners
        .iter()
        .map(|(owner, block)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(),
                   "uid": owner.uid().unwrap(), "blockOwnerDeletion": block})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers},
        "data": {"k": "v"}
    }))
    .unwrap()
}

async fn remove_finalizers<K>(api: &Api<K>, name: &str)
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + Resource,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[rstest]
#[tokio::test]
async fn background_deletion_deletes_dependents_after_their_owner(
    #[future(awt)] cluster: TestCluster,
) {
    let api: Api<ConfigMap> = cluster.api();
    let pp = PostParams::default();
    let owner = api
        .create(&pp, &config_map("owner", &[], &[]))
        .await
        .unwrap();
    let dependent = api
        .create(&pp, &config_map("dependent", &[(&owner, true)], &[]))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(api.get_opt("owner").await.unwrap().is_none());
    wait_gone(&api, &dependent).await;
}

#[rstest]
#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents(#[future(awt)] cluster: TestCluster) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let job = cluster
        .create_job(
            &JobBuilder::new("careful", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let pod = cluster.pods_of("careful").await.remove(0);
    // A second dependent whose own finalizer holds it, and so holds the Job.
    let holder: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "holder", "finalizers": ["test.example.com/hold"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "careful",
                                 "uid": job.uid().unwrap(), "blockOwnerDeletion": true}]}
    }))
    .unwrap();
    let cms: Api<ConfigMap> = cluster.api();
    cms.create(&PostParams::default(), &holder).await.unwrap();

    let jobs: Api<Job> = cluster.api();
    jobs.delete("careful", &DeleteParams::foreground())
        .await
        .unwrap();
    wait_gone(&cluster.api(), &pod).await;
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
    wait_for(
        &cms,
        "holder",
        "the holder marked deleted",
        |cm: Option<&ConfigMap>| cm.is_some_and(|cm| cm.metadata.deletion_timestamp.is_some()),
    )
    .await;
    let waiting = jobs.get("careful").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .iter()
            .any(|f| f == "foregroundDeletion")
    );

    remove_finalizers(&cms, "holder").await;
    wait_gone(&jobs, &job).await;
}

#[rstest]
#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_owner_reference(
    #[future(awt)] cluster: TestCluster,
) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let job = cluster
        .create_job(
            &JobBuilder::new("parent", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let pod = cluster.pods_of("parent").await.remove(0);
    let jobs: Api<Job> = cluster.api();
    // No propagation policy: a Job's default is to orphan, as on a real API server.
    jobs.delete("parent", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&jobs, &job).await;
    let pods: Api<Pod> = cluster.api();
    let orphan = pods.get(&pod.name_any()).await.unwrap();
    assert!(orphan.owner_references().is_empty());
    assert_eq!(orphan.uid(), pod.uid());
    assert!(
        pids.iter().all(|&pid| alive(pid)),
        "the orphaned pod must keep running"
    );

    pods.delete(&pod.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
}

#[rstest]
#[tokio::test]
async fn object_whose_owner_does_not_exist_is_deleted(#[future(awt)] cluster: TestCluster) {
    let api: Api<ConfigMap> = cluster.api();
    let pp = PostParams::default();
    let ghost: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}}))
    .unwrap();
    let dangling = api
        .create(&pp, &config_map("dangling", &[(&ghost, false)], &[]))
        .await
        .unwrap();
    wait_gone(&api, &dangling).await;

    // With one live owner, only the reference to the missing one goes.
    let live = api
        .create(&pp, &config_map("live", &[], &[]))
        .await
        .unwrap();
    api.create(
        &pp,
        &config_map("half", &[(&live, false), (&ghost, false)], &[]),
    )
    .await
    .unwrap();
    let half = wait_for(
        &api,
        "half",
        "the dangling reference removed",
        |cm: Option<&ConfigMap>| cm.is_some_and(|cm| cm.owner_references().len() == 1),
    )
    .await;
    assert_eq!(half.owner_references()[0].uid, live.uid().unwrap());
}

#[rstest]
#[tokio::test]
async fn namespace_deletion_removes_its_contents_then_the_namespace(
    #[future(awt)] cluster: TestCluster,
) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    cluster
        .create_job(
            &JobBuilder::new("inside", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let job = cluster.api::<Job>().get("inside").await.unwrap();
    let pod = cluster.pods_of("inside").await.remove(0);
    let cms: Api<ConfigMap> = cluster.api();
    cms.create(
        &PostParams::default(),
        &config_map("held", &[], &["test.example.com/hold"]),
    )
    .await
    .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let ns = namespaces.get(&cluster.namespace).await.unwrap();
    assert_eq!(
        ns.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Active")
    );
    namespaces
        .delete(&cluster.namespace, &DeleteParams::background())
        .await
        .unwrap();
    let terminating = namespaces.get(&cluster.namespace).await.unwrap();
    assert_eq!(
        terminating.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
    wait_for(
        &cms,
        "held",
        "the held object marked deleted",
        |cm: Option<&ConfigMap>| cm.is_some_and(|cm| cm.metadata.deletion_timestamp.is_some()),
    )
    .await;
    wait_gone(&cluster.api(), &job).await;
    wait_gone(&cluster.api(), &pod).await;
    // The held object holds the namespace.
    assert!(
        namespaces
            .get_opt(&cluster.namespace)
            .await
            .unwrap()
            .is_some()
    );
    let refused = cms
        .create(&PostParams::default(), &config_map("late", &[], &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 403),
        "{refused:?}"
    );

    remove_finalizers(&cms, "held").await;
    wait_gone(&namespaces, &ns).await;
}

#[tokio::test]
async fn simulated_pods_succeed_without_a_process() {
    for after in [Duration::ZERO, Duration::from_millis(200)] {
        let cluster = TestCluster::start(PodMode::Simulated(after)).await;
        let started = Instant::now();
        cluster
            .create_job(&JobBuilder::new("pretend", &["sleep", "1000"]))
            .await;
        wait_for(
            &cluster.api(),
            "pretend",
            "Complete",
            job_condition("Complete"),
        )
        .await;
        assert!(started.elapsed() >= after);
        assert!(started.elapsed() < Duration::from_secs(5));
        let pod = cluster.pods_of("pretend").await.remove(0);
        assert_eq!(phase(&pod), "Succeeded");
        assert_eq!(terminated(&pod).exit_code, 0);
        assert!(
            cluster
                .controllers
                .as_ref()
                .unwrap()
                .running_pids()
                .is_empty(),
            "no process for a simulated pod"
        );
    }
}

#[rstest]
#[tokio::test]
async fn pod_status_reports_running_with_ready_condition(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(&JobBuilder::new("runner", &["sleep", "1000"]))
        .await;
    let jobs: Api<Job> = cluster.api();
    let job = wait_for(&jobs, "runner", "a ready pod", |job: Option<&Job>| {
        job.and_then(|j| j.status.as_ref()?.ready) == Some(1)
    })
    .await;
    assert_eq!(job.status.unwrap().active, Some(1));
    let pod = cluster.pods_of("runner").await.remove(0);
    assert_eq!(phase(&pod), "Running");
    let status = pod.status.unwrap();
    assert!(status.start_time.is_some());
    let container = &status.container_statuses.unwrap()[0];
    assert!(
        container
            .state
            .as_ref()
            .unwrap()
            .running
            .as_ref()
            .unwrap()
            .started_at
            .is_some()
    );
    assert!(container.ready);
    let conditions: BTreeMap<_, _> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(conditions.get("Ready").map(String::as_str), Some("True"));
    assert_eq!(
        conditions.get("PodScheduled").map(String::as_str),
        Some("True")
    );
}

/// The environment variable that makes [`pod_runner_until_killed`] run (in a child process).
const HELPER_PIDS: &str = "DEVCLUSTER_TEST_HELPER_PIDS";

#[tokio::test]
#[ignore = "helper: run in a child process by control_plane_killed_by_sigkill_leaves_no_process_behind"]
async fn pod_runner_until_killed() {
    let pid_file = std::env::var(HELPER_PIDS).expect("run by the parent test");
    let cluster = TestCluster::start(PodMode::Real).await;
    cluster
        .create_job(
            &JobBuilder::new("survivor", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", &pid_file),
        )
        .await;
    // The guarantee starts once the kubelet has the container's process group (it reports the
    // container running after that): a kill in the instant between the spawn and that is the
    // window the kubelet's module doc owns up to, and the pod's command can write its pids in it.
    eventually("the pod to run", WAIT, || async {
        let pods = cluster.pods_of("survivor").await;
        pods.first()
            .is_some_and(|pod| phase(pod) == "Running")
            .then_some(())
    })
    .await;
    std::fs::write(running_marker(Path::new(&pid_file)), "").unwrap();
    // Runs until the parent kills this process.
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn control_plane_killed_by_sigkill_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut control_plane = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "jobs::pod_runner_until_killed",
            "--quiet",
        ])
        .env(HELPER_PIDS, &pid_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pids = read_pids(&pid_file, 2).await;
    eventually("the helper's pod to run", WAIT, || {
        std::future::ready(running_marker(&pid_file).exists().then_some(()))
    })
    .await;
    assert!(pids.iter().all(|&pid| alive(pid)));
    // SIGKILL: no destructor, no shutdown, nothing of the control plane runs after this.
    control_plane.kill().unwrap();
    control_plane.wait().unwrap();
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
}

#[rstest]
#[tokio::test]
async fn deleting_a_running_pod_kills_it_and_the_job_replaces_it(
    #[future(awt)] cluster: TestCluster,
) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    cluster
        .create_job(
            &JobBuilder::new("phoenix", &["sh", "-c", RECORD_PIDS_AND_SLEEP])
                .env("PIDS", pid_file.to_str().unwrap()),
        )
        .await;
    let pids = read_pids(&pid_file, 2).await;
    let first = cluster.pods_of("phoenix").await.remove(0);
    cluster
        .api::<Pod>()
        .delete(&first.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    for pid in pids {
        eventually(&format!("process {pid} to die"), WAIT, || {
            std::future::ready((!alive(pid)).then_some(()))
        })
        .await;
    }
    // A pod removed before it finished counts as failed, and is replaced.
    let job = wait_for(
        &cluster.api::<Job>(),
        "phoenix",
        "a replacement pod",
        |job: Option<&Job>| {
            job.and_then(|j| j.status.as_ref())
                .is_some_and(|s| s.failed == Some(1) && s.active == Some(1))
        },
    )
    .await;
    assert!(condition_of(Some(&job), "Failed").is_none());
    let pods = cluster.pods_of("phoenix").await;
    assert_eq!(pods.len(), 1);
    assert_ne!(pods[0].uid(), first.uid());
}

#[rstest]
#[tokio::test]
async fn completions_and_parallelism_run_pods_side_by_side(#[future(awt)] cluster: TestCluster) {
    cluster
        .create_job(
            &JobBuilder::new("batch", &["sleep", "0.2"])
                .spec_field("completions", json!(3))
                .spec_field("parallelism", json!(2)),
        )
        .await;
    let jobs: Api<Job> = cluster.api();
    wait_for(&jobs, "batch", "two active pods", |job: Option<&Job>| {
        job.and_then(|j| j.status.as_ref()?.active) == Some(2)
    })
    .await;
    let job = wait_for(&jobs, "batch", "Complete", job_condition("Complete")).await;
    assert_eq!(job.status.unwrap().succeeded, Some(3));
    let pods = cluster.pods_of("batch").await;
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| phase(p) == "Succeeded"));
}
