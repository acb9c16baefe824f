//! CronWorkFlows end to end on the embedded control plane, through kubectl, with `@every`
//! schedules of a few seconds: runs start on time under names made of the time (with
//! `startingDeadlineSeconds: 0` too), finished runs beyond the history limit are deleted, a
//! run's end shows on its cron's status within moments (suspended or not), `Forbid` skips a
//! time while a run is active, and a resumed schedule fires at most once; under repeated
//! SIGKILLs, of the one operator or of the leader of two replicas, or of the one operator in the
//! middle of a `Replace`, every scheduled time gets exactly one run (and a replaced run does not
//! stay active); after downtime `catchUp` starts what it says, and a time named missed stays so
//! while the operator's watch of the CronWorkFlows lags its own status write; a `workflowSpec`
//! no run can run is named on the `Ready` condition and starts nothing until it is fixed.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_devcluster::faults::{InjectedError, Verb};
use kube_devcluster::store::{EventType, StoredObject, WatchEvent};
use kube_devcluster::testing::eventually;
use rstest::rstest;
use support::session::Session;
use support::{Operator, namespace, operator, operator_process};
use tokio::sync::broadcast::error::RecvError;
use workflow_operator_core::crd::CronWorkFlow;
use workflow_operator_core::cron::ON_TIME;

/// The runs of `cron` as `NAME PHASE` lines, sorted.
async fn runs(session: &Session, cron: &str) -> Vec<(String, String)> {
    let listed = session
        .k(&[
            "get",
            "wf",
            "-l",
            &format!("workflow.crd.com/cron={cron}"),
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.workflow-status}{"\n"}{end}"#,
        ])
        .await;
    let mut runs: Vec<(String, String)> = listed
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            Some((
                parts.next()?.to_string(),
                parts.next().unwrap_or("").to_string(),
            ))
        })
        .collect();
    runs.sort();
    runs
}

/// The CronWorkFlow's `.status` field `path`.
async fn status(session: &Session, cron: &str, path: &str) -> String {
    session
        .k(&[
            "get",
            "cwf",
            cron,
            "-o",
            &format!("jsonpath={{.status.{path}}}"),
        ])
        .await
}

#[tokio::test]
async fn runs_start_on_time_named_for_their_time_and_old_ones_are_deleted() {
    let Some(session) = Session::start("cron_on_time").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {name: tick}
spec:
  schedules: ["@every 2s"]
  successfulRunsHistoryLimit: 2
  workflowSpec:
    containers: [{stepName: a, image: busybox, command: [echo, hi]}]
"#,
        )
        .await;
    let created = session
        .k(&[
            "get",
            "cwf",
            "tick",
            "-o",
            "jsonpath={.metadata.creationTimestamp}",
        ])
        .await;
    let created: k8s_openapi::jiff::Timestamp = created.trim().parse().unwrap();
    // Four runs have started: the status's last time is four periods after the creation.
    eventually("four runs started", Duration::from_secs(30), || async {
        let last = status(&session, "tick", "lastScheduleTime").await;
        let last: k8s_openapi::jiff::Timestamp = last.trim().parse().ok()?;
        (last.as_second() - created.as_second() >= 8).then_some(())
    })
    .await;
    // The first runs finished long ago and are beyond the history limit: deleted.
    let first = created.as_second() + 2;
    let runs = eventually(
        "the oldest runs deleted",
        Duration::from_secs(30),
        || async {
            let runs = runs(&session, "tick").await;
            let oldest: i64 = runs.first()?.0.strip_prefix("tick-")?.parse().ok()?;
            (oldest > first + 2).then_some(runs)
        },
    )
    .await;
    for (name, _) in &runs {
        let time: i64 = name
            .strip_prefix("tick-")
            .expect("named tick-TIME")
            .parse()
            .unwrap();
        assert_eq!(
            (time - created.as_second()) % 2,
            0,
            "{name} is a scheduled time"
        );
    }
    let shown = session.k(&["get", "cwf", "tick"]).await;
    for column in ["SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "NEXT"] {
        assert!(shown.contains(column), "{shown}");
    }
    session.stop().await;
}

