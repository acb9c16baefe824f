//! Field ownership as the API server keeps it in `metadata.managedFields`
//! (k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager, sigs.k8s.io/structured-merge-diff):
//! every write records, per manager and operation (`Apply` or `Update`), the set of fields that
//! manager owns, in the `FieldsV1` format. Server-side apply merges the applied configuration
//! into the live object, takes ownership of what it applied, answers 409 when that changes a
//! field another manager owns (unless forced), and removes the fields a manager stopped applying
//! that nobody else owns.
//!
//! Field sets are trees keyed by `FieldsV1` path elements (`f:<field>`, `k:<key fields as
//! JSON>` for items of keyed lists, `v:<value>` for items of sets); a node is a member when the
//! field itself is owned (`.` in `FieldsV1` when it has children too).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use crate::api::error::{ApiError, Result};
use crate::apiserver::merge_keys::{ListType, Shape};

pub mod last_applied;

/// A set of field paths, as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn child(&mut self, element: String) -> &mut FieldSet {
        self.children.entry(element).or_default()
    }

    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, v) in &other.children {
            self.child(k.clone()).union(v);
        }
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = v.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Whether this node or any below it is a member.
    fn owns_any(&self) -> bool {
        self.member || self.children.values().any(FieldSet::owns_any)
    }

    /// Parses `fieldsV1`.
    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut out = FieldSet::default();
        if let Some(map) = value.as_object() {
            for (k, v) in map {
                if k == "." {
                    out.member = true;
                    continue;
                }
                let mut child = FieldSet::from_fields_v1(v);
                if v.as_object().is_none_or(Map::is_empty) {
                    child.member = true;
                }
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// Renders `fieldsV1`: a member leaf is `{}`, a member with children also has `.`. Consumes
    /// the set, so its keys move into the rendering instead of being copied.
    pub fn into_fields_v1(self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, v) in self.children {
            map.insert(k, v.into_fields_v1());
        }
        Value::Object(map)
    }

    /// The member paths, as structured-merge-diff prints them (`.spec.containers[name="c"].image`).
    pub fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_paths(String::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: String, out: &mut Vec<String>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            v.collect_paths(format!("{prefix}{}", print_element(k)), out);
        }
    }
}

/// fieldpath.PathElement.String: `.name`, `[k1=v1,k2=v2]`, `[=value]`.
fn print_element(element: &str) -> String {
    if let Some(name) = element.strip_prefix("f:") {
        format!(".{name}")
    } else if let Some(key) = element.strip_prefix("k:") {
        let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
        let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("[{}]", parts.join(","))
    } else if let Some(value) = element.strip_prefix("v:") {
        format!("[={value}]")
    } else if let Some(index) = element.strip_prefix("i:") {
        format!("[{index}]")
    } else {
        element.to_string()
    }
}

/// The `k:` element of a keyed list item: its key fields as JSON, fields sorted by name
/// (structured-merge-diff fieldpath/serialize-pe.go).
fn key_element(item: &Value, keys: &[&str]) -> String {
    let mut fields: Vec<(&str, &Value)> = keys
        .iter()
        .filter_map(|k| item.get(*k).map(|v| (*k, v)))
        .collect();
    fields.sort_by_key(|(k, _)| *k);
    let parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{}", json!(k), v))
        .collect();
    format!("k:{{{}}}", parts.join(","))
}

fn value_element(item: &Value) -> String {
    format!("v:{item}")
}

/// Fields the server sets or that name the object: never owned by anyone
/// (fieldmanager/internal/stripmeta.go).
fn is_stripped(top: bool, in_metadata: bool, key: &str) -> bool {
    (top && matches!(key, "apiVersion" | "kind"))
        || (in_metadata
            && matches!(
                key,
                "name"
                    | "namespace"
                    | "creationTimestamp"
                    | "selfLink"
                    | "uid"
                    | "clusterName"
                    | "generation"
                    | "managedFields"
                    | "resourceVersion"
            ))
}

/// Where a walk is: at the top of the object, in its `metadata`, or below.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Metadata,
    Inner,
}

impl Level {
    fn below(self, key: &str) -> Level {
        if self == Level::Top && key == "metadata" {
            Level::Metadata
        } else {
            Level::Inner
        }
    }

