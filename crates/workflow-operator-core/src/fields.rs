//! What each field of the workflow API means to a workflow that runs, decided once per type by
//! destructuring it whole: a field added to [`WorkFlowSpec`], [`Step`] or [`Template`] does not
//! compile until it is given a [`Field`] here, which says
//! - whether changing it starts a new run ([`Change`]): the run id (`names::run_id`) hashes
//!   exactly the fields that are part of what runs, so a limit or run control applies in place;
//! - whether the incremental planner follows a workflow that sets it ([`Follow`]): `incremental`
//!   plans in full any workflow that sets a field it does not follow, and its property test
//!   generates every field it does;
//! - for a step's field, whether it is part of what the step computes ([`Keyed`]): its default
//!   cache key (`cache::key_of`) holds exactly those, so a cached result is never another
//!   step's (a script's edited `source`, an output added).
//!
//! docs/api.md's "What a change does" lists the same decision, and a test holds the two
//! together. A template is expanded into steps before the run is hashed, so its fields are part
//! of the run through the steps they become ([`Change::Expanded`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use k8s_openapi::api::core::v1::{Affinity, Probe, Toleration};

use crate::crd::{
    DEFAULT_MAX_STEP_TIMEOUT, DEFAULT_START_TIMEOUT, Step, SuspendStep, Template, WorkFlowSpec,
};

/// What changing a field does to a workflow that runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Part of what runs, hashed into the run id even when unset: the first release's fields,
    /// whose place in the hash is fixed.
    Run,
    /// Part of what runs, hashed only when set: a workflow that leaves it unset keeps the run id
    /// it had before the field existed, so an upgrade does not start it again.
    RunWhenSet,
    /// Part of what runs through the steps it expands to (templates, parameters), which are
    /// hashed once expanded.
    Expanded,
    /// A limit on the same work, run control or clean-up: applies to the running workflow.
    InPlace,
}

impl Change {
    /// Whether a change of the field starts a new run.
    pub fn starts_new_run(self) -> bool {
        !matches!(self, Change::InPlace)
    }
}

/// Whether the incremental planner follows a workflow that sets a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// It plans such a workflow exactly as the full planner does (its property test generates
    /// the field).
    Followed,
    /// A workflow that sets the field is planned in full at every pass.
    InFull,
}

/// Whether a step's field is part of what the step computes: what a cache entry stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keyed {
    /// In the cache key's first form, which `cache::key_of` writes itself (its text filled with
    /// the step's inputs).
    First,
    /// In the cache key as written, when set: a step that leaves it unset keeps its key.
    WhenSet,
    /// Not: the step's name and place, whether and how often it runs, limits, run control,
    /// where its pod is placed, what is reported of it; and every field not of a step.
    No,
}

/// One field of the API and what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// As written in a manifest.
    pub name: &'static str,
    /// Its name in the run key: the first release's keep the snake_case they were hashed with.
    pub key: &'static str,
    /// What changing it does.
    pub change: Change,
    /// Whether the incremental planner follows it.
    pub follow: Follow,
    /// Whether it is in a step's default cache key.
    pub keyed: Keyed,
}

impl Field {
    /// The field, part of what a step computes as `keyed` says.
    const fn keyed(self, keyed: Keyed) -> Field {
        Field { keyed, ..self }
    }
}

use Change::{Expanded, InPlace, Run, RunWhenSet};
use Follow::{Followed, InFull};
use Keyed::{First, WhenSet};

const fn field(name: &'static str, change: Change, follow: Follow) -> Field {
    Field {
        name,
        key: name,
        change,
        follow,
        keyed: Keyed::No,
    }
}

/// A field of the first release, hashed under its old key.
const fn seed(name: &'static str, key: &'static str) -> Field {
    Field {
        name,
        key,
        change: Run,
        follow: Followed,
        keyed: Keyed::No,
    }
}

/// Reads the fields of a value, each with what it means, its value and whether it is set
/// (differs from its default).
pub trait Visitor {
    /// One field that is not a list of steps.
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, value: &T, set: bool);
    /// A list of steps (`containers`, `onExit`).
    fn steps(&mut self, field: &Field, steps: &[Step]);
}

/// Whether a value differs from its type's default (absent, empty, false, zero).
pub trait IsSet {
    /// True when it does.
    fn is_set(&self) -> bool;
}

