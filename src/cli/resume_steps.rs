//! `workflow-operator resume NAME`'s second half: the workflow's suspend steps that wait
//! (`suspend:` steps, Argo's suspend templates) are resumed too, as `argo resume` does. Each
//! waits as a Job created suspended; resuming one annotates its Job (`jobs::resume_patch`),
//! which the operator reads as the step succeeded.

use anyhow::{Context as _, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use workflow_operator_core::crd::suspend::{ANNOTATION_RESUMED, LABEL_SUSPEND};
use workflow_operator_core::jobs;
use workflow_operator_core::labels::ANNOTATION_STEP;

/// Resumes the suspend steps of workflow `name` that still wait; returns their names, sorted.
///
/// # Errors
/// When the Jobs cannot be listed or one cannot be patched.
pub(super) async fn resume(client: Client, namespace: &str, name: &str) -> Result<Vec<String>> {
    let api: Api<Job> = Api::namespaced(client, namespace);
    let selector = format!("{},{LABEL_SUSPEND}=true", jobs::selector(name));
    let listed = (api.list(&ListParams::default().labels(&selector)).await)
        .with_context(|| format!("listing the suspend steps of workflow {name}"))?;
    let waiting = (listed.items.iter()).filter(|job| {
        job.metadata.deletion_timestamp.is_none()
            && !job.annotations().contains_key(ANNOTATION_RESUMED)
    });
    let mut resumed = Vec::new();
    for job in waiting {
        let patch = jobs::resume_patch(Timestamp::now());
        (api.patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await)
            .with_context(|| format!("resuming Job {}", job.name_any()))?;
        resumed.push(
            job.annotations()
                .get(ANNOTATION_STEP)
                .cloned()
                .unwrap_or_default(),
        );
    }
    resumed.sort();
    Ok(resumed)
}
