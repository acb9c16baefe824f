//! The artifact store of `workflow-operator dev` and of the tests: an S3-compatible server on
//! 127.0.0.1 (a free port) over a directory (`s3s-fs`: a bucket is a directory, a key a file),
//! with one bucket, [`BUCKET`], and a generated access key and secret key. Plain HTTP on
//! loopback, like the embedded control plane: for trying and testing, never for production.
//!
//! [`install_default_repository`] tells the cluster about it: a Secret with the keys and a
//! ConfigMap with the `ArtifactRepository` that names it, in the form an installation would
//! write them for a real store.
//!
//! # Caveats
//! `s3s-fs` lists at most 1,000 keys per call and gives no continuation token, so a listing
//! (and `delete_prefix`) of more keys sees the first 1,000.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use rand::distr::{Alphanumeric, SampleString};
use s3s::auth::SimpleAuth;
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, CopyObjectInput, CopyObjectOutput, CreateBucketInput,
    CreateBucketOutput, CreateMultipartUploadInput, CreateMultipartUploadOutput, DeleteBucketInput,
    DeleteBucketOutput, DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput,
    DeleteObjectsOutput, GetBucketLocationInput, GetBucketLocationOutput, GetObjectInput,
    GetObjectOutput, HeadBucketInput, HeadBucketOutput, HeadObjectInput, HeadObjectOutput,
    ListBucketsInput, ListBucketsOutput, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input,
    ListObjectsV2Output, ListPartsInput, ListPartsOutput, PutObjectInput, PutObjectOutput, Range,
    StreamingBlob, UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput, UploadPartOutput,
};
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{S3, S3Error, S3Request, S3Response, S3Result};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use workflow_operator_core::agent::S3_SECRET_KEYS;
use workflow_operator_core::crd::artifacts::{ArtifactRepository, CredentialsSecret, S3Repository};

use super::local;
use super::target::{DEFAULT_REGION, S3Target};

mod multipart;

/// The one bucket of the embedded store.
pub const BUCKET: &str = "workflows";
/// The Secret [`install_default_repository`] writes: `accessKey` and `secretKey`.
pub const CREDENTIALS_SECRET: &str = "workflow-artifact-credentials";
/// The ConfigMap [`install_default_repository`] writes: its key [`REPOSITORY_KEY`] holds the
/// `ArtifactRepository` as YAML.
pub const REPOSITORY_CONFIGMAP: &str = "workflow-artifact-repository";
/// The data key of [`REPOSITORY_CONFIGMAP`].
pub const REPOSITORY_KEY: &str = "repository";

/// An object written into the store (a PUT, or a multipart upload completed): what a bucket
/// notification tells of it. [`EmbeddedStore::notify`] sends each to a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    pub bucket: String,
    pub key: String,
    pub size: u64,
    pub etag: String,
}

/// Where the store sends its [`Put`]s, once set.
type Puts = Arc<OnceLock<UnboundedSender<Put>>>;

