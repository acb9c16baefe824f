//! Templates and parameters, expanded before planning: the planner, `get`, `logs`, `graph`
//! and the web view see plain steps.
//!
//! [`expand`] is pure: a workflow (its spec, its identity, and the shared templates it read,
//! `status.resolvedTemplates`) in, the plain spec out, or every problem found, each naming
//! its place. The operator reads the shared templates a workflow names once ([`missing`] says
//! which are still to read), records them in the status, and expands from the record ever
//! after, so an edited or deleted template never changes a workflow that started from it.
//!
//! The API (`arguments`, `templates`, `templateRef`, `workflowTemplateRef`, the
//! `WorkFlowTemplate` and `ClusterWorkFlowTemplate` kinds, the record) is in `crd`, re-exported
//! here.
//!
//! - `called`: the template an expanded step was made from, by the step's name.
//! - `fill`: the `{{workflow.*}}` and `{{inputs.parameters.*}}` forms.
//! - `merge`: a call's fields over the template's.
//! - `expand`: calls made steps, `dag` templates made named steps.
//! - `call_outputs`: a `dag` or `steps` template's own outputs, aliased to its steps'.
//! - `call_policies`: a call's `target`, `parallelism` and global output names.
//! - `config_maps`: parameters and semaphores' limits from ConfigMaps
//!   (`valueFrom.configMapKeyRef`, `limitFrom.configMapKeyRef`), read once and recorded in
//!   `status.resolvedConfigMapKeys`.
//! - `globals`: `{{workflow.outputs...}}` read from the steps that give them (`globalName`).
//! - `groups`: the steps of a `dag` or Argo's `steps` template, read as steps.
//! - `hooks`: lifecycle hooks (`hooks` of the workflow and of a step) made steps.
//! - `numbers`: numbers written as text (Argo's `limit: "3"`, a parameter), filled and checked.
//! - `recursion`: a template calling itself under a `when`, unrolled to a depth limit.

mod call_outputs;
mod call_policies;
mod called;
pub mod config_maps;
mod expand;
mod fill;
mod globals;
mod groups;
pub mod hooks;
mod merge;
mod numbers;
pub mod recursion;

#[cfg(test)]
mod config_maps_tests;

#[cfg(test)]
mod dag_outputs_tests;

#[cfg(test)]
mod fan_out_tests;

#[cfg(test)]
mod hooks_tests;

#[cfg(test)]
mod steps_tests;

#[cfg(test)]
mod recursion_tests;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use kube::ResourceExt;

pub use crate::crd::templates::*;
pub use called::called_template;
pub use fill::Vars;
pub use globals::declared as global_outputs;

use crate::crd::{Step, WorkFlow, WorkFlowSpec};
use crate::data_flow;
use expand::{Expander, Scope, allowed, listed};
use fill::unknown_forms;

/// Why a workflow cannot be expanded: every problem found, each naming its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<String>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// Whether `spec` uses anything [`expand`] does: parameters, templates, a shared template, a
/// `{{workflow.` / `{{inputs.` form in a step, a semaphore's limit from a ConfigMap, or the
/// workflow's `podSpecPatch` (filled and checked).
pub fn uses_templates(spec: &WorkFlowSpec) -> bool {
    spec.arguments.is_some()
        || numbers::spec_texts(spec).next().is_some()
        || !config_maps::limit_keys(spec).is_empty()
        || spec.pod_spec_patch.is_some()
        || !spec.templates.is_empty()
        || spec.workflow_template_ref.is_some()
        || !spec.hooks.is_empty()
        || spec
            .containers
            .iter()
            .chain(&spec.on_exit)
            .any(step_uses_templates)
}

fn step_uses_templates(step: &Step) -> bool {
    // A `withParam` written as a list, not a reference, is made that list as when filled.
    let param_listed = (step.with_param.as_deref()).is_some_and(|p| !p.0.contains("{{"));
    step.template.is_some()
        || step.template_ref.is_some()
        || step.hooks.is_some()
        || step.arguments.is_some()
        || param_listed
        || numbers::step_texts(step).next().is_some()
        || step_strings(step).any(|s| {
            s.contains("{{workflow.")
                || s.contains("{{ workflow.")
                || s.contains("{{inputs.")
                || s.contains("{{ inputs.")
        })
}

