//! Gating: under `--max-running-steps`, the Job creates the built-in queue
//! ([`Admission`](super::admission::Admission)) does not admit wait. Their steps are `Queued`
//! in the status, and the run state, which counts them started, is not kept. Workflows left to
//! Kueue (`spec.queueName`) and operators without the queue pass through. Makes no API write;
//! it waits for the queue's watch of the step Jobs to have listed them once.

use kube::ResourceExt;
use workflow_operator_core::crd::WorkFlow;

use super::admission::{self, Admission};
use super::decide::Decision;
use super::shared::Shared;

/// Holds back the creates of `decision` the queue does not admit now.
pub(super) async fn admit(
    shared: &Shared,
    workflow: &WorkFlow,
    uid: &str,
    decision: &mut Decision,
) {
    let Some(queue) = shared.admission.as_ref() else {
        return;
    };
    if !Admission::governs(workflow) {
        return;
    }
    let namespace = workflow.namespace().unwrap_or_default();
    let wanted = admission::creates(&decision.plan, &namespace);
    let admitted = queue.admit(workflow, uid, &wanted).await;
    if admitted.held == 0 {
        return;
    }
    let message = queue.message(admitted.running);
    admission::hold_back(&mut decision.plan, workflow, &admitted.jobs, &message);
    if decision.plan.status.as_ref() == workflow.status.as_ref() {
        decision.plan.status = None;
    }
    decision.state = None;
}
