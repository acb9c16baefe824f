//! The verbs an Argo user types, run as the binary against the embedded control plane with the
//! operator running: `list`, `delete`, `resubmit`, run control on several workflows, `submit`
//! with `--wait`, `--watch`, `--log` and a file of several documents, `get -o yaml|wide`,
//! `logs --step` by the names the CLI prints, and the log filter's flag `--log-level`.

use crate::support;

use std::collections::BTreeSet;

use rstest::rstest;
use support::{Gate, Namespace, Operator, operator, wait_for};
use workflow_operator_core::WorkFlow;

use super::cli_habits::{run, text};

/// The first column of each row of a table `list` printed (its header left out).
fn names(table: &str) -> BTreeSet<String> {
    (table.lines().skip(1))
        .filter_map(|line| Some(line.split_whitespace().next()?.to_string()))
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// `ok` (labelled `team=a`), completed; `bad` (labelled `team=b`), failed.
async fn ok_and_bad(ns: &Namespace) {
    ns.create(WorkFlow::test("ok").step("say", &[]).label("team", "a"))
        .await;
    ns.create(
        WorkFlow::test("bad")
            .label("team", "b")
            .step("fail", &[])
            .command(&["sh", "-c", "exit 1"]),
    )
    .await;
    ns.expect_completed("ok").await;
    ns.expect_failed("bad", &["fail"]).await;
}

/// `list` prints a row per workflow (NAME, STATUS, AGE, DURATION, PROGRESS, MESSAGE), filtered
/// by `-l` and `--status`; `-A` lists every namespace with a NAMESPACE column first.
#[rstest]
#[tokio::test]
async fn list_filters_by_label_status_and_namespace(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ok_and_bad(ns).await;
    let n = ns.name.as_str();
    let all = ns.cli(&["list"]).await;
    assert!(
        all.starts_with("NAME   STATUS      AGE"),
        "a header first: {all}"
    );
    assert_eq!(names(&all), set(&["ok", "bad"]), "{all}");
    assert_eq!(
        names(&ns.cli(&["list", "-l", "team=a"]).await),
        set(&["ok"])
    );
    for status in ["Failed", "failed", "Completed,Failed"] {
        let listed = ns.cli(&["list", "--status", status]).await;
        let want = if status.contains(',') {
            set(&["ok", "bad"])
        } else {
            set(&["bad"])
        };
        assert_eq!(names(&listed), want, "--status {status}: {listed}");
    }
    let everywhere = run(ns, &["list", "-A"]).await;
    let printed = text(&everywhere.stdout);
    assert!(printed.starts_with("NAMESPACE"), "{printed}");
    let ours: Vec<&str> = printed.lines().filter(|l| l.starts_with(n)).collect();
    assert_eq!(ours.len(), 2, "{printed}");
    let unknown = run(ns, &["list", "--status", "Sleeping", "-n", n]).await;
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert!(
        text(&unknown.stderr).contains("Created, Queued, Started, Suspended, Completed, Failed"),
        "{unknown:?}"
    );
}

/// `delete` takes names, `-l`, `--completed` (finished ones, either way) and `--all`, and
/// says what it deleted as kubectl does; a name that does not exist fails, the others are
/// deleted still.
#[rstest]
#[tokio::test]
async fn delete_takes_names_a_selector_completed_and_all(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("a step waits for a file the test creates");
    let ns = &operator.ns;
    ok_and_bad(ns).await;
    for name in ["one", "two"] {
        ns.create(WorkFlow::test(name).step("say", &[])).await;
        ns.expect_completed(name).await;
    }
    let gate = Gate::new();
    let held = gate.wait_command("done");
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    ns.create(WorkFlow::test("held").step("wait", &[]).command(&held))
        .await;
    let n = ns.name.as_str();
    let gone = |name: &'static str| async move {
        wait_for(&ns.workflows(), name, "deleted", |w| w.is_none()).await;
    };

    let some = run(ns, &["delete", "one", "nope", "-n", n]).await;
    assert_eq!(some.status.code(), Some(1), "{some:?}");
    assert_eq!(
        text(&some.stdout),
        "workflow.workflow.crd.com \"one\" deleted\n"
    );
    assert!(
        text(&some.stderr).contains("workflow nope not found"),
        "{some:?}"
    );
    gone("one").await;
    assert_eq!(
        ns.cli(&["delete", "-l", "team=a"]).await,
        "workflow.workflow.crd.com \"ok\" deleted\n"
    );
    gone("ok").await;
    let completed = ns.cli(&["delete", "--completed"]).await;
    assert_eq!(completed.lines().count(), 2, "{completed}");
    assert!(completed.contains("\"bad\"") && completed.contains("\"two\""));
    gone("bad").await;
    gone("two").await;
    assert_eq!(names(&ns.cli(&["list"]).await), set(&["held"]));
    let nothing = run(ns, &["delete", "-n", n]).await;
    assert_eq!(nothing.status.code(), Some(2), "{nothing:?}");
    assert_eq!(
        ns.cli(&["delete", "--all"]).await,
        "workflow.workflow.crd.com \"held\" deleted\n"
    );
    gone("held").await;
}

