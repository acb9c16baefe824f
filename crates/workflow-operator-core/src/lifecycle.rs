//! The workflow lifecycle as one explicit transition table.
//!
//! `Created -> Started -> Completed | Failed`, `Created -> Failed` for an invalid spec,
//! `Created | Started -> Queued -> Started` while Kueue has not admitted a run it admits whole,
//! `any -> Created` when what runs changes, and the moves of run control: `Suspended` and back
//! (`spec.suspend`), `Stopped` and `Terminated` to `Failed` (`spec.shutdown`), `Failed ->
//! Created` on a retry (`spec.retry`), and `Started -> Started` when the exit steps start. The planner (`plan`) asks this module for every
//! transition it makes; a [`Transition`] can only be obtained from [`TRANSITIONS`], so an illegal
//! transition cannot be written. Each transition carries the Kubernetes Event reason the
//! handlers post. The CLI's `lifecycle` command prints the table with [`to_dot`] or
//! [`to_mermaid`].

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a workflow is in its lifecycle; stored as `status.workflow-status`.
///
/// The upper-case spellings are accepted on read for statuses written by other operators.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Phase {
    /// Accepted, nothing started yet (also the state right after a change to what runs).
    #[serde(alias = "CREATED")]
    Created,
    /// The run waits for Kueue to admit its Workload (`queueScope: Workflow`), at first or
    /// after an eviction: no step runs.
    Queued,
    /// At least one step has a Job; not every step has succeeded.
    #[serde(alias = "STARTED")]
    Started,
    /// `spec.suspend` is true: no new step starts; steps already running go on.
    Suspended,
    /// Every step's Job succeeded. Terminal until the spec changes.
    #[serde(alias = "COMPLETED")]
    Completed,
    /// The spec is invalid, or a step failed or timed out. Terminal until the spec changes.
    #[serde(alias = "FAILED")]
    Failed,
}

impl Phase {
    /// Every phase, in lifecycle order.
    pub const ALL: [Phase; 6] = [
        Phase::Created,
        Phase::Queued,
        Phase::Started,
        Phase::Suspended,
        Phase::Completed,
        Phase::Failed,
    ];

    /// The name as stored in the status and shown by kubectl.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Created => "Created",
            Phase::Queued => "Queued",
            Phase::Started => "Started",
            Phase::Suspended => "Suspended",
            Phase::Completed => "Completed",
            Phase::Failed => "Failed",
        }
    }

    /// Terminal phases are left only by a change to what runs, or (`Failed`) a retry.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What makes a workflow move; its name is the Kubernetes Event reason (PascalCase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The first steps' Jobs were created (or found).
    StepsStarted,
    /// The run's Workload waits for Kueue's admission (`queueScope: Workflow`), at first or
    /// because Kueue evicted it: no step runs.
    Queued,
    /// Kueue admitted the run's Workload: its steps start (or resume).
    Admitted,
    /// The DAG is invalid: unknown dependency, cycle, duplicate or empty step name.
    InvalidSpec,
    /// Every step's Job succeeded.
    AllStepsSucceeded,
    /// A step's Job failed.
    StepFailed,
    /// A step ran longer than its timeout.
    StepTimedOut,
    /// What runs changed (steps, images, commands, env, dependencies): a new run starts.
    SpecChanged,
    /// `spec.suspend` became true: no new step starts.
    Suspended,
    /// `spec.suspend` became false again: steps start again.
    Resumed,
    /// `spec.shutdown: Stop`: nothing was left running and the exit steps ran.
    Stopped,
    /// `spec.shutdown: Terminate`: the running steps were stopped (their Jobs and pods kept).
    Terminated,
    /// `spec.retry` was raised on a failed workflow: the steps that did not succeed run again.
    Retried,
    /// Every other step finished (or the workflow was stopped): the exit steps start.
    ExitStepsStarted,
    /// The workflow ran past `spec.activeDeadlineSeconds`: its running steps were stopped.
    DeadlineExceeded,
    /// A rule with `action: fail` fired (`spec.rules`): its running steps were stopped.
    RuleFailed,
}

