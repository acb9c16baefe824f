//! A repository's credentials, read from its Secret (`credentialsSecret`: keys `accessKey` and
//! `secretKey` for S3, `username` and `password` for OCI) in the workflow's namespace: for the
//! operator's artifact GC and the CLI's downloads. The step agent gets them from its
//! environment instead.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use workflow_operator_core::agent;
use workflow_operator_core::crd::ArtifactRepository;

use super::oci::OciTarget;
use super::{S3Target, Target};

/// Why a repository's credentials cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// Reading the Secret failed.
    #[error("reading secret {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The Secret does not exist.
    #[error("the repository's secret {name} does not exist in namespace {namespace}")]
    Missing { name: String, namespace: String },
    /// A key is missing or not text.
    #[error("the repository's secret {name} has no {key} (text)")]
    NoKey { name: String, key: &'static str },
}

impl CredentialsError {
    /// Whether trying again may help (the read failed), rather than a fix of the Secret.
    pub fn is_temporary(&self) -> bool {
        matches!(self, CredentialsError::Read { .. })
    }
}

/// The repository (a bucket or a registry's repository) with the credentials of its Secret
/// in `namespace`; `None` for a repository naming neither kind.
///
/// # Errors
/// [`CredentialsError`]: the Secret cannot be read, does not exist, or lacks a key.
pub async fn target_of(
    client: &Client,
    namespace: &str,
    repository: &ArtifactRepository,
) -> Result<Option<Target>, CredentialsError> {
    if let Some(s3) = &repository.s3 {
        let [access, secret] = secret_keys(
            client,
            namespace,
            &s3.credentials_secret.name,
            agent::S3_SECRET_KEYS,
        )
        .await?;
        return Ok(Some(Target::S3(S3Target::from_repository(
            s3, &access, &secret,
        ))));
    }
    let Some(oci) = &repository.oci else {
        return Ok(None);
    };
    let credentials = match &oci.credentials_secret {
        Some(secret) => {
            let [user, password] =
                secret_keys(client, namespace, &secret.name, agent::OCI_SECRET_KEYS).await?;
            Some((user, password))
        }
        None => None,
    };
    Ok(Some(Target::Oci(OciTarget::from_repository(
        oci,
        credentials,
    ))))
}

/// The text of `keys` in the Secret `name` of `namespace`.
async fn secret_keys(
    client: &Client,
    namespace: &str,
    name: &str,
    keys: [&'static str; 2],
) -> Result<[String; 2], CredentialsError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = (secrets.get_opt(name).await)
        .map_err(|source| CredentialsError::Read {
            name: name.to_string(),
            source,
        })?
        .ok_or_else(|| CredentialsError::Missing {
            name: name.to_string(),
            namespace: namespace.to_string(),
        })?;
    let key = |key: &'static str| {
        let value = secret.data.as_ref().and_then(|d| d.get(key));
        (value.and_then(|v| String::from_utf8(v.0.clone()).ok())).ok_or(CredentialsError::NoKey {
            name: name.to_string(),
            key,
        })
    };
    Ok([key(keys[0])?, key(keys[1])?])
}