/// The strings of `step` a form may be filled in.
fn step_strings(step: &Step) -> impl Iterator<Item = &str> {
    let mounts = step
        .volume_mounts
        .iter()
        .flat_map(|m| std::iter::once(&m.mount_path).chain(m.sub_path.as_ref()));
    let items = step
        .with_items
        .iter()
        .flat_map(|i| i.0.iter())
        .filter_map(|v| v.as_str());
    data_flow::texts(step)
        .chain(step.working_dir.as_deref())
        .chain(mounts.map(String::as_str))
        .chain(items)
        .chain(step.when.as_deref())
        .chain(step.with_param.as_deref().map(|p| p.0.as_str()))
}

/// The shared templates `workflow` names that its status does not hold yet: what the
/// operator must read (and record) before it can expand the workflow. Templates named from
/// inside recorded ones count; those named from a missing one are found once it is read.
pub fn missing(workflow: &WorkFlow) -> Vec<Source> {
    let spec = &workflow.spec;
    let resolved = workflow
        .status
        .as_ref()
        .map_or(&[][..], |s| &s.resolved_templates[..]);
    let mut named = BTreeSet::new();
    if let Some(reference) = &spec.workflow_template_ref {
        named.insert(Source::new(&reference.name, reference.cluster_scope));
    }
    collect_refs(spec, &mut named);
    for record in resolved {
        collect_refs(&record.spec, &mut named);
    }
    named
        .into_iter()
        .filter(|source| !resolved.iter().any(|r| r.is(source)))
        .collect()
}

/// The annotation in which `workflow-operator submit` records the shared templates of a
/// workflow another controller dispatches (`spec.managedBy`, MultiKueue): a JSON list of
/// [`ResolvedTemplate`]s, read where the workflow was submitted. MultiKueue copies a workflow's
/// spec, labels and annotations to a worker cluster, not its status: the worker's operator
/// records these as they are written here ([`submitted`]) rather than reading its own cluster's
/// templates, so the run is of the templates the workflow was submitted with.
pub const ANNOTATION_RESOLVED_TEMPLATES: &str = "workflow.crd.com/resolved-templates";

/// The shared templates recorded in `workflow`'s [`ANNOTATION_RESOLVED_TEMPLATES`]; none
/// without it.
///
/// # Errors
/// The annotation is not a JSON list of records: what the parser said.
pub fn submitted(workflow: &WorkFlow) -> Result<Vec<ResolvedTemplate>, String> {
    match workflow.annotations().get(ANNOTATION_RESOLVED_TEMPLATES) {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("annotation {ANNOTATION_RESOLVED_TEMPLATES}: {e}")),
    }
}

/// `workflow` with the records of [`submitted`] that its status does not hold yet added to its
/// status, in memory: how it expands where no operator records its templates (the manager of a
/// workflow MultiKueue dispatches, which sizes the run's Workload). Borrowed when nothing is
/// added; a malformed annotation adds nothing.
pub fn with_submitted(workflow: &WorkFlow) -> Cow<'_, WorkFlow> {
    let resolved = workflow
        .status
        .as_ref()
        .map_or(&[][..], |s| &s.resolved_templates[..]);
    let added: Vec<ResolvedTemplate> = (submitted(workflow).unwrap_or_default().into_iter())
        .filter(|r| {
            !resolved
                .iter()
                .any(|h| h.kind == r.kind && h.name == r.name)
        })
        .collect();
    if added.is_empty() {
        return Cow::Borrowed(workflow);
    }
    let mut owned = workflow.clone();
    let status = owned.status.get_or_insert_with(Default::default);
    status.resolved_templates.extend(added);
    Cow::Owned(owned)
}

/// Records in `workflow`'s status every shared template it names (and those name) that `find`
/// finds (the operator from the API, `validate` from the files given); returns those `find` did
/// not find. Ends: each round records a new template or sets one aside as not found.
pub async fn resolve<E, F, Fut>(workflow: &mut WorkFlow, mut find: F) -> Result<Vec<Source>, E>
where
    F: FnMut(Source) -> Fut,
    Fut: Future<Output = Result<Option<ResolvedTemplate>, E>>,
{
    let mut absent = Vec::new();
    loop {
        let wanted: Vec<Source> = missing(workflow)
            .into_iter()
            .filter(|s| !absent.contains(s))
            .collect();
        if wanted.is_empty() {
            return Ok(absent);
        }
        for source in wanted {
            match find(source.clone()).await? {
                Some(record) => workflow
                    .status
                    .get_or_insert_with(Default::default)
                    .resolved_templates
                    .push(record),
                None => absent.push(source),
            }
        }
    }
}

