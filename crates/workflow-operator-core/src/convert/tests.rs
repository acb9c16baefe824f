//! The converter on Argo documents of each form (`testdata/`), its unsupported-field
//! messages, the `when` translation, and docs/argo.md as the table generates it.

use rstest::rstest;
use serde_json::{Value, json};

use super::{convert, read, table, when};

fn converted(text: &str) -> Vec<(Value, Vec<String>)> {
    read(text)
        .expect("the test data parses")
        .iter()
        .filter_map(|d| convert(d).ok())
        .map(|c| {
            let problems = c.problems.iter().map(ToString::to_string).collect();
            (c.document, problems)
        })
        .collect()
}

/// The converted workflow `document` expanded and compiled, asserted valid.
fn compiled(document: Value) -> crate::plan::Compiled {
    let workflow: crate::WorkFlow = serde_json::from_value(document).unwrap();
    let spec = crate::template::expand(&workflow).expect("expands");
    let compiled = crate::plan::Compiled::new(&spec);
    assert!(compiled.dag.is_ok(), "{:?}", compiled.dag);
    compiled
}

fn one(text: &str) -> (Value, Vec<String>) {
    converted(text).remove(0)
}

/// The first document of `text` converted without a problem, and its notes.
fn noted(text: &str) -> (Value, Vec<String>) {
    let document = read(text).expect("the test data parses");
    let converted = convert(&document[0]).unwrap();
    assert!(converted.problems.is_empty(), "{:?}", converted.problems);
    let notes = converted.notes.iter().map(ToString::to_string).collect();
    (converted.document, notes)
}

#[test]
fn a_dag_entrypoint_becomes_the_steps_with_the_task_names_and_argos_meaning() {
    let (workflow, problems) = one(include_str!("testdata/dag.yaml"));
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(workflow["kind"], "WorkFlow");
    assert_eq!(
        workflow["metadata"],
        json!({"generateName": "coin-", "labels": {"team": "a"}})
    );
    let spec = &workflow["spec"];
    assert_eq!(
        spec["containers"],
        json!([
            {"stepName": "flip", "template": "flip"},
            {"stepName": "heads", "template": "say", "dependsOn": ["flip"],
             "when": "steps[\"flip\"].outputs.result == \"{{workflow.parameters.side}}\"",
             "arguments": {"parameters": [{"name": "text", "value": "it was {{steps.flip.outputs.result}}"}]}},
            {"stepName": "tails", "template": "say", "dependsOn": ["flip", "heads"],
             "when": "steps[\"flip\"].outputs.result != \"heads\"",
             "arguments": {"parameters": [{"name": "text", "value": "tails"}]}},
        ])
    );
    assert_eq!(spec["maxStepTimeout"], -1, "Argo puts no limit on a step");
    assert_eq!(spec["failFast"], false);
    assert_eq!(
        spec["podTemplate"],
        json!({"serviceAccountName": "runner", "nodeSelector": {"disk": "ssd"}})
    );
    assert_eq!(spec["ttlSecondsAfterFinished"], 300);
    assert_eq!(spec["podCleanup"], "OnSuccess");
    let templates = spec["templates"].as_array().unwrap();
    assert_eq!(
        templates.len(),
        2,
        "the inlined entrypoint is left out: {templates:?}"
    );
    assert_eq!(
        templates[0],
        json!({"name": "flip", "image": "python:3.12-alpine", "command": ["python3"],
               "source": "print(\"heads\")\n", "timeout": 30,
               "retryStrategy": {"limit": 2, "retryPolicy": "OnFailure", "backoff": {"duration": "1", "factor": 2.0}}})
    );
    assert_eq!(
        templates[1]["outputs"],
        json!({"parameters": [{"name": "colour", "valueFrom": {"path": "/tmp/colour"}, "default": "none"}]})
    );
    assert_eq!(templates[1].get("name"), Some(&json!("say")));
}

#[test]
fn a_steps_entrypoint_runs_each_group_after_the_whole_group_before() {
    let (workflow, problems) = one(include_str!("testdata/steps.yaml"));
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["containers"],
        json!([
            {"stepName": "first", "template": "say"},
            {"stepName": "left", "dependsOn": ["first"], "template": "say"},
            {"stepName": "right", "dependsOn": ["first"], "template": "say",
             "withSequence": {"count": 3}, "continueOn": {"failed": true}},
            {"stepName": "last", "dependsOn": ["left", "right"], "template": "say",
             "when": "steps[\"left\"].status == \"Succeeded\""},
        ])
    );
    assert_eq!(
        workflow["spec"]["templates"][0]["timeout"], 90,
        "1m30s in seconds"
    );
}

#[test]
fn a_steps_template_called_by_another_keeps_argos_groups() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: lib}
spec:
  templates:
    - name: pair
      steps: [[{name: a, template: say, arguments: {parameters: [{name: x, value: "1"}]}}], [{name: b, template: say}]]
    - name: say
      inputs: {parameters: [{name: x, value: "0"}]}
      container: {image: busybox:1.36}
"#;
    let (template, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(template["kind"], "WorkFlowTemplate");
    assert_eq!(
        template["spec"]["templates"][0],
        json!({"name": "pair", "steps": [
            [{"name": "a", "template": "say", "arguments": {"parameters": [{"name": "x", "value": "1"}]}}],
            [{"name": "b", "template": "say"}],
        ]})
    );
}

