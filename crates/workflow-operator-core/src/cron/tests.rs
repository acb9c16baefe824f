use super::*;

use rstest::rstest;

fn spec(schedules: &[&str], timezone: Option<&str>) -> CronWorkFlowSpec {
    serde_json::from_value(serde_json::json!({
        "schedules": schedules,
        "timezone": timezone,
    }))
    .unwrap()
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn schedule(schedules: &[&str], timezone: Option<&str>) -> Schedule {
    Schedule::parse(&spec(schedules, timezone), at("2026-01-01T00:00:00Z")).unwrap()
}

fn times(schedule: &Schedule, after: &str, until: &str) -> Vec<String> {
    schedule
        .times_between(at(after), at(until), 100)
        .iter()
        .map(|t| t.to_string())
        .collect()
}

/// Around each transition of 2026: a fixed local time in the gap runs once at the gap's end, one
/// in the repeated hour once at its first occurrence; the days around keep their local time.
#[rstest]
// New York springs forward on 8 March (02:00 EST -> 03:00 EDT): 02:30 does not exist.
#[case::new_york_gap("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
    &["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"])]
// New York falls back on 1 November (02:00 EDT -> 01:00 EST): 01:30 occurs twice.
#[case::new_york_overlap("30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
    &["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"])]
// Berlin springs forward on 29 March (02:00 CET -> 03:00 CEST): 02:30 does not exist.
#[case::berlin_gap("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z",
    &["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"])]
// Berlin falls back on 25 October (03:00 CEST -> 02:00 CET): 02:30 occurs twice.
#[case::berlin_overlap("30 2 * * *", "Europe/Berlin", "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z",
    &["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"])]
// @every counts real time from its anchor, whatever the zone and its transitions.
#[case::every_across_a_gap("@every 90m", "Europe/Berlin", "2026-03-29T00:00:00Z", "2026-03-29T04:00:00Z",
    &["2026-03-29T01:30:00Z", "2026-03-29T03:00:00Z"])]
// @daily is midnight local time.
#[case::daily_in_berlin("@daily", "Europe/Berlin", "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z",
    &["2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"])]
fn transitions_run_each_scheduled_time_once(
    #[case] expression: &str,
    #[case] zone: &str,
    #[case] after: &str,
    #[case] until: &str,
    #[case] expected: &[&str],
) {
    let schedule = schedule(&[expression], Some(zone));
    assert_eq!(times(&schedule, after, until), expected);
}

#[test]
fn schedules_are_one_union_and_bad_ones_are_named() {
    let both = schedule(&["0 * * * *", "30 * * * *"], None);
    assert_eq!(
        times(&both, "2026-05-01T10:00:00Z", "2026-05-01T11:00:00Z"),
        ["2026-05-01T10:30:00Z", "2026-05-01T11:00:00Z"]
    );
    let error = Schedule::parse(
        &spec(
            &["0 2 * *", "@every soon", "61 * * * *"],
            Some("Mars/Olympus"),
        ),
        at("2026-01-01T00:00:00Z"),
    )
    .unwrap_err()
    .join("; ");
    for part in [
        "timezone \"Mars/Olympus\"",
        "schedules[0] \"0 2 * *\": a cron expression has five fields",
        "schedules[1] \"@every soon\": not a duration",
        "schedules[2] \"61 * * * *\"",
    ] {
        assert!(error.contains(part), "{part} not in {error}");
    }
}

fn every_minute() -> Schedule {
    schedule(&["* * * * *"], None)
}

#[test]
fn on_time_a_tick_starts_the_time_just_passed() {
    let on_time = due(
        &every_minute(),
        at("2026-05-01T10:00:00Z"),
        at("2026-05-01T10:01:00.300Z"),
        None,
        CatchUp::Latest,
        false,
    );
    assert_eq!(on_time.start, [at("2026-05-01T10:01:00Z")]);
    assert!(on_time.missed.is_empty());
    assert_eq!(on_time.last, Some(at("2026-05-01T10:01:00Z")));
    let nothing = due(
        &every_minute(),
        at("2026-05-01T10:01:00Z"),
        at("2026-05-01T10:01:30Z"),
        None,
        CatchUp::Latest,
        false,
    );
    assert_eq!(nothing, Due::default());
}

