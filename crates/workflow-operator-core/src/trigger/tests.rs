use serde_json::json;

use super::verify::{Verification, sign};
use super::*;

/// A trigger from its spec's YAML, named `on-push` in `ci`.
fn trigger(spec: &str) -> WorkFlowTrigger {
    let spec = serde_yaml::from_str(spec).expect("a trigger spec");
    let mut trigger = WorkFlowTrigger::new("on-push", spec);
    trigger.metadata.namespace = Some("ci".into());
    trigger.metadata.uid = Some("uid-1".into());
    trigger
}

const ON_PUSH: &str = r#"
webhook: {github: {secretRef: {name: gh, key: token}}}
filter: 'body.ref == "refs/heads/main"'
parameters: [{name: sha, value: body.after}, {name: n, value: size(body.commits)}]
workflowSpec:
  arguments: {parameters: [{name: sha}]}
  containers: [{stepName: build, image: busybox, command: [echo, "{{workflow.parameters.sha}}"]}]
"#;

fn delivery(headers: &[(&str, &str)], body: &serde_json::Value) -> Delivery {
    Delivery {
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: serde_json::to_vec(body).unwrap(),
    }
}

fn push(git_ref: &str) -> serde_json::Value {
    json!({"ref": git_ref, "after": "abc123", "commits": [{}, {}]})
}

#[test]
fn a_github_signature_of_the_body_is_taken_and_any_other_refused() {
    let trigger = trigger(ON_PUSH);
    let check = Verification::of(&trigger);
    let body = push("refs/heads/main");
    let signed = |secret: &[u8]| {
        let signature = format!(
            "sha256={}",
            sign(secret, &serde_json::to_vec(&body).unwrap())
        );
        delivery(&[("x-hub-signature-256", &signature)], &body)
    };
    assert_eq!(check.check(b"s3cret", &signed(b"s3cret")), Ok(()));
    let wrong = check.check(b"s3cret", &signed(b"other")).unwrap_err();
    assert_eq!(wrong, "x-hub-signature-256 does not match the body");
    let unsigned = check.check(b"s3cret", &delivery(&[], &body)).unwrap_err();
    assert_eq!(unsigned, "no x-hub-signature-256");
    let mut tampered = signed(b"s3cret");
    tampered.body.push(b' ');
    assert!(check.check(b"s3cret", &tampered).is_err());
}

#[test]
fn a_gitlab_token_and_a_generic_hmac_header_are_checked() {
    let gitlab =
        trigger("webhook: {gitlab: {secretRef: {name: gl, key: token}}}\nworkflowSpec: {}");
    let check = Verification::of(&gitlab);
    let body = json!({});
    assert_eq!(
        check.check(b"tok", &delivery(&[("x-gitlab-token", "tok")], &body)),
        Ok(())
    );
    assert!(
        check
            .check(b"tok", &delivery(&[("x-gitlab-token", "tok2")], &body))
            .is_err()
    );
    let hmac = trigger(
        "webhook: {hmac: {header: X-Signature, secretRef: {name: s, key: k}}}\nworkflowSpec: {}",
    );
    let check = Verification::of(&hmac);
    let signature = sign(b"k", &serde_json::to_vec(&body).unwrap());
    assert_eq!(
        check.check(b"k", &delivery(&[("x-signature", &signature)], &body)),
        Ok(())
    );
    let prefixed = format!("sha256={signature}");
    assert_eq!(
        check.check(b"k", &delivery(&[("x-signature", &prefixed)], &body)),
        Ok(())
    );
    assert!(
        check
            .check(b"other", &delivery(&[("x-signature", &signature)], &body))
            .is_err()
    );
}

#[test]
fn a_push_to_main_makes_a_run_named_for_the_delivery_with_its_commit() {
    let trigger = trigger(ON_PUSH);
    let compiled = Compiled::of(&trigger).unwrap();
    let delivered = delivery(&[("x-github-delivery", "d-1")], &push("refs/heads/main"));
    let event = &events(&trigger, &delivered).unwrap()[0];
    let id = compiled.id_of(event).unwrap();
    assert_eq!(id, "d-1");
    let Decision::Run(run) = compiled.decide(&trigger, event, &id, 1000).unwrap() else {
        panic!("a run");
    };
    assert_eq!(
        run.metadata.name.as_deref(),
        Some(names::trigger_run_name("on-push", "d-1").as_str())
    );
    let parameters = &run.spec.arguments.as_ref().unwrap().parameters;
    let values: Vec<_> = parameters
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_deref()))
        .collect();
    assert_eq!(values, [("sha", Some("abc123")), ("n", Some("2"))]);
    let labels = run.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[LABEL_TRIGGER], "on-push");
    assert!(
        !labels.contains_key(crate::shards::LABEL_SHARD),
        "unsharded"
    );
    assert_eq!(
        run.metadata.annotations.as_ref().unwrap()[ANNOTATION_DELIVERY],
        "d-1"
    );
    assert_eq!(
        run.metadata.owner_references.as_ref().unwrap()[0].uid,
        "uid-1"
    );
}

