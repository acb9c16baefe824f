//! Containers' termination messages, as the kubelet makes and reads them: every container has a
//! file at its `terminationMessagePath` (default `/dev/termination-log`) that it may write, and
//! once it has terminated, `state.terminated.message` is what it wrote (or, with
//! `terminationMessagePolicy: FallbackToLogsOnError`, the end of its log when it wrote nothing
//! and failed).
//!
//! The real kubelet creates an empty file per container instance in the pod's directory and
//! mounts it at the path (k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go,
//! `makeMounts`); the devcluster's kubelet does the same in the container's sandbox
//! ([`crate::kubelet::volumes::Sandbox`]). A local process sees a file at an arbitrary absolute
//! path only there, and a sandbox takes tens of milliseconds more to start than a plain process, so the
//! kubelet sandboxes a container for its message only when the process is told of the path
//! ([`Spec::is_told`]): a value of its environment, an argument or its command contains the
//! path. This is the
//! devcluster's limit: a container that finds the path some other way (a script from an image
//! that writes `/dev/termination-log` unasked) and has no `volumeMounts` or `workingDir` (which
//! sandbox it anyway) runs as a plain process and its message stays empty.
//!
//! Reading follows the kubelet ([`message`]): the last
//! [`MAX_CONTAINER_MESSAGE`] bytes of the file (`getTerminationMessage`, `tail.ReadAtMost`); with
//! `FallbackToLogsOnError`, a file left empty and an exit code other than 0, the last
//! [`MAX_LOG_LINES`] lines of this run's output cut to their last [`MAX_LOG_BYTES`] bytes
//! (`readLastStringFromContainerLogs`); appended to the runtime's own message after `": "` when
//! there is one (`convertToKubeContainerStatus`); then the status manager keeps at most the
//! first [`MAX_POD_MESSAGES`] bytes divided among the pod's containers and init containers
//! (pkg/kubelet/status/status_manager.go, `normalizeStatus`), and the API's JSON replaces each
//! byte that is not UTF-8 with U+FFFD (Go's encoding/json). An empty message is no `message`
//! at all (`ContainerStateTerminated.Message` is `omitempty`).

use std::collections::VecDeque;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Where the message file is when the container does not say: the API's default.
pub use crate::registry::pod_defaults::TERMINATION_MESSAGE_PATH as DEFAULT_PATH;

/// How much of the file is read, from its end
/// (`kubecontainer.MaxContainerTerminationMessageLength`, k8s.io/kubernetes
/// pkg/kubelet/container/runtime.go: 1024 * 4).
pub const MAX_CONTAINER_MESSAGE: usize = 4 * 1024;

/// The most a pod's messages hold together, shared evenly by its containers and init containers
/// (`kubecontainer.MaxPodTerminationMessageLogLength`, same file: 1024 * 12).
pub const MAX_POD_MESSAGES: usize = 12 * 1024;

/// The most bytes of log a fallback message holds, its end
/// (`MaxContainerTerminationMessageLogLength`, same file: 1024 * 2).
pub const MAX_LOG_BYTES: usize = 2 * 1024;

/// The most lines of log a fallback message holds, the last
/// (`MaxContainerTerminationMessageLogLines`, same file: 80).
pub const MAX_LOG_LINES: usize = 80;

/// A container's termination message settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `terminationMessagePath`, [`DEFAULT_PATH`] when unset.
    pub path: String,
    /// `terminationMessagePolicy` is `FallbackToLogsOnError`.
    pub fallback_to_logs: bool,
}

impl Spec {
    pub fn of(container: &Value) -> Self {
        let text = |field: &str| {
            container
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        Self {
            path: text("terminationMessagePath")
                .unwrap_or(DEFAULT_PATH)
                .to_string(),
            fallback_to_logs: text("terminationMessagePolicy") == Some("FallbackToLogsOnError"),
        }
    }

    /// Whether the process is told where its message file is: a value of its environment (as
    /// resolved, `valueFrom` and `envFrom` included) or an element of its command and
    /// arguments (after `$(VAR)` expansion) contains the path. Only then does the devcluster
    /// sandbox a container for its message (see the module's documentation).
    pub fn is_told<'a>(
        &self,
        argv: &'a [String],
        env: impl IntoIterator<Item = &'a String>,
    ) -> bool {
        argv.iter()
            .chain(env)
            .any(|text| text.contains(self.path.as_str()))
    }
}

/// One run's message file on the host, created empty; removed when dropped.
pub struct MessageFile {
    path: tempfile::TempPath,
}

