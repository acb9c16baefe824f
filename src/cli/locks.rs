//! `workflow-operator locks`: the locks between workflows (`synchronization`) of a namespace,
//! who holds each (its Leases) and who waits for it (the workflows that name it and hold none
//! of it, in the order the operator serves them: `spec.priority`, then age), with each
//! semaphore's limit as the operator counts it.
//!
//! A workflow's locks are read as the operator plans them: templates expanded and each
//! semaphore's limit filled (a `{{...}}` parameter, or `limitFrom` from what
//! `status.resolvedConfigMapKeys` recorded when the operator first read the ConfigMap key).
//! `locks` reads no ConfigMap: a key the operator has not read yet is said to be so, and a
//! ConfigMap changed since a workflow read it does not change the limit shown for that workflow.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeMap;

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde::Serialize;

use workflow_operator_core::crd::{IntOrExpr, SemaphoreRef, StepPhase, Synchronization};
use workflow_operator_core::locks::{
    ANNOTATION_HELD_BY, ANNOTATION_LOCK, Kind, LABEL_LOCK, Lock, locks_of,
};
use workflow_operator_core::template::{self, config_maps};
use workflow_operator_core::{WorkFlow, WorkFlowSpec};

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
    /// A semaphore's limit as the workflows that name it count it (each their own, read when
    /// they started: one entry per different value), or why one is not known yet; empty for a
    /// mutex.
    pub limits: Vec<String>,
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
    let planned: Vec<(&WorkFlow, Cow<'_, WorkFlowSpec>)> =
        (waiters.into_iter()).map(|wf| (wf, planned(wf))).collect();
    for (workflow, spec) in &planned {
        let namespace = workflow.namespace().unwrap_or_default();
        let name = format!("{namespace}/{}", workflow.name_any());
        for lock in waits_for(workflow, spec) {
            let entry = row(&mut rows, &namespace, &lock.id());
            let holds =
                (entry.held_by.iter()).any(|h| *h == name || h.starts_with(&format!("{name} ")));
            if !holds {
                entry.waiting.push(name.clone());
            }
        }
    }
    for (workflow, spec) in &planned {
        let namespace = workflow.namespace().unwrap_or_default();
        for semaphore in semaphores(spec) {
            let key = (
                namespace.clone(),
                format!("{}/{}", Kind::Semaphore.as_str(), semaphore.name),
            );
            let Some(entry) = rows.get_mut(&key) else {
                continue;
            };
            let limit = limit(semaphore);
            if !entry.limits.contains(&limit) {
                entry.limits.push(limit);
            }
        }
    }
    for entry in rows.values_mut() {
        entry.held_by.sort();
    }
    rows.into_values().collect()
}

/// `workflow`'s spec as the operator plans it: templates expanded, semaphores' limits filled
/// from its parameters and from the ConfigMap keys its status records. When it cannot be
/// expanded yet (a key or shared template not read), as written, with the limits its status
/// already records filled.
fn planned(workflow: &WorkFlow) -> Cow<'_, WorkFlowSpec> {
    if let Ok(spec) = template::expand(workflow) {
        return spec;
    }
    let recorded = (workflow.status.as_ref()).map_or(&[][..], |s| &s.resolved_config_map_keys[..]);
    let mut spec = workflow.spec.clone();
    let steps = spec.containers.iter_mut().chain(&mut spec.on_exit);
    let own = spec.synchronization.as_deref_mut();
    config_maps::fill_all_limits(own, steps, recorded, &mut Vec::new());
    Cow::Owned(spec)
}

/// The semaphores `spec` names: the workflow's and its steps'.
fn semaphores(spec: &WorkFlowSpec) -> impl Iterator<Item = &SemaphoreRef> {
    let steps = spec.containers.iter().chain(&spec.on_exit);
    let locks = (spec.synchronization.as_deref().into_iter())
        .chain(steps.filter_map(|s| s.synchronization.as_deref()));
    locks.flat_map(|s: &Synchronization| &s.semaphores)
}

