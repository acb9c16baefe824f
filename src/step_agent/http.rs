//! `workflow-agent http`: an HTTP step's request (`http_call::HttpTask`), made from the step's
//! pod, so it leaves from the cluster's network as Argo's agent's does, and a retry, timeout or
//! restarted operator treats it as any step's pod. The response body is the step's log and,
//! when another step reads it, its `result`; the response fails the step unless it meets the
//! step's `successCondition` (default: a 2xx status), the message naming the status code.

use super::chain;
use std::collections::BTreeMap;
use std::time::Duration;

use workflow_operator_core::http_call::{self, Exchange, HttpTask};
use workflow_operator_core::outputs::MAX_OUTPUTS_BYTES;

use super::stdout::Stdout;

/// Makes the request of `task` and judges the response; the body, when `keep` (another step
/// reads the result).
///
/// # Errors
/// The step's failure message: a request that cannot be made or answered, a response that
/// fails the condition, a kept body that is not text or too large for a termination message.
pub(super) async fn call(task: &HttpTask, keep: bool) -> Result<Option<Stdout>, String> {
    http_call::check_url(&task.url).map_err(|why| format!("http.url: {why}"))?;
    http_call::check_method(&task.method).map_err(|why| format!("http.method: {why}"))?;
    let request = request(task)?;
    let what = format!("{} {}", task.method, task.url);
    let response = request
        .send()
        .await
        .map_err(|error| match error.is_timeout() {
            true => format!(
                "{what}: no response within {} s (http.timeoutSeconds)",
                task.timeout_seconds
            ),
            false => format!("{what}: {}", chain(&error)),
        })?;
    let status = response.status();
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        (headers.entry(http_call::canonical_header(name.as_str())))
            .or_default()
            .push(value);
    }
    let body = (response.bytes().await)
        .map_err(|error| format!("{what}: reading the response: {}", chain(&error)))?;
    eprintln!("workflow-agent: {what}: {status}");
    println!("{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body);
    let exchange = Exchange {
        url: &task.url,
        method: &task.method,
        request_body: task.body.as_deref().unwrap_or_default(),
        status: status.as_u16(),
        body: &text,
        headers,
    };
    http_call::verdict(task.success_condition.as_deref(), &exchange)?;
    if !keep {
        return Ok(None);
    }
    if std::str::from_utf8(&body).is_err() {
        return Err("the response body (result) is not UTF-8 text".into());
    }
    if body.len() > MAX_OUTPUTS_BYTES {
        return Err(format!(
            "the response body (result) is {} bytes, more than the {MAX_OUTPUTS_BYTES} bytes of \
             a termination message",
            body.len()
        ));
    }
    Ok(Some(Stdout {
        total: body.len(),
        kept: body.to_vec(),
    }))
}

/// The request: its method, URL, headers (a Secret's from the pod's environment), body and
/// timeout, on a client that verifies the server's certificate unless told not to.
fn request(task: &HttpTask) -> Result<reqwest::RequestBuilder, String> {
    crate::artifacts::oci::install_crypto();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(
            task.timeout_seconds.max(1).unsigned_abs(),
        ))
        .danger_accept_invalid_certs(task.insecure_skip_verify)
        .build()
        .map_err(|error| format!("an HTTP client: {}", chain(&error)))?;
    let method = reqwest::Method::from_bytes(task.method.as_bytes())
        .map_err(|_| format!("http.method: {:?} is not a method", task.method))?;
    let mut request = client.request(method, &task.url);
    for header in &task.headers {
        let value = match (&header.value, &header.env) {
            (_, Some(env)) => std::env::var(env).map_err(|_| {
                format!(
                    "header {}: its Secret's value is not in ${env} (the pod's environment)",
                    header.name
                )
            })?,
            (value, None) => value.clone().unwrap_or_default(),
        };
        request = request.header(&header.name, value);
    }
    if let Some(body) = &task.body {
        request = request.body(body.clone());
    }
    Ok(request)
}

#[cfg(test)]
mod tests;