#[test]
fn a_literal_withparam_is_withitems_and_an_argument_the_template_does_not_take_is_left_out() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: loop}
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: each
            template: say
            withParam: '[{"os": "linux"}, {"os": "darwin"}]'
            arguments: {parameters: [{name: text, value: "{{item.os}}"}, {name: ignored, value: x}]}
    - name: say
      inputs: {parameters: [{name: text}]}
      container: {image: busybox:1.36, command: [echo, "{{inputs.parameters.text}}"]}
"#;
    let (workflow, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["containers"][0],
        json!({"stepName": "each", "template": "say",
               "withItems": [{"os": "linux"}, {"os": "darwin"}],
               "arguments": {"parameters": [{"name": "text", "value": "{{item.os}}"}]}})
    );
}

#[test]
fn an_inline_container_template_is_its_steps_own_fields() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: inline}
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: a
            inline:
              container: {image: busybox:1.36, command: [echo, a]}
"#;
    let (workflow, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["containers"],
        json!([{"stepName": "a", "image": "busybox:1.36", "command": ["echo", "a"]}])
    );
}

#[test]
fn a_recursive_entrypoint_is_inlined_and_kept_for_its_own_call() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: again}
spec:
  entrypoint: flip
  templates:
    - name: flip
      steps:
        - - {name: toss, template: toss}
        - - {name: again, template: flip, when: "{{steps.toss.outputs.result}} == tails"}
    - name: toss
      script: {image: alpine:3.20, source: echo heads}
"#;
    let (workflow, _) = one(text);
    let spec = &workflow["spec"];
    assert_eq!(spec["containers"][1]["template"], "flip");
    let kept: Vec<&Value> = spec["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(kept, [&json!("flip"), &json!("toss")]);
}

#[test]
fn a_steps_templates_own_outputs_target_and_parallelism_are_kept_and_a_global_name_copied() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: outs}
spec:
  templates:
    - name: pair
      parallelism: "2"
      steps: [[{name: a, template: make}]]
      outputs:
        parameters: [{name: n, globalName: g, valueFrom: {parameter: "{{tasks.a.outputs.parameters.n}}"}}]
        artifacts: [{name: f, from: "{{tasks.a.outputs.artifacts.f}}"}]
    - name: picked
      dag:
        target: "b {{workflow.parameters.t}}"
        tasks: [{name: b, template: make}]
    - name: make
      parallelism: 3
      container: {image: busybox:1.36, command: [touch, /f]}
      outputs:
        artifacts: [{name: f, path: /f, globalName: gf}]
"#;
    let (template, problems) = one(text);
    assert_eq!(
        problems,
        [
            "spec.templates[2].parallelism: parallelism is a dag or steps template's: a container template is one step"
        ]
    );
    let templates = &template["spec"]["templates"];
    assert_eq!(
        templates[0],
        json!({"name": "pair", "parallelism": 2, "steps": [[{"name": "a", "template": "make"}]],
               "outputs": {
                   "parameters": [{"name": "n", "globalName": "g", "valueFrom": {"parameter": "{{steps.a.outputs.parameters.n}}"}}],
                   "artifacts": [{"name": "f", "from": "{{steps.a.outputs.artifacts.f}}"}]}})
    );
    assert_eq!(templates[1]["target"], "b {{workflow.parameters.t}}");
    assert_eq!(templates[2]["outputs"]["artifacts"][0]["globalName"], "gf");
}

#[test]
fn an_entrypoint_dag_with_a_target_is_one_step_calling_it() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: picked}
spec:
  entrypoint: d
  arguments: {parameters: [{name: t, value: b}]}
  templates:
    - name: d
      dag:
        target: "{{workflow.parameters.t}}"
        tasks: [{name: a, template: make}, {name: b, template: make, depends: a}]
    - name: make
      container: {image: busybox:1.36}
"#;
    let (workflow, problems) = one(text);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        workflow["spec"]["containers"],
        json!([{"stepName": "d", "template": "d"}])
    );
}

#[test]
fn what_cannot_be_converted_is_named_with_its_path_and_why() {
    let (workflow, problems) = one(include_str!("testdata/unsupported.yaml"));
    assert_eq!(
        problems,
        [
            "spec.podDisruptionBudget: podDisruptionBudget is not supported yet",
            "spec.templates[2].outputs.parameters[0].valueFrom.jqFilter: an output from a resource's jqFilter is not supported yet: read the field with jsonPath",
            "spec.templates[2].resource.manifestFrom: a manifest from an artifact is not supported yet: give it as text (manifest)",
        ]
    );
    assert_eq!(workflow["spec"]["containers"][1]["stepName"], "wait");
}

#[test]
fn a_resource_template_is_a_resource_step_its_outputs_read_by_json_path() {
    let (workflow, problems) = one(include_str!("testdata/resource.yaml"));
    assert!(problems.is_empty(), "{problems:?}");
    let templates = &workflow["spec"]["templates"];
    assert_eq!(
        templates[0],
        json!({
            "name": "make-job",
            "resource": {
                "action": "create",
                "setOwnerReference": true,
                "successCondition": "status.succeeded > 0",
                "failureCondition": "status.failed > 2",
                "manifest": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: counter-\n"
            },
            "outputs": {"parameters": [{"name": "job", "valueFrom": {"jsonPath": "{.metadata.name}"}}]},
            "retryStrategy": {"limit": 1, "retryPolicy": "OnFailure"}
        })
    );
    assert_eq!(
        templates[1]["resource"],
        json!({
            "action": "delete",
            "flags": ["job", "{{inputs.parameters.job}}", "--ignore-not-found"]
        })
    );
    assert_eq!(
        templates[2]["resource"],
        json!({
            "action": "patch",
            "mergeStrategy": "merge",
            "flags": ["configmap", "settings"],
            "manifest": "data: {mode: fast}\n"
        })
    );
}

