//! Server-side printing: objects rendered as a `meta.k8s.io/v1` `Table`, which is what kubectl asks
//! for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) when it prints `kubectl get`.
//! Custom resources get their CRD's `additionalPrinterColumns` (evaluated as the simple JSONPath
//! the real server allows); built-in kinds get the columns the real server prints for them
//! (Pods, Jobs, Namespaces, Services, Deployments, ConfigMaps, Events, ...), and everything else
//! `NAME` and `AGE`. The server calls [`table`] for get, list and each watch event.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::api::resources::ResourceInfo;
use crate::storage::selector::LabelSelector;
use crate::storage::store::StoredObject;

use super::partial_metadata;
use super::pod_row::pod_row;

/// What each row carries besides its cells (`?includeObject=`): nothing, the object's metadata
/// as a `PartialObjectMetadata` (the default), or the whole object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// One column: its header and how a cell is computed.
struct Column {
    name: &'static str,
    type_: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
    cell: fn(&Value, DateTime<Utc>) -> Value,
}

/// A Table of `items`, with `metadata` (resourceVersion, continue) as given; column definitions
/// are left out when `with_columns` is false (watch events after the first).
pub fn table(
    info: &ResourceInfo,
    items: &[Arc<StoredObject>],
    include: IncludeObject,
    metadata: Value,
    with_columns: bool,
) -> Value {
    let now = Utc::now();
    let (definitions, rows): (Vec<Value>, Vec<Value>) = if info.printer_columns.is_empty()
        && info.schema.is_none()
    {
        let columns = builtin_columns(info);
        let definitions = columns
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
            })
            .collect();
        let rows = items
            .iter()
            .map(|item| {
                let cells: Vec<Value> =
                    columns.iter().map(|c| (c.cell)(&item.value, now)).collect();
                row(cells, item, include)
            })
            .collect();
        (definitions, rows)
    } else {
        let columns = custom_columns(info);
        let mut definitions = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
        ];
        definitions.extend(columns.iter().map(|c| {
            json!({
                "name": c.get("name").cloned().unwrap_or_default(),
                "type": c.get("type").cloned().unwrap_or(json!("string")),
                "format": c.get("format").cloned().unwrap_or(json!("")),
                "description": c.get("description").cloned().unwrap_or(json!("")),
                "priority": c.get("priority").cloned().unwrap_or(json!(0)),
            })
        }));
        let rows = items
            .iter()
            .map(|item| {
                let mut cells = vec![name(&item.value, now)];
                cells.extend(columns.iter().map(|c| custom_cell(c, &item.value, now)));
                row(cells, item, include)
            })
            .collect();
        (definitions, rows)
    };
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if with_columns {
        table["columnDefinitions"] = json!(definitions);
    }
    table
}

fn row(cells: Vec<Value>, item: &StoredObject, include: IncludeObject) -> Value {
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => row["object"] = partial_metadata(item),
        IncludeObject::Object => row["object"] = item.value.clone(),
    }
    row
}

/// A CRD's printer columns; a CRD without any prints its age, as the real server does.
fn custom_columns(info: &ResourceInfo) -> Vec<Value> {
    if info.printer_columns.is_empty() {
        vec![json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})]
    } else {
        info.printer_columns.clone()
    }
}

fn custom_cell(column: &Value, obj: &Value, now: DateTime<Utc>) -> Value {
    let path = column
        .get("jsonPath")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(value) = json_path(obj, path).into_iter().next() else {
        return Value::Null;
    };
    match column.get("type").and_then(Value::as_str) {
        Some("date") => match value.as_str() {
            Some(timestamp) => json!(age_of(timestamp, now)),
            None => Value::Null,
        },
        Some("integer" | "number" | "boolean") if !value.is_string() => value.clone(),
        _ => json!(go_text(value)),
    }
}

/// A value as Go's `fmt.Fprint` prints what a JSONPath finds: strings bare, lists `[a b]`.
fn go_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_text).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_text(v)))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
        other => other.to_string(),
    }
}