/// The operator down from 10:00 to 10:05:20: five times passed.
#[rstest]
#[case::latest(CatchUp::Latest, None, &["10:05"])]
#[case::all(CatchUp::All, None, &["10:01", "10:02", "10:03", "10:04", "10:05"])]
#[case::all_within_the_deadline(CatchUp::All, Some(150), &["10:03", "10:04", "10:05"])]
#[case::latest_past_the_deadline(CatchUp::Latest, Some(10), &[])]
#[case::none(CatchUp::None, None, &[])]
fn after_downtime_catch_up_and_the_deadline_decide(
    #[case] catch_up: CatchUp,
    #[case] deadline: Option<i64>,
    #[case] started: &[&str],
) {
    let after = due(
        &every_minute(),
        at("2026-05-01T10:00:00Z"),
        at("2026-05-01T10:05:20Z"),
        deadline,
        catch_up,
        false,
    );
    let start: Vec<String> = after
        .start
        .iter()
        .map(|t| t.strftime("%H:%M").to_string())
        .collect();
    assert_eq!(start, started);
    assert_eq!(
        after.start.len() + after.missed.len(),
        5,
        "each time started or missed once"
    );
    assert_eq!(after.last, Some(at("2026-05-01T10:05:00Z")));
}

/// `startingDeadlineSeconds` limits late runs only: a tick within the scheduled second is on
/// time and starts its run whatever the deadline, 0 included; lateness counts in whole seconds
/// past it, as the schedule does.
#[rstest]
#[case::on_time_deadline_zero(Some(0), "10:01:00.300", true)]
#[case::late_deadline_zero(Some(0), "10:01:01.200", false)]
#[case::within_the_deadline(Some(10), "10:01:10.900", true)]
#[case::past_the_deadline(Some(10), "10:01:11", false)]
#[case::no_deadline(None, "10:01:40", true)]
fn the_deadline_applies_to_late_runs_only(
    #[case] deadline: Option<i64>,
    #[case] now: &str,
    #[case] starts: bool,
) {
    for catch_up in [CatchUp::Latest, CatchUp::All] {
        let tick = due(
            &every_minute(),
            at("2026-05-01T10:00:00Z"),
            at(&format!("2026-05-01T{now}Z")),
            deadline,
            catch_up,
            false,
        );
        let time = at("2026-05-01T10:01:00Z");
        let (start, missed) = if starts {
            (vec![time], vec![])
        } else {
            (vec![], vec![time])
        };
        assert_eq!(
            (tick.start, tick.missed),
            (start, missed),
            "{catch_up:?} at {now}"
        );
        assert_eq!(tick.last, Some(time));
    }
}

/// Two days down with a schedule every minute (2,880 times passed, more than are listed):
/// `Latest` starts the time just passed, not the oldest listed, and `All` the newest ones.
#[rstest]
#[case::latest(CatchUp::Latest, 1, "2026-05-03T10:00:00Z")]
#[case::all(CatchUp::All, MAX_CATCH_UP, "2026-05-03T10:00:00Z")]
fn after_a_long_downtime_the_latest_times_are_the_real_latest(
    #[case] catch_up: CatchUp,
    #[case] started: usize,
    #[case] newest: &str,
) {
    let schedules = [every_minute(), schedule(&["@every 60s"], None)];
    for schedule in &schedules {
        let after = due(
            schedule,
            at("2026-05-01T10:00:00Z"),
            at("2026-05-03T10:00:20Z"),
            None,
            catch_up,
            false,
        );
        assert_eq!(after.start.len(), started);
        assert_eq!(after.start.last(), Some(&at(newest)));
        assert_eq!(after.last, Some(at(newest)));
    }
}

#[test]
fn the_newest_times_found_backwards_are_the_times_found_forwards() {
    for schedule in [every_minute(), schedule(&["@every 60s"], None)] {
        let (after, until) = (at("2026-05-01T10:00:00Z"), at("2026-05-01T10:03:00Z"));
        let forwards = schedule.times_between(after, until, 10);
        assert_eq!(schedule.newest_between(after, until, 10), forwards);
        assert_eq!(schedule.newest_between(after, until, 2), forwards[1..]);
        assert_eq!(forwards.len(), 3, "(after, until]: {forwards:?}");
    }
}

