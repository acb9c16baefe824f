//! The S3-compatible bucket artifacts go to, with its credentials, and the `object_store`
//! client for it. The secret key is shown nowhere: not by `Debug`, not in an error.

use std::fmt;
use std::path::PathBuf;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use workflow_operator_core::crd::artifacts::S3Repository;

use super::error::{Addressed, Error, Result};

/// The region when the repository names none (MinIO and most S3-compatible stores ignore it,
/// but it is part of what is signed).
pub const DEFAULT_REGION: &str = "us-east-1";

/// An S3-compatible bucket and the credentials to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Target {
    /// The service's URL: `https://...`, or `http://...` for plain HTTP.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The region, e.g. [`DEFAULT_REGION`].
    pub region: String,
    /// The access key id (the Secret's `accessKey`).
    pub access_key: String,
    /// The secret key (the Secret's `secretKey`); never printed.
    pub secret_key: String,
    /// The directory holding the bucket's objects as files `DIR/BUCKET/KEY` (the repository's
    /// `localDirectory`): where put and get move the bytes when this machine has it.
    pub local_directory: Option<PathBuf>,
}

impl S3Target {
    /// The store, bucket and access key, as errors name them.
    pub(crate) fn address(&self) -> Addressed<'_> {
        Addressed {
            endpoint: &self.endpoint,
            bucket: &self.bucket,
            access_key: &self.access_key,
        }
    }

    /// The bucket of a workflow's `spec.artifactRepository.s3`, with the credentials read from
    /// its `credentialsSecret`.
    pub fn from_repository(repository: &S3Repository, access_key: &str, secret_key: &str) -> Self {
        S3Target {
            endpoint: repository.endpoint.clone(),
            bucket: repository.bucket.clone(),
            region: repository
                .region
                .clone()
                .unwrap_or_else(|| DEFAULT_REGION.to_string()),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            local_directory: repository.local_directory.as_ref().map(PathBuf::from),
        }
    }

    /// The bucket's directory, when the repository names one and this machine has it.
    pub(crate) fn local_bucket(&self) -> Option<PathBuf> {
        let bucket = self.local_directory.as_ref()?.join(&self.bucket);
        bucket.is_dir().then_some(bucket)
    }

    /// The client for this bucket: path-style requests (`ENDPOINT/BUCKET/KEY`, which MinIO and
    /// other self-hosted stores expect), plain HTTP only for an `http://` endpoint.
    ///
    /// # Errors
    /// [`Error::BadEndpoint`] when the endpoint is neither `http://` nor `https://`.
    pub(crate) fn client(&self) -> Result<AmazonS3> {
        let plain_http = self.endpoint.starts_with("http://");
        if !plain_http && !self.endpoint.starts_with("https://") {
            return Err(Error::BadEndpoint {
                endpoint: self.endpoint.clone(),
            });
        }
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(&self.bucket)
            .with_region(&self.region)
            .with_access_key_id(&self.access_key)
            .with_secret_access_key(&self.secret_key)
            .with_allow_http(plain_http)
            .with_virtual_hosted_style_request(false)
            // The body is not hashed into the signature (`UNSIGNED-PAYLOAD`, which S3, MinIO
            // and the embedded store accept): signing it cost a SHA-256 pass over every part
            // here and another in a store that checks it, as long as the upload itself on
            // loopback; TLS (or the loopback of `dev`) keeps the bytes whole.
            .with_unsigned_payload(true)
            .build()
            .map_err(|source| Error::Client {
                endpoint: self.endpoint.clone(),
                source: Box::new(source),
            })
    }
}

impl fmt::Debug for S3Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Target")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("local_directory", &self.local_directory)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(endpoint: &str) -> S3Target {
        S3Target {
            endpoint: endpoint.into(),
            bucket: "workflows".into(),
            region: DEFAULT_REGION.into(),
            access_key: "AKIDEXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI-very-secret".into(),
            local_directory: None,
        }
    }

    #[test]
    fn debug_shows_everything_but_the_secret_key() {
        let shown = format!("{:?}", target("http://127.0.0.1:9000"));
        assert!(shown.contains("AKIDEXAMPLE"), "{shown}");
        assert!(shown.contains("workflows"), "{shown}");
        assert!(!shown.contains("very-secret"), "{shown}");
    }

    #[test]
    fn an_endpoint_without_a_scheme_is_refused_naming_it() {
        let error = target("minio:9000").client().unwrap_err();
        assert!(
            error.to_string().contains("minio:9000"),
            "{error}: names the endpoint"
        );
        assert!(target("https://s3.example.com").client().is_ok());
        assert!(target("http://127.0.0.1:9000").client().is_ok());
    }

    #[test]
    fn a_repository_without_a_region_gets_the_default_one() {
        let repository = S3Repository {
            endpoint: "https://s3.example.com".into(),
            bucket: "b".into(),
            ..S3Repository::default()
        };
        let target = S3Target::from_repository(&repository, "a", "s");
        assert_eq!(target.region, DEFAULT_REGION);
        assert_eq!(target.endpoint, "https://s3.example.com");
    }
}
