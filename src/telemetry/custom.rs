//! The custom metrics workflows declare (`metrics.prometheus`), on the operator's `/metrics`
//! after its own: a registry of their own, a family registered the first time a name is
//! recorded, prefixed `workflow_operator_` as every metric of the operator. A counter's name
//! ending `_total` loses it (OpenMetrics adds it back). A name recorded again must keep its kind
//! (and a histogram its buckets): the first recording decides, a clashing one is refused.
//! Kept in memory only, as Argo's: a restarted operator starts them again from nothing.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use workflow_operator_core::custom_metrics::{Kind, Recording};

type Labels = Vec<(String, String)>;

/// Builds a histogram of a metric's declared buckets.
#[derive(Clone, Debug)]
struct Buckets(Arc<Vec<f64>>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// One declared metric's family.
enum Declared {
    Counter(Family<Labels, Counter<f64, AtomicU64>>),
    Gauge(Family<Labels, Gauge<f64, AtomicU64>>),
    Histogram(Family<Labels, Histogram, Buckets>, Arc<Vec<f64>>),
}

/// The custom metrics recorded so far.
pub(super) struct Custom {
    pub(super) registry: Registry,
    families: HashMap<String, Declared>,
}

impl Default for Custom {
    fn default() -> Self {
        Self {
            registry: Registry::with_prefix("workflow_operator"),
            families: HashMap::new(),
        }
    }
}

impl Custom {
    /// Records `recording`, registering its family the first time.
    ///
    /// # Errors
    /// Its name was recorded before as another kind, or a histogram with other buckets.
    pub(super) fn record(&mut self, recording: &Recording) -> Result<(), String> {
        let name = match recording.kind {
            Kind::Counter => (recording.name.strip_suffix("_total")).unwrap_or(&recording.name),
            _ => &recording.name,
        };
        if !self.families.contains_key(name) {
            let declared = self.register(name, recording);
            self.families.insert(name.to_string(), declared);
        }
        if recording.kind == Kind::Counter && (recording.value.is_nan() || recording.value < 0.0) {
            return Err(format!("counter {name:?} cannot add {}", recording.value));
        }
        let labels = &recording.labels;
        match (&self.families[name], &recording.kind) {
            (Declared::Counter(family), Kind::Counter) => {
                family.get_or_create(labels).inc_by(recording.value);
            }
            (Declared::Gauge(family), Kind::Gauge) => {
                family.get_or_create(labels).set(recording.value);
            }
            (Declared::Histogram(family, buckets), Kind::Histogram(wanted))
                if **buckets == *wanted =>
            {
                family.get_or_create(labels).observe(recording.value);
            }
            _ => {
                return Err(format!(
                    "metric {name:?} was first recorded as another kind or with other buckets"
                ));
            }
        }
        Ok(())
    }

    fn register(&mut self, name: &str, recording: &Recording) -> Declared {
        let help = recording.help.as_str();
        match &recording.kind {
            Kind::Counter => {
                let family = Family::default();
                self.registry.register(name, help, family.clone());
                Declared::Counter(family)
            }
            Kind::Gauge => {
                let family = Family::default();
                self.registry.register(name, help, family.clone());
                Declared::Gauge(family)
            }
            Kind::Histogram(buckets) => {
                let buckets = Arc::new(buckets.clone());
                let family = Family::new_with_constructor(Buckets(buckets.clone()));
                self.registry.register(name, help, family.clone());
                Declared::Histogram(family, buckets)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(name: &str, kind: Kind, value: f64) -> Recording {
        Recording {
            name: name.into(),
            help: "h".into(),
            labels: vec![("name".into(), "a".into())],
            kind,
            value,
        }
    }

    #[test]
    fn a_name_keeps_its_first_kind_and_buckets_and_a_counter_s_total_is_not_doubled() {
        let mut custom = Custom::default();
        custom
            .record(&recording("runs_total", Kind::Counter, 2.0))
            .unwrap();
        custom
            .record(&recording("runs", Kind::Counter, 1.5))
            .unwrap();
        let clash = custom.record(&recording("runs", Kind::Gauge, 1.0));
        assert!(clash.unwrap_err().contains("another kind"));
        let negative = custom.record(&recording("runs", Kind::Counter, -1.0));
        assert!(negative.unwrap_err().contains("cannot add"));
        let buckets = |b: &[f64]| Kind::Histogram(b.to_vec());
        custom
            .record(&recording("h", buckets(&[1.0]), 0.5))
            .unwrap();
        assert!(
            custom
                .record(&recording("h", buckets(&[2.0]), 0.5))
                .is_err()
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &custom.registry).unwrap();
        assert!(
            text.contains(r#"workflow_operator_runs_total{name="a"} 3.5"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workflow_operator_h_bucket{le="1.0",name="a"} 1"#),
            "{text}"
        );
    }
}
