//! The web view, on the embedded control plane with the operator running and sharing
//! its mirror with the view, as `dev` and `run --web-addr` do:
//!
//! - in a real browser, headless Chromium (Debian's `chromium`, installed by
//!   `scripts/install-test-tools.sh` where it can be): the DAG of a diamond (one node per step,
//!   each with its phase, the edges), a change appearing without a reload, a step named
//!   `<img src=x onerror=alert(1)>` shown as text, and what the DAG marks: the exit steps'
//!   dashed group and edges, edges routed around boxes, a tolerated failure apart from a fatal
//!   one, Event times to the second. Screenshots go to `target/web/`. These tests
//!   skip, saying why, only where no Chromium is installed.
//! - over plain HTTP: the routes, 405 for every other method, only the watched namespace, the
//!   escaping of names and logs, and the server-sent events of a change.
//! - `dev` prints the view's URL next to the kubeconfig line (what `make demo` shows).
//!
//! Run: `cargo test --test it web_view::`.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use kube::api::{Patch, PatchParams};
use kube_devcluster::testing::eventually;
use rstest::rstest;
use serde_json::json;
use support::{Cluster, DEADLINE, Gate, Namespace, namespace};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;
use workflow_operator::controllers::workflow::operator::{self, Mirrors, OperatorOptions};
use workflow_operator::web::{self, WebState};
use workflow_operator_core::WorkFlow;

/// The step name of the escaping test: markup that would run script if it were parsed.
const MARKUP_NAME: &str = "<img src=x onerror=alert(1)>";