/// A workflow with a required parameter, as a user writes it.
const GREET: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: greet}
spec:
  arguments:
    parameters:
      - {name: who}
  containers:
    - {stepName: say, image: busybox, command: [sh, -c, 'echo "hello {{workflow.parameters.who}}"']}
"#;

/// The value of the workflow parameter `name` of `workflow`.
fn parameter(workflow: &WorkFlow, name: &str) -> Option<String> {
    let arguments = workflow.spec.arguments.as_ref()?;
    (arguments.parameters.iter())
        .find(|p| p.name == name)
        .and_then(|p| p.value.clone())
}

/// `resubmit` makes a new workflow (`NAME-` and a suffix) of the spec of one that ran, its
/// parameters kept, `-p` changing one; `--wait` waits as `submit --wait`.
#[rstest]
#[tokio::test]
async fn resubmit_keeps_the_parameters_and_takes_p(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), GREET).unwrap();
    let path = file.path().to_str().unwrap();
    ns.cli(&["submit", path, "-p", "who=ann", "--wait"]).await;

    let again = ns.cli(&["resubmit", "greet", "-o", "name"]).await;
    let name = again
        .trim()
        .trim_start_matches("workflow.workflow.crd.com/");
    assert!(name.starts_with("greet-"), "{again}");
    let resubmitted = ns.expect_completed(name).await;
    assert_eq!(parameter(&resubmitted, "who").as_deref(), Some("ann"));
    assert_eq!(resubmitted.spec.retry, 0);

    let changed = ns
        .cli(&["resubmit", "greet", "-p", "who=bob", "--wait"])
        .await;
    let line = changed.lines().last().unwrap_or_default();
    assert!(line.contains(" Completed: "), "{changed}");
    let created = changed.lines().next().unwrap_or_default();
    let name = (created.split(' ').next().unwrap_or_default())
        .trim_start_matches("workflow.workflow.crd.com/");
    let logs = ns.cli(&["logs", name]).await;
    assert_eq!(logs, "say: hello bob\n");
    let unknown = run(ns, &["resubmit", "greet", "-p", "whom=x", "-n", &ns.name]).await;
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    assert!(text(&unknown.stderr).contains("declares no parameter \"whom\""));
}

