//! The schedule shape of the benchmark, `workflow-operator bench --crons N`: N CronWorkFlows of
//! `@every PERIOD`, created at N / PERIOD a second so that their fire times spread evenly over
//! the period (an `@every` schedule counts from its CronWorkFlow's creation), each run one step
//! on a simulated pod. [`crate::cli`] calls [`run`] and prints its [`CronReport`].
//!
//! # What is measured
//! - **Lateness**: for each run (a WorkFlow labelled with its CronWorkFlow and scheduled time),
//!   the store's commit instant of its creation, read from the in-process change stream as
//!   [`super::timeline`] does, minus the scheduled time it is labelled with. Only the scheduled
//!   times up to the end of the window (`duration` after the first creation) count; the
//!   benchmark waits a grace period for their runs, and those never created are `runsMissing`.
//! - **Runs per second**: runs created from the first scheduled time to the end of the window,
//!   per second, and the most created in one wall-clock second.
//! - **The operator's CPU and peak RSS** over the window, from procfs.
//! - **Idle CPU between fires**: with the fires spread over the period there is no second without
//!   one, so the benchmark then suspends every CronWorkFlow, waits for the operator to settle, and
//!   measures it sitting on them for `idle`. Between fires the operator does the same: its 1 s
//!   timer asks each CronWorkFlow in memory whether it is due, and nothing else.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use kube_devcluster::DevCluster;
use kube_devcluster::resources::GroupResource;
use kube_devcluster::store::{EventType, WatchEvent};
use workflow_operator_core::crd::CronWorkFlow;
use workflow_operator_core::labels::{LABEL_CRON, LABEL_SCHEDULED};

use super::changes::ChangeReader;
use super::timeline::Summary;
use super::{
    Error, Machine, OperatorUnderTest, ProcessFigures, Result, Shape, api_figures, machine,
    operator_under_test, round, sample, settle, shape, start_cluster, wait_for_watches,
};

const CRONS: (&str, &str) = ("workflow.crd.com", "cronworkflows");

/// How long after the window the benchmark waits for the runs of the times in it.
const GRACE: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
pub struct CronOptions {
    pub crons: usize,
    /// The `@every` period, whole seconds; the creations are spread over one.
    pub period: Duration,
    /// The window measured, from the first creation.
    pub duration: Duration,
    /// How long to measure the operator sitting on the suspended CronWorkFlows; `None` skips
    /// the suspension and the measurement.
    pub idle: Option<Duration>,
    pub pod_millis: u64,
    pub operator: OperatorUnderTest,
    pub port: u16,
    pub kubeconfig: Option<std::path::PathBuf>,
    pub namespace: String,
    /// CronWorkFlow creates in flight at once.
    pub submit_concurrency: usize,
}

/// The one JSON object a schedule benchmark prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronReport {
    pub config: CronConfig,
    pub machine: Machine,
    /// Scheduled times in the window: each CronWorkFlow's creation plus each whole period up
    /// to the window's end.
    pub runs_expected: usize,
    /// Of those, the times with a run.
    pub runs_created: usize,
    pub runs_missing: usize,
    /// Times with more than one run (must be 0).
    pub runs_duplicated: usize,
    /// Runs created before their scheduled time (must be 0).
    pub runs_early: usize,
    /// From each run's scheduled time to its creation.
    pub lateness_ms: Summary,
    /// Runs created from the first scheduled time to the end of the window, per second.
    pub runs_per_second: f64,
    /// The most runs created in one wall-clock second.
    pub peak_runs_per_second: usize,
    /// The operator over the window.
    pub operator: Option<ProcessFigures>,
    /// The operator's requests over the window: `verb resource` -> requests.
    pub requests_by_verb_and_resource: BTreeMap<String, u64>,
    /// `null` when skipped (`--idle-secs 0`).
    pub idle: Option<IdleCron>,
    /// CPU of this process (control plane, simulated pods, the benchmark) over the window.
    pub control_plane_cpu_seconds: f64,
    /// Changes the observer missed by falling behind (should be 0).
    pub lost_events: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronConfig {
    pub crons: usize,
    pub period_seconds: u64,
    pub duration_seconds: f64,
    pub pod_millis: u64,
    /// `spawned` (ours) or `external`.
    pub operator: String,
}

/// The operator sitting on the suspended CronWorkFlows.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleCron {
    pub seconds: f64,
    pub suspended: usize,
    pub operator_cpu_seconds: Option<f64>,
    /// `operatorCpuSeconds` per second, in percent of one core.
    pub operator_cpu_percent: Option<f64>,
    pub requests_by_verb: BTreeMap<String, u64>,
}

