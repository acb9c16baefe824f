use std::borrow::Cow;

use super::*;
use crate::crd::WorkFlowStatus;

/// A workflow as read from the API server (namespace `dev`), its spec from YAML.
pub(super) fn workflow(spec: &str) -> WorkFlow {
    let spec: WorkFlowSpec = serde_yaml::from_str(spec).unwrap();
    let mut workflow = WorkFlow::new("release-x", spec);
    workflow.metadata.namespace = Some("dev".into());
    workflow.metadata.uid = Some("u-1".into());
    workflow
}

/// A shared template as the operator recorded it.
fn recorded(kind: &str, name: &str, spec: &str) -> ResolvedTemplate {
    ResolvedTemplate {
        kind: kind.into(),
        name: name.into(),
        uid: None,
        resource_version: Some("7".into()),
        resolved_at: None,
        spec: serde_yaml::from_str(spec).unwrap(),
    }
}

fn with_records(mut workflow: WorkFlow, records: Vec<ResolvedTemplate>) -> WorkFlow {
    workflow.status = Some(WorkFlowStatus {
        resolved_templates: records,
        ..WorkFlowStatus::default()
    });
    workflow
}

pub(super) fn expanded(workflow: &WorkFlow) -> WorkFlowSpec {
    expand(workflow)
        .unwrap_or_else(|p| panic!("{p}"))
        .into_owned()
}

pub(super) fn problems(workflow: &WorkFlow) -> Vec<String> {
    expand(workflow).unwrap_err().0
}

pub(super) fn names_and_deps(spec: &WorkFlowSpec) -> Vec<(String, Vec<String>)> {
    spec.containers
        .iter()
        .map(|s| (s.step_name.clone(), s.depends_on.clone()))
        .collect()
}

