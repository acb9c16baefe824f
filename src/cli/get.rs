//! `workflow-operator get NAME` and `watch NAME`: a workflow and where each of its steps stands,
//! in DAG order, as `argo get` and `argo watch` show it; `-o json` or `-o yaml` for scripts,
//! `-o wide` with each step's Job and start. Read with the
//! user's kubeconfig, as kubectl reads it.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::web;
use workflow_operator_core::crd::{ItemCounts, OptionNum};
use workflow_operator_core::jobs;
use workflow_operator_core::step_view::{AttemptView, Deadline, StepView, step_views};
use workflow_operator_core::{WorkFlow, WorkFlowStatus};

/// Show a workflow and each of its steps in DAG order: phase, duration, attempts, exit code and
/// message, then the steps' outputs (like `argo get`).
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The workflow's name.
    name: String,
    #[command(flatten)]
    cluster: super::client::ClusterArgs,
    /// `text` for people, `wide` with each step's Job and start time too, `json` or `yaml`
    /// for scripts (the steps with their phase, times, attempts, exit code, reason, message,
    /// Job and outputs).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Show a workflow as `get` does, refreshed as it changes, until it finishes (like `argo watch`);
/// when standard output is not a terminal, a line per change instead (like `kubectl get -w`).
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The workflow's name.
    name: String,
    /// When it finishes, exit 0 if it completed and 1 if it failed (as `wait`); without it,
    /// watching ends with 0 either way.
    #[arg(long)]
    exit_code: bool,
    #[command(flatten)]
    cluster: super::client::ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Wide,
    Json,
    Yaml,
}

pub async fn get(args: GetArgs) -> ExitCode {
    super::report(async {
        let (client, namespace) = args.cluster.connect().await?;
        let shown = Shown::read(&client, &namespace, &args.name).await?;
        match args.output {
            Output::Text => print!("{}", shown.render(Timestamp::now(), false)),
            Output::Wide => print!("{}", shown.render(Timestamp::now(), true)),
            Output::Json => println!("{}", serde_json::to_string_pretty(&shown.to_json())?),
            Output::Yaml => print!("{}", serde_yaml::to_string(&shown.to_json())?),
        }
        Ok(())
    })
    .await
}

pub async fn watch(args: WatchArgs) -> ExitCode {
    super::report_with(async {
        let (client, namespace) = args.cluster.connect().await?;
        watch_until_done(&client, &namespace, &args.name, args.exit_code).await
    })
    .await
}

