//! Fixture builders for tests: `WorkFlow::test("name").step("a", &[]).step("b", &["a"])...`,
//! steps, and observed Jobs for the planner.
//!
//! A normal public module (not `cfg(test)`) so the integration tests in `tests/` and the
//! benchmarks can use it too. Not used by the operator itself.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use k8s_openapi::api::core::v1::EnvVar;

use super::crd::{
    DEFAULT_MAX_STEP_TIMEOUT, PodCleanup, Rule, RuleAction, Shutdown, Step, WorkFlow, WorkFlowSpec,
    WorkFlowStatus,
};
use super::names;
use super::plan::{Action, JobState, ObservedJob, Plan};

/// The image of test steps.
pub const TEST_IMAGE: &str = "busybox:1.36";

/// The steps whose Jobs `plan` creates, in order.
pub fn creates(plan: &Plan) -> Vec<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { step, .. } => Some(step.as_str()),
            _ => None,
        })
        .collect()
}

/// A workflow of one step of each kind, in `StepKind`'s order: `container`, `script` (running
/// `source`), `shell` (interactive) and `notebook` (an interactive script running `source`).
pub fn one_step_of_each_kind(source: &str) -> WorkFlow {
    let mut wf = WorkFlow::test("wf")
        .step("container", &[])
        .step("script", &[])
        .step("shell", &[])
        .interactive()
        .step("notebook", &[])
        .interactive()
        .build();
    for i in [1, 3] {
        wf.spec.containers[i].source = Some(Box::new(source.into()));
    }
    wf
}

/// A step running `sh -c "echo <name>"` in [`TEST_IMAGE`] after `depends_on`.
pub fn step(name: &str, depends_on: &[&str]) -> Step {
    Step {
        step_name: name.to_string(),
        image: TEST_IMAGE.to_string(),
        command: Some(vec!["sh".into(), "-c".into(), format!("echo {name}")]),
        depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
        args: None,
        env: Vec::new(),
        resources: None,
        timeout: None,
        retries: None,
        continue_on: None,
        retry_strategy: None,
        synchronization: None,
        cache: None,
        env_from: Vec::new(),
        volume_mounts: Vec::new(),
        working_dir: None,
        image_pull_policy: None,
        security_context: None,
        when: None,
        with_items: None,
        with_param: None,
        with_sequence: None,
        template: None,
        template_ref: None,
        arguments: None,
        source: None,
        outputs: None,
        inputs: None,
        init_containers: None,
        sidecars: None,
        interactive: None,
        daemon: None,
        readiness_probe: None,
        suspend: None,
        fail: None,
        http: None,
        resource: None,
        node_selector: None,
        tolerations: None,
        affinity: None,
        pod_spec_patch: None,
        metrics: None,
        hooks: None,
    }
}

/// Builds a [`WorkFlow`] as read from the API server: namespace `default`, a uid, generation 1,
/// no labels and no status unless set. Step setters (`image`, `command`, `timeout`, ...) apply
/// to the last step added.
#[derive(Debug, Clone)]
pub struct WorkFlowBuilder {
    workflow: WorkFlow,
    /// The last step added is an exit step: step setters apply to it.
    exit_last: bool,
}

impl WorkFlow {
    /// A builder for a test workflow named `name`.
    pub fn test(name: &str) -> WorkFlowBuilder {
        let spec = WorkFlowSpec {
            max_step_timeout: DEFAULT_MAX_STEP_TIMEOUT,
            containers: Vec::new(),
            parallelism: None,
            fail_fast: true,
            active_deadline_seconds: None,
            synchronization: None,
            pod_template: None,
            pod_spec_patch: None,
            start_timeout: super::crd::DEFAULT_START_TIMEOUT,
            suspend: false,
            shutdown: None,
            retry: 0,
            ttl_seconds_after_finished: None,
            pod_cleanup: None,
            on_exit: Vec::new(),
            workspace: None,
            runs: None,
            priority: 0,
            queue_name: None,
            priority_class_name: None,
            queue_timeout: None,
            queue_scope: None,
            resources: None,
            managed_by: None,
            arguments: None,
            templates: Vec::new(),
            workflow_template_ref: None,
            artifact_repository: None,
            artifact_gc: None,
            interactive: false,
            rules: Vec::new(),
            metrics: None,
            hooks: BTreeMap::new(),
        };
        let mut workflow = WorkFlow::new(name, spec);
        workflow.metadata = ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            ..ObjectMeta::default()
        };
        WorkFlowBuilder {
            workflow,
            exit_last: false,
        }
    }
}

