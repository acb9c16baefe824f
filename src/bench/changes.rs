//! The control plane's change stream ([`kube_devcluster::store::Store::subscribe`]) read on a
//! thread of its own, with a runtime of its own, so that reading it is never queued behind the
//! API server's tasks: what every benchmark's observer is built on.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use kube_devcluster::store::WatchEvent;

/// A thread giving each change to `record` with its state, until stopped.
pub struct ChangeReader<S> {
    thread: std::thread::JoinHandle<(S, u64)>,
    stop: CancellationToken,
}

impl<S: Default + Send + 'static> ChangeReader<S> {
    /// Starts reading `changes` (a fresh subscription) on a thread named `name`, calling
    /// `record(&mut state, change)` for each.
    ///
    /// # Panics
    /// When the thread or its runtime cannot be started.
    pub fn start(
        name: &str,
        mut changes: broadcast::Receiver<Arc<WatchEvent>>,
        mut state: S,
        mut record: impl FnMut(&mut S, &WatchEvent) + Send + 'static,
    ) -> Self {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the change reader");
                runtime.block_on(async move {
                    let mut lost = 0;
                    loop {
                        let change = tokio::select! {
                            biased;
                            change = changes.recv() => change,
                            () = token.cancelled() => break,
                        };
                        match change {
                            Ok(change) => record(&mut state, &change),
                            Err(RecvError::Lagged(n)) => lost += n,
                            Err(RecvError::Closed) => break,
                        }
                    }
                    (state, lost)
                })
            })
            .expect("starting the change reader's thread");
        ChangeReader { thread, stop }
    }

    /// Stops reading; returns the state and how many changes were missed because the reader
    /// lagged behind the stream.
    pub fn finish(self) -> (S, u64) {
        self.stop.cancel();
        self.thread.join().unwrap_or_default()
    }
}
