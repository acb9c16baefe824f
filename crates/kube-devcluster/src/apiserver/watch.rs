//! Watch streams as the real API server sends them: from a resourceVersion (or the current state
//! as `ADDED` events, or `sendInitialEvents` ending in a bookmark), filtered by label and field
//! selectors (an object that stops matching is `DELETED`, one that starts matching `ADDED`),
//! with bookmarks, `timeoutSeconds`, and 410 Gone for a resourceVersion older than history.
//!
//! The [`WatchHub`] fans the store's single change stream out to one channel per resource and
//! namespace, so a change wakes only the watches that can care about it: a thousand idle watches
//! on other resources cost nothing per write. The server calls [`serve`] for `?watch=true`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::api::error::{ApiError, Result};
use crate::api::resources::{GroupResource, ResourceInfo};
use crate::apiserver::representation::{self, Representation};
use crate::storage::selector::{FieldSelector, LabelSelector};
use crate::storage::store::{EventType, Store, StoredObject, WatchEvent};

/// How many events a watch may fall behind before it is closed (the client then resumes).
const WATCH_BUFFER: usize = 4096;

/// Channels of one resource: one for watches of all namespaces, one per watched namespace.
#[derive(Default)]
struct Channels {
    all: Option<broadcast::Sender<Arc<WatchEvent>>>,
    by_namespace: HashMap<String, broadcast::Sender<Arc<WatchEvent>>>,
}

/// Fans the store's change stream out per resource and namespace.
#[derive(Default)]
pub struct WatchHub {
    channels: Mutex<HashMap<GroupResource, Channels>>,
    /// The resourceVersion of the last change sent to the channels: every change up to it is
    /// in the channel of every watch it concerns.
    dispatched: Arc<AtomicU64>,
}

impl WatchHub {
    /// Starts forwarding the store's changes until `shutdown`.
    pub fn start(store: &Store, shutdown: CancellationToken) -> Arc<Self> {
        let hub = Arc::new(Self::default());
        let mut changes = store.subscribe();
        let forward = hub.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(event) => forward.dispatch(&event),
                        // The hub fell behind the store: every watch may have missed an event, so
                        // all are closed and clients resume from their last resourceVersion.
                        Err(RecvError::Lagged(_)) => forward.close_all(),
                        Err(RecvError::Closed) => return,
                    },
                    _ = shutdown.cancelled() => {
                        forward.close_all();
                        return;
                    }
                }
            }
        });
        hub
    }

    fn dispatch(&self, event: &Arc<WatchEvent>) {
        let mut channels = self.channels.lock().expect("hub lock");
        let Some(resource) = channels.get_mut(&event.gr) else {
            drop(channels);
            self.dispatched.store(event.rv, Ordering::Release);
            return;
        };
        if let Some(all) = &resource.all
            && all.send(event.clone()).is_err()
        {
            resource.all = None;
        }
        let namespace = event.object.namespace();
        if let Some(sender) = resource.by_namespace.get(namespace)
            && sender.send(event.clone()).is_err()
        {
            resource.by_namespace.remove(namespace);
        }
        drop(channels);
        self.dispatched.store(event.rv, Ordering::Release);
    }

    /// A receiver of every later change of `gr` (in `namespace`, or in all namespaces).
    pub fn subscribe(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
    ) -> broadcast::Receiver<Arc<WatchEvent>> {
        let mut channels = self.channels.lock().expect("hub lock");
        let resource = channels.entry(gr.clone()).or_default();
        let slot = match namespace {
            None => &mut resource.all,
            Some(ns) => {
                let sender = resource
                    .by_namespace
                    .entry(ns.to_string())
                    .or_insert_with(|| broadcast::channel(WATCH_BUFFER).0);
                return sender.subscribe();
            }
        };
        slot.get_or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
            .subscribe()
    }

    /// Closes every open watch (their streams end; clients resume or re-list).
    pub fn close_all(&self) {
        self.channels.lock().expect("hub lock").clear();
    }

    /// Number of open watches.
    pub fn watch_count(&self) -> usize {
        let channels = self.channels.lock().expect("hub lock");
        channels
            .values()
            .map(|c| {
                c.all.as_ref().map_or(0, |s| s.receiver_count())
                    + c.by_namespace
                        .values()
                        .map(|s| s.receiver_count())
                        .sum::<usize>()
            })
            .sum()
    }
}