/// Evaluates the simple JSONPath of printer columns: `.a.b`, `.a[0]`, `.a[*].b`, `.a['x.y']`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut current = vec![obj];
    let mut rest = path;
    while !rest.is_empty() {
        let (step, remaining) = if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            (Step::Field(&after[..end]), &after[end..])
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return Vec::new();
            };
            let inner = after[..end].trim();
            let step = if inner == "*" {
                Step::All
            } else if let Ok(index) = inner.parse::<i64>() {
                Step::Index(index)
            } else {
                Step::Field(inner.trim_matches(['\'', '"']))
            };
            (step, &after[end + 1..])
        } else {
            return Vec::new();
        };
        current = current.into_iter().flat_map(|v| step.apply(v)).collect();
        rest = remaining;
    }
    current
}

enum Step<'p> {
    Field(&'p str),
    Index(i64),
    All,
}

impl Step<'_> {
    fn apply<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        match (self, value) {
            (Step::Field(""), v) => vec![v],
            (Step::Field("*") | Step::All, Value::Object(map)) => map.values().collect(),
            (Step::Field(key), Value::Object(map)) => map.get(*key).into_iter().collect(),
            (Step::Index(i), Value::Array(items)) => {
                let index = if *i < 0 { items.len() as i64 + i } else { *i };
                usize::try_from(index)
                    .ok()
                    .and_then(|i| items.get(i))
                    .into_iter()
                    .collect()
            }
            (Step::All, Value::Array(items)) => items.iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// How long ago an RFC 3339 timestamp was, as kubectl's AGE column says it.
pub fn age_of(timestamp: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(timestamp) {
        Ok(t) => human_duration((now - t.with_timezone(&Utc)).num_seconds()),
        Err(_) => "<invalid>".into(),
    }
}

/// Kubernetes' `duration.HumanDuration`: `45s`, `3m20s`, `25m`, `5h10m`, `3d4h`, `400d`, `2y10d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn name(obj: &Value, _: DateTime<Utc>) -> Value {
    json!(text(obj, "/metadata/name"))
}

fn age(obj: &Value, now: DateTime<Utc>) -> Value {
    json!(age_of(text(obj, "/metadata/creationTimestamp"), now))
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

fn pod_ready(pod: &Value, _: DateTime<Utc>) -> Value {
    json!(pod_row(pod).ready)
}

/// The STATUS column of `kubectl get pods` ([`pod_row`]).
fn pod_status(pod: &Value, _: DateTime<Utc>) -> Value {
    json!(pod_row(pod).status)
}

/// The restarts of the pod's containers ([`pod_row`]), with how long ago the last one ended
/// when there were any (`printPod`: `"%d (%s ago)"`).
fn pod_restarts(pod: &Value, now: DateTime<Utc>) -> Value {
    let restarts = pod_row(pod).restarts;
    match restarts.last {
        Some(at) if restarts.count != 0 => json!(format!(
            "{} ({} ago)",
            restarts.count,
            human_duration((now - at).num_seconds())
        )),
        _ => json!(restarts.count.to_string()),
    }
}

fn pod_nominated_node(pod: &Value, _: DateTime<Utc>) -> Value {
    match text(pod, "/status/nominatedNodeName") {
        "" => json!("<none>"),
        node => json!(node),
    }
}

/// `<none>` without readiness gates, else how many of them are met (`printPod`).
fn pod_readiness_gates(pod: &Value, _: DateTime<Utc>) -> Value {
    let gates: Vec<&str> = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .map(|g| g.iter().map(|g| text(g, "/conditionType")).collect())
        .unwrap_or_default();
    if gates.is_empty() {
        return json!("<none>");
    }
    let met = gates
        .iter()
        .filter(|gate| {
            pod.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| text(c, "/type") == **gate && text(c, "/status") == "True")
                })
        })
        .count();
    json!(format!("{met}/{}", gates.len()))
}

fn pod_ip(pod: &Value, _: DateTime<Utc>) -> Value {
    match text(pod, "/status/podIP") {
        "" => json!("<none>"),
        ip => json!(ip),
    }
}

fn pod_node(pod: &Value, _: DateTime<Utc>) -> Value {
    match text(pod, "/spec/nodeName") {
        "" => json!("<none>"),
        node => json!(node),
    }
}