/// Runs the schedule benchmark.
///
/// # Errors
/// When the control plane or the operator cannot be started, the operator exits, or a
/// CronWorkFlow cannot be created or suspended. Runs missing are reported, not errors.
pub async fn run(options: CronOptions) -> Result<CronReport> {
    let machine = machine();
    let (cluster, client) =
        start_cluster(options.port, options.kubeconfig.clone(), options.pod_millis).await?;
    let runs = RunObserver::start(cluster.store().subscribe());
    let (mut operator, pid) = operator_under_test(&cluster, &options.operator).await?;
    wait_for_watches(&cluster, &[CRONS], options.operator.wait(), None).await?;
    let api: Api<CronWorkFlow> = Api::namespaced(client, &options.namespace);

    cluster.reset_requests();
    let clock = Clock::now();
    let operator_start = pid.and_then(sample);
    let self_start = super::procfs::sample("self").ok();
    let anchors = create(&api, &options).await?;
    let end = clock.start + options.duration;
    tokio::time::sleep_until(end.into()).await;
    let expected = expected_times(&anchors, options.period, clock.unix_secs(end));
    wait_for_runs(&runs, &expected).await;
    let operator_end = pid.and_then(sample);
    let self_end = super::procfs::sample("self").ok();
    let requests = api_figures(&cluster.requests(), BTreeMap::new(), 0).by_verb_and_resource;

    let idle = match options.idle {
        Some(idle) => Some(measure_idle(&cluster, &api, &anchors, pid, &options, idle).await?),
        None => None,
    };
    if let Some(process) = operator.take() {
        process.stop(Duration::from_secs(10)).await;
    }
    let (seen, lost_events) = runs.finish();
    let figures = Figures::of(&seen, &expected, &clock, end);
    Ok(CronReport {
        config: CronConfig {
            crons: options.crons,
            period_seconds: options.period.as_secs(),
            duration_seconds: options.duration.as_secs_f64(),
            pod_millis: options.pod_millis,
            operator: match options.operator {
                OperatorUnderTest::Spawn(_) => "spawned".into(),
                OperatorUnderTest::External { .. } => "external".into(),
            },
        },
        machine,
        runs_expected: expected.len(),
        runs_created: figures.created,
        runs_missing: expected.len() - figures.created,
        runs_duplicated: figures.duplicated,
        runs_early: figures.early,
        lateness_ms: Summary::of(&figures.lateness),
        runs_per_second: figures.per_second,
        peak_runs_per_second: figures.peak_per_second,
        operator: match (pid, operator_start, operator_end) {
            (Some(pid), Some(start), Some(end)) => Some(ProcessFigures::between(
                pid,
                &start,
                &end,
                match &options.operator {
                    OperatorUnderTest::Spawn(spawn) => Some(spawn.log.clone()),
                    OperatorUnderTest::External { .. } => None,
                },
            )),
            _ => None,
        },
        requests_by_verb_and_resource: requests,
        idle,
        control_plane_cpu_seconds: self_start.zip(self_end).map_or(0.0, |(s, e)| {
            round(e.cpu.saturating_sub(s.cpu).as_secs_f64(), 2)
        }),
        lost_events,
    })
}

/// An instant and the wall-clock time at it, to turn the store's commit instants into times
/// comparable with scheduled times.
#[derive(Debug, Clone, Copy)]
struct Clock {
    start: Instant,
    unix: Duration,
}

impl Clock {
    fn now() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            start: Instant::now(),
            unix,
        }
    }

    /// `at` as a duration since the Unix epoch.
    fn unix(&self, at: Instant) -> Duration {
        self.unix + at.saturating_duration_since(self.start)
    }

    fn unix_secs(&self, at: Instant) -> i64 {
        i64::try_from(self.unix(at).as_secs()).unwrap_or(i64::MAX)
    }
}

/// The CronWorkFlow `name` of the benchmark: `@every PERIOD`, a one-step run on a simulated pod.
fn manifest(name: &str, namespace: &str, period: Duration) -> Value {
    let step = shape::spec(Shape::Chain, &Shape::Chain.dependencies(1, 0));
    json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "CronWorkFlow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedules": [format!("@every {}s", period.as_secs())],
            "workflowSpec": step,
        },
    })
}

fn cron_name(i: usize, width: usize) -> String {
    format!("c{i:0width$}")
}

