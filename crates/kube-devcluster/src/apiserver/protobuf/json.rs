//! A decoded protobuf message rendered as the JSON the real API server's Go types would marshal
//! to: the server decodes a protobuf body into its Go struct (gogo-generated `Unmarshal`), and
//! that struct's JSON is what a JSON body of the same object gives. So for each field:
//!
//! - a field on the wire is rendered, except a zero scalar of a plain (non-pointer) Go field with
//!   `omitempty`: gogo writes plain fields even when zero (`generateName: ""`), and Go's JSON
//!   omits them; a pointer set to zero (`replicas: 0`) is kept;
//! - a field not on the wire is its Go zero value: omitted under `omitempty` for scalars, lists,
//!   maps and pointers, `null` for a list, map or pointer without it, `{...}` of the zero struct
//!   for a plain struct (omitempty never omits structs), which is why `kubectl create` objects
//!   carry `spec: {}` and `status: {}`; `omitzero` (Go 1.24) omits a zero value of any type,
//!   so a pod template's zero `creationTimestamp` is left out rather than `null`;
//! - Time is RFC 3339 (meta/v1 time.go MarshalJSON), `null` when zero (an empty message on the
//!   wire, time_proto.go); Quantity and IntOrString are their string or number; bytes are
//!   base64 (encoding/json's rule for `[]byte`); embedded (`json:",inline"`) structs merge into
//!   their parent.
//!
//! Fields this table does not know are skipped, as gogo's generated `Unmarshal` skips them
//! (`skipGenerated`).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::schema::{Field, Label, Message, Type};
use super::wire::{Reader, WireValue};

/// The JSON object of `bytes`, a message of type `message`.
pub(super) fn message(message: &Message, bytes: &[u8]) -> Result<Map<String, Value>, String> {
    // Every occurrence of each field, in wire order.
    let mut seen: Vec<Vec<WireValue>> = vec![Vec::new(); message.fields.len()];
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        if let Ok(i) = message.fields.binary_search_by_key(&number, |f| f.number) {
            seen[i].push(value);
        }
    }
    let mut out = Map::new();
    for (field, values) in message.fields.iter().zip(seen) {
        let rendered = match field.label {
            Label::Single => single(message, field, &values)?,
            Label::Repeated => repeated(message, field, &values)?,
            Label::Map(key) => map(message, field, key, &values)?,
        };
        match rendered {
            Some(Value::Object(inner)) if field.inline => out.extend(inner),
            Some(value) => {
                out.insert(field.name.to_string(), value);
            }
            None => {}
        }
    }
    Ok(out)
}

fn single(message: &Message, field: &Field, values: &[WireValue]) -> Result<Option<Value>, String> {
    let Some(last) = values.last() else {
        return Ok(if field.omitzero { None } else { absent(field) });
    };
    if let Some(name) = message_name(field.ty) {
        // A message that occurs more than once is merged, as protobuf does: decoding the
        // concatenation of its occurrences is exactly that.
        let bytes = concat(message, field, values)?;
        if field.omitzero && !field.pointer && bytes.is_empty() {
            return Ok(None);
        }
        return Ok(Some(Value::Object(self::message(lookup(name)?, &bytes)?)));
    }
    let value = scalar(message, field, field.ty, *last)?;
    let zero = is_zero(&value);
    // omitempty omits zero scalars, never structs (Time, Quantity, ...); omitzero omits both
    // (a zero Time is `null` here). Neither omits a pointer that is set.
    if zero && !field.pointer && (field.omitzero || (field.omitempty && !is_struct(field.ty))) {
        return Ok(None);
    }
    Ok(Some(value))
}

/// The JSON of a field that is not on the wire: its Go zero value.
fn absent(field: &Field) -> Option<Value> {
    if field.pointer {
        return (!field.omitempty).then_some(Value::Null);
    }
    match field.ty {
        Type::Msg(name) => Some(Value::Object(
            message(lookup(name).ok()?, &[]).unwrap_or_default(),
        )),
        Type::Time | Type::MicroTime | Type::RawJson => Some(Value::Null),
        Type::Quantity => Some(json!("0")),
        Type::IntOrString => Some(json!(0)),
        // A nil []byte: omitted, or null.
        Type::Bytes => (!field.omitempty).then_some(Value::Null),
        _ if field.omitempty => None,
        Type::Str => Some(json!("")),
        Type::Bool => Some(json!(false)),
        _ => Some(json!(0)),
    }
}