/// What a watch request asked for.
pub struct WatchRequest {
    pub info: Arc<ResourceInfo>,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// `resourceVersion`: `None` (or 0) starts from the current state.
    pub since: Option<u64>,
    /// `sendInitialEvents=true`: the current state as `ADDED`, then a bookmark marking its end.
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub bookmark_interval: Duration,
    /// How objects are sent: as stored, their metadata, or one-row Tables (`kubectl get --watch`).
    pub representation: Representation,
}

pub type WatchBody = tokio::sync::mpsc::Receiver<std::result::Result<Bytes, Infallible>>;

/// Starts a watch: the receiver yields the stream's lines. A too-old resourceVersion gives one
/// `ERROR` event carrying the 410 Status, as the real server answers it.
pub fn serve(store: &Store, hub: &WatchHub, request: WatchRequest) -> Result<WatchBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let gr = request.info.group_resource();
    // Subscribe before reading the backlog, so nothing falls between the two; what both deliver
    // is skipped by resourceVersion.
    let live = hub.subscribe(&gr, request.namespace.as_deref());
    let (backlog, start_rv, initial_end) = match request.since.filter(|&rv| rv > 0) {
        Some(rv) if !request.send_initial_events => {
            match store.watch(&gr, request.namespace.as_deref(), Some(rv)) {
                Ok((events, _)) => (events, rv, false),
                Err(gone) => {
                    let line = line("ERROR", &Bytes::from(gone.status_body().to_string()));
                    tx.try_send(Ok(line)).expect("a fresh channel has room");
                    return Ok(rx);
                }
            }
        }
        _ => {
            let (items, rv) = store.list(&gr, request.namespace.as_deref());
            let events = items
                .into_iter()
                .map(|object| {
                    Arc::new(WatchEvent {
                        rv: object.resource_version(),
                        gr: gr.clone(),
                        event_type: EventType::Added,
                        object,
                        prev: None,
                        committed_at: std::time::Instant::now(),
                    })
                })
                .collect();
            (events, rv, request.send_initial_events)
        }
    };
    let dispatched = hub.dispatched.clone();
    tokio::spawn(async move {
        let mut stream = Stream {
            tx,
            request,
            columns_sent: false,
        };
        stream
            .run(dispatched, backlog, start_rv, initial_end, live)
            .await;
    });
    Ok(rx)
}

struct Stream {
    tx: tokio::sync::mpsc::Sender<std::result::Result<Bytes, Infallible>>,
    request: WatchRequest,
    columns_sent: bool,
}

impl Stream {
    fn matches(&self, object: &StoredObject) -> bool {
        self.request.labels.matches(object.labels()) && self.request.fields.matches(&object.value)
    }

    /// The event a selective watch sends for a change: selectors apply to the object before and
    /// after, so leaving the selection is `DELETED` and entering it `ADDED`.
    fn translate(&self, event: &WatchEvent) -> Option<&'static str> {
        let now = self.matches(&event.object);
        match event.event_type {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => now.then_some("DELETED"),
            EventType::Modified => {
                let before = event.prev.as_deref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }
    }

    async fn send(&mut self, event_type: &str, object: &Arc<StoredObject>) -> bool {
        let rendered = representation::render_one(
            self.request.representation,
            &self.request.info,
            object,
            !self.columns_sent,
        );
        let bytes = match rendered {
            None => line(event_type, &object.json),
            Some(rendered) => {
                self.columns_sent = true;
                line(event_type, &Bytes::from(rendered.to_string()))
            }
        };
        self.tx.send(Ok(bytes)).await.is_ok()
    }