/// The operator, restricted to the test's namespace, sharing its mirror with a web view served
/// on a free port of 127.0.0.1; both stop when dropped.
struct View {
    ns: Namespace,
    addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl View {
    /// `None` on a real cluster, where the installed operator runs (and would run every
    /// workflow twice beside this one).
    async fn start(ns: Namespace) -> Option<View> {
        if Cluster::is_real() {
            eprintln!(
                "SKIPPED: the web view tests run their own operator on the embedded control plane"
            );
            return None;
        }
        let mirror = Mirrors::new();
        let stop = CancellationToken::new();
        let options = OperatorOptions {
            namespace: Some(ns.name.clone()),
            mirror: Some(mirror.clone()),
            ..OperatorOptions::default()
        };
        let running = stop.clone();
        let client = ns.client();
        tokio::spawn(
            async move { operator::run(client, options, running.cancelled_owned()).await },
        );
        let state = WebState {
            mirror: mirror.workflows.clone(),
            crons: mirror.crons.clone(),
            client: ns.client(),
            namespace: Some(ns.name.clone()),
            shutdown: stop.clone(),
        };
        let addr = web::serve("127.0.0.1:0".parse().unwrap(), state)
            .await
            .expect("the web view serves");
        Some(View { ns, addr, stop })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn workflow_path(&self, name: &str) -> String {
        format!("/namespaces/{}/workflows/{name}", self.ns.name)
    }

    /// Waits until the page at `path`, as served, contains every one of `fragments`: the view
    /// has seen the state a browser is about to load.
    async fn wait_page(&self, path: &str, fragments: &[&str]) -> String {
        let url = self.url(path);
        eventually(
            &format!("{path} to show {fragments:?}"),
            DEADLINE,
            || async {
                let reply = request("GET", &url).await;
                fragments
                    .iter()
                    .all(|f| reply.body.contains(f))
                    .then_some(reply.body)
            },
        )
        .await
    }
}

/// A diamond whose `step2` waits for `gate`: once `step1` has succeeded, the page shows each
/// phase there is (succeeded, running, waiting).
fn gated_diamond(name: &str, gate: &Gate) -> workflow_operator_core::testing::WorkFlowBuilder {
    WorkFlow::test(name)
        .step("step0", &[])
        .command(&["sh", "-c", "echo step0"])
        .step("step1", &["step0"])
        .command(&["sh", "-c", "echo step1"])
        .step("step2", &["step0"])
        .command(
            &gate
                .wait_command("step2")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .step("step3", &["step1", "step2"])
        .command(&["sh", "-c", "echo step3"])
}

fn node(step: &str, phase: &str) -> String {
    format!(r#"data-step="{step}" data-phase="{phase}""#)
}

// --- the browser ---

/// Headless Chromium, or `None` (after printing why) where it is not installed.
struct Chromium {
    binary: PathBuf,
    profile: tempfile::TempDir,
}

impl Chromium {
    fn find(test: &str) -> Option<Chromium> {
        let candidates = ["chromium", "chromium-browser", "google-chrome"];
        let path = std::env::var_os("PATH").unwrap_or_default();
        let binary = candidates.iter().find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        });
        match binary {
            Some(binary) => Some(Chromium {
                binary,
                profile: tempfile::tempdir().expect("a browser profile directory"),
            }),
            None => {
                let reason = "no chromium on PATH (scripts/install-test-tools.sh installs Debian's `chromium` with apt where it runs as root)";
                println!("SKIPPED {test}: {reason}");
                eprintln!("SKIPPED {test}: {reason}");
                None
            }
        }
    }

    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .arg("--headless")
            // Containers (CI) run as root, where Chromium's sandbox cannot start; the pages are
            // this test's own.
            .arg("--no-sandbox")
            .arg("--disable-gpu")
            .arg("--disable-dev-shm-usage")
            .arg("--no-first-run")
            .arg("--hide-scrollbars")
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// The DOM of `url` once loaded, as the browser serialises it.
    async fn dump_dom(&self, url: &str) -> String {
        let output =
            tokio::time::timeout(DEADLINE, self.command().arg("--dump-dom").arg(url).output())
                .await
                .expect("chromium dumps the DOM in time")
                .expect("chromium runs");
        assert!(
            output.status.success(),
            "chromium --dump-dom: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("the DOM is UTF-8")
    }

    /// A screenshot of `url` into `target/web/NAME.png`.
    async fn screenshot(&self, url: &str, name: &str, size: (u32, u32)) -> PathBuf {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../web");
        std::fs::create_dir_all(&dir).expect("target/web");
        let file = dir.join(format!("{name}.png"));
        let output = tokio::time::timeout(
            DEADLINE,
            self.command()
                .arg(format!("--screenshot={}", file.display()))
                .arg(format!("--window-size={},{}", size.0, size.1))
                .arg(url)
                .output(),
        )
        .await
        .expect("chromium takes the screenshot in time")
        .expect("chromium runs");
        assert!(
            output.status.success(),
            "chromium --screenshot: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            file.metadata().is_ok_and(|m| m.len() > 0),
            "{} written",
            file.display()
        );
        file
    }

    /// `url` kept open, with the DevTools HTTP endpoint on a free port to read its title from.
    async fn open(&self, url: &str) -> OpenPage {
        let mut child = self
            .command()
            .arg("--remote-debugging-port=0")
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        // Chromium prints where DevTools listens once it is up.
        let devtools = tokio::time::timeout(DEADLINE, async {
            while let Some(line) = lines.next_line().await.expect("chromium's stderr") {
                if let Some(rest) = line.strip_prefix("DevTools listening on ws://") {
                    return rest.split('/').next().map(str::to_string);
                }
            }
            None
        })
        .await
        .expect("chromium says where DevTools listens in time")
        .expect("chromium says where DevTools listens");
        // Keep draining stderr so Chromium never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        OpenPage {
            _child: child,
            devtools,
        }
    }
}

/// A page open in a running Chromium.
struct OpenPage {
    _child: tokio::process::Child,
    /// `127.0.0.1:PORT` of the DevTools HTTP endpoint.
    devtools: String,
}

impl OpenPage {
    /// The page's title now (`/json/list` of the DevTools HTTP protocol), once it has one.
    async fn title(&self) -> Option<String> {
        let reply = request("GET", &format!("http://{}/json/list", self.devtools)).await;
        let targets: serde_json::Value = serde_json::from_str(&reply.body).ok()?;
        targets
            .as_array()?
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["title"].as_str())
            .map(str::to_string)
    }

    /// Waits until the page's title is `wanted`.
    async fn wait_title(&self, wanted: &str) {
        eventually(
            &format!("the page's title to become {wanted:?}"),
            DEADLINE,
            || async { (self.title().await.as_deref() == Some(wanted)).then_some(()) },
        )
        .await;
    }
}

// --- what the DAG view marks ---

/// A workflow with one of each thing the DAG view marks: `c` depends on `a` directly and
/// through `b` (its edge from `a` passes `b`'s layer, in one column), `tolerated` fails under
/// `continueOn.failed`, `fatal` fails the workflow after them, and `notify` runs on exit.
fn marked(name: &str) -> workflow_operator_core::testing::WorkFlowBuilder {
    WorkFlow::test(name)
        .step("a", &[])
        .command(&["true"])
        .step("b", &["a"])
        .command(&["true"])
        .step("c", &["a", "b"])
        .command(&["true"])
        .step("tolerated", &[])
        .command(&["sh", "-c", "exit 3"])
        .continue_on_failed()
        .step("fatal", &["c", "tolerated"])
        .command(&["sh", "-c", "exit 4"])
        .exit_step("notify", &[])
        .command(&["true"])
}

/// The page of [`marked`] once it failed, its exit step ran and its Events are listed, as
/// Chromium has it.
async fn marked_page(browser: &Chromium, view: &View, name: &str) -> String {
    view.ns.create(marked(name)).await;
    view.ns.expect_failed(name, &["fatal"]).await;
    let path = view.workflow_path(name);
    let notified = node("notify", "Succeeded");
    view.wait_page(&path, &[&notified, r#"<table class="events">"#])
        .await;
    browser.dump_dom(&view.url(&path)).await
}

/// The opening tag of the element whose `data-step` is `step`.
fn tag_of<'a>(dom: &'a str, step: &str) -> &'a str {
    let at = dom
        .find(&format!(r#"data-step="{step}""#))
        .unwrap_or_else(|| panic!("no element of step {step}: {dom}"));
    let start = dom[..at].rfind('<').expect("a tag");
    let end = at + dom[at..].find('>').expect("a tag's end");
    &dom[start..=end]
}

/// A box of the drawing: its step and its rectangle (left, top, right, bottom).
struct Drawn {
    step: String,
    rect: [f64; 4],
}

impl Drawn {
    /// Whether `(x, y)` is inside, more than `margin` from every side.
    fn holds(&self, (x, y): (f64, f64), margin: f64) -> bool {
        let [l, t, r, b] = self.rect;
        x > l + margin && x < r - margin && y > t + margin && y < b - margin
    }

    /// Whether `(x, y)` is on the box or within `margin` of it.
    fn touches(&self, (x, y): (f64, f64), margin: f64) -> bool {
        let [l, t, r, b] = self.rect;
        x >= l - margin && x <= r + margin && y >= t - margin && y <= b + margin
    }
}

/// Every step's box in the DOM.
fn boxes(dom: &str) -> Vec<Drawn> {
    let pattern = regex::Regex::new(
        r#"data-step="([^"]*)" data-phase="[^"]*"><title>[^<]*</title><rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)""#,
    )
    .unwrap();
    pattern
        .captures_iter(dom)
        .map(|c| {
            let n = |i: usize| c[i].parse::<f64>().unwrap();
            Drawn {
                step: c[1].to_string(),
                rect: [n(2), n(3), n(2) + n(4), n(3) + n(5)],
            }
        })
        .collect()
}

/// A segment of a path: its point at `t` from 0 (its start) to 1 (its end).
type Segment<'a> = Box<dyn Fn(f64) -> (f64, f64) + 'a>;

/// Points along an SVG path of `M`, `L` and `C` commands (absolute), 64 per segment.
fn points_along(d: &str) -> Vec<(f64, f64)> {
    let tokens: Vec<&str> = d.split_whitespace().collect();
    let number = |i: usize| tokens[i].parse::<f64>().unwrap();
    let (mut points, mut at, mut i) = (Vec::new(), (0.0, 0.0), 0);
    while i < tokens.len() {
        let (command, args) = (tokens[i], i + 1);
        let p = |k: usize| (number(args + 2 * k), number(args + 2 * k + 1));
        let (next, used): (Segment<'_>, usize) = match command {
            "M" => (Box::new(move |_| p(0)), 2),
            "L" => {
                let (a, b) = (at, p(0));
                (
                    Box::new(move |t| (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t)),
                    2,
                )
            }
            "C" => {
                let (a, c1, c2, b) = (at, p(0), p(1), p(2));
                let bezier = move |t: f64| {
                    let u = 1.0 - t;
                    let mix = |a: f64, c1: f64, c2: f64, b: f64| {
                        u * u * u * a + 3.0 * u * u * t * c1 + 3.0 * u * t * t * c2 + t * t * t * b
                    };
                    (mix(a.0, c1.0, c2.0, b.0), mix(a.1, c1.1, c2.1, b.1))
                };
                (Box::new(bezier), 6)
            }
            other => panic!("a path command this test does not read: {other} in {d}"),
        };
        points.extend((0..=64).map(|k| next(f64::from(k) / 64.0)));
        at = next(1.0);
        i = args + used;
    }
    points
}

// --- plain HTTP ---

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

async fn request(method: &str, url: &str) -> Reply {
    let client: HttpClient<_, Empty<Bytes>> =
        HttpClient::builder(TokioExecutor::new()).build_http();
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .body(Empty::new())
        .expect("a request");
    let response = client.request(request).await.expect("the server answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

// --- the tests ---

#[rstest]
#[tokio::test]
async fn the_dag_of_a_diamond_has_a_node_per_step_with_its_phase_and_its_edges(
    #[future(awt)] namespace: Namespace,
) {
    let Some(browser) = Chromium::find("the_dag_of_a_diamond") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let gate = Gate::new();
    view.ns.create(gated_diamond("diamond", &gate)).await;
    let path = view.workflow_path("diamond");
    // Progress 2/4 with step2 held by its gate: step0 and step1 succeeded, step2 runs. (The
    // summary says so; the DAG is what is checked.)
    view.wait_page(&path, &["<dd>2/4</dd>"]).await;

    let dom = browser.dump_dom(&view.url(&path)).await;
    let nodes: Vec<&str> = dom
        .match_indices(r#"<g class="node"#)
        .map(|(i, _)| &dom[i..])
        .collect();
    assert_eq!(nodes.len(), 4, "one node per step: {dom}");
    for (step, phase) in [
        ("step0", "Succeeded"),
        ("step1", "Succeeded"),
        ("step2", "Running"),
        ("step3", "Waiting"),
    ] {
        assert!(dom.contains(&node(step, phase)), "{step} {phase}: {dom}");
    }
    assert_eq!(dom.matches(r#"<path class="edge""#).count(), 4, "{dom}");
    browser
        .screenshot(&view.url(&path), "diamond", (900, 560))
        .await;

    gate.open();
    view.ns.expect_completed("diamond").await;
    view.wait_page(&path, &["<dd>4/4</dd>"]).await;
    let dom = browser.dump_dom(&view.url(&path)).await;
    assert_eq!(dom.matches(r#"data-phase="Succeeded""#).count(), 4, "{dom}");
}

#[rstest]
#[tokio::test]
async fn a_change_appears_in_the_open_page_without_a_reload(#[future(awt)] namespace: Namespace) {
    let Some(browser) = Chromium::find("a_change_appears_in_the_open_page") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let gate = Gate::new();
    view.ns.create(gated_diamond("live", &gate)).await;
    let path = view.workflow_path("live");
    // Progress 2/4 with step2 held by its gate: step0 and step1 succeeded, step2 runs. (The
    // summary says so; the DAG is what is checked.)
    view.wait_page(&path, &["<dd>2/4</dd>"]).await;

    let page = browser.open(&view.url(&path)).await;
    page.wait_title("live · Started 2/4").await;
    // The page stays open; only its script can bring what follows into it.
    gate.open();
    page.wait_title("live · Completed 4/4").await;
}

#[rstest]
#[tokio::test]
async fn a_step_named_like_markup_is_shown_as_text(#[future(awt)] namespace: Namespace) {
    let Some(browser) = Chromium::find("a_step_named_like_markup") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    view.ns
        .create(WorkFlow::test("markup").step(MARKUP_NAME, &[]).command(&[
            "sh",
            "-c",
            "echo '<script>alert(2)</script>'",
        ]))
        .await;
    view.ns.expect_completed("markup").await;
    let path = format!(
        "{}?step={}",
        view.workflow_path("markup"),
        web::escape::query_value(MARKUP_NAME)
    );
    // The panel shows the log (whatever escaping does to it).
    view.wait_page(&path, &[r#"<pre class="log">"#]).await;

    let dom = browser.dump_dom(&view.url(&path)).await;
    assert!(
        !dom.to_lowercase().contains("<img"),
        "no img element: {dom}"
    );
    assert!(
        !dom.contains("<script>alert"),
        "no script from the log: {dom}"
    );
    let escaped = "&lt;img src=x onerror=alert(1)&gt;";
    assert!(
        dom.contains(&format!(r#"data-step="{escaped}" data-phase="Succeeded""#)),
        "{dom}"
    );
    assert!(
        dom.contains(&format!("<h2>Step {escaped}</h2>")),
        "the panel names it as text: {dom}"
    );
    assert!(
        dom.contains("&lt;script&gt;alert(2)&lt;/script&gt;"),
        "the log as text: {dom}"
    );
}

#[rstest]
#[tokio::test]
async fn every_route_answers_get_only_with_the_pages_and_assets(
    #[future(awt)] namespace: Namespace,
) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    view.ns
        .create(WorkFlow::test("plain").step("a", &[]).command(&["true"]))
        .await;
    view.ns.expect_completed("plain").await;
    let ns = view.ns.name.clone();
    let page = view.workflow_path("plain");
    view.wait_page(&page, &[&node("a", "Succeeded")]).await;

    let routes = [
        ("/".to_string(), "text/html", "plain"),
        (format!("/namespaces/{ns}/workflows"), "text/html", "plain"),
        (page.clone(), "text/html", r#"data-step="a""#),
        (format!("{page}?step=a"), "text/html", "<h2>Step a</h2>"),
        (format!("{page}/dag.svg"), "image/svg+xml", "<svg"),
        ("/assets/style.css".to_string(), "text/css", "svg.dag"),
        (
            "/assets/live.js".to_string(),
            "text/javascript",
            "EventSource",
        ),
    ];
    for (path, content_type, contains) in &routes {
        let reply = request("GET", &view.url(path)).await;
        assert_eq!(reply.status, 200, "GET {path}: {}", reply.body);
        let served = reply.headers[http::header::CONTENT_TYPE].to_str().unwrap();
        assert!(served.starts_with(content_type), "GET {path}: {served}");
        assert!(reply.body.contains(contains), "GET {path}: {}", reply.body);
        let policy = reply.headers[http::header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(policy.contains("script-src 'self'"), "GET {path}: {policy}");
    }
    let live = [
        "/live".to_string(),
        format!("/namespaces/{ns}/live"),
        format!("{page}/live"),
    ];
    for path in routes.iter().map(|r| r.0.clone()).chain(live) {
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            let reply = request(method, &view.url(&path)).await;
            assert_eq!(reply.status, 405, "{method} {path}");
        }
    }
    // Only the namespace the operator watches is shown.
    for path in [
        "/namespaces/default/workflows",
        "/namespaces/default/workflows/plain",
        "/namespaces/default/live",
    ] {
        assert_eq!(
            request("GET", &view.url(path)).await.status,
            404,
            "GET {path}"
        );
    }
    assert_eq!(
        request("GET", &view.url(&view.workflow_path("absent")))
            .await
            .status,
        404
    );
}

#[rstest]
#[tokio::test]
async fn names_messages_and_logs_are_escaped_over_http(#[future(awt)] namespace: Namespace) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    view.ns
        .create(WorkFlow::test("escaped").step(MARKUP_NAME, &[]).command(&[
            "sh",
            "-c",
            "echo '<b onmouseover=x>log</b>'; exit 3",
        ]))
        .await;
    view.ns.expect_failed("escaped", &["exit code 3"]).await;
    let page = format!(
        "{}?step={}",
        view.workflow_path("escaped"),
        web::escape::query_value(MARKUP_NAME)
    );
    let html = view.wait_page(&page, &[r#"<pre class="log">"#]).await;
    assert!(
        html.contains("&lt;b onmouseover=x&gt;log&lt;/b&gt;"),
        "{html}"
    );
    assert!(
        !html.contains("<img") && !html.contains("<b onmouseover"),
        "{html}"
    );
    // The workflow's message names the step: escaped in the summary and the list.
    assert!(
        html.contains("step &lt;img src=x onerror=alert(1)&gt; failed"),
        "{html}"
    );
    let list = request(
        "GET",
        &view.url(&format!("/namespaces/{}/workflows", view.ns.name)),
    )
    .await;
    assert!(
        list.body.contains("&lt;img src=x onerror=alert(1)&gt;") && !list.body.contains("<img"),
        "{}",
        list.body
    );
}

/// A step that prints, then waits for `gate`, with no timeout: terminated while it runs.
fn long_step(name: &str, gate: &Gate) -> workflow_operator_core::testing::WorkFlowBuilder {
    let script = format!("echo long started; {}", gate.wait_script());
    WorkFlow::test(name)
        .step("long", &[])
        .command(&["sh", "-c", &script])
        .timeout(-1)
}

/// A terminated step's panel says when it stopped (its duration does not grow) and shows its
/// pod's log, the pod kept; once `podCleanup` deleted the pod, it says so and why, rather than
/// that no pod has run.
#[rstest]
#[tokio::test]
async fn a_terminated_steps_panel_shows_when_it_stopped_and_its_pod_or_why_it_is_gone(
    #[future(awt)] namespace: Namespace,
) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let gate = Gate::new();
    view.ns.create(long_step("kept", &gate)).await;
    let mut cleaned = view.ns.manifest(long_step("cleaned", &gate));
    cleaned.spec.pod_cleanup = Some(workflow_operator_core::crd::PodCleanup::OnWorkflowCompletion);
    view.ns
        .workflows()
        .create(&Default::default(), &cleaned)
        .await
        .expect("creating workflow cleaned");
    for name in ["kept", "cleaned"] {
        let job = view
            .ns
            .wait_step_job(name, "long", "running", |j| {
                j.status.as_ref().and_then(|s| s.active) == Some(1)
            })
            .await;
        eventually("long's first line", DEADLINE, || async {
            (view.ns.job_log(&job).await)
                .contains("long started")
                .then_some(())
        })
        .await;
        view.ns
            .patch_spec(name, json!({"shutdown": "Terminate"}))
            .await;
        view.ns.expect_failed(name, &["terminated"]).await;
    }
    let kept = format!("{}?step=long", view.workflow_path("kept"));
    // The Event `step long started` is on the page too: the log is what is waited for.
    let html = view
        .wait_page(&kept, &[r#"<pre class="log">long started"#])
        .await;
    assert!(html.contains("<dt>Finished</dt>"), "{html}");
    let cleaned = format!("{}?step=long", view.workflow_path("cleaned"));
    let html = view
        .wait_page(
            &cleaned,
            &["its pods were deleted once it finished (spec.podCleanup: OnWorkflowCompletion)"],
        )
        .await;
    assert!(html.contains("<dt>Finished</dt>"), "{html}");
    assert!(!html.contains("No pod has run"), "{html}");
}

#[rstest]
#[tokio::test]
async fn a_change_of_a_workflow_is_sent_to_its_live_stream(#[future(awt)] namespace: Namespace) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    view.ns
        .create(WorkFlow::test("streamed").step("a", &[]).command(&["true"]))
        .await;
    view.ns.expect_completed("streamed").await;
    let page = view.workflow_path("streamed");
    view.wait_page(&page, &[&node("a", "Succeeded")]).await;

    let client: HttpClient<_, Empty<Bytes>> =
        HttpClient::builder(TokioExecutor::new()).build_http();
    let response = client
        .get(view.url(&format!("{page}/live")).parse().unwrap())
        .await
        .expect("the stream opens");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()[http::header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();
    // Open: a change made now is sent.
    view.ns
        .workflows()
        .patch(
            "streamed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
        )
        .await
        .expect("relabelled");
    let mut received = String::new();
    tokio::time::timeout(DEADLINE, async {
        while !received.contains("event: changed\ndata: streamed\n") {
            let frame = body
                .frame()
                .await
                .expect("the stream stays open")
                .expect("a frame");
            if let Ok(data) = frame.into_data() {
                received.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no change event within {DEADLINE:?}: {received:?}"));
}

#[tokio::test]
async fn dev_prints_the_web_views_url_next_to_the_kubeconfig_and_off_turns_it_off() {
    let run = |extra: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"));
        command
            .args(["dev", "--apply", "examples/diamond.yaml", "--until-done"])
            .args(extra)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .kill_on_drop(true);
        command.output()
    };
    let output = tokio::time::timeout(Duration::from_secs(120), run(&[]))
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let kubeconfig = lines
        .iter()
        .position(|l| l.starts_with("export KUBECONFIG="))
        .expect("the kubeconfig line");
    let web = lines[kubeconfig + 1];
    assert!(web.starts_with("web view at http://127.0.0.1:"), "{stdout}");

    let output = tokio::time::timeout(Duration::from_secs(120), run(&["--web-addr", "off"]))
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(!stdout.contains("web view"), "{stdout}");
}

/// A workflow made from a `dag` template called per item is drawn with the steps that run,
/// named under the call (`each[1]/test`), each with its phase.
#[rstest]
#[tokio::test]
async fn a_workflow_made_from_templates_is_drawn_with_its_expanded_steps(
    #[future(awt)] namespace: Namespace,
) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let workflow: WorkFlow = serde_yaml::from_str(
        r#"
metadata: {name: templated}
spec:
  templates:
    - name: pipeline
      dag:
        - {stepName: build, image: x, command: [echo, build]}
        - {stepName: test, image: x, dependsOn: [build], command: [echo, test]}
  containers:
    - {stepName: each, template: pipeline, withItems: [a, b]}
"#,
    )
    .unwrap();
    let workflows = view.ns.workflows();
    workflows
        .create(&kube::api::PostParams::default(), &workflow)
        .await
        .unwrap();
    view.ns.expect_completed("templated").await;
    let page = view
        .wait_page(
            &view.workflow_path("templated"),
            &[
                &node("each[0]/build", "Succeeded"),
                &node("each[1]/test", "Succeeded"),
            ],
        )
        .await;
    assert!(!page.contains(r#"data-step="each""#), "{page}");
}

/// The list page shows each CronWorkFlow with its schedules, next time and its runs.
#[rstest]
#[tokio::test]
async fn the_list_shows_each_schedule_with_its_next_time_and_runs(
    #[future(awt)] namespace: Namespace,
) {
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let cron: workflow_operator_core::crd::CronWorkFlow = serde_yaml::from_str(
        r#"
metadata: {name: beat}
spec:
  schedules: ["@every 2s"]
  workflowSpec: {containers: [{stepName: a, image: x, command: [echo, hi]}]}
"#,
    )
    .unwrap();
    kube::api::Api::namespaced(view.ns.client(), &view.ns.name)
        .create(&kube::api::PostParams::default(), &cron)
        .await
        .unwrap();
    let page = view
        .wait_page(
            &format!("/namespaces/{}/workflows", view.ns.name),
            &[r#"data-cron="beat""#, r#"data-run="beat-"#],
        )
        .await;
    assert!(page.contains("@every 2s"), "{page}");
}

#[rstest]
#[tokio::test]
async fn exit_steps_are_a_dashed_group_joined_to_the_last_steps_by_dashed_edges(
    #[future(awt)] namespace: Namespace,
) {
    let Some(browser) = Chromium::find("exit_steps_are_a_dashed_group") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let dom = marked_page(&browser, &view, "exit-group").await;
    let group = dom
        .split(r#"<g class="exit-group""#)
        .nth(1)
        .unwrap_or_else(|| panic!("an exit group: {dom}"));
    // The group is drawn last: all that follows it in the drawing is its own.
    let group = group.split("</svg>").next().unwrap_or(group);
    assert!(
        group.contains(r#"stroke-dasharray="#),
        "a dashed border: {group}"
    );
    assert!(group.contains(">onExit</text>"), "labelled onExit: {group}");
    assert!(
        group.contains(r#"data-step="notify""#),
        "notify inside it: {group}"
    );
    assert!(
        !group.contains(r#"data-step="fatal""#),
        "only exit steps: {group}"
    );
    let dashed: Vec<&str> = dom
        .match_indices(r#"<path class="edge after-all""#)
        .map(|(i, _)| &dom[i..i + dom[i..].find('>').unwrap()])
        .collect();
    assert_eq!(dashed.len(), 1, "one edge from the last step, fatal: {dom}");
    assert!(
        dashed[0].contains(r#"data-from="fatal" data-to="notify""#),
        "{dashed:?}"
    );
    assert!(dashed[0].contains("stroke-dasharray="), "{dashed:?}");
    browser
        .screenshot(
            &view.url(&view.workflow_path("exit-group")),
            "marked",
            (900, 700),
        )
        .await;
}

#[rstest]
#[tokio::test]
async fn no_edge_crosses_a_box_that_is_not_one_of_its_ends(#[future(awt)] namespace: Namespace) {
    let Some(browser) = Chromium::find("no_edge_crosses_a_box") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let dom = marked_page(&browser, &view, "routed").await;
    let boxes = boxes(&dom);
    assert_eq!(boxes.len(), 6, "a box per step: {dom}");
    let paths = regex::Regex::new(r#"<path class="edge[^"]*"[^>]* d="([^"]*)""#).unwrap();
    let edges: Vec<String> = paths
        .captures_iter(&dom)
        .map(|c| c[1].to_string())
        .collect();
    for d in &edges {
        let points = points_along(d);
        let (start, end) = (points[0], points[points.len() - 1]);
        let ends: Vec<&str> = (boxes.iter())
            .filter(|b| b.touches(start, 1.0) || b.touches(end, 1.0))
            .map(|b| b.step.as_str())
            .collect();
        assert_eq!(
            ends.len(),
            2,
            "an edge from one box to another: {d} touches {ends:?}"
        );
        for other in boxes.iter().filter(|b| !ends.contains(&b.step.as_str())) {
            let inside = points.iter().find(|&&p| other.holds(p, 1.0));
            assert!(
                inside.is_none(),
                "the edge {ends:?} crosses the box of {} at {inside:?}: {d}",
                other.step
            );
        }
    }
    // a->b, a->c, b->c, c->fatal, tolerated->fatal, and fatal->notify after all.
    assert_eq!(edges.len(), 6, "{dom}");
}

#[rstest]
#[tokio::test]
async fn a_tolerated_failure_is_marked_apart_from_a_fatal_one(#[future(awt)] namespace: Namespace) {
    let Some(browser) = Chromium::find("a_tolerated_failure_is_marked") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let dom = marked_page(&browser, &view, "tolerance").await;
    let (tolerated, fatal) = (tag_of(&dom, "tolerated"), tag_of(&dom, "fatal"));
    for tag in [tolerated, fatal] {
        assert!(tag.contains(r#"data-phase="Failed""#), "both failed: {tag}");
    }
    assert!(
        tolerated.contains(r#"class="node phase-Failed tolerated""#),
        "{tolerated}"
    );
    assert!(!fatal.contains("tolerated"), "{fatal}");
    let detail = |step: &str| {
        let from = dom.find(&format!(r#"data-step="{step}""#)).unwrap();
        let text = &dom[from..];
        let detail = text.find(r#"class="detail">"#).unwrap() + 15;
        text[detail..detail + text[detail..].find('<').unwrap()].to_string()
    };
    assert_eq!(detail("tolerated"), "Failed · tolerated");
    assert_eq!(detail("fatal"), "Failed");
}

#[rstest]
#[tokio::test]
async fn event_times_are_shown_to_the_second(#[future(awt)] namespace: Namespace) {
    let Some(browser) = Chromium::find("event_times_are_shown_to_the_second") else {
        return;
    };
    let Some(view) = View::start(namespace).await else {
        return;
    };
    let dom = marked_page(&browser, &view, "timed").await;
    let table = dom
        .split(r#"<table class="events">"#)
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or_else(|| panic!("an Events table: {dom}"));
    let row = regex::Regex::new(r"<tr><td>([^<]*)</td>").unwrap();
    let times: Vec<&str> = row
        .captures_iter(table)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(!times.is_empty(), "{table}");
    let second = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").unwrap();
    for time in times {
        assert!(
            second.is_match(time),
            "{time:?} is not to the second: {table}"
        );
    }
}
