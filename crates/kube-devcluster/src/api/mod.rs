//! What every part of the control plane shares, as apimachinery is shared by Kubernetes'
//! components: API errors as the real server reports them ([`error`]) and the registry of the
//! resources it serves ([`resources`]), objects' bytes in the order the real server writes
//! their keys ([`go_json`]), and the version of Kubernetes it answers as ([`GIT_VERSION`]).
//! Depends on nothing else of the crate.

pub mod error;
pub mod go_json;
pub mod resources;
pub mod strategy;

/// The Kubernetes version this control plane answers as: the API server's `/version` and the
/// kubelet's `nodeInfo.kubeletVersion`.
pub const GIT_VERSION: &str = "v1.34.0-workflow-devcluster";
