//! The pages, as HTML strings: the workflow lists and a workflow's page (summary, DAG, step
//! panel, Events). Pure: given what was read, they render; every user string goes through
//! [`escape`](super::escape). The parts of a page that change carry `data-live-part` and an
//! `id`, which the embedded script swaps for fresh ones when the server says something changed.

use std::fmt::Write as _;
use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::escape::{Escaped, query_value};
use super::graph::{self, Drawing};
use super::reads::{self, StepDetail};
use super::svg;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::step_view::StepView;

/// A whole page: `title`, the breadcrumb links, `body`, and the server-sent events URL the
/// script listens to (`live`).
pub fn document(title: &str, crumbs: &[(String, String)], live: &str, body: &str) -> String {
    let mut nav = String::from(r#"<a href="/">workflows</a>"#);
    for (href, text) in crumbs {
        let _ = write!(
            nav,
            r#" / <a href="{}">{}</a>"#,
            Escaped(href),
            Escaped(text)
        );
    }
    format!(
        concat!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
            "<title>{title}</title><link rel=\"stylesheet\" href=\"/assets/style.css\"></head>",
            "<body data-live=\"{live}\"><header><nav>{nav}</nav></header><main>{body}</main>",
            "<script src=\"/assets/live.js\"></script></body></html>\n"
        ),
        title = Escaped(title),
        live = Escaped(live),
        nav = nav,
        body = body,
    )
}

/// The path of a workflow's page.
pub fn workflow_path(namespace: &str, name: &str) -> String {
    format!(
        "/namespaces/{}/workflows/{}",
        query_value(namespace),
        query_value(name)
    )
}

/// The list of `workflows` (of one namespace, or of all when `namespace` is `None`), newest
/// first, with status, progress, age and duration.
pub fn workflow_list(
    namespace: Option<&str>,
    workflows: &[Arc<WorkFlow>],
    now: Timestamp,
) -> String {
    let mut sorted: Vec<&Arc<WorkFlow>> = workflows.iter().collect();
    sorted.sort_by_key(|wf| {
        std::cmp::Reverse((
            wf.metadata.creation_timestamp.as_ref().map(|t| t.0),
            wf.name_any(),
        ))
    });
    let mut rows = String::new();
    for wf in sorted {
        let (ns, name) = (wf.namespace().unwrap_or_default(), wf.name_any());
        let status = wf.status.as_ref();
        let phase = status
            .and_then(|s| s.workflow_status)
            .map_or("Pending".to_string(), |p| p.to_string());
        let namespace_cell = if namespace.is_none() {
            format!(
                r#"<td><a href="/namespaces/{}/workflows">{}</a></td>"#,
                query_value(&ns),
                Escaped(&ns)
            )
        } else {
            String::new()
        };
        let _ = write!(
            rows,
            r#"<tr data-workflow="{}" data-status="{}">{namespace_cell}<td><a href="{}">{}</a></td><td class="phase-{}">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="message">{}</td></tr>"#,
            Escaped(&name),
            Escaped(&phase),
            workflow_path(&ns, &name),
            Escaped(&name),
            Escaped(&phase),
            Escaped(&phase),
            Escaped(status.and_then(|s| s.progress.as_deref()).unwrap_or("")),
            age(wf, now),
            duration(wf, now),
            Escaped(status.and_then(|s| s.message.as_deref()).unwrap_or("")),
        );
    }
    let namespace_head = if namespace.is_none() {
        "<th>Namespace</th>"
    } else {
        ""
    };
    let heading = match namespace {
        Some(ns) => format!("Workflows in {}", Escaped(ns)),
        None => "Workflows in every watched namespace".to_string(),
    };
    let empty = if rows.is_empty() {
        r#"<p class="empty">No workflows yet.</p>"#
    } else {
        ""
    };
    format!(
        r#"<section id="list" data-live-part><h1>{heading}</h1><table class="workflows"><thead><tr>{namespace_head}<th>Name</th><th>Status</th><th>Progress</th><th>Age</th><th>Duration</th><th>Message</th></tr></thead><tbody>{rows}</tbody></table>{empty}</section>"#
    )
}

/// What a workflow's page shows besides the workflow itself.
pub struct WorkflowExtras {
    /// The selected step (`?step=`): its panel, or why it cannot be shown.
    pub step: Option<(String, Result<Option<StepDetail>, String>)>,
    /// The workflow's Events, or why they cannot be read.
    pub events: Result<Vec<Event>, String>,
}

/// A workflow's page body: summary, DAG, step panel, Events.
pub fn workflow_page(wf: &WorkFlow, extras: &WorkflowExtras, now: Timestamp) -> String {
    let mut out = String::new();
    let new_run = reads::new_run(wf, extras.events.as_deref().unwrap_or_default());
    summary(&mut out, wf, new_run.as_deref(), now);
    let drawing = graph::drawing(wf);
    dag(&mut out, wf, &drawing);
    if let Some((name, detail)) = &extras.step {
        step_panel(&mut out, name, detail, now);
    }
    events(&mut out, &extras.events);
    out
}

