//! S3 event notifications: the JSON S3 and MinIO send to a webhook target
//! (`{"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {"bucket": {"name"}, "object":
//! {"key", "size", "eTag", "sequencer"}}}]}`), read into one record per object, and written by
//! the embedded store of `dev`. Keys travel URL-encoded (`a+b%2Fc` is `a b/c`), as S3 sends
//! them.

use serde_json::{Value, json};

/// One record of a notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// `eventName`, e.g. `s3:ObjectCreated:Put`.
    pub event: String,
    /// The bucket.
    pub bucket: String,
    /// The object's key, decoded.
    pub key: String,
    /// `sequencer`: orders the events of one key; with the key, it tells deliveries apart.
    pub sequencer: String,
    /// The record as sent.
    pub raw: Value,
}

/// The records of a notification.
///
/// # Errors
/// A body without a `Records` list, or a record without its bucket and key.
pub fn records(body: &Value) -> Result<Vec<Record>, String> {
    let list = body
        .get("Records")
        .and_then(Value::as_array)
        .ok_or("not an S3 event notification: no Records list")?;
    list.iter()
        .enumerate()
        .map(|(i, raw)| {
            let s3 = &raw["s3"];
            let text = |v: &Value| v.as_str().map(str::to_string);
            let bucket = text(&s3["bucket"]["name"]).ok_or(format!("Records[{i}]: no bucket"))?;
            let key = text(&s3["object"]["key"]).ok_or(format!("Records[{i}]: no key"))?;
            Ok(Record {
                event: text(&raw["eventName"]).unwrap_or_default(),
                bucket,
                key: decode_key(&key),
                sequencer: text(&s3["object"]["sequencer"]).unwrap_or_default(),
                raw: raw.clone(),
            })
        })
        .collect()
}

/// The notification of one object put into `bucket` as S3 writes it; `sequencer` is a hex
/// string growing with each event of the key.
pub fn notification(bucket: &str, key: &str, size: u64, etag: &str, sequencer: &str) -> Value {
    json!({"Records": [{
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "s3:ObjectCreated:Put",
        "s3": {
            "s3SchemaVersion": "1.0",
            "bucket": {"name": bucket, "arn": format!("arn:aws:s3:::{bucket}")},
            "object": {"key": encode_key(key), "size": size, "eTag": etag, "sequencer": sequencer},
        },
    }]})
}

/// `key` as S3 writes it into a notification: form-encoded (space as `+`).
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A key as a notification carries it, decoded (`+` is a space, `%XX` a byte).
pub fn decode_key(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = || std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok();
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match hex().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(byte) => {
                    out.push(byte);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
