//! `workflow-operator dev` as a user starts it: a process, the lines it prints, a client of its
//! control plane.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A `dev` process and the lines it printed up to the artifact store's.
pub struct Dev {
    child: Child,
    kubeconfig: PathBuf,
    /// The artifact store's line (`artifact store at URL in DIR, ...`).
    pub store_line: String,
}

/// `workflow-operator dev --no-operator --web-addr off EXTRA...`, once it printed the artifact
/// store's line (the last of its start).
pub fn start_dev(extra: &[&str]) -> Dev {
    let child = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["dev", "--no-operator", "--web-addr", "off"])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("dev starts");
    let mut dev = Dev {
        child,
        kubeconfig: PathBuf::new(),
        store_line: String::new(),
    };
    let stdout = dev.child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(path) = line.strip_prefix("export KUBECONFIG=") {
            dev.kubeconfig = PathBuf::from(path);
        }
        if line.starts_with("artifact store at ") {
            assert!(
                !dev.kubeconfig.as_os_str().is_empty(),
                "the kubeconfig line comes first"
            );
            dev.store_line = line;
            return dev;
        }
    }
    panic!("dev exited without printing the artifact store's line");
}

impl Dev {
    /// A client of its control plane, from the kubeconfig it wrote.
    pub async fn client(&self) -> kube::Client {
        self.client_as(None).await
    }

    /// [`Dev::client`] impersonating `user` (`kubectl --as`) when given.
    pub async fn client_as(&self, user: Option<&str>) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let options = kube::config::KubeConfigOptions::default();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        config.auth_info.impersonate = user.map(str::to_string);
        kube::Client::try_from(config).unwrap()
    }

    /// The directory the printed line says the bucket is in.
    pub fn store_dir(&self) -> PathBuf {
        let (_, rest) = self.store_line.split_once(" in ").expect(&self.store_line);
        PathBuf::from(rest.split_once(", ").expect(&self.store_line).0)
    }

    /// SIGTERM, then the exit.
    pub fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "dev exited with {status}");
    }
}

impl Drop for Dev {
    /// A test that failed half-way leaves no `dev` running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
