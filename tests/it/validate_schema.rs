//! `validate` refuses what the API server refuses, in its words: a bad `metadata.name` and a
//! timeout of 0 (a CEL rule of the CRD), each judged against `kubectl create` on the embedded
//! control plane with the CRD installed from `crd/`; and `dev --event-ttl` exists
//!.

use std::path::Path;
use std::process::Command;

use kube_devcluster::DevCluster;
use kube_devcluster::testing;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn workflow(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: workflow.crd.com/v1\nkind: WorkFlow\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

/// `workflow-operator validate FILE`: whether it passed, and its problems without the
/// `FILE: workflow NAME: ` prefix.
fn validate(dir: &Path, yaml: &str) -> (bool, Vec<String>) {
    let file = dir.join("wf.yaml");
    std::fs::write(&file, yaml).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .arg("validate")
        .arg(&file)
        .output()
        .expect("the binary runs");
    let problems = String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(|line| {
            line.splitn(3, ": ")
                .nth(2)
                .unwrap_or_else(|| panic!("a problem line: {line}"))
                .to_string()
        })
        .collect();
    (output.status.success(), problems)
}

/// kubectl against the embedded control plane with the WorkFlow CRD applied from `crd/` (no
/// operator: only the API server's answers matter here).
struct Session {
    cluster: DevCluster,
    kubectl: &'static Path,
    home: tempfile::TempDir,
}

impl Session {
    async fn start(test: &str) -> Option<Session> {
        let tools = testing::require_tools(test)?;
        let session = Session {
            cluster: testing::start().await,
            kubectl: &tools.kubectl,
            home: tempfile::tempdir().unwrap(),
        };
        let out = session.kubectl(&["apply", "-f", "crd/"]).await;
        assert!(out.status.success(), "{out:?}");
        let out = session
            .kubectl(&[
                "wait",
                "--for=condition=Established",
                "crd/workflows.workflow.crd.com",
                "crd/workflowtemplates.workflow.crd.com",
                "crd/clusterworkflowtemplates.workflow.crd.com",
            ])
            .await;
        assert!(out.status.success(), "{out:?}");
        Some(session)
    }

    async fn kubectl(&self, args: &[&str]) -> std::process::Output {
        tokio::process::Command::new(self.kubectl)
            .arg("--kubeconfig")
            .arg(self.cluster.kubeconfig_path())
            .args(args)
            .current_dir(ROOT)
            .env("HOME", self.home.path())
            .kill_on_drop(true)
            .output()
            .await
            .expect("kubectl runs")
    }

    /// `kubectl create -f` of `yaml`: whether it succeeded, and its standard error.
    async fn create(&self, yaml: &str) -> (bool, String) {
        let file = self.home.path().join("wf.yaml");
        std::fs::write(&file, yaml).unwrap();
        let out = self
            .kubectl(&["create", "-f", file.to_str().unwrap()])
            .await;
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn stored_workflows(&self) -> String {
        let out = self.kubectl(&["get", "workflows", "-o", "name"]).await;
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[tokio::test]
async fn validate_refuses_a_bad_name_as_kubectl_create_is_refused() {
    let Some(session) = Session::start("validate_bad_name").await else {
        return;
    };
    let yaml = workflow(
        "Bad_Name",
        "  containers: [{stepName: a, image: busybox}]\n",
    );
    let (valid, problems) = validate(session.home.path(), &yaml);
    assert!(!valid, "validate accepted Bad_Name");
    // apimachinery ValidateObjectMeta with NameIsDNSSubdomain: the field and the rule.
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"),
        "{problems:?}"
    );
    let (created, stderr) = session.create(&yaml).await;
    assert!(!created);
    assert!(
        stderr.contains(&format!(
            "The WorkFlow \"Bad_Name\" is invalid: {}",
            problems[0]
        )),
        "kubectl said: {stderr}\nvalidate said: {problems:?}"
    );
    assert_eq!(session.stored_workflows().await, "");
}

#[tokio::test]
async fn a_timeout_of_0_is_refused_at_create_and_by_validate_with_the_same_message() {
    let Some(session) = Session::start("zero_timeouts").await else {
        return;
    };
    let cases = [
        (
            "  maxStepTimeout: 0\n  containers: [{stepName: a, image: busybox}]\n",
            "spec.maxStepTimeout: Invalid value: \"integer\": must not be 0 (use -1 for unlimited)",
        ),
        // A step's timeout is int-or-string, which has no type for the message to show.
        (
            "  containers: [{stepName: a, image: busybox}, {stepName: b, image: busybox, timeout: 0}]\n",
            "spec.containers[1].timeout: Invalid value: \"\": must not be 0 (use -1 for unlimited)",
        ),
    ];
    for (spec, expected) in cases {
        let yaml = workflow("zero", spec);
        let (valid, problems) = validate(session.home.path(), &yaml);
        assert!(!valid, "validate accepted {spec}");
        assert_eq!(problems, [expected]);
        let (created, stderr) = session.create(&yaml).await;
        assert!(!created, "{spec} was created");
        assert!(
            stderr.contains(&format!("The WorkFlow \"zero\" is invalid: {expected}")),
            "{stderr}"
        );
        assert_eq!(session.stored_workflows().await, "", "{spec}");
    }
    // -1 stays "unlimited".
    let unlimited = workflow(
        "unlimited",
        "  maxStepTimeout: -1\n  containers: [{stepName: a, image: busybox, timeout: -1}]\n",
    );
    assert!(validate(session.home.path(), &unlimited).0);
    let (created, stderr) = session.create(&unlimited).await;
    assert!(created, "{stderr}");
    assert_eq!(
        session.stored_workflows().await.trim(),
        "workflow.workflow.crd.com/unlimited"
    );
}

/// A WorkFlowTemplate and a ClusterWorkFlowTemplate are checked against their own CRD's schema:
/// `validate` names what `kubectl create` is refused for, in its words.
#[tokio::test]
async fn shared_templates_are_refused_by_validate_as_kubectl_create_refuses_them() {
    let Some(session) = Session::start("validate_shared_templates").await else {
        return;
    };
    let cases = [
        (
            "WorkFlowTemplate",
            "  maxStepTimeout: 0\n  containers: [{stepName: a, image: busybox}]\n",
            "spec.maxStepTimeout: Invalid value: \"integer\": must not be 0 (use -1 for unlimited)",
        ),
        (
            "ClusterWorkFlowTemplate",
            "  templates: [{name: t, image: busybox, timeout: 0}]\n",
            "spec.templates[0].timeout: Invalid value: \"\": must not be 0 (use -1 for unlimited)",
        ),
    ];
    for (kind, spec, expected) in cases {
        let yaml = workflow("zero", spec).replace("kind: WorkFlow", &format!("kind: {kind}"));
        let (valid, problems) = validate(session.home.path(), &yaml);
        assert!(!valid, "validate accepted {yaml}");
        assert_eq!(problems, [expected]);
        let (created, stderr) = session.create(&yaml).await;
        assert!(!created, "{yaml} was created");
        assert!(
            stderr.contains(&format!("The {kind} \"zero\" is invalid: {expected}")),
            "{stderr}"
        );
    }
}

#[test]
fn dev_has_an_event_ttl_flag_defaulting_to_the_api_servers_hour() {
    let help = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["dev", "--help"])
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&help.stdout);
    let line = help
        .lines()
        .find(|l| l.contains("--event-ttl <DURATION>"))
        .unwrap_or_else(|| panic!("no --event-ttl in dev --help:\n{help}"));
    assert!(help.contains("[default: 1h]"), "{line}\n{help}");
    // A malformed duration is refused by the parser, before anything starts.
    let bad = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["dev", "--event-ttl", "soon"])
        .output()
        .expect("the binary runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("invalid value 'soon' for '--event-ttl"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
