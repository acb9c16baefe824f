//! `workflow-operator logs NAME [--step S] [-f]`: the logs of a workflow's steps in DAG order,
//! each line prefixed with its step (like `argo logs`): an item of a step that fans out as
//! `build[3]`, a run of `spec.runs` as `run1/build`, a step of a template call as `pipe/one`.
//! `--step` takes these names, a step's own name (all its runs and items), or the part before
//! a `/` (all of one run, `run1`, or of one template call, `pipe`); a step its `when` skipped
//! is said to have never run. A step tried more than once (its
//! `retryStrategy` or `retries`) has its attempts in attempt order, each under a line
//! `--- attempt 2 of build (pod NAME) ---`. With `-f`, the logs of steps still to come are
//! followed as their pods start, until the workflow finishes; what is left to print once it
//! has finished (all of it, for a workflow finished already) is printed as without `-f`.
//!
//! A step that ran but whose pods are gone has no log to print: a line on stderr says so and
//! why ([`gone`]: `spec.podCleanup` deleted them, the Job controller deleted them when the
//! operator stopped its Job or at the Job's deadline, or its Job was deleted with them). Asked for that one step (`--step`), `logs` then exits 1, as `kubectl logs` of a
//! pod that is not found does; the logs of a whole workflow print what is left and exit 0.

use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::task::JoinSet;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{OptionNum, Step};
use workflow_operator_core::jobs::{self, LABEL_ATTEMPT, LABEL_RETRY};
use workflow_operator_core::object_instance::{ObjectInstance, in_run, instance_of};
use workflow_operator_core::plan::REASON_WHEN_FALSE;
use workflow_operator_core::pods_gone::why_pods_gone;
use workflow_operator_core::step_view::{StepPhase, StepView, step_views};

/// Print the logs of a workflow's steps, in DAG order, each line prefixed with its step.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The workflow's name.
    name: String,
    /// Only this step's logs, named as `get` and `logs` print it (`build`, `shard[2]`,
    /// `run1/build`, `pipe/one`), or all of one run or template call (`run1`, `pipe`).
    #[arg(long)]
    step: Option<String>,
    /// Follow: print new lines as they come, and the logs of steps that start later, until the
    /// workflow finishes.
    #[arg(long, short = 'f')]
    follow: bool,
    #[command(flatten)]
    cluster: super::client::ClusterArgs,
}

pub async fn logs(args: LogsArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        let only = args.step.as_deref();
        print_logs(&client, &namespace, &args.name, only, args.follow).await
    })
    .await
}

