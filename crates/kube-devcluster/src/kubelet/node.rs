//! The devcluster's one Node, which the kubelet registers when the controllers start, as the
//! real kubelet registers its own (pkg/kubelet/kubelet_node_status.go, `registerWithAPIServer`,
//! `initialNode`, `setNodeStatus`): named after the machine, with the well-known labels
//! (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and their `beta.`
//! forms), the machine's capacity as allocatable (`cpu` its cores, `memory` its `MemTotal`,
//! `ephemeral-storage` the temporary directory's file system, `pods` 110), Ready, with no
//! pressure, at `127.0.0.1`.
//!
//! Registering again (another control plane start over the same store) keeps what users set
//! (labels added, taints, `unschedulable`) and refreshes the status. The status and the Node's
//! Lease in `kube-node-lease` (pkg/kubelet/nodelease, owned by the Node, as `kubectl describe
//! node` shows it) are written once: there is no heartbeat, as nothing here marks a silent Node
//! `NotReady`.

use std::path::Path;

use serde_json::{Value, json};

use crate::api::resources::{Registry, builtin};
use crate::storage::store::{Store, Target, now_rfc3339};

/// The kubelet's default `maxPods` (pkg/kubelet/apis/config/v1beta1/defaults.go).
const MAX_PODS: u32 = 110;

/// Registers the Node (or refreshes the one registered before) and returns its name.
pub(crate) fn register(store: &Store, registry: &Registry) -> String {
    let nodes = builtin(registry, "", "nodes");
    let name = node_name();
    if store.get(&nodes, "", &name).is_err() {
        let created = store.create(
            &nodes,
            "",
            json!({"metadata": {"name": name, "labels": labels(&name), "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            }}, "spec": {}}),
        );
        if let Err(error) = created {
            tracing::warn!(%error, "cannot register the Node");
        }
    }
    let status = status(&name);
    let written = store.modify(&nodes, "", &name, Target::Status, |old, _| {
        let mut new = old.clone();
        new["status"] = status.clone();
        Ok(new)
    });
    if let Err(error) = written {
        tracing::warn!(%error, "cannot write the Node's status");
    }
    if let Err(error) = write_lease(store, registry, &name) {
        tracing::warn!(%error, "cannot write the Node's Lease");
    }
    name
}

/// The namespace of the Nodes' Leases (k8s.io/api/core/v1, `NamespaceNodeLease`).
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The Node's Lease, renewed now (k8s.io/component-helpers/apimachinery/lease/controller.go,
/// `newLease`: named after the Node, held by it, 40 s long, owned by the Node).
fn write_lease(store: &Store, registry: &Registry, name: &str) -> crate::api::error::Result<()> {
    let namespaces = builtin(registry, "", "namespaces");
    if store.get(&namespaces, "", LEASE_NAMESPACE).is_err() {
        store.create(
            &namespaces,
            "",
            json!({"metadata": {"name": LEASE_NAMESPACE}}),
        )?;
    }
    let node = store.get(&builtin(registry, "", "nodes"), "", name)?;
    let leases = builtin(registry, "coordination.k8s.io", "leases");
    let renewed = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let lease = json!({
        "metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.uid()},
        ]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renewed},
    });
    store
        .update(&leases, LEASE_NAMESPACE, name, lease.clone(), Target::Main)
        .or_else(|_| store.create(&leases, LEASE_NAMESPACE, lease))?;
    Ok(())
}

/// The machine's host name, lowercased, as the kubelet names its Node
/// (k8s.io/component-helpers/node/util/hostname.go, `GetHostname`); `localhost` when it is not
/// a valid Node name.
fn node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim().to_lowercase();
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|part| !part.is_empty() && part.len() <= 63 && dns_label(part));
    if valid { host } else { "localhost".into() }
}

