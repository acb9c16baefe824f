//! Making user strings safe in a page, written once: every string a user controls (names,
//! messages, outputs, logs, Events) reaches a page through [`escape`], in text and in quoted
//! attribute values alike, and a link through [`query_value`].

use std::borrow::Cow;
use std::fmt;

/// `text` safe inside an HTML or SVG text node and inside a double- or single-quoted attribute
/// value: `&`, `<`, `>`, `"` and `'` become character references, as OWASP's rule #1 and #2 ask
/// (<https://cheatsheetseries.owasp.org/cheatsheets/Cross_Site_Scripting_Prevention_Cheat_Sheet.html>).
/// Control characters other than tab, newline and carriage return, which XML 1.0 forbids in an
/// SVG document, become U+FFFD.
pub fn escape(text: &str) -> Cow<'_, str> {
    let needs = |c: char| matches!(c, '&' | '<' | '>' | '"' | '\'') || forbidden(c);
    if !text.contains(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if forbidden(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters XML 1.0 does not allow in a document (<https://www.w3.org/TR/xml/#charsets>).
fn forbidden(c: char) -> bool {
    (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r')
}

/// Formats as [`escape`] of the wrapped text: `format!("<td>{}</td>", Escaped(name))`.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape(self.0))
    }
}

/// `text` percent-encoded for a URL's path segment or query value: every byte but RFC 3986's
/// unreserved characters (`A-Z a-z 0-9 - . _ ~`) as `%XX` of its UTF-8. The result needs no
/// further HTML escaping.
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_references() {
        assert_eq!(
            escape(r#"<img src=x onerror=alert(1)> & "a" 'b'"#),
            "&lt;img src=x onerror=alert(1)&gt; &amp; &quot;a&quot; &#39;b&#39;"
        );
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(
            escape("step-1 ok é"),
            Cow::Borrowed("step-1 ok é")
        ));
    }

    #[test]
    fn control_characters_xml_forbids_are_replaced_but_line_breaks_kept() {
        assert_eq!(escape("a\u{1b}[31mb\tc\nd"), "a\u{FFFD}[31mb\tc\nd");
    }

    #[test]
    fn query_values_keep_only_unreserved_characters() {
        assert_eq!(
            query_value("run1/build[3] é&x=1"),
            "run1%2Fbuild%5B3%5D%20%C3%A9%26x%3D1"
        );
    }

    #[test]
    fn display_escapes() {
        assert_eq!(
            format!("<b>{}</b>", Escaped("</b><script>")),
            "<b>&lt;/b&gt;&lt;script&gt;</b>"
        );
    }
}
