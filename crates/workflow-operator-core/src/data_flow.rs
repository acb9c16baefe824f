//! What steps read of each other, checked once per spec: every
//! `{{steps.NAME.outputs.KEY}}` in a step's `command`, `args` and `env` values, and every step a
//! `when` names, must be a step that runs before it (upstream, through `dependsOn`); an exit
//! step may name any step, since all have ended when it runs. `{{item}}` is only for a step
//! that fans out (in its `when` too, decided per item); a step may read the parameters and result of one that does, every item's as
//! a JSON list in item order (Argo's aggregated outputs), and an input artifact may take its
//! output artifacts, one per item (a fan-in), but a `when` and an exit step may not; a
//! `withParam`, and a `withSequence` bound written as a reference, name an upstream step's
//! output like any reference. The result, [`DataFlow`],
//! says whose outputs must be read (only those: reading them costs a pod list per step) and
//! holds the compiled `when`s and fan-outs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::agent;
use super::crd::{IntOrExpr, Kinds, Step, StepKind, WorkFlowSpec};
use super::dag::{Dag, DagError};
use super::fan_out::{self, FanOut, ItemList};
use super::outputs::{self, Source};
use super::retry::Strategy;
use super::when::{Place, When};

/// The data flow of a valid spec.
#[derive(Debug, Clone, Default)]
pub struct DataFlow {
    /// The steps (by index in the steps' DAG) whose outputs some step, `when` or `withParam`
    /// names.
    pub read: HashSet<usize>,
    /// The compiled `when` of each step that has one (by index in the steps' DAG).
    pub when: HashMap<usize, Arc<When>>,
    /// The compiled `when` of each exit step that has one (by index in the exit DAG).
    pub exit_when: HashMap<usize, Arc<When>>,
    /// What each step that fans out fans out over (by index in the steps' DAG).
    pub fan_out: HashMap<usize, FanOut>,
    /// The compiled `retryStrategy` of each step that has one (by index in the steps' DAG).
    pub retry: HashMap<usize, Arc<Strategy>>,
    /// The compiled `retryStrategy` of each exit step that has one (by index in the exit DAG).
    pub exit_retry: HashMap<usize, Arc<Strategy>>,
    /// The steps (by index in the steps' DAG) whose standard output some step reads
    /// (`{{steps.NAME.outputs.result}}`): they run under the step agent, which keeps it.
    pub result_read: HashSet<usize>,
    /// The steps (by index in the steps' DAG) that fan out and whose output artifacts some
    /// step takes as an input artifact, every item's.
    pub fanned_in: HashSet<usize>,
    /// The steps (by index in the steps' DAG) that fan out and whose parameters or result
    /// some step reads, every item's as a JSON list (Argo's aggregated outputs).
    pub aggregated: HashSet<usize>,
    /// The steps (by index in the steps' DAG) whose end some step's text names (Argo's
    /// `{{steps.NAME.status}}`, `exitCode`, `startedAt`, `finishedAt`) and whose outputs none
    /// does: seen from their Job alone, no pod read.
    pub ended_read: HashSet<usize>,
    /// The hooks (by index in the steps' DAG) of each hooked step that run once it ended,
    /// whatever its result (`template::hooks::after`): started after its failure too.
    pub hooks_after: HashMap<usize, Vec<usize>>,
    /// The exit steps (by index in the exit DAG) whose outputs a later exit step names, as
    /// `read` is for the steps: recorded in their status entries once read.
    pub exit_read: HashSet<usize>,
    /// The exit steps (by index in the exit DAG) whose standard output a later exit step
    /// reads: they run under the step agent, as `result_read` for the steps.
    pub exit_result_read: HashSet<usize>,
    /// The exit steps (by index in the exit DAG) whose end a later exit step names and whose
    /// outputs none does, as `ended_read` for the steps.
    pub exit_ended_read: HashSet<usize>,
}

impl DataFlow {
    /// Whether no step names another nor fans out: the workflow runs as a plain DAG.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
            && self.ended_read.is_empty()
            && self.when.is_empty()
            && self.exit_when.is_empty()
            && self.fan_out.is_empty()
            && self.retry.is_empty()
            && self.exit_retry.is_empty()
            && self.hooks_after.is_empty()
            && self.exit_read.is_empty()
            && self.exit_ended_read.is_empty()
    }

    /// Whether the outputs of step `index` (an exit step's when `exit`) are read.
    pub fn outputs_read(&self, index: usize, exit: bool) -> bool {
        match exit {
            false => self.read.contains(&index),
            true => self.exit_read.contains(&index),
        }
    }

    /// Whether the standard output of step `index` (an exit step's when `exit`) is read.
    pub fn result_read(&self, index: usize, exit: bool) -> bool {
        match exit {
            false => self.result_read.contains(&index),
            true => self.exit_result_read.contains(&index),
        }
    }
}

/// A step a reference names, where the naming step may look.
#[derive(Debug, Clone, Copy)]
enum Named {
    /// One of the workflow's steps (its index in the steps' DAG).
    Step(usize),
    /// An exit step that runs before the naming one (its index in the exit DAG).
    Exit(usize),
}

/// The texts of `step` that may hold references: its image, command, args, env values, script
/// (`source`) and input artifacts' `from`.
pub fn texts(step: &Step) -> impl Iterator<Item = &str> {
    own_texts(step).chain(input_froms(step))
}

/// The texts of `step` that may hold references but for its input artifacts' `from`.
fn own_texts(step: &Step) -> impl Iterator<Item = &str> {
    let command = step.command.iter().flatten();
    let args = step.args.iter().flatten();
    let env = step.env.iter().filter_map(|e| e.value.as_ref());
    let source = step.source.as_deref();
    let http = step.http.iter().flat_map(|h| h.texts());
    let resource = step.resource.iter().flat_map(|r| r.texts());
    std::iter::once(step.image.as_str())
        .chain((command.chain(args).chain(env).chain(source)).map(String::as_str))
        .chain(http)
        .chain(resource)
}

