//! `withSequence.format`: each number of a sequence written as Argo writes it, with a Go
//! `fmt.Sprintf` format of one verb (`"%02d"`, `"2020-05-%02X"`, `"node-%d"`). The verbs a
//! number takes are known: `d` (and `v`, `s`), `x`, `X`, `o`, `b`, with the flags `0` (pad
//! with zeros) and `-` (pad on the right) and a width; `%%` is a `%`.

/// `number` written with `format`.
///
/// # Errors
/// A format with no verb, more than one, or a verb a number does not take, naming it.
pub fn apply(format: &str, number: i64) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut verbs = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let (mut zero, mut left, mut width) = (false, false, 0usize);
        while let Some(&flag) = chars.peek() {
            match flag {
                '0' if width == 0 => zero = true,
                '-' => left = true,
                '0'..='9' => width = width * 10 + flag.to_digit(10).unwrap_or(0) as usize,
                _ => break,
            }
            chars.next();
        }
        let verb = chars.next();
        let digits = match verb {
            Some('d' | 'v' | 's') => number.unsigned_abs().to_string(),
            Some('x') => format!("{:x}", number.unsigned_abs()),
            Some('X') => format!("{:X}", number.unsigned_abs()),
            Some('o') => format!("{:o}", number.unsigned_abs()),
            Some('b') => format!("{:b}", number.unsigned_abs()),
            other => {
                return Err(format!(
                    "withSequence.format {format:?}: %{} is not a verb a number takes (d, x, X, o, b)",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        };
        verbs += 1;
        out.push_str(&pad(number < 0, &digits, width, zero && !left, left));
    }
    match verbs {
        1 => Ok(out),
        _ => Err(format!(
            "withSequence.format {format:?}: needs exactly one verb for the number, as %d"
        )),
    }
}

/// `digits` (with a `-` when `negative`) padded to `width`: zeros after the sign, spaces
/// before it, or spaces after it when `left`.
fn pad(negative: bool, digits: &str, width: usize, zeros: bool, left: bool) -> String {
    let sign = if negative { "-" } else { "" };
    let len = sign.len() + digits.len();
    let fill = width.saturating_sub(len);
    if zeros {
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else if left {
        format!("{sign}{digits}{}", " ".repeat(fill))
    } else {
        format!("{}{sign}{digits}", " ".repeat(fill))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_written_as_go_s_sprintf_writes_it() {
        assert_eq!(apply("%02d", 7).unwrap(), "07");
        assert_eq!(apply("2020-05-%02d", 3).unwrap(), "2020-05-03");
        assert_eq!(apply("node-%d", -4).unwrap(), "node--4");
        assert_eq!(apply("%04d", -4).unwrap(), "-004");
        assert_eq!(
            apply("%x|%3d|%-3d|", 255).unwrap_err(),
            "withSequence.format \"%x|%3d|%-3d|\": needs exactly one verb for the number, as %d"
        );
        assert_eq!(apply("[%3d]", 5).unwrap(), "[  5]");
        assert_eq!(apply("[%-3d]", 5).unwrap(), "[5  ]");
        assert_eq!(apply("%X", 255).unwrap(), "FF");
        assert_eq!(apply("100%% %d", 1).unwrap(), "100% 1");
        assert!(apply("%f", 1).unwrap_err().contains("%f is not a verb"));
        assert!(apply("plain", 1).unwrap_err().contains("exactly one verb"));
    }
}
