//! An Argo `http` template's request as ours (`crd::http`), and its `successCondition`
//! (expr-lang) as CEL where the translation keeps its meaning: comparisons of
//! `response.statusCode`, `response.body`, `response.headers[...]` and `request.url`,
//! `.method` and `.body` with
//! strings, numbers and lists, expr's `contains`, `startsWith`, `endsWith`, `matches` and `in`,
//! joined by `&&`, `||`, `and`, `or`, `!`, `not` and parentheses. Anything else is named.

use serde_json::{Map, Value};

use super::table::Place;
use super::walk::{self, Report, int_or_string};

/// Converts a template's `http` at path `at`.
pub fn http(value: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Http,
        value,
        at,
        report,
        |field, value, path, out: &mut Map<String, Value>, report| match field {
            "timeoutSeconds" => {
                out.insert(field.into(), int_or_string(value));
            }
            _ => match value.as_str().map(success_condition) {
                Some(Ok(cel)) => {
                    out.insert(field.into(), cel.into());
                }
                Some(Err(why)) => report.not_converted(path, why),
                None => report.not_converted(path, "expected a string"),
            },
        },
    ))
}

/// The CEL of an Argo `successCondition`, or why it cannot be translated safely.
pub fn success_condition(argo: &str) -> Result<String, String> {
    let tokens = tokenize(argo).map_err(|why| untranslated(argo, &why))?;
    let mut parser = Parser { tokens, at: 0 };
    let cel = parser.or().map_err(|why| untranslated(argo, &why))?;
    match parser.tokens.get(parser.at) {
        None => Ok(cel),
        Some(token) => Err(untranslated(argo, &format!("unexpected {token:?}"))),
    }
}

fn untranslated(argo: &str, why: &str) -> String {
    format!(
        "successCondition {argo:?} is not translated to CEL ({why}): write it in CEL (response.statusCode, response.body, response.headers, request.url, request.method, request.body)"
    )
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A dotted name (`response.statusCode`), as written.
    Name(String),
    /// A string literal, its text.
    Text(String),
    Number(String),
    Op(&'static str),
}

const OPERATORS: [&str; 16] = [
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "[", "]", ",", "+", "-",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while let Some(c) = rest.chars().next() {
        let (token, len) = if c == '"' || c == '\'' {
            string(rest)?
        } else if let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            (Token::Op(op), op.len())
        } else if c.is_ascii_digit() {
            let len = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            (Token::Number(rest[..len].to_string()), len)
        } else if c.is_ascii_alphabetic() || c == '_' {
            let len = (rest.find(|c: char| !(c.is_ascii_alphanumeric() || "_.".contains(c))))
                .unwrap_or(rest.len());
            (Token::Name(rest[..len].to_string()), len)
        } else {
            return Err(format!("{c:?}"));
        };
        tokens.push(token);
        rest = rest[len..].trim_start();
    }
    Ok(tokens)
}

/// A string literal at the start of `rest` (Go's escapes `\"`, `\\`, `\n`, `\t`): its text and
/// length.
fn string(rest: &str) -> Result<(Token, usize), String> {
    let quote = rest.chars().next().unwrap_or('"');
    let mut text = String::new();
    let mut chars = rest.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('n') => text.push('\n'),
                Some('t') => text.push('\t'),
                Some(c @ ('"' | '\'' | '\\')) => text.push(c),
                other => return Err(format!("the escape \\{}", other.unwrap_or(' '))),
            },
            c if c == quote => return Ok((Token::Text(text), i + 1)),
            c => text.push(c),
        }
    }
    Err("a quote without its end".into())
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

