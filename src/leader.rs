//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several operator replicas
//! exactly one handles events and a standby takes over when it stops. The `run` command wraps
//! the operator in [`LeaderElection::run_while_leader`].
//!
//! The algorithm is client-go's `leaderelection` (the one kube-controller-manager uses):
//!
//! - every write of the Lease is a replace guarded by the `resourceVersion` that was read (a
//!   create when it does not exist yet), so of two contenders racing for a free or expired lease
//!   the API server lets exactly one win; the other gets 409 Conflict;
//! - a contender treats a lease held by another identity as expired only after it has seen the
//!   same record, unchanged, for the lease duration on its own monotonic clock. It never
//!   compares `renewTime` with its own wall clock, so clock skew between nodes cannot make two
//!   leaders;
//! - the leader renews every retry period; when it has not renewed for the renew deadline
//!   (shorter than the lease duration) it gives up, so it stops before anyone else can start;
//! - on shutdown the leader first lets its work stop (still renewing meanwhile), then releases
//!   the lease (empty holder), and a standby acquires it at its next poll instead of waiting for
//!   the lease to expire.
//!
//! Why not a crate: `kube-leader-election` 0.44 depends on kube 4, not kube 5.
//! `kube-lease-manager` 0.13 supports kube 5, but its exclusion rests on server-side-apply field
//! ownership conflicts (the embedded control plane does not track field ownership), its watch
//! mode keeps reporting leadership while renewals fail, and it force-clears an expired lease
//! without a resourceVersion guard (a third contender can clear a lock just taken).
//!
//! # Caveats
//! - Leases give no fencing: after the renew deadline passes the old leader's work still has to
//!   stop. It has `lease duration - renew deadline` (5 s with the defaults) to notice the
//!   cancelled token before a standby may start.
//! - Identities must be unique (the pod name); two contenders with one identity both lead.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::telemetry::http::Readiness;
use crate::telemetry::metrics::Metrics;

/// Errors of one attempt to read or write the Lease; the election logs them and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid leader election timing: {0}")]
    Timing(&'static str),
    #[error("cannot read lease {name}: {source}")]
    Get {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot create lease {name}: {source}")]
    Create {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update lease {name}: {source}")]
    Update {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("lease {0} was written by another contender first")]
    Conflict(String),
    #[error("no answer from the API server about lease {0} in time")]
    Timeout(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long a lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a standby waits, after the last change of the lease it saw, before it takes an
    /// unreleased lease over. Written to the Lease in whole seconds.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the leader renews and a standby polls.
    pub retry_period: Duration,
}

impl Timing {
    /// Checks `retry_period < renew_deadline < lease_duration` and `lease_duration >= 1 s`.
    ///
    /// # Errors
    /// [`Error::Timing`] naming the violated rule.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self> {
        if lease_duration < Duration::from_secs(1) {
            return Err(Error::Timing("the lease duration must be at least 1 s"));
        }
        if renew_deadline >= lease_duration {
            return Err(Error::Timing(
                "the renew deadline must be shorter than the lease duration",
            ));
        }
        if retry_period.is_zero() || retry_period >= renew_deadline {
            return Err(Error::Timing(
                "the retry period must be positive and shorter than the renew deadline",
            ));
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    /// client-go's proportions (15 s, 10 s, 2 s): renew deadline 2/3 and retry period 2/15 of the
    /// lease duration, which is raised to 1 s if shorter.
    pub fn from_lease_duration(lease_duration: Duration) -> Self {
        let lease_duration = lease_duration.max(Duration::from_secs(1));
        Self {
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: lease_duration * 2 / 15,
        }
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs_f64().ceil() as u64).unwrap_or(i32::MAX)
    }
}

/// Where this contender stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderStatus {
    /// Has not read the lease yet.
    Starting,
    /// Another identity (`holder`) leads; this one waits.
    Standby { holder: String },
    /// This identity holds the lease and its work runs.
    Leader,
    /// [`LeaderElection::run_while_leader`] returned.
    Stopped,
}

/// How [`LeaderElection::run_while_leader`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended<T> {
    /// The work returned by itself; the lease was released.
    Finished(T),
    /// Shutdown was requested: `None` if it came before this contender led, else the work's
    /// output after it stopped; the lease was released.
    Shutdown(Option<T>),
    /// Leadership was lost (renew deadline passed, or another identity holds the lease); the
    /// work was cancelled and this is its output. The lease is not touched. Callers should exit
    /// (as client-go's users do): the process's in-memory state may be stale, and a restart
    /// rejoins the election cleanly.
    LostLeadership(T),
}

/// What a contender does with the lease it read. Pure: see [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum LeaseMove {
    /// Free (no holder) or expired: take it.
    Acquire,
    /// This identity already holds it: renew it.
    Renew,
    /// Another identity holds it and it has not expired.
    Wait { holder: String },
}