    fn strips(self, key: &str) -> bool {
        is_stripped(self == Level::Top, self == Level::Metadata, key)
    }
}

/// The fields an object sets (typed.TypedValue.ToFieldSet): scalars, atomic lists and maps,
/// empty objects, items of lists and keys of free maps are members; struct fields that hold
/// objects are not (their fields are).
pub fn field_set(obj: &Value, shape: Shape) -> FieldSet {
    let mut out = FieldSet::default();
    if let Some(map) = obj.as_object() {
        map_fields(map, shape, Level::Top, Walk::Applied, &mut out);
    }
    out
}

/// Whether a walk lists the fields an applied configuration sets, or the fields a write added
/// or removed. The latter also owns each object and list that was absent or is gone
/// (typed/compare.go inserts the path of every node with no left or right side), except the
/// structs a built-in object always has (Go value structs: spec, status, template).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    Applied,
    Changed,
}

fn map_fields(
    map: &Map<String, Value>,
    shape: Shape,
    level: Level,
    walk: Walk,
    out: &mut FieldSet,
) {
    for (key, value) in map {
        if level.strips(key) {
            continue;
        }
        let element = format!("f:{key}");
        let node = out.child(element.clone());
        value_fields(key, value, shape, level, walk, node);
        if node.is_empty() {
            // Only stripped fields below (metadata.name): nothing owned here.
            out.children.remove(&element);
        }
    }
}

/// The fields of the value of `key` of an object of `shape`, into its node.
fn value_fields(
    key: &str,
    value: &Value,
    shape: Shape,
    level: Level,
    walk: Walk,
    node: &mut FieldSet,
) {
    let field = shape.field(key);
    if level.below(key) == Level::Metadata {
        // metadata itself is never owned (stripmeta.go), only fields in it.
        if let Some(map) = value.as_object() {
            map_fields(map, field.shape, Level::Metadata, walk, node);
        }
        return;
    }
    if !shape.is_struct() {
        node.member = true;
    }
    let value_struct = matches!(field.shape, Shape::Builtin(_)) && field.shape.is_struct();
    if walk == Walk::Changed && (value.is_object() || value.is_array()) && !value_struct {
        node.member = true;
    }
    match value {
        Value::Object(map) if map.is_empty() || field.atomic_map => node.member = true,
        Value::Object(map) => map_fields(map, field.shape, level.below(key), walk, node),
        Value::Array(items) => match &field.list {
            ListType::Atomic => node.member = true,
            ListType::Set => {
                for item in items {
                    node.child(value_element(item)).member = true;
                }
            }
            ListType::Map(keys) => {
                for item in items {
                    let item_node = node.child(key_element(item, keys));
                    item_node.member = true;
                    if let Some(map) = item.as_object() {
                        map_fields(map, field.shape, Level::Inner, walk, item_node);
                    }
                }
            }
        },
        _ => node.member = true,
    }
}

/// What changed from one object to another (typed.Comparison): fields added, removed, and
/// modified (scalars and atomic values that differ). Equal subtrees are skipped at the first
/// comparison, so a status write costs about a comparison of the object, not a walk of it.
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: FieldSet,
    pub removed: FieldSet,
    pub modified: FieldSet,
}

impl Comparison {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.modified.is_empty()
    }

    /// Added or modified: what a manager that changed them now owns.
    fn changed(&self) -> FieldSet {
        let mut out = self.added.clone();
        out.union(&self.modified);
        out
    }
}

pub fn compare(old: &Value, new: &Value, shape: Shape) -> Comparison {
    let mut out = Comparison::default();
    let empty = Map::new();
    compare_maps(
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
        shape,
        Level::Top,
        &mut Nodes::root(&mut out),
    );
    out
}

/// The three result trees at the current path.
struct Nodes<'a> {
    added: &'a mut FieldSet,
    removed: &'a mut FieldSet,
    modified: &'a mut FieldSet,
}

impl<'a> Nodes<'a> {
    fn root(c: &'a mut Comparison) -> Self {
        Nodes {
            added: &mut c.added,
            removed: &mut c.removed,
            modified: &mut c.modified,
        }
    }