/// The STATUS column of `kubectl get jobs` (Kubernetes 1.31 and later).
/// pkg/printers/internalversion/printers.go, `printNode`: `Ready` or `NotReady` from the Ready
/// condition (`Unknown` without one), then `SchedulingDisabled` when cordoned.
fn node_status(node: &Value, _: DateTime<Utc>) -> Value {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| text(c, "/type") == "Ready"))
        .map(|c| text(c, "/status"));
    let mut status = vec![match ready {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    json!(status.join(","))
}

/// `findNodeRoles`: the `node-role.kubernetes.io/ROLE` labels and `kubernetes.io/role`.
fn node_roles(node: &Value, _: DateTime<Utc>) -> Value {
    let mut roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(
                    |(key, value)| match key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role) => Some(role),
                        None if key == "kubernetes.io/role" => value.as_str(),
                        None => None,
                    },
                )
                .filter(|role| !role.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    match roles.is_empty() {
        true => json!("<none>"),
        false => json!(roles.join(",")),
    }
}

fn node_address(node: &Value, type_: &str) -> Value {
    let found = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| text(a, "/type") == type_))
        .map(|a| text(a, "/address"));
    json!(found.unwrap_or("<none>"))
}

fn node_internal_ip(node: &Value, _: DateTime<Utc>) -> Value {
    node_address(node, "InternalIP")
}

fn node_external_ip(node: &Value, _: DateTime<Utc>) -> Value {
    node_address(node, "ExternalIP")
}

fn node_info(node: &Value, field: &str) -> Value {
    json!(text(node, &format!("/status/nodeInfo/{field}")))
}

fn node_version(node: &Value, _: DateTime<Utc>) -> Value {
    node_info(node, "kubeletVersion")
}

fn node_os_image(node: &Value, _: DateTime<Utc>) -> Value {
    node_info(node, "osImage")
}

fn node_kernel(node: &Value, _: DateTime<Utc>) -> Value {
    node_info(node, "kernelVersion")
}

fn node_runtime(node: &Value, _: DateTime<Utc>) -> Value {
    node_info(node, "containerRuntimeVersion")
}

fn job_status(job: &Value, _: DateTime<Utc>) -> Value {
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    json!(status)
}

fn job_completions(job: &Value, _: DateTime<Utc>) -> Value {
    let succeeded = int(job, "/status/succeeded");
    match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => json!(format!("{succeeded}/{completions}")),
        None => match job.pointer("/spec/parallelism").and_then(Value::as_i64) {
            Some(p) if p > 1 => json!(format!("{succeeded}/1 of {p}")),
            _ => json!(format!("{succeeded}/1")),
        },
    }
}

fn job_duration(job: &Value, now: DateTime<Utc>) -> Value {
    let parse = |pointer: &str| {
        DateTime::parse_from_rfc3339(text(job, pointer))
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    match (parse("/status/startTime"), parse("/status/completionTime")) {
        (Some(start), Some(end)) => json!(human_duration((end - start).num_seconds())),
        (Some(start), None) => json!(human_duration((now - start).num_seconds())),
        _ => json!(""),
    }
}

/// A field of each container of a workload's pod template, joined by commas (`printJob`,
/// `printDeployment`: `layoutContainerCells`).
fn template_containers(obj: &Value, field: &str) -> Value {
    let values: Vec<&str> = obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|c| c.iter().map(|c| text(c, field)).collect())
        .unwrap_or_default();
    json!(values.join(","))
}

fn template_container_names(obj: &Value, _: DateTime<Utc>) -> Value {
    template_containers(obj, "/name")
}

fn template_images(obj: &Value, _: DateTime<Utc>) -> Value {
    template_containers(obj, "/image")
}

/// `metav1.FormatLabelSelector` of the workload's selector: `<none>` when it selects by
/// nothing, `<error>` for an operator it does not know.
fn selector(obj: &Value, _: DateTime<Utc>) -> Value {
    let selector = obj.pointer("/spec/selector").unwrap_or(&Value::Null);
    json!(
        match LabelSelector::from_object(selector).map(|s| s.to_go_string()) {
            None => "<error>".to_string(),
            Some(text) if text.is_empty() => "<none>".to_string(),
            Some(text) => text,
        }
    )
}

// A Service's columns: pkg/printers/internalversion/printers.go `printService`, with the
// server's options (`Wide`, as the API server's table convertor generates every column).

