//! The WorkFlow of one run of a CronWorkFlow: what the controller creates at a scheduled time
//! and what `workflow-operator cron trigger` creates now. Pure, so both build the same run; and
//! what would fail every run at once, which the tick planner reports instead of creating one.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::WorkFlow;
use crate::crd::CronWorkFlow;
use crate::labels::{LABEL_CRON, LABEL_SCHEDULED};
use crate::names;
use crate::plan;
use crate::shards::LABEL_SHARD;
use crate::template;

/// The WorkFlow of `cron`'s run for `scheduled` (unix seconds): [`run_metadata`] and the spec
/// of [`run_spec`].
///
/// # Errors
/// A `spec.workflowSpec` that is not a WorkFlow's spec, or neither or both of
/// `spec.workflowSpec` and `spec.workflowTemplateRef`, named.
pub fn run_of(cron: &CronWorkFlow, scheduled: i64) -> Result<WorkFlow, String> {
    let spec = serde_json::from_value(run_spec(cron)?)
        .map_err(|e| format!("{} is not a WorkFlow spec: {e}", spec_field(cron)))?;
    Ok(WorkFlow {
        metadata: run_metadata(cron, scheduled),
        spec,
        status: None,
    })
}

/// The metadata of `cron`'s run for `scheduled` (unix seconds): named for the time
/// (`names::cron_run_name`), labelled with the CronWorkFlow and the time (`LABEL_CRON`,
/// `LABEL_SCHEDULED`, the cron's shard, and `spec.workflowMetadata`'s labels and annotations), owned by the
/// CronWorkFlow.
pub fn run_metadata(cron: &CronWorkFlow, scheduled: i64) -> ObjectMeta {
    let cron_name = cron.name_any();
    let extra = cron.spec.workflow_metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = extra.labels;
    labels.insert(LABEL_CRON.into(), names::label_value(&cron_name));
    labels.insert(LABEL_SCHEDULED.into(), scheduled.to_string());
    // A cron's runs live in its shard, so the replica holding it follows them (`shards`).
    if let Some(shard) = cron.labels().get(LABEL_SHARD) {
        labels.insert(LABEL_SHARD.into(), shard.clone());
    }
    ObjectMeta {
        name: Some(names::cron_run_name(&cron_name, scheduled)),
        namespace: cron.namespace(),
        labels: Some(labels),
        annotations: (!extra.annotations.is_empty()).then_some(extra.annotations),
        owner_references: Some(vec![owner_of(cron)]),
        ..ObjectMeta::default()
    }
}

/// The spec of every run of `cron` as written: its `workflowSpec`, or its `workflowTemplateRef`
/// taken whole (`validate` checks it against the WorkFlow schema).
///
/// # Errors
/// Neither or both of `spec.workflowSpec` and `spec.workflowTemplateRef`.
pub fn run_spec(cron: &CronWorkFlow) -> Result<Value, String> {
    match (&cron.spec.workflow_spec, &cron.spec.workflow_template_ref) {
        (Some(spec), None) => Ok(spec.clone()),
        (None, Some(reference)) => Ok(json!({"workflowTemplateRef": reference})),
        _ => Err("give one of spec.workflowSpec and spec.workflowTemplateRef".into()),
    }
}

/// The field of `cron` its runs' spec comes from: `spec.workflowSpec`, else
/// `spec.workflowTemplateRef`.
pub fn spec_field(cron: &CronWorkFlow) -> &'static str {
    if cron.spec.workflow_spec.is_some() || cron.spec.workflow_template_ref.is_none() {
        "spec.workflowSpec"
    } else {
        "spec.workflowTemplateRef"
    }
}

/// Why every run of `cron` would fail at once, each problem prefixed with the field it is in
/// (`spec.workflowSpec: dependency cycle: a -> b -> a`): what keeps a run from being made
/// ([`run_of`]'s errors), then what the operator fails a WorkFlow for at once
/// (`plan::spec_problems`: templates, parameters, the DAG, `when`s). Empty when a run can start.
///
/// # Caveats
/// Shared templates are read by each run when it starts: one named here is not looked for, and
/// what it holds is not checked. Nor is the WorkFlow schema (the API server's, on the create).
pub fn run_problems(cron: &CronWorkFlow) -> Vec<String> {
    let run = match run_of(cron, 0) {
        Ok(run) => run,
        Err(problem) => return vec![problem],
    };
    let field = spec_field(cron);
    plan::spec_problems(&run, &template::missing(&run))
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|problem| format!("{field}: {problem}"))
        .collect()
}

/// The owner reference of every run: `cron`, as the controller of the run.
fn owner_of(cron: &CronWorkFlow) -> OwnerReference {
    OwnerReference {
        api_version: CronWorkFlow::api_version(&()).into_owned(),
        kind: CronWorkFlow::kind(&()).into_owned(),
        name: cron.name_any(),
        uid: cron.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
