use super::*;

use crate::crd::{Durations, WorkFlow};

fn spec_with(rule: (&str, &str, RuleAction)) -> WorkFlowSpec {
    WorkFlow::test("w")
        .parallelism(4)
        .runs(3)
        .step("lammps", &[])
        .step("post", &["lammps"])
        .rule(rule.0, rule.1, rule.2)
        .build()
        .spec
}

fn compiled(spec: &WorkFlowSpec) -> Rules {
    Rules::compile(spec, &["lammps", "post"]).unwrap()
}

/// Metrics of `lammps` with `succeeded` Jobs whose mean run time is `mean`.
fn lammps(succeeded: u32, mean: f64) -> Metrics {
    let metrics = StepMetrics {
        succeeded,
        duration: Some(Durations {
            mean,
            min: mean,
            max: mean,
            last: mean,
        }),
        ..StepMetrics::default()
    };
    Metrics::from([("lammps".to_string(), metrics)])
}

fn facts(metrics: &Metrics, completions: u64) -> Facts<'_> {
    Facts {
        metrics,
        runs_completed: 0,
        runs_failed: 0,
        elapsed: 10,
        completions,
    }
}

fn standing(parallelism: i32) -> Standing {
    Standing {
        parallelism: Some(parallelism),
        runs: 3,
    }
}

