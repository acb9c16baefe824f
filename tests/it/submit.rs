//! `workflow-operator submit` and `template list|get` against the embedded control plane with
//! the operator running, as a user runs them; and the cluster flags (`--kubeconfig`,
//! `--context`, `-n`) every command that talks to a cluster takes.

use std::process::Output;

use crate::support;
use support::session::Session;

/// A workflow with a required parameter and one with a default and an `enum`.
const GREET: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: greet}
spec:
  arguments:
    parameters:
      - {name: who}
      - {name: times, value: "1", enum: ["1", "2"]}
  containers:
    - {stepName: say, image: busybox, command: [sh, -c, 'echo "hello {{workflow.parameters.who}} x{{workflow.parameters.times}}"']}
"#;

/// A WorkFlowTemplate and a ClusterWorkFlowTemplate, each a whole workflow with parameters.
const SHARED: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: ci}
spec:
  arguments:
    parameters:
      - {name: branch, value: main, description: the branch to build}
      - {name: depth, enum: ["1", "10"]}
  templates:
    - name: say
      inputs: {parameters: [{name: text}, {name: times, default: "1"}]}
      image: busybox
      command: [echo, "{{inputs.parameters.text}}"]
  containers:
    - {stepName: checkout, template: say, arguments: {parameters: [{name: text, value: "checkout {{workflow.parameters.branch}} {{workflow.parameters.depth}}"}]}}
---
apiVersion: workflow.crd.com/v1
kind: ClusterWorkFlowTemplate
metadata: {name: nightly}
spec:
  containers:
    - {stepName: build, image: busybox, command: [echo, nightly]}
"#;