#[tokio::test]
async fn forbid_skips_times_while_a_run_is_active_and_a_resume_fires_at_most_once() {
    let Some(session) = Session::start("cron_forbid").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {name: slow}
spec:
  schedules: ["@every 1s"]
  concurrencyPolicy: Forbid
  workflowSpec:
    containers: [{stepName: a, image: busybox, command: [sleep, "6"]}]
"#,
        )
        .await;
    eventually("a run started", Duration::from_secs(20), || async {
        (!runs(&session, "slow").await.is_empty()).then_some(())
    })
    .await;
    // Four more seconds pass with the run still sleeping: each time is skipped.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during = runs(&session, "slow").await;
    assert_eq!(during.len(), 1, "one run while it is active: {during:?}");
    let events = session
        .k(&[
            "get",
            "events",
            "--field-selector",
            "reason=RunSkipped",
            "-o",
            "name",
        ])
        .await;
    assert!(!events.trim().is_empty(), "a RunSkipped Event");

    // Suspended for three seconds, then resumed: of the times passed meanwhile, at most the
    // latest starts, though `catchUp: All` would start all of them after downtime.
    let patch = r#"{"spec":{"suspend":true,"concurrencyPolicy":"Allow","catchUp":"All"}}"#;
    session
        .k(&["patch", "cwf", "slow", "--type=merge", "-p", patch])
        .await;
    let suspended = eventually("suspended", Duration::from_secs(10), || async {
        let at = status(&session, "slow", "suspendedAt").await;
        at.trim().parse::<k8s_openapi::jiff::Timestamp>().ok()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let resumed = k8s_openapi::jiff::Timestamp::now();
    session
        .k(&[
            "patch",
            "cwf",
            "slow",
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ])
        .await;
    eventually("resumed", Duration::from_secs(10), || async {
        status(&session, "slow", "suspendedAt")
            .await
            .trim()
            .is_empty()
            .then_some(())
    })
    .await;
    let in_the_pause: Vec<String> = runs(&session, "slow")
        .await
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| {
            let time: i64 = name.strip_prefix("slow-").unwrap().parse().unwrap();
            time > suspended.as_second() && time <= resumed.as_second()
        })
        .collect();
    assert!(
        in_the_pause.len() <= 1,
        "a resume fires at most once: {in_the_pause:?}"
    );
    session.stop().await;
}

/// A CronWorkFlow of `@every {period}s` running `echo`, with `extra` spec fields.
fn every(name: &str, namespace: &str, period: u32, extra: serde_json::Value) -> CronWorkFlow {
    let mut spec = serde_json::json!({
        "schedules": [format!("@every {period}s")],
        "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox", "command": ["echo", "hi"]}]},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "workflow.crd.com/v1", "kind": "CronWorkFlow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .unwrap()
}

/// The scheduled times (unix seconds) of the runs of `cron`, sorted, each listed once per run.
async fn run_times(ns: &support::Namespace, cron: &str) -> Vec<i64> {
    let selector = format!("workflow.crd.com/cron={cron}");
    let runs = ns
        .workflows()
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .unwrap();
    let mut times: Vec<i64> = runs
        .items
        .iter()
        .filter_map(|w| {
            w.labels()
                .get("workflow.crd.com/scheduled-time")?
                .parse()
                .ok()
        })
        .collect();
    times.sort_unstable();
    times
}

/// The CronWorkFlow's `status.lastScheduleTime`, unix seconds.
async fn last_scheduled(api: &Api<CronWorkFlow>, name: &str) -> Option<i64> {
    let cron = api.get(name).await.ok()?;
    Some(cron.status?.last_schedule_time?.0.as_second())
}

/// The operator SIGKILLed every 1.3 s for 12 kills while a CronWorkFlow fires every second
/// (`catchUp: All`, so every time must get its run): afterwards every scheduled time from the
/// first to the last handled has exactly one run.
#[rstest]
#[tokio::test]
async fn killed_around_fire_times_every_time_has_exactly_one_run(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    Box::pin(kill_around_fires(operator_process)).await;
}

async fn kill_around_fires(mut operator: Operator) {
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let start = beat(&api, &operator.ns.name).await;
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(1300)).await;
        operator.kill().await;
        operator.start();
    }
    exactly_one_run_per_time(
        &api,
        &operator.ns,
        (("beat", 1), &[]),
        start,
        start + 18,
        operator.kills,
    )
    .await;
}