/// Shows the workflow `name` as `watch` does until it finished; with `exit_code`, then exits
/// as `wait` does.
pub(super) async fn watch_until_done(
    client: &Client,
    namespace: &str,
    name: &str,
    exit_code: bool,
) -> Result<ExitCode> {
    let workflows: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    // Any change of the workflow or of its Jobs redraws; the watches are the clock.
    let workflow_changes = watcher(
        workflows,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .touched_objects()
    .map(|_| ());
    let job_changes = watcher(
        jobs,
        watcher::Config::default().labels(&jobs::selector(name)),
    )
    .touched_objects()
    .map(|_| ());
    let mut changes = Box::pin(futures::stream::select(workflow_changes, job_changes));
    // A running step's duration grows between changes too.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // To a terminal, `get` redrawn; to a file or a program, a line per change.
    let terminal = std::io::stdout().is_terminal();
    let mut seen = Rows::default();
    loop {
        let shown = Shown::read(client, namespace, name).await?;
        if terminal {
            print!("\x1b[2J\x1b[H");
            print!("{}", shown.render(Timestamp::now(), false));
        } else {
            for line in seen.changed(&shown) {
                println!("{line}");
            }
        }
        if shown.finished() {
            let failed = exit_code && !super::wait::completed(&shown.workflow);
            return Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        tokio::select! {
            change = changes.next() => if change.is_none() { return Ok(ExitCode::SUCCESS) },
            _ = tick.tick() => {}
        }
    }
}

/// The rows `watch` printed last when its output is not a terminal, by key (`""` for the
/// workflow's, the step's name for a step's), as `kubectl get -w` prints a row again only when
/// it changed.
#[derive(Debug, Default)]
struct Rows(std::collections::HashMap<String, String>);

impl Rows {
    /// The rows of `shown` that changed since last time (all of them the first time): each
    /// step's `NAME/STEP   PHASE   [ITEMS: ][exit code N: ][REASON: ]MESSAGE`, and the workflow's
    /// `NAME   PHASE   PROGRESS   MESSAGE`, first while it runs and last once it finished.
    fn changed(&mut self, shown: &Shown) -> Vec<String> {
        let name = shown.workflow.name_any();
        let status = shown.workflow.status.clone().unwrap_or_default();
        let row = |cells: &[&str]| {
            cells
                .iter()
                .filter(|c| !c.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("   ")
        };
        let workflow = row(&[
            &name,
            status.workflow_status.map_or("Pending", |p| p.as_str()),
            status.progress.as_deref().unwrap_or_default(),
            status.message.as_deref().unwrap_or_default(),
        ]);
        let mut rows = vec![(String::new(), workflow)];
        for step in &shown.steps {
            let exit = step.exit_code.map(|c| format!("exit code {c}"));
            let detail = [
                step.items.map(items).as_deref(),
                exit.as_deref(),
                step.reason.as_deref(),
                step.message.as_deref(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
            let line = row(&[
                &format!("{name}/{}", step.name),
                step.phase.as_str(),
                &detail,
            ]);
            rows.push((step.name.clone(), line));
        }
        for (i, fired) in firings(&status).enumerate() {
            rows.push((format!("\0rule {i}"), row(&[&name, "RuleFired", fired])));
        }
        if shown.finished() {
            rows.rotate_left(1);
        }
        let mut changed = Vec::new();
        for (key, line) in rows {
            if self.0.get(&key) != Some(&line) {
                changed.push(line.clone());
                self.0.insert(key, line);
            }
        }
        changed
    }
}

/// A workflow with its steps' views, as read at one moment.
pub(super) struct Shown {
    pub(super) workflow: WorkFlow,
    pub(super) steps: Vec<StepView>,
    /// What started the current run, when it is not the first.
    pub(super) new_run: Option<String>,
    /// The shared template it runs whole (`spec.workflowTemplateRef`), as `KIND/NAME`.
    pub(super) from: Option<String>,
}

impl Shown {
    pub(super) async fn read(client: &Client, namespace: &str, name: &str) -> Result<Shown> {
        let api = Api::<WorkFlow>::namespaced(client.clone(), namespace);
        let read = super::read_workflow(&api, namespace, name).await?;
        let from = (read.spec.workflow_template_ref.as_ref()).map(|r| {
            let kind = if r.cluster_scope {
                "clusterworkflowtemplate"
            } else {
                "workflowtemplate"
            };
            format!("{kind}/{}", r.name)
        });
        let workflow = workflow_operator_core::plan::prepare(&read)
            .0
            .unwrap_or(read);
        let selector = ListParams::default().labels(&jobs::selector(name));
        let jobs = Api::<Job>::namespaced(client.clone(), namespace)
            .list(&selector)
            .await
            .context("listing the workflow's jobs")?
            .items;
        let pods = Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&selector)
            .await
            .context("listing the workflow's pods")?
            .items;
        let steps = step_views(&workflow, &jobs, &pods);
        // What started a run after the first: its Event names the fields that changed.
        let new_run = match workflow.status.as_ref().and_then(|s| s.run_number) {
            Some(_) => {
                web::reads::new_run(&workflow, &web::reads::events(client, &workflow).await?)
            }
            None => None,
        };
        Ok(Shown {
            workflow,
            steps,
            new_run,
            from,
        })
    }

    fn finished(&self) -> bool {
        self.phase().is_some_and(|p| p.is_terminal())
    }

    fn phase(&self) -> Option<workflow_operator_core::lifecycle::Phase> {
        self.workflow.status.as_ref()?.workflow_status
    }

    fn to_json(&self) -> serde_json::Value {
        let status = self.workflow.status.clone().unwrap_or_default();
        json!({
            "name": self.workflow.name_any(),
            "namespace": self.workflow.namespace(),
            "phase": status.workflow_status.map(|p| p.as_str()),
            "message": status.message,
            "progress": status.progress,
            "parallelism": status.parallelism.or(self.workflow.spec.parallelism.num()),
            "rulesFired": firings(&status).collect::<Vec<_>>(),
            "from": self.from,
            "parameters": parameters(&self.workflow).into_iter().collect::<BTreeMap<_, _>>(),
            "steps": self.steps,
            "outputs": status.outputs,
        })
    }

    /// The workflow as `get` prints it; `wide` adds each step's Job and start time.
    fn render(&self, now: Timestamp, wide: bool) -> String {
        let status = self.workflow.status.clone().unwrap_or_default();
        let created = self
            .workflow
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0);
        // A finished workflow's duration ends when it finished (its phase last changed).
        let ended = status
            .status_changed
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok())
            .filter(|_| self.finished());
        let duration = created.map(|c| seconds(ended.unwrap_or(now).duration_since(c)));
        let mut out = String::new();
        let mut field = |label: &str, value: &str| {
            if !value.is_empty() {
                out.push_str(&format!("{:<10} {value}\n", format!("{label}:")));
            }
        };
        field("Name", &self.workflow.name_any());
        field("Namespace", &self.workflow.namespace().unwrap_or_default());
        field(
            "Status",
            status.workflow_status.map_or("Pending", |p| p.as_str()),
        );
        field("Message", status.message.as_deref().unwrap_or_default());
        field(
            "Created",
            &created.map(|c| c.to_string()).unwrap_or_default(),
        );
        field("Duration", &duration.map(human).unwrap_or_default());
        field("Progress", status.progress.as_deref().unwrap_or_default());
        field("From", self.from.as_deref().unwrap_or_default());
        let given: Vec<String> = (parameters(&self.workflow).into_iter())
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        field("Parameters", &given.join(", "));
        field("Run", self.new_run.as_deref().unwrap_or_default());
        let spec = &self.workflow.spec;
        field("Shutdown", spec.shutdown.map_or("", |s| s.as_str()));
        field(
            "Retry",
            &status.retry.map(|r| r.to_string()).unwrap_or_default(),
        );
        if let Some(parallelism) = status.parallelism {
            let from = (spec.parallelism.num()).map_or(String::new(), |p| format!(", spec {p}"));
            let set = format!("{parallelism} at once (parallelism set by rules{from})");
            field("Steps", &set);
        }
        out.push('\n');
        out.push_str(&self.steps_table(now, wide));
        let attempts: Vec<[String; 6]> = (self.steps.iter())
            .flat_map(|step| {
                step.previous_attempts
                    .iter()
                    .map(|a| attempt_row(&step.name, a))
            })
            .collect();
        if !attempts.is_empty() {
            out.push('\n');
            out.push_str(&table(
                ["STEP", "ATTEMPT", "PHASE", "EXIT", "REASON", "THEN WAITED"],
                &attempts,
            ));
        }
        let outputs: Vec<[String; 3]> = self
            .steps
            .iter()
            .flat_map(|step| {
                step.outputs
                    .iter()
                    .map(|(key, value)| [step.name.clone(), key.clone(), value.clone()])
            })
            .collect();
        if !outputs.is_empty() {
            out.push('\n');
            out.push_str(&table(["STEP", "OUTPUT", "VALUE"], &outputs));
        }
        let global = global_outputs(&status);
        if !global.is_empty() {
            out.push('\n');
            out.push_str(&table(["WORKFLOW OUTPUT", "VALUE"], &global));
        }
        let fired: Vec<&str> = firings(&status).collect();
        if !fired.is_empty() {
            out.push_str("\nRULES FIRED\n");
            for line in fired {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl Shown {
    /// The table of the steps: a row each, the Job and start time last when `wide`.
    fn steps_table(&self, now: Timestamp, wide: bool) -> String {
        let rows: Vec<[String; 8]> = self.steps.iter().map(|step| step_row(step, now)).collect();
        let header = [
            "STEP", "PHASE", "DURATION", "ATTEMPTS", "EXIT", "MESSAGE", "JOB", "STARTED",
        ];
        if wide {
            return table(header, &rows);
        }
        let rows: Vec<[String; 6]> = (rows.into_iter())
            .map(|[a, b, c, d, e, f, _, _]| [a, b, c, d, e, f])
            .collect();
        let [a, b, c, d, e, f, _, _] = header;
        table([a, b, c, d, e, f], &rows)
    }
}

/// A step's row of `get`: its name, phase, duration, attempts, exit code, message; its Job and
/// start time.
fn step_row(step: &StepView, now: Timestamp) -> [String; 8] {
    [
        step.name.clone(),
        step.phase.as_str().to_string(),
        step.duration(now)
            .map(|d| human(d.as_secs()))
            .unwrap_or_default(),
        if step.attempts > 0 {
            step.attempts.to_string()
        } else {
            String::new()
        },
        step.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        [
            step.items.map(items).as_deref(),
            step.reason.as_deref(),
            step.message.as_deref(),
            step.deadline.as_ref().map(|d| times_out(d, now)).as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": "),
        step.job.clone().unwrap_or_default(),
        (step.started_at).map_or(String::new(), |t| t.to_string()),
    ]
}

/// The workflow's outputs (`globalName`), a row each: a parameter's value, an artifact's step.
fn global_outputs(status: &WorkFlowStatus) -> Vec<[String; 2]> {
    (status.outputs.as_deref()).map_or_else(Vec::new, |outputs| outputs.rows())
}

/// The workflow's parameters with their values (`spec.arguments.parameters`; those of the
/// shared template it runs, once expanded), in order.
fn parameters(workflow: &WorkFlow) -> Vec<(String, String)> {
    (workflow.spec.arguments.iter())
        .flat_map(|a| &a.parameters)
        .map(|p| (p.name.clone(), p.value.clone().unwrap_or_default()))
        .collect()
}

/// Each firing of the workflow's rules (`spec.rules`), rule by rule, each rule's in order.
fn firings(status: &WorkFlowStatus) -> impl Iterator<Item = &str> {
    status
        .rules
        .iter()
        .flat_map(|rule| rule.firings.iter().map(String::as_str))
}

/// A row of the attempts table: an attempt of `step` before its latest.
fn attempt_row(step: &str, attempt: &AttemptView) -> [String; 6] {
    [
        step.to_string(),
        attempt.attempt.to_string(),
        attempt.phase.as_str().to_string(),
        attempt.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        attempt.reason.clone().unwrap_or_default(),
        attempt
            .waited
            .map(|w| human(w.max(0) as u64))
            .unwrap_or_default(),
    ]
}

/// `times out in 45s (spec.maxStepTimeout: 60s)`: a running step's deadline, as `get` shows it.
fn times_out(deadline: &Deadline, now: Timestamp) -> String {
    let left = seconds(deadline.at.duration_since(now));
    format!(
        "times out in {} ({}: {}s)",
        human(left),
        deadline.from,
        deadline.seconds
    )
}

/// `3/10 items`, `7/10 items, 2 running, 1 failed`, `2/4 items, 2 skipped`: a step that
/// fans out, as `get` shows it.
pub(super) fn items(counts: ItemCounts) -> String {
    let mut text = format!("{}/{} items", counts.succeeded, counts.total);
    if counts.running > 0 {
        text.push_str(&format!(", {} running", counts.running));
    }
    if counts.failed > 0 {
        text.push_str(&format!(", {} failed", counts.failed));
    }
    if counts.skipped > 0 {
        text.push_str(&format!(", {} skipped", counts.skipped));
    }
    text
}

fn seconds(duration: k8s_openapi::jiff::SignedDuration) -> u64 {
    duration.as_secs().max(0) as u64
}

/// `42s`, `3m07s`, `2h05m`.
pub(crate) fn human(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Columns padded to their widest cell, as kubectl prints; the last column is not padded.
pub(crate) fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}   ", width = widths[i]));
            }
        }
        text.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_operator_core::step_view::StepPhase;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human(0), "0s");
        assert_eq!(human(59), "59s");
        assert_eq!(human(187), "3m07s");
        assert_eq!(human(7500), "2h05m");
    }

    #[test]
    fn a_step_that_fans_out_shows_its_items() {
        let counts = ItemCounts {
            total: 10,
            succeeded: 3,
            ..ItemCounts::default()
        };
        assert_eq!(items(counts), "3/10 items");
        let busy = ItemCounts {
            running: 2,
            failed: 1,
            skipped: 4,
            ..counts
        };
        assert_eq!(items(busy), "3/10 items, 2 running, 1 failed, 4 skipped");
    }

    fn shown(phase: &str, progress: &str, message: &str, steps: &[(&str, StepPhase)]) -> Shown {
        let workflow: WorkFlow = serde_json::from_value(json!({
            "apiVersion": "workflow.crd.com/v1",
            "kind": "WorkFlow",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"containers": []},
            "status": {"workflow-status": phase, "progress": progress, "message": message},
        }))
        .unwrap();
        let steps = steps
            .iter()
            .map(|(name, phase)| StepView {
                attempts: 1,
                ..StepView::empty(name, *phase)
            })
            .collect();
        Shown {
            workflow,
            steps,
            new_run: None,
            from: None,
        }
    }

    #[test]
    fn get_shows_each_attempt_before_the_latest_and_the_wait_after_it() {
        let mut shown = shown("Started", "0/1", "", &[("fetch", StepPhase::Running)]);
        shown.steps[0].previous_attempts = vec![AttemptView {
            attempt: 0,
            job: "w-fetch-1".into(),
            phase: StepPhase::Failed,
            exit_code: Some(1),
            reason: Some("Error".into()),
            finished_at: None,
            waited: Some(5),
        }];
        let text = shown.render(Timestamp::now(), false);
        assert!(
            text.ends_with(
                "STEP    ATTEMPT   PHASE    EXIT   REASON   THEN WAITED\nfetch   0         Failed   1      Error    5s\n"
            ),
            "{text}"
        );
        assert_eq!(
            shown.to_json()["steps"][0]["previousAttempts"][0]["waited"],
            json!(5)
        );
    }

    #[test]
    fn watch_not_to_a_terminal_prints_one_line_per_change() {
        let mut seen = Rows::default();
        let first = shown(
            "Started",
            "0/2",
            "",
            &[("a", StepPhase::Running), ("b", StepPhase::Waiting)],
        );
        assert_eq!(
            seen.changed(&first),
            ["w   Started   0/2", "w/a   Running", "w/b   Waiting"]
        );
        // Nothing changed (a tick): nothing printed.
        assert!(seen.changed(&first).is_empty());
        let next = shown(
            "Started",
            "1/2",
            "",
            &[("a", StepPhase::Succeeded), ("b", StepPhase::Running)],
        );
        assert_eq!(
            seen.changed(&next),
            ["w   Started   1/2", "w/a   Succeeded", "w/b   Running"]
        );
        let done = shown(
            "Completed",
            "2/2",
            "2 steps succeeded",
            &[("a", StepPhase::Succeeded), ("b", StepPhase::Succeeded)],
        );
        // The workflow's end comes after its last step's.
        assert_eq!(
            seen.changed(&done),
            ["w/b   Succeeded", "w   Completed   2/2   2 steps succeeded"]
        );
    }

    #[test]
    fn get_shows_when_a_running_step_times_out_and_why_then() {
        let now: Timestamp = "2026-01-01T00:00:15Z".parse().unwrap();
        let mut shown = shown("Started", "0/1", "", &[("slow", StepPhase::Running)]);
        shown.steps[0].deadline = Some(Deadline {
            at: "2026-01-01T00:01:00Z".parse().unwrap(),
            seconds: 60,
            from: "spec.maxStepTimeout",
        });
        let text = shown.render(now, false);
        let row = text.lines().find(|l| l.starts_with("slow")).unwrap();
        assert!(
            row.ends_with("times out in 45s (spec.maxStepTimeout: 60s)"),
            "{text}"
        );
    }

    #[test]
    fn get_and_watch_show_each_rule_firing_as_a_line_and_the_parallelism_rules_set() {
        let mut shown = shown("Started", "3/20", "", &[("sim", StepPhase::Running)]);
        let status = shown.workflow.status.as_mut().unwrap();
        let fired = [
            "slow: steps.sim.duration.mean = 2 >= 1: parallelism 1 -> 2",
            "slow: steps.sim.duration.mean = 2 >= 1: parallelism 2 -> 3",
        ];
        status.parallelism = Some(3);
        status.rules = vec![workflow_operator_core::crd::RuleStatus {
            name: "slow".into(),
            fired: 2,
            last_fired_at_completions: Some(2),
            firings: fired.map(String::from).to_vec(),
        }];
        shown.workflow.spec.parallelism = Some(1.into());
        let text = shown.render(Timestamp::UNIX_EPOCH, false);
        assert!(
            text.contains("Steps:     3 at once (parallelism set by rules, spec 1)"),
            "{text}"
        );
        let section = text.split("RULES FIRED\n").nth(1).unwrap_or_default();
        assert_eq!(section.lines().collect::<Vec<_>>(), fired, "{text}");
        let mut seen = Rows::default();
        let lines = seen.changed(&shown);
        assert_eq!(
            lines[2..],
            fired.map(|f| format!("w   RuleFired   {f}")),
            "{lines:?}"
        );
        assert!(seen.changed(&shown).is_empty(), "a firing is printed once");
    }

    #[test]
    fn get_shows_each_steps_outputs() {
        let mut shown = shown("Completed", "1/1", "", &[("check", StepPhase::Succeeded)]);
        shown.steps[0].outputs = [("ok", "yes"), ("version", "1.4.2")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        let text = shown.render(Timestamp::now(), false);
        assert!(
            text.ends_with(
                "STEP    OUTPUT    VALUE\ncheck   ok        yes\ncheck   version   1.4.2\n"
            ),
            "{text}"
        );
        assert_eq!(
            shown.to_json()["steps"][0]["outputs"],
            json!({"ok": "yes", "version": "1.4.2"})
        );
    }

    #[test]
    fn get_shows_the_workflows_outputs() {
        let mut shown = shown("Completed", "1/1", "", &[("gen", StepPhase::Succeeded)]);
        let status = shown.workflow.status.as_mut().unwrap();
        status.outputs = Some(Box::new(
            serde_json::from_value(json!({
                "parameters": [{"name": "greeting", "value": "hello world"}],
                "artifacts": [{"name": "report", "step": "gen", "artifact": "out"}],
            }))
            .unwrap(),
        ));
        let text = shown.render(Timestamp::now(), false);
        assert!(
            text.ends_with("WORKFLOW OUTPUT   VALUE\ngreeting          hello world\nreport            artifact out of step gen\n"),
            "{text}"
        );
        assert_eq!(
            shown.to_json()["outputs"]["parameters"][0]["value"],
            "hello world"
        );
    }

    #[test]
    fn table_columns_line_up() {
        let rows = [
            ["a".to_string(), "Succeeded".to_string()],
            ["longer".to_string(), "Failed".to_string()],
        ];
        assert_eq!(
            table(["STEP", "PHASE"], &rows),
            "STEP     PHASE\na        Succeeded\nlonger   Failed\n"
        );
    }
}
