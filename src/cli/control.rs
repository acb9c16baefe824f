//! `workflow-operator suspend|resume|stop|terminate|retry NAME... | -l SELECTOR`: run control,
//! as `argo suspend` and its siblings, on each workflow in turn (a line each; one that fails is
//! said and the others done still). Each command checks the workflow's phase, then sets one spec field
//! (`suspend`, `shutdown`, `retry`; a retry also clears `shutdown` and `suspend`) with a merge
//! patch that carries the resourceVersion it
//! checked: if the workflow changed in between (it finished, someone else retried it), the API
//! server answers 409 and the command checks again, so a check and its write are one step.
//! Running a command twice is harmless: the second one says there is nothing left to do.
//! `resume` also resumes the suspend steps that wait (`resume_steps`).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::Shutdown;
use workflow_operator_core::lifecycle::Phase;

use super::resume_steps::ResumeSteps;

/// How many times a command re-checks a workflow that changed under it before giving up.
pub(super) const ATTEMPTS: usize = 5;

/// The workflows a run-control command acts on.
#[derive(Debug, Args)]
pub struct ControlArgs {
    #[command(flatten)]
    targets: super::list::Targets,
    #[command(flatten)]
    cluster: super::client::ClusterArgs,
}

/// A run-control verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Suspend,
    Resume,
    Stop,
    Terminate,
    Retry,
}

impl Verb {
    /// The past tense the command prints, e.g. `workflow build suspended`.
    fn done(self) -> &'static str {
        match self {
            Verb::Suspend => "suspended",
            Verb::Resume => "resumed",
            Verb::Stop => "stopping: running steps finish, then the exit steps run",
            Verb::Terminate => "terminated: its running steps are being stopped",
            Verb::Retry => "retried: the steps that did not succeed run again",
        }
    }
}

/// What a verb does to a workflow in its current state.
#[derive(Debug, PartialEq)]
enum VerbOutcome {
    /// Write this merge patch of the spec.
    Patch(Value),
    /// Nothing to do, and that is fine (the verb's effect is there already).
    AlreadyDone(String),
    /// The verb makes no sense now: an error naming why.
    Refused(String),
}

/// Decides what `verb` does to `workflow`. Pure: the commands and the tests use it alike.
fn decide(verb: Verb, workflow: &WorkFlow) -> VerbOutcome {
    let name = workflow.metadata.name.as_deref().unwrap_or_default();
    let status = workflow.status.as_ref();
    let phase = status.and_then(|s| s.workflow_status);
    let spec = &workflow.spec;
    let finished = |what: &str| {
        VerbOutcome::Refused(format!(
            "workflow {name} has finished ({}); there is nothing to {what}{}",
            phase.map_or("", |p| p.as_str()),
            if phase == Some(Phase::Failed) {
                " (`workflow-operator retry` runs its unfinished steps again)"
            } else {
                ""
            }
        ))
    };
    let terminal = phase.is_some_and(Phase::is_terminal);
    match verb {
        Verb::Suspend if terminal => finished("suspend"),
        Verb::Suspend if spec.suspend => {
            VerbOutcome::AlreadyDone(format!("workflow {name} is already suspended"))
        }
        Verb::Suspend => VerbOutcome::Patch(json!({"spec": {"suspend": true}})),
        Verb::Resume if terminal => finished("resume"),
        Verb::Resume if !spec.suspend => {
            VerbOutcome::AlreadyDone(format!("workflow {name} is not suspended"))
        }
        Verb::Resume => VerbOutcome::Patch(json!({"spec": {"suspend": null}})),
        Verb::Stop if terminal => finished("stop"),
        Verb::Terminate if terminal => finished("terminate"),
        Verb::Stop => match spec.shutdown {
            Some(Shutdown::Stop) => {
                VerbOutcome::AlreadyDone(format!("workflow {name} is already stopping"))
            }
            Some(Shutdown::Terminate) => VerbOutcome::Refused(format!(
                "workflow {name} is being terminated already, which stops more than stop does"
            )),
            None => VerbOutcome::Patch(json!({"spec": {"shutdown": "Stop"}})),
        },
        Verb::Terminate => match spec.shutdown {
            Some(Shutdown::Terminate) => {
                VerbOutcome::AlreadyDone(format!("workflow {name} is already being terminated"))
            }
            _ => VerbOutcome::Patch(json!({"spec": {"shutdown": "Terminate"}})),
        },
        Verb::Retry => {
            let retried = status.and_then(|s| s.retry).unwrap_or(0);
            match phase {
                Some(Phase::Failed) if spec.retry > retried => VerbOutcome::AlreadyDone(format!(
                    "workflow {name} has a retry requested already (spec.retry {})",
                    spec.retry
                )),
                Some(Phase::Failed) => VerbOutcome::Patch(json!({"spec": {
                    "retry": spec.retry.max(retried) + 1,
                    // A retried workflow runs again: what stopped it no longer applies, nor
                    // does a suspension (as `argo retry`), which would hold every step.
                    "shutdown": null,
                    "suspend": null,
                }})),
                Some(Phase::Completed) => VerbOutcome::Refused(format!(
                    "workflow {name} completed: every step succeeded, there is nothing to retry"
                )),
                other => VerbOutcome::Refused(format!(
                    "workflow {name} is still running ({}); only a failed or stopped workflow can be retried (stop or terminate it first, or wait for it to end)",
                    other.map_or("not started yet", |p| p.as_str())
                )),
            }
        }
    }
}

