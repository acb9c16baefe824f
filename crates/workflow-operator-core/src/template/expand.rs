//! Template calls made plain steps: a step calling a container template becomes that
//! template with its own fields over it; a step calling a `dag` (or `steps`) template becomes the
//! template's steps, named `STEP/INNER` (`STEP[i]/INNER` per item when it fans out), the inner
//! roots waiting on the step's `dependsOn` and the step's dependents on the inner leaves.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::call_outputs::{self, Calls};
use super::call_policies;
use super::config_maps;
use super::fill::{Vars, fill_json, rename_outputs, shield, unshield, unshield_json};
use super::groups::inner_steps;
use super::hooks;
use super::merge::step_over_template;
use super::recursion;
use crate::crd::Step;
use crate::crd::{Parameter, ResolvedConfigMapKey, ResolvedTemplate, Source, Template};
use crate::fan_out;
use crate::outputs;
use crate::when;

/// The templates a step's `template: NAME` is looked up in: the workflow's own, or those of
/// the shared template a `templateRef` reached.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    /// The shared template, or `None` for the workflow's own.
    pub(super) origin: Option<&'a ResolvedTemplate>,
    pub(super) templates: &'a [Template],
}

/// What one step became.
enum Expanded {
    /// One step.
    Step(Box<Step>),
    /// The steps of a `dag` template (names local to the calling level), which of them
    /// the caller's dependents wait on, and the call's outputs (none when it fans out).
    Dag {
        steps: Vec<Step>,
        leaves: Vec<String>,
        outputs: Option<call_outputs::Outputs>,
    },
    /// Nothing: the problem is recorded.
    Refused,
}

/// Expands calls against `resolved` (the shared templates read for the workflow), collecting
/// every problem rather than stopping at the first.
pub(super) struct Expander<'a> {
    pub(super) resolved: &'a [ResolvedTemplate],
    /// The ConfigMap keys read for the workflow, which inputs and arguments may take.
    pub(super) config_map_keys: &'a [ResolvedConfigMapKey],
    pub(super) namespace: &'a str,
    /// `workflow.*` forms.
    pub(super) workflow: Vars,
    pub(super) problems: Vec<String>,
    /// The templates being expanded, outermost first: a call of one of them is a cycle.
    stack: Vec<String>,
    /// Whether the call of each template of `stack` has a `when`.
    guarded: Vec<bool>,
    /// The outputs of the calls among the workflow's steps, which its exit steps may read.
    top_calls: Calls,
}

impl<'a> Expander<'a> {
    pub(super) fn new(
        (resolved, config_map_keys): (&'a [ResolvedTemplate], &'a [ResolvedConfigMapKey]),
        namespace: &'a str,
        workflow: Vars,
    ) -> Self {
        Expander {
            resolved,
            config_map_keys,
            namespace,
            workflow,
            problems: Vec::new(),
            stack: Vec::new(),
            guarded: Vec::new(),
            top_calls: Calls::new(),
        }
    }

    /// The steps of one level (the workflow's `containers` or `onExit`, or a `dag`
    /// template's), calls expanded, `dependsOn` on a `dag` call rewired to its leaves. `at`
    /// prefixes the step names in problems (`linux/` inside the call `linux`).
    /// [`Expander::level`] for the workflow's own steps (or exit steps), the outermost level:
    /// the marks [`shield`] left on the references its calls pass are taken off, as no
    /// renaming follows.
    /// The workflow's steps come first: the outputs of their calls are read by exit steps.
    pub(super) fn top_level(&mut self, steps: &[Step], scope: Scope<'a>, vars: &Vars) -> Vec<Step> {
        let (mut out, calls) = self.level(steps, scope, vars, "");
        for (step, why) in call_outputs::apply(&mut out, &self.top_calls) {
            self.refuse("", &step, why);
        }
        self.top_calls.extend(calls);
        // As `filled` does for every step: a JSON round trip, only for templated workflows.
        for step in &mut out {
            let mut value = serde_json::to_value(&*step).expect("a step serialises to JSON");
            unshield_json(&mut value);
            *step = serde_json::from_value(value).expect("an unshielded step reads back");
        }
        out
    }

