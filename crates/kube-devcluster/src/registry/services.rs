//! Services as the API server defaults, allocates and stores them, on a cluster of one IP family
//! (IPv4) whose service range is [`SERVICE_RANGE`], as kubeadm and kind configure it:
//!
//! - every write gets `SetDefaults_Service` (k8s.io/kubernetes pkg/apis/core/v1/defaults.go):
//!   `type: ClusterIP`, `sessionAffinity: None`, each port's `protocol: TCP` and `targetPort`
//!   (its `port`), `internalTrafficPolicy: Cluster`, and for the kinds reachable from outside
//!   `externalTrafficPolicy: Cluster` (and `allocateLoadBalancerNodePorts: true` for load
//!   balancers);
//! - a new service's status is empty, which Go writes as `{loadBalancer: {}}` (its fields are
//!   structs, never left out);
//! - a new service gets its IP families, a cluster IP and its node ports ([`Allocator`],
//!   [`super::node_ports`]), as the service storage's `allocateCreate` does
//!   (pkg/registry/core/service/storage/alloc.go); nothing routes to that address: pods are
//!   local processes;
//! - an update that leaves them out keeps what was allocated (storage.go
//!   `patchAllocatedValues`), so the same manifest can be sent again.
//!
//! Not done: an address for a service that an update turns from `ExternalName` into another
//! type, and the checks of `ValidateService`.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard};

use kube_schema_check::object_meta::NameRule;
use serde_json::{Map, Value, json};

use super::node_ports;
use super::pod_defaults::{default, objects};
use crate::api::error::{ApiError, FieldError, Result};
use crate::api::resources::{GroupResource, ResourceInfo};
use crate::api::strategy::{FieldLabels, Strategy};
use crate::storage::store::Store;

/// A Service's rules: a delete answers the service and `kubectl get all` lists it
/// (pkg/registry/core/service/storage/storage.go `ReturnDeletedObject`, `Categories`), its name
/// is a DNS label (pkg/apis/core/validation `ValidateService`), its field labels are
/// pkg/apis/core/v1/conversion.go's; what it gets on a write is this module's.
pub static STRATEGY: Strategy = Strategy {
    delete_returns_object: true,
    categories: &["all"],
    name_rule: NameRule::Label,
    field_labels: Some(FieldLabels::of(&[
        "metadata.namespace",
        "metadata.name",
        "spec.clusterIP",
        "spec.type",
    ])),
    decode: defaults,
    prepare_for_create: empty_status,
    prepare_for_update: keep_allocated,
    ..Strategy::DEFAULT
};

/// The service range (`--service-cluster-ip-range`): its first address and prefix length.
pub const SERVICE_RANGE: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// `SetDefaults_Service`, and the status Go writes for a status without a load balancer.
fn defaults(service: &mut Value) {
    let Some(map) = service.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec_defaults(spec);
    }
    if let Some(status) = map.get_mut("status").and_then(Value::as_object_mut) {
        status_defaults(status);
    }
}

