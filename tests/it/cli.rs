//! The commands that need no cluster, run as a user runs them: `crd`, `validate`, `graph`,
//! `lifecycle`, and `--help`.

use std::io::Write;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A manifest in a temporary file.
fn manifest(yaml: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(yaml.as_bytes()).unwrap();
    file
}

#[test]
fn crd_in_the_repository_is_the_generated_one() {
    let generated = stdout(&run(&["crd"]));
    for file in ["crd/workflow.yaml", "deploy/base/crd.yaml"] {
        let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read_to_string(path).unwrap();
        assert!(
            generated == committed,
            "{file} is stale: run `make crd` and commit it"
        );
    }
}

#[test]
fn crd_has_the_seed_api_and_printer_columns() {
    let printed = stdout(&run(&["crd"]));
    let first = printed.split("---\n").next().unwrap();
    let crd: serde_json::Value = serde_yaml::from_str(first).unwrap();
    assert_eq!(crd["spec"]["group"], "workflow.crd.com");
    assert_eq!(crd["spec"]["names"]["kind"], "WorkFlow");
    assert_eq!(crd["spec"]["names"]["plural"], "workflows");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "wf");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert!(version["subresources"]["status"].is_object());
    let columns = |priority: i64| -> Vec<&str> {
        version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"].as_i64().unwrap_or(0) == priority)
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    };
    assert_eq!(columns(0), ["Status", "Progress", "Message", "Age"]);
    let message = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Message")
        .unwrap();
    assert_eq!(
        message["jsonPath"], ".status.summary",
        "the MESSAGE column shows the message's short first line"
    );
    // `kubectl get -o wide` adds these.
    assert_eq!(columns(1), ["Running", "Changed", "Run"]);
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["maxStepTimeout"]["default"], 60);
    assert_eq!(spec["startTimeout"]["default"], 300);
}

#[test]
fn validate_accepts_every_valid_example() {
    let examples = [
        "examples/simple.yaml",
        "examples/diamond.yaml",
        "examples/failing.yaml",
        "examples/timeout.yaml",
        "examples/args.yaml",
        "examples/env.yaml",
        "examples/retries.yaml",
        "examples/step-timeout.yaml",
        "examples/parallelism.yaml",
        "examples/fail-fast-false.yaml",
        "examples/resources.yaml",
        "examples/secrets-and-volumes.yaml",
        "examples/start-timeout.yaml",
        "examples/cleanup.yaml",
        "examples/queued.yaml",
        "examples/cron.yaml",
        "examples/continue-on.yaml",
        "examples/retry-strategy.yaml",
        "examples/locks.yaml",
        "examples/scripts-and-results.yaml",
        "examples/interactive.yaml",
        "examples/http.yaml",
        "examples/metrics.yaml",
    ];
    let mut args = vec!["validate"];
    args.extend(examples);
    let output = run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output)
            .lines()
            .filter(|l| l.ends_with(": valid"))
            .count(),
        // locks.yaml holds two workflows.
        examples.len() + 1
    );
}

#[test]
fn validate_refuses_an_http_step_s_bad_url_and_method_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("http.yaml");
    std::fs::write(
        &file,
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: call}\nspec:\n  \
         containers:\n  - {stepName: a, http: {url: 'ftp://example.com/x', method: FETCH}}\n",
    )
    .unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let said = stderr(&output);
    for why in [
        r#"step "a": http.url: "ftp://example.com/x" is not an http:// or https:// URL"#,
        r#"step "a": http.method: "FETCH" is not a method an HTTP step makes (one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, in capitals)"#,
    ] {
        assert!(said.contains(why), "{said}");
    }
}

