//! Request counters: how many API requests the server answered, per verb, resource, user agent
//! and status code, so that benchmarks count an operator's API calls. Read programmatically
//! through [`DevCluster::requests`](crate::DevCluster::requests) or over HTTP at `/debug/requests` (JSON).
//!
//! The in-process controllers (job controller, kubelet, garbage collector) write to the store
//! directly and are not counted: these are the requests clients made.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::apiserver::faults::Verb;

/// One counter: requests with this verb on this resource from this user agent, answered with
/// this status code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestKey {
    pub verb: &'static str,
    /// `jobs.batch`, `pods`, `workflows.workflow.crd.com`; with `/status` for that subresource.
    pub resource: String,
    /// The product part of the User-Agent header (`kubectl/v1.34.0`, `kube-rs/...`).
    pub user_agent: String,
    pub code: u16,
}

/// The counters; shared by the server's requests.
#[derive(Debug, Default)]
pub struct RequestCounters {
    counts: Mutex<HashMap<RequestKey, u64>>,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestCounts {
    pub total: u64,
    pub requests: Vec<(RequestKey, u64)>,
}

impl RequestCounts {
    /// Requests with this verb on this resource (`jobs.batch`, `pods/status`), any agent or code.
    pub fn count(&self, verb: Verb, resource: &str) -> u64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.verb == verb.as_str() && k.resource == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests with this verb on any resource.
    pub fn by_verb(&self, verb: Verb) -> u64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.verb == verb.as_str())
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests that change objects (create, update, patch, delete, deletecollection).
    pub fn writes(&self) -> u64 {
        Verb::ALL
            .into_iter()
            .filter(|v| v.is_write())
            .map(|v| self.by_verb(v))
            .sum()
    }

    /// The JSON served at `/debug/requests`.
    pub fn to_json(&self) -> serde_json::Value {
        let by_verb: serde_json::Map<String, serde_json::Value> = Verb::ALL
            .into_iter()
            .map(|v| (v, self.by_verb(v)))
            .filter(|&(_, n)| n > 0)
            .map(|(v, n)| (v.as_str().to_string(), n.into()))
            .collect();
        let requests: Vec<serde_json::Value> = self
            .requests
            .iter()
            .map(|(k, n)| {
                let mut entry = serde_json::to_value(k).expect("keys serialize");
                entry["count"] = (*n).into();
                entry
            })
            .collect();
        serde_json::json!({
            "total": self.total,
            "writes": self.writes(),
            "byVerb": by_verb,
            "requests": requests,
        })
    }
}

impl RequestCounters {
    pub fn record(&self, verb: Verb, resource: String, user_agent: &str, code: u16) {
        let key = RequestKey {
            verb: verb.as_str(),
            resource,
            user_agent: product(user_agent).to_string(),
            code,
        };
        *self
            .counts
            .lock()
            .expect("counters lock")
            .entry(key)
            .or_default() += 1;
    }

    pub fn snapshot(&self) -> RequestCounts {
        let counts = self.counts.lock().expect("counters lock");
        let mut requests: Vec<(RequestKey, u64)> =
            counts.iter().map(|(k, n)| (k.clone(), *n)).collect();
        requests.sort();
        RequestCounts {
            total: requests.iter().map(|(_, n)| n).sum(),
            requests,
        }
    }

    pub fn reset(&self) {
        self.counts.lock().expect("counters lock").clear();
    }
}

/// `kubectl/v1.34.0 (linux/amd64) kubernetes/abc` -> `kubectl/v1.34.0`.
fn product(user_agent: &str) -> &str {
    user_agent.split_whitespace().next().unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_verb_resource_and_agent() {
        let counters = RequestCounters::default();
        counters.record(Verb::Create, "jobs.batch".into(), "op/1.0 (linux)", 201);
        counters.record(Verb::Create, "jobs.batch".into(), "op/1.0 (linux)", 201);
        counters.record(Verb::Patch, "workflows.x/status".into(), "op/1.0", 200);
        counters.record(
            Verb::List,
            "pods".into(),
            "kubectl/v1.34.0 (linux/amd64)",
            200,
        );
        let counts = counters.snapshot();
        assert_eq!(counts.total, 4);
        assert_eq!(counts.count(Verb::Create, "jobs.batch"), 2);
        assert_eq!(counts.count(Verb::Patch, "workflows.x/status"), 1);
        assert_eq!(counts.writes(), 3);
        let json = counts.to_json();
        assert_eq!(json["byVerb"]["create"], 2);
        assert!(
            json["requests"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["userAgent"] == "kubectl/v1.34.0" && r["count"] == 1)
        );
        counters.reset();
        assert_eq!(counters.snapshot().total, 0);
    }
}