/// The `from` of each input artifact of `step`.
fn input_froms(step: &Step) -> impl Iterator<Item = &str> {
    (step.inputs.iter()).flat_map(|i| i.artifacts.iter().map(|a| a.from.as_str()))
}

/// Checks the references, `when`s and fan-outs of `spec` against its DAGs, and what the step
/// agent needs of the steps of `kinds` that run under it.
///
/// # Errors
/// The first bad one, naming the step and the reference.
pub fn check(
    spec: &WorkFlowSpec,
    kinds: &Kinds,
    dag: &Dag,
    exit: Option<&Dag>,
) -> Result<DataFlow, DagError> {
    let mut flow = DataFlow::default();
    let mut parameters: BTreeMap<String, String> = spec
        .arguments
        .iter()
        .flat_map(|a| &a.parameters)
        .filter_map(|p| Some((p.name.clone(), p.value.clone()?)))
        .collect();
    // Argo's `{{workflow.parameters.json}}`, read in a `when` as `workflow.parameters.json`
    // (unless a parameter is named so); made only for a spec whose `when`s may name it.
    let whens = spec.containers.iter().chain(&spec.on_exit);
    if let Some(arguments) = (spec.arguments.as_deref()).filter(|_| {
        whens
            .filter_map(|s| s.when.as_deref())
            .any(|w| w.contains("json"))
    }) {
        (parameters.entry("json".into())).or_insert_with(|| arguments.argo_json());
    }
    for (i, step) in spec.containers.iter().enumerate() {
        let fan_out = FanOut::compile(step, dag).map_err(|problem| DagError::FanOut {
            step: step.step_name.clone(),
            problem,
        })?;
        if let Some(fan_out) = fan_out {
            flow.fan_out.insert(i, fan_out);
        }
    }
    check_item_names(spec, &flow)?;
    for (i, step) in spec.containers.iter().enumerate() {
        let upstream = |name: &str| {
            let found = dag.index_of(name).filter(|&j| runs_before(dag, j, i));
            found.map(Named::Step)
        };
        let fan_out = flow.fan_out.get(&i).cloned();
        let when = compile_when(step, &parameters, Place::Step)?;
        check_step(
            step,
            (&[dag], Place::Step),
            &upstream,
            fan_out.as_ref(),
            when.as_deref(),
            &mut flow,
        )?;
        check_input_artifacts(step, &[(dag, &spec.containers[..])])?;
        if let Some(when) = when {
            check_when_artifacts(step, &when, dag, &spec.containers)?;
            flow.when.insert(i, when);
        }
        if let Some(strategy) = compile_retry(step)? {
            flow.retry.insert(i, strategy);
        }
        if check_cache(step, flow.fan_out.contains_key(&i), false)? {
            // A success's outputs go into its entry.
            flow.read.insert(i);
        }
        if declares_outputs(step) {
            // Recorded whether or not a step names them: `get` shows them.
            flow.read.insert(i);
        }
    }
    for (i, (step, &kind)) in spec.containers.iter().zip(&kinds.steps).enumerate() {
        check_agent(step, kind, flow.result_read.contains(&i))?;
        check_daemon(step, kind, flow.fan_out.contains_key(&i), false)?;
        check_ip_reads(step, dag, &spec.containers)?;
    }
    if let Some(exit) = exit {
        check_exit_steps(spec, kinds, (dag, exit), &parameters, &mut flow)?;
    }
    Ok(flow)
}

/// Checks the exit steps as [`check`] does the steps: each may name any of the workflow's
/// steps (all have ended when it runs) and the exit steps that run before it (Argo's exit
/// handler steps read each other).
fn check_exit_steps(
    spec: &WorkFlowSpec,
    kinds: &Kinds,
    (dag, exit): (&Dag, &Dag),
    parameters: &BTreeMap<String, String>,
    flow: &mut DataFlow,
) -> Result<(), DagError> {
    let runs = spec.runs.unwrap_or(1);
    for (i, step) in spec.on_exit.iter().enumerate() {
        let refused = |problem: &str| DagError::FanOut {
            step: step.step_name.clone(),
            problem: problem.to_string(),
        };
        if FanOut::compile(step, dag)
            .map_err(|p| refused(&p))?
            .is_some()
        {
            return Err(refused("is an exit step: exit steps do not fan out"));
        }
        let read_before = flow.read.len();
        let any = |name: &str| {
            let earlier = || exit.index_of(name).filter(|&j| runs_before(exit, j, i));
            (dag.index_of(name).map(Named::Step)).or_else(|| earlier().map(Named::Exit))
        };
        let when = compile_when(step, parameters, Place::Exit)?;
        check_step(
            step,
            (&[dag, exit], Place::Exit),
            &any,
            None,
            when.as_deref(),
            flow,
        )?;
        let sources = [(dag, &spec.containers[..]), (exit, &spec.on_exit[..])];
        check_input_artifacts(step, &sources)?;
        if runs > 1 && (step.when.is_some() || flow.read.len() > read_before) {
            return Err(refused(
                "names the steps' outputs, but the steps run several times (runs): an exit \
                 step cannot tell which run's",
            ));
        }
        if let Some(when) = when {
            check_when_artifacts(step, &when, dag, &spec.containers)?;
            // A when that iterates over the steps sees each one's outputs.
            if when.every_step() {
                flow.read
                    .extend((0..dag.len()).filter(|i| !flow.fan_out.contains_key(i)));
            }
            flow.exit_when.insert(i, when);
        }
        if let Some(strategy) = compile_retry(step)? {
            flow.exit_retry.insert(i, strategy);
        }
        check_cache(step, false, true)?;
        check_daemon(step, kinds.exit[i], false, true)?;
        check_ip_reads(step, dag, &spec.containers)?;
    }
    // Once every exit step is checked: a later one may read an earlier one's result.
    for (i, step) in spec.on_exit.iter().enumerate() {
        check_agent(step, kinds.exit[i], flow.exit_result_read.contains(&i))?;
    }
    Ok(())
}