impl MessageFile {
    /// A fresh empty file in `dir` (the pod's directory), writable by anyone, as the kubelet
    /// makes it (`makeMounts`: a file named by a random id, then `Chmod(0666)` so the umask
    /// does not decide).
    pub fn create_in(dir: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        let file = tempfile::Builder::new()
            .prefix("termination-")
            .tempfile_in(dir)?;
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o666))?;
        Ok(Self {
            path: file.into_temp_path(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last [`MAX_CONTAINER_MESSAGE`] bytes of the file (`tail.ReadAtMost`, pkg/util/tail);
    /// `Err` is the kubelet's message for a file it cannot read.
    fn read(&self) -> Result<Vec<u8>, String> {
        let read = || -> std::io::Result<Vec<u8>> {
            let mut file = std::fs::File::open(&self.path)?;
            let size = file.metadata()?.len();
            let keep = size.min(MAX_CONTAINER_MESSAGE as u64);
            file.seek(SeekFrom::Start(size - keep))?;
            let mut data = Vec::with_capacity(MAX_CONTAINER_MESSAGE);
            file.take(keep).read_to_end(&mut data)?;
            Ok(data)
        };
        match read() {
            Ok(data) => Ok(data),
            // `getTerminationMessage`: a missing file reads as empty.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(error) => Err(format!(
                "Error on reading termination log {}: {error}",
                self.path.display()
            )),
        }
    }
}

/// The end of one run's output (stdout and stderr as they come), enough for a fallback message:
/// the last [`MAX_LOG_LINES`] lines cut to [`MAX_LOG_BYTES`] are within the last
/// [`MAX_LOG_BYTES`] bytes. Cloning shares it.
#[derive(Clone, Default)]
pub struct OutputTail(Arc<Mutex<VecDeque<u8>>>);

impl OutputTail {
    pub fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().expect("output tail lock poisoned");
        let bytes = &bytes[bytes.len().saturating_sub(MAX_LOG_BYTES)..];
        let over = (tail.len() + bytes.len()).saturating_sub(MAX_LOG_BYTES);
        tail.drain(..over);
        tail.extend(bytes);
    }

    /// `readLastStringFromContainerLogs`: the last [`MAX_LOG_LINES`] lines (an unfinished last
    /// line counts, as its own entry of the runtime's log) into a ring buffer of
    /// [`MAX_LOG_BYTES`].
    fn message(&self) -> Vec<u8> {
        let tail = self.0.lock().expect("output tail lock poisoned");
        let bytes: Vec<u8> = tail.iter().copied().collect();
        // Every newline but a final one ends a line before the last; the lines wanted start
        // after the MAX_LOG_LINES-th such newline from the end.
        let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let start = body
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, b)| **b == b'\n')
            .nth(MAX_LOG_LINES - 1)
            .map_or(0, |(at, _)| at + 1);
        bytes[start..].to_vec()
    }
}

/// The `message` of a terminated container (`None`: no message): what the runtime said
/// (`runtime`, e.g. why waiting for the process failed), then the container's own message, as
/// the kubelet puts them together; `exit_code` decides the log fallback, `file` is this run's
/// message file (`None` where the container ran unsandboxed, so it had none), `output` this
/// run's output, and `pod_containers` the number of the pod's containers and init containers.
pub fn message(
    spec: &Spec,
    runtime: Option<&str>,
    exit_code: i32,
    file: Option<&MessageFile>,
    output: &OutputTail,
    pod_containers: usize,
) -> Option<String> {
    // `convertToKubeContainerStatus`; the devcluster has no `ContainerCannotRun` (a container
    // that cannot start never comes here), so only the policy and the exit code decide.
    let fallback = spec.fallback_to_logs && exit_code != 0;
    let own = match file.map_or(Ok(Vec::new()), MessageFile::read) {
        Ok(data) if data.is_empty() && fallback => output.message(),
        Ok(data) => data,
        Err(why) => why.into_bytes(),
    };
    let mut text = runtime.unwrap_or_default().as_bytes().to_vec();
    if !own.is_empty() {
        if !text.is_empty() {
            text.extend_from_slice(b": ");
        }
        text.extend_from_slice(&own);
    }
    // `normalizeStatus`: the first bytes of the pod's share, cut wherever the byte falls.
    text.truncate(MAX_POD_MESSAGES / pod_containers.max(1));
    (!text.is_empty()).then(|| go_json_string(&text))
}

