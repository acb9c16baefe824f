//! Locks between workflows (`synchronization`) end to end on the embedded control plane: a
//! mutex never held by two across 20 contenders, a semaphore never past its limit and used in
//! full, a step's mutex, and what a waiting workflow says. "Held" is observed by a watch of the
//! step Jobs (every change, in order), not sampled.

use crate::support;

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::watcher::{self, Event};
use rstest::rstest;
use support::{Gate, Operator, job_outcome, operator, operator_process};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;

/// Watches the namespace's step Jobs until `workflows` Jobs have finished; the most that ran at
/// once (created and not finished), every change counted.
async fn most_at_once(jobs: Api<Job>, workflows: usize) -> usize {
    most_at_once_of(jobs, workflows, "").await
}

/// [`most_at_once`] for the Jobs whose names begin with `prefix`.
async fn most_at_once_of(jobs: Api<Job>, workflows: usize, prefix: &str) -> usize {
    let config = watcher::Config::default().labels(workflow_operator_core::jobs::LABEL_WORKFLOW);
    let mut events = std::pin::pin!(watcher::watcher(jobs, config));
    let (mut running, mut finished) = (BTreeSet::new(), BTreeSet::new());
    let mut most = 0;
    while finished.len() < workflows {
        let event = tokio::time::timeout(support::DEADLINE, events.next())
            .await
            .expect("the Jobs change in time")
            .expect("the watch goes on")
            .expect("a watch event");
        let (Event::Apply(job) | Event::InitApply(job)) = event else {
            continue;
        };
        if !job.name_any().starts_with(prefix) {
            continue;
        }
        if job_outcome(&job).is_some() {
            running.remove(&job.name_any());
            finished.insert(job.name_any());
        } else if !finished.contains(&job.name_any()) {
            running.insert(job.name_any());
        }
        most = most.max(running.len());
    }
    most
}

#[rstest]
#[tokio::test]
async fn a_mutex_is_never_held_by_two_of_twenty_contenders(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let watching = tokio::spawn(most_at_once(ns.jobs(), 20));
    for i in 0..20 {
        ns.create(
            WorkFlow::test(&format!("deploy-{i:02}"))
                .synchronization("{mutexes: [{name: deploy-prod}]}")
                .step("deploy", &[])
                .command(&["sh", "-c", "sleep 0.1"]),
        )
        .await;
    }
    for i in 0..20 {
        ns.expect_completed(&format!("deploy-{i:02}")).await;
    }
    assert_eq!(watching.await.expect("the watch"), 1);
    // Every lock was given back.
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    let left = leases.list(&ListParams::default()).await.expect("leases");
    assert!(
        left.items.is_empty(),
        "{:?}",
        left.items.iter().map(|l| l.name_any()).collect::<Vec<_>>()
    );
}

