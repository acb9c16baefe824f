//! The planner with fan-out and repeated runs: a step run once per item of
//! `withItems`, `withSequence` or `withParam`, its dependents waiting for every item, an item
//! failing its step, and `spec.runs` running the whole DAG again within one `parallelism`.

use serde_json::{Value, json};

use super::data_tests::{at, entry, running, written};
use super::*;
use crate::crd::ItemCounts;
use crate::fan_out;
use crate::testing::Jobs;

/// A Job the plan creates: the step, the instance's display name, the item's value.
type Created = (String, String, Option<Value>);

fn created(plan: &Plan, runs: u32) -> Vec<Created> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { step, instance, .. } => Some((
                step.clone(),
                fan_out::display_name(
                    step,
                    instance.run_index,
                    runs,
                    instance.item.as_ref().map(|i| i.index),
                ),
                instance.item.as_ref().map(|i| i.value.clone()),
            )),
            _ => None,
        })
        .collect()
}

fn shown(plan: &Plan, runs: u32) -> Vec<String> {
    created(plan, runs).into_iter().map(|(_, s, _)| s).collect()
}

fn status(plan: &Plan) -> &WorkFlowStatus {
    plan.status.as_ref().expect("a status")
}

/// `build` over three colours, then `join` after it.
fn colours() -> WorkFlow {
    running(
        WorkFlow::test("fan")
            .step("build", &[])
            .with_items(&[json!("red"), json!("green"), json!({"name": "blue"})])
            .command(&["echo", "{{item}}"])
            .step("join", &["build"])
            .build(),
    )
}

#[test]
fn a_step_runs_once_per_item_in_jobs_of_their_own_and_its_dependents_wait_for_all() {
    let wf = WorkFlow::test("fan")
        .step("build", &[])
        .with_items(&[json!("red"), json!("green"), json!({"name": "blue"})])
        .step("join", &["build"])
        .build();
    let first = plan(&wf, &[], at(0));
    assert_eq!(
        created(&first, 1),
        [
            ("build".into(), "build[0]".into(), Some(json!("red"))),
            ("build".into(), "build[1]".into(), Some(json!("green"))),
            (
                "build".into(),
                "build[2]".into(),
                Some(json!({"name": "blue"}))
            ),
        ]
    );
    let names: HashSet<&str> = first
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { job_name, .. } => Some(job_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names.len(), 3, "a Job name per item: {names:?}");
    // One entry for the step, counting its items; one name in `started`.
    let written_status = status(&first);
    assert_eq!(written_status.started, ["build"]);
    let build = entry(&first, "build");
    assert_eq!(build.phase, StepPhase::Running);
    assert_eq!(
        build.items,
        Some(ItemCounts {
            total: 3,
            succeeded: 0,
            running: 3,
            failed: 0,
            skipped: 0,
        })
    );
    assert_eq!(written_status.steps.len(), 1, "{:?}", written_status.steps);

    // Two of three done: the join waits (the fan-in).
    let wf = written(wf, &first);
    let jobs = Jobs::of(&wf)
        .succeeded("build")
        .item(0)
        .succeeded("build")
        .item(2)
        .active("build", at(0))
        .item(1)
        .build();
    let partway = plan(&wf, &jobs, at(1));
    assert!(created(&partway, 1).is_empty(), "{:?}", partway.actions);
    let build = entry(&partway, "build");
    assert_eq!(build.items.map(|c| (c.succeeded, c.running)), Some((2, 1)));
    assert_eq!(status(&partway).progress.as_deref(), Some("0/2"));

    // All three: the step is done, once, and the join starts.
    let wf = written(wf, &partway);
    let jobs = Jobs::of(&wf)
        .succeeded("build")
        .item(0)
        .succeeded("build")
        .item(1)
        .succeeded("build")
        .item(2)
        .build();
    let joined = plan(&wf, &jobs, at(2));
    assert_eq!(shown(&joined, 1), ["join"]);
    assert_eq!(status(&joined).executed, ["build"]);
    assert!(status(&joined).steps.iter().all(|s| s.name != "build"));
}

