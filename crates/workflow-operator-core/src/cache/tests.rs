use super::*;
use crate::crd::Cache;
use crate::testing::step;

fn inputs(pairs: &[(&str, &str, &str)]) -> Inputs {
    pairs
        .iter()
        .map(|(s, k, v)| ((s.to_string(), k.to_string()), v.to_string()))
        .collect()
}

#[test]
fn the_key_follows_what_the_step_runs_not_its_name() {
    let a = step("build", &[]);
    let mut renamed = a.clone();
    renamed.step_name = "compile".into();
    renamed.depends_on = vec!["x".into()];
    renamed.timeout = Some(5.into());
    let none = Inputs::new();
    assert_eq!(key_of(&a, &none, None), key_of(&renamed, &none, None));
    let mut other = a.clone();
    other.command = Some(vec!["sh".into(), "-c".into(), "echo other".into()]);
    assert_ne!(key_of(&a, &none, None), key_of(&other, &none, None));
    let mut reads = a.clone();
    reads.command = Some(vec!["echo".into(), "{{steps.src.outputs.sha}}".into()]);
    assert_ne!(
        key_of(&reads, &inputs(&[("src", "sha", "1")]), None),
        key_of(&reads, &inputs(&[("src", "sha", "2")]), None),
        "the outputs it reads are in the key"
    );
    let item = serde_json::json!("linux");
    assert_ne!(key_of(&a, &none, Some(&item)), key_of(&a, &none, None));
    let raw = |data: &str| {
        let mut step = a.clone();
        let yaml = format!("artifacts: [{{name: f, path: /f, raw: {{data: {data:?}}}}}]");
        step.inputs = Some(Box::new(serde_yaml::from_str(&yaml).unwrap()));
        key_of(&step, &none, None)
    };
    assert_ne!(
        raw("one"),
        raw("two"),
        "a raw input artifact's content is in the key"
    );
}

#[test]
fn an_explicit_key_replaces_the_content() {
    let mut a = step("a", &[]);
    a.cache = Some(Box::new(Cache {
        max_age: None,
        key: Some("dataset-{{steps.src.outputs.day}}".into()),
    }));
    let mut b = a.clone();
    b.image = "alpine:3.20".into();
    let day = inputs(&[("src", "day", "2026-11-27")]);
    assert_eq!(key_of(&a, &day, None), key_of(&b, &day, None));
    let key = key_of(&a, &day, None);
    assert!(key.entry_name().len() <= 63 && key.entry_name().starts_with("wf-cache-"));
}

#[test]
fn an_entry_round_trips_through_a_config_map_and_ages() {
    let created: Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
    let entry = Entry {
        outputs: [("sha".to_string(), "abc".to_string())].into(),
        from: "ns/wf step build".into(),
        created,
    };
    assert_eq!(Entry::from_data(&entry.to_data()), Some(entry.clone()));
    let hour = SignedDuration::from_hours(1);
    assert!(entry.fresh(Some(hour), created + SignedDuration::from_mins(59)));
    assert!(!entry.fresh(Some(hour), created + SignedDuration::from_mins(61)));
    assert!(entry.fresh(None, created + SignedDuration::from_hours(1000)));
    let status = entry.status("build", "wf-build-1");
    assert_eq!(status.phase, StepPhase::Succeeded);
    assert_eq!(
        status.message.as_deref(),
        Some("cached (from ns/wf step build at 2026-11-27T10:00:00Z)")
    );
}
