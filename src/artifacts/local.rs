//! Put and get through the store's own directory, when the step runs on the machine that holds
//! it (the repository's `localDirectory`: the embedded store of `workflow-operator dev`). Over
//! HTTP an artifact's bytes cross the archive, the HTTP client, the loopback socket and the
//! store's part file on a put; here packing writes the upload's one part straight into the
//! store's directory, and a get unpacks from the object's file.
//!
//! The store still judges: the upload is created and completed through the endpoint, and a
//! get asks it for the object's HEAD first, with the credentials, so the store checks who
//! uploads and reads and says whether the object is there; it records the object's attributes,
//! puts the part in place (a rename, for one part) and announces the object to whoever listens
//! (`dev`'s bucket triggers), as for an upload over HTTP.
//!
//! The files are where the embedded store keeps them (`s3s-fs` 0.14's layout, which
//! `embedded::multipart` reads): an object at `DIR/BUCKET/KEY`, part `N` of upload `ID` at
//! `DIR/.upload_id-ID.part-N`.
//!
//! # Caveats
//! - Only for a store with this layout: MinIO's directory holds `xl.meta` files, not objects.
//! - A key that is not a plain relative path (`..`, absolute) goes over HTTP, where the store
//!   judges it.

use std::path::{Component, Path, PathBuf};

use object_store::ObjectStoreExt as _;
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;

use super::error::{Error, Result, is_format_error, local_error};
use super::target::S3Target;
use super::{archive, kernel_copy};

/// Where part `number` of upload `id` is kept in the store's directory `root`.
pub fn part_file(root: &Path, id: &str, number: usize) -> PathBuf {
    root.join(format!(".upload_id-{id}.part-{number}"))
}

/// Whether `name` (a bucket or key) is a plain relative path (no `.` or `..`, not absolute),
/// which `s3s-fs` resolves to the same file as a join does.
pub(crate) fn plain(name: &str) -> bool {
    (Path::new(name).components()).all(|c| matches!(c, Component::Normal(_)))
}

/// The bucket's directory and the object's file, when `key` can be reached through it.
fn object_file(target: &S3Target, key: &str) -> Option<(PathBuf, PathBuf)> {
    let bucket = target
        .local_bucket()
        .filter(|_| plain(key) && !key.is_empty())?;
    let file = bucket.join(key);
    Some((bucket, file))
}

/// Whether put and get of `key` go through the store's directory.
pub(crate) fn reaches(target: &S3Target, key: &str) -> bool {
    object_file(target, key).is_some()
}

/// Packs `local_path` into the one part of an upload of `key` written in the store's
/// directory, then completes the upload through the endpoint; the archive's size.
///
/// # Errors
/// As [`super::put_path`].
pub(crate) async fn put_path(
    target: &S3Target,
    client: &AmazonS3,
    key: &str,
    local_path: &Path,
) -> Result<u64> {
    let (bucket, _) = object_file(target, key).expect("put_path is called when reaches()");
    let root = bucket.parent().map(Path::to_path_buf).unwrap_or_default();
    let location = Key::from(key);
    let store = |fault| Error::from_store(fault, target.address(), "putting", location.as_ref());
    let id = client.create_multipart(&location).await.map_err(store)?;
    let part = part_file(&root, &id, 1);
    let source = local_path.to_path_buf();
    let packed = tokio::task::spawn_blocking(move || pack_into(&source, &root, &part))
        .await
        .expect("packing does not panic");
    let size = match packed {
        Ok(size) => size,
        Err(error) => {
            // Nothing to report if the abort fails too: the first error is the one to act on.
            let _ = client.abort_multipart(&location, &id).await;
            return Err(local_error("packing", local_path, error));
        }
    };
    let parts = vec![PartId {
        content_id: format!("local-{size}"),
    }];
    if let Err(fault) = client.complete_multipart(&location, &id, parts).await {
        let _ = client.abort_multipart(&location, &id).await;
        return Err(store(fault));
    }
    Ok(size)
}

/// Packs `source` into a new file of `root` that then becomes `part` (a file of incompressible
/// bytes copied by the kernel, [`kernel_copy`]); its size.
fn pack_into(source: &Path, root: &Path, part: &Path) -> std::io::Result<u64> {
    let mut file = tempfile::NamedTempFile::new_in(root)?;
    let file = match kernel_copy::pack_file(source, file.as_file_mut())? {
        Some(_) => file,
        None => {
            let out = std::io::BufWriter::with_capacity(archive::BUFFER, file);
            (archive::pack(source, out)?)
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?
        }
    };
    let size = file.as_file().metadata()?.len();
    file.persist(part).map_err(|e| e.error)?;
    Ok(size)
}

/// Unpacks the object `key` from its file in the store's directory to `dest_path`.
///
/// # Errors
/// As [`super::get_path`].
pub(crate) async fn get_path(
    target: &S3Target,
    client: &AmazonS3,
    key: &str,
    dest_path: &Path,
) -> Result<()> {
    let (_, object) = object_file(target, key).expect("get_path is called when reaches()");
    // The store judges the credentials and whether the object is there, as for a GET.
    let location = Key::from(key);
    (client.head(&location).await)
        .map_err(|fault| Error::from_store(fault, target.address(), "getting", key))?;
    if let Some(parent) = dest_path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| local_error("creating", parent, source))?;
    }
    let dest = dest_path.to_path_buf();
    let unpack = move || {
        if kernel_copy::unpack_file(&object, &dest)? {
            return Ok(());
        }
        archive::unpack(std::fs::File::open(&object)?, &dest)
    };
    let unpacked = tokio::task::spawn_blocking(unpack)
        .await
        .expect("unpacking does not panic");
    match unpacked {
        Ok(()) => Ok(()),
        Err(error) if is_format_error(&error) => Err(Error::NotAnArtifact {
            key: key.to_string(),
            reason: error.to_string(),
        }),
        Err(error) => Err(local_error("unpacking into", dest_path, error)),
    }
}
