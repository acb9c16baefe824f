//! How every command that talks to a cluster finds it, as kubectl does: `--kubeconfig` (else
//! `KUBECONFIG`, else `~/.kube/config`, else the pod's service account), `--context` (else the
//! kubeconfig's current one) and `-n/--namespace` (else the context's namespace).

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The cluster flags of a command, flattened into its arguments.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// The kubeconfig file to use (default: `KUBECONFIG`, else `~/.kube/config`, else the pod's
    /// service account), as kubectl.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context), as kubectl.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// The namespace (default: the context's, else `default`), as kubectl.
    #[arg(long, short = 'n')]
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

    async fn config(&self) -> Result<Config> {
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
