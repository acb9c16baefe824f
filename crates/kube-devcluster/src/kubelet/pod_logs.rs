//! A container's log as the kubelet keeps and serves it: each line with the time it was written,
//! read back with the options of `GET .../pods/NAME/log` (`follow`, `tailLines`, `timestamps`,
//! `sinceSeconds`, `sinceTime`, `limitBytes`), as k8s.io/kubernetes
//! pkg/kubelet/kuberuntime/logs/logs.go (`ReadLogs`) applies them: lines older than `since` are
//! skipped, `tail` keeps the last lines, `timestamps` prefixes each line with its time
//! (RFC 3339, nine fraction digits), `limitBytes` cuts the output, and `follow` keeps streaming
//! what the container writes until it ends. Which container's log, and whether its current or
//! previous run, are checked as the API server and the kubelet check them ([`container_of`],
//! [`not_available`], [`no_previous`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use kube_schema_check::FieldError;
use serde_json::Value;

use crate::api::error::{ApiError, Result};

/// Where the API server reads pod logs from: the kubelet ([`crate::kubelet::Shared`]).
pub trait PodLogs: Send + Sync {
    /// The log of a pod's container as `options` ask for it; `None` when the kubelet never ran
    /// that container (with `previous`: never restarted it).
    fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Option<LogStream>;
}

/// How much of a pod's output is kept (the end of it).
pub const LOG_LIMIT: usize = 1 << 20;

/// What a client streams a log as.
pub type LogStream = BoxStream<'static, Bytes>;

/// The query of a log request, validated as pkg/apis/core/validation
/// (`ValidatePodLogOptions`) does.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    pub follow: bool,
    pub tail_lines: Option<usize>,
    pub timestamps: bool,
    pub since: Option<DateTime<Utc>>,
    pub limit_bytes: Option<usize>,
    /// The container's run before the current one (`previous`).
    pub previous: bool,
}

/// The container a log request reads, as the API server picks it
/// (pkg/registry/core/pod/strategy.go, `LogLocation` -> `validateContainer`): the one named,
/// which must be one of the pod's containers, init or ephemeral containers; without a name the
/// pod's only container. Otherwise 400.
pub fn container_of(pod: &Value, asked: Option<&str>) -> Result<String> {
    let names_in = |list: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
            .collect()
    };
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let containers = names_in("containers");
    match asked.filter(|name| !name.is_empty()) {
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {pod_name}"
            ))),
            _ => {
                // `podutil.VisitContainers` order, printed as Go prints a []string.
                let mut all = names_in("initContainers");
                all.extend(containers);
                all.extend(names_in("ephemeralContainers"));
                Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    all.join(" ")
                )))
            }
        },
        Some(name) => {
            let known = ["initContainers", "containers", "ephemeralContainers"]
                .iter()
                .any(|list| names_in(list).iter().any(|n| n == name));
            if known {
                Ok(name.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {name} is not valid for pod {pod_name}"
                )))
            }
        }
    }
}

/// Whether the embedded kubelet runs `container` of `pod`: the pod's first container and every
/// init container (sidecars among them); the other regular containers never run here.
pub fn is_run(pod: &Value, container: &str) -> bool {
    let named = |c: &Value| c.get("name").and_then(Value::as_str) == Some(container);
    pod.pointer("/spec/containers/0").is_some_and(named)
        || crate::kubelet::init_containers::init_containers(pod)
            .iter()
            .any(named)
}

/// The kubelet's answer for a container it has no status of (pkg/kubelet/kubelet_pods.go,
/// `validateContainerLogStatus`; its server answers such errors 400, `getContainerLogs`): here
/// a regular container but a pod's first, which the embedded kubelet does not run.
pub fn not_available(container: &str, pod: &str) -> ApiError {
    ApiError::bad_request(format!(
        "container {container:?} in pod {pod:?} is not available"
    ))
}

