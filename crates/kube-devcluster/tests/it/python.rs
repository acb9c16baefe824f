//! The official Python client (`kubernetes`, in `.venv/`) against the embedded control plane:
//! create a custom object, list it with a label selector, watch it, and patch its status, as a
//! Kopf-style Python operator does. Skipped, saying so, only when the machine has no Python.

use crate::support;

use kube_devcluster::testing;

/// The client's side of the test; prints one JSON line of what it saw, checked by the Rust side.
const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
api = client.CustomObjectsApi()
group, version, plural, ns = "test.example.com", "v1", "widgets", "default"

def widget(name, team):
    return {"apiVersion": "test.example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "labels": {"team": team}}, "spec": {"color": "red"}}

created = api.create_namespaced_custom_object(group, version, ns, plural, widget("w1", "a"))
api.create_namespaced_custom_object(group, version, ns, plural, widget("w2", "b"))

listed = api.list_namespaced_custom_object(group, version, ns, plural, label_selector="team=a")
names = [item["metadata"]["name"] for item in listed["items"]]

patched = api.patch_namespaced_custom_object_status(
    group, version, ns, plural, "w1", {"status": {"phase": "Ready"}})

events = []
w = watch.Watch()
for event in w.stream(api.list_namespaced_custom_object, group, version, ns, plural,
                      label_selector="team=a", timeout_seconds=10):
    obj = event["object"]
    events.append([event["type"], obj["metadata"]["name"], obj.get("status", {}).get("phase")])
    if len(events) == 1:
        api.patch_namespaced_custom_object(group, version, ns, plural, "w1",
                                           {"metadata": {"labels": {"team": "c"}}})
    if len(events) == 2:
        w.stop()

try:
    api.create_namespaced_custom_object(group, version, ns, plural, widget("w1", "a"))
    conflict = None
except client.exceptions.ApiException as e:
    conflict = [e.status, json.loads(e.body)["reason"]]

print(json.dumps({
    "default": created["spec"].get("size"),
    "listed": names,
    "patched_phase": patched["status"]["phase"],
    "patched_spec": patched["spec"],
    "events": events,
    "conflict": conflict,
}))
"#;

#[tokio::test]
async fn python_client_creates_lists_watches_and_patches_status_of_custom_objects() {
    if testing::require_tools("python_client").is_none() {
        return;
    }
    let cluster = testing::start().await;
    support::install_widget_crd(&cluster).await;
    let seen = support::python(&cluster, SCRIPT).await;
    assert_eq!(seen["default"], 3, "the schema default is applied");
    assert_eq!(seen["listed"], serde_json::json!(["w1"]));
    assert_eq!(seen["patched_phase"], "Ready");
    assert_eq!(seen["patched_spec"]["color"], "red");
    // The watch lists w1 (team=a) and reports it DELETED when relabelled out of the selection.
    assert_eq!(
        seen["events"],
        serde_json::json!([["ADDED", "w1", "Ready"], ["DELETED", "w1", "Ready"]])
    );
    assert_eq!(seen["conflict"], serde_json::json!([409, "AlreadyExists"]));
}
