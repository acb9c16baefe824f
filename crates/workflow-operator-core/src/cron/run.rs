//! The WorkFlow of one run of a CronWorkFlow: what the controller creates at a scheduled time
//! and what `workflow-operator cron trigger` creates now. Pure, so both build the same run.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::WorkFlow;
use crate::crd::{CronWorkFlow, WorkFlowSpec};
use crate::labels::{LABEL_CRON, LABEL_SCHEDULED};
use crate::names;

/// The WorkFlow of `cron`'s run for `scheduled` (unix seconds): named for the time
/// (`names::cron_run_name`), labelled with the CronWorkFlow and the time (`LABEL_CRON`,
/// `LABEL_SCHEDULED`, and `spec.workflowMetadata`'s labels and annotations), owned by the
/// CronWorkFlow.
///
/// # Errors
/// A `spec.workflowSpec` that is not a WorkFlow's spec, or neither or both of
/// `spec.workflowSpec` and `spec.workflowTemplateRef`, named.
pub fn run_of(cron: &CronWorkFlow, scheduled: i64) -> Result<WorkFlow, String> {
    let cron_name = cron.name_any();
    let extra = cron.spec.workflow_metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = extra.labels;
    labels.insert(LABEL_CRON.into(), names::label_value(&cron_name));
    labels.insert(LABEL_SCHEDULED.into(), scheduled.to_string());
    Ok(WorkFlow {
        metadata: ObjectMeta {
            name: Some(names::cron_run_name(&cron_name, scheduled)),
            namespace: cron.namespace(),
            labels: Some(labels),
            annotations: (!extra.annotations.is_empty()).then_some(extra.annotations),
            owner_references: Some(vec![owner_of(cron)]),
            ..ObjectMeta::default()
        },
        spec: spec_of(cron)?,
        status: None,
    })
}

/// The spec of every run of `cron`: its `workflowSpec`, or its `workflowTemplateRef` taken whole.
fn spec_of(cron: &CronWorkFlow) -> Result<WorkFlowSpec, String> {
    match (&cron.spec.workflow_spec, &cron.spec.workflow_template_ref) {
        (Some(spec), None) => serde_json::from_value(spec.clone())
            .map_err(|e| format!("spec.workflowSpec is not a WorkFlow spec: {e}")),
        (None, Some(reference)) => {
            serde_json::from_value(json!({"workflowTemplateRef": reference}))
                .map_err(|e| format!("spec.workflowTemplateRef does not make a WorkFlow spec: {e}"))
        }
        _ => Err("give one of spec.workflowSpec and spec.workflowTemplateRef".into()),
    }
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