    fn child(&mut self, element: &str) -> Nodes<'_> {
        Nodes {
            added: self.added.child(element.to_string()),
            removed: self.removed.child(element.to_string()),
            modified: self.modified.child(element.to_string()),
        }
    }
}

fn compare_maps(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    shape: Shape,
    level: Level,
    nodes: &mut Nodes,
) {
    for (key, new_value) in new {
        if level.strips(key) {
            continue;
        }
        let element = format!("f:{key}");
        match old.get(key) {
            Some(old_value) if old_value == new_value => {}
            Some(old_value) => compare_values(
                key,
                old_value,
                new_value,
                shape,
                level,
                &mut nodes.child(&element),
            ),
            None => value_fields(
                key,
                new_value,
                shape,
                level,
                Walk::Changed,
                nodes.added.child(element),
            ),
        }
    }
    for (key, old_value) in old {
        if !new.contains_key(key) && !level.strips(key) {
            value_fields(
                key,
                old_value,
                shape,
                level,
                Walk::Changed,
                nodes.removed.child(format!("f:{key}")),
            );
        }
    }
    prune_empty(nodes.added);
    prune_empty(nodes.removed);
    prune_empty(nodes.modified);
}

fn prune_empty(set: &mut FieldSet) {
    set.children.retain(|_, c| !c.is_empty());
}