    /// With the outputs of its calls of `dag` templates, to which its references to them
    /// are aliased.
    pub(super) fn level(
        &mut self,
        steps: &[Step],
        scope: Scope<'a>,
        vars: &Vars,
        at: &str,
    ) -> (Vec<Step>, Calls) {
        let steps = match hooks::unfold(steps, at) {
            Ok(steps) => steps,
            Err(problems) => {
                self.problems.extend(problems);
                return (Vec::new(), Calls::new());
            }
        };
        let mut out = Vec::with_capacity(steps.len());
        let mut leaves: HashMap<String, Vec<String>> = HashMap::new();
        let mut calls = Calls::new();
        for step in steps.iter() {
            match self.step(step, scope, vars, at) {
                Expanded::Step(step) => out.push(*step),
                Expanded::Dag {
                    steps,
                    leaves: own,
                    outputs,
                } => {
                    leaves.insert(step.step_name.clone(), own);
                    if let Some(outputs) = outputs {
                        calls.insert(step.step_name.clone(), outputs);
                    }
                    out.extend(steps);
                }
                Expanded::Refused => {}
            }
        }
        for (step, why) in call_outputs::apply(&mut out, &calls) {
            self.refuse(at, &step, why);
        }
        if !leaves.is_empty() {
            for step in &mut out {
                step.depends_on = step
                    .depends_on
                    .iter()
                    .flat_map(|d| leaves.get(d).cloned().unwrap_or_else(|| vec![d.clone()]))
                    .collect();
            }
        }
        (out, calls)
    }

    fn refuse(&mut self, at: &str, step: &str, problem: impl std::fmt::Display) -> Expanded {
        self.problems
            .push(format!("step {:?}: {problem}", format!("{at}{step}")));
        Expanded::Refused
    }

    /// One step: its forms filled with `vars`, then its call (if any) expanded.
    fn step(&mut self, step: &Step, scope: Scope<'a>, vars: &Vars, at: &str) -> Expanded {
        let step = match self.filled(step, vars, at) {
            Some(step) => step,
            None => return Expanded::Refused,
        };
        let name = step.step_name.clone();
        if step.template.is_some() && step.template_ref.is_some() {
            return self.refuse(at, &name, "has both template and templateRef: call one");
        }
        let Some((template, inner_scope, key)) = self.lookup(&step, scope, at) else {
            if step.template.is_none() && step.template_ref.is_none() {
                if step.arguments.is_some() {
                    return self.refuse(
                        at,
                        &name,
                        "has arguments but calls no template (template or templateRef)",
                    );
                }
                return Expanded::Step(Box::new(step));
            }
            return Expanded::Refused;
        };
        if let Some(i) = self.stack.iter().position(|k| *k == key) {
            let guarded = step.when.is_some() || self.guarded[i + 1..].iter().any(|g| *g);
            match recursion::may_recurse(guarded, &self.stack, &key) {
                Ok(true) => {}
                Ok(false) => return Expanded::Step(Box::new(recursion::limit_step(&step, &key))),
                Err(why) => {
                    let mut cycle = self.stack[i..].to_vec();
                    cycle.push(key);
                    let cycle = cycle.join(" -> ");
                    return self.refuse(at, &name, format!("template cycle: {cycle}: {why}"));
                }
            }
        }
        self.stack.push(key);
        self.guarded.push(step.when.is_some());
        let expanded = match inner_steps(template) {
            None => self.container_call(step, template, inner_scope, at),
            Some(Ok(inner)) => self.dag_call(step, template, &inner, inner_scope, at),
            Some(Err(problem)) => self.refuse(
                at,
                &name,
                format!("template {:?}: {problem}", template.name),
            ),
        };
        self.stack.pop();
        self.guarded.pop();
        expanded
    }

