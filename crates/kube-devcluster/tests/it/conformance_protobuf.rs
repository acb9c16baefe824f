//! Request bodies in Kubernetes' protobuf encoding and the media types the API server accepts.
//!
//! kubectl's typed commands (`kubectl create namespace|configmap|secret|serviceaccount|job|role|
//! ...`) build a typed object and POST it as `application/vnd.kubernetes.protobuf`; `kubectl
//! create -f` of the same object sends JSON. Each test here runs a command both ways and asserts
//! that the two objects read back alike (less what naturally differs: uid, resourceVersion,
//! creationTimestamp, name, managedFields). A body in a media type the server does not decode is
//! answered 415 with a Status, as the real server answers it
//! (k8s.io/apiserver/pkg/endpoints/handlers/negotiation/errors.go, errUnsupportedMediaType).

use crate::support;

use crate::support::{Kubectl, setup};
use serde_json::{Value, json};

/// `kubectl get -o json` of an object, with what differs between two creations of the same
/// manifest made equal: uid, resourceVersion, creationTimestamp and managedFields dropped, and the
/// object's name and uid (which a Job repeats in its selector and labels) replaced by placeholders;
/// a Job's status left out.
async fn normalized(kubectl: &Kubectl, resource: &str, name: &str, namespace: &str) -> Value {
    let out = kubectl
        .ok(&["get", resource, name, "-n", namespace, "-o", "json"])
        .await;
    let mut obj: Value = serde_json::from_str(&out).unwrap();
    if resource == "job" {
        // A Job's status is the Job controller's, written as its pod runs: not from the body.
        obj.as_object_mut().unwrap().remove("status");
    }
    if let Some(spec) = obj["spec"]
        .as_object_mut()
        .filter(|_| resource == "service")
    {
        // A Service's cluster IP and node ports are its own, allocated when it is created: not
        // from the body.
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
        let ports = spec.get_mut("ports").and_then(Value::as_array_mut);
        for port in ports.into_iter().flatten() {
            port.as_object_mut().unwrap().remove("nodePort");
        }
    }
    let uid = obj["metadata"]["uid"]
        .as_str()
        .unwrap_or("no-uid")
        .to_string();
    let meta = obj["metadata"].as_object_mut().unwrap();
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
    ] {
        meta.remove(field);
    }
    let text = obj
        .to_string()
        .replace(&uid, "<uid>")
        .replace(&format!("\"{name}\""), "\"<name>\"");
    serde_json::from_str(&text).unwrap()
}