impl Trigger {
    /// The Kubernetes Event reason for this trigger.
    pub fn reason(self) -> &'static str {
        match self {
            Trigger::StepsStarted => "StepsStarted",
            Trigger::Queued => "Queued",
            Trigger::Admitted => "Admitted",
            Trigger::InvalidSpec => "InvalidSpec",
            Trigger::AllStepsSucceeded => "AllStepsSucceeded",
            Trigger::StepFailed => "StepFailed",
            Trigger::StepTimedOut => "StepTimedOut",
            Trigger::SpecChanged => "SpecChanged",
            Trigger::Suspended => "Suspended",
            Trigger::Resumed => "Resumed",
            Trigger::Stopped => "Stopped",
            Trigger::Terminated => "Terminated",
            Trigger::Retried => "Retried",
            Trigger::ExitStepsStarted => "ExitStepsStarted",
            Trigger::DeadlineExceeded => "DeadlineExceeded",
            Trigger::RuleFailed => "RuleFailed",
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// One legal move of the lifecycle. Only [`Transition::new`] makes one, from [`TRANSITIONS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    from: Phase,
    trigger: Trigger,
    to: Phase,
}

/// Every legal transition. `SpecChanged` leaves every phase but `Created` (where a spec change
/// needs no move: nothing has run yet).
pub const TRANSITIONS: &[Transition] = &[
    Transition {
        from: Phase::Created,
        trigger: Trigger::StepsStarted,
        to: Phase::Started,
    },
    Transition {
        from: Phase::Created,
        trigger: Trigger::InvalidSpec,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::AllStepsSucceeded,
        to: Phase::Completed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::StepFailed,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::StepTimedOut,
        to: Phase::Failed,
    },
    // Reachable only when a newer operator rejects a spec an older one accepted (same run).
    Transition {
        from: Phase::Started,
        trigger: Trigger::InvalidSpec,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::SpecChanged,
        to: Phase::Created,
    },
    Transition {
        from: Phase::Completed,
        trigger: Trigger::SpecChanged,
        to: Phase::Created,
    },
    Transition {
        from: Phase::Failed,
        trigger: Trigger::SpecChanged,
        to: Phase::Created,
    },
    // Run control (`spec.suspend`, `spec.shutdown`, `spec.retry`, `spec.onExit`).
    Transition {
        from: Phase::Created,
        trigger: Trigger::Suspended,
        to: Phase::Suspended,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::Suspended,
        to: Phase::Suspended,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::Resumed,
        to: Phase::Started,
    },
    // Steps that were running when the workflow was suspended still finish, and decide.
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::AllStepsSucceeded,
        to: Phase::Completed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::StepFailed,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::StepTimedOut,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::SpecChanged,
        to: Phase::Created,
    },
    // As from Started: a newer operator rejecting a spec an older one accepted.
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::InvalidSpec,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Created,
        trigger: Trigger::Stopped,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::Stopped,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::Stopped,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Created,
        trigger: Trigger::Terminated,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::Terminated,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::Terminated,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Failed,
        trigger: Trigger::Retried,
        to: Phase::Created,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::DeadlineExceeded,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::DeadlineExceeded,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::RuleFailed,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Suspended,
        trigger: Trigger::RuleFailed,
        to: Phase::Failed,
    },
    // Kueue at workflow scope: the run waits for its Workload's admission, and once admitted
    // may wait again when evicted. While `Queued` no step runs, but one may end (a Job that
    // finished as it was suspended), and run control and a spec change apply as in `Started`.
    Transition {
        from: Phase::Created,
        trigger: Trigger::Queued,
        to: Phase::Queued,
    },
    Transition {
        from: Phase::Started,
        trigger: Trigger::Queued,
        to: Phase::Queued,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::Admitted,
        to: Phase::Started,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::AllStepsSucceeded,
        to: Phase::Completed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::StepFailed,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::StepTimedOut,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::InvalidSpec,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::SpecChanged,
        to: Phase::Created,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::Suspended,
        to: Phase::Suspended,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::Stopped,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::Terminated,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::DeadlineExceeded,
        to: Phase::Failed,
    },
    Transition {
        from: Phase::Queued,
        trigger: Trigger::RuleFailed,
        to: Phase::Failed,
    },
    // The exit steps run in `Started`: the workflow has not ended until they did.
    Transition {
        from: Phase::Started,
        trigger: Trigger::ExitStepsStarted,
        to: Phase::Started,
    },
];

