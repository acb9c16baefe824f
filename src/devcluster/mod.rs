//! The embedded Kubernetes control plane: an API server and a job runner in one process.
