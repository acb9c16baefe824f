//! The labels and annotations the operator puts on the Jobs (and pods) of a workflow's steps,
//! and reads back: which workflow, step, run, retry and item a Job is for, and the records it
//! keeps on a Job (a timeout, a pod that could not start, pods cleaned up).

/// Label: the workflow's name (made a valid label value by `names::label_value`).
pub const LABEL_WORKFLOW: &str = "workflow.crd.com/workflow";
/// Label: the step's name (made a valid label value by `names::label_value`).
pub const LABEL_STEP: &str = "workflow.crd.com/step";
/// Label: the run id.
pub const LABEL_RUN: &str = "workflow.crd.com/run";
/// Annotation: the workflow's exact name.
pub const ANNOTATION_WORKFLOW: &str = "workflow.crd.com/workflow";
/// Annotation: the step's exact name.
pub const ANNOTATION_STEP: &str = "workflow.crd.com/step";
/// Annotation: put by the operator on the Job of a step that ran past its timeout, saying why
/// (`running for 6s, longer than its timeout of 5s`). It makes the Job the record of the
/// timeout: [`crate::jobs::observe_job`] reads such a Job as `JobState::TimedOut` whatever its conditions.
pub const ANNOTATION_TIMED_OUT: &str = "workflow.crd.com/timed-out";
/// Annotation: put by the operator on the Job of a step whose pod did not start within the
/// workflow's `startTimeout`, saying why (`CreateContainerConfigError: secret "creds" not
/// found`). Like [`ANNOTATION_TIMED_OUT`], it makes the Job the record of the failure:
/// [`crate::jobs::observe_job`] reads such a Job as `JobState::CannotStart`.
pub const ANNOTATION_CANNOT_START: &str = "workflow.crd.com/cannot-start";
/// Annotation: put by the operator on the Job of a running step it stopped because the
/// workflow stopped its steps (a failure with failFast, `spec.shutdown: Terminate`, its deadline,
/// a rule), saying why. The Job and its stopped pod are kept; [`crate::jobs::observe_job`] reads
/// such a Job as stopped (`ObservedJob::stopped`) whatever its conditions.
pub const ANNOTATION_STOPPED: &str = "workflow.crd.com/stopped";
/// Annotation: put by the operator on a daemon step's Job once its pod was ready, its pod's IP:
/// the record that the step is done while it keeps running, and of its IP
/// (`{{steps.NAME.ip}}`), read once; [`crate::jobs::observe_job`] reads it as
/// `ObservedJob::daemoned`.
pub const ANNOTATION_DAEMONED: &str = "workflow.crd.com/daemoned";
/// Annotation: put by the operator on a finished Job once `spec.podCleanup` had its pods
/// deleted (the time, RFC 3339), so the clean-up is neither repeated nor missed after a restart
/// (see `cleanup`).
pub const ANNOTATION_PODS_DELETED: &str = "workflow.crd.com/pods-deleted";
/// Annotation of the Job of a cached step (`cache`): its key's hash, decided when the Job was
/// built; its success writes the entry of that key.
pub const ANNOTATION_CACHE_KEY: &str = "workflow.crd.com/cache-key";
/// Label: the Kueue LocalQueue a Job is submitted to (`spec.queueName`). Kueue manages a Job
/// that carries it: the Job waits suspended until Kueue admits it by setting `suspend: false`
/// ("Run a Kubernetes Job", <https://kueue.sigs.k8s.io/docs/tasks/run/jobs/>).
pub const LABEL_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// Label: the Kueue WorkloadPriorityClass of a Job (`spec.priorityClassName`), which orders it
/// in its queue and for preemption
/// (<https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/>).
pub const LABEL_PRIORITY_CLASS: &str = "kueue.x-k8s.io/priority-class";
/// Label of the Jobs of a retry (`spec.retry` when the operator created them); absent on the
/// Jobs of a workflow never retried, which is retry 0.
pub const LABEL_RETRY: &str = "workflow.crd.com/retry";
/// Label of the Jobs of a workflow with `spec.runs` above 1: the run's index, from 0.
pub const LABEL_RUN_INDEX: &str = "workflow.crd.com/run-index";
/// Label of the Job of one item of a step that fans out: the item's index, from 0.
pub const LABEL_ITEM: &str = "workflow.crd.com/item";
/// Label of the Job of a step's attempt after the first (`retryStrategy`): 1 for the first
/// retry; absent is 0.
pub const LABEL_ATTEMPT: &str = "workflow.crd.com/attempt";
/// The operator's own labels; a workflow's labels never override them.
pub const OWN_LABELS: [&str; 9] = [
    LABEL_WORKFLOW,
    LABEL_STEP,
    LABEL_RUN,
    LABEL_RETRY,
    LABEL_RUN_INDEX,
    LABEL_ITEM,
    LABEL_ATTEMPT,
    LABEL_QUEUE_NAME,
    LABEL_PRIORITY_CLASS,
];

/// The label on every run of a CronWorkFlow naming it.
pub const LABEL_CRON: &str = "workflow.crd.com/cron";

/// The label on every run of a CronWorkFlow holding the scheduled time it runs for, and on
/// every run of a WorkFlowTrigger the time its delivery was taken; unix seconds.
pub const LABEL_SCHEDULED: &str = "workflow.crd.com/scheduled-time";

/// The label on every run of a WorkFlowTrigger naming it.
pub const LABEL_TRIGGER: &str = "workflow.crd.com/trigger";

/// The annotation on every run of a WorkFlowTrigger holding the id of the delivery it was
/// started for.
pub const ANNOTATION_DELIVERY: &str = "workflow.crd.com/delivery";
