//! Replicas sharing the work by shards (`run --shards`): three replicas and six shards run 60
//! workflows; one replica is SIGKILLed mid-run, 30 more workflows are submitted during the
//! handover, and a fourth replica joins once the two others took the killed one's shards. Every workflow ends as its shape says, no step
//! ran twice (from every Job the test saw), and at every sample of the replicas' `/metrics` no
//! shard was worked by two replicas; the shards end spread evenly over the live replicas.
//!
//! The first runs twice: with a 3 s lease, and with `run`'s default of 10 s, as `deploy/sharded`
//! runs it; each time the killed replica's shards must run again within the lease plus 2 s.
//!
//! Slow (about a minute each): `cargo test --test it shards:: -- --ignored --nocapture`
//! (`make test-slow`). Needs the embedded control plane (it kills the operator's processes).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube_devcluster::faults::{InjectedError, Verb};
use kube_devcluster::testing::eventually;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rstest::rstest;
use support::{JobRecorder, Operator, Shape, assert_ended_as_expected, namespace, retrying};
use tokio_util::sync::CancellationToken;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::labels::LABEL_WORKFLOW;
use workflow_operator_core::shards::{self, LABEL_SHARD};

const SHARDS: u32 = 6;
/// Short, so that most tests' handovers are quick.
const LEASE_SECONDS: u32 = 3;
/// `run --lease-duration`'s default, as a deployment runs it.
const DEFAULT_LEASE_SECONDS: u32 = 10;

#[rstest]
#[case::a_short_lease(LEASE_SECONDS)]
#[case::the_default_lease(DEFAULT_LEASE_SECONDS)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn three_replicas_one_killed_and_a_fourth_joining_share_six_shards_and_run_every_step_once(
    #[future(awt)] namespace: support::Namespace,
    #[case] lease_seconds: u32,
) {
    skip_on_real_cluster!("starts and kills the operator's processes");
    let ns = namespace;
    let recorder = JobRecorder::start(&ns).await;
    let mut replicas: Vec<(Operator, SocketAddr)> = (0..3)
        .map(|i| Operator::shard_replica(&ns, i, SHARDS, lease_seconds, &[]))
        .collect();
    let sampler = Sampler::start(replicas.iter().map(|(_, addr)| *addr).collect());
    sampler
        .wait_spread("three replicas to share the shards", &[0, 1, 2])
        .await;

    let first = submit(&ns, 0..60).await;
    // Half-way through the first workflows.
    tokio::time::sleep(Duration::from_secs(2)).await;
    replicas[0].0.kill().await;
    let killed = Instant::now();
    let second = submit(&ns, 60..90).await;
    sampler
        .wait_spread(
            "the two live replicas to take the killed one's shards",
            &[1, 2],
        )
        .await;
    let fourth = Operator::shard_replica(&ns, 3, SHARDS, lease_seconds, &[]);
    sampler.add(fourth.1);
    replicas.push(fourth);

    let expected: Vec<_> = first.into_iter().chain(second).collect();
    let limit = Duration::from_secs(300);
    let jobs = assert_ended_as_expected(&recorder, &ns, &expected, limit).await;
    sampler
        .wait_spread("the live replicas to share the shards", &[1, 2, 3])
        .await;
    // The memory split: the live replicas cache each workflow once between them.
    eventually(
        "each workflow cached by one replica",
        Duration::from_secs(30),
        || async {
            let cached = sampler.cached.lock().unwrap().values().sum::<usize>();
            (cached == expected.len()).then_some(())
        },
    )
    .await;
    let report = sampler.stop();
    assert!(
        report.overlaps.is_empty(),
        "shards worked twice: {:?}",
        report.overlaps
    );
    let failover = report.all_worked_after(killed);
    for (operator, _) in &replicas[1..] {
        let log = operator.log();
        assert!(!log.contains("panicked"), "a replica panicked:\n{log}");
    }
    println!(
        "shards: {} workflows ended correctly; {jobs} Jobs checked, none twice; {} samples of \
         the replicas' shards, none shared; every shard worked again {failover:.1?} after the \
         SIGKILL (lease {lease_seconds} s)",
        expected.len(),
        report.samples,
    );
    assert!(
        failover <= Duration::from_secs(u64::from(lease_seconds) + 2),
        "the killed replica's shards ran again only after {failover:?}"
    );
}

