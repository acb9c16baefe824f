//! Data between steps end to end on the embedded control plane, through kubectl and the
//! `workflow-operator` CLI: a file written to the workspace by
//! one step is read by the next; an output is substituted into a dependent's command; a `when`
//! runs one branch and skips the other; a step fans out over `withItems`, `withSequence` and
//! `withParam` with a fan-in, and `runs` repeats the DAG; bad input is answered clearly.

use crate::support;

use std::collections::BTreeMap;

use support::session::{Session, row};

/// A workflow with `spec.workspace`: one claim for the run, owned by the workflow, mounted in
/// every step at its `mountPath`; what `write` leaves there, `read` finds. Deleting the workflow
/// deletes the claim.
#[tokio::test]
async fn a_file_written_to_the_workspace_by_one_step_is_read_by_the_next() {
    let Some(session) = Session::start("workspace").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: shared}
spec:
  workspace:
    mountPath: /work
    volumeClaimTemplate:
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  containers:
    - {stepName: write, image: busybox:1.36, command: [sh, -c, 'echo "made by write" > "$WORKFLOW_WORKSPACE/note"']}
    - {stepName: read, image: busybox:1.36, dependsOn: [write], command: [sh, -c, 'cat /work/note']}
"#;
    session.create(manifest).await;
    session.finished_as("shared", "Completed").await;
    let logs = session.cli(&["logs", "shared", "--step", "read"]).await;
    assert!(logs.contains("made by write"), "{logs}");
    let claims = session
        .k(&[
            "get",
            "pvc",
            "-l",
            "workflow.crd.com/workflow=shared",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.ownerReferences[0].kind}{\"\\n\"}{end}",
        ])
        .await;
    let lines: Vec<Vec<&str>> = claims.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 1, "one claim for the run: {claims}");
    assert!(lines[0][0].starts_with("shared-ws-"), "{claims}");
    assert_eq!(lines[0][1..], ["Bound", "WorkFlow"], "{claims}");
    session.k(&["delete", "wf", "shared", "--wait=true"]).await;
    kube_devcluster::testing::eventually(
        "the workspace claim deleted with its workflow",
        std::time::Duration::from_secs(30),
        || async {
            let left = session
                .k(&[
                    "get",
                    "pvc",
                    "-l",
                    "workflow.crd.com/workflow=shared",
                    "-o",
                    "name",
                ])
                .await;
            left.trim().is_empty().then_some(())
        },
    )
    .await;
    session.stop().await;
}

/// `examples/outputs.yaml`: `check` writes `ok=yes` and `version=1.4.2`; `deploy` runs (its
/// `when` is true) with the version substituted into its command; `alert` is skipped; `report`
/// runs after both. `get` and the status say so.
#[tokio::test]
async fn an_output_is_substituted_and_a_when_runs_one_branch_and_skips_the_other() {
    let Some(session) = Session::start("outputs_and_when").await else {
        return;
    };
    session.k(&["apply", "-f", "examples/outputs.yaml"]).await;
    session.finished_as("outputs", "Completed").await;
    let deploy = session.cli(&["logs", "outputs", "--step", "deploy"]).await;
    assert!(deploy.contains("deploying 1.4.2"), "{deploy}");
    assert_eq!(
        session
            .jsonpath(
                "outputs",
                r#"{.status.steps[?(@.name=="check")].outputs.version}"#
            )
            .await,
        "1.4.2"
    );
    assert_eq!(
        session
            .jsonpath("outputs", r#"{.status.steps[?(@.name=="alert")].reason}"#)
            .await,
        "WhenFalse"
    );
    let get = session.cli(&["get", "outputs"]).await;
    assert_eq!(row(&get, "alert")[1], "Skipped", "{get}");
    assert_eq!(row(&get, "report")[1], "Succeeded", "{get}");
    // `get` shows each step's outputs the status holds, in text and in JSON.
    let has_row = |cells: &[&str]| {
        get.lines()
            .any(|l| l.split_whitespace().eq(cells.iter().copied()))
    };
    assert!(has_row(&["STEP", "OUTPUT", "VALUE"]), "{get}");
    assert!(has_row(&["check", "version", "1.4.2"]), "{get}");
    let json = session.cli(&["get", "outputs", "-o", "json"]).await;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let check = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "check")
        .unwrap();
    assert_eq!(check["outputs"]["version"], "1.4.2", "{json}");
    session.stop().await;
}