fn spec_defaults(spec: &mut Map<String, Value>) {
    default(spec, "sessionAffinity", json!("None"));
    let timeout = spec
        .get("sessionAffinityConfig")
        .and_then(|config| config.pointer("/clientIP/timeoutSeconds"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        // `DefaultClientIPServiceAffinitySeconds`, three hours.
        Some("ClientIP") if timeout.is_none_or(Value::is_null) => {
            spec.insert(
                "sessionAffinityConfig".into(),
                json!({"clientIP": {"timeoutSeconds": 10800}}),
            );
        }
        _ => {}
    }
    default(spec, "type", json!("ClusterIP"));
    for port in objects(spec, "ports") {
        port_defaults(port);
    }
    traffic_defaults(spec);
}

/// A port's protocol, `TCP`, and target port, its own number.
fn port_defaults(port: &mut Map<String, Value>) {
    default(port, "protocol", json!("TCP"));
    // An unset target port is an IntOrString's zero value, like 0 and "".
    let target = port.get("targetPort").unwrap_or(&Value::Null);
    if target.is_null() || *target == json!(0) || *target == json!("") {
        let number = port.get("port").cloned().unwrap_or(json!(0));
        port.insert("targetPort".into(), number);
    }
}

/// The traffic policies of the types they apply to, and a load balancer's node ports.
fn traffic_defaults(spec: &mut Map<String, Value>) {
    let kind = text(spec, "type").to_string();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    // pkg/api/v1/service `ExternallyAccessible`.
    if matches!(kind.as_str(), "LoadBalancer" | "NodePort") || (kind == "ClusterIP" && external_ips)
    {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// Go writes a status's `loadBalancer` (a struct) even when empty; an ingress point with an IP
/// defaults its `ipMode` to `VIP` (`SetDefaults_Service`).
fn status_defaults(status: &mut Map<String, Value>) {
    let load_balancer = status.entry("loadBalancer").or_insert_with(|| json!({}));
    if let Some(load_balancer) = load_balancer.as_object_mut() {
        for ingress in objects(load_balancer, "ingress") {
            if !text(ingress, "ip").is_empty() {
                default(ingress, "ipMode", json!("VIP"));
            }
        }
    }
}

/// `PrepareForCreate` (pkg/registry/core/service/strategy.go) empties the status.
fn empty_status(service: &mut Value) {
    service["status"] = json!({"loadBalancer": {}});
}

/// The string field `field` of `map`, empty when absent.
fn text<'a>(map: &'a Map<String, Value>, field: &str) -> &'a str {
    map.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn spec_of(service: &Value) -> Option<&Map<String, Value>> {
    service.get("spec").and_then(Value::as_object)
}

/// `needsClusterIP` (storage.go): every type but `ExternalName` has a cluster IP.
fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    text(spec, "type") != "ExternalName"
}

/// storage.go `patchAllocatedValues`, and alloc.go `initIPFamilyFields` adopting the stored
/// `ipFamilyPolicy`: an update that leaves out the cluster IPs, IP families or their policy of
/// a service that keeps a cluster IP keeps the stored ones, and its node ports
/// ([`node_ports::keep`]).
fn keep_allocated(new: &mut Value, old: &Value) {
    let Some(old_spec) = spec_of(old) else {
        return;
    };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if needs_cluster_ip(old_spec) && needs_cluster_ip(spec) {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if unset(spec, field)
                && let Some(kept) = old_spec.get(field)
            {
                spec.insert(field.into(), kept.clone());
            }
        }
    }
    node_ports::keep(spec, old_spec);
}

/// Whether `field` of `map` is Go's zero value: absent, null, an empty string or list.
fn unset(map: &Map<String, Value>, field: &str) -> bool {
    match map.get(field) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

/// The cluster IPs and node ports of services, handed out one create at a time.
#[derive(Debug, Default)]
pub struct Allocator {
    /// Held from choosing an address or port until the service holding it is stored (or
    /// refused), so that two creates never choose the same one; those in use are the stored
    /// services'.
    allocating: Mutex<()>,
}

impl Allocator {
    /// For a new Service (any other object passes untouched): its IP families, cluster IP and
    /// node ports, as alloc.go `allocateCreate` sets them. The caller keeps the guard until the
    /// service is stored. An address or node port the service asks for that another holds is
    /// refused (422).
    pub fn allocate(
        &self,
        store: &Store,
        info: &ResourceInfo,
        service: &mut Value,
    ) -> Result<Option<MutexGuard<'_, ()>>> {
        if !(info.group.is_empty() && info.resource == "services") {
            return Ok(None);
        }
        let held = self.allocating.lock().expect("cluster IP lock poisoned");
        let name = service
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) {
            if needs_cluster_ip(spec) {
                init_ip_families(spec);
                allocate_cluster_ip(spec, &name, &in_use(store))?;
            }
            node_ports::allocate(spec, &name, &node_ports::in_use(store))?;
        }
        Ok(Some(held))
    }
}

