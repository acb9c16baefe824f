//! A dag task's `depends` (Argo's enhanced depends logic, docs/enhanced-depends-logic.md in
//! argoproj/argo-workflows): tasks, each bare or with a result (`A.Succeeded`, `.Failed`,
//! `.Errored`, `.Skipped`, `.Omitted`, `.Daemoned`), joined by `&&`, `||`, `!` and parentheses.
//!
//! Here a task becomes a step with `dependsOn` every task named (it waits for all of them to
//! end, as Argo's does) and a `when` over their `steps["A"].status` that is the expression:
//! Argo runs the task when it holds and omits it otherwise, and a step whose `when` is false is
//! skipped. A bare `A` is `A.Succeeded || A.Skipped || A.Daemoned`. Argo's `Omitted` (a task
//! whose `depends` was false) reads `Skipped` here, so a task skipped by such a `when` is
//! `Omitted` to the tasks after it, and one with its own `when` besides cannot tell the two
//! apart: that is named. A daemon task (`daemon: true`) that was ready is `Succeeded` here, and
//! `.Daemoned` is its `steps["A"].daemoned`. `.AnySucceeded` and `.AllFailed` (of a task
//! that fans out) are named, not translated.
//!
//! Argo fails a dag only when a failure reaches its last tasks (an omitted task inherits its
//! parents' failure; one that ran, its own phase: `assessDAGPhase` in workflow/controller/
//! dag.go), so a task another depends on the failure of (`A.Failed`, `A.Errored`, `!A.Succeeded`)
//! does not fail the workflow by failing: it gets `continueOn: {failed: true}`, and each task
//! after it whose `depends` says nothing of its failure a `when` that it did not fail. Where
//! Argo would then still fail the workflow (a task after it needs its success, and is omitted
//! when it fails), here the workflow completes: that is named.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::walk::Report;

/// A `depends` expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A task, and the result named (`None` for a bare task).
    Task(String, Option<String>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// The results Argo names, and whether this module translates each.
const RESULTS: [(&str, bool); 8] = [
    ("Succeeded", true),
    ("Failed", true),
    ("Errored", true),
    ("Skipped", true),
    ("Omitted", true),
    ("Daemoned", true),
    ("AnySucceeded", false),
    ("AllFailed", false),
];

impl Expr {
    /// Parses `text`.
    ///
    /// # Errors
    /// Why it is not a `depends` expression, or names a result not translated.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut at = 0;
        let expr = or(&tokens, &mut at)?;
        match tokens.get(at) {
            None => Ok(expr),
            Some(token) => Err(format!("unexpected {token:?}")),
        }
    }

    /// The tasks it names, each once, in the order first named.
    pub fn tasks(&self) -> Vec<&str> {
        let mut found = Vec::new();
        self.visit(&mut |name, _, _| {
            if !found.contains(&name) {
                found.push(name);
            }
        });
        found
    }

    /// Whether it is tasks joined by `&&`, each bare: Argo's `dependencies`, which
    /// `dependsOn` is.
    pub fn is_plain(&self) -> bool {
        match self {
            Expr::Task(_, None) => true,
            Expr::And(a, b) => a.is_plain() && b.is_plain(),
            _ => false,
        }
    }

    /// Calls `f(task, result, negated)` for each task named.
    fn visit<'e>(&'e self, f: &mut dyn FnMut(&'e str, Option<&'e str>, bool)) {
        fn walk<'e>(e: &'e Expr, neg: bool, f: &mut dyn FnMut(&'e str, Option<&'e str>, bool)) {
            match e {
                Expr::Task(name, result) => f(name, result.as_deref(), neg),
                Expr::Not(inner) => walk(inner, !neg, f),
                Expr::And(a, b) | Expr::Or(a, b) => {
                    walk(a, neg, f);
                    walk(b, neg, f);
                }
            }
        }
        walk(self, false, f);
    }

    /// Whether it may hold when `task` failed: it names `task.Failed` or `task.Errored`, or
    /// negates its success.
    pub fn accepts_failure_of(&self, task: &str) -> bool {
        let mut accepts = false;
        self.visit(&mut |name, result, negated| {
            let failure = matches!(result, Some("Failed" | "Errored"));
            let success = matches!(result, None | Some("Succeeded"));
            accepts |= name == task && (failure && !negated || success && negated);
        });
        accepts
    }

    /// Its value when each task ended as `result_of` says (Argo's result names).
    fn holds(&self, result_of: &dyn Fn(&str) -> &'static str) -> bool {
        match self {
            Expr::Task(name, None) => matches!(result_of(name), "Succeeded" | "Skipped"),
            Expr::Task(name, Some(result)) => result_of(name) == result,
            Expr::Not(inner) => !inner.holds(result_of),
            Expr::And(a, b) => a.holds(result_of) && b.holds(result_of),
            Expr::Or(a, b) => a.holds(result_of) || b.holds(result_of),
        }
    }

    /// As CEL, each task's test written by `term` (`true` for one that holds whenever the
    /// step may start, left out).
    fn to_cel(&self, term: &mut dyn FnMut(&str, Option<&str>) -> String) -> String {
        match self {
            Expr::Task(name, result) => term(name, result.as_deref()),
            Expr::Not(inner) => match inner.to_cel(term).as_str() {
                "true" => "false".into(),
                cel => format!("!({cel})"),
            },
            Expr::And(a, b) => match (a.to_cel(term), b.to_cel(term)) {
                (t, other) | (other, t) if t == "true" => other,
                (a, b) => format!("({a} && {b})"),
            },
            Expr::Or(a, b) => match (a.to_cel(term), b.to_cel(term)) {
                (t, _) | (_, t) if t == "true" => t,
                (a, b) => format!("({a} || {b})"),
            },
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let len = if rest.starts_with("&&") || rest.starts_with("||") {
            2
        } else if rest.starts_with(['!', '(', ')']) {
            1
        } else {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                .unwrap_or(rest.len());
            if len == 0 {
                return Err(format!("{:?} is not an operator of depends", &rest[..1]));
            }
            len
        };
        tokens.push(rest[..len].to_string());
        rest = rest[len..].trim_start();
    }
    Ok(tokens)
}