/// Every `templateRef` of `spec`'s steps, its templates' steps and their `dag`s and `steps`.
fn collect_refs(spec: &WorkFlowSpec, named: &mut BTreeSet<Source>) {
    let template_steps = spec.templates.iter().flat_map(|t| {
        let own = serde_json::from_value::<Option<TemplateRef>>(
            t.container.get("templateRef").cloned().unwrap_or_default(),
        )
        .ok()
        .flatten();
        t.dag
            .iter()
            .flatten()
            .chain(t.steps.iter().flatten().flatten())
            .filter_map(|s| serde_json::from_value(s.get("templateRef")?.clone()).ok())
            .chain(own)
    });
    let steps = spec
        .containers
        .iter()
        .chain(&spec.on_exit)
        .filter_map(|s| s.template_ref.as_deref().cloned());
    for reference in steps.chain(template_steps) {
        named.insert(Source::new(&reference.name, reference.cluster_scope));
    }
}

/// A workflow-level optional field as the workflow runs with it, without expanding anything:
/// its own value, else (for a workflow taking a shared template whole) the recorded template's.
/// For what is read often and cheaply, e.g. `ttlSecondsAfterFinished` at every timer tick.
pub fn own_or_taken<T>(
    workflow: &WorkFlow,
    field: impl Fn(&WorkFlowSpec) -> Option<T>,
) -> Option<T> {
    field(&workflow.spec).or_else(|| {
        let reference = workflow.spec.workflow_template_ref.as_deref()?;
        let source = Source::new(&reference.name, reference.cluster_scope);
        let status = workflow.status.as_ref()?;
        let record = status.resolved_templates.iter().find(|r| r.is(&source))?;
        field(&record.spec)
    })
}

/// The `{{workflow.*}}` forms of `workflow` without its parameters; `workflow.scheduledTime`
/// (RFC 3339, as Argo writes it) for a run a CronWorkFlow started, from its label.
fn identity(workflow: &WorkFlow) -> Vars {
    let scheduled = (workflow.labels().get(crate::labels::LABEL_SCHEDULED))
        .and_then(|seconds| seconds.parse().ok())
        .and_then(|seconds| k8s_openapi::jiff::Timestamp::from_second(seconds).ok())
        .map(|t| ("workflow.scheduledTime".to_string(), t.to_string()));
    let created = workflow
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    [
        ("workflow.name", workflow.name_any()),
        (
            "workflow.namespace",
            workflow.namespace().unwrap_or_default(),
        ),
        ("workflow.uid", workflow.uid().unwrap_or_default()),
        ("workflow.creationTimestamp", created),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .chain(scheduled)
    .collect()
}

/// `workflow`'s spec with its shared template taken, its parameters bound and its template
/// calls expanded: plain steps, `templates` empty, `arguments` holding each parameter's
/// value. A workflow that uses none of it is borrowed as it is.
///
/// # Errors
/// Every problem found, each naming its place: a shared template not recorded (not found), a
/// template not found, a template cycle, a parameter without a value or outside its `enum`,
/// an input not given, an unknown `{{...}}` form, a step without an image.
pub fn expand(workflow: &WorkFlow) -> Result<Cow<'_, WorkFlowSpec>, Problems> {
    if !uses_templates(&workflow.spec) {
        let problems = plain_problems(&workflow.spec.containers, &workflow.spec.on_exit);
        return if problems.is_empty() {
            Ok(Cow::Borrowed(&workflow.spec))
        } else {
            Err(Problems(problems))
        };
    }
    let resolved = workflow
        .status
        .as_ref()
        .map_or(&[][..], |s| &s.resolved_templates[..]);
    let namespace = workflow.namespace().unwrap_or_default();
    let mut problems = Vec::new();
    let mut spec = whole_template(&workflow.spec, resolved, &namespace, &mut problems);
    let mut vars = identity(workflow);
    let recorded = workflow
        .status
        .as_ref()
        .map_or(&[][..], |s| &s.resolved_config_map_keys[..]);
    problems.extend(config_maps::problems(&spec.spec));
    let arguments = parameters(&spec, recorded, &mut vars, &mut problems);
    numbers::fill_spec(&mut spec.spec, &vars, &mut problems);
    fill_pod_spec_patch(&mut spec.spec, &vars, &mut problems);
    let mut expander = Expander::new((resolved, recorded), &namespace, vars.clone());
    let scope = Scope {
        origin: spec.origin,
        templates: &spec.spec.templates,
    };
    let (own, own_exit) = hooks::unfold_workflow(&spec.spec).unwrap_or_else(|found| {
        problems.extend(found);
        (spec.spec.containers.clone(), spec.spec.on_exit.clone())
    });
    let mut containers = expander.top_level(&own, scope, &vars);
    let mut on_exit = expander.top_level(&own_exit, scope, &vars);
    problems.append(&mut expander.problems);
    problems.extend(globals::apply(&mut containers, &mut on_exit));
    let (own, steps) = (
        spec.spec.synchronization.as_deref_mut(),
        containers.iter_mut(),
    );
    config_maps::fill_all_limits(own, steps.chain(&mut on_exit), recorded, &mut problems);
    problems.extend(plain_problems(&containers, &on_exit));
    problems.extend(numbers::spec_problems(&spec.spec));
    if containers.is_empty() && problems.is_empty() {
        problems.push(crate::dag::DagError::NoSteps.to_string());
    }
    let mut seen = BTreeSet::new();
    problems.retain(|p| seen.insert(p.clone()));
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    Ok(Cow::Owned(WorkFlowSpec {
        containers,
        on_exit,
        templates: Vec::new(),
        workflow_template_ref: None,
        hooks: Default::default(),
        arguments,
        ..spec.spec
    }))
}

