//! Leader election on the embedded control plane: contenders in one process, each with its own
//! client, as separate replicas would be. A 2 s lease keeps the tests short; takeover times are
//! printed (run with `--nocapture` to see them).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use kube::api::PostParams;
use kube_devcluster::{DevCluster, DevClusterOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use workflow_operator::leader::{Ended, LeaderElection, LeaderStatus, Timing};
use workflow_operator::telemetry::{Metrics, Readiness};

const NAMESPACE: &str = "default";
const LEASE: &str = "workflow-operator";
const LEASE_DURATION: Duration = Duration::from_secs(2);
const DEADLINE: Duration = Duration::from_secs(15);

/// Which contenders run their work now, and the most that ever ran at once.
#[derive(Default)]
struct Tracker {
    active: Mutex<HashSet<String>>,
    max_active: Mutex<usize>,
}

impl Tracker {
    fn max_active(&self) -> usize {
        *self.max_active.lock().unwrap()
    }
}

/// Removes its contender from the tracker when the work ends, however it ends (returned, or
/// dropped with its task as when the process dies).
struct Running {
    tracker: Arc<Tracker>,
    identity: String,
}

impl Running {
    fn start(tracker: Arc<Tracker>, identity: &str) -> Self {
        let mut active = tracker.active.lock().unwrap();
        active.insert(identity.to_owned());
        let mut max = tracker.max_active.lock().unwrap();
        *max = (*max).max(active.len());
        drop((active, max));
        Self {
            tracker,
            identity: identity.to_owned(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tracker.active.lock().unwrap().remove(&self.identity);
    }
}

struct Contender {
    identity: String,
    status: watch::Receiver<LeaderStatus>,
    shutdown: CancellationToken,
    /// Lets the work finish after its token was cancelled (it waits for this too).
    finish_work: CancellationToken,
    task: JoinHandle<Ended<String>>,
    metrics: Metrics,
    readiness: Readiness,
}

/// Starts a contender whose work runs until its token is cancelled and `finish_work` is.
fn contender(cluster: &DevCluster, identity: &str, tracker: &Arc<Tracker>) -> Contender {
    contender_with(cluster, identity, tracker, true, LEASE_DURATION)
}

fn contender_with(
    cluster: &DevCluster,
    identity: &str,
    tracker: &Arc<Tracker>,
    finish_at_once: bool,
    lease_duration: Duration,
) -> Contender {
    let metrics = Metrics::new();
    let readiness = Readiness::new();
    let election =
        LeaderElection::new(cluster.client(), NAMESPACE, LEASE, identity, lease_duration)
            .with_metrics(metrics.clone())
            .with_readiness(readiness.clone());
    let status = election.status();
    let shutdown = CancellationToken::new();
    let finish_work = CancellationToken::new();
    if finish_at_once {
        finish_work.cancel();
    }
    let (tracker, me, finish, stop) = (
        tracker.clone(),
        identity.to_owned(),
        finish_work.clone(),
        shutdown.clone(),
    );
    let task = tokio::spawn(async move {
        election
            .run_while_leader(
                move |token| async move {
                    let _running = Running::start(tracker, &me);
                    token.cancelled().await;
                    finish.cancelled().await;
                    format!("{me} stopped")
                },
                stop,
            )
            .await
    });
    Contender {
        identity: identity.to_owned(),
        status,
        shutdown,
        finish_work,
        task,
        metrics,
        readiness,
    }
}

async fn wait_for_status(
    contender: &mut Contender,
    what: &str,
    pred: impl FnMut(&LeaderStatus) -> bool,
) {
    tokio::time::timeout(DEADLINE, contender.status.wait_for(pred))
        .await
        .unwrap_or_else(|_| panic!("{} not {what} within {DEADLINE:?}", contender.identity))
        .expect("the election is alive");
}

async fn wait_until_leader(contender: &mut Contender) {
    wait_for_status(contender, "leader", |s| *s == LeaderStatus::Leader).await;
}

/// Waits until exactly one of `contenders` leads and every other one stands by for it; returns
/// (leader, standbys).
async fn elect(contenders: Vec<Contender>) -> (Contender, Vec<Contender>) {
    let mut contenders = contenders;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let statuses: Vec<LeaderStatus> = contenders
            .iter()
            .map(|c| c.status.borrow().clone())
            .collect();
        let leaders: Vec<usize> = (0..statuses.len())
            .filter(|&i| statuses[i] == LeaderStatus::Leader)
            .collect();
        if let [leader] = leaders[..] {
            let holder = contenders[leader].identity.clone();
            let standing_by = statuses.iter().enumerate().all(|(i, s)| {
                i == leader
                    || *s
                        == LeaderStatus::Standby {
                            holder: holder.clone(),
                        }
            });
            if standing_by {
                let leader = contenders.remove(leader);
                return (leader, contenders);
            }
        }
        assert!(leaders.len() <= 1, "two leaders: {statuses:?}");
        let changes = contenders.iter_mut().map(|c| Box::pin(c.status.changed()));
        tokio::select! {
            _ = futures::future::select_all(changes) => {}
            _ = tokio::time::sleep_until(deadline) => panic!("no leader and standbys: {statuses:?}"),
        }
    }
}

/// [`elect`] for two contenders: (leader, standby).
async fn elect_one_of(a: Contender, b: Contender) -> (Contender, Contender) {
    let (leader, mut standbys) = elect(vec![a, b]).await;
    (leader, standbys.remove(0))
}

async fn lease_spec(cluster: &DevCluster) -> LeaseSpec {
    let api: Api<Lease> = Api::namespaced(cluster.client(), NAMESPACE);
    api.get(LEASE).await.unwrap().spec.unwrap_or_default()
}

/// Waits, through the API, until the lease's holder has renewed it for `span` after
/// `renewed_since` (a renewTime the test read before).
async fn wait_for_renewals(cluster: &DevCluster, renewed_since: &LeaseSpec, span: Duration) {
    let since = renewed_since
        .renew_time
        .as_ref()
        .expect("a renewed lease")
        .0;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let spec = lease_spec(cluster).await;
        let renewed = spec.renew_time.as_ref().expect("a renewed lease").0;
        if renewed.duration_since(since).unsigned_abs() >= span {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the lease was not renewed for {span:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn join(contender: Contender) -> Ended<String> {
    tokio::time::timeout(DEADLINE, contender.task)
        .await
        .expect("run_while_leader returns")
        .expect("run_while_leader does not panic")
}

async fn cluster() -> DevCluster {
    DevCluster::start(DevClusterOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn of_three_contenders_exactly_one_leads_and_the_standbys_stay_standby() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let contenders = ["pod-a", "pod-b", "pod-c"]
        .map(|identity| contender(&cluster, identity, &tracker))
        .into();

    let (leader, standbys) = elect(contenders).await;
    let at_election = lease_spec(&cluster).await;
    assert_eq!(
        at_election.holder_identity.as_deref(),
        Some(leader.identity.as_str())
    );
    assert_eq!(at_election.lease_transitions, Some(1));

    // Let the lease be renewed for twice its duration: an unrenewed lease would have expired
    // twice over, so a standby that ignored renewals would have taken it by now.
    wait_for_renewals(&cluster, &at_election, 2 * LEASE_DURATION).await;
    for standby in &standbys {
        assert_eq!(
            *standby.status.borrow(),
            LeaderStatus::Standby {
                holder: leader.identity.clone()
            }
        );
    }
    let spec = lease_spec(&cluster).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(leader.identity.as_str())
    );
    assert_eq!(spec.lease_transitions, Some(1), "no change of leader");
    assert_eq!(tracker.max_active(), 1);

    // Every replica is ready; only the leader says it leads in its metrics.
    assert!(leader.readiness.is_ready());
    assert!(
        leader
            .metrics
            .encode()
            .contains("\nworkflow_operator_leader 1\n")
    );
    for standby in &standbys {
        assert!(standby.readiness.is_ready());
        assert!(
            standby
                .metrics
                .encode()
                .contains("\nworkflow_operator_leader 0\n")
        );
    }
}

#[tokio::test]
async fn released_lease_is_taken_over_by_the_standby_at_once() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let a = contender(&cluster, "pod-a", &tracker);
    let b = contender(&cluster, "pod-b", &tracker);
    let (leader, mut standby) = elect_one_of(a, b).await;
    let timing = Timing::from_lease_duration(LEASE_DURATION);

    let sigterm = Instant::now();
    leader.shutdown.cancel();
    wait_until_leader(&mut standby).await;
    let takeover = sigterm.elapsed();
    println!(
        "takeover after release (SIGTERM): {takeover:?} (lease {LEASE_DURATION:?}, poll {:?})",
        timing.retry_period
    );

    let leader_identity = leader.identity.clone();
    assert_eq!(
        join(leader).await,
        Ended::Shutdown(Some(format!("{leader_identity} stopped")))
    );
    // An expired (not released) lease is taken no sooner than its duration minus one poll
    // after the last renewal; this was faster, so it was the release.
    assert!(
        takeover < timing.lease_duration - timing.retry_period,
        "takeover took {takeover:?}"
    );
    let spec = lease_spec(&cluster).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(standby.identity.as_str())
    );
    assert_eq!(spec.lease_transitions, Some(2));
    assert_eq!(tracker.max_active(), 1, "the leaders never overlapped");
}

/// Kills the leader of two contenders with a `lease_duration` lease; returns the time until the
/// standby leads, after checking it is what an expired lease allows.
async fn takeover_after_the_leader_dies(lease_duration: Duration) -> Duration {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let a = contender_with(&cluster, "pod-a", &tracker, true, lease_duration);
    let b = contender_with(&cluster, "pod-b", &tracker, true, lease_duration);
    let (leader, mut standby) = elect_one_of(a, b).await;
    let timing = Timing::from_lease_duration(lease_duration);

    // The process dies: no more renewals, no release, its work gone with it.
    let killed = Instant::now();
    leader.task.abort();
    wait_until_leader(&mut standby).await;
    let takeover = killed.elapsed();
    println!(
        "takeover after the leader died: {takeover:?} (lease {lease_duration:?}, poll {:?})",
        timing.retry_period
    );

    // The last renewal was written about one retry period (plus a request) before the kill;
    // the standby cannot take the lease sooner than its duration after that. The upper bound
    // is one duration plus a few polls, loose enough for a loaded machine.
    assert!(
        takeover >= timing.lease_duration - 2 * timing.retry_period,
        "took an unexpired lease after {takeover:?}"
    );
    assert!(
        takeover < timing.lease_duration + 5 * timing.retry_period,
        "takeover took {takeover:?}"
    );
    assert_eq!(
        lease_spec(&cluster).await.holder_identity.as_deref(),
        Some(standby.identity.as_str())
    );
    assert_eq!(tracker.max_active(), 1);
    takeover
}

#[tokio::test]
async fn dead_leader_is_taken_over_after_the_lease_duration() {
    takeover_after_the_leader_dies(LEASE_DURATION).await;
}

/// The `--lease-duration` default the `run` command should use (10 s; client-go's 15 s would
/// miss the 15 s takeover target once polling is added).
#[tokio::test]
async fn dead_leader_is_taken_over_within_15_s_with_the_production_lease() {
    let takeover = takeover_after_the_leader_dies(Duration::from_secs(10)).await;
    assert!(takeover < Duration::from_secs(15), "{takeover:?}");
}

#[tokio::test]
async fn leader_whose_lease_is_taken_cancels_its_work_and_leaves_the_lease_alone() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let mut leader = contender(&cluster, "pod-a", &tracker);
    wait_until_leader(&mut leader).await;

    // Someone else writes the lease (as a contender with a wrong view would).
    let api: Api<Lease> = Api::namespaced(cluster.client(), NAMESPACE);
    let taken = Instant::now();
    loop {
        let mut lease = api.get(LEASE).await.unwrap();
        lease.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
        match api.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 => continue, // a renewal won
            Err(error) => panic!("{error}"),
        }
    }

    assert_eq!(
        join(leader).await,
        Ended::LostLeadership("pod-a stopped".to_owned())
    );
    println!("leader noticed the lost lease after {:?}", taken.elapsed());
    assert!(tracker.active.lock().unwrap().is_empty());
    assert_eq!(
        lease_spec(&cluster).await.holder_identity.as_deref(),
        Some("intruder")
    );
}

#[tokio::test]
async fn leader_that_cannot_reach_the_api_stops_before_its_lease_expires() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let mut leader = contender(&cluster, "pod-a", &tracker);
    wait_until_leader(&mut leader).await;
    let timing = Timing::from_lease_duration(LEASE_DURATION);

    let outage = Instant::now();
    cluster.stop();
    assert_eq!(
        join(leader).await,
        Ended::LostLeadership("pod-a stopped".to_owned())
    );
    let stepped_down = outage.elapsed();
    println!(
        "leader stepped down {stepped_down:?} into an API outage (renew deadline {:?})",
        timing.renew_deadline
    );
    // The last renewal was before the outage, so a standby could take over from one lease
    // duration after it; the leader must be gone before that.
    assert!(
        stepped_down < timing.lease_duration,
        "stepped down after {stepped_down:?}"
    );
}

