//! `workflow-operator cron list|get|suspend|resume|trigger`: the CronWorkFlows of a cluster,
//! one shown with its next scheduled times (in its time zone and in UTC) and its runs, a
//! schedule suspended or resumed (`spec.suspend`), and a run started now, as
//! `kubectl create job --from=cronjob/NAME`: the same WorkFlow the controller creates at a
//! scheduled time (`workflow_operator_core::cron::run_of`), for the current second.

use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::CronWorkFlow;
use workflow_operator_core::cron::plan::CONDITION_READY;
use workflow_operator_core::cron::{Schedule, run_of};
use workflow_operator_core::labels::{LABEL_CRON, LABEL_SCHEDULED};
use workflow_operator_core::names;

use super::client::ClusterArgs;
use super::get::{human, table};

/// How many scheduled times `cron get` shows.
const NEXT_TIMES: usize = 5;

#[derive(Debug, Args)]
pub struct CronArgs {
    #[command(subcommand)]
    command: CronCommand,
}

#[derive(Debug, Subcommand)]
enum CronCommand {
    /// List the CronWorkFlows of the namespace (all namespaces with `-A`): schedules, time
    /// zone, whether suspended, active runs, when the last run started (`-`: none yet), the
    /// next scheduled time (`-` while suspended), and whether the schedule is healthy (READY,
    /// and MESSAGE when not).
    #[command(after_help = "Examples:\n  \
        workflow-operator cron list\n  \
        workflow-operator cron list -A")]
    List(ListArgs),
    /// Show one CronWorkFlow: its schedules, time zone and policies, its status, its next five
    /// scheduled times (in its time zone and in UTC) and its runs, newest first.
    #[command(after_help = "Examples:\n  \
        workflow-operator cron get nightly\n  \
        workflow-operator cron get nightly -n ci -o json")]
    Get(GetArgs),
    /// Suspend a CronWorkFlow: no run starts until it is resumed (sets `spec.suspend`); runs
    /// already started go on.
    #[command(after_help = "Examples:\n  \
        workflow-operator cron suspend nightly\n  \
        workflow-operator cron suspend nightly -n ci")]
    Suspend(NameArgs),
    /// Resume a suspended CronWorkFlow: runs start again at their times; of the times missed
    /// meanwhile at most the latest starts (clears `spec.suspend`).
    #[command(after_help = "Examples:\n  \
        workflow-operator cron resume nightly")]
    Resume(NameArgs),
    /// Start a run of a CronWorkFlow now, as `kubectl create job --from=cronjob/NAME`: the
    /// WorkFlow its schedule would start, named for the current second, labelled and owned as
    /// the scheduled runs are. Prints the run's name.
    #[command(after_help = "Examples:\n  \
        workflow-operator cron trigger nightly\n  \
        workflow-operator watch $(workflow-operator cron trigger nightly -o name)")]
    Trigger(TriggerArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The CronWorkFlows of every namespace.
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct GetArgs {
    /// The CronWorkFlow's name.
    name: String,
    /// `text` for people; `yaml` or `json`: the CronWorkFlow, its next times and its runs.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Yaml,
    Json,
}

#[derive(Debug, Args)]
struct NameArgs {
    /// The CronWorkFlow's name.
    name: String,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
struct TriggerArgs {
    #[command(flatten)]
    target: NameArgs,
    /// `name`: print only the run's name (for scripts).
    #[arg(long, short = 'o', value_parser = ["name"])]
    output: Option<String>,
}

/// Runs `cron`'s subcommand.
pub async fn cron(args: CronArgs) -> ExitCode {
    super::report(async {
        match args.command {
            CronCommand::List(args) => list(args).await,
            CronCommand::Get(args) => get(args).await,
            CronCommand::Suspend(args) => set_suspend(args, true).await,
            CronCommand::Resume(args) => set_suspend(args, false).await,
            CronCommand::Trigger(args) => trigger(args).await,
        }
    })
    .await
}

async fn list(args: ListArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<CronWorkFlow> = if args.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &namespace)
    };
    let crons = api
        .list(&ListParams::default())
        .await
        .context("listing the CronWorkFlows")?;
    let runs = all_runs(&api, args.all_namespaces).await?;
    let now = Timestamp::now();
    let rows: Vec<[String; 10]> = (crons.items.iter())
        .map(|c| list_row(c, last_run(&runs, c), now))
        .collect();
    let header = [
        "NAMESPACE",
        "NAME",
        "SCHEDULES",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST",
        "NEXT",
        "READY",
        "MESSAGE",
    ];
    if args.all_namespaces {
        print!("{}", table(header, &rows));
    } else {
        let [_, header @ ..] = header;
        let rows: Vec<[String; 9]> = rows.into_iter().map(|[_, row @ ..]| row).collect();
        print!("{}", table(header, &rows));
    }
    Ok(())
}

/// The runs of every CronWorkFlow where `crons` lists them (labelled with their cron).
async fn all_runs(crons: &Api<CronWorkFlow>, everywhere: bool) -> Result<Vec<WorkFlow>> {
    let client = crons.clone().into_client();
    let api: Api<WorkFlow> = match (everywhere, crons.namespace()) {
        (false, Some(namespace)) => Api::namespaced(client, namespace),
        _ => Api::all(client),
    };
    let runs = api
        .list(&ListParams::default().labels(LABEL_CRON))
        .await
        .context("listing the CronWorkFlows' runs")?;
    Ok(runs.items)
}

/// When the newest run of `cron` among `runs` was created: `None` when none ran (or all were
/// deleted since).
fn last_run(runs: &[WorkFlow], cron: &CronWorkFlow) -> Option<Timestamp> {
    (runs.iter())
        .filter(|run| run.namespace() == cron.namespace())
        .filter(|run| run.labels().get(LABEL_CRON) == Some(&cron.name_any()))
        .filter_map(|run| Some(run.metadata.creation_timestamp.as_ref()?.0))
        .max()
}

/// A CronWorkFlow as `cron list` shows it, with its namespace first: LAST is its newest run's
/// start (`-` when none ran), NEXT `-` while it is suspended, READY and MESSAGE its `Ready`
/// condition.
fn list_row(cron: &CronWorkFlow, last: Option<Timestamp>, now: Timestamp) -> [String; 10] {
    let status = cron.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_READY);
    let next = match status.next_schedule_time {
        Some(t) if !cron.spec.suspend => format!("in {}", since(t.0, now)),
        _ => "-".into(),
    };
    [
        cron.namespace().unwrap_or_default(),
        cron.name_any(),
        cron.spec.schedules.join(", "),
        zone_name(cron),
        cron.spec.suspend.to_string(),
        status.active.len().to_string(),
        last.map_or("-".into(), |t| format!("{} ago", since(now, t))),
        next,
        ready.map_or("Unknown".into(), |c| c.status.clone()),
        ready
            .filter(|c| c.status != "True")
            .map_or(String::new(), |c| c.message.clone()),
    ]
}