/// A semaphore's limit as [`planned`] filled it, or why it is not known yet.
fn limit(semaphore: &SemaphoreRef) -> String {
    match (&semaphore.limit, &semaphore.limit_from) {
        (Some(IntOrExpr::Num(n)), _) => n.to_string(),
        (Some(IntOrExpr::Expr(text)), _) => format!("{text}, not filled yet"),
        (None, Some(from)) => {
            let key = &from.config_map_key_ref;
            format!(
                "limit from ConfigMap {} key {}, not read yet",
                key.name, key.key
            )
        }
        (None, None) => "none given".to_string(),
    }
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

/// The locks `workflow` (planned as `spec`) waits for: its own (all of them until it holds
/// them: the rows drop those it holds), and those its `Queued` steps say they wait for.
fn waits_for(workflow: &WorkFlow, spec: &WorkFlowSpec) -> Vec<Lock> {
    let mut locks = locks_of(spec.synchronization.as_deref());
    let queued: Vec<&str> = (workflow.status.iter())
        .flat_map(|s| &s.steps)
        .filter(|e| e.phase == StepPhase::Queued)
        .filter_map(|e| e.message.as_deref())
        .collect();
    let steps = spec.containers.iter().chain(&spec.on_exit);
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
    let table: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.namespace.clone(),
                r.lock.clone(),
                list(&r.limits),
                list(&r.held_by),
                list(&r.waiting),
            ]
        })
        .collect();
    let header = ["NAMESPACE", "LOCK", "LIMIT", "HELD BY", "WAITING"];
    if namespaces {
        super::get::table(header, &table)
    } else {
        let [_, header @ ..] = header;
        let table: Vec<[String; 4]> = table.into_iter().map(|[_, row @ ..]| row).collect();
        super::get::table(header, &table)
    }
}

#[cfg(test)]
mod tests {
    use workflow_operator_core::crd::{ResolvedConfigMapKey, WorkFlowStatus};

    use super::*;

    /// Workflow `name` asking for the semaphore `db` with `limit` (YAML), waiting for it.
    fn asking(name: &str, limit: &str) -> WorkFlow {
        WorkFlow::test(name)
            .synchronization(&format!("{{semaphores: [{{name: db, {limit}}}]}}"))
            .step("load", &[])
            .image("busybox:1.36")
            .build()
    }

    /// `workflow` with the status of one that read `value` from `limits`' key `db`.
    fn read(mut workflow: WorkFlow, value: &str) -> WorkFlow {
        workflow.status = Some(WorkFlowStatus {
            resolved_config_map_keys: vec![ResolvedConfigMapKey {
                name: "limits".into(),
                key: "db".into(),
                value: Some(value.into()),
                missing: None,
                resource_version: Some("7".into()),
                resolved_at: None,
            }],
            ..WorkFlowStatus::default()
        });
        workflow
    }

    const FROM_CONFIG_MAP: &str = "limitFrom: {configMapKeyRef: {name: limits, key: db}}";

    #[test]
    fn a_semaphores_limit_is_shown_as_each_workflow_counts_it_or_as_not_read_yet() {
        let mut parameter = asking("param", "limit: '{{workflow.parameters.n}}'");
        parameter.spec.arguments =
            Some(serde_yaml::from_str("{parameters: [{name: n, value: '4'}]}").unwrap());
        let cases: [(&str, Vec<WorkFlow>, &[&str]); 4] = [
            ("written", vec![asking("plain", "limit: 2")], &["2"]),
            ("a parameter", vec![parameter], &["4"]),
            (
                "from a ConfigMap, read or not yet",
                vec![
                    read(asking("read", FROM_CONFIG_MAP), "3"),
                    asking("new", FROM_CONFIG_MAP),
                ],
                &["3", "limit from ConfigMap limits key db, not read yet"],
            ),
            (
                "read at two values",
                vec![
                    read(asking("first", FROM_CONFIG_MAP), "3"),
                    read(asking("second", FROM_CONFIG_MAP), "5"),
                ],
                &["3", "5"],
            ),
        ];
        for (case, workflows, limits) in cases {
            let rows = rows(&[], &workflows);
            assert_eq!(rows.len(), 1, "{case}: {rows:?}");
            assert_eq!(rows[0].lock, "semaphore/db", "{case}");
            assert_eq!(rows[0].limits, limits, "{case}");
            assert_eq!(rows[0].waiting.len(), workflows.len(), "{case}");
        }
    }
}
