//! CEL validation rules of CRD schemas (`x-kubernetes-validations`), evaluated as the real API
//! server evaluates them on every create and update of a custom object, and checked when a CRD
//! is written. The expressions run on the `cel` crate with the Kubernetes CEL libraries of
//! kube-rs' `kube-cel` (strings, lists, sets, regex, URLs, IPs, quantities, semver, format).
//!
//! What follows the real server (k8s.io/apiextensions-apiserver
//! pkg/apiserver/schema/cel/validation.go, `Validator.validate` and `validateExpressions`):
//!
//! - each rule sees its node as `self`; at the root of a resource only `apiVersion`, `kind`,
//!   `metadata.name` and `metadata.generateName` of the metadata (`model.WithTypeAndObjectMeta`);
//! - null values are not checked; rules under `allOf` apply to the same node;
//! - a transition rule (one that names `oldSelf`) runs only on an update with a correlated old
//!   value: object properties and map values by key, `x-kubernetes-list-type: map` items by
//!   their keys; other list items and `x-kubernetes-map-type: atomic` maps have none;
//! - a failed rule is a cause at its node (plus `fieldPath`), with `reason` choosing its kind and
//!   `messageExpression`, else `message`, else `failed rule: <rule>` its detail, the value shown
//!   being the node's schema type: `spec.x: Invalid value: "integer": must not be 0`;
//! - an unchanged value does not fail an update for a rule that is not a transition rule
//!   (ratcheting, `CRDValidationRatcheting`; the real server warns instead);
//! - rules are not run when the structural checks already found a missing, wrongly typed,
//!   unsupported or too large value ([`blocked_by`], from pkg/registry/customresource/strategy.go
//!   `hasBlockingErr`).
//!
//! At CRD create and update ([`check_crd_rules`], from pkg/apis/apiextensions/validation
//! validation.go `ValidateCustomResourceDefinitionOpenAPISchema`): a rule must be given, parse,
//! have a one-line message, a known `reason` and a `fieldPath` that names a field of the schema.
//!
//! Not done: the real server type-checks each rule against the schema when the CRD is written
//! (`self.nofield` is refused then); here such a rule is refused when it runs, as an evaluation
//! error. Runtime cost budgets are not enforced. String formats (`date-time`, `duration`,
//! `byte`) are plain strings to a rule.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map as CelMap};
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::Value;

use super::property_schema;
use crate::field_error::FieldError;

/// The reasons a rule may give (the real server's `supportedValidationReason`).
const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// The longest message a `messageExpression` may produce
/// (k8s.io/apiserver pkg/apis/cel `MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The detail of the cause that replaces the rules when the object is already invalid.
pub const NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Whether the structural problems in `errors` keep the rules from running, as on the real
/// server: a required, wrongly typed, unsupported, too long or too many value.
pub fn blocked_by(errors: &[FieldError]) -> bool {
    errors.iter().any(|e| {
        matches!(
            e.reason,
            "FieldValueRequired"
                | "FieldValueTypeInvalid"
                | "FieldValueNotSupported"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
        )
    })
}

/// The cause the real server reports in place of the rules' when [`blocked_by`] holds: an
/// `Invalid` error with no field and no value, printed `<nil>: Invalid value: "null": ...`.
pub fn not_checked() -> FieldError {
    FieldError::invalid("<nil>", format!("Invalid value: \"null\": {NOT_CHECKED}"))
}

/// The failed rules of `schema` for `obj` (a create when `old` is `None`, else an update).
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !has_rules(schema) {
        return errors;
    }
    BASE.with(|base| {
        let mut walker = Walker {
            base,
            errors: &mut errors,
            below: HashMap::new(),
        };
        let mut path = String::new();
        walker.node(schema, type_of(schema), obj, old, &mut path, true);
    });
    errors
}

thread_local! {
    /// The functions every rule may call; built once per thread (registering them is the
    /// costly part of a context).
    static BASE: Context<'static> = Context::default().with_all();
}

