//! What etcd and the API server's storage layer are to Kubernetes: the object store, with its
//! resourceVersions, history and change stream ([`store`]); label and field selectors
//! ([`selector`]); and how long a deleted pod is given to stop ([`pod_deletion`]), which the
//! store applies to every delete of a pod. Depends only on [`crate::api`].

pub mod pod_deletion;
pub mod selector;
pub mod store;