/// What the command prints once `verb` is applied to `workflow` (as it was read), after
/// `workflow NAME`.
fn done(verb: Verb, workflow: &WorkFlow) -> String {
    let lifted = verb == Verb::Retry && workflow.spec.suspend;
    let note = if lifted { " (no longer suspended)" } else { "" };
    format!("{}{note}", verb.done())
}

/// `resume`'s arguments: the workflows, and its suspend steps' own flags.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    control: ControlArgs,
    #[command(flatten)]
    steps: ResumeSteps,
}

/// Runs `resume` on each workflow `args` names or selects.
pub async fn resume(args: ResumeArgs) -> ExitCode {
    control_with(Verb::Resume, args.control, &args.steps).await
}

/// Runs `verb` on each workflow `args` names or selects.
pub async fn control(verb: Verb, args: ControlArgs) -> ExitCode {
    control_with(verb, args, &ResumeSteps::default()).await
}

/// Runs `verb` on each workflow `args` names or selects; `resume` says which suspend steps a
/// resume resumes, with what.
async fn control_with(verb: Verb, args: ControlArgs, resume: &ResumeSteps) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let api: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
        let names = args.targets.names(&api, &namespace).await?;
        if resume.names_a_step() && names.len() != 1 {
            bail!("--step names a step of one workflow: give one NAME");
        }
        let (api, namespace, client) = (&api, namespace.as_str(), &client);
        super::list::each(&names, |name| async move {
            if verb == Verb::Resume
                && let Some(message) =
                    resume_steps_of(client, api, namespace, &name, resume).await?
            {
                return Ok(message);
            }
            apply(verb, api, namespace, &name).await
        })
        .await
    })
    .await
}

/// Resumes the suspend steps of workflow `name` that wait (those `resume` says, with what it
/// gives); the message when that was all `resume` had to do (the workflow itself is not
/// suspended).
async fn resume_steps_of(
    client: &kube::Client,
    api: &Api<WorkFlow>,
    namespace: &str,
    name: &str,
    resume: &ResumeSteps,
) -> Result<Option<String>> {
    let expanded = super::read_expanded(api, namespace, name).await?;
    let steps = super::resume_steps::resume(client.clone(), namespace, &expanded, resume).await?;
    if steps.is_empty() {
        return Ok(None);
    }
    let message = format!("workflow {name}: resumed step {}", steps.join(", "));
    let workflow = super::read_workflow(api, namespace, name).await?;
    if workflow.spec.suspend {
        println!("{message}");
        return Ok(None);
    }
    Ok(Some(message))
}

