//! Kubernetes Jobs of a workflow: building a step's Job, reading a Job back as plain data for
//! the planner, stopping a timed-out step's Job, and the labels copied on relabel. Pure; no
//! client.
//!
//! The handlers call [`build_job`] for each `plan::Action::CreateJob`, [`time_out_patch`] for
//! each `plan::Action::TimeOutJob`, [`observe_job`] on every Job they list or watch, and
//! [`relabel_patch`] when a workflow's labels change.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, HostPathVolumeSource, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, SecretKeySelector, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use super::agent::{self, AgentSource};
use super::cache;
use super::crd::{
    InputArtifact, OptionNum, OutputArtifact, ResolvedRepository, Step, StepKind, WorkFlow,
};
use super::crd::{step_pod, suspend};
use super::fan_out::{self, Instance, Item};
use super::http_call;
use super::job_summary::{JobEnd, JobSummary};
use super::names;
use super::outputs::{self, Outputs, StepData};
use super::plan::{ExitEnv, JobState, ObservedJob, backstop_deadline_seconds};
use super::resource_action;
use super::shards::LABEL_SHARD;

/// The labels and annotations of step Jobs, where Jobs are built.
pub use super::labels::{
    ANNOTATION_CACHE_KEY, ANNOTATION_CANNOT_START, ANNOTATION_PODS_DELETED, ANNOTATION_STEP,
    ANNOTATION_STOPPED, ANNOTATION_TIMED_OUT, ANNOTATION_WORKFLOW, LABEL_ATTEMPT, LABEL_ITEM,
    LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, LABEL_RETRY, LABEL_RUN, LABEL_RUN_INDEX, LABEL_STEP,
    LABEL_WORKFLOW, OWN_LABELS,
};

/// Environment variables the operator sets in every step; a step's `env` cannot override them.
pub const OWN_ENV: [&str; 10] = [
    "WORKFLOW_NAME",
    "WORKFLOW_NAMESPACE",
    "STEP_NAME",
    "WORKFLOW_STATUS",
    "WORKFLOW_FAILED_STEPS",
    outputs::OUTPUTS_ENV,
    WORKSPACE_ENV,
    fan_out::RUN_INDEX_ENV,
    fan_out::ITEM_ENV,
    agent::COMMAND_ENV,
];

/// The environment variable that holds the workspace's path (`spec.workspace.mountPath`).
pub const WORKSPACE_ENV: &str = "WORKFLOW_WORKSPACE";

/// The name of the workspace's volume in a step's pod.
pub const WORKSPACE_VOLUME: &str = "workflow-workspace";

/// Why a Job cannot be built for a workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The workflow has no `metadata.name`, `metadata.namespace` or `metadata.uid` (it was not
    /// read from the API server), so its Jobs cannot name or be owned by it.
    #[error("workflow has no metadata.{0}; jobs are built only for stored workflows")]
    MissingMetadata(&'static str),
    /// The step runs under the step agent and the operator was given none.
    #[error("step {0} runs under the step agent, and the operator has none to copy in")]
    NoAgent(String),
    /// The step has artifacts and the workflow no S3 repository to keep them in.
    #[error("{0}")]
    NoRepository(String),
    /// The step's own pod settings (`podSpecPatch`) cannot be applied.
    #[error("step {0}: {1}")]
    PodSpec(String, String),
}

/// `Some(list)` unless it is empty: Kubernetes omits empty lists, and so do the Jobs we build.
fn non_empty<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

/// A label selector matching every Job of the workflow named `workflow`.
pub fn selector(workflow: &str) -> String {
    format!("{LABEL_WORKFLOW}={}", names::label_value(workflow))
}

/// The labels a step's Job carries: the workflow's own labels, then the operator's, which win.
pub fn job_labels(workflow: &WorkFlow, step: &str, run: &str) -> BTreeMap<String, String> {
    let mut labels = job_labels_for_relabel(workflow);
    labels.extend(own_labels(&workflow.name_any(), step, run));
    labels
}

fn own_labels(workflow: &str, step: &str, run: &str) -> [(String, String); 3] {
    [
        (LABEL_WORKFLOW.to_string(), names::label_value(workflow)),
        (LABEL_STEP.to_string(), names::label_value(step)),
        (LABEL_RUN.to_string(), names::label_value(run)),
    ]
}

/// The workflow's labels as copied to its Jobs: all of them but the operator's own keys.
pub fn job_labels_for_relabel(workflow: &WorkFlow) -> BTreeMap<String, String> {
    workflow
        .labels()
        .iter()
        .filter(|(k, _)| !OWN_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A JSON merge patch copying the workflow's labels onto a Job whose labels are `current`, or
/// `None` when the Job already has them. It adds and updates; it never touches the operator's
/// labels, and labels removed from the workflow stay on existing Jobs (the operator cannot
/// tell them from labels others put there).
pub fn relabel_patch(
    workflow: &WorkFlow,
    current: &BTreeMap<String, String>,
) -> Option<serde_json::Value> {
    let changes: serde_json::Map<String, serde_json::Value> = job_labels_for_relabel(workflow)
        .into_iter()
        .filter(|(k, v)| current.get(k) != Some(v))
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    (!changes.is_empty()).then(|| serde_json::json!({ "metadata": { "labels": changes } }))
}

/// The `activeDeadlineSeconds` a timed-out step's Job is given: the least Kubernetes accepts.
/// The operator times a step out once it has run at least its timeout since the Job's
/// `startTime`, from which Kubernetes counts the deadline too, so this one is already exceeded
/// (or, for a Job the Job controller has not started yet, exceeded a second after it does).
const TIMED_OUT_DEADLINE_SECONDS: i64 = 1;

/// A JSON merge patch that records why a step's Job timed out: the annotation
/// [`ANNOTATION_TIMED_OUT`], which makes the Job the record of the timeout; its running pod is
/// stopped with [`stop_pod_patch`], which keeps the pod and its log.
pub fn time_out_mark(why: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {ANNOTATION_TIMED_OUT: why}}})
}

/// A JSON merge patch giving a running pod an `activeDeadlineSeconds` already past (a pod's may
/// be set, or lowered, while it runs): the kubelet stops its containers and fails it with
/// reason `DeadlineExceeded`, keeping the pod (k8s.io/kubernetes pkg/kubelet/active_deadline.go),
/// and its failure fails a Job with no retries left (pkg/controller/job/job_controller.go counts
/// it against `backoffLimit`). It runs at least 1 s from its start, as a step does anyway.
pub fn stop_pod_patch() -> serde_json::Value {
    serde_json::json!({"spec": {"activeDeadlineSeconds": TIMED_OUT_DEADLINE_SECONDS}})
}

/// A JSON merge patch that stops the Job of a step past its timeout and records why, when its
/// pod cannot be stopped alone ([`stop_pod_patch`]: it has none running, or retries left): the
/// annotation [`ANNOTATION_TIMED_OUT`], and an `activeDeadlineSeconds` already exceeded, so the
/// Job controller deletes the Job's pods (their logs with them) and fails it with reason
/// `DeadlineExceeded`. The Job is kept, as the record that the step timed out (a suspended Job
/// has no pods and its deadline does not count, so there the annotation alone records it).
/// Applying it twice changes nothing.
pub fn time_out_patch(why: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {ANNOTATION_TIMED_OUT: why}},
        "spec": {"activeDeadlineSeconds": TIMED_OUT_DEADLINE_SECONDS},
    })
}

/// A JSON merge patch that records that the workflow stopped a running step's Job, saying why
/// ([`ANNOTATION_STOPPED`]): the record [`observe_job`] reads back. Its running pod is then
/// stopped with [`stop_pod_patch`], which keeps the pod and its log, as a timed-out step's is.
pub fn stop_mark(why: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {ANNOTATION_STOPPED: why}}})
}

/// [`stop_mark`] with an `activeDeadlineSeconds` already exceeded, for a Job whose pod cannot be
/// stopped alone ([`stop_pod_patch`]: it has none running, or retries left), as
/// [`time_out_patch`] does: the Job controller deletes its pods and fails it. Applying it twice
/// changes nothing.
pub fn stop_patch(why: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {ANNOTATION_STOPPED: why}},
        "spec": {"activeDeadlineSeconds": TIMED_OUT_DEADLINE_SECONDS},
    })
}

/// A JSON merge patch that resumes a suspend step, recording when (the annotation
/// [`suspend::ANNOTATION_RESUMED`]) and, when there are any, the outputs it is given
/// ([`suspend::ANNOTATION_SUPPLIED`]), in one write; its Job stays suspended. Applying it
/// twice changes nothing but the time.
pub fn resume_patch(at: Timestamp, supplied: &Outputs) -> serde_json::Value {
    let mut annotations = serde_json::json!({suspend::ANNOTATION_RESUMED: format!("{at:.0}")});
    if !supplied.is_empty() {
        annotations[suspend::ANNOTATION_SUPPLIED] = serde_json::to_string(supplied)
            .expect("a map of strings serialises")
            .into();
    }
    serde_json::json!({"metadata": {"annotations": annotations}})
}

/// A JSON merge patch that stops the Job of a step whose pod did not start and records why: the
/// annotation [`ANNOTATION_CANNOT_START`], and a deadline already exceeded, as
/// [`time_out_patch`] does. Applying it twice changes nothing.
pub fn cannot_start_patch(why: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"annotations": {ANNOTATION_CANNOT_START: why}},
        "spec": {"activeDeadlineSeconds": TIMED_OUT_DEADLINE_SECONDS},
    })
}

/// The Job that runs `step` of `workflow` in run `run`: [`StepJob::new`] as it is, with the
/// step's kind read from the spec ([`StepKind::of`]).
///
/// # Errors
/// As [`StepJob::build`].
pub fn build_job(workflow: &WorkFlow, step: &Step, run: &str) -> Result<Job, JobError> {
    StepJob::new(workflow, step, StepKind::of(&workflow.spec, step), run).build()
}

