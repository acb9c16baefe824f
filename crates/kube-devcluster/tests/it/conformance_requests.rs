//! How the embedded control plane answers the options of a request as the real API server does,
//! driven by kubectl and the official Python client: `dryRun=All` on every mutating verb,
//! query parameters decoded as the server decodes them, `kubectl auth can-i` / `whoami`, the
//! namespaces that cannot be deleted, field selectors the server does not support, and updates
//! of custom objects without a resourceVersion.

use crate::support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::support::{raw, setup, widgets};

const W1: &str =
    "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  color: red\n";
const W1_BLUE: &str =
    "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  color: blue\n";
const W2: &str = "apiVersion: test.example.com/v1\nkind: Widget\nmetadata:\n  name: w2\n  finalizers: [example.com/keep]\nspec:\n  color: red\n";

/// The resourceVersion of a list of `api` now.
async fn list_rv<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// The first change a watch of `api` from `rv` delivers: its type and object name. Used to show
/// that a dry run made no watch event: the first change after the dry runs is the real one.
async fn first_change_since<K>(api: &Api<K>, rv: &str) -> (String, String, K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + 'static,
{
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("a watch event within 10 s")
        .unwrap()
        .expect("the watch delivers an event");
    let (kind, obj) = match event {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        other => panic!("unexpected first event {other:?}"),
    };
    let name = obj.meta().name.clone().unwrap_or_default();
    (kind.to_string(), name, obj)
}

fn rv_of(obj: &DynamicObject) -> String {
    obj.metadata.resource_version.clone().unwrap()
}

#[tokio::test]
async fn kubectl_server_dry_runs_store_nothing_and_make_no_watch_event() {
    let Some((cluster, kubectl)) = setup("kubectl_server_dry_runs").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let w1 = kubectl.manifest("w1.yaml", W1);
    let w2 = kubectl.manifest("w2.yaml", W2);
    let w1_blue = kubectl.manifest("w1-blue.yaml", W1_BLUE);
    kubectl.ok(&["apply", "-f", &w1]).await;
    kubectl.ok(&["apply", "-f", &w2]).await;
    let w3 = kubectl.manifest("w3.yaml", &W1.replace("w1", "w3"));
    let w3_blue = kubectl.manifest("w3-blue.yaml", &W1_BLUE.replace("w1", "w3"));
    kubectl.ok(&["apply", "--server-side", "-f", &w3]).await;
    let api = widgets(&cluster, "default");
    let before = [api.get("w1").await.unwrap(), api.get("w2").await.unwrap()];
    let rv = list_rv(&api).await;

    let out = kubectl
        .ok(&["delete", "widgets", "--all", "--dry-run=server"])
        .await;
    assert!(
        out.contains(
            "widget.test.example.com \"w1\" deleted from default namespace (server dry run)"
        ),
        "{out}"
    );
    let out = kubectl
        .ok(&["apply", "-f", &w1_blue, "--dry-run=server", "-o", "json"])
        .await;
    let applied: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(applied["spec"]["color"], "blue", "the would-be object");
    assert_eq!(applied["spec"]["size"], 3, "defaulted as a real write");
    let out = kubectl
        .ok(&["replace", "-f", &w1_blue, "--dry-run=server", "-o", "json"])
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["spec"]["color"],
        "blue"
    );
    // Server-side apply, of an object that was server-side applied (kubectl then sends the one
    // apply patch; with a client-side last-applied annotation it sends a second patch, which a
    // dry run computes from the stored object again).
    let w3_before = api.get("w3").await.unwrap();
    let out = kubectl
        .ok(&[
            "apply",
            "--server-side",
            "-f",
            &w3_blue,
            "--dry-run=server",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["spec"]["color"],
        "blue",
        "server-side apply, dry run"
    );
    kubectl
        .ok(&["label", "widget", "w1", "team=x", "--dry-run=server"])
        .await;
    let out = kubectl
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":7}}"#,
            "--dry-run=server",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["spec"]["size"],
        7
    );
    // A dry-run patch is validated as a real one: a bad value is still a 422.
    let out = kubectl
        .run(&[
            "patch",
            "widget",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"color":"green"}}"#,
            "--dry-run=server",
        ])
        .await;
    assert!(
        !out.success && out.stderr.contains("Unsupported value"),
        "{}",
        out.stderr
    );
    // kubectl diff previews with a server-side dry-run patch and exits 1 on differences.
    let out = kubectl.run(&["diff", "-f", &w1_blue]).await;
    assert!(
        !out.success && out.stdout.contains("+  color: blue"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );

    let before = [before[0].clone(), before[1].clone(), w3_before];
    let after = [
        api.get("w1").await.unwrap(),
        api.get("w2").await.unwrap(),
        api.get("w3").await.unwrap(),
    ];
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(rv_of(b), rv_of(a), "the resourceVersion is unchanged");
        assert_eq!(b.data, a.data);
        assert_eq!(b.metadata.labels, a.metadata.labels);
        assert!(a.metadata.deletion_timestamp.is_none());
    }
    assert_eq!(list_rv(&api).await, rv, "nothing was committed");
    // The first change a watch from before the dry runs sees is the real one that follows them.
    kubectl.ok(&["label", "widget", "w2", "real=yes"]).await;
    let (kind, name, obj) = first_change_since(&api, &rv).await;
    assert_eq!((kind.as_str(), name.as_str()), ("MODIFIED", "w2"));
    assert_eq!(obj.metadata.labels.unwrap()["real"], "yes");
}

/// The Python client's `dry_run="All"` on patch, replace, delete, deletecollection, a status
/// patch and a CRD create.
const DRY_RUN_SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
api = client.CustomObjectsApi()
ext = client.ApiextensionsV1Api()
g, v, p, ns = "test.example.com", "v1", "widgets", "default"

def raw(resp):
    return json.loads(resp.data)