/// The chaos of `reliability_crash` and `reliability_faults` at once, with three replicas
/// sharing six shards: a random replica SIGKILLed and restarted every 1-2 s, 10% of writes
/// failing (500, 409, 429), every watch closed every 2 s and one forced 410 Gone. The same
/// guarantees: every workflow ends as its shape says, no step runs twice, and no shard is
/// worked by two replicas at any sample.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: make test-slow"]
async fn three_replicas_under_kills_and_api_faults_run_every_step_once(
    #[future(awt)] namespace: support::Namespace,
) {
    skip_on_real_cluster!("kills the operator's processes and injects API faults");
    let ns = namespace;
    let dev = ns.cluster.dev().expect("the embedded control plane");
    let recorder = JobRecorder::start(&ns).await;
    let mut replicas: Vec<(Operator, SocketAddr)> = (0..3)
        .map(|i| Operator::shard_replica(&ns, i, SHARDS, LEASE_SECONDS, &[]))
        .collect();
    let sampler = Sampler::start(replicas.iter().map(|(_, addr)| *addr).collect());
    sampler
        .wait_spread("three replicas to share the shards", &[0, 1, 2])
        .await;
    let faults = dev.faults();
    faults.close_watches_every(Some(Duration::from_secs(2)));
    for (verb, error) in [
        (Verb::Create, InjectedError::Internal),
        (Verb::Update, InjectedError::Conflict),
        (Verb::Patch, InjectedError::TooManyRequests),
    ] {
        faults.set_error_rate(verb, 0.1, error);
    }
    let submitting = {
        let ns = support::Namespace {
            cluster: ns.cluster.clone(),
            name: ns.name.clone(),
        };
        tokio::spawn(async move { submit(&ns, 0..40).await })
    };
    let seed: u64 = rand::random();
    println!("shards chaos: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for kill in 0..8 {
        // A random moment and replica: what is tested is that any is safe.
        tokio::time::sleep(Duration::from_millis(rng.random_range(1000..2000))).await;
        let (victim, _) = &mut replicas[rng.random_range(0..3)];
        victim.kill().await;
        victim.start();
        if kill == 4 {
            dev.force_gone();
        }
    }
    let expected = submitting.await.expect("every workflow submitted");
    faults.clear();
    let limit = Duration::from_secs(300);
    let jobs = assert_ended_as_expected(&recorder, &ns, &expected, limit).await;
    let report = sampler.stop();
    assert!(
        report.overlaps.is_empty(),
        "shards worked twice: {:?}",
        report.overlaps
    );
    println!(
        "shards chaos: {} workflows ended correctly under 8 SIGKILLs and API faults; {jobs} Jobs \
         checked, none twice; {} samples, no shard shared",
        expected.len(),
        report.samples
    );
}

/// The web view of a replica holding some shards shows the workflows of every shard.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_web_view_shows_every_shards_workflows(
    #[future(awt)] namespace: support::Namespace,
) {
    skip_on_real_cluster!("starts the operator's processes");
    let ns = namespace;
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port for the web view");
    let web_addr = ["--web-addr", &web.to_string()];
    let (_viewer, viewer_metrics) = Operator::shard_replica(&ns, 0, 4, LEASE_SECONDS, &web_addr);
    let (_other, other_metrics) = Operator::shard_replica(&ns, 1, 4, LEASE_SECONDS, &[]);
    let sampler = Sampler::start(vec![viewer_metrics, other_metrics]);
    let shards = 4;
    sampler
        .wait_spread_of("two replicas to share four shards", shards, &[0, 1])
        .await;
    let expected = submit(&ns, 0..8).await;
    let http = reqwest::Client::new();
    eventually(
        "every workflow in the web view",
        Duration::from_secs(30),
        || async {
            let page = http
                .get(format!("http://{web}/"))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            expected
                .iter()
                .all(|(name, _)| page.contains(name.as_str()))
                .then_some(())
        },
    )
    .await;
    sampler.stop();
}

