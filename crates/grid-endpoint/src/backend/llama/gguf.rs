//! The token types a GGUF file declares (`tokenizer.ggml.token_type`), read from its
//! metadata without llama.cpp.
//!
//! llama.cpp adjusts token attributes when it loads a model (it marks texts such as
//! `</s>` or `<|endoftext|>` as control tokens wherever they occur, since it treats
//! them as end of generation), so its view is not the tokenizer's. The served
//! vocabulary follows the file, which is the tokenizer the model was converted from.
//!
//! Format (GGUF v2 and v3, little-endian): `"GGUF"`, version `u32`, tensor count `u64`,
//! metadata count `u64`, then per entry a key (`u64` length + UTF-8), a value type
//! `u32` and the value; strings are `u64` length + bytes, arrays an element type `u32`,
//! a count `u64` and the elements.

use std::io::{self, BufReader, Read};
use std::path::Path;

/// The key of the token-type array.
pub const TOKEN_TYPE_KEY: &str = "tokenizer.ggml.token_type";

/// Token types as GGUF stores them (llama.cpp's `llama_token_type`).
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Largest element count or string length accepted (a corrupt file must not make the
/// reader allocate without bound).
const LIMIT: u64 = 1 << 28;

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

struct Reader<R> {
    r: R,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        Ok(b)
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn len(&mut self) -> io::Result<u64> {
        let n = self.u64()?;
        if n > LIMIT {
            return Err(bad(format!("length {n} is implausible")));
        }
        Ok(n)
    }

    fn string(&mut self) -> io::Result<String> {
        let n = self.len()?;
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b)?;
        String::from_utf8(b).map_err(|_| bad("a key is not UTF-8"))
    }

    fn skip(&mut self, n: u64) -> io::Result<()> {
        let got = io::copy(&mut (&mut self.r).take(n), &mut io::sink())?;
        if got != n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// Skips one value of type `ty`.
    fn skip_value(&mut self, ty: u32) -> io::Result<()> {
        match ty {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let n = self.len()?;
                self.skip(n)
            }
            9 => {
                let elem = self.u32()?;
                let n = self.len()?;
                match fixed_size(elem) {
                    Some(size) => self.skip(n * size),
                    None => (0..n).try_for_each(|_| self.skip_value(elem)),
                }
            }
            _ => Err(bad(format!("unknown value type {ty}"))),
        }
    }
}

/// Byte size of a fixed-size value type.
fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// The `tokenizer.ggml.token_type` array of a GGUF stream, `None` when it has none.
pub fn read_token_types(r: impl Read) -> io::Result<Option<Vec<i32>>> {
    let mut r = Reader { r };
    if &r.bytes::<4>()? != b"GGUF" {
        return Err(bad("not a GGUF file"));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(bad(format!("GGUF version {version} is not supported")));
    }
    let _tensors = r.u64()?;
    let entries = r.len()?;
    for _ in 0..entries {
        let key = r.string()?;
        let ty = r.u32()?;
        if key != TOKEN_TYPE_KEY {
            r.skip_value(ty)?;
            continue;
        }
        if ty != 9 {
            return Err(bad(format!("{TOKEN_TYPE_KEY} is not an array")));
        }
        let elem = r.u32()?;
        if elem != 5 && elem != 4 {
            return Err(bad(format!("{TOKEN_TYPE_KEY} holds type {elem}, not i32")));
        }
        let n = r.len()?;
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(i32::from_le_bytes(r.bytes()?));
        }
        return Ok(Some(out));
    }
    Ok(None)
}

/// [`read_token_types`] of the file at `path`.
pub fn token_types(path: &Path) -> io::Result<Option<Vec<i32>>> {
    read_token_types(BufReader::new(std::fs::File::open(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }

    /// A GGUF v3 header with a few entries of every shape, then the token types.
    fn sample(types: &[i32]) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(5u64.to_le_bytes());
        string(&mut b, "general.name");
        b.extend(8u32.to_le_bytes());
        string(&mut b, "Qwen");
        string(&mut b, "qwen2.context_length");
        b.extend(4u32.to_le_bytes());
        b.extend(32768u32.to_le_bytes());
        string(&mut b, "tokenizer.ggml.tokens");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        string(&mut b, "a");
        string(&mut b, "</s>");
        string(&mut b, "tokenizer.ggml.scores");
        b.extend(9u32.to_le_bytes());
        b.extend(6u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend([0u8; 8]);
        string(&mut b, TOKEN_TYPE_KEY);
        b.extend(9u32.to_le_bytes());
        b.extend(5u32.to_le_bytes());
        b.extend((types.len() as u64).to_le_bytes());
        for t in types {
            b.extend(t.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_the_token_types_past_other_entries() {
        let types = [token_type::NORMAL, token_type::CONTROL, token_type::UNUSED];
        let got = read_token_types(&sample(&types)[..]).unwrap();
        assert_eq!(got.as_deref(), Some(&types[..]));
    }

    #[test]
    fn a_file_without_types_or_not_gguf_or_cut_short() {
        let mut b = sample(&[1]);
        // Rename the key: the array is then skipped and nothing is found.
        let at = b
            .windows(TOKEN_TYPE_KEY.len())
            .position(|w| w == TOKEN_TYPE_KEY.as_bytes())
            .unwrap();
        b[at] = b'X';
        assert_eq!(read_token_types(&b[..]).unwrap(), None);
        assert!(read_token_types(&b"GGML...."[..]).is_err());
        let whole = sample(&[1, 1, 1]);
        assert!(read_token_types(&whole[..whole.len() - 2]).is_err());
        // An implausible length is refused before allocating.
        let mut huge = b"GGUF".to_vec();
        huge.extend(3u32.to_le_bytes());
        huge.extend(0u64.to_le_bytes());
        huge.extend(u64::MAX.to_le_bytes());
        assert!(read_token_types(&huge[..]).is_err());
    }
}