/// Decides from the lease's spec, how long this contender has seen that spec unchanged, and
/// the lease duration to assume when the lease does not say.
fn decide(
    spec: &LeaseSpec,
    identity: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> LeaseMove {
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return LeaseMove::Acquire;
    }
    if holder == identity {
        return LeaseMove::Renew;
    }
    if unchanged_for >= duration_of(spec, default_duration) {
        LeaseMove::Acquire
    } else {
        LeaseMove::Wait {
            holder: holder.to_owned(),
        }
    }
}

/// How long the lease stays valid without a change: as its holder wrote it, else the default.
fn duration_of(spec: &LeaseSpec, default_duration: Duration) -> Duration {
    spec.lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(default_duration, Duration::from_secs)
}

/// The spec this identity writes to acquire or renew the lease `previous`.
fn claim(
    previous: &LeaseSpec,
    identity: &str,
    now: Timestamp,
    lease_duration_seconds: i32,
) -> LeaseSpec {
    let renewing = previous.holder_identity.as_deref() == Some(identity);
    let transitions = previous.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(lease_duration_seconds),
        acquire_time: if renewing {
            previous.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing {
            transitions
        } else {
            transitions.saturating_add(1)
        }),
        ..previous.clone()
    }
}

/// The spec the leader writes to release the lease: no holder, as client-go does.
fn released(previous: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..previous.clone()
    }
}

/// The last spec this contender saw and since when (its own monotonic clock).
struct Observed {
    spec: Option<LeaseSpec>,
    since: Instant,
}

impl Observed {
    fn update(&mut self, spec: &LeaseSpec, now: Instant) {
        if self.spec.as_ref() != Some(spec) {
            self.spec = Some(spec.clone());
            self.since = now;
        }
    }

    /// How long until the lease, held by someone and unchanged since it was seen, may be taken
    /// over; `None` when it has no holder or may be taken already.
    fn expires_in(&self, now: Instant, default_duration: Duration) -> Option<Duration> {
        let spec = self.spec.as_ref()?;
        spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
        let expiry = self.since + duration_of(spec, default_duration);
        expiry.checked_duration_since(now).filter(|d| !d.is_zero())
    }
}

/// Result of one successful attempt.
enum Attempt {
    Leading(Box<Lease>),
    HeldBy(String),
}

/// Why a leader stopped leading.
enum Lost {
    TakenBy(String),
    RenewDeadline,
}

/// One contender for one Lease.
pub struct LeaderElection {
    api: Api<Lease>,
    lease_name: String,
    identity: String,
    timing: Timing,
    metrics: Option<Metrics>,
    readiness: Option<Readiness>,
    status: watch::Sender<LeaderStatus>,
    gate: Option<Gate>,
    /// Told when the gate may have opened, so a standing-by contender tries at once.
    gate_opened: Option<std::sync::Arc<tokio::sync::Notify>>,
}

/// Whether a contender may take a lease it does not hold now (see [`LeaderElection::with_gate`]).
pub type Gate = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