/// Creates the CronWorkFlows at `crons / period` a second; returns each one's name and
/// creation (unix seconds), the anchor of its `@every`.
async fn create(api: &Api<CronWorkFlow>, options: &CronOptions) -> Result<Vec<(String, i64)>> {
    let width = options.crons.to_string().len();
    let start = tokio::time::Instant::now();
    let rate = options.crons as f64 / options.period.as_secs_f64();
    futures::stream::iter(0..options.crons)
        .map(|i| {
            let name = cron_name(i, width);
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            async move {
                tokio::time::sleep_until(due).await;
                let cron: CronWorkFlow =
                    serde_json::from_value(manifest(&name, &options.namespace, options.period))
                        .expect("a valid CronWorkFlow");
                let created =
                    api.create(&PostParams::default(), &cron)
                        .await
                        .map_err(|source| Error::Submit {
                            name: name.clone(),
                            source,
                        })?;
                let anchor = created
                    .metadata
                    .creation_timestamp
                    .map_or(0, |t| t.0.as_second());
                Ok((name, anchor))
            }
        })
        .buffered(options.submit_concurrency.max(1))
        .try_collect()
        .await
}

/// The scheduled times up to `until` (unix seconds) of CronWorkFlows created at `anchors`:
/// each anchor plus one period, two, ...
fn expected_times(anchors: &[(String, i64)], period: Duration, until: i64) -> Vec<(String, i64)> {
    let period = i64::try_from(period.as_secs()).unwrap_or(i64::MAX).max(1);
    anchors
        .iter()
        .flat_map(|(name, anchor)| {
            (1..)
                .map(move |k| anchor + k * period)
                .take_while(move |t| *t <= until)
                .map(move |t| (name.clone(), t))
        })
        .collect()
}

/// Waits (at most [`GRACE`]) until every expected time has a run.
async fn wait_for_runs(runs: &RunObserver, expected: &[(String, i64)]) {
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        let all = {
            let seen = runs.seen.lock().expect("the run log");
            expected.iter().all(|key| seen.contains_key(key))
        };
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Suspends every CronWorkFlow, waits until the operator has recorded each suspension and then
/// made no request for 2 s, and measures it for `idle`.
async fn measure_idle(
    cluster: &DevCluster,
    api: &Api<CronWorkFlow>,
    anchors: &[(String, i64)],
    pid: Option<u32>,
    options: &CronOptions,
    idle: Duration,
) -> Result<IdleCron> {
    let suspend = json!({"spec": {"suspend": true}});
    futures::stream::iter(anchors)
        .map(|(name, _)| {
            let suspend = &suspend;
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(suspend))
                    .await
                    .map(drop)
                    .map_err(|source| Error::Submit {
                        name: name.clone(),
                        source,
                    })
            }
        })
        .buffer_unordered(options.submit_concurrency.max(1))
        .try_collect::<()>()
        .await?;
    let deadline = Instant::now() + GRACE;
    let mut suspended = 0;
    while Instant::now() < deadline {
        suspended = suspended_count(cluster, &options.namespace);
        if suspended >= anchors.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settle(cluster, Duration::from_secs(2)).await;
    cluster.reset_requests();
    let start = pid.and_then(sample);
    // The measurement itself: a fixed interval in which nothing is due.
    tokio::time::sleep(idle).await;
    let end = pid.and_then(sample);
    let cpu = start
        .zip(end)
        .map(|(s, e)| e.cpu.saturating_sub(s.cpu).as_secs_f64());
    let seconds = idle.as_secs_f64();
    Ok(IdleCron {
        seconds,
        suspended,
        operator_cpu_seconds: cpu.map(|c| round(c, 2)),
        operator_cpu_percent: cpu.map(|c| round(c / seconds * 100.0, 2)),
        requests_by_verb: api_figures(&cluster.requests(), BTreeMap::new(), 0).by_verb,
    })
}

/// CronWorkFlows whose status says they are suspended.
fn suspended_count(cluster: &DevCluster, namespace: &str) -> usize {
    let (items, _) = cluster
        .store()
        .list(&GroupResource::new(CRONS.0, CRONS.1), Some(namespace));
    items
        .iter()
        .filter(|o| o.value.pointer("/status/suspendedAt").is_some())
        .count()
}

/// Each run seen created: `(CronWorkFlow, scheduled time)` -> `(uid, commit instant)` of each
/// WorkFlow created for it.
type Seen = HashMap<(String, i64), Vec<(String, Instant)>>;

/// The run observer: records the creation of every run from the store's change stream, on a
/// thread of its own ([`ChangeReader`]); what it saw so far can be read while it runs.
struct RunObserver {
    seen: Arc<Mutex<Seen>>,
    reader: ChangeReader<()>,
}

impl RunObserver {
    fn start(changes: broadcast::Receiver<Arc<WatchEvent>>) -> Self {
        let seen = Arc::new(Mutex::new(Seen::new()));
        let log = seen.clone();
        let record = move |(): &mut (), change: &WatchEvent| {
            if let Some((key, uid)) = run_created(change) {
                let mut log = log.lock().expect("the run log");
                log.entry(key).or_default().push((uid, change.committed_at));
            }
        };
        let reader = ChangeReader::start("bench-cron-observer", changes, (), record);
        RunObserver { seen, reader }
    }