/// Whether a schema carries a rule anywhere.
pub fn has_rules(schema: &Value) -> bool {
    rules_below(schema).any
}

/// What rules a schema carries, at its root or below.
#[derive(Debug, Clone, Copy, Default)]
struct Below {
    any: bool,
    /// A transition rule (one that names `oldSelf`).
    transition: bool,
}

fn rules_below(schema: &Value) -> Below {
    let Value::Object(map) = schema else {
        return Below::default();
    };
    let mut below = Below::default();
    if let Some(Value::Array(rules)) = map.get("x-kubernetes-validations") {
        below.any |= !rules.is_empty();
        below.transition |= rules.iter().any(|rule| {
            let source = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
            compile(source)
                .as_ref()
                .as_ref()
                .is_ok_and(|c| c.uses_old_self)
        });
    }
    let properties = map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values());
    let all_of = map
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for child in properties
        .chain(all_of)
        .chain(map.get("additionalProperties"))
        .chain(map.get("items"))
    {
        let child = rules_below(child);
        below.any |= child.any;
        below.transition |= child.transition;
    }
    below
}

fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

fn is_embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
}

/// A parsed rule, and whether it is a transition rule.
struct Compiled {
    program: Program,
    uses_old_self: bool,
}

/// A rule parsed, or why it does not parse.
type Parsed = Arc<Result<Compiled, String>>;

/// Rules parsed once: every write of a custom object runs them again.
fn compile(source: &str) -> Parsed {
    static CACHE: Mutex<Vec<(String, Parsed)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().expect("rule cache");
    if let Some((_, compiled)) = cache.iter().find(|(s, _)| s == source) {
        return compiled.clone();
    }
    let compiled = Arc::new(
        Program::compile(source)
            .map(|program| {
                let uses_old_self = program.references().has_variable("oldSelf");
                Compiled {
                    program,
                    uses_old_self,
                }
            })
            .map_err(|e| e.to_string()),
    );
    // For the handful of rules the installed CRDs carry; it never grows large.
    if cache.len() >= 256 {
        cache.clear();
    }
    cache.push((source.to_string(), compiled.clone()));
    compiled
}

struct Walker<'b, 'e> {
    base: &'b Context<'static>,
    errors: &'e mut Vec<FieldError>,
    /// [`rules_below`] of each schema node met, by address: asked once per node, not per value.
    below: HashMap<*const Value, Below>,
}

impl Walker<'_, '_> {
    fn below(&mut self, schema: &Value) -> Below {
        *self
            .below
            .entry(schema as *const Value)
            .or_insert_with(|| rules_below(schema))
    }

    fn has_rules(&mut self, schema: &Value) -> bool {
        self.below(schema).any
    }

