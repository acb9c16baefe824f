//! The `WorkFlow` custom resource (`workflow.crd.com/v1`): spec, status and the generated CRD.
//!
//! The spec accepts every manifest of the Kopf operator this one replaces unchanged; the fields
//! added since are optional and absent means that operator's behaviour. The CRD YAML in `crd/` is
//! rendered by [`crd_yaml`] (the `crd` CLI command), never written by hand. Used by every other
//! part of the crate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvFromSource, EnvVar, LocalObjectReference, PersistentVolumeClaimSpec,
    PodSecurityContext, Probe, ResourceRequirements, SecurityContext, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lifecycle::Phase;

pub mod artifacts;
pub mod cron;
pub mod hooks;
pub mod http;
pub mod kind;
pub mod metrics;
pub mod numbers;
pub mod policies;
pub mod resource;
pub mod rules;
pub mod step_pod;
pub mod suspend;
pub mod templates;
pub mod trigger;

pub use artifacts::{
    ArtifactGc, ArtifactGcStrategy, ArtifactRepository, CredentialsSecret, GlobalArtifact,
    GlobalParameter, InputArtifact, InputSource, MAX_RAW_BYTES, OciRepository, OutputArtifact,
    OutputParameter, OutputSource, RawArtifact, ResolvedRepository, S3Repository, StepInputs,
    StepOutputs, Supplied, ValueFrom, WorkflowOutputs,
};
pub use cron::{
    CatchUp, ConcurrencyPolicy, CronWorkFlow, CronWorkFlowSpec, CronWorkFlowStatus, RunMetadata,
    RunRef,
};
pub use numbers::{IntOrExpr, OptionNum};
pub use trigger::{
    BucketSource, HmacSource, RateLimit, SecretKeyRef, SecretSource, TriggerParameter,
    WebhookSource, WorkFlowTrigger, WorkFlowTriggerSpec, WorkFlowTriggerStatus,
};

pub use hooks::{Hooks, LifecycleHook};
pub use http::HttpStep;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, ValidationRule,
};
pub use kind::{Kinds, StepKind};
pub use metrics::{
    CounterMetric, CustomMetrics, GaugeMetric, HistogramMetric, MetricLabel, PrometheusMetric,
};
pub use policies::{
    Backoff, Cache, ContinueOn, LimitSource, MutexRef, RetryPolicy, RetryStrategy, SemaphoreRef,
    Synchronization,
};
pub use resource::ResourceStep;
pub use rules::{Durations, Metrics, Rule, RuleAction, RuleStatus, StepMetrics};
pub use suspend::SuspendStep;
pub use templates::{
    Arguments, CLUSTER_KIND, ClusterWorkFlowTemplate, ClusterWorkFlowTemplateSpec, ConfigMapKeyRef,
    NAMESPACED_KIND, Parameter, ParameterSource, ResolvedConfigMapKey, ResolvedTemplate, Source,
    Template, TemplateInputs, TemplateRef, WorkFlowTemplate, WorkFlowTemplateSpec,
    WorkflowTemplateRef,
};

/// The Kopf operator's default for `maxStepTimeout`, in seconds.
pub const DEFAULT_MAX_STEP_TIMEOUT: i64 = 60;

/// A timeout value meaning "no limit".
pub const UNLIMITED: i64 = -1;

/// The default of `startTimeout`, in seconds: how long a step's pod may take to start.
pub const DEFAULT_START_TIMEOUT: i64 = 300;

/// The condition type that is `True` once every step succeeded.
pub const CONDITION_COMPLETED: &str = "Completed";

/// The condition type that is `True` once the workflow failed.
pub const CONDITION_FAILED: &str = "Failed";

/// The condition type that is `True` once the workflow ended, either way (`Completed` or
/// `Failed`): what a script waits for (`kubectl wait --for=condition=Finished`).
pub const CONDITION_FINISHED: &str = "Finished";