/// Run control takes several names or `-l`: a line per workflow, and exit 1 when any of them
/// failed (the others are done still).
#[rstest]
#[tokio::test]
async fn run_control_takes_several_names_or_a_selector(#[future(awt)] operator: Operator) {
    skip_on_real_cluster!("a step waits for a file the test creates");
    let ns = &operator.ns;
    let gate = Gate::new();
    let held = gate.wait_command("done");
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    for name in ["h1", "h2"] {
        let workflow = WorkFlow::test(name)
            .label("group", "g")
            .step("wait", &[])
            .command(&held);
        ns.create(workflow).await;
    }
    let n = ns.name.as_str();
    assert_eq!(
        ns.cli(&["suspend", "h1", "h2"]).await,
        "workflow h1 suspended\nworkflow h2 suspended\n"
    );
    assert_eq!(
        ns.cli(&["resume", "-l", "group=g"]).await,
        "workflow h1 resumed\nworkflow h2 resumed\n"
    );
    let some = run(ns, &["terminate", "h1", "nope", "-n", n]).await;
    assert_eq!(some.status.code(), Some(1), "{some:?}");
    assert!(text(&some.stdout).starts_with("workflow h1 terminated"));
    assert!(text(&some.stderr).contains("workflow nope not found"));
    ns.expect_failed("h1", &[]).await;
    let neither = run(ns, &["stop", "-n", n]).await;
    assert_eq!(neither.status.code(), Some(2), "{neither:?}");
    let both = run(ns, &["stop", "h2", "-l", "group=g", "-n", n]).await;
    assert_eq!(both.status.code(), Some(2), "names and -l: {both:?}");
    gate.open();
    ns.expect_completed("h2").await;
}

/// `submit -w` (`--wait`) waits and says how it ended; `--watch` shows the workflow as
/// `watch` does until it ends; `--log` follows its steps' logs until it ends; each exits 0 when
/// it completed and 1 when it failed.
#[rstest]
#[tokio::test]
async fn submit_waits_watches_or_follows_the_logs(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let n = ns.name.as_str();
    let simple = ["submit", "examples/simple.yaml", "--generate-name", "-n", n];
    let waited = run(ns, &[&simple[..], &["-w"]].concat()).await;
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
    assert!(text(&waited.stdout).contains(" Completed: 3 steps succeeded"));
    let logged = run(ns, &[&simple[..], &["--log"]].concat()).await;
    assert_eq!(logged.status.code(), Some(0), "{logged:?}");
    let printed = text(&logged.stdout);
    // Each step's log as it comes (the steps' streams are read side by side, so not
    // necessarily in the steps' order), then how the workflow ended.
    let mut lines: Vec<&str> = printed.lines().skip(1).collect();
    let ended = lines.pop().unwrap_or_default();
    assert!(ended.contains(" Completed: 3 steps succeeded"), "{printed}");
    lines.sort();
    assert_eq!(
        lines,
        ["step0: step0", "step1: step1", "step2: step2"],
        "{printed}"
    );
    let watched = run(ns, &[&simple[..], &["--watch"]].concat()).await;
    assert_eq!(watched.status.code(), Some(0), "{watched:?}");
    let printed = text(&watched.stdout);
    assert!(printed.contains("   Completed   3/3"), "{printed}");
    let conflict = run(ns, &[&simple[..], &["--watch", "--log"]].concat()).await;
    assert_eq!(conflict.status.code(), Some(2), "{conflict:?}");
}

/// A file of templates and workflows: `submit` applies the templates (created, or updated when
/// they exist) before it creates the workflows, each named on its line.
#[rstest]
#[tokio::test]
async fn submit_of_a_file_of_templates_and_workflows(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = tempfile::NamedTempFile::new().unwrap();
    let manifest = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: tools}
spec:
  templates:
    - {name: say, inputs: {parameters: [{name: text}]}, image: busybox, command: [echo, "{{inputs.parameters.text}}"]}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: first}
spec:
  containers:
    - {stepName: a, templateRef: {name: tools, template: say}, arguments: {parameters: [{name: text, value: one}]}}
---
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: second}
spec:
  containers:
    - {stepName: b, image: busybox, command: [echo, two]}
