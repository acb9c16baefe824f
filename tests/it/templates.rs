//! Templates and parameters end to end on the embedded control plane, through kubectl: the
//! workflow's parameters in every field a step runs with and in a `when`; a `dag` template
//! called per item; templates shared by a WorkFlowTemplate and a ClusterWorkFlowTemplate, by
//! `templateRef` and whole (`workflowTemplateRef`); each bad input's message; and a workflow
//! that keeps running what it read from its template after the template is edited and
//! deleted, across a retry and an operator SIGKILL.

use crate::support;

use std::collections::BTreeSet;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rstest::rstest;
use serde_json::json;
use support::session::Session;
use support::{Gate, Operator, operator_process};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::template::WorkFlowTemplate;

/// The Jobs of `workflow`: `STEP -> (command, args, image, env, workingDir, mountPaths)` as
/// kubectl prints them, one line per Job.
async fn job_fields(session: &Session, workflow: &str) -> String {
    session
        .k(&[
            "get",
            "jobs",
            "-l",
            &format!("workflow.crd.com/workflow={workflow}"),
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.annotations.workflow\.crd\.com/step}|{.spec.template.spec.containers[0].image}|{.spec.template.spec.containers[0].command}|{.spec.template.spec.containers[0].args}|{.spec.template.spec.containers[0].workingDir}|{.spec.template.spec.containers[0].volumeMounts[0].mountPath}|{.spec.template.spec.containers[0].env[?(@.name=="GREETING")].value}{"\n"}{end}"#,
        ])
        .await
}

fn line_of<'a>(table: &'a str, step: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("{step}|")))
        .unwrap_or_else(|| panic!("no Job of step {step}: {table}"))
}

async fn executed(session: &Session, workflow: &str) -> BTreeSet<String> {
    let executed = session.jsonpath(workflow, "{.status.executed}").await;
    serde_json::from_str(&executed).unwrap_or_default()
}

async fn expect_phase(session: &Session, workflow: &str, phase: &str) -> String {
    session.wait_finished(workflow).await;
    let message = session.jsonpath(workflow, "{.status.message}").await;
    let got = session
        .jsonpath(workflow, "{.status.workflow-status}")
        .await;
    assert_eq!(got, phase, "{workflow}: {message}");
    message
}

/// `{{workflow.parameters.NAME}}` and `{{workflow.name}}` in image, command, args, env,
/// workingDir, a volume's mount path and `withItems`; `workflow.parameters.NAME` in a `when`.
#[tokio::test]
async fn parameters_fill_every_field_a_step_runs_with_and_a_when_reads_them() {
    let Some(session) = Session::start("template_parameters").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: params}
spec:
  arguments:
    parameters:
      - {name: greeting, value: hi}
      - {name: tag, value: "1.36"}
      - {name: dir, value: /tmp}
      - {name: where, value: settings}
      - {name: deploy, value: "no", enum: ["yes", "no"]}
  podTemplate:
    volumes: [{name: settings, configMap: {name: settings}}]
  containers:
    - stepName: a
      image: "busybox:{{workflow.parameters.tag}}"
      command: [sh, -c, 'echo "$GREETING from {{workflow.name}} in $(pwd): $(cat /etc/{{workflow.parameters.where}}/greeting) $0"']
      args: ["{{workflow.parameters.greeting}}-arg"]
      env: [{name: GREETING, value: "{{workflow.parameters.greeting}}"}]
      workingDir: "{{workflow.parameters.dir}}"
      volumeMounts: [{name: settings, mountPath: "/etc/{{workflow.parameters.where}}"}]
    - {stepName: each, image: busybox, dependsOn: [a], command: [echo, "{{item}}"], withItems: ["{{workflow.parameters.greeting}}-1", two]}
    - {stepName: deploy, image: busybox, dependsOn: [a], command: ["true"], when: 'workflow.parameters.deploy == "yes"'}
