//! What a delivery to a `WorkFlowTrigger` makes: pure, from the trigger and the delivery's
//! headers and body, so the receiver, `workflow-operator trigger fire` and the tests decide
//! alike.
//!
//! A delivery is read into events ([`events`]: one for a webhook, one per record of the
//! trigger's bucket for a notification), each with the variables its CEL expressions see
//! (`body`, `headers` by lower-case name, `event`, and for a bucket `bucket`, `key`,
//! `record`). An event's id ([`Compiled::id_of`]) names its run
//! ([`names::trigger_run_name`]): the run's existence is the record that the delivery was
//! taken, so a repeated delivery finds its run and makes none, and nothing is remembered
//! anywhere else (a restarted receiver, or a second one, decides the same).

pub mod s3;
pub mod status;
pub mod verify;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use kube_cel::KubeCelExt;
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::WorkFlow;
use crate::crd::WorkFlowTrigger;
use crate::labels::{ANNOTATION_DELIVERY, LABEL_SCHEDULED, LABEL_TRIGGER};
use crate::names;
use crate::shards::LABEL_SHARD;

/// The largest body a receiver reads by default (1 MiB); a larger one is answered 413.
pub const MAX_BODY: usize = 1 << 20;

/// A delivery as received: headers by lower-case name (repeated ones joined by `, `) and the
/// body's bytes.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Delivery {
    /// The header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The body as CEL sees it: JSON when it parses, the `payload` field of a form-encoded
    /// GitHub delivery, else the text.
    pub fn body_value(&self) -> Value {
        if let Ok(value) = serde_json::from_slice(&self.body) {
            return value;
        }
        let text = String::from_utf8_lossy(&self.body).into_owned();
        let form = self
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let payload = text.strip_prefix("payload=").filter(|_| form);
        match payload.and_then(|p| serde_json::from_str(&s3::decode_key(p)).ok()) {
            Some(value) => value,
            None => Value::String(text),
        }
    }
}

/// One event of a delivery: the variables its expressions see, and the id it has unless the
/// trigger's `id` says otherwise.
#[derive(Debug, Clone)]
pub struct Event {
    pub vars: BTreeMap<&'static str, Value>,
    pub default_id: String,
}

/// The events of `delivery` to `trigger`: one for a webhook; for a bucket, one per record of
/// its bucket whose key has its prefix and suffix (none: the delivery starts nothing).
///
/// # Errors
/// A bucket notification that is not one (no `Records`).
pub fn events(trigger: &WorkFlowTrigger, delivery: &Delivery) -> Result<Vec<Event>, String> {
    let body = delivery.body_value();
    let headers = json!(delivery.headers);
    let Some(bucket) = &trigger.spec.bucket else {
        let event = ["x-github-event", "x-gitlab-event", "x-event"]
            .iter()
            .find_map(|h| delivery.header(h))
            .unwrap_or_default();
        let vars = BTreeMap::from([
            ("body", body),
            ("headers", headers),
            ("event", json!(event)),
        ]);
        return Ok(vec![Event {
            vars,
            default_id: webhook_id(delivery),
        }]);
    };
    let records = s3::records(&body)?;
    let wanted = |r: &s3::Record| {
        r.bucket == bucket.name
            && bucket.prefix.as_ref().is_none_or(|p| r.key.starts_with(p))
            && bucket.suffix.as_ref().is_none_or(|s| r.key.ends_with(s))
    };
    Ok(records
        .into_iter()
        .filter(wanted)
        .map(|record| Event {
            default_id: format!("{}/{}@{}", record.bucket, record.key, record.sequencer),
            vars: BTreeMap::from([
                ("body", body.clone()),
                ("headers", headers.clone()),
                ("event", json!(record.event)),
                ("bucket", json!(record.bucket)),
                ("key", json!(record.key)),
                ("record", record.raw),
            ]),
        })
        .collect())
}

/// A webhook delivery's id: the sender's (GitHub's, GitLab's, `X-Delivery-Id`), else the
/// body's SHA-256 (the same body twice is the same delivery).
fn webhook_id(delivery: &Delivery) -> String {
    let headers = ["x-github-delivery", "x-gitlab-event-uuid", "x-delivery-id"];
    match headers.iter().find_map(|h| delivery.header(h)) {
        Some(id) => id.to_string(),
        None => format!("sha256:{:x}", Sha256::digest(&delivery.body)),
    }
}

/// A trigger's expressions, compiled once per version of its spec.
#[derive(Debug)]
pub struct Compiled {
    filter: Option<Program>,
    id: Option<Program>,
    parameters: Vec<(String, Program)>,
}

/// What an event makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A run: the WorkFlow to create.
    Run(Box<WorkFlow>),
    /// No run: why (the filter was false, or failed).
    Filtered(String),
}

