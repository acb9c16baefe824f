//! WorkFlowTriggers end to end on the embedded control plane, with real HTTP requests to the
//! receiver of `workflow-operator run --triggers-addr` (the built binary): a signed GitHub push
//! starts one run with its commit as a parameter and its repeat none; a bad signature, a
//! filtered event, an oversize body and an unknown trigger each get their answer and no run;
//! each answer is counted in `/metrics`. A burst of 500 distinct deliveries from 20
//! connections makes 500 runs and their repeat none; the operator SIGKILLed during a burst
//! leaves every delivery answered 201 with its run, and the sender's retries of the others
//! make each once. A file put into `dev`'s embedded artifact store starts one run with its key.
//! `Forbid`, `Replace`, a rate limit and an API server refusing creates each get their answer.

use crate::run_process::free_addr;
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use kube_devcluster::faults::{FaultConfig, InjectedError, Verb};
use serde_json::json;
use support::{DEADLINE, Namespace, Operator, namespace, operator};
use workflow_operator::artifacts::{self, embedded::EmbeddedStore};
use workflow_operator::triggers::{self, Receiver, bucket};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::labels::{ANNOTATION_DELIVERY, LABEL_TRIGGER};
use workflow_operator_core::names;
use workflow_operator_core::trigger::verify::sign;

/// The GitHub webhook secret of the tests.
const SECRET: &str = "gh-s3cret";

/// Makes ring the test process's TLS provider, as the operator's clients do: reqwest is built
/// without one of its own, and a client built before one is installed panics.
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP sender to the receiver of an operator process (and its `/metrics`).
#[derive(Clone)]
struct Sender {
    base: String,
    metrics: String,
    http: reqwest::Client,
    namespace: String,
    client: Client,
}

impl Sender {
    /// Starts the operator with `--triggers-addr` and `--metrics-addr` for `ns`, and waits
    /// until the receiver answers.
    async fn start(ns: Namespace) -> (Operator, Sender) {
        // Free ports, bound again by the operator after a restart.
        let (triggers, metrics) = (free_addr().to_string(), free_addr().to_string());
        let (namespace, client) = (ns.name.clone(), ns.client());
        let args = ["--triggers-addr", &triggers, "--metrics-addr", &metrics];
        let operator = Operator::process_with_args(ns, &args);
        install_crypto();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(32)
            .build()
            .expect("an HTTP client");
        let sender = Sender {
            base: format!("http://{triggers}"),
            metrics: format!("http://{metrics}/metrics"),
            http,
            namespace,
            client,
        };
        sender.wait_up(&operator).await;
        (operator, sender)
    }