fn repeated(
    message: &Message,
    field: &Field,
    values: &[WireValue],
) -> Result<Option<Value>, String> {
    if values.is_empty() {
        // A nil slice: gogo writes nothing for an empty one either.
        return Ok((!field.omitempty).then_some(Value::Null));
    }
    let mut items = Vec::new();
    for value in values {
        match (value, packable(field.ty)) {
            // proto3-style packed scalars: one length-delimited run of values.
            (WireValue::Bytes(run), true) => {
                let mut reader = Reader::new(run);
                while !reader.is_empty() {
                    let element = WireValue::Varint(reader.varint()?);
                    items.push(element_value(message, field, element)?);
                }
            }
            _ => items.push(element_value(message, field, *value)?),
        }
    }
    Ok(Some(Value::Array(items)))
}

fn map(
    message: &Message,
    field: &Field,
    key_type: Type,
    values: &[WireValue],
) -> Result<Option<Value>, String> {
    if values.is_empty() {
        return Ok((!field.omitempty).then_some(Value::Null));
    }
    let mut out = Map::new();
    for value in values {
        let WireValue::Bytes(entry) = value else {
            return Err(wrong_wire_type(message, field));
        };
        let (mut key, mut item) = (None, None);
        let mut reader = Reader::new(entry);
        while let Some((number, value)) = reader.field()? {
            match number {
                1 => key = Some(scalar(message, field, key_type, value)?),
                2 => item = Some(element_value(message, field, value)?),
                _ => {}
            }
        }
        let key = match key {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        // An entry without a value holds the value type's zero (gogo's Unmarshal starts each
        // entry from it): "" for strings and bytes, the empty message.
        let item = match item {
            Some(item) => item,
            None => element_value(message, field, WireValue::Bytes(&[]))?,
        };
        out.insert(key, item);
    }
    Ok(Some(Value::Object(out)))
}

/// One element of a repeated field or one map value: rendered whatever its value, zero or not.
fn element_value(message: &Message, field: &Field, value: WireValue) -> Result<Value, String> {
    if let Some(name) = message_name(field.ty) {
        let WireValue::Bytes(bytes) = value else {
            return Err(wrong_wire_type(message, field));
        };
        return Ok(Value::Object(self::message(lookup(name)?, bytes)?));
    }
    scalar(message, field, field.ty, value)
}

fn scalar(message: &Message, field: &Field, ty: Type, value: WireValue) -> Result<Value, String> {
    let wrong = || wrong_wire_type(message, field);
    Ok(match (ty, value) {
        (Type::Str, WireValue::Bytes(b)) => json!(String::from_utf8_lossy(b)),
        (Type::Bytes, WireValue::Bytes(b)) => {
            json!(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Type::Bool, WireValue::Varint(v)) => json!(v != 0),
        // Negative int32 values are sign-extended to 64 bits on the wire.
        (Type::I32, WireValue::Varint(v)) => json!(v as i32),
        (Type::I64, WireValue::Varint(v)) => json!(v as i64),
        (Type::Time, WireValue::Bytes(b)) => time(b, false)?,
        (Type::MicroTime, WireValue::Bytes(b)) => time(b, true)?,
        (Type::Quantity, WireValue::Bytes(b)) => quantity(b)?,
        (Type::IntOrString, WireValue::Bytes(b)) => int_or_string(b)?,
        (Type::RawJson, WireValue::Bytes(b)) => raw_json(b)?,
        _ => return Err(wrong()),
    })
}

/// meta/v1 Time and MicroTime: `Timestamp {seconds = 1, nanos = 2}`. A zero time is sent as an
/// empty message (time_proto.go Marshal) and is `null` in JSON (time.go MarshalJSON). Time has
/// seconds only: its Unmarshal drops nanos; its JSON is RFC 3339 in UTC. MicroTime's JSON is
/// RFC 3339 with six fractional digits (micro_time.go, RFC3339Micro).
fn time(bytes: &[u8], micro: bool) -> Result<Value, String> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let (mut seconds, mut nanos) = (0i64, 0u32);
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, WireValue::Varint(v)) => seconds = v as i64,
            (2, WireValue::Varint(v)) => nanos = v as u32,
            _ => {}
        }
    }
    if !micro {
        nanos = 0;
    }
    let at = chrono::DateTime::from_timestamp(seconds, nanos)
        .ok_or_else(|| format!("time out of range: {seconds}s"))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(json!(at.format(format).to_string()))
}

