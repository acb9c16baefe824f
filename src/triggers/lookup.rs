//! What the receiver reads for a delivery: the trigger (from a watch, read from the API when
//! the watch does not hold it yet, so a trigger just created is found), its expressions
//! compiled once per generation, and the Secret that verifies it (kept a short while; read
//! again at once when a delivery fails with the kept value, so a rotated Secret is seen).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::trigger::Compiled;
use workflow_operator_core::trigger::verify::Verification;

use super::start::Answer;

/// How long a Secret read is used for before it is read again.
const SECRET_TTL: Duration = Duration::from_secs(10);

/// The Secrets' keys read, by namespace, Secret and key: when, and the value.
type Secrets = HashMap<(String, String, String), (Instant, Vec<u8>)>;

/// Whether a trigger exists.
pub enum Found {
    Yes(Arc<WorkFlowTrigger>),
    No,
    /// The API server did not answer: the sender should retry.
    Unreachable(String),
}

/// The triggers, their compiled expressions and Secrets.
pub struct Lookup {
    client: Client,
    namespace: Option<String>,
    store: Store<WorkFlowTrigger>,
    compiled: Mutex<HashMap<(String, i64), Arc<Compiled>>>,
    secrets: Mutex<Secrets>,
}

impl Lookup {
    /// Starts the watch of the triggers (of `namespace`, or all), until `shutdown`.
    pub fn start(client: Client, namespace: Option<String>, shutdown: &CancellationToken) -> Self {
        let api: Api<WorkFlowTrigger> = match &namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .applied_objects()
            .for_each(|_| std::future::ready(()));
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stream => {}
                () = shutdown.cancelled() => {}
            }
        });
        Lookup {
            client,
            namespace,
            store,
            compiled: Mutex::default(),
            secrets: Mutex::default(),
        }
    }

    /// The API client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The trigger `namespace/name`: from the watch, else from the API.
    pub async fn trigger(&self, namespace: &str, name: &str) -> Found {
        if self.namespace.as_deref().is_some_and(|ns| ns != namespace) {
            return Found::No;
        }
        if let Some(trigger) = self.store.get(&ObjectRef::new(name).within(namespace)) {
            return Found::Yes(trigger);
        }
        let api: Api<WorkFlowTrigger> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(trigger)) => Found::Yes(Arc::new(trigger)),
            Ok(None) => Found::No,
            Err(error) => Found::Unreachable(format!("reading the trigger: {error}")),
        }
    }

    /// `trigger`'s expressions, compiled once per generation.
    ///
    /// # Errors
    /// Those that do not compile.
    pub fn compiled(&self, trigger: &WorkFlowTrigger) -> Result<Arc<Compiled>, Vec<String>> {
        let key = (
            trigger.uid().unwrap_or_default(),
            trigger.metadata.generation.unwrap_or_default(),
        );
        if let Some(compiled) = self.compiled.lock().expect("compiled").get(&key) {
            return Ok(compiled.clone());
        }
        let compiled = Arc::new(Compiled::of(trigger)?);
        let mut cache = self.compiled.lock().expect("compiled");
        // Generations of a trigger not current any more are dropped with it.
        cache.retain(|(uid, _), _| *uid != key.0);
        cache.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// The secret `verification` needs, from the trigger's namespace (empty when it needs
    /// none); `fresh` reads it from the API whatever is kept.
    ///
    /// # Errors
    /// 503 when the API server does not answer, 500 when the Secret or its key is missing
    /// (the trigger's owner must fix it; a sender's retry may then succeed).
    pub async fn secret(
        &self,
        trigger: &WorkFlowTrigger,
        verification: &Verification,
        fresh: bool,
    ) -> Result<Vec<u8>, Answer> {
        let Some(reference) = verification.secret() else {
            return Ok(Vec::new());
        };
        let namespace = trigger.namespace().unwrap_or_default();
        let key = (
            namespace.clone(),
            reference.name.clone(),
            reference.key.clone(),
        );
        if !fresh {
            let kept = self.secrets.lock().expect("secrets").get(&key).cloned();
            if let Some((_, value)) = kept.filter(|(read, _)| read.elapsed() < SECRET_TTL) {
                return Ok(trim_newline(value));
            }
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let secret = match api.get_opt(&reference.name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => {
                let why = format!("Secret {namespace}/{} not found", reference.name);
                return Err(Answer::misconfigured(why));
            }
            Err(error) => return Err(Answer::unavailable(format!("reading the Secret: {error}"))),
        };
        let value = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&reference.key))
            .map(|v| v.0.clone());
        let Some(value) = value else {
            let why = format!(
                "Secret {namespace}/{} has no key {}",
                reference.name, reference.key
            );
            return Err(Answer::misconfigured(why));
        };
        let stored = (Instant::now(), value.clone());
        self.secrets.lock().expect("secrets").insert(key, stored);
        Ok(trim_newline(value))
    }
}

/// A secret written with `echo` ends in a newline the sender's copy does not have.
fn trim_newline(mut value: Vec<u8>) -> Vec<u8> {
    while value.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        value.pop();
    }
    value
}