#[test]
fn resuming_starts_at_most_the_latest_missed_time() {
    let resumed = due(
        &every_minute(),
        at("2026-05-01T10:00:00Z"),
        at("2026-05-01T10:05:20Z"),
        None,
        CatchUp::All,
        true,
    );
    assert_eq!(resumed.start, [at("2026-05-01T10:05:00Z")]);
    assert_eq!(resumed.missed.len(), 4);
}

#[test]
fn run_names_are_the_cron_and_the_time_and_stay_labels() {
    assert_eq!(
        names::cron_run_name("nightly", 1_764_208_800),
        "nightly-1764208800"
    );
    let long = "a".repeat(70);
    let name = names::cron_run_name(&long, 1_764_208_800);
    assert!(name.len() <= 63 && name.ends_with("-1764208800"), "{name}");
    assert_ne!(name, names::cron_run_name(&"a".repeat(71), 1_764_208_800));
}

mod ticks {
    use super::*;
    use crate::crd::{CronWorkFlow, CronWorkFlowStatus};
    use crate::cron::plan::{Run, follows_run, tick};
    use crate::lifecycle::Phase;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A CronWorkFlow of `extra` (YAML fields of its spec) every minute, created at 10:00:00.
    fn cron(extra: &str) -> CronWorkFlow {
        let spec: serde_json::Value = serde_yaml::from_str(&format!(
            "{{schedules: ['* * * * *'], workflowSpec: {{containers: [{{stepName: a, image: x}}]}}, {extra}}}"
        ))
        .unwrap();
        let mut cron = CronWorkFlow::new("nightly", serde_json::from_value(spec).unwrap());
        cron.metadata.namespace = Some("dev".into());
        cron.metadata.creation_timestamp = Some(Time(at("2026-05-01T10:00:00Z")));
        cron
    }

    fn with_status(mut cron: CronWorkFlow, status: Option<CronWorkFlowStatus>) -> CronWorkFlow {
        cron.status = status;
        cron
    }

    fn run(scheduled: &str, phase: Option<Phase>) -> Run {
        let scheduled = at(scheduled).as_second();
        Run {
            name: crate::names::cron_run_name("nightly", scheduled),
            uid: None,
            scheduled,
            phase,
            finished_at: None,
            terminating: false,
        }
    }

    /// Ticks at each second of `times`, carrying the status over; the runs created.
    fn ticks(cron: CronWorkFlow, runs: &[Run], times: &[&str]) -> (Vec<i64>, CronWorkFlow) {
        let mut cron = cron;
        let mut created = Vec::new();
        for now in times {
            let tick = tick(&cron, runs, at(now));
            created.extend(tick.create);
            if let Some(status) = tick.status {
                cron.status = Some(status);
            }
        }
        (created, cron)
    }

    /// The scalars `kubectl get cwf` prints: how many runs are active, the time of the newest
    /// run (none before one, an edit of the schedule being none), no next time while
    /// suspended.
    #[test]
    fn the_status_counts_active_runs_keeps_the_last_run_and_no_next_time_while_suspended() {
        let (_, mut edited) = ticks(cron(""), &[], &["2026-05-01T10:00:30Z"]);
        edited.spec.schedules = vec!["*/5 * * * *".into()];
        let (_, edited) = ticks(edited, &[], &["2026-05-01T10:00:40Z"]);
        let status = edited.status.unwrap();
        assert_eq!((status.active_count, status.last_run_time), (0, None));
        let (_, cron) = ticks(cron(""), &[], &["2026-05-01T10:01:00.2Z"]);
        let status = cron.status.clone().unwrap();
        let started = Some(Time(at("2026-05-01T10:01:00Z")));
        assert_eq!((status.active_count, &status.last_run_time), (1, &started));
        let mut suspended = cron;
        suspended.spec.suspend = true;
        // Its run gone (deleted by hand): the last run's time stays.
        let status = tick(&suspended, &[], at("2026-05-01T10:01:30Z"))
            .status
            .unwrap();
        assert_eq!(status.next_schedule_time, None);
        assert_eq!((status.active_count, status.last_run_time), (0, started));
    }