impl<T> IsSet for Option<T> {
    fn is_set(&self) -> bool {
        self.is_some()
    }
}

impl<T> IsSet for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}

impl<K, T> IsSet for BTreeMap<K, T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}

impl IsSet for String {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }
}

impl IsSet for bool {
    fn is_set(&self) -> bool {
        *self
    }
}

impl IsSet for i32 {
    fn is_set(&self) -> bool {
        *self != 0
    }
}

/// Visits `value` as `field`, set when it differs from its default.
fn visit<V: Visitor, T: Serialize + IsSet>(v: &mut V, field: &Field, value: &T) {
    v.field(field, value, value.is_set());
}

/// The fields of a step, in the order the run key has always written the first release's.
pub fn visit_step<V: Visitor>(step: &Step, v: &mut V) {
    let Step {
        step_name,
        image,
        command,
        depends_on,
        args,
        env,
        env_from,
        volume_mounts,
        working_dir,
        image_pull_policy,
        security_context,
        resources,
        timeout,
        retries,
        continue_on,
        retry_strategy,
        synchronization,
        cache,
        when,
        with_items,
        with_param,
        with_sequence,
        template,
        template_ref,
        arguments,
        source,
        outputs,
        inputs,
        init_containers,
        sidecars,
        interactive,
        daemon,
        readiness_probe,
        suspend,
        fail,
        http,
        resource,
        node_selector,
        tolerations,
        affinity,
        pod_spec_patch,
        metrics,
        hooks,
    } = step;
    // Dependencies as a set: their order, and a name listed twice, do not change what runs.
    let mut dependencies: Vec<&str> = depends_on.iter().map(String::as_str).collect();
    dependencies.sort_unstable();
    dependencies.dedup();
    visit(v, &seed("stepName", "name"), step_name);
    visit(v, &seed("image", "image").keyed(First), image);
    visit(v, &seed("command", "command").keyed(First), command);
    visit(v, &seed("args", "args").keyed(First), args);
    visit(v, &seed("env", "env").keyed(First), env);
    visit(v, &seed("dependsOn", "depends_on"), &dependencies);
    visit(v, &seed("resources", "resources"), resources);
    let since = |name, key, keyed| Field {
        key,
        ..field(name, RunWhenSet, Followed).keyed(keyed)
    };
    visit(v, &since("envFrom", "env_from", WhenSet), env_from);
    visit(
        v,
        &since("volumeMounts", "volume_mounts", First),
        volume_mounts,
    );
    visit(v, &since("workingDir", "working_dir", First), working_dir);
    let pull = since("imagePullPolicy", "image_pull_policy", Keyed::No);
    visit(v, &pull, image_pull_policy);
    let security = since("securityContext", "security_context", WhenSet);
    visit(v, &security, security_context);
    // A `when` and a fan-out are decided with upstream outputs, which the full planner reads.
    let decided = |name, key| Field {
        key,
        ..field(name, RunWhenSet, InFull)
    };
    visit(v, &decided("when", "when"), when);
    visit(v, &decided("withItems", "with_items"), with_items);
    visit(v, &decided("withParam", "with_param"), with_param);
    visit(v, &decided("withSequence", "with_sequence"), with_sequence);
    // What the step's pod runs besides its container.
    let computes = |name, follow| field(name, RunWhenSet, follow).keyed(WhenSet);
    visit(v, &computes("source", Followed), source);
    visit(v, &computes("initContainers", Followed), init_containers);
    visit(v, &computes("sidecars", Followed), sidecars);
    // Artifacts and outputs run the step under the agent, and are read by the full planner; an
    // interactive step's entry is the full planner's; a cache hit is decided behind a gate.
    visit(v, &computes("inputs", InFull), inputs);
    visit(v, &computes("outputs", InFull), outputs);
    visit(v, &field("interactive", RunWhenSet, InFull), interactive);
    visit(v, &field("cache", RunWhenSet, InFull), cache);
    let pod = (node_selector, tolerations, affinity, pod_spec_patch);
    visit_argo_kinds(v, (suspend, fail, daemon, readiness_probe), pod);
    // An HTTP step's Job is built alike by both planners, but its kind is left to the full one
    // until the incremental planner's property test generates it.
    visit(v, &computes("http", InFull), http);
    // Likewise a resource step's.
    visit(v, &computes("resource", InFull), resource);
    // Gone once the templates are expanded: the step is then what they made of it.
    visit(v, &field("template", Expanded, Followed), template);
    visit(v, &field("templateRef", Expanded, Followed), template_ref);
    visit(v, &field("arguments", Expanded, Followed), arguments);
    // Limits on the same work.
    visit(v, &field("timeout", InPlace, Followed), timeout);
    visit(v, &field("retries", InPlace, Followed), retries);
    visit(v, &field("continueOn", InPlace, Followed), continue_on);
    visit(v, &field("retryStrategy", InPlace, InFull), retry_strategy);
    let locks = field("synchronization", InPlace, InFull);
    visit(v, &locks, synchronization);
    // Recorded on the operator's `/metrics` when the step ends: nothing the planners read.
    visit(v, &field("metrics", InPlace, Followed), metrics);
    // Made steps of their own: the names left tell the full planner which run after the step.
    visit(v, &field("hooks", RunWhenSet, InFull), hooks);
}

