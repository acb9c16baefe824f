//! Schemas of the built-in kinds, judged by real clients: unknown fields and wrong types in Pods,
//! Jobs and ConfigMaps answered as the real API server answers them for each `fieldValidation`
//! (kubectl's `--validate`), the structural checks of Pods and Jobs, the immutable fields of
//! Pods, ConfigMaps and Secrets, and `kubectl explain` of built-in kinds. And the CEL rules of a
//! CRD's schema (`x-kubernetes-validations`): evaluated on each write of a custom object, refused
//! at CRD create when they do not compile.

use crate::support;

use crate::support::setup;

use serde_json::{Value, json};

const POD_WITH_TYPO: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox\n    comand: [sleep, '30']\n";

const JOB_WITH_TYPO: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: typo\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n        comand: ['true']\n";

#[tokio::test]
async fn kubectl_apply_refuses_warns_or_ignores_an_unknown_field_of_a_pod_as_a_real_server() {
    let Some((_cluster, kubectl)) = setup("kubectl_unknown_field_of_a_pod").await else {
        return;
    };
    // --validate=strict (kubectl's default): the server refuses the create; kubectl prints
    // the server's message.
    let strict = kubectl.manifest("strict.yaml", &POD_WITH_TYPO.replace("NAME", "strict"));
    let out = kubectl.run(&["apply", "-f", &strict]).await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "Error from server (BadRequest): error when creating \"".to_string().as_str()
        ) && out.stderr.contains(
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].comand\""
        ),
        "{}",
        out.stderr
    );
    assert!(!kubectl.run(&["get", "pod", "strict"]).await.success);

    // --validate=warn: stored without the field, kubectl prints the server's warning.
    let warn = kubectl.manifest("warn.yaml", &POD_WITH_TYPO.replace("NAME", "warn"));
    let out = kubectl
        .run(&["apply", "--validate=warn", "-f", &warn])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Warning: unknown field \"spec.containers[0].comand\""),
        "{}",
        out.stderr
    );
    let pod: Value =
        serde_json::from_str(&kubectl.ok(&["get", "pod", "warn", "-o", "json"]).await).unwrap();
    assert!(
        pod["spec"]["containers"][0].get("comand").is_none(),
        "{pod}"
    );
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox");

    // --validate=false (fieldValidation=Ignore): stored without the field, silently.
    let ignore = kubectl.manifest("ignore.yaml", &POD_WITH_TYPO.replace("NAME", "ignore"));
    let out = kubectl
        .run(&["apply", "--validate=false", "-f", &ignore])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert!(!out.stderr.contains("unknown field"), "{}", out.stderr);
    let pod: Value =
        serde_json::from_str(&kubectl.ok(&["get", "pod", "ignore", "-o", "json"]).await).unwrap();
    assert!(
        pod["spec"]["containers"][0].get("comand").is_none(),
        "{pod}"
    );

    // An apply to the existing object is a patch: refused under Strict too, as the real
    // server's patch handler refuses it (422, the patch named as the invalid field).
    let out = kubectl.run(&["apply", "-f", &warn]).await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("strict decoding error: unknown field \"spec.containers[0].comand\""),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn kubectl_create_refuses_an_unknown_field_in_a_job_template() {
    let Some((_cluster, kubectl)) = setup("kubectl_unknown_field_of_a_job").await else {
        return;
    };
    let job = kubectl.manifest("job.yaml", JOB_WITH_TYPO);
    let out = kubectl.run(&["create", "-f", &job]).await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "Job in version \"v1\" cannot be handled as a Job: strict decoding error: unknown field \"spec.template.spec.containers[0].comand\""
        ),
        "{}",
        out.stderr
    );
}

/// `kubectl create -f` of each manifest fails, printing each of its wanted lines.
async fn create_refused(kubectl: &support::Kubectl, cases: &[(String, Vec<&str>)]) {
    for (i, (manifest, wanted)) in cases.iter().enumerate() {
        let path = kubectl.manifest(&format!("case{i}.json"), manifest);
        let out = kubectl.run(&["create", "-f", &path]).await;
        assert!(!out.success, "{manifest} was accepted: {}", out.stdout);
        for want in wanted {
            assert!(
                out.stderr.contains(want),
                "{manifest}: wanted {want:?} in\n{}",
                out.stderr
            );
        }
    }
}