/// A transition the table does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal lifecycle transition: {trigger} in phase {from}")]
pub struct IllegalTransition {
    /// The phase the workflow was in.
    pub from: Phase,
    /// What was attempted.
    pub trigger: Trigger,
}

impl Transition {
    /// The transition `trigger` causes in phase `from`, if the table allows it.
    ///
    /// # Errors
    /// [`IllegalTransition`] when no row of [`TRANSITIONS`] matches.
    pub fn new(from: Phase, trigger: Trigger) -> Result<Transition, IllegalTransition> {
        TRANSITIONS
            .iter()
            .find(|t| t.from == from && t.trigger == trigger)
            .copied()
            .ok_or(IllegalTransition { from, trigger })
    }

    /// The phase before.
    pub fn from(&self) -> Phase {
        self.from
    }

    /// The phase after.
    pub fn to(&self) -> Phase {
        self.to
    }

    /// What caused it.
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }

    /// The Kubernetes Event reason.
    pub fn reason(&self) -> &'static str {
        self.trigger.reason()
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {} ({})", self.from, self.to, self.trigger)
    }
}

/// The lifecycle graph in Graphviz DOT; terminal phases are drawn with a double border.
pub fn to_dot() -> String {
    let mut out = String::from("digraph lifecycle {\n    rankdir=LR;\n");
    for phase in Phase::ALL {
        let shape = if phase.is_terminal() {
            "doublecircle"
        } else {
            "circle"
        };
        out.push_str(&format!("    {phase} [shape={shape}];\n"));
    }
    for t in TRANSITIONS {
        out.push_str(&format!(
            "    {} -> {} [label=\"{}\"];\n",
            t.from, t.to, t.trigger
        ));
    }
    out.push_str("}\n");
    out
}