"#,
        )
        .await;
    expect_phase(&session, "params", "Completed").await;
    let jobs = job_fields(&session, "params").await;
    assert_eq!(
        line_of(&jobs, "a"),
        r#"a|busybox:1.36|["sh","-c","echo \"$GREETING from params in $(pwd): $(cat /etc/settings/greeting) $0\""]|["hi-arg"]|/tmp|/etc/settings|hi"#
    );
    assert!(
        line_of(&jobs, "each").contains(r#"["echo","hi-1"]"#)
            || jobs.contains(r#"["echo","hi-1"]"#),
        "{jobs}"
    );
    let logs = session.cli(&["logs", "params", "--step", "a"]).await;
    assert!(
        logs.contains("hi from params in /tmp: hello hi-arg"),
        "{logs}"
    );
    assert_eq!(
        executed(&session, "params").await,
        ["a", "each"].map(String::from).into()
    );
    let skipped = session
        .jsonpath("params", r#"{.status.steps[?(@.name=="deploy")].phase}"#)
        .await;
    assert!(
        !jobs.contains("deploy|"),
        "deploy is skipped: {jobs} {skipped}"
    );
    session.stop().await;
}

/// A `dag` template called once per item, its steps calling a container template with a
/// default input and an override; the call's dependents wait for every inner leaf.
#[tokio::test]
async fn a_dag_template_runs_per_item_under_the_calls_name() {
    let Some(session) = Session::start("template_nested_dag").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: release}
spec:
  arguments: {parameters: [{name: version, value: "1.2"}]}
  templates:
    - name: say
      inputs: {parameters: [{name: message}, {name: times, default: "1"}]}
      image: busybox
      command: [sh, -c, 'for i in $(seq {{inputs.parameters.times}}); do echo "{{inputs.parameters.message}}"; done']
    - name: pipeline
      inputs: {parameters: [{name: platform}]}
      dag:
        - {stepName: build, template: say, arguments: {parameters: [{name: message, value: "build {{inputs.parameters.platform}}"}, {name: times, value: "2"}]}}
        - {stepName: test, template: say, dependsOn: [build], arguments: {parameters: [{name: message, value: "test {{inputs.parameters.platform}}"}]}}
  containers:
    - {stepName: hello, template: say, arguments: {parameters: [{name: message, value: "releasing {{workflow.parameters.version}}"}]}}
    - {stepName: each, template: pipeline, dependsOn: [hello], withItems: [linux, darwin], arguments: {parameters: [{name: platform, value: "{{item}}"}]}}
    - {stepName: done, image: busybox, command: [echo, done], dependsOn: [each]}
"#,
        )
        .await;
    expect_phase(&session, "release", "Completed").await;
    assert_eq!(
        executed(&session, "release").await,
        [
            "hello",
            "each[0]/build",
            "each[0]/test",
            "each[1]/build",
            "each[1]/test",
            "done"
        ]
        .map(String::from)
        .into()
    );
    let build = session
        .cli(&["logs", "release", "--step", "each[1]/build"])
        .await;
    assert_eq!(build.matches("build darwin").count(), 2, "{build}");
    let hello = session.cli(&["logs", "release", "--step", "hello"]).await;
    assert!(hello.contains("releasing 1.2"), "{hello}");
    session.stop().await;
}

/// A `templateRef` to each kind, and a workflow taking each kind whole with its own
/// arguments over the template's.
#[tokio::test]
async fn shared_templates_of_both_kinds_are_called_and_taken_whole() {
    let Some(session) = Session::start("template_shared").await else {
        return;
    };
    // Cluster-scoped names are shared by every test's control plane: each test has its own.
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: lib}
spec:
  arguments: {parameters: [{name: who, value: team}]}
  templates:
    - {name: greet, inputs: {parameters: [{name: who}]}, image: busybox, command: [echo, "hello {{inputs.parameters.who}}"]}
  containers:
    - {stepName: main, template: greet, arguments: {parameters: [{name: who, value: "{{workflow.parameters.who}}"}]}}
---
apiVersion: workflow.crd.com/v1
kind: ClusterWorkFlowTemplate
metadata: {name: cluster-lib}
spec:
  templates:
    - {name: shout, image: busybox, command: [echo, LOUD]}
  containers:
    - {stepName: only, template: shout}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: caller}
spec:
  containers:
    - {stepName: a, templateRef: {name: lib, template: greet}, arguments: {parameters: [{name: who, value: you}]}}
    - {stepName: b, dependsOn: [a], templateRef: {name: cluster-lib, template: shout, clusterScope: true}}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: whole}
spec:
  workflowTemplateRef: {name: lib}
  arguments: {parameters: [{name: who, value: everyone}]}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: whole-cluster}
spec:
  workflowTemplateRef: {name: cluster-lib, clusterScope: true}
"#,
        )
        .await;
    let listed = session.k(&["get", "wftmpl"]).await;
    assert!(
        listed.contains("lib") && listed.contains("greet"),
        "{listed}"
    );
    expect_phase(&session, "caller", "Completed").await;
    assert!(
        session
            .cli(&["logs", "caller", "--step", "a"])
            .await
            .contains("hello you")
    );
    assert!(
        session
            .cli(&["logs", "caller", "--step", "b"])
            .await
            .contains("LOUD")
    );
    let read = session
        .jsonpath("caller", "{.status.resolvedTemplates[*].kind}")
        .await;
    assert_eq!(read, "ClusterWorkFlowTemplate WorkFlowTemplate");
    expect_phase(&session, "whole", "Completed").await;
    assert!(
        session
            .cli(&["logs", "whole", "--step", "main"])
            .await
            .contains("hello everyone")
    );
    expect_phase(&session, "whole-cluster", "Completed").await;
    assert_eq!(
        executed(&session, "whole-cluster").await,
        ["only".to_string()].into()
    );
    session.stop().await;
}

/// Each bad input fails the workflow at once, naming what is wrong.
#[tokio::test]
async fn what_does_not_resolve_fails_the_workflow_naming_it() {
    let Some(session) = Session::start("template_refused").await else {
        return;
    };
    session
        .create(
            r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: no-template}
spec:
  workflowTemplateRef: {name: ci}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: no-ref}