    #[test]
    fn a_run_starts_once_per_time_and_its_existing_run_counts_as_started() {
        let (created, cron) = ticks(
            cron(""),
            &[],
            &["2026-05-01T10:00:30Z", "2026-05-01T10:01:00.2Z"],
        );
        assert_eq!(created, [at("2026-05-01T10:01:00Z").as_second()]);
        let status = cron.status.clone().unwrap();
        assert_eq!(
            status.next_schedule_time,
            Some(Time(at("2026-05-01T10:02:00Z")))
        );
        assert_eq!(status.active[0].name, "nightly-1777629660");
        // The status write was lost (a SIGKILL): the next tick sees the run and creates nothing.
        let lost = with_status(cron.clone(), None);
        let again = tick(
            &lost,
            &[run("2026-05-01T10:01:00Z", None)],
            at("2026-05-01T10:01:01Z"),
        );
        assert!(again.create.is_empty(), "{again:?}");
    }

    #[test]
    fn forbid_skips_a_time_while_a_run_is_active_and_replace_terminates_it() {
        let base = |policy: &str| {
            let (_, cron) = ticks(
                cron(&format!("concurrencyPolicy: {policy}")),
                &[],
                &["2026-05-01T10:00:30Z"],
            );
            cron
        };
        let active = [run("2026-05-01T10:00:00Z", Some(Phase::Started))];
        let forbid = tick(&base("Forbid"), &active, at("2026-05-01T10:01:00.5Z"));
        assert!(forbid.create.is_empty());
        assert_eq!(forbid.events[0].0, "RunSkipped");
        assert!(
            forbid.events[0]
                .1
                .contains("nightly-1777629600 still running"),
            "{:?}",
            forbid.events
        );
        let replace = tick(&base("Replace"), &active, at("2026-05-01T10:01:00.5Z"));
        assert_eq!(replace.terminate, ["nightly-1777629600"]);
        assert_eq!(replace.create, [at("2026-05-01T10:01:00Z").as_second()]);
        let allow = tick(&base("Allow"), &active, at("2026-05-01T10:01:00.5Z"));
        assert_eq!((allow.create.len(), allow.terminate.len()), (1, 0));
    }

    #[test]
    fn replace_catching_up_starts_the_latest_time_and_names_the_ones_it_replaced_at_once() {
        // Handled 10:00:30, then the operator was down until 10:03:00.5: 10:01, 10:02 and
        // 10:03 are due at once with `catchUp: All`, the run of 10:00 still active.
        let (_, cron) = ticks(
            cron("concurrencyPolicy: Replace, catchUp: All"),
            &[],
            &["2026-05-01T10:00:30Z"],
        );
        let active = [run("2026-05-01T10:00:00Z", Some(Phase::Started))];
        let tick = tick(&cron, &active, at("2026-05-01T10:03:00.5Z"));
        assert_eq!(tick.create, [at("2026-05-01T10:03:00Z").as_second()]);
        assert_eq!(tick.terminate, ["nightly-1777629600"]);
        // Each of the earlier ones would be replaced at once: not started, and named missed.
        let missed: Vec<&String> = tick
            .events
            .iter()
            .filter(|(reason, _)| *reason == "RunsMissed")
            .map(|(_, message)| message)
            .collect();
        assert_eq!(missed.len(), 1, "{:?}", tick.events);
        for time in ["2026-05-01T10:01:00Z", "2026-05-01T10:02:00Z"] {
            assert!(missed[0].contains(time), "{time}: {missed:?}");
        }
        assert!(!missed[0].contains("10:03:00Z"), "{missed:?}");
    }

    #[test]
    fn an_edit_fires_nothing_and_the_new_schedule_counts_from_it() {
        let (_, mut cron) = ticks(cron(""), &[], &["2026-05-01T10:00:30Z"]);
        cron.spec.schedules = vec!["*/5 * * * *".into()];
        // Edited at 10:03:10, seen then: 10:01..10:03 of the old schedule are not run.
        let (created, cron) = ticks(
            cron,
            &[],
            &[
                "2026-05-01T10:03:10Z",
                "2026-05-01T10:04:00Z",
                "2026-05-01T10:05:00.1Z",
            ],
        );
        assert_eq!(created, [at("2026-05-01T10:05:00Z").as_second()]);
        assert_eq!(
            cron.status.unwrap().next_schedule_time,
            Some(Time(at("2026-05-01T10:10:00Z")))
        );
    }