/// The step fields of Argo's step kinds (`suspend`, `fail`, `daemon` and its probe) and
/// per-step pod settings.
// The fields' own types; a boxed String as on `Step` (a thin pointer, rarely set).
#[allow(clippy::type_complexity, clippy::box_collection)]
fn visit_argo_kinds<V: Visitor>(
    v: &mut V,
    (suspend, fail, daemon, readiness_probe): (
        &Option<Box<SuspendStep>>,
        &Option<Box<String>>,
        &Option<bool>,
        &Option<Box<Probe>>,
    ),
    (node_selector, tolerations, affinity, pod_spec_patch): (
        &Option<Box<BTreeMap<String, String>>>,
        &Option<Box<Vec<Toleration>>>,
        &Option<Box<Affinity>>,
        &Option<Box<String>>,
    ),
) {
    let computes = |name| field(name, RunWhenSet, InFull).keyed(WhenSet);
    // A suspend step runs no pod; the full planner resumes it (`resume`, or its duration).
    visit(v, &computes("suspend"), suspend);
    // A failing step's Job is born failed: the full planner reads it, as any failure.
    visit(v, &computes("fail"), fail);
    // A daemon's readiness, its IP and its stop at the end are the full planner's.
    visit(v, &computes("daemon"), daemon);
    visit(v, &computes("readinessProbe"), readiness_probe);
    // Where and how the step's pod runs, as Argo's template sets it (`crd::step_pod`): part
    // of the Job, built alike by both planners, but left to the full one until its property
    // test generates them.
    let pod = |name, key| Field {
        key,
        ..field(name, RunWhenSet, InFull)
    };
    visit(v, &pod("nodeSelector", "node_selector"), node_selector);
    visit(v, &pod("tolerations", "tolerations"), tolerations);
    visit(v, &pod("affinity", "affinity"), affinity);
    // A patch may change the container itself, where the others only place the pod.
    let patch = pod("podSpecPatch", "pod_spec_patch").keyed(WhenSet);
    visit(v, &patch, pod_spec_patch);
}