/// `spec.timezone`, or `UTC`.
fn zone_name(cron: &CronWorkFlow) -> String {
    cron.spec
        .timezone
        .clone()
        .filter(|z| !z.is_empty())
        .unwrap_or_else(|| "UTC".into())
}

/// `later - earlier` as `get` prints durations (`3m07s`); `0s` when it is negative.
fn since(later: Timestamp, earlier: Timestamp) -> String {
    human(later.duration_since(earlier).as_secs().max(0) as u64)
}

/// What `cron get` shows beyond the CronWorkFlow: its next times and its runs.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    cron_work_flow: CronWorkFlow,
    /// The next scheduled times; none when the schedule does not parse.
    next_times: Vec<NextTime>,
    /// Why the schedule does not parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule_error: Option<String>,
    runs: Vec<RunRow>,
}

/// A scheduled time in the CronWorkFlow's zone and in UTC.
#[derive(Debug, Serialize)]
pub(crate) struct NextTime {
    pub(crate) zoned: String,
    pub(crate) utc: String,
}

/// A run as `cron get` lists it.
#[derive(Debug, Serialize)]
struct RunRow {
    name: String,
    scheduled: String,
    phase: String,
}

async fn get(args: GetArgs) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let cron = read_cron(&client, &namespace, &args.name).await?;
    let runs = runs_of(&client, &namespace, &cron).await?;
    let (next_times, schedule_error) = match next_times(&cron, Timestamp::now()) {
        Ok(times) => (times, None),
        Err(why) => (Vec::new(), Some(why.join("; "))),
    };
    let shown = Shown {
        next_times,
        schedule_error,
        cron_work_flow: cron,
        runs,
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&shown)?),
        Output::Yaml => print!("{}", serde_yaml::to_string(&shown)?),
        Output::Text => print!("{}", describe(&shown, Timestamp::now())),
    }
    Ok(())
}

