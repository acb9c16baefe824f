//! Request bodies by media type, as the real API server negotiates them
//! (k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go,
//! NegotiateInputSerializerForMediaType): JSON and YAML for every resource, Kubernetes' protobuf
//! encoding for the built-in kinds, 415 Unsupported Media Type for anything else.
//!
//! kubectl's typed commands (`kubectl create namespace|configmap|secret|job|...`) send protobuf:
//! the 4 bytes `k8s\0`, then a `runtime.Unknown` message (k8s.io/apimachinery/pkg/runtime/
//! generated.proto: `typeMeta = 1 {apiVersion = 1, kind = 2}`, `raw = 2`, `contentEncoding = 3`,
//! `contentType = 4`) whose `raw` is the typed message, e.g. `k8s.io.api.core.v1.Namespace`
//! (k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go, Serializer.Decode). The body
//! is decoded into the JSON object the same object would have been sent as, so everything after
//! (admission, storage, responses) sees JSON as before. Responses stay JSON: kubectl asks for
//! `application/vnd.kubernetes.protobuf, */*`.
//!
//! The messages are a table generated from Kubernetes' `.proto` files and Go types
//! (`scripts/gen-protobuf-schema.py`, `protobuf/messages.rs`), walked by a small decoder: no
//! protoc and no build step.

mod json;
mod messages;
mod schema;
mod wire;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::api::error::{ApiError, Result};
use crate::api::resources::ResourceInfo;
use messages::MESSAGES;
use schema::Message;

/// `Content-Type` of Kubernetes' protobuf encoding.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The 4-byte prefix of every protobuf body: `k8s` and encoding 0, a `runtime.Unknown`
/// (protobuf.go, protoEncodingPrefix).
const MAGIC: &[u8] = b"k8s\x00";

/// How a request body is to be read.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyFormat {
    /// JSON, or YAML (a superset).
    Text,
    Protobuf,
}

/// The format of a create or update body with this `Content-Type`, or 415 for a media type the
/// server does not decode for this resource. Parameters (`; charset=utf-8`) do not matter, and
/// no `Content-Type` at all means JSON, the first supported type (negotiate.go).
pub fn body_format(content_type: Option<&str>, info: &ResourceInfo) -> Result<BodyFormat> {
    let media_type = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let protobuf = message_for_kind(&info.api_version(), &info.kind).is_some();
    match media_type.as_str() {
        "" | "application/json" | "application/yaml" => Ok(BodyFormat::Text),
        PROTOBUF if protobuf => Ok(BodyFormat::Protobuf),
        _ => Err(unsupported_media_type(protobuf)),
    }
}

/// 415 as the real server words it (negotiation/errors.go, errUnsupportedMediaType): the media
/// types the resource accepts. Custom resources are served as JSON and YAML only
/// (apiextensions-apiserver's codecs have no protobuf serializer). CBOR is in neither list: its
/// gate, CBORServingAndStorage, is alpha and off by default
/// (k8s.io/apiserver/pkg/features/kube_features.go).
fn unsupported_media_type(protobuf: bool) -> ApiError {
    let mut accepted = vec!["application/json", "application/yaml"];
    if protobuf {
        accepted.push(PROTOBUF);
    }
    ApiError {
        code: 415,
        reason: "UnsupportedMediaType",
        message: format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
        details: None,
    }
}

/// A protobuf body as the JSON object it encodes, with `apiVersion` and `kind` from its
/// `runtime.Unknown` wrapper, or from the resource where the wrapper leaves them empty
/// (protobuf.go Decode: copyKindDefaults).
pub fn decode(body: &[u8], info: &ResourceInfo) -> Result<Value> {
    let bad = |why: String| {
        ApiError::bad_request(format!("the request body could not be decoded: {why}"))
    };
    // protobuf.go Decode: the same three refusals, in its words.
    let data = match body.strip_prefix(MAGIC) {
        _ if body.is_empty() => return Err(bad("empty data".into())),
        None => {
            return Err(bad(format!(
                "provided data does not appear to be a protobuf message, expected prefix {:?}",
                MAGIC
            )));
        }
        Some([]) => return Err(bad("empty body".into())),
        Some(data) => data,
    };
    let unknown = Unknown::decode(data).map_err(bad)?;
    if !unknown.content_encoding.is_empty() {
        return Err(bad(format!(
            "unsupported content encoding {:?}",
            unknown.content_encoding
        )));
    }
    let api_version = unknown.api_version.unwrap_or_else(|| info.api_version());
    let kind = unknown.kind.unwrap_or_else(|| info.kind.clone());
    let message = message_for_kind(&api_version, &kind).ok_or_else(|| {
        // As runtime.NewNotRegisteredErrForKind begins its message.
        bad(format!(
            "no kind {kind:?} is registered for version {api_version:?}"
        ))
    })?;
    let mut object = json::message(message, &unknown.raw).map_err(bad)?;
    let mut out = serde_json::Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!(api_version));
    out.append(&mut object);
    Ok(Value::Object(out))
}

