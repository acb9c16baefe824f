//! Jobs (batch/v1) as the API server keeps them: what it writes into a new Job once it has a uid
//! (k8s.io/kubernetes pkg/registry/batch/job/strategy.go `PrepareForCreate` with
//! `generateSelector`, and pkg/apis/batch/v1/defaults.go). The Job controller
//! ([`crate::controllers::jobs`]) finds its pods by the labels written here.

use serde_json::{Map, Value, json};

use crate::api::strategy::{FieldLabels, Strategy};

/// A Job's rules: it keeps `metadata.generation` (pkg/registry/batch/job/strategy.go
/// `PrepareForCreate`), a delete naming no propagation policy orphans its pods (the same file,
/// `DefaultGarbageCollectionPolicy`), `kubectl get all` lists it (storage.go `Categories`), its
/// field labels are pkg/apis/batch/v1/conversion.go's, which words its refusal its own way
/// (`status.successful` is `status.succeeded`: strategy.go `JobToSelectableFields`), every write
/// gets its pod template's defaults ([`super::pod_defaults`]) and a new Job
/// [`job_defaults_on_create`].
pub static STRATEGY: Strategy = Strategy {
    tracks_generation: true,
    orphans_by_default: true,
    categories: &["all"],
    field_labels: Some(FieldLabels {
        labels: &["metadata.name", "metadata.namespace", "status.successful"],
        paths: &[("status.successful", "status.succeeded")],
        // pkg/registry/batch/job/strategy.go `JobToSelectableFields`:
        // `strconv.Itoa(int(job.Status.Succeeded))`.
        absent: &[("status.successful", "0")],
        refusal_names: Some("Job"),
    }),
    decode: super::pod_defaults::template,
    prepare_for_create: job_defaults_on_create,
    validate: super::validation::job,
    ..Strategy::DEFAULT
};

/// Label (and selector key) naming the Job that owns a pod, by uid.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The same, as older clients know it.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// Label naming the Job that owns a pod, by name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The same, as older clients know it.
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// What the real API server does to a new Job once it has a uid: the selector and the template
/// labels that tie pods to it (unless `spec.manualSelector`), the Job's own labels from the
/// template when it has none, and the defaults of `backoffLimit` (6), `completions` and
/// `parallelism` (1), `suspend` (false), `completionMode` (NonIndexed) and
/// `podReplacementPolicy` (TerminatingOrFailed). The pod template's `restartPolicy` is kept as
/// given.
pub fn job_defaults_on_create(job: &mut Value) {
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !job.get("spec").is_some_and(Value::is_object) {
        job["spec"] = json!({});
    }
    let spec = job["spec"].as_object_mut().expect("spec is an object");
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    let mut default = |field: &str, value: Value| {
        if spec.get(field).is_none_or(Value::is_null) {
            spec.insert(field.into(), value);
        }
    };
    default("parallelism", json!(1));
    default("backoffLimit", json!(6));
    default("suspend", json!(false));
    default("completionMode", json!("NonIndexed"));
    default("podReplacementPolicy", json!("TerminatingOrFailed"));
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    if !manual {
        if spec.get("selector").is_none_or(Value::is_null) {
            spec.insert(
                "selector".into(),
                json!({"matchLabels": {CONTROLLER_UID_LABEL: uid}}),
            );
        }
        let template = spec.entry("template").or_insert_with(|| json!({}));
        if !template.get("metadata").is_some_and(Value::is_object) {
            template["metadata"] = json!({});
        }
        if !template["metadata"]
            .get("labels")
            .is_some_and(Value::is_object)
        {
            template["metadata"]["labels"] = json!({});
        }
        let labels = template["metadata"]["labels"]
            .as_object_mut()
            .expect("labels is an object");
        // A label the user set is kept; a conflicting one fails selector validation on a real
        // server.
        for (key, value) in [
            (CONTROLLER_UID_LABEL, &uid),
            (LEGACY_CONTROLLER_UID_LABEL, &uid),
            (JOB_NAME_LABEL, &name),
            (LEGACY_JOB_NAME_LABEL, &name),
        ] {
            labels.entry(key).or_insert_with(|| json!(value));
        }
    }
    let template_labels = job.pointer("/spec/template/metadata/labels").cloned();
    let own_labels_empty = job
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if own_labels_empty
        && let Some(labels) =
            template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        job["metadata"]["labels"] = labels;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_tie_pods_to_the_job_by_uid_and_name() {
        let mut job = json!({
            "metadata": {"name": "pi", "uid": "u-1"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}}
        });
        job_defaults_on_create(&mut job);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {CONTROLLER_UID_LABEL: "u-1"}})
        );
        let expected_labels = json!({
            CONTROLLER_UID_LABEL: "u-1",
            LEGACY_CONTROLLER_UID_LABEL: "u-1",
            JOB_NAME_LABEL: "pi",
            LEGACY_JOB_NAME_LABEL: "pi",
        });
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            expected_labels
        );
        assert_eq!(job["metadata"]["labels"], expected_labels);
        for (field, value) in [
            ("backoffLimit", json!(6)),
            ("completions", json!(1)),
            ("parallelism", json!(1)),
            ("suspend", json!(false)),
            ("completionMode", json!("NonIndexed")),
        ] {
            assert_eq!(job["spec"][field], value, "{field}");
        }
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn defaults_keep_what_the_user_set() {
        let mut job = json!({
            "metadata": {"name": "pi", "uid": "u-1", "labels": {"team": "a"}},
            "spec": {
                "backoffLimit": 2,
                "parallelism": 3,
                "suspend": true,
                "template": {"metadata": {"labels": {"app": "x", "job-name": "mine"}},
                             "spec": {"restartPolicy": "OnFailure"}}
            }
        });
        job_defaults_on_create(&mut job);
        assert_eq!(job["spec"]["backoffLimit"], 2);
        assert_eq!(job["spec"]["parallelism"], 3);
        // Parallelism alone leaves completions unset: a work-queue Job.
        assert!(job["spec"].get("completions").is_none());
        assert_eq!(job["spec"]["suspend"], true);
        assert_eq!(job["metadata"]["labels"], json!({"team": "a"}));
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app"], "x");
        assert_eq!(labels["job-name"], "mine");
        assert_eq!(labels[JOB_NAME_LABEL], "pi");
        assert_eq!(
            job["spec"]["template"]["spec"]["restartPolicy"],
            "OnFailure"
        );
    }

    #[test]
    fn manual_selector_generates_no_selector_or_labels() {
        let mut job = json!({
            "metadata": {"name": "pi", "uid": "u-1"},
            "spec": {"manualSelector": true, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}}}
        });
        job_defaults_on_create(&mut job);
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"a": "b"}}));
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({"a": "b"})
        );
    }
}
