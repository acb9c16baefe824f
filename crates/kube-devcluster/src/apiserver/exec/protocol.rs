//! The remote command channel protocols over WebSocket, as the kubelet's streaming server and
//! the API server speak them: which subprotocol a request gets, how a message names its
//! channel, and what the error channel says at the end. Pure: [`super::session`] does the I/O.
//!
//! - A message's first byte is its channel: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize
//!   (staging/src/k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go,
//!   `ChannelWebSocketProtocol`; the numbers in
//!   pkg/kubelet/cri/streaming/remotecommand/websocket.go, `createChannels`). The `base64.`
//!   variants send text messages: the channel as the digit `'0' + n`, then the data in base64
//!   (conn.go, `Base64ChannelWebSocketProtocol`).
//! - The server takes the first protocol the client asks for that it knows, the empty one when
//!   the client asks for none (conn.go, `handshake`).
//! - `v5.channel.k8s.io` adds the close signal: a message `[255, n]` says the peer is done
//!   writing channel `n`, e.g. stdin's end
//!   (staging/src/k8s.io/client-go/tools/remotecommand/websocket.go, `stream.Close` writing
//!   `remotecommand.StreamClose`).
//! - From `v4.` on, the error channel carries the final `metav1.Status` as JSON, `Success` too;
//!   before, only a failure's message as text (pkg/kubelet/cri/streaming/remotecommand/
//!   httpstream.go, `v4WriteStatusFunc` and `v1WriteStatusFunc`). A non-zero exit is a
//!   `Failure` with reason `NonZeroExitCode` and a cause `ExitCode` whose message is the code
//!   (pkg/kubelet/cri/streaming/remotecommand/exec.go, `ServeExec`).

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// The v5 close signal's channel byte.
const CLOSE: u8 = 255;

/// A negotiated subprotocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    /// What the response's `Sec-WebSocket-Protocol` says (empty: the client asked for none).
    pub name: &'static str,
    /// Text messages, the data in base64.
    pub base64: bool,
    /// The error channel carries a JSON Status (v4 and later), not a failure's bare message.
    pub json_status: bool,
    /// The v5 close signal.
    pub close_signal: bool,
}

/// What the server knows, newest first: the API server's v5 (staging/src/k8s.io/apiserver/
/// pkg/util/proxy/websocket.go) and the kubelet's v4 and earlier (websocket.go,
/// `createWebSocketStreams`).
const KNOWN: [Protocol; 6] = [
    protocol("v5.channel.k8s.io", false, true, true),
    protocol("v4.channel.k8s.io", false, true, false),
    protocol("v4.base64.channel.k8s.io", true, true, false),
    protocol("channel.k8s.io", false, false, false),
    protocol("base64.channel.k8s.io", true, false, false),
    protocol("", false, false, false),
];

const fn protocol(
    name: &'static str,
    base64: bool,
    json_status: bool,
    close_signal: bool,
) -> Protocol {
    Protocol {
        name,
        base64,
        json_status,
        close_signal,
    }
}

/// The protocol for a client that asks for `requested` (in its order of preference); `Err`
/// says what it asked for and what is served, as the handshake refuses it.
pub fn negotiate<'a>(requested: impl IntoIterator<Item = &'a str>) -> Result<Protocol, String> {
    let requested: Vec<&str> = requested
        .into_iter()
        .flat_map(|header| header.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if requested.is_empty() {
        return Ok(KNOWN[KNOWN.len() - 1]);
    }
    requested
        .iter()
        .find_map(|asked| KNOWN.iter().find(|p| p.name == *asked).copied())
        .ok_or_else(|| {
            let served: Vec<&str> = KNOWN.iter().map(|p| p.name).collect();
            format!(
                "requested protocol(s) are not supported: [{}]; supports [{}]",
                requested.join(" "),
                served.join(" ")
            )
        })
}

/// A message to send, as its payload: binary or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    Binary(Bytes),
    Text(String),
}

/// A message received, as the session acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// Data for a channel.
    Data(u8, Bytes),
    /// The client is done writing the channel (v5).
    Closed(u8),
    /// Nothing to act on (empty, malformed base64, an unknown channel).
    Ignored,
}

impl Protocol {
    /// `data` on `channel` as a message.
    pub fn encode(&self, channel: u8, data: &[u8]) -> Outgoing {
        if self.base64 {
            let mut text = String::from(char::from(b'0' + channel));
            text.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
            Outgoing::Text(text)
        } else {
            let mut frame = Vec::with_capacity(data.len() + 1);
            frame.push(channel);
            frame.extend_from_slice(data);
            Outgoing::Binary(frame.into())
        }
    }

    /// What a received message (its payload) says.
    pub fn decode(&self, payload: &[u8]) -> Incoming {
        let Some((&first, rest)) = payload.split_first() else {
            return Incoming::Ignored;
        };
        if self.close_signal && first == CLOSE {
            return rest
                .first()
                .map_or(Incoming::Ignored, |&n| Incoming::Closed(n));
        }
        if !self.base64 {
            return Incoming::Data(first, Bytes::copy_from_slice(rest));
        }
        match base64::engine::general_purpose::STANDARD.decode(rest) {
            Ok(data) if first >= b'0' => Incoming::Data(first - b'0', data.into()),
            _ => Incoming::Ignored,
        }
    }

