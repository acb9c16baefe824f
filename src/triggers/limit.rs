//! `spec.rateLimit`: a token bucket per trigger in each receiver, filled at `perSecond` up to
//! `burst`; a delivery that finds it empty is answered 429 with how long to wait.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use workflow_operator_core::crd::WorkFlowTrigger;

/// The buckets, by trigger uid.
#[derive(Default)]
pub struct Limits {
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Limits {
    /// Takes a token for a delivery to `trigger`: `None` when it may go on, else how long
    /// until a token is there.
    pub fn take(&self, trigger: &WorkFlowTrigger) -> Option<Duration> {
        let limit = trigger.spec.rate_limit.as_ref()?;
        let rate = f64::from(limit.per_second.max(1));
        let burst = f64::from(limit.burst.unwrap_or(limit.per_second).max(1));
        let now = Instant::now();
        let mut buckets = self.buckets.lock().expect("rate buckets");
        let bucket = buckets
            .entry(trigger.uid().unwrap_or_default())
            .or_insert(Bucket {
                tokens: burst,
                at: now,
            });
        let elapsed = now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}