/// Refuses a step named as an item of a step that fans out (`build[3]` beside a `build` with
/// items): the two would share a status entry and a Job name.
fn check_item_names(spec: &WorkFlowSpec, flow: &DataFlow) -> Result<(), DagError> {
    if flow.fan_out.is_empty() {
        return Ok(());
    }
    let fanned: HashSet<&str> = flow
        .fan_out
        .keys()
        .map(|&i| spec.containers[i].step_name.as_str())
        .collect();
    for step in &spec.containers {
        let base = step
            .step_name
            .strip_suffix(']')
            .and_then(|s| s.rsplit_once('['))
            .filter(|(_, index)| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
            .map(|(base, _)| base);
        if let Some(base) = base.filter(|b| fanned.contains(b)) {
            return Err(DagError::FanOut {
                step: step.step_name.clone(),
                problem: format!(
                    "is named as an item of step {base:?}, which fans out: rename one of them"
                ),
            });
        }
    }
    Ok(())
}

/// Checks the references of `step` (a step or an exit step, `place`) to the steps of `dags`
/// (the steps', and for an exit step the exit steps'), found by `upstream`, recording in
/// `flow` whose outputs are read.
fn check_step(
    step: &Step,
    (dags, place): (&[&Dag], Place),
    upstream: &dyn Fn(&str) -> Option<Named>,
    fan_out: Option<&FanOut>,
    when: Option<&When>,
    flow: &mut DataFlow,
) -> Result<(), DagError> {
    let name = &step.step_name;
    let refused = |problem: String| DagError::Reference {
        step: name.clone(),
        problem,
    };
    // What is named, where, whether it is the standard output, and whether it is an output
    // artifact an input artifact takes (of a step that fans out: a directory of every item's).
    let mut named: Vec<(String, &str, bool, bool)> = Vec::new();
    // The references that name a step's end (Argo's `{{steps.NAME.status}}`), not its outputs.
    let mut ended: HashSet<String> = HashSet::new();
    // The references to an output artifact outside an input artifact's `from`.
    let mut not_values: HashSet<String> = HashSet::new();
    let texts = (own_texts(step).map(|t| (t, false))).chain(input_froms(step).map(|t| (t, true)));
    for (text, from) in texts {
        let found = outputs::references(text).map_err(|e| refused(e.to_string()))?;
        for reference in found {
            match reference.source {
                Source::Output { step: source, key } if outputs::step_field(key).is_some() => {
                    named.push((reference.text.to_string(), source, false, false));
                    ended.insert(reference.text.to_string());
                }
                Source::Output { step: source, key } => {
                    let artifact = key.starts_with(outputs::ARTIFACT_PREFIX);
                    let result = key == agent::RESULT;
                    if artifact && !from {
                        // An output artifact is taken by an input artifact, not read as text.
                        not_values.insert(reference.text.to_string());
                    }
                    named.push((reference.text.to_string(), source, result, from && artifact));
                }
                Source::Retries if step.retry_strategy.is_none() => {
                    return Err(refused(format!(
                        "{} is the attempt of a step with a retryStrategy, and this step has none",
                        reference.text
                    )));
                }
                Source::Retries | Source::Workflow(_) => {}
                Source::Item { field } => {
                    check_item(step, reference.text, field, fan_out).map_err(&refused)?;
                }
            }
        }
    }
    named.extend(list_sources(step));
    if let Some(when) = when {
        let text = step.when.as_deref().unwrap_or("");
        let shown = format!("when {text:?}");
        for read in when.item_reads() {
            let named = format!("{shown}: {}", read.shown);
            check_item(step, &named, read.field.as_deref(), fan_out).map_err(&refused)?;
        }
        for source in when.steps() {
            named.push((
                shown.clone(),
                source.as_str(),
                when.reads_result(source),
                false,
            ));
        }
        if when.steps().iter().all(|s| when.reads_only_end(s)) {
            ended.insert(shown);
        }
    }
    for (text, source, result, artifact) in named {
        let index = match upstream(source) {
            Some(Named::Step(index)) => index,
            Some(Named::Exit(index)) => {
                note_exit_read(flow, index, ended.contains(&text), result);
                continue;
            }
            None => return Err(refused(not_before(&text, source, dags, place))),
        };
        if flow.fan_out.contains_key(&index) {
            let read = match () {
                _ if artifact => Aggregate::Artifacts,
                _ if ended.contains(&text) || not_values.contains(&text) => Aggregate::None,
                _ if text.starts_with("when ") => Aggregate::None,
                _ => Aggregate::Values,
            };
            check_fan_in(&text, source, read, place).map_err(&refused)?;
            match read {
                Aggregate::Artifacts => flow.fanned_in.insert(index),
                _ => flow.aggregated.insert(index),
            };
        }
        // A step whose outputs are read is seen with them; its end comes with them.
        if !ended.contains(&text) {
            flow.ended_read.remove(&index);
            flow.read.insert(index);
        } else if !flow.read.contains(&index) {
            flow.ended_read.insert(index);
        }
        if result {
            flow.result_read.insert(index);
        }
    }
    Ok(())
}

/// Records that an exit step reads exit step `index`: its outputs, or only its end (`ended`),
/// and its standard output (`result`).
fn note_exit_read(flow: &mut DataFlow, index: usize, ended: bool, result: bool) {
    if !ended {
        flow.exit_ended_read.remove(&index);
        flow.exit_read.insert(index);
    } else if !flow.exit_read.contains(&index) {
        flow.exit_ended_read.insert(index);
    }
    if result {
        flow.exit_result_read.insert(index);
    }
}

/// Why `text` may not name step `source`, which is not found before the naming step among the
/// steps of `dags`: where it may look, or what it lacks in `dependsOn`.
fn not_before(text: &str, source: &str, dags: &[&Dag], place: Place) -> String {
    if dags.iter().any(|dag| dag.index_of(source).is_some()) {
        return format!(
            "{text} names step {source:?}, which does not run before it: add it to dependsOn \
             (directly or through another step)"
        );
    }
    let looks = match place {
        Place::Step => "a step names the steps before it (containers)",
        Place::Exit => {
            "an exit step names the workflow's steps (containers) and the exit steps \
             before it (onExit)"
        }
    };
    format!("{text} names step {source:?}, which does not exist: {looks}")
}

/// The outputs `step` fans out over (its `withParam`, its `withSequence` bounds), each as the
/// references of [`check_step`] are named: what names it, the step, whether it is the standard
/// output, and not an artifact.
fn list_sources(step: &Step) -> Vec<(String, &str, bool, bool)> {
    let mut named = Vec::new();
    if let Some(param) = step.with_param.as_deref() {
        let text = param.0.trim();
        if let Ok([reference]) = outputs::references(text).as_deref()
            && let Source::Output { step: source, key } = reference.source
        {
            let shown = format!("withParam {text}");
            named.push((shown, source, key == agent::RESULT, false));
        }
    }
    for (field, text) in sequence_texts(step) {
        if let Some((source, key)) = fan_out::output_bound(text) {
            let shown = format!("withSequence.{field} {}", text.trim());
            named.push((shown, source, key == agent::RESULT, false));
        }
    }
    named
}

/// The bounds of `step`'s `withSequence` written as text (a step's output), by field.
fn sequence_texts(step: &Step) -> impl Iterator<Item = (&'static str, &str)> {
    let sequence = step.with_sequence.as_deref();
    let bounds = sequence
        .into_iter()
        .flat_map(|s| [("count", &s.count), ("start", &s.start), ("end", &s.end)]);
    bounds.filter_map(|(field, bound)| match bound {
        Some(IntOrExpr::Expr(text)) => Some((field, text.as_str())),
        _ => None,
    })
}

/// What a reference to a step that fans out reads of its items.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    /// Its output artifacts, every item's (a directory of one per item): an input artifact.
    Artifacts,
    /// An output parameter or its standard output, every item's as a JSON list in item order
    /// (Argo's aggregated outputs).
    Values,
    /// Nothing it may: a `when`, its end (`{{steps.NAME.status}}`), which are one per item, or
    /// an artifact as text.
    None,
}

