//! kube-scheduler's Filter plugins that decide whether a pod can go to a Node here, in the
//! order of the default profile (pkg/scheduler/apis/config/v1/default_plugins.go): the first
//! that rejects the Node speaks for it, as `RunFilterPlugins` stops at the first failure
//! (pkg/scheduler/framework/runtime/framework.go), and [`fit_error`] words the result as the
//! scheduler's `FitError` does.

use serde_json::Value;

use super::resources::{Amounts, allocatable, pod_requests};

/// Why a Node cannot take a pod: the plugin's reasons and whether preemption could help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub reasons: Vec<String>,
    /// `Unschedulable` (preemption might free room) rather than `UnschedulableAndUnresolvable`.
    pub resolvable: bool,
}

impl Rejection {
    fn unresolvable(reason: &str) -> Self {
        Self {
            reasons: vec![reason.to_string()],
            resolvable: false,
        }
    }
}

/// What the pods already bound to the Node take: their requests summed, and how many they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Used {
    pub requests: Amounts,
    pub pods: i64,
}

/// Runs the filters of a pod against the Node; `Ok` when it fits.
pub(crate) fn filter(pod: &Value, node: &Value, used: &Used) -> Result<(), Rejection> {
    node_unschedulable(pod, node)?;
    taint_toleration(pod, node)?;
    node_affinity(pod, node)?;
    node_resources_fit(pod, node, used)
}

/// The scheduler's message for a pod no Node can take, this cluster having one: pkg/scheduler
/// /framework/types.go, `FitError.Error`: `0/N nodes are available:` then the PreFilter
/// plugin's message or each Filter reason counted over the Nodes (sorted, `, `-joined), then
/// the PostFilter plugins' messages, each part ending in `.`. The PostFilter plugins are
/// DynamicResources (`no new claims to deallocate` for a pod with no claims,
/// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, `PostFilter`) and
/// DefaultPreemption: a Node rejected for good is one where `Preemption is not helpful for
/// scheduling`, and a Node short of resources, with no pod of lower priority to evict, one
/// where `No preemption victims found for incoming pod`
/// (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go,
/// `SelectVictimsOnNode`; every pod here has priority 0).
pub(crate) fn fit_error(rejection: &Rejection) -> String {
    let mut counted: Vec<String> = rejection.reasons.iter().map(|r| format!("1 {r}")).collect();
    counted.sort();
    fit_message(&counted.join(", "), rejection.resolvable)
}

/// [`fit_error`] for a pod a PreFilter plugin rejected (`message`) before any Node was tried:
/// no preemption can help it.
pub(crate) fn pre_filter_error(message: &str) -> String {
    fit_message(message, false)
}

fn fit_message(found: &str, resolvable: bool) -> String {
    let preemption = if resolvable {
        "No preemption victims found for incoming pod"
    } else {
        "Preemption is not helpful for scheduling"
    };
    format!(
        "0/1 nodes are available: {found}. no new claims to deallocate, preemption: 0/1 nodes \
         are available: 1 {preemption}."
    )
}

/// NodeUnschedulable (pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go):
/// a cordoned Node takes only pods tolerating its `node.kubernetes.io/unschedulable` taint.
fn node_unschedulable(pod: &Value, node: &Value) -> Result<(), Rejection> {
    let cordoned = node
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let taint =
        serde_json::json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
    if cordoned && !tolerations(pod).iter().any(|t| tolerates(t, &taint)) {
        return Err(Rejection::unresolvable("node(s) were unschedulable"));
    }
    Ok(())
}

/// TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go,
/// `Filter`): every `NoSchedule` and `NoExecute` taint must be tolerated.
fn taint_toleration(pod: &Value, node: &Value) -> Result<(), Rejection> {
    let tolerations = tolerations(pod);
    let taints = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let untolerated = taints.iter().any(|taint| {
        matches!(
            taint.get("effect").and_then(Value::as_str),
            Some("NoSchedule" | "NoExecute")
        ) && !tolerations.iter().any(|t| tolerates(t, taint))
    });
    if untolerated {
        return Err(Rejection::unresolvable("node(s) had untolerated taint(s)"));
    }
    Ok(())
}

