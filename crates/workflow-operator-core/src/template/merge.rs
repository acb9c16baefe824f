//! What a call keeps of what it calls: a step over the container template it calls, and a
//! workflow over the WorkFlowTemplate it takes whole (`workflowTemplateRef`). Each merge lists
//! every field by name, so a field added to the API does not compile until its merge is
//! decided.

use crate::crd::{DEFAULT_MAX_STEP_TIMEOUT, DEFAULT_START_TIMEOUT, Step, StepInputs, WorkFlowSpec};

/// The step `call` makes of the container template `template`: what the call sets wins, a
/// list of named things (`env` by name, `volumeMounts` by path) adds to the template's, and
/// the call's name and `dependsOn` are the step's.
pub fn step_over_template(call: Step, template: Step) -> Step {
    let Step {
        step_name,
        image,
        command,
        depends_on,
        args,
        env,
        env_from,
        volume_mounts,
        working_dir,
        image_pull_policy,
        security_context,
        resources,
        timeout,
        retries,
        continue_on,
        retry_strategy,
        synchronization,
        cache,
        when,
        with_items,
        with_param,
        with_sequence,
        template: _,
        template_ref: _,
        arguments: _,
        source,
        outputs,
        inputs,
        init_containers,
        sidecars,
        interactive,
        daemon,
        readiness_probe,
        suspend,
        fail,
        http,
        resource,
        node_selector,
        tolerations,
        affinity,
        pod_spec_patch,
        metrics,
        hooks,
    } = call;
    Step {
        step_name,
        depends_on,
        image: if image.is_empty() {
            template.image
        } else {
            image
        },
        command: command.or(template.command),
        args: args.or(template.args),
        env: by_key(template.env, env, |e| e.name.clone()),
        env_from: template.env_from.into_iter().chain(env_from).collect(),
        volume_mounts: by_key(template.volume_mounts, volume_mounts, |m| {
            m.mount_path.clone()
        }),
        working_dir: working_dir.or(template.working_dir),
        image_pull_policy: image_pull_policy.or(template.image_pull_policy),
        security_context: security_context.or(template.security_context),
        resources: resources.or(template.resources),
        timeout: timeout.or(template.timeout),
        retries: retries.or(template.retries),
        continue_on: continue_on.or(template.continue_on),
        retry_strategy: retry_strategy.or(template.retry_strategy),
        synchronization: synchronization.or(template.synchronization),
        cache: cache.or(template.cache),
        when: when.or(template.when),
        with_items: with_items.or(template.with_items),
        with_param: with_param.or(template.with_param),
        with_sequence: with_sequence.or(template.with_sequence),
        template: None,
        template_ref: None,
        arguments: None,
        source: source.or(template.source),
        outputs: outputs.or(template.outputs),
        inputs: inputs_over(inputs, template.inputs),
        init_containers: init_containers.or(template.init_containers),
        sidecars: sidecars.or(template.sidecars),
        interactive: interactive.or(template.interactive),
        daemon: daemon.or(template.daemon),
        readiness_probe: readiness_probe.or(template.readiness_probe),
        suspend: suspend.or(template.suspend),
        fail: fail.or(template.fail),
        http: http.or(template.http),
        resource: resource.or(template.resource),
        node_selector: node_selector.or(template.node_selector),
        tolerations: tolerations.or(template.tolerations),
        affinity: affinity.or(template.affinity),
        pod_spec_patch: pod_spec_patch.or(template.pod_spec_patch),
        // A call's own metrics replace its template's, as Argo's template metrics are one list.
        metrics: metrics.or(template.metrics),
        // A step's hooks are its call's (a template with hooks is refused where it is read):
        // they were made steps of their own before the call was expanded.
        hooks,
    }
}

/// The call's input artifacts over the template's: one of the call's replaces the template's
/// of the same name (Argo's argument over the template's `raw`).
fn inputs_over(
    call: Option<Box<StepInputs>>,
    template: Option<Box<StepInputs>>,
) -> Option<Box<StepInputs>> {
    match (call, template) {
        (Some(call), Some(template)) => {
            let StepInputs { artifacts } = *template;
            Some(Box::new(StepInputs {
                artifacts: by_key(artifacts, call.artifacts, |a| a.name.clone()),
            }))
        }
        (call, template) => call.or(template),
    }
}

