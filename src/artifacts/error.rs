//! What can go wrong putting or getting an artifact, said so that the person who wrote the
//! workflow (or set up the store) knows what to change: which key, which bucket, which endpoint,
//! which path. The store's answers (`object_store` errors) are sorted into these by
//! `Error::from_store`. No message holds a secret key: the client signs requests with it but
//! never sends it, so neither the store's answer nor our words can contain it.

use std::path::{Path, PathBuf};

use object_store::client::{HttpError, HttpErrorKind};

/// Where a request went, as an error names it: the store, the bucket and the access key (never
/// the secret key).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addressed<'a> {
    pub(crate) endpoint: &'a str,
    pub(crate) bucket: &'a str,
    pub(crate) access_key: &'a str,
}

/// An artifact operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key is not in the bucket.
    #[error("artifact {key} not found in bucket {bucket}")]
    NotFound { key: String, bucket: String },
    /// The bucket does not exist.
    #[error("bucket {bucket} does not exist at {endpoint}")]
    NoSuchBucket { bucket: String, endpoint: String },
    /// The store answered 401 or 403.
    #[error(
        "the store at {endpoint} refused the credentials (access key {access_key}) for bucket \
         {bucket}: check the accessKey and secretKey of the repository's credentials Secret"
    )]
    Refused {
        endpoint: String,
        bucket: String,
        access_key: String,
        #[source]
        source: Box<object_store::Error>,
    },
    /// No connection could be made to the endpoint (after the client's retries).
    #[error("the store at {endpoint} cannot be reached")]
    Unreachable {
        endpoint: String,
        #[source]
        source: Box<object_store::Error>,
    },
    /// Any other answer of the store.
    #[error("{action} {key} in bucket {bucket} at {endpoint} failed")]
    Store {
        action: &'static str,
        key: String,
        bucket: String,
        endpoint: String,
        #[source]
        source: Box<object_store::Error>,
    },
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("the artifact store endpoint {endpoint:?} must start with https:// (or http://)")]
    BadEndpoint { endpoint: String },
    /// The client could not be built from the target (a malformed URL, say).
    #[error("cannot use the artifact store at {endpoint}")]
    Client {
        endpoint: String,
        #[source]
        source: Box<object_store::Error>,
    },
    /// The path to upload does not exist.
    #[error("output artifact path {} does not exist", path.display())]
    PathMissing { path: PathBuf },
    /// Reading or writing local files (packing, unpacking).
    #[error("{action} {}", path.display())]
    Local {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `delete_prefix` of an empty prefix: the whole bucket (or repository), never meant.
    #[error("refusing to delete every artifact in {place}: the prefix is empty")]
    EmptyPrefix {
        /// `bucket NAME` or `repository NAME`.
        place: String,
    },
    /// The artifact's tag is not in the OCI repository.
    #[error("artifact {key} not found in repository {repository} of registry {registry}")]
    NotInRegistry {
        key: String,
        registry: String,
        repository: String,
    },
    /// The OCI registry answered 401 or 403.
    #[error(
        "the registry {registry} refused the credentials (user {user:?}) for repository \
         {repository}: check the username and password of the repository's credentials Secret"
    )]
    RegistryRefused {
        registry: String,
        repository: String,
        user: String,
    },
    /// No connection could be made to the OCI registry.
    #[error("the registry {registry} cannot be reached")]
    RegistryUnreachable { registry: String },
    /// Any other answer of the OCI registry.
    #[error("{action} {key} in repository {repository} of registry {registry} failed: {source}")]
    Registry {
        action: &'static str,
        key: String,
        registry: String,
        repository: String,
        #[source]
        source: Box<oci_client::errors::OciDistributionError>,
    },
    /// What was downloaded is not an artifact as `put_path` stores them.
    #[error("artifact {key} is not a .tar.gz of a file or a directory: {reason}")]
    NotAnArtifact { key: String, reason: String },
}