fn service_type(service: &Value, _: DateTime<Utc>) -> Value {
    json!(text(service, "/spec/type"))
}

fn service_cluster_ip(service: &Value, _: DateTime<Utc>) -> Value {
    match service
        .pointer("/spec/clusterIPs/0")
        .and_then(Value::as_str)
    {
        Some(ip) => json!(ip),
        None => json!("<none>"),
    }
}

/// The strings of the list at `pointer`.
fn strings<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a str> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `getServiceExternalIP`: the external IPs; a load balancer's ingress points first (sorted,
/// `loadBalancerStatusStringer`), `<pending>` while it has none; an external name's name.
fn service_external_ip(service: &Value, _: DateTime<Utc>) -> Value {
    let external = strings(service, "/spec/externalIPs");
    let shown = match text(service, "/spec/type") {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut points: Vec<&str> = service
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|ingress| {
                    [text(ingress, "/ip"), text(ingress, "/hostname")]
                        .into_iter()
                        .find(|point| !point.is_empty())
                })
                .collect();
            points.sort_unstable();
            points.dedup();
            points.extend(external);
            if points.is_empty() {
                "<pending>".to_string()
            } else {
                points.join(",")
            }
        }
        "ExternalName" => text(service, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    json!(shown)
}

/// `makePortString`: `port/protocol`, or `port:nodePort/protocol`, `<none>` without ports.
fn service_ports(service: &Value, _: DateTime<Utc>) -> Value {
    let ports: Vec<String> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|port| {
            let protocol = text(port, "/protocol");
            match (int(port, "/port"), int(port, "/nodePort")) {
                (number, node) if node > 0 => format!("{number}:{node}/{protocol}"),
                (number, _) => format!("{number}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        json!("<none>")
    } else {
        json!(ports.join(","))
    }
}

/// `labels.FormatLabels` of the selector: `key=value` sorted by key, `<none>` when empty.
fn service_selector(service: &Value, _: DateTime<Utc>) -> Value {
    let pairs: Vec<String> = service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        json!("<none>")
    } else {
        json!(pairs.join(","))
    }
}

fn phase(obj: &Value, _: DateTime<Utc>) -> Value {
    json!(text(obj, "/status/phase"))
}

fn data_count(obj: &Value, _: DateTime<Utc>) -> Value {
    let count = |key: &str| {
        obj.get(key)
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
    };
    json!(count("data") + count("binaryData"))
}

fn deployment_ready(d: &Value, _: DateTime<Utc>) -> Value {
    json!(format!(
        "{}/{}",
        int(d, "/status/readyReplicas"),
        d.pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
    ))
}

fn deployment_updated(d: &Value, _: DateTime<Utc>) -> Value {
    json!(int(d, "/status/updatedReplicas"))
}

fn deployment_available(d: &Value, _: DateTime<Utc>) -> Value {
    json!(int(d, "/status/availableReplicas"))
}

fn event_last_seen(ev: &Value, now: DateTime<Utc>) -> Value {
    let when = [
        "/lastTimestamp",
        "/eventTime",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .into_iter()
    .map(|p| text(ev, p))
    .find(|t| !t.is_empty())
    .unwrap_or_default();
    json!(age_of(when, now))
}

fn event_type(ev: &Value, _: DateTime<Utc>) -> Value {
    json!(text(ev, "/type"))
}

fn event_reason(ev: &Value, _: DateTime<Utc>) -> Value {
    json!(text(ev, "/reason"))
}

fn event_object(ev: &Value, _: DateTime<Utc>) -> Value {
    let object = ev.get("involvedObject").or_else(|| ev.get("regarding"));
    let object = object.unwrap_or(&Value::Null);
    json!(format!(
        "{}/{}",
        text(object, "/kind").to_lowercase(),
        text(object, "/name")
    ))
}

fn event_message(ev: &Value, _: DateTime<Utc>) -> Value {
    match text(ev, "/message") {
        "" => json!(text(ev, "/note")),
        message => json!(message.trim()),
    }
}

/// A claim's phase, `Terminating` while it is being deleted (pkg/printers/internalversion
/// printers.go, `printPersistentVolumeClaim`, as every cell of a claim below).
fn claim_status(claim: &Value, _: DateTime<Utc>) -> Value {
    if deleting(claim) {
        return json!("Terminating");
    }
    json!(text(claim, "/status/phase"))
}

fn claim_volume(claim: &Value, _: DateTime<Utc>) -> Value {
    json!(text(claim, "/spec/volumeName"))
}

/// Shown only once the claim names its volume.
fn claim_capacity(claim: &Value, _: DateTime<Utc>) -> Value {
    if text(claim, "/spec/volumeName").is_empty() {
        return json!("");
    }
    json!(text(claim, "/status/capacity/storage"))
}

/// `GetAccessModesAsString`: the abbreviations, in this fixed order, of the modes present.
fn claim_access_modes(claim: &Value, _: DateTime<Utc>) -> Value {
    if text(claim, "/spec/volumeName").is_empty() {
        return json!("");
    }
    let modes: Vec<&str> = claim
        .pointer("/status/accessModes")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shown: Vec<&str> = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| short)
    .collect();
    json!(shown.join(","))
}

/// `GetPersistentVolumeClaimClass`: the beta annotation first, else `spec.storageClassName`.
fn claim_storage_class(claim: &Value, _: DateTime<Utc>) -> Value {
    match text(
        claim,
        "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
    ) {
        "" => json!(text(claim, "/spec/storageClassName")),
        class => json!(class),
    }
}

fn claim_attributes_class(claim: &Value, _: DateTime<Utc>) -> Value {
    match text(claim, "/spec/volumeAttributesClassName") {
        "" => json!("<unset>"),
        class => json!(class),
    }
}

fn claim_volume_mode(claim: &Value, _: DateTime<Utc>) -> Value {
    match text(claim, "/spec/volumeMode") {
        "" => json!("<unset>"),
        mode => json!(mode),
    }
}

fn secret_type(secret: &Value, _: DateTime<Utc>) -> Value {
    json!(text(secret, "/type"))
}

fn service_account_secrets(sa: &Value, _: DateTime<Utc>) -> Value {
    json!(
        sa.get("secrets")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    )
}

/// `Kind/name` of the role a binding grants (`printRoleBinding`).
fn binding_role(binding: &Value, _: DateTime<Utc>) -> Value {
    json!(format!(
        "{}/{}",
        text(binding, "/roleRef/kind"),
        text(binding, "/roleRef/name")
    ))
}

/// The subjects of a binding of one kind, joined by commas (`printRoleBinding`, wide).
fn binding_subjects(binding: &Value, kind: &str) -> Value {
    let names: Vec<String> = binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| text(s, "/kind") == kind)
        .map(|s| match (kind, text(s, "/namespace")) {
            ("ServiceAccount", ns) => format!("{ns}/{}", text(s, "/name")),
            _ => text(s, "/name").to_string(),
        })
        .collect();
    json!(names.join(", "))
}

