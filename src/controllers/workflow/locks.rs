//! Locks between workflows (`synchronization`), the `locks` stage of a pass: [`hold`] takes
//! the locks a workflow (before its first step) or a starting step needs by creating their
//! Leases, gives back those no longer needed by deleting them, and gates the Jobs of what must
//! wait. What is held and who waits is the [`LockBook`]'s.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::{Client, Resource, ResourceExt};

use workflow_operator_core::crd::WorkFlow;
use workflow_operator_core::locks::{
    ANNOTATION_HELD_BY, ANNOTATION_LOCK, Held, LABEL_HOLDER, LABEL_LOCK, Lock, holder_identity,
    locks_of, waiting_message,
};
use workflow_operator_core::names;
use workflow_operator_core::plan::{self, Action, Compiled, JobState, ObservedJob, Plan};

use super::decide::Decided;
use super::lock_book::{ANNOTATION_SLOT, Claim, LockBook};
use super::step_queue::Rank;
use crate::controllers::{FIELD_MANAGER, RequestFailed, exists_already};

/// The `locks` stage of a pass of `workflow` (as planned: templates expanded), whose plan is
/// `plan` and whose Jobs, when observed in full, are `observed`: gives back the locks no longer
/// needed (all of them once the workflow ended), takes the workflow's own before any step, then
/// those of each step its plan starts. A gate holding back what must wait, or `None`.
///
/// # Errors
/// A Lease that could not be created or deleted (temporary).
pub(super) async fn hold(
    book: Option<&LockBook>,
    client: &Client,
    decided: &Decided,
) -> Result<Option<plan::Gate>, RequestFailed> {
    let (workflow, compiled) = (
        decided.seen.workflow.as_ref(),
        decided.seen.compiled.as_ref(),
    );
    let (plan, observed) = (&decided.decision.plan, decided.jobs.as_deref());
    let Some(book) = book else {
        return Ok(None);
    };
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let api: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    book.forget(&uid);
    if !compiled.policies.locks && book.held_by(&namespace, &uid).is_empty() {
        return Ok(None);
    }
    let own = locks_of(workflow.spec.synchronization.as_deref());
    // After a restart, the Leases of the previous process must be known before anything is
    // given back or taken.
    let mut synced = book.synced.clone();
    let _ = synced.wait_for(|synced| *synced).await;
    let status = plan.status.as_ref().or(workflow.status.as_ref());
    let ended = status
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal());
    give_back(book, &api, workflow, (plan, observed), ended).await?;
    let creates = step_creates((workflow, compiled), plan);
    if ended || (own.is_empty() && creates.is_empty()) {
        return Ok(None);
    }
    let rank = Rank::of(workflow);
    let by = format!("{namespace}/{}", workflow.name_any());
    for lock in &own {
        let holder = (uid.as_str(), by.as_str());
        if let Some(message) = acquire(book, &api, workflow, lock, holder, &rank).await? {
            return Ok(Some(plan::Gate::admitting([], message)));
        }
    }
    let mut held_back = None;
    let mut admitted: Vec<String> = plan_creates(plan);
    for (step, job, locks) in creates {
        let holder = holder_identity(&uid, Some(&job));
        let by = format!("{by} step {step}");
        for lock in &locks {
            if let Some(message) =
                acquire(book, &api, workflow, lock, (&holder, &by), &rank).await?
            {
                admitted.retain(|j| *j != job);
                held_back.get_or_insert(message);
                break;
            }
        }
    }
    Ok(held_back.map(|message| plan::Gate::admitting(admitted, message)))
}

/// The Jobs `plan` creates.
fn plan_creates(plan: &Plan) -> Vec<String> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob { job_name, .. } => Some(job_name.clone()),
            _ => None,
        })
        .collect()
}

/// The Jobs `plan` creates of steps that hold locks: (step, Job, its locks).
fn step_creates(
    (workflow, compiled): (&WorkFlow, &Compiled),
    plan: &Plan,
) -> Vec<(String, String, Vec<Lock>)> {
    (plan.actions.iter())
        .filter_map(|a| match a {
            Action::CreateJob {
                step,
                job_name,
                exit,
                ..
            } => {
                let (_, found) = compiled.step(&workflow.spec, step, exit.is_some())?;
                let locks = locks_of(found.synchronization.as_deref());
                (!locks.is_empty()).then(|| (step.clone(), job_name.clone(), locks))
            }
            _ => None,
        })
        .collect()
}