fn tolerations(pod: &Value) -> &[Value] {
    pod.pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether a toleration tolerates a taint (k8s.io/api/core/v1/toleration.go,
/// `ToleratesTaint`): the same effect (or none), the same key (or none with `Exists`), and
/// with `Equal` (the default) the same value.
fn tolerates(toleration: &Value, taint: &Value) -> bool {
    fn text<'a>(v: &'a Value, field: &str) -> &'a str {
        v.get(field).and_then(Value::as_str).unwrap_or_default()
    }
    let effect = text(toleration, "effect");
    if !effect.is_empty() && effect != text(taint, "effect") {
        return false;
    }
    let key = text(toleration, "key");
    if !key.is_empty() && key != text(taint, "key") {
        return false;
    }
    match text(toleration, "operator") {
        "Exists" => true,
        "" | "Equal" => !key.is_empty() && text(toleration, "value") == text(taint, "value"),
        _ => false,
    }
}

/// NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go, `Filter`,
/// `ErrReasonPod`): the pod's `nodeSelector` and its required node affinity must both match.
fn node_affinity(pod: &Value, node: &Value) -> Result<(), Rejection> {
    let labels = node.pointer("/metadata/labels");
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let selector_matches = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|selector| {
            selector
                .iter()
                .all(|(key, value)| value.as_str().is_some_and(|v| label(key) == Some(v)))
        });
    let required = pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    let affinity_matches = required.is_none_or(|terms| {
        let name = node.pointer("/metadata/name").and_then(Value::as_str);
        terms
            .as_array()
            .is_some_and(|terms| terms.iter().any(|t| term_matches(t, &label, name)))
    });
    if selector_matches && affinity_matches {
        Ok(())
    } else {
        Err(Rejection::unresolvable(
            "node(s) didn't match Pod's node affinity/selector",
        ))
    }
}

/// One `nodeSelectorTerm` (k8s.io/component-helpers/scheduling/corev1/nodeaffinity
/// nodeaffinity.go): all its `matchExpressions` on labels and `matchFields` on
/// `metadata.name` hold; a term with neither matches no Node.
fn term_matches<'a>(
    term: &Value,
    label: &impl Fn(&str) -> Option<&'a str>,
    name: Option<&str>,
) -> bool {
    let list = |field: &str| {
        term.get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let (expressions, fields) = (list("matchExpressions"), list("matchFields"));
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|e| requirement_matches(e, label(key_of(e))))
        && fields.iter().all(|f| {
            key_of(f) == "metadata.name"
                && matches!(operator_of(f), "In" | "NotIn")
                && requirement_matches(f, name)
        })
}