fn binding_users(binding: &Value, _: DateTime<Utc>) -> Value {
    binding_subjects(binding, "User")
}

fn binding_groups(binding: &Value, _: DateTime<Utc>) -> Value {
    binding_subjects(binding, "Group")
}

fn binding_service_accounts(binding: &Value, _: DateTime<Utc>) -> Value {
    binding_subjects(binding, "ServiceAccount")
}

fn lease_holder(lease: &Value, _: DateTime<Utc>) -> Value {
    json!(text(lease, "/spec/holderIdentity"))
}

fn created_at(obj: &Value, _: DateTime<Utc>) -> Value {
    json!(text(obj, "/metadata/creationTimestamp"))
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace.";
const AGE_DESCRIPTION: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

fn column(name: &'static str, cell: fn(&Value, DateTime<Utc>) -> Value, priority: u8) -> Column {
    Column {
        name,
        type_: "string",
        format: if name == "Name" { "name" } else { "" },
        priority,
        description: match name {
            "Name" => NAME_DESCRIPTION,
            "Age" => AGE_DESCRIPTION,
            _ => "",
        },
        cell,
    }
}

fn builtin_columns(info: &ResourceInfo) -> Vec<Column> {
    let name_col = column("Name", name, 0);
    let age_col = column("Age", age, 0);
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "pods") => vec![
            name_col,
            column("Ready", pod_ready, 0),
            column("Status", pod_status, 0),
            column("Restarts", pod_restarts, 0),
            age_col,
            column("IP", pod_ip, 1),
            column("Node", pod_node, 1),
            column("Nominated Node", pod_nominated_node, 1),
            column("Readiness Gates", pod_readiness_gates, 1),
        ],
        ("batch", "jobs") => vec![
            name_col,
            column("Status", job_status, 0),
            column("Completions", job_completions, 0),
            column("Duration", job_duration, 0),
            age_col,
            column("Containers", template_container_names, 1),
            column("Images", template_images, 1),
            column("Selector", selector, 1),
        ],
        ("", "namespaces") => vec![name_col, column("Status", phase, 0), age_col],
        // pkg/printers/internalversion/printers.go, `nodeColumnDefinitions`.
        ("", "nodes") => vec![
            name_col,
            column("Status", node_status, 0),
            column("Roles", node_roles, 0),
            age_col,
            column("Version", node_version, 0),
            column("Internal-IP", node_internal_ip, 1),
            column("External-IP", node_external_ip, 1),
            column("OS-Image", node_os_image, 1),
            column("Kernel-Version", node_kernel, 1),
            column("Container-Runtime", node_runtime, 1),
        ],
        ("", "services") => vec![
            name_col,
            column("Type", service_type, 0),
            column("Cluster-IP", service_cluster_ip, 0),
            column("External-IP", service_external_ip, 0),
            column("Port(s)", service_ports, 0),
            age_col,
            column("Selector", service_selector, 1),
        ],
        ("", "persistentvolumeclaims") => vec![
            name_col,
            column("Status", claim_status, 0),
            column("Volume", claim_volume, 0),
            column("Capacity", claim_capacity, 0),
            column("Access Modes", claim_access_modes, 0),
            column("StorageClass", claim_storage_class, 0),
            column("VolumeAttributesClass", claim_attributes_class, 0),
            age_col,
            column("VolumeMode", claim_volume_mode, 1),
        ],
        _ => more_builtin_columns(info, name_col, age_col),
    }
}

