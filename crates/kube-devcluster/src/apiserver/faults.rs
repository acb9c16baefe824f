//! Fault injection for tests: the failures a real API server shows under load or during upgrades,
//! on demand. An error rate per verb (500 `InternalError`, 409 `Conflict`, or 429
//! `TooManyRequests` with `Retry-After`), added latency, closing every watch every N seconds,
//! and holding one verb's requests on one resource until the test lets them go.
//! Forcing 410 Gone is [`DevCluster::force_gone`](crate::DevCluster::force_gone) (compaction plus closing every watch).
//!
//! Set programmatically through [`DevCluster::faults`](crate::DevCluster::faults); `workflow-operator dev` sets it
//! from flags. The server consults `Faults::before_request` on every API request.

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;

use crate::api::error::ApiError;

/// A Kubernetes API verb, as audit logs and RBAC name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub const ALL: [Verb; 8] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb changes stored objects.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors parsing a fault specification (from `dev` flags).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error(
        "unknown verb {0:?} (expected get, list, watch, create, update, patch, delete or deletecollection)"
    )]
    UnknownVerb(String),
    #[error("unknown injected error {0:?} (expected 500, 409 or 429)")]
    UnknownError(String),
    #[error("invalid error rate {0:?}: expected VERB=RATE[:CODE] with RATE between 0 and 1")]
    InvalidRate(String),
}

impl FromStr for Verb {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Verb::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::UnknownVerb(s.to_string()))
    }
}

/// What an injected failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedError {
    /// 500 `InternalError`.
    Internal,
    /// 409 `Conflict`, as for a stale resourceVersion.
    Conflict,
    /// 429 `TooManyRequests` with `Retry-After: 1`, as API priority and fairness answers.
    TooManyRequests,
}

impl InjectedError {
    pub fn code(self) -> u16 {
        match self {
            InjectedError::Internal => 500,
            InjectedError::Conflict => 409,
            InjectedError::TooManyRequests => 429,
        }
    }

    fn to_api_error(self, verb: Verb, resource: &str, name: &str) -> ApiError {
        match self {
            InjectedError::Internal => {
                ApiError::internal(format!("injected fault: {verb} {resource} failed"))
            }
            InjectedError::Conflict => ApiError::conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again (injected fault)",
            ),
            InjectedError::TooManyRequests => ApiError::too_many_requests(
                "the server has received too many requests and has asked us to try again later (injected fault)",
            )
            .with_details(serde_json::json!({"retryAfterSeconds": 1})),
        }
    }
}

impl FromStr for InjectedError {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "500" => Ok(InjectedError::Internal),
            "409" => Ok(InjectedError::Conflict),
            "429" => Ok(InjectedError::TooManyRequests),
            other => Err(Error::UnknownError(other.to_string())),
        }
    }
}

/// One error rule: this fraction of the verb's requests fails with this error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorRate {
    pub verb: Verb,
    /// Between 0 (never) and 1 (always).
    pub rate: f64,
    pub error: InjectedError,
}

impl FromStr for ErrorRate {
    /// `VERB=RATE[:CODE]`, e.g. `patch=0.1:409`; the code defaults to 500.
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let (verb, rest) = s
            .split_once('=')
            .ok_or_else(|| Error::InvalidRate(s.to_string()))?;
        let (rate, code) = rest.split_once(':').unwrap_or((rest, "500"));
        let rate: f64 = rate
            .parse()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| Error::InvalidRate(s.to_string()))?;
        Ok(ErrorRate {
            verb: verb.parse()?,
            rate,
            error: code.parse()?,
        })
    }
}

/// The faults in force; all off by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    pub error_rates: Vec<ErrorRate>,
    /// Added before every API request is handled.
    pub latency: Duration,
    /// Every watch is closed this long after it started, as load balancers and API server
    /// restarts close them; clients must resume from their last resourceVersion.
    pub close_watches_every: Option<Duration>,
}

/// The live fault settings, shared by the server and whoever injects faults.
#[derive(Debug, Default)]
pub struct Faults {
    config: RwLock<FaultConfig>,
    /// Requests held by [`Faults::hold`]: verb, resource, and whether they may go now.
    holds: Mutex<Vec<(Verb, String, watch::Receiver<bool>)>>,
}

