//! The embedded Kubernetes control plane: an API server, a job controller, a kubelet that runs
//! each pod's command as a local process, and a garbage collector, all in one process. It knows
//! nothing of workflows: it serves whatever CRDs are installed. `make demo`, the integration
//! tests and the benchmarks run on it (DESIGN section 5).

pub mod admission;
pub mod error;
pub mod path;
pub mod resources;
pub mod selector;
pub mod store;