/// `base` with `over`'s entries added, an entry of `over` replacing the one of `base` with the
/// same key in place.
fn by_key<T>(base: Vec<T>, over: Vec<T>, key: impl Fn(&T) -> String) -> Vec<T> {
    let mut out = base;
    for item in over {
        match out.iter().position(|b| key(b) == key(&item)) {
            Some(i) => out[i] = item,
            None => out.push(item),
        }
    }
    out
}

/// The spec a workflow taking `template` whole runs: the template's steps, templates and exit
/// steps; the workflow's run control (`suspend`, `shutdown`, `retry`); every other field the
/// workflow sets (differs from its default) over the template's. `arguments` are merged by
/// name elsewhere (they are checked against the template's declarations).
pub fn workflow_over_template(own: &WorkFlowSpec, template: WorkFlowSpec) -> WorkFlowSpec {
    let WorkFlowSpec {
        max_step_timeout,
        containers: _,
        arguments: _,
        templates: _,
        workflow_template_ref: _,
        parallelism,
        fail_fast,
        active_deadline_seconds,
        synchronization,
        pod_template,
        pod_spec_patch,
        start_timeout,
        suspend,
        shutdown,
        retry,
        ttl_seconds_after_finished,
        pod_cleanup,
        on_exit: _,
        workspace,
        runs,
        priority,
        queue_name,
        priority_class_name,
        queue_timeout,
        queue_scope,
        resources,
        managed_by,
        artifact_repository,
        artifact_gc,
        interactive,
        rules,
        metrics,
        hooks,
    } = own.clone();
    WorkFlowSpec {
        max_step_timeout: if max_step_timeout == DEFAULT_MAX_STEP_TIMEOUT {
            template.max_step_timeout
        } else {
            max_step_timeout
        },
        start_timeout: if start_timeout == DEFAULT_START_TIMEOUT {
            template.start_timeout
        } else {
            start_timeout
        },
        fail_fast: fail_fast && template.fail_fast,
        priority: if priority == 0 {
            template.priority
        } else {
            priority
        },
        parallelism: parallelism.or(template.parallelism),
        active_deadline_seconds: active_deadline_seconds.or(template.active_deadline_seconds),
        synchronization: synchronization.or(template.synchronization),
        pod_template: pod_template.or(template.pod_template),
        pod_spec_patch: pod_spec_patch.or(template.pod_spec_patch),
        ttl_seconds_after_finished: ttl_seconds_after_finished
            .or(template.ttl_seconds_after_finished),
        pod_cleanup: pod_cleanup.or(template.pod_cleanup),
        workspace: workspace.or(template.workspace),
        runs: runs.or(template.runs),
        queue_name: queue_name.or(template.queue_name),
        priority_class_name: priority_class_name.or(template.priority_class_name),
        queue_timeout: queue_timeout.or(template.queue_timeout),
        queue_scope: queue_scope.or(template.queue_scope),
        resources: resources.or(template.resources),
        // Who runs the workflow is read from the object itself, before any template.
        managed_by,
        artifact_repository: artifact_repository.or(template.artifact_repository),
        artifact_gc: artifact_gc.or(template.artifact_gc),
        interactive: interactive || template.interactive,
        // The workflow's rules replace the template's: they are one policy.
        rules: if rules.is_empty() {
            template.rules
        } else {
            rules
        },
        metrics: metrics.or(template.metrics),
        // The workflow's hooks replace the template's, as its exit steps do not.
        hooks: if hooks.is_empty() {
            template.hooks
        } else {
            hooks
        },
        suspend,
        shutdown,
        retry,
        containers: template.containers,
        templates: template.templates,
        on_exit: template.on_exit,
        arguments: template.arguments,
        workflow_template_ref: None,
    }
}
