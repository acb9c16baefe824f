//! HTTP steps (`crd::http`): what is wrong with one ([`problems`]), what the step agent is
//! told ([`HttpTask`], built by [`task_of`]: a header from a Secret is an environment variable
//! of the pod, [`header_env`], so the operator never reads it), and whether a response
//! succeeds ([`verdict`]: the step's `successCondition`, CEL, over the request and the
//! response; without one, a 2xx status, as Argo's default). Pure: the agent makes the request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value};
use serde::{Deserialize, Serialize};

use crate::crd::http::{DEFAULT_TIMEOUT_SECONDS, HttpHeader, HttpStep, METHODS};
use crate::crd::{OptionNum, Step};

/// What the step agent is told of an HTTP step: the request, its references filled in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HttpTask {
    pub url: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderTask>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The request's timeout, in seconds.
    pub timeout_seconds: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

/// A header of the request: its value, or the environment variable holding it (from a
/// Secret, [`header_env`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderTask {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

impl HttpTask {
    /// The task with `fill` applied to each text a reference may be in (URL, method, body,
    /// header values), as the Job's builder fills a command.
    pub fn filled(mut self, fill: impl Fn(&str) -> String) -> HttpTask {
        self.url = fill(&self.url);
        self.method = fill(&self.method);
        self.body = self.body.map(|b| fill(&b));
        for header in &mut self.headers {
            header.value = header.value.as_deref().map(&fill);
        }
        self
    }
}

/// The environment variable of the pod holding the value of header `index` taken from a
/// Secret.
pub fn header_env(index: usize) -> String {
    format!("WORKFLOW_HTTP_HEADER_{index}")
}

/// The agent's task for `http`.
pub fn task_of(http: &HttpStep) -> HttpTask {
    let headers = (http.headers.iter().enumerate())
        .map(|(i, h)| HeaderTask {
            name: h.name.clone(),
            value: if h.value_from.is_some() {
                None
            } else {
                Some(h.value.clone().unwrap_or_default())
            },
            env: h.value_from.as_ref().map(|_| header_env(i)),
        })
        .collect();
    HttpTask {
        url: http.url.clone(),
        method: http.method().to_string(),
        headers,
        body: http.body.clone(),
        timeout_seconds: http
            .timeout_seconds
            .num()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        success_condition: http.success_condition.clone(),
        insecure_skip_verify: http.insecure_skip_verify,
    }
}

/// What is wrong with `step` as an HTTP step (nothing when it is none): a URL, method or
/// header that cannot be sent, a condition that does not compile, a field that runs a
/// container. A text holding a reference is checked by the agent once filled.
pub fn problems(step: &Step) -> Vec<String> {
    let Some(http) = &step.http else {
        return Vec::new();
    };
    let name = &step.step_name;
    let mut problems: Vec<String> = request_problems(http)
        .into_iter()
        .map(|why| format!("step {name:?}: http.{why}"))
        .collect();
    let mut runs = step.container_fields_set();
    runs.extend(step.inputs.is_some().then_some("inputs"));
    runs.extend(step.suspend.is_some().then_some("suspend"));
    for field in runs {
        problems.push(format!(
            "step {name:?}: {field}: an HTTP step makes a request and runs no container, so it \
             cannot have one (its response body is its result)"
        ));
    }
    problems
}

/// What is wrong with the request, each as `FIELD: why`.
fn request_problems(http: &HttpStep) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(why) = check_url(&http.url) {
        problems.push(format!("url: {why}"));
    }
    if let Err(why) = check_method(http.method()) {
        problems.push(format!("method: {why}"));
    }
    for (i, header) in http.headers.iter().enumerate() {
        if let Err(why) = check_header(header) {
            problems.push(format!("headers[{i}]: {why}"));
        }
    }
    if let Some(seconds) = http.timeout_seconds.num().filter(|s| *s < 1) {
        problems.push(format!("timeoutSeconds: {seconds} is less than 1"));
    }
    if let Some(Err(why)) = http.success_condition.as_deref().map(Condition::compile) {
        problems.push(format!("successCondition: {why}"));
    }
    problems
}

/// Whether `text` holds a `{{...}}` reference, filled only when the step runs.
fn unfilled(text: &str) -> bool {
    text.contains("{{")
}

