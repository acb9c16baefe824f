//! The table of handlers: what runs on which cause, with which options.
//!
//! Operators describe themselves here, in one place per resource type, through [`Registry`]'s
//! builder (see the example in [`super`]). The reactor ([`super::reactor`]) reads the finished
//! table; nothing in this module talks to the API.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt::{self, Debug};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::causes::Change;
use super::kinds::{ChildWatch, Children, Parent, Scope, Watched};
use super::mirror::Mirror;

/// What a handler returns.
pub type HandlerResult = Result<(), HandlerError>;

/// How a handler failed, which decides what happens next.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandlerError {
    /// Try again: after `delay` if given, else after the handler's backoff. Counts against the
    /// handler's retry limit; when that is exhausted it becomes permanent.
    #[error("temporary error: {message}")]
    Temporary {
        delay: Option<Duration>,
        message: String,
    },
    /// Do not try again for this cause: a Warning Event is posted on the object and the error
    /// is logged. The cause still completes, so the object is not handled again until it
    /// changes.
    #[error("permanent error: {0}")]
    Permanent(String),
}

impl HandlerError {
    /// A temporary error retried after the handler's backoff.
    pub fn temporary(message: impl Into<String>) -> Self {
        Self::Temporary {
            delay: None,
            message: message.into(),
        }
    }

    /// A temporary error retried after `delay`.
    pub fn retry_after(delay: Duration, message: impl Into<String>) -> Self {
        Self::Temporary {
            delay: Some(delay),
            message: message.into(),
        }
    }

    /// A permanent error.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent(message.into())
    }
}

/// API errors are taken as temporary, except the ones a retry cannot fix (the request was
/// invalid or forbidden).
impl From<kube::Error> for HandlerError {
    fn from(error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if matches!(status.code, 400 | 403 | 422) => {
                Self::Permanent(error.to_string())
            }
            _ => Self::temporary(error.to_string()),
        }
    }
}

/// Exponential backoff between attempts of a failing handler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub initial: Duration,
    /// Each further failure multiplies the delay by this.
    pub factor: f64,
    /// The delay never exceeds this.
    pub max: Duration,
}

impl Backoff {
    /// The delay after `retries` earlier failures (0 for the first failure).
    pub fn delay(&self, retries: u32) -> Duration {
        let exponent = i32::try_from(retries).unwrap_or(i32::MAX);
        let secs = self.initial.as_secs_f64() * self.factor.powi(exponent);
        if secs.is_finite() && secs < self.max.as_secs_f64() {
            Duration::from_secs_f64(secs)
        } else {
            self.max
        }
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(300),
        }
    }
}

/// Per-handler options; [`OperatorConfig::defaults`](super::OperatorConfig::defaults) applies
/// unless a handler sets its own with [`Registry::retries`] and friends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HandlerOptions {
    /// Temporary errors allowed before the handler fails for good; `None` retries forever.
    pub retries: Option<u32>,
    /// Delay between attempts when the error names none.
    pub backoff: Backoff,
    /// Longest one attempt may run; a timed-out attempt counts as a temporary error.
    pub timeout: Option<Duration>,
}

/// Why a handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Create,
    Update,
    Delete,
    Resume,
    Timer,
    Child,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What a handler gets.
#[derive(Clone)]
pub struct Context<K> {
    /// A client to act with.
    pub client: Client,
    /// The object, as the in-memory mirror has it when the handler starts.
    pub object: Arc<K>,
    /// Why the handler runs.
    pub reason: Reason,
    /// For update handlers: the changes inside the handler's field (`old: None` where the old
    /// value is no longer known). Empty otherwise.
    pub diff: Arc<[Change]>,
    /// The handler's registered name.
    pub handler: Arc<str>,
    /// Failed attempts before this one.
    pub retry: u32,
    /// Publishes Events (events.k8s.io/v1) as this operator.
    pub recorder: crate::events::Publisher,
    pub(crate) child: Option<Arc<dyn Any + Send + Sync>>,
    pub(crate) mirrors: Arc<[Arc<dyn Any + Send + Sync>]>,
}

impl<K: Resource<DynamicType = ()>> Context<K> {
    /// A reference to the object, for Events and owner references.
    pub fn object_ref(&self) -> ObjectReference {
        self.object.object_ref(&())
    }

