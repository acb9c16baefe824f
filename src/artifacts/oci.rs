//! Artifacts in an OCI registry, the ORAS way: each artifact an OCI artifact of its own (one
//! layer, the `.tar.gz` of `archive`, of media type [`LAYER_MEDIA_TYPE`], and a config of
//! [`CONFIG_MEDIA_TYPE`]) under a tag derived from its key ([`tag_of`]), pushed and pulled by
//! the ORAS project's `oci-client`.
//!
//! # Guarantees
//! - A key's tag is the same on every try, so a retried push moves the tag, never adds one.
//! - Each artifact's manifest is unique to its key (the config holds the key): deleting one
//!   artifact by its manifest digest never takes another tag's artifact with it.
//! - The password is shown nowhere: not by `Debug`, not in an error.
//!
//! # Caveats
//! - An artifact is held in memory whole while pushed or pulled (`oci-client` pushes a layer
//!   from memory).
//! - Deleting needs a registry that allows it (the distribution server's
//!   `storage.delete.enabled`); the space is reclaimed by the registry's own garbage collection.

use std::fmt;
use std::io::Cursor;
use std::path::Path;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};
use workflow_operator_core::crd::artifacts::OciRepository;

use super::archive;
use super::error::{Error, Result, is_format_error, local_error};
use super::transfer::Stored;

/// The media type of an artifact's one layer: the `.tar.gz` of a file or a directory.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.workflow-operator.artifact.v1.tar+gzip";

/// The media type of an artifact's config, which is also its artifact type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.workflow-operator.artifact.config.v1+json";

/// The longest tag (the distribution spec's `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`).
const MAX_TAG: usize = 128;

/// The longest workflow part of a tag (`NAMESPACE_WORKFLOW`), leaving the rest to the Job and
/// the artifact's name.
const MAX_WORKFLOW_PART: usize = 60;

/// Hex digits of the hash ending a shortened part.
const HASH_DIGITS: usize = 16;

/// A repository of an OCI registry and the credentials to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct OciTarget {
    /// The registry's host and port, e.g. `registry.local:5000`.
    pub registry: String,
    /// The repository, e.g. `wf/artifacts`.
    pub repository: String,
    /// Plain HTTP instead of HTTPS.
    pub insecure: bool,
    /// The user name and password (the Secret's `username` and `password`); `None`:
    /// anonymous.
    pub credentials: Option<(String, String)>,
}

impl OciTarget {
    /// The repository of a workflow's `spec.artifactRepository.oci`, with the credentials read
    /// from its `credentialsSecret` (if it names one).
    pub fn from_repository(
        repository: &OciRepository,
        credentials: Option<(String, String)>,
    ) -> Self {
        OciTarget {
            registry: repository.registry.clone(),
            repository: repository.repository.clone(),
            insecure: repository.insecure,
            credentials,
        }
    }