/// The Job that runs one instance of a step: [`StepJob::new`] for the first attempt of a plain
/// step in a run, with what differs set by the other methods, then [`StepJob::build`].
#[derive(Debug, Clone)]
pub struct StepJob<'a> {
    workflow: &'a WorkFlow,
    step: &'a Step,
    kind: StepKind,
    run: &'a str,
    retry: i32,
    exit: Option<&'a ExitEnv>,
    data: StepData<'a>,
    instance: Option<&'a Instance>,
    attempt: u32,
    agent: Option<&'a AgentSource>,
    repository: Option<&'a ResolvedRepository>,
}

impl<'a> StepJob<'a> {
    /// The Job of `step` of `workflow`, of kind `kind` (as compiled: `Compiled::kinds`), in
    /// run `run`.
    pub fn new(workflow: &'a WorkFlow, step: &'a Step, kind: StepKind, run: &'a str) -> Self {
        Self {
            workflow,
            step,
            kind,
            run,
            retry: 0,
            exit: None,
            data: StepData::default(),
            instance: None,
            attempt: 0,
            agent: None,
            repository: None,
        }
    }

    /// With the workflow's artifact repository (`status.artifactRepository`), for a step with
    /// artifacts: their keys, the store and its credentials (from its Secret) go to the agent.
    pub fn repository(mut self, repository: Option<&'a ResolvedRepository>) -> Self {
        self.repository = repository;
        self
    }

    /// With the step agent from `agent`, for a step that needs it (`agent::needs_agent`): an
    /// init container copies it into an `emptyDir`, and the step's container runs the step's
    /// command through it, told what to do in `$WORKFLOW_AGENT`.
    pub fn agent(mut self, agent: &'a AgentSource) -> Self {
        self.agent = Some(agent);
        self
    }

    /// For attempt `attempt` of the step (`retryStrategy`; 0 for the first): its name from
    /// `names::attempt_job_name`, the label [`LABEL_ATTEMPT`] when not 0, and `{{retries}}`
    /// in its command, args and env values.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// For retry `retry` of the run (`spec.retry`): its name from `names::retry_job_name`, and
    /// the label [`LABEL_RETRY`] when not 0.
    pub fn retry(mut self, retry: i32) -> Self {
        self.retry = retry;
        self
    }

    /// For an exit step, with `exit` in its environment: `WORKFLOW_STATUS` and
    /// `WORKFLOW_FAILED_STEPS` (comma-separated).
    pub fn exit(mut self, exit: Option<&'a ExitEnv>) -> Self {
        self.exit = exit;
        self
    }

    /// With the data between steps: each `{{steps.NAME.outputs.KEY}}` in the step's command,
    /// args and env values is replaced by its value in `data.inputs` (the planner found them
    /// all); `WORKFLOW_OUTPUTS` names the container's termination message file, where the step
    /// writes its own outputs, when another step names them (`data.outputs_read`), else
    /// `/dev/null`.
    pub fn data(mut self, data: StepData<'a>) -> Self {
        self.data = data;
        self
    }

    /// For `instance`: which run (`spec.runs`) and which item (a step that fans out) the Job is
    /// for: `WORKFLOW_RUN_INDEX` (in every step, 0 with one run) and, for an item,
    /// `WORKFLOW_ITEM`, its `{{item}}` references substituted and the labels [`LABEL_ITEM`]
    /// (and [`LABEL_RUN_INDEX`] with more than one run); its name is that of the instance's
    /// display name (`fan_out::display_name`: `build[3]`, `run1/build`), so every instance has
    /// a Job of its own.
    pub fn instance(mut self, instance: &'a Instance) -> Self {
        self.instance = Some(instance);
        self
    }

