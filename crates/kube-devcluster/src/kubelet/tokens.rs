//! Service account tokens, when the control plane authenticates requests
//! (`DevClusterOptions::rbac`): the kubelet issues one per pod it runs and writes it into a
//! kubeconfig of the pod's own, which its containers' `$KUBECONFIG` names instead of the
//! control plane's admin kubeconfig ([`Credentials::kubeconfig_for`]). The API server's
//! authentication ([`crate::apiserver::authn`]) looks a request's bearer token up here
//! ([`ServiceAccountTokens::lookup`]) and makes the request the pod's service account's.
//!
//! A real cluster's kubelet asks the API server for a token bound to the pod (a JWT of the
//! `TokenRequest` API, projected into the pod at
//! `/var/run/secrets/kubernetes.io/serviceaccount/token`) that stops being valid when the pod
//! is deleted. Here a token is an opaque random string the control plane keeps in memory, and
//! it is forgotten when the pod is deleted ([`Credentials::forget`]), so it stops working at
//! the same moment. A pod with `automountServiceAccountToken: false` gets no `$KUBECONFIG`,
//! as before; the ServiceAccount's own `automountServiceAccountToken` is not read.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::storage::store::StoredObject;

/// Whom a token was issued to: a pod and the service account it runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    pub namespace: String,
    pub service_account: String,
    pub pod_name: String,
    pub pod_uid: String,
}

/// The tokens issued to pods and not yet forgotten; shared by the kubelet (which issues them) and
/// the API server (which authenticates requests by them).
#[derive(Debug, Default)]
pub struct ServiceAccountTokens {
    issued: Mutex<Issued>,
}

#[derive(Debug, Default)]
struct Issued {
    by_token: HashMap<String, PodIdentity>,
    /// A pod's token by its uid, so that every container of the pod (and every restart) has
    /// the same one.
    by_pod: HashMap<String, String>,
}

impl ServiceAccountTokens {
    /// Whom `token` was issued to; `None` when no pod has it (never issued, or its pod deleted).
    pub fn lookup(&self, token: &str) -> Option<PodIdentity> {
        self.lock().by_token.get(token).cloned()
    }

    /// The pod's token, issued now unless it has one already.
    pub fn issue(&self, identity: PodIdentity) -> String {
        let mut issued = self.lock();
        if let Some(token) = issued.by_pod.get(&identity.pod_uid) {
            return token.clone();
        }
        // 256 random bits, as hex: nothing to guess.
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        issued
            .by_pod
            .insert(identity.pod_uid.clone(), token.clone());
        issued.by_token.insert(token.clone(), identity);
        token
    }

    /// Forgets the token of the pod with this uid: requests carrying it are refused from now on.
    pub fn forget(&self, pod_uid: &str) {
        let mut issued = self.lock();
        if let Some(token) = issued.by_pod.remove(pod_uid) {
            issued.by_token.remove(&token);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Issued> {
        self.issued.lock().expect("token lock poisoned")
    }
}

/// What the kubelet needs to give each pod credentials of its own: the tokens, the API server's
/// address, and a directory for the pods' kubeconfigs.
pub(crate) struct Credentials {
    pub tokens: Arc<ServiceAccountTokens>,
    /// `http://127.0.0.1:PORT`.
    pub server: String,
    /// One subdirectory per pod (by uid), holding its kubeconfig; removed with the control
    /// plane.
    pub dir: tempfile::TempDir,
}

impl Credentials {
    /// A kubeconfig for `pod`'s containers: the API server, the pod's token as its user and
    /// the pod's namespace as its context's (as a pod's in-cluster configuration reads its
    /// namespace). Written once per pod, mode 0600.
    ///
    /// # Errors
    /// When the file cannot be written: the container cannot start yet, saying so.
    pub fn kubeconfig_for(&self, pod: &StoredObject) -> Result<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let spec = pod.value.get("spec");
        let account = (spec.and_then(|s| s.get("serviceAccountName")))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("default");
        let token = self.tokens.issue(PodIdentity {
            namespace: pod.namespace().to_string(),
            service_account: account.to_string(),
            pod_name: pod.name().to_string(),
            pod_uid: pod.uid().to_string(),
        });
        let dir = self.dir.path().join(pod.uid());
        let path = dir.join("kubeconfig");
        if path.exists() {
            return Ok(path);
        }
        let cannot = |e: std::io::Error| format!("cannot write the pod's kubeconfig: {e}");
        std::fs::create_dir_all(&dir).map_err(cannot)?;
        let text = kubeconfig_yaml(&self.server, pod.namespace(), account, &token);
        std::fs::write(&path, text).map_err(cannot)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(cannot)?;
        Ok(path)
    }

    /// Forgets a deleted pod's token and removes its kubeconfig.
    pub fn forget(&self, pod_uid: &str) {
        self.tokens.forget(pod_uid);
        let _ = std::fs::remove_dir_all(self.dir.path().join(pod_uid));
    }
}

fn kubeconfig_yaml(server: &str, namespace: &str, account: &str, token: &str) -> String {
    let user = format!("system:serviceaccount:{namespace}:{account}");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: devcluster\n  cluster:\n    server: {server}\nusers:\n- name: {user:?}\n  user:\n    token: {token}\ncontexts:\n- name: devcluster\n  context:\n    cluster: devcluster\n    user: {user:?}\n    namespace: {namespace}\ncurrent-context: devcluster\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(uid: &str) -> PodIdentity {
        PodIdentity {
            namespace: "ns".into(),
            service_account: "runner".into(),
            pod_name: format!("pod-{uid}"),
            pod_uid: uid.into(),
        }
    }

    #[test]
    fn a_pod_keeps_its_token_until_it_is_forgotten() {
        let tokens = ServiceAccountTokens::default();
        let first = tokens.issue(identity("a"));
        assert_eq!(tokens.issue(identity("a")), first);
        let other = tokens.issue(identity("b"));
        assert_ne!(other, first);
        assert_eq!(tokens.lookup(&first), Some(identity("a")));
        tokens.forget("a");
        assert_eq!(tokens.lookup(&first), None);
        assert_eq!(tokens.lookup(&other), Some(identity("b")));
        assert_eq!(tokens.lookup("made-up"), None);
    }

    #[test]
    fn the_kubeconfig_names_the_server_the_token_and_the_namespace() {
        let text = kubeconfig_yaml("http://127.0.0.1:1", "ns", "runner", "abc");
        let doc: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1"
        );
        assert_eq!(doc["users"][0]["user"]["token"], "abc");
        assert_eq!(doc["users"][0]["name"], "system:serviceaccount:ns:runner");
        assert_eq!(doc["contexts"][0]["context"]["namespace"], "ns");
    }
}
