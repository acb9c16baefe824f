//! How every command that talks to a cluster finds it, as kubectl does: `--kubeconfig` (else
//! `KUBECONFIG`, else `~/.kube/config`, else the pod's service account), `--context` (else the
//! kubeconfig's current one) and `-n/--namespace` (else the context's namespace).

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{Context as _, Result};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The cluster flags of a command, flattened into its arguments, and into the top-level
/// parser too: global there, so they are also taken before the subcommand
/// (`workflow-operator -n team get x`), as kubectl takes them. clap gives a subcommand the
/// value of a global argument of the same id when the subcommand's own is not given.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// The kubeconfig file to use (default: `KUBECONFIG`, else `~/.kube/config`, else the pod's
    /// service account), as kubectl.
    #[arg(long, value_name = "FILE", global = true)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context), as kubectl.
    #[arg(long, value_name = "NAME", global = true)]
    context: Option<String>,
    /// The namespace (default: the context's, else `default`), as kubectl.
    #[arg(long, short = 'n', global = true)]
    pub namespace: Option<String>,
}

impl ClusterArgs {
    /// A client for the chosen cluster and the namespace to use.
    pub async fn connect(&self) -> Result<(Client, String)> {
        let config = self.config().await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).context("building the Kubernetes client")?;
        Ok((client, namespace))
    }

    /// The flags that point kubectl at the same cluster (`--kubeconfig`, `--context`).
    pub fn kubectl_flags(&self) -> Vec<String> {
        let kubeconfig = (self.kubeconfig.iter())
            .flat_map(|path| ["--kubeconfig".to_string(), path.display().to_string()]);
        let context = (self.context.iter()).flat_map(|c| ["--context".to_string(), c.clone()]);
        kubeconfig.chain(context).collect()
    }

    /// The chosen cluster's client configuration.
    pub(super) async fn config(&self) -> Result<Config> {
        let config = self.choose_config().await?;
        let server = config.cluster_url.to_string();
        let _ = SERVER.set(server.trim_end_matches('/').to_string());
        Ok(config)
    }

    async fn choose_config(&self) -> Result<Config> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("using the kubeconfig {}", path.display()))
            }
            (None, Some(context)) => Config::from_kubeconfig(&options)
                .await
                .with_context(|| format!("using the kubeconfig context {context:?}")),
            (None, None) => Config::infer()
                .await
                .context("no Kubernetes configuration found; set KUBECONFIG, pass --kubeconfig or run in a cluster"),
        }
    }
}

/// The API server this command talks to (the one process's one cluster), for the message when
/// it cannot be reached, wherever the failing request was made.
static SERVER: OnceLock<String> = OnceLock::new();

/// What to say when `error` is that the API server could not be reached (a connection refused,
/// timed out or unroutable): the server and the likely fixes, instead of the client's chain of
/// causes; `None` for any other error.
pub(super) fn unreachable(error: &anyhow::Error) -> Option<String> {
    use std::io::ErrorKind;
    let io = error
        .chain()
        .find_map(|e| e.downcast_ref::<std::io::Error>())?;
    let why = match io.kind() {
        ErrorKind::ConnectionRefused => "connection refused",
        ErrorKind::TimedOut => "connection timed out",
        ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => "no route to it",
        _ => return None,
    };
    let server = SERVER
        .get()
        .map_or("the configured address", String::as_str);
    Some(format!(
        "cannot reach the API server at {server}: {why} (is workflow-operator dev running? is KUBECONFIG set?)"
    ))
}