    /// The Job. Name from `names::retry_job_name`; labels from [`job_labels`]; annotations
    /// with the exact workflow and step names; a controller owner reference to the workflow (so
    /// the garbage collector deletes it with the workflow); `restartPolicy: Never`;
    /// `backoffLimit` = the step's `retries`; `activeDeadlineSeconds` 60 s past its effective
    /// timeout (none when unlimited), a backstop behind the operator's own stop at the timeout
    /// (`plan::backstop_deadline_seconds`); one container named after the step with the step's
    /// container fields and env (plus `WORKFLOW_NAME`, `WORKFLOW_NAMESPACE` and `STEP_NAME`);
    /// the pod-level fields of `spec.podTemplate`. No `ttlSecondsAfterFinished`: the planner
    /// derives progress from finished Jobs, so they must stay while the workflow exists.
    ///
    /// # Errors
    /// [`JobError::MissingMetadata`] when the workflow lacks a name, namespace or uid.
    pub fn build(&self) -> Result<Job, JobError> {
        let meta = &self.workflow.metadata;
        let name = meta
            .name
            .as_deref()
            .ok_or(JobError::MissingMetadata("name"))?;
        let namespace =
            (meta.namespace.as_deref()).ok_or(JobError::MissingMetadata("namespace"))?;
        let mut owner =
            (self.workflow.controller_owner_ref(&())).ok_or(JobError::MissingMetadata("uid"))?;
        // Foreground deletion of the workflow waits for its Jobs.
        owner.block_owner_deletion = Some(true);
        let (labels, pod_labels) = self.labels(name);
        let timeout = self.workflow.spec.effective_timeout(self.step);
        let agent = match agent::needs_agent(self.step, self.kind, self.data.result_read) {
            true => {
                Some((self.agent).ok_or_else(|| JobError::NoAgent(self.step.step_name.clone()))?)
            }
            false => None,
        };
        let job_name = names::attempt_job_name(
            name,
            &self.display_name(),
            self.run,
            self.retry,
            self.attempt,
        );
        let store = self.store(namespace, name)?;
        let pod = PodParts {
            name,
            namespace,
            job: &job_name,
            agent,
            store: store.as_ref(),
        };
        Ok(Job {
            metadata: ObjectMeta {
                name: Some(job_name.clone()),
                namespace: Some(namespace.to_string()),
                labels: Some(labels),
                annotations: Some(self.annotations(name)),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                // With a `retryStrategy` each attempt is a Job of its own.
                backoff_limit: Some(match self.step.retry_strategy {
                    Some(_) => 0,
                    None => self.step.retries.num().unwrap_or(0),
                }),
                // A backstop: the operator stops the step at its timeout
                // (`plan::backstop_deadline_seconds`).
                active_deadline_seconds: backstop_deadline_seconds(timeout),
                // A Job for Kueue is created suspended: Kueue admits it by unsuspending it, and
                // injects the admitted flavor's node selectors into its pod template first,
                // which is why the operator never rewrites a Job's template after create nor
                // unsuspends one itself (<https://kueue.sigs.k8s.io/docs/tasks/run/jobs/>). The
                // Job controller resets `startTime` on each resume, so `activeDeadlineSeconds`
                // counts from the admission (kubernetes/kubernetes
                // pkg/controller/job/job_controller.go, `syncJob`: "Resumed jobs will always
                // reset StartTime to current time").
                // Under `queueScope: Workflow` Kueue admits the run's Workload, not the Job: the
                // Job is made only once the run is admitted, unsuspended and unlabelled, so
                // Kueue does not take it for a job of its own. A suspend step's Job is created
                // suspended and stays so: it runs no pod, and is resumed by an annotation
                // (`crd::suspend`).
                suspend: (per_step_kueue(&self.workflow.spec) || self.suspends()).then_some(true),
                template: self.pod_template(&pod, pod_labels)?,
                ..JobSpec::default()
            }),
            status: None,
        })
    }

    /// Whether the Job runs no pod, created suspended for good: a suspend step's
    /// (`crd::suspend`), or a failing step's (`fail`), which it records as unable to start.
    fn suspends(&self) -> bool {
        match self.kind {
            StepKind::Suspend | StepKind::Fail => true,
            StepKind::Container
            | StepKind::Http
            | StepKind::Resource
            | StepKind::Script
            | StepKind::Interactive
            | StepKind::InteractiveScript => false,
        }
    }

    /// The Job's annotations: the exact workflow and step names, and a cached step's key.
    fn annotations(&self, workflow: &str) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::from([
            (ANNOTATION_WORKFLOW.to_string(), workflow.to_string()),
            (ANNOTATION_STEP.to_string(), self.step.step_name.clone()),
        ]);
        // A failing step's Job is born the record of why it cannot start.
        if let Some(why) = &self.step.fail {
            annotations.insert(ANNOTATION_CANNOT_START.to_string(), why.to_string());
        }
        if self.step.cache.is_some() {
            let no_inputs = outputs::Inputs::new();
            let inputs = self.data.inputs.unwrap_or(&no_inputs);
            let key = cache::key_of(self.step, inputs, self.item().map(|i| &i.value));
            annotations.insert(ANNOTATION_CACHE_KEY.to_string(), key.hash);
        }
        annotations
    }

    fn item(&self) -> Option<&'a Item> {
        self.instance.and_then(|instance| instance.item.as_ref())
    }

    fn run_index(&self) -> u32 {
        self.instance.map_or(0, |instance| instance.run_index)
    }

    /// The instance's name in the status (`fan_out::display_name`).
    fn display_name(&self) -> String {
        fan_out::display_name(
            &self.step.step_name,
            self.run_index(),
            self.workflow.spec.run_count(),
            self.item().map(|item| item.index),
        )
    }

    /// The Job's labels and its pod's: the operator's, the instance's (retry, run, item), the
    /// workflow's on the Job, `podTemplate.metadata`'s on the pod, and Kueue's on the Job.
    fn labels(&self, name: &str) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let spec = &self.workflow.spec;
        let step = &self.step.step_name;
        let template = spec
            .pod_template
            .as_deref()
            .and_then(|p| p.metadata.as_ref());
        // The template's labels, then the operator's, which win (as on the Job itself).
        let mut pod_labels = template.map(|m| m.labels.clone()).unwrap_or_default();
        pod_labels.extend(own_labels(name, step, self.run));
        let mut labels = job_labels(self.workflow, step, self.run);
        let instance = [
            (
                LABEL_RETRY,
                (self.retry != 0).then(|| self.retry.to_string()),
            ),
            (
                LABEL_RUN_INDEX,
                (spec.run_count() > 1).then(|| self.run_index().to_string()),
            ),
            (LABEL_ITEM, self.item().map(|item| item.index.to_string())),
            (
                LABEL_ATTEMPT,
                (self.attempt != 0).then(|| self.attempt.to_string()),
            ),
        ];
        for (key, value) in instance {
            if let Some(value) = value {
                pod_labels.insert(key.to_string(), value.clone());
                labels.insert(key.to_string(), value);
            }
        }
        // A workflow's shard never changes, so its pods can carry it (`shards`).
        if let Some(shard) = self.workflow.labels().get(LABEL_SHARD) {
            pod_labels.insert(LABEL_SHARD.to_string(), shard.clone());
        }
        // A suspend step's Job is left out of Kueue, which would admit it by unsuspending it.
        if self.suspends() {
            if self.step.suspend.is_some() {
                labels.insert(suspend::LABEL_SUSPEND.to_string(), "true".to_string());
            }
            return (labels, pod_labels);
        }
        // Kueue reads these labels from the Job, not its pods
        // (<https://kueue.sigs.k8s.io/docs/tasks/run/jobs/>).
        if let Some(queue) = spec.queue_name.as_ref().filter(|_| per_step_kueue(spec)) {
            labels.insert(LABEL_QUEUE_NAME.to_string(), queue.to_string());
            if let Some(class) = &spec.priority_class_name {
                labels.insert(LABEL_PRIORITY_CLASS.to_string(), class.to_string());
            }
        }
        (labels, pod_labels)
    }

    /// The pod template: the operator's labels and `podTemplate.metadata`'s, not the
    /// workflow's (the template is immutable, so copied workflow labels could not follow a
    /// relabel); the step's container; the pod-level fields of `spec.podTemplate`.
    fn pod_template(
        &self,
        parts: &PodParts,
        labels: BTreeMap<String, String>,
    ) -> Result<PodTemplateSpec, JobError> {
        let agent = parts.agent;
        let pod = (self.workflow.spec.pod_template.as_deref().cloned()).unwrap_or_default();
        let metadata = pod.metadata.unwrap_or_default();
        // The exact workflow and step names on the pod too, for `logs` and clients that start
        // from a pod (labels may be shortened).
        let mut annotations = metadata.annotations;
        annotations.insert(ANNOTATION_STEP.to_string(), self.step.step_name.clone());
        let workflow = self.workflow.metadata.name.clone().unwrap_or_default();
        annotations.insert(ANNOTATION_WORKFLOW.to_string(), workflow);
        let volumes = self.volumes(pod.volumes, parts);
        Ok(PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            }),
            spec: Some(self.own_pod(PodSpec {
                restart_policy: Some("Never".to_string()),
                init_containers: non_empty(self.init_containers(agent)),
                containers: vec![self.container(parts)],
                service_account_name: pod.service_account_name,
                volumes: non_empty(volumes),
                image_pull_secrets: non_empty(pod.image_pull_secrets),
                node_selector: (!pod.node_selector.is_empty()).then_some(pod.node_selector),
                tolerations: non_empty(pod.tolerations),
                affinity: pod.affinity,
                security_context: pod.security_context,
                priority_class_name: pod.priority_class_name,
                ..PodSpec::default()
            })?),
        })
    }

    /// The pod's volumes: `podTemplate`'s, then the run's workspace claim, the agent's and the
    /// artifact store's, each when the step has it. Pushed one by one: a `Volume` is 2 KB, and
    /// a chain of optional ones moved every one of them, present or not, for every Job.
    fn volumes(&self, mut volumes: Vec<Volume>, parts: &PodParts) -> Vec<Volume> {
        if self.workflow.spec.workspace.is_some() {
            volumes.push(Volume {
                name: WORKSPACE_VOLUME.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: names::workspace_claim_name(parts.name, self.run),
                    read_only: None,
                }),
                ..Volume::default()
            });
        }
        if parts.agent.is_some() {
            volumes.push(agent_volume());
        }
        if let Some(store) = parts.store.and_then(store_volume) {
            volumes.push(store);
        }
        volumes
    }

    /// `pod` with the step's own pod settings and the workflow's `podSpecPatch`
    /// (`crd::step_pod`), if there are any.
    fn own_pod(&self, pod: PodSpec) -> Result<PodSpec, JobError> {
        let workflow_patch = self.workflow.spec.pod_spec_patch.as_deref();
        if !step_pod::any(self.step) && workflow_patch.is_none() {
            return Ok(pod);
        }
        let container = names::dns_label(&self.step.step_name);
        let workflow_patch = workflow_patch.map(String::as_str);
        step_pod::apply(pod, self.step, workflow_patch, &container)
            .map_err(|why| JobError::PodSpec(self.step.step_name.clone(), why))
    }

    /// The pod's init containers: the one copying the agent in, the step's own, then its
    /// sidecars (init containers that keep running: `restartPolicy: Always`).
    fn init_containers(&self, agent: Option<&AgentSource>) -> Vec<Container> {
        let install = agent.map(|agent| Container {
            name: agent::AGENT_VOLUME.to_string(),
            image: Some(agent.image.clone()),
            command: Some(vec![
                agent.path.clone(),
                "install".to_string(),
                agent::AGENT_PATH.to_string(),
            ]),
            volume_mounts: Some(vec![agent_mount()]),
            // What went wrong is on its stderr: the step's failure message says it.
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        });
        let own = self
            .step
            .init_containers
            .iter()
            .flat_map(|c| c.iter().cloned());
        let sidecars = self
            .step
            .sidecars
            .iter()
            .flat_map(|c| c.iter())
            .map(|c| Container {
                restart_policy: Some("Always".to_string()),
                ..c.clone()
            });
        install.into_iter().chain(own).chain(sidecars).collect()
    }

    /// The step's container, its references to outputs and items filled in; under the agent,
    /// the agent runs the command.
    fn container(&self, parts: &PodParts) -> Container {
        let agent = parts.agent.is_some();
        let step = self.step;
        let fill_all = |texts: &Option<Vec<String>>| {
            (texts.as_ref()).map(|texts| texts.iter().map(|t| self.fill(t)).collect())
        };
        let workspace = self
            .workflow
            .spec
            .workspace
            .as_deref()
            .map(|w| VolumeMount {
                name: WORKSPACE_VOLUME.to_string(),
                mount_path: w.mount_path.clone(),
                ..VolumeMount::default()
            });
        let mut command = fill_all(&step.command);
        let mut env = self.env(parts.name, parts.namespace, agent);
        if agent {
            match self.kind {
                // The person runs the command: it is shown to them.
                StepKind::Interactive | StepKind::InteractiveScript => {
                    env.push(self.command_env(command.clone()));
                }
                // The request's headers from Secrets: the pod reads them, not the operator.
                StepKind::Http => env.extend(http_header_env(step)),
                StepKind::Resource
                | StepKind::Container
                | StepKind::Script
                | StepKind::Suspend
                | StepKind::Fail => {}
            }
            command = Some(agent::wrap_command(command, self.kind));
            env.push(self.agent_task(parts));
            if let Some(secret) = parts.store.and_then(|store| store.secret.as_ref()) {
                env.extend(credentials_env(secret));
            }
        }
        Container {
            name: names::dns_label(&step.step_name),
            image: Some(self.image(parts)),
            command,
            args: fill_all(&step.args),
            termination_message_path: Some(outputs::OUTPUTS_PATH.to_string()),
            env: Some(env),
            env_from: non_empty(step.env_from.clone()),
            volume_mounts: non_empty(
                (step.volume_mounts.iter().cloned())
                    .chain(workspace)
                    .chain(agent.then(agent_mount))
                    .chain(parts.store.and_then(store_mount))
                    .collect(),
            ),
            working_dir: step.working_dir.clone(),
            image_pull_policy: step.image_pull_policy.clone(),
            security_context: step.security_context.as_deref().cloned(),
            resources: step.resources.as_deref().cloned(),
            readiness_probe: step.readiness_probe.as_deref().cloned(),
            ..Container::default()
        }
    }

    /// The image of the step's container: the step's; a pause image for a step that runs no
    /// pod; the agent's own for an HTTP step (the agent makes its request, as Argo's agent
    /// does from the executor's image).
    fn image(&self, parts: &PodParts) -> String {
        match self.kind {
            StepKind::Suspend | StepKind::Fail => suspend::SUSPEND_IMAGE.to_string(),
            StepKind::Http | StepKind::Resource => {
                (parts.agent.map(|agent| agent.image.clone())).unwrap_or_default()
            }
            StepKind::Container
            | StepKind::Script
            | StepKind::Interactive
            | StepKind::InteractiveScript => self.fill(&self.step.image),
        }
    }

    /// The operator's variables, then the step's own env (never over the operator's names),
    /// its values filled in.
    fn env(&self, name: &str, namespace: &str, agent: bool) -> Vec<EnvVar> {
        // The agent writes its report to the termination message whether or not it is read.
        let outputs_path = if self.data.outputs_read || agent {
            outputs::OUTPUTS_PATH
        } else {
            outputs::UNREAD_OUTPUTS_PATH
        };
        let mut env = vec![
            env_var("WORKFLOW_NAME", name),
            env_var("WORKFLOW_NAMESPACE", namespace),
            env_var("STEP_NAME", &self.step.step_name),
            env_var(outputs::OUTPUTS_ENV, outputs_path),
        ];
        if crate::data_flow::texts(self.step).any(|t| t.contains(outputs::POD_NAME)) {
            env.insert(0, pod_name_env());
        }
        if let Some(workspace) = self.workflow.spec.workspace.as_deref() {
            env.push(env_var(WORKSPACE_ENV, &workspace.mount_path));
        }
        env.push(env_var(
            fan_out::RUN_INDEX_ENV,
            &self.run_index().to_string(),
        ));
        if let Some(item) = self.item() {
            env.push(env_var(fan_out::ITEM_ENV, &outputs::item_text(&item.value)));
        }
        if let Some(exit) = self.exit {
            env.push(env_var("WORKFLOW_STATUS", exit.status.as_str()));
            env.push(env_var(
                "WORKFLOW_FAILED_STEPS",
                &exit.failed_steps.join(","),
            ));
        }
        let own = |e: &&EnvVar| !OWN_ENV.contains(&e.name.as_str());
        env.extend(self.step.env.iter().filter(own).map(|e| EnvVar {
            value: e.value.as_ref().map(|v| self.fill(v)),
            ..e.clone()
        }));
        env
    }

    /// `$WORKFLOW_COMMAND` of an interactive step: its command (`command`, filled in; a
    /// script's is `[sh]` and the script's path) and args, as one shell line.
    fn command_env(&self, command: Option<Vec<String>>) -> EnvVar {
        let args = (self.step.args.iter().flatten()).map(|a| self.fill(a));
        let words: Vec<String> = agent::step_command(command, self.kind)
            .into_iter()
            .chain(args)
            .collect();
        env_var(agent::COMMAND_ENV, &agent::shell_line(&words))
    }

    /// `$WORKFLOW_AGENT`: the agent's task, its script's and inputs' references filled in,
    /// each output artifact's key under the store's prefix.
    fn agent_task(&self, parts: &PodParts) -> EnvVar {
        let mut task = agent::task_of(self.step, self.kind, self.data.result_read);
        task.source = task.source.map(|source| self.fill(&source));
        task.http = task.http.map(|http| http.filled(|text| self.fill(text)));
        task.resource = task
            .resource
            .map(|resource| self.resource_task(resource, parts));
        if let Some(store) = parts.store {
            let inputs = self.step.inputs.iter().flat_map(|i| &i.artifacts);
            task.inputs = (inputs.map(|input| self.input_task(input, &store.prefix))).collect();
            let outputs = self.step.outputs.iter().flat_map(|o| &o.artifacts);
            task.artifacts = (outputs.map(|output| agent::OutputTask {
                name: output.name.clone(),
                path: output.path.clone(),
                key: agent::artifact_key(&store.prefix, parts.job, &output.name),
                optional: output.optional,
            }))
            .collect();
            task.store = Some(store.task.clone());
        }
        literal_env_var(
            agent::TASK_ENV,
            &serde_json::to_string(&task).expect("a task serializes"),
        )
    }

    /// A resource step's task, its references filled in, acting in the workflow's namespace
    /// as the step's Job, the workflow the owner of what it creates when asked.
    fn resource_task(
        &self,
        task: resource_action::ResourceTask,
        parts: &PodParts,
    ) -> resource_action::ResourceTask {
        let owner = (self.step.resource.as_ref())
            .is_some_and(|r| r.set_owner_reference)
            .then(|| resource_action::Owner {
                api_version: WorkFlow::api_version(&()).into_owned(),
                kind: WorkFlow::kind(&()).into_owned(),
                name: parts.name.to_string(),
                uid: self.workflow.metadata.uid.clone().unwrap_or_default(),
            });
        resource_action::ResourceTask {
            namespace: parts.namespace.to_string(),
            job: parts.job.to_string(),
            owner,
            ..task.filled(|text| self.fill(text))
        }
    }

    /// What the agent places of `input`: the key its step reported, or, taken from a step
    /// that fans out, the key of each item's artifact under the store's `prefix`, made from the
    /// name of the item's Job the planner gave as the reference's value (as the item's agent
    /// made it).
    fn input_task(&self, input: &InputArtifact, prefix: &str) -> agent::InputTask {
        let filled = self.fill(&input.from);
        let mut task = agent::InputTask {
            name: input.name.clone(),
            path: input.path.clone(),
            ..agent::InputTask::default()
        };
        let Some(artifact) = self.fanned_output(&input.from) else {
            task.key = filled;
            return task;
        };
        // Every reference was resolved by the planner, to a JSON list of names.
        let jobs: Vec<String> = serde_json::from_str(&filled).unwrap_or_default();
        let key = |job: &String| {
            if job.is_empty() {
                String::new()
            } else {
                agent::artifact_key(prefix, job, &artifact.name)
            }
        };
        task.items = Some(jobs.iter().map(key).collect());
        task.optional = artifact.optional;
        task
    }

    /// The output artifact `from` names, when its step fans out.
    fn fanned_output(&self, from: &str) -> Option<&OutputArtifact> {
        let references = outputs::references(from.trim()).ok()?;
        let [reference] = references.as_slice() else {
            return None;
        };
        let outputs::Source::Output { step, key } = reference.source else {
            return None;
        };
        let name = key.strip_prefix(outputs::ARTIFACT_PREFIX)?;
        let source = (self.workflow.spec.containers.iter()).find(|s| s.step_name == step)?;
        let artifact = (source.outputs.iter())
            .flat_map(|o| &o.artifacts)
            .find(|a| a.name == name)?;
        fan_out::fans_out(source).then_some(artifact)
    }

    /// The store of a step with artifacts: the workflow's repository.
    ///
    /// # Errors
    /// [`JobError::NoRepository`] when the workflow has none, or one this step cannot use.
    fn store(&self, namespace: &str, workflow: &str) -> Result<Option<Store>, JobError> {
        if !agent::has_artifacts(self.step) {
            return Ok(None);
        }
        let Some(resolved) = self.repository else {
            return Err(JobError::NoRepository(format!(
                "it has artifacts and the workflow has no artifact repository: set \
                 spec.artifactRepository, create the ConfigMap {} (key repository) in namespace \
                 {namespace}, or run the operator with --artifact-repository",
                agent::REPOSITORY_CONFIGMAP
            )));
        };
        let prefix = agent::repository_prefix(&resolved.repository, namespace, workflow);
        let store = match (&resolved.repository.s3, &resolved.repository.oci) {
            (Some(s3), _) => Store {
                task: agent::StoreTask::S3(agent::S3StoreTask {
                    endpoint: s3.endpoint.clone(),
                    bucket: s3.bucket.clone(),
                    region: s3.region.clone().unwrap_or_else(|| "us-east-1".to_string()),
                    local_directory: s3.local_directory.clone(),
                }),
                prefix,
                secret: Some((s3.credentials_secret.name.clone(), agent::S3_SECRET_KEYS)),
            },
            (None, Some(oci)) => Store {
                task: agent::StoreTask::Oci(agent::OciStoreTask {
                    registry: oci.registry.clone(),
                    repository: oci.repository.clone(),
                    insecure: oci.insecure,
                }),
                prefix,
                secret: (oci.credentials_secret.as_ref())
                    .map(|secret| (secret.name.clone(), agent::OCI_SECRET_KEYS)),
            },
            (None, None) => {
                return Err(JobError::NoRepository(format!(
                    "its artifact repository ({}) names neither s3 nor oci",
                    resolved.from
                )));
            }
        };
        Ok(Some(store))
    }

    /// `text` with its `{{steps.NAME.outputs.KEY}}` and `{{item}}` references filled in. Every
    /// reference was resolved by the planner; one left is kept as written.
    fn fill(&self, text: &str) -> String {
        let inputs = self.data.inputs;
        let value = |step: &str, key: &str| {
            inputs?
                .get(&(step.to_string(), key.to_string()))
                .map(String::as_str)
        };
        let filled = outputs::substitute(text, value, self.item().map(|item| &item.value))
            .unwrap_or_else(|_| text.to_string());
        let filled = outputs::fill_retries(&filled, self.attempt);
        if !filled.contains("workflow.") && !filled.contains(outputs::POD_NAME) {
            return filled;
        }
        outputs::fill_workflow(&filled, |name| self.workflow_value(name))
    }

    /// `{{pod.name}}`, the pod's name; `{{workflow.NAME}}` as Argo gives it: `duration`,
    /// seconds since the run started;
    /// `status`, `Succeeded` or `Failed` for an exit step (`Running` before);
    /// `failures`, the failed steps as a JSON list (an exit step's).
    fn workflow_value(&self, name: &str) -> String {
        let status = self.workflow.status.as_ref();
        match name {
            // Kubernetes fills it in a command, an argument or an env value, from the variable
            // `env` adds; the agent in its task (passed literally).
            outputs::POD_NAME => agent::POD_NAME_REFERENCE.to_string(),
            "duration" => {
                let started = status.and_then(|s| s.started_at.as_ref()).map(|t| t.0);
                let seconds = started.map_or(0.0, |t| {
                    Timestamp::now().duration_since(t).as_secs_f64().max(0.0)
                });
                format!("{seconds:.6}")
            }
            "status" => match self.exit.map(|e| e.status) {
                Some(crate::lifecycle::Phase::Completed) => "Succeeded".into(),
                Some(_) => "Failed".into(),
                None => "Running".into(),
            },
            _ => self
                .exit
                .map_or_else(|| "null".into(), |e| e.failures.to_string()),
        }
    }
}