/// resource.Quantity: `{string = 1}`, its string as it was sent.
fn quantity(bytes: &[u8]) -> Result<Value, String> {
    let mut text = String::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        if let (1, WireValue::Bytes(b)) = (number, value) {
            text = String::from_utf8_lossy(b).into_owned();
        }
    }
    // The zero Quantity marshals as "0" (quantity.go MarshalJSON).
    Ok(json!(if text.is_empty() { "0".into() } else { text }))
}

/// intstr.IntOrString: `{type = 1, intVal = 2, strVal = 3}`; type 1 is a string.
fn int_or_string(bytes: &[u8]) -> Result<Value, String> {
    let (mut kind, mut int, mut string) = (0u64, 0i32, String::new());
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        match (number, value) {
            (1, WireValue::Varint(v)) => kind = v,
            (2, WireValue::Varint(v)) => int = v as i32,
            (3, WireValue::Bytes(b)) => string = String::from_utf8_lossy(b).into_owned(),
            _ => {}
        }
    }
    Ok(if kind == 1 { json!(string) } else { json!(int) })
}

/// runtime.RawExtension and meta/v1 FieldsV1: `{raw = 1}`, JSON bytes (`null` when absent).
fn raw_json(bytes: &[u8]) -> Result<Value, String> {
    let mut raw: Option<&[u8]> = None;
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.field()? {
        if let (1, WireValue::Bytes(b)) = (number, value) {
            raw = Some(b);
        }
    }
    match raw {
        None => Ok(Value::Null),
        Some(raw) => serde_json::from_slice(raw).map_err(|e| format!("embedded JSON: {e}")),
    }
}

fn message_name(ty: Type) -> Option<&'static str> {
    match ty {
        Type::Msg(name) => Some(name),
        _ => None,
    }
}

/// Types that Go marshals as structs, which omitempty never omits.
fn is_struct(ty: Type) -> bool {
    matches!(
        ty,
        Type::Time | Type::MicroTime | Type::Quantity | Type::IntOrString | Type::RawJson
    )
}

fn packable(ty: Type) -> bool {
    matches!(ty, Type::Bool | Type::I32 | Type::I64)
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        _ => false,
    }
}

fn concat(message: &Message, field: &Field, values: &[WireValue]) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    for value in values {
        let WireValue::Bytes(b) = value else {
            return Err(wrong_wire_type(message, field));
        };
        bytes.extend_from_slice(b);
    }
    Ok(bytes)
}

fn lookup(name: &str) -> Result<&'static Message, String> {
    super::message(name).ok_or_else(|| format!("no protobuf message {name} is known"))
}

