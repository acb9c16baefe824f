//! The converter's table: every Argo field it knows, where it is, what it becomes here and
//! where the meaning differs (or why it is not supported). The converter copies and renames
//! fields by these rows ([`super::walk`]), names the unsupported ones with their row's note, and
//! `docs/argo.md` is generated from them ([`markdown`]), so the two cannot disagree.

/// Where in an Argo document a field sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A Workflow's, WorkflowTemplate's or ClusterWorkflowTemplate's `spec`, a CronWorkflow's
    /// `spec.workflowSpec`.
    Workflow,
    /// A CronWorkflow's `spec`.
    Cron,
    /// `spec.templates[]`.
    Template,
    /// A template's `container` or `script`.
    Container,
    /// A template's `http`.
    Http,
    /// A template's `resource`.
    Resource,
    /// A template's `dag`.
    Dag,
    /// `dag.tasks[]`.
    Task,
    /// `steps[][]`.
    Step,
    /// `arguments` of the workflow or of a task or step.
    Arguments,
    /// A template's `inputs`.
    Inputs,
    /// A template's `outputs`.
    Outputs,
    /// `parameters[]` of arguments, inputs and outputs.
    Parameter,
    /// `parameters[].valueFrom`.
    ValueFrom,
    /// `artifacts[]` of arguments, inputs and outputs.
    Artifact,
    /// `retryStrategy`.
    Retry,
    /// `retryStrategy.backoff`.
    Backoff,
    /// `withSequence`.
    Sequence,
    /// `continueOn`.
    ContinueOn,
    /// `synchronization`.
    Synchronization,
    /// `memoize`.
    Memoize,
    /// `ttlStrategy`.
    Ttl,
    /// `podGC`.
    PodGc,
}

impl Place {
    /// Every place, in the order of the generated document.
    pub const ALL: [Place; 23] = [
        Place::Workflow,
        Place::Template,
        Place::Container,
        Place::Http,
        Place::Resource,
        Place::Dag,
        Place::Task,
        Place::Step,
        Place::Arguments,
        Place::Inputs,
        Place::Outputs,
        Place::Parameter,
        Place::ValueFrom,
        Place::Artifact,
        Place::Retry,
        Place::Backoff,
        Place::Sequence,
        Place::ContinueOn,
        Place::Synchronization,
        Place::Memoize,
        Place::Ttl,
        Place::PodGc,
        Place::Cron,
    ];

    /// How the generated document heads the place's rows.
    pub fn heading(self) -> &'static str {
        match self {
            Place::Workflow => "Workflow `spec` (and a CronWorkflow's `spec.workflowSpec`)",
            Place::Cron => "CronWorkflow `spec`",
            Place::Template => "`spec.templates[]`",
            Place::Container => "`templates[].container`, `templates[].script`",
            Place::Http => "`templates[].http`",
            Place::Resource => "`templates[].resource`",
            Place::Dag => "`templates[].dag`",
            Place::Task => "`dag.tasks[]`",
            Place::Step => "`steps[][]`",
            Place::Arguments => "`arguments` (of the workflow, a task or a step)",
            Place::Inputs => "`templates[].inputs`",
            Place::Outputs => "`templates[].outputs`",
            Place::Parameter => "`parameters[]` (arguments, inputs, outputs)",
            Place::ValueFrom => "`parameters[].valueFrom`",
            Place::Artifact => "`artifacts[]` (arguments, inputs, outputs)",
            Place::Retry => "`retryStrategy`",
            Place::Backoff => "`retryStrategy.backoff`",
            Place::Sequence => "`withSequence`",
            Place::ContinueOn => "`continueOn`",
            Place::Synchronization => "`synchronization`",
            Place::Memoize => "`memoize`",
            Place::Ttl => "`ttlStrategy`",
            Place::PodGc => "`podGC`",
        }
    }
}

/// What a field becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Becomes {
    /// The same field, the same value.
    Same,
    /// The same value under another name (a dotted path: `podTemplate.volumes`).
    Renamed(&'static str),
    /// Converted by the code of its place; the text says into what.
    Converted(&'static str),
    /// Not converted: named on standard error with the row's note.
    Unsupported,
    /// Left out without a word: it changes nothing here (the note says why).
    Dropped,
}

/// One field of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub place: Place,
    /// The Argo field's name in its place.
    pub field: &'static str,
    pub becomes: Becomes,
    /// Where the meaning differs; for an unsupported field, why (the message `convert` gives).
    pub note: &'static str,
}

const fn row(place: Place, field: &'static str, becomes: Becomes, note: &'static str) -> Row {
    Row {
        place,
        field,
        becomes,
        note,
    }
}

use Becomes::{Converted, Dropped, Renamed, Same, Unsupported};
use Place::*;