/// What a step's pod is built from besides the step.
struct PodParts<'p> {
    /// The workflow's name and namespace.
    name: &'p str,
    namespace: &'p str,
    /// The Job's name.
    job: &'p str,
    /// The agent, for a step that runs under it.
    agent: Option<&'p AgentSource>,
    /// The store, for a step with artifacts.
    store: Option<&'p Store>,
}

/// A step's artifact store: what the agent is told, the keys' prefix, and the Secret holding
/// its credentials with the keys of the two (none: anonymous).
struct Store {
    task: agent::StoreTask,
    prefix: String,
    secret: Option<(String, [&'static str; 2])>,
}

impl Store {
    /// The bucket's directory, for a repository whose objects the agent reaches as files.
    fn local_directory(&self) -> Option<&str> {
        match &self.task {
            agent::StoreTask::S3(s3) => s3.local_directory.as_deref(),
            agent::StoreTask::Oci(_) => None,
        }
    }
}

/// The store's credentials, from `secret`'s `keys` (`accessKey` and `secretKey` of a bucket,
/// `username` and `password` of a registry).
fn credentials_env((secret, keys): &(String, [&'static str; 2])) -> [EnvVar; 2] {
    let from = |name: &str, key: &str| EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    };
    [
        from(agent::ACCESS_KEY_ENV, keys[0]),
        from(agent::SECRET_KEY_ENV, keys[1]),
    ]
}

/// An HTTP step's headers from Secrets, each in the variable the agent's task names
/// (`http_call::header_env`).
fn http_header_env(step: &Step) -> Vec<EnvVar> {
    let headers = step.http.iter().flat_map(|h| h.headers.iter().enumerate());
    headers
        .filter_map(|(i, header)| {
            Some(EnvVar {
                name: http_call::header_env(i),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(header.value_from.as_ref()?.secret_key_ref.clone()),
                    ..EnvVarSource::default()
                }),
            })
        })
        .collect()
}

/// An env var whose value reaches the container byte for byte: Kubernetes expands `$(VAR)` in
/// an env value (as in a command and args) and reduces `$$` to `$` (core/v1 `EnvVar.value`:
/// "Double $$ are reduced to a single $, which allows for escaping the $(VAR_NAME) syntax";
/// the kubelet's `third_party/forked/golang/expansion`), and leaves a `$` before anything else
/// as it is, so doubling every `$` gives back the value. The agent's task holds the step's
/// script, which is a file: only its `{{...}}` are filled in.
fn literal_env_var(name: &str, value: &str) -> EnvVar {
    env_var(name, &value.replace('$', "$$"))
}

fn pod_name_env() -> EnvVar {
    EnvVar {
        name: agent::POD_NAME_ENV.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                field_path: "metadata.name".to_string(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// The agent's `emptyDir`.
fn agent_volume() -> Volume {
    Volume {
        name: agent::AGENT_VOLUME.to_string(),
        empty_dir: Some(Default::default()),
        ..Volume::default()
    }
}

/// Where the agent's `emptyDir` is mounted, in the init container that fills it and in the
/// step's container.
fn agent_mount() -> VolumeMount {
    VolumeMount {
        name: agent::AGENT_VOLUME.to_string(),
        mount_path: agent::AGENT_DIR.to_string(),
        ..VolumeMount::default()
    }
}

/// The directory of a bucket the agent reaches as files (`localDirectory`), as a `hostPath`
/// volume: the directory must exist on the node.
fn store_volume(store: &Store) -> Option<Volume> {
    Some(Volume {
        name: agent::STORE_VOLUME.to_string(),
        host_path: Some(HostPathVolumeSource {
            path: store.local_directory()?.to_string(),
            type_: Some("Directory".to_string()),
        }),
        ..Volume::default()
    })
}

/// Where [`store_volume`] is mounted: at its own path, which the agent is told.
fn store_mount(store: &Store) -> Option<VolumeMount> {
    Some(VolumeMount {
        name: agent::STORE_VOLUME.to_string(),
        mount_path: store.local_directory()?.to_string(),
        ..VolumeMount::default()
    })
}

/// The workspace claim of run `run` of `workflow` (`spec.workspace`): its template's spec, the
/// operator's labels, owned by the workflow (the garbage collector deletes it with it); `None`
/// without a workspace.
///
/// # Errors
/// [`JobError::MissingMetadata`] when the workflow lacks a name, namespace or uid.
pub fn build_workspace_claim(
    workflow: &WorkFlow,
    run: &str,
) -> Result<Option<PersistentVolumeClaim>, JobError> {
    let Some(workspace) = workflow.spec.workspace.as_deref() else {
        return Ok(None);
    };
    let name = workflow
        .metadata
        .name
        .as_deref()
        .ok_or(JobError::MissingMetadata("name"))?;
    let namespace = workflow
        .metadata
        .namespace
        .as_deref()
        .ok_or(JobError::MissingMetadata("namespace"))?;
    let owner = workflow
        .controller_owner_ref(&())
        .ok_or(JobError::MissingMetadata("uid"))?;
    Ok(Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(names::workspace_claim_name(name, run)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (LABEL_WORKFLOW.to_string(), names::label_value(name)),
                (LABEL_RUN.to_string(), run.to_string()),
            ])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(workspace.volume_claim_template.spec.clone()),
        status: None,
    }))
}

/// A Job as the planner sees it, or `None` when it lacks the step annotation (not built by
/// [`build_job`]). A Job with the annotation [`ANNOTATION_TIMED_OUT`] is `JobState::TimedOut`
/// whatever its conditions say: still stopping, failed by the deadline [`time_out_patch`] set, or
/// complete in the instant before it landed; the operator's verdict stands. `now` stands in for
/// the start of a Job with neither `status.startTime` nor `metadata.creationTimestamp` (one not
/// read from the API server).
pub fn observe_job(job: &JobSummary, now: Timestamp) -> Option<ObservedJob> {
    let step = job.step.clone()?;
    let run = job.run.clone().unwrap_or_default();
    let status = job.status.as_ref();
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let start_time = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let resumed = (job.resumed.as_deref()).and_then(|at| at.parse::<Timestamp>().ok());
    let state = if let Some(why) = &job.timed_out {
        JobState::TimedOut { why: why.clone() }
    } else if let Some(why) = &job.cannot_start {
        JobState::CannotStart { why: why.clone() }
    } else if resumed.is_some() {
        // A suspend step's Job, resumed: the annotation is its record, the Job never ends.
        JobState::Succeeded
    } else {
        match status.and_then(|s| s.ended.as_ref()) {
            Some(JobEnd::Complete) => JobState::Succeeded,
            Some(JobEnd::Failed(failure)) => JobState::Failed {
                reason: failure
                    .reason
                    .clone()
                    .unwrap_or_else(|| "Failed".to_string()),
                message: failure.message.clone().unwrap_or_default(),
                exit_code: None,
            },
            None => JobState::Active {
                since: start_time.unwrap_or(created),
            },
        }
    };
    let finished_at = status.and_then(|s| match &s.ended {
        Some(JobEnd::Failed(failure)) => failure.at.as_ref().or(s.completion_time.as_ref()),
        Some(JobEnd::Complete) => s.completion_time.as_ref(),
        None => None,
    });
    let pods = status.map(|s| s.pods).unwrap_or_default();
    let spec = job.spec.as_ref();
    Some(ObservedJob {
        name: job.name_any(),
        step,
        run,
        retry: job.retry,
        run_index: job.run_index,
        item: job.item,
        attempt: job.attempt,
        cache_key: job.cache_key.clone(),
        state,
        deleting: job.metadata.deletion_timestamp.is_some(),
        stopped: job.stopped.is_some(),
        active_deadline_seconds: spec.and_then(|s| s.active_deadline_seconds),
        created,
        start_time,
        finished_at: finished_at.map(|t| t.0).or(resumed),
        attempts: pods.attempts(),
        pod_started: pods.started(),
        daemoned: (job.daemoned.as_deref()).and_then(|ip| ip.parse().ok()),
        ready: pods.ready > 0,
        suspended: spec.and_then(|s| s.suspend) == Some(true),
        suspended_at: status.and_then(|s| s.suspended_at.as_ref()).map(|t| t.0),
        start_failure: None,
        outputs: None,
    })
}

/// Whether Kueue admits each step's Job on its own (`queueName`, `queueScope` absent or
/// `Step`).
pub fn per_step_kueue(spec: &crate::crd::WorkFlowSpec) -> bool {
    spec.queue_name.is_some() && !crate::kueue::workflow_scoped(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use crate::outputs::Inputs;
    use crate::plan::{DEADLINE_EXCEEDED, POD_DEADLINE_SLACK_SECONDS};
    use crate::testing::one_step_of_each_kind;

    fn container(job: &Job) -> &Container {
        &job.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
    }

    fn env_of(job: &Job) -> Vec<(String, String)> {
        container(job)
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    }

    /// The Job builder of `step` of `wf` in run `r1`, of the kind its fields make it.
    /// The agent the tests' steps run under.
    fn agent_source() -> AgentSource {
        AgentSource {
            image: "operator:1".into(),
            path: "/bin/workflow-agent".into(),
        }
    }

    fn step_job<'a>(wf: &'a WorkFlow, step: &'a Step) -> StepJob<'a> {
        StepJob::new(wf, step, StepKind::of(&wf.spec, step), "r1")
    }

    #[test]
    fn bug7_workflow_without_labels_builds_jobs() {
        let wf = WorkFlow::test("nolabels").step("a", &[]).build();
        assert!(wf.metadata.labels.is_none());
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let labels = job.metadata.labels.unwrap();
        assert_eq!(
            labels.get(LABEL_WORKFLOW).map(String::as_str),
            Some("nolabels")
        );
        assert_eq!(labels.get(LABEL_STEP).map(String::as_str), Some("a"));
        assert_eq!(labels.get(LABEL_RUN).map(String::as_str), Some("r1"));
    }

    #[test]
    fn bug7_user_labels_never_override_the_operators() {
        let wf = WorkFlow::test("wf")
            .label("team", "a")
            .label(LABEL_STEP, "evil")
            .label(LABEL_RUN, "evil")
            .step("a", &[])
            .build();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let labels = job.metadata.labels.unwrap();
        assert_eq!(labels[LABEL_STEP], "a");
        assert_eq!(labels[LABEL_RUN], "r1");
        assert_eq!(labels["team"], "a");
        assert!(!job_labels_for_relabel(&wf).contains_key(LABEL_STEP));
    }

    #[test]
    fn a_sharded_workflows_jobs_and_pods_carry_its_shard() {
        let wf = WorkFlow::test("wf")
            .label(LABEL_SHARD, "5")
            .step("a", &[])
            .build();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        assert_eq!(job.metadata.labels.unwrap()[LABEL_SHARD], "5");
        let pod = job.spec.unwrap().template.metadata.unwrap();
        assert_eq!(pod.labels.unwrap()[LABEL_SHARD], "5");
    }

    #[test]
    fn job_has_owner_names_policy_and_limits() {
        let wf = WorkFlow::test("wf")
            .max_step_timeout(30)
            .step("Fetch_Data", &[])
            .retries(2)
            .step("b", &[])
            .timeout(-1)
            .build();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        assert_eq!(
            job.metadata.name.as_deref(),
            Some(names::job_name("wf", "Fetch_Data", "r1").as_str())
        );
        assert_eq!(job.metadata.namespace.as_deref(), Some("default"));
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("WorkFlow", "wf")
        );
        assert_eq!(owner.api_version, "workflow.crd.com/v1");
        assert_eq!(Some(owner.uid.as_str()), wf.metadata.uid.as_deref());
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        let annotations = job.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[ANNOTATION_STEP], "Fetch_Data");
        assert_eq!(annotations[ANNOTATION_WORKFLOW], "wf");
        let spec = job.spec.as_ref().unwrap();
        let pod_annotations = (spec.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .unwrap();
        assert_eq!(pod_annotations[ANNOTATION_STEP], "Fetch_Data");
        assert_eq!(pod_annotations[ANNOTATION_WORKFLOW], "wf");
        assert_eq!(spec.backoff_limit, Some(2));
        assert_eq!(
            spec.active_deadline_seconds,
            Some(30 + POD_DEADLINE_SLACK_SECONDS)
        );
        assert_eq!(
            spec.template
                .spec
                .as_ref()
                .unwrap()
                .restart_policy
                .as_deref(),
            Some("Never")
        );
        assert!(
            names::is_dns_label(&container(&job).name),
            "{}",
            container(&job).name
        );

        let unlimited = build_job(&wf, &wf.spec.containers[1], "r1").unwrap();
        let spec = unlimited.spec.unwrap();
        assert_eq!(
            (spec.active_deadline_seconds, spec.backoff_limit),
            (None, Some(0))
        );
    }

    #[test]
    fn job_runs_the_steps_container_with_the_operators_env() {
        let wf = WorkFlow::test("wf")
            .step("a", &[])
            .image("alpine:3")
            .command(&["sh", "-c"])
            .args(&["echo $GREETING"])
            .env("GREETING", "hi")
            .env("STEP_NAME", "spoofed")
            .build();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let c = container(&job);
        assert_eq!(c.image.as_deref(), Some("alpine:3"));
        assert_eq!(
            c.command.as_deref(),
            Some(&["sh".to_string(), "-c".to_string()][..])
        );
        assert_eq!(c.args.as_deref(), Some(&["echo $GREETING".to_string()][..]));
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            env_of(&job),
            pairs(&[
                ("WORKFLOW_NAME", "wf"),
                ("WORKFLOW_NAMESPACE", "default"),
                ("STEP_NAME", "a"),
                ("WORKFLOW_OUTPUTS", "/dev/null"),
                ("WORKFLOW_RUN_INDEX", "0"),
                ("GREETING", "hi"),
            ])
        );
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
    }