/// Requests held by [`Faults::hold`] go on when this is dropped.
#[must_use = "the requests go on as soon as this is dropped"]
pub struct Held(watch::Sender<bool>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

impl Faults {
    pub fn config(&self) -> FaultConfig {
        self.config.read().expect("faults lock").clone()
    }

    pub fn set(&self, config: FaultConfig) {
        *self.config.write().expect("faults lock") = config;
    }

    /// Turns every fault off.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
    }

    /// Makes `rate` of the verb's requests fail with `error` (replacing an earlier rule for it).
    pub fn set_error_rate(&self, verb: Verb, rate: f64, error: InjectedError) {
        let mut config = self.config.write().expect("faults lock");
        config.error_rates.retain(|r| r.verb != verb);
        if rate > 0.0 {
            config.error_rates.push(ErrorRate { verb, rate, error });
        }
    }

    pub fn set_latency(&self, latency: Duration) {
        self.config.write().expect("faults lock").latency = latency;
    }

    pub fn close_watches_every(&self, period: Option<Duration>) {
        self.config
            .write()
            .expect("faults lock")
            .close_watches_every = period;
    }

    /// Holds every `verb` request on `resource` (as in `widgets.kopf.test`; `jobs.batch`)
    /// before it is handled, until the returned [`Held`] is dropped: to test what a client does
    /// while one of its writes is in flight.
    pub fn hold(&self, verb: Verb, resource: &str) -> Held {
        let (release, held) = watch::channel(false);
        let mut holds = self.holds.lock().expect("holds lock");
        holds.retain(|(_, _, held)| !*held.borrow());
        holds.push((verb, resource.to_string(), held));
        Held(release)
    }

    pub(crate) fn watch_lifetime(&self) -> Option<Duration> {
        self.config.read().expect("faults lock").close_watches_every
    }

    /// Called before a request is handled: waits the added latency, then answers whether the
    /// request is to fail (and how).
    pub(crate) async fn before_request(
        &self,
        verb: Verb,
        resource: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let (latency, rule) = {
            let config = self.config.read().expect("faults lock");
            let rule = config.error_rates.iter().find(|r| r.verb == verb).copied();
            (config.latency, rule)
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let holds: Vec<_> = self
            .holds
            .lock()
            .expect("holds lock")
            .iter()
            .filter(|(v, r, _)| *v == verb && r == resource)
            .map(|(_, _, held)| held.clone())
            .collect();
        for mut held in holds {
            // A dropped sender has let go too.
            let _ = held.wait_for(|go| *go).await;
        }
        match rule {
            Some(rule) if rand::rng().random_bool(rule.rate.clamp(0.0, 1.0)) => {
                Err(rule.error.to_api_error(verb, resource, name))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rates_parse_from_flags() {
        let cases = [
            (
                "patch=0.1:409",
                Ok(ErrorRate {
                    verb: Verb::Patch,
                    rate: 0.1,
                    error: InjectedError::Conflict,
                }),
            ),
            (
                "create=1",
                Ok(ErrorRate {
                    verb: Verb::Create,
                    rate: 1.0,
                    error: InjectedError::Internal,
                }),
            ),
            (
                "LIST=0.5:429",
                Ok(ErrorRate {
                    verb: Verb::List,
                    rate: 0.5,
                    error: InjectedError::TooManyRequests,
                }),
            ),
            ("frob=0.1", Err(Error::UnknownVerb("frob".into()))),
            ("get=2", Err(Error::InvalidRate("get=2".into()))),
            ("get", Err(Error::InvalidRate("get".into()))),
            ("get=0.5:418", Err(Error::UnknownError("418".into()))),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<ErrorRate>(), want, "{text}");
        }
    }

    #[tokio::test]
    async fn a_rate_of_one_always_fails_and_other_verbs_pass() {
        let faults = Faults::default();
        faults.set_error_rate(Verb::Create, 1.0, InjectedError::TooManyRequests);
        for _ in 0..20 {
            let err = faults
                .before_request(Verb::Create, "pods", "p")
                .await
                .unwrap_err();
            assert_eq!(err.code, 429);
            assert!(faults.before_request(Verb::Get, "pods", "p").await.is_ok());
        }
        faults.set_error_rate(Verb::Create, 0.0, InjectedError::Internal);
        assert!(
            faults
                .before_request(Verb::Create, "pods", "p")
                .await
                .is_ok()
        );
    }
}