/// The fields a workflow spec has in both, and the pod-level ones ours keeps in `podTemplate`.
#[rustfmt::skip]
const WORKFLOW_ROWS: &[Row] = &[
    row(Workflow, "entrypoint", Converted("`containers`: a `dag` or `steps` entrypoint's tasks as the steps (a steps template's groups each depending on the whole group before), a container or script entrypoint as one step named after it calling its template"), "inlined so that `get` shows the tasks' own names; the entrypoint's `{{inputs.parameters.X}}` is `{{workflow.parameters.X}}`, as Argo fills it from the workflow's arguments"),
    row(Workflow, "templates", Converted("`templates`"), "the entrypoint is left out of them unless a template calls it"),
    row(Workflow, "arguments", Converted("`arguments`"), ""),
    row(Workflow, "serviceAccountName", Renamed("podTemplate.serviceAccountName"), ""),
    row(Workflow, "volumes", Renamed("podTemplate.volumes"), ""),
    row(Workflow, "nodeSelector", Renamed("podTemplate.nodeSelector"), ""),
    row(Workflow, "affinity", Renamed("podTemplate.affinity"), ""),
    row(Workflow, "tolerations", Renamed("podTemplate.tolerations"), ""),
    row(Workflow, "imagePullSecrets", Renamed("podTemplate.imagePullSecrets"), ""),
    row(Workflow, "securityContext", Renamed("podTemplate.securityContext"), ""),
    row(Workflow, "podPriorityClassName", Renamed("podTemplate.priorityClassName"), ""),
    row(Workflow, "podMetadata", Renamed("podTemplate.metadata"), ""),
    row(Workflow, "parallelism", Same, "counts steps (fan-out items too), Argo's counts pods of the whole workflow the same way"),
    row(Workflow, "suspend", Same, ""),
    row(Workflow, "activeDeadlineSeconds", Same, "counted from the first step's start; exit steps still run past it"),
    row(Workflow, "priority", Same, "orders steps under the operator's `--max-running-steps`"),
    row(Workflow, "shutdown", Same, ""),
    row(Workflow, "workflowTemplateRef", Same, ""),
    row(Workflow, "synchronization", Converted("`synchronization`"), "held for the whole run"),
    row(Workflow, "onExit", Converted("`onExit`: the exit template's tasks, or its steps group after group, as exit steps (a container or script template as one exit step named after it)"), "`{{workflow.status}}` in a `when` is `workflow.status`, and Argo's `Succeeded` is `Completed` here (`Error` is `Failed`); in a command use `$WORKFLOW_STATUS`; an exit step reads the exit steps before it (`{{steps.X.status}}`, their outputs), as in Argo, and the workflow's steps too; an exit step named as one of the workflow's steps is `NAME-on-exit` (noted), and so are the exit steps' references to it"),
    row(Workflow, "ttlStrategy", Converted("`ttlSecondsAfterFinished`"), "one TTL for either outcome"),
    row(Workflow, "podGC", Converted("`podCleanup`"), ""),
    row(Workflow, "retryStrategy", Converted("the `retryStrategy` of each template that has none"), ""),
    row(Workflow, "artifactGC", Converted("`artifactGC.strategy`"), "only the strategy: `OnWorkflowCompletion`, `OnWorkflowDeletion`, `Never`"),
    row(Workflow, "volumeClaimTemplates", Converted("`workspace`: the claim, mounted in every step where the steps mount it"), "one claim per run, mounted in every step; several claims, or one mounted at different paths, are not supported yet"),
    row(Workflow, "artifactRepositoryRef", Unsupported, "artifactRepositoryRef is not supported: set `artifactRepository`, or the namespace's ConfigMap `workflow-artifact-repository`"),
    row(Workflow, "automountServiceAccountToken", Converted("the pod's `automountServiceAccountToken`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "executor", Unsupported, "the executor's service account is not supported: steps run as `podTemplate.serviceAccountName`"),
    row(Workflow, "hostNetwork", Converted("the pod's `hostNetwork`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "dnsPolicy", Converted("the pod's `dnsPolicy`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "dnsConfig", Converted("the pod's `dnsConfig`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "schedulerName", Converted("the pod's `schedulerName`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "hostAliases", Converted("the pod's `hostAliases`, written into the workflow's `podSpecPatch`"), "every step's pod; a template's `podSpecPatch` goes over it"),
    row(Workflow, "podSpecPatch", Same, "every step's pod patched, before a template's own `podSpecPatch` goes over it, as in Argo; as a template's, a JSON merge patch whose lists of named items merge by name; `{{workflow.*}}` forms are filled"),
    row(Workflow, "podDisruptionBudget", Unsupported, "podDisruptionBudget is not supported yet"),
    row(Workflow, "metrics", Same, "recorded on the operator's `/metrics` when the workflow ends, named `workflow_operator_NAME` (a counter's `_total` added), once per operator process; a `realtime` gauge is set at the end only; a `when` is `LEFT OP RIGHT` (`==`, `!=`, `<`, `>`, `<=`, `>=`)"),
    row(Workflow, "hooks", Converted("`hooks`: `exit` as an exit step `hooks.exit`; one whose `expression` holds while the workflow runs (`workflow.status == \"Running\"`) as a step `hooks.NAME` started with the others, any other as an exit step `hooks.NAME` with the expression as its `when`"), "each runs at most once; `Succeeded` is `Completed` here (`Error` is `Failed`); an expression reading anything but `workflow.status`, or using expr-lang's `not` or `in`, and a hook calling a `templateRef`, are named; a failing hook other than `exit` does not fail the workflow, as in Argo"),
    row(Workflow, "templateDefaults", Unsupported, "templateDefaults is not supported yet"),
    row(Workflow, "archiveLogs", Unsupported, "log archiving is not supported: logs stay with the pods (`podCleanup` decides when they go)"),
    row(Workflow, "workflowMetadata", Unsupported, "workflowMetadata is not supported: set the workflow's own metadata"),
    row(Workflow, "executorPlugins", Unsupported, "executor plugins are not supported"),
    row(Workflow, "podResources", Unsupported, "podResources is not supported yet"),
    row(Workflow, "resourceClaims", Unsupported, "resourceClaims are not supported yet"),
    row(Workflow, "volumeClaimGC", Unsupported, "volumeClaimGC is not supported yet"),
];

#[rustfmt::skip]
const TEMPLATE_ROWS: &[Row] = &[
    row(Template, "name", Same, ""),
    row(Template, "inputs", Converted("`inputs`"), "`{{inputs.artifacts.NAME.path}}` in the template is the path its input artifact declares, written out (and `{{outputs.artifacts.NAME.path}}`, `{{outputs.parameters.NAME.path}}` its outputs')"),
    row(Template, "outputs", Converted("`outputs`"), "a `dag` or `steps` template's own outputs (`valueFrom.parameter`, an artifact's `from`) are resolved when it is called: a caller's `{{tasks.CALL.outputs...}}` reads the inner step's; a call that fans out has none (Argo gathers its items'); its timeout, retries, cache and locks are not supported yet"),
    row(Template, "container", Converted("the container's fields on the template"), ""),
    row(Template, "script", Converted("the container's fields and `source` on the template"), "without `command`, a script runs with `sh` here"),
    row(Template, "dag", Converted("`dag`: the tasks as steps"), ""),
    row(Template, "steps", Converted("`steps`: the groups as Argo writes them"), ""),
    row(Template, "activeDeadlineSeconds", Converted("the step's `timeout` (seconds)"), "without one a step may run for ever, as in Argo: the converted spec sets `maxStepTimeout: -1`"),
    row(Template, "timeout", Converted("the step's `timeout` (its duration in seconds)"), ""),
    row(Template, "retryStrategy", Converted("`retryStrategy`"), ""),
    row(Template, "initContainers", Converted("`initContainers`, Kubernetes containers"), "`mirrorVolumeMounts: true` is written out: the template's `volumeMounts` are added to the container's, as Argo adds the main container's; an init container or sidecar mounting the `volumeClaimTemplates` claim, mirrored or not, is not supported (the workspace is mounted in the step's container only)"),
    row(Template, "sidecars", Converted("`sidecars`, Kubernetes containers"), "Kubernetes' native sidecar containers, stopped once the step ended; `mirrorVolumeMounts: true` is written out, as for `initContainers`"),
    row(Template, "synchronization", Converted("`synchronization`"), "held while the step runs"),
    row(Template, "memoize", Converted("`cache`"), ""),
    row(Template, "volumes", Converted("the workflow's `podTemplate.volumes`"), "every step's pod has them (a step mounts those it names)"),
    row(Template, "archiveLocation", Dropped, "logs are not archived: they stay with the pods"),
    row(Template, "annotations", Dropped, "a display annotation of Argo's UI"),
    row(Template, "failFast", Converted("the workflow's `failFast`, for the entrypoint"), ""),
    row(Template, "parallelism", Converted("the workflow's `parallelism`, for the entrypoint; the template's `parallelism` otherwise"), "a call's steps hold a semaphore of that limit (the template's own, per call): every step the call becomes counts, a nested dag's steps too, where Argo counts the nested dag as one"),
    row(Template, "daemon", Same, "a container or script template's: the step is done (`Succeeded`, reason `Daemoned`) once its pod runs and is ready, and the steps after it start while it runs on; `{{steps.X.ip}}` (`{{tasks.X.ip}}`) is its pod's IP (a daemon's only: another step's is refused); it is stopped when the workflow ends, not when the dag or steps template that started it ends, as in Argo; it may not fan out, have outputs or be an exit handler's; one that fails after it was ready fails its step (or is retried by its `retryStrategy`, the steps started already keeping the IP they were given)"),
    row(Template, "resource", Converted("`resource`: a resource step"), "the step agent takes the action from the step's pod, with the workflow's service account (`podTemplate.serviceAccountName`), as Argo's executor does"),
    row(Template, "suspend", Converted("`suspend` on the template: a suspend step, with its `duration`"), "runs no pod; `workflow-operator resume NAME` resumes it (and ends a `duration` early); its outputs may be supplied at resume (`valueFrom.supplied`); Argo's node `approve`/`reject` inputs are not supported"),
    row(Template, "http", Converted("`http` on the template: an HTTP step, whose request the step agent makes from the step's own pod"), "the response body is the step's `result`; each step is a pod of its own (Argo's agent makes a workflow's requests from one shared pod)"),
    row(Template, "plugin", Unsupported, "plugin templates are not supported"),
    row(Template, "data", Unsupported, "data templates are not supported yet"),
    row(Template, "containerSet", Unsupported, "containerSet templates are not supported yet"),
    row(Template, "metrics", Converted("`metrics`"), "a container or script template's: on each step calling it, recorded when the step ends (not when skipped); `{{status}}` is `Succeeded` or `Failed` (a timeout too, never `Error`); a dag or steps template's, and those of a call that fans out, are not supported yet"),
    row(Template, "nodeSelector", Same, "its labels over the workflow's `podTemplate.nodeSelector`"),
    row(Template, "affinity", Same, "instead of the workflow's `podTemplate.affinity`"),
    row(Template, "tolerations", Same, "besides the workflow's `podTemplate.tolerations`"),
    row(Template, "metadata", Unsupported, "a template's pod metadata is not supported yet: set the workflow's (`podTemplate.metadata`)"),
    row(Template, "serviceAccountName", Converted("the pod's `serviceAccountName`, written into the template's `podSpecPatch`"), "the step's pod runs as that account (a resource step acts with it); the template's own `podSpecPatch` goes over it"),
    row(Template, "automountServiceAccountToken", Converted("the pod's `automountServiceAccountToken`, written into the template's `podSpecPatch`"), "the template's own `podSpecPatch` goes over it"),
    row(Template, "securityContext", Converted("the pod's `securityContext`, written into the template's `podSpecPatch`"), "the pod's security context (the container's own is `securityContext` in `container`); the template's own `podSpecPatch` goes over it"),
    row(Template, "priorityClassName", Converted("the pod's `priorityClassName`, written into the template's `podSpecPatch`"), "the template's own `podSpecPatch` goes over it"),
    row(Template, "schedulerName", Converted("the pod's `schedulerName`, written into the template's `podSpecPatch`"), "the template's own `podSpecPatch` goes over it"),
    row(Template, "hostAliases", Converted("the pod's `hostAliases`, written into the template's `podSpecPatch`"), "the template's own `podSpecPatch` goes over it"),
    row(Template, "podSpecPatch", Same, "a JSON merge patch whose lists of named items (`containers`, `volumes`, `env`) merge by name, as Kubernetes' strategic merge does for them; other lists are replaced whole"),
    row(Template, "executor", Unsupported, "the executor's service account is not supported"),
    row(Template, "pendingTimeout", Unsupported, "a template's pendingTimeout is not supported: the workflow's `startTimeout` bounds a pod's start"),
    row(Template, "podResources", Unsupported, "podResources is not supported yet"),
    row(Template, "resourceClaims", Unsupported, "resourceClaims are not supported yet"),
];

#[rustfmt::skip]
const CONTAINER_ROWS: &[Row] = &[
    row(Container, "image", Same, ""),
    row(Container, "command", Same, ""),
    row(Container, "args", Same, ""),
    row(Container, "env", Same, ""),
    row(Container, "envFrom", Same, ""),
    row(Container, "volumeMounts", Same, ""),
    row(Container, "workingDir", Same, ""),
    row(Container, "imagePullPolicy", Same, ""),
    row(Container, "securityContext", Same, ""),
    row(Container, "resources", Same, ""),
    row(Container, "source", Same, "a `script`'s; `{{...}}` in it is filled, `$(VAR)` is not expanded"),
    row(Container, "name", Dropped, "the step's container is named by the operator"),
    row(Container, "ports", Converted("the container's `ports`, written into the template's `podSpecPatch` (its container `main`)"), ""),
    row(Container, "livenessProbe", Converted("the container's `livenessProbe`, written into the template's `podSpecPatch` (its container `main`)"), "a probe or lifecycle hook is the kubelet's, as in Argo"),
    row(Container, "readinessProbe", Same, "the step's container's; a daemon is ready, and done, once it passed"),
    row(Container, "startupProbe", Converted("the container's `startupProbe`, written into the template's `podSpecPatch` (its container `main`)"), "a probe or lifecycle hook is the kubelet's, as in Argo"),
    row(Container, "lifecycle", Converted("the container's `lifecycle`, written into the template's `podSpecPatch` (its container `main`)"), "a probe or lifecycle hook is the kubelet's, as in Argo"),
    row(Container, "stdin", Unsupported, "stdin is not supported"),
    row(Container, "stdinOnce", Unsupported, "stdinOnce is not supported"),
    row(Container, "tty", Unsupported, "tty is not supported"),
    row(Container, "terminationMessagePath", Unsupported, "the termination message carries the step's outputs here"),
    row(Container, "terminationMessagePolicy", Unsupported, "the termination message carries the step's outputs here"),
    row(Container, "volumeDevices", Converted("the container's `volumeDevices`, written into the template's `podSpecPatch` (its container `main`)"), ""),
    row(Container, "resizePolicy", Unsupported, "resizePolicy is not supported yet"),
];

#[rustfmt::skip]
const CALL_ROWS: &[Row] = &[
    row(Dag, "tasks", Converted("the `dag`'s steps"), ""),
    row(Dag, "failFast", Converted("the workflow's `failFast`, for the entrypoint"), "a nested dag's own failFast is not supported yet"),
    row(Dag, "target", Converted("the template's `target`"), "names separated by spaces, parameters filled; the steps not needed are left out (`get` does not show them); an entrypoint with a target is one step calling its template, its steps named `ENTRYPOINT/TASK`"),
    row(Task, "name", Renamed("stepName"), ""),
    row(Task, "template", Same, ""),
    row(Task, "templateRef", Same, ""),
    row(Task, "arguments", Converted("`arguments` (artifacts as the step's `inputs.artifacts`)"), "a parameter the called template does not declare is left out, as Argo ignores it"),
    row(Task, "dependencies", Renamed("dependsOn"), ""),
    row(Task, "depends", Converted("`dependsOn` every task named, and a `when` over their `steps[\"A\"].status` that is the expression (none for tasks joined by `&&`)"), "`.Succeeded`, `.Failed`, `.Errored` (`Error`), `.Skipped`, `.Omitted` (a task skipped by a `when` its `depends` made), `.Daemoned` (`steps[\"A\"].daemoned`: a daemon that was ready) with `&&`, `||`, `!` and parentheses; a task another depends on the failure of gets `continueOn: {failed: true}`, as Argo fails a dag only when a failure reaches its last tasks; where Argo would still fail the workflow (a task after it needs its success), or cannot tell Skipped from Omitted (a task with a `when` and a `depends`), it is named; `.AnySucceeded` and `.AllFailed` are not supported yet"),
    row(Task, "withItems", Same, ""),
    row(Task, "withParam", Converted("`withParam`; a JSON list written out is `withItems`"), "over an upstream step's output, or a parameter holding a JSON list (`{{inputs.parameters.list}}`, a workflow's argument: its items, known when the workflow starts); the outputs of a task that fans out are a JSON list of every item's, in item order, as Argo aggregates them (not in a `when`); a call of a `dag` or `steps` template fans out only over a list known when the workflow starts"),
    row(Task, "withSequence", Converted("`withSequence`"), "`count`, `start` and `end` may be an upstream step's output (`{{tasks.gen.outputs.result}}`), read once it ran; a call of a `dag` or `steps` template is not run per number of such a sequence (not supported yet)"),
    row(Task, "when", Converted("`when` in CEL"), "translated where it is comparisons of variables, words and numbers joined by `&&`, `||`, `!` and parentheses (`{{tasks.flip.outputs.result}} == heads` is `steps[\"flip\"].outputs.result == \"heads\"`); `{{tasks.X.status}}` is `steps[\"X\"].status` (Argo's names: `Succeeded`, `Failed`, `Error`, `Skipped`), `{{tasks.X.exitCode}}` compared as text or a number, `{{tasks.X.startedAt}}` and `.finishedAt` as RFC 3339 text, ordered (`<`, `>`, ...) as times against each other or a quoted RFC 3339 time, as govaluate orders texts that read as dates (so are `{{workflow.scheduledTime}}` and `.creationTimestamp`); `{{workflow.duration}}` is `workflow.duration` (seconds), `{{workflow.parameters.json}}` is `workflow.parameters.json`, `{{workflow.failures}}` (an exit handler's) `workflow.failures`, the same JSON text its pods get; `{{pod.name}}` is refused, as Argo refuses it outside a pod; a quoted variable (`'{{tasks.X.status}}'`) is the variable; anything else is named; `{{item}}` and `{{item.FIELD}}` are decided per item, as Argo fills them in: an item its `when` skips is shown `Skipped` (`NAME[i]`) and adds nothing to the task's outputs"),
    row(Task, "continueOn", Converted("`continueOn`"), ""),
    row(Task, "onExit", Converted("the task's `exit` hook (`hooks.exit`)"), "as `hooks.exit`"),
    row(Task, "hooks", Converted("`hooks`: each a step `TASK.hooks.NAME` calling the template; `exit` after the task, whatever its result; one whose `expression` holds while the task runs (`tasks.X.status == \"Running\"`) with the task, any other after it with the expression as its `when`"), "`tasks.X` and `steps[\"X\"]` read the task's status as a `when` does (Argo's names); the tasks after it wait for its hooks, as in Argo; a hook's failure does not fail the workflow; each runs at most once; a hook on a task that fans out or calls a `dag` or `steps` template is not supported yet; an expression reading anything but a status, and a hook calling a `templateRef`, are named"),
    row(Task, "inline", Converted("the inline container or script template's fields on the step"), "an inline dag or steps template is not supported yet"),
    row(Step, "name", Same, "a step of a workflow's entrypoint becomes `stepName`"),
    row(Step, "template", Same, ""),
    row(Step, "templateRef", Same, ""),
    row(Step, "arguments", Converted("`arguments` (artifacts as the step's `inputs.artifacts`)"), ""),
    row(Step, "withItems", Same, ""),
    row(Step, "withParam", Converted("`withParam`; a JSON list written out is `withItems`"), "as a dag task's"),
    row(Step, "withSequence", Converted("`withSequence`"), "as a dag task's"),
    row(Step, "when", Converted("`when` in CEL"), "as a dag task's"),
    row(Step, "continueOn", Converted("`continueOn`"), ""),
    row(Step, "onExit", Converted("the step's `exit` hook (`hooks.exit`)"), "as `hooks.exit`"),
    row(Step, "hooks", Converted("`hooks`, as a dag task's"), "as a dag task's"),
    row(Step, "inline", Converted("the inline container or script template's fields on the step"), "an inline dag or steps template is not supported yet"),
];

#[rustfmt::skip]
const DATA_ROWS: &[Row] = &[
    row(Arguments, "parameters", Converted("`parameters`"), ""),
    row(Arguments, "artifacts", Converted("a task's or step's: its `inputs.artifacts` (`from` or `raw`, at the path the template declares); the workflow's `raw` ones: the entrypoint's input artifacts of the same name"), "a workflow's artifact gives its content to the entrypoint (a container or script entrypoint's step at the path the template declares; a `dag` or `steps` entrypoint's steps taking `from: {{inputs.artifacts.NAME}}`), and to the exit handler, as Argo fills both from the workflow's arguments; a workflow's artifact taken from elsewhere than `raw` is not supported yet"),
    row(Inputs, "parameters", Converted("`inputs.parameters`"), "an input's `value` is its `default` here"),
    row(Inputs, "artifacts", Converted("the calling steps' `inputs.artifacts`; `raw` ones the template's `inputs.artifacts`"), "a container or script template keeps its `raw` input artifacts, which every call gets unless it gives one of that name; a `dag` or `steps` template's are given only where it is the entrypoint; an input artifact with another source of its own (`http`, `git`, `s3`, ...) is not supported yet"),
    row(Outputs, "parameters", Converted("`outputs.parameters`"), "one named `result` is `result-parameter` here, and so are the references to it (`{{steps.X.outputs.parameters.result}}`): a step's `result` is its standard output, which Argo keeps apart"),
    row(Outputs, "artifacts", Converted("`outputs.artifacts`"), ""),
    row(Outputs, "result", Dropped, "a status field"),
    row(Outputs, "exitCode", Dropped, "a status field"),
    row(Parameter, "name", Same, ""),
    row(Parameter, "value", Same, ""),
    row(Parameter, "default", Same, ""),
    row(Parameter, "enum", Same, ""),
    row(Parameter, "description", Same, ""),
    row(Parameter, "valueFrom", Converted("`valueFrom`"), ""),
    row(Parameter, "globalName", Same, "on a step's or a dag or steps template's output: `status.outputs.parameters` once the step succeeded; `{{workflow.outputs.parameters.NAME}}` makes the step that reads it run after the writer"),
    row(ValueFrom, "path", Same, ""),
    row(ValueFrom, "default", Converted("`default` beside `valueFrom`"), ""),
    row(ValueFrom, "supplied", Same, "a suspend step's output, given as it is resumed: `workflow-operator resume NAME --step STEP --output NAME=VALUE` is `argo node set NAME --output-parameter NAME=VALUE --node-field-selector displayName=STEP` then `argo resume NAME`; an output not given takes its `default` (`valueFrom.default`), one without a default is refused and nothing resumed (as `argo resume`), and so is a value outside the parameter's `enum` (which Argo's UI offers and its CLI does not check); a suspend template's supplied output without a `default`, `enum` or `description` takes its input's of the same name, where Argo's UI finds them"),
    row(ValueFrom, "jsonPath", Same, "a resource step's: `.field`, `['field']`, `[N]`, `[*]` and `.*` in `{...}`, as `kubectl get -o jsonpath` prints them (not `range`, filters or slices)"),
    row(ValueFrom, "jqFilter", Unsupported, "an output from a resource's jqFilter is not supported yet: read the field with jsonPath"),
    row(ValueFrom, "event", Unsupported, "an output from an event is not supported"),
    row(ValueFrom, "parameter", Converted("`valueFrom.parameter`"), "a dag or steps template's output: one `{{steps.X.outputs...}}` (or `{{tasks.X...}}`) of one of its steps; `{{tasks.X...}}` is `{{steps.X...}}`"),
    row(ValueFrom, "expression", Unsupported, "an output from an expression is not supported yet"),
    row(ValueFrom, "configMapKeyRef", Converted("`valueFrom.configMapKeyRef` (`name`, `key`)"), "on a workflow's parameter, a template's input or a call's argument: read once, in the workflow's namespace, before any step runs, and recorded in `status.resolvedConfigMapKeys` (a ConfigMap changed later does not change the run); a ConfigMap or key not there takes `default`, else fails the workflow naming it, as in Argo; the label `workflows.argoproj.io/configmap-type: Parameter` is not required; `optional` is dropped (Argo ignores it); no parameter in `name` or `key`"),
    row(Artifact, "name", Same, ""),
    row(Artifact, "path", Same, ""),
    row(Artifact, "from", Converted("`from`"), "`{{tasks.X...}}` is `{{steps.X...}}`"),
    row(Artifact, "optional", Same, ""),
    row(Artifact, "archive", Dropped, "artifacts are always stored as `.tar.gz`"),
    row(Artifact, "mode", Unsupported, "an artifact's file mode is not supported yet"),
    row(Artifact, "s3", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "gcs", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "oss", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "azure", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "hdfs", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "artifactory", Unsupported, "an artifact's own location is not supported: artifacts live in the workflow's repository"),
    row(Artifact, "git", Unsupported, "git input artifacts are not supported yet: clone in the step"),
    row(Artifact, "http", Unsupported, "http artifacts are not supported yet"),
    row(Artifact, "plugin", Unsupported, "artifact plugins are not supported"),
    row(Artifact, "raw", Converted("`raw` (`{data}`)"), "an input artifact's content, written at its path (parent directories made) by the step agent before the command runs: no artifact repository needed; at most 64 KiB for a step's raw artifacts together (they travel in an environment variable); `{{...}}` in it filled as in the rest of the template"),
    row(Artifact, "subPath", Unsupported, "an artifact's subPath is not supported yet"),
    row(Artifact, "recurseMode", Unsupported, "recurseMode is not supported"),
    row(Artifact, "globalName", Same, "on a step's or a dag or steps template's output: `status.outputs.artifacts` names the step and artifact; an input's `from: {{workflow.outputs.artifacts.NAME}}` makes the step run after the writer"),
    row(Artifact, "archiveLogs", Unsupported, "log archiving is not supported"),
    row(Artifact, "artifactGC", Unsupported, "an artifact's own artifactGC is not supported: set the workflow's"),
    row(Artifact, "fromExpression", Unsupported, "fromExpression is not supported yet"),
    row(Artifact, "deleted", Dropped, "a status field"),
];

#[rustfmt::skip]
const POLICY_ROWS: &[Row] = &[
    row(Retry, "limit", Converted("`limit` (a number)"), ""),
    row(Retry, "retryPolicy", Converted("`retryPolicy`, written `OnFailure` when absent"), "Argo's default is `OnFailure`, ours `Always`; `OnTransientError` is not supported yet"),
    row(Retry, "backoff", Converted("`backoff`"), ""),
    row(Retry, "expression", Converted("`expression` in CEL"), "translated where it compares `lastRetry.exitCode` (`asInt(...)` dropped) joined by `and`/`or`/`&&`/`||`; `lastRetry.status` and the rest are named"),
    row(Retry, "affinity", Unsupported, "retry affinity (another node for the retry) is not supported yet"),
    row(Backoff, "duration", Converted("`duration` (a number is whole seconds)"), ""),
    row(Backoff, "factor", Converted("`factor` (a number)"), ""),
    row(Backoff, "cap", Same, ""),
    row(Backoff, "maxDuration", Same, "counted from the first attempt's start"),
    row(Sequence, "count", Converted("`count` (a number)"), "or an upstream step's output, read once it ran; text that is not a whole number fails the step (`BadParam`)"),
    row(Sequence, "start", Converted("`start` (a number)"), "as `count`"),
    row(Sequence, "end", Converted("`end` (a number)"), "as `count`"),
    row(Sequence, "format", Same, "Go's `fmt.Sprintf` with one verb a number takes (`d`, `x`, `X`, `o`, `b`; flags `0`, `-`, a width)"),
    row(ContinueOn, "failed", Converted("`failed: true`"), "any failure of the step, its program's or its pod's"),
    row(ContinueOn, "error", Converted("`failed: true`"), "any failure of the step, its program's or its pod's"),
    row(Synchronization, "mutexes", Converted("`mutexes`"), "mutexes of a database (`database: true`) are not supported"),
    row(Synchronization, "semaphores", Converted("`semaphores`: `name: CONFIGMAP/KEY`, `limitFrom.configMapKeyRef`"), "the limit is read once, when the workflow starts, and recorded in `status.resolvedConfigMapKeys`: the workflow counts with it to its end, where Argo reads the ConfigMap again as it goes (a changed limit applies to the workflows started after it); two workflows that read different limits each take a slot only while fewer hold the semaphore than their own limit, and none while a holder's slot is at or above it; a ConfigMap or key not there, or a value that is not a whole number of at least 1, fails the workflow naming it; semaphores of a database (`database: {key}`) or of another `namespace` are not supported"),
    row(Synchronization, "mutex", Converted("`mutexes: [it]`"), ""),
    row(Synchronization, "semaphore", Converted("`semaphores: [it]`"), "as `semaphores`"),
    row(Memoize, "key", Same, ""),
    row(Memoize, "maxAge", Same, ""),
    row(Memoize, "cache", Converted("left out, which `convert` says"), "each entry is a ConfigMap of its own (`wf-cache-<hash of the key>`, labelled `workflow.crd.com/cache`), found in one read and never larger than one step's outputs, where Argo keeps every entry in the ConfigMap named (one object all runs update, at most 1 MiB): read them with `workflow-operator cache list`, not in that ConfigMap"),
    row(Ttl, "secondsAfterCompletion", Converted("`ttlSecondsAfterFinished`"), ""),
    row(Ttl, "secondsAfterSuccess", Converted("`ttlSecondsAfterFinished` when it is the only one or equals `secondsAfterFailure`"), "different TTLs for success and failure are not supported yet"),
    row(Ttl, "secondsAfterFailure", Converted("`ttlSecondsAfterFinished` when it is the only one or equals `secondsAfterSuccess`"), "different TTLs for success and failure are not supported yet"),
    row(PodGc, "strategy", Converted("`podCleanup`: `OnPodSuccess` is `OnSuccess`, `OnPodCompletion` `OnCompletion`, `OnWorkflowSuccess` and `OnWorkflowCompletion` the same"), ""),
    row(PodGc, "labelSelector", Unsupported, "podGC.labelSelector is not supported yet"),
    row(PodGc, "deleteDelayDuration", Unsupported, "podGC.deleteDelayDuration is not supported yet"),
];

#[rustfmt::skip]
const CRON_ROWS: &[Row] = &[
    row(Cron, "schedules", Same, ""),
    row(Cron, "schedule", Converted("`schedules: [it]`"), ""),
    row(Cron, "timezone", Same, ""),
    row(Cron, "concurrencyPolicy", Same, ""),
    row(Cron, "suspend", Same, ""),
    row(Cron, "startingDeadlineSeconds", Same, "missed times: the latest one within the deadline runs (`catchUp: Latest`, ours by default), as Argo does"),
    row(Cron, "successfulJobsHistoryLimit", Renamed("successfulRunsHistoryLimit"), ""),
    row(Cron, "failedJobsHistoryLimit", Renamed("failedRunsHistoryLimit"), ""),
    row(Cron, "workflowMetadata", Converted("`workflowMetadata` (`labels`, `annotations`)"), ""),
    row(Cron, "workflowSpec", Converted("`workflowSpec`, converted as a Workflow's spec"), ""),
    row(Cron, "stopStrategy", Unsupported, "stopStrategy is not supported yet"),
    row(Cron, "when", Unsupported, "a CronWorkflow's `when` is not supported yet"),
];

/// A template's `http`: the request.
#[rustfmt::skip]
const HTTP_ROWS: &[Row] = &[
    row(Http, "url", Same, ""),
    row(Http, "method", Same, "one of `GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `OPTIONS`, `TRACE`, in capitals (Argo sends any)"),
    row(Http, "headers", Same, "a `valueFrom.secretKeyRef` is read by the step's pod, from its environment"),
    row(Http, "body", Same, ""),
    row(Http, "timeoutSeconds", Converted("`timeoutSeconds` (a number)"), "30 s when absent, as Argo's documentation says (its code sets none)"),
    row(Http, "successCondition", Converted("`successCondition` in CEL"), "translated where it compares `response.statusCode`, `response.body`, `response.headers[...]` or `request.url`, `.method`, `.body`, with expr's `contains`, `startsWith`, `endsWith`, `matches` and `in`, joined by `&&`, `||`, `and`, `or`, `!`, `not`; the rest (functions, arithmetic) is named"),
    row(Http, "insecureSkipVerify", Same, ""),
    row(Http, "bodyFrom", Unsupported, "bodyFrom (a body as bytes) is not supported yet: give the body as text (body)"),
];

/// A template's `resource`: the action and the object.
#[rustfmt::skip]
const RESOURCE_ROWS: &[Row] = &[
    row(Resource, "action", Same, "one of `get`, `create`, `apply`, `delete`, `replace`, `patch`; `apply` is a server-side apply (forced), not kubectl's client-side one; `delete` does not wait for the object to be gone"),
    row(Resource, "manifest", Same, "a `generateName` gets the same name in every try of the step's pod, so a pod run again does not make a second object"),
    row(Resource, "manifestFrom", Unsupported, "a manifest from an artifact is not supported yet: give it as text (manifest)"),
    row(Resource, "successCondition", Same, "a label selector over the object's fields, as Argo's"),
    row(Resource, "failureCondition", Same, "a label selector over the object's fields, as Argo's: any one requirement fails the step"),
    row(Resource, "setOwnerReference", Same, "the owner is the WorkFlow"),
    row(Resource, "mergeStrategy", Same, ""),
    row(Resource, "flags", Same, "only `TYPE NAME`, `TYPE/NAME`, `--selector`/`-l`, `--namespace`/`-n`, `--ignore-not-found` and `--validate` (a type by its plural or kind, not a short name)"),
];

/// Every row, each table in the order of [`Place::ALL`].
pub fn rows() -> impl Iterator<Item = &'static Row> {
    [
        WORKFLOW_ROWS,
        TEMPLATE_ROWS,
        CONTAINER_ROWS,
        HTTP_ROWS,
        RESOURCE_ROWS,
        CALL_ROWS,
        DATA_ROWS,
        POLICY_ROWS,
        CRON_ROWS,
    ]
    .into_iter()
    .flatten()
}

/// The row of `field` in `place`, if the converter knows it.
pub fn lookup(place: Place, field: &str) -> Option<&'static Row> {
    rows().find(|r| r.place == place && r.field == field)
}

/// What the generated document says before the tables.
const PREAMBLE: &str = "# Coming from Argo Workflows

`workflow-operator convert FILE...` turns Argo's `Workflow`, `WorkflowTemplate`,
`ClusterWorkflowTemplate` and `CronWorkflow` (`argoproj.io/v1alpha1`, YAML or JSON, several
documents a file) into `WorkFlow`, `WorkFlowTemplate`, `ClusterWorkFlowTemplate` and
`CronWorkFlow`, on standard output; what it cannot convert it names on standard error with its
path and why (`--strict`: and exits 1), and what it converts but works differently here it says
there too (`note: PATH: how`, never failing `--strict`). `submit` and `validate` take Argo's
files as they are, converting them on the way. This page is generated from the converter's own table
(`workflow-operator convert --table`): it is what the converter does.

Where the defaults differ, the converter keeps Argo's meaning: every converted spec sets
`maxStepTimeout: -1` (Argo puts no time limit on a step; ours is 60 s by default), and a
`retryStrategy` without `retryPolicy` is written `retryPolicy: OnFailure` (Argo's default; ours
is `Always`). A step's pod may take `startTimeout` (300 s by default) to start, which Argo does
not bound.

Commands: `argo submit`, `list`, `get`, `watch`, `logs`, `wait`, `delete`, `resubmit`, `retry`,
`stop`, `terminate`, `suspend`, `resume`, `template list|get`, `cron list|get|suspend|resume` are
`workflow-operator`'s of the same name; `argo lint` is `workflow-operator validate`, and
`argo cron create` is `workflow-operator submit` (a file's CronWorkflows are created, or updated).

The controller: Argo's runs one active replica (leader election). Here `deploy/` does the same,
and `deploy/sharded/` (`run --shards`) runs several that share the work, each caching only its
share; Kueue can admit a workflow whole (`queueScope: Workflow`) and MultiKueue send it to
another cluster (`managedBy`); Argo Events' EventSource and Sensor are a `WorkFlowTrigger`.
";

/// docs/argo.md: the preamble, then a table per place.
pub fn markdown() -> String {
    let mut out = String::from(PREAMBLE);
    for place in Place::ALL {
        out.push_str(&format!(
            "\n## {}\n\n| Argo | here | where it differs |\n|---|---|---|\n",
            place.heading()
        ));
        for row in rows().filter(|r| r.place == place) {
            let here = match row.becomes {
                Same => "the same".to_string(),
                Renamed(to) => format!("`{to}`"),
                Converted(text) => text.to_string(),
                Unsupported => "**not supported**".to_string(),
                Dropped => "left out".to_string(),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                row.field,
                here,
                row.note.replace('|', "\\|")
            ));
        }
    }
    out
}
