//! Whether, and when, a failed step is tried again (`retryStrategy`): a pure decision from the
//! strategy, which attempt failed, how, and when.
//!
//! [`Strategy::compile`] is the check at create (durations parse, the expression compiles and
//! reads only `lastRetry`); [`Strategy::decide`] runs once an attempt failed. The attempts
//! are the step's Jobs (label `workflow.crd.com/attempt`), and the next one's time follows
//! from the last one's end, so a restarted operator decides the same.

use std::collections::HashMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value};

use crate::crd::numbers::parse_duration;
use crate::crd::{IntOrExpr, RetryPolicy, RetryStrategy};

/// How an attempt failed, as `retryPolicy` tells failures apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The program ran and exited non-zero.
    Program,
    /// The pod could not run the program to its end: evicted, OOM-killed, its image not
    /// pulled, not started in time, past its timeout.
    Pod,
    /// Nothing another attempt could change (the API server refused the Job, a `when`
    /// failed, an output is missing).
    Final,
}

/// What the expression reads of the attempt that failed, as `lastRetry`.
#[derive(Debug, Clone, Copy)]
pub struct LastRetry<'a> {
    /// The program's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// E.g. `Error`, `OOMKilled`, `DeadlineExceeded`.
    pub reason: &'a str,
    /// Kubernetes' or the container's explanation.
    pub message: &'a str,
    /// Seconds the attempt ran.
    pub duration: i64,
}

/// What to do after an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Start attempt `attempt` at `at`, after waiting `wait` since the failure.
    Retry {
        /// The attempt to start (1 for the first retry).
        attempt: u32,
        /// When.
        at: Timestamp,
        /// The back-off waited.
        wait: SignedDuration,
    },
    /// The step fails; why it is not tried again.
    GiveUp(String),
}

/// A compiled `retryStrategy`.
#[derive(Debug)]
pub struct Strategy {
    limit: u32,
    policy: RetryPolicy,
    first_wait: SignedDuration,
    factor: f64,
    cap: Option<SignedDuration>,
    max_duration: Option<SignedDuration>,
    expression: Option<(String, Program)>,
}

impl Strategy {
    /// Checks and compiles `strategy`.
    ///
    /// # Errors
    /// A negative limit, a factor below 1, a duration that does not parse, an expression that
    /// does not compile or reads anything but `lastRetry`.
    pub fn compile(strategy: &RetryStrategy) -> Result<Strategy, String> {
        let Some(limit) = strategy.limit.num() else {
            return Err(format!(
                "retryStrategy.limit: {:?} is not a number",
                strategy.limit
            ));
        };
        let limit =
            u32::try_from(limit).map_err(|_| format!("retryStrategy.limit {limit} is negative"))?;
        let backoff = strategy.backoff.as_ref();
        let duration = |field: &str, text: Option<&String>| {
            text.map(|t| {
                parse_duration(t).map_err(|e| format!("retryStrategy.backoff.{field} {e}"))
            })
            .transpose()
        };
        let factor = match backoff.and_then(|b| b.factor.as_ref()) {
            None => 1.0,
            Some(IntOrExpr::Num(factor)) => *factor,
            Some(IntOrExpr::Expr(text)) => {
                return Err(format!(
                    "retryStrategy.backoff.factor: {text:?} is not a number"
                ));
            }
        };
        if !(factor >= 1.0 && factor.is_finite()) {
            return Err(format!("retryStrategy.backoff.factor {factor} is below 1"));
        }
        let expression = strategy
            .expression
            .as_ref()
            .map(|text| compile_expression(text).map(|program| (text.clone(), program)))
            .transpose()?;
        Ok(Strategy {
            limit,
            policy: strategy.retry_policy.unwrap_or_default(),
            first_wait: duration("duration", backoff.map(|b| &b.duration))?.unwrap_or_default(),
            factor,
            cap: duration("cap", backoff.and_then(|b| b.cap.as_ref()))?,
            max_duration: duration("maxDuration", backoff.and_then(|b| b.max_duration.as_ref()))?,
            expression,
        })
    }