spec:
  containers: [{stepName: a, templateRef: {name: lib, template: x, clusterScope: true}}]
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: typo}
spec:
  arguments: {parameters: [{name: version}, {name: target, value: solaris, enum: [linux, darwin]}]}
  templates: [{name: build, image: busybox}, {name: test, image: busybox}]
  containers: [{stepName: b, template: biuld}]
"#,
        )
        .await;
    let namespace = session
        .k(&["config", "view", "--minify", "-o", "jsonpath={..namespace}"])
        .await;
    let namespace = if namespace.trim().is_empty() {
        "default".to_string()
    } else {
        namespace.trim().to_string()
    };
    let message = expect_phase(&session, "no-template", "Failed").await;
    assert!(
        message.contains(&format!(
            r#"workflowTemplateRef: workflowtemplate "ci" not found in namespace "{namespace}""#
        )),
        "{message}"
    );
    let message = expect_phase(&session, "no-ref", "Failed").await;
    assert!(
        message.contains(r#"step "a": templateRef: clusterworkflowtemplate "lib" not found"#),
        "{message}"
    );
    let message = expect_phase(&session, "typo", "Failed").await;
    for part in [
        r#"step "b": template "biuld" not found (templates: build, test)"#,
        r#""version" has no value"#,
        r#""solaris" is not one of linux, darwin"#,
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    session.stop().await;
}

/// Runs `ci`'s one step `work` (after `wait`, which waits for `started`): it prints
/// `original` and fails until `fixed` opens.
fn ci_template(namespace: &str, started: &Gate, fixed: &Gate) -> WorkFlowTemplate {
    let wait = started.wait_command("waited");
    let work = format!("echo original; {}", fixed.check_command()[2]);
    serde_json::from_value(json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlowTemplate",
        "metadata": {"name": "ci", "namespace": namespace},
        "spec": {"containers": [
            {"stepName": "wait", "image": "busybox", "command": wait},
            {"stepName": "work", "image": "busybox", "dependsOn": ["wait"], "command": ["sh", "-c", work]},
        ]},
    }))
    .unwrap()
}

/// Started from a WorkFlowTemplate, the template then edited and deleted, the step failing
/// and the workflow retried: it runs what it read at the start, also when the operator was
/// SIGKILLed between the edit and the retry.
#[rstest]
#[case::running(false)]
#[case::killed(true)]
#[tokio::test]
async fn a_workflow_runs_what_it_read_from_its_template_whatever_becomes_of_the_template(
    #[future(awt)] operator_process: Operator,
    #[case] kill: bool,
) {
    skip_on_real_cluster!("steps wait for files the test creates; the operator is killed");
    // Boxed: the whole scenario as one future overflows a test thread's stack in a debug build.
    Box::pin(edit_delete_retry(operator_process, kill)).await;
}

async fn edit_delete_retry(mut operator: Operator, kill: bool) {
    let (started, fixed) = (Gate::new(), Gate::new());
    let templates: Api<WorkFlowTemplate> = Api::namespaced(operator.ns.client(), &operator.ns.name);
    let created = templates
        .create(
            &PostParams::default(),
            &ci_template(&operator.ns.name, &started, &fixed),
        )
        .await
        .unwrap();
    let workflow: WorkFlow = serde_json::from_value(json!({
        "apiVersion": "workflow.crd.com/v1", "kind": "WorkFlow",
        "metadata": {"name": "from-ci", "namespace": operator.ns.name},
        "spec": {"workflowTemplateRef": {"name": "ci"}},
    }))
    .unwrap();
    operator
        .ns
        .workflows()
        .create(&PostParams::default(), &workflow)
        .await
        .unwrap();
    operator
        .ns
        .wait_step_job("from-ci", "wait", "created", |_| true)
        .await;

    let edited = json!({"spec": {"containers": [
        {"stepName": "work", "image": "busybox", "command": ["echo", "edited"]},
        {"stepName": "added", "image": "busybox", "command": ["echo", "added"]},
    ]}});
    templates
        .patch("ci", &PatchParams::default(), &Patch::Merge(&edited))
        .await
        .unwrap();
    if kill {
        operator.kill().await;
        operator.start();
    }
    templates
        .delete("ci", &DeleteParams::default())
        .await
        .unwrap();
    started.open();
    operator.ns.expect_failed("from-ci", &["work"]).await;

    fixed.open();
    operator.ns.cli(&["retry", "from-ci"]).await;
    let done = operator.ns.expect_completed("from-ci").await;
    assert_eq!(
        support::executed(&done),
        ["wait", "work"].map(String::from).into()
    );
    let record = &done.status.as_ref().unwrap().resolved_templates;
    assert_eq!(record.len(), 1);
    assert_eq!(
        record[0].resource_version,
        created.metadata.resource_version
    );
    let jobs = operator.ns.jobs_of("from-ci").await;
    // Both Jobs of `work` (the failed one and the retry's) ran what was read at the start.
    for work in jobs.iter().filter(|j| support::step_of(j) == Some("work")) {
        let log = operator.ns.job_log(work).await;
        assert!(log.contains("original") && !log.contains("edited"), "{log}");
    }
    assert!(support::jobs_named(&jobs).iter().all(|s| s != "added"));
}
