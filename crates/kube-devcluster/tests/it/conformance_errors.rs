//! Error answers as the real API server writes them, through the official Python client, whose
//! own tests compare an error's text byte for byte: a `Status` in Go's field order ending with
//! the newline of Go's encoder, its `details` naming the resource and its group apart.

use crate::support::{self, setup};

use serde_json::{Value, json};

/// The Python client's side: `call(f)` runs `f` and answers the status code and the raw body of
/// the `ApiException` it raises.
const PY_RAW_CALL: &str = r#"
import json, sys
from kubernetes import client, config
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