    /// Runs the rules of `schema` on `value` (typed `ty`), then those below it.
    fn node(
        &mut self,
        schema: &Value,
        ty: &str,
        value: &Value,
        old: Option<&Value>,
        path: &mut String,
        resource_root: bool,
    ) {
        if value.is_null() {
            return;
        }
        // An unchanged value fails no rule but a transition rule (the others are ratcheted, see
        // [`Walker::rule`]): a status write does not run the spec's rules again.
        if old == Some(value) && !self.below(schema).transition {
            return;
        }
        if let Some(Value::Array(rules)) = schema.get("x-kubernetes-validations") {
            let mut self_value = None;
            for rule in rules {
                self.rule(
                    rule,
                    schema,
                    ty,
                    value,
                    old,
                    path,
                    resource_root,
                    &mut self_value,
                );
            }
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for sub in all {
                if self.has_rules(sub) {
                    self.node(sub, ty, value, old, path, resource_root);
                }
            }
        }
        match value {
            Value::Object(map) => {
                let atomic =
                    schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
                for (key, child) in map {
                    let Some(Some(child_schema)) = property_schema(schema, key) else {
                        continue;
                    };
                    if !self.has_rules(child_schema) {
                        continue;
                    }
                    let old_child = if atomic {
                        None
                    } else {
                        old.and_then(|o| o.get(key))
                    };
                    let mark = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    self.node(
                        child_schema,
                        type_of(child_schema),
                        child,
                        old_child,
                        path,
                        is_embedded(child_schema),
                    );
                    path.truncate(mark);
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else {
                    return;
                };
                if !self.has_rules(item_schema) {
                    return;
                }
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|olds| correlated(schema, item, olds));
                    let mark = path.len();
                    let _ = write!(path, "[{i}]");
                    self.node(
                        item_schema,
                        type_of(item_schema),
                        item,
                        old_item,
                        path,
                        is_embedded(item_schema),
                    );
                    path.truncate(mark);
                }
            }
            _ => {}
        }
    }

    /// Runs one rule; a failure is added to the errors.
    #[allow(clippy::too_many_arguments)]
    fn rule(
        &mut self,
        rule: &Value,
        schema: &Value,
        ty: &str,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        resource_root: bool,
        self_value: &mut Option<Cel>,
    ) {
        let source = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
        let compiled = compile(source);
        let compiled = match compiled.as_ref() {
            Ok(compiled) => compiled,
            Err(problem) => {
                self.invalid(
                    path,
                    ty,
                    &format!("rule compile error: compilation failed: {problem}"),
                );
                return;
            }
        };
        if compiled.uses_old_self && old.is_none() {
            return;
        }
        let self_cel = self_value
            .get_or_insert_with(|| to_cel(value, schema, resource_root))
            .clone();
        let mut context = self.base.new_inner_scope();
        context.add_variable_from_value("self", self_cel);
        if compiled.uses_old_self
            && let Some(old) = old
        {
            context.add_variable_from_value("oldSelf", to_cel(old, schema, resource_root));
        }
        let shown_rule = rule_error_string(rule);
        match compiled.program.execute(&context) {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => {
                // An unchanged value keeps an update valid for a rule on the value alone.
                if !compiled.uses_old_self && old == Some(value) {
                    return;
                }
                let detail = message_of(rule, &context)
                    .unwrap_or_else(|| default_message(rule, &shown_rule));
                let suffix = rule
                    .get("fieldPath")
                    .and_then(Value::as_str)
                    .map(|f| normalized_field_path(schema, f).unwrap_or_else(|| f.to_string()));
                let at = field_of(path, suffix.as_deref());
                let reason = rule.get("reason").and_then(Value::as_str);
                self.errors.push(error_for_reason(&at, ty, &detail, reason));
            }
            Ok(_) => self.invalid(
                path,
                ty,
                &format!("cel expression must evaluate to a bool evaluating rule: {shown_rule}"),
            ),
            Err(error) => {
                let error = error.to_string();
                let detail = if error.starts_with("No such overload") {
                    format!(
                        "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {shown_rule}"
                    )
                } else {
                    format!("{error} evaluating rule: {shown_rule}")
                };
                self.invalid(path, ty, &detail);
            }
        }
    }

    fn invalid(&mut self, path: &str, ty: &str, detail: &str) {
        self.errors
            .push(error_for_reason(&field_of(path, None), ty, detail, None));
    }
}

/// The field a cause names: the node's path and the rule's `fieldPath`. The root has no path,
/// which Go's `field.Path` prints as `<nil>`.
fn field_of(path: &str, suffix: Option<&str>) -> String {
    let field = match suffix {
        Some(suffix) if path.is_empty() => suffix.trim_start_matches('.').to_string(),
        Some(suffix) => format!("{path}{suffix}"),
        None => path.to_string(),
    };
    if field.is_empty() {
        "<nil>".into()
    } else {
        field
    }
}

/// The old item of a `x-kubernetes-list-type: map` list with the same keys as `item`; other
/// lists do not correlate their items.
fn correlated<'o>(schema: &Value, item: &Value, olds: &'o [Value]) -> Option<&'o Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    olds.iter()
        .find(|old| keys.iter().all(|k| old.get(k) == item.get(k)))
}