    fn auth(&self) -> RegistryAuth {
        match &self.credentials {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    fn client(&self) -> Client {
        install_crypto();
        Client::new(ClientConfig {
            protocol: match self.insecure {
                true => ClientProtocol::Http,
                false => ClientProtocol::Https,
            },
            ..ClientConfig::default()
        })
    }

    fn reference(&self, tag: String) -> Reference {
        Reference::with_tag(self.registry.clone(), self.repository.clone(), tag)
    }

    /// The registry's answer to `action` on `key`, sorted into what the user can act on.
    fn error(&self, source: OciDistributionError, action: &'static str, key: &str) -> Error {
        let registry = self.registry.clone();
        let repository = self.repository.clone();
        match kind(&source) {
            Kind::NotFound => Error::NotInRegistry {
                key: key.to_string(),
                registry,
                repository,
            },
            Kind::Refused => Error::RegistryRefused {
                registry,
                repository,
                user: self
                    .credentials
                    .as_ref()
                    .map(|c| c.0.clone())
                    .unwrap_or_default(),
            },
            Kind::Unreachable => Error::RegistryUnreachable { registry },
            Kind::Other => Error::Registry {
                action,
                key: key.to_string(),
                registry,
                repository,
                source: Box::new(source),
            },
        }
    }
}

impl fmt::Debug for OciTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self.credentials.as_ref().map(|c| &c.0);
        f.debug_struct("OciTarget")
            .field("registry", &self.registry)
            .field("repository", &self.repository)
            .field("insecure", &self.insecure)
            .field("user", &user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Makes ring the process's TLS provider (the clients are built without one of their own, to
/// avoid building aws-lc); kept when one is installed already.
pub(crate) fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

enum Kind {
    NotFound,
    Refused,
    Unreachable,
    Other,
}

fn kind(error: &OciDistributionError) -> Kind {
    use OciDistributionError as E;
    match error {
        E::ImageManifestNotFoundError(_) => Kind::NotFound,
        E::ServerError { code: 404, .. } => Kind::NotFound,
        E::RegistryError { envelope, .. } if envelope.to_string().contains("unknown") => {
            Kind::NotFound
        }
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => Kind::Refused,
        E::ServerError {
            code: 401 | 403, ..
        } => Kind::Refused,
        E::RequestError(error) if error.is_connect() => Kind::Unreachable,
        _ => Kind::Other,
    }
}

/// The tag of the artifact at `key` (`PREFIX/JOB/NAME.tgz`, the core's `artifact_key`): the
/// workflow part of [`tag_prefix`], then `JOB_NAME`, each shortened with a hash when too long.
pub fn tag_of(key: &str) -> String {
    let key = key.strip_suffix(".tgz").unwrap_or(key);
    let (rest, name) = key.rsplit_once('/').unwrap_or(("", key));
    let (prefix, job) = rest.rsplit_once('/').unwrap_or(("", rest));
    let head = tag_prefix(prefix);
    let tail = shorten(&format!("{job}_{name}"), MAX_TAG - head.len());
    format!("{head}{tail}")
}

/// What every tag of the artifacts under the key prefix `prefix` (`NAMESPACE/WORKFLOW`) starts
/// with: `NAMESPACE_WORKFLOW_` (neither name can hold a `_`, so no other workflow's tags do).
pub fn tag_prefix(prefix: &str) -> String {
    let prefix = prefix.trim_matches('/').replace('/', "_");
    format!("{}_", shorten(&prefix, MAX_WORKFLOW_PART))
}

/// `text` with the characters a tag cannot hold made `-`, cut to `max` characters ending in a
/// hash of the whole when longer.
fn shorten(text: &str, max: usize) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let clean: String = text
        .chars()
        .map(|c| if allowed(c) || c == '_' { c } else { '-' })
        .collect();
    if clean.len() <= max {
        return clean;
    }
    let hash: String = (Sha256::digest(text.as_bytes()).iter())
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!(
        "{}-{}",
        &clean[..max - HASH_DIGITS - 1],
        &hash[..HASH_DIGITS]
    )
}

/// Pushes the file or directory at `local_path` as the artifact of `key`, replacing what its
/// tag named.
///
/// # Errors
/// [`Error::PathMissing`], [`Error::Local`] for the files; the registry's answers.
pub async fn put_path(target: &OciTarget, key: &str, local_path: &Path) -> Result<Stored> {
    if !tokio::fs::try_exists(local_path).await.unwrap_or(true) {
        return Err(Error::PathMissing {
            path: local_path.to_path_buf(),
        });
    }
    let source = local_path.to_path_buf();
    let packed = tokio::task::spawn_blocking(move || archive::pack(&source, Vec::new()))
        .await
        .expect("packing does not panic")
        .map_err(|error| local_error("packing", local_path, error))?;
    let size = packed.len() as u64;
    let layer = ImageLayer::new(packed, LAYER_MEDIA_TYPE.to_string(), None);
    // The key in the config makes the manifest this key's alone (see the guarantees).
    let config = serde_json::json!({ "key": key }).to_string();
    let config = Config::new(config.into_bytes(), CONFIG_MEDIA_TYPE.to_string(), None);
    let reference = target.reference(tag_of(key));
    (target.client())
        .push(&reference, &[layer], config, &target.auth(), None)
        .await
        .map_err(|error| target.error(error, "pushing", key))?;
    Ok(Stored {
        key: key.to_string(),
        size,
    })
}

/// Pulls the artifact of `key` and unpacks it to `dest_path`, as [`super::get_path`] does.
///
/// # Errors
/// [`Error::NotInRegistry`] when its tag does not exist; the registry's other answers;
/// [`Error::NotAnArtifact`]; [`Error::Local`].
pub async fn get_path(target: &OciTarget, key: &str, dest_path: &Path) -> Result<()> {
    let reference = target.reference(tag_of(key));
    let image = (target.client())
        .pull(&reference, &target.auth(), vec![LAYER_MEDIA_TYPE])
        .await
        .map_err(|error| target.error(error, "pulling", key))?;
    let not_ours = |reason: &str| Error::NotAnArtifact {
        key: key.to_string(),
        reason: reason.to_string(),
    };
    let [layer] = <[_; 1]>::try_from(image.layers).map_err(|_| not_ours("not one layer"))?;
    if let Some(parent) = dest_path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| local_error("creating", parent, source))?;
    }
    let dest = dest_path.to_path_buf();
    let unpacked =
        tokio::task::spawn_blocking(move || archive::unpack(Cursor::new(layer.data), &dest))
            .await
            .expect("unpacking does not panic");
    match unpacked {
        Ok(()) => Ok(()),
        Err(error) if is_format_error(&error) => Err(not_ours(&error.to_string())),
        Err(error) => Err(local_error("unpacking into", dest_path, error)),
    }
}