fn compare_values(
    key: &str,
    old: &Value,
    new: &Value,
    shape: Shape,
    level: Level,
    nodes: &mut Nodes,
) {
    let field = shape.field(key);
    match (old, new) {
        (Value::Object(o), Value::Object(n))
            if !field.atomic_map && !o.is_empty() && !n.is_empty() =>
        {
            compare_maps(o, n, field.shape, level.below(key), nodes)
        }
        (Value::Array(o), Value::Array(n)) if field.list != ListType::Atomic => {
            let element = |item: &Value| match &field.list {
                ListType::Map(keys) => key_element(item, keys),
                _ => value_element(item),
            };
            let old_items: BTreeMap<String, &Value> = o.iter().map(|i| (element(i), i)).collect();
            let new_items: BTreeMap<String, &Value> = n.iter().map(|i| (element(i), i)).collect();
            for (e, item) in &new_items {
                match old_items.get(e) {
                    Some(old_item) if old_item == item => {}
                    Some(old_item) => {
                        let empty = Map::new();
                        compare_maps(
                            old_item.as_object().unwrap_or(&empty),
                            item.as_object().unwrap_or(&empty),
                            field.shape,
                            Level::Inner,
                            &mut nodes.child(e),
                        )
                    }
                    None => {
                        let node = nodes.added.child(e.clone());
                        node.member = true;
                        if let (ListType::Map(_), Some(map)) = (&field.list, item.as_object()) {
                            map_fields(map, field.shape, Level::Inner, Walk::Changed, node);
                        }
                    }
                }
            }
            for (e, item) in &old_items {
                if !new_items.contains_key(e) {
                    let node = nodes.removed.child(e.clone());
                    node.member = true;
                    if let (ListType::Map(_), Some(map)) = (&field.list, item.as_object()) {
                        map_fields(map, field.shape, Level::Inner, Walk::Changed, node);
                    }
                }
            }
            prune_empty(nodes.added);
            prune_empty(nodes.removed);
            prune_empty(nodes.modified);
        }
        _ => nodes.modified.member = true,
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn parse(value: &Value) -> Option<Entry> {
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(String::from);
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation: text("operation")?,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            fields: FieldSet::from_fields_v1(value.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    fn render(self) -> Value {
        let mut out = Map::new();
        out.insert("manager".into(), Value::String(self.manager));
        out.insert("operation".into(), Value::String(self.operation));
        out.insert("apiVersion".into(), Value::String(self.api_version));
        out.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        out.insert("fieldsV1".into(), self.fields.into_fields_v1());
        if let Some(time) = self.time {
            out.insert("time".into(), Value::String(time));
        }
        if let Some(sub) = self.subresource {
            out.insert("subresource".into(), Value::String(sub));
        }
        Value::Object(out)
    }

    fn is(&self, who: &Writer, operation: &str) -> bool {
        self.manager == who.manager
            && self.operation == operation
            && self.subresource.as_deref() == who.subresource
    }

    /// How conflict messages name a manager (fieldmanager/internal/conflict.go printManager).
    fn printed(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            out.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            out.push_str(&format!(" using {}", self.api_version));
            if let Some(time) = &self.time {
                out.push_str(&format!(" at {time}"));
            }
        }
        out
    }
}

/// Who writes: the field manager, and the API version and subresource written through.
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
}

/// The manager of a write that names none: the User-Agent up to its first `/`
/// (fieldmanager.go prefixFromUserAgent).
pub fn manager_from_user_agent(user_agent: &str) -> String {
    user_agent
        .split('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(128)
        .collect()
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

/// Writes the entries back, Apply first, then by time and manager (the server's sort), and no
/// empty ones.
fn set_entries(obj: &mut Value, mut list: Vec<Entry>) {
    list.retain(|e| !e.fields.is_empty());
    list.sort_by(|a, b| {
        (a.operation != "Apply", &a.time, &a.manager).cmp(&(
            b.operation != "Apply",
            &b.time,
            &b.manager,
        ))
    });
    let Some(metadata) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if list.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert(
            "managedFields".into(),
            Value::Array(list.into_iter().map(Entry::render).collect()),
        );
    }
}

/// Records an update (create, update, or a JSON, merge or strategic patch) of `old` into `new`
/// (merge.Updater.Update): the writer's Update entry gains what it added or modified and loses
/// what it removed; every other manager loses those fields. When nothing changed, nothing is
/// recorded, so a no-op write stays a no-op (no new resourceVersion).
pub fn record_update(old: Option<&Value>, new: &mut Value, shape: Shape, who: &Writer, now: &str) {
    // A client that sends managedFields sets them; one that sends none keeps the stored ones
    // (fieldmanager.go: "prevent clients who don't understand managedFields from deleting it").
    let sent = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    if old.is_none() && !sent {
        record_create(new, shape, who, now);
        return;
    }
    let empty = json!({});
    let comparison = compare(old.unwrap_or(&empty), new, shape);
    if comparison.is_empty() {
        if !sent && let Some(old) = old {
            let stored = old.pointer("/metadata/managedFields");
            if new.pointer("/metadata/managedFields") != stored {
                match stored {
                    Some(list) => new["metadata"]["managedFields"] = list.clone(),
                    None => {
                        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                            m.remove("managedFields");
                        }
                    }
                }
            }
        }
        return;
    }
    // Parsed only when something changed: a no-op write costs the comparison alone.
    let mut managers = if sent {
        entries(new)
    } else {
        old.map(entries).unwrap_or_default()
    };
    let changed = comparison.changed();
    if sent_or_stored(new, old, sent) && touch_own_entry(new, &comparison, &changed, who, now) {
        return;
    }
    for entry in managers.iter_mut().filter(|e| !e.is(who, "Update")) {
        entry.fields = entry
            .fields
            .difference(&changed)
            .difference(&comparison.removed);
    }
    let mut mine = managers
        .iter()
        .position(|e| e.is(who, "Update"))
        .map(|i| managers.remove(i))
        .unwrap_or_else(|| Entry {
            manager: who.manager.to_string(),
            operation: "Update".into(),
            api_version: who.api_version.to_string(),
            time: None,
            subresource: who.subresource.map(String::from),
            fields: FieldSet::default(),
        });
    mine.fields = mine.fields.difference(&comparison.removed);
    mine.fields.union(&changed);
    mine.time = Some(now.to_string());
    mine.api_version = who.api_version.to_string();
    managers.push(mine);
    managers.retain(|e| !e.fields.is_empty());
    cap_update_managers(&mut managers);
    set_entries(new, managers);
}

/// The most Update entries an object keeps (fieldmanager.go `DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// What the oldest Update entries are merged into (capmanagers.go `oldUpdatesManagerName`).
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Keeps at most [`MAX_UPDATE_MANAGERS`] Update entries, as the API server does after every
/// update (k8s.io/apimachinery/pkg/util/managedfields/internal/capmanagers.go,
/// `capUpdateManagers`): oldest first (by time in seconds, then by manager), the second and
/// later entries of an API version are merged into that version's `ancient-changes` entry, which
/// the first of them becomes, until few enough are left. The bucket takes the time of the last
/// entry merged into it.
fn cap_update_managers(managers: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..managers.len())
        .filter(|&i| managers[i].operation == "Update")
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    // Times are RFC 3339 in whole seconds, so they sort as strings; the API server breaks ties by
    // the manager's identifier (its JSON: manager, operation, apiVersion, subresource).
    fn key(e: &Entry) -> (&str, &str, &str, Option<&str>) {
        (
            e.time.as_deref().unwrap_or_default(),
            &e.manager,
            &e.api_version,
            e.subresource.as_deref(),
        )
    }
    updaters.sort_by(|&a, &b| key(&managers[a]).cmp(&key(&managers[b])));
    let mut first_of_version: HashMap<String, usize> = HashMap::new();
    let mut merged = vec![false; managers.len()];
    let mut left = updaters.len();
    for &i in &updaters {
        if left <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = managers[i].api_version.clone();
        let Some(&first) = first_of_version.get(&version) else {
            first_of_version.insert(version, i);
            continue;
        };
        let is_bucket = |e: &Entry| {
            e.manager == ANCIENT_CHANGES
                && e.operation == "Update"
                && e.api_version == version
                && e.subresource.is_none()
        };
        let bucket = match (0..managers.len()).find(|&j| !merged[j] && is_bucket(&managers[j])) {
            // The bucket itself, older than another entry of its version: nothing to merge. (The
            // Go code would delete it here, with the fields it holds.)
            Some(bucket) if bucket == i => continue,
            Some(bucket) => bucket,
            None => {
                managers[first].manager = ANCIENT_CHANGES.into();
                managers[first].subresource = None;
                first
            }
        };
        let fields = std::mem::take(&mut managers[i].fields);
        managers[bucket].fields.union(&fields);
        managers[bucket].time = managers[i].time.clone();
        merged[i] = true;
        left -= 1;
    }
    let mut index = 0;
    managers.retain(|_| {
        let keep = !merged[index];
        index += 1;
        keep
    });
}

