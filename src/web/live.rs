//! Live updates: a server-sent events stream per page, fed by the operator's own mirror of the
//! workflows ([`kube_kopf::Mirror`]): every change the operator's watch applies is told to the
//! pages it concerns as an event `changed` (its data the workflow's name), and the page's
//! script re-reads the page. No browser causes a watch of its own on the API server.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use kube_kopf::Mirror;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;

use workflow_operator_core::WorkFlow;

/// Which workflows a page shows: all, a namespace's, or one.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// The stream of `changed` events for `scope`, until `shutdown`. A subscriber that fell
/// behind the mirror's buffer is told something changed (it re-reads everything anyway).
pub fn changes(
    mirror: &Mirror<WorkFlow>,
    scope: Scope,
    shutdown: CancellationToken,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
    let stream = BroadcastStream::new(mirror.subscribe())
        .filter_map(move |change| {
            let event = match change {
                Ok(key) => {
                    let wanted = scope
                        .namespace
                        .as_ref()
                        .is_none_or(|ns| key.namespace.as_ref() == Some(ns))
                        && scope.name.as_ref().is_none_or(|name| &key.name == name);
                    wanted.then(|| Event::default().event("changed").data(key.name))
                }
                Err(_lagged) => Some(Event::default().event("changed").data("")),
            };
            std::future::ready(event.map(Ok))
        })
        // An open stream would otherwise hold the server's graceful shutdown forever.
        .take_until(shutdown.cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::default())
}