fn wrong_wire_type(message: &Message, field: &Field) -> String {
    format!(
        "field {} ({}) of {} has the wrong wire type",
        field.number, field.name, message.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(n: u8, v: u64) -> Vec<u8> {
        let mut out = vec![n << 3];
        let mut v = v;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes(n: u8, b: &[u8]) -> Vec<u8> {
        let mut out = vec![n << 3 | 2, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    fn decode(name: &str, wire: &[u8]) -> Value {
        Value::Object(message(super::super::message(name).unwrap(), wire).unwrap())
    }

    #[test]
    fn a_set_pointer_keeps_its_zero_and_a_plain_zero_field_is_omitted() {
        // DeploymentSpec: replicas (*int32) = 0, minReadySeconds (int32, omitempty) = 0,
        // paused (bool, omitempty) = false; template (plain struct) and strategy absent.
        let wire = [varint(1, 0), varint(5, 0), varint(7, 0)].concat();
        let spec = decode("k8s.io.api.apps.v1.DeploymentSpec", &wire);
        assert_eq!(spec["replicas"], 0);
        assert!(spec.get("minReadySeconds").is_none(), "{spec}");
        assert!(spec.get("paused").is_none(), "{spec}");
        // Plain structs are never omitted; a nil pointer is, under omitempty
        // (revisionHistoryLimit), else it is null (selector is `json:"selector"`).
        assert_eq!(spec["strategy"], json!({}));
        assert_eq!(spec["template"]["spec"]["containers"], Value::Null);
        assert!(spec.get("revisionHistoryLimit").is_none(), "{spec}");
        assert_eq!(spec["selector"], Value::Null);
    }

    #[test]
    fn fields_without_omitempty_are_rendered_even_when_empty() {
        // PolicyRule.verbs is `json:"verbs"`: a nil slice is null. RoleRef's strings are "".
        let rule = decode("k8s.io.api.rbac.v1.PolicyRule", &bytes(3, b"pods"));
        assert_eq!(rule, json!({"verbs": null, "resources": ["pods"]}));
        let role_ref = decode("k8s.io.api.rbac.v1.RoleRef", &bytes(2, b"Role"));
        assert_eq!(
            role_ref,
            json!({"apiGroup": "", "kind": "Role", "name": ""})
        );
    }

    #[test]
    fn times_quantities_int_or_strings_and_bytes_render_as_their_json() {
        // ObjectMeta: deletionTimestamp (*Time) at 2021-01-01T00:00:00Z; creationTimestamp
        // (omitzero) sent empty; a label.
        let time = varint(1, 1_609_459_200);
        let label = [bytes(1, b"a"), bytes(2, b"b")].concat();
        let wire = [bytes(8, &[]), bytes(9, &time), bytes(11, &label)].concat();
        let meta = decode("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", &wire);
        assert_eq!(
            meta,
            json!({"deletionTimestamp": "2021-01-01T00:00:00Z", "labels": {"a": "b"}})
        );

        // LeaseSpec.renewTime is a MicroTime.
        let micro = [varint(1, 1_609_459_200), varint(2, 123_456_000)].concat();
        let lease = decode("k8s.io.api.coordination.v1.LeaseSpec", &bytes(4, &micro));
        assert_eq!(lease["renewTime"], "2021-01-01T00:00:00.123456Z");

        // ServicePort.targetPort: a string IntOrString; port 80.
        let target = [varint(1, 1), bytes(3, b"http")].concat();
        let port = decode(
            "k8s.io.api.core.v1.ServicePort",
            &[varint(3, 80), bytes(4, &target)].concat(),
        );
        assert_eq!(port, json!({"port": 80, "targetPort": "http"}));

        // ResourceRequirements.limits: map<string, Quantity>.
        let quantity = bytes(1, b"500m");
        let entry = [bytes(1, b"cpu"), bytes(2, &quantity)].concat();
        let resources = decode("k8s.io.api.core.v1.ResourceRequirements", &bytes(1, &entry));
        assert_eq!(resources["limits"], json!({"cpu": "500m"}));

        // Secret.data: map<string, bytes>, base64; an entry without a value is "".
        let entries = [
            bytes(2, &[bytes(1, b"k"), bytes(2, &[0xff, 0])].concat()),
            bytes(2, &bytes(1, b"empty")),
        ]
        .concat();
        let secret = decode("k8s.io.api.core.v1.Secret", &entries);
        assert_eq!(secret["data"], json!({"k": "/wA=", "empty": ""}));
    }

    #[test]
    fn inline_structs_merge_into_their_parent_and_unknown_fields_are_skipped() {
        // Volume {name = 1, volumeSource = 2 (inline) {emptyDir = 2 {}}}, plus a field 99.
        let source = bytes(2, &[]);
        let wire = [bytes(1, b"scratch"), bytes(2, &source), varint(99, 1)].concat();
        let volume = decode("k8s.io.api.core.v1.Volume", &wire);
        assert_eq!(volume, json!({"name": "scratch", "emptyDir": {}}));
    }

    #[test]
    fn packed_and_unpacked_repeated_scalars_are_both_read() {
        // PodSecurityContext.supplementalGroups (repeated int64, field 4).
        let packed = bytes(4, &[1, 2, 3]);
        let unpacked = [varint(4, 4), varint(4, 5)].concat();
        let ctx = decode(
            "k8s.io.api.core.v1.PodSecurityContext",
            &[packed, unpacked].concat(),
        );
        assert_eq!(ctx["supplementalGroups"], json!([1, 2, 3, 4, 5]));
    }

    #[test]
    fn a_wrong_wire_type_is_an_error() {
        let wire = bytes(1, b"not a varint");
        let err = message(
            super::super::message("k8s.io.api.apps.v1.DeploymentSpec").unwrap(),
            &wire,
        )
        .unwrap_err();
        assert!(err.contains("replicas"), "{err}");
    }
}