#[tokio::test]
async fn shutting_down_leader_keeps_its_lease_until_its_work_has_stopped() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let a = contender_with(&cluster, "pod-a", &tracker, false, LEASE_DURATION);
    let b = contender_with(&cluster, "pod-b", &tracker, false, LEASE_DURATION);
    let (leader, mut standby) = elect_one_of(a, b).await;

    leader.shutdown.cancel();
    let at_shutdown = lease_spec(&cluster).await;
    // The work is still finishing its handlers: the lease must stay renewed meanwhile.
    wait_for_renewals(&cluster, &at_shutdown, 2 * LEASE_DURATION).await;
    assert_eq!(
        *standby.status.borrow(),
        LeaderStatus::Standby {
            holder: leader.identity.clone()
        }
    );

    leader.finish_work.cancel();
    standby.finish_work.cancel();
    wait_until_leader(&mut standby).await;
    assert!(matches!(join(leader).await, Ended::Shutdown(Some(_))));
    assert_eq!(tracker.max_active(), 1, "the leaders never overlapped");
}

#[tokio::test]
async fn standby_shut_down_returns_without_touching_the_lease() {
    let cluster = cluster().await;
    let tracker = Arc::new(Tracker::default());
    let a = contender(&cluster, "pod-a", &tracker);
    let b = contender(&cluster, "pod-b", &tracker);
    let (leader, standby) = elect_one_of(a, b).await;
    let before = lease_spec(&cluster).await;

    standby.shutdown.cancel();
    assert_eq!(join(standby).await, Ended::Shutdown(None));
    let after = lease_spec(&cluster).await;
    assert_eq!(after.holder_identity, before.holder_identity);
    assert_eq!(after.lease_transitions, before.lease_transitions);
    assert_eq!(*leader.status.borrow(), LeaderStatus::Leader);
}

