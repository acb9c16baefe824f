//! Services as the real API server stores and prints them, through kubectl and the official
//! Python client: `SetDefaults_Service` on every write, a cluster IP from the service range
//! (10.96.0.0/12, as kubeadm and kind configure it) kept across updates, the IP families of a
//! single-stack cluster, the empty status Go writes, and `kubectl get svc`'s columns.

use crate::support::{self, rows, setup};

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

const WEB: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n";

/// Whether `ip` is in 10.96.0.0/12.
fn in_service_range(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>()
        .is_ok_and(|ip| u32::from(ip) >> 20 == u32::from(Ipv4Addr::new(10, 96, 0, 0)) >> 20)
}

/// The service `name` as `kubectl get -o json` shows it.
async fn service(kubectl: &support::Kubectl, name: &str) -> Value {
    serde_json::from_str(&kubectl.ok(&["get", "service", name, "-o", "json"]).await).unwrap()
}

/// A service applied with only its selector and port gets what the real server writes:
/// `SetDefaults_Service` (pkg/apis/core/v1/defaults.go: type, session affinity, the port's
/// protocol and target port, internal traffic policy), the IP families of a single-stack
/// cluster and a cluster IP of the range (pkg/registry/core/service/storage/alloc.go
/// `initIPFamilyFields`, `allocClusterIPs`), and the status of `PrepareForCreate`
/// (pkg/registry/core/service/strategy.go), which Go writes as `{loadBalancer: {}}`. The same
/// manifest applied again, or replaced, keeps the address (storage.go `patchAllocatedValues`).
#[tokio::test]
async fn kubectl_applied_services_get_the_api_servers_defaults_and_a_cluster_ip() {
    let Some((_cluster, kubectl)) = setup("kubectl_applied_services_get_defaults").await else {
        return;
    };
    let path = kubectl.manifest("web.yaml", WEB);
    kubectl.ok(&["apply", "-f", &path]).await;
    let web = service(&kubectl, "web").await;
    let spec = &web["spec"];
    let ip = spec["clusterIP"].as_str().unwrap_or_default().to_string();
    assert!(in_service_range(&ip), "{spec}");
    assert_eq!(
        spec,
        &json!({
            "clusterIP": ip,
            "clusterIPs": [ip],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "selector": {"app": "web"},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        })
    );
    assert_eq!(web["status"], json!({"loadBalancer": {}}));

    kubectl.ok(&["apply", "-f", &path]).await;
    kubectl.ok(&["replace", "-f", &path]).await;
    assert_eq!(service(&kubectl, "web").await["spec"]["clusterIP"], ip);

    // Each service its own address; a headless one keeps `None`.
    let mut seen = HashSet::from([ip]);
    for name in ["a", "b", "c"] {
        kubectl
            .ok(&["create", "service", "clusterip", name, "--tcp=8080:http"])
            .await;
        let spec = service(&kubectl, name).await["spec"].clone();
        let ip = spec["clusterIP"].as_str().unwrap().to_string();
        assert!(in_service_range(&ip), "{spec}");
        assert!(seen.insert(ip), "{spec}");
        assert_eq!(
            spec["ports"][0],
            json!({"name": "8080-http", "port": 8080, "protocol": "TCP", "targetPort": "http"})
        );
    }
}

