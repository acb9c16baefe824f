//! The kinds the framework watches: the bounds a watched kind meets ([`Watched`], [`Scope`]),
//! and its children: which child objects a child handler sees ([`Children`]), how a child finds
//! its parent ([`Parent`], [`owner_of`]), and how a child watch hands its events on. The
//! registry, the reactor and the mirrors build on it; it imports none of them.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Builds an `Api` for either scope of resource, so the framework serves namespaced and
/// cluster-scoped kinds alike.
pub trait Scope {
    /// Whether objects of this scope live in namespaces.
    fn namespaced() -> bool;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    fn namespaced() -> bool {
        true
    }

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }
}

impl Scope for k8s_openapi::ClusterResourceScope {
    fn namespaced() -> bool {
        false
    }

    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::all(client)
    }
}

/// The bounds every watched kind meets: kube-derive custom resources and k8s-openapi types do.
pub trait Watched:
    Resource<DynamicType = (), Scope: Scope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<T> Watched for T where
    T: Resource<DynamicType = (), Scope: Scope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

pub(crate) type ParentOf<C> = Arc<dyn Fn(&C) -> Option<Parent> + Send + Sync>;

/// Which child objects a child handler sees and how each finds its parent. A child kind is
/// mirrored in memory whole (less its `managedFields`): to save memory, register a type that
/// deserialises only the fields the handlers read.
pub struct Children<C> {
    pub(crate) labels: Option<String>,
    pub(crate) parent: Option<ParentOf<C>>,
}

/// The parent of a child object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Parent {
    pub namespace: Option<String>,
    pub name: String,
}

impl<C: Resource> Children<C> {
    /// Children whose owner references name a parent of the registering kind.
    pub fn owned() -> Self {
        Self {
            labels: None,
            parent: None,
        }
    }

    /// Only children matching this label selector are watched (and mirrored in memory).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.labels = Some(selector.to_string());
        self
    }

    /// Finds the parent with `parent_of` (e.g. from a label) instead of owner references.
    #[must_use]
    pub fn parent_by(
        mut self,
        parent_of: impl Fn(&C) -> Option<Parent> + Send + Sync + 'static,
    ) -> Self {
        self.parent = Some(Arc::new(parent_of));
        self
    }
}

/// The parent named by `child`'s owner references, if one is of kind `K`.
pub fn owner_of<K: Resource<DynamicType = ()>, C: Resource>(child: &C) -> Option<Parent> {
    let (kind, api_version) = (K::kind(&()), K::api_version(&()));
    child
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.kind == kind && owner.api_version == api_version)
        .map(|owner| Parent {
            namespace: child.meta().namespace.clone(),
            name: owner.name.clone(),
        })
}

/// A child event on its way to the parent's queue.
pub(crate) struct ChildEvent {
    /// Which child registration it came from.
    pub index: usize,
    /// The child's namespace/name: later events of the same child replace queued ones.
    pub key: String,
    pub object: Arc<dyn Any + Send + Sync>,
}

/// Starts the watch of one child kind: given the client and namespace, it sends
/// `(parent, event)` pairs until dropped.
/// The last argument is told when the first full listing is mirrored.
pub(crate) type ChildWatch = Arc<
    dyn Fn(
            Client,
            Option<String>,
            ChildSink,
            tokio::sync::oneshot::Sender<()>,
        ) -> BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// Where a child watch sends events.
pub(crate) type ChildSink = tokio::sync::mpsc::UnboundedSender<(Parent, ChildEvent)>;