#[test]
fn an_expression_that_cannot_run_is_refused_naming_the_rule_and_why() {
    let cases = [
        ("steps.lammps.duration.mean >=", "does not compile"),
        (
            "steps.lamps.succeeded > 1",
            r#"names step "lamps", which is not a step"#,
        ),
        ("steps.lammps.durations.mean > 1", "no metric"),
        ("steps.lammps.duration > 1", "no metric"),
        ("steps.lammps.duration.median > 1", "no metric"),
        ("workflow.runs.skipped > 1", "no metric"),
        ("self.x > 1", r#"names "self""#),
        ("steps.lammps.succeeded + 1", "not a bool"),
        (
            "steps.lammps.duration.mean / steps.lammps.succeeded > 1",
            "fails",
        ),
    ];
    for (when, expected) in cases {
        let spec = spec_with(("r", when, RuleAction::Grow));
        let problems = Rules::compile(&spec, &["lammps", "post"]).unwrap_err();
        assert!(
            problems.len() == 1 && problems[0].starts_with(r#"rule "r": when "#),
            "{when}: {problems:?}"
        );
        assert!(problems[0].contains(expected), "{when}: {problems:?}");
    }
    for when in [
        "steps.lammps.duration.mean >= 360",
        r#"steps["post"].failed > 0 || workflow.runs.completed >= 2"#,
        "workflow.elapsed > 60 && steps.lammps.running < 2 && steps.post.attempts > 3",
    ] {
        let spec = spec_with(("r", when, RuleAction::Grow));
        assert!(Rules::compile(&spec, &["lammps", "post"]).is_ok(), "{when}");
    }
}

#[test]
fn a_rule_that_cannot_act_in_its_spec_is_refused() {
    let when = "steps.lammps.succeeded > 1";
    let mut spec = spec_with(("r", when, RuleAction::Grow));
    spec.parallelism = None;
    let problems = Rules::compile(&spec, &["lammps"]).unwrap_err();
    assert!(
        problems[0].contains("need spec.parallelism"),
        "{problems:?}"
    );
    let mut spec = spec_with(("r", when, RuleAction::Repeat));
    spec.runs = None;
    let problems = Rules::compile(&spec, &["lammps"]).unwrap_err();
    assert!(
        problems[0].contains("spec.runs of at least 2"),
        "{problems:?}"
    );
    let mut spec = spec_with(("r", when, RuleAction::Shrink));
    spec.rules.push(spec.rules[0].clone());
    spec.rules[0].min_parallelism = Some(5);
    spec.rules[0].max_parallelism = Some(3);
    let problems = Rules::compile(&spec, &["lammps"]).unwrap_err();
    assert_eq!(
        problems,
        [
            r#"rule "r": minParallelism is above maxParallelism"#,
            r#"rule "r" is named twice"#
        ]
    );
}

#[test]
fn a_firing_says_the_values_it_read_and_what_it_changed() {
    let spec = spec_with((
        "slow-sims",
        "steps.lammps.duration.mean >= 360",
        RuleAction::Grow,
    ));
    let metrics = lammps(3, 372.0);
    let decision = decide(
        &spec.rules,
        &compiled(&spec),
        &[],
        standing(4),
        &facts(&metrics, 3),
    );
    assert_eq!(
        decision.fired,
        ["slow-sims: steps.lammps.duration.mean = 372 >= 360: parallelism 4 -> 5"]
    );
    assert_eq!(decision.parallelism, Some(5));
    assert_eq!(
        decision.statuses,
        [RuleStatus {
            name: "slow-sims".into(),
            fired: 1,
            last_fired_at_completions: Some(3),
            firings: decision.fired.clone(),
        }]
    );
}

/// One decision of a `grow` rule (`repetitions` 3, `backoff` 2, `maxParallelism` 6) over
/// `steps.lammps.duration.mean >= 360`.
struct Case {
    name: &'static str,
    mean: f64,
    /// Fired so far, and the completions when last fired.
    before: (u32, Option<u64>),
    completions: u64,
    parallelism: i32,
    /// The parallelism after, and whether it fired.
    after: (i32, bool),
}

#[test]
fn a_rule_fires_past_its_threshold_within_its_repetitions_backoff_and_bounds() {
    let cases = [
        Case {
            name: "below the threshold",
            mean: 359.0,
            before: (0, None),
            completions: 5,
            parallelism: 4,
            after: (4, false),
        },
        Case {
            name: "at the threshold",
            mean: 360.0,
            before: (0, None),
            completions: 5,
            parallelism: 4,
            after: (5, true),
        },
        Case {
            name: "one completion since it fired: backoff 2 holds it",
            mean: 400.0,
            before: (1, Some(4)),
            completions: 5,
            parallelism: 5,
            after: (5, false),
        },
        Case {
            name: "two completions since it fired: it fires again",
            mean: 400.0,
            before: (1, Some(3)),
            completions: 5,
            parallelism: 5,
            after: (6, true),
        },
        Case {
            name: "fired 3 times: repetitions stop it",
            mean: 400.0,
            before: (3, Some(1)),
            completions: 50,
            parallelism: 5,
            after: (5, false),
        },
        Case {
            name: "at maxParallelism it does not fire",
            mean: 400.0,
            before: (1, Some(1)),
            completions: 50,
            parallelism: 6,
            after: (6, false),
        },
    ];
    for case in cases {
        let when = "steps.lammps.duration.mean >= 360";
        let mut spec = spec_with(("grow", when, RuleAction::Grow));
        spec.rules[0].repetitions = Some(3);
        spec.rules[0].backoff = Some(2);
        spec.rules[0].max_parallelism = Some(6);
        let previous = [RuleStatus {
            name: "grow".into(),
            fired: case.before.0,
            last_fired_at_completions: case.before.1,
            firings: vec!["earlier".into(); case.before.0 as usize],
        }];
        let metrics = lammps(1, case.mean);
        let facts = facts(&metrics, case.completions);
        let decision = decide(
            &spec.rules,
            &compiled(&spec),
            &previous,
            standing(case.parallelism),
            &facts,
        );
        let fired = !decision.fired.is_empty();
        assert_eq!(
            (decision.parallelism, fired),
            (Some(case.after.0), case.after.1),
            "{}",
            case.name
        );
        let status = &decision.statuses[0];
        let expected_fired = case.before.0 + u32::from(fired);
        assert_eq!(status.fired, expected_fired, "{}", case.name);
        assert_eq!(status.firings.len() as u32, expected_fired, "{}", case.name);
        if fired {
            assert_eq!(status.last_fired_at_completions, Some(case.completions));
        } else {
            assert_eq!(
                status.last_fired_at_completions, case.before.1,
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn shrink_stops_at_min_parallelism_and_finish_fail_repeat_act_once_each() {
    let when = "steps.lammps.succeeded >= 1";
    let mut spec = spec_with(("shrink", when, RuleAction::Shrink));
    spec.rules[0].min_parallelism = Some(2);
    spec.rules[0].repetitions = Some(10);
    spec.rules[0].backoff = Some(0);
    let metrics = lammps(1, 1.0);
    let shrink = |p| {
        decide(
            &spec.rules,
            &compiled(&spec),
            &[],
            standing(p),
            &facts(&metrics, 1),
        )
    };
    assert_eq!(shrink(3).parallelism, Some(2));
    assert_eq!(
        shrink(3).fired,
        ["shrink: steps.lammps.succeeded = 1 >= 1: parallelism 3 -> 2"]
    );
    assert_eq!(shrink(2).parallelism, Some(2));
    assert!(shrink(2).fired.is_empty());

    let spec = spec_with(("more", when, RuleAction::Repeat));
    let decision = decide(
        &spec.rules,
        &compiled(&spec),
        &[],
        standing(4),
        &facts(&metrics, 1),
    );
    assert_eq!(
        decision.fired,
        ["more: steps.lammps.succeeded = 1 >= 1: runs 3 -> 4"]
    );
    assert_eq!(decision.added_runs, 1);
    // Stored: the run it added is counted, and the rule has no repetition left.
    let again = decide(
        &spec.rules,
        &compiled(&spec),
        &decision.statuses,
        standing(4),
        &facts(&metrics, 9),
    );
    assert_eq!((again.added_runs, again.fired.len()), (1, 0));

    for action in [RuleAction::Finish, RuleAction::Fail] {
        let mut spec = spec_with(("end", when, action));
        spec.rules[0].repetitions = Some(5);
        let decision = decide(
            &spec.rules,
            &compiled(&spec),
            &[],
            standing(4),
            &facts(&metrics, 1),
        );
        let fired = decision.fired.first().cloned();
        let ended = if action == RuleAction::Finish {
            &decision.finish
        } else {
            &decision.fail
        };
        assert_eq!(ended, &fired);
        assert!(fired.is_some_and(|f| f.starts_with("end: steps.lammps.succeeded = 1 >= 1: ")));
        // Once ended, it does not fire again, and stays ended.
        let again = decide(
            &spec.rules,
            &compiled(&spec),
            &decision.statuses,
            standing(4),
            &facts(&metrics, 9),
        );
        assert!(again.fired.is_empty(), "{action:?}");
        let ended = if action == RuleAction::Finish {
            &again.finish
        } else {
            &again.fail
        };
        assert!(ended.is_some(), "{action:?}");
    }
}

#[test]
fn a_metric_without_a_value_yet_keeps_its_rule_from_firing() {
    let spec = spec_with(("slow", "steps.lammps.duration.min < 5", RuleAction::Grow));
    let metrics = Metrics::from([("lammps".to_string(), StepMetrics::default())]);
    let decision = decide(
        &spec.rules,
        &compiled(&spec),
        &[],
        standing(4),
        &facts(&metrics, 0),
    );
    assert!(decision.fired.is_empty());
    assert_eq!(decision.statuses[0].fired, 0);
}