#[tokio::test]
async fn work_that_returns_by_itself_releases_the_lease() {
    let cluster = cluster().await;
    let election = LeaderElection::new(cluster.client(), NAMESPACE, LEASE, "pod-a", LEASE_DURATION);
    let ended = tokio::time::timeout(
        DEADLINE,
        election.run_while_leader(|_token| async { 42 }, CancellationToken::new()),
    )
    .await
    .unwrap();
    assert_eq!(ended, Ended::Finished(42));
    assert_eq!(*election.status().borrow(), LeaderStatus::Stopped);
    assert_eq!(lease_spec(&cluster).await.holder_identity, None);
}

/// A gate closed until its flag is set.
fn closed_gate() -> (
    Arc<std::sync::atomic::AtomicBool>,
    workflow_operator::leader::Gate,
) {
    let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gate = {
        let open = open.clone();
        Arc::new(move || open.load(std::sync::atomic::Ordering::SeqCst))
    };
    (open, gate)
}

/// Runs `election` with work that lasts until it is told to stop: its status, the token that
/// shuts it down, and its task.
fn run_until_shutdown(
    election: LeaderElection,
) -> (
    watch::Receiver<LeaderStatus>,
    CancellationToken,
    JoinHandle<Ended<()>>,
) {
    let status = election.status();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        election
            .run_while_leader(|token| async move { token.cancelled().await }, stop)
            .await
    });
    (status, shutdown, task)
}