    #[test]
    fn resuming_fires_at_most_once() {
        let (_, mut cron) = ticks(cron("catchUp: All"), &[], &["2026-05-01T10:00:30Z"]);
        cron.spec.suspend = true;
        let (created, mut cron) =
            ticks(cron, &[], &["2026-05-01T10:00:40Z", "2026-05-01T10:03:00Z"]);
        assert!(created.is_empty());
        cron.spec.suspend = false;
        let (created, _) = ticks(cron, &[], &["2026-05-01T10:05:30Z", "2026-05-01T10:05:31Z"]);
        assert_eq!(created, [at("2026-05-01T10:05:00Z").as_second()]);
    }

    /// What a run's change wakes its cron for: a start or an end the status does not show yet,
    /// a newer success, an end beyond the history limits; not a listed run's progress.
    #[test]
    fn a_run_starting_or_ending_unlike_the_status_says_is_followed_at_once() {
        let (_, mut cron) = ticks(
            cron("successfulRunsHistoryLimit: 1"),
            &[],
            &["2026-05-01T10:00:30Z", "2026-05-01T10:01:00.2Z"],
        );
        let unread = || -> Vec<Run> { panic!("the runs are read for an ended run only") };
        let started = run("2026-05-01T10:01:00Z", Some(Phase::Started));
        assert!(
            !follows_run(&cron, &started, unread),
            "a listed run's progress"
        );
        let by_hand = run("2026-05-01T10:01:30Z", None);
        assert!(
            follows_run(&cron, &by_hand, unread),
            "an active run not listed"
        );
        let leaving = Run {
            terminating: true,
            ..by_hand.clone()
        };
        assert!(!follows_run(&cron, &leaving, unread), "asked to terminate");

        let ended = Run {
            phase: Some(Phase::Completed),
            finished_at: Some(at("2026-05-01T10:01:04Z")),
            ..started.clone()
        };
        assert!(follows_run(&cron, &ended, || vec![ended.clone()]));
        // Suspended meanwhile: the tick it wakes shows the end all the same.
        cron.spec.suspend = true;
        let followed = tick(
            &cron,
            std::slice::from_ref(&ended),
            at("2026-05-01T10:01:04.1Z"),
        );
        let status = followed.status.expect("a new status");
        assert_eq!(status.active, []);
        assert_eq!(
            status.last_successful_time,
            Some(Time(at("2026-05-01T10:01:04Z")))
        );
        cron.status = Some(status);
        assert!(!follows_run(&cron, &ended, || vec![ended.clone()]), "shown");

        let older = Run {
            finished_at: Some(at("2026-05-01T10:00:50Z")),
            ..run("2026-05-01T10:00:00Z", Some(Phase::Completed))
        };
        let both = || vec![older.clone(), ended.clone()];
        assert!(follows_run(&cron, &older, both), "beyond the history limit");
        let followed = tick(&cron, &both(), at("2026-05-01T10:01:05Z"));
        assert_eq!(followed.delete, std::slice::from_ref(&older.name));
        let failed = Run {
            phase: Some(Phase::Failed),
            ..older.clone()
        };
        let kept = || vec![failed.clone(), ended.clone()];
        assert!(
            !follows_run(&cron, &failed, kept),
            "within the limits, shown"
        );
    }

    #[test]
    fn finished_runs_beyond_the_history_limits_are_deleted_oldest_first() {
        let runs = [
            run("2026-05-01T10:01:00Z", Some(Phase::Completed)),
            run("2026-05-01T10:02:00Z", Some(Phase::Failed)),
            run("2026-05-01T10:03:00Z", Some(Phase::Completed)),
            run("2026-05-01T10:04:00Z", Some(Phase::Failed)),
            run("2026-05-01T10:05:00Z", Some(Phase::Completed)),
        ];
        let cron = cron("successfulRunsHistoryLimit: 2");
        let tick = tick(&cron, &runs, at("2026-05-01T10:05:10Z"));
        assert_eq!(tick.delete, [runs[0].name.clone(), runs[1].name.clone()]);
    }