/// Every create answered 409 `Conflict` (a write that lost a race, as a ResourceQuota's count;
/// not `AlreadyExists`) for a few scheduled times: the create started no run, so the tick tries
/// it again and each of those times still gets exactly one run once creates go through. Taken
/// as "started before", the times were handled with no run.
#[rstest]
#[tokio::test]
async fn a_run_create_refused_with_a_conflict_is_tried_again_not_taken_as_made(
    #[future(awt)] operator: Operator,
) {
    skip_on_real_cluster!("injects API faults");
    let dev = operator
        .ns
        .cluster
        .dev()
        .expect("the embedded control plane");
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let start = beat(&api, &operator.ns.name).await;
    dev.reset_requests();
    dev.faults()
        .set_error_rate(Verb::Create, 1.0, InjectedError::Conflict);
    let refused_run_creates = || {
        dev.requests()
            .requests
            .iter()
            .filter(|(k, _)| {
                k.resource == "workflows.workflow.crd.com" && k.verb == "create" && k.code == 409
            })
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    eventually("run creates refused", Duration::from_secs(30), || async {
        (refused_run_creates() >= 3).then_some(())
    })
    .await;
    dev.faults().clear();
    exactly_one_run_per_time(&api, &operator.ns, (("beat", 1), &[]), start, start + 8, 0).await;
}

/// Two operator replicas under leader election (a 2 s lease) while a CronWorkFlow fires every
/// second: six times the leader is SIGKILLed once it has handled a time since the last kill,
/// and started again as the standby once the other replica has taken over. Every scheduled
/// time has exactly one run.
#[rstest]
#[tokio::test]
async fn two_replicas_with_the_leader_killed_every_time_has_exactly_one_run(
    #[future(awt)] namespace: support::Namespace,
) {
    skip_on_real_cluster!("kills the operator's processes");
    Box::pin(kill_leaders(namespace)).await;
}

async fn kill_leaders(ns: support::Namespace) {
    let client = ns.client();
    let namespace = ns.name.clone();
    let mut replicas = Operator::replicas(ns, 2, 2);
    let api: Api<CronWorkFlow> = Api::namespaced(client.clone(), &namespace);
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    let holder = || async {
        let lease = leases.get_opt("workflow-operator").await.ok()??;
        lease.spec?.holder_identity.filter(|h| !h.is_empty())
    };
    let start = beat(&api, &namespace).await;
    let mut killed_at = start;
    for _ in 0..6 {
        let leader = eventually("a leader firing", Duration::from_secs(30), || async {
            let handled = last_scheduled(&api, "beat").await? > killed_at;
            handled.then_some(holder().await?)
        })
        .await;
        let i: usize = leader.strip_prefix("replica-").unwrap().parse().unwrap();
        replicas[i].kill().await;
        killed_at = Timestamp::now().as_second();
        let other = format!("replica-{}", 1 - i);
        eventually("the standby took over", Duration::from_secs(30), || async {
            (holder().await? == other).then_some(())
        })
        .await;
        replicas[i].start();
    }
    let kills = replicas.iter().map(|r| r.kills).sum();
    exactly_one_run_per_time(
        &api,
        &replicas[0].ns,
        (("beat", 1), &[]),
        start,
        killed_at + 2,
        kills,
    )
    .await;
}

/// A `Replace` CronWorkFlow every 3 s whose runs sleep 30 s, so that each time replaces the run
/// before it: eight times the operator is SIGKILLed just after the store committed the first
/// write of a replace (the request to terminate the active run, or the new run's create: 0 to
/// 40 ms after, so the kill falls before, between or after the other and the status write), then
/// started again; as each next replace begins, every run older than the previous one's is
/// finished or asked to terminate. Once more, the operator is then down across two times: the
/// later starts, the earlier has no run and is named in a `RunsMissed` Event. Every other time
/// has exactly one run, and once the schedule is suspended every run but the newest has
/// finished: no replaced run is left active.
#[rstest]
#[tokio::test]
async fn killed_during_replace_every_time_has_one_run_and_only_the_newest_stays_active(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("kills the operator's process");
    Box::pin(kill_during_replace(operator_process)).await;
}

async fn kill_during_replace(mut operator: Operator) {
    let namespace = operator.ns.name.clone();
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &namespace);
    let cluster = operator.ns.cluster.clone();
    let mut changes = dev(&cluster).store().subscribe();
    let extra = serde_json::json!({
        "concurrencyPolicy": "Replace",
        "catchUp": "All",
        "successfulRunsHistoryLimit": 1000,
        "failedRunsHistoryLimit": 1000,
        "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox", "command": ["sleep", "30"]}]},
    });
    let created = api
        .create(&PostParams::default(), &every("swap", &namespace, 3, extra))
        .await
        .unwrap();
    let start = created.metadata.creation_timestamp.unwrap().0.as_second();
    // The first run replaces nothing.
    let mut last = start + 3;
    for delay in [0, 0, 2, 5, 10, 20, 40, 0] {
        let replaced = last;
        replace_began(&mut changes, &namespace, 3, &mut last).await;
        replaced_runs_settled(dev(&cluster), &namespace, replaced);
        // Where in the replace the kill falls, not a wait for a condition.
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        operator.kill().await;
        operator.start();
    }
    // Once more, and down across two more times: both are due at once when it is back, and
    // `Replace` starts the later only, naming the earlier missed.
    replace_began(&mut changes, &namespace, 3, &mut last).await;
    operator.kill().await;
    let back = Timestamp::from_second(last + 2 * 3).unwrap() + SignedDuration::from_millis(500);
    tokio::time::sleep(back.duration_since(Timestamp::now()).unsigned_abs()).await;
    operator.start();
    eventually(
        "the run after the downtime",
        Duration::from_secs(30),
        || async {
            let times = run_times(&operator.ns, "swap").await;
            times.contains(&(last + 2 * 3)).then_some(())
        },
    )
    .await;
    // Suspended, so that no later time replaces the newest run while the others settle.
    let suspend = serde_json::json!({"spec": {"suspend": true}});
    api.patch("swap", &PatchParams::default(), &Patch::Merge(&suspend))
        .await
        .unwrap();
    eventually("suspended", Duration::from_secs(30), || async {
        api.get("swap").await.ok()?.status?.suspended_at.map(drop)
    })
    .await;
    let end = last_scheduled(&api, "swap").await.expect("a time handled");
    let kills = operator.kills;
    let missed = missed_times(&operator.ns).await;
    assert!(
        missed.contains(&(last + 3)),
        "the RunsMissed Events name {missed:?}, not {}, a time passed while the operator was down",
        last + 3
    );
    let times = (("swap", 3), missed.as_slice());
    exactly_one_run_per_time(&api, &operator.ns, times, start, end, kills).await;
    let selector = "workflow.crd.com/cron=swap";
    support::wait_list(
        &operator.ns.workflows(),
        kube::runtime::watcher::Config::default().labels(selector),
        "every run but the newest finished (at most one active)",
        Duration::from_secs(60),
        |runs| {
            let newest = runs.iter().map(|r| r.name_any()).max();
            runs.iter()
                .filter(|r| Some(r.name_any()) != newest)
                .all(|r| support::is_terminal(r))
        },
    )
    .await;
}

