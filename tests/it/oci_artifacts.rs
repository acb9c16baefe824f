//! Artifacts in an OCI registry end to end: Debian's `docker-registry` (the CNCF distribution
//! server, installed by `scripts/install-test-tools.sh`) started on a free port over a
//! temporary directory, with basic authentication; a file and a directory passed between steps
//! through it, GC deleting their tags, and wrong credentials or a registry that cannot be
//! reached failing the step naming the registry.

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube_devcluster::testing::eventually;
use support::session::Session;
use workflow_operator::artifacts::oci::{self, OciTarget};

/// The registry's repository the tests push to.
const REPOSITORY: &str = "wf/artifacts";

/// The registry's one user.
const USER: &str = "bot";

/// Its password, and its bcrypt hash for the registry's htpasswd file (a test vector of
/// OpenBSD's bcrypt, as no tool here makes one).
const PASSWORD: &str = "U*U";
const PASSWORD_HASH: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW";

/// A `docker-registry serve` of the test, stopped when dropped.
struct Registry {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts the registry (deletion allowed, [`USER`] its one user) on a free port and waits
    /// until it answers.
    async fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let address = free_address();
        let config = dir.path().join("config.yml");
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_HASH}\n")).unwrap();
        let config_text = format!(
            "version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  \
             delete: {{enabled: true}}\nhttp: {{addr: \"{address}\", secret: test}}\nauth:\n  \
             htpasswd: {{realm: test, path: {}}}\n",
            dir.path().join("data").display(),
            htpasswd.display()
        );
        std::fs::write(&config, config_text).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "starting docker-registry ({error}): install it with \
                     scripts/install-test-tools.sh (apt-get install docker-registry)"
                )
            });
        let registry = Registry {
            child,
            address,
            _dir: dir,
        };
        let url = format!("http://{}/v2/", registry.address);
        eventually("the registry answers", Duration::from_secs(30), || async {
            answers(&url).then_some(())
        })
        .await;
        registry
    }

    /// The tags of the test's repository starting with `start`.
    async fn tags(&self, start: &str) -> Vec<String> {
        let target = OciTarget {
            registry: self.address.clone(),
            repository: REPOSITORY.into(),
            insecure: true,
            credentials: Some((USER.into(), PASSWORD.into())),
        };
        oci::tags(&target, start).await.expect("listing the tags")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A local address nothing listens on (the port the system gave, then let go).
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Whether `url` answers with an HTTP status line.
fn answers(url: &str) -> bool {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://").split('/').next().unwrap();
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return false;
    };
    let request = format!("GET /v2/ HTTP/1.0\r\nHost: {address}\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/")
}

/// The workflow passing a file and a directory from `make` to `use` through the registry at
/// `address`, its credentials in the Secret `reg`.
fn passing(name: &str, address: &str) -> String {
    let spec = format!(
        "  artifactRepository:\n    oci: {{registry: \"{address}\", repository: {REPOSITORY}, insecure: true, credentialsSecret: {{name: reg}}}}\n  artifactGC: {{strategy: OnWorkflowDeletion}}"
    );
    crate::artifacts::passing_manifest(name, &spec)
}

/// A file and a directory pass between steps through the registry, one tag each under the
/// workflow's prefix; `artifacts get` pulls one; deleting the workflow deletes its tags.
#[tokio::test]
async fn a_file_and_a_directory_pass_through_an_oci_registry_and_gc_deletes_their_tags() {
    let Some(session) = Session::start("oci-artifacts").await else {
        return;
    };
    let registry = Registry::start().await;
    secret(&session, USER, PASSWORD).await;
    session.create(&passing("passing", &registry.address)).await;
    session.finished_as("passing", "Completed").await;
    let logs = session.cli(&["logs", "passing", "--step", "use"]).await;
    for line in ["v1.2", "hello", "body{}", "empty kept"] {
        assert!(logs.contains(line), "{line}: {logs}");
    }
    let start = oci::tag_prefix("default/passing");
    let tags = registry.tags(&start).await;
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert!(
        tags.iter()
            .all(|t| t.ends_with("_site") || t.ends_with("_version"))
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("version");
    let out = out.to_str().unwrap();
    (session.cli(&["artifacts", "get", "passing", "make", "version", "-o", out])).await;
    assert_eq!(std::fs::read_to_string(out).unwrap(), "v1.2\n");
    session.k(&["delete", "wf", "passing", "--wait=true"]).await;
    assert_eq!(registry.tags(&start).await, Vec::<String>::new());
    session.stop().await;
}

/// Wrong credentials fail the step saying the registry refused them, naming it and the user,
/// not the password.
#[tokio::test]
async fn wrong_credentials_fail_the_step_naming_the_registry() {
    let Some(session) = Session::start("oci-refused").await else {
        return;
    };
    let registry = Registry::start().await;
    secret(&session, USER, "not-the-password").await;
    session.create(&passing("refused", &registry.address)).await;
    let message = session.finished_as("refused", "Failed").await;
    assert!(message.contains("output artifact"), "{message}");
    assert!(
        message.contains(&registry.address),
        "names the registry: {message}"
    );
    assert!(message.contains("refused the credentials"), "{message}");
    assert!(message.contains(USER), "{message}");
    assert!(!message.contains("not-the-password"), "{message}");
    session.stop().await;
}

/// Creates the Secret `reg` holding `username` and `password`.
async fn secret(session: &Session, username: &str, password: &str) {
    let username = format!("--from-literal=username={username}");
    let password = format!("--from-literal=password={password}");
    (session.k(&["create", "secret", "generic", "reg", &username, &password])).await;
}

/// A registry nothing listens at fails the step that pushes to it, naming the registry.
#[tokio::test]
async fn an_unreachable_registry_fails_the_step_naming_it() {
    let Some(session) = Session::start("oci-unreachable").await else {
        return;
    };
    let nowhere = free_address();
    secret(&session, USER, "not-the-password").await;
    session.create(&passing("nowhere", &nowhere)).await;
    let message = session.finished_as("nowhere", "Failed").await;
    assert!(message.contains("output artifact"), "{message}");
    assert!(message.contains(&nowhere), "names the registry: {message}");
    assert!(!message.contains("not-the-password"), "{message}");
    session.stop().await;
}