/// Deletes the Leases of `workflow` no longer needed: all once it `ended`; its own for locks
/// its spec no longer names; a step's once its Job no longer runs (known only from the Jobs
/// observed in full) nor is being created.
async fn give_back(
    book: &LockBook,
    api: &Api<Lease>,
    workflow: &WorkFlow,
    (plan, observed): (&Plan, Option<&[ObservedJob]>),
    ended: bool,
) -> Result<(), RequestFailed> {
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let held = book.held_by(&namespace, &uid);
    if held.is_empty() {
        return Ok(());
    }
    let own: Vec<String> = (locks_of(workflow.spec.synchronization.as_deref()).iter())
        .map(Lock::key)
        .collect();
    let running: Option<HashSet<String>> = observed.map(|jobs| {
        let active = jobs
            .iter()
            .filter(|j| matches!(j.state, JobState::Active { .. }) && !j.deleting)
            .map(|j| j.name.clone());
        active.chain(plan_creates(plan)).collect()
    });
    for ((_, key), lease) in held {
        let keep = match lease.holder.strip_prefix(&format!("{uid}/")) {
            _ if ended => false,
            None => own.contains(&key),
            Some(job) => running.as_ref().is_none_or(|r| r.contains(job)),
        };
        if !keep {
            release(api, &lease).await?;
        }
    }
    Ok(())
}

/// Takes `lock` for `holder` (identity, and who as people read it) of `workflow` ranked
/// `rank`: `None` once held, else why it waits.
async fn acquire(
    book: &LockBook,
    api: &Api<Lease>,
    workflow: &WorkFlow,
    lock: &Lock,
    (holder, by): (&str, &str),
    rank: &Rank,
) -> Result<Option<String>, RequestFailed> {
    let uid = workflow.uid().unwrap_or_default();
    let namespace = workflow.namespace().unwrap_or_default();
    let held = match book.claim(&namespace, lock, holder, by, (rank, &uid)) {
        Claim::Held => return Ok(None),
        Claim::Wait(message) => return Ok(Some(message)),
        Claim::Create(held) => held,
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &lease(workflow, lock, &held)).await {
        Ok(_) => {
            tracing::debug!(lock = %lock.id(), %holder, "locks: taken");
            Ok(None)
        }
        // Taken by another holder the watch has not shown yet: wait as for a held one.
        Err(e) if exists_already(&e) => {
            book.unreserve(&namespace, lock, &held.lease);
            Ok(Some(waiting_message(lock, &[])))
        }
        Err(e) => {
            book.unreserve(&namespace, lock, &held.lease);
            Err(RequestFailed::new("taking a lock (creating its Lease)", e))
        }
    }
}

/// Gives `held` back: deletes its Lease, only that very Lease (by uid, when known), so a newer
/// holder's Lease of the same name is never deleted.
async fn release(api: &Api<Lease>, held: &Held) -> Result<(), RequestFailed> {
    let params = DeleteParams {
        preconditions: (!held.uid.is_empty()).then(|| Preconditions {
            uid: Some(held.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&held.lease, &params).await {
        Ok(_) => {
            tracing::debug!(lease = %held.lease, holder = %held.holder, "locks: given back");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(RequestFailed::new(
            "giving back a lock (deleting its Lease)",
            e,
        )),
    }
}

/// The Lease of slot `held` of `lock`, owned by `workflow` (deleting the workflow gives it back).
fn lease(workflow: &WorkFlow, lock: &Lock, held: &Held) -> Lease {
    let uid = workflow.uid().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(held.lease.clone()),
            namespace: workflow.namespace(),
            labels: Some(BTreeMap::from([
                (LABEL_LOCK.to_string(), lock.key()),
                (LABEL_HOLDER.to_string(), names::label_value(&uid)),
            ])),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_LOCK.to_string(), lock.id()),
                (ANNOTATION_HELD_BY.to_string(), held.by.clone()),
                (ANNOTATION_SLOT.to_string(), held.slot.to_string()),
            ])),
            owner_references: workflow.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(held.holder.clone()),
            acquire_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    }
}