/// A DAG of container steps; the operator runs one Job per step, each after its dependencies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "workflow.crd.com",
    version = "v1",
    kind = "WorkFlow",
    plural = "workflows",
    singular = "workflow",
    shortname = "wf",
    namespaced,
    status = "WorkFlowStatus",
    derive = "PartialEq",
    doc = "A DAG of container steps; the operator runs one Job per step, each after its dependencies.",
    // The JSON form: clippy's duplicated_attributes lint misfires on repeated `type_ = "string"`.
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.workflow-status", "description": "Lifecycle phase"}"#,
    printcolumn = r#"{"name": "Progress", "type": "string", "jsonPath": ".status.progress", "description": "Steps executed / total"}"#,
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".status.summary", "description": "Why the workflow is in its phase: the first line of status.message, at most 120 characters"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    // `kubectl get -o wide` adds the columns of priority 1.
    printcolumn = r#"{"name": "Running", "type": "string", "jsonPath": ".status.started", "description": "Steps whose Job runs", "priority": 1}"#,
    printcolumn = r#"{"name": "Changed", "type": "date", "jsonPath": ".status.status-changed", "description": "Since the phase last changed", "priority": 1}"#,
    printcolumn = r#"{"name": "Run", "type": "string", "jsonPath": ".status.run", "description": "The run id: what runs, hashed", "priority": 1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkFlowSpec {
    /// Seconds a step may run before it, and so the workflow, fails; -1 means unlimited. A step's
    /// own `timeout` overrides it. Changing it applies to running steps from then on.
    #[serde(default = "default_max_step_timeout")]
    #[schemars(range(min = -1))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != 0", "message": "must not be 0 (use -1 for unlimited)"}]))]
    pub max_step_timeout: i64,

    /// The steps, one Kubernetes Job each, run in an order that respects `dependsOn`. At
    /// least one, unless `workflowTemplateRef` gives them.
    #[serde(default, deserialize_with = "exact_vec")]
    pub containers: Vec<Step>,

    /// The workflow's parameters, `{{workflow.parameters.NAME}}` in the strings a step runs
    /// with and `workflow.parameters.NAME` in a `when`: each a `name`, a `value` (none means
    /// it must be given at submit), the values allowed (`enum`) and a `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Box<Arguments>>,

    /// Step definitions that steps call by name (`template: NAME`) with `arguments`: a
    /// container step's fields, or a `dag` of steps. Expanded before the workflow runs: a step
    /// calling a `dag` template becomes its steps, named `STEP/INNER`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "templates::templates_schema")]
    pub templates: Vec<Template>,

    /// Run a shared template's whole spec (a WorkFlowTemplate, or with `clusterScope` a
    /// ClusterWorkFlowTemplate): the workflow then has no `containers`, `templates` or
    /// `onExit` of its own, and what else it sets (`arguments` by name, `parallelism`, ...)
    /// overrides the template's. Read once, when the operator first handles the workflow
    /// (`status.resolvedTemplates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_template_ref: Option<Box<WorkflowTemplateRef>>,

    /// Most steps running at once; absent means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_one")]
    pub parallelism: Option<IntOrExpr<i32>>,

    /// Every step is interactive (a step's own `interactive` overrides it): see the step's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interactive: bool,

    /// On a failed step: true stops the running steps and fails at once; false lets steps that do
    /// not depend on the failed one finish, then fails.
    #[serde(default = "default_true")]
    pub fail_fast: bool,

    /// Seconds the workflow may run, counted from when its first steps started (a retry
    /// starts the count again): past it, the running steps are stopped and the workflow fails
    /// with reason `DeadlineExceeded`; its exit steps still run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_one")]
    pub active_deadline_seconds: Option<IntOrExpr<i64>>,

    /// Locks the workflow holds for its whole run: no step starts before it holds them all,
    /// and it gives them back once it ended (or is deleted).
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<Box<Synchronization>>,

    /// What every step's pod gets besides its container: labels and annotations, service
    /// account, volumes, image pull secrets, scheduling and security settings.
    // Boxed, as are a step's rarely set nested Kubernetes types: see `Step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<Box<PodTemplate>>,

    /// A patch of every step's pod spec (JSON or YAML; Argo's workflow `podSpecPatch`),
    /// applied before the step's own `podSpecPatch`, which goes over it, as in Argo: a JSON
    /// merge patch whose lists of named items (`containers`, `volumes`, `env`) merge by `name`;
    /// `main` names the step's container. `{{workflow.*}}` forms are filled.
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_spec_patch: Option<Box<String>>,

    /// Seconds a step's pod may take to start (image pull, Secrets and ConfigMaps, scheduling,
    /// the Job controller creating it); a step not started by then fails with the cause. The
    /// step's own timeout counts from its Job's start, as before.
    #[serde(default = "default_start_timeout")]
    #[schemars(range(min = 1))]
    pub start_timeout: i64,

    /// While true no new step starts (running steps go on); false resumes.
    /// `workflow-operator suspend|resume` set it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub suspend: bool,

    /// Ends the workflow short of its steps: `Stop` lets running steps finish, starts nothing
    /// new and runs the exit steps; `Terminate` stops running steps at once (their pods are
    /// killed and kept, with their logs, until `podCleanup` deletes them) and runs no exit
    /// step. Either way the workflow ends `Failed`, unless every step had succeeded.
    /// `workflow-operator stop|terminate` set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,

    /// How many times the workflow was retried: raising it (what `workflow-operator retry` does,
    /// clearing `shutdown` and `suspend` too) makes a failed or stopped workflow run again the
    /// steps that did not succeed, in new Jobs; the steps that succeeded keep their Jobs.
    /// Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub retry: i32,

    /// Seconds after the workflow finished (either way) when it is deleted, with its Jobs and
    /// their pods; absent means the operator's `--default-ttl-seconds-after-finished`, if any,
    /// else never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,

    /// When step pods are deleted while the workflow, its Jobs and its status stay (Argo's
    /// `podGC`); absent means never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_cleanup: Option<PodCleanup>,

    /// Steps run once every other step has finished, or the workflow was stopped
    /// (`shutdown: Stop`), with `WORKFLOW_STATUS` (`Completed` or `Failed`) and
    /// `WORKFLOW_FAILED_STEPS` in their environment. Same fields as `containers`; their
    /// `dependsOn` may name only other exit steps. A failing exit step fails the workflow;
    /// none turns a failure into a success. `shutdown: Terminate` skips them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_exit: Vec<Step>,

    /// Lifecycle hooks (Argo's `hooks`), by name, each calling a template: `exit` once the
    /// workflow ended, as an exit step named `hooks.exit`; any other name once its
    /// `expression` over `workflow.status` holds: from the start (`workflow.status ==
    /// "Running"`, a step named `hooks.NAME` with no dependencies) or at the end (an exit step
    /// `hooks.NAME` with the expression as its `when`). Each runs at most once. A failing hook
    /// but `exit` does not fail the workflow. See "Lifecycle hooks" in docs/api.md.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: Hooks,

    /// A volume shared by every step of a run: one PersistentVolumeClaim per run, created and
    /// owned by the workflow (deleted with it), mounted at `mountPath` in every step, its path
    /// in `$WORKFLOW_WORKSPACE`.
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Box<Workspace>>,

    /// How many times the whole DAG runs: each run's steps are Jobs of their own, with the
    /// run's index (from 0) in `$WORKFLOW_RUN_INDEX`; at most `parallelism` steps run at once
    /// across all runs, and the workflow completes when every run did. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub runs: Option<i32>,

    /// The order of the workflow's steps under the operator's `--max-running-steps`: higher
    /// first, then the older workflow (creationTimestamp, then name). Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,

    /// The Kueue LocalQueue of the steps (label `kueue.x-k8s.io/queue-name` on every Job):
    /// each step's Job is created suspended and runs once Kueue admits it; until then the step
    /// is `Queued`. Such a workflow is left to Kueue's quota, not to `--max-running-steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub queue_name: Option<Box<str>>,

    /// With `queueName`: the Kueue WorkloadPriorityClass of the steps' Jobs (label
    /// `kueue.x-k8s.io/priority-class`), which orders them in Kueue's queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub priority_class_name: Option<Box<str>>,

    /// With `queueName`: seconds a step's Job may wait suspended for Kueue to admit it (since
    /// its creation, or since it was preempted) before the step fails with reason
    /// `QueueTimeout`; absent means no limit. The step's `timeout` counts from its admission,
    /// not from this wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub queue_timeout: Option<i64>,

    /// With `queueName`: what Kueue admits. `Step` (the default): each step's Job, one by one.
    /// `Workflow`: the whole run, as one Kueue Workload the operator creates (owned by the
    /// workflow, asking for the run's peak concurrent footprint, or `resources`); no step
    /// starts before Kueue admits it, the steps' Jobs get its node selectors and tolerations,
    /// its quota is given back when the run ends, and an eviction stops the run until it is
    /// admitted again (docs/kueue.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_scope: Option<QueueScope>,

    /// With `queueScope: Workflow`: what the run's Workload asks for, per resource name,
    /// instead of the peak the operator computes from the steps' requests, `parallelism` and
    /// the DAG (needed when a step fans out over `withParam` and `parallelism` is unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantities_schema")]
    // Boxed: rarely set.
    pub resources: Option<Box<BTreeMap<String, Quantity>>>,

    /// The controller that runs this workflow; absent (or `workflow.crd.com/workflow-operator`)
    /// is this operator. Any other value (`kueue.x-k8s.io/multikueue` for MultiKueue) makes the
    /// operator leave the workflow alone: no Jobs, finalizer, status or Events. Cannot be
    /// changed once the workflow exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub managed_by: Option<Box<str>>,

    /// Where the steps' artifacts are kept; absent: the namespace's ConfigMap
    /// `workflow-artifact-repository` (key `repository`, the same fields), else the operator's
    /// `--artifact-repository`. Read once, when the first step that needs it is planned, and
    /// recorded in the status.
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_repository: Option<Box<ArtifactRepository>>,

    /// When the operator deletes the workflow's artifacts; absent: never.
    #[serde(
        rename = "artifactGC",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub artifact_gc: Option<ArtifactGc>,

    /// Rules on the run's metrics: when a rule's CEL expression over the steps' metrics holds,
    /// it grows or shrinks the parallelism, finishes or fails the workflow, or adds a run.
    /// `grow` and `shrink` need `parallelism` (their starting point), `repeat` needs `runs` of
    /// at least 2. Each firing is recorded in the status and posted as an Event `RuleFired`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = rules::MAX_RULES))]
    pub rules: Vec<Rule>,

    /// Custom Prometheus metrics recorded on the operator's `/metrics` when the workflow ends
    /// (Argo's `spec.metrics`); `{{workflow.status}}` and `{{workflow.duration}}` name how it
    /// ended. Recorded once per operator process: see "Custom metrics" in docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Box<CustomMetrics>>,
}

/// `spec.queueScope`: what Kueue admits of a workflow with `queueName`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum QueueScope {
    /// Each step's Job, as its own Kueue Workload.
    Step,
    /// The whole run, as one Workload.
    Workflow,
}

/// A valid label value (apimachinery's `IsValidLabelValue`, less the empty value): what
/// `queueName` and `priorityClassName` become on the steps' Jobs.
const LABEL_VALUE: &str = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// `spec.workspace`: the claim every step of a run mounts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// Where the steps see it; default `/workspace`.
    #[serde(default = "default_workspace_path")]
    pub mount_path: String,

    /// The claim made for each run: its `spec` (`accessModes`, `resources.requests.storage`,
    /// `storageClassName`, ...), as in a StatefulSet's `volumeClaimTemplates`.
    pub volume_claim_template: ClaimTemplate,
}

/// The template of the workspace's claim.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct ClaimTemplate {
    /// A PersistentVolumeClaim's `spec`, kept whole (the API server checks it when the
    /// operator creates the claim).
    #[schemars(schema_with = "kubernetes_object")]
    pub spec: PersistentVolumeClaimSpec,
}

/// Where the workspace is mounted unless `spec.workspace.mountPath` says otherwise.
pub const DEFAULT_WORKSPACE_PATH: &str = "/workspace";

