//! A repository's credentials, read from its Secret (`credentialsSecret`, keys `accessKey` and
//! `secretKey`) in the workflow's namespace: for the operator's artifact GC and the CLI's
//! downloads. The step agent gets them from its environment instead.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use workflow_operator_core::crd::S3Repository;

use super::S3Target;

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

/// The bucket of `s3` with the credentials of its Secret in `namespace`.
///
/// # Errors
/// [`CredentialsError`]: the Secret cannot be read, does not exist, or lacks a key.
pub async fn target_of(
    client: &Client,
    namespace: &str,
    s3: &S3Repository,
) -> Result<S3Target, CredentialsError> {
    let name = &s3.credentials_secret.name;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = (secrets.get_opt(name).await)
        .map_err(|source| CredentialsError::Read {
            name: name.clone(),
            source,
        })?
        .ok_or_else(|| CredentialsError::Missing {
            name: name.clone(),
            namespace: namespace.to_string(),
        })?;
    let key = |key: &'static str| {
        let value = secret.data.as_ref().and_then(|d| d.get(key));
        (value.and_then(|v| String::from_utf8(v.0.clone()).ok())).ok_or(CredentialsError::NoKey {
            name: name.clone(),
            key,
        })
    };
    Ok(S3Target::from_repository(
        s3,
        &key("accessKey")?,
        &key("secretKey")?,
    ))
}
