//! `workflow-operator resume NAME`'s second half: the workflow's suspend steps that wait
//! (`suspend:` steps, Argo's suspend templates) are resumed too, as `argo resume` does. Each
//! waits as a Job created suspended; resuming one annotates its Job (`jobs::resume_patch`),
//! which the operator reads as the step succeeded. `--step STEP --output NAME=VALUE` resumes
//! one step with the values of its supplied outputs (`valueFrom.supplied`, as `argo node set
//! --output-parameter` then `argo resume`): every step to resume is checked
//! (`suspend::supplied_outputs`) before any is, so a refused resume changes nothing.

use anyhow::{Context as _, Result, bail};
use clap::Args;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::suspend::{self, ANNOTATION_RESUMED, LABEL_SUSPEND};
use workflow_operator_core::jobs;
use workflow_operator_core::labels::ANNOTATION_STEP;
use workflow_operator_core::outputs::Outputs;

/// `resume`'s own flags: which suspend step, and the outputs it is given.
#[derive(Debug, Args, Default)]
pub struct ResumeSteps {
    /// Resume only this suspend step of the workflow (its stepName, what `get` shows; Argo's
    /// `--node-field-selector displayName=STEP`); the workflow's own `spec.suspend` is lifted
    /// too. Needs one workflow NAME.
    #[arg(long, value_name = "STEP")]
    step: Option<String>,
    /// A value of one of the step's outputs supplied at resume (`valueFrom.supplied`), as
    /// Argo's `argo node set --output-parameter NAME=VALUE`; repeat it for each. An output
    /// given no value takes its `default`; one without a default, or a value outside its
    /// `enum`, is refused and nothing is resumed.
    #[arg(
        long = "output",
        visible_alias = "output-parameter",
        value_name = "NAME=VALUE",
        requires = "step"
    )]
    outputs: Vec<String>,
}

impl ResumeSteps {
    /// The values given, by name.
    ///
    /// # Errors
    /// One not `NAME=VALUE`, or a name given twice.
    fn given(&self) -> Result<Outputs> {
        let mut given = Outputs::new();
        for output in &self.outputs {
            let Some((name, value)) = output.split_once('=') else {
                bail!("--output {output:?}: expected NAME=VALUE");
            };
            if given.insert(name.to_string(), value.to_string()).is_some() {
                bail!("--output {name}: given twice");
            }
        }
        Ok(given)
    }

    /// Whether it asks for one step (and so one workflow).
    pub(super) fn names_a_step(&self) -> bool {
        self.step.is_some()
    }
}

/// Resumes the suspend steps of `workflow` (as its steps run: templates expanded) that still
/// wait, only `resume.step` when given; returns their names, sorted.
///
/// # Errors
/// When the Jobs cannot be listed or one cannot be patched; when `resume.step` is not a step
/// that waits; when a step's supplied outputs are refused (every refusal, nothing resumed).
pub(super) async fn resume(
    client: Client,
    namespace: &str,
    workflow: &WorkFlow,
    resume: &ResumeSteps,
) -> Result<Vec<String>> {
    let name = workflow.name_any();
    let api: Api<Job> = Api::namespaced(client, namespace);
    let selector = format!("{},{LABEL_SUSPEND}=true", jobs::selector(&name));
    let listed = (api.list(&ListParams::default().labels(&selector)).await)
        .with_context(|| format!("listing the suspend steps of workflow {name}"))?;
    let waiting: Vec<(&Job, String)> = (listed.items.iter())
        .filter(|job| {
            job.metadata.deletion_timestamp.is_none()
                && !job.annotations().contains_key(ANNOTATION_RESUMED)
        })
        .map(|job| {
            let step = job.annotations().get(ANNOTATION_STEP).cloned();
            (job, step.unwrap_or_default())
        })
        .collect();
    let chosen = chosen(&name, &waiting, resume.step.as_deref())?;
    let given = resume.given()?;
    let mut patches = Vec::new();
    let mut refused = Vec::new();
    for (job, step) in chosen {
        let declared = (workflow.spec.containers.iter())
            .chain(&workflow.spec.on_exit)
            .find(|s| &s.step_name == step);
        let outputs = match declared {
            Some(declared) => suspend::supplied_outputs(declared, &given),
            // A step the spec no longer has (a new run replaces it): resumed as it is.
            None => Ok(Outputs::new()),
        };
        match outputs {
            Ok(outputs) => patches.push((job.name_any(), step.clone(), outputs)),
            Err(why) => refused.push(why),
        }
    }
    if !refused.is_empty() {
        bail!(
            "workflow {name}: not resumed: {} (give a value with --step STEP --output NAME=VALUE)",
            refused.join("; ")
        );
    }
    let mut resumed = Vec::new();
    for (job, step, outputs) in patches {
        let patch = jobs::resume_patch(Timestamp::now(), &outputs);
        (api.patch(&job, &PatchParams::default(), &Patch::Merge(&patch))
            .await)
            .with_context(|| format!("resuming Job {job}"))?;
        resumed.push(step);
    }
    resumed.sort();
    Ok(resumed)
}

/// The waiting steps to resume: all of them, or the one named `step`.
///
/// # Errors
/// `step` is not among those that wait, naming them.
fn chosen<'w>(
    workflow: &str,
    waiting: &'w [(&'w Job, String)],
    step: Option<&str>,
) -> Result<Vec<&'w (&'w Job, String)>> {
    let Some(step) = step else {
        return Ok(waiting.iter().collect());
    };
    let chosen: Vec<_> = waiting.iter().filter(|(_, s)| s == step).collect();
    if chosen.is_empty() {
        let mut names: Vec<&str> = waiting.iter().map(|(_, s)| s.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let those = if names.is_empty() {
            "none waits".to_string()
        } else {
            format!("waiting: {}", names.join(", "))
        };
        bail!("workflow {workflow} has no suspend step {step:?} waiting ({those})");
    }
    Ok(chosen)
}