/// Why the embedded store did not start, or could not be announced to the cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory to keep artifacts in could not be made.
    #[error("cannot use {} for the artifact store", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No port on 127.0.0.1.
    #[error("cannot listen on 127.0.0.1 for the artifact store")]
    Listen(#[source] std::io::Error),
    /// Writing the Secret or the ConfigMap failed.
    #[error("cannot write {kind} {namespace}/{name}")]
    Install {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// An embedded store, serving until [`EmbeddedStore::shutdown`] or drop.
pub struct EmbeddedStore {
    target: S3Target,
    dir: PathBuf,
    /// The temporary directory when none was given: removed on drop.
    _temporary: Option<TempDir>,
    stop: CancellationToken,
    server: Option<JoinHandle<()>>,
    puts: Puts,
}

impl EmbeddedStore {
    /// Serves a store over `dir` (created if missing; kept afterwards), or over a temporary
    /// directory removed when the store is dropped.
    ///
    /// # Errors
    /// The directory cannot be made or read; no port is free.
    pub async fn start(dir: Option<PathBuf>) -> Result<EmbeddedStore, Error> {
        let (dir, temporary) = match dir {
            Some(dir) => (dir, None),
            None => {
                let temporary = tempfile::Builder::new()
                    .prefix("workflow-artifacts-")
                    .tempdir()
                    .map_err(|source| Error::Dir {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (temporary.path().to_path_buf(), Some(temporary))
            }
        };
        // Absolute: steps are handed it, and run in directories of their own.
        let dir = std::path::absolute(&dir).map_err(|source| Error::Dir {
            path: dir.clone(),
            source,
        })?;
        let dir_error = |source| Error::Dir {
            path: dir.clone(),
            source,
        };
        // s3s-fs keeps a bucket as a directory of its root: making it is creating the bucket.
        std::fs::create_dir_all(dir.join(BUCKET)).map_err(dir_error)?;
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(Error::Listen)?;
        let address = listener.local_addr().map_err(Error::Listen)?;
        let target = generated_target(address, &dir);
        let puts = Puts::default();
        let service = service(&dir, &target, puts.clone()).map_err(dir_error)?;
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(listener, service, stop.clone()));
        Ok(EmbeddedStore {
            target,
            dir,
            _temporary: temporary,
            stop,
            server: Some(server),
            puts,
        })
    }

    /// Sends every object written from now on to `to` (the bucket notifications of `dev`'s
    /// WorkFlowTriggers); only the first call counts.
    pub fn notify(&self, to: UnboundedSender<Put>) {
        let _ = self.puts.set(to);
    }

    /// Its URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.target.endpoint
    }

    /// Its bucket with the credentials, for `put_path` and the rest.
    pub fn target(&self) -> &S3Target {
        &self.target
    }

    /// The directory it keeps the bucket in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The repository naming it, its credentials in the Secret [`CREDENTIALS_SECRET`].
    pub fn repository(&self) -> ArtifactRepository {
        ArtifactRepository {
            s3: Some(S3Repository {
                endpoint: self.target.endpoint.clone(),
                bucket: BUCKET.to_string(),
                credentials_secret: CredentialsSecret {
                    name: CREDENTIALS_SECRET.to_string(),
                },
                local_directory: Some(self.dir.to_string_lossy().into_owned()),
                ..S3Repository::default()
            }),
            oci: None,
        }
    }

    /// The Secret [`CREDENTIALS_SECRET`] in `namespace`: the store's keys (`accessKey`,
    /// `secretKey`), which a step with artifacts reads in its own namespace.
    pub fn credentials(&self, namespace: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(CREDENTIALS_SECRET.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                (
                    S3_SECRET_KEYS[0].to_string(),
                    bytes(&self.target.access_key),
                ),
                (
                    S3_SECRET_KEYS[1].to_string(),
                    bytes(&self.target.secret_key),
                ),
            ])),
            ..Secret::default()
        }
    }

    /// Stops serving, waiting for the server to close its listener.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// 127.0.0.1 at `address`, with fresh keys, its objects in `dir`.
fn generated_target(address: SocketAddr, dir: &Path) -> S3Target {
    let mut random = rand::rng();
    S3Target {
        endpoint: format!("http://{address}"),
        bucket: BUCKET.to_string(),
        region: DEFAULT_REGION.to_string(),
        access_key: Alphanumeric.sample_string(&mut random, 20),
        secret_key: Alphanumeric.sample_string(&mut random, 40),
        local_directory: Some(dir.to_path_buf()),
    }
}

/// S3 over `dir`, accepting only `target`'s keys; path-style requests only.
fn service(dir: &Path, target: &S3Target, puts: Puts) -> std::io::Result<S3Service> {
    let fs = s3s_fs::FileSystem::new(dir)
        .map_err(|error| std::io::Error::other(format!("{error:?}")))?;
    let mut builder = S3ServiceBuilder::new(Store {
        fs,
        root: dir.canonicalize()?,
        puts,
    });
    builder.set_auth(SimpleAuth::from_single(
        target.access_key.as_str(),
        target.secret_key.as_str(),
    ));
    Ok(builder.build())
}

/// The size of one read of an object's file while it is sent: `s3s-fs` reads 4 KiB at a time,
/// each a round trip to tokio's blocking pool, which bounded a download to about a tenth of
/// what the disk gives.
const READ_CHUNK: usize = 1 << 20;

/// `s3s-fs` with three changes: the body of a GET is read from the object's file in
/// [`READ_CHUNK`] reads, a multipart upload's parts are written and joined by [`multipart`],
/// and an object written is announced as a [`Put`]. Everything else, the GET's status, headers,
/// ETag, checksums and range checks included, is `s3s-fs`'s own answer; every other request
/// goes to it as it is.
struct Store {
    fs: s3s_fs::FileSystem,
    /// The directory `fs` serves: a bucket a directory of it, a key a file of that.
    root: PathBuf,
    puts: Puts,
}

impl Store {
    /// Announces `bucket`/`key`, just written with `etag`, when someone listens.
    async fn announce(&self, bucket: String, key: String, etag: Option<&s3s::dto::ETag>) {
        let Some(to) = self.puts.get() else {
            return;
        };
        let size = tokio::fs::metadata(self.root.join(&bucket).join(&key))
            .await
            .map_or(0, |m| m.len());
        let etag = etag.map(|e| e.value().to_string()).unwrap_or_default();
        let _ = to.send(Put {
            bucket,
            key,
            size,
            etag,
        });
    }

