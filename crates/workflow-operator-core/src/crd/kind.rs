//! A step's kind: what its Job runs and how, decided once from the fields the step sets
//! ([`StepKind::of`]) and matched wherever the kind changes what happens (the Job's command,
//! the step agent and its task, the timeout, the status entry, what the spec must hold). Not
//! part of the API: a step says its kind by the fields it sets, as an Argo template does.
//!
//! Adding a kind: see the core crate's README, "How to add a kind of step".

use super::{Step, WorkFlowSpec};

/// What a step runs, and how. Every place that decides by it matches it whole (no `_` arm),
/// so a new kind is a compile error at each place that must decide what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// Its image's entrypoint, or `command`, with `args`.
    Container,
    /// A script (`source`): written to a file in the container by the step agent and run by
    /// `command` (default `[sh]`) with the file's path before `args`.
    Script,
    /// A container step whose pod waits for a person (`interactive`): the step agent runs
    /// its command only when told to, and `workflow-operator continue` ends the step.
    Interactive,
    /// A script step whose pod waits for a person, as [`StepKind::Interactive`].
    InteractiveScript,
    /// A step that runs nothing and waits (`suspend`) until resumed, or for its duration: its
    /// Job is created suspended and never runs a pod (`crd::suspend`).
    Suspend,
    /// A step that makes one HTTP request (`http`, `crd::http`): the step agent makes it in
    /// the step's pod, from the agent's image, and reports the response body as `result`.
    Http,
    /// A step that acts on a Kubernetes object (`resource`, `crd::resource`): the step agent
    /// takes the action in the step's pod, from the agent's image, waits for the object's
    /// conditions and reports the outputs read from it.
    Resource,
    /// A step that fails with its message (`fail`) instead of running: its Job is created
    /// suspended with the message as the record of why it cannot start.
    Fail,
}

impl Step {
    /// The fields this step sets that only a step running a container can use (its command, its
    /// pod's extra containers, its outputs): what a kind that runs none, a suspend or an HTTP
    /// request, must leave unset.
    pub fn container_fields_set(&self) -> Vec<&'static str> {
        [
            (!self.image.is_empty(), "image"),
            (self.command.is_some(), "command"),
            (self.args.is_some(), "args"),
            (self.source.is_some(), "source"),
            (self.interactive == Some(true), "interactive"),
            (self.init_containers.is_some(), "initContainers"),
            (self.sidecars.is_some(), "sidecars"),
            (self.outputs.is_some(), "outputs"),
        ]
        .into_iter()
        .filter_map(|(set, field)| set.then_some(field))
        .collect()
    }
}

impl StepKind {
    /// The kind of `step` of `spec`: the one place that reads which fields it sets.
    pub fn of(spec: &WorkFlowSpec, step: &Step) -> StepKind {
        // A step that fails or waits runs nothing, so nothing else it sets decides how.
        if step.fail.is_some() {
            return StepKind::Fail;
        }
        if step.suspend.is_some() {
            return StepKind::Suspend;
        }
        // The request is what it runs: nothing else it sets is run.
        if step.http.is_some() {
            return StepKind::Http;
        }
        // Likewise the action: nothing else it sets is run.
        if step.resource.is_some() {
            return StepKind::Resource;
        }
        let interactive = step.interactive.unwrap_or(spec.interactive);
        match (step.source.is_some(), interactive) {
            (false, false) => StepKind::Container,
            (true, false) => StepKind::Script,
            (false, true) => StepKind::Interactive,
            (true, true) => StepKind::InteractiveScript,
        }
    }

    /// Whether the step waits for a person ([`StepKind::Interactive`] and
    /// [`StepKind::InteractiveScript`]): its timeout does not run, and its status says how to
    /// reach it.
    pub fn is_interactive(self) -> bool {
        match self {
            StepKind::Interactive | StepKind::InteractiveScript => true,
            StepKind::Container
            | StepKind::Script
            | StepKind::Suspend
            | StepKind::Http
            | StepKind::Resource
            | StepKind::Fail => false,
        }
    }
}

/// The kind of each step and each exit step of a spec, by index (the index of its DAG).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kinds {
    /// Of `spec.containers`.
    pub steps: Vec<StepKind>,
    /// Of `spec.onExit`.
    pub exit: Vec<StepKind>,
}

impl Kinds {
    /// The kinds of the steps and exit steps of `spec`.
    pub fn of(spec: &WorkFlowSpec) -> Kinds {
        let kinds = |steps: &[Step]| steps.iter().map(|s| StepKind::of(spec, s)).collect();
        Kinds {
            steps: kinds(&spec.containers),
            exit: kinds(&spec.on_exit),
        }
    }

    /// The kinds of the exit steps when `exit`, else of the steps.
    pub fn of_steps(&self, exit: bool) -> &[StepKind] {
        if exit { &self.exit } else { &self.steps }
    }

    /// Whether any step or exit step is of a kind that waits for a person.
    pub fn any_interactive(&self) -> bool {
        self.steps
            .iter()
            .chain(&self.exit)
            .any(|k| k.is_interactive())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::one_step_of_each_kind;

    #[test]
    fn a_step_s_kind_follows_its_source_and_its_own_or_the_workflow_s_interactive() {
        let mut wf = one_step_of_each_kind("echo hi");
        use StepKind::*;
        assert_eq!(
            Kinds::of(&wf.spec).steps,
            [Container, Script, Interactive, InteractiveScript]
        );
        // The workflow's `interactive` makes every step interactive, but one that says not.
        wf.spec.interactive = true;
        wf.spec.containers[1].interactive = Some(false);
        assert_eq!(
            Kinds::of(&wf.spec).steps,
            [Interactive, Script, Interactive, InteractiveScript]
        );
        assert!(Kinds::of(&wf.spec).any_interactive());
        // `resource` wins over a source and `interactive`, `http` over `resource`; `suspend`
        // over whatever else the step sets.
        wf.spec.containers[3].resource = Some(Box::default());
        assert_eq!(Kinds::of(&wf.spec).steps[3], Resource);
        wf.spec.containers[3].http = Some(Box::default());
        assert_eq!(Kinds::of(&wf.spec).steps[3], Http);
        wf.spec.containers[3].suspend = Some(Box::default());
        assert_eq!(Kinds::of(&wf.spec).steps[3], Suspend);
        wf.spec.containers[3].fail = Some(Box::new("no".into()));
        assert_eq!(Kinds::of(&wf.spec).steps[3], Fail);
    }
}