fn default_workspace_path() -> String {
    DEFAULT_WORKSPACE_PATH.to_string()
}

/// How `spec.shutdown` ends a workflow.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Shutdown {
    /// No new step starts; running steps finish; exit steps run; then the workflow ends.
    Stop,
    /// Running steps are stopped at once (their pods killed, kept with their Jobs); no exit
    /// step runs.
    Terminate,
}

impl Shutdown {
    /// The name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Shutdown::Stop => "Stop",
            Shutdown::Terminate => "Terminate",
        }
    }
}

/// When step pods are deleted (`spec.podCleanup`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PodCleanup {
    /// A step's pods, once the step succeeded.
    OnSuccess,
    /// A step's pods, once the step finished either way.
    OnCompletion,
    /// Every step's pods, once the workflow completed.
    OnWorkflowSuccess,
    /// Every step's pods, once the workflow finished either way.
    OnWorkflowCompletion,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The pod-level settings of every step's pod (`spec.podTemplate`), as Kubernetes types.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    /// Labels and annotations every step's pod carries (the operator's own labels win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<PodTemplateMetadata>,

    /// The service account the steps run as (`pod.spec.serviceAccountName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,

    /// Volumes the steps may mount with `volumeMounts` (`pod.spec.volumes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub volumes: Vec<Volume>,

    /// Secrets to pull the steps' images with (`pod.spec.imagePullSecrets`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// Node labels a step's pod must be scheduled on (`pod.spec.nodeSelector`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Taints the steps' pods tolerate (`pod.spec.tolerations`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub tolerations: Vec<Toleration>,

    /// Scheduling constraints (`pod.spec.affinity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kubernetes_object")]
    pub affinity: Option<Affinity>,

    /// Pod-level security settings (`pod.spec.securityContext`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kubernetes_object")]
    pub security_context: Option<PodSecurityContext>,

    /// The steps' pods' priority class (`pod.spec.priorityClassName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// Labels and annotations for every step's pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PodTemplateMetadata {
    /// Labels of every step's pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,

    /// Annotations of every step's pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

// Not in the doc comment, which is the CRD's description: the operator holds every step of
// every workflow it sees up to three times (the framework's mirror, the copy as last handled,
// the status writer's copy), so each byte of a `Step` counts some 30,000 times in a benchmark
// of 1,000 workflows of 10 steps. Nested Kubernetes types that most steps leave unset are
// boxed: inline, a `SecurityContext` alone is 384 bytes, which made the operator's peak RSS in
// that benchmark 19 MiB higher (55 -> 75 MiB).
/// One step of a workflow: a container run to completion as a Job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.image) || has(self.template) || has(self.templateRef) || has(self.suspend) || has(self.fail) || has(self.http) || has(self.resource)", "message": "required unless the step calls a template (template or templateRef), is a suspend, HTTP or resource step, or fails", "fieldPath": ".image", "reason": "FieldValueRequired"}]))]
pub struct Step {
    /// The step's name, unique in the workflow; `dependsOn` refers to it. Any text: Job and
    /// container names are derived from it (lower-cased, sanitised, shortened with a hash).
    #[schemars(length(min = 1, max = 253))]
    pub step_name: String,

    /// The container image to run; required unless the step calls a template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub image: String,

    /// The command to run (the container's entrypoint); absent means the image's own.
    #[serde(default)]
    pub command: Option<Vec<String>>,

    /// Names of the steps that must succeed before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,

    /// Arguments to the command (the container's args); absent means the image's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,

    /// Environment variables for the step, besides `WORKFLOW_NAME`, `WORKFLOW_NAMESPACE` and
    /// `STEP_NAME`, which the operator sets: Kubernetes `EnvVar`s, `value` or `valueFrom`
    /// (`secretKeyRef`, `configMapKeyRef`, `fieldRef`, `resourceFieldRef`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "env_schema")]
    pub env: Vec<EnvVar>,

    /// Environment variables from every key of a ConfigMap or Secret (`configMapRef`,
    /// `secretRef`, with an optional `prefix`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub env_from: Vec<EnvFromSource>,

    /// Where the pod's volumes (`spec.podTemplate.volumes`) appear in the step's container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub volume_mounts: Vec<VolumeMount>,

    /// The directory the command runs in; absent means the image's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,

    /// When to pull the image: `Always`, `IfNotPresent` or `Never`; absent means Kubernetes'
    /// default for the image's tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "image_pull_policy_schema")]
    pub image_pull_policy: Option<String>,

    /// The step's container's security settings (Kubernetes `SecurityContext`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kubernetes_object")]
    pub security_context: Option<Box<SecurityContext>>,

    /// Compute resources of the step's container: `requests` and `limits` of `cpu`, `memory`,
    /// ... as Kubernetes quantities, or `{{...}}` forms (a parameter) filled before the step's
    /// Job is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resources_schema")]
    pub resources: Option<Box<ResourceRequirements>>,

    /// Seconds this step may run, overriding `maxStepTimeout`; -1 means unlimited. Also as text:
    /// the number, Argo's duration (`"10s"`, `"1m30s"`; rounded up to whole seconds), or a
    /// parameter form filled before it is read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numbers::seconds"
    )]
    #[schemars(schema_with = "numbers::timeout_schema")]
    pub timeout: Option<IntOrExpr<i64>>,

    /// Extra attempts after a failed one before the step fails (the Job's `backoffLimit`);
    /// default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_zero")]
    pub retries: Option<IntOrExpr<i32>>,

    /// How the step is tried again when it fails: each attempt a Job of its own, after a
    /// back-off, only for the failures `retryPolicy` and `expression` name. Not with
    /// `retries`.
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_strategy: Option<Box<RetryStrategy>>,

    /// Reuse the step's result: a fresh entry for its key makes it `Succeeded` with the
    /// entry's outputs, and no Job runs; a success writes one.
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Box<Cache>>,

    /// Locks the step holds while it runs (its Job starts only once it holds them all).
    ///
    // Boxed: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<Box<Synchronization>>,

    /// Which of its failures the workflow survives: `{failed: true}` and the step's failure
    /// does not fail the workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_on: Option<ContinueOn>,

    /// A CEL expression over the steps upstream of this one (`steps.NAME.outputs.KEY`,
    /// `steps.NAME.phase`): false skips the step, and a skipped step counts as done for its
    /// dependents.
    // Boxed: rarely set, and a step is held up to three times per workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Box<str>>,

    /// Runs the step once per item (strings or objects), each in a Job of its own: `{{item}}`
    /// (and `{{item.FIELD}}` of an object) in its command, args and env values is the item,
    /// `$WORKFLOW_ITEM` holds it (an object as JSON). Its dependents wait for every item; any
    /// item failing fails the step. At most one of `withItems`, `withParam`, `withSequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_items: Option<Box<Items>>,

    /// Runs the step once per item of a JSON list an upstream step wrote as an output,
    /// `{{steps.NAME.outputs.KEY}}`, as `withItems` does; a value that is not a JSON list
    /// fails the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_param: Option<Box<Param>>,

    /// Runs the step once per number of a sequence, as `withItems` does: `count` numbers from
    /// `start` (default 0), or from `start` to `end` inclusive (counting down when `end` is
    /// below `start`), as Argo's `withSequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_sequence: Option<Box<Sequence>>,

    /// Calls the template of this name in `spec.templates`: the step is that template, with
    /// the fields it sets itself adding to or overriding the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub template: Option<Box<str>>,

    /// Calls a template of a shared WorkFlowTemplate (or ClusterWorkFlowTemplate), as
    /// `template` does one of this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_ref: Option<Box<TemplateRef>>,

    /// The values of the called template's inputs, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Box<Arguments>>,

    /// A script: written to a file in the step's container and run by `command` (default
    /// `[sh]`) with the file's path as its last argument before `args`, as Argo's `script`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Box<String>>,

    /// Output parameters read from files and artifacts kept in the artifact repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Box<StepOutputs>>,

    /// Artifacts of upstream steps placed in the step's container before its command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Box<StepInputs>>,

    /// Kubernetes containers run to completion, in order, before the step's (they see the
    /// pod's volumes).
    // Boxed, as `sidecars`, `source`, `outputs` and `inputs`: rarely set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub init_containers: Option<Box<Vec<Container>>>,

    /// Kubernetes containers started before the step's and stopped once it has ended
    /// (Kubernetes' sidecar containers: init containers with `restartPolicy: Always`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub sidecars: Option<Box<Vec<Container>>>,

    /// Start the step's pod with its environment, volumes and inputs but wait instead of
    /// running its command: the step is `Interactive` until `workflow-operator continue`
    /// ends it (its exit code that of the last run of the command inside, by default), after
    /// `workflow-operator exec` opened a shell in it. Its `timeout` does not run while it
    /// waits. Overrides the workflow's `interactive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,

    /// Run as a daemon (Argo's `daemon: true`): the step is done once its pod runs and its
    /// container is ready (its `readinessProbe`, if any, passed), and the steps after it start
    /// while it keeps running; `{{steps.NAME.ip}}` is its pod's IP. It is stopped when the
    /// workflow ends. Only a container or script step may be one. See "Daemon steps" in
    /// docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<bool>,

    /// The step's container's readiness probe (Kubernetes `Probe`, as a container's
    /// `readinessProbe`): a daemon step is done once it passed. Only a step running a
    /// container or a script may have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kubernetes_object")]
    pub readiness_probe: Option<Box<Probe>>,

    /// Run nothing and wait (Argo's suspend template): until `workflow-operator resume` or,
    /// with a `duration`, that long after the step started. No pod runs; the step needs no
    /// `image`. See "Suspend steps" in docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<Box<SuspendStep>>,

    /// Fail with this message instead of running anything (no pod runs; the step needs no
    /// `image`): a guard under a `when`. A template's recursion past its depth limit becomes
    /// such a step (see "Recursion" in docs/api.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<Box<String>>,

    /// Make one HTTP request instead of running a container (Argo's http template): the step
    /// agent makes it from the step's pod, the response body is the step's `result`, and the
    /// step fails when the response does not meet `successCondition` (default: a 2xx status).
    /// The step needs no `image`. See "HTTP steps" in docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Box<HttpStep>>,

    /// Act on a Kubernetes object instead of running a container (Argo's resource template):
    /// the step agent creates, applies, patches, replaces, deletes or gets it from the step's
    /// pod, with the pod's service account, then waits until it meets `successCondition` (or
    /// fails at `failureCondition`); its output parameters are read from the object
    /// (`valueFrom.jsonPath`). The step needs no `image`. See "Resource steps" in docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<Box<ResourceStep>>,

    /// Node labels this step's pod must be scheduled on, over the workflow's
    /// `podTemplate.nodeSelector` (Argo's template `nodeSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<Box<BTreeMap<String, String>>>,

    /// Taints this step's pod tolerates, besides the workflow's `podTemplate.tolerations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "list_of_kubernetes_objects")]
    pub tolerations: Option<Box<Vec<Toleration>>>,

    /// This step's pod's scheduling constraints, instead of the workflow's
    /// `podTemplate.affinity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kubernetes_object")]
    pub affinity: Option<Box<Affinity>>,

    /// A patch of this step's whole pod spec (JSON or YAML), applied last: a JSON merge patch
    /// whose lists of named items (`containers`, `volumes`, `env`) merge by `name`, as
    /// Kubernetes' strategic merge does; `main` names the step's container, as in Argo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_spec_patch: Option<Box<String>>,

    /// Custom Prometheus metrics recorded on the operator's `/metrics` when the step ends
    /// (Argo's template `metrics`): `{{status}}`, `{{duration}}`, `{{exitCode}}` and
    /// `{{outputs.parameters.NAME}}` name how it ended. Skipped steps record none. See "Custom
    /// metrics" in docs/api.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Box<CustomMetrics>>,

    /// Lifecycle hooks (Argo's `hooks`), by name, each calling a template as a step named
    /// `STEP.hooks.NAME`: `exit` once this step ended, whatever its result (its failure still
    /// fails the workflow); any other name once its `expression` over `steps.STEP.status`
    /// holds: with the step (`== "Running"`) or once it ended. Each runs at most once, and the
    /// steps after this one wait for its hooks. A hook's failure does not fail the workflow.
    /// See "Lifecycle hooks" in docs/api.md.
    // Boxed: rarely set, and a step is held up to three times per workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Box<Hooks>>,
}