/// Waits until the store commits the first write of the next replace of the runs of
/// `namespace` (a cron of period `period`), whichever the operator makes first: the request to
/// terminate the active run (its `spec.shutdown` becoming `Terminate`) or the create of the next
/// run. `last` is the scheduled time of the run the previous replace started; it becomes this
/// one's.
async fn replace_began(
    changes: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<WatchEvent>>,
    namespace: &str,
    period: i64,
    last: &mut i64,
) {
    let terminating = |object: Option<&std::sync::Arc<StoredObject>>| {
        object
            .and_then(|o| o.value.pointer("/spec/shutdown"))
            .and_then(serde_json::Value::as_str)
            == Some("Terminate")
    };
    let scheduled = |object: &StoredObject| -> Option<i64> {
        object
            .value
            .pointer("/metadata/labels/workflow.crd.com~1scheduled-time")?
            .as_str()?
            .parse()
            .ok()
    };
    let began = async {
        loop {
            let change = match changes.recv().await {
                Ok(change) => change,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => panic!("the store closed"),
            };
            if change.gr.resource != "workflows" || change.object.namespace() != namespace {
                continue;
            }
            let Some(time) = scheduled(&change.object) else {
                continue;
            };
            let replacing = match change.event_type {
                EventType::Added => (time > *last).then_some(time),
                EventType::Modified
                    if terminating(Some(&change.object)) && !terminating(change.prev.as_ref()) =>
                {
                    (time >= *last).then_some(time + period)
                }
                _ => None,
            };
            if let Some(time) = replacing {
                *last = time;
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), began)
        .await
        .expect("a replace within 30 s");
}

/// The scheduled times (unix seconds) named by the `RunsMissed` Events of `ns`.
async fn missed_times(ns: &support::Namespace) -> Vec<i64> {
    let events: Api<Event> = Api::namespaced(ns.client(), &ns.name);
    let listed = events.list(&Default::default()).await.unwrap();
    let mut times: Vec<i64> = listed
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("RunsMissed"))
        .flat_map(|e| {
            let note = e.note.clone().unwrap_or_default();
            note.split([' ', ','])
                .filter_map(|word| word.parse::<Timestamp>().ok())
                .map(|t| t.as_second())
                .collect::<Vec<_>>()
        })
        .collect();
    times.sort_unstable();
    times.dedup();
    times
}

