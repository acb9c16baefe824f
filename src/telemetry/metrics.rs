//! The operator's Prometheus metrics, on `prometheus-client`, encoded in the OpenMetrics text
//! format for the `/metrics` endpoint ([`super::http`]).
//!
//! The operator's handlers call the recording methods ([`Metrics::step_started`],
//! [`Metrics::handler_done`], ...); [`crate::leader`] sets the leader gauge; the queue gauges
//! are read at every scrape from the source given to [`Metrics::sample_queue`] (the `run`
//! command gives the handler framework's counters). Every metric is prefixed
//! `workflow_operator_`:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `workflows` | gauge | `status` |
//! | `steps_started_total` | counter | |
//! | `steps_finished_total` | counter | `outcome` = `completed` \| `failed` \| `timed_out` |
//! | `step_duration_seconds` | histogram | `outcome` |
//! | `handler_duration_seconds` | histogram | `handler` |
//! | `handler_outcomes_total` | counter | `handler`, `outcome` = `success` \| `temporary` \| `permanent` |
//! | `api_errors_total` | counter: the operator's refused API calls, status writes made behind included (each try); not the framework's own writes | `verb` |
//! | `queue_depth` | gauge: objects waiting for a worker | |
//! | `active_workers` | gauge: objects being processed | |
//! | `intake_window` | gauge: new workflows that may be set up at once | |
//! | `leader` | gauge (0 or 1) | |
//! | `queued_steps` | gauge: steps waiting in a queue | `queue` = a Kueue queue name \| `builtin` |
//! | `queue_wait_seconds` | histogram: how long a step waited before it was admitted | `queue` |
//! | `trigger_deliveries_total` | counter: deliveries to WorkFlowTriggers, by answer (`started`, `already_started`, `filtered`, `unauthorized`, `not_found`, `too_large`, `rate_limited`, `unavailable`, `invalid`, `bad_request`, `misconfigured`) | `namespace`, `trigger`, `outcome` |
//! | `trigger_answer_seconds` | histogram: time from a delivery's arrival to its answer | `outcome` |
//!
//! A family with a free-form label (`status`, `handler`, `verb`) appears in the output once a
//! value was first recorded; the `run` command should set every workflow status at start-up.
//! Step outcomes are known here and start at zero.
//!
//! The custom metrics workflows declare follow the operator's own, with the same prefix
//! (`telemetry::custom`, [`Metrics::record_custom`]).
//!
//! Finished steps are one counter with an `outcome` label rather than three counters, the
//! Prometheus convention for outcomes of one thing: `sum(rate(..._steps_finished_total[5m]))` is
//! the completion rate and no outcome can be missed by a dashboard.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use workflow_operator_core::custom_metrics::Recording;

use super::custom::Custom;

/// How a step's Job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepOutcome {
    Completed,
    Failed,
    TimedOut,
}

impl StepOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
        }
    }
}

/// How one handler invocation ended, in Kopf's terms: success, a temporary error (retried after
/// a delay) or a permanent one (not retried).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerOutcome {
    Success,
    Temporary,
    Permanent,
}

impl HandlerOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Temporary => "temporary",
            Self::Permanent => "permanent",
        }
    }
}

impl EncodeLabelValue for StepOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

