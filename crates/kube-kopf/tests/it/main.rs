//! The integration tests of the handler framework on the embedded control plane, one binary (one
//! link instead of one per file): handler order, retries, restarts, faults, mirrors and scale. A
//! module per area; `common` holds the fixtures they share.

// Where the operator's tests (`tests/telemetry_ready.rs` of the workspace root) include it too.
#[path = "../common/mod.rs"]
mod common;

mod faults;
mod handlers;
mod mirror;
mod restart;
mod scale;