/// Deletes every artifact under the key prefix `prefix`: the manifest of each tag starting
/// with its [`tag_prefix`]; returns how many.
///
/// # Errors
/// [`Error::EmptyPrefix`] for an empty prefix; the registry's answers (a registry that does
/// not allow deleting answers 405).
pub async fn delete_prefix(target: &OciTarget, prefix: &str) -> Result<usize> {
    if prefix.trim_matches('/').is_empty() {
        return Err(Error::EmptyPrefix {
            place: format!("repository {}", target.repository),
        });
    }
    let start = tag_prefix(prefix);
    let client = target.client();
    let tags = all_tags(target, &client, &start).await?;
    // One HTTP client for every DELETE: building one loads the system's root certificates.
    let http = reqwest::Client::new();
    for tag in &tags {
        let reference = target.reference(tag.clone());
        let fail = |error| target.error(error, "deleting", tag);
        let digest = (client
            .fetch_manifest_digest(&reference, &target.auth())
            .await)
            .map_err(fail)?;
        delete_manifest(target, &client, &http, &reference, &digest).await?;
    }
    Ok(tags.len())
}

/// Every tag of the repository starting with `start` (a [`tag_prefix`], or `""` for all).
///
/// # Errors
/// The registry's answers.
pub async fn tags(target: &OciTarget, start: &str) -> Result<Vec<String>> {
    all_tags(target, &target.client(), start).await
}

/// Every tag of the repository starting with `start` (all pages of the tag list).
async fn all_tags(target: &OciTarget, client: &Client, start: &str) -> Result<Vec<String>> {
    const PAGE: usize = 1000;
    let reference = target.reference("latest".to_string());
    let mut found = Vec::new();
    let mut last: Option<String> = None;
    loop {
        let page = client
            .list_tags(&reference, &target.auth(), Some(PAGE), last.as_deref())
            .await;
        let page = match page {
            // A repository nothing was pushed to has no tag list.
            Err(error) if matches!(kind(&error), Kind::NotFound) => return Ok(found),
            page => page.map_err(|error| target.error(error, "listing tags", start))?,
        };
        let full = page.tags.len() == PAGE;
        last = page.tags.last().cloned();
        found.extend(page.tags.into_iter().filter(|tag| tag.starts_with(start)));
        if !full {
            return Ok(found);
        }
    }
}

/// `DELETE /v2/REPOSITORY/manifests/DIGEST`, which `oci-client` does not offer, sent with
/// `http`: with the bearer token the registry gave `client` for pushing, else the basic
/// credentials.
async fn delete_manifest(
    target: &OciTarget,
    client: &Client,
    http: &reqwest::Client,
    reference: &Reference,
    digest: &str,
) -> Result<()> {
    let tag = reference.tag().unwrap_or_default();
    let token = (client
        .auth(reference, &target.auth(), RegistryOperation::Push)
        .await)
        .map_err(|error| target.error(error, "deleting", tag))?;
    let scheme = if target.insecure { "http" } else { "https" };
    let url = format!(
        "{scheme}://{}/v2/{}/manifests/{digest}",
        target.registry, target.repository
    );
    let mut request = http.delete(&url);
    request = match (token, &target.credentials) {
        (Some(token), _) => request.bearer_auth(token),
        (None, Some((user, password))) => request.basic_auth(user, Some(password)),
        (None, None) => request,
    };
    let answer =
        (request.send().await).map_err(|error| target.error(error.into(), "deleting", tag))?;
    let status = answer.status();
    if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
        return Ok(());
    }
    let message = answer.text().await.unwrap_or_default();
    let error = OciDistributionError::ServerError {
        code: status.as_u16(),
        url,
        message,
    };
    Err(target.error(error, "deleting", tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(tag: &str) -> bool {
        let mut chars = tag.chars();
        let first = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        first
            && tag.len() <= MAX_TAG
            && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    }

    #[test]
    fn a_tag_names_the_workflow_job_and_artifact() {
        let tag = tag_of("dev/build/build-app-1a2b/bin.tgz");
        assert_eq!(tag, "dev_build_build-app-1a2b_bin");
        assert!(tag.starts_with(&tag_prefix("dev/build/")));
        assert!(!tag.starts_with(&tag_prefix("dev/buil")));
    }

    #[test]
    fn a_long_key_gets_a_valid_tag_the_same_every_time_under_its_workflows_prefix() {
        let workflow = "w".repeat(200);
        let key = format!("ns/{workflow}/{}/{}.tgz", "j".repeat(63), "a".repeat(63));
        let tag = tag_of(&key);
        assert!(valid(&tag), "{tag}");
        assert_eq!(tag, tag_of(&key), "deterministic");
        assert!(tag.starts_with(&tag_prefix(&format!("ns/{workflow}"))));
        let other = format!("ns/{workflow}/{}/{}b.tgz", "j".repeat(63), "a".repeat(62));
        assert_ne!(tag, tag_of(&other), "the hash tells them apart");
    }

    #[test]
    fn debug_hides_the_password() {
        let target = OciTarget {
            registry: "r:5000".into(),
            repository: "wf".into(),
            insecure: true,
            credentials: Some(("bot".into(), "hunter2-secret".into())),
        };
        let shown = format!("{target:?}");
        assert!(
            shown.contains("bot") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