/// The `spec` of a `SelfSubjectAccessReview` or `SelfSubjectRulesReview` sent in protobuf (as
/// kubectl's `auth can-i` sends them), as JSON: their messages are not in the generated table
/// (the server stores no review), so their few string fields are read here, by the numbers of
/// k8s.io/api authorization/v1 generated.proto (`SelfSubjectAccessReview.spec = 2`,
/// `resourceAttributes = 1 {namespace, verb, group, version, resource, subresource, name = 1..7}`,
/// `nonResourceAttributes = 2 {path = 1, verb = 2}`; `SelfSubjectRulesReviewSpec.namespace = 1`).
/// Selectors in the attributes are left out.
///
/// # Errors
/// 400 for a body that is not a protobuf message.
pub fn review_spec(body: &[u8], kind: &str) -> Result<Value> {
    let bad = |why: String| {
        ApiError::bad_request(format!("the request body could not be decoded: {why}"))
    };
    let data = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("not a protobuf message".into()))?;
    let unknown = Unknown::decode(data).map_err(bad)?;
    let message = |bytes: &[u8]| -> std::result::Result<Vec<(u32, Vec<u8>)>, String> {
        let mut reader = wire::Reader::new(bytes);
        let mut fields = Vec::new();
        while let Some((number, value)) = reader.field()? {
            if let wire::WireValue::Bytes(b) = value {
                fields.push((number, b.to_vec()));
            }
        }
        Ok(fields)
    };
    let strings = |bytes: &[u8], names: &[&str]| -> std::result::Result<Value, String> {
        let mut object = serde_json::Map::new();
        for (number, value) in message(bytes)? {
            let name = usize::try_from(number)
                .ok()
                .and_then(|n| names.get(n.wrapping_sub(1)));
            if let Some(name) = name {
                let text = String::from_utf8_lossy(&value).into_owned();
                object.insert((*name).to_string(), json!(text));
            }
        }
        Ok(Value::Object(object))
    };
    let spec = (message(&unknown.raw).map_err(bad)?.into_iter())
        .find(|(number, _)| *number == 2)
        .map(|(_, bytes)| bytes)
        .unwrap_or_default();
    if kind == "SelfSubjectRulesReview" {
        return strings(&spec, &["namespace"]).map_err(bad);
    }
    let mut out = serde_json::Map::new();
    for (number, bytes) in message(&spec).map_err(bad)? {
        let (field, names): (&str, &[&str]) = match number {
            1 => (
                "resourceAttributes",
                &[
                    "namespace",
                    "verb",
                    "group",
                    "version",
                    "resource",
                    "subresource",
                    "name",
                ],
            ),
            2 => ("nonResourceAttributes", &["path", "verb"]),
            _ => continue,
        };
        out.insert(field.to_string(), strings(&bytes, names).map_err(bad)?);
    }
    Ok(Value::Object(out))
}

/// runtime.Unknown, the envelope of every protobuf body.
struct Unknown {
    api_version: Option<String>,
    kind: Option<String>,
    raw: Vec<u8>,
    content_encoding: String,
}

impl Unknown {
    fn decode(data: &[u8]) -> Result<Self, String> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut unknown = Unknown {
            api_version: None,
            kind: None,
            raw: Vec::new(),
            content_encoding: String::new(),
        };
        let mut reader = wire::Reader::new(data);
        while let Some((number, value)) = reader.field()? {
            let wire::WireValue::Bytes(bytes) = value else {
                continue;
            };
            match number {
                1 => {
                    let mut type_meta = wire::Reader::new(bytes);
                    while let Some((number, value)) = type_meta.field()? {
                        match (number, value) {
                            (1, wire::WireValue::Bytes(b)) if !b.is_empty() => {
                                unknown.api_version = Some(text(b));
                            }
                            (2, wire::WireValue::Bytes(b)) if !b.is_empty() => {
                                unknown.kind = Some(text(b));
                            }
                            _ => {}
                        }
                    }
                }
                2 => unknown.raw = bytes.to_vec(),
                3 => unknown.content_encoding = text(bytes),
                _ => {}
            }
        }
        Ok(unknown)
    }
}

/// The message named `name` (fully qualified, e.g. `k8s.io.api.core.v1.Namespace`).
fn message(name: &str) -> Option<&'static Message> {
    static INDEX: OnceLock<HashMap<&'static str, &'static Message>> = OnceLock::new();
    INDEX
        .get_or_init(|| MESSAGES.iter().map(|m| (m.name, m)).collect())
        .get(name)
        .copied()
}

/// The proto package of an API group version, as Kubernetes names them: the core group is
/// `k8s.io.api.core.v1`, `apps/v1` is `k8s.io.api.apps.v1`, `rbac.authorization.k8s.io/v1` is
/// `k8s.io.api.rbac.v1` (the group's first label).
fn message_for_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    let package = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    message(&format!("k8s.io.api.{package}.{version}.{kind}"))
}