/// A contender whose gate says no stands by on a free lease (and on a missing one) without
/// taking it; once the gate says yes it takes it at its next poll.
#[tokio::test]
async fn gated_contender_takes_a_free_lease_only_once_its_gate_opens() {
    let cluster = cluster().await;
    let (open, gate) = closed_gate();
    let election = LeaderElection::new(cluster.client(), NAMESPACE, LEASE, "pod-a", LEASE_DURATION)
        .with_gate(gate, Arc::default());
    let (mut status, shutdown, task) = run_until_shutdown(election);
    let standing_by = |s: &LeaderStatus| matches!(s, LeaderStatus::Standby { .. });
    tokio::time::timeout(DEADLINE, status.wait_for(standing_by))
        .await
        .expect("the contender decided")
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(cluster.client(), NAMESPACE);
    assert!(
        leases.get_opt(LEASE).await.unwrap().is_none(),
        "a closed gate creates no lease"
    );
    open.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::timeout(DEADLINE, status.wait_for(|s| *s == LeaderStatus::Leader))
        .await
        .expect("the contender leads once its gate opens")
        .unwrap();
    assert_eq!(
        lease_spec(&cluster).await.holder_identity.as_deref(),
        Some("pod-a")
    );
    shutdown.cancel();
    let ended = tokio::time::timeout(DEADLINE, task).await.unwrap().unwrap();
    assert!(matches!(ended, Ended::Shutdown(Some(()))), "{ended:?}");
}