async fn apply(verb: Verb, api: &Api<WorkFlow>, namespace: &str, name: &str) -> Result<String> {
    for _ in 0..ATTEMPTS {
        let workflow = super::read_workflow(api, namespace, name).await?;
        let mut patch = match decide(verb, &workflow) {
            VerbOutcome::AlreadyDone(message) => return Ok(message),
            VerbOutcome::Refused(message) => bail!(message),
            VerbOutcome::Patch(patch) => patch,
        };
        // The resourceVersion makes the patch conditional on what was checked.
        patch["metadata"] = json!({"resourceVersion": workflow.metadata.resource_version});
        let params = PatchParams {
            field_manager: Some(super::FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(format!("workflow {name} {}", done(verb, &workflow))),
            Err(kube::Error::Api(response)) if response.code == 409 => continue,
            Err(error) => return Err(error.into()),
        }
    }
    bail!("workflow {name} kept changing while {verb:?} was applied; try again")
}

#[cfg(test)]
mod tests {
    use super::*;

    use rstest::rstest;
    use workflow_operator_core::crd::WorkFlowStatus;

    fn workflow(phase: Phase, edit: impl FnOnce(&mut WorkFlow)) -> WorkFlow {
        let mut wf = WorkFlow::test("w").step("a", &[]).build();
        wf.status = Some(WorkFlowStatus {
            workflow_status: Some(phase),
            ..WorkFlowStatus::default()
        });
        edit(&mut wf);
        wf
    }

    fn patch(decision: VerbOutcome) -> Value {
        match decision {
            VerbOutcome::Patch(patch) => patch,
            other => panic!("{other:?}"),
        }
    }

    #[rstest]
    #[case(Verb::Suspend, json!({"spec": {"suspend": true}}))]
    #[case(Verb::Stop, json!({"spec": {"shutdown": "Stop"}}))]
    #[case(Verb::Terminate, json!({"spec": {"shutdown": "Terminate"}}))]
    fn a_running_workflow_is_patched(#[case] verb: Verb, #[case] want: Value) {
        assert_eq!(patch(decide(verb, &workflow(Phase::Started, |_| {}))), want);
    }

    #[test]
    fn resume_clears_suspend_and_says_so_when_there_is_nothing_to_resume() {
        let suspended = workflow(Phase::Suspended, |w| w.spec.suspend = true);
        assert_eq!(
            patch(decide(Verb::Resume, &suspended)),
            json!({"spec": {"suspend": null}})
        );
        let running = workflow(Phase::Started, |_| {});
        assert_eq!(
            decide(Verb::Resume, &running),
            VerbOutcome::AlreadyDone("workflow w is not suspended".into())
        );
    }

    #[rstest]
    #[case(
        Verb::Suspend,
        Phase::Completed,
        "workflow w has finished (Completed); there is nothing to suspend"
    )]
    #[case(
        Verb::Stop,
        Phase::Failed,
        "workflow w has finished (Failed); there is nothing to stop (`workflow-operator retry` runs its unfinished steps again)"
    )]
    #[case(
        Verb::Terminate,
        Phase::Completed,
        "workflow w has finished (Completed); there is nothing to terminate"
    )]
    #[case(
        Verb::Retry,
        Phase::Completed,
        "workflow w completed: every step succeeded, there is nothing to retry"
    )]
    #[case(
        Verb::Retry,
        Phase::Started,
        "workflow w is still running (Started); only a failed or stopped workflow can be retried (stop or terminate it first, or wait for it to end)"
    )]
    #[case(
        Verb::Retry,
        Phase::Suspended,
        "workflow w is still running (Suspended); only a failed or stopped workflow can be retried (stop or terminate it first, or wait for it to end)"
    )]
    fn verbs_that_make_no_sense_now_are_refused_saying_why(
        #[case] verb: Verb,
        #[case] phase: Phase,
        #[case] why: &str,
    ) {
        assert_eq!(
            decide(verb, &workflow(phase, |_| {})),
            VerbOutcome::Refused(why.into())
        );
    }

    #[test]
    fn retry_raises_the_retry_once_and_clears_the_shutdown_and_suspension() {
        let stopped = workflow(Phase::Failed, |w| {
            w.spec.shutdown = Some(Shutdown::Stop);
            w.spec.retry = 1;
            w.status.as_mut().unwrap().retry = Some(1);
        });
        assert_eq!(
            patch(decide(Verb::Retry, &stopped)),
            json!({"spec": {"retry": 2, "shutdown": null, "suspend": null}})
        );
        // Asked again before the operator picked it up: nothing more.
        let pending = workflow(Phase::Failed, |w| w.spec.retry = 2);
        assert!(matches!(
            decide(Verb::Retry, &pending),
            VerbOutcome::AlreadyDone(_)
        ));
    }

    #[test]
    fn retry_of_a_workflow_suspended_then_terminated_lifts_the_suspension() {
        let ended = workflow(Phase::Failed, |w| {
            w.spec.suspend = true;
            w.spec.shutdown = Some(Shutdown::Terminate);
        });
        assert_eq!(
            patch(decide(Verb::Retry, &ended)),
            json!({"spec": {"retry": 1, "shutdown": null, "suspend": null}})
        );
        assert_eq!(
            done(Verb::Retry, &ended),
            "retried: the steps that did not succeed run again (no longer suspended)"
        );
    }

    #[test]
    fn stop_does_not_soften_a_terminate() {
        let terminating = workflow(Phase::Started, |w| {
            w.spec.shutdown = Some(Shutdown::Terminate)
        });
        assert!(matches!(
            decide(Verb::Stop, &terminating),
            VerbOutcome::Refused(_)
        ));
        let stopping = workflow(Phase::Started, |w| w.spec.shutdown = Some(Shutdown::Stop));
        assert_eq!(
            patch(decide(Verb::Terminate, &stopping)),
            json!({"spec": {"shutdown": "Terminate"}})
        );
    }
}
