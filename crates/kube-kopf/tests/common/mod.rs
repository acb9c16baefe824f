//! Shared fixtures of the `kopf_*` integration tests: a control plane with a small test CRD
//! (`Widget`, group `kopf.test`), an operator runner, a probe that records handler calls, and
//! waits on conditions with deadlines.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use kube_devcluster::{DevCluster, DevClusterOptions};
use kube_kopf::{Change, Context, Operator, OperatorConfig, Reason};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A test resource: a size, a list of items (to make it large) and a status.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kopf.test",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    /// Any number.
    pub size: i64,
    /// Filler.
    #[serde(default)]
    pub items: Vec<String>,
}

/// The test resource's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct WidgetStatus {
    /// Anything.
    pub phase: Option<String>,
}

pub const NS: &str = "default";
pub const NAME: &str = "kopf.test";
pub const ANNOTATION: &str = "kopf.test/last-handled";
pub const FINALIZER: &str = "kopf.test/finalizer";

/// A started control plane with the Widget CRD installed.
pub async fn cluster() -> (DevCluster, Client) {
    let cluster = DevCluster::start(DevClusterOptions::default())
        .await
        .expect("control plane starts");
    let client = cluster.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &Widget::crd())
        .await
        .expect("the Widget CRD installs");
    (cluster, client)
}

pub fn widgets(client: &Client) -> Api<Widget> {
    Api::namespaced(client.clone(), NS)
}

pub fn widget(name: &str, size: i64) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            items: Vec::new(),
        },
    )
}

/// Creates ConfigMap `name` owned by the Widget `owner` (a child, to child handlers).
pub async fn create_child(client: &Client, name: &str, owner: &Widget) {
    let mut child = ConfigMap::default();
    child.metadata.name = Some(name.into());
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Widget::api_version(&()).into(),
        kind: Widget::kind(&()).into(),
        name: owner.name_any(),
        uid: owner.uid().expect("the owner is stored"),
        ..Default::default()
    }]);
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &child)
        .await
        .expect("create the child");
}

/// The operator config the tests use: fast backoff, a short resync.
pub fn config() -> OperatorConfig {
    let mut config = OperatorConfig {
        name: NAME.into(),
        ..OperatorConfig::default()
    };
    config.namespace = Some(NS.into());
    config.resync = Some(Duration::from_millis(500));
    config.defaults.backoff.initial = Duration::from_millis(50);
    config.defaults.backoff.max = Duration::from_secs(2);
    config
}

/// A running operator, stopped gracefully by [`Running::stop`] or aborted by [`Running::abort`].
pub struct Running {
    token: CancellationToken,
    handle: JoinHandle<Result<(), kube_kopf::Error>>,
}

pub fn start(operator: Operator) -> Running {
    let token = CancellationToken::new();
    let handle = tokio::spawn(operator.run(token.clone().cancelled_owned()));
    Running { token, handle }
}

impl Running {
    /// Asks for a graceful shutdown without waiting for it.
    pub fn request_stop(&self) {
        self.token.cancel();
    }

    /// Graceful shutdown; panics if the operator failed.
    pub async fn stop(self) {
        self.token.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.handle)
            .await
            .expect("the operator stops within 30s")
            .expect("the operator task does not panic")
            .expect("the operator ran without error");
    }

    /// Drops the operator mid-flight, as a crash would.
    pub async fn abort(self) {
        self.handle.abort();
        let _ = self.handle.await;
    }
}

/// One recorded handler call.
#[derive(Clone, Debug)]
pub struct Call {
    pub handler: String,
    pub object: String,
    pub reason: Reason,
    pub at: Instant,
    pub diff: Vec<Change>,
    pub retry: u32,
}

/// Records handler calls and watches for overlapping calls on one object.
#[derive(Default)]
pub struct Probe {
    calls: Mutex<Vec<Call>>,
    active: Mutex<HashMap<String, usize>>,
    in_flight: Mutex<(usize, usize)>,
    overlaps: Mutex<Vec<String>>,
    changed: Notify,
}

impl Probe {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Marks a handler as entered; returns a guard that marks it as left when dropped.
    pub fn enter<K: kube::ResourceExt>(self: &Arc<Self>, ctx: &Context<K>) -> Guard {
        let object = ctx.object.name_any();
        {
            let mut active = self.active.lock().unwrap();
            let count = active.entry(object.clone()).or_default();
            *count += 1;
            if *count > 1 {
                self.overlaps
                    .lock()
                    .unwrap()
                    .push(format!("{object}: {}", ctx.handler));
            }
            let mut in_flight = self.in_flight.lock().unwrap();
            in_flight.0 += 1;
            in_flight.1 = in_flight.1.max(in_flight.0);
        }
        self.calls.lock().unwrap().push(Call {
            handler: ctx.handler.to_string(),
            object: object.clone(),
            reason: ctx.reason,
            at: Instant::now(),
            diff: ctx.diff.to_vec(),
            retry: ctx.retry,
        });
        self.changed.notify_waiters();
        Guard {
            probe: self.clone(),
            object,
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    pub fn count(&self, handler: &str, object: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.handler == handler && c.object == object)
            .count()
    }

    pub fn count_handler(&self, handler: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.handler == handler)
            .count()
    }

    /// Calls of `handler`, per object.
    pub fn per_object(&self, handler: &str) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for call in self
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.handler == handler)
        {
            *counts.entry(call.object.clone()).or_default() += 1;
        }
        counts
    }

    pub fn overlaps(&self) -> Vec<String> {
        self.overlaps.lock().unwrap().clone()
    }

    pub fn max_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }

    /// Waits until `condition` holds of the probe, re-checking at every call.
    pub async fn wait(&self, what: &str, deadline: Duration, condition: impl Fn(&Self) -> bool) {
        let end = Instant::now() + deadline;
        loop {
            let notified = self.changed.notified();
            if condition(self) {
                return;
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                assert!(
                    condition(self),
                    "timed out after {deadline:?} waiting for {what}"
                );
                return;
            }
        }
    }
}

pub struct Guard {
    probe: Arc<Probe>,
    object: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(count) = self.probe.active.lock().unwrap().get_mut(&self.object) {
            *count -= 1;
        }
        self.probe.in_flight.lock().unwrap().0 -= 1;
        self.probe.changed.notify_waiters();
    }
}

pub use kube_devcluster::testing::eventually;

/// The progress record of a widget as stored on it, if any.
pub async fn record(api: &Api<Widget>, name: &str) -> Option<serde_json::Value> {
    let widget = api.get_opt(name).await.expect("get")?;
    let text = widget.metadata.annotations?.get(ANNOTATION)?.clone();
    Some(serde_json::from_str(&text).expect("the record is JSON"))
}

/// Waits until the widget's record says its create handlers all finished.
pub async fn wait_created(api: &Api<Widget>, name: &str) -> serde_json::Value {
    eventually(
        &format!("{name} to be recorded as created"),
        Duration::from_secs(20),
        || async {
            record(api, name)
                .await
                .filter(|r| r["created"] == true && r.get("handlers").is_none())
        },
    )
    .await
}