#[test]
fn validate_refuses_a_typo_field_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: typo}\nspec:\n  \
         containers:\n  - {stepName: a, image: busybox}\n  - {stepName: b, image: busybox, \
         depends_on: [a]}\n",
    )
    .unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stderr(&output).contains(
            r#"unknown field "spec.containers[1].depends_on": did you mean "dependsOn"?"#
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn validate_names_the_cycle_path_and_exits_1() {
    let output = run(&["validate", "examples/invalid-cycle.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("dependency cycle: extract -> transform -> load -> extract"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn validate_names_each_problem() {
    let cases = [
        (
            "maxStepTimeout: -5\n  containers: [{stepName: a, image: x}]",
            "spec.maxStepTimeout",
        ),
        ("containers: []", "spec.containers"),
        (
            "startTimeout: 0\n  containers: [{stepName: a, image: x}]",
            "spec.startTimeout",
        ),
        (
            "containers: [{stepName: a, image: x, dependsOn: [nope]}]",
            "unknown step \"nope\"",
        ),
        (
            "containers: [{stepName: a, image: x}, {stepName: a, image: y}]",
            "\"a\" is used more than once",
        ),
        (
            "containers: [{stepName: a, image: x, dependsOn: [a]}]",
            "depends on itself",
        ),
        ("containers: [{stepName: a}]", "image"),
        // Queueing: what becomes a Job's label, and a wait that must be positive.
        (
            "queueName: 'team a'\n  containers: [{stepName: a, image: x}]",
            r#"spec.queueName: Invalid value: "team a""#,
        ),
        (
            "queueName: q\n  queueTimeout: -5\n  containers: [{stepName: a, image: x}]",
            "spec.queueTimeout: Invalid value: -5",
        ),
        // What steps read of each other.
        (
            "containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], command: [echo, '{{steps.nope.outputs.k}}']}]",
            r#"step "b": {{steps.nope.outputs.k}} names step "nope", which does not exist"#,
        ),
        (
            "containers: [{stepName: a, image: x}, {stepName: b, image: x, args: ['{{steps.a.outputs.k}}']}]",
            r#"step "b": {{steps.a.outputs.k}} names step "a", which does not run before it"#,
        ),
        (
            "containers: [{stepName: a, image: x, env: [{name: X, value: '{{inputs.x}}'}]}]",
            // An `{{inputs.` form is a template's: what the operator fails it for (expansion).
            r#"step "a": {{inputs.x}}: no input of that name here: inputs are read only inside a template that declares them"#,
        ),
        (
            "containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], when: 'steps.a.outputs.k =='}]",
            r#"step "b": when "steps.a.outputs.k ==" does not compile"#,
        ),
        (
            "containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], when: 'steps[\"a\"].output.k == \"x\"'}]",
            r#"names steps["a"].output.k, which a step does not have"#,
        ),
        (
            // A read result runs its step under the agent, which needs a command.
            "containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], when: 'steps[\"a\"].outputs.result == \"x\"'}]",
            r#"step "a": runs under the step agent (its result is read), which needs a command"#,
        ),
        // Fan-out and repeated runs.
        (
            "runs: 0\n  containers: [{stepName: a, image: x}]",
            "spec.runs",
        ),
        (
            "containers: [{stepName: a, image: x, command: [echo, '{{item}}']}]",
            r#"step "a": {{item}} names an item, but the step does not fan out"#,
        ),
        (
            "containers: [{stepName: a, image: x, withSequence: {count: 2, end: 4}}]",
            r#"step "a" has a withSequence with both count and end"#,
        ),
        (
            "containers: [{stepName: a, image: x, withParam: 'x, y'}]",
            r#"step "a" has withParam "x, y", which is neither one {{steps.NAME.outputs.KEY}}"#,
        ),
    ];
    for (spec, expected) in cases {
        let file = manifest(&format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: bad}}\nspec:\n  {spec}\n"
        ));
        let output = run(&["validate", file.path().to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{spec}");
        assert!(
            stderr(&output).contains(expected),
            "{spec}: expected {expected:?} in {}",
            stderr(&output)
        );
    }
}

/// A CronWorkFlow `bad` every minute running one step, with `spec` lines (YAML) added to or
/// replacing its fields; a line `-FIELD` removes one.
fn cron_manifest(spec: &str) -> tempfile::NamedTempFile {
    let mut fields = vec![
        ("schedules", "schedules: ['* * * * *']".to_string()),
        (
            "workflowSpec",
            "workflowSpec: {containers: [{stepName: a, image: x}]}".to_string(),
        ),
    ];
    for line in spec.lines() {
        let key = line.trim_start_matches('-').split(':').next().unwrap();
        fields.retain(|(k, _)| *k != key);
        if !line.starts_with('-') {
            fields.push(("", line.to_string()));
        }
    }
    let spec: Vec<String> = fields
        .into_iter()
        .map(|(_, l)| format!("  {l}\n"))
        .collect();
    manifest(&format!(
        "apiVersion: workflow.crd.com/v1\nkind: CronWorkFlow\nmetadata: {{name: bad}}\nspec:\n{}",
        spec.concat()
    ))
}

#[test]
fn validate_checks_a_cron_workflow_and_shows_its_next_times() {
    let output = run(&["validate", "examples/cron.yaml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    let next: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("examples/cron.yaml: cronworkflow heartbeat: next: "))
        .collect();
    assert_eq!(next.len(), 5, "{said}");
    // `@every 5s` from now, shown in Berlin and in UTC, as `cron get` shows them.
    assert!(
        next[0].contains("(Europe/Berlin) = ") && next[0].ends_with('Z'),
        "{said}"
    );
    assert!(
        said.ends_with("examples/cron.yaml: cronworkflow heartbeat: valid\n"),
        "{said}"
    );

    let shared = cron_manifest("-workflowSpec\nworkflowTemplateRef: {name: etl}");
    let output = run(&["validate", shared.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            r#"cronworkflow bad: note: workflowtemplate "etl" is not in the files given"#
        ),
        "{}",
        stdout(&output)
    );
}

#[test]
fn validate_names_each_problem_of_a_cron_workflow_and_of_the_spec_of_its_runs() {
    let cases = [
        (
            "schedules: ['0 2 * *', '@every 1m']",
            r#"schedules[0] "0 2 * *": a cron expression has five fields"#,
        ),
        ("timezone: Mars/Olympus", r#"timezone "Mars/Olympus""#),
        ("schedules: []", "spec.schedules"),
        (
            "concurrencyPolicy: Sometimes",
            "spec.concurrencyPolicy: Unsupported value",
        ),
        (
            "schedule: ['@daily']",
            r#"unknown field "spec.schedule": did you mean "schedules"?"#,
        ),
        (
            "workflowSpec: {containers: [{stepName: a, image: x, dependsOn: [b]}, {stepName: b, image: x, dependsOn: [a]}]}",
            "spec.workflowSpec: dependency cycle: a -> b -> a",
        ),
        (
            "workflowSpec: {containers: [{stepName: a, image: x, dependsOn: [nope]}]}",
            r#"spec.workflowSpec: step "a" depends on unknown step "nope""#,
        ),
        (
            "workflowSpec: {containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], when: 'steps.a.outputs.k =='}]}",
            r#"spec.workflowSpec: step "b": when "steps.a.outputs.k ==" does not compile"#,
        ),
        (
            "workflowSpec: {containers: [{stepName: a, image: x, depends_on: [b]}]}",
            r#"spec.workflowSpec: unknown field "spec.containers[0].depends_on""#,
        ),
        (
            "workflowSpec: {maxStepTimeout: 0, containers: [{stepName: a, image: x}]}",
            "spec.workflowSpec: spec.maxStepTimeout",
        ),
        (
            "workflowTemplateRef: {name: etl}",
            "give one of spec.workflowSpec and spec.workflowTemplateRef",
        ),
        (
            "-workflowSpec",
            "give one of spec.workflowSpec and spec.workflowTemplateRef",
        ),
    ];
    for (spec, expected) in cases {
        let file = cron_manifest(spec);
        let path = file.path().to_str().unwrap();
        let output = run(&["validate", path]);
        assert_eq!(output.status.code(), Some(1), "{spec}: {}", stdout(&output));
        let line = format!("{path}: cronworkflow bad: {expected}");
        assert!(
            stderr(&output).lines().any(|l| l.starts_with(&line)),
            "{spec}: expected {line:?} in\n{}",
            stderr(&output)
        );
        assert!(!stdout(&output).contains("next: "), "{}", stdout(&output));
    }
}

#[test]
fn graph_draws_the_dag_as_dot_and_mermaid() {
    let dot = stdout(&run(&["graph", "examples/diamond.yaml"]));
    assert!(dot.starts_with("digraph"), "{dot}");
    let mermaid = stdout(&run(&[
        "graph",
        "examples/diamond.yaml",
        "--format",
        "mermaid",
    ]));
    assert!(mermaid.starts_with("flowchart"), "{mermaid}");
    for output in [&dot, &mermaid] {
        for step in ["step0", "step1", "step2", "step3"] {
            assert!(output.contains(step), "{step} missing from {output}");
        }
        // Four edges: step0 -> step1, step0 -> step2, step1 -> step3, step2 -> step3.
        assert_eq!(output.matches("->").count(), 4, "{output}");
    }
}

#[test]
fn graph_draws_a_step_that_fans_out_as_one_node_with_its_count() {
    for format in ["dot", "mermaid"] {
        let output = stdout(&run(&[
            "graph",
            "examples/fan-out.yaml",
            "--format",
            format,
        ]));
        for node in [
            "regions\"",
            "build ×3",
            "test ×3",
            "deploy × {{steps.regions.outputs.list}}",
            "runs: 2",
        ] {
            assert!(output.contains(node), "{node} missing from {output}");
        }
        assert_eq!(output.matches("->").count(), 3, "{output}");
    }
}

#[test]
fn graph_draws_the_exit_steps_after_the_rest_and_each_when() {
    for args in [
        &["graph", "examples/continue-on.yaml"][..],
        &["graph", "-f", "examples/continue-on.yaml"],
    ] {
        let dot = stdout(&run(args));
        for line in [
            r#"s2 [label="lint-report\nwhen: steps.lint.phase == \"Failed\""];"#,
            "subgraph cluster_exit {",
            r#"e0 [label="summary\nwhen: workflow.status == \"Completed\""];"#,
            "s1 -> e0 [style=dashed];",
            "s2 -> e0 [style=dashed];",
        ] {
            assert!(dot.contains(line), "{line} not in {dot}");
        }
    }
    let mermaid = stdout(&run(&[
        "graph",
        "examples/continue-on.yaml",
        "--format",
        "mermaid",
    ]));
    for line in [
        r#"s2["lint-report<br>when: steps.lint.phase == #quot;Failed#quot;"]"#,
        r#"subgraph onExit ["onExit"]"#,
        "s2 -.-> e0",
    ] {
        assert!(mermaid.contains(line), "{line} not in {mermaid}");
    }
}

#[test]
fn graph_refuses_an_invalid_workflow() {
    let output = run(&["graph", "examples/invalid-cycle.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("dependency cycle"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn lifecycle_prints_every_legal_transition() {
    let dot = stdout(&run(&["lifecycle"]));
    for edge in [
        "Created -> Started",
        "Created -> Failed",
        "Started -> Completed",
        "Started -> Failed",
        "Started -> Created",
        "Completed -> Created",
        "Failed -> Created",
    ] {
        assert!(dot.contains(edge), "{edge} missing from {dot}");
    }
    assert!(
        !dot.contains("Completed -> Failed"),
        "a terminal state never moves to the other"
    );
    let mermaid = stdout(&run(&["lifecycle", "--format", "mermaid"]));
    assert!(mermaid.contains("Started --> Completed"), "{mermaid}");
}

#[test]
fn help_names_every_kind() {
    let help = stdout(&run(&["--help"]));
    for kind in [
        "WorkFlow (`wf`)",
        "CronWorkFlow (`cwf`)",
        "WorkFlowTrigger (`wftrigger`)",
        "WorkFlowTemplate (`wftmpl`)",
        "ClusterWorkFlowTemplate (`cwftmpl`)",
    ] {
        assert!(help.contains(kind), "{kind}: {help}");
    }
    for command in ["crd", "validate"] {
        let help = stdout(&run(&[command, "--help"]));
        assert!(help.contains("CronWorkFlow"), "{command}: {help}");
    }
}

#[test]
fn dev_help_says_the_server_is_plain_http_on_loopback() {
    let help = stdout(&run(&["dev", "--help"]));
    assert!(help.contains("plain HTTP"), "{help}");
    assert!(help.contains("127.0.0.1"), "{help}");
    assert!(
        help.contains(
            "live in memory and are gone at exit; only `--artifact-dir`'s files are kept"
        ),
        "{help}"
    );
    for flag in [
        "--apply",
        "--until-done",
        "--no-operator",
        "--kubeconfig",
        "--pods",
    ] {
        assert!(help.contains(flag), "{flag} missing from dev --help");
    }
}

/// A workflow with every kind of problem a template or parameter can have.
const MANY_PROBLEMS: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: many}
spec:
  arguments:
    parameters:
      - {name: version}
      - {name: target, value: solaris, enum: [linux, darwin]}
  templates:
    - {name: build, image: x}
    - {name: a, dag: [{stepName: one, template: b}]}
    - {name: b, dag: [{stepName: two, template: a}]}
    - {name: leaky, dag: [{stepName: in, template: build, dependsOn: [outside]}]}
  containers:
    - {stepName: s1, template: biuld}
    - {stepName: s2, template: build, arguments: {parameters: [{name: nope, value: "1"}]}}
    - {stepName: s3, image: "repo/{{tag}}"}
    - {stepName: s4, image: x, command: ["{{workflow.parameters.missing}}"]}
    - {stepName: s5, template: a}
    - {stepName: s6, template: leaky}
"#;

#[test]
fn validate_names_every_problem_of_a_workflow_with_templates_in_one_run() {
    let file = manifest(MANY_PROBLEMS);
    let path = file.path().to_str().unwrap();
    let output = run(&["validate", path]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let problems = stderr(&output);
    for expected in [
        r#"spec.arguments.parameters: "version" has no value: give one (workflow-operator submit -p version=VALUE)"#,
        r#"spec.arguments.parameters: "target": "solaris" is not one of linux, darwin"#,
        r#"step "s1": template "biuld" not found (templates: build, a, b, leaky)"#,
        r#"step "s2": argument "nope": template "build" has no input of that name (there are no inputs)"#,
        r#"step "s3": {{tag}}: not a form the operator knows"#,
        r#"step "s4": {{workflow.parameters.missing}}: "#,
        r#"step "s5/one/two": template cycle: a -> b -> a"#,
        r#"step "s6/in": depends on "outside", which is not a step of dag template "leaky""#,
    ] {
        let line = format!("{path}: workflow many: {expected}");
        assert!(
            problems.lines().any(|l| l.starts_with(&line)),
            "{line}\nnot in\n{problems}"
        );
    }
}

/// A workflow that runs a WorkFlowTemplate whole and one that calls a template of a
/// ClusterWorkFlowTemplate.
const USES_SHARED: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: whole}
spec:
  workflowTemplateRef: {name: ci}
  arguments: {parameters: [{name: branch, value: dev}]}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: calls}
spec:
  containers:
    - {stepName: greet, templateRef: {name: lib, template: hello, clusterScope: true}, arguments: {parameters: [{name: who, value: you}]}}
    - {stepName: other, dependsOn: [greet], templateRef: {name: elsewhere, template: x}}
"#;

const SHARED: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: ci}
spec:
  arguments: {parameters: [{name: branch, value: main}]}
  containers: [{stepName: checkout, image: git, command: [echo, "{{workflow.parameters.branch}}"]}]
---
apiVersion: workflow.crd.com/v1
kind: ClusterWorkFlowTemplate
metadata: {name: lib}
spec:
  templates:
    - {name: hello, inputs: {parameters: [{name: who}]}, image: busybox, args: ["hi {{inputs.parameters.who}}"]}
"#;

#[test]
fn validate_takes_shared_templates_from_the_files_and_notes_those_read_at_run_time() {
    let uses = manifest(USES_SHARED);
    let shared = manifest(SHARED);
    let (uses, shared) = (
        uses.path().to_str().unwrap(),
        shared.path().to_str().unwrap(),
    );
    let output = run(&["validate", uses, shared]);
    assert!(output.status.success(), "{}", stderr(&output));
    let elsewhere = r#"note: workflowtemplate "elsewhere" is not in the files given: the operator reads it from the cluster when the workflow runs"#;
    assert_eq!(
        stdout(&output).lines().collect::<Vec<_>>(),
        [
            format!("{uses}: workflow whole: valid"),
            format!("{uses}: workflow calls: {elsewhere}"),
            format!("{uses}: workflow calls: valid"),
            format!("{shared}: workflowtemplate ci: valid"),
            format!("{shared}: clusterworkflowtemplate lib: valid"),
        ]
    );
    // Alone, every shared template is a note.
    let output = run(&["validate", uses]);
    assert!(output.status.success(), "{}", stderr(&output));
    let notes = stdout(&output);
    for note in [
        format!(r#"{uses}: workflow whole: note: workflowtemplate "ci" is not in the files given"#),
        format!(
            r#"{uses}: workflow calls: note: clusterworkflowtemplate "lib" is not in the files given"#
        ),
    ] {
        assert!(notes.contains(&note), "{note} not in {notes}");
    }
    // What the shared template holds is checked: a parameter it does not declare.
    let wrong =
        manifest(&USES_SHARED.replace("name: branch, value: dev", "name: brnach, value: dev"));
    let wrong = wrong.path().to_str().unwrap();
    let output = run(&["validate", wrong, shared]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!(r#"{wrong}: workflow whole: spec.arguments.parameters: "brnach": workflowtemplate "ci" declares no such parameter (parameters: branch)"#)),
        "{}",
        stderr(&output)
    );
}

#[test]
fn validate_checks_shared_templates_against_their_schemas() {
    let file = manifest(
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlowTemplate\nmetadata: {name: typo}\nspec:\n  \
         containers: [{stepName: a, image: x, depends_on: [b]}]\n---\n\
         apiVersion: workflow.crd.com/v1\nkind: ClusterWorkFlowTemplate\nmetadata: {name: Bad_Name}\n\
         spec:\n  templates: [{name: t, image: x, timeout: 0}]\n",
    );
    let path = file.path().to_str().unwrap();
    let output = run(&["validate", path]);
    assert_eq!(output.status.code(), Some(1));
    let problems = stderr(&output);
    for expected in [
        format!(r#"{path}: workflowtemplate typo: unknown field "spec.containers[0].depends_on""#),
        format!(
            r#"{path}: clusterworkflowtemplate Bad_Name: metadata.name: Invalid value: "Bad_Name""#
        ),
        format!(
            r#"{path}: clusterworkflowtemplate Bad_Name: spec.templates[0].timeout: Invalid value: "": must not be 0 (use -1 for unlimited)"#
        ),
    ] {
        assert!(
            problems.contains(&expected),
            "{expected}\nnot in\n{problems}"
        );
    }
}

#[test]
fn graph_draws_a_workflow_made_of_templates_expanded() {
    let file = manifest(
        r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: release}
spec:
  templates:
    - {name: say, inputs: {parameters: [{name: m}]}, image: busybox, command: [echo, "{{inputs.parameters.m}}"]}
    - name: pipeline
      dag:
        - {stepName: build, template: say, arguments: {parameters: [{name: m, value: b}]}}
        - {stepName: test, template: say, dependsOn: [build], arguments: {parameters: [{name: m, value: t}]}}
  containers:
    - {stepName: hello, template: say, arguments: {parameters: [{name: m, value: hi}]}}
    - {stepName: linux, template: pipeline, dependsOn: [hello]}
    - {stepName: lib, dependsOn: [linux], templateRef: {name: lib, template: hello, clusterScope: true}, arguments: {parameters: [{name: who, value: me}]}}
"#,
    );
    let path = file.path().to_str().unwrap();
    let refused = run(&["graph", path]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains(r#"workflow release: clusterworkflowtemplate "lib" is not in the file: give its manifest in the same file to draw the workflow"#),
        "{}",
        stderr(&refused)
    );
    let whole = manifest(&format!(
        "{}---\n{}",
        std::fs::read_to_string(path).unwrap(),
        SHARED
    ));
    let dot = stdout(&run(&["graph", whole.path().to_str().unwrap()]));
    for node in [
        r#"s0 [label="hello"]"#,
        r#"s1 [label="linux/build"]"#,
        r#"s2 [label="linux/test"]"#,
        r#"s3 [label="lib"]"#,
    ] {
        assert!(dot.contains(node), "{node} not in {dot}");
    }
    for edge in ["s0 -> s1", "s1 -> s2", "s2 -> s3"] {
        assert!(dot.contains(edge), "{edge} not in {dot}");
    }
    assert_eq!(dot.matches("->").count(), 3, "{dot}");
}

#[test]
fn help_of_the_new_commands_shows_their_flags_and_examples() {
    let submit = stdout(&run(&["submit", "--help"]));
    for text in [
        "--from <KIND/NAME>",
        "-p, --parameter <NAME=VALUE>",
        "--generate-name",
        "--wait",
        "-o, --output <OUTPUT>",
        "Examples:",
        "workflow-operator submit --from workflowtemplate/ci -p branch=main -n dev",
    ] {
        assert!(submit.contains(text), "{text} missing from\n{submit}");
    }
    let list = stdout(&run(&["template", "list", "--help"]));
    assert!(list.contains("-A, --all-namespaces"), "{list}");
    assert!(
        list.contains("workflow-operator template list -A"),
        "{list}"
    );
    let get = stdout(&run(&["template", "get", "--help"]));
    assert!(get.contains("--cluster "), "{get}");
    assert!(
        get.contains("workflow-operator template get lib --cluster -o yaml"),
        "{get}"
    );
    for command in [
        &["get"][..],
        &["watch"],
        &["logs"],
        &["suspend"],
        &["resume"],
        &["stop"],
        &["terminate"],
        &["retry"],
        &["submit"],
        &["template", "list"],
        &["template", "get"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let help = stdout(&run(&args));
        for flag in [
            "--kubeconfig <FILE>",
            "--context <NAME>",
            "-n, --namespace <NAMESPACE>",
        ] {
            assert!(
                help.contains(flag),
                "{flag} missing from {command:?} --help"
            );
        }
    }
}

#[test]
fn validate_names_each_bad_run_policy() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policies.yaml");
    let workflow = |name: &str, step: &str| {
        format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n  \
             containers:\n  - {{stepName: a, image: busybox, {step}}}\n"
        )
    };
    let documents = [
        workflow("negative", "retryStrategy: {limit: -1}"),
        workflow(
            "policy",
            "retryStrategy: {limit: 1, retryPolicy: Sometimes}",
        ),
        workflow(
            "factor",
            "retryStrategy: {limit: 1, backoff: {duration: 1s, factor: 0.5}}",
        ),
        workflow(
            "cel",
            "retryStrategy: {limit: 1, expression: 'lastRetry.exitCode =='}",
        ),
        workflow("both", "retries: 1, retryStrategy: {limit: 1}"),
        workflow("age", "cache: {maxAge: soon}"),
        workflow(
            "semaphore",
            "synchronization: {semaphores: [{name: db, limit: 0}]}",
        ),
    ];
    std::fs::write(&file, documents.join("---\n")).unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let said = stderr(&output);
    for (workflow, problem) in [
        ("negative", "retryStrategy.limit"),
        ("policy", "Sometimes"),
        ("factor", "retryStrategy.backoff.factor: Invalid value: 0.5"),
        (
            "cel",
            "retryStrategy.expression \"lastRetry.exitCode ==\" does not compile",
        ),
        ("both", "sets both retries and retryStrategy"),
        ("age", "cache.maxAge \"soon\" is not a duration"),
        ("semaphore", "limit"),
    ] {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("workflow {workflow}:")) && l.contains(problem)),
            "{workflow}: {problem}\n{said}"
        );
    }
}

/// `validate` names each bad rule on the run's metrics (`spec.rules`): an expression that
/// does not compile, an unknown step, an unknown metric, a `grow` without `parallelism`
/// (the CRD's CEL rule), a name used twice.
#[test]
fn validate_names_each_bad_rule() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    let workflow = |name: &str, rules: &str| {
        format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n  \
             runs: 3\n  parallelism: 2\n  containers:\n  - {{stepName: sim, image: busybox}}\n  \
             rules: {rules}\n"
        )
    };
    let rule = |name: &str, when: &str| format!("{{name: {name}, when: '{when}', action: grow}}");
    let documents = [
        workflow(
            "syntax",
            &format!("[{}]", rule("r", "steps.sim.duration.mean >=")),
        ),
        workflow(
            "step",
            &format!("[{}]", rule("r", "steps.sum.succeeded > 1")),
        ),
        workflow(
            "metric",
            &format!("[{}]", rule("r", "steps.sim.duration.median > 1")),
        ),
        workflow(
            "twice",
            &format!("[{0}, {0}]", rule("r", "steps.sim.failed > 1")),
        ),
        workflow(
            "good",
            &format!("[{}]", rule("r", "steps.sim.duration.mean >= 360")),
        ),
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: start}\nspec:\n  \
         containers:\n  - {stepName: sim, image: busybox}\n  \
         rules: [{name: r, when: 'steps.sim.failed > 1', action: shrink}]\n"
            .to_string(),
    ];
    std::fs::write(&file, documents.join("---\n")).unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let said = stderr(&output);
    for (workflow, problem) in [
        (
            "syntax",
            r#"rule "r": when "steps.sim.duration.mean >=" does not compile"#,
        ),
        ("step", r#"names step "sum", which is not a step"#),
        ("metric", r#"names "steps.sim.duration.median", no metric"#),
        ("twice", "rule names must be unique"),
        ("start", "a grow or shrink rule needs spec.parallelism"),
    ] {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("workflow {workflow}:")) && l.contains(problem)),
            "{workflow}: {problem}\n{said}"
        );
    }
    assert!(!said.contains("workflow good:"), "{said}");
}