impl Compiled {
    /// Compiles `trigger`'s filter, id and parameters.
    ///
    /// # Errors
    /// Each expression that does not compile, named by its field.
    pub fn of(trigger: &WorkFlowTrigger) -> Result<Compiled, Vec<String>> {
        let mut problems = Vec::new();
        let mut compile = |field: String, text: &str| match Program::compile(text) {
            Ok(program) => Some(program),
            Err(e) => {
                problems.push(format!("{field}: does not compile: {}", one_line(&e)));
                None
            }
        };
        let spec = &trigger.spec;
        let filter = spec
            .filter
            .as_ref()
            .and_then(|f| compile("spec.filter".into(), f));
        let id = spec.id.as_ref().and_then(|f| compile("spec.id".into(), f));
        let parameters = (spec.parameters.iter().enumerate())
            .filter_map(|(i, p)| {
                let field = format!("spec.parameters[{i}] ({})", p.name);
                Some((p.name.clone(), compile(field, &p.value)?))
            })
            .collect();
        match problems.is_empty() {
            true => Ok(Compiled {
                filter,
                id,
                parameters,
            }),
            false => Err(problems),
        }
    }

    /// The id of `event`: the trigger's `id` expression, else the sender's.
    ///
    /// # Errors
    /// The expression failing, or giving an empty id.
    pub fn id_of(&self, event: &Event) -> Result<String, String> {
        let Some(program) = &self.id else {
            return Ok(event.default_id.clone());
        };
        let id = evaluate(program, event).map_err(|e| format!("spec.id {e}"))?;
        let id = text_of(&id);
        match id.is_empty() {
            true => Err("spec.id is empty".into()),
            false => Ok(id),
        }
    }

    /// What `event` (with id `id`, taken at `now`, unix seconds) makes of `trigger`.
    ///
    /// # Errors
    /// A parameter that fails, or a run spec that is not a WorkFlow's: the sender cannot fix
    /// either by sending again.
    pub fn decide(
        &self,
        trigger: &WorkFlowTrigger,
        event: &Event,
        id: &str,
        now: i64,
    ) -> Result<Decision, String> {
        if let Some(filter) = &self.filter {
            match evaluate(filter, event) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return Ok(Decision::Filtered("filter is false".into())),
                Ok(other) => {
                    let why = format!("filter is {}, not a bool", text_of(&other));
                    return Ok(Decision::Filtered(why));
                }
                Err(e) => return Ok(Decision::Filtered(format!("filter {e}"))),
            }
        }
        let mut values = Vec::new();
        for (name, program) in &self.parameters {
            let value = evaluate(program, event).map_err(|e| format!("parameter {name} {e}"))?;
            values.push((name.clone(), text_of(&value)));
        }
        run_of(trigger, id, &values, now).map(|run| Decision::Run(Box::new(run)))
    }
}

/// Runs `program` over `event`'s variables.
fn evaluate(program: &Program, event: &Event) -> Result<Cel, String> {
    thread_local! {
        static BASE: Context<'static> = Context::default().with_all();
    }
    BASE.with(|base| {
        let mut context = base.new_inner_scope();
        for (name, value) in &event.vars {
            let value = kube_cel::cel::to_value(value).map_err(|e| format!("fails: {e}"))?;
            context.add_variable_from_value(*name, value);
        }
        program
            .execute(&context)
            .map_err(|e| format!("fails: {}", one_line(&e)))
    })
}

/// A CEL value as a parameter's text: a string as is, anything else as JSON.
fn text_of(value: &Cel) -> String {
    match value {
        Cel::String(s) => s.to_string(),
        other => to_json(other).to_string(),
    }
}