/// The fields of a workflow's spec; the run key's in the order it has always written them.
pub fn visit_spec<V: Visitor>(spec: &WorkFlowSpec, v: &mut V) {
    let WorkFlowSpec {
        max_step_timeout,
        containers,
        arguments,
        templates,
        workflow_template_ref,
        parallelism,
        fail_fast,
        active_deadline_seconds,
        synchronization,
        pod_template,
        pod_spec_patch,
        start_timeout,
        suspend,
        shutdown,
        retry,
        ttl_seconds_after_finished,
        pod_cleanup,
        on_exit,
        workspace,
        runs,
        priority,
        queue_name,
        priority_class_name,
        queue_timeout,
        queue_scope,
        resources,
        managed_by,
        artifact_repository,
        artifact_gc,
        interactive,
        rules,
        metrics,
        hooks,
    } = spec;
    v.steps(&seed("containers", "steps"), containers);
    let pod = Field {
        key: "pod_template",
        ..field("podTemplate", RunWhenSet, Followed)
    };
    visit(v, &pod, pod_template);
    // Every step's pod patched, as a step's own `podSpecPatch` (`visit_argo_kinds`): part of
    // each Job, built alike by both planners, left to the full one as the step's is.
    let patch = Field {
        key: "pod_spec_patch",
        ..field("podSpecPatch", RunWhenSet, InFull)
    };
    visit(v, &patch, pod_spec_patch);
    let exit = Field {
        key: "on_exit",
        ..field("onExit", RunWhenSet, InFull)
    };
    v.steps(&exit, on_exit);
    visit(v, &field("workspace", RunWhenSet, Followed), workspace);
    // One run, said or not, is the same run; repeated runs have a Job per step and run.
    let repeated = runs.filter(|&n| n != 1);
    visit(v, &field("runs", RunWhenSet, InFull), &repeated);
    visit(v, &field("interactive", RunWhenSet, InFull), interactive);
    visit(v, &field("arguments", Expanded, Followed), arguments);
    visit(v, &field("templates", Expanded, Followed), templates);
    // Expanded into steps and exit steps, which the full planner runs.
    visit(v, &field("hooks", Expanded, InFull), hooks);
    let whole = field("workflowTemplateRef", Expanded, Followed);
    visit(v, &whole, workflow_template_ref);
    let most = field("maxStepTimeout", InPlace, Followed);
    v.field(
        &most,
        max_step_timeout,
        *max_step_timeout != DEFAULT_MAX_STEP_TIMEOUT,
    );
    let start = field("startTimeout", InPlace, Followed);
    v.field(
        &start,
        start_timeout,
        *start_timeout != DEFAULT_START_TIMEOUT,
    );
    visit(v, &field("parallelism", InPlace, Followed), parallelism);
    v.field(&field("failFast", InPlace, Followed), fail_fast, !fail_fast);
    // The workflow's deadline is the full planner's timer; its locks and rules read every Job.
    let deadline = field("activeDeadlineSeconds", InPlace, InFull);
    visit(v, &deadline, active_deadline_seconds);
    visit(
        v,
        &field("synchronization", InPlace, InFull),
        synchronization,
    );
    visit(v, &field("rules", InPlace, InFull), rules);
    // Recorded on the operator's `/metrics` when the workflow ends: nothing the planners read.
    visit(v, &field("metrics", InPlace, Followed), metrics);
    // Run control: the full planner decides what a suspended, stopping or retried run does.
    visit(v, &field("suspend", InPlace, InFull), suspend);
    visit(v, &field("shutdown", InPlace, InFull), shutdown);
    visit(v, &field("retry", InPlace, InFull), retry);
    // Clean-up, after the run.
    let ttl = field("ttlSecondsAfterFinished", InPlace, Followed);
    visit(v, &ttl, ttl_seconds_after_finished);
    visit(v, &field("podCleanup", InPlace, Followed), pod_cleanup);
    visit(v, &field("artifactGC", InPlace, Followed), artifact_gc);
    // Where artifacts go: read once, when the first step needing it is planned, and recorded.
    let repository = field("artifactRepository", InPlace, Followed);
    visit(v, &repository, artifact_repository);
    // Queueing: when steps start, not what they are.
    visit(v, &field("priority", InPlace, Followed), priority);
    visit(v, &field("queueName", InPlace, InFull), queue_name);
    let class = field("priorityClassName", InPlace, Followed);
    visit(v, &class, priority_class_name);
    visit(v, &field("queueTimeout", InPlace, Followed), queue_timeout);
    // What Kueue admits changes how the run's Jobs are made (suspended and labelled per step,
    // or held behind one Workload): a new run, so a run never mixes the two. The Workload's
    // gate is planned in full.
    visit(v, &field("queueScope", RunWhenSet, InFull), queue_scope);
    // Read when the run's Workload is made: a change applies to the next run's.
    visit(v, &field("resources", InPlace, Followed), resources);
    // Immutable (the CRD's CEL rule); a workflow managed elsewhere is never planned here, and
    // a worker's copy (without it) keeps the manager's run id.
    visit(v, &field("managedBy", InPlace, Followed), managed_by);
}