fn or(tokens: &[String], at: &mut usize) -> Result<Expr, String> {
    let mut expr = and(tokens, at)?;
    while tokens.get(*at).is_some_and(|t| t == "||") {
        *at += 1;
        expr = Expr::Or(Box::new(expr), Box::new(and(tokens, at)?));
    }
    Ok(expr)
}

fn and(tokens: &[String], at: &mut usize) -> Result<Expr, String> {
    let mut expr = unary(tokens, at)?;
    while tokens.get(*at).is_some_and(|t| t == "&&") {
        *at += 1;
        expr = Expr::And(Box::new(expr), Box::new(unary(tokens, at)?));
    }
    Ok(expr)
}

fn unary(tokens: &[String], at: &mut usize) -> Result<Expr, String> {
    let token = tokens.get(*at).ok_or("an expression that ends early")?;
    *at += 1;
    match token.as_str() {
        "!" => Ok(Expr::Not(Box::new(unary(tokens, at)?))),
        "(" => {
            let inner = or(tokens, at)?;
            if tokens.get(*at).is_none_or(|t| t != ")") {
                return Err("a `(` without its `)`".into());
            }
            *at += 1;
            Ok(inner)
        }
        "&&" | "||" | ")" => Err(format!("{token:?} where a task belongs")),
        task => {
            let (name, result) = match task.split_once('.') {
                Some((name, result)) => (name, Some(result)),
                None => (task, None),
            };
            if let Some(result) = result {
                match RESULTS.iter().find(|(r, _)| *r == result) {
                    None => return Err(format!("{task:?}: {result:?} is not a task result")),
                    Some((_, false)) => {
                        return Err(format!(
                            "{task:?}: .{result} (of a task that fans out) is not supported yet"
                        ));
                    }
                    Some(_) => {}
                }
            }
            Ok(Expr::Task(name.to_string(), result.map(str::to_string)))
        }
    }
}

/// What is known of one task of a dag for its dependents.
struct Task {
    /// Its path, for what is named.
    at: String,
    /// Its `depends` (or `dependencies` as one), if any parses.
    depends: Option<Expr>,
    /// It has a `when` of its own.
    own_when: bool,
}

/// Gives each converted step of a dag (`steps`, from `tasks`, with their paths) the `when`
/// and `continueOn` its `depends` means, and those of the tasks after it.
pub fn apply(tasks: &[(String, Value)], steps: &mut [Value], report: &mut Report) {
    let known: BTreeMap<String, Task> = tasks
        .iter()
        .filter_map(|(at, task)| {
            let name = task.get("name")?.as_str()?.to_string();
            let depends = match (task.get("depends"), task.get("dependencies")) {
                (Some(Value::String(text)), _) => Expr::parse(text).ok(),
                (_, Some(Value::Array(list))) => plain(list),
                _ => None,
            };
            let own_when = task.get("when").is_some();
            Some((
                name,
                Task {
                    at: at.clone(),
                    depends,
                    own_when,
                },
            ))
        })
        .collect();
    let tolerated: BTreeSet<&str> = known
        .keys()
        .filter(|name| {
            (known.values()).any(|t| {
                t.depends
                    .as_ref()
                    .is_some_and(|d| d.accepts_failure_of(name))
            })
        })
        .map(String::as_str)
        .collect();
    let omittable = omittable(&known, &tolerated);
    let names = tasks
        .iter()
        .map(|(_, t)| t.get("name").and_then(Value::as_str));
    for (name, step) in names.zip(steps.iter_mut()) {
        let Some((name, task)) = name.and_then(|n| known.get_key_value(n)) else {
            continue;
        };
        if tolerated.contains(name.as_str()) {
            step["continueOn"] = json!({"failed": true});
            name_difference(name, &known, report);
        }
        let Some(depends) = task
            .depends
            .as_ref()
            .filter(|_| omittable.contains(name.as_str()))
        else {
            continue;
        };
        let ended = Ended {
            known: &known,
            tolerated: &tolerated,
            omittable: &omittable,
        };
        let mut term = |dep: &str, result: Option<&str>| ended.term(dep, result, &task.at, report);
        let cel = depends.to_cel(&mut term);
        let own = step.get("when").and_then(Value::as_str);
        let cel = match (cel.as_str(), own) {
            ("true", _) => continue,
            (_, Some(own)) => format!("{cel} && ({own})"),
            (_, None) => cel,
        };
        step["when"] = cel.into();
    }
}