/// A spec and where its templates came from (a shared template taken whole, or none).
struct Taken<'a> {
    spec: WorkFlowSpec,
    origin: Option<&'a ResolvedTemplate>,
}

/// `own` over the shared template it names whole (`workflowTemplateRef`), or `own` as it is.
fn whole_template<'a>(
    own: &WorkFlowSpec,
    resolved: &'a [ResolvedTemplate],
    namespace: &str,
    problems: &mut Vec<String>,
) -> Taken<'a> {
    let Some(reference) = &own.workflow_template_ref else {
        return Taken {
            spec: own.clone(),
            origin: None,
        };
    };
    for (field, set) in [
        ("containers", !own.containers.is_empty()),
        ("templates", !own.templates.is_empty()),
        ("onExit", !own.on_exit.is_empty()),
    ] {
        if set {
            problems.push(format!("spec.{field}: a workflow with workflowTemplateRef has no {field} of its own (they come from the template)"));
        }
    }
    let source = Source::new(&reference.name, reference.cluster_scope);
    let Some(record) = resolved.iter().find(|r| r.is(&source)) else {
        problems.push(format!(
            "workflowTemplateRef: {}",
            source.not_found(namespace)
        ));
        return Taken {
            spec: own.clone(),
            origin: None,
        };
    };
    let mut spec = merge::workflow_over_template(own, record.spec.clone());
    let declared = spec
        .arguments
        .as_deref()
        .map_or(&[][..], |a| &a.parameters[..])
        .to_vec();
    for given in own.arguments.iter().flat_map(|a| &a.parameters) {
        match declared.iter().position(|d| d.name == given.name) {
            Some(i) => {
                let arguments = spec.arguments.as_mut().expect("declared parameters");
                let parameter = &mut arguments.parameters[i];
                // What the workflow gives replaces the template's: a value, or a ConfigMap key
                // (with its default).
                if given.value.is_some() || given.value_from.is_some() {
                    parameter.value = given.value.clone();
                    parameter.value_from = given.value_from.clone();
                    parameter.default = given.default.clone().or(parameter.default.take());
                }
            }
            None => problems.push(format!(
                "spec.arguments.parameters: {:?}: {} declares no such parameter ({})",
                given.name,
                source.describe(),
                listed("parameters", declared.iter().map(|d| d.name.as_str()))
            )),
        }
    }
    // Templates named inside the shared one are looked up in it.
    spec.templates = record.spec.templates.clone();
    Taken {
        spec,
        origin: Some(record),
    }
}