/// A WorkFlowTrigger is worked in its shard, and its runs live there too: a delivery to one
/// replica's receiver starts a run that completes, labelled with the trigger's shard, and the
/// replica holding the trigger counts it in the trigger's status.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triggers_runs_live_in_its_shard_and_its_status_counts_them(
    #[future(awt)] namespace: support::Namespace,
) {
    skip_on_real_cluster!("starts the operator's processes");
    let ns = namespace;
    let receiver = crate::run_process::free_addr();
    let triggers_addr = ["--triggers-addr", &receiver.to_string()];
    let (_a, a_metrics) = Operator::shard_replica(&ns, 0, 4, LEASE_SECONDS, &triggers_addr);
    let (_b, b_metrics) = Operator::shard_replica(&ns, 1, 4, LEASE_SECONDS, &[]);
    let sampler = Sampler::start(vec![a_metrics, b_metrics]);
    sampler
        .wait_spread_of("two replicas to share four shards", 4, &[0, 1])
        .await;
    let trigger: WorkFlowTrigger = serde_yaml::from_str(
        "metadata: {name: hook}\n\
         spec:\n  webhook: {}\n  workflowSpec:\n    containers: [{stepName: a, image: busybox, command: ['true']}]\n",
    )
    .expect("a trigger");
    let triggers: Api<WorkFlowTrigger> = Api::namespaced(ns.client(), &ns.name);
    triggers
        .create(&PostParams::default(), &trigger)
        .await
        .expect("create the trigger");
    let stamped = eventually("the trigger stamped", Duration::from_secs(30), || async {
        let trigger = triggers.get("hook").await.ok()?;
        trigger.labels().get(LABEL_SHARD).cloned()
    })
    .await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let url = format!("http://{receiver}/triggers/{}/hook", ns.name);
    let started = eventually(
        "the delivery answered 201",
        Duration::from_secs(30),
        || async {
            let response = http.post(&url).body(r#"{"n": 1}"#).send().await.ok()?;
            (response.status() == 201).then_some(response.text().await.ok()?)
        },
    )
    .await;
    let run = started
        .trim()
        .strip_prefix("started: ")
        .expect("the run's name")
        .to_string();
    let finished = ns.wait_terminal_within(&run, Duration::from_secs(60)).await;
    assert_eq!(
        finished.labels().get(LABEL_SHARD),
        Some(&stamped),
        "the run is in the trigger's shard"
    );
    eventually(
        "the trigger's status counts its run",
        Duration::from_secs(30),
        || async {
            let status = triggers.get("hook").await.ok()?.status?;
            (status.runs == 1).then_some(())
        },
    )
    .await;
    sampler.stop();
}

/// The upgrade from one unsharded operator: its workflows are under way, with Jobs that carry
/// no shard label, when it is SIGKILLed and two sharded replicas start. Each workflow and each
/// of its Jobs is stamped with the workflow's shard, every workflow ends as its shape says, and
/// no step runs twice (the unlabelled Jobs are followed, not created again).
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_under_way_when_an_unsharded_operator_gives_way_to_replicas_finish_in_their_shards(
    #[future(awt)] namespace: support::Namespace,
) {
    skip_on_real_cluster!("starts and kills the operator's processes");
    let ns = namespace;
    let recorder = JobRecorder::start(&ns).await;
    let handle = support::Namespace {
        cluster: ns.cluster.clone(),
        name: ns.name.clone(),
    };
    let mut unsharded = Operator::process_with_args(handle, &[]);
    let expected = submit(&ns, 0..12).await;
    eventually(
        "every workflow to have a Job",
        Duration::from_secs(60),
        || async {
            let jobs = recorder.jobs();
            expected
                .iter()
                .all(|(name, _)| jobs.iter().any(|job| &job.workflow == name))
                .then_some(())
        },
    )
    .await;
    unsharded.kill().await;
    let unlabelled: Vec<String> = ns
        .jobs()
        .list(&Default::default())
        .await
        .expect("list Jobs")
        .items
        .iter()
        .filter(|job| !job.labels().contains_key(LABEL_SHARD))
        .map(|job| job.name_any())
        .collect();
    assert!(
        !unlabelled.is_empty(),
        "the unsharded operator's Jobs carry no shard"
    );

    let shards = 4;
    let _replicas: Vec<(Operator, SocketAddr)> = (0..2)
        .map(|i| Operator::shard_replica(&ns, i, shards, LEASE_SECONDS, &[]))
        .collect();
    assert_ended_as_expected(&recorder, &ns, &expected, Duration::from_secs(120)).await;
    eventually(
        "every workflow and Job in its workflow's shard",
        Duration::from_secs(30),
        || async {
            let workflows = ns.workflows().list(&Default::default()).await.ok()?.items;
            let jobs = ns.jobs().list(&Default::default()).await.ok()?.items;
            let shard_of = |name: &str| shards::shard_of(&ns.name, name, shards).to_string();
            let workflows_stamped = workflows
                .iter()
                .all(|w| w.labels().get(LABEL_SHARD) == Some(&shard_of(&w.name_any())));
            let jobs_stamped = jobs.iter().all(|job| {
                let workflow = job.labels().get(LABEL_WORKFLOW);
                workflow.is_some_and(|w| job.labels().get(LABEL_SHARD) == Some(&shard_of(w)))
            });
            (workflows_stamped && jobs_stamped).then_some(())
        },
    )
    .await;
}

/// Creates workflows `range` of mixed shapes, a step half a second each; their names and
/// expected outcomes.
async fn submit(
    ns: &support::Namespace,
    range: std::ops::Range<usize>,
) -> Vec<(String, support::Expected)> {
    let api = ns.workflows();
    let mut expected = Vec::new();
    for i in range {
        let shape = Shape::ALL[i % Shape::ALL.len()];
        let (workflow, outcome) =
            shape.build(&format!("wf-{i:02}-{shape:?}").to_lowercase(), "0.5");
        let manifest = ns.manifest(workflow);
        retrying("creating a workflow", || async {
            api.create(&PostParams::default(), &manifest).await
        })
        .await;
        expected.push((manifest.name_any(), outcome));
    }
    expected
}

/// What the sampler saw.
struct Report {
    samples: usize,
    /// Samples where a shard was worked by two replicas.
    overlaps: Vec<String>,
    /// When each sample was taken and how many shards were worked then.
    worked: Vec<(Instant, usize)>,
}

impl Report {
    /// The time from `since` to the first sample asked after it with every shard worked.
    fn all_worked_after(&self, since: Instant) -> Duration {
        self.worked
            .iter()
            .find(|(at, worked)| *at > since && *worked == SHARDS as usize)
            .map(|(at, _)| *at - since)
            .expect("every shard worked again after the kill")
    }
}

/// Reads every replica's `workflow_operator_shard_held` every 100 ms.
struct Sampler {
    addrs: Arc<Mutex<Vec<SocketAddr>>>,
    report: Arc<Mutex<Report>>,
    latest: Arc<Mutex<BTreeMap<usize, BTreeSet<u32>>>>,
    /// Each answering replica's `workflow_operator_cached_workflows`.
    cached: Arc<Mutex<BTreeMap<usize, usize>>>,
    stop: CancellationToken,
}

impl Sampler {
    fn start(addrs: Vec<SocketAddr>) -> Sampler {
        let sampler = Sampler {
            addrs: Arc::new(Mutex::new(addrs)),
            report: Arc::new(Mutex::new(Report {
                samples: 0,
                overlaps: Vec::new(),
                worked: Vec::new(),
            })),
            latest: Arc::default(),
            cached: Arc::default(),
            stop: CancellationToken::new(),
        };
        let (addrs, report, latest, cached, stop) = (
            sampler.addrs.clone(),
            sampler.report.clone(),
            sampler.latest.clone(),
            sampler.cached.clone(),
            sampler.stop.clone(),
        );
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            while !stop.is_cancelled() {
                let targets = addrs.lock().unwrap().clone();
                let asked = Instant::now();
                let read = join_all(targets.iter().map(|addr| scrape(&http, *addr))).await;
                let answered = read
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, r)| Some((i, r?)));
                let (mut held, mut caches) = (BTreeMap::new(), BTreeMap::new());
                for (i, (shards, workflows)) in answered {
                    held.insert(i, shards);
                    caches.insert(i, workflows);
                }
                *cached.lock().unwrap() = caches;
                record(&mut report.lock().unwrap(), &held, asked);
                *latest.lock().unwrap() = held;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        sampler
    }

    fn add(&self, addr: SocketAddr) {
        self.addrs.lock().unwrap().push(addr);
    }

    /// Waits until exactly `replicas` work shards, each `SHARDS / replicas.len()` (within one).
    async fn wait_spread(&self, what: &str, replicas: &[usize]) {
        self.wait_spread_of(what, SHARDS, replicas).await;
    }

    /// Waits until exactly `replicas` work the `shards`, each `shards / replicas.len()`
    /// (within one).
    async fn wait_spread_of(&self, what: &str, shards: u32, replicas: &[usize]) {
        let share = shards as usize / replicas.len();
        eventually(what, Duration::from_secs(60), || async {
            let latest = self.latest.lock().unwrap().clone();
            let working: Vec<usize> = latest
                .iter()
                .filter(|(_, held)| !held.is_empty())
                .map(|(i, _)| *i)
                .collect();
            let even = latest
                .values()
                .all(|held| held.is_empty() || held.len().abs_diff(share) <= 1);
            let all: usize = latest.values().map(BTreeSet::len).sum();
            (working == replicas && even && all == shards as usize).then_some(())
        })
        .await;
    }

    fn stop(self) -> Report {
        self.stop.cancel();
        let report = self.report.lock().unwrap();
        Report {
            samples: report.samples,
            overlaps: report.overlaps.clone(),
            worked: report.worked.clone(),
        }
    }
}