/// `Result` of the artifact operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the artifact does not exist (in a bucket or a registry).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::NotInRegistry { .. })
    }

    /// Sorts the store's answer to `action` on `key` into what the user can act on.
    pub(crate) fn from_store(
        source: object_store::Error,
        target: Addressed<'_>,
        action: &'static str,
        key: &str,
    ) -> Error {
        let (endpoint, bucket) = (target.endpoint.to_string(), target.bucket.to_string());
        // `object_store` gives 403 its own variant for some requests (a get, a put) and not for
        // others (a list): the S3 error code in the answer says it for all.
        let answer = causes(&source);
        let s3_code = |code: &str| answer.contains(&format!("<Code>{code}</Code>"));
        let refused = matches!(
            source,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        ) || REFUSALS.iter().any(|code| s3_code(code));
        if s3_code("NoSuchBucket") {
            Error::NoSuchBucket { bucket, endpoint }
        } else if refused {
            let access_key = target.access_key.to_string();
            Error::Refused {
                endpoint,
                bucket,
                access_key,
                source: Box::new(source),
            }
        } else if matches!(source, object_store::Error::NotFound { .. }) {
            Error::NotFound {
                key: key.to_string(),
                bucket,
            }
        } else if failed_to_connect(&source) {
            let source = Box::new(source);
            Error::Unreachable { endpoint, source }
        } else {
            let key = key.to_string();
            Error::Store {
                action,
                key,
                bucket,
                endpoint,
                source: Box::new(source),
            }
        }
    }
}

/// The S3 error codes of a refusal of the credentials.
const REFUSALS: [&str; 3] = [
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
];

/// The error and its causes, in one text.
fn causes(error: &object_store::Error) -> String {
    let mut text = String::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        text.push_str(&error.to_string());
        text.push('\n');
        cause = error.source();
    }
    text
}

/// Whether the request never reached the store: refused, no route, no such host.
fn failed_to_connect(error: &object_store::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(http) = error.downcast_ref::<HttpError>() {
            return http.kind() == HttpErrorKind::Connect;
        }
        cause = error.source();
    }
    false
}

/// Whether unpacking failed on the archive itself (not gzip, not tar, not our layout) rather
/// than on the files written.
pub(super) fn is_format_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
    matches!(error.kind(), InvalidData | InvalidInput | UnexpectedEof)
}

/// Reading or writing `path` failed.
pub(super) fn local_error(action: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Local {
        action,
        path: PathBuf::from(path),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Addressed<'static> {
        Addressed {
            endpoint: "http://127.0.0.1:9",
            bucket: "workflows",
            access_key: "AKID",
        }
    }

    fn sorted(source: object_store::Error) -> Error {
        Error::from_store(source, target(), "getting", "a/b.tgz")
    }

    fn not_found(body: &str) -> object_store::Error {
        object_store::Error::NotFound {
            path: "a/b.tgz".into(),
            source: body.into(),
        }
    }

    #[test]
    fn a_missing_key_and_a_missing_bucket_are_told_apart() {
        let key = sorted(not_found("<Code>NoSuchKey</Code>"));
        assert_eq!(
            key.to_string(),
            "artifact a/b.tgz not found in bucket workflows"
        );
        let bucket = sorted(not_found("<Code>NoSuchBucket</Code>"));
        assert_eq!(
            bucket.to_string(),
            "bucket workflows does not exist at http://127.0.0.1:9"
        );
    }

    #[test]
    fn a_refusal_names_the_endpoint_and_the_access_key_not_the_secret() {
        let refused = sorted(object_store::Error::PermissionDenied {
            path: "a/b.tgz".into(),
            source: "<Code>SignatureDoesNotMatch</Code>".into(),
        });
        let message = refused.to_string();
        assert!(matches!(refused, Error::Refused { .. }), "{refused:?}");
        assert!(message.contains("http://127.0.0.1:9"), "{message}");
        assert!(message.contains("AKID"), "{message}");
        assert!(!message.contains("s3cr3t"), "{message}");
    }

    #[test]
    fn a_refusal_inside_a_generic_error_is_a_refusal() {
        // As a listing reports it: no variant of its own, the S3 code in the answer's body.
        let listing = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 403 Forbidden: \
                     <Error><Code>SignatureDoesNotMatch</Code></Error>"
                .into(),
        };
        assert!(matches!(sorted(listing), Error::Refused { .. }));
        let bucket = object_store::Error::Generic {
            store: "S3",
            source: "<Error><Code>NoSuchBucket</Code></Error>".into(),
        };
        assert!(matches!(sorted(bucket), Error::NoSuchBucket { .. }));
    }

    #[test]
    fn a_connection_that_failed_is_unreachable_and_other_errors_are_the_stores() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let connect = object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(HttpErrorKind::Connect, refused)),
        };
        let error = sorted(connect);
        assert_eq!(
            error.to_string(),
            "the store at http://127.0.0.1:9 cannot be reached"
        );
        let decode = object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(HttpErrorKind::Decode, std::fmt::Error)),
        };
        assert!(matches!(sorted(decode), Error::Store { .. }));
    }
}
