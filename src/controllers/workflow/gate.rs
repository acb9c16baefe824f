//! Gating: under `--max-running-steps`, the built-in queue
//! ([`StepQueue`](super::step_queue::StepQueue)) decides which of the Jobs a plan would create
//! may be created now. When it holds some back, the pass plans again with the queue's answer
//! as the planner's input ([`plan::Gate`]): the held steps are `Queued` in the status, and the
//! plan is never edited after it was made. Workflows left to Kueue (`spec.queueName`) and
//! operators without the queue pass through. Makes no API write; it waits for the queue's
//! watch of the step Jobs to have listed them once.
//!
//! Kueue's admission of a whole run (`queueScope: Workflow`) is a gate of this stage too:
//! [`admit_workload`], in `kueue_gate`.

use kube::ResourceExt;
use workflow_operator_core::plan;

use super::decide::Decided;
pub(super) use super::kueue_gate::admit as admit_workload;
use super::shared::ControllerState;
use super::step_queue::{self, StepQueue};

/// What the queue admits of the Jobs the decided plan creates, as a gate to plan again with;
/// `None` when it admits them all (or does not govern the workflow).
pub(super) async fn admit(shared: &ControllerState, decided: &Decided) -> Option<plan::Gate> {
    let (workflow, uid) = (decided.seen.workflow.as_ref(), decided.seen.uid.as_str());
    let plan = &decided.decision.plan;
    let queue = shared.step_queue.as_ref()?;
    if !StepQueue::governs(workflow) {
        return None;
    }
    let namespace = workflow.namespace().unwrap_or_default();
    let wanted = step_queue::creates(plan, &namespace);
    let admitted = queue.admit(workflow, uid, &wanted).await;
    if admitted.held == 0 {
        return None;
    }
    let message = queue.message(admitted.running);
    let names = admitted.jobs.into_iter().map(|(_, name)| name);
    Some(plan::Gate::admitting(names, message))
}

/// Gives back the slots of Jobs the gate the plan was made behind admitted that the plan does
/// not create after all.
pub(super) fn release_unplanned(shared: &ControllerState, decided: &Decided) {
    let admitted = decided
        .gate
        .as_ref()
        .and_then(|gate| gate.admitted.as_ref());
    let (Some(queue), Some(admitted)) = (shared.step_queue.as_ref(), admitted) else {
        return;
    };
    let (workflow, plan) = (&decided.seen.workflow, &decided.decision.plan);
    let namespace = workflow.namespace().unwrap_or_default();
    let planned = step_queue::creates(plan, &namespace);
    for name in admitted {
        let key = (namespace.clone(), name.clone());
        if !planned.contains(&key) {
            queue.release(&key);
        }
    }
}
