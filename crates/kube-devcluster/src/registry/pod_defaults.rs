//! The defaults the API server writes into pod specs as it decodes every write of a Pod, or of
//! a Job or Deployment with its pod template (k8s.io/kubernetes pkg/apis/core/v1/defaults.go,
//! pkg/apis/apps/v1/defaults.go; the list for templates is pinned by that package's
//! `TestWorkloadDefaults`, for Pods by `TestPodDefaults`), so what a client reads back is what a
//! cluster would show, and a controller comparing its desired spec with the stored one sees the
//! same differences as on a cluster:
//!
//! - pod spec (`SetDefaults_PodSpec`): `dnsPolicy: ClusterFirst`, `restartPolicy: Always`,
//!   `schedulerName: default-scheduler`, `securityContext: {}`,
//!   `terminationGracePeriodSeconds: 30`; a Pod's also `enableServiceLinks: true` and each
//!   container's requests from its limits (`SetDefaults_Pod`, Pods only, not templates);
//! - every container (`SetDefaults_Container`): `imagePullPolicy` (`Always` for a `:latest` or
//!   untagged image, else `IfNotPresent`), `terminationMessagePath: /dev/termination-log`,
//!   `terminationMessagePolicy: File`; ports' `protocol: TCP`; an env `fieldRef`'s
//!   `apiVersion: v1`;
//! - volumes: `defaultMode: 420` of `configMap`, `secret`, `projected` and `downwardAPI`, a
//!   projected token's `expirationSeconds: 3600`, and a volume without a source an `emptyDir`;
//! - a Deployment (`SetDefaults_Deployment`): `replicas: 1`, a `RollingUpdate` strategy of 25%
//!   and 25%, `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600`.
//!
//! Probes' and lifecycle handlers' defaults are left out: the kubelet here runs no lifecycle
//! handler and fills a readiness probe's defaults where it runs one (`kubelet::prober`).

use serde_json::{Map, Value, json};

/// Where a container's termination message file is when it does not say
/// (`TerminationMessagePathDefault`, k8s.io/api core/v1/types.go).
pub const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// The defaults of a write of a Pod.
pub fn pod(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec") {
        pod_spec(spec);
        if let Some(spec) = spec.as_object_mut() {
            pod_only(spec);
        }
    }
}

/// The defaults of a write of a Deployment: its own and its pod template's.
pub fn deployment_and_template(obj: &mut Value) {
    deployment(obj);
    template(obj);
}

/// The defaults of the pod template of a workload (a Job's).
pub fn template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        pod_spec(spec);
    }
}

/// Sets `field` to `value` when it is absent, null or an empty string (Go's zero values).
pub(super) fn default(map: &mut Map<String, Value>, field: &str, value: Value) {
    let unset = match map.get(field) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if unset {
        map.insert(field.into(), value);
    }
}

fn pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "securityContext", json!({}));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in objects(spec, list) {
            container_defaults(container);
        }
    }
    for volume in objects(spec, "volumes") {
        volume_defaults(volume);
    }
}