    /// The body of `bucket`/`key`: `length` bytes from where `range` starts, or `None` for a
    /// name that is not a plain relative path (`s3s-fs` resolves `..` its own way: its answer
    /// is kept).
    async fn body(
        &self,
        bucket: &str,
        key: &str,
        range: Option<Range>,
        length: u64,
    ) -> std::io::Result<Option<StreamingBlob>> {
        use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
        if !local::plain(bucket) || !local::plain(key) {
            return Ok(None);
        }
        let mut file = tokio::fs::File::open(self.root.join(bucket).join(key)).await?;
        let total = file.metadata().await?.len();
        // s3s-fs checked the range already: where it starts, as s3s-fs seeks there.
        let start = range
            .and_then(|r| r.check(total).ok())
            .map_or(0, |span| span.start);
        file.seek(std::io::SeekFrom::Start(start)).await?;
        Ok(Some(StreamingBlob::wrap(
            tokio_util::io::ReaderStream::with_capacity(file.take(length), READ_CHUNK),
        )))
    }
}

#[async_trait::async_trait]
impl S3 for Store {
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let (bucket, key, range) = (
            req.input.bucket.clone(),
            req.input.key.clone(),
            req.input.range,
        );
        let mut response = self.fs.get_object(req).await?;
        let length = response
            .output
            .content_length
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or_default();
        match self.body(&bucket, &key, range, length).await {
            Ok(Some(body)) => response.output.body = Some(body),
            Ok(None) => {}
            Err(error) => return Err(S3Error::internal_error(error)),
        }
        Ok(response)
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.fs.create_bucket(req).await
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        self.fs.copy_object(req).await
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        self.fs.delete_bucket(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.fs.delete_object(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.fs.delete_objects(req).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.fs.get_bucket_location(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.fs.head_object(req).await
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        self.fs.list_buckets(req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        self.fs.list_objects(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.fs.list_objects_v2(req).await
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let written = self.fs.put_object(req).await?;
        self.announce(bucket, key, written.output.e_tag.as_ref())
            .await;
        Ok(written)
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.fs.create_multipart_upload(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(&self.root, req.credentials.as_ref(), req.input).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.fs.upload_part_copy(req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        self.fs.list_parts(req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let input = &req.input;
        let conditional = input.if_match.is_some() || input.if_none_match.is_some();
        let written = if conditional || !local::plain(&bucket) || !local::plain(&key) {
            self.fs.complete_multipart_upload(req).await?
        } else {
            multipart::complete(&self.root, req.credentials.as_ref(), req.input).await?
        };
        self.announce(bucket, key, written.output.e_tag.as_ref())
            .await;
        Ok(written)
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.fs.abort_multipart_upload(req).await
    }
}

/// Accepts connections until `stop`, each served over HTTP/1.1 on a task of its own.
async fn serve(listener: TcpListener, service: S3Service, stop: CancellationToken) {
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(error) => {
                    tracing::warn!(%error, "artifact store: accepting a connection");
                    // Out of file descriptors, say: give connections time to close.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => return,
        };
        let connection = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(socket), service.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                served = connection => if let Err(error) = served {
                    tracing::debug!(%error, "artifact store: connection");
                },
                () = stop.cancelled() => {}
            }
        });
    }
}

/// Writes, in `namespace`, the Secret [`CREDENTIALS_SECRET`] (`accessKey`, `secretKey`) and
/// the ConfigMap [`REPOSITORY_CONFIGMAP`] whose [`REPOSITORY_KEY`] is `store`'s repository as
/// YAML; replaces them if they exist (a restarted `dev` has new keys and a new port).
///
/// # Errors
/// The API server refused a write.
pub async fn install_default_repository(
    client: kube::Client,
    namespace: &str,
    store: &EmbeddedStore,
) -> Result<(), Error> {
    let params = PatchParams::apply("workflow-operator-dev").force();
    let metadata = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..ObjectMeta::default()
    };
    let secret = store.credentials(namespace);
    let repository =
        serde_yaml::to_string(&store.repository()).expect("a repository serialises to YAML");
    let config_map = ConfigMap {
        metadata: metadata(REPOSITORY_CONFIGMAP),
        data: Some(BTreeMap::from([(REPOSITORY_KEY.to_string(), repository)])),
        ..ConfigMap::default()
    };
    let failed = |kind, name: &str| {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        move |source| Error::Install {
            kind,
            namespace,
            name,
            source,
        }
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(CREDENTIALS_SECRET, &params, &Patch::Apply(&secret))
        .await
        .map_err(failed("Secret", CREDENTIALS_SECRET))?;
    Api::<ConfigMap>::namespaced(client, namespace)
        .patch(REPOSITORY_CONFIGMAP, &params, &Patch::Apply(&config_map))
        .await
        .map_err(failed("ConfigMap", REPOSITORY_CONFIGMAP))?;
    Ok(())
}

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}
