//! The multipart uploads of the embedded store, without the hashing and copying `s3s-fs` does
//! for them: `s3s-fs` hashes each part with MD5 as it writes it, then on completion reads every
//! part back in 64 KiB reads, hashes it again and writes it into the object, three passes over
//! the bytes besides the write (docs/performance.md measures the difference). Here a part is
//! written as it comes, and completion renames a lone part into place, or joins several with
//! `copy_file_range` (what `std::io::copy` does between two files on Linux: no pass through
//! user space, a reflink on file systems that share extents) and renames the result into place.
//!
//! The files are where `s3s-fs` keeps them (its layout in 0.14: a part at
//! `ROOT/.upload_id-ID.part-N` ([`part_file`], where a step on this machine writes its one part
//! itself: `artifacts::local`), an upload at `ROOT/.upload-ID.json`, an object's attributes at
//! `ROOT/.bucket-B.object-K[.upload-ID].metadata.json` and its ETag in
//! `ROOT/.bucket-B.object-K.internal.json`, B and K in URL-safe base64), so that its other
//! answers (create, abort, list parts, GET, HEAD) read them unchanged.
//!
//! # Caveats
//! - A part's ETag is not its MD5 but a digest of its upload, number and size (S3 does not
//!   promise MD5 ETags for multipart objects; clients send them back, none checks them), and
//!   the object's `SHA-256(part ETags)-N`, in the form of S3's.
//! - A completion with `If-Match` or `If-None-Match` goes to `s3s-fs` as it is.

use std::fs::File;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::StreamExt;
use s3s::auth::Credentials;
use s3s::dto::{
    CompleteMultipartUploadInput, CompleteMultipartUploadOutput, ETag, UploadPartInput,
    UploadPartOutput,
};
use s3s::{S3Error, S3Response, S3Result, s3_error};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::artifacts::local::{part_file, plain};

/// Writes of a part's file are gathered to this size: the body comes in chunks of a few KiB,
/// each write of tokio's a trip to its blocking pool.
const WRITE_BUFFER: usize = 1 << 20;

/// S3's smallest part but the last.
const MIN_PART: u64 = 5 << 20;

/// Writes part `input.part_number` of an upload as its body comes.
pub(super) async fn upload_part(
    root: &Path,
    credentials: Option<&Credentials>,
    input: UploadPartInput,
) -> S3Result<S3Response<UploadPartOutput>> {
    if !(1..=10_000).contains(&input.part_number) {
        return Err(s3_error!(
            InvalidArgument,
            "Part number must be an integer between 1 and 10000, inclusive"
        ));
    }
    let id = verified(root, &input.upload_id, credentials).await?;
    let mut body = input.body.ok_or_else(|| s3_error!(IncompleteBody))?;
    let (file, written) = tempfile::NamedTempFile::new_in(root)
        .map_err(S3Error::internal_error)?
        .into_parts();
    let mut out =
        tokio::io::BufWriter::with_capacity(WRITE_BUFFER, tokio::fs::File::from_std(file));
    let mut size = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|error| S3Error::internal_error(std::io::Error::other(error)))?;
        out.write_all(&chunk)
            .await
            .map_err(S3Error::internal_error)?;
        size += chunk.len() as u64;
    }
    out.flush().await.map_err(S3Error::internal_error)?;
    let number = usize::try_from(input.part_number).map_err(|_| s3_error!(InvalidArgument))?;
    let part = part_file(root, &id, number);
    written.persist(&part).map_err(S3Error::internal_error)?;
    let e_tag = hex(&Sha256::digest(format!(
        "{id}/{}/{size}",
        input.part_number
    )))[..32]
        .to_string();
    Ok(S3Response::new(UploadPartOutput {
        e_tag: Some(ETag::Strong(e_tag)),
        ..UploadPartOutput::default()
    }))
}

