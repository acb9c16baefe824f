//! Error answers as the real API server writes them, through the official Python client, whose
//! own tests compare an error's text byte for byte: a `Status` in Go's field order ending with
//! the newline of Go's encoder, its `details` naming the resource and its group apart, and the
//! refusals of a body whose kind is not the endpoint's.

use crate::support::{self, setup};

use serde_json::{Value, json};

/// The Python client's side: `call(f)` runs `f` and answers the status code and the raw body of
/// the `ApiException` it raises.
const PY_RAW_CALL: &str = r#"
import json, sys
from kubernetes import client, config, dynamic
config.load_kube_config(sys.argv[1])
apps = client.AppsV1Api()
v1 = client.CoreV1Api()
def call(f):
    try:
        f()
        return None
    except client.exceptions.ApiException as e:
        return [e.status, e.body.decode() if isinstance(e.body, bytes) else e.body]
deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
    "spec": {"selector": {"matchLabels": {"app": "d"}},
             "template": {"metadata": {"labels": {"app": "d"}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
"#;

/// What `script` (after [`PY_RAW_CALL`]) prints as one JSON value.
async fn run(cluster: &kube_devcluster::DevCluster, script: &str) -> Value {
    support::python(cluster, &format!("{PY_RAW_CALL}{script}")).await
}

/// `NewNotFound`, `NewAlreadyExists` and `NewConflict` (k8s.io/apimachinery pkg/api/errors
/// errors.go) fill `details` from a `GroupResource`: `"group":"apps","kind":"deployments"`;
/// the body is `metav1.Status` in its Go field order, written by `json.Encoder`, which ends it
/// with a newline (pkg/runtime/serializer/json/json.go `Encode`).
#[tokio::test]
async fn errors_of_a_named_group_name_it_apart_and_end_with_a_newline() {
    let Some((cluster, _kubectl)) = setup("errors_of_a_named_group").await else {
        return;
    };
    let seen = run(
        &cluster,
        r#"
missing = call(lambda: apps.read_namespaced_deployment("missing", "default"))
apps.create_namespaced_deployment("default", deployment)
exists = call(lambda: apps.create_namespaced_deployment("default", deployment))
stale = dict(deployment, metadata={"name": "d", "resourceVersion": "1"})
conflict = call(lambda: apps.replace_namespaced_deployment("d", "default", stale))
pod = call(lambda: v1.read_namespaced_pod("missing", "default"))
print(json.dumps([missing, exists, conflict, pod]))
"#,
    )
    .await;
    let status = |code: u16, reason: &str, message: &str, details: &str| {
        json!([
            code,
            format!(
                "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{},\"reason\":\"{reason}\",\"details\":{details},\"code\":{code}}}\n",
                json!(message)
            )
        ])
    };
    assert_eq!(
        seen[0],
        status(
            404,
            "NotFound",
            "deployments.apps \"missing\" not found",
            r#"{"name":"missing","group":"apps","kind":"deployments"}"#
        )
    );
    assert_eq!(
        seen[1],
        status(
            409,
            "AlreadyExists",
            "deployments.apps \"d\" already exists",
            r#"{"name":"d","group":"apps","kind":"deployments"}"#
        )
    );
    assert_eq!(
        seen[2],
        status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on deployments.apps \"d\": the object has been modified; please apply your changes to the latest version and try again",
            r#"{"name":"d","group":"apps","kind":"deployments"}"#
        )
    );
    assert_eq!(
        seen[3],
        status(
            404,
            "NotFound",
            "pods \"missing\" not found",
            r#"{"name":"missing","kind":"pods"}"#
        )
    );
}

/// A body for a custom resource of another type: the request decoder copies any object into the
/// resource's unstructured type (k8s.io/apimachinery pkg/runtime/scheme.go `Convert`), then the
/// handler refuses another group or version (k8s.io/apiserver pkg/endpoints/handlers/create.go,
/// `AcceptsGroupVersion`: 400) and the custom resource validator another kind
/// (k8s.io/apiextensions-apiserver pkg/registry/customresource/validator.go `ValidateTypeMeta`:
/// 422).
#[tokio::test]
async fn a_custom_resource_body_of_another_type_is_refused_as_the_api_server_refuses_it() {
    let Some((cluster, _kubectl)) = setup("a_custom_resource_body_of_another_type").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let seen = run(
        &cluster,
        r#"
widgets = dynamic.DynamicClient(client.ApiClient()).resources.get(
    api_version="test.example.com/v1", kind="Widget")
gadget = {"apiVersion": "test.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
          "spec": {"color": "red"}}
answers = [call(lambda: widgets.create(body=body, namespace="default")) for body in [deployment, gadget]]
print(json.dumps([[status, json.loads(body)] for status, body in answers]))
"#,
    )
    .await;
    assert_eq!(
        seen[0],
        json!([400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the API version in the data (apps/v1) does not match the expected API version (test.example.com/v1)",
            "reason": "BadRequest", "code": 400}])
    );
    assert_eq!(seen[1][0], 422, "{seen}");
    assert_eq!(
        seen[1][1]["message"],
        "Widget.test.example.com \"g\" is invalid: kind: Invalid value: \"Gadget\": must be Widget"
    );
    assert_eq!(
        seen[1][1]["details"],
        json!({"name": "g", "group": "test.example.com", "kind": "Widget", "causes": [{
            "reason": "FieldValueInvalid", "message": "Invalid value: \"Gadget\": must be Widget",
            "field": "kind"}]})
    );
}

/// A body whose kind is not the endpoint's. Server-side apply refuses it in its field manager
/// (k8s.io/apimachinery pkg/util/managedfields/internal/versioncheck.go,
/// `versionCheckManager.Apply`): 400 BadRequest `invalid object type: apps/v1,
/// Kind=Deployment`, whether the object exists or not. A create or replace fails to decode it
/// (k8s.io/apimachinery pkg/runtime/serializer/versioning/versioning.go `Decode` converts the
/// Deployment it decoded into the handler's internal Pod, pkg/conversion/converter.go
/// `Convert`), worded by k8s.io/apiserver pkg/endpoints/handlers/rest.go
/// `transformDecodeError`: 400 BadRequest.
#[tokio::test]
async fn a_body_of_another_kind_is_refused_as_the_api_server_refuses_it() {
    let Some((cluster, _kubectl)) = setup("a_body_of_another_kind").await else {
        return;
    };
    let seen = run(
        &cluster,
        r#"
# The dynamic client sends the body as it is (the typed one checks it against the Pod model).
pods = dynamic.DynamicClient(client.ApiClient()).resources.get(api_version="v1", kind="Pod")
def apply():
    pods.server_side_apply(body=dict(deployment, metadata={"name": "p"}), name="p",
                           namespace="default", field_manager="test")
v1.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"]}]}})
def apply_live():
    pods.server_side_apply(body=dict(deployment, metadata={"name": "live"}), name="live",
                           namespace="default", field_manager="test")
created = call(lambda: pods.create(body=deployment, namespace="default"))
replaced = call(lambda: pods.replace(body=dict(deployment, metadata={"name": "live"}), name="live",
                                     namespace="default"))
print(json.dumps([call(apply), call(apply_live), created, replaced]))
"#,
    )
    .await;
    let bad_request = |message: &str| {
        json!([400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": 400}])
    };
    // Each answer's body parsed (a success, `null`, stays `null`).
    let parsed: Vec<Value> = seen
        .as_array()
        .unwrap()
        .iter()
        .map(|answer| match answer[1].as_str() {
            Some(body) => json!([answer[0], serde_json::from_str::<Value>(body).unwrap()]),
            None => answer.clone(),
        })
        .collect();
    let invalid_type = bad_request("invalid object type: apps/v1, Kind=Deployment");
    assert_eq!(parsed[0], invalid_type);
    assert_eq!(parsed[1], invalid_type);
    let undecodable = bad_request(
        "Deployment in version \"v1\" cannot be handled as a Pod: converting (v1.Deployment) to (core.Pod): unknown conversion",
    );
    assert_eq!(parsed[2], undecodable);
    assert_eq!(parsed[3], undecodable);
}
