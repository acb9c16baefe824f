//! Artifacts: files and directories a step hands to later steps through an S3-compatible
//! bucket or an OCI registry, each kept as a `.tar.gz` under a key that names the step's Job
//! (the core's `agent::artifact_key`). The step agent calls [`Target::put_path`] after a
//! step's command and [`Target::get_path`] before it; the operator calls
//! [`Target::delete_prefix`] to collect a workflow's artifacts. Needs no `dev` feature, except
//! [`embedded`].
//!
//! - [`store`]: the repository, either kind ([`Target`]).
//! - [`target`]: the bucket, its credentials and the client.
//! - [`oci`]: an OCI registry's repository, its tags, push, pull and delete.
//! - [`credentials`]: a repository's credentials, read from its Secret.
//! - [`transfer`]: put, get, list, delete.
//! - [`error`]: what failed, in the user's words.
//! - `archive`, `stored` and `bridge`: the `.tar.gz` layout, its stored blocks written without
//!   copying, and the blocking I/O it runs on.
//! - [`local`]: put and get through the store's own directory, on the machine that holds it;
//!   `kernel_copy`: one file's stored archive there, its bytes moved by the kernel.
//! - [`embedded`]: the store `workflow-operator dev` and the tests run (the `dev` feature), its
//!   multipart uploads its own (`embedded::multipart`).

mod archive;
mod bridge;
pub mod credentials;
#[cfg(feature = "dev")]
pub mod embedded;
pub mod error;
mod kernel_copy;
pub mod local;
pub mod oci;
pub mod store;
mod stored;
pub mod target;
pub mod transfer;

pub use error::{Error, Result};
pub use store::Target;
pub use target::S3Target;
pub use transfer::{Stored, delete_prefix, get_path, list, put_path};
