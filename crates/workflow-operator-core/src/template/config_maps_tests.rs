//! Parameters from ConfigMaps: which keys a workflow names, what reading them records, and
//! the values expansion takes from the record alone.

use std::collections::BTreeMap;

use super::config_maps::{self, NOT_READ, Read};
use super::tests::{expanded, problems, workflow};
use super::*;
use crate::crd::{IntOrExpr, WorkFlowStatus};

/// Arguments and an input from two ConfigMaps, a call's argument from a third, a template no
/// step calls naming a fourth.
const FROM_CONFIG_MAPS: &str = r#"
arguments:
  parameters:
    - {name: greeting, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
    - {name: colour, default: grey, valueFrom: {configMapKeyRef: {name: settings, key: colour}}}
templates:
  - name: say
    inputs:
      parameters:
        - {name: target, valueFrom: {configMapKeyRef: {name: people, key: who}}}
        - {name: extra, default: none}
    image: busybox:1.36
    command: [echo, "{{workflow.parameters.greeting}} {{inputs.parameters.target}} in {{workflow.parameters.colour}} ({{inputs.parameters.extra}})"]
  - name: unused
    inputs:
      parameters:
        - {name: x, valueFrom: {configMapKeyRef: {name: absent, key: x}}}
    image: busybox:1.36
containers:
  - {stepName: hello, template: say}
  - stepName: again
    template: say
    arguments:
      parameters:
        - {name: extra, valueFrom: {configMapKeyRef: {name: more, key: extra}}}
"#;

/// The ConfigMaps of the namespace `dev`: `settings` without `colour`, `people`; no `more`, no
/// `absent`.
fn namespace() -> BTreeMap<&'static str, Read> {
    let map = |pairs: &[(&str, &str)], version: &str| Read {
        data: (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        resource_version: Some(version.into()),
    };
    BTreeMap::from([
        ("settings", map(&[("greeting", "hello")], "11")),
        ("people", map(&[("who", "world")], "12")),
    ])
}

/// `workflow` with its keys read from `maps`, counting the reads.
fn resolved(mut workflow: WorkFlow, maps: &BTreeMap<&str, Read>) -> (WorkFlow, Vec<String>) {
    let mut reads = Vec::new();
    let read = |name: String| {
        reads.push(name.clone());
        std::future::ready(Ok::<_, ()>(maps.get(name.as_str()).cloned()))
    };
    {
        let reading = std::pin::pin!(config_maps::resolve(&mut workflow, read));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(done) = reading.poll(&mut context) else {
            panic!("reads that are ready at once resolve at once");
        };
        done.unwrap();
    }
    (workflow, reads)
}

#[test]
fn every_key_named_anywhere_is_missing_until_recorded_each_configmap_read_once() {
    let wf = workflow(FROM_CONFIG_MAPS);
    let missing: Vec<String> = (config_maps::missing(&wf).iter())
        .map(|k| k.describe())
        .collect();
    assert_eq!(
        missing,
        [
            r#"configmap "absent" key "x""#,
            r#"configmap "more" key "extra""#,
            r#"configmap "people" key "who""#,
            r#"configmap "settings" key "colour""#,
            r#"configmap "settings" key "greeting""#,
        ]
    );
    let (wf, reads) = resolved(wf, &namespace());
    assert_eq!(reads, ["absent", "more", "people", "settings"]);
    assert!(config_maps::missing(&wf).is_empty());
    let recorded = &wf.status.as_ref().unwrap().resolved_config_map_keys;
    let greeting = recorded.iter().find(|r| r.key == "greeting").unwrap();
    assert_eq!(greeting.value.as_deref(), Some("hello"));
    assert_eq!(greeting.resource_version.as_deref(), Some("11"));
    let colour = recorded.iter().find(|r| r.key == "colour").unwrap();
    assert_eq!(
        (colour.value.as_deref(), colour.missing.as_deref()),
        (None, Some(r#"configmap "settings" has no key "colour""#))
    );
    let more = recorded.iter().find(|r| r.name == "more").unwrap();
    assert_eq!(
        more.missing.as_deref(),
        Some(r#"configmap "more" not found in namespace "dev""#)
    );
    let (_, again) = resolved(wf, &BTreeMap::new());
    assert!(again.is_empty(), "a recorded key is never read again");
}

#[test]
fn the_values_come_from_the_record_a_missing_key_taking_the_default() {
    let (wf, _) = resolved(workflow(FROM_CONFIG_MAPS), &namespace());
    let problems = problems(&wf);
    assert_eq!(
        problems,
        [
            r#"step "again": input "extra" of template "say": takes its value from configmap "more" key "extra": configmap "more" not found in namespace "dev" (and has no default)"#
        ]
    );
    let mut wf = wf;
    wf.spec.containers.pop();
    let spec = expanded(&wf);
    assert_eq!(
        spec.containers[0].command.as_ref().unwrap()[1],
        "hello world in grey (none)"
    );
    let arguments = &spec.arguments.as_ref().unwrap().parameters;
    assert_eq!(arguments[0].value.as_deref(), Some("hello"));
    assert_eq!(arguments[1].value.as_deref(), Some("grey"));
}

#[test]
fn a_changed_configmap_changes_nothing_once_recorded() {
    let (mut wf, _) = resolved(workflow(FROM_CONFIG_MAPS), &namespace());
    wf.spec.containers.pop();
    let before = expanded(&wf);
    let mut changed = namespace();
    changed
        .get_mut("settings")
        .unwrap()
        .data
        .insert("greeting".into(), "bye".into());
    let (wf, reads) = resolved(wf, &changed);
    assert!(reads.is_empty());
    assert_eq!(expanded(&wf), before);
}

#[test]
fn a_given_value_wins_over_the_configmap_and_an_unread_key_is_said_so() {
    let mut wf = workflow(FROM_CONFIG_MAPS);
    wf.spec.arguments.as_mut().unwrap().parameters[0].value = Some("hi".into());
    wf.status = Some(WorkFlowStatus::default());
    let problems = problems(&wf);
    assert!(
        !problems.iter().any(|p| p.contains(r#""greeting""#)),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains(&format!(r#"configmap "people" key "who" {NOT_READ}"#))),
        "{problems:?}"
    );
}

#[test]
fn a_parameter_in_a_configmaps_name_is_refused() {
    let wf = workflow(
        r#"
arguments:
  parameters:
    - {name: env, value: dev}
    - {name: x, valueFrom: {configMapKeyRef: {name: "settings-{{workflow.parameters.env}}", key: x}}}
containers: [{stepName: a, image: busybox, command: [echo, "{{workflow.parameters.x}}"]}]
"#,
    );
    let problems = problems(&wf);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("a parameter in the name or key is not supported")),
        "{problems:?}"
    );
}

/// The workflow's semaphore and a template's, their limits from ConfigMap keys.
const LIMITS_FROM_CONFIG_MAPS: &str = r#"
synchronization:
  semaphores: [{name: db, limitFrom: {configMapKeyRef: {name: limits, key: db}}}]
templates:
  - name: load
    image: busybox:1.36
    synchronization:
      semaphores: [{name: api, limitFrom: {configMapKeyRef: {name: limits, key: api}}}]
containers:
  - {stepName: load, template: load}
"#;

fn limits(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, Read> {
    let data = (pairs.iter()).map(|(k, v)| (k.to_string(), v.to_string()));
    BTreeMap::from([(
        "limits",
        Read {
            data: data.collect(),
            resource_version: Some("7".into()),
        },
    )])
}

#[test]
fn a_semaphore_s_limit_is_read_once_and_kept_whatever_the_configmap_becomes() {
    let wf = workflow(LIMITS_FROM_CONFIG_MAPS);
    let missing: Vec<String> = (config_maps::missing(&wf).iter())
        .map(|k| k.describe())
        .collect();
    assert_eq!(
        missing,
        [
            r#"configmap "limits" key "api""#,
            r#"configmap "limits" key "db""#
        ]
    );
    let (wf, _) = resolved(wf, &limits(&[("db", "1"), ("api", " 3\n")]));
    let spec = expanded(&wf);
    let limit = |locks: &Option<Box<crate::crd::Synchronization>>| {
        locks.as_ref().unwrap().semaphores[0].limit.clone()
    };
    assert_eq!(limit(&spec.synchronization), Some(IntOrExpr::Num(1)));
    assert_eq!(
        limit(&spec.containers[0].synchronization),
        Some(IntOrExpr::Num(3))
    );
    let (wf, reads) = resolved(wf, &limits(&[("db", "5"), ("api", "5")]));
    assert!(reads.is_empty());
    assert_eq!(expanded(&wf), spec);
}

#[test]
fn a_semaphore_s_limit_missing_or_not_a_whole_number_fails_the_workflow_naming_it() {
    let (wf, _) = resolved(
        workflow(LIMITS_FROM_CONFIG_MAPS),
        &limits(&[("api", "two")]),
    );
    assert_eq!(
        problems(&wf),
        [
            r#"spec.synchronization.semaphores[0].limitFrom: configmap "limits" has no key "db""#,
            r#"step "load": synchronization.semaphores[0].limitFrom: configmap "limits" key "api": "two" is not a whole number of at least 1"#,
        ]
    );
    let (wf, _) = resolved(workflow(LIMITS_FROM_CONFIG_MAPS), &BTreeMap::new());
    assert!(
        problems(&wf)[0].ends_with(r#"configmap "limits" not found in namespace "dev""#),
        "{:?}",
        problems(&wf)
    );
    let (wf, _) = resolved(
        workflow(LIMITS_FROM_CONFIG_MAPS),
        &limits(&[("db", "0"), ("api", "1")]),
    );
    assert_eq!(
        problems(&wf),
        [
            r#"spec.synchronization.semaphores[0].limitFrom: configmap "limits" key "db": "0" is not a whole number of at least 1"#
        ]
    );
}

#[test]
fn a_semaphore_gives_its_limit_or_where_it_is_read_one_of_the_two() {
    let wf = workflow(
        r#"
synchronization:
  semaphores:
    - {name: a}
    - {name: b, limit: 2, limitFrom: {configMapKeyRef: {name: limits, key: b}}}
containers: [{stepName: a, image: busybox}]
"#,
    );
    let (wf, _) = resolved(wf, &limits(&[("b", "2")]));
    assert_eq!(
        problems(&wf),
        [
            "spec.synchronization.semaphores[0]: give its limit (limit) or where it is read (limitFrom)",
            "spec.synchronization.semaphores[1]: give limit or limitFrom, not both",
        ]
    );
}
