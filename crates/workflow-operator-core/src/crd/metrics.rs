//! Custom Prometheus metrics a workflow (`spec.metrics`) and a step (`metrics`) declare, as
//! Argo's `metrics.prometheus`: the operator records them on its own `/metrics` when the step
//! or the workflow ends. What their expressions may name is [`crate::custom_metrics`]'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `metrics`: the custom metrics recorded when the step (or, on the spec, the workflow) ends.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomMetrics {
    /// Prometheus metrics, each a gauge, a counter or a histogram.
    #[serde(default)]
    pub prometheus: Vec<PrometheusMetric>,
}

/// One metric: its name, help and labels, when it is recorded, and exactly one of `gauge`,
/// `counter` or `histogram`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusMetric {
    /// The metric's name on the operator's `/metrics`, as given (no prefix): letters, digits
    /// and `_`, not starting with a digit.
    pub name: String,

    /// Its help text (`# HELP`).
    #[serde(default)]
    pub help: String,

    /// Its labels, as given; a value may use the same variables as `value`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<MetricLabel>,

    /// Recorded only when this holds: `{{status}} == Failed`, `{{status}} != Succeeded`
    /// (`==`, `!=`, `<`, `>`, `<=`, `>=` between two values, numbers compared as numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,

    /// Set to `value` (a number once its variables are filled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gauge: Option<GaugeMetric>,

    /// Increased by `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<CounterMetric>,

    /// Observes `value` into `buckets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramMetric>,
}

/// A label of a metric.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct MetricLabel {
    /// The label's name.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// A gauge: set to `value` when the step or workflow ends.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct GaugeMetric {
    /// The value, e.g. `{{duration}}`.
    pub value: String,
    /// Argo updates such a gauge while the step runs; here it is set once, when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<bool>,
}

/// A counter: increased by `value` each time it is recorded.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct CounterMetric {
    /// The increment, e.g. `1`.
    pub value: String,
}

/// A histogram: observes `value` into `buckets`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct HistogramMetric {
    /// The buckets' upper bounds (at least one).
    pub buckets: Vec<f64>,
    /// The observed value.
    pub value: String,
}
