use serde_json::json;

use super::*;
use crate::testing::step;

fn resource_step(yaml: &str) -> Step {
    let mut step = step("act", &[]);
    step.image = String::new();
    step.command = None;
    step.resource = Some(Box::new(serde_yaml::from_str(yaml).unwrap()));
    step
}

fn job() -> Value {
    json!({
        "metadata": {"name": "rand-num-x", "labels": {"app": "web", "tier": "front"}},
        "spec": {"completions": 3},
        "status": {
            "succeeded": 3,
            "failed": 0,
            "phase": "Running",
            "ready": true,
            "startTime": null,
            "conditions": [{"type": "Complete", "status": "True"}]
        }
    })
}

fn holds(condition: &str) -> bool {
    Condition::parse(condition).unwrap().all_hold(&job())
}

#[test]
fn a_condition_reads_fields_with_each_operator_of_a_label_selector() {
    let cases = [
        ("status.succeeded > 2", true),
        ("status.succeeded > 3", false),
        ("status.succeeded < 4", true),
        ("status.failed > -1", true),
        ("status.phase == Running", true),
        ("status.phase = Running", true),
        ("status.phase != Running", false),
        ("status.phase in (Failed, Running)", true),
        ("status.phase notin (Failed, Error)", true),
        ("status.phase notin (Running)", false),
        ("status.ready == true", true),
        ("status.ready", true),
        ("!status.ready", false),
        ("!status.missing", true),
        ("status.missing", false),
        // A missing field is none of the values, and compares as nothing.
        ("status.missing != x", true),
        ("status.missing notin (x)", true),
        ("status.missing == x", false),
        ("status.missing > 0", false),
        // A text that is not a number compares as nothing.
        ("status.phase > 0", false),
        // null reads as empty text.
        ("status.startTime ==", true),
        ("status.conditions.0.type == Complete", true),
        ("status.conditions.1.type == Complete", false),
        (
            "metadata.labels.app == web,metadata.labels.tier == front",
            true,
        ),
        (
            "metadata.labels.app == web, metadata.labels.tier == back",
            false,
        ),
    ];
    for (condition, expected) in cases {
        assert_eq!(holds(condition), expected, "{condition}");
    }
}

#[test]
fn a_condition_that_is_not_a_selector_is_refused_saying_why() {
    let refused = |condition: &str| Condition::parse(condition).unwrap_err();
    assert!(refused("status.succeeded > x").contains("\"x\" is not an integer"));
    assert!(refused("status.succeeded >= 1").contains("expected a value"));
    assert!(refused("status.phase in Failed").contains("in and notin take a list"));
    assert!(refused("status.phase in ()").contains("the list of values is empty"));
    assert!(refused("status.phase == Failed Error").contains("expected ',' or the end"));
    assert!(refused("status.conditions[0].type == x").contains("is not a field path"));
    assert!(refused("== x").contains("expected a field path"));
    assert!(refused("status.phase == a b,").contains("expected ',' or the end"));
    assert!(refused("status.phase == 'Failed'").contains("is not a value"));
}

#[test]
fn failure_is_any_one_requirement_success_all_of_them_failure_first() {
    let task = |success: Option<&str>, failure: Option<&str>| ResourceTask {
        success_condition: success.map(String::from),
        failure_condition: failure.map(String::from),
        ..ResourceTask::default()
    };
    let object = job();
    assert_eq!(
        verdict(&task(Some("status.succeeded > 2"), None), &object),
        Ok(Verdict::Succeeded)
    );
    assert_eq!(
        verdict(
            &task(Some("status.succeeded > 2, status.phase == Done"), None),
            &object
        ),
        Ok(Verdict::Waiting)
    );
    assert_eq!(
        verdict(
            &task(
                Some("status.succeeded > 2"),
                Some("status.phase == Failed, status.succeeded > 1")
            ),
            &object
        ),
        Ok(Verdict::Failed(
            "failureCondition \"status.succeeded > 1\" holds (status.succeeded is \"3\")".into()
        ))
    );
    // Without a success condition, a failure condition is checked once.
    assert_eq!(
        verdict(&task(None, Some("status.failed > 0")), &object),
        Ok(Verdict::Succeeded)
    );
    assert!(
        verdict(&task(Some("a >"), None), &object)
            .unwrap_err()
            .starts_with("successCondition \"a >\" does not parse")
    );
}

