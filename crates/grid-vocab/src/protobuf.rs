//! A minimal protobuf wire-format reader (enough for SentencePiece's `ModelProto`).
//!
//! It walks the fields of one message: each field is a number plus a value of one of the
//! four wire types still in use. Nested messages are read by walking their bytes again.
//! Groups (wire types 3 and 4) and truncated input are errors, never panics.

/// One field value as found on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WireValue<'a> {
    /// Wire type 0: a varint (ints, bools, enums).
    Varint(u64),
    /// Wire type 1: 8 little-endian bytes (double, fixed64).
    Fixed64(u64),
    /// Wire type 2: length-delimited bytes (strings, bytes, nested messages, packed fields).
    Bytes(&'a [u8]),
    /// Wire type 5: 4 little-endian bytes (float, fixed32).
    Fixed32(u32),
}

/// Iterator over the `(field number, value)` pairs of one message.
pub(crate) struct FieldReader<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> FieldReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        FieldReader {
            buf,
            pos: 0,
            failed: false,
        }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(format!("truncated varint at byte {}", self.pos));
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("field of {n} bytes at byte {} runs past the end", self.pos))?;
        let slice = &self.buf[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn field(&mut self) -> Result<(u32, WireValue<'a>), String> {
        let key = self.varint()?;
        let number =
            u32::try_from(key >> 3).map_err(|_| format!("field number {} too large", key >> 3))?;
        if number == 0 {
            return Err(format!("field number 0 at byte {}", self.pos));
        }
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                WireValue::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| format!("length {len} too large"))?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                WireValue::Fixed32(u32::from_le_bytes(a))
            }
            t => return Err(format!("unsupported wire type {t} for field {number}")),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for FieldReader<'a> {
    type Item = Result<(u32, WireValue<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.field();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_all_wire_types_and_rejects_truncation() {
        // field 1 varint 150, field 2 bytes "hi", field 3 fixed32 1.0f, field 4 fixed64 7
        let mut buf = vec![0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d];
        buf.extend_from_slice(&1.0f32.to_le_bytes());
        buf.push(0x21);
        buf.extend_from_slice(&7u64.to_le_bytes());
        let fields: Vec<_> = FieldReader::new(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            vec![
                (1, WireValue::Varint(150)),
                (2, WireValue::Bytes(b"hi")),
                (3, WireValue::Fixed32(1.0f32.to_bits())),
                (4, WireValue::Fixed64(7)),
            ]
        );
        for cut in 1..buf.len() {
            let r: Result<Vec<_>, _> = FieldReader::new(&buf[..cut]).collect();
            // Cutting at a field boundary yields a valid shorter message; elsewhere an error.
            if ![3, 7, 12].contains(&cut) {
                assert!(r.is_err(), "cut at {cut} should fail");
            }
        }
        assert!(FieldReader::new(&[0x0b]).next().unwrap().is_err()); // group start
        assert!(FieldReader::new(&[0xff; 12]).next().unwrap().is_err()); // endless varint
    }
}