fn dev(cluster: &support::Cluster) -> &kube_devcluster::DevCluster {
    cluster.dev().expect("the embedded control plane")
}

/// Asserts that every run of `namespace` for a time before `replaced` (the run started by the
/// previous replace) is asked to terminate or finished, listing each run's time and state: read
/// from the store as the next replace begins, a period after the previous one.
fn replaced_runs_settled(dev: &kube_devcluster::DevCluster, namespace: &str, replaced: i64) {
    let (runs, _) = dev.store().list(
        &kube_devcluster::resources::GroupResource::new("workflow.crd.com", "workflows"),
        Some(namespace),
    );
    let state = |run: &StoredObject| {
        let text = |path: &str| {
            run.value
                .pointer(path)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let time: i64 = text("/metadata/labels/workflow.crd.com~1scheduled-time")
            .parse()
            .unwrap_or(0);
        let phase = text("/status/workflow-status");
        let settled = matches!(phase.as_str(), "Completed" | "Failed")
            || text("/spec/shutdown") == "Terminate";
        (time, phase, text("/spec/shutdown"), settled)
    };
    let states: Vec<_> = runs.iter().map(|r| state(r)).collect();
    let active_old: Vec<_> = states
        .iter()
        .filter(|(time, _, _, settled)| *time < replaced && !settled)
        .collect();
    assert!(
        active_old.is_empty(),
        "runs older than {replaced} still active, neither finished nor asked to terminate: \
         {active_old:?}; every run (time, phase, shutdown, settled): {states:?}"
    );
}

/// Creates the CronWorkFlow `beat`, every second, every missed time caught up (`catchUp: All`,
/// no deadline) and every run kept; returns its creation (unix seconds).
async fn beat(api: &Api<CronWorkFlow>, namespace: &str) -> i64 {
    let extra = serde_json::json!({"catchUp": "All", "successfulRunsHistoryLimit": 1000});
    let created = api
        .create(&PostParams::default(), &every("beat", namespace, 1, extra))
        .await
        .unwrap();
    created.metadata.creation_timestamp.unwrap().0.as_second()
}

/// Waits until `cron` (whose period is `period` seconds) has handled `until`, then asserts that
/// every scheduled time from its creation `start` to the last handled has exactly one run, but
/// the `missed` ones, which have none, listing those that do not; returns the last time handled.
async fn exactly_one_run_per_time(
    api: &Api<CronWorkFlow>,
    ns: &support::Namespace,
    ((cron, period), missed): ((&str, i64), &[i64]),
    start: i64,
    until: i64,
    kills: usize,
) -> i64 {
    let end = eventually(
        "the schedule caught up",
        Duration::from_secs(30),
        || async {
            let last = last_scheduled(api, cron).await?;
            (last >= until).then_some(last)
        },
    )
    .await;
    let mut counts = std::collections::BTreeMap::<i64, usize>::new();
    for t in run_times(ns, cron).await.into_iter().filter(|t| *t <= end) {
        *counts.entry(t).or_default() += 1;
    }
    let wrong: Vec<(i64, usize)> = (1..)
        .map(|k| start + k * period)
        .take_while(|t| *t <= end)
        .map(|t| (t, counts.get(&t).copied().unwrap_or(0)))
        .filter(|(t, n)| *n != usize::from(!missed.contains(t)))
        .collect();
    assert!(
        wrong.is_empty(),
        "times without exactly one run, or with one though named missed {missed:?} (time, runs): \
         {wrong:?}; runs per time: {counts:?}; {kills} kills"
    );
    end
}

/// The operator stopped across scheduled times, then started: `Latest` starts the latest of
/// three missed times only, `All` every one, `None` none (it is started when the missed time is
/// more than `ON_TIME` late, so its period is longer, and one missed time tells it from
/// `Latest`); with each the next time has its run.
#[rstest]
#[case::latest("Latest", 3, 3, 1)]
#[case::all("All", 3, 3, 3)]
#[case::none("None", 12, 1, 0)]
#[tokio::test]
async fn after_downtime_catch_up_starts_what_it_says(
    #[future(awt)] operator_process: Operator,
    #[case] catch_up: &str,
    #[case] period: i64,
    #[case] missed: i64,
    #[case] started: usize,
) {
    skip_on_real_cluster!("stops the operator's process");
    Box::pin(downtime(
        operator_process,
        catch_up,
        period,
        missed,
        started,
    ))
    .await;
}

/// Creates `cron`, waits until the operator handled a first time of it, stops the operator, and
/// returns the last time it handled (read once stopped).
async fn first_time_then_stop(
    operator: &mut Operator,
    api: &Api<CronWorkFlow>,
    cron: &CronWorkFlow,
) -> i64 {
    let name = cron.name_any();
    api.create(&PostParams::default(), cron).await.unwrap();
    eventually("a first run", Duration::from_secs(30), || async {
        last_scheduled(api, &name).await
    })
    .await;
    operator.stop().await;
    last_scheduled(api, &name).await.expect("a time handled")
}

async fn downtime(
    mut operator: Operator,
    catch_up: &str,
    period: i64,
    missed: i64,
    started: usize,
) {
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let extra = serde_json::json!({"catchUp": catch_up, "successfulRunsHistoryLimit": 1000});
    let cron = every("down", &operator.ns.name, period as u32, extra);
    // `missed` times pass after the last one the operator handled.
    let before = first_time_then_stop(&mut operator, &api, &cron).await;
    let last_missed = before + missed * period;
    let late = if catch_up == "None" {
        ON_TIME + SignedDuration::from_millis(1_500)
    } else {
        SignedDuration::from_millis(500)
    };
    let restart = Timestamp::from_second(last_missed).unwrap() + late;
    tokio::time::sleep(restart.duration_since(Timestamp::now()).unsigned_abs()).await;
    operator.start();
    let next = last_missed + period;
    eventually(
        "the next time's run started",
        Duration::from_secs(30),
        || async {
            run_times(&operator.ns, "down")
                .await
                .contains(&next)
                .then_some(())
        },
    )
    .await;
    let runs_of_missed: Vec<i64> = run_times(&operator.ns, "down")
        .await
        .into_iter()
        .filter(|t| *t > before && *t <= last_missed)
        .collect();
    assert_eq!(
        runs_of_missed.len(),
        started,
        "{catch_up}: runs for the missed times {runs_of_missed:?}"
    );
}

/// A `Replace` CronWorkFlow (`catchUp: All`) whose operator was down across two times starts the
/// later only, naming the earlier missed, and a tick after does not start the earlier while the
/// operator's watch of the CronWorkFlows still shows the status from before its own write: the
/// watch is held from the restart until the time after, so each tick in between sees the old
/// `lastScheduleTime` in the cache.
#[rstest]
#[tokio::test]
async fn a_time_named_missed_stays_missed_while_the_watch_of_the_schedule_lags(
    #[future(awt)] operator_process: Operator,
) {
    skip_on_real_cluster!("stops the operator's process and holds its watch");
    Box::pin(lagging_watch(operator_process)).await;
}

async fn lagging_watch(mut operator: Operator) {
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let extra = serde_json::json!({
        "concurrencyPolicy": "Replace",
        "catchUp": "All",
        "successfulRunsHistoryLimit": 1000,
        "failedRunsHistoryLimit": 1000,
    });
    let cron = every("lag", &operator.ns.name, 3, extra);
    let before = first_time_then_stop(&mut operator, &api, &cron).await;
    let (missed, started, next) = (before + 3, before + 6, before + 9);
    let held = dev(&operator.ns.cluster)
        .faults()
        .hold(Verb::Watch, "cronworkflows.workflow.crd.com");
    let restart = Timestamp::from_second(started).unwrap() + SignedDuration::from_millis(500);
    tokio::time::sleep(restart.duration_since(Timestamp::now()).unsigned_abs()).await;
    operator.start();
    eventually(
        "the run of the time after the restart's",
        Duration::from_secs(30),
        || async {
            let times = run_times(&operator.ns, "lag").await;
            times.contains(&next).then_some(())
        },
    )
    .await;
    drop(held);
    let times: Vec<i64> = run_times(&operator.ns, "lag")
        .await
        .into_iter()
        .filter(|t| *t > before && *t <= next)
        .collect();
    assert_eq!(
        times,
        [started, next],
        "runs after {before}: {missed} was named missed and must have none"
    );
    assert!(missed_times(&operator.ns).await.contains(&missed));
}

#[tokio::test]
async fn a_workflow_spec_no_run_can_run_is_named_on_ready_and_a_fix_makes_it_ready() {
    let Some(session) = Session::start("cron_invalid_spec").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: CronWorkFlow
metadata: {name: loop}
spec:
  schedules: ["@every 1s"]
  workflowSpec:
    containers:
      - {stepName: a, image: busybox, command: [echo, a], dependsOn: [b]}
      - {stepName: b, image: busybox, command: [echo, b], dependsOn: [a]}
"#,
        )
        .await;
    let ready = |field: &'static str| {
        let session = &session;
        async move {
            let path = format!(r#"conditions[?(@.type=="Ready")].{field}"#);
            status(session, "loop", &path).await.trim().to_string()
        }
    };
    eventually("Ready False", Duration::from_secs(20), || async {
        (ready("reason").await == "InvalidWorkflowSpec").then_some(())
    })
    .await;
    assert_eq!(ready("status").await, "False");
    let message = ready("message").await;
    assert!(
        message.contains("spec.workflowSpec: dependency cycle: a -> b -> a"),
        "{message}"
    );
    // Scheduled times pass, and none starts a run.
    let seen = |at: String| at.trim().parse::<Timestamp>().ok();
    let first = eventually("a time passed", Duration::from_secs(10), || async {
        seen(status(&session, "loop", "lastScheduleTime").await)
    })
    .await;
    eventually("two more times passed", Duration::from_secs(10), || async {
        let last = seen(status(&session, "loop", "lastScheduleTime").await)?;
        (last.as_second() >= first.as_second() + 2).then_some(())
    })
    .await;
    let started = runs(&session, "loop").await;
    assert!(started.is_empty(), "no run while invalid: {started:?}");
    let events = session
        .k(&[
            "get",
            "events",
            "--field-selector",
            "reason=InvalidWorkflowSpec",
            "-o",
            "jsonpath={.items[*].message}",
        ])
        .await;
    assert!(events.contains("dependency cycle"), "{events:?}");

    let fixed = r#"{"spec":{"workflowSpec":{"containers":[{"stepName":"a","image":"busybox","command":["echo","a"]}]}}}"#;
    session
        .k(&["patch", "cwf", "loop", "--type=merge", "-p", fixed])
        .await;
    eventually("Ready again", Duration::from_secs(20), || async {
        (ready("status").await == "True").then_some(())
    })
    .await;
    eventually("a run started", Duration::from_secs(20), || async {
        (!runs(&session, "loop").await.is_empty()).then_some(())
    })
    .await;
    session.stop().await;
}