#[test]
fn a_field_the_converter_does_not_know_is_named() {
    let text = "{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: x}, spec: {entrypoint: a, templates: [{name: a, container: {image: x, colour: red}}]}}";
    let (_, problems) = one(text);
    assert_eq!(
        problems,
        ["spec.templates[0].container.colour: not a field the converter knows"]
    );
}

#[test]
fn several_documents_each_converted_and_other_kinds_left_out() {
    let documents = converted(include_str!("testdata/several.yaml"));
    let kinds: Vec<&Value> = documents.iter().map(|(d, _)| &d["kind"]).collect();
    assert_eq!(
        kinds,
        [
            &json!("WorkFlowTemplate"),
            &json!("CronWorkFlow"),
            &json!("ClusterWorkFlowTemplate")
        ]
    );
    let (library, _) = &documents[0];
    assert_eq!(library["spec"]["templates"][0]["name"], "say");
    assert!(library["spec"].get("containers").is_none());
    let (cron, problems) = &documents[1];
    assert_eq!(problems, &Vec::<String>::new());
    let spec = &cron["spec"];
    assert_eq!(spec["schedules"], json!(["0 2 * * *"]));
    assert_eq!(spec["successfulRunsHistoryLimit"], 4);
    assert_eq!(spec["failedRunsHistoryLimit"], 2);
    assert_eq!(
        spec["workflowSpec"]["containers"],
        json!([{"stepName": "say", "template": "say"}])
    );
    let (shared, problems) = &documents[2];
    assert_eq!(problems, &Vec::<String>::new());
    assert_eq!(shared["apiVersion"], "workflow.crd.com/v1");
    assert_eq!(shared["metadata"], json!({"name": "shared"}));
    assert_eq!(
        shared["spec"],
        json!({"maxStepTimeout": -1, "templates": [{"name": "twice", "steps": [
            [{"name": "once", "templateRef": {"name": "lib", "template": "say"}}],
            [{"name": "again", "templateRef": {"name": "lib", "template": "say"}}],
        ]}]}),
        "a library, as the WorkflowTemplate: no steps of its own, no limit on a step as in Argo"
    );
}

#[test]
fn json_is_read_and_the_entrypoints_inputs_are_the_workflows_parameters() {
    let (workflow, problems) = one(include_str!("testdata/hello.json"));
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["containers"],
        json!([{"stepName": "hello", "template": "hello",
                "arguments": {"parameters": [{"name": "message", "value": "{{workflow.parameters.message}}"}]}}])
    );
}

#[test]
fn a_kind_argo_has_and_we_do_not_is_refused_saying_so() {
    let document = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowEventBinding"});
    let error = convert(&document).unwrap_err();
    assert!(error.contains("\"WorkflowEventBinding\""), "{error}");
}

#[rstest]
#[case(
    "{{steps.flip.outputs.result}} == heads",
    r#"steps["flip"].outputs.result == "heads""#
)]
#[case(
    "{{tasks.a.outputs.parameters.n}} > 5",
    r#"double(steps["a"].outputs.parameters.n) > 5.0"#
)]
#[case(
    "{{workflow.parameters.go}} == 'yes' && ({{steps.a.status}} == Error || !({{item}} != x))",
    r#"workflow.parameters.go == "yes" && (steps["a"].status == "Error" || !("{{item}}" != "x"))"#
)]
#[case(
    "{{steps.a.exitCode}} == 0 || {{tasks.a.exitCode}} > 2 && {{steps.a.finishedAt}} != ''",
    r#"string(steps["a"].exitCode) == "0" || double(string(steps["a"].exitCode)) > 2.0 && steps["a"].finishedAt != """#
)]
#[case(
    "'{{steps.a.startedAt}}' > '2000-01-01T00:00:00Z' && {{tasks.a.finishedAt}} <= {{steps.b.startedAt}}",
    r#"timestamp(steps["a"].startedAt) > timestamp("2000-01-01T00:00:00Z") && timestamp(steps["a"].finishedAt) <= timestamp(steps["b"].startedAt)"#
)]
#[case(
    "'{{workflow.scheduledTime}}' >= '2000-01-01T00:00:00Z'",
    r#"timestamp("{{workflow.scheduledTime}}") >= timestamp("2000-01-01T00:00:00Z")"#
)]
#[case(
    "{{workflow.duration}} > 0.5",
    "double(string(workflow.duration)) > 0.5"
)]
#[case(
    "'{{workflow.parameters.json}}' =~ 'linux'",
    r#"workflow.parameters.json.matches("linux")"#
)]
#[case(
    "'{{workflow.failures}}' != 'null' && '{{workflow.failures}}' =~ 'build'",
    r#"workflow.failures != "null" && workflow.failures.matches("build")"#
)]
#[case(
    "'{{steps.a.status}}' == 'Succeeded'",
    r#"steps["a"].status == "Succeeded""#
)]
#[case(
    "{{workflow.status}} == Succeeded",
    r#"workflow.status == "Completed""#
)]
#[case(
    "{{steps.a.outputs.result}} =~ '^v[0-9]'",
    r#"steps["a"].outputs.result.matches("^v[0-9]")"#
)]
#[case(
    "{{steps.coin-flip.outputs.result}} == 5",
    r#"steps["coin-flip"].outputs.result == "5""#
)]
#[case(
    "{{steps.count.outputs.result}} < {{inputs.parameters.limit}}",
    r#"double(steps["count"].outputs.result) < double("{{inputs.parameters.limit}}")"#
)]
fn when_is_translated_to_cel(#[case] argo: &str, #[case] cel: &str) {
    assert_eq!(when::to_cel(argo).as_deref(), Ok(cel));
}

