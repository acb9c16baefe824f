//! Parameters from ConfigMaps (`valueFrom.configMapKeyRef` on a workflow's parameter, a
//! template's input or a call's argument) and semaphores' limits from them (`limitFrom`), the
//! pure part: which ConfigMap keys a workflow names that its status does not record yet
//! ([`missing`]), recording what a reader found ([`resolve`]), a parameter's value from the
//! record ([`value_of`]), and the semaphores' limits filled from it ([`fill_limits`]).
//!
//! The operator reads each key once, before any step runs, and records it in
//! `status.resolvedConfigMapKeys`, a key that is not there as well (`missing`): expanding the
//! workflow reads only the record, so a ConfigMap changed, deleted or made after the workflow
//! started does not change its run. A key named in a template no step calls is read and
//! recorded like any other; only a parameter that takes its value from a missing key, with no
//! `default`, fails the workflow. A semaphore's limit has no default: its key missing, or a
//! value that is not a whole number of at least 1, fails the workflow. Two workflows that read
//! one semaphore's key at different values each count with their own (see `locks`).

use std::collections::BTreeSet;

use crate::crd::{
    Arguments, ConfigMapKeyRef, IntOrExpr, Parameter, ResolvedConfigMapKey, Step, Synchronization,
    Template, WorkFlow, WorkFlowSpec,
};

/// Why a parameter has no value yet because its key was not read: only `validate`, which
/// reads no ConfigMap, and a CronWorkFlow's check before its run see it (the operator reads
/// every key before it expands the workflow).
pub const NOT_READ: &str = "is read when the workflow starts";

/// The ConfigMap keys `workflow` names (in its spec and the shared templates its status
/// records) that its status does not record yet: what the operator must read (and record).
pub fn missing(workflow: &WorkFlow) -> Vec<ConfigMapKeyRef> {
    let status = workflow.status.as_ref();
    let recorded = status.map_or(&[][..], |s| &s.resolved_config_map_keys[..]);
    let templates = status.map_or(&[][..], |s| &s.resolved_templates[..]);
    let mut named = BTreeSet::new();
    collect(&workflow.spec, &mut named);
    for record in templates {
        collect(&record.spec, &mut named);
    }
    named
        .into_iter()
        .filter(|key| !recorded.iter().any(|r| r.is(key)))
        .collect()
}

/// Records in `workflow`'s status each key of [`missing`], as `read` found it (`Ok(None)`: the
/// ConfigMap is not there; `Ok(Some(map))`: its `data`, and its resourceVersion). Returns how
/// many it recorded.
///
/// # Errors
/// The first error `read` gives; nothing of that key is recorded.
pub async fn resolve<E, F, Fut>(workflow: &mut WorkFlow, mut read: F) -> Result<usize, E>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Option<Read>, E>>,
{
    let wanted = missing(workflow);
    let namespace = kube::ResourceExt::namespace(workflow).unwrap_or_default();
    let mut maps: Vec<(String, Option<Read>)> = Vec::new();
    for key in &wanted {
        if !maps.iter().any(|(name, _)| *name == key.name) {
            let found = read(key.name.clone()).await?;
            maps.push((key.name.clone(), found));
        }
    }
    let status = workflow.status.get_or_insert_with(Default::default);
    for key in &wanted {
        let found = maps.iter().find(|(name, _)| *name == key.name);
        status.resolved_config_map_keys.push(record(
            key,
            found.and_then(|(_, m)| m.as_ref()),
            &namespace,
        ));
    }
    Ok(wanted.len())
}

/// A ConfigMap as read: its `data` and resourceVersion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// Its `data` (its `binaryData` is not read: a parameter is text).
    pub data: std::collections::BTreeMap<String, String>,
    /// Its resourceVersion, recorded with each key.
    pub resource_version: Option<String>,
}