impl EncodeLabelValue for HandlerOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StepLabels {
    outcome: StepOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HandlerLabels {
    handler: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HandlerOutcomeLabels {
    handler: String,
    outcome: HandlerOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ShardLabels {
    /// The shard's index, `0..S`.
    shard: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueLabels {
    /// `spec.queueName` (Kueue), or `builtin` for `--max-running-steps`.
    queue: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TriggerLabels {
    namespace: String,
    trigger: String,
    outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The work queue at one moment, as the handler framework counts it (in objects).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// Objects with work waiting for a worker (for the initial listings or a free slot).
    pub queued: usize,
    /// Objects being processed.
    pub running: usize,
    /// Never-handled objects that may be processed at once (the framework's intake window).
    pub intake_window: usize,
}

type QueueSource = Box<dyn Fn() -> QueueSample + Send + Sync>;

/// Where the count of cached workflows is read from at a scrape.
type CountSource = Box<dyn Fn() -> usize + Send + Sync>;

/// Steps run from seconds to hours: 0.5 s doubling to about 68 min (14 buckets).
fn step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 14))
}

/// Handlers take milliseconds unless the API is slow: 1 ms doubling to about 16 s (15 buckets).
fn handler_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The WorkFlowTrigger receiver's metrics, registered: its answers by trigger and outcome, and
/// how long each took.
fn register_triggers(
    registry: &mut Registry,
) -> (
    Family<TriggerLabels, Counter>,
    HistogramFamily<OutcomeLabels>,
) {
    let deliveries = Family::<TriggerLabels, Counter>::default();
    registry.register(
        "trigger_deliveries",
        "Deliveries to WorkFlowTriggers, by namespace, trigger and answer",
        deliveries.clone(),
    );
    let answer = HistogramFamily::<OutcomeLabels>::new_with_constructor(handler_histogram);
    registry.register_with_unit(
        "trigger_answer",
        "Time from a delivery's arrival to its answer, by answer",
        Unit::Seconds,
        answer.clone(),
    );
    (deliveries, answer)
}

struct Inner {
    registry: Registry,
    workflows: Family<StatusLabels, Gauge>,
    steps_started: Counter,
    steps_finished: Family<StepLabels, Counter>,
    step_duration: HistogramFamily<StepLabels>,
    handler_duration: HistogramFamily<HandlerLabels>,
    handler_outcomes: Family<HandlerOutcomeLabels, Counter>,
    api_errors: Family<VerbLabels, Counter>,
    queued_steps: Family<QueueLabels, Gauge>,
    queue_wait: HistogramFamily<QueueLabels>,
    trigger_deliveries: Family<TriggerLabels, Counter>,
    trigger_answer: HistogramFamily<OutcomeLabels>,
    queue_depth: Gauge,
    active_workers: Gauge,
    intake_window: Gauge,
    queue_source: RwLock<Option<QueueSource>>,
    cached_source: RwLock<Option<CountSource>>,
    leader: Gauge,
    shards_held: Gauge,
    shard_held: Family<ShardLabels, Gauge>,
    cached_workflows: Gauge,
    custom: Mutex<Custom>,
}

/// The metrics of who works what: the leader Lease, and with `run --shards` the shards held,
/// which ones, and the workflows cached (with or without shards).
fn register_shards(registry: &mut Registry) -> (Gauge, Gauge, Family<ShardLabels, Gauge>, Gauge) {
    let leader = Gauge::default();
    registry.register(
        "leader",
        "1 while this replica holds the leader Lease, else 0",
        leader.clone(),
    );
    let shards_held = Gauge::default();
    registry.register(
        "shards_held",
        "Shards whose Lease this replica holds and whose work it runs (run --shards)",
        shards_held.clone(),
    );
    let shard_held = Family::<ShardLabels, Gauge>::default();
    registry.register(
        "shard_held",
        "1 for each shard whose work this replica runs now (run --shards)",
        shard_held.clone(),
    );
    let cached_workflows = Gauge::default();
    registry.register(
        "cached_workflows",
        "Workflows in this replica's cache now (with run --shards, those of the shards it holds)",
        cached_workflows.clone(),
    );
    (leader, shards_held, shard_held, cached_workflows)
}

/// The operator's metrics. Cheap to clone (one `Arc`); every clone records into the same
/// registry, so the handlers, the leader election and the HTTP server share one value.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered (and at zero).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("workflow_operator");
        let workflows = Family::<StatusLabels, Gauge>::default();
        registry.register(
            "workflows",
            "Workflows by their workflow-status",
            workflows.clone(),
        );
        let steps_started = Counter::default();
        registry.register(
            "steps_started",
            "Steps whose Job was created",
            steps_started.clone(),
        );
        let steps_finished = Family::<StepLabels, Counter>::default();
        registry.register(
            "steps_finished",
            "Steps that ended, by outcome (completed, failed, timed_out)",
            steps_finished.clone(),
        );
        let step_duration = HistogramFamily::<StepLabels>::new_with_constructor(step_histogram);
        registry.register_with_unit(
            "step_duration",
            "Time from a step's Job being created to its end, by outcome",
            Unit::Seconds,
            step_duration.clone(),
        );
        let handler_duration =
            HistogramFamily::<HandlerLabels>::new_with_constructor(handler_histogram);
        registry.register_with_unit(
            "handler_duration",
            "Time one handler invocation took, by handler",
            Unit::Seconds,
            handler_duration.clone(),
        );
        let handler_outcomes = Family::<HandlerOutcomeLabels, Counter>::default();
        registry.register(
            "handler_outcomes",
            "Handler invocations by handler and outcome (success, temporary, permanent)",
            handler_outcomes.clone(),
        );
        let api_errors = Family::<VerbLabels, Counter>::default();
        registry.register(
            "api_errors",
            "Failed Kubernetes API calls, by verb",
            api_errors.clone(),
        );
        let queued_steps = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "queued_steps",
            "Steps waiting in a queue (a Kueue queue or the built-in --max-running-steps), by queue",
            queued_steps.clone(),
        );
        let queue_wait = HistogramFamily::<QueueLabels>::new_with_constructor(step_histogram);
        registry.register_with_unit(
            "queue_wait",
            "Time a step waited in its queue before it was admitted, by queue",
            Unit::Seconds,
            queue_wait.clone(),
        );
        let (trigger_deliveries, trigger_answer) = register_triggers(&mut registry);
        let queue_depth = Gauge::default();
        registry.register(
            "queue_depth",
            "Objects with work waiting for a worker",
            queue_depth.clone(),
        );
        let active_workers = Gauge::default();
        registry.register(
            "active_workers",
            "Objects being processed, each by one worker",
            active_workers.clone(),
        );
        let intake_window = Gauge::default();
        registry.register(
            "intake_window",
            "New workflows that may be set up at once: grows while the API server echoes writes promptly, halves when it falls behind",
            intake_window.clone(),
        );
        // Known outcomes start at zero, so `rate()` sees the first step end (a series that
        // appears at 1 has no earlier sample to rate against).
        for outcome in [
            StepOutcome::Completed,
            StepOutcome::Failed,
            StepOutcome::TimedOut,
        ] {
            let labels = StepLabels { outcome };
            drop(steps_finished.get_or_create(&labels));
            drop(step_duration.get_or_create(&labels));
        }
        let (leader, shards_held, shard_held, cached_workflows) = register_shards(&mut registry);
        Self {
            inner: Arc::new(Inner {
                registry,
                workflows,
                steps_started,
                steps_finished,
                step_duration,
                handler_duration,
                handler_outcomes,
                api_errors,
                queued_steps,
                queue_wait,
                trigger_deliveries,
                trigger_answer,
                queue_depth,
                active_workers,
                intake_window,
                queue_source: RwLock::new(None),
                cached_source: RwLock::new(None),
                leader,
                shards_held,
                shard_held,
                cached_workflows,
                custom: Mutex::default(),
            }),
        }
    }

    /// Sets how many workflows are in `status` (`Created`, `Started`, `Completed`, `Failed`).
    pub fn set_workflows(&self, status: &str, n: i64) {
        self.inner
            .workflows
            .get_or_create(&StatusLabels {
                status: status.to_owned(),
            })
            .set(n);
    }

    /// Sets how many steps wait in `queue` (a Kueue queue name, or `builtin`).
    pub fn set_queued_steps(&self, queue: &str, n: i64) {
        self.inner
            .queued_steps
            .get_or_create(&QueueLabels {
                queue: queue.to_owned(),
            })
            .set(n);
    }

    /// A step waited `wait` in `queue` before it was admitted.
    pub fn queue_wait(&self, queue: &str, wait: Duration) {
        self.inner
            .queue_wait
            .get_or_create(&QueueLabels {
                queue: queue.to_owned(),
            })
            .observe(wait.as_secs_f64());
    }

    /// A step's Job was created.
    pub fn step_started(&self) {
        self.inner.steps_started.inc();
    }

    /// A step ended after `duration` (from its Job's creation).
    pub fn step_finished(&self, outcome: StepOutcome, duration: Duration) {
        let labels = StepLabels { outcome };
        self.inner.steps_finished.get_or_create(&labels).inc();
        self.inner
            .step_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// One invocation of the handler `name` ended with `outcome` after `elapsed`.
    pub fn handler_done(&self, name: &str, outcome: HandlerOutcome, elapsed: Duration) {
        self.inner
            .handler_duration
            .get_or_create(&HandlerLabels {
                handler: name.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        self.inner
            .handler_outcomes
            .get_or_create(&HandlerOutcomeLabels {
                handler: name.to_owned(),
                outcome,
            })
            .inc();
    }

    /// A delivery to the trigger `namespace/trigger` was answered `outcome` after `elapsed`.
    pub fn trigger_delivery(
        &self,
        namespace: &str,
        trigger: &str,
        outcome: &str,
        elapsed: Duration,
    ) {
        let labels = TriggerLabels {
            namespace: namespace.to_owned(),
            trigger: trigger.to_owned(),
            outcome: outcome.to_owned(),
        };
        self.inner.trigger_deliveries.get_or_create(&labels).inc();
        self.inner
            .trigger_answer
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records a custom metric a workflow declared.
    ///
    /// # Errors
    /// Its name was recorded before as another kind (or with other buckets), or a counter's
    /// value is negative.
    pub fn record_custom(&self, recording: &Recording) -> Result<(), String> {
        (self.inner.custom.lock().expect("custom metrics lock")).record(recording)
    }

    /// A Kubernetes API call with `verb` (`get`, `list`, `create`, `patch`, ...) failed.
    pub fn api_error(&self, verb: &str) {
        self.inner
            .api_errors
            .get_or_create(&VerbLabels {
                verb: verb.to_owned(),
            })
            .inc();
    }

    /// Reads `queue_depth` and `active_workers` from `source` at every scrape (replacing an
    /// earlier source); they stay at zero without one. Sampled on scrape rather than pushed, so
    /// the operator's hot path only bumps its own atomic counters.
    pub fn sample_queue(&self, source: impl Fn() -> QueueSample + Send + Sync + 'static) {
        *self.inner.queue_source.write().expect("queue source") = Some(Box::new(source));
    }

    /// Records whether this replica runs shard `shard`'s work, and how many shards it runs.
    pub fn set_shard_held(&self, shard: u32, held: bool, total: usize) {
        let labels = ShardLabels {
            shard: shard.to_string(),
        };
        self.inner
            .shard_held
            .get_or_create(&labels)
            .set(i64::from(held));
        self.inner
            .shards_held
            .set(i64::try_from(total).unwrap_or(i64::MAX));
    }

    /// Reads `cached_workflows` (the workflows this replica's caches hold) from `source` at
    /// every scrape, as [`Metrics::sample_queue`] does the queue.
    pub fn sample_cached_workflows(&self, source: impl Fn() -> usize + Send + Sync + 'static) {
        *self.inner.cached_source.write().expect("cached source") = Some(Box::new(source));
    }

    /// Sets whether this replica is the leader.
    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.set(i64::from(leader));
    }

    /// Every metric in the OpenMetrics text format (ends with `# EOF`).
    pub fn encode(&self) -> String {
        if let Some(source) = &*self.inner.queue_source.read().expect("queue source") {
            let QueueSample {
                queued,
                running,
                intake_window,
            } = source();
            self.inner.queue_depth.set(gauge_value(queued));
            self.inner.active_workers.set(gauge_value(running));
            self.inner.intake_window.set(gauge_value(intake_window));
        }
        if let Some(source) = &*self.inner.cached_source.read().expect("cached source") {
            self.inner.cached_workflows.set(gauge_value(source()));
        }
        let mut text = String::new();
        let custom = self.inner.custom.lock().expect("custom metrics lock");
        (prometheus_client::encoding::text::encode_registry(&mut text, &self.inner.registry))
            .and_then(|()| {
                prometheus_client::encoding::text::encode_registry(&mut text, &custom.registry)
            })
            .and_then(|()| prometheus_client::encoding::text::encode_eof(&mut text))
            .expect("writing to a String cannot fail");
        text
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample line `name{labels}` (or `name` without labels) in `text`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().expect("a numeric sample"))
        })
    }

    #[test]
    fn fresh_metrics_show_unlabelled_metrics_and_step_outcomes_at_zero() {
        let text = Metrics::new().encode();
        for family in [
            "workflow_operator_steps_started counter",
            "workflow_operator_steps_finished counter",
            "workflow_operator_step_duration_seconds histogram",
            "workflow_operator_queue_depth gauge",
            "workflow_operator_active_workers gauge",
            "workflow_operator_leader gauge",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family}\n")),
                "{family} in:\n{text}"
            );
        }
        let zeros = [
            "workflow_operator_steps_started_total",
            r#"workflow_operator_steps_finished_total{outcome="completed"}"#,
            r#"workflow_operator_steps_finished_total{outcome="failed"}"#,
            r#"workflow_operator_steps_finished_total{outcome="timed_out"}"#,
            r#"workflow_operator_step_duration_seconds_count{outcome="failed"}"#,
            "workflow_operator_queue_depth",
            "workflow_operator_active_workers",
            "workflow_operator_leader",
        ];
        for series in zeros {
            assert_eq!(sample(&text, series), Some(0.0), "{series} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn labelled_families_appear_once_used() {
        let metrics = Metrics::new();
        let before = metrics.encode();
        metrics.set_workflows("Started", 1);
        metrics.handler_done("on_create", HandlerOutcome::Success, Duration::ZERO);
        metrics.api_error("get");
        let after = metrics.encode();
        for family in [
            "workflow_operator_workflows gauge",
            "workflow_operator_handler_duration_seconds histogram",
            "workflow_operator_handler_outcomes counter",
            "workflow_operator_api_errors counter",
        ] {
            let line = format!("# TYPE {family}\n");
            assert!(!before.contains(&line), "{family} before use in:\n{before}");
            assert!(after.contains(&line), "{family} after use in:\n{after}");
        }
    }

    #[test]
    fn step_outcomes_count_separately_and_feed_the_duration_histogram() {
        let metrics = Metrics::new();
        metrics.step_started();
        metrics.step_started();
        metrics.step_started();
        metrics.step_finished(StepOutcome::Completed, Duration::from_secs(3));
        metrics.step_finished(StepOutcome::Completed, Duration::from_millis(250));
        metrics.step_finished(StepOutcome::TimedOut, Duration::from_secs(60));
        let text = metrics.encode();

        let cases = [
            ("workflow_operator_steps_started_total", 3.0),
            (
                r#"workflow_operator_steps_finished_total{outcome="completed"}"#,
                2.0,
            ),
            (
                r#"workflow_operator_steps_finished_total{outcome="timed_out"}"#,
                1.0,
            ),
            (
                r#"workflow_operator_step_duration_seconds_count{outcome="completed"}"#,
                2.0,
            ),
            (
                r#"workflow_operator_step_duration_seconds_sum{outcome="completed"}"#,
                3.25,
            ),
            // 0.25 s is in the first bucket (0.5 s); 3 s is not.
            (
                r#"workflow_operator_step_duration_seconds_bucket{le="0.5",outcome="completed"}"#,
                1.0,
            ),
            (
                r#"workflow_operator_step_duration_seconds_bucket{le="4.0",outcome="completed"}"#,
                2.0,
            ),
            (
                r#"workflow_operator_step_duration_seconds_sum{outcome="timed_out"}"#,
                60.0,
            ),
        ];
        for (series, expected) in cases {
            assert_eq!(
                sample(&text, series),
                Some(expected),
                "{series} in:\n{text}"
            );
        }
        assert_eq!(
            sample(
                &text,
                r#"workflow_operator_steps_finished_total{outcome="failed"}"#
            ),
            Some(0.0),
            "an outcome that never happened stays at zero"
        );
    }

    #[test]
    fn handler_outcomes_and_latency_are_labelled_by_handler() {
        let metrics = Metrics::new();
        metrics.handler_done(
            "on_create",
            HandlerOutcome::Success,
            Duration::from_millis(3),
        );
        metrics.handler_done(
            "on_create",
            HandlerOutcome::Temporary,
            Duration::from_millis(5),
        );
        metrics.handler_done(
            "on_job",
            HandlerOutcome::Permanent,
            Duration::from_millis(1),
        );
        let text = metrics.encode();

        let cases = [
            (
                r#"workflow_operator_handler_outcomes_total{handler="on_create",outcome="success"}"#,
                1.0,
            ),
            (
                r#"workflow_operator_handler_outcomes_total{handler="on_create",outcome="temporary"}"#,
                1.0,
            ),
            (
                r#"workflow_operator_handler_outcomes_total{handler="on_job",outcome="permanent"}"#,
                1.0,
            ),
            (
                r#"workflow_operator_handler_duration_seconds_count{handler="on_create"}"#,
                2.0,
            ),
            (
                r#"workflow_operator_handler_duration_seconds_sum{handler="on_create"}"#,
                0.008,
            ),
            (
                r#"workflow_operator_handler_duration_seconds_count{handler="on_job"}"#,
                1.0,
            ),
        ];
        for (series, expected) in cases {
            let value = sample(&text, series).unwrap_or_else(|| panic!("{series} in:\n{text}"));
            assert!(
                (value - expected).abs() < 1e-9,
                "{series} = {value}, want {expected}"
            );
        }
    }

    #[test]
    fn gauges_are_set_not_added_and_clones_share_the_registry() {
        let metrics = Metrics::new();
        let clone = metrics.clone();
        clone.set_workflows("Started", 5);
        clone.set_workflows("Started", 2);
        clone.set_workflows("Completed", 7);
        clone.set_leader(true);
        clone.api_error("patch");
        clone.api_error("patch");
        let text = metrics.encode();

        let cases = [
            (r#"workflow_operator_workflows{status="Started"}"#, 2.0),
            (r#"workflow_operator_workflows{status="Completed"}"#, 7.0),
            ("workflow_operator_leader", 1.0),
            (r#"workflow_operator_api_errors_total{verb="patch"}"#, 2.0),
        ];
        for (series, expected) in cases {
            assert_eq!(
                sample(&text, series),
                Some(expected),
                "{series} in:\n{text}"
            );
        }
        clone.set_leader(false);
        assert_eq!(
            sample(&metrics.encode(), "workflow_operator_leader"),
            Some(0.0)
        );
    }

    #[test]
    fn queue_gauges_are_read_from_the_source_at_every_scrape() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let metrics = Metrics::new();
        let queued = Arc::new(AtomicUsize::new(3));
        let counter = queued.clone();
        metrics.sample_queue(move || QueueSample {
            queued: counter.load(Ordering::Relaxed),
            running: 2,
            intake_window: 5,
        });
        let text = metrics.encode();
        assert_eq!(sample(&text, "workflow_operator_queue_depth"), Some(3.0));
        assert_eq!(sample(&text, "workflow_operator_active_workers"), Some(2.0));
        assert_eq!(sample(&text, "workflow_operator_intake_window"), Some(5.0));

        // Nothing is pushed: the next scrape sees the source's new value.
        queued.store(0, Ordering::Relaxed);
        assert_eq!(
            sample(&metrics.encode(), "workflow_operator_queue_depth"),
            Some(0.0)
        );
    }
}
