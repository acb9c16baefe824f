use super::*;

fn at(seconds: i64) -> Timestamp {
    "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
}

fn strategy(yaml: &str) -> Result<Strategy, String> {
    Strategy::compile(&serde_yaml::from_str::<RetryStrategy>(yaml).unwrap())
}

const EXITED: LastRetry<'static> = LastRetry {
    exit_code: Some(1),
    reason: "Error",
    message: "",
    duration: 3,
};

#[test]
fn waits_grow_by_the_factor_up_to_the_cap() {
    let s = strategy("{limit: 10, backoff: {duration: 1s, factor: 2, cap: 5s}}").unwrap();
    let waits: Vec<i64> = (1..=5).map(|n| s.wait_before(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 5, 5]);
    let plain = strategy("{limit: 1}").unwrap();
    assert_eq!(plain.wait_before(1), SignedDuration::ZERO);
}

#[test]
fn the_next_attempt_is_due_its_wait_after_the_failure_until_the_limit() {
    let s = strategy("{limit: 2, backoff: {duration: 5s, factor: 2}}").unwrap();
    let decide = |failed| s.decide(failed, Cause::Program, &EXITED, (at(100), at(0)));
    assert_eq!(
        decide(0),
        Verdict::Retry {
            attempt: 1,
            at: at(105),
            wait: SignedDuration::from_secs(5)
        }
    );
    assert_eq!(
        decide(1),
        Verdict::Retry {
            attempt: 2,
            at: at(110),
            wait: SignedDuration::from_secs(10)
        }
    );
    assert_eq!(
        decide(2),
        Verdict::GiveUp("after 3 attempts (retryStrategy.limit 2)".into())
    );
}

#[test]
fn the_policy_tells_the_programs_failure_from_the_pods() {
    let on_error = strategy("{limit: 3, retryPolicy: OnError}").unwrap();
    let on_failure = strategy("{limit: 3, retryPolicy: OnFailure}").unwrap();
    let always = strategy("{limit: 3}").unwrap();
    let times = (at(0), at(0));
    let retried =
        |s: &Strategy, cause| matches!(s.decide(0, cause, &EXITED, times), Verdict::Retry { .. });
    assert!(!retried(&on_error, Cause::Program));
    assert!(retried(&on_error, Cause::Pod));
    assert!(retried(&on_failure, Cause::Program));
    assert!(!retried(&on_failure, Cause::Pod));
    assert!(retried(&always, Cause::Program) && retried(&always, Cause::Pod));
    assert!(!retried(&always, Cause::Final));
    let Verdict::GiveUp(why) = on_error.decide(0, Cause::Program, &EXITED, times) else {
        panic!("not retried")
    };
    assert_eq!(
        why,
        "not retried: retryPolicy OnError retries only a pod that could not run"
    );
}

#[test]
fn the_expression_reads_the_last_attempt() {
    let s = strategy("{limit: 3, expression: 'lastRetry.exitCode in [75, 143]'}").unwrap();
    let times = (at(0), at(0));
    let with_code = |code| LastRetry {
        exit_code: Some(code),
        ..EXITED
    };
    assert!(matches!(
        s.decide(0, Cause::Program, &with_code(75), times),
        Verdict::Retry { .. }
    ));
    assert_eq!(
        s.decide(0, Cause::Program, &with_code(1), times),
        Verdict::GiveUp(
            r#"not retried: retryStrategy.expression "lastRetry.exitCode in [75, 143]" is false"#
                .into()
        )
    );
    let slow = strategy(
        r#"{limit: 3, expression: 'lastRetry.duration < 60 && lastRetry.reason != "OOMKilled"'}"#,
    )
    .unwrap();
    assert!(matches!(
        slow.decide(0, Cause::Pod, &EXITED, times),
        Verdict::Retry { .. }
    ));
}

#[test]
fn no_attempt_starts_past_the_max_duration() {
    let s = strategy("{limit: 10, backoff: {duration: 10s, maxDuration: 1m}}").unwrap();
    assert!(matches!(
        s.decide(3, Cause::Program, &EXITED, (at(45), at(0))),
        Verdict::Retry { .. }
    ));
    let Verdict::GiveUp(why) = s.decide(4, Cause::Program, &EXITED, (at(55), at(0))) else {
        panic!("given up")
    };
    assert!(why.contains("maxDuration"), "{why}");
}

#[test]
fn a_bad_strategy_is_refused_saying_what_is_wrong() {
    for (yaml, says) in [
        ("{limit: -1}", "retryStrategy.limit -1 is negative"),
        (
            "{limit: 1, backoff: {duration: 1s, factor: 0.5}}",
            "factor 0.5 is below 1",
        ),
        (
            "{limit: 1, backoff: {duration: soon}}",
            r#"backoff.duration "soon" is not a duration"#,
        ),
        (
            "{limit: 1, backoff: {duration: 1s, cap: -5s}}",
            "backoff.cap",
        ),
        (
            "{limit: 1, expression: 'lastRetry.exitCode =='}",
            "does not compile",
        ),
        (
            "{limit: 1, expression: 'steps.a.phase == \"x\"'}",
            r#"names "steps""#,
        ),
    ] {
        let error = strategy(yaml)
            .err()
            .unwrap_or_else(|| panic!("{yaml} is refused"));
        assert!(error.contains(says), "{yaml}: {error}");
    }
}

#[test]
fn durations_are_gos_or_whole_seconds() {
    assert_eq!(parse_duration("90"), Ok(SignedDuration::from_secs(90)));
    assert_eq!(parse_duration("1m30s"), Ok(SignedDuration::from_secs(90)));
    assert_eq!(
        parse_duration("500ms"),
        Ok(SignedDuration::from_millis(500))
    );
}
