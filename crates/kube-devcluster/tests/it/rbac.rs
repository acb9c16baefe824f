//! Authentication and RBAC (`DevClusterOptions::rbac`) as kubectl and the Python client see
//! them: a pod's token (read from the kubeconfig the kubelet gave the pod) makes requests as the
//! pod's service account, refused with the API server's 403 until a Role bound to the account
//! allows them; a token no pod holds is 401; requests without a token (the admin's kubeconfig)
//! are allowed everything, as before. kubectl sends no token to a plain-HTTP server
//! (client-go reads credentials only for TLS), so it acts as the service account by
//! impersonation (`--as`), the Python client with the pod's token.

use serde_json::json;

use kube_devcluster::testing::{self, eventually};
use kube_devcluster::{DevCluster, DevClusterOptions};

use crate::support::{Kubectl, python, raw_with_token, wait_phase};

/// A pod of the service account `runner` that prints the token of the kubeconfig its
/// container's `$KUBECONFIG` names.
const TOKEN_READER: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: token-reader
spec:
  serviceAccountName: runner
  restartPolicy: Never
  containers:
    - name: main
      image: busybox
      command: [sh, -c, 'sed -n "s/^ *token: //p" "$KUBECONFIG"']
"#;

const RUNNER: &str = "system:serviceaccount:default:runner";

async fn setup(test: &str) -> Option<(DevCluster, Kubectl)> {
    let tools = testing::require_tools(test)?;
    let cluster = DevCluster::start(DevClusterOptions {
        rbac: true,
        ..DevClusterOptions::default()
    })
    .await
    .expect("the devcluster starts");
    let kubectl = Kubectl::new(&cluster, tools.kubectl.clone());
    Some((cluster, kubectl))
}

/// The token the kubelet gave a pod of `runner`, as the pod read it.
async fn runner_token(kubectl: &Kubectl) -> String {
    kubectl.ok(&["create", "serviceaccount", "runner"]).await;
    let manifest = kubectl.manifest("pod.yaml", TOKEN_READER);
    kubectl.ok(&["apply", "-f", &manifest]).await;
    wait_phase(kubectl, "token-reader", &["Succeeded"]).await;
    let token = kubectl
        .ok(&["logs", "token-reader"])
        .await
        .trim()
        .to_string();
    assert_eq!(
        token.len(),
        64,
        "a token in the pod's own kubeconfig: {token:?}"
    );
    token
}

#[tokio::test]
async fn a_service_account_is_refused_until_a_role_allows_it() {
    let Some((cluster, kubectl)) =
        setup("a_service_account_is_refused_until_a_role_allows_it").await
    else {
        return;
    };
    let token = runner_token(&kubectl).await;
    let as_runner = |args: &[&str]| {
        let mut all = vec![format!("--as={RUNNER}")];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    let run = |args: Vec<String>| {
        let kubectl = &kubectl;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl.run(&args).await
        }
    };
    // The token is the service account's, in its groups.
    let seen = python(&cluster, &as_token(&token, WHOAMI_AND_CREATE)).await;
    assert_eq!(
        seen["user"],
        json!({
            "username": RUNNER,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
        })
    );
    // Nothing is granted yet: the Status as the server writes it, and as kubectl prints it.
    let refused = format!(
        "configmaps is forbidden: User \"{RUNNER}\" cannot create resource \"configmaps\" in API \
         group \"\" in the namespace \"default\""
    );
    assert_eq!(
        seen["create"],
        json!({"status": 403, "reason": "Forbidden", "body": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": refused, "reason": "Forbidden", "details": {"kind": "configmaps"},
            "code": 403,
        }})
    );
    let denied = run(as_runner(&["get", "configmaps"])).await;
    assert!(!denied.success);
    assert_eq!(
        denied.stderr,
        format!(
            "Error from server (Forbidden): configmaps is forbidden: User \"{RUNNER}\" cannot \
             list resource \"configmaps\" in API group \"\" in the namespace \"default\"\n"
        )
    );
    let can_i = run(as_runner(&["auth", "can-i", "create", "configmaps"])).await;
    assert_eq!((can_i.success, can_i.stdout.trim()), (false, "no"));
    // A Role bound to the account allows what it lists, and nothing more.
    kubectl
        .ok(&[
            "create",
            "role",
            "cm-writer",
            "--verb=get,list,create",
            "--resource=configmaps",
        ])
        .await;
    kubectl
        .ok(&[
            "create",
            "rolebinding",
            "cm-writer",
            "--role=cm-writer",
            "--serviceaccount=default:runner",
        ])
        .await;
    let seen = python(&cluster, &as_token(&token, WHOAMI_AND_CREATE)).await;
    assert_eq!(seen["create"], json!({"status": 201}));
    let made = run(as_runner(&[
        "create",
        "configmap",
        "made",
        "--from-literal=a=b",
    ]))
    .await;
    assert!(made.success, "{}", made.stderr);
    let listed = run(as_runner(&["get", "configmaps", "-o", "name"])).await;
    assert!(
        listed.stdout.contains("configmap/made"),
        "{}",
        listed.stderr
    );
    let can_i = run(as_runner(&["auth", "can-i", "create", "configmaps"])).await;
    assert_eq!(can_i.stdout.trim(), "yes");
    let listed = run(as_runner(&["auth", "can-i", "--list"])).await;
    let rows = crate::support::rows(&listed.stdout);
    let row = |first: &str| rows.iter().find(|r| r[0] == first).cloned();
    assert_eq!(
        row("configmaps"),
        Some(
            ["configmaps", "[]", "[]", "[get", "list", "create]"]
                .map(String::from)
                .to_vec()
        ),
        "{}",
        listed.stdout
    );
    assert!(listed.stdout.contains("[/api/*]"), "{}", listed.stdout);
    let deleted = run(as_runner(&["delete", "configmap", "made"])).await;
    assert_eq!(
        deleted.stderr,
        format!(
            "Error from server (Forbidden): configmaps \"made\" is forbidden: User \"{RUNNER}\" \
             cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\"\n"
        )
    );
    let elsewhere = run(as_runner(&["get", "configmaps", "-n", "kube-system"])).await;
    assert!(
        elsewhere
            .stderr
            .contains("in the namespace \"kube-system\""),
        "{}",
        elsewhere.stderr
    );
    // The admin is unaffected.
    let admin = [
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ];
    assert_eq!(kubectl.ok(&admin).await, "devcluster");
    kubectl
        .ok(&["delete", "configmap", "made", "from-python"])
        .await;
    assert_eq!(
        kubectl
            .ok(&["auth", "can-i", "delete", "nodes"])
            .await
            .trim(),
        "yes"
    );
}

