//! What every part of the control plane shares, as apimachinery is shared by Kubernetes'
//! components: API errors as the real server reports them ([`error`]) and the registry of the
//! resources it serves ([`resources`]). Depends on nothing else of the crate.

pub mod error;
pub mod resources;
pub mod strategy;