    /// Waits, with a deadline, until the receiver answers (404 for a trigger that is not).
    async fn wait_up(&self, operator: &Operator) {
        let start = Instant::now();
        loop {
            let answered = self
                .http
                .post(format!("{}/triggers/none/none", self.base))
                .send()
                .await;
            if answered.is_ok_and(|r| r.status() == 404) {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the receiver did not answer within {DEADLINE:?}; log:\n{}",
                operator.log()
            );
            // A backoff between probes of a process starting, not a wait for a condition.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// POSTs `body` with `headers` to the trigger `name`: the status and the answer's text.
    async fn post(
        &self,
        name: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<(u16, String), reqwest::Error> {
        let url = format!("{}/triggers/{}/{name}", self.base, self.namespace);
        let mut request = self.http.post(url).body(body);
        for (header, value) in headers {
            request = request.header(*header, value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        Ok((status, response.text().await?))
    }

    /// A GitHub push delivery `id` of `body`, signed with `secret`.
    async fn github(
        &self,
        name: &str,
        id: &str,
        body: &serde_json::Value,
        secret: &str,
    ) -> (u16, String) {
        let body = serde_json::to_vec(body).unwrap();
        let headers = [
            ("x-github-event", "push".to_string()),
            ("x-github-delivery", id.to_string()),
            (
                "x-hub-signature-256",
                format!("sha256={}", sign(secret.as_bytes(), &body)),
            ),
            ("content-type", "application/json".to_string()),
        ];
        self.post(name, &headers, body)
            .await
            .expect("the receiver answers")
    }

    /// The runs of the trigger `name` that exist, by name, with their delivery ids.
    async fn runs(&self, name: &str) -> BTreeMap<String, String> {
        let selector = format!("{LABEL_TRIGGER}={name}");
        let workflows: Api<WorkFlow> = Api::namespaced(self.client.clone(), &self.namespace);
        let listed = workflows
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("listing the runs");
        listed
            .items
            .iter()
            .map(|w| {
                (
                    w.name_any(),
                    w.annotations()
                        .get(ANNOTATION_DELIVERY)
                        .cloned()
                        .unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// Creates the Secret `gh` (key `token`) and the trigger of `yaml` in `ns`.
async fn create_trigger(ns: &Namespace, yaml: &str) -> WorkFlowTrigger {
    let client: Client = ns.client();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "gh"},
        "stringData": {"token": SECRET},
    }))
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let _ = secrets.create(&PostParams::default(), &secret).await;
    let trigger: WorkFlowTrigger = serde_yaml::from_str(yaml).expect("a trigger");
    let api: Api<WorkFlowTrigger> = Api::namespaced(client, &ns.name);
    api.create(&PostParams::default(), &trigger)
        .await
        .expect("the trigger is created")
}

const ON_PUSH: &str = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTrigger
metadata: {name: on-push}
spec:
  webhook:
    github: {secretRef: {name: gh, key: token}}
  filter: 'body.ref == "refs/heads/main"'
  parameters: [{name: sha, value: body.after}]
  workflowSpec:
    arguments: {parameters: [{name: sha}]}
    containers: [{stepName: build, image: busybox, command: [echo, "{{workflow.parameters.sha}}"]}]
"#;

fn push(git_ref: &str, sha: &str) -> serde_json::Value {
    json!({"ref": git_ref, "after": sha, "repository": {"full_name": "o/r"}})
}

/// A run create answered 409 `Conflict` (a write that lost a race; not `AlreadyExists`)
/// started nothing: the delivery is answered 503, so its sender delivers it again, and the
/// delivery again once creates go through starts its one run. Answered "already started", the
/// delivery was lost.
#[rstest::rstest]
#[tokio::test]
async fn a_run_create_refused_with_a_conflict_answers_503_and_the_retry_starts_one_run(
    #[future] namespace: Namespace,
) {
    skip_on_real_cluster!("injects API faults");
    let (operator, receiver) = Sender::start(namespace.await).await;
    create_trigger(&operator.ns, ON_PUSH).await;
    let dev = operator
        .ns
        .cluster
        .dev()
        .expect("the embedded control plane");
    let main = push("refs/heads/main", "c0ffee2");
    dev.faults()
        .set_error_rate(Verb::Create, 1.0, InjectedError::Conflict);
    let (status, text) = receiver.github("on-push", "d-9", &main, SECRET).await;
    dev.faults().clear();
    assert_eq!(status, 503, "{text}");
    assert!(receiver.runs("on-push").await.is_empty());

    let (status, text) = receiver.github("on-push", "d-9", &main, SECRET).await;
    let run = names::trigger_run_name("on-push", "d-9");
    assert_eq!(
        (status, text.trim()),
        (201, format!("started: {run}").as_str())
    );
    operator.ns.expect_completed(&run).await;
}

#[rstest::rstest]
#[tokio::test]
async fn a_signed_push_starts_one_run_and_every_other_delivery_gets_its_answer_and_none(
    #[future] namespace: Namespace,
) {
    skip_on_real_cluster!("the operator runs as a process of this test");
    let (operator, receiver) = Sender::start(namespace.await).await;
    create_trigger(&operator.ns, ON_PUSH).await;
    let main = push("refs/heads/main", "c0ffee1");

    let (status, text) = receiver.github("on-push", "d-1", &main, SECRET).await;
    let run = names::trigger_run_name("on-push", "d-1");
    assert_eq!(
        (status, text.trim()),
        (201, format!("started: {run}").as_str())
    );
    let created = operator.ns.expect_completed(&run).await;
    let parameters = &created
        .spec
        .arguments
        .as_ref()
        .expect("arguments")
        .parameters;
    assert_eq!(parameters[0].value.as_deref(), Some("c0ffee1"));

    let (status, text) = receiver.github("on-push", "d-1", &main, SECRET).await;
    assert_eq!(
        (status, text.trim()),
        (200, format!("already started: {run}").as_str())
    );

    let (status, text) = receiver
        .github("on-push", "d-2", &main, "not-the-secret")
        .await;
    assert_eq!(status, 401, "{text}");
    assert!(!text.contains("c0ffee1"), "the body is echoed: {text}");
    let dev = push("refs/heads/dev", "d3adbee");
    let (status, text) = receiver.github("on-push", "d-3", &dev, SECRET).await;
    assert_eq!((status, text.trim()), (202, "no run: filter is false"));
    let huge = json!({"ref": "refs/heads/main", "after": "x", "pad": "a".repeat(1 << 20)});
    let (status, _) = receiver.github("on-push", "d-4", &huge, SECRET).await;
    assert_eq!(status, 413);
    let (status, text) = receiver.github("no-such", "d-5", &main, SECRET).await;
    assert_eq!(status, 404, "{text}");

    let runs = receiver.runs("on-push").await;
    assert_eq!(runs, BTreeMap::from([(run, "d-1".to_string())]));
    let metrics = receiver
        .http
        .get(&receiver.metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (outcome, count) in [
        ("started", 1),
        ("already_started", 1),
        ("unauthorized", 1),
        ("filtered", 1),
        ("too_large", 1),
    ] {
        let line = format!(
            "workflow_operator_trigger_deliveries_total{{namespace=\"{}\",trigger=\"on-push\",outcome=\"{outcome}\"}} {count}",
            receiver.namespace
        );
        assert!(metrics.contains(&line), "no {line:?} in:\n{metrics}");
    }
}

/// A trigger whose runs stay suspended (no step starts): the burst measures the receiver and
/// the API server, not 500 workflows' pods.
const QUIET: &str = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTrigger
metadata: {name: burst}
spec:
  webhook:
    github: {secretRef: {name: gh, key: token}}
  parameters: [{name: sha, value: body.after}]
  successfulRunsHistoryLimit: 1000
  workflowSpec:
    suspend: true
    arguments: {parameters: [{name: sha}]}
    containers: [{stepName: build, image: busybox, command: [echo, "{{workflow.parameters.sha}}"]}]
"#;

/// What a burst's sender saw: per delivery id, each answer's status (or 0 for no answer).
type Seen = BTreeMap<String, Vec<u16>>;

/// Sends `ids` (each once) over `connections` connections at once; returns each answer and
/// the answer times of those answered.
async fn burst(receiver: &Sender, ids: &[String], connections: usize) -> (Seen, Vec<Duration>) {
    burst_counted(receiver, ids, connections, Arc::new(watch::channel(0).0)).await
}

/// [`burst`], counting the answers 201 into `created`.
async fn burst_counted(
    receiver: &Sender,
    ids: &[String],
    connections: usize,
    created: Arc<watch::Sender<usize>>,
) -> (Seen, Vec<Duration>) {
    let queue = Arc::new(std::sync::Mutex::new(ids.to_vec()));
    let mut senders = Vec::new();
    for _ in 0..connections {
        let (receiver, queue, created) = (receiver.clone(), queue.clone(), created.clone());
        senders.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let Some(id) = queue.lock().unwrap().pop() else {
                    return seen;
                };
                let body = serde_json::to_vec(&push("refs/heads/main", &id)).unwrap();
                let headers = [
                    ("x-github-delivery", id.clone()),
                    (
                        "x-hub-signature-256",
                        format!("sha256={}", sign(SECRET.as_bytes(), &body)),
                    ),
                ];
                let started = Instant::now();
                let status = match receiver.post("burst", &headers, body).await {
                    Ok((status, _)) => status,
                    Err(_) => 0,
                };
                if status == 201 {
                    created.send_modify(|n| *n += 1);
                }
                seen.push((id, status, started.elapsed()));
            }
        }));
    }
    let mut seen = Seen::new();
    let mut times = Vec::new();
    for sender in senders {
        for (id, status, took) in sender.await.expect("a sender") {
            seen.entry(id).or_default().push(status);
            if status != 0 {
                times.push(took);
            }
        }
    }
    (seen, times)
}

/// The deliveries of `seen` not answered `status` once: how many, and the first few.
fn others(seen: &Seen, status: u16) -> String {
    let other: Vec<_> = seen.iter().filter(|(_, s)| s != &&vec![status]).collect();
    format!(
        "{} such, first {:?}",
        other.len(),
        &other[..other.len().min(5)]
    )
}

fn delivery_ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

#[rstest::rstest]
#[tokio::test]
async fn a_burst_of_500_deliveries_makes_500_runs_and_its_repeat_none(
    #[future] namespace: Namespace,
) {
    skip_on_real_cluster!("the operator runs as a process of this test");
    let (operator, receiver) = Sender::start(namespace.await).await;
    create_trigger(&operator.ns, QUIET).await;
    let ids = delivery_ids("burst", 500);

    let started = Instant::now();
    let (seen, mut times) = burst(&receiver, &ids, 20).await;
    let took = started.elapsed();
    let created = seen.values().filter(|s| s == &&vec![201]).count();
    assert_eq!(
        created,
        500,
        "answers other than 201: {}",
        others(&seen, 201)
    );
    times.sort();
    eprintln!(
        "burst: 500 deliveries from 20 connections in {took:?} ({:.0}/s), answer p50 {:?} p99 {:?}",
        500.0 / took.as_secs_f64(),
        times[times.len() / 2],
        times[times.len() * 99 / 100]
    );
    let runs = receiver.runs("burst").await;
    let expected: BTreeMap<String, String> = ids
        .iter()
        .map(|id| (names::trigger_run_name("burst", id), id.clone()))
        .collect();
    assert_eq!(runs, expected);

    let (again, _) = burst(&receiver, &ids, 20).await;
    let repeated = again.values().filter(|s| s == &&vec![200]).count();
    assert_eq!(
        repeated,
        500,
        "answers other than 200: {}",
        others(&again, 200)
    );
    assert_eq!(receiver.runs("burst").await.len(), 500);
}

#[rstest::rstest]
#[tokio::test]
async fn after_a_sigkill_during_a_burst_every_201_has_its_run_and_retries_make_the_rest_once(
    #[future] namespace: Namespace,
) {
    skip_on_real_cluster!("the operator is SIGKILLed by this test");
    let (mut operator, receiver) = Sender::start(namespace.await).await;
    create_trigger(&operator.ns, QUIET).await;
    let ids = delivery_ids("killed", 500);

    // The burst runs while the operator is killed once 100 deliveries were answered 201.
    let (created, mut answered) = watch::channel(0);
    let sending = {
        let (receiver, ids) = (receiver.clone(), ids.clone());
        tokio::spawn(async move { burst_counted(&receiver, &ids, 20, Arc::new(created)).await })
    };
    tokio::time::timeout(DEADLINE, answered.wait_for(|n| *n >= 100))
        .await
        .expect("100 deliveries answered 201 in time")
        .expect("the burst runs");
    operator.kill().await;
    let (seen, _) = sending.await.expect("the burst");
    let answered_201: BTreeSet<&String> = seen
        .iter()
        .filter(|(_, s)| s.contains(&201))
        .map(|(id, _)| id)
        .collect();
    assert!(
        answered_201.len() < 500,
        "the kill came after the whole burst was answered"
    );
    let runs = receiver.runs("burst").await;
    for id in &answered_201 {
        assert!(
            runs.contains_key(&names::trigger_run_name("burst", id)),
            "{id} was answered 201 and has no run"
        );
    }

    operator.start();
    receiver.wait_up(&operator).await;
    // The sender retries every delivery it got no 2xx for, until it gets one.
    let retried: Vec<String> = ids
        .iter()
        .filter(|id| !answered_201.contains(id))
        .cloned()
        .collect();
    let (again, _) = burst(&receiver, &retried, 20).await;
    let not_taken: Vec<_> = again
        .iter()
        .filter(|(_, s)| !s.iter().all(|c| *c == 200 || *c == 201))
        .collect();
    assert!(not_taken.is_empty(), "retries not taken: {not_taken:?}");
    let runs = receiver.runs("burst").await;
    let expected: BTreeMap<String, String> = ids
        .iter()
        .map(|id| (names::trigger_run_name("burst", id), id.clone()))
        .collect();
    assert_eq!(runs, expected, "one run per delivery");
    eprintln!(
        "killed during the burst: {} answered 201 before, {} retried ({} of them already made: 200)",
        answered_201.len(),
        retried.len(),
        again.values().filter(|s| s.contains(&200)).count()
    );
}

/// What `dev` wires up, in this test: its embedded artifact store sending the notifications
/// of what is written into it to the receiver (of this test's namespace), which the operator
/// (a task here) follows.
const ON_UPLOAD: &str = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTrigger
metadata: {name: on-upload}
spec:
  bucket: {name: workflows, prefix: inbox/}
  filter: 'event.startsWith("s3:ObjectCreated:")'
  parameters: [{name: key, value: key}]
  workflowSpec:
    arguments: {parameters: [{name: key}]}
    containers: [{stepName: process, image: busybox, command: [echo, "got {{workflow.parameters.key}}"]}]
"#;

#[rstest::rstest]
#[tokio::test]
async fn a_file_put_into_the_embedded_store_starts_one_run_with_its_key(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("the embedded artifact store is this test's");
    let ns = &operator.ns;
    let store = EmbeddedStore::start(None).await.expect("the store starts");
    let stop = tokio_util::sync::CancellationToken::new();
    let receiver = Receiver::new(ns.client(), Some(ns.name.clone()), None, &stop);
    let bound = triggers::serve("127.0.0.1:0".parse().unwrap(), receiver, stop.clone())
        .await
        .expect("the receiver serves");
    let (puts, written) = tokio::sync::mpsc::unbounded_channel();
    store.notify(puts);
    tokio::spawn(bucket::notify(
        ns.client(),
        format!("http://{bound}"),
        written,
    ));
    create_trigger(ns, ON_UPLOAD).await;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.csv");
    std::fs::write(&file, "a,b\n").unwrap();
    artifacts::put_path(store.target(), "elsewhere/report.csv", &file)
        .await
        .unwrap();
    artifacts::put_path(store.target(), "inbox/report.csv", &file)
        .await
        .unwrap();

    let runs = support::wait_list(
        &ns.workflows(),
        kube::runtime::watcher::Config::default().labels(&format!("{LABEL_TRIGGER}=on-upload")),
        "a run of on-upload",
        DEADLINE,
        |runs| !runs.is_empty(),
    )
    .await;
    let run = runs[0].name_any();
    let done = ns.expect_completed(&run).await;
    let parameters = &done.spec.arguments.as_ref().expect("arguments").parameters;
    assert_eq!(parameters[0].value.as_deref(), Some("inbox/report.csv"));
    assert!(
        done.annotations()[ANNOTATION_DELIVERY].starts_with("workflows/inbox/report.csv@"),
        "{:?}",
        done.annotations()
    );
    let sender = Sender {
        base: format!("http://{bound}"),
        metrics: String::new(),
        http: {
            install_crypto();
            reqwest::Client::new()
        },
        namespace: ns.name.clone(),
        client: ns.client(),
    };
    assert_eq!(
        sender.runs("on-upload").await.len(),
        1,
        "one run, none for the key outside the prefix"
    );
    stop.cancel();
}

#[test]
fn dev_serves_the_receiver_and_prints_its_address() {
    use std::io::{BufRead, BufReader};
    let mut dev = std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args([
            "dev",
            "--no-operator",
            "--web-addr",
            "off",
            "--triggers-addr",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dev starts");
    let stdout = dev.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines().map(|l| l.expect("a line"));
    let line = lines.by_ref().find(|l| l.starts_with("triggers at "));
    // The rest is read too: dev writing to a pipe nobody reads would die of SIGPIPE.
    std::thread::spawn(move || lines.for_each(drop));
    let base = line.expect("dev prints the receiver's address");
    let base = base.strip_prefix("triggers at ").unwrap().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    install_crypto();
    let status = runtime.block_on(async {
        let url = format!("{base}/triggers/default/none");
        reqwest::Client::new()
            .post(url)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // SIGTERM: dev removes its temporary store on the way out.
    let pid = nix::unistd::Pid::from_raw(dev.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM delivered");
    let exited = dev.wait().expect("dev exits");
    assert_eq!(status.expect("the receiver answers"), 404);
    assert!(exited.success(), "dev exited with {exited}");
}

/// A trigger `name` whose runs stay suspended (active until terminated), with `extra` spec
/// lines.
fn suspended_trigger(name: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTrigger
metadata: {{name: {name}}}
spec:
  webhook:
    github: {{secretRef: {{name: gh, key: token}}}}
{extra}
  workflowSpec:
    suspend: true
    containers: [{{stepName: build, image: busybox, command: ["true"]}}]
"#
    )
}

#[rstest::rstest]
#[tokio::test]
async fn forbid_replace_a_rate_limit_and_an_unreachable_api_server_each_get_their_answer(
    #[future] namespace: Namespace,
) {
    skip_on_real_cluster!("the API server's faults are injected by this test");
    let (operator, receiver) = Sender::start(namespace.await).await;
    let ns = &operator.ns;
    let main = push("refs/heads/main", "c0ffee1");
    let run = |trigger: &str, id: &str| names::trigger_run_name(trigger, id);

    create_trigger(
        ns,
        &suspended_trigger("forbid", "  concurrencyPolicy: Forbid"),
    )
    .await;
    assert_eq!(receiver.github("forbid", "f-1", &main, SECRET).await.0, 201);
    let (status, text) = receiver.github("forbid", "f-2", &main, SECRET).await;
    let skipped = format!(
        "no run: {} still running (concurrencyPolicy Forbid)",
        run("forbid", "f-1")
    );
    assert_eq!((status, text.trim()), (202, skipped.as_str()));
    assert_eq!(receiver.github("forbid", "f-1", &main, SECRET).await.0, 200);

    create_trigger(
        ns,
        &suspended_trigger("replace", "  concurrencyPolicy: Replace"),
    )
    .await;
    assert_eq!(
        receiver.github("replace", "r-1", &main, SECRET).await.0,
        201
    );
    assert_eq!(
        receiver.github("replace", "r-2", &main, SECRET).await.0,
        201
    );
    let replaced = ns.get(&run("replace", "r-1")).await;
    assert_eq!(
        replaced.spec.shutdown,
        Some(workflow_operator_core::crd::Shutdown::Terminate)
    );

    create_trigger(
        ns,
        &suspended_trigger("limited", "  rateLimit: {perSecond: 1, burst: 1}"),
    )
    .await;
    assert_eq!(
        receiver.github("limited", "l-1", &main, SECRET).await.0,
        201
    );
    assert_eq!(
        receiver.github("limited", "l-2", &main, SECRET).await.0,
        429
    );

    create_trigger(ns, &suspended_trigger("allow", "")).await;
    let faults = ns
        .cluster
        .dev()
        .expect("the embedded control plane")
        .faults();
    faults.set(FaultConfig {
        error_rates: vec!["create=1.0:500".parse().unwrap()],
        ..FaultConfig::default()
    });
    let (status, text) = receiver.github("allow", "a-1", &main, SECRET).await;
    faults.set(FaultConfig::default());
    assert_eq!(status, 503, "{text}");
    assert!(receiver.runs("allow").await.is_empty(), "a run half made");
    let (status, text) = receiver.github("allow", "a-1", &main, SECRET).await;
    assert_eq!(
        (status, text.trim()),
        (201, format!("started: {}", run("allow", "a-1")).as_str())
    );

    let listed = ns.cli(&["trigger", "list"]).await;
    for trigger in ["forbid", "replace", "limited", "allow"] {
        assert!(listed.contains(trigger), "{listed}");
    }
    let shown = ns.cli(&["trigger", "get", "forbid"]).await;
    assert!(
        shown.contains(&run("forbid", "f-1")) && shown.contains("f-1"),
        "{shown}"
    );
    assert!(shown.contains("Source:      webhook/github"), "{shown}");
}

#[test]
fn validate_checks_a_trigger_its_expressions_and_the_spec_of_its_runs() {
    let run = |file: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
            .args(["validate", file])
            .output()
            .expect("validate runs")
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let valid = run(&format!("{root}/examples/trigger.yaml"));
    let said = String::from_utf8_lossy(&valid.stdout);
    assert!(
        valid.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&valid.stderr)
    );
    assert!(said.contains("workflowtrigger on-push: valid"), "{said}");

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let text = ON_PUSH
        .replace(r#"'body.ref == "refs/heads/main"'"#, "'body.ref =='")
        .replace("stepName: build", "stepName: build, dependsOn: [nowhere]");
    std::fs::write(&broken, text).unwrap();
    let refused = run(broken.to_str().unwrap());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("workflowtrigger on-push: spec.filter: does not compile"),
        "{said}"
    );
    assert!(
        said.contains("workflowtrigger on-push: spec.workflowSpec: "),
        "{said}"
    );
    assert!(said.contains("nowhere"), "{said}");
}
