//! The API server: HTTP routing of the Kubernetes API ([`server`]) and what it does to a request
//! on the way to the store and back, as k8s.io/apiserver and kube-apiserver do: with RBAC on
//! (`DevClusterOptions::rbac`) who makes it ([`authn`], [`impersonation`]) and whether it is
//! allowed ([`request_info`], [`rbac`]), then paths and query parameters, list options,
//! admission and validation, the patch types with managed fields,
//! dry run, request bodies in JSON, YAML and protobuf, representations (as stored, metadata
//! only, tables), watches, discovery and OpenAPI, fault injection and request counters. Reads
//! pod logs from the [`kubelet`](crate::kubelet) and runs `pods/exec` sessions through it
//! ([`exec`]: WebSocket remote command protocols); applies the per-kind rules of
//! [`crate::registry`]; stores through [`crate::storage`].

pub mod admission;
pub mod auth_reviews;
pub mod authn;
pub mod builtin_schemas;
pub mod custom_resources;
pub mod dry_run;
pub mod eviction;
pub mod exec;
pub mod faults;
pub mod field_labels;
pub mod impersonation;
pub mod list_options;
pub mod managed_fields;
pub mod merge_keys;
pub mod metrics;
pub mod namespace_lifecycle;
pub mod openapi;
pub mod openapi_v2;
pub mod patch;
pub mod path;
pub mod protobuf;
pub mod query;
pub mod rbac;
pub mod representation;
pub mod request_info;
pub mod server;
pub mod typed_decode;
pub mod watch;