/// A create that sends no managed fields (every create but that of an exported object): the
/// writer's Update entry owns every field the object sets, what a comparison with nothing finds
/// added. One walk of the object and one rendering: the general path also compares, copies and
/// merges field sets, which made creating a step's Job markedly slower (the benchmark's steps/s).
fn record_create(new: &mut Value, shape: Shape, who: &Writer, now: &str) {
    let mut added = FieldSet::default();
    if let Some(map) = new.as_object() {
        map_fields(map, shape, Level::Top, Walk::Changed, &mut added);
    }
    let entry = Entry {
        manager: who.manager.to_string(),
        operation: "Update".into(),
        api_version: who.api_version.to_string(),
        time: Some(now.to_string()),
        subresource: who.subresource.map(String::from),
        fields: added,
    };
    set_entries(new, vec![entry]);
}

/// Gives `new` the managed fields its update starts from: its own if the client sent some, else
/// the stored ones. False when there are none.
fn sent_or_stored(new: &mut Value, old: Option<&Value>, sent: bool) -> bool {
    if sent {
        return true;
    }
    match old.and_then(|o| o.pointer("/metadata/managedFields")) {
        Some(list) if new.get("metadata").is_some_and(Value::is_object) => {
            new["metadata"]["managedFields"] = list.clone();
            true
        }
        _ => false,
    }
}

