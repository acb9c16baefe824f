//! A resource quantity's value, as k8s.io/apimachinery `pkg/api/resource` parses one
//! (`ParseQuantity`: a signed decimal number, then a binary suffix `Ki`..`Ei`, a decimal suffix
//! `n`..`E`, or an exponent `e3`/`E3`). Read as an `f64`: enough for counting requests and for
//! telling a quantity from text that is none, not for Kubernetes' exact canonical form.
//!
//! ```
//! assert_eq!(kube_schema_check::quantity::value("1500m"), Some(1.5));
//! assert_eq!(kube_schema_check::quantity::value("2Gi"), Some(2.0 * 1024f64.powi(3)));
//! assert_eq!(kube_schema_check::quantity::value("two"), None);
//! ```

/// `text`'s value, or `None` when it is not a quantity.
pub fn value(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent => 10f64.powi(exponent.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(number * factor)
}