/// [`builtin_columns`] of the configuration, RBAC, apps, events, leases and CRD kinds.
fn more_builtin_columns(info: &ResourceInfo, name_col: Column, age_col: Column) -> Vec<Column> {
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "configmaps") => vec![name_col, column("Data", data_count, 0), age_col],
        ("", "secrets") => vec![
            name_col,
            column("Type", secret_type, 0),
            column("Data", data_count, 0),
            age_col,
        ],
        ("", "serviceaccounts") => vec![
            name_col,
            Column {
                type_: "integer",
                ..column("Secrets", service_account_secrets, 0)
            },
            age_col,
        ],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => vec![
            name_col,
            Column {
                type_: "string",
                ..column("Created At", created_at, 0)
            },
        ],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => vec![
            name_col,
            column("Role", binding_role, 0),
            age_col,
            column("Users", binding_users, 1),
            column("Groups", binding_groups, 1),
            column("ServiceAccounts", binding_service_accounts, 1),
        ],
        ("apps", "deployments") => vec![
            name_col,
            column("Ready", deployment_ready, 0),
            Column {
                type_: "integer",
                ..column("Up-to-date", deployment_updated, 0)
            },
            Column {
                type_: "integer",
                ..column("Available", deployment_available, 0)
            },
            age_col,
            column("Containers", template_container_names, 1),
            column("Images", template_images, 1),
            column("Selector", selector, 1),
        ],
        ("" | "events.k8s.io", "events") => vec![
            column("Last Seen", event_last_seen, 0),
            column("Type", event_type, 0),
            column("Reason", event_reason, 0),
            column("Object", event_object, 0),
            column("Message", event_message, 0),
            Column {
                priority: 1,
                ..column("Name", name, 1)
            },
        ],
        ("coordination.k8s.io", "leases") => {
            vec![name_col, column("Holder", lease_holder, 0), age_col]
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name_col, column("Created At", created_at, 0)]
        }
        _ => vec![name_col, age_col],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::{Registry, crd_resource_info};

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (25 * 60, "25m"),
            (179 * 60, "179m"),
            (5 * 3600 + 600, "5h10m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (400 * 86400, "400d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (10 * 365 * 86400, "10y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}");
        }
    }

    #[test]
    fn json_path_finds_what_printer_columns_name() {
        let obj = json!({
            "status": {"workflow-status": "Started", "executed": ["a", "b"], "dotted.key": 1},
            "spec": {"containers": [{"stepName": "s0"}, {"stepName": "s1"}]}
        });
        let cases: Vec<(&str, Vec<Value>)> = vec![
            (".status.workflow-status", vec![json!("Started")]),
            (".status.executed", vec![json!(["a", "b"])]),
            (".status.executed[1]", vec![json!("b")]),
            (".status.executed[-1]", vec![json!("b")]),
            (
                ".spec.containers[*].stepName",
                vec![json!("s0"), json!("s1")],
            ),
            (".status['dotted.key']", vec![json!(1)]),
            ("{.status.missing}", vec![]),
            (".status.executed[7]", vec![]),
        ];
        for (path, want) in cases {
            let got: Vec<Value> = json_path(&obj, path).into_iter().cloned().collect();
            assert_eq!(got, want, "{path}");
        }
    }

    fn stored(value: Value) -> Arc<StoredObject> {
        let json = bytes::Bytes::from(serde_json::to_vec(&value).unwrap());
        Arc::new(StoredObject { value, json })
    }

    #[test]
    fn custom_resources_print_their_crds_columns() {
        let crd = json!({
            "spec": {"group": "x.io", "names": {"kind": "Thing", "plural": "things"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                    "additionalPrinterColumns": [
                        {"name": "Status", "type": "string", "jsonPath": ".status.workflow-status"},
                        {"name": "Steps", "type": "integer", "jsonPath": ".spec.steps"},
                        {"name": "Executed", "type": "string", "jsonPath": ".status.executed"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                    ]}]}
        });
        let info = crd_resource_info(&crd).unwrap();
        let created = (Utc::now() - chrono::Duration::seconds(30)).to_rfc3339();
        let item = stored(json!({
            "metadata": {"name": "wf", "creationTimestamp": created},
            "spec": {"steps": 3},
            "status": {"workflow-status": "Started", "executed": ["a", "b"]}
        }));
        let t = table(&info, &[item], IncludeObject::Metadata, json!({}), true);
        let headers: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(headers, ["Name", "Status", "Steps", "Executed", "Age"]);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "wf");
        assert_eq!(cells[1], "Started");
        assert_eq!(cells[2], 3);
        assert_eq!(cells[3], "[a b]");
        assert!(cells[4].as_str().unwrap().ends_with('s'), "{cells}");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn jobs_and_pods_print_status_columns() {
        let registry = Registry::with_builtins();
        let jobs = registry.lookup("batch", "v1", "jobs").unwrap();
        let job = stored(json!({
            "metadata": {"name": "j", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"completions": 1},
            "status": {"succeeded": 1, "startTime": "2020-01-01T00:00:00Z", "completionTime": "2020-01-01T00:00:05Z",
                "conditions": [{"type": "Complete", "status": "True"}]}
        }));
        let t = table(&jobs, &[job], IncludeObject::None, json!({}), true);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "j",
                "Complete",
                "1/1",
                "5s",
                t["rows"][0]["cells"][4],
                "",
                "",
                "<none>"
            ])
        );
        assert!(t["rows"][0].get("object").is_none());

        let pods = registry.lookup("", "v1", "pods").unwrap();
        let pod = stored(json!({
            "metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Failed", "containerStatuses": [{"ready": false, "restartCount": 2,
                "state": {"terminated": {"exitCode": 127, "reason": "Error"}}}]}
        }));
        let t = table(&pods, &[pod], IncludeObject::Object, json!({}), true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells[2], "Error");
        assert_eq!(cells[3], "2");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "p");
    }

    #[test]
    fn restarts_say_how_long_ago_the_last_run_ended() {
        let now = chrono::Utc::now();
        let ended = (now - chrono::Duration::seconds(68)).to_rfc3339();
        let pod = json!({"status": {"containerStatuses": [
            {"restartCount": 1, "lastState": {"terminated": {"finishedAt": ended}}},
            {"restartCount": 0},
        ]}});
        assert_eq!(pod_restarts(&pod, now), "1 (68s ago)");
        assert_eq!(pod_restarts(&json!({}), now), "0");
    }
}