    /// Publishes an Event about the object.
    ///
    /// # Errors
    /// The API's refusal to store the Event.
    pub async fn publish(
        &self,
        type_: EventType,
        reason: &str,
        note: impl Into<String>,
    ) -> Result<(), kube::Error> {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note.into()),
            action: self.reason.to_string(),
            secondary: None,
        };
        self.recorder.publish(&event, &self.object_ref()).await
    }
}

impl<K> Context<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    K::Scope: Scope,
{
    /// The object's children of kind `C`, from the in-memory mirror of a child kind registered
    /// with [`Registry::on_child`], [`Registry::on_children`] or [`Registry::keep_children`]
    /// (empty if `C` is not registered). No API call.
    pub fn children<C: Send + Sync + 'static>(&self) -> Vec<Arc<C>> {
        let parent = Parent {
            namespace: if K::Scope::namespaced() {
                self.object.namespace()
            } else {
                None
            },
            name: self.object.name_any(),
        };
        self.mirrors
            .iter()
            .filter_map(|index| index.downcast_ref::<super::child_index::ChildIndex<C>>())
            .flat_map(|index| index.of(&parent))
            .collect()
    }

    /// An `Api` for the object's kind in the object's namespace.
    pub fn api(&self) -> Api<K> {
        K::Scope::api(self.client.clone(), self.object.namespace().as_deref())
    }
}

impl<K> Debug for Context<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("handler", &self.handler)
            .field("reason", &self.reason)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

pub(crate) type HandlerFn<K> =
    Arc<dyn Fn(Context<K>) -> BoxFuture<'static, HandlerResult> + Send + Sync>;
pub(crate) type Predicate<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;
pub(crate) type TickGate = Arc<dyn Fn() -> bool + Send + Sync>;
pub(crate) type BesideFn<K> =
    Arc<dyn Fn(Client, Arc<K>) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// When a handler runs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Trigger {
    Create,
    Update {
        field: String,
    },
    Delete,
    Resume,
    Timer {
        every: Duration,
        /// Ticks fall on wall-clock multiples of `every` ([`Registry::aligned`]).
        aligned: bool,
    },
    /// One call per changed child of child kind `index`.
    Child {
        index: usize,
    },
    /// One call per pass with every changed child of child kind `index`.
    Children {
        index: usize,
    },
}

/// One registered handler.
pub(crate) struct Handler<K> {
    pub name: Arc<str>,
    pub trigger: Trigger,
    pub options: HandlerOptions,
    pub when: Option<Predicate<K>>,
    /// A timer's test, once per tick, of whether any object may be due ([`Registry::tick_if`]).
    pub tick_if: Option<TickGate>,
    pub run: HandlerFn<K>,
}

impl<K> Handler<K> {
    /// Whether the handler applies to `object` (its `when` predicate, if any, holds).
    pub fn wants(&self, object: &K) -> bool {
        self.when.as_ref().is_none_or(|when| when(object))
    }

    /// Whether a tick of this timer looks at the objects at all (its [`Registry::tick_if`]).
    pub fn ticks_now(&self) -> bool {
        self.tick_if.as_ref().is_none_or(|gate| gate())
    }
}

/// The handlers of one resource type, built as a table:
///
/// ```ignore
/// registry
///     .on_create("start", start)
///     .on_update_field("spec", "restart", restart).retries(5)
///     .on_update_field("metadata.labels", "relabel", relabel)
///     .on_delete("cleanup", cleanup)
///     .on_resume("rebuild", rebuild)
///     .timer("deadline", Duration::from_secs(5), check_deadline).when(is_running)
///     .on_child("job-changed", Children::<Job>::owned(), job_changed)
/// ```
///
/// Modifiers ([`retries`](Self::retries), [`backoff`](Self::backoff),
/// [`timeout`](Self::timeout), [`when`](Self::when)) apply to the handler registered just before.
pub struct Registry<K: Watched> {
    pub(crate) handlers: Vec<Handler<K>>,
    pub(crate) children: Vec<ChildWatch>,
    pub(crate) child_indexes: Vec<Arc<dyn Any + Send + Sync>>,
    /// Shares of the resource's mirror with readers beside the handlers.
    pub(crate) mirrors: Vec<Mirror<K>>,
    /// Objects left to another controller ([`Registry::leave_alone`]), and what is still done
    /// beside them.
    pub(crate) left: Option<(Predicate<K>, Option<BesideFn<K>>)>,
    defaults: HandlerOptions,
}