"#;
    std::fs::write(file.path(), manifest).unwrap();
    let path = file.path().to_str().unwrap();
    assert_eq!(
        ns.cli(&["submit", path]).await,
        "workflowtemplate.workflow.crd.com/tools created\n\
         workflow.workflow.crd.com/first created\n\
         workflow.workflow.crd.com/second created\n"
    );
    ns.expect_completed("first").await;
    ns.expect_completed("second").await;
    let again = ns
        .cli(&["submit", path, "--generate-name", "-o", "name"])
        .await;
    let lines: Vec<&str> = again.lines().collect();
    assert_eq!(
        lines[0], "workflowtemplate.workflow.crd.com/tools",
        "{again}"
    );
    assert!(
        lines[1].starts_with("workflow.workflow.crd.com/first-"),
        "{again}"
    );
    assert_eq!(lines.len(), 3, "{again}");
    let waiting = run(
        ns,
        &["submit", path, "--generate-name", "--wait", "-n", &ns.name],
    )
    .await;
    assert_eq!(waiting.status.code(), Some(1), "{waiting:?}");
    assert!(
        text(&waiting.stderr).contains("--wait, --watch and --log take a file with one WorkFlow"),
        "{waiting:?}"
    );
}

/// `get -o yaml` is `-o json`'s document as YAML; `-o wide` adds each step's Job and start.
#[rstest]
#[tokio::test]
async fn get_prints_yaml_and_wide(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    ns.create(WorkFlow::test("shown").step("say", &[])).await;
    ns.expect_completed("shown").await;
    let json: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", "shown", "-o", "json"]).await).unwrap();
    let yaml: serde_json::Value =
        serde_yaml::from_str(&ns.cli(&["get", "shown", "-o", "yaml"]).await).unwrap();
    assert_eq!(yaml, json);
    assert_eq!(yaml["steps"][0]["name"], "say");
    let wide = ns.cli(&["get", "shown", "-o", "wide"]).await;
    let header = wide
        .lines()
        .find(|l| l.starts_with("STEP"))
        .unwrap_or_default();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns[5..], ["MESSAGE", "JOB", "STARTED"], "{wide}");
    let row = wide
        .lines()
        .find(|l| l.starts_with("say "))
        .unwrap_or_default();
    assert!(row.contains("shown-say"), "{wide}");
}

/// A workflow whose steps have each kind of name `get` prints: an item (`shard[2]`), a
/// template call's steps (`pipe/one`), and a step its `when` skipped.
const NAMED: &str = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: named}
spec:
  templates:
    - name: pair
      dag:
        - {stepName: one, image: busybox, command: [echo, one]}
        - {stepName: two, image: busybox, command: [echo, two], dependsOn: [one]}
  containers:
    - {stepName: shard, image: busybox, command: [sh, -c, 'echo "item $WORKFLOW_ITEM"'], withItems: [a, b, c]}
    - {stepName: pipe, template: pair}
    - {stepName: after, image: busybox, command: [echo, never], when: "1 == 2", dependsOn: [shard]}
"#;

/// `logs --step` takes the names `get` and `logs` print: an item, a run's step, and a prefix
/// for all of one run or template call; an unknown one lists the steps there are; a skipped
/// step says it never ran.
#[rstest]
#[tokio::test]
async fn logs_step_takes_the_names_the_cli_prints(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), NAMED).unwrap();
    ns.cli(&["submit", file.path().to_str().unwrap(), "--wait"])
        .await;
    ns.create(WorkFlow::test("twice").runs(2).step("build", &[]))
        .await;
    ns.expect_completed("twice").await;
    let logs = |step: &'static str, workflow: &'static str| async move {
        ns.cli(&["logs", workflow, "--step", step]).await
    };
    assert_eq!(logs("shard[2]", "named").await, "shard[2]: item c\n");
    assert_eq!(
        logs("pipe", "named").await,
        "pipe/one: one\npipe/two: two\n"
    );
    assert_eq!(logs("pipe/two", "named").await, "pipe/two: two\n");
    let run1 = logs("run1/build", "twice").await;
    assert!(run1.starts_with("run1/build: ") && run1.lines().count() == 1);
    let prefix = logs("run1", "twice").await;
    assert_eq!(prefix, run1);
    let n = ns.name.as_str();
    let skipped = run(ns, &["logs", "named", "--step", "after", "-n", n]).await;
    assert_eq!(skipped.status.code(), Some(0), "{skipped:?}");
    assert_eq!(
        text(&skipped.stderr),
        "after: skipped (when false), never ran\n"
    );
    let unknown = run(ns, &["logs", "named", "--step", "shard[7]", "-n", n]).await;
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    assert_eq!(
        text(&unknown.stderr),
        "error: workflow named has no step \"shard[7]\"; its steps: shard (items shard[0] to \
         shard[2]), pipe/one, after, pipe/two\n"
    );
}