/// The common case of a controller writing its own fields again (the operator's status writes):
/// nothing removed, the writer's Update entry already owns every changed field and no other
/// manager owns any. Then only that entry's time changes, in the `FieldsV1` as stored, without
/// parsing or rendering any field set. False when the case does not apply.
fn touch_own_entry(
    new: &mut Value,
    comparison: &Comparison,
    changed: &FieldSet,
    who: &Writer,
    now: &str,
) -> bool {
    if !comparison.removed.is_empty() {
        return false;
    }
    let Some(list) = new
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let is_mine = |e: &Value| {
        e["manager"] == who.manager
            && e["operation"] == "Update"
            && e["apiVersion"] == who.api_version
            && e.get("subresource").and_then(Value::as_str) == who.subresource
    };
    let Some(i) = list.iter().position(is_mine) else {
        return false;
    };
    let clear = list.iter().enumerate().all(|(j, e)| {
        if j == i {
            json_contains(&e["fieldsV1"], changed)
        } else {
            !json_intersects(&e["fieldsV1"], changed)
        }
    });
    if !clear {
        return false;
    }
    let mut entry = list.remove(i);
    entry["time"] = json!(now);
    // Keep the server's order (see `set_entries`): Apply first, then by time and manager.
    let key = |e: &Value| {
        (
            e["operation"] != "Apply",
            e["time"].as_str().unwrap_or_default().to_string(),
            e["manager"].as_str().unwrap_or_default().to_string(),
        )
    };
    let mine = key(&entry);
    let at = list
        .iter()
        .position(|e| key(e) > mine)
        .unwrap_or(list.len());
    list.insert(at, entry);
    true
}

/// Whether a `fieldsV1` node is itself owned: a leaf, or one with `.`.
fn json_is_member(fields: &Value) -> bool {
    fields
        .as_object()
        .is_none_or(|m| m.is_empty() || m.contains_key("."))
}

/// Whether the stored `fieldsV1` owns every member of `set`.
fn json_contains(fields: &Value, set: &FieldSet) -> bool {
    (!set.member || json_is_member(fields))
        && set
            .children
            .iter()
            .all(|(k, c)| fields.get(k).is_some_and(|f| json_contains(f, c)))
}

/// Whether the stored `fieldsV1` owns any member of `set`.
fn json_intersects(fields: &Value, set: &FieldSet) -> bool {
    (set.member && json_is_member(fields))
        || set
            .children
            .iter()
            .any(|(k, c)| fields.get(k).is_some_and(|f| json_intersects(f, c)))
}

/// Server-side apply of `config` to `live` (merge.Updater.Apply): the object to store, with its
/// managed fields, or a 409 naming the fields other managers own that the apply would change.
pub fn apply(
    live: &Value,
    config: &Value,
    shape: Shape,
    who: &Writer,
    force: bool,
    now: &str,
) -> Result<Value> {
    if !config.is_object() {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: the apply configuration must be an object, not {config}"
        )));
    }
    let mut managers = entries(live);
    let last = managers
        .iter()
        .position(|e| e.is(who, "Apply"))
        .map(|i| managers.remove(i));
    let applied = field_set(config, shape);
    let mut merged = live.clone();
    apply_merge(&mut merged, config, shape);
    // Fields this manager applied before and no longer applies are removed, unless a manager
    // owns them or something below them, this apply included (merge.Updater.prune and
    // addBackOwnedItems, which keep every named field above an owned one: a last set that owned
    // `data` itself, as kubectl's move from client-side apply leaves it, keeps `data` while
    // keys of it are still applied).
    if let Some(last) = &last {
        let mut owned = applied.clone();
        for e in &managers {
            owned.union(&e.fields);
        }
        let gone = last.fields.difference(&applied);
        if let Some(map) = merged.as_object_mut() {
            remove_fields(map, &gone, &owned, shape);
        }
    }
    let comparison = compare(live, &merged, shape);
    let changed = comparison.changed();
    let mut conflicts: Vec<(&Entry, FieldSet)> = Vec::new();
    for entry in &managers {
        let overlap = entry.fields.intersection(&changed);
        if !overlap.is_empty() {
            conflicts.push((entry, overlap));
        }
    }
    if !conflicts.is_empty() && !force {
        // kubectl moving from client-side apply: what its annotation still agrees with the live
        // object on is taken over as if forced (see `last_applied`).
        if let Some(agreed) = last_applied::agreed_fields(live, who, shape) {
            conflicts.retain_mut(|(_, fields)| {
                *fields = fields.difference(&agreed);
                !fields.is_empty()
            });
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(&conflicts));
        }
    }
    for entry in managers.iter_mut() {
        entry.fields = entry
            .fields
            .difference(&changed)
            .difference(&comparison.removed);
    }
    let unchanged = comparison.is_empty() && last.as_ref().is_some_and(|l| l.fields == applied);
    if unchanged {
        // Nothing to write: no new resourceVersion, the entry's time kept
        // (fieldmanager IgnoreManagedFieldsTimestampsTransformer).
        let mut same = live.clone();
        last_applied::sync_annotation(&mut same, config, who);
        return Ok(same);
    }
    managers.push(Entry {
        manager: who.manager.to_string(),
        operation: "Apply".into(),
        api_version: who.api_version.to_string(),
        time: Some(now.to_string()),
        subresource: who.subresource.map(String::from),
        fields: applied,
    });
    set_entries(&mut merged, managers);
    last_applied::sync_annotation(&mut merged, config, who);
    Ok(merged)
}