impl<K: Watched> Registry<K> {
    pub(crate) fn new(defaults: HandlerOptions) -> Self {
        Self {
            handlers: Vec::new(),
            children: Vec::new(),
            child_indexes: Vec::new(),
            mirrors: Vec::new(),
            left: None,
            defaults,
        }
    }

    /// Shares the in-memory mirror of the resource (the objects the operator's watch holds,
    /// and a signal per change) with `mirror`, for readers beside the handlers such as a web
    /// view: they add no watch of their own.
    #[must_use]
    pub fn mirror_to(mut self, mirror: &Mirror<K>) -> Self {
        self.mirrors.push(mirror.clone());
        self
    }

    /// Runs `handler` once when an object is first seen (its create cause).
    #[must_use]
    pub fn on_create<F, Fut>(self, name: &str, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.push(name, Trigger::Create, handler)
    }

    /// Runs `handler` when the dotted `field` changes (`spec`, `spec.containers`,
    /// `metadata.labels`). Fields outside `metadata` are checked only when
    /// `metadata.generation` moves, so status fields are never causes.
    #[must_use]
    pub fn on_update_field<F, Fut>(self, field: &str, name: &str, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.push(
            name,
            Trigger::Update {
                field: field.to_string(),
            },
            handler,
        )
    }

    /// Runs `handler` when an object is deleted; registering one makes the framework put its
    /// finalizer on every object, so the deletion waits for the handler.
    #[must_use]
    pub fn on_delete<F, Fut>(self, name: &str, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.push(name, Trigger::Delete, handler)
    }

    /// Runs `handler` once per operator process for every object that was already handled
    /// before (operator start, or an object coming back into view).
    #[must_use]
    pub fn on_resume<F, Fut>(self, name: &str, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.push(name, Trigger::Resume, handler)
    }

    /// Runs `handler` every `every` for each object (for which [`when`](Self::when) holds,
    /// evaluated on the in-memory mirror without spawning anything).
    #[must_use]
    pub fn timer<F, Fut>(self, name: &str, every: Duration, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let trigger = Trigger::Timer {
            every,
            aligned: false,
        };
        self.push(name, trigger, handler)
    }

    /// Makes the timer registered last tick just after each wall-clock multiple of its period (a
    /// 1 s timer just after each whole second) rather than at its period counted from the
    /// operator's start: a handler waiting for a time on the second, as a schedule's, then runs
    /// milliseconds after it, not anywhere up to a period later.
    ///
    /// # Panics
    /// When the handler registered last is not a timer.
    #[must_use]
    pub fn aligned(mut self) -> Self {
        match &mut self.last().trigger {
            Trigger::Timer { aligned, .. } => *aligned = true,
            other => panic!("aligned() follows a timer, not {other:?}"),
        }
        self
    }

    /// Runs `handler` with the parent and the child whenever a child object of kind `C` is
    /// added, changes or is deleted (handed over as last seen; [`Context::children`] no longer
    /// holds it then). It runs in the parent's queue: never at the same time as another
    /// handler of the same parent.
    #[must_use]
    pub fn on_child<C, F, Fut>(mut self, name: &str, children: Children<C>, handler: F) -> Self
    where
        C: Watched,
        F: Fn(Context<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let index = self.watch_children(children);
        let run = move |mut ctx: Context<K>| {
            let child = ctx
                .child
                .take()
                .and_then(|child| child.downcast::<C>().ok());
            match child {
                Some(child) => handler(ctx, child).boxed(),
                None => {
                    async { Err(HandlerError::permanent("child event of another kind")) }.boxed()
                }
            }
        };
        self.push(name, Trigger::Child { index }, run)
    }

    /// Runs `handler` once per pass of the parent with every child of kind `C` added, changed or
    /// deleted since the last call, each once and in its latest state (a deleted one as last
    /// seen; ordered by namespace and name).
    /// Like [`Registry::on_child`] it runs in the parent's queue; use it when handling several
    /// children at once costs less than handling them one by one (one status write for many
    /// finished Jobs, say). A failed call is retried with all of its children, joined by any
    /// that changed meanwhile.
    #[must_use]
    pub fn on_children<C, F, Fut>(mut self, name: &str, children: Children<C>, handler: F) -> Self
    where
        C: Watched,
        F: Fn(Context<K>, Vec<Arc<C>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let index = self.watch_children(children);
        let run = move |mut ctx: Context<K>| {
            let batch = ctx
                .child
                .take()
                .and_then(|batch| batch.downcast::<Vec<Arc<dyn Any + Send + Sync>>>().ok())
                .and_then(|batch| {
                    batch
                        .iter()
                        .map(|child| child.clone().downcast::<C>().ok())
                        .collect::<Option<Vec<Arc<C>>>>()
                });
            match batch {
                Some(children) => handler(ctx, children).boxed(),
                None => {
                    async { Err(HandlerError::permanent("child event of another kind")) }.boxed()
                }
            }
        };
        self.push(name, Trigger::Children { index }, run)
    }