/// `(step, its dependencies)` written as literals, to compare with [`names_and_deps`].
pub(super) fn pairs(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    list.iter()
        .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// A release workflow using every part of templates: parameters, a container template and a
/// `dag` template called twice.
const RELEASE: &str = r#"
arguments:
  parameters:
    - {name: version}
    - {name: target, value: linux, enum: [linux, darwin, windows]}
templates:
  - name: say
    inputs:
      parameters: [{name: message}, {name: times, default: "1"}]
    image: busybox:1.36
    command: [sh, -c, 'for i in $(seq {{inputs.parameters.times}}); do echo "{{inputs.parameters.message}}"; done']
  - name: pipeline
    inputs: {parameters: [{name: platform}]}
    dag:
      - {stepName: build, template: say, arguments: {parameters: [{name: message, value: "build {{inputs.parameters.platform}}"}]}}
      - {stepName: test, template: say, dependsOn: [build], arguments: {parameters: [{name: message, value: "test {{inputs.parameters.platform}}"}]}}
containers:
  - stepName: hello
    template: say
    arguments: {parameters: [{name: message, value: "releasing {{workflow.parameters.version}}"}]}
  - {stepName: linux, template: pipeline, dependsOn: [hello], arguments: {parameters: [{name: platform, value: linux}]}}
  - {stepName: other, template: pipeline, dependsOn: [hello], arguments: {parameters: [{name: platform, value: "{{workflow.parameters.target}}"}]}}
  - {stepName: publish, image: alpine, command: [echo, "{{workflow.name}}"], dependsOn: [linux, other]}
"#;

fn release(version: Option<&str>) -> WorkFlow {
    let mut wf = workflow(RELEASE);
    if let Some(version) = version {
        wf.spec.arguments.as_mut().unwrap().parameters[0].value = Some(version.into());
    }
    wf
}

#[test]
fn a_dag_template_call_becomes_its_steps_named_under_the_call() {
    let spec = expanded(&release(Some("1.2")));
    assert_eq!(
        names_and_deps(&spec),
        [
            ("hello".to_string(), vec![]),
            ("linux/build".to_string(), vec!["hello".to_string()]),
            ("linux/test".to_string(), vec!["linux/build".to_string()]),
            ("other/build".to_string(), vec!["hello".to_string()]),
            ("other/test".to_string(), vec!["other/build".to_string()]),
            (
                "publish".to_string(),
                vec!["linux/test".to_string(), "other/test".to_string()]
            ),
        ]
    );
    assert!(spec.templates.is_empty());
    let command = |name: &str| {
        spec.containers
            .iter()
            .find(|s| s.step_name == name)
            .unwrap()
            .command
            .clone()
            .unwrap()[2]
            .clone()
    };
    assert_eq!(
        command("hello"),
        r#"for i in $(seq 1); do echo "releasing 1.2"; done"#
    );
    assert_eq!(
        command("other/test"),
        r#"for i in $(seq 1); do echo "test linux"; done"#
    );
    let publish = spec.containers.last().unwrap();
    assert_eq!(publish.command.as_ref().unwrap()[1], "release-x");
    assert_eq!(spec.containers[0].image, "busybox:1.36");
}

#[test]
fn a_required_parameter_without_a_value_and_a_value_outside_its_enum_are_both_named() {
    let mut wf = release(None);
    wf.spec.arguments.as_mut().unwrap().parameters[1].value = Some("solaris".into());
    let found = problems(&wf);
    assert!(
        found
            .iter()
            .any(|p| p.contains(r#""version" has no value"#)
                && p.contains("submit -p version=VALUE")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains(r#""solaris" is not one of linux, darwin, windows"#)),
        "{found:?}"
    );
}

#[test]
fn every_problem_is_named_with_its_place() {
    let wf = workflow(
        r#"
templates:
  - {name: build, image: x}
  - {name: test, image: x, inputs: {parameters: [{name: who}]}}
  - {name: a, dag: [{stepName: one, template: b}]}
  - {name: b, dag: [{stepName: two, template: a}]}
  - {name: leaky, dag: [{stepName: in, template: build, dependsOn: [outside]}]}
containers:
  - {stepName: b, template: biuld}
  - {stepName: c, template: test}
  - {stepName: d, template: build, arguments: {parameters: [{name: nope, value: "1"}]}}
  - {stepName: e, image: "repo/{{tag}}"}
  - {stepName: f, image: x, command: ["{{workflow.parameters.missing}}"]}
  - {stepName: g, template: a}
  - {stepName: h, template: leaky}
  - {stepName: i}
"#,
    );
    let found = problems(&wf);
    let has = |needle: &str| {
        assert!(
            found.iter().any(|p| p.contains(needle)),
            "{needle} not in {found:#?}"
        )
    };
    has(r#"step "b": template "biuld" not found (templates: build, test, a, b, leaky)"#);
    has(r#"step "c": template "test" needs input "who""#);
    has(
        r#"step "d": argument "nope": template "build" has no input of that name (there are no inputs)"#,
    );
    has(r#"step "e": {{tag}}: not a form the operator knows"#);
    has(r#"step "f": {{workflow.parameters.missing}}: the workflow declares no parameters"#);
    has("template cycle: a -> b -> a");
    has(r#"step "h/in": depends on "outside", which is not a step of dag template "leaky""#);
    has(r#"step "i": image: required"#);
    let about_missing = found
        .iter()
        .filter(|p| p.contains("workflow.parameters.missing"))
        .count();
    assert_eq!(about_missing, 1, "once: {found:#?}");
}

#[test]
fn a_dag_template_called_with_items_runs_once_per_item_and_reads_its_inner_outputs() {
    let wf = workflow(
        r#"
templates:
  - name: per-platform
    inputs: {parameters: [{name: os}]}
    dag:
      - {stepName: build, image: "builder:{{inputs.parameters.os}}", command: [sh, -c, "echo sha=1 > $WORKFLOW_OUTPUTS"]}
      - {stepName: test, image: x, dependsOn: [build], command: [echo, "{{steps.build.outputs.sha}}"], when: 'steps.build.outputs.sha == "1"'}
containers:
  - {stepName: start, image: x}
  - {stepName: each, template: per-platform, dependsOn: [start], withItems: [linux, {os: darwin}], arguments: {parameters: [{name: os, value: "{{item}}"}]}}
  - {stepName: done, image: x, dependsOn: [each]}
"#,
    );
    let spec = expanded(&wf);
    let names: Vec<&str> = spec
        .containers
        .iter()
        .map(|s| s.step_name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "start",
            "each[0]/build",
            "each[0]/test",
            "each[1]/build",
            "each[1]/test",
            "done"
        ]
    );
    assert_eq!(spec.containers[1].image, "builder:linux");
    assert_eq!(spec.containers[3].image, r#"builder:{"os":"darwin"}"#);
    assert_eq!(
        spec.containers[2].command.as_ref().unwrap()[1],
        "{{steps.each[0]/build.outputs.sha}}"
    );
    assert_eq!(
        spec.containers[2].when.as_deref(),
        Some(r#"steps["each[0]/build"].outputs.sha == "1""#)
    );
    assert_eq!(
        spec.containers[5].depends_on,
        ["each[0]/test", "each[1]/test"]
    );
    // The expanded workflow is a valid plan input: its data flow checks.
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
}

#[test]
fn a_step_over_a_container_template_overrides_and_adds() {
    let wf = workflow(
        r#"
templates:
  - {name: t, image: x, command: [a], timeout: 5, env: [{name: A, value: "1"}, {name: B, value: "2"}]}
containers:
  - {stepName: s, template: t, timeout: 9, env: [{name: B, value: "3"}, {name: C, value: "4"}]}
"#,
    );
    let step = expanded(&wf).containers.remove(0);
    assert_eq!(step.timeout, Some(9.into()));
    assert_eq!(step.command.as_deref(), Some(&["a".to_string()][..]));
    let env: Vec<(String, String)> = step
        .env
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap()))
        .collect();
    assert_eq!(
        env,
        [
            ("A".into(), "1".into()),
            ("B".into(), "3".into()),
            ("C".into(), "4".into())
        ]
    );
}

#[test]
fn a_workflow_takes_a_shared_template_whole_with_its_own_arguments_and_fields_over_it() {
    let own = workflow(
        r#"
workflowTemplateRef: {name: ci}
parallelism: 2
arguments: {parameters: [{name: branch, value: dev}]}
"#,
    );
    let ci = recorded(
        NAMESPACED_KIND,
        "ci",
        r#"
parallelism: 5
maxStepTimeout: 30
arguments: {parameters: [{name: branch, value: main}, {name: depth, value: "1"}]}
containers: [{stepName: checkout, image: git, command: [echo, "{{workflow.parameters.branch}} {{workflow.parameters.depth}}"]}]
"#,
    );
    assert_eq!(missing(&own), [Source::new("ci", false)]);
    let found = problems(&own);
    assert_eq!(
        found,
        [r#"workflowTemplateRef: workflowtemplate "ci" not found in namespace "dev""#]
    );
    let wf = with_records(own, vec![ci]);
    assert!(missing(&wf).is_empty());
    let spec = expanded(&wf);
    assert_eq!(spec.parallelism, Some(2.into()));
    assert_eq!(spec.max_step_timeout, 30);
    assert_eq!(spec.containers[0].command.as_ref().unwrap()[1], "dev 1");

    let mut refused = wf.clone();
    refused.spec.containers = vec![crate::testing::step("mine", &[])];
    refused.spec.arguments.as_mut().unwrap().parameters[0].name = "brnach".into();
    let found = problems(&refused);
    assert!(
        found.iter().any(|p| p
            .starts_with("spec.containers: a workflow with workflowTemplateRef has no containers")),
        "{found:?}"
    );
    assert!(found.iter().any(|p| p.contains(r#""brnach": workflowtemplate "ci" declares no such parameter (parameters: branch, depth)"#)), "{found:?}");
}

#[test]
fn a_template_ref_calls_a_template_of_a_cluster_template_and_its_own_calls_stay_inside_it() {
    let own = workflow(
        r#"
containers:
  - {stepName: greet, templateRef: {name: lib, template: hello, clusterScope: true}, arguments: {parameters: [{name: who, value: you}]}}
"#,
    );
    assert_eq!(missing(&own), [Source::new("lib", true)]);
    assert_eq!(
        problems(&own),
        [r#"step "greet": templateRef: clusterworkflowtemplate "lib" not found"#]
    );
    let lib = recorded(
        CLUSTER_KIND,
        "lib",
        r#"
templates:
  - {name: base, image: busybox, command: [echo]}
  - {name: hello, inputs: {parameters: [{name: who}]}, template: base, args: ["hi {{inputs.parameters.who}}"]}
"#,
    );
    let spec = expanded(&with_records(own, vec![lib]));
    let step = &spec.containers[0];
    assert_eq!(
        (step.image.as_str(), step.args.as_deref()),
        ("busybox", Some(&["hi you".to_string()][..]))
    );
}

#[test]
fn a_plain_workflow_is_borrowed_as_it_is() {
    let wf = workflow(
        "containers: [{stepName: a, image: x, command: [echo, '{{item}}'], withItems: [1]}]",
    );
    assert!(matches!(expand(&wf), Ok(Cow::Borrowed(_))));
}

#[test]
fn a_when_reads_the_workflow_parameters_after_expansion() {
    let wf = workflow(
        r#"
arguments: {parameters: [{name: deploy, value: "no"}]}
containers:
  - {stepName: a, image: x}
  - {stepName: b, image: x, dependsOn: [a], when: 'workflow.parameters.deploy == "yes"'}
"#,
    );
    let spec = expanded(&wf);
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
    assert!(compiled.flow.when.contains_key(&1));
}

#[test]
fn a_misspelt_field_of_a_dag_templates_step_is_refused_naming_it() {
    let wf = workflow(
        r#"
templates:
  - {name: t, dag: [{stepName: x, image: busybox, comand: [echo]}]}
containers:
  - {stepName: s, template: t}
"#,
    );
    let found = problems(&wf);
    assert!(
        found[0]
            .starts_with(r#"step "s": template "t": step "x": unknown field comand: a step has "#),
        "{found:?}"
    );
}

/// 100 calls, in a chain, of a `dag` template of 100 steps: 10,000 steps.
fn hundred_by_hundred() -> String {
    let inner: Vec<String> = (0..100)
        .map(|i| {
            let depends = if i == 0 { String::new() } else { format!("s{}", i - 1) };
            format!("{{stepName: s{i}, image: busybox, command: [echo, '{{{{inputs.parameters.n}}}}'], dependsOn: [{depends}]}}")
        })
        .collect();
    let calls: Vec<String> = (0..100)
        .map(|i| {
            let depends = if i == 0 { String::new() } else { format!("call-{}", i - 1) };
            format!("{{stepName: call-{i}, template: block, dependsOn: [{depends}], arguments: {{parameters: [{{name: n, value: '{i}'}}]}}}}")
        })
        .collect();
    format!(
        "templates: [{{name: block, inputs: {{parameters: [{{name: n}}]}}, dag: [{}]}}]\ncontainers: [{}]",
        inner.join(", "),
        calls.join(", ")
    )
}

#[test]
fn a_workflow_of_ten_thousand_steps_from_a_shared_template_keeps_its_status_under_256_kib() {
    let wf = with_records(
        workflow("workflowTemplateRef: {name: big}"),
        vec![recorded(NAMESPACED_KIND, "big", &hundred_by_hundred())],
    );
    let (expanded, compiled) = crate::plan::prepare(&wf);
    let expanded = expanded.expect("it expands");
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
    assert_eq!(expanded.spec.containers.len(), 10_000);
    let mut jobs = crate::testing::Jobs::of(&expanded);
    for step in &expanded.spec.containers {
        jobs = jobs.succeeded(&step.step_name);
    }
    let plan = crate::plan::plan(&wf, &jobs.build(), k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let status = plan.status.expect("a status");
    assert_eq!(status.summary.as_deref(), Some("10000 steps succeeded"));
    let record = serde_json::to_vec(&status.resolved_templates)
        .unwrap()
        .len();
    let bytes = serde_json::to_vec(&status).unwrap().len();
    // Where the bytes go (run `cargo test -- --nocapture` to see them): the record of the
    // template, and the names of the steps in `executed`.
    println!("status of 10,000 steps from a template: {bytes} bytes, of which the record {record}");
    assert!(bytes < 256 * 1024, "{bytes} bytes");
}

#[test]
fn a_field_a_workflow_leaves_unset_is_read_from_the_template_it_takes_whole() {
    let own = workflow("workflowTemplateRef: {name: ci}");
    let ttl = |wf: &WorkFlow| own_or_taken(wf, |s| s.ttl_seconds_after_finished);
    assert_eq!(ttl(&own), None, "nothing recorded yet");
    let ci = recorded(
        NAMESPACED_KIND,
        "ci",
        "ttlSecondsAfterFinished: 30\ncontainers: [{stepName: a, image: x}]",
    );
    let mut wf = with_records(own, vec![ci]);
    assert_eq!(ttl(&wf), Some(30));
    wf.spec.ttl_seconds_after_finished = Some(5);
    assert_eq!(ttl(&wf), Some(5));
}

/// A container template's raw input artifact: every call gets it, its
/// `{{inputs.parameters.X}}` the call's; a call's own input artifact of that name is taken
/// instead; a dag template with input artifacts is refused.
#[test]
fn a_container_templates_raw_input_artifact_is_every_calls_unless_the_call_gives_its_own() {
    let spec = r#"
templates:
  - name: show
    inputs:
      parameters: [{name: who}]
      artifacts:
        - {name: note, path: /tmp/note, raw: {data: "hello {{inputs.parameters.who}}\n"}}
    image: alpine:3.20
    command: [cat, /tmp/note]
containers:
  - {stepName: a, template: show, arguments: {parameters: [{name: who, value: ann}]}}
  - stepName: b
    template: show
    arguments: {parameters: [{name: who, value: bob}]}
    inputs: {artifacts: [{name: note, path: /tmp/other, raw: {data: mine}}]}
"#;
    let spec = expanded(&workflow(spec));
    let artifacts = |i: usize| {
        let step: &Step = &spec.containers[i];
        let inputs = step.inputs.as_deref().expect("input artifacts");
        (inputs.artifacts.iter())
            .map(|a| (a.path.clone(), a.raw.as_ref().map(|r| r.data.clone())))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        artifacts(0),
        [("/tmp/note".to_string(), Some("hello ann\n".to_string()))]
    );
    assert_eq!(
        artifacts(1),
        [("/tmp/other".to_string(), Some("mine".to_string()))]
    );
    let dag = r#"
templates:
  - name: both
    inputs: {artifacts: [{name: note, path: /tmp/note, raw: {data: x}}]}
    dag: [{stepName: a, image: alpine:3.20, command: [cat, /tmp/note]}]
containers:
  - {stepName: run, template: both}
"#;
    let refused = problems(&workflow(dag));
    assert!(
        refused
            .iter()
            .any(|p| p
                .contains(r#"template "both" is a dag or steps template with input artifacts"#)),
        "{refused:?}"
    );
}