/// `bytes` as Go's encoding/json writes a string: each byte that does not begin a valid UTF-8
/// sequence becomes U+FFFD, one per byte.
fn go_json_string(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(error) => {
                let (valid, rest) = bytes.split_at(error.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                out.push(char::REPLACEMENT_CHARACTER);
                bytes = &rest[1..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_process_is_told_the_path_by_its_env_command_or_args() {
        let spec = Spec::of(&json!({}));
        assert_eq!(spec.path, DEFAULT_PATH);
        assert!(!spec.fallback_to_logs);
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = [String::from("/usr/bin")];
        assert!(!spec.is_told(&argv(&["sh", "-c", "echo hi"]), &env));
        assert!(spec.is_told(
            &argv(&["sh", "-c", "echo a=1 >> /dev/termination-log"]),
            &env
        ));
        assert!(spec.is_told(&argv(&["true"]), &[String::from(DEFAULT_PATH)]));
    }

    fn file_with(content: &[u8]) -> (tempfile::TempDir, MessageFile) {
        let dir = tempfile::tempdir().unwrap();
        let file = MessageFile::create_in(dir.path()).unwrap();
        std::fs::write(file.path(), content).unwrap();
        (dir, file)
    }

    #[test]
    fn the_file_is_read_from_its_end_and_empty_means_no_message() {
        let spec = Spec::of(&json!({}));
        let none = OutputTail::default();
        let (_dir, file) = file_with(b"a=1\nb=2\n");
        assert_eq!(
            message(&spec, None, 0, Some(&file), &none, 1).as_deref(),
            Some("a=1\nb=2\n")
        );
        let long: Vec<u8> = (0..5000).map(|i| b'a' + (i % 26) as u8).collect();
        let (_dir, file) = file_with(&long);
        let read = message(&spec, None, 0, Some(&file), &none, 1).unwrap();
        assert_eq!(read.as_bytes(), &long[5000 - MAX_CONTAINER_MESSAGE..]);
        let (_dir, empty) = file_with(b"");
        assert_eq!(message(&spec, None, 1, Some(&empty), &none, 1), None);
        assert_eq!(message(&spec, None, 0, None, &none, 1), None);
        // What the runtime said comes first.
        let (_dir, file) = file_with(b"mine");
        assert_eq!(
            message(&spec, Some("wait failed"), 1, Some(&file), &none, 1).as_deref(),
            Some("wait failed: mine")
        );
    }

    #[test]
    fn the_pods_share_keeps_the_first_bytes() {
        let spec = Spec::of(&json!({}));
        let (_dir, file) = file_with(&[b'x'; 4000]);
        let none = OutputTail::default();
        // Four containers: 3,072 bytes each.
        let read = message(&spec, None, 0, Some(&file), &none, 4).unwrap();
        assert_eq!(read.len(), MAX_POD_MESSAGES / 4);
    }

    #[test]
    fn bytes_that_are_not_utf8_become_replacement_characters_one_each() {
        // A euro sign cut after its first two bytes, then a lone continuation byte.
        assert_eq!(
            go_json_string(b"a\xe2\x82b\x80"),
            "a\u{fffd}\u{fffd}b\u{fffd}"
        );
        assert_eq!(go_json_string("é".as_bytes()), "é");
    }

    #[test]
    fn the_log_fallback_is_the_last_80_lines_within_2048_bytes() {
        let spec = Spec::of(&json!({"terminationMessagePolicy": "FallbackToLogsOnError"}));
        let (_dir, empty) = file_with(b"");
        let output = OutputTail::default();
        let lines: String = (0..100).map(|i| format!("{i}\n")).collect();
        output.push(lines.as_bytes());
        let want: String = (20..100).map(|i| format!("{i}\n")).collect();
        assert_eq!(
            message(&spec, None, 1, Some(&empty), &output, 1).as_deref(),
            Some(want.as_str())
        );
        // Success, or a file with something in it: no fallback.
        assert_eq!(message(&spec, None, 0, Some(&empty), &output, 1), None);
        let (_dir, file) = file_with(b"said");
        assert_eq!(
            message(&spec, None, 1, Some(&file), &output, 1).as_deref(),
            Some("said")
        );
        // Unsandboxed (no file at all), the log still speaks for a failed container.
        assert_eq!(
            message(&spec, None, 1, None, &output, 1).as_deref(),
            Some(want.as_str())
        );

        // Long lines: the last 2,048 bytes, pushed in pieces; an unfinished line counts.
        let output = OutputTail::default();
        let long = "y".repeat(1500);
        for _ in 0..3 {
            output.push(format!("{long}\n").as_bytes());
        }
        output.push(b"unfinished");
        let text = message(&spec, None, 1, None, &output, 1).unwrap();
        assert_eq!(text.len(), MAX_LOG_BYTES);
        assert!(text.ends_with("y\nunfinished"), "{text}");
        let output = OutputTail::default();
        let many: String = (0..90).map(|i| format!("{i}\n")).collect();
        output.push(format!("{many}last").as_bytes());
        let want: String = (11..90).map(|i| format!("{i}\n")).collect();
        assert_eq!(
            message(&spec, None, 1, None, &output, 1),
            Some(format!("{want}last"))
        );
    }
}