    /// Mirrors child kind `C` for [`Context::children`] with no handler: a child's change
    /// queues no work for its parent. For handlers that read the children when they run for
    /// another reason (a timer), and need not run because a child changed. Like every
    /// mirror, it is listed before any handler runs.
    #[must_use]
    pub fn keep_children<C: Watched>(mut self, children: Children<C>) -> Self {
        self.mirror_children(children, false);
        self
    }

    /// Starts mirroring child kind `C`; returns its index.
    fn watch_children<C: Watched>(&mut self, children: Children<C>) -> usize {
        self.mirror_children(children, true)
    }

    /// Starts mirroring child kind `C`, sending its changes to the parent's queue if `notify`;
    /// returns its index.
    fn mirror_children<C: Watched>(&mut self, children: Children<C>, notify: bool) -> usize {
        let index = self.children.len();
        let (watch, mirror) = super::child_index::child_watch::<K, C>(index, children, notify);
        self.children.push(watch);
        self.child_indexes.push(mirror);
        index
    }

    /// Sets the retry limit of the handler registered last.
    #[must_use]
    pub fn retries(mut self, retries: u32) -> Self {
        self.last().options.retries = Some(retries);
        self
    }

    /// Sets the backoff of the handler registered last.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.last().options.backoff = backoff;
        self
    }

    /// Sets the per-attempt timeout of the handler registered last.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.last().options.timeout = Some(timeout);
        self
    }

    /// Leaves the objects `leave` picks to another controller, as Kubernetes' own controllers
    /// leave an object whose `spec.managedBy` names another: no handler runs for them, and
    /// nothing is written to them (no finalizer, no progress record). They stay in the mirror.
    /// `leave` must not change its answer for an object (the field it reads is immutable).
    #[must_use]
    pub fn leave_alone(mut self, leave: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.left = Some((Arc::new(leave), None));
        self
    }

    /// [`Registry::leave_alone`], calling `beside` at each change of a left object: for work
    /// on other objects that the object's controller leaves to this one (Kueue's Workload of a
    /// job MultiKueue dispatches). It writes nothing to the object; it must be idempotent, and
    /// an error is logged and tried again at the object's next change or in a second.
    #[must_use]
    pub fn leave_alone_beside<F, Fut>(
        mut self,
        leave: impl Fn(&K) -> bool + Send + Sync + 'static,
        beside: F,
    ) -> Self
    where
        F: Fn(Client, Arc<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        let beside: BesideFn<K> = Arc::new(move |client, object| beside(client, object).boxed());
        self.left = Some((Arc::new(leave), Some(beside)));
        self
    }

    /// Whether `object` is left to another controller.
    pub(crate) fn leaves(&self, object: &K) -> bool {
        self.left.as_ref().is_some_and(|(leave, _)| leave(object))
    }

    /// What is done beside a left object.
    pub(crate) fn beside(&self) -> Option<&BesideFn<K>> {
        self.left.as_ref().and_then(|(_, beside)| beside.as_ref())
    }

    /// Runs the handler registered last only for objects where `when` holds. A create, update
    /// or delete handler whose `when` does not hold when its cause is handled is skipped for
    /// that cause (and counts as finished); a timer's `when` is evaluated once per object at
    /// every tick on the in-memory mirror, so objects it excludes cost no task at all, and it
    /// may consume what it reads (a wake flag): the handler then runs once for it.
    #[must_use]
    pub fn when(mut self, when: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.last().when = Some(Arc::new(when));
        self
    }

    /// Has each tick of the timer registered last first ask `gate`, once, and look at the
    /// objects (their [`when`](Self::when)) only if it holds. For a timer whose `when` takes a
    /// wake flag, `gate` says whether any flag is set: a tick with none then costs one call, not
    /// one per object (a 20 ms timer over 10,000 objects asked half a million a second).
    ///
    /// # Panics
    /// When the handler registered last is not a timer.
    #[must_use]
    pub fn tick_if(mut self, gate: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        let last = self.last();
        assert!(
            matches!(last.trigger, Trigger::Timer { .. }),
            "tick_if() follows a timer, not {:?}",
            last.trigger
        );
        last.tick_if = Some(Arc::new(gate));
        self
    }

    fn push<F, Fut>(mut self, name: &str, trigger: Trigger, handler: F) -> Self
    where
        F: Fn(Context<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        assert!(
            self.handlers.iter().all(|h| &*h.name != name),
            "handler name {name:?} is registered twice for {}",
            K::kind(&())
        );
        self.handlers.push(Handler {
            name: name.into(),
            trigger,
            options: self.defaults.clone(),
            when: None,
            tick_if: None,
            run: Arc::new(move |ctx| handler(ctx).boxed()),
        });
        self
    }

    fn last(&mut self) -> &mut Handler<K> {
        self.handlers
            .last_mut()
            .expect("a modifier follows the handler it modifies")
    }

    /// The fields update handlers are registered on, without repeats.
    pub(crate) fn fields(&self) -> Vec<String> {
        let fields: BTreeSet<&String> = self
            .handlers
            .iter()
            .filter_map(|h| match &h.trigger {
                Trigger::Update { field } => Some(field),
                _ => None,
            })
            .collect();
        fields.into_iter().cloned().collect()
    }

    pub(crate) fn has_delete_handlers(&self) -> bool {
        self.handlers.iter().any(|h| h.trigger == Trigger::Delete)
    }

    /// Handlers with a given trigger, in registration order.
    pub(crate) fn with_trigger<'a>(
        &'a self,
        wanted: impl Fn(&Trigger) -> bool + 'a,
    ) -> impl Iterator<Item = &'a Handler<K>> + 'a {
        self.handlers.iter().filter(move |h| wanted(&h.trigger))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::owner_of;
    use k8s_openapi::api::core::v1::ConfigMap;

    async fn ok(_: Context<ConfigMap>) -> HandlerResult {
        Ok(())
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let backoff = Backoff {
            initial: Duration::from_millis(100),
            factor: 2.0,
            max: Duration::from_millis(500),
        };
        let delays: Vec<u128> = (0..5).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(backoff.delay(u32::MAX), backoff.max);
    }

    #[test]
    fn modifiers_apply_to_the_handler_registered_last() {
        let registry = Registry::<ConfigMap>::new(HandlerOptions::default())
            .on_create("first", ok)
            .on_update_field("data", "second", ok)
            .retries(3)
            .timeout(Duration::from_secs(7))
            .when(|cm| cm.data.is_some());
        let [first, second] = &registry.handlers[..] else {
            panic!("two handlers")
        };
        assert_eq!(first.options, HandlerOptions::default());
        assert!(first.when.is_none());
        assert_eq!(second.options.retries, Some(3));
        assert_eq!(second.options.timeout, Some(Duration::from_secs(7)));
        assert!(!second.wants(&ConfigMap::default()));
        assert_eq!(registry.fields(), vec!["data".to_string()]);
        assert!(!registry.has_delete_handlers());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn handler_names_are_unique() {
        let _ = Registry::<ConfigMap>::new(HandlerOptions::default())
            .on_create("same", ok)
            .on_resume("same", ok);
    }

    #[test]
    fn api_errors_a_retry_cannot_fix_are_permanent() {
        let status = |code| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("boom", "Reason").with_code(code),
            ))
        };
        let table = [
            (422, false),
            (403, false),
            (409, true),
            (500, true),
            (429, true),
        ];
        for (code, temporary) in table {
            let error = HandlerError::from(status(code));
            assert_eq!(
                matches!(error, HandlerError::Temporary { .. }),
                temporary,
                "{code}"
            );
        }
    }

    #[test]
    fn owners_of_the_parent_kind_are_parents() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let owner = |kind: &str, name: &str| OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            ..Default::default()
        };
        let mut child = ConfigMap::default();
        child.metadata.namespace = Some("ns".into());
        child.metadata.owner_references = Some(vec![owner("Secret", "s"), owner("ConfigMap", "p")]);
        assert_eq!(
            owner_of::<ConfigMap, _>(&child),
            Some(Parent {
                namespace: Some("ns".into()),
                name: "p".into()
            })
        );
        child.metadata.owner_references = Some(vec![owner("Secret", "s")]);
        assert_eq!(owner_of::<ConfigMap, _>(&child), None);
    }
}