/// The workflow's title: its name, phase and progress (the browser tab shows it).
pub fn workflow_title(wf: &WorkFlow) -> String {
    let status = wf.status.as_ref();
    format!(
        "{} · {} {}",
        wf.name_any(),
        status
            .and_then(|s| s.workflow_status)
            .map_or("Pending".to_string(), |p| p.to_string()),
        status.and_then(|s| s.progress.as_deref()).unwrap_or("")
    )
    .trim_end()
    .to_string()
}

/// The workflow's phase, progress, times and message, what started its run when it is not
/// its first (`new_run`), and what its rules did.
fn summary(out: &mut String, wf: &WorkFlow, new_run: Option<&str>, now: Timestamp) {
    let status = wf.status.as_ref();
    let phase = status
        .and_then(|s| s.workflow_status)
        .map_or("Pending".to_string(), |p| p.to_string());
    let _ = write!(
        out,
        r#"<section id="summary" data-live-part data-status="{}"><h1>{}</h1><dl><dt>Status</dt><dd class="phase-{}">{}</dd><dt>Progress</dt><dd>{}</dd><dt>Age</dt><dd>{}</dd><dt>Duration</dt><dd>{}</dd>"#,
        Escaped(&phase),
        Escaped(&wf.name_any()),
        Escaped(&phase),
        Escaped(&phase),
        Escaped(status.and_then(|s| s.progress.as_deref()).unwrap_or("")),
        age(wf, now),
        duration(wf, now),
    );
    if let Some(message) = status.and_then(|s| s.message.as_deref()) {
        let _ = write!(
            out,
            "<dt>Message</dt><dd class=\"message\">{}</dd>",
            Escaped(message)
        );
    }
    if let Some(story) = new_run {
        let _ = write!(out, "<dt>Run</dt><dd class=\"run\">{}</dd>", Escaped(story));
    }
    // The parallelism the workflow's rules set, and what each firing said.
    if let Some(parallelism) = status.and_then(|s| s.parallelism) {
        let _ = write!(
            out,
            "<dt>Parallelism</dt><dd class=\"parallelism\">{parallelism} (set by rules)</dd>"
        );
    }
    // The workflow's outputs (`globalName`), as `get` lists them.
    let outputs = status.and_then(|s| s.outputs.as_deref());
    for [name, value] in outputs.map(|o| o.rows()).unwrap_or_default() {
        let _ = write!(
            out,
            "<dt>Output {}</dt><dd class=\"workflow-output\">{}</dd>",
            Escaped(&name),
            Escaped(&value)
        );
    }
    let firings = status
        .into_iter()
        .flat_map(|s| &s.rules)
        .flat_map(|r| &r.firings);
    for fired in firings {
        let _ = write!(
            out,
            "<dt>Rule fired</dt><dd class=\"rule\">{}</dd>",
            Escaped(fired)
        );
    }
    out.push_str("</dl></section>");
}