/// The next [`NEXT_TIMES`] scheduled times of `cron` after `now`, as the controller computes
/// them (`@every` counts from the creation, or from `now` before one); `validate` shows them
/// too.
///
/// # Errors
/// Each schedule and a time zone that does not parse, named.
pub(crate) fn next_times(
    cron: &CronWorkFlow,
    now: Timestamp,
) -> Result<Vec<NextTime>, Vec<String>> {
    let anchor = cron
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let schedule = Schedule::parse(&cron.spec, anchor)?;
    let times = std::iter::successors(schedule.next_after(now), |&t| schedule.next_after(t));
    Ok(times
        .take(NEXT_TIMES)
        .map(|t| NextTime {
            zoned: in_zone(t, schedule.zone()),
            utc: t.to_string(),
        })
        .collect())
}

/// `2026-11-28 02:00:00 CET (Europe/Berlin)`.
fn in_zone(time: Timestamp, zone: &TimeZone) -> String {
    let zoned = time.to_zoned(zone.clone());
    let name = zone.iana_name().unwrap_or("UTC");
    format!("{} ({name})", zoned.strftime("%Y-%m-%d %H:%M:%S %Z"))
}

/// `cron get`'s text.
fn describe(shown: &Shown, now: Timestamp) -> String {
    let cron = &shown.cron_work_flow;
    let mut out = spec_lines(cron);
    out.push_str(&status_lines(cron, now));
    out.push('\n');
    if let Some(why) = &shown.schedule_error {
        out.push_str(&format!("No next times: {why}\n"));
    } else {
        let rows: Vec<[String; 2]> = shown
            .next_times
            .iter()
            .map(|t| [t.zoned.clone(), t.utc.clone()])
            .collect();
        let zone = format!("NEXT ({})", zone_name(cron));
        out.push_str(&table([zone.as_str(), "UTC"], &rows));
    }
    out.push('\n');
    if shown.runs.is_empty() {
        out.push_str("No runs.\n");
    } else {
        let rows: Vec<[String; 3]> = shown
            .runs
            .iter()
            .map(|r| [r.name.clone(), r.scheduled.clone(), r.phase.clone()])
            .collect();
        out.push_str(&table(["RUN", "SCHEDULED", "PHASE"], &rows));
    }
    out
}

/// The name and the spec's fields, one a line.
fn spec_lines(cron: &CronWorkFlow) -> String {
    let spec = &cron.spec;
    let or_default = |value: Option<i32>, default: i32| value.unwrap_or(default).to_string();
    let lines = [
        ("Name", cron.name_any()),
        ("Namespace", cron.namespace().unwrap_or_default()),
        ("Schedules", spec.schedules.join(", ")),
        ("Timezone", zone_name(cron)),
        ("Concurrency", format!("{:?}", spec.concurrency_policy)),
        ("Catch up", format!("{:?}", spec.catch_up)),
        (
            "Deadline",
            spec.starting_deadline_seconds
                .map_or("none".into(), |s| format!("{s}s")),
        ),
        ("Suspend", spec.suspend.to_string()),
        (
            "History",
            format!(
                "{} succeeded, {} failed",
                or_default(spec.successful_runs_history_limit, 3),
                or_default(spec.failed_runs_history_limit, 1)
            ),
        ),
    ];
    field_lines(&lines)
}