fn key_of(requirement: &Value) -> &str {
    requirement
        .get("key")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn operator_of(requirement: &Value) -> &str {
    requirement
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A requirement against the value found (`None`: no such label): `In`, `NotIn`, `Exists`,
/// `DoesNotExist`, and `Gt`/`Lt` comparing integers (k8s.io/apimachinery/pkg/labels
/// selector.go, `Requirement.Matches`).
fn requirement_matches(requirement: &Value, found: Option<&str>) -> bool {
    let values: Vec<&str> = requirement
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let compare = |ordering: std::cmp::Ordering| {
        let (Some(found), [bound]) = (found, values.as_slice()) else {
            return false;
        };
        match (found.parse::<i64>(), bound.parse::<i64>()) {
            (Ok(found), Ok(bound)) => found.cmp(&bound) == ordering,
            _ => false,
        }
    };
    match operator_of(requirement) {
        "In" => found.is_some_and(|f| values.contains(&f)),
        "NotIn" => found.is_none_or(|f| !values.contains(&f)),
        "Exists" => found.is_some(),
        "DoesNotExist" => found.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go, `fitsRequest`):
/// one more pod must fit the Node's `pods`, and each resource requested what is left of its
/// allocatable; every shortfall is a reason (`Too many pods`, `Insufficient cpu`, ...).
fn node_resources_fit(pod: &Value, node: &Value, used: &Used) -> Result<(), Rejection> {
    let allocatable = allocatable(node);
    let mut reasons = Vec::new();
    if used.pods + 1 > allocatable.get("pods").copied().unwrap_or(0) {
        reasons.push("Too many pods".to_string());
    }
    for (resource, requested) in pod_requests(pod) {
        let free = allocatable.get(&resource).copied().unwrap_or(0)
            - used.requests.get(&resource).copied().unwrap_or(0);
        if requested > 0 && requested > free {
            reasons.push(format!("Insufficient {resource}"));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Rejection {
            reasons,
            resolvable: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({
            "metadata": {"name": "box", "labels": {"kubernetes.io/hostname": "box", "tier": "3"}},
            "spec": {},
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "110"}},
        })
    }

    fn pod(spec: Value) -> Value {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c"}]);
        json!({"spec": spec})
    }

    fn reason(result: Result<(), Rejection>) -> Option<String> {
        result.err().map(|r| r.reasons.join("; "))
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let used = Used::default();
        let fits = |spec: Value| reason(filter(&pod(spec), &node(), &used));
        let mismatch = Some("node(s) didn't match Pod's node affinity/selector".to_string());
        assert_eq!(fits(json!({"nodeSelector": {"tier": "3"}})), None);
        assert_eq!(fits(json!({"nodeSelector": {"disk": "ssd"}})), mismatch);
        let term = |expression: Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}})
        };
        for (expression, fits_here) in [
            (
                json!({"key": "tier", "operator": "In", "values": ["1", "3"]}),
                true,
            ),
            (
                json!({"key": "tier", "operator": "NotIn", "values": ["3"]}),
                false,
            ),
            (
                json!({"key": "disk", "operator": "NotIn", "values": ["ssd"]}),
                true,
            ),
            (json!({"key": "tier", "operator": "Exists"}), true),
            (json!({"key": "tier", "operator": "DoesNotExist"}), false),
            (
                json!({"key": "tier", "operator": "Gt", "values": ["2"]}),
                true,
            ),
            (
                json!({"key": "tier", "operator": "Lt", "values": ["3"]}),
                false,
            ),
        ] {
            let expected = if fits_here { None } else { mismatch.clone() };
            assert_eq!(fits(term(expression.clone())), expected, "{expression}");
        }
        let by_name = |names: Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": names}]}]}}}})
        };
        assert_eq!(fits(by_name(json!(["box"]))), None);
        assert_eq!(fits(by_name(json!(["other"]))), mismatch);
    }

    #[test]
    fn taints_need_tolerations() {
        let mut tainted = node();
        tainted["spec"]["taints"] = json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]);
        let used = Used::default();
        let fits = |node: &Value, tolerations: Value| {
            reason(filter(
                &pod(json!({"tolerations": tolerations})),
                node,
                &used,
            ))
        };
        let untolerated = Some("node(s) had untolerated taint(s)".to_string());
        assert_eq!(fits(&tainted, json!([])), untolerated);
        assert_eq!(
            fits(&tainted, json!([{"key": "gpu", "operator": "Exists"}])),
            None
        );
        assert_eq!(
            fits(&tainted, json!([{"key": "gpu", "value": "yes"}])),
            None
        );
        assert_eq!(
            fits(&tainted, json!([{"key": "gpu", "value": "no"}])),
            untolerated
        );
        let other_effect = json!([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]);
        assert_eq!(fits(&tainted, other_effect), untolerated);
        assert_eq!(fits(&tainted, json!([{"operator": "Exists"}])), None);
        let mut cordoned = node();
        cordoned["spec"] = json!({"unschedulable": true});
        let cordon = Some("node(s) were unschedulable".to_string());
        assert_eq!(fits(&cordoned, json!([])), cordon);
        let tolerating = json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]);
        assert_eq!(fits(&cordoned, tolerating), None);
    }

    #[test]
    fn requests_must_fit_what_is_left() {
        let asks = |cpu: &str| {
            let requests = json!({"cpu": cpu, "nvidia.com/gpu": "1"});
            json!({"spec": {"containers": [{"resources": {"requests": requests}}]}})
        };
        let used = Used {
            requests: [("cpu".to_string(), 1500)].into(),
            pods: 1,
        };
        let rejection = filter(&asks("600m"), &node(), &used).unwrap_err();
        assert_eq!(
            rejection.reasons,
            ["Insufficient cpu", "Insufficient nvidia.com/gpu"]
        );
        assert_eq!(
            fit_error(&rejection),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu. no new \
             claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims \
             found for incoming pod."
        );
        let full = Used {
            pods: 110,
            ..Used::default()
        };
        assert_eq!(
            reason(filter(&pod(json!({})), &node(), &full)),
            Some("Too many pods".to_string())
        );
    }
}