#[test]
fn items_run_within_parallelism_and_a_restarted_operator_creates_none_twice() {
    let wf = running(
        WorkFlow::test("fan")
            .parallelism(2)
            .step("s", &[])
            .with_sequence(5)
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .active("s", at(0))
        .item(0)
        .active("s", at(0))
        .item(1)
        .build();
    // The two that run are the Jobs of items 0 and 1: none is created again, none more starts.
    assert!(created(&plan(&wf, &jobs, at(1)), 1).is_empty());
    let jobs = Jobs::of(&wf)
        .succeeded("s")
        .item(0)
        .active("s", at(0))
        .item(1)
        .build();
    let next = plan(&wf, &jobs, at(1));
    assert_eq!(
        created(&next, 1),
        [("s".into(), "s[2]".into(), Some(json!(2)))]
    );
}

#[test]
fn an_item_failing_fails_its_step_naming_the_item_and_starts_no_more_items() {
    let wf = colours();
    let jobs = Jobs::of(&wf)
        .exited("build", 1, "Error", "")
        .item(1)
        .active("build", at(0))
        .item(0)
        .build();
    let failed = plan(&wf, &jobs, at(1));
    let written_status = status(&failed);
    assert_eq!(written_status.workflow_status, Some(Phase::Failed));
    assert_eq!(
        written_status.message.as_deref(),
        Some("step build[1] failed: exit code 1")
    );
    let item = entry(&failed, "build[1]");
    assert_eq!((item.phase, item.exit_code), (StepPhase::Failed, Some(1)));
    assert_eq!(item.job.as_deref(), Some(jobs[0].name.as_str()));
    let build = entry(&failed, "build");
    assert_eq!(build.phase, StepPhase::Failed);
    assert_eq!(build.items.map(|c| c.failed), Some(1));
    assert!(created(&failed, 1).is_empty());
    // failFast: the item still running is stopped.
    assert!(failed.actions.contains(&Action::StopJob {
        job_name: jobs[1].name.clone(),
        reason: StopReason::WorkflowFailed,
    }));

    // failFast false: the running item goes on, no other starts, and then the step fails.
    let mut wf = wf;
    wf.spec.fail_fast = false;
    let waiting = plan(&wf, &jobs, at(1));
    assert!(created(&waiting, 1).is_empty(), "{:?}", waiting.actions);
    assert_eq!(status(&waiting).workflow_status, Some(Phase::Started));
}

#[test]
fn a_failed_item_runs_again_in_a_new_job_on_a_retry_and_the_others_keep_theirs() {
    let wf = colours();
    let jobs = Jobs::of(&wf)
        .exited("build", 1, "Error", "")
        .item(1)
        .succeeded("build")
        .item(0)
        .succeeded("build")
        .item(2)
        .build();
    let failed = written(wf, &plan(&colours(), &jobs, at(1)));
    let mut retried = failed.clone();
    retried.spec.retry = 1;
    let again = plan(&retried, &jobs, at(2));
    let creates: Vec<(&str, &str)> = again
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob {
                job_name, instance, ..
            } => Some((job_name.as_str(), instance.item.as_ref()?.value.as_str()?)),
            _ => None,
        })
        .collect();
    assert_eq!(creates.len(), 1, "{:?}", again.actions);
    assert_eq!(creates[0].1, "green");
    assert_ne!(
        creates[0].0, jobs[0].name,
        "a retry never reuses a Job name"
    );
}

fn generated(list: &str) -> (WorkFlow, Vec<ObservedJob>) {
    let wf = running(
        WorkFlow::test("param")
            .step("gen", &[])
            .step("each", &["gen"])
            .with_param("{{steps.gen.outputs.list}}")
            .command(&["echo", "{{item.name}}"])
            .step("after", &["each"])
            .build(),
    );
    let jobs = Jobs::of(&wf)
        .succeeded("gen")
        .outputs(Ok(&[("list", list)]))
        .build();
    (wf, jobs)
}