/// Python: who the token is (`userInfo`), and how creating a ConfigMap `from-python` went:
/// `{"status": 201}` or the refusal's status, reason and body.
const WHOAMI_AND_CREATE: &str = r#"
me = client.AuthenticationV1Api(api).create_self_subject_review({})
try:
    client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "from-python"}})
    create = {"status": 201}
except ApiException as e:
    create = {"status": e.status, "reason": e.reason, "body": json.loads(e.body)}
user = {"username": me.status.user_info.username, "groups": me.status.user_info.groups}
print(json.dumps({"user": user, "create": create}))
"#;

/// Python: listing ConfigMaps, `{"status": 200}` or the refusal's status, reason and body.
const LIST: &str = r#"
try:
    client.CoreV1Api(api).list_namespaced_config_map("default")
    print(json.dumps({"status": 200}))
except ApiException as e:
    print(json.dumps({"status": e.status, "reason": e.reason, "body": json.loads(e.body)}))
"#;

/// A Python script that runs `body` with `api`, a client of the cluster whose kubeconfig is
/// `sys.argv[1]` sending `token`.
fn as_token(token: &str, body: &str) -> String {
    format!(
        r#"
import json, sys
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(config_file=sys.argv[1])
configuration = client.Configuration.get_default_copy()
configuration.api_key = {{"authorization": "Bearer {token}"}}
api = client.ApiClient(configuration)
{body}"#
    )
}

#[tokio::test]
async fn a_token_no_pod_holds_is_unauthorized() {
    let Some((cluster, kubectl)) = setup("a_token_no_pod_holds_is_unauthorized").await else {
        return;
    };
    let unauthorized = json!({"status": 401, "reason": "Unauthorized", "body": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    }});
    assert_eq!(
        python(&cluster, &as_token("made-up", LIST)).await,
        unauthorized
    );
    let path = "/api/v1/namespaces/default/configmaps";
    let response = raw_with_token(&cluster, "GET", path, "made-up").await;
    assert_eq!(
        (response.status, String::from_utf8_lossy(&response.body)),
        (
            401,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n"
                .into()
        )
    );
    // A pod's token works while the pod exists, and is forgotten with it.
    let token = runner_token(&kubectl).await;
    assert_eq!(
        raw_with_token(&cluster, "GET", path, &token).await.status,
        403
    );
    kubectl.ok(&["delete", "pod", "token-reader"]).await;
    eventually(
        "the deleted pod's token refused",
        std::time::Duration::from_secs(10),
        || async {
            (raw_with_token(&cluster, "GET", path, &token).await.status == 401).then_some(())
        },
    )
    .await;
    // Without a token: the admin, as before.
    let listed = kubectl
        .ok(&["get", "serviceaccount", "runner", "-o", "name"])
        .await;
    assert_eq!(listed.trim(), "serviceaccount/runner");
}

/// Python: a server-side apply of the ConfigMap `applied`, `{"status": 201}` or the refusal.
const APPLY: &str = r#"
try:
    client.CoreV1Api(api).patch_namespaced_config_map(
        "applied", "default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}},
        field_manager="test", _content_type="application/apply-patch+yaml")
    print(json.dumps({"status": 201}))
except ApiException as e:
    print(json.dumps({"status": e.status, "message": json.loads(e.body)["message"]}))
"#;

#[tokio::test]
async fn a_server_side_apply_that_creates_needs_create_too() {
    let Some((cluster, kubectl)) = setup("a_server_side_apply_that_creates_needs_create_too").await
    else {
        return;
    };
    let token = runner_token(&kubectl).await;
    let role = [
        "create",
        "role",
        "patcher",
        "--verb=patch",
        "--resource=configmaps",
    ];
    kubectl.ok(&role).await;
    let binding = [
        "create",
        "rolebinding",
        "patcher",
        "--role=patcher",
        "--serviceaccount=default:runner",
    ];
    kubectl.ok(&binding).await;
    // As the real server words it: `NewForbidden` with the authorizer's reason, here none.
    let refused = python(&cluster, &as_token(&token, APPLY)).await;
    assert_eq!(
        refused,
        json!({"status": 403, "message": "configmaps \"applied\" is forbidden: "})
    );
    let grant = r#"[{"op": "add", "path": "/rules/0/verbs/-", "value": "create"}]"#;
    kubectl
        .ok(&["patch", "role", "patcher", "--type=json", "-p", grant])
        .await;
    assert_eq!(
        python(&cluster, &as_token(&token, APPLY)).await,
        json!({"status": 201})
    );
}