/// expr's word operators, and CEL's method of each that is one.
const WORD_OPERATORS: [(&str, Option<&str>); 5] = [
    ("contains", Some("contains")),
    ("startsWith", Some("startsWith")),
    ("endsWith", Some("endsWith")),
    ("matches", Some("matches")),
    ("in", None),
];

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    /// Takes the operator `op`, or the word `op` (`and`, `not`, ...), if it is next.
    fn eat(&mut self, op: &str) -> bool {
        let next = match self.peek() {
            Some(Token::Op(o)) => *o == op,
            Some(Token::Name(word)) => word == op,
            _ => false,
        };
        self.at += usize::from(next);
        next
    }

    fn or(&mut self) -> Result<String, String> {
        let mut cel = self.and()?;
        while self.eat("||") || self.eat("or") {
            cel = format!("{cel} || {}", self.and()?);
        }
        Ok(cel)
    }

    fn and(&mut self) -> Result<String, String> {
        let mut cel = self.unary()?;
        while self.eat("&&") || self.eat("and") {
            cel = format!("{cel} && {}", self.unary()?);
        }
        Ok(cel)
    }

    fn unary(&mut self) -> Result<String, String> {
        if self.eat("!") || self.eat("not") {
            return Ok(format!("!{}", self.unary()?));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<String, String> {
        let left = self.operand()?;
        let word = match self.peek() {
            Some(Token::Op(op)) if ["==", "!=", "<", "<=", ">", ">="].contains(op) => {
                let op = *op;
                self.at += 1;
                return Ok(format!("{left} {op} {}", self.operand()?));
            }
            Some(Token::Name(word)) => word.clone(),
            _ => return Ok(left),
        };
        let Some((_, method)) = WORD_OPERATORS.iter().find(|(w, _)| *w == word) else {
            return Ok(left);
        };
        self.at += 1;
        let right = self.operand()?;
        Ok(match method {
            Some(method) => format!("{left}.{method}({right})"),
            None => format!("{left} in {right}"),
        })
    }

    fn operand(&mut self) -> Result<String, String> {
        let token = self.peek().cloned().ok_or("it ends early")?;
        self.at += 1;
        match token {
            Token::Op("(") => {
                let inner = self.or()?;
                self.expect(")")?;
                Ok(format!("({inner})"))
            }
            Token::Op("[") => self.list(),
            Token::Op("-") => match self.peek().cloned() {
                Some(Token::Number(n)) => {
                    self.at += 1;
                    Ok(format!("-{n}"))
                }
                _ => Err("a `-` that is not a number's sign".into()),
            },
            Token::Name(name) => self.name(&name),
            Token::Text(text) => Ok(quote(&text)),
            Token::Number(n) => Ok(n),
            Token::Op(op) => Err(format!("{op:?} where a value belongs")),
        }
    }

    /// A name: `true`, `false`, or a field of `response` or `request`, with its indexes.
    fn name(&mut self, name: &str) -> Result<String, String> {
        if ["true", "false"].contains(&name) {
            return Ok(name.to_string());
        }
        if self.peek() == Some(&Token::Op("(")) {
            return Err(format!("the function {name}()"));
        }
        let known = [
            "response.statusCode",
            "response.body",
            "response.headers",
            "request.url",
            "request.method",
            "request.body",
        ];
        if !known.contains(&name) {
            return Err(format!("{name} is not one of {}", known.join(", ")));
        }
        let mut cel = name.to_string();
        while self.eat("[") {
            let index = self.operand()?;
            self.expect("]")?;
            cel = format!("{cel}[{index}]");
        }
        Ok(cel)
    }

    fn list(&mut self) -> Result<String, String> {
        let mut items = Vec::new();
        if !self.eat("]") {
            loop {
                items.push(self.operand()?);
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(format!("[{}]", items.join(", ")))
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        match self.eat(op) {
            true => Ok(()),
            false => Err(format!("a missing {op:?}")),
        }
    }
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argo_s_common_conditions_are_written_in_cel() {
        let cel = |argo: &str| success_condition(argo).unwrap();
        assert_eq!(
            cel("response.statusCode == 201"),
            "response.statusCode == 201"
        );
        assert_eq!(
            cel(r#"response.body contains "google""#),
            r#"response.body.contains("google")"#
        );
        assert_eq!(
            cel(r#"response.headers["Server"][0] == "cloudflare""#),
            r#"response.headers["Server"][0] == "cloudflare""#
        );
        assert_eq!(
            cel(
                "response.statusCode >= 200 and response.statusCode < 300 or response.statusCode == 404"
            ),
            "response.statusCode >= 200 && response.statusCode < 300 || response.statusCode == 404"
        );
        assert_eq!(
            cel("not (response.statusCode in [500, 503]) && response.body startsWith 'ok'"),
            r#"!(response.statusCode in [500, 503]) && response.body.startsWith("ok")"#
        );
    }

    #[test]
    fn what_is_not_translated_is_named() {
        for (argo, why) in [
            ("len(response.body) > 0", "the function len()"),
            ("response.code == 200", "response.code is not one of"),
            ("response.statusCode % 2 == 0", "'%'"),
            ("response.body contains", "it ends early"),
            ("(response.statusCode == 200", "a missing \")\""),
        ] {
            let error = success_condition(argo).unwrap_err();
            assert!(error.contains(why), "{argo}: {error}");
            assert!(error.contains("write it in CEL"), "{error}");
        }
    }

    #[test]
    fn the_request_is_converted_field_by_field() {
        let mut report = Report::default();
        let argo = serde_json::json!({
            "url": "{{inputs.parameters.url}}",
            "method": "POST",
            "timeoutSeconds": "20",
            "headers": [{"name": "x-header-name", "value": "test-value"}],
            "body": "test body",
            "successCondition": "response.body contains \"google\"",
            "insecureSkipVerify": true,
            "bodyFrom": {"bytes": "aGk="},
        });
        let converted = http(&argo, "spec.templates[1].http", &mut report);
        assert_eq!(
            converted,
            serde_json::json!({
                "url": "{{inputs.parameters.url}}",
                "method": "POST",
                "timeoutSeconds": 20,
                "headers": [{"name": "x-header-name", "value": "test-value"}],
                "body": "test body",
                "successCondition": "response.body.contains(\"google\")",
                "insecureSkipVerify": true,
            })
        );
        let named: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            named,
            [
                "spec.templates[1].http.bodyFrom: bodyFrom (a body as bytes) is not supported yet: give the body as text (body)"
            ]
        );
    }
}