/// Headless services and external names get what alloc.go `initIPFamilyFields` gives them on a
/// single-stack cluster: a headless service with a selector one family, `SingleStack`; one
/// without a selector both families, `RequireDualStack`; an external name no address and no
/// family (and no internal traffic policy, which `SetDefaults_Service` gives the other types).
#[tokio::test]
async fn headless_services_and_external_names_get_the_ip_fields_of_a_single_stack_cluster() {
    let Some((_cluster, kubectl)) = setup("headless_services_and_external_names").await else {
        return;
    };
    kubectl
        .ok(&[
            "create",
            "service",
            "clusterip",
            "selecting",
            "--clusterip=None",
        ])
        .await;
    let path = kubectl.manifest(
        "headless.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: bare}\nspec:\n  clusterIP: None\n  ports: [{port: 53, protocol: UDP}]\n",
    );
    kubectl.ok(&["apply", "-f", &path]).await;
    kubectl
        .ok(&[
            "create",
            "service",
            "externalname",
            "db",
            "--external-name=db.example.com",
        ])
        .await;

    let selecting = service(&kubectl, "selecting").await["spec"].clone();
    assert_eq!(selecting["clusterIP"], "None", "{selecting}");
    assert_eq!(selecting["clusterIPs"], json!(["None"]));
    assert_eq!(selecting["ipFamilies"], json!(["IPv4"]));
    assert_eq!(selecting["ipFamilyPolicy"], "SingleStack");

    let bare = service(&kubectl, "bare").await["spec"].clone();
    assert_eq!(bare["clusterIPs"], json!(["None"]), "{bare}");
    assert_eq!(bare["ipFamilies"], json!(["IPv4", "IPv6"]));
    assert_eq!(bare["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(
        bare["ports"][0],
        json!({"port": 53, "protocol": "UDP", "targetPort": 53})
    );

    let db = service(&kubectl, "db").await["spec"].clone();
    assert_eq!(db["type"], "ExternalName", "{db}");
    assert_eq!(db["sessionAffinity"], "None");
    for absent in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "internalTrafficPolicy",
    ] {
        assert!(db.get(absent).is_none(), "{absent} in {db}");
    }
}