/// The fields of a template of `spec.templates`: all expanded into the steps calling it.
pub fn visit_template<V: Visitor>(template: &Template, v: &mut V) {
    let Template {
        name,
        inputs,
        dag,
        steps,
        target,
        parallelism,
        container,
    } = template;
    visit(v, &field("name", Expanded, Followed), name);
    visit(v, &field("inputs", Expanded, Followed), inputs);
    visit(v, &field("dag", Expanded, Followed), dag);
    visit(v, &field("steps", Expanded, Followed), steps);
    // Which of a dag's steps a call becomes.
    visit(v, &field("target", Expanded, Followed), target);
    // A limit on the same work: a semaphore on each step the call becomes (their
    // `synchronization`, which applies in place).
    visit(v, &field("parallelism", InPlace, Followed), parallelism);
    // A container template's fields are a step's (but `stepName` and `dependsOn`), read as one
    // when called: each means what it means in a step.
    v.field(
        &field("(a step's fields)", Expanded, Followed),
        container,
        !container.is_empty(),
    );
}

/// The first field of `spec` (or of one of its steps) that the incremental planner does not
/// follow and that is set: the workflow is then planned in full.
pub fn unfollowed(spec: &WorkFlowSpec) -> Option<&'static str> {
    let mut found = Unfollowed(None);
    visit_spec(spec, &mut found);
    found.0
}

struct Unfollowed(Option<&'static str>);

impl Visitor for Unfollowed {
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, _: &T, set: bool) {
        if self.0.is_none() && set && field.follow == InFull {
            self.0 = Some(field.name);
        }
    }

    fn steps(&mut self, field: &Field, steps: &[Step]) {
        if self.0.is_some() {
            return;
        }
        if field.follow == InFull && !steps.is_empty() {
            self.0 = Some(field.name);
            return;
        }
        for step in steps {
            visit_step(step, self);
            if self.0.is_some() {
                return;
            }
        }
    }
}

/// The fields part of the run that differ between `old` and `new`, named as a user finds them:
/// `image` for the workflow's, `steps.NAME.FIELD` and `onExit.NAME.FIELD` for a step's,
/// `steps.NAME` for a step added or removed. In visit order, steps by name.
pub fn changed(old: &WorkFlowSpec, new: &WorkFlowSpec) -> Vec<String> {
    let (mut before, mut after) = (Values::default(), Values::default());
    visit_spec(old, &mut before);
    visit_spec(new, &mut after);
    // By path: a 10,000-step spec has some 100,000 of them.
    let old_values: HashMap<&str, &str> = (before.0.iter())
        .map(|(path, json)| (path.as_str(), json.as_str()))
        .collect();
    let new_paths: HashSet<&str> = after.0.iter().map(|(path, _)| path.as_str()).collect();
    let mut changed: Vec<String> = (after.0.iter())
        .filter(|(path, json)| old_values.get(path.as_str()) != Some(&json.as_str()))
        .map(|(path, _)| path.clone())
        .collect();
    changed.extend(
        (before.0.iter())
            .filter(|(path, _)| !new_paths.contains(path.as_str()))
            .map(|(path, _)| path.clone()),
    );
    // A step added or removed is named once, not by each of its fields.
    let whole: HashSet<String> = (changed.iter())
        .filter_map(|p| p.strip_suffix(".stepName"))
        .map(str::to_string)
        .collect();
    changed.retain(|p| (p.rsplit_once('.')).is_none_or(|(step, _)| !whole.contains(step)));
    changed.extend(whole.into_iter().collect::<BTreeSet<_>>());
    changed
}

/// The JSON of each field part of the run, by path (steps by name).
#[derive(Default)]
struct Values(Vec<(String, String)>, Option<String>);

impl Visitor for Values {
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, value: &T, set: bool) {
        if field.change.starts_new_run() && (set || field.change == Run) {
            let path = match &self.1 {
                Some(step) => format!("{step}.{}", field.name),
                None => field.name.to_string(),
            };
            let json = serde_json::to_string(value).expect("plain data serialises to JSON");
            self.0.push((path, json));
        }
    }

    fn steps(&mut self, field: &Field, steps: &[Step]) {
        let list = if field.name == "containers" {
            "steps"
        } else {
            field.name
        };
        for step in steps {
            self.1 = Some(format!("{list}.{}", step.step_name));
            visit_step(step, self);
        }
        self.1 = None;
    }
}

#[cfg(test)]
pub(crate) mod tests;