/// Checks `text`, a reference to `source`, a step that fans out, reading `read` of it: a step
/// (not an exit step) may take its output artifacts (a directory of one per item) and read
/// its parameters and result (a JSON list of every item's); a `when` and the fields of its end
/// are one per item, and nothing says whose to take.
fn check_fan_in(text: &str, source: &str, read: Aggregate, place: Place) -> Result<(), String> {
    if read == Aggregate::None {
        return Err(format!(
            "{text} names step {source:?}, which fans out: a `when`, the end of its items and \
             their artifacts as text cannot be named (a step may read its parameters and \
             result, every item's as a JSON list, and take its output artifacts as an input \
             artifact)"
        ));
    }
    if place == Place::Exit {
        return Err(format!(
            "{text} names step {source:?}, which fans out: an exit step cannot take the \
             outputs of its items (a step can)"
        ));
    }
    Ok(())
}

/// Whether `step` declares output parameters or artifacts.
fn declares_outputs(step: &Step) -> bool {
    (step.outputs.as_deref()).is_some_and(|o| !o.parameters.is_empty() || !o.artifacts.is_empty())
}

/// Checks what a step under the step agent needs: a command or a script (the agent runs the
/// command; an image's own entrypoint is not known without reading the image), and outputs
/// named as keys, none of them `result`.
fn check_agent(step: &Step, kind: StepKind, result_read: bool) -> Result<(), DagError> {
    let refused = |problem: String| DagError::Reference {
        step: step.step_name.clone(),
        problem,
    };
    if !agent::needs_agent(step, kind, result_read) {
        return Ok(());
    }
    let (runs_something, interactive) = match kind {
        StepKind::Container => (step.command.is_some(), false),
        StepKind::Script | StepKind::Http => (true, false),
        // Its outputs are read from its object: it has no result.
        StepKind::Resource if result_read => {
            return Err(refused(
                "a resource step has no result: read a field of its object as an output                  parameter (valueFrom.jsonPath)"
                    .into(),
            ));
        }
        StepKind::Resource => (true, false),
        StepKind::Interactive => (step.command.is_some(), true),
        StepKind::InteractiveScript => (true, true),
        StepKind::Suspend | StepKind::Fail => {
            return Err(refused(
                "runs nothing (suspend or fail), so it has no result, outputs or input artifacts"
                    .into(),
            ));
        }
    };
    if !runs_something {
        let why = if interactive {
            "it is interactive"
        } else if result_read {
            "its result is read"
        } else {
            "it has a source, outputs or input artifacts"
        };
        return Err(refused(format!(
            "runs under the step agent ({why}), which needs a command or a source: the image's \
             own entrypoint cannot be wrapped without reading the image, so name it in command"
        )));
    }
    let Some(outputs) = step.outputs.as_deref() else {
        return Ok(());
    };
    let names = (outputs.parameters.iter().map(|p| ("parameter", &p.name)))
        .chain(outputs.artifacts.iter().map(|a| ("artifact", &a.name)));
    let mut seen = HashSet::new();
    for (what, name) in names {
        if outputs::references(&format!("{{{{steps.x.outputs.{name}}}}}")).is_err() {
            return Err(refused(format!(
                "output {what} {name:?}: a name is letters, digits, _ and -, starting with a \
                 letter or _"
            )));
        }
        if what == "parameter" && name == agent::RESULT {
            return Err(refused(
                "output parameter \"result\": result is the step's standard output; name the \
                 parameter otherwise"
                    .to_string(),
            ));
        }
        if !seen.insert((what, name)) {
            return Err(refused(format!("output {what} {name:?} is declared twice")));
        }
    }
    // What a dag or steps template's outputs name is resolved when it is called.
    let taken = (outputs.parameters.iter())
        .filter(|p| p.value_from.parameter.is_some())
        .map(|p| ("parameter", &p.name, "valueFrom.parameter"))
        .chain(
            (outputs.artifacts.iter().filter(|a| a.from.is_some()))
                .map(|a| ("artifact", &a.name, "from")),
        );
    if let Some((what, name, field)) = taken.into_iter().next() {
        return Err(refused(format!(
            "output {what} {name:?}: {field} is a dag or steps template's output (one of its \
             steps'): a step's output is read from a path in its container"
        )));
    }
    // Where a resource step's outputs are read from is checked with the rest of the step
    // (`resource_action::problems`).
    if kind == StepKind::Resource {
        return Ok(());
    }
    if let Some(parameter) = (outputs.parameters.iter()).find(|p| p.value_from.json_path.is_some())
    {
        return Err(refused(format!(
            "output parameter {:?}: valueFrom.jsonPath reads a resource step's object: a              step's output is read from a path in its container",
            parameter.name
        )));
    }
    let paths = (outputs.parameters.iter().map(|p| &p.value_from.path))
        .chain(outputs.artifacts.iter().map(|a| &a.path));
    for path in paths {
        if !path.starts_with('/') {
            return Err(refused(format!(
                "output path {path:?} is not absolute: name it from /"
            )));
        }
    }
    Ok(())
}