/// The status's fields, one a line.
fn status_lines(cron: &CronWorkFlow, now: Timestamp) -> String {
    let status = cron.status.clone().unwrap_or_default();
    let time =
        |t: Option<Time>| t.map_or("-".into(), |t| format!("{} ({} ago)", t.0, since(now, t.0)));
    let active: Vec<String> = status.active.iter().map(|r| r.name.clone()).collect();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_READY)
        .map_or("-".into(), |c| {
            format!("{} ({}): {}", c.status, c.reason, c.message)
        });
    let lines = [
        (
            "Active",
            if active.is_empty() {
                "-".into()
            } else {
                active.join(", ")
            },
        ),
        ("Last schedule", time(status.last_schedule_time)),
        ("Last success", time(status.last_successful_time)),
        ("Ready", ready),
    ];
    field_lines(&lines)
}

/// `Label:        value` lines, the values aligned.
fn field_lines(lines: &[(&str, String)]) -> String {
    lines
        .iter()
        .map(|(label, value)| format!("{:<15}{value}\n", format!("{label}:")))
        .collect()
}

/// The CronWorkFlow `name` in `namespace`, or an error saying it does not exist there.
async fn read_cron(client: &Client, namespace: &str, name: &str) -> Result<CronWorkFlow> {
    let api: Api<CronWorkFlow> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .with_context(|| format!("reading cronworkflow {namespace}/{name}"))?
        .with_context(|| format!("cronworkflow {name} not found in namespace {namespace}"))
}

/// `cron`'s runs (the WorkFlows with its label that it owns), newest first.
async fn runs_of(client: &Client, namespace: &str, cron: &CronWorkFlow) -> Result<Vec<RunRow>> {
    let api: Api<WorkFlow> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{LABEL_CRON}={}", names::label_value(&cron.name_any()));
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await
        .context("listing the runs")?;
    let uid = cron.uid().unwrap_or_default();
    let mut runs: Vec<(i64, RunRow)> = listed
        .items
        .iter()
        .filter(|w| w.owner_references().iter().any(|o| o.uid == uid))
        .map(run_row)
        .collect();
    runs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.name.cmp(&a.1.name)));
    Ok(runs.into_iter().map(|(_, row)| row).collect())
}

/// A run's scheduled time (unix seconds, from its label) and its row.
fn run_row(workflow: &WorkFlow) -> (i64, RunRow) {
    let scheduled: i64 = workflow
        .labels()
        .get(LABEL_SCHEDULED)
        .and_then(|s| s.parse().ok())
        .unwrap_or_default();
    let phase = workflow
        .status
        .as_ref()
        .and_then(|s| s.workflow_status)
        .map_or("Pending", |p| p.as_str());
    let row = RunRow {
        name: workflow.name_any(),
        scheduled: Timestamp::from_second(scheduled)
            .map(|t| t.to_string())
            .unwrap_or_default(),
        phase: phase.into(),
    };
    (scheduled, row)
}

/// Sets `spec.suspend` to `suspend`, with a merge patch conditional on the resourceVersion
/// read; a CronWorkFlow that changed in between is read again.
async fn set_suspend(args: NameArgs, suspend: bool) -> Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let api: Api<CronWorkFlow> = Api::namespaced(client.clone(), &namespace);
    let name = &args.name;
    for _ in 0..super::control::ATTEMPTS {
        let cron = read_cron(&client, &namespace, name).await?;
        if cron.spec.suspend == suspend {
            println!("{}", already(name, suspend));
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": cron.metadata.resource_version},
            "spec": {"suspend": suspend},
        });
        let params = PatchParams {
            field_manager: Some(super::FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {
                println!("{}", changed(name, suspend));
                return Ok(());
            }
            Err(kube::Error::Api(response)) if response.code == 409 => continue,
            Err(error) => return Err(error.into()),
        }
    }
    bail!("cronworkflow {name} kept changing while it was being updated; try again")
}