    /// `step` with `vars`' forms filled in every string, each form nothing fills a problem; a
    /// `withParam` they filled with a JSON list is that list (`fan_out::param_listed`).
    fn filled(&mut self, step: &Step, vars: &Vars, at: &str) -> Option<Step> {
        let mut value = serde_json::to_value(step).expect("a step serialises to JSON");
        let mut unfilled = Vec::new();
        fill_json(&mut value, vars, &mut unfilled);
        for (form, why) in unfilled {
            self.refuse(at, &step.step_name, format!("{form}: {why}"));
        }
        match serde_json::from_value(value) {
            Ok(mut step) => {
                fan_out::param_listed(&mut step);
                Some(step)
            }
            Err(e) => {
                self.refuse(at, &step.step_name, e);
                None
            }
        }
    }

    /// The template `step` calls, the scope its own calls are looked up in, and its key for
    /// cycles; `None` when it calls none or the call does not resolve (a problem then).
    fn lookup(
        &mut self,
        step: &Step,
        scope: Scope<'a>,
        at: &str,
    ) -> Option<(&'a Template, Scope<'a>, String)> {
        let name = &step.step_name;
        if let Some(wanted) = step.template.as_deref() {
            let found = scope.templates.iter().find(|t| t.name == wanted);
            let prefix = scope
                .origin
                .map(|r| format!("{}/", describe(r)))
                .unwrap_or_default();
            if found.is_none() {
                self.refuse(
                    at,
                    name,
                    format!(
                        "template {wanted:?} not found ({})",
                        listed("templates", scope.templates.iter().map(|t| t.name.as_str()))
                    ),
                );
            }
            return found.map(|t| (t, scope, format!("{prefix}{wanted}")));
        }
        let reference = step.template_ref.as_deref()?;
        let source = Source::new(&reference.name, reference.cluster_scope);
        let Some(resolved) = self.resolved.iter().find(|r| r.is(&source)) else {
            let why = source.not_found(self.namespace);
            self.refuse(at, name, format!("templateRef: {why}"));
            return None;
        };
        let templates = &resolved.spec.templates;
        let Some(template) = templates.iter().find(|t| t.name == reference.template) else {
            self.refuse(
                at,
                name,
                format!(
                    "templateRef: {} has no template {:?} ({})",
                    source.describe(),
                    reference.template,
                    listed("templates", templates.iter().map(|t| t.name.as_str()))
                ),
            );
            return None;
        };
        let key = format!("{}/{}", source.describe(), reference.template);
        Some((
            template,
            Scope {
                origin: Some(resolved),
                templates,
            },
            key,
        ))
    }
}

/// A resolved template as kubectl names it: `workflowtemplate "ci"`.
fn describe(resolved: &ResolvedTemplate) -> String {
    format!("{} {:?}", resolved.kind.to_lowercase(), resolved.name)
}

// Where it has always been named from; it lives in `fill`, which every stage may use.
pub(super) use super::fill::listed;