#[rstest]
#[case("{{=asInt(steps.a.outputs.result) > 2}}")]
#[case("{{steps.a.outputs.result}} + 1 == 2")]
#[case("{{steps.a.ip}} == x")]
#[case("v{{steps.a.outputs.result}} == v1")]
#[case("{{steps.a.outputs.result}} in (a, b)")]
#[case("{{steps.a.startedAt}} > 'yesterday'")]
fn when_that_cannot_be_translated_safely_is_refused(#[case] argo: &str) {
    assert!(when::to_cel(argo).is_err(), "{:?}", when::to_cel(argo));
}

#[test]
fn a_retry_expression_over_the_exit_code_is_translated() {
    assert_eq!(
        when::retry_expression("asInt(lastRetry.exitCode) > 1 and lastRetry.exitCode != 7"),
        Ok("lastRetry.exitCode > 1 && lastRetry.exitCode != 7".to_string())
    );
    assert!(when::retry_expression("lastRetry.status == \"Error\"").is_err());
}

#[test]
fn docs_argo_md_is_what_the_table_generates() {
    let written = include_str!("../../../../docs/argo.md");
    assert!(
        written == table::markdown(),
        "docs/argo.md is not what the converter's table generates: run `make argo-doc` (workflow-operator convert --table > docs/argo.md)"
    );
}

#[test]
fn a_suspend_template_becomes_a_suspend_step_without_the_workflow_s_retries() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: gate}
spec:
  entrypoint: main
  retryStrategy: {limit: 2}
  templates:
    - name: main
      steps:
        - - {name: approve, template: approve}
          - {name: wait, template: wait}
    - name: approve
      suspend: {}
    - name: wait
      suspend: {duration: "20s"}
"#;
    let (workflow, problems) = one(text);
    assert!(problems.is_empty(), "{problems:?}");
    let templates = &workflow["spec"]["templates"];
    let by_name = |name: &str| {
        (templates.as_array().unwrap().iter())
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        by_name("approve"),
        json!({"name": "approve", "suspend": {}})
    );
    assert_eq!(
        by_name("wait"),
        json!({"name": "wait", "suspend": {"duration": "20s"}})
    );
}

#[test]
fn a_suspend_template_s_supplied_outputs_are_kept_with_their_input_s_default_and_enum() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: gate}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - {name: approve, template: approve}
    - name: approve
      suspend: {}
      inputs:
        parameters:
          - {name: approve, default: "NO", enum: ["YES", "NO"], description: deploy?}
      outputs:
        parameters:
          - {name: approve, valueFrom: {supplied: {}}}
          - {name: target, valueFrom: {supplied: {}, default: staging}}
"#;
    let (workflow, problems) = one(text);
    assert!(problems.is_empty(), "{problems:?}");
    let approve = &workflow["spec"]["templates"][0];
    assert_eq!(
        approve["outputs"],
        json!({"parameters": [
            {"name": "approve", "valueFrom": {"supplied": {}}, "default": "NO",
             "enum": ["YES", "NO"], "description": "deploy?"},
            {"name": "target", "valueFrom": {"supplied": {}}, "default": "staging"},
        ]})
    );
}

fn dag_of(tasks: &str) -> (Value, Vec<String>) {
    one(&format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {{name: d}}\nspec:\n  entrypoint: main\n  templates:\n    - name: main\n      dag:\n        tasks:\n{tasks}    - {{name: t, container: {{image: busybox}}}}\n"
    ))
}

