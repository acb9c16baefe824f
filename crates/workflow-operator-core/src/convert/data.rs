//! The small objects templates, tasks and workflows share: parameters, artifacts, outputs,
//! retry strategies, sequences, `continueOn`, locks, `memoize`, TTLs and pod clean-up.

use serde_json::{Map, Value, json};

use super::table::Place;
use super::walk::{self, Report, int_or_string};

/// Which list of parameters: an input's `value` is its `default` here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameters {
    Arguments,
    Inputs,
    Outputs,
}

/// A list of parameters.
pub fn parameters(value: &Value, at: &str, which: Parameters, report: &mut Report) -> Value {
    let converted = walk::items(value, at, report)
        .into_iter()
        .filter_map(|(at, parameter)| {
            let mut out = walk::fields(
                Place::Parameter,
                parameter,
                &at,
                report,
                |_, value, path, out, report| value_from(value, path, out, report),
            );
            if which == Parameters::Inputs
                && let Some(value) = out.remove("value")
            {
                out.insert("default".into(), value);
            }
            // An output whose source is not converted (named already) has nothing to read.
            let unread = which == Parameters::Outputs && !out.contains_key("valueFrom");
            (!unread).then_some(Value::Object(out))
        })
        .collect();
    Value::Array(converted)
}

/// `valueFrom: {path, parameter, configMapKeyRef, default}`: the path kept, a dag or steps
/// template's `parameter` read as ours (`{{steps.X...}}`), a ConfigMap's `name` and `key`, the
/// default beside it.
fn value_from(value: &Value, at: &str, out: &mut Map<String, Value>, report: &mut Report) {
    let from = walk::fields(
        Place::ValueFrom,
        value,
        at,
        report,
        |field, value, path, from, report| match field {
            "configMapKeyRef" => {
                from.insert(field.into(), config_map_key(value, path, report));
            }
            "parameter" => {
                let text = value.as_str().map(tasks_as_steps);
                from.insert(
                    field.into(),
                    text.map_or_else(|| value.clone(), Value::from),
                );
            }
            _ => {
                out.insert("default".into(), scalar_text(value));
            }
        },
    );
    if !from.is_empty() {
        out.insert("valueFrom".into(), Value::Object(from));
    }
}

/// A `configMapKeyRef`: its `name` and `key` (Argo ignores `optional`: a missing key fails the
/// workflow unless the parameter has a default, as here).
fn config_map_key(value: &Value, at: &str, report: &mut Report) -> Value {
    let mut out = Map::new();
    for field in ["name", "key"] {
        match value.get(field) {
            Some(text @ Value::String(_)) => {
                out.insert(field.into(), text.clone());
            }
            _ => report.not_converted(&walk::join(at, field), "expected a string"),
        }
    }
    let known = |f: &String| ["name", "key", "optional"].contains(&f.as_str());
    for field in value.as_object().into_iter().flatten().map(|(f, _)| f) {
        if !known(field) {
            report.not_converted(&walk::join(at, field), "not a field the converter knows");
        }
    }
    Value::Object(out)
}

/// A parameter's value as text, as Argo reads `default: 3`.
fn scalar_text(value: &Value) -> Value {
    match value {
        Value::String(_) => value.clone(),
        other => Value::String(other.to_string()),
    }
}

/// A list of artifacts (`from` reading `{{steps.X...}}`, `raw` as it is).
pub fn artifacts(value: &Value, at: &str, report: &mut Report) -> Vec<Map<String, Value>> {
    walk::items(value, at, report)
        .into_iter()
        .map(|(at, artifact)| {
            walk::fields(
                Place::Artifact,
                artifact,
                &at,
                report,
                |field, value, path, out, report| match field {
                    "raw" => {
                        if let Some(raw) = raw(value, path, report) {
                            out.insert(field.into(), raw);
                        }
                    }
                    _ => {
                        let mut from = value.clone();
                        walk::rewrite_strings(&mut from, &tasks_as_steps);
                        out.insert(field.into(), from);
                    }
                },
            )
        })
        .collect()
}

/// An artifact's `raw`: `{data}`, its content as text.
pub fn raw(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let data = value.get("data");
    for field in value.as_object().into_iter().flatten().map(|(f, _)| f) {
        if field != "data" {
            report.not_converted(&walk::join(at, field), "not a field the converter knows");
        }
    }
    match data {
        Some(Value::String(_)) => Some(json!({ "data": data })),
        _ => {
            report.not_converted(&walk::join(at, "data"), "expected a string");
            None
        }
    }
}