    /// Stops observing; returns the runs seen and the changes missed.
    fn finish(self) -> (Seen, u64) {
        let ((), lost) = self.reader.finish();
        let seen = std::mem::take(&mut *self.seen.lock().expect("the run log"));
        (seen, lost)
    }
}

/// The CronWorkFlow, scheduled time and uid of a run `change` creates.
fn run_created(change: &WatchEvent) -> Option<((String, i64), String)> {
    if change.event_type != EventType::Added
        || change.gr.group != super::WORKFLOWS.0
        || change.gr.resource != super::WORKFLOWS.1
    {
        return None;
    }
    let meta = change.object.value.get("metadata")?;
    let labels = meta.get("labels")?;
    let cron = labels.get(LABEL_CRON)?.as_str()?;
    let scheduled = labels.get(LABEL_SCHEDULED)?.as_str()?.parse().ok()?;
    let uid = meta.get("uid")?.as_str()?;
    Some(((cron.to_string(), scheduled), uid.to_string()))
}

/// What the runs seen make of the expected times.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    created: usize,
    duplicated: usize,
    early: usize,
    lateness: Vec<Duration>,
    per_second: f64,
    peak_per_second: usize,
}

impl Figures {
    /// The figures of the `expected` times from the runs `seen`, the window ending at `end`.
    fn of(seen: &Seen, expected: &[(String, i64)], clock: &Clock, end: Instant) -> Self {
        let mut figures = Figures::default();
        let mut per_second = BTreeMap::<u64, usize>::new();
        for key in expected {
            let Some(runs) = seen.get(key) else {
                continue;
            };
            figures.created += 1;
            let mut uids: Vec<&str> = runs.iter().map(|(uid, _)| uid.as_str()).collect();
            uids.sort_unstable();
            uids.dedup();
            if uids.len() > 1 {
                figures.duplicated += 1;
            }
            let at = runs
                .iter()
                .map(|(_, at)| *at)
                .min()
                .expect("one run at least");
            let created = clock.unix(at);
            let scheduled = Duration::from_secs(u64::try_from(key.1).unwrap_or(0));
            match created.checked_sub(scheduled) {
                Some(late) => figures.lateness.push(late),
                None => figures.early += 1,
            }
            *per_second.entry(created.as_secs()).or_default() += 1;
        }
        figures.peak_per_second = per_second.values().copied().max().unwrap_or(0);
        let first = expected.iter().map(|(_, t)| *t).min();
        if let Some(first) = first.and_then(|t| u64::try_from(t).ok()) {
            let span = clock.unix(end).as_secs_f64() - first as f64;
            if span > 0.0 {
                figures.per_second = round(figures.created as f64 / span, 1);
            }
        }
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_times_are_each_anchor_plus_whole_periods_up_to_the_end() {
        let anchors = vec![("a".to_string(), 100), ("b".to_string(), 130)];
        let times = expected_times(&anchors, Duration::from_secs(60), 220);
        let want: Vec<(String, i64)> = [("a", 160), ("a", 220), ("b", 190)]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        assert_eq!(times, want);
    }

    #[test]
    fn figures_count_missing_duplicated_and_early_runs() {
        let start = Instant::now();
        let clock = Clock {
            start,
            unix: Duration::from_secs(1000),
        };
        let at = |millis: u64| start + Duration::from_millis(millis);
        let key = |t: i64| ("c".to_string(), t);
        let expected = vec![key(1001), key(1002), key(1003), key(1004)];
        let seen: Seen = [
            (key(1001), vec![("u1".to_string(), at(1_250))]),
            // Created twice (two uids): one time duplicated; the first creation counts.
            (
                key(1002),
                vec![("u2".to_string(), at(2_500)), ("u3".to_string(), at(2_900))],
            ),
            // Before its time.
            (key(1003), vec![("u4".to_string(), at(2_990))]),
            // Outside the expected times: not counted.
            (key(1009), vec![("u5".to_string(), at(9_000))]),
        ]
        .into_iter()
        .collect();
        let figures = Figures::of(&seen, &expected, &clock, at(5_000));
        assert_eq!(figures.created, 3);
        assert_eq!(figures.duplicated, 1);
        assert_eq!(figures.early, 1);
        assert_eq!(
            figures.lateness,
            vec![Duration::from_millis(250), Duration::from_millis(500)]
        );
        // 3 runs from the first time (1001) to the end (1005).
        assert_eq!(figures.per_second, 0.8);
        // 1001.25 in second 1001; 1002.5 and 1002.99 in second 1002.
        assert_eq!(figures.peak_per_second, 2);
    }
}