#[test]
fn a_filtered_or_failing_filter_makes_no_run_and_says_why() {
    let trigger = trigger(ON_PUSH);
    let compiled = Compiled::of(&trigger).unwrap();
    let other_branch = delivery(&[], &push("refs/heads/dev"));
    let event = &events(&trigger, &other_branch).unwrap()[0];
    assert_eq!(
        compiled.decide(&trigger, event, "x", 0).unwrap(),
        Decision::Filtered("filter is false".into())
    );
    // GitHub's ping has no ref.
    let ping = delivery(&[], &json!({"zen": "hi"}));
    let event = &events(&trigger, &ping).unwrap()[0];
    let Decision::Filtered(why) = compiled.decide(&trigger, event, "x", 0).unwrap() else {
        panic!("filtered");
    };
    assert!(why.starts_with("filter fails"), "{why}");
}

#[test]
fn run_names_are_the_same_for_one_delivery_and_distinct_for_two() {
    let a = names::trigger_run_name("on-push", "d-1");
    assert_eq!(a, names::trigger_run_name("on-push", "d-1"));
    assert_ne!(a, names::trigger_run_name("on-push", "d-2"));
    assert_ne!(a, names::trigger_run_name("on-pull", "d-1"));
    let long = names::trigger_run_name(&"t".repeat(100), "d-1");
    assert!(long.len() <= 63, "{long}");
}

#[test]
fn without_an_id_header_the_body_is_the_id_and_an_id_expression_wins() {
    let plain = trigger("webhook: {}\nworkflowSpec: {}");
    let compiled = Compiled::of(&plain).unwrap();
    let one = delivery(&[], &json!({"a": 1}));
    let two = delivery(&[], &json!({"a": 2}));
    let id = |d: &Delivery| compiled.id_of(&events(&plain, d).unwrap()[0]).unwrap();
    assert_eq!(id(&one), id(&one.clone()));
    assert_ne!(id(&one), id(&two));
    let by_expr = trigger("webhook: {}\nid: 'string(body.a) + \"-x\"'\nworkflowSpec: {}");
    let compiled = Compiled::of(&by_expr).unwrap();
    assert_eq!(
        compiled.id_of(&events(&by_expr, &two).unwrap()[0]).unwrap(),
        "2-x"
    );
}

#[test]
fn a_bucket_notification_makes_one_event_per_record_of_its_bucket_and_prefix() {
    let trigger = trigger(
        "bucket: {name: inbox, prefix: in/}\nparameters: [{name: key, value: key}]\nworkflowSpec: {}",
    );
    let mut body = s3::notification("inbox", "in/a b.csv", 3, "e", "0001");
    let other = s3::notification("other", "in/x", 1, "e", "0002")["Records"][0].clone();
    let outside = s3::notification("inbox", "out/y", 1, "e", "0003")["Records"][0].clone();
    body["Records"]
        .as_array_mut()
        .unwrap()
        .extend([other, outside]);
    let events = events(&trigger, &delivery(&[], &body)).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].vars["key"], json!("in/a b.csv"));
    assert_eq!(events[0].default_id, "inbox/in/a b.csv@0001");
    let compiled = Compiled::of(&trigger).unwrap();
    let Decision::Run(run) = compiled.decide(&trigger, &events[0], "i", 0).unwrap() else {
        panic!("a run");
    };
    let parameters = &run.spec.arguments.as_ref().unwrap().parameters;
    assert_eq!(parameters[0].value.as_deref(), Some("in/a b.csv"));
    assert!(super::events(&trigger, &delivery(&[], &json!({}))).is_err());
}

#[test]
fn a_trigger_without_a_source_or_with_a_bad_expression_is_not_ready() {
    let none = trigger("workflowSpec: {}");
    assert_eq!(
        problems(&none),
        ["give one of spec.webhook and spec.bucket"]
    );
    let bad = trigger("webhook: {}\nfilter: 'body.'\nworkflowSpec: {}");
    let found = problems(&bad);
    assert!(
        found[0].starts_with("spec.filter: does not compile"),
        "{found:?}"
    );
    assert!(problems(&trigger(ON_PUSH)).is_empty());
}

#[test]
fn the_status_counts_the_runs_and_the_history_limits_delete_the_oldest_finished() {
    use crate::cron::plan::Run;
    use crate::lifecycle::Phase;
    let trigger = trigger(&format!("{ON_PUSH}successfulRunsHistoryLimit: 1\n"));
    let run = |name: &str, at: i64, phase: Option<Phase>| Run {
        name: name.into(),
        uid: None,
        scheduled: at,
        phase,
        finished_at: None,
        terminating: false,
    };
    let runs = [
        run("a", 10, Some(Phase::Completed)),
        run("b", 20, Some(Phase::Completed)),
        run("c", 30, None),
    ];
    let now = k8s_openapi::jiff::Timestamp::from_second(100).unwrap();
    let follow = status::follow(&trigger, &runs, now);
    assert_eq!(follow.delete, ["a"]);
    let status = follow.status.unwrap();
    assert_eq!((status.runs, status.active), (2, vec!["c".to_string()]));
    assert_eq!(status.source.as_deref(), Some("webhook/github"));
    assert_eq!(status.last_delivery_time.unwrap().0.as_second(), 30);
    assert_eq!(status.conditions[0].status, "True");
}