#[tokio::test]
async fn kubectl_create_of_invalid_jobs_and_pods_prints_the_real_servers_errors() {
    let Some((_cluster, kubectl)) = setup("kubectl_invalid_jobs_and_pods").await else {
        return;
    };
    let job = |name: &str, restart: Option<&str>| {
        let mut spec =
            json!({"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]});
        if let Some(restart) = restart {
            spec["restartPolicy"] = json!(restart);
        }
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
               "spec": {"template": {"spec": spec}}})
        .to_string()
    };
    let pod = |name: &str, spec: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
            .to_string()
    };
    // k8s.io/kubernetes pkg/apis/batch/validation: Always (the pod default) and no value are
    // both "Required value" since the pod template defaults to Always.
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            job("always", Some("Always")),
            vec![
                "The Job \"always\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ],
        ),
        (
            job("unset", None),
            vec![
                "The Job \"unset\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ],
        ),
        (
            job("sometimes", Some("Sometimes")),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"",
            ],
        ),
        (
            pod("empty", json!({"containers": []})),
            vec!["The Pod \"empty\" is invalid: spec.containers: Required value"],
        ),
        (
            pod(
                "bad-containers",
                json!({"containers": [
                    {"name": "c", "image": "busybox"},
                    {"name": "c", "image": "busybox"},
                    {"name": "Upper", "image": "busybox"},
                    {"image": "busybox"},
                    {"name": "noimage"}
                ]}),
            ),
            vec![
                "spec.containers[1].name: Duplicate value: \"c\"",
                "spec.containers[2].name: Invalid value: \"Upper\": a lowercase RFC 1123 label must consist of",
                "spec.containers[3].name: Required value",
                "spec.containers[4].image: Required value",
            ],
        ),
        (
            pod(
                "sometimes",
                json!({"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "busybox"}]}),
            ),
            vec![
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ],
        ),
    ];
    create_refused(&kubectl, &cases).await;
    // The valid Job is accepted.
    let path = kubectl.manifest("ok.json", &job("ok", Some("Never")));
    kubectl.ok(&["create", "-f", &path]).await;
}