/// Adds one sample (replica index -> shards it works) to `report`.
/// `asked` is when the scrapes were sent: a sample shows the replicas as they were then or
/// later, so a kill after `asked` may not show in it.
fn record(report: &mut Report, held: &BTreeMap<usize, BTreeSet<u32>>, asked: Instant) {
    report.samples += 1;
    let mut owner: BTreeMap<u32, usize> = BTreeMap::new();
    for (replica, shards) in held {
        for shard in shards {
            if let Some(other) = owner.insert(*shard, *replica) {
                report
                    .overlaps
                    .push(format!("shard {shard}: replicas {other} and {replica}"));
            }
        }
    }
    report.worked.push((asked, owner.len()));
}

/// The shards a replica says it works now, and how many workflows it caches; `None` when it
/// does not answer (not started yet, or killed: a dead process works no shard).
async fn scrape(http: &reqwest::Client, addr: SocketAddr) -> Option<(BTreeSet<u32>, usize)> {
    let response = http
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .ok()?;
    let text = response.text().await.ok()?;
    let held = text
        .lines()
        .filter_map(|line| line.strip_prefix("workflow_operator_shard_held{shard=\""))
        .filter_map(|rest| {
            let (shard, value) = rest.split_once("\"} ")?;
            (value.trim() == "1").then(|| shard.parse().ok())?
        })
        .collect();
    let cached = text
        .lines()
        .find_map(|line| line.strip_prefix("workflow_operator_cached_workflows "))?
        .trim()
        .parse()
        .ok()?;
    Some((held, cached))
}

/// The built-in step queue counts in one process: with several shards it is refused, naming
/// what to use instead, before any request.
#[test]
fn max_running_steps_with_shards_is_refused_saying_to_use_kueue() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["run", "--shards", "3", "--max-running-steps", "5"])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--max-running-steps needs one active replica: with --shards 3 use Kueue"),
        "{stderr}"
    );
}
