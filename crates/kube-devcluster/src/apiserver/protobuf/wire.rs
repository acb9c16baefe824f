//! The protobuf wire format: a message is a sequence of (field number, wire type, value); this
//! reads it without knowing what the fields mean (<https://protobuf.dev/programming-guides/encoding/>).

/// One field value as it is on the wire.
#[derive(Clone, Copy, Debug)]
pub(super) enum WireValue<'a> {
    Varint(u64),
    /// A `fixed64`/`double` (read past: no stored kind has one).
    Fixed64,
    /// Length-delimited: a string, bytes, a message, a map entry or a packed repeated scalar.
    Bytes(&'a [u8]),
    /// A `fixed32`/`float` (read past, likewise).
    Fixed32,
}

pub(super) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&byte, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err("truncated field".into());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field, or None at the end of the message.
    pub fn field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| "field number out of range")?;
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                WireValue::Fixed64
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                WireValue::Fixed32
            }
            // Groups (3, 4) are deprecated proto2 and never used by Kubernetes.
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((number, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_varints_strings_and_fixed_values() {
        // 1: varint 300, 2: "hi", 3: fixed64 7, 4: fixed32 9
        let bytes = [
            0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x19, 7, 0, 0, 0, 0, 0, 0, 0, 0x25, 9, 0, 0, 0,
        ];
        let mut reader = Reader::new(&bytes);
        assert!(matches!(
            reader.field(),
            Ok(Some((1, WireValue::Varint(300))))
        ));
        assert!(matches!(
            reader.field(),
            Ok(Some((2, WireValue::Bytes(b"hi"))))
        ));
        assert!(matches!(reader.field(), Ok(Some((3, WireValue::Fixed64)))));
        assert!(matches!(reader.field(), Ok(Some((4, WireValue::Fixed32)))));
        assert!(matches!(reader.field(), Ok(None)));
        assert!(Reader::new(&[0x12, 5, b'a']).field().is_err());
    }
}