/// Runs `kubectl create <args>` twice: once as kubectl sends it for `name_pb` (protobuf for a
/// built-in kind), and once through the JSON manifest kubectl prints for it (`--dry-run=client -o
/// json`, then `kubectl create -f`) for `name_json`. Both objects must read back alike.
async fn assert_created_alike(
    kubectl: &Kubectl,
    resource: &str,
    namespace: &str,
    create: &dyn Fn(&str) -> Vec<String>,
    base: &str,
) -> Value {
    let name_json = format!("{base}-json");
    let name_pb = format!("{base}-pb");

    let args = with_flags(
        create(&name_json),
        &["-n", namespace, "--dry-run=client", "-o", "json"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let manifest = kubectl.ok(&args).await;
    let path = kubectl.manifest(&format!("{name_json}.json"), &manifest);
    kubectl.ok(&["create", "-n", namespace, "-f", &path]).await;

    // -v=8 prints the request's headers: the body must have gone as protobuf, or the test
    // would prove nothing about protobuf.
    let args = with_flags(create(&name_pb), &["-n", namespace, "-v=8"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kubectl.run(&args).await;
    assert!(
        out.success,
        "kubectl {args:?} failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr
            .contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl {args:?} did not send protobuf:\n{}",
        out.stderr
    );

    let from_json = normalized(kubectl, resource, &name_json, namespace).await;
    let from_pb = normalized(kubectl, resource, &name_pb, namespace).await;
    assert_eq!(
        from_pb, from_json,
        "{resource}: created from protobuf (left) and from JSON (right) differ"
    );
    from_pb
}

/// `args` with `flags` added before a `--` (after which come a container's command).
fn with_flags(mut args: Vec<String>, flags: &[&str]) -> Vec<String> {
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.splice(at..at, flags.iter().map(|f| f.to_string()));
    args
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[tokio::test]
async fn kubectl_create_namespace_configmap_secret_serviceaccount_send_protobuf_and_read_back_as_json()
 {
    let Some((_cluster, kubectl)) = setup("kubectl_create_protobuf_core").await else {
        return;
    };

    let ns = assert_created_alike(
        &kubectl,
        "namespace",
        "default",
        &|name| words(&format!("create namespace {name}")),
        "ns",
    )
    .await;
    assert_eq!(ns["kind"], "Namespace");

    let cm = assert_created_alike(
        &kubectl,
        "configmap",
        "default",
        &|name| {
            words(&format!(
                "create configmap {name} --from-literal=greeting=hello --from-literal=empty="
            ))
        },
        "cm",
    )
    .await;
    assert_eq!(cm["data"], json!({"greeting": "hello", "empty": ""}));

    // Secret data is bytes: base64 in JSON.
    let secret = assert_created_alike(
        &kubectl,
        "secret",
        "default",
        &|name| {
            words(&format!(
                "create secret generic {name} --from-literal=password=s3cr3t --type=Opaque"
            ))
        },
        "secret",
    )
    .await;
    assert_eq!(secret["data"]["password"], "czNjcjN0");
    assert_eq!(secret["type"], "Opaque");

    let registry = assert_created_alike(
        &kubectl,
        "secret",
        "default",
        &|name| {
            words(&format!(
                "create secret docker-registry {name} --docker-server=r.example --docker-username=u --docker-password=p"
            ))
        },
        "registry",
    )
    .await;
    assert_eq!(registry["type"], "kubernetes.io/dockerconfigjson");

    // A file that is not UTF-8 goes to binaryData (bytes, base64 in JSON).
    let file = kubectl.manifest("blob.bin", "");
    std::fs::write(&file, [0u8, 0x9f, 0x92, 0x96, 1, 2]).unwrap();
    let binary = assert_created_alike(
        &kubectl,
        "configmap",
        "default",
        &|name| words(&format!("create configmap {name} --from-file={file}")),
        "binary",
    )
    .await;
    assert_eq!(binary["binaryData"]["blob.bin"], "AJ+SlgEC");

    let sa = assert_created_alike(
        &kubectl,
        "serviceaccount",
        "default",
        &|name| words(&format!("create serviceaccount {name}")),
        "sa",
    )
    .await;
    assert_eq!(sa["kind"], "ServiceAccount");
}

#[tokio::test]
async fn kubectl_create_job_role_and_bindings_send_protobuf_and_read_back_as_json() {
    let Some((_cluster, kubectl)) = setup("kubectl_create_protobuf_workloads").await else {
        return;
    };

    // A Job's pod template: containers, command, restartPolicy, the empty `resources: {}`.
    let job = assert_created_alike(
        &kubectl,
        "job",
        "default",
        &|name| words(&format!("create job {name} --image=busybox -- true")),
        "job",
    )
    .await;
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["true"])
    );

    let role = assert_created_alike(
        &kubectl,
        "role",
        "default",
        &|name| {
            words(&format!(
                "create role {name} --verb=get,list --resource=pods,configmaps --resource-name=x"
            ))
        },
        "role",
    )
    .await;
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]));

    assert_created_alike(
        &kubectl,
        "rolebinding",
        "default",
        &|name| {
            words(&format!(
                "create rolebinding {name} --role=role-pb --serviceaccount=default:sa --user=alice"
            ))
        },
        "rb",
    )
    .await;
    assert_created_alike(
        &kubectl,
        "clusterrole",
        "default",
        &|name| {
            words(&format!(
                "create clusterrole {name} --verb=get --resource=pods --non-resource-url=/healthz"
            ))
        },
        "cr",
    )
    .await;
    assert_created_alike(
        &kubectl,
        "clusterrolebinding",
        "default",
        &|name| {
            words(&format!(
                "create clusterrolebinding {name} --clusterrole=cr-pb --group=devs"
            ))
        },
        "crb",
    )
    .await;
}

