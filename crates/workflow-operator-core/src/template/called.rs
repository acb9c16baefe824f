//! The template a step of the expanded spec was made from, found by the step's name
//! (`OUTER/INNER`, `OUTER[i]/INNER`) in the spec as written: Argo names a failed node's
//! template in `{{workflow.failures}}` (`templateName`), and expansion keeps no template names,
//! so a spec with exit steps records here, once, the template each step calls
//! (`plan::Compiled::failure_templates`).

use super::groups::inner_steps;
use crate::crd::{ResolvedTemplate, Source, Step, Template, WorkFlow};

/// The name of the template the expanded step `step` calls (a `templateRef`'s `template`);
/// `None` for a step that calls none, or a name the spec as written does not lead to (a hook's
/// step, a template read from a ConfigMap).
pub fn called_template(workflow: &WorkFlow, step: &str) -> Option<String> {
    let resolved = (workflow.status.as_ref()).map_or(&[][..], |s| &s.resolved_templates[..]);
    let spec = &workflow.spec;
    let whole = (spec.workflow_template_ref.as_deref())
        .filter(|_| spec.containers.is_empty())
        .and_then(|r| find(resolved, &Source::new(&r.name, r.cluster_scope)));
    let (mut steps, mut templates) = match whole {
        Some(record) => (record.spec.containers.clone(), &record.spec.templates[..]),
        None => (spec.containers.clone(), &spec.templates[..]),
    };
    let mut segments = step.split('/').peekable();
    while let Some(segment) = segments.next() {
        let name = segment.split('[').next().unwrap_or(segment);
        let call = steps.iter().find(|s| s.step_name == name)?;
        let (called, template, scope) = lookup(call, templates, resolved)?;
        if segments.peek().is_none() {
            return Some(called);
        }
        steps = inner_steps(template)?.ok()?;
        templates = scope;
    }
    None
}

/// The template `call` names, the template itself and the templates its own calls are
/// looked up in.
fn lookup<'a>(
    call: &Step,
    templates: &'a [Template],
    resolved: &'a [ResolvedTemplate],
) -> Option<(String, &'a Template, &'a [Template])> {
    if let Some(name) = call.template.as_deref() {
        let template = templates.iter().find(|t| t.name == name)?;
        return Some((name.to_string(), template, templates));
    }
    let reference = call.template_ref.as_deref()?;
    let record = find(
        resolved,
        &Source::new(&reference.name, reference.cluster_scope),
    )?;
    let scope = &record.spec.templates[..];
    let template = scope.iter().find(|t| t.name == reference.template)?;
    Some((reference.template.clone(), template, scope))
}

fn find<'a>(resolved: &'a [ResolvedTemplate], source: &Source) -> Option<&'a ResolvedTemplate> {
    resolved.iter().find(|r| r.is(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workflow(yaml: &str) -> WorkFlow {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_step_of_a_called_steps_template_names_its_own_template_not_its_step() {
        let workflow = workflow(
            r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: w}
spec:
  containers:
    - {stepName: main, template: outer}
    - {stepName: fan, template: outer, withItems: [a, b]}
    - {stepName: plain, image: busybox}
  templates:
    - name: outer
      steps:
        - - {name: broken, template: fail}
    - name: fail
      image: busybox
"#,
        );
        let of = |step: &str| called_template(&workflow, step);
        assert_eq!(of("main"), Some("outer".into()));
        assert_eq!(of("main/broken"), Some("fail".into()));
        assert_eq!(of("fan[1]/broken"), Some("fail".into()));
        assert_eq!(of("plain"), None);
        assert_eq!(of("main/absent"), None);
    }
}