impl<'a> Expander<'a> {
    /// The values of `template`'s inputs for the call `step` (with `item` when the call fans
    /// out), as `inputs.parameters.NAME` forms beside the `workflow.*` ones, for the steps of a
    /// `dag` callee when `inner`; `None` after recording what is missing or unknown.
    fn inputs(
        &mut self,
        step: &Step,
        (template, inner): (&Template, bool),
        item: Option<&Value>,
        at: &str,
    ) -> Option<Vars> {
        let declared: &[Parameter] = template.inputs.as_ref().map_or(&[], |i| &i.parameters);
        let given: &[Parameter] = step.arguments.as_deref().map_or(&[], |a| &a.parameters);
        let mut vars = self.workflow.clone();
        let mut ok = true;
        for argument in given {
            if !declared.iter().any(|d| d.name == argument.name) {
                ok = false;
                self.refuse(
                    at,
                    &step.step_name,
                    format!(
                        "argument {:?}: template {:?} has no input of that name ({})",
                        argument.name,
                        template.name,
                        listed("inputs", declared.iter().map(|d| d.name.as_str()))
                    ),
                );
            }
        }
        for input in declared {
            let value = match self.input_value(input, given, item) {
                Ok(value) => value,
                Err(unavailable) => {
                    let why = unavailable.why;
                    let why = format!(
                        "input {:?} of template {:?}: {why}",
                        input.name, template.name
                    );
                    self.refuse(at, &step.step_name, why);
                    // Only not read yet: the rest is checked with a stand-in.
                    let Some(stand_in) = unavailable.stand_in else {
                        ok = false;
                        continue;
                    };
                    Some(stand_in)
                }
            };
            let Some(value) = value else {
                ok = false;
                self.refuse(at, &step.step_name, format!("template {:?} needs input {:?}: give it in arguments.parameters (it has no default)", template.name, input.name));
                continue;
            };
            if let Err(problem) = allowed(input, &value) {
                ok = false;
                self.refuse(
                    at,
                    &step.step_name,
                    format!(
                        "input {:?} of template {:?}: {problem}",
                        input.name, template.name
                    ),
                );
            }
            // A `dag` callee's steps are renamed under the call: the caller's references in
            // the values must not be (`shield`). A container callee stays at the caller's level.
            let value = if inner { shield(&value) } else { value };
            vars.insert(format!("inputs.parameters.{}", input.name), value);
        }
        ok.then_some(vars)
    }

    /// The value of `input` for a call giving `given` (with `item` when it fans out): the
    /// argument's value, else the argument's ConfigMap key's, else the input's ConfigMap
    /// key's, else its `default`; `None` without any.
    fn input_value(
        &self,
        input: &Parameter,
        given: &[Parameter],
        item: Option<&Value>,
    ) -> Result<Option<String>, config_maps::Unavailable> {
        let argument = given.iter().find(|a| a.name == input.name);
        if let Some(value) = argument.and_then(|a| a.value.as_deref()) {
            return Ok(Some(with_item(value, item)));
        }
        let from_argument = argument.and_then(|a| config_maps::value_of(a, self.config_map_keys));
        match from_argument.or_else(|| config_maps::value_of(input, self.config_map_keys)) {
            Some(found) => found.map(Some),
            None => Ok(input.default.clone()),
        }
    }

    /// A call of a container template: the template read as a step (its forms filled with
    /// the call's inputs), then the call's own fields over it.
    fn container_call(
        &mut self,
        call: Step,
        template: &'a Template,
        scope: Scope<'a>,
        at: &str,
    ) -> Expanded {
        if template.target.is_some() || template.parallelism.is_some() {
            return self.refuse(at, &call.step_name, format!("template {:?}: target and parallelism are a dag or steps template's (a container template is one step)", template.name));
        }
        let Some(vars) = self.inputs(&call, (template, false), None, at) else {
            return Expanded::Refused;
        };
        let mut body = Value::Object(template.container.clone());
        // The template's input artifacts are its step's, filled with the call's inputs.
        if let Some(inputs) = template.inputs.as_ref().filter(|i| !i.artifacts.is_empty()) {
            body["inputs"] = serde_json::json!({ "artifacts": inputs.artifacts });
        }
        let mut unfilled = Vec::new();
        fill_json(&mut body, &vars, &mut unfilled);
        for (form, why) in unfilled {
            self.refuse(
                at,
                &call.step_name,
                format!("template {:?}: {form}: {why}", template.name),
            );
        }
        body["stepName"] = Value::from(call.step_name.clone());
        let inner: Step = match serde_json::from_value(body) {
            Ok(step) => step,
            Err(e) => {
                return self.refuse(
                    at,
                    &call.step_name,
                    format!("template {:?}: {e}", template.name),
                );
            }
        };
        if !inner.depends_on.is_empty() {
            return self.refuse(at, &call.step_name, format!("template {:?} has dependsOn: a template's steps depend on each other only inside its dag", template.name));
        }
        if inner.hooks.is_some() {
            return self.refuse(at, &call.step_name, format!("template {:?} has hooks: a step's hooks are set on the step calling the template", template.name));
        }
        let inner = if inner.template.is_some() || inner.template_ref.is_some() {
            match self.step(&inner, scope, &vars, at) {
                Expanded::Step(step) => *step,
                Expanded::Dag { .. } => {
                    return self.refuse(
                        at,
                        &call.step_name,
                        format!(
                            "template {:?} calls a dag template: call that from a dag",
                            template.name
                        ),
                    );
                }
                Expanded::Refused => return Expanded::Refused,
            }
        } else {
            inner
        };
        let mut step = step_over_template(call, inner);
        fan_out::param_listed(&mut step);
        Expanded::Step(Box::new(step))
    }