#[test]
fn depends_on_a_failure_runs_after_it_as_a_when_and_the_failure_does_not_fail_the_run() {
    let (workflow, problems) = dag_of(
        "          - {name: a, template: t}
          - {name: on-fail, template: t, depends: 'a.Failed || a.Errored'}
          - {name: after, template: t, depends: on-fail}
          - {name: either, template: t, depends: '(a.Succeeded || on-fail.Succeeded) && !a.Skipped'}
          - {name: plain, template: t, depends: 'after && either.Succeeded'}
",
    );
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["containers"],
        json!([
            {"stepName": "a", "template": "t", "continueOn": {"failed": true}},
            {"stepName": "on-fail", "template": "t", "dependsOn": ["a"],
             "when": r#"(steps["a"].status == "Failed" || steps["a"].status == "Error")"#},
            {"stepName": "after", "template": "t", "dependsOn": ["on-fail"],
             "when": r#"steps["on-fail"].status == "Succeeded""#},
            {"stepName": "either", "template": "t", "dependsOn": ["a", "on-fail"],
             "when": r#"((steps["a"].status == "Succeeded" || steps["on-fail"].status == "Succeeded") && !(steps["a"].status == "Skipped"))"#},
            {"stepName": "plain", "template": "t", "dependsOn": ["after", "either"],
             "when": r#"(steps["after"].status == "Succeeded" && steps["either"].status == "Succeeded")"#},
        ])
    );
}

#[test]
fn a_depends_that_cannot_keep_argos_meaning_is_named_with_its_path_and_why() {
    let (_, problems) = dag_of(
        "          - {name: a, template: t}
          - {name: on-fail, template: t, depends: a.Failed}
          - {name: needs-a, template: t, depends: a}
          - {name: fan, template: t, depends: a.AnySucceeded}
          - {name: odd, template: t, depends: 'a.Done'}
",
    );
    assert_eq!(
        problems,
        [
            r#"spec.templates[0].dag.tasks[3].depends: depends "a.AnySucceeded" is not translated: "a.AnySucceeded": .AnySucceeded (of a task that fans out) is not supported yet"#,
            r#"spec.templates[0].dag.tasks[4].depends: depends "a.Done" is not translated: "a.Done": "Done" is not a task result"#,
            "spec.templates[0].dag.tasks[2].depends: when a fails, Argo omits needs-a and fails the workflow; here a may fail (another task depends on its failure), needs-a is skipped and the workflow completes",
        ]
    );
}

#[test]
fn a_parameter_from_a_configmap_keeps_its_key_and_its_default_beside_it() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: cm-}
spec:
  entrypoint: show
  arguments:
    parameters:
      - name: colour
        valueFrom: {configMapKeyRef: {name: settings, key: colour, optional: true}, default: grey}
  templates:
    - name: show
      inputs:
        parameters:
          - name: size
            valueFrom: {configMapKeyRef: {name: settings, key: size}}
      container: {image: busybox, command: [echo, "{{workflow.parameters.colour}} {{inputs.parameters.size}}"]}
"#);
    assert_eq!(problems, Vec::<String>::new());
    let spec = &workflow["spec"];
    assert_eq!(
        spec["arguments"]["parameters"],
        json!([{"name": "colour", "default": "grey",
                "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "colour"}}}])
    );
    assert_eq!(
        spec["templates"][0]["inputs"]["parameters"],
        json!([{"name": "size", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "size"}}}])
    );
    let parsed: crate::crd::WorkFlowSpec = serde_json::from_value(spec.clone()).unwrap();
    assert!(parsed.arguments.unwrap().parameters[0].value_from.is_some());
}

/// A template some call fans out over keeps no metrics (the compiler refuses a fanned-out
/// step's): they are named as not converted, so the workflow still converts whole otherwise.
#[test]
fn a_template_called_with_a_fan_out_has_its_metrics_named_not_kept() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: m}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - {name: each, template: say, withItems: [a, b]}
    - name: say
      metrics:
        prometheus: [{name: said, help: h, counter: {value: "1"}}]
      container: {image: alpine, command: [echo]}
"#);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("templates[1].metrics") && problems[0].contains("withItems"),
        "{problems:?}"
    );
    let say = (workflow["spec"]["templates"].as_array().unwrap().iter())
        .find(|t| t["name"] == "say")
        .unwrap();
    assert!(say.get("metrics").is_none(), "{say}");
}

/// Argo's metrics are kept: the workflow's as `spec.metrics`, a container template's on the
/// template (so on each step calling it); a dag template's are named as not converted.
#[test]
fn metrics_are_kept_on_the_workflow_and_container_templates_and_named_on_a_dag_template() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: m}
spec:
  entrypoint: main
  metrics:
    prometheus: [{name: wf, help: h, gauge: {value: "{{workflow.duration}}"}}]
  templates:
    - name: main
      dag:
        tasks: [{name: a, template: inner}]
    - name: inner
      metrics:
        prometheus: [{name: nested, help: h, counter: {value: "1"}}]
      dag:
        tasks: [{name: b, template: say}]
    - name: say
      metrics:
        prometheus: [{name: said, help: h, counter: {value: "1"}}]
      container: {image: alpine, command: [echo]}
"#);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("templates[1].metrics")
            && problems[0].contains("dag or steps template's metrics"),
        "{problems:?}"
    );
    let spec = &workflow["spec"];
    assert_eq!(spec["metrics"]["prometheus"][0]["name"], "wf");
    let say = (spec["templates"].as_array().unwrap().iter())
        .find(|t| t["name"] == "say")
        .unwrap();
    assert_eq!(say["metrics"]["prometheus"][0]["name"], "said");
}

#[test]
fn lifecycle_hooks_are_kept_their_expressions_in_cel_and_a_steps_on_exit_is_its_exit_hook() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: hooked}
spec:
  entrypoint: main
  hooks:
    exit: {template: note}
    done:
      expression: workflow.status == "Succeeded" or workflow.status == "Error"
      template: note
    named:
      expression: workflow.name == "x"
      template: note
  templates:
    - name: main
      dag:
        tasks:
          - name: a
            template: note
            onExit: note
            hooks:
              running: {expression: 'tasks.a.status == "Running"', template: note}
              failed:
                expression: tasks["a"].status == "Failed"
                template: note
                arguments: {parameters: [{name: text, value: "{{tasks.a.status}}"}]}
          - name: b
            template: note
            hooks:
              ref: {expression: 'tasks.b.status == "Running"', templateRef: {name: t, template: u}}
    - name: note
      inputs: {parameters: [{name: text, value: hi}]}
      container: {image: alpine, command: [echo, "{{inputs.parameters.text}}"]}