/// `url` is an `http://` or `https://` URL with a host (or a reference, filled later).
///
/// # Errors
/// Why it cannot be requested.
pub fn check_url(url: &str) -> Result<(), String> {
    if unfilled(url) {
        return Ok(());
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let Some(rest) = rest else {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') || host.ends_with('@') {
        return Err(format!("{url:?} has no host"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{url:?} holds a space or a control character"));
    }
    Ok(())
}

/// `method` is one of [`METHODS`] (or a reference, filled later).
///
/// # Errors
/// Naming the methods there are.
pub fn check_method(method: &str) -> Result<(), String> {
    if unfilled(method) || METHODS.contains(&method) {
        return Ok(());
    }
    Err(format!(
        "{method:?} is not a method an HTTP step makes (one of {}, in capitals)",
        METHODS.join(", ")
    ))
}

fn check_header(header: &HttpHeader) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if header.name.is_empty() || !header.name.chars().all(token) {
        return Err(format!("name {:?} is not a header name", header.name));
    }
    match (&header.value, &header.value_from) {
        (Some(_), Some(_)) => Err("value and valueFrom: give one".into()),
        (_, Some(from)) => {
            let secret = &from.secret_key_ref;
            if secret.name.is_empty() || secret.key.is_empty() {
                return Err("valueFrom.secretKeyRef needs a name and a key".into());
            }
            Ok(())
        }
        (Some(value), None) if value.contains(['\r', '\n']) => {
            Err("value holds a line break".into())
        }
        _ => Ok(()),
    }
}

/// What the condition reads of the exchange: the request as sent, the response as received.
#[derive(Debug, Clone, Default)]
pub struct Exchange<'a> {
    pub url: &'a str,
    pub method: &'a str,
    pub request_body: &'a str,
    pub status: u16,
    pub body: &'a str,
    /// The response's headers by name as Go writes it ([`canonical_header`]), each with its
    /// values.
    pub headers: BTreeMap<String, Vec<String>>,
}

/// A compiled `successCondition`.
#[derive(Debug)]
pub struct Condition {
    text: String,
    program: Program,
}

impl Condition {
    /// Compiles `text`, which may read only `response` and `request`.
    ///
    /// # Errors
    /// What does not compile, or the other variable it names.
    pub fn compile(text: &str) -> Result<Condition, String> {
        let program = Program::compile(text)
            .map_err(|e| format!("{text:?} does not compile: {}", one_line(&e.to_string())))?;
        let references = program.references();
        let mut others: Vec<&str> = (references.variables().iter().copied())
            .filter(|v| !["response", "request"].contains(v))
            .collect();
        others.sort_unstable();
        if let Some(other) = others.first() {
            return Err(format!(
                "{text:?} names {other:?}: it may read response.statusCode, .body, .headers and request.url, .method, .body"
            ));
        }
        Ok(Condition {
            text: text.to_string(),
            program,
        })
    }

    /// Whether `exchange` meets it.
    ///
    /// # Errors
    /// What went wrong evaluating it, or a result that is not a bool.
    pub fn holds(&self, exchange: &Exchange<'_>) -> Result<bool, String> {
        let text = |s: &str| Value::from(s);
        let headers: HashMap<Key, Value> = (exchange.headers.iter())
            .map(|(name, values)| {
                let values = values.iter().map(|v| text(v)).collect();
                (Key::from(name.as_str()), Value::List(Arc::new(values)))
            })
            .collect();
        let response: HashMap<Key, Value> = [
            (Key::from("statusCode"), Value::Int(exchange.status.into())),
            (Key::from("body"), text(exchange.body)),
            (Key::from("headers"), Value::Map(Map::from(headers))),
        ]
        .into();
        let request: HashMap<Key, Value> = [
            (Key::from("url"), text(exchange.url)),
            (Key::from("method"), text(exchange.method)),
            (Key::from("body"), text(exchange.request_body)),
        ]
        .into();
        let mut context = Context::default().with_all();
        context.add_variable_from_value("response", Value::Map(Map::from(response)));
        context.add_variable_from_value("request", Value::Map(Map::from(request)));
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("is {other:?}, not a bool")),
            Err(e) => Err(one_line(&e.to_string())),
        }
    }
}

/// Whether the step succeeds with `exchange`: its condition (the text of `successCondition`)
/// holds, or, without one, the status is 2xx.
///
/// # Errors
/// The step's failure message, naming the status code.
pub fn verdict(condition: Option<&str>, exchange: &Exchange<'_>) -> Result<(), String> {
    let status = exchange.status;
    let Some(text) = condition else {
        return match status {
            200..=299 => Ok(()),
            _ => Err(format!("received non-2xx response code: {status}")),
        };
    };
    let condition = Condition::compile(text).map_err(|why| format!("successCondition {why}"))?;
    match condition.holds(exchange) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "successCondition {:?} is false (status {status})",
            condition.text
        )),
        Err(why) => Err(format!(
            "successCondition {:?}: {why} (status {status})",
            condition.text
        )),
    }
}

/// A header's name as Go's `http.Header` keys it (`CanonicalMIMEHeaderKey`): each word between
/// dashes capitalised, the rest lower case (`content-type` is `Content-Type`), so a condition
/// reads a header as it would in Argo.
pub fn canonical_header(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