/// Whether `artifact` (converted) is a raw one.
pub fn is_raw(artifact: &Map<String, Value>) -> bool {
    artifact.contains_key("raw")
}

/// `{{tasks.X...}}` written as ours, `{{steps.X...}}`.
pub fn tasks_as_steps(text: &str) -> String {
    text.replace("{{tasks.", "{{steps.")
}

/// A template's `outputs`.
pub fn outputs(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Outputs,
        value,
        at,
        report,
        |field, value, path, out, report| {
            let converted = match field {
                "parameters" => parameters(value, path, Parameters::Outputs, report),
                _ => Value::Array(
                    (artifacts(value, path, report).into_iter())
                        .filter(|artifact| {
                            let raw = is_raw(artifact);
                            if raw {
                                report.not_converted(path, "an output artifact with raw: raw is an input artifact's content (an output is read from its path)");
                            }
                            !raw
                        })
                        .map(Value::Object)
                        .collect(),
                ),
            };
            out.insert(field.into(), converted);
        },
    ))
}

/// A `retryStrategy`, with Argo's default `retryPolicy: OnFailure` written out; `None` when it
/// cannot be kept (no `limit`: Argo retries without end).
pub fn retry(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let mut out = walk::fields(
        Place::Retry,
        value,
        at,
        report,
        |field, value, path, out, report| match field {
            "limit" => {
                out.insert(field.into(), int_or_string(value));
            }
            "retryPolicy" if value == "OnTransientError" => {
                report.not_converted(path, "retryPolicy OnTransientError is not supported yet")
            }
            "retryPolicy" => {
                out.insert(field.into(), value.clone());
            }
            "backoff" => {
                out.insert(field.into(), Value::Object(backoff(value, path, report)));
            }
            _ => match value.as_str().map(super::when::retry_expression) {
                Some(Ok(cel)) => {
                    out.insert(field.into(), cel.into());
                }
                Some(Err(why)) => report.not_converted(path, why),
                None => report.not_converted(path, "expected a string"),
            },
        },
    );
    if !out.contains_key("limit") {
        report.not_converted(
            &walk::join(at, "limit"),
            "a retryStrategy without limit retries without end in Argo, which is not supported: give a limit",
        );
        return None;
    }
    out.entry("retryPolicy")
        .or_insert_with(|| "OnFailure".into());
    Some(Value::Object(out))
}

fn backoff(value: &Value, at: &str, report: &mut Report) -> Map<String, Value> {
    walk::fields(
        Place::Backoff,
        value,
        at,
        report,
        |field, value, _, out, _| {
            let converted = match (field, value) {
                ("duration", Value::Number(n)) => Value::String(n.to_string()),
                ("factor", Value::String(text)) => text
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                    .unwrap_or_else(|| value.clone()),
                _ => value.clone(),
            };
            out.insert(field.into(), converted);
        },
    )
}

/// A `withSequence`, its numbers as numbers.
pub fn sequence(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Sequence,
        value,
        at,
        report,
        |field, value, _, out, _| {
            out.insert(field.into(), int_or_string(value));
        },
    ))
}

/// `continueOn`: either of Argo's as ours, `failed: true` (any failure of the step).
pub fn continue_on(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let mut tolerated = false;
    walk::fields(Place::ContinueOn, value, at, report, |_, value, _, _, _| {
        tolerated |= value.as_bool().unwrap_or(false)
    });
    tolerated.then(|| json!({"failed": true}))
}

/// `synchronization`: mutexes by name; semaphores named after their ConfigMap key, their
/// limits read from it (`limitFrom`).
pub fn synchronization(value: &Value, at: &str, report: &mut Report) -> Value {
    let mut mutexes = Vec::new();
    let mut semaphores = Vec::new();
    walk::fields(
        Place::Synchronization,
        value,
        at,
        report,
        |field, value, path, _, report| match field {
            "mutexes" => {
                for (path, mutex) in walk::items(value, path, report) {
                    mutexes.extend(mutex_name(mutex, &path, report));
                }
            }
            "mutex" => mutexes.extend(mutex_name(value, path, report)),
            "semaphores" => {
                for (path, semaphore) in walk::items(value, path, report) {
                    semaphores.extend(semaphore_from(semaphore, &path, report));
                }
            }
            _ => semaphores.extend(semaphore_from(value, path, report)),
        },
    );
    let mut out = Map::new();
    for (key, list) in [("mutexes", mutexes), ("semaphores", semaphores)] {
        if !list.is_empty() {
            out.insert(key.into(), Value::Array(list));
        }
    }
    Value::Object(out)
}