/// `dependencies` as the expression it is.
fn plain(list: &[Value]) -> Option<Expr> {
    let mut names = list.iter().filter_map(Value::as_str);
    let first = Expr::Task(names.next()?.to_string(), None);
    Some(names.fold(first, |e, n| {
        Expr::And(Box::new(e), Box::new(Expr::Task(n.to_string(), None)))
    }))
}

/// The tasks that may be omitted, so get a `when`: a `depends` that is not plain, or one after
/// a task that may fail without failing the workflow or be omitted.
fn omittable<'k>(
    known: &'k BTreeMap<String, Task>,
    tolerated: &BTreeSet<&str>,
) -> BTreeSet<&'k str> {
    let mut found: BTreeSet<&str> = BTreeSet::new();
    loop {
        let before = found.len();
        for (name, task) in known {
            let Some(depends) = &task.depends else {
                continue;
            };
            let after = depends
                .tasks()
                .into_iter()
                .any(|d| tolerated.contains(d) || found.contains(d));
            if !depends.is_plain() || after {
                found.insert(name);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// How the tasks of a dag may end, for the `when`s of those after them.
struct Ended<'k> {
    known: &'k BTreeMap<String, Task>,
    /// Those that may fail without failing the workflow.
    tolerated: &'k BTreeSet<&'k str>,
    /// Those that may be omitted (skipped by a `when` their `depends` made).
    omittable: &'k BTreeSet<&'k str>,
}

impl Ended<'_> {
    /// The CEL of `dep.RESULT` (`result` none: bare) in the `depends` of the task at `at`.
    fn term(&self, dep: &str, result: Option<&str>, at: &str, report: &mut Report) -> String {
        let omitted = self.omittable.contains(dep);
        let own_when = self.known.get(dep).is_some_and(|t| t.own_when);
        // A task that cannot fail without failing the workflow, nor be omitted, has ended as
        // its bare form says once its dependents may start, and succeeded unless it has a when.
        let settled = !omitted && !self.tolerated.contains(dep);
        match result {
            None if settled => "true".into(),
            Some("Succeeded") if settled && !own_when => "true".into(),
            _ => term_cel(dep, result, (omitted, own_when), at, report),
        }
    }
}

/// The CEL of `dep.RESULT` (`result` none: bare) in the `depends` of the task at `at`, `dep`
/// maybe `omitted` and having its `own_when`.
fn term_cel(
    dep: &str,
    result: Option<&str>,
    (omitted, own_when): (bool, bool),
    at: &str,
    report: &mut Report,
) -> String {
    let status = |s: &str| format!("steps[{dep:?}].status == {s:?}");
    if omitted && own_when && !matches!(result, Some("Succeeded" | "Failed" | "Errored")) {
        report.not_converted(
            &format!("{at}.depends"),
            format!("{dep} has a when and a depends: when it is skipped, whether Argo would call it Skipped or Omitted is not known here (both read Skipped)"),
        );
    }
    match result {
        // Skipped by its depends is Argo's Omitted, not Skipped.
        None if omitted && !own_when => status("Succeeded"),
        None => format!("({} || {})", status("Succeeded"), status("Skipped")),
        Some("Errored") => status("Error"),
        Some("Skipped") if omitted && !own_when => "false".into(),
        Some("Omitted") if !omitted => "false".into(),
        Some("Omitted") => status("Skipped"),
        Some("Daemoned") => format!("steps[{dep:?}].daemoned"),
        Some(result) => status(result),
    }
}

/// Names where the workflow's outcome differs from Argo's: `name` fails without failing the
/// workflow here, but a task after it needs its success, which Argo omits, failing the dag.
fn name_difference(name: &str, known: &BTreeMap<String, Task>, report: &mut Report) {
    for (other, task) in known {
        let Some(depends) = &task.depends else {
            continue;
        };
        if !depends.tasks().contains(&name) {
            continue;
        }
        let failed = |t: &str| if t == name { "Failed" } else { "Succeeded" };
        if !depends.holds(&failed) {
            report.not_converted(
                &format!("{}.depends", task.at),
                format!("when {name} fails, Argo omits {other} and fails the workflow; here {name} may fail (another task depends on its failure), {other} is skipped and the workflow completes"),
            );
        }
    }
}