/// A poll this long could not take a lease within these tests' deadlines: what is taken sooner
/// was taken because something woke the contender.
fn slow_polls() -> Timing {
    Timing::new(
        Duration::from_secs(60),
        Duration::from_secs(40),
        Duration::from_secs(8),
    )
    .expect("valid timing")
}

/// A standby that saw a lease held by a holder that then went silent takes it when the lease
/// expires, not up to a poll later.
#[tokio::test]
async fn a_standby_takes_a_silent_holders_lease_when_it_expires_not_a_poll_later() {
    let cluster = cluster().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client(), NAMESPACE);
    let held = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(LEASE.to_owned()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("gone".to_owned()),
            lease_duration_seconds: Some(2),
            ..Default::default()
        }),
    };
    leases.create(&PostParams::default(), &held).await.unwrap();
    let written = Instant::now();
    let election = LeaderElection::new(cluster.client(), NAMESPACE, LEASE, "pod-b", LEASE_DURATION)
        .with_timing(slow_polls());
    let (mut status, shutdown, _task) = run_until_shutdown(election);
    tokio::time::timeout(
        Duration::from_secs(5),
        status.wait_for(|s| *s == LeaderStatus::Leader),
    )
    .await
    .expect("the standby leads once the 2 s lease expired, before its 8 s poll")
    .unwrap();
    let took = written.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "took an unexpired lease after {took:?}"
    );
    shutdown.cancel();
}

/// A gated contender standing by tries at once when told its gate opened, not at its next poll.
#[tokio::test]
async fn a_gated_contender_told_its_gate_opened_takes_the_lease_at_once() {
    let cluster = cluster().await;
    let (open, gate) = closed_gate();
    let opened = Arc::new(tokio::sync::Notify::new());
    let election = LeaderElection::new(cluster.client(), NAMESPACE, LEASE, "pod-a", LEASE_DURATION)
        .with_timing(slow_polls())
        .with_gate(gate, opened.clone());
    let (mut status, shutdown, _task) = run_until_shutdown(election);
    let standing_by = |s: &LeaderStatus| matches!(s, LeaderStatus::Standby { .. });
    tokio::time::timeout(DEADLINE, status.wait_for(standing_by))
        .await
        .expect("the contender decided")
        .unwrap();
    open.store(true, std::sync::atomic::Ordering::SeqCst);
    opened.notify_waiters();
    tokio::time::timeout(
        Duration::from_secs(3),
        status.wait_for(|s| *s == LeaderStatus::Leader),
    )
    .await
    .expect("the contender leads once told its gate opened, before its 8 s poll")
    .unwrap();
    shutdown.cancel();
}
