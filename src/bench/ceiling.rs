//! The control plane's own ceiling, for context: how many write requests per second it answers
//! for a create-and-patch loop over HTTP, with no operator running. [`super::run`] measures it
//! before starting the operator.
//!
//! Each of `workers` concurrent loops creates a ConfigMap and then merge-patches it, over and
//! over, through a kube client (so the figure includes what any client pays: HTTP, JSON,
//! admission, the store's lock and the watch fan-out). ConfigMaps wake no controller, so the
//! figure is the API server alone.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;
use tokio::task::JoinSet;

/// What the loop achieved.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ceiling {
    /// Successful requests (all of them writes) per second.
    pub requests_per_second: f64,
    pub requests: u64,
    pub errors: u64,
    pub seconds: f64,
    pub workers: usize,
    /// What each loop iteration does.
    #[serde(rename = "loop")]
    pub loop_: &'static str,
}

/// Runs the loop in `namespace` (created if missing) for `duration`.
///
/// # Errors
/// When the namespace cannot be created.
pub async fn measure(
    client: Client,
    namespace: &str,
    duration: Duration,
    workers: usize,
) -> Result<Ceiling, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let object = serde_json::from_value(json!({"metadata": {"name": namespace}}))
        .expect("a valid namespace");
    match namespaces.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    let start = Instant::now();
    let deadline = start + duration;
    let mut loops = JoinSet::new();
    for worker in 0..workers.max(1) {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        loops.spawn(async move {
            let (mut ok, mut errors) = (0u64, 0u64);
            let mut count = |result: Result<ConfigMap, kube::Error>| match result {
                Ok(_) => ok += 1,
                Err(_) => errors += 1,
            };
            let mut i = 0u64;
            while Instant::now() < deadline {
                let mut map = ConfigMap::default();
                map.metadata.name = Some(format!("c{worker}-{i}"));
                map.data = Some([("v".to_string(), "0".to_string())].into());
                let created = api.create(&PostParams::default(), &map).await;
                let name = created.as_ref().map(|m| m.name_any()).ok();
                count(created);
                if let Some(name) = name {
                    let patch = Patch::Merge(json!({"data": {"v": "1"}}));
                    count(api.patch(&name, &PatchParams::default(), &patch).await);
                }
                i += 1;
            }
            (ok, errors)
        });
    }
    let (mut requests, mut errors) = (0, 0);
    while let Some(done) = loops.join_next().await {
        let (ok, failed) = done.unwrap_or((0, 1));
        requests += ok;
        errors += failed;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Ceiling {
        requests_per_second: (requests as f64 / seconds).round(),
        requests,
        errors,
        seconds: (seconds * 100.0).round() / 100.0,
        workers,
        loop_: "create a ConfigMap, then merge-patch it",
    })
}