    /// A call of a `dag` (or `steps`) template: its steps per item (once without items),
    /// renamed under the call, roots after the call's `dependsOn`, each under the call's `when`.
    fn dag_call(
        &mut self,
        call: Step,
        template: &'a Template,
        dag: &[Step],
        scope: Scope<'a>,
        at: &str,
    ) -> Expanded {
        let name = call.step_name.clone();
        if let Some(problem) = container_fields_of(template) {
            return self.refuse(at, &name, problem);
        }
        if template
            .inputs
            .as_ref()
            .is_some_and(|i| !i.artifacts.is_empty())
        {
            return self.refuse(at, &name, format!("template {:?} is a dag or steps template with input artifacts, which only a container template may have: give them to its steps", template.name));
        }
        if call.hooks.is_some() {
            return self.refuse(at, &name, format!("calls dag template {:?} and has hooks: the hooks of a call of a dag or steps template are not supported yet (set them on its steps)", template.name));
        }
        if let Some(field) = container_fields_set(&call) {
            return self.refuse(at, &name, format!("calls dag template {:?} and sets {field}, which only a container step has: set it on the template's steps", template.name));
        }
        let items = match fan_out::static_items(&call) {
            Ok(items) => items,
            Err(problem) => {
                return self.refuse(
                    at,
                    &name,
                    format!("calls dag template {:?} and {problem}", template.name),
                );
            }
        };
        let runs: Vec<(String, Option<Value>)> = match items {
            None => vec![(format!("{name}/"), None)],
            Some(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (format!("{name}[{i}]/"), Some(item)))
                .collect(),
        };
        self.dag_runs(call, (template, dag), scope, at, runs)
    }

