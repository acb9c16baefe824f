//! Production plumbing around the operator: Prometheus [`metrics`] and the `/healthz`,
//! `/readyz` and `/metrics` [`http`] endpoints. The `run` command wires them around the
//! operator; this module knows nothing of workflows or of the handler framework (they call into
//! it, never the reverse).

mod custom;
pub mod http;
pub mod metrics;

pub use http::{Readiness, serve};
pub use metrics::{HandlerOutcome, Metrics, QueueSample, StepOutcome};
