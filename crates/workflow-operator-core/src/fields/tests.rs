//! The decision of [`super`] held against what the run id does, against docs/api.md, and
//! against itself (every field has a row).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;
use crate::crd::WorkFlow;
use crate::plan;

/// Which object of the base workflow a row patches.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// `spec`.
    Spec,
    /// `spec.containers[i]`.
    Step(usize),
    /// `spec.templates[0]`, the container template `t`.
    Template,
    /// The whole object: for a spec or template field whose change needs more than its own
    /// value (a shared template read into the status, a template renamed with its callers).
    Whole,
}

/// A workflow using every kind of step: `a` reads a parameter, `b` is plain (the step rows'
/// target), `c` calls the container template `t`, `e` calls the DAG template `d`; the status
/// holds the shared template `shared` as read.
fn base() -> Value {
    json!({
        "apiVersion": "workflow.crd.com/v1",
        "kind": "WorkFlow",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "arguments": {"parameters": [{"name": "p", "value": "one"}]},
            "templates": [
                {"name": "t", "inputs": {"parameters": [{"name": "x", "default": "1"}]},
                 "image": "busybox:1.36", "command": ["sh", "-c", "echo {{inputs.parameters.x}}"]},
                {"name": "d", "dag": [{"stepName": "inner", "image": "busybox:1.36"}]},
            ],
            "containers": [
                {"stepName": "a", "image": "busybox:1.36",
                 "command": ["sh", "-c", "echo {{workflow.parameters.p}}"]},
                {"stepName": "b", "dependsOn": ["a"], "image": "busybox:1.36",
                 "command": ["sh", "-c", "echo b"]},
                {"stepName": "c", "dependsOn": ["a"], "template": "t"},
                {"stepName": "e", "template": "d"},
            ],
        },
        "status": {"resolvedTemplates": [{
            "kind": "WorkFlowTemplate", "name": "shared",
            "spec": {
                "templates": [{"name": "st", "image": "busybox:1.36", "command": ["echo", "shared"]}],
                "containers": [{"stepName": "s1", "image": "busybox:1.36"}],
            },
        }]},
    })
}

/// The run id the operator gives `workflow`: of its spec with templates and parameters
/// expanded, as it plans it.
fn run_of(workflow: &Value) -> String {
    let workflow: WorkFlow = serde_json::from_value(workflow.clone()).expect("a workflow");
    plan::prepare_spec(&workflow).1.run
}

fn patched(target: Target, patch: &Value) -> Value {
    let mut workflow = base();
    let object = match target {
        Target::Spec => &mut workflow["spec"],
        Target::Step(i) => &mut workflow["spec"]["containers"][i],
        Target::Template => &mut workflow["spec"]["templates"][0],
        Target::Whole => &mut workflow,
    };
    json_patch::merge(object, patch);
    workflow
}

