//! The CronWorkFlows on the list pages: each with its schedules, its last and next time, and
//! its runs (links to their pages), newest first.

use std::fmt::Write as _;
use std::sync::Arc;

use kube::ResourceExt;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::CronWorkFlow;
use workflow_operator_core::labels::LABEL_CRON;

use super::escape::Escaped;
use super::pages::workflow_path;

/// How many runs a row links to.
const RUNS_SHOWN: usize = 5;

/// The section listing `crons` with their runs among `workflows`; empty without crons.
pub fn schedule_list(crons: &[Arc<CronWorkFlow>], workflows: &[Arc<WorkFlow>]) -> String {
    if crons.is_empty() {
        return String::new();
    }
    let mut sorted: Vec<&Arc<CronWorkFlow>> = crons.iter().collect();
    sorted.sort_by_key(|c| (c.namespace(), c.name_any()));
    let mut rows = String::new();
    for cron in sorted {
        row(&mut rows, cron, workflows);
    }
    format!(
        r#"<section id="schedules" data-live-part><h2>Schedules</h2><table class="workflows"><thead><tr><th>Name</th><th>Schedules</th><th>Suspended</th><th>Last</th><th>Next</th><th>Runs</th></tr></thead><tbody>{rows}</tbody></table></section>"#
    )
}

fn row(out: &mut String, cron: &CronWorkFlow, workflows: &[Arc<WorkFlow>]) {
    let (namespace, name) = (cron.namespace().unwrap_or_default(), cron.name_any());
    let status = cron.status.as_ref();
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or(String::new(), |t| t.0.to_string())
    };
    let mut runs: Vec<&Arc<WorkFlow>> = workflows
        .iter()
        .filter(|w| w.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|w| w.labels().get(LABEL_CRON) == Some(&name))
        .collect();
    runs.sort_by_key(|w| std::cmp::Reverse(w.name_any()));
    let links: Vec<String> = runs
        .iter()
        .take(RUNS_SHOWN)
        .map(|w| {
            let phase = w
                .status
                .as_ref()
                .and_then(|s| s.workflow_status)
                .map_or("Pending".into(), |p| p.to_string());
            format!(
                r#"<a href="{}" class="phase-{}" data-run="{}">{}</a>"#,
                workflow_path(&namespace, &w.name_any()),
                Escaped(&phase),
                Escaped(&w.name_any()),
                Escaped(&w.name_any())
            )
        })
        .collect();
    let _ = write!(
        out,
        r#"<tr data-cron="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td data-next>{}</td><td>{}</td></tr>"#,
        Escaped(&name),
        Escaped(&name),
        Escaped(&cron.spec.schedules.join(", ")),
        cron.spec.suspend,
        Escaped(&time(status.and_then(|s| s.last_schedule_time.as_ref()))),
        Escaped(&time(status.and_then(|s| s.next_schedule_time.as_ref()))),
        links.join(" "),
    );
}