fn to_json(value: &Cel) -> Value {
    match value {
        Cel::Null => Value::Null,
        Cel::Bool(b) => json!(b),
        Cel::Int(i) => json!(i),
        Cel::UInt(u) => json!(u),
        Cel::Float(f) => json!(f),
        Cel::String(s) => json!(s.as_str()),
        Cel::List(items) => Value::Array(items.iter().map(to_json).collect()),
        Cel::Map(map) => Value::Object(
            map.map
                .iter()
                .map(|(k, v)| (key_text(k), to_json(v)))
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    }
}

fn key_text(key: &kube_cel::cel::objects::Key) -> String {
    use kube_cel::cel::objects::Key;
    match key {
        Key::String(s) => s.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
    }
}

fn one_line(error: &impl std::fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The run of `trigger` for delivery `id` with parameters `values`, taken at `now` (unix
/// seconds): named for the id, labelled with the trigger and the time, annotated with the id,
/// owned by the trigger, its spec the trigger's with the parameters set by name.
///
/// # Errors
/// Neither or both of `spec.workflowSpec` and `spec.workflowTemplateRef`, or a spec that is
/// not a WorkFlow's.
pub fn run_of(
    trigger: &WorkFlowTrigger,
    id: &str,
    values: &[(String, String)],
    now: i64,
) -> Result<WorkFlow, String> {
    let mut spec = run_spec(trigger)?;
    set_parameters(&mut spec, values);
    let spec = serde_json::from_value(spec)
        .map_err(|e| format!("the run's spec is not a WorkFlow spec: {e}"))?;
    let name = trigger.name_any();
    let extra = trigger.spec.workflow_metadata.clone().unwrap_or_default();
    let mut labels = extra.labels;
    labels.insert(LABEL_TRIGGER.into(), names::label_value(&name));
    labels.insert(LABEL_SCHEDULED.into(), now.to_string());
    // A trigger's runs live in its shard, so the replica holding it follows them (`shards`).
    if let Some(shard) = trigger.labels().get(LABEL_SHARD) {
        labels.insert(LABEL_SHARD.into(), shard.clone());
    }
    let mut annotations = extra.annotations;
    annotations.insert(ANNOTATION_DELIVERY.into(), id.to_string());
    Ok(WorkFlow {
        metadata: ObjectMeta {
            name: Some(names::trigger_run_name(&name, id)),
            namespace: trigger.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_of(trigger)]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    })
}

/// The spec of every run of `trigger` before its parameters: its `workflowSpec`, or its
/// `workflowTemplateRef` taken whole.
///
/// # Errors
/// Neither or both given.
pub fn run_spec(trigger: &WorkFlowTrigger) -> Result<Value, String> {
    let spec = &trigger.spec;
    match (&spec.workflow_spec, &spec.workflow_template_ref) {
        (Some(spec), None) => Ok(spec.clone()),
        (None, Some(reference)) => Ok(json!({"workflowTemplateRef": reference})),
        _ => Err("give one of spec.workflowSpec and spec.workflowTemplateRef".into()),
    }
}

/// Sets each of `values` in `spec.arguments.parameters` (of a run's spec as JSON) by name,
/// adding those not declared.
pub fn set_parameters(spec: &mut Value, values: &[(String, String)]) {
    if values.is_empty() {
        return;
    }
    let Some(object) = spec.as_object_mut() else {
        return;
    };
    let arguments = object.entry("arguments").or_insert_with(|| json!({}));
    if !arguments.is_object() {
        *arguments = json!({});
    }
    let list = arguments
        .as_object_mut()
        .expect("an object")
        .entry("parameters")
        .or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("an array");
    for (name, value) in values {
        match list.iter_mut().find(|p| p["name"] == name.as_str()) {
            Some(parameter) => parameter["value"] = json!(value),
            None => list.push(json!({"name": name, "value": value})),
        }
    }
}

/// What is wrong with `trigger` such that no delivery can start a run: its expressions, its
/// run spec, its sources. Empty when it is ready.
pub fn problems(trigger: &WorkFlowTrigger) -> Vec<String> {
    let mut problems = match Compiled::of(trigger) {
        Ok(_) => Vec::new(),
        Err(problems) => problems,
    };
    let spec = &trigger.spec;
    match (&spec.webhook, &spec.bucket) {
        (None, None) => problems.push("give one of spec.webhook and spec.bucket".into()),
        (Some(_), Some(_)) => {
            problems.push("give one of spec.webhook and spec.bucket, not both".into())
        }
        (Some(webhook), None) => {
            let given = [
                webhook.github.is_some(),
                webhook.gitlab.is_some(),
                webhook.hmac.is_some(),
            ];
            if given.iter().filter(|g| **g).count() > 1 {
                problems.push("spec.webhook: give at most one of github, gitlab and hmac".into());
            }
        }
        (None, Some(_)) => {}
    }
    if let Err(problem) = run_of(trigger, "check", &[], 0) {
        problems.push(problem);
    }
    problems
}

/// `webhook/github`, `webhook/gitlab`, `webhook/hmac`, `webhook` or `bucket/<name>`: the
/// status's `source`.
pub fn source_of(trigger: &WorkFlowTrigger) -> String {
    if let Some(bucket) = &trigger.spec.bucket {
        return format!("bucket/{}", bucket.name);
    }
    match verify::Verification::of(trigger) {
        verify::Verification::GitHub(_) => "webhook/github".into(),
        verify::Verification::GitLab(_) => "webhook/gitlab".into(),
        verify::Verification::Hmac { .. } => "webhook/hmac".into(),
        verify::Verification::None => "webhook".into(),
    }
}

/// The owner reference of every run: `trigger`, as the controller of the run.
fn owner_of(trigger: &WorkFlowTrigger) -> OwnerReference {
    OwnerReference {
        api_version: WorkFlowTrigger::api_version(&()).into_owned(),
        kind: WorkFlowTrigger::kind(&()).into_owned(),
        name: trigger.name_any(),
        uid: trigger.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
mod tests;