/// `withItems`: the items a step runs once per, as written (strings, numbers or objects).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(transparent)]
pub struct Items(
    #[schemars(schema_with = "items_schema")]
    #[serde(deserialize_with = "exact_vec")]
    pub Vec<serde_json::Value>,
);

/// `withParam`: a `{{steps.NAME.outputs.KEY}}` holding a JSON list.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(transparent)]
pub struct Param(pub String);

/// `withSequence`: `count` numbers from `start`, or `start` to `end` inclusive.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sequence {
    /// How many numbers (from `start`); not with `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::at_least_zero")]
    pub count: Option<IntOrExpr<i64>>,
    /// The first number; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::any_number")]
    pub start: Option<IntOrExpr<i64>>,
    /// The last number, inclusive; not with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "numbers::any_number")]
    pub end: Option<IntOrExpr<i64>>,
    /// Each number as text, with a Go `fmt.Sprintf` format of one verb (`"%02d"`,
    /// `"node-%x"`), as Argo writes it; absent, the items are the numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// `withItems`' items: any JSON value each (a string, a number, an object), kept whole.
fn items_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"x-kubernetes-preserve-unknown-fields": true},
    })
}

/// What the operator observed of a workflow; written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WorkFlowStatus {
    /// Lifecycle phase: Created, Queued (waiting for Kueue to admit the run), Started,
    /// Suspended, Completed or Failed.
    #[serde(
        rename = "workflow-status",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub workflow_status: Option<Phase>,

    /// When `workflow-status` last changed (RFC 3339).
    #[serde(
        rename = "status-changed",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub status_changed: Option<String>,

    /// Why the workflow is in its phase, e.g. which step failed and how; absent when there is
    /// nothing to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// The first line of `message`, cut to at most 120 characters (ending `...` when cut):
    /// what the MESSAGE column of `kubectl get workflows` shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,

    /// Steps whose Job succeeded, in spec order.
    #[serde(default)]
    pub executed: Vec<String>,

    /// Steps whose Job exists and has not finished, in spec order.
    #[serde(default)]
    pub started: Vec<String>,

    /// Steps executed out of the total, e.g. "3/4".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,

    /// The `metadata.generation` this status was computed from.
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,

    /// Identifies what runs (a hash of steps, images, commands, env, dependencies); Jobs carry it
    /// as a label, and a new value means a new run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,

    /// Standard conditions: `Completed`, `Failed`, and `Finished` (ended either way).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The `spec.retry` this status describes: a larger `spec.retry` on a failed workflow
    /// starts the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<i32>,

    /// The steps that are neither succeeded (those are `executed`) nor waiting: running,
    /// queued, failed and timed-out steps, in spec order. A step in neither list is `Waiting`
    /// while the workflow runs and `Skipped` once it ended; a succeeded or running step's times
    /// are its Job's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStatus>,

    /// The shared templates the workflow uses (`workflowTemplateRef`, `templateRef`), as the
    /// operator read them when it first handled the workflow: what it runs, on every retry
    /// and restart, whatever becomes of the templates.
    #[serde(
        rename = "resolvedTemplates",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resolved_templates: Vec<ResolvedTemplate>,

    /// The ConfigMap keys the workflow's parameters take their values from
    /// (`valueFrom.configMapKeyRef`), as the operator read them when it first handled the
    /// workflow: what it runs with, on every restart, whatever becomes of the ConfigMaps.
    #[serde(
        rename = "resolvedConfigMapKeys",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resolved_config_map_keys: Vec<ResolvedConfigMapKey>,

    /// When the workflow's steps (of its latest retry) started: `activeDeadlineSeconds`
    /// counts from it. Read also as `started_at`, as earlier operators wrote it.
    #[serde(
        rename = "startedAt",
        alias = "started_at",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<Time>,

    /// Which run of the workflow this is: 2 and up once a change of what runs (see
    /// `status.run`) started it again; absent for the first run.
    #[serde(rename = "runNumber", default, skip_serializing_if = "Option::is_none")]
    pub run_number: Option<i32>,

    /// When the operator saw the change that started this run; absent for the first run.
    #[serde(
        rename = "runChangedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub run_changed_at: Option<Time>,

    /// The artifact repository the workflow's artifacts go to, as the operator decided it
    /// before the first step with artifacts ran: every later step, retry and restart uses it,
    /// whatever becomes of the ConfigMap or flag it came from.
    #[serde(
        rename = "artifactRepository",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub artifact_repository: Option<Box<ResolvedRepository>>,

    /// When the operator deleted the workflow's artifacts (`artifactGC:
    /// OnWorkflowCompletion`), once it ended.
    #[serde(
        rename = "artifactsDeletedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub artifacts_deleted_at: Option<Time>,

    /// What each rule of `spec.rules` did in the current run (absent without rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleStatus>,

    /// The parallelism the rules set (`grow`, `shrink`); `spec.parallelism` was the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,

    /// The metrics of the steps the rules name, across runs, items and attempts, as the rules
    /// last read them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: Metrics,

    /// The workflow's outputs: the step outputs declared with a `globalName`, once their step
    /// succeeded (`{{workflow.outputs.parameters.NAME}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Box<WorkflowOutputs>>,
}