/// Binds the workflow's parameters into `vars` (`workflow.parameters.NAME`), a parameter
/// without a `value` taking its ConfigMap key's from `recorded`, recording each without a value
/// or outside its `enum`; returns them with their values, for the `when`s.
fn parameters(
    taken: &Taken<'_>,
    recorded: &[ResolvedConfigMapKey],
    vars: &mut Vars,
    problems: &mut Vec<String>,
) -> Option<Box<Arguments>> {
    let mut arguments = taken.spec.arguments.as_deref()?.clone();
    let mut names = BTreeSet::new();
    for parameter in &mut arguments.parameters {
        if !names.insert(parameter.name.clone()) {
            problems.push(format!(
                "spec.arguments.parameters: {:?} is declared more than once",
                parameter.name
            ));
        }
        let from_config_map = match parameter.value {
            Some(_) => None,
            None => config_maps::value_of(parameter, recorded),
        };
        match from_config_map {
            Some(Ok(value)) => parameter.value = Some(value),
            Some(Err(unavailable)) => {
                problems.push(format!(
                    "spec.arguments.parameters: {:?}: {}",
                    parameter.name, unavailable.why
                ));
                let Some(stand_in) = unavailable.stand_in else {
                    continue;
                };
                parameter.value = Some(stand_in);
            }
            None => {}
        }
        let Some(value) = &parameter.value else {
            problems.push(format!("spec.arguments.parameters: {:?} has no value: give one (workflow-operator submit -p {}=VALUE)", parameter.name, parameter.name));
            continue;
        };
        if let Err(problem) = allowed(parameter, value) {
            problems.push(format!(
                "spec.arguments.parameters: {:?}: {problem}",
                parameter.name
            ));
        }
        vars.insert(
            format!("workflow.parameters.{}", parameter.name),
            value.clone(),
        );
    }
    vars.entry("workflow.parameters.json".into())
        .or_insert_with(|| arguments.argo_json());
    Some(Box::new(arguments))
}

/// The workflow's `podSpecPatch` with its `{{workflow.*}}` forms filled, then checked.
fn fill_pod_spec_patch(spec: &mut WorkFlowSpec, vars: &Vars, problems: &mut Vec<String>) {
    let Some(patch) = spec.pod_spec_patch.as_deref_mut() else {
        return;
    };
    let mut unfilled = fill::Unfilled::new();
    *patch = fill::fill(patch, vars, &mut unfilled);
    for (form, why) in unfilled {
        problems.push(format!("spec.podSpecPatch: {form}: {why}"));
    }
    problems.extend(crate::crd::step_pod::workflow_problems(Some(
        patch.as_str(),
    )));
}

/// What is wrong with plain steps whatever they came from: a step without an image, a form
/// nothing fills.
fn plain_problems(containers: &[Step], on_exit: &[Step]) -> Vec<String> {
    let mut problems = Vec::new();
    for step in containers.iter().chain(on_exit) {
        let runs_no_image = step.suspend.is_some()
            || step.fail.is_some()
            || step.http.is_some()
            || step.resource.is_some();
        if step.image.is_empty() && !runs_no_image {
            problems.push(format!(
                "step {:?}: image: required (or call a template that gives one)",
                step.step_name
            ));
        }
        problems.extend(numbers::step_problems(step));
        problems.extend(crate::crd::suspend::problems(step));
        problems.extend(crate::http_call::problems(step));
        problems.extend(crate::resource_action::problems(step));
        problems.extend(crate::crd::step_pod::problems(step));
        if step_strings(step).all(|s| !s.contains("{{")) {
            continue;
        }
        let mut value = serde_json::to_value(step).expect("a step serialises to JSON");
        if let Some(map) = value.as_object_mut() {
            map.remove("when");
            // A metric's forms are filled when the step ends (`custom_metrics` checks them).
            map.remove("metrics");
        }
        let mut found = Vec::new();
        unknown_forms(&value, &mut found);
        for (form, why) in found {
            problems.push(format!("step {:?}: {form}: {why}", step.step_name));
        }
    }
    problems
}
