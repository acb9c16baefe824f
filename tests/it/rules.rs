//! Rules on a run's metrics (`spec.rules`), end to end: `grow` fires twice and its
//! `repetitions` stop it, `shrink` stops at `minParallelism`, `finish` stops a workflow and
//! `repeat` adds a run, the running Jobs (a watch of them, every change seen) follow the
//! parallelism the rules set, and an operator killed with SIGKILL between two firings neither
//! loses nor repeats one.
//!
//! Needs the embedded control plane for the SIGKILL (the operator runs as a process the test
//! kills); the others run on any cluster.

use crate::support;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use rstest::rstest;
use support::queueing::is_running;
use support::{DEADLINE, Namespace, Operator, operator, operator_process, phase};
use tokio::task::JoinHandle;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{RuleAction, RuleStatus};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::testing::WorkFlowBuilder;

/// `runs` runs of one step `sim` that sleeps `seconds`, `parallelism` at once.
fn sims(name: &str, runs: i32, parallelism: i32, seconds: &str) -> WorkFlowBuilder {
    WorkFlow::test(name)
        .runs(runs)
        .parallelism(parallelism)
        .step("sim", &[])
        .command(&["sleep", seconds])
}

/// Each time more of a workflow's Jobs run than at the change before: how many run, and the
/// parallelism its status held right after (its rules', else its spec's). The operator writes
/// a firing before the Jobs it lets start, so a Job seen running was started under at most
/// the parallelism read after it.
struct Running {
    seen: Arc<Mutex<Vec<(usize, i32)>>>,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    async fn start(ns: &Namespace, workflow: &str) -> Running {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let selector = workflow_operator_core::jobs::selector(workflow);
        let config = watcher::Config::default().labels(&selector);
        let (jobs, workflows) = (ns.jobs(), ns.workflows());
        let name = workflow.to_string();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut listed_tx = Some(listed_tx);
                let mut running = std::collections::BTreeSet::new();
                let mut events = watcher(jobs, config).default_backoff().boxed();
                while let Some(event) = events.next().await {
                    let before = running.len();
                    match event {
                        Ok(watcher::Event::InitApply(job) | watcher::Event::Apply(job)) => {
                            if is_running(&job) {
                                running.insert(job.name_any());
                            } else {
                                running.remove(&job.name_any());
                            }
                        }
                        Ok(watcher::Event::Delete(job)) => {
                            running.remove(&job.name_any());
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                    if running.len() > before
                        && let Ok(wf) = workflows.get(&name).await
                    {
                        let rules = wf.status.as_ref().and_then(|s| s.parallelism);
                        let parallelism = rules
                            .or(wf.spec.parallelism.as_ref().and_then(|p| p.num()))
                            .unwrap_or(i32::MAX);
                        seen.lock()
                            .expect("lock")
                            .push((running.len(), parallelism));
                    }
                }
            })
        };
        tokio::time::timeout(DEADLINE, listed)
            .await
            .expect("the job watch starts")
            .expect("the job watch lists");
        Running { seen, task }
    }

    /// (running, parallelism) at each rise of the running Jobs, in order.
    fn rises(&self) -> Vec<(usize, i32)> {
        self.seen.lock().expect("lock").clone()
    }

    /// The most Jobs seen running at once.
    fn peak(&self) -> usize {
        self.rises().iter().map(|(n, _)| *n).max().unwrap_or(0)
    }

    /// Asserts no Job ran beyond the parallelism in force.
    fn assert_within_parallelism(&self) {
        let rises = self.rises();
        assert!(
            rises.iter().all(|(n, p)| *n as i64 <= i64::from(*p)),
            "more Jobs ran than the parallelism: {rises:?}"
        );
    }
}

/// The workflow's rule named `rule`, as its status records it.
fn rule<'w>(workflow: &'w WorkFlow, rule: &str) -> &'w RuleStatus {
    let status = workflow.status.as_ref().expect("a status");
    status
        .rules
        .iter()
        .find(|r| r.name == rule)
        .expect("the rule's record")
}