"#);
    let spec = &workflow["spec"];
    assert_eq!(
        spec["hooks"],
        json!({
            "exit": {"template": "note"},
            "done": {"template": "note", "expression": "workflow.status == \"Completed\" || workflow.status == \"Failed\""},
        })
    );
    assert_eq!(
        spec["containers"][0]["hooks"],
        json!({
            "exit": {"template": "note"},
            "running": {"template": "note", "expression": "steps.a.status == \"Running\""},
            "failed": {"template": "note", "expression": "steps[\"a\"].status == \"Failed\"",
                       "arguments": {"parameters": [{"name": "text", "value": "{{steps.a.status}}"}]}},
        })
    );
    assert_eq!(spec["containers"][1].get("hooks"), None);
    assert_eq!(
        problems,
        [
            "spec.hooks.named: the hook is left out: expression \"workflow.name == \\\"x\\\"\" reads workflow.name: only workflow.status and a step's status are translated",
            "spec.templates[0].dag.tasks[1].hooks.ref: the hook is left out: a hook calling a templateRef is not supported yet",
        ]
    );
}

#[test]
fn a_daemon_template_keeps_daemon_and_its_probe_and_daemoned_reads_steps_daemoned() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: served}
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - {name: server, template: server}
          - name: client
            template: client
            depends: server.Daemoned
            arguments: {parameters: [{name: ip, value: "{{tasks.server.ip}}"}]}
    - name: server
      daemon: true
      container:
        image: nginx:1.27
        readinessProbe: {httpGet: {path: /, port: 80}, initialDelaySeconds: 2}
    - name: client
      inputs: {parameters: [{name: ip}]}
      container: {image: alpine:3.20, command: [wget, "http://{{inputs.parameters.ip}}/"]}
"#);
    assert_eq!(problems, Vec::<String>::new());
    let spec = &workflow["spec"];
    let client = &spec["containers"][1];
    assert_eq!(client["when"], "steps[\"server\"].daemoned", "{client}");
    assert_eq!(
        client["arguments"]["parameters"][0]["value"],
        "{{steps.server.ip}}"
    );
    let server = &spec["templates"][0];
    assert_eq!(server["daemon"], true, "{server}");
    assert_eq!(
        server["readinessProbe"],
        json!({"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": 2})
    );
}

#[test]
fn mirror_volume_mounts_writes_the_template_s_mounts_onto_its_init_containers_and_sidecars() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: mirror}
spec:
  entrypoint: main
  volumes: [{name: shared, emptyDir: {}}]
  templates:
    - name: main
      initContainers:
        - {name: prepare, image: alpine, mirrorVolumeMounts: true}
      sidecars:
        - name: watch
          image: alpine
          mirrorVolumeMounts: true
          volumeMounts: [{name: own, mountPath: /own}]
        - {name: apart, image: alpine, mirrorVolumeMounts: false}
      container:
        image: alpine
        volumeMounts: [{name: shared, mountPath: /shared}]
"#);
    assert_eq!(problems, Vec::<String>::new());
    let step = &workflow["spec"]["templates"][0];
    let shared = json!({"name": "shared", "mountPath": "/shared"});
    assert_eq!(
        step["initContainers"],
        json!([{"name": "prepare", "image": "alpine", "volumeMounts": [shared]}])
    );
    assert_eq!(
        step["sidecars"],
        json!([
            {"name": "watch", "image": "alpine",
             "volumeMounts": [{"name": "own", "mountPath": "/own"}, shared]},
            {"name": "apart", "image": "alpine"},
        ])
    );
}

#[test]
fn a_semaphore_reads_its_limit_from_its_configmap_key_and_is_named_after_it() {
    let (workflow, problems) = one(r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: sem}
spec:
  entrypoint: main
  synchronization:
    semaphores:
      - configMapKeyRef: {name: limits, key: db}
      - {configMapKeyRef: {name: limits, key: other}, namespace: elsewhere}
      - database: {key: workflow}
  podSpecPatch: '{"priority": 1}'
  templates:
    - name: main
      synchronization:
        semaphore: {configMapKeyRef: {name: limits, key: step}}
      container: {image: alpine}
"#);
    assert_eq!(
        problems,
        [
            r#"spec.synchronization.semaphores[1].namespace: a semaphore of another namespace ("elsewhere") is not supported: its ConfigMap is read in the workflow's"#,
            "spec.synchronization.semaphores[2]: semaphores of a database are not supported",
        ]
    );
    let spec = &workflow["spec"];
    assert_eq!(
        spec["synchronization"],
        json!({"semaphores": [
            {"name": "limits/db", "limitFrom": {"configMapKeyRef": {"name": "limits", "key": "db"}}},
        ]})
    );
    assert_eq!(spec["podSpecPatch"], r#"{"priority": 1}"#);
    assert_eq!(
        spec["templates"][0]["synchronization"],
        json!({"semaphores": [
            {"name": "limits/step", "limitFrom": {"configMapKeyRef": {"name": "limits", "key": "step"}}},
        ]})
    );
}

#[test]
fn an_exit_handler_step_reading_another_converts_to_exit_steps_that_compile() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: exit}
spec:
  entrypoint: say
  onExit: handler
  templates:
    - name: handler
      steps:
        - - {name: report, template: say, continueOn: {failed: true}}
        - - {name: after, template: say, when: "{{steps.report.status}} == Failed"}
          - name: echo
            template: echo
            arguments: {parameters: [{name: text, value: "{{steps.report.exitCode}}"}]}
    - name: say
      container: {image: busybox:1.36, command: [echo, hi]}
    - name: echo
      inputs: {parameters: [{name: text}]}
      container: {image: busybox:1.36, command: [echo, "{{inputs.parameters.text}}"]}