    #[test]
    fn a_schedule_that_does_not_parse_is_a_condition_naming_it() {
        let mut bad = cron("");
        bad.spec.schedules = vec!["every day".into()];
        let tick = tick(&bad, &[], at("2026-05-01T10:05:10Z"));
        let condition = &tick.status.unwrap().conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "InvalidSchedule")
        );
        assert!(
            condition.message.contains("schedules[0] \"every day\""),
            "{}",
            condition.message
        );
    }

    /// What every run would fail for, as a WorkFlow would fail at once, each a spec in YAML
    /// and a part of the message naming it.
    #[rstest]
    #[case::cycle(
        "workflowSpec: {containers: [{stepName: a, image: x, dependsOn: [b]}, {stepName: b, image: x, dependsOn: [a]}]}",
        "spec.workflowSpec: dependency cycle: a -> b -> a"
    )]
    #[case::unknown_dependency(
        "workflowSpec: {containers: [{stepName: a, image: x, dependsOn: [nope]}]}",
        "spec.workflowSpec: step \"a\" depends on unknown step \"nope\""
    )]
    #[case::bad_when(
        "workflowSpec: {containers: [{stepName: a, image: x}, {stepName: b, image: x, dependsOn: [a], when: 'steps.a.outputs.k =='}]}",
        "spec.workflowSpec: step \"b\": when \"steps.a.outputs.k ==\" does not compile"
    )]
    #[case::no_steps(
        "workflowSpec: {containers: []}",
        "spec.workflowSpec: spec.containers: the workflow has no steps"
    )]
    #[case::not_a_spec(
        "workflowSpec: {containers: 3}",
        "spec.workflowSpec is not a WorkFlow spec"
    )]
    #[case::both(
        "workflowSpec: {containers: [{stepName: a, image: x}]}, workflowTemplateRef: {name: etl}",
        "give one of spec.workflowSpec and spec.workflowTemplateRef"
    )]
    fn a_workflow_spec_every_run_would_fail_for_is_a_condition_and_starts_nothing(
        #[case] spec: &str,
        #[case] named: &str,
    ) {
        let mut bad = cron("");
        let fields: serde_json::Value = serde_yaml::from_str(&format!("{{{spec}}}")).unwrap();
        bad.spec.workflow_spec = fields.get("workflowSpec").cloned();
        bad.spec.workflow_template_ref = fields
            .get("workflowTemplateRef")
            .map(|r| serde_json::from_value(r.clone()).unwrap());
        let (created, bad) = ticks(
            bad,
            &[],
            &["2026-05-01T10:00:30Z", "2026-05-01T10:01:00.2Z"],
        );
        assert!(created.is_empty(), "{created:?}");
        let status = bad.status.clone().unwrap();
        let condition = &status.conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "InvalidWorkflowSpec")
        );
        assert!(condition.message.contains(named), "{}", condition.message);
        // The time passed without a run, as missed: the next is the one after it.
        assert_eq!(
            status.last_schedule_time,
            Some(Time(at("2026-05-01T10:01:00Z")))
        );
        let again = tick(&bad, &[], at("2026-05-01T10:01:00.5Z"));
        assert!(again.events.is_empty(), "one Event per problem: {again:?}");
    }

    #[test]
    fn a_fixed_workflow_spec_is_ready_again_and_fires_nothing_by_itself() {
        let mut bad = cron("");
        bad.spec.workflow_spec = Some(serde_json::json!({"containers": []}));
        let invalid = [
            "2026-05-01T10:00:30Z",
            "2026-05-01T10:01:00.2Z",
            "2026-05-01T10:02:00.2Z",
        ];
        let (created, mut cron) = ticks(bad, &[], &invalid);
        assert!(created.is_empty(), "{created:?}");
        // Fixed at 10:02:30: 10:01 and 10:02 passed while it was invalid and are not run late.
        cron.spec.workflow_spec =
            Some(serde_json::json!({"containers": [{"stepName": "a", "image": "x"}]}));
        let fixed = tick(&cron, &[], at("2026-05-01T10:02:30Z"));
        assert!(
            fixed.create.is_empty() && fixed.events.is_empty(),
            "{fixed:?}"
        );
        let (created, cron) = ticks(
            cron,
            &[],
            &["2026-05-01T10:02:30Z", "2026-05-01T10:03:00.1Z"],
        );
        assert_eq!(created, [at("2026-05-01T10:03:00Z").as_second()]);
        let condition = &cron.status.unwrap().conditions[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "Scheduled")
        );
    }

    #[test]
    fn a_shared_template_is_read_by_each_run_not_by_the_tick() {
        let mut shared = cron("");
        shared.spec.workflow_spec = None;
        shared.spec.workflow_template_ref =
            Some(serde_json::from_value(serde_json::json!({"name": "etl"})).unwrap());
        let (created, _) = ticks(
            shared,
            &[],
            &["2026-05-01T10:00:30Z", "2026-05-01T10:01:00.2Z"],
        );
        assert_eq!(created, [at("2026-05-01T10:01:00Z").as_second()]);
    }
}