/// Checks a readiness probe (a step running a container or a script), and a daemon step
/// (`daemon: true`): one that runs a container or a script and waits for
/// nobody, in the steps (an exit step runs once the workflow's steps ended, and a daemon lives
/// no longer than they), once (an item's IP is not recorded), writing no outputs and cached by
/// no key (it never ends, so it writes nothing).
fn check_daemon(step: &Step, kind: StepKind, fans_out: bool, exit: bool) -> Result<(), DagError> {
    let runs_a_container = matches!(kind, StepKind::Container | StepKind::Script);
    if step.readiness_probe.is_some() && !runs_a_container {
        return Err(DagError::Reference {
            step: step.step_name.clone(),
            problem: "has a readinessProbe, which only a step running a container or a script \
                      may have"
                .into(),
        });
    }
    if step.daemon != Some(true) {
        return Ok(());
    }
    let refused = |problem: &str| DagError::Reference {
        step: step.step_name.clone(),
        problem: format!("is a daemon (daemon: true), {problem}"),
    };
    let what = match kind {
        StepKind::Container | StepKind::Script => None,
        StepKind::Interactive | StepKind::InteractiveScript => Some("interactive"),
        StepKind::Suspend => Some("suspend"),
        StepKind::Http => Some("http"),
        StepKind::Resource => Some("resource"),
        StepKind::Fail => Some("fail"),
    };
    if let Some(what) = what {
        return Err(refused(&format!(
            "which only a step running a container or a script may be, not a {what} step"
        )));
    }
    if exit {
        return Err(refused(
            "but daemons live as long as the workflow's steps: an exit step may not be one",
        ));
    }
    if fans_out {
        return Err(refused(
            "but it fans out (withItems, withParam, withSequence): a daemon runs once",
        ));
    }
    if declares_outputs(step) || step.cache.is_some() {
        return Err(refused(
            "but declares outputs or a cache: a daemon never ends, so it writes none",
        ));
    }
    Ok(())
}