"#;
    let (converted, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        converted["spec"]["onExit"][1]["dependsOn"],
        json!(["report"]),
        "{converted}"
    );
    let compiled = compiled(converted);
    // Both read only how `report` ended.
    assert_eq!(compiled.flow.exit_ended_read, [0].into());
    assert!(compiled.flow.exit_read.is_empty());
}

#[test]
fn a_memoize_becomes_a_cache_and_its_config_map_is_noted_not_named_a_problem() {
    let (document, notes) = noted(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: memo}
spec:
  entrypoint: gen
  templates:
    - name: gen
      memoize: {key: "k-{{workflow.name}}", maxAge: 1h, cache: {configMap: {name: gen-cache}}}
      container: {image: alpine, command: [date]}
"#,
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(
            "spec.templates[0].memoize.cache: each entry is kept in a ConfigMap of its own"
        ) && notes[0].contains("not in the ConfigMap gen-cache"),
        "{notes:?}"
    );
    let templates = &document["spec"]["templates"];
    assert_eq!(
        templates[0]["cache"],
        json!({"key": "k-{{workflow.name}}", "maxAge": "1h"}),
        "{templates}"
    );
}

#[test]
fn a_generate_name_among_the_labels_is_named_with_its_fix() {
    let text = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  labels:\n    team: a\n    generateName: gifs-\nspec:\n  entrypoint: main\n  templates:\n    - name: main\n      container: {image: alpine, command: [echo]}\n";
    let (workflow, problems) = one(text);
    assert_eq!(
        problems,
        [
            "metadata.labels.generateName: a label named generateName, and metadata has no generateName: indented one level too deep? move it to metadata.generateName (Argo refuses the document as it is too)"
        ]
    );
    assert_eq!(workflow["metadata"]["labels"]["generateName"], "gifs-");
    let (_, problems) = one(&text.replace("metadata:\n", "metadata:\n  generateName: gifs-\n"));
    assert_eq!(problems, Vec::<String>::new());
}

#[test]
fn an_exit_step_named_as_a_workflow_step_is_renamed_and_so_are_the_exit_steps_references() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: twins}
spec:
  entrypoint: main
  onExit: handler
  templates:
    - name: main
      steps:
        - - {name: notify, template: say}
    - name: handler
      steps:
        - - {name: notify, template: say}
        - - {name: after, template: echo, when: "{{steps.notify.status}} == Succeeded",
             arguments: {parameters: [{name: text, value: "{{steps.notify.exitCode}}"}]}}
    - name: say
      container: {image: busybox:1.36, command: [echo, hi]}
    - name: echo
      inputs: {parameters: [{name: text}]}
      container: {image: busybox:1.36, command: [echo, "{{inputs.parameters.text}}"]}
"#;
    let (document, notes) = noted(text);
    assert!(
        notes
            .iter()
            .any(|n| n.contains(r#"exit step "notify" is named "notify-on-exit""#)),
        "{notes:?}"
    );
    let spec = &document["spec"];
    assert_eq!(spec["containers"][0]["stepName"], "notify");
    assert_eq!(spec["onExit"][0]["stepName"], "notify-on-exit");
    let after = &spec["onExit"][1];
    assert_eq!(after["dependsOn"], json!(["notify-on-exit"]));
    assert_eq!(
        after["when"],
        r#"steps["notify-on-exit"].status == "Succeeded""#
    );
    let argument = &after["arguments"]["parameters"][0]["value"];
    assert_eq!(argument, "{{steps.notify-on-exit.exitCode}}");
    compiled(document);
}

#[test]
fn an_output_parameter_named_result_is_renamed_with_its_references_apart_from_the_standard_output()
{
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: results}
spec:
  entrypoint: main
  templates:
    - name: main
      steps:
        - - {name: make, template: make}
        - - name: show
            template: show
            arguments:
              parameters:
                - {name: file, value: "{{steps.make.outputs.parameters.result}}"}
                - {name: said, value: "{{steps.make.outputs.result}}"}
    - name: make
      script:
        image: alpine:3.20
        command: [sh]
        source: "echo said; echo -n kept > /tmp/r"
      outputs:
        parameters:
          - name: result
            valueFrom: {path: /tmp/r}
    - name: show
      inputs: {parameters: [{name: file}, {name: said}]}
      container: {image: alpine:3.20, command: [echo, "{{inputs.parameters.file}} {{inputs.parameters.said}}"]}
"#;
    let (document, notes) = noted(text);
    assert!(
        notes
            .iter()
            .any(|n| n
                .contains(r#"output parameter "result" of template make is "result-parameter""#)),
        "{notes:?}"
    );
    let spec = &document["spec"];
    let arguments = &spec["containers"][1]["arguments"]["parameters"];
    assert_eq!(
        arguments[0]["value"],
        "{{steps.make.outputs.parameters.result-parameter}}"
    );
    assert_eq!(arguments[1]["value"], "{{steps.make.outputs.result}}");
    compiled(document);
}

/// Argo's raw input artifacts: a container template keeps its own; the workflow's raw
/// argument artifact is given to the container entrypoint's input of that name at the path it
/// declares; a call's raw argument is its step's input.
#[test]
fn raw_input_artifacts_stay_on_their_template_and_the_workflows_go_to_the_entrypoint() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: raw-}
spec:
  entrypoint: show
  arguments:
    parameters: [{name: n, value: "2"}]
    artifacts:
      - name: lines
        raw: {data: "1\n2\n3\n"}
  templates:
    - name: show
      inputs:
        parameters: [{name: n}]
        artifacts:
          - {name: lines, path: /in/lines}
          - name: note
            path: /in/note
            raw: {data: "first {{inputs.parameters.n}}\n"}
      container: {image: alpine:3.20, command: [sh, -c, "head -n {{inputs.parameters.n}} /in/lines; cat /in/note"]}
"#;
    let (workflow, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    let spec = &workflow["spec"];
    assert_eq!(
        spec["arguments"],
        json!({"parameters": [{"name": "n", "value": "2"}]})
    );
    assert_eq!(
        spec["containers"],
        json!([{"stepName": "show", "template": "show",
                "arguments": {"parameters": [{"name": "n", "value": "{{workflow.parameters.n}}"}]},
                "inputs": {"artifacts": [{"name": "lines", "path": "/in/lines", "raw": {"data": "1\n2\n3\n"}}]}}])
    );
    assert_eq!(
        spec["templates"][0]["inputs"]["artifacts"],
        json!([{"name": "note", "path": "/in/note", "raw": {"data": "first {{inputs.parameters.n}}\n"}}])
    );
}

/// A `dag` entrypoint's step taking `{{inputs.artifacts.NAME}}` takes the workflow's raw
/// artifact (or the entrypoint's own raw one); what has no counterpart is named.
#[test]
fn a_dag_entrypoints_input_artifacts_are_the_workflows_raw_ones_and_other_kinds_are_named() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: seeded}
spec:
  entrypoint: main
  arguments:
    artifacts:
      - {name: seed, raw: {data: seed-content}}
      - {name: remote, s3: {key: a/b}}
  templates:
    - name: main
      inputs:
        artifacts:
          - {name: seed}
          - {name: own, raw: {data: own-content}}
      dag:
        tasks:
          - name: print
            template: print
            arguments:
              artifacts:
                - {name: in, from: "{{inputs.artifacts.seed}}"}
                - {name: other, from: "{{inputs.artifacts.own}}"}
    - name: print
      inputs: {artifacts: [{name: in, path: /tmp/in}, {name: other, path: /tmp/other}]}
      container: {image: alpine:3.20, command: [cat, /tmp/in, /tmp/other]}
    - name: nested
      inputs: {artifacts: [{name: x, path: /x, raw: {data: x}}]}
      steps: [[{name: p, template: print}]]
    - name: out
      outputs: {artifacts: [{name: o, path: /o, raw: {data: x}}]}
      container: {image: alpine:3.20}
