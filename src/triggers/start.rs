//! One delivery's runs created, each under its trigger's concurrency policy, and the answer
//! they make. A run counts as started only once the API server accepted its create; an
//! AlreadyExists is the same delivery's run (its name is the delivery's), so 200.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use workflow_operator_core::WorkFlow;
use workflow_operator_core::crd::{ConcurrencyPolicy, Shutdown, WorkFlowTrigger};
use workflow_operator_core::cron::run_summary::RunSummary;
use workflow_operator_core::labels::LABEL_TRIGGER;
use workflow_operator_core::names;
use workflow_operator_core::trigger::{Compiled, Decision, Event};

use crate::controllers::{FIELD_MANAGER, exists_already};

/// An answer to a sender: its status, a line of text per event, the outcome counted in the
/// metrics, and for 429 when to come back.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub message: String,
    pub outcome: &'static str,
    pub retry_after: Option<Duration>,
}

impl Answer {
    fn new(status: StatusCode, outcome: &'static str, message: impl Into<String>) -> Answer {
        Answer {
            status,
            message: message.into(),
            outcome,
            retry_after: None,
        }
    }

    pub fn not_found(namespace: &str, name: &str) -> Answer {
        let message = format!("no WorkFlowTrigger {namespace}/{name}");
        Answer::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unavailable(why: impl Into<String>) -> Answer {
        let message = format!("not taken, send again: {}", why.into());
        Answer::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn rate_limited(wait: Duration) -> Answer {
        let mut answer = Answer::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "over the trigger's rate limit (spec.rateLimit): send again later",
        );
        answer.retry_after = Some(wait);
        answer
    }

    pub fn too_large(max: usize) -> Answer {
        let message = format!("the body is over the limit of {max} bytes");
        Answer::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// A bad signature; nothing of the delivery is echoed.
    pub fn unauthorized() -> Answer {
        let message = "the delivery's signature or token does not verify";
        Answer::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn bad_request(why: impl Into<String>) -> Answer {
        Answer::new(StatusCode::BAD_REQUEST, "bad_request", why)
    }

    /// The trigger (its expressions or run spec) cannot start a run: no retry helps.
    pub fn invalid(why: impl Into<String>) -> Answer {
        Answer::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", why)
    }

    /// The trigger's Secret is missing: its owner must fix it.
    pub fn misconfigured(why: impl Into<String>) -> Answer {
        let message = format!("cannot verify the delivery: {}", why.into());
        Answer::new(StatusCode::INTERNAL_SERVER_ERROR, "misconfigured", message)
    }

    fn started(name: &str) -> Answer {
        Answer::new(StatusCode::CREATED, "started", format!("started: {name}"))
    }

    fn already(name: &str) -> Answer {
        let message = format!("already started: {name}");
        Answer::new(StatusCode::OK, "already_started", message)
    }

    fn filtered(why: impl Into<String>) -> Answer {
        let message = format!("no run: {}", why.into());
        Answer::new(StatusCode::ACCEPTED, "filtered", message)
    }
}

/// The runs of `events` (of one delivery to `trigger`), one answer for all: 503 when any was
/// not taken (the sender sends again; the runs made are found then), 422 when any cannot be
/// made, else 201 when any was created, 200 when any existed, 202 when none was to be.
pub async fn all(
    client: &Client,
    trigger: &WorkFlowTrigger,
    compiled: &Compiled,
    events: &[Event],
) -> Answer {
    if events.is_empty() {
        return Answer::filtered("no record of the trigger's bucket, prefix and suffix");
    }
    let now = Timestamp::now().as_second();
    let mut answers = Vec::with_capacity(events.len());
    for event in events {
        let decided = compiled
            .id_of(event)
            .and_then(|id| compiled.decide(trigger, event, &id, now));
        let answer = match decided {
            Ok(Decision::Run(run)) => start(client, trigger, &run).await,
            Ok(Decision::Filtered(why)) => Answer::filtered(why),
            Err(why) => Answer::invalid(why),
        };
        answers.push(answer);
    }
    combine(answers)
}

fn combine(answers: Vec<Answer>) -> Answer {
    let rank = |a: &Answer| match a.status {
        StatusCode::SERVICE_UNAVAILABLE => 0,
        StatusCode::UNPROCESSABLE_ENTITY => 1,
        StatusCode::CREATED => 2,
        StatusCode::OK => 3,
        _ => 4,
    };
    let first = answers
        .iter()
        .min_by_key(|a| rank(a))
        .expect("one answer per event")
        .clone();
    let message = answers
        .iter()
        .map(|a| a.message.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Answer { message, ..first }
}

/// Creates `run` under `trigger`'s concurrency policy.
async fn start(client: &Client, trigger: &WorkFlowTrigger, run: &WorkFlow) -> Answer {
    let namespace = trigger.namespace().unwrap_or_default();
    let workflows: Api<WorkFlow> = Api::namespaced(client.clone(), &namespace);
    let name = run.name_any();
    let policy = trigger.spec.concurrency_policy;
    if policy != ConcurrencyPolicy::Allow {
        let runs = match runs_of(client, trigger).await {
            Ok(runs) => runs,
            Err(error) => return Answer::unavailable(format!("listing the runs: {error}")),
        };
        if runs.iter().any(|r| r.name_any() == name) {
            return Answer::already(&name);
        }
        let active: Vec<&RunSummary> = runs
            .iter()
            .filter(|r| !r.phase.is_some_and(|p| p.is_terminal()))
            .collect();
        if policy == ConcurrencyPolicy::Forbid && !active.is_empty() {
            let names: Vec<String> = active.iter().map(|r| r.name_any()).collect();
            return Answer::filtered(format!(
                "{} still running (concurrencyPolicy Forbid)",
                names.join(", ")
            ));
        }
        for old in active.iter().filter(|r| !r.terminating) {
            let patch = json!({"spec": {"shutdown": Shutdown::Terminate.as_str()}});
            let patched = workflows
                .patch(
                    &old.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
            if let Err(error) = patched {
                let why = format!(
                    "terminating {} (concurrencyPolicy Replace): {error}",
                    old.name_any()
                );
                return Answer::unavailable(why);
            }
        }
    }
    create(&workflows, run).await
}

/// Creates `run`: 201, 200 when it exists, 503 when the API server did not take it, 422 when
/// it refused it for what it is.
async fn create(workflows: &Api<WorkFlow>, run: &WorkFlow) -> Answer {
    let name = run.name_any();
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match workflows.create(&params, run).await {
        Ok(_) => Answer::started(&name),
        Err(e) if exists_already(&e) => Answer::already(&name),
        // A 409 Conflict created nothing: the sender is to deliver again, as after a 503.
        Err(kube::Error::Api(e)) if e.code >= 500 || e.code == 429 || e.code == 409 => {
            Answer::unavailable(format!("creating {name}: {}", e.message))
        }
        Err(kube::Error::Api(e)) => {
            Answer::invalid(format!("the API server refused run {name}: {}", e.message))
        }
        Err(error) => Answer::unavailable(format!("creating {name}: {error}")),
    }
}

/// The runs of `trigger` that exist (the WorkFlows labelled with it that it owns).
async fn runs_of(
    client: &Client,
    trigger: &WorkFlowTrigger,
) -> Result<Vec<RunSummary>, kube::Error> {
    let api: Api<RunSummary> =
        Api::namespaced(client.clone(), &trigger.namespace().unwrap_or_default());
    let selector = format!(
        "{LABEL_TRIGGER}={}",
        names::label_value(&trigger.name_any())
    );
    let uid = trigger.uid().unwrap_or_default();
    let listed = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
        .collect())
}