impl WorkFlowBuilder {
    /// Adds a step (see [`step`]).
    pub fn step(mut self, name: &str, depends_on: &[&str]) -> Self {
        self.workflow.spec.containers.push(step(name, depends_on));
        self.exit_last = false;
        self
    }

    fn last(&mut self) -> &mut Step {
        let spec = &mut self.workflow.spec;
        let steps = if self.exit_last {
            &mut spec.on_exit
        } else {
            &mut spec.containers
        };
        steps.last_mut().expect("add a step first")
    }

    /// Sets the last step's image.
    pub fn image(mut self, image: &str) -> Self {
        self.last().image = image.to_string();
        self
    }

    /// Sets the last step's command.
    pub fn command(mut self, command: &[&str]) -> Self {
        self.last().command = Some(command.iter().map(|c| c.to_string()).collect());
        self
    }

    /// Sets the last step's script (`source`, run by its command).
    pub fn source(mut self, source: &str) -> Self {
        self.last().source = Some(Box::new(source.to_string()));
        self
    }

    /// Sets the last step's args.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.last().args = Some(args.iter().map(|c| c.to_string()).collect());
        self
    }

    /// Adds an environment variable to the last step.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.last().env.push(EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        });
        self
    }

    /// Sets the last step's timeout in seconds.
    pub fn timeout(mut self, seconds: i64) -> Self {
        self.last().timeout = Some(seconds.into());
        self
    }

    /// Sets the last step's retries.
    /// The last step's `cache`, as YAML.
    pub fn cache(mut self, yaml: &str) -> Self {
        let cache = serde_yaml::from_str(yaml).expect("a cache");
        self.last().cache = Some(Box::new(cache));
        self
    }

    /// `spec.synchronization`, as YAML.
    pub fn synchronization(mut self, yaml: &str) -> Self {
        let sync = serde_yaml::from_str(yaml).expect("a synchronization");
        self.workflow.spec.synchronization = Some(Box::new(sync));
        self
    }

    /// The last step's `synchronization`, as YAML.
    pub fn step_synchronization(mut self, yaml: &str) -> Self {
        let sync = serde_yaml::from_str(yaml).expect("a synchronization");
        self.last().synchronization = Some(Box::new(sync));
        self
    }

    /// The last step's `retryStrategy`, as YAML.
    pub fn retry_strategy(mut self, yaml: &str) -> Self {
        let strategy = serde_yaml::from_str(yaml).expect("a retryStrategy");
        self.last().retry_strategy = Some(Box::new(strategy));
        self
    }

    /// The last step's failure does not fail the workflow (`continueOn.failed`).
    pub fn continue_on_failed(mut self) -> Self {
        self.last().continue_on = Some(crate::crd::ContinueOn { failed: true });
        self
    }

    /// The last step is interactive: it waits for `workflow-operator continue`.
    pub fn interactive(mut self) -> Self {
        self.last().interactive = Some(true);
        self
    }

    /// `spec.activeDeadlineSeconds`.
    pub fn active_deadline_seconds(mut self, seconds: i64) -> Self {
        self.workflow.spec.active_deadline_seconds = Some(seconds.into());
        self
    }

    pub fn retries(mut self, retries: i32) -> Self {
        self.last().retries = Some(retries.into());
        self
    }

    /// Sets `startTimeout`.
    pub fn start_timeout(mut self, seconds: i64) -> Self {
        self.workflow.spec.start_timeout = seconds;
        self
    }

    /// Sets `maxStepTimeout`.
    pub fn max_step_timeout(mut self, seconds: i64) -> Self {
        self.workflow.spec.max_step_timeout = seconds;
        self
    }

    /// Sets `parallelism`.
    pub fn parallelism(mut self, parallelism: i32) -> Self {
        self.workflow.spec.parallelism = Some(parallelism.into());
        self
    }

    /// Sets `priority` (the order under `--max-running-steps`).
    pub fn priority(mut self, priority: i32) -> Self {
        self.workflow.spec.priority = priority;
        self
    }

    /// Sets `queueName` (Kueue): the steps' Jobs are created suspended, with its label.
    pub fn queue_name(mut self, queue: &str) -> Self {
        self.workflow.spec.queue_name = Some(queue.into());
        self
    }

    /// Sets `priorityClassName` (Kueue's WorkloadPriorityClass).
    pub fn priority_class_name(mut self, class: &str) -> Self {
        self.workflow.spec.priority_class_name = Some(class.into());
        self
    }

    /// Sets `queueName` with `queueScope: Workflow`: the run is admitted as one Workload.
    pub fn queue_whole(mut self, queue: &str) -> Self {
        self.workflow.spec.queue_name = Some(queue.into());
        self.workflow.spec.queue_scope = Some(crate::crd::QueueScope::Workflow);
        self
    }

    /// Sets `managedBy`.
    pub fn managed_by(mut self, manager: &str) -> Self {
        self.workflow.spec.managed_by = Some(manager.into());
        self
    }

    /// Sets the last step's cpu request (`"500m"`, `"2"`).
    pub fn cpu(mut self, cpu: &str) -> Self {
        let quantity = k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into());
        self.last().resources = Some(Box::new(k8s_openapi::api::core::v1::ResourceRequirements {
            requests: Some([("cpu".to_string(), quantity)].into_iter().collect()),
            ..Default::default()
        }));
        self
    }

    /// Sets `queueTimeout`, in seconds.
    pub fn queue_timeout(mut self, seconds: i64) -> Self {
        self.workflow.spec.queue_timeout = Some(seconds);
        self
    }

    /// Sets `failFast`.
    pub fn fail_fast(mut self, fail_fast: bool) -> Self {
        self.workflow.spec.fail_fast = fail_fast;
        self
    }

    /// Adds an exit step (`onExit`, see [`step`]); step setters apply to it until the next
    /// [`WorkFlowBuilder::step`].
    pub fn exit_step(mut self, name: &str, depends_on: &[&str]) -> Self {
        self.workflow.spec.on_exit.push(step(name, depends_on));
        self.exit_last = true;
        self
    }

    /// Sets `suspend`.
    pub fn suspend(mut self, suspend: bool) -> Self {
        self.workflow.spec.suspend = suspend;
        self
    }

    /// Sets `shutdown`.
    pub fn shutdown(mut self, shutdown: Shutdown) -> Self {
        self.workflow.spec.shutdown = Some(shutdown);
        self
    }

    /// Sets `retry`.
    pub fn retry(mut self, retry: i32) -> Self {
        self.workflow.spec.retry = retry;
        self
    }

    /// Makes the last step fan out over `items` (`withItems`).
    pub fn with_items(mut self, items: &[serde_json::Value]) -> Self {
        self.last().with_items = Some(Box::new(super::crd::Items(items.to_vec())));
        self
    }

    /// Makes the last step fan out over `count` numbers from 0 (`withSequence`).
    pub fn with_sequence(mut self, count: i64) -> Self {
        self.last().with_sequence = Some(Box::new(super::crd::Sequence {
            count: Some(count.into()),
            start: None,
            end: None,
            format: None,
        }));
        self
    }

    /// Makes the last step fan out over the list `param` names (`withParam`).
    pub fn with_param(mut self, param: &str) -> Self {
        self.last().with_param = Some(Box::new(super::crd::Param(param.to_string())));
        self
    }

    /// Sets `runs`.
    pub fn runs(mut self, runs: i32) -> Self {
        self.workflow.spec.runs = Some(runs);
        self
    }

    /// Adds a rule on the run's metrics (`spec.rules`) firing `action` when `when` holds;
    /// [`WorkFlowBuilder::rule_with`] changes its other fields.
    pub fn rule(self, name: &str, when: &str, action: RuleAction) -> Self {
        self.rule_with(name, when, action, |_| {})
    }

    /// [`WorkFlowBuilder::rule`], with the rule's other fields set by `set`.
    pub fn rule_with(
        mut self,
        name: &str,
        when: &str,
        action: RuleAction,
        set: impl FnOnce(&mut Rule),
    ) -> Self {
        let mut rule = Rule {
            name: name.to_string(),
            when: when.to_string(),
            action,
            repetitions: None,
            backoff: None,
            min_parallelism: None,
            max_parallelism: None,
        };
        set(&mut rule);
        self.workflow.spec.rules.push(rule);
        self
    }

    /// Sets the last step's `when`.
    pub fn when(mut self, expression: &str) -> Self {
        self.last().when = Some(expression.into());
        self
    }

    /// Sets `workspace`: a claim of 1Gi, `ReadWriteOnce`, mounted at `mount_path`.
    pub fn workspace(mut self, mount_path: &str) -> Self {
        let spec = serde_json::from_value(serde_json::json!({
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }))
        .expect("a claim spec");
        self.workflow.spec.workspace = Some(Box::new(super::crd::Workspace {
            mount_path: mount_path.to_string(),
            volume_claim_template: super::crd::ClaimTemplate { spec },
        }));
        self
    }

    /// Sets `ttlSecondsAfterFinished`.
    pub fn ttl_seconds_after_finished(mut self, seconds: i64) -> Self {
        self.workflow.spec.ttl_seconds_after_finished = Some(seconds);
        self
    }

    /// Sets `podCleanup`.
    pub fn pod_cleanup(mut self, cleanup: PodCleanup) -> Self {
        self.workflow.spec.pod_cleanup = Some(cleanup);
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.workflow
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Sets the namespace.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.workflow.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// Sets `metadata.generation`.
    pub fn generation(mut self, generation: i64) -> Self {
        self.workflow.metadata.generation = Some(generation);
        self
    }

    /// Sets the status.
    pub fn status(mut self, status: WorkFlowStatus) -> Self {
        self.workflow.status = Some(status);
        self
    }

    /// The workflow.
    pub fn build(self) -> WorkFlow {
        self.workflow
    }
}