    /// Decides after attempt `failed` (0 for the first) failed for `cause`, as `last` says,
    /// at `finished`; the first attempt started at `first_started`.
    pub fn decide(
        &self,
        failed: u32,
        cause: Cause,
        last: &LastRetry<'_>,
        (finished, first_started): (Timestamp, Timestamp),
    ) -> Verdict {
        let attempts = failed + 1;
        if let Some(why) = self.not_retried(cause, last) {
            return Verdict::GiveUp(why);
        }
        if failed >= self.limit {
            return Verdict::GiveUp(format!(
                "after {attempts} attempts (retryStrategy.limit {})",
                self.limit
            ));
        }
        let wait = self.wait_before(attempts);
        let at = finished.checked_add(wait).unwrap_or(finished);
        if let Some(max) = self.max_duration
            && at.duration_since(first_started) > max
        {
            return Verdict::GiveUp(format!(
                "after {attempts} attempts: another would start past retryStrategy.backoff.maxDuration ({max:#})"
            ));
        }
        Verdict::Retry {
            attempt: attempts,
            at,
            wait,
        }
    }

    /// Why a failure for `cause` is not tried again, if it is not.
    fn not_retried(&self, cause: Cause, last: &LastRetry<'_>) -> Option<String> {
        match (cause, self.policy) {
            (Cause::Final, _) => {
                return Some("not retried: another attempt would fail alike".into());
            }
            (Cause::Pod, RetryPolicy::OnFailure) => {
                return Some(
                    "not retried: retryPolicy OnFailure retries only a program that exited non-zero"
                        .into(),
                );
            }
            (Cause::Program, RetryPolicy::OnError) => {
                return Some(
                    "not retried: retryPolicy OnError retries only a pod that could not run".into(),
                );
            }
            _ => {}
        }
        let (text, program) = self.expression.as_ref()?;
        match evaluate(program, last) {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "not retried: retryStrategy.expression {text:?} is false"
            )),
            Err(e) => Some(format!(
                "not retried: retryStrategy.expression {text:?}: {e}"
            )),
        }
    }

    /// The back-off before attempt `attempt` (1 for the first retry).
    pub fn wait_before(&self, attempt: u32) -> SignedDuration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let seconds = self.first_wait.as_secs_f64() * self.factor.powi(exponent);
        let wait = SignedDuration::try_from_secs_f64(seconds).unwrap_or(SignedDuration::MAX);
        self.cap.map_or(wait, |cap| wait.min(cap))
    }
}

fn compile_expression(text: &str) -> Result<Program, String> {
    let program = Program::compile(text).map_err(|e| {
        format!(
            "retryStrategy.expression {text:?} does not compile: {}",
            one_line(&e.to_string())
        )
    })?;
    let references = program.references();
    let mut others: Vec<&str> = (references.variables().iter().copied())
        .filter(|v| *v != "lastRetry")
        .collect();
    others.sort_unstable();
    if let Some(other) = others.first() {
        return Err(format!(
            "retryStrategy.expression {text:?} names {other:?}: it may read only lastRetry.exitCode, .reason, .message and .duration"
        ));
    }
    Ok(program)
}

fn evaluate(program: &Program, last: &LastRetry<'_>) -> Result<bool, String> {
    let fields: HashMap<Key, Value> = [
        (
            Key::from("exitCode"),
            Value::Int(last.exit_code.map_or(-1, i64::from)),
        ),
        (Key::from("reason"), Value::from(last.reason)),
        (Key::from("message"), Value::from(last.message)),
        (Key::from("duration"), Value::Int(last.duration)),
    ]
    .into();
    let mut context = Context::default().with_all();
    context.add_variable_from_value("lastRetry", Value::Map(Map::from(fields)));
    match program.execute(&context) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("is {other:?}, not a bool")),
        Err(e) => Err(one_line(&e.to_string())),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