    /// The runs of a call of a `dag` template (one per item, named by their prefixes), with
    /// its `target`, its outputs resolved, its global names given and its `parallelism` held.
    fn dag_runs(
        &mut self,
        call: Step,
        (template, dag): (&'a Template, &[Step]),
        scope: Scope<'a>,
        at: &str,
        runs: Vec<(String, Option<Value>)>,
    ) -> Expanded {
        let name = call.step_name.clone();
        let declared = match call_outputs::declared_of(template) {
            Ok(declared) => declared,
            Err(why) => {
                return self.refuse(at, &name, format!("template {:?}: {why}", template.name));
            }
        };
        let fans_out = runs.len() != 1 || runs[0].1.is_some();
        let mut expanded = Vec::new();
        let mut leaves = Vec::new();
        let mut outputs = None;
        for (prefix, item) in runs {
            let Some(vars) = self.inputs(&call, (template, true), item.as_ref(), at) else {
                return Expanded::Refused;
            };
            let inner_at = format!("{at}{prefix}");
            self.check_inner_dependencies(dag, &template.name, &inner_at);
            let Some(targeted) = self.targeted(template, dag, &vars, (at, &name)) else {
                return Expanded::Refused;
            };
            let (inner, inner_calls) = self.level(&targeted, scope, &vars, &inner_at);
            if let Some(declared) = declared.as_ref().filter(|_| !fans_out) {
                match call_outputs::resolve(
                    declared,
                    (&template.name, &targeted),
                    &inner_calls,
                    &prefix,
                ) {
                    Ok(resolved) => outputs = Some(resolved),
                    Err(problems) => {
                        for problem in problems {
                            self.refuse(at, &name, problem);
                        }
                        return Expanded::Refused;
                    }
                }
            }
            // The call's `when` is decided per run: its item filled in (Argo's per-item when).
            let when = match (call.when.as_deref(), &item) {
                (Some(when), Some(item)) => match when::fill_item(when, item) {
                    Ok(filled) => Some(filled),
                    Err(why) => return self.refuse(at, &name, format!("when {when:?}: {why}")),
                },
                (when, _) => when.map(str::to_string),
            };
            let (renamed, own_leaves) = under(inner, &prefix, (&call.depends_on, when.as_deref()));
            expanded.extend(renamed);
            leaves.extend(own_leaves);
        }
        // A call that fans out has no outputs of its own here (Argo gathers its items').
        let outputs = (!fans_out).then(|| outputs.unwrap_or_default());
        self.held_to_template(template, (at, &name), expanded, leaves, outputs)
    }

    /// A call's steps with what its template says of them besides: the global names of its
    /// outputs given to the inner outputs, its `parallelism` held.
    fn held_to_template(
        &mut self,
        template: &Template,
        (at, name): (&str, &str),
        mut steps: Vec<Step>,
        leaves: Vec<String>,
        outputs: Option<call_outputs::Outputs>,
    ) -> Expanded {
        if let Some(outputs) = &outputs
            && let Err(why) = call_policies::global_names(&mut steps, outputs)
        {
            return self.refuse(at, name, format!("template {:?}: {why}", template.name));
        }
        if let Some(limit) = template.parallelism {
            let call_path = format!("{at}{name}");
            let workflow = (
                self.workflow.get("workflow.name"),
                self.workflow.get("workflow.uid"),
            );
            call_policies::limit_parallelism(&mut steps, limit, &call_path, workflow);
        }
        Expanded::Dag {
            steps,
            leaves,
            outputs,
        }
    }

    /// The steps of `dag` (the template's) that a call runs: its `target`s (filled with
    /// `vars`) and what they depend on, or all of them; `None` after recording a problem.
    fn targeted(
        &mut self,
        template: &Template,
        dag: &[Step],
        vars: &Vars,
        (at, name): (&str, &str),
    ) -> Option<Vec<Step>> {
        match call_policies::targeted(template, dag, vars) {
            Ok(steps) => Some(steps),
            Err(why) => {
                self.refuse(at, name, format!("template {:?}: {why}", template.name));
                None
            }
        }
    }

    /// Records each step of a `dag` template that depends on a step outside the template.
    fn check_inner_dependencies(&mut self, dag: &[Step], template: &str, at: &str) {
        let names: HashSet<&str> = dag.iter().map(|s| s.step_name.as_str()).collect();
        for step in dag {
            for dependency in &step.depends_on {
                if !names.contains(dependency.as_str()) {
                    self.refuse(at, &step.step_name, format!("depends on {dependency:?}, which is not a step of dag template {template:?} (its steps: {})", dag.iter().map(|s| s.step_name.as_str()).collect::<Vec<_>>().join(", ")));
                }
            }
        }
    }
}

/// `value` with `{{item}}` and `{{item.FIELD}}` filled from `item`.
fn with_item(value: &str, item: Option<&Value>) -> String {
    match item {
        Some(item) => outputs::substitute(value, |_, _| None, Some(item))
            .unwrap_or_else(|_| value.to_string()),
        None => value.to_string(),
    }
}

/// Whether `value` is one of `parameter`'s `enum` (any value when it has none).
pub(super) fn allowed(parameter: &Parameter, value: &str) -> Result<(), String> {
    if parameter.allowed.is_empty() || parameter.allowed.iter().any(|a| a == value) {
        return Ok(());
    }
    Err(format!(
        "{value:?} is not one of {}",
        parameter.allowed.join(", ")
    ))
}

/// Why `template`, a `dag` or `steps` template, may not be called: it has container fields
/// too (its own `outputs` are its callers', `call_outputs`).
fn container_fields_of(template: &Template) -> Option<String> {
    let fields: Vec<&str> = (template.container.keys().map(String::as_str))
        .filter(|k| *k != "outputs")
        .collect();
    if fields.is_empty() {
        return None;
    }
    let kind = if template.dag.is_some() {
        "dag"
    } else {
        "steps"
    };
    Some(format!(
        "template {:?} has a {kind} and container fields ({}): it is one or the other",
        template.name,
        fields.join(", ")
    ))
}

/// The first field of `call` that only a container step has, which a call of a `dag`
/// template may not set.
fn container_fields_set(call: &Step) -> Option<&'static str> {
    [
        (!call.image.is_empty(), "image"),
        (call.command.is_some(), "command"),
        (call.args.is_some(), "args"),
        (!call.env.is_empty(), "env"),
        (!call.env_from.is_empty(), "envFrom"),
        (!call.volume_mounts.is_empty(), "volumeMounts"),
        (call.working_dir.is_some(), "workingDir"),
        (call.image_pull_policy.is_some(), "imagePullPolicy"),
        (call.security_context.is_some(), "securityContext"),
        (call.resources.is_some(), "resources"),
        (call.timeout.is_some(), "timeout"),
        (call.retries.is_some(), "retries"),
    ]
    .into_iter()
    .find_map(|(set, field)| set.then_some(field))
}

