//! Our operator under test: a tokio task or an OS process, stoppable, killable, restartable.

use super::*;

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

/// [`operator`] on a control plane with RBAC ([`rbac_cluster`]): step pods act as their
/// service account, with what Roles bound to it allow; the operator is the admin.
#[fixture]
pub async fn rbac_operator(#[future] rbac_namespace: Namespace) -> Operator {
    Operator::start_new(rbac_namespace.await, false, Vec::new())
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

    /// The operator as a tokio task for `ns`, as [`operator`] starts it: for a namespace the
    /// test made itself (on a second control plane, say).
    pub fn task(ns: Namespace) -> Operator {
        Operator::start_new(ns, false, Vec::new())
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

    /// Replica `index` of an operator sharing the work by `shards` (`run --shards`): identity
    /// `replica-<index>`, its Leases in `ns` lasting `lease_seconds`, `/metrics` served on the
    /// address returned (a port free when asked), and `extra` arguments.
    ///
    /// # Panics
    /// On a real cluster, whose namespace each replica's handle would delete.
    pub fn shard_replica(
        ns: &Namespace,
        index: usize,
        shards: u32,
        lease_seconds: u32,
        extra: &[&str],
    ) -> (Operator, std::net::SocketAddr) {
        assert!(
            ns.cluster.dev.is_some(),
            "shard_replica: the embedded control plane only"
        );
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port for /metrics");
        let handle = Namespace {
            cluster: ns.cluster.clone(),
            name: ns.name.clone(),
        };
        let args = [
            "--shards",
            &shards.to_string(),
            "--leader-election-namespace",
            &ns.name,
            "--lease-duration",
            &lease_seconds.to_string(),
            "--leader-election-identity",
            &format!("replica-{index}"),
            "--metrics-addr",
            &metrics.to_string(),
        ];
        let args: Vec<&str> = args.into_iter().chain(extra.iter().copied()).collect();
        (Operator::process_with_args(handle, &args), metrics)
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