/// Bad outputs are answered clearly: outputs at the kubelet's 4 KiB
/// limit fail their step; a named output the step did not write fails the step naming it.
#[tokio::test]
async fn outputs_over_4_kib_or_missing_fail_their_step_saying_why() {
    let Some(session) = Session::start("bad_outputs").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: too-big}
spec:
  containers:
    - {stepName: big, image: busybox:1.36, command: [sh, -c, 'i=0; while [ $i -lt 500 ]; do echo "k$i=0123456789" >> "$WORKFLOW_OUTPUTS"; i=$((i+1)); done']}
    - {stepName: use, image: busybox:1.36, dependsOn: [big], command: [echo, '{{steps.big.outputs.k1}}']}
"#;
    session.create(manifest).await;
    session.wait_finished("too-big").await;
    let message = session.jsonpath("too-big", "{.status.message}").await;
    assert!(
        message.starts_with("step big failed: its outputs reached 4096 bytes"),
        "{message}"
    );
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: missing}
spec:
  containers:
    - {stepName: a, image: busybox:1.36, command: [sh, -c, 'echo "x=1" >> "$WORKFLOW_OUTPUTS"']}
    - {stepName: b, image: busybox:1.36, dependsOn: [a], command: [echo, '{{steps.a.outputs.y}}']}
"#;
    session.create(manifest).await;
    session.wait_finished("missing").await;
    assert_eq!(
        session.jsonpath("missing", "{.status.message}").await,
        r#"step b failed: {{steps.a.outputs.y}}: step "a" wrote no output "y""#
    );
    let get = session.cli(&["get", "missing"]).await;
    assert_eq!(row(&get, "b")[1], "Failed", "{get}");
    session.stop().await;
}

/// A reference to a step that does not run before it, and a `when` that does not compile:
/// the API server stores them (a CRD cannot check them), the operator fails each workflow at
/// once naming the step and the reference, and `validate` refuses the same files.
#[tokio::test]
async fn a_reference_not_upstream_or_a_when_that_does_not_compile_fails_at_once() {
    let Some(session) = Session::start("bad_references").await else {
        return;
    };
    let cases = [
        (
            "sideways",
            "    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n    - {stepName: b, image: busybox:1.36, command: [echo, '{{steps.a.outputs.x}}']}\n",
            r#"invalid workflow: step "b": {{steps.a.outputs.x}} names step "a", which does not run before it"#,
        ),
        (
            "broken-when",
            "    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n    - {stepName: b, image: busybox:1.36, dependsOn: [a], when: 'steps.a.outputs.x ==', command: [\"true\"]}\n",
            r#"invalid workflow: step "b": when "steps.a.outputs.x ==" does not compile"#,
        ),
    ];
    for (name, steps, message) in cases {
        let manifest = format!(
            "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {{name: {name}}}\nspec:\n  containers:\n{steps}"
        );
        let file = session.write_manifest(&format!("{name}.yaml"), &manifest);
        let refused = session.cli_refused(&["validate", &file]).await;
        let reason = message.trim_start_matches("invalid workflow: ");
        assert!(refused.contains(reason), "{refused}");
        session.k(&["create", "-f", &file]).await;
        session.wait_finished(name).await;
        assert_eq!(
            session.jsonpath(name, "{.status.workflow-status}").await,
            "Failed"
        );
        let got = session.jsonpath(name, "{.status.message}").await;
        assert!(got.starts_with(message), "{got}");
        let jobs = session
            .k(&[
                "get",
                "jobs",
                "-l",
                &format!("workflow.crd.com/workflow={name}"),
                "-o",
                "name",
            ])
            .await;
        assert_eq!(jobs, "", "no step ran");
    }
    session.stop().await;
}