core.create_namespaced_config_map(ns, {"metadata": {"name": "settings", "finalizers": ["example.com/keep"]}, "data": {"a": "1"}})
api.create_namespaced_custom_object(g, v, ns, p, {"apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"color": "red"}})
core.create_namespaced_event(ns, {"metadata": {"name": "e1"}, "involvedObject": {"kind": "ConfigMap", "name": "settings", "namespace": ns}, "reason": "Tested", "message": "one", "type": "Normal"})
rv = core.list_namespaced_config_map(ns).metadata.resource_version

out = {"rv": rv}
out["event_patch"] = core.patch_namespaced_event("e1", ns, {"message": "two"}, dry_run="All").message
out["cm_patch"] = core.patch_namespaced_config_map("settings", ns, {"data": {"a": "2"}}, dry_run="All").data
current = core.read_namespaced_config_map("settings", ns)
current.data = {"a": "3"}
out["cm_replace"] = core.replace_namespaced_config_map("settings", ns, current, dry_run="All").data
out["cm_delete"] = raw(core.delete_namespaced_config_map("settings", ns, dry_run="All", _preload_content=False))
out["w_patch"] = api.patch_namespaced_custom_object(g, v, ns, p, "w1", {"spec": {"size": 5}}, dry_run="All")["spec"]
out["w_status"] = api.patch_namespaced_custom_object_status(g, v, ns, p, "w1", {"status": {"phase": "Done"}}, dry_run="All").get("status")
w = api.get_namespaced_custom_object(g, v, ns, p, "w1")
w["spec"]["color"] = "blue"
out["w_replace"] = api.replace_namespaced_custom_object(g, v, ns, p, "w1", w, dry_run="All")["spec"]
w = api.get_namespaced_custom_object(g, v, ns, p, "w1")
w["status"] = {"phase": "Replaced"}
out["w_replace_status"] = api.replace_namespaced_custom_object_status(g, v, ns, p, "w1", w, dry_run="All").get("status")
out["crd_delete"] = raw(ext.delete_custom_resource_definition("widgets.test.example.com", dry_run="All", _preload_content=False))["metadata"]["name"]
# Custom resources' storage answers a removed object with a Success Status (finalizeDelete).
out["w_delete"] = api.delete_namespaced_custom_object(g, v, ns, p, "w1", dry_run="All")["details"]["name"]
out["w_delete_collection"] = [i["metadata"]["name"] for i in api.delete_collection_namespaced_custom_object(g, v, ns, p, dry_run="All")["items"]]
crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "gadgets.dry.example.com"},
       "spec": {"group": "dry.example.com", "scope": "Namespaced",
                "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
out["crd"] = raw(ext.create_custom_resource_definition(crd, dry_run="All", _preload_content=False))["metadata"]["name"]
out["crd_served"] = any(g.name == "dry.example.com" for g in client.ApisApi().get_api_versions().groups)
try:
    core.patch_namespaced_config_map("settings", ns, {"data": {"a": "2"}}, dry_run="Some")
    out["bad"] = None
except client.exceptions.ApiException as e:
    out["bad"] = [e.status, json.loads(e.body)["message"]]
out["cm_after"] = core.read_namespaced_config_map("settings", ns).to_dict()["metadata"]
out["cm_after_data"] = core.read_namespaced_config_map("settings", ns).data
out["w_after"] = api.get_namespaced_custom_object(g, v, ns, p, "w1")
out["rv_after"] = core.list_namespaced_config_map(ns).metadata.resource_version
print(json.dumps(out, default=str))
"#;

#[tokio::test]
async fn python_client_dry_runs_store_nothing_and_make_no_watch_event() {
    let Some((cluster, _kubectl)) = setup("python_client_dry_runs").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let seen = support::python(&cluster, DRY_RUN_SCRIPT).await;
    assert_eq!(seen["cm_patch"], json!({"a": "2"}), "the would-be object");
    // Nor is an Event mirrored to events.k8s.io (the resourceVersion check below).
    assert_eq!(seen["event_patch"], "two");
    assert_eq!(seen["cm_replace"], json!({"a": "3"}));
    assert!(
        seen["cm_delete"]["metadata"]["deletionTimestamp"].is_string(),
        "a dry-run delete of an object with finalizers returns it marked: {}",
        seen["cm_delete"]
    );
    assert_eq!(seen["w_patch"], json!({"color": "red", "size": 5}));
    assert_eq!(seen["w_status"], json!({"phase": "Done"}));
    assert_eq!(seen["w_replace"], json!({"color": "blue", "size": 3}));
    assert_eq!(seen["w_replace_status"], json!({"phase": "Replaced"}));
    assert_eq!(seen["crd_delete"], "widgets.test.example.com");
    assert_eq!(seen["w_delete"], "w1");
    assert_eq!(seen["w_delete_collection"], json!(["w1"]));
    assert_eq!(seen["crd"], "gadgets.dry.example.com");
    assert_eq!(seen["crd_served"], false, "a dry-run CRD serves nothing");
    // metav1/validation.ValidateDryRun: an unknown value is a 422 on the options.
    assert_eq!(seen["bad"][0], 422, "{}", seen["bad"]);
    assert_eq!(
        seen["bad"][1],
        "PatchOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
    );
    assert!(seen["cm_after"]["deletion_timestamp"].is_null());
    assert_eq!(seen["cm_after_data"], json!({"a": "1"}));
    assert_eq!(seen["w_after"]["spec"], json!({"color": "red", "size": 3}));
    assert!(seen["w_after"].get("status").is_none());
    assert_eq!(seen["rv_after"], seen["rv"], "nothing was committed");

    let rv = seen["rv"].as_str().unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let mut marker = ConfigMap::default();
    marker.metadata.name = Some("marker".into());
    configmaps
        .create(&PostParams::default(), &marker)
        .await
        .unwrap();
    let (kind, name, _) = first_change_since(&configmaps, rv).await;
    assert_eq!((kind.as_str(), name.as_str()), ("ADDED", "marker"));
    let api = widgets(&cluster, "default");
    api.create(
        &PostParams::default(),
        &support::widget("w9", json!({}), json!({"color": "red"})),
    )
    .await
    .unwrap();
    let (kind, name, _) = first_change_since(&api, rv).await;
    assert_eq!((kind.as_str(), name.as_str()), ("ADDED", "w9"));
}

/// A Python watch with bookmarks, as Kopf runs one.
const WATCH_SCRIPT: &str = r#"
import json, sys, threading
from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
rv = core.list_namespaced_config_map("default").metadata.resource_version

def changes():
    core.create_namespaced_config_map("default", {"metadata": {"name": "watched"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("watched", "default", {"data": {"a": "2"}})
    core.delete_namespaced_config_map("watched", "default")

seen = []
w = watch.Watch()
for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv,
                      allow_watch_bookmarks=True, timeout_seconds=20):
    if not seen:
        threading.Thread(target=changes).start()
    if event["type"] not in seen:
        seen.append(event["type"])
    if {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"} <= set(seen):
        w.stop()
print(json.dumps(sorted(seen)))
"#;

#[tokio::test]
async fn python_watch_with_bookmarks_sees_every_event_type() {
    let Some((cluster, _kubectl)) = setup("python_watch_with_bookmarks").await else {
        return;
    };
    // A first event for the stream to start the changes on: the namespace's own ConfigMap.
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let rv_before = list_rv(&configmaps).await;
    let mut first = ConfigMap::default();
    first.metadata.name = Some("first".into());
    configmaps
        .create(&PostParams::default(), &first)
        .await
        .unwrap();
    let _ = rv_before;
    let seen = support::python(&cluster, WATCH_SCRIPT).await;
    assert_eq!(seen, json!(["ADDED", "BOOKMARK", "DELETED", "MODIFIED"]));
}

#[tokio::test]
async fn boolean_query_parameters_are_decoded_as_the_api_server_decodes_them() {
    let Some((cluster, _kubectl)) = setup("boolean_query_parameters").await else {
        return;
    };
    // k8s.io/apimachinery/pkg/runtime/conversion.go Convert_Slice_string_To_bool: only "0" and
    // "false" (any case) are false; every other value, "True" and "yes" included, is true.
    for value in ["True", "TRUE", "t", "1", "yes", ""] {
        let response = raw(
            &cluster,
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?watch={value}&timeoutSeconds=1"),
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(response.status, 200);
        let body = String::from_utf8_lossy(&response.body);
        assert!(
            !body.contains("ConfigMapList"),
            "watch={value} watches: {body}"
        );
    }
    for value in ["False", "FALSE", "false", "0"] {
        let response = raw(
            &cluster,
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?watch={value}"),
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(
            response.json()["kind"],
            "ConfigMapList",
            "watch={value} lists"
        );
    }
}

#[tokio::test]
async fn integer_query_parameters_are_decoded_as_the_api_server_decodes_them() {
    let Some((_cluster, kubectl)) = setup("integer_query_parameters").await else {
        return;
    };
    // Convert_Slice_string_To_int64: strconv.ParseInt, answered 400 with its message.
    let out = kubectl
        .run(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps?limit=abc",
        ])
        .await;
    assert!(
        !out.success
            && out.stderr.contains(
                "Error from server (BadRequest): strconv.ParseInt: parsing \"abc\": invalid syntax"
            ),
        "{}",
        out.stderr
    );
    // An int64: a negative limit is no limit.
    let out = kubectl
        .ok(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps?limit=-1",
        ])
        .await;
    assert!(out.contains("ConfigMapList"), "{out}");
}

/// A parameter given twice takes its first value, as the API server's conversions of `url.Values`
/// do (`Convert_Slice_string_To_*` read `(*in)[0]`); `dryRun`, a list, takes every value, each
/// of which must be `All`.
#[tokio::test]
async fn a_repeated_query_parameter_takes_its_first_value_but_dry_run_takes_all() {
    let Some((cluster, kubectl)) = setup("repeated_query_parameters").await else {
        return;
    };
    let list = |query: &'static str| {
        let kubectl = &kubectl;
        async move {
            let out = kubectl
                .ok(&["get", "--raw", &format!("/api/v1/namespaces?{query}")])
                .await;
            serde_json::from_str::<Value>(&out).expect("json")
        }
    };
    let page = list("limit=1&limit=2").await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");
    assert!(page["metadata"]["continue"].is_string(), "{page}");
    let listed = list("watch=0&watch=1").await;
    assert_eq!(listed["kind"], "NamespaceList", "{listed}");
    let selected =
        list("labelSelector=kubernetes.io%2Fmetadata.name%3Ddefault&labelSelector=x").await;
    let names: Vec<&str> = selected["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["default"], "{selected}");

    let create = |name: &'static str, query: &'static str| {
        let cluster = &cluster;
        async move {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
            let path = format!("/api/v1/namespaces/default/configmaps?{query}");
            let body = serde_json::to_vec(&body).unwrap();
            raw(cluster, "POST", &path, "application/json", body).await
        }
    };
    let twice = create("twice", "dryRun=All&dryRun=All").await;
    assert_eq!(twice.status, 201, "{}", twice.json());
    let refused = create("refused", "dryRun=All&dryRun=bogus").await;
    assert_eq!(refused.status, 422, "{}", refused.json());
    assert!(
        refused.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("bogus")),
        "{}",
        refused.json()
    );
    let out = kubectl.run(&["get", "configmap", "twice", "refused"]).await;
    assert!(
        out.stderr.contains(r#"configmaps "twice" not found"#)
            && out.stderr.contains(r#"configmaps "refused" not found"#),
        "neither is stored: {}",
        out.stderr
    );
}

#[tokio::test]
async fn kubectl_auth_can_i_and_whoami() {
    let Some((cluster, kubectl)) = setup("kubectl_auth_can_i_and_whoami").await else {
        return;
    };
    let out = kubectl.ok(&["auth", "can-i", "create", "pods"]).await;
    assert_eq!(out.trim(), "yes");
    let out = kubectl
        .ok(&[
            "auth",
            "can-i",
            "delete",
            "widgets.test.example.com",
            "-n",
            "x",
        ])
        .await;
    assert_eq!(out.trim(), "yes");
    let out = kubectl.ok(&["auth", "can-i", "--list"]).await;
    assert!(out.contains("*.*"), "{out}");
    // Discovery lists the reviews, with create their only verb.
    let out = kubectl
        .ok(&[
            "api-resources",
            "--api-group=authorization.k8s.io",
            "-o",
            "wide",
        ])
        .await;
    let table = support::rows(&out);
    assert!(
        table.contains(
            &[
                "selfsubjectaccessreviews",
                "authorization.k8s.io/v1",
                "false",
                "SelfSubjectAccessReview",
                "create",
            ]
            .map(String::from)
            .to_vec()
        ),
        "{out}"
    );
    let out = kubectl.ok(&["auth", "whoami", "-o", "json"]).await;
    let review: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert_eq!(review["status"]["userInfo"]["username"], "devcluster");
    let out = kubectl.ok(&["auth", "whoami"]).await;
    assert!(out.contains("devcluster"), "{out}");
    // The Python client sends JSON: the review comes back with its spec and a status.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
review = client.AuthorizationV1Api().create_self_subject_access_review(
    {"spec": {"resourceAttributes": {"verb": "delete", "resource": "jobs", "group": "batch", "namespace": "x"}}})
me = client.AuthenticationV1Api().create_self_subject_review({})
print(json.dumps({"allowed": review.status.allowed, "verb": review.spec.resource_attributes.verb,
                  "user": me.status.user_info.username}))
"#,
    )
    .await;
    assert_eq!(
        seen,
        json!({"allowed": true, "verb": "delete", "user": "devcluster"})
    );
}

#[tokio::test]
async fn the_initial_namespaces_cannot_be_deleted() {
    let Some((cluster, kubectl)) = setup("the_initial_namespaces_cannot_be_deleted").await else {
        return;
    };
    for name in ["default", "kube-system", "kube-public"] {
        let out = kubectl.run(&["delete", "namespace", name]).await;
        assert!(!out.success);
        // plugin/pkg/admission/namespace/lifecycle: the immortal namespaces.
        assert!(
            out.stderr.contains(&format!(
                "Error from server (Forbidden): namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )),
            "{}",
            out.stderr
        );
        let ns: Api<Namespace> = Api::all(cluster.client());
        let ns = ns.get(name).await.unwrap();
        assert!(ns.metadata.deletion_timestamp.is_none());
    }
    // A namespace of our own still goes.
    let mut mine = Namespace::default();
    mine.metadata.name = Some("mine".into());
    Api::<Namespace>::all(cluster.client())
        .create(&PostParams::default(), &mine)
        .await
        .unwrap();
    kubectl
        .ok(&["delete", "namespace", "mine", "--wait=false"])
        .await;
}

/// Every namespace carries `kubernetes.io/metadata.name` with its name, which a client can
/// neither change nor remove (`SetDefaults_Namespace`), so it can be selected by name.
#[tokio::test]
async fn namespaces_are_labelled_with_their_name() {
    let Some((_cluster, kubectl)) = setup("namespaces_are_labelled_with_their_name").await else {
        return;
    };
    kubectl.ok(&["create", "namespace", "team-a"]).await;
    let label = |name: &'static str| {
        let kubectl = &kubectl;
        async move {
            kubectl
                .ok(&[
                    "get",
                    "namespace",
                    name,
                    "-o",
                    r"jsonpath={.metadata.labels.kubernetes\.io/metadata\.name}",
                ])
                .await
        }
    };
    assert_eq!(label("team-a").await, "team-a");
    assert_eq!(label("kube-system").await, "kube-system");
    kubectl
        .ok(&[
            "label",
            "namespace",
            "team-a",
            "kubernetes.io/metadata.name=other",
            "--overwrite",
        ])
        .await;
    assert_eq!(label("team-a").await, "team-a");
    kubectl
        .ok(&[
            "label",
            "namespace",
            "team-a",
            "kubernetes.io/metadata.name-",
        ])
        .await;
    assert_eq!(label("team-a").await, "team-a");
    let selected = kubectl
        .ok(&[
            "get",
            "namespaces",
            "-l",
            "kubernetes.io/metadata.name in (team-a,default)",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(selected, "namespace/default\nnamespace/team-a\n");
}

#[tokio::test]
async fn unsupported_field_selectors_are_a_bad_request() {
    let Some((cluster, kubectl)) = setup("unsupported_field_selectors").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    kubectl
        .ok(&["apply", "-f", &kubectl.manifest("w1.yaml", W1)])
        .await;
    let out = kubectl
        .run(&["get", "widgets", "--field-selector", "spec.color=red"])
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains("(BadRequest)")
            && out.stderr.contains("field label not supported: spec.color"),
        "{}",
        out.stderr
    );
    let out = kubectl
        .run(&["get", "configmaps", "--field-selector", "data.a=1"])
        .await;
    assert!(
        !out.success
            && out.stderr.contains(
                "\"data.a\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            ),
        "{}",
        out.stderr
    );
    let out = kubectl
        .run(&[
            "get",
            "namespaces",
            "--field-selector",
            "metadata.namespace=x",
        ])
        .await;
    assert!(
        !out.success
            && out
                .stderr
                .contains("field label not supported: metadata.namespace"),
        "{}",
        out.stderr
    );
    // Those the server supports still select.
    let out = kubectl
        .ok(&[
            "get",
            "widgets",
            "--field-selector",
            "metadata.name=w1",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.trim(), "widget.test.example.com/w1");
    let out = kubectl
        .ok(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "status.phase=Running,spec.nodeName=x",
        ])
        .await;
    assert!(!out.contains("Error"), "{out}");
    let out = kubectl
        .ok(&[
            "get",
            "namespaces",
            "--field-selector",
            "status.phase=Active",
            "-o",
            "name",
        ])
        .await;
    assert!(out.contains("namespace/default"), "{out}");
    // A Job's `status.successful` selects on its `status.succeeded`; others are refused in the
    // Job's own words.
    let job = kubectl.manifest(
        "job.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: done\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: main, image: busybox, command: [\"true\"]}\n",
    );
    kubectl.ok(&["apply", "-f", &job]).await;
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Complete",
            "job/done",
            "--timeout=60s",
        ])
        .await;
    let out = kubectl
        .ok(&[
            "get",
            "jobs",
            "--field-selector",
            "status.successful=1",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.trim(), "job.batch/done");
    let out = kubectl
        .ok(&[
            "get",
            "jobs",
            "--field-selector",
            "status.successful=0",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.trim(), "");
    let out = kubectl
        .run(&["get", "jobs", "--field-selector", "spec.parallelism=1"])
        .await;
    assert!(
        !out.success
            && out
                .stderr
                .contains("field label \"spec.parallelism\" not supported for Job"),
        "{}",
        out.stderr
    );
    // A CRD's selectableFields are supported.
    let gadgets = kubectl.manifest(
        "gadgets.yaml",
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.test.example.com}
spec:
  group: test.example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: [{jsonPath: .spec.color}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {color: {type: string}}}
"#,
    );
    kubectl.ok(&["apply", "-f", &gadgets]).await;
    let g1 = kubectl.manifest(
        "g1.yaml",
        "apiVersion: test.example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {color: red}\n",
    );
    kubectl.ok(&["apply", "-f", &g1]).await;
    let out = kubectl
        .ok(&[
            "get",
            "gadgets",
            "--field-selector",
            "spec.color=red",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.trim(), "gadget.test.example.com/g1");
    // Python, through the watch too.
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
out = []
for kw in [{}, {"watch": True, "timeout_seconds": 1}]:
    try:
        core.list_namespaced_secret("default", field_selector="data.x=1", **kw)
        out.append(None)
    except client.exceptions.ApiException as e:
        out.append([e.status, json.loads(e.body)["reason"], json.loads(e.body)["message"]])
print(json.dumps(out))
"#,
    )
    .await;
    for answer in seen.as_array().unwrap() {
        assert_eq!(
            answer,
            &json!([400, "BadRequest", "field label not supported: data.x"])
        );
    }
}

#[tokio::test]
async fn updates_without_resource_version_are_refused_where_the_strategy_says_so() {
    let Some((cluster, _kubectl)) = setup("custom_objects_refuse_unconditional_update").await
    else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
api = client.CustomObjectsApi()
g, v, p, ns = "test.example.com", "v1", "widgets", "default"
body = {"apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"color": "red"}}
api.create_namespaced_custom_object(g, v, ns, p, body)
body["spec"]["color"] = "blue"
out = {}
try:
    api.replace_namespaced_custom_object(g, v, ns, p, "w1", body)
    out["cr"] = None
except client.exceptions.ApiException as e:
    out["cr"] = [e.status, json.loads(e.body)["reason"], json.loads(e.body)["message"]]
core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
out["cm"] = core.replace_namespaced_config_map("c", ns, {"metadata": {"name": "c"}, "data": {"a": "2"}}).data
out["color"] = api.get_namespaced_custom_object(g, v, ns, p, "w1")["spec"]["color"]
leases = client.CoordinationV1Api()
leases.create_namespaced_lease(ns, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
try:
    leases.replace_namespaced_lease("l", ns, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    out["lease"] = None
except client.exceptions.ApiException as e:
    out["lease"] = [e.status, json.loads(e.body)["message"]]
print(json.dumps(out))
"#,
    )
    .await;
    // apiextensions-apiserver customresource strategy: AllowUnconditionalUpdate is false, so
    // k8s.io/apiserver/pkg/registry/generic/registry/store.go Update answers 422.
    assert_eq!(
        seen["cr"],
        json!([
            422,
            "Invalid",
            "widgets.test.example.com \"w1\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
        ])
    );
    assert_eq!(seen["color"], "red");
    // So does the Lease strategy (pkg/registry/coordination/lease/strategy.go).
    assert_eq!(
        seen["lease"],
        json!([
            422,
            "leases.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
        ])
    );
    // Built-ins such as ConfigMap allow it.
    assert_eq!(seen["cm"], json!({"a": "2"}));
}

/// The Python client's `VersionApi().get_code()` asks for `/version/`, which the real server's
/// go-restful route serves as it serves `/version` (apiserver pkg/server/routes/version.go).
#[tokio::test]
async fn the_python_client_reads_the_version() {
    let Some((cluster, _kubectl)) = setup("the_python_client_reads_the_version").await else {
        return;
    };
    let out = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
print(json.dumps(client.VersionApi().get_code().git_version))
"#,
    )
    .await;
    assert!(out.as_str().is_some_and(|v| v.starts_with("v1.")), "{out}");
}

/// A Python script's helper: calls `f`, prints the status code and the Status body of the
/// exception it raises (200 and `null` when it succeeds).
const PY_CALL: &str = r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
def call(f):
    try:
        f()
        return {"status": 200}
    except client.exceptions.ApiException as e:
        return {"status": e.status, "body": json.loads(e.body)}
"#;

/// List and watch options checked as the API server checks them before reading anything
/// (`ValidateListOptions`: 422 naming each problem; a `continue` with a resourceVersion: 400; a
/// resourceVersion the server has not reached: 504 after the watch cache's 3 s wait).
#[tokio::test]
async fn list_options_are_checked_as_the_api_server_checks_them() {
    let Some((cluster, kubectl)) = setup("list_options_are_checked").await else {
        return;
    };
    for name in ["a", "b", "c"] {
        kubectl.ok(&["create", "configmap", name]).await;
    }
    let script = format!(
        r#"{PY_CALL}
first = v1.list_namespaced_config_map("default", limit=1)
token = first.metadata._continue
list = lambda **kw: lambda: v1.list_namespaced_config_map("default", **kw)
watch = lambda **kw: lambda: v1.list_namespaced_config_map("default", watch=True, timeout_seconds=1, **kw)
print(json.dumps({{
    "match without rv": call(list(resource_version_match="NotOlderThan")),
    "exact at 0": call(list(resource_version="0", resource_version_match="Exact")),
    "bogus match": call(list(resource_version="1", resource_version_match="Bogus")),
    "initial events on a list": call(list(send_initial_events=True)),
    "watch match without initial events": call(watch(resource_version_match="NotOlderThan")),
    "continue with rv": call(list(limit=1, _continue=token, resource_version=first.metadata.resource_version)),
    "continue with rv 0": call(list(limit=1, _continue=token, resource_version="0")),
    "future rv": call(list(resource_version="99999999")),
    "valid": call(list(resource_version="0", resource_version_match="NotOlderThan")),
}}))
"#
    );
    let out = support::python(&cluster, &script).await;
    let message = |case: &str| {
        out[case]["body"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for case in [
        "match without rv",
        "exact at 0",
        "bogus match",
        "initial events on a list",
        "watch match without initial events",
    ] {
        assert_eq!(out[case]["status"], 422, "{case}: {out}");
        assert!(
            message(case).starts_with("ListOptions.meta.k8s.io \"\" is invalid: "),
            "{case}: {out}"
        );
    }
    assert!(message("match without rv").ends_with("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"), "{out}");
    assert!(message("exact at 0").ends_with("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""), "{out}");
    assert!(message("bogus match").ends_with(r#"resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", """#), "{out}");
    assert!(
        message("initial events on a list")
            .ends_with("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
        "{out}"
    );
    assert!(message("watch match without initial events").ends_with("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"), "{out}");
    assert_eq!(out["continue with rv"]["status"], 400, "{out}");
    assert_eq!(
        message("continue with rv"),
        "specifying resource version is not allowed when using continue"
    );
    assert_eq!(out["continue with rv 0"]["status"], 200, "{out}");
    assert_eq!(out["future rv"]["status"], 504, "{out}");
    assert!(
        message("future rv")
            .starts_with("Timeout: Too large resource version: 99999999, current: "),
        "{out}"
    );
    assert_eq!(
        out["future rv"]["body"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{out}"
    );
    assert_eq!(out["valid"]["status"], 200, "{out}");
}

/// Paths nothing serves answer go-restful's 404 (not a missing object's), and a served path
/// asked with a method it does not take its 405: here attach and scale are not served.
/// Namespaces have no deletecollection (their REST has none), so discovery does not list it.
#[tokio::test]
async fn unserved_paths_and_methods_answer_as_the_api_server_routes_do() {
    let Some((cluster, kubectl)) = setup("unserved_paths_and_methods").await else {
        return;
    };
    kubectl.create_sleeping_job("j").await;
    let out = kubectl.run(&["scale", "job", "j", "--replicas=2"]).await;
    assert!(
        !out.success
            && out.stderr.contains(
                "Error from server (NotFound): the server could not find the requested resource"
            ),
        "{}",
        out.stderr
    );
    let script = format!(
        r#"{PY_CALL}
v1.create_namespaced_pod("default", {{"metadata": {{"name": "p"}}, "spec": {{"containers": [{{"name": "c", "image": "busybox", "command": ["sleep", "30"]}}]}}}})
def raw(method, path):
    r = v1.api_client.call_api(method, v1.api_client.configuration.host + path,
                               header_params={{"Content-Type": "application/json"}}, body={{}})
    r.read()
    return {{"status": r.status, "body": json.loads(r.data)}}
print(json.dumps({{
    "attach": raw("POST", "/api/v1/namespaces/default/pods/p/attach"),
    "post to a pod": raw("POST", "/api/v1/namespaces/default/pods/p"),
    "delete namespaces": raw("DELETE", "/api/v1/namespaces"),
}}))
"#
    );
    let out = support::python(&cluster, &script).await;
    assert_eq!(out["attach"]["status"], 404, "{out}");
    assert_eq!(
        out["attach"]["body"]["message"], "the server could not find the requested resource",
        "{out}"
    );
    for case in ["post to a pod", "delete namespaces"] {
        assert_eq!(out[case]["status"], 405, "{case}: {out}");
        assert_eq!(out[case]["body"]["reason"], "MethodNotAllowed", "{out}");
        assert_eq!(
            out[case]["body"]["message"],
            "the server does not allow this method on the requested resource",
            "{out}"
        );
    }
    assert!(
        Api::<Namespace>::all(cluster.client())
            .get("default")
            .await
            .is_ok()
    );
    let resources = kubectl
        .ok(&["api-resources", "-o", "wide", "--api-group="])
        .await;
    let namespaces = resources
        .lines()
        .find(|l| l.starts_with("namespaces "))
        .unwrap_or_else(|| panic!("{resources}"));
    assert!(
        namespaces.contains(" create,delete,get,list,patch,update,watch "),
        "{namespaces}"
    );
    let pods = resources.lines().find(|l| l.starts_with("pods ")).unwrap();
    assert!(pods.contains("deletecollection"), "{pods}");
}

/// What a kube-apiserver 1.34 serves by default, as its discovery lists it (kubernetes
/// api/discovery/aggregated_v2.json and api__v1.json, which the real server's tests keep in
/// step with it): (group, resources); the core group is "".
const REAL_RESOURCES: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "bindings",
            "componentstatuses",
            "configmaps",
            "endpoints",
            "events",
            "limitranges",
            "namespaces",
            "nodes",
            "persistentvolumeclaims",
            "persistentvolumes",
            "pods",
            "podtemplates",
            "replicationcontrollers",
            "resourcequotas",
            "secrets",
            "serviceaccounts",
            "services",
        ],
    ),
    (
        "admissionregistration.k8s.io",
        &[
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "validatingwebhookconfigurations",
        ],
    ),
    ("apiextensions.k8s.io", &["customresourcedefinitions"]),
    ("apiregistration.k8s.io", &["apiservices"]),
    (
        "apps",
        &[
            "controllerrevisions",
            "daemonsets",
            "deployments",
            "replicasets",
            "statefulsets",
        ],
    ),
    (
        "authentication.k8s.io",
        &["selfsubjectreviews", "tokenreviews"],
    ),
    (
        "authorization.k8s.io",
        &[
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews",
        ],
    ),
    ("autoscaling", &["horizontalpodautoscalers"]),
    ("batch", &["cronjobs", "jobs"]),
    ("certificates.k8s.io", &["certificatesigningrequests"]),
    ("coordination.k8s.io", &["leases"]),
    ("discovery.k8s.io", &["endpointslices"]),
    ("events.k8s.io", &["events"]),
    (
        "flowcontrol.apiserver.k8s.io",
        &["flowschemas", "prioritylevelconfigurations"],
    ),
    (
        "networking.k8s.io",
        &[
            "ingressclasses",
            "ingresses",
            "ipaddresses",
            "networkpolicies",
            "servicecidrs",
        ],
    ),
    ("node.k8s.io", &["runtimeclasses"]),
    ("policy", &["poddisruptionbudgets"]),
    (
        "rbac.authorization.k8s.io",
        &[
            "clusterrolebindings",
            "clusterroles",
            "rolebindings",
            "roles",
        ],
    ),
    (
        "resource.k8s.io",
        &[
            "deviceclasses",
            "resourceclaims",
            "resourceclaimtemplates",
            "resourceslices",
        ],
    ),
    ("scheduling.k8s.io", &["priorityclasses"]),
    (
        "storage.k8s.io",
        &[
            "csidrivers",
            "csinodes",
            "csistoragecapacities",
            "storageclasses",
            "volumeattachments",
            "volumeattributesclasses",
        ],
    ),
];

/// The subresources the same discovery lists beside `status`: (discovery path, subresource).
const REAL_SUBRESOURCES: &[(&str, &str)] = &[
    ("/api/v1", "pods/attach"),
    ("/api/v1", "pods/binding"),
    ("/api/v1", "pods/ephemeralcontainers"),
    ("/api/v1", "pods/exec"),
    ("/api/v1", "pods/log"),
    ("/api/v1", "pods/portforward"),
    ("/api/v1", "pods/proxy"),
    ("/api/v1", "pods/resize"),
    ("/api/v1", "serviceaccounts/token"),
    ("/api/v1", "services/proxy"),
    ("/api/v1", "nodes/proxy"),
    ("/api/v1", "namespaces/finalize"),
    ("/api/v1", "replicationcontrollers/scale"),
    ("/apis/apps/v1", "deployments/scale"),
    (
        "/apis/certificates.k8s.io/v1",
        "certificatesigningrequests/approval",
    ),
];

/// The README names, in backquotes, every group, resource and subresource of the real server's
/// discovery that this one's discovery (as kubectl reads it) leaves out.
#[tokio::test]
async fn the_readme_names_every_resource_the_real_server_serves_and_this_one_does_not() {
    let Some((_cluster, kubectl)) = setup("the_readme_names_what_is_not_served").await else {
        return;
    };
    let readme = include_str!("../../README.md");
    let named = |text: &str| readme.contains(&format!("`{text}`"));
    let served = kubectl.ok(&["api-resources", "-o", "name"]).await;
    let served: Vec<&str> = served.lines().collect();
    let mut missing = Vec::new();
    for (group, resources) in REAL_RESOURCES {
        for resource in *resources {
            let name = match *group {
                "" => resource.to_string(),
                group => format!("{resource}.{group}"),
            };
            if served.contains(&name.as_str()) {
                continue;
            }
            if !named(resource) || !(group.is_empty() || named(group)) {
                missing.push(name);
            }
        }
    }
    for (path, subresource) in REAL_SUBRESOURCES {
        let discovery = kubectl.run(&["get", "--raw", path]).await.stdout;
        let listed = serde_json::from_str::<Value>(&discovery).is_ok_and(|list| {
            list["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["name"] == *subresource))
        });
        if !listed && !named(subresource) {
            missing.push(subresource.to_string());
        }
    }
    assert!(missing.is_empty(), "the README does not name {missing:?}");
}

/// A delete that removes the object answers a `Success` Status naming it for most kinds, and
/// the object itself for those whose storage returns it (Pods, Services, ServiceAccounts,
/// Namespaces), as `finalizeDelete` does; one still pending (a finalizer) answers the object.
#[tokio::test]
async fn deletes_answer_a_status_or_the_object_as_each_kind_does() {
    let Some((cluster, kubectl)) = setup("deletes_answer_status_or_object").await else {
        return;
    };
    kubectl.ok(&["create", "configmap", "c"]).await;
    kubectl.ok(&["create", "serviceaccount", "sa"]).await;
    let uid = kubectl
        .ok(&["get", "configmap", "c", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let script = format!(
        r#"{PY_CALL}
rbac = client.RbacAuthorizationV1Api()
rbac.create_namespaced_role("default", {{"metadata": {{"name": "r"}}, "rules": []}})
v1.create_namespaced_config_map("default", {{"metadata": {{"name": "kept", "finalizers": ["example.com/keep"]}}}})
plain = lambda f: f(_preload_content=False).json()
print(json.dumps({{
    "configmap": plain(lambda **kw: v1.delete_namespaced_config_map("c", "default", **kw)),
    "role": plain(lambda **kw: rbac.delete_namespaced_role("r", "default", **kw)),
    "serviceaccount": plain(lambda **kw: v1.delete_namespaced_service_account("sa", "default", **kw)),
    "pending": plain(lambda **kw: v1.delete_namespaced_config_map("kept", "default", **kw)),
}}))
"#
    );
    let out = support::python(&cluster, &script).await;
    assert_eq!(
        out["configmap"],
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "c", "kind": "configmaps", "uid": uid}}),
        "{out}"
    );
    assert_eq!(out["role"]["kind"], "Status", "{out}");
    assert_eq!(
        out["role"]["details"]["group"], "rbac.authorization.k8s.io",
        "{out}"
    );
    assert_eq!(out["role"]["details"]["kind"], "roles", "{out}");
    assert_eq!(out["serviceaccount"]["kind"], "ServiceAccount", "{out}");
    assert_eq!(out["pending"]["kind"], "ConfigMap", "{out}");
    assert!(
        out["pending"]["metadata"]["deletionTimestamp"].is_string(),
        "{out}"
    );
}

/// A create in a namespace being deleted is refused as NamespaceLifecycle refuses it: the
/// object named in the message, and the `NamespaceTerminating` cause clients test for.
#[tokio::test]
async fn a_create_in_a_terminating_namespace_names_the_object_and_the_cause() {
    let Some((cluster, kubectl)) = setup("create_in_terminating_namespace").await else {
        return;
    };
    kubectl.ok(&["create", "namespace", "going"]).await;
    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: going\n  finalizers: [example.com/keep]\n";
    let file = kubectl.manifest("held.yaml", held);
    kubectl.ok(&["create", "-f", &file]).await;
    kubectl
        .ok(&["delete", "namespace", "going", "--wait=false"])
        .await;
    let script = format!(
        r#"{PY_CALL}
print(json.dumps(call(lambda: v1.create_namespaced_config_map("going", {{"metadata": {{"name": "x"}}}}))))
"#
    );
    let out = support::python(&cluster, &script).await;
    assert_eq!(out["status"], 403, "{out}");
    assert_eq!(
        out["body"]["message"],
        "configmaps \"x\" is forbidden: unable to create new content in namespace going because it is being terminated",
        "{out}"
    );
    assert_eq!(
        out["body"]["details"]["causes"],
        json!([{"reason": "NamespaceTerminating", "message": "namespace going is being terminated", "field": "metadata.namespace"}]),
        "{out}"
    );
    kubectl
        .ok(&[
            "patch",
            "configmap",
            "held",
            "-n",
            "going",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .await;
}

/// `kubectl get all` lists the kinds in the `all` category (pods, services, Jobs, Deployments:
/// each storage's `Categories()`), and `kubectl get api-extensions` the CRDs.
#[tokio::test]
async fn kubectl_get_all_lists_services_and_deployments() {
    let Some((cluster, kubectl)) = setup("kubectl_get_all").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    kubectl
        .ok(&["create", "service", "clusterip", "svc", "--tcp=80:80"])
        .await;
    kubectl
        .ok(&[
            "create",
            "deployment",
            "d",
            "--image=busybox",
            "--",
            "sleep",
            "30",
        ])
        .await;
    let all = kubectl.ok(&["get", "all", "-o", "name"]).await;
    assert!(all.lines().any(|l| l == "service/svc"), "{all}");
    assert!(all.lines().any(|l| l == "deployment.apps/d"), "{all}");
    let extensions = kubectl.ok(&["get", "api-extensions", "-o", "name"]).await;
    assert!(
        extensions
            .contains("customresourcedefinition.apiextensions.k8s.io/widgets.test.example.com"),
        "{extensions}"
    );
}

/// A page of a list without selectors says how many items the next pages hold
/// (`remainingItemCount`); with a selector the count is unknown and left out (ListMeta).
#[tokio::test]
async fn a_page_counts_the_items_still_to_come_unless_selected() {
    let Some((cluster, kubectl)) = setup("a_page_counts_the_items_still_to_come").await else {
        return;
    };
    for name in ["a", "b", "c", "d", "e"] {
        kubectl.ok(&["create", "configmap", name]).await;
    }
    let script = format!(
        r#"{PY_CALL}
first = v1.list_namespaced_config_map("default", limit=2)
second = v1.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
selected = v1.list_namespaced_config_map("default", limit=2, field_selector="metadata.namespace=default")
print(json.dumps([first.metadata.remaining_item_count, second.metadata.remaining_item_count,
                  selected.metadata.remaining_item_count, selected.metadata._continue is not None]))
"#
    );
    let out = support::python(&cluster, &script).await;
    assert_eq!(out, json!([3, 1, null, true]));
}

/// Object bodies as kube-apiserver writes them: a built-in kind in its Go struct's order
/// (`kind`, `apiVersion`, `metadata` from `name` on, then the rest), a custom resource with
/// its keys sorted (it is a map to Go's encoder), each ended by `json.Encoder`'s newline.
#[tokio::test]
async fn object_bodies_are_written_in_the_api_servers_field_order_with_a_final_newline() {
    let cluster = kube_devcluster::testing::start().await;
    support::install_widget_crd(&cluster).await;
    let text =
        |response: &support::RawResponse| String::from_utf8_lossy(&response.body).into_owned();
    let config_map = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"order","labels":{"a":"b"}},"data":{"k":"v"}}"#;
    let path = "/api/v1/namespaces/default/configmaps";
    let created = raw(
        &cluster,
        "POST",
        path,
        "application/json",
        config_map.to_vec(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", text(&created));
    let got = raw(&cluster, "GET", &format!("{path}/order"), "", vec![]).await;
    for body in [text(&created), text(&got)] {
        assert!(
            body.starts_with(
                r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"order","namespace":"default","uid":""#
            ),
            "{body}"
        );
        assert!(body.ends_with("}\n"), "{body:?}");
        let resource_version = body.find(r#""resourceVersion""#).unwrap();
        let created_at = body.find(r#""creationTimestamp""#).unwrap();
        let labels = body.find(r#""labels""#).unwrap();
        let managed = body.find(r#""managedFields""#).unwrap();
        assert!(
            resource_version < created_at && created_at < labels && labels < managed,
            "{body}"
        );
    }
    let list = text(&raw(&cluster, "GET", path, "", vec![]).await);
    assert!(
        list.starts_with(r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"#),
        "{list}"
    );
    assert!(
        list.contains(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"order""#),
        "{list}"
    );
    assert!(list.ends_with("]}\n"), "{list:?}");

    let widget = br#"{"apiVersion":"test.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}"#;
    let widgets = "/apis/test.example.com/v1/namespaces/default/widgets";
    let created = raw(
        &cluster,
        "POST",
        widgets,
        "application/json",
        widget.to_vec(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", text(&created));
    let body = text(&raw(&cluster, "GET", &format!("{widgets}/w"), "", vec![]).await);
    assert!(
        body.starts_with(r#"{"apiVersion":"test.example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"#),
        "{body}"
    );
    assert!(body.ends_with("}\n"), "{body:?}");
}