/// `kubectl get svc` prints the real server's columns (pkg/printers/internalversion/printers.go
/// `printService`: TYPE, CLUSTER-IP, EXTERNAL-IP from `getServiceExternalIP`, PORT(S) from
/// `makePortString`; SELECTOR with `-o wide`), and a load balancer nothing provides is
/// `<pending>`, with `externalTrafficPolicy: Cluster` (`SetDefaults_Service`).
#[tokio::test]
async fn kubectl_get_services_prints_type_addresses_and_ports() {
    let Some((_cluster, kubectl)) = setup("kubectl_get_services_prints_columns").await else {
        return;
    };
    let path = kubectl.manifest("web.yaml", WEB);
    kubectl.ok(&["apply", "-f", &path]).await;
    kubectl
        .ok(&[
            "create",
            "service",
            "externalname",
            "db",
            "--external-name=db.example.com",
        ])
        .await;
    // A load balancer that asks for no node ports: its PORT(S) are the service's alone.
    let lb = kubectl.manifest(
        "lb.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec:\n  type: LoadBalancer\n  allocateLoadBalancerNodePorts: false\n  ports: [{port: 443, targetPort: 8443}]\n",
    );
    kubectl.ok(&["apply", "-f", &lb]).await;
    let ip = service(&kubectl, "web").await["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let lb = service(&kubectl, "lb").await["spec"].clone();
    assert_eq!(lb["externalTrafficPolicy"], "Cluster", "{lb}");
    let lb_ip = lb["clusterIP"].as_str().unwrap().to_string();

    let table = rows(&kubectl.ok(&["get", "services"]).await);
    assert_eq!(
        table[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{table:?}"
    );
    assert_eq!(
        table[1][..5],
        ["db", "ExternalName", "<none>", "db.example.com", "<none>"]
    );
    assert_eq!(
        table[2][..5],
        ["lb", "LoadBalancer", &lb_ip, "<pending>", "443/TCP"]
    );
    assert_eq!(table[3][..5], ["web", "ClusterIP", &ip, "<none>", "80/TCP"]);

    let wide = rows(&kubectl.ok(&["get", "service", "web", "-o", "wide"]).await);
    assert_eq!(
        wide[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ]
    );
    assert_eq!(wide[1][6], "app=web", "{wide:?}");
}

/// `NodePort` and `LoadBalancer` services get a node port per port from the default range,
/// 30000-32767 (alloc.go `initNodePorts`), which `kubectl get svc` shows as `80:31234/TCP`; one
/// asked for that another service holds is refused as the port allocator refuses it
/// (portallocator `ErrAllocated`); the same manifest applied again keeps them (storage.go
/// `patchAllocatedValues`).
#[tokio::test]
async fn node_port_and_load_balancer_services_get_node_ports() {
    let Some((_cluster, kubectl)) = setup("node_port_and_load_balancer_services").await else {
        return;
    };
    let node_port = |service: &Value| service["spec"]["ports"][0]["nodePort"].as_i64();
    kubectl
        .ok(&["create", "service", "nodeport", "np", "--tcp=80:8080"])
        .await;
    kubectl
        .ok(&["create", "service", "loadbalancer", "lb", "--tcp=443:8443"])
        .await;
    let np = node_port(&service(&kubectl, "np").await).unwrap();
    let lb = node_port(&service(&kubectl, "lb").await).unwrap();
    assert!((30000..=32767).contains(&np) && (30000..=32767).contains(&lb) && np != lb);

    let table = rows(&kubectl.ok(&["get", "service", "np"]).await);
    assert_eq!(table[1][4], format!("80:{np}/TCP"), "{table:?}");

    let taken = kubectl.manifest(
        "taken.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: taken}}\nspec:\n  type: NodePort\n  ports: [{{port: 80, nodePort: {np}}}]\n"
        ),
    );
    let out = kubectl.run(&["apply", "-f", &taken]).await;
    assert!(
        !out.success
            && out.stderr.contains(&format!(
                "The Service \"taken\" is invalid: spec.ports[0].nodePort: Invalid value: {np}: provided port is already allocated"
            )),
        "{}",
        out.stderr
    );

    let again = kubectl.manifest(
        "again.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: again}\nspec:\n  type: NodePort\n  ports: [{name: web, port: 80}]\n",
    );
    kubectl.ok(&["apply", "-f", &again]).await;
    let first = node_port(&service(&kubectl, "again").await);
    kubectl.ok(&["replace", "-f", &again]).await;
    assert_eq!(node_port(&service(&kubectl, "again").await), first);
}

/// The Python client reads the defaults and status into its typed model; its manager owns the
/// fields it sent and those decoding defaulted, not those the storage allocated after the field
/// manager ran (pkg/registry/core/service/storage/storage.go `beginCreate`); a service that
/// asks for an address another holds is refused as alloc.go `allocIPs` refuses it: 422, `failed
/// to allocate IP ...: provided IP is already allocated` (ipallocator `ErrAllocated`).
#[tokio::test]
async fn python_client_reads_a_services_defaults_and_cannot_take_a_held_address() {
    let Some((cluster, _kubectl)) = setup("python_client_services").await else {
        return;
    };
    let seen = support::python(
        &cluster,
        r#"
import json, sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
def service(name, cluster_ip=None):
    return client.V1Service(metadata=client.V1ObjectMeta(name=name),
        spec=client.V1ServiceSpec(cluster_ip=cluster_ip, selector={"app": name},
                                  ports=[client.V1ServicePort(port=8080)]))
first = v1.create_namespaced_service("default", service("first"))
try:
    v1.create_namespaced_service("default", service("second", first.spec.cluster_ip))
    refused = None
except client.exceptions.ApiException as e:
    refused = [e.status, json.loads(e.body)]
owned = [entry.fields_v1 for entry in first.metadata.managed_fields]
print(json.dumps({
    "owned": owned,
    "type": first.spec.type,
    "ip": first.spec.cluster_ip,
    "target_port": first.spec.ports[0].target_port,
    "protocol": first.spec.ports[0].protocol,
    "load_balancer": first.status.load_balancer.to_dict(),
    "refused": refused,
}))
"#,
    )
    .await;
    assert_eq!(seen["type"], "ClusterIP", "{seen}");
    // The client owns what it sent and what decoding defaulted, not what the storage allocated.
    let owned = &seen["owned"];
    assert_eq!(owned.as_array().map(Vec::len), Some(1), "{owned}");
    let spec: Vec<&String> = owned[0]["f:spec"]
        .as_object()
        .map(|spec| spec.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        spec,
        [
            "f:internalTrafficPolicy",
            "f:ports",
            "f:selector",
            "f:sessionAffinity",
            "f:type"
        ],
        "{owned}"
    );
    assert_eq!(seen["target_port"], 8080);
    assert_eq!(seen["protocol"], "TCP");
    assert_eq!(seen["load_balancer"], json!({"ingress": null}));
    let ip = seen["ip"].as_str().unwrap();
    assert!(in_service_range(ip), "{seen}");
    assert_eq!(seen["refused"][0], 422);
    let status = &seen["refused"][1];
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        format!(
            "Service \"second\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
        )
    );
    assert_eq!(
        status["details"],
        json!({"name": "second", "kind": "Service", "causes": [{
            "reason": "FieldValueInvalid",
            "message": format!("Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"),
            "field": "spec.clusterIPs",
        }]})
    );
}
