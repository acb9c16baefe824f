//! Test support shared by every crate's tests in this workspace (the `testing` feature): waiting
//! for a condition with a deadline, a started control plane, and the real clients the
//! conformance tests drive it with (`kubectl`, Python with the official `kubernetes` client).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{DevCluster, DevClusterOptions};

/// Polls `check` until it returns `Some`, panicking after `deadline` with `what`. For conditions
/// only the API (or the machine) can tell: a watch is better where one fits.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A control plane with default options; panics if it cannot start.
pub async fn start() -> DevCluster {
    DevCluster::start(DevClusterOptions::default())
        .await
        .expect("the devcluster starts")
}

/// The environment the tests run kubectl with: its garbage collector off (`GOGC=off`). A kubectl
/// run lives for tens of milliseconds, and collecting its heap took about a third of its user
/// CPU (`kubectl version --client` twenty times: 0.56-0.63 s with the collector, 0.38-0.48 s
/// without); the tests start kubectl about 1,200 times.
pub const KUBECTL_ENV: [(&str, &str); 1] = [("GOGC", "off")];

/// The real clients the conformance tests drive the cluster with.
pub struct Tools {
    pub kubectl: PathBuf,
    pub python: PathBuf,
}

/// `.venv/bin/kubectl` and `.venv/bin/python` at the workspace root, installed by
/// `scripts/install-test-tools.sh` on first use. `None` (after printing why) only when this
/// machine has no Python to install them with; any other failure to install them fails the test.
pub fn require_tools(test: &str) -> Option<&'static Tools> {
    match tools() {
        Ok(tools) => Some(tools),
        Err(Missing::NoPython(reason)) => {
            println!("SKIPPED {test}: {reason}");
            eprintln!("SKIPPED {test}: {reason}");
            None
        }
        Err(Missing::InstallFailed(reason)) => panic!("{reason}"),
    }
}

#[derive(Debug, Clone)]
enum Missing {
    NoPython(String),
    InstallFailed(String),
}

/// The workspace root: the nearest directory above this crate that holds the install script.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("scripts/install-test-tools.sh").exists())
        .expect("scripts/install-test-tools.sh above the kube-devcluster crate")
        .to_path_buf()
}

fn tools() -> Result<&'static Tools, Missing> {
    static TOOLS: OnceLock<Result<Tools, Missing>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let root = workspace_root();
            let venv = root.join(".venv/bin");
            let tools = Tools {
                kubectl: venv.join("kubectl"),
                python: venv.join("python"),
            };
            let ready = |t: &Tools| {
                t.kubectl.exists()
                    && std::process::Command::new(&t.python)
                        .args(["-c", "import kubernetes"])
                        .output()
                        .is_ok_and(|o| o.status.success())
            };
            if ready(&tools) {
                return Ok(tools);
            }
            let python_present = std::process::Command::new("python3")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !python_present {
                return Err(Missing::NoPython(
                    "python3 is not installed, so kubectl and the Python client cannot be installed into .venv/".into(),
                ));
            }
            let status = std::process::Command::new("bash")
                .arg(root.join("scripts/install-test-tools.sh"))
                .status()
                .map_err(|e| {
                    Missing::InstallFailed(format!("cannot run scripts/install-test-tools.sh: {e}"))
                })?;
            if status.success() && ready(&tools) {
                Ok(tools)
            } else {
                Err(Missing::InstallFailed(format!(
                    "scripts/install-test-tools.sh failed ({status}); kubectl or the Python client is missing"
                )))
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}