/// The time finished test Jobs started at.
fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

/// Observed Jobs of a workflow's current run, for planner tests.
#[derive(Debug, Clone)]
pub struct Jobs<'a> {
    workflow: &'a WorkFlow,
    run: String,
    retry: i32,
    jobs: Vec<ObservedJob>,
}

impl<'a> Jobs<'a> {
    /// No Jobs yet, for `workflow`'s current run.
    pub fn of(workflow: &'a WorkFlow) -> Jobs<'a> {
        Jobs {
            workflow,
            run: names::run_id(&workflow.spec),
            retry: 0,
            jobs: Vec::new(),
        }
    }

    /// Following calls add Jobs of retry `retry` (`spec.retry` when they were created).
    pub fn retry(mut self, retry: i32) -> Self {
        self.retry = retry;
        self
    }

    /// Following calls add Jobs of run `run` instead of the current one.
    pub fn run(mut self, run: &str) -> Self {
        self.run = run.to_string();
        self
    }

    /// Test Jobs are created and started at `since` (time 0 for finished ones).
    fn add(mut self, step: &str, state: JobState, since: Timestamp) -> Self {
        let name = names::retry_job_name(
            self.workflow.metadata.name.as_deref().unwrap_or(""),
            step,
            &self.run,
            self.retry,
        );
        let timeout = self
            .workflow
            .spec
            .containers
            .iter()
            .chain(&self.workflow.spec.on_exit)
            .find(|s| s.step_name == step)
            .map_or(DEFAULT_MAX_STEP_TIMEOUT, |s| {
                self.workflow.spec.effective_timeout(s)
            });
        self.jobs.push(ObservedJob {
            name,
            step: step.to_string(),
            run: self.run.clone(),
            retry: self.retry,
            run_index: 0,
            item: None,
            attempt: 0,
            cache_key: None,
            state,
            deleting: false,
            stopped: false,
            active_deadline_seconds: super::plan::backstop_deadline_seconds(timeout),
            created: since,
            start_time: Some(since),
            finished_at: None,
            attempts: 1,
            pod_started: true,
            daemoned: None,
            ready: false,
            suspended: false,
            suspended_at: None,
            start_failure: None,
            outputs: None,
        });
        self
    }

    /// Marks the last Job a daemon's whose pod was ready at `ip`, as the handler recorded it.
    pub fn daemoned(mut self, ip: &str) -> Self {
        let job = self.jobs.last_mut().expect("add a Job first");
        job.ready = true;
        job.daemoned = Some(ip.parse().expect("an IP"));
        self
    }

    /// Sets the outputs the handler read from the last Job's pod (`Err`: why they could not
    /// be read).
    pub fn outputs(mut self, outputs: Result<&[(&str, &str)], &str>) -> Self {
        let job = self.jobs.last_mut().expect("add a Job first");
        job.outputs = Some(
            outputs
                .map(|pairs| {
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                })
                .map_err(str::to_string),
        );
        self
    }

    /// A running Job of `step`, started at `since`, its pod running.
    pub fn active(self, step: &str, since: Timestamp) -> Self {
        self.add(step, JobState::Active { since }, since)
    }

    /// A Job of `step` created at `created` whose pod has not started (yet).
    pub fn pending(mut self, step: &str, created: Timestamp) -> Self {
        self = self.add(step, JobState::Active { since: created }, created);
        let job = self.jobs.last_mut().expect("just added");
        job.pod_started = false;
        job.attempts = 0;
        self
    }

    /// Sets why the last Job's pod has not started, as the handler reads it at its start
    /// deadline.
    pub fn start_failure(mut self, why: &str) -> Self {
        self.jobs.last_mut().expect("add a job first").start_failure = Some(why.to_string());
        self
    }

    /// A succeeded Job of `step`.
    pub fn succeeded(self, step: &str) -> Self {
        self.add(step, JobState::Succeeded, epoch())
    }

    /// A failed Job of `step`.
    pub fn failed(self, step: &str, reason: &str, message: &str) -> Self {
        self.add(
            step,
            JobState::Failed {
                reason: reason.to_string(),
                message: message.to_string(),
                exit_code: None,
            },
            epoch(),
        )
    }

    /// A failed Job of `step` whose last container exited with `exit_code`, as
    /// `failure_cause::explain` reads it from the pods: the container's reason and message.
    pub fn exited(self, step: &str, exit_code: i32, reason: &str, message: &str) -> Self {
        self.add(
            step,
            JobState::Failed {
                reason: reason.to_string(),
                message: message.to_string(),
                exit_code: Some(exit_code),
            },
            epoch(),
        )
    }

    /// Makes the last Job added the Job of item `item` of its step (which fans out).
    pub fn item(mut self, item: u32) -> Self {
        self.jobs.last_mut().expect("add a job first").item = Some(item);
        self.rename_last()
    }

    /// Makes the last Job added attempt `attempt` of its step (`retryStrategy`).
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.jobs.last_mut().expect("add a job first").attempt = attempt;
        self.rename_last()
    }