#[tokio::test]
async fn kubectl_create_deployment_and_service_keep_zero_replicas_and_int_or_string_ports() {
    let Some((_cluster, kubectl)) = setup("kubectl_create_protobuf_apps").await else {
        return;
    };

    // `replicas` is a pointer in Go: an explicit 0 is sent, and must not be read as "unset".
    let deployment = assert_created_alike(
        &kubectl,
        "deployment",
        "default",
        &|name| {
            words(&format!(
                "create deployment {name} --image=busybox --replicas=0 --port=8080"
            ))
        },
        "deploy",
    )
    .await;
    assert_eq!(deployment["spec"]["replicas"], 0);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        8080
    );

    // targetPort is an IntOrString: a number here.
    let service = assert_created_alike(
        &kubectl,
        "service",
        "default",
        &|name| words(&format!("create service clusterip {name} --tcp=80:8080")),
        "svc",
    )
    .await;
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(service["spec"]["ports"][0]["port"], 80);

    // ... and a string when it names a port.
    let named = assert_created_alike(
        &kubectl,
        "service",
        "default",
        &|name| words(&format!("create service nodeport {name} --tcp=80:http")),
        "named",
    )
    .await;
    assert_eq!(named["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(named["spec"]["type"], "NodePort");
}

/// A body in a media type the server does not decode: 415 and a Status naming the accepted
/// types, through the official Python client.
#[tokio::test]
async fn a_body_in_an_unsupported_media_type_is_refused_with_415() {
    let Some((cluster, _kubectl)) = setup("unsupported_media_type").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let answer = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
api = config.new_client_from_config(sys.argv[1])

def post(path, content_type, body):
    # The client's generic call: any content type, the body sent as given (a str or bytes
    # unless the type is JSON, which the client serializes itself).
    response = api.call_api('POST', api.configuration.host + path,
                            header_params={'Content-Type': content_type,
                                           'Accept': 'application/json'},
                            body=body)
    response.read()
    return {'status': response.status, 'body': json.loads(response.data)}

cm = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'plain'}}
widget = b'k8s\x00' + b'\x0a\x00'
print(json.dumps({
    'text': post('/api/v1/namespaces/default/configmaps', 'text/plain', json.dumps(cm)),
    'custom_protobuf': post('/apis/test.example.com/v1/namespaces/default/widgets',
                            'application/vnd.kubernetes.protobuf', widget),
    'json_with_charset': post('/api/v1/namespaces/default/configmaps',
                              'application/json; charset=utf-8', dict(cm, metadata={'name': 'json'})),
}))
"#,
    )
    .await;

    let text = &answer["text"];
    assert_eq!(text["status"], 415, "{answer}");
    assert_eq!(text["body"]["kind"], "Status");
    assert_eq!(text["body"]["code"], 415);
    assert_eq!(text["body"]["reason"], "UnsupportedMediaType");
    assert_eq!(
        text["body"]["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );

    // Custom resources are served as JSON and YAML only.
    let custom = &answer["custom_protobuf"];
    assert_eq!(custom["status"], 415, "{answer}");
    assert_eq!(
        custom["body"]["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json, application/yaml"
    );

    // Media type parameters do not matter.
    assert_eq!(answer["json_with_charset"]["status"], 201, "{answer}");
}

/// A protobuf field: number `n`, length-delimited `bytes`.
fn pb(n: u8, bytes: &[u8]) -> Vec<u8> {
    assert!(bytes.len() < 128, "one-byte lengths only");
    let mut out = vec![n << 3 | 2, bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}

/// A ConfigMap `name` with `data: {key: value}` at `resource_version`, as a protobuf body.
fn configmap_protobuf(name: &str, resource_version: &str, key: &str, value: &str) -> Vec<u8> {
    let meta = [pb(1, name.as_bytes()), pb(6, resource_version.as_bytes())].concat();
    let entry = [pb(1, key.as_bytes()), pb(2, value.as_bytes())].concat();
    let configmap = [pb(1, &meta), pb(2, &entry)].concat();
    let type_meta = [pb(1, b"v1"), pb(2, b"ConfigMap")].concat();
    let unknown = [pb(1, &type_meta), pb(2, &configmap)].concat();
    [b"k8s\x00".as_slice(), &unknown].concat()
}

/// An update (PUT) in protobuf, as client-go sends one for a typed Update: decoded as a create
/// is, and held to the same resourceVersion precondition (409 when stale). kubectl and the
/// Python client send no protobuf PUT, so the body is built here and sent with kube-rs.
#[tokio::test]
async fn an_update_in_protobuf_replaces_the_object_under_its_resource_version() {
    let Some((cluster, kubectl)) = setup("protobuf_update").await else {
        return;
    };
    // Created from YAML, so that only the update is protobuf.
    let manifest = kubectl.manifest(
        "upd.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: upd}\ndata: {k: v1}\n",
    );
    kubectl.ok(&["create", "-f", &manifest]).await;
    let rv = kubectl
        .ok(&[
            "get",
            "configmap",
            "upd",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .await;
    let path = "/api/v1/namespaces/default/configmaps/upd";

    let answer = support::raw(
        &cluster,
        "PUT",
        path,
        "application/vnd.kubernetes.protobuf",
        configmap_protobuf("upd", &rv, "k", "v2"),
    )
    .await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let stored: Value =
        serde_json::from_str(&kubectl.ok(&["get", "configmap", "upd", "-o", "json"]).await)
            .unwrap();
    assert_eq!(stored["data"], json!({"k": "v2"}));

    let stale = support::raw(
        &cluster,
        "PUT",
        path,
        "application/vnd.kubernetes.protobuf",
        configmap_protobuf("upd", &rv, "k", "v3"),
    )
    .await;
    assert_eq!(
        stale.status,
        409,
        "{}",
        String::from_utf8_lossy(&stale.body)
    );
    assert_eq!(stale.json()["reason"], "Conflict");
}
