//! Waits that watch for a condition with a deadline, and [`retrying`] calls a busy API server
//! refuses.

use super::*;

/// Waits (watching it) until the object named `name` satisfies `cond` (given `None` while it
/// does not exist), for at most [`DEADLINE`]; returns it.
///
/// # Panics
/// On the deadline, naming what was awaited and the last state seen.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    wait_for_within(api, name, what, DEADLINE, cond).await
}

/// [`wait_for`] with a deadline of `deadline`.
pub async fn wait_for_within<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    deadline: Duration,
    cond: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    watch_one(api, name, what, deadline, cond, |_| {}).await
}

/// [`wait_for`] that also returns every state of the object seen on the way, oldest first
/// (the first is the state when the watch started).
pub async fn wait_for_history<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut history = Vec::new();
    watch_one(api, name, what, DEADLINE, cond, |k: &K| {
        history.push(k.clone())
    })
    .await;
    history
}

async fn watch_one<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    deadline: Duration,
    cond: impl Fn(Option<&K>) -> bool,
    mut seen: impl FnMut(&K),
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut last: Option<K> = None;
    let mut listed = false;
    let mut errors = Vec::new();
    let watched = tokio::time::timeout(deadline, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => last = None,
                Ok(watcher::Event::InitApply(object)) => last = Some(object),
                Ok(watcher::Event::InitDone) => listed = true,
                Ok(watcher::Event::Apply(object)) => last = Some(object),
                Ok(watcher::Event::Delete(_)) => last = None,
                Err(error) => {
                    errors.push(error.to_string());
                    continue;
                }
            }
            if !listed {
                continue;
            }
            if let Some(object) = &last {
                seen(object);
            }
            if cond(last.as_ref()) {
                return true;
            }
        }
        false
    })
    .await;
    if watched != Ok(true) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let errors = if errors.is_empty() {
            String::new()
        } else {
            format!(
                "\nwatch errors ({}), the last: {}",
                errors.len(),
                errors.last().expect("not empty")
            )
        };
        panic!(
            "timed out after {deadline:?} waiting for {what} of {kind} {name}; last seen:\n{}{errors}",
            describe(last.as_ref())
        );
    }
    last
}

/// Waits (watching them) until the objects `config` selects satisfy `cond`, for at most
/// `deadline`; returns them.
///
/// # Panics
/// On the deadline, naming what was awaited and the objects last seen.
pub async fn wait_list<K>(
    api: &Api<K>,
    config: watcher::Config,
    what: &str,
    deadline: Duration,
    cond: impl Fn(&[Arc<K>]) -> bool,
) -> Vec<Arc<K>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let mut events = watcher(api.clone(), config)
        .default_backoff()
        .reflect(writer)
        .boxed();
    let mut listed = false;
    let watched = tokio::time::timeout(deadline, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitDone) => listed = true,
                Ok(_) => {}
                Err(_) => continue,
            }
            if listed && cond(&reader.state()) {
                return true;
            }
        }
        false
    })
    .await;
    let state = reader.state();
    if watched != Ok(true) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let seen: Vec<String> = state
            .iter()
            .map(|o| {
                let status = serde_json::to_value(o.as_ref())
                    .ok()
                    .and_then(|v| v.get("status").cloned())
                    .unwrap_or_default();
                format!("- {}: {}", o.name_any(), truncate(status.to_string(), 400))
            })
            .collect();
        panic!(
            "timed out after {deadline:?} waiting for {what} ({kind} list); last seen {} objects:\n{}",
            state.len(),
            truncate(seen.join("\n"), 6000)
        );
    }
    state
}

/// Watches the object for `period` and asserts that every state seen satisfies `cond`: a check
/// that something does *not* happen (a completed workflow is not failed later), not a wait.
///
/// # Panics
/// At the first state seen that breaks `cond`.
pub async fn holds_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    period: Duration,
    cond: impl Fn(Option<&K>) -> bool,
) where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut seen = 0usize;
    let _ = tokio::time::timeout(period, async {
        let mut last: Option<K> = None;
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitApply(object) | watcher::Event::Apply(object)) => {
                    last = Some(object)
                }
                Ok(watcher::Event::Delete(_)) => last = None,
                Ok(watcher::Event::Init) => last = None,
                Ok(watcher::Event::InitDone) => listed = true,
                Err(_) => continue,
            }
            if !listed {
                continue;
            }
            seen += 1;
            assert!(
                cond(last.as_ref()),
                "{what} broke for {name} after {seen} states seen; state:\n{}",
                describe(last.as_ref())
            );
        }
    })
    .await;
    assert!(
        seen > 0,
        "watching {name} for {period:?} saw no state at all"
    );
}

/// Calls `call` until it succeeds, retrying what a busy or fault-injecting API server answers
/// (409, 429, 500, 503, transport errors) with a short backoff, for at most [`DEADLINE`].
///
/// # Panics
/// On another error, or on the deadline.
pub async fn retrying<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(50);
    loop {
        match call().await {
            Ok(value) => return value,
            Err(error) => {
                let transient = match &error {
                    // A 409 AlreadyExists is an answer, not a hiccup (an injected 409 is a
                    // Conflict).
                    kube::Error::Api(e) => {
                        matches!(e.code, 409 | 429 | 500 | 503) && e.reason != "AlreadyExists"
                    }
                    kube::Error::HyperError(_) | kube::Error::Service(_) => true,
                    _ => false,
                };
                assert!(transient && start.elapsed() < DEADLINE, "{what}: {error}");
                // A backoff between attempts, not a wait for a condition.
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}