/// What `cron suspend|resume` says when `spec.suspend` is `suspend` already.
fn already(name: &str, suspend: bool) -> String {
    if suspend {
        format!("cronworkflow {name} is already suspended")
    } else {
        format!("cronworkflow {name} is not suspended")
    }
}

/// What `cron suspend|resume` says when it set `spec.suspend` to `suspend`.
fn changed(name: &str, suspend: bool) -> String {
    if suspend {
        format!(
            "cronworkflow {name} suspended: no run starts until it is resumed (spec.suspend: true)"
        )
    } else {
        format!(
            "cronworkflow {name} resumed: runs start at their times again (spec.suspend: false)"
        )
    }
}

/// Creates the run of the current second, as the controller would create a scheduled one.
async fn trigger(args: TriggerArgs) -> Result<()> {
    let NameArgs { name, cluster } = args.target;
    let (client, namespace) = cluster.connect().await?;
    let cron = read_cron(&client, &namespace, &name).await?;
    let now = Timestamp::now().as_second();
    let run = run_of(&cron, now)
        .map_err(|why| anyhow!("cronworkflow {name} cannot start a run: {why}"))?;
    let run_name = run.name_any();
    let api: Api<WorkFlow> = Api::namespaced(client, &namespace);
    let params = PostParams {
        field_manager: Some(super::FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &run).await {
        Ok(_) if args.output.is_some() => println!("{run_name}"),
        Ok(_) => println!("workflow {run_name} created (a run of cronworkflow {name}, now)"),
        Err(kube::Error::Api(response)) if response.code == 409 => bail!(
            "workflow {run_name} exists already: cronworkflow {name} has a run for this second; try again in a second"
        ),
        Err(error) => {
            return Err(error).with_context(|| format!("creating workflow {run_name}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(schedules: &[&str], timezone: Option<&str>) -> CronWorkFlow {
        let spec = serde_json::from_value(json!({
            "schedules": schedules,
            "timezone": timezone,
            "workflowSpec": {"containers": [{"stepName": "a", "image": "busybox"}]},
        }))
        .unwrap();
        let mut cron = CronWorkFlow::new("nightly", spec);
        cron.metadata.creation_timestamp = Some(Time("2026-03-01T00:00:00Z".parse().unwrap()));
        cron
    }

    #[test]
    fn the_next_times_are_in_the_zone_and_in_utc_across_a_dst_change() {
        let cron = cron(&["0 2 * * *"], Some("Europe/Berlin"));
        let now: Timestamp = "2026-03-27T12:00:00Z".parse().unwrap();
        let times = next_times(&cron, now).unwrap();
        let shown: Vec<(&str, &str)> = times
            .iter()
            .map(|t| (t.zoned.as_str(), t.utc.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "2026-03-28 02:00:00 CET (Europe/Berlin)",
                    "2026-03-28T01:00:00Z"
                ),
                // 02:00 does not exist on the 29th: the first instant after the gap.
                (
                    "2026-03-29 03:00:00 CEST (Europe/Berlin)",
                    "2026-03-29T01:00:00Z"
                ),
                (
                    "2026-03-30 02:00:00 CEST (Europe/Berlin)",
                    "2026-03-30T00:00:00Z"
                ),
                (
                    "2026-03-31 02:00:00 CEST (Europe/Berlin)",
                    "2026-03-31T00:00:00Z"
                ),
                (
                    "2026-04-01 02:00:00 CEST (Europe/Berlin)",
                    "2026-04-01T00:00:00Z"
                ),
            ]
        );
    }

    #[test]
    fn a_schedule_that_does_not_parse_says_why_instead_of_times() {
        let cron = cron(&["every day"], None);
        let why = next_times(&cron, Timestamp::now()).unwrap_err().join("; ");
        assert!(why.contains("schedules[0] \"every day\""), "{why}");
    }
}