/// The messages of the `RuleFired` Events of `workflow`, once there are `count`.
async fn rule_events(ns: &Namespace, workflow: &str, count: usize) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let fired = |e: &Event| {
        e.reason.as_deref() == Some("RuleFired")
            && e.involved_object.name.as_deref() == Some(workflow)
    };
    let events = support::wait_list(
        &events,
        watcher::Config::default(),
        &format!("{count} RuleFired Events"),
        DEADLINE,
        |events| events.iter().filter(|e| fired(e)).count() >= count,
    )
    .await;
    let mut messages: Vec<String> = (events.iter())
        .filter(|e| fired(e))
        .filter_map(|e| e.message.clone())
        .collect();
    messages.sort();
    messages
}

/// Acceptance: a 20-run workflow whose step sleeps long enough fires `grow` twice, then its
/// `repetitions` stop it (well below `maxParallelism`); the running Jobs never exceed the
/// parallelism in force and reach the rules' 3; each firing is an Event and a line in `get`.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_fires_twice_then_its_repetitions_stop_it_and_the_running_jobs_follow(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let running = Running::start(ns, "slow-sims").await;
    ns.create(sims("slow-sims", 20, 1, "1.5").rule_with(
        "slow-sims",
        "steps.sim.duration.mean >= 1",
        RuleAction::Grow,
        |r| {
            r.repetitions = Some(2);
            r.max_parallelism = Some(10);
        },
    ))
    .await;
    let done = ns.expect_completed("slow-sims").await;
    let status = done.status.as_ref().expect("a status");
    assert_eq!(status.parallelism, Some(3), "1, grown twice");
    let fired = rule(&done, "slow-sims");
    assert_eq!(fired.fired, 2);
    assert_eq!(fired.firings.len(), 2);
    for (firing, to) in fired.firings.iter().zip(["1 -> 2", "2 -> 3"]) {
        assert!(
            firing.starts_with("slow-sims: steps.sim.duration.mean = ")
                && firing.ends_with(&format!(">= 1: parallelism {to}")),
            "{firing}"
        );
    }
    assert_eq!(status.metrics["sim"].succeeded, 20);
    running.assert_within_parallelism();
    assert_eq!(running.peak(), 3, "rises: {:?}", running.rises());
    let first_rise = running.rises()[0];
    assert_eq!(first_rise, (1, 1), "one Job at first");

    let mut expected = fired.firings.clone();
    expected.sort();
    assert_eq!(rule_events(ns, "slow-sims", 2).await, expected);
    let shown = ns.cli(&["get", "slow-sims"]).await;
    let section = shown.split("RULES FIRED\n").nth(1).unwrap_or_default();
    assert_eq!(
        section.lines().collect::<Vec<_>>(),
        fired.firings,
        "{shown}"
    );
}

/// Acceptance: `shrink` lowers the parallelism once and stops at `minParallelism` although
/// it still holds and has repetitions left; the running Jobs follow.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shrink_stops_at_min_parallelism(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let running = Running::start(ns, "calm").await;
    ns.create(sims("calm", 8, 3, "1").rule_with(
        "calm-down",
        "steps.sim.succeeded >= 1",
        RuleAction::Shrink,
        |r| {
            r.repetitions = Some(5);
            r.min_parallelism = Some(2);
        },
    ))
    .await;
    let done = ns.expect_completed("calm").await;
    assert_eq!(done.status.as_ref().unwrap().parallelism, Some(2));
    assert_eq!(
        rule(&done, "calm-down").fired,
        1,
        "bounded by minParallelism"
    );
    running.assert_within_parallelism();
    let rises = running.rises();
    assert_eq!(running.peak(), 3, "the spec's 3 at first: {rises:?}");
    let after = rises
        .iter()
        .skip_while(|(_, p)| *p == 3)
        .collect::<Vec<_>>();
    assert!(
        !after.is_empty() && after.iter().all(|(n, p)| *p == 2 && *n <= 2),
        "after the firing at most 2 ran: {rises:?}"
    );
}