/// Argo's semaphore, its limit a ConfigMap key's: ours named `CONFIGMAP/KEY`, so the
/// workflows naming one key share it as in Argo, its limit read from that key.
fn semaphore_from(semaphore: &Value, at: &str, report: &mut Report) -> Option<Value> {
    // Argo's database semaphore: `database: {key}`, its limit in a table.
    if semaphore.get("database").is_some() {
        report.not_converted(at, "semaphores of a database are not supported");
        return None;
    }
    if let Some(namespace) = semaphore.get("namespace") {
        let why = format!(
            "a semaphore of another namespace ({namespace}) is not supported: its ConfigMap is read in the workflow's"
        );
        report.not_converted(&walk::join(at, "namespace"), why);
        return None;
    }
    let key = semaphore.get("configMapKeyRef");
    let (Some(name), Some(key_name)) = (
        key.and_then(|k| k.get("name")?.as_str()),
        key.and_then(|k| k.get("key")?.as_str()),
    ) else {
        report.not_converted(
            at,
            "a semaphore names its ConfigMap key (configMapKeyRef: name, key)",
        );
        return None;
    };
    Some(json!({
        "name": format!("{name}/{key_name}"),
        "limitFrom": {"configMapKeyRef": {"name": name, "key": key_name}},
    }))
}

fn mutex_name(mutex: &Value, at: &str, report: &mut Report) -> Option<Value> {
    if mutex.get("database").and_then(Value::as_bool) == Some(true) {
        report.not_converted(at, "mutexes of a database are not supported");
        return None;
    }
    let name = mutex.get("name")?.clone();
    Some(json!({"name": name}))
}

/// A template's `memoize` as our `cache`; its `cache.configMap` left out, saying where the
/// entries are kept instead.
pub fn memoize(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Memoize,
        value,
        at,
        report,
        |_, cache, path, _, report| {
            let named = cache.pointer("/configMap/name").and_then(Value::as_str);
            let instead = match named {
                Some(name) => format!("not in the ConfigMap {name}"),
                None => "not in one ConfigMap".to_string(),
            };
            report.noted(
                path,
                format!("each entry is kept in a ConfigMap of its own (`wf-cache-<hash of the key>`), {instead}: `workflow-operator cache list` shows them"),
            );
        },
    ))
}

/// `ttlStrategy` as `ttlSecondsAfterFinished`, when one TTL covers either outcome.
pub fn ttl(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let mut given = Map::new();
    walk::fields(Place::Ttl, value, at, report, |field, value, _, _, _| {
        given.insert(field.into(), int_or_string(value));
    });
    let get = |k: &str| given.get(k).cloned();
    match (
        get("secondsAfterCompletion"),
        get("secondsAfterSuccess"),
        get("secondsAfterFailure"),
    ) {
        (Some(ttl), None, None) => Some(ttl),
        (None, Some(ttl), None) | (None, None, Some(ttl)) => Some(ttl),
        (None, Some(success), Some(failure)) if success == failure => Some(success),
        (completion, _, _) => {
            report.not_converted(
                at,
                "different TTLs for success and failure are not supported yet",
            );
            completion
        }
    }
}

/// `podGC.strategy` as `podCleanup`.
pub fn pod_gc(value: &Value, at: &str, report: &mut Report) -> Option<Value> {
    let mut cleanup = None;
    walk::fields(
        Place::PodGc,
        value,
        at,
        report,
        |_, strategy, path, _, report| {
            cleanup = match strategy.as_str() {
                Some("OnPodSuccess") => Some("OnSuccess"),
                Some("OnPodCompletion") => Some("OnCompletion"),
                Some("OnWorkflowSuccess") => Some("OnWorkflowSuccess"),
                Some("OnWorkflowCompletion") => Some("OnWorkflowCompletion"),
                _ => {
                    report.not_converted(
                        path,
                        format!("podGC strategy {strategy} is not one of Argo's"),
                    );
                    None
                }
            }
        },
    );
    cleanup.map(Value::from)
}