/// The record of `key` from its ConfigMap (`None`: not found in `namespace`).
fn record(key: &ConfigMapKeyRef, map: Option<&Read>, namespace: &str) -> ResolvedConfigMapKey {
    let value = map.and_then(|m| m.data.get(&key.key).cloned());
    let missing = match (map, &value) {
        (_, Some(_)) => None,
        (None, None) => Some(format!(
            "configmap {:?} not found in namespace {namespace:?}",
            key.name
        )),
        (Some(_), None) => Some(format!("configmap {:?} has no key {:?}", key.name, key.key)),
    };
    ResolvedConfigMapKey {
        name: key.name.clone(),
        key: key.key.clone(),
        value,
        missing,
        resource_version: map.and_then(|m| m.resource_version.clone()),
        resolved_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        )),
    }
}

/// Why a parameter has no value from its ConfigMap key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// What to say: the ConfigMap and key, and why.
    pub why: String,
    /// What to check the rest of the workflow with when the key is only not read yet
    /// ([`NOT_READ`]): the ConfigMap and key, as a stand-in value; `None` when the key was
    /// read and is not there.
    pub stand_in: Option<String>,
}

/// The value `parameter` takes from its ConfigMap key, from `recorded`; its `default` when
/// the key was not there. `None` when it names no key.
///
/// # Errors
/// The key was not there and there is no `default` (naming the ConfigMap and key), or it is
/// not recorded ([`NOT_READ`], with a stand-in value).
pub fn value_of(
    parameter: &Parameter,
    recorded: &[ResolvedConfigMapKey],
) -> Option<Result<String, Unavailable>> {
    let key = &parameter.value_from.as_ref()?.config_map_key_ref;
    let Some(record) = recorded.iter().find(|r| r.is(key)) else {
        return Some(Err(Unavailable {
            why: format!("{} {NOT_READ}", key.describe()),
            stand_in: Some(format!("({})", key.describe())),
        }));
    };
    Some(match (&record.value, &parameter.default) {
        (Some(value), _) => Ok(value.clone()),
        (None, Some(default)) => Ok(default.clone()),
        (None, None) => Err(Unavailable {
            why: format!(
                "takes its value from {}: {} (and has no default)",
                key.describe(),
                record.missing.as_deref().unwrap_or("not there")
            ),
            stand_in: None,
        }),
    })
}

/// What is wrong with the ConfigMap keys `spec` names as written: a `{{...}}` form in a name
/// or key (the key is read before anything is filled).
pub fn problems(spec: &WorkFlowSpec) -> Vec<String> {
    let mut named = BTreeSet::new();
    collect(spec, &mut named);
    named
        .into_iter()
        .filter(|k| k.name.contains("{{") || k.key.contains("{{"))
        .map(|k| {
            format!(
                "{}: valueFrom.configMapKeyRef: a parameter in the name or key is not supported (the key is read before parameters are filled)",
                k.describe()
            )
        })
        .collect()
}

/// Every ConfigMap key `spec` names: its parameters', its templates' inputs', the arguments
/// of its steps and of its templates' steps, and its semaphores' limits ([`limit_keys`]).
fn collect(spec: &WorkFlowSpec, named: &mut BTreeSet<ConfigMapKeyRef>) {
    let mut add = |parameters: &[Parameter]| {
        named.extend(
            parameters
                .iter()
                .filter_map(|p| Some(p.value_from.as_ref()?.config_map_key_ref.clone())),
        );
    };
    fn of(arguments: Option<&Arguments>) -> &[Parameter] {
        arguments.map_or(&[], |a| &a.parameters)
    }
    add(of(spec.arguments.as_deref()));
    for step in spec.containers.iter().chain(&spec.on_exit) {
        add(of(step.arguments.as_deref()));
    }
    for template in &spec.templates {
        add(template.inputs.as_ref().map_or(&[], |i| &i.parameters));
        for arguments in template_arguments(template) {
            add(&arguments.parameters);
        }
    }
    named.extend(limit_keys(spec));
}

