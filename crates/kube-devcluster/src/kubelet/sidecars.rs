//! The sidecars of one pod while it runs: each sidecar's task (which runs and restarts it) is
//! started here, the pod's next container waits until the sidecar runs, and once the main
//! container is done they are stopped in the kubelet's order. Used by the runner in
//! [`crate::kubelet`], which owns what a sidecar's task does.
//!
//! Termination order (k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_termination_order.go):
//! sidecars stop after the main container, the last one first, each once the ones after it
//! have stopped, all within the pod's grace period: SIGTERM when its turn comes, SIGKILL of its
//! process group when the grace period is over.

use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::KillAt;

/// What a sidecar's task is given.
pub(super) struct Handle {
    /// When to stop: SIGTERM now, SIGKILL at that time (an earlier time given later wins).
    pub stop: watch::Receiver<KillAt>,
    /// Set once its process runs.
    pub started: watch::Sender<bool>,
}

/// A sidecar whose task runs.
struct Sidecar {
    stop: watch::Sender<KillAt>,
    task: JoinHandle<()>,
}

/// How waiting for a sidecar to start ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// Its process runs: the next container may start.
    Started,
    /// Its task ended before it ever ran (it cannot start).
    Ended,
    /// The wait was interrupted (the pod is deleted or the kubelet stops).
    Interrupted,
}

/// The sidecars started for a pod, in the pod's order.
#[derive(Default)]
pub(super) struct Sidecars {
    running: Vec<Sidecar>,
}

impl Sidecars {
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Spawns a sidecar's task (`task` with its [`Handle`]) and waits until its process runs,
    /// its task ends, or `interrupted` completes.
    pub async fn start<Fut>(
        &mut self,
        task: impl FnOnce(Handle) -> Fut,
        interrupted: impl Future<Output = ()>,
    ) -> Start
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stop_rx) = watch::channel(None);
        let (started_tx, mut started) = watch::channel(false);
        let task = tokio::spawn(task(Handle {
            stop: stop_rx,
            started: started_tx,
        }));
        let mut sidecar = Sidecar { stop, task };
        let start = tokio::select! {
            // The sender is dropped when the task ends: it ended without ever running.
            ran = started.wait_for(|ran| *ran) => {
                if ran.is_ok() { Start::Started } else { Start::Ended }
            }
            _ = &mut sidecar.task => return Start::Ended,
            () = interrupted => Start::Interrupted,
        };
        // Kept until stopped (a task that has ended is awaited no more).
        self.running.push(sidecar);
        start
    }

    /// Stops every sidecar, the last one first, each once the ones after it have stopped;
    /// SIGKILL at `deadline`, or at an earlier time sent on `terminating` meanwhile (the pod
    /// deleted with a shorter grace period). Returns once all their tasks have ended.
    pub async fn stop(&mut self, mut deadline: Instant, mut terminating: watch::Receiver<KillAt>) {
        while let Some(mut sidecar) = self.running.pop() {
            kill_at(&sidecar.stop, deadline);
            loop {
                tokio::select! {
                    _ = &mut sidecar.task => break,
                    changed = terminating.changed() => {
                        if changed.is_err() {
                            // Nobody can shorten the grace period any more.
                            let _ = (&mut sidecar.task).await;
                            break;
                        }
                        if let Some(at) = *terminating.borrow_and_update() {
                            deadline = deadline.min(at);
                            kill_at(&sidecar.stop, deadline);
                        }
                    }
                }
            }
        }
    }
}

/// Tells a sidecar to stop, to be killed at `at` unless it was told an earlier time.
fn kill_at(stop: &watch::Sender<KillAt>, at: Instant) {
    stop.send_if_modified(|current| match current {
        Some(earlier) if *earlier <= at => false,
        _ => {
            *current = Some(at);
            true
        }
    });
}
