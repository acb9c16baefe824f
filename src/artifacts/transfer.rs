//! Putting a local file or directory into the store as a `.tar.gz`, getting one back to a path,
//! listing and deleting keys: what the step agent does around a step's command, and what the
//! operator's artifact garbage collection does.
//!
//! # Guarantees
//! - Streamed both ways: packing feeds a multipart upload (parts of [`PART_SIZE`], at most
//!   [`PARTS_IN_FLIGHT`] at once) and the download feeds unpacking, so memory stays around
//!   `PART_SIZE * (PARTS_IN_FLIGHT + 1)` whatever the artifact's size.
//! - A put to an existing key replaces it: a retried upload leaves one object, never two; an
//!   upload that fails is aborted, leaving no parts behind.
//! - When the repository names the store's directory and this machine has it
//!   ([`super::local`]), the bytes are written to and read from there, not sent over HTTP.
//!
//! # Caveats
//! - Each call builds its own client. Transient failures (5xx, a connection refused) are
//!   retried by `object_store` for up to 3 minutes before the error is returned.
//! - A get that fails part-way leaves what was unpacked so far at the destination.

use std::path::Path;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;
use tokio::runtime::Handle;

use super::archive;
use super::bridge::{Download, Upload, store_fault};
use super::error::{Error, Result, is_format_error, local_error};
use super::local;
use super::target::S3Target;

/// The size of an upload's parts (S3 takes parts of 5 MiB and more, but the last).
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// Parts uploaded at once.
pub const PARTS_IN_FLIGHT: usize = 3;

/// An object in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its key.
    pub key: String,
    /// Its size in bytes (of the `.tar.gz`).
    pub size: u64,
}

/// Stores the file or directory at `local_path` under `key`, as a `.tar.gz`, replacing what
/// was there.
///
/// # Errors
/// [`Error::PathMissing`] when `local_path` does not exist; [`Error::Refused`],
/// [`Error::Unreachable`], [`Error::NoSuchBucket`] and [`Error::Store`] for the store's
/// answers; [`Error::Local`] when reading the files fails.
pub async fn put_path(target: &S3Target, key: &str, local_path: &Path) -> Result<Stored> {
    let client = target.client()?;
    if let Err(error) = tokio::fs::metadata(local_path).await
        && error.kind() == std::io::ErrorKind::NotFound
    {
        return Err(Error::PathMissing {
            path: local_path.to_path_buf(),
        });
    }
    if local::reaches(target, key) {
        let size = local::put_path(target, &client, key, local_path).await?;
        return Ok(Stored {
            key: Key::from(key).to_string(),
            size,
        });
    }
    let client: Arc<dyn ObjectStore> = Arc::new(client);
    let location = Key::from(key);
    let writer = BufWriter::with_capacity(client, location.clone(), PART_SIZE)
        .with_max_concurrency(PARTS_IN_FLIGHT);
    let source = local_path.to_path_buf();
    let mut upload = Upload::new(writer, Handle::current());
    let (packed, mut upload) = tokio::task::spawn_blocking(move || {
        let packed = archive::pack(&source, &mut upload).map(drop);
        (packed, upload)
    })
    .await
    .expect("packing does not panic");
    let store = |fault| Error::from_store(fault, target.address(), "putting", location.as_ref());
    let size = upload.written;
    let fault = upload.fault.take();
    let mut writer = upload.into_writer();
    if let Err(error) = packed {
        // Nothing to report if the abort fails too: the first error is the one to act on.
        let _ = writer.abort().await;
        return Err(fault.map_or_else(|| local_error("packing", local_path, error), store));
    }
    // A small artifact is sent, and a multipart one completed, only now.
    if let Err(error) = writer.shutdown().await {
        let uploading = |error| local_error("uploading", local_path, error);
        return Err(store_fault(error).map_or_else(uploading, store));
    }
    Ok(Stored {
        key: location.to_string(),
        size,
    })
}

/// Gets the artifact at `key` and unpacks it to `dest_path` (a file, or a directory of its
/// contents, as it was put), creating the parent directories.
///
/// # Errors
/// [`Error::NotFound`] when there is no such key; the store's other answers as for
/// [`put_path`]; [`Error::NotAnArtifact`] when the object is not a `.tar.gz` made by
/// [`put_path`]; [`Error::Local`] when writing the files fails.
pub async fn get_path(target: &S3Target, key: &str, dest_path: &Path) -> Result<()> {
    let client = target.client()?;
    if local::reaches(target, key) {
        return local::get_path(target, &client, key, dest_path).await;
    }
    let location = Key::from(key);
    let fail = |source| Error::from_store(source, target.address(), "getting", location.as_ref());
    let result = client.get(&location).await.map_err(fail)?;
    if let Some(parent) = dest_path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| local_error("creating", parent, source))?;
    }
    let mut download = Download::new(result.into_stream(), Handle::current());
    let dest = dest_path.to_path_buf();
    let (unpacked, fault) = tokio::task::spawn_blocking(move || {
        let unpacked = archive::unpack(&mut download, &dest);
        (unpacked, download.fault)
    })
    .await
    .expect("unpacking does not panic");
    match (unpacked, fault) {
        (Ok(()), _) => Ok(()),
        (Err(_), Some(fault)) => Err(fail(fault)),
        (Err(error), None) if is_format_error(&error) => Err(Error::NotAnArtifact {
            key: location.to_string(),
            reason: error.to_string(),
        }),
        (Err(error), None) => Err(local_error("unpacking into", dest_path, error)),
    }
}

/// Every object whose key is under `prefix` (whole `/`-separated segments: `a/b` holds `a/b/c`,
/// not `a/bc`), in no particular order.
///
/// # Errors
/// The store's answers, as for [`put_path`].
pub async fn list(target: &S3Target, prefix: &str) -> Result<Vec<Stored>> {
    let client = target.client()?;
    let location = Key::from(prefix);
    client
        .list(Some(&location))
        .map_ok(|meta| Stored {
            key: meta.location.to_string(),
            size: meta.size,
        })
        .try_collect()
        .await
        .map_err(|source| Error::from_store(source, target.address(), "listing", prefix))
}

/// Deletes every object under `prefix` (as [`list`] reads it); returns how many.
///
/// # Errors
/// [`Error::EmptyPrefix`] for an empty prefix (it would be the whole bucket); the store's
/// answers, as for [`put_path`].
pub async fn delete_prefix(target: &S3Target, prefix: &str) -> Result<usize> {
    if prefix.trim_matches('/').is_empty() {
        return Err(Error::EmptyPrefix {
            place: format!("bucket {}", target.bucket),
        });
    }
    let client = target.client()?;
    let location = Key::from(prefix);
    let keys = client.list(Some(&location)).map_ok(|meta| meta.location);
    let deleted = client.delete_stream(keys.boxed());
    deleted
        .try_fold(0, |count, _| async move { Ok(count + 1) })
        .await
        .map_err(|source| Error::from_store(source, target.address(), "deleting under", prefix))
}
