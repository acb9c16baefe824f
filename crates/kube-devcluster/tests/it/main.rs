//! The integration tests of the embedded control plane, one binary (one link of the control
//! plane instead of one per file): conformance to the real API server as kubectl, the Python
//! client and kube-rs see it, the Job controller and kubelet, fault injection, and
//! authentication and RBAC. A module per
//! area; `support` holds the fixtures they share.

mod support;

mod conformance;
mod conformance_errors;
mod conformance_events;
mod conformance_eviction;
mod conformance_init_containers;
mod conformance_kubelet;
mod conformance_patch;
mod conformance_protobuf;
mod conformance_requests;
mod conformance_schemas;
mod conformance_services;
mod conformance_termination;
mod exec;
mod faults;
mod jobs;
mod kubectl;
mod python;
mod rbac;
mod scheduling;
mod smoke;
