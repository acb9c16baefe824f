//! `workflow-operator locks`: the locks between workflows (`synchronization`) of a namespace,
//! who holds each (its Leases) and who waits for it (the workflows that name it and hold none
//! of it, in the order the operator serves them: `spec.priority`, then age).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde::Serialize;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::StepPhase;
use workflow_operator_core::locks::{
    ANNOTATION_HELD_BY, ANNOTATION_LOCK, LABEL_LOCK, Lock, locks_of,
};

use super::client::ClusterArgs;

#[derive(Debug, Args)]
pub struct LocksArgs {
    /// The locks of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// `text` for people, `json` for scripts.
    #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
    output: String,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// One lock of a namespace, as `locks` shows it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LockRow {
    pub namespace: String,
    /// `mutex/NAME` or `semaphore/NAME`.
    pub lock: String,
    /// Who holds it (`ns/wf`, `ns/wf step s`).
    pub held_by: Vec<String>,
    /// The workflows waiting for it, first in line first.
    pub waiting: Vec<String>,
}

pub async fn locks(args: LocksArgs) -> std::process::ExitCode {
    super::report(async {
        let (client, namespace) = args.cluster.connect().await?;
        let (leases, workflows): (Api<Lease>, Api<WorkFlow>) = if args.all_namespaces {
            (Api::all(client.clone()), Api::all(client))
        } else {
            (
                Api::namespaced(client.clone(), &namespace),
                Api::namespaced(client, &namespace),
            )
        };
        let leases = leases
            .list(&ListParams::default().labels(LABEL_LOCK))
            .await
            .context("listing the locks' Leases")?
            .items;
        let workflows = workflows
            .list(&ListParams::default())
            .await
            .context("listing the workflows")?
            .items;
        let rows = rows(&leases, &workflows);
        if args.output == "json" {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else if rows.is_empty() {
            println!("No locks are held or waited for.");
        } else {
            print!("{}", text(&rows, args.all_namespaces));
        }
        Ok(())
    })
    .await
}

/// The locks `leases` hold and `workflows` wait for, by namespace and lock.
pub fn rows(leases: &[Lease], workflows: &[WorkFlow]) -> Vec<LockRow> {
    let mut rows: BTreeMap<(String, String), LockRow> = BTreeMap::new();
    for lease in leases {
        let annotations = lease.annotations();
        let (Some(lock), Some(by)) = (
            annotations.get(ANNOTATION_LOCK),
            annotations.get(ANNOTATION_HELD_BY),
        ) else {
            continue;
        };
        let namespace = lease.namespace().unwrap_or_default();
        row(&mut rows, &namespace, lock).held_by.push(by.clone());
    }
    let mut waiters: Vec<&WorkFlow> = workflows.iter().filter(|wf| !ended(wf)).collect();
    waiters.sort_by_key(|wf| {
        let created = wf.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (Reverse(wf.spec.priority), created)
    });
    for workflow in waiters {
        let namespace = workflow.namespace().unwrap_or_default();
        let name = format!("{namespace}/{}", workflow.name_any());
        for lock in waits_for(workflow) {
            let entry = row(&mut rows, &namespace, &lock.id());
            let holds =
                (entry.held_by.iter()).any(|h| *h == name || h.starts_with(&format!("{name} ")));
            if !holds {
                entry.waiting.push(name.clone());
            }
        }
    }
    for entry in rows.values_mut() {
        entry.held_by.sort();
    }
    rows.into_values().collect()
}

/// The row of `lock` in `namespace`, made empty when new.
fn row<'r>(
    rows: &'r mut BTreeMap<(String, String), LockRow>,
    namespace: &str,
    lock: &str,
) -> &'r mut LockRow {
    let key = (namespace.to_string(), lock.to_string());
    rows.entry(key).or_insert_with(|| LockRow {
        namespace: namespace.to_string(),
        lock: lock.to_string(),
        ..LockRow::default()
    })
}

fn ended(workflow: &WorkFlow) -> bool {
    (workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal())
}

/// The locks `workflow` waits for: its own (all of them until it holds them: the rows drop
/// those it holds), and those its `Queued` steps say they wait for.
fn waits_for(workflow: &WorkFlow) -> Vec<Lock> {
    let mut locks = locks_of(workflow.spec.synchronization.as_deref());
    let queued: Vec<&str> = (workflow.status.iter())
        .flat_map(|s| &s.steps)
        .filter(|e| e.phase == StepPhase::Queued)
        .filter_map(|e| e.message.as_deref())
        .collect();
    let steps = workflow
        .spec
        .containers
        .iter()
        .chain(&workflow.spec.on_exit);
    for lock in steps.flat_map(|s| locks_of(s.synchronization.as_deref())) {
        let said = format!("waiting for {}", lock.describe());
        if queued.iter().any(|m| m.contains(&said)) && !locks.contains(&lock) {
            locks.push(lock);
        }
    }
    locks
}

/// The rows as a table.
fn text(rows: &[LockRow], namespaces: bool) -> String {
    let list = |names: &[String]| match names.len() {
        0 => "-".to_string(),
        1..=3 => names.join(", "),
        n => format!("{} (+{} more)", names[..3].join(", "), n - 3),
    };
    let table: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.namespace.clone(),
                r.lock.clone(),
                list(&r.held_by),
                list(&r.waiting),
            ]
        })
        .collect();
    let header = ["NAMESPACE", "LOCK", "HELD BY", "WAITING"];
    if namespaces {
        super::get::table(header, &table)
    } else {
        let [_, header @ ..] = header;
        let table: Vec<[String; 3]> = table.into_iter().map(|[_, row @ ..]| row).collect();
        super::get::table(header, &table)
    }
}