/// `message`, trimmed, or `failed rule: <rule>` (`ruleMessageOrDefault`).
fn default_message(rule: &Value, shown_rule: &str) -> String {
    match rule.get("message").and_then(Value::as_str).map(str::trim) {
        Some(message) if !message.is_empty() => message.to_string(),
        _ => format!("failed rule: {shown_rule}"),
    }
}

/// The rule as errors name it: its message if it has one, else its expression
/// (`ruleErrorString`).
fn rule_error_string(rule: &Value) -> String {
    match rule.get("message").and_then(Value::as_str).map(str::trim) {
        Some(message) if !message.is_empty() => message.to_string(),
        _ => rule
            .get("rule")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// The rule's `messageExpression` evaluated, when it gives a usable message (a non-empty,
/// one-line string within the size limit); else the static message is used, as on the real
/// server (`evalMessageExpression`).
fn message_of(rule: &Value, context: &Context) -> Option<String> {
    let source = rule.get("messageExpression").and_then(Value::as_str)?;
    let compiled = compile(source);
    let Ok(compiled) = compiled.as_ref() else {
        return None;
    };
    match compiled.program.execute(context) {
        Ok(Cel::String(message)) => {
            let message = message.trim();
            (!message.is_empty() && !message.contains('\n') && message.len() <= MAX_MESSAGE_BYTES)
                .then(|| message.to_string())
        }
        _ => None,
    }
}

/// The cause for a failed rule by its `reason` (`fieldErrorForReason`): the value shown is the
/// node's schema type, as a Go `field.Error` prints a string.
fn error_for_reason(path: &str, ty: &str, detail: &str, reason: Option<&str>) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(path, format!("Forbidden: {detail}")),
        Some("FieldValueRequired") => FieldError {
            reason: "FieldValueRequired",
            field: path.to_string(),
            message: format!("Required value: {detail}"),
        },
        Some("FieldValueDuplicate") => FieldError::duplicate(path, &Value::from(ty)),
        _ => FieldError::invalid(path, format!("Invalid value: {ty:?}: {detail}")),
    }
}

/// A rule's `fieldPath` (`.a.b`, `['a.b']`) as the suffix of a field path, or `None` when it
/// does not name a field of `schema` (the real server's `ValidFieldPath`): a named property is
/// `.name`, a key of a map `[key]`.
fn normalized_field_path(schema: &Value, field_path: &str) -> Option<String> {
    let mut out = String::new();
    let mut schema = schema;
    let mut rest = field_path.trim();
    while !rest.is_empty() {
        let name = if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            rest = &after[end + 2..];
            &after[..end]
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            rest = &after[end..];
            &after[..end]
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if let Some(prop) = schema.get("properties").and_then(|p| p.get(name)) {
            let _ = write!(out, ".{name}");
            schema = prop;
        } else if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
            let _ = write!(out, "[{name}]");
            schema = additional;
        } else {
            return None;
        }
    }
    Some(out)
}

/// A JSON value as the CEL value a rule sees: integers as `int` (or `uint` beyond its range),
/// numbers of a `number` schema as `double`, objects as maps with string keys. At the root of a
/// resource only the name and generateName of its metadata are visible.
fn to_cel(value: &Value, schema: &Value, resource_root: bool) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            if type_of(schema) == "number" {
                Cel::Float(n.as_f64().unwrap_or_default())
            } else if let Some(i) = n.as_i64() {
                Cel::Int(i)
            } else if let Some(u) = n.as_u64() {
                Cel::UInt(u)
            } else {
                Cel::Float(n.as_f64().unwrap_or_default())
            }
        }
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.get("items").unwrap_or(&Value::Null);
            Cel::List(Arc::new(
                items
                    .iter()
                    .map(|item| to_cel(item, item_schema, is_embedded(item_schema)))
                    .collect(),
            ))
        }
        Value::Object(map) => {
            let mut out = HashMap::with_capacity(map.len());
            for (key, child) in map {
                let converted = if resource_root && key == "metadata" {
                    visible_metadata(child)
                } else {
                    let child_schema = match property_schema(schema, key) {
                        Some(Some(s)) => s,
                        _ => &Value::Null,
                    };
                    to_cel(child, child_schema, is_embedded(child_schema))
                };
                out.insert(Key::String(Arc::new(key.clone())), converted);
            }
            Cel::Map(CelMap { map: Arc::new(out) })
        }
    }
}

