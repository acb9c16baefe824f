//! One exec session over an upgraded WebSocket: the command's output sent on its channels, the
//! client's stdin and terminal sizes passed to it, and its end reported on the error channel.
//! Started by [`super::serve`] once the upgrade is done.
//!
//! The order is the servers': an empty message on the lowest channel the client reads first,
//! the sign that the streams are open (pkg/kubelet/cri/streaming/remotecommand/websocket.go,
//! `createWebSocketStreams`); the command started, so that a failure to start is reported on
//! the error channel as the kubelet reports it (exec.go, `ServeExec`); the output to its end;
//! then the status, a normal close, and a wait for the client to close its side, so that the
//! output still on its way is not cut off (staging/src/k8s.io/apiserver/pkg/util/proxy/
//! websocket.go, `conns.finish`). A client that goes away first takes the command with it.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::protocol::{
    self, ERROR, Incoming, Outcome, Outgoing, Protocol, RESIZE, STDERR, STDIN, STDOUT,
};
use crate::kubelet::exec::ExecProcess;
use crate::kubelet::pty::Pty;

/// How long the client has to close its side once the status is sent.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// A message for the client: a channel and its data.
type Frame = (u8, Bytes);

/// What the session was asked for.
pub(super) struct Session {
    pub protocol: Protocol,
    pub command: Vec<String>,
    pub stdout: bool,
    pub stderr: bool,
}

impl Session {
    /// Runs the session on `socket`: `start` starts the command.
    pub async fn run(
        self,
        socket: WebSocket,
        start: BoxFuture<'static, Result<ExecProcess, String>>,
    ) {
        let (sink, mut incoming) = socket.split();
        let (out, writer) = spawn_writer(sink, self.protocol);
        let first = match (self.stdout, self.stderr) {
            (true, _) => STDOUT,
            (false, true) => STDERR,
            (false, false) => ERROR,
        };
        let _ = out.send((first, Bytes::new())).await;
        let outcome = match start.await {
            Ok(process) => self.drive(process, &out, &mut incoming).await,
            Err(why) => Some(Outcome::NotRun(why)),
        };
        let Some(outcome) = outcome else {
            // The client is gone: nobody to tell.
            return;
        };
        if let Some(status) = self.protocol.final_status(&protocol::status(&outcome)) {
            let _ = out.send((ERROR, status.into())).await;
        }
        drop(out);
        let _ = writer.await;
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            while let Some(Ok(_)) = incoming.next().await {}
        })
        .await;
    }

    /// Passes the command's output and input until it exits and its output is sent; `None`
    /// when the client left first (the command is killed).
    async fn drive(
        &self,
        mut process: ExecProcess,
        out: &mpsc::Sender<Frame>,
        incoming: &mut SplitStream<WebSocket>,
    ) -> Option<Outcome> {
        let pumps: Vec<_> = [
            (process.stdout.take(), STDOUT),
            (process.stderr.take(), STDERR),
        ]
        .into_iter()
        .filter_map(|(stream, channel)| Some(pump(stream?, channel, out.clone())))
        .collect();
        let stdin = process.stdin.take().map(spawn_stdin);
        let terminal = process.terminal.take();
        let input = read_input(incoming, self.protocol, stdin, terminal.as_ref());
        let exit = tokio::select! {
            exit = process.wait() => exit,
            () = input => return None,
        };
        // All of its output, which ends once what it started is gone too.
        futures::future::join_all(pumps).await;
        Some(match exit {
            Ok(code) => Outcome::Exited {
                code,
                command: self.command.clone(),
            },
            Err(error) => Outcome::NotRun(error.to_string()),
        })
    }
}

/// The task that sends frames to the client in order, then a normal close once every sender
/// is gone.
fn spawn_writer(
    mut sink: SplitSink<WebSocket, Message>,
    protocol: Protocol,
) -> (mpsc::Sender<Frame>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Frame>(16);
    let task = tokio::spawn(async move {
        while let Some((channel, data)) = rx.recv().await {
            let message = match protocol.encode(channel, &data) {
                Outgoing::Binary(bytes) => Message::Binary(bytes),
                Outgoing::Text(text) => Message::Text(text.into()),
            };
            if sink.send(message).await.is_err() {
                return;
            }
        }
        let close = CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(close))).await;
    });
    (tx, task)
}

/// Copies one of the command's outputs to its channel.
fn pump(
    mut stream: Box<dyn AsyncRead + Send + Unpin>,
    channel: u8,
    out: mpsc::Sender<Frame>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        // A terminal whose command side is closed fails to read (EIO): its end too.
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            if out
                .send((channel, Bytes::copy_from_slice(&buf[..n])))
                .await
                .is_err()
            {
                break;
            }
        }
    })
}

/// The task that writes the client's stdin to the command; its end (the sender dropped) is
/// the command's stdin's end.
fn spawn_stdin(mut stdin: Box<dyn AsyncWrite + Send + Unpin>) -> mpsc::Sender<Bytes> {
    let (tx, mut rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        while let Some(data) = rx.recv().await {
            if stdin.write_all(&data).await.is_err() || stdin.flush().await.is_err() {
                return;
            }
        }
        let _ = stdin.shutdown().await;
    });
    tx
}

/// Acts on the client's messages until it closes: stdin to the command, its end (v5's close
/// signal), terminal sizes.
async fn read_input(
    incoming: &mut SplitStream<WebSocket>,
    protocol: Protocol,
    mut stdin: Option<mpsc::Sender<Bytes>>,
    terminal: Option<&Pty>,
) {
    while let Some(Ok(message)) = incoming.next().await {
        let payload = match message {
            Message::Binary(bytes) => bytes,
            Message::Text(text) => Bytes::copy_from_slice(text.as_bytes()),
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        match protocol.decode(&payload) {
            Incoming::Data(STDIN, data) => {
                if let Some(tx) = &stdin
                    && tx.send(data).await.is_err()
                {
                    stdin = None;
                }
            }
            Incoming::Data(RESIZE, data) => {
                if let (Some(pty), Some((cols, rows))) = (terminal, protocol::terminal_size(&data))
                    && let Err(error) = pty.resize(cols, rows)
                {
                    tracing::debug!(%error, "cannot resize the exec's terminal");
                }
            }
            Incoming::Closed(STDIN) => stdin = None,
            _ => {}
        }
    }
}