/// The lifecycle graph as a Mermaid state diagram.
pub fn to_mermaid() -> String {
    let mut out = String::from("stateDiagram-v2\n    [*] --> Created\n");
    for t in TRANSITIONS {
        out.push_str(&format!("    {} --> {}: {}\n", t.from, t.to, t.trigger));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use rstest::rstest;

    #[rstest]
    #[case(Phase::Created, Trigger::StepsStarted, Some(Phase::Started))]
    #[case(Phase::Created, Trigger::InvalidSpec, Some(Phase::Failed))]
    #[case(Phase::Created, Trigger::StepFailed, None)]
    #[case(Phase::Created, Trigger::AllStepsSucceeded, None)]
    #[case(Phase::Created, Trigger::SpecChanged, None)]
    #[case(Phase::Started, Trigger::AllStepsSucceeded, Some(Phase::Completed))]
    #[case(Phase::Started, Trigger::StepFailed, Some(Phase::Failed))]
    #[case(Phase::Started, Trigger::StepTimedOut, Some(Phase::Failed))]
    #[case(Phase::Started, Trigger::SpecChanged, Some(Phase::Created))]
    #[case(Phase::Started, Trigger::StepsStarted, None)]
    #[case(Phase::Completed, Trigger::StepTimedOut, None)]
    #[case(Phase::Completed, Trigger::StepFailed, None)]
    #[case(Phase::Completed, Trigger::SpecChanged, Some(Phase::Created))]
    #[case(Phase::Failed, Trigger::AllStepsSucceeded, None)]
    #[case(Phase::Failed, Trigger::StepsStarted, None)]
    #[case(Phase::Failed, Trigger::SpecChanged, Some(Phase::Created))]
    #[case(Phase::Started, Trigger::Suspended, Some(Phase::Suspended))]
    #[case(Phase::Suspended, Trigger::Resumed, Some(Phase::Started))]
    #[case(Phase::Suspended, Trigger::StepsStarted, None)]
    #[case(Phase::Completed, Trigger::Suspended, None)]
    #[case(Phase::Completed, Trigger::Stopped, None)]
    #[case(Phase::Failed, Trigger::Terminated, None)]
    #[case(Phase::Started, Trigger::Stopped, Some(Phase::Failed))]
    #[case(Phase::Suspended, Trigger::Terminated, Some(Phase::Failed))]
    #[case(Phase::Failed, Trigger::Retried, Some(Phase::Created))]
    #[case(Phase::Completed, Trigger::Retried, None)]
    #[case(Phase::Started, Trigger::Retried, None)]
    #[case(Phase::Started, Trigger::ExitStepsStarted, Some(Phase::Started))]
    #[case(Phase::Created, Trigger::Queued, Some(Phase::Queued))]
    #[case(Phase::Started, Trigger::Queued, Some(Phase::Queued))]
    #[case(Phase::Queued, Trigger::Admitted, Some(Phase::Started))]
    #[case(Phase::Queued, Trigger::StepsStarted, None)]
    #[case(Phase::Queued, Trigger::ExitStepsStarted, None)]
    #[case(Phase::Queued, Trigger::Resumed, None)]
    #[case(Phase::Suspended, Trigger::Queued, None)]
    #[case(Phase::Completed, Trigger::Queued, None)]
    #[case(Phase::Started, Trigger::Admitted, None)]
    #[case(Phase::Queued, Trigger::StepFailed, Some(Phase::Failed))]
    #[case(Phase::Queued, Trigger::SpecChanged, Some(Phase::Created))]
    fn transition_table(#[case] from: Phase, #[case] trigger: Trigger, #[case] to: Option<Phase>) {
        match (Transition::new(from, trigger), to) {
            (Ok(t), Some(to)) => {
                assert_eq!((t.from(), t.trigger(), t.to()), (from, trigger, to));
            }
            (Err(e), None) => assert_eq!(e, IllegalTransition { from, trigger }),
            (got, want) => panic!("{from} + {trigger}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn terminal_phases_are_left_only_by_a_spec_change_or_a_retry() {
        for t in TRANSITIONS.iter().filter(|t| t.from().is_terminal()) {
            let retry = t.from() == Phase::Failed && t.trigger() == Trigger::Retried;
            assert!(t.trigger() == Trigger::SpecChanged || retry, "{t}");
            assert_eq!(t.to(), Phase::Created, "{t}");
        }
    }

    #[test]
    fn every_non_created_phase_can_go_back_to_created() {
        for phase in Phase::ALL.into_iter().filter(|p| *p != Phase::Created) {
            assert!(
                Transition::new(phase, Trigger::SpecChanged).is_ok(),
                "{phase}"
            );
        }
    }

    #[test]
    fn every_phase_is_reachable_from_created() {
        let mut seen = vec![Phase::Created];
        let mut i = 0;
        while i < seen.len() {
            let from = seen[i];
            for t in TRANSITIONS.iter().filter(|t| t.from() == from) {
                if !seen.contains(&t.to()) {
                    seen.push(t.to());
                }
            }
            i += 1;
        }
        assert_eq!(seen.len(), Phase::ALL.len(), "reached {seen:?}");
    }

    #[test]
    fn event_reasons_are_pascal_case() {
        for t in TRANSITIONS {
            let reason = t.reason();
            assert!(
                reason
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase()),
                "{reason}"
            );
            assert!(
                reason.chars().all(|c| c.is_ascii_alphanumeric()),
                "{reason}"
            );
        }
    }

    #[test]
    fn dot_and_mermaid_draw_every_transition() {
        let dot = to_dot();
        let mermaid = to_mermaid();
        assert!(dot.starts_with("digraph lifecycle {") && dot.ends_with("}\n"));
        for t in TRANSITIONS {
            let edge = format!("{} -> {} [label=\"{}\"];", t.from(), t.to(), t.trigger());
            assert!(dot.contains(&edge), "dot lacks {edge}:\n{dot}");
            let edge = format!("{} --> {}: {}", t.from(), t.to(), t.trigger());
            assert!(mermaid.contains(&edge), "mermaid lacks {edge}:\n{mermaid}");
        }
        assert!(dot.contains("Completed [shape=doublecircle]"));
        assert!(dot.contains("Started [shape=circle]"));
    }

    #[test]
    fn phase_reads_upper_case_status_of_other_operators() {
        let phase: Phase = serde_json::from_str("\"STARTED\"").unwrap();
        assert_eq!(phase, Phase::Started);
        assert_eq!(serde_json::to_string(&Phase::Failed).unwrap(), "\"Failed\"");
    }
}