/// `examples/fan-out.yaml` (`withItems` over 3 items with a fan-in,
/// `withParam` from a step's JSON output, `withSequence`, and `runs`, here 2): every item of
/// every run is one Job, made once; each item saw its own `{{item}}`, `$WORKFLOW_ITEM` and
/// `$WORKFLOW_RUN_INDEX`; `get` counts the items under their step.
#[tokio::test]
async fn a_step_fans_out_over_items_a_sequence_and_a_param_with_a_fan_in_in_each_of_two_runs() {
    let Some(session) = Session::start("fan_out").await else {
        return;
    };
    session.k(&["create", "-f", "examples/fan-out.yaml"]).await;
    session.finished_as("fan-out", "Completed").await;

    // One Job per (run, step, item), none twice: 1 + 3 + 3 + 3 per run.
    let listed = session
        .k(&[
            "get",
            "jobs",
            "-l",
            "workflow.crd.com/workflow=fan-out",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.labels.workflow\.crd\.com/run-index} {.metadata.annotations.workflow\.crd\.com/step} {.metadata.labels.workflow\.crd\.com/item} {.metadata.creationTimestamp} {.status.completionTime}{"\n"}{end}"#,
        ])
        .await;
    let jobs: Vec<Vec<&str>> = listed
        .lines()
        .map(|line| line.split(' ').collect())
        .collect();
    let mut instances: Vec<(&str, &str, &str)> = jobs.iter().map(|j| (j[0], j[1], j[2])).collect();
    instances.sort_unstable();
    let mut expected = Vec::new();
    for run in ["0", "1"] {
        expected.push((run, "regions", ""));
        for step in ["build", "deploy", "test"] {
            for item in ["0", "1", "2"] {
                expected.push((run, step, item));
            }
        }
    }
    expected.sort_unstable();
    assert_eq!(instances, expected, "{listed}");

    // Each item saw its own value, in its own run.
    let logs = session.cli(&["logs", "fan-out"]).await;
    let by_instance: BTreeMap<&str, &str> = logs
        .lines()
        .filter_map(|line| line.split_once(": "))
        .collect();
    for run in [0, 1] {
        assert_eq!(
            by_instance[format!("run{run}/build[0]").as_str()],
            format!("run {run}: building for linux"),
            "{logs}"
        );
        assert_eq!(
            by_instance[format!("run{run}/build[2]").as_str()],
            format!(r#"run {run}: building for {{"os":"windows","suffix":".exe"}}"#),
            "{logs}"
        );
        for (item, region) in ["eu", "us", "ap"].iter().enumerate() {
            assert_eq!(
                by_instance[format!("run{run}/deploy[{item}]").as_str()],
                format!("deploying to {region}"),
                "{logs}"
            );
            assert_eq!(
                by_instance[format!("run{run}/test[{item}]").as_str()],
                format!("test shard {item} of 3"),
                "{logs}"
            );
        }
    }
    let get = session.cli(&["get", "fan-out"]).await;
    for step in ["build", "test", "deploy"] {
        let cells = row(&get, &format!("run1/{step}"));
        assert_eq!(cells[1], "Succeeded", "{get}");
        assert!(cells.join(" ").contains("3/3 items"), "{get}");
    }
    session.stop().await;
}

/// The fan-in: items of unequal length each leave a file in the workspace; the step after them
/// finds all three, because it starts only once every item succeeded.
#[tokio::test]
async fn the_step_after_a_fan_out_starts_once_every_item_succeeded() {
    let Some(session) = Session::start("fan_in").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: fan-in}
spec:
  workspace:
    volumeClaimTemplate:
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  containers:
    - stepName: each
      image: busybox:1.36
      withItems: ["0.1", "0.8", "1.5"]
      command: [sh, -c, 'sleep {{item}}; touch "$WORKFLOW_WORKSPACE/done-{{item}}"']
    - {stepName: join, image: busybox:1.36, dependsOn: [each], command: [sh, -c, 'ls "$WORKFLOW_WORKSPACE"']}
"#;
    session.create(manifest).await;
    session.finished_as("fan-in", "Completed").await;
    let logs = session.cli(&["logs", "fan-in", "--step", "join"]).await;
    assert_eq!(
        logs, "join: done-0.1\njoin: done-0.8\njoin: done-1.5\n",
        "join ran before every item ended"
    );
    session.stop().await;
}

/// `runs: 3`: the DAG runs three times, each step once per run with
/// that run's `$WORKFLOW_RUN_INDEX`, and the workflow completes when all three did.
#[tokio::test]
async fn runs_3_runs_the_dag_three_times_each_with_its_index() {
    let Some(session) = Session::start("runs_3").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: thrice}
spec:
  runs: 3
  parallelism: 2
  containers:
    - {stepName: a, image: busybox:1.36, command: [sh, -c, 'echo "a of run $WORKFLOW_RUN_INDEX"']}
    - {stepName: b, image: busybox:1.36, dependsOn: [a], command: [sh, -c, 'echo "b of run $WORKFLOW_RUN_INDEX"']}