    /// The error channel's last word, if it has one: the Status as JSON from v4 on; before,
    /// a failure's message alone and nothing on success.
    pub fn final_status(&self, status: &Value) -> Option<Vec<u8>> {
        if self.json_status {
            return Some(serde_json::to_vec(status).expect("a Status serialises"));
        }
        (status["status"] != "Success").then(|| {
            let message = status["message"].as_str().unwrap_or_default();
            message.as_bytes().to_vec()
        })
    }
}

/// How the command ended, as the error channel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with this code (a signal's death is 128 + its number, as runtimes report it).
    Exited { code: i32, command: Vec<String> },
    /// It could not be run: the runtime's words.
    NotRun(String),
}

/// The Status written on the error channel, in the field order Go writes `metav1.Status`.
/// A command that exits non-zero is described as containerd describes it
/// (internal/cri/server/container_execsync.go and streaming.go, `error executing command %v,
/// exit code %d`, Go's `%v` of the argv being `[a b c]`).
pub fn status(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Exited { code: 0, .. } => json!({"metadata": {}, "status": "Success"}),
        Outcome::Exited { code, command } => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: error executing command [{}], \
                 exit code {code}",
                command.join(" ")
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        // apierrors.NewInternalError, as exec.go (ServeExec) writes any other error.
        Outcome::NotRun(why) => {
            let message = format!("error executing command in container: {why}");
            json!({
                "metadata": {},
                "status": "Failure",
                "message": format!("Internal error occurred: {message}"),
                "reason": "InternalError",
                "details": {"causes": [{"message": message}]},
                "code": 500,
            })
        }
    }
}

/// A resize message's size: `{"Width": cols, "Height": rows}`
/// (staging/src/k8s.io/client-go/tools/remotecommand/resize.go, `TerminalSize`, decoded with
/// Go's case-insensitive field matching).
pub fn terminal_size(data: &[u8]) -> Option<(u16, u16)> {
    let value: Value = serde_json::from_slice(data).ok()?;
    let field = |name: &str| {
        value
            .as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_u64())
            .and_then(|n| u16::try_from(n).ok())
    };
    Some((field("width")?, field("height")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_known_protocol_the_client_asks_for_is_chosen() {
        let name = |asked: &[&str]| negotiate(asked.iter().copied()).map(|p| p.name);
        assert_eq!(
            name(&["v5.channel.k8s.io", "v4.channel.k8s.io"]),
            Ok("v5.channel.k8s.io")
        );
        assert_eq!(name(&["v4.channel.k8s.io"]), Ok("v4.channel.k8s.io"));
        assert_eq!(
            name(&["x.k8s.io, base64.channel.k8s.io"]),
            Ok("base64.channel.k8s.io")
        );
        assert_eq!(name(&[]), Ok(""));
        assert!(
            name(&["spdy"])
                .unwrap_err()
                .contains("not supported: [spdy]")
        );
    }

    #[test]
    fn messages_name_their_channel_in_binary_or_base64() {
        let v5 = negotiate(["v5.channel.k8s.io"]).unwrap();
        assert_eq!(
            v5.encode(STDOUT, b"hi"),
            Outgoing::Binary(vec![1, b'h', b'i'].into())
        );
        assert_eq!(v5.decode(&[0, b'x']), Incoming::Data(STDIN, "x".into()));
        assert_eq!(v5.decode(&[255, 0]), Incoming::Closed(STDIN));
        assert_eq!(v5.decode(&[]), Incoming::Ignored);
        let b64 = negotiate(["base64.channel.k8s.io"]).unwrap();
        assert_eq!(b64.encode(STDOUT, b"\n"), Outgoing::Text("1Cg==".into()));
        assert_eq!(
            b64.decode(b"0Zm9vCg=="),
            Incoming::Data(STDIN, "foo\n".into())
        );
        assert_eq!(b64.decode(b"0!!"), Incoming::Ignored);
        // Before v5, 255 is a channel like any other.
        let v4 = negotiate(["v4.channel.k8s.io"]).unwrap();
        assert_eq!(v4.decode(&[255, 0]), Incoming::Data(255, vec![0].into()));
    }

    #[test]
    fn the_error_channel_reports_the_exit_code_as_kubectl_reads_it() {
        let exit = |code| Outcome::Exited {
            code,
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
        };
        assert_eq!(
            serde_json::to_string(&status(&exit(0))).unwrap(),
            r#"{"metadata":{},"status":"Success"}"#
        );
        let failed = status(&exit(3));
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(
            failed["details"]["causes"],
            json!([{"reason": "ExitCode", "message": "3"}])
        );
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        let v1 = negotiate(["channel.k8s.io"]).unwrap();
        assert_eq!(v1.final_status(&status(&exit(0))), None);
        assert!(v1.final_status(&failed).is_some());
    }

    #[test]
    fn resize_messages_are_read_as_go_decodes_them() {
        assert_eq!(
            terminal_size(br#"{"Width":101,"Height":33}"#),
            Some((101, 33))
        );
        assert_eq!(
            terminal_size(br#"{"width":80,"height":24}"#),
            Some((80, 24))
        );
        assert_eq!(terminal_size(b"nope"), None);
    }
}