/// An apply must name the endpoint's own apiVersion and kind: the field manager refuses any
/// other with 400 `invalid object type: apps/v1, Kind=Deployment`, `GroupVersionKind.String()`
/// of what the configuration names (k8s.io/apimachinery pkg/util/managedfields/internal
/// versioncheck.go, `versionCheckManager.Apply`), whether the object exists or not.
pub fn check_applied_kind(config: &Value, api_version: &str, kind: &str) -> Result<()> {
    let text = |field: &str| {
        config
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (applied_version, applied_kind) = (text("apiVersion"), text("kind"));
    if applied_version == api_version && applied_kind == kind {
        return Ok(());
    }
    let (group, version) = applied_version
        .split_once('/')
        .unwrap_or(("", applied_version));
    Err(ApiError::bad_request(format!(
        "invalid object type: {group}/{version}, Kind={applied_kind}"
    )))
}

/// What an apply through one endpoint may set (the strategies' ResetFields): with a status
/// subresource, an apply to the main resource leaves status alone and one to `/status` only
/// sets status. The configuration must be an object (else 400, as the real server decodes it).
pub fn reset_fields(
    config: &mut Value,
    status_subresource: bool,
    status_target: bool,
) -> Result<()> {
    let Some(map) = config.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: the apply configuration must be an object, not {config}"
        )));
    };
    if status_target {
        map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.retain(|k, _| matches!(k.as_str(), "name" | "namespace"));
        }
    } else if status_subresource {
        map.remove("status");
    }
    Ok(())
}

/// The 409 of an apply that would change fields other managers own
/// (fieldmanager/internal/conflict.go NewConflictError): one cause per field, and a message
/// naming the fields and managers.
fn conflict_error(conflicts: &[(&Entry, FieldSet)]) -> ApiError {
    let mut causes = Vec::new();
    let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (entry, set) in conflicts {
        for path in set.paths() {
            causes.push(json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", entry.printed()),
                "field": path,
            }));
            by_manager.entry(entry.printed()).or_default().push(path);
        }
    }
    let message = if causes.len() == 1 {
        let (manager, paths) = by_manager.iter().next().expect("one conflict");
        format!(
            "Apply failed with 1 conflict: conflict with {manager}: {}",
            paths[0]
        )
    } else {
        let mut lines = Vec::new();
        for (manager, paths) in &by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            causes.len(),
            lines.join("\n")
        )
    };
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(json!({"causes": causes})),
    }
}

/// Removes from `map` the member fields of `gone`, except where `keep` owns the field or
/// something below it.
fn remove_fields(map: &mut Map<String, Value>, gone: &FieldSet, keep: &FieldSet, shape: Shape) {
    let empty = FieldSet::default();
    for (element, sub) in &gone.children {
        let Some(key) = element.strip_prefix("f:") else {
            continue;
        };
        let kept = keep.children.get(element).unwrap_or(&empty);
        if sub.member && !kept.owns_any() {
            map.remove(key);
            continue;
        }
        let field = shape.field(key);
        match map.get_mut(key) {
            Some(Value::Object(inner)) => remove_fields(inner, sub, kept, field.shape),
            Some(Value::Array(items)) => {
                items.retain_mut(|item| {
                    let e = match &field.list {
                        ListType::Map(keys) => key_element(item, keys),
                        ListType::Set => value_element(item),
                        ListType::Atomic => return true,
                    };
                    let Some(item_gone) = sub.children.get(&e) else {
                        return true;
                    };
                    let item_kept = kept.children.get(&e).unwrap_or(&empty);
                    if item_gone.member && !item_kept.owns_any() {
                        return false;
                    }
                    if let Some(inner) = item.as_object_mut() {
                        remove_fields(inner, item_gone, item_kept, field.shape);
                    }
                    true
                });
            }
            _ => {}
        }
    }
}