/// The kubelet's answer to `previous` for a container that has not been restarted (same place).
pub fn no_previous(container: &str, pod: &str) -> ApiError {
    ApiError::bad_request(format!(
        "previous terminated container {container:?} in pod {pod:?} not found"
    ))
}

/// Go's `strconv.ParseBool`, which the API server's query decoding uses.
pub fn parse_bool(name: &str, value: Option<&str>) -> Result<bool> {
    match value {
        None | Some("") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name}: invalid boolean value {other:?}"
        ))),
    }
}

impl LogOptions {
    /// From the raw query values; 422 (kind `PodLogOptions`) for values the server refuses.
    pub fn parse(
        follow: Option<&str>,
        tail_lines: Option<i64>,
        timestamps: Option<&str>,
        since_seconds: Option<i64>,
        since_time: Option<&str>,
        limit_bytes: Option<i64>,
        previous: Option<&str>,
    ) -> Result<Self> {
        let mut errors = Vec::new();
        if tail_lines.is_some_and(|n| n < 0) {
            errors.push(FieldError::invalid(
                "tailLines",
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    tail_lines.unwrap_or_default()
                ),
            ));
        }
        if limit_bytes.is_some_and(|n| n < 1) {
            errors.push(FieldError::invalid(
                "limitBytes",
                format!(
                    "Invalid value: {}: must be greater than 0",
                    limit_bytes.unwrap_or_default()
                ),
            ));
        }
        if since_seconds.is_some() && since_time.is_some() {
            errors.push(FieldError::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ));
        }
        if since_seconds.is_some_and(|n| n < 1) {
            errors.push(FieldError::invalid(
                "sinceSeconds",
                format!(
                    "Invalid value: {}: must be greater than 0",
                    since_seconds.unwrap_or_default()
                ),
            ));
        }
        let since_time = match since_time {
            None => None,
            Some(text) => Some(
                DateTime::parse_from_rfc3339(text)
                    .map_err(|e| ApiError::bad_request(format!("sinceTime: {e}")))?
                    .with_timezone(&Utc),
            ),
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid("PodLogOptions", "", errors));
        }
        let since =
            since_time.or_else(|| since_seconds.map(|s| Utc::now() - chrono::Duration::seconds(s)));
        Ok(Self {
            follow: parse_bool("follow", follow)?,
            tail_lines: tail_lines.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            timestamps: parse_bool("timestamps", timestamps)?,
            since,
            limit_bytes: limit_bytes.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            previous: parse_bool("previous", previous)?,
        })
    }
}

/// One line of output (the last may still be unfinished).
#[derive(Debug)]
struct Line {
    at: DateTime<Utc>,
    text: Vec<u8>,
    complete: bool,
}

/// The end of a container's output, at most [`LOG_LIMIT`] bytes, line by line; `open` while
/// the container runs.
#[derive(Debug, Default)]
struct Buffer {
    lines: VecDeque<Line>,
    bytes: usize,
    /// The number of lines dropped from the front (so a follower can tell where it is).
    dropped: u64,
    open: bool,
}

impl Buffer {
    fn push(&mut self, mut bytes: &[u8], now: DateTime<Utc>) {
        while !bytes.is_empty() {
            let (piece, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..=at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            match self.lines.back_mut() {
                Some(last) if !last.complete => {
                    last.text.extend_from_slice(piece);
                    last.complete = complete;
                }
                _ => self.lines.push_back(Line {
                    at: now,
                    text: piece.to_vec(),
                    complete,
                }),
            }
            self.bytes += piece.len();
            bytes = rest;
        }
        while self.bytes > LOG_LIMIT {
            let Some(front) = self.lines.front_mut() else {
                break;
            };
            let excess = self.bytes - LOG_LIMIT;
            if front.text.len() > excess {
                front.text.drain(..excess);
                self.bytes -= excess;
            } else {
                self.bytes -= front.text.len();
                self.lines.pop_front();
                self.dropped += 1;
            }
        }
    }

    /// Lines from number `from` on (counted since the start); only complete ones unless
    /// `partial`.
    fn since_line(&self, from: u64, partial: bool) -> impl Iterator<Item = (u64, &Line)> {
        let skip = usize::try_from(from.saturating_sub(self.dropped)).unwrap_or(usize::MAX);
        let dropped = self.dropped;
        self.lines
            .iter()
            .enumerate()
            .skip(skip)
            .map(move |(i, line)| (dropped + i as u64, line))
            .filter(move |(_, line)| partial || line.complete)
    }
}

/// A container's log, shared by the runner that writes it and the requests that read it.
#[derive(Debug)]
pub struct Log {
    buffer: Mutex<Buffer>,
    changed: tokio::sync::watch::Sender<()>,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            buffer: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(()),
        }
    }
}