/// The cluster IPs the stored services hold.
fn in_use(store: &Store) -> HashSet<Ipv4Addr> {
    let (services, _) = store.list(&GroupResource::new("", "services"), None);
    services
        .iter()
        .filter_map(|s| s.value.pointer("/spec/clusterIP").and_then(Value::as_str))
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

/// Whether the service is headless (`clusterIP: None`) and selects no pods.
fn headless_without_selector(spec: &Map<String, Value>) -> bool {
    text(spec, "clusterIP") == "None"
        && spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
}

/// alloc.go `initIPFamilyFields` on a create, on a cluster of IPv4 alone: `clusterIPs` from a
/// `clusterIP` given alone (strategy.go `NormalizeClusterIPs`); the policy `SingleStack`, or
/// `RequireDualStack` for a headless service without selector, which also lists both families
/// whatever the cluster has; the families `IPv4` unless given.
fn init_ip_families(spec: &mut Map<String, Value>) {
    let cluster_ip = text(spec, "clusterIP").to_string();
    if !cluster_ip.is_empty() && unset(spec, "clusterIPs") {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    let dual_headless = headless_without_selector(spec);
    let policy = if dual_headless {
        "RequireDualStack"
    } else {
        "SingleStack"
    };
    default(spec, "ipFamilyPolicy", json!(policy));
    if unset(spec, "ipFamilies") {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
    let single = text(spec, "ipFamilyPolicy") == "SingleStack";
    if dual_headless
        && !single
        && let Some(families) = spec.get_mut("ipFamilies").and_then(Value::as_array_mut)
        && families.len() == 1
    {
        let other = if families[0] == "IPv6" {
            "IPv4"
        } else {
            "IPv6"
        };
        families.push(json!(other));
    }
}

/// alloc.go `allocClusterIPs`: a headless service keeps `None`; a service that names its
/// address gets it unless another holds it (`failed to allocate IP ...: provided IP is already
/// allocated`, pkg/registry/core/service/ipallocator `ErrAllocated`); any other gets a free one.
fn allocate_cluster_ip(
    spec: &mut Map<String, Value>,
    name: &str,
    in_use: &HashSet<Ipv4Addr>,
) -> Result<()> {
    let asked = spec
        .get("clusterIPs")
        .and_then(|ips| ips.get(0))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ip = match asked.as_str() {
        "" => next_free(in_use).ok_or_else(|| {
            ApiError::internal(
                "Internal error occurred: failed to allocate a serviceIP: range is full",
            )
        })?,
        "None" => return Ok(()),
        asked => match asked.parse::<Ipv4Addr>() {
            Ok(ip) if in_use.contains(&ip) => {
                return Err(ApiError::invalid(
                    "Service",
                    name,
                    vec![FieldError::invalid(
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{{asked:?}}}: failed to allocate IP {asked}: provided IP is already allocated"
                        ),
                    )],
                ));
            }
            Ok(ip) => ip,
            // Not an IPv4 address: `ValidateService`'s to refuse, which this server does not do.
            Err(_) => return Ok(()),
        },
    };
    spec.insert("clusterIP".into(), json!(ip.to_string()));
    spec.insert("clusterIPs".into(), json!([ip.to_string()]));
    Ok(())
}

/// A free address of the range, as the allocator chooses one (ipallocator `AllocateNext`): the
/// range's first and last addresses are never given out, and a dynamic choice starts at a
/// random address above the band kept for addresses clients ask for (`calculateRangeOffset`:
/// a sixteenth of the range, at least 16 and at most 256 addresses), then takes the next free
/// one, wrapping around.
fn next_free(in_use: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    use rand::Rng;
    let (base, prefix) = SERVICE_RANGE;
    let size = 1u32 << (32 - prefix);
    let usable = size - 2;
    let band = (size / 16).clamp(16, 256).min(usable - 1);
    let start = rand::rng().random_range(band..usable);
    (0..usable)
        .map(|step| 1 + (start + step) % usable)
        .map(|offset| Ipv4Addr::from(u32::from(base) + offset))
        .find(|ip| !in_use.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_addresses_are_in_the_upper_band_of_the_range() {
        let free = next_free(&HashSet::new()).unwrap();
        let offset = u32::from(free) - u32::from(SERVICE_RANGE.0);
        assert!((257..(1 << 20) - 1).contains(&offset), "{free}");
    }

    #[test]
    fn an_update_keeps_the_allocated_address_it_leaves_out() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.3.4",
            "clusterIPs": ["10.96.3.4"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}});
        let mut new = json!({"spec": {"type": "ClusterIP", "clusterIP": ""}});
        keep_allocated(&mut new, &old);
        assert_eq!(new, old);
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "x.example"}});
        keep_allocated(&mut external, &old);
        assert!(external["spec"].get("clusterIP").is_none());
    }
}