/// Merges an applied configuration into an object (typed.TypedValue.Merge): objects field by
/// field (atomic maps replaced), keyed lists item by item on their keys, sets as a union,
/// atomic lists and scalars replaced. A null removes the field.
pub fn apply_merge(target: &mut Value, config: &Value, shape: Shape) {
    match (target.as_object_mut(), config.as_object()) {
        (Some(target), Some(config)) => merge_object(target, config, shape),
        _ => *target = config.clone(),
    }
}

fn merge_object(target: &mut Map<String, Value>, config: &Map<String, Value>, shape: Shape) {
    for (key, value) in config {
        let field = shape.field(key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(_) if !field.atomic_map => match target.get_mut(key) {
                Some(existing @ Value::Object(_)) => apply_merge(existing, value, field.shape),
                _ => {
                    target.insert(key.clone(), value.clone());
                }
            },
            Value::Array(items) => {
                let merged = match (&field.list, target.get(key)) {
                    (ListType::Set, Some(Value::Array(existing))) => {
                        let mut out = existing.clone();
                        out.extend(items.iter().filter(|i| !existing.contains(i)).cloned());
                        out
                    }
                    (ListType::Map(keys), Some(Value::Array(existing))) => {
                        let mut out = existing.clone();
                        for item in items {
                            let id = key_element(item, keys);
                            match out.iter_mut().find(|o| key_element(o, keys) == id) {
                                Some(found) => apply_merge(found, item, field.shape),
                                None => out.push(item.clone()),
                            }
                        }
                        out
                    }
                    _ => items.clone(),
                };
                target.insert(key.clone(), Value::Array(merged));
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_sets_round_trip_through_fields_v1() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]}});
        let set = field_set(&obj, Shape::Builtin("Pod"));
        let v1 = set.clone().into_fields_v1();
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {},
                       "f:ports": {"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}}}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
        assert!(
            set.paths()
                .contains(&".spec.containers[name=\"c\"].image".to_string())
        );
    }

    #[test]
    fn compare_finds_only_what_changed() {
        let old = json!({"spec": {"a": 1, "b": {"c": 2}}, "status": {"x": 1}});
        let new = json!({"spec": {"a": 1, "b": {"c": 3}}, "status": {"y": 1}});
        let c = compare(&old, &new, Shape::Untyped);
        assert_eq!(c.modified.paths(), vec![".spec.b.c"]);
        assert_eq!(c.added.paths(), vec![".status.y"]);
        assert_eq!(c.removed.paths(), vec![".status.x"]);
    }

    #[test]
    fn an_update_takes_the_fields_it_changes_from_other_managers() {
        let a = Writer {
            manager: "a",
            api_version: "v1",
            subresource: None,
        };
        let b = Writer {
            manager: "b",
            api_version: "v1",
            subresource: None,
        };
        let mut v1 = json!({"metadata": {"name": "x"}, "data": {"k": "1", "l": "1"}});
        record_update(None, &mut v1, Shape::Untyped, &a, "t1");
        // a writes its own field again: only its time changes.
        let mut v2 = v1.clone();
        v2["data"]["k"] = json!("2");
        record_update(Some(&v1), &mut v2, Shape::Untyped, &a, "t2");
        let entries = v2["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["time"], "t2");
        assert_eq!(
            entries[0]["fieldsV1"],
            v1["metadata"]["managedFields"][0]["fieldsV1"]
        );
        // b changes k: it owns k now, a keeps l.
        let mut v3 = v2.clone();
        v3["data"]["k"] = json!("3");
        record_update(Some(&v2), &mut v3, Shape::Untyped, &b, "t3");
        let fields = |m: &str| {
            v3["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["manager"] == m)
                .unwrap()["fieldsV1"]
                .clone()
        };
        assert_eq!(fields("a"), json!({"f:data": {".": {}, "f:l": {}}}));
        assert_eq!(fields("b"), json!({"f:data": {"f:k": {}}}));
    }
}