/// Where one step stands. The names are a contract: the CLI, scripts and the web view read them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum StepPhase {
    /// Its dependencies have not all succeeded yet.
    Waiting,
    /// Its Job exists but is suspended.
    Queued,
    /// Its Job exists (or is being created) and has not finished.
    Running,
    /// An interactive step's Job runs: its pod waits for `workflow-operator continue`.
    Interactive,
    /// Its Job completed.
    Succeeded,
    /// Its Job failed, or its pod could not start.
    Failed,
    /// It ran past its timeout.
    TimedOut,
    /// The workflow ended without it starting, or its `when` was false.
    Skipped,
}

impl StepPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            StepPhase::Waiting => "Waiting",
            StepPhase::Queued => "Queued",
            StepPhase::Running => "Running",
            StepPhase::Interactive => "Interactive",
            StepPhase::Succeeded => "Succeeded",
            StepPhase::Failed => "Failed",
            StepPhase::TimedOut => "TimedOut",
            StepPhase::Skipped => "Skipped",
        }
    }
}

/// One entry of `status.steps`: a step that runs, is queued, failed or timed out, was skipped
/// by its `when`, or succeeded with outputs another step names.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    /// The step's name.
    pub name: String,

    /// Running, Interactive, Queued, Failed, TimedOut, Skipped or Succeeded.
    pub phase: StepPhase,

    /// When its Job started (failed and timed-out steps; a running step's is its Job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// When its Job ended (failed and timed-out steps, once their Job says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,

    /// Pods its Job ran (failed and timed-out steps; each of `retries` is one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i32>,

    /// The exit code of its last failed container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,

    /// Why it failed in one word: the container's reason (`Error`, `StartError`), the Job's
    /// (`BackoffLimitExceeded`), `TimedOut`, `CannotStart`, or `Stopped` (the workflow failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// What the container, Kubernetes or the operator said about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// The name of its Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,

    /// A daemon step's pod's IP (`{{steps.NAME.ip}}`), read once its container was ready: the
    /// step is `Succeeded` with reason `Daemoned` while it keeps running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,

    /// What it wrote to `$WORKFLOW_OUTPUTS` (`key=value` lines), recorded for a succeeded step
    /// whose outputs another step names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,

    /// A step that fans out (`withItems`, `withParam`, `withSequence`): how many of its items
    /// there are and how they stand. Its failed items, and those its `when` skipped, have
    /// entries of their own, `NAME[i]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemCounts>,
}

/// How the items of a step that fans out stand.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ItemCounts {
    /// Items in all.
    pub total: u32,
    /// Items whose Job succeeded.
    #[serde(default)]
    pub succeeded: u32,
    /// Items whose Job runs.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub running: u32,
    /// Items that failed or timed out.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub failed: u32,
    /// Items the step's `when` (naming the item) skipped.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub skipped: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl WorkFlowSpec {
    /// The timeout that applies to `step`, in seconds; [`UNLIMITED`] (-1) means none.
    pub fn effective_timeout(&self, step: &Step) -> i64 {
        match StepKind::of(self, step) {
            // It runs until the workflow ends; `startTimeout` still bounds its pod's start.
            StepKind::Container | StepKind::Script if step.daemon == Some(true) => UNLIMITED,
            StepKind::Container | StepKind::Script | StepKind::Http | StepKind::Resource => {
                step.timeout.num().unwrap_or(self.max_step_timeout)
            }
            // It waits for a person; `startTimeout` still bounds its pod's start.
            StepKind::Interactive | StepKind::InteractiveScript => UNLIMITED,
            // It runs nothing; its `duration`, if any, is its own deadline.
            StepKind::Suspend | StepKind::Fail => UNLIMITED,
        }
    }

    /// How many times the DAG runs (`runs`, at least 1).
    pub fn run_count(&self) -> u32 {
        self.runs
            .map_or(1, |runs| u32::try_from(runs.max(1)).unwrap_or(1))
    }
}

impl WorkFlow {
    /// How many times the DAG runs now: `spec.runs` and the runs its `repeat` rules added, as
    /// the status records them.
    pub fn runs_in_force(&self) -> u32 {
        let recorded = self.status.as_ref().map_or(&[][..], |s| &s.rules);
        self.spec.run_count() + rules::added_runs(&self.spec.rules, recorded)
    }
}

/// A compact schema for [`ResourceRequirements`]: the derived one repeats a 2 KiB description
/// of `Quantity` and offers `claims`, which a workflow step has no use for. A quantity may be a
/// `{{...}}` form (a parameter, as Argo allows), filled before the step's Job is made; a value
/// that is still not a quantity then is refused naming it (`template::numbers`).
fn resources_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let quantity = serde_json::json!({
        "pattern": format!(r"^(({QUANTITY})|(.*\{{\{{.*\}}\}}.*))$"),
        "x-kubernetes-int-or-string": true,
    });
    let map = |what: &str| {
        serde_json::json!({
            "type": "object",
            "description": format!("{what} per resource name (cpu, memory, ...)."),
            "additionalProperties": quantity,
        })
    };
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "properties": {
            "limits": map("Most the container may use"),
            "requests": map("What the container is guaranteed"),
        },
    })
}

/// A `resource.Quantity`, the pattern Kubernetes itself publishes for it without its anchors.
const QUANTITY: &str = r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?";

/// A `resource.Quantity` (checked on strings only). No `anyOf` of integer/string: kube's
/// structural rewriter would strip its types.
fn quantity_schema() -> serde_json::Value {
    serde_json::json!({
        "pattern": format!("^{QUANTITY}$"),
        "x-kubernetes-int-or-string": true,
    })
}

/// Quantities by resource name (`spec.resources`).
fn quantities_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "additionalProperties": quantity_schema(),
    })
}

/// A nested Kubernetes type whose full schema would bloat the CRD (a pod's `affinity` alone is
/// tens of KiB): kept as an object whose fields the API server does not prune. A wrong value
/// still ends in a clear error: the API server refuses the step's Job with its message, which
/// the operator reports as the step's failure; `validate` checks it offline.
fn kubernetes_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of [`kubernetes_object`]s.
fn list_of_kubernetes_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// `env`: a name and a value, or a name and a `valueFrom` (kept whole, see
/// [`kubernetes_object`]).
fn env_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": "The variable's name."},
                "value": {"type": "string", "description": "The variable's value; default empty."},
                "valueFrom": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "description": "Where the value comes from: secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef.",
                },
            },
        },
    })
}

/// `imagePullPolicy`: one of Kubernetes' three.
fn image_pull_policy_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "nullable": true,
        "enum": ["Always", "IfNotPresent", "Never"],
    })
}

