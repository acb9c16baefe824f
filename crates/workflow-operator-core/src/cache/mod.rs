//! Cached steps (`cache`): a step's key, its entry (a ConfigMap per entry, in the workflow's
//! namespace, named by the key's hash, so found in one GET and never larger than one step's
//! outputs), whether an entry is fresh, and how a hit reads in the status. Pure: the
//! operator's `cache` stage does the I/O.
//!
//! The automatic key is a SHA-256 over what the step computes, as `fields` decides it for each
//! step field ([`fields::Keyed`]): its image, command, args, working directory, env (names with
//! values, or the Secret or ConfigMap key a value comes from, not the value itself) and volume
//! mounts with everything filled in, the values of the outputs it names, its item, and, as
//! written when set, its script's source, its inputs and outputs, its kind's own fields (an
//! HTTP request, a resource action, ...), its init containers and sidecars. Not in it: the
//! step's or workflow's name (two workflows running the same step share its entry), its
//! timeout, retries, resources, `when` and dependencies, and the contents of Secrets,
//! ConfigMaps and volumes. `cache.key`, filled in the same way, replaces all of it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::crd::{Step, StepPhase, StepStatus};
use crate::fields::{self, Field, Keyed};
use crate::outputs::{self, Inputs, Outputs};

/// Label of a cache entry: the hash of its key (its name holds it too).
pub const LABEL_CACHE: &str = "workflow.crd.com/cache";
/// Data of a cache entry: the step's outputs, as JSON.
pub const DATA_OUTPUTS: &str = "outputs";
/// Data of a cache entry: the workflow (`ns/name`) and step whose run wrote it.
pub const DATA_FROM: &str = "from";
/// Data of a cache entry: when the run that wrote it finished (RFC 3339).
pub const DATA_CREATED: &str = "created";
/// The `status.steps` reason of a step whose result came from the cache.
pub const REASON_CACHED: &str = "Cached";

/// A step's key, and the name of its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The SHA-256 of the key, hex.
    pub hash: String,
}

impl Key {
    /// The ConfigMap holding the entry: `wf-cache-` and 40 hex digits of the hash.
    pub fn entry_name(&self) -> String {
        format!("wf-cache-{}", &self.hash[..40])
    }

    /// The value of [`LABEL_CACHE`] on the entry (63 characters at most).
    pub fn label(&self) -> String {
        self.hash[..40].to_string()
    }
}

#[derive(Serialize)]
struct Content<'a> {
    image: String,
    command: Option<Vec<String>>,
    args: Option<Vec<String>>,
    working_dir: &'a Option<String>,
    env: Vec<(String, String)>,
    volume_mounts: Vec<(&'a str, &'a str)>,
    inputs: BTreeMap<String, &'a str>,
    item: Option<&'a serde_json::Value>,
    /// The step's other fields that are part of what it computes ([`Keyed::WhenSet`]), those
    /// it sets, as written: left out when there are none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    computes: BTreeMap<&'static str, serde_json::Value>,
}

/// The fields of a step that are in its key as written, when set ([`Keyed::WhenSet`]).
#[derive(Default)]
struct KeyedWhenSet(BTreeMap<&'static str, serde_json::Value>);

impl fields::Visitor for KeyedWhenSet {
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, value: &T, set: bool) {
        if set && field.keyed == Keyed::WhenSet {
            let value = serde_json::to_value(value).expect("plain data serializes");
            self.0.insert(field.name, value);
        }
    }

    fn steps(&mut self, _: &Field, _: &[Step]) {}
}

/// The key of `step` run with `inputs` (the values of the outputs it names) and `item`.
pub fn key_of(step: &Step, inputs: &Inputs, item: Option<&serde_json::Value>) -> Key {
    let fill = |text: &str| {
        let value = |s: &str, k: &str| {
            inputs
                .get(&(s.to_string(), k.to_string()))
                .map(String::as_str)
        };
        outputs::substitute(text, value, item).unwrap_or_else(|_| text.to_string())
    };
    let hashed = match step.cache.as_ref().and_then(|c| c.key.as_deref()) {
        Some(key) => format!("key\0{}", fill(key)),
        None => {
            let fill_all = |texts: &Option<Vec<String>>| {
                texts.as_ref().map(|t| t.iter().map(|s| fill(s)).collect())
            };
            let content = Content {
                image: fill(&step.image),
                command: fill_all(&step.command),
                args: fill_all(&step.args),
                working_dir: &step.working_dir,
                env: step
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), env_value(e, &fill)))
                    .collect(),
                volume_mounts: (step.volume_mounts.iter())
                    .map(|m| (m.name.as_str(), m.mount_path.as_str()))
                    .collect(),
                inputs: inputs
                    .iter()
                    .map(|((s, k), v)| (format!("{s}.{k}"), v.as_str()))
                    .collect(),
                item,
                computes: {
                    let mut keyed = KeyedWhenSet::default();
                    fields::visit_step(step, &mut keyed);
                    keyed.0
                },
            };
            serde_json::to_string(&content).expect("plain data serializes")
        }
    };
    let digest = Sha256::digest(hashed.as_bytes());
    Key {
        hash: digest.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// An env var as the key sees it: its value filled in, or where it comes from.
fn env_value(var: &k8s_openapi::api::core::v1::EnvVar, fill: &dyn Fn(&str) -> String) -> String {
    match (&var.value, &var.value_from) {
        (Some(value), _) => fill(value),
        (None, Some(from)) => serde_json::to_string(from).unwrap_or_default(),
        (None, None) => String::new(),
    }
}

/// A cache entry: what a succeeded run of a step left for the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The step's outputs.
    pub outputs: Outputs,
    /// `ns/workflow step` that wrote it.
    pub from: String,
    /// When that run finished.
    pub created: Timestamp,
}

impl Entry {
    /// The entry as a ConfigMap's data.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                DATA_OUTPUTS.to_string(),
                serde_json::to_string(&self.outputs).expect("strings serialize"),
            ),
            (DATA_FROM.to_string(), self.from.clone()),
            (DATA_CREATED.to_string(), format!("{:.0}", self.created)),
        ])
    }

    /// The entry a ConfigMap's data holds, if it is one.
    pub fn from_data(data: &BTreeMap<String, String>) -> Option<Entry> {
        Some(Entry {
            outputs: serde_json::from_str(data.get(DATA_OUTPUTS)?).ok()?,
            from: data.get(DATA_FROM)?.clone(),
            created: data.get(DATA_CREATED)?.parse().ok()?,
        })
    }

    /// Whether it may be used at `now` by a step whose `maxAge` is `max_age`.
    pub fn fresh(&self, max_age: Option<SignedDuration>, now: Timestamp) -> bool {
        max_age.is_none_or(|max| now.duration_since(self.created) <= max)
    }

    /// The `status.steps` entry of step (or item) `name`, whose Job would have been `job`,
    /// done by this entry: `Succeeded`, reason `Cached`, its outputs, and where they came from.
    pub fn status(&self, name: &str, job: &str) -> StepStatus {
        StepStatus {
            name: name.to_string(),
            phase: StepPhase::Succeeded,
            started_at: None,
            finished_at: Some(Time(self.created)),
            attempts: Some(0),
            exit_code: None,
            reason: Some(REASON_CACHED.to_string()),
            message: Some(format!(
                "cached (from {} at {:.0})",
                self.from, self.created
            )),
            job: Some(job.to_string()),
            ip: None,
            outputs: self.outputs.clone(),
            items: None,
        }
    }
}

#[cfg(test)]
mod tests;
