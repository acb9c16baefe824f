//! Resource amounts as the scheduler counts them: a pod's requests and a Node's allocatable, in
//! milli-units for `cpu` and whole units for everything else (k8s.io/apimachinery
//! pkg/api/resource/quantity.go: `MilliValue`, `Value`, both rounding up).

use std::collections::BTreeMap;

use serde_json::Value;

/// Amounts by resource name (`cpu` in millicores, the rest in units: bytes, pods, devices).
pub(crate) type Amounts = BTreeMap<String, i64>;

/// A quantity's value in the unit the scheduler counts `resource` in; `None` when it does not
/// parse (the API server's validation refuses such a pod).
pub(crate) fn amount(resource: &str, quantity: &Value) -> Option<i64> {
    let value = match quantity {
        Value::String(text) => kube_schema_check::quantity::value(text)?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    let scaled = if resource == "cpu" {
        value * 1000.0
    } else {
        value
    };
    Some(scaled.ceil() as i64)
}

/// One container's requests: `resources.requests`, and where a resource has only a limit, the
/// limit (pkg/apis/core/v1/defaults.go, `SetDefaults_Pod`: requests default to limits).
fn container_requests(container: &Value) -> Amounts {
    let mut out = Amounts::new();
    for field in ["limits", "requests"] {
        let Some(map) = container
            .pointer(&format!("/resources/{field}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (resource, quantity) in map {
            if let Some(value) = amount(resource, quantity) {
                out.insert(resource.clone(), value);
            }
        }
    }
    out
}

fn add(total: &mut Amounts, more: &Amounts) {
    for (resource, value) in more {
        *total.entry(resource.clone()).or_default() += value;
    }
}

fn max_into(total: &mut Amounts, other: &Amounts) {
    for (resource, value) in other {
        let entry = total.entry(resource.clone()).or_default();
        *entry = (*entry).max(*value);
    }
}

/// What a pod requests of its node: the sum of its containers' requests, or more if an init
/// container needs more while it runs (with the sidecars started before it beside it), plus
/// the pod's `overhead` (k8s.io/component-helpers/resource/helpers.go, `PodRequests`).
pub(crate) fn pod_requests(pod: &Value) -> Amounts {
    let list = |field: &str| {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut total = Amounts::new();
    for container in &list("containers") {
        add(&mut total, &container_requests(container));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for init in &list("initContainers") {
        let requests = container_requests(init);
        let mut running = sidecars.clone();
        add(&mut running, &requests);
        if init.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut sidecars, &requests);
        }
        max_into(&mut init_peak, &running);
    }
    add(&mut total, &sidecars);
    max_into(&mut total, &init_peak);
    if let Some(overhead) = pod.pointer("/spec/overhead").and_then(Value::as_object) {
        for (resource, quantity) in overhead {
            if let Some(value) = amount(resource, quantity) {
                *total.entry(resource.clone()).or_default() += value;
            }
        }
    }
    total
}

/// A Node's `status.allocatable`, counted as [`pod_requests`] are.
pub(crate) fn allocatable(node: &Value) -> Amounts {
    node.pointer("/status/allocatable")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(resource, quantity)| {
                    Some((resource.clone(), amount(resource, quantity)?))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_in_the_units_the_scheduler_counts() {
        assert_eq!(amount("cpu", &json!("500m")), Some(500));
        assert_eq!(amount("cpu", &json!("2")), Some(2000));
        assert_eq!(amount("cpu", &json!("0.1")), Some(100));
        assert_eq!(amount("cpu", &json!(3)), Some(3000));
        assert_eq!(amount("memory", &json!("1Gi")), Some(1 << 30));
        assert_eq!(amount("memory", &json!("1G")), Some(1_000_000_000));
        assert_eq!(amount("memory", &json!("1e3")), Some(1000));
        assert_eq!(amount("memory", &json!("12345Ki")), Some(12345 * 1024));
        assert_eq!(amount("memory", &json!("lots")), None);
    }

    #[test]
    fn a_pods_requests_count_limits_init_containers_sidecars_and_overhead() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "100m"}}},
                {"resources": {"limits": {"cpu": "200m", "memory": "1Mi"}}},
            ],
            "initContainers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
            ],
            "overhead": {"cpu": "10m"},
        }});
        let requests = pod_requests(&pod);
        // max(100 + 200 + 50 sidecar, 1000 init) + 10 overhead.
        assert_eq!(requests["cpu"], 1010);
        assert_eq!(requests["memory"], 1 << 20);
    }
}
