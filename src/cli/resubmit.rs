//! `workflow-operator resubmit NAME [-p NAME=VALUE]...`: a new workflow of the spec of one that
//! ran, as `argo resubmit`: named `NAME-` and a random suffix, its parameters kept unless `-p`
//! gives another value, checked and followed as `submit` checks and follows a workflow.

use std::process::ExitCode;

use clap::Args;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::labels::{LABEL_CRON, LABEL_SCHEDULED};

use super::client::ClusterArgs;
use super::submit::{Then, create_and_follow, parse_parameter};

/// The annotation of a resubmitted workflow naming the one it was made from.
const RESUBMITTED_FROM: &str = "workflow.crd.com/resubmitted-from";

/// Submit a new workflow of the spec of one that ran.
#[derive(Debug, Args)]
pub struct ResubmitArgs {
    /// The workflow to make a new one of.
    name: String,
    /// A workflow parameter's new value; repeat for each. The others keep the values the
    /// workflow ran with.
    #[arg(short = 'p', long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    parameters: Vec<(String, String)>,
    #[command(flatten)]
    then: Then,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub async fn resubmit(args: ResubmitArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
        let ran = super::read_workflow(&api, &namespace, &args.name).await?;
        let workflow = new_of(ran, &args.name, &namespace);
        create_and_follow(&client, &namespace, workflow, &args.parameters, &args.then).await
    })
    .await
}

/// A new workflow of `ran`'s spec: its labels and annotations but a cron's marks on its runs
/// (a resubmitted run is not the schedule's), none of the run control set on it (stopped,
/// suspended, retried), no status.
fn new_of(ran: WorkFlow, name: &str, namespace: &str) -> WorkFlow {
    let mut labels = ran.metadata.labels.unwrap_or_default();
    labels.retain(|key, _| key != LABEL_CRON && key != LABEL_SCHEDULED);
    let mut annotations = ran.metadata.annotations.unwrap_or_default();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.insert(RESUBMITTED_FROM.into(), name.into());
    let mut spec = ran.spec;
    spec.shutdown = None;
    spec.suspend = false;
    spec.retry = 0;
    WorkFlow {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: Some(namespace.into()),
            labels: Some(labels).filter(|l| !l.is_empty()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_operator_core::crd::Shutdown;

    #[test]
    fn a_resubmitted_workflow_keeps_the_spec_but_its_run_control_and_cron_marks() {
        let ran = WorkFlow::test("nightly-1")
            .label(LABEL_CRON, "nightly")
            .label("team", "ci")
            .step("a", &[])
            .shutdown(Shutdown::Stop)
            .suspend(true)
            .retry(2)
            .build();
        let new = new_of(ran.clone(), "nightly-1", "ci");
        assert_eq!(new.metadata.generate_name.as_deref(), Some("nightly-1-"));
        assert_eq!(new.metadata.name, None);
        let labels = new.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.into_iter().collect::<Vec<_>>(),
            [("team".into(), "ci".into())]
        );
        assert_eq!(
            new.metadata.annotations.unwrap_or_default()[RESUBMITTED_FROM],
            "nightly-1"
        );
        assert_eq!(
            (new.spec.shutdown, new.spec.suspend, new.spec.retry),
            (None, false, 0)
        );
        assert_eq!(new.spec.containers, ran.spec.containers);
    }
}
