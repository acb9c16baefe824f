//! `dev`'s bucket notifications: each object written into the embedded artifact store is sent,
//! as the S3 event notification S3 and MinIO send to a webhook target, to every WorkFlowTrigger
//! whose `spec.bucket` names its bucket, through the receiver's own URL (so it is verified,
//! filtered and answered as any sender's). Like a store's webhook target, it retries what the
//! receiver answers 429 or 503 (and a connection refused) for a while, then gives up, logging.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc::UnboundedReceiver;
use workflow_operator_core::crd::WorkFlowTrigger;
use workflow_operator_core::trigger::{s3, verify};

use crate::artifacts::embedded::Put;

/// How many times a notification is sent before it is given up.
const TRIES: u32 = 10;

/// Sends a notification of each of `puts` to the triggers of its bucket, at the receiver
/// `base` (`http://ADDR`), until `puts` ends.
pub async fn notify(client: Client, base: String, mut puts: UnboundedReceiver<Put>) {
    // reqwest is built without a TLS provider of its own: ring, as the artifact clients use.
    crate::artifacts::oci::install_crypto();
    let http = reqwest::Client::new();
    // S3's sequencer orders the events of a key: a growing hex number, here the time in
    // nanoseconds when the store started, counted up per object.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let sequencer = AtomicU64::new(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX / 2));
    while let Some(put) = puts.recv().await {
        let sequence = format!("{:016X}", sequencer.fetch_add(1, Ordering::Relaxed));
        let triggers = match Api::<WorkFlowTrigger>::all(client.clone())
            .list(&Default::default())
            .await
        {
            Ok(list) => list.items,
            Err(error) => {
                tracing::warn!(%error, key = %put.key, "listing the triggers of a bucket");
                continue;
            }
        };
        let body = s3::notification(&put.bucket, &put.key, put.size, &put.etag, &sequence);
        let body = serde_json::to_vec(&body).expect("JSON");
        let named = triggers
            .iter()
            .filter(|t| t.spec.bucket.as_ref().is_some_and(|b| b.name == put.bucket));
        for trigger in named {
            send(&client, &http, &base, trigger, &body).await;
        }
    }
}

/// Sends `body` to `trigger`, signed when its bucket asks for it; retries 429, 503 and
/// connection errors, with a growing pause.
async fn send(
    client: &Client,
    http: &reqwest::Client,
    base: &str,
    trigger: &WorkFlowTrigger,
    body: &[u8],
) {
    let namespace = trigger.namespace().unwrap_or_default();
    let url = format!("{base}/triggers/{namespace}/{}", trigger.name_any());
    let signature = match signature(client, trigger, body).await {
        Ok(signature) => signature,
        Err(error) => {
            tracing::warn!(%error, %url, "cannot sign a bucket notification");
            return;
        }
    };
    let mut pause = Duration::from_millis(100);
    for _ in 0..TRIES {
        let mut request = http
            .post(&url)
            .body(body.to_vec())
            .header("content-type", "application/json");
        if let Some((header, value)) = &signature {
            request = request.header(header.as_str(), value.as_str());
        }
        match request.send().await {
            Ok(answer) if !matches!(answer.status().as_u16(), 429 | 503) => {
                tracing::debug!(%url, status = %answer.status(), "bucket notification sent");
                return;
            }
            Ok(_) | Err(_) => {}
        }
        // A sender's back-off between tries, as a store's webhook target waits.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    tracing::warn!(%url, "a bucket notification was not taken after {TRIES} tries");
}

/// The header and value signing `body` for `trigger`'s bucket, when it names an `hmac`.
async fn signature(
    client: &Client,
    trigger: &WorkFlowTrigger,
    body: &[u8],
) -> Result<Option<(String, String)>, String> {
    let Some(hmac) = trigger.spec.bucket.as_ref().and_then(|b| b.hmac.as_ref()) else {
        return Ok(None);
    };
    let namespace = trigger.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets
        .get(&hmac.secret_ref.name)
        .await
        .map_err(|e| e.to_string())?;
    let mut key = secret
        .data
        .and_then(|d| d.get(&hmac.secret_ref.key).map(|v| v.0.clone()))
        .ok_or(format!(
            "Secret {} has no key {}",
            hmac.secret_ref.name, hmac.secret_ref.key
        ))?;
    while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        key.pop();
    }
    Ok(Some((hmac.header.clone(), verify::sign(&key, body))))
}
