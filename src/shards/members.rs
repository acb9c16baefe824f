//! Which replicas are alive, so each knows its fair share of the shards: every replica keeps a
//! Lease of its own (`workflow-operator-replica-<identity>`, labelled [`LABEL_REPLICA_OF`])
//! renewed every retry period, and reads the others'. As in [`crate::leader`], a replica counts
//! another as gone only after it has seen that Lease unchanged for the lease duration on its
//! own monotonic clock (never by comparing `renewTime` with its wall clock), or at once when
//! the Lease is deleted (a replica that stops deletes it).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;

/// Label on each replica's membership Lease: the name of the operator's Leases it belongs to
/// (the leader-election Lease's name), so two operators in one namespace do not count each
/// other.
pub const LABEL_REPLICA_OF: &str = "workflow.crd.com/replica-of";

/// One replica's view of the others.
pub struct Membership {
    api: Api<Lease>,
    group: String,
    identity: String,
    lease_duration: Duration,
    /// Each member Lease's last spec seen, and since when.
    seen: HashMap<String, (LeaseSpec, Instant)>,
}

impl Membership {
    pub fn new(
        client: Client,
        namespace: &str,
        group: &str,
        identity: &str,
        lease_duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            group: group.to_owned(),
            identity: identity.to_owned(),
            lease_duration,
            seen: HashMap::new(),
        }
    }

    fn lease_name(&self) -> String {
        format!("{}-replica-{}", self.group, dns_label(&self.identity))
    }

    /// Renews this replica's Lease (creating it on first use).
    ///
    /// # Errors
    /// The API server's, when it refused or did not answer.
    pub async fn heartbeat(&self) -> kube::Result<()> {
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_seconds(self.lease_duration)),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        };
        let name = self.lease_name();
        let patch = serde_json::json!({"spec": spec});
        match self
            .api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some([(LABEL_REPLICA_OF.to_owned(), self.group.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await?;
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// The identities of the replicas alive now, sorted, this one among them.
    ///
    /// # Errors
    /// The API server's, when the Leases cannot be listed.
    pub async fn live(&mut self) -> kube::Result<Vec<String>> {
        let selector = format!("{LABEL_REPLICA_OF}={}", self.group);
        let leases = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await?;
        let now = Instant::now();
        let specs: Vec<(String, LeaseSpec)> = leases
            .into_iter()
            .map(|lease| {
                (
                    lease.metadata.name.unwrap_or_default(),
                    lease.spec.unwrap_or_default(),
                )
            })
            .collect();
        Ok(live_members(
            &mut self.seen,
            specs,
            &self.identity,
            now,
            self.lease_duration,
        ))
    }

    /// How long until the next member counted alive would count as gone if its Lease stays
    /// as last seen; `None` when there is none (this replica's own Lease aside).
    pub fn expires_in(&self, now: Instant) -> Option<Duration> {
        let mine = self.lease_name();
        self.seen
            .iter()
            .filter(|(name, _)| **name != mine)
            .filter_map(|(_, (_, since))| {
                (*since + self.lease_duration).checked_duration_since(now)
            })
            .filter(|left| !left.is_zero())
            .min()
    }

    /// Deletes this replica's Lease, so the others count it gone at once; best effort.
    pub async fn leave(&self) {
        let deleted = self
            .api
            .delete(&self.lease_name(), &DeleteParams::default())
            .await;
        if let Err(error) = deleted {
            tracing::warn!(%error, "cannot delete this replica's membership Lease");
        }
    }
}

/// The live members among `specs` (name, spec), given what was `seen` before (updated): a
/// Lease with a holder that changed within `lease_duration`, and `me` always.
fn live_members(
    seen: &mut HashMap<String, (LeaseSpec, Instant)>,
    specs: Vec<(String, LeaseSpec)>,
    me: &str,
    now: Instant,
    lease_duration: Duration,
) -> Vec<String> {
    seen.retain(|name, _| specs.iter().any(|(listed, _)| listed == name));
    let mut live = vec![me.to_owned()];
    for (name, spec) in specs {
        let since = match seen.get(&name) {
            Some((before, since)) if *before == spec => *since,
            _ => now,
        };
        seen.insert(name, (spec.clone(), since));
        let holder = spec.holder_identity.unwrap_or_default();
        let fresh = now.duration_since(since) < lease_duration;
        if fresh && !holder.is_empty() && !live.contains(&holder) {
            live.push(holder);
        }
    }
    live.sort();
    live
}

fn duration_seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// `identity` as the tail of a Lease name: lower case, `[a-z0-9-]` only.
fn dns_label(identity: &str) -> String {
    identity
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(by: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_member_is_gone_once_its_lease_stood_still_for_the_duration() {
        let duration = Duration::from_secs(10);
        let mut seen = HashMap::new();
        let start = Instant::now();
        let listing = |b: i64| {
            vec![
                ("r-b".to_string(), held("b", b)),
                ("r-c".to_string(), held("c", 1)),
            ]
        };
        let live = live_members(&mut seen, listing(1), "a", start, duration);
        assert_eq!(live, ["a", "b", "c"], "first seen: assumed alive");
        let later = start + Duration::from_secs(11);
        let live = live_members(&mut seen, listing(2), "a", later, duration);
        assert_eq!(live, ["a", "b"], "c did not renew for the lease duration");
        let live = live_members(&mut seen, vec![], "a", later, duration);
        assert_eq!(live, ["a"], "deleted Leases are gone at once");
    }

    #[test]
    fn identities_become_lease_names() {
        assert_eq!(dns_label("Operator_0.host"), "operator-0-host");
    }
}