fn dag(out: &mut String, wf: &WorkFlow, drawing: &Result<Drawing, String>) {
    out.push_str(r#"<section id="dag" data-live-part><h2>Steps</h2>"#);
    match drawing {
        Err(problem) => {
            let _ = write!(
                out,
                r#"<p class="problem">The DAG cannot be drawn: {}</p>"#,
                Escaped(problem)
            );
        }
        Ok(drawing) => {
            if let Some(steps) = drawing.collapsed_from {
                let _ = write!(
                    out,
                    r#"<p class="collapsed">{steps} steps in {} layers: each box is a band of layers, counting its steps by phase (more than {} steps are not drawn one by one). The steps that run, wait in a queue or failed are listed below; open one with <code>?step=NAME</code>.</p>"#,
                    drawing.layout.layers.len().max(1),
                    graph::MAX_NODES
                );
            }
            out.push_str(r#"<div class="dag-scroll">"#);
            out.push_str(&svg::render(drawing));
            out.push_str("</div>");
            if drawing.collapsed_from.is_some() {
                notable_steps(out, wf);
            }
        }
    }
    out.push_str("</section>");
}

/// The steps `status.steps` lists (running, queued, failed, timed out), as links: what a
/// collapsed drawing cannot show one by one.
fn notable_steps(out: &mut String, wf: &WorkFlow) {
    out.push_str(r#"<table class="notable"><thead><tr><th>Step</th><th>Phase</th><th>Message</th></tr></thead><tbody>"#);
    for entry in wf.status.iter().flat_map(|s| &s.steps) {
        let _ = write!(
            out,
            r#"<tr data-step="{}" data-phase="{}"><td><a href="?step={}">{}</a></td><td class="phase-{}">{}</td><td class="message">{}</td></tr>"#,
            Escaped(&entry.name),
            entry.phase.as_str(),
            query_value(&entry.name),
            Escaped(&entry.name),
            entry.phase.as_str(),
            entry.phase.as_str(),
            Escaped(entry.message.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>");
}

fn step_panel(
    out: &mut String,
    name: &str,
    detail: &Result<Option<StepDetail>, String>,
    now: Timestamp,
) {
    let _ = write!(
        out,
        r#"<section id="step" data-live-part data-step="{}"><h2>Step {}</h2>"#,
        Escaped(name),
        Escaped(name)
    );
    match detail {
        Err(problem) => {
            let _ = write!(out, r#"<p class="problem">{}</p>"#, Escaped(problem));
        }
        Ok(None) => {
            let _ = write!(
                out,
                r#"<p class="problem">The workflow has no step {}.</p>"#,
                Escaped(name)
            );
        }
        Ok(Some(detail)) => {
            step_facts(out, &detail.view, now);
            if !detail.outputs.is_empty() {
                out.push_str("<h3>Outputs</h3><dl class=\"outputs\">");
                for (key, value) in &detail.outputs {
                    let _ = write!(
                        out,
                        "<dt>{}</dt><dd><code>{}</code></dd>",
                        Escaped(key),
                        Escaped(value)
                    );
                }
                out.push_str("</dl>");
            }
            if !detail.failed_items.is_empty() {
                out.push_str("<h3>Failed items</h3>");
                for item in &detail.failed_items {
                    step_facts(out, item, now);
                }
            }
            out.push_str("<h3>Logs</h3>");
            match &detail.gone {
                Some(why) => {
                    let _ = write!(out, r#"<p class="empty">No log: {}.</p>"#, Escaped(why));
                }
                None if detail.logs.is_empty() => {
                    out.push_str(r#"<p class="empty">No pod has run for this step (yet).</p>"#);
                }
                None => {}
            }
            for log in &detail.logs {
                let _ = write!(out, "<h4>{}</h4>", Escaped(&log.title));
                match &log.text {
                    Ok(text) => {
                        let _ = write!(out, r#"<pre class="log">{}</pre>"#, Escaped(text));
                    }
                    Err(problem) => {
                        let _ = write!(out, r#"<p class="problem">{}</p>"#, Escaped(problem));
                    }
                }
            }
            if detail.more_pods > 0 {
                let _ = write!(
                    out,
                    r#"<p class="empty">{} more pods of this step are not shown (at most {} are); <code>workflow-operator logs --step</code> prints them all.</p>"#,
                    detail.more_pods,
                    reads::MAX_LOGS
                );
            }
        }
    }
    out.push_str("</section>");
}

/// A step's row as `get` shows it: phase, times, attempts, exit code, reason, message, Job.
fn step_facts(out: &mut String, view: &StepView, now: Timestamp) {
    let phase = view.phase.as_str();
    let _ = write!(
        out,
        r#"<dl class="facts" data-step="{}" data-phase="{phase}"><dt>Name</dt><dd>{}</dd><dt>Phase</dt><dd class="phase-{phase}">{phase}</dd>"#,
        Escaped(&view.name),
        Escaped(&view.name),
    );
    let mut fact = |term: &str, value: Option<String>| {
        if let Some(value) = value {
            let _ = write!(out, "<dt>{term}</dt><dd>{}</dd>", Escaped(&value));
        }
    };
    fact("Started", view.started_at.map(|t| t.to_string()));
    fact("Finished", view.finished_at.map(|t| t.to_string()));
    fact("Duration", view.duration(now).map(|d| short(d.as_secs())));
    fact("Attempts", Some(view.attempts.to_string()));
    fact(
        "Items",
        view.items.map(|i| {
            format!(
                "{}/{} succeeded, {} running, {} failed, {} skipped",
                i.succeeded, i.total, i.running, i.failed, i.skipped
            )
        }),
    );
    fact("Exit code", view.exit_code.map(|c| c.to_string()));
    fact("Reason", view.reason.clone());
    fact("Message", view.message.clone());
    fact("Job", view.job.clone());
    out.push_str("</dl>");
}

fn events(out: &mut String, events: &Result<Vec<Event>, String>) {
    out.push_str(r#"<section id="events" data-live-part><h2>Events</h2>"#);
    match events {
        Err(problem) => {
            let _ = write!(out, r#"<p class="problem">{}</p>"#, Escaped(problem));
        }
        Ok(events) if events.is_empty() => out.push_str(r#"<p class="empty">No Events.</p>"#),
        Ok(events) => {
            out.push_str("<table class=\"events\"><thead><tr><th>Time</th><th>Type</th><th>Reason</th><th>Message</th></tr></thead><tbody>");
            for event in events {
                let _ = write!(
                    out,
                    r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="message">{}</td></tr>"#,
                    reads::event_time(event)
                        .map(to_the_second)
                        .unwrap_or_default(),
                    Escaped(event.type_.as_deref().unwrap_or("")),
                    Escaped(event.reason.as_deref().unwrap_or("")),
                    Escaped(event.note.as_deref().unwrap_or("")),
                );
            }
            out.push_str("</tbody></table>");
        }
    }
    out.push_str("</section>");
}

/// An Event's time as `2026-12-06T12:40:24Z`: to the second, as `kubectl` and the step facts
/// show times (an Event's own is to the microsecond, which only makes the column wide).
fn to_the_second(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second()).map_or_else(|_| time.to_string(), |t| t.to_string())
}

/// How long ago the workflow was created.
fn age(wf: &WorkFlow, now: Timestamp) -> String {
    wf.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| short(seconds_between(t.0, now)))
        .unwrap_or_default()
}

/// How long the workflow has run: from its creation to when it finished, or to now.
fn duration(wf: &WorkFlow, now: Timestamp) -> String {
    let Some(created) = wf.metadata.creation_timestamp.as_ref().map(|t| t.0) else {
        return String::new();
    };
    let status = wf.status.as_ref();
    let finished = status
        .filter(|s| s.workflow_status.is_some_and(|p| p.is_terminal()))
        .and_then(|s| s.status_changed.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok());
    short(seconds_between(created, finished.unwrap_or(now)))
}

fn seconds_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.as_second() - from.as_second()).unwrap_or(0)
}

/// A duration as kubectl prints ages: `42s`, `3m5s`, `2h10m`, `3d4h`.
fn short(seconds: u64) -> String {
    let (m, h, d) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{m}m{}s", seconds % 60),
        3600..86_400 => format!("{h}h{}m", m % 60),
        _ => format!("{d}d{}h", h % 24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubectl_ages() {
        assert_eq!(short(42), "42s");
        assert_eq!(short(185), "3m5s");
        assert_eq!(short(7800), "2h10m");
        assert_eq!(short(3 * 86_400 + 4 * 3600), "3d4h");
    }

    #[test]
    fn the_page_shows_the_parallelism_rules_set_and_each_firing() {
        let mut wf = WorkFlow::test("x").parallelism(1).step("a", &[]).build();
        let status = wf.status.get_or_insert_default();
        status.parallelism = Some(2);
        status.rules = vec![workflow_operator_core::crd::RuleStatus {
            name: "slow".into(),
            fired: 1,
            last_fired_at_completions: Some(1),
            firings: vec!["slow: steps.a.duration.mean = 2 >= 1: parallelism 1 -> 2".into()],
        }];
        let mut html = String::new();
        summary(&mut html, &wf, None, Timestamp::now());
        assert!(
            html.contains(r#"<dd class="parallelism">2 (set by rules)</dd>"#),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<dt>Rule fired</dt><dd class="rule">slow: steps.a.duration.mean = 2 &gt;= 1: parallelism 1 -&gt; 2</dd>"#
            ),
            "{html}"
        );
    }

    #[test]
    fn the_page_shows_the_workflows_outputs() {
        let mut wf = WorkFlow::test("x").step("gen", &[]).build();
        let outputs = serde_json::json!({
            "parameters": [{"name": "greeting", "value": "<b>hi</b>"}],
            "artifacts": [{"name": "report", "step": "gen", "artifact": "out"}],
        });
        wf.status.get_or_insert_default().outputs =
            Some(Box::new(serde_json::from_value(outputs).unwrap()));
        let mut html = String::new();
        summary(&mut html, &wf, None, Timestamp::now());
        for shown in [
            r#"<dt>Output greeting</dt><dd class="workflow-output">&lt;b&gt;hi&lt;/b&gt;</dd>"#,
            r#"<dt>Output report</dt><dd class="workflow-output">artifact out of step gen</dd>"#,
        ] {
            assert!(html.contains(shown), "{html}");
        }
    }

    #[test]
    fn a_message_with_markup_is_text_in_the_list_and_the_page() {
        let mut wf = WorkFlow::test("x").step("a", &[]).build();
        wf.status.get_or_insert_default().message = Some("<script>alert(1)</script>".into());
        let list = workflow_list(None, &[Arc::new(wf.clone())], Timestamp::now());
        let extras = WorkflowExtras {
            step: None,
            events: Ok(Vec::new()),
        };
        let page = workflow_page(&wf, &extras, Timestamp::now());
        for html in [list, page] {
            assert!(!html.contains("<script>"), "{html}");
            assert!(
                html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "{html}"
            );
        }
    }
}