/// A Deployment's template must carry the labels its selector selects and restart `Always`, its
/// selector must select something and never changes (`ValidateDeploymentSpec`,
/// `ValidatePodTemplateSpecForReplicaSet`, the apps/v1 strategy), as kubectl prints the 422.
#[tokio::test]
async fn kubectl_create_of_invalid_deployments_prints_the_real_servers_errors() {
    let Some((_cluster, kubectl)) = setup("invalid_deployments").await else {
        return;
    };
    let deployment = |name: &str, selector: Value, labels: Value, pod: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": selector, "template": {"metadata": {"labels": labels}, "spec": pod}}})
        .to_string()
    };
    let container = json!([{"name": "web", "image": "nginx"}]);
    let web = json!({"matchLabels": {"app": "web"}});
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            deployment(
                "mismatched",
                web.clone(),
                json!({"app": "other"}),
                json!({"containers": container, "restartPolicy": "Never", "activeDeadlineSeconds": 5}),
            ),
            vec![
                "The Deployment \"mismatched\" is invalid: ",
                "* spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
                "* spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                "* spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ],
        ),
        (
            deployment(
                "empty",
                json!({}),
                json!({"app": "web"}),
                json!({"containers": container}),
            ),
            vec![
                "The Deployment \"empty\" is invalid: spec.selector: Invalid value: {}: empty selector is invalid for deployment",
            ],
        ),
    ];
    create_refused(&kubectl, &cases).await;
    // A valid one is accepted, and its selector cannot change.
    let ok = deployment(
        "ok",
        web,
        json!({"app": "web", "tier": "front"}),
        json!({"containers": container}),
    );
    kubectl
        .ok(&["create", "-f", &kubectl.manifest("ok.json", &ok)])
        .await;
    let out = kubectl
        .run(&[
            "patch",
            "deployment",
            "ok",
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"matchLabels":{"tier":"front"}}}}"#,
        ])
        .await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            r#"The Deployment "ok" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"front"}}: field is immutable"#
        ),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn kubectl_cannot_change_immutable_fields_of_pods_configmaps_and_secrets() {
    let Some((_cluster, kubectl)) = setup("kubectl_immutable_fields").await else {
        return;
    };
    let pod = kubectl.manifest(
        "pod.json",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"]}]}})
        .to_string(),
    );
    kubectl.ok(&["create", "-f", &pod]).await;
    // The image and activeDeadlineSeconds may change (pkg/apis/core/validation ValidatePodUpdate).
    kubectl.ok(&["set", "image", "pod/p", "c=alpine"]).await;
    kubectl
        .ok(&[
            "patch",
            "pod",
            "p",
            "-p",
            r#"{"spec":{"activeDeadlineSeconds":600}}"#,
        ])
        .await;
    let out = kubectl
        .run(&[
            "patch",
            "pod",
            "p",
            "-p",
            r#"{"spec":{"restartPolicy":"Always"}}"#,
        ])
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "The Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ),
        "{}",
        out.stderr
    );

    // (From manifests: kubectl's imperative `create configmap` sends protobuf.)
    let cm = kubectl.manifest(
        "cm.json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}})
            .to_string(),
    );
    kubectl.ok(&["apply", "-f", &cm]).await;
    kubectl
        .ok(&["patch", "configmap", "cm", "-p", r#"{"data":{"a":"2"}}"#])
        .await;
    kubectl
        .ok(&["patch", "configmap", "cm", "-p", r#"{"immutable":true}"#])
        .await;
    let out = kubectl
        .run(&["patch", "configmap", "cm", "-p", r#"{"data":{"a":"3"}}"#])
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "The ConfigMap \"cm\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        ),
        "{}",
        out.stderr
    );
    let out = kubectl
        .run(&["patch", "configmap", "cm", "-p", r#"{"immutable":false}"#])
        .await;
    assert!(
        out.stderr
            .contains("immutable: Forbidden: field is immutable when `immutable` is set"),
        "{}",
        out.stderr
    );
    // Labels may still change.
    kubectl.ok(&["label", "configmap", "cm", "x=y"]).await;

    let secret = kubectl.manifest(
        "secret.json",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "MQ=="}})
            .to_string(),
    );
    kubectl.ok(&["apply", "-f", &secret]).await;
    kubectl
        .ok(&["patch", "secret", "s", "-p", r#"{"immutable":true}"#])
        .await;
    let out = kubectl
        .run(&["patch", "secret", "s", "-p", r#"{"stringData":{"a":"2"}}"#])
        .await;
    assert!(
        out.stderr.contains(
            "The Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        ),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn kubectl_explain_reads_the_built_in_schemas() {
    let Some((_cluster, kubectl)) = setup("kubectl_explain_built_ins").await else {
        return;
    };
    let out = kubectl.ok(&["explain", "pods.spec"]).await;
    assert!(out.contains("KIND:       Pod"), "{out}");
    assert!(out.contains("FIELD: spec <PodSpec>"), "{out}");
    assert!(
        out.contains("containers\t<[]Container> -required-"),
        "{out}"
    );
    let out = kubectl
        .ok(&["explain", "jobs.spec.template.spec.containers"])
        .await;
    assert!(out.contains("GROUP:      batch"), "{out}");
    assert!(out.contains("command\t<[]string>"), "{out}");
    let out = kubectl.ok(&["explain", "configmaps"]).await;
    assert!(out.contains("immutable\t<boolean>"), "{out}");
    let out = kubectl
        .run(&["explain", "pods.spec.containers.comand"])
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains("field \"comand\" does not exist"),
        "{}",
        out.stderr
    );
}

/// `/openapi/v2`, which kubectl reads in gnostic's protobuf encoding: `explain --output
/// plaintext-openapiv2` of a built-in field and of a custom resource (whose schema is converted
/// as apiextensions-apiserver's ToStructuralOpenAPIV2 converts it), and the validation of a
/// `kind: List`'s items, which kubectl makes itself from those definitions: valid items are
/// created, an unknown field is kubectl's own `ValidationError` and nothing is created, as
/// against a real cluster.
#[tokio::test]
async fn kubectl_reads_the_openapi_v2_definitions_to_explain_and_to_validate_list_items() {
    let Some((cluster, kubectl)) = setup("kubectl_reads_openapi_v2").await else {
        return;
    };
    support::install_widget_crd(&cluster).await;
    let v2 = ["--output", "plaintext-openapiv2"];
    let out = kubectl
        .ok(&[&["explain", "pods.spec.restartPolicy"][..], &v2].concat())
        .await;
    assert!(out.contains("FIELD:    restartPolicy <string>"), "{out}");
    assert!(out.contains("Restart policy for all containers"), "{out}");
    let out = kubectl
        .ok(&[&["explain", "widgets.spec"][..], &v2].concat())
        .await;
    assert!(out.contains("color\t<string> -required-"), "{out}");
    assert!(out.contains("parts\t<[]Object>"), "{out}");

    let valid = kubectl.manifest(
        "valid.yaml",
        r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: l1}, data: {a: "1"}}
- apiVersion: test.example.com/v1
  kind: Widget
  metadata: {name: w1}
  spec: {color: red, blob: {any: [thing]}, parts: [{partName: p}]}
  status: {conditions: [{type: X, whatever: 1}]}
"#,
    );
    let out = kubectl.ok(&["create", "-f", &valid]).await;
    assert!(out.contains("configmap/l1 created"), "{out}");
    assert!(out.contains("widget.test.example.com/w1 created"), "{out}");

    for (item, error) in [
        (
            "{apiVersion: v1, kind: ConfigMap, metadata: {name: l2}, dataa: {a: \"1\"}}",
            r#"error validating data: ValidationError(ConfigMap): unknown field "dataa" in io.k8s.api.core.v1.ConfigMap"#,
        ),
        (
            "{apiVersion: test.example.com/v1, kind: Widget, metadata: {name: w2}, spec: {color: red, colour: blue}}",
            r#"error validating data: ValidationError(Widget.spec): unknown field "colour" in com.example.test.v1.Widget.spec"#,
        ),
    ] {
        let file = kubectl.manifest(
            "invalid.yaml",
            &format!("apiVersion: v1\nkind: List\nitems:\n- {item}\n"),
        );
        let out = kubectl.run(&["create", "-f", &file]).await;
        assert!(!out.success && out.stderr.contains(error), "{}", out.stderr);
    }
    let out = kubectl
        .run(&[
            "get",
            "configmap/l2",
            "widget/w2",
            "--ignore-not-found",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.stdout, "", "{}", out.stderr);
}

/// What a Job's update may not change, as `ValidateJobSpecUpdate` refuses it: `completions`
/// (an Indexed Job's only together with `parallelism`), `completionMode` and
/// `podFailurePolicy`; the controller then never runs more pods than asked for.
#[tokio::test]
async fn kubectl_patch_of_a_jobs_immutable_fields_is_refused() {
    let Some((_cluster, kubectl)) = setup("kubectl_patch_job_immutable_fields").await else {
        return;
    };
    kubectl.create_sleeping_job("jc").await;
    let indexed = kubectl.manifest(
        "ji.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: ji}\nspec:\n  completions: 2\n  parallelism: 2\n  completionMode: Indexed\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox, command: [sleep, \"30\"]}]\n",
    );
    kubectl.ok(&["create", "-f", &indexed]).await;
    let policy = r#"{"spec":{"podFailurePolicy":{"rules":[{"action":"FailJob","onExitCodes":{"operator":"In","values":[42]}}]}}}"#;
    for (job, patch, wanted) in [
        (
            "jc",
            r#"{"spec":{"completions":3}}"#,
            "spec.completions: Invalid value: 3: field is immutable",
        ),
        (
            "jc",
            r#"{"spec":{"completionMode":"Indexed"}}"#,
            r#"spec.completionMode: Invalid value: "Indexed": field is immutable"#,
        ),
        ("jc", policy, "spec.podFailurePolicy: Invalid value: "),
        (
            "ji",
            r#"{"spec":{"completions":3}}"#,
            "spec.completions: Invalid value: 3: can only be modified in tandem with spec.parallelism",
        ),
    ] {
        let out = kubectl
            .run(&["patch", "job", job, "--type=merge", "-p", patch])
            .await;
        assert!(!out.success, "{patch} was accepted: {}", out.stdout);
        assert!(
            out.stderr
                .contains(&format!("The Job \"{job}\" is invalid: {wanted}")),
            "{patch}: wanted {wanted:?} in\n{}",
            out.stderr
        );
    }
    let out = kubectl
        .ok(&[
            "patch",
            "job",
            "ji",
            "--type=merge",
            "-p",
            r#"{"spec":{"completions":3,"parallelism":3}}"#,
        ])
        .await;
    assert!(out.contains("job.batch/ji patched"), "{out}");
    let completions = kubectl
        .ok(&["get", "job", "jc", "-o", "jsonpath={.spec.completions}"])
        .await;
    assert_eq!(completions, "1");
}

/// What the API server's defaulting writes into Pods, Jobs' and Deployments' pod templates and
/// Deployments (pkg/apis/core/v1 and apps/v1 defaults.go, the lists pinned by
/// `TestPodDefaults` and `TestWorkloadDefaults`), read back by the Python client; an update is
/// defaulted as a create is.
#[tokio::test]
async fn pods_templates_and_deployments_read_back_with_the_api_servers_defaults() {
    let Some((cluster, kubectl)) = setup("pod_defaults").await else {
        return;
    };
    let pod_file = kubectl.manifest(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n    command: [sleep, \"30\"]\n    ports: [{containerPort: 80}]\n    resources: {limits: {cpu: 100m}}\n    env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n  - {name: d, image: busybox, command: [sleep, \"30\"]}\n  volumes: [{name: scratch}, {name: cm, configMap: {name: settings}}]\n",
    );
    kubectl.ok(&["create", "-f", &pod_file]).await;
    kubectl
        .ok(&[
            "create",
            "job",
            "j",
            "--image=busybox:1.36",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .await;
    let deployment_file = kubectl.manifest(
        "d.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: \"busybox:1.36\", command: [sleep, \"30\"]}]\n",
    );
    kubectl.ok(&["create", "-f", &deployment_file]).await;
    // An update is defaulted too: replaced by its manifest, it keeps every default.
    let out = kubectl.ok(&["replace", "-f", &deployment_file]).await;
    assert!(out.contains("deployment.apps/d replaced"), "{out}");
    let out = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
api = client.ApiClient()
pod = api.sanitize_for_serialization(client.CoreV1Api().read_namespaced_pod("p", "default"))
job = api.sanitize_for_serialization(client.BatchV1Api().read_namespaced_job("j", "default"))
deployment = api.sanitize_for_serialization(client.AppsV1Api().read_namespaced_deployment("d", "default"))
print(json.dumps({"pod": pod["spec"], "job": job["spec"]["template"]["spec"], "deployment": deployment["spec"]}))
"#,
    )
    .await;
    let pod = &out["pod"];
    for (field, value) in [
        ("dnsPolicy", json!("ClusterFirst")),
        ("restartPolicy", json!("Always")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        ("terminationGracePeriodSeconds", json!(30)),
        ("enableServiceLinks", json!(true)),
    ] {
        assert_eq!(pod[field], value, "{field}: {pod}");
    }
    let c = &pod["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent", "{pod}");
    assert_eq!(pod["containers"][1]["imagePullPolicy"], "Always", "{pod}");
    assert_eq!(c["ports"][0]["protocol"], "TCP", "{pod}");
    assert_eq!(c["resources"]["requests"], json!({"cpu": "100m"}), "{pod}");
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1",
        "{pod}"
    );
    assert_eq!(pod["volumes"][0]["emptyDir"], json!({}), "{pod}");
    assert_eq!(pod["volumes"][1]["configMap"]["defaultMode"], 420, "{pod}");

    let job = &out["job"];
    assert_eq!(job["dnsPolicy"], "ClusterFirst", "{job}");
    assert_eq!(job["terminationGracePeriodSeconds"], 30, "{job}");
    assert_eq!(
        job["containers"][0]["terminationMessagePath"], "/dev/termination-log",
        "{job}"
    );
    assert_eq!(
        job["containers"][0]["imagePullPolicy"], "IfNotPresent",
        "{job}"
    );
    assert!(
        job.get("enableServiceLinks").is_none_or(Value::is_null),
        "{job}"
    );

    let deployment = &out["deployment"];
    assert_eq!(deployment["replicas"], 1, "{deployment}");
    assert_eq!(deployment["revisionHistoryLimit"], 10, "{deployment}");
    assert_eq!(deployment["progressDeadlineSeconds"], 600, "{deployment}");
    assert_eq!(
        deployment["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
        "{deployment}"
    );
    assert_eq!(
        deployment["template"]["spec"]["schedulerName"],
        "default-scheduler"
    );
}

const PYTHON_WRONG_TYPES: &str = r#"
import json, sys
from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
api = v1.api_client
ns = "default"

def send(method, path, body):
    # The client's models refuse a label that is no string before sending it; another client
    # (or an older one) sends it: the raw request through the client's own request machinery.
    request = api.param_serialize(method, path, header_params={"Content-Type": "application/json", "Accept": "application/json"}, body=body, auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    api.response_deserialize(response, {"2XX": "object"})  # raises ApiException unless 2xx
    return response

def refusal(method, path, body):
    try:
        send(method, path, body)
        return None
    except client.exceptions.ApiException as e:
        body = json.loads(e.body)
        return [e.status, body["reason"], body["message"]]

v1.create_namespaced_config_map(ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"}, "data": {"a": "1"}})
refused = refusal("POST", "/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "labels": "x"}})
number = refusal("POST", "/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad2"}, "data": {"n": 1}})
listed = [cm.metadata.name for cm in v1.list_namespaced_config_map(ns).items]
# No fieldValidation: the server's default is Warn, the unknown field is dropped, a warning sent.
response = send("POST", "/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"], "comand": ["x"]}]}})
warning = response.headers.get("Warning")
pod = json.loads(response.data)
print(json.dumps({"refused": refused, "number": number, "listed": listed, "warning": warning, "container": pod["spec"]["containers"][0]}))
"#;

#[tokio::test]
async fn python_client_gets_400_for_fields_of_the_wrong_type_and_can_still_list() {
    let Some((cluster, _kubectl)) = setup("python_wrong_types").await else {
        return;
    };
    let seen = support::python(&cluster, PYTHON_WRONG_TYPES).await;
    // k8s.io/apiserver handlers/rest.go transformDecodeError around the json decoder's error.
    assert_eq!(
        seen["refused"],
        json!([
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"
        ])
    );
    assert_eq!(
        seen["number"],
        json!([
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        ])
    );
    assert_eq!(seen["listed"], json!(["good"]));
    assert!(seen["container"].get("comand").is_none(), "{seen}");
    assert_eq!(
        seen["warning"],
        json!("299 - \"unknown field \\\"spec.containers[0].comand\\\"\"")
    );
    assert_eq!(seen["container"]["command"], json!(["true"]));
}

/// A CRD whose schema carries CEL rules: a value rule with a message, one with `fieldPath` and
/// `reason`, a transition rule, and one with a `messageExpression`.
const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.test.example.com
spec:
  group: test.example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!has(self.low) || !has(self.high) || self.low <= self.high"
              message: must not exceed high
              fieldPath: .low
              reason: FieldValueForbidden
            properties:
              timeout:
                type: integer
                x-kubernetes-validations:
                - {rule: "self != 0", message: "must not be 0 (use -1 for unlimited)"}
              mode:
                type: string
                x-kubernetes-validations:
                - {rule: "self == oldSelf", message: is immutable}
              size:
                type: integer
                x-kubernetes-validations:
                - {rule: "self < 10", messageExpression: "'must be under 10, not ' + string(self)"}
              low: {type: integer}
              high: {type: integer}
"#;

fn gadget(name: &str, spec: Value) -> String {
    json!({"apiVersion": "test.example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

#[tokio::test]
async fn kubectl_create_of_a_custom_object_breaking_a_cel_rule_gets_the_real_servers_422() {
    let Some((_cluster, kubectl)) = setup("kubectl_cel_rules").await else {
        return;
    };
    let crd = kubectl.manifest("crd.yaml", GADGET_CRD);
    kubectl.ok(&["apply", "-f", &crd]).await;
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.test.example.com",
        ])
        .await;
    // apiextensions-apiserver pkg/apiserver/schema/cel/validation.go: the cause is at the rule's
    // node, its value the node's schema type, its detail the rule's message.
    let cases = [
        (
            json!({"timeout": 0}),
            "The Gadget \"g\" is invalid: spec.timeout: Invalid value: \"integer\": must not be 0 (use -1 for unlimited)",
        ),
        (
            json!({"low": 5, "high": 1}),
            "The Gadget \"g\" is invalid: spec.low: Forbidden: must not exceed high",
        ),
        (
            json!({"size": 12}),
            "The Gadget \"g\" is invalid: spec.size: Invalid value: \"integer\": must be under 10, not 12",
        ),
    ];
    for (spec, expected) in cases {
        let file = kubectl.manifest("g.json", &gadget("g", spec.clone()));
        let out = kubectl.run(&["create", "-f", &file]).await;
        assert!(!out.success, "{spec} was accepted");
        assert!(out.stderr.contains(expected), "{spec}: {}", out.stderr);
        // Nothing was stored.
        assert!(!kubectl.run(&["get", "gadget", "g"]).await.success);
    }
    // -1 and a valid range pass; a transition rule does not run on a create.
    let ok = kubectl.manifest(
        "ok.json",
        &gadget(
            "ok",
            json!({"timeout": -1, "low": 1, "high": 5, "mode": "a"}),
        ),
    );
    kubectl.ok(&["create", "-f", &ok]).await;
    // On an update it compares with the stored value.
    let out = kubectl
        .run(&[
            "patch",
            "gadget",
            "ok",
            "--type=merge",
            "-p",
            r#"{"spec":{"mode":"b"}}"#,
        ])
        .await;
    assert!(!out.success);
    assert!(
        out.stderr.contains(
            "The Gadget \"ok\" is invalid: spec.mode: Invalid value: \"string\": is immutable"
        ),
        "{}",
        out.stderr
    );
    kubectl
        .ok(&[
            "patch",
            "gadget",
            "ok",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":3}}"#,
        ])
        .await;
    // A structural problem keeps the rules from running (customresource/strategy.go
    // hasBlockingErr): one cause says so.
    let wrong = kubectl.manifest(
        "wrong.json",
        &gadget("wrong", json!({"timeout": "x", "size": 12})),
    );
    let out = kubectl.run(&["create", "-f", &wrong]).await;
    assert!(
        out.stderr.contains("some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("must be under 10"), "{}", out.stderr);
}

#[tokio::test]
async fn kubectl_cannot_create_a_crd_whose_rule_does_not_compile() {
    let Some((_cluster, kubectl)) = setup("kubectl_cel_rule_compile").await else {
        return;
    };
    let broken = GADGET_CRD.replace(r#"rule: "self != 0""#, r#"rule: "self !=""#);
    let crd = kubectl.manifest("crd.yaml", &broken);
    let out = kubectl.run(&["create", "-f", &crd]).await;
    assert!(!out.success, "{}", out.stdout);
    // apiextensions validation.go ValidateCustomResourceDefinitionOpenAPISchema, with the
    // rule as Go prints it, then the compiler's message.
    assert!(
        out.stderr.contains(
            "The CustomResourceDefinition \"gadgets.test.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[timeout].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self !=\", Message:\"must not be 0 (use -1 for unlimited)\""
        ) && out.stderr.contains("compilation failed: ERROR: <input>:1:"),
        "{}",
        out.stderr
    );
    assert!(
        !kubectl
            .run(&["get", "crd", "gadgets.test.example.com"])
            .await
            .success
    );
}

const PYTHON_CEL_RULE: &str = r#"
import json, sys
from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
custom = client.CustomObjectsApi()
body = {"apiVersion": "test.example.com/v1", "kind": "Gadget", "metadata": {"name": "zero"}, "spec": {"timeout": 0}}
try:
    custom.create_namespaced_custom_object("test.example.com", "v1", "default", "gadgets", body)
    refused = None
except client.exceptions.ApiException as e:
    refused = {"status": e.status, "body": json.loads(e.body)}
listed = custom.list_namespaced_custom_object("test.example.com", "v1", "default", "gadgets")["items"]
print(json.dumps({"refused": refused, "listed": [o["metadata"]["name"] for o in listed]}))
"#;

#[tokio::test]
async fn python_client_gets_the_422_of_a_cel_rule_with_its_cause() {
    let Some((cluster, kubectl)) = setup("python_cel_rule").await else {
        return;
    };
    let crd = kubectl.manifest("crd.yaml", GADGET_CRD);
    kubectl.ok(&["apply", "-f", &crd]).await;
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.test.example.com",
        ])
        .await;
    let seen = support::python(&cluster, PYTHON_CEL_RULE).await;
    let refused = &seen["refused"];
    assert_eq!(refused["status"], 422, "{seen}");
    assert_eq!(refused["body"]["reason"], "Invalid");
    assert_eq!(
        refused["body"]["message"],
        "Gadget.test.example.com \"zero\" is invalid: spec.timeout: Invalid value: \"integer\": must not be 0 (use -1 for unlimited)"
    );
    assert_eq!(
        refused["body"]["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec.timeout",
                "message": "Invalid value: \"integer\": must not be 0 (use -1 for unlimited)"}])
    );
    assert_eq!(seen["listed"], json!([]));
}