/// Joins the parts of an upload into its object, in place of what was there.
pub(super) async fn complete(
    root: &Path,
    credentials: Option<&Credentials>,
    input: CompleteMultipartUploadInput,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let parts = (input.multipart_upload.and_then(|m| m.parts)).unwrap_or_default();
    if parts.is_empty() {
        return Err(s3_error!(InvalidPart, "You must specify at least one part"));
    }
    let id = verified(root, &input.upload_id, credentials).await?;
    for (i, part) in (1..).zip(&parts) {
        if part.part_number != Some(i) {
            return Err(s3_error!(InvalidRequest, "invalid part order"));
        }
    }
    let (bucket, key) = (input.bucket, input.key);
    if !plain(&bucket) || !plain(&key) {
        return Err(s3_error!(
            InvalidArgument,
            "the bucket or key is not a plain path"
        ));
    }
    let object = root.join(&bucket).join(&key);
    let paths: Vec<PathBuf> = (1..=parts.len()).map(|n| part_file(root, &id, n)).collect();
    let dir = root.to_path_buf();
    tokio::task::spawn_blocking(move || join(&dir, &paths, &object))
        .await
        .map_err(S3Error::internal_error)??;
    let tags: Vec<String> = (parts.iter())
        .map(|p| {
            p.e_tag
                .as_ref()
                .map_or_else(String::new, |e| e.value().to_string())
        })
        .collect();
    let e_tag = format!(
        "{}-{}",
        &hex(&Sha256::digest(tags.concat()))[..32],
        parts.len()
    );
    let internal = |suffix: &str| {
        root.join(format!(
            ".bucket-{}.object-{}{suffix}",
            URL_SAFE_NO_PAD.encode(&bucket),
            URL_SAFE_NO_PAD.encode(&key)
        ))
    };
    let done = async {
        // The attributes given at the upload's creation become the object's.
        let attributes = internal(&format!(".upload-{id}.metadata.json"));
        if tokio::fs::try_exists(&attributes).await? {
            tokio::fs::rename(&attributes, internal(".metadata.json")).await?;
        }
        let info = serde_json::json!({ "e_tag": e_tag }).to_string();
        tokio::fs::write(internal(".internal.json"), info).await?;
        tokio::fs::remove_file(root.join(format!(".upload-{id}.json"))).await
    };
    done.await.map_err(S3Error::internal_error)?;
    Ok(S3Response::new(CompleteMultipartUploadOutput {
        bucket: Some(bucket),
        key: Some(key),
        e_tag: Some(ETag::Strong(e_tag)),
        ..CompleteMultipartUploadOutput::default()
    }))
}

/// The parts, in order, copied into a new file that then takes the object's place; the parts
/// removed once it has. One part takes the object's place itself.
fn join(root: &Path, parts: &[PathBuf], object: &Path) -> S3Result<()> {
    if let Some(parent) = object.parent() {
        std::fs::create_dir_all(parent).map_err(S3Error::internal_error)?;
    }
    if let [part] = parts {
        return std::fs::rename(part, object).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => s3_error!(InvalidPart),
            _ => S3Error::internal_error(error),
        });
    }
    let mut joined = tempfile::NamedTempFile::new_in(root).map_err(S3Error::internal_error)?;
    for (i, path) in parts.iter().enumerate() {
        let mut part = File::open(path).map_err(|_| s3_error!(InvalidPart))?;
        // File to file: `copy_file_range`, the bytes never leave the kernel.
        let size =
            std::io::copy(&mut part, joined.as_file_mut()).map_err(S3Error::internal_error)?;
        if i + 1 < parts.len() && size < MIN_PART {
            return Err(s3_error!(EntityTooSmall));
        }
    }
    joined.persist(object).map_err(S3Error::internal_error)?;
    for path in parts {
        // A part left behind is only space: the object is whole.
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The upload's id as `s3s-fs` names its files, once its upload is known and was made with
/// these credentials.
async fn verified(
    root: &Path,
    upload_id: &str,
    credentials: Option<&Credentials>,
) -> S3Result<String> {
    let id = uuid::Uuid::parse_str(upload_id).map_err(|_| s3_error!(InvalidRequest))?;
    let owner = match tokio::fs::read(root.join(format!(".upload-{id}.json"))).await {
        Ok(content) => {
            serde_json::from_slice::<Option<String>>(&content).map_err(S3Error::internal_error)?
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(s3_error!(AccessDenied));
        }
        Err(error) => return Err(S3Error::internal_error(error)),
    };
    if owner.as_deref() != credentials.map(|c| c.access_key.as_str()) {
        return Err(s3_error!(AccessDenied));
    }
    Ok(id.to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