/// Runs `workflow-operator ARGS` with `KUBECONFIG` set to `kubeconfig`, whatever its outcome.
async fn run(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .current_dir(support::session::ROOT)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `-p` sets a declared parameter; an undeclared one, a missing one and one outside its `enum`
/// are refused, each saying why, and nothing is created; `--generate-name` and `-o name`.
#[tokio::test]
async fn submit_sets_parameters_and_refuses_bad_ones_before_creating_anything() {
    let Some(session) = Session::start("submit_parameters").await else {
        return;
    };
    let file = session.write_manifest("greet.yaml", GREET);
    let refusals = [
        (
            vec!["-p", "who=you", "-p", "nope=1"],
            r#"error: -p nope: workflow "greet" declares no parameter "nope" (parameters: who, times)"#,
        ),
        (
            vec![],
            r#"error: workflow greet would fail: spec.arguments.parameters: "who" has no value: give one (workflow-operator submit -p who=VALUE)"#,
        ),
        (
            vec!["-p", "who=you", "-p", "times=3"],
            r#"error: workflow greet would fail: spec.arguments.parameters: "times": "3" is not one of 1, 2"#,
        ),
        (
            vec!["-p", "who"],
            "invalid value 'who' for '--parameter <NAME=VALUE>': expected NAME=VALUE",
        ),
    ];
    for (flags, expected) in refusals {
        let mut args = vec!["submit", file.as_str()];
        args.extend(flags);
        let stderr = session.cli_refused(&args).await;
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert_eq!(session.k(&["get", "wf", "-o", "name"]).await, "");

    let printed = session
        .cli(&[
            "submit",
            &file,
            "-p",
            "who=world",
            "-p",
            "times=2",
            "--generate-name",
            "-o",
            "name",
        ])
        .await;
    let name = printed
        .trim()
        .strip_prefix("workflow.workflow.crd.com/greet-")
        .map(|suffix| format!("greet-{suffix}"))
        .unwrap_or_else(|| panic!("{printed}"));
    assert_eq!(
        session.jsonpath(&name, "{.metadata.generateName}").await,
        "greet-"
    );
    assert_eq!(
        session
            .jsonpath(&name, "{.spec.arguments.parameters[*].value}")
            .await,
        "world 2"
    );
    session.stop().await;
}

/// `--wait` waits until the workflow finished and exits as it ended, printing the outcome;
/// `-o json` prints the created workflow.
#[tokio::test]
async fn submit_wait_exits_0_when_the_workflow_completed_and_1_when_it_failed() {
    let Some(session) = Session::start("submit_wait").await else {
        return;
    };
    let kubeconfig = session.cluster.kubeconfig_path();
    let completed = run(kubeconfig, &["submit", "examples/diamond.yaml", "--wait"]).await;
    assert_eq!(completed.status.code(), Some(0), "{completed:?}");
    let out = text(&completed.stdout);
    assert!(
        out.starts_with("workflow.workflow.crd.com/diamond created\n"),
        "{out}"
    );
    assert!(out.contains("workflow diamond Completed"), "{out}");

    let failed = run(kubeconfig, &["submit", "examples/failing.yaml", "--wait"]).await;
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    let out = text(&failed.stdout);
    assert!(
        out.contains("workflow failing Failed: step fail failed: exit code 1"),
        "{out}"
    );

    let json = session
        .cli(&["submit", "examples/simple.yaml", "-o", "json"])
        .await;
    let created: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(created["kind"], "WorkFlow");
    assert_eq!(created["metadata"]["name"], "simple");
    assert!(created["metadata"]["uid"].is_string(), "{json}");
    session.stop().await;
}

/// `--from` makes a workflow that runs a shared template whole, named after it, with the `-p`
/// values as its arguments; a parameter the template does not declare, a template that does
/// not exist and a kind that is none are refused, nothing created.
#[tokio::test]
async fn submit_from_a_shared_template_of_either_kind() {
    let Some(session) = Session::start("submit_from").await else {
        return;
    };
    session.create(SHARED).await;
    let refusals = [
        (
            vec!["--from", "workflowtemplate/ci", "-p", "nope=1"],
            r#"error: -p nope: workflowtemplate "ci" declares no parameter "nope" (parameters: branch, depth)"#,
        ),
        (
            vec!["--from", "wftmpl/absent"],
            r#"error: workflowtemplate "absent" not found in namespace "default""#,
        ),
        (
            vec!["--from", "clusterworkflowtemplate/absent"],
            r#"error: clusterworkflowtemplate "absent" not found"#,
        ),
        (
            vec!["--from", "cwftmpl/nightly", "-p", "x=1"],
            r#"error: -p x: clusterworkflowtemplate "nightly" declares no parameter "x" (it declares none)"#,
        ),
        (
            vec!["--from", "job/ci"],
            r#"unknown kind "job": workflowtemplate (wftmpl) or clusterworkflowtemplate (cwftmpl)"#,
        ),
    ];
    for (args, expected) in refusals {
        let mut all = vec!["submit"];
        all.extend(args);
        let stderr = session.cli_refused(&all).await;
        assert!(stderr.contains(expected), "{all:?}: {stderr}");
    }
    assert_eq!(session.k(&["get", "wf", "-o", "name"]).await, "");

    let name = |printed: String| {
        printed
            .trim()
            .strip_prefix("workflow.workflow.crd.com/")
            .unwrap_or_else(|| panic!("{printed}"))
            .to_string()
    };
    let ci = name(
        session
            .cli(&[
                "submit",
                "--from",
                "workflowtemplate/ci",
                "-p",
                "depth=10",
                "-o",
                "name",
            ])
            .await,
    );
    assert!(ci.starts_with("ci-"), "{ci}");
    assert_eq!(
        session.jsonpath(&ci, "{.spec.workflowTemplateRef}").await,
        r#"{"name":"ci"}"#
    );
    assert_eq!(
        session.jsonpath(&ci, "{.spec.arguments.parameters}").await,
        r#"[{"name":"depth","value":"10"}]"#
    );
    let nightly = name(
        session
            .cli(&["submit", "--from", "cwftmpl/nightly", "-o", "name"])
            .await,
    );
    // Run by the operator from what it read of the template.
    let waited = session
        .cli(&[
            "submit",
            "--from",
            "wftmpl/ci",
            "-p",
            "depth=1",
            "--wait",
            "-o",
            "name",
        ])
        .await;
    let ran = waited.lines().next().unwrap().rsplit('/').next().unwrap();
    assert!(
        waited.contains(&format!("workflow {ran} Completed")),
        "{waited}"
    );
    assert_eq!(
        session.cli(&["logs", ran]).await,
        "checkout: checkout main 1\n"
    );
    assert!(nightly.starts_with("nightly-"), "{nightly}");
    assert_eq!(
        session
            .jsonpath(&nightly, "{.spec.workflowTemplateRef}")
            .await,
        r#"{"clusterScope":true,"name":"nightly"}"#
    );
    session.stop().await;
}

/// `template list` shows each shared template with its templates and parameters; `template
/// get` one, with its parameters' values, allowed values and descriptions, or as YAML/JSON.
#[tokio::test]
async fn template_list_and_get_show_the_shared_templates() {
    let Some(session) = Session::start("template_list_get").await else {
        return;
    };
    session.create(SHARED).await;
    let listed = session.cli(&["template", "list"]).await;
    let rows: Vec<&str> = listed.lines().map(str::trim_end).collect();
    assert_eq!(rows.len(), 3, "{listed}");
    let cells = |row: &str| {
        row.split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(cells(rows[0]), ["NAME", "KIND", "TEMPLATES", "PARAMETERS"]);
    assert_eq!(
        cells(rows[1]),
        ["ci", "WorkFlowTemplate", "say", "branch=main, depth (1|10)"]
    );
    assert_eq!(
        cells(rows[2]),
        ["nightly", "ClusterWorkFlowTemplate", "-", "-"]
    );
    let everywhere = session.cli(&["template", "list", "-A"]).await;
    assert!(everywhere.starts_with("NAMESPACE"), "{everywhere}");
    assert!(
        everywhere
            .lines()
            .any(|l| cells(l)[..3] == ["default", "ci", "WorkFlowTemplate"]),
        "{everywhere}"
    );

    let shown = session.cli(&["template", "get", "ci"]).await;
    let lines: Vec<Vec<String>> = shown.lines().map(cells).collect();
    for expected in [
        vec!["Name:", "ci"],
        vec!["Kind:", "WorkFlowTemplate"],
        vec!["Namespace:", "default"],
        vec!["Steps:", "checkout"],
        vec!["TEMPLATE", "KIND", "INPUTS"],
        vec!["say", "container", "text, times=1"],
        vec!["PARAMETER", "VALUE", "ENUM", "DESCRIPTION"],
        vec!["branch", "main", "the branch to build"],
        vec!["depth", "(required)", "1, 10"],
    ] {
        assert!(
            lines.iter().any(|l| *l == expected),
            "{expected:?} not in\n{shown}"
        );
    }
    let json = session
        .cli(&["template", "get", "nightly", "--cluster", "-o", "json"])
        .await;
    let object: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(object["kind"], "ClusterWorkFlowTemplate");
    assert_eq!(object["spec"]["containers"][0]["stepName"], "build");
    let yaml = session.cli(&["template", "get", "ci", "-o", "yaml"]).await;
    assert!(yaml.contains("kind: WorkFlowTemplate\n"), "{yaml}");
    let refused = session.cli_refused(&["template", "get", "absent"]).await;
    assert!(
        refused.contains(r#"error: workflowtemplate "absent" not found in namespace "default""#),
        "{refused}"
    );
    let refused = session
        .cli_refused(&["template", "get", "ci", "--cluster"])
        .await;
    assert!(
        refused.contains(r#"error: clusterworkflowtemplate "ci" not found"#),
        "{refused}"
    );
    session.stop().await;
}

/// `--kubeconfig`, `--context` and `-n` choose the cluster and the namespace as kubectl's do,
/// for every command that talks to a cluster.
#[tokio::test]
async fn every_cluster_command_takes_kubeconfig_context_and_namespace() {
    let Some(session) = Session::start("cluster_flags").await else {
        return;
    };
    session.k(&["create", "namespace", "team"]).await;
    session
        .k(&["create", "-n", "team", "-f", "examples/simple.yaml"])
        .await;
    session
        .k(&[
            "wait",
            "-n",
            "team",
            "--for=condition=Finished",
            "wf/simple",
            "--timeout=60s",
        ])
        .await;
    // A kubeconfig whose current context is unreachable, and a context `dev` of the cluster
    // with the namespace `team`.
    let dev: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(session.cluster.kubeconfig_path()).unwrap())
            .unwrap();
    let server = dev["clusters"][0]["cluster"]["server"].as_str().unwrap();
    let contexts = session.write_manifest(
        "contexts.yaml",
        &format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: broken\nclusters:\n\
             - {{name: dev, cluster: {{server: '{server}'}}}}\n\
             - {{name: broken, cluster: {{server: 'http://127.0.0.1:9'}}}}\n\
             users: [{{name: me, user: {{}}}}]\ncontexts:\n\
             - {{name: dev, context: {{cluster: dev, user: me, namespace: team}}}}\n\
             - {{name: broken, context: {{cluster: broken, user: me}}}}\n"
        ),
    );
    let nowhere = std::path::Path::new("/nonexistent/kubeconfig");
    let dev_kubeconfig = session.cluster.kubeconfig_path();
    let dev_kubeconfig = dev_kubeconfig.to_str().unwrap();
    // Each command reaches `simple` in `team` through the context.
    let commands: [&[&str]; 8] = [
        &["get", "simple"],
        &["watch", "simple"],
        &["logs", "simple"],
        &["suspend", "simple"],
        &["retry", "simple"],
        &["template", "list"],
        &["template", "get", "none"],
        &["submit", "examples/diamond.yaml", "-o", "name"],
    ];
    let expected = [
        "Name:      simple",
        "simple   Completed",
        "step0: step0",
        "workflow simple has finished (Completed); there is nothing to suspend",
        "workflow simple completed: every step succeeded, there is nothing to retry",
        "NAME   KIND   TEMPLATES   PARAMETERS",
        r#"workflowtemplate "none" not found in namespace "team""#,
        "workflow.workflow.crd.com/diamond",
    ];
    for (command, expected) in commands.iter().zip(expected) {
        let mut args = command.to_vec();
        args.extend(["--kubeconfig", contexts.as_str(), "--context", "dev"]);
        let out = run(nowhere, &args).await;
        let both = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(both.contains(expected), "{args:?}: {both}");
    }
    assert_eq!(
        session
            .k(&["get", "wf", "-n", "team", "diamond", "-o", "name"])
            .await
            .trim(),
        "workflow.workflow.crd.com/diamond"
    );
    // Without --context: the current, unreachable one.
    let out = run(nowhere, &["get", "simple", "--kubeconfig", &contexts]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot reach the API server at http://127.0.0.1:9: "),
        "{out:?}"
    );
    // --context alone reads KUBECONFIG.
    let out = run(
        std::path::Path::new(&contexts),
        &["get", "simple", "--context", "dev"],
    )
    .await;
    assert!(text(&out.stdout).contains("Namespace: team"), "{out:?}");
    // -n overrides the context's namespace.
    let out = run(
        nowhere,
        &[
            "get",
            "simple",
            "--kubeconfig",
            dev_kubeconfig,
            "-n",
            "team",
        ],
    )
    .await;
    assert!(
        text(&out.stdout).contains("Status:    Completed"),
        "{out:?}"
    );
    let out = run(nowhere, &["get", "simple", "--kubeconfig", dev_kubeconfig]).await;
    assert!(
        text(&out.stderr).contains("workflow simple not found in namespace default"),
        "{out:?}"
    );
    session.stop().await;
}

/// A release workflow using every part of templates: a container template, a `dag` template
/// called twice, parameters.
const RELEASE: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: release}
spec:
  arguments:
    parameters:
      - {name: version}
      - {name: target, value: linux, enum: [linux, darwin, windows]}
  templates:
    - name: say
      inputs:
        parameters: [{name: message}]
      image: busybox:1.36
      command: [sh, -c, 'echo "{{inputs.parameters.message}}"']
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
    - {stepName: other, template: pipeline, dependsOn: [linux], arguments: {parameters: [{name: platform, value: "{{workflow.parameters.target}}"}]}}
"#;

/// `get` and `logs` show a workflow made of templates with its expanded steps, `STEP/INNER`.
#[tokio::test]
async fn get_and_logs_show_the_expanded_steps_of_a_workflow_made_from_templates() {
    let Some(session) = Session::start("get_logs_expanded").await else {
        return;
    };
    let file = session.write_manifest("release.yaml", RELEASE);
    let submitted = session
        .cli(&[
            "submit",
            &file,
            "-p",
            "version=1.2",
            "-p",
            "target=darwin",
            "--wait",
        ])
        .await;
    assert!(
        submitted.contains("workflow release Completed"),
        "{submitted}"
    );
    let shown = session.cli(&["get", "release"]).await;
    let steps: Vec<Vec<&str>> = shown
        .lines()
        .skip_while(|l| !l.starts_with("STEP"))
        .skip(1)
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    let expected: Vec<Vec<&str>> = [
        "hello",
        "linux/build",
        "linux/test",
        "other/build",
        "other/test",
    ]
    .iter()
    .map(|step| vec![*step, "Succeeded"])
    .collect();
    assert_eq!(steps, expected, "{shown}");
    assert_eq!(
        session.cli(&["logs", "release"]).await,
        "hello: releasing 1.2\nlinux/build: build linux\nlinux/test: test linux\n\
         other/build: build darwin\nother/test: test darwin\n"
    );
    assert_eq!(
        session
            .cli(&["logs", "release", "--step", "other/test"])
            .await,
        "other/test: test darwin\n"
    );
    session.stop().await;
}