    #[test]
    fn a_workspace_is_one_claim_per_run_owned_by_the_workflow_and_mounted_in_every_step() {
        let wf = WorkFlow::test("wf")
            .workspace("/data")
            .step("a", &[])
            .step("b", &["a"])
            .build();
        let claim = build_workspace_claim(&wf, "r1").unwrap().unwrap();
        let claim_name = claim.metadata.name.clone().unwrap();
        assert_eq!(claim_name, names::workspace_claim_name("wf", "r1"));
        assert_ne!(claim_name, names::workspace_claim_name("wf", "r2"));
        let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("WorkFlow", Some(true))
        );
        for step in &wf.spec.containers {
            let job = build_job(&wf, step, "r1").unwrap();
            let pod = job.spec.unwrap().template.spec.unwrap();
            let volume = &pod.volumes.as_ref().unwrap()[0];
            assert_eq!(
                volume
                    .persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.as_str()),
                Some(claim_name.as_str())
            );
            let container = &pod.containers[0];
            let mount = &container.volume_mounts.as_ref().unwrap()[0];
            assert_eq!(
                (mount.name.as_str(), mount.mount_path.as_str()),
                (volume.name.as_str(), "/data")
            );
            assert!(
                container
                    .env
                    .as_ref()
                    .unwrap()
                    .iter()
                    .any(|e| e.name == "WORKFLOW_WORKSPACE" && e.value.as_deref() == Some("/data"))
            );
        }
        let plain = WorkFlow::test("wf").step("a", &[]).build();
        assert!(build_workspace_claim(&plain, "r1").unwrap().is_none());
    }

    #[test]
    fn the_outputs_a_step_names_are_substituted_in_its_command_args_and_env() {
        let wf = WorkFlow::test("wf")
            .step("a", &[])
            .step("b", &["a"])
            .command(&["echo", "n={{steps.a.outputs.n}}"])
            .args(&["{{ steps.a.outputs.n }}", "plain"])
            .env("URL", "http://{{steps.a.outputs.host}}/")
            .build();
        let inputs: Inputs = [
            (("a".to_string(), "n".to_string()), "3".to_string()),
            (("a".to_string(), "host".to_string()), "db".to_string()),
        ]
        .into();
        let data = StepData {
            inputs: Some(&inputs),
            ..StepData::default()
        };
        let job = step_job(&wf, &wf.spec.containers[1])
            .data(data)
            .build()
            .unwrap();
        let c = container(&job);
        assert_eq!(
            c.command.as_deref(),
            Some(&["echo".to_string(), "n=3".to_string()][..])
        );
        assert_eq!(
            c.args.as_deref(),
            Some(&["3".to_string(), "plain".to_string()][..])
        );
        assert!(env_of(&job).contains(&("URL".to_string(), "http://db/".to_string())));
        // `a`'s outputs are read: its $WORKFLOW_OUTPUTS is its termination message.
        let read = StepData {
            outputs_read: true,
            ..StepData::default()
        };
        let a = step_job(&wf, &wf.spec.containers[0])
            .data(read)
            .build()
            .unwrap();
        assert!(env_of(&a).contains(&(
            "WORKFLOW_OUTPUTS".to_string(),
            "/dev/termination-log".to_string()
        )));
    }

    #[test]
    fn a_step_under_the_agent_gets_it_copied_in_and_runs_through_it() {
        let mut wf = WorkFlow::test("wf").step("a", &[]).build();
        let step = &mut wf.spec.containers[0];
        step.source = Some(Box::new("echo {{ retries }}".into()));
        step.command = Some(vec!["bash".into()]);
        step.sidecars = Some(Box::new(vec![Container {
            name: "db".into(),
            image: Some("redis".into()),
            ..Container::default()
        }]));
        let step = &wf.spec.containers[0];
        assert_eq!(
            step_job(&wf, step).build(),
            Err(JobError::NoAgent("a".into()))
        );
        let source = agent_source();
        let job = step_job(&wf, step).agent(&source).build().unwrap();
        let pod = job.spec.unwrap().template.spec.unwrap();
        let init = pod.init_containers.unwrap();
        assert_eq!(init[0].image.as_deref(), Some("operator:1"));
        assert_eq!(
            init[0].command.as_deref().unwrap(),
            ["/bin/workflow-agent", "install", agent::AGENT_PATH]
        );
        assert_eq!(
            init[0].termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        assert_eq!(init[1].name, "db");
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        let main = &pod.containers[0];
        assert_eq!(
            main.command.as_deref().unwrap(),
            [agent::AGENT_PATH, "run", "--", "bash", agent::SCRIPT_PATH]
        );
        let env: Vec<_> = main.env.iter().flatten().collect();
        let task = env.iter().find(|e| e.name == agent::TASK_ENV).unwrap();
        assert_eq!(
            task.value.as_deref(),
            Some(r#"{"source":"echo 0"}"#),
            "the script's references filled in"
        );
        assert!(
            main.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == agent::AGENT_DIR)
        );
        assert!(pod.volumes.iter().flatten().any(|v| v.empty_dir.is_some()));
        // A plain step is not wrapped, agent or not.
        let plain = WorkFlow::test("wf").step("a", &[]).build();
        let job = step_job(&plain, &plain.spec.containers[0])
            .agent(&source)
            .build()
            .unwrap();
        let pod = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.init_containers, None);
        assert_eq!(pod.containers[0].command.as_deref().unwrap()[0], "sh");
    }

    #[test]
    fn each_kind_of_step_runs_its_command_as_its_kind_says() {
        let source = agent_source();
        let mut wf = one_step_of_each_kind("print(1)");
        for step in &mut wf.spec.containers {
            step.command = Some(vec!["python3".into()]);
        }
        // The main container's command, `$WORKFLOW_COMMAND` and `$WORKFLOW_AGENT`.
        let built = |i: usize| {
            let job = step_job(&wf, &wf.spec.containers[i]).agent(&source).build();
            let main = job.unwrap().spec.unwrap().template.spec.unwrap().containers[0].clone();
            let env = |name: &str| {
                let found = main.env.iter().flatten().find(|e| e.name == name);
                found.and_then(|e| e.value.clone())
            };
            let command = main.command.clone().unwrap();
            (command, env(agent::COMMAND_ENV), env(agent::TASK_ENV))
        };
        let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let agent_runs = |w: &[&str]| words(&[&[agent::AGENT_PATH, "run", "--"], w].concat());
        assert_eq!(built(0), (words(&["python3"]), None, None), "no agent");
        assert_eq!(
            built(1),
            (
                agent_runs(&["python3", agent::SCRIPT_PATH]),
                None,
                Some(r#"{"source":"print(1)"}"#.into())
            )
        );
        assert_eq!(
            built(2),
            (
                agent_runs(&["python3"]),
                Some("python3".into()),
                Some(r#"{"interactive":true}"#.into())
            )
        );
        assert_eq!(
            built(3),
            (
                agent_runs(&["python3", agent::SCRIPT_PATH]),
                Some(format!("python3 {}", agent::SCRIPT_PATH)),
                Some(r#"{"source":"print(1)","interactive":true}"#.into())
            )
        );
    }

    #[test]
    fn an_http_step_runs_the_agent_s_request_in_the_agent_s_image_its_secrets_from_the_pod() {
        let source = agent_source();
        let mut wf = WorkFlow::test("wf")
            .step("a", &[])
            .step("b", &["a"])
            .build();
        let step = &mut wf.spec.containers[1];
        step.image = String::new();
        step.command = None;
        step.http = Some(Box::new(
            serde_yaml::from_str(
                r#"
url: "http://svc/{{steps.a.outputs.id}}"
method: POST
body: hello
headers:
  - {name: X-Kind, value: test}
  - {name: Authorization, valueFrom: {secretKeyRef: {name: token, key: t}}}
"#,
            )
            .unwrap(),
        ));
        let step = &wf.spec.containers[1];
        assert_eq!(StepKind::of(&wf.spec, step), StepKind::Http);
        let inputs: Inputs = [(("a".to_string(), "id".to_string()), "42".to_string())].into();
        let data = StepData {
            inputs: Some(&inputs),
            ..StepData::default()
        };
        assert_eq!(
            step_job(&wf, step).data(data.clone()).build(),
            Err(JobError::NoAgent("b".into()))
        );
        let job = step_job(&wf, step).agent(&source).data(data).build();
        let pod = job.unwrap().spec.unwrap().template.spec.unwrap();
        let main = &pod.containers[0];
        assert_eq!(main.image.as_deref(), Some("operator:1"));
        assert_eq!(
            main.command.as_deref().unwrap(),
            [agent::AGENT_PATH, agent::HTTP_VERB]
        );
        assert_eq!(
            pod.init_containers.unwrap()[0].image.as_deref(),
            Some("operator:1")
        );
        let env: Vec<_> = main.env.iter().flatten().collect();
        let task = env.iter().find(|e| e.name == agent::TASK_ENV).unwrap();
        assert_eq!(
            task.value.as_deref(),
            Some(
                r#"{"http":{"url":"http://svc/42","method":"POST","headers":[{"name":"X-Kind","value":"test"},{"name":"Authorization","env":"WORKFLOW_HTTP_HEADER_1"}],"body":"hello","timeoutSeconds":30}}"#
            ),
            "the references filled in, the Secret's value left to the pod"
        );
        let secret = env
            .iter()
            .find(|e| e.name == "WORKFLOW_HTTP_HEADER_1")
            .and_then(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
            .unwrap();
        assert_eq!((secret.name.as_str(), secret.key.as_str()), ("token", "t"));
        assert!(env.iter().all(|e| e.name != "WORKFLOW_HTTP_HEADER_0"));
    }

    #[test]
    fn a_resource_step_acts_from_the_agent_s_image_as_its_job_owned_by_the_workflow() {
        let source = agent_source();
        let mut wf = WorkFlow::test("wf")
            .step("a", &[])
            .step("b", &["a"])
            .build();
        let step = &mut wf.spec.containers[1];
        step.image = String::new();
        step.command = None;
        step.resource = Some(Box::new(
            serde_yaml::from_str(
                "{action: delete, setOwnerReference: true, flags: [cm, 'c-{{steps.a.outputs.id}}']}",
            )
            .unwrap(),
        ));
        let step = &wf.spec.containers[1];
        assert_eq!(StepKind::of(&wf.spec, step), StepKind::Resource);
        let inputs: Inputs = [(("a".to_string(), "id".to_string()), "42".to_string())].into();
        let data = StepData {
            inputs: Some(&inputs),
            ..StepData::default()
        };
        let job = step_job(&wf, step)
            .agent(&source)
            .data(data)
            .build()
            .unwrap();
        let job_name = job.metadata.name.clone().unwrap();
        let pod = job.spec.unwrap().template.spec.unwrap();
        let main = &pod.containers[0];
        assert_eq!(main.image.as_deref(), Some("operator:1"));
        assert_eq!(
            main.command.as_deref().unwrap(),
            [agent::AGENT_PATH, agent::RESOURCE_VERB]
        );
        let env: Vec<_> = main.env.iter().flatten().collect();
        let task = env.iter().find(|e| e.name == agent::TASK_ENV).unwrap();
        let task: agent::Task = serde_json::from_str(task.value.as_deref().unwrap()).unwrap();
        let resource = task.resource.unwrap();
        assert_eq!(resource.flags, ["cm", "c-42"], "the references filled in");
        assert_eq!(
            (resource.namespace.as_str(), resource.job),
            ("default", job_name)
        );
        let owner = resource.owner.unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("WorkFlow", "wf")
        );
        assert_eq!(Some(owner.uid), wf.metadata.uid);
    }

    #[test]
    fn job_carries_the_steps_container_fields_and_the_pod_template() {
        let manifest = r#"
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: wf, namespace: default, uid: u1}
spec:
  podTemplate:
    metadata: {labels: {team: a, workflow.crd.com/step: hijack}, annotations: {note: x}}
    serviceAccountName: runner
    volumes: [{name: config, configMap: {name: settings}}]
    imagePullSecrets: [{name: registry}]
    nodeSelector: {pool: batch}
    tolerations: [{key: batch, operator: Exists}]
    priorityClassName: low
  containers:
    - stepName: a
      image: busybox
      env:
        - {name: PLAIN, value: v}
        - name: SECRET
          valueFrom: {secretKeyRef: {name: creds, key: password}}
      envFrom: [{configMapRef: {name: settings}, prefix: CFG_}]
      volumeMounts: [{name: config, mountPath: /etc/settings, readOnly: true}]
      workingDir: /work
      imagePullPolicy: IfNotPresent
      securityContext: {runAsNonRoot: true}
"#;
        let wf: WorkFlow = serde_yaml::from_str(manifest).unwrap();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let template = &job.spec.as_ref().unwrap().template;
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["team"], "a");
        assert_eq!(labels[LABEL_STEP], "a", "the operator's labels win");
        let pod = template.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("runner"));
        assert_eq!(pod.volumes.as_ref().unwrap()[0].name, "config");
        assert_eq!(pod.image_pull_secrets.as_ref().unwrap()[0].name, "registry");
        assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "batch");
        assert_eq!(pod.tolerations.as_ref().unwrap().len(), 1);
        assert_eq!(pod.priority_class_name.as_deref(), Some("low"));
        let c = container(&job);
        let secret = c.env.as_ref().unwrap().iter().find(|e| e.name == "SECRET");
        let key_ref = secret.and_then(|e| e.value_from.as_ref()?.secret_key_ref.as_ref());
        assert_eq!(key_ref.map(|r| r.key.as_str()), Some("password"));
        assert_eq!(
            c.env_from.as_ref().unwrap()[0].prefix.as_deref(),
            Some("CFG_")
        );
        assert_eq!(
            c.volume_mounts.as_ref().unwrap()[0].mount_path,
            "/etc/settings"
        );
        assert_eq!(c.working_dir.as_deref(), Some("/work"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.security_context.as_ref().unwrap().run_as_non_root,
            Some(true)
        );
    }

    #[test]
    fn job_is_not_built_without_a_uid() {
        let mut wf = WorkFlow::test("wf").step("a", &[]).build();
        wf.metadata.uid = None;
        assert_eq!(
            build_job(&wf, &wf.spec.containers[0], "r").unwrap_err(),
            JobError::MissingMetadata("uid")
        );
    }

    #[test]
    fn long_names_give_valid_labels_and_exact_annotations() {
        let step = "Step_".repeat(60);
        let wf = WorkFlow::test("wf").step(&step, &[]).build();
        let job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let labels = job.metadata.labels.as_ref().unwrap();
        assert!(names::is_label_value(&labels[LABEL_STEP]));
        assert_eq!(
            job.metadata.annotations.as_ref().unwrap()[ANNOTATION_STEP],
            step
        );
        assert!(names::is_dns_label(job.metadata.name.as_deref().unwrap()));
    }

    #[test]
    fn relabel_patch_adds_and_updates_only_what_differs() {
        let wf = WorkFlow::test("wf")
            .label("team", "b")
            .label("tier", "x")
            .step("a", &[])
            .build();
        let current = BTreeMap::from([
            ("team".to_string(), "a".to_string()),
            ("tier".to_string(), "x".to_string()),
            (LABEL_STEP.to_string(), "a".to_string()),
        ]);
        let patch = relabel_patch(&wf, &current).unwrap();
        assert_eq!(
            patch,
            serde_json::json!({"metadata": {"labels": {"team": "b"}}})
        );
        let mut updated = current;
        updated.insert("team".into(), "b".into());
        assert_eq!(relabel_patch(&wf, &updated), None);
    }

    fn finished(type_: &str, reason: Option<&str>) -> Job {
        let wf = WorkFlow::test("wf").step("a", &[]).build();
        let mut job = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        job.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: type_.to_string(),
                status: "True".to_string(),
                reason: reason.map(str::to_string),
                message: Some("it broke".to_string()),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        job
    }

    #[test]
    fn observe_job_reads_state_step_and_run() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let started: Timestamp = "2025-12-31T23:59:00Z".parse().unwrap();
        let cases = [
            (finished("Complete", None), JobState::Succeeded),
            (
                finished("Failed", Some(DEADLINE_EXCEEDED)),
                JobState::Failed {
                    reason: DEADLINE_EXCEEDED.into(),
                    message: "it broke".into(),
                    exit_code: None,
                },
            ),
            (
                {
                    let mut job = finished("SuccessCriteriaMet", None);
                    job.status.as_mut().unwrap().start_time = Some(Time(started));
                    job
                },
                JobState::Active { since: started },
            ),
        ];
        for (job, want) in cases {
            let seen = observe_job(&job.into(), now).unwrap();
            assert_eq!(seen.state, want);
            assert_eq!((seen.step.as_str(), seen.run.as_str()), ("a", "r1"));
            // The step's timeout (60 s), and the slack of the backstop.
            assert_eq!(seen.active_deadline_seconds, Some(120));
            assert!(!seen.deleting);
        }
        let mut foreign = finished("Complete", None);
        foreign.metadata.annotations = None;
        assert_eq!(observe_job(&foreign.into(), now), None);
    }

    /// The Job after the handler's merge patch, as the API server computes it.
    fn patched(job: &Job, patch: &serde_json::Value) -> Job {
        let mut value = serde_json::to_value(job).unwrap();
        json_patch::merge(&mut value, patch);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_timed_out_job_is_stopped_by_its_deadline_and_stays_timed_out_whatever_it_does_next() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let why = "running for 6s, longer than its timeout of 5s";
        let patch = time_out_patch(why);
        let wf = WorkFlow::test("wf").step("a", &[]).build();
        let running = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let stopped = patched(&running, &patch);
        assert_eq!(
            patched(&stopped, &patch),
            stopped,
            "applying it twice changes nothing"
        );
        let deadline = stopped.spec.as_ref().unwrap().active_deadline_seconds;
        assert!(
            deadline.is_some_and(|d| (1..60).contains(&d)),
            "a deadline Kubernetes accepts, shorter than the 60s timeout the step ran past: {deadline:?}"
        );
        let want = JobState::TimedOut { why: why.into() };
        // Still stopping, failed by the deadline as the patch asks, or complete in the instant
        // before the patch landed: the step timed out all the same.
        for job in [
            running,
            finished("Failed", Some(DEADLINE_EXCEEDED)),
            finished("Complete", None),
        ] {
            let seen = observe_job(&patched(&job, &patch).into(), now).unwrap();
            assert_eq!(seen.state, want, "{:?}", job.status);
            assert_eq!(seen.step, "a");
        }
    }

    #[test]
    fn a_job_the_workflow_stopped_reads_as_stopped_whatever_it_does_next() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let why = "spec.shutdown: Terminate";
        let wf = WorkFlow::test("wf").step("a", &[]).build();
        let running = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        assert!(!observe_job(&running.clone().into(), now).unwrap().stopped);
        for patch in [stop_mark(why), stop_patch(why)] {
            let stopped = patched(&running, &patch);
            assert_eq!(patched(&stopped, &patch), stopped, "idempotent");
            for job in [
                running.clone(),
                finished("Failed", Some("BackoffLimitExceeded")),
                finished("Failed", Some(DEADLINE_EXCEEDED)),
            ] {
                let seen = observe_job(&patched(&job, &patch).into(), now).unwrap();
                assert!(seen.stopped, "{:?}", job.status);
            }
        }
        let deadline = |patch| {
            patched(&running, &patch)
                .spec
                .unwrap()
                .active_deadline_seconds
        };
        assert_eq!(deadline(stop_patch(why)), Some(1));
        assert_eq!(
            deadline(stop_mark(why)),
            running.spec.as_ref().unwrap().active_deadline_seconds,
            "the mark alone leaves the Job's deadline: its pod is stopped instead"
        );
    }

    #[test]
    fn a_job_whose_pod_could_not_start_is_stopped_and_stays_failed_for_that_cause() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let why = "CreateContainerConfigError: secret \"creds\" not found";
        let patch = cannot_start_patch(why);
        let wf = WorkFlow::test("wf").step("a", &[]).build();
        let pending = build_job(&wf, &wf.spec.containers[0], "r1").unwrap();
        let stopped = patched(&pending, &patch);
        assert_eq!(
            patched(&stopped, &patch),
            stopped,
            "applying it twice changes nothing"
        );
        assert_eq!(
            stopped.spec.as_ref().unwrap().active_deadline_seconds,
            Some(1)
        );
        for job in [pending, finished("Failed", Some(DEADLINE_EXCEEDED))] {
            let seen = observe_job(&patched(&job, &patch).into(), now).unwrap();
            assert_eq!(
                seen.state,
                JobState::CannotStart { why: why.into() },
                "{:?}",
                job.status
            );
        }
    }

    #[test]
    fn observe_job_reads_when_the_job_was_created_and_whether_its_pod_started() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut job = finished("SuccessCriteriaMet", None);
        job.metadata.creation_timestamp = Some(Time(created));
        let status = job.status.as_mut().unwrap();
        status.active = Some(1);
        let seen = observe_job(&job.clone().into(), now).unwrap();
        assert_eq!(
            (seen.created, seen.pod_started, seen.attempts),
            (created, false, 1)
        );
        assert_eq!(
            seen.start_deadline(5),
            Some("2026-01-01T00:00:05Z".parse().unwrap())
        );
        job.status.as_mut().unwrap().ready = Some(1);
        let seen = observe_job(&job.into(), now).unwrap();
        assert!(seen.pod_started);
        assert_eq!(
            seen.start_deadline(5),
            None,
            "a started pod has no start deadline"
        );
    }

    #[test]
    fn a_step_taking_the_artifact_of_a_step_that_fans_out_gets_each_items_key() {
        let wf: WorkFlow = serde_yaml::from_str(
            r#"
metadata: {name: wf, namespace: ns, uid: u1}
spec:
  containers:
    - stepName: build
      image: alpine
      withItems: [a, b, c]
      command: [make]
      outputs: {artifacts: [{name: app, path: /out/app, optional: true}]}
    - stepName: join
      image: alpine
      dependsOn: [build]
      command: [ls]
      inputs:
        artifacts: [{name: app, path: /in/app, from: "{{steps.build.outputs.artifacts.app}}"}]
"#,
        )
        .unwrap();
        let repository: ResolvedRepository = serde_yaml::from_str(
            "{from: spec, repository: {s3: {endpoint: 'http://s3', bucket: b, \
             credentialsSecret: {name: creds}}}}",
        )
        .unwrap();
        let source = agent_source();
        // What the planner gives: each item's succeeded Job, none for item 1.
        let inputs: Inputs = [(
            ("build".to_string(), "artifacts.app".to_string()),
            r#"["wf-build-0","","wf-build-2"]"#.to_string(),
        )]
        .into();
        let job = step_job(&wf, &wf.spec.containers[1])
            .agent(&source)
            .repository(Some(&repository))
            .data(StepData {
                inputs: Some(&inputs),
                ..StepData::default()
            })
            .build()
            .unwrap();
        let pod = job.spec.unwrap().template.spec.unwrap();
        let env = pod.containers[0].env.iter().flatten();
        let task = env.into_iter().find(|e| e.name == agent::TASK_ENV).unwrap();
        let task: agent::Task = serde_json::from_str(task.value.as_deref().unwrap()).unwrap();
        let input = &task.inputs[0];
        assert_eq!((input.path.as_str(), input.key.as_str()), ("/in/app", ""));
        assert_eq!(
            input.items.as_deref().unwrap(),
            ["ns/wf/wf-build-0/app.tgz", "", "ns/wf/wf-build-2/app.tgz"]
        );
        assert!(input.optional);
    }

    /// A repository whose objects the agent reaches as files: its directory mounted, at its own
    /// path, in a step with artifacts, and in no other.
    #[test]
    fn a_repositorys_local_directory_is_mounted_at_its_path_in_steps_with_artifacts() {
        let wf: WorkFlow = serde_yaml::from_str(
            r#"
metadata: {name: wf, namespace: ns, uid: u1}
spec:
  containers:
    - stepName: build
      image: alpine
      command: [make]
      outputs: {artifacts: [{name: app, path: /out/app}]}
    - stepName: plain
      image: alpine
      command: [ls]
"#,
        )
        .unwrap();
        let repository: ResolvedRepository = serde_yaml::from_str(
            "{from: spec, repository: {s3: {endpoint: 'http://s3', bucket: b, \
             credentialsSecret: {name: creds}, localDirectory: /srv/store}}}",
        )
        .unwrap();
        let source = agent_source();
        let pod = |step: &Step| {
            let job = step_job(&wf, step)
                .agent(&source)
                .repository(Some(&repository))
                .build()
                .unwrap();
            job.spec.unwrap().template.spec.unwrap()
        };
        let build = pod(&wf.spec.containers[0]);
        let volume = (build.volumes.iter().flatten())
            .find(|v| v.name == agent::STORE_VOLUME)
            .unwrap();
        let host = volume.host_path.as_ref().unwrap();
        assert_eq!(
            (host.path.as_str(), host.type_.as_deref()),
            ("/srv/store", Some("Directory"))
        );
        let mounts = build.containers[0].volume_mounts.iter().flatten();
        let mount = mounts
            .into_iter()
            .find(|m| m.name == agent::STORE_VOLUME)
            .unwrap();
        assert_eq!(mount.mount_path, "/srv/store");
        let plain = pod(&wf.spec.containers[1]);
        assert!(
            !(plain.volumes.iter().flatten()).any(|v| v.name == agent::STORE_VOLUME),
            "a step without artifacts: {plain:?}"
        );
    }
}
