//! The repository artifacts go to, whichever kind it is: what the step agent, the operator's
//! garbage collection and the CLI hold, so that none of them asks which kind it uses.

use std::path::Path;

use super::error::Result;
use super::oci::{self, OciTarget};
use super::target::S3Target;
use super::transfer::{self, Stored};

/// An artifact repository with its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An S3-compatible bucket: each artifact an object under its key.
    S3(S3Target),
    /// An OCI registry's repository: each artifact an OCI artifact under a tag of its key.
    Oci(OciTarget),
}

impl Target {
    /// Stores the file or directory at `local_path` as the artifact `key`, replacing it.
    ///
    /// # Errors
    /// As [`transfer::put_path`] and [`oci::put_path`].
    pub async fn put_path(&self, key: &str, local_path: &Path) -> Result<Stored> {
        match self {
            Target::S3(target) => transfer::put_path(target, key, local_path).await,
            Target::Oci(target) => oci::put_path(target, key, local_path).await,
        }
    }

    /// Gets the artifact `key` to `dest_path`.
    ///
    /// # Errors
    /// As [`transfer::get_path`] and [`oci::get_path`] (see [`super::Error::is_not_found`]).
    pub async fn get_path(&self, key: &str, dest_path: &Path) -> Result<()> {
        match self {
            Target::S3(target) => transfer::get_path(target, key, dest_path).await,
            Target::Oci(target) => oci::get_path(target, key, dest_path).await,
        }
    }

    /// Deletes every artifact whose key is under `prefix`; how many.
    ///
    /// # Errors
    /// As [`transfer::delete_prefix`] and [`oci::delete_prefix`].
    pub async fn delete_prefix(&self, prefix: &str) -> Result<usize> {
        match self {
            Target::S3(target) => transfer::delete_prefix(target, prefix).await,
            Target::Oci(target) => oci::delete_prefix(target, prefix).await,
        }
    }
}