/// The steps of one run of a `dag` call renamed under `prefix` (their names, `dependsOn`,
/// output references and `when`s), the roots after the call's `dependsOn` and every step under
/// its `when` (for this run); and the leaves, which the call's dependents wait on.
fn under(
    inner: Vec<Step>,
    prefix: &str,
    (depends_on, call_when): (&[String], Option<&str>),
) -> (Vec<Step>, Vec<String>) {
    let local: HashSet<String> = inner.iter().map(|s| s.step_name.clone()).collect();
    let rename = |name: &str| local.contains(name).then(|| format!("{prefix}{name}"));
    let depended: HashSet<&str> = inner
        .iter()
        .flat_map(|s| s.depends_on.iter().map(String::as_str))
        .collect();
    let leaves: Vec<String> = inner
        .iter()
        .filter(|s| !depended.contains(s.step_name.as_str()))
        .map(|s| format!("{prefix}{}", s.step_name))
        .collect();
    let steps = inner
        .iter()
        .map(|step| {
            let mut value = serde_json::to_value(step).expect("a step serialises to JSON");
            rename_texts(&mut value, &rename);
            unshield_json(&mut value);
            let mut step: Step = serde_json::from_value(value).expect("a renamed step reads back");
            step.step_name = format!("{prefix}{}", step.step_name);
            step.depends_on = if step.depends_on.is_empty() {
                depends_on.to_vec()
            } else {
                step.depends_on
                    .iter()
                    .map(|d| format!("{prefix}{d}"))
                    .collect()
            };
            step.when = match (step.when.take(), call_when) {
                (Some(own), Some(outer)) => {
                    let own = unshield(&when::rename_steps(&own, &rename));
                    Some(format!("({outer}) && ({own})").into())
                }
                (Some(own), None) => Some(unshield(&when::rename_steps(&own, &rename)).into()),
                (None, outer) => outer.map(Into::into),
            };
            step
        })
        .collect();
    (steps, leaves)
}

/// Renames the steps named in every `{{steps.NAME.outputs.KEY}}` of `value`, `when` aside.
fn rename_texts(value: &mut Value, rename: &dyn Fn(&str) -> Option<String>) {
    match value {
        Value::String(s) if s.contains("{{") => *s = rename_outputs(s, rename),
        Value::Array(list) => list.iter_mut().for_each(|v| rename_texts(v, rename)),
        Value::Object(map) => map
            .iter_mut()
            .filter(|(k, _)| *k != "when")
            .for_each(|(_, v)| rename_texts(v, rename)),
        _ => {}
    }
}