/// A change of each step field, to step `b` unless it needs a step calling a template.
fn step_rows() -> Vec<(&'static str, Target, Value)> {
    let b = Target::Step(1);
    let c = Target::Step(2);
    let container = json!([{"name": "x", "image": "busybox:1.36"}]);
    vec![
        ("stepName", b, json!({"stepName": "b2"})),
        ("image", b, json!({"image": "busybox:1.37"})),
        ("command", b, json!({"command": ["sh", "-c", "echo B"]})),
        ("dependsOn", b, json!({"dependsOn": []})),
        ("args", b, json!({"args": ["x"]})),
        ("env", b, json!({"env": [{"name": "K", "value": "V"}]})),
        (
            "envFrom",
            b,
            json!({"envFrom": [{"configMapRef": {"name": "cm"}}]}),
        ),
        (
            "volumeMounts",
            b,
            json!({"volumeMounts": [{"name": "v", "mountPath": "/v"}]}),
        ),
        ("workingDir", b, json!({"workingDir": "/tmp"})),
        ("imagePullPolicy", b, json!({"imagePullPolicy": "Always"})),
        (
            "securityContext",
            b,
            json!({"securityContext": {"runAsUser": 1000}}),
        ),
        (
            "resources",
            b,
            json!({"resources": {"limits": {"cpu": "1"}}}),
        ),
        ("timeout", b, json!({"timeout": 5})),
        ("retries", b, json!({"retries": 2})),
        ("continueOn", b, json!({"continueOn": {"failed": true}})),
        ("retryStrategy", b, json!({"retryStrategy": {"limit": 2}})),
        (
            "synchronization",
            b,
            json!({"synchronization": {"mutex": {"name": "m"}}}),
        ),
        ("cache", b, json!({"cache": {"key": "k"}})),
        (
            "metrics",
            b,
            json!({"metrics": {"prometheus": [{"name": "m", "counter": {"value": "1"}}]}}),
        ),
        ("when", b, json!({"when": "steps.a.phase == 'Succeeded'"})),
        ("hooks", b, json!({"hooks": {"exit": {"template": "t"}}})),
        ("withItems", b, json!({"withItems": ["x", "y"]})),
        (
            "withParam",
            b,
            json!({"withParam": "{{steps.a.outputs.list}}"}),
        ),
        ("withSequence", b, json!({"withSequence": {"count": 2}})),
        ("template", c, json!({"template": "d"})),
        (
            "templateRef",
            c,
            json!({"template": null, "templateRef": {"name": "shared", "template": "st"}}),
        ),
        (
            "arguments",
            c,
            json!({"arguments": {"parameters": [{"name": "x", "value": "2"}]}}),
        ),
        ("source", b, json!({"source": "echo v2"})),
        (
            "outputs",
            b,
            json!({"outputs": {"parameters": [{"name": "k", "valueFrom": {"path": "/tmp/k"}}]}}),
        ),
        (
            "inputs",
            b,
            json!({"inputs": {"artifacts": [{"name": "i", "from": "{{steps.a.outputs.artifacts.o}}", "path": "/in"}]}}),
        ),
        ("initContainers", b, json!({"initContainers": container})),
        ("sidecars", b, json!({"sidecars": container})),
        ("interactive", b, json!({"interactive": true})),
        ("daemon", b, json!({"daemon": true})),
        (
            "readinessProbe",
            b,
            json!({"readinessProbe": {"tcpSocket": {"port": 80}}}),
        ),
        ("suspend", b, json!({"suspend": {"duration": "5s"}})),
        ("fail", b, json!({"fail": "not yet"})),
        ("http", b, json!({"http": {"url": "http://svc/ping"}})),
        (
            "resource",
            b,
            json!({"resource": {"action": "get", "flags": ["cm", "x"]}}),
        ),
        ("nodeSelector", b, json!({"nodeSelector": {"disk": "ssd"}})),
        (
            "tolerations",
            b,
            json!({"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
        ),
        ("affinity", b, json!({"affinity": {"nodeAffinity": {}}})),
        (
            "podSpecPatch",
            b,
            json!({"podSpecPatch": "{\"priority\": 5}"}),
        ),
    ]
}

/// A change of each spec field.
fn spec_rows() -> Vec<(&'static str, Target, Value)> {
    let s = Target::Spec;
    vec![
        ("maxStepTimeout", s, json!({"maxStepTimeout": 30})),
        (
            "containers",
            s,
            json!({"containers": [{"stepName": "only", "image": "busybox:1.36"}]}),
        ),
        (
            "arguments",
            s,
            json!({"arguments": {"parameters": [{"name": "p", "value": "two"}]}}),
        ),
        ("hooks", s, json!({"hooks": {"exit": {"template": "t"}}})),
        (
            "templates",
            s,
            json!({"templates": [
                {"name": "t", "image": "busybox:1.37"},
                {"name": "d", "dag": [{"stepName": "inner", "image": "busybox:1.36"}]},
            ]}),
        ),
        (
            "workflowTemplateRef",
            Target::Whole,
            json!({"spec": {
                "workflowTemplateRef": {"name": "shared"},
                "containers": null, "templates": null, "arguments": null,
            }}),
        ),
        ("parallelism", s, json!({"parallelism": 1})),
        ("failFast", s, json!({"failFast": false})),
        (
            "activeDeadlineSeconds",
            s,
            json!({"activeDeadlineSeconds": 60}),
        ),
        (
            "synchronization",
            s,
            json!({"synchronization": {"mutex": {"name": "m"}}}),
        ),
        (
            "podTemplate",
            s,
            json!({"podTemplate": {"serviceAccountName": "runner"}}),
        ),
        (
            "podSpecPatch",
            s,
            json!({"podSpecPatch": "{\"priority\": 1}"}),
        ),
        ("startTimeout", s, json!({"startTimeout": 30})),
        ("suspend", s, json!({"suspend": true})),
        ("shutdown", s, json!({"shutdown": "Stop"})),
        ("retry", s, json!({"retry": 1})),
        (
            "ttlSecondsAfterFinished",
            s,
            json!({"ttlSecondsAfterFinished": 60}),
        ),
        ("podCleanup", s, json!({"podCleanup": "OnSuccess"})),
        (
            "onExit",
            s,
            json!({"onExit": [{"stepName": "bye", "image": "busybox:1.36"}]}),
        ),
        (
            "workspace",
            s,
            json!({"workspace": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}),
        ),
        ("runs", s, json!({"runs": 2})),
        ("priority", s, json!({"priority": 5})),
        ("queueName", s, json!({"queueName": "q"})),
        ("priorityClassName", s, json!({"priorityClassName": "high"})),
        ("queueTimeout", s, json!({"queueTimeout": 60})),
        ("queueScope", s, json!({"queueScope": "Workflow"})),
        ("resources", s, json!({"resources": {"cpu": "2"}})),
        (
            "managedBy",
            s,
            json!({"managedBy": "kueue.x-k8s.io/multikueue"}),
        ),
        (
            "artifactRepository",
            s,
            json!({"artifactRepository": {"s3": {"bucket": "b", "endpoint": "http://s3:9000", "credentialsSecret": {"name": "s"}}}}),
        ),
        (
            "artifactGC",
            s,
            json!({"artifactGC": {"strategy": "OnWorkflowDeletion"}}),
        ),
        ("interactive", s, json!({"interactive": true})),
        (
            "rules",
            s,
            json!({"rules": [{"name": "r", "when": "true", "action": "finish"}]}),
        ),
        (
            "metrics",
            s,
            json!({"metrics": {"prometheus": [{"name": "m", "gauge": {"value": "1"}}]}}),
        ),
    ]
}

/// A change of each field of the container template `t` (and of the DAG template `d`).
fn template_rows() -> Vec<(&'static str, Target, Value)> {
    let t = Target::Template;
    vec![
        (
            "name",
            Target::Whole,
            json!({"spec": {"templates": [
                {"name": "d", "image": "busybox:1.36"},
                {"name": "t", "dag": [{"stepName": "inner", "image": "busybox:1.36"}]},
            ]}}),
        ),
        (
            "inputs",
            t,
            json!({"inputs": {"parameters": [{"name": "x", "default": "2"}]}}),
        ),
        (
            "dag",
            Target::Whole,
            json!({"spec": {"templates": [
                {"name": "t", "image": "busybox:1.36"},
                {"name": "d", "dag": [{"stepName": "inner", "image": "busybox:1.37"}]},
            ]}}),
        ),
        (
            "steps",
            Target::Whole,
            json!({"spec": {"templates": [
                {"name": "t", "image": "busybox:1.36"},
                {"name": "d", "steps": [[{"name": "inner", "image": "busybox:1.37"}]]},
            ]}}),
        ),
        (
            "target",
            Target::Whole,
            json!({"spec": {"templates": [
                {"name": "t", "inputs": {"parameters": [{"name": "x", "default": "1"}]},
                 "image": "busybox:1.36", "command": ["sh", "-c", "echo {{inputs.parameters.x}}"]},
                {"name": "d", "target": "other", "dag": [
                    {"stepName": "inner", "image": "busybox:1.36"},
                    {"stepName": "other", "image": "busybox:1.36"},
                ]},
            ]}}),
        ),
        (
            "parallelism",
            Target::Whole,
            json!({"spec": {"templates": [
                {"name": "t", "inputs": {"parameters": [{"name": "x", "default": "1"}]},
                 "image": "busybox:1.36", "command": ["sh", "-c", "echo {{inputs.parameters.x}}"]},
                {"name": "d", "parallelism": 1, "dag": [{"stepName": "inner", "image": "busybox:1.36"}]},
            ]}}),
        ),
        ("(a step's fields)", t, json!({"image": "busybox:1.37"})),
    ]
}

/// The fields the incremental planner's property test shapes itself (the DAG, the timeouts and
/// the limits it draws), which it is not given a patch for.
const SHAPED: [&str; 7] = [
    "stepName",
    "dependsOn",
    "timeout",
    "containers",
    "parallelism",
    "failFast",
    "startTimeout",
];

/// A field's name and a JSON merge patch that sets it.
pub(crate) type Patch = (&'static str, Value);

/// A change of every field the incremental planner follows and the planner sees (templates
/// are gone once expanded) but those it shapes itself ([`SHAPED`]): the step patches, then the
/// spec patches. Made from the rows above, so a field marked followed is generated by the
/// property test as soon as it has its row, which the table test demands.
pub(crate) fn followed_patches() -> (Vec<Patch>, Vec<Patch>) {
    let followed = |fields: Vec<Field>, rows: Vec<(&'static str, Target, Value)>| {
        rows.into_iter()
            .filter(|(name, _, _)| {
                let field = fields.iter().find(|f| f.name == *name).unwrap();
                field.follow == Followed && field.change != Expanded && !SHAPED.contains(name)
            })
            .map(|(name, _, patch)| (name, patch))
            .collect()
    };
    (
        followed(step_fields(), step_rows()),
        followed(spec_fields(), spec_rows()),
    )
}

/// The fields `visit` visits on `value`, each with what it means.
fn fields_of(visit: impl FnOnce(&mut Collect)) -> Vec<Field> {
    let mut collect = Collect(Vec::new());
    visit(&mut collect);
    collect.0
}

struct Collect(Vec<Field>);

impl Visitor for Collect {
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, _: &T, _: bool) {
        self.0.push(*field);
    }
    fn steps(&mut self, field: &Field, _: &[Step]) {
        self.0.push(*field);
    }
}

fn a_step() -> Step {
    serde_json::from_value(json!({"stepName": "s", "image": "i"})).unwrap()
}

fn step_fields() -> Vec<Field> {
    fields_of(|c| visit_step(&a_step(), c))
}

fn spec_fields() -> Vec<Field> {
    fields_of(|c| visit_spec(&WorkFlow::test("w").step("a", &[]).build().spec, c))
}

fn template_fields() -> Vec<Field> {
    let template: Template = serde_json::from_value(json!({"name": "t"})).unwrap();
    fields_of(|c| visit_template(&template, c))
}

/// Checks every row: its change starts a new run exactly when docs/api.md lists its field
/// under "New run" (the template's step fields: as their [`Change`] says), and every field has
/// one row. Returns what failed.
fn check(scope: &str, fields: &[Field], rows: &[(&'static str, Target, Value)]) -> Vec<String> {
    let before = run_of(&base());
    let documented_new = documented(&api_md(), "New run", scope);
    let mut failures = Vec::new();
    let names: BTreeSet<&str> = fields.iter().map(|f| f.name).collect();
    let rowed: BTreeSet<&str> = rows.iter().map(|r| r.0).collect();
    for missing in names.difference(&rowed) {
        failures.push(format!("{scope} field {missing} has no row"));
    }
    for (name, target, patch) in rows {
        let Some(field) = fields.iter().find(|f| f.name == *name) else {
            failures.push(format!("{scope} row {name} is no field"));
            continue;
        };
        let want = if name.starts_with('(') {
            field.change.starts_new_run()
        } else {
            documented_new.contains(*name)
        };
        let new_run = run_of(&patched(*target, patch)) != before;
        if new_run != want {
            failures.push(format!(
                "{scope} field {name}: docs/api.md says it {} a new run, changing it {}",
                if want { "starts" } else { "does not start" },
                if new_run { "starts one" } else { "does not" }
            ));
        }
    }
    failures
}

#[test]
fn changing_a_field_starts_a_new_run_exactly_when_it_is_part_of_the_run() {
    let mut failures = check("step", &step_fields(), &step_rows());
    failures.extend(check("workflow", &spec_fields(), &spec_rows()));
    failures.extend(check("template", &template_fields(), &template_rows()));
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A container template's fields are a step's: each changed in the template `t` that step `c`
/// calls starts a new run exactly when the same change to a step does.
/// A step's default cache key follows exactly its fields that are part of what it computes:
/// each row's change of a step field changes the key when the field is [`Keyed`] (so a
/// cached result is never that of a step that computes otherwise), and only then.
#[test]
fn a_steps_cache_key_changes_exactly_with_the_fields_it_computes_with() {
    let fields = step_fields();
    let key = |workflow: &Value, i: usize| {
        let step: Step =
            serde_json::from_value(workflow["spec"]["containers"][i].clone()).expect("a step");
        crate::cache::key_of(&step, &crate::outputs::Inputs::default(), None).hash
    };
    let mut failures = Vec::new();
    for (name, target, patch) in step_rows() {
        let field = fields.iter().find(|f| f.name == name).expect("a field");
        // Gone once the templates are expanded; `cache.key` replaces the whole key.
        if field.change == Expanded || name == "cache" {
            continue;
        }
        let Target::Step(i) = target else {
            panic!("step row {name} targets {target:?}");
        };
        let changed = key(&base(), i) != key(&patched(target, &patch), i);
        if changed != (field.keyed != Keyed::No) {
            failures.push(format!("{name} ({:?}): key changed {changed}", field.keyed));
        }
    }
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn a_template_field_means_what_the_step_field_means() {
    let before = run_of(&base());
    let fields = step_fields();
    // A call's own fields, and `inputs`, which in a template is the template's own (its
    // parameters), not a step's input artifacts.
    let calls = [
        "stepName",
        "dependsOn",
        "template",
        "templateRef",
        "arguments",
        "inputs",
    ];
    let mut failures = Vec::new();
    for (name, _, patch) in step_rows().into_iter().filter(|r| !calls.contains(&r.0)) {
        let field = fields.iter().find(|f| f.name == name).unwrap();
        let new_run = run_of(&patched(Target::Template, &patch)) != before;
        if new_run != field.change.starts_new_run() {
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "in a template: {failures:?}");
}

/// The names docs/api.md's "What a change does" lists after `- SCOPE:` under the heading
/// starting `heading`, in backquotes.
fn documented(api_md: &str, heading: &str, scope: &str) -> BTreeSet<String> {
    let section = api_md
        .split("### What a change does")
        .nth(1)
        .expect("docs/api.md has the section")
        .split("\n## ")
        .next()
        .unwrap();
    let under = section
        .split("\n**")
        .find(|part| part.starts_with(heading))
        .unwrap_or_else(|| panic!("no heading {heading:?}"));
    let line = under
        .lines()
        .find(|l| l.starts_with(&format!("- {scope}:")))
        .unwrap_or_else(|| panic!("no `- {scope}:` under {heading:?}"));
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn api_md() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md"))
        .expect("docs/api.md")
}

#[test]
fn docs_api_md_lists_each_field_under_what_it_does() {
    let api_md = api_md();
    let mut failures = Vec::new();
    for (scope, fields) in [
        ("workflow", spec_fields()),
        ("step", step_fields()),
        ("template", template_fields()),
    ] {
        let fields: Vec<Field> = fields
            .into_iter()
            .filter(|f| !f.name.starts_with('('))
            .collect();
        for (heading, new_run) in [("New run", true), ("In place", false)] {
            let listed = documented(&api_md, heading, scope);
            let want: BTreeSet<String> = fields
                .iter()
                .filter(|f| f.change.starts_new_run() == new_run)
                .map(|f| f.name.to_string())
                .collect();
            for name in want.difference(&listed) {
                failures.push(format!(
                    "{scope} field {name} is not listed under {heading}"
                ));
            }
            for name in listed.difference(&want) {
                failures.push(format!(
                    "{scope} field {name} is listed under {heading}, wrongly"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_workflow_setting_a_field_planned_in_full_names_it() {
    let plain = WorkFlow::test("w").step("a", &[]).step("b", &["a"]).build();
    assert_eq!(unfollowed(&plain.spec), None);
    let suspended = WorkFlow::test("w").step("a", &[]).suspend(true).build();
    assert_eq!(unfollowed(&suspended.spec), Some("suspend"));
    let cached = WorkFlow::test("w").step("a", &[]).cache("key: k").build();
    assert_eq!(unfollowed(&cached.spec), Some("cache"));
    let exit = WorkFlow::test("w")
        .step("a", &[])
        .exit_step("bye", &[])
        .build();
    assert_eq!(unfollowed(&exit.spec), Some("onExit"));
    let once = WorkFlow::test("w").step("a", &[]).runs(1).build();
    assert_eq!(
        unfollowed(&once.spec),
        None,
        "one run, said, is no repeated run"
    );
}

#[test]
fn changed_names_the_fields_of_the_run_that_differ() {
    let old = WorkFlow::test("w")
        .step("a", &[])
        .step("b", &["a"])
        .step("c", &[])
        .build()
        .spec;
    let mut new = old.clone();
    new.containers[1].source = Some(Box::new("echo v2".into()));
    new.containers[1].timeout = Some(5.into());
    new.containers[2].step_name = "d".into();
    new.parallelism = Some(1.into());
    new.runs = Some(2);
    assert_eq!(
        changed(&old, &new),
        ["steps.b.source", "runs", "steps.c", "steps.d"]
    );
    assert!(changed(&old, &old).is_empty());
}
