//! A user's kubectl session against `workflow-operator dev`'s pieces: the embedded control plane
//! with the CRD installed by kubectl (from `crd/`) and the operator running, kubectl with a home
//! of its own, and the `workflow-operator` CLI pointed at the cluster.

use std::path::Path;
use std::time::Duration;

use kube_devcluster::DevCluster;
use tokio_util::sync::CancellationToken;
use workflow_operator::controllers::workflow::operator::{self, OperatorOptions};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs kubectl against the cluster; panics with its output unless it succeeds.
pub async fn kubectl(cluster: &DevCluster, bin: &Path, home: &Path, args: &[&str]) -> String {
    expect(kubectl_command(cluster, bin, home, args), true).await
}

fn kubectl_command(
    cluster: &DevCluster,
    bin: &Path,
    home: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(bin);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(args)
        .env("HOME", home)
        .envs(kube_devcluster::testing::KUBECTL_ENV);
    command
}

/// Runs `command` in the repository's root: its standard output when it succeeds and `succeed`,
/// its standard error when it fails and not `succeed`; otherwise panics with both.
async fn expect(mut command: tokio::process::Command, succeed: bool) -> String {
    let output = command
        .current_dir(ROOT)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the command runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.success(),
        succeed,
        "{command:?}:\n{stdout}\n{stderr}"
    );
    if succeed { stdout } else { stderr }
}

/// The cells of the first data row of a `kubectl get` table whose first cell is `name`.
pub fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

/// The embedded control plane with the CRDs installed (by kubectl, from `crd/`) and the operator
/// running, and kubectl's home; `None` where kubectl cannot be had.
pub struct Session {
    pub cluster: DevCluster,
    kubectl: &'static Path,
    home: tempfile::TempDir,
    stop: CancellationToken,
    operator: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Session {
    pub async fn start(test: &str) -> Option<Session> {
        let tools = kube_devcluster::testing::require_tools(test)?;
        let cluster = kube_devcluster::testing::start().await;
        let home = tempfile::tempdir().unwrap();
        kubectl(
            &cluster,
            &tools.kubectl,
            home.path(),
            &["apply", "-f", "crd/"],
        )
        .await;
        kubectl(
            &cluster,
            &tools.kubectl,
            home.path(),
            &[
                "wait",
                "--for=condition=Established",
                "crd/workflows.workflow.crd.com",
                "crd/workflowtemplates.workflow.crd.com",
                "crd/clusterworkflowtemplates.workflow.crd.com",
                "crd/cronworkflows.workflow.crd.com",
                "--timeout=30s",
            ],
        )
        .await;
        let stop = CancellationToken::new();
        let operator = tokio::spawn(operator::run(
            cluster.client(),
            OperatorOptions::default(),
            stop.clone().cancelled_owned(),
        ));
        Some(Session {
            cluster,
            kubectl: &tools.kubectl,
            home,
            stop,
            operator,
        })
    }

    pub async fn k(&self, args: &[&str]) -> String {
        kubectl(&self.cluster, self.kubectl, self.home.path(), args).await
    }

    /// Runs kubectl, which must fail; its standard error.
    pub async fn k_refused(&self, args: &[&str]) -> String {
        let command = kubectl_command(&self.cluster, self.kubectl, self.home.path(), args);
        expect(command, false).await
    }

    /// `workflow-operator ARGS` with the cluster's kubeconfig, and kubectl (which `exec` and
    /// `continue` run) as `KUBECTL`.
    pub fn cli_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"));
        command
            .args(args)
            .env("KUBECONFIG", self.cluster.kubeconfig_path())
            .env("KUBECTL", self.kubectl);
        command
    }

    /// Runs `workflow-operator ARGS` against the cluster, as a user with its kubeconfig would;
    /// its standard output, or a panic with its output unless it succeeds.
    pub async fn cli(&self, args: &[&str]) -> String {
        expect(self.cli_command(args), true).await
    }

    /// Runs `workflow-operator ARGS`, which must fail; its standard error.
    pub async fn cli_refused(&self, args: &[&str]) -> String {
        expect(self.cli_command(args), false).await
    }

    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.operator)
            .await
            .expect("the operator stops")
            .expect("the operator task")
            .expect("the operator ran without error");
    }
}

impl Session {
    /// `kubectl wait --for=condition=Finished wf/NAME` (within a minute).
    pub async fn wait_finished(&self, workflow: &str) {
        self.k(&[
            "wait",
            "--for=condition=Finished",
            &format!("wf/{workflow}"),
            "--timeout=60s",
        ])
        .await;
    }

    /// Waits until `workflow` finished (as [`Session::wait_finished`]) and asserts it ended
    /// `phase`; its `status.message`.
    pub async fn finished_as(&self, workflow: &str, phase: &str) -> String {
        self.wait_finished(workflow).await;
        let message = self.jsonpath(workflow, "{.status.message}").await;
        assert_eq!(
            self.jsonpath(workflow, "{.status.workflow-status}").await,
            phase,
            "{message}"
        );
        message
    }

    /// `kubectl get wf NAME -o jsonpath=PATH`.
    pub async fn jsonpath(&self, workflow: &str, path: &str) -> String {
        self.k(&["get", "wf", workflow, "-o", &format!("jsonpath={path}")])
            .await
    }

    /// Writes `manifest` (YAML) to the file `name` in kubectl's home, as a user would; its path.
    pub fn write_manifest(&self, name: &str, manifest: &str) -> String {
        let file = self.home.path().join(name);
        std::fs::write(&file, manifest).unwrap();
        file.to_str().unwrap().to_owned()
    }

    /// Creates `manifest` (YAML, written to a file as a user would) with `kubectl create -f`.
    pub async fn create(&self, manifest: &str) {
        let file = self.write_manifest("manifest.yaml", manifest);
        self.k(&["create", "-f", &file]).await;
    }
}