impl Log {
    fn buffer(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.buffer.lock().expect("log lock poisoned")
    }

    pub fn push(&self, bytes: &[u8]) {
        self.buffer().push(bytes, Utc::now());
        self.changed.send_replace(());
    }

    /// A container starts writing (followers wait for more).
    pub fn open(&self) {
        self.buffer().open = true;
        self.changed.send_replace(());
    }

    /// The container ended (followers get the rest and stop).
    pub fn close(&self) {
        self.buffer().open = false;
        self.changed.send_replace(());
    }

    /// All of it, as text.
    pub fn text(&self) -> String {
        let buffer = self.buffer();
        let mut bytes = Vec::with_capacity(buffer.bytes);
        for line in &buffer.lines {
            bytes.extend_from_slice(&line.text);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The log as `options` ask for it: what is there now, then (with `follow`) what comes
    /// until the container ends.
    pub fn read(self: &Arc<Self>, options: &LogOptions) -> LogStream {
        // Subscribed before the first read: whatever is written after it wakes the follower.
        let changed = self.changed.subscribe();
        let following = {
            let buffer = self.buffer();
            options.follow && buffer.open
        };
        let (first, next) = {
            let buffer = self.buffer();
            // While following a running container an unfinished last line waits to be finished.
            let mut lines: Vec<(u64, &Line)> = buffer
                .since_line(0, !following)
                .filter(|(_, line)| options.since.is_none_or(|since| line.at >= since))
                .collect();
            if let Some(tail) = options.tail_lines {
                lines.drain(..lines.len().saturating_sub(tail));
            }
            let complete = buffer.lines.iter().filter(|l| l.complete).count() as u64;
            (format(&lines, options), buffer.dropped + complete)
        };
        let mut budget = Budget(options.limit_bytes);
        let first = budget.take(first);
        let head = futures::stream::iter((!first.is_empty()).then_some(first));
        if !following || budget.spent() {
            return Box::pin(head);
        }
        let options = options.clone();
        let tail = futures::stream::unfold(
            (self.clone(), next, budget, changed, false),
            move |(log, mut next, mut budget, mut changed, done)| {
                let options = options.clone();
                async move {
                    if done {
                        return None;
                    }
                    loop {
                        let (chunk, open) = {
                            let buffer = log.buffer();
                            let lines: Vec<(u64, &Line)> =
                                buffer.since_line(next, !buffer.open).collect();
                            if let Some((n, _)) = lines.last() {
                                next = n + 1;
                            }
                            (format(&lines, &options), buffer.open)
                        };
                        let chunk = budget.take(chunk);
                        let finished = !open || budget.spent();
                        if !chunk.is_empty() {
                            return Some((chunk, (log, next, budget, changed, finished)));
                        }
                        if finished || changed.changed().await.is_err() {
                            return None;
                        }
                    }
                }
            },
        );
        Box::pin(futures::StreamExt::chain(head, tail))
    }
}

/// What is left of `limitBytes`.
struct Budget(Option<usize>);

impl Budget {
    fn take(&mut self, mut chunk: Vec<u8>) -> Bytes {
        if let Some(left) = self.0.as_mut() {
            chunk.truncate(*left);
            *left -= chunk.len();
        }
        Bytes::from(chunk)
    }

    fn spent(&self) -> bool {
        self.0 == Some(0)
    }
}

/// The lines' bytes, each after its timestamp when asked for (the kubelet's
/// `timestampFormat`, `2006-01-02T15:04:05.000000000Z07:00`, in UTC).
fn format(lines: &[(u64, &Line)], options: &LogOptions) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, line) in lines {
        if options.timestamps {
            out.extend_from_slice(
                line.at
                    .format("%Y-%m-%dT%H:%M:%S%.9fZ ")
                    .to_string()
                    .as_bytes(),
            );
        }
        out.extend_from_slice(&line.text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    async fn read_all(log: &Arc<Log>, options: LogOptions) -> String {
        let chunks: Vec<Bytes> = log.read(&options).collect().await;
        String::from_utf8(chunks.concat()).unwrap()
    }

    #[tokio::test]
    async fn options_filter_and_cut() {
        let log = Arc::new(Log::default());
        log.push(b"one\ntwo\nthr");
        log.push(b"ee\nfour");
        assert_eq!(
            read_all(&log, LogOptions::default()).await,
            "one\ntwo\nthree\nfour"
        );
        let tail = LogOptions {
            tail_lines: Some(2),
            ..LogOptions::default()
        };
        assert_eq!(read_all(&log, tail).await, "three\nfour");
        let limit = LogOptions {
            limit_bytes: Some(5),
            ..LogOptions::default()
        };
        assert_eq!(read_all(&log, limit).await, "one\nt");
        let stamped = read_all(
            &log,
            LogOptions {
                timestamps: true,
                ..LogOptions::default()
            },
        )
        .await;
        assert_eq!(stamped.lines().count(), 4);
        assert!(
            stamped.lines().all(|l| l.len() > 31 && &l[30..31] == " "),
            "{stamped}"
        );
        let future = LogOptions {
            since: Some(Utc::now() + chrono::Duration::seconds(5)),
            ..LogOptions::default()
        };
        assert_eq!(read_all(&log, future).await, "");
    }

    #[tokio::test]
    async fn follow_streams_until_closed() {
        let log = Arc::new(Log::default());
        log.open();
        log.push(b"a\npart");
        let mut stream = log.read(&LogOptions {
            follow: true,
            ..LogOptions::default()
        });
        assert_eq!(stream.next().await.unwrap(), "a\n");
        log.push(b"ial\nb\n");
        assert_eq!(stream.next().await.unwrap(), "partial\nb\n");
        log.push(b"end");
        log.close();
        assert_eq!(stream.next().await.unwrap(), "end");
        assert!(stream.next().await.is_none());
    }

    #[test]
    fn the_buffer_keeps_the_end() {
        let mut buffer = Buffer::default();
        buffer.push(b"hello\n", Utc::now());
        buffer.push(&vec![b'x'; LOG_LIMIT], Utc::now());
        buffer.push(b"end", Utc::now());
        assert_eq!(buffer.bytes, LOG_LIMIT);
        assert_eq!(buffer.lines.len(), 1);
        assert!(buffer.lines[0].text.ends_with(b"xxend"));
    }

    #[test]
    fn invalid_options_are_refused() {
        assert_eq!(
            LogOptions::parse(None, Some(-1), None, None, None, None, None)
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(
            LogOptions::parse(
                None,
                None,
                None,
                Some(5),
                Some("2024-01-01T00:00:00Z"),
                None,
                None
            )
            .unwrap_err()
            .code,
            422
        );
        let ok = LogOptions::parse(
            Some("True"),
            Some(3),
            Some("true"),
            None,
            None,
            Some(9),
            Some("1"),
        )
        .unwrap();
        assert!(ok.follow && ok.timestamps && ok.previous);
        assert_eq!((ok.tail_lines, ok.limit_bytes), (Some(3), Some(9)));
    }
}