/// `validate` names each bad script, output or artifact: a step under the step agent without
/// a command, an input artifact from a step not upstream or not declaring it, an output
/// parameter named `result`, a repository without a bucket or with both kinds.
#[test]
fn validate_names_each_bad_artifact_output_or_interactive_step() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("artifacts.yaml");
    let workflow = |name: &str, spec: &str| {
        format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    };
    let made = "  - {stepName: make, image: busybox, command: [sh], outputs: {artifacts: [{name: app, path: /out/app}]}}\n";
    let documents = [
        workflow(
            "entrypoint",
            "  containers:\n  - {stepName: a, image: busybox}\n  - {stepName: b, image: busybox, dependsOn: [a], command: [echo, '{{steps.a.outputs.result}}']}\n",
        ),
        workflow(
            "sideways",
            &format!(
                "  containers:\n{made}  - {{stepName: side, image: busybox, command: [sh]}}\n  - {{stepName: use, image: busybox, dependsOn: [side], command: [sh], inputs: {{artifacts: [{{name: app, path: /in/app, from: '{{{{steps.make.outputs.artifacts.app}}}}'}}]}}}}\n"
            ),
        ),
        workflow(
            "undeclared",
            &format!(
                "  containers:\n{made}  - {{stepName: use, image: busybox, dependsOn: [make], command: [sh], inputs: {{artifacts: [{{name: lib, path: /in/lib, from: '{{{{steps.make.outputs.artifacts.lib}}}}'}}]}}}}\n"
            ),
        ),
        workflow(
            "named-result",
            "  containers:\n  - {stepName: a, image: busybox, command: [sh], outputs: {parameters: [{name: result, valueFrom: {path: /tmp/r}}]}}\n",
        ),
        workflow(
            "bucketless",
            &format!(
                "  artifactRepository: {{s3: {{endpoint: 'http://s3:9000', credentialsSecret: {{name: c}}}}}}\n  containers:\n{made}"
            ),
        ),
        workflow(
            "entrypoint-interactive",
            "  interactive: true\n  containers:\n  - {stepName: a, image: busybox}\n",
        ),
        workflow(
            "both-kinds",
            &format!(
                "  artifactRepository: {{s3: {{endpoint: 'http://s3:9000', bucket: b, credentialsSecret: {{name: c}}}}, oci: {{registry: r, repository: x}}}}\n  containers:\n{made}"
            ),
        ),
    ];
    std::fs::write(&file, documents.join("---\n")).unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let said = stderr(&output);
    for (workflow, problem) in [
        (
            "entrypoint",
            "runs under the step agent (its result is read), which needs a command or a source",
        ),
        (
            "sideways",
            r#"names step "make", which does not run before it"#,
        ),
        ("undeclared", r#"which declares no output artifact "lib""#),
        ("named-result", "result is the step's standard output"),
        (
            "entrypoint-interactive",
            "runs under the step agent (it is interactive), which needs a command or a source",
        ),
        ("bucketless", "bucket"),
        ("both-kinds", "name exactly one of s3 and oci"),
    ] {
        assert!(
            said.lines()
                .any(|l| l.contains(&format!("workflow {workflow}:")) && l.contains(problem)),
            "{workflow}: {problem}\n{said}"
        );
    }
}