#[test]
fn with_param_fans_out_over_the_json_list_an_upstream_step_wrote() {
    let (wf, jobs) = generated(r#"[{"name": "x"}, {"name": "y"}]"#);
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(
        created(&plan, 1),
        [
            ("each".into(), "each[0]".into(), Some(json!({"name": "x"}))),
            ("each".into(), "each[1]".into(), Some(json!({"name": "y"}))),
        ]
    );
    // The list is recorded with gen's outputs, so a restart finds the same items.
    assert_eq!(
        entry(&plan, "gen").outputs["list"],
        r#"[{"name": "x"}, {"name": "y"}]"#
    );
}

#[test]
fn with_param_that_is_not_a_json_list_fails_the_step_saying_so() {
    let (wf, jobs) = generated("x,y");
    let plan = plan(&wf, &jobs, at(1));
    assert!(created(&plan, 1).is_empty());
    let message = status(&plan).message.clone().unwrap();
    assert!(
        message.starts_with(
            "step each failed: withParam {{steps.gen.outputs.list}} is not a JSON list"
        ),
        "{message}"
    );
    assert!(message.ends_with(r#": "x,y""#), "{message}");
    assert_eq!(
        entry(&plan, "each").reason.as_deref(),
        Some(REASON_BAD_PARAM)
    );
    assert_eq!(status(&plan).workflow_status, Some(Phase::Failed));

    // An item without the field the step names fails that item.
    let (wf, jobs) = generated(r#"[{"name": "x"}, {"other": 1}]"#);
    let plan = super::plan(&wf, &jobs, at(1));
    assert!(created(&plan, 1).is_empty());
    assert_eq!(
        status(&plan).message.as_deref(),
        Some(r#"step each[1] failed: {{item.name}}: the item {"other":1} has no field "name""#)
    );
    assert_eq!(
        entry(&plan, "each[1]").reason.as_deref(),
        Some(REASON_BAD_ITEM)
    );
}

#[test]
fn a_step_with_no_items_is_done_at_once_and_its_dependents_run() {
    let (wf, jobs) = generated("[]");
    let plan = plan(&wf, &jobs, at(1));
    assert_eq!(shown(&plan, 1), ["after"]);
    assert_eq!(status(&plan).executed, ["gen", "each"]);
}

#[test]
fn the_whole_dag_runs_n_times_within_one_parallelism_and_completes_when_all_did() {
    let wf = WorkFlow::test("again")
        .runs(3)
        .parallelism(2)
        .step("a", &[])
        .step("b", &["a"])
        .build();
    let first = plan(&wf, &[], at(0));
    assert_eq!(shown(&first, 3), ["run0/a", "run1/a"]);
    let run_indices: Vec<u32> = first
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { instance, .. } => Some(instance.run_index),
            _ => None,
        })
        .collect();
    assert_eq!(run_indices, [0, 1]);
    assert_eq!(status(&first).started, ["run0/a", "run1/a"]);
    assert_eq!(status(&first).progress.as_deref(), Some("0/6"));

    let wf = written(wf, &first);
    let jobs = Jobs::of(&wf)
        .succeeded("a")
        .in_run(0)
        .active("a", at(0))
        .in_run(1)
        .build();
    // Run 0's b and run 2's a are ready: one slot, the earlier run first.
    assert_eq!(shown(&plan(&wf, &jobs, at(1)), 3), ["run0/b"]);

    let mut all = Jobs::of(&wf);
    for run in 0..3 {
        all = all.succeeded("a").in_run(run).succeeded("b").in_run(run);
    }
    let done = plan(&wf, &all.build(), at(2));
    let done_status = status(&done);
    assert_eq!(done_status.workflow_status, Some(Phase::Completed));
    assert_eq!(
        done_status.message.as_deref(),
        Some("all 2 steps succeeded in each of 3 runs")
    );
    assert_eq!(done_status.progress.as_deref(), Some("6/6"));
}

#[test]
fn a_step_of_ten_thousand_items_keeps_the_status_small() {
    let items: Vec<Value> = (0..10_000).map(|i| json!(format!("i{i}"))).collect();
    let wf = running(
        WorkFlow::test("big")
            .step("s", &[])
            .with_items(&items)
            .build(),
    );
    let mut jobs = Jobs::of(&wf);
    for i in 0..10_000 {
        jobs = if i % 2 == 0 {
            jobs.succeeded("s").item(i)
        } else {
            jobs.active("s", at(0)).item(i)
        };
    }
    let plan = plan(&wf, &jobs.build(), at(1));
    let bytes = serde_json::to_vec(status(&plan)).unwrap().len();
    assert!(bytes < 1024, "{bytes} bytes: {:?}", status(&plan));
    assert_eq!(
        entry(&plan, "s").items.map(|c| (c.succeeded, c.running)),
        Some((5_000, 5_000))
    );
}

#[test]
fn a_fan_out_the_operator_cannot_run_is_refused_at_create_naming_it() {
    let refused = |wf: WorkFlow| Compiled::new(&wf.spec).dag.unwrap_err().to_string();
    let no_fan = WorkFlow::test("w")
        .step("a", &[])
        .command(&["echo", "{{item}}"])
        .build();
    assert_eq!(
        refused(no_fan),
        r#"step "a": {{item}} names an item, but the step does not fan out (withItems, withParam or withSequence)"#
    );
    let both = WorkFlow::test("w")
        .step("a", &[])
        .with_items(&[json!("x")])
        .with_sequence(2)
        .build();
    assert!(refused(both).contains("more than one of withItems"));
    let when_of_a_fan = WorkFlow::test("w")
        .step("a", &[])
        .with_sequence(2)
        .step("b", &["a"])
        .when("steps.a.outputs.x == '1'")
        .build();
    assert!(refused(when_of_a_fan).contains(r#"names step "a", which fans out: a `when`"#));
    let item_of_no_fan = WorkFlow::test("w")
        .step("a", &[])
        .when("'{{item}}' == '1'")
        .build();
    assert!(refused(item_of_no_fan).contains(
        r#"when "'{{item}}' == '1'": {{item}} names an item, but the step does not fan out"#
    ));
    let field_not_listed = WorkFlow::test("w")
        .step("a", &[])
        .with_items(&[json!({"n": 1}), json!({"m": 2})])
        .when("{{item.n}} > 0")
        .build();
    assert!(refused(field_not_listed).contains(r#"{{item.n}}: item 1 ({"m":2}) has no field "n""#));
    let parameters_of_a_fan = WorkFlow::test("w")
        .step("a", &[])
        .with_sequence(2)
        .step("b", &["a"])
        .command(&["echo", "{{steps.a.outputs.x}}"])
        .build();
    assert!(Compiled::new(&parameters_of_a_fan.spec).dag.is_ok());
    let exit_reads_a_fan = WorkFlow::test("w")
        .step("a", &[])
        .with_sequence(2)
        .exit_step("e", &[])
        .command(&["echo", "{{steps.a.outputs.x}}"])
        .build();
    assert!(refused(exit_reads_a_fan).contains("an exit step cannot take the outputs"));
    let no_field = WorkFlow::test("w")
        .step("a", &[])
        .with_items(&[json!({"os": "linux"}), json!("plain")])
        .command(&["echo", "{{item.os}}"])
        .build();
    assert_eq!(
        refused(no_field),
        r#"step "a": {{item.os}}: item 1 ("plain") has no field "os""#
    );
    let param_not_upstream = WorkFlow::test("w")
        .step("gen", &[])
        .step("a", &[])
        .with_param("{{steps.gen.outputs.list}}")
        .build();
    assert!(refused(param_not_upstream).contains(
        "withParam {{steps.gen.outputs.list}} names step \"gen\", which does not run before it"
    ),);
    let clash = WorkFlow::test("w")
        .step("a", &[])
        .with_sequence(2)
        .step("a[1]", &[])
        .build();
    assert!(refused(clash).contains(r#"is named as an item of step "a""#));
    let exit_fan = WorkFlow::test("w")
        .step("a", &[])
        .exit_step("e", &[])
        .with_sequence(2)
        .build();
    assert!(refused(exit_fan).contains("exit steps do not fan out"));
    let exit_reads_runs = WorkFlow::test("w")
        .runs(2)
        .step("a", &[])
        .exit_step("e", &[])
        .command(&["echo", "{{steps.a.outputs.x}}"])
        .build();
    assert!(refused(exit_reads_runs).contains("cannot tell which run's"));
}

/// `colours` with `build` making the artifact `app` (`retryStrategy` and `continueOn.failed`
/// as asked), and `join` taking it.
fn fan_in(retries: bool, tolerated: bool) -> WorkFlow {
    let mut builder = WorkFlow::test("fan")
        .step("build", &[])
        .with_items(&[json!("red"), json!("green"), json!("blue")])
        .command(&["make"]);
    if retries {
        builder = builder.retry_strategy("{limit: 1}");
    }
    if tolerated {
        builder = builder.continue_on_failed();
    }
    let mut wf = builder.step("join", &["build"]).command(&["ls"]).build();
    wf.spec.containers[0].outputs =
        Some(serde_yaml::from_str("artifacts: [{name: app, path: /out/app}]").unwrap());
    wf.spec.containers[1].inputs = Some(
        serde_yaml::from_str(
            "artifacts: [{name: app, path: /in/app, from: '{{steps.build.outputs.artifacts.app}}'}]",
        )
        .unwrap(),
    );
    running(wf)
}

/// The inputs of the Job of `step` the plan creates.
fn inputs_of<'p>(plan: &'p Plan, step: &str) -> &'p Inputs {
    plan.actions
        .iter()
        .find_map(|a| match a {
            Action::CreateJob {
                step: created,
                inputs,
                ..
            } if created == step => Some(inputs),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Job of {step} created: {:?}", plan.actions))
}

#[test]
fn a_step_taking_the_artifact_of_a_step_that_fans_out_gets_each_items_succeeded_job() {
    // Item 1 failed once and succeeded on its second attempt: that attempt's Job is its.
    let wf = fan_in(true, false);
    let jobs = Jobs::of(&wf)
        .succeeded("build")
        .item(0)
        .exited("build", 1, "Error", "")
        .item(1)
        .succeeded("build")
        .item(1)
        .attempt(1)
        .succeeded("build")
        .item(2)
        .build();
    let joined = plan(&wf, &jobs, at(2));
    let names = [&jobs[0].name, &jobs[2].name, &jobs[3].name];
    let key = ("build".to_string(), "artifacts.app".to_string());
    assert_eq!(inputs_of(&joined, "join")[&key], json!(names).to_string());
    // The same Jobs give the same names at every pass (a restarted operator's first included).
    assert_eq!(
        inputs_of(&plan(&wf, &jobs, at(3)), "join")[&key],
        json!(names).to_string()
    );

    // An item whose failure is tolerated has no Job to take from: an empty name.
    let wf = fan_in(false, true);
    let jobs = Jobs::of(&wf)
        .succeeded("build")
        .item(0)
        .exited("build", 1, "Error", "")
        .item(1)
        .succeeded("build")
        .item(2)
        .build();
    let joined = plan(&wf, &jobs, at(2));
    let names = [jobs[0].name.as_str(), "", jobs[2].name.as_str()];
    assert_eq!(inputs_of(&joined, "join")[&key], json!(names).to_string());
}

/// `gen` over three items, `sum` reading its parameter `v` and its result, `each` over its
/// `v`s (`withParam`).
fn aggregated() -> WorkFlow {
    running(
        WorkFlow::test("agg")
            .step("gen", &[])
            .with_items(&[json!(1), json!(2), json!(3)])
            .command(&["sh", "-c", "echo {{item}}"])
            .step("sum", &["gen"])
            .command(&[
                "echo",
                "{{steps.gen.outputs.parameters.v}} {{steps.gen.outputs.result}}",
                "{{steps.gen.outputs.parameters}}",
            ])
            .step("each", &["gen"])
            .with_param("{{steps.gen.outputs.parameters.v}}")
            .command(&["echo", "{{item}}"])
            .build(),
    )
}

/// `gen`'s items succeeded, their Jobs listed out of item order, with outputs read (or not).
fn gen_items(wf: &WorkFlow, read: bool) -> Vec<ObservedJob> {
    let mut jobs = Jobs::of(wf);
    for item in [2, 0, 1] {
        let v = (2 * (item + 1)).to_string();
        let result = format!(r#"{{"n": {}}}"#, item + 1);
        jobs = jobs.succeeded("gen").item(item);
        if read {
            jobs = jobs.outputs(Ok(&[("v", v.as_str()), ("result", result.as_str())]));
        }
    }
    jobs.build()
}

#[test]
fn a_step_reads_the_outputs_of_a_step_that_fans_out_as_a_list_in_item_order() {
    let wf = aggregated();
    let plan = plan(&wf, &gen_items(&wf, true), at(2));
    let inputs = inputs_of(&plan, "sum");
    assert_eq!(inputs[&("gen".into(), "v".into())], r#"["2","4","6"]"#);
    assert_eq!(
        inputs[&("gen".into(), "result".into())],
        r#"[{"n":1},{"n":2},{"n":3}]"#
    );
    assert_eq!(
        inputs[&("gen".into(), "parameters".into())],
        r#"[{"v":"2"},{"v":"4"},{"v":"6"}]"#
    );
    let each: Vec<Created> = created(&plan, 1)
        .into_iter()
        .filter(|(step, _, _)| step == "each")
        .collect();
    assert_eq!(
        each,
        [
            ("each".into(), "each[0]".into(), Some(json!("2"))),
            ("each".into(), "each[1]".into(), Some(json!("4"))),
            ("each".into(), "each[2]".into(), Some(json!("6"))),
        ]
    );
    // Each item's outputs are recorded, so they are read once and a restart finds the same.
    assert_eq!(entry(&plan, "gen[1]").outputs["v"], "4");
    assert_eq!(entry(&plan, "gen[1]").phase, StepPhase::Succeeded);
    let restarted = written(wf.clone(), &plan);
    let again = super::plan(&restarted, &gen_items(&wf, false), at(3));
    assert_eq!(inputs_of(&again, "sum"), inputs);
}

#[test]
fn a_step_reading_the_outputs_of_a_step_that_fans_out_waits_until_every_items_are_read() {
    let wf = aggregated();
    let plan = plan(&wf, &gen_items(&wf, false), at(2));
    assert!(created(&plan, 1).is_empty(), "{:?}", plan.actions);
    // Its items read as running (the status as before), not the workflow failed.
    let status = plan.status.as_ref().or(wf.status.as_ref()).unwrap();
    let square = status.steps.iter().find(|s| s.name == "gen").unwrap();
    assert_eq!(square.phase, StepPhase::Running);
    assert_eq!(square.items.map(|i| (i.total, i.running)), Some((3, 3)));
}

#[test]
fn aggregated_values_are_argos_lists() {
    let list = |result: bool, values: &[&str]| fan_out::aggregate(result, values.iter().copied());
    assert_eq!(list(false, &["a", "b"]), r#"["a","b"]"#);
    assert_eq!(
        list(false, &["1", "2"]),
        r#"["1","2"]"#,
        "numbers stay text"
    );
    assert_eq!(list(false, &[r#"{"a":1}"#, "[2]"]), r#"[{"a":1},[2]]"#);
    assert_eq!(list(false, &[r#"{"a":1}"#, "x"]), r#"["{\"a\":1}","x"]"#);
    assert_eq!(
        list(true, &["1", "hello", r#"{"a":1}"#]),
        r#"[1,"hello",{"a":1}]"#
    );
    assert_eq!(list(true, &[]), "[]");
}
