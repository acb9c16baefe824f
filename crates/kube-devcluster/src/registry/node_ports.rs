//! The node ports of `NodePort` and `LoadBalancer` services, as the service storage allocates
//! them on a create (k8s.io/kubernetes pkg/registry/core/service/storage/alloc.go
//! `initNodePorts`, with pkg/registry/core/service/portallocator): from the default
//! `--service-node-port-range`, [`NODE_PORT_RANGE`], one per distinct port number of the
//! service, the one it asks for unless another service holds it; an update that leaves them out
//! keeps them (storage.go `patchAllocatedValues`). Nothing listens on them: pods are local
//! processes.
//!
//! Not done: node ports for the ports an update adds, or for a service an update turns into a
//! `NodePort` one, `healthCheckNodePort`, and the range check of a port asked for.

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;

use serde_json::{Map, Value, json};

use crate::api::error::{ApiError, FieldError, Result};
use crate::api::resources::GroupResource;
use crate::storage::store::Store;

/// The default `--service-node-port-range`.
pub const NODE_PORT_RANGE: RangeInclusive<i64> = 30000..=32767;

fn int(port: &Value, field: &str) -> i64 {
    port.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn type_of(spec: &Map<String, Value>) -> &str {
    spec.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// storage.go `needsNodePort`: the types whose ports have node ports.
fn has_node_ports(spec: &Map<String, Value>) -> bool {
    matches!(type_of(spec), "NodePort" | "LoadBalancer")
}

/// alloc.go `shouldAllocateNodePorts`: a load balancer may do without
/// (`allocateLoadBalancerNodePorts: false`).
fn allocates(spec: &Map<String, Value>) -> bool {
    match type_of(spec) {
        "NodePort" => true,
        "LoadBalancer" => spec.get("allocateLoadBalancerNodePorts") != Some(&json!(false)),
        _ => false,
    }
}

/// The node ports the stored services hold.
pub fn in_use(store: &Store) -> HashSet<i64> {
    let (services, _) = store.list(&GroupResource::new("", "services"), None);
    services
        .iter()
        .filter_map(|s| s.value.pointer("/spec/ports").and_then(Value::as_array))
        .flatten()
        .map(|port| int(port, "nodePort"))
        .filter(|node_port| *node_port != 0)
        .collect()
}

/// `initNodePorts` for the service `name` being created: every port gets the node port of its
/// port number, the one a port of that number asks for, or a free one.
pub fn allocate(spec: &mut Map<String, Value>, name: &str, in_use: &HashSet<i64>) -> Result<()> {
    let allocates = allocates(spec);
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut taken = in_use.clone();
    let mut by_number: HashMap<i64, i64> = HashMap::new();
    for i in 0..ports.len() {
        let number = int(&ports[i], "port");
        if int(&ports[i], "nodePort") == 0 && !allocates {
            continue;
        }
        let node_port = match by_number.get(&number) {
            Some(&shared) => shared,
            None => {
                let node_port = choose(&ports[i..], number, &taken)
                    .map_err(|asked| already_allocated(name, i, asked))?;
                taken.insert(node_port);
                by_number.insert(number, node_port);
                node_port
            }
        };
        if int(&ports[i], "nodePort") == 0
            && let Some(port) = ports[i].as_object_mut()
        {
            port.insert("nodePort".into(), json!(node_port));
        }
    }
    Ok(())
}

/// The node port for the port number `number`: the first one a port of that number asks for
/// (`findRequestedNodePort`), `Err` with it when another service holds it; else a free one.
fn choose(ports: &[Value], number: i64, taken: &HashSet<i64>) -> Result<i64, i64> {
    let asked = ports
        .iter()
        .filter(|port| int(port, "port") == number)
        .map(|port| int(port, "nodePort"))
        .find(|node_port| *node_port != 0);
    match asked {
        Some(asked) if taken.contains(&asked) => Err(asked),
        Some(asked) => Ok(asked),
        None => Ok(next_free(taken)),
    }
}

/// The portallocator's `ErrAllocated` as `initNodePorts` reports it.
fn already_allocated(name: &str, index: usize, node_port: i64) -> ApiError {
    ApiError::invalid(
        "Service",
        name,
        vec![FieldError::invalid(
            format!("spec.ports[{index}].nodePort"),
            format!("Invalid value: {node_port}: provided port is already allocated"),
        )],
    )
}

/// A free port of the range, starting at a random one as the port allocator's `AllocateNext`
/// does. The range (2,768 ports) is never full here: tests create a few services.
fn next_free(taken: &HashSet<i64>) -> i64 {
    use rand::Rng;
    let size = NODE_PORT_RANGE.end() - NODE_PORT_RANGE.start() + 1;
    let start = rand::rng().random_range(0..size);
    (0..size)
        .map(|step| NODE_PORT_RANGE.start() + (start + step) % size)
        .find(|port| !taken.contains(port))
        .unwrap_or(*NODE_PORT_RANGE.start())
}

/// `patchAllocatedValues` for node ports: when the service had node ports and keeps them, a
/// port without one takes the stored node port of the port of the same name, unless a port of
/// the update names that node port itself.
pub fn keep(spec: &mut Map<String, Value>, old_spec: &Map<String, Value>) {
    if !(has_node_ports(old_spec) && has_node_ports(spec)) {
        return;
    }
    let ports_of = |spec: &Map<String, Value>| -> Vec<Value> {
        spec.get("ports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old_ports = ports_of(old_spec);
    let named: HashSet<i64> = ports_of(spec).iter().map(|p| int(p, "nodePort")).collect();
    let by_name: HashMap<&str, i64> = old_ports
        .iter()
        .map(|p| {
            (
                p.get("name").and_then(Value::as_str).unwrap_or_default(),
                int(p, "nodePort"),
            )
        })
        .collect();
    for port in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let name = port.get("name").and_then(Value::as_str).unwrap_or_default();
        if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0
            && let Some(&kept) = by_name.get(name)
            && kept != 0
            && !named.contains(&kept)
        {
            port.insert("nodePort".into(), json!(kept));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn ports_of_one_number_share_a_node_port_and_an_asked_one_is_kept() {
        let mut service = spec(json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP", "nodePort": 30053},
            {"port": 80},
        ]}));
        allocate(&mut service, "dns", &HashSet::new()).unwrap();
        let node_ports: Vec<i64> = service["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| int(p, "nodePort"))
            .collect();
        assert_eq!(node_ports[..2], [30053, 30053]);
        assert!(NODE_PORT_RANGE.contains(&node_ports[2]) && node_ports[2] != 30053);
        let refused = allocate(&mut service.clone(), "again", &HashSet::from([30053]));
        assert!(refused.is_err());
    }

    #[test]
    fn an_update_keeps_node_ports_by_port_name() {
        let old = spec(
            json!({"type": "NodePort", "ports": [{"name": "http", "port": 80, "nodePort": 31000}]}),
        );
        let mut new = spec(json!({"type": "NodePort", "ports": [{"name": "http", "port": 8080}]}));
        keep(&mut new, &old);
        assert_eq!(new["ports"][0]["nodePort"], 31000);
    }
}