    async fn bookmark(&mut self, rv: u64, initial_events_end: bool) -> bool {
        let mut object = json!({
            "kind": self.request.info.kind,
            "apiVersion": self.request.info.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
        });
        if initial_events_end {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let bytes = line("BOOKMARK", &Bytes::from(object.to_string()));
        self.tx.send(Ok(bytes)).await.is_ok()
    }

    async fn run(
        &mut self,
        dispatched: Arc<AtomicU64>,
        backlog: Vec<Arc<WatchEvent>>,
        start_rv: u64,
        initial_end: bool,
        mut live: broadcast::Receiver<Arc<WatchEvent>>,
    ) {
        let mut last_rv = start_rv;
        for event in backlog {
            last_rv = last_rv.max(event.rv);
            if let Some(event_type) = self.translate(&event)
                && !self.send(event_type, &event.object).await
            {
                return;
            }
        }
        if initial_end && !self.bookmark(last_rv, true).await {
            return;
        }
        let deadline = self
            .request
            .timeout
            .map(|t| tokio::time::Instant::now() + t);
        let mut bookmark_timer = tokio::time::interval(self.request.bookmark_interval);
        bookmark_timer.tick().await;
        loop {
            let until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                received = live.recv() => match received {
                    Ok(event) => {
                        if event.rv <= last_rv {
                            continue;
                        }
                        last_rv = event.rv;
                        if let Some(event_type) = self.translate(&event)
                            && !self.send(event_type, &event.object).await
                        {
                            return;
                        }
                    }
                    // A watcher that falls behind is closed, as the real server closes slow
                    // watchers; the client resumes from its last resourceVersion.
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return,
                },
                _ = bookmark_timer.tick(), if self.request.bookmarks => {
                    // A bookmark promises the client every event up to its resourceVersion: a
                    // client that resumes from it never sees the ones before. So it names what
                    // this watch has received, or (with nothing waiting in its channel) what the
                    // hub has sent out, never the store's newest version, whose changes may
                    // still be on their way here (a lost Job event left the operator's mirror
                    // stale for good under load).
                    let hub_rv = dispatched.load(Ordering::Acquire);
                    let rv = if live.is_empty() { last_rv.max(hub_rv) } else { last_rv };
                    if !self.bookmark(rv, false).await {
                        return;
                    }
                }
                _ = until_deadline => return,
                _ = self.tx.closed() => return,
            }
        }
    }
}

/// One line of a watch stream: `{"type":"ADDED","object":{...}}`.
pub fn line(event_type: &str, object: &Bytes) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(event_type.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// The value of the `?resourceVersion=` of a watch.
pub fn parse_resource_version(rv: Option<&str>) -> Result<Option<u64>> {
    match rv {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::Registry;
    use crate::storage::store::HistoryLimits;

    fn config_map(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})
    }

    /// The next bookmark's resourceVersion, and the names of the objects sent before it.
    async fn until_bookmark(body: &mut WatchBody) -> (u64, Vec<String>) {
        let mut names = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), body.recv())
                .await
                .expect("a line within 5 s")
                .expect("the stream is open")
                .expect("infallible");
            let event: serde_json::Value = serde_json::from_slice(&line).expect("a JSON line");
            let rv = event["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0");
            match event["type"].as_str() {
                Some("BOOKMARK") => return (rv.parse().expect("a number"), names),
                _ => names.push(event["object"]["metadata"]["name"].as_str().unwrap().into()),
            }
        }
    }

    #[tokio::test]
    async fn a_bookmark_never_names_a_version_whose_changes_the_watch_has_not_received() {
        let store = Store::new(HistoryLimits::default());
        let info = Registry::with_builtins()
            .lookup("", "v1", "configmaps")
            .expect("configmaps are built in");
        let first = store.create(&info, "default", config_map("a")).expect("a");
        // A hub that is not started forwards nothing by itself: the test dispatches.
        let hub = WatchHub::default();
        let mut body = serve(
            &store,
            &hub,
            WatchRequest {
                info: info.clone(),
                namespace: None,
                labels: LabelSelector::parse("").unwrap(),
                fields: FieldSelector::parse("").unwrap(),
                since: Some(first.resource_version()),
                send_initial_events: false,
                timeout: None,
                bookmarks: true,
                bookmark_interval: Duration::from_millis(10),
                representation: Representation::Object,
            },
        )
        .expect("the watch starts");

        // Stored, but still on its way to the watch (as under load, when the hub lags).
        let second = store.create(&info, "default", config_map("b")).expect("b");
        assert!(second.resource_version() > first.resource_version());
        let (rv, sent) = until_bookmark(&mut body).await;
        assert_eq!(sent, Vec::<String>::new());
        assert_eq!(
            rv,
            first.resource_version(),
            "a client resuming from a later version would never see b"
        );

        // Once the change reaches the watch, it is sent, and bookmarks move up to it.
        hub.dispatch(&Arc::new(WatchEvent {
            rv: second.resource_version(),
            gr: info.group_resource(),
            event_type: EventType::Added,
            object: second.clone(),
            prev: None,
            committed_at: std::time::Instant::now(),
        }));
        // Bookmarks made before the dispatch may still be queued (every 10 ms): they name the
        // first version; the first bookmark after b names b's.
        loop {
            let (rv, sent) = until_bookmark(&mut body).await;
            if sent.is_empty() {
                assert_eq!(rv, first.resource_version(), "a bookmark ahead of b");
                continue;
            }
            assert_eq!(sent, ["b"]);
            assert_eq!(rv, second.resource_version());
            break;
        }
    }
}
