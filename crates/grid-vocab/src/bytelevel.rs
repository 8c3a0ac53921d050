//! GPT-2's byte ↔ unicode table.
//!
//! Byte-level BPE vocabularies (`vocab.json`, `tokenizer.json`) do not store raw bytes:
//! each byte is written as one printable unicode character. Printable Latin-1 bytes
//! (`!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`) stand for themselves; the remaining 68 bytes are
//! mapped, in increasing byte order, to U+0100, U+0101, … (so a space is `Ġ` U+0120 and a
//! newline `Ċ` U+010A).

/// Forward table: byte → its unicode stand-in.
pub(crate) fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        let code = if printable {
            u32::from(b)
        } else {
            next += 1;
            255 + next
        };
        // All codes are below U+0200, hence valid scalar values.
        table[usize::from(b)] = char::from_u32(code).unwrap_or('\u{FFFD}');
    }
    table
}

/// Inverse table: unicode stand-in → byte, for the 256 stand-ins.
pub(crate) struct CharToByte {
    /// Indexed by code point; stand-ins are all below U+0200.
    table: [i16; 0x200],
}

impl CharToByte {
    pub(crate) fn new() -> Self {
        let mut table = [-1i16; 0x200];
        for (b, c) in byte_to_char().iter().enumerate() {
            table[*c as usize] = b as i16;
        }
        CharToByte { table }
    }

    /// The byte a stand-in character denotes, if it is one.
    pub(crate) fn get(&self, c: char) -> Option<u8> {
        let i = c as usize;
        if i < self.table.len() && self.table[i] >= 0 {
            Some(self.table[i] as u8)
        } else {
            None
        }
    }

    /// Decodes a byte-level token string. Characters that are not stand-ins (which a
    /// well-formed byte-level vocabulary does not contain) contribute their UTF-8 bytes.
    pub(crate) fn decode(&self, s: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(s.len());
        for c in s.chars() {
            match self.get(c) {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_bijection_with_known_points() {
        let fwd = byte_to_char();
        assert_eq!(fwd[b' ' as usize], 'Ġ');
        assert_eq!(fwd[b'\n' as usize], 'Ċ');
        assert_eq!(fwd[b'A' as usize], 'A');
        assert_eq!(fwd[0], '\u{100}');
        let inv = CharToByte::new();
        for b in 0..=255u8 {
            assert_eq!(inv.get(fwd[b as usize]), Some(b));
        }
        let mut seen: Vec<char> = fwd.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(inv.decode("ĠhelloĊ"), b" hello\n");
        assert_eq!(inv.decode("☃"), "☃".as_bytes());
    }
}