"#;
    session.create(manifest).await;
    session.finished_as("thrice", "Completed").await;
    let logs = session.cli(&["logs", "thrice"]).await;
    let mut lines: Vec<&str> = logs.lines().collect();
    lines.sort_unstable();
    let mut expected = Vec::new();
    for run in 0..3 {
        for step in ["a", "b"] {
            expected.push(format!("run{run}/{step}: {step} of run {run}"));
        }
    }
    expected.sort_unstable();
    assert_eq!(lines, expected, "{logs}");
    session.stop().await;
}

/// Bad fan-out input: `withParam` naming an output that is not a JSON
/// list fails its step at once, saying so, and makes none of its Jobs; `runs: 0` is refused by
/// the API server (the CRD's schema) and by `validate`, and nothing is stored.
#[tokio::test]
async fn a_with_param_that_is_not_a_list_fails_its_step_and_runs_0_is_refused() {
    let Some(session) = Session::start("bad_fan_out").await else {
        return;
    };
    let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: not-a-list}
spec:
  containers:
    - {stepName: gen, image: busybox:1.36, command: [sh, -c, 'echo "list={\"a\": 1}" >> "$WORKFLOW_OUTPUTS"']}
    - {stepName: each, image: busybox:1.36, dependsOn: [gen], withParam: '{{steps.gen.outputs.list}}', command: [echo, '{{item}}']}
"#;
    session.create(manifest).await;
    session.wait_finished("not-a-list").await;
    assert_eq!(
        session.jsonpath("not-a-list", "{.status.message}").await,
        r#"step each failed: withParam {{steps.gen.outputs.list}} is not a JSON list: "{\"a\": 1}""#
    );
    assert_eq!(
        session
            .jsonpath("not-a-list", r#"{.status.steps[?(@.name=="each")].reason}"#)
            .await,
        "BadParam"
    );
    let jobs = session
        .k(&[
            "get",
            "jobs",
            "-l",
            "workflow.crd.com/workflow=not-a-list",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.annotations.workflow\.crd\.com/step}{"\n"}{end}"#,
        ])
        .await;
    assert_eq!(jobs.trim(), "gen", "no item of each ran");

    let file = session.write_manifest(
        "runs-0.yaml",
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata: {name: never}\nspec:\n  runs: 0\n  containers:\n    - {stepName: a, image: busybox:1.36, command: [\"true\"]}\n",
    );
    let refused = session.k_refused(&["create", "-f", &file]).await;
    assert!(
        refused.contains(
            "spec.runs: Invalid value: 0: spec.runs in body should be greater than or equal to 1"
        ),
        "{refused}"
    );
    let refused = session.cli_refused(&["validate", &file]).await;
    assert!(refused.contains("spec.runs"), "{refused}");
    let stored = session.k(&["get", "wf", "-o", "name"]).await;
    assert!(!stored.contains("never"), "{stored}");
    session.stop().await;
}

/// What a step sees does not depend on what other steps read: `produce`, whose outputs
/// `consume` names (its pod is sandboxed, to have a termination message file), and `plain`,
/// whose outputs nobody names (a plain local process), both read a file the test put under the
/// host's `/tmp`, as tools installed there (a checkout's `.venv`) are. (The sandbox had a
/// private `/tmp`: `produce` failed with `cat: ...: No such file or directory`.)
#[tokio::test]
async fn steps_see_the_same_tmp_whether_or_not_their_outputs_are_read() {
    let Some(session) = Session::start("same_tmp").await else {
        return;
    };
    let marker = tempfile::Builder::new()
        .prefix("workflow-step-sees-")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(marker.path(), "seen\n").unwrap();
    let path = marker.path().display();
    let manifest = format!(
        r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {{name: same-tmp}}
spec:
  containers:
    - {{stepName: produce, image: busybox:1.36, command: [sh, -c, 'cat {path} && echo k=v >> "$WORKFLOW_OUTPUTS"']}}
    - {{stepName: consume, image: busybox:1.36, dependsOn: [produce], command: [sh, -c, 'echo "{{{{steps.produce.outputs.k}}}}"']}}
    - {{stepName: plain, image: busybox:1.36, command: [sh, -c, 'cat {path}']}}
"#
    );
    session.create(&manifest).await;
    session.finished_as("same-tmp", "Completed").await;
    for (step, line) in [("produce", "seen"), ("plain", "seen"), ("consume", "v")] {
        let logs = session.cli(&["logs", "same-tmp", "--step", step]).await;
        assert_eq!(logs.trim(), format!("{step}: {line}"), "{step}");
    }
    session.stop().await;
}