    /// Sets when the last Job added was created and started (`started`) and ended (`ended`).
    pub fn ran(mut self, started: Timestamp, ended: Timestamp) -> Self {
        let job = self.jobs.last_mut().expect("add a job first");
        job.created = started;
        job.start_time = Some(started);
        job.finished_at = Some(ended);
        self
    }

    /// Makes the last Job added a Job of run `run_index` of `spec.runs`.
    pub fn in_run(mut self, run_index: u32) -> Self {
        self.jobs.last_mut().expect("add a job first").run_index = run_index;
        self.rename_last()
    }

    /// Names the last Job as the operator names its instance's Job (`fan_out::display_name`).
    fn rename_last(mut self) -> Self {
        let runs = self.workflow.spec.run_count();
        let workflow = self.workflow.metadata.name.clone().unwrap_or_default();
        let job = self.jobs.last_mut().expect("add a job first");
        let shown = super::fan_out::display_name(&job.step, job.run_index, runs, job.item);
        job.name = names::attempt_job_name(&workflow, &shown, &self.run, self.retry, job.attempt);
        self
    }

    /// Marks the last Job added as stopped by its workflow (`jobs::stop_mark`).
    pub fn stopped(mut self) -> Self {
        self.jobs.last_mut().expect("add a job first").stopped = true;
        self
    }

    /// Marks the last Job added as being deleted.
    pub fn deleting(mut self) -> Self {
        self.jobs.last_mut().expect("add a job first").deleting = true;
        self
    }

    /// The Jobs.
    pub fn build(self) -> Vec<ObservedJob> {
        self.jobs
    }
}