"#;
    let (workflow, problems) = one(text);
    assert_eq!(
        workflow["spec"]["containers"][0]["inputs"],
        json!({"artifacts": [
            {"name": "in", "path": "/tmp/in", "raw": {"data": "seed-content"}},
            {"name": "other", "path": "/tmp/other", "raw": {"data": "own-content"}},
        ]})
    );
    assert_eq!(
        problems,
        [
            "spec.arguments.artifacts[1].s3: an artifact's own location is not supported: artifacts live in the workflow's repository",
            "spec.templates[3].outputs.artifacts: an output artifact with raw: raw is an input artifact's content (an output is read from its path)",
            "spec.templates[2].inputs.artifacts: raw input artifacts of a dag or steps template are supported only on the entrypoint: give them to the steps it calls",
        ]
    );
}

#[test]
fn a_workflows_raw_artifact_the_entrypoint_does_not_declare_and_one_from_a_step_are_named() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: unused}
spec:
  entrypoint: show
  arguments:
    artifacts:
      - {name: lost, raw: {data: x}}
      - {name: taken, from: "{{workflow.outputs.artifacts.a}}"}
  templates:
    - name: show
      container: {image: alpine:3.20, command: [echo]}
"#;
    let (_, problems) = one(text);
    assert_eq!(
        problems,
        [
            "spec.arguments.artifacts: a workflow's input artifact taken from elsewhere than raw is not supported yet",
            "spec.arguments.artifacts: artifact \"lost\": the entrypoint declares no input artifact of that name with a path",
        ]
    );
    let by_reference = "{apiVersion: argoproj.io/v1alpha1, kind: Workflow, metadata: {name: r}, spec: {workflowTemplateRef: {name: t}, arguments: {artifacts: [{name: a, raw: {data: x}}]}}}";
    let (_, problems) = one(by_reference);
    assert_eq!(
        problems,
        [
            "spec.arguments.artifacts: artifact \"a\": the workflow names no entrypoint here to give it to (a workflowTemplateRef's is not given artifacts yet)"
        ]
    );
}

/// Argo's path placeholders (`examples/artifact-path-placeholders`): the paths a template
/// declares, written out where it names them.
#[test]
fn a_templates_path_placeholders_are_its_declared_paths() {
    let text = r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: paths}
spec:
  entrypoint: head
  templates:
    - name: head
      inputs:
        artifacts: [{name: text, path: /in/text, raw: {data: "1\n2\n"}}]
      outputs:
        parameters: [{name: count, valueFrom: {path: /out/count}}]
        artifacts: [{name: text, path: /out/text}]
      container:
        image: busybox
        command: [sh, -c, 'head -n 1 < "{{inputs.artifacts.text.path}}" | tee "{{ outputs.artifacts.text.path }}" | wc -l > "{{outputs.parameters.count.path}}"']
"#;
    let (workflow, problems) = one(text);
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        workflow["spec"]["templates"][0]["command"][2],
        r#"head -n 1 < "/in/text" | tee "/out/text" | wc -l > "/out/count""#
    );
}