#[test]
fn validate_refuses_a_repository_without_its_registry_or_bucket_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (repository, field) in [
        (
            "oci: {repository: wf}",
            "spec.artifactRepository.oci.registry",
        ),
        (
            "s3: {endpoint: 'http://s3', credentialsSecret: {name: s}}",
            "spec.artifactRepository.s3.bucket",
        ),
    ] {
        let file = dir.path().join("repository.yaml");
        std::fs::write(
            &file,
            format!(
                "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: r}}\nspec:\n  \
                 artifactRepository: {{{repository}}}\n  containers:\n  - {{stepName: a, image: \
                 busybox}}\n"
            ),
        )
        .unwrap();
        let output = run(&["validate", file.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
        assert!(
            stderr(&output).contains(&format!("{field}: Required value")),
            "{}",
            stderr(&output)
        );
    }
}

/// A verb kubectl has and the CLI leaves to it names the kubectl command, of the kind the
/// command line is about; never clap's nearest subcommand.
#[test]
fn a_verb_of_kubectls_names_the_kubectl_command() {
    for (args, expected) in [
        (vec!["edit", "build"], "use kubectl edit wf NAME\n"),
        (
            vec!["-n", "ci", "template", "delete", "build"],
            "use kubectl delete wftmpl NAME\n",
        ),
        (vec!["describe", "build"], "use kubectl describe wf NAME\n"),
        (
            vec!["cron", "delete", "nightly"],
            "use kubectl delete cwf NAME\n",
        ),
    ] {
        let output = run(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let said = stderr(&output);
        assert!(said.ends_with(expected), "{args:?}: {said}");
        assert!(!said.contains("similar"), "{args:?}: {said}");
    }
}

/// With no API server where the kubeconfig points, one line says so and what to check.
#[test]
fn no_api_server_is_said_once_with_what_to_check() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = manifest(&format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\n\
         users:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
         current-context: x\n"
    ));
    let path = kubeconfig.path().to_str().unwrap();
    for args in [["get", "x"], ["wait", "x"], ["list", "-A"], ["delete", "x"]] {
        let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
            .args(args)
            .env("KUBECONFIG", path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert_eq!(
            stderr(&output),
            format!(
                "error: cannot reach the API server at http://127.0.0.1:{port}: connection refused \
                 (is workflow-operator dev running? is KUBECONFIG set?)\n"
            )
        );
    }
}

/// Output to a pipe its reader closed ends quietly, with the status a shell shows for a program
/// killed by SIGPIPE (as kubectl's), not a panic.
#[test]
fn output_to_a_closed_pipe_ends_quietly_without_a_cluster() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .arg("crd")
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(141), "{output:?}");
    assert_eq!(stderr(&output), "");
}

/// `dev --rbac` authorizes as a cluster does: the namespace's `default` service account, which
/// no Role grants anything, may not create a ConfigMap; without `--rbac` everything is allowed.
#[tokio::test]
async fn dev_with_rbac_refuses_a_service_account_what_no_role_grants_it() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let account = "system:serviceaccount:default:default";
    for (flags, refused) in [(&["--rbac"][..], true), (&[][..], false)] {
        let dev = crate::support::dev_process::start_dev(flags);
        let maps: Api<ConfigMap> = Api::namespaced(dev.client_as(Some(account)).await, "default");
        let map = serde_json::from_value(serde_json::json!({"metadata": {"name": "made"}}));
        let made = maps.create(&PostParams::default(), &map.unwrap()).await;
        match made {
            Err(kube::Error::Api(e)) if refused => {
                assert_eq!(e.code, 403, "{e:?}");
                let forbidden = format!(
                    "configmaps is forbidden: User \"{account}\" cannot create resource \"configmaps\""
                );
                assert!(e.message.starts_with(&forbidden), "{}", e.message);
            }
            made => assert!(!refused && made.is_ok(), "{flags:?}: {made:?}"),
        }
        dev.stop();
    }
}
