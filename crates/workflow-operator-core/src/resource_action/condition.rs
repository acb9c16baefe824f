//! A resource step's `successCondition` and `failureCondition`: Kubernetes' label selector
//! syntax (`labels.Parse` in k8s.io/apimachinery) with the object's field paths as keys, read
//! as Argo's executor reads them (gjson paths: `status.succeeded`, `status.conditions.0.type`).
//! Requirements are joined by `,`: a success condition holds when all of them do, a failure
//! condition when any one does (Argo checks each failure requirement alone).
//!
//! What a field path reads as text: a string as it is, a number or bool as JSON writes it,
//! `null` as empty, an object or list as JSON; a missing field does not exist (`!key` holds,
//! `key != v` and `notin` hold, every other operator does not).

use serde_json::Value;

/// The operators, as `labels.Parse` reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    /// `=` and `==`.
    Equals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

/// One requirement: a field path, an operator, its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed condition: its requirements, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Comma,
    Open,
    Close,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
}

/// The characters that end a word (`labels.Parse`'s special symbols).
const SPECIAL: &[char] = &['=', '!', '(', ')', ',', '>', '<'];

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if !SPECIAL.contains(&c) {
            let mut word = String::new();
            while let Some(&c) = chars
                .peek()
                .filter(|c| !c.is_whitespace() && !SPECIAL.contains(c))
            {
                word.push(c);
                chars.next();
            }
            tokens.push(Token::Word(word));
            continue;
        }
        chars.next();
        let then_equals = chars.next_if_eq(&'=').is_some();
        tokens.push(match (c, then_equals) {
            ('=', true) => Token::DoubleEquals,
            ('=', false) => Token::Equals,
            ('!', true) => Token::NotEquals,
            ('!', false) => Token::Not,
            ('(', _) => Token::Open,
            (')', _) => Token::Close,
            (',', _) => Token::Comma,
            ('>', _) => Token::Greater,
            _ => Token::Less,
        });
        // `(=`, `>=` and the like: the `=` was another token.
        if then_equals && !matches!(c, '=' | '!') {
            tokens.push(Token::Equals);
        }
    }
    tokens
}