/// A list read into a `Vec` of exactly its length: serde grows one by doubling (a list of 10
/// steps gets room for 16), and the steps are kept for the life of the workflow.
fn exact_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut list = Vec::deserialize(deserializer)?;
    list.shrink_to_fit();
    Ok(list)
}

fn default_max_step_timeout() -> i64 {
    DEFAULT_MAX_STEP_TIMEOUT
}

fn default_start_timeout() -> i64 {
    DEFAULT_START_TIMEOUT
}

fn default_true() -> bool {
    true
}

/// The operator's CRDs: `WorkFlow`, the shared templates `WorkFlowTemplate` and
/// `ClusterWorkFlowTemplate`, `CronWorkFlow` and `WorkFlowTrigger`.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        workflow_crd(),
        WorkFlowTemplate::crd(),
        ClusterWorkFlowTemplate::crd(),
        CronWorkFlow::crd(),
        WorkFlowTrigger::crd(),
    ]
    .map(unwrapped)
    .into()
}

/// `crd` with each description's lines joined into paragraphs: a description is the field's
/// doc comment, wrapped at 100 columns, and `kubectl explain` wraps text to the terminal
/// itself, so the doc comment's line breaks would cut its sentences mid-line there.
fn unwrapped(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn walk(node: &mut serde_json::Value) {
        match node {
            serde_json::Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    match value {
                        serde_json::Value::String(text) if key == "description" => {
                            *text = join_lines(text);
                        }
                        other => walk(other),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    // A CRD is plain maps, strings and numbers: it serialises and reads back.
    let mut value = serde_json::to_value(&crd).expect("a CRD serialises");
    walk(&mut value);
    serde_json::from_value(value).expect("a CRD reads back")
}

/// `text` with the lines of each paragraph joined by a space; a blank line (between
/// paragraphs) and a line that starts a list item (`- `) keep their break.
fn join_lines(text: &str) -> String {
    let paragraphs = text.split("\n\n").map(|paragraph| {
        let mut joined = String::with_capacity(paragraph.len());
        for (i, line) in paragraph.lines().enumerate() {
            if i > 0 {
                let item = line.trim_start().starts_with("- ");
                joined.push(if item { '\n' } else { ' ' });
            }
            joined.push_str(if i > 0 { line.trim() } else { line.trim_end() });
        }
        joined
    });
    paragraphs.collect::<Vec<_>>().join("\n\n")
}

/// The WorkFlow CRD: the generated one, with the rule that only a WorkFlow has (a
/// WorkFlowTemplate shares its spec, and may hold templates and no steps): at least one step,
/// unless `workflowTemplateRef` gives them.
pub fn workflow_crd() -> CustomResourceDefinition {
    let mut crd = WorkFlow::crd();
    let spec = crd.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
        .expect("the WorkFlow CRD has a spec");
    spec.x_kubernetes_validations = Some(vec![ValidationRule {
        rule:
            "has(self.workflowTemplateRef) || (has(self.containers) && size(self.containers) > 0)"
                .into(),
        message: Some("at least one step, unless spec.workflowTemplateRef gives them".into()),
        field_path: Some(".containers".into()),
        reason: Some("FieldValueRequired".into()),
        ..ValidationRule::default()
    }]);
    spec.x_kubernetes_validations
        .get_or_insert_default()
        .extend(rules_validations());
    spec.x_kubernetes_validations
        .get_or_insert_default()
        .push(managed_by_validation());
    crd
}

/// `spec.managedBy` cannot be set, changed or removed once the workflow exists, as a Job's
/// (kubernetes/kubernetes `pkg/apis/batch/validation`: "field is immutable") and a JobSet's:
/// a controller never hands over a workflow it has started. A transition rule, checked on
/// updates only.
fn managed_by_validation() -> ValidationRule {
    ValidationRule {
        rule: "has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)".into(),
        message: Some("managedBy is immutable".into()),
        field_path: Some(".managedBy".into()),
        reason: Some("FieldValueInvalid".into()),
        ..ValidationRule::default()
    }
}

/// The rules on `spec.rules` that need the rest of the spec: a name used once, a starting
/// parallelism to grow or shrink, and runs named by index before one is added.
fn rules_validations() -> [ValidationRule; 3] {
    let rule = |rule: &str, message: &str| ValidationRule {
        rule: rule.into(),
        message: Some(message.into()),
        field_path: Some(".rules".into()),
        ..ValidationRule::default()
    };
    [
        rule(
            "!has(self.rules) || self.rules.all(r, self.rules.exists_one(s, s.name == r.name))",
            "rule names must be unique",
        ),
        rule(
            "!has(self.rules) || has(self.parallelism) || !self.rules.exists(r, r.action == 'grow' || r.action == 'shrink')",
            "a grow or shrink rule needs spec.parallelism, its starting point",
        ),
        rule(
            "!has(self.rules) || (has(self.runs) && self.runs >= 2) || !self.rules.exists(r, r.action == 'repeat')",
            "a repeat rule needs spec.runs of at least 2 (the runs' Jobs are named by index only then)",
        ),
    ]
}

/// The CRDs as YAML documents, as stored in `crd/workflow.yaml` and printed by the `crd`
/// command.
pub fn crd_yaml() -> String {
    crds()
        .iter()
        // Serialising a CRD (plain maps, strings and numbers) cannot fail.
        .map(|crd| serde_yaml::to_string(crd).expect("a CRD serialises to YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::Value;

    fn spec_schema() -> Value {
        let crd = serde_json::to_value(workflow_crd()).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    /// Walks a schema and reports every node that breaks Kubernetes' structural-schema rules.
    fn structural_violations(path: &str, node: &Value, out: &mut Vec<String>) {
        let Some(obj) = node.as_object() else {
            out.push(format!("{path}: not an object"));
            return;
        };
        for banned in [
            "$ref",
            "oneOf",
            "allOf",
            "not",
            "definitions",
            "$defs",
            "$schema",
        ] {
            if obj.contains_key(banned) {
                out.push(format!("{path}: has {banned}"));
            }
        }
        let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        // anyOf is only allowed (without types) for int-or-string.
        if obj.contains_key("anyOf") && !int_or_string {
            out.push(format!("{path}: anyOf outside int-or-string"));
        }
        let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        if !obj.contains_key("type") && !int_or_string && !preserve {
            out.push(format!("{path}: no type"));
        }
        if obj.get("type").is_some_and(|t| !t.is_string()) {
            out.push(format!("{path}: type is not a single string"));
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                structural_violations(&format!("{path}.{name}"), sub, out);
            }
        }
        if let Some(items) = obj.get("items") {
            structural_violations(&format!("{path}[]"), items, out);
        }
        if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
            structural_violations(&format!("{path}{{}}"), extra, out);
        }
    }

    #[test]
    fn crd_schema_is_structural() {
        let mut violations = Vec::new();
        structural_violations("", &spec_schema(), &mut violations);
        assert!(violations.is_empty(), "{violations:#?}");
    }

    #[test]
    fn crd_names_and_scope_match_the_seed() {
        let crd = workflow_crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("workflows.workflow.crd.com")
        );
        assert_eq!(crd.spec.group, "workflow.crd.com");
        assert_eq!(crd.spec.scope, "Namespaced");
        let names = &crd.spec.names;
        assert_eq!(names.kind, "WorkFlow");
        assert_eq!(names.plural, "workflows");
        assert_eq!(names.singular.as_deref(), Some("workflow"));
        assert_eq!(names.short_names.as_deref(), Some(&["wf".to_string()][..]));
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1");
        assert!(
            version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str(), c.type_.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("Status", ".status.workflow-status", "string"),
                ("Progress", ".status.progress", "string"),
                ("Message", ".status.summary", "string"),
                ("Age", ".metadata.creationTimestamp", "date"),
                ("Running", ".status.started", "string"),
                ("Changed", ".status.status-changed", "date"),
                ("Run", ".status.run", "string"),
            ]
        );
    }

    #[test]
    fn crd_schema_validates_what_a_schema_can_say() {
        let schema = spec_schema();
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["properties"]["maxStepTimeout"]["default"], 60);
        assert_eq!(
            spec["properties"]["maxStepTimeout"]["minimum"].as_f64(),
            Some(-1.0)
        );
        // Not required, nor `minItems`: a workflow may take its steps from a shared template
        // (`workflowTemplateRef`); the operator refuses one with neither, naming it.
        assert_eq!(spec["properties"]["containers"]["minItems"], Value::Null);
        assert_eq!(
            spec["properties"]["parallelism"]["minimum"].as_f64(),
            Some(1.0)
        );
        assert_eq!(spec["properties"]["failFast"]["default"], true);
        let step = &spec["properties"]["containers"]["items"];
        assert_eq!(step["properties"]["stepName"]["minLength"], 1);
        assert_eq!(step["properties"]["command"]["nullable"], true);
        assert_eq!(
            step["properties"]["dependsOn"]["default"],
            serde_json::json!([])
        );
        assert_eq!(
            step["properties"]["timeout"]["minimum"].as_f64(),
            Some(-1.0)
        );
        assert_eq!(step["properties"]["retries"]["minimum"].as_f64(), Some(0.0));
        let required: Vec<_> = step["required"].as_array().unwrap().iter().collect();
        assert!(required.contains(&&Value::from("stepName")), "{required:?}");
        // A step calling a template takes its image from it.
        assert!(!required.contains(&&Value::from("image")), "{required:?}");
        assert_eq!(step["properties"]["image"]["minLength"], 1);
        assert_eq!(spec["required"], Value::Null);
        let template = &spec["properties"]["templates"]["items"];
        assert_eq!(template["required"], serde_json::json!(["name"]));
        assert_eq!(template["properties"]["stepName"], Value::Null);
        assert_eq!(
            template["properties"]["dag"]["items"]["properties"]["stepName"]["minLength"],
            1
        );
    }

    #[test]
    fn descriptions_have_no_hard_wrapped_lines() {
        fn wrapped(path: &str, node: &Value, out: &mut Vec<String>) {
            match node {
                Value::Object(map) => {
                    for (key, value) in map {
                        let here = format!("{path}.{key}");
                        match value.as_str() {
                            Some(text) if key == "description" => {
                                let lines: Vec<&str> = text.split('\n').collect();
                                let cut = lines.windows(2).any(|pair| {
                                    !pair[0].is_empty()
                                        && !pair[1].is_empty()
                                        && !pair[1].starts_with("- ")
                                });
                                if cut {
                                    out.push(format!("{here}: {text:?}"));
                                }
                            }
                            _ => wrapped(&here, value, out),
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|item| wrapped(path, item, out)),
                _ => {}
            }
        }
        let mut cut = Vec::new();
        for crd in crds() {
            wrapped(
                &crd.spec.names.kind,
                &serde_json::to_value(&crd).unwrap(),
                &mut cut,
            );
        }
        assert!(
            cut.is_empty(),
            "{} descriptions cut mid-sentence: {cut:#?}",
            cut.len()
        );
        assert_eq!(
            join_lines("One sentence\n  wrapped.\n\nA list:\n- a\n- b"),
            "One sentence wrapped.\n\nA list:\n- a\n- b"
        );
    }

    #[test]
    fn every_field_has_a_description() {
        fn undocumented(path: &str, node: &Value, out: &mut Vec<String>) {
            if let Some(props) = node["properties"].as_object() {
                for (name, sub) in props {
                    let here = format!("{path}.{name}");
                    // apiVersion/kind/metadata come from kube, not from our `///` docs.
                    let ours = !matches!(here.as_str(), ".apiVersion" | ".kind" | ".metadata");
                    if ours && sub.get("description").is_none() {
                        out.push(here.clone());
                    }
                    undocumented(&here, sub, out);
                }
            }
            if node["items"].is_object() {
                undocumented(&format!("{path}[]"), &node["items"], out);
            }
        }
        let schema = spec_schema();
        let mut missing = Vec::new();
        undocumented("", &schema, &mut missing);
        assert!(
            missing.is_empty(),
            "fields without a description: {missing:?}"
        );
    }

    #[test]
    fn seed_manifest_parses_with_defaults() {
        let yaml = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: simple}
spec:
  containers:
    - stepName: step0
      image: busybox
    - stepName: step1
      image: busybox
      command: null
      dependsOn: [step0]
"#;
        let wf: WorkFlow = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(wf.spec.max_step_timeout, 60);
        assert!(wf.spec.fail_fast);
        assert_eq!(wf.spec.parallelism, None);
        assert_eq!(wf.spec.containers[0].depends_on, Vec::<String>::new());
        assert_eq!(wf.spec.containers[1].command, None);
        assert_eq!(wf.spec.containers[1].depends_on, ["step0"]);
    }

    #[test]
    fn status_fields_are_camel_case_and_the_old_started_at_is_still_read() {
        let status: WorkFlowStatus = serde_json::from_value(serde_json::json!({
            "started_at": "2026-11-27T10:00:00Z",
            "artifactRepository": {"from": "spec.artifactRepository", "repository": {}},
            "artifactsDeletedAt": "2026-11-27T11:00:00Z",
        }))
        .unwrap();
        assert!(status.started_at.is_some() && status.artifacts_deleted_at.is_some());
        let written = serde_json::to_value(&status).unwrap();
        for key in ["startedAt", "artifactRepository", "artifactsDeletedAt"] {
            assert!(written.get(key).is_some(), "{key}: {written}");
        }
        assert!(written.get("started_at").is_none());
    }

    #[test]
    fn step_timeout_overrides_max_step_timeout() {
        let yaml = "{maxStepTimeout: 10, containers: [{stepName: a, image: x, timeout: -1}, \
                    {stepName: b, image: x}]}";
        let spec: WorkFlowSpec = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(spec.effective_timeout(&spec.containers[0]), UNLIMITED);
        assert_eq!(spec.effective_timeout(&spec.containers[1]), 10);
    }

    /// The operator holds each step up to three times (see [`Step`]): a step's inline size is
    /// memory per step of every workflow it sees. 256 bytes before `securityContext` and the
    /// other container fields came; 736 with a `SecurityContext` inline.
    #[test]
    fn a_step_holds_its_rarely_set_kubernetes_types_out_of_line() {
        let size = std::mem::size_of::<Step>();
        // 280 before `when` (a boxed str: 16 bytes); the three fan-out fields are a box each
        // (8 bytes), not 64 inline; the template call 32 (`template` a boxed str, the
        // reference and the arguments a box each); `continueOn` 8 (one byte, padded),
        // `retryStrategy`, `synchronization` and `cache` 8 each (a box); `source`, `outputs`,
        // `inputs`, `initContainers` and `sidecars` 8 each (a box); `retries` 8 more as a
        // number or text (`IntOrExpr`, its text boxed); Argo's step kinds and pod settings
        // (`suspend`, `fail`, `http`, `resource`, `nodeSelector`, `tolerations`, `affinity`,
        // `podSpecPatch`) 8 each (a box); custom `metrics` 8 (a box); lifecycle `hooks` 8 (a
        // box); a daemon's `readinessProbe` 8 (a box; `daemon` is a byte in the padding).
        assert!(size <= 520, "a Step is {size} bytes");
        let spec = std::mem::size_of::<WorkFlowSpec>();
        // 80 before run control; `onExit` (a Vec) and the other run-control fields add 24, the
        // boxed `workspace` 8, `runs` 8 (one per workflow, not per step); queueing
        // (`priority`, `queueName`, `priorityClassName`, `queueTimeout`) 56; templates and
        // parameters 40 (`templates` a Vec, `arguments` and `workflowTemplateRef` a box each);
        // `activeDeadlineSeconds` 16, `synchronization` 8 (a box); `artifactRepository` 8 (a
        // box), `artifactGC` 8 (one byte, padded); `rules` 24 (a Vec, one per workflow);
        // Kueue at workflow scope 24 (`resources` a box, `managedBy` a boxed str, `queueScope`
        // one byte in the padding); custom `metrics` 8 (a box); lifecycle `hooks` 24 (a map,
        // one per workflow); `podSpecPatch` 8 (a box).
        assert!(spec <= 344, "a WorkFlowSpec is {spec} bytes");
    }

    #[test]
    fn steps_are_read_into_a_list_of_their_own_length() {
        let steps: Vec<String> = (0..10)
            .map(|i| format!("{{stepName: s{i}, image: x}}"))
            .collect();
        let yaml = format!("{{containers: [{}]}}", steps.join(", "));
        let spec: WorkFlowSpec = serde_yaml::from_str(&yaml).unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        for read in [spec, serde_json::from_str(&json).unwrap()] {
            assert_eq!(read.containers.len(), 10);
            assert_eq!(read.containers.capacity(), 10);
        }
    }

    #[test]
    fn status_serialises_with_the_seed_field_names() {
        let status = WorkFlowStatus {
            workflow_status: Some(Phase::Started),
            status_changed: Some("2026-11-22T05:50:00Z".into()),
            executed: vec!["a".into()],
            progress: Some("1/2".into()),
            observed_generation: Some(3),
            ..Default::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["workflow-status"], "Started");
        assert_eq!(json["status-changed"], "2026-11-22T05:50:00Z");
        assert_eq!(json["observedGeneration"], 3);
        assert_eq!(json["progress"], "1/2");
        assert!(
            json.get("message").is_none(),
            "absent message must not be serialised: {json}"
        );
    }

    #[test]
    fn descriptions_kubectl_explain_shows_say_nothing_of_the_rust_types() {
        let yaml = crd_yaml();
        for rust in ["Boxed", "Option<", "Vec<"] {
            assert!(!yaml.contains(rust), "a description names {rust:?}");
        }
    }

    #[test]
    fn crd_yaml_is_the_crds() {
        let yaml = crd_yaml();
        let back: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
            .map(|document| CustomResourceDefinition::deserialize(document).unwrap())
            .collect();
        assert_eq!(back, crds());
        let names: Vec<_> = back
            .iter()
            .map(|c| {
                (
                    c.spec.names.kind.as_str(),
                    c.spec.scope.as_str(),
                    c.spec.names.short_names.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("WorkFlow", "Namespaced", vec!["wf".to_string()]),
                ("WorkFlowTemplate", "Namespaced", vec!["wftmpl".to_string()]),
                (
                    "ClusterWorkFlowTemplate",
                    "Cluster",
                    vec!["cwftmpl".to_string()]
                ),
                ("CronWorkFlow", "Namespaced", vec!["cwf".to_string()]),
                (
                    "WorkFlowTrigger",
                    "Namespaced",
                    vec!["wftrigger".to_string()]
                ),
            ]
        );
    }

    /// Every WorkFlow in `examples/`, by file stem, with the shared templates of its file as
    /// the operator would have recorded them.
    fn examples() -> Vec<(String, WorkFlow)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                // An example may carry what its workflow needs (a Secret, a template) first.
                let mut shared = Vec::new();
                for document in serde_yaml::Deserializer::from_str(&text) {
                    let value = serde_yaml::Value::deserialize(document).unwrap();
                    let kind = value["kind"].as_str().unwrap_or_default().to_string();
                    if kind.ends_with("WorkFlowTemplate") {
                        shared.push(ResolvedTemplate {
                            kind,
                            name: value["metadata"]["name"].as_str().unwrap().to_string(),
                            uid: None,
                            resource_version: None,
                            resolved_at: None,
                            spec: serde_yaml::from_value(value["spec"].clone()).unwrap(),
                        });
                        continue;
                    }
                    if kind != "WorkFlow" {
                        continue;
                    }
                    let mut wf: WorkFlow = serde_yaml::from_value(value)
                        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
                    wf.status = Some(WorkFlowStatus {
                        resolved_templates: shared.clone(),
                        ..WorkFlowStatus::default()
                    });
                    out.push((path.file_stem().unwrap().to_string_lossy().into_owned(), wf));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn examples_parse_and_the_valid_ones_are_valid_dags() {
        let examples = examples();
        for (stem, wf) in &examples {
            // Named after the file; a second workflow of one file, `<file>-2`.
            let name = wf.metadata.name.as_deref().unwrap_or_default();
            assert!(
                name == stem || name == format!("{stem}-2"),
                "name of {stem}.yaml: {name}"
            );
            // The templates expanded, the DAG, the exit steps and what steps read of each other.
            let (expanded, compiled) = crate::plan::prepare(wf);
            let wf = expanded.as_ref().unwrap_or(wf);
            let dag = compiled.dag;
            assert_eq!(
                dag.is_err(),
                stem.starts_with("invalid-"),
                "{stem}.yaml: {dag:?}"
            );
            // The embedded control plane runs commands as local processes (a script by `sh`
            // unless it names its interpreter).
            // An HTTP step runs no command: the agent makes its request.
            let steps = wf.spec.containers.iter().chain(&wf.spec.on_exit);
            for step in steps.filter(|s| s.http.is_none()) {
                let program = step
                    .command
                    .as_ref()
                    .and_then(|c| c.first())
                    .map(String::as_str)
                    .or(step.source.is_some().then_some("sh"));
                assert!(
                    matches!(
                        program,
                        Some("sh" | "echo" | "sleep" | "true" | "false" | "python3")
                    ),
                    "{stem}.yaml step {} runs {program:?}",
                    step.step_name
                );
            }
        }
        type Shows = fn(&WorkFlowSpec) -> bool;
        let wanted: [(&str, Shows); 20] = [
            ("simple", |s| s.containers.len() == 3),
            ("diamond", |s| s.containers.len() == 4),
            ("failing", |s| {
                s.containers
                    .iter()
                    .any(|c| c.command.iter().flatten().any(|a| a.contains("false")))
            }),
            ("timeout", |s| s.max_step_timeout == 2),
            ("args", |s| s.containers.iter().any(|c| c.args.is_some())),
            ("env", |s| s.containers.iter().any(|c| !c.env.is_empty())),
            ("retries", |s| {
                s.containers.iter().any(|c| c.retries.is_some())
            }),
            ("step-timeout", |s| {
                s.containers.iter().any(|c| c.timeout.is_some())
            }),
            ("parallelism", |s| s.parallelism.is_some()),
            ("fail-fast-false", |s| !s.fail_fast),
            ("resources", |s| {
                s.containers.iter().any(|c| c.resources.is_some())
            }),
            ("secrets-and-volumes", |s| {
                s.pod_template.is_some()
                    && s.containers
                        .iter()
                        .any(|c| !c.env_from.is_empty() && !c.volume_mounts.is_empty())
            }),
            ("start-timeout", |s| {
                s.start_timeout != DEFAULT_START_TIMEOUT
            }),
            ("run-control", |s| !s.on_exit.is_empty()),
            ("cleanup", |s| {
                s.ttl_seconds_after_finished.is_some() || s.pod_cleanup.is_some()
            }),
            ("fan-out", |s| {
                let any = |f: fn(&Step) -> bool| s.containers.iter().any(f);
                s.runs.is_some()
                    && any(|c| c.with_items.is_some())
                    && any(|c| c.with_sequence.is_some())
                    && any(|c| c.with_param.is_some())
            }),
            ("templates", |s| {
                s.arguments.is_some() && s.templates.iter().any(|t| t.dag.is_some())
            }),
            ("workflow-template", |s| s.workflow_template_ref.is_some()),
            ("cluster-workflow-template", |s| {
                s.containers
                    .iter()
                    .any(|c| c.template_ref.as_ref().is_some_and(|r| r.cluster_scope))
            }),
            ("outputs", |s| {
                s.containers.iter().any(|c| c.when.is_some())
                    && s.containers
                        .iter()
                        .flat_map(|c| c.command.iter().flatten())
                        .any(|a| a.contains("{{steps."))
            }),
        ];
        for (stem, shows) in wanted {
            let wf = examples.iter().find(|(s, _)| s == stem).map(|(_, wf)| wf);
            assert!(
                wf.is_some_and(|wf| shows(&wf.spec)),
                "examples/{stem}.yaml missing or off-topic"
            );
        }
    }
}
