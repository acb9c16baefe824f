//! Argo's `when` (govaluate over text with `{{...}}` filled in) as a CEL `when`, where the
//! translation keeps its meaning: comparisons of variables, bare words, quoted strings and
//! numbers, joined by `&&`, `||`, `!` and parentheses. Anything else is refused with why, so the
//! converter names it instead of guessing. A quoted variable (`'{{steps.a.startedAt}}'`) is the
//! variable: govaluate reads its value as text either way. A step's `startedAt` or `finishedAt`
//! (or the workflow's `scheduledTime` or `creationTimestamp`) ordered against another of them or
//! a quoted RFC 3339 time is compared as times, as govaluate compares two texts that read as
//! dates. Also Argo's `retryStrategy.expression` (expr-lang)
//! over `lastRetry.exitCode`.

use k8s_openapi::jiff::Timestamp;

/// The CEL of an Argo `when`, or why it cannot be translated safely.
pub fn to_cel(argo: &str) -> Result<String, String> {
    let tokens = tokenize(argo)?;
    let mut parser = Parser { tokens, at: 0 };
    let cel = parser.or()?;
    match parser.tokens.get(parser.at) {
        None => Ok(cel),
        Some(token) => Err(format!("unexpected {token:?}")),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// `{{...}}`, its inside.
    Var(String),
    /// `'...'` or `"..."`, its inside.
    Quoted(String),
    Number(String),
    /// A bare word, which govaluate reads as text once the variables are filled in.
    Word(String),
    Op(&'static str),
}

const OPERATORS: [&str; 13] = [
    "==", "!=", "<=", ">=", "=~", "!~", "&&", "||", "<", ">", "!", "(", ")",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    let mut spaced = true;
    while !rest.is_empty() {
        let (token, len) = if let Some(inner) = rest.strip_prefix("{{") {
            let end = inner.find("}}").ok_or("a `{{` without `}}`")?;
            (Token::Var(inner[..end].trim().to_string()), end + 4)
        } else if rest.starts_with('\'') || rest.starts_with('"') {
            let quote = rest.as_bytes()[0] as char;
            let end = rest[1..].find(quote).ok_or("a quote without its end")?;
            (Token::Quoted(rest[1..=end].to_string()), end + 2)
        } else if let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            (Token::Op(op), op.len())
        } else {
            let len = rest
                .find(|c: char| c.is_whitespace() || "=!<>&|()'\"{".contains(c))
                .unwrap_or(rest.len());
            if len == 0 {
                return Err(format!("{:?} is not an operator CEL has", &rest[..1]));
            }
            let word = &rest[..len];
            if word.parse::<f64>().is_ok() {
                (Token::Number(word.to_string()), len)
            } else {
                (Token::Word(word.to_string()), len)
            }
        };
        if matches!(
            (tokens.last(), &token),
            (
                Some(Token::Var(_) | Token::Word(_)),
                Token::Var(_) | Token::Word(_)
            )
        ) && !spaced
        {
            return Err("text joined to a variable is not translated".into());
        }
        tokens.push(token);
        let after = &rest[len..];
        rest = after.trim_start();
        spaced = rest.len() < after.len();
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

/// An operand of a comparison, as CEL.
#[derive(Debug)]
enum Operand {
    /// A string-valued variable; `status` when its values are Argo's node phases.
    Var {
        cel: String,
        status: Status,
    },
    /// A step's `startedAt` or `finishedAt`: RFC 3339 text, ordered as a time.
    Time(String),
    Text(String),
    /// A variable filled in as text before the condition is evaluated: a string literal.
    Filled(String),
    Number(String),
}

/// Whose phases a variable's values are, to write Argo's names as ours (a step's `status` is
/// read in Argo's names, so only the workflow's differ).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Status {
    None,
    Workflow,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Token::Op(o)) if *o == op) {
            self.at += 1;
            return true;
        }
        false
    }

    fn or(&mut self) -> Result<String, String> {
        let mut cel = self.and()?;
        while self.eat("||") {
            cel = format!("{cel} || {}", self.and()?);
        }
        Ok(cel)
    }

    fn and(&mut self) -> Result<String, String> {
        let mut cel = self.unary()?;
        while self.eat("&&") {
            cel = format!("{cel} && {}", self.unary()?);
        }
        Ok(cel)
    }

    fn unary(&mut self) -> Result<String, String> {
        if self.eat("!") {
            return Ok(format!("!{}", self.unary()?));
        }
        if self.eat("(") {
            let inner = self.or()?;
            if !self.eat(")") {
                return Err("a `(` without its `)`".into());
            }
            return Ok(format!("({inner})"));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<String, String> {
        let left = self.operand()?;
        let op = match self.peek() {
            Some(Token::Op(op)) if !["&&", "||", ")", "(", "!"].contains(op) => *op,
            _ => return alone(left),
        };
        self.at += 1;
        let right = self.operand()?;
        compare(left, op, right)
    }

    fn operand(&mut self) -> Result<Operand, String> {
        let token = self
            .peek()
            .cloned()
            .ok_or("an expression that ends early")?;
        self.at += 1;
        match token {
            Token::Var(name) => variable(&name),
            Token::Quoted(text) => match whole_variable(&text) {
                Some(name) => variable(name),
                None => Ok(Operand::Text(text)),
            },
            Token::Word(text) => Ok(Operand::Text(text)),
            Token::Number(number) => Ok(Operand::Number(number)),
            Token::Op(op) => Err(format!("{op:?} where a value belongs")),
        }
    }
}

/// The variable a quoted text is, when it is one `{{...}}` and nothing else.
fn whole_variable(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then_some(inner.trim())
}

/// A condition that is one operand: `true`, `false`, or a variable holding `true`.
fn alone(operand: Operand) -> Result<String, String> {
    match operand {
        Operand::Text(word) if word == "true" || word == "false" => Ok(word),
        Operand::Var { cel, .. } | Operand::Time(cel) => Ok(format!("{cel} == \"true\"")),
        Operand::Filled(text) => Ok(format!("{} == \"true\"", quote(&text))),
        other => Err(format!("{other:?} alone is not a condition")),
    }
}

fn compare(left: Operand, op: &str, right: Operand) -> Result<String, String> {
    match op {
        "==" | "!=" => {
            let status = [&left, &right]
                .iter()
                .find_map(|o| match o {
                    Operand::Var { status, .. } if *status != Status::None => Some(*status),
                    _ => None,
                })
                .unwrap_or(Status::None);
            Ok(format!(
                "{} {op} {}",
                as_text(left, status),
                as_text(right, status)
            ))
        }
        "<" | ">" | "<=" | ">="
            if [&left, &right]
                .iter()
                .any(|o| matches!(o, Operand::Time(_))) =>
        {
            Ok(format!("{} {op} {}", as_time(left)?, as_time(right)?))
        }
        "<" | ">" | "<=" | ">=" => Ok(format!("{} {op} {}", as_number(left)?, as_number(right)?)),
        "=~" | "!~" => {
            let (Operand::Text(pattern) | Operand::Filled(pattern)) = right else {
                return Err("a regular expression that is not a literal".into());
            };
            let not = if op == "!~" { "!" } else { "" };
            Ok(format!(
                "{not}{}.matches({})",
                as_text(left, Status::None),
                quote(&pattern)
            ))
        }
        _ => Err(format!("the operator {op:?}")),
    }
}

fn as_text(operand: Operand, status: Status) -> String {
    match operand {
        Operand::Var { cel, .. } | Operand::Time(cel) => cel,
        Operand::Text(text) | Operand::Number(text) => quote(&phase(&text, status)),
        Operand::Filled(text) => quote(&text),
    }
}

/// Argo's phase name as ours: a workflow's `Succeeded` is `Completed`, `Error` is `Failed`.
fn phase(text: &str, status: Status) -> String {
    match (status, text) {
        (Status::Workflow, "Succeeded") => "Completed".into(),
        (Status::Workflow, "Error") => "Failed".into(),
        _ => text.into(),
    }
}

fn as_number(operand: Operand) -> Result<String, String> {
    match operand {
        Operand::Var { cel, .. } => Ok(format!("double({cel})")),
        Operand::Number(n) if n.contains('.') => Ok(n),
        Operand::Number(n) => Ok(format!("{n}.0")),
        Operand::Filled(text) => Ok(format!("double({})", quote(&text))),
        Operand::Text(text) => Err(format!("{text:?} compared as a number")),
        Operand::Time(cel) => Err(format!("{cel} compared as a number")),
    }
}

/// An operand ordered against a step's time: another, or a constant RFC 3339 time.
fn as_time(operand: Operand) -> Result<String, String> {
    match operand {
        Operand::Time(cel) => Ok(format!("timestamp({cel})")),
        Operand::Text(text) if text.parse::<Timestamp>().is_ok() => {
            Ok(format!("timestamp({})", quote(&text)))
        }
        other => Err(format!(
            "{other:?} compared with a time (only an RFC 3339 time is)"
        )),
    }
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// A `{{...}}` variable as CEL: a step's outputs or phase, a workflow parameter or status; any
/// other variable is filled in as text before the condition is evaluated, so it is a string.
fn variable(name: &str) -> Result<Operand, String> {
    if name.starts_with('=') {
        return Err(format!("the expression {{{{{name}}}}}"));
    }
    let parts: Vec<&str> = name.split('.').collect();
    let var = |cel: String, status| -> Result<Operand, String> { Ok(Operand::Var { cel, status }) };
    match parts.as_slice() {
        ["steps" | "tasks", step, "outputs", "result"] => var(
            format!("steps[{}].outputs.result", quote(step)),
            Status::None,
        ),
        ["steps" | "tasks", step, "outputs", "parameters", key] => var(
            format!("steps[{}].outputs.parameters{}", quote(step), field(key)),
            Status::None,
        ),
        ["steps" | "tasks", step, "status"] => {
            var(format!("steps[{}].status", quote(step)), Status::None)
        }
        // An int in CEL, text in Argo's condition once filled: compared as text, or as a number
        // through `double(...)`.
        ["steps" | "tasks", step, "exitCode"] => var(
            format!("string(steps[{}].exitCode)", quote(step)),
            Status::None,
        ),
        [
            "steps" | "tasks",
            step,
            field @ ("startedAt" | "finishedAt"),
        ] => Ok(Operand::Time(format!("steps[{}].{field}", quote(step)))),
        ["steps" | "tasks", ..] => Err(format!("{{{{{name}}}}} in a condition")),
        ["workflow", "parameters", key] => {
            var(format!("workflow.parameters{}", field(key)), Status::None)
        }
        ["workflow", "status"] => var("workflow.status".into(), Status::Workflow),
        // The failed steps as Argo's JSON text, `null` when none: compared as text.
        ["workflow", "failures"] => var("workflow.failures".into(), Status::None),
        // A double in CEL, text in Argo's condition once filled, as a step's `exitCode`.
        ["workflow", "duration"] => var("string(workflow.duration)".into(), Status::None),
        // RFC 3339 text filled in before the condition is evaluated, ordered as a time.
        ["workflow", "scheduledTime" | "creationTimestamp"] => {
            Ok(Operand::Time(quote(&format!("{{{{{name}}}}}"))))
        }
        _ => Ok(Operand::Filled(format!("{{{{{name}}}}}"))),
    }
}

/// `.key` when `key` is a CEL identifier, else `["key"]`.
fn field(key: &str) -> String {
    let identifier = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        format!(".{key}")
    } else {
        format!("[{}]", quote(key))
    }
}

/// Argo's `retryStrategy.expression` (expr-lang) as CEL, where it reads only
/// `lastRetry.exitCode` and `lastRetry.message`.
pub fn retry_expression(argo: &str) -> Result<String, String> {
    let cel = argo
        .replace("asInt(lastRetry.exitCode)", "lastRetry.exitCode")
        .replace(" and ", " && ")
        .replace(" or ", " || ");
    let reads_other = cel.match_indices("lastRetry.").any(|(i, _)| {
        let rest = &cel[i + "lastRetry.".len()..];
        !(rest.starts_with("exitCode") || rest.starts_with("message"))
    });
    if reads_other || cel.contains("not ") || cel.contains(" in ") {
        return Err(format!(
            "retryStrategy.expression {argo:?} reads what is not translated (only lastRetry.exitCode and lastRetry.message are)"
        ));
    }
    Ok(cel)
}
