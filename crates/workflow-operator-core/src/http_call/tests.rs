use super::*;
use crate::testing::step;

fn http_step(yaml: &str) -> Step {
    let mut step = step("call", &[]);
    step.image = String::new();
    step.command = None;
    step.http = Some(Box::new(serde_yaml::from_str(yaml).unwrap()));
    step
}

fn exchange(status: u16, body: &str) -> Exchange<'_> {
    Exchange {
        url: "http://svc/x",
        method: "GET",
        status,
        body,
        headers: BTreeMap::from([("Content-Type".to_string(), vec!["text/plain".to_string()])]),
        ..Exchange::default()
    }
}

#[test]
fn without_a_condition_a_2xx_status_succeeds_and_another_fails_naming_it() {
    assert_eq!(verdict(None, &exchange(200, "")), Ok(()));
    assert_eq!(verdict(None, &exchange(204, "")), Ok(()));
    assert_eq!(
        verdict(None, &exchange(404, "")),
        Err("received non-2xx response code: 404".into())
    );
    assert_eq!(
        verdict(None, &exchange(301, "")),
        Err("received non-2xx response code: 301".into())
    );
}

#[test]
fn a_condition_reads_the_status_body_headers_and_request() {
    let holds = |condition: &str, status, body| verdict(Some(condition), &exchange(status, body));
    assert_eq!(holds("response.statusCode == 201", 201, ""), Ok(()));
    assert_eq!(
        holds("response.statusCode == 201", 200, ""),
        Err(r#"successCondition "response.statusCode == 201" is false (status 200)"#.into())
    );
    // A 404 may be what is wanted.
    assert_eq!(holds("response.statusCode == 404", 404, ""), Ok(()));
    let body = r#"response.body.contains("google") && response.statusCode < 300"#;
    assert_eq!(holds(body, 200, "<title>google</title>"), Ok(()));
    assert!(holds(body, 200, "nothing").is_err());
    let header = r#"response.headers["Content-Type"][0] == "text/plain""#;
    assert_eq!(holds(header, 200, ""), Ok(()));
    let request = r#"request.method == "GET" && request.url.endsWith("/x")"#;
    assert_eq!(holds(request, 500, ""), Ok(()));
    // A header it does not have fails the step, saying why, with the status.
    let missing = holds(r#"response.headers["Server"][0] == "x""#, 200, "").unwrap_err();
    assert!(missing.contains("(status 200)"), "{missing}");
}

#[test]
fn a_condition_that_names_another_variable_or_does_not_compile_is_refused() {
    let error = Condition::compile("steps.a.phase == \"x\"").unwrap_err();
    assert!(error.contains("names \"steps\""), "{error}");
    let error = Condition::compile("response.statusCode ==").unwrap_err();
    assert!(error.contains("does not compile"), "{error}");
    assert!(Condition::compile("response.statusCode in [200, 201]").is_ok());
}

#[test]
fn a_bad_url_method_header_or_timeout_is_refused_naming_the_field() {
    assert!(problems(&http_step("url: https://example.com/a?b=c")).is_empty());
    assert!(problems(&http_step("url: http://127.0.0.1:8080")).is_empty());
    // A reference is checked once filled, by the agent.
    assert!(problems(&http_step("url: '{{inputs.parameters.url}}'")).is_empty());
    let refused = |yaml: &str| problems(&http_step(yaml)).join("; ");
    assert_eq!(
        refused("url: ftp://example.com/file"),
        r#"step "call": http.url: "ftp://example.com/file" is not an http:// or https:// URL"#
    );
    assert_eq!(
        refused("url: example.com"),
        r#"step "call": http.url: "example.com" is not an http:// or https:// URL"#
    );
    assert_eq!(
        refused("url: 'http:///path'"),
        r#"step "call": http.url: "http:///path" has no host"#
    );
    assert!(refused("url: 'http://a b/'").contains("holds a space"));
    assert_eq!(
        refused("{url: 'http://svc', method: FETCH}"),
        r#"step "call": http.method: "FETCH" is not a method an HTTP step makes (one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, in capitals)"#
    );
    assert!(refused("{url: 'http://svc', method: get}").contains("in capitals"));
    assert!(
        refused("{url: 'http://svc', headers: [{name: 'a b', value: x}]}")
            .contains("headers[0]: name \"a b\" is not a header name")
    );
    assert!(
        refused("{url: 'http://svc', headers: [{name: A, value: x, valueFrom: {secretKeyRef: {name: s, key: k}}}]}")
            .contains("headers[0]: value and valueFrom: give one")
    );
    assert!(refused("{url: 'http://svc', timeoutSeconds: 0}").contains("timeoutSeconds: 0"));
    assert!(
        refused("{url: 'http://svc', successCondition: 'status == 200'}")
            .contains("http.successCondition: \"status == 200\" names \"status\"")
    );
}

#[test]
fn an_http_step_runs_no_container() {
    let mut step = http_step("url: http://svc");
    step.image = "alpine".into();
    step.source = Some(Box::new("echo".into()));
    assert_eq!(
        problems(&step),
        [
            r#"step "call": image: an HTTP step makes a request and runs no container, so it cannot have one (its response body is its result)"#,
            r#"step "call": source: an HTTP step makes a request and runs no container, so it cannot have one (its response body is its result)"#,
        ]
    );
}

#[test]
fn the_task_takes_a_secret_s_header_from_the_pod_s_environment() {
    let step = http_step(
        r#"
url: http://svc/{{steps.a.outputs.result}}
method: POST
body: hi
timeoutSeconds: "5"
headers:
  - {name: Authorization, valueFrom: {secretKeyRef: {name: token, key: t}}}
  - {name: X-Kind, value: test}
  - {name: X-Empty}
"#,
    );
    let task = task_of(step.http.as_deref().unwrap());
    assert_eq!(task.method, "POST");
    assert_eq!(task.timeout_seconds, 5);
    assert_eq!(
        task.headers,
        [
            HeaderTask {
                name: "Authorization".into(),
                value: None,
                env: Some("WORKFLOW_HTTP_HEADER_0".into()),
            },
            HeaderTask {
                name: "X-Kind".into(),
                value: Some("test".into()),
                env: None,
            },
            HeaderTask {
                name: "X-Empty".into(),
                value: Some(String::new()),
                env: None,
            },
        ]
    );
    let filled = task.filled(|t| t.replace("{{steps.a.outputs.result}}", "42"));
    assert_eq!(filled.url, "http://svc/42");
    let plain = task_of(http_step("url: http://svc").http.as_deref().unwrap());
    assert_eq!((plain.method.as_str(), plain.timeout_seconds), ("GET", 30));
}

#[test]
fn a_header_name_is_keyed_as_go_keys_it() {
    assert_eq!(canonical_header("content-type"), "Content-Type");
    assert_eq!(canonical_header("X-REQUEST-ID"), "X-Request-Id");
    assert_eq!(canonical_header("server"), "Server");
}

#[test]
fn a_template_s_request_is_checked_once_its_parameters_are_filled() {
    let spec = |method: &str| {
        format!(
            r#"
arguments: {{parameters: [{{name: method, value: "{method}"}}]}}
templates:
  - name: call
    inputs: {{parameters: [{{name: path}}]}}
    http: {{url: "https://svc/{{{{inputs.parameters.path}}}}", method: "{{{{workflow.parameters.method}}}}"}}
containers:
  - {{stepName: ping, template: call, arguments: {{parameters: [{{name: path, value: health}}]}}}}
"#
        )
    };
    let workflow = |method: &str| {
        let spec: crate::crd::WorkFlowSpec = serde_yaml::from_str(&spec(method)).unwrap();
        let mut workflow = crate::crd::WorkFlow::new("wf", spec);
        workflow.metadata.namespace = Some("dev".into());
        workflow
    };
    let good = workflow("PUT");
    let expanded = crate::template::expand(&good).unwrap();
    let http = expanded.containers[0].http.as_deref().unwrap();
    assert_eq!(
        (http.url.as_str(), http.method()),
        ("https://svc/health", "PUT")
    );
    let bad = workflow("FETCH");
    let refused = crate::template::expand(&bad).unwrap_err().to_string();
    assert!(
        refused.contains(r#"step "ping": http.method: "FETCH" is not a method"#),
        "{refused}"
    );
}