impl LeaderElection {
    /// A contender named `identity` (unique among contenders: the pod name) for the Lease
    /// `namespace/lease_name`, created on first use; timing from `lease_duration` with client-go's
    /// proportions ([`Timing::from_lease_duration`]).
    pub fn new(
        client: Client,
        namespace: &str,
        lease_name: &str,
        identity: impl Into<String>,
        lease_duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            lease_name: lease_name.to_owned(),
            identity: identity.into(),
            timing: Timing::from_lease_duration(lease_duration),
            metrics: None,
            readiness: None,
            status: watch::Sender::new(LeaderStatus::Starting),
            gate: None,
            gate_opened: None,
        }
    }

    /// Takes a free or expired lease only while `gate` says yes (a replica holding its share of
    /// the shards stands by on the others); renewing a lease it holds is never gated. `opened`
    /// is notified when the gate may have opened: a contender standing by then tries at once
    /// instead of at its next poll.
    pub fn with_gate(mut self, gate: Gate, opened: std::sync::Arc<tokio::sync::Notify>) -> Self {
        self.gate = Some(gate);
        self.gate_opened = Some(opened);
        self
    }

    fn may_take(&self) -> bool {
        self.gate.as_ref().is_none_or(|gate| gate())
    }

    /// Uses `timing` instead of the one derived from the lease duration.
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// Keeps the `workflow_operator_leader` gauge up to date.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Sets the flag of `readiness` once the lease has been read (leader or standby: see
    /// [`crate::telemetry::http`] for why a standby is ready). What the leader's work needs to be ready is
    /// [`LeaderElection::readiness_check`].
    pub fn with_readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = Some(readiness);
        self
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// A [`Readiness`] check for a replica whose work runs only while it leads: it passes while
    /// this contender stands by (it has read the Lease and can take over), and otherwise
    /// (starting, leading, stopped) only while `work_ready` does. So a new leader is unready from
    /// the moment it leads until its work is ready, with no gap in between, as the status turns
    /// [`LeaderStatus::Leader`] before the work starts.
    pub fn readiness_check(
        &self,
        work_ready: impl Fn() -> bool + Send + Sync + 'static,
    ) -> impl Fn() -> bool + Send + Sync + 'static {
        let status = self.status.subscribe();
        move || matches!(*status.borrow(), LeaderStatus::Standby { .. }) || work_ready()
    }

    /// Follows this contender's [`LeaderStatus`].
    pub fn status(&self) -> watch::Receiver<LeaderStatus> {
        self.status.subscribe()
    }

    /// Waits to acquire the lease, then runs `work(token)` while it holds it.
    ///
    /// - Leadership lost: `token` is cancelled, the lease is left alone, and once `work` returns,
    ///   [`Ended::LostLeadership`].
    /// - `shutdown` cancelled: before leading, returns [`Ended::Shutdown`]`(None)` once the API
    ///   call in flight, if any, has ended (at most the renew deadline; a lease won by that call
    ///   is released); while leading, `token` is cancelled, the lease is still renewed until
    ///   `work` returns (so no standby starts while handlers finish), then released so a standby
    ///   takes over at its next poll.
    /// - `work` returns by itself: the lease is released, [`Ended::Finished`].
    ///
    /// Errors talking to the API server are logged and retried; they end leadership only when
    /// they last past the renew deadline.
    ///
    /// # Guarantees
    /// `work` is started only after this identity's write of the lease succeeded against the
    /// resourceVersion it read, and is never started twice.
    ///
    /// # Caveats
    /// `work` must stop soon after `token` is cancelled: see the module's caveats.
    pub async fn run_while_leader<F, Fut>(
        &self,
        work: F,
        shutdown: CancellationToken,
    ) -> Ended<Fut::Output>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future,
    {
        let mut observed = Observed {
            spec: None,
            since: Instant::now(),
        };
        let Some((lease, sent_at)) = self.acquire(&mut observed, &shutdown).await else {
            self.set_status(LeaderStatus::Stopped);
            return Ended::Shutdown(None);
        };
        tracing::info!(identity = %self.identity, lease = %self.lease_name, "became the leader");
        self.set_status(LeaderStatus::Leader);

        let token = CancellationToken::new();
        let work = work(token.clone());
        tokio::pin!(work);
        let mut current = lease;
        let mut lost = false;
        let mut shutting_down = false;
        let output = {
            let keep = self.keep_leading(&mut current, &mut observed, sent_at);
            tokio::pin!(keep);
            let mut keep_done = false;
            loop {
                tokio::select! {
                    output = &mut work => break output,
                    _ = shutdown.cancelled(), if !shutting_down => {
                        shutting_down = true;
                        tracing::info!(identity = %self.identity, "shutting down: stopping the leader's work");
                        token.cancel();
                    }
                    reason = &mut keep, if !keep_done => {
                        keep_done = true;
                        match reason {
                            Lost::TakenBy(holder) => tracing::warn!(identity = %self.identity, %holder, "lost leadership to another holder: stopping the leader's work"),
                            Lost::RenewDeadline => tracing::warn!(identity = %self.identity, "lost leadership: no renewal within the renew deadline; stopping the leader's work"),
                        }
                        lost = true;
                        self.set_status(LeaderStatus::Stopped);
                        token.cancel();
                    }
                }
            }
        };
        if lost {
            return Ended::LostLeadership(output);
        }
        self.release(current).await;
        self.set_status(LeaderStatus::Stopped);
        if shutting_down {
            Ended::Shutdown(Some(output))
        } else {
            Ended::Finished(output)
        }
    }

    /// Polls until this identity holds the lease (its latest version and when the winning write
    /// was sent), or `None` on shutdown (after releasing a lease won meanwhile).
    async fn acquire(
        &self,
        observed: &mut Observed,
        shutdown: &CancellationToken,
    ) -> Option<(Lease, Instant)> {
        loop {
            let sent_at = Instant::now();
            // Not raced against `shutdown`: a write that was sent must be seen through, or a
            // lease won at the last moment would be held, unreleased, until it expired.
            match self
                .attempt_within(observed, None, self.timing.renew_deadline)
                .await
            {
                Ok(Attempt::Leading(lease)) => {
                    if shutdown.is_cancelled() {
                        self.release(*lease).await;
                        return None;
                    }
                    return Some((*lease, sent_at));
                }
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::debug!(identity = %self.identity, %holder, "standing by");
                    self.set_status(LeaderStatus::Standby { holder });
                }
                Err(Error::Conflict(_)) => {
                    tracing::debug!(identity = %self.identity, "another contender won the lease first");
                }
                Err(error) => tracing::warn!(%error, identity = %self.identity, "leader election"),
            }
            // Jitter (up to +20 %) so contenders that started together do not poll in lockstep;
            // a lease held by another is tried again when it would expire, not up to a retry
            // period later.
            let pause = self
                .timing
                .retry_period
                .mul_f64(1.0 + 0.2 * rand::random::<f64>());
            let pause = observed
                .expires_in(Instant::now(), self.timing.lease_duration)
                .map_or(pause, |left| pause.min(left));
            let gate_opened = async {
                match &self.gate_opened {
                    Some(opened) => opened.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                _ = tokio::time::sleep(pause) => {}
                () = gate_opened => {}
            }
        }
    }

    /// Renews every retry period; returns when leadership is lost. `current` is always the
    /// latest version of the lease this identity wrote.
    async fn keep_leading(
        &self,
        current: &mut Lease,
        observed: &mut Observed,
        mut last_renewal: Instant,
    ) -> Lost {
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let deadline = last_renewal + self.timing.renew_deadline;
            let sent_at = Instant::now();
            let Some(remaining) = deadline
                .checked_duration_since(sent_at)
                .filter(|d| !d.is_zero())
            else {
                return Lost::RenewDeadline;
            };
            match self
                .attempt_within(observed, Some(current), remaining)
                .await
            {
                Ok(Attempt::Leading(lease)) => {
                    *current = *lease;
                    last_renewal = sent_at;
                }
                Ok(Attempt::HeldBy(holder)) => return Lost::TakenBy(holder),
                Err(error) => {
                    tracing::warn!(%error, identity = %self.identity, "cannot renew the lease")
                }
            }
        }
    }

    async fn attempt_within(
        &self,
        observed: &mut Observed,
        held: Option<&Lease>,
        limit: Duration,
    ) -> Result<Attempt> {
        tokio::time::timeout(limit, self.attempt(observed, held))
            .await
            .unwrap_or_else(|_| Err(Error::Timeout(self.lease_name.clone())))
    }

    /// One round of client-go's `tryAcquireOrRenew`. When this identity holds the lease
    /// (`held`), it first renews with the resourceVersion it last wrote, saving a read.
    async fn attempt(&self, observed: &mut Observed, held: Option<&Lease>) -> Result<Attempt> {
        if let Some(lease) = held {
            match self.write_claim(lease.clone(), observed).await {
                Err(Error::Conflict(_)) => {} // changed since: read it and decide again
                other => return other.map(|lease| Attempt::Leading(Box::new(lease))),
            }
        }
        let lease = self
            .api
            .get_opt(&self.lease_name)
            .await
            .map_err(|source| Error::Get {
                name: self.lease_name.clone(),
                source,
            })?;
        let Some(lease) = lease else {
            if !self.may_take() {
                return Ok(Attempt::HeldBy(String::new()));
            }
            return self
                .create(observed)
                .await
                .map(|lease| Attempt::Leading(Box::new(lease)));
        };
        self.mark_ready();
        let spec = lease.spec.clone().unwrap_or_default();
        let now = Instant::now();
        observed.update(&spec, now);
        match decide(
            &spec,
            &self.identity,
            now - observed.since,
            self.timing.lease_duration,
        ) {
            LeaseMove::Wait { holder } => Ok(Attempt::HeldBy(holder)),
            LeaseMove::Acquire if !self.may_take() => Ok(Attempt::HeldBy(
                spec.holder_identity.clone().unwrap_or_default(),
            )),
            LeaseMove::Acquire | LeaseMove::Renew => self
                .write_claim(lease, observed)
                .await
                .map(|lease| Attempt::Leading(Box::new(lease))),
        }
    }

    async fn create(&self, observed: &mut Observed) -> Result<Lease> {
        let spec = claim(
            &LeaseSpec::default(),
            &self.identity,
            Timestamp::now(),
            self.timing.lease_duration_seconds(),
        );
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.lease_name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec.clone()),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.mark_ready();
                observed.update(&spec, Instant::now());
                Ok(created)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Err(Error::Conflict(self.lease_name.clone()))
            }
            Err(source) => Err(Error::Create {
                name: self.lease_name.clone(),
                source,
            }),
        }
    }

    /// Replaces `lease` (with its resourceVersion) by this identity's claim.
    async fn write_claim(&self, mut lease: Lease, observed: &mut Observed) -> Result<Lease> {
        let spec = claim(
            &lease.spec.clone().unwrap_or_default(),
            &self.identity,
            Timestamp::now(),
            self.timing.lease_duration_seconds(),
        );
        lease.spec = Some(spec.clone());
        let written = self.replace(&lease).await?;
        observed.update(&spec, Instant::now());
        Ok(written)
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease> {
        match self
            .api
            .replace(&self.lease_name, &PostParams::default(), lease)
            .await
        {
            Ok(written) => Ok(written),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Err(Error::Conflict(self.lease_name.clone()))
            }
            Err(source) => Err(Error::Update {
                name: self.lease_name.clone(),
                source,
            }),
        }
    }

    /// Empties the lease's holder if this identity still holds it; best effort (on failure a
    /// standby takes over when the lease expires).
    async fn release(&self, mut lease: Lease) {
        // Two tries: the first can meet a renewal that was cut short and still landed.
        for _ in 0..2 {
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                return;
            }
            lease.spec = Some(released(&spec, Timestamp::now()));
            let written =
                tokio::time::timeout(self.timing.renew_deadline, self.replace(&lease)).await;
            match written {
                Ok(Ok(_)) => {
                    tracing::info!(identity = %self.identity, lease = %self.lease_name, "released the lease");
                    return;
                }
                Ok(Err(Error::Conflict(_))) => match self.api.get_opt(&self.lease_name).await {
                    Ok(Some(fresh)) => lease = fresh,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(%error, "cannot release the lease");
                        return;
                    }
                },
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot release the lease");
                    return;
                }
                Err(_) => {
                    tracing::warn!(lease = %self.lease_name, "cannot release the lease: timed out");
                    return;
                }
            }
        }
    }

    fn mark_ready(&self) {
        if let Some(readiness) = &self.readiness {
            readiness.set_ready(true);
        }
    }

    fn set_status(&self, status: LeaderStatus) {
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(status == LeaderStatus::Leader);
        }
        self.status.send_if_modified(|current| {
            let changed = *current != status;
            *current = status;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "pod-a";
    const OTHER: &str = "pod-b";

    fn held_by(holder: Option<&str>, duration_seconds: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: duration_seconds,
            ..LeaseSpec::default()
        }
    }

    fn wait() -> LeaseMove {
        LeaseMove::Wait {
            holder: OTHER.to_owned(),
        }
    }

    #[test]
    fn decide_takes_free_or_expired_leases_and_waits_for_live_ones() {
        let secs = Duration::from_secs;
        let cases = [
            (
                "no holder",
                held_by(None, Some(15)),
                secs(0),
                LeaseMove::Acquire,
            ),
            (
                "released (empty holder)",
                held_by(Some(""), Some(1)),
                secs(0),
                LeaseMove::Acquire,
            ),
            (
                "held by me",
                held_by(Some(ME), Some(15)),
                secs(0),
                LeaseMove::Renew,
            ),
            (
                "held by me, stale",
                held_by(Some(ME), Some(15)),
                secs(99),
                LeaseMove::Renew,
            ),
            (
                "held by other, fresh",
                held_by(Some(OTHER), Some(15)),
                secs(14),
                wait(),
            ),
            (
                "held by other, expired",
                held_by(Some(OTHER), Some(15)),
                secs(15),
                LeaseMove::Acquire,
            ),
            (
                "other's own shorter duration",
                held_by(Some(OTHER), Some(2)),
                secs(2),
                LeaseMove::Acquire,
            ),
            (
                "no duration: default 10 s, fresh",
                held_by(Some(OTHER), None),
                secs(9),
                wait(),
            ),
            (
                "no duration: default 10 s, expired",
                held_by(Some(OTHER), None),
                secs(10),
                LeaseMove::Acquire,
            ),
            (
                "negative duration: default",
                held_by(Some(OTHER), Some(-5)),
                secs(9),
                wait(),
            ),
        ];
        for (name, spec, unchanged_for, expected) in cases {
            assert_eq!(
                decide(&spec, ME, unchanged_for, secs(10)),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn claim_counts_transitions_only_when_the_holder_changes() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let now = Timestamp::from_second(2_000).unwrap();
        let acquired_at_t0 = |holder: Option<&str>, transitions: Option<i32>| LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            acquire_time: Some(MicroTime(t0)),
            renew_time: Some(MicroTime(t0)),
            lease_duration_seconds: Some(15),
            lease_transitions: transitions,
            preferred_holder: Some("keep-me".to_owned()),
            ..LeaseSpec::default()
        };
        // (case, previous, expected acquire time, expected transitions)
        let cases = [
            ("new lease", LeaseSpec::default(), now, 1),
            (
                "renewal keeps acquire time",
                acquired_at_t0(Some(ME), Some(4)),
                t0,
                4,
            ),
            (
                "takeover from other",
                acquired_at_t0(Some(OTHER), Some(4)),
                now,
                5,
            ),
            ("after a release", acquired_at_t0(None, Some(4)), now, 5),
            (
                "no transitions recorded",
                acquired_at_t0(Some(OTHER), None),
                now,
                1,
            ),
        ];
        for (name, previous, acquired, transitions) in cases {
            let spec = claim(&previous, ME, now, 7);
            assert_eq!(spec.holder_identity.as_deref(), Some(ME), "{name}");
            assert_eq!(spec.lease_duration_seconds, Some(7), "{name}");
            assert_eq!(spec.renew_time, Some(MicroTime(now)), "{name}");
            assert_eq!(spec.acquire_time, Some(MicroTime(acquired)), "{name}");
            assert_eq!(spec.lease_transitions, Some(transitions), "{name}");
            assert_eq!(spec.preferred_holder, previous.preferred_holder, "{name}");
        }
    }

    #[test]
    fn released_lease_has_no_holder_and_keeps_its_transitions() {
        let now = Timestamp::from_second(2_000).unwrap();
        let previous = claim(&held_by(Some(OTHER), Some(15)), ME, now, 15);
        let spec = released(&previous, now);
        assert_eq!(spec.holder_identity, None);
        assert_eq!(spec.lease_transitions, previous.lease_transitions);
        assert_eq!(
            decide(&spec, OTHER, Duration::ZERO, Duration::from_secs(15)),
            LeaseMove::Acquire
        );
    }

    #[test]
    fn timing_rejects_inconsistent_periods() {
        let ms = Duration::from_millis;
        let cases = [
            (ms(15_000), ms(10_000), ms(2_000), true),
            (ms(500), ms(300), ms(100), false),
            (ms(2_000), ms(2_000), ms(100), false),
            (ms(2_000), ms(1_000), ms(1_000), false),
            (ms(2_000), ms(1_000), ms(0), false),
        ];
        for (lease, renew, retry, valid) in cases {
            assert_eq!(
                Timing::new(lease, renew, retry).is_ok(),
                valid,
                "{lease:?} {renew:?} {retry:?}"
            );
        }
    }

    #[test]
    fn derived_timing_is_valid_and_follows_client_go() {
        let timing = Timing::from_lease_duration(Duration::from_secs(15));
        assert_eq!(timing.renew_deadline, Duration::from_secs(10));
        assert_eq!(timing.retry_period, Duration::from_secs(2));
        for secs in [0, 1, 2, 10, 15, 60] {
            let t = Timing::from_lease_duration(Duration::from_secs(secs));
            assert!(
                Timing::new(t.lease_duration, t.renew_deadline, t.retry_period).is_ok(),
                "{secs} s gives {t:?}"
            );
        }
        assert_eq!(
            Timing::from_lease_duration(Duration::from_millis(1_500)).lease_duration_seconds(),
            2
        );
    }
}