/// What a rule sees of a resource's metadata (`model.WithTypeAndObjectMeta`).
fn visible_metadata(metadata: &Value) -> Cel {
    let mut out = HashMap::new();
    for field in ["name", "generateName"] {
        if let Some(Value::String(s)) = metadata.get(field) {
            out.insert(
                Key::String(Arc::new(field.to_string())),
                Cel::String(Arc::new(s.clone())),
            );
        }
    }
    Cel::Map(CelMap { map: Arc::new(out) })
}

/// The problems of the rules in a CRD's schema at `path` (its `openAPIV3Schema`), as the real
/// server refuses them when the CRD is created or updated: one cause per bad rule.
pub fn check_crd_rules(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut path = path.to_string();
    check_node(schema, &mut path, &mut errors);
    errors
}

fn check_node(schema: &Value, path: &mut String, errors: &mut Vec<FieldError>) {
    if let Some(Value::Array(rules)) = schema.get("x-kubernetes-validations") {
        for (i, rule) in rules.iter().enumerate() {
            check_rule(
                schema,
                rule,
                &format!("{path}.x-kubernetes-validations[{i}]"),
                errors,
            );
        }
    }
    let mut child = |suffix: &str, sub: &Value, errors: &mut Vec<FieldError>| {
        let mark = path.len();
        path.push_str(suffix);
        check_node(sub, path, errors);
        path.truncate(mark);
    };
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, sub) in properties {
            child(&format!(".properties[{name}]"), sub, errors);
        }
    }
    if let Some(sub @ Value::Object(_)) = schema.get("additionalProperties") {
        child(".additionalProperties", sub, errors);
    }
    if let Some(sub @ Value::Object(_)) = schema.get("items") {
        child(".items", sub, errors);
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for (i, sub) in all.iter().enumerate() {
            child(&format!(".allOf[{i}]"), sub, errors);
        }
    }
}

fn check_rule(schema: &Value, rule: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let text = |field: &str| rule.get(field).and_then(Value::as_str);
    let source = text("rule").unwrap_or_default();
    let message = text("message").unwrap_or_default();
    let before = errors.len();
    if source.trim().is_empty() {
        errors.push(FieldError {
            reason: "FieldValueRequired",
            field: format!("{at}.rule"),
            message: "Required value: rule is not specified".into(),
        });
    } else if !message.is_empty() && message.trim().is_empty() {
        errors.push(FieldError::invalid(
            format!("{at}.message"),
            format!("Invalid value: {message:?}: must be non-empty if specified"),
        ));
    } else if message.trim().contains('\n') {
        errors.push(FieldError::invalid(
            format!("{at}.message"),
            format!("Invalid value: {message:?}: must not contain line breaks"),
        ));
    } else if source.trim().contains('\n') && message.trim().is_empty() {
        errors.push(FieldError {
            reason: "FieldValueRequired",
            field: format!("{at}.message"),
            message: "Required value: message must be specified if rule contains line breaks"
                .into(),
        });
    }
    if let Some(reason) = text("reason")
        && !REASONS.contains(&reason)
    {
        let mut supported = REASONS;
        supported.sort_unstable();
        let supported: Vec<String> = supported.iter().map(|r| format!("{r:?}")).collect();
        errors.push(FieldError::not_supported(
            format!("{at}.reason"),
            format!(
                "Unsupported value: {reason:?}: supported values: {}",
                supported.join(", ")
            ),
        ));
    }
    if let Some(field_path) = text("fieldPath")
        && normalized_field_path(schema, field_path).is_none()
    {
        errors.push(FieldError::invalid(
            format!("{at}.fieldPath"),
            format!("Invalid value: {field_path:?}: must be a valid path"),
        ));
    }
    // As on the real server, expressions are compiled only when the rule is otherwise sound.
    if errors.len() > before {
        return;
    }
    if let Err(problem) = compile(source).as_ref() {
        errors.push(FieldError::invalid(
            format!("{at}.rule"),
            format!(
                "Invalid value: {}: compilation failed: {problem}",
                go_rule(rule)
            ),
        ));
    }
    if let Some(expression) = text("messageExpression") {
        if expression.trim().is_empty() {
            errors.push(FieldError {
                reason: "FieldValueRequired",
                field: format!("{at}.messageExpression"),
                message: "Required value: messageExpression must be non-empty if specified".into(),
            });
        } else if let Err(problem) = compile(expression).as_ref() {
            errors.push(FieldError::invalid(
                format!("{at}.messageExpression"),
                format!(
                    "Invalid value: {}: messageExpression compilation failed: {problem}",
                    go_rule(rule)
                ),
            ));
        }
    }
}