use crate::labels::{LABEL_CRON, LABEL_SCHEDULED};
use kube::ResourceExt;

fn cron_with(spec: serde_json::Value) -> crate::crd::CronWorkFlow {
    let mut cron = crate::crd::CronWorkFlow::new("nightly", serde_json::from_value(spec).unwrap());
    cron.metadata.namespace = Some("ci".into());
    cron.metadata.uid = Some("u-1".into());
    cron
}

#[test]
fn a_run_is_named_for_its_time_labelled_and_owned_by_its_cron_workflow() {
    let cron = cron_with(serde_json::json!({
        "schedules": ["@daily"],
        "workflowMetadata": {"labels": {"team": "data"}, "annotations": {"note": "n"}},
        "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox"}]},
    }));
    let run = run_of(&cron, 1_800_000_000).unwrap();
    assert_eq!(run.metadata.name.as_deref(), Some("nightly-1800000000"));
    assert_eq!(run.metadata.namespace.as_deref(), Some("ci"));
    let labels = run.metadata.labels.unwrap();
    assert_eq!(labels[LABEL_CRON], "nightly");
    assert_eq!(labels[LABEL_SCHEDULED], "1800000000");
    assert_eq!(labels["team"], "data");
    assert_eq!(run.metadata.annotations.unwrap()["note"], "n");
    let owner = &run.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CronWorkFlow", "nightly", "u-1")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(run.spec.containers[0].step_name, "a");
}

#[test]
fn a_run_lives_in_its_crons_shard() {
    let mut cron = cron_with(serde_json::json!({
        "schedules": ["@daily"],
        "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox"}]},
    }));
    let unsharded = run_of(&cron, 0).unwrap();
    assert!(!unsharded.labels().contains_key(crate::shards::LABEL_SHARD));
    cron.labels_mut()
        .insert(crate::shards::LABEL_SHARD.into(), "4".into());
    let run = run_of(&cron, 0).unwrap();
    assert_eq!(run.labels()[crate::shards::LABEL_SHARD], "4");
}

#[test]
fn a_run_needs_exactly_one_of_a_spec_and_a_template_reference() {
    let neither = cron_with(serde_json::json!({"schedules": ["@daily"]}));
    assert_eq!(
        run_of(&neither, 0).unwrap_err(),
        "give one of spec.workflowSpec and spec.workflowTemplateRef"
    );
}

/// A misspelt macro names the one meant; a step beyond its field's range is refused (it would
/// run once a larger unit, not every N); both name the schedule.
#[rstest]
#[case::misspelt_every(
    "@evry 5m",
    r#"schedules[0] "@evry 5m": unknown "@evry": did you mean "@every"?"#
)]
#[case::misspelt_daily(
    "@dialy",
    r#"schedules[0] "@dialy": unknown "@dialy": did you mean "@daily"?"#
)]
#[case::minute_step(
    "*/61 * * * *",
    r#"schedules[0] "*/61 * * * *": the minute's step 61 is beyond its range 0-59"#
)]
#[case::hour_step(
    "0 */24 * * *",
    r#"schedules[0] "0 */24 * * *": the hour's step 24 is beyond its range 0-23"#
)]
fn a_schedule_that_cannot_mean_what_it_says_is_refused_saying_why(
    #[case] expression: &str,
    #[case] why: &str,
) {
    let refused = Schedule::parse(&spec(&[expression], None), at("2026-01-01T00:00:00Z"));
    assert_eq!(refused.err(), Some(vec![why.to_string()]));
}

#[test]
fn steps_within_their_fields_range_are_taken() {
    let schedule = schedule(&["*/30 */12 * * *"], None);
    assert_eq!(
        times(&schedule, "2026-01-01T00:00:00Z", "2026-01-01T12:30:00Z"),
        [
            "2026-01-01T00:30:00Z",
            "2026-01-01T12:00:00Z",
            "2026-01-01T12:30:00Z"
        ]
    );
}