/// The log filter is `--log-level` (or `RUST_LOG`); `--log` given as the filter is refused
/// naming it, as `--log` is `submit`'s, following the logs.
#[rstest]
#[tokio::test]
async fn the_log_filter_is_log_level(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let n = ns.name.as_str();
    let listed = run(ns, &["--log-level", "debug", "list", "-n", n]).await;
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    assert!(text(&listed.stderr).contains("DEBUG"), "{listed:?}");
    for args in [
        vec!["--log", "debug", "list", "-n", n],
        vec!["list", "--log=debug", "-n", n],
        vec!["submit", "examples/simple.yaml", "--log=debug", "-n", n],
    ] {
        let old = run(ns, &args).await;
        assert_eq!(old.status.code(), Some(2), "{args:?}: {old:?}");
        assert_eq!(
            text(&old.stderr),
            "error: the log filter is --log-level now (or RUST_LOG): --log-level debug\n",
            "{args:?}"
        );
    }
    let from_env = ns
        .cli_command(&["list", "-n", n])
        .env("RUST_LOG", "debug")
        .output()
        .await
        .unwrap();
    assert!(
        text(&from_env.stderr).contains("DEBUG"),
        "RUST_LOG still sets it"
    );
}

/// `get` of a workflow made of a shared template says where it came from and its parameters;
/// the runs of a template are listed by the label `submit --from` gives them.
#[rstest]
#[tokio::test]
async fn a_run_of_a_template_shows_its_source_and_parameters(#[future(awt)] operator: Operator) {
    let ns = &operator.ns;
    let file = tempfile::NamedTempFile::new().unwrap();
    let manifest = r#"apiVersion: workflow.crd.com/v1
kind: WorkFlowTemplate
metadata: {name: ci}
spec:
  arguments:
    parameters:
      - {name: branch, value: main}
      - {name: depth}
  containers:
    - {stepName: checkout, image: busybox, command: [echo, "{{workflow.parameters.branch}}"]}
"#;
    std::fs::write(file.path(), manifest).unwrap();
    ns.cli(&["submit", file.path().to_str().unwrap()]).await;
    let created = ns
        .cli(&[
            "submit",
            "--from",
            "wftmpl/ci",
            "-p",
            "depth=10",
            "-o",
            "name",
            "--wait",
        ])
        .await;
    let name = (created.lines().next().unwrap_or_default())
        .trim_start_matches("workflow.workflow.crd.com/");
    let shown = ns.cli(&["get", name]).await;
    assert!(
        shown.contains("From:      workflowtemplate/ci\n"),
        "{shown}"
    );
    assert!(
        shown.contains("Parameters: branch=main, depth=10\n"),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ns.cli(&["get", name, "-o", "json"]).await).unwrap();
    assert_eq!(json["from"], "workflowtemplate/ci");
    assert_eq!(json["parameters"]["depth"], "10");
    ns.create(WorkFlow::test("other").step("say", &[])).await;
    let runs = ns
        .cli(&["list", "-l", "workflow.crd.com/workflow-template=ci"])
        .await;
    assert_eq!(names(&runs), set(&[name]), "{runs}");
}