#[test]
fn json_path_prints_fields_as_kubectl_does() {
    let object = json!({
        "metadata": {"name": "cm-1", "labels": {"a.b/c": "x"}, "uid": "u-1"},
        "data": {"k": "v"},
        "spec": {"n": 3, "list": [{"name": "a"}, {"name": "b"}]}
    });
    let print = |template: &str| JsonPath::parse(template).unwrap().print(&object);
    assert_eq!(print("{.metadata.name}"), "cm-1");
    assert_eq!(print("{$.metadata.uid}"), "u-1");
    assert_eq!(print("{metadata.name}"), "cm-1");
    assert_eq!(print("{.metadata.labels['a.b/c']}"), "x");
    assert_eq!(print("{.spec.n}"), "3");
    assert_eq!(print("{.data}"), r#"{"k":"v"}"#);
    assert_eq!(print("{.spec.list[1].name}"), "b");
    assert_eq!(print("{.spec.list[-1].name}"), "b");
    assert_eq!(print("{.spec.list[*].name}"), "a b");
    assert_eq!(print("{.spec.list.*.name}"), "a b");
    assert_eq!(print("name={.metadata.name}/{.spec.n}"), "name=cm-1/3");
    assert_eq!(print("{.metadata.missing}"), "");
    for refused in [
        "{.spec.list[?(@.name==\"a\")]}",
        "{range .items[*]}",
        "{..name}",
        "{.a",
    ] {
        assert!(JsonPath::parse(refused).is_err(), "{refused}");
    }
}

#[test]
fn flags_name_the_object_and_kubectl_s_options_others_are_refused() {
    let parse =
        |flags: &[&str]| Flags::parse(&flags.iter().map(|f| f.to_string()).collect::<Vec<_>>());
    assert_eq!(
        parse(&["configmap", "--selector", "cleanup=true"]),
        Ok(Flags {
            object: Some(("configmap".into(), None)),
            selector: Some("cleanup=true".into()),
            ..Flags::default()
        })
    );
    assert_eq!(
        parse(&["pod/p-1", "-n=other", "--ignore-not-found"]),
        Ok(Flags {
            object: Some(("pod".into(), Some("p-1".into()))),
            namespace: Some("other".into()),
            ignore_not_found: true,
            ..Flags::default()
        })
    );
    assert_eq!(
        parse(&["job", "j", "--validate=false"]).unwrap().object,
        Some(("job".into(), Some("j".into())))
    );
    assert!(
        parse(&["--force"])
            .unwrap_err()
            .contains("\"--force\" is not a flag")
    );
    assert!(parse(&["-l"]).unwrap_err().contains("-l needs a value"));
    assert!(parse(&["a", "b", "c"]).unwrap_err().contains("one type"));
}

#[test]
fn a_generated_name_is_the_same_for_each_try_of_a_job_and_another_for_another_job() {
    let first = generated_name("rand-num-", "wf-abc-step-0");
    assert_eq!(first, generated_name("rand-num-", "wf-abc-step-0"));
    assert_ne!(first, generated_name("rand-num-", "wf-abc-step-1"));
    assert!(first.starts_with("rand-num-") && first.len() == "rand-num-".len() + 5);
    assert_eq!(generated_name(&"p".repeat(70), "j").len(), 63);
}

#[test]
fn outputs_are_read_from_the_object_or_are_their_defaults_without_one() {
    let task = ResourceTask {
        parameters: vec![
            JsonPathTask {
                name: "name".into(),
                json_path: "{.metadata.name}".into(),
                default: Some("none".into()),
            },
            JsonPathTask {
                name: "done".into(),
                json_path: "{.status.succeeded}".into(),
                default: None,
            },
        ],
        ..ResourceTask::default()
    };
    let read = outputs(&task, Some(&job())).unwrap();
    assert_eq!(read["name"], "rand-num-x");
    assert_eq!(read["done"], "3");
    let none = outputs(&task, None).unwrap();
    assert_eq!((none["name"].as_str(), none["done"].as_str()), ("none", ""));
}

#[test]
fn a_resource_step_s_problems_name_the_field_and_why() {
    let problems = |yaml: &str| problems(&resource_step(yaml));
    let create = "action: create\nmanifest: |\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    generateName: cm-\n";
    assert_eq!(problems(create), Vec::<String>::new());
    let found = problems("action: make\nmanifest: 'a: [b'\nsuccessCondition: 'x >'");
    assert!(found[0].contains("resource.action: \"make\" is not an action (one of get, create"));
    assert!(found[1].contains("resource.successCondition: \"x >\" does not parse"));
    assert!(
        found[2].contains("resource.manifest is not YAML"),
        "{found:?}"
    );
    let found = problems(
        "action: apply\nmanifest: '{apiVersion: v1, kind: ConfigMap, metadata: {generateName: c-}}'",
    );
    assert!(found[0].contains("generateName is create's"), "{found:?}");
    let found = problems("action: delete");
    assert!(
        found[0].contains("resource.manifest: required"),
        "{found:?}"
    );
    assert_eq!(
        problems("action: delete\nflags: [configmap, --selector, a=b]"),
        Vec::<String>::new()
    );
    let found =
        problems("action: patch\nmergeStrategy: json\nmanifest: '[{op: add, path: /a, value: b}]'");
    assert!(
        found[0].contains("a json patch names its object in flags"),
        "{found:?}"
    );
    let found = problems(
        "action: create\nmergeStrategy: merge\nmanifest: '{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}'",
    );
    assert!(
        found[0].contains("mergeStrategy: only a patch has one"),
        "{found:?}"
    );
    // A text holding a reference is checked once filled.
    assert_eq!(
        problems(
            "action: get\nmanifest: 'name: {{inputs.parameters.x}}'\nsuccessCondition: '{{inputs.parameters.c}}'"
        ),
        Vec::<String>::new()
    );
    let mut with_image = resource_step(create);
    with_image.image = "busybox".into();
    with_image.outputs = Some(Box::new(
        serde_yaml::from_str("parameters: [{name: a, valueFrom: {path: /tmp/a}}, {name: b, valueFrom: {jsonPath: '{.a'}}]").unwrap(),
    ));
    let found = super::problems(&with_image);
    assert!(
        found[0].contains("image: a resource step acts on an object"),
        "{found:?}"
    );
    assert!(
        found[1].contains("output parameter \"a\": reads no valueFrom.jsonPath"),
        "{found:?}"
    );
    assert!(
        found[2].contains("output parameter \"b\": \"{.a\": a { without its }"),
        "{found:?}"
    );
}

#[test]
fn the_task_carries_the_outputs_json_paths_and_fills_its_texts() {
    let step = resource_step(
        "action: delete\nflags: [cm, '{{inputs.parameters.n}}']\nsuccessCondition: 'a == {{x}}'",
    );
    let outputs: StepOutputs = serde_yaml::from_str(
        "parameters: [{name: n, default: gone, valueFrom: {jsonPath: '{.metadata.name}'}}]",
    )
    .unwrap();
    let task = task_of(step.resource.as_deref().unwrap(), Some(&outputs)).filled(|text| {
        text.replace("{{inputs.parameters.n}}", "cm-1")
            .replace("{{x}}", "b")
    });
    assert_eq!(task.flags, ["cm", "cm-1"]);
    assert_eq!(task.success_condition.as_deref(), Some("a == b"));
    assert_eq!(task.merge_strategy, "strategic");
    assert_eq!(
        task.parameters,
        [JsonPathTask {
            name: "n".into(),
            json_path: "{.metadata.name}".into(),
            default: Some("gone".into())
        }]
    );
}