/// Prints the logs of the workflow `name`'s steps (`only` those `--step` names), following
/// them with `follow` until it finished; exit 1 when the one step asked for has no log left.
pub(super) async fn print_logs(
    client: &Client,
    namespace: &str,
    name: &str,
    only: Option<&str>,
    follow: bool,
) -> Result<ExitCode> {
    let api = Api::<WorkFlow>::namespaced(client.clone(), namespace);
    let workflow = super::read_expanded(&api, namespace, name).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels(&jobs::selector(&workflow.name_any()));
    let listed_jobs = jobs
        .list(&selector)
        .await
        .context("listing the workflow's jobs")?
        .items;
    let listed_pods = pods
        .list(&selector)
        .await
        .context("listing the workflow's pods")?
        .items;
    if let Some(step) = only {
        check_step(&workflow, &listed_jobs, step)?;
    }
    let mut asked_for_is_gone = false;
    for (step, why) in gone(&workflow, &listed_jobs, &listed_pods) {
        if only.is_none_or(|only| selected(only, without_run(&step), &step)) {
            eprintln!("{step}: no logs: {why}");
            asked_for_is_gone |= only.is_some();
        }
    }
    if follow && !is_finished(&workflow) {
        self::follow(client, &pods, &workflow, only).await?;
    } else {
        print_all(&pods, &listed_pods, &workflow, only).await?;
    }
    Ok(match asked_for_is_gone {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

/// Whether a pod of `step` shown as `shown` (`run1/shard[2]`) is one `--step only` asks for:
/// `only` is its step's name (every run and item of it) or the name it is shown by, with or
/// without its run (`shard[2]` in every run), or the part of either before a `/` (all of one
/// run, or of one template call).
fn selected(only: &str, step: &str, shown: &str) -> bool {
    [step, shown, without_run(shown)].into_iter().any(|name| {
        name == only
            || name
                .strip_prefix(only)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Refuses a `--step` that names no step of the workflow, listing those it has; says of each
/// step it names that its `when` skipped, or that never ran, that it never ran.
fn check_step(workflow: &WorkFlow, jobs: &[Job], only: &str) -> Result<()> {
    // Its Jobs count the items of a step that fans out.
    let views = step_views(workflow, jobs, &[]);
    let mut known = Vec::new();
    let mut any = false;
    for view in &views {
        let step = without_run(&view.name);
        let total = view.items.map_or(0, |i| i.total);
        let items = (0..total).map(|i| format!("{}[{i}]", view.name));
        let matches =
            selected(only, step, &view.name) || items.clone().any(|i| selected(only, step, &i));
        any |= matches;
        if matches && view.phase == StepPhase::Skipped {
            eprintln!("{}", never_ran(view));
        }
        known.push(match total {
            0 => view.name.clone(),
            n => format!("{} (items {0}[0] to {0}[{}])", view.name, n - 1),
        });
    }
    if !any {
        bail!(
            "workflow {} has no step {only:?}; its steps: {}",
            workflow.name_any(),
            known.join(", ")
        );
    }
    Ok(())
}

/// A step's name without its run (`build` of `run1/build`).
fn without_run(name: &str) -> &str {
    match name.split_once('/') {
        Some((run, rest))
            if run
                .strip_prefix("run")
                .is_some_and(|n| n.parse::<u32>().is_ok()) =>
        {
            rest
        }
        _ => name,
    }
}

/// `after: skipped (when false), never ran`: why a skipped step has no log.
fn never_ran(view: &StepView) -> String {
    let why = match view.reason.as_deref() {
        Some(REASON_WHEN_FALSE) => "when false",
        _ => "the workflow ended before it started",
    };
    format!("{}: skipped ({why}), never ran", view.name)
}

/// Every step's pods (attempts in order), steps in DAG order, each log printed whole.
async fn print_all(
    pods: &Api<Pod>,
    listed: &[Pod],
    workflow: &WorkFlow,
    only: Option<&str>,
) -> Result<()> {
    let ours: Vec<(ObjectInstance, &Pod)> = listed
        .iter()
        .filter(|pod| in_run(pod, workflow))
        .filter_map(|pod| Some((instance_of(pod, workflow)?, pod)))
        .filter(|(instance, _)| only.is_none_or(|s| selected(s, &instance.step, &instance.shown)))
        .collect();
    for view in step_views(workflow, &[], &[]) {
        // A step's pods (each item's of one that fans out, in item order), attempts in order:
        // a workflow's retry, then a step's attempt (`retryStrategy`: a Job each), then the
        // pods of one Job (`retries`) as they were made.
        let mut attempts: Vec<&(ObjectInstance, &Pod)> =
            ours.iter().filter(|(i, _)| i.row == view.name).collect();
        attempts.sort_by_key(|(instance, pod)| {
            let label = |key| label(pod, key);
            let made = pod.metadata.creation_timestamp.clone();
            (
                instance.item,
                label(LABEL_RETRY),
                label(LABEL_ATTEMPT),
                made,
            )
        });
        let pods_of = |item| attempts.iter().filter(|(i, _)| i.item == item).count();
        let mut position = 0;
        for (at, (instance, pod)) in attempts.iter().enumerate() {
            let first = at == 0 || attempts[at - 1].0.item != instance.item;
            position = if first { 1 } else { position + 1 };
            let step = step_spec(workflow, &instance.step);
            // A Job per attempt is labelled with it; the pods of one Job are counted.
            let number = match step.is_some_and(|s| s.retry_strategy.is_some()) {
                true => label(pod, LABEL_ATTEMPT) + 1,
                false => position,
            };
            if step.is_some_and(is_retried) || pods_of(instance.item) > 1 {
                println!("{}", marker(number, instance, pod));
            }
            let text = pods
                .logs(&pod.name_any(), &LogParams::default())
                .await
                .with_context(|| format!("reading the logs of pod {}", pod.name_any()))?;
            for line in text.lines() {
                println!("{}: {line}", instance.shown);
            }
        }
    }
    Ok(())
}

/// Whether the workflow has finished: it runs no pod any more.
fn is_finished(workflow: &WorkFlow) -> bool {
    (workflow.status.as_ref())
        .and_then(|s| s.workflow_status)
        .is_some_and(|p| p.is_terminal())
}

/// The step or exit step of the workflow named `step`.
fn step_spec<'w>(workflow: &'w WorkFlow, step: &str) -> Option<&'w Step> {
    (workflow.spec.containers.iter())
        .chain(&workflow.spec.on_exit)
        .find(|s| s.step_name == step)
}

/// Whether `step` may be tried more than once: it has a `retryStrategy` (a Job per attempt)
/// or `retries` (pods of one Job).
fn is_retried(step: &Step) -> bool {
    step.retry_strategy.is_some() || step.retries.num().is_some_and(|r| r > 0)
}

/// The number label `key` of `pod` holds; absent is 0.
fn label(pod: &Pod, key: &str) -> u32 {
    (pod.labels().get(key)).map_or(0, |v| v.parse().unwrap_or(0))
}

/// The line before the log of attempt `number` (from 1) of `instance`, run by `pod`.
fn marker(number: u32, instance: &ObjectInstance, pod: &Pod) -> String {
    let retry = match label(pod, LABEL_RETRY) {
        0 => String::new(),
        n => format!(", workflow retry {n}"),
    };
    format!(
        "--- attempt {number} of {}{retry} (pod {}) ---",
        instance.shown,
        pod.name_any()
    )
}

/// Follows the log of every pod of the workflow's current run as it appears, until the workflow
/// has finished and every followed log has ended; then prints the logs of the pods it had not
/// followed yet as [`print_all`] does.
async fn follow(
    client: &Client,
    pods: &Api<Pod>,
    workflow: &WorkFlow,
    only: Option<&str>,
) -> Result<()> {
    let name = workflow.name_any();
    let workflows: Api<WorkFlow> =
        Api::namespaced(client.clone(), &workflow.namespace().unwrap_or_default());
    let mut finished = Box::pin(
        watcher(
            workflows,
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .applied_objects()
        .try_filter(|wf| {
            let done = wf
                .status
                .as_ref()
                .and_then(|s| s.workflow_status)
                .is_some_and(|p| p.is_terminal());
            std::future::ready(done)
        }),
    );
    let mut appearing = Box::pin(
        watcher(
            pods.clone(),
            watcher::Config::default().labels(&jobs::selector(&name)),
        )
        .applied_objects(),
    );
    let mut followed: HashSet<String> = HashSet::new();
    let mut streams = JoinSet::new();
    let mut follow_pod = |pod: Pod, streams: &mut JoinSet<Result<()>>| {
        let Some(instance) = instance_of(&pod, workflow) else {
            return;
        };
        if !has_started(&pod)
            || only.is_some_and(|s| !selected(s, &instance.step, &instance.shown))
            || !in_run(&pod, workflow)
            || !followed.insert(pod.name_any())
        {
            return;
        }
        let pods = pods.clone();
        // Only a Job per attempt says which attempt a pod is as it starts.
        let marker = (step_spec(workflow, &instance.step))
            .is_some_and(|s| s.retry_strategy.is_some())
            .then(|| marker(label(&pod, LABEL_ATTEMPT) + 1, &instance, &pod));
        streams.spawn(async move {
            if let Some(marker) = marker {
                println!("{marker}");
            }
            stream_log(&pods, &pod.name_any(), &instance.shown).await
        });
    };
    let mut left = Vec::new();
    loop {
        tokio::select! {
            pod = appearing.next() => {
                let Some(pod) = pod else { break };
                follow_pod(pod.context("watching the workflow's pods")?, &mut streams);
            }
            done = finished.next() => {
                if let Some(Err(error)) = done {
                    return Err(error).context("watching the workflow");
                }
                // Finished: every pod it ran exists now and has ended; those the watch has not
                // shown yet are printed once the followed logs have ended, in order.
                let listed = pods
                    .list(&ListParams::default().labels(&jobs::selector(&name)))
                    .await
                    .context("listing the workflow's pods")?;
                left = listed.items;
                break;
            }
        }
    }
    left.retain(|pod| !followed.contains(&pod.name_any()));
    while let Some(ended) = streams.join_next().await {
        ended.context("a log stream")??;
    }
    print_all(pods, &left, workflow, only).await
}

/// The steps of the workflow's current run that ran but whose pods are all gone, in DAG order,
/// each with why: its Job's marks and conditions say who deleted them, and a step whose Job is
/// gone too says how the workflow stopped it. Steps that fan out are left out (their items'
/// pods are listed as they are found).
fn gone(workflow: &WorkFlow, jobs: &[Job], pods: &[Pod]) -> Vec<(String, String)> {
    let with_pods: HashSet<String> = pods
        .iter()
        .filter(|pod| in_run(pod, workflow))
        .filter_map(|pod| Some(instance_of(pod, workflow)?.row))
        .collect();
    step_views(workflow, jobs, &[])
        .into_iter()
        .filter(|view| view.items.is_none() && !view.name.ends_with(']'))
        .filter(|view| !with_pods.contains(&view.name))
        .filter_map(|view| {
            let why = why_pods_gone(&view, jobs, workflow)?;
            Some((view.name, why))
        })
        .collect()
}

/// Whether the pod's container started (or ended), so that its log can be read.
fn has_started(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| {
            statuses.iter().any(|c| {
                c.state
                    .as_ref()
                    .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
            })
        })
}

async fn stream_log(pods: &Api<Pod>, pod: &str, step: &str) -> Result<()> {
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = pods
        .log_stream(pod, &params)
        .await
        .with_context(|| format!("following the log of pod {pod}"))?
        .lines();
    while let Some(line) = lines.next().await {
        println!("{step}: {}", line.context("reading a log line")?);
    }
    Ok(())
}