#[rstest]
#[tokio::test]
async fn a_semaphore_is_used_in_full_and_never_past_its_limit(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("the steps wait for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let wait = gate.wait_command("done");
    let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
    let watching = tokio::spawn(most_at_once(ns.jobs(), 8));
    for i in 0..8 {
        ns.create(
            WorkFlow::test(&format!("load-{i}"))
                .synchronization("{semaphores: [{name: db, limit: 3}]}")
                .step("load", &[])
                .command(&wait),
        )
        .await;
    }
    // Three hold it; the others wait, saying for what and whom.
    ns.wait_workflow("load-7", "waiting for the semaphore", |wf| {
        support::message(wf).contains("waiting for semaphore db (limit 3) held by")
            || wf.status.as_ref().is_some_and(|s| {
                s.steps.iter().any(|e| {
                    e.phase == StepPhase::Queued
                        && e.message
                            .as_deref()
                            .unwrap_or("")
                            .contains("waiting for semaphore db")
                })
            })
    })
    .await;
    let jobs = ns.jobs().list(&ListParams::default()).await.expect("jobs");
    assert!(
        jobs.items.len() <= 3,
        "{} Jobs while 3 hold the semaphore",
        jobs.items.len()
    );
    // `locks` names the three holders and the five in line.
    let listed: serde_json::Value =
        serde_json::from_str(&ns.cli(&["locks", "-o", "json"]).await).expect("JSON");
    let row = &listed[0];
    assert_eq!(row["lock"], "semaphore/db", "{listed}");
    assert_eq!(row["heldBy"].as_array().map(Vec::len), Some(3), "{listed}");
    assert_eq!(row["waiting"].as_array().map(Vec::len), Some(5), "{listed}");
    gate.open();
    for i in 0..8 {
        ns.expect_completed(&format!("load-{i}")).await;
    }
    assert_eq!(
        watching.await.expect("the watch"),
        3,
        "used in full, never past 3"
    );
}

#[rstest]
#[tokio::test]
async fn a_steps_mutex_is_held_while_it_runs_and_the_other_steps_wait(
    #[future(awt)] operator: Operator,
) {
    let ns = &operator.ns;
    let watching = tokio::spawn(most_at_once(ns.jobs(), 4));
    let mut workflow = WorkFlow::test("warehouse");
    for step in ["a", "b", "c", "d"] {
        workflow = workflow
            .step(step, &[])
            .command(&["sh", "-c", "sleep 0.2"])
            .step_synchronization("{mutexes: [{name: warehouse}]}");
    }
    ns.create(workflow).await;
    ns.expect_completed("warehouse").await;
    assert_eq!(watching.await.expect("the watch"), 1);
}

#[rstest]
#[tokio::test]
async fn waiters_get_a_mutex_in_priority_order(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("the steps wait for a file the test creates");
    let ns = &operator.ns;
    let (first, rest) = (Gate::new(), Gate::new());
    let holds = |name: &str, gate: &Gate, priority: i32| {
        let wait = gate.wait_command("done");
        let wait: Vec<&str> = wait.iter().map(String::as_str).collect();
        WorkFlow::test(name)
            .priority(priority)
            .synchronization("{mutexes: [{name: release}]}")
            .step("run", &[])
            .command(&wait)
    };
    ns.create(holds("holder", &first, 0)).await;
    ns.wait_step_job("holder", "run", "created", |_| true).await;
    ns.create(holds("older-low", &rest, 0)).await;
    ns.create(holds("newer-high", &rest, 5)).await;
    for waiter in ["older-low", "newer-high"] {
        ns.wait_workflow(waiter, "waiting for the mutex", |wf| {
            (wf.status.iter().flat_map(|s| &s.steps)).any(|e| {
                (e.message.as_deref().unwrap_or("")).contains("waiting for mutex release held by")
            })
        })
        .await;
    }
    first.open();
    ns.wait_step_job("newer-high", "run", "created", |_| true)
        .await;
    assert!(
        ns.jobs_of("older-low").await.is_empty(),
        "the higher priority waiter goes first"
    );
    rest.open();
    for name in ["holder", "newer-high", "older-low"] {
        ns.expect_completed(name).await;
    }
}

/// The operator SIGKILLed every 1.1 s, 8 times, while ten workflows take, wait for and give back
/// a mutex, another's step is tried again after back-offs, and cached steps succeed and fail:
/// no lock is held twice or left behind, the retried step ran each attempt exactly once, and
/// only the success has a cache entry.
#[rstest]
#[tokio::test]
async fn killed_while_locks_are_held_and_a_retry_backs_off_nothing_is_doubled_or_lost(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    Box::pin(kill_around_locks(operator_process)).await;
}

async fn kill_around_locks(mut operator: Operator) {
    let ns = &operator.ns;
    let watching = tokio::spawn(most_at_once_of(ns.jobs(), 10, "m-"));
    for i in 0..10 {
        ns.create(
            WorkFlow::test(&format!("m-{i}"))
                .synchronization("{mutexes: [{name: one}]}")
                .step("run", &[])
                .command(&["sh", "-c", "sleep 0.4"]),
        )
        .await;
    }
    ns.create(
        WorkFlow::test("flaky")
            .step("fetch", &[])
            .command(&["sh", "-c", "[ {{retries}} -ge 3 ]"])
            .retry_strategy("{limit: 5, backoff: {duration: 1s}}"),
    )
    .await;
    for (name, command) in [
        ("cached-ok", "echo n=1 >> $WORKFLOW_OUTPUTS"),
        ("cached-bad", "exit 1"),
    ] {
        ns.create(
            WorkFlow::test(name)
                .step("gen", &[])
                .command(&["sh", "-c", &format!("sleep 2; {command}")])
                .cache("{maxAge: 1h}"),
        )
        .await;
    }
    for _ in 0..8 {
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        operator.kill().await;
        operator.start();
    }
    let ns = &operator.ns;
    for i in 0..10 {
        ns.expect_completed(&format!("m-{i}")).await;
    }
    assert_eq!(
        watching.await.expect("the watch"),
        1,
        "{} kills",
        operator.kills
    );
    ns.expect_completed("flaky").await;
    let attempts: Vec<String> = (ns.jobs_of("flaky").await.iter())
        .map(|j| {
            (j.labels()
                .get(workflow_operator_core::jobs::LABEL_ATTEMPT)
                .cloned())
            .unwrap_or("0".into())
        })
        .collect();
    let mut sorted = attempts.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["0", "1", "2", "3"],
        "each attempt once: {attempts:?}"
    );
    let leases: Api<Lease> = Api::namespaced(ns.client(), &ns.name);
    let left = leases
        .list(&ListParams::default().labels(workflow_operator_core::locks::LABEL_LOCK))
        .await
        .expect("leases");
    assert!(
        left.items.is_empty(),
        "locks left behind: {:?}",
        left.items.iter().map(|l| l.name_any()).collect::<Vec<_>>()
    );
    ns.expect_completed("cached-ok").await;
    ns.expect_failed("cached-bad", &["step gen failed"]).await;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), &ns.name);
    let cache = ListParams::default().labels(workflow_operator_core::cache::LABEL_CACHE);
    let entries = maps.list(&cache).await.expect("cache entries").items;
    assert_eq!(entries.len(), 1, "one entry, the success's");
}