/// The ConfigMap keys the semaphores of `spec` take their limits from: the workflow's, its
/// steps', and its templates' and their steps' (as written).
pub fn limit_keys(spec: &WorkFlowSpec) -> Vec<ConfigMapKeyRef> {
    let steps = spec.containers.iter().chain(&spec.on_exit);
    let own = (spec.synchronization.iter()).chain(steps.filter_map(|s| s.synchronization.as_ref()));
    let templates = spec.templates.iter();
    let written = templates.flat_map(|t| {
        let steps = t
            .dag
            .iter()
            .flatten()
            .chain(t.steps.iter().flatten().flatten());
        std::iter::once(&t.container).chain(steps)
    });
    let written: Vec<Synchronization> = written
        .filter_map(|s| serde_json::from_value(s.get("synchronization")?.clone()).ok())
        .collect();
    let all = own.map(|s| &**s).chain(&written);
    (all.flat_map(|s| &s.semaphores))
        .filter_map(|s| Some(s.limit_from.as_ref()?.config_map_key_ref.clone()))
        .collect()
}

/// [`fill_limits`] of the workflow's own locks (`own`) and of each of its `steps`' locks.
pub fn fill_all_limits<'s>(
    own: Option<&mut Synchronization>,
    steps: impl IntoIterator<Item = &'s mut Step>,
    recorded: &[ResolvedConfigMapKey],
    problems: &mut Vec<String>,
) {
    fill_limits(own, "spec.synchronization", recorded, problems);
    for step in steps {
        let at = format!("step {:?}: synchronization", step.step_name);
        fill_limits(step.synchronization.as_deref_mut(), &at, recorded, problems);
    }
}

/// Fills the limit of each semaphore of `locks` (at `at`: `spec.synchronization`,
/// `step "load": synchronization`) that takes it from a ConfigMap key, from `recorded`.
/// Problems: a semaphore with both or neither of `limit` and `limitFrom`; a key not there, or
/// whose value is not a whole number of at least 1; a key not read yet ([`NOT_READ`]).
pub fn fill_limits(
    locks: Option<&mut Synchronization>,
    at: &str,
    recorded: &[ResolvedConfigMapKey],
    problems: &mut Vec<String>,
) {
    let semaphores = locks.into_iter().flat_map(|l| l.semaphores.iter_mut());
    for (i, semaphore) in semaphores.enumerate() {
        let at = format!("{at}.semaphores[{i}]");
        let Some(from) = &semaphore.limit_from else {
            if semaphore.limit.is_none() {
                problems.push(format!(
                    "{at}: give its limit (limit) or where it is read (limitFrom)"
                ));
            }
            continue;
        };
        let key = &from.config_map_key_ref;
        if semaphore.limit.is_some() {
            problems.push(format!("{at}: give limit or limitFrom, not both"));
            continue;
        }
        let Some(record) = recorded.iter().find(|r| r.is(key)) else {
            problems.push(format!("{at}.limitFrom: {} {NOT_READ}", key.describe()));
            continue;
        };
        let value = record.value.as_deref();
        match value.map(|v| v.trim().parse::<i32>()) {
            Some(Ok(n)) if n >= 1 => semaphore.limit = Some(IntOrExpr::Num(n)),
            Some(_) => problems.push(format!(
                "{at}.limitFrom: {}: {:?} is not a whole number of at least 1",
                key.describe(),
                value.unwrap_or_default()
            )),
            None => problems.push(format!(
                "{at}.limitFrom: {}",
                record.missing.as_deref().unwrap_or("not there")
            )),
        }
    }
}

/// The `arguments` of a template's steps (its `dag`'s, its `steps`'), kept as written.
fn template_arguments(template: &Template) -> impl Iterator<Item = Arguments> + '_ {
    let steps = template.dag.iter().flatten();
    let groups = template.steps.iter().flatten().flatten();
    steps
        .chain(groups)
        .filter_map(|s| s.get("arguments"))
        .filter_map(|a| serde_json::from_value::<Arguments>(a.clone()).ok())
}