/// The rule as Go's `%#v` prints the `apiextensions.ValidationRule` the real server shows as
/// the invalid value. (Go prints a set pointer as its address; the value is shown here instead.)
fn go_rule(rule: &Value) -> String {
    let text = |field: &str| rule.get(field).and_then(Value::as_str).unwrap_or_default();
    let reason = match rule.get("reason").and_then(Value::as_str) {
        Some(reason) => format!("(*apiextensions.FieldValueErrorReason)({reason:?})"),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".into(),
    };
    let optional = match rule.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".into(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{:?}, Message:{:?}, MessageExpression:{:?}, Reason:{reason}, FieldPath:{:?}, OptionalOldSelf:{optional}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        text("fieldPath"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "!has(self.min) || !has(self.max) || self.min <= self.max", "message": "min must not exceed max", "fieldPath": ".min"}
                    ],
                    "properties": {
                        "min": {"type": "integer"},
                        "max": {"type": "integer"},
                        "timeout": {"type": "integer", "x-kubernetes-validations": [
                            {"rule": "self != 0", "message": "must not be 0 (use -1 for unlimited)"}
                        ]},
                        "name": {"type": "string", "x-kubernetes-validations": [
                            {"rule": "self == oldSelf", "message": "is immutable", "reason": "FieldValueForbidden"}
                        ]},
                        "size": {"type": "integer", "x-kubernetes-validations": [
                            {"rule": "self < 10", "messageExpression": "'too big: ' + string(self)"}
                        ]},
                        "tags": {"type": "object", "additionalProperties": {"type": "string",
                            "x-kubernetes-validations": [{"rule": "self.size() <= 3"}]}},
                        "steps": {"type": "array",
                            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "timeout": {"type": "integer", "x-kubernetes-validations": [
                                    {"rule": "self != 0", "message": "must not be 0"}]}
                            }}}
                    }
                }
            }
        })
    }

    fn messages(obj: Value, old: Option<Value>) -> Vec<String> {
        validate(&schema(), &obj, old.as_ref())
            .into_iter()
            .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
            .collect()
    }

    #[test]
    fn a_failed_rule_is_a_cause_at_its_field_with_the_schema_type_as_value() {
        assert!(messages(json!({"spec": {"timeout": 5, "min": 1, "max": 2}}), None).is_empty());
        assert_eq!(
            messages(json!({"spec": {"timeout": 0}}), None),
            vec![
                "FieldValueInvalid spec.timeout: Invalid value: \"integer\": must not be 0 (use -1 for unlimited)"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"min": 3, "max": 2}}), None),
            vec!["FieldValueInvalid spec.min: Invalid value: \"object\": min must not exceed max"]
        );
        assert_eq!(
            messages(json!({"spec": {"size": 12}}), None),
            vec!["FieldValueInvalid spec.size: Invalid value: \"integer\": too big: 12"]
        );
        assert_eq!(
            messages(json!({"spec": {"tags": {"a": "long"}}}), None),
            vec![
                "FieldValueInvalid spec.tags.a: Invalid value: \"string\": failed rule: self.size() <= 3"
            ]
        );
        assert_eq!(
            messages(
                json!({"spec": {"steps": [{"name": "a", "timeout": 0}]}}),
                None
            ),
            vec![
                "FieldValueInvalid spec.steps[0].timeout: Invalid value: \"integer\": must not be 0"
            ]
        );
    }

    #[test]
    fn transition_rules_run_only_on_updates_with_a_correlated_old_value() {
        assert!(messages(json!({"spec": {"name": "a"}}), None).is_empty());
        assert!(
            messages(
                json!({"spec": {"name": "a"}}),
                Some(json!({"spec": {"name": "a"}}))
            )
            .is_empty()
        );
        assert_eq!(
            messages(
                json!({"spec": {"name": "b"}}),
                Some(json!({"spec": {"name": "a"}}))
            ),
            vec!["FieldValueForbidden spec.name: Forbidden: is immutable"]
        );
    }

    #[test]
    fn a_transition_rule_runs_on_an_unchanged_value() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self > oldSelf", "message": "must grow"}]}}});
        let old = json!({"n": 1, "other": 1});
        assert!(validate(&schema, &json!({"n": 2}), Some(&old)).is_empty());
        let unchanged = validate(&schema, &json!({"n": 1, "other": 2}), Some(&old));
        assert_eq!(unchanged.len(), 1, "{unchanged:?}");
        assert_eq!(
            unchanged[0].message,
            "Invalid value: \"integer\": must grow"
        );
    }

    #[test]
    fn an_unchanged_invalid_value_does_not_fail_an_update() {
        let old = json!({"spec": {"steps": [{"name": "a", "timeout": 0}], "timeout": 0}});
        let mut new = old.clone();
        new["spec"]["steps"]
            .as_array_mut()
            .unwrap()
            .insert(0, json!({"name": "b", "timeout": 0}));
        assert_eq!(
            messages(new, Some(old)),
            vec![
                "FieldValueInvalid spec.steps[0].timeout: Invalid value: \"integer\": must not be 0"
            ]
        );
    }

    #[test]
    fn evaluation_errors_name_the_rule() {
        let schema =
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.missing > 1"}]});
        let errors = validate(&schema, &json!({"a": 1}), None);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "<nil>");
        assert!(
            errors[0].message.starts_with(
                "Invalid value: \"object\": No such key: missing evaluating rule: self.missing > 1"
            ),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn the_root_sees_only_name_and_generate_name_of_its_metadata() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('ok') && !has(self.metadata.labels)"}]});
        let obj = |name: &str| json!({"metadata": {"name": name, "labels": {"a": "b"}}});
        assert!(validate(&schema, &obj("ok-1"), None).is_empty());
        assert_eq!(validate(&schema, &obj("bad"), None).len(), 1);
    }

    #[test]
    fn crd_rules_that_do_not_parse_or_are_malformed_are_refused() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"x": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.x =="},
            {"rule": "self.x > 0", "reason": "Nope"},
            {"rule": "self.x > 0", "fieldPath": ".y"},
            {"rule": "self.x > 0", "fieldPath": ".x", "reason": "FieldValueForbidden"},
            {"rule": ""}
        ]}}});
        let errors: Vec<String> =
            check_crd_rules(&schema, "spec.versions[0].schema.openAPIV3Schema")
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect();
        let at =
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert!(
            errors[0].starts_with(&format!(
                "{at}[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.x ==\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:1:"
            )),
            "{}",
            errors[0]
        );
        assert_eq!(
            errors[1],
            format!(
                "{at}[1].reason: Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            )
        );
        assert_eq!(
            errors[2],
            format!("{at}[2].fieldPath: Invalid value: \".y\": must be a valid path")
        );
        assert_eq!(
            errors[3],
            format!("{at}[4].rule: Required value: rule is not specified")
        );
    }
}