fn dns_label(part: &str) -> bool {
    part.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

/// Go's name of this machine's architecture (`GOARCH`), as the labels and `nodeInfo` give it.
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// pkg/kubelet/kubelet_node_status.go, `initialNode`: the hostname, OS and architecture labels.
fn labels(name: &str) -> Value {
    json!({
        "beta.kubernetes.io/arch": architecture(),
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": architecture(),
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    })
}

fn status(name: &str) -> Value {
    let capacity = capacity();
    let now = now_rfc3339();
    // pkg/kubelet/nodestatus/setters.go: the pressure conditions and Ready, with their reasons
    // and messages.
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": node_info(),
    })
}

/// The machine's resources, as the kubelet's cAdvisor reports them.
fn capacity() -> Value {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory_kib = meminfo_total_kib().unwrap_or(0);
    let storage_kib = filesystem_kib(&std::env::temp_dir()).unwrap_or(0);
    json!({
        "cpu": cores.to_string(),
        "memory": format!("{memory_kib}Ki"),
        "ephemeral-storage": format!("{storage_kib}Ki"),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "pods": MAX_PODS.to_string(),
    })
}

/// `MemTotal` of /proc/meminfo, in KiB.
fn meminfo_total_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The size of the file system holding `path`, in KiB.
fn filesystem_kib(path: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(path).ok()?;
    Some(stats.f_blocks.saturating_mul(stats.f_frsize) / 1024)
}

fn first_line(path: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_default()
}

/// The OS image: `PRETTY_NAME` of /etc/os-release, as the kubelet's cAdvisor reads it.
fn os_image() -> String {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

/// `status.nodeInfo` (pkg/kubelet/nodestatus/setters.go, `MachineInfo`, `VersionInfo`).
fn node_info() -> Value {
    json!({
        "machineID": first_line("/etc/machine-id"),
        "systemUUID": first_line("/sys/class/dmi/id/product_uuid"),
        "bootID": first_line("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": first_line("/proc/sys/kernel/osrelease"),
        "osImage": os_image(),
        "containerRuntimeVersion": concat!("local-process://", env!("CARGO_PKG_VERSION")),
        "kubeletVersion": crate::api::GIT_VERSION,
        // Deprecated, and no longer set by the kubelet, but a required (empty) string.
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": architecture(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_valid_dns_subdomains() {
        let name = node_name();
        assert!(!name.is_empty() && name == name.to_lowercase(), "{name}");
        assert!(dns_label("box-1") && !dns_label("-box") && !dns_label("Box"));
    }

    #[test]
    fn registering_again_keeps_what_users_set_and_refreshes_the_status() {
        let (store, registry) = (Store::new(Default::default()), Registry::with_builtins());
        let nodes = builtin(&registry, "", "nodes");
        let name = register(&store, &registry);
        store
            .modify(&nodes, "", &name, Target::Main, |old, _| {
                let mut new = old.clone();
                new["metadata"]["labels"]["disk"] = json!("ssd");
                new["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
                new["status"] = json!({});
                Ok(new)
            })
            .unwrap();
        assert_eq!(register(&store, &registry), name);
        let (all, _) = store.list(&nodes.group_resource(), None);
        assert_eq!(all.len(), 1);
        let node = &all[0].value;
        assert_eq!(node["metadata"]["labels"]["disk"], "ssd");
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"],
            name.as_str()
        );
        assert_eq!(node["spec"]["taints"][0]["key"], "k");
        assert_eq!(node["status"]["allocatable"]["pods"], "110");
        assert_eq!(node["status"]["conditions"][3]["type"], "Ready");
        let leases = builtin(&registry, "coordination.k8s.io", "leases");
        let lease = store.get(&leases, LEASE_NAMESPACE, &name).unwrap();
        assert_eq!(lease.value["spec"]["holderIdentity"], name.as_str());
        assert_eq!(
            lease.value["metadata"]["ownerReferences"][0]["uid"],
            node["metadata"]["uid"]
        );
    }

    #[test]
    fn capacity_is_the_machines() {
        let capacity = capacity();
        assert!(capacity["cpu"].as_str().unwrap().parse::<u32>().unwrap() >= 1);
        assert!(capacity["memory"].as_str().unwrap().ends_with("Ki"));
        assert_ne!(capacity["memory"], "0Ki");
        assert_eq!(capacity["pods"], "110");
    }
}