/// `startingDeadlineSeconds: 0`, as Argo's own example has it: a deadline limits late runs only,
/// so the runs due on time start (none is late here).
#[rstest]
#[tokio::test]
async fn a_deadline_of_zero_starts_the_runs_due_on_time(#[future(awt)] operator: Operator) {
    let api: Api<CronWorkFlow> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let extra = serde_json::json!({"startingDeadlineSeconds": 0});
    let cron = every("prompt", &operator.ns.name, 2, extra);
    api.create(&PostParams::default(), &cron).await.unwrap();
    let started = eventually(
        "two runs started on time",
        Duration::from_secs(30),
        || async {
            let times = run_times(&operator.ns, "prompt").await;
            (times.len() >= 2).then_some(times)
        },
    )
    .await;
    let missed = missed_times(&operator.ns).await;
    assert!(
        started.iter().all(|t| !missed.contains(t)),
        "started {started:?}, named missed {missed:?}"
    );
}

/// A run's end shows on its CronWorkFlow within seconds, suspended or not, rather than at the
/// next scheduled time: the run of the first time (of a 20 s period) and two started by hand
/// (as `cron trigger` does) sleep 3 s; once they end, the cron lists none active, keeps one run
/// (`successfulRunsHistoryLimit: 1`) and has a `lastSuccessfulTime` no earlier than its end, all
/// before the second time is due (`lastScheduleTime` still the first).
#[rstest]
#[case::scheduled(false)]
#[case::suspended(true)]
#[tokio::test]
async fn a_run_ending_shows_on_its_cron_at_once_not_at_the_next_time(
    #[future(awt)] operator: Operator,
    #[case] suspend: bool,
) {
    let ns = &operator.ns;
    let api: Api<CronWorkFlow> = Api::namespaced(ns.client(), &ns.name);
    let extra = serde_json::json!({
        "successfulRunsHistoryLimit": 1,
        "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox", "command": ["sleep", "3"]}]},
    });
    let cron = api
        .create(&PostParams::default(), &every("daily", &ns.name, 20, extra))
        .await
        .unwrap();
    let first = cron
        .metadata
        .creation_timestamp
        .clone()
        .unwrap()
        .0
        .as_second()
        + 20;
    eventually(
        "the first time's run active",
        Duration::from_secs(40),
        || async {
            let status = api.get("daily").await.ok()?.status?;
            let name = workflow_operator_core::names::cron_run_name("daily", first);
            status.active.iter().any(|r| r.name == name).then_some(())
        },
    )
    .await;
    if suspend {
        let patch = serde_json::json!({"spec": {"suspend": true}});
        api.patch("daily", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    // Named for seconds after the first time, no scheduled time's: the newest are these.
    for by_hand in [first + 1, first + 2] {
        let run = workflow_operator_core::cron::run_of(&cron, by_hand).unwrap();
        ns.workflows()
            .create(&PostParams::default(), &run)
            .await
            .unwrap();
    }
    let deadline = Timestamp::from_second(first + 19).unwrap();
    let mut seen = String::new();
    while Timestamp::now() < deadline {
        match ended_and_shown(&api, ns, "daily").await {
            Ok(()) => break,
            Err(state) => seen = state,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ended_and_shown(&api, ns, "daily").await.is_ok(),
        "the runs' end not shown before the next time (suspended: {suspend}): {seen}"
    );
    assert_eq!(
        last_scheduled(&api, "daily").await,
        Some(first),
        "shown by the runs' end, not by a tick of a later time"
    );
}

/// Whether `cron`'s runs have all ended and its status shows it: none active, one run kept (its
/// history limit), and a `lastSuccessfulTime` no earlier than that run's end; else what is seen
/// instead.
async fn ended_and_shown(
    api: &Api<CronWorkFlow>,
    ns: &support::Namespace,
    cron: &str,
) -> Result<(), String> {
    let status = api
        .get(cron)
        .await
        .map_err(|e| e.to_string())?
        .status
        .unwrap_or_default();
    let selector = format!("workflow.crd.com/cron={cron}");
    let runs = ns
        .workflows()
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| e.to_string())?
        .items;
    let ended: Vec<(String, Option<String>)> = runs
        .iter()
        .map(|r| {
            let changed = r.status.as_ref().and_then(|s| s.status_changed.clone());
            (r.name_any(), changed.filter(|_| support::is_terminal(r)))
        })
        .collect();
    let kept = match &ended[..] {
        [(_, Some(end))] => end.parse::<Timestamp>().ok(),
        _ => None,
    };
    let shown = status.active.is_empty()
        && kept.is_some()
        && status.last_successful_time.as_ref().map(|t| t.0) >= kept;
    if shown {
        return Ok(());
    }
    let active: Vec<&str> = status.active.iter().map(|r| r.name.as_str()).collect();
    Err(format!(
        "active {active:?}, lastSuccessfulTime {:?}, runs (name, end) {ended:?}",
        status.last_successful_time.map(|t| t.0.to_string())
    ))
}