/// Checks that each `{{steps.NAME.ip}}` of `step` names a daemon step of `steps` (by the
/// index of `dag`): only a daemon's pod's IP is recorded.
fn check_ip_reads(step: &Step, dag: &Dag, steps: &[Step]) -> Result<(), DagError> {
    for text in texts(step) {
        for reference in outputs::references(text).unwrap_or_default() {
            let Source::Output { step: named, key } = reference.source else {
                continue;
            };
            let daemon = (dag.index_of(named)).is_some_and(|i| steps[i].daemon == Some(true));
            if key == outputs::IP_KEY && !daemon {
                return Err(DagError::Reference {
                    step: step.step_name.clone(),
                    problem: format!(
                        "{} names the IP of step {named:?}, which is not a daemon (daemon: \
                         true): only a daemon's pod's IP is recorded",
                        reference.text
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Checks each input artifact's `from` (which [`check_step`] found upstream): one
/// `{{steps.NAME.outputs.artifacts.A}}` of a step of `sources` (the workflow's steps, and for
/// an exit step the exit steps, each list by its DAG's index) that declares an output artifact
/// `A`, and its `path` absolute.
fn check_input_artifacts(step: &Step, sources: &[(&Dag, &[Step])]) -> Result<(), DagError> {
    let Some(inputs) = step.inputs.as_deref() else {
        return Ok(());
    };
    let refused = |problem: String| DagError::Reference {
        step: step.step_name.clone(),
        problem,
    };
    for input in &inputs.artifacts {
        let from = input.from.trim();
        let named = match outputs::references(from).as_deref() {
            Ok([reference]) if reference.text == from => match reference.source {
                Source::Output { step, key } => {
                    (key.strip_prefix(outputs::ARTIFACT_PREFIX)).map(|artifact| (step, artifact))
                }
                _ => None,
            },
            _ => None,
        };
        let Some((source, artifact)) = named else {
            return Err(refused(format!(
                "input artifact {:?}: from {from:?} is not {{{{steps.NAME.outputs.artifacts.A}}}}",
                input.name
            )));
        };
        if !input.path.starts_with('/') {
            return Err(refused(format!(
                "input artifact {:?}: path {:?} is not absolute: name it from /",
                input.name, input.path
            )));
        }
        let declared = (sources.iter())
            .find_map(|(dag, steps)| Some(&steps[dag.index_of(source)?]))
            .and_then(|s| s.outputs.as_deref())
            .is_some_and(|o| o.artifacts.iter().any(|a| a.name == artifact));
        if !declared {
            return Err(refused(format!(
                "input artifact {:?} is from step {source:?}, which declares no output artifact \
                 {artifact:?} (outputs.artifacts)",
                input.name
            )));
        }
    }
    Ok(())
}

/// Checks each output artifact the `when` of `step` names (`steps.NAME.outputs.artifacts.A`,
/// of a step [`check_step`] found) is one its step declares: only those are in its outputs
/// (`steps`: by DAG index).
fn check_when_artifacts(
    step: &Step,
    when: &When,
    dag: &Dag,
    steps: &[Step],
) -> Result<(), DagError> {
    for read in when.reads() {
        let (Some(artifact), Some(source)) = (read.artifact(), dag.index_of(&read.step)) else {
            continue;
        };
        let outputs = steps[source].outputs.as_deref();
        if !outputs.is_some_and(|o| o.artifacts.iter().any(|a| a.name == artifact)) {
            return Err(DagError::Reference {
                step: step.step_name.clone(),
                problem: format!(
                    "when {:?} names {}: step {:?} declares no output artifact {artifact:?} \
                     (outputs.artifacts)",
                    step.when.as_deref().unwrap_or(""),
                    read.shown,
                    read.step
                ),
            });
        }
    }
    Ok(())
}

/// Checks an `{{item}}` or `{{item.FIELD}}` (`text`) of `step`: the step must fan out, and a
/// field must be in every item the spec lists (`withParam` items are checked as they come).
fn check_item(
    step: &Step,
    text: &str,
    field: Option<&str>,
    fan_out: Option<&FanOut>,
) -> Result<(), String> {
    let Some(fan_out) = fan_out else {
        return Err(format!(
            "{text} names an item, but the step does not fan out (withItems, withParam or \
             withSequence)"
        ));
    };
    let Some(field) = field else {
        return Ok(());
    };
    let Some(items) = ItemList::of_spec(step, fan_out) else {
        return Ok(());
    };
    for i in 0..items.len() {
        let item = items.get(i);
        if outputs::item_value(&item, Some(field)).is_none() {
            let shown: String = item.to_string().chars().take(80).collect();
            return Err(format!("{text}: item {i} ({shown}) has no field {field:?}"));
        }
    }
    Ok(())
}

/// Whether `step` is cached (`cache`), checking it may be: not on a step that fans out (the
/// outputs of its items are not read) nor on an exit step, and its `maxAge` parses.
fn check_cache(step: &Step, fans_out: bool, exit: bool) -> Result<bool, DagError> {
    let Some(cache) = step.cache.as_deref() else {
        return Ok(false);
    };
    let refused = |problem: String| DagError::Reference {
        step: step.step_name.clone(),
        problem,
    };
    if fans_out || exit {
        let what = if exit {
            "an exit step"
        } else {
            "a step that fans out"
        };
        return Err(refused(format!("sets cache, which {what} may not")));
    }
    if let Some(age) = &cache.max_age {
        crate::crd::numbers::parse_duration(age)
            .map_err(|e| refused(format!("cache.maxAge {e}")))?;
    }
    Ok(true)
}

/// The step's `retryStrategy`, checked and compiled.
fn compile_retry(step: &Step) -> Result<Option<Arc<Strategy>>, DagError> {
    let Some(strategy) = step.retry_strategy.as_deref() else {
        return Ok(None);
    };
    let refused = |problem: String| DagError::Reference {
        step: step.step_name.clone(),
        problem,
    };
    if step.retries.is_some() {
        return Err(refused(
            "sets both retries and retryStrategy: retries N is retryStrategy {limit: N}; keep one"
                .into(),
        ));
    }
    Strategy::compile(strategy)
        .map(|s| Some(Arc::new(s)))
        .map_err(refused)
}

fn compile_when(
    step: &Step,
    parameters: &BTreeMap<String, String>,
    place: Place,
) -> Result<Option<Arc<When>>, DagError> {
    let Some(expression) = step.when.as_deref() else {
        return Ok(None);
    };
    When::compile_for(expression, parameters, place)
        .map(|w| Some(Arc::new(w)))
        .map_err(|problem| DagError::Reference {
            step: step.step_name.clone(),
            problem: format!("when {expression:?} {problem}"),
        })
}

/// Whether step `j` runs before step `i` (is among its transitive dependencies): a walk up
/// from `i`, O(its ancestors), done only for steps that name another.
fn runs_before(dag: &Dag, j: usize, i: usize) -> bool {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = dag.dependencies(i).collect();
    while let Some(k) = stack.pop() {
        if k == j {
            return true;
        }
        if seen.insert(k) {
            stack.extend(dag.dependencies(k));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkFlow;
    use crate::plan::Compiled;

    fn flow(builder: crate::testing::WorkFlowBuilder) -> Result<DataFlow, String> {
        let wf: WorkFlow = builder.build();
        let compiled = Compiled::new(&wf.spec);
        compiled.dag.map_err(|e| e.to_string())?;
        Ok(compiled.flow)
    }

    fn chain() -> crate::testing::WorkFlowBuilder {
        WorkFlow::test("wf")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["b"])
            .step("side", &[])
    }

    #[test]
    fn outputs_named_upstream_are_read_and_whens_compiled() {
        let flow = flow(
            chain()
                .step("d", &["c"])
                .command(&["echo", "{{steps.a.outputs.x}}"])
                .env("Y", "{{ steps.b.outputs.y }}"),
        )
        .unwrap();
        assert_eq!(flow.read, HashSet::from([0, 1]));
        let mut wf = chain().step("e", &["c"]).build();
        wf.spec.containers[4].when = Some(r#"steps.c.outputs.go == "yes""#.into());
        let compiled = Compiled::new(&wf.spec);
        assert!(compiled.dag.is_ok());
        assert_eq!(compiled.flow.read, HashSet::from([2]));
        assert!(compiled.flow.when.contains_key(&4));
        assert!(flow_of_plain().is_empty());
    }

    fn flow_of_plain() -> DataFlow {
        flow(chain()).unwrap()
    }

    #[test]
    fn a_reference_to_an_unknown_step_a_step_not_upstream_or_an_unknown_form_is_refused() {
        let unknown = flow(
            chain()
                .step("d", &["c"])
                .command(&["echo", "{{steps.x.outputs.k}}"]),
        )
        .unwrap_err();
        assert_eq!(
            unknown,
            r#"step "d": {{steps.x.outputs.k}} names step "x", which does not exist: a step names the steps before it (containers)"#
        );
        let sideways = flow(
            chain()
                .step("d", &["c"])
                .args(&["{{steps.side.outputs.k}}"]),
        )
        .unwrap_err();
        assert!(
            sideways.starts_with(
                r#"step "d": {{steps.side.outputs.k}} names step "side", which does not run before it"#
            ),
            "{sideways}"
        );
        let below = flow(
            WorkFlow::test("wf")
                .step("a", &[])
                .command(&["echo", "{{steps.b.outputs.k}}"])
                .step("b", &["a"]),
        )
        .unwrap_err();
        assert!(below.contains("does not run before it"), "{below}");
        let form = flow(chain().env("X", "{{workflow.name}}")).unwrap_err();
        assert!(
            form.contains("{{workflow.name}} is not a reference"),
            "{form}"
        );
    }

    #[test]
    fn a_when_that_does_not_compile_or_names_a_step_not_upstream_is_refused() {
        let mut wf = chain().build();
        wf.spec.containers[2].when = Some("steps.a.outputs.x ==".into());
        let error = Compiled::new(&wf.spec).dag.unwrap_err().to_string();
        assert!(
            error.starts_with(r#"step "c": when "steps.a.outputs.x ==" does not compile"#),
            "{error}"
        );
        wf.spec.containers[2].when = Some(r#"steps["side"].phase == "Succeeded""#.into());
        let error = Compiled::new(&wf.spec).dag.unwrap_err().to_string();
        assert!(
            error.contains(r#"names step "side", which does not run before it"#),
            "{error}"
        );
    }

    #[test]
    fn an_exit_step_may_name_any_step() {
        let flow = flow(
            chain()
                .exit_step("report", &[])
                .command(&["echo", "{{steps.side.outputs.k}}"]),
        )
        .unwrap();
        assert_eq!(flow.read, HashSet::from([3]));
    }

    #[test]
    fn an_exit_step_may_name_the_exit_steps_before_it_and_no_other() {
        let exits = || {
            chain()
                .exit_step("probe", &[])
                .command(&["echo", "hi"])
                .exit_step("check", &[])
                .command(&["echo", "hi"])
        };
        let mut wf = exits()
            .exit_step("notify", &["probe", "check"])
            .command(&[
                "echo",
                "{{steps.probe.outputs.result}}",
                "{{steps.a.outputs.k}}",
            ])
            .build();
        wf.spec.on_exit[2].when = Some(r#"steps.check.status == "Failed""#.into());
        let read = flow_of(&wf).unwrap();
        assert_eq!(read.exit_read, HashSet::from([0]));
        assert_eq!(read.exit_result_read, HashSet::from([0]));
        assert_eq!(read.exit_ended_read, HashSet::from([1]));
        assert_eq!(read.read, HashSet::from([0]), "the steps' are apart");
        assert!(read.result_read.is_empty());
        let sideways = flow(
            exits()
                .exit_step("notify", &["probe"])
                .command(&["echo", "{{steps.check.outputs.k}}"]),
        )
        .unwrap_err();
        assert!(
            sideways.contains(
                r#"names step "check", which does not run before it: add it to dependsOn"#
            ),
            "{sideways}"
        );
        let unknown = flow(
            exits()
                .exit_step("notify", &["probe"])
                .command(&["echo", "{{steps.nope.outputs.k}}"]),
        )
        .unwrap_err();
        assert_eq!(
            unknown,
            r#"step "notify": {{steps.nope.outputs.k}} names step "nope", which does not exist: an exit step names the workflow's steps (containers) and the exit steps before it (onExit)"#
        );
        let mut wf = exits().exit_step("notify", &["probe"]).build();
        wf.spec.on_exit[2].inputs = Some(Box::new(
            serde_yaml::from_str(
                "artifacts: [{name: log, path: /in/log, from: '{{steps.probe.outputs.artifacts.log}}'}]",
            )
            .unwrap(),
        ));
        let undeclared = flow_of(&wf).unwrap_err();
        assert!(
            undeclared.contains(r#"is from step "probe", which declares no output artifact "log""#),
            "{undeclared}"
        );
        let probe = wf.spec.on_exit.iter().position(|s| s.step_name == "probe");
        let probe = probe.unwrap();
        wf.spec.on_exit[probe].outputs = Some(Box::new(
            serde_yaml::from_str("artifacts: [{name: log, path: /out/log}]").unwrap(),
        ));
        let flow = flow_of(&wf).expect("an exit step takes an earlier exit step's artifact");
        assert!(flow.exit_read.contains(&probe), "{:?}", flow.exit_read);
    }

    fn with_outputs(builder: crate::testing::WorkFlowBuilder, yaml: &str) -> WorkFlow {
        let mut wf = builder.build();
        let last = wf.spec.containers.last_mut().unwrap();
        last.outputs = Some(Box::new(serde_yaml::from_str(yaml).unwrap()));
        wf
    }

    fn flow_of(wf: &WorkFlow) -> Result<DataFlow, String> {
        let compiled = Compiled::new(&wf.spec);
        compiled.dag.map_err(|e| e.to_string())?;
        Ok(compiled.flow)
    }

    #[test]
    fn a_read_result_puts_its_step_under_the_agent_which_needs_a_command() {
        let read = flow(chain().step("d", &["c"]).command(&[
            "echo",
            "{{steps.a.outputs.result}}",
            "{{steps.b.outputs.parameters.k}}",
        ]))
        .unwrap();
        assert_eq!(read.result_read, HashSet::from([0]));
        assert_eq!(read.read, HashSet::from([0, 1]));
        let mut wf = chain()
            .step("d", &["c"])
            .command(&["echo", "{{steps.a.outputs.result}}"])
            .build();
        wf.spec.containers[0].command = None;
        let error = flow_of(&wf).unwrap_err();
        assert!(
            error.starts_with(r#"step "a": runs under the step agent (its result is read), which needs a command or a source"#),
            "{error}"
        );
        wf.spec.containers[0].source = Some(Box::new("echo hi".into()));
        assert!(flow_of(&wf).is_ok(), "a script runs by sh");
    }

    #[test]
    fn a_when_reads_the_result_in_either_form_and_only_declared_artifacts() {
        for expression in [
            r#"steps["a"].outputs.result == "heads""#,
            r#"steps['a'].outputs["result"] == "heads""#,
            r#"steps.a["outputs"].result == "heads""#,
            r#"steps.a.outputs.result == "heads""#,
        ] {
            let mut wf = chain().build();
            wf.spec.containers[2].when = Some(expression.into());
            let flow = flow_of(&wf).unwrap();
            assert_eq!(flow.result_read, HashSet::from([0]), "{expression}");
        }
        let mut wf = chain().build();
        wf.spec.containers[2].when = Some(r#"steps["a"].outputs.k == "heads""#.into());
        assert!(flow_of(&wf).unwrap().result_read.is_empty());
        let declares_log = with_outputs(
            WorkFlow::test("wf").step("a", &[]),
            "artifacts: [{name: log, path: /tmp/log}]",
        );
        let when_after = |expression: &str| {
            let mut wf = declares_log.clone();
            let mut step = crate::testing::step("c", &["a"]);
            step.when = Some(expression.into());
            wf.spec.containers.push(step);
            flow_of(&wf)
        };
        assert!(when_after(r#"steps["a"].outputs.artifacts.log != """#).is_ok());
        assert_eq!(
            when_after(r#"steps["a"].outputs.artifacts.lg != """#).unwrap_err(),
            r#"step "c": when "steps[\"a\"].outputs.artifacts.lg != \"\"" names steps["a"].outputs.artifacts.lg: step "a" declares no output artifact "lg" (outputs.artifacts)"#
        );
    }

    #[test]
    fn declared_outputs_are_read_and_checked() {
        let wf = with_outputs(
            chain(),
            "parameters: [{name: sha, valueFrom: {path: /tmp/sha}}]",
        );
        assert!(flow_of(&wf).unwrap().read.contains(&3));
        for (yaml, words) in [
            (
                "parameters: [{name: result, valueFrom: {path: /tmp/r}}]",
                "result is the step's standard output",
            ),
            (
                "parameters: [{name: a.b, valueFrom: {path: /tmp/r}}]",
                r#"output parameter "a.b": a name is letters"#,
            ),
            (
                "parameters: [{name: x, valueFrom: {path: tmp/r}}]",
                r#"output path "tmp/r" is not absolute"#,
            ),
            (
                "artifacts: [{name: x, path: /a}, {name: x, path: /b}]",
                r#"output artifact "x" is declared twice"#,
            ),
        ] {
            let error = flow_of(&with_outputs(chain(), yaml)).unwrap_err();
            assert!(error.contains(words), "{yaml}: {error}");
        }
    }

    #[test]
    fn an_input_artifact_comes_from_an_upstream_step_that_declares_it() {
        let build = |from: &str, path: &str| {
            let mut wf = with_outputs(
                WorkFlow::test("wf").step("a", &[]).step("side", &[]),
                "artifacts: [{name: app, path: /out/app}]",
            );
            let mut step = crate::testing::step("b", &["side"]);
            step.inputs = Some(Box::new(
                serde_yaml::from_str(&format!(
                    "artifacts: [{{name: app, path: {path}, from: '{from}'}}]"
                ))
                .unwrap(),
            ));
            wf.spec.containers.push(step);
            flow_of(&wf)
        };
        assert!(build("{{steps.side.outputs.artifacts.app}}", "/in/app").is_ok());
        for (from, path, words) in [
            (
                "{{steps.a.outputs.artifacts.app}}",
                "/in/app",
                r#"names step "a", which does not run before it"#,
            ),
            (
                "{{steps.side.outputs.artifacts.lib}}",
                "/in/app",
                r#"which declares no output artifact "lib""#,
            ),
            (
                "{{steps.side.outputs.app}}",
                "/in/app",
                "is not {{steps.NAME.outputs.artifacts.A}}",
            ),
            (
                "{{steps.side.outputs.artifacts.app}}",
                "in/app",
                r#"path "in/app" is not absolute"#,
            ),
        ] {
            let error = build(from, path).unwrap_err();
            assert!(error.contains(words), "{from} {path}: {error}");
        }
    }

    /// `a` fans out over two items, each declaring the artifact `app` and the parameter `v`;
    /// `b` after it takes `from` as an input artifact (and runs `command`), or an exit step
    /// does.
    fn fan_in(from: &str, command: &[&str], exit: bool) -> Result<DataFlow, String> {
        let mut wf = with_outputs(
            WorkFlow::test("wf")
                .step("a", &[])
                .with_items(&[serde_json::json!(1), serde_json::json!(2)]),
            "{artifacts: [{name: app, path: /out/app}], parameters: [{name: v, valueFrom: {path: /out/v}}]}",
        );
        let mut step = crate::testing::step("b", &["a"]);
        step.command = Some(command.iter().map(|s| s.to_string()).collect());
        step.inputs = Some(Box::new(
            serde_yaml::from_str(&format!(
                "artifacts: [{{name: app, path: /in/app, from: '{from}'}}]"
            ))
            .unwrap(),
        ));
        if exit {
            step.depends_on = Vec::new();
            wf.spec.on_exit.push(step);
        } else {
            wf.spec.containers.push(step);
        }
        flow_of(&wf)
    }

    #[test]
    fn an_input_artifact_may_take_the_artifacts_of_a_step_that_fans_out() {
        let taken = fan_in("{{steps.a.outputs.artifacts.app}}", &["ls"], false).unwrap();
        assert_eq!(taken.fanned_in, HashSet::from([0]));
        assert!(taken.read.contains(&0));
        for (from, command, exit, words) in [
            (
                "{{steps.a.outputs.artifacts.lib}}",
                "ls",
                false,
                r#"which declares no output artifact "lib""#,
            ),
            (
                "{{steps.a.outputs.artifacts.app}}",
                "{{steps.a.outputs.artifacts.app}}",
                false,
                "cannot be named (a step may read its parameters and result",
            ),
            (
                "{{steps.a.outputs.artifacts.app}}",
                "ls",
                true,
                "an exit step cannot take the outputs of its items",
            ),
        ] {
            let error = fan_in(from, &[command], exit).unwrap_err();
            assert!(error.contains(words), "{from} {command}: {error}");
        }
    }
}