impl Condition {
    /// Parses `text`.
    ///
    /// # Errors
    /// Why it is not a selector, naming the requirement.
    pub fn parse(text: &str) -> Result<Condition, String> {
        let tokens = tokenize(text);
        let mut parser = Parser { tokens, at: 0 };
        let mut requirements = Vec::new();
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => break,
                Some(Token::Comma) => {}
                Some(other) => return Err(format!("found {other:?}, expected ',' or the end")),
            }
        }
        Ok(Condition { requirements })
    }

    /// Whether every requirement holds of `object`.
    pub fn all_hold(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| r.holds(object))
    }

    /// The first requirement that holds of `object`.
    pub fn any_holds(&self, object: &Value) -> Option<&Requirement> {
        self.requirements.iter().find(|r| r.holds(object))
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = self.peek() == Some(&Token::Not);
        if negated {
            self.at += 1;
        }
        let key = match self.next() {
            Some(Token::Word(word)) if !["in", "notin"].contains(&word.as_str()) => word,
            other => return Err(format!("found {other:?}, expected a field path")),
        };
        check_key(&key)?;
        let requirement = |op, values| Requirement {
            key: key.clone(),
            op,
            values,
        };
        if negated {
            return Ok(requirement(Op::DoesNotExist, Vec::new()));
        }
        let op = match self.peek() {
            None | Some(Token::Comma) => return Ok(requirement(Op::Exists, Vec::new())),
            Some(Token::Word(word)) if word == "in" => Op::In,
            Some(Token::Word(word)) if word == "notin" => Op::NotIn,
            Some(Token::Equals | Token::DoubleEquals) => Op::Equals,
            Some(Token::NotEquals) => Op::NotEquals,
            Some(Token::Greater) => Op::GreaterThan,
            Some(Token::Less) => Op::LessThan,
            Some(other) => {
                return Err(format!(
                    "found {other:?} after {key:?}, expected an operator"
                ));
            }
        };
        self.at += 1;
        let values = match op {
            Op::In | Op::NotIn => self.set(&key)?,
            _ => vec![self.exact_value()?],
        };
        for value in &values {
            check_value(value)?;
        }
        if matches!(op, Op::GreaterThan | Op::LessThan) && values[0].parse::<i64>().is_err() {
            return Err(format!(
                "{key:?}: {:?} is not an integer (> and < compare integers)",
                values[0]
            ));
        }
        Ok(requirement(op, values))
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`: a word, or empty before `,` or the end.
    fn exact_value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Word(_)) => match self.next() {
                Some(Token::Word(word)) => Ok(word),
                _ => unreachable!("peeked a word"),
            },
            Some(other) => Err(format!("found {other:?}, expected a value")),
        }
    }

    /// `(v1, v2, ...)` after `in` or `notin`, not empty.
    fn set(&mut self, key: &str) -> Result<Vec<String>, String> {
        if self.next() != Some(Token::Open) {
            return Err(format!("{key:?}: in and notin take a list in parentheses"));
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Some(Token::Word(word)) => values.push(word),
                Some(Token::Close) if values.is_empty() => {
                    return Err(format!("{key:?}: the list of values is empty"));
                }
                other => return Err(format!("found {other:?}, expected a value")),
            }
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::Close) => return Ok(values),
                other => return Err(format!("found {other:?}, expected ',' or ')'")),
            }
        }
    }
}

/// A key as a label key may be: an optional prefix and `/`, then a name of at most 63
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
fn check_key(key: &str) -> Result<(), String> {
    let name = key.rsplit_once('/').map_or(key, |(_, name)| name);
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let ends = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if name.is_empty() || name.len() > 63 || !name.chars().all(plain) || !ends(name) {
        return Err(format!(
            "{key:?} is not a field path a selector takes (letters, digits, -, _ and ., \
             joined by .; at most 63 characters)"
        ));
    }
    Ok(())
}

/// A value as a label value may be: empty, or at most 63 letters, digits, `-`, `_` and `.`,
/// starting and ending with a letter or digit (a negative number too, for `>` and `<`).
fn check_value(value: &str) -> Result<(), String> {
    let number = value
        .strip_prefix('-')
        .is_some_and(|n| n.parse::<u64>().is_ok());
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let ends = value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if value.is_empty() || number || (value.len() <= 63 && value.chars().all(plain) && ends) {
        return Ok(());
    }
    Err(format!(
        "{value:?} is not a value a selector takes (letters, digits, -, _ and ., at most 63)"
    ))
}

impl Requirement {
    /// Whether it holds of `object`, as `labels.Requirement.Matches` over Argo's gjson reading.
    pub fn holds(&self, object: &Value) -> bool {
        let found = field_text(object, &self.key);
        let among = |text: &String| self.values.contains(text);
        match self.op {
            Op::Exists => found.is_some(),
            Op::DoesNotExist => found.is_none(),
            Op::Equals | Op::In => found.as_ref().is_some_and(among),
            Op::NotEquals | Op::NotIn => !found.as_ref().is_some_and(among),
            Op::GreaterThan | Op::LessThan => {
                let (Some(Ok(field)), Ok(value)) = (
                    found.map(|f| f.parse::<i64>()),
                    self.values[0].parse::<i64>(),
                ) else {
                    return false;
                };
                match self.op {
                    Op::GreaterThan => field > value,
                    _ => field < value,
                }
            }
        }
    }

    /// The field path it reads.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = &self.key;
        let values = self.values.join(", ");
        match self.op {
            Op::Exists => write!(f, "{key}"),
            Op::DoesNotExist => write!(f, "!{key}"),
            Op::Equals => write!(f, "{key} == {values}"),
            Op::NotEquals => write!(f, "{key} != {values}"),
            Op::In => write!(f, "{key} in ({values})"),
            Op::NotIn => write!(f, "{key} notin ({values})"),
            Op::GreaterThan => write!(f, "{key} > {values}"),
            Op::LessThan => write!(f, "{key} < {values}"),
        }
    }
}

/// The field at the dotted `path` of `object` as text (a number segment indexes a list), or
/// `None` when it does not exist.
pub fn field_text(object: &Value, path: &str) -> Option<String> {
    let mut at = object;
    for segment in path.split('.') {
        at = match at {
            Value::Object(map) => map.get(segment)?,
            Value::Array(list) => list.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(match at {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}