/// Acceptance: `finish` ends a workflow as `shutdown: Stop` does (running steps finish, no
/// new one starts), and `repeat` adds a run before the workflow completes.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_stops_the_workflow_and_repeat_adds_a_run(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(sims("enough", 6, 1, "0.2").rule(
        "two-are-enough",
        "workflow.runs.completed >= 2",
        RuleAction::Finish,
    ))
    .await;
    ns.create(sims("again", 2, 2, "0.2").rule(
        "one-more",
        "workflow.runs.completed >= 2",
        RuleAction::Repeat,
    ))
    .await;

    let finished = ns
        .expect_failed(
            "enough",
            &[
                "finished by rule two-are-enough: workflow.runs.completed = 2 >= 2",
                "4 steps never ran",
            ],
        )
        .await;
    let stopped = finished
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed");
    assert_eq!(stopped.map(|c| c.reason.as_str()), Some("Stopped"));
    assert_eq!(
        ns.jobs_of("enough").await.len(),
        2,
        "no run started after the firing"
    );

    let repeated = ns.expect_completed("again").await;
    let status = repeated.status.as_ref().unwrap();
    assert_eq!(status.progress.as_deref(), Some("3/3"));
    assert_eq!(
        status.message.as_deref(),
        Some("1 step succeeded in each of 3 runs")
    );
    assert_eq!(
        rule(&repeated, "one-more").firings,
        ["one-more: workflow.runs.completed = 2 >= 2: runs 2 -> 3"]
    );
    assert_eq!(ns.jobs_of("again").await.len(), 3);
    assert_eq!(phase(&repeated), Some(Phase::Completed));
}

/// Acceptance: the operator killed with SIGKILL right after a first firing was recorded, and
/// restarted, makes the second firing once: the parallelism ends at exactly the spec's plus
/// two (a lost firing would leave 2, a repeated one 4), recorded twice, and no more Jobs ran
/// at once than the parallelism in force.
#[rstest]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_between_two_firings_neither_loses_nor_repeats_one(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    let mut operator = operator_process;
    let running = Running::start(&operator.ns, "killed").await;
    operator
        .ns
        .create(sims("killed", 10, 1, "1").rule_with(
            "grow",
            "steps.sim.succeeded >= 1",
            RuleAction::Grow,
            |r| {
                r.repetitions = Some(2);
                r.backoff = Some(2);
            },
        ))
        .await;
    operator
        .ns
        .wait_workflow("killed", "the first firing recorded", |wf| {
            wf.status
                .as_ref()
                .is_some_and(|s| s.rules.iter().any(|r| r.fired == 1))
        })
        .await;
    operator.kill().await;
    // While it is down the steps go on: the second firing is the restarted operator's.
    operator
        .ns
        .wait_jobs("killed", "every Job it created finished", |jobs| {
            jobs.iter().all(|j| support::job_outcome(j).is_some())
        })
        .await;
    operator.start();
    let done = operator.ns.expect_completed("killed").await;
    assert_eq!(done.status.as_ref().unwrap().parallelism, Some(3));
    let fired = rule(&done, "grow");
    assert_eq!((fired.fired, fired.firings.len()), (2, 2), "{fired:?}");
    running.assert_within_parallelism();
    assert_eq!(running.peak(), 3, "rises: {:?}", running.rises());
    // The second firing is the restarted operator's, made once.
    let log = operator.log();
    let restarted = log
        .rsplit("starting the operator")
        .next()
        .unwrap_or_default();
    assert_eq!(
        restarted.matches("reason=\"RuleFired\"").count(),
        1,
        "{log}"
    );
    assert!(restarted.contains("parallelism 2 -> 3"), "{log}");
}