/// The objects of the list `field` of `map`.
pub(super) fn objects<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn container_defaults(container: &mut Map<String, Value>) {
    let policy = image_pull_policy(container.get("image").and_then(Value::as_str));
    default(container, "imagePullPolicy", json!(policy));
    default(
        container,
        "terminationMessagePath",
        json!(TERMINATION_MESSAGE_PATH),
    );
    default(container, "terminationMessagePolicy", json!("File"));
    for port in objects(container, "ports") {
        default(port, "protocol", json!("TCP"));
    }
    for env in objects(container, "env") {
        if let Some(field_ref) = env
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            default(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// `SetDefaults_Container`: `Always` when the image's tag is `latest`, which an image with
/// neither tag nor digest has (k8s.io/kubernetes pkg/util/parsers `ParseImageName`), else
/// `IfNotPresent`.
fn image_pull_policy(image: Option<&str>) -> &'static str {
    let Some(image) = image.filter(|i| !i.is_empty()) else {
        return "IfNotPresent";
    };
    let (name, digested) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    // A tag follows the last `:` after the last `/` (a registry's port comes before it).
    let last_part = name.rsplit('/').next().unwrap_or(name);
    let tag = last_part.split_once(':').map(|(_, tag)| tag);
    match tag {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if digested => "IfNotPresent",
        None => "Always",
    }
}

/// The volume sources with their own defaults (`SetDefaults_Volume` and the sources').
const SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn volume_defaults(volume: &mut Map<String, Value>) {
    if !SOURCES.iter().any(|s| volume.contains_key(*s)) {
        volume.insert("emptyDir".into(), json!({}));
    }
    for source in ["configMap", "secret", "downwardAPI", "projected"] {
        if let Some(map) = volume.get_mut(source).and_then(Value::as_object_mut) {
            default(map, "defaultMode", json!(420));
        }
    }
    if let Some(hostpath) = volume.get_mut("hostPath").and_then(Value::as_object_mut) {
        default(hostpath, "type", json!(""));
    }
    for item in volume
        .get_mut("downwardAPI")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|d| objects(d, "items"))
    {
        field_ref_version(item);
    }
    if let Some(projected) = volume.get_mut("projected").and_then(Value::as_object_mut) {
        for source in objects(projected, "sources") {
            if let Some(token) = source
                .get_mut("serviceAccountToken")
                .and_then(Value::as_object_mut)
            {
                default(token, "expirationSeconds", json!(3600));
            }
            for item in source
                .get_mut("downwardAPI")
                .and_then(Value::as_object_mut)
                .into_iter()
                .flat_map(|d| objects(d, "items"))
            {
                field_ref_version(item);
            }
        }
    }
}

fn field_ref_version(item: &mut Map<String, Value>) {
    if let Some(field_ref) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
        default(field_ref, "apiVersion", json!("v1"));
    }
}

/// `SetDefaults_Pod`: what a Pod gets and a template does not.
fn pod_only(spec: &mut Map<String, Value>) {
    default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        for container in objects(spec, list) {
            let Some(resources) = container
                .get_mut("resources")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = resources.entry("requests").or_insert_with(|| json!({}));
            if let Some(requests) = requests.as_object_mut() {
                for (name, quantity) in limits {
                    requests.entry(name).or_insert(quantity);
                }
            }
        }
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    let Some(strategy) = strategy.as_object_mut() else {
        return;
    };
    default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
        if let Some(rolling) = rolling.as_object_mut() {
            default(rolling, "maxUnavailable", json!("25%"));
            default(rolling, "maxSurge", json!("25%"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_images_tag() {
        for (image, policy) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("localhost:5000/busybox", "Always"),
            ("localhost:5000/busybox:1", "IfNotPresent"),
            ("busybox@sha256:abc", "IfNotPresent"),
            ("busybox:latest@sha256:abc", "Always"),
        ] {
            assert_eq!(image_pull_policy(Some(image)), policy, "{image}");
        }
    }

    #[test]
    fn a_templates_pod_spec_gets_no_pod_only_defaults() {
        let mut job = json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox:1", "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"cpu": "1"}}}],
            "volumes": [{"name": "v"}, {"name": "cm", "configMap": {"name": "x"}}],
        }}}});
        template(&mut job);
        let spec = &job["spec"]["template"]["spec"];
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert!(spec.get("enableServiceLinks").is_none());
        assert_eq!(spec["containers"][0]["ports"][0]["protocol"], "TCP");
        assert!(spec["containers"][0]["resources"].get("requests").is_none());
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], 420);
    }

    #[test]
    fn containers_get_the_api_servers_defaults() {
        let mut spec = json!({
            "containers": [{"name": "a"}, {"name": "b", "terminationMessagePath": "/tmp/out",
                            "terminationMessagePolicy": "FallbackToLogsOnError"},
                           {"name": "c", "terminationMessagePath": ""}],
            "initContainers": [{"name": "i"}],
        });
        pod_spec(&mut spec);
        let field = |list: &str, i: usize, f: &str| spec[list][i][f].clone();
        assert_eq!(
            field("containers", 0, "terminationMessagePath"),
            TERMINATION_MESSAGE_PATH
        );
        assert_eq!(field("containers", 0, "terminationMessagePolicy"), "File");
        assert_eq!(field("containers", 1, "terminationMessagePath"), "/tmp/out");
        assert_eq!(
            field("containers", 1, "terminationMessagePolicy"),
            "FallbackToLogsOnError"
        );
        assert_eq!(
            field("containers", 2, "terminationMessagePath"),
            TERMINATION_MESSAGE_PATH
        );
        assert_eq!(
            field("initContainers", 0, "terminationMessagePolicy"),
            "File"
        );
    }
}
